"""Dumitriu & Margaritescu: the rotmat formulation (T*, R) and the rk integrator with
two-step / one-step / frozen multipliers, on the two-bar pendulum on spherical joints.

Independent references written without jaxmbd: the planar joint-angle ODE (26) integrated
by scipy DOP853 at 1e-13, the reaction forces m (g x0 - a_G) from its accelerations, and
scipy.linalg.solve_sylvester / a Kronecker solve for eq. 25."""

from functools import cache, partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.formulations import Rotmat
from jaxmbd.formulations.rotmat import lyapunov_solve, poinsot_tensor
from jaxmbd.integrators import RungeKutta, StartState
from jaxmbd.models import dumitriu_margaritescu as dm

M, L, A_W, B_T, G = 0.108, 0.2, 0.02, 0.01, 9.81
PHI0, PSI0 = np.pi / 9, np.pi / 18
FORM = Rotmat()
two_step = eqx.filter_jit(FORM.two_step)
one_step = eqx.filter_jit(FORM.one_step)


def noop(done, total):
    pass


# ------------------------------------------------------------- independent reference (26)


def _rhs(t, y):
    phi, psi, dphi, dpsi = y
    C = M * (L * L + A_W * A_W) / 12
    c, s = np.cos(phi - psi), np.sin(phi - psi)
    mass = np.array(
        [[C + 1.25 * M * L * L, 0.5 * M * L * L * c], [0.5 * M * L * L * c, C + 0.25 * M * L * L]]
    )
    f = np.array(
        [
            -0.5 * M * L * L * s * dpsi**2 - 1.5 * M * G * L * np.sin(phi),
            0.5 * M * L * L * s * dphi**2 - 0.5 * M * G * L * np.sin(psi),
        ]
    )
    dd = np.linalg.solve(mass, f)
    return np.array([dphi, dpsi, dd[0], dd[1]])


@cache
def _reference_solution(t_end):
    return solve_ivp(
        _rhs,
        (0.0, t_end),
        [PHI0, PSI0, 0.0, 0.0],
        method="DOP853",
        rtol=1e-13,
        atol=1e-14,
        dense_output=True,
    )


def reference(t):
    """(phi, psi, dphi, dpsi, ddphi, ddpsi) at times t from (26)."""
    t = np.asarray(t, dtype=float)
    y = _reference_solution(5.0).sol(t)
    dd = np.stack([_rhs(0.0, y[:, k]) for k in range(t.size)], 1)[2:]
    return np.concatenate([y, dd])


def reference_reactions(t):
    """Lambda_01 and Lambda_12 (T, 3) from the reference: m (2 g x0 - a_G1 - a_G2) and
    m (g x0 - a_G2) (the paper's sign convention, eq. 14)."""
    phi, psi, dphi, dpsi, ddphi, ddpsi = reference(t)

    def acc(th, dth, ddth, arm):
        e = np.stack([np.cos(th), np.sin(th), 0 * th], 1)
        n = np.stack([-np.sin(th), np.cos(th), 0 * th], 1)
        return arm * (ddth[:, None] * n - (dth**2)[:, None] * e)

    a1 = acc(phi, dphi, ddphi, L / 2)
    a2 = acc(phi, dphi, ddphi, L) + acc(psi, dpsi, ddpsi, L / 2)
    gx = np.array([G, 0.0, 0.0])
    return M * (2 * gx - a1 - a2), M * (gx - a2)


def reference_energy():
    C = M * (L * L + A_W * A_W) / 12
    return -1.5 * M * G * L * np.cos(PHI0) - 0.5 * M * G * L * np.cos(PSI0), C


# --------------------------------------------------------------------------- runs


@cache
def model():
    return mbd.models.bar_double_pendulum()


@cache
def simulated(h, t_end=1.0, **options):
    # fixed chunks: one compilation per option set across step sizes and horizons
    return mbd.simulate(
        model(),
        formulation="rotmat",
        integrator="rk",
        t_end=t_end,
        h=h,
        progress=noop,
        chunk_size=250,
        **options,
    )


