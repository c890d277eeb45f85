"""``make(domain, task)``: dm_control's tasks by their suite names."""

from __future__ import annotations

from collections.abc import Callable

from .. import _config  # noqa: F401
from . import acrobot, cartpole, cheetah, hopper, humanoid, pendulum, quadruped, reacher, walker
from ._model_env import ModelEnv

#: The tasks by (domain, task): each a factory of keyword options.
TASKS: dict[tuple[str, str], Callable[..., ModelEnv]] = {
    ("cartpole", "balance"): cartpole.balance,
    ("cartpole", "swingup"): cartpole.swingup,
    ("acrobot", "swingup"): acrobot.swingup,
    ("pendulum", "swingup"): pendulum.swingup,
    ("reacher", "easy"): reacher.easy,
    ("hopper", "stand"): hopper.stand,
    ("hopper", "hop"): hopper.hop,
    ("cheetah", "run"): cheetah.run,
    ("walker", "stand"): walker.stand,
    ("walker", "walk"): walker.walk,
    ("walker", "run"): walker.run,
    ("humanoid", "stand"): humanoid.stand,
    ("humanoid", "walk"): humanoid.walk,
    ("humanoid", "run"): humanoid.run,
    ("quadruped", "walk"): quadruped.walk,
    ("quadruped", "run"): quadruped.run,
    ("quadruped", "escape"): quadruped.escape,
}


def make(domain: str, task: str, **options) -> ModelEnv:
    """dm_control's ``suite.load(domain, task)`` as a brax-style environment
    (:class:`ModelEnv`); ``options``: the task factory's (``integrator``,
    ``n_substeps``, ...)."""
    factory = TASKS.get((domain, task))
    if factory is None:
        raise ValueError(
            f"jaxmbd.envs.make: no task {domain!r}, {task!r}; the tasks: "
            f"{', '.join(f'{d}/{t}' for d, t in TASKS)}"
        )
    return factory(**options)
