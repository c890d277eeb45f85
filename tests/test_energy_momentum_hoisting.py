"""energy_momentum's time step as one native loop on the CPU (issue 38): with the elementwise
kernels of :mod:`jaxmbd.linear.small` (``linear_solver="small"``; "auto" up to
:data:`~jaxmbd.integrators.energy_momentum.AUTO_SMALL_MAX` unknowns) the director step holds
no ``dot``, no LAPACK call and no YNNPACK reduce, so XLA hoists the time loop; with "dense"
(LAPACK) it cannot. Structure from the compiled HLO, never time; the trajectories and
statuses equal LAPACK's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.compiled import xla_flags as _xla_flags
from jaxmbd.linear import small
from jaxmbd.newton import SUCCESS, solve_with_condition

STEPS = 4
H = 1e-3


def _compiled(model, solver):
    run = jax.jit(
        lambda m: mbd.simulate(
            m, formulation="director", integrator="energy_momentum", t_end=STEPS * H,
            h=H, linear_solver=solver, throw=False,
        )
    )  # fmt: skip
    compiled = run.lower(model).compile()
    return compiled.as_text(), compiled(model)


@pytest.fixture(scope="module")
def em_runs():
    """{(model, solver): (compiled HLO text, Solution)}: the double pendulum (46 Newton
    unknowns: "auto" is "small") and the slider crank (72: its row maxima were a YNNPACK
    reduce-window fusion until taken unrolled)."""
    out = {}
    models = {"double_pendulum": ("auto", "dense"), "slider_crank": ("small", "dense")}
    for name, solvers in models.items():
        model = getattr(mbd.models, name)()
        for solver in solvers:
            out[name, solver] = _compiled(model, solver)
    return out


@pytest.mark.parametrize(
    "name, solver", [("double_pendulum", "auto"), ("slider_crank", "small")]
)  # fmt: skip
def test_step_is_hoisted_and_equals_lapack(em_runs, name, solver):
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU backend's")
    hlo_small, sol_small = em_runs[name, solver]
    hlo_dense, sol_dense = em_runs[name, "dense"]
    assert _xla_flags.loop_hoisted(hlo_small, STEPS)
    assert not _xla_flags.loop_hoisted(hlo_dense, STEPS)
    # compared as the Newton unknowns (x1, lam_hat) the two solves round differently, to
    # round-off of their scale (the direction cosines: 1): the step's velocities are
    # 2/h (x1 - x0) - v0 and its multipliers 2/h^2 lam_hat, so h/2 v and h^2/2 lam
    scale = ROUND_OFF * max(1.0, np.abs(np.asarray(sol_dense.r)).max())
    for key, factor in (("r", 1.0), ("A", 1.0), ("rdot", H / 2), ("omega", H / 2),
                        ("lam", H**2 / 2)):  # fmt: skip
        want = factor * np.asarray(getattr(sol_dense, key))
        np.testing.assert_allclose(factor * np.asarray(getattr(sol_small, key)), want,
                                   rtol=0, atol=scale, err_msg=key)  # fmt: skip
    np.testing.assert_array_equal(sol_small.status, sol_dense.status)
    np.testing.assert_array_equal(sol_small.status, SUCCESS)
    np.testing.assert_array_equal(sol_small.iterations, sol_dense.iterations)


def test_small_solve_equals_solve_with_condition():
    """The Newton solve of a hoistable step (solve_with_condition in the elementwise
    kernels, its row maxima unrolled) against LAPACK's: x and status (a well-conditioned,
    a near-singular and a singular matrix)."""
    rng = np.random.default_rng(0)
    well = rng.standard_normal((9, 9)) + 3.0 * np.eye(9)
    near = well.copy()
    near[4] = near[3] + 1e-15 * near[2]
    singular = well.copy()
    singular[:, 5] = 0.0
    rhs = jnp.asarray(rng.standard_normal(9))
    for matrix in (well, near, singular):
        expected, expected_status = solve_with_condition(jnp.asarray(matrix), rhs)
        with small.prefer(np.inf):
            x, status = solve_with_condition(jnp.asarray(matrix), rhs)
        assert int(status) == int(expected_status)
        if int(status) == SUCCESS:
            np.testing.assert_allclose(x, expected, rtol=0, atol=3e-13)
