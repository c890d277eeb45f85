"""Helpers of jaxmbd's ``custom_vmap`` rules (batched LU and solves, the Newton loop and its
refresh): the batching rule gets each argument with a flag saying whether it carries the
batch axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def broadcast_batched(axis_size: int, args: tuple, in_batched) -> tuple:
    """The rule's arguments ``args`` with the batch axis on every leaf: the unbatched ones
    (flag False in ``in_batched``, one tree of flags per argument) broadcast to
    ``axis_size`` members."""

    def broadcast(v, batched):
        return v if batched else jnp.broadcast_to(v, (axis_size,) + jnp.shape(v))

    return tuple(
        jax.tree_util.tree_map(broadcast, arg, flags)
        for arg, flags in zip(args, in_batched, strict=True)
    )


def on_single_member(fn, *args):
    """``fn`` on the single member of a batch of one (every leaf of ``args`` batched), its
    outputs given the batch axis back. Under ``vmap`` of size 1 the vectorised batched
    paths would only add sequential kernels to the unbatched ones."""
    out = fn(*jax.tree_util.tree_map(lambda v: v[0], args))
    return jax.tree_util.tree_map(lambda v: v[None], out)


def all_batched(tree):
    """The out-batched flags of a rule whose outputs all carry the batch axis."""
    return jax.tree_util.tree_map(lambda _: True, tree)
