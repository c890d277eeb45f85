"""Mueller & Terze: SE(3) / SO(3) maps, the se3 formulation and the Munthe-Kaas integrator.

Compile time dominates: the long runs go through one jitted fori_loop per (formulation,
tableau) whose step size and number of steps are traced (``_runner``), so one compile serves
every horizon and step size.
"""

from __future__ import annotations

from functools import cache

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd import lie
from jaxmbd.analysis.simulation import _initial
from jaxmbd.formulations import get_formulation
from jaxmbd.formulations.index1 import index1_dynamics
from jaxmbd.integrators import get_integrator, get_tableau

THETAS = (0.0, 1e-8, 1e-3, 0.1, 3.0)


# -- Lie identities ----------------------------------------------------------------------------
def _twist(theta, rng):
    w = rng.normal(size=3)
    return np.concatenate([theta * w / np.linalg.norm(w), rng.normal(size=3)])


def _dexp_series(ad, terms=80):
    """Right-trivialised dexp_X = sum_k ad^k / (k + 1)!."""
    out, power = np.eye(ad.shape[0]), np.eye(ad.shape[0])
    for k in range(1, terms):
        power = power @ ad / (k + 1)
        out = out + power
    return out


def _bernoulli_dexpinv(ad, terms=60):
    """sum_k B_k / k! ad^k (B_1 = -1/2), with Bernoulli numbers from scipy."""
    from scipy.special import bernoulli, factorial

    B = bernoulli(terms)
    B[1] = -0.5
    out, power = np.zeros_like(ad), np.eye(ad.shape[0])
    for k in range(terms):
        out = out + B[k] / factorial(k) * power
        power = power @ ad
    return out


@pytest.mark.parametrize("theta", THETAS)
def test_se3_exp_matches_expm(theta, rng):
    xi = _twist(theta, rng)
    expected = scipy.linalg.expm(np.asarray(lie.se3_hat(xi)))
    assert np.abs(np.asarray(lie.se3_exp_matrix(xi)) - expected).max() < 1e-14
    R, p = lie.se3_exp(xi)
    assert np.abs(np.asarray(R).T @ np.asarray(R) - np.eye(3)).max() < 1e-15


@pytest.mark.parametrize("theta", THETAS)
def test_dexpinv_bernoulli_and_inverse(theta, rng):
    xi = _twist(theta, rng)
    ad = np.asarray(lie.se3_ad(xi))
    # ad_X Y = [X, Y] (eq. 7): the bracket of the 4x4 matrices
    y = rng.normal(size=6)
    X, Y = np.asarray(lie.se3_hat(xi)), np.asarray(lie.se3_hat(y))
    assert np.allclose(np.asarray(lie.se3_hat(ad @ y)), X @ Y - Y @ X, rtol=0, atol=ROUND_OFF)
    # small angles: Bernoulli series; theta = 3 is beyond its radius of convergence (2 pi is
    # the first pole, but terms decay slowly), so compare there with the inverse of dexp only
    D = np.asarray(lie.se3_dexpinv(xi))
    if theta <= 0.1:
        assert np.abs(D - _bernoulli_dexpinv(ad)).max() < ROUND_OFF
    assert np.abs(D @ _dexp_series(ad) - np.eye(6)).max() < ROUND_OFF
    # dexp(-X) dexp^-1(-X) = I
    D_minus = np.asarray(lie.se3_dexpinv(-xi))
    assert np.abs(_dexp_series(-ad) @ D_minus - np.eye(6)).max() < ROUND_OFF
    # SO(3), eq. 11: inverse of the right Jacobian J_r(w) = dexp_{-w}, and Bernoulli series
    w = xi[:3]
    so3 = np.asarray(lie.so3_dexpinv(-w))
    assert np.abs(so3 @ np.asarray(lie.so3_right_jacobian(w)) - np.eye(3)).max() < 3e-14
    if theta <= 0.1:
        assert (
            np.abs(np.asarray(lie.so3_dexpinv(w)) - _bernoulli_dexpinv(lie.hat(w))).max()
            < ROUND_OFF
        )


