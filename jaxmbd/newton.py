"""Newton iteration with status codes and implicit-function-theorem gradients.

The iteration itself never sees gradients (its inputs are ``stop_gradient``-ed), so memory
does not grow with the number of iterations (DESIGN principle 5). Derivatives of the root
come from a ``jax.custom_jvp`` rule applied in the tangent space at the converged point
x*: the root xi = 0 of F(x* (+) xi, params) is differentiated with respect to ``params``
and mapped back through the retraction (+) (``A exp(xi~)`` for rA orientations). This works
for ``jax.grad``, ``jax.jacfwd``, ``jax.jacrev`` and under ``jax.vmap``.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from ._batching import all_batched, broadcast_batched, cpu_or_accelerator, on_single_member
from ._results import RESULT_ITEMS, code_message
from .linear import small
from .linear.dense import dense_lu, inverse_and_pivots, lu_factor, lu_solve, lu_solve_nondiff
from .linear.dense import solve as dense_solve
from .linear.structured import (
    BlockFactors,
    BlockMatrix,
    factor_block_matrix,
    factor_plain,
    factors_solve,
)

#: Status codes returned by solvers inside jit: the integer values of :class:`RESULTS`.
SUCCESS = 0
MAX_ITERATIONS = 1
NONFINITE = 2  # singular iteration matrix or a NaN/inf residual
ILL_CONDITIONED = 3  # near-singular iteration matrix (pivot-ratio condition estimate)
CHART_SINGULARITY = 4  # re kinematics: a stepped-over chart singularity failed verification

STATUS_MESSAGES = {code: code_message(code) for code in range(len(RESULT_ITEMS))}

#: Round-off resolution of an unknown, in units of machine epsilon times its magnitude.
ROUNDOFF = 32.0
#: A fresh equilibrated matrix whose LU pivot ratio min|u_ii| / max|u_ii| falls below this is
#: reported as ILL_CONDITIONED (a cheap reciprocal-condition estimate).
RCOND_MIN = 1e-12
_EPS = float(jnp.finfo(jnp.float64).eps)


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


def _first_failure(*statuses):
    """The first status that is not SUCCESS (SUCCESS if none): how the statuses of a
    solve's parts (factorisation, linear solve, finiteness) combine."""
    out = jnp.asarray(SUCCESS)
    for status in reversed(statuses):
        out = jnp.where(status != SUCCESS, status, out)
    return out


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


def _as_solution(out) -> LinearSolution:
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


class NewtonInfo(NamedTuple):
    """``residual_norm``: ||F||_2 at the returned iterate (for reports; the acceptance test
    itself is scaled, see :class:`Scale`); ``step_norm``: the last step relative to the
    unknowns' magnitudes, max_j |delta_j| / w_j."""

    iterations: jax.Array
    status: jax.Array
    residual_norm: jax.Array
    step_norm: jax.Array


class Scale(NamedTuple):
    """How large the unknowns are (``magnitude`` w > 0) and how finely floating point can
    resolve them (``resolution`` e >= 0), both in the unknowns' own units, per unknown.

    The Newton tests are relative: a step passes when |delta_j| <= tol w_j + e_j for every
    j (paper eq. 46 in a scaled norm), the residual when |F_i| <= sum_j |J_ij| (tol w_j + e_j)
    for every row i, i.e. F is no larger than what that perturbation of x would cause. Each
    row is compared with its own terms, so accelerations, multipliers, forces and
    constraint rows never mix units, and ``tol`` is a relative accuracy that can be asked
    for down to the round-off floor e."""

    magnitude: jax.Array
    resolution: jax.Array


def default_scale(x) -> Scale:
    """Unknowns of unknown units: one magnitude max(||x||_inf, 1) for all of them."""
    leaves = [jnp.max(jnp.abs(leaf)) for leaf in jax.tree_util.tree_leaves(x) if leaf.size]
    m = jnp.maximum(jnp.max(jnp.stack(leaves)) if leaves else 1.0, 1.0)
    return Scale(m, ROUNDOFF * _EPS * m)


def group_scale(x, groups, floors) -> Scale:
    """Magnitudes per group of unknowns: w_j = max(max_{i in g(j)} |x_i|, floor_g), the
    resolution ROUNDOFF eps w_j. ``groups``: a static integer array (group of each unknown),
    ``floors``: the smallest magnitude of each group (e.g. |g| for accelerations)."""
    groups = jnp.asarray(groups)
    size = len(floors)
    largest = jax.ops.segment_max(jnp.abs(x), groups, num_segments=size)
    w = jnp.maximum(largest, jnp.asarray(floors, x.dtype))[groups]
    return Scale(w, ROUNDOFF * _EPS * w)


