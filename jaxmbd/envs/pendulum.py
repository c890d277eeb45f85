"""dm_control's pendulum (``dm_control/suite/pendulum.py``): ``swingup``. The file's step
(``pendulum.xml``: h = 0.02 s, MuJoCo's Euler, the environment's default), one step per
control step, 1000 steps (20 s)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel
from .rewards import tolerance

COSINE_BOUND = math.cos(math.radians(8))  # _COSINE_BOUND: within 8 degrees of upright


def _observation(physics: Physics, info):
    """``SwingUp.get_observation``: orientation = the pole's xmat (zz, xz), velocity."""
    R = physics.xmat[physics.body("pole")]
    return jnp.concatenate([jnp.stack([R[2, 2], R[0, 2]]), physics.qvel])


def _reward(physics: Physics, info):
    """``SwingUp.get_reward``: tolerance(the pole's zz, (cos 8 deg, 1))."""
    return tolerance(physics.xmat[physics.body("pole"), 2, 2], (COSINE_BOUND, 1))


def _initial_state(model, rng):
    """``SwingUp.initialize_episode``: the hinge uniform in [-pi, pi), at rest."""
    q = jax.random.uniform(rng, (1,), minval=-jnp.pi, maxval=jnp.pi)
    return q, jnp.zeros(model.tree.nv), {}


def swingup(*, integrator=None, n_substeps: int = 1, **options) -> ModelEnv:
    """Pendulum swing-up. ``integrator`` None: the file's (MuJoCo's semi-implicit Euler,
    ``"euler"``); ``"rk"`` is the accurate choice."""
    suite = SuiteModel("pendulum")
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=_observation, reward=_reward, initial_state=_initial_state,
                    episode_length=1000, **options)  # fmt: skip