@jax.jit
def _lie_maps(x):
    R, p = lie.se3_exp(x)
    return jnp.concatenate(
        [R.ravel(), p, lie.se3_dexpinv(x).ravel(), lie.so3_dexpinv(x[:3]).ravel()]
    )


_jacfwd, _jacrev = jax.jit(jax.jacfwd(_lie_maps)), jax.jit(jax.jacrev(_lie_maps))
_maps = jax.jit(_lie_maps)  # the differences below: one program, not op by op


@pytest.mark.parametrize("theta", THETAS)
def test_lie_gradients_finite_and_correct(theta, rng):
    xi = jnp.asarray(_twist(theta, rng))
    f = _maps
    jac = np.asarray(_jacfwd(xi))
    jac_rev = np.asarray(_jacrev(xi))
    assert np.all(np.isfinite(jac)) and np.all(np.isfinite(jac_rev))
    assert np.allclose(jac, jac_rev, rtol=0, atol=ROUND_OFF)
    eps = 1e-6
    fd = np.stack(
        [
            (np.asarray(f(xi + eps * e)) - np.asarray(f(xi - eps * e))) / (2 * eps)
            for e in np.eye(6)
        ],
        1,
    )
    assert np.abs(jac - fd).max() < 2e-9


# -- runs --------------------------------------------------------------------------------------
@cache
def _runner(model_name, formulation, tableau, sign=-1):
    """jit(h, n) -> (final q, v, lam, running max |Phi| per row, max |G v - nu| per row)."""
    model = getattr(mbd.models, model_name)()
    form = get_formulation(formulation)
    integ = get_integrator("rkmk", formulation, tableau=tableau, dexp_sign=sign)

    @jax.jit
    def run(h, n):
        carry, _ = _initial(model, form, integ, h)
        nc = model.nc

        def body(k, c):
            state, pmax, vmax = c
            state, res = integ.step(model, form, state, k, h)
            r, A, rdot, omega, _, _ = form.to_body_state(res.q, res.v, res.a)
            phi, G, nu, _ = mbd.equations.rA_terms(model, r, A, rdot, omega, k * h)
            psi = G @ jnp.concatenate([rdot, omega], 1).reshape(-1) - nu
            return state, jnp.maximum(pmax, jnp.abs(phi)), jnp.maximum(vmax, jnp.abs(psi))

        zeros = jnp.zeros(nc)
        state, pmax, vmax = jax.lax.fori_loop(1, n + 1, body, (carry, zeros, zeros))
        return state, pmax, vmax

    return model, form, run


def _joint_max(model, row_max):
    names = list(dict.fromkeys(model.constraint_joints))
    return {
        j: float(np.max([row_max[i] for i, jj in enumerate(model.constraint_joints) if jj == j]))
        for j in names
    }


def _body_state(form, state):
    a, _ = state.a, state.lam
    return [np.asarray(x) for x in form.to_body_state(state.q, state.v, a)]


@cache
def _top_run(formulation, tableau, t_end=2.0, h=1e-3, sign=-1):
    model, form, run = _runner("heavy_top", formulation, tableau, sign)
    state, pmax, vmax = run(h, int(round(t_end / h)))
    return model, form, state, np.asarray(pmax), np.asarray(vmax)


def _top_energy(model, form, state):
    r, A, rdot, omega, _, _ = _body_state(form, state)
    J, m = np.asarray(model.inertia[0]), float(model.mass[0])
    return 0.5 * (m * rdot[0] @ rdot[0] + omega[0] @ J @ omega[0])


T0_TOP = 13972.398950622206  # 1/2 w0^T J_O w0 with v0 = w0 x r0 (notes 2.1: 13.97 kJ)


