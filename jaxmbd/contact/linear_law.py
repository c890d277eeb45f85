"""A linear spring-damper contact law: F_n = max(0, k delta + c delta_dot) for delta > 0.

The pair's ``stiffness`` k (N/m) and ``damping`` c (N s/m) of
:meth:`~jaxmbd.ModelBuilder.add_contact` (``law=mbd.contact.LinearSpringDamper()``); the
restitution and the exponent are not used. A body of mass m resting on one slot under
gravity g settles at delta = m g / k; an impact is a damped half oscillation of angular
frequency sqrt(k / m_eff - (c / (2 m_eff))^2), so the restitution depends on c, k and m_eff
but not on the impact speed (unlike :class:`~jaxmbd.contact.law.HuntCrossley`, whose force
starts at zero). The ``max`` keeps the damper from pulling while the bodies separate.
Friction is the regularised Coulomb friction of every law.
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from .abstract_law import AbstractContactLaw, PairParameters, register_contact_law


@register_contact_law("linear")
class LinearSpringDamper(AbstractContactLaw):
    """F_n = max(0, k delta + c delta_dot) where delta > 0 (the module docstring)."""

    def normal_force(self, delta, delta_dot, pair: PairParameters):
        touching = delta > 0
        force = pair.stiffness * jnp.where(touching, delta, 0.0) + pair.damping * delta_dot
        return jnp.where(touching, jnp.maximum(force, 0.0), 0.0)

    def elastic_energy(self, delta, pair: PairParameters):
        d = jnp.where(delta > 0, delta, 0.0)
        return 0.5 * pair.stiffness * d * d

    def default_stiffness(self, weight, penetration, exponent):
        return weight / penetration
