"""Joint definitions and joint coordinates: out of the body poses, and into them.

Every joint of the builder (revolute, translational, cylindrical, universal, spherical,
planar) keeps, besides its constraint rows, a **joint frame** on each of its two bodies: a
point ``s_bar_i`` and axes ``frame_i`` (columns x, y, z) fixed in body i, the same on body j,
placed so that the two frames coincide at the pose the joint was drawn in (the builder's
pose). With the global frames ``F_i = A_i frame_i``, ``F_j = A_j frame_j`` and points
``p_i = r_i + A_i s_bar_i``, ``p_j = r_j + A_j s_bar_j``, the relative rotation
``R = F_i^T F_j`` (the identity where drawn) and translation ``d = F_i^T (p_j - p_i)`` give
the coordinates (j relative to i, right-handed, angles in radians):

| kind | q | qdot |
|---|---|---|
| revolute | the angle about the joint axis z, (T,) | its rate |
| translational | the slide d_z along the axis, (T,) | its rate |
| cylindrical | (slide d_z, angle about z), (T, 2) | their rates |
| universal | (angle_1, angle_2), R = Rx(angle_1) Ry(angle_2), (T, 2) | their rates |
| spherical | unit quaternion (w, x, y, z) of R, (T, 4) | angular velocity, (T, 3) |
| planar | (d_x, d_y, angle about the normal z), (T, 3) | their rates |

The universal joint's frame has x = ``axis_i`` (on body i) and y = ``axis_j`` (on body j).
The spherical joint's ``frame_j`` is body j's own axes, so R is j's rotation from its drawn
orientation, in j's frame, and the rate is j's angular velocity relative to i in j's frame
(MuJoCo's ball joint).

Scalar coordinates are reported as ``q = offset + sign * (geometric value)``: ``offset`` is 0
and ``sign`` +1 for the builder's joints; joints loaded from MJCF carry MuJoCo's ``qpos0``
(the joint's ``ref``) as the offset and the sign of each MuJoCo axis against the joint's, so
that ``q`` is MuJoCo's ``qpos`` (see :mod:`jaxmbd.mjcf`). ``qdot`` is the exact time
derivative of ``q`` (forward-mode derivative of the coordinate map along the body
velocities), except for the spherical joint, whose rate is the angular velocity (MuJoCo's
ball ``qvel``). Angles are unwrapped over time (continuous over full revolutions), the first
sample on the branch nearest ``q_start`` (the value set with
:meth:`~jaxmbd.ModelBuilder.set_joint_state`, else the value where drawn); the quaternion's
sign is kept continuous in time, starting on the side of ``q_start``. Unwrapping assumes less
than half a turn between saved rows (``save_every``).

Into the poses: :func:`place_joint_states` sets an initial state in joint coordinates
(``ModelBuilder.set_joint_state``). Each set joint places its child body (the one farther from
the ground in the body graph's spanning tree, :mod:`jaxmbd.model._topology`) relative to its parent
so that the joint reads (q, qdot); the child's subtree moves with it rigidly and keeps its
own motion relative to the child. Such placements of different joints commute (each changes
only its own joint's relative state), so the result does not depend on their order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.host_arrays import device_array
from ..compiled.jit import jit
from ..compiled.small import mm, mtm, mv, row_vec_mat
from ..errors import ModelError
from ..lie import hat
from ..lie.rotations import A_to_ep
from ._topology import body_graph

_TWO_PI = 2.0 * math.pi


class JointDefinition(eqx.Module):
    """A joint's frames on its two bodies and its coordinate convention (see the module).

    Body indices are model indices, the ground is ``nb``. ``offset`` and ``sign``: one per
    scalar coordinate (none for spherical). ``q_start``: the first sample's angles are
    reported on the branch nearest to it (the quaternion on its side).
    """

    name: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    body_i: int = eqx.field(static=True)
    body_j: int = eqx.field(static=True)
    s_bar_i: jax.Array  # (3,) joint point on body i, body frame
    s_bar_j: jax.Array  # (3,)
    frame_i: jax.Array  # (3, 3) joint axes (columns) on body i, body frame
    frame_j: jax.Array  # (3, 3)
    offset: jax.Array  # (n,) q where the frames coincide
    q_start: jax.Array  # (nq,) branch of the first sample
    sign: tuple[int, ...] = eqx.field(static=True, default=())  # (n,) +1 or -1


class JointCoordinates(eqx.Module):
    """Coordinates of one joint over time: ``q``, ``qdot`` (leading axes of the Solution,
    then time; one-coordinate joints have no last axis), and for a spherical joint the
    rotation vector (angle times axis, in j's frame) of its quaternion, ``rotation_vector``
    (..., T, 3), continuous with the quaternion (angles up to 2 pi)."""

    q: jax.Array
    qdot: jax.Array
    rotation_vector: jax.Array | None = None
    name: str = eqx.field(static=True, default="")
    kind: str = eqx.field(static=True, default="")


# ----------------------------------------------------------------------------- out


def _mv(M, v):
    return (M @ v[..., None])[..., 0]


def _t(M):
    return jnp.swapaxes(M, -1, -2)


def _relative(defn: JointDefinition, r_i, A_i, r_j, A_j):
    """R = F_i^T F_j and d = F_i^T (p_j - p_i); the poses have a time axis before their
    own, the definition's arrays may carry the leading (batch) axes."""
    frame_i, frame_j = defn.frame_i[..., None, :, :], defn.frame_j[..., None, :, :]
    s_i, s_j = defn.s_bar_i[..., None, :], defn.s_bar_j[..., None, :]
    # elementwise 3x3 products (jaxmbd.compiled.small), not ``@``: the joint forces evaluate this
    # map inside the time step, where a dot keeps XLA from compiling the step as one loop
    F_i = mm(A_i, frame_i)
    R = mtm(F_i, mm(A_j, frame_j))
    d = row_vec_mat(r_j + mv(A_j, s_j) - r_i - mv(A_i, s_i), F_i)
    return R, d


def _angle_z(R):
    """Angle of the rotation about z (from the in-plane block, robust to small errors)."""
    return jnp.arctan2(R[..., 1, 0] - R[..., 0, 1], R[..., 0, 0] + R[..., 1, 1])


# The coordinates measured from the drawn pose (before offset and sign), per kind.


def _revolute_geometric(R, d):
    return _angle_z(R)[..., None]


def _translational_geometric(R, d):
    return d[..., 2:3]


def _cylindrical_geometric(R, d):
    return jnp.stack([d[..., 2], _angle_z(R)], axis=-1)


def _universal_geometric(R, d):  # R = Rx(a) Ry(b): R[2,1] = sin a, R[1,1] = cos a, R[0,2] = sin b
    a = jnp.arctan2(R[..., 2, 1], R[..., 1, 1])
    return jnp.stack([a, jnp.arctan2(R[..., 0, 2], R[..., 0, 0])], axis=-1)


def _planar_geometric(R, d):
    return jnp.stack([d[..., 0], d[..., 1], _angle_z(R)], axis=-1)


def _geometric(kind, R, d):
    """The coordinates of joint kind ``kind`` (a name or a :class:`JointKind`) measured
    from the drawn pose (before offset and sign)."""
    spec = joint_kind(kind)
    if spec.geometric is None:
        raise ValueError(f"no scalar coordinate map for joint kind {spec.name!r}")
    return spec.geometric(R, d)


def _body_state(k: int, r, A, rdot, omega):
    """Pose and velocity (rdot, body-frame omega) of body k over time; k = nb: the ground."""
    if k < r.shape[-2]:
        return r[..., k, :], A[..., k, :, :], rdot[..., k, :], omega[..., k, :]
    zero = jnp.zeros_like(r[..., 0, :])
    eye = jnp.broadcast_to(jnp.eye(3, dtype=A.dtype), A[..., 0, :, :].shape)
    return zero, eye, zero, zero


def _unwrapped(q, angles, q_start):
    """``q`` (..., T, n) with its angle columns unwrapped over time, the first sample on the
    branch nearest ``q_start`` (..., n)."""
    idx = np.asarray(angles)
    a = jnp.unwrap(q[..., idx], axis=-2)
    shift = _TWO_PI * jnp.round((q_start[..., idx] - a[..., 0, :]) / _TWO_PI)
    return q.at[..., idx].set(a + shift[..., None, :])


def _continuous_quaternion(p, q_start):
    """Quaternions (..., T, 4) with the sign continuous in time, starting on the side of
    ``q_start`` (..., 4)."""
    flips = jnp.where(jnp.sum(p[..., 1:, :] * p[..., :-1, :], axis=-1) < 0, -1.0, 1.0)
    first = jnp.where(jnp.sum(p[..., 0, :] * q_start, axis=-1) < 0, -1.0, 1.0)
    signs = jnp.concatenate([jnp.ones_like(p[..., :1, 0]), jnp.cumprod(flips, axis=-1)], -1)
    return p * (signs * first[..., None])[..., None]


def rotation_vector(p):
    """Angle times axis of quaternions (..., 4) (w, x, y, z): 2 atan2(|v|, w) v / |v|."""
    w, v = p[..., 0], p[..., 1:]
    n = jnp.sqrt(jnp.sum(v * v, axis=-1))
    small = n < 1e-8
    factor = jnp.where(small, 2.0 / w, 2.0 * jnp.arctan2(n, w) / jnp.where(small, 1.0, n))
    return v * factor[..., None]


def joint_coordinates(defn: JointDefinition, r, A, rdot, omega) -> JointCoordinates:
    """Coordinates of the joint ``defn`` over a trajectory: ``r`` (..., T, nb, 3), ``A``
    (..., T, nb, 3, 3), ``rdot`` and the body-frame ``omega`` (..., T, nb, 3), ground
    excluded (as in a :class:`~jaxmbd.Solution`). Works under jit, grad and vmap."""
    r, A, rdot, omega = (jnp.asarray(x) for x in (r, A, rdot, omega))
    r_i, A_i, v_i, w_i = _body_state(defn.body_i, r, A, rdot, omega)
    r_j, A_j, v_j, w_j = _body_state(defn.body_j, r, A, rdot, omega)
    q_start = jnp.asarray(defn.q_start)
    spec = joint_kind(defn.kind)
    if spec.quaternion:
        R, _ = _relative(defn, r_i, A_i, r_j, A_j)
        p = _continuous_quaternion(A_to_ep(R), q_start)
        # relative angular velocity in j's joint frame: frame_j^T (w_j - A_j^T A_i w_i)
        rel = w_j - _mv(_t(A_j) @ A_i, w_i)
        qdot = _mv(_t(defn.frame_j[..., None, :, :]), rel)
        return JointCoordinates(p, qdot, rotation_vector(p), defn.name, defn.kind)

    def geometric(r_i, A_i, r_j, A_j):
        return spec.geometric(*_relative(defn, r_i, A_i, r_j, A_j))

    g, gdot = jax.jvp(geometric, (r_i, A_i, r_j, A_j), (v_i, A_i @ hat(w_i), v_j, A_j @ hat(w_j)))
    sign = jnp.asarray(defn.sign, dtype=g.dtype)
    q = jnp.asarray(defn.offset)[..., None, :] + sign * g
    qdot = sign * gdot
    if spec.angles:
        q = _unwrapped(q, spec.angles, q_start)
    if spec.nq == 1:
        q, qdot = q[..., 0], qdot[..., 0]
    return JointCoordinates(q, qdot, None, defn.name, defn.kind)


def _pair_state(k: int, r, A, rdot, omega):
    """Body k's pose and velocity at one instant (numpy); k = nb: the ground, at rest."""
    if k < len(r):
        return r[k], A[k], rdot[k], omega[k]
    return np.zeros(3), np.eye(3), np.zeros(3), np.zeros(3)


#: :func:`joint_coordinates` compiled: build-time values go through one program per joint
#: kind and sign (cached across joints and models, and on disk) rather than op by op.
_compiled_coordinates = jit(joint_coordinates)


def joint_state_at(defn: JointDefinition, r, A, rdot, omega) -> tuple[np.ndarray, np.ndarray]:
    """(q, qdot) of joint ``defn`` at one instant of the body states ``r`` (nb, 3), ``A``
    (nb, 3, 3), ``rdot`` and the body-frame ``omega`` (nb, 3) (ground excluded), as numpy:
    :func:`joint_coordinates` of the joint's two bodies only, so that every joint of one kind
    and sign shares one compiled program (the builder's and the MJCF importer's initial
    states)."""
    pair = [_pair_state(k, *(np.asarray(x) for x in (r, A, rdot, omega)))
            for k in (defn.body_i, defn.body_j)]  # fmt: skip
    states = [np.stack([p[n] for p in pair])[None] for n in range(4)]
    local = JointDefinition(
        name="", kind=defn.kind, body_i=0, body_j=1, s_bar_i=defn.s_bar_i,
        s_bar_j=defn.s_bar_j, frame_i=defn.frame_i, frame_j=defn.frame_j, offset=defn.offset,
        q_start=defn.q_start, sign=defn.sign,
    )  # fmt: skip
    out = _compiled_coordinates(local, *states)
    return np.asarray(out.q)[0], np.asarray(out.qdot)[0]


class JointCoordinatesMap(Mapping):
    """``sol.joints``: a read-only mapping from joint names to their
    :class:`JointCoordinates`, computed from the Solution's body states when read."""

    def __init__(self, definitions: Sequence[JointDefinition], states):
        self._definitions = {d.name: d for d in definitions}
        self._states = states  # (r, A, rdot, omega)

    def __getitem__(self, name: str) -> JointCoordinates:
        try:
            defn = self._definitions[name]
        except KeyError:
            known = list(self._definitions)
            raise KeyError(
                f"no joint {name!r}; the joints with coordinates are {known}"
                if known
                else f"no joint {name!r}; this Solution has no joint definitions (models "
                "built with ModelBuilder's joints or loaded from MJCF have them; a Solution "
                "read from a file does not)"
            ) from None
        return joint_coordinates(defn, *self._states)

    def __iter__(self) -> Iterator[str]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{n!r}: {d.kind}" for n, d in self._definitions.items())
        return f"JointCoordinatesMap({{{kinds}}})"


# ----------------------------------------------------------------------------- in


def _rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def quaternion_matrix(p) -> np.ndarray:
    """Rotation matrix of a unit quaternion (w, x, y, z) (as
    :func:`jaxmbd.lie.rotations.ep_to_A`)."""
    w, x, y, z = p
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


# R, d and their rates (R' R^T = hat(Omega), d' = dd/dt, both in F_i) per kind, for
# geometric coordinates g and rates gdot (numpy).
_ZERO, _EX, _EZ = np.zeros(3), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])


