"""Generalised forces along joint coordinates, applied to the bodies they join.

A force element that pushes along the coordinate q of revolute (angle) and translational
(slide) joints (:mod:`jaxmbd.model.joints`) acts on the two bodies through the virtual work
F dq = f . dr + n_bar . dtheta_bar: f_b = F dq/dr_b, n_bar_b = F dq/dtheta_bar_b, the
gradients of the coordinate with respect to each body's twist, taken by autodiff of the
same coordinate map that ``sol.joints`` reports. The rate is q_dot = grad q . twist rate.
:class:`AbstractJointForce` does this for every joint at once (one vmap per joint kind);
a subclass gives the force F(t, q, q_dot): joint limits (:mod:`jaxmbd.forces.joint_limits`),
joint damping, stiffness and friction loss, actuators.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.small import mm
from ..constraints.equations import take_rows
from ..lie import hat
from ..model.joints import (
    JOINT_KINDS,
    ONE_COORDINATE_KINDS,
    JointDefinition,
    _geometric,
    _relative,
)
from . import AbstractForce, BodyState, OutputContext

#: Joint kinds with one coordinate that a joint force acts along.
SCALAR_KINDS = tuple(spec.name for spec in ONE_COORDINATE_KINDS)

#: A cylindrical joint's coordinates (slide, angle) as one-coordinate joints: (suffix, kind)
#: in the order of its q. The slide is the translational joint's d_z and the angle the
#: revolute joint's angle_z of the same frames (:func:`jaxmbd.model.joints._geometric`), so the
#: view ``"<joint>.slide"`` (``"<joint>.angle"``) with the joint's frames, offset[k] and
#: sign[k] has exactly the joint's k-th coordinate, and every joint force acts on it.
CYLINDRICAL_VIEWS = (("slide", "translational"), ("angle", "revolute"))


def coordinate_views(joints: tuple[JointDefinition, ...]) -> tuple[JointDefinition, ...]:
    """The one-coordinate views (``"<joint>.slide"``, ``"<joint>.angle"``) of the cylindrical
    joints among ``joints`` (see :data:`CYLINDRICAL_VIEWS`), for the joint limits, joint
    dynamics and actuators on either coordinate."""
    out = []
    for d in joints:
        spec = JOINT_KINDS.get(d.kind)
        for k, (suffix, view) in enumerate(() if spec is None else spec.views):
            out.append(
                JointDefinition(
                    name=f"{d.name}.{suffix}", kind=view.name, body_i=d.body_i, body_j=d.body_j,
                    s_bar_i=d.s_bar_i, s_bar_j=d.s_bar_j, frame_i=d.frame_i,
                    frame_j=d.frame_j, offset=d.offset[k : k + 1],
                    q_start=d.q_start[k : k + 1], sign=(d.sign[k],),
                )
            )  # fmt: skip
    return tuple(out)


class _Frames(NamedTuple):
    """One joint's body-fixed frames, as :func:`jaxmbd.model.joints._relative` reads them."""

    s_bar_i: jax.Array
    s_bar_j: jax.Array
    frame_i: jax.Array
    frame_j: jax.Array


def _one(r_i, A_i, r_j, A_j, vel, frames, offset, sign, *, kind: str, bias: bool):
    """One joint's coordinate, its twist gradient (4, 3) and (``bias``) g_dot . V."""

    def at(r_i, A_i, r_j, A_j):
        R, d = _relative(frames, r_i, A_i, r_j, A_j)
        return offset + sign * _geometric(kind, R[0], d[0])[0]

    def coordinate(tw):
        eye = jnp.eye(3)
        return at(r_i + tw[0], mm(A_i, eye + hat(tw[1])),
                  r_j + tw[2], mm(A_j, eye + hat(tw[3])))  # fmt: skip

    value, grad = jax.value_and_grad(coordinate)(jnp.zeros((4, 3)))
    if not bias:
        return value, grad, jnp.zeros_like(value)

    def along(s):  # r + s r_dot, A exp(s omega~) to second order in s
        def turned(A, w):
            W = hat(w)
            return mm(A, jnp.eye(3) + s * W + 0.5 * s**2 * mm(W, W))

        return at(r_i + s * vel[0], turned(A_i, vel[1]), r_j + s * vel[2],
                  turned(A_j, vel[3]))  # fmt: skip

    def rate(s):
        return jax.jvp(along, (s,), (jnp.ones_like(s),))[1]

    zero = jnp.zeros((), value.dtype)
    return value, grad, jax.jvp(rate, (zero,), (jnp.ones_like(zero),))[1]


