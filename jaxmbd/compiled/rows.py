"""Row picks of per-body and per-constraint arrays by static index, shared by the constraint
equations and the joint forces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401

#: An index of at most this many runs (:func:`_runs`) is taken as slices, not a gather.
MAX_RUNS = 8


def _runs(index: np.ndarray) -> list[tuple[int, int, bool]]:
    """``index`` as maximal runs ``(start, length, repeated)``: rows start .. start +
    length - 1 in order, or row ``start`` repeated ``length`` times."""
    runs: list[tuple[int, int, bool]] = []
    i, n = 0, index.size
    while i < n:
        start, j = int(index[i]), i + 1
        repeated = bool(j < n and index[j] == start)
        step = 0 if repeated else 1
        while j < n and index[j] == index[j - 1] + step:
            j += 1
        runs.append((start, j - i, repeated))
        i = j
    return runs


def _rows(x, start: int, length: int):
    """Rows start .. start + length - 1 of ``x``: one slice (numpy's view of a numpy array)."""
    if isinstance(x, np.ndarray):
        return x[start : start + length]
    return jax.lax.slice_in_dim(x, start, start + length, axis=0)


def take_rows(x, index, *, max_runs: int | None = MAX_RUNS):
    """``x[index]`` for a static index array: ``x`` itself for the identity, a slice for a
    contiguous run, slices and broadcasts of rows joined for an index of a few runs (the
    per-body rows of constraint equations: (0, 0, 1, 1), (4, 5, 6, 0, 1, ...)), else one
    gather with the index as a constant. Not a gather where slices do: a gather's transpose
    in a gradient is a scatter, and XLA's CPU backend does not compile a loop that holds a
    scatter as one native loop (:mod:`jaxmbd.compiled.xla_flags`); a slice's is a pad, a
    broadcast's a sum. ``x[numpy array]`` instead adds the run-time wrapping of negative
    indices (three more equations per gather, traced, linearised and compiled at every
    constraint evaluation). ``max_runs``: the most runs taken as slices (None: any number,
    never a gather)."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    n = index.size
    # lax's slices, broadcasts and concatenation, the ones jnp's indexing would emit: the
    # same program, traced several times faster (this runs hundreds of times per step)
    if n and np.array_equal(index, np.arange(index[0], index[0] + n)):
        start = int(index[0])
        return x if (start == 0 and n == x.shape[0]) else _rows(x, start, n)
    runs = _runs(index) if n else []
    if n and (max_runs is None or len(runs) <= max_runs) and np.all(index >= 0):
        x = jnp.asarray(x)
        parts = []
        for start, length, repeated in runs:
            if repeated:
                row = _rows(x, start, 1)
                parts.append(
                    jax.lax.broadcast_in_dim(row, (length, *x.shape[1:]), tuple(range(x.ndim)))
                    if length > 1
                    else row
                )
            else:
                parts.append(_rows(x, start, length))
        return parts[0] if len(parts) == 1 else jax.lax.concatenate(parts, 0)
    return gather_rows(x, index)


def gather_rows(x, index):
    """``x[index]`` for a static 1-d index of rows in range: one gather with the index as a
    constant (no run-time wrapping of negative indices, which ``x[numpy array]`` adds)."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    x = jnp.asarray(x)
    dimensions = jax.lax.GatherDimensionNumbers(
        offset_dims=tuple(range(1, x.ndim)), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return jax.lax.gather(
        x,
        index.astype(np.int32)[:, None],
        dimensions,
        slice_sizes=(1, *x.shape[1:]),
        indices_are_sorted=bool(np.all(np.diff(index) >= 0)),
        unique_indices=len(set(index.tolist())) == index.size,
        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def with_ground(x, ground_value):
    """Append the ground (index nb) to a per-body array."""
    return jnp.concatenate([x, jnp.asarray(ground_value, x.dtype)[None]], axis=0)
