"""Newton iteration with status codes and implicit-function-theorem gradients.

The iteration itself never sees gradients (its inputs are ``stop_gradient``-ed), so memory
does not grow with the number of iterations (docs/design.md, principle 5). Derivatives of the root
come from a ``jax.custom_jvp`` rule applied in the tangent space at the converged point
x*: the root xi = 0 of F(x* (+) xi, params) is differentiated with respect to ``params``
and mapped back through the retraction (+) (``A exp(xi~)`` for rA orientations). This works
for ``jax.grad``, ``jax.jacfwd``, ``jax.jacrev`` and under ``jax.vmap``.

One module per job: the acceptance test (``_convergence``), the factorisation and its
condition estimate (``_linear``), the iteration (``_iterate``, with the batched loops of
``_loops``), implicit derivatives (``_implicit``) and the solver objects (``_policies``,
``_damped``). Statuses are the integer codes of :class:`~jaxmbd.RESULTS`
(:mod:`jaxmbd._results`).
"""

from .._results import (
    CHART_SINGULARITY,
    ILL_CONDITIONED,
    MAX_ITERATIONS,
    NONFINITE,
    STATUS_MESSAGES,
    SUCCESS,
)
from ._convergence import (
    FLOOR_GAIN_MAX,
    ROUNDOFF,
    Scale,
    StepTest,
    default_scale,
    group_scale,
    residual_test,
    step_test,
)
from ._damped import DampedNewton
from ._implicit import ROOT, ROOT_FACTORS, SAVED_FOR_ADJOINT, implicit_root
from ._iterate import NewtonInfo, newton_iterate, newton_iterate_reusing
from ._linear import (
    INVERSE_MAX,
    RCOND_MIN,
    CallerMatrix,
    IterationMatrix,
    LinearSolution,
    LUFactors,
    chart_solve,
    checked_solver,
    condition_status,
    empty_lu_factors,
    empty_matrix,
    factor_matrix,
    lu_factors,
    lu_factors_solve,
    lu_solver,
    matrix_solve,
    placeholder_like,
    row_tolerances,
    solve_linear,
    solve_with_condition,
)
from ._policies import (
    NEWTON_METHODS,
    AbstractNewton,
    FullNewton,
    ModifiedNewton,
    ReusedNewton,
    get_newton,
)

__all__ = [
    "CHART_SINGULARITY",
    "FLOOR_GAIN_MAX",
    "ILL_CONDITIONED",
    "INVERSE_MAX",
    "MAX_ITERATIONS",
    "NEWTON_METHODS",
    "NONFINITE",
    "RCOND_MIN",
    "ROOT",
    "ROOT_FACTORS",
    "ROUNDOFF",
    "SAVED_FOR_ADJOINT",
    "STATUS_MESSAGES",
    "SUCCESS",
    "AbstractNewton",
    "CallerMatrix",
    "DampedNewton",
    "FullNewton",
    "IterationMatrix",
    "LUFactors",
    "LinearSolution",
    "ModifiedNewton",
    "NewtonInfo",
    "ReusedNewton",
    "Scale",
    "StepTest",
    "chart_solve",
    "checked_solver",
    "condition_status",
    "default_scale",
    "empty_lu_factors",
    "empty_matrix",
    "factor_matrix",
    "get_newton",
    "group_scale",
    "implicit_root",
    "lu_factors",
    "lu_factors_solve",
    "lu_solver",
    "matrix_solve",
    "newton_iterate",
    "newton_iterate_reusing",
    "placeholder_like",
    "residual_test",
    "row_tolerances",
    "solve_linear",
    "solve_with_condition",
    "step_test",
]
