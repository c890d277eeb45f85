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
    row = jnp.max(jnp.abs(frozen), axis=1)
    row = jnp.where(row > 0, row, 1.0)  # an all-zero row: singular, caught by the pivots
    lu, permutation = dense_lu(frozen / row[:, None])
    rcond = _pivot_ratio(jnp.abs(jnp.diagonal(lu)))
    scale = row if rhs.ndim == 1 else row[:, None]
    # differentiated implicitly, so the factors themselves are never differentiated
    x = jax.lax.custom_linear_solve(
        lambda y: matrix @ y,
        rhs,
        solve=lambda _, b: lu_solve_nondiff(lu, permutation, b / scale),
        transpose_solve=lambda _, b: lu_solve_nondiff(lu, permutation, b, transpose=True) / scale,
    )
    return x, condition_status(rcond, x)


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


def chart_solve(matrix, rhs, *, least_squares):
    """One linear solve of a Newton iteration in a chart with singularities: the
    row-equilibrated LU, non-finite (NaN, reported as NONFINITE) when its pivot ratio is
    below RCOND_MIN unless ``least_squares`` allows stepping over the chart singularity
    (:func:`checked_solver`)."""
    solve, rcond = checked_solver(matrix, least_squares=least_squares)
    x = solve(rhs)
    refused = jnp.logical_and(rcond < RCOND_MIN, jnp.logical_not(least_squares))
    return jnp.where(refused, jnp.nan, x)


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


def _step_ratio(delta, w, allowed, *more):
    """(max |delta| / allowed: <= 1 passes the step test, max |delta| / w: relative step,
    then max |delta| / m for each further vector m), in one reduction."""
    denominators = jnp.stack([jnp.broadcast_to(d, delta.shape) for d in (allowed, w, *more)])
    return tuple(jnp.max(jnp.abs(delta)[None] / denominators, axis=1))


def _residual_ratio(F, row_tol):
    """max |F_i| / row_tol_i (<= 1 passes the residual test); NaN-safe (NaN -> inf)."""
    r = jnp.max(jnp.abs(F) / row_tol)
    return jnp.where(jnp.isnan(r), jnp.inf, r)


class LUFactors(NamedTuple):
    """P M = L U packed as LAPACK does (unit lower L below the diagonal, U on and above)."""

    lu: jax.Array
    permutation: jax.Array


def lu_factors(matrix) -> LUFactors:
    if isinstance(matrix, BlockMatrix):  # structured: block LU on the body-joint graph
        return factor_plain(matrix)
    return LUFactors(*lu_factor(matrix))  # differentiable (kinematics), no batched getrf


