"""Structured sparse LU on a block graph: static symbolic analysis, level-batched numerics.

The unknowns are partitioned into *nodes* (a body's tangent block, possibly with the rows
of the joints that attach it to its parent; a loop-closing joint's rows; ...), and the
matrix into dense b x b blocks between nodes (b = the largest node, smaller nodes padded
with an identity diagonal). Block Gaussian elimination without pivoting across blocks
(Baraff 1996, "Linear-time dynamics using Lagrange multipliers"; Dojo's graph-ordered
LDU) factors A = L U with

    L_ik = A_ik D_k^{-1} (i after k),   U_kj = A_kj,   A_ij <- A_ij - L_ik U_kj,

and a dense LU with partial pivoting inside every pivot block D_k. Everything that depends
only on the topology happens once, in numpy, in :class:`BlockStructure`:

* the elimination order: rounds of *multiple minimum degree* (Liu 1985): each round
  eliminates an independent set of nodes of small degree in the current filled graph, so
  leaves go first (no fill on a tree), degree-2 nodes of long paths are compressed in the
  same rounds (tree contraction: O(log N) rounds for a chain, O(N) work), and nodes with a
  zero diagonal block (loop-closing joints) wait until their bodies are gone;
* the fill: cliques among the remaining neighbours of each eliminated node (only inside
  cycles);
* the slots (one b x b block per structurally nonzero pair), and for every round the
  static gather / scatter index arrays of its pivots, their L and U blocks and their Schur
  updates.

The numeric factorisation is then one batched step per round (gather blocks, batched LU of
the pivots, batched products, one scatter-add of all updates), run as a ``lax.scan`` over
rounds of equal padded width, so trace and compile time grow with the number of distinct
widths, not with N. Solves (``A x = b`` and ``A^T x = b``) run the same schedule forward and
backward. All of it works under ``jit``, ``vmap`` and ``grad``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from . import small, small_blocks


class _Round(NamedTuple):
    """Static index arrays of a run of rounds of equal padded width (leading axis: round)."""

    node: np.ndarray  # (R, P): node (pad: trash node)
    diag: np.ndarray  # (R, P): diagonal slot (pad: identity slot)
    lower: np.ndarray  # (R, P, d): slots (i, k) read (pad: zero slot)
    lower_w: np.ndarray  # (R, P, d): the same slots written (pad: trash slot)
    upper: np.ndarray  # (R, P, d): slots (k, j) (pad: zero slot)
    later: np.ndarray  # (R, P, d): neighbour nodes eliminated later (pad: zero node)
    later_w: np.ndarray  # (R, P, d): the same for writes (pad: trash node)
    target: np.ndarray  # (R, P, d, d): slots (i, j) updated (pad: trash slot)
    real: np.ndarray  # (R, P, b): real (unpadded) unknowns of each pivot


class BlockStructure:
    """The symbolic analysis of a block-sparse matrix (numpy, static).

    ``nodes``: for every node the indices of its unknowns (0..n-1, each exactly once);
    ``edges``: node pairs (i, j) whose block A_ij may be nonzero (both orders are kept;
    the diagonal always is); ``zero_diagonal``: nodes whose diagonal block is zero until
    some neighbour has been eliminated (a joint's multipliers), with ``after`` the nodes
    that must be eliminated first for each of them.

    Equal and hashed by value (:attr:`key`: the nodes, the couplings, ``after`` and
    ``priority``, which determine everything else): it is the static metadata of
    :class:`BlockMatrix` and :class:`BlockFactors`, and a structure built again (a layout
    cache's entry evicted, a program's outputs loaded from the disk cache with their
    structure unpickled) must be the same pytree structure as the first, or the reused
    Newton matrix of a run's next block meets a ``lax.cond`` (refresh or keep) whose two
    branches disagree. ``cache`` (the assemblers' derived data) is neither
    compared nor pickled.
    """

    def __init__(
        self,
        nodes: Sequence[Sequence[int]],
        edges,
        *,
        after: dict[int, Sequence[int]] | None = None,
        priority: Sequence[int] | None = None,
    ):
        nodes = [np.asarray(v, dtype=np.int64) for v in nodes]
        self.num_nodes = N = len(nodes)
        self.n = n = int(sum(len(v) for v in nodes))
        if N == 0:
            raise ValueError("a block structure needs at least one node")
        flat = np.concatenate(nodes)
        if not np.array_equal(np.sort(flat), np.arange(n)):
            raise ValueError("the nodes must partition the unknowns 0..n-1")
        self.b = b = max(len(v) for v in nodes)
        self.node_sizes = np.array([len(v) for v in nodes])
        adjacency = [set() for _ in range(N)]
        for i, j in edges:
            if i != j:
                adjacency[i].add(j)
                adjacency[j].add(i)
        self.cache: dict = {}  # per-structure static data of the assemblers
        self.adjacency = [frozenset(a) for a in adjacency]
        after = {int(k): sorted({int(x) for x in v}) for k, v in (after or {}).items() if len(v)}
        self.key = (
            tuple(tuple(v.tolist()) for v in nodes),
            tuple(tuple(sorted(int(x) for x in a)) for a in adjacency),
            tuple(sorted((k, tuple(v)) for k, v in after.items())),
            None if priority is None else tuple(np.asarray(priority).tolist()),
        )
        self._hash = hash(self.key)
        self.order, self.rounds_of = _multiple_minimum_degree(
            [set(a) for a in adjacency], after or {}, priority
        )
        position = np.empty(N, dtype=np.int64)
        position[self.order] = np.arange(N)
        # symbolic elimination in that order: later neighbours of each node, with fill
        filled = [set(a) for a in adjacency]
        later = [None] * N
        for k in self.order:
            nbrs = sorted(
                (x for x in filled[k] if position[x] > position[k]), key=position.__getitem__
            )
            later[k] = nbrs
            for a in nbrs:
                filled[a].update(c for c in nbrs if c != a)
        self.later = later
        self.fill = sum(len(filled[k]) - len(adjacency[k]) for k in range(N)) // 2
        # slots: diagonal k -> k; then (i, k) and (k, i) for every later neighbour i of k
        lower, upper = {}, {}
        s = N
        for k in range(N):
            for i in later[k]:
                lower[(i, k)] = s
                upper[(k, i)] = s + 1
                s += 2
        self.num_slots = S = s
        self.ZERO, self.IDENT, self.TRASH = S, S + 1, S + 2
        self.ZERO_NODE, self.TRASH_NODE = N, N + 1
        slot_row = np.empty(S, dtype=np.int64)
        slot_col = np.empty(S, dtype=np.int64)
        slot_row[:N] = slot_col[:N] = np.arange(N)
        for (i, k), sl in lower.items():
            slot_row[sl], slot_col[sl] = i, k
            slot_row[sl + 1], slot_col[sl + 1] = k, i
        self.slot_row, self.slot_col = slot_row, slot_col
        self._slot = {**lower, **upper, **{(k, k): k for k in range(N)}}

        # unknown <-> (node, position) maps; node N is a zero row, N + 1 a trash row
        self.node_index = np.full((N + 2, b), n, dtype=np.int64)  # pad -> appended zero
        self.real = np.zeros((N, b), dtype=bool)
        for k, v in enumerate(nodes):
            self.node_index[k, : len(v)] = v
            self.real[k, : len(v)] = True
        self.flat_position = np.empty(n, dtype=np.int64)
        for k, v in enumerate(nodes):
            self.flat_position[v] = k * b + np.arange(len(v))
        self.nodes = nodes

        # the schedule: rounds grouped into runs of equal padded width
        by_round: list[list[int]] = []
        for k in self.order:
            r = self.rounds_of[k]
            while len(by_round) <= r:
                by_round.append([])
            by_round[r].append(k)
        self.num_rounds = len(by_round)
        self.runs = self._runs(by_round)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, BlockStructure):
            return NotImplemented
        return self._hash == other._hash and self.key == other.key

    def __hash__(self):
        return self._hash

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "cache"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.cache = {}

    def slot(self, i: int, j: int) -> int:
        return self._slot[(i, j)]

    def _runs(self, by_round) -> list[_Round]:
        def bucket(x):
            return 1 << max(0, int(x) - 1).bit_length()

        keys = [
            (bucket(len(ks)), bucket(max((len(self.later[k]) for k in ks), default=0)))
            for ks in by_round
        ]
        runs, start = [], 0
        for r in range(1, len(by_round) + 1):
            if r == len(by_round) or keys[r] != keys[start]:
                runs.append(self._run(by_round[start:r], *keys[start]))
                start = r
        return runs

    def _run(self, rounds, P, d) -> _Round:
        R, b = len(rounds), self.b
        node = np.full((R, P), self.TRASH_NODE)
        diag = np.full((R, P), self.IDENT)
        lower = np.full((R, P, d), self.ZERO)
        lower_w = np.full((R, P, d), self.TRASH)
        upper = np.full((R, P, d), self.ZERO)
        later = np.full((R, P, d), self.ZERO_NODE)
        later_w = np.full((R, P, d), self.TRASH_NODE)
        target = np.full((R, P, d, d), self.TRASH)
        real = np.zeros((R, P, b), dtype=bool)
        for r, ks in enumerate(rounds):
            for p, k in enumerate(ks):
                node[r, p] = diag[r, p] = k
                real[r, p] = self.real[k]
                for a, i in enumerate(self.later[k]):
                    lower[r, p, a] = lower_w[r, p, a] = self._slot[(i, k)]
                    upper[r, p, a] = self._slot[(k, i)]
                    later[r, p, a] = later_w[r, p, a] = i
                    for c, j in enumerate(self.later[k]):
                        target[r, p, a, c] = self._slot[(i, j)]
        return _Round(node, diag, lower, lower_w, upper, later, later_w, target, real)

    # -- layout -----------------------------------------------------------------------------
    def to_nodes(self, x):
        """(n,) -> (N + 2, b) node layout, padding zero."""
        ext = jnp.concatenate([x, jnp.zeros((1,), x.dtype)])
        return ext[self.node_index]

    def from_nodes(self, X):
        return X[: self.num_nodes].reshape(-1)[self.flat_position]

    def gather(self, J):
        """The blocks (S, b, b) of a dense matrix J (n, n) (tests, and formulations whose
        Newton matrix is assembled densely)."""
        Jp = jnp.pad(J, ((0, 1), (0, 1)))
        rows = self.node_index[self.slot_row]
        cols = self.node_index[self.slot_col]
        return Jp[rows[:, :, None], cols[:, None, :]]

    def dense(self, values):
        """The dense matrix (n, n) of blocks (S, b, b) (tests and diagnostics)."""
        rows = self.node_index[self.slot_row]
        cols = self.node_index[self.slot_col]
        out = jnp.zeros((self.n + 1, self.n + 1), values.dtype)
        out = out.at[rows[:, :, None], cols[:, None, :]].add(values)
        return out[: self.n, : self.n]

    def matvec(self, values, x):
        """A x from the blocks, O(S b^2)."""
        if small.hoistable():  # a step compiled as one loop: no dot, no scatter
            return small_blocks.matvec(self, values, x)
        X = self.to_nodes(x)
        Y = jnp.einsum("sij,sj->si", values, X[self.slot_col])
        out = jax.ops.segment_sum(Y, self.slot_row, num_segments=self.num_nodes + 2)
        return self.from_nodes(out)

    def __repr__(self):
        return (
            f"BlockStructure(n={self.n}, nodes={self.num_nodes}, b={self.b}, "
            f"slots={self.num_slots}, fill={self.fill}, rounds={self.num_rounds}, "
            f"runs={len(self.runs)})"
        )


def _multiple_minimum_degree(adjacency, after, priority):
    """Elimination order and round of every node: each round takes, greedily by (degree,
    priority), an independent set of eligible nodes of degree <= max(2, 2 min degree);
    eliminating them together is the same as one by one (none is another's neighbour).
    A node listed in ``after`` is eligible once all the nodes it names are gone."""
    N = len(adjacency)
    alive = set(range(N))
    order, rounds_of = [], np.zeros(N, dtype=np.int64)
    prio = np.zeros(N) if priority is None else np.asarray(priority)
    waiting = {k: set(v) for k, v in after.items() if v}
    r = 0
    while alive:
        eligible = [k for k in alive if not waiting.get(k)]
        if not eligible:  # a cycle of waits: release the one with fewest
            k = min(alive, key=lambda k: (len(waiting[k]), k))
            waiting[k] = set()
            eligible = [k]
        degree = {k: len(adjacency[k]) for k in eligible}
        low = min(degree.values())
        limit = max(2, 2 * low)
        chosen, blocked = [], set()
        for k in sorted(eligible, key=lambda k: (degree[k], prio[k], k)):
            if degree[k] > limit:
                break
            if k in blocked:
                continue
            chosen.append(k)
            blocked.update(adjacency[k])
        for k in chosen:
            nbrs = adjacency[k]
            for a in nbrs:
                adjacency[a].discard(k)
                adjacency[a].update(c for c in nbrs if c != a)
            adjacency[k] = set()
            alive.discard(k)
            order.append(k)
            rounds_of[k] = r
            for w in waiting.values():
                w.discard(k)
        r += 1
    return np.asarray(order, dtype=np.int64), rounds_of


# ------------------------------------------------------------------------------ numerics


class BlockMatrix(eqx.Module):
    """A block-sparse matrix: ``values`` (S, b, b), the blocks of ``structure``'s slots.
    ``augmented``: the first ``n_original`` unknowns are the system's own; the rest are
    auxiliary (eliminated exactly: a solve pads the right-hand side with zeros and drops
    them), e.g. z = G_n^T mu of the stabilised index-2 step."""

    values: jax.Array
    structure: BlockStructure = eqx.field(static=True)
    n_original: int = eqx.field(static=True)

    @property
    def shape(self):
        return (self.n_original, self.n_original)

    def todense(self):
        return self.structure.dense(self.values)[: self.n_original, : self.n_original]


class BlockFactors(eqx.Module):
    """L and U blocks (in the slots), D_k^{-1} per node, and the equilibration (``col``,
    ``row`` in the full, augmented layout) and pivot-ratio ``rcond``, as
    :class:`~jaxmbd.newton.IterationMatrix` for the dense LU."""

    values: jax.Array  # (S + 3, b, b)
    dinv: jax.Array  # (N + 2, b, b)
    col: jax.Array  # (n_full,)
    row: jax.Array  # (n_full,)
    rcond: jax.Array
    structure: BlockStructure = eqx.field(static=True)
    n_original: int = eqx.field(static=True)

    @property
    def lu(self):  # finiteness checks of the Newton loop look here
        return self.dinv


def _extend(structure: BlockStructure, values):
    b = structure.b
    eye = jnp.eye(b, dtype=values.dtype)
    return jnp.concatenate([values, jnp.zeros((1, b, b)), eye[None], jnp.zeros((1, b, b))])


def _pad_identity(structure: BlockStructure, values):
    """Identity on the padded diagonal of the diagonal slots (so padding decouples)."""
    N, b = structure.num_nodes, structure.b
    pad = (~structure.real).astype(values.dtype)
    return values.at[:N].add(jnp.eye(b, dtype=values.dtype) * pad[:, None, :])


def _inverse_and_pivots(D):
    """D^{-1} (batched) by LU with partial pivoting, and |u_ii|."""
    lu, _, perm = jax.lax.linalg.lu(D)
    b = D.shape[-1]
    eye = jnp.eye(b, dtype=D.dtype)
    P = eye[perm]  # P D = L U
    solve = jax.lax.linalg.triangular_solve
    X = solve(lu, P, left_side=True, lower=True, unit_diagonal=True)
    inv = solve(lu, X, left_side=True, lower=False)
    return inv, jnp.abs(jnp.diagonal(lu, axis1=-2, axis2=-1))


def _scan_or_call(step, carry, xs):
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    if length == 1:
        carry, _ = step(carry, jax.tree_util.tree_map(lambda a: a[0], xs))
        return carry
    return jax.lax.scan(step, carry, xs)[0]


def factor_values(structure: BlockStructure, values):
    """Block LU of blocks (S, b, b) (padded diagonal set to identity): returns (factored
    slots (S + 3, b, b), D^{-1} (N + 2, b, b), and the smallest and largest LU pivot of the
    pivot block with the worst ratio of the two).

    The ratio is a per-block reciprocal-condition estimate: a singular matrix has a
    singular Schur pivot block (det A is the product of their determinants), so an exactly
    or nearly redundant constraint shows up as a pivot that is tiny *against its own block's
    largest*. A ratio over all blocks together (as the dense LU's) would compare blocks of
    unrelated scales (a crankshaft carrying every cylinder with a piston pin) and flag
    well-posed mechanisms.

    In a hoistable step (:func:`jaxmbd.linear.small.hoistable`) the same factors come from
    :func:`jaxmbd.linear.small_blocks.factor_values` (elementwise, no custom call)."""
    if small.hoistable():
        return small_blocks.factor_values(structure, values)
    dtype = values.dtype
    b = structure.b
    vals = _extend(structure, _pad_identity(structure, values))
    dinv = jnp.broadcast_to(jnp.eye(b, dtype=dtype), (structure.num_nodes + 2, b, b))
    big = jnp.asarray(jnp.inf, dtype)

    def step(carry, rnd):
        vals, dinv, pmin, pmax = carry
        inv, piv = _inverse_and_pivots(vals[rnd.diag])
        # the worst pivot ratio of one block (a near-singular Schur block), see rcond
        low = jnp.min(jnp.where(rnd.real, piv, big), axis=-1)
        high = jnp.max(jnp.where(rnd.real, piv, 0.0), axis=-1)
        ratio = jnp.where(high > 0, low / high, 0.0)
        worst = jnp.argmin(ratio)
        take = ratio[worst] < pmin / pmax
        pmin = jnp.where(take, low[worst], pmin)
        pmax = jnp.where(take, high[worst], pmax)
        L = jnp.einsum("paij,pjk->paik", vals[rnd.lower], inv)
        update = jnp.einsum("paij,pcjk->pacik", L, vals[rnd.upper])
        vals = vals.at[rnd.target].add(-update)
        vals = vals.at[rnd.lower_w].set(L)
        dinv = dinv.at[rnd.node].set(inv)
        return (vals, dinv, pmin, pmax), None

    carry = (vals, dinv, jnp.asarray(1.0, dtype), jnp.asarray(1.0, dtype))
    for run in structure.runs:
        carry = _scan_or_call(step, carry, _as_arrays(run))
    return carry


def _as_arrays(run: _Round):
    return _Round(*(jnp.asarray(a) for a in run))


def solve_values(structure: BlockStructure, vals, dinv, rhs, *, transpose: bool = False):
    """A^{-1} rhs (or A^{-T} rhs) from :func:`factor_values`'s output; rhs (n,)."""
    if small.hoistable():
        return small_blocks.solve_values(structure, vals, dinv, rhs, transpose=transpose)
    X = structure.to_nodes(rhs)
    X = jnp.concatenate([X[:-2], jnp.zeros((2,) + X.shape[1:], X.dtype)])
    runs = [_as_arrays(r) for r in structure.runs]
    rev = [jax.tree_util.tree_map(lambda a: a[::-1], r) for r in runs[::-1]]

    if not transpose:

        def forward(X, rnd):  # L y = b: b_i -= L_ik y_k
            L = vals[rnd.lower]
            return X.at[rnd.later_w].add(-jnp.einsum("paij,pj->pai", L, X[rnd.node])), None

        def backward(X, rnd):  # U x = y: x_k = D_k^{-1} (y_k - sum_j U_kj x_j)
            U = vals[rnd.upper]
            y = X[rnd.node] - jnp.einsum("paij,paj->pi", U, X[rnd.later])
            return X.at[rnd.node].set(jnp.einsum("pij,pj->pi", dinv[rnd.node], y)), None

    else:

        def forward(X, rnd):  # U^T z = b: z_k = D_k^{-T} b_k, b_j -= U_kj^T z_k
            z = jnp.einsum("pji,pj->pi", dinv[rnd.node], X[rnd.node])
            X = X.at[rnd.node].set(z)
            U = vals[rnd.upper]
            return X.at[rnd.later_w].add(-jnp.einsum("paji,pj->pai", U, z)), None

        def backward(X, rnd):  # L^T x = z: x_k = z_k - sum_i L_ik^T x_i
            L = vals[rnd.lower]
            x = X[rnd.node] - jnp.einsum("paji,paj->pi", L, X[rnd.later])
            return X.at[rnd.node].set(x), None

    for run in runs:
        X = _scan_or_call(forward, X, run)
    for run in rev:
        X = _scan_or_call(backward, X, run)
    return structure.from_nodes(X)


# -------------------------------------------------------- the Newton solvers' interface


def _row_scale(structure: BlockStructure, values, allowed):
    """(|A| allowed) per row, from the blocks."""
    if small.hoistable():
        return small_blocks.row_scale(structure, values, allowed)
    Al = structure.to_nodes(allowed)
    contrib = jnp.einsum("sij,sj->si", jnp.abs(values), Al[structure.slot_col])
    row = jax.ops.segment_sum(contrib, structure.slot_row, num_segments=structure.num_nodes + 2)
    return structure.from_nodes(row)


def _full(matrix: BlockMatrix, v, fill):
    extra = matrix.structure.n - matrix.n_original
    if extra == 0:
        return v
    return jnp.concatenate([v, jnp.broadcast_to(fill, (extra,)).astype(v.dtype)])


def factor_block_matrix(matrix: BlockMatrix, w, allowed) -> BlockFactors:
    """Equilibrate (rows by their tolerances |A| (tol w + e), columns by the unknowns'
    magnitudes w, as :func:`~jaxmbd.newton.factor_matrix`) and factor. Auxiliary unknowns
    take the scale of the first unknowns' (accelerations')."""
    st = matrix.structure
    w = _full(matrix, w, w[0])
    allowed = _full(matrix, allowed, allowed[0])
    row = _row_scale(st, matrix.values, allowed)
    row = jnp.where(row > 0, row, 1.0)
    Wn, Rn = st.to_nodes(w), st.to_nodes(row)
    Wn = jnp.where(Wn > 0, Wn, 1.0)  # padding
    Rn = jnp.where(Rn > 0, Rn, 1.0)
    scaled = matrix.values * Wn[st.slot_col][:, None, :] / Rn[st.slot_row][:, :, None]
    vals, dinv, pmin, pmax = factor_values(st, scaled)
    rcond = pmin / pmax
    rcond = jnp.where(jnp.isfinite(rcond), rcond, 0.0)
    return BlockFactors(vals, dinv, w, row, rcond, st, matrix.n_original)


def factor_plain(matrix: BlockMatrix) -> BlockFactors:
    """Factors without equilibration (tangent solves of the implicit gradients)."""
    st = matrix.structure
    vals, dinv, pmin, pmax = factor_values(st, matrix.values)
    one = jnp.ones(st.n, matrix.values.dtype)
    return BlockFactors(vals, dinv, one, one, pmin / pmax, st, matrix.n_original)


def factors_solve(factors: BlockFactors, rhs, transpose: bool = False):
    """A^{-1} rhs (or A^{-T} rhs) for the system's own unknowns (auxiliary ones eliminated)."""
    st = factors.structure
    if not transpose:
        b = _full(factors, rhs, 0.0) / factors.row
        x = factors.col * solve_values(st, factors.values, factors.dinv, b)
    else:
        b = _full(factors, rhs, 0.0) * factors.col
        x = solve_values(st, factors.values, factors.dinv, b, transpose=True) / factors.row
    return x[: factors.n_original]


def empty_factors(structure: BlockStructure, n_original: int, dtype=jnp.float64) -> BlockFactors:
    """NaN placeholder with the shapes of real factors (the reused Newton matrix's start)."""
    S, N, b, n = structure.num_slots, structure.num_nodes, structure.b, structure.n
    nan = jnp.asarray(jnp.nan, dtype)
    return BlockFactors(
        jnp.full((S + 3, b, b), nan),
        jnp.full((N + 2, b, b), nan),
        jnp.full((n,), nan),
        jnp.full((n,), nan),
        nan,
        structure,
        n_original,
    )


__all__ = [
    "BlockStructure",
    "BlockMatrix",
    "BlockFactors",
    "factor_block_matrix",
    "factor_plain",
    "factors_solve",
    "empty_factors",
    "factor_values",
    "solve_values",
]
