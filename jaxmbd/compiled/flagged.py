"""Work on the flagged items of an axis alone: the items whose flag is set gathered in front,
taken a block at a time in a loop of as many passes as they fill, their outputs placed back at
their items.

A step's collisions touch few of their candidates: dm_control's quadruped has 29 geom pairs
for MuJoCo's convex collider and 360 height-field prisms under its legs' windows, and a
walking step has 0-1 pairs within their bounding spheres and 0-8 prisms within their bounding
boxes. Under ``vmap`` every candidate pays the search loops of the slowest one; gathered, a
step pays for the blocks it fills, and the program holds one block's code whatever the
number of candidates. Gathers only (no scatter or sort), so the loops stay ones that XLA's
CPU backend compiles natively. Loops are not reverse-differentiable: callers take the
plain ``vmap`` over every item where derivatives go through.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .. import _config  # noqa: F401
from .batching import while_loop


def kth_set(count: jax.Array, wanted: jax.Array) -> jax.Array:
    """The index of the k-th set flag for each k of ``wanted`` (1-based), from the flags'
    running count ``count`` (a ``cumsum``): the first index whose count reaches k, the last
    index where there are fewer than k. A gather index, no scatter or sort: loops that use
    it stay ones XLA's CPU backend compiles natively."""
    return jnp.minimum(jnp.searchsorted(count, wanted), count.shape[0] - 1)


def on_flagged(fn, flags: jax.Array, items, *, block: int, fill):
    """``jax.vmap(fn)(*items)`` where ``flags`` (n,) is set, ``fill`` elsewhere.

    ``items``: a tuple of pytrees whose leaves have a leading axis of n; ``fill``: outputs
    for every item (the structure of ``jax.vmap(fn)``'s), kept where the flag is clear.
    The flagged items run ``block`` at a time (the last block padded with repeats of the
    last item, their outputs dropped), in a ``while_loop`` of as many passes as they fill
    (none when no flag is set)."""
    n = flags.shape[0]
    flags = lax.stop_gradient(flags)
    count = jnp.cumsum(flags.astype(jnp.int32))
    passes = -(-n // block)

    def gathered(k):
        index = kth_set(count, k * block + jnp.arange(1, block + 1, dtype=jnp.int32))
        return jax.vmap(fn)(*jax.tree.map(lambda x: x[index], items))

    shapes = jax.eval_shape(gathered, jnp.int32(0))
    store = jax.tree.map(
        lambda s: jnp.zeros((passes * block, *s.shape[1:]), s.dtype), shapes
    )  # fmt: skip

    def one_more(carry):
        k, store = carry
        out = gathered(k)
        return k + 1, jax.tree.map(
            lambda s, x: lax.dynamic_update_slice_in_dim(s, x, k * block, 0), store, out
        )

    needed = (count[-1] + block - 1) // block
    _, store = while_loop(lambda c: c[0] < needed, one_more, (jnp.int32(0), store), like=items)
    place = jnp.maximum(count - 1, 0)

    def back(s, f):
        on = flags.reshape((n,) + (1,) * (s.ndim - 1))
        return jnp.where(on, s[place], jnp.asarray(f, s.dtype))

    return jax.tree.map(back, store, fill)


def any_flagged(pred, flags: jax.Array, items, *, block: int) -> jax.Array:
    """Whether ``jax.vmap(pred)(*items)`` holds for any item whose ``flags`` (n,) is set.

    The flagged items run ``block`` at a time, as in :func:`on_flagged`, in a
    ``while_loop`` that stops after the first block where ``pred`` holds (no pass when no
    flag is set): a test of contact pays one block where the shapes sink deep, where every
    one of their contacts would cost a pass per block."""
    flags = lax.stop_gradient(flags)
    count = jnp.cumsum(flags.astype(jnp.int32))
    needed = (count[-1] + block - 1) // block

    def more(carry):
        k, found = carry
        return (k < needed) & ~found

    def once(carry):
        k, _ = carry
        wanted = k * block + jnp.arange(1, block + 1, dtype=jnp.int32)
        held = jax.vmap(pred)(*jax.tree.map(lambda x: x[kth_set(count, wanted)], items))
        return k + 1, jnp.any(held & (wanted <= count[-1]))

    return while_loop(more, once, (jnp.int32(0), jnp.zeros((), bool)), like=items)[1]
