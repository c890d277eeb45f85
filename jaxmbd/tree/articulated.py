"""Forward dynamics of a kinematic tree by the articulated-body algorithm: qacc = M^-1 (tau -
C) in O(n) operations, without forming or factoring the joint-space mass matrix M.

Featherstone, *Rigid Body Dynamics Algorithms* (2008), section 7.3, Table 7.1, in the
one-frame spatial algebra of :mod:`jaxmbd.tree.kinematics` (every spatial quantity in world
coordinates at the world origin, so no transforms between bodies): with I_b the body's
spatial inertia, S_b its dofs' motion subspaces (K_b columns), c_b = sum over its dofs of
S_dot qdot and p_b = v_b x* I_b v_b,

- from the leaves: I^A_b = I_b + sum over children of I^a, p^A_b = p_b + sum of p^a,
  U = I^A S, D = S^T U + diag(d), u = tau - S^T p^A, and the child passes up
  I^a = I^A - U D^-1 U^T, p^a = p^A + I^a c + U D^-1 u;
- from the root (a_world = -g, eq. 5.20): a' = a_parent + c, qacc = D^-1 (u - U^T a'),
  a = a' + S qacc.

``d`` (nv,) is added to D's diagonal: it is M's added diagonal (MuJoCo's armature, and the
h D of an implicit damping step), which enters each dof's own equation tau_i = S_i^T f_i +
d_i qacc_i. Each recursion is a level scan (:mod:`jaxmbd.tree.sweeps`), so the program does
not grow with the tree. The mass matrix's dense factor costs O(nv^3) on a chain (its M is
full) and the tree-sparse L^T D L as much; this costs O(nv).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._elementwise import mm, mv
from .dynamics import spatial_inertia, world_inertias
from .kinematics import TreePoses, cross_force, velocities
from .sweeps import by_level, down, level_tables, padded, per_body, scanned, up
from .topology import KinematicTree


def uses_articulated(tree: KinematicTree) -> bool:
    """Whether forward dynamics without constraint rows runs the articulated-body algorithm
    (``mass_solver="articulated"``, or ``"auto"`` on a tree whose recursions are level
    scans, :func:`jaxmbd.tree.sweeps.scanned`) instead of a factorisation of M."""
    if tree.mass_solver == "articulated":
        return True
    return tree.mass_solver == "auto" and scanned(tree)


def forward_dynamics(tree: KinematicTree, poses: TreePoses, mass, inertia, gravity, qvel, tau,
                     diagonal=None):  # fmt: skip
    """qacc (nv,) with (M + diag(``diagonal``)) qacc = ``tau`` - C(q, qdot): M and C those of
    :func:`jaxmbd.tree.mass_matrix` and :func:`jaxmbd.tree.bias_forces` (``tau`` holds the
    applied generalised forces, J^T w included)."""
    nv = tree.nv
    dtype = qvel.dtype
    if nv == 0:
        return jnp.zeros(0, dtype)
    tables = level_tables(tree)
    k_max = tables.dofs.shape[1]
    S = poses.S
    V, S_dot = velocities(tree, S, qvel)
    Ic = world_inertias(poses, mass, inertia)
    I = spatial_inertia(poses.c, mass, Ic)  # noqa: E741 (Featherstone's I)
    bias = cross_force(V, mv(I, V))
    c = jnp.sum(per_body(tree, S_dot * qvel[:, None]), axis=1)  # (nb, 6)
    S_b = per_body(tree, S)  # (nb, K, 6), pad dofs zero
    d = jnp.zeros(nv, dtype) if diagonal is None else jnp.broadcast_to(diagonal, (nv,))
    # pad dofs get a unit pivot, so that D stays invertible and their qacc is 0
    d_b = padded(d, jnp.ones((), dtype))[tables.dofs]
    tau_b = per_body(tree, tau)
    eye6 = jnp.eye(6, dtype=dtype)
    own = (
        by_level(tables, I, eye6),
        by_level(tables, bias),
        by_level(tables, S_b),
        by_level(tables, c),
        by_level(tables, d_b, jnp.ones(k_max, dtype)),
        by_level(tables, tau_b),
    )

    def inward(below, level):
        (Ia_sum, pa_sum), (I_l, p_l, S_l, c_l, d_l, tau_l) = below, level
        IA = I_l + Ia_sum
        pA = p_l + pa_sum
        U = mm(IA, jnp.swapaxes(S_l, -1, -2))  # (W, 6, K)
        D = mm(S_l, U) + d_l[..., None] * jnp.eye(k_max, dtype=dtype)
        u = tau_l - mv(S_l, pA)
        Dinv = spd_inverse(D)
        UD = mm(U, Dinv)  # (W, 6, K)
        Ia = IA - mm(UD, jnp.swapaxes(U, -1, -2))
        pa = pA + mv(Ia, c_l) + mv(UD, u)
        return (Ia, pa), (U, Dinv, u)

    zero = (jnp.zeros((6, 6), dtype), jnp.zeros(6, dtype))
    U, Dinv, u = up(tables, inward, own, zero)
    base = jnp.concatenate([jnp.zeros(3, dtype), -gravity.astype(dtype)])

    def outward(a_parent, level):
        S_l, c_l, U_l, Dinv_l, u_l = level
        a_pre = a_parent + c_l
        qacc = mv(Dinv_l, u_l - mv(jnp.swapaxes(U_l, -1, -2), a_pre))
        a = a_pre + mv(jnp.swapaxes(S_l, -1, -2), qacc)
        return a, qacc

    qacc = down(tables, outward, (own[2], own[3], U, Dinv, u), base)  # (L, W, K)
    return qacc.reshape(-1)[tables.dof_slot]


def spd_inverse(D):
    """The inverse of symmetric positive definite (..., k, k) matrices (k small), unrolled:
    Cholesky D = L L^T, then D^-1 = L^-T L^-1, all elementwise (no LAPACK call, which would
    keep XLA's CPU backend from compiling the enclosing loop natively)."""
    k = D.shape[-1]
    e = [[D[..., i, j] for j in range(k)] for i in range(k)]
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        s = e[j][j]
        for m in range(j):
            s = s - L[j][m] * L[j][m]
        L[j][j] = jnp.sqrt(s)
        for i in range(j + 1, k):
            s = e[i][j]
            for m in range(j):
                s = s - L[i][m] * L[j][m]
            L[i][j] = s / L[j][j]
    # X = L^-1, lower triangular, by forward substitution
    X = [[None] * k for _ in range(k)]
    for i in range(k):
        X[i][i] = 1.0 / L[i][i]
        for j in range(i):
            s = L[i][j] * X[j][j]
            for m in range(j + 1, i):
                s = s + L[i][m] * X[m][j]
            X[i][j] = -s / L[i][i]
    zero = jnp.zeros_like(e[0][0])
    rows = []
    for i in range(k):
        row = []
        for j in range(k):
            s = zero
            for m in range(max(i, j), k):
                s = s + X[m][i] * X[m][j]
            row.append(s)
        rows.append(jnp.stack(row, -1))
    return jnp.stack(rows, -2)
