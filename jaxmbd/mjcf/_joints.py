"""MuJoCo's joints as jaxmbd joints (the MJCF importer's joint part, :mod:`jaxmbd.mjcf`).

A body's MuJoCo joints become one jaxmbd joint where their composition is one (a hinge, a
slide, a ball, hinges on perpendicular axes as a universal or spherical joint, slides and a
hinge as a planar joint, ...), with MuJoCo's coordinates (q = qpos); every hinge and slide
also gets a one-coordinate joint of its own that carries its limits, passive values and
actuators by name (the joint formulation evaluates them in joint space; the absolute
formulations only where the joint is the body's only one). Bodies whose joints compose into
no jaxmbd joint get no constraint rows (``Model.joint_space_only`` says why).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..build import ModelBuilder
from ..forces._joint import CYLINDRICAL_VIEWS
from ..forces.quaternion_joint_dynamics import QuaternionJointDynamics, quaternion_joint_dynamics
from ..model._values import _axis_frame
from ..model.joints import REVOLUTE, TRANSLATIONAL, JointKind
from ._flags import switched_off
from ._limit_gains import limit_gains

logger = logging.getLogger("jaxmbd")


def _rot_lock_vectors(A_i, A_j):
    """Local vectors of three DP1 rows that lock the relative rotation of two frames."""
    e = np.eye(3)
    pairs = ((e[0], e[1]), (e[1], e[2]), (e[2], e[0]))
    return [(A_i.T @ u, A_j.T @ v) for u, v in pairs]


def _name(mujoco, m, objtype, k: int, prefix: str) -> str:
    name = mujoco.mj_id2name(m, objtype, k)
    return name if name else f"{prefix}{k}"


@dataclass(frozen=True)
class _MjJointType:
    """What the importer asks of a MuJoCo joint type (``mjtJoint``): ``word``, MuJoCo's
    name of it; ``coordinate``: its one qpos is a hinge's or slide's coordinate;
    ``angular``: that coordinate is an angle (a hinge); ``view``: which coordinate of a
    cylindrical joint it is; ``single``: the library joint of a body's only joint of this
    type (None: a ball's spherical joint, or a free body's none); ``free``, ``ball``."""

    word: str
    coordinate: bool = False
    angular: bool = False
    view: str = ""
    single: JointKind | None = None
    free: bool = False
    ball: bool = False


#: The MuJoCo joint types by their ``mjtJoint`` name.
_MJ_JOINT_TYPES = {
    "mjJNT_FREE": _MjJointType("free", free=True),
    "mjJNT_BALL": _MjJointType("ball", ball=True),
    "mjJNT_SLIDE": _MjJointType("slide", coordinate=True, view="slide", single=TRANSLATIONAL),
    "mjJNT_HINGE": _MjJointType("hinge", coordinate=True, angular=True, view="angle",
                                single=REVOLUTE),
}  # fmt: skip


def _joint_type(mujoco, m, j: int) -> _MjJointType:
    """The record of MuJoCo joint j's type."""
    return _MJ_JOINT_TYPES[mujoco.mjtJoint(int(m.jnt_type[j])).name]


def _limits(m, j: int, hinge: bool):
    """A hinge's or slide's ``range`` when ``limited`` (qpos units, which are the joint
    coordinate's), else None; a hinge range of a full turn or more cannot act on the
    principal angle and is left out (named by the unsupported-features warning). None
    where the ``limit`` or ``constraint`` flag is disabled."""
    if not m.jnt_limited[j] or switched_off(m, "limit"):
        return None
    lo, hi = (float(x) for x in m.jnt_range[j])
    if hinge and hi - lo >= 2 * np.pi:
        return None
    return (lo, hi)


