"""What a model holds, as tables of text (``jaxmbd info``): bodies, joints with their
dynamics and limits, the other constraints (welds, drivers), the other force elements,
contact pairs, actuators, sensors and markers. Each table is a :class:`Section`; a model
without an item has no section for it."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..forces.joint_dynamics import JointDynamics
from ..forces.joint_limits import JointLimits
from ..model import Model


class Section(NamedTuple):
    """One table: its ``title``, ``columns`` and ``rows`` (text)."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


def _num(x) -> str:
    return f"{float(x):.6g}"


def _per_joint(model: Model, cls) -> dict[str, tuple]:
    """{joint name: (element, index)} of the joints that an element of type ``cls`` acts on."""
    out = {}
    for element in model.forces:
        if isinstance(element, cls):
            for i, name in enumerate(element.names):
                out[name] = (element, i)
    return out


def _body(model: Model, index: int) -> str:
    return model.body_label(index)


def bodies(model: Model) -> Section:
    rows = [
        (name, _num(model.mass[b]), np.array2string(np.diagonal(np.asarray(model.inertia[b])),
                                                    precision=6))
        for b, name in enumerate(model.body_names)
    ]  # fmt: skip
    return Section("bodies", ("body", "mass", "inertia (diag)"), rows)


def joints(model: Model) -> Section | None:
    """The joints with coordinates and the one-coordinate views (``"<joint>.slide"``) that
    joint dynamics or limits act on: kind, bodies, damping, stiffness (about the spring
    reference), friction loss, armature and the limit range."""
    dynamics = _per_joint(model, JointDynamics)
    limits = _per_joint(model, JointLimits)
    defs = {d.name: d for d in model.joints}
    for name, (element, i) in {**dynamics, **limits}.items():
        defs.setdefault(name, element.joints[i])
    if not defs:
        return None
    rows = []
    for name, d in defs.items():
        dyn = ("-",) * 4
        if name in dynamics:
            element, i = dynamics[name]
            armature = "0" if element.armature is None else _num(element.armature[i])
            dyn = (
                _num(element.damping[i]),
                f"{_num(element.stiffness[i])} (ref {_num(element.spring_reference[i])})"
                if float(element.stiffness[i])
                else "0",
                _num(element.friction_loss[i]),
                armature,
            )
        lim = ("-",) * 3
        if name in limits:
            element, i = limits[name]
            restitution = "-" if element.restitution is None else _num(element.restitution[i])
            lim = (
                f"[{_num(element.lower[i])}, {_num(element.upper[i])}]",
                f"stiffness {_num(element.stiffness[i])}, damping {_num(element.damping[i])}",
                restitution,
            )
        bodies_ = f"{_body(model, d.body_i)} -> {_body(model, d.body_j)}"
        rows.append((name, d.kind, bodies_) + dyn + lim)
    columns = ("joint", "kind", "bodies", "damping", "stiffness", "friction loss", "armature",
               "limits", "limit law", "limit restitution")  # fmt: skip
    return Section("joints", columns, rows)


#: The parameters ``info`` lists of a force element, where it has them.
_FORCE_PARAMETERS = ("stiffness", "damping", "rest_length")


def _bodies_of(model: Model, element) -> str:
    body_i, body_j = getattr(element, "body_i", None), getattr(element, "body_j", None)
    if isinstance(body_i, int) and isinstance(body_j, int):
        return f"{_body(model, body_i)} - {_body(model, body_j)}"
    return ""


def _parameters(element) -> str:
    parts = []
    for key in _FORCE_PARAMETERS:
        value = getattr(element, key, None)
        if value is None:
            continue
        value = np.asarray(value)
        text = _num(value) if value.ndim == 0 else np.array2string(value, precision=6)
        parts.append(f"{key.replace('_', ' ')} {text}")
    return ", ".join(parts)