def test_heavy_top_data():
    model = mbd.models.heavy_top()
    assert float(model.mass[0]) == 21.6
    assert np.allclose(np.diag(model.inertia[0]), [0.36, 0.306, 0.09], rtol=ROUND_OFF, atol=0)
    assert np.allclose(model.rdot0[0], [0.0, 5 * np.pi, -10 * np.pi], rtol=ROUND_OFF, atol=0)
    w = np.asarray(model.omega0[0])
    r0 = np.array([0.5, 0.0, 0.0])
    J_O = np.asarray(model.inertia[0]) + 21.6 * (r0 @ r0 * np.eye(3) - np.outer(r0, r0))
    assert 0.5 * w @ J_O @ w == pytest.approx(T0_TOP, rel=ROUND_OFF)
    assert round(T0_TOP / 1e3, 2) == 13.97


def test_builtin_files_equal_builders():
    from jaxmbd.models import mueller_terze as mt

    for name, build in mt.BUILDERS.items():
        a, b = getattr(mbd.models, name)(), build()
        for field in ("mass", "inertia", "r0", "A0", "rdot0", "omega0", "gravity"):
            assert np.allclose(getattr(a, field), getattr(b, field), rtol=0, atol=ROUND_OFF), (
                name,
                field,
            )
        assert a.constraint_joints == b.constraint_joints


@pytest.mark.parametrize("tableau", ["heun", "rk3", "rk4"])
def test_subgroup_property_heavy_top(tableau):
    """SE(3): the pivot stays at round-off for every tableau (notes 1.6); SO(3) x R^3 drifts."""
    model, _, _, pmax, vmax = _top_run("se3", tableau)
    assert pmax.max() < 2e-12, pmax
    assert vmax.max() < 2e-12, vmax
    if tableau in ("heun", "rk4"):
        _, _, _, pmax_rA, _ = _top_run("rA", tableau)
        assert pmax_rA.max() > 1e4 * max(pmax.max(), 1e-12), (pmax_rA.max(), pmax.max())


def test_subgroup_property_explicit_euler():
    """Explicit Euler gains energy (x3 after 1 s, and the solution blows up at t = 1.68 s at
    h = 1e-3), but while bounded, the pivot stays at round-off: the subgroup property does
    not depend on accuracy."""
    model, form, state, pmax, _ = _top_run("se3", "euler", t_end=1.0)
    assert pmax.max() < 5e-12
    assert _top_energy(model, form, state) / T0_TOP > 2.0


def test_rA_drift_heun_far_larger_than_rk4():
    _, _, _, heun, _ = _top_run("rA", "heun")
    _, _, _, rk4, _ = _top_run("rA", "rk4")
    assert heun.max() > 1e3 * rk4.max()
    assert rk4.max() > 1e-8  # drift, not round-off


def _reference_top(t_end):
    """Quaternion Euler equations about the pivot, scipy DOP853 at rtol = atol = 1e-12:
    J_O w_dot = -w x J_O w, p_dot = p (x) (0, w) / 2 (no jaxmbd)."""
    J = np.diag([0.36, 0.306, 0.09])
    r0 = np.array([0.5, 0.0, 0.0])
    J_O = J + 21.6 * (r0 @ r0 * np.eye(3) - np.outer(r0, r0))
    J_O_inv = np.linalg.inv(J_O)

    def rhs(_t, y):
        p, w = y[:4], y[4:]
        e0, e = p[0], p[1:]
        p_dot = 0.5 * np.concatenate([[-e @ w], e0 * w + np.cross(e, w)])
        return np.concatenate([p_dot, J_O_inv @ (-np.cross(w, J_O @ w))])

    y0 = np.array([1.0, 0, 0, 0, 0.0, 20 * np.pi, 10 * np.pi])
    y = solve_ivp(rhs, (0, t_end), y0, method="DOP853", rtol=1e-12, atol=1e-12).y[:, -1]
    p = y[:4] / np.linalg.norm(y[:4])
    e0, e = p[0], p[1:]
    E = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
    A = (2 * e0**2 - 1) * np.eye(3) + 2 * (np.outer(e, e) + e0 * E)
    return A, y[4:]


