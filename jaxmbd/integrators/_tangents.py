"""Loop carries that enter a differentiated loop with their tangents already present.

JAX linearises a ``lax.scan`` by a fixed point over which carries have non-zero tangents
(``jax._src.lax.control_flow.loops._scan_linearize``): it linearises the whole loop body,
and again each time a carry's tangent turns non-zero, up to once per carry. A time step's
positions and velocities enter ``simulate``'s time scan with zero tangents when only the
controls, a mass or a force's parameters are differentiated (the start's positions do not
depend on them) and turn non-zero after one step; rkmk's stage scan, nested inside, runs
its own fixed point in each outer pass: the dm_control cart-pole's gradient linearised the
stage body six times and the time body twice. Tangents present from the start end each
fixed point after one pass (measured in benchmarks/results/bench_compile.md, section 7).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _inexact(x) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact) and jnp.size(x) > 0


def with_tangents(tree, witness):
    """``tree`` with -0.0 added to every inexact leaf, a -0.0 computed from the first
    entry of each inexact leaf of ``witness``: the values are unchanged to the bit
    (x + -0.0 = x for every x, signed zeros and NaN included; a non-finite witness entry
    is replaced by 0 first), and the derivative of the added term is zero, but in a
    differentiated program every leaf of ``tree`` now has a tangent as soon as one
    witness entry has one. Plain arithmetic, not a custom rule: under ``vmap`` the
    tangents are batched exactly like the values (a custom_jvp rule returning a batched
    zero for an unbatched carry broke a batched policy gradient). Pass as ``witness``
    quantities that depend on everything the loop is differentiated with respect to,
    e.g. a state's accelerations and multipliers; a few entries suffice."""
    probes = [jnp.ravel(x)[:1] for x in jax.tree_util.tree_leaves(witness) if _inexact(x)]
    if not probes:
        return tree
    dtype = jnp.result_type(*probes)
    probe = jnp.concatenate([p.astype(dtype) for p in probes])
    finite = jnp.where(jnp.isfinite(probe), probe, jnp.zeros_like(probe))
    negative_zero = -(0.0 * jnp.sum(jnp.abs(finite)))
    return jax.tree_util.tree_map(
        lambda x: x + negative_zero.astype(x.dtype) if _inexact(x) else x, tree
    )
