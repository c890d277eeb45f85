"""The integrator layer: generalized-alpha (both variants) against independent references,
its hand-coded rA Newton matrix, backward Euler unchanged, and the formulation x integrator
pairs."""

from functools import cache

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.diagnostics import constraint_violation, energy
from jaxmbd.formulations import RA
from jaxmbd.integrators import Discretisation
from jaxmbd.integrators.base import step_system

FORMULATIONS = ("rA", "rp", "re")
STEPS = (4e-3, 2e-3, 1e-3)


def noop(done, total):
    pass


def run(model, t_end, h, **kw):
    # fixed chunks: one compilation per (model, formulation, integrator) across step sizes
    return mbd.simulate(model, t_end=t_end, h=h, progress=noop, chunk_size=250, **kw)


def observed_orders(errors):
    errors = np.asarray(errors)
    return np.log2(errors[:-1] / errors[1:])


# ------------------------------------------------------------------ double pendulum (ODE)


def double_pendulum_errors(formulation, **kw):
    """Max errors over 1 s of r, r_dot, r_ddot and of the joint forces held in lam, against
    the scipy ODE in joint angles. The CD rows of a revolute joint between body i and body j
    carry the global force on body i: rod 1 gets m1 (a1 - g) + m2 (a2 - g) from the ground
    joint and rod 2's joint pulls it with -m2 (a2 - g) (Newton's law on each rod)."""
    model = mbd.models.double_pendulum()
    names = model.constraint_names
    cd1 = [names.index(f"revJoint_CD_{k}") for k in (1, 2, 3)]
    cd2 = [names.index(f"revJoint2_CD_{k}") for k in (1, 2, 3)]
    g = np.asarray(model.gravity)
    m1, m2 = (float(x) for x in model.mass)
    rows = []
    for h in STEPS:
        sol = run(model, 1.0, h, formulation=formulation, **kw)
        ref = references.double_pendulum(np.asarray(sol.t))
        a1, a2 = ref["rddot"][:, 0], ref["rddot"][:, 1]
        lam = np.asarray(sol.lam)
        lam_error = max(
            np.abs(lam[:, cd1] - (m1 * (a1 - g) + m2 * (a2 - g))).max(),
            np.abs(lam[:, cd2] + m2 * (a2 - g)).max(),
        )
        rows.append(
            [
                np.abs(sol.r - ref["r"]).max(),
                np.abs(sol.rdot - ref["rdot"]).max(),
                np.abs(sol.rddot - ref["rddot"]).max(),
                lam_error,
            ]
        )
    return np.array(rows)


@cache
def gen_alpha_double_pendulum(formulation, variant="stabilised"):
    return double_pendulum_errors(formulation, integrator="gen_alpha", variant=variant)


# re with -m slow (13 s, CI budget): its gen_alpha steps run by default in
# test_re_default_steps_over_the_chart_singularity; rA and rp keep the order check here
@pytest.mark.parametrize(
    "formulation",
    ["rA", pytest.param("rp", marks=pytest.mark.slow), pytest.param("re", marks=pytest.mark.slow)],
)
def test_gen_alpha_second_order_double_pendulum(formulation):
    """Positions, velocities, accelerations and multipliers all converge at order 2."""
    errors = gen_alpha_double_pendulum(formulation)
    orders = observed_orders(errors)
    assert np.all((orders > 1.85) & (orders < 2.3)), (errors, orders)
    assert errors[-1, 0] < 1e-5  # r at h = 1e-3 (backward Euler: ~5e-3)


def test_gen_alpha_variants_multipliers():
    """The index-3 variant's lam error is larger than the stabilised one's (reported in
    the closing note); both converge at second order from a consistent start at rho_inf 0.9."""
    stabilised = gen_alpha_double_pendulum("rA")
    index3 = gen_alpha_double_pendulum("rA", "index3")
    assert np.all(observed_orders(index3[:, 3]) > 1.8), index3
    assert np.all(stabilised[:, 3] < index3[:, 3]), (stabilised[:, 3], index3[:, 3])


def test_backward_euler_first_order_on_the_same_references():
    errors = double_pendulum_errors("rA", integrator="backward_euler")
    orders = observed_orders(errors)
    assert np.all((orders > 0.85) & (orders < 1.2)), (errors, orders)


# ------------------------------------------------------------------ Newton matrix


