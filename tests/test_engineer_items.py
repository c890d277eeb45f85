"""Issue 74's items: kinematic analysis in joint coordinates (a driven four-bar against rA
to 1e-10, the loop closed), the builder's translation driver (a prescribed road input
followed exactly by kinematics and simulate) and its weld (``fixed``: the welded pair
moves as one rigid body under gravity, in rA and in joint coordinates)."""

from __future__ import annotations

import json
import warnings

import jax
import numpy as np
import pytest
from test_redundant_loops import THETA0, four_bar, freudenstein
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.constraints.equations import constraint_values

Z = (0.0, 0.0, 1.0)
ROAD = "0.02*sin(4*pi*t)"
Z0 = 0.5


def _road(t):
    """The prescribed displacement, its rate and acceleration."""
    w = 4.0 * np.pi
    return 0.02 * np.sin(w * t), 0.02 * w * np.cos(w * t), -0.02 * w * w * np.sin(w * t)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        return fn(*args, **kwargs)


# ----------------------------------------------------------------------------- item 1


@pytest.fixture(scope="module")
def four_bar_runs():
    model = four_bar(driven=True)
    joint = _quiet(mbd.kinematics, model, formulation="joint", t_end=0.3, h=0.02)
    ra = _quiet(mbd.kinematics, model, formulation="rA", t_end=0.3, h=0.02)
    return model, joint, ra


def test_joint_kinematics_of_a_driven_four_bar_equals_ra(four_bar_runs):
    """Positions, velocities, accelerations and the multipliers of inverse dynamics in
    joint coordinates equal rA's to 1e-10 (relative to each quantity's size)."""
    _, joint, ra = four_bar_runs
    assert joint.formulation == "joint"
    assert np.all(np.asarray(joint.status) == 0)
    for key in ("r", "A", "rdot", "omega", "rddot", "omegadot", "lam"):
        got, want = np.asarray(getattr(joint, key)), np.asarray(getattr(ra, key))
        assert got.shape == want.shape, key
        assert np.abs(got - want).max() <= 3e-11 * max(1.0, np.abs(want).max()), key
    # the crank turns (2 pi rad/s) and the whole mechanism moves
    assert np.ptp(np.asarray(joint.r[:, 2, 0])) > 0.1


def test_joint_kinematics_follows_freudenstein(four_bar_runs):
    """The rocker angle (its body x axis) of the kinematics in joint coordinates equals
    Freudenstein's closed form to 1e-9 (the crank turns at 2 pi rad/s)."""
    _, joint, _ = four_bar_runs
    ex = np.asarray(joint.A)[:, 2, :, 0]
    rocker = np.arctan2(ex[:, 1], ex[:, 0])
    expected = freudenstein(THETA0 + 2 * np.pi * np.asarray(joint.t))
    err = np.abs(np.angle(np.exp(1j * (rocker - expected))))
    assert err.max() < ROUND_OFF, err.max()
    assert np.ptp(np.unwrap(rocker)) > 0.1


def test_joint_rk4_takes_its_own_tableau_and_names_the_others():
    """tableau="rk4" is the joint formulation's own scheme: the default stays "joint"; any
    other tableau raises, naming the formulations whose rkmk takes it."""
    from jaxmbd.analysis.plan import plan_simulation

    model = road_model(True)
    plan = plan_simulation(model, integrator="rkmk", tableau="rk4", t_end=0.01, h=1e-3)
    assert (plan.formulation, plan.integrator) == ("joint", "rkmk")
    with pytest.raises(ValueError, match=r"'rkmk' takes other tableaus in formulations.*se3"):
        plan_simulation(model, integrator="rkmk", tableau="heun", t_end=0.01, h=1e-3)


def test_joint_kinematics_closes_the_loop_exactly(four_bar_runs):
    """Every constraint row of the model (the closing joint's dependent rows included)
    holds at the joint-coordinate positions to 1e-10; qpos has the tree's layout."""
    model, joint, _ = four_bar_runs
    for k in range(joint.t.shape[0]):
        phi = constraint_values(model, joint.r[k], joint.A[k], joint.t[k])
        assert np.abs(np.asarray(phi)).max() < ROUND_OFF
    assert np.asarray(joint.residual).max() < ROUND_OFF
    assert joint.qpos.shape == (joint.t.shape[0], 3)


def test_joint_kinematics_of_a_traced_model_equals_the_concrete_run(four_bar_runs):
    """Under ``jit`` of the model the independent rows are not known: every row is kept
    (dependent ones too) and solved by least squares, to the same result."""
    model, joint, _ = four_bar_runs
    run = jax.jit(lambda m: _quiet(mbd.kinematics, m, formulation="joint", t_end=0.3, h=0.02))
    traced = run(model)
    for key in ("r", "rdot", "rddot", "lam"):
        got, want = np.asarray(getattr(traced, key)), np.asarray(getattr(joint, key))
        assert np.abs(got - want).max() <= ROUND_OFF * max(1.0, np.abs(want).max()), key


