"""The elementwise small solves (jaxmbd.linear.small) against LAPACK, their statuses, the
XLA flag handling, the hoisting of the time-stepping loop (structure, from the compiled
HLO), and simulate with linear_solver="small" against the LAPACK path."""

import math
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compiled_runs
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.compiled import xla_flags as _xla_flags
from jaxmbd.linear import small
from jaxmbd.newton import (
    ILL_CONDITIONED,
    NONFINITE,
    SUCCESS,
    factor_matrix,
    matrix_solve,
    solve_with_condition,
)


def _with_condition(n, cond, rng):
    """A random n x n matrix of 2-norm condition number ``cond``."""
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return u @ np.diag(np.geomspace(1.0, 1.0 / cond, n)) @ v.T


def _cases():
    rng = np.random.default_rng(7)
    cases = {f"random{n}": rng.standard_normal((n, n)) for n in (1, 2, 5, 13, 32)}
    cases["ill1e10"] = _with_condition(12, 1e10, rng)
    cases["ill1e14"] = _with_condition(9, 1e14, rng)
    swap = rng.standard_normal((6, 6))
    swap[0, 0] = 0.0  # the first pivot must come from another row
    cases["zero_leading"] = swap
    cases["permutation"] = np.eye(7)[[3, 0, 6, 1, 5, 2, 4]] * np.arange(1.0, 8.0)
    cases["ties"] = np.array([[1.0, 2.0, 0.5], [-1.0, 1.0, 3.0], [1.0, -4.0, 2.0]])
    return cases


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_lu_and_solves_equal_lapack(name):
    a = CASES[name]
    n = a.shape[0]
    lu_ref, _, perm_ref = jax.lax.linalg.lu(a)
    lu, perm = jax.jit(small.lu)(a)
    np.testing.assert_array_equal(perm, perm_ref)  # the same row choices
    lower = np.tril(np.asarray(lu), -1) + np.eye(n)
    # backward stable: P A = L U to round-off (both; on an ill-conditioned matrix the
    # multipliers below a tiny pivot differ by round-off / pivot between the two orders of
    # summation, so the factors are compared where the condition allows)
    eps = np.finfo(float).eps
    assert np.max(np.abs(a[perm] - lower @ np.triu(lu))) <= eps * n * np.max(np.abs(a))
    well_conditioned = np.linalg.cond(a) < 1e3
    if well_conditioned:
        assert np.max(np.abs(lu - lu_ref)) <= ROUND_OFF * np.max(np.abs(lu_ref))
    rhs = np.random.default_rng(1).standard_normal((n, 2))
    for transpose in (False, True):
        x = small.lu_solve(lu, perm, rhs, transpose=transpose)
        m = a.T if transpose else a
        x_ref = jnp.linalg.solve(m, rhs)
        # both backward stable: a residual at round-off, and agreement to 3e-14 where the
        # condition number allows it
        backward = np.max(np.abs(m @ x - rhs)) / (np.max(np.abs(m)) * np.max(np.abs(x)) * n)
        assert backward <= eps
        if well_conditioned:
            assert np.max(np.abs(x - x_ref)) <= 3e-14 * np.max(np.abs(x_ref))
    vector = small.lu_solve(lu, perm, rhs[:, 0])
    np.testing.assert_allclose(vector, small.lu_solve(lu, perm, rhs)[:, 0], rtol=3e-14)
    inverse, pivots = jax.jit(small.inverse_and_pivots)(a)
    if well_conditioned:
        np.testing.assert_allclose(pivots, np.abs(np.diagonal(lu_ref)), rtol=ROUND_OFF, atol=0)
        want = np.linalg.inv(a)
        np.testing.assert_allclose(inverse, want, rtol=0, atol=2e-14 * np.abs(want).max())
    else:  # the pivots as the LU's: the same rows, round-off relative to the largest
        want = np.abs(np.diagonal(lu))
        np.testing.assert_allclose(pivots, want, rtol=0, atol=ROUND_OFF * want.max())


