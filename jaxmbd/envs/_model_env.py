"""An environment over any model in the joint formulation: :class:`ModelEnv` steps a
:class:`~jaxmbd.joint_space.JointState` with :func:`~jaxmbd.joint_space.advance` and asks
the task's functions for the initial state, the observation, the reward and the end of an
episode. Those functions read :class:`Physics`: the state's kinematics, computed once per
control step (MuJoCo's ``mjData`` after ``mj_forward``: body frames, centres of mass,
their velocities)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..analysis.plan import treated_model
from ..compiled.batch_lanes import batch_lanes
from ..contact import ContactSlots, contact_element
from ..forces import BodyState
from ..joint_space import JointState, advance, initial_joint_state, model_tree
from ..joint_space.run import BATCH_LANES_CHUNK
from ..model import Model
from ..tree import KinematicTree, body_velocities, poses
from ._base import Env, State


class Physics(eqx.Module):
    """A state's kinematics, as MuJoCo's ``mjData`` after ``mj_forward`` names them:
    ``qpos`` (nq,), ``qvel`` (nv,), ``ctrl`` (nu,: the action of the step that led here;
    zeros after a reset), ``xpos``/``xmat`` (nb, 3)/(nb, 3, 3): the tree bodies' frames,
    ``xipos`` (nb, 3): their centres of mass, ``com_velocity`` (nb, 3): the centres of
    mass's world velocities, ``angular_velocity`` (nb, 3): in each body's frame. Body k is
    the model's tree body k (:meth:`body` finds it by name). ``contact``: the model's
    contact element (None without contact; :meth:`contacts` evaluates it)."""

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


def physics_of(model: Model, qpos, qvel, ctrl) -> Physics:
    """:class:`Physics` of ``model`` at (qpos, qvel) after the action ``ctrl``; ``model``
    as the run sees it (its contact element's masses set: :func:`~jaxmbd.contact.with_contact`)."""
    tree, _ = model_tree(model)
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    return Physics(tree, model.mass, contact_element(model), qpos, qvel, ctrl, p.x, p.R, p.c,
                   rdot, omega)  # fmt: skip


class ModelEnv(Env):
    """A brax-style environment over ``model`` in joint coordinates.

    - ``h``: the model's time step; ``n_substeps``: time steps per control step (brax's
      ``n_frames``, dm_control's ``n_sub_steps``), so ``dt = n_substeps * h``;
      ``integrator``: a joint-formulation stepper (``"rk"``, ``"euler"``, ``"implicit"``,
      ...; default: ``"rkmk"`` (MuJoCo's RK4, the same step as ``"rk"`` on hinges and
      slides), ``"implicitfast"`` for models with contact: the
      linearised step with the force's velocity Jacobian only. With the position
      Jacobian too (``"implicit"``) the hopper at 5 ms diverges from about one reset in
      thirty under random actions, or lying still: the friction's position Jacobian is
      not symmetric and can make M - h D - h^2 K indefinite).
    - ``observation(physics, info) -> (n,)``, ``reward(physics, info) -> ()``: functions
      of the :class:`Physics` after the step (``physics.ctrl``: its action) and of
      ``state.info``.
    - ``initial_state(model, rng) -> (qpos, qvel, info)``: an episode's first state and
      the entries it adds to ``state.info`` (a target's position, ...); None: the model's
      own initial state, empty info.
    - ``terminated(physics, info) -> bool``: where the episode ends early; None: never
      (a time limit is the wrappers' :class:`EpisodeWrapper`). A state that is no longer
      finite (a diverged step) ends the episode too, with reward 0, as MuJoCo
      Playground's environments do (``done = isnan(qpos) | isnan(qvel)``), so one
      member's divergence neither poisons a batch's returns nor stays in it past the
      auto-reset.
    - ``contact`` ("compliant" or "none") and ``limits`` (None, "compliant" or "none"):
      as :func:`~jaxmbd.simulate`'s options.
    - ``episode_length``: the time limit in control steps that :func:`wrap` applies
      (dm_control's ``time_limit / control_timestep``: 1000 for its tasks).
    - ``member_chunk``: how many members of a batch :class:`VmapWrapper` steps as one
      vectorised program ("auto": one at a time for models with contact on the CPU,
      the fastest per member of the schedules measured, :class:`VmapWrapper`; else
      None, all at once). Under a bare ``jax.vmap`` of :meth:`step` too, a step too large
      for tiles of members steps its members one at a time where this is 1.

    ``env.sys`` is the model the functions run on: brax's domain-randomisation wrapper
    swaps it for each member of a batch of models. ``reset`` and ``step`` are pure JAX;
    ``step`` applies ``action`` as the actuators' controls, held over the substeps, and
    carries the integrator's state (no projection or angle wrapping between steps)."""

    def __init__(self, model: Model, *, h: float, observation: Callable, reward: Callable,
                 initial_state: Callable | None = None, terminated: Callable | None = None,
                 n_substeps: int = 1, integrator=None, episode_length: int = 1000,
                 contact: str = "compliant", limits: str | None = None,
                 member_chunk="auto"):  # fmt: skip
        if model.nu == 0:
            raise ValueError(f"ModelEnv: model '{model.name}' has no actuators to act with")
        if int(n_substeps) < 1:
            raise ValueError(f"ModelEnv: n_substeps must be at least 1, got {n_substeps}")
        if not float(h) > 0:
            raise ValueError(f"ModelEnv: the time step h must be positive, got {h}")
        self.contact = contact
        self.limits = limits
        self.sys = model
        model = self._run_model()
        self.h = float(h)
        self.n_substeps = int(n_substeps)
        if integrator is None:
            integrator = "rkmk" if contact_element(model) is None else "implicitfast"
        self.integrator = integrator
        if member_chunk == "auto":
            cpu = jax.default_backend() == "cpu"
            member_chunk = 1 if cpu and contact_element(model) is not None else None
        self.member_chunk = member_chunk
        self.episode_length = int(episode_length)
        self._observation = observation
        self._reward = reward
        self._initial_state = initial_state
        self._terminated = terminated
        state = initial_joint_state(model)
        ctrl = jnp.zeros(model.nu, state.qvel.dtype)

        def first_observation():
            info = {} if initial_state is None else initial_state(model, jax.random.PRNGKey(0))[2]
            return observation(physics_of(model, state.qpos, state.qvel, ctrl), info)

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
        """``sys`` (None: ``self.sys``) as the run sees it (the contact and limits options
        applied)."""
        model = self.sys if sys is None else sys
        contact, limits = self.contact, self.limits
        return treated_model(model, contact=contact, limits=limits, where="ModelEnv").model

    def _done(self, physics, info):
        diverged = ~_finite(physics)
        if self._terminated is None:
            return diverged.astype(physics.qvel.dtype)
        done = jnp.asarray(self._terminated(physics, info)) | diverged
        return done.astype(physics.qvel.dtype)

    def reset(self, rng: jax.Array) -> State:
        model = self._run_model()
        start = initial_joint_state(model)
        info: dict[str, Any] = {}
        qpos, qvel = start.qpos, start.qvel
        if self._initial_state is not None:
            qpos, qvel, info = self._initial_state(model, rng)
            info = dict(info)
        qpos, qvel = jnp.asarray(qpos, start.qpos.dtype), jnp.asarray(qvel, start.qvel.dtype)
        pipeline_state = JointState(qpos, qvel, jnp.zeros_like(start.t))
        ctrl = jnp.zeros(model.nu, qvel.dtype)
        physics = physics_of(model, qpos, qvel, ctrl)
        obs = jnp.asarray(self._observation(physics, info))
        zero = jnp.zeros((), qvel.dtype)
        return State(pipeline_state, obs, zero, self._done(physics, info), {}, info)

    def step(self, state: State, action: jax.Array) -> State:
        """One control step; under ``vmap`` a batch runs on tiles of members
        (:func:`~jaxmbd.compiled.batch_lanes.batch_lanes`), or, where the step's program is too
        large
        for them (the contact tasks), as ``jax.vmap`` batches it, or one member after another
        where the environment steps contact members so (:attr:`member_chunk` 1)."""
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
        model = self._run_model(sys)
        pipeline_state = advance(model, state.pipeline_state, action, h=self.h,
                                 n_steps=self.n_substeps, integrator=self.integrator)  # fmt: skip
        physics = physics_of(model, pipeline_state.qpos, pipeline_state.qvel, action)
        obs = jnp.asarray(self._observation(physics, state.info))
        reward = jnp.asarray(self._reward(physics, state.info), action.dtype)
        reward = jnp.where(_finite(physics), reward, jnp.zeros_like(reward))
        done = self._done(physics, state.info)
        return state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done)
