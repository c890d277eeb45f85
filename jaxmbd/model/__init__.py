"""The model: bodies, GCONs, drivers and forces as an equinox pytree.

Topology (how many bodies, which constraint types, which bodies they connect) is static;
every number is an array leaf reachable with ``eqx.tree_at`` (docs/design.md, principle 1). Bodies
are indexed 0..nb-1 in model order; the ground is index ``nb`` in the static topology.
Constraints are stored grouped by GCON type (docs/design.md, principle 3) and keep their model order
through static row indices, so ``lam[:, k]`` is the multiplier of the k-th constraint.

Build models with :class:`~jaxmbd.ModelBuilder` (:mod:`jaxmbd.build`; joints of paper 1
Table 1 expand into GCONs) or load them from files with :func:`jaxmbd.load_model`.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..gcons import GCON_SPECS
from ..geometry import Shape
from ..tree import JointType, body_velocities, poses
from ._values import _joint_values
from .drivers import DriverGroup
from .joints import (
    SIZES,
    JointDefinition,
    joint_coordinates,
    joint_kind,
    place_joint_states,
)

GROUND = "ground"
GCON_KINDS = tuple(spec.name for spec in GCON_SPECS)


class GconSet(eqx.Module):
    """All constraints of one GCON type, stacked. Unused vector fields are zero."""

    kind: str = eqx.field(static=True)
    rows: tuple[int, ...] = eqx.field(static=True)
    body_i: tuple[int, ...] = eqx.field(static=True)
    body_j: tuple[int, ...] = eqx.field(static=True)
    a_bar_i: jax.Array  # DP1, DP2; ROT: u_bar_i
    b_bar_i: jax.Array  # ROT: v_bar_i
    a_bar_j: jax.Array  # DP1, ROT
    s_bar_p_i: jax.Array  # DP2, D, CD
    s_bar_q_j: jax.Array  # DP2, D, CD
    c: jax.Array  # CD

    @property
    def size(self) -> int:
        return len(self.rows)


@dataclasses.dataclass(frozen=True)
class JointDynamicsView:
    """One joint's entries of the model's joint-dynamics element
    (:meth:`Model.joint_dynamics`): ``damping``, ``stiffness``, ``spring_reference``,
    ``friction_loss`` and ``armature`` (0 where the element has none) of ``joint``; the
    ``element`` itself and this joint's ``index`` in its (n,) leaves."""

    FIELDS = ("damping", "stiffness", "spring_reference", "friction_loss", "armature")

    joint: str
    element: object
    index: int

    def _entry(self, field: str):
        values = getattr(self.element, field)
        return jnp.asarray(0.0) if values is None else values[self.index]

    @property
    def damping(self):
        return self._entry("damping")

    @property
    def stiffness(self):
        return self._entry("stiffness")

    @property
    def spring_reference(self):
        return self._entry("spring_reference")

    @property
    def friction_loss(self):
        return self._entry("friction_loss")

    @property
    def armature(self):
        return self._entry("armature")


