"""Index-3 dynamics with backward Euler (paper 1): golden references, order of accuracy,
conservation, reactions. The generalized-alpha integrator is tested in test_integrators.py."""

from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.diagnostics import (
    angular_momentum,
    constraint_violation,
    energy,
    reaction_forces,
)

FORMULATIONS = ("rA", "rp", "re")


def noop(done, total):
    pass


def run(model, formulation, t_end, h, **kw):
    # fixed chunks: one compilation per (model, formulation, options) across step sizes and
    # horizons; 100 steps, the shortest run but two (a run shorter than a chunk compiles its
    # own: at 500, the 100-step and 150-step runs below compiled one more program each)
    kw = {"integrator": "backward_euler", "newton": "full", **kw}
    return mbd.simulate(
        model, formulation=formulation, t_end=t_end, h=h, progress=noop, chunk_size=100, **kw
    )


STEPS = (1e-2, 1e-3, 1e-4)


@cache
def double_pendulum_run(formulation, h):
    return run(mbd.models.double_pendulum(), formulation, 1.0, h)


def double_pendulum_errors(formulation, steps=STEPS):
    errors = []
    for h in steps:
        sol = double_pendulum_run(formulation, h)
        ref = references.double_pendulum(np.asarray(sol.t[-1:]))
        errors.append(float(np.abs(sol.r[-1, 1, 2] - ref["r"][0, 1, 2])))  # z of rod 2 (Fig. 3)
    return np.array(errors)


# rp and re with -m slow: their 10^4 steps at h = 1e-4 take 8-13 s of run time each; in the
# default suite they run the first two steps, each error within 10 % of rA's (below), and
# rA's converge at first order over all three.
@pytest.mark.parametrize(
    "formulation", ["rA", *(pytest.param(f, marks=pytest.mark.slow) for f in ("rp", "re"))]
)
def test_double_pendulum_first_order(formulation):
    errors = double_pendulum_errors(formulation)
    ratios = errors[:-1] / errors[1:]
    assert np.all((ratios > 7) & (ratios < 13)), (errors, ratios)
    assert errors[-1] < 2e-3


def test_double_pendulum_formulations_nearly_equal():
    reference = double_pendulum_errors("rA", STEPS[:2])
    for f in ("rp", "re"):
        np.testing.assert_allclose(double_pendulum_errors(f, STEPS[:2]), reference, rtol=0.1)


def test_double_pendulum_state_against_reference():
    sol = double_pendulum_run("rA", 1e-4)
    ref = references.double_pendulum(np.asarray(sol.t))
    assert np.abs(sol.r - ref["r"]).max() < 2e-3
    assert np.abs(sol.omega - ref["omega_bar"]).max() < 5e-3
    viol = constraint_violation(mbd.models.double_pendulum(), sol)
    assert float(viol.position.max()) < ROUND_OFF * float(np.abs(sol.r).max())
    assert float(viol.orthonormality.max()) < ROUND_OFF


# the slider crank in the default suite (its runs are shared with the tests below); the
# single pendulum and the four link (the same integrator and formulation, each a
# kinematics and a dynamics compilation of its own) with -m slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) for n in ("single_pendulum", "four_link")]
    + ["slider_crank"],
)
def test_order_analysis_against_kinematics(name):
    """Paper Figs. 5-7: velocity and acceleration errors at t_end shrink at first order."""
    model = getattr(mbd.models, name)()
    t_end = 1.0
    truth = mbd.kinematics(model, t_end=t_end, h=1e-3)
    errs = []
    for h in (4e-3, 2e-3, 1e-3):
        sol = run(model, "rA", t_end, h)
        errs.append(
            [
                float(np.abs(sol.r[-1] - truth.r[-1]).max()),
                float(np.abs(sol.rdot[-1] - truth.rdot[-1]).max()),
                float(np.abs(sol.rddot[-1] - truth.rddot[-1]).max()),
            ]
        )
    errs = np.array(errs)
    # positions are enforced exactly (index 3), to Newton's tolerance: 2.6e-12 (slider
    # crank), 1.6e-11 (the -m slow four-link)
    assert errs[:, 0].max() < 5e-11
    for level in (1, 2):
        ratios = errs[:-1, level] / errs[1:, level]
        assert np.all((ratios > 1.6) & (ratios < 2.5)), (level, errs[:, level], ratios)


