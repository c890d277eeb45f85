"""Batched loops of the Newton iteration that keep a stored matrix cheap under ``vmap``:
refresh it only for the members that need one (:func:`refresh_where`) and never select it
between finished and running members (:func:`while_loop_keeping`)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ..compiled.batching import (
    all_batched,
    broadcast_batched,
    cpu_or_accelerator,
    none_batched,
    on_single_member,
    unbatched,
)


def refresh_where(stale, x, old, factor: Callable):
    """``factor(x)`` where ``stale``, else ``old``. Unbatched: a ``lax.cond``. Under ``vmap``
    (custom rule, :func:`_refresh_where_p`) on a CPU only the stale members are factored,
    on a GPU the whole batch when any member is stale: the reused
    matrix stays cheap in a batch instead of paying a Jacobian and a factorisation per
    iteration for every member (vmap of ``cond`` runs both branches)."""
    fn, consts = jax.closure_convert(factor, x)
    return _refresh_where_p(stale, x, old, consts, fn)


def _refresh_where_p(stale, x, old, consts, fn):
    def plain(stale, x, old, consts):
        return jax.lax.cond(stale, lambda: fn(x, *consts), lambda: old)

    run = jax.custom_batching.custom_vmap(plain)

    @run.def_vmap
    def _rule(axis_size, in_batched, stale, x, old, consts):
        if none_batched(in_batched):
            return unbatched(plain, stale, x, old, consts)
        stale, x, old, consts = broadcast_batched(axis_size, (stale, x, old, consts), in_batched)
        if axis_size == 1:  # a batch of one: the unbatched cond
            out = on_single_member(run, stale, x, old, consts)
            return out, all_batched(out)

        # The stale members are factored one at a time, each by the unbatched kernels (the
        # Jacobian, LAPACK's getrf, a few dozen XLA kernels for the inverse): a refresh
        # costs in proportion to the members that need one, not to the batch (in a large
        # batch some member is nearly always stale, each one about every 60 steps for the
        # double pendulum). Measured (scratch simulate_batch runs in alternating
        # processes, gen_alpha, h = 1e-3, two host devices, model-steps/s): double
        # pendulum batch 256 290k with slots of 4 stale members factored together by a
        # batched Gauss-Jordan elimination, 327k one at a time (10 steps: 103k -> 176k,
        # the first step factors every member); slider crank batch 256 71k -> 79k. (A
        # ``lax.cond`` choosing one vmap of the whole batch when many are stale lost
        # 15 %: the kept matrices were copied through it at every iteration.)
        def one_at_a_time(stale, x, old, consts):
            def one(carry):
                pending, matrices = carry
                k = jnp.argmax(pending)
                member = jax.tree_util.tree_map(lambda v: v[k], (x, consts))
                new = fn(member[0], *member[1])
                matrices = jax.tree_util.tree_map(lambda m, v: m.at[k].set(v), matrices, new)
                return pending.at[k].set(False), matrices

            return jax.lax.while_loop(lambda c: jnp.any(c[0]), one, (stale, old))[1]

        # On a GPU a loop over the stale members would launch their kernels one member
        # after the other; there the whole batch is factored in one vmap (the same
        # kernels, each over every member) when any member is stale, and the fresh
        # matrices are kept where stale.
        def whole_batch(stale, x, old, consts):
            def refresh():
                new = jax.vmap(fn)(x, *consts)

                def select(a, b):
                    return jnp.where(stale.reshape(stale.shape + (1,) * (a.ndim - 1)), a, b)

                return jax.tree_util.tree_map(select, new, old)

            return jax.lax.cond(jnp.any(stale), refresh, lambda: old)

        out = cpu_or_accelerator(stale, x, old, consts, cpu=one_at_a_time, accelerator=whole_batch)
        return out, all_batched(out)

    return run(stale, x, old, consts)


def while_loop_keeping(cond, body, init, keep: frozenset):
    """``lax.while_loop(cond, body, init)`` whose batching rule does not select the carry
    entries ``keep`` (indices into the carry tuple) between a member's finished and new
    values. vmap of a while loop keeps every finished member's carry by a select over the
    whole carry at every iteration; for the kept Newton matrix (n x n per member) that
    select and its copy were about a tenth of a batched double pendulum's time (profile of
    simulate_batch, 128 members). The entries in ``keep`` must be ones the body leaves
    unchanged for a member whose ``cond`` is false (the kept matrix: refreshed only where
    the member still iterates)."""
    body_fn, body_consts = jax.closure_convert(body, init)
    cond_fn, cond_consts = jax.closure_convert(cond, init)

    def plain(init, body_consts, cond_consts):
        def cond_(c):
            return cond_fn(c, *cond_consts)

        def body_(c):
            return body_fn(c, *body_consts)

        return jax.lax.while_loop(cond_, body_, init)

    loop = jax.custom_batching.custom_vmap(plain)

    @loop.def_vmap
    def _rule(axis_size, in_batched, init, body_consts, cond_consts):
        if none_batched(in_batched):
            return unbatched(plain, init, body_consts, cond_consts)
        init, body_consts, cond_consts = broadcast_batched(
            axis_size, (init, body_consts, cond_consts), in_batched
        )
        if axis_size == 1:  # a batch of one: the plain loop on the single member
            out = on_single_member(loop, init, body_consts, cond_consts)
            return out, all_batched(out)

        def active(c):
            return jax.vmap(lambda c_, k: cond_fn(c_, *k))(c, cond_consts)

        def step(c):
            running = active(c)
            new = jax.vmap(lambda c_, k: body_fn(c_, *k))(c, body_consts)

            def select(a, b):
                where = running.reshape(running.shape + (1,) * (a.ndim - 1))
                return jnp.where(where, a, b)

            items = (
                n if i in keep else jax.tree_util.tree_map(select, n, o)
                for i, (n, o) in enumerate(zip(new, c, strict=True))
            )
            return type(new)(*items) if hasattr(new, "_fields") else tuple(items)

        out = jax.lax.while_loop(lambda c: jnp.any(active(c)), step, init)
        return out, all_batched(out)

    return loop(init, body_consts, cond_consts)
