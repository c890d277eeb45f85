"""Actuators: control inputs that drive joint coordinates, in MuJoCo's gain/bias form.

Every actuator drives one revolute or translational joint (its coordinate q, rate q_dot,
:mod:`jaxmbd.model.joints`) through a transmission ``gear``: its length is L = gear q and its
velocity L_dot = gear q_dot. With the control u clamped to ``ctrl_range`` (MuJoCo's
``ctrllimited``), the actuator force is MuJoCo's affine gain/bias form

    F = gain u + bias_0 + bias_1 L + bias_2 L_dot,

clamped to ``force_range`` (``forcelimited``), and the joint gets the generalised force
gear F along +q (virtual work, :mod:`jaxmbd.forces._joint`). The kinds of
:meth:`~jaxmbd.ModelBuilder.add_actuator` are its special cases (MuJoCo's shortcuts):

========== ============ ======================== =============================
kind       gain         bias (b0, b1, b2)        force
========== ============ ======================== =============================
motor      1            (0, 0, 0)                u
position   kp           (0, -kp, -kv)            kp (u - L) - kv L_dot
velocity   kv           (0, 0, -kv)              kv (u - L_dot)
general    given        given                    gain u + b0 + b1 L + b2 L_dot
========== ============ ======================== =============================

**Activation dynamics** (MuJoCo's ``dyntype``; documentation, Modeling, Actuators,
"Activation dynamics"): an actuator with ``dynamics`` other than "none" drives its gain
with an activation a, a state of its own (MuJoCo's ``act``), in place of u:
F = gain a + bias_0 + bias_1 L + bias_2 L_dot, with

============ ==================== ===============================================
dynamics     a_dot                a over a step from a_0 with u held (t from its start)
============ ==================== ===============================================
integrator   u                    a_0 + u t
filter       (u - a) / tau        u + (a_0 - u) exp(-t / tau)
filterexact  (u - a) / tau        the same (MuJoCo integrates it exactly in ``euler``)
============ ==================== ===============================================

clamped to ``act_range`` (MuJoCo's ``actlimited``/``actrange``). ``act_early`` (MuJoCo's
``actearly``) takes the force from the activation one step h ahead.

The activation enters a step in one of two ways:

* **as a state** (``activation_state``, :func:`with_activation_state`), as MuJoCo's
  integrators take ``act``: the force reads the activation a of the evaluation itself
  (``act_early``: MuJoCo's ``mj_nextActivation`` of a and its rate, one step ahead), and
  the step integrates a with the mechanism: :meth:`Actuators.activation_rate` is MuJoCo's
  ``act_dot``, :meth:`Actuators.activation_after` its ``mj_nextActivation`` (an explicit
  Euler update, exact for ``filterexact``, clamped to ``act_range``). The joint
  formulation's MuJoCo steps (``euler``, ``implicit``, ``implicitfast``, ``rk``,
  ``rkmk``) take it so: their activations are MuJoCo's to round-off
  (engine_forward.c, ``mj_RungeKutta``, ``mj_advance``; engine_support.c,
  ``mj_nextActivation``);
* **in closed form** (:func:`with_activation`): the activation at any time of the step
  from its value at the step's start under the held control, the table's last column (the
  other steps, and the absolute formulations from t = 0).

:func:`~jaxmbd.simulate` carries a from step to step in the ``"joint"`` formulation and
keeps it as ``sol.act`` (T, na) in MuJoCo's ``act`` layout (the actuators with
dynamics, in order: :attr:`Actuators.dynamic`), from which the actuator sensors read the
forces after the run.

Controls are held constant over each step (zero-order hold, as MuJoCo's ``ctrl`` over
``mj_step``): :func:`~jaxmbd.simulate` sets ``controls`` of the element to the step's row of
its ``controls=`` argument before the step, so the implicit integrators see the actuator's
stiffness and damping (bias_1, bias_2) in their Newton matrix like any force element's.
``gain``, ``bias``, ``gear``, the ranges and ``controls`` are array leaves: ``jax.grad``
reaches them.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..forces import BodyState, ForceOutput
from ..forces._joint import AbstractJointForce, joint_forces_together, output_coordinates
from ..model.joints import JointDefinition, joint_coordinates
from ..sensors import observation_vector
from ..tendons import Tendons, body_forces, lengths_and_gradients, output_lengths, velocities
from ._kinds import ACTUATOR_KIND_NAMES, actuator_kind

#: The actuator kinds of :meth:`~jaxmbd.ModelBuilder.add_actuator`.
ACTUATOR_KINDS = ACTUATOR_KIND_NAMES


@dataclasses.dataclass(frozen=True)
class ActivationDynamics:
    """One kind of activation dynamics (the module docstring's table): ``activation(a0, u,
    dt, tau)`` the activation dt after a0 under the held control u; ``time_constant``:
    whether it takes one; ``rate(a, u, tau)``: MuJoCo's ``act_dot`` (engine_forward.c,
    ``mj_fwdActuation``); ``exact_update``: MuJoCo's step of the activation is exact under
    a held control (``filterexact``, engine_support.c ``mj_nextActivation``), not Euler's."""

    name: str
    activation: object
    time_constant: bool
    rate: object
    exact_update: bool = False


def _filtered(a0, u, dt, tau):
    return u + (a0 - u) * jnp.exp(-dt / tau)


def _filter_rate(a, u, tau):
    return (u - a) / tau


def _no_rate(a, u, tau):
    return jnp.zeros_like(a)


#: The activation dynamics of :meth:`~jaxmbd.ModelBuilder.add_actuator` by name (MuJoCo's
#: dyntype none, integrator, filter, filterexact).
ACTIVATION_DYNAMICS: dict[str, ActivationDynamics] = {
    d.name: d
    for d in (
        ActivationDynamics("none", lambda a0, u, dt, tau: u, False, _no_rate),
        ActivationDynamics(
            "integrator", lambda a0, u, dt, tau: a0 + u * dt, False, lambda a, u, tau: u
        ),  # fmt: skip
        ActivationDynamics("filter", _filtered, True, _filter_rate),
        ActivationDynamics("filterexact", _filtered, True, _filter_rate, exact_update=True),
    )
}
#: The dynamics of an actuator without any: the force follows u.
NO_DYNAMICS = ACTIVATION_DYNAMICS["none"]


class Actuators(AbstractJointForce):
    """Every actuator of a model (see the module docstring): (nu,) array leaves ``gear``,
    ``gain``, ``ctrl_lower``/``ctrl_upper`` and ``force_lower``/``force_upper`` (+-inf
    where unlimited), ``bias`` (nu, 3) and the current ``controls`` (nu,); ``joints`` is the
    driven joint of each actuator, ``actuator_names`` and ``kinds`` are static."""

    actuator_names: tuple[str, ...] = eqx.field(static=True)
    kinds: tuple[str, ...] = eqx.field(static=True)
    joints: tuple[JointDefinition, ...]
    gear: jax.Array
    gain: jax.Array
    bias: jax.Array
    ctrl_lower: jax.Array
    ctrl_upper: jax.Array
    force_lower: jax.Array
    force_upper: jax.Array
    controls: jax.Array
    absolute_entries: tuple[bool, ...] | None = eqx.field(static=True, default=None)
    entries_label: ClassVar[str] = "actuators"
    #: The actuators whose transmission is a tendon (static indices, ascending) and their
    #: tendons (:class:`~jaxmbd.tendons.Tendons`, one per such actuator, in that order);
    #: their entries in ``joints`` are placeholders.
    tendon_actuated: tuple[int, ...] = eqx.field(static=True, default=())
    tendons: Tendons | None = None
    #: Activation dynamics (module docstring): each actuator's kind of
    #: :data:`ACTIVATION_DYNAMICS` and ``act_early`` (static; None: none has any), its
    #: ``time_constant`` and ``act_lower``/``act_upper`` (nu,), and the activation
    #: ``activation`` (nu,) at the time ``activation_time``, with the step ``step`` that
    #: ``act_early`` looks ahead by.
    dynamics: tuple[str, ...] | None = eqx.field(static=True, default=None)
    act_early: tuple[bool, ...] | None = eqx.field(static=True, default=None)
    time_constant: jax.Array | None = None
    act_lower: jax.Array | None = None
    act_upper: jax.Array | None = None
    activation: jax.Array | None = None
    activation_time: jax.Array | None = None
    step: jax.Array | None = None
    #: Whether ``activation`` is the activation of each evaluation itself (a state that the
    #: step integrates, MuJoCo's ``act``; module docstring) rather than the start of its
    #: closed form at ``activation_time``.
    activation_state: bool = eqx.field(static=True, default=False)
    #: Model files store actuators in their own list (``"actuators"``).
    file_section: ClassVar[str] = "actuators"
    entry_fields: ClassVar[tuple[str, ...]] = (
        "actuator_names", "kinds", "joints", "gear", "gain", "bias", "ctrl_lower",
        "ctrl_upper", "force_lower", "force_upper", "controls", "dynamics", "act_early",
        "time_constant", "act_lower", "act_upper", "activation",
    )  # fmt: skip

    @property
    def nu(self) -> int:
        return len(self.actuator_names)

    @property
    def has_dynamics(self) -> bool:
        """Whether an actuator has activation dynamics (a state of its own)."""
        return self.dynamics is not None and any(
            ACTIVATION_DYNAMICS[d] is not NO_DYNAMICS for d in self.dynamics
        )

    @property
    def dynamic(self) -> tuple[int, ...]:
        """The actuators with activation dynamics (indices, ascending): MuJoCo's ``act``
        order, one activation each (``na`` of them)."""
        if self.dynamics is None:
            return ()
        return tuple(k for k, d in enumerate(self.dynamics)
                     if ACTIVATION_DYNAMICS[d] is not NO_DYNAMICS)  # fmt: skip

    @property
    def na(self) -> int:
        """The number of activations (MuJoCo's ``na``)."""
        return len(self.dynamic)

    def act(self, activation=None):
        """The activations (na,) in MuJoCo's ``act`` layout of the per-actuator
        ``activation`` (nu,) (None: the element's own)."""
        activation = self.activation if activation is None else activation
        return jnp.asarray(activation)[..., np.asarray(self.dynamic, dtype=int)]

    def full_activation(self, act):
        """The per-actuator activations (nu,) with MuJoCo's ``act`` (na,) in the entries of
        the actuators with dynamics (the element's own in the others, which no reading
        uses)."""
        act = jnp.asarray(act)
        if act.shape != (self.na,):
            raise ValueError(f"actuators: act has shape {act.shape}, expected ({self.na},) "
                             "(MuJoCo's act: the actuators with activation dynamics)")  # fmt: skip
        return jnp.asarray(self.activation).at[np.asarray(self.dynamic, dtype=int)].set(act)

    def activation_at(self, t, u, *, early: bool = True):
        """The activations (nu,) at time ``t`` under the controls ``u`` held since
        ``activation_time`` (the module docstring's closed forms; u where an actuator has
        none); ``early``: the ``act_early`` actuators' a(t + step)."""
        u = jnp.clip(u, self.ctrl_lower, self.ctrl_upper)
        if not self.has_dynamics:
            return u
        dt = t - self.activation_time
        if early:
            dt = dt + jnp.where(jnp.asarray(self.act_early), self.step, 0.0)
        # MuJoCo's mjMINVAL floor on the time constant
        tau = jnp.maximum(self.time_constant, 1e-15)
        a = u
        for own, rule in self._rules():
            a = jnp.where(own, rule.activation(self.activation, u, dt, tau), a)
        # the range is unbounded where there are no dynamics (add_actuator)
        return jnp.clip(a, self.act_lower, self.act_upper)

    def next_activation(self, h):
        """The activations (nu,) at ``activation_time`` + h (the next step's start)."""
        return self.activation_at(self.activation_time + h, self.controls, early=False)

    def _rules(self):
        """(mask (nu,), rule) for each kind of activation dynamics among the actuators."""
        for rule in {ACTIVATION_DYNAMICS[d] for d in self.dynamics}:
            yield np.asarray([ACTIVATION_DYNAMICS[d] is rule for d in self.dynamics]), rule

    def activation_rate(self, act=None, u=None):
        """MuJoCo's ``act_dot`` (nu,) at the activations ``act`` (nu,) under the controls
        ``u`` (None: the element's own): the clamped control for ``integrator``,
        (u - a) / tau for the filters, 0 without dynamics (engine_forward.c,
        ``mj_fwdActuation``)."""
        act = self.activation if act is None else act
        u = jnp.clip(self.controls if u is None else u, self.ctrl_lower, self.ctrl_upper)
        # MuJoCo's mjMINVAL floor on the time constant
        tau = jnp.maximum(self.time_constant, 1e-15)
        rate = jnp.zeros_like(act)
        for own, rule in self._rules():
            rate = jnp.where(own, rule.rate(act, u, tau), rate)
        return rate

    def activation_after(self, rate, h, act=None):
        """MuJoCo's ``mj_nextActivation``: the activations (nu,) a step ``h`` after
        ``act`` (None: the element's own) at the rate ``rate`` (nu,): a + h rate, for
        ``filterexact`` a + rate tau (1 - exp(-h / tau)) (exact under a held control),
        clamped to ``act_range`` (engine_support.c)."""
        act = self.activation if act is None else act
        tau = jnp.maximum(self.time_constant, 1e-15)
        exact = np.asarray([ACTIVATION_DYNAMICS[d].exact_update for d in self.dynamics])
        # MuJoCo's order of operations, for its round-off
        a = jnp.where(exact, act + rate * tau * (1.0 - jnp.exp(-h / tau)), act + rate * h)
        return jnp.clip(a, self.act_lower, self.act_upper)

    def _state_activation(self, u):
        """The activations (nu,) that the forces read where ``activation`` is a state: the
        activation itself, one step ahead for ``act_early`` (MuJoCo's
        ``mj_nextActivation`` of its rate, engine_forward.c ``mj_fwdActuation``), u
        without dynamics."""
        ahead = self.activation_after(self.activation_rate(u=u), self.step)
        a = jnp.where(jnp.asarray(self.act_early), ahead, self.activation)
        dynamic = np.asarray([ACTIVATION_DYNAMICS[d] is not NO_DYNAMICS for d in self.dynamics])
        return jnp.where(dynamic, a, jnp.clip(u, self.ctrl_lower, self.ctrl_upper))

    def actuator_force(self, u, q, qdot, t=None):
        """The actuator forces F (nu,) for controls ``u`` at joint coordinates q, rates
        qdot (before the gear to the joint); with activation dynamics, at time ``t`` (the
        element's activation itself where it is a state: ``activation_state``)."""
        if self.has_dynamics and self.activation_state:
            u = self._state_activation(u)
        elif self.has_dynamics:
            u = self.activation_at(self.activation_time if t is None else t, u)
        else:
            u = jnp.clip(u, self.ctrl_lower, self.ctrl_upper)
        length, velocity = self.gear * q, self.gear * qdot
        force = self.gain * u + self.bias[:, 0] + self.bias[:, 1] * length
        force = force + self.bias[:, 2] * velocity
        return jnp.clip(force, self.force_lower, self.force_upper)

    def generalised_force(self, t, q, qdot):
        return self.gear * self.actuator_force(self.controls, q, qdot, t)

    @property
    def output_names(self):
        return tuple(f"actuator:{name}" for name in self.actuator_names)

    def outputs(self, context):
        """Per actuator (``"actuator:<name>"``), MuJoCo's ``actuator_force`` F (before the
        gear), ``actuator_length`` gear L and ``actuator_velocity`` gear L_dot, L the
        joint's coordinate (:func:`~jaxmbd.forces._joint.output_coordinates`; NaN where the
        run's formulation does not apply the actuator) or the tendon's length
        (:func:`~jaxmbd.tendons.output_lengths`), under the controls of ``context`` (the
        element's own where it has none) and, for an actuator with activation dynamics, its
        activations (MuJoCo's ``act``: the force at qpos, qvel and act); NaN for such an
        actuator's force where the run keeps no activations (the absolute formulations)."""
        q, qdot = output_coordinates(self, context)
        if self.tendon_actuated:
            rows = np.asarray(self.tendon_actuated, dtype=int)
            length, velocity = output_lengths(self.tendons, context)
            q, qdot = q.at[rows].set(length), qdot.at[rows].set(velocity)
        u = self.controls if context.controls is None else context.controls
        if not self.has_dynamics:
            force = self.actuator_force(u, q, qdot)
        elif context.act is None:  # a run that keeps no activations: unknown
            dynamic = np.zeros(self.nu, dtype=bool)
            dynamic[list(self.dynamic)] = True
            force = jnp.where(dynamic, jnp.nan, self.actuator_force(u, q, qdot))
        else:
            element = dataclasses.replace(self, activation=self.full_activation(context.act),
                                          activation_state=True)  # fmt: skip
            force = element.actuator_force(u, q, qdot)
        length, velocity = self.gear * q, self.gear * qdot
        return {name: ForceOutput(force[k], length[k], velocity[k])
                for k, name in enumerate(self.output_names)}  # fmt: skip

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.gear) - 1

    @property
    def tendon_rows(self) -> tuple[int, ...]:
        return self.tendon_actuated

    def entries(self, keep):
        keep = [int(k) for k in keep]
        out = super().entries(keep)
        kept = [k for k in keep if k in self.tendon_actuated]
        if not kept:
            return dataclasses.replace(out, tendon_actuated=(), tendons=None)
        position = [self.tendon_actuated.index(k) for k in kept]
        return dataclasses.replace(out, tendon_actuated=tuple(keep.index(k) for k in kept),
                                   tendons=self.tendons.subset(position))  # fmt: skip

    def family(self):
        """Evaluated with the other joint forces where every actuator drives a joint; with
        tendon transmissions, on its own (:meth:`__call__`)."""
        return None if self.tendon_actuated else AbstractJointForce

    def __call__(self, t, state: BodyState):
        """The joint actuators' forces along their joints (the tendon rows are not among
        the entries the body states evaluate as joints: ``absolute_entries`` False), plus
        the tendon actuators' tensions along their tendons' lengths (gear F along the
        tendon, MuJoCo's moment arm gear J_ten)."""
        f, n = joint_forces_together((self,), t, state)
        if not self.tendon_actuated:
            return f, n
        part = self.entries(self.tendon_actuated)
        length, G = lengths_and_gradients(part.tendons, state)
        tension = part.generalised_force(t, length, velocities(G, state))
        df, dn = body_forces(G, tension)
        return f + df, n + dn


