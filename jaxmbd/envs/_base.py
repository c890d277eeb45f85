"""brax's environment interface (``brax/envs/base.py``: ``Env``, ``State``, ``Wrapper``),
without brax: an environment is a Python object whose ``reset(rng)`` and
``step(state, action)`` are pure JAX functions of a :class:`State` pytree, so that
``jit``, ``vmap``, ``grad`` and ``lax.scan`` apply, and brax's training wrappers
(``brax.envs.wrappers.training``), which forward attributes and call ``state.replace``,
run on it unchanged."""

from __future__ import annotations

import abc
import dataclasses
import functools
import warnings
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.jit import at_top_level, jit


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


def warn_non_finite_actions(action, where: str) -> None:
    """Warn where a concrete ``action`` has non-finite entries (nothing under ``jit``)."""
    if isinstance(action, jax.core.Tracer):
        return
    bad = ~np.isfinite(np.asarray(action))
    if bad.any():
        members = np.argwhere(bad.any(axis=-1)).ravel().tolist() if bad.ndim > 1 else []
        warnings.warn(
            f"{where}: {int(bad.sum())} non-finite action entries"
            + (f" (members {members[:8]}{'...' if len(members) > 8 else ''})" if members else "")
            + "; a member's controls are zeroed for that step, as MuJoCo zeroes ctrl "
            "(mjWARN_BADCTRL), and counted in state.metrics['nan_actions']",
            RuntimeWarning,
            stacklevel=3,
        )


def compiled_when_plain(method=None, *, actions: bool = False):
    """An environment's ``reset`` or ``step`` that, called under no transformation, runs as one
    compiled program: the environment static (by identity: its other attributes are constants
    of the program, read at the first call) and the unwrapped environment's model
    (``env.unwrapped.sys``) an argument, swapped in while the program traces. Op by op,
    each call compiled its loops anew with the model inside (a wrapped cart-pole's step:
    13 s); so, new values of ``env.unwrapped.sys`` of the same shapes compile nothing.
    Under ``jit``, ``vmap`` or ``grad`` it is the method itself. ``actions``: the method's
    last argument is an action, checked for non-finite entries before the program runs
    (:func:`warn_non_finite_actions`)."""
    if method is None:
        return functools.partial(compiled_when_plain, actions=actions)

    def traced(env_or_wrapper, sys, *args):
        env = env_or_wrapper.unwrapped
        old = env.sys
        try:
            env.sys = sys
            return method(env_or_wrapper, *args)
        finally:
            env.sys = old

    program = jit(traced)

    @functools.wraps(method)
    def call(self, *args):
        if at_top_level() and hasattr(self.unwrapped, "sys"):
            if actions:  # an action as an array: a list's numbers would be static values
                warn_non_finite_actions(args[-1], f"{type(self).__name__}.{method.__name__}")
                args = (*args[:-1], jnp.asarray(args[-1]))
            return program(self, self.unwrapped.sys, *args)
        return method(self, *args)

    return call


class Wrapper(Env):
    """An environment around ``env`` that forwards what it does not define (brax's
    ``Wrapper``: ``wrapper.sys``, ``wrapper.dt`` read the wrapped environment's)."""

    def __init__(self, env: Env):
        self.env = env

    @compiled_when_plain
    def reset(self, rng: jax.Array) -> State:
        return self.env.reset(rng)

    @compiled_when_plain(actions=True)
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
