"""The kinematic tree of a model built in code (:class:`~jaxmbd.ModelBuilder`) or read from
jaxmbd's own files: its joints as MuJoCo's hinges, slides and balls, in the joints' own
coordinates.

The spanning tree of the body-joint graph (bodies are nodes, the ground is the world, each
joint is an edge) is grown breadth first from the ground, each body's joints taken in model
order; a part not connected to the ground is rooted at its first body, which gets a free
joint (6 dofs). A joint whose two bodies are already in the tree closes a loop: its rows,
the rows of no joint (raw GCONs) and the drivers' rows stay exact constraints
(``loop_rows``).

Tree body k is model body k with the model's body frame (at the centre of mass, so
``com = 0``). A tree joint from parent P to child C becomes the tree joints below, whose
coordinates equal the joint's (``sol.joints[name].q``, :mod:`jaxmbd.model.joints`:
``q = offset + sign * g``): each hinge or slide has ``qpos0 = offset`` and its axis times
``sign``, so that it moves by ``sign (q - offset) = g``. With frames (s_i, F_i) on body i
and (s_j, F_j) on body j, coinciding where ``g = 0``, the child's placement in its parent
is (s_P, F_P) o (s_C, F_C)^-1 and its joint axes are F_C's columns (negated when the
child is body i, which moves by the inverse relative motion):

| joint | child j | child i |
|---|---|---|
| revolute | hinge z | hinge -z |
| translational | slide z | slide -z |
| cylindrical | slide z (``.slide``), hinge z (``.angle``) | the same, -z |
| universal | hinge x (``.angle_1``), hinge y (``.angle_2``) | hinge -y, hinge -x |
| planar | slide x (``.x``), slide y (``.y``), hinge z (``.angle``) | hinge -z, slides -x, -y |
| spherical | ball | ball |

The ball's quaternion is the child's rotation from its placement, in its own frame
(MuJoCo's ball joint): the spherical joint's own quaternion where the child is body j and
the joint frame on it is the body's axes (as the builder draws it); where the child is body
i it is the inverse relative rotation, seen in F_i.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.jit import RUN_ONCE, jit, run_now
from ..lie.rotations import A_to_ep
from ..model import Model
from ..model.joints import JointDefinition, joint_coordinates, joint_kind
from ..tree import WORLD, JointType, KinematicTree, assemble
from ._gcon_joints import recognised_joint


class ModelTree(NamedTuple):
    """A model's kinematic tree and what stays outside it.

    ``tree``: the :class:`~jaxmbd.tree.KinematicTree` (body k is model body k);
    ``loop_rows``: the model's constraint rows that the tree does not carry (joints that
    close loops, rows of no joint, drivers), in row order; ``tree_joints``: the names of the
    joints on the tree's edges; ``joints``: the joint definitions the tree was read from
    (the model's, and those recognised in rows written at GCON level, zero at the initial
    pose); ``coordinates``: for each tree joint, (joint name, index into its ``q``), the
    index -1 for a free joint (named ``"<body>.free"``) or a ball (the whole quaternion)."""

    tree: KinematicTree
    loop_rows: tuple[int, ...]
    tree_joints: tuple[str, ...]
    joints: tuple[JointDefinition, ...]
    coordinates: tuple[tuple[str, int], ...]


def _edges(model: Model, deferred: list | None = None):
    """The joints with rows, as (definition, rows), ordered by their first row, and the
    rows that belong to no joint (``deferred``: :func:`recognised_joint`'s)."""
    rows_of: dict[str, list[int]] = {}
    for row, tag in enumerate(model.constraint_joints):
        rows_of.setdefault(tag, []).append(row)
    driven = {row for group in model.drivers for row in group.rows}
    defs = {d.name: d for d in model.joints}
    edges, loose = [], []
    for tag, rows in rows_of.items():
        loose += [row for row in rows if row in driven]
        rows = tuple(row for row in rows if row not in driven)
        if not rows:
            continue
        if tag in defs:
            defn = defs[tag]
        elif len(rows) == len(rows_of[tag]):
            defn = recognised_joint(model, tag, rows, deferred)
        else:
            defn = None
        if defn is None or defn.body_i == defn.body_j:
            loose += rows
        else:
            edges.append((defn, rows))
    edges.sort(key=lambda e: e[1][0])
    return edges, loose


def _spanning_tree(nb: int, edges):
    """Breadth first from the ground (node nb), then from each unreached body in order:
    (parent of each body, -1 for a root; the edge index that joins it; the closing edges)."""
    incident: dict[int, list[int]] = {k: [] for k in range(nb + 1)}
    for e, (defn, _) in enumerate(edges):
        incident[defn.body_i].append(e)
        incident[defn.body_j].append(e)
    parent, via = [None] * nb, [None] * nb
    used = set()
    for start in [nb, *range(nb)]:
        if start < nb:
            if parent[start] is not None:
                continue
            parent[start] = WORLD
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for e in incident[node]:
                defn = edges[e][0]
                other = defn.body_j if defn.body_i == node else defn.body_i
                if e in used or other == nb or parent[other] is not None:
                    continue
                parent[other], via[other] = (WORLD if node == nb else node), e
                used.add(e)
                queue.append(other)
    closing = [e for e in range(len(edges)) if e not in used]
    return parent, via, closing


# (suffix, type, column of the child's joint frame, index into q) per kind, child = body j;
# the child-i order (inverse motion) is listed separately where it differs
_PARTS = {
    "revolute": (("", JointType.HINGE, 2, 0),),
    "translational": (("", JointType.SLIDE, 2, 0),),
    "cylindrical": ((".slide", JointType.SLIDE, 2, 0), (".angle", JointType.HINGE, 2, 1)),
    "universal": ((".angle_1", JointType.HINGE, 0, 0), (".angle_2", JointType.HINGE, 1, 1)),
    "planar": (
        (".x", JointType.SLIDE, 0, 0),
        (".y", JointType.SLIDE, 1, 1),
        (".angle", JointType.HINGE, 2, 2),
    ),
    "spherical": (("", JointType.BALL, 2, -1),),
}
_PARTS_REVERSED = {
    "universal": _PARTS["universal"][::-1],
    "planar": _PARTS["planar"][2:] + _PARTS["planar"][:2],
}


def _child_of_joint(model: Model, defn: JointDefinition, child: int):
    """Placement (pos, rot), tree joints [(name, type, anchor, axis, qpos0)] and the
    (name, q index) of each, for the joint ``defn`` moving ``child``."""
    if child == defn.body_j:
        s_p, F_p, s_c, F_c, turn = defn.s_bar_i, defn.frame_i, defn.s_bar_j, defn.frame_j, 1.0
        parts = _PARTS[defn.kind]
    else:
        s_p, F_p, s_c, F_c, turn = defn.s_bar_j, defn.frame_j, defn.s_bar_i, defn.frame_i, -1.0
        parts = _PARTS_REVERSED.get(defn.kind, _PARTS[defn.kind])
    rot = F_p @ F_c.T
    pos = s_p - rot @ s_c
    joints = []
    for suffix, jtype, column, k in parts:
        if jtype == JointType.BALL:
            q0 = jnp.asarray([1.0, 0.0, 0.0, 0.0])
            axis = jnp.asarray([0.0, 0.0, 1.0])
        else:
            q0 = defn.offset[k : k + 1]
            axis = (turn * defn.sign[k]) * F_c[:, column]
        joints.append((defn.name + suffix, jtype, s_c, axis, q0, (defn.name, k)))
    return pos, rot, joints


def tree_of_model(model: Model) -> ModelTree:
    """The kinematic tree of ``model`` (see the module docstring): the structure from the
    model's static topology, every number a jnp function of the model's leaves, and the
    initial state (``qpos_init``, ``qvel_init``) the joint coordinates and rates of the
    model's initial body state (``r0``, ``A0``, ``rdot0``, ``omega0``).

    With concrete values it is one compiled program (kept on disk by :func:`jaxmbd.jit`),
    not a hundred small operations each compiled or looked up on its own (a second on a
    new process's first run); a joint recognised in GCON rows whose geometry check fails
    there is read again op by op, where the check leaves its rows as rows."""
    if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(model)):
        kept_model, kept = _LAST_CONCRETE
        if kept_model is not None and kept_model() is model:
            return kept
        # concrete values: the program runs now, also while a caller's jit traces a model
        # it closes over (else its outputs are that trace's, and the checks unreadable)
        with run_now():
            built, passed = _checked_tree_of_model(model)
        if np.all(np.asarray(passed)):
            _LAST_CONCRETE[:] = [weakref.ref(model), built]
            return built
    return _tree_of_model(model)


