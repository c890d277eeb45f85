"""The re formulation (paper 1 sections 2.3 and 3.3): ZXZ Euler angles.

Jacobian, nu and gamma come from autodiff of Phi(r, A(eps), t). Singular where
theta in {0, pi}: a model that starts there is rejected with a clear error by the analyses.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

from ..newton import solve_linear_or_least_squares
from ..rotations import A_to_zxz, zxz_Bbar, zxz_to_A
from .base import AbstractAutodiffFormulation


class RE(AbstractAutodiffFormulation):
    name: ClassVar[str] = "re"
    tangent_size: ClassVar[int] = 6
    orientation_size: ClassVar[int] = 3

    def solve(self, matrix, rhs):
        """At theta = 0 exactly (e.g. a crank passing it on a grid point) the Jacobian is
        singular although the Euler-angle path is smooth: take the minimum-norm solution."""
        return solve_linear_or_least_squares(matrix, rhs)

    def solver(self, matrix):
        return lambda rhs, transpose=False: self.solve(matrix.T if transpose else matrix, rhs)

    def coordinates(self, A):
        return A_to_zxz(A)

    def rotation(self, ori):
        return zxz_to_A(ori)

    def rate_from_omega(self, ori, omega):
        """eps_dot = B_bar(eps)^{-1} omega_bar (eq. 43b)."""
        return jnp.linalg.solve(zxz_Bbar(ori), omega[..., None])[..., 0]

    def omega_from_rate(self, ori, rate, rate_dot):
        """omega_bar = B_bar eps_dot; omegadot_bar = B_bar eps_ddot + B_bar_dot eps_dot."""
        B = zxz_Bbar(ori)
        B_dot = jax.jvp(zxz_Bbar, (ori,), (rate,))[1]
        omega = jnp.einsum("bij,bj->bi", B, rate)
        return omega, jnp.einsum("bij,bj->bi", B, rate_dot) + jnp.einsum("bij,bj->bi", B_dot, rate)
