"""Environments for reinforcement learning with brax's interface (``reset(rng)``,
``step(state, action)``, a :class:`State` pytree), over models in joint coordinates:
dm_control's tasks by :func:`make` (on MuJoCo's constraint model, the files' integrators
and steps, dm_control's resets), any model with its own reward and observation by
:class:`ModelEnv`, brax's training wrappers, and a gymnasium vector-environment adapter."""

from ._base import Env, State, Wrapper
from ._model_env import ConstraintForces, ModelEnv, Physics, constraint_forces, physics_of
from ._registry import TASKS, make
from .rewards import tolerance
from .wrappers import (
    AutoResetWrapper,
    DomainRandomizationVmapWrapper,
    EpisodeWrapper,
    VmapWrapper,
    model_axes,
    wrap,
)

__all__ = [
    "TASKS",
    "AutoResetWrapper",
    "ConstraintForces",
    "DomainRandomizationVmapWrapper",
    "Env",
    "EpisodeWrapper",
    "ModelEnv",
    "Physics",
    "State",
    "VmapWrapper",
    "Wrapper",
    "constraint_forces",
    "make",
    "model_axes",
    "physics_of",
    "tolerance",
    "wrap",
]