def _limit_options(m, j: int, hinge: bool, builder, name: str) -> dict:
    """A hinge's or slide's ``limits``, ``limit_stiffness`` and ``limit_damping`` as the
    builder's keyword options: MuJoCo's range and the gains that stand for its soft limit
    (:mod:`jaxmbd.mjcf._limit_gains`, its ``solimp`` kept for coordinate ``name``); all
    None where it has no limit."""
    limits = _limits(m, j, hinge)
    k, c = limit_gains(m, j) if limits is not None else (None, None)
    if limits is not None:
        builder._limit_impedance[name] = tuple(float(x) for x in m.jnt_solimp[j])
    return {"limits": limits, "limit_stiffness": k, "limit_damping": c}


def _cylindrical_coordinates(mujoco, m) -> dict[int, str]:
    """{MuJoCo joint: jaxmbd coordinate} of the hinges and slides that are a body's
    cylindrical joint (a slide and a hinge on one axis line, as :func:`_add_joints` maps
    them): the slide is ``"<joint>.slide"`` and the hinge ``"<joint>.angle"``, each with
    MuJoCo's qpos as coordinate (:data:`jaxmbd.forces._joint.CYLINDRICAL_VIEWS`)."""
    out = {}
    for b in range(1, m.nbody):
        jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        types = [_joint_type(mujoco, m, j) for j in jids]
        if not _hinge_and_slide(types):
            continue
        axes = [np.asarray(m.jnt_axis[j], dtype=np.float64) for j in jids]  # body frame
        axes = [a / np.linalg.norm(a) for a in axes]
        gap = np.asarray(m.jnt_pos[jids[1]]) - np.asarray(m.jnt_pos[jids[0]])
        if abs(abs(axes[0] @ axes[1]) - 1) < 1e-9 and np.linalg.norm(np.cross(gap, axes[0])) < 1e-9:
            names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in jids]
            for j, jnt_type in zip(jids, types, strict=True):
                out[j] = f"{'+'.join(names)}.{jnt_type.view}"
    return out


def _hinges(types) -> list[int]:
    """The positions of the hinges among the joint types ``types``."""
    return [k for k, t in enumerate(types) if t.coordinate and t.angular]


def _slides(types) -> list[int]:
    """The positions of the slides among the joint types ``types``."""
    return [k for k, t in enumerate(types) if t.coordinate and not t.angular]


def _hinge_and_slide(types) -> bool:
    """Two joints, a hinge and a slide (in either order)."""
    return len(types) == 2 and len(_hinges(types)) == 1 and len(_slides(types)) == 1


def _single_scalar_joints(mujoco, m) -> set[int]:
    """Joints that are a body's only joint and a hinge or slide (a revolute or translational
    joint with MuJoCo's qpos as coordinate)."""
    return {
        int(m.body_jntadr[b])
        for b in range(1, m.nbody)
        if m.body_jntnum[b] == 1 and _joint_type(mujoco, m, int(m.body_jntadr[b])).coordinate
    }


def _passive_values(mujoco, m):
    """(dof_damping, jnt_stiffness, dof_frictionloss) as MuJoCo applies them: zero where its
    ``damper``, ``spring``, ``frictionloss`` or ``constraint`` flag is disabled."""
    flags, bit = m.opt.disableflags, mujoco.mjtDisableBit
    on = {
        "damper": not flags & bit.mjDSBL_DAMPER,
        "spring": not flags & bit.mjDSBL_SPRING,
        "friction": not flags & (bit.mjDSBL_FRICTIONLOSS | bit.mjDSBL_CONSTRAINT),
    }
    return tuple(
        np.asarray(values, dtype=np.float64) * on[key]
        for key, values in (("damper", m.dof_damping), ("spring", m.jnt_stiffness),
                            ("friction", m.dof_frictionloss))
    )  # fmt: skip


def _passive(mujoco, m, j: int) -> dict:
    """A hinge's or slide's damping, stiffness about ``qpos_spring``, friction loss and
    armature as the builder's keyword options (qpos units, which are the joint
    coordinate's)."""
    damping, stiffness, friction_loss = _passive_values(mujoco, m)
    dof, k = int(m.jnt_dofadr[j]), float(stiffness[j])
    return {
        "damping": float(damping[dof]),
        "stiffness": k,
        "spring_reference": float(m.qpos_spring[m.jnt_qposadr[j]]) if k else None,
        "friction_loss": float(friction_loss[dof]),
        # rotor inertia on qpos (MuJoCo adds it to its mass matrix's diagonal); None: none
        "armature": float(m.dof_armature[dof]) if m.dof_armature[dof] else None,
    }


