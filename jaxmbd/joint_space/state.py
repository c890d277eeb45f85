"""The joint formulation's state as a value: :class:`JointState` (qpos, qvel, t in MuJoCo's
layout) and :func:`advance`, which steps it under held controls. :func:`jaxmbd.simulate`'s
scan and the environments of :mod:`jaxmbd.envs` take the same steps (the steppers of
:mod:`jaxmbd.joint_space.steppers`).

Everything here is a pure JAX function of its inputs (``jit``, ``vmap``, ``grad``): the
state is the integrator's own, carried from step to step without re-projection or angle
wrapping (a hinge's qpos keeps counting turns, as MuJoCo's does)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..actuators import with_controls
from ..model import Model
from .loops import project
from .run import model_tree
from .steppers import get_stepper


class JointState(eqx.Module):
    """The state of a model's kinematic tree: ``qpos`` (nq,) and ``qvel`` (nv,) in MuJoCo's
    layout (:attr:`jaxmbd.Model.tree`'s joints, MuJoCo's order for MJCF files), the time
    ``t`` and, for actuators with activation dynamics, their activations ``act`` (na,) in
    MuJoCo's ``act`` layout (those actuators in order, :attr:`jaxmbd.actuators.Actuators.
    dynamic`; None: the model's own, :mod:`jaxmbd.actuators`). A pytree: batch it
    with ``vmap``, carry it through ``lax.scan``."""

    qpos: jax.Array
    qvel: jax.Array
    t: jax.Array
    act: jax.Array | None = None


def initial_joint_state(model: Model) -> JointState:
    """The model's initial state (its tree's ``qpos_init``/``qvel_init``, projected onto
    the loop constraints where it has loops), at t = 0."""
    tree, loops = model_tree(model)
    qpos, qvel = tree.qpos_init, tree.qvel_init
    t = jnp.zeros((), qvel.dtype)
    if loops is not None:
        qpos, qvel = project(loops, tree, qpos, qvel, t, iterations=8)
    element = model.actuators
    act = element.act() if element is not None and element.has_dynamics else None
    return JointState(qpos, qvel, t, act)


def advance(model: Model, state: JointState, controls=None, *, h, n_steps: int = 1,
            integrator="rk") -> JointState:  # fmt: skip
    """``state`` advanced by ``n_steps`` time steps of size ``h`` of ``integrator`` (a
    name of :data:`~jaxmbd.joint_space.JOINT_STEPPERS` or a stepper), the actuators'
    ``controls`` (nu,) held over them (zero-order hold, as MuJoCo's ``ctrl``); None: the
    model's own controls. One ``lax.scan``: the accelerations' program is traced once.

    Each step evaluates the accelerations once per stage (its start's included), as
    ``simulate``'s steps do, MuJoCo's constraint solve warm-started from the step before's
    (``qacc_warmstart``; the first step's from 0, a fresh ``mjData``'s); the step's code is
    traced once, whatever ``n_steps``."""
    return _advanced(model, state, controls, h=h, n_steps=n_steps, integrator=integrator,
                     where="advance")[0]  # fmt: skip


def advance_and_last_start(model: Model, state: JointState, controls=None, *, h,
                           n_steps: int = 1, integrator="rk"):  # fmt: skip
    """(:func:`advance`'s state, the last step's start state, the accelerations there
    (:class:`~jaxmbd.joint_space.dynamics.Accelerations`)): what MuJoCo's sensors read
    after ``mj_step`` (``mj_forward``'s quantities at the last step's start), from the
    step's own evaluation, where :func:`advance` of n - 1 steps and an evaluation apart
    would hold the accelerations' code twice and compute the last step's twice."""
    return _advanced(model, state, controls, h=h, n_steps=n_steps, integrator=integrator,
                     where="advance_and_last_start", keep_last=True)  # fmt: skip


def _advanced(model, state, controls, *, h, n_steps, integrator, where, keep_last=False):
    stepper = get_stepper(integrator)
    if n_steps < 1:
        raise ValueError(f"{where}: n_steps must be at least 1, got {n_steps}")
    tree, loops = model_tree(model)
    if controls is not None:
        if model.nu == 0:
            raise ValueError(f"{where}: controls given, but model '{model.name}' has no actuators")
        controls = jnp.asarray(controls)
        if controls.shape != (model.nu,):
            raise ValueError(
                f"{where}: controls have shape {controls.shape}, expected ({model.nu},) "
                f"(actuators {model.actuators.actuator_names})"
            )
        model = with_controls(model, controls)
    h = jnp.asarray(h, state.qvel.dtype)
    dynamics = model.actuators is not None and model.actuators.has_dynamics
    act = jnp.zeros(0, state.qvel.dtype)
    if dynamics:
        element = model.actuators
        act = element.activation if state.act is None else element.full_activation(state.act)

    def substep(carry, _):
        qpos, qvel, t, act, warm = carry
        m_k = model
        start = JointState(qpos, qvel, t, model.actuators.act(act) if dynamics else None)
        if dynamics:  # the activations at the step's start, and at its end (jaxmbd.actuators)
            m_k = stepper.with_step_activation(model, act, t, h)
            act = stepper.activation_after(m_k, h)
        acc = stepper.start_accelerations(m_k, tree, loops, qpos, qvel, t, h, warm=warm)
        qpos, qvel = stepper.step(m_k, tree, loops, qpos, qvel, acc, t, h)
        if loops is not None:
            qpos, qvel = project(loops, tree, qpos, qvel, t + h)
        warm = jax.lax.stop_gradient(acc.qacc if acc.solver_qacc is None else acc.solver_qacc)
        return (qpos, qvel, t + h, act, warm), (start, acc) if keep_last else None

    # MuJoCo's warm start of a fresh mjData: qacc_warmstart = 0
    carry = (state.qpos, state.qvel, state.t, act, jnp.zeros_like(state.qvel))
    if n_steps == 1:
        carry, last = substep(carry, None)
    else:
        carry, last = jax.lax.scan(substep, carry, None, n_steps)
        last = jax.tree_util.tree_map(lambda x: x[-1], last)
    qpos, qvel, t, act, _ = carry
    end = JointState(qpos, qvel, t, model.actuators.act(act) if dynamics else None)
    return (end, *last) if keep_last else (end,)
