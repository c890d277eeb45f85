"""The structured block elimination of :mod:`jaxmbd.linear.structured` in elementwise XLA
operations only (no LAPACK custom call, no ``dot``, no scatter), so that a time step solved
with it still compiles into one native loop on the CPU (:mod:`jaxmbd.linear.small`).

Why: the dense elementwise LU costs n^3 for n = 6 nb + nc (or 6 nb + 2 nc, stabilised)
unknowns, in a loop of n masked steps over the whole matrix; past a few dozen unknowns it
loses to LAPACK however well the step is compiled. On the body-joint graph the same matrix
factors block by block: each body node (a body's accelerations, stabilised also its six
auxiliary unknowns z = G_n^T mu, with the rows of the joint to its parent: Baraff's
grouping) is one pivot block of b unknowns, and a chain or tree has no fill. The work is
then N b^3 for N nodes instead of n^3, and the factors are exactly the block LU of the
matrix actually solved (the same slots and factors as
:func:`~jaxmbd.linear.structured.factor_values`, pivoting inside each pivot block).

The schedule of :class:`~jaxmbd.linear.structured.BlockStructure` is static, so every
round is unrolled at trace time: its pivot blocks are inverted together by
:func:`jaxmbd.linear.small.inverse_and_pivots` (one ``fori_loop`` of b steps, vectorised
over the round's pivots), products are elementwise products with unrolled sums, and the
scatter-adds of the LAPACK version become static gathers (each written slot picks its old
value and the sum of the updates aimed at it, by numpy index arrays computed once per
structure). Rounds are few for small models (a chain of N bodies: O(log N) rounds of tree
contraction).

Measured (``benchmarks/small_solve.py``, the guide's performance page): slower than
the dense elementwise LU up to 54 unknowns (0.3-0.6x), level with LAPACK at 120 (a chain
of 10 bodies), and past about 240 unknowns the step no longer fits XLA's small-loop
threshold; ``linear_solver="auto"`` does not pick it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import small


def _sum_last2(product):
    """sum over the second-to-last axis, unrolled (no ``reduce`` matched into a dot)."""
    return small._sum_unrolled(product, product.ndim - 2)


def bmm(a, b):
    """Batched a @ b over leading axes (..., i, j) x (..., j, k), without a ``dot``."""
    return _sum_last2(a[..., :, :, None] * b[..., None, :, :])


def bmv(a, x):
    """Batched a @ x, (..., i, j) x (..., j), without a ``dot``."""
    return small._sum_unrolled(a * x[..., None, :], a.ndim - 1)


def bmtv(a, x):
    """Batched a^T @ x, (..., j, i) x (..., j), without a ``dot``."""
    return small._sum_unrolled(a * x[..., :, None], a.ndim - 2)


def _gather_sum(values, index):
    """sum over the last axis of ``values[index]`` (``index`` (t, mu) static, -1: none)."""
    if index.shape[1] == 0:
        return jnp.zeros((index.shape[0],) + values.shape[1:], values.dtype)
    zero = jnp.zeros((1,) + values.shape[1:], values.dtype)
    padded = jnp.concatenate([values, zero])
    picked = padded[np.where(index >= 0, index, values.shape[0])]  # (t, mu, ...)
    return small._sum_unrolled(picked, 1)


def _grouped(targets: np.ndarray, ignore: set[int]):
    """(unique targets, (t, mu) flat indices of the entries aimed at each, -1 padded)."""
    flat = targets.reshape(-1)
    keep = [i for i, t in enumerate(flat) if int(t) not in ignore]
    uniq = sorted({int(flat[i]) for i in keep})
    where = {t: k for k, t in enumerate(uniq)}
    lists: list[list[int]] = [[] for _ in uniq]
    for i in keep:
        lists[where[int(flat[i])]].append(i)
    mu = max((len(x) for x in lists), default=0)
    index = np.full((len(uniq), mu), -1, dtype=np.int64)
    for k, x in enumerate(lists):
        index[k, : len(x)] = x
    return np.asarray(uniq, dtype=np.int64), index


def _place(array, rows: np.ndarray, new):
    """``array`` with ``array[rows] = new`` (static, unique ``rows``), by a gather from
    [array, new] (no scatter)."""
    if rows.size == 0:
        return array
    size = array.shape[0]
    source = np.arange(size)
    source[rows] = size + np.arange(rows.size)
    return jnp.concatenate([array, new])[source]


def segment_sum(values, segments: np.ndarray, num_segments: int):
    """``jax.ops.segment_sum`` for static ``segments`` as a gather and an unrolled sum."""
    out_rows, index = _grouped(segments, set())
    sums = _gather_sum(values, index)
    out = jnp.zeros((num_segments,) + values.shape[1:], values.dtype)
    return _place(out, out_rows, sums)


def _first(index):
    """The one entry of each unique target (writes that never collide)."""
    return index[:, 0] if index.shape[1] else np.zeros((0,), np.int64)


def _plans(structure):
    """Per round (static, cached on the structure): what it reads and writes."""
    key = "small_blocks plans"
    if key in structure.cache:
        return structure.cache[key]
    trash = {structure.TRASH}
    trash_node = {structure.TRASH_NODE, structure.ZERO_NODE}
    plans = []
    for run in structure.runs:
        for r in range(run.node.shape[0]):
            rnd = {name: np.asarray(getattr(run, name)[r]) for name in run._fields}
            target_rows, target_index = _grouped(rnd["target"], trash)
            lower_rows, lower_index = _grouped(rnd["lower_w"], trash)
            node_rows, node_index = _grouped(rnd["node"], trash_node)
            later_rows, later_index = _grouped(rnd["later_w"], trash_node)
            plans.append(
                dict(
                    rnd,
                    target_rows=target_rows,
                    target_index=target_index,
                    lower_rows=lower_rows,
                    lower_first=_first(lower_index),
                    node_rows=node_rows,
                    node_first=_first(node_index),
                    later_rows=later_rows,
                    later_index=later_index,
                )
            )
    structure.cache[key] = plans
    return plans


def pad_identity(structure, values):
    """Identity on the padded diagonal of the diagonal slots (padding decouples)."""
    N, b = structure.num_nodes, structure.b
    pad = (~structure.real).astype(values.dtype)
    eye = jnp.eye(b, dtype=values.dtype) * pad[:, None, :]
    rest = jnp.zeros((values.shape[0] - N, b, b), values.dtype)
    return values + jnp.concatenate([eye, rest])


def factor_values(structure, values):
    """:func:`jaxmbd.linear.structured.factor_values` (same outputs, same layout) in
    elementwise operations, rounds unrolled."""
    dtype = values.dtype
    b = structure.b
    eye = jnp.eye(b, dtype=dtype)
    vals = jnp.concatenate(
        [pad_identity(structure, values), jnp.zeros((1, b, b), dtype), eye[None],
         jnp.zeros((1, b, b), dtype)]
    )  # fmt: skip
    dinv = jnp.broadcast_to(eye, (structure.num_nodes + 2, b, b))
    big = jnp.asarray(jnp.inf, dtype)
    pmin, pmax = jnp.asarray(1.0, dtype), jnp.asarray(1.0, dtype)
    for plan in _plans(structure):
        inv, piv = jax.vmap(small.inverse_and_pivots)(vals[plan["diag"]])
        real = plan["real"]
        low = jnp.min(jnp.where(real, piv, big), axis=-1)
        high = jnp.max(jnp.where(real, piv, 0.0), axis=-1)
        ratio = jnp.where(high > 0, low / high, 0.0)
        worst = jnp.argmin(ratio)
        take = ratio[worst] < pmin / pmax
        pmin = jnp.where(take, low[worst], pmin)
        pmax = jnp.where(take, high[worst], pmax)
        L = bmm(vals[plan["lower"]], inv[:, None])  # (P, d, b, b)
        upper = vals[plan["upper"]]  # (P, d, b, b)
        update = bmm(L[:, :, None], upper[:, None, :])  # (P, d, d, b, b)
        P, d = L.shape[:2]
        sums = _gather_sum(update.reshape((P * d * d, b, b)), plan["target_index"])
        vals = _place(vals, plan["target_rows"], vals[plan["target_rows"]] - sums)
        vals = _place(vals, plan["lower_rows"], L.reshape((P * d, b, b))[plan["lower_first"]])
        dinv = _place(dinv, plan["node_rows"], inv[plan["node_first"]])
    return vals, dinv, pmin, pmax


def solve_values(structure, vals, dinv, rhs, *, transpose: bool = False):
    """:func:`jaxmbd.linear.structured.solve_values` in elementwise operations."""
    X = structure.to_nodes(rhs)
    X = jnp.concatenate([X[:-2], jnp.zeros((2,) + X.shape[1:], X.dtype)])
    plans = _plans(structure)

    def add_to_later(X, plan, contributions):  # X[later_w] += contributions (P, d, b)
        flat = contributions.reshape((-1, contributions.shape[-1]))
        rows = plan["later_rows"]
        return _place(X, rows, X[rows] + _gather_sum(flat, plan["later_index"]))

    def set_nodes(X, plan, new):  # X[node] = new (P, b)
        return _place(X, plan["node_rows"], new[plan["node_first"]])

    if not transpose:
        for plan in plans:  # L y = b: b_i -= L_ik y_k
            L = vals[plan["lower"]]
            X = add_to_later(X, plan, -bmv(L, X[plan["node"]][:, None]))
        for plan in plans[::-1]:  # U x = y: x_k = D_k^{-1} (y_k - sum_j U_kj x_j)
            U = vals[plan["upper"]]
            y = X[plan["node"]] - small._sum_unrolled(bmv(U, X[plan["later"]]), 1)
            X = set_nodes(X, plan, bmv(dinv[plan["node"]], y))
    else:
        for plan in plans:  # U^T z = b: z_k = D_k^{-T} b_k, b_j -= U_kj^T z_k
            z = bmtv(dinv[plan["node"]], X[plan["node"]])
            X = set_nodes(X, plan, z)
            U = vals[plan["upper"]]
            X = add_to_later(X, plan, -bmtv(U, z[:, None]))
        for plan in plans[::-1]:  # L^T x = z: x_k = z_k - sum_i L_ik^T x_i
            L = vals[plan["lower"]]
            x = X[plan["node"]] - small._sum_unrolled(bmtv(L, X[plan["later"]]), 1)
            X = set_nodes(X, plan, x)
    return structure.from_nodes(X)


def row_scale(structure, values, allowed):
    """(|A| allowed) per row from the blocks (:func:`~jaxmbd.linear.structured._row_scale`)."""
    Al = structure.to_nodes(allowed)
    contrib = bmv(jnp.abs(values), Al[structure.slot_col])
    row = segment_sum(contrib, np.asarray(structure.slot_row), structure.num_nodes + 2)
    return structure.from_nodes(row)


def matvec(structure, values, x):
    """A x from the blocks (:meth:`~jaxmbd.linear.structured.BlockStructure.matvec`)."""
    X = structure.to_nodes(x)
    Y = bmv(values, X[structure.slot_col])
    out = segment_sum(Y, np.asarray(structure.slot_row), structure.num_nodes + 2)
    return structure.from_nodes(out)
