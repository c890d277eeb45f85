"""The joints that close loops as constraint rows of the tree state: the names of
:mod:`jaxmbd.joint_space.constraint_rows` for the loops of models built in code (every
constraint row of a run, equalities included, goes through the same functions)."""

from .constraint_rows import TreeConstraints as Loops
from .constraint_rows import constraint_jacobian as loop_jacobian
from .constraint_rows import constraint_residual as loop_residual
from .constraint_rows import constraint_terms as loop_terms
from .constraint_rows import independent_rows, project, solve_normal

__all__ = [
    "Loops",
    "independent_rows",
    "loop_jacobian",
    "loop_residual",
    "loop_terms",
    "project",
    "solve_normal",
]
