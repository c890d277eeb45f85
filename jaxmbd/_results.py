"""``RESULTS``: what an analysis or a Newton solve ended with, as a JAX-compatible enum.

In the optimistix style: a run never raises inside ``jit``; it returns a result per step
(``Solution.status`` holds the integer codes, ``Solution.result`` the run's overall
:class:`RESULTS` item), and the public functions' ``throw=True`` turns a failure into a
:class:`~jaxmbd.SolverError` outside a trace or an equinox runtime error inside one.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _config  # noqa: F401


class RESULTS(eqx.Enumeration):
    """Outcome of a solve. The integer codes (``Solution.status``) follow the order here:
    0 successful, 1 max_iterations, 2 nonfinite, 3 ill_conditioned, 4 chart_singularity,
    5 invalid_parameters."""

    # the message is what a status prints (``RESULTS<success>``)
    successful = "success"
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

# The integer codes of the RESULTS items, as solvers return them inside jit (a status array
# is a plain integer array there: ``lax.cond`` branches and ``lax.scan`` carries hold it).
SUCCESS = int(RESULTS.successful._value)
MAX_ITERATIONS = int(RESULTS.max_iterations._value)
NONFINITE = int(RESULTS.nonfinite._value)
ILL_CONDITIONED = int(RESULTS.ill_conditioned._value)
CHART_SINGULARITY = int(RESULTS.chart_singularity._value)
INVALID_PARAMETERS = int(RESULTS.invalid_parameters._value)


def as_status(code) -> jax.Array:
    """A status code as the one dtype of carried statuses (int32): the branches of a
    ``lax.cond`` and a ``lax.scan`` carry must agree exactly."""
    return jnp.asarray(code, jnp.int32)


def first_failure(*statuses, axis=None) -> jax.Array:
    """The first failure, or SUCCESS where there is none (traceable).

    Several ``statuses`` (the solves of one step, a step and its predecessors): the first of
    them that is not SUCCESS, as :func:`as_status`; a step is only as good as its worst solve.
    One status array and ``axis`` (e.g. one status per body, or the steps between two saved
    rows): its first failed entry along ``axis``, in the array's own dtype."""
    if axis is None:
        result = as_status(SUCCESS)
        for status in reversed(statuses):
            status = as_status(status)
            result = jnp.where(status != SUCCESS, status, result)
        return result
    (status,) = statuses
    status = jnp.asarray(status)
    if status.shape[axis] == 0:
        return jnp.full(jnp.sum(status, axis=axis).shape, SUCCESS, status.dtype)
    failed = status != SUCCESS
    index = jnp.expand_dims(jnp.argmax(failed, axis=axis), axis)
    first = jnp.squeeze(jnp.take_along_axis(status, index, axis), axis)
    return jnp.where(jnp.any(failed, axis=axis), first, SUCCESS)


def finite_status(*arrays) -> jax.Array:
    """SUCCESS where every array is finite, else NONFINITE (NaN or inf never leaves a step
    unannounced)."""
    finite = jnp.asarray(True)
    for x in jax.tree_util.tree_leaves(arrays):
        finite = finite & jnp.all(jnp.isfinite(x))
    return as_status(jnp.where(finite, SUCCESS, NONFINITE))


def result_from_code(code) -> RESULTS:
    """The RESULTS item of integer status codes (any shape, e.g. one per batch member;
    traceable): the codes become the item's value."""
    code = jnp.asarray(code, dtype=RESULTS.successful._value.dtype)
    return eqx.tree_at(lambda item: item._value, RESULTS.successful, code)


def first_failed_step(status) -> tuple:
    """(RESULTS item, index) of the first failed entry of a status history (last axis is
    time); the index is -1 (and the item ``successful``) when every entry succeeded."""
    status = jnp.asarray(status)
    failed = status != SUCCESS
    index = jnp.where(jnp.any(failed, axis=-1), jnp.argmax(failed, axis=-1), -1)
    return result_from_code(first_failure(status, axis=-1)), index


def code_message(code: int) -> str:
    """The message of an integer status code (``converged`` for 0)."""
    if int(code) == SUCCESS:
        return "converged"
    if 0 <= int(code) < len(RESULT_ITEMS):
        return RESULTS[RESULT_ITEMS[int(code)]]
    return f"unknown status {int(code)}"


STATUS_MESSAGES = {code: code_message(code) for code in range(len(RESULT_ITEMS))}
