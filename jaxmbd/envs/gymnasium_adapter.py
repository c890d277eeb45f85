"""A gymnasium ``VectorEnv`` over a batched environment of this package, for libraries
that drive gymnasium's vector API (Stable-Baselines-style trainers): one jitted program
steps every member (``vmap`` of ``env.step``), with dm_control's time limit and
same-step auto-reset (gymnasium's ``AutoresetMode.SAME_STEP``: a finished member's
observation is its next episode's first, the last one in ``infos["final_obs"]``).

    from jaxmbd.envs.gymnasium_adapter import GymnasiumVectorEnv
    envs = GymnasiumVectorEnv(mbd.envs.make("cartpole", "balance"), num_envs=64)
    obs, info = envs.reset(seed=0)
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Arrays cross to NumPy at each call (gymnasium's contract); a restarted member begins
from the state its last reset drew (as brax's ``AutoResetWrapper``); ``reset`` draws new
ones."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from .. import _config  # noqa: F401
from ._base import Env
from .wrappers import EpisodeWrapper, VmapWrapper


class GymnasiumVectorEnv(VectorEnv):
    """``num_envs`` members of ``env`` as a gymnasium ``VectorEnv`` (see the module
    docstring). ``episode_length``: the time limit in control steps (None: the
    environment's own, 1000 for dm_control's tasks), reported as ``truncated``; the
    task's own ends are ``terminated``. Actions are clipped to the actuators' control
    ranges by the model (the action space's bounds)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env: Env, num_envs: int, *, episode_length: int | None = None):
        if episode_length is None:
            episode_length = getattr(env.unwrapped, "episode_length", 1000)
        self.env = env
        self.num_envs = int(num_envs)
        self._batched = EpisodeWrapper(VmapWrapper(env), episode_length)
        actuators = env.unwrapped.sys.actuators
        low = np.broadcast_to(np.asarray(actuators.ctrl_lower, np.float64), (env.action_size,))
        high = np.broadcast_to(np.asarray(actuators.ctrl_upper, np.float64), (env.action_size,))
        self.single_action_space = gymnasium.spaces.Box(low, high, dtype=np.float64)
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, (env.observation_size,), dtype=np.float64
        )
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space,
                                                               self.num_envs)  # fmt: skip
        self.observation_space = gymnasium.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self._reset = jax.jit(self._reset_fn)
        self._step = jax.jit(self._step_fn)
        self._state = None
        self._key = jax.random.PRNGKey(0)

    def _reset_fn(self, key):
        state = self._batched.reset(jax.random.split(key, self.num_envs))
        state.info["first_pipeline_state"] = state.pipeline_state
        state.info["first_obs"] = state.obs
        return state

    def _step_fn(self, state, action):
        steps = jnp.where(state.done, 0.0, state.info["steps"])
        state.info["steps"] = steps
        state = self._batched.step(state.replace(done=jnp.zeros_like(state.done)), action)
        done = state.done.astype(bool)
        truncated = state.info["truncation"].astype(bool)
        final_obs = state.obs

        def restart(first, x):
            return jnp.where(done.reshape((-1,) + (1,) * (x.ndim - 1)), first, x)

        pipeline_state = jax.tree.map(restart, state.info["first_pipeline_state"],
                                      state.pipeline_state)  # fmt: skip
        obs = restart(state.info["first_obs"], state.obs)
        state = state.replace(pipeline_state=pipeline_state, obs=obs)
        return state, done & ~truncated, truncated, final_obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        self._key, key = jax.random.split(self._key)
        self._state = self._reset(key)
        return np.asarray(self._state.obs), {}

    def step(self, actions):
        if self._state is None:
            raise RuntimeError("GymnasiumVectorEnv.step: call reset() first")
        actions = jnp.asarray(np.asarray(actions, np.float64).reshape(self.num_envs, -1))
        self._state, terminated, truncated, final_obs = self._step(self._state, actions)
        done = np.asarray(terminated) | np.asarray(truncated)
        info = {}
        if done.any():
            info = {"final_obs": np.asarray(final_obs), "_final_obs": done}
        return (np.asarray(self._state.obs), np.asarray(self._state.reward),
                np.asarray(terminated), np.asarray(truncated), info)  # fmt: skip
