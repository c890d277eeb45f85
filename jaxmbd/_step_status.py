"""A step's status from the statuses of its solves (traceable; the codes of
:mod:`jaxmbd.newton`: SUCCESS, MAX_ITERATIONS, NONFINITE, ILL_CONDITIONED, ...).

A step is only as good as its worst solve: it reports the first failure among them, and an
explicit integrator's step, which builds on the previous state without correcting it,
also reports the first failure of the run before it (the integrator carries it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .newton import NONFINITE, SUCCESS


def as_status(code) -> jax.Array:
    """A status code as the one dtype of carried statuses (int32): the branches of a
    ``lax.cond`` and a ``lax.scan`` carry must agree exactly."""
    return jnp.asarray(code, jnp.int32)


def first_failure(*statuses) -> jax.Array:
    """The first of ``statuses`` that is not SUCCESS, or SUCCESS (:func:`as_status`)."""
    result = as_status(SUCCESS)
    for status in reversed(statuses):
        status = as_status(status)
        result = jnp.where(status != SUCCESS, status, result)
    return result


def first_failure_along(statuses) -> jax.Array:
    """The first entry of a 1-D array of statuses (e.g. one per body) that is not SUCCESS,
    or SUCCESS: :func:`first_failure` without a Python loop over the entries."""
    statuses = as_status(statuses)
    failed = statuses != SUCCESS
    first = statuses[jnp.argmax(failed)] if statuses.size else as_status(SUCCESS)
    return jnp.where(jnp.any(failed), first, as_status(SUCCESS))


def finite_status(*arrays) -> jax.Array:
    """SUCCESS where every array is finite, else NONFINITE (NaN or inf never leaves a step
    unannounced)."""
    finite = jnp.asarray(True)
    for x in jax.tree_util.tree_leaves(arrays):
        finite = finite & jnp.all(jnp.isfinite(x))
    return as_status(jnp.where(finite, SUCCESS, NONFINITE))


__all__ = ["as_status", "finite_status", "first_failure", "first_failure_along"]
