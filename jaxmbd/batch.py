"""Batches of models: stacking, vmapped analyses, and sharding across devices.

A batch is a Model whose array leaves carry a leading batch axis (same static topology).
``simulate_batch``/``kinematics_batch`` compile once (``jit(vmap)``) and, when several devices
are present, shard the batch across them with ``jax.sharding`` (padding it to a multiple of
the device count and dropping the padding afterwards).
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


def _sharded_map(fn, models: Model, devices):
    devices = list(devices if devices is not None else jax.devices())
    n = batch_size(models)
    if len(devices) == 1:
        return eqx.filter_jit(eqx.filter_vmap(fn))(models)
    pad = (-n) % len(devices)
    if pad:
        models = jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]), models
        )
    mesh = Mesh(np.asarray(devices), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    models = jax.tree_util.tree_map(lambda x: jax.device_put(x, sharding), models)
    out = eqx.filter_jit(eqx.filter_vmap(fn))(models)
    return jax.tree_util.tree_map(lambda x: x[:n], out)


def simulate_batch(models: Model, *, devices=None, **options):
    """``simulate`` over a batched Model (vmap, one compilation), sharded across ``devices``
    (default: all). Options are those of :func:`jaxmbd.simulate`. Returns a Solution whose
    arrays have a leading batch axis. Failed steps are reported through ``status`` per member
    (``check`` is off inside the batch); check ``sol.status`` yourself."""
    options = dict(options, check=False)
    return _sharded_map(lambda m: simulate(m, **options), models, devices)


def kinematics_batch(models: Model, *, devices=None, **options):
    """``kinematics`` over a batched Model; see :func:`simulate_batch`."""
    options = dict(options, check=False)
    return _sharded_map(lambda m: kinematics(m, **options), models, devices)
