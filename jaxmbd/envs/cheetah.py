"""dm_control's half-cheetah (``dm_control/suite/cheetah.py``): ``run``. dm_control's
control step (``cheetah.xml``'s h = 0.01 s) as four implicit steps of 2.5 ms (see
:data:`TIME_STEP`), 1000 control steps (10 s). ``torso_subtreelinvel`` is computed from
the state (:meth:`Physics.subtree_com_velocity`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..joint_space import JointState, advance
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

RUN_SPEED = 10.0  # _RUN_SPEED
#: The time step: a quarter of the file's 0.01 s. Measured (8 episodes, implicit step):
#: at 0.01 s five of eight resets diverge while the drawn pose falls onto the floor; at
#: 0.0025 s all settle and stay finite over 300 random control steps.
TIME_STEP = 0.0025
SETTLE_STEPS = 200  # Cheetah.initialize_episode: physics.step(nstep=200)


def _observation(physics: Physics, info):
    """``Cheetah.get_observation``: position = qpos[1:], velocity = qvel."""
    return jnp.concatenate([physics.qpos[1:], physics.qvel])


def _reward(physics: Physics, info):
    """``Cheetah.get_reward``: tolerance(torso subtree x velocity, (10, inf), margin 10,
    linear, 0 at the margin)."""
    speed = physics.subtree_com_velocity(physics.body("torso"))[0]
    return tolerance(speed, bounds=(RUN_SPEED, float("inf")), margin=RUN_SPEED,
                     value_at_margin=0, sigmoid="linear")  # fmt: skip


def run(*, integrator=None, n_substeps: int | None = None, h: float | None = None,
        settle_steps: int = SETTLE_STEPS, **options) -> ModelEnv:  # fmt: skip
    """Cheetah run: the limited joints uniform in their ranges, raised out of the floor
    (:func:`~jaxmbd.envs._suite.lifted_to_floor`), then ``settle_steps`` uncontrolled time
    steps (it falls onto the floor), the clock set back to 0
    (``Cheetah.initialize_episode``). ``h``: the time step (None: :data:`TIME_STEP`,
    a quarter of the file's); ``n_substeps`` defaults to keep dm_control's control step,
    the file's 0.01 s."""
    suite = SuiteModel("cheetah")
    sample = joint_sampler(suite)
    root_z = int(suite.mj.jnt_qposadr[suite.id("joint", "rootz")])
    limited = suite.mj.jnt_limited.astype(bool)
    file_h = suite.timestep
    h = TIME_STEP if h is None else float(h)
    if n_substeps is None:
        n_substeps = max(round(file_h / h), 1)  # dm_control's control step: the file's h
    settle_steps = round(settle_steps * file_h / h)  # the same settling time
    if integrator is None:
        integrator = "implicit" if options.get("contact", "compliant") != "none" else "rk"

    def initial_state(model, rng):
        # only the limited joints (cheetah's root slides and hinge stay at 0)
        drawn = sample(rng, jnp.zeros(model.tree.nq))
        qpos = lifted_to_floor(model, jnp.where(jnp.asarray(limited), drawn, 0.0), root_z)
        state = JointState(qpos, jnp.zeros(model.tree.nv), jnp.zeros(()))
        if settle_steps > 0:
            state = advance(model, state, jnp.zeros(model.nu), h=h, n_steps=settle_steps,
                            integrator=integrator)  # fmt: skip
        return state.qpos, state.qvel, {}

    return ModelEnv(suite.model, h=h, n_substeps=n_substeps, integrator=integrator,
                    observation=_observation, reward=_reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip
