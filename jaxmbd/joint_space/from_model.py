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

from collections import deque
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.jit import jit
from ..lie.rotations import A_to_ep
from ..model import Model
from ..model.joints import JointDefinition, joint_coordinates, joint_kind
from ..tree import WORLD, JointType, KinematicTree
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


def _pose(model: Model, body: int):
    if body == model.nb:
        return jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.zeros(3)
    return model.r0[body], model.A0[body], model.rdot0[body], model.omega0[body]


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


def _ball_state(model: Model, parent: int, child: int, rot, q_start, child_is_j: bool):
    """A ball's quaternion (the child's rotation from its placement ``rot``, in its frame,
    on the side of ``q_start`` where it is the joint's own) and rate (the child's angular
    velocity relative to its parent, in its frame)."""
    _, A_p, _, w_p = _pose(model, parent)
    _, A_c, _, w_c = _pose(model, child)
    quat = A_to_ep(rot.T @ A_p.T @ A_c)
    if child_is_j:
        quat = jnp.where(quat @ q_start < 0, -quat, quat)
    return quat, w_c - A_c.T @ A_p @ w_p


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
        # concrete values: the program runs now, also while a caller's jit traces a model
        # it closes over (else its outputs are that trace's, and the checks unreadable)
        with jax.ensure_compile_time_eval():
            built, passed = _checked_tree_of_model(model)
        if np.all(np.asarray(passed)):
            return built
    return _tree_of_model(model)


@jit
def _checked_tree_of_model(model: Model) -> tuple[ModelTree, jax.Array]:
    """:func:`tree_of_model` as one program, with the geometry checks of the joints it
    recognised in GCON rows (all true: the tree is the one concrete values give)."""
    deferred = []
    built = _tree_of_model(model, deferred)
    return built, jnp.stack(deferred) if deferred else jnp.ones(0, bool)


def _tree_of_model(model: Model, deferred: list | None = None) -> ModelTree:
    nb = model.nb
    edges, loose = _edges(model, deferred)
    parent, via, closing = _spanning_tree(nb, edges)
    state = tuple(x[None] for x in (model.r0, model.A0, model.rdot0, model.omega0))
    names, types, bodies, coords = [], [], [], []
    body_pos, body_rot, anchors, axes, qpos0, qpos, qvel = [], [], [], [], [], [], []
    for b in range(nb):
        if via[b] is None:  # a root: free in the world
            r, A, v, w = _pose(model, b)
            body_pos.append(jnp.zeros(3))
            body_rot.append(jnp.eye(3))
            quat = A_to_ep(A)
            names.append(f"{model.body_names[b]}.free")
            types.append(JointType.FREE)
            bodies.append(b)
            coords.append((names[-1], -1))
            anchors.append(jnp.zeros(3))
            axes.append(jnp.asarray([0.0, 0.0, 1.0]))
            qpos0.append(jnp.concatenate([r, quat]))
            qpos.append(jnp.concatenate([r, quat]))
            qvel.append(jnp.concatenate([v, w]))
            continue
        defn = edges[via[b]][0]
        p = nb if parent[b] == WORLD else parent[b]
        pos, rot, parts = _child_of_joint(model, defn, b)
        body_pos.append(pos)
        body_rot.append(rot)
        if joint_kind(defn.kind).quaternion:
            quat, rate = _ball_state(model, p, b, rot, defn.q_start, b == defn.body_j)
        else:
            now = joint_coordinates(defn, *state)
            q_now = jnp.reshape(now.q, (-1,))
            qdot_now = jnp.reshape(now.qdot, (-1,))
        for name, jtype, anchor, axis, q0, (_, k) in parts:
            names.append(name)
            types.append(jtype)
            bodies.append(b)
            coords.append((defn.name, k))
            anchors.append(anchor)
            axes.append(axis)
            qpos0.append(q0)
            if jtype == JointType.BALL:
                qpos.append(quat)
                qvel.append(rate)
            else:
                qpos.append(q_now[k : k + 1])
                qvel.append(qdot_now[k : k + 1])
    order = sorted(range(len(names)), key=lambda n: bodies[n])  # stable: a body's in order

    def stacked(values, shape):
        return jnp.stack([values[n] for n in order]) if order else jnp.zeros((0, *shape))

    def joined(values):
        return jnp.concatenate([values[n] for n in order]) if order else jnp.zeros(0)

    tree = KinematicTree(
        body_names=tuple(model.body_names),
        parent=tuple(int(x) for x in parent),
        joint_names=tuple(names[n] for n in order),
        joint_type=tuple(int(types[n]) for n in order),
        joint_body=tuple(bodies[n] for n in order),
        body_pos=jnp.stack(body_pos) if nb else jnp.zeros((0, 3)),
        body_rot=jnp.stack(body_rot) if nb else jnp.zeros((0, 3, 3)),
        com=jnp.zeros((nb, 3)),
        joint_pos=stacked(anchors, (3,)),
        joint_axis=stacked(axes, (3,)),
        qpos0=joined(qpos0),
        qpos_init=joined(qpos),
        qvel_init=joined(qvel),
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