def quaternion_joints(mujoco, m) -> list[int]:
    """MuJoCo's ball and free joints."""
    return [j for j in range(m.njnt) if not _joint_type(mujoco, m, j).coordinate]


def quaternion_joint_passive(mujoco, m, where: str) -> QuaternionJointDynamics | None:
    """The damping, stiffness (about ``qpos_spring``), friction loss and armature of the
    ball and free joints that have any, as MuJoCo applies them (one value per joint, on
    each of its dofs; flags as :func:`_passive_values`); None: none has."""
    damping, stiffness, friction_loss = _passive_values(mujoco, m)
    rows = []
    for j in quaternion_joints(mujoco, m):
        dof, adr = int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
        free = _joint_type(mujoco, m, j).free
        values = (damping[dof], stiffness[j], friction_loss[dof], m.dof_armature[dof])
        if not any(values):
            continue
        ref = np.zeros(7)
        ref[0 if free else 3 :] = m.qpos_spring[adr : adr + (7 if free else 4)]
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
        rows.append((name, free, *(float(x) for x in values), ref))
    if not rows:
        return None
    names, free, c, k, f, a, ref = zip(*rows, strict=True)
    return quaternion_joint_dynamics(
        names, free, damping=c, stiffness=k, spring_reference=np.stack(ref), friction_loss=f,
        armature=a, where=where,
    )  # fmt: skip


def _mapped_limits(mujoco, m) -> set[int]:
    """Joints whose limits become compliant limits: the one hinge or slide of a body."""
    out = set()
    for b in range(1, m.nbody):
        if m.body_jntnum[b] == 1:
            j = int(m.body_jntadr[b])
            jnt_type = _joint_type(mujoco, m, j)
            if jnt_type.coordinate and _limits(m, j, jnt_type.angular) is not None:
                out.add(j)
    return out


def _composition(mujoco, m, d, b) -> _Composition | None:
    """The library joint that body ``b``'s MuJoCo joints form (MuJoCo's ``xanchor`` and
    ``xaxis`` in ``d``): :data:`FREE`, :data:`SINGLE` (one hinge, slide or ball),
    :data:`UNIVERSAL`, :data:`CYLINDRICAL`, :data:`SPHERICAL` (three hinges),
    :data:`PLANAR`, :data:`TRANSLATION` (three slides); None when they form none (the
    body's joints are joint-space only)."""
    jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    types = [_joint_type(mujoco, m, j) for j in jids]
    anchors = [np.array(d.xanchor[j]) for j in jids]
    axes = [np.array(d.xaxis[j]) for j in jids]
    if len(jids) == 1 and types[0].free:
        return FREE
    if len(jids) == 1:
        return SINGLE
    same_point = all(np.linalg.norm(p - anchors[0]) < 1e-9 for p in anchors)
    hinges = _hinges(types)
    if len(jids) == len(hinges) == 2 and same_point and abs(axes[0] @ axes[1]) < 1e-9:
        return UNIVERSAL
    if _hinge_and_slide(types) and (
        abs(abs(axes[0] @ axes[1]) - 1) < 1e-9
        and np.linalg.norm(np.cross(anchors[1] - anchors[0], axes[0])) < 1e-9
    ):
        return CYLINDRICAL
    if len(jids) == len(hinges) == 3 and same_point and abs(np.linalg.det(np.stack(axes))) > 1e-6:
        return SPHERICAL
    slides = [axes[k] for k in _slides(types)]
    if len(slides) == 2 and len(hinges) == 1 and len(jids) == 3:
        normal = np.cross(slides[0], slides[1])
        h = axes[hinges[0]]
        if np.linalg.norm(normal) > 1e-6 and np.linalg.norm(np.cross(normal, h)) < 1e-9:
            return PLANAR
    if len(slides) == 3 and len(jids) == 3 and abs(np.linalg.det(np.stack(slides))) > 1e-6:
        return TRANSLATION
    return None


