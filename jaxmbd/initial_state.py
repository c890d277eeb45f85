"""The consistent initial state of a simulation, in rA quantities and in the coordinates of
any formulation."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .equations import constraint_values, rA_terms
from .forces import BodyState, applied_forces
from .formulations import AbstractFormulation
from .lie import hat, so3_exp, vee
from .model import Model
from .newton import NONFINITE, SUCCESS, NewtonInfo, implicit_root, newton_iterate


class InitialCorrection(NamedTuple):
    """How far the consistent start moved the model's initial state."""

    position: jax.Array  # max |delta r| over bodies
    rotation: jax.Array  # max rotation angle of the orientation correction [rad]
    velocity: jax.Array  # max |delta (r_dot, omega_bar)|


def consistent_initial_state(
    model: Model, *, t=0.0, tol=1e-13, max_iter=30, redundant: bool = False
):
    """Project the initial state onto the constraints and solve for accelerations.

    Positions: Newton along the normal space at q0 (see :func:`_normal_projection`; exact
    derivatives of every order), or minimum-norm Gauss-Newton when ``redundant``; velocities:
    minimum-norm projection onto G v = nu; accelerations and multipliers: the index-1 system
    [M G^T; G 0][a; lam] = [Q; gamma]. All in rA quantities (formulation independent).
    ``redundant=True`` (dependent constraint rows, e.g. an overconstrained closed loop, where
    G G^T and the KKT matrix are singular): the same quantities with the SVD pseudo-inverse,
    so the corrections are still minimum-norm, the accelerations unique and the multipliers
    the least-norm ones (finite, never NaN).
    Returns ((r, A, rdot, omega, rddot, omegadot, lam), InitialCorrection, NewtonInfo).
    """
    t = jnp.asarray(t, dtype=jnp.float64)
    nb = model.nb
    zero = jnp.zeros((nb, 3))

    def min_norm_solve(G, rhs):
        return _min_norm(G, rhs, redundant)

    if model.nc and redundant:
        q, info = _project_positions(model, t, tol, max_iter, redundant)
    elif model.nc:
        q, info = _normal_projection(model, t, tol, max_iter)
    else:
        q, info = (
            (model.r0, model.A0),
            NewtonInfo(jnp.asarray(0), jnp.asarray(SUCCESS), jnp.asarray(0.0), jnp.asarray(0.0)),
        )
    r, A = q
    _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
    v0 = jnp.concatenate([model.rdot0, model.omega0], 1).reshape(-1)
    v = v0 + (min_norm_solve(G, nu - G @ v0) if model.nc else 0.0)
    v = v.reshape(nb, 6)
    rdot, omega = v[:, :3], v[:, 3:]
    _, _, _, gamma = rA_terms(model, r, A, rdot, omega, t)
    f, n = applied_forces(model.forces, t, BodyState(r, A, rdot, omega), model.mass, model.gravity)
    J = model.inertia
    Q = jnp.concatenate([f, n - jnp.cross(omega, jnp.einsum("bij,bj->bi", J, omega))], 1)
    eye = jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
    zeros = jnp.zeros((nb, 3, 3))
    M = jnp.concatenate(
        [
            jnp.concatenate([model.mass[:, None, None] * eye, zeros], 2),
            jnp.concatenate([zeros, J], 2),
        ],
        1,
    )
    M = jnp.einsum("ab,aij->aibj", jnp.eye(nb), M).reshape(6 * nb, 6 * nb)
    nc = model.nc
    if redundant:  # a = M^-1 (Q - G^T lam), lam = (G M^-1 G^T)^+ (G M^-1 Q - gamma)
        Minv_Q = jnp.linalg.solve(M, Q.reshape(-1))
        Minv_Gt = jnp.linalg.solve(M, G.T)
        lam = _pinv(G @ Minv_Gt) @ (G @ Minv_Q - gamma)
        sol = jnp.concatenate([Minv_Q - Minv_Gt @ lam, lam])
    else:
        kkt = jnp.block([[M, G.T], [G, jnp.zeros((nc, nc))]])
        sol = jnp.linalg.solve(kkt, jnp.concatenate([Q.reshape(-1), gamma]))
    acc, lam = sol[: 6 * nb].reshape(nb, 6), sol[6 * nb :]
    # a report, not a differentiable output (arccos and norms are not smooth at 0)
    dA = jnp.einsum("bji,bjk->bik", model.A0, A)
    angle = jnp.arccos(jnp.clip(0.5 * (jnp.trace(dA, axis1=1, axis2=2) - 1.0), -1.0, 1.0))
    correction = jax.lax.stop_gradient(
        InitialCorrection(
            position=jnp.max(jnp.linalg.norm(r - model.r0, axis=1)),
            rotation=jnp.max(angle),
            velocity=jnp.max(jnp.abs(v.reshape(-1) - v0)),
        )
    )
    status = jnp.where(jnp.all(jnp.isfinite(sol)), info.status, NONFINITE)
    info = info._replace(status=status)
    return (r, A, rdot, omega, acc[:, :3], acc[:, 3:], lam), correction, info


def _pinv(A):
    """SVD pseudo-inverse with a relative cut-off well above round-off (dependent rows)."""
    return jnp.linalg.pinv(A, rtol=1e-10)


