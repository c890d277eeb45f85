"""``vmap`` with the batch as the minor (last) axis of every array: :func:`batch_last`.

``jax.vmap`` puts a batch in front of each array (``(B, nb, 3, 3)``), and its batching
rules move it to the front wherever a primitive needs it there (a gather, a dot). The
small kernels of a model step then run over short minor axes (the 2-6 entries of one
member's row) and XLA's CPU fusions are full of transposes between layouts: the SIMD
lanes never see the members. :func:`batch_last` gives a function a ``custom_vmap`` rule
that evaluates its jaxpr with the batch appended as the last axis instead, so every
elementwise loop runs over contiguous members (``(nb, 3, 3, B)``) and a primitive that
reads or writes a member's leading axes (slices, gathers with constant indices,
reductions, concatenations, the time ``scan``) keeps it there. A primitive without such a
rule here is batched by ``jax.vmap`` itself (the batch moved to the front and back
around it): correct, just not faster.

The function's value and derivatives are those of the plain function: a ``custom_jvp``
differentiates the plain function (and its ``vmap``), so gradients of batched losses go
through JAX's own batching; the batch-last evaluation serves undifferentiated batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore

from .. import _config  # noqa: F401
from .batching import with_plain_derivatives

#: Elementwise primitives: one output of the operands' common shape (scalars broadcast).
_ELEMENTWISE = frozenset(
    """abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp conj convert_element_type
    copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt imag
    integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or
    population_count pow real reduce_precision rem round rsqrt select_n shift_left
    shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh xor""".split()
)

#: Primitives whose parameters name a member's own axes only (counted from the front):
#: with every operand carrying the batch last they apply unchanged.
_LEADING_AXES = frozenset(
    """argmax argmin concatenate cumlogsumexp cummax cummin cumprod cumsum optimization_barrier
    reduce_and reduce_max reduce_min reduce_or reduce_prod reduce_sum reduce_xor rev sort split
    squeeze stack unstack""".split()
)

#: Call-like primitives evaluated by recursion into their jaxpr (a custom derivative rule
#: is not needed: the batch-last evaluation is never differentiated).
_CALLS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}


def batch_last(fn, *, chunk: int | None = None):
    """``fn`` (positional array arguments, pytrees of arrays out) whose ``vmap`` evaluates
    its program with the batch as every array's last axis (see the module docstring).
    Unbatched calls and all derivatives are ``fn``'s own. ``chunk``: members evaluated
    together; a larger batch runs in chunks of this many, one after the other (None: all
    at once)."""

    def rule(plain, axis_size, in_batched, *args):
        flat, flags, closed, out_shape, out_flags = member_program(plain, args, in_batched)
        size = min(axis_size, chunk or axis_size)
        count = -(-axis_size // size)
        pad = count * size - axis_size

        def members(xs):  # (size, ...) each -> the outputs, (size, ...) each
            vals = [jnp.moveaxis(x, 0, -1) if b else x for x, b in zip(xs, flags, strict=True)]
            outs, fl = _evaluate(closed.jaxpr, closed.consts, vals, flags, size)
            return [
                jnp.moveaxis(x if b else _batched(x, size), -1, 0) if f else x
                for x, b, f in zip(outs, fl, out_flags, strict=True)
            ]

        if count == 1:
            outs = members(flat)
        else:  # chunks of members one after the other: each chunk's arrays stay in cache
            stacked = [x for x, b in zip(flat, flags, strict=True) if b]
            fixed = [x for x, b in zip(flat, flags, strict=True) if not b]

            def chunk_of(xs):
                it_b, it_f = iter(xs), iter(fixed)
                return members([next(it_b) if b else next(it_f) for b in flags])

            padded = [
                jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) if pad else x for x in stacked
            ]
            chunks = [x.reshape((count, size) + x.shape[1:]) for x in padded]
            outs = jax.lax.map(chunk_of, chunks)
            outs = [
                x.reshape((count * size,) + x.shape[2:])[:axis_size] if f else x[0]
                for x, f in zip(outs, out_flags, strict=True)
            ]
        tree = jax.tree_util.tree_structure(out_shape)
        return (
            jax.tree_util.tree_unflatten(tree, outs),
            jax.tree_util.tree_unflatten(tree, out_flags),
        )

    return with_plain_derivatives(rule, fn)


def member_program(plain, args, in_batched):
    """One member's program of ``plain`` at a ``custom_vmap`` rule's ``args``: the flat
    arguments (arrays), their batch flags, the member's closed jaxpr (batched arguments
    without their batch axis), its output structure and which outputs carry the batch."""
    flat, in_tree = jax.tree_util.tree_flatten(args)
    flags = jax.tree_util.tree_leaves(in_batched)
    flat = [jnp.asarray(x) for x in flat]
    member = [
        jax.ShapeDtypeStruct(x.shape[1:] if b else x.shape, x.dtype)
        for x, b in zip(flat, flags, strict=True)
    ]
    closed, out_shape = jax.make_jaxpr(
        lambda *xs: plain(*jax.tree_util.tree_unflatten(in_tree, xs)), return_shape=True
    )(*member)
    return flat, flags, closed, out_shape, _flags(closed.jaxpr, flags)


# ---- flags: which values carry the batch ---------------------------------------------------


def _call_jaxpr(eqn):
    """(jaxpr, consts) of a call-like equation."""
    inner = eqn.params[_CALLS[eqn.primitive.name]]
    if isinstance(inner, jcore.ClosedJaxpr):
        return inner.jaxpr, inner.consts
    return inner, ()


def _flags(jaxpr, in_flags) -> list[bool]:
    """Which outputs of ``jaxpr`` carry the batch, given which inputs do (constants never):
    an output is batched when anything it depends on is, loops to their fixed point."""
    env = {v: False for v in jaxpr.constvars}
    env.update(zip(jaxpr.invars, in_flags, strict=True))

    def read(v):
        return False if isinstance(v, jcore.Literal) else env[v]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        rule = _FLAG_RULES.get(eqn.primitive.name)
        outs = rule(eqn, ins) if rule is not None else None
        if outs is None:
            outs = [any(ins)] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _cond_flags(eqn, ins):
    """A cond on an unbatched predicate: its branches' union (a batched one: all)."""
    if ins[0]:
        return None
    return _union(_flags(br.jaxpr, ins[1:]) for br in eqn.params["branches"])


