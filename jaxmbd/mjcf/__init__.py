"""MJCF and URDF import through MuJoCo's own parser (``pip install "jaxmbd[mjcf]"``).

``load_robot(path)`` (and ``jaxmbd.load_model`` for ``.xml``, ``.mjcf`` and ``.urdf`` files)
compiles the file with ``mujoco.MjModel.from_xml_path`` and reads the **world frames at the
reference pose** (``qpos0``) from ``mj_forward``:

* **Bodies**: every MuJoCo body that can move. The jaxmbd body frame is MuJoCo's body frame
  orientation (``xmat``) placed at the centre of mass (``xipos``); the mass and the **full**
  inertia tensor about the centre of mass in that frame come from ``body_mass``,
  ``body_inertia`` and ``ximat``. A body without joints is rigidly merged into its parent
  (masses, centres of mass and inertias combined; as MuJoCo's ``fusestatic``); one welded to
  the world is part of the ground. Geoms become the body's shapes (drawn, and colliding
  where MuJoCo collides them).
* **Joints** (MuJoCo's ``xanchor`` and ``xaxis`` at the reference pose): hinge → revolute,
  slide → translational, ball → spherical, free → none (a free body). A body with several
  joints is mapped when the chain of joints is one of the library's joints: two hinges on
  perpendicular axes through one point → universal, a slide and a hinge on one axis →
  cylindrical, three hinges through one point on independent axes → spherical, two slides
  and a hinge normal to them → planar, three independent slides → pure translation. Any
  other combination (two slides, two hinges on skew axes, ...) composes into no GCON joint
  (massless intermediate bodies would make the mass matrix singular): each of its hinges
  and slides is a revolute or translational joint of its own name between the body and its
  parent, at its anchor and axis at the reference pose, whose coordinate is its qpos, with
  no constraint rows; its limits, damping, stiffness, friction loss, armature and
  actuators are kept as for a single hinge or slide. The ``"joint"`` formulation
  evaluates them in joint space; ``model.joint_space_only`` names such bodies and the
  absolute formulations refuse the model. The hinges and slides of a universal, three-hinge
  spherical, planar or three-slide joint are also such joints of their own names, for
  their limits, passive values and actuators, but not joints of ``model.joints``: only
  the ``"joint"`` formulation (the default for these models), which reads their qpos,
  applies those; the absolute formulations leave them out (their coordinate is not the
  hinge's qpos once the other hinges have turned;
  :attr:`jaxmbd.forces._joint.AbstractJointForce.absolute_entries`), and ``simulate`` in
  one of them names them in a :class:`~jaxmbd.errors.JointSpaceOnlyWarning`.
* **Kinematic tree**: ``model.tree`` is the model in MuJoCo's joints and qpos layout
  (:func:`jaxmbd.tree.tree_from_mujoco`, body k of the tree is body k of the model) at the
  initial state.
* **Joint coordinates** (``sol.joints[name]``, :mod:`jaxmbd.model.joints`) are MuJoCo's ``qpos``
  and ``qvel``: each joint's zero is the reference pose with MuJoCo's ``qpos0`` (the joint's
  ``ref``) as offset, and the signs follow MuJoCo's axes. A hinge, slide or ball keeps its
  MuJoCo name (a ball: the quaternion (w, x, y, z) and the angular velocity in the child's
  frame). Several joints on one body are one joint named ``"a+b"``: a universal's
  (angle_1, angle_2) in MuJoCo's hinge order; a cylindrical's (slide, angle), whatever
  MuJoCo's order; a planar's (x, y, angle) are the two slides' and the hinge's qpos when the
  two slides come first and are orthogonal (e.g. a planar walker's ``rootx``, ``rootz``,
  ``rooty``), else the angle is the hinge's qpos and (x, y) the displacement in the frame
  of the first slide and the normal; three hinges give a spherical joint's quaternion (not
  the three angles). Free bodies and three slides have no joint coordinates (read
  ``sol.r``, ``sol.A``).
* **Equality constraints** (:mod:`jaxmbd.mjcf._equalities`): ``connect``, ``weld`` and
  ``joint`` (polynomial coupling) become ``model.equalities`` (:mod:`jaxmbd.joint_space.equalities`,
  MuJoCo's rows), exact by default, MuJoCo's soft ones with ``simulate(...,
  equality="soft")``, off with ``equality="none"``; ``active="false"`` ones are kept
  inactive. In the absolute formulations a connect is a spherical joint at the anchor and
  a weld a fixed joint at the relative pose of qpos0.
* **Initial state**: the first keyframe when the file has one, else the reference pose at
  rest; ``keyframe=`` picks another (index or name), or ``keyframe=None`` the reference pose.
  A keyframe's ``qpos`` and ``qvel`` set every joint through
  :meth:`~jaxmbd.ModelBuilder.set_joint_state` (its coordinates read from MuJoCo's own
  kinematics of the keyframe, angles on the branch of its qpos). The initial body states
  are MuJoCo's kinematics of (qpos, qvel).
* **Joint limits**: a body's single hinge or slide with ``limited`` ``range`` gets the
  compliant limit of :mod:`jaxmbd.forces.joint_limits` on its coordinate (qpos units; stiffness
  and damping from MuJoCo's ``solref``/``solimp``, :mod:`jaxmbd.mjcf._limit_gains`: the
  penetration at rest and the damping ratio are MuJoCo's); a hinge range of a full turn or
  more is left out. The slide and hinge of a cylindrical joint ``"a+b"`` get theirs on its
  coordinates ``"a+b.slide"`` and ``"a+b.angle"`` (whose q is their qpos), and so do their damping,
  stiffness, friction loss, armature and actuators; the hinges and slides of a body whose
  joints compose into no GCON joint get theirs on their own names.
* **Contacts** (:mod:`jaxmbd.mjcf._contact`): the geom pairs MuJoCo collides become the
  shape pairs of jaxmbd contact pairs, with friction (sliding, torsional and rolling by
  ``condim``), stiffness, restitution and slip velocity from ``friction``, ``solref`` and
  ``solimp``, and a margin from ``margin`` and ``gap`` (``<pair>`` elements with their
  own); the world's planes and geoms are ground planes and ground shapes, its height
  fields height field shapes (:mod:`jaxmbd.mjcf._hfield`).
* **Joint damping, stiffness, friction loss**: a body's single hinge or slide gets
  ``damping``, ``stiffness`` about ``springref`` (``qpos_spring``, qpos units),
  ``frictionloss`` and ``armature`` as :mod:`jaxmbd.forces.joint_dynamics` (friction loss
  regularised, not MuJoCo's soft constraint row).
* **Sensors** (:mod:`jaxmbd.mjcf._sensors`): the joint, frame, IMU, touch, subtree,
  force/torque and actuator sensors become ``model.sensors`` (``sol.sensors[name]``,
  :mod:`jaxmbd.sensors`) with their ``noise``.
* **Fluid forces** (:mod:`jaxmbd.mjcf._fluid`): ``density``, ``viscosity`` and ``wind``
  with MuJoCo's inertia-box and ellipsoid models (``fluidshape``, ``fluidcoef``), one
  :class:`jaxmbd.forces.fluid.FluidForce`.
* **Sites**: every named ``<site>`` on a moving body becomes a marker of that name
  (``sol.markers[name]``, :mod:`jaxmbd.model.markers`).
* **Tendons** (:mod:`jaxmbd.mjcf._tendons`): fixed and spatial tendons (sites, wrapping
  spheres and cylinders, side sites, pulleys) with their stiffness, damping, friction loss
  and limits (:mod:`jaxmbd.tendons`, :mod:`jaxmbd.tendons.tendon_forces`); actuators with a
  ``tendon=`` transmission pull along them. A fixed tendon over hinges inside a
  composition of MuJoCo joints is joint-space only (``model.joint_space_only``).
* **Flags** (:mod:`jaxmbd.mjcf._flags`): ``<flag ...="disable"/>`` of ``contact``,
  ``limit``, ``equality``, ``constraint``, ``frictionloss``, ``actuation``, ``gravity``,
  ``spring``, ``damper`` and ``clampctrl`` are honoured as MuJoCo defines them
  (``equality``: :func:`jaxmbd.joint_space.equalities.with_equalities` with ``"none"``).
* Whatever no formulation supports (muscles, sensors (limit, ...), flex equalities,
  mocap bodies, geom pairs without a narrow phase, ...) is listed in **one** warning;
  nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from pathlib import Path

import numpy as np

from .. import geometry as G
from ..build import ModelBuilder
from ..compiled.host_arrays import device_array
from ..errors import ModelError, ModelFileError
from ..joint_space.equalities import with_equalities
from ..model import GROUND, Model
from ..model.joints import joint_kind, joint_state_at
from ..tree import tree_from_mujoco
from ._actuators import add_actuators
from ._contact import add_contacts
from ._equalities import (
    add_equality_joints,
    equalities_of,
    tendons_of,
    unsupported_equalities,
)
from ._flags import switched_off, with_actuation_flags
from ._fluid import add_fluid
from ._hfield import hfield_shape
from ._joints import (
    _add_joints,
    _composite_coordinates,
    _composition,
    _cylindrical_coordinates,
    _joint_space_joints,
    _joint_space_reason,
    _joint_type,
    _limits,
    _mapped_limits,
    _name,
    _passive_values,
    _single_scalar_joints,
    quaternion_joint_passive,
    quaternion_joints,
)
from ._sensors import add_sensors, add_site_markers
from ._soft import constraint_model
from ._tendons import add_tendons

logger = logging.getLogger("jaxmbd")

SUFFIXES = (".xml", ".mjcf", ".urdf")
_FIRST = object()  # default keyframe choice: the first keyframe when there is one


class UnsupportedFeatureWarning(UserWarning):
    """An MJCF/URDF feature that jaxmbd does not model (listed, never dropped silently)."""


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError(
            "MJCF/URDF import needs the mujoco package: pip install 'jaxmbd[mjcf]'"
        ) from None
    return mujoco


def load_robot(path, *, keyframe=_FIRST, name: str | None = None) -> Model:
    """Load an MJCF (``.xml``) or URDF (``.urdf``) file as a jaxmbd :class:`Model`; or a
    ``mujoco.MjSpec``, a model edited in code (elements added, removed or changed, as
    dm_control's tasks edit their files) and loaded as it compiles.

    ``keyframe``: index or name of the keyframe that sets the initial state (default: the
    first one when the file has keyframes, else the reference pose at rest); ``None``: the
    reference pose at rest. ``name``: the model's name (default: the file's model / robot
    name, else the file name).
    """
    mujoco = _mujoco()
    if isinstance(path, mujoco.MjSpec):
        return _load_spec(mujoco, path, keyframe, name)
    path = Path(path)
    if not path.exists():
        raise ModelFileError(path, None, "file not found")
    try:
        if path.suffix.lower() == ".urdf":
            m = mujoco.MjModel.from_xml_string(_urdf_with_visuals(path))
        else:
            m = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as err:  # MuJoCo's parser and compiler errors
        message = " ".join(str(err).split())
        raise ModelFileError(path, None, f"MuJoCo cannot parse this file: {message}") from None
    return _converted(mujoco, m, path, keyframe, name)


def _load_spec(mujoco, spec, keyframe, name):
    """:func:`load_robot` of a ``mujoco.MjSpec``: errors name the spec's model (and the file
    it was read from, if any)."""
    where = Path(spec.modelfiledir or ".") / f"<MjSpec '{spec.modelname}'>"
    try:
        m = spec.compile()
    except ValueError as err:
        message = " ".join(str(err).split())
        raise ModelFileError(where, None, f"MuJoCo cannot compile this spec: {message}") from None
    return _converted(mujoco, m, where, keyframe, name)


def _converted(mujoco, m, path: Path, keyframe, name):
    try:
        names = bytes(m.names)
        file_name = names[: names.index(b"\0")].decode() if b"\0" in names else ""
        file_name = "" if file_name == "MuJoCo Model" else file_name  # MuJoCo's default
        return _convert(mujoco, m, path, keyframe, name or file_name or path.stem)
    except ModelFileError:
        raise
    except ModelError as err:
        raise ModelFileError(path, None, str(err)) from None


def _urdf_with_visuals(path: Path) -> str:
    """The URDF text with a MuJoCo compiler element that keeps the visual geoms (MuJoCo
    drops them by default) and finds meshes next to the file, unless it has its own."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(path.read_text())
    except ET.ParseError as err:
        raise ModelFileError(path, None, f"invalid XML: {err}") from None
    if root.tag != "robot":
        raise ModelFileError(path, None, f"a URDF file has a <robot> root, not <{root.tag}>")
    if root.find("mujoco") is None:
        ext = ET.SubElement(root, "mujoco")
        ET.SubElement(ext, "compiler", discardvisual="false", meshdir=str(path.parent.resolve()))
    return ET.tostring(root, encoding="unicode")


def _forward(mujoco, m, qpos, qvel):
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    mujoco.mj_forward(m, d)
    return d


def _keyframe_state(mujoco, m, path, keyframe):
    if keyframe is _FIRST:
        keyframe = 0 if m.nkey > 0 else None
    if keyframe is None:
        return np.array(m.qpos0), np.zeros(m.nv), "reference pose at rest"
    if isinstance(keyframe, str):
        k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, keyframe)
        if k < 0:
            names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_KEY, j, "key") for j in range(m.nkey)]
            raise ModelFileError(path, "keyframe", f"no keyframe {keyframe!r}; keyframes: {names}")
    else:
        k = int(keyframe)
        if not 0 <= k < m.nkey:
            raise ModelFileError(
                path, "keyframe", f"keyframe index {k} out of range (the file has {m.nkey})"
            )
    label = _name(mujoco, m, mujoco.mjtObj.mjOBJ_KEY, k, "key")
    return np.array(m.key_qpos[k]), np.array(m.key_qvel[k]), f"keyframe '{label}'"


def _unsupported(mujoco, m, joint_space: set[int]) -> list[str]:
    """What the model loses; ``joint_space``: the joints of bodies whose joints compose into
    no library joint (their hinges' and slides' limits and passive values are kept)."""
    out = []
    jn = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in range(m.njnt)]

    cylindrical = _cylindrical_coordinates(mujoco, m)
    # hinges and slides of their own coordinate; those inside compositions the joint
    # formulation applies (an absolute formulation's run names them: JointSpaceOnlyWarning)
    scalar = set(cylindrical) | {j for j in joint_space if _joint_type(mujoco, m, j).coordinate}
    mapped = _mapped_limits(mujoco, m) | {
        j for j in scalar if _limits(m, j, _joint_type(mujoco, m, j).angular) is not None
    }
    limited = [jn[j] for j in np.flatnonzero(m.jnt_limited) if j not in mapped]
    if limited and not switched_off(m, "limit"):
        out.append(
            f"joint limits on {limited} (only hinges and slides with their own coordinate are "
            "limited: a body's single hinge or slide, the hinge and slide of a cylindrical "
            "joint, those of a body whose joints compose into no GCON joint; a hinge range "
            "of a full turn or more)"
        )
    dof_jnt = np.asarray(m.dof_jntid)
    # their damping, stiffness, friction loss and armature map (ball and free joints': the
    # joint formulation's QuaternionJointDynamics)
    passive = _single_scalar_joints(mujoco, m) | scalar | set(quaternion_joints(mujoco, m))
    damping, stiffness, friction_loss = _passive_values(mujoco, m)
    for label, values, skip in (
        ("damping", damping, passive),
        ("armature", m.dof_armature, passive),
        ("friction loss", friction_loss, passive),
    ):
        hit = {int(dof_jnt[k]) for k in np.flatnonzero(np.asarray(values) != 0)} - skip
        if hit:
            out.append(f"joint {label} on {sorted(jn[j] for j in hit)}")
    stiff = [jn[j] for j in np.flatnonzero(stiffness != 0) if j not in passive]
    if stiff:
        out.append(f"joint stiffness on {stiff}")
    if m.nmocap:
        out.append(f"{m.nmocap} mocap body(ies) (treated as fixed to the world)")
    gravcomp = np.flatnonzero(np.asarray(getattr(m, "body_gravcomp", np.zeros(m.nbody))) != 0)
    if len(gravcomp):
        names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in gravcomp]
        out.append(f"gravity compensation on {names}")
    if getattr(m, "nflex", 0):
        out.append(f"{m.nflex} flex object(s)")
    return out


def _convert(mujoco, m, path: Path, keyframe, model_name: str) -> Model:
    d0 = _forward(mujoco, m, m.qpos0, np.zeros(m.nv))
    unsupported = _unsupported(
        mujoco, m, _joint_space_joints(mujoco, m, d0) | _composite_coordinates(mujoco, m, d0)
    )
    body_names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in range(m.nbody)]
    # owner: the jaxmbd body that a MuJoCo body belongs to (a jointless body is merged
    # into its parent's owner; -1 = ground)
    owner = np.full(m.nbody, -1)
    roots: list[int] = []
    for b in range(1, m.nbody):
        parent = m.body_parentid[b]
        if m.body_jntnum[b] == 0 and not m.body_mocapid[b] >= 0:
            owner[b] = owner[parent]
        elif m.body_mocapid[b] >= 0:
            owner[b] = -1
        else:
            owner[b] = b
            roots.append(b)
    gravity = np.asarray(m.opt.gravity, dtype=np.float64)
    if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = np.zeros(3)
    builder = ModelBuilder(name=model_name, gravity=tuple(float(g) for g in gravity))
    frame: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    shape_of: dict[int, tuple[str, int]] = {}  # geom -> (jaxmbd body or ground, shape index)
    for b in roots:
        members = [k for k in range(1, m.nbody) if owner[k] == b]
        mass = float(sum(m.body_mass[k] for k in members))
        if not mass > 0:
            raise ModelError(
                f"body '{body_names[b]}': zero mass (with its welded children {members}); "
                "jaxmbd needs a positive mass for every moving body"
            )
        com = sum(m.body_mass[k] * d0.xipos[k] for k in members) / mass
        J = np.zeros((3, 3))
        for k in members:
            R = d0.ximat[k].reshape(3, 3)
            c = d0.xipos[k] - com
            J += R @ np.diag(m.body_inertia[k]) @ R.T
            J += m.body_mass[k] * (c @ c * np.eye(3) - np.outer(c, c))
        A = d0.xmat[b].reshape(3, 3).copy()
        J_body = A.T @ J @ A
        J_body = 0.5 * (J_body + J_body.T)
        shapes = []
        for k in members:
            for g in range(m.body_geomadr[k], m.body_geomadr[k] + m.body_geomnum[k]):
                shape = _geom_shape(mujoco, m, d0, g, com, A)
                if shape is not None:
                    shape_of[g] = (body_names[b], len(shapes))
                    shapes.append(shape)
        builder.add_body(
            body_names[b], mass=mass, inertia=J_body, r=com, A=A, shapes=shapes or None
        )
        frame[b] = (com, A)

    def label(b: int) -> str:
        o = owner[b]
        return GROUND if o < 0 else body_names[o]

    mapped = {}  # jaxmbd joint name -> ((coordinate, qpos address), ...) where q = qpos
    joint_space_only = []  # why the absolute formulations cannot run the model
    placed = set(mapped)  # the joints whose state sets their child body's placement
    for b in roots:
        joints = _add_joints(mujoco, m, d0, builder, b, label(m.body_parentid[b]), body_names[b])
        mapped.update(joints)
        if _composition(mujoco, m, d0, b) is None:
            joint_space_only.append(_joint_space_reason(mujoco, m, b))
        else:
            placed.update(joints)
    # the hinges and slides inside compositions: coordinates only joint space has
    space = {spec.name for spec in builder._joints if spec.joint_space}
    placed -= space
    unsupported += unsupported_equalities(mujoco, m)
    equality_reasons: list[str] = []
    add_equality_joints(mujoco, m, d0, builder, label, equality_reasons)
    aliases = _cylindrical_coordinates(mujoco, m)
    joint_space_only += add_tendons(mujoco, m, d0, builder, label, aliases, space, unsupported)
    equalities, coupling_reasons = equalities_of(mujoco, m, d0, roots, owner,
                                                 tendons_of(builder))  # fmt: skip
    if (ball_and_free := quaternion_joint_passive(mujoco, m, str(path))) is not None:
        builder.add_force(ball_and_free)
    add_actuators(mujoco, m, builder, set(mapped), unsupported, aliases=aliases,
                  tendons={t["name"] for t in builder._tendons})  # fmt: skip
    add_site_markers(mujoco, m, d0, builder, owner, body_names)
    add_sensors(mujoco, m, d0, builder, owner, body_names, frame, set(mapped) - space,
                unsupported, shape_of=shape_of)  # fmt: skip
    add_fluid(mujoco, m, d0, builder, owner, body_names, frame)
    _add_ground_geoms(mujoco, m, d0, builder, owner, shape_of)
    masses = {body_names[b]: float(sum(m.body_mass[k] for k in range(1, m.nbody)
                                       if owner[k] == b)) for b in roots}  # fmt: skip
    add_contacts(mujoco, m, builder, shape_of, lambda name: masses.get(name, math.inf), unsupported)
    soft_unsupported: list[str] = []
    constraints = constraint_model(
        mujoco, m, d0, roots, owner, soft_unsupported, tendons=tendons_of(builder)
    )
    if unsupported:
        message = f"{path}: not supported by jaxmbd and ignored: " + "; ".join(unsupported)
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=3)
    if soft_unsupported:  # the file's default run differs from MuJoCo's there: say so
        message = (
            f"{path}: MuJoCo's constraint model (contact='soft', this file's default) differs "
            "from MuJoCo's here: " + "; ".join(soft_unsupported)
        )
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=3)
    qpos, qvel, source = _keyframe_state(mujoco, m, path, keyframe)
    key = _body_states(mujoco, m, roots, owner, qpos, qvel)
    _set_joint_states(builder, placed, mapped, key, qpos)
    model = _at_state(builder.build(), key)
    model = dataclasses.replace(
        with_actuation_flags(m, model),
        tree=_tree(mujoco, m, path, roots, qpos, qvel),
        joint_space_only=tuple(joint_space_only + equality_reasons + coupling_reasons),
        equalities=equalities,
        constraint_model=constraints,
    )
    if switched_off(m, "equality"):
        model = with_equalities(model, "none", where=str(path))
    logger.info("%s: %d bodies, initial state from the %s", path, len(roots), source)
    return model


def _tree(mujoco, m, path, roots, qpos, qvel):
    """The kinematic tree in MuJoCo's joints, tree body k the model's body k."""
    tree = tree_from_mujoco(mujoco, m, qpos, qvel)
    if list(tree.bodies) != list(roots):
        names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in roots]
        raise ModelFileError(
            path, None, f"the kinematic tree's bodies {list(tree.tree.body_names)} are not "
            f"the model's bodies {names}"
        )  # fmt: skip
    return tree.tree


def _collides(m, g: int) -> bool:
    """Whether MuJoCo collides geom g with anything: its bits, or an explicit <pair>."""
    return bool(m.geom_contype[g] or m.geom_conaffinity[g]) or g in _paired_geoms(m)


def _paired_geoms(m) -> set[int]:
    return {int(g) for g in (*m.pair_geom1, *m.pair_geom2)}


def _add_ground_geoms(mujoco, m, d, builder: ModelBuilder, owner, shape_of):
    """The geoms of the world and of bodies welded to it: planes as ground planes, the
    others as ground shapes (global pose), drawn and colliding as MuJoCo's."""
    for g in range(m.ngeom):
        if owner[int(m.geom_bodyid[g])] >= 0:
            continue
        if int(m.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_HFIELD):
            if _collides(m, g):
                shape_of[g] = (GROUND, len(builder._ground_shapes))
                builder.add_ground_shape(hfield_shape(m, d, g))
            continue
        if int(m.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_PLANE):
            size = np.asarray(m.geom_size[g][:2])
            R = d.geom_xmat[g].reshape(3, 3)
            shape_of[g] = (GROUND, len(builder._ground_shapes))
            builder.add_ground_plane(
                d.geom_xpos[g], R[:, 2], size=tuple(2 * size) if np.all(size > 0) else None
            )
            continue
        shape = _geom_shape(mujoco, m, d, g, np.zeros(3), np.eye(3))
        if shape is not None:
            shape_of[g] = (GROUND, len(builder._ground_shapes))
            builder.add_ground_shape(shape)


def _geom_shape(mujoco, m, d, g, com, A):
    """Geom g as a shape in the frame (com, A), colliding when MuJoCo collides it; None
    for a geom that is neither drawn (transparent) nor colliding, and for kinds that
    have no shape (planes, height fields, SDFs)."""
    T = mujoco.mjtGeom
    geom_type, size = m.geom_type[g], np.asarray(m.geom_size[g])
    pos = A.T @ (d.geom_xpos[g] - com)
    R = A.T @ d.geom_xmat[g].reshape(3, 3)
    rgba = np.asarray(m.geom_rgba[g])
    collide = _collides(m, g)
    if rgba[3] == 0 and not collide:
        return None
    # MuJoCo's default grey says nothing: leave the colour to the animation's body palette
    default = np.allclose(rgba, [0.5, 0.5, 0.5, 1.0])
    color = (
        None
        if default
        else "#{:02x}{:02x}{:02x}".format(*(np.clip(rgba[:3], 0, 1) * 255).astype(int))
    )
    style = dict(color=color, collide=collide)

    def mesh():
        mid = m.geom_dataid[g]
        v0, nv = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
        f0, nf = m.mesh_faceadr[mid], m.mesh_facenum[mid]
        V = np.asarray(m.mesh_vert[v0 : v0 + nv], dtype=np.float64)
        F = np.asarray(m.mesh_face[f0 : f0 + nf], dtype=np.int64)
        return G.mesh(V, F, pos=pos, A=R, **style)  # geom frame: MuJoCo's centre

    makers = {
        int(T.mjGEOM_BOX): lambda: G.box(2 * size, pos=pos, A=R, **style),
        int(T.mjGEOM_SPHERE): lambda: G.sphere(size[0], pos=pos, **style),
        int(T.mjGEOM_CAPSULE): lambda: G.capsule(size[0], 2 * size[1], pos=pos, A=R, **style),
        int(T.mjGEOM_CYLINDER): lambda: G.cylinder(size[0], 2 * size[1], pos=pos, A=R, **style),
        int(T.mjGEOM_ELLIPSOID): lambda: G.ellipsoid(2 * size, pos=pos, A=R, **style),
        int(T.mjGEOM_MESH): mesh,
    }
    make = makers.get(int(geom_type))
    return None if make is None else make()  # planes, height fields, SDFs: not drawn


