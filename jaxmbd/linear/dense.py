"""Dense LU with partial pivoting and the inverse from its factors, for the small Newton
and pivot-block matrices (tens of unknowns), kept away from two jaxlib CPU kernels:

* jaxlib's batched getrf (what ``vmap`` of ``jax.lax.linalg.lu`` runs) spreads the members
  over XLA's intra-op thread pool and, on jax 0.10.2 CPU, can deadlock there;
* LAPACK's triangular solve with many right-hand sides wakes the threads of a threaded
  OpenBLAS (NumPy's and SciPy's wheels) for about 0.5-1 ms a call.

Both replacements are plain XLA loops, single threaded, vectorised over a batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401


def _lu_vectorised(a):
    """P a = L U with partial pivoting (LAPACK's getrf result: packed factors and the row
    permutation) for a stack (..., n, n), in n vectorised elimination steps of XLA ops."""
    n = a.shape[-1]
    index = jnp.arange(n)
    permutation = jnp.broadcast_to(index, a.shape[:-1]).astype(jnp.int32)

    def eliminate(k, carry):
        a, permutation = carry
        column = jnp.where(index >= k, jnp.abs(a[..., :, k]), -1.0)
        pivot_row = jnp.argmax(column, axis=-1)  # the first largest, as LAPACK's idamax
        swap = (index == k).astype(a.dtype) - (index == pivot_row[..., None]).astype(a.dtype)
        row_k = a[..., k, :]
        row_p = jnp.take_along_axis(a, pivot_row[..., None, None], axis=-2)[..., 0, :]
        a = a + swap[..., :, None] * (row_p - row_k)[..., None, :]  # rows k and p swapped
        perm_k = permutation[..., k]
        perm_p = jnp.take_along_axis(permutation, pivot_row[..., None], axis=-1)[..., 0]
        permutation = permutation + swap.astype(jnp.int32) * (perm_p - perm_k)[..., None]
        below = index > k
        multipliers = jnp.where(below, a[..., :, k] / a[..., k, k][..., None], 0.0)
        right = jnp.where(below, a[..., k, :], 0.0)
        a = a - multipliers[..., :, None] * right[..., None, :]
        a = jnp.where(below[:, None] & (index == k)[None, :], multipliers[..., :, None], a)
        return a, permutation

    return jax.lax.fori_loop(0, n, eliminate, (a, permutation))


@jax.custom_batching.custom_vmap
def dense_lu(matrix):
    """(lu, permutation) of P M = L U: LAPACK's getrf for one matrix; under ``vmap`` the
    vectorised elimination of :func:`_lu_vectorised` over the whole stack instead of
    jaxlib's batched getrf, which runs the members on XLA's intra-op thread pool and, on
    jax 0.10.2 CPU, can deadlock there (a pool thread waits on members queued behind it:
    ``experiments/bench_batch.py`` hung at 0 % CPU in ``jax::ParallelBatchMap`` under
    ``LuDecomposition``, seen in gdb)."""
    lu, _, permutation = jax.lax.linalg.lu(matrix)
    return lu, permutation


@dense_lu.def_vmap
def _dense_lu_vmap(axis_size, in_batched, matrix):
    (batched,) = in_batched
    if not batched:
        matrix = jnp.broadcast_to(matrix, (axis_size,) + matrix.shape)
    return _lu_vectorised(matrix), (True, True)


def inverse_from_lu(lu, permutation):
    """M^{-1} from P M = L U (packed as LAPACK does): L Y = P, then U X = Y, a row at a
    time for all n columns at once (n products of a row with an n x n matrix each way).

    Not LAPACK's triangular solve with the n columns of the identity: with a threaded
    OpenBLAS (NumPy's and SciPy's wheels) a multi-column solve wakes its worker threads,
    about 0.5-1 ms per call for n = 32 on 2 CPU cores (jax.profiler), which doubled the
    per-step time of the double pendulum with gen_alpha; this loop stays in XLA, single
    threaded, and batches under ``vmap``."""
    n = lu.shape[-1]
    cols = jnp.arange(n)
    rows = jnp.eye(n, dtype=lu.dtype)[permutation]  # P

    def forward(i, y):  # y_i = p_i - sum_{j < i} L_ij y_j (unit diagonal)
        below = jnp.where(cols < i, lu[i], 0.0)
        return y.at[i].add(-(below @ y))

    def backward(k, x):  # x_i = (y_i - sum_{j > i} U_ij x_j) / U_ii, from the last row
        i = n - 1 - k
        above = jnp.where(cols > i, lu[i], 0.0)
        return x.at[i].set((x[i] - above @ x) / lu[i, i])

    y = jax.lax.fori_loop(0, n, forward, rows)
    return jax.lax.fori_loop(0, n, backward, y)