def _allowed(scale: Scale, tol, shape):
    w = jnp.broadcast_to(scale.magnitude, shape)
    return w, tol * w + jnp.broadcast_to(scale.resolution, shape)


#: How far above the round-off resolution e an exact Newton iteration may stop (see
#: :class:`StepTest`): a correction computed from a residual that holds only round-off is
#: that round-off times the matrix's condition, so on a badly conditioned matrix exact
#: Newton corrections stagnate above e. Where they demonstrably have (two in a row, the
#: second not below half the first), the solve stops there, but never at a correction above
#: tol w + FLOOR_GAIN_MAX e: with ROUNDOFF = 32, 7e-11 of the unknowns' magnitudes (or of
#: what the state resolves of them) beyond tol. The former floor e / rcond, applied to
#: every correction, reached 7e-3 at rcond = RCOND_MIN.
FLOOR_GAIN_MAX = 1e4


class StepTest(NamedTuple):
    """A Newton correction delta measured against the scaled tolerances (:class:`Scale`:
    magnitudes w, round-off resolutions e), each the max over the unknowns j:

    * ``ratio``: |delta_j| / (tol w_j + e_j) (<= 1 passes the step test: paper eq. 46 in a
      scaled norm);
    * ``attainable``: |delta_j| / (tol w_j + FLOOR_GAIN_MAX e_j): where exact Newton
      corrections have stopped shrinking they are round-off, and the solve is at its
      attainable accuracy if this passes; never used otherwise;
    * ``floor_ratio``: |delta_j| / e_j (<= 1: the correction is round-off);
    * ``relative``: |delta_j| / w_j (the reported step norm).

    tol w + e, or after stagnation tol w + FLOOR_GAIN_MAX e, is the fixed bound on what a
    Newton loop of jaxmbd accepts; the matrix's condition estimate does not widen it. A
    solve whose corrections stay above it ends with MAX_ITERATIONS, never with SUCCESS at
    an inaccurate root.
    """

    ratio: jax.Array
    attainable: jax.Array
    floor_ratio: jax.Array
    relative: jax.Array


def step_test(delta, scale: Scale, tol) -> StepTest:
    """:class:`StepTest` of ``delta`` (shared by every Newton loop of jaxmbd)."""
    w, allowed = _allowed(scale, tol, delta.shape)
    e = jnp.broadcast_to(scale.resolution, delta.shape)
    denominators = jnp.stack([allowed, tol * w + FLOOR_GAIN_MAX * e, e, w])
    return StepTest(*jnp.max(jnp.abs(delta)[None] / denominators, axis=1))


def residual_test(F, row_tolerance):
    """max_i |F_i| / row_tolerance_i (<= 1 passes the residual test; the row tolerances are
    (|J| (tol w + e))_i, what a perturbation of x within tolerance would cause); NaN-safe
    (NaN -> inf). Shared by every Newton loop of jaxmbd."""
    r = jnp.max(jnp.abs(F) / row_tolerance)
    return jnp.where(jnp.isnan(r), jnp.inf, r)


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
#: cores (experiments/bench_batch.py, A/B runs of simulate): the inverse wins for batches
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


def _matrix_status(matrix: IterationMatrix):
    """The factorisation's status (stored for dense matrices, from the block factors)."""
    if isinstance(matrix, (IterationMatrix, CallerMatrix)):
        return matrix.status
    return _factor_status(matrix.lu, matrix.rcond)


def _refresh_where(stale, x, old: IterationMatrix, factor: Callable):
    """``factor(x)`` where ``stale``, else ``old``. Unbatched: a ``lax.cond``. Under ``vmap``
    (custom rule, :func:`_refresh_where_p`) on a CPU only the stale members are factored,
    on a GPU the whole batch when any member is stale: the reused
    matrix stays cheap in a batch instead of paying a Jacobian and a factorisation per
    iteration for every member (vmap of ``cond`` runs both branches)."""
    fn, consts = jax.closure_convert(factor, x)
    return _refresh_where_p(stale, x, old, consts, fn)


