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

#: Status codes returned by solvers inside jit.
SUCCESS = 0
MAX_ITERATIONS = 1
NONFINITE = 2  # singular iteration matrix or a NaN/inf residual

STATUS_MESSAGES = {
    SUCCESS: "converged",
    MAX_ITERATIONS: "Newton iteration did not converge within the iteration limit",
    NONFINITE: "singular iteration matrix or non-finite residual",
}


def solve_linear(matrix, rhs):
    """Dense LU solve: a singular matrix gives non-finite values, reported as NONFINITE."""
    return jnp.linalg.solve(matrix, rhs)


def solve_linear_or_least_squares(matrix, rhs):
    """LU solve; if the matrix is exactly singular (non-finite result), the minimum-norm
    least-squares solution instead, e.g. Euler angles passing theta = 0 on a grid point."""
    x = jnp.linalg.solve(matrix, rhs)
    return jax.lax.cond(
        jnp.all(jnp.isfinite(x)),
        lambda: x,
        lambda: jnp.linalg.lstsq(matrix, rhs)[0],
    )


class NewtonInfo(NamedTuple):
    iterations: jax.Array
    status: jax.Array
    residual_norm: jax.Array
    step_norm: jax.Array


def newton_iterate(
    residual_and_jacobian: Callable[[Any], tuple[jax.Array, jax.Array]],
    retract: Callable[[Any, jax.Array], Any],
    x0,
    *,
    tol,
    max_iter: int,
    residual: Callable[[Any], jax.Array] | None = None,
    linear_solve: Callable = solve_linear,
):
    """Plain Newton: x <- x (+) delta with J delta = -F, until ||delta||_2 < tol (eq. 46).

    Returns (x, NewtonInfo). No exception inside jit: ``info.status`` says what happened.
    """

    def cond(carry):
        _, k, step, status = carry
        return (k < max_iter) & (step >= tol) & (status == SUCCESS)

    def body(carry):
        x, k, _, _ = carry
        F, J = residual_and_jacobian(x)
        delta = -linear_solve(J, F)  # J may be None when linear_solve holds a factorisation
        step = jnp.linalg.norm(delta)
        finite = jnp.isfinite(step)
        x_new = retract(x, jnp.where(finite, delta, 0.0))
        status = jnp.where(finite, SUCCESS, NONFINITE)
        return x_new, k + 1, jnp.where(finite, step, jnp.inf), status

    init = (x0, jnp.asarray(0), jnp.asarray(jnp.inf), jnp.asarray(SUCCESS))
    x, k, step, status = jax.lax.while_loop(cond, body, init)
    status = jnp.where((status == SUCCESS) & (step >= tol), MAX_ITERATIONS, status)
    res = residual(x) if residual is not None else residual_and_jacobian(x)[0]
    res_norm = jnp.linalg.norm(res)
    status = jnp.where((status == SUCCESS) & ~jnp.isfinite(res_norm), NONFINITE, status)
    return x, NewtonInfo(k, status, res_norm, step)


class LUFactors(NamedTuple):
    """P M = L U packed as LAPACK does (unit lower L below the diagonal, U on and above)."""

    lu: jax.Array
    permutation: jax.Array


def lu_factors(matrix) -> LUFactors:
    lu, _, permutation = jax.lax.linalg.lu(matrix)
    return LUFactors(lu, permutation)


def empty_lu_factors(n: int, dtype=jnp.float64) -> LUFactors:
    """Placeholder factors (NaN): :func:`newton_iterate_reusing` factors before its first use."""
    return LUFactors(jnp.full((n, n), jnp.nan, dtype), jnp.arange(n, dtype=jnp.int32))


