"""``vmap`` as per-member scalar code over lanes of members: :func:`batch_lanes`.

XLA's CPU backend compiles each fusion into a loop nest in the layout's order. With the
members in the major axis (``jax.vmap``'s batching) the small loops of one member are
unrolled and their common terms shared, but the arithmetic is scalar; with the members in
the minor axis (:mod:`jaxmbd.compiled.batch_last`) the innermost loop runs in SIMD lanes, but a
fusion recomputes its fused producers for every entry of a member's small axes (a 6x6
spatial inertia's products once per entry), which costs what the lanes gain.

:func:`batch_lanes` evaluates a function's jaxpr with every array of one member taken
apart at trace time into its entries (a NumPy object array of scalars), each entry an
array over the members of shape ``(T, LANES)``: tiles of :data:`LANES` members, as many
tiles as it takes. Every operation of the member's program is then a scalar operation on
those tiles: elementwise loops whose innermost axis is a SIMD register's width of
members, with no transposes, gathers or concatenations left (slices, reshapes, gathers
with constant indices and concatenations only rearrange entries at trace time), and each
entry computed once. Products with a constant 0 or 1 fold at trace time (the result
differs from the program's only in the sign of a zero, or where an entry is not finite).

Equations whose outputs have more than :data:`MAX_ENTRIES` entries, those without a
scalar rule here (while loops, conds, sorts) and the program's final rearrangements run on
the whole arrays, the members last, by :mod:`jaxmbd.compiled.batch_last`'s rules. A program of
more than :data:`MAX_OPERATIONS` scalar operations (a large tree, where XLA's compile time
would grow with them) is evaluated by ``jax.vmap`` instead (on the CPU in chunks of
:data:`VMAP_CHUNK` members).

An entry that several equations read, with :data:`MATERIALIZE_CONE` operations or more
behind it, is computed once: such entries leave a conditional as buffers in small groups
(:data:`MATERIALIZE_GROUP`), where XLA's CPU fusion would compute them again inside every
fusion that reads them.

Values are the plain function's to round-off. Derivatives are the plain function's
(:func:`jaxmbd.compiled.batching.with_plain_derivatives`, a ``custom_jvp``; JAX cannot linearise
a ``custom_vmap`` function for reverse mode): single models' gradients, ``vmap`` of them,
gradients of batched losses and forward mode alike.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from .. import _config  # noqa: F401
from .batch_last import (
    _CALLS,
    _ELEMENTWISE,
    _apply,
    _call_jaxpr,
    _scan_flags,
    member_program,
    scan_sizes,
)
from .batching import all_batched, with_plain_derivatives
from .materialize import materialized

#: Members in one tile's minor axis: an AVX2 register of float64 (XLA's CPU backend
#: vectorises for 256-bit registers by default).
LANES = 4
#: Equations with more output entries than this run on whole arrays.
MAX_ENTRIES = 1024
#: Programs whose equations' outputs hold more entries than this (inner programs counted
#: once; about three times the scalar operations they take) are left to ``jax.vmap``:
#: XLA's compile time grows with the operations (the arm3's 10k, a humanoid's 123k).
MAX_ENTRIES_ESTIMATE = 40_000
#: A bound on the scalar operations, checked while the program is evaluated.
MAX_OPERATIONS = 40_000
#: Entries read by more than one equation, with at least :data:`MATERIALIZE_CONE` scalar
#: operations behind them, are passed this many at a time through
#: :func:`~jaxmbd.compiled.materialize.materialized`: XLA's CPU fusion would otherwise compute such
#: an entry again in every fusion that reads it (the arm3's stage loop: ~9900 arithmetic
#: operations for ~3000 of its program). None: off.
MATERIALIZE_GROUP: int | None = 2
#: The operations behind an entry below which repeating them costs less than a buffer.
#: Batch of 256, rkmk, 1000 steps, model-steps per CPU-second against no buffers
#: (``python -m benchmarks.probes.tile_buffers MODEL 1000 2 None``): with 4, arm3 1.05M
#: against 0.54M, double pendulum 2.10M / 1.36M, acrobot 1.82M / 1.39M, cart-pole 2.55M /
#: 2.67M (noise: 2.40M / 2.44M in another run); with 1 the cart-pole lost 13 %, with 16
#: the double pendulum lost its gain.
MATERIALIZE_CONE = 4


class _TooLarge(Exception):
    """The scalar program would exceed :data:`MAX_OPERATIONS`."""


def _in_tiles(closed, flat, flags, out_flags, axis_size: int, lanes: int, chunk):
    """The outputs of ``closed`` for the batch ``flat`` (members first), evaluated on
    entries over tiles of ``lanes`` members, ``chunk`` tiles at a time (None: all)."""
    tiles = -(-axis_size // lanes)
    per = min(tiles, chunk or tiles)
    count = -(-tiles // per)
    pad = count * per * lanes - axis_size

    def tiled(x):  # (B, ...) -> (count, ..., per, L), the last member repeated as padding
        if pad:
            x = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)])
        x = x.reshape((count, per, lanes) + x.shape[1:])
        return jnp.moveaxis(jnp.moveaxis(x, 1, -1), 1, -1)

    batched = [tiled(x) for x, b in zip(flat, flags, strict=True) if b]

    def one_chunk(chunk_arrays):
        it = iter(chunk_arrays)
        vals = [_Real(next(it)) if b else x for x, b in zip(flat, flags, strict=True)]
        lanes_of = _Lanes(per, lanes)
        outs = lanes_of.evaluate(closed.jaxpr, closed.consts, vals)
        return [lanes_of.real(o).array if f else o for o, f in zip(outs, out_flags, strict=True)]

    if count == 1:
        outs = [o[None] if f else o for o, f in
                zip(one_chunk([x[0] for x in batched]), out_flags, strict=True)]  # fmt: skip
    else:  # chunks one after the other: a chunk's entries stay in the core's caches
        outs = jax.lax.map(one_chunk, batched)
        outs = [o if f else o[0] for o, f in zip(outs, out_flags, strict=True)]
    results = []
    for o, f in zip(outs, out_flags, strict=True):
        if not f:
            results.append(o)
            continue
        o = jnp.moveaxis(jnp.moveaxis(o, -2, 1), -1, 2)  # (count, per, L, ...)
        results.append(o.reshape((count * per * lanes,) + o.shape[3:])[:axis_size])
    return results


def batch_lanes(fn, *, lanes: int | None = None, chunk: int | None = None,
                too_large: str = "vmap"):  # fmt: skip
    """``fn`` (positional array arguments, pytrees of arrays out) whose ``vmap`` evaluates
    its program as per-member scalar code on tiles of ``lanes`` members (see the module
    docstring), ``chunk`` tiles at a time (None: all at once). Unbatched calls are ``fn``'s
    own. ``too_large``: how a program too large for the tiles runs its batch, ``"vmap"``
    (``jax.vmap``'s own batching; on the CPU in chunks of :data:`VMAP_CHUNK` members) or
    ``"map"`` (the members one after another, each its own program: ``lax.map``)."""
    if too_large not in _TOO_LARGE:
        raise ValueError(f"batch_lanes: too_large must be one of {_TOO_LARGE}, got {too_large!r}")

    def rule(plain, axis_size, in_batched, *args):
        # one member: its own program (a tile would be three quarters padding)
        if axis_size == 1:
            one = [
                jax.tree_util.tree_map(lambda x, b: jnp.asarray(x)[0] if b else x, arg, flags)
                for arg, flags in zip(args, in_batched, strict=True)
            ]
            out = plain(*one)
            return jax.tree_util.tree_map(lambda v: jnp.asarray(v)[None], out), all_batched(out)
        flat, flags, closed, out_shape, out_flags = member_program(plain, args, in_batched)
        in_tree = jax.tree_util.tree_structure(args)
        tree = jax.tree_util.tree_structure(out_shape)
        lanes_ = lanes or LANES
        try:
            if _entries(closed.jaxpr) > MAX_ENTRIES_ESTIMATE:
                raise _TooLarge
            outs = _in_tiles(closed, flat, flags, out_flags, axis_size, lanes_, chunk)
        except _TooLarge:  # a large program: jax.vmap's own batching, or one member at a time
            outs = _members(plain, in_tree, flat, flags, too_large)
            outs = [r if f else r[0] for r, f in zip(outs, out_flags, strict=True)]
        return (
            jax.tree_util.tree_unflatten(tree, outs),
            jax.tree_util.tree_unflatten(tree, out_flags),
        )

    return with_plain_derivatives(rule, fn)


#: The schedules of a batch too large for the tiles (:func:`batch_lanes`'s ``too_large``).
_TOO_LARGE = ("vmap", "map")

#: On the CPU, a program too large for the tiles runs ``"vmap"`` batches in chunks of this
#: many members, one chunk after the other: with the whole batch in front of every array
#: the working set outgrows the caches. dm_control's humanoid (rkmk, 20 steps of 5 ms,
#: batch of 256; CPU time per member against its single model, one process, medians of 3;
#: ``python -m benchmarks.probes.large_batch_chunks``,
#: ``benchmarks/results/batch/large_batch_chunks.txt``): one ``vmap`` of the 256 members
#: 1.43x, chunks of 4 / 8 / 16 / 32 members 0.66x / 0.66x / 0.67x / 0.68x, one member at a
#: time 0.68x, this default 0.62x; in wall time at 100 steps, where one ``vmap`` ran its
#: kernels on 1.7 of the 2 cores, 1.07x against 0.79x. Accelerators take the whole batch.
VMAP_CHUNK = 8


def _members(plain, in_tree, flat, flags, too_large: str):
    """The flat outputs of ``plain`` for the batch ``flat`` (members first where
    ``flags``), every output with the batch axis: by ``jax.vmap`` (on the CPU in chunks of
    :data:`VMAP_CHUNK` members) or by ``lax.map`` (one member at a time)."""

    def one(*xs):
        return jax.tree_util.tree_leaves(plain(*jax.tree_util.tree_unflatten(in_tree, xs)))

    members = [x for x, b in zip(flat, flags, strict=True) if b]
    size = members[0].shape[0]
    if too_large == "vmap" and (jax.default_backend() != "cpu" or size <= VMAP_CHUNK):
        return jax.vmap(one, in_axes=[0 if b else None for b in flags])(*flat)

    def member(batched):
        it = iter(batched)
        return one(*[next(it) if b else x for x, b in zip(flat, flags, strict=True)])

    chunk = VMAP_CHUNK if too_large == "vmap" else None
    return chunked_map(member, members, chunk)


def chunked_map(g, arrays, chunk: int | None):
    """``lax.map(g, arrays, batch_size=chunk)``, except that zero-size leaves (a model
    without actuators or sensors has empty arrays, and so has its Solution) are not
    mapped: ``lax.map`` reshapes every input and output leaf into chunks, which divides by
    zero on them. Each member gets the empty input of its own shape; an empty output leaf
    leaves the map as a one-element placeholder (its shape recorded while ``g`` is traced,
    so ``g`` is traced once, as by ``lax.map``) and is made again with the batch axis in
    front."""
    leaves, treedef = jax.tree_util.tree_flatten(arrays)
    batch = leaves[0].shape[0]
    empty_in = [leaf.size == 0 for leaf in leaves]
    mapped = [leaf for leaf, e in zip(leaves, empty_in, strict=True) if not e]
    outputs = {}  # the output's structure and leaf shapes, recorded at trace time

    def member(mapped_one):
        rest = iter(mapped_one)
        own = [
            jnp.zeros(leaf.shape[1:], leaf.dtype) if e else next(rest)
            for leaf, e in zip(leaves, empty_in, strict=True)
        ]
        out, outputs["treedef"] = jax.tree_util.tree_flatten(
            g(jax.tree_util.tree_unflatten(treedef, own))
        )
        outputs["leaves"] = [(x.shape, x.dtype) for x in out]
        return [jnp.zeros(1, x.dtype) if x.size == 0 else x for x in out]

    results = jax.lax.map(member, mapped, batch_size=chunk)
    out = [
        jnp.zeros((batch,) + shape, dtype) if 0 in shape else result
        for (shape, dtype), result in zip(outputs["leaves"], results, strict=True)
    ]
    return jax.tree_util.tree_unflatten(outputs["treedef"], out)


# ---- values ------------------------------------------------------------------------------


class _Real:
    """A batched value as one array, the members last: (*member shape, T, L)."""

    def __init__(self, array):
        self.array = array


def _is_entries(x) -> bool:
    """A batched value taken apart: an object array of the member's entries, each a tile
    array (T, L) or an unbatched scalar."""
    return isinstance(x, np.ndarray) and x.dtype == object


def _concrete(x):
    """``x`` as a NumPy value where it is known at trace time, else None."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return np.asarray(x)
    except Exception:  # an abstract value
        return None


#: Scalar operations with a NumPy counterpart: evaluated at trace time on constants.
_NUMPY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "neg": np.negative,
    "max": np.maximum,
    "min": np.minimum,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sign": np.sign,
    "square": np.square,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
    "floor": np.floor,
    "ceil": np.ceil,
}