@cache
def gen_alpha(h):
    return mbd.simulate(
        model(),
        formulation="rA",
        integrator="gen_alpha",
        t_end=1.0,
        h=h,
        progress=noop,
        chunk_size=250,
    )


def start_state(model):
    """A consistent start straight from the model data (at rest, joints satisfied exactly)."""
    z = jnp.zeros_like(model.r0)
    q, v, a = FORM.from_body_state(model.r0, model.A0, model.rdot0, model.omega0, z, z)
    return StartState(q, v, a, jnp.zeros(FORM.num_multipliers(model)))


@eqx.filter_jit
def rollout_scan(model, integrator, h, n: int):
    """As :func:`rollout` with a static number of steps (reverse mode)."""
    state = integrator.init(model, FORM, start_state(model), h)

    def body(s, k):
        return integrator.step(model, FORM, s, k, h)[0], None

    return jax.lax.scan(body, state, jnp.arange(1, n + 1))[0]


@eqx.filter_jit
def rollout(model, integrator, h, n):
    """The integrator's own init and step in a fori_loop (n traced: one compilation per
    integrator for every step size)."""
    state = integrator.init(model, FORM, start_state(model), h)

    def body(k, s):
        return integrator.step(model, FORM, s, k, h)[0]

    return jax.lax.fori_loop(1, n + 1, body, state)


def rollout_angles(integrator, h, t_end):
    n = int(round(t_end / h))
    s = rollout(model(), integrator, jnp.asarray(h), jnp.asarray(n))
    R = s.q.R
    og10 = model().r0[0]
    hg20 = model().r0[1] - 2 * model().r0[0]
    u1, u2 = R[0] @ og10, R[1] @ hg20
    return np.array([np.arctan2(u1[1], u1[0]), np.arctan2(u2[1], u2[0])])


def observed_orders(errors):
    errors = np.asarray(errors)
    return np.log2(errors[:-1] / errors[1:])


# --------------------------------------------------------------------------- setup


def test_model_data_and_poinsot_tensors():
    m = model()
    assert m.nb == 2 and m.nc == 6 and m.body_names == ("bar 1", "bar 2")
    C = M * (L * L + A_W * A_W) / 12
    assert abs(C - 3.636e-4) < 5e-8  # printed "3,636 kg cm^2": half its last digit
    assert np.array_equal(m.gravity, [G, 0, 0])
    q = start_state(m).q
    K = np.asarray(FORM.poinsot_tensors(m, q))
    for b, th in enumerate((PHI0, PSI0)):
        c, s = np.cos(th), np.sin(th)
        eq15 = (M / 12) * np.array(
            [
                [L * L * c * c + A_W * A_W * s * s, (L * L - A_W * A_W) * s * c, 0],
                [(L * L - A_W * A_W) * s * c, L * L * s * s + A_W * A_W * c * c, 0],
                [0, 0, B_T * B_T],
            ]
        )
        np.testing.assert_allclose(K[b], eq15, rtol=0, atol=ROUND_OFF * np.abs(eq15).max())
    # K <-> J round trip: J = tr(K) I - K
    J = np.asarray(m.inertia[0])
    Kb = np.asarray(poinsot_tensor(m.inertia[0]))
    np.testing.assert_allclose(np.trace(Kb) * np.eye(3) - Kb, J, rtol=ROUND_OFF)
    # R(0) = I, T*(0) = 0 (eq. 4); the rotmat coordinates of the start
    np.testing.assert_array_equal(np.asarray(q.R), np.broadcast_to(np.eye(3), (2, 3, 3)))
    np.testing.assert_array_equal(np.asarray(q.T), 0.0)


