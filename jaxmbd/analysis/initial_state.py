"""The consistent initial state of a simulation, in rA quantities and in the coordinates of
any formulation."""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import NONFINITE, SUCCESS, first_failure
from ..compiled.jit import RUN_ONCE, jit
from ..constraints.equations import (
    _row_bodies,
    constraint_values,
    rA_generalized_reaction,
    rA_rows,
    rA_terms,
    rA_terms_rows,
)
from ..constraints.redundancy import full_multipliers
from ..forces import BodyState, added_mass, added_mass_matrix, adds_mass
from ..forces._rigid_body import mass_blocks, newton_euler_forces
from ..formulations import AbstractFormulation
from ..integrators.base import choose_structured
from ..integrators.structured import kkt_blocks
from ..lie import hat, so3_exp, vee
from ..linear import dense
from ..linear.graph import newton_layout
from ..model import Model
from ..newton import NewtonInfo, implicit_root, newton_iterate, solve_with_condition
from ..newton._min_norm import PINV_RTOL, min_norm_solve

#: :func:`consistent_initial_state`'s default Newton tolerance and iteration limit (also
#: those of ``simulate``'s start)
START_TOL = 1e-13
START_MAX_ITER = 30


class InitialCorrection(NamedTuple):
    """How far the consistent start moved the model's initial state."""

    position: jax.Array  # max |delta r| over bodies
    rotation: jax.Array  # max rotation angle of the orientation correction [rad]
    velocity: jax.Array  # max |delta (r_dot, omega_bar)|


