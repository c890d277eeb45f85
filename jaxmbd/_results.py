"""``RESULTS``: what an analysis or a Newton solve ended with, as a JAX-compatible enum.

In the optimistix style: a run never raises inside ``jit``; it returns a result per step
(``Solution.status`` holds the integer codes, ``Solution.result`` the run's overall
:class:`RESULTS` item), and the public functions' ``throw=True`` turns a failure into a
:class:`~jaxmbd.SolverError` outside a trace or an equinox runtime error inside one.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp


class RESULTS(eqx.Enumeration):
    """Outcome of a solve. The integer codes (``Solution.status``) follow the order here:
    0 successful, 1 max_iterations, 2 nonfinite, 3 ill_conditioned, 4 chart_singularity,
    5 invalid_parameters."""

    successful = ""
    max_iterations = (
        "Newton iteration did not converge within the iteration limit (both the scaled step "
        "test and the scaled residual test must pass)"
    )
    nonfinite = "singular iteration matrix or non-finite residual"
    ill_conditioned = (
        "near-singular iteration matrix: the equilibrated matrix's smallest LU pivot is below "
        "RCOND_MIN times its largest (redundant or conflicting constraints, or a singular "
        "configuration); the root would not be trustworthy"
    )
    chart_singularity = (
        "the ZXZ Euler-angle chart singularity (theta = 0 or pi) could not be stepped over: "
        "the least-squares velocities or accelerations fail the chart-free constraints "
        "G v = nu or G a = gamma, or the multipliers are not finite"
    )
    invalid_parameters = (
        "invalid model parameters (checked at the start of the run): a mass <= 0, an "
        "inertia not symmetric positive semi-definite or breaking the triangle inequality "
        "of its principal moments, a contact friction, stiffness or damping < 0, a "
        "restitution outside [0, 1], or a joint-limit stiffness or damping < 0; the run's "
        "values are not to be used"
    )


#: RESULTS items in code order: ``RESULT_ITEMS[code]``.
RESULT_ITEMS = (
    RESULTS.successful,
    RESULTS.max_iterations,
    RESULTS.nonfinite,
    RESULTS.ill_conditioned,
    RESULTS.chart_singularity,
    RESULTS.invalid_parameters,
)


def result_from_code(code) -> RESULTS:
    """The RESULTS item of integer status codes (any shape, e.g. one per batch member;
    traceable): the codes become the item's value."""
    code = jnp.asarray(code, dtype=RESULTS.successful._value.dtype)
    return eqx.tree_at(lambda item: item._value, RESULTS.successful, code)


def first_failure(status) -> tuple:
    """(RESULTS item, index) of the first failed entry of a status history (last axis is
    time); the index is -1 (and the item ``successful``) when every entry succeeded."""
    status = jnp.asarray(status)
    failed = status != 0
    index = jnp.argmax(failed, axis=-1)
    any_failed = jnp.any(failed, axis=-1)
    code = jnp.where(any_failed, jnp.take_along_axis(status, index[..., None], -1)[..., 0], 0)
    return result_from_code(code), jnp.where(any_failed, index, -1)


def code_message(code: int) -> str:
    """The message of an integer status code (``converged`` for 0)."""
    if 0 <= int(code) < len(RESULT_ITEMS):
        return RESULTS[RESULT_ITEMS[int(code)]] or "converged"
    return f"unknown status {int(code)}"
