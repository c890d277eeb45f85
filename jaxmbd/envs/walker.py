"""dm_control's planar walker (``dm_control/suite/walker.py``): ``stand``, ``walk`` and
``run``. The file's time step (``walker.xml``: h = 0.0025 s, MuJoCo's Euler), ten per
control step (``_CONTROL_TIMESTEP`` = 0.025 s), 1000 steps (25 s), on MuJoCo's constraint
model (:class:`~jaxmbd.envs.ModelEnv`'s default for a file). ``torso_subtreelinvel`` is
computed from the state (:meth:`Physics.subtree_com_velocity`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

STAND_HEIGHT = 1.2  # _STAND_HEIGHT
WALK_SPEED = 1.0  # _WALK_SPEED
RUN_SPEED = 8.0  # _RUN_SPEED
CONTROL_TIMESTEP = 0.025


def _walker(move_speed: float, integrator, n_substeps, options) -> ModelEnv:
    """``PlanarWalker(move_speed)``: ``randomize_limited_and_rotational_joints``, at rest
    (``PlanarWalker.initialize_episode``); the reward ``PlanarWalker.get_reward``."""
    suite = SuiteModel("walker")
    sample = joint_sampler(suite)
    root_z = int(suite.mj.jnt_qposadr[suite.id("joint", "rootz")])
    # xmat[1:] of dm_control: every MuJoCo body but the world, each a tree body here
    names = [suite.mj.body(i).name for i in range(1, suite.mj.nbody)]

    def observation(physics: Physics, info):
        """orientations = each body's xmat (xx, xz), height = the torso's z, velocity."""
        R = physics.xmat[jnp.asarray([physics.body(n) for n in names])]
        orientations = jnp.stack([R[:, 0, 0], R[:, 0, 2]], axis=-1).reshape(-1)
        height = physics.xpos[physics.body("torso"), 2:3]
        return jnp.concatenate([orientations, height, physics.qvel])

    def reward(physics: Physics, info):
        torso = physics.body("torso")
        standing = tolerance(physics.xpos[torso, 2], bounds=(STAND_HEIGHT, float("inf")),
                             margin=STAND_HEIGHT / 2)  # fmt: skip
        upright = (1 + physics.xmat[torso, 2, 2]) / 2
        stand_reward = (3 * standing + upright) / 4
        if move_speed == 0:
            return stand_reward
        speed = physics.subtree_com_velocity(torso)[0]
        move_reward = tolerance(speed, bounds=(move_speed, float("inf")), margin=move_speed / 2,
                                value_at_margin=0.5, sigmoid="linear")  # fmt: skip
        return stand_reward * (5 * move_reward + 1) / 6

    def initial_state(model, rng):
        """As drawn (with ``contact="compliant"`` raised out of the floor,
        :func:`~jaxmbd.envs._suite.lifted_to_floor`)."""
        qpos = lifted_to_floor(model, sample(rng, jnp.zeros(model.tree.nq)), root_z)
        return qpos, jnp.zeros(model.tree.nv), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip


def stand(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Walker stand: ``PlanarWalker(move_speed=0)``, the torso high and upright."""
    return _walker(0.0, integrator, n_substeps, options)


def walk(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Walker walk: ``PlanarWalker(move_speed=1)``."""
    return _walker(WALK_SPEED, integrator, n_substeps, options)


def run(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Walker run: ``PlanarWalker(move_speed=8)``."""
    return _walker(RUN_SPEED, integrator, n_substeps, options)
