"""Director formulation and energy-momentum integration (Betsch & Leyendecker 2006).

Independent references: the paper's closed forms (P_int (29), the C, P and E pairs'
continuous and discrete null space matrices (107), (113)-(115), (132)-(135), (143)-(151),
written here from the paper without jaxmbd), the analytical steady precession of the gyro top
(Sec. 5.1), the paper's condition numbers (Tables II-IV) and reduced-system sizes, a
closed-form planar sliding motion, and rA / gen_alpha (a different formulation and
integrator).

Test time: every simulation is shared through module-scoped fixtures, and runs of one
model and scheme use one step count (30 for the gyro top) so that they compile once; the
long studies are in ``benchmarks/reproduce_betsch_leyendecker.py`` and ``-m slow``.
"""

from __future__ import annotations

import math
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd import ModelBuilder
from jaxmbd.formulations import director_pairs as dp
from jaxmbd.formulations import get_formulation
from jaxmbd.lie import so3_exp
from jaxmbd.models.betsch_leyendecker import gyro_top_data

FORM = get_formulation("director")
RNG = np.random.default_rng(12)


def _hat(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def _random_rotation(rng):
    return np.asarray(so3_exp(jnp.asarray(rng.normal(size=3))))


@eqx.filter_jit
def _invariants_jit(model, q, v):
    def one(q, v):
        qq = (q[:, :3], q[:, 3:])
        H = FORM.kinetic_energy(model, v) + FORM.potential(model, qq)
        return H, FORM.linear_momentum(model, v), FORM.angular_momentum(model, qq, v)

    return jax.vmap(one)(q, v)


def _invariants(model, sol):
    """(H, p, L) in the redundant director form (notes 1.8), per time step."""
    return tuple(np.asarray(x) for x in _invariants_jit(model, sol.q, sol.v))


@eqx.filter_jit
def _violation_jit(model, q, t):
    return jnp.max(
        jax.vmap(lambda q, t: jnp.abs(FORM.residual(model, (q[:, :3], q[:, 3:]), t)))(q, t)
    )


def _max_violation(model, sol, h):
    return float(_violation_jit(model, sol.q, sol.t))


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

    @jax.jit
    def check(x0, x1):
        def phi(x):
            return FORM.residual(model, FORM._unflat(x, nb), t)

        lhs = phi(x1) - phi(x0)
        mid = lhs - jax.jacfwd(phi)(0.5 * (x0 + x1)) @ (x1 - x0)
        end = lhs - jax.jacfwd(phi)(x0) @ (x1 - x0)
        return jnp.max(jnp.abs(lhs)), jnp.max(jnp.abs(mid)), jnp.max(jnp.abs(end))

    for _ in range(3):
        x0, x1 = RNG.normal(size=(2, 12 * nb))  # arbitrary, not on the manifold
        scale, mid, end = check(x0, x1)
        assert mid < 1e-13 * (1 + scale)
        assert end > 1e-3  # the endpoint Jacobian is not exact (the test can fail)


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
    assert np.allclose(P, P_ref, rtol=0, atol=ROUND_OFF)
    M = np.asarray(FORM.mass_matrix(model)[0])
    red = P.T @ M @ P
    J = np.asarray(model.inertia[0])
    assert np.allclose(red[:3, :3], 2.0 * np.eye(3), rtol=0, atol=ROUND_OFF)
    assert np.allclose(red[3:, 3:], A @ J @ A.T, rtol=0, atol=ROUND_OFF)
    assert np.allclose(red[:3, 3:], 0.0, rtol=0, atol=ROUND_OFF)
    Gint = jax.jacfwd(lambda d: FORM.extra_equations(d))(dirs).reshape(6, 9)
    assert np.max(np.abs(Gint @ P[3:, 3:])) < ROUND_OFF


def test_body_state_round_trip():
    nb = 3
    A = jnp.stack([jnp.asarray(_random_rotation(RNG)) for _ in range(nb)])
    r, rd, w, rdd, wd = (jnp.asarray(RNG.normal(size=(nb, 3))) for _ in range(5))
    q, v, a = FORM.from_body_state(r, A, rd, w, rdd, wd)
    flat = FORM.flat_coordinates(q)
    assert flat.shape == (nb, 12)
    assert np.array_equal(flat[:, 3:6], A[:, :, 0]) and np.array_equal(flat[:, 9:], A[:, :, 2])
    assert np.allclose(
        v[:, 3:6], jnp.cross(jnp.einsum("bij,bj->bi", A, w), A[:, :, 0]), rtol=0, atol=ROUND_OFF
    )
    for got, want in zip(FORM.to_body_state(q, v, a), (r, A, rd, w, rdd, wd), strict=True):
        assert np.max(np.abs(got - want)) < ROUND_OFF


# ------------------------------------------------------------- pairs: the paper's method


def _pair_models():
    """Two free bodies without a joint, and S, R, P (translational), C, E pairs, at generic
    poses; plus the paper's gyro top (S to the ground) and six-body loop (R chain + closure)."""
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
        elif kind == "C":
            b.cylindrical("j", body_i="1", body_j="2", point=pt, axis=ax)
        elif kind == "E":
            b.planar("j", body_i="1", body_j="2", point=pt, axis=ax)
        out[kind] = b.build()
    out["gyro"] = mbd.models.gyro_top()
    out["linkage"] = mbd.models.six_body_linkage()
    return out


PAIRS = _pair_models()
# reduced (Newton) sizes d: Table I (6 + r for a pair with a free body 1), notes 1.7
SIZES = {"free": 12, "S": 9, "R": 7, "P": 7, "C": 8, "E": 9, "gyro": 3, "linkage": 5}


_PAIR_RESULTS = {}


def _pair_results(kind):
    """:func:`_pair_quantities` at one random mu per model (shared by the tests)."""
    if kind not in _PAIR_RESULTS:
        mu = 0.4 * np.random.default_rng(7).normal(size=SIZES[kind])
        _PAIR_RESULTS[kind] = _pair_quantities(PAIRS[kind], jnp.asarray(mu))
    return _PAIR_RESULTS[kind]


def _pair_quantities(model, mu):
    """Everything the algebraic checks need, in one compiled function per model."""
    nb, t = model.nb, 0.0
    st = dp.pair_structure(model)
    q0 = (model.r0, FORM.coordinates(model.A0))
    x0 = FORM._flat(q0)
    # tree rows and internal rows (the closure rows of a loop are not in the tree's P)
    rows = np.r_[np.asarray(st.tree_rows, int), model.nc + np.arange(6 * nb)]

    @jax.jit
    def run(mu):
        def phi(x):
            return FORM.residual(model, FORM._unflat(x, nb), t)[rows]

        def F(m):
            return FORM._flat(dp.reparametrise(model, st, q0, m))

        x1 = F(mu)
        xm = 0.5 * (x0 + x1)
        qm = FORM._unflat(xm, nb)
        return dict(
            G0=jax.jacfwd(phi)(x0),
            P0=dp.null_space(model, st, q0, discrete=False),
            P0_disc=dp.null_space(model, st, q0),
            phi1=phi(x1),
            DF0=jax.jacfwd(F)(jnp.zeros_like(mu)),
            Gm=jax.jacfwd(phi)(xm),
            P=dp.null_space(model, st, qm),
            P_cont=dp.null_space(model, st, qm, discrete=False),
            xm=xm,
        )

    return {k: np.asarray(v) for k, v in run(mu).items()}


@pytest.mark.parametrize("kind", list(PAIRS))
def test_pair_null_space_and_reparametrisation(kind):
    """For the paper's pairs at a generic pose: d (Table I), G P = 0 and rank P = n - m;
    Phi(F(mu)) = 0 to 1e-14; DF(0) = P(q_n); G(q_{n+1/2}) P(q_n, q_{n+1}) = 0 (eq. 14), while
    the continuous P at the midpoint fails it for C, P and E (the frame vectors at the
    midpoint are not orthonormal)."""
    model = PAIRS[kind]
    st = dp.pair_structure(model)
    assert st.size == SIZES[kind], st.describe(model)
    r = _pair_results(kind)
    assert np.max(np.abs(r["G0"] @ r["P0"])) < ROUND_OFF
    assert np.max(np.abs(r["P0_disc"] - r["P0"])) < ROUND_OFF  # consistency at q_n (eq. 13)
    n_rows = r["G0"].shape[0]
    assert np.linalg.matrix_rank(r["P0"]) == st.size == 12 * model.nb - n_rows
    assert np.linalg.matrix_rank(r["G0"]) == n_rows
    assert np.max(np.abs(r["phi1"])) < ROUND_OFF
    assert np.max(np.abs(r["DF0"] - r["P0"])) < ROUND_OFF
    assert np.max(np.abs(r["Gm"] @ r["P"])) < ROUND_OFF
    assert np.linalg.matrix_rank(r["P"]) == st.size
    cont = np.max(np.abs(r["Gm"] @ r["P_cont"]))
    if kind in ("P", "C", "E"):
        assert cont > 1e-4
    else:  # S, R and free bodies: the midpoint evaluation is the discrete matrix (90), (125)
        assert cont < ROUND_OFF


def test_pair_structure_of_the_paper_examples():
    """Spanning trees: the six-body linkage is the open chain 1..5 (Sec. 5.4.1) with joint 6
    as closure rows (5.4.2); Newton sizes of notes 1.7."""
    st = dp.pair_structure(PAIRS["linkage"])
    assert [e.joint for e in st.edges] == [f"joint{k}" for k in range(1, 6)]
    assert all(e.kind == "R" for e in st.edges)
    closure = {PAIRS["linkage"].constraint_joints[r] for r in st.closure_rows}
    assert closure == {"joint6"} and len(st.closure_rows) == 5
    assert [e.kind for e in dp.pair_structure(PAIRS["gyro"]).edges] == ["S"]
    for name, kinds in (("cylindrical_pair", ["free", "C"]), ("planar_pair", ["free", "E"])):
        assert [e.kind for e in dp.pair_structure(getattr(mbd.models, name)()).edges] == kinds


def _P_int(D):
    """Eq. (29) for directors D = (d1, d2, d3) (9,), in numpy."""
    P = np.zeros((12, 6))
    P[:3, :3] = np.eye(3)
    for I in range(3):
        P[3 + 3 * I : 6 + 3 * I, 3:] = -_hat(D[3 * I : 3 * I + 3])
    return P


@pytest.mark.parametrize("kind", ["P", "C", "E"])
def test_pair_closed_forms_from_the_paper(kind):
    """P (131)-(135), C (107), (113)-(115) and E (143), (149)-(151), written here in numpy
    with the joint's body-1 vectors m1, m2, n at the midpoint: the library's discrete null
    space matrix *is* the paper's (same columns (v_phi1, omega1, tau)), and the continuous
    one (translations along n, resp. m1, m2) fails the discrete condition (14)."""
    model = PAIRS[kind]
    r = _pair_results(kind)
    xm = r["xm"]
    phi1, D1, phi2, D2 = xm[:3], xm[3:12], xm[12:15], xm[15:]
    R1, R2 = D1.reshape(3, 3), D2.reshape(3, 3)  # rows d_I: local a -> global a @ R
    # m1, m2 as the joint's GCONs carry them: Perp-2 (C, P) or Perp-1 (E), on body 1
    a = np.asarray(model.gcon("DP2" if kind in ("C", "P") else "DP1").a_bar_i)
    m1, m2, n = a[0] @ R1, a[1] @ R1, np.cross(a[0], a[1]) @ R1
    rho2 = np.asarray(model.gcon("DP2").s_bar_q_j[0]) @ R2

    def P_pair(trans_cols, rot_col):
        d = 6 + trans_cols.shape[1] + (rot_col is not None)
        Pext2 = np.zeros((6, d))
        Pext2[:3, :3] = np.eye(3)
        Pext2[:3, 3:6] = _hat(phi1 - phi2)
        Pext2[3:, 3:6] = np.eye(3)
        Pext2[:3, 6 : 6 + trans_cols.shape[1]] = trans_cols
        if rot_col is not None:
            Pext2[:3, -1] = np.cross(rho2, rot_col)
            Pext2[3:, -1] = rot_col
        P = np.zeros((24, d))
        P[:12, :6] = _P_int(D1)
        P[12:, :] = _P_int(D2) @ Pext2
        return P

    if kind == "P":
        P_cont, P_disc = P_pair(n[:, None], None), P_pair(np.cross(m1, m2)[:, None], None)
    elif kind == "C":
        P_cont, P_disc = P_pair(n[:, None], n), P_pair(np.cross(m1, m2)[:, None], n)
    else:
        P_cont = P_pair(np.stack([m1, m2], 1), n)
        P_disc = P_pair(np.stack([np.cross(m2, n), np.cross(n, m1)], 1), n)
    assert np.max(np.abs(r["Gm"] @ P_cont)) > 1e-4
    assert np.max(np.abs(r["Gm"] @ P_disc)) < ROUND_OFF
    assert np.max(np.abs(r["P"] - P_disc)) < ROUND_OFF
    assert np.max(np.abs(r["P_cont"] - P_cont)) < ROUND_OFF


# ------------------------------------------------------------------------- dynamics


def _simulate(model, **options):
    return mbd.simulate(model, formulation="director", integrator="energy_momentum", **options)


SCHEMES = ("constrained", "null_space")
GYRO_STEPS = 30  # every gyro run: one compilation per scheme


@pytest.fixture(scope="module")
def gyro():
    """Gyro top runs of 30 steps, both schemes, condition numbers recorded, keyed (scheme, h)."""
    model = mbd.models.gyro_top()
    return {
        (s, h): _simulate(model, scheme=s, t_end=GYRO_STEPS * h, h=h, record_condition=True)
        for s in SCHEMES
        for h in (0.05, 0.01, 0.005)
    }


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("h", [0.01, 0.05])
def test_gyro_top_conserves_energy_and_L3(gyro, scheme, h):
    """H and L3 to round-off, also at h = 0.05 (~2.6 rad per step: damped Newton, Cayley
    predictor); constraints to 1e-12; L1 is not conserved (the test can fail)."""
    model = mbd.models.gyro_top()
    sol = gyro[scheme, h]
    assert np.all(np.asarray(sol.status) == 0)
    H, _, L = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < ROUND_OFF
    assert np.max(np.abs(L[:, 2] - L[0, 2])) < ROUND_OFF * max(1.0, abs(float(L[0, 2])))
    assert np.max(np.abs(L[:, 0] - L[0, 0])) > 1e-6
    assert _max_violation(model, sol, h) < ROUND_OFF


def test_diagnostics_use_redundant_director_form(gyro):
    """mbd.diagnostics evaluates H, p, L of director solutions with the redundant v (where
    the scheme conserves them), not with the body rates extracted from v."""
    model = mbd.models.gyro_top()
    sol = gyro["constrained", 0.01]
    H, p, L = _invariants(model, sol)
    assert np.allclose(mbd.diagnostics.energy(model, sol).total, H, rtol=0, atol=1e-15)
    assert np.allclose(mbd.diagnostics.linear_momentum(model, sol), p, rtol=0, atol=1e-15)
    assert np.allclose(mbd.diagnostics.angular_momentum(model, sol), L, rtol=0, atol=1e-15)


@pytest.mark.parametrize("h", [0.01, 0.05])
def test_schemes_agree(gyro, h):
    """The null-space scheme (3 unknowns) and the constrained one (21) reach the same root."""
    a, b = gyro["constrained", h], gyro["null_space", h]
    assert np.max(np.abs(a.q - b.q)) < 5e-14
    assert np.max(np.abs(a.v - b.v)) < 5e-12
    assert np.max(np.abs(a.lam - b.lam)) < 5e-13 * np.max(np.abs(a.lam))
    assert np.max(np.asarray(b.iterations)) < np.max(np.asarray(a.iterations)) + 3


@pytest.mark.parametrize("scheme", SCHEMES)
def test_gyro_top_second_order_against_steady_precession(gyro, scheme):
    """Error of the COM path at t = 0.15 for h = 0.01 and 0.005."""
    d = gyro_top_data()
    s_ = d["L"] * math.sin(d["theta"])
    errs = []
    for h, k in ((0.01, 15), (0.005, 30)):
        sol = gyro[scheme, h]
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


def test_condition_numbers_table_II(gyro):
    """record_condition: the constrained matrix grows like h^-3 and matches Table II
    (1.6e4 at h = 5e-2) within 10 %; the reduced one stays ~8 and tends to cond(M_tilde) =
    M1 / M3 (eqs. 166-168) as h -> 0."""
    c = {key: np.asarray(sol.condition) for key, sol in gyro.items()}
    assert all(np.isnan(v[0]) and np.all(np.isfinite(v[1:])) for v in c.values())
    con = {h: np.median(c["constrained", h][1:]) for h in (0.05, 0.01, 0.005)}
    red = {h: np.median(c["null_space", h][1:]) for h in (0.05, 0.01, 0.005)}
    assert abs(con[0.05] / 1.6e4 - 1) < 0.1, con  # Table II, h = 5e-2
    assert abs(con[0.005] / 1.6e7 - 1) < 0.04, con  # Table II, h = 5e-3 (two digits: +-3 %)
    assert abs(np.log(con[0.005] / con[0.01]) / np.log(2) - 3) < 4e-3, con  # h^-3
    d = gyro_top_data()
    limit = d["M1"] / d["M3"]
    assert abs(red[0.005] / limit - 1) < 0.03, (red, limit)  # 8.34 vs 8.5
    assert 5 < red[0.05] < red[0.01] < red[0.005], red  # 6.4, 8.0, 8.3 (paper: ~8)


def test_solution_condition_saved_and_loaded(gyro, tmp_path):
    sol = gyro["null_space", 0.01]
    back = mbd.Solution.load(sol.save(tmp_path / "gyro.npz"))
    assert np.array_equal(np.asarray(back.condition), np.asarray(sol.condition), equal_nan=True)
    assert back.q.shape == sol.q.shape


@pytest.fixture(scope="module")
def free_pairs():
    """C and E pairs, 5 steps of h = 0.01, both schemes; the null-space runs record their
    condition numbers (the constrained ones are checked on the gyro top, Table II)."""
    return {
        (name, s): _simulate(
            getattr(mbd.models, name)(),
            scheme=s,
            t_end=0.05,
            h=0.01,
            record_condition=s == "null_space",
        )
        for name in ("cylindrical_pair", "planar_pair")
        for s in SCHEMES
    }


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", ["cylindrical_pair", "planar_pair"])
def test_free_pairs_conserve_energy_and_momenta(free_pairs, name, scheme):
    model = getattr(mbd.models, name)()
    sol = free_pairs[name, scheme]
    H, p, L = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < ROUND_OFF
    assert np.max(np.abs(p - p[0])) < 2e-14 * np.max(np.abs(p[0]))
    assert np.max(np.abs(L - L[0])) < ROUND_OFF * np.max(np.abs(L[0]))
    assert _max_violation(model, sol, 0.01) < ROUND_OFF
    # the initial data is v = P nu (eqs. 174-177)
    assert np.allclose(
        sol.omega[0, 1] - sol.omega[0, 0],
        [0, 0, -100 if "cyl" in name else 60],
        rtol=ROUND_OFF,
        atol=ROUND_OFF,
    )


@pytest.mark.parametrize("name", ["cylindrical_pair", "planar_pair"])
def test_free_pairs_schemes_agree_and_tables_III_IV(free_pairs, name):
    """Same root from 8 (C) or 9 (E) unknowns as from 40 / 39; the reduced condition numbers
    at h = 1e-2 are of the order of Tables III (~360) and IV (~7.3e2), i.e. O(1e2), not the
    constrained O(1e10-1e11)."""
    a, b = free_pairs[name, "constrained"], free_pairs[name, "null_space"]
    assert np.max(np.abs(a.q - b.q)) < ROUND_OFF * np.max(np.abs(a.q))
    red = np.asarray(b.condition[1:])
    paper = 360.0 if name == "cylindrical_pair" else 730.0
    assert np.all((red > paper / 2) & (red < paper * 2)), red


@pytest.fixture(scope="module")
def linkage():
    """Six-body loop (1 DOF: its redundant row is dropped, no dof option), 20 steps of
    h = 0.01, both schemes, checked start."""
    model = mbd.models.six_body_linkage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        return {s: _simulate(model, scheme=s, t_end=0.2, h=0.01) for s in SCHEMES}


def test_six_body_linkage_start_is_consistent(linkage):
    """The closed loop's 30 joint rows have rank 29: the start (run with check=True) has
    finite multipliers, zero on the dropped row (the split among dependent rows is not
    unique: the one with the dropped row's share zero), that balance the forces,
    G^T lam = Q - M a (rA form), and the initial rates of Sec. 5.4.2."""
    from jaxmbd.constraints.equations import rA_terms

    model = mbd.models.six_body_linkage()
    sol = linkage["constrained"]
    lam = np.asarray(sol.lam[0])
    assert int(sol.status[0]) == 0 and np.all(np.isfinite(lam))
    zero = jnp.zeros((model.nb, 3))
    _, G, _, _ = rA_terms(model, sol.r[0], sol.A[0], zero, zero, 0.0)
    G = np.asarray(G)
    U, s, _ = np.linalg.svd(G)
    assert s[-1] < 1e-12 * s[0] < s[-2]  # one redundant row (a self-stress y: G^T y = 0)
    assert lam[list(model.redundancy.dropped)].tolist() == [0.0]
    assert abs(U[list(model.redundancy.dropped), -1][0]) > 0.05 * np.abs(U[:, -1]).max()
    w = np.asarray(sol.omega[0])
    J = np.asarray(model.inertia)
    m = np.asarray(model.mass)
    a = np.concatenate([m[:, None] * np.asarray(sol.rddot[0]),
                        np.einsum("bij,bj->bi", J, np.asarray(sol.omegadot[0]))
                        + np.cross(w, np.einsum("bij,bj->bi", J, w))], 1)  # fmt: skip
    Q = np.concatenate([m[:, None] * np.asarray(model.gravity), np.zeros((model.nb, 3))], 1)
    assert np.max(np.abs(G.T @ lam - (Q - a).reshape(-1))) < 5e-15
    # body 1 turns about a(H_1) = -e3 at theta1_dot = 30 (body frames global at t = 0)
    assert np.allclose(
        np.asarray(sol.omega[0, 0]), [0.0, 0.0, -30.0], rtol=ROUND_OFF, atol=ROUND_OFF
    )


@pytest.mark.parametrize("scheme", SCHEMES)
def test_six_body_linkage_symmetry_closure_energy(linkage, scheme):
    """Closed loop: H conserved, the symmetry theta1 = theta3 = theta5, theta2 = theta4 and
    the closure relation sin(theta2) (1 - sin(theta1)) = sin(theta1) (Sec. 5.4.2)."""
    from jaxmbd.models.betsch_leyendecker import six_body_joint_angles, six_body_linkage_geometry

    geo = six_body_linkage_geometry()
    m0, c0, J0 = geo["bodies"][0]
    a, L = geo["a"], geo["L"]  # the paper's mass, COM and inertia of body 0
    assert abs(m0 - 1000 * a * a * L**3 / 6) < ROUND_OFF * m0
    assert np.allclose(c0, [a * L / 4, L / 2, -a * L / 4], rtol=ROUND_OFF, atol=0)
    J_paper = 1000 * L**5 * a * a / 40 * np.array(
        [[1 / 3 + a * a / 4, a / 6, -a * a / 12], [a / 6, a * a / 2, a / 6],
         [-a * a / 12, a / 6, 1 / 3 + a * a / 4]]
    )  # fmt: skip
    assert np.max(np.abs(J0 - J_paper)) < ROUND_OFF * np.max(np.abs(J_paper))
    model = mbd.models.six_body_linkage()
    sol = linkage[scheme]
    assert np.all(np.asarray(sol.status) == 0)
    H, _, _ = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < 3e-14
    th = six_body_joint_angles(sol.A)
    assert np.max(np.abs(th[:, 0] - th[:, 2])) < ROUND_OFF
    assert np.max(np.abs(th[:, 0] - th[:, 4])) < ROUND_OFF
    assert np.max(np.abs(th[:, 1] - th[:, 3])) < ROUND_OFF
    s1, s2 = np.sin(th[:, 0]), np.sin(th[:, 1])
    assert np.max(np.abs(s2 * (1 - s1) - s1)) < ROUND_OFF
    assert np.ptp(th[:, 0]) > 0.5  # it moves
    assert _max_violation(model, sol, 0.01) < ROUND_OFF


def test_six_body_linkage_schemes_agree(linkage):
    """5 reduced unknowns (1 projected balance + 4 closure combinations) vs 119: same root."""
    a, b = linkage["constrained"], linkage["null_space"]
    assert np.max(np.abs(a.q - b.q)) < 5e-14
    assert np.max(np.asarray(b.iterations)) <= 8


@pytest.mark.slow
def test_director_agrees_with_rA_gen_alpha():
    """Independent check of the formulation: a different coordinate system and integrator."""
    model = mbd.models.spinning_top()
    a = _simulate(model, t_end=0.1, h=1e-3)
    b = mbd.simulate(
        model, formulation="rA", integrator="gen_alpha", rho_inf=1.0, t_end=0.1, h=1e-3
    )
    assert np.max(np.abs(a.r - b.r)) < 5e-5  # both O(h^2)
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
    "formulation,integrator,options",
    [
        ("rA", "gen_alpha", {}),
        pytest.param("rp", "gen_alpha", {}, marks=pytest.mark.slow),
        pytest.param("re", "gen_alpha", {}, marks=pytest.mark.slow),
        ("director", "energy_momentum", {"scheme": "null_space"}),
        pytest.param(
            "director", "energy_momentum", {"scheme": "constrained"}, marks=pytest.mark.slow
        ),
    ],
)
def test_planar_joint_every_formulation(formulation, integrator, options):
    """Planar joint: COM moves with the in-plane gravity, rotation about n at constant rate
    (closed form: no constraint torque about n, no constraint force in the plane). The
    director run uses the paper's E pair with the ground as body 1."""
    model, n, w = _planar_on_ground()
    assert model.nc == 3
    sol = mbd.simulate(
        model, formulation=formulation, integrator=integrator, t_end=0.05, h=1e-3, **options
    )
    t = np.asarray(sol.t)[:, None]
    g = np.array([0.0, 0.0, -9.81])
    g_par = g - n * (n @ g)
    r0 = np.asarray(sol.r[0, 0])
    v0 = np.asarray(sol.rdot[0, 0])
    assert abs(n @ v0) < ROUND_OFF
    ref_r = r0 + v0 * t + 0.5 * g_par * t**2
    assert np.max(np.abs(np.asarray(sol.r[:, 0]) - ref_r)) < 5e-14
    A0 = np.asarray(sol.A[0, 0])
    ref_A = np.stack([np.asarray(so3_exp(jnp.asarray(w * tk))) @ A0 for tk in t[:, 0]])
    # the rotation about n is exact in rA; the director midpoint and gen_alpha on rp's and re's
    # coordinates err by 2.6e-8 and 6.6e-9 (measured, rp and re slow-marked)
    tol = {"director": 1e-7, "rp": 3e-8, "re": 3e-8}.get(formulation, ROUND_OFF)
    assert np.max(np.abs(np.asarray(sol.A[:, 0]) - ref_A)) < tol


