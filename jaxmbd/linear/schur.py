"""The index-1 KKT system [[M, G^T], [G, 0]] [a; lam] = [Q; gamma] of the explicit
integrators (``rk``, ``rkmk``) solved exactly through the Schur complement of its
block-diagonal mass matrix, in the elementwise kernels of :mod:`jaxmbd.linear.small`.

Why: there M is block-diagonal per body (6x6, 7x7 or 12x12 blocks; bodies are coupled only
by G, unlike the implicit integrators' Newton matrices, whose stiffness couples them), so

    S = G M^{-1} G^T,   S lam = G M^{-1} Q - gamma,   a = M^{-1} (Q - G^T lam)

needs nb small block inverses and one LU of nc unknowns instead of an LU of nb k + nc. The
elimination loops are short (k and nc pivots instead of nb k + nc), and everything is
elementwise (no ``dot``, no custom call, no scatter), so a step that solves its KKT systems
this way stays one hoisted native loop on the CPU (:mod:`jaxmbd.linear.small`): rkmk's
double pendulum 9.3k -> 36.9k steps per CPU-second against LAPACK, where the dense KKT
matrix in the same kernels gave 7.0k (``benchmarks/results/bench_small_solve_integrators.txt``).

Conditioning is tested as every jaxmbd solve tests it (the pivot ratio of
:func:`jaxmbd.newton.condition_status`), on each system actually factored: every mass
block and the Schur complement, each with its rows equilibrated by their largest entries;
``rcond`` is the smallest of those ratios. So a singular G (dependent rows, a singular
configuration) or a massless body gives a zero or round-off pivot, status NONFINITE or
ILL_CONDITIONED, as the dense KKT solve reports it (``tests/test_schur.py``). S's
condition is about G's squared, so in between (rows conditioned worse than about 1e-6;
not measured on a model) this solve can report ILL_CONDITIONED where the dense KKT
factorisation still passes its test.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.batching import (
    all_batched,
    broadcast_batched,
    cpu_or_accelerator,
    none_batched,
    on_single_member,
    unbatched,
)
from . import small


class SchurFactors(NamedTuple):
    """Gradient-free factors of one KKT matrix: ``inverse`` (nb, k, k) the mass blocks'
    inverses, ``G`` (nc, nb, k) the constraint rows per body, ``lu`` and ``permutation``
    of the row-equilibrated Schur complement diag(1 / ``row_g``) G M^{-1} G^T (``row_g``:
    its rows' largest entries), ``rcond`` the smallest pivot ratio of the factored systems
    (see the module docstring)."""

    inverse: jax.Array
    G: jax.Array
    lu: jax.Array
    permutation: jax.Array
    row_g: jax.Array
    rcond: jax.Array


def _sum(product, axis):
    return small._sum_unrolled(product, axis)


def _blocks_times(blocks, v, *, transpose=False):
    """B_b v_b (or B_b^T v_b) per body: ``blocks`` (nb, k, k), ``v`` (nb, k)."""
    if transpose:
        return _sum(blocks * v[:, :, None], 1)
    return _sum(blocks * v[:, None, :], 2)


def _rows_times(Gb, u):
    """G u for G as (nc, nb, k) and u (nb, k): (nc,)."""
    nc = Gb.shape[0]
    return _sum((Gb * u[None]).reshape(nc, -1), 1)


def _rows_transpose_times(Gb, lam):
    """G^T lam as (nb, k)."""
    return _sum(Gb * lam[:, None, None], 0)


def factor(mass, G) -> SchurFactors:
    """The factors of [[blockdiag(mass), G^T], [G, 0]] (``mass`` (nb, k, k), ``G``
    (nc, nb k), body-major columns); not differentiated (see :func:`solve`). Under ``vmap``
    on the CPU its own batched kernels (:func:`_factor_batched`)."""
    return _factor(*jax.lax.stop_gradient((mass, G)))


def _factor_single(mass, G) -> SchurFactors:
    nb, k, _ = mass.shape
    nc = G.shape[0]
    Gb = G.reshape(nc, nb, k)
    # rows equilibrated by their largest entries, as the dense solve's, per block
    row_m = jnp.max(jnp.abs(mass), axis=2)
    row_m = jnp.where(row_m > 0, row_m, 1.0)  # a zero row: a zero pivot, NONFINITE
    scaled_inverse, pivots = jax.vmap(small.inverse_and_pivots)(mass / row_m[:, :, None])
    # (D M)^{-1} = M^{-1} D^{-1} with D = diag(1 / row_m): M^{-1} = that times D
    inverse = scaled_inverse / row_m[:, None, :]
    rcond = jnp.min(jax.vmap(_pivot_ratio)(pivots))
    if nc == 0:
        empty = jnp.zeros((0, 0), mass.dtype)
        return SchurFactors(inverse, Gb, empty, jnp.zeros((0,), jnp.int32), jnp.zeros((0,)), rcond)
    # W = M^{-1} G^T per body (nb, k, nc); S = G W (nc, nc), its rows equilibrated
    Gt = jnp.transpose(Gb, (1, 2, 0))
    W = _sum(inverse[:, :, :, None] * Gt[:, None, :, :], 2)
    S = _sum(G[:, :, None] * W.reshape(nb * k, nc)[None, :, :], 1)
    row_g = jnp.max(jnp.abs(S), axis=1)
    row_g = jnp.where(row_g > 0, row_g, 1.0)  # a zero row (of G): a zero pivot
    lu, permutation = small.lu(S / row_g[:, None])
    rcond = jnp.minimum(rcond, _pivot_ratio(jnp.abs(jnp.diagonal(lu))))
    return SchurFactors(inverse, Gb, lu, permutation, row_g, rcond)


@jax.custom_batching.custom_vmap
def _factor(mass, G) -> SchurFactors:
    return _factor_single(mass, G)


@_factor.def_vmap
def _factor_vmap(axis_size, in_batched, mass, G):
    """A batch of factorisations (a batched program's time loop is not hoisted, so its
    kernels may hold ``dot``s): on the CPU :func:`_factor_batched`; a batch of one, the
    unbatched kernels; on a GPU the plain ``vmap``."""
    if none_batched(in_batched):
        return unbatched(_factor_single, mass, G)
    mass, G = broadcast_batched(axis_size, (mass, G), in_batched)
    if axis_size == 1:
        out = on_single_member(_factor, mass, G)
    else:
        out = cpu_or_accelerator(mass, G, cpu=_factor_batched, accelerator=jax.vmap(_factor_single))
    return out, all_batched(out)


def _factor_batched(mass, G) -> SchurFactors:
    """:func:`_factor_single` of each member of ``mass`` (B, nb, k, k) and ``G``
    (B, nc, nb k), the same computation with other kernels where XLA's CPU compiler ran
    the plain ``vmap``'s slowly (jax.profiler, ``jit(vmap(simulate))`` of the double
    pendulum, rkmk, B = 256: of the kernels' time, 34 % in forming S, 19 % in its LU and
    10 % in its row maxima):

    * S = G M^{-1} G^T as two batched ``dot``s instead of broadcast products and unrolled
      sums, whose fusions XLA duplicated into their consumers (the product computed
      again per consumer);
    * the row maxima as chains of elementwise maxima instead of a ``reduce`` over the
      small minor axis (a YNNPACK reduction, slow at this size);
    * S's LU by :func:`~jaxmbd.linear.small.lu_stack` (the steps unrolled; 2.5x faster
      than ``vmap`` of :func:`~jaxmbd.linear.small.lu`'s ``fori_loop`` at nc = 10).

    The eliminations perform the unbatched kernels' arithmetic: each block's inverse and
    pivots equal the unbatched ones bitwise, and S's factors are
    :func:`~jaxmbd.linear.small.lu`'s of the same S. S itself differs from the unbatched
    S by round-off (another summation order), so the factors agree to round-off and,
    where two rows of the equilibrated S tie (each row's largest entry is 1), the pivot
    order may differ; the solutions agree to round-off either way
    (``tests/test_schur.py``).

    An elimination unrolled over the entries in batch-minor layout (each entry a [B]
    vector) was slower, not faster, once it pivots: XLA fused every select of the row
    swaps into each of its consumers, so the program grew exponentially with the steps
    (n = 10: 8 s to compile, as slow as the ``fori_loop``; the Gauss-Jordan inverse 3x
    slower), and a pivot index duplicated into two fusions rounded its inputs differently
    in each (a fused multiply-add in one only) and broke the permutation."""
    B, nb, k, _ = mass.shape
    nc = G.shape[1]
    row_m = _maximum([jnp.abs(mass[..., j]) for j in range(k)])  # (B, nb, k)
    row_m = jnp.where(row_m > 0, row_m, 1.0)
    members = jax.vmap(jax.vmap(small.inverse_and_pivots))
    scaled_inverse, pivots = members(mass / row_m[:, :, :, None])
    inverse = scaled_inverse / row_m[:, :, None, :]
    rcond = jnp.min(jax.vmap(jax.vmap(_pivot_ratio))(pivots), axis=1)
    Gb = G.reshape(B, nc, nb, k)
    if nc == 0:
        empty = jnp.zeros((B, 0, 0), mass.dtype)
        return SchurFactors(
            inverse, Gb, empty, jnp.zeros((B, 0), jnp.int32), jnp.zeros((B, 0)), rcond
        )
    highest = jax.lax.Precision.HIGHEST
    W = jnp.einsum("xbij,xcbj->xbic", inverse, Gb, precision=highest)  # M^{-1} G^T
    S = jnp.einsum("xcm,xmd->xcd", G, W.reshape(B, nb * k, nc), precision=highest)
    row_g = _maximum([jnp.abs(S[:, :, j]) for j in range(nc)])  # (B, nc)
    row_g = jnp.where(row_g > 0, row_g, 1.0)
    lu, permutation = small.lu_stack(S / row_g[:, :, None])
    diagonal = jnp.abs(jnp.diagonal(lu, axis1=1, axis2=2))
    rcond = jnp.minimum(rcond, jax.vmap(_pivot_ratio)(diagonal))
    return SchurFactors(inverse, Gb, lu, permutation, row_g, rcond)


def _maximum(values):
    """The largest of ``values`` (NaN propagating, as ``jnp.max``) as a chain of
    ``jnp.maximum``."""
    out = values[0]
    for v in values[1:]:
        out = jnp.maximum(out, v)
    return out


def _pivot_ratio(pivots):
    rcond = jnp.min(pivots) / jnp.max(pivots)
    return jnp.where(jnp.isfinite(rcond), rcond, 0.0)


def factors_solve(factors: SchurFactors, Q, gamma, *, transpose: bool = False):
    """(a (nb, k), lam (nc,)) of the factored KKT system (or of its transpose, whose mass
    blocks are transposed: the Schur complement of [[M^T, G^T], [G, 0]] is S^T)."""
    inv, Gb = factors.inverse, factors.G
    u = _blocks_times(inv, Q, transpose=transpose)
    if Gb.shape[0] == 0:
        return u, jnp.zeros((0,), Q.dtype)
    r = _rows_times(Gb, u) - gamma
    if transpose:  # S^T = S'^T diag(row_g) with S' = diag(1 / row_g) S
        lam = small.lu_solve(factors.lu, factors.permutation, r, transpose=True) / factors.row_g
    else:
        lam = small.lu_solve(factors.lu, factors.permutation, r / factors.row_g)
    a = _blocks_times(inv, Q - _rows_transpose_times(Gb, lam), transpose=transpose)
    return a, lam


def _own_blocks(G, nb, k, own_rows):
    """E_b (nb, own_rows, k): each body's own rows (the last nb own_rows rows of G,
    body-major) restricted to its own columns."""
    rows = G[G.shape[0] - nb * own_rows :].reshape(nb, own_rows, nb, k)
    return jnp.stack([rows[b, :, b] for b in range(nb)])


def _own_weights(mass, E):
    """w_b = max|M_b| / max|E_b|^2: the added E_b^T w_b E_b is of the mass block's size."""
    m = jnp.max(jnp.abs(mass), axis=(1, 2))
    e = jnp.max(jnp.abs(E), axis=(1, 2))
    return jnp.where(e > 0, m / jnp.where(e > 0, e * e, 1.0), 0.0)


