"""The Solution pytree returned by every analysis, and its npz/csv files."""

from __future__ import annotations

import csv
import dataclasses
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from ._results import first_failed_step
from .contact import slot_history
from .forces import BodyState, OutputContext
from .forces._joint import coordinates_and_rates
from .formulations import get_formulation
from .integrators.moreau_jean import hard_contact_slots, hard_limit_forces
from .model.joints import JointCoordinates, JointCoordinatesMap, JointDefinition, rotation_vector
from .model.markers import MarkerMap
from .sensors import SensorReadings
from .soft_constraints.contact_forces import rows_contact_forces
from .tree import JointType
from .tree._mujoco_layout import tree_layout


@jax.jit
def _compliant_limit_forces(element, r, A, rdot, omega):
    """The compliant limits' forces (..., T, n) at every saved state; the element's own
    leading axes (a batch of models) are mapped with the states'."""

    def at(el, r_, A_, rd_, w_):
        el = el.absolute_part()
        q, qdot, _ = coordinates_and_rates(el.joints, BodyState(r_, A_, rd_, w_))
        return el.generalised_force(0.0, q, qdot)

    fn = jax.vmap(at, in_axes=(None, 0, 0, 0, 0))  # over time
    leading = element.lower.ndim - 1  # a batch of models
    for _ in range(r.ndim - 3 - leading):
        fn = jax.vmap(fn, in_axes=(None, 0, 0, 0, 0))
    for _ in range(leading):
        fn = jax.vmap(fn)
    return fn(element, r, A, rdot, omega)


@functools.partial(jax.jit, static_argnames=("joint_addresses",))
def _force_outputs(element, t, r, A, rdot, omega, qpos, qvel, controls, act, *,
                   joint_addresses=()):  # fmt: skip
    """A force element's outputs (:meth:`~jaxmbd.forces.AbstractForce.outputs`, a
    :class:`~jaxmbd.forces.ForceOutput` per name) at every row (..., T, ...) of the body
    states and, where not None, the joint coordinates (a run in joint coordinates, whose
    joints are ``joint_addresses``: (name, first qpos address, first dof address)), the
    controls and the activations; the element's own leading axes (a batch of models) are
    mapped with the states'."""
    addresses = MappingProxyType({name: (qadr, dadr) for name, qadr, dadr in joint_addresses})

    def at(el, t_, r_, A_, rd_, w_, qpos_, qvel_, u_, act_):
        state = BodyState(r_, A_, rd_, w_)
        return el.outputs(OutputContext(t_, state, qpos_, qvel_, addresses, u_, act_))

    rows = (jnp.broadcast_to(t, r.shape[:-2]), r, A, rdot, omega, qpos, qvel, controls, act)
    mapped = (None,) + (0,) * len(rows)
    fn = jax.vmap(at, in_axes=mapped)
    leading = element.output_batch_ndim
    for _ in range(r.ndim - 3 - leading):
        fn = jax.vmap(fn, in_axes=mapped)
    for _ in range(leading):
        fn = jax.vmap(fn)
    return fn(element, *rows)


@jax.jit
def _limit_forces_at(element, q, qdot):
    """The compliant limits' forces (..., T, n) at coordinates and rates (..., T, n); the
    element's own leading axes (a batch of models) are mapped with theirs."""
    fn = jax.vmap(lambda el, q_, v_: el.generalised_force(0.0, q_, v_), in_axes=(None, 0, 0))
    leading = element.lower.ndim - 1  # a batch of models
    for _ in range(q.ndim - 2 - leading):
        fn = jax.vmap(fn, in_axes=(None, 0, 0))
    for _ in range(leading):
        fn = jax.vmap(fn)
    return fn(element, q, qdot)


class StoredJointMap(Mapping):
    """``sol.joints`` of a Solution read from a file: the joint coordinates it stored, by
    joint name (:class:`~jaxmbd.model.joints.JointCoordinates` without ``kind``)."""

    def __init__(self, joints: dict):
        self._joints = joints

    def __getitem__(self, name: str) -> JointCoordinates:
        try:
            return self._joints[name]
        except KeyError:
            raise KeyError(f"no joint {name!r}; the file stored {list(self._joints)}") from None

    def __iter__(self):
        return iter(self._joints)

    def __len__(self) -> int:
        return len(self._joints)

    def __repr__(self) -> str:
        return f"StoredJointMap({list(self._joints)})"


