"""The se3 formulation (Mueller & Terze section 2.1): each body's configuration is
C = (A, r) in SE(3) and its velocity the body twist V = (omega_bar, v_bar) with
omega_bar~ = A^T A_dot and v_bar = A^T r_dot (eq. 6; angular part first, as in the paper).

* Positions q = (r (nb, 3), A (nb, 3, 3)); velocity and acceleration rows (nb, 6) =
  (omega_bar, v_bar) and (omegadot_bar, v_bar_dot).
* Retraction: C exp(delta) with the SE(3) exponential (eq. 8), so a correction moves r by
  A p(delta) and A by exp(delta_omega~): the screw motion of the body, not an independent
  translation as in rA.
* Newton-Euler equations at the centre of mass in the body frame:
  J omegadot + omega x J omega = n_bar and m (v_bar_dot + omega x v_bar) = A^T f.
* Constraints: the GCON rows of every joint and driver (paper 1 Table 1) with the rA
  Jacobian G_rA = [Phi_r, Pi_bar] transformed to the body twist, r_dot = A v_bar:
  G = [Pi_bar, Phi_r A] and gamma = gamma_rA - Phi_r A (omega x v_bar) (since
  r_ddot = A (v_bar_dot + omega x v_bar)). For a spherical joint to the ground these are
  Mueller-Terze eqs. 39-40 up to row sign and scaling.

Its integrator is ``rkmk`` (:class:`~jaxmbd.integrators.MuntheKaas`), which uses
:meth:`SE3.index1_system` and :meth:`SE3.dexpinv`.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..constraints.equations import constraint_values, rA_jacobian_from_rows, rA_rows, rA_terms
from ..forces import BodyState, adds_mass
from ..forces._rigid_body import mass_blocks, newton_euler_forces
from ..lie import reorthonormalize, se3_dexpinv, se3_exp
from ..linear import dense
from .base import AbstractFormulation, index1_from_equations
from .index1 import Index1System


def _mv(M, x):
    return jnp.einsum("...ij,...j->...i", M, x)


def _to_twist_columns(G, A):
    """G with body-major (delta r, theta_bar) columns -> (omega_bar, v_bar) columns, using
    delta r = A v_bar: per body [Pi_bar, Phi_r A]."""
    m, nb = G.shape[0], A.shape[0]
    blocks = G.reshape(m, nb, 2, 3)
    g_r, g_w = blocks[:, :, 0], blocks[:, :, 1]
    g_v = jnp.einsum("cbi,bij->cbj", g_r, A)
    return jnp.stack([g_w, g_v], axis=2).reshape(m, 6 * nb), g_r


class SE3(AbstractFormulation):
    """(r, A) in SE(3) with the body twist (omega_bar, v_bar = A^T r_dot)."""

    name: ClassVar[str] = "se3"
    tangent_size: ClassVar[int] = 6
    default_integrator: ClassVar[str] = "rkmk"
    index1_blocks: ClassVar[bool] = True
    lie_group: ClassVar[bool] = True

    # -- orientation representation (the rotation part is A itself) -------------------------
    def coordinates(self, A):
        return A

    def rotation(self, ori):
        return ori

    def rate_from_omega(self, ori, omega):
        return omega

    def omega_from_rate(self, ori, rate, rate_dot):
        return rate, rate_dot

    def from_body_state(self, r, A, rdot, omega, rddot, omegadot):
        """v = (omega_bar, A^T r_dot), a = (omegadot_bar, A^T r_ddot - omega x v_bar)."""
        v_bar = _mv(jnp.swapaxes(A, -1, -2), rdot)
        v_bar_dot = _mv(jnp.swapaxes(A, -1, -2), rddot) - jnp.cross(omega, v_bar)
        v = jnp.concatenate([omega, v_bar], 1)
        a = jnp.concatenate([omegadot, v_bar_dot], 1)
        return (r, A), v, a

    def to_body_state(self, q, v, a):
        r, A = q
        omega, v_bar = v[:, :3], v[:, 3:]
        rdot = _mv(A, v_bar)
        rddot = _mv(A, a[:, 3:] + jnp.cross(omega, v_bar))
        return r, A, rdot, omega, rddot, a[:, :3]

    def retract(self, q, delta):
        """C exp(delta) per body (eq. 5 and 8): A <- A exp(d_omega~), r <- r + A p(d)."""
        r, A = q
        R, p = se3_exp(delta.reshape(r.shape[0], 6))
        return r + _mv(A, p), reorthonormalize(A @ R)  # round-off must not accumulate

    def predict(self, q, v, h):
        return self.retract(q, h * v.reshape(-1))

    def tangent_map(self, delta):
        """dexp_{-delta} per body (the right Jacobian of the SE(3) exponential)."""
        return dense.inverse(se3_dexpinv(-delta.reshape(-1, 6)))

    def times_tangent_map(self, matrix, delta):
        T = self.tangent_map(delta)
        rows, nb = matrix.shape[0], T.shape[0]
        return jnp.einsum("rbi,bij->rbj", matrix.reshape(rows, nb, 6), T).reshape(rows, 6 * nb)

    def dexpinv(self, delta, v, *, sign: int = -1):
        """Munthe-Kaas increment dexp^-1_{sign delta} V per body (eq. 37; sign = -1 for the
        left-trivialised body twist)."""
        return _mv(se3_dexpinv(sign * delta), v)

    # -- constraints -----------------------------------------------------------------------
    def residual(self, model, q, t):
        return constraint_values(model, q[0], q[1], t)

    def position_terms(self, model, q, t):
        r, A = q
        phi, jac_i, jac_j = rA_rows(model, r, A, t)
        return phi, _to_twist_columns(rA_jacobian_from_rows(model, jac_i, jac_j), A)[0]

    def velocity_terms(self, model, q, t):
        r, A = q
        zero = jnp.zeros_like(r)
        _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
        return _to_twist_columns(G, A)[0], nu

    def _terms(self, model, q, v, t):
        r, A = q
        omega, v_bar = v[:, :3], v[:, 3:]
        phi, G_rA, _, gamma_rA = rA_terms(model, r, A, _mv(A, v_bar), omega, t)
        G, g_r = _to_twist_columns(G_rA, A)
        # r_ddot = A (v_bar_dot + omega x v_bar): move the known part to the right-hand side
        coriolis = _mv(A, jnp.cross(omega, v_bar))
        gamma = gamma_rA - jnp.einsum("cbi,bi->c", g_r, coriolis)
        return phi, G, gamma

    def acceleration_rhs(self, model, q, v, t):
        return self._terms(model, q, v, t)[2]

    # -- Newton-Euler equations in the body frame ------------------------------------------
    def _mass_and_force(self, model, q, v, t, a=None):
        """diag(J, m I) and the Newton-Euler forces in the body frame: the translational
        equation m (v_bar_dot + omega x v_bar) = A^T f moves its Coriolis term to the right.
        With accelerations ``a`` the forces include the acceleration part of the force
        elements' added mass (joint armature; :meth:`added_mass_forces`)."""
        r, A = q
        omega, v_bar = v[:, :3], v[:, 3:]
        f, torque = newton_euler_forces(model, t, BodyState(r, A, _mv(A, v_bar), omega))
        inertial = None if a is None else self.added_mass_forces(model, q, v, a, t)
        if inertial is not None:
            f, torque = f + inertial[0], torque + inertial[1]
        coriolis = model.mass[:, None] * jnp.cross(omega, v_bar)
        force = jnp.concatenate([torque, _mv(jnp.swapaxes(A, -1, -2), f) - coriolis], 1)
        return mass_blocks(model.mass, model.inertia, angular_first=True), force

    def index1_system(self, model, q, v, t) -> Index1System:
        """M = diag(J, m I), Q = (n_bar - omega x J omega, A^T f - m omega x v_bar), G and
        gamma in body-twist coordinates (Mueller-Terze eq. 3; eq. 40 for the heavy top).
        With added mass (joint armature) by autodiff of :meth:`dynamics_equations`."""
        if adds_mass(model.forces):
            return index1_from_equations(self, model, q, v, t)
        mass, force = self._mass_and_force(model, q, v, t)
        _, G, gamma = self._terms(model, q, v, t)
        return Index1System(mass, force, G, gamma)

    def dynamics_equations(self, model, q, v, a, lam, t):
        """g = M a + G^T lam - Q (body-frame Newton-Euler) and Phi."""
        mass, force = self._mass_and_force(model, q, v, t, a)
        phi, G, _ = self._terms(model, q, v, t)
        g = jnp.einsum("bij,bj->bi", mass, a) - force
        return g.reshape(-1) + G.T @ lam, phi