@pytest.mark.parametrize(
    "scheme", ["constrained", pytest.param("null_space", marks=pytest.mark.slow)]
)
def test_gradient_through_energy_momentum(scheme):
    """d/dm of the final position of the gyro top: implicit gradients vs central differences
    (the gradient is attached to the constrained root, so it is the same for both schemes)."""
    model = mbd.models.gyro_top()

    def loss(mass):
        m = eqx.tree_at(lambda mm: mm.mass, model, mass)
        sol = _simulate(m, scheme=scheme, t_end=0.02, h=0.01)
        return jnp.sum(sol.q[-1, 0, :3] * jnp.array([1.0, 2.0, 3.0]))

    m0 = model.mass
    g = mbd.jit(jax.grad(loss))(m0)
    eps = 1e-4 * m0
    fd = (loss(m0 + eps) - loss(m0 - eps)) / (2 * eps)
    assert abs(float(g[0]) - float(fd[0])) < 3e-10 * max(1.0, abs(float(fd[0])))
    assert abs(float(g[0])) > 1e-6


def test_bad_options_raise():
    model = mbd.models.gyro_top()
    with pytest.raises(ValueError, match="scheme"):
        _simulate(model, scheme="midpoint", t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="parametrisation"):
        _simulate(model, scheme="null_space", parametrisation="svd", t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="cannot step formulation"):
        mbd.simulate(model, formulation="rA", integrator="energy_momentum", t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="dof"):
        _simulate(model, dof=99, t_end=0.01, h=0.01)
    with pytest.raises(ValueError, match="dof = 2, but model 'gyro_top' has 3 degrees"):
        _simulate(model, dof=2, t_end=0.01, h=0.01)  # dof is a check against the rank


