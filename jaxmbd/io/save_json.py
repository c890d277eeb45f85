"""Saving a model in jaxmbd's own schema (:mod:`jaxmbd.io.schema`) at GCON level, an exact
round trip through :func:`jaxmbd.load_model`."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

from ..actuators import ACTIVATION_DYNAMICS, NO_DYNAMICS, Actuators
from ..actuators._kinds import actuator_kind
from ..contact import HuntCrossley
from ..gcons import gcon_kind
from ..geometry._ray_cast import RAY_FIELDS
from ..model import GROUND, Model
from ..model.drivers import program_to_source
from ..model.joints import joint_kind
from ..sensors import sensor_kind
from .schema import _CONTACT_NUMBERS, _JOINT_FRAME_FIELDS, _OWN_KEYS, FORMAT

logger = logging.getLogger("jaxmbd")


def save_model(model: Model, path, *, solver: dict | None = None) -> Path:
    """Write ``model`` in jaxmbd's own schema at GCON level (an exact round trip), with its
    joints' coordinate definitions (``joint_coordinates``). Tendons have no entries in the
    schema: a model with tendons is refused. MuJoCo's constraint model of an MJCF file
    (``model.constraint_model``, run by ``contact="soft"``) stays with that file: the model
    read back runs jaxmbd's own contact and limits."""
    if model.equalities:
        raise ValueError(
            f"save_model: model '{model.name}' has MJCF equality constraints "
            f"{[e.name for e in model.equalities]}, which jaxmbd's schema does not hold (an "
            "exact round trip would lose them); keep the MJCF file, or save "
            "jaxmbd.joint_space.equalities.with_equalities(model, 'none')"
        )
    path = Path(path)
    if getattr(model, "tendons", None) is not None:
        raise ValueError(
            f"save_model: model '{model.name}' has tendons {list(model.tendons.names)}, which "
            "model files do not hold; keep its source (the MJCF file, or the builder code)"
        )
    nb = model.nb
    bodies = []
    for b, name in enumerate(model.body_names):
        bodies.append(
            {
                "name": name,
                "mass": float(model.mass[b]),
                "inertia": np.asarray(model.inertia[b]).tolist(),
                "r": np.asarray(model.r0[b]).tolist(),
                "A": np.asarray(model.A0[b]).tolist(),
                "rdot": np.asarray(model.rdot0[b]).tolist(),
                "omega": np.asarray(model.omega0[b]).tolist(),
            }
        )
        if model.shapes and model.shapes[b]:
            bodies[-1]["shapes"] = [shape.to_json() for shape in model.shapes[b]]
    f_source = {row: repr(float(model.f_offset[row])) for row in range(model.nc)}
    for group in model.drivers:
        for k, row in enumerate(group.rows):
            src = program_to_source(group.program, np.asarray(group.constants[k]))
            offset = float(model.f_offset[row])
            f_source[row] = src if offset == 0.0 else f"{offset!r} + {src}"
    constraints = [None] * model.nc
    for s in model.gcons:
        fields = {
            "DP1": {"a_bar_i": s.a_bar_i, "a_bar_j": s.a_bar_j},
            "DP2": {"a_bar_i": s.a_bar_i, "s_bar_p_i": s.s_bar_p_i, "s_bar_q_j": s.s_bar_q_j},
            "D": {"s_bar_p_i": s.s_bar_p_i, "s_bar_q_j": s.s_bar_q_j},
            "CD": {"c": s.c, "s_bar_p_i": s.s_bar_p_i, "s_bar_q_j": s.s_bar_q_j},
            "ROT": {"u_bar_i": s.a_bar_i, "v_bar_i": s.b_bar_i, "a_bar_j": s.a_bar_j},
        }[s.kind]
        for k, row in enumerate(s.rows):
            entry = {
                "name": model.constraint_names[row],
                "type": s.kind,
                "body_i": model.body_label(s.body_i[k]) if s.body_i[k] < nb else GROUND,
                "body_j": model.body_label(s.body_j[k]) if s.body_j[k] < nb else GROUND,
            }
            entry.update({key: np.asarray(val[k]).tolist() for key, val in fields.items()})
            entry[gcon_kind(s.kind).file_value] = f_source[row]
            entry["joint"] = model.constraint_joints[row]
            constraints[row] = entry
    forces = []
    contacts = model.contacts
    for k, force in enumerate(model.forces):
        if force.file_section != "forces":
            continue  # written with the joints and as "contacts" and "actuators"
        entry = force.to_json(model.body_label)
        if entry is None:
            logger.warning(
                "save_model: force element %d (%s) is a Python function and is not saved",
                k,
                type(force).__name__,
            )
            continue
        forces.append({"name": entry.pop("name", f"force_{k}"), **entry})
    doc = {
        "format": FORMAT,
        "version": 1,
        "name": model.name,
        "gravity": np.asarray(model.gravity).tolist(),
        "bodies": bodies,
        "constraints": constraints,
    }
    if forces:
        doc["forces"] = forces
    if model.ground_shapes:
        doc["ground_shapes"] = [shape.to_json() for shape in model.ground_shapes]
    if contacts is not None:
        doc["contacts"] = [
            {
                "body_i": model.body_label(i),
                "body_j": model.body_label(j),
                "friction": float(contacts.friction[p]),
                **{key: float(getattr(contacts, key)[p]) for key in _CONTACT_NUMBERS},
                **(
                    {}
                    if contacts.shapes[p] is None
                    else {"shapes": [list(pair) for pair in contacts.shapes[p]]}
                ),
                **_law_to_json(contacts.law_of_pair[p]),
            }  # fmt: skip
            for p, (i, j) in enumerate(contacts.pairs)
        ]
    joint_forces = _joint_forces_to_json(model)
    space = _joint_space_coordinates(model)
    space_names = {d.name for d in space}
    if model.joints or space:
        doc["joint_coordinates"] = [
            {
                "name": d.name,
                "type": d.kind,
                "body_i": model.body_label(d.body_i),
                "body_j": model.body_label(d.body_j),
                **{key: np.asarray(getattr(d, key)).tolist() for key in _JOINT_FRAME_FIELDS},
                "offset": np.asarray(d.offset).tolist(),
                "sign": list(d.sign),
                "q_start": np.asarray(d.q_start).tolist(),
                **joint_forces.get(d.name, {}),
                **{
                    suffix: joint_forces[f"{d.name}.{suffix}"]
                    for suffix, _ in joint_kind(d.kind).views
                    if f"{d.name}.{suffix}" in joint_forces
                },
                **({"joint_space": True} if d.name in space_names else {}),
            }
            for d in model.joints + space
        ]
    if model.actuators is not None:
        doc["actuators"] = _actuators_to_json(model.actuators)
    if model.sensors is not None:
        doc["sensors"] = _sensors_to_json(model)
    if model.markers is not None:
        doc["markers"] = _markers_to_json(model)
    if model.tree is not None:
        doc["tree"] = {
            key: (np.asarray(value).tolist() if hasattr(value, "shape") else list(value))
            for key, value in ((key, getattr(model.tree, key)) for key in _OWN_KEYS["tree"])
        }
    if model.joint_space_only:
        doc["joint_space_only"] = list(model.joint_space_only)
    if solver:
        doc["solver"] = dict(solver)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _sensors_to_json(model: Model) -> list[dict]:
    """Every sensor as :meth:`ModelBuilder.add_sensor`'s options (body sensors with their
    site and frame)."""
    sensors, out = model.sensors, []

    def label(b):
        return GROUND if b >= model.nb else model.body_names[b]

    for k, (name, kind) in enumerate(zip(sensors.sensor_names, sensors.kinds, strict=True)):
        entry = {"name": name, "kind": kind}
        params = sensors.params[k] if sensors.params else None
        if sensors.joints[k] is not None:
            entry["joint"] = sensors.joints[k]
        elif sensors.bodies[k] >= 0:
            entry["body"] = label(sensors.bodies[k])
            entry["site"] = np.asarray(sensors.site[k]).tolist()
            entry["frame"] = np.asarray(sensors.frame[k]).tolist()
        option = sensor_kind(kind).params
        if option == "reference" and params is not None:
            entry["reference"] = {"body": label(params.body),
                                  "site": np.asarray(params.site).tolist(),
                                  "frame": np.asarray(params.frame).tolist()}  # fmt: skip
        elif option in ("subtree", "interaction"):
            entry["subtree"] = [label(b) for b in params.bodies]
            if option == "interaction":
                entry["parent"] = label(params.parent)
            if option == "interaction" and params.part is not None:
                b = sensors.bodies[k]
                r0, A0 = np.asarray(model.r0[b]), np.asarray(model.A0[b])
                part = params.part
                entry["part"] = {
                    "mass": float(part.mass),
                    "com": (r0 + A0 @ np.asarray(part.com)).tolist(),
                    "inertia": (A0 @ np.asarray(part.inertia) @ A0.T).tolist(),
                    "shapes": list(part.shapes),
                }
        elif option == "zone":
            entry["zone"] = [params.shape, np.asarray(params.size).tolist()]
        elif option == "targets":
            entry["targets"] = []
            fields = iter(params.heights)
            for kind, b, pos, rot, size in zip(params.kinds, params.bodies, params.pos,
                                               params.rot, params.size, strict=True):  # fmt: skip
                pos, rot = np.asarray(pos), np.asarray(rot)
                if b < model.nb:  # global at the initial configuration
                    r0, A0 = np.asarray(model.r0[b]), np.asarray(model.A0[b])
                    pos, rot = r0 + A0 @ pos, A0 @ rot
                entry["targets"].append({"kind": kind, "body": label(b), "pos": pos.tolist(),
                                         "axes": rot.tolist(),
                                         "size": np.asarray(size).tolist()})  # fmt: skip
                if RAY_FIELDS.get(kind) is not None:  # a grid: its elevations
                    entry["targets"][-1]["heights"] = np.asarray(next(fields)).tolist()
        elif option == "actuator":
            entry["actuator"] = model.actuators.actuator_names[params.actuators[0]]
        entry["noise"] = float(sensors.noise[k])
        out.append(entry)
    return out


