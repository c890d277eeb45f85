"""Model files: jaxmbd's own JSON schema (load and save) and the published SimEngineMBD files.

Own schema (``"format": "jaxmbd-model"``)::

    {"format": "jaxmbd-model", "version": 1, "name": ..., "gravity": [0, 0, -9.81],
     "bodies": [{"name", "mass", "inertia": [Jxx, Jyy, Jzz] or 3x3, "r", "A" or
                 "axes": {"x": [...], "y": [...]}, "rdot", "omega",
                 "shapes": [{"type": "box" | "cylinder" | "sphere" | "capsule" | "cone" |
                             "pyramid" | "mesh", sizes, "pos", "A" or "axis", "color"}]}],
     "joints": [{"name", "type": "revolute" | "spherical" | "universal" | "cylindrical" |
                 "translational" | "perpendicular_1" | "perpendicular_2", "body_i", "body_j",
                 "point", "axis" (or "axis_i", "axis_j" for universal), revolute and
                 translational also "limits": [lower, upper], "limit_stiffness",
                 "limit_damping", "damping", "stiffness", "spring_reference",
                 "friction_loss", "armature"; cylindrical "slide": {...}, "angle": {...}
                 with those keys for each coordinate}],
     "constraints": [{"name", "type": "DP1" | "DP2" | "D" | "CD" | "ROT", "body_i", "body_j",
                      vectors in body frames, "f": number or expression in t, "joint"}],
     "drivers": [{"name", "type": "rotation", "body_i", "body_j", "axis", "angle",
                  "reference"}],
     "forces": [{"name", "type": "spring_damper", "body_i", "point_i", "body_j", "point_j",
                 "stiffness", "damping", "rest_length"} or
                {"name", "type": "bushing", "body_i", "body_j", "s_bar_i", "s_bar_j",
                 "frame_i", "frame_j" (body frames), "stiffness", "damping": 6 numbers}],
     "ground_shapes": [{"type": "plane" | "box" | ..., sizes, "pos", "A" or "axis"}],
     "contacts": [{"body_i", "body_j" (a body or "ground"), "friction", "restitution",
                   "stiffness", "damping", "exponent", "slip_velocity",
                   "shapes" (optional: [[k_i, k_j], ...] shape pairs)}],
     "joint_coordinates": [{"name", "type": "revolute" | "translational" | "cylindrical" |
                            "universal" | "spherical" | "planar", "body_i", "body_j",
                            "s_bar_i", "s_bar_j", "frame_i", "frame_j" (body frames),
                            "offset", "sign", "q_start", and the limit and dynamics
                            keys of "joints"}],
     "actuators": [{"name", "joint", "kind": "motor" | "position" | "velocity" | "general",
                    "gear", "kp", "kv", "gain", "bias": [b0, b1, b2],
                    "ctrl_range", "force_range": [lower, upper] (null: unbounded side)}],
     "sensors": [{"name", "kind" (jaxmbd.sensors.SENSOR_KINDS), "joint" or "body",
                  "site": [x, y, z], "frame": 3x3 (body frame), "noise"}],
     "markers": [{"name", "body", "point": [x, y, z], "axes": 3x3 (optional; global,
                  at the initial configuration)}],
     "solver": {"h": ..., "t_end": ..., "tol": ...}}

``joint_coordinates`` (optional; written by :func:`save_model`) define the joint coordinates
of ``sol.joints`` (:mod:`jaxmbd.joints`) without adding constraint rows: a model saved at GCON
level keeps its joints' coordinates. A joint of ``joints`` has its coordinates already.

Shapes (optional; fields in :mod:`jaxmbd.geometry`) are in the body frame, and collide
with those of a contact pair unless ``"collide": false``; ``ground_shapes`` (global) are the
ground's planes and shapes, ``contacts`` the pairs of :meth:`ModelBuilder.add_contact`
(:mod:`jaxmbd.contact`; a missing number takes the builder's default). Joint limits,
damping, stiffness and friction loss are options of their joint (:meth:`ModelBuilder.revolute`,
:mod:`jaxmbd.joint_limits`, :mod:`jaxmbd.joint_dynamics`); ``actuators`` are those of
:meth:`ModelBuilder.add_actuator` (:mod:`jaxmbd.actuators`), in control order; ``sensors``
those of :meth:`ModelBuilder.add_sensor` (:mod:`jaxmbd.sensors`), in order; ``markers``
those of :meth:`ModelBuilder.add_marker` (:mod:`jaxmbd.markers`). Saved models
write limit gains and spring references as built (defaults resolved).
a body without shapes is drawn as a stick figure joining its joint points (see
:func:`jaxmbd.geometry.default_shapes`). Joint points and axes are
global, at the initial configuration; GCON vectors are in body frames. The published
files (uwsbel/sbel-reproducibility) have no masses: they load with unit masses and inertias
and a warning unless ``masses`` supplies them.
"""

from __future__ import annotations

import ast
import json
import logging
import math
from pathlib import Path