def _refresh_where_p(stale, x, old, consts, fn):
    @jax.custom_batching.custom_vmap
    def run(stale, x, old, consts):
        return jax.lax.cond(stale, lambda: fn(x, *consts), lambda: old)

    @run.def_vmap
    def _rule(axis_size, in_batched, stale, x, old, consts):
        stale, x, old, consts = broadcast_batched(axis_size, (stale, x, old, consts), in_batched)
        if axis_size == 1:  # a batch of one: the unbatched cond
            out = on_single_member(run, stale, x, old, consts)
            return out, all_batched(out)

        # The stale members are factored one at a time, each by the unbatched kernels (the
        # Jacobian, LAPACK's getrf, a few dozen XLA kernels for the inverse): a refresh
        # costs in proportion to the members that need one, not to the batch (in a large
        # batch some member is nearly always stale, each one about every 60 steps for the
        # double pendulum). Measured (scratch simulate_batch runs in alternating
        # processes, gen_alpha, h = 1e-3, two host devices, model-steps/s): double
        # pendulum batch 256 290k with slots of 4 stale members factored together by a
        # batched Gauss-Jordan elimination, 327k one at a time (10 steps: 103k -> 176k,
        # the first step factors every member); slider crank batch 256 71k -> 79k. (A
        # ``lax.cond`` choosing one vmap of the whole batch when many are stale lost
        # 15 %: the kept matrices were copied through it at every iteration.)
        def one_at_a_time(stale, x, old, consts):
            def one(carry):
                pending, matrices = carry
                k = jnp.argmax(pending)
                member = jax.tree_util.tree_map(lambda v: v[k], (x, consts))
                new = fn(member[0], *member[1])
                matrices = jax.tree_util.tree_map(lambda m, v: m.at[k].set(v), matrices, new)
                return pending.at[k].set(False), matrices

            return jax.lax.while_loop(lambda c: jnp.any(c[0]), one, (stale, old))[1]

        # On a GPU a loop over the stale members would launch their kernels one member
        # after the other; there the whole batch is factored in one vmap (the same
        # kernels, each over every member) when any member is stale, and the fresh
        # matrices are kept where stale.
        def whole_batch(stale, x, old, consts):
            def refresh():
                new = jax.vmap(fn)(x, *consts)

                def select(a, b):
                    return jnp.where(stale.reshape(stale.shape + (1,) * (a.ndim - 1)), a, b)

                return jax.tree_util.tree_map(select, new, old)

            return jax.lax.cond(jnp.any(stale), refresh, lambda: old)

        out = cpu_or_accelerator(stale, x, old, consts, cpu=one_at_a_time, accelerator=whole_batch)
        return out, all_batched(out)

    return run(stale, x, old, consts)


def _while_loop_keeping(cond, body, init, keep: frozenset):
    """``lax.while_loop(cond, body, init)`` whose batching rule does not select the carry
    entries ``keep`` (indices into the carry tuple) between a member's finished and new
    values. vmap of a while loop keeps every finished member's carry by a select over the
    whole carry at every iteration; for the kept Newton matrix (n x n per member) that
    select and its copy were about a tenth of a batched double pendulum's time (profile of
    simulate_batch, 128 members). The entries in ``keep`` must be ones the body leaves
    unchanged for a member whose ``cond`` is false (the kept matrix: refreshed only where
    the member still iterates)."""
    body_fn, body_consts = jax.closure_convert(body, init)
    cond_fn, cond_consts = jax.closure_convert(cond, init)

    @jax.custom_batching.custom_vmap
    def loop(init, body_consts, cond_consts):
        def cond_(c):
            return cond_fn(c, *cond_consts)

        def body_(c):
            return body_fn(c, *body_consts)

        return jax.lax.while_loop(cond_, body_, init)

    @loop.def_vmap
    def _rule(axis_size, in_batched, init, body_consts, cond_consts):
        init, body_consts, cond_consts = broadcast_batched(
            axis_size, (init, body_consts, cond_consts), in_batched
        )
        if axis_size == 1:  # a batch of one: the plain loop on the single member
            out = on_single_member(loop, init, body_consts, cond_consts)
            return out, all_batched(out)

        def active(c):
            return jax.vmap(lambda c_, k: cond_fn(c_, *k))(c, cond_consts)

        def step(c):
            running = active(c)
            new = jax.vmap(lambda c_, k: body_fn(c_, *k))(c, body_consts)

            def select(a, b):
                where = running.reshape(running.shape + (1,) * (a.ndim - 1))
                return jnp.where(where, a, b)

            items = (
                n if i in keep else jax.tree_util.tree_map(select, n, o)
                for i, (n, o) in enumerate(zip(new, c, strict=True))
            )
            return type(new)(*items) if hasattr(new, "_fields") else tuple(items)

        out = jax.lax.while_loop(lambda c: jnp.any(active(c)), step, init)
        return out, all_batched(out)

    return loop(init, body_consts, cond_consts)