#: Which outputs of a control-flow or call equation carry the batch (None: any input's).
_FLAG_RULES = {
    "scan": lambda eqn, ins: _scan_flags(eqn, ins)[1],
    "while": lambda eqn, ins: _while_flags(eqn, ins)[0],
    "cond": _cond_flags,
    **{name: (lambda eqn, ins: _flags(_call_jaxpr(eqn)[0], ins)) for name in _CALLS},
}


def _union(flag_lists) -> list[bool]:
    """Elementwise ``or`` of equally long flag lists (the branches of a cond)."""
    lists = list(flag_lists)
    return [any(fs) for fs in zip(*lists, strict=True)]


def scan_sizes(params) -> tuple[int, int]:
    """(constants, carries) among a ``scan`` equation's inputs, which come in the order
    constants, carries, scanned inputs: jax < 0.11 names the counts, jax 0.11 gives the three
    groups' leaves (``ft_in``; carries that pass through unchanged are constants there)."""
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def _scan_flags(eqn, ins):
    """(carry flags, output flags (carry then stacked outputs)) of a scan at its fixed point."""
    p = eqn.params
    nc, nk = scan_sizes(p)
    consts, carry, xs = ins[:nc], list(ins[nc : nc + nk]), ins[nc + nk :]
    while True:
        out = _flags(p["jaxpr"].jaxpr, consts + carry + xs)
        new = [a or b for a, b in zip(carry, out[:nk], strict=True)]
        if new == carry:
            return carry, carry + out[nk:]
        carry = new


