"""Director formulation and energy-momentum integration (Betsch & Leyendecker 2006).

Independent references: the paper's closed forms (P_int (29), the cylindrical pair's
continuous (107) and discrete (113)-(115) null space matrices, written here from the paper
without jaxmbd), the analytical steady precession of the gyro top (Sec. 5.1), a closed-form
planar sliding motion, and rA / gen_alpha (a different formulation and integrator).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.formulations import get_formulation
from jaxmbd.integrators import energy_momentum as em
from jaxmbd.lie import so3_exp
from jaxmbd.model import ModelBuilder
from jaxmbd.models.betsch_leyendecker import gyro_top_data

FORM = get_formulation("director")
RNG = np.random.default_rng(12)


def _hat(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def _random_rotation(rng):
    return np.asarray(so3_exp(jnp.asarray(rng.normal(size=3))))


def _invariants(model, sol):
    """(H, p, L) in the redundant director form (notes 1.8), per time step."""

    def one(q, v):
        qq = (q[:, :3], q[:, 3:])
        H = FORM.kinetic_energy(model, v) + FORM.potential(model, qq)
        return H, FORM.linear_momentum(model, v), FORM.angular_momentum(model, qq, v)

    return jax.vmap(one)(sol.q, sol.v)


def _max_violation(model, sol, h):
    return float(
        jnp.max(
            jax.vmap(lambda q, t: jnp.abs(FORM.residual(model, (q[:, :3], q[:, 3:]), t)))(
                sol.q, sol.t
            )
        )
    )


def _all_gcons_model():
    """Two bodies with every GCON kind: DP1, DP2, D, CD and a rotation driver (ROT)."""
    b = ModelBuilder(name="all_gcons")
    b.add_body("a", mass=2.0, inertia=[[1.0, 0.1, 0.0], [0.1, 2.0, 0.2], [0.0, 0.2, 1.5]])
    b.add_body("b", mass=1.0, inertia=[0.3, 0.4, 0.5], r=(1.0, 0.0, 0.0))
    b.add_dp1("dp1", body_i="a", a_bar_i=(1, 0, 0), body_j="b", a_bar_j=(0, 1, 0))
    b.add_dp2(
        "dp2", body_i="a", a_bar_i=(0, 0, 1), s_bar_p_i=(0.1, 0.2, 0), body_j="b",
        s_bar_q_j=(0.3, 0, 0.1),
    )  # fmt: skip
    b.add_d("d", body_i="a", s_bar_p_i=(0.5, 0, 0), body_j="b", s_bar_q_j=(0, 0.1, 0), f=0.3)
    b.add_cd("cd", c=(0, 1, 0), body_i="ground", s_bar_p_i=(0, 0, 0), body_j="a",
             s_bar_q_j=(0.2, 0.1, 0.3))  # fmt: skip
    b.add_rot("rot", body_i="ground", u_bar_i=(1, 0, 0), v_bar_i=(0, 1, 0), body_j="b",
              a_bar_j=(1, 0, 0), angle="0.3*t + 0.2")  # fmt: skip
    return b.build()


# ----------------------------------------------------------------------- formulation


def test_midpoint_jacobian_is_exact_discrete_derivative():
    """Every director constraint is at most quadratic: Phi(q1) - Phi(q0) = G(q_mid) dq."""
    model = _all_gcons_model()
    nb, t = model.nb, 0.7

    def phi(x):
        return FORM.residual(model, FORM._unflat(x, nb), t)

    for _ in range(3):
        x0, x1 = RNG.normal(size=(2, 12 * nb))  # arbitrary, not on the manifold
        G = jax.jacfwd(phi)(0.5 * (x0 + x1))
        lhs = phi(x1) - phi(x0)
        assert np.max(np.abs(lhs - G @ (x1 - x0))) < 1e-13 * (1 + np.max(np.abs(lhs)))
        # and the endpoint Jacobian is not (the test can fail)
        assert np.max(np.abs(lhs - jax.jacfwd(phi)(x0) @ (x1 - x0))) > 1e-3


def test_mass_matrix_and_internal_null_space():
    """P_int^T M P_int = diag(m I, A J A^T) (eqs. 29-33) with a non-principal inertia,
    and G_int P_int = 0 (eq. 25, 29)."""
    model = _all_gcons_model()
    A = _random_rotation(RNG)
    dirs = FORM.coordinates(jnp.asarray(A)[None])
    P = np.asarray(FORM.null_space_internal(dirs)[0])
    P_ref = np.zeros((12, 6))  # eq. 29 written out
    P_ref[:3, :3] = np.eye(3)
    for I in range(3):
        P_ref[3 + 3 * I : 6 + 3 * I, 3:] = -_hat(A[:, I])
    assert np.allclose(P, P_ref, atol=1e-15)
    M = np.asarray(FORM.mass_matrix(model)[0])
    red = P.T @ M @ P
    J = np.asarray(model.inertia[0])
    assert np.allclose(red[:3, :3], 2.0 * np.eye(3), atol=1e-14)
    assert np.allclose(red[3:, 3:], A @ J @ A.T, atol=1e-14)
    assert np.allclose(red[:3, 3:], 0.0, atol=1e-14)
    Gint = jax.jacfwd(lambda d: FORM.extra_equations(d))(dirs).reshape(6, 9)
    assert np.max(np.abs(Gint @ P[3:, 3:])) < 1e-14


def test_body_state_round_trip():
    nb = 3
    A = jnp.stack([jnp.asarray(_random_rotation(RNG)) for _ in range(nb)])
    r, rd, w, rdd, wd = (jnp.asarray(RNG.normal(size=(nb, 3))) for _ in range(5))
    q, v, a = FORM.from_body_state(r, A, rd, w, rdd, wd)
    flat = FORM.flat_coordinates(q)
    assert flat.shape == (nb, 12)
    assert np.allclose(flat[:, 3:6], A[:, :, 0]) and np.allclose(flat[:, 9:], A[:, :, 2])
    assert np.allclose(v[:, 3:6], jnp.cross(jnp.einsum("bij,bj->bi", A, w), A[:, :, 0]))
    for got, want in zip(FORM.to_body_state(q, v, a), (r, A, rd, w, rdd, wd), strict=True):
        assert np.max(np.abs(got - want)) < 1e-13


# ------------------------------------------------------------------- discrete null space


def _pair_models():
    """Two free bodies without a joint, and S, R, P (translational), C, E pairs, at generic
    poses."""
    out = {}
    for kind in ("free", "S", "R", "P", "C", "E"):
        b = ModelBuilder(name=kind, gravity=(0.0, 0.0, 0.0))
        A1, A2 = _random_rotation(RNG), _random_rotation(RNG)
        b.add_body("1", mass=3.0, inertia=[1.0, 2.0, 2.5], r=(0.0, 0.0, 0.0), A=A1)
        b.add_body("2", mass=2.0, inertia=[0.5, 0.7, 0.9], r=(0.3, -0.2, 0.5), A=A2)
        pt, ax = (0.1, 0.2, 0.3), (0.3, -0.5, 0.8)
        if kind == "S":
            b.spherical("j", body_i="1", body_j="2", point=pt)
        elif kind == "R":
            b.revolute("j", body_i="1", body_j="2", point=pt, axis=ax)
        elif kind == "P":
            b.translational("j", body_i="1", body_j="2", point=pt, axis=ax)
        elif kind == "free":
            pass
        elif kind == "C":
            b.cylindrical("j", body_i="1", body_j="2", point=pt, axis=ax)
        else:
            b.planar("j", body_i="1", body_j="2", point=pt, axis=ax)
        out[kind] = b.build()
    return out


PAIRS = _pair_models()
DOF = {"free": 12, "S": 9, "R": 7, "P": 7, "C": 8, "E": 9}


@eqx.filter_jit
def _pair_quantities(model, mu):
    """Everything the pair checks need, in one compiled function (eager is slow)."""
    nb, t = model.nb, 0.0
    dof = mu.shape[0]
    q0 = (model.r0, FORM.coordinates(model.A0))
    x0 = FORM._flat(q0)
    basis = em.twist_basis(FORM, model, q0, t, dof)
    P0 = jax.scipy.linalg.block_diag(*FORM.null_space_internal(q0[1])) @ basis.N

    def phi(x):
        return FORM.residual(model, FORM._unflat(x, nb), t)

    def F(m):
        return FORM._flat(em.reparametrise(FORM, model, q0, basis, m, t, tol=1e-15))

    x1 = F(mu)
    xm = 0.5 * (x0 + x1)
    return dict(
        G0=jax.jacfwd(phi)(x0),
        P0=P0,
        phi1=phi(x1),
        DF0=jax.jacfwd(F)(jnp.zeros(dof)),
        Gm=jax.jacfwd(phi)(xm),
        P=em.discrete_null_space(FORM, model, xm, P0, t),
        P_same=em.discrete_null_space(FORM, model, x0, P0, t),
        xm=xm,
    )


@pytest.mark.parametrize("kind", list(PAIRS))
def test_pair_null_space_and_reparametrisation(kind):
    """Table I sizes; G P = 0, rank P = n - m; Phi(F(mu)) = 0; DF(0) = P(q_n);
    G(q_{n+1/2}) P(q_n, q_{n+1}) = 0 (eq. 14); P(q_n, q_n) = P(q_n) (eq. 13)."""
    model = PAIRS[kind]
    dof = 12 * model.nb - FORM.num_equations(model)
    assert dof == DOF[kind]
    r = _pair_quantities(model, jnp.asarray(0.3 * RNG.normal(size=dof)))
    r = {k: np.asarray(v) for k, v in r.items()}
    assert np.max(np.abs(r["G0"] @ r["P0"])) < 1e-13
    assert np.linalg.matrix_rank(r["P0"]) == dof == 24 - np.linalg.matrix_rank(r["G0"])
    assert np.max(np.abs(r["phi1"])) < 1e-14
    assert np.max(np.abs(r["DF0"] - r["P0"])) < 1e-12
    assert np.max(np.abs(r["Gm"] @ r["P"])) < 1e-13
    assert np.linalg.matrix_rank(r["P"]) == dof
    assert np.max(np.abs(r["P_same"] - r["P0"])) < 1e-13


def test_cylindrical_pair_closed_forms():
    """Paper eqs. (107) and (113)-(115) for the C pair, written from the paper: the
    midpoint-evaluated continuous P fails the discrete condition (14), the paper's
    discrete P satisfies it and spans the same space as ours."""
    model = mbd.models.cylindrical_pair()
    r = _pair_quantities(model, jnp.asarray(0.4 * RNG.normal(size=8)))
    r = {k: np.asarray(v) for k, v in r.items()}
    xm = r["xm"]
    phi1, D1, phi2, D2 = xm[:3], xm[3:12], xm[12:15], xm[15:]
    # body-1 frame vectors at the midpoint (linear in the directors, not orthonormal):
    # m1 = e1, m2 = e2, n = e3 in body 1; the builder's point on body 2 is (0, 0, 11)
    m1, m2, n1 = D1.reshape(3, 3)
    rho2 = np.asarray(model.gcon("DP2").s_bar_q_j[0]) @ D2.reshape(3, 3)

    def P_pair(trans):
        Pext2 = np.zeros((6, 8))
        Pext2[:3, :3] = np.eye(3)
        Pext2[:3, 3:6] = _hat(phi1 - phi2)
        Pext2[:3, 6] = trans
        Pext2[:3, 7] = np.cross(rho2, n1)
        Pext2[3:, 3:6] = np.eye(3)
        Pext2[3:, 7] = n1
        P = np.zeros((24, 8))
        P[:12, :6] = _P_int(D1)
        P[12:, :] = _P_int(D2) @ Pext2
        return P

    P_cont = P_pair(n1)  # (107) evaluated at the midpoint
    P_disc = P_pair(np.cross(m1, m2))  # (113)
    assert np.max(np.abs(r["Gm"] @ P_cont)) > 1e-6
    assert np.max(np.abs(r["Gm"] @ P_disc)) < 1e-12

    def proj(P):
        Q, _ = np.linalg.qr(P)
        return Q @ Q.T

    assert np.max(np.abs(proj(r["P"]) - proj(P_disc))) < 1e-10


@pytest.mark.parametrize("kind", ["P", "E"])
def test_prismatic_and_planar_pair_closed_forms(kind):
    """P pair (131)-(135) and E pair (150)-(151), written from the paper with the joint's
    body-1 vectors m1, m2, n at the midpoint: the continuous P (translations along n, resp.
    m1, m2) fails the discrete condition (14); the substitutions m1 x m2 (P) and m2 x n,
    n x m1 (E) satisfy it and span our discrete null space."""
    model = PAIRS[kind]
    dof = DOF[kind]
    r = _pair_quantities(model, jnp.asarray(0.4 * RNG.normal(size=dof)))
    r = {k: np.asarray(v) for k, v in r.items()}
    xm = r["xm"]
    phi1, D1, phi2, D2 = xm[:3], xm[3:12], xm[12:15], xm[15:]
    R1, R2 = D1.reshape(3, 3), D2.reshape(3, 3)  # rows d_I: local a -> global a @ R
    if kind == "P":  # Perp-2 rows carry m1, m2 (body 1)
        a = np.asarray(model.gcon("DP2").a_bar_i)
        m1l, m2l = a[0], a[1]
    else:  # Perp-1 rows carry m1, m2; the DP2 row carries n and the point on body 2
        a = np.asarray(model.gcon("DP1").a_bar_i)
        m1l, m2l = a[0], a[1]
    m1, m2, n = m1l @ R1, m2l @ R1, np.cross(m1l, m2l) @ R1
    I3 = np.eye(3)

    def P_pair(trans_cols, rot_col):
        d = 6 + trans_cols.shape[1] + (rot_col is not None)
        Pext2 = np.zeros((6, d))
        Pext2[:3, :3] = I3
        Pext2[:3, 3:6] = _hat(phi1 - phi2)
        Pext2[3:, 3:6] = I3
        Pext2[:3, 6 : 6 + trans_cols.shape[1]] = trans_cols
        if rot_col is not None:
            rho2 = np.asarray(model.gcon("DP2").s_bar_q_j[0]) @ R2
            Pext2[:3, -1] = np.cross(rho2, rot_col)
            Pext2[3:, -1] = rot_col
        P = np.zeros((24, d))
        P[:12, :6] = _P_int(D1)
        P[12:, :] = _P_int(D2) @ Pext2
        return P

    if kind == "P":
        P_cont = P_pair(n[:, None], None)
        P_disc = P_pair(np.cross(m1, m2)[:, None], None)
    else:
        P_cont = P_pair(np.stack([m1, m2], 1), n)
        P_disc = P_pair(np.stack([np.cross(m2, n), np.cross(n, m1)], 1), n)
    assert np.max(np.abs(r["Gm"] @ P_cont)) > 1e-6
    assert np.max(np.abs(r["Gm"] @ P_disc)) < 1e-12
    Q1, _ = np.linalg.qr(r["P"])
    Q2, _ = np.linalg.qr(P_disc)
    assert np.max(np.abs(Q1 @ Q1.T - Q2 @ Q2.T)) < 1e-10


def _P_int(D):
    """Eq. (29) for directors D = (d1, d2, d3) (9,), in numpy."""
    P = np.zeros((12, 6))
    P[:3, :3] = np.eye(3)
    for I in range(3):
        P[3 + 3 * I : 6 + 3 * I, 3:] = -_hat(D[3 * I : 3 * I + 3])
    return P


# ------------------------------------------------------------------------- dynamics

_CACHE = {}


def _gyro(scheme, h=0.01, t_end=0.3):
    key = ("gyro", scheme, h, t_end)
    if key not in _CACHE:
        _CACHE[key] = mbd.simulate(
            mbd.models.gyro_top(), formulation="director", integrator="energy_momentum",
            scheme=scheme, t_end=t_end, h=h,
        )  # fmt: skip
    return _CACHE[key]


@pytest.mark.parametrize("scheme", ["constrained", "null_space"])
def test_gyro_top_conserves_energy_and_L3(scheme):
    model = mbd.models.gyro_top()
    sol = _gyro(scheme)
    H, _, L = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < 1e-12
    assert np.max(np.abs(L[:, 2] - L[0, 2])) < 1e-13 * max(1.0, abs(float(L[0, 2])))
    assert np.max(np.abs(L[:, 0] - L[0, 0])) > 1e-6  # L1 is not conserved (test can fail)
    assert _max_violation(model, sol, 0.01) < 1e-12
    assert np.all(np.asarray(sol.status) == 0)


def test_diagnostics_use_redundant_director_form():
    """mbd.diagnostics evaluates H, p, L of director solutions with the redundant v (where
    the scheme conserves them), not with the body rates extracted from v."""
    model = mbd.models.gyro_top()
    sol = _gyro("constrained")
    H, p, L = _invariants(model, sol)
    assert np.allclose(mbd.diagnostics.energy(model, sol).total, H, rtol=0, atol=1e-15)
    assert np.allclose(mbd.diagnostics.linear_momentum(model, sol), p, rtol=0, atol=1e-15)
    assert np.allclose(mbd.diagnostics.angular_momentum(model, sol), L, rtol=0, atol=1e-15)


def test_schemes_agree():
    a, b = _gyro("constrained"), _gyro("null_space")
    assert np.max(np.abs(a.q - b.q)) < 1e-11
    assert np.max(np.abs(a.v - b.v)) < 1e-8
    assert np.max(np.abs(a.lam - b.lam)) < 1e-6 * np.max(np.abs(a.lam))


def test_gyro_top_second_order_against_steady_precession():
    """Error of the COM path at t = 0.15 for h = 0.01 and 0.005 (same step count as the
    other gyro runs: one compilation)."""
    d = gyro_top_data()
    s_ = d["L"] * math.sin(d["theta"])
    errs = []
    for h, k in ((0.01, 15), (0.005, 30)):
        sol = _gyro("constrained", h=h, t_end=30 * h)
        t = float(sol.t[k])
        ref = np.array(
            [
                s_ * math.sin(d["w_p"] * t),
                -s_ * math.cos(d["w_p"] * t),
                d["L"] * math.cos(d["theta"]),
            ]
        )
        errs.append(np.max(np.abs(np.asarray(sol.r[k, 0]) - ref)))
    order = math.log2(errs[0] / errs[1])
    assert 1.8 < order < 2.2, (errs, order)


def test_gyro_top_large_step_runs():
    """h = 0.05 (Figs. 8, 10): Newton converges, H and L3 conserved."""
    model = mbd.models.gyro_top()
    sol = _gyro("null_space", h=0.05, t_end=1.5)
    H, _, L = _invariants(model, sol)
    assert np.all(np.asarray(sol.status) == 0)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < 1e-11
    assert np.max(np.abs(L[:, 2] - L[0, 2])) < 1e-12


@pytest.mark.parametrize("name", ["cylindrical_pair", "planar_pair"])
def test_free_pairs_conserve_energy_and_momenta(name):
    model = getattr(mbd.models, name)()
    sol = mbd.simulate(
        model, formulation="director", integrator="energy_momentum", t_end=0.05, h=0.01
    )
    H, p, L = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < 1e-12
    assert np.max(np.abs(p - p[0])) < 1e-12 * np.max(np.abs(p[0]))
    assert np.max(np.abs(L - L[0])) < 1e-12 * np.max(np.abs(L[0]))
    assert _max_violation(model, sol, 0.01) < 1e-11
    # the initial data is v = P nu (eqs. 174-177)
    assert np.allclose(sol.omega[0, 1] - sol.omega[0, 0], [0, 0, -100 if "cyl" in name else 60])


def test_condition_numbers_scale():
    """Constrained: cond ~ h^-3 (Tables II-V); null space: O(1), -> cond(P^T M P)."""
    model = mbd.models.gyro_top()
    q0 = (model.r0, FORM.coordinates(model.A0))
    conds = []
    for h in (1e-2, 1e-3):
        sol = mbd.simulate(
            model, formulation="director", integrator="energy_momentum", t_end=h, h=h
        )
        q1 = (sol.q[1, :, :3], sol.q[1, :, 3:])
        v0 = sol.v[0]
        Kc, Kr = em.step_matrices(FORM, model, q0, v0, q1, jnp.asarray(h), jnp.asarray(1))
        conds.append((np.linalg.cond(np.asarray(Kc)), np.linalg.cond(np.asarray(Kr))))
    (c1, r1), (c2, r2) = conds
    assert 0.5e3 < c2 / c1 < 2e3  # h^-3
    assert abs(r2 / r1 - 1) < 0.1 and r2 < 100
    basis = em.twist_basis(FORM, model, q0, 0.0, 3)
    P0 = jax.scipy.linalg.block_diag(*FORM.null_space_internal(q0[1])) @ basis.N
    M = jax.scipy.linalg.block_diag(*FORM.mass_matrix(model))
    assert abs(r2 / np.linalg.cond(np.asarray(P0.T @ M @ P0)) - 1) < 0.05


def test_director_agrees_with_rA_gen_alpha():
    """Independent check of the formulation: a different coordinate system and integrator."""
    model = mbd.models.spinning_top()
    a = mbd.simulate(model, formulation="director", integrator="energy_momentum", t_end=0.2, h=1e-3)
    b = mbd.simulate(
        model, formulation="rA", integrator="gen_alpha", rho_inf=1.0, t_end=0.2, h=1e-3
    )
    assert np.max(np.abs(a.r - b.r)) < 5e-5  # both O(h^2): 1.7e-5 measured
    assert np.max(np.abs(a.A - b.A)) < 5e-5
    assert np.max(np.abs(a.omega - b.omega)) < 1e-3


def _planar_on_ground():
    """A body on a planar joint with the ground, tilted plane, gravity: closed form."""
    n = np.array([0.2, -0.3, 1.0]) / np.linalg.norm([0.2, -0.3, 1.0])
    A = _random_rotation(np.random.default_rng(5))
    b = ModelBuilder(name="planar_ground", gravity=(0.0, 0.0, -9.81))
    w = 2.0 * n
    b.add_body("slab", mass=1.5, inertia=[0.2, 0.3, 0.4], r=(0.1, 0.2, 0.3), A=A,
               rdot=(1.0, 0.5, -0.05),  # in the plane: n.rdot = 0
               omega=A.T @ w)  # fmt: skip
    b.planar("E", body_i="ground", body_j="slab", point=(0.0, 0.0, 0.0), axis=n,
             point_j=(0.1, 0.2, 0.3) - n * (n @ np.array([0.1, 0.2, 0.3])))  # fmt: skip
    return b.build(), n, w


@pytest.mark.parametrize(
    "formulation,integrator",
    [
        ("rA", "gen_alpha"),
        ("rp", "gen_alpha"),
        ("re", "gen_alpha"),
        ("director", "energy_momentum"),
    ],
)
def test_planar_joint_every_formulation(formulation, integrator):
    """Planar joint: COM moves with the in-plane gravity, rotation about n at constant rate
    (closed form: no constraint torque about n, no constraint force in the plane)."""
    model, n, w = _planar_on_ground()
    assert model.nc == 3
    sol = mbd.simulate(model, formulation=formulation, integrator=integrator, t_end=0.1, h=1e-3)
    t = np.asarray(sol.t)[:, None]
    g = np.array([0.0, 0.0, -9.81])
    g_par = g - n * (n @ g)
    r0 = np.asarray(sol.r[0, 0])
    v0 = np.asarray(sol.rdot[0, 0])
    assert abs(n @ v0) < 1e-12
    ref_r = r0 + v0 * t + 0.5 * g_par * t**2
    assert np.max(np.abs(np.asarray(sol.r[:, 0]) - ref_r)) < 1e-6
    A0 = np.asarray(sol.A[0, 0])
    ref_A = np.stack([np.asarray(so3_exp(jnp.asarray(w * tk))) @ A0 for tk in t[:, 0]])
    assert np.max(np.abs(np.asarray(sol.A[:, 0]) - ref_A)) < 1e-6


def test_gradient_through_energy_momentum():
    """d/dm of the final height of the gyro top: implicit gradients vs central differences."""
    model = mbd.models.gyro_top()

    def loss(mass):
        m = eqx.tree_at(lambda mm: mm.mass, model, mass)
        sol = mbd.simulate(
            m, formulation="director", integrator="energy_momentum", t_end=0.05, h=0.01
        )
        return jnp.sum(sol.q[-1, 0, :3] * jnp.array([1.0, 2.0, 3.0]))

    m0 = model.mass
    g = jax.grad(loss)(m0)
    eps = 1e-4 * m0
    fd = (loss(m0 + eps) - loss(m0 - eps)) / (2 * eps)
    assert abs(float(g[0]) - float(fd[0])) < 1e-6 * max(1.0, abs(float(fd[0])))
    assert abs(float(g[0])) > 1e-6


def test_six_body_linkage_symmetry_closure_energy():
    """Closed loop, 30 rows of rank 29 (dof=1): both schemes conserve H, keep the symmetry
    theta1 = theta3 = theta5, theta2 = theta4 and the closure relation
    sin(theta2) (1 - sin(theta1)) = sin(theta1) (Sec. 5.4.2), and agree."""
    from jaxmbd.models.betsch_leyendecker import six_body_joint_angles, six_body_linkage_geometry

    geo = six_body_linkage_geometry()
    m0, c0, J0 = geo["bodies"][0]
    a, L = geo["a"], geo["L"]  # the paper's mass, COM and inertia of body 0
    assert abs(m0 - 1000 * a * a * L**3 / 6) < 1e-15
    assert np.allclose(c0, [a * L / 4, L / 2, -a * L / 4], atol=1e-15)
    J_paper = 1000 * L**5 * a * a / 40 * np.array(
        [[1 / 3 + a * a / 4, a / 6, -a * a / 12], [a / 6, a * a / 2, a / 6],
         [-a * a / 12, a / 6, 1 / 3 + a * a / 4]]
    )  # fmt: skip
    assert np.max(np.abs(J0 - J_paper)) < 1e-18
    model = mbd.models.six_body_linkage()
    sols = {}
    for scheme in ("constrained", "null_space"):
        sol = mbd.simulate(
            model, formulation="director", integrator="energy_momentum", scheme=scheme,
            dof=1, t_end=0.2, h=0.01, check=False,
        )  # fmt: skip
        # the start's multipliers are not unique (redundant rows): status 2 at t = 0 only
        assert np.all(np.asarray(sol.status[1:]) == 0)
        H, _, _ = _invariants(model, sol)
        assert np.max(np.abs(H - H[0])) / abs(H[0]) < 1e-12
        th = six_body_joint_angles(sol.A)
        assert np.max(np.abs(th[:, 0] - th[:, 2])) < 1e-8
        assert np.max(np.abs(th[:, 0] - th[:, 4])) < 1e-8
        assert np.max(np.abs(th[:, 1] - th[:, 3])) < 1e-8
        s1, s2 = np.sin(th[:, 0]), np.sin(th[:, 1])
        assert np.max(np.abs(s2 * (1 - s1) - s1)) < 1e-10
        assert np.ptp(th[:, 0]) > 0.5  # it moves
        assert _max_violation(model, sol, 0.01) < 1e-12
        sols[scheme] = sol
    assert np.max(np.abs(sols["constrained"].q - sols["null_space"].q)) < 1e-10


def test_bad_options_raise():
    model = mbd.models.gyro_top()
    with pytest.raises(ValueError, match="scheme"):
        mbd.simulate(model, formulation="director", scheme="midpoint", t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="cannot step formulation"):
        mbd.simulate(model, formulation="rA", integrator="energy_momentum", t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="dof"):
        mbd.simulate(model, formulation="director", dof=99, t_end=0.01, h=0.01)


def test_director_kinematics_of_driven_slider_crank():
    """Kinematic analysis in directors (autodiff Phi_q, nu, gamma of the quadratic GCONs,
    incl. the rotation driver) equals rA's hand-coded one to round-off."""
    model = mbd.models.slider_crank()
    a = mbd.kinematics(model, formulation="director", t_end=0.2, h=1e-2)
    b = mbd.kinematics(model, formulation="rA", t_end=0.2, h=1e-2)
    assert np.max(np.abs(a.r - b.r)) < 1e-12
    assert np.max(np.abs(a.A - b.A)) < 1e-12
    assert np.max(np.abs(a.omega - b.omega)) < 1e-11
    assert np.max(np.abs(a.omegadot - b.omegadot)) < 1e-9
    assert np.max(np.abs(a.rddot - b.rddot)) < 1e-9
