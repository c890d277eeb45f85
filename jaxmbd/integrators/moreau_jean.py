"""Moreau–Jean time stepping with exact contact: ``simulate(..., contact="hard")``.

Contact is a set of unilateral constraints with impacts and Coulomb friction, solved at the
velocity level once per step together with the joints, then the positions are projected
onto the admissible set. The scheme is the projected Moreau–Jean scheme of V. Acary,
"Projected event-capturing time-stepping schemes for nonsmooth mechanical systems with
unilateral contact and Coulomb's friction", Comput. Methods Appl. Mech. Engrg. 256 (2013)
224–250 (its eqs. 3.1 and 4.2, theta = 1 for the impulses, the midpoint for the
positions), after J. J. Moreau, "Unilateral contact and dry friction in finite freedom
dynamics" (1988) and M. Jean, "The non-smooth contact dynamics method", CMAME 177 (1999).

**One step** from (q_k, v_k) at t_k to t_{k+1} = t_k + h (h-free equations of the
formulation's index-1 form, :mod:`jaxmbd.formulations.index1`: mass matrix M, forces Q,
joint Jacobian G with G v = nu):

1. q_M = q_k (+) (h / 2) v_k, the midpoint; the contact slots of :mod:`jaxmbd.contact`
   at q_M give the gaps g, normals n and tangents (t1, t2), and the contact Jacobians
   W_N, W_T (rows n . v_rel, t . v_rel of the relative velocity of the pair's body_i to
   its body_j at the contact point). A slot is **active** when g(q_M) <= 0.
2. Unknowns v_{k+1}, the joint impulses Lambda and the contact impulses P_N, P_T (2 per
   slot):

       M (v_{k+1} - v_k) = h Q(q_M, v_k, t_M) - G^T Lambda + W_N^T P_N + W_T^T P_T,
       G v_{k+1} = nu(q_M, t_M),

   with, on every active slot, Newton's impact law and Coulomb's law on the exact cone
   written as the Alart–Curnier proximal equations (P. Alart, A. Curnier, CMAME 92 (1991)
   353–375; their semismooth Newton: eqs. 36–38):

       P_N = max(0, P_N - rho xi_N),             xi_N = W_N v_{k+1} + e W_N v_k,
       P_T = proj_{|P| <= mu P_N}(P_T - rho xi_T), xi_T = W_T v_{k+1},

   and P = 0 on the inactive slots. rho is each slot's inverse Delassus diagonal
   1 / (W M^-1 W^T)_ii (a scale; the solution does not depend on it). The system is
   solved in **Delassus form** (V. Acary, B. Brogliato, "Numerical methods for
   nonsmooth dynamical systems", Springer 2008, ch. 10): the joints are eliminated once
   per step (M^-1 from M's body blocks, the Schur complement S = G M^-1 G^T by Cholesky),
   so that v_{k+1} = v_free + X P and Lambda = Lambda_free + L P, and the unknowns are the
   impulses P alone, with the contact velocities W v_{k+1} = W v_free + D P and the
   Delassus matrix D = W X. A semismooth Newton method (L. Qi, J. Sun, Math. Programming
   58 (1993) 353-367) with the generalised Jacobian of the max and the disk projection in
   closed form (Alart & Curnier eqs. 36-38) solves it inside the compiled step; its steps
   are least-squares solves (a box on four corners: D is singular, the impulses' split
   is not unique); a step whose iteration does not converge to ``tol`` in ``max_iter``
   iterations has status max_iterations.
3. q_{k+1} = q_M (+) (h / 2) v_{k+1}.
4. **Projection** (Acary 2013, section 4): q_{k+1} <- q_{k+1} (+) M^-1 (-G^T mu_G + W_N^T
   mu_N), with Phi(q_{k+1}) = 0 and 0 <= mu_N complementary to g(q_{k+1}) >= 0 (the same
   proximal form and Newton method; M^-1 is the velocity step's): joints closed and no
   penetration, to the position tolerance, at every step; velocities are kept.

**Gradients** are implicit: each solve's root is differentiated by the implicit function
theorem at the converged step (the least-squares solution of J dx = -dF with the
generalised Jacobian J at the root, formed and factored once per step and reused by the
backward sweep); v_{k+1} and Lambda follow from P through the eliminated (differentiable)
linear algebra. The rule is differentiable again (:func:`_implicit_root`): ``jax.hessian``
and jvp of grad are exact, on each branch of the nonsmooth law.

The multipliers reported (``sol.lam``) are Lambda / h, the joint reactions averaged over
the step; the accelerations (v_{k+1} - v_k) / h, impulsive where an impact happened.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from .. import _config  # noqa: F401
from .._results import MAX_ITERATIONS, NONFINITE, SUCCESS, first_failure
from ..contact.element import contact_element
from ..forces import BodyState
from ..forces._joint import coordinates_and_gradients, coordinates_and_rates
from ..forces.joint_limits import JointLimits
from ..formulations.index1 import index1_system
from ..model import Model
from ..newton import ROOT, ROOT_FACTORS, NewtonInfo
from .base import AbstractIntegrator, StepResult

#: A slot is active when its gap at the step's midpoint is below this times ``tol`` (in
#: metres): the projection leaves closed contacts within ``tol`` of zero.
ACTIVE_GAP_PER_TOL = 10.0
#: Tikhonov weight of the least-squares solves (:func:`_least_squares`), relative to the
#: largest diagonal entry of the column-scaled normal matrix (which is 1).
REGULARISATION = 1e-13
#: Refinement sweeps of the least-squares solves (iterated Tikhonov regularisation).
REFINEMENTS = 2
#: The smallest velocity scale (m/s) of the impulse tolerance (a model at rest, no force).
VELOCITY_FLOOR = 1e-6


class MoreauJeanState(NamedTuple):
    """Positions, velocities and the last step's contact impulses (a warm start)."""

    q: Any
    v: jax.Array
    impulses: jax.Array  # (n_N + 2 ns,): P_N, then P_T (2 per slot)
    forces: jax.Array  # the same divided by h: the mean forces over the step


