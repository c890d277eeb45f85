"""The rotmat formulation: rotation-matrix elements as coordinates (Dumitriu & Mărgăritescu).

Per body 12 coordinates relative to the configuration at t = 0 (the *reference*): the
pseudo-translation T* and the full 3x3 matrix R, not projected onto SO(3) (eqs. 1-4):

    OM(t) = T* + R OM_0,   r = T* + R OG_0,   A = R A_0,   R(0) = I,   T*(0) = 0.

Velocities and accelerations are the rows (T*', vec R') and (T*'', vec R'') (vec row-major),
so the coordinates form a vector space and the retraction is plain addition.

Equations of motion (9), with the constant Poinsot (Euler) tensor about the centre of mass
at t = 0, K_G = tr(J_G)/2 I - J_G = A_0 (m/12 diag(l^2, a^2, b^2) for a box) A_0^T (10-11),
and K_O = K_G + m OG_0 (x) OG_0:

    m T*'' + m R'' OG_0 = X,        R'' K_O + m T*'' (x) OG_0 = Y + R Lambda,

with X = F and Y = F (x) OM_0 for a force F at the material point M (a body torque n gives
Y = 1/2 j(n) R, which has the same virtual work on SO(3)). They are linear in the
accelerations with a constant mass matrix: no gyroscopic terms. Their explicit form (12):

    R'' = (Y + R Lambda - X (x) OG_0) K_G^{-1},     T*'' = X / m - R'' OG_0.

Constraints (the position equations, in this order):

* every model GCON, written in (T*, R) through P = T* + R P_0 for a body point and a = R a_0
  for a body vector (P_0, a_0: their places at t = 0): CD c.(P_j - P_i) and the spherical
  joint (eq. 13) are linear; DP1 a_i.a_j, DP2 a_i.(P_j - P_i), D |P_j - P_i|^2 and the
  rotation driver are quadratic. Every joint and driver of the library follows.
* 6 orthogonality rows per body (2), body-major: 1/2 (1 - S_kk) for k = 1..3, then -S_12,
  -S_13, -S_23 with S = R^T R. With this scaling and sign their multipliers are exactly the
  paper's symmetric Lambda = (L11, L22, L33, L12, L13, L23): the generalised reaction
  -G^T lam of these rows is the effort (0, R Lambda) of (9).

The index-1 accelerations and multipliers are solved by :meth:`Rotmat.two_step` (per-body
Lyapunov solve, eq. 25, then the joint multipliers) or by the full KKT system; see the
``rk`` integrator (:mod:`jaxmbd.integrators.runge_kutta`).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from .._results import SUCCESS, as_status, first_failure
from ..compiled.small import mm, mtm, mv, row_vec_mat
from ..constraints.equations import constraint_values
from ..forces import BodyState, adds_mass, applied_forces
from ..forces._rigid_body import euler_tensor
from ..lie import hat, vee
from ..linear import small
from ..newton import solve_with_condition
from .base import AbstractFormulation, index1_from_equations
from .index1 import (
    AbstractMultiplierElimination,
    Index1Solution,
    Index1System,
    solve_index1,
)

_UPPER = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))


class RotmatCoordinates(NamedTuple):
    """Positions of the rotmat formulation: T* (nb, 3), R (nb, 3, 3), and the reference
    configuration (t = 0) they are relative to: centres of mass g0 = OG_0 (nb, 3) and
    body-to-global rotations A0 (nb, 3, 3). g0 and A0 are constants of a simulation."""

    T: jax.Array
    R: jax.Array
    g0: jax.Array
    A0: jax.Array


class RotmatConstants(NamedTuple):
    """Per-body constants of a simulation, computed once: mass m (nb,), OG_0 (nb, 3),
    K_G^{-1} (nb, 3, 3) and its eigen-decomposition K_G^{-1} = Q diag(d) Q^T, and the status
    of the inversion of K_G (a flat or degenerate body has a singular second moment)."""

    mass: jax.Array
    g0: jax.Array
    K_inv: jax.Array
    Q: jax.Array
    d: jax.Array
    status: jax.Array


# ----------------------------------------------------------------------- small helpers


def _mT(X):
    return jnp.swapaxes(X, -1, -2)


#: K = tr(J)/2 I - J (eq. 11): the Poinsot tensor, the second moment of mass, which is the
#: director formulation's Euler tensor (one function for both).
poinsot_tensor = euler_tensor


def _eig_solve(Q, d, B):
    """Lambda with Lambda K^-1 + K^-1 Lambda = B for K^-1 = Q diag(d) Q^T (eq. 25):
    Lambda = Q [(Q^T B Q)_kl / (d_k + d_l)] Q^T. The 3x3 products here and below are
    elementwise (:mod:`jaxmbd.compiled.small`): a ``dot`` in the time step keeps XLA's CPU compiler
    from running the step loop as one native loop (:mod:`jaxmbd.linear.small`)."""
    Bt = mm(mtm(Q, B), Q)
    return mm(mm(Q, Bt / (d[..., :, None] + d[..., None, :])), _mT(Q))


def _lyapunov_with_derivative(K_inv, B, Q, d):
    """The solution, carrying d Lambda = solve(-Lambda dK^-1 - dK^-1 Lambda) in its expression
    (the added term is zero in value): derivatives of every order are right even where JAX
    differentiates the primal function instead of the rule (partial evaluation in scan)."""
    lam = _eig_solve(Q, d, B)
    dK = K_inv - jax.lax.stop_gradient(K_inv)
    return lam + _eig_solve(Q, d, -(mm(lam, dK) + mm(dK, lam)))


@jax.custom_jvp
def lyapunov_solve(K_inv, B, Q, d):
    """Solve Lambda K^-1 + K^-1 Lambda = B (eq. 25, a continuous Lyapunov/Sylvester equation,
    uniquely solvable since K^-1 is SPD) with the precomputed eigen-decomposition
    K^-1 = Q diag(d) Q^T. Batched over leading axes.

    Derivatives never pass through the eigen-decomposition (whose derivative is singular
    for repeated eigenvalues, e.g. symmetric bodies): d Lambda solves the same equation with
    right-hand side dB - Lambda dK^-1 - dK^-1 Lambda. Second derivatives are right too.
    """
    return _lyapunov_with_derivative(K_inv, B, Q, d)


@lyapunov_solve.defjvp
def _lyapunov_solve_jvp(primals, tangents):
    K_inv, B, Q, d = primals
    dK, dB, _, _ = tangents
    lam = _lyapunov_with_derivative(K_inv, B, Q, d)
    # a linear solve whose operator X -> X K^-1 + K^-1 X carries K^-1's own derivative, so
    # the next order sees d(L^-1) = -L^-1 dL L^-1; the numbers come from the eigen-solve
    tangent = jax.lax.custom_linear_solve(
        lambda X: mm(X, K_inv) + mm(K_inv, X),
        dB - mm(lam, dK) - mm(dK, lam),
        solve=lambda _, rhs: _eig_solve(Q, d, rhs),
        symmetric=True,
    )
    return lam, tangent


def _pack_upper(L):
    """(nb, 3, 3) symmetric -> (nb, 6) in the row order (11, 22, 33, 12, 13, 23)."""
    return jnp.stack([L[..., i, j] for i, j in _UPPER], -1)


def unpack_multipliers(lam6):
    """(..., 6) orthogonality multipliers -> symmetric (..., 3, 3) Lambda matrices (stacked,
    not set by index: a scatter would keep the time step from being hoisted)."""
    at = {}
    for k, (i, j) in enumerate(_UPPER):
        at[i, j] = at[j, i] = lam6[..., k]
    return jnp.stack([jnp.stack([at[i, j] for j in range(3)], -1) for i in range(3)], -2)


class TwoStepMultipliers(AbstractMultiplierElimination):
    """Rotmat's multipliers by two-step elimination (eq. 25, :meth:`Rotmat.two_step`) from
    the per-simulation constants (:meth:`Rotmat.constants`), and its closed-form
    accelerations for given multipliers (eq. 12): no KKT system."""

    solves_kkt: ClassVar[bool] = False

    def constants(self, model, form, q):
        return form.constants(model, q)

    def solve(self, model, form, constants, q, v, t) -> Index1Solution:
        return form.two_step(model, constants, q, v, t)

    def given(self, model, form, constants, q, v, t, lam):
        a = form.accelerations_given_multipliers(model, constants, q, v, t, lam)
        return a, as_status(SUCCESS)


class Rotmat(AbstractFormulation):
    """Rotation-matrix elements (T*, R), reference = configuration at t = 0 (Dumitriu &
    Mărgăritescu eqs. 1-14). Default integrator: ``rk`` (explicit Runge-Kutta on the index-1
    ODE with two-step multiplier elimination)."""

    name: ClassVar[str] = "rotmat"
    tangent_size: ClassVar[int] = 12
    default_integrator: ClassVar[str] = "rk"
    has_pose: ClassVar[bool] = False  # coordinates relative to the configuration at t = 0
    index1_blocks: ClassVar[bool] = True
    vector_space: ClassVar[bool] = True
    two_step_multipliers: ClassVar[AbstractMultiplierElimination] = TwoStepMultipliers()

    # -- the orientation-representation interface does not apply without a reference ----
    def _no_reference(self, what):
        raise ValueError(
            f"the rotmat formulation has no {what}: its coordinates are relative to the "
            "configuration at t = 0 (use from_body_state / to_body_state); it supports "
            "jaxmbd.simulate only (integrator 'rk'), not jaxmbd.kinematics"
        )

    def coordinates(self, A):
        self._no_reference("coordinates(A)")

    def rotation(self, ori):
        self._no_reference("rotation(ori)")

    def rate_from_omega(self, ori, omega):
        self._no_reference("rate_from_omega")

    def omega_from_rate(self, ori, rate, rate_dot):
        self._no_reference("omega_from_rate")

    # -- coordinates -----------------------------------------------------------------------
    def from_body_state(self, r, A, rdot, omega, rddot, omegadot):
        """The given state becomes the reference (t = 0): T* = 0, R = I (eq. 4), R' = j(Omega)
        and T*' = r' - j(Omega) OG_0 (eq. 8) with Omega = A omega_bar, and
        R'' = j(Omega') + j(Omega)^2, T*'' = r'' - R'' OG_0 (Omega' = A omegadot_bar)."""
        nb = r.shape[0]
        eye = jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
        W = hat(jnp.einsum("bij,bj->bi", A, omega))
        W_dot = hat(jnp.einsum("bij,bj->bi", A, omegadot))
        R_dd = W_dot + W @ W
        T_d = rdot - jnp.einsum("bij,bj->bi", W, r)
        T_dd = rddot - jnp.einsum("bij,bj->bi", R_dd, r)
        q = RotmatCoordinates(jnp.zeros_like(r), eye, r, A)
        v = jnp.concatenate([T_d, W.reshape(nb, 9)], 1)
        a = jnp.concatenate([T_dd, R_dd.reshape(nb, 9)], 1)
        return q, v, a

    def to_body_state(self, q, v, a):
        """r = T* + R OG_0, A = R A_0, r' = T*' + R' OG_0, Omega = vee(R' R^T) (eqs. 6-7,
        skew part), omega_bar = A^T Omega, omegadot_bar = A^T vee(R'' R^T)."""
        nb = q.T.shape[0]
        R = q.R
        R_d, R_dd = v[:, 3:].reshape(nb, 3, 3), a[:, 3:].reshape(nb, 3, 3)
        r = q.T + mv(R, q.g0)
        A = mm(R, q.A0)
        rdot = v[:, :3] + mv(R_d, q.g0)
        rddot = a[:, :3] + mv(R_dd, q.g0)
        omega = row_vec_mat(vee(mm(R_d, _mT(R))), A)
        omegadot = row_vec_mat(vee(mm(R_dd, _mT(R))), A)
        return r, A, rdot, omega, rddot, omegadot

    def flat_coordinates(self, q):
        """(T*, R row-major) per body, (nb, 12)."""
        nb = q.T.shape[0]
        return jnp.concatenate([q.T, q.R.reshape(nb, 9)], 1)

    def coordinates_from_flat(self, x, g0, A0):
        """Inverse of :meth:`flat_coordinates` for a given reference (g0, A0)."""
        x = x.reshape(-1, 12)
        return RotmatCoordinates(x[:, :3], x[:, 3:].reshape(-1, 3, 3), g0, A0)

    def retract(self, q, delta):
        d = delta.reshape(-1, 12)
        return q._replace(T=q.T + d[:, :3], R=q.R + d[:, 3:].reshape(-1, 3, 3))

    def predict(self, q, v, h):
        return self.retract(q, h * v.reshape(-1))

    # -- constraints -------------------------------------------------------------------------
    def num_equations(self, model):
        return model.nc + 6 * model.nb

    def joint_residual(self, model, q, t):
        """The model's GCON rows in (T*, R): Phi(T* + R OG_0, R A_0, t), polynomial of degree
        at most 2 (linear for CD and the spherical joint, eq. 13)."""
        r = q.T + mv(q.R, q.g0)
        return constraint_values(model, r, mm(q.R, q.A0), t)

    def orthogonality_residual(self, q):
        """(nb * 6,): 1/2 (1 - S_kk), -S_kl (k < l), S = R^T R, body-major (eq. 2)."""
        S = mtm(q.R, q.R)
        rows = jnp.stack(
            [0.5 * (1.0 - S[:, k, k]) if k == m else -S[:, k, m] for k, m in _UPPER], -1
        )
        return rows.reshape(-1)

    def residual(self, model, q, t):
        return jnp.concatenate([self.joint_residual(model, q, t), self.orthogonality_residual(q)])

    def _flat_fn(self, fn, q):
        x0 = self.flat_coordinates(q).reshape(-1)
        return (lambda x, t: fn(self.coordinates_from_flat(x, q.g0, q.A0), t)), x0

    def _terms(self, fn, q, v, t):
        """(value, Jacobian, nu, gamma) of a position function fn(q, t) by autodiff; exact
        second derivatives since every row is at most quadratic in (T*, R)."""
        f, x = self._flat_fn(fn, q)
        xd = v.reshape(-1)
        one = jnp.ones_like(t)
        G = jax.jacfwd(f)(x, t)
        value, phi_t = jax.jvp(lambda s: f(x, s), (t,), (one,))

        def first(x_, t_):
            return jax.jvp(f, (x_, t_), (xd, one))[1]

        gamma = -jax.jvp(first, (x, t), (xd, one))[1]
        return value, G, -phi_t, gamma

    def position_terms(self, model, q, t):
        f, x = self._flat_fn(lambda q_, t_: self.residual(model, q_, t_), q)
        return f(x, t), jax.jacfwd(f)(x, t)

    def velocity_terms(self, model, q, t):
        f, x = self._flat_fn(lambda q_, t_: self.residual(model, q_, t_), q)
        G = jax.jacfwd(f)(x, t)
        _, phi_t = jax.jvp(lambda s: f(x, s), (t,), (jnp.ones_like(t),))
        return G, -phi_t

    def acceleration_rhs(self, model, q, v, t):
        return self._terms(lambda q_, t_: self.residual(model, q_, t_), q, v, t)[3]

    def joint_terms(self, model, q, v, t):
        """(Phi, G, nu, gamma) of the model's GCON rows only (nc rows, 12 nb columns)."""
        return self._terms(lambda q_, t_: self.joint_residual(model, q_, t_), q, v, t)

    # -- dynamics ---------------------------------------------------------------------------
    def num_multipliers(self, model):
        return model.nc + 6 * model.nb

    def constants(self, model, q) -> RotmatConstants:
        """m, OG_0, K_G^{-1} = A_0 K_bar^{-1} A_0^T and its eigen-decomposition (computed once;
        no derivative flows through the eigenvectors, see :func:`lyapunov_solve`), with the
        first failure of the bodies' inversions (pivot-ratio test)."""
        K_bar = poinsot_tensor(model.inertia)
        eye = jnp.broadcast_to(jnp.eye(3, dtype=K_bar.dtype), K_bar.shape)
        K_bar_inv, statuses = solve_with_condition(K_bar, eye)  # one status per body
        K_inv = q.A0 @ K_bar_inv @ _mT(q.A0)
        d, Q_bar = jnp.linalg.eigh(jax.lax.stop_gradient(K_bar_inv))
        Q = jax.lax.stop_gradient(q.A0) @ Q_bar
        status = first_failure(as_status(statuses), axis=0)
        return RotmatConstants(model.mass, q.g0, K_inv, Q, d, status)

    def poinsot_tensors(self, model, q):
        """K_G at t = 0 in the inertial basis, (nb, 3, 3) (eqs. 10-11, 15)."""
        return mm(mm(q.A0, poinsot_tensor(model.inertia)), _mT(q.A0))

    def body_velocities(self, q, v):
        """BodyState (r, A, r', omega_bar) of a rotmat state (for the applied forces)."""
        nb = q.T.shape[0]
        R_d = v[:, 3:].reshape(nb, 3, 3)
        A = mm(q.R, q.A0)
        r = q.T + mv(q.R, q.g0)
        rdot = v[:, :3] + mv(R_d, q.g0)
        omega = row_vec_mat(vee(mm(R_d, _mT(q.R))), A)
        return BodyState(r, A, rdot, omega)

    def generalized_forces(self, model, q, v, t, a=None):
        """(X (nb, 3), Y (nb, 3, 3)) of gravity and the force elements: a force f at the centre
        of mass gives X = f, Y = f (x) OG_0; a body torque n_bar gives Y = 1/2 j(A n_bar) R.
        With accelerations ``a``, also the acceleration part of the elements' added mass
        (joint armature, :meth:`added_mass_forces`)."""
        state = self.body_velocities(q, v)
        f, n_bar = applied_forces(model.forces, t, state, model.mass, model.gravity)
        inertial = None if a is None else self.added_mass_forces(model, q, v, a, t)
        if inertial is not None:
            f, n_bar = f + inertial[0], n_bar + inertial[1]
        n = mv(state.A, n_bar)
        Y = f[:, :, None] * q.g0[:, None, :] + 0.5 * mm(hat(n), q.R)
        return f, Y

    def mass_matrix(self, model, q):
        """Per-body constant mass blocks (nb, 12, 12) of (9) in (T*, vec R):
        [[m I, m I (x) OG_0^T], [m I (x) OG_0, I (x) K_O]], K_O = K_G + m OG_0 OG_0^T."""
        m, g0 = model.mass, q.g0
        K_O = self.poinsot_tensors(model, q) + m[:, None, None] * g0[:, :, None] * g0[:, None, :]
        eye = jnp.eye(3)
        M_TT = m[:, None, None] * eye
        # Kronecker products as broadcasts (an einsum is a dot, also without contraction)
        M_TR = m[:, None, None] * (eye[None, :, :, None] * g0[:, None, None, :]).reshape(-1, 3, 9)
        M_RR = (eye[None, :, None, :, None] * K_O[:, None, :, None, :]).reshape(-1, 9, 9)
        top = jnp.concatenate([M_TT, M_TR], 2)
        bottom = jnp.concatenate([_mT(M_TR), M_RR], 2)
        return jnp.concatenate([top, bottom], 1)

    def dynamics_equations(self, model, q, v, a, lam, t):
        """g = M a + G^T lam - (X, Y) (eq. 9, h-free; dg/dlam = G^T) and phi = residual."""
        nb = model.nb
        M = self.mass_matrix(model, q)
        X, Y = self.generalized_forces(model, q, v, t, a)
        f, x = self._flat_fn(lambda q_, t_: self.residual(model, q_, t_), q)
        phi, vjp = jax.vjp(lambda x_: f(x_, t), x)
        reaction = vjp(lam)[0].reshape(nb, 12)
        Q = jnp.concatenate([X, Y.reshape(nb, 9)], 1)
        g = jnp.einsum("bij,bj->bi", M, a.reshape(nb, 12)) + reaction - Q
        return g.reshape(-1), phi

    # -- index-1 accelerations (eqs. 12, 22-25) -----------------------------------------------
    def _accelerations(self, c: RotmatConstants, R, R_d, X, Y, *, lyapunov: bool):
        """Eq. 12 for efforts (X, Y): with lyapunov=True Lambda solves the orthogonality
        equation (23) by eq. 25 (assuming R^T R = I); otherwise Lambda = 0. R_d = None drops
        the velocity term -2 R'^T R' of B (the linear part of the map)."""
        A_bar = Y - X[:, :, None] * c.g0[:, None, :]
        if lyapunov:
            B = -mm(mm(c.K_inv, _mT(A_bar)), R) - mm(mtm(R, A_bar), c.K_inv)
            if R_d is not None:
                B = B - 2.0 * mtm(R_d, R_d)
            L = lyapunov_solve(c.K_inv, B, c.Q, c.d)
            A_bar = A_bar + mm(R, L)
        else:
            L = jnp.zeros_like(R)
        R_dd = mm(A_bar, c.K_inv)
        T_dd = X / c.mass[:, None] - mv(R_dd, c.g0)
        nb = R.shape[0]
        return jnp.concatenate([T_dd, R_dd.reshape(nb, 9)], 1), L

    def two_step(self, model, c: RotmatConstants, q, v, t) -> Index1Solution:
        """Index-1 accelerations and multipliers by two-step elimination (eq. 25).

        Step 1: per body, Lambda K^-1 + K^-1 Lambda = B with B = -2 R'^T R' - K^-1 Abar^T R
        - R^T Abar K^-1 (Abar = Y - X (x) OG_0, joint efforts included), solved with the
        eigen-decomposition of K^-1. Lambda is affine in the joint multipliers lam.
        Step 2: the joint acceleration equations G_J a(lam) = gamma_J (eq. 24) give a small
        linear system W lam = G_J a_free - gamma_J, W = G_J P G_J^T, with P (nb, 12, 12)
        the per-body linear part of the effort -> acceleration map built by evaluation.
        Exact when R^T R = I; otherwise it differs from the full KKT system by O(||R^T R - I||).
        The status is the first failure of the inversion of K (:meth:`constants`) and of the
        joint system W (pivot-ratio test, :func:`~jaxmbd.newton.solve_with_condition`):
        dependent joint rows make W singular.
        """
        _refuse_added_mass(model, "multipliers='two_step' (eq. 25)")
        nb, nc = model.nb, model.nc
        R = q.R
        R_d = v[:, 3:].reshape(nb, 3, 3)
        X, Y = self.generalized_forces(model, q, v, t)

        def acc(X_, Y_, R_d_):
            return self._accelerations(c, R, R_d_, X_, Y_, lyapunov=True)

        if nc:
            _, G, _, gamma = self.joint_terms(model, q, v, t)
            a_free, _ = acc(X, Y, R_d)

            def column(e):
                e = jnp.broadcast_to(e, (nb, 12))
                return acc(e[:, :3], e[:, 3:].reshape(nb, 3, 3), None)[0]

            P = jax.vmap(column, out_axes=-1)(jnp.eye(12))  # (nb, 12, 12)
            W, G_a_free = _joint_system(G, P, a_free.reshape(-1))
            lam, status = solve_with_condition(W, G_a_free - gamma)
            reaction = small.transpose_times(G, lam).reshape(nb, 12)
            X = X - reaction[:, :3]
            Y = Y - reaction[:, 3:].reshape(nb, 3, 3)
        else:
            lam, status = jnp.zeros((0,)), jnp.asarray(SUCCESS)
        a, L = acc(X, Y, R_d)
        lam = jnp.concatenate([lam, _pack_upper(L).reshape(-1)])
        return Index1Solution(a, lam, first_failure(c.status, status))

    def index1_system(self, model, q, v, t) -> Index1System:
        """The full index-1 KKT blocks (:mod:`jaxmbd.formulations.index1`): constant mass
        blocks of (9), efforts (X, Y), and G, gamma of all nc + 6 nb rows (23)-(24). With
        added mass (joint armature), which couples bodies, by autodiff of
        :meth:`dynamics_equations`."""
        if adds_mass(model.forces):
            return index1_from_equations(self, model, q, v, t)
        nb = model.nb
        X, Y = self.generalized_forces(model, q, v, t)
        _, G, _, gamma = self._terms(lambda q_, t_: self.residual(model, q_, t_), q, v, t)
        force = jnp.concatenate([X, Y.reshape(nb, 9)], 1)
        return Index1System(self.mass_matrix(model, q), force, G, gamma)

    def one_step(self, model, q, v, t) -> Index1Solution:
        """Index-1 accelerations and multipliers from the full KKT system
        [[M, G^T], [G, 0]] [a; lam] = [(X, Y); gamma] with all nc + 6 nb rows (23)-(24), and
        the status of its solve."""
        return solve_index1(self.index1_system(model, q, v, t))

    def accelerations_given_multipliers(self, model, c: RotmatConstants, q, v, t, lam):
        """a = M^-1 ((X, Y) - G^T lam) in closed form (eq. 12) for given multipliers (the
        joint rows act through G_J^T, Lambda through R Lambda)."""
        _refuse_added_mass(model, "multipliers='frozen' (eq. 12)")
        nb, nc = model.nb, model.nc
        X, Y = self.generalized_forces(model, q, v, t)
        if nc:
            f, x = self._flat_fn(lambda q_, t_: self.joint_residual(model, q_, t_), q)
            _, vjp = jax.vjp(lambda x_: f(x_, t), x)
            reaction = vjp(lam[:nc])[0].reshape(nb, 12)
            X = X - reaction[:, :3]
            Y = Y - reaction[:, 3:].reshape(nb, 3, 3)
        L = unpack_multipliers(lam[nc:].reshape(nb, 6))
        a, _ = self._accelerations(c, q.R, None, X, Y + mm(q.R, L), lyapunov=False)
        return a

    # -- diagnostics -----------------------------------------------------------------------
    def kinetic_energy(self, model, q, v):
        """T = sum 1/2 m |T*' + R' OG_0|^2 + 1/2 tr(R' K_G R'^T) (exact in these coordinates)."""
        nb = q.T.shape[0]
        R_d = v[:, 3:].reshape(nb, 3, 3)
        rdot = v[:, :3] + jnp.einsum("bij,bj->bi", R_d, q.g0)
        K = self.poinsot_tensors(model, q)
        rot = jnp.einsum("bij,bjk,bik->b", R_d, K, R_d)
        return 0.5 * jnp.sum(model.mass * jnp.sum(rdot * rdot, -1) + rot)


