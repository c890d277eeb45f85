"""Implicit-function gradients through kinematics and dynamics, against central differences,
and the transform compositions (grad, jit(grad), vmap(grad), jacfwd vs jacrev, vmap, sharding).
"""

import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from host_devices import run_on_host_devices
from tolerances import ROUND_OFF

import jaxmbd as mbd

FORMULATIONS = ("rA", "rp", "re")


def sprung_double_pendulum():
    """The paper's double pendulum with a spring-damper from the ground to rod 2's tip."""
    b = mbd.ModelBuilder("sprung double pendulum")
    b.add_body(
        "rod 1",
        mass=78.0,
        inertia=[0.0325, 104.01625, 104.01625],
        r=[0, 2, 0],
        axes=([0, 1, 0], [0, 0, 1]),
    )
    b.add_body(
        "rod 2",
        mass=39.0,
        inertia=[0.01625, 13.008125, 13.008125],
        r=[0, 4, -1],
        axes=([0, 0, -1], [0, 1, 0]),
    )
    b.revolute("pivot", body_i="ground", body_j="rod 1", point=[0, 0, 0], axis=[1, 0, 0])
    b.revolute("elbow", body_i="rod 1", body_j="rod 2", point=[0, 4, 0], axis=[1, 0, 0])
    b.spring_damper(
        "spring",
        body_i="ground",
        point_i=[0, 5, 1],
        body_j="rod 2",
        point_j=[0, 4, -2],
        stiffness=800.0,
        damping=40.0,
        rest_length=2.5,
    )
    return b.build()


def directions(model, rng):
    """Random directions in parameter space, one per parameter kind (zero elsewhere)."""
    zero = jax.tree_util.tree_map(jnp.zeros_like, model)

    def along(where):
        leaf = where(model)
        if where is inertia:
            # each body's inertia scaled by a random factor: a general step leaves the
            # positive (semi-)definite inertias, with the triangle inequality, that the
            # runs accept (a thin rod sits on its boundary)
            factor = rng.normal(size=leaf.shape[:1])[:, None, None]
            step = factor * np.asarray(leaf) / np.abs(np.asarray(leaf)).max()
        else:
            step = rng.normal(size=leaf.shape)
        return eqx.tree_at(where, zero, jnp.asarray(step))

    def inertia(m):
        return m.inertia

    kinds = {
        "mass": lambda m: m.mass,
        "inertia": inertia,
        "gravity": lambda m: m.gravity,
        "initial velocity": lambda m: m.omega0,
        "joint point (CD s_bar_q_j)": lambda m: m.gcon("CD").s_bar_q_j,
        "joint axis (DP1 a_bar_j)": lambda m: m.gcon("DP1").a_bar_j,
    }
    if model.forces:
        kinds["spring stiffness"] = lambda m: m.forces[0].stiffness
        kinds["damping"] = lambda m: m.forces[0].damping
    if model.drivers:
        kinds["driver parameters"] = lambda m: m.drivers[0].constants
    return {
        k: (along(w), float(jnp.max(jnp.abs(w(model))))) for k, w in kinds.items() if w(model).size
    }


# Relative precision of the losses below: the jitter of the loss over small perturbations
# (largest residual of a quadratic fit through 9 evaluations within 1e-4 relative), measured
# with the options these tests use. rp's Newton matrix carries the Euler-parameter
# normalisation row and is ~1e6 conditioned, so its converged iterates jitter at ~5e-11.
LOSS_PRECISION = {"rA": 1e-12, "rp": 1e-10, "re": 1e-12}


def check_against_fd(loss, model, rng, rtol=1e-6, precision=1e-12):
    # one compiled program, with jaxmbd's compile options; the loss of the differences is
    # compiled too (a top-level simulate would run its 1024-step block for a short horizon)
    grad = mbd.jit(jax.grad(loss))(model)
    loss = mbd.jit(loss)
    for kind, (d, scale) in directions(model, rng).items():
        ad = sum(
            jnp.sum(g * v)
            for g, v in zip(
                jax.tree_util.tree_leaves(grad), jax.tree_util.tree_leaves(d), strict=True
            )
        )
        # Richardson-extrapolated central differences at eps 1e-3 (relative): truncation
        # error O(eps^4), and the loss' jitter (Newton iterates converged to tol, with
        # iteration counts that change with the perturbation) divided by a larger step
        eps = 1e-3 * max(scale, 1.0)

        def central(step, d=d):
            plus = jax.tree_util.tree_map(lambda a, b: a + step * b, model, d)
            minus = jax.tree_util.tree_map(lambda a, b: a - step * b, model, d)
            lp, lm = float(loss(plus)), float(loss(minus))
            return (lp - lm) / (2 * step), abs(lp) + abs(lm)

        coarse, size = central(eps)
        fine, _ = central(eps / 2)
        fd = (4 * fine - coarse) / 3
        # the loss' own precision divided by the step (the extrapolation amplifies it 3-fold)
        noise = 1.5 * precision * size / eps
        # finite differences: 0.07 of this bound at worst here (truncation and jitter vary
        # with the direction and the formulation; the -m slow formulations share it)
        assert abs(float(ad) - fd) <= rtol * abs(fd) + noise, (kind, float(ad), fd, noise)


