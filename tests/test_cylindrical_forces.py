"""Joint forces on a cylindrical joint's two coordinates (issue 36 item 1): damping,
stiffness, armature, limits and actuators on ``"<joint>.slide"`` and ``"<joint>.angle"``.

Each coordinate is a one-coordinate view of the joint (:func:`jaxmbd.forces._joint.
coordinate_views`); the tests check that the views measure exactly ``sol.joints[name].q``,
that a body symmetric about the axis follows the closed-form damped oscillator on each
coordinate (uncoupled), that the armature adds to the inertia about the axis, that a limit
stops the slide, that motors on either coordinate give the closed-form spin-up, that model
files keep it all, and that bad options are refused with clear errors.
"""

from __future__ import annotations

import functools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces import BodyState
from jaxmbd.forces._joint import coordinate_views, coordinates_and_rates

# oscillator: mass M along the axis, J_AX + ARMATURE about it, each with its own spring
M, J_AX, V0, W0 = 2.0, 0.1, 0.5, 1.0
C_S, K_S, REF_S = 2.0, 50.0, 0.1  # slide: damping ratio 0.1
C_A, K_A, ARMATURE = 0.3, 6.0, 0.05  # angle: damping ratio 0.16 with the armature
# stop: sliding at V_STOP into the upper slide limit while spinning freely at W_STOP
V_STOP, W_STOP, LIMIT = 1.0, 2.0, 0.05
# drive: motors on both coordinates, viscous damping on the angle
J_M, C_M, GEAR, U_ANGLE, U_SLIDE, M_DRIVE = 0.05, 0.2, 2.0, 0.5, 0.3, 1.5
# the drive's coordinates reported as offset + sign * (drawn-pose value), as MJCF sets them
OFFSET, SIGN = (0.2, 0.3), (-1, -1)
T_END, H = 0.4, 1e-3


def build(
    damping=(C_S, C_A), armature=(None, ARMATURE)
) -> mbd.ModelBuilder:  # fmt: skip
    """Three independent bodies without gravity, each on a cylindrical joint along x to the
    ground; the bodies are symmetric about x, so slide and angle are uncoupled. The drive's
    coordinates have an offset and point against the axis (MuJoCo's qpos0 and axis sign):
    its motors push along +q all the same."""
    b = mbd.ModelBuilder("cylindrical forces", gravity=(0.0, 0.0, 0.0))
    b.add_body("osc", mass=M, inertia=[J_AX, 0.3, 0.3], rdot=(V0, 0, 0), omega=(W0, 0, 0))
    b.cylindrical("osc", body_i="ground", body_j="osc", point=(0, 0, 0), axis=(1, 0, 0),
                  damping=damping, stiffness=(K_S, K_A), spring_reference=(REF_S, None),
                  armature=armature)  # fmt: skip
    b.add_body("stop", mass=1.0, inertia=[0.1, 0.2, 0.2], r=(0, 1, 0), rdot=(V_STOP, 0, 0),
               omega=(W_STOP, 0, 0))  # fmt: skip
    b.cylindrical("stop", body_i="ground", body_j="stop", point=(0, 1, 0), axis=(1, 0, 0),
                  limits=((-LIMIT, LIMIT), None))  # fmt: skip
    b.add_body("drive", mass=M_DRIVE, inertia=[J_M, 0.2, 0.2], r=(0, 2, 0))
    b.cylindrical("drive", body_i="ground", body_j="drive", point=(0, 2, 0), axis=(1, 0, 0),
                  damping=(None, C_M))  # fmt: skip
    b._joint_convention("drive", offset=OFFSET, sign=SIGN)
    b.add_actuator("spin", joint="drive.angle", kind="motor", gear=GEAR)
    b.add_actuator("push", joint="drive.slide", kind="motor")
    return b


@functools.cache
def run():
    """The fourth-order Munthe-Kaas RK at h = 1e-3 (its error is far below 1e-8 here)."""
    model = build().build()
    sol = mbd.simulate(model, integrator="rkmk", t_end=T_END, h=H,
                       controls=jnp.asarray([U_ANGLE, U_SLIDE]))  # fmt: skip
    return model, sol


def damped(t, m, c, k, x0, v0, ref=0.0):
    """x(t) of m x'' + c x' + k (x - ref) = 0 (under-damped), x(0) = x0, x'(0) = v0."""
    wn, zeta = math.sqrt(k / m), c / (2 * math.sqrt(k * m))
    wd = wn * math.sqrt(1 - zeta**2)
    a = x0 - ref
    b = (v0 + zeta * wn * a) / wd
    return ref + np.exp(-zeta * wn * t) * (a * np.cos(wd * t) + b * np.sin(wd * t))


