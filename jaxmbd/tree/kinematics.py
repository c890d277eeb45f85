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
from jax.ad_checkpoint import checkpoint_name

from .. import _config  # noqa: F401
from ..lie import so3_dexpinv, so3_exp
from ._elementwise import assemble, cross, halves, mm, mv, pick, picked_sum
from ._quaternion import quat_to_matrix, rotate_by_quat_increment
from .sweeps import (
    ancestor_sum,
    body_totals,
    by_body,
    by_level,
    down,
    level_tables,
    padded,
    scanned,
)
from .topology import WORLD, JointType, KinematicTree

#: ``checkpoint_name`` of the poses that :func:`poses` returns (a policy of
#: ``jax.checkpoint`` can keep them instead of recomputing the kinematics in reverse mode).
TREE_POSES = "jaxmbd_tree_poses"


class TreePoses(NamedTuple):
    """Body frames ``x`` (nb, 3) and ``R`` (nb, 3, 3) in the world, centres of mass ``c``
    (nb, 3), and each dof's motion subspace ``S`` (nv, 6) (Featherstone's S_i in world
    coordinates, eq. 3.33)."""

    x: jax.Array
    R: jax.Array
    c: jax.Array
    S: jax.Array


def _groups(tree: KinematicTree):
    """Static (type, bodies, joints) groups per joint slot: the k-th joints of all bodies
    that have one of that type, so that each group is one vectorised update."""
    out = []
    slots = max((len(js) for js in tree.body_joints), default=0)
    for k in range(slots):
        slot = []
        for jtype in JointType:
            joints = [js[k] for js in tree.body_joints if len(js) > k]
            joints = [j for j in joints if tree.joint_type[j] == jtype]
            if joints:
                bodies = [tree.joint_body[j] for j in joints]
                slot.append((jtype, np.asarray(bodies), np.asarray(joints)))
        out.append(slot)
    return out


def _qpos_block(tree: KinematicTree, qpos, joints, size: int):
    adr = np.asarray(tree.joint_qpos_adr)[joints]
    return pick(qpos, adr[:, None] + np.arange(size)[None, :])


def local_frames(tree: KinematicTree, qpos):
    """Each body's frame in its parent's frame after its joints, and each joint's frame
    before it acts: (p (nb, 3), Rl (nb, 3, 3), joint_p (nj, 3), joint_R (nj, 3, 3)).

    A hinge turns the body about its axis through its anchor a (body frame): (p, R) ->
    (p + R (a - Q a), R Q) with Q = exp((q - q0) axis~); a slide moves it along its axis;
    a ball turns it by the quaternion about the anchor; a free joint sets the frame.
    """
    nb, nj = tree.nb, tree.nj
    p, Rl = tree.body_pos, tree.body_rot
    q0 = tree.qpos0
    before_p, before_R, joint_rows = [], [], []
    for slot in _groups(tree):
        new_p, new_R, rows = [], [], []
        for jtype, bodies, joints in slot:
            pb, Rb = pick(p, bodies), pick(Rl, bodies)
            before_p.append(pb)
            before_R.append(Rb)
            joint_rows.append(joints)
            rows.append(bodies)
            if jtype == JointType.FREE:
                block = _qpos_block(tree, qpos, joints, 7)
                new_p.append(block[:, :3])
                new_R.append(quat_to_matrix(block[:, 3:]))
                continue
            anchor, axis = pick(tree.joint_pos, joints), pick(tree.joint_axis, joints)
            if jtype == JointType.SLIDE:
                adr = np.asarray(tree.joint_qpos_adr)[joints]
                shift = (pick(qpos, adr) - pick(q0, adr))[:, None] * axis
                new_p.append(pb + mv(Rb, shift))
                new_R.append(Rb)
                continue
            if jtype == JointType.HINGE:
                adr = np.asarray(tree.joint_qpos_adr)[joints]
                Q = so3_exp((pick(qpos, adr) - pick(q0, adr))[:, None] * axis)
            else:  # BALL
                Q = quat_to_matrix(_qpos_block(tree, qpos, joints, 4))
            new_p.append(pb + mv(Rb, anchor - mv(Q, anchor)))
            new_R.append(mm(Rb, Q))
        moved = np.concatenate(rows)
        still = np.setdiff1d(np.arange(nb), moved)
        p = assemble(nb, [(still, pick(p, still)), (moved, jnp.concatenate(new_p))])
        Rl = assemble(nb, [(still, pick(Rl, still)), (moved, jnp.concatenate(new_R))])
    if nj == 0:
        return p, Rl, jnp.zeros((0, 3), p.dtype), jnp.zeros((0, 3, 3), p.dtype)
    rows = np.concatenate(joint_rows)
    joint_p = assemble(nj, [(rows, jnp.concatenate(before_p))])
    joint_R = assemble(nj, [(rows, jnp.concatenate(before_R))])
    return p, Rl, joint_p, joint_R


