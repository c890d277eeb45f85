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

from typing import NamedTuple

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


class _Frames(NamedTuple):
    """One joint's body-fixed frames, as :func:`jaxmbd.joints._relative` reads them."""

    s_bar_i: jax.Array
    s_bar_j: jax.Array
    frame_i: jax.Array
    frame_j: jax.Array


def _coordinates_and_gradients(joints: tuple[JointDefinition, ...], state: BodyState):
    """q (n,) of the limited joints at ``state`` and their gradients (n, 4, 3) with respect
    to the twists (delta r_i, theta_bar_i, delta r_j, theta_bar_j) of their bodies: one
    vmap per joint kind (at most two), not a loop over joints. A ground row's gradient is
    computed and not used."""
    r_all = jnp.concatenate([state.r, jnp.zeros((1, 3))])
    A_all = jnp.concatenate([state.A, jnp.eye(3)[None]])
    q, grads = jnp.zeros(len(joints)), jnp.zeros((len(joints), 4, 3))
    for kind in LIMITED_KINDS:
        idx = np.asarray([k for k, d in enumerate(joints) if d.kind == kind], dtype=int)
        if idx.size == 0:
            continue
        group = [joints[k] for k in idx]
        bi, bj = (np.asarray([getattr(d, b) for d in group]) for b in ("body_i", "body_j"))
        frames = _Frames(*(jnp.stack([getattr(d, key) for d in group]) for key in _Frames._fields))
        offset = jnp.stack([d.offset[0] for d in group])
        sign = jnp.asarray([d.sign[0] for d in group], dtype=offset.dtype)

        def one(r_i, A_i, r_j, A_j, frames, offset, sign, kind=kind):
            def coordinate(tw):
                R, d = _relative(
                    frames, r_i + tw[0], A_i @ (jnp.eye(3) + hat(tw[1])),
                    r_j + tw[2], A_j @ (jnp.eye(3) + hat(tw[3])),
                )  # fmt: skip
                return offset + sign * _geometric(kind, R[0], d[0])[0]

            return jax.value_and_grad(coordinate)(jnp.zeros((4, 3)))

        q_k, g_k = jax.vmap(one)(r_all[bi], A_all[bi], r_all[bj], A_all[bj], frames, offset, sign)
        q, grads = q.at[idx].set(q_k), grads.at[idx].set(g_k)
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
        bi = np.asarray([d.body_i for d in self.joints])
        bj = np.asarray([d.body_j for d in self.joints])
        q, g = _coordinates_and_gradients(self.joints, state)
        v_all = jnp.concatenate([state.rdot, jnp.zeros((1, 3))])
        w_all = jnp.concatenate([state.omega, jnp.zeros((1, 3))])  # the ground is at rest
        qdot = jnp.sum(g[:, 0] * v_all[bi] + g[:, 1] * w_all[bi], axis=-1) + jnp.sum(
            g[:, 2] * v_all[bj] + g[:, 3] * w_all[bj], axis=-1
        )
        force = self.generalised_force(q, qdot)[:, None]
        # rows on the ground (index nb) are summed into a row that is dropped
        f = jnp.zeros((nb + 1, 3)).at[bi].add(force * g[:, 0]).at[bj].add(force * g[:, 2])
        n = jnp.zeros((nb + 1, 3)).at[bi].add(force * g[:, 1]).at[bj].add(force * g[:, 3])
        return f[:nb], n[:nb]

    def generalised_force(self, q, qdot):
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
        q, _ = _coordinates_and_gradients(self.joints, state)
        return jnp.sum(0.5 * self.stiffness * self.penetration(q) ** 2)

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
