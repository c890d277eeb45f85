"""Row picks of per-body and per-constraint arrays by static index, shared by the constraint
equations and the joint forces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401


def take_rows(x, index):
    """``x[index]`` for a static index array: ``x`` itself for the identity, a slice for a
    contiguous run, else one gather with the index as a constant. ``x[numpy array]``
    instead adds the run-time wrapping of negative indices (three more equations per
    gather, traced, linearised and compiled at every constraint evaluation)."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    n = index.size
    if n and np.array_equal(index, np.arange(index[0], index[0] + n)):
        return x if (index[0] == 0 and n == x.shape[0]) else x[int(index[0]) : int(index[0]) + n]
    dimensions = jax.lax.GatherDimensionNumbers(
        offset_dims=tuple(range(1, x.ndim)), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return jax.lax.gather(
        x,
        index.astype(np.int32)[:, None],
        dimensions,
        slice_sizes=(1, *x.shape[1:]),
        indices_are_sorted=bool(np.all(np.diff(index) >= 0)),
        unique_indices=len(set(index.tolist())) == n,
        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def with_ground(x, ground_value):
    """Append the ground (index nb) to a per-body array."""
    return jnp.concatenate([x, jnp.asarray(ground_value, x.dtype)[None]], axis=0)
