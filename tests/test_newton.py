"""Honest Newton convergence (issue 10, item 2): a relative tolerance in scaled norms, a
residual test beside the step test (paper eq. 46), verified steps with a kept matrix, and
near-singular matrices reported as a status. Each test failed on main before the change
(08e0bb0): the solvers had no scaled tests, no residual test and no condition estimate."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.newton import (
    ILL_CONDITIONED,
    SUCCESS,
    FullNewton,
    ReusedNewton,
    factor_matrix,
    group_scale,
    newton_iterate,
    newton_iterate_reusing,
)


def _mixed_units(unit_x, unit_f):
    """Two unknowns in very different units (a position in m or um, a force in N or MN):
    the same physics expressed with x = unit_x * x_si and rows F = unit_f * F_si."""
    ux, uf = jnp.asarray(unit_x), jnp.asarray(unit_f)

    def residual(x):
        p, f = x / ux  # back to SI: p ~ 2e-3 m, f ~ 3e4 N
        return uf * jnp.array([p**3 + 1e-3 * p - 1e-8 - 2e-6 * (f / 3e4), 1e-4 * f - 3.0 + p])

    return residual, jax.jacfwd(residual)


def test_tolerance_is_relative_and_unit_free():
    """The same problem in other units (um and MN, rows rescaled) converges in the same
    iterations to the same relative accuracy; main had only an absolute step norm."""

    def scale(x):
        return group_scale(x, np.array([0, 1]), [0.0, 0.0])

    runs = []
    for units in (((1.0, 1.0), (1.0, 1.0)), ((1e6, 1e-6), (1e3, 1e-3))):
        residual, jacobian = _mixed_units(*units)
        ux = jnp.asarray(units[0])
        x0 = ux * jnp.array([1e-3, 2e4])
        x, info = newton_iterate(
            lambda x, r=residual, j=jacobian: (r(x), j(x)), lambda x, d: x + d, x0,
            tol=1e-13, max_iter=40, scale=scale,
        )  # fmt: skip
        assert int(info.status) == SUCCESS
        runs.append((np.asarray(x / ux), int(info.iterations)))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=ROUND_OFF)
    assert runs[0][1] == runs[1][1]
    # the root itself, from an independent scalar solve of the SI problem
    p = runs[0][0][0]
    f = (3.0 - p) / 1e-4
    assert abs(p**3 + 1e-3 * p - 1e-8 - 2e-6 * (f / 3e4)) < ROUND_OFF * 1e-8  # terms of 1e-8


def test_kept_matrix_never_accepts_an_unverified_step():
    """A stored matrix 100 times too large, claimed to contract well (rate 0.1 from an
    earlier solve): its first step is 100 times too short yet below the step tolerance.
    It must not be accepted: the residual test fails, the contraction is measured (~0.99),
    the matrix is refreshed and the root is exact."""

    def residual(x):
        return jnp.array([2.0 * (x[0] - 1.0) + 0.1 * (x[0] - 1.0) ** 2, 3.0 * (x[1] + 1.0)])

    jacobian = jax.jacfwd(residual)
    x0 = jnp.array([1.0 + 5e-11, -1.0 - 5e-11])
    w = jnp.ones(2)
    stale = factor_matrix(100.0 * jacobian(x0), w, 1e-10 * w)
    x, info, _, refreshes, _ = newton_iterate_reusing(
        residual, jacobian, x0, stale, tol=1e-10, max_iter=20, rate=0.1
    )
    assert int(info.status) == SUCCESS and int(refreshes) >= 1
    np.testing.assert_allclose(np.asarray(x), [1.0, -1.0], rtol=0, atol=1e-15)  # below ROUND_OFF


def test_near_singular_matrix_is_reported():
    """[[1, 1], [1, 1 + 1e-14]]: LU gives a huge but finite step that main accepted as
    converged (status SUCCESS); now ILL_CONDITIONED, for every Newton variant."""
    A = jnp.array([[1.0, 1.0], [1.0, 1.0 + 1e-14]])
    b = jnp.array([1.0, 2.0])

    def residual(x):
        return A @ x - b

    x0 = jnp.zeros(2)
    _, info = newton_iterate(lambda x: (residual(x), A), lambda x, d: x + d, x0, tol=1e-10,
                             max_iter=5)  # fmt: skip
    assert int(info.status) == ILL_CONDITIONED
    for solver in (FullNewton(), ReusedNewton()):
        _, info, _ = solver.solve(residual, lambda x: A, x0, solver.init(2), tol=1e-10)
        assert int(info.status) == ILL_CONDITIONED
    assert "near-singular" in mbd.newton.STATUS_MESSAGES[ILL_CONDITIONED]
    # a well-conditioned but badly scaled matrix is not flagged (rows are equilibrated)
    B = jnp.array([[1e9, 0.0], [0.0, 1e-9]])
    _, info = newton_iterate(lambda x: (B @ x - b, B), lambda x, d: x + d, x0, tol=1e-10,
                             max_iter=5)  # fmt: skip
    assert int(info.status) == SUCCESS


@pytest.mark.parametrize(
    ("formulation", "tol"), [pytest.param("re", 1e-8, marks=pytest.mark.slow), ("rA", 1e-9)]
)
def test_double_pendulum_converges_at_tight_tolerance(formulation, tol):
    """Regression: on main these raised SolverError "did not converge" (re: residual norm
    9.4e-10, a round-off floor of the unscaled absolute step norm; rA at tol = 1e-9)."""
    sol = mbd.simulate(
        mbd.models.double_pendulum(), formulation=formulation, t_end=0.008, h=1e-3, tol=tol
    )
    assert np.all(np.asarray(sol.status) == SUCCESS)
    assert np.all(np.asarray(sol.iterations)[1:] <= 4)


def test_chart_solve_takes_least_squares_only_where_allowed():
    """A singular matrix: refused with its condition status (NONFINITE: an exact zero
    pivot) unless the chart step-over allows the minimum-norm solution, which says so
    (``least_squares``, the loop then may accept a stagnated residual); a regular matrix:
    the LU solution either way, SUCCESS."""
    from jaxmbd.newton import NONFINITE, chart_solve, checked_solver

    singular = jnp.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    rhs = jnp.array([1.0, 2.0, 3.0])  # consistent
    refused = chart_solve(singular, rhs, least_squares=False)
    assert int(refused.status) == NONFINITE and not bool(refused.least_squares)
    stepped = chart_solve(singular, rhs, least_squares=jnp.asarray(True))
    assert int(stepped.status) == SUCCESS and bool(stepped.least_squares)
    np.testing.assert_allclose(stepped.x, [0.5, 0.5, 1.0], rtol=0, atol=ROUND_OFF)
    regular = singular.at[1, 1].set(3.0)
    for allow in (False, jnp.asarray(True)):
        solution = chart_solve(regular, rhs, least_squares=allow)
        assert int(solution.status) == SUCCESS and not bool(solution.least_squares)
        want = jnp.linalg.solve(regular, rhs)
        np.testing.assert_allclose(solution.x, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    solve, rcond = checked_solver(regular.T)
    want = jnp.linalg.solve(regular, rhs)
    np.testing.assert_allclose(solve(rhs, transpose=True), want, rtol=0,
                               atol=ROUND_OFF * np.abs(want).max())  # fmt: skip
    assert 0 < float(rcond) <= 1


def test_damped_newton_uses_the_scaled_tests():
    """DampedNewton (energy_momentum) accepted on an absolute correction norm: a root of
    magnitude 1e8 can never get a correction below 1e-12 in floating point, so it reported
    MAX_ITERATIONS (x^2 = 2e16 rounds F by ~4, so |delta| ~ 1e-8). With the scaled step
    and residual tests it converges; an iterate whose step passes but whose residual does
    not is not accepted."""
    from jaxmbd.integrators.energy_momentum import DampedNewton

    newton = DampedNewton(max_iter=60)
    x, info, _ = newton.solve(lambda x: x**2 - 2e16, None, jnp.array([3e8]), None, tol=1e-12)
    assert int(info.status) == mbd.SUCCESS
    np.testing.assert_allclose(x, [np.sqrt(2.0) * 1e8], rtol=ROUND_OFF)
    # F = 1e20 (x - 1) near x = 1: one exact Newton step, then the residual test decides
    x, info, _ = newton.solve(lambda x: 1e20 * (x - 1.0), None, jnp.array([2.0]), None, tol=1e-12)
    assert int(info.status) == mbd.SUCCESS and abs(float(x[0]) - 1.0) <= 1e-15


def test_contraction_estimate_stops_one_iteration_earlier():
    """A linear problem with a kept matrix 1.1 J: every iteration contracts the error by
    theta = 0.1 / 1.1 exactly, so theta / (1 - theta) |delta_k| is the error after step k
    (Hairer & Wanner IV.8, eq. 8.10). The solve stops at the first iterate within tolerance
    (6 iterations from an error of 1e-4 at tol 1e-10; a bare step test needs 7), never
    refreshes, and the iterate it returns is within tolerance of the root."""
    J = jnp.array([[3.0, 1.0], [-1.0, 2.0]])
    root = jnp.array([1.0, -1.0])

    def residual(x):
        return J @ (x - root)

    w = jnp.ones(2)
    kept = factor_matrix(1.1 * J, w, 1e-10 * w)
    x0 = root + jnp.array([1e-4, 5e-5])
    x, info, _, refreshes, rate = newton_iterate_reusing(
        residual, lambda x: J, x0, kept, tol=1e-10, max_iter=20
    )
    assert int(info.status) == SUCCESS
    assert int(refreshes) == 0
    assert int(info.iterations) == 6
    np.testing.assert_allclose(float(rate), 0.1 / 1.1, rtol=1e-5)  # norms at two iterates
    assert float(jnp.max(jnp.abs(x - root))) <= 1e-10


@pytest.mark.parametrize("n", [3, 40])  # kept as an inverse / as LU factors (INVERSE_MAX)
@pytest.mark.parametrize(
    "stale_members",
    [
        (0, 3, 36),
        pytest.param((0, 3, 4, 9, 10, 17, 20, 28, 33, 35, 36), marks=pytest.mark.slow),
        tuple(range(37)),
    ],
    ids=["few", "many", "all"],
)
def test_batched_refresh_factors_only_stale_members(n, stale_members):
    """Under vmap the kept matrices of the stale members are refreshed, one member at a
    time by the unbatched kernels (37 members, 3, 11 or all stale): every stale member gets
    exactly its own new factors, every other member keeps its old ones untouched."""
    from jaxmbd.newton._loops import refresh_where as _refresh_where

    members = 37
    rng = np.random.default_rng(0)
    base = jnp.asarray(rng.normal(size=(n, n))) + 4.0 * jnp.eye(n)
    xs = jnp.asarray(rng.normal(size=(members, n)))
    stale = jnp.zeros(members, bool).at[np.array(stale_members)].set(True)
    w = jnp.ones(n)

    def factor(x):
        return factor_matrix(base + jnp.diag(x), w, 1e-10 * w)

    old = jax.vmap(lambda x: factor(x + 10.0))(xs)
    out = jax.jit(jax.vmap(lambda s, x, o: _refresh_where(s, x, o, factor)))(stale, xs, old)
    for k in range(members):
        want = factor(xs[k]) if bool(stale[k]) else jax.tree_util.tree_map(lambda a, k=k: a[k], old)
        got = jax.tree_util.tree_map(lambda a, k=k: a[k], out)
        for g, v in zip(got, want, strict=True):
            if bool(stale[k]):  # the refresh's kernels against the single call's: round-off
                scale = float(np.abs(np.asarray(v)).max(initial=0.0))
                np.testing.assert_allclose(
                    np.asarray(g), np.asarray(v), rtol=0, atol=ROUND_OFF * scale
                )
            else:  # kept: untouched
                np.testing.assert_array_equal(np.asarray(g), np.asarray(v))


def test_kept_matrix_accepts_the_current_iterate_without_another_residual():
    """The kept matrix 1.1 J contracts by theta = 1/11. At a loose tolerance the first
    iterate x1 already passes: the same matrix's correction at x1 measures theta, and
    |delta_2| / (1 - theta) bounds x1's error within tolerance, x1's residual passed, so x1
    is returned after one iteration and the residual at x1 + delta_2 is never evaluated:
    two residual evaluations (x0, x1) instead of three."""
    J = jnp.array([[3.0, 1.0], [-1.0, 2.0]])
    root = jnp.array([1.0, -1.0])
    calls = []

    def residual(x):
        jax.debug.callback(lambda: calls.append(1))
        return J @ (x - root)

    w = jnp.ones(2)
    kept = factor_matrix(1.1 * J, w, 1e-3 * w)
    x0 = root + jnp.array([1e-4, 5e-5])
    x, info, _, refreshes, _ = newton_iterate_reusing(
        residual, lambda x: J, x0, kept, tol=1e-3, max_iter=20
    )
    jax.effects_barrier()
    assert int(info.status) == SUCCESS and int(refreshes) == 0
    assert int(info.iterations) == 1 and len(calls) == 2
    x1 = x0 - jnp.linalg.solve(1.1 * J, J @ (x0 - root))  # the first iterate, returned
    np.testing.assert_allclose(np.asarray(x), np.asarray(x1), rtol=0, atol=1e-15)  # below ROUND_OFF


@pytest.mark.slow  # one more gen_alpha program per step size
def test_default_tolerance_scales_with_the_step():
    """The implicit integrators' default tol is 1e-3 h^2 within [1e-10, 1e-6]: a run with
    the default equals one with that tol given, and at h = 1e-2 it needs fewer iterations
    than the fixed 1e-10 of earlier versions, with positions within 1e-6 m of it. The run
    names formulation="rA": the default formulation is now "joint", whose implicit joint
    steppers keep their own fixed tol 1e-10 and record no iterations (there the default
    run equals the tol=1e-10 one exactly and differs from the tol=1e-7 one by 1.1e-8 m)."""
    from jaxmbd.integrators import default_tolerance

    assert float(default_tolerance(1e-2)) == pytest.approx(1e-7)
    assert float(default_tolerance(1e-3)) == pytest.approx(1e-9)
    assert float(default_tolerance(1e-4)) == pytest.approx(1e-10)
    assert float(default_tolerance(1.0)) == pytest.approx(1e-6)
    model = mbd.models.double_pendulum()
    run = functools.partial(
        mbd.simulate, model, formulation="rA", integrator="gen_alpha", t_end=0.3, h=1e-2
    )
    default, given, tight = run(), run(tol=float(default_tolerance(1e-2))), run(tol=1e-10)
    # two programs (tol computed inside from h, or given): the same iterations, and the
    # same positions up to the round-off of differently compiled arithmetic
    np.testing.assert_array_equal(np.asarray(default.iterations), np.asarray(given.iterations))
    np.testing.assert_allclose(np.asarray(default.r), np.asarray(given.r), rtol=0, atol=1e-14)
    assert np.mean(np.asarray(default.iterations)[1:]) < np.mean(np.asarray(tight.iterations)[1:])
    np.testing.assert_allclose(np.asarray(default.r), np.asarray(tight.r), rtol=0, atol=1e-6)


def test_xla_inverse_and_batched_lu_equal_lapack():
    """inverse_from_lu (the kept inverse, formed in XLA: block recursion for one matrix,
    substitution under vmap) and inverse_and_pivots (under vmap: member by member) equal
    numpy's inverse and LAPACK's pivots, and the batched LU (dense_lu under vmap) equals
    LAPACK's getrf member by member with the same pivots; a singular member alone has a
    zero pivot and a non-finite inverse."""
    from jaxmbd.linear.dense import dense_lu, inverse_and_pivots, inverse_from_lu

    rng = np.random.default_rng(3)
    stack = jnp.asarray(rng.normal(size=(5, 12, 12)))
    for n in (1, 5, 12, 32):  # block recursion: powers of two and padded sizes
        matrix = jnp.asarray(rng.normal(size=(n, n)))
        lu, _, permutation = jax.lax.linalg.lu(matrix)
        inverse = jax.jit(inverse_from_lu)(lu, permutation)
        want = np.linalg.inv(np.asarray(matrix))
        np.testing.assert_allclose(inverse, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # under vmap: row-by-row substitution, member by member the same inverse
    lus, _, permutations = jax.vmap(jax.lax.linalg.lu)(stack)
    inverses = jax.jit(jax.vmap(inverse_from_lu))(lus, permutations)
    for k in range(5):
        want = np.linalg.inv(np.asarray(stack[k]))
        np.testing.assert_allclose(inverses[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # the kept inverse and LU's pivots: LAPACK and block recursion, for one matrix and
    # member by member under vmap (a batch of one: the unbatched path)
    lapack_pivots = np.abs(np.diagonal(np.asarray(lus), axis1=-2, axis2=-1))
    for members in (stack, stack[:1]):
        inverses, pivots = jax.jit(jax.vmap(inverse_and_pivots))(members)
        for k in range(len(members)):
            want = np.linalg.inv(np.asarray(stack[k]))
            np.testing.assert_allclose(
                inverses[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
            )
            np.testing.assert_allclose(pivots[k], lapack_pivots[k], rtol=ROUND_OFF)
    one_inverse, one_pivots = jax.jit(inverse_and_pivots)(stack[3])
    want = np.linalg.inv(np.asarray(stack[3]))
    np.testing.assert_allclose(one_inverse, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    np.testing.assert_allclose(one_pivots, lapack_pivots[3], rtol=ROUND_OFF)
    singular = stack.at[2, :, 4].set(0.0)
    inverses, pivots = jax.jit(jax.vmap(inverse_and_pivots))(singular)
    assert np.nanmin(pivots[2]) == 0.0 and not np.all(np.isfinite(np.asarray(inverses[2])))
    assert np.all(np.isfinite(np.asarray(inverses)[[0, 1, 3, 4]]))
    lu, permutation = jax.jit(jax.vmap(dense_lu))(singular)
    for k in range(5):  # LAPACK's getrf member by member: the singular one has a zero pivot
        lapack_lu, _, lapack_permutation = jax.lax.linalg.lu(singular[k])
        # the singular member's factors agree up to its zero pivot (step 4): the rows that
        # later steps pivot are arbitrary after it (a GPU's batched getrf and its single
        # getrf swap them differently: seen on an H100); rows 0-4 are final before that
        rows = 5 if k == 2 else 12
        np.testing.assert_array_equal(permutation[k][:rows], lapack_permutation[:rows])
        np.testing.assert_allclose(
            lu[k][:rows], lapack_lu[:rows], rtol=0, atol=ROUND_OFF * np.abs(lapack_lu[:rows]).max()
        )
        assert (np.min(np.abs(np.diagonal(np.asarray(lu[k])))) == 0.0) == (k == 2)


def test_dense_solve_values_gradients_and_batches():
    """jaxmbd.linear.dense.solve (LU without jaxlib's batched getrf under vmap) equals numpy's
    solve, its reverse and forward derivatives equal jnp.linalg.solve's, and under vmap
    (LU member by member, substitution over the stack) it equals the loop of single
    solves; the differentiable LU's JVP equals jax.lax.linalg.lu's."""
    from jaxmbd.linear.dense import inverse, lu_factor, lu_solve_nondiff, solve

    rng = np.random.default_rng(7)
    a = jnp.asarray(rng.normal(size=(6, 6)))
    b = jnp.asarray(rng.normal(size=6))
    want = np.linalg.solve(a, b)
    np.testing.assert_allclose(solve(a, b), want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    want = np.linalg.solve(a, a.T)
    np.testing.assert_allclose(solve(a, a.T), want, rtol=0, atol=ROUND_OFF * np.abs(want).max())

    def loss(solver, a, b):
        return jnp.sum(jnp.sin(solver(a, b)))

    for argnum in (0, 1):
        ours = jax.grad(lambda *x: loss(solve, *x), argnum)(a, b)
        ref = jax.grad(lambda *x: loss(jnp.linalg.solve, *x), argnum)(a, b)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=ROUND_OFF * np.abs(ref).max())
    da = jnp.asarray(rng.normal(size=(6, 6)))
    (lu, _), (lu_dot, _) = jax.jvp(lu_factor, (a,), (da,))
    (lu_ref, _, _), (lu_dot_ref, _, _) = jax.jvp(jax.lax.linalg.lu, (a,), (da,))
    np.testing.assert_allclose(lu, lu_ref, rtol=0, atol=ROUND_OFF * np.abs(lu_ref).max())
    np.testing.assert_allclose(
        lu_dot, lu_dot_ref, rtol=0, atol=ROUND_OFF * np.abs(lu_dot_ref).max()
    )
    stack = jnp.asarray(rng.normal(size=(4, 6, 6)))
    rhs = jnp.asarray(rng.normal(size=(4, 6)))
    batched = jax.jit(jax.vmap(solve))(stack, rhs)
    for k in range(4):
        want = np.linalg.solve(stack[k], rhs[k])
        np.testing.assert_allclose(batched[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    grads = jax.vmap(jax.grad(lambda m, r: loss(solve, m, r)))(stack, rhs)
    for k in range(4):
        ref = jax.grad(lambda m, r: loss(jnp.linalg.solve, m, r))(stack[k], rhs[k])
        np.testing.assert_allclose(grads[k], ref, rtol=0, atol=2e-13 * np.abs(ref).max())
    # a stack: by member
    np.testing.assert_allclose(
        solve(stack, rhs), batched, rtol=0, atol=ROUND_OFF * np.abs(batched).max()
    )
    want = np.linalg.inv(np.asarray(stack))
    np.testing.assert_allclose(inverse(stack), want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # the Newton solve: LAPACK for one matrix, substitution loops under vmap (batched
    # matrices), both orientations; one matrix with batched right-hand sides
    lus, perms = jax.vmap(lu_factor)(stack)
    for transpose in (False, True):
        batched = jax.jit(
            jax.vmap(lambda a, p, r, t=transpose: lu_solve_nondiff(a, p, r, transpose=t))
        )(lus, perms, rhs)
        shared = jax.vmap(
            lambda r, t=transpose: lu_solve_nondiff(lus[0], perms[0], r, transpose=t)
        )(rhs)
        for k in range(4):
            m = np.asarray(stack[k]).T if transpose else np.asarray(stack[k])
            want = np.linalg.solve(m, rhs[k])
            np.testing.assert_allclose(
                batched[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
            )
            m0 = np.asarray(stack[0]).T if transpose else np.asarray(stack[0])
            want = np.linalg.solve(m0, rhs[k])
            np.testing.assert_allclose(shared[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max())


def test_solve_with_condition_reports_singular_and_near_singular_systems():
    """The shared conditioning test of every linear solve (issue 33, item 1): the solution
    with SUCCESS for a badly scaled but regular matrix (rows are equilibrated), NONFINITE
    for an exactly singular one, ILL_CONDITIONED for a pivot ratio below RCOND_MIN, one
    status per member of a stack, and gradients equal to the plain solve's."""
    from jaxmbd.newton import NONFINITE, solve_with_condition

    regular = jnp.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    regular = regular * jnp.array([[1e6], [1.0], [1e-6]])  # row scales: still regular
    rhs = jnp.array([1.0, 2.0, 3.0])
    x, status = solve_with_condition(regular, rhs)
    assert int(status) == SUCCESS
    np.testing.assert_allclose(x, jnp.linalg.solve(regular, rhs), rtol=ROUND_OFF)
    many, status = solve_with_condition(regular, jnp.eye(3))
    assert int(status) == SUCCESS
    # entry by entry (all nonzero): regular @ many sums terms of 1e12 whose round-off
    # alone is ~1e-4 (1e-5 seen on an H100), so the product is no test of the solve
    np.testing.assert_allclose(many, np.linalg.inv(np.asarray(regular)), rtol=ROUND_OFF)
    singular = regular.at[2].set(regular[1])
    near = jnp.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [1.0, 3.0, 1.0 + 1e-13]])
    _, status = solve_with_condition(singular, rhs)
    assert int(status) == NONFINITE
    _, status = solve_with_condition(near, rhs)
    assert int(status) == ILL_CONDITIONED
    _, statuses = solve_with_condition(jnp.stack([regular, singular, near]), jnp.stack([rhs] * 3))
    np.testing.assert_array_equal(statuses, [SUCCESS, NONFINITE, ILL_CONDITIONED])

    def loss(p, solve):
        return jnp.sum(jnp.sin(solve(regular * p[0] + jnp.diag(p), rhs * p[1])))

    p = jnp.array([1.3, 0.7, 2.0])
    got = jax.grad(loss)(p, lambda m, b: solve_with_condition(m, b)[0])
    want = jax.grad(loss)(p, jnp.linalg.solve)
    np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())