def test_views_measure_the_joint_coordinates():
    """The views "<joint>.slide" and "<joint>.angle" (what every joint force acts on) give
    exactly sol.joints[joint].q[:, k] and qdot[:, k] over the run, for all three joints."""
    model, sol = run()
    views = coordinate_views(model.joints)
    assert [v.name for v in views] == [f"{j}.{c}" for j in ("osc", "stop", "drive")
                                       for c in ("slide", "angle")]  # fmt: skip
    state = BodyState(sol.r, sol.A, sol.rdot, sol.omega)
    q, qdot, _ = jax.jit(jax.vmap(lambda s: coordinates_and_rates(views, s)))(state)
    for n, name in enumerate(("osc", "stop", "drive")):
        for k in range(2):
            np.testing.assert_allclose(
                q[:, 2 * n + k], sol.joints[name].q[:, k], rtol=ROUND_OFF, atol=ROUND_OFF
            )
            np.testing.assert_allclose(qdot[:, 2 * n + k], sol.joints[name].qdot[:, k],
                                       rtol=ROUND_OFF, atol=ROUND_OFF)  # fmt: skip


def test_slide_and_angle_follow_their_damped_oscillators():
    """The slide follows M x'' + c x' + k (x - ref) = 0 and the angle (J + armature)
    theta'' + c theta' + k theta = 0, to 2e-12 and 2e-11; without the armature in the closed
    form the angle is off by far more (the armature is what sets its period)."""
    model, sol = run()
    t = np.asarray(sol.t)
    q = np.asarray(sol.joints["osc"].q)
    np.testing.assert_allclose(
        q[:, 0], damped(t, M, C_S, K_S, 0.0, V0, REF_S), rtol=0, atol=2e-12
    )  # 5.1e-13
    np.testing.assert_allclose(q[:, 1], damped(t, J_AX + ARMATURE, C_A, K_A, 0.0, W0),
                               rtol=0, atol=2e-11)  # 3.6e-12  # fmt: skip
    assert np.max(np.abs(q[:, 1] - damped(t, J_AX, C_A, K_A, 0.0, W0))) > 1e-2


def test_limit_stops_the_slide_and_leaves_the_angle_free():
    """The slide limit at 0.05 m stops a body sliding at 1 m/s (free, it would reach
    0.4 m) within the compliant limit's small overshoot; the angle, with no limit, spins
    on at W_STOP exactly."""
    model, sol = run()
    t = np.asarray(sol.t)
    q = np.asarray(sol.joints["stop"].q)
    assert q[:, 0].max() < LIMIT + 0.015
    assert q[-1, 0] < LIMIT + 1e-3  # a bound, not an error: it ends back at 3.8 mm
    assert np.asarray(sol.joints["stop"].qdot)[-1, 0] < 0.05
    np.testing.assert_allclose(q[:, 1], W_STOP * t, rtol=0, atol=ROUND_OFF)


def test_motors_on_both_coordinates_give_the_closed_form_spin_up():
    """A motor (gear 2) on the angle against viscous damping: omega = (g u / c)
    (1 - exp(-c t / J)); a motor on the slide: x = u t^2 / (2 m); both from the offsets,
    along +q (against the axis: sign -1)."""
    model, sol = run()
    t = np.asarray(sol.t)
    q, qdot = np.asarray(sol.joints["drive"].q), np.asarray(sol.joints["drive"].qdot)
    tau, w_end = J_M / C_M, GEAR * U_ANGLE / C_M
    np.testing.assert_allclose(
        qdot[:, 1], w_end * (1 - np.exp(-t / tau)), rtol=0, atol=2e-11
    )  # 3.9e-12
    theta = OFFSET[1] + w_end * (t - tau * (1 - np.exp(-t / tau)))
    np.testing.assert_allclose(q[:, 1], theta, rtol=0, atol=5e-12)  # 9.9e-13
    np.testing.assert_allclose(
        q[:, 0], OFFSET[0] + U_SLIDE * t**2 / (2 * M_DRIVE), rtol=0, atol=ROUND_OFF
    )
    # against the axis: body "drive" moves to -x
    x = np.asarray(sol.r)[:, 2, 0]
    np.testing.assert_allclose(x, -U_SLIDE * t**2 / (2 * M_DRIVE), rtol=0, atol=ROUND_OFF)


