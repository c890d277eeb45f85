"""dm_control's humanoid (``dm_control/suite/humanoid.py``): ``stand``, ``walk`` and
``run``, the egocentric observations (``pure_state=False``). The file's time step
(``humanoid.xml``: h = 0.005 s, MuJoCo's Euler), five per control step
(``_CONTROL_TIMESTEP`` = 0.025 s), 1000 steps (25 s), on MuJoCo's constraint model
(:class:`~jaxmbd.envs.ModelEnv`'s default for a file). ``torso_subtreelinvel`` is computed
from the state (:meth:`Physics.subtree_com_velocity`); the head and the hands, bodies
without joints, are placed on the tree bodies that carry them
(:meth:`~jaxmbd.envs._suite.SuiteModel.frame`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, collision_free, joint_sampler
from .rewards import tolerance

STAND_HEIGHT = 1.4  # _STAND_HEIGHT
WALK_SPEED = 1.0  # _WALK_SPEED
RUN_SPEED = 10.0  # _RUN_SPEED
CONTROL_TIMESTEP = 0.025  # _CONTROL_TIMESTEP
EPISODE_LENGTH = 1000  # _DEFAULT_TIME_LIMIT = 25 s at the control step
#: ``Physics.extremities``' order
EXTREMITIES = ("left_hand", "left_foot", "right_hand", "right_foot")


def _humanoid(move_speed: float, integrator, n_substeps, options) -> ModelEnv:
    suite = SuiteModel("humanoid")
    sample = joint_sampler(suite)
    head = suite.frame("body", "head")
    limbs = [suite.frame("body", name) for name in EXTREMITIES]

    def at(physics: Physics, frame):
        return physics.point(frame[0], frame[1])

    def observation(physics: Physics, info):
        """``Humanoid.get_observation``: joint_angles = qpos[7:], head_height, extremities
        (hands and feet from the torso, in the torso's frame), torso_vertical (the torso's
        xmat zx, zy, zz), com_velocity (torso_subtreelinvel), velocity = qvel."""
        torso = physics.body("torso")
        R, x = physics.xmat[torso], physics.xpos[torso]
        extremities = jnp.concatenate([(at(physics, limb) - x) @ R for limb in limbs])
        return jnp.concatenate([physics.qpos[7:], at(physics, head)[2:], extremities, R[2],
                                physics.subtree_com_velocity(torso), physics.qvel])  # fmt: skip

    def reward(physics: Physics, info):
        """``Humanoid.get_reward``: standing (head height) x upright (torso zz) x small
        control, x don't-move (stand) or the horizontal speed's tolerance."""
        torso = physics.body("torso")
        standing = tolerance(at(physics, head)[2], bounds=(STAND_HEIGHT, float("inf")),
                             margin=STAND_HEIGHT / 4)  # fmt: skip
        upright = tolerance(physics.xmat[torso, 2, 2], bounds=(0.9, float("inf")),
                            sigmoid="linear", margin=1.9, value_at_margin=0)  # fmt: skip
        stand_reward = standing * upright
        small_control = tolerance(physics.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic")
        small_control = (4 + jnp.mean(small_control)) / 5
        horizontal = physics.subtree_com_velocity(torso)[:2]
        if move_speed == 0:
            dont_move = jnp.mean(tolerance(horizontal, margin=2))
            return small_control * stand_reward * dont_move
        move = tolerance(jnp.linalg.norm(horizontal), bounds=(move_speed, float("inf")),
                         margin=move_speed, value_at_margin=0, sigmoid="linear")  # fmt: skip
        return small_control * stand_reward * (5 * move + 1) / 6

    def initial_state(model, rng):
        """``Humanoid.initialize_episode``: ``randomize_limited_and_rotational_joints``
        from the file's qpos0 until MuJoCo's collider finds no contact, at rest."""
        qpos = collision_free(sample, model, rng, model.tree.qpos_init)
        return qpos, jnp.zeros(model.tree.nv), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=EPISODE_LENGTH, **options)  # fmt: skip


def stand(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Humanoid stand: ``Humanoid(move_speed=0)``."""
    return _humanoid(0.0, integrator, n_substeps, options)


def walk(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Humanoid walk: ``Humanoid(move_speed=1)``."""
    return _humanoid(WALK_SPEED, integrator, n_substeps, options)


def run(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Humanoid run: ``Humanoid(move_speed=10)``."""
    return _humanoid(RUN_SPEED, integrator, n_substeps, options)
