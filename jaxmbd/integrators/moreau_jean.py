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
   solved by a semismooth Newton method (the generalised Jacobian of the max and the
   disk projection by forward-mode autodiff of their branches: L. Qi, J. Sun, Math.
   Programming 58 (1993) 353–367) inside the compiled step; a step whose iteration
   does not converge to ``tol`` in ``max_iter`` iterations has status max_iterations.
3. q_{k+1} = q_M (+) (h / 2) v_{k+1}.
4. **Projection** (Acary 2013, section 4): q_{k+1} <- q_{k+1} (+) M^-1 (-G^T mu_G + W_N^T
   mu_N), with Phi(q_{k+1}) = 0 and 0 <= mu_N complementary to g(q_{k+1}) >= 0 (the same
   proximal form and Newton method): joints closed and no penetration, to the position
   tolerance, at every step; velocities are kept.

The multipliers reported (``sol.lam``) are Lambda / h, the joint reactions averaged over
the step; the accelerations (v_{k+1} - v_k) / h, impulsive where an impact happened.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._joint_forces import coordinates_and_gradients, coordinates_and_rates
from .._step_status import first_failure
from ..contact.element import contact_element
from ..forces import BodyState
from ..formulations.index1 import index1_system
from ..joint_limits import JointLimits
from ..model import Model
from ..newton import MAX_ITERATIONS, NONFINITE, SUCCESS, NewtonInfo
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
    limits = tuple(f for f in model.forces if isinstance(f, JointLimits))
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
        restitution.append(jnp.zeros(2 * len(lim.joints), v.dtype))  # plastic stops

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


def _least_squares(J, F):
    """A least-squares solution of J x = F for a J that may be rank-deficient (a body
    resting on more contact points than the directions they constrain: the impulses' split
    is not unique), the one of least norm in the column-scaled unknowns (J's columns scaled
    to unit length). Iterated Tikhonov regularisation of the scaled normal equations (A. N.
    Tikhonov, V. Y. Arsenin, "Solutions of ill-posed problems", 1977): each sweep
    y <- y + (A^T A + mu I)^-1 A^T (F - A y) divides the regularisation's error in a
    direction of singular value sigma by 1 + sigma^2 / mu; one Cholesky factorisation. It
    replaces an SVD least squares: 4.4 ms of CPU for a 138 x 138 matrix (the 3-box stack's
    Newton system) against 0.7 ms for an LU of that size (experiments/bench_blas_threads.py,
    one BLAS thread). The
    squared condition number costs accuracy in one solve; the Newton iteration around it
    corrects that."""
    norms = jnp.sqrt(jnp.sum(J * J, axis=0))
    col = jnp.where(norms > 0, 1.0 / jnp.where(norms > 0, norms, 1.0), 0.0)
    A = J * col[None, :]
    normal = A.T @ A + REGULARISATION * jnp.eye(A.shape[1], dtype=A.dtype)
    factor = jax.scipy.linalg.cho_factor(normal)
    y = jax.scipy.linalg.cho_solve(factor, A.T @ F)
    for _ in range(REFINEMENTS):
        y = y + jax.scipy.linalg.cho_solve(factor, A.T @ (F - A @ y))
    return col * y


def _newton(residual, x0, tol, max_iter):
    """Semismooth Newton on residual(x) = 0 from x0: (x, iterations, converged, ||F||).
    The generalised Jacobian is forward-mode autodiff of the residual's branches."""

    def cond(carry):
        _, it, done, _ = carry
        return (it < max_iter) & ~done

    def body(carry):
        x, it, _, _ = carry
        F = residual(x)
        J = jax.jacfwd(residual)(x)
        # least squares: a body resting on several contact points (a box on four corners)
        # has more normal rows than the directions they constrain, and the generalised
        # Jacobian is singular there (the split of the impulses is not unique); the
        # minimum-norm step converges to one solution
        dx = _least_squares(J, F)
        x = x - dx
        F_new = residual(x)
        norm = jnp.max(jnp.abs(F_new))
        return x, it + 1, norm <= tol, norm

    F0 = residual(x0)
    norm0 = jnp.max(jnp.abs(F0))
    x, it, done, norm = jax.lax.while_loop(cond, body, (x0, jnp.asarray(0), norm0 <= tol, norm0))
    return x, it, done, norm


