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
