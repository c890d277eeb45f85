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
  the ``"joint"`` formulation, which reads their qpos, applies those; the absolute
  formulations leave them out (their coordinate is not the hinge's qpos once the other
  hinges have turned; :attr:`jaxmbd._joint_forces.AbstractJointForce.absolute_entries`)
  and the one warning names them.
* **Kinematic tree**: ``model.tree`` is the model in MuJoCo's joints and qpos layout
  (:func:`jaxmbd.tree.tree_from_mujoco`, body k of the tree is body k of the model) at the
  initial state.
* **Joint coordinates** (``sol.joints[name]``, :mod:`jaxmbd.joints`) are MuJoCo's ``qpos``
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
* **Equality constraints**: ``connect`` → a spherical joint at the anchor, ``weld`` → a
  rigid joint (spherical + three DP1), both hard (exact) closed loops.
* **Initial state**: the first keyframe when the file has one, else the reference pose at
  rest; ``keyframe=`` picks another (index or name), or ``keyframe=None`` the reference pose.
  A keyframe's ``qpos`` and ``qvel`` set every joint through
  :meth:`~jaxmbd.ModelBuilder.set_joint_state` (its coordinates read from MuJoCo's own
  kinematics of the keyframe, angles on the branch of its qpos). The initial body states
  are MuJoCo's kinematics of (qpos, qvel).
