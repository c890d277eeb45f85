"""The ``"joint"`` formulation: a model's kinematic tree in joint coordinates, with its force
elements, loop-closing constraints and time steps."""

from .run import model_tree, run_joint_space, simulate_joint_space
from .steppers import (
    JOINT_STEPPERS,
    AbstractJointStepper,
    LinearlyImplicitEuler,
    RungeKutta4,
    SemiImplicitEuler,
)

__all__ = [
    "JOINT_STEPPERS",
    "AbstractJointStepper",
    "LinearlyImplicitEuler",
    "RungeKutta4",
    "SemiImplicitEuler",
    "model_tree",
    "run_joint_space",
    "simulate_joint_space",
]