def _tangents(normal):
    """Two unit tangents (ns, 3) each orthogonal to the unit normals (ns, 3) and to each
    other: t1 from the coordinate axis least aligned with n (smooth away from the switch;
    the friction disk is isotropic, so the choice does not change the solution)."""
    axis = jnp.eye(3, dtype=normal.dtype)[jnp.argmin(jnp.abs(normal), axis=-1)]
    t1 = jnp.cross(normal, axis)
    t1 = t1 / jnp.linalg.norm(t1, axis=-1, keepdims=True)
    return t1, jnp.cross(normal, t1)


def _positive_part(x, smoothing=None):
    """max(0, x) with the B-subdifferential's derivative (1 or 0, never 1/2 at the tie);
    with ``smoothing`` eps, the Chen-Harker-Kanzow-Smale smoothing (x + sqrt(x^2 + 4
    eps^2)) / 2 (C. Chen, O. L. Mangasarian, Comput. Optim. Appl. 5 (1996) 97-138)."""
    if smoothing is None:
        return jnp.where(x > 0, x, 0.0)
    return 0.5 * (x + jnp.sqrt(x * x + 4.0 * smoothing * smoothing))


def _disk_projection(y, radius, smoothing=None):
    """Projection of y (ns, 2) onto the disks |y| <= radius (ns,), NaN-safe at y = 0;
    with ``smoothing`` eps, y radius / smax(|y|, radius) with the same smoothing of max."""
    yy = jnp.sum(y * y, axis=-1)
    if smoothing is None:
        norm = jnp.sqrt(jnp.where(yy > 0, yy, 1.0))
        scale = jnp.where(norm <= radius, 1.0, radius / norm)
        return y * scale[:, None]
    norm = jnp.sqrt(yy + smoothing * smoothing)
    larger = radius + _positive_part(norm - radius, smoothing)
    return y * (radius / jnp.maximum(larger, 1e-300))[:, None]


def _positive_part_derivative(x, smoothing=None):
    """d max(0, x)/dx as :func:`_positive_part` takes it: 1 where x > 0, else 0 (an element
    of the B-subdifferential), or the smoothing's derivative."""
    if smoothing is None:
        return jnp.where(x > 0, 1.0, 0.0)
    return 0.5 * (1.0 + x / jnp.sqrt(x * x + 4.0 * smoothing * smoothing))


def _disk_projection_derivatives(y, radius, smoothing=None):
    """(d proj / dy (ns, 2, 2), d proj / d radius (ns, 2)) of :func:`_disk_projection`, in
    closed form (Alart & Curnier 1991, eqs. 36-38): inside the disk (|y| <= radius, radius
    > 0) the identity and 0; outside, (radius / |y|) (I - y y^T / |y|^2) and y / |y| (0
    at y = 0). With ``smoothing``, the derivatives of the smoothed projection."""
    eye = jnp.eye(2, dtype=y.dtype)
    yy = jnp.sum(y * y, axis=-1)
    if smoothing is None:
        norm = jnp.sqrt(jnp.where(yy > 0, yy, 1.0))
        unit = y / norm[:, None]
        inside = (jnp.sqrt(jnp.where(yy > 0, yy, 0.0)) <= radius) & (radius > 0)
        outer = unit[:, :, None] * unit[:, None, :]
        d_y = jnp.where(inside[:, None, None], eye,
                        (radius / norm)[:, None, None] * (eye - outer))  # fmt: skip
        d_r = jnp.where(inside[:, None], 0.0, unit)
        return d_y, d_r
    norm = jnp.sqrt(yy + smoothing * smoothing)
    larger = jnp.maximum(radius + _positive_part(norm - radius, smoothing), 1e-300)
    slope = _positive_part_derivative(norm - radius, smoothing)
    dL_dy = (slope / norm)[:, None] * y
    d_y = (radius / larger)[:, None, None] * eye - (radius / larger**2)[:, None, None] * (
        y[:, :, None] * dL_dy[:, None, :]
    )
    d_r = y / larger[:, None] - (radius * (1.0 - slope) / larger**2)[:, None] * y
    return d_y, d_r


