"""Batches of models: stacking, vmapped analyses, and sharding across devices.

A batch is a Model whose array leaves carry a leading batch axis (same static topology).
``simulate_batch``/``kinematics_batch`` run ``jit(vmap(analysis))`` through one module-level
compiled function keyed by (analysis, topology, options, batch shape, devices): the first
call compiles, later calls with new parameter values (masses, initial states, drivers, ...)
reuse the compiled program. When several devices are present (e.g. two host devices from
``XLA_FLAGS=--xla_force_host_platform_device_count=2``, set before JAX starts) the batch is
split across them by ``shard_map`` (padded to a multiple of the device count, the padding
dropped after): one independent vmapped program per device.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from . import _config  # noqa: F401
from ._checks import is_traced, resolve_throw
from ._jit import jit
from ._results import code_message
from .errors import ModelError, SolverError
from .kinematics import kinematics
from .model import Model
from .simulation import simulate

_ANALYSES = {"simulate": simulate, "kinematics": kinematics}


def stack_models(models: Sequence[Model]) -> Model:
    """One batched Model from models of identical topology (leaves stacked on axis 0)."""
    models = list(models)
    if not models:
        raise ModelError("stack_models: empty list")
    structure = jax.tree_util.tree_structure(models[0])
    for k, m in enumerate(models[1:], 1):
        if jax.tree_util.tree_structure(m) != structure:
            raise ModelError(f"stack_models: model {k} has a different topology than model 0")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)


def batch_size(models: Model) -> int:
    sizes = {leaf.shape[0] for leaf in jax.tree_util.tree_leaves(models) if hasattr(leaf, "shape")}
    if len(sizes) != 1:
        raise ModelError(f"batched model: leaves disagree on the batch size {sorted(sizes)}")
    return sizes.pop()


@jit
def _vmapped(analysis: str, models: Model, options: dict):
    """One compiled program per (analysis, static model fields, options, shapes, shardings):
    ``analysis`` and the options' non-array leaves are static, the model's arrays dynamic."""
    fn = _ANALYSES[analysis]
    return eqx.filter_vmap(lambda m: fn(m, **options))(models)


def _static_options(options: dict) -> dict:
    """Options as jit-cache keys: the time grid must be concrete (it fixes the number of
    steps); NumPy/JAX scalars become Python floats so equal values hit the same program."""
    out = dict(options, throw=False, progress=None)
    out.pop("check", None)
    for key in ("t_end", "h"):
        if key in out and out[key] is not None:
            out[key] = float(out[key])
    return out


@jit
def _vmapped_per_device(analysis: str, models: Model, options: dict, devices: tuple):
    """``_vmapped`` with the batch split over ``devices`` by ``shard_map``: each device runs
    the vmapped program on its own members, with no communication. (Sharding the inputs of
    one jit instead lets the partitioner synchronise the devices at every Newton iteration
    over the batch-wide loop conditions: slower than one device in a measurement.)"""
    fn = _ANALYSES[analysis]
    arrays, static = eqx.partition(models, eqx.is_array)
    out_static = []

    def local(arrays):
        out = eqx.filter_vmap(lambda m: fn(m, **options))(eqx.combine(arrays, static))
        out_arrays, rest = eqx.partition(out, eqx.is_array)
        out_static.append(rest)
        return out_arrays

    mesh = Mesh(np.asarray(devices), ("batch",))
    out = jax.shard_map(
        local, mesh=mesh, in_specs=PartitionSpec("batch"), out_specs=PartitionSpec("batch"),
        check_vma=False,
    )(arrays)  # fmt: skip
    return eqx.combine(out, out_static[-1])


def _sharded_map(analysis: str, models: Model, devices, options: dict):
    devices = list(devices if devices is not None else jax.devices())
    options = _static_options(options)
    n = batch_size(models)
    if len(devices) == 1:
        return _vmapped(analysis, models, options)
    pad = (-n) % len(devices)
    if pad:
        models = jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]), models
        )
    out = _vmapped_per_device(analysis, models, options, tuple(devices))
    return jax.tree_util.tree_map(lambda x: x[:n], out) if pad else out


def _raise_for_members(sol, what: str):
    """SolverError naming every failed member of a concrete batched Solution: its index, the
    first failed step, its time and the RESULTS message."""
    status = np.asarray(sol.status)
    failed = np.nonzero((status != 0).any(axis=1))[0]
    if failed.size == 0:
        return
    lines = []
    for b in failed[:10]:
        k = int(np.argmax(status[b] != 0))
        lines.append(
            f"member {int(b)}: step {k} (t = {float(np.asarray(sol.t)[b, k]):.6g} s): "
            f"{code_message(int(status[b, k]))}"
        )
    more = f"; and {failed.size - 10} more" if failed.size > 10 else ""
    raise SolverError(
        f"{what}: {failed.size} of {status.shape[0]} batch members failed: "
        + "; ".join(lines)
        + more
        + ". Run a member alone (jaxmbd.simulate / kinematics) for its constraints at fault."
    )


def _batch(analysis: str, models: Model, devices, throw: bool, options: dict):
    if "check" in options:
        throw = resolve_throw(throw, options.pop("check"), f"{analysis}_batch")
    sol = _sharded_map(analysis, models, devices, options)
    if throw and not is_traced(models):
        _raise_for_members(sol, f"{analysis}_batch")
    return sol


def simulate_batch(models: Model, *, devices=None, throw: bool = False, **options):
    """``simulate`` over a batched Model (vmap, compiled once per topology, options and batch
    shape; later calls with new parameter values reuse the program), sharded across
    ``devices`` (default: all). Options are those of :func:`jaxmbd.simulate`. Returns a
    Solution whose arrays have a leading batch axis. Failures are reported per member:
    ``sol.status`` (B, T), ``sol.result`` (one RESULTS value per member) and
    ``sol.failed_step`` (B,); one failed member never hides or spoils the others. With
    ``throw=True`` a failure of any member raises :class:`~jaxmbd.SolverError` after the run,
    naming each failed member, its step and time (default False: a batch returns its
    members' outcomes)."""
    return _batch("simulate", models, devices, throw, options)


def kinematics_batch(models: Model, *, devices=None, throw: bool = False, **options):
    """``kinematics`` over a batched Model; see :func:`simulate_batch`."""
    return _batch("kinematics", models, devices, throw, options)