# Every formulation, and between them every implicit integrator variant (each formulation
# x integrator program costs a compilation; the step machinery is shared by all pairs).
INTEGRATOR_OF = {
    "rA": {"integrator": "gen_alpha"},  # stabilised (GGL), the default
    "rp": {"integrator": "gen_alpha", "variant": "index3"},
    "re": {"integrator": "backward_euler"},
}


@pytest.mark.parametrize(
    "formulation",
    ["rA", pytest.param("rp", marks=pytest.mark.slow), "re"],
)  # rp shares re's autodiff-matrix path; it runs with -m slow (CI budget)
def test_dynamics_gradients_match_central_differences(formulation, rng):
    model = sprung_double_pendulum()
    options = INTEGRATOR_OF[formulation]

    def loss(m):
        # tol 1e-6: rp corrections have a round-off floor near 1e-7 (cond ~1e6 times a
        # residual at 1e-10); converged Newton reaches that floor in two iterations anyway
        sol = mbd.simulate(m, formulation=formulation, t_end=0.03, h=1e-3, tol=1e-6, **options)
        return jnp.sum(sol.r[:, 1] ** 2) + 0.1 * jnp.sum(sol.omega**2) + 1e-4 * jnp.sum(sol.lam)

    check_against_fd(loss, model, rng, precision=LOSS_PRECISION[formulation])


# rA in the default suite; rp and re (same step machinery, autodiff matrices, each a
# ~40 s compilation) run with `pytest -m slow`.
ONE_BY_DEFAULT = [
    "rA",
    pytest.param("rp", marks=pytest.mark.slow),
    pytest.param("re", marks=pytest.mark.slow),
]


# Every formulation with -m slow: the driven case repeats the path of
# test_dynamics_gradients_match_central_differences (rA, gen_alpha, the hand-coded matrix
# in the implicit-function solve) with drivers in it; the
# driver parameters' gradients are checked through kinematics (test_kinematics_gradients),
# the driver rows of the hand-coded matrices against autodiff in test_integrators.py
# (test_hand_coded_newton_matrix_equals_autodiff, test_rA_velocity_sensitivity_...).
@pytest.mark.slow
@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_driven_dynamics_gradients(formulation, rng):
    model = mbd.models.slider_crank()

    options = INTEGRATOR_OF[formulation]

    def loss(m):
        sol = mbd.simulate(m, formulation=formulation, t_end=0.02, h=1e-3, tol=1e-6, **options)
        return jnp.sum(sol.rdot[:, 2, 0] ** 2) + 1e-2 * jnp.sum(sol.lam[:, -1])

    check_against_fd(loss, model, rng, precision=LOSS_PRECISION[formulation])


@pytest.mark.parametrize("formulation", ONE_BY_DEFAULT)
def test_kinematics_gradients(formulation, rng):
    """Geometry and driver parameters move the motion; masses enter through lam."""
    model = mbd.models.slider_crank()

    def loss(m):
        sol = mbd.kinematics(m, formulation=formulation, t_end=0.02, h=1e-3)
        return jnp.sum(sol.r[:, 2, 0]) + jnp.sum(sol.rddot**2) + 1e-2 * jnp.sum(sol.lam[:, -1])

    check_against_fd(loss, model, rng)


def pendulum_loss(m, newton="reuse", checkpoint=None):
    sol = mbd.simulate(
        m, formulation="rA", t_end=0.02, h=1e-3, newton=newton, checkpoint=checkpoint
    )
    return jnp.sum(sol.r[:, 1, 2])


#: one gradient program (a ~20 s compilation), shared by the two tests below
pendulum_grad = mbd.jit(jax.grad(pendulum_loss))


@pytest.mark.slow  # a transform composition the FD checks above already exercise under jit
def test_jit_grad_equals_grad():
    model = mbd.models.double_pendulum()
    g1 = jax.grad(pendulum_loss)(model)
    g2 = eqx.filter_jit(jax.grad(pendulum_loss))(model)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    assert float(jnp.abs(g1.mass).max()) > 0


