"""MuJoCo's tendons as jaxmbd tendons (:mod:`jaxmbd.tendons`, :mod:`jaxmbd.tendons.tendon_forces`).

``<fixed>`` tendons become fixed tendons over the hinges and slides by their MuJoCo names
(the coordinates of a cylindrical joint by ``"<joint>.slide"``/``"<joint>.angle"``);
``<spatial>`` tendons become paths through the sites (each on the jaxmbd body that owns its
MuJoCo body, at the reference pose), wrapping around sphere and cylinder geoms with their
side sites, with pulleys. ``stiffness`` about ``springlength`` (MuJoCo's compiled
``tendon_lengthspring``), ``damping``, ``frictionloss`` and ``limited``/``range`` (the
compliant limit law of the joints, with default gains of the effective inertia
1 / ``tendon_invweight0``) become the tendon's passive forces. Left out, and named in the
importer's warning: tendon armature, polynomial stiffness and damping, actuator force
limits on tendons (``actuatorfrcrange``). The model's ``spring``, ``damper``,
``frictionloss`` and ``limit`` flags switch the tendons' as the joints' off.
"""

from __future__ import annotations

import numpy as np

from ._flags import switched_off


def _name(mujoco, m, objtype, k: int, prefix: str) -> str:
    """MuJoCo's name of object k, or ``prefix`` and k (the importer's default names)."""
    return mujoco.mj_id2name(m, objtype, k) or f"{prefix}{k}"


def add_tendons(mujoco, m, d, builder, label, aliases: dict[int, str], space: set[str],
                unsupported: list[str]) -> list[str]:  # fmt: skip
    """Add the tendons of ``m`` to ``builder``. ``d``: MuJoCo's data at the reference pose;
    ``label(b)``: the jaxmbd body (or the ground) of MuJoCo body b; ``aliases``: {MuJoCo
    joint: jaxmbd coordinate} of the cylindrical joints' hinges and slides; ``space``: the
    coordinates only joint space has. Returns why the absolute formulations cannot run
    the tendons (fixed tendons over coordinates in ``space``)."""
    joint_space_only, left_out = [], []
    for i in range(m.ntendon):
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_TENDON, i, "tendon")
        adr, num = int(m.tendon_adr[i]), int(m.tendon_num[i])
        wraps = [(mujoco.mjtWrap(int(m.wrap_type[adr + k])).name, int(m.wrap_objid[adr + k]),
                  float(m.wrap_prm[adr + k])) for k in range(num)]  # fmt: skip
        for label_, field in (("armature", "tendon_armature"),
                              ("polynomial stiffness", "tendon_stiffnesspoly"),
                              ("polynomial damping", "tendon_dampingpoly")):  # fmt: skip
            values = getattr(m, field, None)
            if values is not None and np.any(np.asarray(values[i]) != 0):
                left_out.append(f"'{name}' ({label_})")
        if getattr(m, "tendon_actfrclimited", None) is not None and m.tendon_actfrclimited[i]:
            left_out.append(f"'{name}' (actuatorfrcrange)")
        # a fixed tendon's wraps are joints (mjWRAP_JOINT), a spatial tendon's are not
        add = _FIXED.get(wraps[0][0] if wraps else None, _add_spatial)
        joint_space_only += add(mujoco, m, d, builder, label, aliases, space, name, wraps,
                                _passive(m, i))  # fmt: skip
    if left_out:
        unsupported.append("tendon " + ", ".join(left_out))
    return joint_space_only