class CallerMatrix(NamedTuple):
    """The matrix of a caller's linear solve (``jacobian``: any object that solve takes)
    with the residual test's row tolerances; its solves report their own status
    (:class:`LinearSolution`), so ``rcond`` (1) and ``status`` (SUCCESS) are placeholders."""

    jacobian: Any
    row: jax.Array
    rcond: jax.Array
    status: jax.Array


class _Carry(NamedTuple):
    x: Any
    F: jax.Array  # residual at x
    correction: LinearSolution  # the matrix's correction at x (for a kept matrix)
    k: jax.Array
    matrix: Any  # IterationMatrix, BlockFactors or CallerMatrix
    status: jax.Array
    done: jax.Array
    stale: jax.Array  # refresh the matrix at x before the next correction
    trusted: jax.Array  # the matrix is fresh or has contracted well in this solve
    rate: jax.Array  # the last contraction measured with a kept matrix (reported)
    refreshes: jax.Array
    step: jax.Array  # relative size of the last correction (reported)


def _converged(test: StepTest, after: StepTest, fresh, trusted, residual, least_squares, *,
               max_rate: float):  # fmt: skip
    """Whether x (+) delta is the root, from the correction ``test`` taken at x and the
    same matrix's correction ``after`` at the new iterate (see :func:`_iterate`), and
    whether that matrix still contracts well enough to be kept; theta is their ratio."""
    theta = after.ratio / test.ratio
    # a fresh matrix: |delta| passes, or the next correction does (error to first order);
    # a kept one: |delta_next| / (1 - theta) bounds the error (Hairer & Wanner IV.8), or
    # the next correction is round-off while the iteration still contracts
    kept_bound = jnp.where(theta <= max_rate, after.ratio / (1.0 - theta), jnp.inf)
    at_floor = (after.floor_ratio <= 1.0) & (theta < 1.0)
    step_ok = jnp.where(fresh, (test.ratio <= 1.0) | (after.ratio <= 1.0), kept_bound <= 1.0)
    step_ok = step_ok | at_floor
    # a correction followed by one no smaller than half of it, from an exact matrix or one
    # that has contracted well in this solve: both are round-off, and the solve is at its
    # attainable accuracy if they pass the capped floor
    stagnated = trusted & (theta >= 0.5) & (test.attainable <= 1.0) & (after.attainable <= 1.0)
    step_ok = step_ok | stagnated
    # a least-squares step-over leaves the part of F outside the singular matrix's range:
    # there (only) the residual test is waived, and the caller verifies that step
    residual_ok = (residual <= 1.0) | (least_squares & (test.ratio <= 1.0))
    keep = (theta <= max_rate) | at_floor
    return step_ok & residual_ok, keep, theta