class _Contact(NamedTuple):
    """The velocity step's contact problem in the impulses P alone (Delassus form): the
    rows' velocities after the step are u = free + delassus P (normal rows with Newton's
    pre-impact term added), and the Alart-Curnier equations are solved for P."""

    free: jax.Array  # (p,)
    delassus: jax.Array  # (p, p)
    rho: jax.Array  # (p,)
    friction: jax.Array  # (ns,)
    active: jax.Array  # (n_N,) 1.0 or 0.0


def _proximal_residual(P, c: _Contact, smoothing=None):
    """Alart-Curnier's equations (module docstring, step 2) at the impulses P (p,)."""
    n_N, ns = c.active.shape[0], c.friction.shape[0]
    u = c.free + c.delassus @ P
    P_N, P_T = P[:n_N], P[n_N:].reshape(ns, 2)
    xi_T = u[n_N:].reshape(ns, 2)
    normal = P_N - _positive_part(P_N - c.rho[:n_N] * u[:n_N], smoothing)
    radius = c.friction * _positive_part(P_N[:ns], smoothing)
    y_T = P_T - c.rho[n_N:].reshape(ns, 2) * xi_T
    tangent = P_T - _disk_projection(y_T, radius, smoothing)
    normal = jnp.where(c.active > 0, normal, P_N)
    tangent = jnp.where(c.active[:ns, None] > 0, tangent, P_T)
    return jnp.concatenate([normal, tangent.reshape(-1)])


def _proximal_jacobian(P, c: _Contact, smoothing=None):
    """An element of the generalised Jacobian of :func:`_proximal_residual` at P, in
    closed form (Alart & Curnier 1991, eqs. 36-38): a normal row is e_i where the max is
    0 (or the slot is inactive), rho_i D_i where it is open; a tangent pair is
    E_T - J_y (E_T - rho_T D_T) - J_r mu H(P_N) e_N with the disk projection's derivatives
    J_y, J_r (:func:`_disk_projection_derivatives`)."""
    n_N, ns = c.active.shape[0], c.friction.shape[0]
    p = P.shape[0]
    eye = jnp.eye(p, dtype=P.dtype)
    u = c.free + c.delassus @ P
    rho_D = c.rho[:, None] * c.delassus
    P_N, P_T = P[:n_N], P[n_N:].reshape(ns, 2)
    slope = _positive_part_derivative(P_N - c.rho[:n_N] * u[:n_N], smoothing) * c.active
    normal = (1.0 - slope)[:, None] * eye[:n_N] + slope[:, None] * rho_D[:n_N]
    radius = c.friction * _positive_part(P_N[:ns], smoothing)
    d_radius = c.friction * _positive_part_derivative(P_N[:ns], smoothing)
    y_T = P_T - c.rho[n_N:].reshape(ns, 2) * u[n_N:].reshape(ns, 2)
    d_y, d_r = _disk_projection_derivatives(y_T, radius, smoothing)
    on = c.active[:ns]
    d_y, d_r = d_y * on[:, None, None], d_r * (on * d_radius)[:, None]
    E_T = eye[n_N:].reshape(ns, 2, p)
    tangent = E_T - jnp.einsum("sij,sjp->sip", d_y, E_T - rho_D[n_N:].reshape(ns, 2, p))
    tangent = tangent - d_r[:, :, None] * eye[:ns][:, None, :]
    return jnp.concatenate([normal, tangent.reshape(2 * ns, p)])


class _Unilateral(NamedTuple):
    """Every unilateral row at one configuration: the contact slots first (normal rows,
    each with two tangent rows), then the hard joint limits (q - lower, upper - q of each
    limited coordinate, normal rows only)."""

    gap: jax.Array  # (n_N,)
    W_N: jax.Array  # (n_N, n)
    W_T: jax.Array  # (2 ns, n)
    restitution: jax.Array  # (n_N,)
    friction: jax.Array  # (ns,)


def _parts(model: Model):
    """(contact element or None, its slot count, the JointLimits elements, their row count)."""
    element = contact_element(model)
    ns = 0 if element is None else element.n_slots
    # the limits of coordinates that the body states give (AbstractJointForce.absolute_part)
    limits = tuple(f.absolute_part() for f in model.forces if isinstance(f, JointLimits))
    limits = tuple(lim for lim in limits if lim.joints)
    return element, ns, limits, 2 * sum(len(lim.joints) for lim in limits)


def _body_state(form, q, v):
    r, A, rdot, omega = form.to_body_state(q, v, jnp.zeros_like(v))[:4]
    return BodyState(r, A, rdot, omega)


def _gaps(model: Model, form, q, v):
    """The gaps (n_N,) of every unilateral row at positions q (``v`` only for its shape)."""
    element, ns, limits, _ = _parts(model)
    state = _body_state(form, q, jnp.zeros_like(v))
    rows = [element.collide(state).gap] if ns else []
    for lim in limits:
        coordinate = coordinates_and_gradients(lim.joints, state)[0]
        rows += [coordinate - lim.lower, lim.upper - coordinate]
    return jnp.concatenate(rows) if rows else jnp.zeros(0, v.dtype)


