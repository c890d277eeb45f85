"""Compliant joint limits: a one-sided spring-damper on a joint coordinate.

A limited revolute (angle) or translational (slide) joint ``limits=(lower, upper)`` gets a
generalised force along its coordinate q (:mod:`jaxmbd.joints`) whenever q leaves the
range, with penetration delta = lower - q or q - upper:

    F = max(0, k delta + c min(1, delta / delta_r) delta_dot)   for delta > 0,   else 0,

pushing q back (the ``max`` keeps a limit from pulling; the damper ramps in over delta_r =
:data:`DAMPING_RAMP` = 1e-3 so that F is continuous at delta = 0). It acts on the two bodies
through the virtual work F dq = f . dr + n_bar . dtheta_bar: f_b = F dq/dr_b, n_bar_b = F
dq/dtheta_bar_b, the gradients of the coordinate with respect to each body's twist, taken by
autodiff of the same coordinate map that ``sol.joints`` reports. The element lives in
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
from .forces import AbstractForce, BodyState
from .joints import JointDefinition, _geometric, _relative
from .lie import hat

#: Time constant of the default limit stiffness and damping (s), see the module docstring.
LIMIT_TIME_CONSTANT = 0.01

LIMITED_KINDS = ("revolute", "translational")

#: Penetration (rad or m) over which the limit's damper ramps in, so the force is continuous.
DAMPING_RAMP = 1e-3


def _coordinate_and_gradients(defn: JointDefinition, state: BodyState):
    """q of a limited joint at ``state`` and its gradients with respect to the twists
    (delta r, theta_bar) of body i and body j (zero for the ground)."""
    nb = state.r.shape[0]

    def pose(k, dr, dth):
        if k == nb:
            return jnp.zeros(3), jnp.eye(3)
        return state.r[k] + dr, state.A[k] @ (jnp.eye(3) + hat(dth))

    def coordinate(twists):
        r_i, A_i = pose(defn.body_i, twists[0], twists[1])
        r_j, A_j = pose(defn.body_j, twists[2], twists[3])
        R, d = _relative(defn, r_i, A_i, r_j, A_j)
        g = _geometric(defn.kind, R[0], d[0])[0]
        return defn.offset[0] + defn.sign[0] * g

    zero = jnp.zeros((4, 3))
    q, grads = jax.value_and_grad(coordinate)(zero)
    return q, grads


class JointLimits(AbstractForce):
    """Compliant limits of revolute and translational joints (see the module docstring).
    ``lower``, ``upper``, ``stiffness``, ``damping``: (n,) array leaves, one per limited
    joint, in the joints' coordinate units (rad or m)."""

    joints: tuple[JointDefinition, ...]
    lower: jax.Array
    upper: jax.Array
    stiffness: jax.Array
    damping: jax.Array

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.joints)

    def __call__(self, t, state: BodyState):
        nb = state.r.shape[0]
        f, n = jnp.zeros((nb, 3)), jnp.zeros((nb, 3))
        for k, defn in enumerate(self.joints):
            q, g = _coordinate_and_gradients(defn, state)
            qdot = 0.0
            for body, (gr, gth) in ((defn.body_i, g[:2]), (defn.body_j, g[2:])):
                if body < nb:
                    qdot = qdot + gr @ state.rdot[body] + gth @ state.omega[body]
            force = self.generalised_force(k, q, qdot)
            for body, (gr, gth) in ((defn.body_i, g[:2]), (defn.body_j, g[2:])):
                if body < nb:
                    f = f.at[body].add(force * gr)
                    n = n.at[body].add(force * gth)
        return f, n

    def generalised_force(self, k: int, q, qdot):
        """The force along +q of limit ``k`` at coordinate q and rate qdot."""
        k_lim, c_lim = self.stiffness[k], self.damping[k]

        def push(delta, delta_dot):
            # the damper ramps in over the first DAMPING_RAMP of penetration: the force is
            # continuous at delta = 0 (a jump of c v there makes Newton cycle at impact)
            ramp = jnp.clip(delta / DAMPING_RAMP, 0.0, 1.0)
            force = k_lim * delta + c_lim * ramp * delta_dot
            return jnp.where(delta > 0, jnp.maximum(0.0, force), 0.0)

        return push(self.lower[k] - q, -qdot) - push(q - self.upper[k], qdot)

    def potential_energy(self, state: BodyState):
        """Energy stored in the limit springs, sum of 1/2 k delta^2 (counted by
        :func:`jaxmbd.diagnostics.energy`; the dampers only dissipate)."""
        total = jnp.asarray(0.0)
        for k, defn in enumerate(self.joints):
            q, _ = _coordinate_and_gradients(defn, state)
            delta = jnp.maximum(0.0, jnp.maximum(self.lower[k] - q, q - self.upper[k]))
            total = total + 0.5 * self.stiffness[k] * delta**2
        return total

    def penetration(self, q):
        """How far coordinates ``q`` (..., n) lie beyond their limits (0 inside)."""
        return jnp.maximum(0.0, jnp.maximum(self.lower - q, q - self.upper))


def effective_inertia(kind: str, point, axis, bodies) -> float:
    """Inertia of ``bodies`` = [(mass, J_global (3, 3), centre (3,))] about ``axis`` through
    ``point`` (revolute), or their mass (translational)."""
    if kind == "translational":
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
