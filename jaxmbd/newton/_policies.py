"""Newton solver objects for the implicit integrators: the policies full, modified and
reused-matrix (:class:`FullNewton`, :class:`ModifiedNewton`, :class:`ReusedNewton`) differ
only in when the iteration matrix is refreshed, and share one loop
(:func:`~jaxmbd.newton.newton_iterate`)."""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._convergence import default_scale
from ._iterate import iterate, newton_iterate, newton_iterate_reusing
from ._linear import empty_matrix, is_custom_solve, solve_linear


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
        x, info, _, _, _ = iterate(
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
            linear_solve=linear_solve if is_custom_solve(linear_solve) else None,
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
        if is_custom_solve(linear_solve):  # the formulation needs its own solve: fresh matrices
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