def test_gcons_are_at_most_quadratic_and_spherical_is_linear():
    """Every GCON kind in (T*, R): third derivatives vanish; the spherical joint's Hessian
    vanishes (eq. 13)."""
    b = mbd.ModelBuilder(name="all kinds", gravity=(0, 0, -9.81))
    b.add_body("a", mass=1.0, inertia=(0.1, 0.2, 0.3), r=(0.3, 0.1, 0.2))
    b.add_body("b", mass=2.0, inertia=(0.2, 0.3, 0.4), r=(1.0, -0.2, 0.4))
    kw = dict(body_i="a", body_j="b")
    b.add_dp1("dp1", a_bar_i=(1, 0, 0), a_bar_j=(0, 1, 0), **kw)
    b.add_dp2("dp2", a_bar_i=(0, 0, 1), s_bar_p_i=(0.1, 0, 0), s_bar_q_j=(0, 0.2, 0), **kw)
    b.add_d("d", s_bar_p_i=(0.1, 0.1, 0), s_bar_q_j=(0, 0, 0.1), f=0.6, **kw)
    b.add_cd("cd", c=(0, 1, 0), s_bar_p_i=(0.1, 0, 0), s_bar_q_j=(0, 0, 0.2), **kw)
    b.add_rot("rot", u_bar_i=(1, 0, 0), v_bar_i=(0, 1, 0), a_bar_j=(1, 0, 0), angle="0.3*t", **kw)
    b.spherical("sph", body_i="ground", body_j="a", point=(0.2, 0.0, 0.1))
    m = b.build()
    q = start_state(m).q
    rng = np.random.default_rng(0)
    x0 = FORM.flat_coordinates(q).reshape(-1) + 0.1 * rng.standard_normal(24)
    d1, d2, d3 = (jnp.asarray(rng.standard_normal(24)) for _ in range(3))

    def phi(x):
        return FORM.joint_residual(m, FORM.coordinates_from_flat(x, q.g0, q.A0), 0.7)

    def second(x, u, w):
        return jax.jvp(lambda y: jax.jvp(phi, (y,), (u,))[1], (x,), (w,))[1]

    third = jax.jit(lambda x: jax.jvp(lambda y: second(y, d1, d2), (x,), (d3,))[1])(x0)
    assert np.max(np.abs(np.asarray(third))) < ROUND_OFF
    hess = np.asarray(jax.jit(second)(x0, d1, d2))
    assert np.max(np.abs(hess[:5])) > 1e-3  # DP1, DP2, D, CD (0: linear), ROT
    assert abs(hess[3]) < ROUND_OFF  # CD is linear
    np.testing.assert_array_equal(hess[5:], 0.0)  # spherical joint: linear (eq. 13)
    # and the values equal the rA constraint values at r = T* + R OG_0, A = R A_0
    r, A, *_ = FORM.to_body_state(q, jnp.zeros((2, 12)), jnp.zeros((2, 12)))
    np.testing.assert_allclose(
        FORM.joint_residual(m, q, 0.7),
        mbd.equations.constraint_values(m, r, A, 0.7),
        rtol=0,
        atol=ROUND_OFF,
    )


# ------------------------------------------------------------------- multipliers (eq. 25)


def test_lyapunov_solve_against_scipy_and_kronecker():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, 3))
    K_inv = X @ X.T + 0.5 * np.eye(3)
    B = rng.standard_normal((3, 3))
    B = B + B.T
    d, Q = np.linalg.eigh(K_inv)
    lam = np.asarray(lyapunov_solve(jnp.asarray(K_inv), jnp.asarray(B), Q, d))
    np.testing.assert_allclose(lam, scipy.linalg.solve_sylvester(K_inv, K_inv, B), rtol=1e-13)
    # direct Kronecker solve of Lambda K^-1 + K^-1 Lambda = B (row-major vec)
    kron = np.kron(np.eye(3), K_inv.T) + np.kron(K_inv, np.eye(3))
    np.testing.assert_allclose(lam.reshape(-1), np.linalg.solve(kron, B.reshape(-1)), rtol=5e-14)
    np.testing.assert_allclose(lam, lam.T, rtol=0, atol=ROUND_OFF)
    # derivative with respect to K^-1 (custom jvp, no eigenvector derivative) vs central FD
    dK = rng.standard_normal((3, 3))
    dK = dK + dK.T

    def f(s):
        Ks = K_inv + s * dK
        ds, Qs = np.linalg.eigh(Ks)
        return np.asarray(lyapunov_solve(jnp.asarray(Ks), jnp.asarray(B), Qs, ds))

    _, tangent = jax.jvp(
        lambda Kx: lyapunov_solve(Kx, jnp.asarray(B), Q, d), (jnp.asarray(K_inv),), (dK,)
    )
    eps = 1e-6
    np.testing.assert_allclose(tangent, (f(eps) - f(-eps)) / (2 * eps), rtol=0, atol=2e-9)

    # Hessian-vector product of a loss of Lambda along dK (forward over reverse) against
    # central differences of its gradient (eigen-decomposition recomputed at each point)
    def grad_at(Kx, Qx, dx):
        def loss(K_):
            return jnp.sum(lyapunov_solve(K_, jnp.asarray(B), Qx, dx) ** 2)

        return jax.grad(loss)(Kx)

    second = jax.jvp(lambda K_: grad_at(K_, Q, d), (jnp.asarray(K_inv),), (dK,))[1]
    fd = (
        grad_at(jnp.asarray(K_inv + eps * dK), *_eig(K_inv + eps * dK))
        - grad_at(jnp.asarray(K_inv - eps * dK), *_eig(K_inv - eps * dK))
    ) / (2 * eps)
    np.testing.assert_allclose(second, fd, rtol=0, atol=8e-9)
    assert np.abs(np.asarray(fd)).max() > 1e-3
    # a repeated eigenvalue (symmetric body): the gradient stays finite
    g = jax.grad(lambda Kx: jnp.sum(lyapunov_solve(Kx, jnp.asarray(B), *_eig(np.eye(3)))))(
        jnp.eye(3)
    )
    assert np.all(np.isfinite(np.asarray(g)))