def _unilateral(model: Model, form, q, v) -> _Unilateral:
    """Gaps and Jacobians of every unilateral row at positions q, in the formulation's
    velocity coordinates (body-major): for a contact slot the rows n . v_rel and
    (t1, t2) . v_rel of the velocity of the pair's body_i relative to its body_j at the
    contact point; for a limit the rate of its coordinate, +-q_dot."""
    element, ns, limits, _ = _parts(model)
    state0 = _body_state(form, q, jnp.zeros_like(v))
    r, A = state0.r, state0.A
    gaps, restitution = [], []
    if ns:
        gap, point, normal = element.collide(state0)
        t1, t2 = _tangents(normal)
        bi, bj = element._slot_bodies()
        slot_pair = np.asarray(element.slot_pair, dtype=int)
        gaps.append(gap)
        restitution.append(element.restitution[slot_pair])
    coordinates = []
    for lim in limits:
        coordinate = coordinates_and_gradients(lim.joints, state0)[0]
        coordinates.append(coordinate)
        gaps += [coordinate - lim.lower, lim.upper - coordinate]
        # Newton's law with each limit's restitution (plastic where none was given)
        e = jnp.zeros(len(lim.joints), v.dtype) if lim.restitution is None else lim.restitution
        restitution += [e, e]

    def rates(v_flat):
        state = _body_state(form, q, v_flat.reshape(v.shape))
        normal_rows, tangent_rows = [], []
        if ns:
            zero3 = jnp.zeros((1, 3), r.dtype)
            r_all = jnp.concatenate([r, zero3])
            rdot_all = jnp.concatenate([state.rdot, zero3])
            w_all = jnp.concatenate([jnp.einsum("bij,bj->bi", A, state.omega), zero3])

            def at(b):
                return rdot_all[b] + jnp.cross(w_all[b], point - r_all[b])

            v_rel = at(bi) - at(bj)

            def along(d):
                return jnp.sum(d * v_rel, axis=-1)

            normal_rows.append(along(normal))
            tangent_rows.append(jnp.stack([along(t1), along(t2)], -1).reshape(-1))
        for lim in limits:
            qdot = coordinates_and_rates(lim.joints, state)[1]
            normal_rows += [qdot, -qdot]
        rows = normal_rows + tangent_rows
        return jnp.concatenate(rows) if rows else jnp.zeros(0, v_flat.dtype)

    W = jax.jacfwd(rates)(jnp.zeros(v.size, v.dtype))
    n_N = W.shape[0] - 2 * ns
    friction = (element.friction[np.asarray(element.slot_pair, dtype=int)] if ns
                else jnp.zeros(0, v.dtype))  # fmt: skip
    empty = jnp.zeros(0, v.dtype)
    return _Unilateral(
        jnp.concatenate(gaps) if gaps else empty, W[:n_N], W[n_N:],
        jnp.concatenate(restitution) if restitution else empty, friction,
    )  # fmt: skip


def check_friction_cone(model: Model) -> None:
    """The exact cone here is Coulomb's disk of sliding friction: a pair with torsional or
    rolling friction (MuJoCo's condim 4 and 6) is refused by name (ValueError); the
    compliant law has them (:func:`~jaxmbd.contact.friction_wrench`). Traced numbers are
    not checked."""
    element = contact_element(model)
    numbers = (element.torsional_friction, element.rolling_friction) if element else ()
    if element is None or any(isinstance(x, jax.core.Tracer) for x in numbers):
        return
    # any model of a batch (leading axes) with a torque on the pair
    torques = np.stack([np.asarray(x).reshape(-1, element.n_pairs) for x in numbers])
    named = [name for name, on in zip(element.pair_names, (torques != 0).any((0, 1)),
                                      strict=True) if on]  # fmt: skip
    if named:
        raise ValueError(
            "simulate: contact='hard' has Coulomb's sliding friction only (the exact cone of "
            "Moreau-Jean's step is the friction disk); contact pairs with torsional or "
            f"rolling friction: {named}; use contact='compliant', or set their "
            "torsional_friction and rolling_friction to 0"
        )


def _smooth_model(model: Model) -> Model:
    """The model without its contact element and joint limits: its smooth forces (the
    unilateral ones are constraints here)."""
    import dataclasses

    element = contact_element(model)
    forces = tuple(f for f in model.forces if f is not element and not isinstance(f, JointLimits))
    if len(forces) == len(model.forces):
        return model
    return dataclasses.replace(model, forces=forces)


def _mass_matrix(system):
    nb, k, _ = system.mass.shape
    M = jnp.einsum("ab,aij->aibj", jnp.eye(nb, dtype=system.mass.dtype), system.mass)
    M = M.reshape(nb * k, nb * k)
    return M if system.coupling is None else M + system.coupling


