"""Constraint equations of a model, vectorised by GCON type (docs/design.md, principle 3).

* :func:`constraint_values`: Phi(r, A, f) in model row order, for any formulation.
* :func:`rA_terms`: the hand-coded rA quantities Phi, G = [Phi_r, Pi_bar(Phi)], nu, gamma
  (paper 1 eqs. 14c, 15b, 16-18) assembled from the per-type kernels of :mod:`jaxmbd.gcons`.

Body-major tangent layout: the columns of G for body b are 6b..6b+5 = (delta r_b, theta_bar_b).
Every loop below runs over the GCON kinds (the records of :mod:`jaxmbd.gcons`), never over
constraints or bodies.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .. import gcons as K
from ..compiled.rows import take_rows, with_ground
from ..linear.small import hoistable, incidence_sum
from ..model import Model
from ..model.drivers import driver_derivatives, driver_values


def _model_order(model: Model) -> np.ndarray:
    """Index that maps the type-concatenated rows back to model row order."""
    perm = np.concatenate([np.asarray(s.rows, dtype=int) for s in model.gcons])
    return np.argsort(perm)


def _gather(model: Model, s, r, A, rdot=None, omega=None):
    bi, bj = np.asarray(s.body_i, dtype=int), np.asarray(s.body_j, dtype=int)
    r_all = with_ground(r, np.zeros(3))
    A_all = with_ground(A, np.eye(3))
    out = [take_rows(r_all, bi), take_rows(A_all, bi), take_rows(r_all, bj), take_rows(A_all, bj)]
    if rdot is not None:
        rd_all = with_ground(rdot, np.zeros(3))
        w_all = with_ground(omega, np.zeros(3))
        out += [take_rows(rd_all, bi), take_rows(w_all, bi)]
        out += [take_rows(rd_all, bj), take_rows(w_all, bj)]
    return out


def _value_of_set(s, r_i, A_i, r_j, A_j, f):
    return K.gcon_kind(s.kind).value(s, r_i, A_i, r_j, A_j, f)


def constraint_values(model: Model, r, A, t):
    """Phi(r, A, t), shape (nc,), in model row order (eqs. 1-4 and the rotation driver).

    Per-type kernels: the cheapest function to differentiate (rp and re autodiff it twice)."""
    if model.nc == 0:
        return jnp.zeros((0,))
    f = driver_values(model.f_offset, model.drivers, t)
    parts = []
    for s in model.gcons:
        if s.size == 0:
            continue
        r_i, A_i, r_j, A_j = _gather(model, s, r, A)
        parts.append(_value_of_set(s, r_i, A_i, r_j, A_j, take_rows(f, s.rows)))
    return take_rows(jnp.concatenate(parts), _model_order(model))


class _RowParameters(NamedTuple):
    """Every GCON row written as Phi = u.w - beta f (model row order, shape (nc, ...)).

    u = A_i u_bar + alpha d_ij + c with u_bar = cos(kappa f) p_bar + sin(kappa f) q_bar and
    w = A_j w_bar + delta d_ij:

    ======  ==============  =====  =====  =====  ======  =====  ====
    type    p_bar (q_bar)   alpha  c      w_bar  delta   beta   kappa
    ======  ==============  =====  =====  =====  ======  =====  ====
    DP1     a_bar_i         0      0      a_bar_j  0     1      0
    DP2     a_bar_i         0      0      0      1       1      0
    D       0               1      0      0      1       1      0
    CD      0               0      c      0      1       1      0
    ROT     v_bar_i (-u_bar_i)  0  0      a_bar_j  0     0      1
    ======  ==============  =====  =====  =====  ======  =====  ====

    One batch of nc rows then replaces five per-type kernels on the hot path of Newton
    iterations (the residual), which XLA:CPU runs as a handful of fused loops.
    """

    p_bar: jax.Array
    q_bar: jax.Array
    w_bar: jax.Array
    s_bar_p: jax.Array
    s_bar_q: jax.Array
    c: jax.Array
    alpha: jax.Array
    delta: jax.Array
    beta: jax.Array
    kappa: jax.Array


_ROW_VECTORS = ("p_bar", "q_bar", "w_bar", "s_bar_p", "s_bar_q", "c")
_ROW_COEFFICIENTS = ("alpha", "delta", "beta", "kappa")


def _row_parameters(model: Model) -> _RowParameters:
    cols = {name: [] for name in _RowParameters._fields}
    for s in model.gcons:
        if s.size == 0:
            continue
        spec = K.gcon_kind(s.kind)
        zeros, ones = jnp.zeros((s.size, 3)), np.ones(s.size)
        vectors = spec.row_vectors(s)
        for name in _ROW_VECTORS:
            cols[name].append(vectors.get(name, zeros))
        for name in _ROW_COEFFICIENTS:
            cols[name].append(ones * getattr(spec, name))
    order = _model_order(model)
    return _RowParameters(
        *(take_rows(jnp.concatenate(cols[k]), order) for k in _RowParameters._fields)
    )


def _row_bodies(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static body indices (i, j) of every constraint row (ground = nb)."""
    bodies = np.asarray(model.constraint_bodies, dtype=int).reshape(-1, 2)
    return bodies[:, 0], bodies[:, 1]


def rA_rows(model: Model, r, A, t):
    """Phi and the rA Jacobian rows of every constraint in one batch (model row order).

    Returns (phi (nc,), jac_i (nc, 6), jac_j (nc, 6)): rows with respect to
    (delta r, theta_bar) of body i and body j. With the Pi-bar variation
    delta(A s_bar) = A (theta_bar x s_bar) (eq. 13a) and g = alpha w + delta u:
    Phi_r_i = -g, Phi_r_j = g, Pi_i = u_bar x A_i^T w - s_bar_p x A_i^T g,
    Pi_j = w_bar x A_j^T u + s_bar_q x A_j^T g. These equal the per-type rows of Table 2
    (tested against them and against autodiff).
    """
    if model.nc == 0:
        return jnp.zeros((0,)), jnp.zeros((0, 6)), jnp.zeros((0, 6))
    return _rows_at(model, r, A, driver_values(model.f_offset, model.drivers, t))


def _rows_at(model: Model, r, A, f):
    """:func:`rA_rows` for given driver values f (nc,)."""
    P = _row_parameters(model)
    bi, bj = _row_bodies(model)
    r_all = with_ground(r, np.zeros(3))
    A_all = with_ground(A, np.eye(3))
    r_i, A_i = take_rows(r_all, bi), take_rows(A_all, bi)
    r_j, A_j = take_rows(r_all, bj), take_rows(A_all, bj)
    angle = P.kappa * f
    u_bar = jnp.cos(angle)[:, None] * P.p_bar + jnp.sin(angle)[:, None] * P.q_bar
    d = r_j + K._mv(A_j, P.s_bar_q) - r_i - K._mv(A_i, P.s_bar_p)
    u = K._mv(A_i, u_bar) + P.alpha[:, None] * d + P.c
    w = K._mv(A_j, P.w_bar) + P.delta[:, None] * d
    phi = K._dot(u, w) - P.beta * f
    g = P.alpha[:, None] * w + P.delta[:, None] * u
    g_i, g_j = K._row_vec_mat(g, A_i), K._row_vec_mat(g, A_j)
    pi_i = jnp.cross(u_bar, K._row_vec_mat(w, A_i)) - jnp.cross(P.s_bar_p, g_i)
    pi_j = jnp.cross(P.w_bar, K._row_vec_mat(u, A_j)) + jnp.cross(P.s_bar_q, g_j)
    return phi, jnp.concatenate([-g, pi_i], 1), jnp.concatenate([g, pi_j], 1)


#: Up to this many (row, body) pairs, sums over the constraint rows per body are products
#: with a constant 0/1 incidence matrix (one dense kernel, batched as one product under
#: ``vmap``) instead of a scatter-add (serial on CPU, slow under ``vmap``); beyond it, the
#: O(nc) scatter-add.
DENSE_INCIDENCE_MAX = 1 << 14