* **Joint limits**: a body's single hinge or slide with ``limited`` ``range`` gets the
  compliant limit of :mod:`jaxmbd.joint_limits` on its coordinate (qpos units; default
  gains, not MuJoCo's ``solref``/``solimp``); a hinge range of a full turn or more is left
  out. The slide and hinge of a cylindrical joint ``"a+b"`` get theirs on its coordinates
  ``"a+b.slide"`` and ``"a+b.angle"`` (whose q is their qpos), and so do their damping,
  stiffness, friction loss, armature and actuators; the hinges and slides of a body whose
  joints compose into no GCON joint get theirs on their own names.
* **Contacts** (:mod:`jaxmbd._mjcf_contact`): the geom pairs MuJoCo collides become the
  shape pairs of jaxmbd contact pairs, with friction, stiffness, restitution and slip
  velocity from ``friction``, ``solref`` and ``solimp``; the world's planes and geoms are
  ground planes and ground shapes.
* **Joint damping, stiffness, friction loss**: a body's single hinge or slide gets
  ``damping``, ``stiffness`` about ``springref`` (``qpos_spring``, qpos units),
  ``frictionloss`` and ``armature`` as :mod:`jaxmbd.joint_dynamics` (friction loss
  regularised, not MuJoCo's soft constraint row).
* **Sensors** (:mod:`jaxmbd._mjcf_sensors`): ``jointpos``, ``jointvel``, ``ballquat``,
  ``ballangvel``, ``framepos``, ``framequat``, ``framelinvel``, ``frameangvel``,
  ``accelerometer``, ``gyro`` and ``velocimeter`` become ``model.sensors``
  (``sol.sensors[name]``, :mod:`jaxmbd.sensors`) with their ``noise``.
* **Sites**: every named ``<site>`` on a moving body becomes a marker of that name
  (``sol.markers[name]``, :mod:`jaxmbd.markers`).
* Whatever is not supported (in the absolute formulations: limits, damping, stiffness,
  friction loss, armature and actuators of the hinges and slides of universal, three-hinge
  spherical, planar and three-slide joints; tendons, actuators, sensors (touch, force,
  torque, subtree, ...), other equality types, mocap bodies, torsional friction, contact
  margins, geom pairs without a narrow phase, ...) is listed in **one** warning; nothing
  is dropped silently.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from . import geometry as G
from ._mjcf_actuators import add_actuators
from ._mjcf_contact import add_contacts
from ._mjcf_sensors import add_sensors, add_site_markers
from ._values import _axis_frame
from .build import ModelBuilder
from .errors import ModelError, ModelFileError
from .joints import REVOLUTE, TRANSLATIONAL, joint_coordinates, joint_kind
from .model import GROUND, Model
from .tree import tree_from_mujoco

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


def _name(mujoco, m, objtype, k: int, prefix: str) -> str:
    name = mujoco.mj_id2name(m, objtype, k)
    return name if name else f"{prefix}{k}"


def load_robot(path, *, keyframe=_FIRST, name: str | None = None) -> Model:
    """Load an MJCF (``.xml``) or URDF (``.urdf``) file as a jaxmbd :class:`Model`.

    ``keyframe``: index or name of the keyframe that sets the initial state (default: the
    first one when the file has keyframes, else the reference pose at rest); ``None``: the
    reference pose at rest. ``name``: the model's name (default: the file's model / robot
    name, else the file name).
    """
    mujoco = _mujoco()
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
    T = mujoco.mjtJoint
    hinge = int(T.mjJNT_HINGE)
    # hinges and slides of their own coordinate; those inside compositions are named by
    # _absolute_formulations_ignore
    scalar = set(cylindrical) | {
        j for j in joint_space if int(m.jnt_type[j]) in (hinge, int(T.mjJNT_SLIDE))
    }
    mapped = _mapped_limits(mujoco, m) | {
        j for j in scalar if _limits(m, j, int(m.jnt_type[j]) == hinge) is not None
    }
    limited = [jn[j] for j in np.flatnonzero(m.jnt_limited) if j not in mapped]
    if limited:
        out.append(
            f"joint limits on {limited} (only hinges and slides with their own coordinate are "
            "limited: a body's single hinge or slide, the hinge and slide of a cylindrical "
            "joint, those of a body whose joints compose into no GCON joint; a hinge range "
            "of a full turn or more)"
        )
    dof_jnt = np.asarray(m.dof_jntid)
    # their damping, stiffness, friction loss and armature map
    passive = _single_scalar_joints(mujoco, m) | scalar
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
    if m.ntendon:
        out.append(f"{m.ntendon} tendon(s)")
    if m.nmocap:
        out.append(f"{m.nmocap} mocap body(ies) (treated as fixed to the world)")
    gravcomp = np.flatnonzero(np.asarray(getattr(m, "body_gravcomp", np.zeros(m.nbody))) != 0)
    if len(gravcomp):
        names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in gravcomp]
        out.append(f"gravity compensation on {names}")
    if getattr(m, "nflex", 0):
        out.append(f"{m.nflex} flex object(s)")
    if np.any(np.asarray(m.opt.wind) != 0) or m.opt.density or m.opt.viscosity:
        out.append("fluid forces (wind, density, viscosity)")
    return out


def _rot_lock_vectors(A_i, A_j):
    """Local vectors of three DP1 rows that lock the relative rotation of two frames."""
    e = np.eye(3)
    pairs = ((e[0], e[1]), (e[1], e[2]), (e[2], e[0]))
    return [(A_i.T @ u, A_j.T @ v) for u, v in pairs]


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
    _add_equalities(mujoco, m, d0, builder, label, body_names, unsupported)
    add_actuators(mujoco, m, builder, set(mapped), unsupported,
                  aliases=_cylindrical_coordinates(mujoco, m))  # fmt: skip
    absolute_only = _absolute_formulations_ignore(builder, space)
    if absolute_only:
        unsupported.append(absolute_only)
    add_site_markers(mujoco, m, d0, builder, owner, body_names)
    add_sensors(mujoco, m, d0, builder, owner, body_names, frame, set(mapped) - space,
                unsupported)  # fmt: skip
    _add_ground_geoms(mujoco, m, d0, builder, owner, shape_of)
    masses = {body_names[b]: float(sum(m.body_mass[k] for k in range(1, m.nbody)
                                       if owner[k] == b)) for b in roots}  # fmt: skip
    add_contacts(mujoco, m, builder, shape_of, lambda name: masses.get(name, math.inf), unsupported)
    if unsupported:
        message = f"{path}: not supported by jaxmbd and ignored: " + "; ".join(unsupported)
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=3)
    qpos, qvel, source = _keyframe_state(mujoco, m, path, keyframe)
    key = _body_states(mujoco, m, roots, owner, qpos, qvel)
    _set_joint_states(builder, placed, mapped, key, qpos)
    model = _at_state(builder.build(), key)
    model = dataclasses.replace(
        model,
        tree=_tree(mujoco, m, path, roots, qpos, qvel),
        joint_space_only=tuple(joint_space_only),
    )
    logger.info("%s: %d bodies, initial state from the %s", path, len(roots), source)
    return model


