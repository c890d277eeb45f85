"""The discrete equations of the energy-momentum scheme on director coordinates (Betsch &
Leyendecker 2006, Sec. 2.2; :mod:`jaxmbd.integrators.energy_momentum`): the discrete
gradient of the forces, the constrained residual and matrix with their independent rows,
the multipliers, and the Cayley-angle rotation predictor."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled import small as _small  # noqa: F401
from ..constraints.equations import constraint_values
from ..formulations import director_pairs as pairs
from ..lie import so3_exp
from ..linear import small
from ..newton import solve_with_condition


def _has_springs(model) -> bool:
    """Whether an element splits off a potential (a spring) for the discrete gradient."""
    return any(f.without_potential() is not None for f in model.forces)


def discrete_force(form, model, x0, x1, h, t_mid):
    """-grad_bar V(q0, q1) + Q_nc(q_mid, v_mid, t_mid), flat (12 nb,).

    Gravity's gradient is constant (exact); with springs, Gonzalez's discrete gradient of
    the whole potential (NaN-safe at dq = 0, where it is grad V(q_mid))."""
    nb = model.nb
    xm = 0.5 * (x0 + x1)
    dx = x1 - x0
    vm = (dx / h).reshape(nb, 12)
    qm = form._unflat(xm, nb)
    grav = jnp.concatenate(
        [model.mass[:, None] * model.gravity[None, :], jnp.zeros((nb, 9))], 1
    ).reshape(-1)
    Q = grav + form.nonconservative_forces(model, qm, vm, t_mid).reshape(-1)
    if not _has_springs(model):
        return Q

    def V_springs(x):  # the potential minus gravity's
        q = form._unflat(x, nb)
        return form.potential(model, q) + jnp.sum(model.mass * (q[0] @ model.gravity))

    gV = jax.grad(V_springs)(xm)
    dx2 = jnp.sum(dx * dx)
    ok = dx2 > 1e-28
    safe = jnp.where(ok, dx2, 1.0)
    corr = (V_springs(x1) - V_springs(x0) - gV @ dx) / safe
    return Q - (gV + jnp.where(ok, corr, 0.0) * dx)


def gcon_rows(form, model, x, t):
    """The joints' and drivers' constraint rows Phi(q) at flat coordinates x."""
    q = form._unflat(x, model.nb)
    return constraint_values(model, q[0], form.rotation(q[1]), t)


def constraint_rows(form, model, x, t, W=None):
    """[Phi_GCON; Phi_int], or W^T of it when the rows are redundant (closed loops): W
    (m x rank) spans range G(q_n), fixed during a step, so W^T G(q_mid) is still the exact
    discrete derivative of W^T Phi."""
    phi = form.residual(model, form._unflat(x, model.nb), t)
    return phi if W is None else W.T @ phi


def row_selection(form, model, structure, x0, t, dof: int):
    """W (m x (n - dof)) selecting independent constraint rows when the joint rows are
    redundant (closed loops, notes 1.6): every internal row and every row of the spanning
    tree's joints (:func:`~jaxmbd.formulations.director_pairs.pair_structure`), and k = d - dof
    combinations B^T Phi_c of the closure rows, B the left singular vectors of the k largest
    singular values of G_c(q_n) P(q_n) (d the tree's unknowns). W is fixed during a step
    (gradient-stopped: the root does not depend on it), so W^T G(q_{n+1/2}) is still the
    exact discrete derivative of W^T Phi. Both schemes use the same W, so they solve the same
    equations."""
    nb, nc = model.nb, model.nc
    m = nc + 6 * nb
    closure = list(structure.closure_rows)
    k = structure.size - dof
    if not 0 <= k <= len(closure):
        raise ValueError(
            f"energy_momentum: dof = {dof} is impossible for this model: its spanning tree "
            f"({structure.describe(model)}) has {structure.size} unknowns and "
            f"{len(closure)} closure rows"
        )
    keep = list(structure.tree_rows) + list(range(nc, m))
    q0 = form._unflat(x0, nb)
    Gc = jax.jacfwd(lambda x: gcon_rows(form, model, x, t))(x0)[jnp.asarray(closure, int)]
    U, _, _ = jnp.linalg.svd(Gc @ pairs.null_space(model, structure, q0), full_matrices=False)
    W = jnp.zeros((m, len(keep) + k))
    W = W.at[jnp.asarray(keep, int), jnp.arange(len(keep))].set(1.0)
    W = W.at[jnp.asarray(closure, int)[:, None], len(keep) + jnp.arange(k)[None, :]].set(U[:, :k])
    return jax.lax.stop_gradient(W)


def momentum_residual(form, model, x0, v0, x1, h, k):
    """R1 without the multiplier term: (2/h) M (q1 - q0) - 2 M v0 - h f_bar (flat)."""
    nb = model.nb
    Mdx = form.times_mass(model, (x1 - x0).reshape(nb, 12)).reshape(-1)
    Mv0 = form.times_mass(model, v0).reshape(-1)
    f = discrete_force(form, model, x0, x1, h, (k - 0.5) * h)
    return (2.0 / h) * Mdx - 2.0 * Mv0 - h * f


def constrained_residual(form, model, x0, v0, y, h, k, W=None):
    """(h/2) [R1; R2] in y = (q1 flat, lam_hat = h^2 lam / 2): an O(1) Newton matrix."""
    n = 12 * model.nb
    x1, lam_hat = y[:n], y[n:]
    t1 = k * h
    xm = 0.5 * (x0 + x1)
    G = jax.jacfwd(lambda x: constraint_rows(form, model, x, t1, W))(xm)
    # G^T lam without a dot in a hoistable step (XLA would match the Newton matrix's
    # lam-derivative, a one-hot product and a sum, into a dot fusion)
    reaction = small.transpose_times(G, lam_hat)
    r1 = 0.5 * h * momentum_residual(form, model, x0, v0, x1, h, k) + reaction
    return jnp.concatenate([r1, constraint_rows(form, model, x1, t1, W)])


def constrained_matrix(form, model, x0, v0, x1, lam, h, k, W=None):
    """The paper's iteration matrix d(R1, R2)/d(q1, lam) (unscaled, eq. 10 with v_{n+1}
    eliminated): its 2-norm condition number grows like h^-3 (Tables II-V)."""
    n = 12 * model.nb
    t1 = k * h

    def R(y):
        x1_, lam_ = y[:n], y[n:]
        G = jax.jacfwd(lambda x: constraint_rows(form, model, x, t1, W))(0.5 * (x0 + x1_))
        r1 = momentum_residual(form, model, x0, v0, x1_, h, k) + h * G.T @ lam_
        return jnp.concatenate([r1, constraint_rows(form, model, x1_, t1, W)])

    return jax.jacfwd(R)(jnp.concatenate([x1, lam]))


def independent_rows_status(G):
    """SUCCESS while the rows of G are independent, else ILL_CONDITIONED or NONFINITE: the
    pivot-ratio test of G G^T (:func:`~jaxmbd.newton.solve_with_condition`)."""
    GGt = small.matmul(G, G.T) if small.hoistable() else G @ G.T  # no dot in a hoistable step
    return solve_with_condition(GGt, jnp.zeros(G.shape[0], G.dtype))[1]


def midpoint_rows_status(form, model, x0, x1, t, W=None):
    """:func:`independent_rows_status` of G(q_{n+1/2}), the rows through which a step's
    multipliers act (eq. 10): where they have become dependent (a singular configuration)
    the multipliers are not determined, whatever the Newton iteration returned."""
    G = jax.jacfwd(lambda x: constraint_rows(form, model, x, t, W))(0.5 * (x0 + x1))
    return independent_rows_status(G)


def multipliers(form, model, x0, v0, x1, h, k, W=None):
    """(lam, status) of a step from its positions: lam the least-squares solution of
    h G(q_mid)^T lam = -R1_0 (exact at a root of the constrained equations), status the
    pivot-ratio test of G G^T (:func:`~jaxmbd.newton.solve_with_condition`): rows of
    G(q_mid) that have become dependent (a singular configuration) are reported, not
    averaged away by the least squares. It is also the conditioning of the null-space
    scheme's projections, which use the same G(q_mid) (:func:`discrete_null_space`, the
    closure rows of :func:`pairs_residual`)."""
    G = jax.jacfwd(lambda x: constraint_rows(form, model, x, k * h, W))(0.5 * (x0 + x1))
    r = momentum_residual(form, model, x0, v0, x1, h, k)
    return -jnp.linalg.lstsq(G.T, r)[0] / h, independent_rows_status(G)


def _global_omega(form, q, v):
    """Global angular velocities omega = A omega_bar from director rates."""
    phi, dirs = q
    w_bar, _ = form.omega_from_rate(dirs, v[:, 3:], jnp.zeros_like(v[:, 3:]))
    return _small.mv(form.rotation(dirs), w_bar)


def twist_predictor(form, q, v, h):
    """Per-body increments (h v_phi, theta) with theta = 2 atan(h |omega| / 2) omega / |omega|:
    the midpoint rule turns a body by this Cayley angle (notes 2.1, practical notes)."""
    w = _global_omega(form, q, v)
    nw2 = jnp.sum(w * w, -1, keepdims=True)
    ok = nw2 > 1e-30
    nw = jnp.sqrt(jnp.where(ok, nw2, 1.0))
    scale = jnp.where(ok, 2.0 * jnp.arctan(0.5 * h * nw) / nw, h)
    return jnp.concatenate([h * v[:, :3], scale * w], 1)


def apply_twists(form, q, xi):
    """F0: phi + u, d_I <- exp(theta~) d_I per body for xi = (u, theta) (nb, 6) (eq. 44)."""
    phi, dirs = q
    R = so3_exp(xi[:, 3:])
    d = dirs.reshape(-1, 3, 3)
    d1 = _small.mv(R[:, None], d)  # d_I <- R d_I
    return phi + xi[:, :3], d1.reshape(-1, 9)
