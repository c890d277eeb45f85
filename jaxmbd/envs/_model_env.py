"""An environment over any model in the joint formulation: :class:`ModelEnv` steps a
:class:`~jaxmbd.joint_space.JointState` with :func:`~jaxmbd.joint_space.advance` and asks
the task's functions for the initial state, the observation, the reward and the end of an
episode. Those functions read :class:`Physics`: the state's kinematics, computed once per
control step (MuJoCo's ``mjData`` after ``mj_forward``: body frames, centres of mass,
their velocities).

A model read from a file steps MuJoCo's constraint model by default (contact, limits and
the file's equalities "soft", :mod:`jaxmbd.soft_constraints`) with the file's integrator,
as ``mj_step`` does; jaxmbd's compliant contact is the option ``contact="compliant"``. The
inputs are checked as :func:`~jaxmbd.simulate` checks them: the parameters at ``reset``
(refused where concrete, flagged per member in ``info["invalid_parameters"]`` where
traced), the time step when the environment is built (:func:`step_stability`), and
non-finite actions at each step (zeroed and counted, as MuJoCo's ``mjWARN_BADCTRL``)."""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._parameter_checks import checked_parameters, parameters_invalid
from ..actuators import with_controls
from ..analysis.plan import soft_equality_default, treated_model
from ..compiled.batch_lanes import batch_lanes
from ..compiled.jit import at_top_level
from ..contact import ContactSlots, contact_element
from ..errors import ModelError
from ..forces import BodyState
from ..joint_space import (
    JointState,
    advance,
    advance_and_last_start,
    initial_joint_state,
    model_tree,
)
from ..joint_space.dynamics import accelerations, applied_generalised_forces
from ..joint_space.run import BATCH_LANES_CHUNK
from ..joint_space.steppers import get_stepper
from ..model import Model
from ..soft_constraints.contact_forces import ConstraintForces, slot_labels, solved_contact_forces
from ..tree import KinematicTree, body_velocities, integrate_positions, poses
from ._base import Env, State, compiled_when_plain


class Physics(eqx.Module):
    """A state's kinematics, as MuJoCo's ``mjData`` after ``mj_forward`` names them:
    ``qpos`` (nq,), ``qvel`` (nv,), ``ctrl`` (nu,: the action of the step that led here;
    zeros after a reset), ``xpos``/``xmat`` (nb, 3)/(nb, 3, 3): the tree bodies' frames,
    ``xipos`` (nb, 3): their centres of mass, ``com_velocity`` (nb, 3): the centres of
    mass's world velocities, ``angular_velocity`` (nb, 3): in each body's frame. Body k is
    the model's tree body k (:meth:`body` finds it by name). ``contact``: the model's
    compliant contact element (None without it; :meth:`contacts` evaluates it).
    ``constraint_forces``: MuJoCo's contact forces where the environment computes them
    (:class:`ConstraintForces`, ``ModelEnv(contact_forces=True)`` with MuJoCo's constraint
    model; else None). ``act``: the actuators' activations (MuJoCo's ``act``, na; empty
    without activation dynamics)."""

    tree: KinematicTree
    mass: jax.Array
    contact: Any
    qpos: jax.Array
    qvel: jax.Array
    ctrl: jax.Array
    xpos: jax.Array
    xmat: jax.Array
    xipos: jax.Array
    com_velocity: jax.Array
    angular_velocity: jax.Array
    constraint_forces: Any = None
    act: jax.Array | None = None

    def body(self, name: str) -> int:
        """The tree index of body ``name``."""
        if name not in self.tree.body_names:
            raise ValueError(f"no body '{name}' in the kinematic tree {self.tree.body_names}")
        return self.tree.body_names.index(name)

    def point(self, body: int, local) -> jax.Array:
        """The world position of the point ``local`` fixed in ``body``'s frame (body -1:
        the world)."""
        local = jnp.asarray(local, self.qpos.dtype)
        if body < 0:
            return local
        return self.xpos[body] + self.xmat[body] @ local

    def rotation(self, body: int, local) -> jax.Array:
        """The world rotation of the frame ``local`` (3, 3) fixed in ``body``'s frame."""
        local = jnp.asarray(local, self.qpos.dtype)
        return local if body < 0 else self.xmat[body] @ local

    def subtree_com_velocity(self, body: int) -> jax.Array:
        """The velocity of the centre of mass of ``body`` and its descendants (MuJoCo's
        ``subtree_linvel``, ``engine_core_smooth.c`` ``mj_subtreeVel``)."""
        members = [b for b in range(len(self.tree.parent)) if _descends(self.tree, b, body)]
        m = self.mass[jnp.asarray(members)]
        return m @ self.com_velocity[jnp.asarray(members)] / jnp.sum(m)

    def contacts(self) -> ContactSlots:
        """Every contact slot's gap, normal force, point, ... at this state (the forces the
        step applied; :class:`~jaxmbd.contact.ContactSlots`)."""
        if self.contact is None:
            raise ValueError("Physics.contacts: the model has no contact pairs")
        state = BodyState(self.xipos, self.xmat, self.com_velocity, self.angular_velocity)
        return self.contact.slots(state)

    def subtree_com(self, body: int) -> jax.Array:
        """The centre of mass of ``body`` and its descendants (MuJoCo's ``subtree_com``)."""
        members = [b for b in range(len(self.tree.parent)) if _descends(self.tree, b, body)]
        m = self.mass[jnp.asarray(members)]
        return m @ self.xipos[jnp.asarray(members)] / jnp.sum(m)