@pytest.mark.parametrize(("sign", "order"), [(-1, 4), (1, 2)])
def test_heavy_top_order_and_dexp_sign(sign, order):
    """MK-RK4 on SE(3) converges with order 4 against the independent reference; the wrong
    sign (+Psi in eq. 36-37) silently drops it to order 2 (notes 3.5)."""
    t_end = 0.5
    A_ref, w_ref = _reference_top(t_end)
    _, form, run = _runner("heavy_top", "se3", "rk4", sign)
    errors = []
    for h in (2e-3, 1e-3, 5e-4):
        state, _, _ = run(h, int(round(t_end / h)))
        A = np.asarray(state.q[1][0])
        errors.append(np.abs(A - A_ref).max())
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    if order == 4:
        # pre-asymptotic (h |omega| up to 0.14): observed 4.76, 4.53, tending to 4 (4.37 at
        # h = 2.5e-4), the error 1.5e-7 at h = 1e-3
        assert np.all((rates > 3.8) & (rates < 5.0)), (errors, rates)
        assert errors[1] < 1e-6
    else:
        assert np.all(np.abs(rates - 2.0) < 0.1), (errors, rates)
        assert errors[1] > 1e-3


def test_heavy_top_energy_momentum_and_reaction():
    """RK4, se3, 2 s through ``simulate``: kinetic energy and angular momentum about the pivot
    conserved to O(h^4); lambda is the reaction force of Newton's law, m r_ddot = -lambda
    (from second differences of the trajectory, independent of the KKT solve)."""
    model = mbd.models.heavy_top()
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=2.0, h=1e-3)
    assert sol.integrator == "rkmk" and sol.formulation == "se3"
    E = np.asarray(mbd.diagnostics.energy(model, sol).kinetic)
    assert abs(E[0] - T0_TOP) < ROUND_OFF * T0_TOP
    drift = np.abs(E - E[0]).max() / E[0]
    assert 1e-10 < drift < 3e-7
    L = np.asarray(mbd.diagnostics.angular_momentum(model, sol, point=(0.0, 0.0, 0.0)))
    assert np.abs(L - L[0]).max() / np.linalg.norm(L[0]) < 1e-6
    viol = mbd.diagnostics.joint_violation(model, sol)
    assert viol.names == ("joint1",)
    assert float(viol.position.max()) < 1e-12
    h = 1e-3
    r = np.asarray(sol.r[:, 0])
    # fourth-order central second differences (error h^4 |r^(6)| / 90 ~ 1e-8 relative)
    rddot_fd = (-r[4:] + 16 * r[3:-1] - 30 * r[2:-2] + 16 * r[1:-3] - r[:-4]) / (12 * h**2)
    lam = np.asarray(sol.lam[2:-2])
    m = float(model.mass[0])
    scale = np.abs(m * rddot_fd).max()
    # constraint rows c . (r_top + A s - 0): Phi_r = +I, so m r_ddot = -lambda
    assert np.abs(m * rddot_fd + lam).max() < 1e-6 * scale
    assert np.abs(m * np.asarray(sol.rddot[:, 0]) + np.asarray(sol.lam)).max() < ROUND_OFF * scale
    reactions = mbd.diagnostics.reaction_forces(model, sol)
    assert np.allclose(
        np.sum(reactions.force_j[:, :, :], 1),
        m * np.asarray(sol.rddot[:, 0]),
        rtol=0,
        atol=ROUND_OFF * scale,
    )