def _absolute_formulations_ignore(builder: ModelBuilder, space: set[str]) -> str:
    """The unsupported-features clause of the hinges and slides inside compositions
    (``space``) whose limits, passive values or actuators only the ``"joint"`` formulation
    applies (empty: none)."""
    limited = sorted(space & set(builder._limits))
    passive = sorted(space & set(builder._dynamics))
    actuated = [a["name"] for a in builder._actuators if a["joint"] in space]
    parts = [f"{label} {names}" for label, names in (
        ("limits on", limited), ("damping, stiffness, friction loss or armature on", passive),
        ("actuators", actuated)) if names]  # fmt: skip
    if not parts:
        return ""
    return (
        "in the absolute formulations only (the joint formulation applies them): "
        + ", ".join(parts)
        + " (hinges and slides inside universal, three-hinge spherical, planar or "
        "three-slide joints, whose coordinates the body states do not give one by one)"
    )


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
    return bool(m.geom_contype[g] or m.geom_conaffinity[g])


def _add_ground_geoms(mujoco, m, d, builder: ModelBuilder, owner, shape_of):
    """The geoms of the world and of bodies welded to it: planes as ground planes, the
    others as ground shapes (global pose), drawn and colliding as MuJoCo's."""
    for g in range(m.ngeom):
        if owner[int(m.geom_bodyid[g])] >= 0:
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

    def ellipsoid():  # drawn as the sphere scaled into a mesh
        V, F = G.sphere(1.0).mesh(16)
        return G.mesh((V * size) @ R.T + pos, F, **style)

    def mesh():
        mid = m.geom_dataid[g]
        v0, nv = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
        f0, nf = m.mesh_faceadr[mid], m.mesh_facenum[mid]
        V = np.asarray(m.mesh_vert[v0 : v0 + nv], dtype=np.float64)
        F = np.asarray(m.mesh_face[f0 : f0 + nf], dtype=np.int64)
        return G.mesh(V @ R.T + pos, F, **style)

    makers = {
        int(T.mjGEOM_BOX): lambda: G.box(2 * size, pos=pos, A=R, **style),
        int(T.mjGEOM_SPHERE): lambda: G.sphere(size[0], pos=pos, **style),
        int(T.mjGEOM_CAPSULE): lambda: G.capsule(size[0], 2 * size[1], pos=pos, A=R, **style),
        int(T.mjGEOM_CYLINDER): lambda: G.cylinder(size[0], 2 * size[1], pos=pos, A=R, **style),
        int(T.mjGEOM_ELLIPSOID): ellipsoid,
        int(T.mjGEOM_MESH): mesh,
    }
    make = makers.get(int(geom_type))
    return None if make is None else make()  # planes, height fields, SDFs: not drawn


def _limits(m, j: int, hinge: bool):
    """A hinge's or slide's ``range`` when ``limited`` (qpos units, which are the joint
    coordinate's), else None; a hinge range of a full turn or more cannot act on the
    principal angle and is left out (named by the unsupported-features warning)."""
    if not m.jnt_limited[j]:
        return None
    lo, hi = (float(x) for x in m.jnt_range[j])
    if hinge and hi - lo >= 2 * np.pi:
        return None
    return (lo, hi)


