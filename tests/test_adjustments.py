"""Silent adjustments warn (issue 33, item 7): jaxmbd tells the user when it changes an input
to make it usable, with what was given, what is used and where."""

import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis._stepping import num_steps


def _body_with_axes(x, y):
    builder = mbd.ModelBuilder(name="axes")
    builder.add_body("link", mass=1.0, inertia=(1.0, 1.0, 1.0), axes=(x, y))
    return builder


def test_non_orthogonal_axes_warn_with_the_body_and_the_angle():
    with pytest.warns(mbd.AdjustmentWarning, match=r"body 'link'.*84\.2894 deg apart"):
        _body_with_axes((1.0, 0.0, 0.0), (0.1, 1.0, 0.0))


def test_orthogonal_axes_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.AdjustmentWarning)
        _body_with_axes((1.0, 1.0, 0.0), (-2.0, 2.0, 0.0))  # orthogonal, not unit: no warning


@pytest.mark.parametrize(("t_end", "h"), [(1.0, 1e-3), (3.0, 1e-3), (0.3, 0.1), (0.0, 0.01)])
def test_t_end_on_the_grid_does_not_warn(t_end, h):
    """Values whose quotient is an integer up to round-off (0.3 / 0.1 = 2.9999999999999996)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.AdjustmentWarning)
        assert num_steps(t_end, h) == round(t_end / h)


def test_t_end_off_the_grid_warns_with_the_end_time_used():
    with pytest.warns(mbd.AdjustmentWarning, match=r"ends at t = N h = 0\.09\b"):
        assert num_steps(0.1, 0.03) == 3
    with pytest.warns(mbd.AdjustmentWarning, match=r"N = round\(t_end / h\) = 4 steps"):
        sol = mbd.kinematics(mbd.models.single_pendulum(), t_end=0.1, h=0.026)
    np.testing.assert_allclose(np.asarray(sol.t)[-1], 4 * 0.026, rtol=ROUND_OFF, atol=0)