def _sum_rows_per_body(model: Model, bodies, values):
    """sum over rows k with bodies[k] = b of values[k], for b < nb: (nb, ...)."""
    nb = model.nb
    if len(bodies) * (nb + 1) <= DENSE_INCIDENCE_MAX:
        incidence = (np.asarray(bodies)[None, :] == np.arange(nb)[:, None]).astype(np.float64)
        return incidence_sum(incidence, values)  # no dot in a hoistable step
    shape = (nb + 1,) + values.shape[1:]
    return jnp.zeros(shape, values.dtype).at[bodies].add(values)[:nb]


def rA_generalized_reaction(model: Model, jac_i, jac_j, lam):
    """G^T lam as (nb, 6) per body from the rows of :func:`rA_rows`: a sum over rows per
    body, O(nc) (:func:`_sum_rows_per_body`)."""
    bodies = np.concatenate(_row_bodies(model))
    contributions = jnp.concatenate([jac_i, jac_j]) * jnp.concatenate([lam, lam])[:, None]
    return _sum_rows_per_body(model, bodies, contributions)


def rA_jacobian_from_rows(model: Model, jac_i, jac_j, include_ground: bool = False):
    """Dense G (nc, 6 nb) (or 6 (nb + 1) with the ground) from per-row body blocks."""
    nc, nb = model.nc, model.nb
    bi, bj = _row_bodies(model)
    n_cols = nb + 1 if include_ground else nb
    return (
        _selector(model, bi, include_ground)[:, :, None] * jac_i[:, None, :]
        + _selector(model, bj, include_ground)[:, :, None] * jac_j[:, None, :]
    ).reshape(nc, 6 * n_cols)


def _selector(model: Model, bodies, include_ground=False) -> np.ndarray:
    """One-hot (nc, nb) matrix of the given per-row body indices (ground column optional)."""
    sel = np.zeros((model.nc, model.nb + 1))
    sel[np.arange(model.nc), np.asarray(bodies, dtype=int)] = 1.0
    return sel if include_ground else sel[:, : model.nb]


def rA_terms(model: Model, r, A, rdot, omega, t, *, include_ground: bool = False):
    """Hand-coded rA quantities (Phi, G, nu, gamma) in model row order.

    ``G`` has shape (nc, 6 nb) with body-major columns (delta r_b, theta_bar_b); ``gamma``
    is the right-hand side of G [r_ddot; omegadot_bar] = gamma (eq. 16), ``nu`` that of
    G [r_dot; omega_bar] = nu (eq. 15b). ``include_ground`` appends the ground's six
    columns (for support reactions).
    """
    nc, nb = model.nc, model.nb
    if nc == 0:
        z = jnp.zeros((0,))
        return z, jnp.zeros((0, 6 * nb)), z, z
    phi, ji, jj, nu, gamma = rA_terms_rows(model, r, A, rdot, omega, t)
    return phi, rA_jacobian_from_rows(model, ji, jj, include_ground), nu, gamma


def rA_terms_rows(model: Model, r, A, rdot, omega, t):
    """:func:`rA_terms` with G as its per-row body blocks (jac_i, jac_j) (nc, 6) each,
    never dense: (Phi, jac_i, jac_j, nu, gamma)."""
    if model.nc == 0:
        z = jnp.zeros((0,))
        return z, jnp.zeros((0, 6)), jnp.zeros((0, 6)), z, z
    f, f_dot, f_ddot = driver_derivatives(model.f_offset, model.drivers, t)
    phis, jac_i, jac_j, nus, gammas = [], [], [], [], []
    for s in model.gcons:
        if s.size == 0:
            continue
        rows = np.asarray(s.rows, dtype=int)
        poses = _gather(model, s, r, A, rdot, omega)
        phis.append(_value_of_set(s, *poses[:4], take_rows(f, rows)))

        def rows_of(x, rows=rows):
            return take_rows(x, rows)

        out, nu, gamma = K.gcon_kind(s.kind).rA(s, poses, rows_of, f, f_dot, f_ddot)
        nus.append(nu)
        gammas.append(gamma)
        jac_i.append(out.jac_i)
        jac_j.append(out.jac_j)
    order = _model_order(model)
    phi = take_rows(jnp.concatenate(phis), order)
    nu = take_rows(jnp.concatenate(nus), order)
    gamma = take_rows(jnp.concatenate(gammas), order)
    ji = take_rows(jnp.concatenate(jac_i), order)
    jj = take_rows(jnp.concatenate(jac_j), order)
    return phi, ji, jj, nu, gamma


