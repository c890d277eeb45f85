"""linear_solver="small_structured": the body-joint block elimination in elementwise
kernels (jaxmbd.linear.small_blocks) against LAPACK's dense solve on real Newton matrices,
its statuses, vmap, gradients, and the hoisting of the step that uses it."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compiled_runs
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.compiled import xla_flags as _xla_flags
from jaxmbd.formulations import get_formulation
from jaxmbd.integrators.base import Discretisation, step_system
from jaxmbd.linear import small
from jaxmbd.linear.graph import newton_layout
from jaxmbd.linear.structured import BlockMatrix, factor_values, solve_values
from jaxmbd.newton import (
    ILL_CONDITIONED,
    NONFINITE,
    SUCCESS,
    factor_matrix,
    lu_factors,
    lu_factors_solve,
    matrix_solve,
)
from jaxmbd.newton._linear import matrix_status as _matrix_status

MODELS = {
    "double_pendulum": mbd.models.double_pendulum,
    "slider_crank": mbd.models.slider_crank,  # a closed loop: a node of its own, fill
    "chain4": lambda: mbd.models.pendulum_chain(4),
}


def _relative(x, y):
    return float(np.linalg.norm(np.asarray(x) - np.asarray(y)) / np.linalg.norm(np.asarray(y)))


def _bound(J):
    """1e-12 relative, or what the condition allows (a solve errs by ~ cond eps).

    The condition's worst case: these solves land 1e-4 to 1e-2 of it (a tighter floor
    would fail the seed-2 matrix, whose error does scale with its condition)."""
    return 1e-12 * max(1.0, np.linalg.cond(J) / 1e2)


def _step_matrices(model, *, stabilised, seed=7):
    """(dense Newton matrix, its block matrix for "small_structured") of one rA implicit
    step at a perturbed state: the matrices the Newton loop factors."""
    form = get_formulation("rA")
    rng = np.random.default_rng(seed)
    q = form.from_body_state(model.r0, model.A0, model.rdot0, model.omega0, 0 * model.r0,
                             0 * model.r0)[0]  # fmt: skip
    nb, m = model.nb, model.nc
    q = form.retract(q, jnp.asarray(0.05 * rng.normal(size=6 * nb)))
    disc = Discretisation(jnp.asarray(0.01 * rng.normal(size=6 * nb)), jnp.asarray(1e-4),
                          jnp.asarray(rng.normal(size=(nb, 6))), jnp.asarray(1e-2))  # fmt: skip
    x = jnp.asarray(rng.normal(size=6 * nb + (2 * m if stabilised else m)))

    @jax.jit
    def both(q, disc, x):
        dense = step_system(model, form, q, disc, 0.3, stabilised=stabilised).jacobian(x)
        with small.prefer(math.inf):
            blocks = step_system(
                model, form, q, disc, 0.3, stabilised=stabilised, linear_solver="small_structured"
            ).jacobian(x)
        return dense, blocks

    dense, blocks = both(q, disc, x)
    return np.asarray(dense), blocks


def _newton_solves(blocks, rhs, w, allowed):
    """What the Newton loop and the implicit gradients do with the block matrix, traced
    in a hoistable step: the equilibrated factors and their solve, the plain factors and
    their solve and transposed solve, with the statuses."""
    with small.prefer(math.inf):
        matrix = factor_matrix(blocks, w, allowed)
        plain = lu_factors(blocks)
        return (matrix_solve(matrix, rhs), lu_factors_solve(plain, rhs),
                lu_factors_solve(plain, rhs, transpose=True), _matrix_status(matrix))  # fmt: skip


REAL = [("double_pendulum", True), ("slider_crank", True)]
REAL += [pytest.param(*c, marks=pytest.mark.slow) for c in [("double_pendulum", False),
         ("slider_crank", False), ("chain4", False), ("chain4", True)]]  # fmt: skip


@pytest.mark.parametrize("name,stabilised", REAL)
def test_real_newton_matrices_equal_lapack(name, stabilised):
    """The rA step's Newton matrix (block-assembled; stabilised with the auxiliary
    z = G_n^T mu), solved by the elementwise block elimination, equals LAPACK's dense
    solve to 1e-12 relative, transposed too; and the program holds no custom call, dot
    or scatter."""
    dense, blocks = _step_matrices(MODELS[name](), stabilised=stabilised)
    n = dense.shape[0]
    rng = np.random.default_rng(1)
    rhs = jnp.asarray(rng.normal(size=n))
    w = jnp.asarray(np.abs(rng.normal(size=n)) + 0.5)
    allowed = 1e-10 * w
    solve = jax.jit(_newton_solves)
    x, x_plain, x_t, status = solve(blocks, rhs, w, allowed)
    hlo = solve.lower(blocks, rhs, w, allowed).compile().as_text()
    assert "custom-call" not in hlo and " dot(" not in hlo and " scatter(" not in hlo
    assert int(status) == SUCCESS
    bound = _bound(dense)  # the condition's worst case (see _bound)
    assert _relative(x, np.linalg.solve(dense, rhs)) < bound
    assert _relative(x_plain, np.linalg.solve(dense, rhs)) < bound
    assert _relative(x_t, np.linalg.solve(dense.T, rhs)) < bound


def _pattern(structure):
    """Where the structure's blocks may be nonzero (unfilled), as a dense mask."""
    n = structure.n
    mask = np.zeros((n, n), bool)
    for k in range(structure.num_nodes):
        for j in set(structure.adjacency[k]) | {k}:
            mask[np.ix_(structure.nodes[k], structure.nodes[j])] = True
    return mask


