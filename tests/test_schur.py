"""The Schur-complement solve of the explicit integrators' index-1 KKT systems
(jaxmbd.linear.schur, linear_solver="schur" and rk/rkmk's "auto" on the CPU): equal to the
dense KKT solve on real systems, the same statuses on singular and near-singular ones,
implicit gradients against central differences, vmap, and a hoisted rkmk step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.initial_state import to_formulation
from jaxmbd.compiled.xla_flags import loop_hoisted
from jaxmbd.formulations import get_formulation
from jaxmbd.formulations.index1 import index1_system, solve_index1
from jaxmbd.linear import schur
from jaxmbd.newton import ILL_CONDITIONED, NONFINITE, SUCCESS, condition_status


def _system(name, formulation, t=0.3):
    """A real KKT system: the model's consistent start with velocities added (any v gives
    a well-posed KKT system; non-zero ones make gamma and the gyroscopic forces non-zero)."""
    model = getattr(mbd.models, name)()
    form = get_formulation(formulation)
    rng = np.random.default_rng(0)
    rdot, omega = (0.5 * rng.standard_normal(model.r0.shape) for _ in range(2))

    @jax.jit
    def build(model):
        zero = jnp.zeros_like(model.r0)
        q, v, _ = to_formulation(form, model.r0, model.A0, rdot, omega, zero, zero)
        return index1_system(model, form, q, v, t)

    system = build(model)
    return model, system, (system.G.shape[0] - model.nc) // model.nb


@pytest.fixture(scope="module")
def systems():
    """rA double pendulum (6x6 blocks, 10 rows) and rp slider crank (7x7 blocks with a
    singular quaternion part, 18 joint rows + one normalisation row per body)."""
    return {
        "double_pendulum-rA": _system("double_pendulum", "rA"),
        "slider_crank-rp": _system("slider_crank", "rp"),
    }


_JITTED = {}


def _routed(model, schur_on: bool):
    """solve_index1 for ``model``, jitted once per (model, route)."""
    key = (model.name, schur_on)
    if key not in _JITTED:

        def run(system):
            with schur.prefer(schur_on):
                return solve_index1(system, model=model)

        _JITTED[key] = jax.jit(run)
    return _JITTED[key]


def _dense(model, system):
    return _routed(model, False)(system)


@pytest.mark.parametrize("name", ["double_pendulum-rA", "slider_crank-rp"])
def test_equals_the_dense_kkt_solve(systems, name):
    """Through solve_index1 in the context the integrators set (linear_solver="schur", or
    "auto" on the CPU), against the dense KKT solve (LAPACK)."""
    model, system, _ = systems[name]
    ref = _dense(model, system)
    out = _routed(model, True)(system)
    x_ref = np.concatenate([np.ravel(ref.a), ref.lam])
    x = np.concatenate([np.ravel(out.a), out.lam])
    assert int(ref.status) == SUCCESS and int(out.status) == SUCCESS
    assert np.max(np.abs(x - x_ref)) <= 1e-12 * np.max(np.abs(x_ref))


def _statuses(model, system):
    ref = _dense(model, system)
    out = _routed(model, True)(system)
    return int(ref.status), int(out.status), out


def test_singular_and_near_singular_statuses(systems):
    """Dependent rows (a repeated row), nearly dependent ones (1e-13 apart), a body without
    mass, and rows 1e-4 apart (well-posed): the Schur solve reports what the dense one
    reports."""
    model, system, _ = systems["double_pendulum-rA"]
    G = np.asarray(system.G)
    repeated = G.copy()
    repeated[3] = G[2]
    near = G.copy()
    near[3] = G[2] + 1e-13 * np.abs(G[2]).max() * np.sign(G[3] + 0.5)
    apart = G.copy()
    apart[3] = G[2] + 1e-4 * G[3]
    massless = np.asarray(system.mass).copy()
    massless[1] = 0.0
    cases = {
        "repeated": (system._replace(G=jnp.asarray(repeated)), (ILL_CONDITIONED, NONFINITE)),
        "near": (system._replace(G=jnp.asarray(near)), (ILL_CONDITIONED, NONFINITE)),
        "massless": (system._replace(mass=jnp.asarray(massless)), (NONFINITE,)),
        "apart": (system._replace(G=jnp.asarray(apart)), (SUCCESS,)),
    }
    for label, (case, expected) in cases.items():
        dense, via_schur, out = _statuses(model, case)
        assert dense in expected, (label, dense)
        assert via_schur == dense, (label, dense, via_schur)
        if via_schur == SUCCESS:
            ref = _dense(model, case)
            x_ref = np.concatenate([np.ravel(ref.a), ref.lam])
            x = np.concatenate([np.ravel(out.a), out.lam])
            # a condition number ~1e8: agreement to what it allows
            assert np.max(np.abs(x - x_ref)) <= 1e-7 * np.max(np.abs(x_ref)), label


def test_gradient_against_central_differences(systems):
    """d/dp of a weighted sum of (a, lam) with the mass blocks, G, Q and gamma all moving
    with p (the slider crank in rp: the augmented quaternion blocks too)."""
    model, system, own = systems["slider_crank-rp"]
    rng = np.random.default_rng(3)
    # on G's pattern: a body's own rows (rp's normalisation) stay its own
    dG = jnp.asarray(rng.standard_normal(system.G.shape) * (np.asarray(system.G) != 0)) * 0.01
    dQ = jnp.asarray(rng.standard_normal(system.force.shape))
    dg = jnp.asarray(rng.standard_normal(system.gamma.shape))

    def f(p):
        mass = system.mass * (1.0 + 0.1 * p)
        a, lam, _ = schur.solve(
            mass, system.G + p * dG, system.force + p * dQ, system.gamma + p * dg, own_rows=own
        )
        weights = jnp.sin(jnp.arange(a.size + lam.size) + 1.0)
        return jnp.sum(weights * jnp.concatenate([a.ravel(), lam]))

    grad = jax.jit(jax.grad(f))(0.0)
    eps = 1e-5
    values = jax.jit(jax.vmap(f))(jnp.asarray([eps, -eps]))
    fd = (values[0] - values[1]) / (2 * eps)
    assert abs(grad - fd) <= 1e-8 * abs(fd), (grad, fd)


def test_vmap_equals_member_by_member(systems):
    model, system, own = systems["double_pendulum-rA"]
    scales = jnp.asarray([0.5, 1.0, 3.0])
    shifts = jnp.asarray([-1.0, 0.0, 2.0])

    def one(s, d):
        return schur.solve(system.mass * s, system.G, system.force + d, system.gamma, own_rows=own)

    a, lam, rcond = jax.jit(jax.vmap(one))(scales, shifts)
    single = jax.jit(one)
    for i in range(3):
        a_i, lam_i, rcond_i = single(scales[i], shifts[i])
        np.testing.assert_allclose(a[i], a_i, rtol=0, atol=ROUND_OFF * np.abs(a_i).max())
        np.testing.assert_allclose(lam[i], lam_i, rtol=0, atol=ROUND_OFF * np.abs(lam_i).max())
        np.testing.assert_allclose(rcond[i], rcond_i, rtol=ROUND_OFF)


def _member_batch(system, rng):
    """Eight members of the double pendulum's KKT system (rA): mass blocks and G perturbed
    per member, then made exactly singular (a repeated row; a massless body), nearly
    singular (rows 1e-13 apart), non-finite (a NaN in G) and with every row of G scaled by
    a power of two (the equilibrated S unchanged: its rows' ties at |1| kept)."""
    B = 8
    mass = np.asarray(system.mass) * (1.0 + 0.2 * rng.random((B, 1, 1, 1)))
    mass = mass + 1e-3 * rng.standard_normal(mass.shape) * (np.asarray(system.mass) != 0)
    G = np.asarray(system.G) * (1.0 + 0.1 * rng.standard_normal((B,) + system.G.shape))
    G[1, 3] = G[1, 2]
    mass[2, 1] = 0.0
    G[3, 3] = G[3, 2] + 1e-13 * np.abs(G[3, 2]).max()
    G[4, 0, 0] = np.nan
    G[5] = np.asarray(system.G) * 2.0 ** rng.integers(-3, 4, (G.shape[1], 1))
    Q = np.asarray(system.force) + rng.standard_normal((B,) + system.force.shape)
    gamma = np.asarray(system.gamma) + rng.standard_normal((B,) + system.gamma.shape)
    return tuple(jnp.asarray(v) for v in (mass, G, Q, gamma))


def test_batched_factor_equals_member_by_member(systems):
    """schur.factor under vmap (its own batched kernels on the CPU: S by batched dots, row
    maxima elementwise) against the unbatched kernels member by member (lax.map): the mass
    blocks' inverses bitwise, the solutions (plain and transposed) to round-off, the same
    status for every member, singular and non-finite ones included."""
    _, system, _ = systems["double_pendulum-rA"]
    mass, G, Q, gamma = _member_batch(system, np.random.default_rng(5))
    batched = jax.jit(jax.vmap(schur.factor))
    if jax.default_backend() == "cpu":  # the batched rule, not the plain vmap, ran
        assert "dot_general" in batched.lower(mass, G).as_text()
    by_member = jax.jit(lambda m, g: jax.lax.map(lambda x: schur.factor(*x), (m, g)))
    fb, fs = batched(mass, G), by_member(mass, G)
    np.testing.assert_array_equal(fb.inverse, fs.inverse)
    np.testing.assert_array_equal(fb.G, fs.G)

    def solve(f, q, g, transpose):
        a, lam = schur.factors_solve(f, q, g, transpose=transpose)
        x = jnp.concatenate([a.ravel(), lam])
        return x, condition_status(f.rcond, x)

    for transpose in (False, True):
        run = jax.jit(jax.vmap(lambda f, q, g, t=transpose: solve(f, q, g, t)))
        (xb, sb), (xs, ss) = run(fb, Q, gamma), run(fs, Q, gamma)
        np.testing.assert_array_equal(sb, ss)
        singular = (ILL_CONDITIONED, NONFINITE)
        expected = [(SUCCESS,), singular, (NONFINITE,), singular, (NONFINITE,), (SUCCESS,)]
        assert all(int(v) in e for v, e in zip(np.asarray(ss)[:6], expected, strict=True)), ss
        ok = np.asarray(ss) == SUCCESS
        error = np.abs(np.asarray(xb) - np.asarray(xs)).max(1) / np.abs(np.asarray(xs)).max(1)
        assert np.all(error[ok] <= ROUND_OFF), error


def test_batched_factor_of_one_member_and_unbatched_operands(systems):
    """A batch of one takes the unbatched kernels (bitwise equal), and a batch where only
    G varies broadcasts the mass blocks."""
    _, system, _ = systems["double_pendulum-rA"]
    mass, G, _, _ = _member_batch(system, np.random.default_rng(6))
    one = jax.jit(jax.vmap(schur.factor))(mass[:1], G[:1])
    single = jax.jit(schur.factor)(mass[0], G[0])
    for b, s in zip(one, single, strict=True):
        np.testing.assert_array_equal(b[0], s)
    shared = jax.jit(jax.vmap(schur.factor, in_axes=(None, 0)))(mass[0], G[5:8])
    np.testing.assert_array_equal(
        shared.inverse, jnp.broadcast_to(single.inverse, (3,) + single.inverse.shape)
    )


def test_batched_solve_gradient_against_central_differences(systems):
    """jax.grad through schur.solve under vmap (the factors by the batched rule, never
    differentiated; the solution's implicit derivative through its solves)."""
    _, system, own = systems["double_pendulum-rA"]
    rng = np.random.default_rng(7)
    dG = jnp.asarray(rng.standard_normal(system.G.shape) * (np.asarray(system.G) != 0)) * 0.01
    scales = jnp.asarray([0.8, 1.0, 1.3])

    def f(p):
        def one(s):
            mass = system.mass * (s + 0.1 * p)
            a, lam, _ = schur.solve(mass, system.G + p * s * dG, system.force, system.gamma)
            return jnp.sum(
                jnp.sin(jnp.arange(a.size + lam.size) + s) * jnp.concatenate([a.ravel(), lam])
            )

        return jnp.sum(jax.vmap(one)(scales))

    grad = jax.jit(jax.grad(f))(0.0)
    eps = 1e-5
    fd = (jax.jit(f)(eps) - jax.jit(f)(-eps)) / (2 * eps)
    assert abs(grad - fd) <= 2e-7 * abs(fd), (grad, fd)


@pytest.fixture(scope="module")
def rkmk_runs():
    """The double pendulum's rkmk (rA) run compiled with "auto" (the Schur solve on the
    CPU) and "dense" (LAPACK), 40 steps."""
    model = mbd.models.double_pendulum()
    runs = {}
    for solver in ("auto", "dense"):
        run = jax.jit(
            lambda m, s=solver: mbd.simulate(
                m,
                formulation="rA",
                t_end=0.04,
                h=1e-3,
                integrator="rkmk",
                linear_solver=s,
                throw=False,
            )
        )
        compiled = run.lower(model).compile()
        runs[solver] = (compiled.as_text(), compiled(model))
    return runs


def test_rkmk_auto_step_is_hoisted_and_equals_dense(rkmk_runs):
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU compiler's")
    hlo, sol = rkmk_runs["auto"]
    dense_hlo, dense = rkmk_runs["dense"]
    assert loop_hoisted(hlo, 40)
    assert not loop_hoisted(dense_hlo, 40)  # LAPACK's custom call keeps it out
    assert np.all(np.asarray(sol.status) == SUCCESS)
    np.testing.assert_allclose(sol.r, dense.r, rtol=0, atol=ROUND_OFF * np.abs(dense.r).max())
    np.testing.assert_allclose(sol.lam, dense.lam, rtol=0, atol=ROUND_OFF * np.abs(dense.lam).max())


def test_schur_refused_where_there_is_no_kkt_system():
    model = mbd.models.double_pendulum()
    with pytest.raises(ValueError, match="schur"):
        mbd.simulate(
            model,
            formulation="rA",
            t_end=0.01,
            h=1e-3,
            integrator="gen_alpha",
            linear_solver="schur",
        )
    with pytest.raises(ValueError, match="schur"):
        mbd.simulate(model, t_end=0.01, h=1e-3, formulation="rotmat", integrator="rk",
                     linear_solver="schur")  # fmt: skip