#: A joint column of a Solution file: ``joint.{name}.{field}`` or ``...{field}.{k}``.
_JOINT_COLUMN = re.compile(r"^joint\.(.+)\.(q|qdot|rotation_vector)(?:\.(\d+))?$")


def _joint_arrays(sol) -> dict[str, np.ndarray]:
    """``{"qpos": (T, nq), "qvel": (T, nv), "joint.{name}.{field}": (T, ...)}`` of a
    Solution, for its files (empty where it has none)."""
    out = {}
    if sol.qpos is not None:
        out["qpos"], out["qvel"] = np.asarray(sol.qpos), np.asarray(sol.qvel)
    for name in sol.joints:
        jc = sol.joints[name]
        for key in ("q", "qdot", "rotation_vector"):
            value = getattr(jc, key)
            if value is not None:
                out[f"joint.{name}.{key}"] = np.asarray(value)
    return out


def _joints_from_arrays(arrays: dict) -> dict[str, JointCoordinates]:
    """The stored joints of :func:`_joint_arrays`' entries (``joint.{name}.{field}``)."""
    fields: dict[str, dict] = {}
    for key, value in arrays.items():
        found = _JOINT_COLUMN.match(key)
        if found and found.group(3) is None:
            fields.setdefault(found.group(1), {})[found.group(2)] = value
    return {name: JointCoordinates(f["q"], f["qdot"], f.get("rotation_vector"), name=name)
            for name, f in fields.items() if "q" in f and "qdot" in f}  # fmt: skip


class TreeJointMap(JointCoordinatesMap):
    """``sol.joints`` of a run in joint coordinates, by joint name. A tree joint that is one
    of the model's joints as it stands (every MJCF joint; a builder's revolute,
    translational, or spherical joint whose child is its body j) is read from qpos/qvel
    (hinge and slide: (..., T); ball: the quaternion (..., T, 4) and the body-frame angular
    velocity, and its rotation vector; free: position and quaternion (..., T, 7),
    (..., T, 6)). A model joint that the tree carries otherwise (a universal, cylindrical or
    planar joint built in code, as one hinge or slide per coordinate; a spherical joint
    whose child is its body i, whose ball turns the other way) is read from the body
    states, as in the absolute
    formulations (:func:`jaxmbd.model.joints.joint_coordinates`: the same coordinates, shapes
    and conventions in every formulation); the tree joints it is made of stay readable by
    their own names (``"u.angle_1"``)."""

    def __init__(self, tree, qpos, qvel, definitions=(), states=None):
        self._tree, self._qpos, self._qvel = tree, qpos, qvel
        names = tree.joint_names
        self._kinds = {d.name: d.kind for d in definitions}
        own = {}
        for d in definitions:
            j = names.index(d.name) if d.name in names else None
            if j is None or (JointType(tree.joint_type[j]) == JointType.BALL
                             and tree.joint_body[j] == d.body_i):  # fmt: skip
                own[d.name] = d
        super().__init__(tuple(own.values()), states)
        parts = tuple(f"{name}." for name in own)
        listed = [d.name for d in definitions]
        listed += [n for n in names if n not in listed and not n.startswith(parts)]
        self._listed = tuple(listed)

    def __getitem__(self, name: str) -> JointCoordinates:
        tree = self._tree
        if name in self._definitions:
            return super().__getitem__(name)
        if name not in tree.joint_names:
            raise KeyError(f"no joint {name!r}; the joints are {list(self._listed)}")
        j = tree.joint_names.index(name)
        jtype = JointType(tree.joint_type[j])
        qa, va = tree.joint_qpos_adr[j], tree.joint_dof_adr[j]
        if jtype.nv == 1:
            q, qdot = self._qpos[..., qa], self._qvel[..., va]
        else:
            q, qdot = self._qpos[..., qa : qa + jtype.nq], self._qvel[..., va : va + jtype.nv]
        kind = self._kinds.get(name, jtype.name.lower())
        turned = rotation_vector(q) if jtype == JointType.BALL else None
        return JointCoordinates(q=q, qdot=qdot, rotation_vector=turned, name=name, kind=kind)

    def __iter__(self):
        return iter(self._listed)

    def __len__(self) -> int:
        return len(self._listed)

    def __repr__(self) -> str:
        return f"TreeJointMap({list(self._listed)})"


