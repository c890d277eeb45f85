"""Model files: published files load and move like the built-ins; own schema round trips."""

import json
import logging
from functools import cache

import numpy as np
import pytest
from conftest import PAPER_MASSES, REFERENCE_MODELS, reference_model
from tolerances import ROUND_OFF

import jaxmbd as mbd

T_END, H = 1.0, 2e-3

SLIDER_MASSES = PAPER_MASSES["slider_crank.json"]
FOUR_LINK_MASSES = PAPER_MASSES["four_link.json"]
PENDULUM = PAPER_MASSES["single_pendulum.json"]["First pendulum"]


@cache
def builtin_run(name):
    return mbd.kinematics(getattr(mbd.models, name)(), t_end=T_END, h=H)


def published_run(relative, masses, drivers=None):
    model = mbd.load_model(reference_model(relative), masses=masses, drivers=drivers)
    return model, mbd.kinematics(model, t_end=T_END, h=H)


def all_published_files():
    if not REFERENCE_MODELS.exists():
        return []
    return sorted(
        str(p.relative_to(REFERENCE_MODELS))
        for p in REFERENCE_MODELS.glob("*/*")
        if p.suffix in (".json", ".mdl")
    )


@pytest.mark.parametrize("relative", all_published_files())
def test_every_published_file_loads(relative, caplog):
    with caplog.at_level(logging.WARNING, logger="jaxmbd"):
        model = mbd.load_model(REFERENCE_MODELS / relative)
    assert model.nb >= 1 and model.nc >= 1
    assert "unit masses" in caplog.text  # the files carry no masses
    A = np.asarray(model.A0)
    np.testing.assert_allclose(
        np.einsum("bji,bjk->bik", A, A),
        np.broadcast_to(np.eye(3), A.shape),
        rtol=0,
        atol=ROUND_OFF,
    )


def test_published_slider_crank_same_motion():
    _, sol = published_run("sim_engine_3d/slider_crank_rotated.mdl", SLIDER_MASSES)
    ref = builtin_run("slider_crank")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=1e-11)
    np.testing.assert_allclose(sol.A, ref.A, rtol=0, atol=2e-11)
    np.testing.assert_allclose(sol.rddot, ref.rddot, rtol=0, atol=1e-10)


def test_published_slider_crank_other_slider_frame():
    """slider_crank.mdl has another slider frame (and inconsistent r_dot): same positions."""
    _, sol = published_run("sim_engine_3d/slider_crank.mdl", SLIDER_MASSES)
    ref = builtin_run("slider_crank")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=1e-11)
    np.testing.assert_allclose(sol.A[:, :2], ref.A[:, :2], rtol=0, atol=2e-11)
    np.testing.assert_allclose(sol.rdot, ref.rdot, rtol=0, atol=2e-11)


def test_simengine_slider_crank_runs_the_other_way():
    """SimEngineMBD/slider_crank.json drives cos(2 pi t + pi/2): the crank turns about +x,
    against its own initial omega; its motion is the built-in one reversed in time."""
    _, sol = published_run("SimEngineMBD/slider_crank.json", SLIDER_MASSES)
    ref = builtin_run("slider_crank")
    n = len(ref.t) - 1  # T_END = 1 s is one crank period
    np.testing.assert_allclose(
        np.asarray(sol.r), np.asarray(ref.r)[::-1][: n + 1], rtol=0, atol=1e-11
    )
    np.testing.assert_allclose(sol.rdot, -np.asarray(ref.rdot)[::-1], rtol=0, atol=2e-11)


def test_published_four_link_same_motion():
    """four_link.mdl uses Haug's rotor frame (A = I); the links' frames are the same."""
    _, sol = published_run("sim_engine_3d/four_link.mdl", FOUR_LINK_MASSES)
    ref = builtin_run("four_link")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=3e-14)
    np.testing.assert_allclose(sol.A[:, 1:], ref.A[:, 1:], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(sol.rdot, ref.rdot, rtol=0, atol=8e-14)


def test_simengine_four_link_with_driver_override():
    """SimEngineMBD/four_link.json leaves the driver at f = 0 (set in the authors' Python)."""
    _, sol = published_run(
        "SimEngineMBD/four_link.json", FOUR_LINK_MASSES, drivers={"driving-kk": "cos(pi*t + pi/2)"}
    )
    ref = builtin_run("four_link")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=ROUND_OFF)