def actuator_element(model) -> Actuators | None:
    """The model's :class:`Actuators` element (None without actuators)."""
    found = [f for f in model.forces if isinstance(f, Actuators)]
    return found[0] if found else None


def with_controls(model, controls):
    """``model`` with its actuators' current controls set to ``controls`` (nu,)."""
    index = next(k for k, f in enumerate(model.forces) if isinstance(f, Actuators))
    element = dataclasses.replace(model.forces[index], controls=jnp.asarray(controls))
    forces = model.forces[:index] + (element,) + model.forces[index + 1 :]
    return dataclasses.replace(model, forces=forces)


def with_activation(model, activation, t, h):
    """``model`` with its actuators' activations ``activation`` (nu,) at time ``t`` and
    the step ``h``, the start of their closed form (the start of a step; unchanged without
    activation dynamics)."""
    element = model.actuators
    if element is None or not element.has_dynamics:
        return model
    index = next(k for k, f in enumerate(model.forces) if isinstance(f, Actuators))
    dtype = jnp.asarray(activation).dtype
    element = dataclasses.replace(
        element, activation=jnp.asarray(activation), activation_time=jnp.asarray(t, dtype),
        step=jnp.asarray(h, dtype), activation_state=False,
    )  # fmt: skip
    forces = model.forces[:index] + (element,) + model.forces[index + 1 :]
    return dataclasses.replace(model, forces=forces)