def _descends(tree: KinematicTree, b: int, ancestor: int) -> bool:
    while b >= 0:
        if b == ancestor:
            return True
        b = tree.parent[b]
    return False


def _finite(physics: Physics) -> jax.Array:
    """Whether the state is finite (a step that diverged ends in inf or nan)."""
    return jnp.all(jnp.isfinite(physics.qpos)) & jnp.all(jnp.isfinite(physics.qvel))


def physics_of(model: Model, qpos, qvel, ctrl, constraint_forces=None, act=None) -> Physics:
    """:class:`Physics` of ``model`` at (qpos, qvel) after the action ``ctrl``; ``model``
    as the run sees it (its contact element's masses set: :func:`~jaxmbd.contact.with_contact`);
    ``act``: the activations (None: the actuators' own, an episode's start)."""
    tree, _ = model_tree(model)
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    if act is None:
        element = model.actuators
        dynamic = element is not None and element.has_dynamics
        act = element.act() if dynamic else jnp.zeros(0, qvel.dtype)
    return Physics(tree, model.mass, contact_element(model), qpos, qvel, ctrl, p.x, p.R, p.c,
                   rdot, omega, constraint_forces, jnp.asarray(act, qvel.dtype))  # fmt: skip


def constraint_forces(model: Model, state: JointState, ctrl, *, h, integrator) -> ConstraintForces:
    """:class:`ConstraintForces` of MuJoCo's constraint model at the start of a time step
    from ``state`` under ``ctrl``: the contact slots of the file's geom pairs (MuJoCo's
    colliders, :mod:`jaxmbd.contact.mujoco`) and the step's solved row forces (the
    contact rows come last, ``mj_makeConstraint``'s order)."""
    tree, loops = model_tree(model)
    stepper = get_stepper(integrator)
    h = jnp.asarray(h, state.qvel.dtype)
    driven = with_controls(model, ctrl)
    element = model.actuators
    if element is not None and element.has_dynamics:  # the step's start activations
        act = element.activation if state.act is None else element.full_activation(state.act)
        driven = stepper.with_step_activation(driven, act, state.t, h)
    acc = stepper.start_accelerations(driven, tree, loops, state.qpos, state.qvel, state.t, h)
    return forces_of(model, state, acc)


def forces_of(model: Model, state: JointState, acc) -> ConstraintForces:
    """:class:`ConstraintForces` of MuJoCo's constraint model at ``state`` from the
    accelerations ``acc`` a step evaluated there (:func:`constraint_forces`)."""
    tree, _ = model_tree(model)
    qacc = acc.qacc if acc.solver_qacc is None else acc.solver_qacc
    p = poses(tree, state.qpos)
    return solved_contact_forces(model.constraint_model, p.x, p.R, acc.unilateral, state.qpos,
                                 state.qvel, qacc)  # fmt: skip