def _min_norm(G, rhs, redundant: bool):
    """Minimum-norm solution of G x = rhs: G^T (G G^T)^-1 rhs, or G^+ rhs (dependent rows)."""
    if redundant:
        return _pinv(G) @ rhs
    return G.T @ jnp.linalg.solve(G @ G.T, rhs)


def _min_norm_newton(model, t, tol, max_iter, redundant=False):
    nb = model.nb
    zero = jnp.zeros((nb, 3))

    def residual_and_jacobian(q):
        phi, G, _, _ = rA_terms(model, q[0], q[1], zero, zero, t)
        return phi, G

    def retract(q, delta):
        d = delta.reshape(nb, 6)
        return q[0] + d[:, :3], q[1] @ so3_exp(d[:, 3:])

    return newton_iterate(
        residual_and_jacobian,
        retract,
        (model.r0, model.A0),
        tol=tol,
        max_iter=max_iter,
        linear_solve=lambda G, rhs: _min_norm(G, rhs, redundant),
    )


def _normal_projection(model, t, tol, max_iter):
    """Project (r0, A0) onto Phi(q, t) = 0 along the normal space at q0, differentiably to
    every order.

    q = q0 (+) G0^T nu with G0 = G(q0) and nu in R^m solving the square system
    Phi(q0 (+) G0^T nu, t) = 0: the first Gauss-Newton step of a minimum-norm projection,
    kept along the same directions (a consistent q0 gives nu = 0, q = q0). Because the map
    is defined by these m equations, :func:`jaxmbd.newton.implicit_root` gives exact
    derivatives of every order with respect to q0 and every model parameter.
    """
    nb = model.nb
    zero = jnp.zeros((nb, 3))

    def normals(model_):
        return rA_terms(model_, model_.r0, model_.A0, zero, zero, t)[1]

    def chart(model_, G0, nu):
        xi = (G0.T @ nu).reshape(nb, 6)
        return model_.r0 + xi[:, :3], model_.A0 @ so3_exp(xi[:, 3:])

    def residual(nu, model_):
        r, A = chart(model_, normals(model_), nu)
        return constraint_values(model_, r, A, t)

    frozen = jax.lax.stop_gradient(model)
    G0 = normals(frozen)

    def residual_and_jacobian(nu):
        r, A = chart(frozen, G0, nu)
        phi, G, _, _ = rA_terms(frozen, r, A, zero, zero, t)
        # G(q) G0^T: exact at nu = 0, and close while the rotation corrections are small
        # (it drops the right Jacobian of exp); Newton's root does not depend on it
        return phi, G @ G0.T

    nu, info = newton_iterate(
        residual_and_jacobian,
        lambda nu_, d: nu_ + d,
        jnp.zeros(model.nc, model.r0.dtype),
        tol=tol,
        max_iter=max_iter,
    )
    nu = implicit_root(residual, lambda nu_, d: nu_ + d, nu, model, model.nc)
    return chart(model, normals(model), nu), info


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _project_positions(model, t, tol, max_iter, redundant=False):
    """Minimum-norm Gauss-Newton projection of (r0, A0) onto Phi(q, t) = 0 (dependent rows).

    Used for redundant constraints, where the optimality conditions of
    :func:`_nearest_consistent_positions` are singular: first derivatives only.

    Its derivative is that of the nearest-point map at a point on the constraint manifold:
    d q = (I - G^+ G) d q0 - G^+ Phi_p dp with G^+ = G^T (G G^T)^{-1} (exact when the
    model's initial state is already consistent, first order in the distance otherwise),
    so gradients never pass through the iteration.
    """
    return _min_norm_newton(model, t, tol, max_iter, redundant)


@_project_positions.defjvp
def _project_positions_jvp(tol, max_iter, redundant, primals, tangents):
    model, t = primals
    model_dot, _ = tangents
    (r, A), info = _min_norm_newton(jax.lax.stop_gradient(model), t, tol, max_iter, redundant)
    nb = model.nb
    zero = jnp.zeros((nb, 3))
    _, G, _, _ = rA_terms(model, r, A, zero, zero, t)
    G = jax.lax.stop_gradient(G)
    theta0_dot = vee(jnp.einsum("bji,bjk->bik", model.A0, model_dot.A0))
    q0_dot = jnp.concatenate([model_dot.r0, theta0_dot], 1).reshape(-1)
    # Phi_p p_dot at the projected configuration (r0, A0 do not enter Phi)
    _, phi_p = jax.jvp(lambda m: constraint_values(m, r, A, t), (model,), (model_dot,))
    rhs = G @ q0_dot + phi_p
    delta = q0_dot - _min_norm(G, rhs, redundant)
    d = delta.reshape(nb, 6)
    A_dot = jnp.einsum("bij,bjk->bik", A, hat(d[:, 3:]))
    zeros_info = jax.tree_util.tree_map(
        lambda x: (
            jnp.zeros(x.shape, jax.dtypes.float0)
            if not jnp.issubdtype(x.dtype, jnp.floating)
            else jnp.zeros_like(x)
        ),
        info,
    )
    return ((r, A), info), ((d[:, :3], A_dot), zeros_info)


def to_formulation(form: AbstractFormulation, r, A, rdot, omega, rddot, omegadot):
    """Formulation state (q, v) and accelerations from rA quantities."""
    return form.from_body_state(r, A, rdot, omega, rddot, omegadot)
