"""brax's environment interface (``brax/envs/base.py``: ``Env``, ``State``, ``Wrapper``),
without brax: an environment is a Python object whose ``reset(rng)`` and
``step(state, action)`` are pure JAX functions of a :class:`State` pytree, so that
``jit``, ``vmap``, ``grad`` and ``lax.scan`` apply, and brax's training wrappers
(``brax.envs.wrappers.training``), which forward attributes and call ``state.replace``,
run on it unchanged."""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import equinox as eqx
import jax

from .. import _config  # noqa: F401


class State(eqx.Module):
    """The environment's state, brax's ``State`` fields: ``pipeline_state`` (the simulator's
    state: a :class:`~jaxmbd.joint_space.JointState` with ``qpos``/``qvel`` in MuJoCo's
    layout), ``obs``, ``reward``, ``done`` (1.0 where the episode ended, as a float as in
    brax), ``metrics`` (a dict of scalars) and ``info`` (a dict the wrappers write to: step
    counts, first states of auto-reset)."""

    pipeline_state: Any
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    metrics: dict = eqx.field(default_factory=dict)
    info: dict = eqx.field(default_factory=dict)

    def replace(self, **changes) -> State:
        """A copy with ``changes`` (brax's ``flax.struct`` method, which its wrappers call)."""
        return dataclasses.replace(self, **changes)


class Env(abc.ABC):
    """brax's environment interface: ``reset(rng) -> State``, ``step(state, action) ->
    State``, ``observation_size``, ``action_size``, ``unwrapped``."""

    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """The initial state of an episode, sampled with the key ``rng``."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """The state one control step after ``state`` under ``action``."""

    @property
    @abc.abstractmethod
    def observation_size(self) -> int:
        """The length of ``state.obs``."""

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """The length of the action."""

    @property
    def unwrapped(self) -> Env:
        return self

    @property
    def backend(self) -> str:
        return "jaxmbd"


class Wrapper(Env):
    """An environment around ``env`` that forwards what it does not define (brax's
    ``Wrapper``: ``wrapper.sys``, ``wrapper.dt`` read the wrapped environment's)."""

    def __init__(self, env: Env):
        self.env = env

    def reset(self, rng: jax.Array) -> State:
        return self.env.reset(rng)

    def step(self, state: State, action: jax.Array) -> State:
        return self.env.step(state, action)

    @property
    def observation_size(self) -> int:
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        return self.env.action_size

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    @property
    def backend(self) -> str:
        return self.env.backend

    def __getattr__(self, name):
        if name == "__setstate__" or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
