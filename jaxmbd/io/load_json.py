"""Loading jaxmbd's own model files (:mod:`jaxmbd.io.schema`) through the
:class:`~jaxmbd.ModelBuilder`: each entry as its builder method would add it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..build import ModelBuilder
from ..contact import law_from_json
from ..errors import ModelError, ModelFileError
from ..forces import FORCE_TYPES
from ..forces._joint import CYLINDRICAL_VIEWS
from ..gcons import gcon_kind
from ..model import Model
from ..model.drivers import ExpressionError
from ..model.joints import JOINT_KINDS
from ..tree import KinematicTree
from ..tree.topology import tree_arrays
from ._read import _add_gcon, _Entry, _get, _list, _object, _string
from .schema import (
    _CONTACT_NUMBERS,
    _CYLINDRICAL_KEYS,
    _DRIVER_FIELDS,
    _DYNAMICS_DEFAULTS,
    _DYNAMICS_KEYS,
    _FORCE_KEYS,
    _GCON_FIELDS,
    _JOINT_FIELDS,
    _JOINT_FORCE_KEYS,
    _JOINT_FRAME_FIELDS,
    _JOINT_OPTIONAL,
    _LIMIT_KEYS,
    _OWN_KEYS,
)


def _load_own(path: Path, data: dict) -> Model:
    _object(data, path, None, _OWN_KEYS["model"])
    version = data.get("version", 1)
    if isinstance(version, bool) or version != 1:
        raise ModelFileError(path, "version", f"unsupported version {version!r} (expected 1)")
    if "solver" in data:
        _object(data["solver"], path, "solver", _OWN_KEYS["solver"])
        for key, value in data["solver"].items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                if not (key == "t_end" and value == 0 and not isinstance(value, bool)):
                    raise ModelFileError(
                        path, f"solver.{key}", f"expected a positive number, got {value!r}"
                    )
    for key in ("name", "description"):
        if key in data and not isinstance(data[key], str):
            raise ModelFileError(path, key, f"expected a string, got {type(data[key]).__name__}")
    gravity = data.get("gravity", (0.0, 0.0, -9.81))
    builder = ModelBuilder(name=data.get("name", path.stem), gravity=gravity)
    for k, body in enumerate(_list(data, "bodies", path)):
        name, where = _named(body, "bodies", k, _OWN_KEYS["body"], path)
        axes = body.get("axes")
        if axes is not None:
            _object(axes, path, f"{where}.axes", _OWN_KEYS["axes"])
            axes = (_get(axes, "x", path, f"{where}.axes"), _get(axes, "y", path, f"{where}.axes"))
        try:
            builder.add_body(
                name,
                mass=_get(body, "mass", path, where),
                inertia=_get(body, "inertia", path, where),
                r=body.get("r", (0.0, 0.0, 0.0)),
                A=body.get("A"),
                axes=axes,
                rdot=body.get("rdot", (0.0, 0.0, 0.0)),
                omega=body.get("omega", (0.0, 0.0, 0.0)),
                shapes=body.get("shapes"),
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, joint in enumerate(_list(data, "joints", path, required=False)):
        name, where = _named(joint, "joints", k, _OWN_KEYS["joint"], path)
        kind = _typed(joint, _JOINT_FIELDS, "joint", path, where)
        kwargs = {key: _get(joint, key, path, where) for key in _JOINT_FIELDS[kind]}
        kwargs.update({key: joint[key] for key in _JOINT_OPTIONAL.get(kind, ()) if key in joint})
        kwargs.update(_joint_force_options(joint, kind, path, where))
        coordinates = _coordinate_options(joint, kind, path, where)
        try:
            getattr(builder, kind)(
                name,
                body_i=_string(joint, "body_i", path, where),
                body_j=_string(joint, "body_j", path, where),
                **kwargs,
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
        _record_coordinate_options(builder, name, coordinates, path, where)
    for k, con in enumerate(_list(data, "constraints", path, required=False)):
        name, where = _named(con, "constraints", k, _OWN_KEYS["constraint"], path)
        kind = _typed(con, _GCON_FIELDS, "constraint", path, where)
        vectors = {key: _get(con, key, path, where) for key in _GCON_FIELDS[kind]}
        try:
            _add_gcon(
                builder,
                name,
                kind,
                _string(con, "body_i", path, where),
                _string(con, "body_j", path, where),
                vectors,
                con.get(gcon_kind(kind).file_value, 0.0),
                _string(con, "joint", path, where, default=name),
            )
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, drv in enumerate(_list(data, "drivers", path, required=False)):
        name, where = _named(drv, "drivers", k, _OWN_KEYS["driver"], path)
        kind = _typed(drv, _DRIVER_FIELDS, "driver", path, where)
        method, required, optional = _DRIVER_FIELDS[kind]
        foreign = sorted(set(drv) - {"name", "type", "body_i", "body_j", *required, *optional})
        if foreign:
            raise ModelFileError(
                path, f"{where}.{foreign[0]}", f"not a key of a {kind} driver (its keys: "
                f"{['body_i', 'body_j', *required, *optional]})",
            )  # fmt: skip
        try:
            getattr(builder, method)(
                name,
                body_i=_string(drv, "body_i", path, where),
                body_j=_string(drv, "body_j", path, where),
                **{key: _get(drv, key, path, where) for key in required},
                **{key: drv[key] for key in optional if key in drv},
            )
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, frc in enumerate(_list(data, "forces", path, required=False)):
        _add_force(builder, frc, path, k)
    for k, shape in enumerate(_list(data, "ground_shapes", path, required=False)):
        try:
            builder.add_ground_shape(shape)
        except ModelError as err:
            raise ModelFileError(path, f"ground_shapes[{k}]", str(err)) from None
    for k, con in enumerate(_list(data, "contacts", path, required=False)):
        where = f"contacts[{k}]"
        _object(con, path, where, _OWN_KEYS["contact"])
        numbers = {key: con[key] for key in _CONTACT_NUMBERS if key in con}
        if "law" in con:
            try:
                numbers["law"] = law_from_json(con["law"])
            except ValueError as err:
                raise ModelFileError(path, f"{where}.law", str(err)) from None
        try:
            builder.add_contact(
                _string(con, "body_i", path, where),
                _string(con, "body_j", path, where),
                friction=_get(con, "friction", path, where),
                shapes=con.get("shapes"),
                **numbers,
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, jc in enumerate(_list(data, "joint_coordinates", path, required=False)):
        name, where = _named(jc, "joint_coordinates", k, _OWN_KEYS["joint_coordinates"], path)
        try:
            builder._define_joint(
                name,
                kind=_string(jc, "type", path, where),
                body_i=_string(jc, "body_i", path, where),
                body_j=_string(jc, "body_j", path, where),
                **{key: _get(jc, key, path, where) for key in _JOINT_FRAME_FIELDS},
                **{key: jc[key] for key in ("offset", "sign", "q_start") if key in jc},
                joint_space=_flag(jc, "joint_space", path, where),
            )
            _record_joint_forces(builder, name, _joint_force_options(jc, jc["type"], path, where))
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
        coordinates = _coordinate_options(jc, jc["type"], path, where)
        _record_coordinate_options(builder, name, coordinates, path, where)
    for k, act in enumerate(_list(data, "actuators", path, required=False)):
        name, where = _named(act, "actuators", k, _OWN_KEYS["actuator"], path)
        keys = ("gear", "kp", "kv", "gain", "bias", "dynamics", "time_constant", "act_early")
        options = {key: act[key] for key in keys if key in act}
        if "act_range" in act:
            options["act_range"] = _range_from_json(act["act_range"])
        try:
            builder.add_actuator(
                name,
                joint=_string(act, "joint", path, where),
                kind=_string(act, "kind", path, where),
                ctrl_range=_range_from_json(act.get("ctrl_range")),
                force_range=_range_from_json(act.get("force_range")),
                **options,
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, mark in enumerate(_list(data, "markers", path, required=False)):
        name, where = _named(mark, "markers", k, _OWN_KEYS["marker"], path)
        if "point" not in mark:
            raise ModelFileError(path, where, "missing key 'point' (global, at the initial "
                                 "configuration)")  # fmt: skip
        try:
            builder.add_marker(name, _string(mark, "body", path, where), mark["point"],
                               axes=mark.get("axes"))  # fmt: skip
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, sen in enumerate(_list(data, "sensors", path, required=False)):
        name, where = _named(sen, "sensors", k, _OWN_KEYS["sensor"], path)
        keys = ("joint", "body", "site", "frame", "noise", "reference", "subtree", "parent",
                "zone", "actuator", "part", "targets")  # fmt: skip
        options = {key: sen[key] for key in keys if key in sen}
        try:
            builder.add_sensor(name, kind=_string(sen, "kind", path, where), **options)
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    return _with_tree(builder.build(), data, path)


def _flag(entry: dict, key: str, path: Path, where: str) -> bool:
    """An optional boolean of ``entry`` (False where absent)."""
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise ModelFileError(path, f"{where}.{key}", f"expected true or false, got {value!r}")
    return value


def _with_tree(model: Model, data: dict, path: Path) -> Model:
    """``model`` with the file's ``tree`` and ``joint_space_only`` (see the schema)."""
    reasons = data.get("joint_space_only", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise ModelFileError(path, "joint_space_only", "expected a list of strings")
    tree = data.get("tree")
    if tree is not None:
        _object(tree, path, "tree", _OWN_KEYS["tree"])
        missing = sorted(_OWN_KEYS["tree"] - set(tree))
        if missing:
            raise ModelFileError(path, "tree", f"missing keys {missing}")
        static = ("body_names", "parent", "joint_names", "joint_type", "joint_body")
        try:
            tree = KinematicTree(
                **{key: tuple(tree[key]) for key in static},
                **tree_arrays(**{k: v for k, v in tree.items() if k not in static}),
            )
        except (ModelError, TypeError, ValueError) as err:
            raise ModelFileError(path, "tree", str(err)) from None
        if tree.body_names != model.body_names:
            raise ModelFileError(
                path, "tree", f"bodies {list(tree.body_names)} are not the model's bodies"
            )
    return dataclasses.replace(model, tree=tree, joint_space_only=tuple(reasons))


def _add_force(builder: ModelBuilder, frc, path: Path, k: int) -> None:
    """Add the force element of the ``forces`` entry ``frc`` (of its registered type,
    :func:`jaxmbd.forces.register_force_type`) to ``builder``."""
    where = f"forces[{k}]"
    kind = _string(frc, "type", path, where)
    if kind not in FORCE_TYPES:
        raise ModelFileError(
            path, f"{where}.type", f"unknown force type {kind!r}; known: {sorted(FORCE_TYPES)}"
        )
    cls = FORCE_TYPES[kind]
    _object(frc, path, where, _FORCE_KEYS | set(cls.file_keys))
    named = f"{where} ('{frc['name']}')" if isinstance(frc.get("name"), str) else where
    try:
        cls.from_json(builder, _Entry(frc, path, where, k))
    except (ModelError, ExpressionError) as err:
        raise ModelFileError(path, named, str(err)) from None


def _joint_force_options(joint: dict, kind: str, path, where: str) -> dict:
    """The limit and joint-dynamics options of a joint entry; refused (naming the key) on
    joints without a scalar coordinate."""
    options = {key: joint[key] for key in _JOINT_FORCE_KEYS if key in joint}
    spec = JOINT_KINDS.get(kind)
    if options and not (spec is not None and spec.one_coordinate):
        raise ModelFileError(
            path,
            f"{where}.{next(iter(options))}",
            f"limits and joint dynamics act on revolute and translational joints, not {kind}"
            + ("; give a cylindrical joint's under 'slide' and 'angle'"
               if spec is not None and spec.views else ""),
        )  # fmt: skip
    return options


def _record_joint_forces(builder, name: str, options: dict, kind=None) -> None:
    """Record a joint's (or coordinate view's, of ``kind``) limit and dynamics ``options``
    on ``builder`` as its builder method would."""
    if any(key in options for key in _LIMIT_KEYS):
        builder._record_limits(
            name, options.get("limits"), options.get("limit_stiffness"),
            options.get("limit_damping"), options.get("limit_restitution"), kind=kind,
        )  # fmt: skip
    if "limit_impedance" in options:
        builder._record_limit_impedance(name, options["limit_impedance"])
    dynamics = {key: options[key] for key in _DYNAMICS_KEYS if key in options}
    if dynamics:
        builder._record_dynamics(name, **{**_DYNAMICS_DEFAULTS, **dynamics})


def _coordinate_options(joint: dict, kind: str, path, where: str) -> dict:
    """A cylindrical joint entry's per-coordinate options {"slide": {...}, "angle": {...}}
    (checked: objects with the limit and dynamics keys); refused on other joints."""
    found = {key: joint[key] for key in _CYLINDRICAL_KEYS if key in joint}
    spec = JOINT_KINDS.get(kind)
    if found and not (spec is not None and spec.views):
        raise ModelFileError(
            path, f"{where}.{next(iter(found))}",
            f"per-coordinate options ('slide', 'angle') belong to cylindrical joints, not {kind}",
        )  # fmt: skip
    for key, options in found.items():
        _object(options, path, f"{where}.{key}", set(_JOINT_FORCE_KEYS))
    return found


def _record_coordinate_options(builder, name: str, coordinates: dict, path, where) -> None:
    """Record a cylindrical joint's per-coordinate options on its coordinate views."""
    kinds = dict(CYLINDRICAL_VIEWS)
    for key, options in coordinates.items():
        try:
            _record_joint_forces(builder, f"{name}.{key}", options, kind=kinds[key])
        except ModelError as err:
            raise ModelFileError(path, f"{where}.{key}", str(err)) from None


def _range_from_json(value):
    """An actuator's (lower, upper) from JSON, where an unbounded side is null."""
    if not isinstance(value, list) or len(value) != 2:
        return value
    return tuple(value)  # add_actuator reads a None side as unbounded


def _named(entry, section: str, k: int, own_keys, path: Path):
    """(name, where) of the ``k``-th entry of a model file's ``section`` list: an object
    with only ``own_keys`` and a ``"name"``; ``where`` names it in error messages."""
    where = f"{section}[{k}]"
    _object(entry, path, where, own_keys)
    name = _string(entry, "name", path, where)
    return name, f"{section}[{k}] ('{name}')"


def _typed(entry, known, what: str, path: Path, where: str) -> str:
    """The entry's ``"type"``, one of ``known``."""
    kind = _string(entry, "type", path, where)
    if kind not in known:
        raise ModelFileError(
            path, f"{where}.type", f"unknown {what} type {kind!r}; known: {sorted(known)}"
        )
    return kind