def _joint_system(G, P, a_free):
    """(W, G a_free) of the two-step elimination (:meth:`Rotmat.two_step`): W = G_J P G_J^T
    for the joint rows G (nc, 12 nb) and the per-body blocks P (nb, 12, 12). In a hoistable
    step (:func:`jaxmbd.linear.small.hoistable`) elementwise products with unrolled sums:
    XLA's CPU compiler makes an einsum, and a product followed by a ``reduce``, a YNNPACK
    dot fusion, which keeps the step loop from being hoisted."""
    nc, nb = G.shape[0], P.shape[0]
    G3 = G.reshape(nc, nb, 12)
    if not small.hoistable():
        PGt = jnp.einsum("bkl,cbl->cbk", P, G3)
        return jnp.einsum("dbk,cbk->dc", G3, PGt), G @ a_free
    PGt = small._sum_unrolled(P[None] * G3[:, :, None, :], 3).reshape(nc, nb * 12)
    W = small.matmul(G, PGt.T)
    return W, small.matvec(G, a_free)


def _refuse_added_mass(model, what: str) -> None:
    """The per-body closed forms (eqs. 12, 25) assume the block-diagonal mass of (9); joint
    armature adds a g g^T between two bodies (and configuration-dependent): refused."""
    if adds_mass(model.forces):
        raise ValueError(
            f"rotmat: {what} solves each body's accelerations in closed form with the "
            f"constant per-body mass of (9), but model '{model.name}' has joint armature, "
            "whose inertia a g g^T couples the joint's two bodies; use the full KKT system "
            "(integrator 'rk' with multipliers='one_step')"
        )