def test_model_file_round_trip_keeps_every_coordinate_option(tmp_path):
    """save_model writes each coordinate's options under "slide" / "angle" of its joint
    entry; load_model gives the same pytree, leaf for leaf."""
    model, _ = run()
    path = mbd.save_model(model, tmp_path / "cyl.json")
    doc = json.loads(path.read_text())
    entry = next(e for e in doc["joint_coordinates"] if e["name"] == "osc")
    assert entry["slide"]["stiffness"] == K_S and entry["angle"]["armature"] == ARMATURE
    assert "limits" in next(e for e in doc["joint_coordinates"] if e["name"] == "stop")["slide"]
    assert [a["joint"] for a in doc["actuators"]] == ["drive.angle", "drive.slide"]
    again = mbd.load_model(path)
    assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_hand_written_cylindrical_joint_loads_its_coordinate_options(tmp_path):
    """A "joints" entry takes "slide" / "angle" objects; an unknown coordinate or key is
    refused, naming it."""
    joint = {"name": "c", "type": "cylindrical", "body_i": "ground", "body_j": "b",
             "point": [0, 0, 0], "axis": [1, 0, 0], "slide": {"limits": [-0.1, 0.2]},
             "angle": {"damping": 0.4}}  # fmt: skip
    doc = {"format": "jaxmbd-model", "name": "cyl",
           "bodies": [{"name": "b", "mass": 1.0, "inertia": [0.1, 0.2, 0.2]}],
           "joints": [joint]}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(doc))
    model = mbd.load_model(tmp_path / "c.json")
    names = {type(f).__name__: [d.name for d in f.joints] for f in model.forces}
    assert names == {"JointLimits": ["c.slide"], "JointDynamics": ["c.angle"]}
    (tmp_path / "bad.json").write_text(json.dumps({**doc, "joints": [{**joint, "twist": {}}]}))
    with pytest.raises(mbd.ModelFileError, match="twist"):
        mbd.load_model(tmp_path / "bad.json")
    bad = {**joint, "angle": {"dampnig": 0.4}}
    (tmp_path / "bad2.json").write_text(json.dumps({**doc, "joints": [bad]}))
    with pytest.raises(mbd.ModelFileError, match=r"angle.*dampnig"):
        mbd.load_model(tmp_path / "bad2.json")
    flat = {**joint, "damping": 0.4}
    (tmp_path / "bad3.json").write_text(json.dumps({**doc, "joints": [flat]}))
    with pytest.raises(mbd.ModelFileError, match=r"damping.*under 'slide' and 'angle'"):
        mbd.load_model(tmp_path / "bad3.json")


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(damping=(1.0,)), r"joint 'c'\.damping: expected a pair \(slide, angle\)"),
        (dict(stiffness=3.0), r"joint 'c'\.stiffness: expected a pair"),
        (dict(limits=(-0.1, 0.1)), r"joint 'c\.slide'\.limits"),
        (dict(limits=(None, (0.0, 7.0))), r"joint 'c\.angle'\.limits: .*full turn"),
        (dict(spring_reference=(0.1, None)), r"joint 'c\.slide': spring_reference needs"),
        (dict(armature=(None, -1.0)), r"joint 'c\.angle'\.armature"),
    ],
)
def test_bad_coordinate_options_name_joint_and_coordinate(options, match):
    b = mbd.ModelBuilder("bad", gravity=(0.0, 0.0, 0.0))
    b.add_body("b", mass=1.0, inertia=[0.1, 0.2, 0.2])
    with pytest.raises(mbd.ModelError, match=match):
        b.cylindrical("c", body_i="ground", body_j="b", point=(0, 0, 0), axis=(1, 0, 0),
                      **options)  # fmt: skip


def test_actuator_on_an_unknown_coordinate_lists_the_coordinates():
    b = mbd.ModelBuilder("bad", gravity=(0.0, 0.0, 0.0))
    b.add_body("b", mass=1.0, inertia=[0.1, 0.2, 0.2])
    b.cylindrical("c", body_i="ground", body_j="b", point=(0, 0, 0), axis=(1, 0, 0))
    with pytest.raises(mbd.ModelError, match=r"no joint 'c\.twist'.*\['c\.slide', 'c\.angle'\]"):
        b.add_actuator("m", joint="c.twist", kind="motor")
    with pytest.raises(mbd.ModelError, match=r"'c' is cylindrical; .*'c\.slide' or 'c\.angle'"):
        b.add_actuator("m", joint="c", kind="motor")


