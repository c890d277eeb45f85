"""Batches of models: stacking, vmapped analyses, and sharding across devices.

A batch is a Model whose array leaves carry a leading batch axis (same static topology).
``simulate_batch``/``kinematics_batch`` run ``jit(vmap(analysis))`` through one module-level
compiled function keyed by (analysis, topology, options, batch shape, devices): the first
call compiles, later calls with new parameter values (masses, initial states, drivers, ...)
reuse the compiled program. When several devices are present (e.g. two host devices from
``XLA_FLAGS=--xla_force_host_platform_device_count=2``, set before JAX starts) the batch is
sharded across them (padded to a multiple of the device count, the padding dropped after).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _config  # noqa: F401
from .errors import ModelError
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


@eqx.filter_jit
def _vmapped(analysis: str, models: Model, options: dict):
    """One compiled program per (analysis, static model fields, options, shapes, shardings):
    ``analysis`` and the options' non-array leaves are static, the model's arrays dynamic."""
    fn = _ANALYSES[analysis]
    return eqx.filter_vmap(lambda m: fn(m, **options))(models)


def _static_options(options: dict) -> dict:
    """Options as jit-cache keys: the time grid must be concrete (it fixes the number of
    steps); NumPy/JAX scalars become Python floats so equal values hit the same program."""
    out = dict(options, check=False, progress=None)
    for key in ("t_end", "h"):
        if key in out and out[key] is not None:
            out[key] = float(out[key])
    return out


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
    mesh = Mesh(np.asarray(devices), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    models = jax.tree_util.tree_map(lambda x: jax.device_put(x, sharding), models)
    out = _vmapped(analysis, models, options)
    return jax.tree_util.tree_map(lambda x: x[:n], out) if pad else out


def simulate_batch(models: Model, *, devices=None, **options):
    """``simulate`` over a batched Model (vmap, compiled once per topology, options and batch
    shape; later calls with new parameter values reuse the program), sharded across
    ``devices`` (default: all). Options are those of :func:`jaxmbd.simulate`. Returns a
    Solution whose arrays have a leading batch axis. Failures are reported per member through
    ``sol.status`` (B, T) (no exception inside the batch: one failed member never hides or
    spoils the others); check ``sol.status`` yourself, e.g. ``(sol.status != 0).any(1)``."""
    return _sharded_map("simulate", models, devices, options)


def kinematics_batch(models: Model, *, devices=None, **options):
    """``kinematics`` over a batched Model; see :func:`simulate_batch`."""
    return _sharded_map("kinematics", models, devices, options)