def _mass_solver(system):
    """x -> M^-1 x for x (n,) or (n, c): M's (nb, k, k) blocks inverted once where M is
    block-diagonal (no added mass couples the bodies: rA's and se3's M), a dense Cholesky
    factor otherwise; built once per step and shared by the velocity problem and the
    projection."""
    nb, k, _ = system.mass.shape
    if system.coupling is None:
        inverse = jnp.linalg.inv(system.mass)

        def solve(x):
            blocks = jnp.einsum("aij,aj...->ai...", inverse, x.reshape((nb, k) + x.shape[1:]))
            return blocks.reshape(x.shape)

        return solve
    factor = jax.scipy.linalg.cho_factor(_mass_matrix(system))
    return lambda x: jax.scipy.linalg.cho_solve(factor, x)


def _mass_times(system, x):
    """M x for x (n,), from the blocks."""
    nb, k, _ = system.mass.shape
    out = jnp.einsum("aij,aj->ai", system.mass, x.reshape(nb, k)).reshape(-1)
    return out if system.coupling is None else out + system.coupling @ x


def _least_squares(J, F):
    """A least-squares solution of J x = F for a J that may be rank-deficient (a body
    resting on more contact points than the directions they constrain: the impulses' split
    is not unique), the one of least norm in the column-scaled unknowns (J's columns scaled
    to unit length). Iterated Tikhonov regularisation of the scaled normal equations (A. N.
    Tikhonov, V. Y. Arsenin, "Solutions of ill-posed problems", 1977): each sweep
    y <- y + (A^T A + mu I)^-1 A^T (F - A y) divides the regularisation's error in a
    direction of singular value sigma by 1 + sigma^2 / mu; one Cholesky factorisation. It
    replaces an SVD least squares: 4.4 ms of CPU for a 138 x 138 matrix (the 3-box stack's
    Newton system before the Delassus form; 120 x 120 now) against 0.7 ms for an LU of that
    size (benchmarks/blas_threads.py, one BLAS thread). The
    squared condition number costs accuracy in one solve; the Newton iteration around it
    corrects that."""
    return _least_squares_solve(_least_squares_factors(J), F)


def _least_squares_factors(J):
    """The column scaling, scaled matrix and normal equations' Cholesky factor of
    :func:`_least_squares` (the factor lower-triangular), for several solves with one J."""
    norms = jnp.sqrt(jnp.sum(J * J, axis=0))
    col = jnp.where(norms > 0, 1.0 / jnp.where(norms > 0, norms, 1.0), 0.0)
    A = J * col[None, :]
    normal = A.T @ A + REGULARISATION * jnp.eye(A.shape[1], dtype=A.dtype)
    return col, A, jax.scipy.linalg.cho_factor(normal, lower=True)[0]


def _least_squares_solve(factors, F):
    """:func:`_least_squares` with the factors of :func:`_least_squares_factors`."""
    col, A, lower_factor = factors
    factor = (lower_factor, True)
    y = jax.scipy.linalg.cho_solve(factor, A.T @ F)
    for _ in range(REFINEMENTS):
        y = y + jax.scipy.linalg.cho_solve(factor, A.T @ (F - A @ y))
    return col * y


def _newton(residual, x0, tol, max_iter, *, jacobian=None, F0=None):
    """Semismooth Newton on residual(x) = 0 from x0: (x, iterations, converged, ||F||).
    The generalised Jacobian is ``jacobian(x)`` (closed form) or forward-mode autodiff of
    the residual's branches; ``F0``: residual(x0) when the caller has it already."""
    jacobian = jax.jacfwd(residual) if jacobian is None else jacobian

    def cond(carry):
        _, it, done, _ = carry
        return (it < max_iter) & ~done

    def body(carry):
        x, it, _, _ = carry
        F = residual(x)
        J = jacobian(x)
        # least squares: a body resting on several contact points (a box on four corners)
        # has more normal rows than the directions they constrain, and the generalised
        # Jacobian is singular there (the split of the impulses is not unique); the
        # minimum-norm step converges to one solution
        dx = _least_squares(J, F)
        x = x - dx
        F_new = residual(x)
        # initial=0: a model without contact rows (limits only, none active) has none
        norm = jnp.max(jnp.abs(F_new), initial=0.0)
        return x, it + 1, norm <= tol, norm

    F0 = residual(x0) if F0 is None else F0
    norm0 = jnp.max(jnp.abs(F0), initial=0.0)
    x, it, done, norm = jax.lax.while_loop(cond, body, (x0, jnp.asarray(0), norm0 <= tol, norm0))
    return x, it, done, norm


