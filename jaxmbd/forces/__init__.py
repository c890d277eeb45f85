"""Applied forces: pure, differentiable JAX functions of (t, state, parameters).

Each element returns the global force on every body's centre of mass, ``f (nb, 3)``, and
the applied torque in every body frame, ``n_bar (nb, 3)`` (paper 1 eq. 31a). Gravity is not
an element: it is ``model.gravity`` times the masses. Parameters are array leaves, so
``jax.grad`` reaches stiffness, damping and user parameters.

:class:`AbstractForce` is everything the rest of the library asks of an element: the
bodies it touches (:attr:`~AbstractForce.bodies`, for the sparsity of the Newton matrix),
its potential energy (:meth:`~AbstractForce.potential_energy`, for the energy diagnostics)
and its conservative part (:meth:`~AbstractForce.without_potential`, for the discrete
gradient of the energy-momentum integrator), how elements of one family are evaluated
together (:meth:`~AbstractForce.family`, :meth:`~AbstractForce.combined`), what it reports
in ``sol.forces`` (:attr:`~AbstractForce.output_names`, and :meth:`~AbstractForce.outputs`
of an :class:`OutputContext`: the saved state with the joint coordinates, controls and
activations of the run), and its entry in a model file (:meth:`~AbstractForce.to_json`,
:meth:`~AbstractForce.from_json` with :func:`register_force_type`). A new element is one
class; nothing else learns its name.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.small import mv


class BodyState(NamedTuple):
    """Positions and velocities of all bodies (ground excluded); omega in the body frame."""

    r: jax.Array
    A: jax.Array
    rdot: jax.Array
    omega: jax.Array


class AddedMass(NamedTuple):
    """Inertia that a force element adds along p scalar coordinates of the bodies' motion
    (joint armature, :mod:`jaxmbd.forces.joint_dynamics`): the kinetic energy
    1/2 sum_k a_k q_dot_k^2 with q_dot_k = g_k . V, V the stacked hybrid twists
    (r_dot, omega_bar) of the coordinate's two bodies.

    ``inertia`` a (p,); ``gradient`` g (p, 4, 3), the gradients of each coordinate with
    respect to the twists (delta r_i, theta_bar_i, delta r_j, theta_bar_j) of its bodies
    ``body_i``, ``body_j`` (static (p,) numpy; nb is the ground, whose rows are ignored).

    By Lagrange-d'Alembert the element's force along q_k is -a_k q_ddot_k with
    q_ddot_k = g_k . V_dot + g_dot_k . V: the element returns the velocity part
    -a_k (g_dot_k . V) g_k from ``__call__`` like any force, and the formulations add the
    acceleration part -a_k (g_k . V_dot) g_k, i.e. the mass sum_k a_k g_k g_k^T in body-twist
    coordinates (:func:`added_mass_forces`, :func:`added_mass_matrix`), which couples the
    two bodies when neither is the ground."""

    inertia: jax.Array
    gradient: jax.Array
    body_i: np.ndarray
    body_j: np.ndarray


class ForceOutput(NamedTuple):
    """What a force element reports at one state (``sol.forces[name]``, time first):
    ``force``, a scalar along a line or coordinate (a spring-damper's tension, an
    actuator's force, a hinge's, slide's or tendon's passive force), a bushing's wrench
    (6,), a ball or free joint's forces along its dofs (3,) or (6,), or a point force's
    vector (3,); ``length``, its length or deflection, shaped as ``force`` (a scalar NaN
    where it has none: a point force or body torque); ``rate``, the rate of ``length``
    (likewise). What each element reports: :attr:`jaxmbd.Solution.forces`."""

    force: jax.Array
    length: jax.Array
    rate: jax.Array


class OutputContext(NamedTuple):
    """What a force element may read to report at one saved state
    (:meth:`AbstractForce.outputs`): the time ``t``, the bodies' ``state`` (every
    formulation stores it), and where the run has them:

    * ``qpos`` (nq,), ``qvel`` (nv,) and ``joint_addresses`` (joint name: (first qpos
      address, first dof address) of the kinematic tree's joints): a run in joint coordinates,
      whose joint elements act on qpos by joint name (empty in the absolute formulations,
      whose joint elements act on the coordinates the body states give);
    * ``controls`` (nu,): the actuators' controls held over the step that ended at the
      state (None: the actuators' own);
    * ``act`` (na,): the actuators' activations (MuJoCo's ``act`` layout; None: the
      actuators' own)."""

    t: jax.Array
    state: BodyState
    qpos: jax.Array | None = None
    qvel: jax.Array | None = None
    joint_addresses: Mapping[str, tuple[int, int]] = MappingProxyType({})
    controls: jax.Array | None = None
    act: jax.Array | None = None


def no_length(force) -> ForceOutput:
    """The output of an element with a force and no length: NaN length and rate."""
    nan = jnp.full((), jnp.nan, jnp.asarray(force).dtype)
    return ForceOutput(force, nan, nan)


class AbstractForce(eqx.Module):
    """An applied force element (see the module docstring for what it declares)."""

    #: Where a model file stores the element: ``"forces"`` (its own entry, written by
    #: :meth:`to_json`), or the name of the part of the file that stores it with other model
    #: data (``"joints"``: joint limits and dynamics, ``"contacts"``, ``"actuators"``).
    file_section: ClassVar[str] = "forces"
    #: The ``"type"`` of the element's model-file entries (set by :func:`register_force_type`).
    file_type: ClassVar[str | None] = None
    #: The keys of its entries besides ``"name"`` and ``"type"`` (others are refused).
    file_keys: ClassVar[frozenset[str]] = frozenset()
    #: The element is a force along joint coordinates (``joints`` by name, and
    #: ``joint_force(t, q, qdot, bias)``), which the joint formulation evaluates in joint
    #: space; False: it acts on the bodies (``__call__``).
    acts_along_joints: ClassVar[bool] = False
    #: The element is a tension along tendons (``tendons``, a :class:`jaxmbd.tendons.Tendons`,
    #: and ``tendon_force(t, length, velocity)``), which the joint formulation evaluates
    #: from the tendons' lengths and Jacobians in joint space (fixed tendons read qpos);
    #: the absolute formulations call ``__call__`` on the body states.
    acts_along_tendons: ClassVar[bool] = False
    #: The element is a force along the dofs of multi-dof joints of a kinematic tree (ball
    #: and free joints, by name: ``joints``, ``sizes(k)`` and ``dof_force(t, k, qpos, qvel)``,
    #: with ``dof_values("armature")`` and ``dof_values("damping")``), which only the joint
    #: formulation evaluates (:meth:`left_to_joint_space`).
    acts_along_dofs: ClassVar[bool] = False

    @property
    def output_name(self) -> str | None:
        """The name the element was given (spring-dampers, bushings, point forces), its
        one entry in ``sol.forces``; None: it has none."""
        return None

    @property
    def output_names(self) -> tuple[str, ...]:
        """The element's entries in ``sol.forces`` (static; empty: it reports nothing):
        its :attr:`output_name`, or one per entry of an element that holds several
        (``"actuator:<name>"``, ``"joint:<name>"``, ``"tendon:<name>"``)."""
        return () if self.output_name is None else (self.output_name,)

    def outputs(self, context: OutputContext) -> dict[str, ForceOutput]:
        """Its :class:`ForceOutput` per entry of :attr:`output_names` at the state of
        ``context`` (each element reads what it needs from it: body states, joint
        coordinates, controls)."""
        raise NotImplementedError(f"{type(self).__name__} reports no outputs")

    @property
    def output_batch_ndim(self) -> int:
        """The leading batch axes of its parameters (a batch of models: 1)."""
        return 0

    @abc.abstractmethod
    def __call__(self, t, state: BodyState) -> tuple[jax.Array, jax.Array]:
        """Return (f (nb, 3) global forces at the centres of mass, n_bar (nb, 3) body torques)."""

    @property
    def bodies(self) -> tuple[int, ...] | None:
        """The indices of the bodies the element acts on (nb: the ground), static; None
        (the default): it may act on any body, so every body is coupled to every other in
        the Newton matrix."""
        return None

    def potential_energy(self, state: BodyState) -> jax.Array | None:
        """The energy stored in the element at ``state`` (a scalar), counted by
        :func:`jaxmbd.analysis.diagnostics.energy`; None (the default): the element stores none."""
        return None

    def without_potential(self) -> AbstractForce | None:
        """The element without the conservative force -grad :meth:`potential_energy`
        (its damping, say), for integrators that take the potential's discrete gradient
        (:mod:`jaxmbd.integrators.energy_momentum`); None (the default): the element is not
        split and acts as a whole."""
        return None

    @classmethod
    def family(cls) -> type[AbstractForce] | None:
        """The class whose :meth:`combined` evaluates this element together with the other
        elements of the same family (the joint-force elements share their joints'
        coordinates); None (the default): the element is evaluated on its own."""
        return None

    @classmethod
    def combined(cls, elements: Sequence[AbstractForce], t, state: BodyState):
        """(f, n_bar) of several elements of this family at once (default: their sum)."""
        f = n = None
        for element in elements:
            df, dn = element(t, state)
            f, n = (df, dn) if f is None else (f + df, n + dn)
        return f, n

    def to_json(self, body_label: Callable[[int], str]) -> dict | None:
        """The element's entry in a model file's ``"forces"`` list: ``"type"`` (the name it
        was registered under, :func:`register_force_type`) and its fields, bodies named by
        ``body_label(index)``. None (the default): the element cannot be written (a Python
        function, say), and :func:`jaxmbd.save_model` warns."""
        return None

    def joint_entries(self) -> dict[str, dict]:
        """The element's entries in a model file's joints, by joint name (limits, joint
        dynamics); empty (the default) for an element written in ``"forces"``."""
        return {}

    @classmethod
    def from_json(cls, builder, entry: FileEntry) -> None:
        """Add the element of the model-file entry ``entry`` to ``builder``."""
        raise NotImplementedError(f"{cls.__name__} cannot be read from a model file")

    @property
    def adds_mass(self) -> bool:
        """Whether :meth:`added_mass` gives inertia (static: known when tracing). Elements
        that add mass must set it so that formulations and solvers include the coupling."""
        return False

    def added_mass(self, t, state: BodyState) -> AddedMass | None:
        """The :class:`AddedMass` of the element at ``state`` (None: none, the default).
        Its velocity part belongs in ``__call__``; see :class:`AddedMass`."""
        return None

    @property
    def joint_armature(self) -> jax.Array | None:
        """The inertia (n,) the element adds along its joints' coordinates (joint
        armature), in joint space; None (the default): none."""
        return None

    def joint_space_obstacle(self, tree_dofs: Mapping[str, int]) -> str | None:
        """Why the ``"joint"`` formulation cannot evaluate the element on a kinematic tree
        whose joints are ``tree_dofs`` (name: number of dofs); None: it can. The default: an
        element acting on the bodies reaches the dofs through J^T (its added mass, if any,
        only along joints, :attr:`joint_armature`: mass on the bodies has no joint-space
        path)."""
        if self.adds_mass and self.joint_armature is None:
            return "it adds mass to the bodies, which the tree's mass matrix does not carry"
        return None

    def left_to_joint_space(self) -> tuple[str, list[str]] | None:
        """(what the element puts on them, joint names) of the entries that the absolute
        formulations leave out, because only joint space has their coordinates (they are
        named in a :class:`~jaxmbd.errors.JointSpaceOnlyWarning`); None (the default): the
        element applies whole."""
        return None

    @property
    def joint_damping(self) -> jax.Array | None:
        """The viscous damping (n,) the element puts along its joints' coordinates (which
        MuJoCo's Euler step treats implicitly); None (the default): none."""
        return None


class FileEntry(abc.ABC):
    """One entry of a model file as :meth:`AbstractForce.from_json` reads it: every getter
    raises an error that names the file and the field when the field is missing or of the
    wrong type (:mod:`jaxmbd.io` gives the implementation)."""

    #: The entry's position in its list (for default names).
    index: int
    #: Where the entry is in the file (for error messages), e.g. ``"forces[2]"``.
    where: str

    @abc.abstractmethod
    def get(self, key: str, default: Any = ...) -> Any:
        """The field ``key`` (``default`` where missing; no default: required)."""

    @abc.abstractmethod
    def string(self, key: str, default: Any = ...) -> str:
        """The field ``key``, a non-empty string."""

    @abc.abstractmethod
    def flag(self, key: str, default: bool = False) -> bool:
        """The field ``key``, true or false."""

    @abc.abstractmethod
    def vector(self, key: str) -> np.ndarray:
        """The required field ``key``, three finite numbers."""


#: Force element classes by the ``"type"`` of their model-file entries.
FORCE_TYPES: dict[str, type[AbstractForce]] = {}


def register_force_type(name: str):
    """Class decorator: model files name the element's entries ``"type": name``
    (:meth:`AbstractForce.to_json`, :meth:`AbstractForce.from_json`)."""

    def register(cls):
        if FORCE_TYPES.get(name, cls) is not cls:
            raise ValueError(f"force type {name!r} is already {FORCE_TYPES[name].__name__}")
        FORCE_TYPES[name] = cls
        cls.file_type = name
        return cls

    return register


def _point_kinematics(state: BodyState, body: int, s_bar):
    """Global position and velocity of a body point; ``body == nb`` is the ground."""
    nb = state.r.shape[0]
    if body == nb:
        return s_bar, jnp.zeros(3)
    A = state.A[body]
    p = state.r[body] + A @ s_bar
    v = state.rdot[body] + A @ jnp.cross(state.omega[body], s_bar)
    return p, v


def _apply_point_force(state: BodyState, body: int, s_bar, force):
    """Generalised force of a global ``force`` acting at body point ``s_bar``."""
    nb = state.r.shape[0]
    f = jnp.zeros((nb, 3))
    n = jnp.zeros((nb, 3))
    if body == nb:
        return f, n
    f = f.at[body].add(force)
    n = n.at[body].add(jnp.cross(s_bar, state.A[body].T @ force))  # n_bar = s_bar~ A^T f
    return f, n


class PointForce(AbstractForce):
    """A force ``fn(t, params)`` (global frame, 3-vector) acting at a point of one body;
    with a ``name``, ``sol.forces[name]`` reports the force (3,) (length and rate NaN)."""

    body: int = eqx.field(static=True)
    s_bar: jax.Array
    fn: Callable = eqx.field(static=True)
    params: jax.Array
    name: str = eqx.field(static=True, default="")

    def __call__(self, t, state):
        return _apply_point_force(state, self.body, self.s_bar, self.fn(t, self.params))

    @property
    def output_name(self):
        return self.name or None

    def outputs(self, context):
        """The global force (3,) at ``context.t``."""
        return {self.name: no_length(self.fn(context.t, self.params))}

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.s_bar) - 1

    @property
    def bodies(self):
        return (self.body,)


class BodyTorque(AbstractForce):
    """A torque ``fn(t, params)`` given in the body frame of one body; with a ``name``,
    ``sol.forces[name]`` reports the torque (3,) (length and rate NaN)."""

    body: int = eqx.field(static=True)
    fn: Callable = eqx.field(static=True)
    params: jax.Array
    name: str = eqx.field(static=True, default="")

    @property
    def output_name(self):
        return self.name or None

    def outputs(self, context):
        """The body-frame torque (3,) at ``context.t``."""
        return {self.name: no_length(self.fn(context.t, self.params))}

    def __call__(self, t, state):
        nb = state.r.shape[0]
        n = jnp.zeros((nb, 3)).at[self.body].add(self.fn(t, self.params))
        return jnp.zeros((nb, 3)), n

    @property
    def bodies(self):
        return (self.body,)


@register_force_type("spring_damper")
class SpringDamper(AbstractForce):
    """Translational spring-damper between point P of body i and point Q of body j.

    Tension T = stiffness (l - rest_length) + damping l_dot acts along the line PQ, pulling
    the points together when positive. ``body == nb`` denotes the ground (points global).
    """

    body_i: int = eqx.field(static=True)
    body_j: int = eqx.field(static=True)
    s_bar_p_i: jax.Array
    s_bar_q_j: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    rest_length: jax.Array
    name: str = eqx.field(static=True, default="")
    file_keys: ClassVar[frozenset[str]] = frozenset(
        {"body_i", "point_i", "local_i", "body_j", "point_j", "local_j", "stiffness",
         "damping", "rest_length"}
    )  # fmt: skip

    def _line(self, state):
        """(unit vector e from P to Q, length l, l_dot, tension T)."""
        p, vp = _point_kinematics(state, self.body_i, self.s_bar_p_i)
        q, vq = _point_kinematics(state, self.body_j, self.s_bar_q_j)
        d = q - p
        length = jnp.sqrt(jnp.sum(d * d) + 1e-30)
        e = d / length
        length_dot = e @ (vq - vp)
        tension = self.stiffness * (length - self.rest_length) + self.damping * length_dot
        return e, length, length_dot, tension

    @property
    def output_name(self):
        return self.name or None

    def outputs(self, context):
        """The tension T (N), the length l (m) and l_dot (m/s)."""
        _, length, length_dot, tension = self._line(context.state)
        return {self.name: ForceOutput(tension, length, length_dot)}

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.stiffness)

    def __call__(self, t, state):
        e, _, _, tension = self._line(state)
        fi, ni = _apply_point_force(state, self.body_i, self.s_bar_p_i, tension * e)
        fj, nj = _apply_point_force(state, self.body_j, self.s_bar_q_j, -tension * e)
        return fi + fj, ni + nj

    @property
    def bodies(self):
        return (self.body_i, self.body_j)

    def potential_energy(self, state: BodyState):
        """1/2 stiffness (l - rest_length)^2 (the spring; NaN-safe at l = 0)."""

        def point(body, s_bar):
            if body == state.r.shape[0]:
                return s_bar  # ground: global point
            return state.r[body] + mv(state.A[body], jnp.asarray(s_bar))

        d = point(self.body_j, self.s_bar_q_j) - point(self.body_i, self.s_bar_p_i)
        length = jnp.sqrt(jnp.sum(d * d) + 1e-300)
        return 0.5 * self.stiffness * (length - self.rest_length) ** 2

    def without_potential(self):
        """The damper alone (stiffness zero)."""
        return eqx.tree_at(lambda f: f.stiffness, self, jnp.zeros_like(self.stiffness))

    def to_json(self, body_label):
        return {
            **({"name": self.name} if self.name else {}),
            "type": self.file_type,
            "body_i": body_label(self.body_i),
            "point_i": np.asarray(self.s_bar_p_i).tolist(),
            "local_i": True,
            "body_j": body_label(self.body_j),
            "point_j": np.asarray(self.s_bar_q_j).tolist(),
            "local_j": True,
            "stiffness": float(self.stiffness),
            "damping": float(self.damping),
            "rest_length": float(self.rest_length),
        }

    @classmethod
    def from_json(cls, builder, entry):
        """Points global at the initial configuration, or in the body frame where
        ``local_i`` / ``local_j`` is true (what :meth:`to_json` writes)."""
        points = {}
        for side in ("i", "j"):
            body = entry.string(f"body_{side}")
            point = entry.get(f"point_{side}")
            if entry.flag(f"local_{side}"):
                r, A = builder._frame(body, where=f"{entry.where}.body_{side}")
                point = r + A @ entry.vector(f"point_{side}")
            points[side] = (body, point)
        builder.spring_damper(
            entry.string("name", default=f"force_{entry.index}"),
            body_i=points["i"][0],
            point_i=points["i"][1],
            body_j=points["j"][0],
            point_j=points["j"][1],
            stiffness=entry.get("stiffness"),
            damping=entry.get("damping", 0.0),
            rest_length=entry.get("rest_length"),
        )


