"""The discrete null space method of the energy-momentum scheme (Betsch & Leyendecker 2006,
Sec. 2.2.2, eqs. 11-15; :mod:`jaxmbd.integrators.energy_momentum`): the generic numerical
parametrisation (a twist basis, an inner Newton projection onto the joints) and the paper's
pair-specific one with its closure rows (Sec. 5.4)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import SUCCESS, as_status
from ..constraints.equations import constraint_values
from ..formulations import director_pairs as pairs
from ..newton import get_newton, implicit_root
from ..newton._min_norm import min_norm_solve
from ._discrete_gradient import apply_twists, constraint_rows, gcon_rows, momentum_residual


class NullSpaceBasis(NamedTuple):
    """Twist-space bases at q_n: N (6 nb, dof) spans null(G_ext P_int) (so P(q_n) =
    P_int(q_n) N, eq. 58-61), C (6 nb, 6 nb - dof) its orthogonal complement."""

    N: jax.Array
    C: jax.Array


def twist_basis(form, model, q, t, dof: int) -> NullSpaceBasis:
    """SVD of G_ext(q) P_int(q): the last ``dof`` right singular vectors span its null space.
    Depends on q_n only; gradient-stopped (the root does not depend on the basis)."""
    nb = model.nb
    x = form._flat(q)
    P_int = jax.scipy.linalg.block_diag(*form.null_space_internal(q[1]))
    if model.nc == 0:
        return NullSpaceBasis(jnp.eye(6 * nb), jnp.zeros((6 * nb, 0)))
    G_ext = jax.jacfwd(lambda x_: gcon_rows(form, model, x_, t))(x)
    _, _, Vt = jnp.linalg.svd(G_ext @ P_int, full_matrices=True)
    V = jax.lax.stop_gradient(Vt.T)
    r = 6 * nb - dof
    return NullSpaceBasis(V[:, r:], V[:, :r])


def reparametrise(form, model, q0, basis: NullSpaceBasis, mu, t, *, tol, max_iter=30):
    """(q_{n+1}, status): q_{n+1} = F_{q_n}(mu) with Phi(F(mu)) = 0 to round-off (eq. 15), and
    the status of the inner Newton projection that found it (non-convergence, an
    ill-conditioned or singular matrix).

    F(mu) = F0(N mu + C kappa(mu)), where F0 moves each body by a twist increment
    (phi + u, exp(theta~) d_I: the internal constraints hold exactly, eq. 44) and kappa solves
    the joint constraints Phi_ext(F0(N mu + C kappa)) = 0 (an r x r Newton, r = 6 nb - dof,
    implicit gradients w.r.t. mu). DF(0) = P_int(q_n) N = P(q_n) (Sec. 2.2.2, property of
    every reparametrisation): d Phi_ext F0 / d kappa = G_ext P_int C is invertible and
    G_ext P_int N = 0.
    """
    nb = model.nb
    N, C = basis
    r = C.shape[1]

    def F0(mu_, kappa):
        xi = (N @ mu_ + C @ kappa).reshape(nb, 6)
        return apply_twists(form, q0, xi)

    if r == 0:
        return F0(mu, jnp.zeros(0)), as_status(SUCCESS)

    # B = d Phi_ext / d kappa at q_n (full column rank): B^T Phi_ext = 0 is square and, near
    # kappa = 0, equivalent to Phi_ext = 0 also when the joint rows are redundant
    x0 = form._flat(q0)
    P_int = jax.scipy.linalg.block_diag(*form.null_space_internal(q0[1]))
    G_ext = jax.jacfwd(lambda x_: gcon_rows(form, model, x_, t))(x0)
    B = jax.lax.stop_gradient(G_ext @ P_int @ C)

    def g(kappa, mu_):
        q = F0(mu_, kappa)
        return B.T @ constraint_values(model, q[0], form.rotation(q[1]), t)

    mu_s = jax.lax.stop_gradient(mu)
    kappa, info, _ = get_newton("full", max_iter=max_iter).solve(
        lambda k_: g(k_, mu_s), jax.jacfwd(lambda k_: g(k_, mu_s)), jnp.zeros(r), None, tol=tol
    )
    kappa = implicit_root(g, lambda k_, d: k_ + d, kappa, mu, r)
    return F0(mu, kappa), as_status(info.status)


def discrete_null_space(form, model, xm, P0, t, W=None):
    """P(q_n, q_{n+1}) = Pi(q_mid) P(q_n) with Pi = I - G^T (G G^T)^-1 G, G = G(q_mid) (all
    rows): range P = null G(q_{n+1/2}) exactly (eq. 14), P -> P(q_n) as q_{n+1} -> q_n
    (eq. 13, since G(q_n) P(q_n) = 0). For the paper's pairs this spans the same space as
    its closed forms (113)-(115), (133)-(135), (150)-(151). Also returns the status of the
    minimum-norm solve (dependent rows of G(q_mid): ill-conditioned)."""
    G = jax.jacfwd(lambda x: constraint_rows(form, model, x, t, W))(xm)
    correction, status = min_norm_solve(G, G @ P0)
    return P0 - correction, status


def reduced_residual(form, model, q0, v0, basis, mu, h, k, *, tol, W=None):
    """R(mu) = P(q_n, F(mu))^T [(2/h) M (F(mu) - q_n) - 2 M v_n + h grad_bar V] (notes 1.2).

    The statuses of its inner solves are those of an iterate; the step reports them at its
    root (:func:`reparametrise` of the root, :func:`multipliers`' test of G(q_mid))."""
    nb = model.nb
    x0 = form._flat(q0)
    x1 = form._flat(reparametrise(form, model, q0, basis, mu, k * h, tol=tol)[0])
    P0 = jax.scipy.linalg.block_diag(*form.null_space_internal(q0[1])) @ basis.N
    P, _ = discrete_null_space(form, model, 0.5 * (x0 + x1), P0, k * h, W)
    return P.T @ momentum_residual(form, model, x0, v0.reshape(nb, 12), x1, h, k)


# ------------------------------------------------------ the paper's pair-specific method


class ClosureData(NamedTuple):
    """Per-step data of the closure rows (fixed during a step, gradient-stopped): B combines
    the closure rows into k = d - dof independent equations (identity without redundancy),
    p_ref (d x dof) spans null(B^T G_c(q_n) P(q_n))."""

    B: jax.Array
    p_ref: jax.Array


def closure_data(form, model, structure, q0, t, dof: int, table=None) -> ClosureData | None:
    """None for a tree (no closure rows); else B and p_ref at q_n (notes 1.6)."""
    closure = jnp.asarray(structure.closure_rows, int)
    if closure.shape[0] == 0:
        return None
    x0 = form._flat(q0)
    k = structure.size - dof
    Gc = jax.jacfwd(lambda x: gcon_rows(form, model, x, t))(x0)[closure]
    K = Gc @ pairs.null_space(model, structure, q0, table=table)
    U, _, Vt = jnp.linalg.svd(K, full_matrices=True)
    B = jnp.eye(closure.shape[0]) if k == closure.shape[0] else U[:, :k]
    return jax.lax.stop_gradient(ClosureData(B, Vt[k:].T))


def pairs_residual(form, model, structure, closure, q0, v0, mu, h, k, table=None):
    """The reduced equations of the discrete null space method in the paper's incremental
    unknowns mu (Sec. 2.2.2, 4.4, 5.4; notes 1.2 and 1.6), q_{n+1} = F_{q_n}(mu):

        P(q_n, q_{n+1})^T R1(q_{n+1}) = 0                          (tree: d equations)
        [p_c^T P^T R1; B^T Phi_c(q_{n+1})] = 0                     (closed loops)

    R1 = (2/h) M (q_{n+1} - q_n) - 2 M v_n + h grad_bar V without the multipliers, P the
    discrete null space matrix of the tree (eqs. 65-74, 113, 133, 149, 185-187), and for
    closure rows Phi_c: p_c = Pi p_ref spanning null(B^T G_c(q_{n+1/2}) P) (Pi the orthogonal
    projector onto it: smooth in mu and -> p_ref as q_{n+1} -> q_n), so P p_c spans
    null G(q_{n+1/2}) of the selected rows and lam drops out exactly. The projector's
    conditioning is reported at the step's root, by :func:`multipliers`' test of the same
    rows of G(q_mid)."""
    nb = model.nb
    x0 = form._flat(q0)
    x1 = form._flat(pairs.reparametrise(model, structure, q0, mu, table=table))
    xm = 0.5 * (x0 + x1)
    P = pairs.null_space(model, structure, form._unflat(xm, nb), table=table)
    y = P.T @ momentum_residual(form, model, x0, v0.reshape(nb, 12), x1, h, k)
    if closure is None:
        return y
    rows = jnp.asarray(structure.closure_rows, int)
    t1 = k * h

    def phi_c(x):
        return gcon_rows(form, model, x, t1)[rows]

    # B^T G_c(q_{n+1/2}) P column by column (d forward passes instead of 12 nb)
    GcP = jax.vmap(lambda col: jax.jvp(phi_c, (xm,), (col,))[1], in_axes=1, out_axes=1)(P)
    K = closure.B.T @ GcP
    p_c = closure.p_ref - min_norm_solve(K, K @ closure.p_ref)[0]
    return jnp.concatenate([p_c.T @ y, closure.B.T @ phi_c(x1)])
