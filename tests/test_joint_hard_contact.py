"""Exact contact in joint coordinates (``formulation="joint", contact="hard"``): the
projected Moreau–Jean step with the tree's mass matrix against the absolute formulation's
step (the gradient through an impact and the hard stop are tests/test_hard_contact.py's,
run in both)."""

from __future__ import annotations

import numpy as np
import pytest
from test_hard_contact import H0, R_BALL, E, _apexes, _ball

import jaxmbd as mbd


@pytest.mark.slow  # two 1500-step programs
def test_bouncing_ball_equals_the_absolute_step():
    """For one free body the joint coordinates' step is the absolute one (the free joint's
    retraction is rA's): the bounces agree to round-off, and follow e^2 without
    penetrating."""
    model = _ball()
    joint = mbd.simulate(model, formulation="joint", contact="hard", t_end=1.5, h=1e-3)
    ra = mbd.simulate(model, formulation="rA", contact="hard", t_end=1.5, h=1e-3)
    assert joint.integrator == "moreau_jean" and np.all(np.asarray(joint.status) == 0)
    np.testing.assert_allclose(np.asarray(joint.r), np.asarray(ra.r), atol=1e-12)
    height = np.asarray(joint.r[:, 0, 2]) - R_BALL
    apexes = _apexes(height, np.asarray(joint.rdot[:, 0, 2]))
    np.testing.assert_allclose(apexes[0], E**2 * H0, rtol=2e-3)
    assert height.min() > -1e-10
    np.testing.assert_allclose(np.asarray(joint.contact.normal_force),
                               np.asarray(ra.contact.normal_force), atol=1e-6)  # fmt: skip


def test_joint_hard_contact_options_are_checked():
    model = _ball()
    with pytest.raises(ValueError, match="takes no options \\['rho_inf'\\]"):
        mbd.simulate(model, formulation="joint", contact="hard", rho_inf=0.5, t_end=0.01,
                     h=1e-3)  # fmt: skip
