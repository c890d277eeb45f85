"""MJCF and URDF import through MuJoCo's own parser (``pip install "jaxmbd[mjcf]"``).

``load_robot(path)`` (and ``jaxmbd.load_model`` for ``.xml``, ``.mjcf`` and ``.urdf`` files)
compiles the file with ``mujoco.MjModel.from_xml_path`` and reads the **world frames at the
reference pose** (``qpos0``) from ``mj_forward``:

* **Bodies**: every MuJoCo body that can move. The jaxmbd body frame is MuJoCo's body frame
  orientation (``xmat``) placed at the centre of mass (``xipos``); the mass and the **full**
  inertia tensor about the centre of mass in that frame come from ``body_mass``,
  ``body_inertia`` and ``ximat``. A body without joints is rigidly merged into its parent
  (masses, centres of mass and inertias combined; as MuJoCo's ``fusestatic``); one welded to
  the world is part of the ground. Geoms become the body's visual shapes.
* **Joints** (MuJoCo's ``xanchor`` and ``xaxis`` at the reference pose): hinge → revolute,
  slide → translational, ball → spherical, free → none (a free body). A body with several
  joints is mapped when the chain of joints is one of the library's joints: two hinges on
  perpendicular axes through one point → universal, a slide and a hinge on one axis →
  cylindrical, three hinges through one point on independent axes → spherical, two slides
  and a hinge normal to them → planar, three independent slides → pure translation; any other
  combination is a clear :class:`~jaxmbd.errors.ModelFileError` (massless intermediate
  bodies would make the mass matrix singular).
* **Equality constraints**: ``connect`` → a spherical joint at the anchor, ``weld`` → a
  rigid joint (spherical + three DP1), both hard (exact) closed loops.
* **Initial state**: the first keyframe when the file has one (its ``qpos`` and ``qvel``:
  joint values and rates become body poses and velocities through MuJoCo's own kinematics),
  else the reference pose at rest. ``keyframe=`` picks another (index or name), or
  ``keyframe=None`` the reference pose.
* Whatever is not supported (joint limits, contacts, joint damping / stiffness / armature /
  friction loss, tendons, actuators, other equality types, mocap bodies, ...) is listed in
  **one** warning; nothing is dropped silently.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np

from .errors import ModelError, ModelFileError
from .model import GROUND, Model, ModelBuilder

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


def _unsupported(mujoco, m) -> list[str]:
    out = []
    jn = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in range(m.njnt)]

    def joints_where(mask):
        return [jn[j] for j in np.flatnonzero(mask)]

    limited = joints_where(m.jnt_limited)
    if limited:
        out.append(f"joint limits on {limited}")
    dof_jnt = np.asarray(m.dof_jntid)
    for label, values in (
        ("damping", m.dof_damping),
        ("armature", m.dof_armature),
        ("friction loss", m.dof_frictionloss),
    ):
        hit = sorted({jn[dof_jnt[k]] for k in np.flatnonzero(np.asarray(values) != 0)})
        if hit:
            out.append(f"joint {label} on {hit}")
    stiff = joints_where(np.asarray(m.jnt_stiffness) != 0)
    if stiff:
        out.append(f"joint stiffness on {stiff}")
    colliding = np.flatnonzero((np.asarray(m.geom_contype) | np.asarray(m.geom_conaffinity)) != 0)
    if len(colliding) and not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT):
        out.append(f"contacts ({len(colliding)} colliding geoms; no contact model in jaxmbd)")
    if m.ntendon:
        out.append(f"{m.ntendon} tendon(s)")
    if m.nu:
        names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_ACTUATOR, k, "actuator") for k in range(m.nu)]
        out.append(f"actuators {names}")
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
    unsupported = _unsupported(mujoco, m)
    d0 = _forward(mujoco, m, m.qpos0, np.zeros(m.nv))
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
                    shapes.append(shape)
        builder.add_body(
            body_names[b], mass=mass, inertia=J_body, r=com, A=A, shapes=shapes or None
        )
        frame[b] = (com, A)

    def label(b: int) -> str:
        o = owner[b]
        return GROUND if o < 0 else body_names[o]

    for b in roots:
        _add_joints(mujoco, m, d0, builder, b, label(m.body_parentid[b]), body_names[b], path)
    _add_equalities(mujoco, m, d0, builder, label, body_names, unsupported)
    if unsupported:
        message = f"{path}: not supported by jaxmbd and ignored: " + "; ".join(unsupported)
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=3)
    qpos, qvel, source = _keyframe_state(mujoco, m, path, keyframe)
    _set_initial_state(mujoco, m, builder, roots, owner, body_names, qpos, qvel)
    logger.info("%s: %d bodies, initial state from the %s", path, len(roots), source)
    return builder.build()


def _geom_shape(mujoco, m, d, g, com, A):
    from . import geometry as G

    T = mujoco.mjtGeom
    kind, size = m.geom_type[g], np.asarray(m.geom_size[g])
    pos = A.T @ (d.geom_xpos[g] - com)
    R = A.T @ d.geom_xmat[g].reshape(3, 3)
    rgba = np.asarray(m.geom_rgba[g])
    if rgba[3] == 0:
        return None
    # MuJoCo's default grey says nothing: leave the colour to the animation's body palette
    default = np.allclose(rgba, [0.5, 0.5, 0.5, 1.0])
    color = (
        None
        if default
        else "#{:02x}{:02x}{:02x}".format(*(np.clip(rgba[:3], 0, 1) * 255).astype(int))
    )
    if kind == T.mjGEOM_BOX:
        return G.box(2 * size, pos=pos, A=R, color=color)
    if kind == T.mjGEOM_SPHERE:
        return G.sphere(size[0], pos=pos, color=color)
    if kind == T.mjGEOM_CAPSULE:
        return G.capsule(size[0], 2 * size[1], pos=pos, A=R, color=color)
    if kind == T.mjGEOM_CYLINDER:
        return G.cylinder(size[0], 2 * size[1], pos=pos, A=R, color=color)
    if kind == T.mjGEOM_ELLIPSOID:  # drawn as the sphere scaled into a mesh
        s = G.sphere(1.0)
        V, F = s.mesh(16)
        return G.mesh((V * size) @ R.T + pos, F, color=color)
    if kind == T.mjGEOM_MESH:
        mid = m.geom_dataid[g]
        v0, nv = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
        f0, nf = m.mesh_faceadr[mid], m.mesh_facenum[mid]
        V = np.asarray(m.mesh_vert[v0 : v0 + nv], dtype=np.float64)
        F = np.asarray(m.mesh_face[f0 : f0 + nf], dtype=np.int64)
        return G.mesh(V @ R.T + pos, F, color=color)
    return None  # planes, height fields, SDFs: not drawn


def _add_joints(mujoco, m, d, builder: ModelBuilder, b, parent: str, child: str, path):
    T = mujoco.mjtJoint
    jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    kinds = [int(m.jnt_type[j]) for j in jids]
    names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in jids]
    anchors = [np.array(d.xanchor[j]) for j in jids]
    axes = [np.array(d.xaxis[j]) for j in jids]
    where = f"body '{child}'"
    if kinds == [int(T.mjJNT_FREE)]:
        return
    if len(jids) == 1:
        kind, name = kinds[0], names[0]
        if kind == T.mjJNT_HINGE:
            builder.revolute(name, body_i=parent, body_j=child, point=anchors[0], axis=axes[0])
        elif kind == T.mjJNT_SLIDE:
            builder.translational(name, body_i=parent, body_j=child, point=anchors[0], axis=axes[0])
        elif kind == T.mjJNT_BALL:
            builder.spherical(name, body_i=parent, body_j=child, point=anchors[0])
        return
    joined = "+".join(names)
    same_point = all(np.linalg.norm(p - anchors[0]) < 1e-9 for p in anchors)
    if kinds == [int(T.mjJNT_HINGE)] * 2 and same_point and abs(axes[0] @ axes[1]) < 1e-9:
        builder.universal(
            joined, body_i=parent, body_j=child, point=anchors[0], axis_i=axes[0], axis_j=axes[1]
        )
        return
    if sorted(kinds) == sorted([int(T.mjJNT_HINGE), int(T.mjJNT_SLIDE)]) and (
        abs(abs(axes[0] @ axes[1]) - 1) < 1e-9
        and np.linalg.norm(np.cross(anchors[1] - anchors[0], axes[0])) < 1e-9
    ):
        builder.cylindrical(joined, body_i=parent, body_j=child, point=anchors[0], axis=axes[0])
        return
    if (
        kinds == [int(T.mjJNT_HINGE)] * 3
        and same_point
        and abs(np.linalg.det(np.stack(axes))) > 1e-6
    ):
        builder.spherical(joined, body_i=parent, body_j=child, point=anchors[0])
        return
    slides = [axes[k] for k in range(len(jids)) if kinds[k] == int(T.mjJNT_SLIDE)]
    hinges = [k for k in range(len(jids)) if kinds[k] == int(T.mjJNT_HINGE)]
    if len(slides) == 2 and len(hinges) == 1 and len(jids) == 3:
        normal = np.cross(slides[0], slides[1])
        n_h = axes[hinges[0]]
        if np.linalg.norm(normal) > 1e-6 and np.linalg.norm(np.cross(normal, n_h)) < 1e-9:
            builder.planar(joined, body_i=parent, body_j=child, point=anchors[hinges[0]], axis=n_h)
            return
    if len(slides) == 3 and len(jids) == 3 and abs(np.linalg.det(np.stack(slides))) > 1e-6:
        # pure translation: the relative rotation is locked by three DP1 rows
        A_i = builder._frame(parent, where=where)[1]
        A_j = builder._frame(child, where=where)[1]
        for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
            builder.add_dp1(
                f"{joined}.dp1_{k}", body_i=parent, a_bar_i=a_i, body_j=child, a_bar_j=a_j,
                joint=joined,
            )  # fmt: skip
        return
    kind_names = {int(T.mjJNT_HINGE): "hinge", int(T.mjJNT_SLIDE): "slide",
                  int(T.mjJNT_BALL): "ball", int(T.mjJNT_FREE): "free"}  # fmt: skip
    raise ModelFileError(
        path,
        where,
        f"joints {names} ({[kind_names[k] for k in kinds]}) do not form one jaxmbd joint; "
        "supported on one body: one hinge/slide/ball/free joint, two hinges on "
        "perpendicular axes through one point (universal), a slide and a hinge on one axis "
        "(cylindrical), three hinges through one point (spherical), two slides and a hinge "
        "normal to them (planar), three slides (translation). Split the body with "
        "massive intermediate bodies.",
    )


def _add_equalities(mujoco, m, d, builder, label, body_names, unsupported):
    E = mujoco.mjtEq
    for e in range(m.neq):
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "equality")
        kind = int(m.eq_type[e])
        if not m.eq_active0[e]:
            unsupported.append(f"inactive equality '{name}' (left out)")
            continue
        if kind not in (E.mjEQ_CONNECT, E.mjEQ_WELD):
            kind_name = str(E(kind)).split(".")[-1].removeprefix("mjEQ_").lower()
            unsupported.append(f"equality '{name}' of type {kind_name}")
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
        if kind == E.mjEQ_CONNECT:
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
        else:
            builder.spherical(name, body_i=i, body_j=j, point=anchor)
            A_i = builder._frame(i, where=name)[1]
            A_j = builder._frame(j, where=name)[1]
            for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
                builder.add_dp1(
                    f"{name}.dp1_{k}", body_i=i, a_bar_i=a_i, body_j=j, a_bar_j=a_j, joint=name
                )


def _set_initial_state(mujoco, m, builder, roots, owner, body_names, qpos, qvel):
    """Body poses and velocities from MuJoCo's kinematics at (qpos, qvel)."""
    d = _forward(mujoco, m, qpos, qvel)
    vel = np.zeros(6)
    for k, b in enumerate(roots):
        spec = builder._bodies[k]
        assert spec.name == body_names[b]
        members = [j for j in range(1, m.nbody) if owner[j] == b]
        mass = float(sum(m.body_mass[j] for j in members))
        com = sum(m.body_mass[j] * d.xipos[j] for j in members) / mass
        A = d.xmat[b].reshape(3, 3)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
        w, v_com_b = vel[:3].copy(), vel[3:].copy()  # world frame, at body b's own COM
        spec.r = np.array(com)
        spec.A = np.array(A)
        spec.rdot = v_com_b + np.cross(w, com - d.xipos[b])
        spec.omega = A.T @ w