def test_batched_equals_members():
    perm5 = np.eye(5)[[2, 0, 4, 1, 3]] * np.arange(1.0, 6.0)
    stack = np.stack([CASES["random5"], CASES["zero_leading"][:5, :5], perm5])
    lu, perm = jax.vmap(small.lu)(stack)
    inv, piv = jax.vmap(small.inverse_and_pivots)(stack)
    for k, a in enumerate(stack):
        lu_k, perm_k = small.lu(a)
        np.testing.assert_array_equal(perm[k], perm_k)
        np.testing.assert_allclose(lu[k], lu_k, rtol=0, atol=ROUND_OFF * np.abs(lu_k).max())
        want = small.inverse_and_pivots(a)[0]
        np.testing.assert_allclose(inv[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max())


def test_lu_stack_equals_vmap_of_lu_bitwise():
    """small.lu_stack (the batched rules' LU, steps unrolled) against vmap(small.lu) on
    one compiled stack: random members, rows tied at |1| in the first column (the first
    of them pivots), the singular matrices below (a zero row, dependent rows, a zero
    column: its pivot left unscaled), a NaN; factors and permutations bitwise equal (the
    NaN member's: permutation and diagonal). Above LU_STACK_UNROLLED_MAX: vmap(lu)
    itself."""
    rng = np.random.default_rng(11)
    n = 6
    members = list(rng.standard_normal((4, n, n)))
    tied = rng.uniform(-0.9, 0.9, (n, n))
    tied[[1, 3], 0], tied[4, 0] = 1.0, -1.0
    members.append(tied)
    for a in (SINGULAR["zero_row"], SINGULAR["dependent_rows"], SINGULAR["zero_column"]):
        padded = np.eye(n)
        padded[:3, :3] = a
        members.append(padded)
    members[-1][4, 5] = np.nan
    stack = jnp.asarray(np.stack(members))
    lu, perm = jax.jit(small.lu_stack)(stack)
    lu_ref, perm_ref = jax.jit(jax.vmap(small.lu))(stack)
    np.testing.assert_array_equal(perm, perm_ref)
    np.testing.assert_array_equal(lu[:-1], lu_ref[:-1])
    # the NaN member: lu's masked updates also spread it into the rows above (0 * NaN)
    diagonal, diagonal_ref = (np.diagonal(v[-1]) for v in (lu, lu_ref))
    np.testing.assert_array_equal(diagonal, diagonal_ref)
    assert np.isnan(lu[-1]).any() and np.isnan(lu_ref[-1]).any()
    assert list(np.asarray(perm[4]))[0] == 1  # the first of the tied rows
    m = small.LU_STACK_UNROLLED_MAX + 1
    big = jnp.asarray(rng.standard_normal((2, m, m)))
    for out, ref in zip(small.lu_stack(big), jax.vmap(small.lu)(big), strict=True):
        np.testing.assert_array_equal(out, ref)


SINGULAR = {
    "zero_row": np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5.0, 7.0]]),
    "dependent_rows": np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),
    "zero_column": np.array([[1.0, 0.0, 3.0], [2.0, 0.0, 6.5], [1.0, 0.0, 1.0]]),
    "near_singular": np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0 + 1e-14], [1.0, 0.0, 1.0]]),
    "well_posed": np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]),
}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_statuses_unchanged(name):
    """solve_with_condition and factor_matrix (kept inverse and LU) give the same status
    with the small kernels as with LAPACK: NONFINITE for an exactly singular matrix,
    ILL_CONDITIONED for a near-singular one."""
    a = jnp.asarray(SINGULAR[name])
    b = jnp.ones(3)
    w = jnp.ones(3)
    expected = {"near_singular": ILL_CONDITIONED, "well_posed": SUCCESS}.get(name, NONFINITE)

    def statuses():
        _, s1 = solve_with_condition(a, b)
        kept = factor_matrix(a, w, w)  # n <= INVERSE_MAX: the inverse
        lu = factor_matrix(a, w, w, keep=False)  # LU factors
        solved = matrix_solve(lu, b)
        return int(s1), int(kept.status), int(lu.status), solved

    lapack = statuses()
    with small.prefer(math.inf):
        elementwise = statuses()
    assert lapack[:3] == elementwise[:3] == (expected,) * 3
    if expected == SUCCESS or (expected != NONFINITE and jax.default_backend() == "cpu"):
        np.testing.assert_allclose(elementwise[3], lapack[3], rtol=ROUND_OFF)
    if expected == ILL_CONDITIONED:
        # x is determined only to cond * eps ~ 1 here: the kernels agree with the CPU's
        # LAPACK (same pivots, same operations) but not with a GPU's (2.6 % on an H100);
        # both are backward stable, |A x - b| of the order of eps |A| |x|
        for x in (np.asarray(elementwise[3]), np.asarray(lapack[3])):
            residual = np.asarray(a) @ x - np.asarray(b)
            bound = 3 * np.finfo(float).eps * np.abs(np.asarray(a)).max() * np.abs(x).max()
            assert np.abs(residual).max() <= bound  # n eps |A| |x|


def test_solve_gradient_central_differences():
    """d/dp of x(p) = A(p)^{-1} b(p) through solve_with_condition with the small kernels
    (implicit: custom_linear_solve) against central differences."""
    a0, a1 = jnp.asarray(CASES["random5"]), jnp.asarray(CASES["zero_leading"][:5, :5])
    b0 = jnp.arange(1.0, 6.0)

    def f(p):
        with small.prefer(math.inf):
            x, _ = solve_with_condition(a0 + p * a1, b0 * (1.0 + p**2))
        return jnp.sum(jnp.sin(x))

    p, eps = 0.3, 1e-6
    fd = (f(p + eps) - f(p - eps)) / (2 * eps)
    assert abs(jax.grad(f)(p) - fd) <= 2e-9 * max(1.0, abs(fd))
    assert abs(jax.jit(jax.grad(f))(p) - fd) <= 2e-9 * max(1.0, abs(fd))


