"""A :class:`~jaxmbd.tree.KinematicTree` from a compiled MuJoCo model (``mujoco.MjModel``).

MuJoCo bodies without joints are welded to their parent: they merge into the nearest
ancestor with joints (its "owner"), as the model's bodies do (:mod:`jaxmbd.mjcf`), and a
body welded to the world is part of the ground. Each tree body's frame is its MuJoCo body
frame; its mass, centre of mass and inertia are those of its weld group.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _config  # noqa: F401
from .topology import WORLD, KinematicTree, tree_arrays


class MujocoTree(NamedTuple):
    """The tree, the bodies' masses (nb,) and inertias (nb, 3, 3) about their centres of
    mass in the body frames, and ``bodies``: the MuJoCo body id of each tree body."""

    tree: KinematicTree
    mass: np.ndarray
    inertia: np.ndarray
    bodies: tuple[int, ...]


def _name(mujoco, m, objtype, k: int, prefix: str) -> str:
    name = mujoco.mj_id2name(m, objtype, k)
    return name if name else f"{prefix}{k}"


def body_owners(m) -> np.ndarray:
    """The tree body that each MuJoCo body belongs to: itself when it has joints, else its
    parent's owner (-1: the world; mocap bodies too)."""
    owner = np.full(m.nbody, -1)
    for b in range(1, m.nbody):
        if m.body_mocapid[b] >= 0:
            owner[b] = -1
        elif m.body_jntnum[b] == 0:
            owner[b] = owner[m.body_parentid[b]]
        else:
            owner[b] = b
    return owner


def tree_from_mujoco(mujoco, m, qpos=None, qvel=None) -> MujocoTree:
    """The kinematic tree of ``m`` (see the module docstring); ``qpos``/``qvel``: the
    initial state (default ``qpos0`` at rest)."""
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    mujoco.mj_kinematics(m, d)
    owner = body_owners(m)
    bodies = [b for b in range(1, m.nbody) if owner[b] == b]
    index = {b: k for k, b in enumerate(bodies)}
    nb = len(bodies)
    parent, body_pos, body_rot = [], np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    mass, com, inertia = np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    for k, b in enumerate(bodies):
        o = owner[m.body_parentid[b]]
        parent.append(WORLD if o < 0 else index[o])
        x_b, R_b = d.xpos[b], d.xmat[b].reshape(3, 3)
        if o < 0:
            x_o, R_o = np.zeros(3), np.eye(3)
        else:
            x_o, R_o = d.xpos[o], d.xmat[o].reshape(3, 3)
        # at qpos0 every joint is at its reference: the body's frame before its joints
        body_pos[k] = R_o.T @ (x_b - x_o)
        body_rot[k] = R_o.T @ R_b
        members = [g for g in range(1, m.nbody) if owner[g] == b]
        mk = float(sum(m.body_mass[g] for g in members))
        c = sum(m.body_mass[g] * d.xipos[g] for g in members) / mk if mk > 0 else x_b
        J = np.zeros((3, 3))
        for g in members:
            Rg = d.ximat[g].reshape(3, 3)
            r = d.xipos[g] - c
            J += Rg @ np.diag(m.body_inertia[g]) @ Rg.T + m.body_mass[g] * (
                r @ r * np.eye(3) - np.outer(r, r)
            )
        mass[k] = mk
        com[k] = R_b.T @ (c - x_b)
        inertia[k] = 0.5 * (R_b.T @ J @ R_b + (R_b.T @ J @ R_b).T)
    joints = [
        j for b in bodies for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
    ]
    if joints != list(range(m.njnt)):
        raise ValueError("MuJoCo's joints are not in tree-body order")  # MuJoCo guarantees it
    jt = mujoco.mjtObj.mjOBJ_JOINT
    tree = KinematicTree(
        body_names=tuple(_name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in bodies),
        parent=tuple(parent),
        joint_names=tuple(_name(mujoco, m, jt, j, "joint") for j in range(m.njnt)),
        joint_type=tuple(int(t) for t in m.jnt_type),
        joint_body=tuple(index[int(b)] for b in m.jnt_bodyid),
        **tree_arrays(
            body_pos=body_pos,
            body_rot=body_rot,
            com=com,
            joint_pos=np.asarray(m.jnt_pos).reshape(-1, 3),
            joint_axis=np.asarray(m.jnt_axis).reshape(-1, 3),
            qpos0=np.asarray(m.qpos0),
            qpos_init=np.asarray(m.qpos0 if qpos is None else qpos),
            qvel_init=np.zeros(m.nv) if qvel is None else np.asarray(qvel),
        ),
    )
    return MujocoTree(tree, mass, inertia, tuple(bodies))