class Solution(eqx.Module):
    """Time histories, time first, bodies in model order, ground excluded (API contract).

    ``omega`` and ``omegadot`` are body-frame; ``lam`` holds one multiplier per model
    constraint row (reaction force on the bodies is -Phi_r^T lam); ``iterations``, ``status``
    (integer codes of :class:`~jaxmbd.RESULTS`, 0 = successful) and ``residual`` (||Phi|| or
    ||g|| at convergence) are per step; :attr:`result` is the run's outcome (the first
    failure's RESULTS item) and :attr:`failed_step` its index (-1 when every step passed).
    ``q`` (T, nb, nq) and ``v`` (T, nb, nv) are the formulation's own coordinates and
    velocities, so that invariants can be evaluated exactly where the formulation conserves
    them (dynamics only; None for kinematic analyses). rA's are its body state (r, A) and
    (rdot, omega): not stored twice, they are assembled when read.
    ``condition`` (T,): the 2-norm condition number of the iteration matrix at each step's
    converged iterate, when the integrator was asked to record it (``record_condition=True``;
    NaN at t = 0), else None.
    ``start_correction``: how far the consistent start moved each body from the model's
    initial state (``position`` m, ``rotation`` rad, ``velocity``, each (nb,); a
    :class:`~jaxmbd._checks.StartCorrection`; None for a Solution read from a file).
    ``chart_singular`` (T,) bool, re kinematics only: the steps at the ZXZ chart singularity
    (some |sin theta| < ``RE.chart_band``) that were stepped over by the verified
    least-squares solve (their G v = nu and G a = gamma residuals checked in rA, multipliers
    finite; a failed check is status ``chart_singularity``); None elsewhere.
    """

    t: jax.Array
    r: jax.Array
    A: jax.Array
    rdot: jax.Array
    omega: jax.Array
    rddot: jax.Array
    omegadot: jax.Array
    lam: jax.Array
    iterations: jax.Array
    status: jax.Array
    residual: jax.Array
    stored_q: jax.Array | None  # q where it is not the body state (see :attr:`q`)
    stored_v: jax.Array | None
    condition: jax.Array | None = None
    chart_singular: jax.Array | None = None
    formulation: str = eqx.field(static=True, default="rA")
    integrator: str = eqx.field(static=True, default="")
    # the linear solver that ran ("auto" resolved: "dense", "small", "schur", "structured",
    # "small_structured"); "" for kinematic analyses and files without it
    linear_solver: str = eqx.field(static=True, default="")
    save_every: int = eqx.field(
        static=True, default=1
    )  # steps between saved rows  # "" for kinematic analyses
    body_names: tuple[str, ...] = eqx.field(static=True, default=())
    constraint_names: tuple[str, ...] = eqx.field(static=True, default=())
    # the model's joint definitions (jaxmbd.model.joints), for :attr:`joints`; () if none
    joint_definitions: tuple[JointDefinition, ...] = ()
    # the contact element of the run (jaxmbd.contact.ContactForce), for :attr:`contact`
    contact_element: object | None = None
    # the run's model (without its forces) when it has sensors, for :attr:`sensors`, and
    # the key of their noise (simulate's sensor_key; None: noise-free)
    sensor_model: object | None = None
    sensor_key: jax.Array | None = None
    # how far the consistent start moved each body (jaxmbd._checks.StartCorrection)
    start_correction: object | None = None
    # the model's markers (jaxmbd.model.markers.Markers), for :attr:`markers`; None if none
    marker_element: object | None = None
    # hard contact (moreau_jean): the unilateral rows' mean forces per step (T, n_N + 2 ns)
    unilateral_forces: jax.Array | None = None
    # the model's joint limits (jaxmbd.forces.joint_limits.JointLimits), for :attr:`limits`
    limit_element: object | None = None
    # the kinematic tree of a run in joint coordinates (jaxmbd.tree.KinematicTree): q and v
    # are then its qpos and qvel (T, nq), (T, nv)
    tree: object | None = None
    # the actuators' controls at each row (T, nu) for the actuator sensors and the actuators'
    # outputs (:attr:`forces`): the step's held controls (row 0: the first step's); None:
    # the model's own (or :attr:`step_controls`); NaN after a policy
    controls: jax.Array | None = None
    # the controls held over each step (n, nu) as the run took them, where :attr:`controls`
    # is None (a run without sensors): :attr:`forces` picks the rows' when read
    step_controls: jax.Array | None = None
    # the activations of the actuators with activation dynamics at each row (T, na), in
    # MuJoCo's ``act`` layout (:attr:`jaxmbd.actuators.Actuators.dynamic`); None without
    act: jax.Array | None = None
    # what simulate decided before it ran: its jaxmbd.analysis.plan.Plan without the objects
    # (formulation, integrator, linear solver, treatments, rows dropped, checks; print it);
    # None for the other analyses and for files
    plan: object | None = eqx.field(static=True, default=None)
    # the model's named force elements (spring-dampers, bushings), for :attr:`forces`
    force_elements: tuple = ()
    # read from a file: its joint coordinates (qpos, qvel; None: none) and joints by name
    file_qpos: jax.Array | None = None
    file_qvel: jax.Array | None = None
    file_joints: dict | None = None
    # MuJoCo's constraint model (contact="soft"): each row's solved row forces (T, nefc),
    # ``efc_force``, kept where a sensor reads the contacts (touch); None otherwise
    soft_row_forces: jax.Array | None = None

    def __init__(
        self, t, r, A, rdot, omega, rddot, omegadot, lam, iterations, status, residual,
        q=None, v=None, condition=None, chart_singular=None, formulation="rA", integrator="",
        save_every=1, body_names=(), constraint_names=(), joint_definitions=(),
        contact_element=None, sensor_model=None, sensor_key=None, start_correction=None,
        marker_element=None, unilateral_forces=None, limit_element=None, linear_solver="",
        tree=None, controls=None, act=None, plan=None, force_elements=(), file_qpos=None,
        file_qvel=None, file_joints=None, step_controls=None, soft_row_forces=None,
    ):  # fmt: skip
        self.t, self.r, self.A, self.rdot, self.omega = t, r, A, rdot, omega
        self.rddot, self.omegadot, self.lam = rddot, omegadot, lam
        self.iterations, self.status, self.residual = iterations, status, residual
        self.stored_q, self.stored_v = q, v
        self.condition, self.chart_singular = condition, chart_singular
        self.formulation, self.integrator, self.save_every = formulation, integrator, save_every
        self.body_names, self.constraint_names = body_names, constraint_names
        self.joint_definitions = tuple(joint_definitions)
        self.contact_element = contact_element
        self.sensor_model, self.sensor_key = sensor_model, sensor_key
        self.start_correction = start_correction
        self.marker_element = marker_element
        self.unilateral_forces = unilateral_forces
        self.limit_element = limit_element
        self.linear_solver = linear_solver
        self.tree = tree
        self.controls = controls
        self.step_controls = step_controls
        self.act = act
        self.plan = plan
        self.force_elements = tuple(force_elements)
        self.file_qpos, self.file_qvel, self.file_joints = file_qpos, file_qvel, file_joints
        self.soft_row_forces = soft_row_forces

    @classmethod
    def assembled(cls, t, r, A, rdot, omega, rddot, omegadot, lam, iterations, status, residual,
                  **named) -> Solution:  # fmt: skip
        """The Solution that ``Solution(...)`` of the same arguments builds, built as JAX
        rebuilds a Module from its leaves (``object.__new__``, each field set once, as
        equinox's unflatten does), without the checks of a Module's construction, which
        cost a plain short run's call a tenth of its time. For the analyses' own results,
        whose arguments are the fields as :meth:`__init__` stores them; an argument it
        does not have raises ``TypeError``."""
        unknown = set(named) - _INIT_ONLY.keys() - _FIELD_DEFAULTS.keys()
        if unknown:
            raise TypeError(f"Solution.assembled: unknown arguments {sorted(unknown)}")
        self = object.__new__(cls)
        fields = dict(_FIELD_DEFAULTS, stored_q=None, stored_v=None, t=t, r=r, A=A,
                      rdot=rdot, omega=omega, rddot=rddot, omegadot=omegadot, lam=lam,
                      iterations=iterations, status=status, residual=residual)  # fmt: skip
        for name, value in named.items():
            fields[_INIT_ONLY.get(name, name)] = value
        fields["joint_definitions"] = tuple(fields["joint_definitions"])
        fields["force_elements"] = tuple(fields["force_elements"])
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        return self

    def _from_body_state(self):
        """(q, v) of a dynamics run whose formulation does not store them (its coordinates
        are the body state, see ``stores_own_coordinates``), else None."""
        if self.stored_q is not None or self.integrator == "":
            return None
        form = get_formulation(self.formulation)
        if form.stores_own_coordinates:
            return None
        body = (self.r, self.A, self.rdot, self.omega, self.rddot, self.omegadot)
        q, v, _ = form.from_body_state(*map(jnp.asarray, body))
        return form.flat_coordinates(q), v

    @property
    def q(self):
        """The formulation's own coordinates, one row per body (..., T, nb, nq); rA's (r, A
        row by row) are assembled from the body state when read (not stored twice)."""
        derived = self._from_body_state()
        return self.stored_q if derived is None else derived[0]

    @property
    def v(self):
        """The formulation's own velocities (..., T, nb, nv); rA's are (rdot, omega)."""
        derived = self._from_body_state()
        return self.stored_v if derived is None else derived[1]

    @property
    def _joint_space_run(self) -> bool:
        return self.tree is not None and get_formulation(self.formulation).runs_in_joint_space

    def _layout(self):
        return tree_layout(self.tree, self.r, self.A, self.rdot, self.omega)

    @property
    def qpos(self):
        """Joint coordinates (..., T, nq) in the kinematic tree's layout (MuJoCo's for a
        model read from MJCF or URDF), in every formulation: stored by a run in joint
        coordinates, read from the body states of the others
        (:func:`jaxmbd.tree._mujoco_layout.mujoco_layout`); None for a model without a tree."""
        if self.tree is None:
            return self.file_qpos
        return self.stored_q if self._joint_space_run else self._layout()[0]

    @property
    def qvel(self):
        """Joint velocities (..., T, nv) (see :attr:`qpos`)."""
        if self.tree is None:
            return self.file_qvel
        return self.stored_v if self._joint_space_run else self._layout()[1]

    @property
    def joints(self) -> JointCoordinatesMap:
        """Joint coordinates over time, by joint name: ``sol.joints["hinge"].q`` and
        ``.qdot`` (a :class:`~jaxmbd.model.joints.JointCoordinates`; ``.rotation_vector`` too for a
        spherical joint), computed from the body poses and velocities when read, angles
        unwrapped over time. Conventions per joint kind (and MuJoCo's for joints loaded from
        MJCF): :mod:`jaxmbd.model.joints`. A run in joint coordinates reads the tree's joints from
        qpos/qvel and gives every joint of the model the same coordinates as the other
        formulations (:class:`TreeJointMap`). An unknown name raises ``KeyError`` listing
        the joints; a Solution read from a file has those it stored."""
        if self.file_joints is not None:
            return StoredJointMap(self.file_joints)
        if self._joint_space_run:
            states = (self.r, self.A, self.rdot, self.omega)
            return TreeJointMap(self.tree, self.stored_q, self.stored_v, self.joint_definitions,
                                states)  # fmt: skip
        return JointCoordinatesMap(self.joint_definitions, (self.r, self.A, self.rdot, self.omega))

    @property
    def contact(self):
        """Every contact slot per step (a :class:`~jaxmbd.contact.ContactSlots`, time
        first): ``gap``, ``active`` (gap < 0), ``normal_force``, ``tangential_force`` (on
        the pair's body_i, global), ``point``, ``normal`` (from body_j to body_i), ``slip``,
        and ``pair`` (the pair of each slot, ``model.contacts.pair_names``). Computed from
        the stored body states and the run's contact element when read (exact: the
        compliant force is a function of the state). None for a run without contact pairs
        or with ``contact="none"``, and for a Solution read from a file."""
        if self.contact_element is None:
            return None
        slots = slot_history(self.contact_element, self.r, self.A, self.rdot, self.omega)
        if self.unilateral_forces is None:
            return slots
        return hard_contact_slots(slots, self.unilateral_forces)

    @property
    def limits(self):
        """The joint limits' generalised forces per step, by limited joint name:
        ``sol.limits["hinge"]`` (..., T) along the joint's coordinate (N m for a revolute
        joint, N for a translational one; positive where the lower stop pushes, negative at
        the upper). With ``contact="hard"`` the stops' reactions, each step's impulse / h
        (the mean over the step that ended at the row, as :attr:`contact`'s forces; 0 at
        t = 0); otherwise the compliant limits' forces at each saved state. None for a model
        without limits and for a Solution read from a file."""
        element = self.limit_element
        if element is None:
            return None
        if self._joint_space_run and self.unilateral_forces is None:
            # every limited coordinate, read from qpos and qvel by joint name
            tree = self.tree
            q, qdot = [], []
            for d in element.joints:
                j = tree.joint_names.index(d.name)
                q.append(self.stored_q[..., tree.joint_qpos_adr[j]])
                qdot.append(self.stored_v[..., tree.joint_dof_adr[j]])
            forces = _limit_forces_at(element, jnp.stack(q, -1), jnp.stack(qdot, -1))
            return {d.name: forces[..., k] for k, d in enumerate(element.joints)}
        if not self._joint_space_run:
            element = element.absolute_part()  # the coordinates the body states give
        names = [d.name for d in element.joints]
        if not names:
            return {}
        if self.unilateral_forces is not None:
            n_slots = 0 if self.contact_element is None else self.contact_element.n_slots
            forces = hard_limit_forces(n_slots, len(names), self.unilateral_forces)
        else:
            forces = _compliant_limit_forces(element, self.r, self.A, self.rdot, self.omega)
        return {name: forces[..., k] for k, name in enumerate(names)}

    @property
    def forces(self) -> dict:
        """The force elements' outputs per step, by name: ``sol.forces["strut"]`` (a
        :class:`~jaxmbd.forces.ForceOutput` ``(force, length, rate)``, time first, a
        batch's axes before it):

        * a spring-damper (its name): its tension (N, positive pulling its points
          together), its length (m) and rate (m/s), (T,) each;
        * a bushing (its name): the generalised wrench on body j along and about its
          frame's axes, its deflection (translation, then rotation vector) and its rate,
          (T, 6) each;
        * a point force or body torque given a ``name``: the force (global) or torque
          (body frame), (T, 3); length and rate NaN (T,);
        * ``"actuator:<name>"``: MuJoCo's ``actuator_force`` (before the gear),
          ``actuator_length`` and ``actuator_velocity`` (gear times the joint's coordinate
          or the tendon's length), (T,) each, under the run's controls (:attr:`controls`)
          and, with activation dynamics, its activations (:attr:`act`; the force NaN where
          the run keeps none);
        * ``"joint:<name>"``, a joint with damping, stiffness, friction loss or armature:
          the passive force along its coordinate (N m or N: -c q_dot - k (q - q_ref) -
          friction loss, MuJoCo's ``qfrc_spring + qfrc_damper`` of the joint), the
          deflection q - q_ref and q_dot, (T,) each; of a ball or free joint, along its
          dofs, MuJoCo's ``dif`` and qvel, (T, 3) or (T, 6);
        * ``"tendon:<name>"``: the tendon's passive force along its length (N; negative
          pulling), its length and velocity (MuJoCo's ``ten_length``, ``ten_velocity``),
          (T,) each.

        Computed when read from the stored body states, and in a run in joint coordinates
        from qpos and qvel by joint name (the coordinates that run applied its joint
        elements on); an entry on coordinates that the run's formulation does not apply
        forces on is NaN: in the absolute formulations, a hinge or slide inside a universal,
        planar or three-hinge joint, a ball or free joint, and a fixed tendon over such
        hinges (the run's :class:`~jaxmbd.errors.JointSpaceOnlyWarning` names them). Empty
        for a Solution read from a file."""
        addresses = ()
        if self._joint_space_run:
            tree = self.tree
            addresses = tuple(
                (name, int(tree.joint_qpos_adr[j]), int(tree.joint_dof_adr[j]))
                for j, name in enumerate(tree.joint_names)
            )  # fmt: skip
        qpos, qvel = (self.stored_q, self.stored_v) if addresses else (None, None)
        controls = self.controls
        if controls is None and self.step_controls is not None:
            # row 0: the first step's; row i: the step that ended there
            steps = np.maximum(np.arange(self.r.shape[-3]) * self.save_every - 1, 0)
            controls = jnp.asarray(self.step_controls)[..., steps, :]
        if controls is not None:
            controls = jnp.broadcast_to(controls, self.r.shape[:-2] + controls.shape[-1:])
        out = {}
        for element in self.force_elements:
            outputs = _force_outputs(element, self.t, self.r, self.A, self.rdot, self.omega,
                                     qpos, qvel, controls, self.act,
                                     joint_addresses=addresses)  # fmt: skip
            for name in element.output_names:
                if name in out:
                    raise ValueError(f"sol.forces: two force elements report as {name!r}")
                out[name] = outputs[name]
        return out

    @property
    def sensors(self):
        """The model's sensors over time, by name: ``sol.sensors["imu"]`` (T, dim) (a
        :class:`~jaxmbd.sensors.SensorReadings`; ``.vector()`` concatenates them in model
        order), computed from the stored body states, accelerations and multipliers when
        read (:mod:`jaxmbd.sensors`), with the noise of ``simulate(sensor_key=)`` if one
        was given. An unknown name raises ``KeyError`` listing the sensors; a Solution
        read from a file has none."""
        return SensorReadings(self.sensor_model, self, self.sensor_key)

    @property
    def solved_contacts(self):
        """Under MuJoCo's constraint model, where a sensor reads contact forces (touch):
        the contacts and their solved forces at each row (a
        :class:`~jaxmbd.soft_constraints.contact_forces.ConstraintForces`, rows first:
        ``pos``, ``normal``, ``normal_force``, ``force``, ``torque``), collided at the
        row's pose and decoded from the row's ``efc_force`` (``mj_contactForce``) when
        read; None otherwise."""
        if self.soft_row_forces is None or self.sensor_model is None:
            return None
        constraints = self.sensor_model.constraint_model
        return rows_contact_forces(constraints, self.tree, self.qpos, self.soft_row_forces)

    @property
    def markers(self):
        """The model's markers over time, by name: ``sol.markers["tip"].position`` (T, 3),
        ``.velocity``, ``.acceleration``, ``.orientation`` (T, 3, 3), ``.angular_velocity``,
        ``.angular_acceleration`` (a :class:`~jaxmbd.model.markers.MarkerMotion`, a batch's axes
        first), computed from the stored body states when read (:mod:`jaxmbd.model.markers`) and
        differentiable (usable in losses). An unknown name raises ``KeyError`` listing the
        markers; a Solution read from a file has none."""
        return MarkerMap(self.marker_element, self)

    @property
    def result(self):
        """The run's :class:`~jaxmbd.RESULTS` item: ``RESULTS.successful`` when every step
        converged, else the status of the first failed step (one per member of a batch)."""
        return first_failed_step(self.status)[0]

    @property
    def failed_step(self):
        """Index of the first failed step (-1 when none; one per member of a batch)."""
        return first_failed_step(self.status)[1]

    _ARRAYS = (
        "t",
        "r",
        "A",
        "rdot",
        "omega",
        "rddot",
        "omegadot",
        "lam",
        "iterations",
        "status",
        "residual",
    )

    def save(self, path) -> Path:
        """Write ``.npz`` (all arrays and names) or ``.csv`` (one row per time step)."""
        path = Path(path)
        arrays = {k: np.asarray(getattr(self, k)) for k in self._ARRAYS}
        own = {
            k: np.asarray(getattr(self, k))
            for k in ("q", "v", "condition", "chart_singular")
            if getattr(self, k) is not None
        }
        if path.suffix == ".csv":
            header, columns = ["t"], [arrays["t"]]
            for b, name in enumerate(self.body_names):
                for key in ("r", "rdot", "rddot", "omega", "omegadot"):
                    for k, axis in enumerate("xyz"):
                        header.append(f"{name}.{key}.{axis}")
                        columns.append(arrays[key][:, b, k])
                for i in range(3):
                    for j in range(3):
                        header.append(f"{name}.A{i + 1}{j + 1}")
                        columns.append(arrays["A"][:, b, i, j])
            for c, name in enumerate(self.constraint_names):
                header.append(f"lam.{name}")
                columns.append(arrays["lam"][:, c])
            for key, value in _joint_arrays(self).items():
                flat = value.reshape(value.shape[0], -1)
                if key in ("qpos", "qvel") or value.ndim > 1:
                    header += [f"{key}.{k}" for k in range(flat.shape[1])]
                else:
                    header.append(key)
                columns += list(flat.T)
            header += ["iterations", "status", "residual"]
            columns += [arrays["iterations"], arrays["status"], arrays["residual"]]
            with path.open("w", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(header)
                writer.writerows(np.stack(columns, axis=1).tolist())
            return path
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        np.savez(
            path,
            **arrays,
            **own,
            formulation=np.asarray(self.formulation),
            integrator=np.asarray(self.integrator),
            linear_solver=np.asarray(self.linear_solver),
            save_every=np.asarray(self.save_every),
            body_names=np.asarray(self.body_names, dtype=str),
            constraint_names=np.asarray(self.constraint_names, dtype=str),
            **_joint_arrays(self),
        )
        return path

    @classmethod
    def load(cls, path) -> Solution:
        """Read a Solution written by :meth:`save`, as ``.npz`` (everything) or ``.csv``
        (the body states, multipliers and per-step outcome; the formulation's own
        coordinates, formulation and integrator are not in a CSV file)."""
        path = Path(path)
        if path.suffix == ".csv":
            return cls._load_csv(path)
        with np.load(path) as data:
            joints = _joints_from_arrays({k: data[k] for k in data.files if k.startswith("joint.")})
            return cls(
                **{k: data[k] for k in cls._ARRAYS},
                **{k: data[k] for k in ("q", "v", "condition", "chart_singular") if k in data},
                formulation=str(data["formulation"]),
                integrator=str(data["integrator"]) if "integrator" in data else "",
                linear_solver=str(data["linear_solver"]) if "linear_solver" in data else "",
                save_every=int(data["save_every"]) if "save_every" in data else 1,
                body_names=tuple(str(s) for s in data["body_names"]),
                constraint_names=tuple(str(s) for s in data["constraint_names"]),
                file_qpos=data["qpos"] if "qpos" in data else None,
                file_qvel=data["qvel"] if "qvel" in data else None,
                file_joints=joints or None,
            )

    @classmethod
    def _load_csv(cls, path: Path) -> Solution:
        """The CSV of :meth:`save`: columns t, then per body ``{body}.{r,rdot,rddot,omega,
        omegadot}.{x,y,z}`` and ``{body}.A{ij}``, ``lam.{constraint}``, iterations, status,
        residual. A file that is not one says which column is wrong."""
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        if not rows:
            raise ValueError(f"{path}: empty file, not a Solution CSV")
        header, body = rows[0], rows[1:]
        try:
            data = np.asarray(body, dtype=np.float64).reshape(len(body), len(header))
        except ValueError as err:
            raise ValueError(
                f"{path}: not a Solution CSV (non-numeric or ragged rows: {err})"
            ) from None
        column = {name: k for k, name in enumerate(header)}
        missing = [k for k in ("t", "iterations", "status", "residual") if k not in column]
        if missing:
            raise ValueError(f"{path}: not a Solution CSV (no column {missing[0]!r})")
        vectors = ("r", "rdot", "rddot", "omega", "omegadot")
        body_names, constraint_names = [], []
        for name in header:
            if name.startswith("lam."):
                constraint_names.append(name[4:])
            elif name.endswith(".r.x"):
                body_names.append(name[: -len(".r.x")])
        T, nb = data.shape[0], len(body_names)

        def get(name):
            if name not in column:
                raise ValueError(f"{path}: not a Solution CSV (no column {name!r})")
            return data[:, column[name]]

        arrays = {
            key: np.stack([np.stack([get(f"{b}.{key}.{a}") for a in "xyz"], -1)
                           for b in body_names], 1).reshape(T, nb, 3)
            for key in vectors
        }  # fmt: skip
        arrays["A"] = np.stack(
            [np.stack([get(f"{b}.A{i + 1}{j + 1}") for i in range(3) for j in range(3)], -1)
             for b in body_names], 1,
        ).reshape(T, nb, 3, 3)  # fmt: skip
        lam = np.stack([get(f"lam.{c}") for c in constraint_names], 1).reshape(T, -1)
        stored = {}  # qpos, qvel and joint fields, their numbered columns gathered
        for name in header:
            base, _, k = name.rpartition(".")
            joint = _JOINT_COLUMN.match(name)
            if joint and joint.group(3) is None:
                stored[name] = get(name)
            elif (base in ("qpos", "qvel") or joint) and k.isdigit():
                stored.setdefault(base, []).append(get(name))
        stored = {k: np.stack(v, -1) if isinstance(v, list) else v for k, v in stored.items()}
        return cls(
            get("t"), arrays["r"], arrays["A"], arrays["rdot"], arrays["omega"],
            arrays["rddot"], arrays["omegadot"], lam, get("iterations").astype(np.int32),
            get("status").astype(np.int32), get("residual"), body_names=tuple(body_names),
            constraint_names=tuple(constraint_names), file_qpos=stored.get("qpos"),
            file_qvel=stored.get("qvel"), file_joints=_joints_from_arrays(stored) or None,
        )  # fmt: skip


#: The arguments of :meth:`Solution.__init__` stored under another field name.
_INIT_ONLY = {"q": "stored_q", "v": "stored_v"}
#: Every field of a Solution without a required argument, with its default.
_FIELD_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(Solution) if f.default is not dataclasses.MISSING
}
