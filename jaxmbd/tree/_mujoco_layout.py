"""MuJoCo's ``qpos``/``qvel`` from body states, through the model's kinematic tree.

Each tree body's frame is x = r - A com, R = A (:class:`~jaxmbd.tree.KinematicTree`: the
model's body frame sits at the centre of mass), its pose in its parent's frame
(R_p^T R, R_p^T (x - x_p)) and its velocity relative to the parent's frame
(omega_rel = omega - R^T R_p omega_p in its own frame; p_dot = R_p^T (x_dot - x_p_dot) -
omega_p x p in the parent's). A body's one joint reads off that relative motion, inverting
MuJoCo's ``mj_kinematics`` (Featherstone 2008, sec. 4.4, the joint transform X_J(q) and
motion subspace S: the rates are S^T of the relative twist for the 1-dof joints):

* hinge: Q = body_rot^T R_rel = exp((q - qpos0) axis~), q = qpos0 + atan2(axis . vee(Q),
  (tr Q - 1) / 2); q_dot = axis . omega_rel;
* slide: q = qpos0 + axis . body_rot^T (p - body_pos); q_dot = axis . body_rot^T p_dot;
* ball: the quaternion of Q; q_dot = omega_rel (body frame, MuJoCo's);
* free: (x, quaternion of R); (x_dot, omega in the body frame).

Over a time axis (the last leading axis of the states) hinge angles are unwrapped and
quaternion signs kept continuous, the first sample on the branch (sign) nearest the tree's
initial ``qpos``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..lie import so3_exp, vee
from ..lie.rotations import A_to_ep
from . import WORLD, JointType, KinematicTree

_TWO_PI = 2.0 * np.pi


def _mv(M, v):
    return jnp.einsum("...ij,...j->...i", M, v)


def _mtv(M, v):
    return jnp.einsum("...ji,...j->...i", M, v)


def _relative_motion(tree: KinematicTree, r, A, rdot, omega):
    """Each body's frame (x, R, x_dot, omega) and its pose (R_rel, p) and velocity
    (omega_rel in its frame, p_dot in the parent's) relative to its parent's frame."""
    com = tree.com
    x = r - _mv(A, com)
    x_dot = rdot - _mv(A, jnp.cross(omega, com))

    def extended(v, world):  # the world as row nb
        world = jnp.asarray(world, v.dtype)
        axis = v.ndim - world.ndim - 1
        pad = jnp.broadcast_to(world, (*v.shape[:axis], 1, *world.shape))
        return jnp.concatenate([v, pad], axis)

    parent = np.asarray([tree.nb if p == WORLD else p for p in tree.parent], dtype=int)
    x_p = extended(x, jnp.zeros(3))[..., parent, :]
    R_p = extended(A, jnp.eye(3))[..., parent, :, :]
    v_p = extended(x_dot, jnp.zeros(3))[..., parent, :]
    w_p = extended(omega, jnp.zeros(3))[..., parent, :]
    R_rel = jnp.einsum("...ji,...jk->...ik", R_p, A)
    p = _mtv(R_p, x - x_p)
    omega_rel = omega - _mtv(R_rel, w_p)
    p_dot = _mtv(R_p, x_dot - v_p) - jnp.cross(w_p, p)
    return x, x_dot, R_rel, p, omega_rel, p_dot


def _solve(M, b):
    """M^-1 b over leading axes (M (..., n, n), b (..., n))."""
    return jnp.linalg.solve(M, b[..., None])[..., 0]


def _unwrap(q, start, time: bool):
    """Angles (..., n) continuous along the time axis (-2 when ``time``), the first sample
    on the branch nearest ``start`` (n,)."""
    if time:
        q = jnp.unwrap(q, axis=-2)
        first = q[..., :1, :]
    else:
        first = q
    return q + _TWO_PI * jnp.round((start - first) / _TWO_PI)


def _continuous(quat, start, time: bool):
    """Unit quaternions (..., 4) with signs continuous along the time axis (-2 when
    ``time``), the first sample's sign that nearest ``start`` (4,)."""
    if time:
        step = jnp.sum(quat[..., 1:, :] * quat[..., :-1, :], -1)
        flips = jnp.cumprod(jnp.where(step < 0, -1.0, 1.0), axis=-1)
        ones = jnp.ones_like(flips[..., :1])
        quat = quat * jnp.concatenate([ones, flips], -1)[..., None]
        first = quat[..., :1, :]
    else:
        first = quat
    sign = jnp.where(jnp.sum(first * start, -1) < 0, -1.0, 1.0)
    return quat * sign[..., None]


def _hinge_angles(Q, axes):
    """The angles of hinges on mutually perpendicular unit ``axes`` (1 to 3, the file's
    order) whose rotations compose to Q = exp(t1 n1~) exp(t2 n2~) ... (..., 3, 3); with three
    the middle angle is taken in [-pi/2, pi/2] (a cardan decomposition)."""
    if not axes:
        return []
    if len(axes) == 1:
        (n,) = axes
        # vee reads Q's skew part, sin(t) n
        return [jnp.arctan2(vee(Q) @ n, 0.5 * (jnp.trace(Q, 0, -2, -1) - 1))]
    if len(axes) == 2:
        n1, n2 = axes
        u = _mv(Q, n2)  # R1 n2
        v = _mtv(Q, n1)  # R2^T n1
        return [jnp.arctan2(jnp.cross(n2, u) @ n1, u @ n2),
                jnp.arctan2(jnp.cross(v, n1) @ n2, v @ n1)]  # fmt: skip
    n1, n2, n3 = axes
    sigma = float(np.sign(n1 @ np.cross(n2, n3)))
    u = _mv(Q, n3)  # c2 c1 n3 - s c2 s1 n2 + s s2 n1
    v = _mtv(Q, n1)  # c2 c3 n1 - s c2 s3 n2 + s s2 n3
    return [
        jnp.arctan2(-sigma * (u @ n2), u @ n3),
        jnp.arctan2(sigma * (u @ n1), jnp.sqrt((u @ n2) ** 2 + (u @ n3) ** 2)),
        jnp.arctan2(-sigma * (v @ n2), v @ n1),
    ]


def _body_joints(tree: KinematicTree, b: int, R_rel, p, omega_rel, p_dot):
    """Body ``b``'s hinge and slide values (q - qpos0) and rates, each (...,) in the order
    of its joints: the hinge angles from the relative rotation, then the slides from the
    displacement left by them (a linear least-squares solve, exact: the slides' directions
    are independent), then the rates from the relative twist in the body frame,
    V = sum_i Ad(T_{i+1} ... T_k)^-1 S_i q_dot_i (Featherstone 2008, eq. 2.23 and 4.3)."""
    js = tree.body_joints[b]
    types = [tree.joint_type[j] for j in js]
    axes = [np.asarray(tree.joint_axis[j], dtype=np.float64) for j in js]
    anchors = [np.asarray(tree.joint_pos[j], dtype=np.float64) for j in js]
    hinges = [k for k, t in enumerate(types) if t == JointType.HINGE]
    B_R, B_p = np.asarray(tree.body_rot[b]), np.asarray(tree.body_pos[b])
    Q = jnp.einsum("ji,...jk->...ik", B_R, R_rel)
    angles = dict(zip(hinges, _hinge_angles(Q, [axes[k] for k in hinges]), strict=True))
    # each joint's rotation, the product of those before it, and the hinges' shifts
    eye = jnp.broadcast_to(jnp.eye(3), (*Q.shape[:-2], 3, 3))
    rot = [so3_exp(angles[k][..., None] * axes[k]) if k in angles else eye for k in range(len(js))]
    before, P = [], eye
    for k in range(len(js)):
        before.append(P)
        P = jnp.einsum("...ij,...jk->...ik", P, rot[k])
    f = _mtv(jnp.asarray(B_R), p - B_p)  # the translation of T_1 ... T_k
    for k in hinges:
        f = f - _mv(before[k], anchors[k] - _mv(rot[k], anchors[k]))
    values = dict(angles)
    slides = [k for k, t in enumerate(types) if t == JointType.SLIDE]
    if slides:
        M = jnp.stack([_mv(before[k], axes[k]) for k in slides], -1)  # (..., 3, ns)
        s = _solve(jnp.einsum("...ji,...jk->...ik", M, M), _mtv(M, f))
        values.update({k: s[..., i] for i, k in enumerate(slides)})
    # the rates: the columns Ad(G_i)^-1 S_i with G_i = T_{i+1} ... T_k
    v_rel = _mtv(R_rel, p_dot)  # the origin's velocity relative to the parent, body frame
    V = jnp.concatenate([omega_rel, v_rel], -1)
    cols, G_R, G_t = [None] * len(js), eye, jnp.zeros_like(f)
    for k in reversed(range(len(js))):
        n = jnp.broadcast_to(jnp.asarray(axes[k]), f.shape)
        if types[k] == JointType.HINGE:
            w, v = n, jnp.cross(jnp.asarray(anchors[k]), n)
        else:
            w, v = jnp.zeros_like(f), n
        cols[k] = jnp.concatenate([_mtv(G_R, w), _mtv(G_R, v + jnp.cross(w, G_t))], -1)
        t_k = (jnp.asarray(anchors[k]) - _mv(rot[k], anchors[k]) if types[k] == JointType.HINGE
               else values[k][..., None] * axes[k])  # fmt: skip
        G_t = t_k + _mv(rot[k], G_t)
        G_R = jnp.einsum("...ij,...jk->...ik", rot[k], G_R)
    J = jnp.stack(cols, -1)  # (..., 6, k)
    rates = _solve(jnp.einsum("...ji,...jk->...ik", J, J), _mtv(J, V))
    return [values[k] for k in range(len(js))], [rates[..., k] for k in range(len(js))]


def _refusal(tree: KinematicTree, b: int) -> str | None:
    js = tree.body_joints[b]
    types = [tree.joint_type[j] for j in js]
    if len(js) == 1:
        return None
    if any(t in (JointType.BALL, JointType.FREE) for t in types):
        return "a ball or free joint among several"
    axes = [np.asarray(tree.joint_axis[j]) for j, t in zip(js, types, strict=True)
            if t == JointType.HINGE]  # fmt: skip
    if len(axes) > 3 or any(abs(a @ c) > 1e-9 for i, a in enumerate(axes) for c in axes[:i]):
        return "hinges on axes that are not mutually perpendicular"
    slides = [np.asarray(tree.joint_axis[j]) for j, t in zip(js, types, strict=True)
              if t == JointType.SLIDE]  # fmt: skip
    if slides and np.linalg.matrix_rank(np.stack(slides), tol=1e-9) < len(slides):
        return "slides on dependent axes"
    return None


def mujoco_layout(model, r, A, rdot, omega):
    """MuJoCo's ``(qpos, qvel)`` of body states (``sol.r``, ``sol.A``, ``sol.rdot``,
    ``sol.omega``: (..., nb, 3), (..., nb, 3, 3), (..., nb, 3), body-frame (..., nb, 3)) of
    a model read from a file (``model.tree``). A body's joints are one joint, or hinges on
    mutually perpendicular axes (three: the middle angle in [-pi/2, pi/2]) and slides on
    independent axes. With leading axes, the last one is time: angles and quaternion
    signs continuous along it (see the module docstring). Returns (..., nq) and (..., nv)."""
    tree = model.tree
    if not isinstance(tree, KinematicTree):
        raise ModelError(f"model '{model.name}': no kinematic tree (model.tree); MuJoCo's "
                         "layout needs a model read from an MJCF or URDF file")  # fmt: skip
    return tree_layout(tree, r, A, rdot, omega, name=model.name)


def tree_layout(tree: KinematicTree, r, A, rdot, omega, *, name: str = ""):
    """:func:`mujoco_layout` of a kinematic tree's bodies (``name``: the model's, for
    messages)."""
    refused = {tree.body_names[b]: why for b in range(tree.nb)
               if (why := _refusal(tree, b)) is not None}  # fmt: skip
    if refused:
        raise ModelError(
            f"model '{name}': MuJoCo's qpos is not read from body states for the joints "
            f"of {refused}"
        )
    r, A, rdot, omega = (jnp.asarray(v) for v in (r, A, rdot, omega))
    time = r.ndim > 2
    x, x_dot, R_rel, p, omega_rel, p_dot = _relative_motion(tree, r, A, rdot, omega)
    lead = r.shape[:-2]
    qpos = jnp.zeros((*lead, tree.nq), r.dtype)
    qvel = jnp.zeros((*lead, tree.nv), r.dtype)
    qadr, vadr = tree.joint_qpos_adr, tree.joint_dof_adr
    q0, q_init = tree.qpos0, tree.qpos_init
    hinge_adr, hinge_values, quats = [], [], []
    for b, js in enumerate(tree.body_joints):
        jtype = tree.joint_type[js[0]]
        if jtype == JointType.FREE:
            a, d = qadr[js[0]], vadr[js[0]]
            qpos = qpos.at[..., a : a + 3].set(x[..., b, :])
            quats.append((a + 3, A[..., b, :, :]))
            qvel = qvel.at[..., d : d + 3].set(x_dot[..., b, :])
            qvel = qvel.at[..., d + 3 : d + 6].set(omega[..., b, :])
            continue
        if jtype == JointType.BALL:
            B_R = tree.body_rot[b]
            quats.append((qadr[js[0]], jnp.einsum("ji,...jk->...ik", B_R, R_rel[..., b, :, :])))
            qvel = qvel.at[..., vadr[js[0]] : vadr[js[0]] + 3].set(omega_rel[..., b, :])
            continue
        values, rates = _body_joints(
            tree, b, R_rel[..., b, :, :], *(v[..., b, :] for v in (p, omega_rel, p_dot))
        )
        for j, value, rate in zip(js, values, rates, strict=True):
            qvel = qvel.at[..., vadr[j]].set(rate)
            if tree.joint_type[j] == JointType.HINGE:
                hinge_adr.append(qadr[j])
                hinge_values.append(q0[qadr[j]] + value)
            else:
                qpos = qpos.at[..., qadr[j]].set(q0[qadr[j]] + value)
    if hinge_adr:
        adr = np.asarray(hinge_adr)
        angles = _unwrap(jnp.stack(hinge_values, -1), q_init[adr], time)
        qpos = qpos.at[..., adr].set(angles)
    for a, R in quats:
        idx = np.arange(a, a + 4)
        qpos = qpos.at[..., idx].set(_continuous(A_to_ep(R), q_init[idx], time))
    return qpos, qvel