def _cylindrical_coordinates(mujoco, m) -> dict[int, str]:
    """{MuJoCo joint: jaxmbd coordinate} of the hinges and slides that are a body's
    cylindrical joint (a slide and a hinge on one axis line, as :func:`_add_joints` maps
    them): the slide is ``"<joint>.slide"`` and the hinge ``"<joint>.angle"``, each with
    MuJoCo's qpos as coordinate (:data:`jaxmbd._joint_forces.CYLINDRICAL_VIEWS`)."""
    T = mujoco.mjtJoint
    out = {}
    for b in range(1, m.nbody):
        jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        kinds = [int(m.jnt_type[j]) for j in jids]
        if len(jids) != 2 or sorted(kinds) != sorted([int(T.mjJNT_HINGE), int(T.mjJNT_SLIDE)]):
            continue
        axes = [np.asarray(m.jnt_axis[j], dtype=np.float64) for j in jids]  # body frame
        axes = [a / np.linalg.norm(a) for a in axes]
        gap = np.asarray(m.jnt_pos[jids[1]]) - np.asarray(m.jnt_pos[jids[0]])
        if abs(abs(axes[0] @ axes[1]) - 1) < 1e-9 and np.linalg.norm(np.cross(gap, axes[0])) < 1e-9:
            names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in jids]
            suffix = {int(T.mjJNT_HINGE): "angle", int(T.mjJNT_SLIDE): "slide"}
            for j, jnt_type in zip(jids, kinds, strict=True):
                out[j] = f"{'+'.join(names)}.{suffix[jnt_type]}"
    return out