def _revolute_motion(g, gdot):
    return _rz(g[0]), _ZERO, _EZ * gdot[0], _ZERO


def _translational_motion(g, gdot):
    return np.eye(3), _EZ * g[0], _ZERO, _EZ * gdot[0]


def _cylindrical_motion(g, gdot):
    return _rz(g[1]), _EZ * g[0], _EZ * gdot[1], _EZ * gdot[0]


def _universal_motion(g, gdot):
    omega = _EX * gdot[0] + _rx(g[0]) @ np.array([0.0, gdot[1], 0.0])
    return _rx(g[0]) @ _ry(g[1]), _ZERO, omega, _ZERO


def _planar_motion(g, gdot):
    d = np.array([g[0], g[1], 0.0])
    return _rz(g[2]), d, _EZ * gdot[2], np.array([gdot[0], gdot[1], 0.0])


def _spherical_motion(g, gdot):  # gdot: angular velocity in F_j
    R = quaternion_matrix(g)
    return R, _ZERO, R @ gdot, _ZERO


def relative_motion(kind, g, gdot):
    """R, d and their rates for geometric coordinates ``g`` and rates ``gdot`` of a joint of
    kind ``kind`` (a name or a :class:`JointKind`): the relative angular velocity Omega
    (R' R^T = hat(Omega)) and d' = dd/dt, both in F_i."""
    g, gdot = np.asarray(g, dtype=np.float64), np.asarray(gdot, dtype=np.float64)
    return tuple(np.array(x) for x in joint_kind(kind).relative_motion(g, gdot))