@pytest.mark.parametrize("name", ["spherical_double_pendulum", "floating_pair"])
def test_two_body_examples(name):
    """SE(3) keeps the ground joint (joint1) of the double pendulum at round-off, SO(3) x R^3
    does not; joint2 (between moving bodies) drifts in both, by amounts of one order."""
    results = {}
    for form_name in ("se3", "rA"):
        model, form, run = _runner(name, form_name, "rk4")
        state, pmax, _ = run(1e-3, 1000)
        results[form_name] = _joint_max(model, np.asarray(pmax))
        assert np.all(np.isfinite(np.asarray(state.v)))
    se3, rA = results["se3"], results["rA"]
    if name == "spherical_double_pendulum":
        assert se3["joint1"] < ROUND_OFF
        assert rA["joint1"] > 100 * max(se3["joint1"], 1e-14)
        assert se3["joint2"] > se3["joint1"]
    ratio = se3["joint2"] / rA["joint2"]
    assert 1e-2 < ratio < 1e2, results  # of one order: a magnitude, not a tolerance


def test_three_bar_base_joints():
    model, form, run = _runner("spherical_three_bar", "se3", "rk4")
    _, pmax, _ = run(1e-3, 500)
    j = _joint_max(model, np.asarray(pmax))
    assert j["joint1"] < ROUND_OFF
    assert j["joint3"] < ROUND_OFF
    assert j["joint2"] > 10 * max(j["joint1"], j["joint3"])


def test_index1_system_matches_newton_euler_rA_and_se3():
    """The se3 and rA index-1 solves describe the same motion: equal body accelerations
    and equal multipliers at a random state of the double pendulum."""
    model = mbd.models.spherical_double_pendulum()
    rng = np.random.default_rng(0)
    r, A = model.r0, model.A0
    rdot = jnp.asarray(rng.normal(size=(2, 3)))
    omega = jnp.asarray(rng.normal(size=(2, 3)))
    out = {}
    for name in ("se3", "rA"):
        form = get_formulation(name)
        q, v, _ = form.from_body_state(r, A, rdot, omega, jnp.zeros((2, 3)), jnp.zeros((2, 3)))
        a, lam, _ = index1_dynamics(model, form, q, v, 0.0)
        # the KKT solution satisfies the formulation's own equations of motion (for rA the
        # independent hand-coded eq. 31a of formulations/ra.py) and G a = gamma
        g, _ = form.dynamics_equations(model, q, v, a, lam, 0.0)
        assert np.abs(np.asarray(g)).max() < ROUND_OFF
        G, _ = form.velocity_terms(model, q, 0.0)
        gamma = form.acceleration_rhs(model, q, v, 0.0)
        assert np.abs(np.asarray(G @ a.reshape(-1) - gamma)).max() < ROUND_OFF
        # gamma = -d^2/ds^2 Phi(q exp(s V)) (constant V: zero acceleration) and G = dPhi/ds

        def phi_along(s_, q=q, v=v, form=form):
            return form.residual(model, form.retract(q, s_ * v.reshape(-1)), 0.0)

        d1, d2 = jax.jit(lambda s_: (jax.jacfwd(phi_along)(s_), jax.hessian(phi_along)(s_)))(0.0)
        assert np.abs(np.asarray(d1 - G @ v.reshape(-1))).max() < ROUND_OFF
        assert np.abs(np.asarray(d2 + gamma)).max() < ROUND_OFF
        out[name] = ([np.asarray(x) for x in form.to_body_state(q, v, a)], np.asarray(lam))
    for x, y in zip(out["se3"][0], out["rA"][0], strict=True):
        assert np.allclose(x, y, rtol=0, atol=7e-14)
    assert np.allclose(out["se3"][1], out["rA"][1], rtol=0, atol=ROUND_OFF)