def unsolved_forces(model: Model, state: JointState) -> ConstraintForces:
    """:class:`ConstraintForces` of :func:`constraint_forces`'s shapes and contact slots, all
    zero: what an observation's size is read from without tracing a constraint solve."""
    _, body1, body2, geoms = slot_labels(model.constraint_model.contacts)
    zeros = jnp.zeros((len(body1), 3), state.qvel.dtype)
    return ConstraintForces(zeros, zeros, zeros[:, 0], state.qpos, zeros, zeros, state.qvel,
                            jnp.zeros_like(state.qvel), body1, body2, geoms)  # fmt: skip


#: The contact options of an environment (``"hard"`` is :func:`~jaxmbd.simulate`'s only)
CONTACT_OPTIONS = ("soft", "compliant", "none")
#: The limits options of an environment
LIMITS_OPTIONS = (None, "soft", "compliant", "none")
#: The integrators whose step :func:`step_stability` checks (explicit in the forces)
EXPLICIT_STEPS = ("rk", "rkmk", "euler")


def treatments(model: Model, contact, limits, equality) -> tuple[str, str | None, str | None]:
    """(contact, limits, equality) of an environment over ``model``: None for ``contact``
    is "soft" (MuJoCo's constraint model) for a model read from a file, "compliant" for one
    built in code; None for ``limits`` follows a "soft" contact, else the compliant limits;
    None for ``equality`` is "soft" where the run solves MuJoCo's model and the file has
    equalities (:func:`~jaxmbd.analysis.plan.soft_equality_default`)."""
    if contact is None:
        contact = "soft" if model.constraint_model is not None else "compliant"
    if contact not in CONTACT_OPTIONS:
        raise ValueError(
            f"ModelEnv: contact must be one of {list(CONTACT_OPTIONS)}, got {contact!r}"
        )
    if limits is None and contact == "soft":
        limits = "soft"
    if limits not in LIMITS_OPTIONS:
        raise ValueError(f"ModelEnv: limits must be one of {list(LIMITS_OPTIONS)}, got {limits!r}")
    return contact, limits, soft_equality_default(model, contact, limits, equality)


def _soft_friction(model: Model):
    """(friction arrays (..., k, 5), geom id pairs) of the contact groups a run of ``model``
    solves with MuJoCo's constraint model (empty without)."""
    constraints = model.constraint_model
    if constraints is None or "contact" not in constraints.treats:
        return []
    return [(g.friction, g.geoms) for g in constraints.contacts]


def _check_soft_friction(model: Model, where: str) -> None:
    """ModelError at the first negative or non-finite friction coefficient of the concrete
    contact groups of MuJoCo's constraint model (``mj_contactParam``'s mixed friction)."""
    for friction, geoms in _soft_friction(model):
        if isinstance(friction, jax.core.Tracer):
            continue
        value = np.asarray(friction)
        hits = np.argwhere(~(value >= 0) | ~np.isfinite(value))
        if hits.size:
            index = tuple(int(k) for k in hits[0])
            member = f"batch member {index[:-2]}: " if len(index) > 2 else ""
            g1, g2 = geoms[index[-2]]
            raise ModelError(
                f"{where}: model '{model.name}': {member}the contact of MuJoCo geoms {g1} and "
                f"{g2}: friction[{index[-1]}] {float(value[index]):.6g}; must be >= 0 and finite"
            )


def _soft_friction_invalid(model: Model):
    """Whether any friction coefficient of MuJoCo's constraint model is negative or not
    finite (traceable; batch dims of the leaves, or ())."""
    flags = [jnp.any(~(jax.lax.stop_gradient(f) >= 0), axis=(-2, -1))
             for f, _ in _soft_friction(model) if f.shape[-2]]  # fmt: skip
    if not flags:
        return jnp.zeros((), bool)
    return jnp.any(jnp.stack(jnp.broadcast_arrays(*flags)), axis=0)


