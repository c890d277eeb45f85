"""dm_control's planar walker (``dm_control/suite/walker.py``): ``walk``. The file's time
step (``walker.xml``: h = 0.0025 s), ten per control step (``_CONTROL_TIMESTEP`` =
0.025 s), 1000 steps (25 s); with contact the linearly implicit step
(``"implicitfast"``, :class:`~jaxmbd.envs.ModelEnv`'s default).
``torso_subtreelinvel`` is computed from the state (:meth:`Physics.subtree_com_velocity`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

STAND_HEIGHT = 1.2  # _STAND_HEIGHT
WALK_SPEED = 1.0  # _WALK_SPEED
CONTROL_TIMESTEP = 0.025


def walk(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Walker walk: ``randomize_limited_and_rotational_joints``, at rest
    (``PlanarWalker.initialize_episode``); the reward ``PlanarWalker.get_reward`` with
    ``move_speed = 1``."""
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
        speed = physics.subtree_com_velocity(torso)[0]
        move_reward = tolerance(speed, bounds=(WALK_SPEED, float("inf")), margin=WALK_SPEED / 2,
                                value_at_margin=0.5, sigmoid="linear")  # fmt: skip
        return stand_reward * (5 * move_reward + 1) / 6

    def initial_state(model, rng):
        """Raised out of the floor (:func:`~jaxmbd.envs._suite.lifted_to_floor`)."""
        qpos = lifted_to_floor(model, sample(rng, jnp.zeros(model.tree.nq)), root_z)
        return qpos, jnp.zeros(model.tree.nv), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip
