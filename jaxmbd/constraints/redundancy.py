"""Redundant constraint rows: found once from the model, dropped (or refused) before a run.

A closed loop drawn with the joints users draw is often overconstrained in 3-D: a planar
four-bar of four revolute joints has 20 rows on 18 body coordinates and 1 degree of freedom,
so 3 of its rows are linear combinations of the others at every configuration of the loop.
Their Jacobian G is rank deficient, every Newton matrix and KKT matrix built from it is
singular, and the multipliers are not unique. The other engines run such loops, so must we.

**What is found** (:func:`find_redundancy`, run by ``ModelBuilder.build`` on the model as
drawn). The rank of the rA constraint Jacobian (rows with respect to the body twists
(delta r, theta_bar), :func:`~jaxmbd.constraints.equations.rA_rows`) at the initial pose and t = 0,
by a
rank-revealing QR with a priority pivot order (modified Gram-Schmidt, re-orthogonalised,
that keeps a row only if its part outside the span of the rows kept before it is larger than
``rtol`` times its norm; :data:`REDUNDANCY_RTOL` = 1e-8). The order prefers whole joints and
tree joints, with a loop's closing joint last:

* the body graph's spanning tree (:func:`~jaxmbd.model._topology.body_graph`, joints in model
  order): the rows of a tree pair of bodies are independent of every other tree pair's (the
  tree's rows are block triangular in (pair, child body)), so each pair is reduced on its
  child's six columns alone;
* then the rows of the pairs that close loops, in model order, projected off the span of
  the kept tree rows (a sparse LU of T T^T, so large trees with few loops stay cheap).

Rows are compared after scaling: rotation columns by the model's characteristic length (the
median body-fixed joint offset), each row to unit norm. A structurally redundant row's part
outside the others is round-off (~1e-15); ``rtol`` is far above that and far below what a
row of a regular configuration leaves.

**What is done with it.** The selection is static model data (``Model.redundancy``), so
``jit``, ``vmap`` and ``grad`` keep working. ``simulate``/``kinematics`` with
``redundant="drop"`` (default) run the model without the dropped rows
(:func:`without_redundant_rows`) and report zero multipliers for them; ``redundant="error"``
refuses the model, naming the rows. The dropped rows stay satisfied as long as the kept ones
are (that is what structural redundancy means); :func:`~jaxmbd.analysis.diagnostics.joint_violation`
reports them like every row. A rank that changes during a run (a singular configuration,
not a redundancy) is still reported ILL_CONDITIONED at that step: nothing is solved in the
least-squares sense.

A driven row (a prescribed motion) that depends on the others is refused by the run (not by
``build``, whose initial pose need not be consistent): the mechanism has no freedom left for
it at the initial pose.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._results import ILL_CONDITIONED, SUCCESS
from ..compiled.jit import jit
from ..errors import ModelError, RedundancyWarning
from ..gcons import gcon_kind
from ..model._topology import body_graph
from ..model.drivers import compiled_driver_values
from .equations import _row_bodies, constraint_values

#: Relative tolerance of the rank decision (see the module docstring).
REDUNDANCY_RTOL = 1e-8

#: A dropped row whose residual exceeds this (times the characteristic length L for rows
#: in length units, L^2 for distance rows) at a saved step marks that step ILL_CONDITIONED:
#: the kept rows stopped implying it (the redundancy was not structural along this motion).
DRIFT_TOL = 1e-6

REDUNDANT_OPTIONS = ("drop", "error")


@dataclass(frozen=True)
class Redundancy:
    """Redundant rows of a model (static). ``dropped``: model row indices; ``rank``: the
    rank of the constraint Jacobian at the initial pose; ``loops``: per closing pair with
    dropped rows, (joint names, body names around the loop)."""

    rank: int
    dropped: tuple[int, ...] = ()
    loops: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    rtol: float = REDUNDANCY_RTOL
    length: float = 1.0  # the characteristic length that scaled the rotation columns

    def describe(self, model) -> str:
        rows = ", ".join(f"'{model.constraint_names[r]}'" for r in self.dropped)
        closes = "; ".join(
            f"joint{'s' if len(joints) > 1 else ''} {', '.join(repr(j) for j in joints)} "
            f"{'close' if len(joints) > 1 else 'closes'} the loop {' - '.join(bodies)}"
            for joints, bodies in self.loops
        )
        return (
            f"model '{model.name}': {len(self.dropped)} of {model.nc} constraint rows are "
            f"redundant (rank {self.rank} at the initial pose, relative tolerance "
            f"{self.rtol:g}): {rows}" + (f"; {closes}" if closes else "")
        )


def _greedy(vectors: np.ndarray, rtol: float, *, normalise: bool = True) -> list[int]:
    """Indices of ``vectors`` (rows, in priority order) kept by Gram-Schmidt with one
    re-orthogonalisation (CGS2): a row whose part outside the span of the rows kept before
    it is at most ``rtol`` of its norm (``normalise``) or of 1 (rows that were unit before
    a projection) is dependent."""
    n = vectors.shape[1] if vectors.ndim == 2 else 0
    basis = np.zeros((min(len(vectors), n), n))
    kept: list[int] = []
    for k, row in enumerate(vectors):
        norm = np.linalg.norm(row)
        if norm == 0.0:
            continue
        rest = row / norm if normalise else row.copy()
        B = basis[: len(kept)]
        for _ in range(2):
            rest = rest - B.T @ (B @ rest)
        size = np.linalg.norm(rest)
        if size > rtol:
            basis[len(kept)] = rest / size
            kept.append(k)
    return kept


def _most_robust(rest: np.ndarray, k: int, rtol: float) -> list[int]:
    """Indices of the rows of ``rest`` to keep when ``k`` of them depend on the others:
    drop the k rows that carry the largest share of the dependencies. The left null space
    Y (n x k, rest^T Y = 0, from the SVD) holds the self-stresses; the rows dropped are the
    first k pivots of a column-pivoted QR of Y^T (the best-conditioned k x k block of Y), so
    the kept rows are independent by the widest margin at the initial pose and stay so the
    longest as the self-stresses turn with the motion. (Dropping the last dependent row in
    model order instead can pick a row whose self-stress share is small: the six-body
    linkage left its loop within 0.3 s that way.)"""
    U, s, _ = np.linalg.svd(rest, full_matrices=True)
    Y = U[:, rest.shape[0] - k :]
    drop = set(_pivots_breaking_ties(Y, k))
    kept = [i for i in range(rest.shape[0]) if i not in drop]
    if len(_greedy(rest[kept], rtol, normalise=False)) != len(kept):  # cannot happen in exact
        raise RuntimeError("redundancy: the kept closure rows are not independent")  # arithmetic
    return kept


#: Shares within this relative distance of the largest are a tie, broken by model order.
TIE_RTOL = 1e-9


def _pivots_breaking_ties(Y: np.ndarray, k: int) -> list[int]:
    """The first k pivots of a column-pivoted QR of ``Y``^T (Businger-Golub: the row of Y
    with the largest remaining norm, then the others' components along it removed), except
    that norms within :data:`TIE_RTOL` of the largest count as equal and the first such row
    in model order wins. Symmetric mechanisms have exact ties (the six-body linkage's two
    DP1 rows of its closing joint carry equal self-stress shares), and LAPACK's pivoted QR
    breaks them by round-off, which differs between CPUs (AVX2 and AVX-512 kernels chose
    different rows): the model's rows must not depend on the machine that built it. The
    remaining norms depend on the null space only, not on the basis the SVD returned."""
    remaining = np.array(Y, dtype=float)
    chosen: list[int] = []
    for _ in range(k):
        norms = np.linalg.norm(remaining, axis=1)
        norms[chosen] = -1.0
        best = norms.max()
        pivot = int(np.flatnonzero(norms >= best * (1.0 - TIE_RTOL))[0])
        chosen.append(pivot)
        direction = remaining[pivot] / np.linalg.norm(remaining[pivot])
        remaining = remaining - np.outer(remaining @ direction, direction)
    return chosen


def _characteristic_length(model) -> float:
    lengths = []
    for s in model.gcons:
        for field in (s.s_bar_p_i, s.s_bar_q_j):
            n = np.linalg.norm(np.asarray(field), axis=-1)
            lengths.extend(n[n > 0].tolist())
    return float(np.median(lengths)) if lengths else 1.0


def _project_off(tree_rows, closing) -> np.ndarray:
    """``closing`` (k, 6 nb) minus its projection on the row space of the sparse
    ``tree_rows`` (full row rank), with one refinement step."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    if tree_rows.shape[0] == 0:
        return closing
    gram = (tree_rows @ tree_rows.T).tocsc()
    lu = spla.splu(gram)
    rest = closing.copy()
    for _ in range(2):
        y = lu.solve(np.asarray(tree_rows @ rest.T))
        rest = rest - np.asarray((tree_rows.T @ sp.csr_matrix(y)).todense()).T
    return rest


def _rows_numpy(model):
    """(jac_i, jac_j) (nc, 6): the rA Jacobian rows of every constraint at the initial pose,
    t = 0, in numpy: the formula of :func:`jaxmbd.constraints.equations.rA_rows` (each row as
    Phi = u.w - beta f), evaluated without compiling anything at model-build time (tested
    equal to ``rA_rows``)."""
    nc = model.nc
    P = {k: np.zeros((nc, 3)) for k in ("p_bar", "q_bar", "w_bar", "s_bar_p", "s_bar_q", "c")}
    alpha, delta, kappa = np.zeros(nc), np.zeros(nc), np.zeros(nc)
    for s in model.gcons:
        if s.size == 0:
            continue
        rows = np.asarray(s.rows, dtype=int)
        spec = gcon_kind(s.kind)
        host = jax.tree_util.tree_map(np.asarray, s)  # numpy: no eager op per vector
        for name, vector in spec.row_vectors(host).items():
            P[name][rows] = np.asarray(vector)
        alpha[rows], delta[rows], kappa[rows] = spec.alpha, spec.delta, spec.kappa
    f = np.asarray(model.f_offset)
    angle_rows = set(np.flatnonzero(kappa).tolist())
    if any(r in angle_rows for group in model.drivers for r in group.rows):  # only they need f
        f = np.asarray(compiled_driver_values(model.f_offset, model.drivers, 0.0))
    bi, bj = _row_bodies(model)
    r_all = np.concatenate([np.asarray(model.r0), np.zeros((1, 3))])
    A_all = np.concatenate([np.asarray(model.A0), np.eye(3)[None]])
    r_i, A_i, r_j, A_j = r_all[bi], A_all[bi], r_all[bj], A_all[bj]
    mv = lambda M, v: np.einsum("nij,nj->ni", M, v)  # noqa: E731
    tmv = lambda M, v: np.einsum("nji,nj->ni", M, v)  # noqa: E731
    angle = kappa * f
    u_bar = np.cos(angle)[:, None] * P["p_bar"] + np.sin(angle)[:, None] * P["q_bar"]
    d = r_j + mv(A_j, P["s_bar_q"]) - r_i - mv(A_i, P["s_bar_p"])
    u = mv(A_i, u_bar) + alpha[:, None] * d + P["c"]
    w = mv(A_j, P["w_bar"]) + delta[:, None] * d
    g = alpha[:, None] * w + delta[:, None] * u
    pi_i = np.cross(u_bar, tmv(A_i, w)) - np.cross(P["s_bar_p"], tmv(A_i, g))
    pi_j = np.cross(P["w_bar"], tmv(A_j, u)) + np.cross(P["s_bar_q"], tmv(A_j, g))
    return np.concatenate([-g, pi_i], 1), np.concatenate([g, pi_j], 1)


def find_redundancy(model, *, rtol: float = REDUNDANCY_RTOL) -> Redundancy:
    """The maximal independent set of constraint rows at the model's initial pose, t = 0
    (see the module docstring for the order and the tolerance)."""
    nb, nc = model.nb, model.nc
    if nc == 0:
        return Redundancy(rank=0)
    jac_i, jac_j = _rows_numpy(model)
    length = _characteristic_length(model)
    column_scale = np.r_[np.ones(3), np.full(3, 1.0 / length)]
    jac_i = np.asarray(jac_i) * column_scale
    jac_j = np.asarray(jac_j) * column_scale
    norms = np.sqrt(
        np.where(np.asarray(_row_bodies(model)[0]) < nb, np.sum(jac_i**2, 1), 0.0)
        + np.where(np.asarray(_row_bodies(model)[1]) < nb, np.sum(jac_j**2, 1), 0.0)
    )
    bi, bj = (np.asarray(b) for b in _row_bodies(model))
    graph = body_graph(nb, list(zip(bi.tolist(), bj.tolist(), strict=True)))
    pair_rows: dict[frozenset, list[int]] = {}
    for row in range(nc):
        pair_rows.setdefault(frozenset((int(bi[row]), int(bj[row]))), []).append(row)

    def full_row(row):  # the scaled row over the 6 nb body columns (the ground has none)
        out = np.zeros(6 * nb)
        if bi[row] < nb:
            out[6 * bi[row] : 6 * bi[row] + 6] += jac_i[row]
        if bj[row] < nb:
            out[6 * bj[row] : 6 * bj[row] + 6] += jac_j[row]
        return out / max(norms[row], np.finfo(float).tiny)

    kept: list[int] = []
    for i, j in graph.tree_pairs:
        rows = pair_rows[frozenset((i, j))]
        child = graph.child_of(i, j)
        block = np.stack([(jac_i[r] if bi[r] == child else jac_j[r]) for r in rows])
        kept += [rows[k] for k in _greedy(block, rtol)]
    closing_rows = [r for i, j in graph.closing_pairs for r in pair_rows[frozenset((i, j))]]
    if closing_rows:
        import scipy.sparse as sp  # a tree (no closing rows) does without loading scipy

        tree = sp.csr_matrix(np.stack([full_row(r) for r in kept])) if kept else None
        closing = np.stack([full_row(r) for r in closing_rows])
        rest = _project_off(tree, closing) if tree is not None else closing
        # the projection removed the tree's span; compare each remainder to its row's norm 1
        chosen = _greedy(rest, rtol, normalise=False)
        if len(chosen) < len(closing_rows):
            chosen = _most_robust(rest, len(closing_rows) - len(chosen), rtol)
        kept += [closing_rows[k] for k in chosen]
    dropped = tuple(sorted(set(range(nc)) - set(kept)))
    loops = []
    for (i, j), loop in zip(graph.closing_pairs, graph.loops, strict=True):
        rows = [r for r in pair_rows[frozenset((i, j))] if r in dropped]
        if rows:
            joints = tuple(dict.fromkeys(model.constraint_joints[r] for r in rows))
            bodies = tuple(model.body_label(b) for b in loop + (loop[0],))
            loops.append((joints, bodies))
    return Redundancy(rank=len(kept), dropped=dropped, loops=tuple(loops), rtol=rtol, length=length)


def refuse_driven(model, dropped) -> None:
    driven = {r for group in model.drivers for r in group.rows}
    bad = [r for r in dropped if r in driven]
    if bad:
        names = ", ".join(model.describe_constraint(r) for r in bad)
        raise ModelError(
            f"model '{model.name}': the driven row(s) {names} depend on the other constraints "
            "at the initial pose: the mechanism has no freedom left for the prescribed "
            "motion. Remove the driver or free the joint it drives."
        )


def without_redundant_rows(model):
    """``model`` without its redundant rows (``model.redundancy.dropped``): the model a run
    with ``redundant="drop"`` integrates. Static, so it works on traced models."""
    dropped = model.redundancy.dropped if model.redundancy is not None else ()
    return model.without_rows(dropped) if dropped else model


def rows_for_run(model, redundant: str, *, where: str, stacklevel: int = 3):
    """(the model to integrate, the kept rows or None): ``redundant="drop"`` warns once
    (:class:`RedundancyWarning`, naming the frame ``stacklevel`` counted as
    :func:`warnings.warn` counts: by default the analysis's caller) and drops the redundant
    rows, ``"error"`` refuses them."""
    if redundant not in REDUNDANT_OPTIONS:
        raise ValueError(
            f"{where}: redundant must be one of {REDUNDANT_OPTIONS}, got {redundant!r}"
        )
    info = model.redundancy
    if info is None or not info.dropped:
        return model, None
    refuse_driven(model, info.dropped)
    if redundant == "error":
        raise ModelError(
            f"{where}: {info.describe(model)}. redundant='drop' (the default) runs without "
            "them; or remove them from the model."
        )
    warnings.warn(
        f"{info.describe(model)}; they are dropped for this run and their multipliers are "
        "zero (redundant='error' refuses such models)",
        RedundancyWarning,
        stacklevel=stacklevel,
    )
    kept = tuple(r for r in range(model.nc) if r not in set(info.dropped))
    return model.without_rows(info.dropped), kept


def full_multipliers(lam, kept, nc: int):
    """Multipliers of the reduced model (..., len(kept)) as the model's (..., nc), zero on
    the dropped rows."""
    if kept is None:
        return lam
    out = jnp.zeros(lam.shape[:-1] + (nc,), lam.dtype)
    return out.at[..., np.asarray(kept)].set(lam)


def with_full_multipliers(outs, kept, model, h, save_every: int = 1):
    """An analysis' per-step outputs (r, A, rdot, omega, rddot, omegadot, lam, iterations,
    status, ...) of the reduced model as the full ``model``'s: lam expanded to its nc rows
    (:func:`full_multipliers`), and every saved step where a dropped row has drifted
    (:data:`DRIFT_TOL`) marked ILL_CONDITIONED unless it already failed."""
    if kept is None:
        return outs
    lam = full_multipliers(outs[6], kept, model.nc)
    t = jnp.arange(outs[0].shape[0]) * h * save_every
    status = _mark_drift(model, outs[0], outs[1], t, outs[8])
    return outs[:6] + (lam, outs[7], status) + tuple(outs[9:])


@jit
def _mark_drift(model, r, A, t, status):
    rows = np.asarray(model.redundancy.dropped)
    length = model.redundancy.length
    units = {"DP1": 1.0, "ROT": 1.0, "D": length * length}
    bound = DRIFT_TOL * np.asarray([units.get(model.constraint_kinds[k], length) for k in rows])
    phi = jax.vmap(lambda r_, A_, t_: constraint_values(model, r_, A_, t_)[rows])(r, A, t)
    drifted = jnp.any(~(jnp.abs(phi) <= bound), axis=1)  # NaN counts as drifted
    return jnp.where(drifted & (status == SUCCESS), ILL_CONDITIONED, status)
