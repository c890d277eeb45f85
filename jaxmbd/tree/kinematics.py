"""Forward kinematics of a :class:`~jaxmbd.tree.KinematicTree`: body poses, the joints'
motion subspaces and the bodies' spatial velocities, tree level by tree level.

Spatial vectors are 6-vectors in world coordinates referred to the world origin
(Featherstone 2008, section 2.1 "Plücker coordinates" with one common frame): a motion
(omega, v_O) is the angular velocity and the velocity of the body point at the origin; a
force (n_O, f) is the moment about the origin and the force. In one frame the tree's
recursions need no coordinate transforms: a body's velocity is its parent's plus its own
joints' motion subspaces times their rates (Featherstone eq. 3.32 with X = 1), and the sums
over a subtree or a chain of ancestors are products with constant 0/1 ancestor matrices.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..lie import so3_exp
from ._quaternion import quat_to_matrix, rotate_by_quat_increment
from .topology import WORLD, JointType, KinematicTree


class TreePoses(NamedTuple):
    """Body frames ``x`` (nb, 3) and ``R`` (nb, 3, 3) in the world, centres of mass ``c``
    (nb, 3), and each dof's motion subspace ``S`` (nv, 6) (Featherstone's S_i in world
    coordinates, eq. 3.33)."""

    x: jax.Array
    R: jax.Array
    c: jax.Array
    S: jax.Array


def _groups(tree: KinematicTree):
    """Static (slot, type, bodies, joints) groups: the k-th joints of all bodies that have
    one of that type, so that each group is one vectorised update."""
    out = []
    slots = max((len(js) for js in tree.body_joints), default=0)
    for k in range(slots):
        for jtype in JointType:
            joints = [js[k] for js in tree.body_joints if len(js) > k]
            joints = [j for j in joints if tree.joint_type[j] == jtype]
            if joints:
                bodies = [tree.joint_body[j] for j in joints]
                out.append((jtype, np.asarray(bodies), np.asarray(joints)))
    return out


def _qpos_block(tree: KinematicTree, qpos, joints, size: int):
    adr = np.asarray(tree.joint_qpos_adr)[joints]
    return qpos[adr[:, None] + np.arange(size)[None, :]]


def local_frames(tree: KinematicTree, qpos):
    """Each body's frame in its parent's frame after its joints, and each joint's frame
    before it acts: (p (nb, 3), Rl (nb, 3, 3), joint_p (nj, 3), joint_R (nj, 3, 3)).

    A hinge turns the body about its axis through its anchor a (body frame): (p, R) ->
    (p + R (a - Q a), R Q) with Q = exp((q - q0) axis~); a slide moves it along its axis;
    a ball turns it by the quaternion about the anchor; a free joint sets the frame.
    """
    p, Rl = tree.body_pos, tree.body_rot
    nj = tree.nj
    joint_p = jnp.zeros((nj, 3), p.dtype)
    joint_R = jnp.zeros((nj, 3, 3), p.dtype)
    q0 = tree.qpos0
    for jtype, bodies, joints in _groups(tree):
        pb, Rb = p[bodies], Rl[bodies]
        joint_p = joint_p.at[joints].set(pb)
        joint_R = joint_R.at[joints].set(Rb)
        if jtype == JointType.FREE:
            block = _qpos_block(tree, qpos, joints, 7)
            p = p.at[bodies].set(block[:, :3])
            Rl = Rl.at[bodies].set(quat_to_matrix(block[:, 3:]))
            continue
        anchor, axis = tree.joint_pos[joints], tree.joint_axis[joints]
        if jtype == JointType.SLIDE:
            adr = np.asarray(tree.joint_qpos_adr)[joints]
            shift = (qpos[adr] - q0[adr])[:, None] * axis
            p = p.at[bodies].set(pb + jnp.einsum("bij,bj->bi", Rb, shift))
            continue
        if jtype == JointType.HINGE:
            adr = np.asarray(tree.joint_qpos_adr)[joints]
            Q = so3_exp((qpos[adr] - q0[adr])[:, None] * axis)
        else:  # BALL
            Q = quat_to_matrix(_qpos_block(tree, qpos, joints, 4))
        moved = anchor - jnp.einsum("bij,bj->bi", Q, anchor)
        p = p.at[bodies].set(pb + jnp.einsum("bij,bj->bi", Rb, moved))
        Rl = Rl.at[bodies].set(jnp.einsum("bij,bjk->bik", Rb, Q))
    return p, Rl, joint_p, joint_R


def _cross(a, b):
    return jnp.cross(a, b)


def poses(tree: KinematicTree, qpos) -> TreePoses:
    """:class:`TreePoses` at ``qpos``: the local frames composed down the tree, one
    vectorised step per level (all bodies of one depth at once)."""
    nb = tree.nb
    p, Rl, joint_p, joint_R = local_frames(tree, qpos)
    dtype = p.dtype
    # the world is row nb of the extended arrays
    x = jnp.zeros((nb + 1, 3), dtype)
    R = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (nb + 1, 3, 3))
    parent = np.asarray([nb if a == WORLD else a for a in tree.parent], dtype=int)
    for level in tree.levels:
        idx = np.asarray(level)
        Rp = R[parent[idx]]
        x = x.at[idx].set(x[parent[idx]] + jnp.einsum("bij,bj->bi", Rp, p[idx]))
        R = R.at[idx].set(jnp.einsum("bij,bjk->bik", Rp, Rl[idx]))
    x, R = x[:nb], R[:nb]
    c = x + jnp.einsum("bij,bj->bi", R, tree.com)
    S = _motion_subspaces(tree, x, R, parent, joint_p, joint_R)
    return TreePoses(x, R, c, S)


def _motion_subspaces(tree: KinematicTree, x, R, parent, joint_p, joint_R):
    """S (nv, 6): hinge (a, anchor x a), slide (0, a), ball and free rotations about the
    body's own axes (MuJoCo's ``cdof``: the body's final frame), free translations (0, e_i)."""
    nb = tree.nb
    xe = jnp.concatenate([x, jnp.zeros((1, 3), x.dtype)])
    Re = jnp.concatenate([R, jnp.eye(3, dtype=R.dtype)[None]])
    jb = np.asarray(tree.joint_body, dtype=int)
    jpar = parent[jb] if len(jb) else np.zeros(0, int)
    # each joint's frame before it acts, in the world
    Rj = jnp.einsum("jab,jbc->jac", Re[jpar], joint_R)
    xj = xe[jpar] + jnp.einsum("jab,jb->ja", Re[jpar], joint_p)
    anchor = xj + jnp.einsum("jab,jb->ja", Rj, tree.joint_pos)
    axis = jnp.einsum("jab,jb->ja", Rj, tree.joint_axis)
    rows = jnp.zeros((tree.nv, 6), x.dtype)
    dof = np.asarray(tree.joint_dof_adr, dtype=int)
    types = np.asarray(tree.joint_type, dtype=int)
    del nb
    for jtype in JointType:
        js = np.flatnonzero(types == jtype)
        if js.size == 0:
            continue
        if jtype == JointType.HINGE:
            rows = rows.at[dof[js]].set(
                jnp.concatenate([axis[js], _cross(anchor[js], axis[js])], -1)
            )
        elif jtype == JointType.SLIDE:
            rows = rows.at[dof[js]].set(jnp.concatenate([jnp.zeros_like(axis[js]), axis[js]], -1))
        else:
            start = 3 if jtype == JointType.FREE else 0
            centre = x[jb[js]] if jtype == JointType.FREE else anchor[js]
            axes = jnp.swapaxes(R[jb[js]], 1, 2)  # (n, 3 axes, 3)
            moment = _cross(centre[:, None, :], axes)
            turn = jnp.concatenate([axes, moment], -1)  # (n, 3, 6)
            idx = dof[js][:, None] + start + np.arange(3)[None, :]
            rows = rows.at[idx].set(turn)
            if jtype == JointType.FREE:
                shift = jnp.concatenate([jnp.zeros((3, 3), x.dtype), jnp.eye(3, dtype=x.dtype)], -1)
                idx = dof[js][:, None] + np.arange(3)[None, :]
                rows = rows.at[idx].set(jnp.broadcast_to(shift, (js.size, 3, 6)))
    return rows


