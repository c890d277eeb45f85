"""The Newton iteration of the full, modified and reused-matrix policies: one loop
(:func:`iterate`) with the equilibrated LU and its condition estimate, or a caller's linear
solve; the acceptance test is :mod:`jaxmbd.newton._convergence`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import MAX_ITERATIONS, NONFINITE, SUCCESS, as_status, first_failure
from ..compiled.counted_scan import strong_types
from ..linear.structured import BlockFactors
from ._convergence import Scale, allowed_step, converged, default_scale, residual_test, step_test
from ._linear import (
    CallerMatrix,
    IterationMatrix,
    LinearSolution,
    as_solution,
    empty_matrix,
    factor_matrix,
    is_custom_solve,
    matrix_solve,
    matrix_status,
    placeholder_like,
)
from ._loops import refresh_where, while_loop_keeping


class NewtonInfo(NamedTuple):
    """``residual_norm``: ||F||_2 at the returned iterate (for reports; the acceptance test
    itself is scaled, see :class:`Scale`); ``step_norm``: the last step relative to the
    unknowns' magnitudes, max_j |delta_j| / w_j."""

    iterations: jax.Array
    status: jax.Array
    residual_norm: jax.Array
    step_norm: jax.Array


def solve_outcome(status, converged, finite):
    """The status a Newton loop ends with (every loop of jaxmbd): the first failure of its
    iterations (``status``: a singular matrix, a failed linear solve, a non-finite
    correction), else MAX_ITERATIONS where it did not converge, else NONFINITE where its
    last residual is not ``finite``."""
    return first_failure(
        status,
        jnp.where(converged, SUCCESS, MAX_ITERATIONS),
        jnp.where(finite, SUCCESS, NONFINITE),
    )


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


def iterate(
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
    x0 = strong_types(x0)
    F0 = strong_types(residual(x0))
    n = F0.shape[0]
    factor = _factor_fn(jacobian, scale, tol, n, x0, F0, policy, linear_solve, row_tolerance)

    def solve(matrix, F) -> LinearSolution:
        if linear_solve is None:
            return LinearSolution(-matrix_solve(matrix, F), jnp.asarray(SUCCESS), False)
        out = as_solution(linear_solve(matrix.jacobian, F))
        return LinearSolution(-out.x, jnp.asarray(out.status), jnp.asarray(out.least_squares))

    # a nested program whose trace JAX keeps: the placeholder's shapes below and the loop's
    # refreshes (at the loop carry's types, which have no weak types) share one trace
    @jax.jit
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
            # the loop does not select it, see while_loop_keeping)
            stale = c.stale & cond(c)
            matrix, correction = refresh_where(
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
        accepted, keep, theta = converged(
            test, after_test, fresh, fresh | c.trusted, residual_test(F, matrix.row[:n]),
            correction.least_squares, max_rate=max_rate,
        )  # fmt: skip
        status = first_failure(
            jnp.where(fresh, matrix_status(matrix), SUCCESS),
            correction.status,
            jnp.where(finite, SUCCESS, NONFINITE),
        )
        return _Carry(
            x, F, after, c.k + 1, matrix, status, accepted, ~keep,
            fresh | c.trusted | (theta <= max_rate),
            jnp.where(fresh, c.rate, theta), c.refreshes + fresh.astype(c.refreshes.dtype),
            test.relative,
        )  # fmt: skip

    dtype = F0.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    zero = jnp.asarray(0)
    stale = ~jnp.isfinite(matrix.rcond)  # a NaN placeholder: factor first
    init = _Carry(x0, F0, correction, zero, matrix, as_status(SUCCESS), jnp.asarray(False),
                  stale, jnp.asarray(False), jnp.asarray(rate, dtype), zero, inf)  # fmt: skip
    if policy != "full":  # the matrix changes only by a refresh of a running member
        out = while_loop_keeping(cond, body, init, frozenset({_Carry._fields.index("matrix")}))
    else:
        out = jax.lax.while_loop(cond, body, init)
    status = solve_outcome(out.status, out.done, jnp.all(jnp.isfinite(out.F)))
    info = NewtonInfo(out.k, status, jnp.linalg.norm(out.F), out.step)
    return out.x, info, out.matrix, out.refreshes, out.rate


def _factor_fn(jacobian, scale, tol, n, x0, F0, policy, linear_solve, row_tolerance):
    """x -> the iteration matrix at x: the equilibrated LU (:func:`factor_matrix`; full
    Newton solves once with each matrix, so it is never inverted), or the caller's
    :class:`CallerMatrix` with its row tolerances."""
    if linear_solve is None:

        def factor(x):
            w, allowed = allowed_step(scale(x), tol, (n,))
            return factor_matrix(jacobian(x), w, allowed, keep=policy != "full")

        return factor
    # the tangent's size (a rectangular J: the unknowns', not the rows')
    J0 = jax.eval_shape(jacobian, x0)
    tangent = jax.eval_shape(lambda J, F: as_solution(linear_solve(J, F)).x, J0, F0).shape

    def caller_matrix(x):
        J = jacobian(x)
        _, allowed = allowed_step(scale(x), tol, tangent)
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
    residual both pass (see :func:`iterate` and :class:`Scale`; ``tol`` is relative).

    ``linear_solve(J, rhs)`` replaces the equilibrated LU (e.g. a minimum-norm solve for a
    rectangular J, or re's chart-singularity fallback :func:`chart_solve`); it returns the
    solution, or ``(solution, status)`` (:func:`solve_with_condition`), or a
    :class:`LinearSolution`, so that it reports its own conditioning. With it, J may be any
    object the solve understands, and ``row_tolerance(J, allowed)`` (default |J| allowed)
    gives the residual test's per-row tolerances.
    Returns (x, NewtonInfo). No exception inside jit: ``info.status`` says what happened.
    """
    residual = residual if residual is not None else (lambda x: residual_and_jacobian(x)[0])
    x, info, _, _, _ = iterate(
        residual,
        lambda x: residual_and_jacobian(x)[1],
        retract,
        x0,
        None,
        tol=tol,
        max_iter=max_iter,
        scale=default_scale if scale is None else scale,
        policy="full",
        linear_solve=linear_solve if is_custom_solve(linear_solve) else None,
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

    An iterate is accepted only when verified (see :func:`iterate`): the kept matrix's
    correction there, delta', bounds its error by |delta'| / (1 - theta) within the step
    test, with theta <= ``max_rate`` measured in this solve, and its scaled residual passes;
    a step from a kept matrix is never accepted on faith, nor on a rate remembered from an
    earlier solve. This is the stopping rule of simplified Newton in stiff integrators
    (Hairer & Wanner, IV.8) plus a residual check. Returns (x, NewtonInfo, matrix,
    refreshes, rate) with rate the last measured contraction.
    """
    if not isinstance(matrix, (IterationMatrix, BlockFactors)):  # bare LU: refactor
        matrix = empty_matrix(x0.shape[0], x0.dtype)
    return iterate(
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