#: A binary reduction's scalar operation.
_REDUCERS = {
    "reduce_sum": lax.add_p,
    "reduce_max": lax.max_p,
    "reduce_min": lax.min_p,
    "reduce_prod": lax.mul_p,
    "reduce_and": lax.and_p,
    "reduce_or": lax.or_p,
}

#: Primitives with inner programs: never evaluated at trace time.
_CONTROL = frozenset(["scan", "while", "cond", *_CALLS])

#: Loops evaluated on the members' entries, iteration by iteration.
_LOOPS = frozenset(["scan"])
#: Contractions evaluated as sums of products of entries.
_CONTRACTIONS = frozenset(["dot_general"])
#: Selections: with a constant predicate, the chosen operand itself (no operation).
_SELECTIONS = frozenset(["select_n"])
#: Conversions of constant entries, done in NumPy.
_CONVERSIONS = frozenset(["convert_element_type"])
#: Rearrangements that pass their operands on whole.
_COPIES = frozenset(["copy", "copy_p", "optimization_barrier"])
#: The data operands of rearrangements that also take index or padding operands (the
#: others: every operand is data).
_DATA_OPERANDS = {"gather": [0], "dynamic_slice": [0], "pad": [0, 1]}

#: Rearrangements whose index operands must be constants to be evaluated on entries.
_CONSTANT_INDICES = {
    "gather": lambda vals, batched: not batched[1] and _concrete(vals[1]) is not None,
    "dynamic_slice": lambda vals, batched: (
        not any(batched[1:]) and all(_concrete(v) is not None for v in vals[1:])
    ),
}

