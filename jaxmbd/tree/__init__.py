"""Kinematic trees in joint coordinates (the ``"joint"`` formulation's kinematics and
dynamics)."""

from ._elementwise import assemble, cholesky_solve, picked_sum
from .articulated import forward_dynamics, uses_articulated
from .dynamics import bias_forces, body_velocities, body_wrenches, joint_forces, mass_matrix
from .from_mujoco import MujocoTree, body_owners, tree_from_mujoco
from .kinematics import TreePoses, integrate_positions, poses, velocities
from .mass_factor import dof_parents, ltdl_factor, ltdl_solve, mass_solve, uses_ltdl
from .topology import WORLD, JointType, KinematicTree

__all__ = [
    "WORLD",
    "JointType",
    "KinematicTree",
    "MujocoTree",
    "TreePoses",
    "assemble",
    "bias_forces",
    "cholesky_solve",
    "body_owners",
    "body_velocities",
    "body_wrenches",
    "integrate_positions",
    "joint_forces",
    "dof_parents",
    "forward_dynamics",
    "ltdl_factor",
    "ltdl_solve",
    "mass_matrix",
    "mass_solve",
    "uses_articulated",
    "uses_ltdl",
    "picked_sum",
    "poses",
    "tree_from_mujoco",
    "velocities",
]