def test_flag_handling(monkeypatch):
    line = _xla_flags.LINE
    assert _xla_flags.with_threshold("") == line
    assert _xla_flags.with_threshold("--a=1") == f"--a=1 {line}"
    merged = _xla_flags.with_threshold("--xla_backend_extra_options=k=v --b=2")
    assert merged == (
        f"--xla_backend_extra_options=k=v,{_xla_flags.OPTION}={_xla_flags.THRESHOLD_BYTES} --b=2"
    )
    # a user's own value is kept
    user = f"--xla_backend_extra_options={_xla_flags.OPTION}=5"
    monkeypatch.setenv("XLA_FLAGS", user)
    assert _xla_flags.configure() == "user" and os.environ["XLA_FLAGS"] == user
    # the backend has started in this process: a warning with the exact line, once
    monkeypatch.setenv("XLA_FLAGS", "--b=2")
    monkeypatch.setattr(_xla_flags, "_warned", False)
    with pytest.warns(UserWarning, match="xla_cpu_small_while_loop_byte_threshold"):
        assert _xla_flags.configure() == "warned"
    assert _xla_flags.configure() == "warned"  # no second warning (pytest would fail on one)
    assert os.environ["XLA_FLAGS"] == "--b=2"
    monkeypatch.setenv("JAXMBD_XLA_FLAGS", "0")
    assert _xla_flags.configure() == "opt-out"


@pytest.fixture(scope="module")
def pendulum_programs():
    """A 4-step single-pendulum run (gen_alpha, rA), compiled with linear_solver "small" and
    "dense": (compiled HLO text, solution) per solver."""
    return compiled_runs(mbd.models.single_pendulum(), ("small", "dense"), t_end=4e-3)


def test_step_loop_is_hoisted(pendulum_programs):
    """With the small kernels the time-stepping loop compiles to one native call (XLA's
    small-while-loop hoisting, enabled at import by jaxmbd.compiled.xla_flags); with LAPACK (a
    custom call in the loop) it cannot. Counted from the compiled HLO, never timed."""
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU backend's")
    assert _xla_flags.OPTION in os.environ.get("XLA_FLAGS", "")
    hlo_small, sol_small = pendulum_programs["small"]
    hlo_dense, sol_dense = pendulum_programs["dense"]
    assert _xla_flags.loop_hoisted(hlo_small, 4)
    assert not _xla_flags.loop_hoisted(hlo_dense, 4)
    assert "custom_call_target" in hlo_dense
    np.testing.assert_allclose(sol_small.r, sol_dense.r, rtol=0,
                               atol=ROUND_OFF * np.abs(sol_dense.r).max())  # fmt: skip
    assert int(jnp.max(sol_small.status)) == SUCCESS


def _run(model, integrator, solver, steps):
    sol = mbd.simulate(
        model,
        formulation="rA",
        t_end=steps * 1e-3,
        h=1e-3,
        integrator=integrator,
        linear_solver=solver,
    )
    return np.asarray(sol.r), np.asarray(sol.v)


@pytest.mark.parametrize(
    "which, integrator",
    [
        ("double_pendulum", "gen_alpha"),
        pytest.param("double_pendulum", "rkmk", marks=pytest.mark.slow),
        pytest.param("slider_crank", "gen_alpha", marks=pytest.mark.slow),
        pytest.param("slider_crank", "rkmk", marks=pytest.mark.slow),
    ],
)
def test_simulate_small_equals_lapack(which, integrator):
    model = getattr(mbd.models, which)()
    r_d, v_d = _run(model, integrator, "dense", 20)
    r_s, v_s = _run(model, integrator, "small", 20)
    # both shared with the -m slow cases (not measured), whose Newton iterates may stop
    # elsewhere within tol (1.1e-16 and 1.2e-16 of the largest value here)
    np.testing.assert_allclose(r_s, r_d, rtol=0, atol=1e-12 * max(1.0, np.abs(r_d).max()))
    np.testing.assert_allclose(v_s, v_d, rtol=0, atol=1e-11 * max(1.0, np.abs(v_d).max()))


@pytest.mark.slow
def test_simulate_gradient_small_path_central_differences():
    """d(loss)/d(mass) of a short double-pendulum run with linear_solver="small" against
    central differences of the same run."""
    model = mbd.models.double_pendulum()

    def loss(mass2):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass2))
        sol = mbd.simulate(m, formulation="rA", t_end=0.02, h=1e-3, linear_solver="small")
        return jnp.sum(sol.r[:, 1] ** 2)

    # fourth-order central differences: truncation ~eps^4, and the run's round-off
    # (~1e-14 of the loss) over eps stays below 1e-6 of the derivative; a second-order
    # stencil at eps = 1e-5 is at that floor (7e-6 relative on an H100)
    p, eps = float(model.mass[1]), 1e-3
    grad = mbd.jit(jax.grad(loss))(p)
    fd = (8 * (loss(p + eps) - loss(p - eps)) - (loss(p + 2 * eps) - loss(p - 2 * eps))) / (
        12 * eps
    )
    assert abs(grad - fd) <= 1e-6 * abs(fd), (grad, fd)
