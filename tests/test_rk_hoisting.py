"""rk's time step as one native loop on the CPU (issue 38 item 3): with its default
``linear_solver="auto"`` ("schur" on the CPU) the rp and re steps hold no ``dot`` and no
LAPACK call (the formulations' products are elementwise, jaxmbd.compiled.small; ``dense.solve``
uses the elementwise kernels in such a step), so XLA hoists the time loop; with "dense"
it cannot. rp's gen_alpha step too, whose "auto" is now "small" (G^T lam unrolled,
:func:`jaxmbd.linear.small.weighted_row_sum`, and ``ep_to_A``'s e.e: XLA matched a summed
product with the Newton matrix's one-hot tangents into a dot fusion). Structure from the
compiled HLO, never time; the trajectories equal LAPACK's. rk on rotmat (two-step multipliers,
eq. 25), whose "auto" is "small" for its joint system W: its 3x3 products elementwise,
G P G^T and G^T lam summed unrolled."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.compiled import xla_flags as _xla_flags
from jaxmbd.linear import dense, small

STEPS = 4


@pytest.fixture(scope="module")
def rk_runs():
    """{(formulation, integrator, solver): (compiled HLO text, Solution)} of a 4-step
    double-pendulum run (rk: RK4, the formulation's default multipliers)."""
    model = mbd.models.double_pendulum()
    out = {}
    cases = [(f, "rk", s) for f in ("rp", "re", "rotmat") for s in ("auto", "dense")]
    cases += [("rp", "gen_alpha", "auto"), ("rp", "gen_alpha", "dense")]
    for formulation, integrator, solver in cases:
        run = jax.jit(
            lambda m, f=formulation, i=integrator, s=solver: mbd.simulate(
                m, formulation=f, integrator=i, t_end=STEPS * 1e-3, h=1e-3,
                linear_solver=s, throw=False,
            )
        )  # fmt: skip
        compiled = run.lower(model).compile()
        out[formulation, integrator, solver] = (compiled.as_text(), compiled(model))
    return out


@pytest.mark.parametrize(
    "formulation, integrator, solver",
    [
        ("rp", "rk", "auto"),
        ("re", "rk", "auto"),
        ("rotmat", "rk", "auto"),
        ("rp", "gen_alpha", "auto"),
    ],
)
def test_step_is_hoisted_and_equals_lapack(rk_runs, formulation, integrator, solver):
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU backend's")
    hlo_auto, sol_auto = rk_runs[formulation, integrator, solver]
    hlo_dense, sol_dense = rk_runs[formulation, integrator, "dense"]
    assert _xla_flags.loop_hoisted(hlo_auto, STEPS)
    assert not _xla_flags.loop_hoisted(hlo_dense, STEPS)
    for key in ("r", "A"):
        want = np.asarray(getattr(sol_dense, key))
        np.testing.assert_allclose(
            getattr(sol_auto, key), want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
        )
    lam = np.asarray(sol_dense.lam)
    np.testing.assert_allclose(sol_auto.lam, lam, rtol=0, atol=1e-12 * np.abs(lam).max())
    np.testing.assert_array_equal(sol_auto.status, sol_dense.status)
    assert int(jnp.max(sol_auto.status)) == 0
    assert not np.allclose(sol_auto.r[0], sol_auto.r[-1])  # it moved


def test_dense_solve_in_elementwise_kernels_equals_lapack_with_gradient():
    """``dense.solve`` where a step prefers the elementwise kernels (re's rate from omega):
    the same solution and the same implicit derivative as with LAPACK."""
    rng = np.random.default_rng(7)
    a0 = jnp.asarray(rng.normal(size=(3, 3)) + 3.0 * np.eye(3))
    a1 = jnp.asarray(rng.normal(size=(3, 3)))
    b = jnp.asarray(rng.normal(size=3))

    def f(p):
        return jnp.sum(jnp.sin(dense.solve(a0 + p * a1, b * (1.0 + p**2))))

    def elementwise(p):
        with small.prefer(math.inf):
            return f(p)

    np.testing.assert_allclose(elementwise(0.3), f(0.3), rtol=ROUND_OFF)
    eps = 1e-6
    fd = (f(0.3 + eps) - f(0.3 - eps)) / (2 * eps)
    np.testing.assert_allclose(jax.grad(elementwise)(0.3), jax.grad(f)(0.3), rtol=ROUND_OFF)
    assert abs(jax.grad(elementwise)(0.3) - fd) <= 5e-10 * max(1.0, abs(fd))
    with small.prefer(math.inf):
        text = jax.jit(lambda p: dense.solve(a0 + p * a1, b)).lower(0.3).as_text()
    assert "lapack" not in text and "dot_general" not in text


@pytest.mark.slow  # ~60 CPU-s of compilation; the double pendulum's case above is the default
@pytest.mark.xfail(
    strict=True,
    reason="2026-12-01: the slider crank's 4-step rp loop compiles but no "
    "xla_cpu_small_call holds it (10 small calls in the program; the double pendulum's "
    "loop is hoisted)",
)
def test_slider_crank_rp_step_is_hoisted():
    """The slider crank's rp step: hoisted only since ep_to_A's e.e is unrolled (its
    second derivative in the Newton matrix became a dot fusion)."""
    model = mbd.models.slider_crank()
    run = jax.jit(
        lambda m: mbd.simulate(m, formulation="rp", t_end=STEPS * 1e-3, h=1e-3, throw=False)
    )
    compiled = run.lower(model).compile()
    assert _xla_flags.loop_hoisted(compiled.as_text(), STEPS)
    assert int(jnp.max(compiled(model).status)) == 0
