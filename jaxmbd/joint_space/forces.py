"""The model's force elements in joint space.

Elements along joint coordinates (``acts_along_joints``: actuators, joint damping,
stiffness, friction loss, limits) read their joints' coordinates straight from qpos/qvel by
joint name and add their forces to those dofs, as do the elements along the dofs of ball
and free joints (``acts_along_dofs``); elements along tendons
(``acts_along_tendons``, and actuators with tendon transmissions) read the tendons' lengths
L and Jacobians J at qpos (:func:`jaxmbd.tendons.lengths_and_jacobians`), their velocities
J qvel, and add J^T F; their armature adds to the mass matrix's
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
from ..tendons import lengths_and_jacobians
from ..tree import JointType, KinematicTree, TreePoses, body_wrenches, picked_sum


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
    """Every force element of ``model`` at one state (see the module docstring). The joint
    elements' values are summed per dof by constant indices (no scatter: see
    :mod:`jaxmbd.tree._elementwise`)."""
    nv = tree.nv
    forces, armatures, dampings = [], [], []  # (dof addresses, values)
    along_tendons = []  # J^T F of the tensions along tendons
    f = n = None
    for element in model.forces:
        if element.acts_along_tendons:
            length, J = lengths_and_jacobians(element.tendons, tree, qpos, poses)
            along_tendons.append(J.T @ element.tendon_force(t, length, J @ qvel))
            continue
        if element.acts_along_joints and element.tendon_rows:
            rows = element.tendon_rows
            part = element.entries(rows)
            length, J = lengths_and_jacobians(part.tendons, tree, qpos, poses)
            zero = jnp.zeros_like(length)
            along_tendons.append(J.T @ part.joint_force(t, length, J @ qvel, zero))
            element = element.entries([k for k in range(len(element.joints)) if k not in rows])
            if not element.joints:
                continue
        if element.acts_along_dofs:
            every = []
            for k, name in enumerate(element.joints):
                j = tree.joint_names.index(name)
                qadr, dadr = int(tree.joint_qpos_adr[j]), int(tree.joint_dof_adr[j])
                nq, ndof = element.sizes(k)
                dofs = np.arange(dadr, dadr + ndof)
                q, v = qpos[qadr : qadr + nq], qvel[dadr : dadr + ndof]
                forces.append((dofs, element.dof_force(t, k, q, v)))
                every.append(dofs)
            every = np.concatenate(every)
            armatures.append((every, element.dof_values("armature")))
            dampings.append((every, element.dof_values("damping")))
            continue
        if element.acts_along_joints:
            where = f"force element {type(element).__name__}"
            qadr, dadr = joint_coordinate_indices(tree, [d.name for d in element.joints],
                                                  where=where)  # fmt: skip
            q, qdot = qpos[qadr], qvel[dadr]
            forces.append((dadr, element.joint_force(t, q, qdot, jnp.zeros_like(q))))
            if element.joint_armature is not None:
                armatures.append((dadr, element.joint_armature))
            if element.joint_damping is not None:
                dampings.append((dadr, element.joint_damping))
            continue
        df, dn = element(t, state)
        f, n = (df, dn) if f is None else (f + df, n + dn)
    wrenches = None if f is None else body_wrenches(poses, f, n)
    tau = _per_dof(nv, forces, qvel.dtype)
    for part in along_tendons:
        tau = tau + part
    armature = _per_dof(nv, armatures, qvel.dtype) if armatures else None
    damping = _per_dof(nv, dampings, qvel.dtype) if dampings else None
    return JointSpaceForces(tau, wrenches, armature, damping)


def _per_dof(nv: int, parts, dtype):
    """sum of the values of ``parts`` ((dof addresses, values) pairs) per dof (nv,)."""
    if not parts:
        return jnp.zeros(nv, dtype)
    dofs = np.concatenate([np.asarray(d, dtype=int) for d, _ in parts])
    values = jnp.concatenate([jnp.broadcast_to(v, (len(d),)) for d, v in parts])
    incidence = np.zeros((nv, dofs.size), dtype=bool)
    incidence[dofs, np.arange(dofs.size)] = True
    return picked_sum(incidence, values)