@pytest.mark.slow
def test_director_kinematics_of_driven_slider_crank():
    """Kinematic analysis in directors (autodiff Phi_q, nu, gamma of the quadratic GCONs,
    incl. the rotation driver) equals rA's hand-coded one to round-off. Both solve to
    tol=1e-12: at the default 1e-10 each stops after two iterations of its own Newton path,
    and the two roots differ by that tolerance's remainder (A 1.9e-12, omega 2.4e-11); at
    1e-12 they differ by 1.3e-14 and 3.0e-14."""
    model = mbd.models.slider_crank()
    a = mbd.kinematics(model, formulation="director", t_end=0.1, h=1e-2, tol=1e-12)
    b = mbd.kinematics(model, formulation="rA", t_end=0.1, h=1e-2, tol=1e-12)
    assert np.max(np.abs(a.r - b.r)) < 1e-12
    assert np.max(np.abs(a.A - b.A)) < 1e-12
    assert np.max(np.abs(a.omega - b.omega)) < 1e-11
    assert np.max(np.abs(a.omegadot - b.omegadot)) < 1e-9
    assert np.max(np.abs(a.rddot - b.rddot)) < 1e-9


# ------------------------------------------------------------------ slow: long studies


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gyro_top", "six_body_linkage"])
def test_numerical_parametrisation_same_root(name):
    """The generic variant (null space from an SVD, inner Newton projection) reaches the
    same root as the paper's pair-specific method and the constrained scheme."""
    model = getattr(mbd.models, name)()
    opts = {}
    a = _simulate(model, scheme="null_space", parametrisation="numerical", t_end=0.1, h=0.01,
                  **opts)  # fmt: skip
    b = _simulate(model, scheme="null_space", t_end=0.1, h=0.01, **opts)
    assert np.max(np.abs(a.q - b.q)) < 1e-10