def _kkt(model, rng, *, cond_rows=None):
    """A random matrix with the pattern of the model's index-3 Newton matrix (zero
    multiplier block; every node's own diagonal dominant), and a right-hand side.
    ``cond_rows``: the second constraint row becomes the first plus a random perturbation
    of that relative size (0: exactly dependent, a singular matrix)."""
    st = newton_layout(model, tangent_size=6).structure
    n, m0 = st.n, 6 * model.nb
    mask = _pattern(st)
    J = rng.normal(size=(n, n)) * mask
    J[m0:, m0:] = 0.0
    J[np.arange(m0), np.arange(m0)] += 4.0 * np.sqrt(st.b)
    if cond_rows is not None:  # rows m0, m0 + 1: the same joint, the same node
        noise = rng.normal(size=n) * mask[m0]
        J[m0 + 1] = J[m0] + cond_rows * np.abs(J[m0]).max() * noise
    return st, J, rng.normal(size=n)


def _factor_and_solve(st, J, rhs):
    vals, dinv, pmin, pmax = factor_values(st, st.gather(J))
    return solve_values(st, vals, dinv, rhs), pmin / pmax


_elementwise = jax.jit(
    lambda st, J, rhs: _in_small(lambda: _factor_and_solve(st, J, rhs)), static_argnums=0
)
_lapack = jax.jit(_factor_and_solve, static_argnums=0)


def _in_small(fn):
    with small.prefer(math.inf):
        return fn()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_and_ill_conditioned_equal_lapack(seed):
    """Random matrices on the slider crank's Newton pattern, well conditioned and with
    two constraint rows dependent to 1e-9: the solve equals LAPACK's dense solve to
    1e-12 (or cond * 1e-14) relative, and the pivot ratio equals the LAPACK block
    elimination's."""
    model = MODELS["slider_crank"]()
    for cond_rows in (None, 1e-9):
        st, J, rhs = _kkt(model, np.random.default_rng(seed), cond_rows=cond_rows)
        x, rcond = _elementwise(st, jnp.asarray(J), jnp.asarray(rhs))
        _, rcond_lapack = _lapack(st, jnp.asarray(J), jnp.asarray(rhs))
        assert _relative(x, np.linalg.solve(J, rhs)) < _bound(J)  # the condition's worst case
        # the smallest pivot carries round-off times the condition (1e-9 dependent: ~1e-8)
        np.testing.assert_allclose(float(rcond), float(rcond_lapack), rtol=1e-7)


@pytest.mark.parametrize(
    "cond_rows,expected", [(0.0, NONFINITE), (1e-15, ILL_CONDITIONED), (None, SUCCESS)]
)
def test_statuses(cond_rows, expected):
    """An exactly singular Newton matrix (two equal constraint rows) ends NONFINITE, a
    near-singular one ILL_CONDITIONED, a regular one SUCCESS: the Newton loop's status of
    the equilibrated block factors, as with the LAPACK block elimination."""
    st, J, rhs = _kkt(MODELS["double_pendulum"](), np.random.default_rng(5), cond_rows=cond_rows)
    blocks = BlockMatrix(st.gather(jnp.asarray(J)), st, st.n)
    w = jnp.ones(st.n)

    @jax.jit
    def statuses(blocks):
        lapack = _matrix_status(factor_matrix(blocks, w, 1e-10 * w))
        with small.prefer(math.inf):
            elementwise = _matrix_status(factor_matrix(blocks, w, 1e-10 * w))
        return lapack, elementwise

    lapack, elementwise = statuses(blocks)
    assert int(elementwise) == int(lapack)
    # an exact zero pivot (NONFINITE) or round-off above it (ILL_CONDITIONED): both stop
    assert int(elementwise) in ((NONFINITE, ILL_CONDITIONED) if cond_rows == 0 else (expected,))


