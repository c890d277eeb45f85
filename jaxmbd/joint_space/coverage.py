"""What the ``"joint"`` formulation can run: the reasons, if any, why a model or the options
of a run have no joint-space path (empty: it runs them all). :func:`jaxmbd.simulate`,
:func:`jaxmbd.static_equilibrium` and :func:`jaxmbd.linearize` default to ``"joint"`` where
there is none (``jaxmbd.simulation.default_formulation``).

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
from ..sensors import sensor_kind
from ..tree import JointType
from ._stepper_base import AbstractJointStepper
from .contact_step import SUBSTEP_OPTIONS
from .from_model import tree_of_model
from .steppers import get_stepper


def built_model_gaps(model: Model) -> tuple[str, ...]:
    """What a model built in code holds that the joint formulation runs, but not yet as the
    absolute formulations do: reaction sensors where the body-joint graph has loops (a
    four-bar's reaction sensors disagree with its reactions); :func:`model_obstacles` adds
    constraint rows beyond the spanning tree (loops, drivers), slower in joint coordinates
    today. Joint limits, joints of several coordinates and the sensors of trees run as in
    rA (``tests/test_joint_limits.py``, ``tests/test_joint_builder_trees.py``). Models read from
    a file (MJCF, URDF) are robots, whose contact, limits and sensors are MuJoCo's and are
    checked against it in joint coordinates."""
    if model.tree is not None:
        return ()
    gaps = []
    if _reaction_sensors_on_loops(model):
        gaps.append("sensors: reaction sensors of loops disagree in joint coordinates")
    return tuple(gaps)


def _reaction_sensors_on_loops(model: Model) -> bool:
    """Whether ``model`` has sensors that read joint reactions and rows beyond the spanning
    tree of its body-joint graph (False where it gives no tree: :func:`model_obstacles`
    says so)."""
    sensors = model.sensors
    if sensors is None or not any(sensor_kind(k).needs_run for k in sensors.kinds):
        return False
    try:
        return bool(tree_of_model(model).loop_rows)
    except (ModelError, KeyError, ValueError):
        return False


def model_obstacles(model: Model) -> tuple[str, ...]:
    """Why the joint formulation cannot run ``model`` (its tree and its force elements), or
    does not yet run it as the absolute formulations do (:func:`built_model_gaps`)."""
    gaps = built_model_gaps(model)
    if model.tree is not None:
        tree = model.tree
    else:
        try:
            spanning = tree_of_model(model)
        except (ModelError, KeyError, ValueError) as error:
            return (*gaps, f"its body-joint graph gives no kinematic tree ({error})")
        tree = spanning.tree
        if spanning.loop_rows:
            # measured (slider crank, four-link, rk against rA gen_alpha, h = 1e-3): the loop
            # rows' program compiles 1.4-2x slower and steps at 0.3-0.4x rA's speed
            gaps += ("constraint rows beyond the tree (closed loops, drivers): rA runs them "
                     "faster today",)  # fmt: skip
    dofs = {
        name: JointType(kind).nv
        for name, kind in zip(tree.joint_names, tree.joint_type, strict=True)
    }
    reasons = []
    for element in model.forces:
        reason = element.joint_space_obstacle(dofs)
        if reason is not None:
            reasons.append(f"force element {type(element).__name__}: {reason}")
    return gaps + tuple(reasons)


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
    "built_model_gaps",
    "integrator_obstacles",
    "joint_space_obstacles",
    "model_obstacles",
]