def _single_scalar_joints(mujoco, m) -> set[int]:
    """Joints that are a body's only joint and a hinge or slide (a revolute or translational
    joint with MuJoCo's qpos as coordinate)."""
    T = mujoco.mjtJoint
    scalar = (int(T.mjJNT_HINGE), int(T.mjJNT_SLIDE))
    return {
        int(m.body_jntadr[b])
        for b in range(1, m.nbody)
        if m.body_jntnum[b] == 1 and int(m.jnt_type[m.body_jntadr[b]]) in scalar
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


def _mapped_limits(mujoco, m) -> set[int]:
    """Joints whose limits become compliant limits: the one hinge or slide of a body."""
    T = mujoco.mjtJoint
    out = set()
    for b in range(1, m.nbody):
        if m.body_jntnum[b] == 1:
            j = int(m.body_jntadr[b])
            hinge = int(m.jnt_type[j]) == int(T.mjJNT_HINGE)
            if hinge or int(m.jnt_type[j]) == int(T.mjJNT_SLIDE):
                if _limits(m, j, hinge) is not None:
                    out.add(j)
    return out


def _composition(mujoco, m, d, b) -> str | None:
    """The library joint that body ``b``'s MuJoCo joints form (MuJoCo's ``xanchor`` and
    ``xaxis`` in ``d``): "free", "single" (one hinge, slide or ball), "universal",
    "cylindrical", "spherical" (three hinges), "planar", "translation" (three slides);
    None when they form none (the body's joints are joint-space only)."""
    T = mujoco.mjtJoint
    hinge, slide = int(T.mjJNT_HINGE), int(T.mjJNT_SLIDE)
    jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    kinds = [int(m.jnt_type[j]) for j in jids]
    anchors = [np.array(d.xanchor[j]) for j in jids]
    axes = [np.array(d.xaxis[j]) for j in jids]
    if kinds == [int(T.mjJNT_FREE)]:
        return "free"
    if len(jids) == 1:
        return "single"
    same_point = all(np.linalg.norm(p - anchors[0]) < 1e-9 for p in anchors)
    if kinds == [hinge] * 2 and same_point and abs(axes[0] @ axes[1]) < 1e-9:
        return "universal"
    if sorted(kinds) == sorted([hinge, slide]) and (
        abs(abs(axes[0] @ axes[1]) - 1) < 1e-9
        and np.linalg.norm(np.cross(anchors[1] - anchors[0], axes[0])) < 1e-9
    ):
        return "cylindrical"
    if kinds == [hinge] * 3 and same_point and abs(np.linalg.det(np.stack(axes))) > 1e-6:
        return "spherical"
    slides = [axes[k] for k in range(len(jids)) if kinds[k] == slide]
    hinges = [k for k in range(len(jids)) if kinds[k] == hinge]
    if len(slides) == 2 and len(hinges) == 1 and len(jids) == 3:
        normal = np.cross(slides[0], slides[1])
        h = axes[hinges[0]]
        if np.linalg.norm(normal) > 1e-6 and np.linalg.norm(np.cross(normal, h)) < 1e-9:
            return "planar"
    if len(slides) == 3 and len(jids) == 3 and abs(np.linalg.det(np.stack(slides))) > 1e-6:
        return "translation"
    return None


def _joint_space_reason(mujoco, m, b) -> str:
    """Why body ``b`` needs the ``"joint"`` formulation (:attr:`Model.joint_space_only`)."""
    jids = range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
    kind_names = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge",
                  int(mujoco.mjtJoint.mjJNT_SLIDE): "slide",
                  int(mujoco.mjtJoint.mjJNT_BALL): "ball"}  # fmt: skip
    joints = ", ".join(
        f"{_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, 'joint')} "
        f"({kind_names.get(int(m.jnt_type[j]), 'free')})"
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


#: Compositions whose hinges and slides are also coordinates of their own in joint space.
_COMPOSITIONS_WITH_COORDINATES = ("universal", "spherical", "planar", "translation")


def _composite_coordinates(mujoco, m, d) -> set[int]:
    """The hinges and slides inside the compositions of
    :data:`_COMPOSITIONS_WITH_COORDINATES` (their limits, passive values and actuators act
    in joint space only)."""
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return {
        j
        for b in range(1, m.nbody)
        if m.body_jntnum[b] > 1 and _composition(mujoco, m, d, b) in _COMPOSITIONS_WITH_COORDINATES
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
        if int(m.jnt_type[j]) in scalar
    }


def _add_joints(mujoco, m, d, builder: ModelBuilder, b, parent: str, child: str):
    """The library joint of body ``b``'s MuJoCo joints: {name: ((coordinate, qpos address),
    ...)}, the coordinates that equal a MuJoCo qpos (all but a spherical joint's; the
    in-plane slides of a planar joint only when the two slides come first and are
    orthogonal); {} for a free body and three slides (no library joint). Joints that form
    no library joint: one joint per MuJoCo joint, without rows
    (:func:`_add_joint_space_joints`)."""
    T = mujoco.mjtJoint
    jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    kinds = [int(m.jnt_type[j]) for j in jids]
    names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in jids]
    anchors = [np.array(d.xanchor[j]) for j in jids]
    axes = [np.array(d.xaxis[j]) for j in jids]
    adr = [int(m.jnt_qposadr[j]) for j in jids]
    qpos0 = np.asarray(m.qpos0)
    composition = _composition(mujoco, m, d, b)
    if composition == "free":
        return {}
    if composition is None:
        return _add_joint_space_joints(mujoco, m, builder, jids, parent, child, anchors, axes)

    def convention(name, order, signs=None):
        """q = qpos: MuJoCo's qpos0 as the offset, the axes' directions as the signs."""
        builder._joint_convention(
            name, offset=[qpos0[adr[k]] for k in order], sign=signs or [1] * len(order)
        )
        return {name: tuple((c, adr[k]) for c, k in enumerate(order))}

    if composition == "single":
        name = names[0]
        # a hinge or a slide: the builder's joint of that name; else a ball
        spec = {int(T.mjJNT_HINGE): REVOLUTE, int(T.mjJNT_SLIDE): TRANSLATIONAL}.get(kinds[0])
        if spec is not None:
            getattr(builder, spec.name)(
                name, body_i=parent, body_j=child, point=anchors[0], axis=axes[0],
                limits=_limits(m, jids[0], spec.angular), **_passive(mujoco, m, jids[0]),
            )  # fmt: skip
            return convention(name, [0])
        builder.spherical(name, body_i=parent, body_j=child, point=anchors[0])  # ball
        return {name: ()}
    joint_space = {}  # the composition's hinges and slides as coordinates of joint space
    if composition in _COMPOSITIONS_WITH_COORDINATES:
        for j, point, axis in zip(jids, anchors, axes, strict=True):
            if int(m.jnt_type[j]) in (int(T.mjJNT_HINGE), int(T.mjJNT_SLIDE)):
                joint_space.update(
                    _add_coordinate_joint(mujoco, m, builder, j, parent, child, point, axis,
                                          joint_space=True)
                )  # fmt: skip
    return {**_add_composition(mujoco, m, builder, composition, jids, kinds, names, anchors,
                               axes, adr, parent, child), **joint_space}  # fmt: skip