def test_vmap():
    """vmap of the factorisation and solve: each member equals its own dense solve."""
    model = MODELS["chain4"]()
    cases = [_kkt(model, np.random.default_rng(k)) for k in range(3)]
    st = cases[0][0]
    J = jnp.asarray(np.stack([c[1] for c in cases]))
    rhs = jnp.asarray(np.stack([c[2] for c in cases]))
    x, _ = jax.jit(jax.vmap(lambda a, b: _in_small(lambda: _factor_and_solve(st, a, b))))(J, rhs)
    for k, (_, Jk, bk) in enumerate(cases):
        assert _relative(x[k], np.linalg.solve(Jk, bk)) < _bound(Jk)  # the condition's worst case


@pytest.fixture(scope="module")
def pendulum_runs():
    """A 6-step double-pendulum run (gen_alpha, stabilised, reused Newton matrix) with
    "small_structured" and "dense": (compiled HLO text, solution) per solver."""
    return compiled_runs(mbd.models.double_pendulum(), ("small_structured", "dense"), t_end=6e-3)


def test_step_loop_is_hoisted_and_equals_dense(pendulum_runs):
    """The time-stepping loop with the elementwise block elimination compiles to one
    native call (structure from the compiled HLO, never time), and the run equals the
    LAPACK one."""
    hlo, sol = pendulum_runs["small_structured"]
    _, dense = pendulum_runs["dense"]
    if jax.default_backend() == "cpu":
        assert _xla_flags.loop_hoisted(hlo, 6)
    assert int(jnp.max(sol.status)) == SUCCESS
    np.testing.assert_allclose(sol.r, dense.r, rtol=0, atol=ROUND_OFF * np.abs(dense.r).max())
    np.testing.assert_allclose(sol.v, dense.v, rtol=0, atol=ROUND_OFF * np.abs(dense.v).max())
    np.testing.assert_allclose(sol.lam, dense.lam, rtol=0, atol=2e-14 * np.abs(dense.lam).max())


def test_solve_gradient_central_differences():
    """d/dp of x(p) = A(p)^{-1} b(p) by the implicit rule of the Newton roots (a
    custom_linear_solve whose solves are the block factors' and their transpose, as
    newton.implicit_root) with the elementwise kernels, against central differences."""
    st, J0, b0 = _kkt(MODELS["double_pendulum"](), np.random.default_rng(11))
    J1 = np.random.default_rng(12).normal(size=J0.shape) * _pattern(st)
    J1[6 * 2 :, 6 * 2 :] = 0.0

    def f(p):
        with small.prefer(math.inf):
            matrix = BlockMatrix(st.gather(jnp.asarray(J0) + p * jnp.asarray(J1)), st, st.n)
            factors = lu_factors(jax.lax.stop_gradient(matrix))
            x = jax.lax.custom_linear_solve(
                lambda y: st.matvec(matrix.values, y),
                jnp.asarray(b0) * (1.0 + p**2),
                solve=lambda _, b: lu_factors_solve(factors, b),
                transpose_solve=lambda _, b: lu_factors_solve(factors, b, transpose=True),
            )
        return jnp.sum(jnp.sin(x))

    p, eps = 0.3, 1e-6
    value_and_grad = jax.jit(jax.value_and_grad(f))
    fd = (value_and_grad(p + eps)[0] - value_and_grad(p - eps)[0]) / (2 * eps)
    grad = value_and_grad(p)[1]
    assert abs(grad - fd) <= 1e-7 * max(1.0, abs(fd))


@pytest.mark.slow
def test_simulate_gradient_equals_dense_and_central_differences():
    """d(loss)/d(mass) through a 20-step run with "small_structured" (implicit-function
    tangents through the block factors) equals the LAPACK run's gradient, and central
    differences of the same run."""
    model = mbd.models.double_pendulum()

    def loss(mass2, solver):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass2))
        sol = mbd.simulate(m, formulation="rA", t_end=0.02, h=1e-3, linear_solver=solver)
        return jnp.sum(sol.r[:, 1] ** 2)

    p, eps = float(model.mass[1]), 1e-5
    value_and_grad = mbd.jit(jax.value_and_grad(loss))  # the solver name: static
    _, grad = value_and_grad(p, "small_structured")
    _, grad_dense = value_and_grad(p, "dense")
    fd = (value_and_grad(p + eps, "small_structured")[0]
          - value_and_grad(p - eps, "small_structured")[0]) / (2 * eps)  # fmt: skip
    assert abs(float(grad) - float(grad_dense)) <= 1e-8 * abs(float(grad_dense))
    # the differences carry the runs' Newton tolerance (1e-9 relative at h = 1e-3): measured
    # 6e-5 relative here, where the gradient itself equals the dense path's to 1e-8
    assert abs(float(grad) - float(fd)) <= 3e-4 * abs(float(fd))