def _joint_space_reason(mujoco, m, b) -> str:
    """Why body ``b`` needs the ``"joint"`` formulation (:attr:`Model.joint_space_only`)."""
    jids = range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
    joints = ", ".join(
        f"{_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, 'joint')} "
        f"({_joint_type(mujoco, m, j).word})"
        for j in jids
    )
    body = _name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body")
    return (
        f"body '{body}': joints {joints} compose into no GCON joint (supported on one body: "
        "one hinge/slide/ball/free joint, two hinges on perpendicular axes through one point, "
        "a slide and a hinge on one axis, three hinges through one point, two slides and a "
        "hinge normal to them, three slides)"
    )


def _joint_space_joints(mujoco, m, d) -> set[int]:
    """The MuJoCo joints of bodies whose joints compose into no library joint."""
    return {
        j
        for b in range(1, m.nbody)
        if m.body_jntnum[b] and _composition(mujoco, m, d, b) is None
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
    }


def _composite_coordinates(mujoco, m, d) -> set[int]:
    """The hinges and slides inside the compositions whose hinges and slides are coordinates
    of their own (``own_coordinates``; their limits, passive values and actuators act in
    joint space only)."""
    return {
        j
        for b in range(1, m.nbody)
        if m.body_jntnum[b] > 1 and getattr(_composition(mujoco, m, d, b), "own_coordinates", False)
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
        if _joint_type(mujoco, m, j).coordinate
    }


def _add_joints(mujoco, m, d, builder: ModelBuilder, b, parent: str, child: str):
    """The library joint of body ``b``'s MuJoCo joints: {name: ((coordinate, qpos address),
    ...)}, the coordinates that equal a MuJoCo qpos (all but a spherical joint's; the
    in-plane slides of a planar joint only when the two slides come first and are
    orthogonal); {} for a free body and three slides (no library joint). Joints that form
    no library joint: one joint per MuJoCo joint, without rows
    (:func:`_add_joint_space_joints`)."""
    jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    anchors = [np.array(d.xanchor[j]) for j in jids]
    axes = [np.array(d.xaxis[j]) for j in jids]
    composition = _composition(mujoco, m, d, b)
    if composition is None:
        return _add_joint_space_joints(mujoco, m, builder, jids, parent, child, anchors, axes)
    body = _BodyJoints(
        mujoco, m, builder, jids, [_joint_type(mujoco, m, j) for j in jids],
        [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in jids],
        anchors, axes, [int(m.jnt_qposadr[j]) for j in jids], parent, child,
    )  # fmt: skip
    joint_space = {}  # the composition's hinges and slides as coordinates of joint space
    if composition.own_coordinates:
        for j, point, axis in zip(jids, anchors, axes, strict=True):
            if _joint_type(mujoco, m, j).coordinate:
                joint_space.update(
                    _add_coordinate_joint(mujoco, m, builder, j, parent, child, point, axis,
                                          joint_space=True)
                )  # fmt: skip
    return {**composition.add(body), **joint_space}


@dataclass(frozen=True)
class _BodyJoints:
    """One body's MuJoCo joints (``jids``, their ``types``, ``names``, ``anchors`` and
    ``axes`` at the reference pose, qpos addresses ``adr``) on their way into the library
    joint between ``parent`` and ``child`` that they compose."""

    mujoco: object
    m: object
    builder: ModelBuilder
    jids: list
    types: list
    names: list
    anchors: list
    axes: list
    adr: list
    parent: str
    child: str

    @property
    def joined(self) -> str:
        """The composed joint's name: the MuJoCo joints' names joined by "+"."""
        return "+".join(self.names)

    def convention(self, name, order, signs=None):
        """q = qpos: MuJoCo's qpos0 as the offset, the axes' directions as the signs."""
        qpos0 = np.asarray(self.m.qpos0)
        self.builder._joint_convention(
            name, offset=[qpos0[self.adr[k]] for k in order], sign=signs or [1] * len(order)
        )
        return {name: tuple((c, self.adr[k]) for c, k in enumerate(order))}


