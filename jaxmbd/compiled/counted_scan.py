"""Time loops whose number of iterations is an input of the compiled program.

A ``lax.scan`` of n steps is a program per n: each new horizon of a run compiles again,
or a program of a fixed length runs steps nobody asked for. :func:`counted_scan` runs
``count`` iterations, an array argument, and writes their outputs into buffers of a fixed
number of rows, so one compiled program serves every horizon up to that many rows at the
cost of the iterations asked. A loop of unknown length has no reverse-mode derivative
(JAX differentiates ``while_loop`` in forward mode only): it serves the runs of concrete
inputs outside any transformation, and a transformation gets the plain scan."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def strong_types(tree):
    """``tree`` with its arrays' weak types made strong (same dtypes and values): the types
    a loop's carry has. A carry passed from one call of a :func:`counted_scan` program to the
    next then has one type, and the program one trace."""
    return jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype), tree)


def counted_scan(step, carry, first, count, rows: int, stride: int = 1):
    """``lax.scan(step, carry, first + stride * arange(count))`` with ``count`` an input of
    the program, at most ``rows`` (static): returns the final carry and ``rows`` rows of
    ``step``'s outputs, those from ``count`` on zero. ``step(carry, k)`` returns the carry
    and a pytree of outputs (None leaves allowed)."""
    # one trace of ``step``: the shapes' trace is cached and the loop's body reuses it,
    # which needs the types the body sees (no weak types: the loop's carry has none)
    first = strong_types(jnp.asarray(first))
    carry = strong_types(carry)
    step = jax.jit(step)
    shapes = jax.eval_shape(lambda carry: step(carry, first)[1], carry)
    outs = jax.tree_util.tree_map(lambda s: jnp.zeros((rows, *s.shape), s.dtype), shapes)

    def body(j, state):
        carry, outs = state
        carry, out = step(carry, (first + j * stride).astype(first.dtype))
        outs = jax.tree_util.tree_map(
            lambda buffer, x: jax.lax.dynamic_update_index_in_dim(buffer, x, j, 0), outs, out
        )
        return carry, outs

    count = jnp.asarray(count, first.dtype)
    return jax.lax.fori_loop(jnp.zeros_like(count), count, body, (carry, outs))


__all__ = ["counted_scan", "strong_types"]
