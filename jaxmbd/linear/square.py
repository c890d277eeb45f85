"""Square constraint Jacobians (0-DOF kinematics) solved by block elimination.

Kinematic analysis solves G x = b (position corrections, velocities, accelerations) and
G_rA^T lam = c (inverse dynamics) with a square constraint Jacobian G. Its rows and columns
do not pair up body by body (a body's columns meet the rows of every joint it touches), so
G itself has no block diagonal to eliminate on. Its saddle-point embedding

    K = [[I, G^T], [G, 0]]    (unknowns: the n columns, then one multiplier per row)

has the block structure of the index-1 KKT systems (:func:`~jaxmbd.linear.graph.
newton_layout`: each body with the rows of the joint to its parent), and for a square,
nonsingular G

    K [x; y] = [0; b]  gives  G x = b  (G^T y = -x and G x = b: x = G^{-1} b),
    K [x; y] = [c; 0]  gives  G x = 0, so x = 0 and G^T y = c.

So both solves run on the structured factors of K, and cost O(N) on a tree of N bodies
instead of the dense LU's O(N^3). The rows of G are equilibrated first (divided by their
largest entry), as the dense :func:`~jaxmbd.newton.checked_solver` does.

Only the factorisation is structured: G arrives dense from the formulation (n x n), and
the blocks of K are gathered from it (static indices).
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from .graph import Layout, newton_layout
from .structured import BlockStructure, factor_values, solve_values


def square_layout(model, *, tangent_size: int, extra_rows: bool) -> Layout:
    """The block layout of K for a formulation's G (``extra_rows``: one row per body after
    the constraint rows, rp's normalisation)."""
    return newton_layout(model, tangent_size=tangent_size, extra_rows=extra_rows)


def _embedding_indices(structure: BlockStructure, n: int, m: int):
    """Static gather indices of K's blocks from G padded with a zero row and column
    ((m + 1) x (n + 1)): per slot entry, the (row, column) of G it copies (the pad for a
    zero), and the identity mask of the I block."""
    cache = structure.cache
    key = ("square embedding", n, m)
    if key not in cache:
        rows = structure.node_index[structure.slot_row][:, :, None]  # (S, b, 1), pad = n + m
        cols = structure.node_index[structure.slot_col][:, None, :]  # (S, 1, b)
        rows, cols = np.broadcast_arrays(rows, cols)
        total = n + m
        x_row, x_col = rows < n, cols < n
        y_row = (rows >= n) & (rows < total)
        y_col = (cols >= n) & (cols < total)
        g_row = np.full(rows.shape, m)
        g_col = np.full(rows.shape, n)
        lower = y_row & x_col  # the G block: K[n + i, j] = G[i, j]
        g_row[lower], g_col[lower] = rows[lower] - n, cols[lower]
        upper = x_row & y_col  # the G^T block: K[j, n + i] = G[i, j]
        g_row[upper], g_col[upper] = cols[upper] - n, rows[upper]
        identity = x_row & x_col & (rows == cols)
        cache[key] = (g_row, g_col, identity)
    return cache[key]


def factor_square(layout: Layout, G) -> tuple[Callable, jnp.ndarray]:
    """Factor K = [[I, G^T], [G, 0]] for a square G (rows equilibrated): returns
    ``(solve, rcond)`` as :func:`~jaxmbd.newton.checked_solver`, with ``solve(rhs,
    transpose=False)`` giving G^{-1} rhs (or G^{-T} rhs) and ``rcond`` the worst pivot
    ratio of one pivot block of K (0 for a singular or non-finite G)."""
    st = layout.structure
    m, n = G.shape
    if st.n != n + m:
        raise ValueError(
            f"square solve: G is {m} x {n} but the layout has {st.n} unknowns (expected "
            f"{n + m}); kinematic analysis needs a square constraint Jacobian"
        )
    row = jnp.max(jnp.abs(G), axis=1)
    row = jnp.where(row > 0, row, 1.0)  # an all-zero row: singular, caught by the pivots
    scaled = jnp.pad(G / row[:, None], ((0, 1), (0, 1)))
    g_row, g_col, identity = _embedding_indices(st, n, m)
    values = scaled[g_row, g_col] + jnp.asarray(identity, G.dtype)
    vals, dinv, pmin, pmax = factor_values(st, values)
    rcond = pmin / pmax
    finite = jnp.all(jnp.isfinite(dinv)) & jnp.isfinite(rcond)
    rcond = jnp.where(finite, rcond, 0.0)

    def solve(rhs, transpose: bool = False):
        if transpose:  # G^T lam = c with G = D Gs: Gs^T (D lam) = c
            full = jnp.concatenate([rhs, jnp.zeros(m, rhs.dtype)])
            return solve_values(st, vals, dinv, full)[n:] / row
        full = jnp.concatenate([jnp.zeros(n, rhs.dtype), rhs / row])
        return solve_values(st, vals, dinv, full)[:n]

    return solve, rcond


def layout_for_formulation(model, form) -> Layout:
    """:func:`square_layout` for a formulation's G (rows: constraints, then its extra rows)."""
    extra = form.num_multipliers(model) - model.nc
    if extra not in (0, model.nb):
        raise ValueError(
            f"structured solver: formulation {form.name!r} has {extra} extra rows; only none "
            "or one per body are supported"
        )
    return square_layout(model, tangent_size=form.tangent_size, extra_rows=extra > 0)


__all__ = ["factor_square", "layout_for_formulation", "square_layout"]