def matrix_check_model():
    """Every GCON type, a driver, a spring-damper and a free-flying second body."""
    b = mbd.ModelBuilder("matrix check")
    b.add_body(
        "a",
        mass=2.0,
        inertia=[1.0, 2.0, 3.0],
        r=[1.0, 0.2, 0.0],
        A=mbd.so3_exp(np.array([0.2, -0.1, 0.4])),
        omega=[1.0, 2.0, -1.5],
    )
    b.add_body(
        "b",
        mass=1.0,
        inertia=[0.5, 0.7, 0.9],
        r=[2.0, 0.5, 0.3],
        A=mbd.so3_exp(np.array([-0.3, 0.2, 0.1])),
        rdot=[0.1, 0.2, 0.3],
    )
    b.revolute("pin", body_i="ground", body_j="a", point=[0, 0, 0], axis=[0, 0, 1])
    b.add_dp2(
        "dp2",
        body_i="a",
        a_bar_i=[0, 1, 0],
        s_bar_p_i=[0.3, 0.1, 0],
        body_j="b",
        s_bar_q_j=[0.1, 0.2, -0.1],
    )
    b.add_d("dist", body_i="a", s_bar_p_i=[0.5, 0, 0], body_j="b", s_bar_q_j=[0, 0.1, 0], f=1.3)
    b.rotation_driver("motor", body_i="ground", body_j="a", axis=[0, 0, 1], angle="0.3*t")
    b.spring_damper(
        "spring",
        body_i="ground",
        point_i=[0, 0, 1],
        body_j="b",
        point_j=[2.0, 0.5, 0.3],
        stiffness=50.0,
        damping=3.0,
        rest_length=1.0,
    )
    return b.build()


@pytest.mark.parametrize("stabilised", [False, True], ids=["index3", "stabilised"])
def test_hand_coded_newton_matrix_equals_autodiff(stabilised):
    """The rA Newton matrix assembled from the hand-coded blocks (eq. 38c, Tables 3-6, the
    exact dexp of the rotation increment) equals jacfwd of the step residual, for a generic
    discretisation (any implicit integrator) with rotation increments of order 0.3 rad."""
    model = matrix_check_model()
    form = RA()
    rng = np.random.default_rng(3)
    n, m = 6 * model.nb, model.nc
    q = (model.r0, model.A0)
    disc = Discretisation(
        d0=jnp.asarray(0.3 * rng.normal(size=n)),
        c_q=jnp.asarray(0.01**2 * 0.3),
        v0=jnp.asarray(rng.normal(size=(model.nb, 6))),
        c_v=jnp.asarray(0.01 * 0.6),
    )
    x = jnp.asarray(rng.normal(size=n + (2 * m if stabilised else m)))

    # one compiled program: op by op, the two matrices took ~600 small compilations (22 s
    # of CPU for both variants against 8 s)
    @jax.jit
    def both(model, q, disc, x):
        system = step_system(model, form, q, disc, jnp.asarray(0.37), stabilised=stabilised)
        return system.jacobian(x), jax.jacfwd(lambda y: system.residual(y, system.params))(x)

    hand, auto = both(model, q, disc, x)
    np.testing.assert_allclose(hand, auto, rtol=0, atol=ROUND_OFF * np.abs(auto).max())


# ------------------------------------------------------------------ structure


# The slider crank over 0.3 s at h = 1e-3 (the crank passes theta = 0, re's chart
# singularity, on the grid at t = 0.25 s): one run per formulation and method, shared by the
# tests below (each is a compilation of its own).
SLIDER_CRANK_RUN = dict(t_end=0.3, h=1e-3)


@cache
def slider_crank_kinematics(formulation):
    return mbd.kinematics(mbd.models.slider_crank(), formulation=formulation, **SLIDER_CRANK_RUN)


@cache
def slider_crank_dynamics(formulation, **options):
    return mbd.simulate(
        mbd.models.slider_crank(), formulation=formulation, **SLIDER_CRANK_RUN, **options
    )


def test_zero_dof_mechanism_keeps_exact_positions():
    """A driven 0-DOF mechanism: Phi(q_{n+1}) = 0 fixes the positions, whatever the
    integrator; gen_alpha matches the kinematic analysis to the Newton tolerance."""
    model = mbd.models.slider_crank()
    truth = slider_crank_kinematics("rA")
    violations = jax.jit(constraint_violation)  # one program, not op by op
    for variant in ("stabilised", "index3"):
        # the default (stabilised) run is the one test_re_default_steps_over... compares
        options = {} if variant == "stabilised" else {"integrator": "gen_alpha", "variant": variant}
        sol = slider_crank_dynamics("rA", **options)
        assert sol.integrator == "gen_alpha"
        np.testing.assert_allclose(sol.r, truth.r, rtol=0, atol=2e-11)
        viol = violations(model, sol)
        assert float(viol.position.max()) < 3e-14
        if variant == "stabilised":  # G v = nu enforced too: velocities exact as well
            np.testing.assert_allclose(sol.rdot, truth.rdot, rtol=0, atol=2e-11)


