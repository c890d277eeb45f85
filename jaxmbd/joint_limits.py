"""Compliant joint limits: a one-sided spring-damper on a joint coordinate.

A limited revolute (angle) or translational (slide) joint ``limits=(lower, upper)`` gets a
generalised force along its coordinate q (:mod:`jaxmbd.joints`) whenever q leaves the
range, with penetration delta = lower - q or q - upper:

    F = max(0, k delta + c min(1, delta / delta_r) delta_dot)   for delta > 0,   else 0,

pushing q back (the ``max`` keeps a limit from pulling; the damper ramps in over delta_r =
:data:`DAMPING_RAMP` = 1e-3 so that F is continuous at delta = 0). It acts on the two bodies
through the virtual work F dq (:mod:`jaxmbd._joint_forces`). The element lives in
``model.forces`` (:class:`JointLimits`), so every formulation and integrator applies it and
the implicit integrators put its stiffness and damping in the Newton matrix.

**Defaults.** With the joint's effective inertia I (the child side's bodies about the
joint axis through the joint point, or their mass along a slide, at the drawn pose),
k = I / tau^2 and c = 2 I / tau (critically damped: no rebound, as MuJoCo's default
``solref`` damping ratio 1) with the time constant :data:`LIMIT_TIME_CONSTANT` = 0.01 s.

**Bound.** The penetration never exceeds what the spring alone allows: with impact rate
v = |q_dot| at the limit and a generalised load |Q| <= Q_max pushing through it,
delta_max <= v sqrt(I / k) + 2 Q_max / k (energy balance of the spring; damping only
lowers it): with the defaults v tau + 2 Q_max tau^2 / I, e.g. 0.03 rad for 3 rad/s.
Energy is lost only while a limit is penetrated (the damper acts only there).

Revolute limits are compared with the angle on its principal branch about the joint's
offset (within pi of it), so a range must be narrower than a full turn about the drawn
pose.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from ._joint_forces import SCALAR_KINDS, AbstractJointForce, coordinates_and_gradients
from .forces import BodyState
from .joints import JointDefinition, joint_kind

#: Time constant of the default limit stiffness and damping (s), see the module docstring.
LIMIT_TIME_CONSTANT = 0.01

LIMITED_KINDS = SCALAR_KINDS

#: Penetration (rad or m) over which the limit's damper ramps in, so the force is continuous.
DAMPING_RAMP = 1e-3


class JointLimits(AbstractJointForce):
    """Compliant limits of revolute and translational joints (see the module docstring).
    ``lower``, ``upper``, ``stiffness``, ``damping``: (n,) array leaves, one per limited
    joint, in the joints' coordinate units (rad or m)."""

    joints: tuple[JointDefinition, ...]
    lower: jax.Array
    upper: jax.Array
    stiffness: jax.Array
    damping: jax.Array

    def generalised_force(self, t, q, qdot):
        """The forces (n,) along +q of the limits at coordinates q and rates qdot (n,)."""

        def push(delta, delta_dot):
            # the damper ramps in over the first DAMPING_RAMP of penetration: the force is
            # continuous at delta = 0 (a jump of c v there makes Newton cycle at impact)
            ramp = jnp.clip(delta / DAMPING_RAMP, 0.0, 1.0)
            force = self.stiffness * delta + self.damping * ramp * delta_dot
            return jnp.where(delta > 0, jnp.maximum(0.0, force), 0.0)

        return push(self.lower - q, -qdot) - push(q - self.upper, qdot)

    def potential_energy(self, state: BodyState):
        """Energy stored in the limit springs, sum of 1/2 k delta^2 (counted by
        :func:`jaxmbd.diagnostics.energy`; the dampers only dissipate)."""
        q, _ = coordinates_and_gradients(self.joints, state)
        return jnp.sum(0.5 * self.stiffness * self.penetration(q) ** 2)

    def joint_entries(self):
        """Each limited joint's ``limits`` with the gains as built (defaults resolved)."""
        return {
            d.name: {
                "limits": [float(self.lower[k]), float(self.upper[k])],
                "limit_stiffness": float(self.stiffness[k]),
                "limit_damping": float(self.damping[k]),
            }
            for k, d in enumerate(self.joints)
        }

    def penetration(self, q):
        """How far coordinates ``q`` (..., n) lie beyond their limits (0 inside)."""
        return jnp.maximum(0.0, jnp.maximum(self.lower - q, q - self.upper))


def effective_inertia(kind: str, point, axis, bodies) -> float:
    """Inertia of ``bodies`` = [(mass, J_global (3, 3), centre (3,))] about ``axis`` through
    ``point`` (revolute), or their mass (translational)."""
    if not joint_kind(kind).angular:
        return float(sum(m for m, _, _ in bodies))
    axis = np.asarray(axis) / np.linalg.norm(axis)
    total = 0.0
    for m, J, c in bodies:
        arm = np.asarray(c) - np.asarray(point)
        perp = arm - axis * (axis @ arm)
        total += float(axis @ J @ axis) + m * float(perp @ perp)
    return total


def default_limit_gains(inertia: float) -> tuple[float, float]:
    """(stiffness, damping) for an effective inertia: I / tau^2 and 2 I / tau."""
    tau = LIMIT_TIME_CONSTANT
    return inertia / tau**2, 2.0 * inertia / tau