def test_joint_kinematics_refuses_a_mechanism_with_freedom():
    with pytest.raises(mbd.ModelError, match="0 degrees of freedom"):
        _quiet(mbd.kinematics, four_bar(driven=False), formulation="joint", t_end=0.1, h=0.05)


def test_joint_kinematics_refuses_the_structured_solver():
    with pytest.raises(ValueError, match="linear_solver"):
        _quiet(mbd.kinematics, four_bar(driven=True), formulation="joint", t_end=0.1,
               h=0.05, linear_solver="structured")  # fmt: skip


# ----------------------------------------------------------------------------- item 2


def road_model(pendulum: bool, A=None) -> mbd.Model:
    """A body ("road") on a vertical translational joint whose height the translation
    driver prescribes; with ``pendulum``, a bob hinged on it (one degree of freedom).
    ``A``: the bodies' initial orientation (identity where None)."""
    b = mbd.ModelBuilder("road input")
    b.add_body("road", mass=2.0, inertia=[0.1] * 3, r=(0.0, 0.0, Z0), A=A)
    b.translational("slide", body_i="ground", body_j="road", point=(0, 0, Z0), axis=Z)
    b.translation_driver("input", body_i="ground", body_j="road", axis=Z, displacement=ROAD)
    if pendulum:
        b.add_body("bob", mass=1.0, inertia=[0.01] * 3, r=(0.3, 0.0, Z0), A=A)
        b.revolute("hinge", body_i="road", body_j="bob", point=(0, 0, Z0), axis=(0, 1, 0))
    return b.build()


@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_translation_driver_is_followed_by_kinematics(formulation):
    sol = mbd.kinematics(road_model(False), formulation=formulation, t_end=0.5, h=0.02)
    z, zdot, zddot = _road(np.asarray(sol.t))
    np.testing.assert_allclose(np.asarray(sol.r[:, 0, 2]), Z0 + z, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(sol.rdot[:, 0, 2]), zdot, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(sol.rddot[:, 0, 2]), zddot, rtol=0, atol=ROUND_OFF)
    # the driver's multiplier carries the weight plus the inertial force m (g + z'')
    k = list(sol.constraint_names).index("input")
    lam = np.asarray(sol.lam[:, k])
    np.testing.assert_allclose(np.abs(lam), 2.0 * np.abs(9.81 + zddot), rtol=ROUND_OFF)


@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_prescribed_road_input_in_simulate(formulation):
    """A pendulum on a vertically shaken support: the support follows the expression to
    1e-10 while the bob swings."""
    sol = mbd.simulate(road_model(True), formulation=formulation, t_end=0.3, h=2e-3)
    z, _, _ = _road(np.asarray(sol.t))
    np.testing.assert_allclose(np.asarray(sol.r[:, 0, 2]), Z0 + z, rtol=0, atol=ROUND_OFF)
    assert np.ptp(np.asarray(sol.r[:, 1, 0])) > 0.01  # the bob moved


def weld_model() -> mbd.Model:
    """An arm hinged on the ground (axis y, falling under gravity) and a tool welded to it
    at a rotated, offset pose."""
    b = mbd.ModelBuilder("welded arm")
    b.add_body("arm", mass=1.0, inertia=[0.01, 0.02, 0.03], r=(0.25, 0.0, 0.0))
    b.add_body("tool", mass=0.5, inertia=[0.004, 0.005, 0.006], r=(0.5, 0.1, 0.05),
               A=np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))  # fmt: skip
    b.revolute("shoulder", body_i="ground", body_j="arm", point=(0, 0, 0), axis=(0, 1, 0))
    b.fixed("weld", body_i="arm", body_j="tool")
    return b.build()


@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_welded_bodies_move_as_one(formulation):
    model = weld_model()
    assert model.nc == 5 + 6
    sol = mbd.simulate(model, formulation=formulation, t_end=0.3, h=2e-3)
    r, A = np.asarray(sol.r), np.asarray(sol.A)
    rel_r = np.einsum("tji,tj->ti", A[:, 0], r[:, 1] - r[:, 0])
    rel_A = np.einsum("tji,tjk->tik", A[:, 0], A[:, 1])
    assert np.abs(rel_r - rel_r[0]).max() < 2e-13
    assert np.abs(rel_A - rel_A[0]).max() < ROUND_OFF
    np.testing.assert_allclose(rel_r[0], [0.25, 0.1, 0.05], rtol=ROUND_OFF)
    assert np.ptp(r[:, 0, 2]) > 0.05  # it fell