def _implicit_root(residual, jacobian, x_star, args):
    """``x_star`` (a root of residual(., args)) with implicit-function derivatives: the
    least-squares solution (:func:`_least_squares`) of J dx = -dF, J = jacobian(x_star,
    args) in closed form and dF the residual's derivative with respect to ``args`` (a
    pytree of arrays). Under reverse mode J and its factorisation are formed once, in the
    forward sweep, and the backward sweep solves with that factor.

    Derivatives of every order (``jax.hessian``, jvp of grad): as in
    :func:`jaxmbd.newton.implicit_root`, the tangent is a ``custom_linear_solve`` whose
    matrix is J at a differentiable root, so the next order sees d(J^-1) = -J^-1 dJ J^-1,
    and the rule's primal output carries the implicit derivative itself (partial
    evaluation inside ``lax.scan`` differentiates that expression, not the rule). On a
    kink of the max or of the disk projection J is the B-subdifferential's element that
    :func:`_proximal_jacobian` picks, and the second derivative is the one of that
    branch."""
    x_star = checkpoint_name(jax.lax.stop_gradient(x_star), ROOT)

    @jax.custom_jvp
    def root(x, args):
        del args
        return x

    @root.defjvp
    def _rule(primals, tangents):
        x, args = primals
        _, dargs = tangents
        x = jax.lax.stop_gradient(x)
        factors = checkpoint_name(
            jax.lax.stop_gradient(_least_squares_factors(jacobian(x, args))), ROOT_FACTORS
        )

        def solve(_, b):
            return _least_squares_solve(factors, b)

        def transpose_solve(_, b):  # the transpose of the linear map b -> solve(b)
            return jax.linear_transpose(lambda c: solve(None, c), b)(b)[0]

        # value exactly x (F - F = 0), first derivative -J^-1 dF/dargs
        F = residual(x, args)
        x_out = x - solve(None, F - jax.lax.stop_gradient(F))
        J = jacobian(x_out, args)
        _, dF = jax.jvp(lambda a: residual(x_out, a), (args,), (dargs,))
        dx = jax.lax.custom_linear_solve(
            lambda y: J @ y, -dF, solve=solve, transpose_solve=transpose_solve
        )
        return x_out, dx

    return root(x_star, args)


def _implicit_min_norm(residual, x_star, derivative_of=None):
    """``x_star`` (a root of ``residual``) with implicit-function derivatives taken by the
    least-squares solution of J dx = -dF with the generalised Jacobian J
    (:func:`_least_squares`). Where contact impulses are not unique (a box on four corners)
    J is singular, but the velocities are, and so are their derivatives: every solution of
    J dx = -dF (consistent: F = 0 holds along the family of roots) has the same velocity
    part, and the least-squares one is one of them.
    Derivatives of every order (:func:`_implicit_root`); the residual's closed-over
    values (the model, the state) are differentiated. ``derivative_of``: another residual
    whose derivatives at ``x_star`` are used instead (a relaxed one, ``relaxation``)."""
    fn, consts = jax.closure_convert(residual if derivative_of is None else derivative_of, x_star)

    def closed(x, consts):
        return fn(x, *consts)

    def jacobian(x, consts):  # forward-mode autodiff of the residual's branches
        return jax.jacfwd(closed)(x, consts)

    return _implicit_root(closed, jacobian, x_star, tuple(consts))