def with_activation_state(model, act, h):
    """``model`` with its actuators' activations ``act`` (nu,) as the state that each
    evaluation reads (``activation_state``; the step ``h`` that ``act_early`` looks ahead
    by); unchanged without activation dynamics."""
    element = model.actuators
    if element is None or not element.has_dynamics:
        return model
    index = next(k for k, f in enumerate(model.forces) if isinstance(f, Actuators))
    dtype = jnp.asarray(act).dtype
    element = dataclasses.replace(element, activation=jnp.asarray(act),
                                  step=jnp.asarray(h, dtype), activation_state=True)  # fmt: skip
    forces = model.forces[:index] + (element,) + model.forces[index + 1 :]
    return dataclasses.replace(model, forces=forces)


def control_inputs(model, controls, n: int, h, *, where: str):
    """``controls`` as an (n, nu) array of per-step inputs (None: None; see
    :func:`~jaxmbd.simulate`), with clear errors for a wrong shape or a model without
    actuators."""
    if controls is None:
        return None
    nu = model.nu
    if nu == 0:
        raise ValueError(f"{where}: controls= given, but model '{model.name}' has no actuators")
    names = model.actuators.actuator_names
    if callable(controls):
        times = jnp.arange(n) * jnp.asarray(h, jnp.float64)
        try:
            u = jax.vmap(lambda t: jnp.asarray(controls(t), jnp.float64))(times)
        except Exception as err:  # a function that cannot be traced
            raise ValueError(
                f"{where}: controls(t) must be a JAX function of t returning ({nu},) "
                f"(actuators {names}): {type(err).__name__}: {err}"
            ) from None
        if u.shape != (n, nu):
            raise ValueError(f"{where}: controls(t) returned shape {u.shape[1:]}, expected "
                             f"({nu},) (actuators {names})")  # fmt: skip
        return u
    if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(controls)):
        # checked on the host: no program per number of steps
        u = np.asarray(controls, np.float64)
        if u.shape == (nu,):
            u = np.broadcast_to(u, (n, nu))
        _check_control_rows(u, n, nu, names, where)
        if not np.all(np.isfinite(u)):
            step, column = (int(x[0]) for x in np.nonzero(~np.isfinite(u)))
            raise ValueError(
                f"{where}: controls are not finite at step {step}, actuator '{names[column]}'"
            )
        return jax.device_put(u)
    u = jnp.asarray(controls, jnp.float64)
    if u.shape == (nu,):
        u = jnp.broadcast_to(u, (n, nu))
    _check_control_rows(u, n, nu, names, where)
    return u