CYLINDER_XML = """<mujoco><option gravity="0 0 0"/><worldbody>
  <body name="c" pos="0 0 1"><joint name="s" type="slide" axis="0 0 1" damping="0.7"
      stiffness="3" springref="0.05" range="-0.2 0.3" limited="true" armature="0.01"/>
    <joint name="h" axis="0 0 -1" damping="0.2" frictionloss="0.1" armature="0.02"/>
    <geom type="cylinder" size="0.1 0.2" mass="1"/></body>
  </worldbody><actuator><motor name="spin" joint="h" gear="2"/>
  <position name="lift" joint="s" kp="10"/></actuator></mujoco>"""


def test_mjcf_hinge_and_slide_options_go_to_the_cylindrical_coordinates(tmp_path):
    """A body's slide and hinge on one axis load as the cylindrical joint "s+h": the
    slide's range, damping, stiffness about springref and armature act on "s+h.slide",
    the hinge's (axis reversed: sign -1) damping, friction loss and armature on
    "s+h.angle", the actuators drive them, with no unsupported-feature warning."""
    import warnings

    pytest.importorskip("mujoco")
    (tmp_path / "c.xml").write_text(CYLINDER_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(tmp_path / "c.xml")
    (limits,) = [f for f in model.forces if isinstance(f, mbd.joint_limits.JointLimits)]
    (dyn,) = [f for f in model.forces if isinstance(f, mbd.joint_dynamics.JointDynamics)]
    assert [d.name for d in limits.joints] == ["s+h.slide"]
    np.testing.assert_array_equal([limits.lower[0], limits.upper[0]], [-0.2, 0.3])
    assert [d.name for d in dyn.joints] == ["s+h.slide", "s+h.angle"]
    np.testing.assert_array_equal(dyn.damping, [0.7, 0.2])
    np.testing.assert_array_equal(dyn.stiffness, [3.0, 0.0])
    np.testing.assert_array_equal(dyn.spring_reference[0], 0.05)
    np.testing.assert_array_equal(dyn.friction_loss, [0.0, 0.1])
    np.testing.assert_array_equal(dyn.armature, [0.01, 0.02])
    assert dyn.joints[1].sign == (-1,)
    assert [d.name for d in model.actuators.joints] == ["s+h.angle", "s+h.slide"]
    assert model.actuators.kinds == ("motor", "position")


@pytest.mark.slow
def test_mjcf_cylinder_follows_mujoco(tmp_path):
    """A sprung, damped cylinder (slide and hinge with armature, the hinge's axis reversed,
    a motor on it, gravity along the axis) from a keyframe: jaxmbd (rkmk, h = 1e-3) follows
    MuJoCo's RK4 (dt = 1e-4) to 1e-10 in both qpos over 0.3 s (measured 1.8e-12 m and
    1.8e-11 rad, while they move by 0.17 m and 0.05 rad)."""
    mujoco = pytest.importorskip("mujoco")
    xml = """<mujoco><option gravity="0 0 -9.81" integrator="RK4" timestep="1e-4"/><worldbody>
      <body name="c" pos="0 0 1"><joint name="s" type="slide" axis="0 0 1" damping="0.7"
          stiffness="30" springref="0.05" armature="0.3"/>
        <joint name="h" axis="0 0 -1" damping="0.05" stiffness="2" springref="0.1"
          armature="0.02"/><geom type="cylinder" size="0.1 0.2" mass="1"/></body>
      </worldbody><actuator><motor name="spin" joint="h" gear="2"/></actuator>
      <keyframe><key qpos="0.02 0.3" qvel="0.4 -1.5"/></keyframe></mujoco>"""
    (tmp_path / "c.xml").write_text(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.ctrl[:] = 0.3
    expected = [d.qpos.copy()]
    for _ in range(300):
        for _ in range(10):
            mujoco.mj_step(m, d)
        expected.append(d.qpos.copy())
    model = mbd.load_model(tmp_path / "c.xml")
    sol = mbd.simulate(model, integrator="rkmk", t_end=0.3, h=1e-3, controls=jnp.asarray([0.3]))
    np.testing.assert_allclose(sol.joints["s+h"].q, np.asarray(expected), rtol=0, atol=1e-10)