import numpy as np

from ._joint_forces import CYLINDRICAL_VIEWS
from ._values import MAX_MAGNITUDE, _short, _vec3
from .actuators import Actuators
from .build import ModelBuilder
from .bushing import Bushing
from .drivers import Expression, ExpressionError, check_expression_derivative, program_to_source
from .errors import ModelError, ModelFileError
from .forces import SpringDamper
from .joint_dynamics import FRICTION_VELOCITY, JointDynamics
from .joint_limits import JointLimits
from .model import GROUND, Model

logger = logging.getLogger("jaxmbd")

FORMAT = "jaxmbd-model"
_JOINT_FIELDS = {
    "revolute": ("point", "axis"),
    "spherical": ("point",),
    "universal": ("point", "axis_i", "axis_j"),
    "cylindrical": ("point", "axis"),
    "translational": ("point", "axis"),
    "perpendicular_1": ("axis",),
    "perpendicular_2": ("point", "axis"),
}
_GCON_FIELDS = {
    "DP1": ("a_bar_i", "a_bar_j"),
    "DP2": ("a_bar_i", "s_bar_p_i", "s_bar_q_j"),
    "D": ("s_bar_p_i", "s_bar_q_j"),
    "CD": ("c", "s_bar_p_i", "s_bar_q_j"),
    "ROT": ("u_bar_i", "v_bar_i", "a_bar_j"),
}


#: Optional keys of revolute and translational joints (``joints`` and
#: ``joint_coordinates`` entries): the options of :meth:`ModelBuilder.revolute` for limits
#: (:mod:`jaxmbd.joint_limits`) and joint dynamics (:mod:`jaxmbd.joint_dynamics`).
_LIMIT_KEYS = ("limits", "limit_stiffness", "limit_damping")
_DYNAMICS_KEYS = ("damping", "stiffness", "spring_reference", "friction_loss", "armature")
_JOINT_FORCE_KEYS = _LIMIT_KEYS + _DYNAMICS_KEYS
#: A cylindrical joint's entries for its two coordinates ("slide", "angle"): objects with
#: the keys of :data:`_JOINT_FORCE_KEYS` (the coordinate views of
#: :data:`jaxmbd._joint_forces.CYLINDRICAL_VIEWS`).
_CYLINDRICAL_KEYS = tuple(suffix for suffix, _ in CYLINDRICAL_VIEWS)

# Keys each object of a model file may have; anything else is refused (a typo such as
# "inertia_" must not silently fall back to a default).
_OWN_KEYS = {
    "model": {"format", "version", "name", "description", "gravity", "bodies", "joints",
              "constraints", "drivers", "forces", "joint_coordinates", "solver",
              "ground_shapes", "contacts", "actuators", "sensors", "markers"},
    "body": {"name", "mass", "inertia", "r", "A", "axes", "rdot", "omega", "shapes"},
    "axes": {"x", "y"},
    "joint": {"name", "type", "body_i", "body_j", "point", "axis", "axis_i", "axis_j",
              *_JOINT_FORCE_KEYS, *_CYLINDRICAL_KEYS},
    "constraint": {"name", "type", "body_i", "body_j", "a_bar_i", "a_bar_j", "s_bar_p_i",
                   "s_bar_q_j", "c", "u_bar_i", "v_bar_i", "f", "angle", "joint"},
    "driver": {"name", "type", "body_i", "body_j", "axis", "angle", "reference"},
    "force": {"name", "type", "body_i", "point_i", "local_i", "body_j", "point_j", "local_j",
              "stiffness", "damping", "rest_length", "s_bar_i", "s_bar_j", "frame_i",
              "frame_j"},
    "solver": {"h", "t_end", "tol"},
    "contact": {"body_i", "body_j", "friction", "restitution", "stiffness", "damping",
                "exponent", "slip_velocity", "shapes"},
    "joint_coordinates": {"name", "type", "body_i", "body_j", "s_bar_i", "s_bar_j", "frame_i",
                          "frame_j", "offset", "sign", "q_start", *_JOINT_FORCE_KEYS,
                          *_CYLINDRICAL_KEYS},
    "actuator": {"name", "joint", "kind", "gear", "ctrl_range", "force_range", "kp", "kv",
                 "gain", "bias"},
    "sensor": {"name", "kind", "joint", "body", "site", "frame", "noise"},
    "marker": {"name", "body", "point", "axes"},
}  # fmt: skip
_PUBLISHED_KEYS = {
    "model": {"name", "bodies", "constraints"},
    "body": {"name", "id", "r", "r_dot", "A", "omega", "omega_dot", "r_ddot"},
    "constraint": {"name", "type", "body_i", "body_j", "a_bar_i", "a_bar_j", "s_bar_p_i",
                   "s_bar_q_j", "c", "f", "f_dot", "f_ddot"},
}  # fmt: skip
#: Number lists whose entries may be null (an unbounded side of an actuator's range).
_RANGE_KEYS = {"ctrl_range", "force_range"}
_OBJECT_LISTS = {
    "actuators",
    "sensors",
    "markers",
    "bodies",
    "joints",
    "constraints",
    "drivers",
    "forces",
    "shapes",
    "joint_coordinates",
    "ground_shapes",
    "contacts",
}
MAX_DEPTH = 12  # the deepest field of the schema (a shape's matrix row) is at depth 6
MAX_FILE_BYTES = 64 * 2**20