def test_attainable_floor_is_capped():
    """A = Q diag(1, 1e-5, 1e-9) Q^T: its pivot ratio (~1e-9) is above RCOND_MIN. The
    residual carries an error of 3e-15 that no correction removes (a pseudo-random
    cos(1e9 x), as round-off is, but the same on every machine: the solve's own round-off
    reached an exact zero residual on AVX-512 CPUs and on a GPU), so exact Newton
    corrections stagnate at about cond * 3e-15 ~ 1e-6 of x. Asked for tol = 1e-12 that
    accuracy is not attainable: the solve ends with MAX_ITERATIONS, where the former floor
    e / rcond (~7e-6 of x here) returned SUCCESS and the capped one (tol w + FLOOR_GAIN_MAX
    e, 7e-11 of x) does not. Asked for 1e-5 it converges."""
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    A = jnp.asarray(Q @ np.diag([1.0, 1e-5, 1e-9]) @ Q.T)
    root = jnp.array([0.7, -0.4, 0.9])
    b = A @ root

    def residual(x):
        return A @ x - b + 3e-15 * jnp.cos(1e9 * x + jnp.arange(3.0))

    def solve(tol, solver):
        return solver.solve(residual, lambda x: A, jnp.zeros(3), solver.init(3), tol=tol)[:2]

    for solver in (FullNewton(), ReusedNewton()):
        _, info = solve(1e-12, solver)
        assert int(info.status) == mbd.newton.MAX_ITERATIONS, type(solver).__name__
        x, info = solve(1e-5, solver)
        assert int(info.status) == SUCCESS, type(solver).__name__
        np.testing.assert_allclose(x, jnp.linalg.solve(A, b), rtol=0, atol=1e-5)


