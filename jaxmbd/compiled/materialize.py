"""Values computed once: a boundary that XLA's CPU fusion does not cross.

XLA's CPU backend fuses a producer into each consumer that reads it, repeating its
arithmetic there; a consumer that reads the producer at several indices (a cross product
reads each component twice) repeats it again. The contact element's per-slot forces feed
the bodies' forces and, through cross products, their moments: under the implicit steps'
forward mode (one tangent per dof) the repeated force law was most of the step's time;
the tile evaluator (:mod:`jaxmbd.compiled.batch_lanes`) buffers a batch's shared entries so.
``lax.optimization_barrier`` does not stop this (XLA removes it before fusion); the outputs
of a conditional are buffers, so :func:`materialized` passes the values through a
``lax.cond`` whose branches both return them unchanged. Its predicate, a finiteness
check of one of the values, is never known at compile time. Under ``vmap`` with a batched
predicate JAX selects between the branches instead: the same values, no boundary."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def materialized(values):
    """``values`` (a pytree of arrays), unchanged, computed once (module docstring)."""
    sized = [x for x in jax.tree.leaves(values) if jnp.size(x)]
    if not sized:
        return values
    first = jnp.ravel(sized[0])[0]
    # identical branches would be merged away: the other one multiplies by one (exact)
    return jax.lax.cond(jnp.isfinite(first), lambda v: v,
                        lambda v: jax.tree.map(lambda x: x * 1, v), values)  # fmt: skip