def _add_free(body: _BodyJoints) -> dict:
    """A free body: no library joint."""
    return {}


def _add_single(body: _BodyJoints) -> dict:
    """One hinge or slide: the builder's joint of that name; a ball: a spherical joint."""
    name = body.names[0]
    spec = body.types[0].single
    if spec is None:  # a ball
        body.builder.spherical(name, body_i=body.parent, body_j=body.child,
                               point=body.anchors[0])  # fmt: skip
        return {name: ()}
    getattr(body.builder, spec.name)(
        name, body_i=body.parent, body_j=body.child, point=body.anchors[0], axis=body.axes[0],
        **_limit_options(body.m, body.jids[0], spec.angular, body.builder, name),
        **_passive(body.mujoco, body.m, body.jids[0]),
    )  # fmt: skip
    return body.convention(name, [0])


def _add_universal(body: _BodyJoints) -> dict:
    """Two hinges on perpendicular axes through one point."""
    body.builder.universal(
        body.joined, body_i=body.parent, body_j=body.child, point=body.anchors[0],
        axis_i=body.axes[0], axis_j=body.axes[1],
    )  # fmt: skip
    return body.convention(body.joined, [0, 1])


def _add_cylindrical(body: _BodyJoints) -> dict:
    """A slide and a hinge on one axis line: each MuJoCo joint's range, damping, stiffness,
    ... on its coordinate (qpos units)."""
    mujoco, m, builder, joined, axes = body.mujoco, body.m, body.builder, body.joined, body.axes
    order = [*_slides(body.types), *_hinges(body.types)]
    passive = [_passive(mujoco, m, body.jids[k]) for k in order]
    angular = (False, True)  # the slide, then the hinge
    limits = [
        _limit_options(m, body.jids[k], hinge, builder, f"{joined}.{view}")
        for k, hinge, (view, _) in zip(order, angular, CYLINDRICAL_VIEWS, strict=True)
    ]
    builder.cylindrical(
        joined, body_i=body.parent, body_j=body.child, point=body.anchors[0], axis=axes[0],
        **{key: tuple(limit[key] for limit in limits) for key in limits[0]},
        **{key: tuple(p[key] for p in passive) for key in passive[0]},
    )  # fmt: skip
    return body.convention(joined, order, [float(axes[k] @ axes[0]) for k in order])


def _add_spherical(body: _BodyJoints) -> dict:
    """Three hinges through one point."""
    body.builder.spherical(body.joined, body_i=body.parent, body_j=body.child,
                           point=body.anchors[0])  # fmt: skip
    return {body.joined: ()}


def _add_planar(body: _BodyJoints) -> dict:
    """Two slides and a hinge normal to them."""
    axes, joined = body.axes, body.joined
    slide_ids = _slides(body.types)
    slides = [axes[k] for k in slide_ids]
    h = _hinges(body.types)[0]
    normal = np.cross(slides[0], slides[1])
    # in-plane axes x = the first slide, y = the second where they are orthogonal
    exact = abs(slides[0] @ slides[1]) < 1e-9 and h == 2
    n = normal / np.linalg.norm(normal) if exact else axes[h]
    body.builder.planar(joined, body_i=body.parent, body_j=body.child, point=body.anchors[h],
                        axis=n, x_axis=slides[0])  # fmt: skip
    signs = [1, 1, float(axes[h] @ n)]
    if exact:
        return body.convention(joined, [*slide_ids, h], signs)
    # the slides' qpos are not the in-plane coordinates: only the angle is MuJoCo's
    qpos0 = np.asarray(body.m.qpos0)
    body.builder._joint_convention(joined, offset=[0.0, 0.0, qpos0[body.adr[h]]], sign=signs)
    return {joined: ((2, body.adr[h]),)}