#: Primitives that only rearrange entries: evaluated on the entries' indices.
_REARRANGING = frozenset(
    """broadcast_in_dim reshape squeeze transpose rev slice concatenate pad split gather
    dynamic_slice copy copy_p optimization_barrier stack unstack""".split()
)


def _np_broadcast_in_dim(x, *, shape, broadcast_dimensions, **_):
    placed = np.ones(len(shape), dtype=int)
    placed[list(broadcast_dimensions)] = x.shape
    return np.broadcast_to(np.reshape(x, placed), tuple(shape))


def _np_slice(x, *, start_indices, limit_indices, strides=None, **_):
    steps = strides or (1,) * x.ndim
    return x[tuple(map(slice, start_indices, limit_indices, steps))]


def _np_dynamic_slice(x, *starts, slice_sizes, **_):
    # XLA clamps each start so that the slice stays inside the operand
    first = [
        int(np.clip(int(a), 0, dim - size))
        for a, dim, size in zip(starts, x.shape, slice_sizes, strict=True)
    ]
    return x[tuple(slice(a, a + n) for a, n in zip(first, slice_sizes, strict=True))]


#: Rearrangements of entry indices evaluated by NumPy at trace time (one output each, split
#: several): op by op, XLA compiles a program for every primitive and shape (~250 for a
#: batched double pendulum's first call). The others (gather, pad) are XLA's.
_NUMPY_REARRANGEMENTS = {
    "reshape": lambda x, *, new_sizes, dimensions=None, **_: (
        None if dimensions is not None else np.reshape(x, new_sizes)
    ),
    "transpose": lambda x, *, permutation, **_: np.transpose(x, permutation),
    "squeeze": lambda x, *, dimensions, **_: np.squeeze(x, axis=tuple(dimensions)),
    "rev": lambda x, *, dimensions, **_: np.flip(x, axis=tuple(dimensions)),
    "broadcast_in_dim": _np_broadcast_in_dim,
    "slice": _np_slice,
    "concatenate": lambda *xs, dimension, **_: np.concatenate(xs, axis=dimension),
    "split": lambda x, *, sizes, axis, **_: np.split(x, np.cumsum(sizes)[:-1], axis=axis),
    "dynamic_slice": _np_dynamic_slice,
}


