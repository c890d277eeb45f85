"""Loop-closing constraints in joint coordinates: the model's GCON rows that are not tree
joints, Phi(q, t) = 0 on the bodies' poses from the forward kinematics.

Their Jacobian G = dPhi(q (+) delta)/d delta at delta = 0 (the retraction of
:func:`jaxmbd.tree.integrate_positions`, so G maps qvel), the right-hand sides
nu = -dPhi/dt and gamma = -d^2/ds^2 Phi(q (+) s qvel, t + s) at s = 0 (the curve has zero
joint acceleration, so what remains is the velocity-quadratic part) come from autodiff."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .. import _config  # noqa: F401
from ..equations import constraint_values
from ..model import Model
from ..tree import KinematicTree, cholesky_solve, integrate_positions, poses
from ..tree._elementwise import mtv, mv, row_products


class Loops(NamedTuple):
    """The loop rows as a model of their own (``model`` with only those rows), their row
    indices in the full model, and whether they are known to be independent (found at a
    concrete start, :func:`independent_rows`): then their normal matrices are positive
    definite and solved by Cholesky; else by least squares."""

    model: Model
    rows: tuple[int, ...]
    independent: bool = False


def loop_rows(model: Model, tree: KinematicTree) -> tuple[int, ...]:
    """The rows of the joints that close loops (``tree.closing_joints``)."""
    closing = set(tree.closing_joints)
    return tuple(k for k, joint in enumerate(model.constraint_joints) if joint in closing)


def loops_of(model: Model, tree: KinematicTree, rows=None, *, independent=False) -> Loops | None:
    rows = loop_rows(model, tree) if rows is None else tuple(rows)
    if not rows:
        return None
    drop = [k for k in range(model.nc) if k not in set(rows)]
    return Loops(model.without_rows(drop) if drop else model, rows, independent)


def solve_normal(loops: Loops, A, B, rhs):
    """x with (A B^T) x = rhs for the loops' (m, n) Jacobian-like A and B (A B^T is G Y or
    G G^T): Cholesky for independent rows, least squares otherwise."""
    matrix = row_products(A, B)
    if loops.independent:
        return cholesky_solve(matrix, rhs)
    return jnp.linalg.lstsq(matrix, rhs)[0]


def loop_residual(loops: Loops, tree: KinematicTree, qpos, t):
    p = poses(tree, qpos)
    return constraint_values(loops.model, p.c, p.R, t)


def loop_jacobian(loops: Loops, tree: KinematicTree, qpos, t):
    """(Phi, G) at (qpos, t)."""

    def phi(delta):
        return loop_residual(loops, tree, integrate_positions(tree, qpos, delta, 1.0), t)

    zero = jnp.zeros(tree.nv, qpos.dtype)
    return phi(zero), jax.jacfwd(phi)(zero)


def loop_terms(loops: Loops, tree: KinematicTree, qpos, qvel, t):
    """(Phi, G, nu, gamma) at (qpos, qvel, t)."""
    zero = jnp.zeros((), qpos.dtype)

    def along(s):
        q = integrate_positions(tree, qpos, s * qvel, 1.0)
        return loop_residual(loops, tree, q, t + s)

    def rate(s):
        return jax.jvp(along, (s,), (jnp.ones_like(s),))[1]

    phi, G = loop_jacobian(loops, tree, qpos, t)
    _, phi_t = jax.jvp(lambda s: loop_residual(loops, tree, qpos, t + s), (zero,), (1.0 + zero,))
    gamma = -jax.jvp(rate, (zero,), (jnp.ones_like(zero),))[1]
    return phi, G, -phi_t, gamma


def project(loops: Loops, tree: KinematicTree, qpos, qvel, t, *, iterations: int = 1):
    """qpos and qvel projected onto Phi = 0 and G qvel = nu: Gauss-Newton steps
    delta = -G^T (G G^T)^-1 Phi (the least-norm correction), then the velocity's least-norm
    correction. After a step of an explicit method the drift is of the step's truncation
    order, so one step brings it to round-off."""

    def newton(qpos):
        phi, G = loop_jacobian(loops, tree, qpos, t)
        return integrate_positions(tree, qpos, -mtv(G, solve_normal(loops, G, G, phi)), 1.0)

    if iterations == 1:
        qpos = newton(qpos)
    else:
        qpos = jax.lax.fori_loop(0, iterations, lambda _, q: newton(q), qpos)
    # G at the corrected positions, and nu = -dPhi/dt
    zero = jnp.zeros((), qpos.dtype)
    _, G = loop_jacobian(loops, tree, qpos, t)
    _, phi_t = jax.jvp(lambda s: loop_residual(loops, tree, qpos, t + s), (zero,), (1.0 + zero,))
    qvel = qvel - mtv(G, solve_normal(loops, G, G, mv(G, qvel) + phi_t))
    return qpos, qvel


def independent_rows(loops: Loops, tree: KinematicTree, qpos, t=0.0, *, rtol: float = 1e-9):
    """The loop rows (full-model indices) that are independent at ``qpos`` (concrete
    values): a pivoted QR of G^T keeps the rows whose pivots exceed ``rtol`` times the
    largest. In joint coordinates many rows hold by the tree's own structure (the
    out-of-plane rows of a planar loop's closing revolute joint have G = 0), so dependent
    rows are expected, not a modelling error: they are dropped, their multipliers zero."""
    G = np.asarray(loop_jacobian(loops, tree, jnp.asarray(qpos), t)[1])
    if G.size == 0:
        return ()
    _, R, pivots = scipy.linalg.qr(G.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > rtol * max(diag.max(initial=0.0), 1e-300)))
    return tuple(sorted(loops.rows[k] for k in pivots[:rank]))
