"""Implicit-function-theorem derivatives of a converged root (:func:`implicit_root`): the
Newton iteration itself is never differentiated, so memory does not grow with the number of
iterations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from .. import _config  # noqa: F401
from ..linear import small
from ._linear import lu_factors, lu_factors_solve

#: ``checkpoint_name`` of a converged root and of the factors of the Jacobian there, as
#: :func:`implicit_root` marks them: a time step recomputed in reverse mode
#: (``jax.checkpoint`` with :data:`SAVED_FOR_ADJOINT`) saves these two and recomputes the
#: rest, so the adjoint step never reruns the Newton iteration or the factorisation.
ROOT = "jaxmbd_implicit_root"
ROOT_FACTORS = "jaxmbd_implicit_root_factors"
SAVED_FOR_ADJOINT = jax.checkpoint_policies.save_only_these_names(ROOT, ROOT_FACTORS)


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
    x_star = checkpoint_name(jax.lax.stop_gradient(x_star), ROOT)
    # The linear-solver choice in force here (jaxmbd.linear.small.prefer): the rule may run
    # after this trace has closed (a scan body's linearisation), and its factorisation and
    # solves must stay in the same kernels as the step's (LAPACK's custom calls would keep
    # the gradient's time loops from being hoisted).
    kernels = small.limit()
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
        with small.prefer(kernels):
            return _tangent(primals, tangents)

    def _tangent(primals, tangents):
        x, p, consts, jac_consts = primals
        _, dp, dconsts, _ = tangents
        x = jax.lax.stop_gradient(x)
        zeros = jnp.zeros(n_tangent, dtype=jnp.result_type(float))
        factors = checkpoint_name(matrix_factors(x, p, consts, jac_consts), ROOT_FACTORS)

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