def _numpy_rearrangement(name: str, args: list, params: dict) -> list | None:
    """The outputs of the rearranging primitive ``name`` on NumPy index arrays ``args``
    (:data:`_NUMPY_REARRANGEMENTS`), or None where XLA evaluates it."""
    rule = _NUMPY_REARRANGEMENTS.get(name)
    out = None if rule is None else rule(*args, **params)
    if out is None:
        return None
    return list(out) if isinstance(out, list) else [out]


class _Lanes:
    """The evaluator for one batch: ``T`` tiles of ``L`` members."""

    def __init__(self, tiles: int, lanes: int):
        self.shape = (tiles, lanes)
        self.operations = 0
        self.cones: dict = {}  # id(tile) -> (tile, cone): see cone()

    # -- conversions --

    def entries(self, x, dtype=None):
        """``x`` (a batched value or an unbatched one) as an object array of entries."""
        if _is_entries(x):
            return x
        if isinstance(x, _Real):
            a = x.array
            out = np.empty(a.shape[:-2], dtype=object)
            for idx in np.ndindex(out.shape):
                out[idx] = a[idx]
            return out
        c = _concrete(x)
        if c is not None:
            if dtype is not None:
                c = c.astype(dtype)
            out = np.empty(c.shape, dtype=object)
            for idx in np.ndindex(c.shape):
                out[idx] = c[idx]
            return out
        x = jnp.asarray(x)
        out = np.empty(x.shape, dtype=object)
        for idx in np.ndindex(x.shape):
            out[idx] = x[idx]
        return out

    def tile(self, e, dtype):
        """One entry as a tile array (T, L)."""
        if jnp.shape(e) == self.shape:
            return e
        return lax.broadcast(jnp.asarray(e, dtype), self.shape)

    def real(self, x, dtype=None):
        """A batched value as a :class:`_Real`."""
        if isinstance(x, _Real):
            return x
        if not _is_entries(x):
            x = self.entries(x)
        flat = [self.tile(e, dtype or _dtype(e)) for e in x.reshape(-1)]
        if not flat:
            return _Real(jnp.zeros(x.shape + self.shape, dtype or jnp.float64))
        dtype = dtype or jnp.result_type(*flat)
        stacked = jnp.stack([f.astype(dtype) for f in flat])
        return _Real(stacked.reshape(x.shape + self.shape))

    # -- evaluation --

    def evaluate(self, jaxpr, consts, args):
        env = {}
        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
        for v, a in zip(jaxpr.invars, args, strict=True):
            env[v] = a

        def read(v):
            if isinstance(v, jcore.Literal):
                return np.asarray(v.val, dtype=v.aval.dtype)
            return env[v]

        # entries read by several equations go through buffers, a few at a time
        readers = _readers(jaxpr) if MATERIALIZE_GROUP else {}
        pending: list = []  # variables with entries to buffer
        count = 0
        for eqn in jaxpr.eqns:
            vals = [read(v) for v in eqn.invars]
            outs = self.apply(eqn, vals)
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
                if readers.get(v, 0) > 1 and _is_entries(o):
                    n = sum(self.worth_a_buffer(e) for e in o.flat)
                    if n:
                        pending.append(v)
                        count += n
            if MATERIALIZE_GROUP and count >= MATERIALIZE_GROUP:
                self.buffer(env, pending)
                pending, count = [], 0
        return [read(v) for v in jaxpr.outvars]

    def worth_a_buffer(self, e) -> bool:
        """Whether entry ``e`` is a float tile with :data:`MATERIALIZE_CONE` operations or
        more behind it."""
        return (isinstance(e, jax.Array) and e.shape == self.shape
                and jnp.issubdtype(e.dtype, jnp.inexact)
                and self.cone(e) >= MATERIALIZE_CONE)  # fmt: skip

    def buffer(self, env, variables):
        """``env``'s entries of ``variables`` that are worth it replaced by the same values
        computed once (:func:`~jaxmbd.compiled.materialize.materialized`)."""
        where, tiles = [], []
        for v in variables:
            for idx in np.ndindex(env[v].shape):
                if self.worth_a_buffer(env[v][idx]):
                    where.append((v, idx))
                    tiles.append(env[v][idx])
        if not tiles:
            return
        copies = {v: env[v].copy() for v in variables}
        for (v, idx), e in zip(where, materialized(tiles), strict=True):
            copies[v][idx] = e
        env.update(copies)

    def apply(self, eqn, vals):
        name = eqn.primitive.name
        batched = [_is_entries(x) or isinstance(x, _Real) for x in vals]
        if not any(batched):
            params = eqn.primitive.get_bind_params(eqn.params)
            if name not in _CONTROL and all(_concrete(x) is not None for x in vals):
                # constants stay constants (indices of gathers, masks of selects)
                with jax.ensure_compile_time_eval():
                    out = eqn.primitive.bind(*[jnp.asarray(x) for x in vals], **params)
            else:
                out = eqn.primitive.bind(*vals, **params)
            return out if eqn.primitive.multiple_results else [out]
        if name in _CALLS:
            inner, consts = _call_jaxpr(eqn)
            return self.evaluate(inner, consts, vals)
        if name in _LOOPS:
            return self.scan(eqn, vals, batched)
        entries = sum(math.prod(v.aval.shape) for v in eqn.outvars)
        scalar = entries <= MAX_ENTRIES and (
            name in _ELEMENTWISE
            or name in _REDUCERS
            or name in _CONTRACTIONS
            or (name in _REARRANGING and self._rearrangeable(eqn, vals, batched))
        )
        if not scalar:
            return self.whole(eqn, vals, batched)
        if name in _ELEMENTWISE:
            return [self.elementwise(eqn, vals)]
        if name in _REDUCERS:
            return [self.reduce(eqn, vals[0])]
        if name in _CONTRACTIONS:
            return [self.dot_general(eqn, vals)]
        return self.rearrange(eqn, vals, batched)

    def whole(self, eqn, vals, batched):
        """One equation on whole arrays, the members last (:mod:`jaxmbd.compiled.batch_last`)."""
        size = self.shape[0] * self.shape[1]
        flat = []
        for i, (x, b) in enumerate(zip(vals, batched, strict=True)):
            if b:
                a = self.real(x, eqn.invars[i].aval.dtype).array
                flat.append(a.reshape(a.shape[:-2] + (size,)))
            else:
                flat.append(x)
        outs, flags = _apply(eqn, flat, batched, size)
        return [
            _Real(o.reshape(o.shape[:-1] + self.shape)) if f else o
            for o, f in zip(outs, flags, strict=True)
        ]

    # -- scalar rules --

    def _count(self, n: int):
        self.operations += n
        if self.operations > MAX_OPERATIONS:
            raise _TooLarge

    def bind(self, primitive, params, operands, dtype):
        """One scalar operation on entries (tiles or unbatched scalars), constants folded."""
        tiles = [jnp.shape(e) == self.shape for e in operands]
        name = primitive.name
        if name in _SELECTIONS and not tiles[0]:
            which = _concrete(operands[0])
            if which is not None:
                return operands[1 + int(which)]
        if not any(tiles):
            values = [_concrete(e) for e in operands]
            if name in _NUMPY and all(v is not None for v in values):
                with np.errstate(all="ignore"):
                    return np.asarray(_NUMPY[name](*values)).astype(dtype)[()]
            if name in _CONVERSIONS and values[0] is not None:
                return np.asarray(values[0]).astype(params["new_dtype"])[()]
            return _bound(primitive, params, [jnp.asarray(e) for e in operands])
        if name in _FOLDS:
            folded = _FOLDS[name](*_constants(operands, tiles), *operands)
            if folded is not None:
                return folded
        self._count(1)
        xs = []
        for e, t in zip(operands, tiles, strict=True):
            if t:
                xs.append(e)
            else:
                xs.append(lax.broadcast(jnp.asarray(e, _dtype(e)), self.shape))
        out = _bound(primitive, params, xs)
        cone = 1 + sum(self.cone(e) for e, t in zip(operands, tiles, strict=True) if t)
        self.cones[id(out)] = (out, min(cone, 1 << 20))
        return out

    def cone(self, e) -> int:
        """The scalar operations behind entry ``e`` since the last buffer (program inputs,
        whole-array results and materialised entries: 0), which XLA's fusion repeats in
        every fusion that reads ``e``."""
        known = self.cones.get(id(e))
        return known[1] if known is not None and known[0] is e else 0

    def elementwise(self, eqn, vals):
        out_aval = eqn.outvars[0].aval
        ents = [self.entries(x) for x in vals]
        shape = out_aval.shape
        ents = [np.broadcast_to(e, shape) if e.shape != shape else e for e in ents]
        out = np.empty(shape, dtype=object)
        params = eqn.primitive.get_bind_params(eqn.params)
        for idx in np.ndindex(shape):
            out[idx] = self.bind(eqn.primitive, params, [e[idx] for e in ents], out_aval.dtype)
        return out

    def reduce(self, eqn, x):
        axes = tuple(eqn.params["axes"])
        ents = self.entries(x)
        keep = [a for a in range(ents.ndim) if a not in axes]
        moved = np.transpose(ents, keep + list(axes))
        out_shape = moved.shape[: len(keep)]
        moved = moved.reshape(out_shape + (-1,))
        op = _REDUCERS[eqn.primitive.name]
        dtype = eqn.outvars[0].aval.dtype
        out = np.empty(out_shape, dtype=object)
        for idx in np.ndindex(out_shape):
            terms = list(moved[idx])
            total = terms[0]
            for t in terms[1:]:
                total = self.bind(op, {}, [total, t], dtype)
            out[idx] = total
        return out

    def dot_general(self, eqn, vals):
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = (self.entries(x) for x in vals)
        lf = [a for a in range(lhs.ndim) if a not in lc and a not in lb]
        rf = [a for a in range(rhs.ndim) if a not in rc and a not in rb]
        a = np.transpose(lhs, list(lb) + lf + list(lc))
        b = np.transpose(rhs, list(rb) + rf + list(rc))
        nb, k = len(lb), math.prod(lhs.shape[c] for c in lc)
        batch_shape = a.shape[:nb]
        a = a.reshape(batch_shape + (-1, k))
        b = b.reshape(batch_shape + (-1, k))
        dtype = eqn.outvars[0].aval.dtype
        out = np.empty(batch_shape + (a.shape[-2], b.shape[-2]), dtype=object)
        for bi in np.ndindex(batch_shape):
            for i in range(a.shape[-2]):
                for j in range(b.shape[-2]):
                    total = None
                    for kk in range(k):
                        pair = [a[bi + (i, kk)], b[bi + (j, kk)]]
                        term = self.bind(lax.mul_p, {}, pair, dtype)
                        if total is not None:
                            term = self.bind(lax.add_p, {}, [total, term], dtype)
                        total = term
                    out[bi + (i, j)] = np.zeros((), dtype)[()] if total is None else total
        return out.reshape(eqn.outvars[0].aval.shape)

    def _rearrangeable(self, eqn, vals, batched) -> bool:
        """Whether a rearranging equation's non-data operands (indices) are constants."""
        check = _CONSTANT_INDICES.get(eqn.primitive.name)
        return True if check is None else check(vals, batched)

    def rearrange(self, eqn, vals, batched):
        """A rearranging equation evaluated on the entries' indices (at trace time)."""
        name = eqn.primitive.name
        if name in _COPIES:
            return [self.entries(x) if b else x for x, b in zip(vals, batched, strict=True)]
        data = _DATA_OPERANDS.get(name, list(range(len(vals))))
        pool, index_args, offset = [], list(vals), 0
        for i in data:
            ents = self.entries(vals[i], eqn.invars[i].aval.dtype)
            pool.extend(ents.reshape(-1))
            index_args[i] = np.arange(offset, offset + ents.size, dtype=np.int32).reshape(
                ents.shape
            )
            offset += ents.size
        params = eqn.primitive.get_bind_params(eqn.params)
        known = [_concrete(a) for a in index_args]
        outs = None
        if all(a is not None for a in known):
            outs = _numpy_rearrangement(name, known, params)
        if outs is None:
            with jax.ensure_compile_time_eval():
                args = [jnp.asarray(a) for a in index_args]
                out = eqn.primitive.bind(*args, **params)
            outs = out if eqn.primitive.multiple_results else [out]
        result = []
        for o in outs:
            ids = np.asarray(o)
            ent = np.empty(ids.shape, dtype=object)
            for idx in np.ndindex(ids.shape):
                ent[idx] = pool[int(ids[idx])]
            result.append(ent)
        return result

    def scan(self, eqn, vals, batched):
        p = eqn.params
        nc, nk = scan_sizes(p)
        carry_flags, out_flags = _scan_flags(eqn, batched)
        body = p["jaxpr"]
        in_avals = [v.aval for v in body.jaxpr.invars]
        consts = vals[:nc]
        init = []
        for i, (x, f) in enumerate(zip(vals[nc : nc + nk], carry_flags, strict=True)):
            init.append(self.real(x, in_avals[nc + i].dtype).array if f else x)
        xs = []
        for i, (x, b) in enumerate(zip(vals[nc + nk :], batched[nc + nk :], strict=True)):
            xs.append(self.real(x, in_avals[nc + nk + i].dtype).array if b else x)
        xflags = batched[nc + nk :]
        ys_avals = [v.aval for v in body.jaxpr.outvars[nk:]]

        def step(carry, x):
            cs = [_Real(c) if f else c for c, f in zip(carry, carry_flags, strict=True)]
            xv = [_Real(a) if b else a for a, b in zip(x, xflags, strict=True)]
            outs = self.evaluate(body.jaxpr, body.consts, [*consts, *cs, *xv])
            new = []
            for o, f, aval in zip(outs[:nk], carry_flags, in_avals[nc : nc + nk], strict=True):
                new.append(self.real(o, aval.dtype).array if f else jnp.asarray(o, aval.dtype))
            ys = []
            for o, f, aval in zip(outs[nk:], out_flags[nk:], ys_avals, strict=True):
                ys.append(self.real(o, aval.dtype).array if f else jnp.asarray(o, aval.dtype))
            return new, ys

        carry, ys = lax.scan(step, init, xs, length=p["length"], reverse=p["reverse"],
                             unroll=p["unroll"])  # fmt: skip
        outs = [_Real(c) if f else c for c, f in zip(carry, carry_flags, strict=True)]
        outs += [_Real(y) if f else y for y, f in zip(ys, out_flags[nk:], strict=True)]
        return outs


