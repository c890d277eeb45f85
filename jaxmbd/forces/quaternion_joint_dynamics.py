"""Damping, stiffness, friction loss and armature on MuJoCo's ball and free joints, the
joints whose coordinates hold a unit quaternion.

MuJoCo applies them per dof (``engine_passive.c``, ``mj_springdamper``; ``engine_core_smooth.c``
adds ``dof_armature`` to the mass matrix's diagonal): with qvel the joint's dofs (a ball's
angular velocity in the child's frame; a free joint's linear velocity in the world frame,
then its angular velocity in the body's frame),

    qfrc = -c qvel - k dif - f tanh(qvel / v_r),    M += a I,

where ``dif`` is, for the rotation, ``mju_subQuat(q, q_ref)``: the rotation vector of
q_ref^-1 q, its angle wrapped into (-pi, pi] (``engine_util_spatial.c``, ``mju_quat2Vel``);
for a free joint's translation, the position less its reference. ``c``, ``k``, ``f``,
``a``: the joint's ``damping``, ``stiffness``, ``frictionloss``, ``armature``; q_ref: its
``qpos_spring`` (a ball's ``springref`` is its ``qpos0``). Friction loss is regularised per
dof as :mod:`jaxmbd.forces.joint_dynamics` regularises a hinge's (MuJoCo solves it as a soft
constraint row; the two differ below the friction limit, see there).

The ``"joint"`` formulation reads the coordinates from qpos and qvel by joint name
(:mod:`jaxmbd.joint_space.forces`). The absolute formulations carry no coordinates of
these joints and leave the element out, with a
:class:`~jaxmbd.errors.JointSpaceOnlyWarning` that names the joints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from . import AbstractForce, BodyState, ForceOutput, register_force_type
from .joint_dynamics import FRICTION_VELOCITY

#: A model file's joint kinds: whether each is a free joint (else a ball).
_IS_FREE = {"ball": False, "free": True}
_KIND_OF = {free: kind for kind, free in _IS_FREE.items()}

#: (qpos size, dof count) of a ball and of a free joint.
BALL_SIZES = (4, 3)
FREE_SIZES = (7, 6)


def quaternion_difference(q, q_ref):
    """MuJoCo's ``mju_subQuat(q, q_ref)``: the rotation vector (3,) of q_ref^-1 q (unit
    quaternions, scalar first), its angle wrapped into (-pi, pi]. NaN-safe at zero angle,
    where the vector is 2 v / w (v, w: the vector and scalar parts of q_ref^-1 q), the
    limit of angle / |v| times v."""
    w0, v0 = q_ref[0], -q_ref[1:]
    w1, v1 = q[0], q[1:]
    w = w0 * w1 - v0 @ v1
    v = w0 * v1 + w1 * v0 + jnp.cross(v0, v1)
    s2 = v @ v
    small = s2 < 1e-24
    s = jnp.sqrt(jnp.where(small, 1.0, s2))
    angle = 2.0 * jnp.arctan2(s, w)
    angle = jnp.where(angle > jnp.pi, angle - 2.0 * jnp.pi, angle)
    scale = jnp.where(small, 2.0 / jnp.where(small, w, 1.0), angle / s)
    return scale * v


@register_force_type("quaternion_joint_dynamics")
class QuaternionJointDynamics(AbstractForce, strict=True):
    """Damping ``damping``, stiffness ``stiffness`` about ``spring_reference``, friction
    loss ``friction_loss`` (regularised at ``friction_velocity``) and armature ``armature``
    on the ball and free joints ``joints`` of a model's kinematic tree (see the module
    docstring; one entry per joint, the same value on each of its dofs).

    ``free``: per joint, whether it is a free joint (static). ``spring_reference``:
    (n, 7) the reference qpos, a free joint's position and quaternion; a ball's quaternion
    in columns 3-6 (columns 0-2 unused)."""

    joints: tuple[str, ...] = eqx.field(static=True)
    free: tuple[bool, ...] = eqx.field(static=True)
    damping: jax.Array
    stiffness: jax.Array
    spring_reference: jax.Array
    friction_loss: jax.Array
    friction_velocity: jax.Array
    armature: jax.Array

    acts_along_dofs: ClassVar[bool] = True
    file_keys: ClassVar[frozenset[str]] = frozenset(
        {"joint_names", "joint_kinds", "damping", "stiffness", "spring_reference", "friction_loss",
         "armature"}
    )  # fmt: skip

    def __check_init__(self):
        n = len(self.joints)
        if len(self.free) != n:
            raise ModelError(f"QuaternionJointDynamics: {len(self.free)} free flags for {n} joints")
        for key in ("damping", "stiffness", "friction_loss", "friction_velocity", "armature"):
            value = getattr(self, key)
            if jnp.shape(value) != (n,):
                raise ModelError(
                    f"QuaternionJointDynamics.{key}: expected shape ({n},) (one per joint of "
                    f"{list(self.joints)}), got {jnp.shape(value)}"
                )
        if jnp.shape(self.spring_reference) != (n, 7):
            raise ModelError(
                f"QuaternionJointDynamics.spring_reference: expected shape ({n}, 7), got "
                f"{jnp.shape(self.spring_reference)}"
            )

    def __call__(self, t, state: BodyState):
        """Nothing on the bodies: the absolute formulations leave the element out
        (:meth:`left_to_joint_space`)."""
        zero = jnp.zeros_like(state.r)
        return zero, zero

    @property
    def bodies(self):
        return ()

    def left_to_joint_space(self):
        return "damping, stiffness, friction loss or armature", list(self.joints)

    def joint_space_obstacle(self, tree_dofs: Mapping[str, int]) -> str | None:
        """Each entry is a ball (3 dofs) or free joint (6) of the tree, as declared."""
        wrong = [
            name
            for name, free in zip(self.joints, self.free, strict=True)
            if tree_dofs.get(name) != (FREE_SIZES if free else BALL_SIZES)[1]
        ]
        if wrong:
            return (
                f"its damping, stiffness, friction loss or armature act on {wrong}, which are "
                "no ball or free joints of the kinematic tree as declared"
            )
        return None

    def to_json(self, body_label):
        """The entry of a model file's ``"forces"`` (joints by name; the friction velocity
        is the default's)."""
        kinds = [_KIND_OF[free] for free in self.free]
        out = {"type": self.file_type, "joint_names": list(self.joints), "joint_kinds": kinds}
        for key in ("damping", "stiffness", "spring_reference", "friction_loss", "armature"):
            out[key] = np.asarray(getattr(self, key)).tolist()
        return out

    @classmethod
    def from_json(cls, builder, entry):
        values = {
            key: entry.get(key) for key in sorted(cls.file_keys - {"joint_names", "joint_kinds"})
        }
        kinds = entry.get("joint_kinds")
        if not isinstance(kinds, list) or not set(kinds) <= set(_IS_FREE):
            raise ModelError(f"{entry.where}.joint_kinds: expected a list of 'ball' or 'free'")
        free = [_IS_FREE[k] for k in kinds]
        element = quaternion_joint_dynamics(
            entry.get("joint_names"), free, where=entry.where, **values
        )
        builder.add_force(element)

    def sizes(self, k: int) -> tuple[int, int]:
        """(qpos size, dof count) of joint k (static)."""
        return FREE_SIZES if self.free[k] else BALL_SIZES

    def deflection(self, k: int, qpos):
        """Joint k's ``dif`` (3 or 6,) at its qpos (4 or 7,): the rotation vector of
        q_ref^-1 q, after a free joint's position less its reference."""
        ref = self.spring_reference[k]
        rotation = quaternion_difference(qpos[-4:], ref[3:])
        if self.free[k]:
            return jnp.concatenate([qpos[:3] - ref[:3], rotation])
        return rotation

    def dof_force(self, t, k: int, qpos, qvel):
        """The passive force along joint k's dofs (3 or 6,) at its qpos (4 or 7,) and qvel
        (``mj_springdamper`` and the regularised friction loss)."""
        c, kk, f = self.damping[k], self.stiffness[k], self.friction_loss[k]
        friction = f * jnp.tanh(qvel / self.friction_velocity[k])
        return -c * qvel - kk * self.deflection(k, qpos) - friction

    @property
    def output_names(self):
        return tuple(f"joint:{name}" for name in self.joints)

    def outputs(self, context):
        """Per joint (``"joint:<name>"``), along its dofs (3 for a ball, 6 for a free
        joint): the passive force (MuJoCo's ``qfrc_spring + qfrc_damper`` there, with the
        regularised friction loss), ``dif`` and qvel, read from qpos and qvel in a run in
        joint coordinates; NaN in the absolute formulations, which leave the element out."""
        out = {}
        for k, name in enumerate(self.joints):
            nq, nv = self.sizes(k)
            if name in context.joint_addresses:
                qadr, dadr = context.joint_addresses[name]
                qpos, qvel = context.qpos[qadr : qadr + nq], context.qvel[dadr : dadr + nv]
                force = self.dof_force(context.t, k, qpos, qvel)
                out[f"joint:{name}"] = ForceOutput(force, self.deflection(k, qpos), qvel)
            else:
                nan = jnp.full((nv,), jnp.nan, context.state.r.dtype)
                out[f"joint:{name}"] = ForceOutput(nan, nan, nan)
        return out

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.damping) - 1

    def dof_values(self, key: str) -> np.ndarray | jax.Array:
        """The per-joint field ``key`` (``"armature"``, ``"damping"``) repeated over each
        joint's dofs, in joint order."""
        value = getattr(self, key)
        return jnp.concatenate([
            jnp.broadcast_to(value[k], (self.sizes(k)[1],)) for k in range(len(self.joints))
        ])  # fmt: skip


