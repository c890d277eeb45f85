"""The rA formulation (paper 1 sections 2.1 and 3.1): the rotation matrix itself is unknown.

Newton corrections rotate A on the right, A <- A exp(theta_bar~) (eq. 12); the Jacobian
is hand-coded from the Pi-bar variations (Table 2) in :mod:`jaxmbd.gcons`.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

from ..equations import (
    constraint_values,
    rA_generalized_reaction,
    rA_jacobian_from_rows,
    rA_reaction_sensitivity,
    rA_rows,
    rA_terms,
)
from ..forces import BodyState, applied_forces
from ..gcons import _mm, _mv
from ..lie import hat, so3_exp, so3_right_jacobian
from .base import AbstractFormulation


class RA(AbstractFormulation):
    name: ClassVar[str] = "rA"
    tangent_size: ClassVar[int] = 6

    def coordinates(self, A):
        return A

    def rotation(self, ori):
        return ori

    def rate_from_omega(self, ori, omega):
        return omega

    def omega_from_rate(self, ori, rate, rate_dot):
        return rate, rate_dot

    def retract(self, q, delta):
        r, A = q
        d = delta.reshape(r.shape[0], 6)
        return r + d[:, :3], A @ so3_exp(d[:, 3:])

    def predict(self, q, v, h):
        """Eq. 11: A exp(h omega_bar~); r + h r_dot."""
        r, A = q
        return r + h * v[:, :3], A @ so3_exp(h * v[:, 3:])

    def residual(self, model, q, t):
        return constraint_values(model, q[0], q[1], t)

    def position_terms(self, model, q, t):
        r, A = q
        zero = jnp.zeros_like(r)
        phi, G, _, _ = rA_terms(model, r, A, zero, zero, t)
        return phi, G

    def velocity_terms(self, model, q, t):
        r, A = q
        zero = jnp.zeros_like(r)
        _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
        return G, nu

    def acceleration_rhs(self, model, q, v, t):
        r, A = q
        return rA_terms(model, r, A, v[:, :3], v[:, 3:], t)[3]

    # -- dynamics (eqs. 30-38) --------------------------------------------------------------
    def advance(self, q, v, a, h):
        """Eq. 32: v1 = v + h a, r1 = r + h r_dot1, A1 = A exp(h omega_bar1~)."""
        r, A = q
        v1 = v + h * a
        return (r + h * v1[:, :3], _mm(A, so3_exp(h * v1[:, 3:]))), v1

    def _split(self, model, x):
        nb = model.nb
        return x[: 6 * nb].reshape(nb, 6), x[6 * nb :]

    def _state_forces(self, model, q1, v1, t):
        r, A = q1
        return applied_forces(
            model.forces, t, BodyState(r, A, v1[:, :3], v1[:, 3:]), model.mass, model.gravity
        )

    def dynamics_residual(self, model, x, q, v, t, h):
        """Eq. 34b: [M r_ddot + Phi_r^T lam - f; J w_dot + w~ J w + Pi^T lam - n; Phi / h^2]."""
        return self._dynamics_terms(model, x, q, v, t, h, jacobian=False)[0]

    def dynamics_residual_and_jacobian(self, model, x, q, v, t, h):
        """Eq. 34b and its Newton matrix eq. 38c, sharing one evaluation of the GCON rows."""
        return self._dynamics_terms(model, x, q, v, t, h, jacobian=True)

    def dynamics_jacobian(self, model, x, q, v, t, h):
        return self._dynamics_terms(model, x, q, v, t, h, jacobian=True)[1]

    def _dynamics_terms(self, model, x, q, v, t, h, *, jacobian: bool):
        """Residual (eq. 34b) and, if asked, the Newton matrix of eq. 38c assembled by hand
        from the Pi-bar variations and the reaction-force sensitivities (Tables 3-6). Unlike
        eq. 37 the matrix keeps the tangent map of exp, delta theta = h^2 J_r(h w) delta w_dot,
        so it is the exact Jacobian (quadratic convergence, exact implicit gradients)."""
        nb, nc = model.nb, model.nc
        a, lam = self._split(model, x)
        q1, v1 = self.advance(q, v, a, h)
        r1, A1 = q1
        phi, jac_i, jac_j = rA_rows(model, r1, A1, t)
        f, n = self._state_forces(model, q1, v1, t)
        w = v1[:, 3:]
        J = model.inertia
        Jw = _mv(J, w)
        reaction = rA_generalized_reaction(model, jac_i, jac_j, lam)
        g_r = model.mass[:, None] * a[:, :3] + reaction[:, :3] - f
        g_w = _mv(J, a[:, 3:]) + jnp.cross(w, Jw) + reaction[:, 3:] - n
        g = jnp.concatenate([jnp.concatenate([g_r, g_w], 1).reshape(-1), phi / h**2])
        if not jacobian:
            return g, None
        G = rA_jacobian_from_rows(model, jac_i, jac_j)
        # d(position tangent)/da = h^2 diag(I, J_r(h w)) per body
        eye = jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
        zeros = jnp.zeros((nb, 3, 3))
        J_r = so3_right_jacobian(h * w)
        gyro = jnp.einsum("bij,bjk->bik", hat(w), J) - hat(Jw)
        mass_blk = jnp.concatenate(
            [
                jnp.concatenate([model.mass[:, None, None] * eye, zeros], 2),
                jnp.concatenate([zeros, J + h * gyro], 2),
            ],
            1,
        )
        K = rA_reaction_sensitivity(model, r1, A1, lam, t)
        G11 = _block_diagonal(mass_blk) + h**2 * _times_tangent_map(K, J_r)
        if model.forces:
            G11 = G11 - self._force_sensitivity(model, q1, v1, t, h, J_r)
        top = jnp.concatenate([G11, G.T], 1)
        bottom = jnp.concatenate([_times_tangent_map(G, J_r), jnp.zeros((nc, nc))], 1)
        return g, jnp.concatenate([top, bottom], 0)

    def _force_sensitivity(self, model, q1, v1, t, h, J_r):
        """d(f, n)/da by autodiff of the force laws (case by case in the paper)."""
        nb = model.nb

        def forces(dq, dv):
            dq = dq.reshape(nb, 6)
            r, A = q1
            q_ = (r + dq[:, :3], A @ so3_exp(dq[:, 3:]))
            f, n = self._state_forces(model, q_, v1 + dv.reshape(nb, 6), t)
            return jnp.concatenate([f, n], 1).reshape(-1)

        z = jnp.zeros(6 * nb)
        Fq = jax.jacfwd(forces, argnums=0)(z, z)
        Fv = jax.jacfwd(forces, argnums=1)(z, z)
        return h**2 * _times_tangent_map(Fq, J_r) + h * Fv


def _times_tangent_map(M, J_r):
    """M diag(I, J_r(h w_b))_b for M with 6 nb body-major columns, in O(rows nb), not a dense
    (6 nb)^3 product with the block-diagonal matrix: only the rotation columns change."""
    rows, nb = M.shape[0], J_r.shape[0]
    blocks = M.reshape(rows, nb, 2, 3)
    rotation = jnp.sum(blocks[:, :, 1, :, None] * J_r[None], axis=-2)
    return jnp.stack([blocks[:, :, 0], rotation], axis=2).reshape(rows, 6 * nb)


def _block_diagonal(blocks):
    """(nb, k, k) -> (nb k, nb k) block-diagonal matrix without a Python loop."""
    nb, k, _ = blocks.shape
    eye = jnp.eye(nb)
    return jnp.einsum("ab,aij->aibj", eye, blocks).reshape(nb * k, nb * k)
