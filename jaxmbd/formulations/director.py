"""The director formulation (Betsch & Leyendecker 2006, Sec. 3): each body is its centre of
mass and three directors, q_b = (phi, d1, d2, d3) in R^12 (eq. 21).

* The directors are the columns of the body-to-global rotation, A = [d1 d2 d3], so a body
  point is x = phi + X_I d_I (eq. 16) and every body-fixed vector A s_bar = s_bar_I d_I is
  *linear* in q.
* Six internal constraints per body (eq. 24): 1/2 (d_I.d_I - 1) = 0 and d_I.d_J = 0 (I < J),
  appended after the model's nc GCON rows, body-major.
* The mass matrix is constant (eq. 23): blockdiag(m I3, E (x) I3) with the Euler tensor
  E = 1/2 tr(J) I - J (eq. 20/158) of the body-frame inertia J. A non-principal J gives a
  full constant E (blocks E_IJ I3); no principal axes are needed (notes, ambiguity 8).
* There are no gyroscopic terms: the equations of motion are M q_ddot + G^T lam = Q.

**Every constraint is at most quadratic in q.** With A linear in the directors, DP1
(a_i.a_j), DP2 (a_i.d_ij), ROT (cos(th) v_i.a_j - sin(th) u_i.a_j) are bilinear, D (d_ij.d_ij)
is quadratic, CD (c.d_ij) is linear, and the internal constraints are quadratic. Hence
the midpoint Jacobian is an exact discrete derivative (eqs. 38, 65, 67):

    Phi(q1) - Phi(q0) = G((q0 + q1) / 2) (q1 - q0)   exactly, for any q0, q1,

which the energy-momentum scheme (:mod:`jaxmbd.integrators.energy_momentum`) relies on; the
test suite checks it to round-off at random, non-orthonormal q0, q1.

Coordinates are stored as ``q = (phi (nb, 3), dirs (nb, 9))`` with dirs = (d1, d2, d3), so
``Solution.q`` rows are (phi, d1, d2, d3); velocities are the redundant rows
(v_phi, v1, v2, v3) (eq. 22). Body quantities: omega_bar = vee(skew(A^T A_dot)), which is
exact for tangent velocities and the least-squares body rate otherwise (the midpoint
scheme's v_{n+1} satisfies the hidden constraint only at the midpoint).
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..compiled import small as _small
from ..forces import BodyState, applied_forces
from ..forces._rigid_body import euler_tensor  # E = 1/2 tr(J) I - J (eq. 20/158)
from ..lie import hat, vee
from .base import AbstractAutodiffFormulation


def _skew_part(W):
    return 0.5 * (W - jnp.swapaxes(W, -1, -2))


class Director(AbstractAutodiffFormulation):
    """Director coordinates q = (phi, d1, d2, d3) per body; constant mass matrix."""

    name: ClassVar[str] = "director"
    tangent_size: ClassVar[int] = 12
    orientation_size: ClassVar[int] = 9
    default_integrator: ClassVar[str] = "energy_momentum"
    director_coordinates: ClassVar[bool] = True

    # -- representation -----------------------------------------------------------------
    def num_equations(self, model):
        return model.nc + 6 * model.nb

    def num_multipliers(self, model):
        return model.nc + 6 * model.nb

    def coordinates(self, A):
        """dirs = (d1, d2, d3): the columns of A, one row of 9 per body."""
        return jnp.swapaxes(A, -1, -2).reshape(A.shape[:-2] + (9,))

    def rotation(self, ori):
        """A = [d1 d2 d3] (not orthonormal off the constraint manifold)."""
        return jnp.swapaxes(ori.reshape(ori.shape[:-1] + (3, 3)), -1, -2)

    def rate_from_omega(self, ori, omega):
        """d_I_dot = omega x d_I = A omega_bar~ e_I (eq. 27)."""
        A = self.rotation(ori)
        return self.coordinates(A @ hat(omega))

    def omega_from_rate(self, ori, rate, rate_dot):
        """omega_bar = vee(skew(A^T A_dot)), omegadot_bar = vee(skew(A^T A_ddot))
        (A_dot^T A_dot is symmetric). Elementwise products (:mod:`jaxmbd.compiled.small`): on the
        time step's path, where a ``dot`` would keep XLA from hoisting the step loop."""
        A = self.rotation(ori)
        W = _small.mtm(A, self.rotation(rate))
        Wd = _small.mtm(A, self.rotation(rate_dot))
        return vee(_skew_part(W)), vee(_skew_part(Wd))

    def extra_equations(self, ori):
        """Internal constraints (eq. 24), 6 per body, body-major."""
        d = ori.reshape(ori.shape[0], 3, 3)
        d1, d2, d3 = d[:, 0], d[:, 1], d[:, 2]
        rows = jnp.stack(
            [
                0.5 * (jnp.sum(d1 * d1, -1) - 1.0),
                0.5 * (jnp.sum(d2 * d2, -1) - 1.0),
                0.5 * (jnp.sum(d3 * d3, -1) - 1.0),
                jnp.sum(d1 * d2, -1),
                jnp.sum(d1 * d3, -1),
                jnp.sum(d2 * d3, -1),
            ],
            -1,
        )
        return rows.reshape(-1)

    # -- constant mass matrix and invariants ---------------------------------------------
    def mass_matrix(self, model):
        """Per-body 12x12 blocks blockdiag(m I3, E (x) I3) (eq. 23), shape (nb, 12, 12)."""
        E = euler_tensor(model.inertia)
        nb = model.nb
        M = jnp.zeros((nb, 12, 12))
        M = M.at[:, :3, :3].set(model.mass[:, None, None] * jnp.eye(3))
        M = M.at[:, 3:, 3:].set(jnp.einsum("bij,kl->bikjl", E, jnp.eye(3)).reshape(nb, 9, 9))
        return M

    def times_mass(self, model, v):
        """M v for per-body rows v (nb, 12) without forming M (eq. 23): m v_phi and
        sum_J E_IJ v_J, the latter an elementwise product (:mod:`jaxmbd.compiled.small`, no ``dot``
        in the time step)."""
        E = euler_tensor(model.inertia)
        vd = v[:, 3:].reshape(-1, 3, 3)
        return jnp.concatenate([model.mass[:, None] * v[:, :3], _small.mm(E, vd).reshape(-1, 9)], 1)

    def kinetic_energy(self, model, v):
        """T = 1/2 v^T M v with the redundant velocities (eq. 17)."""
        return 0.5 * jnp.sum(v * self.times_mass(model, v))

    def linear_momentum(self, model, v):
        return jnp.sum(model.mass[:, None] * v[:, :3], 0)

    def angular_momentum(self, model, q, v, point=(0.0, 0.0, 0.0)):
        """L = sum phi x m v_phi + sum_IJ E_IJ d_I x v_J about ``point`` (notes 1.8)."""
        phi, dirs = q
        Mv = self.times_mass(model, v)
        orbital = jnp.cross(phi - jnp.asarray(point), Mv[:, :3])
        d = dirs.reshape(-1, 3, 3)
        spin = jnp.sum(jnp.cross(d, Mv[:, 3:].reshape(-1, 3, 3)), 1)
        return jnp.sum(orbital + spin, 0)

    # -- forces ---------------------------------------------------------------------------
    def potential(self, model, q):
        """V(q) = -sum m g.phi + the potentials of the elements that split theirs off
        (:meth:`~jaxmbd.forces.AbstractForce.without_potential`; spring-dampers' springs,
        whose points x = phi + s_bar_I d_I are linear in q)."""
        phi, dirs = q
        V = -jnp.sum(model.mass * _small.dot(phi, model.gravity))
        A = self.rotation(dirs)
        zero = jnp.zeros_like(phi)
        for force in model.forces:
            if force.without_potential() is not None:
                V = V + force.potential_energy(BodyState(phi, A, zero, zero))
        return V

    def nonconservative_forces(self, model, q, v, t):
        """Generalised forces of every applied force except gravity and springs' stiffness
        (spring damping, point forces, torques, user laws), shape (nb, 12)."""
        forces = tuple(f if (rest := f.without_potential()) is None else rest for f in model.forces)
        return self._generalised(model, forces, jnp.zeros(3), q, v, t)

    def generalized_forces(self, model, q, v, t):
        """Q (nb, 12): [f; 1/2 n x d_I] of the applied forces (f at the COM, n = A n_bar the
        global torque): the virtual work f.dphi + n.dtheta with dd_I = dtheta x d_I."""
        return self._generalised(model, model.forces, model.gravity, q, v, t)

    def _generalised(self, model, forces, gravity, q, v, t):
        phi, dirs = q
        A = self.rotation(dirs)
        omega, _ = self.omega_from_rate(dirs, v[:, 3:], jnp.zeros_like(v[:, 3:]))
        f, n_bar = applied_forces(
            forces, t, BodyState(phi, A, v[:, :3], omega), model.mass, gravity
        )
        n = _small.mv(A, n_bar)
        d = dirs.reshape(-1, 3, 3)
        Qd = 0.5 * jnp.cross(n[:, None, :], d)
        return jnp.concatenate([f, Qd.reshape(-1, 9)], 1)

    def _forces(self, model, q, v, t):  # body forces (f, n_bar), used by base helpers
        phi, dirs = q
        omega, _ = self.omega_from_rate(dirs, v[:, 3:], jnp.zeros_like(v[:, 3:]))
        return applied_forces(
            model.forces,
            t,
            BodyState(phi, self.rotation(dirs), v[:, :3], omega),
            model.mass,
            model.gravity,
        )

    # -- equations of motion ----------------------------------------------------------------
    def dynamics_equations(self, model, q, v, a, lam, t):
        """g = M a + G^T lam - Q (eq. 1 with constant M: no gyroscopic terms);
        phi = [Phi_GCON; Phi_int]."""
        G = self.position_terms(model, q, t)[1]
        g = self.times_mass(model, a).reshape(-1) + G.T @ lam
        g = g - self.generalized_forces(model, q, v, t).reshape(-1)
        return g, self.residual(model, q, t)

    def null_space_internal(self, dirs):
        """P_int (eq. 29), per body (nb, 12, 6): [[I, 0], [0, -d1~], [0, -d2~], [0, -d3~]],
        mapping global twists (v_phi, omega) to director velocities."""
        d = dirs.reshape(-1, 3, 3)
        nb = d.shape[0]
        P = jnp.zeros((nb, 12, 6))
        P = P.at[:, :3, :3].set(jnp.eye(3))
        P = P.at[:, 3:, 3:].set(-hat(d).reshape(nb, 9, 3))
        return P
