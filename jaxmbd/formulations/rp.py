"""The rp formulation (paper 1 sections 2.2 and 3.2): Euler parameters with normalisation.

Jacobian, nu and gamma come from autodiff of Phi(r, A(p), t) (eq. 19-24); the nb
normalisation constraints (p^T p - 1) / 2 = 0 are appended after the nc GCON rows.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..rotations import A_to_ep, ep_G, ep_to_A
from .base import AbstractAutodiffFormulation


class RP(AbstractAutodiffFormulation):
    name: ClassVar[str] = "rp"
    tangent_size: ClassVar[int] = 7
    orientation_size: ClassVar[int] = 4

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
        return 0.5 * jnp.einsum("bji,bj->bi", ep_G(ori), omega)

    def omega_from_rate(self, ori, rate, rate_dot):
        """omega_bar = 2 G(p) p_dot; omegadot_bar = 2 G(p) p_ddot (G_dot p_dot = 0)."""
        G = ep_G(ori)
        return 2.0 * jnp.einsum("bij,bj->bi", G, rate), 2.0 * jnp.einsum("bij,bj->bi", G, rate_dot)