def dof_ancestors(tree: KinematicTree) -> np.ndarray:
    """(nb, nv): 1 where the dof moves the body (it is on the body or an ancestor)."""
    anc = tree.ancestors()
    return (
        anc[:, np.asarray(tree.dof_body, dtype=int)].astype(float)
        if tree.nv
        else np.zeros((tree.nb, 0))
    )


def preceding_dofs(tree: KinematicTree) -> np.ndarray:
    """(nv, nv): 1 where dof e moves the frame in which dof d's axis is fixed: the dofs of
    the strict ancestors of d's body and those before d on its own body, a ball's three
    (and a free joint's rotations) counted together (MuJoCo's ``mj_comVel``)."""
    nv = tree.nv
    out = np.zeros((nv, nv))
    anc = tree.ancestors()
    dof_body = np.asarray(tree.dof_body, dtype=int)
    dof_joint = np.asarray(tree.dof_joint, dtype=int)
    adr = np.asarray(tree.joint_dof_adr, dtype=int)
    for d in range(nv):
        b = dof_body[d]
        j = dof_joint[d]
        for e in range(nv):
            be = dof_body[e]
            if be != b:
                out[d, e] = float(anc[b, be])
                continue
            je = dof_joint[e]
            if je < j:
                out[d, e] = 1.0
            elif je == j and tree.joint_type[j] == JointType.FREE:
                # the rotations see the translations; the translations see nothing
                out[d, e] = float(d - adr[j] >= 3 and e - adr[j] < 3)
    return out