def _child_state(defn: JointDefinition, child_is_j: bool, parent, motion):
    """Pose and velocity (r, A, rdot, global omega) of the joint's child from its parent's
    and the relative motion (R, d, Omega, d') of j relative to i in F_i."""
    R, d, Omega, d_rate = motion
    r_p, A_p, v_p, w_p = parent
    s_i, s_j = np.asarray(defn.s_bar_i), np.asarray(defn.s_bar_j)
    frame_i, frame_j = np.asarray(defn.frame_i), np.asarray(defn.frame_j)
    if child_is_j:
        F_i = A_p @ frame_i
        p_i = r_p + A_p @ s_i
        A_c = F_i @ R @ frame_j.T
        p_j = p_i + F_i @ d
        r_c = p_j - A_c @ s_j
        w_c = w_p + F_i @ Omega
        pdot_j = v_p + np.cross(w_p, p_j - r_p) + F_i @ d_rate
        return r_c, A_c, pdot_j + np.cross(w_c, r_c - p_j), w_c
    F_j = A_p @ frame_j
    p_j = r_p + A_p @ s_j
    F_i = F_j @ R.T
    A_c = F_i @ frame_i.T
    p_i = p_j - F_i @ d
    r_c = p_i - A_c @ s_i
    w_c = w_p - F_i @ Omega
    pdot_j = v_p + np.cross(w_p, p_j - r_p)
    pdot_i = pdot_j - np.cross(w_c, F_i @ d) - F_i @ d_rate
    return r_c, A_c, pdot_i + np.cross(w_c, r_c - p_i), w_c