def _add_composition(mujoco, m, builder, composition, jids, kinds, names, anchors, axes, adr,
                     parent, child):  # fmt: skip
    """The library joint of a body's several MuJoCo joints that compose into one (see
    :func:`_add_joints`)."""
    T = mujoco.mjtJoint
    qpos0 = np.asarray(m.qpos0)
    where = f"body '{child}'"
    joined = "+".join(names)

    def convention(name, order, signs=None):
        """q = qpos: MuJoCo's qpos0 as the offset, the axes' directions as the signs."""
        builder._joint_convention(
            name, offset=[qpos0[adr[k]] for k in order], sign=signs or [1] * len(order)
        )
        return {name: tuple((c, adr[k]) for c, k in enumerate(order))}

    if composition == "universal":
        builder.universal(
            joined, body_i=parent, body_j=child, point=anchors[0], axis_i=axes[0], axis_j=axes[1]
        )
        return convention(joined, [0, 1])
    if composition == "cylindrical":
        order = [kinds.index(int(T.mjJNT_SLIDE)), kinds.index(int(T.mjJNT_HINGE))]
        # each MuJoCo joint's range, damping, stiffness, ... on its coordinate (qpos units)
        passive = [_passive(mujoco, m, jids[k]) for k in order]
        builder.cylindrical(
            joined, body_i=parent, body_j=child, point=anchors[0], axis=axes[0],
            limits=tuple(_limits(m, jids[k], kinds[k] == T.mjJNT_HINGE) for k in order),
            **{key: tuple(p[key] for p in passive) for key in passive[0]},
        )  # fmt: skip
        return convention(joined, order, [float(axes[k] @ axes[0]) for k in order])
    if composition == "spherical":
        builder.spherical(joined, body_i=parent, body_j=child, point=anchors[0])
        return {joined: ()}
    slide_ids = [k for k in range(len(jids)) if kinds[k] == int(T.mjJNT_SLIDE)]
    slides = [axes[k] for k in slide_ids]
    if composition == "planar":
        h = next(k for k in range(len(jids)) if kinds[k] == int(T.mjJNT_HINGE))
        normal = np.cross(slides[0], slides[1])
        # in-plane axes x = the first slide, y = the second where they are orthogonal
        exact = abs(slides[0] @ slides[1]) < 1e-9 and h == 2
        n = normal / np.linalg.norm(normal) if exact else axes[h]
        builder.planar(
            joined, body_i=parent, body_j=child, point=anchors[h], axis=n, x_axis=slides[0]
        )
        signs = [1, 1, float(axes[h] @ n)]
        if exact:
            return convention(joined, [*slide_ids, h], signs)
        # the slides' qpos are not the in-plane coordinates: only the angle is MuJoCo's
        builder._joint_convention(joined, offset=[0.0, 0.0, qpos0[adr[h]]], sign=signs)
        return {joined: ((2, adr[h]),)}
    # three slides, pure translation: the relative rotation is locked by three DP1 rows
    A_i = builder._frame(parent, where=where)[1]
    A_j = builder._frame(child, where=where)[1]
    for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
        builder.add_dp1(
            f"{joined}.dp1_{k}", body_i=parent, a_bar_i=a_i, body_j=child, a_bar_j=a_j,
            joint=joined,
        )  # fmt: skip
    return {}


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
        if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_BALL):
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
    hinge = int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE)
    kind = "revolute" if hinge else "translational"
    builder._record_joint(name, kind, parent, child, point, _axis_frame(axis),
                          joint_space=joint_space)  # fmt: skip
    adr = int(m.jnt_qposadr[j])
    builder._joint_convention(name, offset=[float(m.qpos0[adr])], sign=[1])
    builder._record_limits(name, _limits(m, j, hinge), None, None)
    passive = _passive(mujoco, m, j)
    builder._record_dynamics(
        name, *(passive[key] for key in ("damping", "stiffness", "spring_reference",
                                          "friction_loss", "armature")),
    )  # fmt: skip
    return {name: ((0, adr),)}


