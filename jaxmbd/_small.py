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

#: Last axes up to this size are summed unrolled by :func:`dot`.
UNROLL_MAX = 8


def _sum_along(product, axis):
    """sum over ``axis`` (negative) of ``product``, unrolled for short axes: one split into
    unit slices, their sum, one squeeze."""
    n = product.shape[axis]
    if n > UNROLL_MAX:
        return jnp.sum(product, axis=axis)
    parts = jnp.split(product, n, axis=axis)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return jnp.squeeze(total, axis)


def total(x, axis: int = -1):
    """The sum of ``x`` over ``axis`` as a chain of adds of its slices, whatever the
    axis's length: no reduction. For a time step's short axes (a model's contact slots,
    its actuators) under ``vmap``: XLA's CPU backend hands a reduction of 4096 or more
    elements (a batch's) to a YNNPACK kernel, a custom fusion that its small-while-loop
    pass cannot compile into the native loop (:mod:`jaxmbd._xla_flags`), and the batch's
    time loop then runs op by op."""
    axis = axis % jnp.ndim(x)
    parts = jnp.split(x, x.shape[axis], axis=axis)
    out = parts[0]
    for part in parts[1:]:
        out = out + part
    return jnp.squeeze(out, axis)


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
