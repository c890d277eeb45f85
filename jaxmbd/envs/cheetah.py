"""dm_control's half-cheetah (``dm_control/suite/cheetah.py``): ``run``. The file's step
(``cheetah.xml``: h = 0.01 s, MuJoCo's Euler), one per control step, 1000 control steps
(10 s), on MuJoCo's constraint model (:class:`~jaxmbd.envs.ModelEnv`'s default for a
file). ``torso_subtreelinvel`` is computed from the state
(:meth:`Physics.subtree_com_velocity`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..joint_space import JointState, advance
from ._model_env import ModelEnv, Physics, treatments
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

RUN_SPEED = 10.0  # _RUN_SPEED
#: ``Cheetah.initialize_episode``: ``physics.step(nstep=200)`` after the draw, uncontrolled
SETTLE_STEPS = 200
#: With jaxmbd's compliant contact (``contact="compliant"``), stiffer than MuJoCo's soft
#: one, the links that the drawn joint angles put inside one another (the back foot up to
#: 9 cm inside the thigh) launch the robot at the file's 10 ms; that reset raises the pose
#: out of the floor and settles ``COMPLIANT_SETTLE_STEPS`` steps of ``COMPLIANT_SETTLE_H``
#: (0.1 s: the links pushed apart), leaving the fall to the episode's first steps.
COMPLIANT_SETTLE_H = 0.0025
COMPLIANT_SETTLE_STEPS = 40


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
        settle_steps: int = SETTLE_STEPS,
        compliant_settle_steps: int = COMPLIANT_SETTLE_STEPS, **options) -> ModelEnv:  # fmt: skip
    """Cheetah run (``Cheetah.initialize_episode``): the limited joints uniform in their
    ranges (the root's slides and hinge at 0), then ``settle_steps`` uncontrolled steps of
    the environment's own step, the clock set back to 0. ``h``: the time step (None: the
    file's 0.01 s, one per control step); ``integrator`` None: the file's. With
    ``contact="compliant"`` the reset settles ``compliant_settle_steps`` instead
    (:data:`COMPLIANT_SETTLE_STEPS`)."""
    suite = SuiteModel("cheetah")
    sample = joint_sampler(suite)
    root_z = int(suite.mj.jnt_qposadr[suite.id("joint", "rootz")])
    limited = jnp.asarray(suite.mj.jnt_limited.astype(bool))
    h = suite.timestep if h is None else float(h)
    contact, _, _ = treatments(suite.model, options.get("contact"), options.get("limits"), None)
    compliant = contact == "compliant"
    if compliant and integrator is None:
        integrator = "implicitfast"

    def initial_state(model, rng):
        # only the limited joints (the root's slides and hinge stay at 0)
        qpos = jnp.where(limited, sample(rng, jnp.zeros(model.tree.nq)), 0.0)
        if compliant:
            qpos = lifted_to_floor(model, qpos, root_z)
            state = JointState(qpos, jnp.zeros(model.tree.nv), jnp.zeros(()))
            if compliant_settle_steps:
                state = advance(model, state, jnp.zeros(model.nu), h=COMPLIANT_SETTLE_H,
                                n_steps=compliant_settle_steps, integrator=integrator)  # fmt: skip
            return state.qpos, state.qvel, {}
        return qpos, jnp.zeros(model.tree.nv), {}

    return ModelEnv(suite.model, h=h, n_substeps=n_substeps, integrator=integrator,
                    observation=_observation, reward=_reward, initial_state=initial_state,
                    settle_steps=0 if compliant else settle_steps, episode_length=1000,
                    **options)  # fmt: skip