def _while_flags(eqn, ins):
    """(carry flags, predicate flag) of a while loop at its fixed point."""
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, carry = ins[:cn], ins[cn : cn + bn], list(ins[cn + bn :])
    while True:
        out = _flags(p["body_jaxpr"].jaxpr, bconsts + carry)
        new = [a or b for a, b in zip(carry, out, strict=True)]
        if new == carry:
            break
        carry = new
    (pred,) = _flags(p["cond_jaxpr"].jaxpr, cconsts + carry)
    return carry, pred


# ---- evaluation --------------------------------------------------------------------------


def _batched(x, size: int):
    """An unbatched value given the batch as its last axis (broadcast)."""
    x = jnp.asarray(x)
    return lax.broadcast_in_dim(x, x.shape + (size,), tuple(range(x.ndim)))


def _to_shape(x, batched: bool, shape, size: int):
    """``x`` broadcast to ``shape + (size,)``: an operand of an elementwise primitive, of
    the output's shape, a scalar, or of its rank with unit axes (implicitly broadcast)."""
    x = jnp.asarray(x)
    target = tuple(shape) + (size,)
    if x.shape == target:
        return x
    own = x.ndim - batched
    dims = tuple(range(own)) if own else ()
    if own and own != len(shape):
        raise ValueError(f"batch_last: operand of shape {x.shape} for an output {shape}")
    if not own:
        dims = ()
    if batched:
        dims = dims + (len(shape),)
    return lax.broadcast_in_dim(x, target, dims)


def _widened(values, flags, wanted, size: int) -> list:
    """``values`` with the batch given to those ``wanted`` batched that are not yet (a loop's
    carry, a branch's output)."""
    return [
        x if b or not w else _batched(x, size)
        for x, b, w in zip(values, flags, wanted, strict=True)
    ]


def _evaluate(jaxpr, consts, args, flags, size: int):
    """(outputs, their batched flags) of ``jaxpr`` on ``args`` whose batched ones carry the
    batch (of ``size``) as their last axis."""
    env = {}
    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = (c, False)
    for v, a, b in zip(jaxpr.invars, args, flags, strict=True):
        env[v] = (a, b)

    def read(v):
        return (v.val, False) if isinstance(v, jcore.Literal) else env[v]

    for eqn in jaxpr.eqns:
        read_in = [read(v) for v in eqn.invars]
        vals, bs = [x for x, _ in read_in], [b for _, b in read_in]
        if not any(bs):
            out = eqn.primitive.bind(*vals, **eqn.primitive.get_bind_params(eqn.params))
            outs = out if eqn.primitive.multiple_results else [out]
            out_bs = [False] * len(outs)
        else:
            outs, out_bs = _apply(eqn, vals, bs, size)
        for v, o, b in zip(eqn.outvars, outs, out_bs, strict=True):
            env[v] = (o, b)
    outs = [read(v) for v in jaxpr.outvars]
    return [o for o, _ in outs], [b for _, b in outs]


def _apply(eqn, vals, bs, size: int):
    """One equation with at least one batched operand: its outputs (all batched)."""
    name, params = eqn.primitive.name, eqn.params
    rule = _RULES.get(name)
    if rule is not None:
        out = rule(eqn, vals, bs, size)
        if out is not None:
            return out
    if name in _ELEMENTWISE:
        shape = eqn.outvars[0].aval.shape
        xs = [_to_shape(x, b, shape, size) for x, b in zip(vals, bs, strict=True)]
        return [eqn.primitive.bind(*xs, **params)], [True]
    if name in _LEADING_AXES:
        xs = [x if b else _batched(x, size) for x, b in zip(vals, bs, strict=True)]
        out = eqn.primitive.bind(*xs, **params)
        outs = out if eqn.primitive.multiple_results else [out]
        return outs, [True] * len(outs)
    if name in _CALLS:
        inner, consts = _call_jaxpr(eqn)
        return _evaluate(inner, consts, vals, bs, size)
    return _by_vmap(eqn, vals, bs)