def _eig(K):
    d, Q = np.linalg.eigh(K)
    return Q, d


def _state_at(model, R_perturbation):
    """A rotmat state with velocities and a given perturbation of R (drift)."""
    s = start_state(model)
    rng = np.random.default_rng(2)
    v = jnp.asarray(rng.standard_normal((2, 12)))
    q = s.q._replace(R=s.q.R + R_perturbation)
    return q, v


def test_two_step_equals_one_step():
    """Exact agreement when R^T R = I; otherwise they differ by O(||R^T R - I||) (eq. 25
    assumes orthogonality)."""
    m = model()
    c = FORM.constants(m, start_state(m).q)
    t = jnp.asarray(0.3)
    rng = np.random.default_rng(3)
    # a consistent-velocity-free but exactly orthogonal state: R a rotation
    q, v = _state_at(m, 0.0)
    R = jnp.asarray(scipy.linalg.expm(np.cross(np.eye(3), [0.1, -0.2, 0.3])))
    q = q._replace(R=jnp.stack([R, R.T]))
    two, one = two_step(m, c, q, v, t), one_step(m, q, v, t)
    scale = np.max(np.abs(np.asarray(one.lam)))
    assert np.max(np.abs(np.asarray(two.lam - one.lam))) < 5e-14 * scale
    assert np.max(np.abs(np.asarray(two.a - one.a))) < 2e-13 * np.max(np.abs(np.asarray(one.a)))
    # drifted states: the difference is proportional to the drift
    E = jnp.asarray(rng.standard_normal((2, 3, 3)))
    diffs = []
    for eps in (1e-4, 1e-5, 1e-6):
        qe = q._replace(R=q.R + eps * E)
        d = np.max(np.abs(np.asarray(two_step(m, c, qe, v, t).lam - one_step(m, qe, v, t).lam)))
        diffs.append(d)
    ratios = np.asarray(diffs[:-1]) / np.asarray(diffs[1:])
    assert np.all((ratios > 8) & (ratios < 12)), (diffs, ratios)
    assert diffs[0] < 1e-3 * scale


def test_initial_accelerations_and_multipliers():
    """R''_1(0) = phi''(0) j(z0), R''_2(0) = psi''(0) j(z0), Lambda_01(0), Lambda_12(0) equal
    the reaction formulas with the reference accelerations (to ~1e-13 of their size)."""
    m = model()
    s = start_state(m)
    c = FORM.constants(m, s.q)
    a, lam, _ = two_step(m, c, s.q, s.v, jnp.asarray(0.0))
    _, _, _, _, ddphi, ddpsi = reference([0.0])
    jz = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(a[0, 3:].reshape(3, 3), ddphi[0] * jz, rtol=0, atol=4e-12)
    np.testing.assert_allclose(a[1, 3:].reshape(3, 3), ddpsi[0] * jz, rtol=0, atol=2e-12)
    l01, l12 = reference_reactions([0.0])
    np.testing.assert_allclose(lam[:3], l01[0], rtol=0, atol=4e-14)
    np.testing.assert_allclose(lam[3:6], l12[0], rtol=0, atol=2e-14)


