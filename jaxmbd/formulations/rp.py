"""The rp formulation (paper 1 sections 2.2 and 3.2): Euler parameters with normalisation.

Jacobian, nu and gamma come from autodiff of Phi(r, A(p), t) (eq. 19-24); the nb
normalisation constraints (p^T p - 1) / 2 = 0 are appended after the nc GCON rows.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..compiled.small import mm, mtm, mv, row_vec_mat
from ..constraints.equations import constraint_values
from ..lie.rotations import A_to_ep, ep_G, ep_to_A
from ..linear import small
from .base import AbstractAutodiffFormulation


class RP(AbstractAutodiffFormulation):
    name: ClassVar[str] = "rp"
    tangent_size: ClassVar[int] = 7
    orientation_size: ClassVar[int] = 4
    default_integrator: ClassVar[str] = "gen_alpha"
    index3_blocks: ClassVar[bool] = True
    index1_blocks: ClassVar[bool] = True
    #: its products elementwise (jaxmbd.compiled.small): double pendulum 2.6x, slider crank 2.0x
    #: the steps per CPU-second with "small" (hoisted) against LAPACK, gen_alpha
    hoistable_implicit_step: ClassVar[bool] = True

    def num_equations(self, model):
        return model.nc + model.nb

    def coordinates(self, A):
        return A_to_ep(A)

    def rotation(self, ori):
        return ep_to_A(ori)

    def extra_equations(self, ori):
        return 0.5 * (jnp.sum(ori * ori, axis=-1) - 1.0)

    def rate_from_omega(self, ori, omega):
        """p_dot = G(p)^T omega_bar / 2 (G G^T = I, G p = 0 for unit p)."""
        return 0.5 * row_vec_mat(omega, ep_G(ori))

    def omega_from_rate(self, ori, rate, rate_dot):
        """omega_bar = 2 G(p) p_dot; omegadot_bar = 2 G(p) p_ddot (G_dot p_dot = 0)."""
        G = ep_G(ori)
        return 2.0 * mv(G, rate), 2.0 * mv(G, rate_dot)

    def num_multipliers(self, model):
        return model.nc + model.nb

    def dynamics_equations(self, model, q, v, a, lam, t):
        """Eqs. 39-41 (h-free): unknowns (r_ddot, p_ddot, lam, lam_p); beta_0 = 1.

        g = [m r_ddot + Phi_r^T lam - f; 4 G^T J G p_ddot + Phi_p^T lam + p lam_p - tau]
        with tau = 2 G^T n + 8 G_dot^T J G_dot p; phi = [Phi; (p^T p - 1) / 2].
        """
        nb, nc = model.nb, model.nc
        lam, lam_p = lam[:nc], lam[nc:]
        r, p = q
        p_dot, p_ddot = v[:, 3:], a[:, 3:]
        Phi_q = self.constraint_jacobian(model, q, t).reshape(nc, nb, 7)
        reaction = small.weighted_row_sum(Phi_q, lam)  # Phi_q^T lam, no dot
        f, n = self._forces(model, q, v, t, a)  # a: armature's inertial force
        G, G_dot = ep_G(p), ep_G(p_dot)
        J = model.inertia
        # elementwise products (jaxmbd.compiled.small), not einsum/@: a dot keeps XLA:CPU from
        # compiling the time step as one native loop (jaxmbd.linear.small)
        mass_p = 4.0 * mm(mtm(G, J), G)
        tau = 2.0 * row_vec_mat(n, G) + 8.0 * row_vec_mat(mv(J, mv(G_dot, p)), G_dot)
        g_r = model.mass[:, None] * a[:, :3] + reaction[:, :3] - f
        g_p = mv(mass_p, p_ddot) + reaction[:, 3:] + p * lam_p[:, None] - tau
        phi = jnp.concatenate([constraint_values(model, r, ep_to_A(p), t), self.extra_equations(p)])
        return jnp.concatenate([g_r, g_p], 1).reshape(-1), phi