def move_subtree(state, child: int, subtree: Sequence[int], new) -> None:
    """Move ``child`` to the pose and velocity ``new`` (r, A, rdot, global omega) and its
    ``subtree`` rigidly with it, each body keeping its motion relative to the child. ``state``
    (r, A, rdot, global omega; numpy, one row per body) is changed in place."""
    r, A, v, w = state
    r_n, A_n, v_n, w_n = (np.asarray(x, dtype=np.float64) for x in new)
    T = A_n @ A[child].T
    idx = np.asarray(sorted(set(subtree) | {child}), dtype=int)
    offset = r[idx] - r[child]
    rel_v = v[idx] - v[child] - np.cross(w[child], offset)
    rel_w = w[idx] - w[child]
    r[idx] = r_n + offset @ T.T
    A[idx] = T @ A[idx]
    v[idx] = v_n + np.cross(w_n, r[idx] - r_n) + rel_v @ T.T
    w[idx] = w_n + rel_w @ T.T


def geometric_from_user(defn: JointDefinition, q) -> np.ndarray:
    """The geometric coordinates of a q in the joint's convention (q = offset + sign g)."""
    q = np.asarray(q, dtype=np.float64)
    if joint_kind(defn.kind).quaternion:
        return q / np.linalg.norm(q)
    return np.asarray(defn.sign, dtype=np.float64) * (q - np.asarray(defn.offset))


