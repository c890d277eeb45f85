"""Solves with the joint-space mass matrix M: a dense Cholesky factorisation for small trees,
the tree-sparse factorisation M = L^T D L for large ones.

The sparse factorisation is Featherstone's (*Rigid Body Dynamics Algorithms*, 2008,
section 6.2, Table 6.3, "LTDL"): with the dof parent array lambda (MuJoCo's
``dof_parentid``), M[k, i] is non-zero only when i is k, one of k's ancestors or one of its
descendants, and L keeps that pattern (no fill-in). Row k is reduced from the last dof to the
first: for every ancestor i of k, a = M[k, i] / M[k, k], then M[i, j] -= a M[k, j] for i and
every ancestor j of i, and M[k, i] = a. The solve is section 6.3's back and forward
substitution (L^T y = b over the ancestors, deepest first; y / D; L x = y, root first).
MuJoCo C does the same in ``mj_factorI`` / ``mj_solveLD`` (``engine_core_smooth.c``, called
by ``mj_factorM`` / ``mj_solveM``), row by row with the rows stored as a dof's chain of
ancestors; so does this module.

Row k's reduction needs only that every descendant of k is done, and two dofs at the same
depth never read each other's rows, so the rows are reduced one depth level at a time, the
deepest first, each level in one vectorised update (the order MJX's ``factor_m`` uses):
the level's rows are stored contiguously (dofs sorted by depth), and each of its rows gathers
the contributions of all its descendants through a padded index table built on the host
from lambda. The schedule (one Python step per depth level, at trace time) is static; there
is no scatter and no loop over dofs in the traced program, and every division is by a pivot
of M (positive for a positive definite M), so values and gradients stay finite.

Which one a tree uses is :attr:`KinematicTree.mass_solver` (``"auto"``: LTDL from
:data:`LTDL_MIN_NV` dofs on and up to :data:`LTDL_MAX_DEPTH` dofs along a chain, where
``benchmarks/mass_factor.py`` measured it faster). Forward dynamics without constraint rows
on deep or large trees skip M's factor altogether (:mod:`jaxmbd.tree.articulated`).
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from .. import _config  # noqa: F401
from ..compiled.small import _sum_along
from ..compiled.xla_flags import joint_loops_hoisted_when_differentiated
from ..errors import ModelError
from ._elementwise import UNROLLED_CHOLESKY_MAX, cholesky_factor, cholesky_factor_solve
from .topology import KinematicTree

#: ``mass_solver="auto"`` factors M by LTDL from this many dofs on: below it the dense
#: Cholesky is unrolled at trace time and faster (``benchmarks/mass_factor.py``; the
#: performance guide).
LTDL_MIN_NV = UNROLLED_CHOLESKY_MAX + 1

#: ... and while no chain of dofs is longer than this: the factorisation takes one step per
#: depth level, and on deeper trees (long chains, whose M is dense anyway) the steps' kernels
#: cost more than the dense loop and their compile time grows with the depth (measured: a
#: 48-deep chain 2x faster than dense, a 96-deep one 2x slower).
LTDL_MAX_DEPTH = 48


def dof_parents(tree: KinematicTree) -> tuple[int, ...]:
    """Featherstone's dof parent array lambda (-1: none), MuJoCo's ``dof_parentid``: a dof's
    parent is the previous dof on its body, the first dof of a body the last dof of its
    nearest ancestor body that has dofs (each before the dof, as the tree order keeps them)."""
    dof_body = tree.dof_body
    last = {b: k for k, b in enumerate(dof_body)}  # body -> its last dof
    out = []
    for k, b in enumerate(dof_body):
        if k > 0 and dof_body[k - 1] == b:
            out.append(k - 1)
            continue
        p = tree.parent[b]
        while p >= 0 and p not in last:
            p = tree.parent[p]
        parent = last[p] if p >= 0 else -1
        if parent >= k:
            raise ModelError(
                f"kinematic tree: the dofs of body '{tree.body_names[b]}' come before those "
                "of its ancestors (joints must be in tree order)"
            )
        out.append(parent)
    return tuple(out)


def uses_ltdl(tree: KinematicTree) -> bool:
    """Whether solves with this tree's M use the sparse L^T D L factorisation."""
    if tree.mass_solver in ("auto", "articulated"):
        if tree.nv < LTDL_MIN_NV:
            return False
        return schedule(dof_parents(tree)).max_depth <= LTDL_MAX_DEPTH
    return tree.mass_solver == "ltdl"


