"""The ``"joint"`` formulation: a model's kinematic tree in joint coordinates, with its force
elements, loop-closing constraints and time steps."""

from .observe import read_sensors
from .reactions import (
    body_loads,
    constraint_wrenches,
    transmitted_wrenches,
    tree_joint_wrenches,
)
from .run import (
    independent_loop_rows,
    model_tree,
    planned_rows,
    rest_multipliers,
    run_joint_space,
    run_planned_joint_space,
    tree_multipliers,
    tree_wrenches,
)
from .state import JointState, advance, advance_and_last_start, initial_joint_state
from .steppers import (
    JOINT_STEPPERS,
    AbstractJointStepper,
    LinearlyImplicitEuler,
    RungeKutta4,
    SemiImplicitEuler,
    step_state,
)

__all__ = [
    "JOINT_STEPPERS",
    "AbstractJointStepper",
    "JointState",
    "LinearlyImplicitEuler",
    "RungeKutta4",
    "SemiImplicitEuler",
    "advance",
    "advance_and_last_start",
    "body_loads",
    "constraint_wrenches",
    "independent_loop_rows",
    "initial_joint_state",
    "model_tree",
    "planned_rows",
    "read_sensors",
    "rest_multipliers",
    "run_joint_space",
    "run_planned_joint_space",
    "step_state",
    "tree_multipliers",
    "tree_wrenches",
    "transmitted_wrenches",
    "tree_joint_wrenches",
]