# ----------------------------------------------------------- trajectories (simulate, RK4)

STEPS = (4e-3, 2e-3, 1e-3)


def angle_errors(sol):
    phi, psi = dm.angles(sol)
    ref = reference(np.asarray(sol.t))
    return max(np.max(np.abs(np.asarray(phi) - ref[0])), np.max(np.abs(np.asarray(psi) - ref[1])))


@pytest.mark.slow  # an order study; test_two_step_equals_one_step runs the scheme
def test_rk4_two_step_order_4_and_invariants():
    sols = [simulated(h) for h in STEPS]
    errors = [angle_errors(s) for s in sols]
    orders = observed_orders(errors)
    assert np.all((orders > 3.7) & (orders < 4.4)), (errors, orders)
    assert errors[-1] < 5e-9
    drift = [float(np.max(mbd.diagnostics.orthogonality_error(s))) for s in sols]
    drift_orders = observed_orders(drift)
    assert np.all(drift_orders > 3.5), (drift, drift_orders)
    E0, _ = reference_energy()
    for s in sols:
        # joint constraints (linear) at round-off
        coords = np.asarray(s.q)
        r = coords[..., :3] + np.einsum(
            "tbij,bj->tbi", coords[..., 3:].reshape(-1, 2, 3, 3), s.r[0]
        )
        assert np.max(np.abs(np.asarray(mbd.diagnostics.position_residual(model(), s)))) < 1e-12
        np.testing.assert_allclose(r, s.r, atol=1e-15)
        # planarity: exactly no z motion, no z reaction
        assert np.max(np.abs(np.asarray(s.r[..., 2]))) < 1e-14
        assert np.max(np.abs(np.asarray(s.lam[:, [2, 5]]))) < 1e-14
    # energy in the formulation's own coordinates: conserved to the method's accuracy
    e_err = []

    # one compiled program per run length (op by op, every primitive of the vmapped
    # kinetic energy compiled on its own for each of the three lengths)
    @jax.jit
    @partial(jax.vmap, in_axes=(0, 0, None, None))
    def kinetic(x, v, g0, A0):
        return FORM.kinetic_energy(model(), FORM.coordinates_from_flat(x, g0, A0), v)

    for s in sols:
        qs = np.asarray(s.q)
        T = kinetic(qs.reshape(len(qs), -1), s.v, s.r[0], s.A[0])
        V = -np.einsum("b,i,tbi->t", model().mass, model().gravity, s.r)
        e_err.append(np.max(np.abs(np.asarray(T) + V - E0)))
    assert e_err[-1] < 1e-9 * abs(E0) and observed_orders(e_err).min() > 3.0, e_err
    # Lambda_i: the 13, 23, 33 entries vanish (planar motion)
    Lam = np.asarray(mbd.diagnostics.orthogonality_multipliers(model(), sols[0]))
    assert np.max(np.abs(Lam[..., 2, :])) < 1e-14 and np.max(np.abs(Lam[..., :2, :2])) > 1e-4


def test_joint_multipliers_are_the_reactions():
    """sol.lam = (Lambda_01, Lambda_12) = m (2 g x0 - a_G1 - a_G2), m (g x0 - a_G2)."""
    s = simulated(1e-3)
    l01, l12 = reference_reactions(np.asarray(s.t))
    scale = M * G
    assert np.max(np.abs(np.asarray(s.lam[:, :3]) - l01)) < 1e-7 * scale
    assert np.max(np.abs(np.asarray(s.lam[:, 3:]) - l12)) < 1e-7 * scale


