"""MuJoCo's actuators as jaxmbd actuators (:mod:`jaxmbd.actuators`).

An MJCF actuator maps when its transmission is a tendon (:mod:`jaxmbd.mjcf._tendons`) or a
joint that jaxmbd drives (a hinge or
slide whose coordinate is MuJoCo's qpos, :mod:`jaxmbd.mjcf`; those inside a universal,
three-hinge spherical, planar or three-slide joint act in the ``"joint"`` formulation
only), its activation dynamics (``dyntype``) are none, integrator, filter or filterexact
(with ``dynprm[0]`` the filter's time constant, ``actlimited``/``actrange``, ``actearly``;
:mod:`jaxmbd.actuators`), and it has a fixed gain and no or an affine bias: exactly
MuJoCo's force gain u + b0 + b1 L + b2 L_dot with L = gear qpos (the activation in place
of u where it has one), the clamps of
``ctrllimited``/``ctrlrange`` and ``forcelimited``/``forcerange`` and the generalised force
gear F. ``<motor>``, ``<position>`` and ``<velocity>`` keep their kinds (recognised from
the gain and bias MuJoCo compiled them to); any other such actuator is "general". The
controls of :func:`~jaxmbd.simulate` are the mapped actuators in MuJoCo's order; the others
(site or body transmissions, muscles, user dynamics) are named in the importer's one
warning.
"""

from __future__ import annotations

import numpy as np

from ..actuators import ACTIVATION_DYNAMICS, NO_DYNAMICS

# MuJoCo's mjtDyn values (mjDYN_NONE, mjDYN_INTEGRATOR, mjDYN_FILTER, mjDYN_FILTEREXACT)
_DYNAMICS = {0: "none", 1: "integrator", 2: "filter", 3: "filterexact"}


def _kind(gain: float, bias) -> tuple[str, dict]:
    """The actuator kind and builder options of MuJoCo's compiled gain and bias."""
    b0, b1, b2 = bias
    if gain == 1.0 and b0 == b1 == b2 == 0.0:
        return "motor", {}
    if gain > 0 and b0 == 0.0 and b1 == -gain and b2 <= 0.0:
        return "position", {"kp": gain, **({"kv": -b2} if b2 < 0 else {})}
    if gain > 0 and b0 == b1 == 0.0 and b2 == -gain:
        return "velocity", {"kv": gain}
    return "general", {"gain": gain, "bias": (b0, b1, b2)}


def add_actuators(mujoco, m, builder, joint_names: set[str], unsupported: list[str], *,
                  aliases: dict[int, str] | None = None, tendons=frozenset()):  # fmt: skip
    """Add the actuators of ``m`` that drive joints in ``joint_names`` (jaxmbd joints named
    as MuJoCo's) or in ``aliases`` ({MuJoCo joint id: jaxmbd coordinate}, the hinge and
    slide of a cylindrical joint: ``"<joint>.angle"``, ``"<joint>.slide"``); name the others
    in ``unsupported``."""
    aliases = aliases or {}
    left_out = []
    for k in range(m.nu):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, k) or f"actuator{k}"
        joint, j, tendon = None, -1, None
        if int(m.actuator_trntype[k]) == int(mujoco.mjtTrn.mjTRN_TENDON):
            tendon = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, int(m.actuator_trnid[k][0]))
        if int(m.actuator_trntype[k]) == int(mujoco.mjtTrn.mjTRN_JOINT):
            j = int(m.actuator_trnid[k][0])
            scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
            if j in aliases:
                joint = aliases[j]
            elif int(m.jnt_type[j]) in scalar:
                joint = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        reasons = []
        if tendon is not None:
            if tendon not in tendons:
                reasons.append("transmission")
        elif joint is None or (joint not in joint_names and j not in aliases):
            reasons.append("transmission")
        dynamics = _DYNAMICS.get(int(m.actuator_dyntype[k]))
        if dynamics is None:
            name_of = mujoco.mjtDyn(m.actuator_dyntype[k]).name.removeprefix("mjDYN_").lower()
            reasons.append(f"activation dynamics {name_of}")
        if int(m.actuator_gaintype[k]) != int(mujoco.mjtGain.mjGAIN_FIXED):
            reasons.append("gain type")
        if int(m.actuator_biastype[k]) not in (
            int(mujoco.mjtBias.mjBIAS_NONE),
            int(mujoco.mjtBias.mjBIAS_AFFINE),
        ):
            reasons.append("bias type")
        if reasons:
            left_out.append(f"'{name}' ({', '.join(reasons)})")
            continue
        gain = float(m.actuator_gainprm[k][0])
        bias = tuple(float(x) for x in np.asarray(m.actuator_biasprm[k][:3]))
        if int(m.actuator_biastype[k]) == int(mujoco.mjtBias.mjBIAS_NONE):
            bias = (0.0, 0.0, 0.0)
        kind, options = _kind(gain, bias)
        rule = ACTIVATION_DYNAMICS[dynamics]
        if rule is not NO_DYNAMICS:
            options.update(dynamics=dynamics, act_early=bool(m.actuator_actearly[k]),
                           act_range=tuple(m.actuator_actrange[k])
                           if m.actuator_actlimited[k] else None)  # fmt: skip
            if rule.time_constant:
                options["time_constant"] = max(float(m.actuator_dynprm[k][0]), 1e-15)
        builder.add_actuator(
            name,
            **({"joint": joint} if tendon is None else {"tendon": tendon}),
            kind=kind,
            gear=float(m.actuator_gear[k][0]),
            ctrl_range=tuple(m.actuator_ctrlrange[k]) if m.actuator_ctrllimited[k] else None,
            force_range=tuple(m.actuator_forcerange[k]) if m.actuator_forcelimited[k] else None,
            **options,
        )
    if left_out:
        unsupported.append(
            "actuators " + ", ".join(left_out) + " (jaxmbd's controls are the other "
            "actuators, in MuJoCo's order)"
        )