def _linearised(model: Model):
    """(M, K, D, joint damping (nv,)) at the model's initial state: the mass matrix and the
    central differences (step 1e-6) of the force elements' generalised forces in
    the tangent of qpos and in qvel."""
    tree, _ = model_tree(model)
    qpos, qvel = tree.qpos_init, tree.qvel_init
    t = jnp.zeros((), qvel.dtype)
    eps = 1e-6
    steps = jnp.concatenate([jnp.eye(tree.nv), -jnp.eye(tree.nv)]) * eps

    def moved(d):
        return applied_generalised_forces(model, tree, integrate_positions(tree, qpos, d, 1.0),
                                          qvel, t)  # fmt: skip

    def pushed(dv):
        return applied_generalised_forces(model, tree, qpos, qvel + dv, t)

    Fq, Fv = jax.vmap(moved)(steps), jax.vmap(pushed)(steps)
    K = (Fq[: tree.nv] - Fq[tree.nv :]).T / (2 * eps)
    D = (Fv[: tree.nv] - Fv[tree.nv :]).T / (2 * eps)
    acc = accelerations(model, tree, None, qpos, qvel, t)
    damping = acc.forces.damping
    damping = jnp.zeros(tree.nv, qvel.dtype) if damping is None else damping
    return acc.mass, K, D, damping


def step_stability(model: Model, integrator, h: float) -> tuple[float, float, float]:
    """(spectral radius of the step's linearisation, the bound it must stay below, the
    largest step h / 2^k that stays below it) at the model's initial state, for the steps
    explicit in the forces (:data:`EXPLICIT_STEPS`; (0, inf, h) for the others). The
    forces' stiffness K = d f / d q and damping D = d f / d qvel (the force elements:
    springs, dampers, actuators, compliant contact in touch at the start) give the linear
    system x' = A x, A = [[0, I], [M^-1 K, M^-1 D]]; the step's amplification matrix is
    RK4's sum (h A)^k / k! (k <= 4) or MuJoCo's semi-implicit Euler (``mj_Euler``:
    v+ = v + h (M + h B)^-1 f, B the joint damping, then q+ = q + h v+). A stable step does
    not grow faster than the exact flow: its spectral radius stays below
    max(1, exp(h max Re eig A)) (a margin of 1e-6 relative)."""
    name = integrator if isinstance(integrator, str) else getattr(integrator, "name", "")
    if name not in EXPLICIT_STEPS:
        return 0.0, math.inf, h
    # the force elements only: MuJoCo's constraint rows (whose time constants refsafe keeps
    # above 2 h, ``mj_makeImpedance``) leave the evaluation
    model = dataclasses.replace(model, constraint_model=None)
    M, K, D, damping = (np.asarray(x) for x in jax.jit(_linearised)(model))
    nv = M.shape[0]
    eye, zero = np.eye(nv), np.zeros((nv, nv))
    A = np.block([[zero, eye], [np.linalg.solve(M, K), np.linalg.solve(M, D)]])
    fastest = max(0.0, float(np.max(np.linalg.eigvals(A).real)))

    def radius_and_bound(h):
        if name == "euler":
            Mh = M + h * np.diag(damping)
            Ka, Da = np.linalg.solve(Mh, K), np.linalg.solve(Mh, D)
            step = np.block([[eye + h * h * Ka, h * (eye + h * Da)], [h * Ka, eye + h * Da]])
        else:
            step, term = np.eye(2 * nv), np.eye(2 * nv)
            for k in range(1, 5):
                term = term @ (h * A) / k
                step = step + term
        radius = float(np.max(np.abs(np.linalg.eigvals(step))))
        return radius, max(1.0, math.exp(h * fastest)) * (1 + 1e-6)

    radius, bound = radius_and_bound(h)
    largest = h
    while largest > 1e-9 * h and operator.gt(*radius_and_bound(largest)):
        largest /= 2
    return radius, bound, largest


def non_finite_actions(action) -> jax.Array:
    """The number of non-finite entries of ``action`` (per member: the last axis)."""
    return jnp.sum(~jnp.isfinite(action), axis=-1).astype(jnp.asarray(action).dtype)


