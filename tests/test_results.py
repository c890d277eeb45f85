"""Results and errors in the equinox/optimistix style (issue 10, item 5): a RESULTS enum per
run, ``throw=`` on the public analyses (``check=`` deprecated), a runtime error carrying
the RESULTS message under jit, and per-member reports of a batch."""

import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd._results import INVALID_PARAMETERS, RESULT_ITEMS, first_failed_step, result_from_code


def test_codes_follow_the_enum():
    """Solution.status codes are the RESULTS values (the Newton constants agree)."""
    codes = [
        mbd.SUCCESS,
        mbd.MAX_ITERATIONS,
        mbd.NONFINITE,
        mbd.ILL_CONDITIONED,
        mbd.newton.CHART_SINGULARITY,
        INVALID_PARAMETERS,
    ]
    assert [int(item._value) for item in RESULT_ITEMS] == codes
    assert result_from_code(mbd.NONFINITE) == mbd.RESULTS.nonfinite
    item, index = first_failed_step(jnp.array([0, 0, 3, 1]))
    assert item == mbd.RESULTS.ill_conditioned and int(index) == 2
    item, index = first_failed_step(jnp.zeros(4, int))
    assert item == mbd.RESULTS.successful and int(index) == -1


@pytest.fixture(scope="module")
def slider():
    """Kinematics that needs two Newton iterations per step: the slider crank at h = 0.01
    (the crank's pin rotation is solved exactly by one iteration, which verifies itself)."""
    return mbd.models.slider_crank()


def test_throw_false_returns_the_outcome(crank, slider):
    """max_iter=1 cannot converge after t = 0: throw=False returns the Solution with its
    result; throw=True (the default) raises SolverError naming step, time and residual."""
    sol = mbd.kinematics(slider, t_end=0.04, h=1e-2, max_iter=1, throw=False)
    assert sol.result == mbd.RESULTS.max_iterations
    assert int(sol.failed_step) == 1
    np.testing.assert_array_equal(np.asarray(sol.status), [0, 1, 1, 1, 1])
    with pytest.raises(mbd.SolverError, match=r"failed at step 1 \(t = 0.01 s\).*did not converge"):
        mbd.kinematics(slider, t_end=0.04, h=1e-2, max_iter=1)
    good = mbd.kinematics(crank, t_end=0.004, h=1e-3)
    assert good.result == mbd.RESULTS.successful and int(good.failed_step) == -1


def test_check_is_a_deprecated_alias(crank, slider):
    with pytest.warns(DeprecationWarning, match="use throw="):
        sol = mbd.kinematics(slider, t_end=0.04, h=1e-2, max_iter=1, check=False)
    assert sol.result == mbd.RESULTS.max_iterations
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # throw= itself warns about nothing
        mbd.kinematics(crank, t_end=0.004, h=1e-3, throw=True)


def test_runtime_error_under_jit_carries_the_message(slider):
    run = eqx.filter_jit(lambda m: mbd.kinematics(m, t_end=0.04, h=1e-2, max_iter=1).r)
    with pytest.raises(Exception, match="kinematic analysis failed: Newton iteration did not"):
        run(slider)
    quiet = eqx.filter_jit(
        lambda m: mbd.kinematics(m, t_end=0.04, h=1e-2, max_iter=1, throw=False).status
    )
    np.testing.assert_array_equal(np.asarray(quiet(slider)), [0, 1, 1, 1, 1])


def test_batch_reports_each_member(crank):
    """Member 1 starts from a NaN position: it fails at t = 0, member 0 does not; the batch
    returns both outcomes, and throw=True names the failed member only."""
    bad = eqx.tree_at(lambda m: m.r0, crank, crank.r0.at[0, 0].set(jnp.nan))
    batch = mbd.stack_models([crank, bad])
    sol = mbd.kinematics_batch(batch, t_end=0.004, h=1e-3)
    np.testing.assert_array_equal(np.asarray(sol.failed_step), [-1, 0])
    np.testing.assert_array_equal(np.asarray(sol.result._value), [0, mbd.NONFINITE])
    assert np.all(np.isfinite(np.asarray(sol.r[0])))
    with pytest.raises(mbd.SolverError, match=r"1 of 2 batch members failed: member 1: step 0"):
        mbd.kinematics_batch(batch, t_end=0.004, h=1e-3, throw=True)