def test_residual_test_is_never_skipped_unless_least_squares():
    """A linear solve whose corrections are far too short (1e-20 F): every correction
    passes the step test, the residual never falls. The former loop took a residual that
    stopped halving after two passed steps as converged (SUCCESS at x0, not a root); now
    only a least-squares step-over (a LinearSolution that says so, which its caller
    verifies) may end on a stagnated residual."""
    from jaxmbd.newton import MAX_ITERATIONS, LinearSolution

    def residual_and_jacobian(x):
        return x - jnp.array([1.0, 2.0]), jnp.eye(2)

    def run(linear_solve):
        return newton_iterate(residual_and_jacobian, lambda x, d: x + d, jnp.zeros(2),
                              tol=1e-10, max_iter=8, linear_solve=linear_solve)  # fmt: skip

    _, info = run(lambda J, F: 1e-20 * F)
    assert int(info.status) == MAX_ITERATIONS
    _, info = run(lambda J, F: LinearSolution(1e-20 * F, SUCCESS, jnp.asarray(True)))
    assert int(info.status) == SUCCESS
    # a caller's solve reporting its conditioning ends the solve with that status
    _, info = run(lambda J, F: (F, jnp.asarray(ILL_CONDITIONED)))
    assert int(info.status) == ILL_CONDITIONED