class Model(eqx.Module):
    """A multibody model. Arrays are leaves; names and topology are static."""

    name: str = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    constraint_names: tuple[str, ...] = eqx.field(static=True)
    constraint_kinds: tuple[str, ...] = eqx.field(static=True)
    constraint_joints: tuple[str, ...] = eqx.field(static=True)
    constraint_bodies: tuple[tuple[int, int], ...] = eqx.field(static=True)
    mass: jax.Array  # (nb,)
    inertia: jax.Array  # (nb, 3, 3), body frame
    gravity: jax.Array  # (3,)
    r0: jax.Array  # (nb, 3)
    A0: jax.Array  # (nb, 3, 3)
    rdot0: jax.Array  # (nb, 3)
    omega0: jax.Array  # (nb, 3), body frame
    gcons: tuple[GconSet, ...]  # one per record of GCON_SPECS, in order (possibly empty)
    f_offset: jax.Array  # (nc,) constant part of each row's f(t)
    drivers: tuple[DriverGroup, ...]
    forces: tuple  # the force elements (jaxmbd.forces.AbstractForce), summed in this order
    # visual geometry per body (drawing only, static; () = the default stick figure)
    shapes: tuple[tuple[Shape, ...], ...] = eqx.field(static=True, default=())
    # shapes fixed to the ground (global frame): its planes and collision shapes
    ground_shapes: tuple[Shape, ...] = eqx.field(static=True, default=())
    # redundant constraint rows found when the model was built (see jaxmbd.constraints.redundancy);
    # None: not analysed (a run then keeps every row)
    redundancy: object | None = eqx.field(static=True, default=None)  # a Redundancy
    # joint frames and coordinate conventions, one per builder joint (see jaxmbd.model.joints);
    # () for models built at GCON level only
    joints: tuple[JointDefinition, ...] = ()
    # the sensors (jaxmbd.sensors.Sensors; sol.sensors[name]); None: no sensors
    sensors: object | None = None
    # frames fixed on bodies (jaxmbd.model.markers.Markers; sol.markers[name]); None: no markers
    markers: object | None = None
    # the bodies as a kinematic tree in joint coordinates (jaxmbd.tree.KinematicTree, body k
    # of the tree is body k of the model), as read from a file (MJCF: MuJoCo's joints and
    # qpos layout); None: derived from the joints when the "joint" formulation runs
    tree: object | None = None
    # why the absolute-coordinate formulations cannot run the model (bodies whose joints
    # compose into no GCON joint), static; () when they can
    joint_space_only: tuple[str, ...] = eqx.field(static=True, default=())
    # every tendon of the model (jaxmbd.tendons.Tendons: their paths; the force elements
    # that act along them hold their own); None: no tendons
    tendons: object | None = None
    # MJCF's equality constraints (jaxmbd.joint_space.equalities: rows of the tree state, active or
    # not), in file order; () for models without them
    equalities: tuple = ()
    # MuJoCo's constraint model of a model file (jaxmbd.soft_constraints.MujocoConstraints:
    # its contact pairs, joint limits, friction loss and solver settings, solved together
    # where a run asks for "soft"); None: a model built in code
    constraint_model: object | None = None

    @property
    def nb(self) -> int:
        return len(self.body_names)

    @property
    def nc(self) -> int:
        return len(self.constraint_names)

    @property
    def contacts(self):
        """The contact pairs (a :class:`jaxmbd.contact.ContactForce`, one element of
        ``forces``): ``model.contacts.friction``, ``.restitution``, ``.stiffness``, ...
        ``(n_pairs,)`` array leaves; None for a model without contact pairs."""
        # the element that collides shapes: the model names no element class (the elements
        # sit above it and import it)
        return next((f for f in self.forces if hasattr(f, "collide")), None)

    @property
    def actuators(self):
        """The actuators (a :class:`jaxmbd.actuators.Actuators`, one element of ``forces``):
        ``model.actuators.gain``, ``.bias``, ``.gear``, ... ``(nu,)`` array leaves; None
        for a model without actuators."""
        return next((f for f in self.forces if hasattr(f, "actuator_force")), None)

    def joint_dynamics(self, joint: str) -> JointDynamicsView:
        """Damping, stiffness, spring reference, friction loss and armature of ``joint``
        (:mod:`jaxmbd.forces.joint_dynamics`) as a view: ``model.joint_dynamics("hinge").damping``
        (a scalar). Its ``element`` is the model's own element, whose (n,) leaves
        ``eqx.tree_at`` replaces: ``eqx.tree_at(lambda m: m.joint_dynamics("hinge")
        .element.damping, model, new)`` (every joint of the element; ``index`` is this
        joint's entry); :meth:`with_joint_dynamics` changes one joint."""
        # the element with per-joint friction loss: the model names no element class
        element = next((f for f in self.forces if hasattr(f, "friction_loss")), None)
        names = () if element is None else element.names
        if joint not in names:
            known = [n for n in self.joint_names if n not in names]
            raise ModelError(
                f"model '{self.name}': joint {joint!r} has no joint dynamics; joints with "
                f"them: {list(names)}"
                + (
                    f" (give one of {known} damping, stiffness, friction_loss or armature "
                    "when it is built: armature=0.0 makes its entries settable)"
                    if joint in known
                    else ""
                )
            )
        return JointDynamicsView(joint, element, names.index(joint))

    def with_joint_dynamics(self, joint: str, **values) -> Model:
        """This model with ``joint``'s dynamics changed: keywords ``damping``, ``stiffness``,
        ``spring_reference``, ``friction_loss``, ``armature`` (numbers or traced scalars,
        so ``jax.grad`` reaches them). Example: ``model.with_joint_dynamics("hinge",
        damping=2.0)``."""
        view = self.joint_dynamics(joint)
        unknown = set(values) - set(JointDynamicsView.FIELDS)
        if unknown:
            raise ModelError(
                f"with_joint_dynamics: unknown {sorted(unknown)}; "
                f"use {list(JointDynamicsView.FIELDS)}"
            )
        element, i = view.element, view.index
        changes = {}
        for key, value in values.items():
            old = getattr(element, key)
            if old is None:  # armature: zero for the element's other joints
                old = jnp.zeros(len(element.names))
            changes[key] = jnp.asarray(old, jnp.float64).at[i].set(value)
        new = dataclasses.replace(element, **changes)
        forces = tuple(new if f is element else f for f in self.forces)
        return dataclasses.replace(self, forces=forces)

    @property
    def nu(self) -> int:
        """The number of control inputs (actuators)."""
        element = self.actuators
        return 0 if element is None else element.nu

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints with coordinates (``sol.joints``), in the order they were added."""
        return tuple(d.name for d in self.joints)

    def with_joint_state(self, name: str, *, q=None, qdot=None) -> Model:
        """This model starting with joint ``name`` at (``q``, ``qdot``) in its coordinates:
        :meth:`ModelBuilder.set_joint_state` for a built or loaded model (an MJCF file's,
        say). The joint's child body (the one farther from the ground in the body graph's
        spanning tree) is placed relative to its parent with its subtree moving rigidly; the
        joint's ``q_start`` becomes ``q`` (angles of ``sol.joints`` unwrap from it). Left out,
        ``q`` keeps the current relative pose and ``qdot`` the current relative velocity.
        Joints that close a loop are refused (set the loop's tree joints; the consistent
        start of :func:`~jaxmbd.simulate` closes the loop). Chain calls to set several
        joints; the pose is computed with NumPy (call it outside ``jit``)."""
        if self.tree is not None and name in self.tree.joint_names:
            return self._with_tree_joint_state(name, q, qdot)
        defn = next((d for d in self.joints if d.name == name), None)
        if defn is None:
            raise ModelError(f"with_joint_state: model '{self.name}' has no joint {name!r}; "
                             f"joints with coordinates: {list(self.joint_names)}")  # fmt: skip
        where = f"with_joint_state: joint '{name}' ({defn.kind})"
        if q is None and qdot is None:
            raise ModelError(f"{where}: give q, qdot or both")
        nq, nv = SIZES[defn.kind]
        if q is None:  # the current relative pose
            q = np.asarray(joint_coordinates(defn, *(
                jnp.asarray(x)[None] for x in (self.r0, self.A0, self.rdot0, self.omega0)
            )).q)[0]  # fmt: skip
        state = (
            None
            if q is None
            else _joint_values(
                q, nq, where=f"{where}.q", quaternion=joint_kind(defn.kind).quaternion
            ),
            None if qdot is None else _joint_values(qdot, nv, where=f"{where}.qdot"),
        )
        r0, A0, rdot0, omega0, joints = place_joint_states(self, {name: state})
        return dataclasses.replace(
            self, r0=jnp.asarray(r0), A0=jnp.asarray(A0), rdot0=jnp.asarray(rdot0),
            omega0=jnp.asarray(omega0), joints=joints,
        )  # fmt: skip

    def _with_tree_joint_state(self, name: str, q, qdot) -> Model:
        """:meth:`with_joint_state` of a model with a kinematic tree read from its file: the
        joint's block of the tree's initial qpos/qvel (MuJoCo's coordinates) is set, and
        the bodies' initial states follow from the tree's forward kinematics (so every
        formulation starts from the same state)."""
        tree = self.tree
        j = tree.joint_names.index(name)
        jtype = JointType(tree.joint_type[j])
        where = f"with_joint_state: joint '{name}' ({jtype.name.lower()})"
        if q is None and qdot is None:
            raise ModelError(f"{where}: give q, qdot or both")
        qpos, qvel = np.array(tree.qpos_init), np.array(tree.qvel_init)
        qa, va = tree.joint_qpos_adr[j], tree.joint_dof_adr[j]
        if q is not None:
            qpos[qa : qa + jtype.nq] = _joint_values(q, jtype.nq, where=f"{where}.q",
                                                    quaternion=jtype.nq == 4)  # fmt: skip
        if qdot is not None:
            qvel[va : va + jtype.nv] = _joint_values(qdot, jtype.nv, where=f"{where}.qdot")
        tree = dataclasses.replace(tree, qpos_init=jnp.asarray(qpos), qvel_init=jnp.asarray(qvel))
        p = poses(tree, tree.qpos_init)
        rdot, omega = body_velocities(tree, p, tree.qvel_init)
        joints = tuple(
            dataclasses.replace(d, q_start=jnp.asarray(qpos[qa : qa + 1]))
            if d.name == name and jtype.nv == 1 else d
            for d in self.joints
        )  # fmt: skip
        return dataclasses.replace(self, r0=p.c, A0=p.R, rdot0=rdot, omega0=omega, tree=tree,
                                   joints=joints)  # fmt: skip

    def gcon(self, kind: str) -> GconSet:
        return self.gcons[GCON_KINDS.index(kind)]

    def body_label(self, index: int) -> str:
        return GROUND if index == self.nb else self.body_names[index]

    def describe_constraint(self, row: int) -> str:
        i, j = self.constraint_bodies[row]
        joint = self.constraint_joints[row]
        via = f" (joint '{joint}')" if joint != self.constraint_names[row] else ""
        return (
            f"{self.constraint_kinds[row]} '{self.constraint_names[row]}'{via} between "
            f"'{self.body_label(i)}' and '{self.body_label(j)}'"
        )

    def gcon_counts(self) -> dict[str, int]:
        return {spec.name: self.gcon(spec.name).size for spec in GCON_SPECS}

    def without_rows(self, rows) -> Model:
        """This model without the constraint rows ``rows`` (model row indices; static, so
        it works on traced models). Driven rows cannot be removed."""
        drop = set(int(r) for r in rows)
        kept = [r for r in range(self.nc) if r not in drop]
        new_row = {old: new for new, old in enumerate(kept)}
        sets = []
        for s in self.gcons:
            keep = np.asarray([k for k, r in enumerate(s.rows) if r not in drop], dtype=int)
            sets.append(
                GconSet(
                    kind=s.kind,
                    rows=tuple(new_row[s.rows[k]] for k in keep),
                    body_i=tuple(s.body_i[k] for k in keep),
                    body_j=tuple(s.body_j[k] for k in keep),
                    a_bar_i=s.a_bar_i[keep],
                    b_bar_i=s.b_bar_i[keep],
                    a_bar_j=s.a_bar_j[keep],
                    s_bar_p_i=s.s_bar_p_i[keep],
                    s_bar_q_j=s.s_bar_q_j[keep],
                    c=s.c[keep],
                )
            )
        drivers = []
        for group in self.drivers:
            if any(r in drop for r in group.rows):
                raise ModelError(f"model '{self.name}': a driven row cannot be removed")
            drivers.append(
                DriverGroup(
                    rows=tuple(new_row[r] for r in group.rows),
                    program=group.program,
                    sources=group.sources,
                    constants=group.constants,
                )
            )
        pick = np.asarray(kept, dtype=int)

        def subset(names):
            return tuple(names[r] for r in kept)

        return dataclasses.replace(
            self,
            constraint_names=subset(self.constraint_names),
            constraint_kinds=subset(self.constraint_kinds),
            constraint_joints=subset(self.constraint_joints),
            constraint_bodies=subset(self.constraint_bodies),
            gcons=tuple(sets),
            f_offset=self.f_offset[pick],
            drivers=tuple(drivers),
            redundancy=None if self.redundancy is None else type(self.redundancy)(rank=len(kept)),
        )
