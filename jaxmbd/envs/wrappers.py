"""brax's training wrappers (``brax/envs/wrappers/training.py``: ``VmapWrapper``,
``EpisodeWrapper``, ``AutoResetWrapper``, ``DomainRandomizationVmapWrapper``, ``wrap``),
with the same behaviour and ``state.info`` entries, for environments of this package
where brax is not installed. brax's own wrappers run on these environments too."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from .. import _config  # noqa: F401
from ..analysis.batch import _device_list
from ._base import Env, State, Wrapper, compiled_when_plain


def _local_devices(devices, where: str) -> tuple | None:
    """``devices=`` of a batching wrapper as a tuple of this process's devices (None: one
    device, no sharding)."""
    if devices is None:
        return None
    devices = tuple(_device_list(devices))
    if len(set(devices)) != len(devices):
        raise ValueError(f"{where}: devices= lists a device twice")
    me = jax.process_index()
    if any(d.process_index != me for d in devices):
        raise ValueError(
            f"{where}: devices= must be devices of this process (jax.local_devices()); a "
            "batch across processes runs one wrapper per process"
        )
    return devices if len(devices) > 1 else None


def _over_devices(f, devices: tuple | None, specs, args, where: str):
    """``f(*args)`` with the batch (the leading axis of every leaf of the arguments whose
    spec is ``PartitionSpec("batch")``; a model's spec is a tree of them) split evenly over
    ``devices`` by ``shard_map``: each device runs ``f`` on its members, with no
    communication."""
    if devices is None:
        return f(*args)
    batch = PartitionSpec("batch")
    sizes = {np.shape(x)[0] for spec, arg in zip(specs, args, strict=True)
             if isinstance(spec, PartitionSpec) and spec == batch
             for x in jax.tree.leaves(arg)}  # fmt: skip
    n = sizes.pop() if len(sizes) == 1 else None
    if n is None or n % len(devices):
        raise ValueError(
            f"{where}: a batch of {n} members does not split evenly over the "
            f"{len(devices)} devices of devices=; use a multiple of {len(devices)}"
        )
    mesh = Mesh(np.asarray(devices), ("batch",))
    return jax.shard_map(f, mesh=mesh, in_specs=specs, out_specs=PartitionSpec("batch"),
                         check_vma=False)(*args)  # fmt: skip


class VmapWrapper(Wrapper):
    """``reset`` and ``step`` over a batch: ``reset(rng)`` takes (batch, 2) keys, or one
    key split into ``batch_size``.

    ``member_chunk``: how many members are stepped as one vectorised program (``vmap``);
    the chunks run one after another (``lax.map``). None: the whole batch at once (brax's
    ``VmapWrapper``); "env": the environment's own choice (``env.unwrapped.member_chunk``,
    see :class:`~jaxmbd.envs.ModelEnv`). On the CPU one member of a contact model compiles
    into one native loop (:mod:`jaxmbd.compiled.xla_flags`); ``vmap`` over 256 members does not:
    the batch's reductions over the contact slots reach the 4096 elements above which
    XLA hands them to YNNPACK kernels (custom fusions, which its small-loop pass refuses),
    and the body exceeds the pass's byte threshold. Run op by op, with the batch in front
    of every array, it took 3x one member's time per member; hoisted by a raised
    threshold, 2x; eight members per ``vmap`` (reductions rewritten as sums), 1.1x; the
    batch as the arrays' last axis, four at a time, 0.94x (cheetah run, per CPU-second,
    ``benchmarks/probes/env_batch_modes.py``). So contact environments there step their
    members one at a time, on one core.

    ``devices``: None (the default device), or devices of this process
    (``jax.local_devices()``) over which the batch is split evenly (``shard_map``), each
    running its members as above. On the CPU, JAX shows one device unless
    ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set before JAX starts; N such
    devices run on N threads, so a contact task's batch uses N cores."""

    def __init__(self, env: Env, batch_size: int | None = None, member_chunk="env",
                 devices=None):  # fmt: skip
        super().__init__(env)
        self.batch_size = batch_size
        if member_chunk == "env":
            member_chunk = getattr(env.unwrapped, "member_chunk", None)
        if member_chunk is not None and int(member_chunk) < 1:
            raise ValueError(f"VmapWrapper: member_chunk must be at least 1, got {member_chunk}")
        self.member_chunk = None if member_chunk is None else int(member_chunk)
        self.devices = _local_devices(devices, "VmapWrapper")

    def _on_members(self, f, *args):
        if self.member_chunk is None:
            return jax.vmap(f)(*args)
        if self.member_chunk == 1:
            return jax.lax.map(lambda a: f(*a), args)
        return jax.lax.map(lambda a: f(*a), args, batch_size=self.member_chunk)

    def _over_members(self, f, *args):
        specs = (PartitionSpec("batch"),) * len(args)
        return _over_devices(functools.partial(self._on_members, f), self.devices, specs, args,
                             "VmapWrapper")  # fmt: skip

    @compiled_when_plain
    def reset(self, rng: jax.Array) -> State:
        if self.batch_size is not None:
            rng = jax.random.split(rng, self.batch_size)
        return self._over_members(self.env.reset, rng)

    @compiled_when_plain(actions=True)
    def step(self, state: State, action: jax.Array) -> State:
        return self._over_members(self.env.step, state, action)


