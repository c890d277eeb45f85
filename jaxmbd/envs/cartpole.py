"""dm_control's cart-pole (``dm_control/suite/cartpole.py``, one pole): ``balance`` and
``swingup``, smooth rewards. The file's own step (``cartpole.xml``: RK4, h = 0.01 s;
``integrator`` None), one step per control step, 1000 steps (10 s), on MuJoCo's constraint
model (the slider's limits)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel
from .rewards import tolerance

EPISODE_LENGTH = 1000  # _DEFAULT_TIME_LIMIT = 10 s at the control step 0.01 s


def _observation(physics: Physics, info) -> jax.Array:
    """``Balance.get_observation``: position = (cart x, the pole's xmat zz and xz),
    velocity = qvel (``Physics.bounded_position``, ``Physics.velocity``)."""
    R = physics.xmat[physics.body("pole_1")]
    return jnp.concatenate([physics.qpos[:1], jnp.stack([R[2, 2], R[0, 2]]), physics.qvel])


def _reward(physics: Physics, info) -> jax.Array:
    """``Balance._get_reward`` with ``sparse=False``."""
    upright = (physics.xmat[physics.body("pole_1"), 2, 2] + 1) / 2
    centered = (1 + tolerance(physics.qpos[0], margin=2)) / 2
    small_control = tolerance(physics.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic")[0]
    small_control = (4 + small_control) / 5
    small_velocity = (1 + jnp.min(tolerance(physics.qvel[1:], margin=5))) / 2
    return upright * small_control * small_velocity * centered


def _balance_start(model, rng):
    """``Balance.initialize_episode`` with ``swing_up=False``: the cart at U(-0.1, 0.1),
    the pole at U(-0.034, 0.034), qvel ~ 0.01 N(0, 1)."""
    k1, k2, k3 = jax.random.split(rng, 3)
    slider = jax.random.uniform(k1, (), minval=-0.1, maxval=0.1)
    hinge = jax.random.uniform(k2, (), minval=-0.034, maxval=0.034)
    qvel = 0.01 * jax.random.normal(k3, (model.tree.nv,))
    return jnp.stack([slider, hinge]), qvel, {}


def _swingup_start(model, rng):
    """``Balance.initialize_episode`` with ``swing_up=True``: the cart at 0.01 N(0, 1),
    the pole hanging, pi + 0.01 N(0, 1), qvel ~ 0.01 N(0, 1)."""
    k1, k2 = jax.random.split(rng)
    q = 0.01 * jax.random.normal(k1, (2,)) + jnp.array([0.0, jnp.pi])
    qvel = 0.01 * jax.random.normal(k2, (model.tree.nv,))
    return q, qvel, {}


def _env(start, integrator, n_substeps, options) -> ModelEnv:
    suite = SuiteModel("cartpole")
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=_observation, reward=_reward, initial_state=start,
                    episode_length=EPISODE_LENGTH, **options)  # fmt: skip


def balance(*, integrator=None, n_substeps: int = 1, **options) -> ModelEnv:
    """Cart-pole balance: the pole starts near upright."""
    return _env(_balance_start, integrator, n_substeps, options)


def swingup(*, integrator=None, n_substeps: int = 1, **options) -> ModelEnv:
    """Cart-pole swing-up: the pole starts hanging down."""
    return _env(_swingup_start, integrator, n_substeps, options)