def consistent_initial_state(
    model: Model,
    *,
    t=0.0,
    tol=START_TOL,
    max_iter=START_MAX_ITER,
    redundant: bool = False,
    linear_solver: str = "auto",
):
    """Project the initial state onto the constraints and solve for accelerations.

    Positions: Newton along the normal space at q0 (see :func:`_normal_projection`; exact
    derivatives of every order), or minimum-norm Gauss-Newton when ``redundant``; velocities:
    minimum-norm projection onto G v = nu; accelerations and multipliers: the index-1 system
    [M G^T; G 0][a; lam] = [Q; gamma]. All in rA quantities (formulation independent). The
    returned status is the first failure of the position projection and of the velocity
    and KKT solves (pivot-ratio conditioning: a start in a singular configuration is
    ILL_CONDITIONED or NONFINITE, never a silent answer).
    ``redundant=True`` (dependent constraint rows, e.g. an overconstrained closed loop, where
    G G^T and the KKT matrix are singular): the same quantities with the SVD pseudo-inverse,
    so the corrections are still minimum-norm, the accelerations unique and the multipliers
    the least-norm ones (finite, never NaN).
    ``linear_solver`` ("auto": structured from 300 unknowns of the index-1 system on):
    "structured" solves all three by block elimination on the body-joint graph from the
    rA rows, never forming G (:func:`_structured_start`; not with ``redundant``).
    Returns ((r, A, rdot, omega, rddot, omegadot, lam), InitialCorrection, NewtonInfo).

    A model with redundant rows found at build (``model.redundancy.dropped``, see
    :mod:`jaxmbd.constraints.redundancy`) is solved without them, as ``simulate`` does, and their
    multipliers are zero in ``lam``.
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(
            f"consistent_initial_state: max_iter must be a positive integer, got {max_iter!r}"
        )
    # one compiled program per model structure and options (t and tol traced): run op by op
    # it compiled every primitive on its own, ~22 CPU-s on a fresh slider crank
    return _consistent_program(
        model, jnp.asarray(t, jnp.float64), jnp.asarray(tol, jnp.float64),
        max_iter=int(max_iter), redundant=bool(redundant), linear_solver=linear_solver,
    )  # fmt: skip


@jit(xla_options=RUN_ONCE)
def _consistent_program(model, t, tol, *, max_iter, redundant, linear_solver):
    return _consistent_initial_state(
        model, t=t, tol=tol, max_iter=max_iter, redundant=redundant, linear_solver=linear_solver
    )


def _kinematic(model: Model) -> Model:
    """``model`` for the position projection, whose residual reads the constraints, the
    drivers and the initial pose only: masses, inertias, gravity and forces pass through
    ``stop_gradient``. Their derivative there is zero anyway; without their tangents a
    gradient with respect to a mass or the controls does not trace, linearise and
    compile the projection's implicit derivative (a Newton solve's linear system) for
    nothing."""
    frozen = jax.tree_util.tree_map(
        lambda x: jax.lax.stop_gradient(x) if eqx.is_inexact_array(x) else x,
        (model.mass, model.inertia, model.gravity, model.forces),
    )
    return dataclasses.replace(
        model, mass=frozen[0], inertia=frozen[1], gravity=frozen[2], forces=frozen[3]
    )


def _consistent_initial_state(model: Model, *, t, tol, max_iter, redundant, linear_solver):
    """:func:`consistent_initial_state` traced in the caller's program (simulate's start)."""
    dropped = () if model.redundancy is None or redundant else model.redundancy.dropped
    if dropped:
        kept = tuple(r for r in range(model.nc) if r not in set(dropped))
        state, correction, info = _consistent_initial_state(
            model.without_rows(dropped), t=t, tol=tol, max_iter=max_iter, redundant=False,
            linear_solver=linear_solver,
        )  # fmt: skip
        lam = full_multipliers(state[6], kept, model.nc)
        return (*state[:6], lam), correction, info

    t = jnp.asarray(t, dtype=jnp.float64)
    nb = model.nb
    zero = jnp.zeros((nb, 3))
    structured = choose_structured(linear_solver, 6 * nb + model.nc, model.nc)
    # joint armature couples the two bodies of a joint in M (a g g^T): the block-assembled
    # start takes per-body mass blocks only, so such a model starts densely
    structured = structured and not adds_mass(model.forces)
    if structured and not redundant:
        state, v, info = _structured_start(model, t, tol, max_iter)
        return (state, *_report(model, state, v, info))

    if model.nc and redundant:
        q, info = _project_positions(_kinematic(model), t, tol, max_iter, redundant)
    elif model.nc:
        q, info = _normal_projection(_kinematic(model), t, tol, max_iter)
    else:
        q, info = (
            (model.r0, model.A0),
            NewtonInfo(jnp.asarray(0), jnp.asarray(SUCCESS), jnp.asarray(0.0), jnp.asarray(0.0)),
        )
    r, A = q
    _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
    v0 = jnp.concatenate([model.rdot0, model.omega0], 1).reshape(-1)
    statuses = [info.status]
    if model.nc:
        correction, status = min_norm_solve(G, nu - G @ v0, redundant=redundant)
        v0, statuses = v0 + correction, statuses + [status]
    v = v0.reshape(nb, 6)
    rdot, omega = v[:, :3], v[:, 3:]
    _, _, _, gamma = rA_terms(model, r, A, rdot, omega, t)
    state = BodyState(r, A, rdot, omega)
    Q = jnp.concatenate(newton_euler_forces(model, t, state), 1)
    M = mass_blocks(model.mass, model.inertia)
    M = jnp.einsum("ab,aij->aibj", jnp.eye(nb), M).reshape(6 * nb, 6 * nb)
    if adds_mass(model.forces):  # joint armature: sum a_k g_k g_k^T (forces.AddedMass)
        M = M + added_mass_matrix(added_mass(model.forces, t, state), nb)
    nc = model.nc
    if redundant:  # a = M^-1 (Q - G^T lam), lam = (G M^-1 G^T)^+ (G M^-1 Q - gamma)
        Minv_Q = dense.solve(M, Q.reshape(-1))
        Minv_Gt = dense.solve(M, G.T)
        lam = _pinv(G @ Minv_Gt) @ (G @ Minv_Q - gamma)
        sol = jnp.concatenate([Minv_Q - Minv_Gt @ lam, lam])
    else:
        kkt = jnp.block([[M, G.T], [G, jnp.zeros((nc, nc))]])
        sol, status = solve_with_condition(kkt, jnp.concatenate([Q.reshape(-1), gamma]))
        statuses.append(status)
    acc, lam = sol[: 6 * nb].reshape(nb, 6), sol[6 * nb :]
    state = (r, A, rdot, omega, acc[:, :3], acc[:, 3:], lam)
    info = info._replace(status=first_failure(*statuses))
    return (state, *_report(model, state, v, info))


def _report(model, state, v, info):
    """(InitialCorrection, NewtonInfo with NONFINITE for a non-finite solve)."""
    r, A, acc_r, acc_w, lam = state[0], state[1], state[4], state[5], state[6]
    v0 = jnp.concatenate([model.rdot0, model.omega0], 1).reshape(-1)
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
    finite = jnp.all(jnp.isfinite(acc_r)) & jnp.all(jnp.isfinite(acc_w))
    finite = finite & jnp.all(jnp.isfinite(lam)) & jnp.all(jnp.isfinite(v))
    status = jnp.where(finite, info.status, NONFINITE)
    return correction, info._replace(status=status)


def _per_row(model, ji, jj, per_body):
    """(G x)_c = jac_i . x_{b_i} + jac_j . x_{b_j} from per-body vectors (nb, 6) (ground 0)."""
    bi, bj = _row_bodies(model)
    x = jnp.concatenate([per_body, jnp.zeros((1, 6), per_body.dtype)])
    return jnp.sum(ji * x[bi], 1) + jnp.sum(jj * x[bj], 1)


def _structured_start(model, t, tol, max_iter):
    """The consistent start by block elimination: every system is a saddle
    point [[W, G_u^T], [G_l, 0]] with the index-1 KKT block structure, assembled from the
    rA rows (:func:`~jaxmbd.integrators.structured.kkt_blocks`), so memory and work are
    O(N) on a tree instead of the dense G (nc x 6 nb), G G^T and KKT matrix:

    * positions, :func:`_normal_projection`'s Newton on nu: (G G0^T) d = -Phi is the y
      part of [[I, G0^T], [G, 0]] [x; y] = [0; Phi] (x = -G0^T y, G x = Phi);
    * velocities: the minimum-norm correction G^T (G G^T)^{-1} b is the x part of
      [[I, G^T], [G, 0]] [x; y] = [0; b];
    * accelerations and multipliers: [[M, G^T], [G, 0]] [a; lam] = [Q; gamma].

    Returns ((r, A, rdot, omega, rddot, omegadot, lam), v (6 nb,), NewtonInfo)."""
    nb, nc = model.nb, model.nc
    n = 6 * nb
    zero = jnp.zeros((nb, 3))
    layout = newton_layout(model, tangent_size=6)
    identity = jnp.broadcast_to(jnp.eye(6), (nb, 6, 6))

    def solve(W, upper, lower, top, bottom):  # (x, status of its pivot-ratio test)
        blocks = kkt_blocks(layout, model, W, upper, lower)
        return solve_with_condition(blocks, jnp.concatenate([top, bottom]))

    def normals(model_):
        return rA_rows(model_, model_.r0, model_.A0, t)[1:]

    def chart(model_, rows0, nu):
        xi = rA_generalized_reaction(model_, rows0[0], rows0[1], nu)  # G0^T nu per body
        return model_.r0 + xi[:, :3], model_.A0 @ so3_exp(xi[:, 3:])

    def residual(nu, model_):
        r, A = chart(model_, normals(model_), nu)
        return constraint_values(model_, r, A, t)

    frozen = jax.lax.stop_gradient(model)
    rows0 = normals(frozen)

    def residual_and_rows(nu):
        r, A = chart(frozen, rows0, nu)
        phi, ji, jj = rA_rows(frozen, r, A, t)
        return phi, (ji, jj)

    def correction(rows, F):  # (G G0^T)^{-1} F
        return -solve(identity, rows0, rows, jnp.zeros(n, F.dtype), F)[0][n:]

    def row_tolerance(rows, allowed):  # |G| |G0^T| allowed >= |G G0^T| allowed
        spread = rA_generalized_reaction(frozen, jnp.abs(rows0[0]), jnp.abs(rows0[1]), allowed)
        return _per_row(frozen, jnp.abs(rows[0]), jnp.abs(rows[1]), spread)

    nu, info = newton_iterate(
        residual_and_rows,
        lambda nu_, d: nu_ + d,
        jnp.zeros(nc, model.r0.dtype),
        tol=tol,
        max_iter=max_iter,
        linear_solve=correction,
        row_tolerance=row_tolerance,
    )
    nu = implicit_root(residual, lambda nu_, d: nu_ + d, nu, model, nc)
    r, A = chart(model, normals(model), nu)
    _, ji, jj, nu_rhs, _ = rA_terms_rows(model, r, A, zero, zero, t)
    rows = (ji, jj)
    v0 = jnp.concatenate([model.rdot0, model.omega0], 1)
    b = nu_rhs - _per_row(model, ji, jj, v0)
    correction, velocity_status = solve(identity, rows, rows, jnp.zeros(n, b.dtype), b)
    v = v0.reshape(-1) + correction[:n]
    rdot, omega = v.reshape(nb, 6)[:, :3], v.reshape(nb, 6)[:, 3:]
    gamma = rA_terms_rows(model, r, A, rdot, omega, t)[4]
    Q = jnp.concatenate(newton_euler_forces(model, t, BodyState(r, A, rdot, omega)), 1)
    sol, status = solve(mass_blocks(model.mass, model.inertia), rows, rows, Q.reshape(-1), gamma)
    acc, lam = sol[:n].reshape(nb, 6), sol[n:]
    info = info._replace(status=first_failure(info.status, velocity_status, status))
    return (r, A, rdot, omega, acc[:, :3], acc[:, 3:], lam), v, info


def _pinv(A):
    """SVD pseudo-inverse with a relative cut-off well above round-off (dependent rows)."""
    return jnp.linalg.pinv(A, rtol=PINV_RTOL)


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
        linear_solve=lambda G, rhs: min_norm_solve(G, rhs, redundant=redundant)[0],
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
    delta = q0_dot - min_norm_solve(G, rhs, redundant=redundant)[0]
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