def lu_factors_solve(factors: LUFactors, rhs, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from the factors: a permutation and two triangular solves.

    ``rhs`` is a vector or a matrix of right-hand sides."""
    lu, permutation = factors
    b = rhs if rhs.ndim == 2 else rhs[:, None]
    solve = jax.lax.linalg.triangular_solve
    if transpose:  # M^T = U^T L^T P: solve U^T, then L^T, then undo P
        y = solve(lu, b, left_side=True, lower=False, transpose_a=True)
        y = solve(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
        x = jnp.zeros_like(y).at[permutation].set(y)
    else:
        y = solve(lu, b[permutation], left_side=True, lower=True, unit_diagonal=True)
        x = solve(lu, y, left_side=True, lower=False)
    return x if rhs.ndim == 2 else x[:, 0]


def lu_solver(matrix):
    """Factor once, solve many: returns ``solve(rhs, transpose=False)``."""
    return functools.partial(lu_factors_solve, lu_factors(matrix))


def newton_iterate_reusing(
    residual: Callable[[jax.Array], jax.Array],
    jacobian: Callable[[jax.Array], jax.Array],
    x0: jax.Array,
    factors: LUFactors,
    *,
    tol,
    max_iter: int,
    max_rate: float = 0.2,
    rate=jnp.nan,
):
    """Newton with an iteration matrix kept from earlier solves (its LU factors are stored).

    x <- x - M^{-1} F(x) with the stored factors of M, until ||delta||_2 < tol (eq. 46). The
    matrix is refreshed, M = jacobian(x) factored at the current iterate, when the stored one
    contracts worse than ``max_rate`` (||delta_k|| / ||delta_{k-1}||), or gives a diverging or
    non-finite step (that step is rejected and retried), or holds NaN (no matrix yet). A
    freshly computed matrix that is singular ends the solve with status NONFINITE. Across the
    steps of an integrator the iteration matrix changes by O(h), so most steps need no
    refresh: an iteration then costs one residual and two triangular solves instead of a
    Jacobian and an LU factorisation. The matrix only sets the search direction; the root
    is converged to the same tolerance on the same residual.

    A step below ``tol`` ends the solve only when its matrix is verified: freshly factored at
    that iterate (an exact Newton step), or with a measured contraction rate theta <=
    ``max_rate`` (so the remaining error theta / (1 - theta) ||delta|| is below ||delta||),
    measured in this solve or, for the first step, in an earlier solve with the same factors
    (``rate``; NaN: unknown, one more iteration is taken). This is the stopping rule of
    simplified Newton in stiff integrators (Hairer & Wanner, IV.8).

    Returns (x, NewtonInfo, factors, refreshes, rate).
    """

    def cond(carry):
        _, k, step, _, status, _, _, _, verified, _ = carry
        return (k < max_iter) & ((step >= tol) | ~verified) & (status == SUCCESS)

    def body(carry):
        x, k, _, previous, _, factors, stale, refreshes, _, known = carry
        factors = jax.lax.cond(stale, lambda: lu_factors(jacobian(x)), lambda: factors)
        delta = -lu_factors_solve(factors, residual(x))
        step = jnp.linalg.norm(delta)
        finite = jnp.isfinite(step)
        rate = step / previous  # previous = inf at the first iteration: rate 0
        measured = ~stale & jnp.isfinite(previous)
        accept = finite & (stale | (rate < 1.0))
        x_new = jnp.where(accept, x + jnp.where(finite, delta, 0.0), x)
        status = jnp.where(stale & ~finite, NONFINITE, SUCCESS)
        verified = stale | (accept & (jnp.where(measured, rate, known) <= max_rate))
        known = jnp.where(stale, jnp.nan, jnp.where(measured & accept, rate, known))
        return (
            x_new,
            k + 1,
            jnp.where(accept, step, jnp.inf),
            jnp.where(accept, step, previous),
            status,
            factors,
            ~stale & ~(accept & (rate <= max_rate)),
            refreshes + stale.astype(refreshes.dtype),
            verified,
            known,
        )

    init = (
        x0,
        jnp.asarray(0),
        jnp.asarray(jnp.inf, x0.dtype),
        jnp.asarray(jnp.inf, x0.dtype),
        jnp.asarray(SUCCESS),
        factors,
        ~jnp.all(jnp.isfinite(factors.lu)),
        jnp.asarray(0),
        jnp.asarray(False),
        jnp.asarray(rate, x0.dtype),
    )
    x, k, step, _, status, factors, _, refreshes, _, known = jax.lax.while_loop(cond, body, init)
    status = jnp.where((status == SUCCESS) & (step >= tol), MAX_ITERATIONS, status)
    res_norm = jnp.linalg.norm(residual(x))
    status = jnp.where((status == SUCCESS) & ~jnp.isfinite(res_norm), NONFINITE, status)
    return x, NewtonInfo(k, status, res_norm, step), factors, refreshes, known


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
    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear):
        """(x, NewtonInfo, state) for residual(x) = 0 from x0; stop when ||delta||_2 < tol.

        ``linear_solve(matrix, rhs)`` solves with a fresh matrix (the formulation's choice:
        re falls back to a minimum-norm solve at its chart singularity)."""


class FullNewton(AbstractNewton):
    """Exact Newton: the matrix at every iteration (quadratic convergence)."""

    max_iter: int = eqx.field(static=True, default=25)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear):
        x, info = newton_iterate(
            lambda x: (residual(x), jacobian(x)),
            lambda x, d: x + d,
            x0,
            tol=tol,
            max_iter=self.max_iter,
            linear_solve=linear_solve,
        )
        return x, info, state


class ModifiedNewton(AbstractNewton):
    """The matrix of the first iterate, factored once per solve (linear convergence)."""

    max_iter: int = eqx.field(static=True, default=25)

    def init(self, n):
        return None

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear):
        matrix = jacobian(x0)
        if linear_solve is solve_linear:
            solve = lu_solver(matrix)
        else:

            def solve(rhs):
                return linear_solve(matrix, rhs)

        x, info = newton_iterate(
            lambda x: (residual(x), None),
            lambda x, d: x + d,
            x0,
            tol=tol,
            max_iter=self.max_iter,
            linear_solve=lambda _, F: solve(F),
        )
        return x, info, state


class ReusedNewton(AbstractNewton):
    """The factored matrix kept across solves and refreshed when it stops contracting well;
    see :func:`newton_iterate_reusing`. Steps are accepted only once verified."""

    max_iter: int = eqx.field(static=True, default=25)
    max_rate: float = eqx.field(static=True, default=0.2)

    def init(self, n):
        # the stored factors and their last measured contraction rate (NaN: unknown)
        return empty_lu_factors(n), jnp.asarray(jnp.nan)

    def solve(self, residual, jacobian, x0, state, *, tol, linear_solve=solve_linear):
        # stored LU factors: a singular fresh matrix ends the solve (status NONFINITE)
        factors, rate = state
        x, info, factors, _, rate = newton_iterate_reusing(
            residual,
            jacobian,
            x0,
            factors,
            tol=tol,
            max_iter=self.max_iter,
            max_rate=self.max_rate,
            rate=rate,
        )
        return x, info, (factors, rate)


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