def velocities(tree: KinematicTree, S, qvel):
    """Body spatial velocities V (nb, 6) and the rates of the motion subspaces
    S_dot (nv, 6) = V_pre x S (Featherstone eq. 2.32 for an axis fixed in the frame that
    moves with V_pre, the velocity of the joint's predecessor frame)."""
    moved = S * qvel[:, None]
    V = jnp.asarray(dof_ancestors(tree)) @ moved
    V_pre = jnp.asarray(preceding_dofs(tree)) @ moved
    return V, cross_motion(V_pre, S)


def cross_motion(v, m):
    """v x m for motions (Featherstone eq. 2.31): (w x mw, w x mv + v x mw)."""
    w, u = v[..., :3], v[..., 3:]
    return jnp.concatenate(
        [jnp.cross(w, m[..., :3]), jnp.cross(w, m[..., 3:]) + jnp.cross(u, m[..., :3])], -1
    )


def cross_force(v, f):
    """v x* f for forces (Featherstone eq. 2.32): (w x n + v x f, w x f)."""
    w, u = v[..., :3], v[..., 3:]
    return jnp.concatenate(
        [jnp.cross(w, f[..., :3]) + jnp.cross(u, f[..., 3:]), jnp.cross(w, f[..., 3:])], -1
    )


def integrate_positions(tree: KinematicTree, qpos, qvel, h):
    """qpos (+) h qvel on the joints' manifolds (MuJoCo's ``mj_integratePos``): hinge and
    slide add, ball and free turn their quaternion by the body-frame rotation h omega and
    a free joint's position moves by h v."""
    out = qpos + 0.0
    types = np.asarray(tree.joint_type, dtype=int)
    qadr = np.asarray(tree.joint_qpos_adr, dtype=int)
    vadr = np.asarray(tree.joint_dof_adr, dtype=int)
    scalar = np.flatnonzero((types == JointType.HINGE) | (types == JointType.SLIDE))
    if scalar.size:
        out = out.at[qadr[scalar]].add(h * qvel[vadr[scalar]])
    free = np.flatnonzero(types == JointType.FREE)
    if free.size:
        idx = qadr[free][:, None] + np.arange(3)
        out = out.at[idx].add(h * qvel[vadr[free][:, None] + np.arange(3)])
    for jtype, q_off, v_off in ((JointType.BALL, 0, 0), (JointType.FREE, 3, 3)):
        js = np.flatnonzero(types == jtype)
        if js.size == 0:
            continue
        qi = qadr[js][:, None] + q_off + np.arange(4)
        vi = vadr[js][:, None] + v_off + np.arange(3)
        out = out.at[qi].set(rotate_by_quat_increment(qpos[qi], h * qvel[vi]))
    return out