@functools.partial(jax.jit, static_argnames=("kind", "bias"))
def _group(r_i, A_i, r_j, A_j, vel, frames, offset, sign, *, kind: str, bias: bool):
    """:func:`_one` over a group of joints of one kind. A jit of its own (inlined by XLA:
    the compiled program is the same) so that its trace, and its linearisation and
    transpose under ``grad``, are made once per shape and reused: every force evaluation
    of every joint-force element (limits, dynamics, actuators; several per step, more in
    the consistent start) called it, and its autodiff-inside-vmap was about two thirds of
    the tracing of a cart-pole gradient program."""
    return jax.vmap(functools.partial(_one, kind=kind, bias=bias))(
        r_i, A_i, r_j, A_j, vel, frames, offset, sign
    )


def coordinates_and_gradients(joints: tuple[JointDefinition, ...], state: BodyState, *,
                              bias: bool = False):  # fmt: skip
    """q (n,) of ``joints`` at ``state`` and their gradients (n, 4, 3) with respect to the
    twists (delta r_i, theta_bar_i, delta r_j, theta_bar_j) of their bodies: one vmap per
    joint kind (at most two), not a loop over joints. A ground row's gradient is computed
    and not used.

    ``bias=True``: also g_dot . V (n,), the part of q_ddot = g . V_dot + g_dot . V that the
    velocities give (V the stacked twists (r_dot, omega_bar) of the two bodies): the second
    derivative of q along the curve r + s r_dot, A exp(s omega_bar~) (its twist is V at
    every s, so its second derivative is g_dot . V alone), with exp to second order (all that
    the second derivative at s = 0 sees). Forward over forward derivatives of the scalar
    coordinate map: the velocity part of the armature's inertial force
    (:mod:`jaxmbd.forces.joint_dynamics`)."""
    r_all = jnp.concatenate([state.r, jnp.zeros((1, 3))])
    A_all = jnp.concatenate([state.A, jnp.eye(3)[None]])
    v_all = jnp.concatenate([state.rdot, jnp.zeros((1, 3))])
    w_all = jnp.concatenate([state.omega, jnp.zeros((1, 3))])  # the ground is at rest

    def zeros(m):
        return jnp.zeros(m), jnp.zeros((m, 4, 3)), jnp.zeros(m)

    # rows of other kinds stay zero (as the groups' rows, in the joints' order at the end)
    other = np.asarray([k for k, d in enumerate(joints) if d.kind not in SCALAR_KINDS], int)
    parts, order = [zeros(other.size)], [other]
    groups: dict[str, list[int]] = {}
    for k, d in enumerate(joints):
        groups.setdefault(d.kind, []).append(k)
    for spec in ONE_COORDINATE_KINDS:
        kind = spec.name
        idx = np.asarray(groups.get(kind, []), dtype=int)
        if idx.size == 0:
            continue
        group = [joints[k] for k in idx]
        bi, bj = (np.asarray([getattr(d, b) for d in group]) for b in ("body_i", "body_j"))
        frames = _Frames(*(jnp.stack([getattr(d, key) for d in group]) for key in _Frames._fields))
        offset = jnp.stack([d.offset[0] for d in group])
        sign = jnp.asarray([d.sign[0] for d in group], dtype=offset.dtype)

        vel = jnp.stack([take_rows(x, b) for b in (bi, bj) for x in (v_all, w_all)], 1)
        q_k, g_k, b_k = _group(
            take_rows(r_all, bi), take_rows(A_all, bi), take_rows(r_all, bj),
            take_rows(A_all, bj), vel, frames, offset, sign,
            kind=kind, bias=bias,
        )  # fmt: skip
        parts.append((q_k, g_k, b_k))
        order.append(idx)
    # the groups' rows back in the joints' order by a constant permutation (a gather), not
    # a scatter into zeros: a scatter keeps XLA from compiling the time step as one loop
    q, grads, biases = (jnp.concatenate(x) for x in zip(*parts, strict=True))
    order = np.concatenate(order)
    if np.any(order != np.arange(order.size)):
        back = np.argsort(order)
        q, grads, biases = (take_rows(x, back) for x in (q, grads, biases))
    if bias:
        return q, grads, biases
    return q, grads