# ------------------------------------------------------------------- Solution diagnostics


def is_rotmat_solution(sol) -> bool:
    """Whether ``sol`` was computed in rotmat coordinates (T*, R) (its formulation is a
    :class:`Rotmat`) and stores them."""
    from . import formulation_named

    own = sol.q is not None and sol.v is not None
    return isinstance(formulation_named(sol.formulation), Rotmat) and own


def _solution_state(sol):
    if not is_rotmat_solution(sol):
        raise ValueError(
            "this diagnostic needs a Solution of jaxmbd.simulate with formulation 'rotmat', "
            f"got formulation {sol.formulation!r}"
        )
    q = jnp.asarray(sol.q)
    nt, nb = q.shape[:2]
    g0 = jnp.broadcast_to(sol.r[0], (nt, nb, 3))
    A0 = jnp.broadcast_to(sol.A[0], (nt, nb, 3, 3))
    coords = RotmatCoordinates(q[..., :3], q[..., 3:].reshape(nt, nb, 3, 3), g0, A0)
    return coords, jnp.asarray(sol.v)


def orthogonality_multipliers(model, sol, *, method: str = "two_step"):
    """The symmetric orthogonality multipliers Lambda_i (T, nb, 3, 3) of eq. 9 along a rotmat
    Solution, recomputed at every stored state with ``method`` "two_step" (eq. 25, what the
    rk integrator uses by default) or "one_step" (full KKT system). The reference
    configuration is the Solution's first row (t = 0)."""
    if method not in ("two_step", "one_step"):
        raise ValueError(f"method must be 'two_step' or 'one_step', got {method!r}")
    form = Rotmat()
    coords, v = _solution_state(sol)
    c = form.constants(model, jax.tree_util.tree_map(lambda x: x[0], coords))

    def one(q, v, t):
        if method == "two_step":
            lam = form.two_step(model, c, q, v, t).lam
        else:
            lam = form.one_step(model, q, v, t).lam
        return unpack_multipliers(lam[model.nc :].reshape(model.nb, 6))

    return jax.vmap(one)(coords, v, jnp.asarray(sol.t))


def orthogonality_error(sol):
    """||R_i^T R_i - I||_F (T, nb) along a rotmat Solution: the drift of constraint (2)."""
    coords, _ = _solution_state(sol)
    R = coords.R
    return jnp.linalg.norm(_mT(R) @ R - jnp.eye(3), axis=(-2, -1))


__all__ = [
    "Index1Solution",
    "is_rotmat_solution",
    "Rotmat",
    "RotmatConstants",
    "RotmatCoordinates",
    "lyapunov_solve",
    "orthogonality_error",
    "orthogonality_multipliers",
    "poinsot_tensor",
    "unpack_multipliers",
]