# re with -m slow (12 s, CI budget): the driven slider crank in re runs by default in
# test_integrators.py::test_re_default_steps_over_the_chart_singularity (against rA's run)
@pytest.mark.slow  # rp against rA on a driven model; test_double_pendulum_formulations_nearly_equal
@pytest.mark.parametrize("formulation", ["rp", pytest.param("re", marks=pytest.mark.slow)])
def test_driven_formulations_agree(formulation):
    model = mbd.models.slider_crank()
    a = run(model, "rA", 0.5, 1e-3)
    b = run(model, formulation, 0.5, 1e-3)
    # 0 DOF: positions are enforced and r_dot, r_ddot are backward differences of them, so
    # they agree to round-off; angular rates and multipliers differ at O(h) because each
    # formulation applies backward Euler to different orientation coordinates.
    np.testing.assert_allclose(b.r, a.r, atol=1e-10)
    np.testing.assert_allclose(b.rdot, a.rdot, atol=1e-9)
    np.testing.assert_allclose(b.rddot, a.rddot, atol=1e-7)
    np.testing.assert_allclose(b.lam, a.lam, atol=2e-3 * np.abs(a.lam).max())


def spinning_body():
    b = mbd.ModelBuilder("free spinning body", gravity=(0, 0, 0))
    J = np.array([[2.0, 0.3, -0.2], [0.3, 1.5, 0.1], [-0.2, 0.1, 1.0]])  # non-principal
    b.add_body(
        "top",
        mass=3.0,
        inertia=J,
        r=[0.1, 0.2, 0.3],
        A=mbd.so3_exp(np.array([0.3, 0.5, 0.7])),
        rdot=[0.5, -0.2, 0.1],
        omega=[3.0, -5.0, 8.0],
    )
    return b.build()


def test_free_spinning_body():
    model = spinning_body()
    h = 1e-3
    sol = run(model, "rA", 0.5, h)
    e = np.asarray(energy(model, sol).total)
    L = np.asarray(angular_momentum(model, sol, point=np.zeros(3)))
    assert np.all(np.diff(e) <= ROUND_OFF * e[0])  # backward Euler dissipates, never adds energy
    assert 0 < (e[0] - e[-1]) / e[0] < 3e-3  # O(h) over the run (h T |omega| = 4e-3)
    assert np.abs(L - L[0]).max() / np.linalg.norm(L[0]) < 7e-3
    A = np.asarray(sol.A)
    assert np.abs(np.einsum("tji,tjk->tik", A[:, 0], A[:, 0]) - np.eye(3)).max() < ROUND_OFF
    np.testing.assert_allclose(sol.rdot, np.broadcast_to(sol.rdot[0], sol.rdot.shape), rtol=0,
                               atol=ROUND_OFF * np.abs(sol.rdot[0]).max())  # fmt: skip


def test_free_spinning_body_formulations_agree_to_order_h():
    model = spinning_body()
    diffs = []
    for h in (2e-3, 1e-3):
        a = run(model, "rA", 0.3, h)
        for f in ("rp", "re"):
            b = run(model, f, 0.3, h)
            diffs.append((h, f, float(np.abs(b.omega[-1] - a.omega[-1]).max())))
    d = {(h, f): v for h, f, v in diffs}
    for f in ("rp", "re"):
        assert d[(1e-3, f)] < 0.7 * d[(2e-3, f)]  # the difference shrinks with h


def test_modified_newton_same_solution():
    model = mbd.models.four_link()
    full = run(model, "rA", 0.3, 1e-3)
    mod = run(model, "rA", 0.3, 1e-3, newton="modified")
    np.testing.assert_allclose(mod.r, full.r, rtol=0, atol=ROUND_OFF * np.abs(full.r).max())
    np.testing.assert_allclose(mod.rdot, full.rdot, rtol=0, atol=3e-11)
    assert np.mean(mod.iterations[1:]) >= np.mean(full.iterations[1:])