#: ``checkpoint_name`` of the factor of M that :func:`mass_solve` computes (a policy of
#: ``jax.checkpoint`` can keep it instead of recomputing it in reverse mode).
MASS_FACTOR = "jaxmbd_mass_factor"


#: A dense factor of M over this many dofs warns once (:func:`mass_solve`): it costs
#: O(nv^3) a step, and the articulated-body algorithm O(nv).
DENSE_WARN_NV = 200

_warned: set = set()


def mass_solver_name(tree: KinematicTree) -> str:
    """What factors or inverts this tree's M: ``"articulated"`` (forward dynamics without
    constraint rows by the articulated-body algorithm, :mod:`jaxmbd.tree.articulated`),
    ``"ltdl"`` or ``"cholesky"`` (dense)."""
    from .articulated import uses_articulated

    if uses_articulated(tree):
        return "articulated"
    return "ltdl" if uses_ltdl(tree) else "cholesky"


def _warn_dense(tree: KinematicTree) -> None:
    key = (tree.parent, tree.joint_type)
    if tree.nv <= DENSE_WARN_NV or key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        f"kinematic tree with {tree.nv} dofs: its mass matrix is factored densely "
        f"(O(nv^3) a step, mass_solver={tree.mass_solver!r}); the articulated-body "
        "algorithm (mass_solver='articulated', the default for deep or large trees) costs "
        "O(nv) where the run has no constraint rows",
        stacklevel=3,
    )


def mass_solve(tree: KinematicTree, M, rhs):
    """M^-1 rhs for the tree's mass matrix M (nv, nv) and rhs (nv,) or (nv, k), by the
    factorisation :func:`uses_ltdl` picks. Solve several right-hand sides in one call: each
    call factors M once. M must have the tree's sparsity (the composite rigid body
    algorithm's M plus diagonal terms): L^T D L reads only the entries M[k, j] with j an
    ancestor of k or k itself."""
    if uses_ltdl(tree):
        factor = ltdl_factor(tree, M)

        def solve(b):
            return ltdl_solve(tree, factor, b)
    else:
        _warn_dense(tree)
        factor = cholesky_factor(M)

        def solve(b):
            return cholesky_factor_solve(factor, b)

    factor = checkpoint_name(factor, MASS_FACTOR)
    if not uses_ltdl(tree) or not joint_loops_hoisted_when_differentiated():
        return solve(rhs)
    # reverse mode: the cotangent of rhs is one more solve with the same factor
    # (M = M^T) and that of M the product -(M^-1 cotangent) x^T, instead of the
    # transposed factorisation and substitutions, whose index gathers transpose to
    # scatters (XLA's CPU backend then runs the enclosing loop op by op,
    # :mod:`jaxmbd.compiled.xla_flags`). The dense Cholesky is elementwise, its transpose has no
    # scatter: it keeps its own derivative (arm3's gradient ran alike either way, within
    # the noise of benchmarks/results/gradients_defaults.md).
    return jax.lax.custom_linear_solve(
        lambda x: _times(M, x), rhs, lambda _, b: solve(b), symmetric=True
    )


def _times(M, x):
    """M x for x (n,) or (n, k), elementwise (no ``dot``: :mod:`jaxmbd.compiled.xla_flags`)."""
    if x.ndim == 1:
        return _sum_along(M * x[None, :], -1)
    return _sum_along(M[:, :, None] * x[None, :, :], -2)