def _add_translation(body: _BodyJoints) -> dict:
    """Three slides, pure translation: the relative rotation is locked by three DP1 rows."""
    builder, joined, where = body.builder, body.joined, f"body '{body.child}'"
    A_i = builder._frame(body.parent, where=where)[1]
    A_j = builder._frame(body.child, where=where)[1]
    for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
        builder.add_dp1(
            f"{joined}.dp1_{k}", body_i=body.parent, a_bar_i=a_i, body_j=body.child,
            a_bar_j=a_j, joint=joined,
        )  # fmt: skip
    return {}


@dataclass(frozen=True)
class _Composition:
    """A library joint that one body's MuJoCo joints compose (:func:`_composition`).
    ``add(body)``: adds it to the builder and returns {name: ((coordinate, qpos address),
    ...)} (:func:`_add_joints`); ``own_coordinates``: its hinges and slides are also
    coordinates of their own in joint space."""

    name: str
    add: Callable[[_BodyJoints], dict]
    own_coordinates: bool = False


FREE = _Composition("free", _add_free)
SINGLE = _Composition("single", _add_single)
UNIVERSAL = _Composition("universal", _add_universal, own_coordinates=True)
CYLINDRICAL = _Composition("cylindrical", _add_cylindrical)
SPHERICAL = _Composition("spherical", _add_spherical, own_coordinates=True)
PLANAR = _Composition("planar", _add_planar, own_coordinates=True)
TRANSLATION = _Composition("translation", _add_translation, own_coordinates=True)


def _add_joint_space_joints(mujoco, m, builder, jids, parent, child, anchors, axes):
    """Joints of one body that compose into no GCON joint: no rows, and each MuJoCo joint a
    joint of its own name between the body and its parent (hinge → revolute, slide →
    translational, ball → spherical, at its anchor and axis at the reference pose), whose
    coordinate is its qpos. Their limits, damping, stiffness, friction loss, armature and
    actuators are those of a single hinge or slide; the ``"joint"`` formulation evaluates
    them in joint space (q = qpos, qdot = qvel), the absolute formulations refuse the model
    (:attr:`~jaxmbd.Model.joint_space_only`)."""
    out = {}
    for j, point, axis in zip(jids, anchors, axes, strict=True):
        if _joint_type(mujoco, m, j).ball:
            name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
            frame = builder._frame(child, where=f"joint '{name}'")[1]
            builder._record_joint(name, "spherical", parent, child, point, frame)
            out[name] = ()
            continue
        out.update(_add_coordinate_joint(mujoco, m, builder, j, parent, child, point, axis))
    return out


def _add_coordinate_joint(mujoco, m, builder, j, parent, child, point, axis, *,
                          joint_space=False):  # fmt: skip
    """MuJoCo's hinge or slide ``j`` as a revolute or translational joint of its own name
    between ``child`` and ``parent`` at its anchor and axis at the reference pose, whose
    coordinate is its qpos, with its limits, damping, stiffness, friction loss and armature.
    ``joint_space``: a hinge or slide inside a composition that forms one library joint,
    a coordinate only joint space has (:class:`jaxmbd.build.specs._JointSpec`): not one of
    ``model.joints``, and its joint forces are left to the ``"joint"`` formulation.
    {name: ((0, qpos address),)}."""
    name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
    hinge = _joint_type(mujoco, m, j).angular
    kind = "revolute" if hinge else "translational"
    builder._record_joint(name, kind, parent, child, point, _axis_frame(axis),
                          joint_space=joint_space)  # fmt: skip
    adr = int(m.jnt_qposadr[j])
    builder._joint_convention(name, offset=[float(m.qpos0[adr])], sign=[1])
    builder._record_limits(name, *_limit_options(m, j, hinge, builder, name).values())
    passive = _passive(mujoco, m, j)
    builder._record_dynamics(
        name, *(passive[key] for key in ("damping", "stiffness", "spring_reference",
                                          "friction_loss", "armature")),
    )  # fmt: skip
    return {name: ((0, adr),)}