def _add_equalities(mujoco, m, d, builder, label, body_names, unsupported):
    E = mujoco.mjtEq
    handlers = {int(E.mjEQ_CONNECT): _add_connect, int(E.mjEQ_WELD): _add_weld}
    for e in range(m.neq):
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "equality")
        eq_type = int(m.eq_type[e])
        if not m.eq_active0[e]:
            unsupported.append(f"inactive equality '{name}' (left out)")
            continue
        add = handlers.get(eq_type)
        if add is None:
            type_name = str(E(eq_type)).split(".")[-1].removeprefix("mjEQ_").lower()
            unsupported.append(f"equality '{name}' of type {type_name}")
            continue
        if getattr(m, "eq_objtype", None) is not None and int(m.eq_objtype[e]) not in (
            int(mujoco.mjtObj.mjOBJ_BODY),
            int(mujoco.mjtObj.mjOBJ_XBODY),
        ):
            unsupported.append(f"equality '{name}' between sites")
            continue
        b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        i, j = label(b1), label(b2)
        if i == j:
            unsupported.append(f"equality '{name}' inside one rigid body (no effect)")
            continue
        R1 = d.xmat[b1].reshape(3, 3)
        anchor = d.xpos[b1] + R1 @ np.asarray(m.eq_data[e][:3])
        add(m, d, builder, e, name, i, j, b2, anchor)


def _add_connect(m, d, builder, e, name, i, j, b2, anchor):
    """An equality connect: a spherical joint at body 1's anchor."""
    R2 = d.xmat[b2].reshape(3, 3)
    other = d.xpos[b2] + R2 @ np.asarray(m.eq_data[e][3:6])
    if np.linalg.norm(other - anchor) > 1e-6:
        logger.warning(
            "equality connect '%s': the anchors are %.3g apart at the reference "
            "pose; the loop is closed at body 1's anchor",
            name,
            np.linalg.norm(other - anchor),
        )
    builder.spherical(name, body_i=i, body_j=j, point=anchor)


def _add_weld(m, d, builder, e, name, i, j, b2, anchor):
    """An equality weld: rows only (a weld has no joint coordinates)."""
    builder._spherical_rows(name, body_i=i, body_j=j, point=anchor)
    A_i = builder._frame(i, where=name)[1]
    A_j = builder._frame(j, where=name)[1]
    for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
        builder.add_dp1(f"{name}.dp1_{k}", body_i=i, a_bar_i=a_i, body_j=j, a_bar_j=a_j, joint=name)


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
        state = joint_coordinates(spec.definition(index), *(x[None] for x in key))
        q = np.atleast_1d(np.asarray(state.q)[0]).copy()
        for c, address in mapped[spec.name]:
            if c in joint_kind(spec.kind).angles:
                q[c] += 2 * np.pi * np.round((qpos[address] - q[c]) / (2 * np.pi))
        builder.set_joint_state(spec.name, q=q, qdot=np.asarray(state.qdot)[0])


def _at_state(model: Model, key) -> Model:
    """``model`` with its bodies at MuJoCo's kinematics of the keyframe (exactly: free
    bodies, bodies on three slides and bodies whose joints are joint-space only have no
    joint state to set, and the joint states of the others reproduce MuJoCo's poses only to
    round-off, which grows down long chains)."""
    r, A, v, w = (jnp.asarray(x) for x in key)
    return dataclasses.replace(model, r0=r, A0=A, rdot0=v, omega0=w)