def test_full_newton_accepts_on_its_simplified_correction():
    """A fresh matrix's correction at the new iterate (one more solve with its factors)
    estimates that iterate's error; where it passes, no second Jacobian is formed: a
    quadratic problem from a close guess converges in one iteration with the iterate's
    error within tolerance, and one residual that does not pass it takes another."""
    calls = []

    def jacobian(x):
        jax.debug.callback(lambda: calls.append(1))
        return jnp.diag(2.0 * x)

    def residual(x):
        return x**2 - jnp.array([4.0, 9.0])

    solver = FullNewton()
    x, info, _ = solver.solve(residual, jacobian, jnp.array([2.0 + 1e-7, 3.0 - 1e-7]), None,
                              tol=1e-10)  # fmt: skip
    jax.effects_barrier()
    assert int(info.status) == SUCCESS and int(info.iterations) == 1 and len(calls) == 1
    np.testing.assert_allclose(x, [2.0, 3.0], rtol=ROUND_OFF)
    calls.clear()
    x, info, _ = solver.solve(residual, jacobian, jnp.array([2.1, 2.9]), None, tol=1e-10)
    jax.effects_barrier()
    assert int(info.status) == SUCCESS and int(info.iterations) == len(calls) > 1
    # Newton's tolerance tol w (w = 3): the iterate may be off by that much
    np.testing.assert_allclose(x, [2.0, 3.0], rtol=0, atol=6e-10)