@pytest.mark.parametrize("name", ["slider_crank", "double_pendulum"])
def test_reused_matrix_same_solution(name):
    """newton="reuse" (factored matrix carried across steps) converges to the same roots."""
    model = getattr(mbd.models, name)()
    full = run(model, "rA", 0.5, 1e-3)
    reuse = run(model, "rA", 0.5, 1e-3, newton="reuse")
    assert np.all(reuse.status == mbd.SUCCESS)
    # both stop at ||delta|| < Theta = 1e-5: roots agree to that order in accelerations
    np.testing.assert_allclose(reuse.r, full.r, rtol=0, atol=1e-9)
    np.testing.assert_allclose(reuse.rdot, full.rdot, rtol=0, atol=1e-8)
    np.testing.assert_allclose(reuse.lam, full.lam, rtol=0, atol=2e-8 * np.abs(full.lam).max())


def test_newton_reusing_refreshes_stale_and_rejects_singular():
    from jaxmbd.newton import (
        NONFINITE,
        SUCCESS,
        empty_lu_factors,
        lu_factors,
        newton_iterate_reusing,
    )

    def residual(x):  # root (1, 2)
        return jnp.array([x[0] ** 3 - 1.0, x[1] - 2.0 + 0.1 * jnp.sin(x[0] - 1.0)])

    jacobian = jax.jacfwd(residual)
    x0 = jnp.array([1.5, 0.0])
    # no matrix yet (NaN factors): factored at the first iteration
    x, info, factors, refreshes, _ = newton_iterate_reusing(
        residual, jacobian, x0, empty_lu_factors(2), tol=1e-12, max_iter=50
    )
    assert info.status == SUCCESS and refreshes >= 1
    np.testing.assert_allclose(x, [1.0, 2.0], rtol=0, atol=3e-12)
    # a badly wrong stored matrix (diverging steps) is refreshed, not trusted
    wrong = lu_factors(jnp.array([[0.05, 0.0], [0.0, -1.0]]))
    x, info, _, refreshes, _ = newton_iterate_reusing(
        residual, jacobian, x0, wrong, tol=1e-12, max_iter=50
    )
    assert info.status == SUCCESS and refreshes >= 1
    np.testing.assert_allclose(x, [1.0, 2.0], rtol=0, atol=3e-12)
    # the converged factors are good enough to solve again without refreshing
    _, info, _, refreshes, _ = newton_iterate_reusing(
        residual, jacobian, jnp.array([1.01, 2.0]), factors, tol=1e-12, max_iter=50
    )
    assert info.status == SUCCESS and refreshes == 0
    # a singular fresh matrix ends with NONFINITE, never a NaN root reported as converged
    _, info, _, _, _ = newton_iterate_reusing(
        lambda x: x**2 + 1.0,
        lambda x: jnp.zeros((2, 2)),
        x0,
        empty_lu_factors(2),
        tol=1e-12,
        max_iter=10,
    )
    assert info.status == NONFINITE


