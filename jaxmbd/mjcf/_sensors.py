"""MuJoCo's sensors as jaxmbd sensors (:mod:`jaxmbd.sensors`).

=================================== =========================================================
MJCF                                jaxmbd kind
=================================== =========================================================
``jointpos``, ``jointvel``          joint_position, joint_velocity (a body's single hinge or
                                    slide: MuJoCo's qpos, qvel)
``ballquat``, ``ballangvel``        joint_position, joint_velocity of the spherical joint
``framepos``, ``framequat``,        body_position, body_quaternion, body_x_axis (y, z),
``framexaxis`` (y, z),              body_linear_velocity, body_angular_velocity of a site,
``framelinvel``, ``frameangvel``    geom, body (``objtype="body"``: its inertial frame,
                                    ``xipos``) or body frame (``"xbody"``: ``xpos``), on a
                                    moving body or the world, against ``reftype``/``refname``
``accelerometer``, ``gyro``,        accelerometer, gyro, velocimeter at the site
``velocimeter``
``touch``                           touch, the site's shape and size as its zone
``force``, ``torque``               interaction_force, interaction_torque at the site (on a
                                    body welded to its parent: with the welded part, see
                                    below)
``rangefinder`` (on a site,         rangefinder, the geoms ``mj_ray`` tests as its targets
distance only)                      (every visible geom but the site's body's: planes,
                                    spheres, capsules, ellipsoids, cylinders, boxes,
                                    height fields)
``subtreecom``, ``subtreelinvel``,  subtree_com, subtree_linear_velocity,
``subtreeangmom``                   subtree_angular_momentum (the world: every body)
``actuatorfrc``                     actuator_force of a jaxmbd actuator
``jointactuatorfrc``                joint_actuator_force
``tendonpos``, ``tendonvel``        tendon_position, tendon_velocity (:mod:`~.tendon_sensors`)
=================================== =========================================================

The object's frame becomes a site on the jaxmbd body that owns its MuJoCo body (a jointless
body is merged into its parent, :mod:`jaxmbd.mjcf`): its point and axes at the reference
pose (``qpos0``) in that body's frame; on the world it is a fixed frame. A touch sensor
counts the contacts of the whole jaxmbd body (MuJoCo's counts those of the site's own
MuJoCo body: they differ only where a merged body's contacts fall in the zone). A force
or torque sensor on a body merged into its parent reads the wrench that the rest of the
jaxmbd body exerts on the merged part (the MuJoCo body and those welded below it: its
mass, centre of mass, inertia and the contact forces on its geoms) and on the jaxmbd
bodies hanging from it (MuJoCo's ``cfrc_int`` of that body). Subtree sensors on such a
body, geoms a rangefinder cannot see (meshes, SDFs), and every other sensor
(limit sensors, camera rangefinders, ...) and any ``cutoff`` are named in the importer's
one warning. ``noise`` maps to
the sensor's noise (MuJoCo stores it without applying it; jaxmbd applies it with
``simulate(sensor_key=)``).

Every named ``<site>`` on a moving body also becomes a **marker** of that name
(:mod:`jaxmbd.model.markers`, ``sol.markers[name]``): its point and axes at the reference pose,
on the jaxmbd body that owns its MuJoCo body (sites on the world are constants and are
left out).
"""

from __future__ import annotations

import functools

import numpy as np

from ..geometry._ray_cast import RAY_FIELDS, RAY_SHAPES
from ..model import GROUND

#: (MuJoCo body, global point, global axes) of a sensor's object ``(m, d, objid)``, by its
#: ``mjtObj`` name: a site's, a geom's, a body's inertial frame, a body's own frame.
_OBJECT_FRAMES = {
    "mjOBJ_SITE": lambda m, d, k: (int(m.site_bodyid[k]), d.site_xpos[k],
                                   d.site_xmat[k].reshape(3, 3)),
    "mjOBJ_GEOM": lambda m, d, k: (int(m.geom_bodyid[k]), d.geom_xpos[k],
                                   d.geom_xmat[k].reshape(3, 3)),
    "mjOBJ_BODY": lambda m, d, k: (k, d.xipos[k], d.ximat[k].reshape(3, 3)),
    "mjOBJ_XBODY": lambda m, d, k: (k, d.xpos[k], d.xmat[k].reshape(3, 3)),
}  # fmt: skip


def _frames(mujoco, m, d, objtype: int, objid: int):
    """(MuJoCo body, global point, global axes) of a sensor's object at the pose of ``d``,
    or None for an object type without a frame here."""
    try:
        frame_of = _OBJECT_FRAMES.get(mujoco.mjtObj(objtype).name)
    except ValueError:  # not an mjtObj value (no object)
        return None
    return None if frame_of is None else frame_of(m, d, objid)