def test_backward_euler_unchanged():
    """backward_euler through the integrator layer reproduces the roots of the formulation-
    welded implementation it replaced (golden values from commit 486d5e9, full Newton)."""
    model = mbd.models.double_pendulum()
    sol = mbd.simulate(
        model, formulation="rA", integrator="backward_euler", newton="full", t_end=0.3, h=1e-3
    )
    golden = np.asarray(GOLDEN_BE_DOUBLE_PENDULUM["r"])
    np.testing.assert_allclose(sol.r[-1], golden, rtol=0, atol=ROUND_OFF * np.abs(golden).max())
    # lam to the Newton tolerance's effect (||delta|| < 1e-5 on x = (a, lam))
    np.testing.assert_allclose(sol.lam[-1], GOLDEN_BE_DOUBLE_PENDULUM["lam"], rtol=0, atol=1e-7)


def test_invalid_pairs_and_options_are_refused():
    model = mbd.models.double_pendulum()
    with pytest.raises(ValueError, match="unknown integrator 'rk9'.*backward_euler.*gen_alpha"):
        mbd.simulate(model, formulation="rA", integrator="rk9", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="has no option.*rho_inf"):
        mbd.get_integrator("backward_euler", "rA", rho_inf=0.5)
    with pytest.raises(ValueError, match="rho_inf must lie in"):
        mbd.simulate(
            model, formulation="rA", integrator="gen_alpha", rho_inf=1.5, t_end=0.01, h=1e-3
        )

    class OnlyRA(mbd.BackwardEuler):
        requires = frozenset({"index3_blocks", "body_state_coordinates"})

    with pytest.raises(ValueError, match=r"cannot step formulation 'rp'.*\(rA, gen_alpha\)"):
        mbd.simulate(model, formulation="rp", integrator=OnlyRA(), t_end=0.01, h=1e-3)
    assert ("rp", "gen_alpha") in mbd.valid_pairs()


GOLDEN_BE_DOUBLE_PENDULUM = {
    "r": [
        [0.0, 1.9823212913643629, -0.2653343132795396],
        [0.0, 3.9912671819772383, -1.5303141290822766],
    ],
    "lam": [
        0.0,
        0.0,
        0.0,
        -228.01486445585428,
        254.66058192978238,
        0.0,
        0.0,
        0.0,
        44.71074199796026,
        59.724301698972575,
    ],
}


# ------------------------------------------------------------------ energy at rho_inf = 1


def spinning_body():
    b = mbd.ModelBuilder("spinning body", gravity=(0.0, 0.0, 0.0))
    b.add_body(
        "box",
        mass=1.5,
        inertia=[0.02, 0.05, 0.06],
        A=mbd.so3_exp(np.array([0.4, -0.2, 0.3])),
        rdot=[0.1, 0.0, 0.0],
        omega=[1.0, 6.0, 0.5],  # near the intermediate axis: a tumbling, non-trivial motion
    )
    return b.build()


def test_gen_alpha_rho_one_conserves_energy_of_a_torque_free_body():
    """rho_inf = 1 has no numerical dissipation: the energy error is O(h^2) and bounded
    (no drift over many tumbling periods)."""
    model = spinning_body()
    drift = []
    for h in (1e-2, 5e-3):
        sol = run(model, 6.0, h, formulation="rA", integrator="gen_alpha", rho_inf=1.0)
        e = np.asarray(energy(model, sol).kinetic)
        rel = np.abs(e - e[0]) / e[0]
        half = len(rel) // 2
        assert rel[half:].max() < 1.5 * rel[:half].max(), "energy error grows: drift"
        drift.append(rel.max())
    assert 3.2 < drift[0] / drift[1] < 4.8, drift
    assert drift[1] < 1e-4


def test_rA_velocity_residual_equals_its_definition():
    """rA's row-wise G v + Phi_t equals d/ds Phi(retract(q, s v), t + s) (the generic
    definition, autodiff through exp) for every GCON type and a driver."""
    from jaxmbd.formulations import AbstractFormulation

    model = matrix_check_model()
    form = RA()
    v = jnp.asarray(np.random.default_rng(0).normal(size=(model.nb, 6)))
    q = (model.r0, model.A0)
    fast = form.velocity_residual(model, q, v, 0.37)
    generic = AbstractFormulation.velocity_residual(form, model, q, v, 0.37)
    np.testing.assert_allclose(fast, generic, rtol=0, atol=ROUND_OFF * np.abs(generic).max())
    assert np.abs(fast).max() > 0.1  # a generic v violates the constraints


# ------------------------------------------------------------------ 3-D: heavy top