def poses(tree: KinematicTree, qpos) -> TreePoses:
    """:class:`TreePoses` at ``qpos``: the local frames composed down the tree, one
    vectorised step per level (all bodies of one depth at once, each reading its parent
    from the level above by constant indices)."""
    nb = tree.nb
    p, Rl, joint_p, joint_R = local_frames(tree, qpos)
    dtype = p.dtype
    if scanned(tree):
        x, R = _composed_by_scan(tree, p, Rl)
        c = x + mv(R, tree.com)
        parent = np.asarray([nb if a == WORLD else a for a in tree.parent], dtype=int)
        S = _motion_subspaces(tree, x, R, parent, joint_p, joint_R)
        return checkpoint_name(TreePoses(x, R, c, S), TREE_POSES)
    # level arrays; row -1 of the one above is the world
    world_x, world_R = jnp.zeros((1, 3), dtype), jnp.eye(3, dtype=dtype)[None]
    above_x, above_R, above_index = world_x, world_R, {}
    xs, Rs, order = [], [], []
    for level in tree.levels:
        idx = np.asarray(level)
        n_above = above_x.shape[0]
        par = np.asarray([above_index.get(tree.parent[b], n_above - 1) for b in level])
        Rp = pick(above_R, par)
        x = pick(above_x, par) + mv(Rp, pick(p, idx))
        R = mm(Rp, pick(Rl, idx))
        xs.append(x)
        Rs.append(R)
        order.append(idx)
        above_index = {int(b): k for k, b in enumerate(level)}
        above_x = jnp.concatenate([x, world_x])
        above_R = jnp.concatenate([R, world_R])
    if nb == 0:
        x, R = jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype)
    else:
        rows = np.concatenate(order)
        x = assemble(nb, [(rows, jnp.concatenate(xs))])
        R = assemble(nb, [(rows, jnp.concatenate(Rs))])
    c = x + mv(R, tree.com)
    parent = np.asarray([nb if a == WORLD else a for a in tree.parent], dtype=int)
    S = _motion_subspaces(tree, x, R, parent, joint_p, joint_R)
    return checkpoint_name(TreePoses(x, R, c, S), TREE_POSES)


def _composed_by_scan(tree: KinematicTree, p, Rl):
    """(x, R) of every body: the local frames composed from the root, a level per scan step
    (:func:`jaxmbd.tree.sweeps.down`)."""
    tables = level_tables(tree)
    dtype = p.dtype
    root = (jnp.zeros(3, dtype), jnp.eye(3, dtype=dtype))

    def step(above, own):
        (x_p, R_p), (p_l, R_l) = above, own
        frame = (x_p + mv(R_p, p_l), mm(R_p, R_l))
        return frame, frame

    x, R = down(tables, step, (by_level(tables, p), by_level(tables, Rl)), root)
    return by_body(tables, x), by_body(tables, R)


def _motion_subspaces(tree: KinematicTree, x, R, parent, joint_p, joint_R):
    """S (nv, 6): hinge (a, anchor x a), slide (0, a), ball and free rotations about the
    body's own axes (MuJoCo's ``cdof``: the body's final frame), free translations (0, e_i)."""
    nv = tree.nv
    if nv == 0:
        return jnp.zeros((0, 6), x.dtype)
    xe = jnp.concatenate([x, jnp.zeros((1, 3), x.dtype)])
    Re = jnp.concatenate([R, jnp.eye(3, dtype=R.dtype)[None]])
    jb = np.asarray(tree.joint_body, dtype=int)
    jpar = parent[jb]
    # each joint's frame before it acts, in the world
    Rj = mm(pick(Re, jpar), joint_R)
    xj = pick(xe, jpar) + mv(pick(Re, jpar), joint_p)
    anchor = xj + mv(Rj, tree.joint_pos)
    axis = mv(Rj, tree.joint_axis)
    dof = np.asarray(tree.joint_dof_adr, dtype=int)
    types = np.asarray(tree.joint_type, dtype=int)
    parts = []
    for jtype in JointType:
        js = np.flatnonzero(types == jtype)
        if js.size == 0:
            continue
        if jtype == JointType.HINGE:
            first = pick(axis, js)
            parts.append(
                (dof[js], jnp.concatenate([first, cross(pick(anchor, js), pick(axis, js))], -1))
            )
        elif jtype == JointType.SLIDE:
            shift = jnp.zeros_like(pick(axis, js))
            parts.append((dof[js], jnp.concatenate([shift, pick(axis, js)], -1)))
        else:
            start = 3 if jtype == JointType.FREE else 0
            centre = pick(x, jb[js]) if jtype == JointType.FREE else pick(anchor, js)
            axes = jnp.swapaxes(pick(R, jb[js]), 1, 2)  # (n, 3 axes, 3)
            turn = jnp.concatenate([axes, cross(centre[:, None, :], axes)], -1)  # (n, 3, 6)
            rows = (dof[js][:, None] + start + np.arange(3)[None, :]).reshape(-1)
            parts.append((rows, turn.reshape(-1, 6)))
            if jtype == JointType.FREE:
                shift = jnp.concatenate([jnp.zeros((3, 3), x.dtype), jnp.eye(3, dtype=x.dtype)], -1)
                rows = (dof[js][:, None] + np.arange(3)[None, :]).reshape(-1)
                parts.append((rows, jnp.tile(shift, (js.size, 1))))
    return assemble(nv, parts)


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
    if scanned(tree):
        # V_pre: the parent's velocity and the dofs before d on its own body
        tables = level_tables(tree)
        own = body_totals(tree, moved)
        V = ancestor_sum(tree, own)
        dof_body = np.asarray(tree.dof_body, dtype=int)
        before = jnp.sum(padded(moved)[tables.preceding], axis=1)
        V_pre = (V - own)[dof_body] + before
        return V, cross_motion(V_pre, S)
    V = picked_sum(dof_ancestors(tree), moved)
    V_pre = picked_sum(preceding_dofs(tree), moved)
    return V, cross_motion(V_pre, S)


