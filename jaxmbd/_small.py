"""Products of small stacked vectors and matrices (3-vectors, 3x3 rotations, 6-rows) written
as unrolled sums of elementwise products.

XLA rewrites a multiply-and-reduce (and ``@`` of 3x3 matrices) into a dot, and stacked tiny
dots run as batched-matmul kernels that are slow on CPU, most of all under ``vmap`` (a
double-pendulum batch of 256 spent half its time in them). Unrolled sums fuse with their
neighbours into one elementwise loop instead. Use these on the time-stepping hot path.
"""

from __future__ import annotations

import jax.numpy as jnp

#: Last axes up to this size are summed unrolled by :func:`dot`.
UNROLL_MAX = 8


def _sum(terms):
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def dot(a, b):
    """sum_k a[..., k] b[..., k] (unrolled for short last axes)."""
    n = a.shape[-1]
    if n > UNROLL_MAX:
        return jnp.sum(a * b, axis=-1)
    return _sum([a[..., k] * b[..., k] for k in range(n)])


def mv(M, v):
    """M v for stacked M (..., 3, 3) and v (..., 3)."""
    return _sum([M[..., :, k] * v[..., k, None] for k in range(M.shape[-1])])


def row_vec_mat(v, M):
    """v^T M = M^T v for stacked v (..., 3) and M (..., 3, 3)."""
    return _sum([v[..., k, None] * M[..., k, :] for k in range(M.shape[-2])])


def mm(X, Y):
    """X Y for stacked small matrices."""
    return _sum([X[..., :, k, None] * Y[..., None, k, :] for k in range(X.shape[-1])])


def mtm(X, Y):
    """X^T Y for stacked small matrices."""
    return _sum([X[..., k, :, None] * Y[..., k, None, :] for k in range(X.shape[-2])])