@pytest.mark.slow  # a 5 s drift study
def test_orthogonality_drift_bounded_over_5s_and_one_step_agrees():
    s = simulated(2e-3, t_end=5.0)
    drift = np.max(np.asarray(mbd.diagnostics.orthogonality_error(s)), axis=1)
    assert drift[-1] < 1e-7 and np.max(drift) < 1e-7
    # bounded: no faster than linear growth (the second half adds no more than the first)
    half = len(drift) // 2
    assert np.max(drift) < 3.0 * np.max(drift[:half])
    assert angle_errors(s) < 1e-6
    s = jax.tree_util.tree_map(lambda x: x[::50], s)  # row 0 (the reference) kept
    # one-step (full KKT) multipliers on the same trajectory: equal to O(drift)
    two = np.asarray(mbd.diagnostics.orthogonality_multipliers(model(), s))
    one = np.asarray(mbd.diagnostics.orthogonality_multipliers(model(), s, method="one_step"))
    assert np.max(np.abs(two - one)) < 1e3 * np.max(drift) * np.max(np.abs(one))
    # a one-step (full KKT) simulation: also order 4; the two ODEs agree on the manifold
    # R^T R = I, so the trajectories differ by O(h^4), like the integration error
    diffs, errors = [], []
    for h in (4e-3, 2e-3):
        s1, s2 = simulated(h, multipliers="one_step"), simulated(h)
        diffs.append(np.max(np.abs(np.asarray(s1.r - s2.r))))
        errors.append(angle_errors(s1))
    assert observed_orders(diffs)[0] > 3.5 and observed_orders(errors)[0] > 3.7, (diffs, errors)
    assert diffs[-1] < errors[-1]


def test_printed_eq27_disagrees_with_the_reference():
    s = simulated(2e-3, t_end=1.0)
    ref = reference(np.asarray(s.t))
    printed = np.asarray(dm.angles_as_printed(s))
    assert np.max(np.abs(printed - ref[1])) > 1e-2
    assert angle_errors(s) < 1e-7


def test_rotmat_agrees_with_rA_gen_alpha():
    s = simulated(1e-3)
    ga = gen_alpha(1e-3)
    # gen_alpha is second order: its error at h = 1e-3 is ~1e-4 rad
    assert np.max(np.abs(np.asarray(s.r - ga.r))) < 2e-5
    assert np.max(np.abs(np.asarray(s.lam - ga.lam))) < 4e-4 * M * G
    assert angle_errors(ga) < 2e-4


# ------------------------------------------------------ every tableau, frozen multipliers


@pytest.mark.parametrize(
    "tableau, order, steps",
    [("euler", 1, (2e-3, 1e-3)), ("heun", 2, (8e-3, 4e-3)), ("rk3", 3, (8e-3, 4e-3))],
)
def test_observed_orders_of_the_tableaus(tableau, order, steps):
    t_end = 0.4
    ref = reference([t_end])[:2, 0]
    integ = RungeKutta(tableau=tableau)
    errors = [np.max(np.abs(rollout_angles(integ, h, t_end) - ref)) for h in steps]
    p = observed_orders(errors)[0]
    assert abs(p - order) < 0.35, (errors, p)


def test_frozen_multipliers_are_first_order():
    """The paper's 'multipliers piecewise constant over a step' drops RK4 to order 1."""
    t_end = 0.4
    ref = reference([t_end])[:2, 0]
    frozen = RungeKutta(tableau="rk4", multipliers="frozen")
    errors = [np.max(np.abs(rollout_angles(frozen, h, t_end) - ref)) for h in (2e-3, 1e-3)]
    p = observed_orders(errors)[0]
    assert 0.8 < p < 1.3, (errors, p)
    per_stage = np.max(np.abs(rollout_angles(RungeKutta(tableau="rk4"), 1e-3, t_end) - ref))
    assert per_stage < 2e-7 * errors[-1]
    # the linear joint constraints are no longer kept to round-off
    s = rollout(model(), frozen, jnp.asarray(1e-3), jnp.asarray(400))
    joints = np.asarray(FORM.joint_residual(model(), s.q, 0.4))
    assert np.max(np.abs(joints)) > 1e-8


# ------------------------------------------------------------------- gradients, vmap


