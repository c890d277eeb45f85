"""Joint damping, stiffness, friction loss and armature along joint coordinates.

A revolute (angle) or translational (slide) joint with ``damping`` c, ``stiffness`` k,
``spring_reference`` q_ref and ``friction_loss`` f gets the generalised force along its
coordinate q (:mod:`jaxmbd.model.joints`; N m or N)

    F = -c q_dot - k (q - q_ref) - f tanh(q_dot / v_r),

MuJoCo's passive ``damping`` and ``stiffness`` (about ``qpos_spring``) exactly, and its
``frictionloss`` as regularised dry friction. It acts on the two bodies through the
virtual work F dq (:mod:`jaxmbd.forces._joint`); the element lives in ``model.forces``
(:class:`JointDynamics`), so every formulation and integrator applies it and the implicit
integrators put its derivatives (c, k, f / v_r at rest) in the Newton matrix.

**Friction loss.** Coulomb's -f sign(q_dot) is replaced by -f tanh(q_dot / v_r), with the
regularisation velocity v_r = :data:`FRICTION_VELOCITY` (rad/s or m/s; the leaf
``friction_velocity``). tanh rather than the contact law's q_dot / sqrt(q_dot^2 + v_r^2)
(:mod:`jaxmbd.contact.law`): both have the slope f / v_r at rest (which sets the stiffness
the integrator sees), but tanh is within 2 exp(-2 |q_dot| / v_r) of f where the algebraic
law is within v_r^2 / (2 q_dot^2) (0.5 % against 5 % at |q_dot| = 3 v_r). What this costs:

* a joint spinning down from rate w0 under friction alone, I q_ddot = -f tanh(q_dot / v_r),
  follows w(t) = v_r asinh(sinh(w0 / v_r) exp(-f t / (I v_r))) and differs from Coulomb's
  max(0, w0 - f t / I) by at most asinh(1/2) v_r = 0.48 v_r (at Coulomb's stopping time
  I w0 / f; after it, the rate decays with the time constant I v_r / f instead of
  stopping);
* below the friction limit a steady load Q < f does not hold the joint: it creeps at
  q_dot = v_r artanh(Q / f) (about v_r Q / f).

MuJoCo's ``frictionloss`` is a soft constraint row instead, solved with the other
constraints each step: up to f it holds the joint with the creep of its ``solref`` /
``solimp`` regulariser, q_dot = (1 - d) a / (d B) under an unconstrained acceleration a
(about 1.1e-3 s times a at the defaults: d = 0.9, B = 2 / (0.95 * 0.02 s)), and beyond f it
slips with exactly f. The two agree on the sliding phase (to 0.48 v_r in rate) and on the
stopping time (to I v_r / f), not on the creep below the limit, whose speed jaxmbd sets
by v_r and MuJoCo by the acceleration.

**Armature** (rotor inertia) a adds the kinetic energy 1/2 a q_dot^2 of a rotor geared to
the coordinate (MuJoCo's ``armature``, added to the diagonal of its joint-space mass
matrix). With q_dot = g . V (g the gradient of q with respect to the stacked twists V =
(r_dot, omega_bar) of the joint's two bodies, :mod:`jaxmbd.forces._joint`), Lagrange-
d'Alembert gives the generalised force F = -a q_ddot along q, q_ddot = g . V_dot +
g_dot . V: in absolute coordinates the mass matrix gains a g g^T (coupling the two bodies
when neither is the ground) and the force -a (g_dot . V) g. The element returns the
velocity part from ``__call__`` (with the passive forces) and declares the mass through
:meth:`JointDynamics.added_mass` (:class:`jaxmbd.forces.AddedMass`), which every
formulation puts in its equations of motion, its Newton matrix and its index-1 system;
:func:`jaxmbd.analysis.diagnostics.energy` counts 1/2 a q_dot^2 as kinetic energy.

**Angles.** A revolute joint's angle is read on its principal branch, within half a turn
of the drawn pose (the joint's ``offset``): a spring acts on q - q_ref there, so a
revolute joint with stiffness must stay within half a turn of its drawn pose (MuJoCo
counts full turns). Damping and friction loss act on the rate and have no such limit.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..model.joints import JointDefinition
from . import AddedMass, BodyState, ForceOutput
from ._joint import (
    AbstractJointForce,
    coordinates_and_gradients,
    output_coordinates,
)

logger = logging.getLogger("jaxmbd")

#: The joint-dynamics keys of a joint's model-file entry, in the file's order.
_FILE_KEYS = ("damping", "stiffness", "spring_reference", "friction_loss", "armature")

#: Regularisation velocity of friction loss (rad/s or m/s), see the module docstring.
FRICTION_VELOCITY = 1e-2


class JointDynamics(AbstractJointForce):
    """Damping, stiffness, friction loss and armature of revolute and translational joints
    (see the module docstring). ``damping`` (N m s/rad or N s/m), ``stiffness`` (N m/rad or
    N/m), ``spring_reference`` (rad or m, the joint coordinate where the spring is relaxed),
    ``friction_loss`` (N m or N), ``friction_velocity`` (rad/s or m/s) and ``armature``
    (kg m^2 or kg; None where no joint of the element was given one, so that a model
    without armature pays nothing for it): (n,) array leaves, one per joint of
    ``joints``."""

    joints: tuple[JointDefinition, ...]
    damping: jax.Array
    stiffness: jax.Array
    spring_reference: jax.Array
    friction_loss: jax.Array
    friction_velocity: jax.Array
    armature: jax.Array | None = None
    absolute_entries: tuple[bool, ...] | None = eqx.field(static=True, default=None)
    entries_label: ClassVar[str] = "damping, stiffness, friction loss or armature"
    entry_fields: ClassVar[tuple[str, ...]] = (
        "joints", "damping", "stiffness", "spring_reference", "friction_loss",
        "friction_velocity", "armature",
    )  # fmt: skip

    def generalised_force(self, t, q, qdot):
        """-c q_dot - k (q - q_ref) - f tanh(q_dot / v_r), (n,), along +q."""
        friction = self.friction_loss * jnp.tanh(qdot / self.friction_velocity)
        return -self.damping * qdot - self.stiffness * (q - self.spring_reference) - friction

    @property
    def output_names(self):
        return tuple(f"joint:{d.name}" for d in self.joints)

    def outputs(self, context):
        """Per joint (``"joint:<name>"``): the passive force along +q (N m or N; the
        armature's inertial force is not among them), the deflection q - q_ref and q_dot;
        NaN for a joint whose coordinate the run's formulation does not apply forces on
        (:func:`~jaxmbd.forces._joint.output_coordinates`)."""
        q, qdot = output_coordinates(self, context)
        force = self.generalised_force(context.t, q, qdot)
        deflection = q - self.spring_reference
        return {name: ForceOutput(force[..., k], deflection[..., k], qdot[..., k])
                for k, name in enumerate(self.output_names)}  # fmt: skip

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.damping) - 1

    @property
    def needs_bias(self) -> bool:
        return self.armature is not None

    def joint_force(self, t, q, qdot, bias):
        """The passive forces and, with armature, the velocity part -a (g_dot . V) of its
        inertial force -a q_ddot (the acceleration part is :meth:`added_mass`)."""
        force = self.generalised_force(t, q, qdot)
        return force if self.armature is None else force - self.armature * bias

    @property
    def adds_mass(self) -> bool:
        return self.armature is not None

    @property
    def joint_armature(self):
        return self.armature

    @property
    def joint_damping(self):
        return self.damping

    def added_mass(self, t, state: BodyState) -> AddedMass | None:
        """The armature a along each joint coordinate, with its twist gradients g."""
        part = self.absolute_part()
        if part.armature is None or not part.joints:
            return None
        _, g = coordinates_and_gradients(part.joints, state)
        bi = np.asarray([d.body_i for d in part.joints], dtype=int)
        bj = np.asarray([d.body_j for d in part.joints], dtype=int)
        return AddedMass(part.armature, g, bi, bj)

    def joint_entries(self):
        """Each joint's damping, stiffness, spring reference (with a spring), friction loss
        and armature (where given). The friction velocity is not part of the file: where it
        is not the default, a warning says so."""
        out = {}
        for k, d in enumerate(self.joints):
            values = {
                key: float(getattr(self, key)[k])
                for key in _FILE_KEYS
                if getattr(self, key) is not None  # armature: None where none given
            }
            if values["stiffness"] == 0.0:
                del values["spring_reference"]  # meaningless without a spring
            out[d.name] = values
            if float(self.friction_velocity[k]) != FRICTION_VELOCITY:
                logger.warning(
                    "save_model: joint '%s': friction_velocity %g is not saved (the file "
                    "gets the default %g)", d.name, float(self.friction_velocity[k]),
                    FRICTION_VELOCITY,
                )  # fmt: skip
        return out

    def potential_energy(self, state: BodyState):
        """Energy stored in the joint springs, sum of 1/2 k (q - q_ref)^2 (counted by
        :func:`jaxmbd.analysis.diagnostics.energy`; damping and friction loss only dissipate)."""
        part = self.absolute_part()
        q, _ = coordinates_and_gradients(part.joints, state)
        return jnp.sum(0.5 * part.stiffness * (q - part.spring_reference) ** 2)
