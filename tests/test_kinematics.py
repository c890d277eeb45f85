"""Kinematic analysis: rA, rp, re against each other and against closed forms (golden refs)."""

from functools import cache

import numpy as np
import pytest
import references
from tolerances import ROUND_OFF

import jaxmbd as mbd

FORMULATIONS = ("rA", "rp", "re")
DRIVEN = ("single_pendulum", "four_link", "slider_crank")


@cache
def run(name, formulation, t_end=3.0, h=1e-3):
    return mbd.kinematics(getattr(mbd.models, name)(), formulation=formulation, t_end=t_end, h=h)


# The four link in rp and re (two compilations used by nothing else here) with -m slow:
# test_references_3d.py checks their kinematics against the closed form.
SLOW_FOUR_LINK = pytest.mark.slow


@pytest.mark.parametrize(
    "name",
    [
        "single_pendulum",
        pytest.param("slider_crank", marks=pytest.mark.slow),
        pytest.param("four_link", marks=SLOW_FOUR_LINK),
    ],
)
@pytest.mark.parametrize("formulation", ["rp", "re"])
def test_formulations_agree(name, formulation):
    a, b = run(name, "rA"), run(name, formulation)
    # the Newton solves stop at their tolerance: the runs part by 6e-13 (single pendulum),
    # 3e-10 and 7e-10 (slider crank, four link: slow-marked) of each quantity's size
    tol, tol_lam = {"single_pendulum": (3e-12, 2e-12), "slider_crank": (1e-9, 2e-10),
                    "four_link": (3e-9, 2e-9)}[name]  # fmt: skip
    for key in ("r", "A", "rdot", "omega", "rddot", "omegadot"):
        x, y = np.asarray(getattr(a, key)), np.asarray(getattr(b, key))
        scale = max(1.0, np.abs(x).max())
        np.testing.assert_allclose(
            y, x, rtol=0, atol=tol * scale, err_msg=f"{name} {formulation} {key}"
        )
    np.testing.assert_allclose(b.lam, a.lam, rtol=0, atol=tol_lam * max(1.0, np.abs(a.lam).max()))


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_single_pendulum_closed_form(formulation):
    sol = run("single_pendulum", formulation)
    ref = references.single_pendulum(np.asarray(sol.t))
    for key, ref_key in (
        ("r", "r"),
        ("rdot", "rdot"),
        ("rddot", "rddot"),
        ("A", "A"),
        ("omega", "omega_bar"),
        ("omegadot", "omegadot_bar"),
    ):
        np.testing.assert_allclose(
            np.asarray(getattr(sol, key))[:, 0], ref[ref_key], rtol=0, atol=1e-11, err_msg=key
        )


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_slider_crank_closed_form(formulation):
    sol = run("slider_crank", formulation)
    ref = references.slider_crank(np.asarray(sol.t))
    for key, ref_key in (
        ("r", "r"),
        ("rdot", "rdot"),
        ("rddot", "rddot"),
        ("A", "A"),
        ("omega", "omega_bar"),
        ("omegadot", "omegadot_bar"),
    ):
        x = np.asarray(getattr(sol, key))
        scale = max(1.0, np.abs(ref[ref_key]).max())
        np.testing.assert_allclose(x, ref[ref_key], rtol=0, atol=1e-9 * scale, err_msg=key)


def test_time_grid_is_exact_multiples_of_h():
    sol = run("single_pendulum", "rA")
    assert sol.t.shape == (3001,)
    np.testing.assert_array_equal(np.asarray(sol.t), np.arange(3001) * 1e-3)


@pytest.mark.parametrize(
    "name",
    ["single_pendulum", "slider_crank", pytest.param("four_link", marks=SLOW_FOUR_LINK)],
)
def test_iteration_counts_recorded_and_comparable(name):
    """Paper Table 9: iterations per step are comparable across formulations."""
    means = {}
    for f in FORMULATIONS:
        sol = run(name, f)
        it = np.asarray(sol.iterations)
        assert (
            it.shape == sol.t.shape and np.all(it[1:] >= 1) and np.all(np.asarray(sol.status) == 0)
        )
        means[f] = it[1:].mean()
    assert max(means.values()) - min(means.values()) < 1.0, means


def test_converged_to_tolerance():
    sol = run("four_link", "rA")
    assert np.asarray(sol.residual).max() < 1e-9
    A = np.asarray(sol.A)
    orth = np.abs(np.einsum("tbji,tbjk->tbik", A, A) - np.eye(3)).max()
    assert orth < ROUND_OFF


def test_full_revolutions_pass_dp1_singular_angles():
    """The crank passes 0 and pi of the published DP1 angle many times within 3 s."""
    sol = run("slider_crank", "rA")
    crank_y = np.asarray(sol.A)[:, 0, :, 1]
    angle = np.unwrap(np.arctan2(crank_y[:, 2], crank_y[:, 1]))
    assert angle[0] - angle[-1] == pytest.approx(6 * np.pi, rel=ROUND_OFF)


def test_inverse_dynamics_multipliers_static_pendulum():
    """A pendulum held still by its driver: reactions balance gravity exactly."""
    b = mbd.ModelBuilder("held pendulum")
    b.add_body(
        "rod", mass=2.0, inertia=[0.01, 1.0, 1.0], r=[0, 1.0, 0], axes=([0, 1, 0], [0, 0, 1])
    )
    b.revolute("pin", body_i="ground", body_j="rod", point=[0, 0, 0], axis=[1, 0, 0])
    b.rotation_driver("hold", body_i="ground", body_j="rod", axis=[1, 0, 0], angle="0")
    model = b.build()
    sol = mbd.kinematics(model, t_end=0.01, h=1e-3)
    # driver torque holds m g l about x: |lam_driver| = m g * 1.0 (sin(phi - theta) has unit slope)
    lam = np.asarray(sol.lam[-1])
    assert abs(lam[model.constraint_names.index("hold")]) == pytest.approx(
        2.0 * 9.81, rel=ROUND_OFF
    )