def _children(parent: Sequence[int], nb: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {k: [] for k in range(nb + 1)}
    for b, p in enumerate(parent):
        if p >= 0:
            out[p].append(b)
    return out


def _descendants(children, body: int) -> list[int]:
    out, stack = [], [body]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(children[node])
    return out


def _depth(parent: Sequence[int], nb: int, body: int) -> int:
    depth = 0
    while 0 <= body < nb:
        body, depth = parent[body], depth + 1
    return depth


def place_joint_states(model, states: Mapping[str, tuple]):
    """The model's initial state with the joint states ``states`` ({joint name: (q, qdot)};
    None keeps the drawn relative pose, or the bodies' relative velocity) set, parent joints
    first: returns (r0, A0, rdot0, omega0, joints) with each set joint's ``q_start`` the
    value set. Raises :class:`~jaxmbd.ModelError` for a joint that closes a loop."""
    nb = model.nb
    graph = body_graph(nb, model.constraint_bodies)
    children = _children(graph.parent, nb)
    defs = {d.name: d for d in model.joints}
    r = np.concatenate([np.asarray(model.r0), np.zeros((1, 3))])
    A = np.concatenate([np.asarray(model.A0), np.eye(3)[None]])
    v = np.concatenate([np.asarray(model.rdot0), np.zeros((1, 3))])
    w_bar = np.concatenate([np.asarray(model.omega0), np.zeros((1, 3))])
    w = np.einsum("bij,bj->bi", A, w_bar)
    state = (r, A, v, w)
    placed = []
    for name in states:
        defn = defs[name]
        i, j = defn.body_i, defn.body_j
        if not graph.is_tree_pair(i, j):
            raise ModelError(_loop_message(model, graph, defn))
        child = graph.child_of(i, j)
        placed.append((_depth(graph.parent, nb, child), name, child))
    starts = {}
    for _, name, child in sorted(placed, key=lambda item: item[0]):
        defn, (q, qdot) = defs[name], states[name]
        spec = joint_kind(defn.kind)
        child_is_j = child == defn.body_j
        parent = defn.body_i if child_is_j else defn.body_j
        if q is None:  # the drawn relative pose
            q = spec.drawn_q(defn.offset)
        if qdot is None:  # the bodies' relative velocity now (as drawn: others keep it)
            qdot = joint_state_at(defn, *(x[:nb] for x in (r, A, v, w_bar)))[1]
        g = geometric_from_user(defn, q)
        g_rate = np.asarray(qdot, dtype=np.float64).reshape(-1)
        if not spec.quaternion:
            g_rate = np.asarray(defn.sign, dtype=np.float64) * g_rate
        motion = relative_motion(spec, g, g_rate)
        new = _child_state(defn, child_is_j, tuple(x[parent] for x in state), motion)
        move_subtree(state, child, _descendants(children, child), new)
        w_bar[:] = np.einsum("bji,bj->bi", A, w)
        starts[name] = g if spec.quaternion else np.asarray(q, dtype=np.float64)
    joints = tuple(
        eqx.tree_at(lambda d: d.q_start, d, device_array(np.asarray(starts[d.name]).reshape(-1)))
        if d.name in starts
        else d
        for d in model.joints
    )
    return r[:nb], A[:nb], v[:nb], w_bar[:nb], joints


def _loop_message(model, graph, defn: JointDefinition) -> str:
    i, j = defn.body_i, defn.body_j
    pair = {(i, j), (j, i)}
    loop = next(
        (nodes for nodes, closing in zip(graph.loops, graph.closing_pairs, strict=True)
         if closing in pair),
        (),
    )  # fmt: skip
    edges = {frozenset(e) for e in zip(loop, loop[1:] + loop[:1], strict=True)}
    tree_joints = [
        d.name
        for d in model.joints
        if frozenset((d.body_i, d.body_j)) in edges
        and graph.is_tree_pair(d.body_i, d.body_j)
        and d.name != defn.name
    ]
    suggestion = (
        f"set a tree joint of the loop instead ({', '.join(repr(n) for n in tree_joints)})"
        if tree_joints
        else "set a joint of the spanning tree instead"
    )
    return (
        f"set_joint_state: joint '{defn.name}' between '{model.body_label(i)}' and "
        f"'{model.body_label(j)}' closes a loop (its bodies are already joined through the "
        f"joints added before it); {suggestion}: the consistent start then closes the loop"
    )


# ----------------------------------------------------------------------------- the records


@dataclass(frozen=True)
class JointKind:
    """One joint kind with coordinates (the table of the module docstring).

    ``nq``, ``nv``: the sizes of q and qdot; ``angles``: which entries of q are angles
    (unwrapped over time); ``coordinate_names``: what each entry of q is;
    ``geometric(R, d)``: q from the relative rotation and translation (before offset and
    sign), None for a quaternion joint; ``relative_motion(g, gdot)``: (R, d, Omega, d')
    back from the coordinates (numpy); ``quaternion``: q is a unit quaternion and qdot an
    angular velocity (no offset, no sign); ``axis_last``: the frame's z is the joint axis,
    listed first in the joint's reaction axes; ``views``: (suffix, one-coordinate kind) of
    each coordinate that joint forces and actuators act on as ``"<joint>.<suffix>"`` (the
    cylindrical joint's slide and angle)."""

    name: str
    nq: int
    nv: int
    angles: tuple[int, ...]
    coordinate_names: tuple[str, ...]
    geometric: Callable | None
    relative_motion: Callable
    quaternion: bool = False
    axis_last: bool = False
    views: tuple[tuple[str, JointKind], ...] = ()

    @property
    def scalar_size(self) -> int:
        """Number of scalar coordinates that take an offset and a sign."""
        return 0 if self.quaternion else self.nq

    @property
    def one_coordinate(self) -> bool:
        """A single scalar coordinate (what actuators, limits and joint forces act on)."""
        return self.scalar_size == 1

    @property
    def angular(self) -> bool:
        """A one-coordinate joint whose coordinate is an angle."""
        return self.one_coordinate and self.angles == (0,)

    def drawn_q(self, offset) -> np.ndarray:
        """q at the drawn pose: the identity quaternion, else the offset."""
        if self.quaternion:
            return np.array([1.0, 0.0, 0.0, 0.0])
        return np.asarray(offset)


REVOLUTE = JointKind("revolute", 1, 1, (0,), ("angle",), _revolute_geometric,
                     _revolute_motion, axis_last=True)  # fmt: skip
TRANSLATIONAL = JointKind("translational", 1, 1, (), ("slide",), _translational_geometric,
                          _translational_motion, axis_last=True)  # fmt: skip
# the slide is the translational joint's d_z and the angle the revolute joint's angle_z of
# the same frames, so each view with offset[k] and sign[k] is exactly the k-th coordinate
CYLINDRICAL = JointKind("cylindrical", 2, 2, (1,), ("slide", "angle"), _cylindrical_geometric,
                        _cylindrical_motion, axis_last=True,
                        views=(("slide", TRANSLATIONAL), ("angle", REVOLUTE)))  # fmt: skip
UNIVERSAL = JointKind("universal", 2, 2, (0, 1), ("angle_1", "angle_2"), _universal_geometric,
                      _universal_motion)  # fmt: skip
SPHERICAL = JointKind("spherical", 4, 3, (), ("w", "x", "y", "z"), None, _spherical_motion,
                      quaternion=True)  # fmt: skip
PLANAR = JointKind("planar", 3, 3, (2,), ("x", "y", "angle"), _planar_geometric,
                   _planar_motion, axis_last=True)  # fmt: skip

#: Every joint kind with coordinates, by name (the builder's and the files' strings).
JOINT_KINDS: dict[str, JointKind] = {
    spec.name: spec for spec in (REVOLUTE, TRANSLATIONAL, CYLINDRICAL, UNIVERSAL, SPHERICAL, PLANAR)
}
#: The kinds with one scalar coordinate (what joint forces, limits and actuators act on).
ONE_COORDINATE_KINDS = tuple(spec for spec in JOINT_KINDS.values() if spec.one_coordinate)
#: The sizes of q and qdot of each kind.
SIZES = {name: (spec.nq, spec.nv) for name, spec in JOINT_KINDS.items()}
#: Which entries of q are angles (unwrapped over time).
ANGLES = {name: spec.angles for name, spec in JOINT_KINDS.items()}
#: What each entry of q is.
COORDINATE_NAMES = {name: spec.coordinate_names for name, spec in JOINT_KINDS.items()}


def joint_kind(kind) -> JointKind:
    """The record of a joint kind given by name (or the record itself)."""
    if isinstance(kind, JointKind):
        return kind
    try:
        return JOINT_KINDS[kind]
    except KeyError:
        raise ValueError(f"no coordinate map for joint kind {kind!r}; known: "
                         f"{list(JOINT_KINDS)}") from None  # fmt: skip


def scalar_size(kind) -> int:
    """Number of scalar coordinates that take an offset and a sign (none for spherical)."""
    return joint_kind(kind).scalar_size