class GeneralForce(AbstractForce):
    """Any user law ``fn(t, state, params) -> (f (nb, 3), n_bar (nb, 3))``."""

    fn: Callable = eqx.field(static=True)
    params: jax.Array | dict | tuple

    def __call__(self, t, state):
        return self.fn(t, state, self.params)


def adds_mass(forces) -> bool:
    """Whether any force element adds mass (joint armature; static)."""
    return any(f.adds_mass for f in forces)


def added_mass(forces, t, state: BodyState) -> AddedMass | None:
    """The :class:`AddedMass` of all force elements at ``state`` (concatenated), or None."""
    parts = [f.added_mass(t, state) for f in forces if f.adds_mass]
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return AddedMass(
        jnp.concatenate([p.inertia for p in parts]),
        jnp.concatenate([p.gradient for p in parts]),
        np.concatenate([np.asarray(p.body_i, dtype=int) for p in parts]),
        np.concatenate([np.asarray(p.body_j, dtype=int) for p in parts]),
    )


def _twist_rates(am: AddedMass, rdot, omega):
    """g_k . V (p,) for per-body rows (nb, 3) of linear and angular rates (ground at rest)."""
    pad = jnp.zeros((1, 3), rdot.dtype)
    v, w = jnp.concatenate([rdot, pad]), jnp.concatenate([omega, pad])
    g, bi, bj = am.gradient, am.body_i, am.body_j
    return jnp.sum(g[:, 0] * v[bi] + g[:, 1] * w[bi] + g[:, 2] * v[bj] + g[:, 3] * w[bj], -1)


