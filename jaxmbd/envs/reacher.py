"""dm_control's reacher (``dm_control/suite/reacher.py``): ``easy`` (target radius 0.05).
The file's step (``reacher.xml``: h = 0.02 s, MuJoCo's Euler), one step per control step,
1000 steps (20 s). The target is a model constant in dm_control (``geom_pos``, drawn per
episode); here its (x, y) is drawn by ``reset`` into ``state.info["target"]``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler
from .rewards import tolerance

BIG_TARGET = 0.05  # _BIG_TARGET, the easy task's target radius


def easy(*, integrator=None, n_substeps: int = 1, h: float | None = None,
         **options) -> ModelEnv:  # fmt: skip
    """Reacher easy: joints drawn by ``randomize_limited_and_rotational_joints``, the
    target at radius U(0.05, 0.2) and angle U(0, 2 pi) (``Reacher.initialize_episode``).
    ``h``: the time step (None: the file's 0.02 s, one per control step; RK4 needs 0.01 s
    or less, the light arm's damping)."""
    suite = SuiteModel("reacher")
    h = suite.timestep if h is None else float(h)
    finger = suite.frame("geom", "finger")
    radii = BIG_TARGET + float(suite.mj.geom_size[suite.id("geom", "finger"), 0])
    sample = joint_sampler(suite)

    def to_target(physics: Physics, info):
        """``Physics.finger_to_target``: (target - finger)[:2]."""
        return info["target"] - physics.point(finger[0], finger[1])[:2]

    def observation(physics: Physics, info):
        """position = qpos, to_target, velocity = qvel."""
        return jnp.concatenate([physics.qpos, to_target(physics, info), physics.qvel])

    def reward(physics: Physics, info):
        """tolerance(|finger_to_target|, (0, target + finger radius))."""
        return tolerance(jnp.linalg.norm(to_target(physics, info)), (0, radii))

    def initial_state(model, rng):
        k_joints, k_angle, k_radius = jax.random.split(rng, 3)
        qpos = sample(k_joints, jnp.zeros(model.tree.nq))
        angle = jax.random.uniform(k_angle, (), minval=0.0, maxval=2 * jnp.pi)
        radius = jax.random.uniform(k_radius, (), minval=0.05, maxval=0.2)
        # the target geom is the world's: its geom_pos (x, y) is its position
        target = radius * jnp.stack([jnp.sin(angle), jnp.cos(angle)])
        return qpos, jnp.zeros(model.tree.nv), {"target": target}

    return ModelEnv(suite.model, h=h, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip
