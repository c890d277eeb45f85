"""Joint coordinates out of the body poses (``sol.joints``) and into them
(``ModelBuilder.set_joint_state``, MJCF keyframes), checked against the values set, against
finite differences and against MuJoCo's qpos and qvel."""

import math
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from test_docs import EXAMPLE, assert_prints, run_example
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.constraints.equations import constraint_values, rA_terms
from jaxmbd.lie import so3_exp
from jaxmbd.lie.rotations import ep_to_A
from jaxmbd.model.joints import joint_coordinates

DATA = Path(__file__).parent / "data"
DOCS = Path(__file__).resolve().parents[1] / "docs"
ARM = DATA / "arm3.xml"

QUATERNION = np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
#: (q, qdot) set on each joint of the chain; "g" (the deepest) is left as drawn
STATES = {
    "h": (4.0, 1.5),  # beyond pi: must read 4.0, not 4.0 - 2 pi
    "u": ((0.3, -0.5), (0.7, -1.1)),
    "c": ((0.2, 2.0), (-0.4, 0.9)),  # body_i is the child side
    "s": (QUATERNION, (0.3, -0.2, 0.5)),
    "p": ((0.1, -0.2, -2.5), (0.5, 0.3, -1.0)),
    "t": (-0.15, 0.6),  # six joints deep
}


def chain(states=STATES) -> mbd.ModelBuilder:
    """A chain of every joint kind: ground -revolute- a -universal- b -cylindrical- c
    -spherical- d -planar- e -translational- f -revolute- g."""
    b = mbd.ModelBuilder("every joint", gravity=(0.0, 0.0, -9.81))
    for k, name in enumerate("abcdefg"):
        axes = ((1.0, 0.2, 0.0), (-0.2, 1.0, 0.5)) if name == "d" else None
        b.add_body(name, mass=1.0 + 0.1 * k, inertia=[0.02, 0.03, 0.04], r=(k + 0.5, 0, 0),
                   axes=axes)  # fmt: skip
    b.revolute("h", body_i="ground", body_j="a", point=(0, 0, 0), axis=(0, 1, 0))
    b.universal("u", body_i="a", body_j="b", point=(1, 0, 0), axis_i=(0, 0, 1), axis_j=(0, 1, 0))
    b.cylindrical("c", body_i="c", body_j="b", point=(2, 0, 0), axis=(1, 0, 0))
    b.spherical("s", body_i="c", body_j="d", point=(3, 0, 0))
    b.planar("p", body_i="d", body_j="e", point=(4, 0, 0), axis=(0, 0, 1), x_axis=(1, 1, 0))
    b.translational("t", body_i="e", body_j="f", point=(5, 0, 0), axis=(1, 0, 0.2))
    b.revolute("g", body_i="f", body_j="g", point=(6, 0, 0), axis=(0, 0, 1))
    for name, (q, qdot) in states.items():
        b.set_joint_state(name, q=q, qdot=qdot)
    return b


def initial_coordinates(model, name):
    """The coordinates of joint ``name`` at the model's initial state."""
    defn = next(d for d in model.joints if d.name == name)
    x = (model.r0, model.A0, model.rdot0, model.omega0)
    c = joint_coordinates(defn, *(jnp.asarray(v)[None] for v in x))
    return np.asarray(c.q)[0], np.asarray(c.qdot)[0]


def quaternion_rate_to_omega(p, pdot):
    """Angular velocity in the rotated frame: pdot = p (x) (0, omega) / 2."""
    w, v = p[..., :1], p[..., 1:]
    wd, vd = pdot[..., :1], pdot[..., 1:]
    # vector part of conj(p) (x) pdot
    vec = w * vd - wd * v - np.cross(v, vd)
    return 2.0 * vec


@pytest.fixture(scope="module")
def chain_model():
    return chain().build()


@pytest.fixture(scope="module")
def chain_run(chain_model):
    """A short dynamics run of the chain (one compilation shared by the tests)."""
    return mbd.simulate(chain_model, t_end=0.02, h=1e-3)


def test_set_joint_state_places_every_kind(chain_model):
    """Each joint reads the (q, qdot) it was set to (parents set first move the whole
    subtree; the deepest joint, left as drawn, reads zero), and the placed state satisfies
    the constraints at position and velocity level exactly."""
    model = chain_model
    assert model.joint_names == ("h", "u", "c", "s", "p", "t", "g")
    for name, (q, qdot) in STATES.items():
        got_q, got_qdot = initial_coordinates(model, name)
        np.testing.assert_allclose(
            got_q, np.reshape(q, got_q.shape), rtol=0, atol=ROUND_OFF, err_msg=name
        )
        np.testing.assert_allclose(
            got_qdot, np.reshape(qdot, got_qdot.shape), rtol=0, atol=ROUND_OFF
        )
    q_g, qdot_g = initial_coordinates(model, "g")
    assert abs(q_g) < ROUND_OFF
    assert abs(qdot_g) < ROUND_OFF
    phi, G, nu, _ = rA_terms(model, model.r0, model.A0, model.rdot0, model.omega0, 0.0)
    v = np.concatenate([np.asarray(model.rdot0), np.asarray(model.omega0)], 1).reshape(-1)
    assert np.abs(np.asarray(phi)).max() < ROUND_OFF
    assert np.abs(np.asarray(G) @ v - np.asarray(nu)).max() < 2e-14
    # the bodies moved: nothing is at its drawn pose any more except the ground side of "h"
    drawn = chain(states={}).build()
    assert np.abs(np.asarray(model.r0) - np.asarray(drawn.r0)).max() > 0.5


def test_sol_joints_round_trip_and_rates(chain_model, chain_run):
    """sol.joints at t = 0 is what was set (the consistent start keeps an exact state); qdot
    is the time derivative of q (central differences of the run); the spherical rate is the
    relative angular velocity in the child's frame."""
    sol = chain_run
    assert set(sol.joints) == set(chain_model.joint_names)
    h = float(sol.t[1] - sol.t[0])
    for name, (q, qdot) in STATES.items():
        c = sol.joints[name]
        q_t, qdot_t = np.asarray(c.q), np.asarray(c.qdot)
        np.testing.assert_allclose(
            q_t[0], np.reshape(q, q_t[0].shape), rtol=0, atol=ROUND_OFF, err_msg=name
        )
        np.testing.assert_allclose(
            qdot_t[0], np.reshape(qdot, qdot_t[0].shape), rtol=0, atol=ROUND_OFF
        )
        diff = (q_t[2:] - q_t[:-2]) / (2 * h)
        if name == "s":
            diff = quaternion_rate_to_omega(q_t[1:-1], diff)
        scale = 1.0 + np.abs(qdot_t).max()
        assert np.abs(diff - qdot_t[1:-1]).max() < 2e-5 * scale, name
    assert sol.joints["h"].q.shape == sol.t.shape  # one coordinate: (T,)
    assert sol.joints["p"].q.shape == (*sol.t.shape, 3)
    spherical = sol.joints["s"]
    assert spherical.q.shape == (*sol.t.shape, 4) and spherical.qdot.shape == (*sol.t.shape, 3)
    # rotation vector: angle times axis of the quaternion
    rv = np.asarray(spherical.rotation_vector)
    R = np.asarray(so3_exp(jnp.asarray(rv)))
    np.testing.assert_allclose(R, np.asarray(ep_to_A(spherical.q)), rtol=0, atol=ROUND_OFF)
    with pytest.raises(KeyError, match=r"no joint 'nope'.*\['h', 'u', 'c', 's', 'p', 't', 'g'\]"):
        sol.joints["nope"]


def test_unwrapping_over_revolutions_in_kinematics():
    """The example of the guide (Kinematics, dynamics and results: joint coordinates): a
    crank set to q = 4 rad and driven at 10 rad/s for 2 s (about three revolutions) in a
    kinematic analysis reads q = 4 + 10 t, continuous, starting at 4.0 (not 4 - 2 pi); the
    page shows what it prints."""
    page = (DOCS / "guide/basics.md").read_text()
    code, shown = next((c, s) for c, s in EXAMPLE.findall(page) if "set_joint_state" in c)
    printed, ns = run_example(code)
    assert_prints(printed, shown, rtol=ROUND_OFF)
    sol, pin = ns["sol"], ns["pin"]
    t = np.asarray(sol.t)
    np.testing.assert_allclose(pin.q, 4.0 + 10.0 * t, rtol=ROUND_OFF)
    np.testing.assert_allclose(pin.qdot, 10.0, rtol=ROUND_OFF)
    assert float(pin.q[-1]) > 4.0 + 3 * 2 * math.pi


def _spinning(model, angles, axis):
    """A Solution (no simulation) in which every body turns about ``axis`` through the
    origin by ``angles`` (T,), with the matching velocities."""
    n = len(angles)
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    R = np.asarray(so3_exp(jnp.asarray(angles[:, None] * axis)))
    rate = np.gradient(angles, 0.01)
    r = np.einsum("tij,bj->tbi", R, np.asarray(model.r0))
    A = np.einsum("tij,bjk->tbik", R, np.asarray(model.A0))
    rdot = np.cross(rate[:, None, None] * axis, r)
    omega = np.einsum("tbji,tj->tbi", A, rate[:, None] * axis)
    z = np.zeros_like(r)
    return mbd.Solution(
        t=np.arange(n) * 0.01, r=r, A=A, rdot=rdot, omega=omega, rddot=z, omegadot=z,
        lam=np.zeros((n, model.nc)), iterations=np.zeros(n, int), status=np.zeros(n, int),
        residual=np.zeros(n), body_names=model.body_names,
        constraint_names=model.constraint_names, joint_definitions=model.joints,
    )  # fmt: skip


def test_unwrapping_and_quaternion_sign_over_revolutions():
    """The whole pendulum-on-a-ball model turned by 3.3 revolutions about the ball's body
    axis (no simulation): the spherical joint's quaternion stays continuous (no sign flips
    at each half turn), starts on the side of the quaternion set, and its rotation vector
    grows continuously up to its 2 pi singularity; a revolute joint to the ground turned the
    same way unwraps; a leading batch axis (as simulate_batch's) gives the same values."""
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, 0.0))
    b.add_body("bob", mass=1.0, inertia=[0.01, 0.02, 0.03], r=(0, 0, -1))
    b.add_body("arm", mass=1.0, inertia=[0.01, 0.02, 0.03], r=(0, 0, 1))
    b.spherical("ball", body_i="ground", body_j="bob", point=(0, 0, 0))
    b.revolute("hinge", body_i="ground", body_j="arm", point=(0, 0, 0), axis=(0, 0, 1))
    b.set_joint_state("ball", q=(-1.0, 0.0, 0.0, 0.0))  # the identity, on the w < 0 side
    model = b.build()
    angles = np.linspace(0.0, 3.3 * 2 * np.pi, 400)
    sol = _spinning(model, angles, (0, 0, 1))
    ball, hinge = sol.joints["ball"], sol.joints["hinge"]
    np.testing.assert_allclose(hinge.q, angles, rtol=0, atol=ROUND_OFF * angles.max())
    np.testing.assert_allclose(hinge.qdot, np.gradient(angles, 0.01), rtol=0, atol=ROUND_OFF)
    expected = -np.stack([np.cos(angles / 2), 0 * angles, 0 * angles, np.sin(angles / 2)], 1)
    np.testing.assert_allclose(ball.q, expected, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(ball.qdot[:, 2], np.gradient(angles, 0.01), rtol=0, atol=ROUND_OFF)
    first = (angles > 0.01) & (angles < 1.9 * np.pi)  # between its 2 pi singularities
    rv_angle = 2 * np.pi - angles[first]  # the w < 0 side: 2 pi - angle about -z = angle
    np.testing.assert_allclose(ball.rotation_vector[first, 2], -rv_angle, rtol=0, atol=ROUND_OFF)
    batch = mbd.Solution(
        **{k: jnp.stack([getattr(sol, k)] * 2) for k in mbd.Solution._ARRAYS},
        body_names=sol.body_names, constraint_names=sol.constraint_names,
        joint_definitions=mbd.stack_models([model, model]).joints,
    )  # fmt: skip
    np.testing.assert_array_equal(batch.joints["hinge"].q[1], hinge.q)
    np.testing.assert_array_equal(batch.joints["ball"].q[1], ball.q)


def test_set_joint_state_errors():
    b = chain(states={})
    with pytest.raises(mbd.ModelError, match=r"unknown joint 'x'.*\['h', 'u', 'c'"):
        b.set_joint_state("x", q=0.1)
    with pytest.raises(mbd.ModelError, match=r"joint 'u' \(universal\).q: expected 2 numbers"):
        b.set_joint_state("u", q=0.1)
    with pytest.raises(mbd.ModelError, match=r"joint 's' \(spherical\).qdot: expected 3"):
        b.set_joint_state("s", qdot=(1.0, 0.0, 0.0, 0.0))
    with pytest.raises(mbd.ModelError, match=r"joint 'h' \(revolute\).q: non-finite"):
        b.set_joint_state("h", q=float("nan"))
    with pytest.raises(mbd.ModelError, match=r"joint 'h' \(revolute\).q: expected a number"):
        b.set_joint_state("h", q="0.5")
    with pytest.raises(mbd.ModelError, match="zero quaternion"):
        b.set_joint_state("s", q=(0.0, 0.0, 0.0, 0.0))
    with pytest.raises(mbd.ModelError, match="give q, qdot or both"):
        b.set_joint_state("h")
    with pytest.warns(mbd.AdjustmentWarning, match="norm 2 normalised"):
        b.set_joint_state("s", q=(2.0, 0.0, 0.0, 0.0))
    # a four-bar: the last joint closes the loop and cannot be set; its tree joints can
    with pytest.raises(mbd.ModelError, match=r"joint 'D' .* closes a loop.*'A', 'B', 'C'"):
        four_bar().set_joint_state("D", q=0.1).build()
    model = four_bar().set_joint_state("A", q=0.1).build()
    np.testing.assert_allclose(initial_coordinates(model, "A")[0], 0.1, rtol=ROUND_OFF)


def test_loops_close_from_tree_joint_states():
    """Tree joints set consistently close the loop exactly (the closing joint reads the
    implied angle); set alone, the loop opens and the consistent start closes it, after which
    the joint coordinates report the actual (shifted) values."""
    b = four_bar().set_joint_state("A", q=0.1).set_joint_state("B", q=-0.1)
    model = b.set_joint_state("C", q=0.1).build()  # a parallelogram turned by 0.1 rad
    phi = constraint_values(model, model.r0, model.A0, 0.0)
    assert np.abs(np.asarray(phi)).max() < ROUND_OFF
    np.testing.assert_allclose(initial_coordinates(model, "D")[0], -0.1, rtol=ROUND_OFF)
    model = four_bar().set_joint_state("A", q=0.1).build()
    assert np.abs(np.asarray(constraint_values(model, model.r0, model.A0, 0.0))).max() > 0.05
    (r, A, rdot, omega, *_), _, _ = mbd.consistent_initial_state(model, redundant=True)
    assert np.abs(np.asarray(constraint_values(model, r, A, 0.0))).max() < ROUND_OFF
    state = [jnp.asarray(x)[None] for x in (r, A, rdot, omega)]
    q = {d.name: float(joint_coordinates(d, *state).q[0]) for d in model.joints}
    assert abs(q["A"] - 0.1) < 6e-3  # shifted a little by the projection (1.4e-3 here)
    np.testing.assert_allclose(q["A"] + q["B"] + q["C"] + q["D"], 0.0, rtol=0, atol=ROUND_OFF)


def four_bar() -> mbd.ModelBuilder:
    b = mbd.ModelBuilder("four bar", gravity=(0.0, 0.0, 0.0))
    for name, r in (("crank", (0, 0, 0.5)), ("coupler", (0.5, 0, 1)), ("rocker", (1, 0, 0.5))):
        b.add_body(name, mass=1.0, inertia=[0.01, 0.01, 0.01], r=r)
    y = (0, 1, 0)
    b.revolute("A", body_i="ground", body_j="crank", point=(0, 0, 0), axis=y)
    b.revolute("B", body_i="crank", body_j="coupler", point=(0, 0, 1), axis=y)
    b.revolute("C", body_i="coupler", body_j="rocker", point=(1, 0, 1), axis=y)
    b.revolute("D", body_i="rocker", body_j="ground", point=(1, 0, 0), axis=y)
    return b


def test_joint_definitions_round_trip_through_model_files(tmp_path, chain_model):
    """save_model keeps the joints' frames, conventions and set values (the initial state
    reads the same after loading); files without them still load (no joint coordinates)."""
    again = mbd.load_model(mbd.save_model(chain_model, tmp_path / "chain.json"))
    assert again.joint_names == chain_model.joint_names
    for d, e in zip(chain_model.joints, again.joints, strict=True):
        assert (d.kind, d.body_i, d.body_j, d.sign) == (e.kind, e.body_i, e.body_j, e.sign)
        for key in ("s_bar_i", "s_bar_j", "frame_i", "frame_j", "offset", "q_start"):
            np.testing.assert_allclose(getattr(d, key), getattr(e, key), atol=1e-15)
    np.testing.assert_allclose(initial_coordinates(again, "h")[0], 4.0, rtol=ROUND_OFF)
    old = mbd.models.single_pendulum()  # a shipped file at GCON level, without joints
    assert mbd.load_model(mbd.save_model(old, tmp_path / "old.json")).joints == ()


# ----------------------------------------------------------------------------- MuJoCo

try:
    import mujoco
except ImportError:  # the mjcf extra: MuJoCo's parser and the reference of the tests below
    mujoco = None
NEEDS_MUJOCO = pytest.mark.skipif(mujoco is None, reason="needs mujoco (the mjcf extra)")


def mujoco_states(m, *, t_end, dt=1e-4, every=1e-3):
    """qpos, qvel of MuJoCo's RK4 at dt from the first keyframe, every ``every`` seconds."""
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, dt
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.ctrl[:] = 0.0
    mujoco.mj_forward(m, d)
    stride, qpos, qvel = round(every / dt), [], []
    for k in range(round(t_end / dt) + 1):
        if k % stride == 0:
            qpos.append(d.qpos.copy())
            qvel.append(d.qvel.copy())
        mujoco.mj_step(m, d)
    return np.array(qpos), np.array(qvel)


def _stacked(sol, names, field):
    return np.stack([np.asarray(getattr(sol.joints[n], field)) for n in names], axis=1)


@NEEDS_MUJOCO
def test_arm_joint_coordinates_match_mujoco():
    """The MJCF arm (three hinges on skew axes) from its keyframe: sol.joints is MuJoCo's
    qpos and qvel at t = 0 to round-off, and over 0.5 s within RK4's error at h = 1e-3 (the
    default integrator, rkmk, against MuJoCo's RK4 at 1e-4; measured 3.5e-9 rad and
    3.6e-8 rad/s)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = mbd.load_model(ARM)
    names = ("j1", "j2", "j3")
    assert model.joint_names == names
    sol = mbd.simulate(model, t_end=0.5, h=1e-3)
    qpos, qvel = mujoco_states(mujoco.MjModel.from_xml_path(str(ARM)), t_end=0.5)
    q, qdot = _stacked(sol, names, "q"), _stacked(sol, names, "qdot")
    np.testing.assert_allclose(q[0], qpos[0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(qdot[0], qvel[0], rtol=0, atol=ROUND_OFF)
    assert sol.integrator == "rkmk"
    assert np.abs(q - qpos).max() < 2e-8
    assert np.abs(qdot - qvel).max() < 2e-7


# slow: this gen_alpha run compiles for ~20 s; in the default suite the arm above checks
# sol.joints against MuJoCo, test_mjcf_keyframes_through_joint_states the keyframes and
# tests/test_joint_dynamics.py MJCF damping against MuJoCo
@NEEDS_MUJOCO
@pytest.mark.slow
def test_acrobot_joint_coordinates_match_mujoco(tmp_path):
    """dm_control's acrobot (read from the installed package; a keyframe added in memory
    with MuJoCo's model editor, written to a temporary file), with its joint damping
    (jaxmbd.forces.joint_dynamics); MuJoCo's armature is set to zero in memory (the acrobot has
    none) and its control to zero. From (2.5, -1.0) rad at (1.0, -2.0) rad/s, gen_alpha at
    h = 1e-3 follows MuJoCo's RK4 at 1e-4 over 1 s (measured 3.0e-5 rad, 1.6e-4 rad/s)."""
    pytest.importorskip("dm_control")
    import dm_control

    source = Path(dm_control.__file__).parent / "suite" / "acrobot.xml"
    spec = mujoco.MjSpec.from_file(str(source))
    key = spec.add_key()
    key.qpos, key.qvel = [2.5, -1.0], [1.0, -2.0]
    spec.compile()
    path = tmp_path / "acrobot.xml"
    path.write_text(spec.to_xml())
    with warnings.catch_warnings():  # damping, actuator, floor contacts: listed, ignored
        warnings.simplefilter("ignore", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    names = ("shoulder", "elbow")
    assert model.joint_names == names
    sol = mbd.simulate(model, t_end=1.0, h=1e-3)
    m = mujoco.MjModel.from_xml_path(str(path))
    m.dof_armature[:] = 0.0
    qpos, qvel = mujoco_states(m, t_end=1.0)
    q, qdot = _stacked(sol, names, "q"), _stacked(sol, names, "qdot")
    np.testing.assert_allclose(q[0], [2.5, -1.0], atol=1e-14)
    np.testing.assert_allclose(qdot[0], [1.0, -2.0], atol=1e-13)
    assert np.abs(q - qpos).max() < 2e-4
    assert np.abs(qdot - qvel).max() < 1e-3


MULTI = """<mujoco><compiler angle="radian"/><option><flag contact="disable"/></option>
<worldbody>
  <body name="hinged" pos="0 0 1"><joint name="h" axis="0 0.6 0.8" ref="0.4"/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.02" mass="1"/>
    <body name="ballbody" pos="0.4 0 0" euler="0.2 0 0.3"><joint name="ball" type="ball"/>
      <geom type="box" pos="0.1 0.02 0" size="0.1 0.04 0.02" mass="0.5"/></body></body>
  <body name="u" pos="2 0 1"><joint name="u1" axis="1 0 0"/><joint name="u2" axis="0 1 0"/>
    <geom size="0.1" pos="0 0 -0.2" mass="1"/>
    <body name="c" pos="0 0 -0.5"><joint name="c1" axis="0 0 1"/>
      <joint name="c2" type="slide" axis="0 0 -1" ref="0.1"/>
      <geom type="box" size="0.1 0.05 0.1" pos="0.05 0 0" mass="1"/></body></body>
  <body name="floating" pos="-2 0 1"><freejoint/><geom size="0.1" mass="1"/>
    <body name="leaf" pos="0.3 0 0"><joint name="leafhinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3"/></body></body>
  <body name="hopper" pos="0 2 1"><joint name="rootx" type="slide" axis="1 0 0"/>
    <joint name="rootz" type="slide" axis="0 0 1"/><joint name="rooty" axis="0 1 0"/>
    <geom type="box" size="0.1 0.05 0.2" pos="0 0 0.1" mass="1"/></body>
  <body name="tri" pos="0 -2 1"><joint name="t1" axis="1 0 0"/><joint name="t2" axis="0 1 0"/>
    <joint name="t3" axis="0 0 1"/><geom type="box" size="0.1 0.05 0.02" mass="1"/></body>
  <body name="xyz" pos="3 -2 1"><joint name="sx" type="slide" axis="1 0 0"/>
    <joint name="sy" type="slide" axis="0 1 0"/><joint name="sz" type="slide" axis="0 0 1"/>
    <geom size="0.1" mass="1"/>
    <body name="xyzleaf" pos="0 0 -0.3"><joint name="xyzhinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.3"/></body></body>
</worldbody>
<keyframe><key name="k" qpos="{qpos}" qvel="{qvel}"/></keyframe></mujoco>"""


@NEEDS_MUJOCO
def test_mjcf_keyframes_through_joint_states(tmp_path):
    """A keyframe sets the library joints through set_joint_state (free bodies and three
    slides, which are no library joint, are placed with their subtrees): the initial body
    states are MuJoCo's kinematics of (qpos, qvel) exactly, and each joint's coordinates at
    t = 0 are MuJoCo's qpos and qvel: a hinge with ``ref`` beyond pi (5.0 rad, not
    5.0 - 2 pi), a ball (quaternion, angular velocity in the child frame), two hinges as a
    universal joint (MuJoCo's hinge order), hinge + slide on opposite axes as a cylindrical
    joint (slide, angle) with ``ref``, slide-slide-hinge as a planar joint (the hopper's
    rootx, rootz, rooty: a left-handed order, so the angle's sign is flipped inside), three
    hinges as a spherical joint (the quaternion of their product)."""
    qball = np.array([0.8, 0.3, -0.4, 0.2])
    qball /= np.linalg.norm(qball)
    free = [-1.8, 0.2, 1.1, 0.9, 0.1, 0.3, -0.2]
    qpos = [5.0, *qball, 0.3, -0.7, 2.8, 0.25, *free, 0.6, 0.1, -0.05, -1.2, 0.4, 0.5, -0.6,
            0.05, -0.1, 0.15, 0.7]  # fmt: skip
    qvel = np.linspace(-1.5, 2.0, 25)
    path = tmp_path / "multi.xml"
    path.write_text(MULTI.format(qpos=" ".join(map(str, qpos)), qvel=" ".join(map(str, qvel))))
    model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in model.body_names]
    np.testing.assert_allclose(model.r0, d.xipos[ids], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(model.A0, d.xmat[ids].reshape(-1, 3, 3), rtol=0, atol=ROUND_OFF)
    vel = np.zeros(6)
    for k, b in enumerate(ids):
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
        np.testing.assert_allclose(model.A0[k] @ model.omega0[k], vel[:3], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(model.rdot0[k], vel[3:], rtol=0, atol=ROUND_OFF)
    assert set(model.joint_names) == {"h", "ball", "u1+u2", "c1+c2", "leafhinge",
                                      "rootx+rootz+rooty", "t1+t2+t3", "xyzhinge"}  # fmt: skip

    def adr(name):
        return int(m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)])

    def dof(name):
        return int(m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)])

    expected = {  # joint: (qpos entries, qvel entries) of its coordinates
        "h": (["h"], ["h"]),
        "u1+u2": (["u1", "u2"], ["u1", "u2"]),
        "c1+c2": (["c2", "c1"], ["c2", "c1"]),  # (slide, angle)
        "leafhinge": (["leafhinge"], ["leafhinge"]),
        "rootx+rootz+rooty": (["rootx", "rootz", "rooty"], ["rootx", "rootz", "rooty"]),
        "xyzhinge": (["xyzhinge"], ["xyzhinge"]),
    }
    for name, (pos, rate) in expected.items():
        q, qdot = initial_coordinates(model, name)
        np.testing.assert_allclose(
            q, [qpos[adr(n)] for n in pos], rtol=0, atol=ROUND_OFF, err_msg=name
        )
        np.testing.assert_allclose(qdot, [qvel[dof(n)] for n in rate], rtol=0, atol=ROUND_OFF)
    assert initial_coordinates(model, "h")[0] == pytest.approx(5.0, rel=ROUND_OFF)
    q, qdot = initial_coordinates(model, "ball")
    np.testing.assert_allclose(q, qball, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(qdot, qvel[1:4], rtol=0, atol=ROUND_OFF)
    # three hinges: the quaternion of Rx(t1) Ry(t2) Rz(t3), and the rates mapped to the child
    t = [qpos[adr(n)] for n in ("t1", "t2", "t3")]
    R = np.asarray(so3_exp(jnp.asarray([t[0], 0, 0])) @ so3_exp(jnp.asarray([0, t[1], 0])))
    R = R @ np.asarray(so3_exp(jnp.asarray([0, 0, t[2]])))
    q, _ = initial_coordinates(model, "t1+t2+t3")
    np.testing.assert_allclose(np.asarray(ep_to_A(q)), R, rtol=0, atol=ROUND_OFF)
    # the reference pose: every coordinate is MuJoCo's qpos0 (the hinge's ref, 0.4)
    ref = mbd.load_model(path, keyframe=None)
    assert initial_coordinates(ref, "h")[0] == pytest.approx(0.4, rel=ROUND_OFF)
    np.testing.assert_allclose(
        initial_coordinates(ref, "c1+c2")[0], [0.1, 0.0], rtol=0, atol=ROUND_OFF
    )


@NEEDS_MUJOCO
def test_mjcf_joint_names_are_mujocos(tmp_path):
    """One MuJoCo hinge, slide or ball is one jaxmbd joint of the same name; an equality
    connect is a spherical joint (named as the equality), a weld has no coordinates."""
    model = mbd.load_model(DATA / "rssr_loop.xml")
    assert model.joint_names == ("j1", "s1", "j3", "closure")
    assert [d.kind for d in model.joints] == ["revolute", "spherical", "revolute", "spherical"]
    path = tmp_path / "weld.xml"
    path.write_text(
        """<mujoco><option><flag contact="disable"/></option><worldbody>
        <body name="a" pos="0 0 1"><joint name="h" axis="0 1 0"/><geom size="0.1" mass="1"/>
        </body><body name="b" pos="0.5 0 1"><freejoint/><geom size="0.1" mass="1"/></body>
        </worldbody><equality><weld name="w" body1="a" body2="b"/></equality></mujoco>"""
    )
    model = mbd.load_model(path)
    assert model.joint_names == ("h",) and "w" in model.constraint_joints
