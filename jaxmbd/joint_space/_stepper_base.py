"""The joint formulation's time-step interface."""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx

from .. import _config  # noqa: F401
from .constraint_rows import project
from .dynamics import Accelerations, accelerations


class AbstractJointStepper(eqx.Module):
    """One explicit time step (qpos, qvel, acc at the start) -> (qpos, qvel) at t + h."""

    name: ClassVar[str]
    #: Whether the step resolves impacts itself (exact contact): compliant-contact
    #: sub-steps (:mod:`jaxmbd.joint_space.contact_step`) never apply.
    resolves_impacts: ClassVar[bool] = False

    @abc.abstractmethod
    def step(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        """(qpos, qvel) at t + h."""

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h) -> Accelerations:
        return accelerations(model, tree, loops, qpos, qvel, t, step=h)

    def advance(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        """(qpos, qvel, accelerations) at t + h: :meth:`step`, then :meth:`finish`."""
        qpos, qvel = self.step(model, tree, loops, qpos, qvel, acc, t, h)
        return self.finish(model, tree, loops, qpos, qvel, t + h, h)

    def finish(self, model, tree, loops, qpos, qvel, t, h):
        """The state after the step, projected onto the exact constraint rows, and its
        accelerations."""
        if loops is not None:
            qpos, qvel = project(loops, tree, qpos, qvel, t)
        return qpos, qvel, self.start_accelerations(model, tree, loops, qpos, qvel, t, h)