def _read_json(path: Path):
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelFileError(path, None, "file not found") from None
    except OSError as err:
        raise ModelFileError(path, None, f"cannot read file: {err}") from None
    if size > MAX_FILE_BYTES:
        raise ModelFileError(path, None, f"file of {size} bytes; at most {MAX_FILE_BYTES}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ModelFileError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelFileError(path, None, f"cannot read file: {err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModelFileError(
            path, None, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise ModelFileError(path, None, "invalid JSON: nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal beyond Python's digit limit
        raise ModelFileError(path, None, f"invalid JSON: {err}") from None
    _check_values(path, data, "", 0)
    return data


def _label(where: str, key, value) -> str:
    if isinstance(key, int):
        name = value.get("name") if isinstance(value, dict) else None
        return f"{where}[{key}]" + (f" ('{name}')" if isinstance(name, str) else "")
    return f"{where}.{key}" if where else str(key)


def _check_values(path, value, where: str, depth: int):
    """Refuse non-finite or out-of-range numbers and excessive nesting anywhere in the file,
    naming the field (before any number reaches numpy or JAX)."""
    if depth > MAX_DEPTH:
        raise ModelFileError(path, where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        try:
            ok = math.isfinite(float(value)) and abs(float(value)) <= MAX_MAGNITUDE
        except OverflowError:
            ok = False
        if not ok:
            shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
            raise ModelFileError(
                path, where, f"number {shown} is not finite or above {MAX_MAGNITUDE:g}"
            )
        return
    if isinstance(value, list) and where.rpartition(".")[2] not in _OBJECT_LISTS:
        open_ended = where.rpartition(".")[2] in _RANGE_KEYS  # null: an unbounded side
        for k, item in enumerate(value):
            if isinstance(item, str | bool) or (item is None and not open_ended):
                raise ModelFileError(
                    path, f"{where}[{k}]", f"expected a number, got {type(item).__name__}"
                )
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        _check_values(path, item, _label(where, key, item), depth + 1)


def _object(item, path, where: str, keys: set[str]) -> dict:
    """``item`` must be a JSON object with only the schema's keys."""
    if not isinstance(item, dict):
        raise ModelFileError(path, where, f"expected an object, got {type(item).__name__}")
    if where and isinstance(item.get("name"), str) and where.endswith("]"):
        where = f"{where} ('{item['name']}')"
    unknown = sorted(set(item) - keys)
    if unknown:
        raise ModelFileError(path, where, f"unknown field(s) {unknown}; allowed: {sorted(keys)}")
    return item


def _string(obj, key, path, where, *, default=...) -> str:
    value = _get(obj, key, path, where, default=default)
    if not isinstance(value, str) or not value:
        raise ModelFileError(
            path, f"{where}.{key}", f"expected a non-empty string, got {type(value).__name__}"
        )
    return value


def _get(obj, key, path, where, *, default=...):
    if not isinstance(obj, dict):
        raise ModelFileError(path, where, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        if default is ...:
            raise ModelFileError(path, f"{where}.{key}", "missing required field")
        return default
    return obj[key]


def _list(obj, key, path, *, required=True):
    value = _get(obj, key, path, "model", default=... if required else [])
    if not isinstance(value, list):
        raise ModelFileError(path, key, f"expected a list, got {type(value).__name__}")
    return value


def load_model(
    path, *, masses: dict | None = None, drivers: dict | None = None, **robot_options
) -> Model:
    """Load a model file: jaxmbd's own schema, a published SimEngineMBD/sim_engine_3d file,
    or an MJCF (``.xml``, ``.mjcf``) / URDF (``.urdf``) robot through MuJoCo's parser
    (:func:`jaxmbd.mjcf.load_robot`; option ``keyframe=``).

    ``masses``: for published files, ``{body name: (mass, inertia)}``; ``inertia`` is 3
    principal moments or a 3x3 body-frame matrix. ``drivers``: ``{constraint name:
    expression}`` replaces f(t) of published constraints (some files leave the driver f = 0
    and set it in the authors' Python code).
    """
    path = Path(path)
    if path.suffix.lower() in (".xml", ".mjcf", ".urdf"):
        from .mjcf import load_robot

        return load_robot(path, **robot_options)
    if robot_options:
        raise TypeError(f"load_model: options {sorted(robot_options)} apply to MJCF/URDF files")
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ModelFileError(path, None, "top level must be a JSON object")
    try:
        if data.get("format") == FORMAT:
            return _load_own(path, data)
        if "bodies" in data and "constraints" in data:
            return _load_published(path, data, masses or {}, drivers or {})
    except ModelFileError:
        raise
    except (ModelError, ExpressionError) as err:
        raise ModelFileError(path, None, str(err)) from None
    raise ModelFileError(
        path,
        "format",
        f'unknown model format; expected "format": "{FORMAT}" or a '
        "published SimEngineMBD file with 'bodies' and 'constraints'",
    )


# ----------------------------------------------------------------------------- own schema


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
        where = f"bodies[{k}]"
        _object(body, path, where, _OWN_KEYS["body"])
        name = _string(body, "name", path, where)
        where = f"bodies[{k}] ('{name}')"
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
        where = f"joints[{k}]"
        _object(joint, path, where, _OWN_KEYS["joint"])
        name = _string(joint, "name", path, where)
        where = f"joints[{k}] ('{name}')"
        kind = _string(joint, "type", path, where)
        if kind not in _JOINT_FIELDS:
            raise ModelFileError(
                path,
                f"{where}.type",
                f"unknown joint type {kind!r}; known: {sorted(_JOINT_FIELDS)}",
            )
        kwargs = {key: _get(joint, key, path, where) for key in _JOINT_FIELDS[kind]}
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
        where = f"constraints[{k}]"
        _object(con, path, where, _OWN_KEYS["constraint"])
        name = _string(con, "name", path, where)
        where = f"constraints[{k}] ('{name}')"
        kind = _string(con, "type", path, where)
        if kind not in _GCON_FIELDS:
            raise ModelFileError(
                path,
                f"{where}.type",
                f"unknown constraint type {kind!r}; known: {sorted(_GCON_FIELDS)}",
            )
        vectors = {key: _get(con, key, path, where) for key in _GCON_FIELDS[kind]}
        try:
            _add_gcon(
                builder,
                name,
                kind,
                _string(con, "body_i", path, where),
                _string(con, "body_j", path, where),
                vectors,
                con.get("angle" if kind == "ROT" else "f", 0.0),
                _string(con, "joint", path, where, default=name),
            )
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, drv in enumerate(_list(data, "drivers", path, required=False)):
        where = f"drivers[{k}]"
        _object(drv, path, where, _OWN_KEYS["driver"])
        name = _string(drv, "name", path, where)
        where = f"drivers[{k}] ('{name}')"
        kind = _string(drv, "type", path, where)
        if kind != "rotation":
            raise ModelFileError(
                path, f"{where}.type", f"unknown driver type {kind!r}; known: ['rotation']"
            )
        try:
            builder.rotation_driver(
                name,
                body_i=_string(drv, "body_i", path, where),
                body_j=_string(drv, "body_j", path, where),
                axis=_get(drv, "axis", path, where),
                angle=_get(drv, "angle", path, where),
                reference=drv.get("reference"),
            )
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, frc in enumerate(_list(data, "forces", path, required=False)):
        where = f"forces[{k}]"
        _object(frc, path, where, _OWN_KEYS["force"])
        kind = _string(frc, "type", path, where)
        if kind not in ("spring_damper", "bushing"):
            raise ModelFileError(
                path,
                f"{where}.type",
                f"unknown force type {kind!r}; known: ['bushing', 'spring_damper']",
            )
        if kind == "bushing":
            name = _string(frc, "name", path, where)
            try:
                builder._add_bushing(
                    name,
                    _string(frc, "body_i", path, where),
                    _string(frc, "body_j", path, where),
                    **{key: _get(frc, key, path, where) for key in _BUSHING_KEYS[:4]},
                    stiffness=_get(frc, "stiffness", path, where),
                    damping=frc.get("damping"),
                )
            except ModelError as err:
                raise ModelFileError(path, f"{where} ('{name}')", str(err)) from None
            continue
        try:
            body_i = _string(frc, "body_i", path, where)
            body_j = _string(frc, "body_j", path, where)
            builder.spring_damper(
                _string(frc, "name", path, where, default=f"force_{k}"),
                body_i=body_i,
                point_i=_force_point(builder, frc, "i", body_i, path, where),
                body_j=body_j,
                point_j=_force_point(builder, frc, "j", body_j, path, where),
                stiffness=_get(frc, "stiffness", path, where),
                damping=frc.get("damping", 0.0),
                rest_length=_get(frc, "rest_length", path, where),
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, shape in enumerate(_list(data, "ground_shapes", path, required=False)):
        try:
            builder.add_ground_shape(shape)
        except ModelError as err:
            raise ModelFileError(path, f"ground_shapes[{k}]", str(err)) from None
    for k, con in enumerate(_list(data, "contacts", path, required=False)):
        where = f"contacts[{k}]"
        _object(con, path, where, _OWN_KEYS["contact"])
        numbers = {key: con[key] for key in _CONTACT_NUMBERS if key in con}
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
        where = f"joint_coordinates[{k}]"
        _object(jc, path, where, _OWN_KEYS["joint_coordinates"])
        name = _string(jc, "name", path, where)
        where = f"joint_coordinates[{k}] ('{name}')"
        try:
            builder._define_joint(
                name,
                kind=_string(jc, "type", path, where),
                body_i=_string(jc, "body_i", path, where),
                body_j=_string(jc, "body_j", path, where),
                **{key: _get(jc, key, path, where) for key in _JOINT_FRAME_FIELDS},
                **{key: jc[key] for key in ("offset", "sign", "q_start") if key in jc},
            )
            _record_joint_forces(builder, name, _joint_force_options(jc, jc["type"], path, where))
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
        coordinates = _coordinate_options(jc, jc["type"], path, where)
        _record_coordinate_options(builder, name, coordinates, path, where)
    for k, act in enumerate(_list(data, "actuators", path, required=False)):
        where = f"actuators[{k}]"
        _object(act, path, where, _OWN_KEYS["actuator"])
        name = _string(act, "name", path, where)
        where = f"actuators[{k}] ('{name}')"
        options = {key: act[key] for key in ("gear", "kp", "kv", "gain", "bias") if key in act}
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
        where = f"markers[{k}]"
        _object(mark, path, where, _OWN_KEYS["marker"])
        name = _string(mark, "name", path, where)
        where = f"markers[{k}] ('{name}')"
        if "point" not in mark:
            raise ModelFileError(path, where, "missing key 'point' (global, at the initial "
                                 "configuration)")  # fmt: skip
        try:
            builder.add_marker(name, _string(mark, "body", path, where), mark["point"],
                               axes=mark.get("axes"))  # fmt: skip
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    for k, sen in enumerate(_list(data, "sensors", path, required=False)):
        where = f"sensors[{k}]"
        _object(sen, path, where, _OWN_KEYS["sensor"])
        name = _string(sen, "name", path, where)
        where = f"sensors[{k}] ('{name}')"
        options = {key: sen[key] for key in ("joint", "body", "site", "frame", "noise")
                   if key in sen}  # fmt: skip
        try:
            builder.add_sensor(name, kind=_string(sen, "kind", path, where), **options)
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    return builder.build()


#: The joint dynamics a ``joint_coordinates`` entry leaves out (ModelBuilder's defaults).
_DYNAMICS_DEFAULTS = {
    "damping": 0.0, "stiffness": 0.0, "spring_reference": None, "friction_loss": 0.0,
    "armature": None,
}  # fmt: skip


def _joint_force_options(joint: dict, kind: str, path, where: str) -> dict:
    """The limit and joint-dynamics options of a joint entry; refused (naming the key) on
    joints without a scalar coordinate."""
    options = {key: joint[key] for key in _JOINT_FORCE_KEYS if key in joint}
    if options and kind not in ("revolute", "translational"):
        raise ModelFileError(
            path,
            f"{where}.{next(iter(options))}",
            f"limits and joint dynamics act on revolute and translational joints, not {kind}"
            + ("; give a cylindrical joint's under 'slide' and 'angle'"
               if kind == "cylindrical" else ""),
        )  # fmt: skip
    return options


def _record_joint_forces(builder, name: str, options: dict, kind=None) -> None:
    """Record a joint's (or coordinate view's, of ``kind``) limit and dynamics ``options``
    on ``builder`` as its builder method would."""
    if any(key in options for key in _LIMIT_KEYS):
        builder._record_limits(
            name, options.get("limits"), options.get("limit_stiffness"),
            options.get("limit_damping"), kind=kind,
        )  # fmt: skip
    dynamics = {key: options[key] for key in _DYNAMICS_KEYS if key in options}
    if dynamics:
        builder._record_dynamics(name, **{**_DYNAMICS_DEFAULTS, **dynamics})


def _coordinate_options(joint: dict, kind: str, path, where: str) -> dict:
    """A cylindrical joint entry's per-coordinate options {"slide": {...}, "angle": {...}}
    (checked: objects with the limit and dynamics keys); refused on other joints."""
    found = {key: joint[key] for key in _CYLINDRICAL_KEYS if key in joint}
    if found and kind != "cylindrical":
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


def _range_to_json(lower, upper):
    """(lower, upper) for JSON (null where unbounded), or None when both are."""
    values = [None if not math.isfinite(x) else x for x in (float(lower), float(upper))]
    return None if values == [None, None] else values


_JOINT_FRAME_FIELDS = ("s_bar_i", "s_bar_j", "frame_i", "frame_j")
_BUSHING_KEYS = _JOINT_FRAME_FIELDS + ("stiffness", "damping")
_CONTACT_NUMBERS = ("restitution", "stiffness", "damping", "exponent", "slip_velocity")


def _force_point(builder: ModelBuilder, frc: dict, side: str, body: str, path, where):
    """A force element's ``point_<side>`` in global coordinates at the initial configuration:
    as written, or from the body frame when ``local_<side>`` is true (what save_model
    writes)."""
    point = _get(frc, f"point_{side}", path, where)
    local = frc.get(f"local_{side}", False)
    if not isinstance(local, bool):
        raise ModelFileError(
            path, f"{where}.local_{side}", f"must be true or false, got {_short(local)}"
        )
    if not local:
        return point
    r, A = builder._frame(body, where=f"{where}.body_{side}")
    return r + A @ _vec3(point, where=f"{where}.point_{side}")


def _add_gcon(builder: ModelBuilder, name, kind, body_i, body_j, vectors, f, joint):
    if kind == "ROT":
        builder.add_rot(name, body_i=body_i, body_j=body_j, angle=f, joint=joint, **vectors)
    else:
        getattr(builder, f"add_{kind.lower()}")(
            name, body_i=body_i, body_j=body_j, f=f, joint=joint, **vectors
        )


def save_model(model: Model, path, *, solver: dict | None = None) -> Path:
    """Write ``model`` in jaxmbd's own schema at GCON level (an exact round trip), with its
    joints' coordinate definitions (``joint_coordinates``)."""
    path = Path(path)
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
            entry["angle" if s.kind == "ROT" else "f"] = f_source[row]
            entry["joint"] = model.constraint_joints[row]
            constraints[row] = entry
    forces = []
    contacts = model.contacts
    for k, force in enumerate(model.forces):
        if force is contacts or isinstance(force, JointLimits | JointDynamics | Actuators):
            continue  # written with the joints and as "contacts" and "actuators"
        if isinstance(force, SpringDamper):
            forces.append(
                {
                    "name": f"force_{k}",
                    "type": "spring_damper",
                    "body_i": model.body_label(force.body_i),
                    "point_i": np.asarray(force.s_bar_p_i).tolist(),
                    "local_i": True,
                    "body_j": model.body_label(force.body_j),
                    "point_j": np.asarray(force.s_bar_q_j).tolist(),
                    "local_j": True,
                    "stiffness": float(force.stiffness),
                    "damping": float(force.damping),
                    "rest_length": float(force.rest_length),
                }
            )
        elif isinstance(force, Bushing):
            forces.append(
                {
                    "name": force.name,
                    "type": "bushing",
                    "body_i": model.body_label(force.body_i),
                    "body_j": model.body_label(force.body_j),
                    **{key: np.asarray(getattr(force, key)).tolist() for key in _BUSHING_KEYS},
                }
            )
        else:
            logger.warning(
                "save_model: force element %d (%s) is a Python function and is not saved",
                k,
                type(force).__name__,
            )
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
            }  # fmt: skip
            for p, (i, j) in enumerate(contacts.pairs)
        ]
    joint_forces = _joint_forces_to_json(model)
    if model.joints:
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
                    for suffix, _ in CYLINDRICAL_VIEWS
                    if d.kind == "cylindrical" and f"{d.name}.{suffix}" in joint_forces
                },
            }
            for d in model.joints
        ]
    if model.actuators is not None:
        doc["actuators"] = _actuators_to_json(model.actuators)
    if model.sensors is not None:
        doc["sensors"] = _sensors_to_json(model)
    if model.markers is not None:
        doc["markers"] = _markers_to_json(model)
    if solver:
        doc["solver"] = dict(solver)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _sensors_to_json(model: Model) -> list[dict]:
    """Every sensor as :meth:`ModelBuilder.add_sensor`'s options (body sensors with their
    site and frame)."""
    sensors, out = model.sensors, []
    for k, (name, kind) in enumerate(zip(sensors.sensor_names, sensors.kinds, strict=True)):
        entry = {"name": name, "kind": kind}
        if sensors.joints[k] is not None:
            entry["joint"] = sensors.joints[k]
        else:
            entry["body"] = model.body_names[sensors.bodies[k]]
            entry["site"] = np.asarray(sensors.site[k]).tolist()
            entry["frame"] = np.asarray(sensors.frame[k]).tolist()
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


def _joint_forces_to_json(model: Model) -> dict[str, dict]:
    """Each limited or damped joint's entries (by joint name): its limits with their gains
    as built (defaults resolved), and its joint dynamics (see :data:`_JOINT_FORCE_KEYS`)."""
    out: dict[str, dict] = {}
    for force in model.forces:
        if isinstance(force, JointLimits):
            for k, d in enumerate(force.joints):
                out.setdefault(d.name, {}).update(
                    limits=[float(force.lower[k]), float(force.upper[k])],
                    limit_stiffness=float(force.stiffness[k]),
                    limit_damping=float(force.damping[k]),
                )
        elif isinstance(force, JointDynamics):
            for k, d in enumerate(force.joints):
                values = {
                    key: float(getattr(force, key)[k])
                    for key in _DYNAMICS_KEYS
                    if getattr(force, key) is not None  # armature: None where none given
                }
                if values["stiffness"] == 0.0:
                    del values["spring_reference"]  # meaningless without a spring
                out.setdefault(d.name, {}).update(values)
                if float(force.friction_velocity[k]) != FRICTION_VELOCITY:
                    logger.warning(
                        "save_model: joint '%s': friction_velocity %g is not saved (the file "
                        "gets the default %g)", d.name, float(force.friction_velocity[k]),
                        FRICTION_VELOCITY,
                    )  # fmt: skip
    return out


def _actuators_to_json(actuators: Actuators) -> list[dict]:
    """Every actuator as :meth:`ModelBuilder.add_actuator`'s options (kind and gains)."""
    out = []
    for k, (name, kind) in enumerate(zip(actuators.actuator_names, actuators.kinds, strict=True)):
        gain, bias = float(actuators.gain[k]), [float(x) for x in actuators.bias[k]]
        entry = {"name": name, "joint": actuators.joints[k].name, "kind": kind,
                 "gear": float(actuators.gear[k])}  # fmt: skip
        if kind == "position":
            entry.update(kp=gain, **({"kv": -bias[2]} if bias[2] else {}))
        elif kind == "velocity":
            entry["kv"] = gain
        elif kind == "general":
            entry.update(gain=gain, bias=bias)
        for key, lower, upper in (
            ("ctrl_range", actuators.ctrl_lower[k], actuators.ctrl_upper[k]),
            ("force_range", actuators.force_lower[k], actuators.force_upper[k]),
        ):
            span = _range_to_json(lower, upper)
            if span is not None:
                entry[key] = span
        out.append(entry)
    return out


# ----------------------------------------------------------------------------- published


def _published_angle(source: str):
    """If ``source`` is cos(angle(t)) with angle depending on t, return angle's source."""
    try:
        tree = ast.parse(source.strip().replace("^", "**"), mode="eval").body
    except SyntaxError:
        return None
    if (
        isinstance(tree, ast.Call)
        and isinstance(tree.func, ast.Name)
        and tree.func.id == "cos"
        and len(tree.args) == 1
    ):
        inner = ast.unparse(tree.args[0])
        if not Expression(inner).is_constant:
            return inner
    return None


def _load_published(path: Path, data: dict, masses: dict, drivers: dict) -> Model:
    _object(data, path, None, _PUBLISHED_KEYS["model"])
    if "name" in data and not isinstance(data["name"], str):
        raise ModelFileError(path, "name", f"expected a string, got {type(data['name']).__name__}")
    bodies = _list(data, "bodies", path)
    ids: dict[int, str] = {}
    ground_id = None
    for k, body in enumerate(bodies):
        where = f"bodies[{k}]"
        _object(body, path, where, _PUBLISHED_KEYS["body"])
        name = _string(body, "name", path, where)
        if any(name == other for other in ids.values()):
            raise ModelFileError(path, f"{where}.name", f"duplicate body name {name!r}")
        bid = _get(body, "id", path, where)
        if isinstance(bid, bool) or not isinstance(bid, int):
            raise ModelFileError(path, f"{where}.id", f"expected an integer id, got {bid!r}")
        if bid in ids:
            raise ModelFileError(path, f"{where}.id", f"duplicate body id {bid}")
        ids[bid] = GROUND if name == GROUND else name
        if name == GROUND:
            ground_id = bid
    if ground_id is None:
        raise ModelFileError(path, "bodies", "no body named 'ground' (the fixed frame)")
    unknown = set(masses) - {n for n in ids.values() if n != GROUND}
    if unknown:
        raise ModelFileError(path, "masses", f"masses given for unknown bodies {sorted(unknown)}")
    builder = ModelBuilder(name=str(data.get("name", path.stem)))
    missing_mass = []
    for k, body in enumerate(bodies):
        name = body["name"]
        if name == GROUND:
            continue
        where = f"bodies[{k}] ('{name}')"
        if name in masses:
            mass, inertia = masses[name]
        else:
            mass, inertia = 1.0, (1.0, 1.0, 1.0)
            missing_mass.append(name)
        try:
            builder.add_body(
                name,
                mass=mass,
                inertia=inertia,
                r=_get(body, "r", path, where),
                A=_get(body, "A", path, where),
                rdot=body.get("r_dot", (0.0, 0.0, 0.0)),
                omega=body.get("omega", (0.0, 0.0, 0.0)),
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    if missing_mass:
        logger.warning(
            "%s: no masses in the file for bodies %s; using unit masses and "
            "inertias (set the real ones with eqx.tree_at or masses=...)",
            path,
            missing_mass,
        )
    constraints = _list(data, "constraints", path)
    for k, con in enumerate(constraints):
        _object(con, path, f"constraints[{k}]", _PUBLISHED_KEYS["constraint"])
        _string(con, "name", path, f"constraints[{k}]")
        for key in ("f", "f_dot", "f_ddot"):
            value = con.get(key, "0")
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ModelFileError(
                    path,
                    f"constraints[{k}] ('{con['name']}').{key}",
                    f"expected an expression string, got {type(value).__name__}",
                )
    unused = set(drivers) - {c.get("name") for c in constraints}
    if unused:
        raise ModelFileError(
            path, "drivers", f"driver overrides for unknown constraints {sorted(unused)}"
        )
    for k, con in enumerate(constraints):
        where = f"constraints[{k}]"
        name = _string(con, "name", path, where)
        where = f"constraints[{k}] ('{name}')"
        kind = _string(con, "type", path, where)
        if kind not in ("DP1", "DP2", "D", "CD"):
            raise ModelFileError(
                path, f"{where}.type", f"unknown GCON type {kind!r}; known: DP1, DP2, D, CD"
            )
        body_names = []
        for key in ("body_i", "body_j"):
            bid = _get(con, key, path, where)
            if isinstance(bid, bool) or not isinstance(bid, int) or bid not in ids:
                raise ModelFileError(
                    path, f"{where}.{key}", f"unknown body id {bid!r}; known ids: {sorted(ids)}"
                )
            body_names.append(ids[bid])
        vectors = {key: _get(con, key, path, where) for key in _GCON_FIELDS[kind]}
        f = drivers.get(name, con.get("f", "0"))
        if isinstance(f, bool) or not isinstance(f, str | int | float):
            raise ModelFileError(
                path, f"{where}.f", f"expected an expression string, got {type(f).__name__}"
            )
        f = str(f)
        try:
            expr = Expression(f, where=f"{where}.f")
            if name not in drivers:
                _check_published_derivatives(path, where, expr, con)
            angle = _published_angle(f) if kind == "DP1" else None
            if angle is not None:
                _add_published_rotation_driver(builder, path, name, body_names, vectors, angle)
            else:
                _add_gcon(builder, name, kind, body_names[0], body_names[1], vectors, f, None)
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    return builder.build()


def _check_published_derivatives(path, where, expr: Expression, con: dict):
    for key, order in (("f_dot", 1), ("f_ddot", 2)):
        if key not in con:
            continue
        try:
            diff = check_expression_derivative(expr, str(con[key]), order, where=f"{where}.{key}")
        except ExpressionError as err:
            logger.warning(
                "%s, %s.%s: cannot parse (%s); using autodiff of f", path, where, key, err
            )
            continue
        if not diff < 1e-6:
            logger.warning(
                "%s, %s.%s = %r disagrees with the derivative of f = %r (max difference %.3g "
                "over t in [0, 2]); jaxmbd uses the autodiff derivative of f",
                path,
                where,
                key,
                con[key],
                expr.source,
                diff,
            )


def _add_published_rotation_driver(builder, path, name, body_names, vectors, angle_source):
    """Replace DP1(a_i, a_j) = cos(angle(t)) by the regular rotation driver (same motion).

    The axis is n = a_i x a_j at the initial pose; the angle is measured from a_i towards
    v_i = n x a_i. If angle(0) matches minus the initial angle, the axis is flipped so that
    the driver follows the same branch as the published DP1.
    """
    body_i, body_j = body_names
    _, A_i = builder._frame(body_i, where=name)
    _, A_j = builder._frame(body_j, where=name)
    where = f"constraint '{name}'"
    a_i = A_i @ _vec3(vectors["a_bar_i"], where=f"{where}.a_bar_i", nonzero=True)
    a_j = A_j @ _vec3(vectors["a_bar_j"], where=f"{where}.a_bar_j", nonzero=True)
    a_i /= np.linalg.norm(a_i)
    a_j /= np.linalg.norm(a_j)
    n = np.cross(a_i, a_j)
    if np.linalg.norm(n) < 1e-6:
        raise ModelError(
            f"driver '{name}': the DP1 vectors are parallel at the initial pose, so the rotation "
            "axis is undefined; define a rotation driver (type ROT) with an explicit axis"
        )
    n /= np.linalg.norm(n)
    phi0 = math.atan2(np.linalg.norm(np.cross(a_i, a_j)), a_i @ a_j)
    theta0 = float(Expression(angle_source)(0.0))

    def wrap(x):
        return (x + math.pi) % (2 * math.pi) - math.pi

    if abs(wrap(theta0 - phi0)) > abs(wrap(theta0 + phi0)):
        n = -n
        phi0 = -phi0
    if abs(wrap(theta0 - phi0)) > 1e-6:
        logger.warning(
            "%s: driver '%s' prescribes %.6g rad at t = 0 but the initial pose has "
            "%.6g rad; the initial position analysis will move the bodies",
            path,
            name,
            theta0,
            phi0,
        )
    v_i = np.cross(n, a_i)
    logger.info(
        "%s: driver '%s' DP1 f = cos(%s) replaced by a rotation driver about the axis %s "
        "(normal to both vectors; same motion, regular at every angle)",
        path,
        name,
        angle_source,
        np.round(n, 6).tolist(),
    )
    builder.add_rot(
        name,
        body_i=body_i,
        u_bar_i=A_i.T @ a_i,
        v_bar_i=A_i.T @ v_i,
        body_j=body_j,
        a_bar_j=vectors["a_bar_j"],
        angle=angle_source,
    )
