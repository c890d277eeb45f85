"""The re formulation (paper 1 sections 2.3 and 3.3): ZXZ Euler angles.

Jacobian, nu and gamma come from autodiff of Phi(r, A(eps), t). Singular where
theta in {0, pi}: a model that starts there is rejected with a clear error by the analyses;
kinematics steps over a grid point at the singularity only by an explicit, verified
least-squares solve (:meth:`RE.near_chart_singularity`), dynamics not at all.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ..compiled.small import mv, row_vec_mat
from ..constraints.equations import constraint_values
from ..forces._rigid_body import gyroscopic_torque
from ..lie.rotations import A_to_zxz, zxz_Bbar, zxz_to_A
from ..linear import dense, small
from .base import AbstractAutodiffFormulation


class RE(AbstractAutodiffFormulation):
    name: ClassVar[str] = "re"
    tangent_size: ClassVar[int] = 6
    orientation_size: ClassVar[int] = 3
    default_integrator: ClassVar[str] = "gen_alpha"
    index3_blocks: ClassVar[bool] = True
    index1_blocks: ClassVar[bool] = True
    has_chart_singularity: ClassVar[bool] = True

    #: |sin theta| below which a body is at the ZXZ chart singularity for the analyses'
    #: explicit step-over (kinematics; B_bar's condition number is ~1/|sin theta| there)
    chart_band: ClassVar[float] = 1e-4

    def near_chart_singularity(self, q):
        """True where some body's theta is within ``chart_band`` of 0 or pi (|sin theta|):
        there the Euler-angle rates are not unique although the motion is (phi and psi
        turn about the same axis), and kinematics may step over it by a verified
        least-squares solve (flagged in ``Solution.chart_singular``)."""
        return jnp.min(jnp.abs(jnp.sin(q[1][:, 1]))) < self.chart_band

    def start_chart_problems(self, A):
        """Bodies whose orientation is within 1e-3 (|sin theta|) of the ZXZ singularity:
        a start there is refused (the dynamics have no step-over)."""
        eps = np.asarray(self.coordinates(A))
        problems = {}
        for b, theta in enumerate(eps[:, 1]):
            if abs(np.sin(theta)) < 1e-3:
                problems[b] = (
                    "its initial orientation is at the ZXZ Euler-angle singularity (theta = "
                    f"{np.degrees(theta):.4g} deg); the re formulation cannot represent it. "
                    "Use formulation 'rA' or 'rp', or choose body frames whose z axis is "
                    "not the rotation axis' singular direction."
                )
        return problems

    def coordinates(self, A):
        return A_to_zxz(A)

    def rotation(self, ori):
        return zxz_to_A(ori)

    def rate_from_omega(self, ori, omega):
        """eps_dot = B_bar(eps)^{-1} omega_bar (eq. 43b)."""
        return dense.solve(zxz_Bbar(ori), omega)

    def omega_from_rate(self, ori, rate, rate_dot):
        """omega_bar = B_bar eps_dot; omegadot_bar = B_bar eps_ddot + B_bar_dot eps_dot."""
        B = zxz_Bbar(ori)
        B_dot = jax.jvp(zxz_Bbar, (ori,), (rate,))[1]
        return mv(B, rate), mv(B, rate_dot) + mv(B_dot, rate)

    def dynamics_equations(self, model, q, v, a, lam, t):
        """Eqs. 43-44 (h-free) with the corrected inertial force of PAPER_NOTES:
        B^T J B eps_ddot + Phi_eps^T lam = B^T (n - w~ J w - J B_dot eps_dot)."""
        nb, nc = model.nb, model.nc
        r, eps = q
        eps_dot, eps_ddot = v[:, 3:], a[:, 3:]
        Phi_q = self.constraint_jacobian(model, q, t).reshape(nc, nb, 6)
        reaction = small.weighted_row_sum(Phi_q, lam)  # Phi_q^T lam, no dot
        f, n = self._forces(model, q, v, t, a)  # a: armature's inertial force
        B = zxz_Bbar(eps)
        B_dot = jax.jvp(zxz_Bbar, (eps,), (eps_dot,))[1]
        J = model.inertia
        # elementwise products (jaxmbd.compiled.small), not einsum: a dot keeps XLA:CPU from
        # compiling the time step as one native loop (jaxmbd.linear.small)
        w = mv(B, eps_dot)
        rhs = n - gyroscopic_torque(J, w) - mv(J, mv(B_dot, eps_dot))
        g_r = model.mass[:, None] * a[:, :3] + reaction[:, :3] - f
        g_e = row_vec_mat(mv(J, mv(B, eps_ddot)) - rhs, B) + reaction[:, 3:]
        phi = constraint_values(model, r, zxz_to_A(eps), t)
        return jnp.concatenate([g_r, g_e], 1).reshape(-1), phi