def _markers_to_json(model: Model) -> list[dict]:
    """Every marker as :meth:`ModelBuilder.add_marker`'s arguments: point and axes global,
    at the model's initial configuration."""
    markers, out = model.markers, []
    r0, A0 = np.asarray(model.r0), np.asarray(model.A0)
    for k, name in enumerate(markers.marker_names):
        b = markers.bodies[k]
        out.append({
            "name": name,
            "body": model.body_names[b],
            "point": (r0[b] + A0[b] @ np.asarray(markers.point[k])).tolist(),
            "axes": (A0[b] @ np.asarray(markers.axes[k])).tolist(),
        })  # fmt: skip
    return out


def _joint_space_coordinates(model: Model) -> tuple:
    """The joint definitions of the joint forces' entries that the absolute formulations
    leave out (coordinates only joint space has), once each."""
    out = {}
    for force in model.forces:
        if not force.acts_along_joints:
            continue
        kept = set(force.absolute_rows.tolist())
        for k, d in enumerate(force.joints):
            if k not in kept:
                out.setdefault(d.name, d)
    return tuple(out.values())


def _joint_forces_to_json(model: Model) -> dict[str, dict]:
    """Each limited or damped joint's entries (by joint name): its limits with their gains
    as built (defaults resolved), and its joint dynamics (see :data:`_JOINT_FORCE_KEYS`)."""
    out: dict[str, dict] = {}
    for force in model.forces:
        for name, entries in force.joint_entries().items():
            out.setdefault(name, {}).update(entries)
    return out