def coordinates_and_rates(joints: tuple[JointDefinition, ...], state: BodyState):
    """(q, q_dot, gradients) of ``joints`` at ``state`` (see :func:`coordinates_and_gradients`)."""
    q, g = coordinates_and_gradients(joints, state)
    return q, _rates(joints, g, state), g


def _rates(joints, g, state: BodyState):
    """q_dot = g . V (n,) from the twist gradients g (n, 4, 3) (the ground at rest)."""
    bi = np.asarray([d.body_i for d in joints])
    bj = np.asarray([d.body_j for d in joints])
    v_all = jnp.concatenate([state.rdot, jnp.zeros((1, 3))])
    w_all = jnp.concatenate([state.omega, jnp.zeros((1, 3))])
    v_i, w_i, v_j, w_j = (take_rows(x, b) for b in (bi, bj) for x in (v_all, w_all))
    return jnp.sum(g[:, 0] * v_i + g[:, 1] * w_i, axis=-1) + jnp.sum(
        g[:, 2] * v_j + g[:, 3] * w_j, axis=-1
    )


def rates_and_bias(joints: tuple[JointDefinition, ...], state: BodyState):
    """(q, q_dot, g, g_dot . V) of ``joints`` at ``state``: :func:`coordinates_and_rates`
    and the velocity part of q_ddot (see :func:`coordinates_and_gradients`)."""
    q, g, bias = coordinates_and_gradients(joints, state, bias=True)
    return q, _rates(joints, g, state), g, bias


def apply_generalised_force(joints, force, g, nb: int):
    """Body forces and torques (nb, 3), (nb, 3) of generalised forces ``force`` (n,) along
    the coordinates whose twist gradients are ``g`` (n, 4, 3)."""
    bodies = np.concatenate([[d.body_i for d in joints], [d.body_j for d in joints]])
    force = force[:, None]
    f = jnp.concatenate([force * g[:, 0], force * g[:, 2]])  # (2 n, 3), rows of ``bodies``
    n = jnp.concatenate([force * g[:, 1], force * g[:, 3]])
    return _sum_per_body(bodies, f, nb), _sum_per_body(bodies, n, nb)


#: Up to this many (row, body) pairs, :func:`_sum_per_body` sums each body's rows, picked
#: by constant indices; beyond it (large models, where the trace would grow with nb), a
#: scatter-add.
PICKED_SUM_MAX = 1 << 14


def _sum_per_body(bodies, values, nb: int):
    """sum of the rows ``values[k]`` with ``bodies[k] = b`` for b < nb (rows on the ground,
    index nb, are dropped). Each body's rows picked by constant indices and summed, not a
    scatter-add: a scatter (and a product with a 0/1 matrix, which XLA's CPU compiler
    turns back into a dot) keeps XLA from compiling the time step as one native loop."""
    if bodies.size * (nb + 1) > PICKED_SUM_MAX:
        shape = (nb + 1,) + values.shape[1:]
        return jnp.zeros(shape, values.dtype).at[bodies].add(values)[:nb]
    zero = jnp.zeros(values.shape[1:], values.dtype)
    parts = []
    for b in range(nb):
        picked = np.flatnonzero(bodies == b)
        if picked.size == 0:
            parts.append(zero)
            continue
        total = values[picked[0]]
        for k in picked[1:]:
            total = total + values[k]
        parts.append(total)
    return jnp.stack(parts)