def _check_control_rows(u, n, nu, names, where):
    if u.shape != (n, nu):
        raise ValueError(
            f"{where}: controls has shape {u.shape}; expected ({n}, {nu}) (one row per step, "
            f"one column per actuator {names}), ({nu},) or a function of t"
        )


def observation(model, r, A, rdot, omega, *, t=0.0, key=None, step=0, where="simulate"):
    """A policy's observation of the body state (r, A, rdot, body-frame omega; (nb, ...)).

    A model with sensors (:mod:`jaxmbd.sensors`) is observed through them: the sensor
    vector, the sensors in model order concatenated (``sol.sensors.vector()``'s row), with
    the noise of step ``step`` when ``key`` is given. Sensors that need the step's
    accelerations or multipliers (accelerometer, joint reactions) are refused with a
    ValueError: at a step's start they depend on the controls the policy is choosing.

    Without sensors: the coordinates of ``model.joint_names`` in order, then their rates,
    flattened (a spherical joint's quaternion and angular velocity; angles on the branch
    nearest the joint's start)."""
    if getattr(model, "sensors", None) is not None:
        return observation_vector(model, t, (r, A, rdot, omega), key=key, step=step, where=where)

    q, qdot = [], []
    for defn in model.joints:
        c = joint_coordinates(defn, r[None], A[None], rdot[None], omega[None])
        q.append(jnp.reshape(c.q[0], (-1,)))
        qdot.append(jnp.reshape(c.qdot[0], (-1,)))
    parts = q + qdot
    return jnp.concatenate(parts) if parts else jnp.zeros(0)


def policy_controls(model, policy, t, state_rAvw, *, where: str = "simulate", key=None, step=0):
    """u = policy(t, observation) checked to be (nu,); ``key``, ``step``: the sensors'
    noise (:func:`observation`)."""
    obs = observation(model, *state_rAvw, t=t, key=key, step=step, where=where)
    u = jnp.asarray(policy(t, obs))
    if u.shape != (model.nu,):
        raise ValueError(
            f"{where}: policy(t, observation) returned shape {u.shape}, expected ({model.nu},) "
            f"(actuators {model.actuators.actuator_names})"
        )
    return u


def gains_of_kind(kind: str, *, kp, kv, gain, bias) -> tuple[float, tuple[float, float, float]]:
    """(gain, bias) of an actuator kind (the module docstring's table)."""
    return actuator_kind(kind).gains(kp=kp, kv=kv, gain=gain, bias=bias)