def _zone(mujoco, m, site: int):
    """(shape, size) of a site as a touch zone, or None for a shape without one."""
    T = mujoco.mjtGeom
    shapes = {int(T.mjGEOM_SPHERE): "sphere", int(T.mjGEOM_CAPSULE): "capsule",
              int(T.mjGEOM_ELLIPSOID): "ellipsoid", int(T.mjGEOM_CYLINDER): "cylinder",
              int(T.mjGEOM_BOX): "box"}  # fmt: skip
    shape = shapes.get(int(m.site_type[site]))
    return None if shape is None else (shape, np.array(m.site_size[site], dtype=np.float64))


def _touch_options(mujoco, m, site: int, owner, body_names, options) -> str | None:
    """A touch sensor's zone (:func:`_zone`), or why it has none."""
    zone = _zone(mujoco, m, site)
    if zone is None:
        return f"site shape {int(m.site_type[site])}"
    options["zone"] = zone
    return None


def _interaction_options(mujoco, m, site: int, owner, body_names, options, *, d=None,
                         shape_of=None) -> str | None:  # fmt: skip
    """An interaction sensor's body's parent and subtree (the joint it reads); on a body
    welded to its parent, the welded part (:func:`_welded_part`) and the bodies below it."""
    own = int(m.site_bodyid[site])
    if owner[own] != own:
        inside = _subtree(m, owner, own)
        options["part"] = _welded_part(m, d, owner, inside, shape_of or {})
        options["subtree"] = [body_names[b] for b in inside if owner[b] == b]
        options["parent"] = body_names[int(owner[own])]
        return None
    up = int(owner[m.body_parentid[own]])
    options["parent"] = GROUND if up < 0 else body_names[up]
    options["subtree"] = _members(m, owner, body_names, own)
    return None


def _welded_part(m, d, owner, inside, shape_of) -> dict:
    """The part of a jaxmbd body that a welded MuJoCo body's subtree ``inside`` holds (the
    subtree's bodies merged into the same jaxmbd body): mass, centre of mass and inertia
    about it (global, at the pose of ``d``) and its shapes (``shape_of``: geom -> (jaxmbd
    body, shape index)), as :meth:`~jaxmbd.ModelBuilder.add_sensor`'s ``part``."""
    host = int(owner[inside[0]])
    members = [int(b) for b in inside if owner[b] == host]
    mass = float(sum(m.body_mass[b] for b in members))
    com = sum(m.body_mass[b] * d.xipos[b] for b in members) / mass
    J = np.zeros((3, 3))
    for b in members:
        R = d.ximat[b].reshape(3, 3)
        c = d.xipos[b] - com
        J += R @ np.diag(m.body_inertia[b]) @ R.T + m.body_mass[b] * (c @ c * np.eye(3)
                                                                     - np.outer(c, c))  # fmt: skip
    shapes = [shape_of[g][1] for b in members
              for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
              if g in shape_of]  # fmt: skip
    return dict(mass=mass, com=np.array(com), inertia=J, shapes=shapes)


def _subtree(m, owner, body: int):
    """The MuJoCo bodies of ``body``'s subtree (itself and its descendants)."""
    inside = np.zeros(m.nbody, dtype=bool)
    inside[body] = True
    for b in range(body + 1, m.nbody):  # parents come before their children
        inside[b] = inside[m.body_parentid[b]]
    return np.flatnonzero(inside)


def _members(m, owner, body_names, body: int) -> list[str]:
    """The jaxmbd bodies of MuJoCo ``body``'s subtree (``body`` owns its jaxmbd body or is
    the world)."""
    return [body_names[b] for b in sorted({int(owner[b]) for b in _subtree(m, owner, body)
                                           if owner[b] >= 0})]  # fmt: skip


def _ray_targets(mujoco, m, d, owner, body_names, exclude: int):
    """The geoms ``mj_ray`` tests for a rangefinder on MuJoCo body ``exclude``
    (``engine_ray.c``, ``ray_eliminate`` with no group mask and static geoms included:
    every geom but those of ``exclude`` and the invisible ones, whose rgba, or their
    material's, has alpha 0), as :meth:`~jaxmbd.ModelBuilder.add_sensor`'s ``targets`` at
    the pose of ``d``; and the kinds of those that jaxmbd cannot ray-test (meshes, SDFs),
    with their names."""
    kinds = {int(v): k[len("mjGEOM_"):].lower() for k, v in vars(mujoco.mjtGeom).items()
             if k.startswith("mjGEOM_")}  # fmt: skip
    targets, unseen = [], []
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        mat = int(m.geom_matid[g])
        alpha = m.mat_rgba[mat][3] if mat >= 0 else m.geom_rgba[g][3]
        if b == exclude or alpha == 0:
            continue
        kind = kinds.get(int(m.geom_type[g]), str(int(m.geom_type[g])))
        on = GROUND if owner[b] < 0 else body_names[int(owner[b])]
        axes = np.array(d.geom_xmat[g]).reshape(3, 3)
        if RAY_FIELDS.get(kind) is not None:  # a grid: its elevations go with it
            h = int(m.geom_dataid[g])
            nrow, ncol, adr = int(m.hfield_nrow[h]), int(m.hfield_ncol[h]), int(m.hfield_adr[h])
            size = np.asarray(m.hfield_size[h], dtype=np.float64)
            data = np.asarray(m.hfield_data[adr : adr + nrow * ncol], dtype=np.float64)
            targets.append(dict(kind=kind, body=on, pos=np.array(d.geom_xpos[g]), axes=axes,
                                size=size[[0, 1, 3]],
                                heights=data.reshape(nrow, ncol) * size[2]))  # fmt: skip
            continue
        if kind not in RAY_SHAPES:
            geom = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
            unseen.append(f"{kind} '{geom}'")
            continue
        targets.append(dict(kind=kind, body=on, pos=np.array(d.geom_xpos[g]), axes=axes,
                            size=np.array(m.geom_size[g])))  # fmt: skip
    return targets, unseen