class AbstractJointForce(AbstractForce):
    """A force element along the coordinates of ``joints`` (revolute and translational
    :class:`~jaxmbd.model.joints.JointDefinition`, or the views of a cylindrical joint's
    coordinates, :func:`coordinate_views`): subclasses give :meth:`generalised_force` (or
    :meth:`joint_force`, when the force also needs the velocity part of q_ddot).

    ``absolute_entries`` (static, one flag per joint of ``joints``; None: all True): the
    entries that the absolute formulations evaluate from the body states. An entry marked
    False acts on a coordinate that only joint space has, a hinge or slide inside a
    composition of MuJoCo joints that forms one library joint (the hinges of a universal
    joint): its definition's coordinate is not the hinge's qpos once the other hinge has
    turned, so only the ``"joint"`` formulation, which reads qpos by joint name, applies
    it (:meth:`absolute_part`)."""

    joints: eqx.AbstractVar[tuple[JointDefinition, ...]]
    # absolute_entries: a static field of each subclass, after its other fields (a
    # dataclass field with a default cannot come first)
    #: The fields with one entry per joint (arrays: along their first axis), which
    #: :meth:`absolute_part` picks.
    entry_fields: ClassVar[tuple[str, ...]] = ("joints",)
    #: What the element puts on its joints, for messages ("limits", "actuators").
    entries_label: ClassVar[str] = "forces"
    #: Model files store joint forces with their joints (:meth:`joint_entries`).
    file_section: ClassVar[str] = "joints"
    acts_along_joints: ClassVar[bool] = True

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.joints)

    def left_to_joint_space(self):
        """The entries marked False in ``absolute_entries``, but for those along tendons
        (:attr:`tendon_rows`), which every formulation applies along the tendon."""
        entries = getattr(self, "absolute_entries", None)
        if entries is None:
            return None
        names = [d.name for k, (d, kept) in enumerate(zip(self.joints, entries, strict=True))
                 if not kept and k not in self.tendon_rows]  # fmt: skip
        return (self.entries_label, names) if names else None

    @classmethod
    def family(cls):
        return AbstractJointForce

    @classmethod
    def combined(cls, elements, t, state: BodyState):
        return joint_forces_together(elements, t, state)

    @abc.abstractmethod
    def generalised_force(self, t, q, qdot):
        """The forces (n,) along +q at time t, coordinates q and rates qdot (n,)."""

    @property
    def needs_bias(self) -> bool:
        """Whether :meth:`joint_force` uses g_dot . V (see :func:`rates_and_bias`)."""
        return False

    def joint_force(self, t, q, qdot, bias):
        """The forces (n,) along +q from the joints' coordinates, rates and, where
        :attr:`needs_bias`, the velocity part g_dot . V of q_ddot (else None)."""
        return self.generalised_force(t, q, qdot)

    def __call__(self, t, state: BodyState):
        return joint_forces_together((self,), t, state)

    @property
    def absolute_rows(self) -> np.ndarray:
        """Indices of the entries the absolute formulations evaluate (static)."""
        entries = getattr(self, "absolute_entries", None)
        if entries is None:
            return np.arange(len(self.joints))
        return np.flatnonzero(np.asarray(entries, dtype=bool))

    def absolute_part(self):
        """The element restricted to :attr:`absolute_rows` (itself where that is all of
        them): what every evaluation from the body states uses."""
        keep = self.absolute_rows
        if keep.size == len(self.joints):
            return self
        return self.entries(keep)

    @property
    def tendon_rows(self) -> tuple[int, ...]:
        """The entries that act along tendons instead of joints (static; none by default):
        the element's ``tendons`` (:class:`jaxmbd.tendons.Tendons`, one per such entry)
        give their coordinates, the length and velocity of the tendon (its entry in
        ``joints`` is a placeholder that no formulation reads)."""
        return ()

    def joint_space_obstacle(self, tree_dofs):
        """Every entry off a tendon acts along a hinge or slide of the tree (a joint that
        closes a loop has no coordinate there: its rows are constraints)."""
        names = [d.name for k, d in enumerate(self.joints) if k not in set(self.tendon_rows)]
        missing = [name for name in names if tree_dofs.get(name) != 1]
        if missing:
            return (
                f"its {self.entries_label} act along {missing}, which are no one-dof joints of "
                "the kinematic tree (joints that close a loop stay constraint rows)"
            )
        return None

    def entries(self, keep):
        """The element restricted to the entries ``keep`` (static indices), every
        evaluation's rows (``absolute_entries`` dropped: the rows are chosen)."""
        changes = {"absolute_entries": None}
        for key in self.entry_fields:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, tuple):
                changes[key] = tuple(value[k] for k in keep)
            else:
                changes[key] = take_rows(value, keep)
        return dataclasses.replace(self, **changes)