def _iterate(
    residual: Callable,
    jacobian: Callable,
    retract: Callable,
    x0,
    matrix,
    *,
    tol,
    max_iter: int,
    scale: Callable,
    policy: str,
    max_rate: float = 0.2,
    rate=jnp.nan,
    linear_solve: Callable | None = None,
    row_tolerance: Callable | None = None,
):
    """The Newton loop of every policy (``policy``: "full", "modified", "reuse"), with the
    equilibrated LU and its condition estimate, or a caller's ``linear_solve(J, rhs)``
    (returning the solution, ``(solution, status)`` or a :class:`LinearSolution`;
    ``row_tolerance(J, allowed)``, default |J| allowed, its residual test's rows).

    One iteration: (maybe) refresh the matrix at x and take its correction delta =
    -J^{-1} F(x); move to x (+) delta, evaluate F there and the same matrix's correction
    delta' there. delta' estimates the new iterate's error (Deuflhard's simplified Newton
    correction) and, for a kept matrix, is the next iteration's correction. With theta =
    |delta'| / |delta| (the contraction, in the step test's norm), the new iterate is
    accepted when its residual passes (:func:`residual_test`) and

    * a fresh matrix: |delta| or |delta'| passes the step test (:class:`StepTest`, the
      fixed bound tol w + e), or the exact corrections have stopped shrinking (theta >=
      1/2) within the attainable floor tol w + FLOOR_GAIN_MAX e;
    * a kept matrix: theta <= ``max_rate`` and |delta'| / (1 - theta) passes (Hairer &
      Wanner IV.8, eq. 8.10), or delta' is round-off (|delta'| <= e) with theta < 1.

    A kept matrix whose theta exceeds ``max_rate`` is refreshed at the new iterate; one is
    never trusted on a rate remembered from an earlier solve (``rate``, the last one
    measured, is only reported). A fresh matrix that is singular (NONFINITE) or
    near-singular (ILL_CONDITIONED), or a linear solve reporting either, ends the solve
    with that status; so does a non-finite correction.
    """
    F0 = residual(x0)
    n = F0.shape[0]
    factor = _factor_fn(jacobian, scale, tol, n, x0, F0, policy, linear_solve, row_tolerance)

    def solve(matrix, F) -> LinearSolution:
        if linear_solve is None:
            return LinearSolution(-matrix_solve(matrix, F), jnp.asarray(SUCCESS), False)
        out = _as_solution(linear_solve(matrix.jacobian, F))
        return LinearSolution(-out.x, jnp.asarray(out.status), jnp.asarray(out.least_squares))

    def linearised(x, F):
        matrix = factor(x)
        return matrix, solve(matrix, F)

    if policy == "modified":  # one matrix per solve: under vmap one batched factorisation
        matrix, correction = linearised(x0, F0)
    elif matrix is None:  # a NaN placeholder of the factors' type (refreshed before use)
        matrix, correction = placeholder_like(jax.eval_shape(linearised, x0, F0))
    else:  # a kept matrix (NaN: refreshed before use)
        correction = solve(matrix, F0)

    def cond(c):
        return (c.k < max_iter) & ~c.done & (c.status == SUCCESS)

    def body(c):
        if policy == "full":
            (matrix, correction), fresh = linearised(c.x, c.F), jnp.asarray(True)
        elif policy == "modified":  # factored at x0, before the loop
            matrix, correction, fresh = c.matrix, c.correction, c.k == 0
        else:
            # only a member that still iterates: a finished one keeps its matrix (batched,
            # the loop does not select it, see _while_loop_keeping)
            stale = c.stale & cond(c)
            matrix, correction = _refresh_where(
                stale, c.x, (c.matrix, c.correction), lambda x: linearised(x, c.F)
            )
            fresh = stale
        test = step_test(correction.x, scale(c.x), tol)
        finite = jnp.isfinite(test.relative)
        delta = jnp.where(finite, correction.x, 0.0)
        x = retract(c.x, delta)
        F = residual(x)
        after = solve(matrix, F)
        after_test = step_test(after.x, scale(x), tol)
        converged, keep, theta = _converged(
            test, after_test, fresh, fresh | c.trusted, residual_test(F, matrix.row[:n]),
            correction.least_squares, max_rate=max_rate,
        )  # fmt: skip
        status = _first_failure(
            jnp.where(fresh, _matrix_status(matrix), SUCCESS),
            correction.status,
            jnp.where(finite, SUCCESS, NONFINITE),
        )
        return _Carry(
            x, F, after, c.k + 1, matrix, status, converged, ~keep,
            fresh | c.trusted | (theta <= max_rate),
            jnp.where(fresh, c.rate, theta), c.refreshes + fresh.astype(c.refreshes.dtype),
            test.relative,
        )  # fmt: skip

    dtype = F0.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    zero = jnp.asarray(0)
    stale = ~jnp.isfinite(matrix.rcond)  # a NaN placeholder: factor first
    init = _Carry(x0, F0, correction, zero, matrix, jnp.asarray(SUCCESS), jnp.asarray(False),
                  stale, jnp.asarray(False), jnp.asarray(rate, dtype), zero, inf)  # fmt: skip
    if policy != "full":  # the matrix changes only by a refresh of a running member
        out = _while_loop_keeping(cond, body, init, frozenset({_Carry._fields.index("matrix")}))
    else:
        out = jax.lax.while_loop(cond, body, init)
    status = jnp.where((out.status == SUCCESS) & ~out.done, MAX_ITERATIONS, out.status)
    status = jnp.where((status == SUCCESS) & ~jnp.all(jnp.isfinite(out.F)), NONFINITE, status)
    info = NewtonInfo(out.k, status, jnp.linalg.norm(out.F), out.step)
    return out.x, info, out.matrix, out.refreshes, out.rate