def added_mass_forces(am: AddedMass, rddot, omegadot):
    """(f, n_bar) (nb, 3) of the acceleration part -a_k (g_k . V_dot) g_k of the added mass
    for body accelerations V_dot = (r_ddot, omegadot_bar) (nb, 3) each: minus the added mass
    matrix times V_dot, applied through the virtual work like a joint force."""
    nb = rddot.shape[0]
    force = (-am.inertia * _twist_rates(am, rddot, omegadot))[:, None]
    g, bi, bj = am.gradient, am.body_i, am.body_j
    f = jnp.zeros((nb + 1, 3), rddot.dtype).at[bi].add(force * g[:, 0]).at[bj].add(force * g[:, 2])
    n = jnp.zeros((nb + 1, 3), rddot.dtype).at[bi].add(force * g[:, 1]).at[bj].add(force * g[:, 3])
    return f[:nb], n[:nb]


def added_mass_matrix(am: AddedMass, nb: int):
    """sum_k a_k g_k g_k^T (6 nb, 6 nb) in body-major hybrid twist coordinates
    (r_dot, omega_bar) of every body (the ground's rows dropped)."""
    p = am.inertia.shape[0]
    rows = jnp.zeros((p, nb + 1, 6), am.gradient.dtype)
    k = np.arange(p)
    rows = rows.at[k, am.body_i].add(am.gradient[:, :2].reshape(p, 6))
    rows = rows.at[k, am.body_j].add(am.gradient[:, 2:].reshape(p, 6))
    rows = rows[:, :nb].reshape(p, 6 * nb)
    return jnp.einsum("k,ki,kj->ij", am.inertia, rows, rows)


def added_kinetic_energy(am: AddedMass, rdot, omega):
    """1/2 sum_k a_k (g_k . V)^2: the kinetic energy of the added mass (armature)."""
    return 0.5 * jnp.sum(am.inertia * _twist_rates(am, rdot, omega) ** 2)


def applied_forces(forces, t, state: BodyState, mass, gravity):
    """Sum of gravity and all force elements: (f (nb, 3), n_bar (nb, 3))."""
    f = mass[:, None] * gravity[None, :]
    n = jnp.zeros_like(f)
    # the elements of a family together (the joint-force elements: each joint's coordinates
    # evaluated once, however many of them act on it), where a family has several
    families: dict = {}
    for element in forces:
        if (family := element.family()) is not None:
            families.setdefault(family, []).append(element)
    together = {family: members for family, members in families.items() if len(members) > 1}
    for family, members in together.items():
        df, dn = family.combined(members, t, state)
        f, n = f + df, n + dn
    for element in forces:  # one term per force element (a handful), not per constraint
        if element.family() in together:
            continue
        df, dn = element(t, state)
        f, n = f + df, n + dn
    return f, n
