"""An assembly that says what it did (jaxmbd/_checks.py, jaxmbd/model/_joint_points.py): the
consistent start records how far it moved each body (sol.start_correction) and warns
above jaxmbd._checks.ASSEMBLY_TOLERANCE (a tie rod of the wrong length, a velocity that
breaks a joint), a joint point far from both bodies is flagged by the builder, an
impossible length says it cannot assemble, and consistent models stay silent."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

H = 1e-3


def _crank_and_rocker(rod_length, *, rocker_rdot=0.0):
    """A crank (pivot at the origin) and a rocker (pivot at x = 1) hanging down, their
    lower ends joined by a tie rod of ``rod_length`` (a distance constraint): drawn with
    the ends 1 m apart."""
    b = mbd.ModelBuilder("tie rod")
    b.add_body("crank", mass=1.0, inertia=[0.1] * 3, r=(0, 0, -0.25))
    b.add_body("rocker", mass=1.0, inertia=[0.1] * 3, r=(1, 0, -0.25), rdot=(rocker_rdot, 0, 0))
    b.revolute("A", body_i="ground", body_j="crank", point=(0, 0, 0), axis=(0, 1, 0))
    b.revolute("B", body_i="ground", body_j="rocker", point=(1, 0, 0), axis=(0, 1, 0))
    b.add_d("tie", body_i="crank", s_bar_p_i=(0, 0, -0.25), body_j="rocker",
            s_bar_q_j=(0, 0, -0.25), f=rod_length**2)  # fmt: skip
    return b.build()


def _assembly_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, mbd.AssemblyWarning)]


def _run(model, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = mbd.simulate(model, t_end=H, h=H, **options)
    return sol, _assembly_warnings(caught)


def test_a_tie_rod_of_the_wrong_length_is_reported_and_recorded():
    """The rod is 0.9 m where the ends are 1 m apart: the start turns both links (to
    about 0.2 rad); the warning names them, sol.start_correction has each body's motion."""
    sol, said = _run(_crank_and_rocker(0.9))
    assert len(said) == 1 and "did not satisfy the constraints" in said[0]
    assert "turned" in said[0] and "'crank'" in said[0] and "'rocker'" in said[0]
    turned = np.asarray(sol.start_correction.rotation)
    assert turned.shape == (2,) and np.all(turned > 0.05)
    # the recorded angle is the turn between the drawn and the started orientation
    model = _crank_and_rocker(0.9)
    for b in range(2):
        turn = np.asarray(model.A0[b]).T @ np.asarray(sol.A[0, b])
        angle = np.arccos(np.clip((np.trace(turn) - 1) / 2, -1, 1))
        assert turned[b] == pytest.approx(angle, abs=5e-15)  # arccos: a few ulps


def test_consistent_start_is_silent_and_records_zero():
    sol, said = _run(_crank_and_rocker(1.0))
    assert said == []
    # lengths of ~1 m, angles of ~1 rad
    np.testing.assert_allclose(sol.start_correction.position, 0.0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(sol.start_correction.rotation, 0.0, rtol=0, atol=ROUND_OFF)


def test_a_projected_velocity_is_reported():
    """The rocker pushed sideways at 1 m/s, which its hinge forbids: projected, and said."""
    sol, said = _run(_crank_and_rocker(1.0, rocker_rdot=1.0))
    assert len(said) == 1 and "velocities were projected" in said[0] and "'rocker'" in said[0]
    assert float(sol.start_correction.velocity[1]) > 0.5


def test_an_impossible_length_cannot_assemble():
    """A 3 m rod between ends that can be at most 1.5 m apart."""
    with pytest.raises(mbd.SolverError, match=r"could not assemble the initial configuration: "
                                              r"closure error .* rows .*tie"):  # fmt: skip
        mbd.simulate(_crank_and_rocker(3.0), t_end=H, h=H)


def test_a_joint_point_far_from_both_bodies_is_flagged():
    b = mbd.ModelBuilder("typo")
    b.add_body("link", mass=1.0, inertia=[0.1] * 3, r=(0, 0, -0.5))
    b.add_body("arm", mass=1.0, inertia=[0.1] * 3, r=(0.5, 0, -1.0))
    b.revolute("pin", body_i="ground", body_j="link", point=(0, 0, 0), axis=(0, 1, 0))
    b.revolute("elbow", body_i="link", body_j="arm", point=(10, 0, -1.0), axis=(0, 1, 0))
    with pytest.warns(mbd.AssemblyWarning, match=r"'elbow' \(9\.\d+ m from the nearer"):
        b.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.AssemblyWarning)
        _crank_and_rocker(1.0)  # a sound model builds silently