def test_static_reactions_hand_computed():
    """A plate on a ball joint at the origin and three DP2s with offsets, under gravity:
    statics give the pin and the DP2 at (2,0,0) half the weight each, the others nothing."""
    b = mbd.ModelBuilder("bracket")
    m, g = 3.0, 9.81
    b.add_body("plate", mass=m, inertia=[1, 1, 1], r=[1, 0, 0])
    b.spherical("pin", body_i="ground", body_j="plate", point=[0, 0, 0])
    b.add_dp2(
        "q1",
        body_i="ground",
        a_bar_i=[0, 0, 1],
        s_bar_p_i=[0, 0, 0],
        body_j="plate",
        s_bar_q_j=[1, 0, 0],
    )
    b.add_dp2(
        "q2",
        body_i="ground",
        a_bar_i=[0, 1, 0],
        s_bar_p_i=[0, 0, 0],
        body_j="plate",
        s_bar_q_j=[1, 0, 0],
    )
    b.add_dp2(
        "q3",
        body_i="ground",
        a_bar_i=[0, 0, 1],
        s_bar_p_i=[0.5, 0, 0],
        body_j="plate",
        s_bar_q_j=[0, 1, 0],
    )
    model = b.build()
    sol = run(model, "rA", 0.05, 1e-3)
    np.testing.assert_allclose(sol.r, np.broadcast_to(sol.r[0], sol.r.shape), rtol=0,
                               atol=ROUND_OFF * np.abs(sol.r[0]).max())  # fmt: skip
    joints = reaction_forces(model, sol, per="joint")
    expect = {"pin": [0, 0, m * g / 2], "q1": [0, 0, m * g / 2], "q2": [0, 0, 0], "q3": [0, 0, 0]}
    for name, force in expect.items():
        k = joints.names.index(name)
        np.testing.assert_allclose(
            joints.force_j[:, k], np.broadcast_to(force, (len(sol.t), 3)), rtol=0,
            atol=ROUND_OFF * m * g,
        )  # fmt: skip
    # torque of the pin about the plate's centre of mass: s x F with s = (-1, 0, 0)
    pin = joints.names.index("pin")
    np.testing.assert_allclose(joints.torque_j_global[-1, pin], [0, m * g / 2, 0], rtol=0,
                               atol=ROUND_OFF * m * g)  # fmt: skip
    # the ground side carries the opposite force (support reaction)
    np.testing.assert_allclose(joints.force_i[-1, pin], [0, 0, -m * g / 2], rtol=0,
                               atol=ROUND_OFF * m * g)  # fmt: skip
    other = run(model, "rp", 0.05, 1e-3)  # (identity frame: at the re singularity)
    np.testing.assert_allclose(other.lam, sol.lam, rtol=0, atol=ROUND_OFF * np.abs(sol.lam).max())


def test_hanging_pendulum_reaction():
    b = mbd.ModelBuilder("hanging")
    b.add_body(
        "rod", mass=2.0, inertia=[0.01, 0.7, 0.7], r=[0, 0, -1], axes=([0, 0, -1], [0, 1, 0])
    )
    b.revolute("pin", body_i="ground", body_j="rod", point=[0, 0, 0], axis=[1, 0, 0])
    model = b.build()
    sol = run(model, "rA", 0.05, 1e-3)
    joints = reaction_forces(model, sol, per="joint")
    weight = 2.0 * 9.81  # N, and N m about the pin 1 m away
    np.testing.assert_allclose(
        joints.force_j[-1, 0], [0, 0, weight], rtol=0, atol=ROUND_OFF * weight
    )
    np.testing.assert_allclose(joints.torque_j[-1, 0], 0, rtol=0, atol=ROUND_OFF * weight)


def test_nonconvergence_raises_with_time_and_residual():
    model = mbd.models.slider_crank()
    with pytest.raises(
        mbd.SolverError,
        match=r"dynamics .*failed at step 1 \(t = 0.001 s\).*"
        r"did not converge.*residual norm.*"
        r"Largest constraint residuals at the failed step: .+: -?\d\.\d{3}e[+-]\d\d",
    ):
        mbd.simulate(model, formulation="rA", integrator="backward_euler", t_end=0.01, h=1e-3,
                     tol=1e-30, max_iter=1)  # fmt: skip
    sol = mbd.simulate(model, formulation="rA", integrator="backward_euler", t_end=0.01, h=1e-3,
                       tol=1e-30, max_iter=1, throw=False)  # fmt: skip
    assert np.all(np.asarray(sol.status[1:]) == mbd.MAX_ITERATIONS)


def test_consistent_start_projects_published_velocities():
    """SimEngineMBD slider crank's initial omega contradicts its driver: projected."""
    from conftest import PAPER_MASSES, reference_model

    model = mbd.load_model(
        reference_model("SimEngineMBD/slider_crank.json"), masses=PAPER_MASSES["slider_crank.json"]
    )
    state, corr, info = mbd.consistent_initial_state(model)
    assert int(info.status) == 0
    assert float(corr.velocity) > 1.0  # the crank's omega flips sign
    assert float(corr.position) < ROUND_OFF  # lengths of ~1 m
    r, A, rdot, omega = state[:4]
    from jaxmbd.constraints.equations import rA_terms

    _, G, nu, _ = rA_terms(model, r, A, rdot * 0, omega * 0, 0.0)
    v = np.concatenate([rdot, omega], 1).reshape(-1)
    np.testing.assert_allclose(np.asarray(G) @ v, nu, rtol=0, atol=ROUND_OFF * np.abs(nu).max())
