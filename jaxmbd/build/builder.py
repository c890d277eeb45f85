"""``ModelBuilder``: assemble a :class:`~jaxmbd.Model` from bodies, GCONs, joints, forces,
contact, actuators, sensors and markers. Each part's methods live in a module of its own
(bodies, gcons, joints, joint_forces, actuators, sensors, forces, contact); this one
holds what the builder records and :meth:`~ModelBuilder.build`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..compiled.host_arrays import device_array
from ..constraints.redundancy import find_redundancy
from ..errors import ModelError
from ..forces import AbstractForce
from ..forces._joint import coordinate_views
from ..gcons import GCON_SPECS
from ..geometry import Shape
from ..model import GROUND, GconSet, Model
from ..model._joint_points import warn_far_joint_points
from ..model._values import _vec3
from ..model.drivers import Expression, group_drivers
from ..model.joints import place_joint_states
from ..model.markers import markers_from_specs
from .actuators import _ActuatorBuilder
from .bodies import _BodyBuilder
from .contact import _ContactBuilder
from .forces import _ForceBuilder
from .gcons import _GconBuilder
from .joint_forces import _JointForceBuilder
from .joints import _JointBuilder
from .sensors import _SensorBuilder
from .specs import _BodySpec, _GconSpec, _JointSpec
from .tendons import _TendonBuilder


def _optional(element) -> tuple:
    return () if element is None else (element,)


@dataclass
class ModelBuilder(
    # the parts, last first: the API reference lists inherited methods from the last base
    _ContactBuilder,
    _ForceBuilder,
    _SensorBuilder,
    _ActuatorBuilder,
    _TendonBuilder,
    _JointForceBuilder,
    _JointBuilder,
    _GconBuilder,
    _BodyBuilder,
):
    """Assemble a :class:`Model` from bodies, GCONs, joints and drivers.

    Joint builders take the joint point and axes in *global* coordinates at the initial
    configuration and expand into GCONs per paper 1 Table 1; each also keeps a joint frame
    on both bodies, so that a Solution reports its coordinates (``sol.joints[name]``, see
    :mod:`jaxmbd.model.joints`) and :meth:`set_joint_state` can set them. Names must be unique;
    every error names the object and the field at fault.
    """

    name: str = "model"
    gravity: Sequence[float] = (0.0, 0.0, -9.81)
    _bodies: list[_BodySpec] = field(default_factory=list)
    _gcons: list[_GconSpec] = field(default_factory=list)
    _forces: list[AbstractForce] = field(default_factory=list)
    # body names of the builder's own force elements, by position in _forces: their body
    # indices are resolved at build (the ground's index is nb, unknown until then)
    _force_bodies: dict[int, dict[str, str]] = field(default_factory=dict)
    _joints: list[_JointSpec] = field(default_factory=list)
    _joint_states: dict[str, tuple] = field(default_factory=dict)
    _limits: dict[str, tuple] = field(default_factory=dict)
    # MuJoCo's solimp of a limit (the MJCF importer's): JointLimits.impedance
    _limit_impedance: dict[str, tuple] = field(default_factory=dict)
    _dynamics: dict[str, tuple] = field(default_factory=dict)  # joint damping etc.
    _actuators: list[dict] = field(default_factory=list)
    _tendons: list[dict] = field(default_factory=list)  # jaxmbd.tendons
    _sensors: list[dict] = field(default_factory=list)  # jaxmbd.sensors
    _markers: list[dict] = field(default_factory=list)  # jaxmbd.model.markers
    _ground_shapes: list[Shape] = field(default_factory=list)
    _contacts: list = field(default_factory=list)  # jaxmbd.contact.build.ContactSpec
    _all_contacts: dict | None = None  # add_contacts' rule, expanded by build

    def build(self) -> Model:
        if not self._bodies:
            raise ModelError(f"model '{self.name}': no bodies")
        warn_far_joint_points(self.name, self._bodies, self._joints)
        g = _vec3(self.gravity, where=f"model '{self.name}'.gravity")
        index = {b.name: k for k, b in enumerate(self._bodies)}
        index[GROUND] = len(self._bodies)
        nc = len(self._gcons)
        f_offset = np.zeros(nc)
        driven: dict[int, Expression] = {}
        sets = []
        by_kind: dict[str, list] = {}
        for row, gc in enumerate(self._gcons):
            by_kind.setdefault(gc.kind, []).append((row, gc))
        for spec in GCON_SPECS:
            members = by_kind.get(spec.name, [])

            def stack(key, members=members, alias=None):
                vals = [
                    gc.vectors.get(key, gc.vectors.get(alias, np.zeros(3))) for _, gc in members
                ]
                return device_array(np.reshape(np.array(vals, dtype=np.float64), (len(members), 3)))

            sets.append(
                GconSet(
                    kind=spec.name,
                    rows=tuple(row for row, _ in members),
                    body_i=tuple(index[gc.body_i] for _, gc in members),
                    body_j=tuple(index[gc.body_j] for _, gc in members),
                    a_bar_i=stack("a_bar_i", alias="u_bar_i"),
                    b_bar_i=stack("v_bar_i"),
                    a_bar_j=stack("a_bar_j"),
                    s_bar_p_i=stack("s_bar_p_i"),
                    s_bar_q_j=stack("s_bar_q_j"),
                    c=stack("c"),
                )
            )
        for row, gc in enumerate(self._gcons):
            if isinstance(gc.f, Expression) and not gc.f.is_constant:
                driven[row] = gc.f
            elif isinstance(gc.f, Expression):
                f_offset[row] = float(gc.f(0.0))
            else:
                f_offset[row] = gc.f
        bodies = self._bodies
        joint_defs = tuple(spec.definition(index) for spec in self._joints if not spec.joint_space)
        # coordinates only joint space has: joint forces act on them, model.joints lacks them
        space_defs = tuple(spec.definition(index) for spec in self._joints if spec.joint_space)
        # joint forces act on one-coordinate joints and the cylindrical joints' coordinates
        views = coordinate_views(joint_defs)
        clash = sorted({d.name for d in views} & {d.name for d in joint_defs})
        if clash:
            raise ModelError(
                f"model '{self.name}': joint names {clash} are also the coordinates of "
                "cylindrical joints ('<joint>.slide', '<joint>.angle'); rename them"
            )
        force_defs = joint_defs + views + space_defs
        space = {d.name for d in space_defs}
        tendons = self._tendon_geometry(index, force_defs, space)
        model = Model(
            name=self.name,
            body_names=tuple(b.name for b in bodies),
            constraint_names=tuple(gc.name for gc in self._gcons),
            constraint_kinds=tuple(gc.kind for gc in self._gcons),
            constraint_joints=tuple(gc.joint for gc in self._gcons),
            constraint_bodies=tuple((index[gc.body_i], index[gc.body_j]) for gc in self._gcons),
            mass=device_array([b.mass for b in bodies]),
            inertia=device_array(np.stack([b.inertia for b in bodies])),
            gravity=device_array(g),
            r0=device_array(np.stack([b.r for b in bodies])),
            A0=device_array(np.stack([b.A for b in bodies])),
            rdot0=device_array(np.stack([b.rdot for b in bodies])),
            omega0=device_array(np.stack([b.omega for b in bodies])),
            gcons=tuple(sets),
            f_offset=device_array(f_offset),
            drivers=group_drivers(driven),
            forces=self._resolved_forces()
            + _optional(self._contact_element(len(bodies)))
            + self._limits_element(index, force_defs, space)
            + self._dynamics_element(force_defs, space)
            + self._tendon_element(tendons)
            + self._actuator_element(force_defs, space, tendons),
            shapes=tuple(b.shapes for b in bodies) if any(b.shapes for b in bodies) else (),
            ground_shapes=tuple(self._ground_shapes),
            joints=joint_defs,
            sensors=self._sensor_element(index, joint_defs),
            markers=markers_from_specs(self._markers, index),
            tendons=tendons,
        )
        # the rank of the constraints as drawn (before any joint state is applied)
        model = dataclasses.replace(model, redundancy=find_redundancy(model))
        return self._with_joint_states(model)

    def _with_joint_states(self, model: Model) -> Model:
        """``model`` with the states of :meth:`set_joint_state` applied (parent joints first)."""
        if not self._joint_states:
            return model
        r0, A0, rdot0, omega0, joints = place_joint_states(model, self._joint_states)
        return dataclasses.replace(
            model,
            r0=device_array(r0),
            A0=device_array(A0),
            rdot0=device_array(rdot0),
            omega0=device_array(omega0),
            joints=joints,
        )