def test_projection_stabilisation():
    """stabilize="projection" holds every joint of the double pendulum at round-off in rA."""
    model = mbd.models.spherical_double_pendulum()
    sol = mbd.simulate(
        model, formulation="rA", integrator="rkmk", stabilize="projection", t_end=0.2, h=1e-3
    )
    viol = mbd.diagnostics.joint_violation(model, sol)
    assert float(viol.position.max()) < ROUND_OFF
    assert float(viol.velocity.max()) < ROUND_OFF


def test_options_and_errors():
    with pytest.raises(ValueError, match="stabilize"):
        get_integrator("rkmk", "se3", stabilize="baumgarte")
    with pytest.raises(ValueError, match="unknown tableau"):
        get_integrator("rkmk", "se3", tableau="rk5")
    with pytest.raises(ValueError, match="strictly lower"):
        get_integrator("rkmk", "se3", tableau=([[0.5]], [1.0], [0.5]))
    with pytest.raises(ValueError, match="cannot step formulation"):
        get_integrator("rkmk", "rp")
    assert mbd.integrators.DEFAULT_INTEGRATOR["se3"] == "rkmk"
    # a user table equal to Heun gives Heun's result
    user = get_tableau(([[0.0, 0.0], [1.0, 0.0]], [0.5, 0.5], [0.0, 1.0]))
    a = _runner("heavy_top", "se3", user)[2](1e-3, 10)[0]
    b = _runner("heavy_top", "se3", "heun")[2](1e-3, 10)[0]
    assert np.array_equal(np.asarray(a.q[1]), np.asarray(b.q[1]))


def _loss(model):
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=0.02, h=1e-3)
    return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.omega[-1, 1])


def test_gradient_and_vmap():
    """jax.grad through rkmk against central differences (mass and inertia of link 2 of the
    double pendulum), and vmap over a batch against the unbatched function. One compile of
    vmap(value_and_grad) serves the gradient, the differences and the batch."""
    model = mbd.models.spherical_double_pendulum()
    m2, j2 = float(model.mass[1]), float(model.inertia[1, 2, 2])

    def with_params(p):
        out = eqx.tree_at(lambda mo: mo.mass, model, model.mass.at[1].set(p[0]))
        return eqx.tree_at(lambda mo: mo.inertia, out, out.inertia.at[1, 2, 2].set(p[1]))

    def loss_of(p):
        return _loss(with_params(p))

    eps_m, eps_j = 1e-5, 1e-7
    params = jnp.array(
        [
            [m2, j2],
            [m2 + eps_m, j2],
            [m2 - eps_m, j2],
            [m2, j2 + eps_j],
            [m2, j2 - eps_j],
            [3.5, 0.012],  # within the triangle inequality (0.012 <= 0.0028 + 0.0096)
        ]
    )
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(loss_of)))(params)
    values, grads = np.asarray(values), np.asarray(grads)
    fd_m = (values[1] - values[2]) / (2 * eps_m)
    fd_j = (values[3] - values[4]) / (2 * eps_j)
    assert grads[0, 0] == pytest.approx(fd_m, rel=6e-10)
    assert grads[0, 1] == pytest.approx(fd_j, rel=4e-10)
    # the batch equals the unbatched runs (at two of its members)
    single = jax.jit(loss_of)
    for k in (0, 5):
        assert float(single(params[k])) == pytest.approx(values[k], rel=ROUND_OFF)


def test_driven_mechanism_every_joint_type():
    """Every GCON works in the index-1 form: the driven slider crank (revolute, spherical,
    translational joints and the rotation driver) in se3 with MK-RK4, unstabilised, against
    its closed form (tests/references.py)."""
    import references

    model = mbd.models.slider_crank()
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=0.1, h=1e-3)
    ref = references.slider_crank(np.asarray(sol.t))
    assert np.abs(np.asarray(sol.r) - ref["r"]).max() < 6e-13
    assert np.abs(np.asarray(sol.rdot) - ref["rdot"]).max() < 1e-11
    assert np.abs(np.asarray(sol.rddot) - ref["rddot"]).max() < 3e-11