def add_sensors(mujoco, m, d, builder, owner, body_names, frame, joint_names, unsupported, *,
                shape_of=None):  # fmt: skip
    """Add the sensors of ``m`` that jaxmbd has (module docstring) to ``builder``; name the
    others in ``unsupported``. ``d``: MuJoCo's data at the reference pose; ``owner``: the
    jaxmbd body (a MuJoCo body index, -1 the ground) of each MuJoCo body; ``frame``: each
    jaxmbd body's (centre of mass, axes) at that pose; ``joint_names``: the mapped joints;
    ``shape_of``: geom -> (jaxmbd body, index in its shapes)."""
    interaction = functools.partial(_interaction_options, d=d, shape_of=shape_of)
    S = mujoco.mjtSensor
    joint_kinds = {
        int(S.mjSENS_JOINTPOS): "joint_position",
        int(S.mjSENS_JOINTVEL): "joint_velocity",
        int(S.mjSENS_BALLQUAT): "joint_position",
        int(S.mjSENS_BALLANGVEL): "joint_velocity",
    }
    frame_kinds = {
        int(S.mjSENS_FRAMEPOS): "body_position",
        int(S.mjSENS_FRAMEQUAT): "body_quaternion",
        int(S.mjSENS_FRAMEXAXIS): "body_x_axis",
        int(S.mjSENS_FRAMEYAXIS): "body_y_axis",
        int(S.mjSENS_FRAMEZAXIS): "body_z_axis",
        int(S.mjSENS_FRAMELINVEL): "body_linear_velocity",
        int(S.mjSENS_FRAMEANGVEL): "body_angular_velocity",
    }
    site_kinds = {
        int(S.mjSENS_ACCELEROMETER): "accelerometer",
        int(S.mjSENS_GYRO): "gyro",
        int(S.mjSENS_VELOCIMETER): "velocimeter",
        int(S.mjSENS_TOUCH): "touch",
        int(S.mjSENS_FORCE): "interaction_force",
        int(S.mjSENS_TORQUE): "interaction_torque",
    }
    tendon_kinds = {
        int(S.mjSENS_TENDONPOS): "tendon_position",
        int(S.mjSENS_TENDONVEL): "tendon_velocity",
    }
    # the options a site sensor needs besides its frame: (mujoco, m, site, owner,
    # body_names, options) -> why it is left out, or None
    site_options = {
        int(S.mjSENS_TOUCH): _touch_options,
        int(S.mjSENS_FORCE): interaction,
        int(S.mjSENS_TORQUE): interaction,
    }
    subtree_kinds = {
        int(S.mjSENS_SUBTREECOM): "subtree_com",
        int(S.mjSENS_SUBTREELINVEL): "subtree_linear_velocity",
        int(S.mjSENS_SUBTREEANGMOM): "subtree_angular_momentum",
    }
    type_names = {int(v): k[len("mjSENS_"):].lower() for k, v in vars(S).items()
                  if k.startswith("mjSENS_")}  # fmt: skip
    actuator_names = [a["name"] for a in builder._actuators]
    actuated = {a["joint"] for a in builder._actuators}

    def placed(objtype, objid):
        """(jaxmbd body or GROUND, site, axes in that body's frame), or a reason."""
        found = _frames(mujoco, m, d, objtype, objid)
        if found is None:
            return f"object type {objtype}"
        body, point, axes = found
        if owner[body] < 0:
            return GROUND, np.array(point), np.array(axes)
        com, A = frame[int(owner[body])]
        return body_names[int(owner[body])], A.T @ (np.asarray(point) - com), A.T @ axes

    left_out, cut = [], []
    blind: dict[str, list[str]] = {}  # geoms no ray test sees -> the rangefinders that miss them
    for k in range(m.nsensor):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k) or f"sensor{k}"
        stype, objtype, objid = (
            int(m.sensor_type[k]),
            int(m.sensor_objtype[k]),
            int(m.sensor_objid[k]),
        )
        label = f"'{name}' ({type_names.get(stype, stype)})"
        options = dict(noise=float(m.sensor_noise[k]))
        if stype in joint_kinds:
            joint = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, objid)
            if joint not in joint_names:
                left_out.append(f"{label}: joint '{joint}' is not a jaxmbd joint of its own")
                continue
            builder.add_sensor(name, kind=joint_kinds[stype], joint=joint, **options)
        elif stype in frame_kinds or stype in site_kinds:
            kind = frame_kinds.get(stype) or site_kinds[stype]
            where = placed(objtype, objid)
            if isinstance(where, str):
                left_out.append(f"{label}: {where}")
                continue
            body, site, axes = where
            if body == GROUND and stype in site_kinds:
                left_out.append(f"{label}: on the world")
                continue
            if int(m.sensor_refid[k]) >= 0:
                ref = placed(int(m.sensor_reftype[k]), int(m.sensor_refid[k]))
                if isinstance(ref, str):
                    left_out.append(f"{label}: reference {ref}")
                    continue
                options["reference"] = dict(body=ref[0], site=ref[1], frame=ref[2])
            extra = site_options.get(stype)
            reason = extra and extra(mujoco, m, objid, owner, body_names, options)
            if reason:
                left_out.append(f"{label}: {reason}")
                continue
            builder.add_sensor(name, kind=kind, body=body, site=site, frame=axes, **options)
        elif stype in subtree_kinds:
            root = GROUND if objid == 0 else owner[objid]
            if objid != 0 and root != objid:
                left_out.append(f"{label}: on a body welded to its parent")
                continue
            body = GROUND if objid == 0 else body_names[objid]
            builder.add_sensor(
                name,
                kind=subtree_kinds[stype],
                body=body,
                subtree=_members(m, owner, body_names, objid),
                **options,
            )
        elif stype in tendon_kinds:
            tendon = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, objid)
            builder.add_sensor(name, kind=tendon_kinds[stype], tendon=tendon, **options)
        elif stype == int(S.mjSENS_RANGEFINDER):
            where = placed(objtype, objid)
            if isinstance(where, str) or objtype != int(mujoco.mjtObj.mjOBJ_SITE):
                left_out.append(f"{label}: on a camera")
                continue
            if int(m.sensor_intprm[k][0]) != 1:  # MuJoCo's dataspec: the distance alone
                left_out.append(f"{label}: data other than the distance")
                continue
            targets, unseen = _ray_targets(
                mujoco, m, d, owner, body_names, int(m.site_bodyid[objid])
            )
            if unseen:
                blind.setdefault(", ".join(unseen), []).append(f"'{name}'")
            body, site, axes = where
            builder.add_sensor(name, kind="rangefinder", body=body, site=site, frame=axes,
                               targets=targets, **options)  # fmt: skip
        elif stype == int(S.mjSENS_ACTUATORFRC):
            actuator = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, objid)
            if actuator not in actuator_names:
                left_out.append(f"{label}: actuator '{actuator}' is not a jaxmbd actuator")
                continue
            builder.add_sensor(name, kind="actuator_force", actuator=actuator, **options)
        elif stype == int(S.mjSENS_JOINTACTFRC):
            joint = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, objid)
            if joint not in actuated and joint not in joint_names:
                left_out.append(f"{label}: joint '{joint}' has no coordinate of its own")
                continue
            builder.add_sensor(name, kind="joint_actuator_force", joint=joint, **options)
        else:
            left_out.append(label)
            continue
        if float(m.sensor_cutoff[k]) > 0:
            cut.append(f"'{name}'")
    if left_out:
        unsupported.append("sensors " + ", ".join(left_out))
    if cut:
        unsupported.append("the cutoff of sensors " + ", ".join(cut) + " (read unclipped)")
    for geoms, names in blind.items():
        unsupported.append(f"the geoms {geoms} as seen by the rangefinders {', '.join(names)} "
                           "(not ray-tested: their rays pass through)")  # fmt: skip


def add_site_markers(mujoco, m, d, builder, owner, body_names):
    """A marker (:meth:`~jaxmbd.ModelBuilder.add_marker`) for every named site of ``m`` on a
    moving body, at the pose of ``d`` (the reference pose, as the builder's bodies)."""
    for k in range(m.nsite):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, k)
        body = int(m.site_bodyid[k])
        if not name or body == 0 or owner[body] < 0:
            continue
        builder.add_marker(name, body_names[int(owner[body])], np.array(d.site_xpos[k]),
                           axes=np.array(d.site_xmat[k]).reshape(3, 3))  # fmt: skip
