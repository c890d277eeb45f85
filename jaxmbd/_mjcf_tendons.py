"""MuJoCo's tendons as jaxmbd tendons (:mod:`jaxmbd.tendons`, :mod:`jaxmbd.tendon_forces`).

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

from ._mjcf_flags import switched_off


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
    W = mujoco.mjtWrap
    obj = mujoco.mjtObj
    joint_space_only, left_out = [], []
    for i in range(m.ntendon):
        name = _name(mujoco, m, obj.mjOBJ_TENDON, i, "tendon")
        adr, num = int(m.tendon_adr[i]), int(m.tendon_num[i])
        types = [int(m.wrap_type[adr + k]) for k in range(num)]
        ids = [int(m.wrap_objid[adr + k]) for k in range(num)]
        prm = [float(m.wrap_prm[adr + k]) for k in range(num)]
        options = _passive(m, i)
        for label_, field in (("armature", "tendon_armature"),
                              ("polynomial stiffness", "tendon_stiffnesspoly"),
                              ("polynomial damping", "tendon_dampingpoly")):  # fmt: skip
            values = getattr(m, field, None)
            if values is not None and np.any(np.asarray(values[i]) != 0):
                left_out.append(f"'{name}' ({label_})")
        if getattr(m, "tendon_actfrclimited", None) is not None and m.tendon_actfrclimited[i]:
            left_out.append(f"'{name}' (actuatorfrcrange)")
        if types and types[0] == int(W.mjWRAP_JOINT):
            joints, tree_joints = [], []
            for j, coef in zip(ids, prm, strict=True):
                jname = _name(mujoco, m, obj.mjOBJ_JOINT, j, "joint")
                joints.append((aliases.get(j, jname), coef))
                tree_joints.append(jname)
            builder.add_fixed_tendon(name, joints=joints, **options)
            builder._tendons[-1]["tree_joints"] = tuple(tree_joints)
            inside = [j for j, _ in joints if j in space]
            if inside:
                joint_space_only.append(
                    f"fixed tendon '{name}' acts on {inside}, hinges or slides inside a "
                    "composition of MuJoCo joints whose coordinates the body states do not give"
                )
            continue
        path = []
        for kind, k, p in zip(types, ids, prm, strict=True):
            if kind == int(W.mjWRAP_SITE):
                path.append(("site", label(int(m.site_bodyid[k])), np.array(d.site_xpos[k])))
            elif kind == int(W.mjWRAP_PULLEY):
                path.append(("pulley", p))
            elif kind in (int(W.mjWRAP_SPHERE), int(W.mjWRAP_CYLINDER)):
                body = label(int(m.geom_bodyid[k]))
                centre = np.array(d.geom_xpos[k])
                radius = float(m.geom_size[k][0])
                side = int(round(p))
                side = None if side < 0 else (label(int(m.site_bodyid[side])),
                                              np.array(d.site_xpos[side]))  # fmt: skip
                if kind == int(W.mjWRAP_SPHERE):
                    path.append(("sphere", body, centre, radius, side))
                else:
                    axes = np.array(d.geom_xmat[k]).reshape(3, 3)
                    path.append(("cylinder", body, centre, axes, radius, side))
            else:
                raise ValueError(f"tendon '{name}': unknown wrap type {kind}")
        builder.add_spatial_tendon(name, path=path, **options)
    if left_out:
        unsupported.append("tendon " + ", ".join(left_out))
    return joint_space_only


def _passive(m, i: int) -> dict:
    """The builder options of tendon i's stiffness, damping, friction loss and limits (none
    of a kind that the model's flags switch off, :mod:`jaxmbd._mjcf_flags`)."""
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