class MoreauJean(AbstractIntegrator):
    """The projected Moreau–Jean scheme with exact contact (module docstring): the
    integrator of ``simulate(..., contact="hard")``.

    Options: ``tol`` (1e-10): the semismooth Newton iterations stop when every equation's
    residual is below ``tol`` times its scale (impulses: the step's momentum scale;
    positions: metres); ``max_iter`` (50); ``project`` (True): the position projection of
    step 4 (without it the positions drift and penetrate by O(h) at impacts);
    ``relaxation`` (0): kappa > 0 takes the gradients of each step's velocity problem at
    the root of its relaxed equations (the max and the disk projection smoothed by
    eps = kappa x the step's momentum scale, Chen-Mangasarian; a second Newton solve from
    the exact root), as Dojo takes them at a relaxed interior-point kappa (T. Howell et
    al., "Dojo: a differentiable physics engine for robotics", 2022): the motion is the
    exact one; the gradients are biased and smoothed across stick-slip transitions
    (benchmarks/hard_contact/relaxation.py measures both). The activation of a contact
    (its gap at the step's midpoint) stays a discrete decision."""

    name: ClassVar[str] = "moreau_jean"
    # the index-1 blocks (M, Q, G) and a Lie group whose retraction along h v is the
    # exponential update of the velocities (rA, se3)
    requires: ClassVar[frozenset[str]] = frozenset({"index1_blocks", "lie_group"})
    resolves_impacts: ClassVar[bool] = True
    tol: float = 1e-10
    max_iter: int = 50
    project: bool = True
    relaxation: float = 0.0

    def check_formulation(self, form) -> None:
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int | np.integer):
            raise ValueError(f"moreau_jean: max_iter must be a positive integer, got "
                             f"{self.max_iter!r}")  # fmt: skip
        if self.max_iter < 1:
            raise ValueError(f"moreau_jean: max_iter must be positive, got {self.max_iter}")
        if not (isinstance(self.relaxation, float | int) and self.relaxation >= 0):
            raise ValueError(f"moreau_jean: relaxation must be a non-negative number, got "
                             f"{self.relaxation!r}")  # fmt: skip
        if not (isinstance(self.tol, float | int) and self.tol > 0):
            raise ValueError(f"moreau_jean: tol must be a positive number, got {self.tol!r}")

    def init(self, model, form, start, h):
        _, ns, _, n_limits = _parts(model)
        zero = jnp.zeros(3 * ns + n_limits, start.v.dtype)
        return MoreauJeanState(start.q, start.v, zero, zero)

    def extra_outputs(self, state: MoreauJeanState) -> dict:
        """Per-step outputs besides the body state (read by the Solution): the mean forces
        of the unilateral rows over the step (impulses / h; contact slots' normal, then
        limits', then the slots' two tangential components)."""
        return {"unilateral_forces": state.forces}

    def _velocity_step(self, model, form, q_mid, v, t_mid, h, warm):
        """Step 2 in Delassus form: (v_{k+1}, Lambda, impulses, iterations, converged,
        ||F|| / scale, M^-1). The joints are eliminated once per step: with the Schur
        complement S = G M^-1 G^T, v_{k+1} = v_free + X P and Lambda = Lambda_free + L P
        are linear in the impulses P, and the semismooth Newton iterates on P alone with
        the Delassus matrix D = W X = W (M^-1 - M^-1 G^T S^-1 G M^-1) W^T (Acary &
        Brogliato, "Numerical methods for nonsmooth dynamical systems", 2008, ch. 10) and a
        closed-form generalised Jacobian (:func:`_proximal_jacobian`)."""
        smooth = _smooth_model(model)
        system = index1_system(smooth, form, q_mid, v, t_mid)
        solve_M = _mass_solver(system)
        G = system.G
        m = G.shape[0]
        v_flat = v.reshape(-1)
        Q = system.force.reshape(-1)
        # nu = G v - (G v - nu) at any v: the velocity equations' right-hand side
        nu = G @ v_flat - form.velocity_residual(smooth, q_mid, v, t_mid)
        uni = _unilateral(model, form, q_mid, v)
        ns = uni.friction.shape[0]
        # active at the midpoint's gap; a row closed by the last projection (to its
        # tolerance) stays active, so a resting body does not lift off by round-off
        active = jnp.where(uni.gap <= ACTIVE_GAP_PER_TOL * self.tol, 1.0, 0.0)
        W = jnp.concatenate([uni.W_N, uni.W_T])
        Y = solve_M(W.T)  # (n, p)
        rho = 1.0 / jnp.maximum(jnp.einsum("ij,ji->i", W, Y), 1e-300)
        v_star = v_flat + h * solve_M(Q)  # the step without joints and contacts
        if m:
            MinvGT = solve_M(G.T)
            schur = jax.scipy.linalg.cho_factor(G @ MinvGT)
            lam_free = jax.scipy.linalg.cho_solve(schur, G @ v_star - nu)
            lam_of = jax.scipy.linalg.cho_solve(schur, G @ Y)  # (m, p)
            v_free = v_star - MinvGT @ lam_free
            X = Y - MinvGT @ lam_of
        else:
            lam_free, lam_of = jnp.zeros(0, v.dtype), jnp.zeros((0, W.shape[0]), v.dtype)
            v_free, X = v_star, Y
        xi_N0 = uni.restitution * (uni.W_N @ v_flat)  # Newton's law: pre-impact velocity
        free = W @ v_free + jnp.concatenate([xi_N0, jnp.zeros(2 * ns, v.dtype)])
        contact = _Contact(free, W @ X, rho, uni.friction, active)
        # the momentum scale of the step: impulses converge to tol of it
        mass_scale = jnp.max(jnp.abs(jnp.diagonal(system.mass, axis1=1, axis2=2)))
        scale = jnp.max(jnp.abs(_mass_times(system, v_flat))) + h * jnp.max(jnp.abs(Q))
        scale = jnp.maximum(scale, mass_scale * VELOCITY_FLOOR)

        on = jnp.concatenate([active, jnp.repeat(active[:ns], 2)])
        P0 = jnp.where(on > 0, warm, 0.0)
        P, it, done, norm = _newton(
            lambda P: _proximal_residual(P, contact), P0, self.tol * scale, self.max_iter,
            jacobian=lambda P: _proximal_jacobian(P, contact),
        )  # fmt: skip
        if self.relaxation:
            # Dojo's gradients: the root of the relaxed equations (Newton from the exact
            # root, a few iterations), differentiated implicitly; the values stay the exact
            # root's, so the motion does not change
            eps = jax.lax.stop_gradient(self.relaxation * scale)
            P_relaxed, *_ = _newton(
                lambda y: _proximal_residual(y, contact, eps), jax.lax.stop_gradient(P),
                self.tol * scale, self.max_iter,
                jacobian=lambda y: _proximal_jacobian(y, contact, eps),
            )  # fmt: skip
            P_relaxed = _implicit_root(
                lambda y, a: _proximal_residual(y, a[0], a[1]),
                lambda y, a: _proximal_jacobian(y, a[0], a[1]), P_relaxed, (contact, eps),
            )  # fmt: skip

            def exact_value(relaxed, exact):
                return jax.lax.stop_gradient(exact) + relaxed - jax.lax.stop_gradient(relaxed)

            v1 = exact_value(v_free + X @ P_relaxed, v_free + X @ P)
            lam = exact_value(lam_free + lam_of @ P_relaxed, lam_free + lam_of @ P)
            P = exact_value(P_relaxed, P)
        else:
            P = _implicit_root(_proximal_residual, _proximal_jacobian, P, contact)
            v1, lam = v_free + X @ P, lam_free + lam_of @ P
        return v1, lam, P, it, done, norm / scale, solve_M

    def _projection(self, model, form, q, v, t, solve_M):
        """Step 4: (q projected, iterations, converged, max violation): Phi(q) = 0 and
        0 <= mu_N complementary to the gaps (metres, or radians for limits). The metric is
        the velocity step's M (``solve_M``: its factor; any positive definite metric gives
        a projection onto the same set, and rA's and se3's M are constant in the body
        frame); the residual at mu = 0 is the one of the gaps the Jacobians came with."""
        smooth = _smooth_model(model)
        phi, G = form.position_terms(smooth, q, t)
        m = G.shape[0]
        uni = _unilateral(model, form, q, v)
        W_N = uni.W_N
        n_N = W_N.shape[0]
        B = jnp.concatenate([-G, W_N])
        MinvB = solve_M(B.T)  # the corrections
        rho = 1.0 / jnp.maximum(jnp.einsum("ij,ji->i", W_N, MinvB[:, m:]), 1e-300)

        def moved(mu):
            return form.retract(q, MinvB @ mu)

        def closing(mu_N, gap):
            return (mu_N - _positive_part(mu_N - rho * gap)) / rho

        def residual(mu):
            qq = moved(mu)
            gap = _gaps(model, form, qq, v)
            return jnp.concatenate([form.residual(smooth, qq, t)[:m], closing(mu[m:], gap)])

        mu0 = jnp.zeros(m + n_N, v.dtype)
        F0 = jnp.concatenate([phi[:m], closing(mu0[m:], uni.gap)])
        mu, it, done, norm = _newton(residual, mu0, self.tol, self.max_iter, F0=F0)
        mu = _implicit_min_norm(residual, mu)
        return moved(mu), it, done, norm

    def step(self, model, form, state: MoreauJeanState, k, h):
        t0 = (k - 1) * h
        t_mid, t1 = t0 + 0.5 * h, k * h
        q, v = state.q, state.v
        q_mid = form.retract(q, 0.5 * h * v.reshape(-1))
        v1, lam, impulses, it, done, norm, solve_M = self._velocity_step(
            model, form, q_mid, v, t_mid, h, state.impulses
        )
        v1 = v1.reshape(v.shape)
        q1 = form.retract(q_mid, 0.5 * h * v1.reshape(-1))
        iterations, statuses = it, [jnp.where(done, SUCCESS, MAX_ITERATIONS)]
        if self.project:
            q1, it_p, done_p, norm_p = self._projection(model, form, q1, v1, t1, solve_M)
            iterations = iterations + it_p
            statuses.append(jnp.where(done_p, SUCCESS, MAX_ITERATIONS))
            norm = jnp.maximum(norm, norm_p)
        a1 = (v1 - v) / h
        finite = jnp.all(jnp.isfinite(v1)) & jnp.all(jnp.isfinite(lam))
        status = first_failure(jnp.where(finite, SUCCESS, NONFINITE), *statuses)
        info = NewtonInfo(iterations, status, norm, jnp.asarray(0.0, v.dtype))
        lam_out = lam / h
        new = MoreauJeanState(q1, v1, impulses, impulses / h)
        return new, StepResult(q1, v1, a1, lam_out, info)