def dof_ancestor_sum(tree: KinematicTree, dof_values):
    """sum over the dofs that move body b (on b or an ancestor) of ``dof_values``
    (nv, ...), for each body b: (nb, ...)."""
    if scanned(tree):
        return ancestor_sum(tree, body_totals(tree, dof_values))
    return picked_sum(dof_ancestors(tree), dof_values)


def cross_motion(v, m):
    """v x m for motions (Featherstone eq. 2.31): (w x mw, w x mv + v x mw)."""
    w, u = halves(v)
    m_w, m_u = halves(m)
    return jnp.concatenate([cross(w, m_w), cross(w, m_u) + cross(u, m_w)], -1)


def cross_force(v, f):
    """v x* f for forces (Featherstone eq. 2.32): (w x n + v x f, w x f)."""
    w, u = halves(v)
    f_n, f_f = halves(f)
    return jnp.concatenate([cross(w, f_n) + cross(u, f_f), cross(w, f_f)], -1)


def integrate_positions(tree: KinematicTree, qpos, qvel, h):
    """qpos (+) h qvel on the joints' manifolds (MuJoCo's ``mj_integratePos``): hinge and
    slide add, ball and free turn their quaternion by the body-frame rotation h omega and
    a free joint's position moves by h v."""
    types = np.asarray(tree.joint_type, dtype=int)
    qadr = np.asarray(tree.joint_qpos_adr, dtype=int)
    vadr = np.asarray(tree.joint_dof_adr, dtype=int)
    parts = []
    scalar = np.flatnonzero((types == JointType.HINGE) | (types == JointType.SLIDE))
    if scalar.size:
        parts.append((qadr[scalar], pick(qpos, qadr[scalar]) + h * pick(qvel, vadr[scalar])))
    free = np.flatnonzero(types == JointType.FREE)
    if free.size:
        qi = (qadr[free][:, None] + np.arange(3)).reshape(-1)
        vi = (vadr[free][:, None] + np.arange(3)).reshape(-1)
        parts.append((qi, pick(qpos, qi) + h * pick(qvel, vi)))
    for jtype, q_off, v_off in ((JointType.BALL, 0, 0), (JointType.FREE, 3, 3)):
        js = np.flatnonzero(types == jtype)
        if js.size == 0:
            continue
        qi = qadr[js][:, None] + q_off + np.arange(4)
        vi = vadr[js][:, None] + v_off + np.arange(3)
        turned = rotate_by_quat_increment(pick(qpos, qi), h * pick(qvel, vi))
        parts.append((qi.reshape(-1), turned.reshape(-1)))
    if not parts:
        return qpos
    return assemble(tree.nq, parts)


def tangent_rates(tree: KinematicTree, increment, qvel):
    """d increment / dt of q(t) = q_0 (+) increment(t) (:func:`integrate_positions`) moving
    with ``qvel``: the identity on hinge, slide and translation dofs; on each ball's and
    free joint's rotation, J_r(theta)^-1 omega with theta that block of ``increment`` (the
    body-frame angular velocity of q_0 exp(theta), Mueller & Terze eq. 11): the
    Munthe-Kaas correction that keeps RK4 of fourth order on SO(3)."""
    types = np.asarray(tree.joint_type, dtype=int)
    vadr = np.asarray(tree.joint_dof_adr, dtype=int)
    blocks = [vadr[types == JointType.BALL], vadr[types == JointType.FREE] + 3]
    starts = np.concatenate(blocks)
    if starts.size == 0:
        return qvel
    idx = starts[:, None] + np.arange(3)
    turned = mv(so3_dexpinv(-pick(increment, idx)), pick(qvel, idx))
    rest = np.setdiff1d(np.arange(tree.nv), idx.reshape(-1))
    return assemble(tree.nv, [(rest, pick(qvel, rest)), (idx.reshape(-1), turned.reshape(-1))])
