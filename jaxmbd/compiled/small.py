"""Products of small stacked vectors and matrices (3-vectors, 3x3 rotations, 6-rows): one
broadcast elementwise product, then an unrolled sum over the short axis.

Not ``@``/``einsum``: stacked tiny dots become batched-matmul kernels that are slow on CPU,
most of all under ``vmap`` (a double-pendulum batch of 256 spent half its time in them).
Not ``jnp.sum`` over the short axis either: a reduction ends an XLA fusion, and under
``vmap`` the extra kernels and intermediates cost a third of the batched throughput
(double pendulum, batch 256). Unrolled sums of the product's slices fuse with their
neighbours into one elementwise loop. The product is formed once and split once, so a 3x3
product is about eight jaxpr equations instead of about twenty for a sum of separately
sliced factors: a 20-step slider-crank run (gen_alpha, rA) traces to 21.7k equations
instead of 34.2k, and its gradient traces in 6.4 s instead of 9.7 s and XLA-compiles in
16 s instead of 23 s, at the same run time (2-core CPU). Use these on the time-stepping
hot path.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

#: Last axes up to this size are summed unrolled by :func:`dot`.
UNROLL_MAX = 8


def _sum_along(product, axis):
    """sum over ``axis`` (negative) of ``product``, unrolled for short axes: one split into
    unit slices, their sum, one squeeze."""
    n = product.shape[axis]
    if n > UNROLL_MAX:
        return jnp.sum(product, axis=axis)
    # lax's operations, the ones jnp's would emit: the same program, traced ~4x faster
    axis = axis % product.ndim
    parts = lax.split(product, (1,) * n, axis=axis)
    total = parts[0]
    for part in parts[1:]:
        total = lax.add(total, part)
    return lax.squeeze(total, (axis,))


def dot(a, b):
    """sum_k a[..., k] b[..., k]."""
    return _sum_along(a * b, -1)


def mv(M, v):
    """M v for stacked M (..., n, k) and v (..., k)."""
    return _sum_along(M * v[..., None, :], -1)


def row_vec_mat(v, M):
    """v^T M = M^T v for stacked v (..., k) and M (..., k, n)."""
    return _sum_along(v[..., :, None] * M, -2)


def mm(X, Y):
    """X Y for stacked small matrices."""
    return _sum_along(X[..., :, :, None] * Y[..., None, :, :], -2)


def mtm(X, Y):
    """X^T Y for stacked small matrices."""
    return _sum_along(X[..., :, :, None] * Y[..., :, None, :], -3)
