"""The rA formulation (paper 1 sections 2.1 and 3.1): the rotation matrix itself is unknown.

Newton corrections rotate A on the right, A <- A exp(theta_bar~) (eq. 12); the Jacobian
is hand-coded from the Pi-bar variations (Table 2) in :mod:`jaxmbd.gcons`.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..equations import constraint_values, rA_terms
from ..lie import so3_exp
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