def _readers(jaxpr) -> dict:
    """The number of equations of ``jaxpr`` that read each variable."""
    readers: dict = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                readers[v] = readers.get(v, 0) + 1
    return readers


def _entries(jaxpr) -> int:
    """The entries of every equation's outputs in ``jaxpr``, inner programs once each: a
    bound of the scalar operations its evaluation on entries takes."""
    total = 0
    for eqn in jaxpr.eqns:
        inner = [v for v in eqn.params.values() if isinstance(v, (jcore.Jaxpr, jcore.ClosedJaxpr))]
        for v in eqn.params.values():
            if isinstance(v, tuple):
                inner += [b for b in v if isinstance(b, (jcore.Jaxpr, jcore.ClosedJaxpr))]
        if inner:
            total += sum(
                _entries(j.jaxpr if isinstance(j, jcore.ClosedJaxpr) else j) for j in inner
            )
            continue
        total += sum(math.prod(v.aval.shape) for v in eqn.outvars)
    return total


def _bound(primitive, params, operands):
    """``primitive`` bound to ``operands``; the binary operations of sums and reductions
    (given no parameters) through their ``lax`` functions, which fill in the parameters
    this JAX version's primitives take."""
    if not params and primitive in _LAX_FUNCTIONS:
        return _LAX_FUNCTIONS[primitive](*operands)
    return primitive.bind(*operands, **params)