def _sensitivity_blocks(model: Model, s, r, A, lam_s, f_s):
    """(rows, 2, 2, 6, 6) blocks d(G^T lam)/d(r, theta_bar) of one GCON set (Tables 3-6)."""
    r_i, A_i, r_j, A_j = _gather(model, s, r, A)
    return K.gcon_kind(s.kind).sensitivity(s, r_i, A_i, r_j, A_j, lam_s, lambda: f_s)


def rA_reaction_sensitivity(model: Model, r, A, lam, t):
    """K = d(G^T lam)/d(r, theta_bar), shape (6 nb, 6 nb), body-major (Tables 3-6).

    Assembled by scatter-add of per-constraint 12x12 blocks: cost O(nc), not O(nc nb^2).
    """
    nb = model.nb
    if model.nc == 0:
        return jnp.zeros((6 * nb, 6 * nb))
    f = driver_values(model.f_offset, model.drivers, t)
    all_blocks, acted, varied = [], [], []
    for s in model.gcons:
        if s.size == 0:
            continue
        rows = np.asarray(s.rows, dtype=int)
        blocks = _sensitivity_blocks(model, s, r, A, take_rows(lam, rows), take_rows(f, rows))
        bodies = (np.asarray(s.body_i, dtype=int), np.asarray(s.body_j, dtype=int))
        for a in range(2):
            for b in range(2):
                all_blocks.append(blocks[:, a, b])
                acted.append(bodies[a])
                varied.append(bodies[b])
    acted, varied = np.concatenate(acted), np.concatenate(varied)
    blocks = jnp.concatenate(all_blocks)
    if len(acted) * nb * nb <= DENSE_INCIDENCE_MAX:
        # summed per body pair by a product with a constant 0/1 incidence matrix: one
        # dense kernel (XLA's CPU scatter-add is a loop of single-block updates); the
        # ground (index nb) matches no pair
        pair = np.where((acted < nb) & (varied < nb), acted * nb + varied, -1)
        incidence = (pair[None, :] == np.arange(nb * nb)[:, None]).astype(np.float64)
        K4 = incidence_sum(incidence, blocks).reshape(nb, nb, 6, 6)
    else:  # one scatter-add for all types and body pairs
        K4 = jnp.zeros((nb + 1, nb + 1, 6, 6)).at[acted, varied].add(blocks)[:nb, :nb]
    return jnp.transpose(K4, (0, 2, 1, 3)).reshape(6 * nb, 6 * nb)