def output_coordinates(element: AbstractJointForce, context: OutputContext):
    """(q, q_dot) (n,) each of the entries of ``element`` at the state of ``context``
    (:meth:`AbstractForce.outputs`), as the run evaluated them: a run in joint coordinates
    reads every entry's coordinate from qpos and qvel by joint name; the absolute
    formulations read the entries they apply (:meth:`AbstractJointForce.absolute_part`)
    from the body states, and the others are NaN. A tendon entry
    (:attr:`AbstractJointForce.tendon_rows`) is NaN here: its coordinates are the
    tendon's."""
    joints = element.joints
    n = len(joints)
    along_joints = np.setdiff1d(np.arange(n), np.asarray(element.tendon_rows, int))
    addresses = context.joint_addresses
    if along_joints.size and addresses and all(joints[k].name in addresses for k in along_joints):
        keep = along_joints
        qadr, dadr = (np.asarray([addresses[joints[k].name][i] for k in keep], int)
                      for i in (0, 1))  # fmt: skip
        q, qdot = take_rows(context.qpos, qadr), take_rows(context.qvel, dadr)
    else:
        keep = np.intersect1d(element.absolute_rows, along_joints)
        q = qdot = jnp.zeros(0, context.state.r.dtype)
        if keep.size:
            q, qdot, _ = coordinates_and_rates(tuple(joints[k] for k in keep), context.state)
    if keep.size == n:
        return q, qdot
    nan = jnp.full((1,), jnp.nan, context.state.r.dtype)
    every = np.full(n, keep.size)  # the entries left out read the NaN appended
    every[keep] = np.arange(keep.size)
    q, qdot = (take_rows(jnp.concatenate([x, nan]), every) for x in (q, qdot))
    return q, qdot


def joint_space_entries(forces) -> list[tuple[str, list[str]]]:
    """(entries label, joint names) of the elements in ``forces`` whose entries on those
    joints the absolute formulations leave out (:meth:`AbstractForce.left_to_joint_space`),
    in element order; empty: none."""
    return [part for element in forces if (part := element.left_to_joint_space()) is not None]


def joint_space_entries_message(forces, where: str) -> str | None:
    """The :class:`~jaxmbd.errors.JointSpaceOnlyWarning` text of an absolute formulation's
    run of ``forces`` (``where``: who runs it, e.g. "simulate: formulation 'rA' on model
    'humanoid'"); None when every entry applies."""
    parts = joint_space_entries(forces)
    if not parts:
        return None
    listed = "; ".join(f"{label} on {names}" for label, names in parts)
    return (
        f"{where} leaves out {listed}: the body states do not give these joints' coordinates "
        "one by one (hinges and slides inside universal, three-hinge spherical, planar or "
        "three-slide joints; the quaternions of ball and free joints). formulation='joint' "
        "(the default for a model read from MJCF or URDF) applies them"
    )


def joint_forces_together(elements, t, state: BodyState):
    """Body forces and torques (nb, 3), (nb, 3) of several joint-force elements from one
    evaluation of their joints' coordinates and gradients: a joint that two elements act
    on (a limited, damped and actuated slider: three) is evaluated once, its forces summed
    along its coordinate and applied once. Evaluated per element, the cart-pole's step
    traced the slider's coordinate map and its derivatives three times. Each element
    contributes its :meth:`~AbstractJointForce.absolute_part`."""
    elements = [e.absolute_part() for e in elements]
    elements = [e for e in elements if e.joints]
    if not elements:
        zero = jnp.zeros_like(state.r)
        return zero, zero
    union: list[JointDefinition] = []
    index: dict = {}
    rows = []
    for element in elements:
        own = []
        for d in element.joints:
            key = (d.name, d.kind, d.body_i, d.body_j, d.sign)  # the static fields
            if key not in index:
                index[key] = len(union)
                union.append(d)
            own.append(index[key])
        rows.append(np.asarray(own, dtype=int))
    union = tuple(union)
    if any(element.needs_bias for element in elements):
        q, qdot, g, bias = rates_and_bias(union, state)
    else:
        (q, qdot, g), bias = coordinates_and_rates(union, state), None
    whole = np.arange(len(union))
    total = None
    picked_rows, picked_forces = [], []
    for element, own in zip(elements, rows, strict=True):
        if own.size == whole.size and np.all(own == whole):  # the whole union, in order
            force = element.joint_force(t, q, qdot, bias)
            total = force if total is None else total + force
            continue
        picked_rows.append(own)
        picked_forces.append(
            element.joint_force(t, q[own], qdot[own], None if bias is None else bias[own])
        )
    if picked_rows:  # each union row's forces summed by constant picks (no scatter)
        picked = _sum_per_body(
            np.concatenate(picked_rows), jnp.concatenate(picked_forces), len(union)
        )
        total = picked if total is None else total + picked
    return apply_generalised_force(union, total, g, state.r.shape[0])
