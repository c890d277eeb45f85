"""Newton damped by backtracking on ||F|| (:class:`DampedNewton`), the energy-momentum
integrator's default: large rotation steps (the gyro top at h = 0.05) need it."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import NONFINITE, SUCCESS, as_status, first_failure
from ._convergence import allowed_step, default_scale, residual_test, step_test
from ._iterate import NewtonInfo, solve_outcome
from ._linear import (
    LinearSolution,
    as_solution,
    is_custom_solve,
    row_tolerances,
    solve_linear,
    solve_with_condition,
)
from ._policies import AbstractNewton


class DampedNewton(AbstractNewton):
    """Newton with a backtracking line search on ||F|| (Armijo, halving up to
    ``max_halvings`` times): the "damping for large rotation steps" of the notes (gyro top
    at h = 0.05 turns by ~2.6 rad per step). An iterate is accepted by the tests of every
    Newton solver of jaxmbd (:func:`~jaxmbd.newton.step_test`,
    :func:`~jaxmbd.newton.residual_test`): the scaled step passes (|delta_j| <= tol w_j +
    e_j, w the unknowns' magnitudes, :class:`~jaxmbd.newton.Scale`; such a correction is
    taken undamped) and the residual at the new iterate passes |F_i| <= (|J| (tol w + e))_i;
    ``tol`` is relative. Every linear solve reports its conditioning
    (:func:`~jaxmbd.newton.solve_with_condition`, or a caller's solve returning a status):
    a singular or near-singular matrix ends the solve with NONFINITE or ILL_CONDITIONED."""

    max_iter: int = eqx.field(static=True, default=30)
    max_halvings: int = eqx.field(static=True, default=10)

    def init(self, n):
        return None

    def solve(
        self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None, **_
    ):
        """``jacobian=None``: the residual and its forward-mode Jacobian in one pass. The
        residual is traced twice in all (Newton point, line search), which keeps the
        compile time of large reduced residuals down."""
        scale = default_scale if scale is None else scale
        if jacobian is None:

            def value_and_jacobian(x):
                J, F = jax.jacfwd(lambda y: (lambda r: (r, r))(residual(y)), has_aux=True)(x)
                return F, J
        else:

            def value_and_jacobian(x):
                return residual(x), jacobian(x)

        def correction(J, F) -> LinearSolution:
            if is_custom_solve(linear_solve):
                return as_solution(linear_solve(J, F))
            return LinearSolution(*solve_with_condition(J, F))

        def cond(carry):
            _, k, _, status, _, converged = carry
            return (k < self.max_iter) & ~converged & (status == SUCCESS)

        def body(carry):
            x, k, _, _, _, _ = carry
            F, J = value_and_jacobian(x)
            solution = correction(J, F)
            delta = -solution.x
            test = step_test(delta, scale(x), tol)
            finite = jnp.isfinite(test.relative)
            delta = jnp.where(finite, delta, 0.0)
            _, allowed = allowed_step(scale(x), tol, x.shape)
            alpha, f_new, F1 = self._line_search(residual, x, delta, F)
            full = test.ratio <= 1.0  # a converged correction is taken undamped
            alpha = jnp.where(full, 1.0, alpha)
            f_new = jnp.where(full, jnp.linalg.norm(F1), f_new)
            converged = full & (residual_test(F1, row_tolerances(J, allowed)) <= 1.0)
            status = first_failure(solution.status, jnp.where(finite, SUCCESS, NONFINITE))
            step = jnp.where(finite, test.relative, jnp.inf)
            return x + alpha * delta, k + 1, step, status, f_new, converged

        init = (x0, jnp.asarray(0), jnp.asarray(jnp.inf, x0.dtype), as_status(SUCCESS),
                jnp.asarray(jnp.inf, x0.dtype), jnp.asarray(False))  # fmt: skip
        x, k, step, status, res_norm, converged = jax.lax.while_loop(cond, body, init)
        status = solve_outcome(status, converged, jnp.isfinite(res_norm))
        return x, NewtonInfo(k, status, res_norm, step), state

    def _line_search(self, residual, x, delta, F):
        """Backtracking: alpha = 1, 1/2, ... until Armijo's ||F(x + alpha delta)|| <=
        (1 - 1e-4 alpha) ||F(x)|| (the first trial always runs). Returns (alpha, its ||F||,
        F at the full step)."""

        def ls_cond(c):
            alpha, f_new, j, _ = c
            armijo = f_new <= (1.0 - 1e-4 * alpha) * fnorm
            return (j == 0) | ((j <= self.max_halvings) & ~armijo)

        def ls_body(c):
            alpha, _, j, F1 = c
            alpha = jnp.where(j == 0, 1.0, 0.5 * alpha)
            F_trial = residual(x + alpha * delta)
            return alpha, jnp.linalg.norm(F_trial), j + 1, jnp.where(j == 0, F_trial, F1)

        fnorm = jnp.linalg.norm(F)
        one, inf = jnp.asarray(1.0, x.dtype), jnp.asarray(jnp.inf, x.dtype)
        init = (one, inf, jnp.asarray(0), jnp.full_like(F, jnp.inf))
        alpha, f_new, _, F1 = jax.lax.while_loop(ls_cond, ls_body, init)
        return alpha, f_new, F1