def _factor_fn(jacobian, scale, tol, n, x0, F0, policy, linear_solve, row_tolerance):
    """x -> the iteration matrix at x: the equilibrated LU (:func:`factor_matrix`; full
    Newton solves once with each matrix, so it is never inverted), or the caller's
    :class:`CallerMatrix` with its row tolerances."""
    if linear_solve is None:

        def factor(x):
            w, allowed = _allowed(scale(x), tol, (n,))
            return factor_matrix(jacobian(x), w, allowed, keep=policy != "full")

        return factor
    # the tangent's size (a rectangular J: the unknowns', not the rows')
    J0 = jax.eval_shape(jacobian, x0)
    tangent = jax.eval_shape(lambda J, F: _as_solution(linear_solve(J, F)).x, J0, F0).shape

    def caller_matrix(x):
        J = jacobian(x)
        _, allowed = _allowed(scale(x), tol, tangent)
        rows = jnp.abs(J) @ allowed if row_tolerance is None else row_tolerance(J, allowed)
        one = jnp.asarray(1.0, F0.dtype)
        return CallerMatrix(J, rows, one, jnp.asarray(SUCCESS))

    return caller_matrix


def newton_iterate(
    residual_and_jacobian: Callable[[Any], tuple[jax.Array, jax.Array]],
    retract: Callable[[Any, jax.Array], Any],
    x0,
    *,
    tol,
    max_iter: int,
    residual: Callable[[Any], jax.Array] | None = None,
    linear_solve: Callable | None = None,
    scale: Callable[[Any], Scale] | None = None,
    row_tolerance: Callable | None = None,
):
    """Newton: x <- x (+) delta with J delta = -F, until the scaled step and the scaled
    residual both pass (see :func:`_iterate` and :class:`Scale`; ``tol`` is relative).

    ``linear_solve(J, rhs)`` replaces the equilibrated LU (e.g. a minimum-norm solve for a
    rectangular J, or re's chart-singularity fallback :func:`chart_solve`); it returns the
    solution, or ``(solution, status)`` (:func:`solve_with_condition`), or a
    :class:`LinearSolution`, so that it reports its own conditioning. With it, J may be any
    object the solve understands, and ``row_tolerance(J, allowed)`` (default |J| allowed)
    gives the residual test's per-row tolerances.
    Returns (x, NewtonInfo). No exception inside jit: ``info.status`` says what happened.
    """
    residual = residual if residual is not None else (lambda x: residual_and_jacobian(x)[0])
    x, info, _, _, _ = _iterate(
        residual,
        lambda x: residual_and_jacobian(x)[1],
        retract,
        x0,
        None,
        tol=tol,
        max_iter=max_iter,
        scale=default_scale if scale is None else scale,
        policy="full",
        linear_solve=linear_solve if _custom(linear_solve) else None,
        row_tolerance=row_tolerance,
    )
    return x, info


def newton_iterate_reusing(
    residual: Callable[[jax.Array], jax.Array],
    jacobian: Callable[[jax.Array], jax.Array],
    x0: jax.Array,
    matrix: IterationMatrix,
    *,
    tol,
    max_iter: int,
    max_rate: float = 0.2,
    rate=jnp.nan,
    scale: Callable[[Any], Scale] | None = None,
):
    """Newton with an iteration matrix kept from earlier solves (:class:`IterationMatrix`:
    the inverse of the equilibrated matrix, formed from its LU factors).

    x <- x - J^{-1} F(x) with the stored factors. The matrix is refreshed, J = jacobian(x)
    factored at the current iterate, when it contracts worse than ``max_rate`` (theta, the
    ratio of its corrections at two successive iterates in the step test's norm), or gives
    a non-finite correction, or holds NaN (no matrix yet). Across the steps of an
    integrator the matrix changes by O(h), so most steps need no refresh: an iteration then
    costs one residual and one matrix-vector product instead of a Jacobian and an LU
    factorisation.

    An iterate is accepted only when verified (see :func:`_iterate`): the kept matrix's
    correction there, delta', bounds its error by |delta'| / (1 - theta) within the step
    test, with theta <= ``max_rate`` measured in this solve, and its scaled residual passes;
    a step from a kept matrix is never accepted on faith, nor on a rate remembered from an
    earlier solve. This is the stopping rule of simplified Newton in stiff integrators
    (Hairer & Wanner, IV.8) plus a residual check. Returns (x, NewtonInfo, matrix,
    refreshes, rate) with rate the last measured contraction.
    """
    if not isinstance(matrix, (IterationMatrix, BlockFactors)):  # bare LU: refactor
        matrix = empty_matrix(x0.shape[0], x0.dtype)
    return _iterate(
        residual,
        jacobian,
        lambda x, d: x + d,
        x0,
        matrix,
        tol=tol,
        max_iter=max_iter,
        scale=default_scale if scale is None else scale,
        policy="reuse",
        max_rate=max_rate,
        rate=rate,
    )