def hard_contact_slots(slots, unilateral_forces):
    """``sol.contact`` of a hard-contact run: the slots' geometry and kinematics at each
    saved state (:func:`~jaxmbd.contact.slot_history`) with the forces of the step that
    ended there, its impulses / h: ``normal_force`` P_N / h and ``tangential_force``
    (P_T1 t1 + P_T2 t2) / h on the pair's body_i (the tangents of the state's normal; the
    step solved them at its midpoint, O(h) away), and ``active`` where the normal force is
    positive. The first row (t = 0) has no step: zero forces."""
    ns = slots.gap.shape[-1]
    forces = unilateral_forces
    n_N = forces.shape[-1] - 2 * ns
    normal_force = forces[..., :ns]
    tangent = forces[..., n_N:].reshape(forces.shape[:-1] + (ns, 2))
    flat = slots.normal.reshape(-1, 3)
    t1, t2 = _tangents(flat)
    t1, t2 = t1.reshape(slots.normal.shape), t2.reshape(slots.normal.shape)
    tangential = tangent[..., :1] * t1 + tangent[..., 1:] * t2
    return slots._replace(normal_force=normal_force, tangential_force=tangential,
                          active=normal_force > 0)  # fmt: skip


def hard_limit_forces(n_slots, n_limits, unilateral_forces):
    """``sol.limits`` of a hard-contact run (..., T, n_limits): each limited coordinate's
    stop reactions along +q, the lower stop's mean force (impulse / h) minus the upper's
    (the unilateral rows after the ``n_slots`` contact normals: the lower rows, then the
    upper, :class:`_Unilateral`)."""
    rows = unilateral_forces[..., n_slots : n_slots + 2 * n_limits]
    return rows[..., :n_limits] - rows[..., n_limits:]


__all__ = [
    "MoreauJean",
    "MoreauJeanState",
    "check_friction_cone",
    "hard_contact_slots",
    "hard_limit_forces",
]