@pytest.mark.slow
def test_six_body_linkage_long_run():
    """Notes 5.6: h = 0.01, t <= 1: H to 1e-8 relative, symmetry to 1e-8, closure relation
    to 1e-10 at every step, sin(theta1) <= 1/2 (theta1 <= pi/6 modulo the full turns the
    loop makes; the bound is reached)."""
    from jaxmbd.models.betsch_leyendecker import six_body_joint_angles

    model = mbd.models.six_body_linkage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        sol = _simulate(model, scheme="null_space", t_end=1.0, h=0.01)
    H, _, _ = _invariants(model, sol)
    assert np.max(np.abs(H - H[0])) / abs(H[0]) < 1e-10
    th = six_body_joint_angles(sol.A)
    s1, s2 = np.sin(th[:, 0]), np.sin(th[:, 1])
    assert np.max(np.abs(s2 * (1 - s1) - s1)) < 1e-10
    assert np.max(np.abs(th[:, 0] - th[:, 2])) < 1e-8
    assert 0.5 - 1e-3 < np.max(s1) <= 0.5 + 1e-8


@pytest.mark.slow
def test_step_matrices_match_record_condition(gyro):
    """The stand-alone helper step_matrices gives the matrices whose condition numbers
    record_condition stores (first gyro step, h = 0.01, both schemes)."""
    from jaxmbd.integrators import energy_momentum as em

    model = mbd.models.gyro_top()
    a, b = gyro["constrained", 0.01], gyro["null_space", 0.01]
    q0 = (a.q[0, :, :3], a.q[0, :, 3:])
    q1 = (a.q[1, :, :3], a.q[1, :, 3:])
    Kc, Kr = em.step_matrices(FORM, model, q0, a.v[0], q1, jnp.asarray(0.01), jnp.asarray(1))
    assert Kc.shape == (21, 21) and Kr.shape == (3, 3)
    assert abs(np.linalg.cond(np.asarray(Kc)) / float(a.condition[1]) - 1) < 1e-6
    assert abs(np.linalg.cond(np.asarray(Kr)) / float(b.condition[1]) - 1) < 1e-6
