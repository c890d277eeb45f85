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

Each iteration factors the matrix at the iterate (as :class:`~jaxmbd.newton.FullNewton`;
or hands it to the formulation's own linear solve, re's chart step-over, which reports its
conditioning),
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

from .. import _config  # noqa: F401
from .._results import NONFINITE, SUCCESS, as_status, first_failure
from . import (
    AbstractNewton,
    LinearSolution,
    NewtonInfo,
    default_scale,
    factor_matrix,
    matrix_solve,
    residual_test,
    solve_linear,
    step_test,
)
from ._convergence import allowed_step, converged
from ._iterate import solve_outcome
from ._linear import as_solution, is_custom_solve, matrix_status

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

    # a pile of capsules landing at h = 1e-3 takes up to 60 (benchmarks/contact.py)
    max_iter: int = eqx.field(static=True, default=100)
    max_halvings: int = eqx.field(static=True, default=20)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear, scale=None):
        scale = default_scale if scale is None else scale
        F0 = residual(x0)
        n = F0.shape[0]
        custom = is_custom_solve(linear_solve)

        def linearise(x):
            """(solve(F) -> LinearSolution of J^{-1} F, the rows' tolerances, status)."""
            w, allowed = allowed_step(scale(x), tol, (n,))
            J = jacobian(x)
            if not custom:
                matrix = factor_matrix(J, w, allowed, keep=False)
                ok = jnp.asarray(SUCCESS)

                def solve(F):
                    return LinearSolution(matrix_solve(matrix, F), ok, jnp.asarray(False))

                return solve, matrix.row, matrix_status(matrix)
            # a formulation's own solve (re's chart step-over): it reports its conditioning
            row = jnp.abs(J) @ allowed
            row = jnp.where(row > 0, row, 1.0)

            def solve(F):
                out = as_solution(linear_solve(J, F))
                return LinearSolution(
                    out.x, jnp.asarray(out.status), jnp.asarray(out.least_squares)
                )

            return solve, row, jnp.asarray(SUCCESS)

        def merit(F, row):
            return jnp.sqrt(jnp.sum((F / row) ** 2))

        def body(c: _Carry) -> _Carry:
            solve, row, matrix_status = linearise(c.x)
            correction = solve(c.F)
            delta = -correction.x
            test = step_test(delta, scale(c.x), tol)
            finite = jnp.isfinite(test.relative)
            delta = jnp.where(finite, delta, 0.0)
            m0 = merit(c.F, row)

            def shorter(s):
                alpha, _, _, halvings = s
                alpha = 0.5 * alpha
                F = residual(c.x + alpha * delta)
                return alpha, F, merit(F, row), halvings + 1

            def too_long(s):
                alpha, _, m, halvings = s
                decreased = m <= (1.0 - ARMIJO * alpha) * m0
                # a passing step or a least-squares step-over (whose residual is waived):
                # taken whole
                whole = (test.ratio <= 1.0) | correction.least_squares
                return ~decreased & (halvings < self.max_halvings) & ~whole

            F1 = residual(c.x + delta)
            alpha, F, _, _ = jax.lax.while_loop(
                too_long, shorter, (jnp.asarray(1.0, F0.dtype), F1, merit(F1, row), 0)
            )
            x = c.x + alpha * delta
            after = -solve(F).x
            accepted, _, _ = converged(
                test, step_test(after, scale(x), tol), jnp.asarray(True), jnp.asarray(True),
                residual_test(F, row), correction.least_squares, max_rate=0.2,
            )  # fmt: skip
            status = first_failure(
                matrix_status, correction.status, jnp.where(finite, SUCCESS, NONFINITE)
            )
            return _Carry(x, F, c.k + 1, accepted & (alpha == 1.0), status, alpha * test.relative)

        def cond(c: _Carry):
            return (c.k < self.max_iter) & ~c.done & (c.status == SUCCESS)

        zero = jnp.asarray(0)
        init = _Carry(x0, F0, zero, jnp.asarray(False), as_status(SUCCESS),
                      jnp.asarray(jnp.inf, F0.dtype))  # fmt: skip
        out = jax.lax.while_loop(cond, body, init)
        status = solve_outcome(out.status, out.done, jnp.all(jnp.isfinite(out.F)))
        return out.x, NewtonInfo(out.k, status, jnp.linalg.norm(out.F), out.step), state