def implicit_root(
    residual: Callable[[Any, Any], jax.Array],
    retract,
    x_star,
    params,
    n_tangent: int,
    jacobian: Callable[[Any], jax.Array] | None = None,
):
    """Attach implicit-function gradients to a converged root ``x_star`` of residual(., params).

    The value returned equals ``x_star``; its derivatives with respect to ``params`` are
    d x = -(dF/dxi)^{-1} dF/dparams mapped through ``retract``. ``residual`` must return as
    many equations as the tangent space has dimensions (``n_tangent``). ``jacobian(x)``, if
    given, must be the exact derivative of ``residual(retract(x, xi))`` at xi = 0 (e.g. the
    hand-coded rA matrix); it replaces ``n_tangent`` forward-mode passes in the gradient.

    Derivatives of every order are right (``jax.hessian``, jvp of grad, inside ``lax.scan``):
    the tangent is a ``custom_linear_solve`` whose matvec is the linearisation at the
    differentiable root, so the next order sees d(J^{-1}) = -J^{-1} dJ J^{-1}; and the rule's
    primal output is itself differentiable with the implicit derivative (see ``_rule``).
    """
    x_star = jax.lax.stop_gradient(x_star)
    # The rule runs when the enclosing program is differentiated, possibly after a scan
    # body's trace has closed: closed-over tracers become explicit arguments. Values the
    # residual closes over are differentiated like params; the matrix is gradient-stopped.
    residual_fn, residual_consts = jax.closure_convert(residual, x_star, params)
    if jacobian is not None:
        jacobian_fn, jacobian_consts = jax.closure_convert(jacobian, x_star)
    else:
        jacobian_fn, jacobian_consts = None, ()

    def matrix_factors(x, p, consts, jac_consts):
        zeros = jnp.zeros(n_tangent, dtype=jnp.result_type(float))
        if jacobian_fn is not None:
            matrix = jacobian_fn(x, *jac_consts)
        else:
            matrix = jax.jacfwd(lambda xi: residual_fn(retract(x, xi), p, *consts))(zeros)
        return lu_factors(jax.lax.stop_gradient(matrix))

    @jax.custom_jvp
    def root(x, p, consts, jac_consts):
        del p, consts, jac_consts
        return x

    @root.defjvp
    def _rule(primals, tangents):
        x, p, consts, jac_consts = primals
        _, dp, dconsts, _ = tangents
        x = jax.lax.stop_gradient(x)
        zeros = jnp.zeros(n_tangent, dtype=jnp.result_type(float))
        factors = matrix_factors(x, p, consts, jac_consts)

        def at(xi, p_, consts_):
            return residual_fn(retract(x_out, xi), p_, *consts_)

        # Primal output with value exactly x (F - F = 0) and first derivative -J^{-1} dF/dp.
        # Partial evaluation inside lax.scan inlines a custom_jvp's primal function (the
        # identity here), so at second order (e.g. forward over reverse) JAX differentiates
        # this expression instead of the rule: it must carry the derivative itself.
        residual_at_root = residual_fn(x, p, *consts)
        correction = residual_at_root - jax.lax.stop_gradient(residual_at_root)
        x_out = retract(x, -lu_factors_solve(factors, correction))

        _, matvec = jax.linearize(lambda xi: at(xi, p, consts), zeros)
        _, dF = jax.jvp(lambda p_, c_: at(zeros, p_, c_), (p, consts), (dp, dconsts))
        dxi = jax.lax.custom_linear_solve(
            matvec,
            -dF,
            solve=lambda _, b: lu_factors_solve(factors, b),
            transpose_solve=lambda _, b: lu_factors_solve(factors, b, transpose=True),
        )
        _, dx = jax.jvp(lambda xi: retract(x_out, xi), (zeros,), (dxi,))
        return x_out, dx

    return root(x_star, params, tuple(residual_consts), tuple(jacobian_consts))