def test_published_single_pendulum_same_motion_and_bad_fddot_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="jaxmbd"):
        _, sol = published_run("sim_engine_3d/revJoint.mdl", {"body_1": PENDULUM})
    assert "f_ddot" in caplog.text and "disagrees" in caplog.text
    ref = builtin_run("single_pendulum")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(sol.A, ref.A, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(sol.rddot, ref.rddot, rtol=0, atol=2e-14)


def test_simengine_single_pendulum_with_driver_override():
    _, sol = published_run(
        "SimEngineMBD/single_pendulum.json",
        {"First pendulum": PENDULUM},
        drivers={"DP1-drive": "cos(pi/2 + pi/4*cos(2*t))"},
    )
    np.testing.assert_allclose(sol.r, builtin_run("single_pendulum").r, rtol=0, atol=ROUND_OFF)


def test_dp1_driver_is_replaced_with_a_log_message(caplog):
    with caplog.at_level(logging.INFO, logger="jaxmbd"):
        model = mbd.load_model(
            reference_model("sim_engine_3d/slider_crank_rotated.mdl"), masses=SLIDER_MASSES
        )
    assert model.gcon_counts() == {"DP1": 6, "DP2": 4, "D": 1, "CD": 6, "ROT": 1}
    assert "replaced by a rotation driver" in caplog.text


def test_builtin_gcon_counts_match_table7():
    expected = {  # paper Table 7, with the driver DP1 counted as ROT
        "single_pendulum": {"CD": 3, "DP1": 2, "DP2": 0, "D": 0, "ROT": 1},
        "four_link": {"CD": 12, "DP1": 5, "DP2": 0, "D": 0, "ROT": 1},
        "slider_crank": {"CD": 6, "DP1": 6, "DP2": 4, "D": 1, "ROT": 1},
    }
    for name, counts in expected.items():
        assert getattr(mbd.models, name)().gcon_counts() == counts


def test_builtin_masses_and_order():
    m = mbd.models.slider_crank()
    assert m.body_names == ("crank", "rod", "slider")
    np.testing.assert_array_equal(m.mass, [0.12, 0.5, 2.0])
    np.testing.assert_allclose(
        np.diagonal(m.inertia, axis1=1, axis2=2)[1], [4e-3, 4e-4, 4e-3], rtol=ROUND_OFF
    )
    assert mbd.models.four_link().body_names == ("rotor", "link 2", "link 3")
    assert mbd.models.double_pendulum().body_names == ("rod 1", "rod 2")


@pytest.mark.parametrize(
    "name", ["single_pendulum", "double_pendulum", "four_link", "slider_crank"]
)
def test_own_schema_round_trip(tmp_path, name):
    model = getattr(mbd.models, name)()
    path = mbd.save_model(model, tmp_path / f"{name}.json")
    again = mbd.load_model(path)
    assert again.constraint_names == model.constraint_names
    assert again.constraint_kinds == model.constraint_kinds
    for a, b in zip(
        __import__("jax").tree_util.tree_leaves(model),
        __import__("jax").tree_util.tree_leaves(again),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-15, atol=1e-15)


def test_round_trip_keeps_spring_damper_attachment_points(tmp_path):
    """save_model writes a spring's points in the body frames (local_i/local_j); load_model
    must read them so, not as global points (a rotated, offset body shows the difference)."""
    c, s_ = np.cos(0.7), np.sin(0.7)
    b = mbd.ModelBuilder("spring round trip")
    b.add_body("box", mass=2.0, inertia=(0.1, 0.2, 0.3), r=(0.3, -0.2, 0.5),
               A=[[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])  # fmt: skip
    b.spherical("pivot", body_i="ground", body_j="box", point=(0.0, 0.0, 1.0))
    b.spring_damper(
        "spring", body_i="ground", point_i=(0.2, 0.1, 0.0), body_j="box", point_j=(0.4, 0.1, 0.6),
        stiffness=50.0, damping=2.0, rest_length=0.3,
    )  # fmt: skip
    model = b.build()
    again = mbd.load_model(mbd.save_model(model, tmp_path / "spring.json"))
    for field in ("s_bar_p_i", "s_bar_q_j", "stiffness", "damping", "rest_length"):
        np.testing.assert_allclose(
            getattr(again.forces[0], field),
            getattr(model.forces[0], field),
            rtol=ROUND_OFF,
            atol=ROUND_OFF,
        )
    bad = json.loads((tmp_path / "spring.json").read_text())
    bad["forces"][0]["local_j"] = "yes"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(mbd.ModelFileError, match=r"forces\[0\]\.local_j: must be true or false"):
        mbd.load_model(tmp_path / "bad.json")


def test_round_trip_keeps_changed_driver_parameters(tmp_path):
    import equinox as eqx

    model = mbd.models.slider_crank()
    group = model.drivers[0]
    changed = eqx.tree_at(lambda m: m.drivers[0].constants, model, group.constants * 1.5)
    again = mbd.load_model(mbd.save_model(changed, tmp_path / "m.json"))
    np.testing.assert_array_equal(again.drivers[0].constants, changed.drivers[0].constants)


def test_joint_builders_equal_published_gcons():
    """A revolute joint built from point and axis moves like the published GCON set."""
    b = mbd.ModelBuilder("pendulum from joints")
    b.add_body(
        "pendulum",
        mass=78.0,
        inertia=[0.0325, 104.01625, 104.01625],
        r=[0, np.sqrt(2), -np.sqrt(2)],
        axes=([0, 1, -1], [0, 1, 1]),
    )
    b.revolute("pivot", body_i="pendulum", body_j="ground", point=[0, 0, 0], axis=[1, 0, 0])
    b.add_rot(
        "driver",
        body_i="ground",
        u_bar_i=[0, 0, -1],
        v_bar_i=[0, 1, 0],
        body_j="pendulum",
        a_bar_j=[0, 1, 0],
        angle="pi/2 + pi/4*cos(2*t)",
    )
    sol = mbd.kinematics(b.build(), t_end=T_END, h=H)
    ref = builtin_run("single_pendulum")
    np.testing.assert_allclose(sol.r, ref.r, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(sol.omega, ref.omega, rtol=0, atol=ROUND_OFF)


def test_model_file_json_is_readable(tmp_path):
    path = mbd.models.path("slider_crank")
    doc = json.loads(path.read_text())
    assert doc["format"] == "jaxmbd-model" and doc["solver"]["h"] == 1e-3


def test_initial_projection_is_reported(caplog):
    """Published A matrices are orthonormal to ~1e-6 only; the report says how far they moved."""
    with caplog.at_level(logging.INFO, logger="jaxmbd"):
        model = mbd.load_model(
            reference_model("sim_engine_3d/slider_crank.mdl"), masses=SLIDER_MASSES
        )
        sol = mbd.kinematics(model, t_end=T_END, h=H)
    assert "orthonormalised A of body 'connecting rod'" in caplog.text
    assert "consistent start moved" in caplog.text
    from jaxmbd._checks import initial_correction

    moved = initial_correction(model, sol)
    assert 0 < moved["position"] < 1e-11
    assert moved["velocity"] > 0.1  # rod r_dot was 0


def _robot():
    """A cart and pole with limits, joint dynamics and every actuator kind."""
    b = mbd.ModelBuilder("robot round trip")
    b.add_body("cart", mass=2.0, inertia=[1.0, 1.0, 1.0], r=(0, 0, 0))
    b.add_body("pole", mass=0.5, inertia=[0.1, 0.1, 0.01], r=(0, 0, 0.5))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0),
                    limits=(-1, 1), damping=0.3, friction_loss=0.1)  # fmt: skip
    b.revolute("hinge", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(-0.5, 0.7), limit_stiffness=500.0, stiffness=2.0,
               spring_reference=0.1, damping=0.05)  # fmt: skip
    b.add_actuator("servo", joint="rail", kind="position", kp=50.0, kv=4.0, ctrl_range=(-1, 1))
    b.add_actuator("motor", joint="hinge", kind="motor", gear=2.0, force_range=(-3, 3))
    b.add_actuator("general", joint="hinge", kind="general", gain=2.0, bias=(0.1, -0.2, -0.3))
    b.add_actuator("speed", joint="rail", kind="velocity", kv=3.0, ctrl_range=(0.0, None))
    return b.build()


def test_round_trip_keeps_limits_joint_dynamics_and_actuators(tmp_path, caplog):
    """Every leaf of the limits, joint dynamics and actuators (gains as built, changed
    values, one-sided ranges) survives save_model / load_model, with no warning."""
    import equinox as eqx
    import jax

    model = _robot()
    k = next(
        i for i, f in enumerate(model.forces) if isinstance(f, mbd.joint_dynamics.JointDynamics)
    )
    model = eqx.tree_at(lambda m: m.forces[k].damping, model, model.forces[k].damping * 1.7)
    with caplog.at_level(logging.WARNING, logger="jaxmbd"):
        path = mbd.save_model(model, tmp_path / "robot.json")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    doc = json.loads(path.read_text())
    assert [a["name"] for a in doc["actuators"]] == ["servo", "motor", "general", "speed"]
    assert [a["kind"] for a in doc["actuators"]] == ["position", "motor", "general", "velocity"]
    assert doc["actuators"][3]["ctrl_range"] == [0.0, None]
    again = mbd.load_model(path)
    assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert again.actuators.kinds == model.actuators.kinds


def test_hand_written_joint_limits_and_dynamics_load(tmp_path):
    """A joints entry takes the builder's limit and dynamics options; on a joint without a
    scalar coordinate they are refused, naming the key."""
    doc = {
        "format": "jaxmbd-model", "name": "arm",
        "bodies": [{"name": "arm", "mass": 1.0, "inertia": [0.1, 0.1, 0.1], "r": [0, 0, -0.5]}],
        "joints": [{"name": "shoulder", "type": "revolute", "body_i": "ground",
                    "body_j": "arm", "point": [0, 0, 0], "axis": [0, 1, 0],
                    "limits": [-0.3, 0.4], "damping": 0.2}],
        "actuators": [{"name": "m", "joint": "shoulder", "kind": "motor",
                       "ctrl_range": [None, 1.0]}],
    }  # fmt: skip
    (tmp_path / "arm.json").write_text(json.dumps(doc))
    model = mbd.load_model(tmp_path / "arm.json")
    limits = next(f for f in model.forces if isinstance(f, mbd.joint_limits.JointLimits))
    np.testing.assert_array_equal(limits.lower, [-0.3])
    assert float(model.actuators.ctrl_lower[0]) == -np.inf
    assert float(model.actuators.ctrl_upper[0]) == 1.0
    doc["joints"][0]["type"] = "spherical"
    del doc["joints"][0]["axis"], doc["actuators"]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(mbd.ModelFileError, match=r"joints\[0\] \('shoulder'\)\.limits: .*not sph"):
        mbd.load_model(tmp_path / "bad.json")


def test_mjcf_robot_round_trips_exactly(tmp_path):
    """dm_control's cheetah (contacts, limits, damping, stiffness, motors) saved and loaded
    again: the same pytree with identical leaves."""
    import dataclasses
    import os
    import warnings

    import jax

    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "cheetah.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(path)
    again = mbd.load_model(mbd.save_model(model, tmp_path / "cheetah.json"))
    # MuJoCo's constraint model (contact="soft") stays with the MJCF file
    assert model.constraint_model is not None and again.constraint_model is None
    model = dataclasses.replace(model, constraint_model=None)
    assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