#: Turns body z horizontal (x by 90 degrees): the Euler angles of "re" are regular there.
TILT = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def tilted_weld_model() -> mbd.Model:
    """:func:`weld_model` with the arm's frame tilted (TILT), the tool's turned about z
    from it, and the arm's principal moments not those of a flat plate (whose
    K = tr(J)/2 - J "rotmat" cannot invert)."""
    b = mbd.ModelBuilder("tilted welded arm")
    b.add_body("arm", mass=1.0, inertia=[0.01, 0.02, 0.025], r=(0.25, 0.0, 0.0), A=TILT)
    b.add_body("tool", mass=0.5, inertia=[0.004, 0.005, 0.006], r=(0.5, 0.1, 0.05),
               A=np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]) @ TILT)  # fmt: skip
    b.revolute("shoulder", body_i="ground", body_j="arm", point=(0, 0, 0), axis=(0, 1, 0))
    b.fixed("weld", body_i="arm", body_j="tool")
    return b.build()


@pytest.mark.slow  # each formulation compiles its own programs
@pytest.mark.parametrize("formulation", ["rp", "re", "se3", "director", "rotmat"])
def test_driver_and_weld_in_the_other_formulations(formulation):
    """The road input followed to 1e-10 by simulate (and by kinematics where the
    formulation has absolute poses: rotmat's kinematics is refused), and the welded pair
    moving as one, in the absolute formulations besides rA."""
    sol = mbd.simulate(road_model(True, A=TILT), formulation=formulation, t_end=0.3, h=2e-3)
    z, zdot, zddot = _road(np.asarray(sol.t))
    np.testing.assert_allclose(np.asarray(sol.r[:, 0, 2]), Z0 + z, rtol=0, atol=1e-10)
    assert np.ptp(np.asarray(sol.r[:, 1, 0])) > 0.01
    if formulation != "rotmat":
        kin = mbd.kinematics(road_model(False, A=TILT), formulation=formulation, t_end=0.5,
                             h=0.02)  # fmt: skip
        z, zdot, zddot = _road(np.asarray(kin.t))
        np.testing.assert_allclose(np.asarray(kin.r[:, 0, 2]), Z0 + z, rtol=0, atol=1e-10)
        np.testing.assert_allclose(np.asarray(kin.rdot[:, 0, 2]), zdot, rtol=0, atol=1e-10)
        np.testing.assert_allclose(np.asarray(kin.rddot[:, 0, 2]), zddot, rtol=0, atol=1e-9)
    sol = mbd.simulate(tilted_weld_model(), formulation=formulation, t_end=0.3, h=2e-3)
    r, A = np.asarray(sol.r), np.asarray(sol.A)
    rel_r = np.einsum("tji,tj->ti", A[:, 0], r[:, 1] - r[:, 0])
    rel_A = np.einsum("tji,tjk->tik", A[:, 0], A[:, 1])
    # rotmat's rk integrates the index-1 equations without projecting onto the rows: they
    # drift by the steps' truncation errors (2.1e-9 after 0.3 s)
    tol = 1e-8 if formulation == "rotmat" else 1e-10
    assert np.abs(rel_r - rel_r[0]).max() < tol
    assert np.abs(rel_A - rel_A[0]).max() < tol
    np.testing.assert_allclose(rel_r[0], TILT.T @ [0.25, 0.1, 0.05], atol=1e-12)
    assert np.ptp(r[:, 0, 2]) > 0.05  # it fell


def test_builder_refuses_bad_translation_drivers_and_welds():
    b = mbd.ModelBuilder("bad")
    b.add_body("a", mass=1.0, inertia=[1.0] * 3)
    with pytest.raises(mbd.ModelError, match="axis"):
        b.translation_driver("d", body_i="ground", body_j="a", axis=(0, 0, 0), displacement=ROAD)
    with pytest.raises(mbd.ModelError, match="unknown body"):
        b.translation_driver("d", body_i="ground", body_j="b", axis=Z, displacement=ROAD)
    with pytest.raises(mbd.ModelError, match="both 'a'"):
        b.fixed("w", body_i="a", body_j="a")
    b.fixed("w", body_i="ground", body_j="a")
    with pytest.raises(mbd.ModelError, match="duplicate"):
        b.fixed("w", body_i="ground", body_j="a")


# ----------------------------------------------------------------------------- model files