#: the double pendulum at tol = 1e-12 over 0.3 s: the default policy's run is shared by the
#: two tests below (its forward program compiles once)
TIGHT = dict(t_end=0.3, h=1e-3, tol=1e-12)


@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow)])
def test_every_policy_honours_tol(formulation):
    """Issue 33: at tol = 1e-12 the reused matrix ("reuse", the default) and the matrix
    frozen per step ("modified") give full Newton's trajectory to 1e-12 m (double pendulum,
    h = 1e-3; 0.3 s here). Over 0.5 s the reused matrix lay 3.3e-10 m (rA) and 8.6e-10 m
    (rp) away: it accepted iterates on a round-off floor inflated by 1 / rcond and on a
    contraction measured in a norm other than the step test's."""
    model = mbd.models.double_pendulum()
    run = functools.partial(mbd.simulate, model, formulation=formulation, **TIGHT)
    full = run(newton="full")
    for newton in ("reuse", "modified"):
        sol = run(newton=newton)
        # Newton's tolerance (tol = 1e-12): the policies' roots may differ by that much
        np.testing.assert_allclose(sol.r, full.r, rtol=0, atol=1e-12, err_msg=newton)


# rp with -m slow: the policy's gradient path is the formulation's implicit-function solve
# (rA here), rp's trajectory under the reused matrix is test_every_policy_honours_tol[rp]
@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow)])
def test_default_policy_gradients_match_central_differences(formulation):
    """The default policy's gradients (reused matrix; implicit-function theorem at each
    root) against Richardson-extrapolated central differences of the same loss, to 1e-7:
    rod 2's mass of the double pendulum, 0.3 s at h = 1e-3, tol = 1e-12. Its trajectory
    used to wander with the kept matrix's age (2.4e-6 (rA) and 6.5e-6 (rp) here)."""
    model = mbd.models.double_pendulum()

    def loss(p):
        heavier = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].multiply(p))
        sol = mbd.simulate(heavier, formulation=formulation, **TIGHT)
        return jnp.sum(sol.r[-1, 1]) + 1e-3 * jnp.sum(sol.lam[-1])

    gradient = float(mbd.jit(jax.grad(loss))(jnp.asarray(1.0)))
    value = loss  # simulate's own programs: those of test_every_policy_honours_tol's run

    def central(eps):
        return (float(value(jnp.asarray(1.0 + eps))) - float(value(jnp.asarray(1.0 - eps)))) / (
            2 * eps
        )

    eps = 1e-2  # truncation of the extrapolation O(eps^4); round-off / eps ~ 1e-12
    fd = (4 * central(eps / 2) - central(eps)) / 3
    # finite differences: Richardson truncation O(eps^4) (9e-11 here; rp with -m slow)
    assert abs(gradient - fd) <= 1e-7 * abs(fd), (gradient, fd)