def _body_states(mujoco, m, roots, owner, qpos, qvel):
    """Poses and velocities (r, A, rdot, body-frame omega; one row per jaxmbd body) from
    MuJoCo's kinematics at (qpos, qvel)."""
    d = _forward(mujoco, m, qpos, qvel)
    n = len(roots)
    r, A, rdot, omega = np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    vel = np.zeros(6)
    for k, b in enumerate(roots):
        members = [j for j in range(1, m.nbody) if owner[j] == b]
        mass = float(sum(m.body_mass[j] for j in members))
        com = sum(m.body_mass[j] * d.xipos[j] for j in members) / mass
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
        w, v_com_b = vel[:3].copy(), vel[3:].copy()  # world frame, at body b's own COM
        r[k], A[k] = com, d.xmat[b].reshape(3, 3)
        rdot[k] = v_com_b + np.cross(w, com - d.xipos[b])
        omega[k] = A[k].T @ w
    return r, A, rdot, omega


def _set_joint_states(builder: ModelBuilder, placed, mapped, key, qpos):
    """The keyframe as joint states, through :meth:`ModelBuilder.set_joint_state`: each
    library joint's coordinates from MuJoCo's poses at the keyframe, its angles on the
    branch of MuJoCo's qpos (a hinge at 5 rad stays at 5 rad). Joints in ``mapped`` but not
    in ``placed`` (joint-space only) start at their qpos without placing their body."""
    index = {b.name: k for k, b in enumerate(builder._bodies)}
    index[GROUND] = len(builder._bodies)
    for spec in builder._joints:
        if spec.name in mapped and spec.name not in placed:
            for c, address in mapped[spec.name]:
                spec.q_start[c] = qpos[address]
            continue
        if spec.name not in placed:
            continue  # an equality connect: closed by the consistent start
        q, qdot = joint_state_at(spec.definition(index), *key)
        q = np.atleast_1d(q).copy()
        for c, address in mapped[spec.name]:
            if c in joint_kind(spec.kind).angles:
                q[c] += 2 * np.pi * np.round((qpos[address] - q[c]) / (2 * np.pi))
        builder.set_joint_state(spec.name, q=q, qdot=qdot)


def _at_state(model: Model, key) -> Model:
    """``model`` with its bodies at MuJoCo's kinematics of the keyframe (exactly: free
    bodies, bodies on three slides and bodies whose joints are joint-space only have no
    joint state to set, and the joint states of the others reproduce MuJoCo's poses only to
    round-off, which grows down long chains)."""
    r, A, v, w = (device_array(x) for x in key)
    return dataclasses.replace(model, r0=r, A0=A, rdot0=v, omega0=w)