def _file_model(tmp_path) -> mbd.Model:
    """A model file written by hand with a translation driver and a weld: the road model's
    support with the welded arm hinged on it."""
    entries = {
        "format": "jaxmbd-model",
        "name": "road and weld",
        "bodies": [
            {"name": "road", "mass": 2.0, "inertia": [0.1, 0.1, 0.1], "r": [0.0, 0.0, Z0]},
            {"name": "arm", "mass": 1.0, "inertia": [0.01, 0.02, 0.03], "r": [0.25, 0.0, Z0]},
            {
                "name": "tool",
                "mass": 0.5,
                "inertia": [0.004, 0.005, 0.006],
                "r": [0.5, 0.1, Z0 + 0.05],
            },
        ],  # fmt: skip
        "joints": [
            {
                "name": "slide",
                "type": "translational",
                "body_i": "ground",
                "body_j": "road",
                "point": [0, 0, Z0],
                "axis": list(Z),
            },
            {
                "name": "shoulder",
                "type": "revolute",
                "body_i": "road",
                "body_j": "arm",
                "point": [0, 0, Z0],
                "axis": [0, 1, 0],
            },
            {"name": "weld", "type": "fixed", "body_i": "arm", "body_j": "tool"},
        ],  # fmt: skip
        "drivers": [
            {
                "name": "input",
                "type": "translation",
                "body_i": "ground",
                "body_j": "road",
                "axis": list(Z),
                "displacement": ROAD,
            },
        ],  # fmt: skip
    }
    path = tmp_path / "road_weld.json"
    path.write_text(json.dumps(entries))
    return mbd.load_model(path)


def _builder_twin() -> mbd.Model:
    b = mbd.ModelBuilder("road and weld")
    b.add_body("road", mass=2.0, inertia=[0.1] * 3, r=(0.0, 0.0, Z0))
    b.add_body("arm", mass=1.0, inertia=[0.01, 0.02, 0.03], r=(0.25, 0.0, Z0))
    b.add_body("tool", mass=0.5, inertia=[0.004, 0.005, 0.006], r=(0.5, 0.1, Z0 + 0.05))
    b.translational("slide", body_i="ground", body_j="road", point=(0, 0, Z0), axis=Z)
    b.revolute("shoulder", body_i="road", body_j="arm", point=(0, 0, Z0), axis=(0, 1, 0))
    b.fixed("weld", body_i="arm", body_j="tool")
    b.translation_driver("input", body_i="ground", body_j="road", axis=Z, displacement=ROAD)
    return b.build()


def test_model_files_hold_translation_drivers_and_welds(tmp_path):
    """A hand-written file's "fixed" joint and "translation" driver give the builder's
    rows; saved and read back (JSON and TOML) they keep them; the loaded model runs in both
    formulation families with the support on the road and the tool welded."""
    twin = _builder_twin()
    loaded = _file_model(tmp_path)
    assert loaded.constraint_names == twin.constraint_names
    for t in (0.0, 0.1):
        np.testing.assert_allclose(
            np.asarray(constraint_values(loaded, twin.r0, twin.A0, t)),
            np.asarray(constraint_values(twin, twin.r0, twin.A0, t)), rtol=0, atol=ROUND_OFF,
        )  # fmt: skip
    for suffix in ("json", "toml"):
        path = tmp_path / f"saved.{suffix}"
        mbd.save_model(loaded, path)
        again = mbd.load_model(path)
        assert again.constraint_names == twin.constraint_names, suffix
        np.testing.assert_allclose(
            np.asarray(constraint_values(again, twin.r0, twin.A0, 0.1)),
            np.asarray(constraint_values(twin, twin.r0, twin.A0, 0.1)), rtol=0, atol=ROUND_OFF,
        )  # fmt: skip
    sol = mbd.simulate(loaded, t_end=0.05, h=5e-3)
    z, _, _ = _road(np.asarray(sol.t))
    np.testing.assert_allclose(np.asarray(sol.r[:, 0, 2]), Z0 + z, rtol=0, atol=ROUND_OFF)
    A = np.asarray(sol.A)
    rel = np.einsum("tji,tjk->tik", A[:, 1], A[:, 2])
    assert np.abs(rel - rel[0]).max() < ROUND_OFF


def test_model_files_refuse_a_driver_key_of_another_type(tmp_path):
    entries = {"format": "jaxmbd-model", "bodies": [{"name": "a", "mass": 1.0,
               "inertia": [1.0, 1.0, 1.0]}],
               "drivers": [{"name": "d", "type": "translation", "body_i": "ground",
                            "body_j": "a", "axis": [0, 0, 1], "angle": "t"}]}  # fmt: skip
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(entries))
    with pytest.raises(mbd.ModelFileError, match=r"drivers\[0\].*angle.*displacement"):
        mbd.load_model(path)
