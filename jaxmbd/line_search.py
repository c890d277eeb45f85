"""Newton with a backtracking line search, for residuals with saturating forces.

Compliant contact saturates: regularised Coulomb friction rises from zero to mu F_n within
a slip of a few ``slip_velocity`` and is flat beyond, and the Hunt–Crossley damping
saturates likewise (:mod:`jaxmbd.contact.law`). Exact Newton on such an S-shaped residual
overshoots from the flat part across the steep one and can cycle between the two flat
sides (a block coming to rest under friction at h = 1e-3 and v_s = 1e-4 m/s does).
Damping the correction until the residual decreases (Armijo's rule on the residual norm,
Dennis & Schnabel, Numerical Methods for Unconstrained Optimization and Nonlinear
Equations, 1983, sec. 6.3) makes the iteration converge from any predictor without
shrinking the time step.

Each iteration factors the matrix at the iterate (as :class:`~jaxmbd.newton.FullNewton`),
takes the correction delta = -J^{-1} F and, unless delta already passes the step test,
halves it until the merit |F / rows| (the residual in the rows' tolerances, the scaled
norm of :func:`~jaxmbd.newton.residual_test`) has decreased by the fraction 1e-4 alpha.
Acceptance is the shared test of every Newton loop of jaxmbd
(:func:`~jaxmbd.newton.step_test`, :func:`~jaxmbd.newton.residual_test`), and only after a
full step. :func:`~jaxmbd.simulate` uses it by default for models with contact pairs on the
implicit integrators (``newton=LineSearchNewton()``); pass ``newton=`` to choose another.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .newton import (
    MAX_ITERATIONS,
    NONFINITE,
    SUCCESS,
    AbstractNewton,
    FullNewton,
    NewtonInfo,
    _allowed,
    _converged,
    _custom,
    _first_failure,
    _matrix_status,
    default_scale,
    factor_matrix,
    matrix_solve,
    residual_test,
    solve_linear,
    step_test,
)

ARMIJO = 1e-4  # sufficient decrease of the merit, per unit step length


class _Carry(NamedTuple):
    x: jax.Array
    F: jax.Array
    k: jax.Array
    done: jax.Array
    status: jax.Array
    step: jax.Array


class LineSearchNewton(AbstractNewton):
    """Exact Newton damped by backtracking (see the module docstring): at most
    ``max_halvings`` halvings of a correction per iteration."""

    max_iter: int = eqx.field(static=True, default=50)
    max_halvings: int = eqx.field(static=True, default=20)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        if _custom(linear_solve):  # a formulation's own solve (re's chart): plain Newton
            return FullNewton(max_iter=self.max_iter).solve(
                residual, jacobian, x0, state, tol=tol, linear_solve=linear_solve, scale=scale
            )
        scale = default_scale if scale is None else scale
        F0 = residual(x0)
        n = F0.shape[0]

        def merit(F, row):
            return jnp.sqrt(jnp.sum((F / row) ** 2))

        def body(c: _Carry) -> _Carry:
            w, allowed = _allowed(scale(c.x), tol, (n,))
            matrix = factor_matrix(jacobian(c.x), w, allowed, keep=False)
            delta = -matrix_solve(matrix, c.F)
            test = step_test(delta, scale(c.x), tol)
            finite = jnp.isfinite(test.relative)
            delta = jnp.where(finite, delta, 0.0)
            m0 = merit(c.F, matrix.row)

            def shorter(s):
                alpha, _, _, halvings = s
                alpha = 0.5 * alpha
                F = residual(c.x + alpha * delta)
                return alpha, F, merit(F, matrix.row), halvings + 1

            def too_long(s):
                alpha, _, m, halvings = s
                decreased = m <= (1.0 - ARMIJO * alpha) * m0
                return ~decreased & (halvings < self.max_halvings) & (test.ratio > 1.0)

            F1 = residual(c.x + delta)
            alpha, F, _, _ = jax.lax.while_loop(
                too_long, shorter, (jnp.asarray(1.0, F0.dtype), F1, merit(F1, matrix.row), 0)
            )
            x = c.x + alpha * delta
            after = -matrix_solve(matrix, F)
            converged, _, _ = _converged(
                test, step_test(after, scale(x), tol), jnp.asarray(True), jnp.asarray(True),
                residual_test(F, matrix.row), jnp.asarray(False), max_rate=0.2,
            )  # fmt: skip
            status = _first_failure(
                _matrix_status(matrix), jnp.where(finite, SUCCESS, NONFINITE)
            )
            return _Carry(x, F, c.k + 1, converged & (alpha == 1.0), status, alpha * test.relative)

        def cond(c: _Carry):
            return (c.k < self.max_iter) & ~c.done & (c.status == SUCCESS)

        zero = jnp.asarray(0)
        init = _Carry(x0, F0, zero, jnp.asarray(False), jnp.asarray(SUCCESS),
                      jnp.asarray(jnp.inf, F0.dtype))  # fmt: skip
        out = jax.lax.while_loop(cond, body, init)
        status = jnp.where((out.status == SUCCESS) & ~out.done, MAX_ITERATIONS, out.status)
        status = jnp.where((status == SUCCESS) & ~jnp.all(jnp.isfinite(out.F)), NONFINITE, status)
        return out.x, NewtonInfo(out.k, status, jnp.linalg.norm(out.F), out.step), state
