"""Helpers of jaxmbd's ``custom_vmap`` rules (batched LU and solves, the Newton loop and its
refresh): the batching rule gets each argument with a flag saying whether it carries the
batch axis. And :func:`while_loop`, whose ``vmap`` is traced in one pass."""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_derivatives import SymbolicZero
from jax.extend import core as jcore


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


def none_batched(in_batched) -> bool:
    """True where no argument carries the batch axis: a rule must then return ``fn``'s
    unbatched outputs (:func:`unbatched`). JAX calls a rule so when it batches the
    derivative of a ``custom_vmap`` function whose tangents alone carry the batch axis
    (``jax.jacfwd`` of a function that calls it, ``jax.hessian`` of a ``simulate``): it
    vmaps the rule over the batched tangents and adds that axis to every output the rule
    marks batched, so a rule that broadcast its unbatched arguments would give its
    outputs the batch axis twice (jax 0.10.2, ``custom_vmap_jvp``)."""
    return not any(jax.tree_util.tree_leaves(in_batched))


def unbatched(fn, *args):
    """``fn(*args)`` with out-batched flags all False: the rule's answer when
    :func:`none_batched`. ``fn`` is the plain computation, not the ``custom_vmap``
    function itself (whose derivative would call the same rule again)."""
    out = fn(*args)
    return out, jax.tree_util.tree_map(lambda _: False, out)


def on_single_member(fn, *args):
    """``fn`` on the single member of a batch of one (every leaf of ``args`` batched), its
    outputs given the batch axis back. Under ``vmap`` of size 1 the vectorised batched
    paths would only add sequential kernels to the unbatched ones."""
    out = fn(*jax.tree_util.tree_map(lambda v: v[0], args))
    return jax.tree_util.tree_map(lambda v: v[None], out)


def all_batched(tree):
    """The out-batched flags of a rule whose outputs all carry the batch axis."""
    return jax.tree_util.tree_map(lambda _: True, tree)


#: Testing hook: when True, the rules below take their accelerator (GPU) paths on every
#: platform, so that a CPU-only test suite checks them against the CPU paths. Read when a
#: program is traced: clear JAX's caches (``jax.clear_caches()``) around a change.
ACCELERATOR_PATHS_EVERYWHERE = False


def cpu_or_accelerator(*args, cpu, accelerator):
    """``cpu(*args)`` in a program compiled for the CPU, ``accelerator(*args)`` for a GPU
    (or any other platform): chosen when the program is lowered
    (``jax.lax.platform_dependent``: both are traced, the compiler sees one), so one traced
    program serves both. The CPU paths of jaxmbd's batching rules loop over the members
    with single-member kernels (LAPACK, each member's matrices in cache); on a GPU such a
    loop would launch every member's kernels one after the other, so there the rules
    vectorise over the batch instead."""
    if ACCELERATOR_PATHS_EVERYWHERE:
        return accelerator(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=accelerator)


def with_plain_derivatives(rule, plain):
    """``plain`` batched by ``rule`` and differentiated as itself. Under ``vmap`` a
    ``custom_vmap`` calls ``rule(traced, axis_size, in_batched, *args)`` (``traced``:
    ``plain``'s program) where an argument carries the batch, and gives ``plain``'s
    unbatched outputs where none does (:func:`none_batched`). Its derivatives are a
    ``custom_jvp`` whose rule is the jvp of ``plain`` (and of its ``vmap``), so reverse mode
    reaches through it (JAX cannot linearise a ``custom_vmap`` for reverse mode). Only the
    arguments with tangents are differentiated: an instantiated zero tangent would put
    non-transposable loops (a while loop's) into the linear program.

    ``plain`` is traced once per call, to a jaxpr that the ``custom_vmap``, its rule and
    the JVP then evaluate: each traced the Python function again before (the cart-pole's
    10-step first gradient traced in 2.65 CPU-s instead of 2.90,
    ``python -m benchmarks.probes.controls_run_ab cartpole``)."""

    def call(*args):
        flat, in_tree = jax.tree_util.tree_flatten(args)
        closed, out_shape = jax.make_jaxpr(
            lambda *xs: plain(*jax.tree_util.tree_unflatten(in_tree, xs)), return_shape=True
        )(*flat)
        out_tree = jax.tree_util.tree_structure(out_shape)
        evaluate = jcore.jaxpr_as_fun(closed)

        def traced(*args):
            return jax.tree_util.tree_unflatten(
                out_tree, evaluate(*jax.tree_util.tree_leaves(args))
            )

        batched = jax.custom_batching.custom_vmap(traced)

        @batched.def_vmap
        def _rule(axis_size, in_batched, *args):
            if none_batched(in_batched):
                return unbatched(traced, *args)
            return rule(traced, axis_size, in_batched, *args)

        return _differentiable(batched, traced)(*args)

    return call


def _differentiable(batched, plain):
    """``batched`` with the derivatives of ``plain`` (:func:`with_plain_derivatives`)."""
    differentiable = jax.custom_jvp(batched)

    def _jvp(primals, tangents):
        live = [not isinstance(t, SymbolicZero) for t in tangents]

        def of_live(*xs):
            it = iter(xs)
            return plain(*[next(it) if on else p for p, on in zip(primals, live, strict=True)])

        pick = [p for p, on in zip(primals, live, strict=True) if on]
        dots = [t for t, on in zip(tangents, live, strict=True) if on]
        outs, dots_out = jax.jvp(of_live, pick, dots)
        return _batch_axis_first(outs), _batch_axis_first(dots_out)

    differentiable.defjvp(_jvp, symbolic_zeros=True)
    return differentiable


def _batch_axis_first(tree):
    """``tree`` unchanged, but under ``vmap`` with the batch as every leaf's axis 0.

    ``vmap`` of a ``custom_jvp`` takes its outputs' batch axes from whichever of the two
    functions it traced (jax 0.10.2, ``BatchTrace.process_custom_jvp_call``): the primal's
    (a ``custom_vmap`` rule's, axis 0) where a jaxpr was staged, the JVP's (the plain
    program's ``vmap``: a scan's stacked outputs carry it in axis 1) when it was later
    linearised. Transposing such a program then read one layout as the other. A reshape
    batches with the batch axis first, so the JVP's outputs agree with the primal's."""

    def first(x):
        x = jnp.asarray(x)
        return jax.lax.squeeze(jax.lax.reshape(x, (*x.shape, 1)), (x.ndim,))

    return jax.tree_util.tree_map(first, tree)


def while_loop(cond, body, init, *, like=()):
    """``lax.while_loop(cond, body, init)``, its carry made to depend (without changing its
    value) on every leaf of ``init`` and of ``like`` (values the body reads): under ``vmap``
    the whole carry then starts batched wherever any of them is, and JAX's batching rule
    batches the body once, where a carry that turns batched in the body costs a pass more,
    each pass batching the loops nested inside again (MuJoCo's convex collider, loops four
    deep, traced for a batch of pairs in twice the time of one pair, 1.3x with this). The extra
    operations fold away in XLA."""
    leaves = jax.tree.leaves((init, like))
    never = functools.reduce(operator.or_, [jnp.any(x != x) for x in leaves]) & False
    init = jax.tree.map(lambda x: jnp.where(never, x, x), init)
    return lax.while_loop(cond, body, init)
