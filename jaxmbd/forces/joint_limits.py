"""Compliant joint limits: a one-sided spring-damper on a joint coordinate.

A limited revolute (angle) or translational (slide) joint ``limits=(lower, upper)`` gets a
generalised force along its coordinate q (:mod:`jaxmbd.model.joints`) whenever q leaves the
range, with penetration delta = lower - q or q - upper:

    F = max(0, k delta + c min(1, delta / delta_r) delta_dot)   for delta > 0,   else 0,

pushing q back (the ``max`` keeps a limit from pulling; the damper ramps in over delta_r =
:data:`DAMPING_RAMP` = 1e-3 so that F is continuous at delta = 0). It acts on the two bodies
through the virtual work F dq (:mod:`jaxmbd.forces._joint`). The element lives in
``model.forces`` (:class:`JointLimits`), so every formulation and integrator applies it and
the implicit integrators put its stiffness and damping in the Newton matrix.

**Defaults.** With the joint's effective inertia I (the child side's bodies about the
joint axis through the joint point, or their mass along a slide, at the drawn pose),
k = I / tau^2 and c = 2 I / tau (critically damped, as MuJoCo's default ``solref`` damping
ratio 1) with the time constant :data:`LIMIT_TIME_CONSTANT` = 0.01 s. Because the limit
never pulls, this default still rebounds, by an amount that depends on the impact rate v:
the force reaches zero where k delta + c delta_dot = 0, at omega t = 2 (omega = 1 / tau)
while delta > 0, so a fast impact leaves at e^-2 = 13.5 % of v (:data:`DEFAULT_REBOUND`);
a slow one penetrates less than the ramp delta_r, sees less damping and rebounds more. The
rebound speed over the impact speed, without loads during the impact (slide units; divide
by the same factor in rad for a revolute joint):

    v (m/s)    0.01   0.03   0.1    0.3    1      3      10
    rebound    0.88   0.71   0.41   0.18   0.149  0.140  0.137

For a limit that does not bounce (or bounces by a set amount at every impact rate) give
``limit_restitution``.

**Restitution.** ``limit_restitution=e`` (in [0, 1]) replaces the damper by the
Hunt–Crossley form of :mod:`jaxmbd.contact.law` with exponent 1,

    F = max(0, k delta (1 + a(e) delta_dot / v_est) + c min(1, delta / delta_r) delta_dot),
    v_est = sqrt(delta_dot^2 + k delta^2 / I),

whose damping factor a(e) (:func:`jaxmbd.forces._restitution.damping_factor`, the same calibration:
the exponent drops out of it) makes the joint leave the limit at e times its impact rate,
for any impact rate and stiffness (exact without other loads during the impact). The
damper c then defaults to 0 (a given ``limit_damping`` adds to it). e below 0.01 is taken
as 0.01. Hard limits (``limits="hard"``, :mod:`jaxmbd.integrators.moreau_jean`) use e in
Newton's impact law; without ``limit_restitution`` they are plastic (e = 0).

**Bound.** The penetration never exceeds what the spring alone allows: with impact rate
v = |q_dot| at the limit and a generalised load |Q| <= Q_max pushing through it,
delta_max <= v sqrt(I / k) + 2 Q_max / k (energy balance of the spring; damping only
lowers it): with the defaults v tau + 2 Q_max tau^2 / I, e.g. 0.03 rad for 3 rad/s.
Energy is lost only while a limit is penetrated (the damper acts only there).

**Impedance.** ``impedance`` (n, 5), MuJoCo's ``solimp`` (d_min, d_max, width, midpoint,
power) of each limit (the MJCF importer sets it, :mod:`jaxmbd.mjcf._limit_gains`), makes the
gains follow MuJoCo's impedance d(delta): k and c are the gains at d_min, scaled by
g(d(delta)) / g(d_min) with g(d) = d^2 / (1 - d) for k and d / sqrt(1 - d) for c, so that
the force at rest and the damping ratio are MuJoCo's at every penetration.

Revolute limits are compared with the angle on its principal branch about the joint's
offset (within pi of it), so a range must be narrower than a full turn about the drawn
pose.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..model.joints import JointDefinition, joint_kind
from . import BodyState
from ._joint import SCALAR_KINDS, AbstractJointForce, coordinates_and_gradients
from ._restitution import damping_factor

#: Time constant of the default limit stiffness and damping (s), see the module docstring.
LIMIT_TIME_CONSTANT = 0.01

LIMITED_KINDS = SCALAR_KINDS

#: The rebound of the default (critically damped, never pulling) limit at fast impacts (impact
#: rate >> DAMPING_RAMP / LIMIT_TIME_CONSTANT): e^-2 of the impact rate.
DEFAULT_REBOUND = float(np.exp(-2.0))

#: Penetration (rad or m) over which the limit's damper ramps in, so the force is continuous.
DAMPING_RAMP = 1e-3


class JointLimits(AbstractJointForce):
    """Compliant limits of revolute and translational joints (see the module docstring).
    ``lower``, ``upper``, ``stiffness``, ``damping``: (n,) array leaves, one per limited
    joint, in the joints' coordinate units (rad or m). ``restitution`` (n,): the
    ``limit_restitution`` of each joint (0 where none was given: hard limits are then
    plastic); ``calibrated`` (n,): 1.0 where it sets the compliant law's damping (the
    module docstring's Restitution), 0.0 for the plain spring-damper; ``inertia`` (n,): the
    effective inertia I of v_est. None (all three): no joint has ``limit_restitution``."""

    joints: tuple[JointDefinition, ...]
    lower: jax.Array
    upper: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    restitution: jax.Array | None = None
    calibrated: jax.Array | None = None
    inertia: jax.Array | None = None
    impedance: jax.Array | None = None
    absolute_entries: tuple[bool, ...] | None = eqx.field(static=True, default=None)
    entries_label: ClassVar[str] = "limits"
    entry_fields: ClassVar[tuple[str, ...]] = (
        "joints", "lower", "upper", "stiffness", "damping", "restitution", "calibrated",
        "inertia", "impedance",
    )  # fmt: skip

    def generalised_force(self, t, q, qdot):
        """The forces (n,) along +q of the limits at coordinates q and rates qdot (n,)."""

        def push(delta, delta_dot):
            # the damper ramps in over the first DAMPING_RAMP of penetration: the force is
            # continuous at delta = 0 (a jump of c v there makes Newton cycle at impact)
            ramp = jnp.clip(delta / DAMPING_RAMP, 0.0, 1.0)
            k_scale, c_scale = self._impedance_scales(delta)
            force = self.stiffness * k_scale * delta + self.damping * c_scale * ramp * delta_dot
            if self.restitution is not None:
                force = force + self.calibrated * self._rate_term(delta, delta_dot)
            return jnp.where(delta > 0, jnp.maximum(0.0, force), 0.0)

        return push(self.lower - q, -qdot) - push(q - self.upper, qdot)

    def _impedance_scales(self, delta):
        """The factors (k, c) on the gains at penetration ``delta`` (the module docstring's
        Impedance; 1 without ``impedance``)."""
        if self.impedance is None:
            return 1.0, 1.0
        d, d0 = mujoco_impedance(self.impedance, delta), mujoco_impedance(self.impedance, 0.0)
        return d**2 * (1 - d0) / (d0**2 * (1 - d)), d * jnp.sqrt(1 - d0) / (d0 * jnp.sqrt(1 - d))

    def _rate_term(self, delta, delta_dot):
        """k delta a(e) delta_dot / v_est (0 where delta <= 0; finite gradients at rest)."""
        d = jnp.where(delta > 0, delta, 0.0)
        ve2 = delta_dot**2 + self.stiffness * d**2 / self.inertia
        moving = ve2 > 0
        ratio = jnp.where(moving, delta_dot / jnp.sqrt(jnp.where(moving, ve2, 1.0)), 0.0)
        return self.stiffness * d * damping_factor(self.restitution) * ratio

    def potential_energy(self, state: BodyState):
        """Energy stored in the limit springs, sum of 1/2 k delta^2 (with ``impedance``: the
        integral of the spring force; counted by :func:`jaxmbd.analysis.diagnostics.energy`; the
        dampers only dissipate)."""
        part = self.absolute_part()
        q, _ = coordinates_and_gradients(part.joints, state)
        return jnp.sum(part.spring_energy(part.penetration(q)))

    def spring_energy(self, delta):
        """The energies (n,) of the springs at penetrations ``delta`` (n,) >= 0."""
        if self.impedance is None:
            return 0.5 * self.stiffness * delta**2
        # the integral of k s(x) x over [0, delta] by Gauss-Legendre on each smooth piece of
        # d(x): [0, midpoint width], [midpoint width, width], beyond width (constant)
        x, w = (jnp.asarray(a) for a in np.polynomial.legendre.leggauss(8))
        width, mid = self.impedance[:, 2], self.impedance[:, 3]
        edges = jnp.stack([jnp.zeros_like(delta), mid * width, width, delta + width])
        edges = jnp.minimum(edges, delta)
        energy = 0.0
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            xs = 0.5 * (a + b)[:, None] + 0.5 * (b - a)[:, None] * x
            k_scale, _ = jax.vmap(self._impedance_scales, in_axes=1, out_axes=1)(xs)
            energy = energy + 0.5 * (b - a) * jnp.sum(w * k_scale * xs, axis=1)
        return self.stiffness * energy

    def joint_entries(self):
        """Each limited joint's ``limits`` with the gains as built (defaults resolved)."""
        entries = {
            d.name: {
                "limits": [float(self.lower[k]), float(self.upper[k])],
                "limit_stiffness": float(self.stiffness[k]),
                "limit_damping": float(self.damping[k]),
            }
            for k, d in enumerate(self.joints)
        }
        if self.impedance is not None:
            for k, d in enumerate(self.joints):
                entries[d.name]["limit_impedance"] = [float(x) for x in self.impedance[k]]
        if self.restitution is not None:
            for k, d in enumerate(self.joints):
                if float(self.calibrated[k]):
                    entries[d.name]["limit_restitution"] = float(self.restitution[k])
        return entries

    def penetration(self, q):
        """How far coordinates ``q`` (..., n) lie beyond their limits (0 inside)."""
        return jnp.maximum(0.0, jnp.maximum(self.lower - q, q - self.upper))


def mujoco_impedance(solimp, r):
    """MuJoCo's impedance d(r) of ``solimp`` (..., 5) = (d_min, d_max, width, midpoint,
    power) at violation r (documentation, Modeling → Solver parameters → solimp;
    ``getimpedance`` in ``engine_core_constraint.c``), clamped to [1e-4, 0.9999]."""
    d_min, d_max, width, mid, power = (solimp[..., k] for k in range(5))
    x = jnp.clip(jnp.abs(r) / jnp.maximum(width, 1e-15), 0.0, 1.0)
    low = x**power / mid ** (power - 1)
    high = 1 - (1 - x) ** power / (1 - mid) ** (power - 1)
    y = jnp.where(power == 1, x, jnp.where(x <= mid, low, high))
    d = jnp.where((d_min == d_max) | (width <= 1e-15), d_min, d_min + y * (d_max - d_min))
    return jnp.clip(d, 1e-4, 0.9999)


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
