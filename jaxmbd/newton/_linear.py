"""The linear algebra of a Newton iteration: LU factorisation with row equilibration, the
pivot-ratio condition estimate and the status it gives (:func:`condition_status`, the one
conditioning test of every linear solve in jaxmbd), and the iteration matrix kept across
solves (:class:`IterationMatrix`: an inverse or LU factors)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import ILL_CONDITIONED, NONFINITE, SUCCESS
from ..linear import small
from ..linear.dense import dense_lu, inverse_and_pivots, lu_factor, lu_solve, lu_solve_nondiff
from ..linear.dense import solve as dense_solve
from ..linear.structured import (
    BlockFactors,
    BlockMatrix,
    factor_block_matrix,
    factor_plain,
    factors_solve,
)

#: A fresh equilibrated matrix whose LU pivot ratio min|u_ii| / max|u_ii| falls below this is
#: reported as ILL_CONDITIONED (a cheap reciprocal-condition estimate).
RCOND_MIN = 1e-12


def solve_linear(matrix, rhs):
    """Dense LU solve: a singular matrix gives non-finite values, reported as NONFINITE."""
    return dense_solve(matrix, rhs)


def condition_status(rcond, values):
    """The status of a factored linear system: NONFINITE where ``values`` (its factors, an
    inverse, or a solution) hold NaN/inf or the pivot ratio ``rcond`` is not positive (an
    exact zero pivot), ILL_CONDITIONED where rcond < RCOND_MIN, else SUCCESS. The one
    conditioning test of every linear solve in jaxmbd (Newton matrices, KKT systems of the
    explicit integrators, kinematic analyses)."""
    singular = ~jnp.all(jnp.isfinite(values)) | ~(rcond > 0)
    return jnp.where(singular, NONFINITE, jnp.where(rcond < RCOND_MIN, ILL_CONDITIONED, SUCCESS))


def solve_with_condition(matrix, rhs):
    """``(x, status)``: x = M^{-1} rhs by the row-equilibrated LU with partial pivoting, and
    the status of :func:`condition_status` from its pivot ratio min|u_ii| / max|u_ii| (the
    reciprocal-condition estimate of the implicit integrators' Newton matrices, threshold
    :data:`RCOND_MIN`) and the finiteness of x. No exception: a singular M gives a
    non-finite x and status NONFINITE, a near-singular one status ILL_CONDITIONED (x is
    still returned).

    ``matrix``: (n, n), a stack (..., n, n) (solved member by member; one status per
    member), or a :class:`~jaxmbd.linear.structured.BlockMatrix` (block elimination, the
    pivot ratio of its pivot blocks). ``rhs``: (..., n) or (..., n, k). Differentiable in
    both (x is a ``custom_linear_solve``: dx = M^{-1} (drhs - dM x)); the status carries no
    derivative."""
    if isinstance(matrix, BlockMatrix):
        factors = factor_plain(matrix)
        x = factors_solve(factors, rhs)
        return x, condition_status(factors.rcond, x)
    if matrix.ndim > 2:
        return jax.vmap(solve_with_condition)(matrix, rhs)
    frozen = jax.lax.stop_gradient(matrix)
    row = _row_maxima(jnp.abs(frozen))
    row = jnp.where(row > 0, row, 1.0)  # an all-zero row: singular, caught by the pivots
    if small.active(matrix.shape[0]):  # elementwise kernels (jaxmbd.linear.small)
        lu, permutation = small.lu(frozen / row[:, None])
        product, lu_solve_ = small.matmul, small.lu_solve
    else:
        lu, permutation = dense_lu(frozen / row[:, None])
        product, lu_solve_ = jnp.matmul, lu_solve_nondiff
    rcond = _pivot_ratio(jnp.abs(jnp.diagonal(lu)))
    scale = row if rhs.ndim == 1 else row[:, None]
    # differentiated implicitly, so the factors themselves are never differentiated
    x = jax.lax.custom_linear_solve(
        lambda y: product(matrix, y),
        rhs,
        solve=lambda _, b: lu_solve_(lu, permutation, b / scale),
        transpose_solve=lambda _, b: lu_solve_(lu, permutation, b, transpose=True) / scale,
    )
    return x, condition_status(rcond, x)


def _row_maxima(absolute):
    """max over each row; unrolled (exact, the same values) where the solves use the
    elementwise kernels: XLA's CPU compiler turned the ``max`` reduce of a 72 x 72 Newton
    matrix (energy_momentum, slider crank) into a YNNPACK fusion, which keeps a step loop
    from being hoisted."""
    if not small.active(absolute.shape[0]):
        return jnp.max(absolute, axis=1)
    return functools.reduce(jnp.maximum, jnp.split(absolute, absolute.shape[1], axis=1))[:, 0]


def row_tolerances(J, allowed):
    """|J| allowed, the Newton residual test's row tolerances; without a ``dot`` where the
    solves use the elementwise kernels (a hoistable step, :mod:`jaxmbd.linear.small`)."""
    return small.matvec(jnp.abs(J), allowed) if small.active(J.shape[0]) else jnp.abs(J) @ allowed


def checked_solver(matrix, *, least_squares=False):
    """Factor once, solve many, with a condition estimate: returns ``(solve, rcond)``, where
    ``solve(rhs, transpose=False)`` solves with the row-equilibrated LU and ``rcond`` is its
    pivot ratio min|u_ii| / max|u_ii| (0 for a singular or non-finite matrix).

    ``least_squares`` (a traced bool) is the explicit step-over of a coordinate chart's
    singularity (re's theta in {0, pi}, see :meth:`RE.near_chart_singularity`): where it is
    True and rcond < RCOND_MIN, the minimum-norm least-squares solution is returned instead;
    the caller verifies and flags that step. Nowhere else is a singular matrix solved."""
    row = jnp.max(jnp.abs(matrix), axis=1)
    row = jnp.where(row > 0, row, 1.0)
    factors = lu_factors(matrix / row[:, None])
    rcond = _pivot_ratio(jnp.abs(jnp.diagonal(factors.lu)))
    use_lstsq = jnp.logical_and(least_squares, rcond < RCOND_MIN)

    def solve(rhs, transpose=False):
        if transpose:  # M^T x = b with M = D Mt: Mt^T (D x) = b
            lu_x = lu_factors_solve(factors, rhs, transpose=True) / row
        else:
            lu_x = lu_factors_solve(factors, rhs / row)
        if least_squares is False:
            return lu_x
        lhs = matrix.T if transpose else matrix
        return jax.lax.cond(
            use_lstsq, lambda: jnp.linalg.lstsq(lhs, rhs)[0].astype(lu_x.dtype), lambda: lu_x
        )

    return solve, rcond


class LinearSolution(NamedTuple):
    """What a caller's linear solve may return instead of a bare solution: ``x``, its
    ``status`` (e.g. from :func:`solve_with_condition`) and whether it is the least-squares
    step-over of a chart singularity (:func:`chart_solve`), whose residual can stagnate
    above its tolerance (the part of F outside the singular matrix's range)."""

    x: jax.Array
    status: Any = SUCCESS
    least_squares: Any = False


def as_solution(out) -> LinearSolution:
    if isinstance(out, LinearSolution):
        return out
    if isinstance(out, tuple):  # (x, status), as solve_with_condition
        return LinearSolution(*out)
    return LinearSolution(out)


def chart_solve(matrix, rhs, *, least_squares):
    """One linear solve of a Newton iteration in a chart with singularities: the
    row-equilibrated LU with its condition status (:func:`condition_status`), unless
    ``least_squares`` allows stepping over the chart singularity where the pivot ratio is
    below RCOND_MIN (:func:`checked_solver`): a :class:`LinearSolution` that says so."""
    solve, rcond = checked_solver(matrix, least_squares=least_squares)
    x = solve(rhs)
    stepped_over = jnp.logical_and(least_squares, rcond < RCOND_MIN)
    finite = jnp.where(jnp.all(jnp.isfinite(x)), SUCCESS, NONFINITE)
    status = jnp.where(stepped_over, finite, condition_status(rcond, x))
    return LinearSolution(x, status, stepped_over)


class LUFactors(NamedTuple):
    """P M = L U packed as LAPACK does (unit lower L below the diagonal, U on and above)."""

    lu: jax.Array
    permutation: jax.Array


def lu_factors(matrix) -> LUFactors:
    if isinstance(matrix, BlockMatrix):  # structured: block LU on the body-joint graph
        return factor_plain(matrix)
    if small.active(matrix.shape[0]):  # elementwise kernels (jaxmbd.linear.small)
        return LUFactors(*small.lu(matrix))
    return LUFactors(*lu_factor(matrix))  # differentiable (kinematics), no batched getrf


def lu_factors_solve(factors: LUFactors, rhs, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from the factors: a permutation and two triangular solves.

    ``rhs`` is a vector or a matrix of right-hand sides."""
    if isinstance(factors, BlockFactors):
        if rhs.ndim == 2:
            return jax.vmap(lambda b: factors_solve(factors, b, transpose), 1, 1)(rhs)
        return factors_solve(factors, rhs, transpose)
    if small.active(factors[0].shape[-1]):  # factored by the same kernels (lu_factors)
        return small.lu_solve(factors[0], factors[1], rhs, transpose=transpose)
    return lu_solve(factors[0], factors[1], rhs, transpose=transpose)


def lu_solver(matrix):
    """Factor once, solve many: returns ``solve(rhs, transpose=False)``."""
    return functools.partial(lu_factors_solve, lu_factors(matrix))


#: Newton matrices up to this size are kept as their inverse, larger ones as LU factors.
#: Solving with a kept inverse is one matrix-vector product (one kernel, one batched product
#: under ``vmap``) instead of a permutation and two triangular solves, but forming it costs
#: two more triangular solves with n right-hand sides at every refresh. Measured on 2 CPU
#: cores (benchmarks/batch.py, A/B runs of simulate): the inverse wins for batches
#: of the double pendulum (n = 22 and 32) and loses for the slider crank (n = 36 and 54,
#: the stabilised matrix refreshed at one step in eight).
INVERSE_MAX = 32


class IterationMatrix(NamedTuple):
    """A Newton matrix ready for repeated solves, from the LU factors of the equilibrated
    S = D^{-1} J W, with W = diag(``col``) the unknowns' magnitudes and D = diag(``row``) =
    |J| (tol w + e) the rows' tolerances (also the residual test's): for n <= INVERSE_MAX
    the ``inverse`` J^{-1} = W S^{-1} D^{-1} (``lu`` and ``permutation`` empty), else the
    factors ``lu`` (stored transposed, the layout LAPACK's solve reads) and ``permutation``
    (``inverse`` empty); ``rcond``, the pivot-ratio
    estimate of S's reciprocal condition number, and ``status`` (SUCCESS, NONFINITE or
    ILL_CONDITIONED), computed once at factorisation. The Newton iteration corrects the
    inverse's round-off like any other inexactness of its matrix; the accepted iterate is
    tested on its own residual."""

    inverse: jax.Array
    lu: jax.Array
    permutation: jax.Array
    col: jax.Array
    row: jax.Array
    rcond: jax.Array
    status: jax.Array


def _keeps_inverse(n: int) -> bool:
    return n <= INVERSE_MAX


def factor_matrix(J, w, allowed, *, keep: bool = True) -> IterationMatrix:
    """Equilibrate (rows by their tolerances, columns by the unknowns' magnitudes), factor,
    and for small matrices invert (:data:`INVERSE_MAX`; ``keep=False``: a matrix used for
    one solve only, never inverted).

    A :class:`~jaxmbd.linear.structured.BlockMatrix` is factored by structured block
    elimination instead (:class:`~jaxmbd.linear.structured.BlockFactors`, same fields)."""
    if isinstance(J, BlockMatrix):
        return factor_block_matrix(J, w, allowed)
    n = J.shape[0]
    use_small = small.active(n)  # elementwise kernels (jaxmbd.linear.small), else LAPACK
    row = row_tolerances(J, allowed)
    row = jnp.where(row > 0, row, 1.0)  # an all-zero row: singular, caught by the pivots
    scaled = J * w[None, :] / row[:, None]
    empty = jnp.zeros((0, 0), J.dtype)
    if keep and _keeps_inverse(n):
        # one matrix: LAPACK's getrf and the inverse of its factors (under vmap member by
        # member, see jaxmbd.linear.dense), or Gauss-Jordan in elementwise kernels
        invert = small.inverse_and_pivots if use_small else inverse_and_pivots
        scaled_inverse, pivots = invert(scaled)
        rcond = _pivot_ratio(pivots)
        status = _factor_status(scaled_inverse, rcond)
        inverse = w[:, None] * scaled_inverse / row[None, :]
        return IterationMatrix(inverse, empty, jnp.zeros((0,), jnp.int32), w, row, rcond, status)
    lu, permutation = small.lu(scaled) if use_small else dense_lu(scaled)
    rcond = _pivot_ratio(jnp.abs(jnp.diagonal(lu)))
    # stored transposed: LAPACK's triangular solve reads column-major factors, and the
    # transpose of the row-major loop carry is that layout, so no copy at every solve
    return IterationMatrix(empty, lu.mT, permutation, w, row, rcond, _factor_status(lu, rcond))


def _pivot_ratio(pivots):
    """min / max pivot magnitude: the estimate of the reciprocal condition (0 if NaN)."""
    rcond = jnp.min(pivots) / jnp.max(pivots)
    return jnp.where(jnp.isfinite(rcond), rcond, 0.0)


def empty_matrix(n: int, dtype=jnp.float64) -> IterationMatrix:
    """Placeholder (NaN): :func:`newton_iterate_reusing` factors before its first use."""
    nan = jnp.full((n,), jnp.nan, dtype)
    square = jnp.full((n, n), jnp.nan, dtype)
    empty = jnp.zeros((0, 0), dtype)
    inverse = _keeps_inverse(n)
    return IterationMatrix(
        square if inverse else empty,
        empty if inverse else square,
        jnp.zeros((0,) if inverse else (n,), jnp.int32),
        nan,
        nan,
        jnp.asarray(jnp.nan, dtype),
        jnp.asarray(NONFINITE),
    )


empty_lu_factors = empty_matrix  # old name


def placeholder_like(shapes):
    """NaN (floats) / zero (integers) arrays of the given shapes (``jax.eval_shape``)."""

    def fill(s):
        value = jnp.nan if jnp.issubdtype(s.dtype, jnp.floating) else 0
        return jnp.full(s.shape, value, s.dtype)

    return jax.tree_util.tree_map(fill, shapes)


def matrix_solve(matrix: IterationMatrix, rhs):
    """J^{-1} rhs: one product with a kept inverse, else W (D^{-1} J W)^{-1} D^{-1} rhs from
    the equilibrated LU factors (structured: block substitution), by the kernels that
    :func:`factor_matrix` chose in the same traced context (:mod:`jaxmbd.linear.small`)."""
    if isinstance(matrix, BlockFactors):
        return factors_solve(matrix, rhs)
    use_small = small.active(matrix.col.shape[-1])  # as factor_matrix chose
    if matrix.inverse.size:
        return small.matvec(matrix.inverse, rhs) if use_small else matrix.inverse @ rhs
    solve = small.lu_solve if use_small else lu_solve_nondiff
    return matrix.col * solve(matrix.lu.mT, matrix.permutation, rhs / matrix.row)


def _factor_status(factors, rcond):
    """NONFINITE for an exactly singular (a zero pivot) or non-finite matrix (its LU
    factors or its inverse, ``factors``),
    ILL_CONDITIONED for a pivot ratio below RCOND_MIN."""
    return condition_status(rcond, factors)


def matrix_status(matrix: IterationMatrix):
    """The factorisation's status (stored for dense matrices, from the block factors)."""
    if isinstance(matrix, (IterationMatrix, CallerMatrix)):
        return matrix.status
    return _factor_status(matrix.lu, matrix.rcond)


class CallerMatrix(NamedTuple):
    """The matrix of a caller's linear solve (``jacobian``: any object that solve takes)
    with the residual test's row tolerances; its solves report their own status
    (:class:`LinearSolution`), so ``rcond`` (1) and ``status`` (SUCCESS) are placeholders."""

    jacobian: Any
    row: jax.Array
    rcond: jax.Array
    status: jax.Array


def is_custom_solve(linear_solve) -> bool:
    """Whether ``linear_solve`` is a caller's own solve (not the equilibrated LU)."""
    return linear_solve is not None and linear_solve is not solve_linear