class _Level(NamedTuple):
    """The rows at one depth g (g entries each: the diagonal, then the ancestors)."""

    depth: int
    start: int  # first row in depth order
    offset: int  # first entry in the packed factor
    rows: int
    # descendants of each row, padded: their packed address of (k, this row) and of
    # (k, k), and their row in depth order (pads: the zero tail, entry 0, row 0)
    below: np.ndarray  # (rows, m)
    pivot: np.ndarray  # (rows, m)
    below_row: np.ndarray  # (rows, m)
    ancestor_row: np.ndarray  # (rows, g - 1): rows in depth order of the strict ancestors


class _Schedule(NamedTuple):
    order: np.ndarray  # dofs in depth order
    inverse: np.ndarray  # position of each dof in depth order
    entry_row: np.ndarray  # (nnz,) dof of each packed entry
    entry_col: np.ndarray  # (nnz,) its ancestor
    diagonal: np.ndarray  # (nnz,) packed address of the row's diagonal
    levels: tuple[_Level, ...]
    nnz: int
    max_depth: int


@functools.lru_cache(maxsize=64)
def schedule(parents: tuple[int, ...]) -> _Schedule:
    """The packed layout and the level schedule of the factorisation for the dof parent
    array ``parents`` (host arrays, cached)."""
    nv = len(parents)
    chains = []
    for k in range(nv):
        chain, j = [k], parents[k]
        while j >= 0:
            chain.append(j)
            j = parents[j]
        chains.append(chain)
    depth = np.array([len(c) for c in chains], dtype=int)
    order = np.array(sorted(range(nv), key=lambda k: (depth[k], k)), dtype=int)
    inverse = np.empty(nv, dtype=int)
    inverse[order] = np.arange(nv)
    address = np.empty(nv, dtype=int)  # packed address of each dof's diagonal
    entry_row, entry_col, diagonal = [], [], []
    for k in order:
        address[k] = len(entry_row)
        entry_row += [k] * depth[k]
        entry_col += chains[k]
        diagonal += [address[k]] * depth[k]
    nnz = len(entry_row)
    descendants = [[] for _ in range(nv)]
    for k in range(nv):
        for i in chains[k][1:]:
            descendants[i].append(k)
    levels = []
    top = int(depth.max(initial=0))
    for g in range(1, top + 1):
        rows = [int(k) for k in order if depth[k] == g]
        m = max((len(descendants[i]) for i in rows), default=0)
        below = np.full((len(rows), m), nnz, dtype=int)
        pivot = np.zeros((len(rows), m), dtype=int)
        below_row = np.zeros((len(rows), m), dtype=int)
        for r, i in enumerate(rows):
            for s, k in enumerate(descendants[i]):
                below[r, s] = address[k] + depth[k] - g
                pivot[r, s] = address[k]
                below_row[r, s] = inverse[k]
        ancestor_row = np.array([[inverse[j] for j in chains[i][1:]] for i in rows], dtype=int)
        levels.append(
            _Level(
                depth=g,
                start=int(inverse[rows[0]]),
                offset=int(address[rows[0]]),
                rows=len(rows),
                below=below,
                pivot=pivot,
                below_row=below_row,
                ancestor_row=ancestor_row.reshape(len(rows), g - 1),
            )
        )
    return _Schedule(
        order=order,
        inverse=inverse,
        entry_row=np.asarray(entry_row, dtype=int),
        entry_col=np.asarray(entry_col, dtype=int),
        diagonal=np.asarray(diagonal, dtype=int),
        levels=tuple(levels),
        nnz=nnz,
        max_depth=top,
    )


def _replace_block(x, start, block):
    return jax.lax.dynamic_update_slice_in_dim(x, block, start, axis=0)