#: (a weak reference to the model, its tree) of the last concrete model asked: a plain
#: call asks it of one model object more than once (its plan, its run's rows); a Model is
#: immutable.
_LAST_CONCRETE: list = [None, None]


@jit(xla_options=RUN_ONCE)
def _checked_tree_of_model(model: Model) -> tuple[ModelTree, jax.Array]:
    """:func:`tree_of_model` as one program, with the geometry checks of the joints it
    recognised in GCON rows (all true: the tree is the one concrete values give)."""
    deferred = []
    built = _tree_of_model(model, deferred)
    return built, jnp.stack(deferred) if deferred else jnp.ones(0, bool)


def _tree_of_model(model: Model, deferred: list | None = None) -> ModelTree:
    # the per-body arithmetic runs batched over bodies (balls and roots at once, the
    # placements of all bodies at once), so that the program does not grow with the model
    # by a block of operations per body; only the scalar joints' coordinates are read joint
    # by joint (joint_coordinates of each definition)
    nb = model.nb
    edges, loose = _edges(model, deferred)
    parent, via, closing = _spanning_tree(nb, edges)
    state = tuple(x[None] for x in (model.r0, model.A0, model.rdot0, model.omega0))
    names, types, bodies, coords = [], [], [], []
    scalar_q, scalar_v = [], []  # (joint, value (1,)) of each hinge and slide
    roots = [b for b in range(nb) if via[b] is None]
    children = [b for b in range(nb) if via[b] is not None]
    child_is_j = np.asarray([edges[via[b]][0].body_j == b for b in children], dtype=bool)
    defs = [edges[via[b]][0] for b in children]
    child_index = {b: k for k, b in enumerate(children)}
    # per joint: the definition (index into defs, -1 for a root), its column and sign
    joint_def, joint_column, joint_coefficient, joint_offset = [], [], [], []
    for b in range(nb):
        if via[b] is None:  # a root: free in the world
            names.append(f"{model.body_names[b]}.free")
            types.append(JointType.FREE)
            bodies.append(b)
            coords.append((names[-1], -1))
            joint_def.append(-1)
            joint_column.append(0)
            joint_coefficient.append(0.0)
            joint_offset.append(None)
            continue
        e = child_index[b]
        defn = defs[e]
        turn = 1.0 if b == defn.body_j else -1.0
        parts = (_PARTS if b == defn.body_j else {**_PARTS, **_PARTS_REVERSED})[defn.kind]
        if not joint_kind(defn.kind).quaternion:
            now = joint_coordinates(defn, *state)
            q_now = jnp.reshape(now.q, (-1,))
            qdot_now = jnp.reshape(now.qdot, (-1,))
        for suffix, jtype, column, k in parts:
            names.append(defn.name + suffix)
            types.append(jtype)
            bodies.append(b)
            coords.append((defn.name, k))
            joint_def.append(e)
            joint_column.append(column)
            if jtype == JointType.BALL:
                joint_coefficient.append(0.0)
                joint_offset.append(None)
                continue
            joint_coefficient.append(turn * defn.sign[k])
            joint_offset.append(defn.offset[k : k + 1])
            scalar_q.append((len(names) - 1, q_now[k : k + 1]))
            scalar_v.append((len(names) - 1, qdot_now[k : k + 1]))
    order = sorted(range(len(names)), key=lambda n: bodies[n])  # stable: a body's in order
    rank = np.empty(len(order), dtype=int)
    rank[np.asarray(order, dtype=int)] = np.arange(len(order))
    nq_of = [JointType(types[n]).nq for n in order]
    nv_of = [JointType(types[n]).nv for n in order]
    q_adr = np.cumsum([0] + nq_of)[:-1]
    v_adr = np.cumsum([0] + nv_of)[:-1]
    nq, nv = int(sum(nq_of)), int(sum(nv_of))
    dtype = model.r0.dtype
    e_z = jnp.asarray([0.0, 0.0, 1.0], dtype)
    # (rows, values) pairs of body_pos, body_rot, joint_pos and joint_axis (no scatter:
    # assembled by one concatenation and one constant row pick, as the steps' arrays)
    root_rows, free_rows = (
        np.asarray(roots, dtype=int),
        np.flatnonzero(np.asarray([joint_def[n] for n in order], dtype=int) < 0),
    )
    body_parts = [(root_rows, jnp.zeros((len(roots), 3), dtype))]
    rot_parts = [(root_rows, jnp.broadcast_to(jnp.eye(3, dtype=dtype), (len(roots), 3, 3)))]
    joint_pos_parts = [(free_rows, jnp.zeros((free_rows.size, 3), dtype))]
    joint_axis_parts = [(free_rows, jnp.broadcast_to(e_z, (free_rows.size, 3)))]
    q_parts0, q_parts, v_parts = [], [], []  # (rows, values) of qpos0, qpos_init, qvel_init
    if children:
        rows = np.asarray(children)
        j_side = jnp.asarray(child_is_j)[:, None]
        s_i = jnp.stack([d.s_bar_i for d in defs])
        s_j = jnp.stack([d.s_bar_j for d in defs])
        F_i = jnp.stack([d.frame_i for d in defs])
        F_j = jnp.stack([d.frame_j for d in defs])
        s_p, s_c = jnp.where(j_side, s_i, s_j), jnp.where(j_side, s_j, s_i)
        F_p = jnp.where(j_side[..., None], F_i, F_j)
        F_c = jnp.where(j_side[..., None], F_j, F_i)
        rot = F_p @ jnp.swapaxes(F_c, -1, -2)
        pos = s_p - (rot @ s_c[..., None])[..., 0]
        body_parts.append((rows, pos))
        rot_parts.append((rows, rot))
        of_def = np.asarray([joint_def[n] for n in order])
        tied = np.flatnonzero(of_def >= 0)
        if tied.size:
            e = of_def[tied]
            column = np.asarray([joint_column[order[t]] for t in tied])
            coefficient = np.asarray([joint_coefficient[order[t]] for t in tied])
            ball = jnp.asarray(coefficient == 0.0, dtype)
            axis = jnp.asarray(coefficient, dtype)[:, None] * F_c[e, :, column]
            joint_pos_parts.append((tied, s_c[e]))
            joint_axis_parts.append((tied, axis + ball[:, None] * e_z))
        balls = [n for n in order if types[n] == JointType.BALL]
        if balls:
            e = np.asarray([joint_def[n] for n in balls])
            b_rows = np.asarray([bodies[n] for n in balls])
            p_rows = np.asarray([nb if parent[b] == WORLD else parent[b] for b in b_rows])
            A = jnp.concatenate([model.A0, jnp.eye(3, dtype=dtype)[None]])
            w = jnp.concatenate([model.omega0, jnp.zeros((1, 3), dtype)])
            A_p, A_c, w_p, w_c = A[p_rows], A[b_rows], w[p_rows], w[b_rows]
            relative = jnp.swapaxes(rot[e], -1, -2) @ jnp.swapaxes(A_p, -1, -2) @ A_c
            quat = A_to_ep(relative)
            # on the side of q_start where the child is the joint's own body j
            q_start = jnp.stack([defs[k].q_start for k in e])
            flip = jnp.asarray(child_is_j[e]) & (jnp.sum(quat * q_start, -1) < 0)
            quat = jnp.where(flip[:, None], -quat, quat)
            rate = w_c - (jnp.swapaxes(A_c, -1, -2) @ A_p @ w_p[..., None])[..., 0]
            qi = (q_adr[rank[balls]][:, None] + np.arange(4)).reshape(-1)
            vi = (v_adr[rank[balls]][:, None] + np.arange(3)).reshape(-1)
            unit = jnp.broadcast_to(jnp.asarray([1.0, 0.0, 0.0, 0.0], dtype), (len(balls), 4))
            q_parts0.append((qi, unit.reshape(-1)))
            q_parts.append((qi, quat.reshape(-1)))
            v_parts.append((vi, rate.reshape(-1)))
    if roots:
        rows = np.asarray(roots)
        free = [n for n in order if types[n] == JointType.FREE]
        quat = A_to_ep(model.A0[rows])
        qpos_free = jnp.concatenate([model.r0[rows], quat], -1).reshape(-1)
        qvel_free = jnp.concatenate([model.rdot0[rows], model.omega0[rows]], -1).reshape(-1)
        qi = (q_adr[rank[free]][:, None] + np.arange(7)).reshape(-1)
        vi = (v_adr[rank[free]][:, None] + np.arange(6)).reshape(-1)
        q_parts0.append((qi, qpos_free))
        q_parts.append((qi, qpos_free))
        v_parts.append((vi, qvel_free))
    if scalar_q:
        joints = [n for n, _ in scalar_q]
        qi, vi = q_adr[rank[joints]], v_adr[rank[joints]]
        q_parts0.append((qi, jnp.concatenate([joint_offset[n] for n in joints])))
        q_parts.append((qi, jnp.concatenate([value for _, value in scalar_q])))
        v_parts.append((vi, jnp.concatenate([value for _, value in scalar_v])))

    def joined(n, parts, shape=()):
        return assemble(n, parts) if n else jnp.zeros((0, *shape), dtype)

    tree = KinematicTree(
        body_names=tuple(model.body_names),
        parent=tuple(int(x) for x in parent),
        joint_names=tuple(names[n] for n in order),
        joint_type=tuple(int(types[n]) for n in order),
        joint_body=tuple(bodies[n] for n in order),
        body_pos=joined(nb, body_parts, (3,)),
        body_rot=joined(nb, rot_parts, (3, 3)),
        com=jnp.zeros((nb, 3)),
        joint_pos=joined(len(order), joint_pos_parts, (3,)),
        joint_axis=joined(len(order), joint_axis_parts, (3,)),
        qpos0=joined(nq, q_parts0),
        qpos_init=joined(nq, q_parts),
        qvel_init=joined(nv, v_parts),
    )
    loop_rows = sorted({*loose, *(row for e in closing for row in edges[e][1])})
    used = sorted(set(range(len(edges))) - set(closing))
    return ModelTree(
        tree=tree,
        loop_rows=tuple(loop_rows),
        tree_joints=tuple(edges[e][0].name for e in used),
        joints=tuple(defn for defn, _ in edges),
        coordinates=tuple(coords[n] for n in order),
    )