def _implicit_min_norm(residual, x_star, derivative_of=None):
    """``x_star`` (a root of ``residual``) with implicit-function derivatives taken by the
    least-squares solution of J dx = -dF with the generalised Jacobian J
    (:func:`_least_squares`). Where contact impulses are not unique (a box on four corners)
    J is singular, but the velocities are, and so are their derivatives: every solution of
    J dx = -dF (consistent: F = 0 holds along the family of roots) has the same velocity
    part, and the least-squares one is one of them.
    First derivatives (jvp and its transpose, so jax.grad); the residual's closed-over
    values (the model, the state) are differentiated. ``derivative_of``: another residual
    whose derivatives at ``x_star`` are used instead (a relaxed one, ``relaxation``)."""
    x_star = jax.lax.stop_gradient(x_star)
    fn, consts = jax.closure_convert(residual if derivative_of is None else derivative_of, x_star)

    @jax.custom_jvp
    def root(x, consts):
        del consts
        return x

    @root.defjvp
    def _rule(primals, tangents):
        x, consts = primals
        _, dconsts = tangents
        J = jax.lax.stop_gradient(jax.jacfwd(lambda y: fn(y, *consts))(x))
        _, dF = jax.jvp(lambda c: fn(x, *c), (consts,), (dconsts,))
        return x, -_least_squares(J, dF)

    return root(x_star, tuple(consts))


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
    (experiments/hard_contact_relaxation.py measures both). The activation of a contact
    (its gap at the step's midpoint) stays a discrete decision."""

    name: ClassVar[str] = "moreau_jean"
    # the index-1 blocks (M, Q, G) and a Lie group whose retraction along h v is the
    # exponential update of the velocities (rA, se3)
    requires: ClassVar[frozenset[str]] = frozenset({"index1_blocks", "lie_group"})
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
        """(v_{k+1}, Lambda, impulses, iterations, converged, ||F|| / scale) of step 2."""
        smooth = _smooth_model(model)
        system = index1_system(smooth, form, q_mid, v, t_mid)
        M = _mass_matrix(system)
        G = system.G
        n, m = v.size, G.shape[0]
        v_flat = v.reshape(-1)
        Q = system.force.reshape(-1)
        # nu = G v - (G v - nu) at any v: the velocity equations' right-hand side
        nu = G @ v_flat - form.velocity_residual(smooth, q_mid, v, t_mid)
        uni = _unilateral(model, form, q_mid, v)
        n_N, ns = uni.W_N.shape[0], uni.friction.shape[0]
        # active at the midpoint's gap; a row closed by the last projection (to its
        # tolerance) stays active, so a resting body does not lift off by round-off. A
        # float mask: closure conversion (the implicit derivative) hoists floats only
        active = jnp.where(uni.gap <= ACTIVE_GAP_PER_TOL * self.tol, 1.0, 0.0)
        W = jnp.concatenate([uni.W_N, uni.W_T])
        delassus = jnp.einsum("ij,ji->i", W, jnp.linalg.solve(M, W.T))
        rho = 1.0 / jnp.maximum(delassus, 1e-300)
        rho_N, rho_T = rho[:n_N], rho[n_N:].reshape(ns, 2)
        # the momentum scale of the step: impulses converge to tol of it; the joint rows
        # (velocities) are weighed by the largest mass to be momenta too
        mass_scale = jnp.max(jnp.abs(jnp.diagonal(M)))
        scale = jnp.max(jnp.abs(M @ v_flat)) + h * jnp.max(jnp.abs(Q))
        scale = jnp.maximum(scale, mass_scale * VELOCITY_FLOOR)
        xi_N0 = uni.restitution * (uni.W_N @ v_flat)  # Newton's law: pre-impact velocity

        def residual(x, smoothing=None):
            v1, lam = x[:n], x[n : n + m]
            P_N, P_T = x[n + m : n + m + n_N], x[n + m + n_N :].reshape(ns, 2)
            momentum = M @ (v1 - v_flat) - h * Q + G.T @ lam - uni.W_N.T @ P_N
            momentum = momentum - uni.W_T.T @ P_T.reshape(-1)
            joints = G @ v1 - nu
            xi_N = uni.W_N @ v1 + xi_N0
            xi_T = (uni.W_T @ v1).reshape(ns, 2)
            normal = P_N - _positive_part(P_N - rho_N * xi_N, smoothing)
            radius = uni.friction * _positive_part(P_N[:ns], smoothing)
            tangent = P_T - _disk_projection(P_T - rho_T * xi_T, radius, smoothing)
            normal = jnp.where(active > 0, normal, P_N)
            tangent = jnp.where(active[:ns, None] > 0, tangent, P_T)
            # every row in momentum units (the proximal rows are impulses already)
            return jnp.concatenate([momentum, mass_scale * joints, normal, tangent.reshape(-1)])

        on = jnp.concatenate([active, jnp.repeat(active[:ns], 2)])
        x0 = jnp.concatenate([v_flat, jnp.zeros(m, v.dtype), jnp.where(on > 0, warm, 0.0)])
        x, it, done, norm = _newton(residual, x0, self.tol * scale, self.max_iter)
        if self.relaxation:
            # Dojo's gradients: the root of the relaxed equations (Newton from the exact
            # root, a few iterations), differentiated implicitly; the value stays the exact
            # root, so the motion does not change
            def relaxed(y):
                return residual(y, jax.lax.stop_gradient(self.relaxation * scale))

            x_exact = x
            x_relaxed, *_ = _newton(relaxed, jax.lax.stop_gradient(x), self.tol * scale,
                                    self.max_iter)  # fmt: skip
            x_relaxed = _implicit_min_norm(relaxed, x_relaxed)
            x = jax.lax.stop_gradient(x_exact) + (x_relaxed - jax.lax.stop_gradient(x_relaxed))
        else:
            x = _implicit_min_norm(residual, x)
        return x[:n], x[n : n + m], x[n + m :], it, done, norm / scale

    def _projection(self, model, form, q, v, t):
        """Step 4: (q projected, iterations, converged, max violation): Phi(q) = 0 and
        0 <= mu_N complementary to the gaps (metres, or radians for limits)."""
        smooth = _smooth_model(model)
        system = index1_system(smooth, form, q, v, t)
        M = _mass_matrix(system)
        G = form.position_terms(smooth, q, t)[1]
        m = G.shape[0]
        W_N = _unilateral(model, form, q, v).W_N
        rho = 1.0 / jnp.maximum(jnp.einsum("ij,ji->i", W_N, jnp.linalg.solve(M, W_N.T)),
                                1e-300)  # fmt: skip
        n_N = W_N.shape[0]
        MinvB = jnp.linalg.solve(M, jnp.concatenate([-G, W_N]).T)  # the corrections

        def moved(mu):
            return form.retract(q, MinvB @ mu)

        def residual(mu):
            qq = moved(mu)
            mu_N = mu[m:]
            gap = _gaps(model, form, qq, v)
            closing = (mu_N - _positive_part(mu_N - rho * gap)) / rho
            return jnp.concatenate([form.residual(smooth, qq, t)[:m], closing])

        mu0 = jnp.zeros(m + n_N, v.dtype)
        mu, it, done, norm = _newton(residual, mu0, self.tol, self.max_iter)
        mu = _implicit_min_norm(residual, mu)
        return moved(mu), it, done, norm

    def step(self, model, form, state: MoreauJeanState, k, h):
        t0 = (k - 1) * h
        t_mid, t1 = t0 + 0.5 * h, k * h
        q, v = state.q, state.v
        q_mid = form.retract(q, 0.5 * h * v.reshape(-1))
        v1, lam, impulses, it, done, norm = self._velocity_step(
            model, form, q_mid, v, t_mid, h, state.impulses
        )
        v1 = v1.reshape(v.shape)
        q1 = form.retract(q_mid, 0.5 * h * v1.reshape(-1))
        iterations, statuses = it, [jnp.where(done, SUCCESS, MAX_ITERATIONS)]
        if self.project:
            q1, it_p, done_p, norm_p = self._projection(model, form, q1, v1, t1)
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


__all__ = ["MoreauJean", "MoreauJeanState", "hard_contact_slots"]
