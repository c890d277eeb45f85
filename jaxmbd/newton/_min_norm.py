"""The minimum-norm solution of an underdetermined linear system G x = b.

For G (m, n) of full row rank m <= n, the x of least norm with G x = b is

    x = G^T (G G^T)^{-1} b,

the correction of a Gauss-Newton projection onto the constraints Phi = 0 and of a velocity
projection onto G v = nu. The m x m solve reports its conditioning with the pivot-ratio
test of every linear solve (:func:`jaxmbd.newton.solve_with_condition`): dependent rows
of G make G G^T singular, status NONFINITE or ILL_CONDITIONED, never a silent
least-squares answer. Only where dependent rows are expected and wanted (an
overconstrained closed loop, ``redundant=True``) is the SVD pseudo-inverse used instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import NONFINITE, SUCCESS
from . import solve_with_condition

#: Relative singular-value cut-off of the pseudo-inverse for dependent rows: well above
#: round-off, so a rank-deficient G is treated as exactly rank-deficient.
PINV_RTOL = 1e-10


def min_norm_solve(G, rhs, *, redundant: bool = False) -> tuple[jax.Array, jax.Array]:
    """``(x, status)``: the minimum-norm x with G x = rhs (``rhs`` (m,) or (m, k)).

    Full row rank (default): x = G^T (G G^T)^{-1} rhs, status of the m x m solve (SUCCESS,
    ILL_CONDITIONED or NONFINITE). ``redundant=True`` (dependent rows expected): x = G^+ rhs
    by the SVD pseudo-inverse with relative cut-off :data:`PINV_RTOL`, status SUCCESS
    where x is finite; also the least-squares x of an overdetermined G, whose derivative
    stays finite at repeated singular values, where ``jnp.linalg.lstsq``'s is NaN."""
    if redundant:
        x = jnp.linalg.pinv(G, rtol=PINV_RTOL) @ rhs
        return x, jnp.where(jnp.all(jnp.isfinite(x)), SUCCESS, NONFINITE)
    y, status = solve_with_condition(G @ G.T, rhs)
    return G.T @ y, status


__all__ = ["PINV_RTOL", "min_norm_solve"]
