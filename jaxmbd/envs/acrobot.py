"""dm_control's acrobot (``dm_control/suite/acrobot.py``): ``swingup``, the smooth reward.
The file's own step (``acrobot.xml``: RK4, h = 0.01 s; ``integrator`` None), one step per
control step, 1000 steps (10 s)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel
from .rewards import tolerance


def swingup(*, integrator=None, n_substeps: int = 1, **options) -> ModelEnv:
    """Acrobot swing-up: both joints start uniform in [-pi, pi) (``Balance.initialize_episode``),
    at rest."""
    suite = SuiteModel("acrobot")
    tip, target = suite.frame("site", "tip"), suite.frame("site", "target")
    target_radius = float(suite.mj.site_size[suite.id("site", "target"), 0])

    def arms(physics: Physics):
        return [physics.xmat[physics.body(name)] for name in ("upper_arm", "lower_arm")]

    def observation(physics: Physics, info):
        """``get_observation``: orientations = the arms' xmat xz, then zz
        (``Physics.orientations``), velocity = qvel."""
        R = arms(physics)
        orientations = jnp.stack([R[0][0, 2], R[1][0, 2], R[0][2, 2], R[1][2, 2]])
        return jnp.concatenate([orientations, physics.qvel])

    def reward(physics: Physics, info):
        """``_get_reward`` with ``sparse=False``: tolerance(|target - tip|, (0, r), 1)."""
        d = physics.point(target[0], target[1]) - physics.point(tip[0], tip[1])
        return tolerance(jnp.linalg.norm(d), bounds=(0, target_radius), margin=1)

    def initial_state(model, rng):
        q = jax.random.uniform(rng, (2,), minval=-jnp.pi, maxval=jnp.pi)
        return q, jnp.zeros(model.tree.nv), {}

    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip
