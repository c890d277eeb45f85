"""The model's force elements in joint space.

Elements along joint coordinates (``acts_along_joints``: actuators, joint damping,
stiffness, friction loss, limits) read their joints' coordinates straight from qpos/qvel by
joint name and add their forces to those dofs; their armature adds to the mass matrix's
diagonal (MuJoCo's ``dof_armature``). Every other element acts on the bodies: it is
evaluated on the body states of the forward kinematics, and its wrenches reach the dofs
through the transposed Jacobian (:func:`jaxmbd.tree.joint_forces`)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..forces import BodyState
from ..model import Model
from ..tree import JointType, KinematicTree, TreePoses, body_wrenches


class JointSpaceForces(NamedTuple):
    """``tau`` (nv,) along the dofs, ``wrenches`` (nb, 6) on the bodies (world, at the
    origin), ``armature`` (nv,) and ``damping`` (nv,) of the joint elements (zeros where
    none)."""

    tau: jax.Array
    wrenches: jax.Array | None
    armature: jax.Array | None
    damping: jax.Array | None


def joint_coordinate_indices(tree: KinematicTree, names, *, where: str):
    """(qpos addresses, dof addresses) of the one-coordinate tree joints ``names``."""
    qadr, dadr = [], []
    for name in names:
        if name not in tree.joint_names:
            raise ModelError(
                f"{where}: joint '{name}' is not a joint of the kinematic tree (its joints: "
                f"{list(tree.joint_names)})"
            )
        j = tree.joint_names.index(name)
        if JointType(tree.joint_type[j]).nv != 1:
            raise ModelError(
                f"{where}: joint '{name}' is a {JointType(tree.joint_type[j]).name.lower()} "
                "joint; forces along joint coordinates act on hinges and slides"
            )
        qadr.append(tree.joint_qpos_adr[j])
        dadr.append(tree.joint_dof_adr[j])
    return np.asarray(qadr, dtype=int), np.asarray(dadr, dtype=int)


def body_state(poses: TreePoses, rdot, omega) -> BodyState:
    """The model's body state (centres of mass, body rotations, velocities)."""
    return BodyState(poses.c, poses.R, rdot, omega)


def joint_space_forces(model: Model, tree: KinematicTree, poses: TreePoses, state: BodyState,
                       qpos, qvel, t) -> JointSpaceForces:  # fmt: skip
    """Every force element of ``model`` at one state (see the module docstring)."""
    nv = tree.nv
    tau = jnp.zeros(nv, qvel.dtype)
    armature = damping = None
    f = n = None
    for element in model.forces:
        if element.acts_along_joints:
            where = f"force element {type(element).__name__}"
            qadr, dadr = joint_coordinate_indices(tree, [d.name for d in element.joints],
                                                  where=where)  # fmt: skip
            q, qdot = qpos[qadr], qvel[dadr]
            force = element.joint_force(t, q, qdot, jnp.zeros_like(q))
            tau = tau.at[dadr].add(force)
            if element.joint_armature is not None:
                armature = jnp.zeros(nv, qvel.dtype) if armature is None else armature
                armature = armature.at[dadr].add(element.joint_armature)
            if element.joint_damping is not None:
                damping = jnp.zeros(nv, qvel.dtype) if damping is None else damping
                damping = damping.at[dadr].add(element.joint_damping)
            continue
        df, dn = element(t, state)
        f, n = (df, dn) if f is None else (f + df, n + dn)
    wrenches = None if f is None else body_wrenches(poses, f, n)
    return JointSpaceForces(tau, wrenches, armature, damping)
