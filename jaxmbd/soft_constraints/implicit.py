"""Implicit derivatives of the soft-constraint solve.

At the optimum ``a*`` of the primal problem (:mod:`~jaxmbd.soft_constraints.problem`) the
cost's gradient vanishes (MuJoCo's ``grad = M a - qfrc_smooth - qfrc_constraint``,
``PrimalUpdateGrad``):

    g(a*, theta) = M (a* - a0) - J' f(J a* - aref; theta) = 0,

with ``f`` the rows' forces (``mj_constraintUpdate_impl``) and ``theta`` the problem's data
(M, a0, J, aref, R, floss, the cones' mu and friction). With the rows' states held fixed,
differentiating gives ``H da* = -(dg/dtheta) dtheta``, ``H = dg/da`` the Newton Hessian at
the optimum: ``M + J' D J`` over the quadratic rows plus the cone blocks of middle-zone
elliptic contacts (``MakeHessian``, ``HessianCone``). This is the implicit function theorem
applied to the optimality condition (as in Amos & Kolter, "OptNet", ICML 2017, sec. 3, for a
QP; here the problem is smooth within a state).

:func:`attach_implicit_derivatives` returns the solver's ``a*`` unchanged and carries this
tangent as a ``jax.custom_jvp``, whose tangent is linear in ``dtheta``: JAX transposes it
for reverse mode, so ``jax.grad``, ``jax.jacrev`` and ``jax.jacfwd`` all work, and no
derivative ever passes through the solver's loops. Where a row sits exactly on a switching
point its state is MuJoCo's (e.g. a one-sided row with ``jar = 0`` is satisfied) and the
derivative is the one-sided one of that state; every division is guarded, so it is finite.
"""

from __future__ import annotations

import jax

from .. import _config  # noqa: F401
from .problem import SoftRows, constraint_update, hessian, spd_solve, times, transposed_times


def stationarity_residual(
    qacc: jax.Array, M: jax.Array, a0: jax.Array, rows: SoftRows
) -> jax.Array:
    """The cost's gradient ``M (a - a0) - J' efc_force(J a - aref)``; zero at the optimum."""
    update = constraint_update(rows, times(rows.J, qacc) - rows.aref)
    return times(M, qacc - a0) - transposed_times(rows.J, update.force)


@jax.custom_jvp
def attach_implicit_derivatives(
    qacc: jax.Array, M: jax.Array, a0: jax.Array, rows: SoftRows
) -> jax.Array:
    """``qacc`` (an optimum of the problem ``M, a0, rows``) with implicit derivatives.

    The primal value is ``qacc`` itself; compute it without derivatives (the solver runs on
    ``stop_gradient`` inputs). The tangent solves ``H dqacc = -dg`` (module docstring); the
    tangent of ``qacc`` itself is ignored.
    """
    return qacc


@attach_implicit_derivatives.defjvp
def _attach_implicit_derivatives_jvp(primals, tangents):
    qacc, M, a0, rows = primals
    _, dM, da0, drows = tangents

    def residual(M, a0, rows):
        return stationarity_residual(qacc, M, a0, rows)

    _, dresidual = jax.jvp(residual, (M, a0, rows), (dM, da0, drows))
    update = constraint_update(rows, times(rows.J, qacc) - rows.aref)
    H = hessian(M, rows, update)
    dqacc = -spd_solve(H, dresidual)
    return qacc, dqacc