@cache
def spinning_top_errors(formulation, integrator, steps=STEPS, t_end=1.0):
    """Max errors over 1 s of A, omega_bar and the pivot reaction against Euler's equations
    about the pivot in quaternions (scipy DOP853, rtol 1e-12; tests/references.py)."""
    model = mbd.models.spinning_top()
    A0 = np.asarray(model.A0[0])
    com_from_pivot = A0.T @ np.asarray(model.r0[0])  # pivot at the origin
    rows = []
    for h in steps:
        sol = run(model, t_end, h, formulation=formulation, integrator=integrator)
        ref = references.heavy_top(
            np.asarray(sol.t),
            mass=float(model.mass[0]),
            inertia=np.asarray(model.inertia[0]),
            com_from_pivot=com_from_pivot,
            gravity=np.asarray(model.gravity),
            A0=A0,
            omega0=np.asarray(model.omega0[0]),
        )
        # the three CD rows (ground = body i) carry minus the joint force on the top
        reaction_error = np.abs(-np.asarray(sol.lam) - ref["reaction"]).max(axis=1)
        rows.append(
            [
                np.abs(sol.A[:, 0] - ref["A"]).max(),
                np.abs(sol.omega[:, 0] - ref["omega_bar"]).max(),
                reaction_error.max(),
                reaction_error[2:].max(),
            ]
        )
    return np.array(rows)


@pytest.mark.parametrize(
    "formulation,integrator,order",
    [
        ("rA", "gen_alpha", 2),
        pytest.param("rp", "gen_alpha", 2, marks=pytest.mark.slow),
        pytest.param("rA", "backward_euler", 1, marks=pytest.mark.slow),
    ],
)
def test_spinning_top_order_against_euler_equations(formulation, integrator, order):
    """A non-planar motion: asymmetric body, pivot off the centre of mass and off every
    principal axis, generic initial orientation and spin."""
    if order == 1:  # first order is far from its asymptotic range at h = 4e-3 (errors ~ 1)
        errors = spinning_top_errors(formulation, integrator, (1e-3, 5e-4, 2.5e-4), 0.5)
        # index-3 backward Euler's first step halves the constraint part of a_1
        # (q_1 = q_0 + h v_0 + h^2 a_1 on the manifold): an O(1) reaction error at t = h
        # that does not shrink with h; first order from the second step on.
        assert errors[0, 2] > 1.0 and abs(errors[0, 2] - errors[-1, 2]) < 0.1
        errors = errors[:, [0, 1, 3]]
    else:
        errors = spinning_top_errors(formulation, integrator)
    orders = observed_orders(errors)
    assert np.all(np.abs(orders - order) < 0.25), (errors, orders)


def test_rA_velocity_sensitivity_equals_autodiff():
    """The hand-coded d(G v - nu)/dq of the stabilised rows (per-constraint blocks of
    Tables 3-6 contracted with v, the driver's Phi_t rows) against jacfwd through exp."""
    from jaxmbd.formulations import AbstractFormulation

    model = matrix_check_model()
    form = RA()
    v = jnp.asarray(np.random.default_rng(1).normal(size=(model.nb, 6)))
    q = (model.r0, model.A0)
    # each side as one compiled program (op by op, the jacfwd through exp dispatched and
    # compiled every primitive on its own: ~17 s of a cold suite)
    hand = eqx.filter_jit(form.velocity_residual_linearisation)(model, q, v, 0.37)
    auto = eqx.filter_jit(
        lambda m, q_, v_, t: AbstractFormulation.velocity_residual_linearisation(form, m, q_, v_, t)
    )(model, q, v, 0.37)
    np.testing.assert_allclose(hand, auto, rtol=0, atol=ROUND_OFF * np.abs(auto).max())


def test_re_default_steps_over_the_chart_singularity():
    """The slider crank's crank passes theta = 0 exactly on the grid at t = 0.25 s: re's
    defaults (gen_alpha index-3, full Newton) step over it by the explicit least-squares
    step-over, verified and flagged at that step only (issue 10)."""
    ra, re = slider_crank_dynamics("rA"), slider_crank_dynamics("re")
    np.testing.assert_allclose(re.r, ra.r, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(np.nonzero(np.asarray(re.chart_singular))[0], [250])
    assert ra.chart_singular is None and re.result == mbd.RESULTS.successful
    assert np.all(np.isfinite(np.asarray(re.lam)))


def test_re_kinematics_steps_over_the_chart_singularity():
    """Kinematics at theta = 0 on the grid (t = 0.25 s): the least-squares velocities and
    accelerations pass the chart-free check G v = nu, G a = gamma; the step is flagged and
    agrees with rA."""
    ra, re = slider_crank_kinematics("rA"), slider_crank_kinematics("re")
    np.testing.assert_array_equal(np.nonzero(np.asarray(re.chart_singular))[0], [250])
    for key in ("r", "rdot", "omega", "omegadot"):
        want = np.asarray(getattr(ra, key))
        np.testing.assert_allclose(getattr(re, key), want, rtol=0,
                                   atol=1e-10 * np.abs(want).max(), err_msg=key)  # fmt: skip
    np.testing.assert_allclose(re.lam, ra.lam, rtol=0, atol=1e-10 * np.abs(ra.lam).max())
