"""Passive forces along tendons: springs, dampers, friction loss and compliant limits.

Tendon k of length L and velocity L_dot (:mod:`jaxmbd.tendons`) carries the tension

    F = -k x - c L_dot - f tanh(L_dot / v_r) + F_limit,
    x = L - upper (L > upper), L - lower (L < lower), else 0,

MuJoCo's tendon ``stiffness`` about its ``springlength`` (a dead band [lower, upper] when
two lengths are given; one length: lower = upper), ``damping`` and ``frictionloss``
(regularised as a joint's, :mod:`jaxmbd.forces.joint_dynamics`), and with ``limited``/``range``
the compliant limit law of the joints (:class:`jaxmbd.forces.joint_limits.JointLimits`, whose
gains default to the tendon's effective inertia over the limit time constant). The
tension reaches the dofs as J^T F (J = dL/dqvel) in the ``"joint"`` formulation and the
bodies as F dL/d(twist) in the absolute ones (MuJoCo's ``mj_passive``: spring and damper
forces J^T F; its limits and friction loss are soft constraint rows instead).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..forces import AbstractForce, BodyState, ForceOutput
from ..forces.joint_limits import JointLimits
from ..tree import picked_sum
from . import (
    SpatialTendon,
    Tendons,
    body_forces,
    lengths_and_gradients,
    output_lengths,
    velocities,
)

#: The (nt,) leaves of :class:`TendonForces`.
_PER_TENDON = ("stiffness", "spring_lower", "spring_upper", "damping", "friction_loss",
               "friction_velocity")  # fmt: skip


class TendonForces(AbstractForce):
    """The passive forces of every tendon of ``tendons`` (see the module docstring):
    (nt,) array leaves ``stiffness``, ``spring_lower``, ``spring_upper``, ``damping``,
    ``friction_loss``, ``friction_velocity``; ``limits``: a
    :class:`~jaxmbd.forces.joint_limits.JointLimits` (no joints) over the tendons ``limited``
    (static indices), None where none is limited."""

    tendons: Tendons
    stiffness: jax.Array
    spring_lower: jax.Array
    spring_upper: jax.Array
    damping: jax.Array
    friction_loss: jax.Array
    friction_velocity: jax.Array
    limits: JointLimits | None = None
    limited: tuple[int, ...] = eqx.field(static=True, default=())
    acts_along_tendons: ClassVar[bool] = True

    def stretch(self, length):
        """x (nt,): how far the lengths lie beyond the spring's dead band."""
        return jnp.where(
            length > self.spring_upper,
            length - self.spring_upper,
            jnp.where(length < self.spring_lower, length - self.spring_lower, 0.0),
        )

    def tendon_force(self, t, length, velocity):
        """The tensions F (nt,) at lengths and velocities (nt,) (positive: lengthening)."""
        friction = self.friction_loss * jnp.tanh(velocity / self.friction_velocity)
        force = -self.stiffness * self.stretch(length) - self.damping * velocity - friction
        if self.limits is None:
            return force
        rows = np.asarray(self.limited, int)
        pushed = self.limits.generalised_force(t, length[rows], velocity[rows])
        incidence = np.zeros((self.tendons.nt, rows.size), dtype=bool)
        incidence[rows, np.arange(rows.size)] = True
        return force + picked_sum(incidence, pushed)

    @property
    def output_names(self):
        return tuple(f"tendon:{name}" for name in self.tendons.names)

    def outputs(self, context):
        """Per tendon (``"tendon:<name>"``): its passive force F along +L (N; negative:
        the tendon pulls, a stretched spring's -k x), its length L and velocity L_dot
        (:func:`~jaxmbd.tendons.output_lengths`)."""
        length, velocity = output_lengths(self.tendons, context)
        force = self.tendon_force(context.t, length, velocity)
        return {name: ForceOutput(force[k], length[k], velocity[k])
                for k, name in enumerate(self.output_names)}  # fmt: skip

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.stiffness) - 1

    def spatial_part(self) -> TendonForces | None:
        """The element restricted to its spatial tendons (None: it has none): the loads
        that act on bodies at sites (a fixed tendon's act along its joints, inside the
        tree's joints, as the joint forces)."""
        keep = [k for k, t in enumerate(self.tendons.tendons) if isinstance(t, SpatialTendon)]
        if not keep:
            return None
        if len(keep) == self.tendons.nt:
            return self
        rows = np.asarray(keep, int)
        limited = [k for k in self.limited if k in keep]
        limits = None
        if limited:
            picked = np.asarray([self.limited.index(k) for k in limited], int)
            limits = eqx.tree_at(
                lambda lim: (lim.lower, lim.upper, lim.stiffness, lim.damping), self.limits,
                tuple(x[picked] for x in (self.limits.lower, self.limits.upper,
                                          self.limits.stiffness, self.limits.damping)),
            )  # fmt: skip
        return TendonForces(
            tendons=self.tendons.subset(keep),
            **{key: getattr(self, key)[rows] for key in _PER_TENDON},
            limits=limits, limited=tuple(keep.index(k) for k in limited),
        )  # fmt: skip

    def __call__(self, t, state: BodyState):
        length, G = lengths_and_gradients(self.tendons, state)
        return body_forces(G, self.tendon_force(t, length, velocities(G, state)))

    def potential_energy(self, state: BodyState):
        """1/2 k x^2 of the springs and 1/2 k_lim delta^2 of the limits (None where a fixed
        tendon's joints are joint-space only: the body states do not give its length)."""
        if self.tendons.joint_space_only:
            return None
        length, _ = lengths_and_gradients(self.tendons, state)
        energy = jnp.sum(0.5 * self.stiffness * self.stretch(length) ** 2)
        if self.limits is not None:
            rows = np.asarray(self.limited, int)
            delta = self.limits.penetration(length[rows])
            energy = energy + jnp.sum(0.5 * self.limits.stiffness * delta**2)
        return energy

    def without_potential(self):
        """The dampers and friction loss alone (springs and limit springs zero)."""
        out = eqx.tree_at(lambda f: f.stiffness, self, jnp.zeros_like(self.stiffness))
        if out.limits is not None:
            out = eqx.tree_at(lambda f: f.limits.stiffness, out,
                              jnp.zeros_like(out.limits.stiffness))  # fmt: skip
        return out