def lu_factors_solve(factors: LUFactors, rhs, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from the factors: a permutation and two triangular solves.

    ``rhs`` is a vector or a matrix of right-hand sides."""
    if isinstance(factors, BlockFactors):
        if rhs.ndim == 2:
            return jax.vmap(lambda b: factors_solve(factors, b, transpose), 1, 1)(rhs)
        return factors_solve(factors, rhs, transpose)
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
    row = jnp.abs(J) @ allowed
    row = jnp.where(row > 0, row, 1.0)  # an all-zero row: singular, caught by the pivots
    scaled = J * w[None, :] / row[:, None]
    empty = jnp.zeros((0, 0), J.dtype)
    if keep and _keeps_inverse(n):
        # one matrix: LAPACK's getrf and the inverse of its factors (under vmap member by
        # member, see jaxmbd.linear.dense)
        scaled_inverse, pivots = inverse_and_pivots(scaled)
        rcond = _pivot_ratio(pivots)
        status = _factor_status(scaled_inverse, rcond)
        inverse = w[:, None] * scaled_inverse / row[None, :]
        return IterationMatrix(inverse, empty, jnp.zeros((0,), jnp.int32), w, row, rcond, status)
    lu, permutation = dense_lu(scaled)
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
    the equilibrated LU factors (structured: block substitution)."""
    if isinstance(matrix, BlockFactors):
        return factors_solve(matrix, rhs)
    if matrix.inverse.size:
        return matrix.inverse @ rhs
    return matrix.col * lu_solve_nondiff(matrix.lu.mT, matrix.permutation, rhs / matrix.row)


def _factor_status(factors, rcond):
    """NONFINITE for an exactly singular (a zero pivot) or non-finite matrix (its LU
    factors or its inverse, ``factors``),
    ILL_CONDITIONED for a pivot ratio below RCOND_MIN."""
    return condition_status(rcond, factors)


def _matrix_status(matrix: IterationMatrix):
    """The factorisation's status (stored for dense matrices, from the block factors)."""
    if isinstance(matrix, IterationMatrix):
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

            return tuple(
                n if i in keep else jax.tree_util.tree_map(select, n, o)
                for i, (n, o) in enumerate(zip(new, c, strict=True))
            )

        out = jax.lax.while_loop(lambda c: jnp.any(active(c)), step, init)
        return out, all_batched(out)

    return loop(init, body_consts, cond_consts)


def _iterate(
    residual: Callable,
    jacobian: Callable,
    retract: Callable,
    x0,
    matrix: IterationMatrix,
    *,
    tol,
    max_iter: int,
    scale: Callable,
    policy: str,
    max_rate: float = 0.2,
    rate=jnp.nan,
):
    """The Newton loop shared by the three variants (``policy``: "full", "modified",
    "reuse"). One iteration: (maybe) refresh the matrix at x, delta = -J^{-1} F(x), x (+)
    delta, F at the new iterate. The iterate is accepted when

    * the scaled step passes: |delta_j| <= tol w_j + e_j / rcond (paper eq. 46, relative;
      rcond, the matrix's estimated reciprocal condition, amplifies the round-off floor),
      or, once a contraction theta < 1 has been measured in this solve, the error estimate
      of the new iterate theta / (1 - theta) |delta| passes it (Hairer & Wanner IV.8, eq.
      8.10: the iterate is within that distance of the root);
    * the scaled residual at the new iterate passes: |F_i| <= (|J| (tol w + e))_i, or it
      has stagnated at its round-off floor (not halved after two steps within tolerance);
    * the matrix is verified: freshly factored at that iterate (an exact Newton step), or,
      for a kept matrix, with a contraction rate theta <= ``max_rate`` measured in this
      solve, or with a step inside the round-off floor e / rcond, where the ratio of two
      steps is noise (so a kept matrix takes at least two iterations; ``rate``, the last
      solve's measured rate, is only reported). The residual test still applies.

    With a kept matrix, the current iterate x_k is accepted before it is moved (no
    residual evaluation at x_k + delta) when its own residual passed, the contraction theta
    measured in this solve verifies the matrix as above, and the correction delta just
    computed from x_k bounds its error within tolerance: |delta| / (1 - theta) (Hairer &
    Wanner IV.8). This saves the last residual of a solve whose iterate already passes
    (e.g. at loose tolerances, where the kept matrix's first correction lands within it).

    A fresh matrix that is singular (NONFINITE) or near-singular (ILL_CONDITIONED) ends the
    solve with that status.
    """
    F0 = residual(x0)
    n = F0.shape[0]

    def factor(x):
        w, allowed = _allowed(scale(x), tol, (n,))
        # full Newton solves once with each matrix: inverting it would only cost
        return factor_matrix(jacobian(x), w, allowed, keep=policy != "full")

    if policy == "modified":  # one matrix per solve: under vmap one batched factorisation
        matrix = factor(x0)
    elif matrix is None:  # a NaN placeholder of the factors' type (refreshed before use)
        matrix = placeholder_like(jax.eval_shape(factor, x0))

    def cond(carry):
        k, status, done = carry[2], carry[4], carry[5]
        return (k < max_iter) & ~done & (status == SUCCESS)

    def body(carry):
        x, F, k, matrix, _, _, stale, previous, known, refreshes, res_prev, _, ok_prev = carry
        if policy == "full":
            matrix, fresh = factor(x), jnp.asarray(True)
        elif policy == "modified":  # factored at x0, before the loop
            fresh = k == 0
        else:
            # only a member that still iterates: a finished one keeps its matrix (batched,
            # the loop does not select it, see _while_loop_keeping)
            running = (k < max_iter) & ~carry[5] & (carry[4] == SUCCESS)
            stale = stale & running
            matrix = _refresh_where(stale, x, matrix, factor)
            fresh = stale
        delta = -matrix_solve(matrix, F)
        s = scale(x)
        w, _ = _allowed(s, tol, delta.shape)
        # attainable step: round-off e amplified by the (equilibrated) matrix's condition
        noise = jnp.broadcast_to(s.resolution, delta.shape) / jnp.maximum(matrix.rcond, _EPS)
        step_ok, step, floor_ratio = _step_ratio(delta, w, tol * w + noise, noise)
        finite = jnp.isfinite(step)
        theta = step / previous  # previous = inf after a refresh: theta 0
        measured = ~fresh & jnp.isfinite(previous)
        # a step inside the round-off floor measures no contraction: the ratio of two
        # round-off steps is noise, and refreshing the matrix for it would gain nothing
        at_floor = floor_ratio <= 1.0
        contracts = (theta <= max_rate) | at_floor
        # a kept matrix is trusted only on a contraction measured in this solve, never on
        # a rate remembered from an earlier one (the problem has moved since)
        verified = fresh | (measured & contracts)
        # x itself passes, kept matrix: its residual passed (res_prev) and the correction
        # from it bounds its error. (A fresh matrix takes its exact Newton step instead:
        # quadratic convergence makes that iterate far more accurate for one residual.)
        bound = jnp.where(
            theta < 1.0, step_ok / (1.0 - theta), jnp.where(at_floor, step_ok, jnp.inf)
        )
        current_done = finite & measured & contracts & (bound <= 1.0) & (res_prev <= 1.0)
        accept = finite & (fresh | (theta < 1.0) | at_floor | (policy == "modified"))
        move = accept & ~current_done
        x_new = jax.tree_util.tree_map(
            lambda a, b: jnp.where(move, a, b),
            retract(x, jnp.where(move, delta, 0.0)),
            x,
        )
        # unbatched, the residual at an iterate that is not taken is not evaluated (under
        # vmap the cond is a select and both are)
        F_new = jax.lax.cond(move, residual, lambda _: F, x_new)
        res = _residual_ratio(F_new, matrix.row[:n])
        # the residual's own round-off floor (e.g. eps / c_q in a constraint row whose
        # gradient vanishes) can lie above its tolerance: a residual that no longer halves
        # after two steps within tolerance has reached it
        stagnated = ok_prev & (res > 0.5 * res_prev)
        # error of the new iterate from the contraction measured in this solve (Hairer &
        # Wanner IV.8, eq. 8.10): ||x_new - x*|| <= theta / (1 - theta) ||delta||, so a
        # contracting iteration stops one step earlier than a bare step test would
        contracting = accept & (k > 0) & jnp.isfinite(previous) & (theta < 1.0)
        estimate = jnp.where(contracting, theta / (1.0 - theta), 1.0) * step_ok
        step_passed = accept & (jnp.minimum(step_ok, estimate) <= 1.0)
        done = current_done | (step_passed & verified & ((res <= 1.0) | stagnated))
        res = jnp.where(current_done, res_prev, res)
        status = jnp.where(fresh, _matrix_status(matrix), SUCCESS)
        status = jnp.where((status == SUCCESS) & ~finite, NONFINITE, status)
        known = jnp.where(fresh, jnp.nan, jnp.where(measured & accept, theta, known))
        stale = ~(accept & (fresh | contracts))
        previous = jnp.where(accept, step, previous)
        return (
            x_new,
            F_new,
            k + 1,
            matrix,
            status,
            done,
            stale,
            previous,
            known,
            refreshes + fresh.astype(refreshes.dtype),
            jnp.where(accept, res, res_prev),
            step,
            jnp.where(accept, step_passed, ok_prev),
        )

    dtype = F0.dtype
    init = (
        x0,
        F0,
        jnp.asarray(0),
        matrix,
        jnp.asarray(SUCCESS),
        jnp.asarray(False),
        ~jnp.isfinite(matrix.rcond),  # a NaN placeholder: factor first
        jnp.asarray(jnp.inf, dtype),
        jnp.asarray(rate, dtype),
        jnp.asarray(0),
        jnp.asarray(jnp.inf, dtype),
        jnp.asarray(jnp.inf, dtype),
        jnp.asarray(False),
    )
    if policy != "full":  # the matrix (carry[3]) changes only by a refresh of a running member
        out = _while_loop_keeping(cond, body, init, frozenset({3}))
    else:
        out = jax.lax.while_loop(cond, body, init)
    x, F, k, matrix, status, done, _, _, known, refreshes, _, step, _ = out
    status = jnp.where((status == SUCCESS) & ~done, MAX_ITERATIONS, status)
    status = jnp.where((status == SUCCESS) & ~jnp.all(jnp.isfinite(F)), NONFINITE, status)
    return x, NewtonInfo(k, status, jnp.linalg.norm(F), step), matrix, refreshes, known


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
    rectangular J, or re's chart-singularity fallback); no condition estimate is made then.
    With it, J may be any object the solve understands, and ``row_tolerance(J, allowed)``
    (default |J| allowed) gives the residual test's per-row tolerances.
    Returns (x, NewtonInfo). No exception inside jit: ``info.status`` says what happened.
    """
    scale = default_scale if scale is None else scale
    residual = residual if residual is not None else (lambda x: residual_and_jacobian(x)[0])
    if linear_solve is None or linear_solve is solve_linear:
        x, info, _, _, _ = _iterate(
            residual,
            lambda x: residual_and_jacobian(x)[1],
            retract,
            x0,
            None,
            tol=tol,
            max_iter=max_iter,
            scale=scale,
            policy="full",
        )
        return x, info
    return _iterate_custom(
        residual_and_jacobian, retract, x0, tol=tol, max_iter=max_iter, scale=scale,
        linear_solve=linear_solve, row_tolerance=row_tolerance,
    )  # fmt: skip


def _iterate_custom(
    residual_and_jacobian, retract, x0, *, tol, max_iter, scale, linear_solve,
    row_tolerance=None,
):  # fmt: skip
    """Full Newton with a caller's linear solve (no equilibration, no condition estimate):
    a minimum-norm solve for a rectangular J, or re's fallback at its chart singularity.

    Accepted as in :func:`_iterate`: the scaled step passes and the scaled residual passes
    or has stagnated at its floor. At re's chart singularity J is singular and the
    minimum-norm step leaves the part of F outside J's range: the residual then stagnates
    and the step is taken (issue 10, item 1 asks for a flagged, verified mechanism)."""

    def cond(carry):
        k, status, done = carry[1], carry[2], carry[3]
        return (k < max_iter) & ~done & (status == SUCCESS)

    def body(carry):
        x, k, _, _, res_prev, _, ok_prev = carry
        F, J = residual_and_jacobian(x)
        delta = -linear_solve(J, F)
        w, allowed = _allowed(scale(x), tol, delta.shape)
        step_ok, step = _step_ratio(delta, w, allowed)
        finite = jnp.isfinite(step)
        x_new = retract(x, jnp.where(finite, delta, 0.0))
        F_new = residual_and_jacobian(x_new)[0]
        rows = jnp.abs(J) @ allowed if row_tolerance is None else row_tolerance(J, allowed)
        res = _residual_ratio(F_new, rows)
        stagnated = ok_prev & (res > 0.5 * res_prev)
        done = finite & (step_ok <= 1.0) & ((res <= 1.0) | stagnated)
        status = jnp.where(finite, SUCCESS, NONFINITE)
        return x_new, k + 1, status, done, res, step, step_ok <= 1.0

    inf = jnp.asarray(jnp.inf, jnp.result_type(float))
    false = jnp.asarray(False)
    init = (x0, jnp.asarray(0), jnp.asarray(SUCCESS), false, inf, inf, false)
    x, k, status, done, _, step, _ = jax.lax.while_loop(cond, body, init)
    res = jnp.linalg.norm(residual_and_jacobian(x)[0])
    status = jnp.where((status == SUCCESS) & ~done, MAX_ITERATIONS, status)
    return x, NewtonInfo(k, status, res, step)


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
    factored at the current iterate, when the stored one contracts worse than ``max_rate``
    (theta = ||delta_k|| / ||delta_{k-1}|| in the scaled norm), or gives a diverging or
    non-finite step (that step is rejected and retried), or holds NaN (no matrix yet).
    Across the steps of an integrator the matrix changes by O(h), so most steps need no
    refresh: an iteration then costs one residual and one matrix-vector product instead of a
    Jacobian and an LU factorisation.

    An iterate is accepted only when verified (see :func:`_iterate`): its scaled step and
    scaled residual pass and its matrix is fresh or measured in this solve to contract
    (theta <= ``max_rate``); a step from a kept matrix is never accepted on faith, nor on a
    rate remembered from an earlier solve. This is the stopping rule of simplified Newton
    in stiff integrators (Hairer & Wanner, IV.8) plus a residual check. Returns (x,
    NewtonInfo, matrix, refreshes, rate) with rate the last measured contraction.
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
        :func:`default_scale`). ``linear_solve(matrix, rhs)`` other than
        :func:`solve_linear` replaces the equilibrated LU (re falls back to a minimum-norm
        solve at its chart singularity)."""


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
        scale = default_scale if scale is None else scale
        if _custom(linear_solve):
            matrix = jacobian(x0)
            x, info = _iterate_custom(
                lambda x: (residual(x), matrix),
                lambda x, d: x + d,
                x0,
                tol=tol,
                max_iter=self.max_iter,
                scale=scale,
                linear_solve=linear_solve,
            )
            return x, info, state
        x, info, _, _, _ = _iterate(
            residual,
            jacobian,
            lambda x, d: x + d,
            x0,
            None,
            tol=tol,
            max_iter=self.max_iter,
            scale=scale,
            policy="modified",
            max_rate=0.9,
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