class EpisodeWrapper(Wrapper):
    """A time limit: ``done`` after ``episode_length`` control steps (``info["truncation"]``
    = 1 where the limit, not the task, ended it), each action repeated ``action_repeat``
    times (rewards summed); ``info["episode_metrics"]`` sums the episode's reward."""

    def __init__(self, env: Env, episode_length: int, action_repeat: int = 1):
        super().__init__(env)
        self.episode_length = episode_length
        self.action_repeat = action_repeat

    @compiled_when_plain
    def reset(self, rng: jax.Array) -> State:
        state = self.env.reset(rng)
        zeros = jnp.zeros(rng.shape[:-1])
        state.info["steps"] = zeros
        state.info["truncation"] = zeros
        state.info["episode_done"] = zeros
        metrics = {"sum_reward": zeros, "length": zeros}
        metrics.update({name: zeros for name in state.metrics})
        state.info["episode_metrics"] = metrics
        return state

    @compiled_when_plain(actions=True)
    def step(self, state: State, action: jax.Array) -> State:
        def one(state, _):
            nstate = self.env.step(state, action)
            return nstate, (nstate.reward, nstate.metrics)

        state, (rewards, metrics) = jax.lax.scan(one, state, (), self.action_repeat)
        reward = jnp.sum(rewards, axis=0)
        state = state.replace(reward=reward, metrics=jax.tree.map(lambda m: jnp.sum(m, 0), metrics))
        steps = state.info["steps"] + self.action_repeat
        limit = steps >= self.episode_length
        done = jnp.where(limit, jnp.ones_like(state.done), state.done)
        state.info["truncation"] = jnp.where(limit, 1 - state.done, jnp.zeros_like(state.done))
        state.info["steps"] = steps
        episode = dict(state.info["episode_metrics"])
        keep = 1 - state.info["episode_done"]
        episode["sum_reward"] = episode["sum_reward"] * keep + reward
        episode["length"] = episode["length"] * keep + self.action_repeat
        for name, value in state.metrics.items():
            if name != "reward":
                episode[name] = episode[name] * keep + value
        state.info["episode_metrics"] = episode
        state.info["episode_done"] = done
        return state.replace(done=done)


class AutoResetWrapper(Wrapper):
    """A finished episode's member restarts from the state its reset drew (brax's
    ``AutoResetWrapper``: ``info["first_pipeline_state"]`` and ``info["first_obs"]``),
    so a batch runs on without host control; ``done`` stays 1 for that step."""

    @compiled_when_plain
    def reset(self, rng: jax.Array) -> State:
        state = self.env.reset(rng)
        state.info["first_pipeline_state"] = state.pipeline_state
        state.info["first_obs"] = state.obs
        return state

    @compiled_when_plain(actions=True)
    def step(self, state: State, action: jax.Array) -> State:
        if "steps" in state.info:
            steps = state.info["steps"]
            state.info.update(steps=jnp.where(state.done, jnp.zeros_like(steps), steps))
        state = state.replace(done=jnp.zeros_like(state.done))
        state = self.env.step(state, action)

        def where_done(first, x):
            done = state.done
            if done.shape and done.shape[0] != x.shape[0]:
                return x
            if done.shape:
                done = jnp.reshape(done, [x.shape[0]] + [1] * (x.ndim - 1))
            return jnp.where(done, first, x)

        pipeline_state = jax.tree.map(where_done, state.info["first_pipeline_state"],
                                      state.pipeline_state)  # fmt: skip
        obs = jax.tree.map(where_done, state.info["first_obs"], state.obs)
        return state.replace(pipeline_state=pipeline_state, obs=obs)