def _by_vmap(eqn, vals, bs):
    """``jax.vmap``'s own batching of one equation, the batch moved to the front and back."""
    front = [jnp.moveaxis(x, -1, 0) if b else x for x, b in zip(vals, bs, strict=True)]

    def one(*xs):
        out = eqn.primitive.bind(*xs, **eqn.primitive.get_bind_params(eqn.params))
        return out if eqn.primitive.multiple_results else [out]

    outs = jax.vmap(one, in_axes=[0 if b else None for b in bs])(*front)
    return [jnp.moveaxis(o, 0, -1) for o in outs], [True] * len(outs)


def _rule_broadcast_in_dim(eqn, vals, bs, size):
    if any(bs[1:]):
        return None
    p = eqn.params
    shape = tuple(p["shape"]) + (size,)
    dims = tuple(p["broadcast_dimensions"]) + (len(p["shape"]),)
    return [lax.broadcast_in_dim(vals[0], shape, dims)], [True]


def _rule_reshape(eqn, vals, bs, size):
    p = eqn.params
    if len(vals) > 1 or p.get("dimensions") is not None:
        return None
    return [jnp.reshape(vals[0], tuple(p["new_sizes"]) + (size,))], [True]


def _rule_slice(eqn, vals, bs, size):
    p = eqn.params
    strides = None if p["strides"] is None else tuple(p["strides"]) + (1,)
    out = lax.slice(vals[0], tuple(p["start_indices"]) + (0,),
                    tuple(p["limit_indices"]) + (size,), strides)  # fmt: skip
    return [out], [True]


def _rule_pad(eqn, vals, bs, size):
    if bs[1]:
        return None
    config = tuple(eqn.params["padding_config"]) + ((0, 0, 0),)
    return [lax.pad(vals[0], vals[1], config)], [True]


def _rule_transpose(eqn, vals, bs, size):
    perm = tuple(eqn.params["permutation"])
    return [lax.transpose(vals[0], perm + (len(perm),))], [True]


def _rule_gather(eqn, vals, bs, size):
    if bs[1]:
        return None
    p = eqn.params
    dn = p["dimension_numbers"]
    rank = len(eqn.outvars[0].aval.shape)
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(dn.offset_dims) + (rank,),
        collapsed_slice_dims=dn.collapsed_slice_dims,
        start_index_map=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.start_indices_batching_dims,
    )
    params = dict(p, dimension_numbers=dn, slice_sizes=tuple(p["slice_sizes"]) + (size,))
    return [eqn.primitive.bind(vals[0], vals[1], **params)], [True]


def _rule_dynamic_slice(eqn, vals, bs, size):
    if any(bs[1:]):
        return None
    starts = vals[1:]
    zero = jnp.zeros((), jnp.asarray(starts[0]).dtype if starts else jnp.int32)
    sizes = tuple(eqn.params["slice_sizes"]) + (size,)
    return [lax.dynamic_slice(vals[0], [*starts, zero], sizes)], [True]


def _rule_dynamic_update_slice(eqn, vals, bs, size):
    if any(bs[2:]):
        return None
    operand = vals[0] if bs[0] else _batched(vals[0], size)
    update = vals[1] if bs[1] else _batched(vals[1], size)
    starts = vals[2:]
    zero = jnp.zeros((), jnp.asarray(starts[0]).dtype if starts else jnp.int32)
    return [lax.dynamic_update_slice(operand, update, [*starts, zero])], [True]