class ModelEnv(Env):
    """A brax-style environment over ``model`` in joint coordinates.

    - ``h``: the model's time step; ``n_substeps``: time steps per control step (brax's
      ``n_frames``, dm_control's ``n_sub_steps``), so ``dt = n_substeps * h``.
    - ``contact`` ("soft", "compliant" or "none"), ``limits`` (None, "soft", "compliant"
      or "none") and ``equality``: as :func:`~jaxmbd.simulate`'s options (not "hard").
      None (:func:`treatments`): a model read from a file steps MuJoCo's constraint model
      (contact, limits and the file's equalities "soft"), one built in code jaxmbd's
      compliant contact and limits.
    - ``integrator``: a joint-formulation stepper (``"rk"``, ``"euler"``, ``"implicit"``,
      ...). None: with MuJoCo's constraint model the file's (``opt.integrator``, as
      ``mj_step``); with compliant contact ``"implicitfast"`` (the linearised step with
      the force's velocity Jacobian: jaxmbd's compliant contact is stiffer than MuJoCo's
      soft constraints); else the file's, or ``"rkmk"`` (MuJoCo's RK4) for a model built
      in code. A step that
      the integrator cannot take at the model's initial state (:func:`step_stability`) is
      refused here, with the largest step that passes.
    - ``observation(physics, info) -> (n,)``, ``reward(physics, info) -> ()``: functions
      of the :class:`Physics` after the step (``physics.ctrl``: its action) and of
      ``state.info``.
    - ``initial_state(model, rng) -> (qpos, qvel, info)``: an episode's first state and
      the entries it adds to ``state.info`` (a target's position, ...); None: the model's
      own initial state, empty info. ``episode_model(model, info) -> model``: the model an
      episode runs on, from the model and its ``state.info`` (a terrain drawn at reset);
      None: the model itself. ``settle_steps``: then that many uncontrolled time
      steps of the environment's own step, the clock set back to 0 (the settling of
      dm_control's ``initialize_episode``, e.g. the cheetah's 200 steps).
    - ``contact_forces``: with MuJoCo's constraint model, pass its contacts and their
      forces to the observation (``physics.constraint_forces``, :class:`ConstraintForces`:
      the touch sensors' inputs), at the cost of a second constraint solve per control
      step.
    - ``terminated(physics, info) -> bool``: where the episode ends early; None: never
      (a time limit is the wrappers' :class:`EpisodeWrapper`). A state that is no longer
      finite (a diverged step) ends the episode too, with reward 0, as MuJoCo
      Playground's environments do (``done = isnan(qpos) | isnan(qvel)``), so one
      member's divergence neither poisons a batch's returns nor stays in it past the
      auto-reset.
    - ``episode_length``: the time limit in control steps that :func:`wrap` applies
      (dm_control's ``time_limit / control_timestep``: 1000 for its tasks).
    - ``member_chunk``: how many members of a batch :class:`VmapWrapper` steps as one
      vectorised program ("auto": one at a time for models with contact on the CPU,
      the fastest per member of the schedules measured, :class:`VmapWrapper`; else
      None, all at once). Under a bare ``jax.vmap`` of :meth:`step` too, a step too large
      for tiles of members steps its members one at a time where this is 1.

    ``env.sys`` is the model the functions run on: brax's domain-randomisation wrapper
    swaps it for each member of a batch of models. Its parameters are checked at
    ``reset``: concrete values are refused (ModelError naming the body or contact), traced
    ones (a batch of models) flag their member in ``info["invalid_parameters"]`` (1.0).
    ``reset`` and ``step`` are pure JAX; ``step`` applies ``action`` as the actuators'
    controls, held over the substeps, and carries the integrator's state (no projection
    or angle wrapping between steps). A member whose action has a non-finite entry steps
    with zero controls (MuJoCo's ``mjWARN_BADCTRL`` zeroes ``ctrl``), counted in
    ``metrics["nan_actions"]`` and warned about where the action is concrete."""

    def __init__(self, model: Model, *, h: float, observation: Callable, reward: Callable,
                 initial_state: Callable | None = None, terminated: Callable | None = None,
                 n_substeps: int = 1, integrator=None, episode_length: int = 1000,
                 contact: str | None = None, limits: str | None = None,
                 equality: str | None = None, settle_steps: int = 0,
                 contact_forces: bool = False, member_chunk="auto",
                 episode_model: Callable | None = None):  # fmt: skip
        if model.nu == 0:
            raise ValueError(f"ModelEnv: model '{model.name}' has no actuators to act with")
        if int(n_substeps) < 1:
            raise ValueError(f"ModelEnv: n_substeps must be at least 1, got {n_substeps}")
        if not (float(h) > 0 and math.isfinite(float(h))):
            raise ValueError(f"ModelEnv: the time step h must be positive and finite, got {h}")
        if int(settle_steps) < 0:
            raise ValueError(f"ModelEnv: settle_steps must be >= 0, got {settle_steps}")
        self.contact, self.limits, self.equality = treatments(model, contact, limits, equality)
        self.sys = model
        model = self._run_model()
        self.h = float(h)
        self.n_substeps = int(n_substeps)
        self.settle_steps = int(settle_steps)
        # MuJoCo's contact forces for the observation, where MuJoCo's model has contacts
        self._contact_forces = (
            bool(contact_forces)
            and self.contact == "soft"
            and bool(model.constraint_model.contacts)
        )
        if integrator is None:
            if "soft" in (self.contact, self.limits):
                integrator = model.constraint_model.integrator
            elif contact_element(model) is not None:
                integrator = "implicitfast"
            elif model.constraint_model is not None:  # a file's own
                integrator = model.constraint_model.integrator
            else:
                integrator = "rkmk"
        self.integrator = integrator
        radius, bound, largest = step_stability(model, integrator, self.h)
        if radius > bound:
            raise ValueError(
                f"ModelEnv: model '{model.name}': the time step h = {self.h:g} is beyond what "
                f"integrator {getattr(integrator, 'name', integrator)!r} can take: its "
                f"linearised step at the initial state grows by {radius:.4g} per step, the "
                f"motion by at most {bound:.4g}; h = {largest:.3g} passes (or choose an "
                "implicit integrator)"
            )
        if member_chunk == "auto":
            cpu = jax.default_backend() == "cpu"
            soft_pairs = self.contact == "soft" and bool(model.constraint_model.contacts)
            has_contact = contact_element(model) is not None or soft_pairs
            member_chunk = 1 if cpu and has_contact else None
        self.member_chunk = member_chunk
        self.episode_length = int(episode_length)
        self._observation = observation
        self._reward = reward
        self._initial_state = initial_state
        self._terminated = terminated
        self._episode_model = episode_model
        state = initial_joint_state(model)
        ctrl = jnp.zeros(model.nu, state.qvel.dtype)

        def first_observation():
            info = {} if initial_state is None else initial_state(model, jax.random.PRNGKey(0))[2]
            run = self._episode(model, info)
            forces = unsolved_forces(run, state) if self._contact_forces else None
            return observation(physics_of(run, state.qpos, state.qvel, ctrl, forces), info)

        obs = jax.eval_shape(first_observation)
        if len(obs.shape) != 1:
            raise ValueError(f"ModelEnv: observation() must return a vector, got shape {obs.shape}")
        self._observation_size = int(obs.shape[0])

    @property
    def dt(self) -> float:
        """The control step: ``n_substeps * h``."""
        return self.n_substeps * self.h

    @property
    def observation_size(self) -> int:
        return self._observation_size

    @property
    def action_size(self) -> int:
        return self.sys.nu

    def _run_model(self, sys: Model | None = None) -> Model:
        """``sys`` (None: ``self.sys``) as the run sees it (the contact, limits and
        equality options applied)."""
        model = self.sys if sys is None else sys
        return treated_model(model, contact=self.contact, limits=self.limits,
                             equality=self.equality, where="ModelEnv",
                             hard_and_soft=True).model  # fmt: skip

    def _episode(self, model: Model, info) -> Model:
        """The model an episode with ``info`` runs on (``episode_model``)."""
        return model if self._episode_model is None else self._episode_model(model, info)

    def _done(self, physics, info):
        diverged = ~_finite(physics)
        if self._terminated is None:
            return diverged.astype(physics.qvel.dtype)
        done = jnp.asarray(self._terminated(physics, info)) | diverged
        return done.astype(physics.qvel.dtype)

    def draw(self, rng: jax.Array, sys: Model | None = None):
        """(qpos, qvel, info) of an episode's start as the task draws it, before the
        settling steps (:attr:`settle_steps`): what a reference run starts from."""
        model = self._run_model(sys)
        start = initial_joint_state(model)
        info: dict[str, Any] = {}
        qpos, qvel = start.qpos, start.qvel
        if self._initial_state is not None:
            qpos, qvel, info = self._initial_state(model, rng)
            info = dict(info)
        return jnp.asarray(qpos, start.qpos.dtype), jnp.asarray(qvel, start.qvel.dtype), info

    def _checked_sys(self) -> tuple[Model, jax.Array]:
        """(``self.sys`` as the run sees it, whether its parameters are invalid): concrete
        invalid values raise ModelError, traced ones are flagged."""
        where = "ModelEnv.reset"
        model = self._run_model()
        model = checked_parameters(model, where=where)
        _check_soft_friction(model, where)
        return model, parameters_invalid(model) | _soft_friction_invalid(model)

    def reset(self, rng: jax.Array) -> State:
        """An episode's first state. Called plainly, the parameters are checked first (a
        ModelError where invalid), then one compiled program runs (:func:`compiled_when_plain`)."""
        if at_top_level():
            self._checked_sys()
        return self._reset(rng)

    @compiled_when_plain
    def _reset(self, rng: jax.Array) -> State:
        model, invalid = self._checked_sys()
        qpos, qvel, info = self.draw(rng)
        model = self._episode(model, info)
        element = model.actuators
        act = element.act() if element is not None and element.has_dynamics else None
        pipeline_state = JointState(qpos, qvel, jnp.zeros((), qvel.dtype), act)
        ctrl = jnp.zeros(model.nu, qvel.dtype)
        if self.settle_steps:
            settled = advance(model, pipeline_state, ctrl, h=self.h, n_steps=self.settle_steps,
                              integrator=self.integrator)  # fmt: skip
            pipeline_state = JointState(settled.qpos, settled.qvel, pipeline_state.t, settled.act)
        info["invalid_parameters"] = invalid.astype(qvel.dtype)
        forces = None
        if self._contact_forces:  # mj_forward's, at the first state
            forces = constraint_forces(model, pipeline_state, ctrl, h=self.h,
                                       integrator=self.integrator)  # fmt: skip
        physics = physics_of(model, pipeline_state.qpos, pipeline_state.qvel, ctrl, forces,
                             pipeline_state.act)  # fmt: skip
        obs = jnp.asarray(self._observation(physics, info))
        zero = jnp.zeros((), qvel.dtype)
        metrics = {"nan_actions": zero}
        return State(pipeline_state, obs, zero, self._done(physics, info), metrics, info)

    @compiled_when_plain(actions=True)
    def step(self, state: State, action: jax.Array) -> State:
        """One control step; under ``vmap`` a batch runs on tiles of members
        (:func:`~jaxmbd.compiled.batch_lanes.batch_lanes`), or, where the step's program is too
        large for them (the contact tasks), as ``jax.vmap`` batches it, or one member after
        another where the environment steps contact members so (:attr:`member_chunk` 1)."""
        action = jnp.asarray(action, state.pipeline_state.qvel.dtype)
        # the model is an argument: a batch of models (DomainRandomizationVmapWrapper) too
        arrays, static = eqx.partition((self.sys, state, action), eqx.is_array)
        leaves, treedef = jax.tree_util.tree_flatten(arrays)
        out_static = []

        def run(*leaves):
            sys, state, action = eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)
            out, rest = eqx.partition(self._step(sys, state, action), eqx.is_array)
            out_static[:] = [rest]
            return out

        too_large = "map" if self.member_chunk == 1 else "vmap"
        out = batch_lanes(run, chunk=BATCH_LANES_CHUNK, too_large=too_large)(*leaves)
        return eqx.combine(out, out_static[0])

    def _step(self, sys: Model, state: State, action: jax.Array) -> State:
        model = self._episode(self._run_model(sys), state.info)
        bad = non_finite_actions(action)
        action = jnp.where(bad > 0, jnp.zeros_like(action), action)
        start, forces = state.pipeline_state, None
        options = dict(h=self.h, n_steps=self.n_substeps, integrator=self.integrator)
        if self._contact_forces:  # the last time step's start, where MuJoCo's sensors read
            pipeline_state, last, acc = advance_and_last_start(model, start, action, **options)
            forces = forces_of(model, last, acc)
        else:
            pipeline_state = advance(model, start, action, **options)
        physics = physics_of(model, pipeline_state.qpos, pipeline_state.qvel, action, forces,
                             pipeline_state.act)  # fmt: skip
        obs = jnp.asarray(self._observation(physics, state.info))
        reward = jnp.asarray(self._reward(physics, state.info), action.dtype)
        reward = jnp.where(_finite(physics), reward, jnp.zeros_like(reward))
        done = self._done(physics, state.info)
        metrics = {**state.metrics, "nan_actions": bad}
        return state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done,
                             metrics=metrics)  # fmt: skip