def rA_velocity_sensitivity(model: Model, r, A, v, t):
    """S = d(G v - nu)/d(r, theta_bar), shape (nc, 6 nb), body-major, for fixed body
    velocities v (nb, 6) = (r_dot, omega_bar).

    Row c is v^T H_c with H_c = d(G_c^T)/d(r, theta_bar) the per-constraint blocks of the
    reaction sensitivity (Tables 3-6 with lam_c = 1), plus d(Phi_t)/dq: zero for DP1, DP2,
    D and CD (Phi_t = -f_dot) and, for the rotation driver, Phi_t = theta_dot Phi(theta +
    pi/2), whose rows are theta_dot G_ROT(theta + pi/2). Cost O(nc), like K.
    """
    nb, nc = model.nb, model.nc
    if nc == 0:
        return jnp.zeros((0, 6 * nb))
    f, f_dot, _ = driver_derivatives(model.f_offset, model.drivers, t)
    v_all = with_ground(v, np.zeros(6))
    rows_i, rows_j, row_index = [], [], []
    for s in model.gcons:
        if s.size == 0:
            continue
        rows = np.asarray(s.rows, dtype=int)
        r_i, A_i, r_j, A_j = _gather(model, s, r, A)
        ones = jnp.ones(s.size)
        blocks = K.gcon_kind(s.kind).sensitivity(
            s, r_i, A_i, r_j, A_j, ones, lambda rows=rows: take_rows(f, rows)
        )
        v_pair = jnp.stack([take_rows(v_all, s.body_i), take_rows(v_all, s.body_j)], 1)
        # d(G_c v)/dq_b = sum_a v_a^T blocks[c, a, b]
        if hoistable():  # no dot in a hoistable step (jaxmbd.linear.small)
            contracted = jnp.sum(v_pair[:, :, None, :, None] * blocks, axis=(1, 3))
        else:
            contracted = jnp.einsum("caj,cabjk->cbk", v_pair, blocks)
        rows_i.append(contracted[:, 0])
        rows_j.append(contracted[:, 1])
        row_index.append(rows)
    order = np.argsort(np.concatenate(row_index))
    jac_i = take_rows(jnp.concatenate(rows_i), order)
    jac_j = take_rows(jnp.concatenate(rows_j), order)
    kappa = _row_parameters(model).kappa
    _, time_i, time_j = _rows_at(model, r, A, f + 0.5 * np.pi * kappa)
    scale = (kappa * f_dot)[:, None]
    return rA_jacobian_from_rows(model, jac_i + scale * time_i, jac_j + scale * time_j)


def rA_sensitivity_rows(model: Model, r, A, weights, t):
    """Per-row blocks of K = d(G^T lam)/d(r, theta_bar) with lam = ``weights`` (nc,):
    (nc, 2, 2, 6, 6), [c, a, b] = d(G_c,a^T lam_c)/dq_b for a, b in (body i, body j) of row
    c (Tables 3-6), in model row order. :func:`rA_reaction_sensitivity` is their sum."""
    if model.nc == 0:
        return jnp.zeros((0, 2, 2, 6, 6))
    f = driver_values(model.f_offset, model.drivers, t)
    out = []
    for s in model.gcons:
        if s.size == 0:
            continue
        rows = np.asarray(s.rows, dtype=int)
        blocks = _sensitivity_blocks(model, s, r, A, take_rows(weights, rows), take_rows(f, rows))
        out.append(blocks)
    return take_rows(jnp.concatenate(out), _model_order(model))


def rA_velocity_sensitivity_rows(model: Model, r, A, v, t, *, unit_blocks=None):
    """The rows of :func:`rA_velocity_sensitivity` per body: (S_i, S_j) (nc, 6) each, the
    derivatives of row c of G v - nu with respect to (r, theta_bar) of its bodies i and j.
    ``unit_blocks``: :func:`rA_sensitivity_rows` with unit weights, if already at hand."""
    if model.nc == 0:
        z = jnp.zeros((0, 6))
        return z, z
    f, f_dot, _ = driver_derivatives(model.f_offset, model.drivers, t)
    v_all = with_ground(v, np.zeros(6))
    bi, bj = _row_bodies(model)
    blocks = unit_blocks
    if blocks is None:
        blocks = rA_sensitivity_rows(model, r, A, jnp.ones(model.nc), t)
    v_pair = jnp.stack([take_rows(v_all, bi), take_rows(v_all, bj)], 1)
    contracted = jnp.einsum("caj,cabjk->cbk", v_pair, blocks)
    kappa = _row_parameters(model).kappa
    _, time_i, time_j = _rows_at(model, r, A, f + 0.5 * np.pi * kappa)
    scale = (kappa * f_dot)[:, None]
    return contracted[:, 0] + scale * time_i, contracted[:, 1] + scale * time_j