def _rule_dot_general(eqn, vals, bs, size):
    """A product of a member's small arrays as a broadcast product and a sum over the
    contracted axes, the batch last throughout (``dot_general`` would put it among the
    output's leading axes, a transpose after)."""
    p = eqn.params
    (lc, rc), (lb, rb) = p["dimension_numbers"]
    lhs, rhs = vals
    nl, nr = lhs.ndim - bs[0], rhs.ndim - bs[1]
    lf = [a for a in range(nl) if a not in lc and a not in lb]
    rf = [a for a in range(nr) if a not in rc and a not in rb]
    dtype = eqn.outvars[0].aval.dtype

    def arranged(x, batched, own_batch, own_free, own_contract, free_before, free_after):
        # (batch..., free of lhs..., free of rhs..., contracted..., B or 1)
        x = x if batched else x[..., None]
        x = lax.transpose(x, (*own_batch, *own_free, *own_contract, x.ndim - 1))
        shape = list(x.shape)
        b, f = len(own_batch), len(own_free)
        shape[b + f : b + f] = [1] * free_after
        shape[b:b] = [1] * free_before
        return jnp.reshape(x, shape).astype(dtype)

    a = arranged(lhs, bs[0], lb, lf, lc, 0, len(rf))
    b = arranged(rhs, bs[1], rb, rf, rc, len(lf), 0)
    first = len(lb) + len(lf) + len(rf)
    out = jnp.sum(a * b, axis=tuple(range(first, first + len(lc))))
    if out.shape[-1] != size:
        out = _batched(out[..., 0], size)
    return [out], [True]


def _rule_scan(eqn, vals, bs, size):
    p = eqn.params
    nc, nk = scan_sizes(p)
    carry_flags, out_flags = _scan_flags(eqn, bs)
    consts, cflags = vals[:nc], bs[:nc]
    init = _widened(vals[nc : nc + nk], bs[nc : nc + nk], carry_flags, size)
    xs, xflags = vals[nc + nk :], bs[nc + nk :]
    body = p["jaxpr"]

    def step(carry, x):
        outs, flags = _evaluate(body.jaxpr, body.consts, [*consts, *carry, *x],
                                [*cflags, *carry_flags, *xflags], size)  # fmt: skip
        new = _widened(outs[:nk], flags[:nk], carry_flags, size)
        return new, _widened(outs[nk:], flags[nk:], out_flags[nk:], size)

    carry, ys = lax.scan(step, init, xs, length=p["length"], reverse=p["reverse"],
                         unroll=p["unroll"])  # fmt: skip
    return [*carry, *ys], out_flags


def _rule_while(eqn, vals, bs, size):
    p = eqn.params
    carry_flags, pred = _while_flags(eqn, bs)
    if pred:  # members stop at different iterations: vmap's masked loop
        return None
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts = vals[:cn], vals[cn : cn + bn]
    cflags, bflags = bs[:cn], bs[cn : cn + bn]
    init = _widened(vals[cn + bn :], bs[cn + bn :], carry_flags, size)
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]

    def keep_going(carry):
        (out,), _ = _evaluate(cond.jaxpr, cond.consts, [*cconsts, *carry],
                              [*cflags, *carry_flags], size)  # fmt: skip
        return out

    def step(carry):
        outs, flags = _evaluate(body.jaxpr, body.consts, [*bconsts, *carry],
                                [*bflags, *carry_flags], size)  # fmt: skip
        return _widened(outs, flags, carry_flags, size)

    return list(lax.while_loop(keep_going, step, init)), carry_flags


def _rule_cond(eqn, vals, bs, size):
    if bs[0]:  # members take different branches: vmap's select of both
        return None
    branches = eqn.params["branches"]
    ops, oflags = vals[1:], bs[1:]
    out_flags = _union(_flags(br.jaxpr, oflags) for br in branches)

    def branch(closed):
        def run(*xs):
            outs, flags = _evaluate(closed.jaxpr, closed.consts, list(xs), oflags, size)
            return _widened(outs, flags, out_flags, size)

        return run

    return list(lax.switch(vals[0], [branch(br) for br in branches], *ops)), out_flags


_RULES = {
    "broadcast_in_dim": _rule_broadcast_in_dim,
    "reshape": _rule_reshape,
    "slice": _rule_slice,
    "pad": _rule_pad,
    "transpose": _rule_transpose,
    "gather": _rule_gather,
    "dynamic_slice": _rule_dynamic_slice,
    "dynamic_update_slice": _rule_dynamic_update_slice,
    "dot_general": _rule_dot_general,
    "scan": _rule_scan,
    "while": _rule_while,
    "cond": _rule_cond,
}
