"""What the ``"joint"`` formulation can run: the reasons, if any, why a model or the options
of a run have no joint-space path (empty: it runs them all). :func:`jaxmbd.simulate`,
:func:`jaxmbd.static_equilibrium` and :func:`jaxmbd.linearize` default to ``"joint"`` where
the model has none (``jaxmbd.analysis.plan.default_formulation``); an option that it lacks
then raises, naming the formulations that take it, and never changes the default.

Each part of the model is asked, never named: the body-joint graph must give a kinematic
tree (:func:`~jaxmbd.joint_space.from_model.tree_of_model`; every joint kind with
coordinates maps to hinges, slides and balls, every other row stays a constraint row,
drivers included), each force element answers
:meth:`~jaxmbd.forces.AbstractForce.joint_space_obstacle` for that tree, and the integrator
with its options must be a pair of :func:`jaxmbd.valid_pairs` whose stepper has those
options as fields."""

from __future__ import annotations

import dataclasses

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..formulations.joint import JointCoordinates
from ..integrators import valid_pairs
from ..model import Model
from ..tree import JointType
from ._stepper_base import AbstractJointStepper
from .contact_step import SUBSTEP_OPTIONS
from .from_model import tree_of_model
from .steppers import get_stepper


def model_obstacles(model: Model) -> tuple[str, ...]:
    """Why the joint formulation cannot run ``model`` (its tree and its force elements), or
    does not yet run it as well as the absolute formulations do. Contact, joint limits,
    joints of several coordinates, sensors, closed loops and drivers run as in rA
    (``tests/test_contact.py``, ``tests/test_joint_limits.py``,
    ``tests/test_joint_builder_trees.py``, ``tests/test_sensors.py``,
    ``tests/test_joint_loops.py``)."""
    if model.tree is not None:
        tree = model.tree
    else:
        try:
            spanning = tree_of_model(model)
        except (ModelError, KeyError, ValueError) as error:
            return (f"its body-joint graph gives no kinematic tree ({error})",)
        tree = spanning.tree
    # constraint rows beyond the tree (closed loops, drivers) are no gap: rk steps them
    # 3-20x faster than rA's gen_alpha with a shorter first call, its program holding the
    # accelerations' code once (benchmarks/probes/loop_models_first_call.py)
    dofs = {
        name: JointType(kind).nv
        for name, kind in zip(tree.joint_names, tree.joint_type, strict=True)
    }
    reasons = []
    for element in model.forces:
        reason = element.joint_space_obstacle(dofs)
        if reason is not None:
            reasons.append(f"force element {type(element).__name__}: {reason}")
    return tuple(reasons)


def integrator_obstacles(model: Model, integrator=None, options=None) -> tuple[str, ...]:
    """Why the joint formulation cannot take ``integrator`` (a name, a stepper object or
    None: its default for ``model``) with ``options`` (the integrator's keyword options;
    None values count as absent)."""
    if integrator is None:
        integrator = JointCoordinates.integrator_of(model)
    if isinstance(integrator, str):
        if (JointCoordinates.name, integrator) not in valid_pairs():
            return (f"integrator {integrator!r} has no joint-coordinate pair (valid_pairs())",)
    elif not isinstance(integrator, AbstractJointStepper):
        return (f"the integrator object {type(integrator).__name__} steps absolute coordinates",)
    stepper = get_stepper(integrator)
    fields = {f.name for f in dataclasses.fields(stepper)} | set(SUBSTEP_OPTIONS)
    asked = sorted(k for k, v in (options or {}).items() if v is not None and k not in fields)
    if asked:
        return (f"integrator {stepper.name!r} of the joint formulation has no options {asked}",)
    return ()


def joint_space_obstacles(model: Model, integrator=None, options=None) -> tuple[str, ...]:
    """Why the joint formulation cannot run ``model`` with ``integrator`` and ``options``
    (:func:`model_obstacles`, :func:`integrator_obstacles`); empty: it runs them."""
    return integrator_obstacles(model, integrator, options) + model_obstacles(model)


__all__ = [
    "integrator_obstacles",
    "joint_space_obstacles",
    "model_obstacles",
]