def forces(model: Model) -> Section | None:
    """The force elements other than the joints' own, the contact and the actuators: each
    with its name (its coordinates' names for elements along joints), bodies and
    parameters."""
    shown = (JointDynamics, JointLimits)
    special = (model.contacts, model.actuators)
    rows = []
    for element in model.forces:
        if isinstance(element, shown) or any(element is s for s in special):
            continue
        names = getattr(element, "names", None) or (element.output_name,)
        rows.append((type(element).__name__, ", ".join(n for n in names if n),
                     _bodies_of(model, element), _parameters(element)))  # fmt: skip
    columns = ("element", "name", "bodies", "parameters")
    return Section("force elements", columns, rows) if rows else None


def contacts(model: Model) -> Section | None:
    element = model.contacts
    if element is None:
        return None
    rows = [
        (name, f"{_body(model, i)} - {_body(model, j)}", _num(element.friction[k]),
         _num(element.restitution[k]), _num(element.stiffness[k]), _num(element.exponent[k]),
         _num(element.damping[k]), type(element.law_of_pair[k]).__name__)
        for k, (name, (i, j)) in enumerate(zip(element.pair_names, element.pairs, strict=True))
    ]  # fmt: skip
    columns = ("pair", "bodies", "friction", "restitution", "stiffness", "exponent",
               "damping", "law")  # fmt: skip
    return Section("contact pairs", columns, rows)


def actuators(model: Model) -> Section | None:
    element = model.actuators
    if element is None:
        return None
    rows = [
        (name, kind, element.joints[k].name, _num(element.gear[k]),
         f"[{_num(element.ctrl_lower[k])}, {_num(element.ctrl_upper[k])}]",
         f"[{_num(element.force_lower[k])}, {_num(element.force_upper[k])}]")
        for k, (name, kind) in enumerate(zip(element.actuator_names, element.kinds, strict=True))
    ]  # fmt: skip
    columns = ("actuator", "kind", "joint", "gear", "control range", "force range")
    return Section("actuators", columns, rows)


def sensors(model: Model) -> Section | None:
    element = model.sensors
    if element is None:
        return None
    rows = [
        (name, kind, str(dim), joint or (_body(model, body) if body >= 0 else "actuators"))
        for name, kind, dim, joint, body in zip(
            element.sensor_names, element.kinds, element.dims, element.joints, element.bodies,
            strict=True,
        )
    ]  # fmt: skip
    return Section("sensors", ("sensor", "kind", "size", "on"), rows)


def markers(model: Model) -> Section | None:
    element = model.markers
    if element is None:
        return None
    rows = [
        (name, _body(model, body), np.array2string(np.asarray(element.point[k]), precision=6))
        for k, (name, body) in enumerate(zip(element.marker_names, element.bodies, strict=True))
    ]  # fmt: skip
    return Section("markers", ("marker", "body", "point (body frame)"), rows)


def constraints(model: Model) -> Section | None:
    """The constraint groups that the joints table leaves out (welds, drivers, joints
    without coordinates, raw GCON rows): each with its name, its rows by GCON kind, its
    bodies and the expressions that drive its rows."""
    table = joints(model)
    listed = set() if table is None else {row[0] for row in table.rows}
    driven = {
        row: source
        for group in model.drivers
        for row, source in zip(group.rows, group.sources, strict=True)
    }
    groups: dict[str, list[int]] = {}
    for row, name in enumerate(model.constraint_joints):
        if name not in listed:
            groups.setdefault(name, []).append(row)
    rows = []
    for name, members in groups.items():
        kinds: dict[str, int] = {}
        for row in members:
            kinds[model.constraint_kinds[row]] = kinds.get(model.constraint_kinds[row], 0) + 1
        i, j = model.constraint_bodies[members[0]]
        sources = [driven[row] for row in members if row in driven]
        rows.append((name, ", ".join(f"{k} {n}" for k, n in kinds.items()),
                     f"{_body(model, i)} - {_body(model, j)}",
                     "; ".join(sources) or "-"))  # fmt: skip
    columns = ("constraint", "rows", "bodies", "driven by")
    return Section("other constraints", columns, rows) if rows else None


def model_report(model: Model) -> list[Section]:
    """Every section of ``model`` that it has, in the order of this module."""
    parts = (bodies, joints, constraints, forces, contacts, actuators, sensors, markers)
    return [s for s in (part(model) for part in parts) if s is not None]


__all__ = ["Section", "model_report"]