def test_vmap_grad_equals_loop():
    """vmap of the gradient (with respect to every array of the model) over gravity scales
    equals the gradients one at a time."""
    model = mbd.models.double_pendulum()
    scales = jnp.array([1.0, 1.3, 0.8])

    def scaled(s):
        return eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)

    batched = mbd.jit(jax.vmap(lambda s: jax.grad(pendulum_loss)(scaled(s))))(scales)
    for k, s in enumerate(scales):
        one = jax.tree_util.tree_leaves(pendulum_grad(scaled(s)))
        scale = max(float(np.abs(b).max(initial=0.0)) for b in one)  # the gradient's size
        for a, b in zip(jax.tree_util.tree_leaves(batched), one, strict=True):
            np.testing.assert_allclose(a[k], b, rtol=0, atol=ROUND_OFF * scale)
    assert np.ptp(np.asarray(batched.mass), axis=0).max() > 0  # the scales matter


@pytest.mark.slow  # forward and reverse mode agree; ~30 s of compilation
def test_jacfwd_equals_jacrev():
    model = mbd.models.slider_crank()

    def out(c):
        m = eqx.tree_at(lambda m: m.drivers[0].constants, model, c)
        return mbd.kinematics(m, t_end=0.01, h=1e-3).r[-1, 2, :2]

    c0 = model.drivers[0].constants
    np.testing.assert_allclose(jax.jacfwd(out)(c0), jax.jacrev(out)(c0), rtol=1e-10, atol=1e-14)


@pytest.mark.slow  # a second gradient program of the same run
def test_checkpointed_gradient_equals_plain():
    """Two properties in one pair of programs (each gradient program is a ~20 s
    compilation): ``checkpoint=8`` recomputes segments in reverse mode (two of 8 steps and a
    plain tail of 4), and newton="full" gives the same gradient as the default "reuse",
    which carries LU factors through the scan: gradients come from the implicit function
    theorem at each root, not from the iterations. Either broken gives O(1) differences;
    1e-9 is the Newton tolerance's share (the roots of the two variants differ within it)."""
    model = mbd.models.double_pendulum()
    plain = pendulum_grad(model)
    checkpointed = pendulum_grad(model, "full", 8)
    np.testing.assert_allclose(checkpointed.mass, plain.mass, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(checkpointed.r0, plain.r0, rtol=1e-9, atol=1e-13)
    assert np.abs(plain.mass).max() > 1e-6  # the loss does depend on the masses


@pytest.mark.slow  # test_batch.py::test_batch_equals_loop checks the same (gen_alpha default)
def test_vmapped_batch_equals_single_runs():
    model = mbd.models.double_pendulum()
    members = [
        eqx.tree_at(lambda m: m.omega0, model, model.omega0.at[0, 2].set(w))
        for w in (0.0, 0.5, -1.0)
    ]
    batch = mbd.simulate_batch(mbd.stack_models(members), t_end=0.05, h=1e-3)
    for k, member in enumerate(members):
        single = mbd.simulate(member, t_end=0.05, h=1e-3)
        # the batched program is compiled separately (other fusions): equal to round-off
        for key in ("r", "A", "rdot", "omega"):
            np.testing.assert_allclose(
                np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key)), atol=1e-12
            )
        np.testing.assert_allclose(np.asarray(batch.lam)[k], np.asarray(single.lam), atol=1e-9)
        np.testing.assert_array_equal(np.asarray(batch.iterations)[k], single.iterations)


# -m slow (41 s, CI budget): test_distributed.py::test_two_processes_equal_one[forward]
# shards simulate_batch over the devices of two processes in the default suite
@pytest.mark.slow
def test_sharded_batch_equals_unsharded(tmp_path):
    """Four host devices (XLA_FLAGS) against one, in a fresh process."""
    script = textwrap.dedent("""
        import sys, jax, numpy as np, equinox as eqx
        import jaxmbd as mbd
        model = mbd.models.double_pendulum()
        members = [eqx.tree_at(lambda m: m.omega0, model, model.omega0.at[0, 2].set(0.1 * k))
                   for k in range(6)]
        batch = mbd.stack_models(members)
        sharded = mbd.simulate_batch(batch, t_end=0.03, h=1e-3)
        single = mbd.simulate_batch(batch, t_end=0.03, h=1e-3, devices=jax.devices()[:1])
        assert len(jax.devices()) == 4, jax.devices()
        np.testing.assert_allclose(np.asarray(sharded.r), np.asarray(single.r), rtol=0, atol=1e-13)
        print("OK", len(jax.devices()))
    """)
    assert "OK 4" in run_on_host_devices(script, 4, timeout=600)
