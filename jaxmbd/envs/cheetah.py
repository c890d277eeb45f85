"""dm_control's half-cheetah (``dm_control/suite/cheetah.py``): ``run``. The file's step
(``cheetah.xml``: h = 0.01 s), one per control step, with ``"implicitfast"``, 1000
control steps (10 s). ``torso_subtreelinvel`` is computed from
the state (:meth:`Physics.subtree_com_velocity`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..joint_space import JointState, advance
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

RUN_SPEED = 10.0  # _RUN_SPEED
#: The settling after the draw: dm_control's ``Cheetah.initialize_episode`` settles 200 file
#: steps (2 s), where MuJoCo's soft contact slowly pushes apart the links that the drawn
#: joint angles put inside one another (the back foot up to 9 cm inside the thigh or the
#: torso). jaxmbd's compliant contact is stiffer: at the file's 10 ms such a member's first
#: step diverges. So the reset takes ``SETTLE_STEPS`` steps of ``SETTLE_H`` (0.1 s: the
#: links pushed apart) and leaves the rest of the settling (the fall onto the floor) to the
#: episode's first steps.
SETTLE_H = 0.0025
SETTLE_STEPS = 40


def _observation(physics: Physics, info):
    """``Cheetah.get_observation``: position = qpos[1:], velocity = qvel."""
    return jnp.concatenate([physics.qpos[1:], physics.qvel])


def _reward(physics: Physics, info):
    """``Cheetah.get_reward``: tolerance(torso subtree x velocity, (10, inf), margin 10,
    linear, 0 at the margin)."""
    speed = physics.subtree_com_velocity(physics.body("torso"))[0]
    return tolerance(speed, bounds=(RUN_SPEED, float("inf")), margin=RUN_SPEED,
                     value_at_margin=0, sigmoid="linear")  # fmt: skip


def run(*, integrator=None, n_substeps: int = 1, h: float | None = None,
        settle_steps: int = SETTLE_STEPS, settle_h: float = SETTLE_H,
        **options) -> ModelEnv:  # fmt: skip
    """Cheetah run: the limited joints uniform in their ranges, raised out of the floor
    (:func:`~jaxmbd.envs._suite.lifted_to_floor`), then ``settle_steps`` uncontrolled steps
    of ``settle_h`` (:data:`SETTLE_STEPS`), the clock set back to 0
    (``Cheetah.initialize_episode``). ``h``: the time step (None: the file's 0.01 s, one
    per control step); ``integrator``: ``"implicitfast"`` (``"rk"`` without contact)."""
    suite = SuiteModel("cheetah")
    sample = joint_sampler(suite)
    root_z = int(suite.mj.jnt_qposadr[suite.id("joint", "rootz")])
    limited = suite.mj.jnt_limited.astype(bool)
    h = suite.timestep if h is None else float(h)
    if integrator is None:
        integrator = "implicitfast" if options.get("contact", "compliant") != "none" else "rk"

    def initial_state(model, rng):
        # only the limited joints (cheetah's root slides and hinge stay at 0)
        drawn = sample(rng, jnp.zeros(model.tree.nq))
        qpos = lifted_to_floor(model, jnp.where(jnp.asarray(limited), drawn, 0.0), root_z)
        state = JointState(qpos, jnp.zeros(model.tree.nv), jnp.zeros(()))
        if settle_steps > 0:
            state = advance(model, state, jnp.zeros(model.nu), h=settle_h, n_steps=settle_steps,
                            integrator=integrator)  # fmt: skip
        return state.qpos, state.qvel, {}

    return ModelEnv(suite.model, h=h, n_substeps=n_substeps, integrator=integrator,
                    observation=_observation, reward=_reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip
