"""The schema of jaxmbd's own model files: the keys every object may have.

Own schema (``"format": "jaxmbd-model"``)::

    {"format": "jaxmbd-model", "version": 1, "name": ..., "gravity": [0, 0, -9.81],
     "bodies": [{"name", "mass", "inertia": [Jxx, Jyy, Jzz] or 3x3, "r", "A" or
                 "axes": {"x": [...], "y": [...]}, "rdot", "omega",
                 "shapes": [{"type": "box" | "cylinder" | "sphere" | "capsule" | "ellipsoid" |
                             "cone" | "pyramid" | "mesh", sizes, "pos", "A" or "axis", "color"}]}],
     "joints": [{"name", "type": "revolute" | "spherical" | "universal" | "cylindrical" |
                 "translational" | "perpendicular_1" | "perpendicular_2" | "fixed", "body_i",
                 "body_j", "point", "axis" (or "axis_i", "axis_j" for universal; a fixed
                 joint, the weld of ModelBuilder.fixed, has only an optional "point"), revolute and
                 translational also "limits": [lower, upper], "limit_stiffness",
                 "limit_damping", "limit_restitution", "limit_impedance" (MuJoCo's solimp),
                 "damping", "stiffness", "spring_reference", "friction_loss", "armature";
                 cylindrical "slide": {...}, "angle": {...} with those keys for each coordinate}],
     "constraints": [{"name", "type": "DP1" | "DP2" | "D" | "CD" | "ROT", "body_i", "body_j",
                      vectors in body frames, "f": number or expression in t, "joint"}],
     "drivers": [{"name", "type": "rotation", "body_i", "body_j", "axis", "angle",
                  "reference"} or
                 {"name", "type": "translation", "body_i", "body_j", "axis", "displacement",
                  "point" (optional)} (ModelBuilder.rotation_driver, translation_driver)],
     "forces": [{"name", "type": "spring_damper", "body_i", "point_i", "body_j", "point_j",
                 "stiffness", "damping", "rest_length"} or
                {"name", "type": "bushing", "body_i", "body_j", "s_bar_i", "s_bar_j",
                 "frame_i", "frame_j" (body frames), "stiffness", "damping": 6 numbers} or
                {"type": "fluid", "density", "viscosity", "wind", "boxes": [{"body",
                 "point", "rotation", "sides"}], "ellipsoids": [{"body", "point",
                 "rotation", "semiaxes", "coefficients", "virtual_mass",
                 "virtual_inertia"}]} (jaxmbd.forces.fluid) or
                any type registered with jaxmbd.forces.register_force_type],
     "ground_shapes": [{"type": "plane" | "box" | ..., sizes, "pos", "A" or "axis"}],
     "contacts": [{"body_i", "body_j" (a body or "ground"), "friction", "restitution",
                   "stiffness", "damping", "exponent", "slip_velocity",
                   "torsional_friction", "rolling_friction", "margin",
                   "shapes" (optional: [[k_i, k_j], ...] shape pairs),
                   "law" (optional: {"type": "hunt_crossley" | "linear" | any registered
                          with jaxmbd.contact.register_contact_law, its fields})}],
     "joint_coordinates": [{"name", "type": "revolute" | "translational" | "cylindrical" |
                            "universal" | "spherical" | "planar", "body_i", "body_j",
                            "s_bar_i", "s_bar_j", "frame_i", "frame_j" (body frames),
                            "offset", "sign", "q_start", and the limit and dynamics
                            keys of "joints"; "joint_space": true for a coordinate only
                            joint space has (a hinge inside a universal joint read from
                            MJCF), which the absolute formulations leave out}],
     "actuators": [{"name", "joint", "kind": "motor" | "position" | "velocity" | "general",
                    "gear", "kp", "kv", "gain", "bias": [b0, b1, b2],
                    "ctrl_range", "force_range": [lower, upper] (null: unbounded side)}],
     "sensors": [{"name", "kind" (jaxmbd.sensors.SENSOR_KINDS), "joint" or "body",
                  "site": [x, y, z], "frame": 3x3 (body frame), "noise"}],
     "markers": [{"name", "body", "point": [x, y, z], "axes": 3x3 (optional; global,
                  at the initial configuration)}],
     "tree": {"body_names", "parent", "joint_names", "joint_type", "joint_body",
              "body_pos", "body_rot", "com", "joint_pos", "joint_axis", "qpos0",
              "qpos_init", "qvel_init"} (optional; jaxmbd.tree.KinematicTree's fields),
     "joint_space_only": [reason, ...] (optional),
     "solver": {"h": ..., "t_end": ..., "tol": ...}}

``joint_coordinates`` (optional; written by :func:`save_model`) define the joint coordinates
of ``sol.joints`` (:mod:`jaxmbd.model.joints`) without adding constraint rows: a model saved at GCON
level keeps its joints' coordinates. A joint of ``joints`` has its coordinates already.

Shapes (optional; fields in :mod:`jaxmbd.geometry`) are in the body frame, and collide
with those of a contact pair unless ``"collide": false``; ``ground_shapes`` (global) are the
ground's planes and shapes, ``contacts`` the pairs of :meth:`ModelBuilder.add_contact`
(:mod:`jaxmbd.contact`; a missing number takes the builder's default). Joint limits,
damping, stiffness and friction loss are options of their joint (:meth:`ModelBuilder.revolute`,
:mod:`jaxmbd.forces.joint_limits`, :mod:`jaxmbd.forces.joint_dynamics`); ``actuators`` are those of
:meth:`ModelBuilder.add_actuator` (:mod:`jaxmbd.actuators`), in control order; ``sensors``
those of :meth:`ModelBuilder.add_sensor` (:mod:`jaxmbd.sensors`), in order; ``markers``
those of :meth:`ModelBuilder.add_marker` (:mod:`jaxmbd.model.markers`). Saved models
write limit gains and spring references as built (defaults resolved). ``tree`` and
``joint_space_only`` are :attr:`Model.tree` and :attr:`Model.joint_space_only` (models read
from MJCF: MuJoCo's joints and qpos layout, and the bodies whose joints compose into no
GCON joint).
a body without shapes is drawn as a stick figure joining its joint points (see
:func:`jaxmbd.geometry.default_shapes`). Joint points and axes are
global, at the initial configuration; GCON vectors are in body frames. The published
files (uwsbel/sbel-reproducibility) have no masses: they load with unit masses and inertias
and a warning unless ``masses`` supplies them.
"""