def test_gradient_through_rk_matches_central_differences():
    integ = RungeKutta(tableau="rk4")
    h, n = jnp.asarray(5e-3), 20

    def loss(model):
        s = rollout_scan(model, integ, h, n)
        return jnp.sum(s.lam[:6] ** 2) + jnp.sum(s.q.R[1, :2, 0]) + jnp.sum(s.v**2)

    m = model()
    g = mbd.jit(jax.grad(loss))(m)
    for name, get, size in (
        ("mass", lambda x: x.mass, 2),
        ("gravity", lambda x: x.gravity, 1),
        ("inertia", lambda x: x.inertia, 1),
    ):
        leaf = np.asarray(get(m))
        grad_leaf = np.asarray(get(g)).reshape(-1)
        for k in range(size):
            step = 1e-6 * max(1.0, abs(leaf.reshape(-1)[k]))
            if name == "inertia":
                # J_xx = 4.5e-6. The loss (~26) carries ~1e-12 of round-off, i.e. ~5e-4
                # relative noise in a difference quotient at step 1e-8; at 1e-7 the noise is
                # ~5e-5 and the truncation error ~2e-5 (measured), inside the 1e-4 tolerance
                step = 1e-7
            e = np.zeros(leaf.size)
            e[k] = step
            plus = eqx.tree_at(get, m, jnp.asarray(leaf + e.reshape(leaf.shape)))
            minus = eqx.tree_at(get, m, jnp.asarray(leaf - e.reshape(leaf.shape)))
            fd = (float(loss(plus)) - float(loss(minus))) / (2 * step)
            # finite differences: the inertia's quotient carries ~5e-5 of round-off (above)
            assert abs(grad_leaf[k] - fd) < 1e-4 * abs(fd), (name, k, grad_leaf[k], fd)


def test_vmap_over_models():
    integ = RungeKutta(tableau="rk4")
    models = [dm.bar_double_pendulum(g=g) for g in (9.81, 5.0)]
    batch = mbd.stack_models(models)
    h, n = jnp.asarray(1e-2), jnp.asarray(10)
    out = jax.vmap(lambda m: rollout(m, integ, h, n).lam)(batch)
    for k, m in enumerate(models):
        np.testing.assert_allclose(out[k], rollout(m, integ, h, n).lam, rtol=0, atol=2e-13)
    assert np.max(np.abs(np.asarray(out[0] - out[1]))) > 0.1


# ----------------------------------------------------------------- rp, errors


def test_rk_steps_rp_with_the_kkt_system():
    s = mbd.simulate(model(), formulation="rp", integrator="rk", t_end=0.4, h=2e-3)
    ref = reference(np.asarray(s.t))
    phi = np.arctan2(s.A[:, 0, 1, 0], s.A[:, 0, 0, 0])
    assert np.max(np.abs(np.asarray(phi) - ref[0])) < 1e-8
    assert np.max(np.abs(np.asarray(mbd.diagnostics.position_residual(model(), s)))) < 3e-10


def test_bad_options_are_refused():
    m = model()
    with pytest.raises(ValueError, match="multipliers must be one of"):
        mbd.simulate(
            m, formulation="rotmat", integrator="rk", multipliers="lazy", t_end=0.01, h=1e-3
        )
    with pytest.raises(ValueError, match="needs the rotmat formulation"):
        mbd.simulate(
            m, formulation="rp", integrator="rk", multipliers="two_step", t_end=0.01, h=1e-3
        )
    with pytest.raises(ValueError, match="cannot step formulation 'rA'"):
        mbd.simulate(m, formulation="rA", integrator="rk", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="cannot step formulation 'rotmat'"):
        mbd.simulate(m, formulation="rotmat", integrator="gen_alpha", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="unknown tableau"):
        mbd.simulate(m, formulation="rotmat", integrator="rk", tableau="rk5", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="has no option"):
        mbd.simulate(m, formulation="rotmat", integrator="rk", rho_inf=0.5, t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="rotmat formulation has no"):
        FORM.coordinates(m.A0)
    with pytest.raises(ValueError, match="method must be"):
        mbd.diagnostics.orthogonality_multipliers(m, simulated(4e-3), method="three_step")
    ga = gen_alpha(1e-3)
    with pytest.raises(ValueError, match="formulation 'rotmat'"):
        mbd.diagnostics.orthogonality_error(ga)