def solve(mass, G, Q, gamma, *, own_rows: int = 0):
    """(a (nb, k), lam (nc,), rcond) of [[blockdiag(mass), G^T], [G, 0]] [a; lam] =
    [Q; gamma] (``Q`` (nb, k)). Differentiable in every operand: the solution is a
    ``custom_linear_solve`` of the KKT matrix (d[a; lam] = K^{-1} (d rhs - dK [a; lam])),
    the factors themselves are never differentiated. ``rcond``: the pivot ratio for
    :func:`jaxmbd.newton.condition_status`.

    ``own_rows``: the last nb own_rows rows of G are each body's own (body-major; rp's
    normalisation, rotmat's orthonormality). Their mass blocks may be singular alone (rp:
    M's quaternion part 4 G(p)^T J G(p) has p in its null space), so those rows E_b are
    added to them: M_b + E_b^T w_b E_b with Q_b + E_b^T w_b gamma_b, exact because E_b a_b
    = gamma_b at the solution. That augmented matrix is T K with T = [[I, E^T W P], [0, I]]
    (P picks the own rows' right-hand sides), so K^{-1} b = (T K)^{-1} T b: the solve
    stays the exact inverse of K."""
    nb, k, _ = mass.shape
    nc = G.shape[0]
    n = nb * k
    Gb = G.reshape(nc, nb, k)
    if own_rows:
        E = _own_blocks(jax.lax.stop_gradient(G), nb, k, own_rows)
        w = _own_weights(jax.lax.stop_gradient(mass), E)
        added = _sum(E[:, :, :, None] * E[:, :, None, :], 1) * w[:, None, None]
        factors = factor(jax.lax.stop_gradient(mass) + added, G)
    else:
        factors = factor(mass, G)

    def to_augmented(b):  # T b: E^T W (gamma's own rows) added to the top
        if not own_rows:
            return b
        own = b[n + nc - nb * own_rows :].reshape(nb, own_rows)
        top = b[:n] + (_sum(E * own[:, :, None], 1) * w[:, None]).reshape(-1)
        return jnp.concatenate([top, b[n:]])

    def from_augmented_transpose(y):  # T^T y: W E y_a added to the own rows' part
        if not own_rows:
            return y
        ya = y[:n].reshape(nb, 1, k)
        own = (_sum(E * ya, 2) * w[:, None]).reshape(-1)
        return jnp.concatenate([y[: n + nc - nb * own_rows], y[n + nc - nb * own_rows :] + own])

    def matvec(y):
        a, lam = y[:n].reshape(nb, k), y[n:]
        top = _blocks_times(mass, a)
        if nc:
            top = top + _rows_transpose_times(Gb, lam)
            return jnp.concatenate([top.reshape(-1), _rows_times(Gb, a)])
        return top.reshape(-1)

    def solve_(b, transpose=False):
        if not transpose:
            b = to_augmented(b)
        a, lam = factors_solve(factors, b[:n].reshape(nb, k), b[n:], transpose=transpose)
        y = jnp.concatenate([a.reshape(-1), lam])
        return from_augmented_transpose(y) if transpose else y

    rhs = jnp.concatenate([Q.reshape(-1), gamma])
    x = jax.lax.custom_linear_solve(
        matvec,
        rhs,
        solve=lambda _, b: solve_(b),
        transpose_solve=lambda _, b: solve_(b, transpose=True),
    )
    return x[:n].reshape(nb, k), x[n:], factors.rcond


_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("jaxmbd_schur", default=False)


@contextlib.contextmanager
def prefer(on: bool):
    """Within the block (while a step is traced), index-1 KKT solves with a block-diagonal
    mass matrix use :func:`solve` (set by the explicit integrators from ``linear_solver``,
    :func:`jaxmbd.integrators.base.dense_kernels`)."""
    token = _ACTIVE.set(bool(on))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    """Whether the KKT solves traced here use the Schur complement."""
    return _ACTIVE.get()