def ltdl_factor(tree: KinematicTree, M):
    """M = L^T D L (Featherstone 2008, section 6.2, Table 6.3; MuJoCo's ``mj_factorI``),
    packed: the dofs in depth order, each dof's row of depth entries: D[k], then
    L[k, lambda(k)], L[k, lambda(lambda(k))], ... Levels are reduced deepest first, every
    row of a level at once from its descendants' finished rows (module docstring)."""
    sch = schedule(dof_parents(tree))
    ld = M[sch.entry_row, sch.entry_col]
    ld = jnp.concatenate([ld, jnp.zeros(sch.max_depth, ld.dtype)])  # pads read zeros
    for level in reversed(sch.levels):
        if level.below.shape[1] == 0:
            continue  # leaves only
        g = level.depth
        # a = M[k, i] / M[k, k] for each descendant k of each row i; M[i, j] -= a M[k, j]
        a = ld[level.below] / ld[level.pivot]  # (rows, m)
        columns = ld[level.below[..., None] + np.arange(g)]  # (rows, m, g)
        size = level.rows * g
        reduced = ld[level.offset : level.offset + size] - jnp.sum(
            a[..., None] * columns, axis=1
        ).reshape(size)
        ld = _replace_block(ld, level.offset, reduced)
    ld = ld[: sch.nnz]
    # L[k, i] = M[k, i] / M[k, k] off the diagonal, D[k] = M[k, k] on it
    pivots = ld[sch.diagonal]
    is_diagonal = jnp.asarray(sch.diagonal == np.arange(sch.nnz))
    return jnp.where(is_diagonal, ld, ld / pivots)


def ltdl_solve(tree: KinematicTree, ld, rhs):
    """M^-1 rhs from the packed factor of :func:`ltdl_factor`, rhs (nv,) or (nv, k): L^T y =
    rhs, z = D^-1 y, L x = z (Featherstone 2008, section 6.3; MuJoCo's ``mj_solveLD``), a
    depth level at a time."""
    sch = schedule(dof_parents(tree))
    if tree.nv == 0:
        return rhs
    ld_padded = jnp.concatenate([ld, jnp.zeros(1, ld.dtype)])
    x = rhs[sch.order]
    extra = (None,) * (rhs.ndim - 1)
    # L^T y = b: y_i = b_i - sum over descendants k of L[k, i] y_k, the deepest level first
    for level in reversed(sch.levels):
        if level.below.shape[1] == 0:
            continue
        coefficients = ld_padded[level.below][(...,) + extra]  # pads: the zero tail
        update = jnp.sum(coefficients * x[level.below_row], axis=1)
        block = x[level.start : level.start + level.rows] - update
        x = _replace_block(x, level.start, block)
    diagonal = ld[np.array([lv.offset + r * lv.depth for lv in sch.levels
                            for r in range(lv.rows)], dtype=int)]  # fmt: skip
    x = x / diagonal[(slice(None),) + extra]
    # L x = z: x_i = z_i - sum over ancestors j of L[i, j] x_j, the root level first
    for level in sch.levels[1:]:
        g = level.depth
        entries = level.offset + g * np.arange(level.rows)[:, None] + np.arange(1, g)
        coefficients = ld[entries][(...,) + extra]  # (rows, g - 1)
        products = coefficients * x[level.ancestor_row]
        update = _sum_along(products, 1 - products.ndim) if g - 1 else 0.0
        block = x[level.start : level.start + level.rows] - update
        x = _replace_block(x, level.start, block)
    return x[sch.inverse]


def ltdl_dense(tree: KinematicTree, ld):
    """(L, D) as a dense unit lower triangular (nv, nv) and a vector (nv,) from the packed
    factor: M = L^T D L (for tests and inspection)."""
    sch = schedule(dof_parents(tree))
    off = sch.entry_row != sch.entry_col
    L = jnp.eye(tree.nv, dtype=ld.dtype).at[sch.entry_row[off], sch.entry_col[off]].set(ld[off])
    D = jnp.zeros(tree.nv, ld.dtype).at[sch.entry_row[~off]].set(ld[~off])
    return L, D
