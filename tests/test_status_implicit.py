"""The implicit integrators driven into a singular configuration mid-run (issue 33, item 1):
the step at the singularity reports ILL_CONDITIONED or NONFINITE, never SUCCESS, every
step before it succeeds, and ``throw=True`` raises a SolverError naming the failure."""

import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.newton import ILL_CONDITIONED, NONFINITE, SUCCESS

LENGTH = 2.0  # m, the rod
START = 1.5  # rad, the rod's initial angle from +y about the pivot's x axis
# rad/s: the rod reaches +y (angle 0) at t = START / RATE = 0.1 s. Fast enough that the step
# before (angle RATE h = 0.015 rad) is well conditioned: at 3 rad/s (0.003 rad) that step's
# Newton solve was at the edge of round-off and ended MAX_ITERATIONS on CI's CPU only.
RATE = 15.0
SINGULAR_STEP = 100  # at h = 1e-3


def lifted_pendulum():
    """A rod on a revolute joint at the origin (axis x) whose tip height y is driven,
    y(t) = L cos(START - RATE t): a 0-DOF mechanism, regular while the rod is inclined.
    At t = 0.1 s the rod points straight up (+y), where y is extremal in the joint angle:
    the driver's row of the constraint Jacobian lies in the span of the revolute's rows
    (dy/dangle = -L sin(angle) = 0), so the Newton matrix is singular there, as at a
    slider crank's dead point."""
    b = mbd.ModelBuilder("lifted pendulum")
    along = np.array([0.0, np.cos(START), np.sin(START)])
    normal = np.array([0.0, -np.sin(START), np.cos(START)])
    b.add_body(
        "rod", mass=1.0, inertia=[1e-3, 1 / 3, 1 / 3], r=0.5 * LENGTH * along, axes=(along, normal)
    )
    b.revolute("pivot", body_i="ground", body_j="rod", point=[0, 0, 0], axis=[1, 0, 0])
    b.add_cd(
        "lift",
        c=[0, 1, 0],
        body_i="ground",
        s_bar_p_i=[0, 0, 0],
        body_j="rod",
        s_bar_q_j=[0.5 * LENGTH, 0, 0],
        f=f"{LENGTH}*cos({START} - {RATE}*t)",
    )
    return b.build()


MESSAGES = {
    ILL_CONDITIONED: "near-singular iteration matrix",
    NONFINITE: "singular iteration matrix or non-finite residual",
}


@pytest.mark.parametrize("newton", ["reuse", "full"])
@pytest.mark.parametrize("integrator", ["backward_euler", "gen_alpha"])
def test_singular_configuration_mid_run_is_reported(integrator, newton):
    model = lifted_pendulum()
    options = dict(formulation="rA", integrator=integrator, newton=newton, t_end=0.12, h=1e-3)
    sol = mbd.simulate(model, throw=False, **options)
    status = np.asarray(sol.status)
    np.testing.assert_array_equal(status[:SINGULAR_STEP], SUCCESS)
    code = int(status[SINGULAR_STEP])
    assert code in MESSAGES, f"step {SINGULAR_STEP}: status {code}"
    assert int(sol.failed_step) == SINGULAR_STEP
    assert sol.result != mbd.RESULTS.successful
    with pytest.raises(mbd.SolverError, match=MESSAGES[code]) as raised:
        mbd.simulate(model, throw=True, **options)
    assert f"step {SINGULAR_STEP}" in str(raised.value)