def quaternion_joint_dynamics(names, free, damping, stiffness, spring_reference, friction_loss,
                              armature, *, where: str) -> QuaternionJointDynamics:  # fmt: skip
    """The element from per-joint values (checked: finite, non-negative; the quaternion of
    each reference of unit norm), ``where`` naming the source in errors."""
    n = len(names)
    values = {}
    for key, value in (("damping", damping), ("stiffness", stiffness),
                       ("friction_loss", friction_loss), ("armature", armature)):  # fmt: skip
        x = np.asarray(value, dtype=np.float64)
        if x.shape != (n,) or not np.all(np.isfinite(x)) or np.any(x < 0):
            bad = [names[k] for k in np.flatnonzero(~(np.isfinite(x) & (x >= 0)))]
            raise ModelError(
                f"{where}: {key} of the ball and free joints must be {n} finite non-negative "
                f"numbers; wrong on {bad or list(names)}"
            )
        values[key] = jnp.asarray(x)
    ref = np.asarray(spring_reference, dtype=np.float64)
    if ref.shape != (n, 7) or not np.all(np.isfinite(ref)):
        raise ModelError(f"{where}: spring references must be ({n}, 7) finite numbers")
    norms = np.linalg.norm(ref[:, 3:], axis=1)
    if np.any(np.abs(norms - 1) > 1e-6):
        bad = [names[k] for k in np.flatnonzero(np.abs(norms - 1) > 1e-6)]
        raise ModelError(f"{where}: spring reference quaternions of {bad} are not unit")
    return QuaternionJointDynamics(
        joints=tuple(names), free=tuple(bool(x) for x in free),
        spring_reference=jnp.asarray(ref),
        friction_velocity=jnp.full((n,), FRICTION_VELOCITY), **values,
    )  # fmt: skip