_LAX_FUNCTIONS = {
    lax.add_p: lax.add,
    lax.mul_p: lax.mul,
    lax.max_p: lax.max,
    lax.min_p: lax.min,
    lax.and_p: lax.bitwise_and,
    lax.or_p: lax.bitwise_or,
}


def _dtype(e):
    return e.dtype if hasattr(e, "dtype") else jnp.result_type(e)


def _constants(operands, tiles):
    """The constant values of a binary operation's two operands (None: a tile or traced)."""
    return tuple(None if t else _concrete(e) for e, t in zip(operands, tiles, strict=True))


def _is(c, value) -> bool:
    return c is not None and c.size == 1 and c == value


def _fold_mul(ca, cb, a, b):
    """``a * b`` with a constant 0 or 1 operand, folded (None: not)."""
    if _is(ca, 0):
        return ca[()]
    if _is(cb, 0):
        return cb[()]
    if _is(ca, 1):
        return b
    if _is(cb, 1):
        return a
    return None


def _fold_add(ca, cb, a, b):
    """``a + b`` with a constant 0 operand, folded (None: not)."""
    if _is(ca, 0):
        return b
    if _is(cb, 0):
        return a
    return None


def _fold_sub(ca, cb, a, b):
    """``a - b`` with a constant 0 subtrahend, folded (None: not)."""
    return a if _is(cb, 0) else None


#: Binary operations folded where an operand is a constant 0 or 1.
_FOLDS = {"mul": _fold_mul, "add": _fold_add, "sub": _fold_sub}