from __future__ import annotations

from ..forces._joint import CYLINDRICAL_VIEWS

FORMAT = "jaxmbd-model"
_JOINT_FIELDS = {
    "revolute": ("point", "axis"),
    "spherical": ("point",),
    "universal": ("point", "axis_i", "axis_j"),
    "cylindrical": ("point", "axis"),
    "translational": ("point", "axis"),
    "perpendicular_1": ("axis",),
    "perpendicular_2": ("point", "axis"),
    "fixed": (),
}
#: The optional keys of joint types (the builder's defaults where absent).
_JOINT_OPTIONAL = {"fixed": ("point",)}
#: Model-file driver types: the builder method that adds each, its required and optional keys.
_DRIVER_FIELDS = {
    "rotation": ("rotation_driver", ("axis", "angle"), ("reference",)),
    "translation": ("translation_driver", ("axis", "displacement"), ("point",)),
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
#: (:mod:`jaxmbd.forces.joint_limits`) and joint dynamics (:mod:`jaxmbd.forces.joint_dynamics`).
_LIMIT_KEYS = ("limits", "limit_stiffness", "limit_damping", "limit_restitution", "limit_impedance")
_DYNAMICS_KEYS = ("damping", "stiffness", "spring_reference", "friction_loss", "armature")
_JOINT_FORCE_KEYS = _LIMIT_KEYS + _DYNAMICS_KEYS
#: A cylindrical joint's entries for its two coordinates ("slide", "angle"): objects with
#: the keys of :data:`_JOINT_FORCE_KEYS` (the coordinate views of
#: :data:`jaxmbd.forces._joint.CYLINDRICAL_VIEWS`).
_CYLINDRICAL_KEYS = tuple(suffix for suffix, _ in CYLINDRICAL_VIEWS)

# Keys each object of a model file may have; anything else is refused (a typo such as
# "inertia_" must not silently fall back to a default).
_OWN_KEYS = {
    "model": {"format", "version", "name", "description", "gravity", "bodies", "joints",
              "constraints", "drivers", "forces", "joint_coordinates", "solver",
              "ground_shapes", "contacts", "actuators", "sensors", "markers", "tree",
              "joint_space_only"},
    "tree": {"body_names", "parent", "joint_names", "joint_type", "joint_body", "body_pos",
             "body_rot", "com", "joint_pos", "joint_axis", "qpos0", "qpos_init", "qvel_init"},
    "body": {"name", "mass", "inertia", "r", "A", "axes", "rdot", "omega", "shapes"},
    "axes": {"x", "y"},
    "joint": {"name", "type", "body_i", "body_j", "point", "axis", "axis_i", "axis_j",
              *_JOINT_FORCE_KEYS, *_CYLINDRICAL_KEYS},
    "constraint": {"name", "type", "body_i", "body_j", "a_bar_i", "a_bar_j", "s_bar_p_i",
                   "s_bar_q_j", "c", "u_bar_i", "v_bar_i", "f", "angle", "joint"},
    "driver": {"name", "type", "body_i", "body_j", "axis", "angle", "reference",
               "displacement", "point"},
    "solver": {"h", "t_end", "tol"},
    "contact": {"body_i", "body_j", "friction", "restitution", "stiffness", "damping",
                "exponent", "slip_velocity", "torsional_friction", "rolling_friction",
                "margin", "shapes", "law"},
    "joint_coordinates": {"name", "type", "body_i", "body_j", "s_bar_i", "s_bar_j", "frame_i",
                          "joint_space",
                          "frame_j", "offset", "sign", "q_start", *_JOINT_FORCE_KEYS,
                          *_CYLINDRICAL_KEYS},
    "actuator": {"name", "joint", "kind", "gear", "ctrl_range", "force_range", "kp", "kv",
                 "dynamics", "time_constant", "act_range", "act_early",
                 "gain", "bias"},
    "sensor": {"name", "kind", "joint", "body", "site", "frame", "noise", "reference",
               "subtree", "parent", "zone", "actuator", "part", "targets"},  # fmt: skip
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
#: Lists of strings (names, reasons).
_STRING_LISTS = {"body_names", "joint_kinds", "joint_names", "joint_space_only", "subtree", "zone"}
MAX_DEPTH = 12  # the deepest field of the schema (a shape's matrix row) is at depth 6
MAX_FILE_BYTES = 64 * 2**20

_JOINT_FRAME_FIELDS = ("s_bar_i", "s_bar_j", "frame_i", "frame_j")
_CONTACT_NUMBERS = ("restitution", "stiffness", "damping", "exponent", "slip_velocity",
                    "torsional_friction", "rolling_friction", "margin")  # fmt: skip
#: The keys of a force element's entry besides those of its type.
_FORCE_KEYS = {"name", "type"}
#: The joint dynamics a ``joint_coordinates`` entry leaves out (ModelBuilder's defaults).
_DYNAMICS_DEFAULTS = {
    "damping": 0.0, "stiffness": 0.0, "spring_reference": None, "friction_loss": 0.0,
    "armature": None,
}  # fmt: skip