def _add_fixed(mujoco, m, d, builder, label, aliases, space, name, wraps, options) -> list[str]:
    """A ``<fixed>`` tendon over the joints ``wraps`` (MuJoCo's ``mjWRAP_JOINT``, the
    coefficient in ``wrap_prm``)."""
    joints, tree_joints = [], []
    for _, j, coef in wraps:
        jname = _name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
        joints.append((aliases.get(j, jname), coef))
        tree_joints.append(jname)
    builder.add_fixed_tendon(name, joints=joints, **options)
    builder._tendons[-1]["tree_joints"] = tuple(tree_joints)
    inside = [j for j, _ in joints if j in space]
    if not inside:
        return []
    return [f"fixed tendon '{name}' acts on {inside}, hinges or slides inside a composition "
            "of MuJoCo joints whose coordinates the body states do not give"]  # fmt: skip


def _add_spatial(mujoco, m, d, builder, label, aliases, space, name, wraps, options) -> list:
    """A ``<spatial>`` tendon: its path elements (:data:`_PATH_ELEMENTS`) in order."""
    path = []
    for kind, k, p in wraps:
        read = _PATH_ELEMENTS.get(kind)
        if read is None:
            raise ValueError(f"tendon '{name}': unknown wrap type {kind}")
        path.append(read(m, d, label, k, p))
    builder.add_spatial_tendon(name, path=path, **options)
    return []


def _site(m, d, label, k: int, p: float) -> tuple:
    """Site k: ``("site", body, point)``."""
    return ("site", label(int(m.site_bodyid[k])), np.array(d.site_xpos[k]))


def _pulley(m, d, label, k: int, p: float) -> tuple:
    """A pulley of divisor p: ``("pulley", p)``."""
    return ("pulley", p)


def _geom(m, d, label, k: int, p: float) -> tuple:
    """(body, centre, radius, side) of wrapping geom k with side site p (< 0: none)."""
    side = int(round(p))
    side = None if side < 0 else (label(int(m.site_bodyid[side])), np.array(d.site_xpos[side]))
    return label(int(m.geom_bodyid[k])), np.array(d.geom_xpos[k]), float(m.geom_size[k][0]), side


def _sphere(m, d, label, k: int, p: float) -> tuple:
    """Sphere geom k: ``("sphere", body, centre, radius, side)``."""
    return ("sphere", *_geom(m, d, label, k, p))


def _cylinder(m, d, label, k: int, p: float) -> tuple:
    """Cylinder geom k: ``("cylinder", body, centre, axes, radius, side)``."""
    body, centre, radius, side = _geom(m, d, label, k, p)
    return ("cylinder", body, centre, np.array(d.geom_xmat[k]).reshape(3, 3), radius, side)


#: The tendon whose first wrap is of this type (MuJoCo's ``mjtWrap`` name) is fixed.
_FIXED = {"mjWRAP_JOINT": _add_fixed}

#: A spatial tendon's path element ``(m, d, label, objid, prm) -> tuple`` of
#: :meth:`~jaxmbd.ModelBuilder.add_spatial_tendon`, by MuJoCo's ``mjtWrap`` name.
_PATH_ELEMENTS = {
    "mjWRAP_SITE": _site,
    "mjWRAP_PULLEY": _pulley,
    "mjWRAP_SPHERE": _sphere,
    "mjWRAP_CYLINDER": _cylinder,
}


def _passive(m, i: int) -> dict:
    """The builder options of tendon i's stiffness, damping, friction loss and limits (none
    of a kind that the model's flags switch off, :mod:`jaxmbd.mjcf._flags`)."""
    out = dict(
        stiffness=0.0 if switched_off(m, "spring") else float(m.tendon_stiffness[i]),
        spring_length=tuple(float(x) for x in np.asarray(m.tendon_lengthspring[i])),
        damping=0.0 if switched_off(m, "damper") else float(m.tendon_damping[i]),
        friction_loss=0.0 if switched_off(m, "frictionloss") else float(m.tendon_frictionloss[i]),
    )
    if m.tendon_limited[i] and not switched_off(m, "limit"):
        out["limits"] = tuple(float(x) for x in m.tendon_range[i])
        weight = float(m.tendon_invweight0[i])
        out["limit_inertia"] = 1.0 / weight if weight > 0 else 1.0
    return out
