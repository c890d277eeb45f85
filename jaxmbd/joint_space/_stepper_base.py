"""The joint formulation's time-step interface."""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..actuators import with_activation, with_activation_state
from .constraint_rows import project
from .dynamics import Accelerations, accelerations


class AbstractJointStepper(eqx.Module):
    """One explicit time step (qpos, qvel, acc at the start) -> (qpos, qvel) at t + h."""

    name: ClassVar[str]
    #: Whether the step resolves impacts itself (exact contact): compliant-contact
    #: sub-steps (:mod:`jaxmbd.joint_space.contact_step`) never apply.
    resolves_impacts: ClassVar[bool] = False
    #: Whether the accelerations that :meth:`advance` returns are :meth:`start_accelerations`
    #: at the new state (no state of the method's own, no step-mean accelerations): then a
    #: run takes each step by :meth:`start_and_step`, which computes them once per step.
    state_accelerations: ClassVar[bool] = True
    #: Whether the step integrates the actuators' activations as a state, as MuJoCo's
    #: integrators integrate ``act`` (:mod:`jaxmbd.actuators`: :meth:`activation_after`);
    #: otherwise the forces read the activations' closed form over the step.
    integrates_activations: ClassVar[bool] = False
    #: Whether a run under controls takes each step by :meth:`ends_and_step` (the step
    #: before's end and this step's start evaluated together); a stepper whose
    #: :meth:`start_and_advance` already computes both ends in one loop keeps that.
    pairs_step_ends: ClassVar[bool] = True

    @abc.abstractmethod
    def step(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        """(qpos, qvel) at t + h."""

    def with_step_activation(self, model, act, t, h):
        """``model`` with its actuators' activations ``act`` (nu,) at the step's start t: a
        state (:attr:`integrates_activations`) or the start of their closed form."""
        if self.integrates_activations:
            return with_activation_state(model, act, h)
        return with_activation(model, act, t, h)

    def activation_after(self, model, h):
        """The activations (nu,) at the step's end, from ``model``'s at its start
        (:meth:`with_step_activation`): where the step integrates them, MuJoCo's
        ``mj_Euler``/``mj_implicit`` update (``mj_advance``: ``mj_nextActivation`` of the
        start's rate, engine_forward.c); otherwise the closed form's."""
        element = model.actuators
        if not self.integrates_activations:
            return element.next_activation(h)
        return element.activation_after(element.activation_rate(), h)

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *,
                            warm=None) -> Accelerations:  # fmt: skip
        """The accelerations at the step's start; ``warm``: the previous step's qacc, the
        warm start of MuJoCo's constraint solve (steppers that integrate as MuJoCo's Euler
        and implicit steps take it; others start cold)."""
        return accelerations(model, tree, loops, qpos, qvel, t, step=h)

    def advance(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        """(qpos, qvel, accelerations) at t + h: :meth:`step`, then :meth:`finish`."""
        qpos, qvel = self.step(model, tree, loops, qpos, qvel, acc, t, h)
        return self.finish(model, tree, loops, qpos, qvel, t + h, h)

    def start_and_advance(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        """(accelerations at the start, then :meth:`advance`'s qpos, qvel and accelerations at
        t + h) of a step under its own model (the step's controls): both ends' accelerations
        under the same controls; ``warm`` as :meth:`start_accelerations`'s."""
        acc = self.start_accelerations(model, tree, loops, qpos, qvel, t, h, warm=warm)
        return (acc, *self.advance(model, tree, loops, qpos, qvel, acc, t, h))

    def finish(self, model, tree, loops, qpos, qvel, t, h):
        """The state after the step, projected onto the exact constraint rows, and its
        accelerations."""
        qpos, qvel = projected(tree, loops, qpos, qvel, t)
        return qpos, qvel, self.start_accelerations(model, tree, loops, qpos, qvel, t, h)

    def start_and_step(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        """(accelerations at the start, qpos and qvel at t + h projected onto the exact
        constraint rows): :meth:`advance` of a :attr:`state_accelerations` stepper with its
        end's accelerations left to the next step's start, so that a run's program holds
        the accelerations' code once (in the loop) rather than three times (before it, in
        the step and after the step). ``warm`` as :meth:`start_accelerations`'s."""
        acc = self.start_accelerations(model, tree, loops, qpos, qvel, t, h, warm=warm)
        qpos, qvel = self.step(model, tree, loops, qpos, qvel, acc, t, h)
        return (acc, *projected(tree, loops, qpos, qvel, t + h))

    def ends_and_step(self, model_before, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        """(the accelerations at (qpos, qvel, t) under ``model_before``, the step before's
        model, which are that step's end; those under ``model``, this step's start; then
        qpos and qvel at t + h projected onto the exact constraint rows) for a
        :attr:`state_accelerations` stepper whose steps each have their own model (their
        controls). Both accelerations come from one evaluation vmapped over the leaves in
        which the two models differ: what depends on the state alone (poses, collisions,
        constraint rows, M) is computed once and the program holds the accelerations'
        code once, where a start and an end held it twice. Both solves start from ``warm``
        (MuJoCo's ``mj_forward`` after ``mj_step`` starts from the step's qacc too)."""
        pair, axes = _stacked_where_different(model_before, model)
        both = jax.vmap(
            lambda m: self.start_accelerations(m, tree, loops, qpos, qvel, t, h, warm=warm),
            in_axes=(axes,),
        )(pair)
        end = jax.tree_util.tree_map(lambda x: x[0], both)
        acc = jax.tree_util.tree_map(lambda x: x[1], both)
        qpos, qvel = self.step(model, tree, loops, qpos, qvel, acc, t, h)
        return (end, acc, *projected(tree, loops, qpos, qvel, t + h))


def _stacked_where_different(a, b):
    """(``a`` and ``b`` as one pytree, each leaf stacked (2, ...) where the two hold
    different objects and kept once where they hold the same; the ``in_axes`` of
    :func:`jax.vmap` over it, 0 or None per leaf)."""
    leaves, treedef = jax.tree_util.tree_flatten(a)
    others = treedef.flatten_up_to(b)
    same = [x is y for x, y in zip(leaves, others, strict=True)]
    stacked = [x if s else jnp.stack([x, y]) for x, y, s in zip(leaves, others, same, strict=True)]
    axes = [None if s else 0 for s in same]
    return treedef.unflatten(stacked), treedef.unflatten(axes)


def projected(tree, loops, qpos, qvel, t):
    """(qpos, qvel) projected onto the exact constraint rows ``loops`` (None: as they are)."""
    if loops is None:
        return qpos, qvel
    return project(loops, tree, qpos, qvel, t)