class DomainRandomizationVmapWrapper(Wrapper):
    """A batch of models, one per member: ``randomization_fn(env.sys) -> (models,
    in_axes)`` gives the batched model (leaves with a leading batch axis where they vary)
    and its ``vmap`` axes (a pytree prefix of the model: 0 where batched, None where
    shared; :func:`model_axes` builds it). Each member's ``reset`` and ``step`` run on its
    own model, swapped into ``env.unwrapped.sys`` while JAX traces them. ``devices``: as
    :class:`VmapWrapper`'s (the batched models split with the members).

    The varied leaves travel in the state: ``reset`` puts each member's into
    ``state.info["randomized_model"]`` (the model with None at its shared leaves), and
    ``step`` reads them from there. So the step is a program of the state, not of the
    values it was first traced with: one jitted ``step`` serves every randomisation of the
    same leaves and shapes (a new ``randomization_fn`` with its own ``reset``) without
    compiling again. The shared leaves are the program's constants. brax's wrapper closes
    over the whole batch instead, and a new randomisation compiles the step again."""

    def __init__(self, env: Env, randomization_fn: Callable, devices=None):
        super().__init__(env)
        models, in_axes = randomization_fn(self.sys)
        bad = [a for a in jax.tree.leaves(in_axes) if a != 0]
        if bad:
            raise ValueError(
                "DomainRandomizationVmapWrapper: randomization_fn's in_axes must be 0 (a "
                f"leaf batched along its first axis) or None (shared), got {bad[0]!r}"
            )
        batched = jax.tree.map(lambda a: a == 0, in_axes, is_leaf=lambda a: a is None)
        self._varied, self._shared = eqx.partition(models, batched)
        self.devices = _local_devices(devices, "DomainRandomizationVmapWrapper")

    def _sharded(self, f, *members):
        """``f(*members)`` over the batch (each member's leading axis), split over
        :attr:`devices`."""
        specs = (PartitionSpec("batch"),) * len(members)
        return _over_devices(jax.vmap(f), self.devices, specs, members,
                             "DomainRandomizationVmapWrapper")  # fmt: skip

    @contextlib.contextmanager
    def _env_with(self, varied):
        env = self.env.unwrapped
        old = env.sys
        try:
            env.sys = eqx.combine(varied, self._shared)
            yield env
        finally:
            env.sys = old

    @compiled_when_plain
    def reset(self, rng: jax.Array) -> State:
        def reset(varied, rng):
            with self._env_with(varied) as env:
                state = env.reset(rng)
            state.info["randomized_model"] = varied
            return state

        return self._sharded(reset, self._varied, rng)

    @compiled_when_plain(actions=True)
    def step(self, state: State, action: jax.Array) -> State:
        if "randomized_model" not in state.info:
            raise ValueError(
                "DomainRandomizationVmapWrapper.step: the state has no "
                "info['randomized_model']; start it with this wrapper's reset"
            )

        def step(state, action):
            with self._env_with(state.info["randomized_model"]) as env:
                return env.step(state, action)

        return self._sharded(step, state, action)


def model_axes(batched, single):
    """``vmap`` axes for a batched model: 0 at each leaf whose array has one more axis in
    ``batched`` than in ``single``, None elsewhere (the ``in_axes`` that
    :class:`DomainRandomizationVmapWrapper`'s ``randomization_fn`` returns)."""

    def axis(b, s):
        return 0 if jnp.ndim(b) == jnp.ndim(s) + 1 else None

    return jax.tree.map(axis, batched, single)


def wrap(env: Env, episode_length: int | None = None, action_repeat: int = 1,
         randomization_fn: Callable | None = None, *, devices=None) -> Wrapper:  # fmt: skip
    """brax's ``wrap``: batched (:class:`VmapWrapper`, or
    :class:`DomainRandomizationVmapWrapper` with ``randomization_fn``), time-limited
    (:class:`EpisodeWrapper`; ``episode_length`` None: the environment's own,
    dm_control's 1000 steps) and auto-reset (:class:`AutoResetWrapper`). ``devices``: the
    batch split over devices of this process (:class:`VmapWrapper`)."""
    if episode_length is None:
        episode_length = getattr(env.unwrapped, "episode_length", 1000)
    if randomization_fn is None:
        env = VmapWrapper(env, devices=devices)
    else:
        env = DomainRandomizationVmapWrapper(env, randomization_fn, devices=devices)
    return AutoResetWrapper(EpisodeWrapper(env, episode_length, action_repeat))
