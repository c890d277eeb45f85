"""Host-side values (numpy arrays, lists of numbers) onto the device in one copy.

Building a model is host-side work: its geometry, inertias, tables and initial states are
numpy, and they become the model's array leaves once, at the end. ``jnp.asarray`` of a numpy
array runs an eager conversion op that XLA compiles once per shape and dtype (tens of
milliseconds each, and a model's build meets dozens of shapes); ``jax.device_put`` of the
array copies it without compiling anything, to the same values and dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401

try:  # not public API: without it, to_device is jax.device_put
    from jax._src import core as _jax_core
    from jax._src.interpreters.pxla import batched_device_put as _batched_device_put
except ImportError:  # pragma: no cover
    _batched_device_put = None


def device_array(x, dtype=None) -> jax.Array:
    """``jnp.asarray(x, dtype)`` for a host value ``x`` (a numpy array, a nested list of
    numbers, a number), without an eager op: the same values, dtype and weak type."""
    if isinstance(x, jax.Array):
        return x if dtype is None or x.dtype == np.dtype(dtype) else jnp.asarray(x, dtype)
    if isinstance(x, bool | int | float | complex):
        if dtype is None:  # weakly typed, as jnp.asarray makes them
            return jnp.asarray(x)
        return jax.device_put(np.asarray(x, dtype=np.dtype(dtype)))
    # a private copy: a CPU device_put may share the numpy buffer that the caller still owns
    return jax.device_put(np.array(x, dtype=None if dtype is None else np.dtype(dtype)))


def device_zeros(shape, dtype=np.float64) -> jax.Array:
    """``jnp.zeros(shape, dtype)`` without an eager op."""
    return jax.device_put(np.zeros(shape, dtype=dtype))


def to_device(arrays) -> list:
    """``jax.device_put(arrays)`` of a list of numpy arrays: the same uncommitted arrays on
    the default device, with their dtypes. Where no default device is configured it calls
    the transfer JAX's ``device_put`` ends in, one per array, without the layers above it
    that a short run's call would pay about 20 us per array for (a plain 10-step run
    returns a dozen)."""
    if _batched_device_put is None or jax.config.jax_default_device is not None:
        return list(jax.device_put(list(arrays)))
    device = jax.devices()[0]
    sharding = _single_device_sharding(device)
    return [
        _batched_device_put(
            _jax_core.ShapedArray(x.shape, x.dtype), sharding, [x], [device], committed=False
        )  # fmt: skip
        for x in arrays
    ]


_SHARDINGS: dict = {}


def _single_device_sharding(device) -> jax.sharding.Sharding:
    sharding = _SHARDINGS.get(device)
    if sharding is None:
        sharding = _SHARDINGS[device] = jax.sharding.SingleDeviceSharding(device)
    return sharding