# ------------------------------------------------------------------------- solver objects


class AbstractNewton(eqx.Module):
    """A Newton variant for the implicit integrators: ``init(n)`` gives its state (carried
    across time steps), ``solve`` one root from a guess. Inside jit: status codes, no raise."""

    max_iter: eqx.AbstractVar[int]

    @abc.abstractmethod
    def init(self, n: int):
        """State carried from one solve to the next (stored factors, or nothing)."""

    @abc.abstractmethod
    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        """(x, NewtonInfo, state) for residual(x) = 0 from x0.

        ``tol`` is a relative accuracy: an iterate is accepted when the step and the
        residual pass in the norms scaled by ``scale(x)`` (:class:`Scale`; default
        :func:`default_scale`; the tests of :func:`step_test` and :func:`residual_test`,
        shared by every Newton loop). ``linear_solve(matrix, rhs)`` other than
        :func:`solve_linear` replaces the equilibrated LU and reports its own conditioning
        by returning ``(x, status)`` or a :class:`LinearSolution` (re's :func:`chart_solve`
        steps over its chart singularity by least squares)."""


def _custom(linear_solve) -> bool:
    return linear_solve is not None and linear_solve is not solve_linear


class FullNewton(AbstractNewton):
    """Exact Newton: the matrix at every iteration (quadratic convergence)."""

    max_iter: int = eqx.field(static=True, default=25)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        x, info = newton_iterate(
            lambda x: (residual(x), jacobian(x)),
            lambda x, d: x + d,
            x0,
            tol=tol,
            max_iter=self.max_iter,
            residual=residual,
            linear_solve=linear_solve,
            scale=scale,
        )
        return x, info, state


class ModifiedNewton(AbstractNewton):
    """The matrix of the first iterate, factored once per solve (linear convergence)."""

    max_iter: int = eqx.field(static=True, default=25)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        x, info, _, _, _ = _iterate(
            residual,
            jacobian,
            lambda x, d: x + d,
            x0,
            None,
            tol=tol,
            max_iter=self.max_iter,
            scale=default_scale if scale is None else scale,
            policy="modified",
            max_rate=0.9,
            linear_solve=linear_solve if _custom(linear_solve) else None,
        )
        return x, info, state


class ReusedNewton(AbstractNewton):
    """The factored matrix kept across solves and refreshed when it stops contracting well;
    see :func:`newton_iterate_reusing`. Steps are accepted only once verified."""

    max_iter: int = eqx.field(static=True, default=25)
    max_rate: float = eqx.field(static=True, default=0.2)

    def init(self, n, placeholder=None):
        """The stored matrix (NaN: none yet; ``placeholder``: a NaN matrix of another
        solver's type, e.g. structured factors) and its last measured contraction rate."""
        matrix = empty_matrix(n) if placeholder is None else placeholder
        return matrix, jnp.asarray(jnp.nan, jnp.float64)  # strong: one trace

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        matrix, rate = state
        if _custom(linear_solve):  # the formulation needs its own solve: fresh matrices
            x, info, state = FullNewton(max_iter=self.max_iter).solve(
                residual, jacobian, x0, None, tol=tol, linear_solve=linear_solve, scale=scale
            )
            return x, info, (matrix, rate)
        x, info, matrix, _, rate = newton_iterate_reusing(
            residual,
            jacobian,
            x0,
            matrix,
            tol=tol,
            max_iter=self.max_iter,
            max_rate=self.max_rate,
            rate=rate,
            scale=scale,
        )
        return x, info, (matrix, rate)


NEWTON_METHODS = {"full": FullNewton, "modified": ModifiedNewton, "reuse": ReusedNewton}


def get_newton(newton, *, max_iter: int = 25) -> AbstractNewton:
    """A Newton solver object from a name ("full", "modified", "reuse") or an instance."""
    if isinstance(newton, AbstractNewton):
        return newton
    try:
        return NEWTON_METHODS[newton](max_iter=max_iter)
    except (KeyError, TypeError):
        raise ValueError(
            f"newton must be one of {sorted(NEWTON_METHODS)} or a Newton solver object, "
            f"got {newton!r}"
        ) from None