def _law_to_json(law) -> dict:
    """A contact pair's ``"law"`` (none for the default, Hunt–Crossley)."""
    return {} if isinstance(law, HuntCrossley) else {"law": law.to_json()}


def _range_to_json(lower, upper):
    """(lower, upper) for JSON (null where unbounded), or None when both are."""
    values = [None if not math.isfinite(x) else x for x in (float(lower), float(upper))]
    return None if values == [None, None] else values


def _actuators_to_json(actuators: Actuators) -> list[dict]:
    """Every actuator as :meth:`ModelBuilder.add_actuator`'s options (kind and gains)."""
    out = []
    for k, (name, kind) in enumerate(zip(actuators.actuator_names, actuators.kinds, strict=True)):
        gain, bias = float(actuators.gain[k]), [float(x) for x in actuators.bias[k]]
        entry = {"name": name, "joint": actuators.joints[k].name, "kind": kind,
                 "gear": float(actuators.gear[k])}  # fmt: skip
        entry.update(actuator_kind(kind).to_options(gain, bias))
        for key, lower, upper in (
            ("ctrl_range", actuators.ctrl_lower[k], actuators.ctrl_upper[k]),
            ("force_range", actuators.force_lower[k], actuators.force_upper[k]),
        ):
            span = _range_to_json(lower, upper)
            if span is not None:
                entry[key] = span
        rule = ACTIVATION_DYNAMICS[actuators.dynamics[k]] if actuators.has_dynamics else None
        if rule is not None and rule is not NO_DYNAMICS:
            entry["dynamics"] = rule.name
            if rule.time_constant:
                entry["time_constant"] = float(actuators.time_constant[k])
            span = _range_to_json(actuators.act_lower[k], actuators.act_upper[k])
            if span is not None:
                entry["act_range"] = span
            if actuators.act_early[k]:
                entry["act_early"] = True
        out.append(entry)
    return out


# ----------------------------------------------------------------------------- published
