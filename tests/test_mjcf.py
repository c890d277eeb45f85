"""MJCF / URDF import through MuJoCo's parser, checked against MuJoCo's own simulation."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

mujoco = pytest.importorskip("mujoco")

DATA = Path(__file__).parent / "data"
ARM, LOOP = DATA / "arm3.xml", DATA / "rssr_loop.xml"


def _load(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the test models use only supported features
        return mbd.load_model(path, **options)


def mujoco_run(path, t_end, dt, every):
    """MuJoCo RK4 from the first keyframe (or qpos0 at rest): COM positions and rotations
    of bodies 1.. every ``every`` seconds, and the equality-connect gap (if any)."""
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep = dt
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    n, stride = int(round(t_end / dt)), int(round(every / dt))
    r, A, gap = [d.xipos[1:].copy()], [d.xmat[1:].reshape(-1, 3, 3).copy()], [0.0]
    for k in range(1, n + 1):
        mujoco.mj_step(m, d)
        if k % stride == 0:
            r.append(d.xipos[1:].copy())
            A.append(d.xmat[1:].reshape(-1, 3, 3).copy())
            if m.neq:
                b1, b2 = m.eq_obj1id[0], m.eq_obj2id[0]
                p1 = d.xpos[b1] + d.xmat[b1].reshape(3, 3) @ m.eq_data[0][:3]
                p2 = d.xpos[b2] + d.xmat[b2].reshape(3, 3) @ m.eq_data[0][3:6]
                gap.append(float(np.linalg.norm(p1 - p2)))
    return np.array(r), np.array(A), np.array(gap)


def _sampled(sol, every):
    h = float(sol.t[1] - sol.t[0])
    stride = int(round(every / h))
    return np.asarray(sol.r)[::stride], np.asarray(sol.A)[::stride]


def test_arm_matches_mujoco():
    """3-link spatial arm (hinges on skew axes, offset COMs, full inertias, gravity, initial
    joint rates from the keyframe): jaxmbd gen_alpha converges to MuJoCo's RK4 trajectory
    at second order, and agrees within both integrators' error estimates over 0.5 s.

    Error estimates: MuJoCo RK4 at dt = 1e-4 from the dt / 2 run; gen_alpha at h from
    Richardson, |x_h - x_2h| / (2^2 - 1). The two jaxmbd runs have the same number of steps
    (h = 2e-3 over 1 s, h = 1e-3 over 0.5 s), so they share one compilation."""
    model = _load(ARM)
    assert model.body_names == ("link1", "link2", "link3")
    T, every = 0.5, 2e-3
    r_mj, A_mj, _ = mujoco_run(ARM, T, 1e-4, every)
    r_mj2, _, _ = mujoco_run(ARM, T, 5e-5, every)
    err_mj = np.abs(r_mj - r_mj2).max()
    runs = {}
    for h in (2e-3, 1e-3):
        sol = mbd.simulate(model, formulation="rA", integrator="gen_alpha", t_end=500 * h, h=h)
        r, A = _sampled(sol, every)
        runs[h] = r[: len(r_mj)], A[: len(r_mj)]
    err = {h: np.abs(r - r_mj).max() for h, (r, _) in runs.items()}
    err_A = np.abs(runs[1e-3][1] - A_mj).max()
    richardson = np.abs(runs[1e-3][0] - runs[2e-3][0]).max() / 3.0
    print(f"arm: COM error vs MuJoCo {err}, A {err_A:.2e}, Richardson {richardson:.2e}, "
          f"MuJoCo dt error {err_mj:.1e}")  # fmt: skip
    assert err_mj < 7e-11
    assert 3.0 < err[2e-3] / err[1e-3] < 5.0, err  # second order towards MuJoCo
    assert err[1e-3] <= 2.0 * richardson + 10 * err_mj, (err, richardson)
    assert err[1e-3] < 5e-5
    assert err_A < 5e-4
    assert np.ptp(r_mj[:, 2, 2]) > 0.05  # the arm really moves


def test_loop_matches_mujoco():
    """RSSR loop closed by an equality connect: jaxmbd closes it exactly (hard constraint);
    MuJoCo's soft equality opens it by < 1e-6 m (solref 5e-4, measured 5.0e-7 m). Over 1 s
    jaxmbd converges to MuJoCo's trajectory at second order, within twice gen_alpha's
    Richardson error estimate plus the loop opening and MuJoCo's RK4 error. The two runs
    have the same step count (one compilation); the slow test below adds h = 5e-4 and
    jaxmbd's own rA at h = 2.5e-4 as a reference."""
    model = _load(LOOP)
    assert model.constraint_joints[-1] == "closure"
    T, every = 1.0, 2e-3
    r_mj, A_mj, gap = mujoco_run(LOOP, T, 1e-4, every)
    r_mj2, _, _ = mujoco_run(LOOP, T, 5e-5, every)
    err_mj = np.abs(r_mj - r_mj2).max()
    runs = {}
    for h in (2e-3, 1e-3):
        sol = mbd.simulate(model, formulation="rA", t_end=1000 * h, h=h)
        r, A = _sampled(sol, every)
        runs[h] = r[: len(r_mj)], A[: len(r_mj)]
    viol = mbd.diagnostics.joint_violation(model, sol)
    closure = np.asarray(viol.position)[:, viol.names.index("closure")]
    err = {h: np.abs(r - r_mj).max() for h, (r, _) in runs.items()}
    richardson = np.abs(runs[1e-3][0] - runs[2e-3][0]).max() / 3.0
    print(f"loop: COM error vs MuJoCo {err}, Richardson {richardson:.2e}, MuJoCo loop "
          f"opening {gap.max():.2e}, MuJoCo dt error {err_mj:.1e}, jaxmbd closure "
          f"{closure.max():.1e}")  # fmt: skip
    assert closure.max() < 4e-14
    assert 1e-8 < gap.max() < 1e-6  # MuJoCo's soft loop opens, slightly
    assert 3.0 < err[2e-3] / err[1e-3] < 5.0, err
    assert err[1e-3] <= 2.0 * richardson + gap.max() + 10 * err_mj + 1e-12, (err, richardson)
    assert np.abs(runs[1e-3][1] - A_mj).max() < 1e-3
    assert np.ptp(r_mj[:, 1, 2]) > 0.02


@pytest.mark.slow
def test_loop_convergence_against_mujoco_and_own_reference():
    model = _load(LOOP)
    T, every = 1.0, 1e-3
    r_mj, _, gap = mujoco_run(LOOP, T, 1e-4, every)
    ref = _sampled(mbd.simulate(model, formulation="rA", t_end=T, h=2.5e-4), every)[0]
    errs, errs_ref = [], []
    for h in (1e-3, 5e-4):
        r = _sampled(mbd.simulate(model, formulation="rA", t_end=T, h=h), every)[0]
        errs.append(np.abs(r - r_mj).max())
        errs_ref.append(np.abs(r - ref).max())
    assert 3.0 < errs[0] / errs[1] < 5.0
    assert 3.0 < errs_ref[0] / errs_ref[1] < 5.5
    print("loop: error vs MuJoCo", errs, "vs own rA h=2.5e-4", errs_ref, "gap", gap.max())
    assert np.abs(ref - r_mj).max() < 1e-5 + gap.max()


def test_reference_pose_masses_inertias_and_keyframes():
    m_mj = mujoco.MjModel.from_xml_path(str(ARM))
    d = mujoco.MjData(m_mj)
    mujoco.mj_forward(m_mj, d)  # qpos0: the reference pose
    ref = _load(ARM, keyframe=None)
    np.testing.assert_allclose(ref.r0, d.xipos[1:], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(ref.A0, d.xmat[1:].reshape(-1, 3, 3), rtol=0, atol=ROUND_OFF)
    np.testing.assert_array_equal(ref.rdot0, 0.0)
    np.testing.assert_allclose(ref.mass, m_mj.body_mass[1:], rtol=ROUND_OFF)
    # the full inertia of link1 as written (fullinertia, in the body frame)
    J1 = np.array([[0.004, 0.0005, -0.0003], [0.0005, 0.012, 0.0002], [-0.0003, 0.0002, 0.011]])
    np.testing.assert_allclose(ref.inertia[0], J1, rtol=0, atol=5e-16)
    key = _load(ARM)  # the first keyframe by default; by name and by index the same
    for other in (_load(ARM, keyframe="swing"), _load(ARM, keyframe=0)):
        np.testing.assert_array_equal(other.omega0, key.omega0)
    mujoco.mj_resetDataKeyframe(m_mj, d, 0)
    mujoco.mj_forward(m_mj, d)
    np.testing.assert_allclose(key.r0, d.xipos[1:], rtol=0, atol=ROUND_OFF)
    vel = np.zeros(6)
    for b in range(3):
        mujoco.mj_objectVelocity(m_mj, d, mujoco.mjtObj.mjOBJ_BODY, b + 1, vel, 0)
        np.testing.assert_allclose(key.A0[b] @ key.omega0[b], vel[:3], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(key.rdot0[b], vel[3:], rtol=0, atol=ROUND_OFF)
    assert np.abs(key.omega0).max() > 1.0
    with pytest.raises(mbd.ModelFileError, match="no keyframe 'nope'; keyframes: \\['swing'\\]"):
        mbd.load_model(ARM, keyframe="nope")
    with pytest.raises(mbd.ModelFileError, match="keyframe index 3 out of range"):
        mbd.load_model(ARM, keyframe=3)


URDF = """<?xml version="1.0"?>
<robot name="two_link">
  <link name="base"><inertial><mass value="5"/>
    <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="upper">
    <inertial><origin xyz="0 0 -0.2"/><mass value="1.5"/>
      <inertia ixx="0.02" iyy="0.021" izz="0.003" ixy="0.001" ixz="0" iyz="0.0005"/></inertial>
    <visual><origin xyz="0 0 -0.2"/><geometry><cylinder radius="0.03" length="0.4"/></geometry>
    </visual>
  </link>
  <link name="lower">
    <inertial><origin xyz="0 0 -0.15"/><mass value="0.8"/>
      <inertia ixx="0.006" iyy="0.006" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><origin xyz="0 0 -0.15"/><geometry><box size="0.04 0.04 0.3"/></geometry></visual>
    <collision><geometry><box size="0.04 0.04 0.3"/></geometry></collision>
  </link>
  <link name="tool"><inertial><origin xyz="0 0 0"/><mass value="0.2"/>
    <inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="continuous"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 1"/><axis xyz="0 1 0"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 -0.4" rpy="0.1 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="5"/>
    <dynamics damping="0.3" friction="0.05"/></joint>
  <joint name="tool_mount" type="fixed"><parent link="lower"/><child link="tool"/>
    <origin xyz="0 0 -0.3"/></joint>
</robot>
"""


def test_urdf_import_and_the_one_warning(tmp_path):
    path = tmp_path / "two_link.urdf"
    path.write_text(URDF)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mbd.load_model(path)
    ours = [w for w in caught if issubclass(w.category, mbd.mjcf.UnsupportedFeatureWarning)]
    # nothing left out: the elbow's limit is a compliant joint limit, and the one colliding
    # geom (the lower link's box) has nothing to touch, so there are no contact pairs
    assert not ours and model.contacts is None
    (limits,) = [f for f in model.forces if isinstance(f, mbd.joint_limits.JointLimits)]
    assert limits.names == ("elbow",)
    np.testing.assert_array_equal([limits.lower[0], limits.upper[0]], [-2.0, 2.0])
    # <dynamics damping friction>: joint damping and friction loss
    (dynamics,) = [f for f in model.forces if isinstance(f, mbd.joint_dynamics.JointDynamics)]
    assert dynamics.names == ("elbow",)
    np.testing.assert_array_equal([dynamics.damping[0], dynamics.friction_loss[0]], [0.3, 0.05])
    # base is fixed (the ground), the tool is welded to the lower link (masses combined)
    assert model.name == "two_link" and model.body_names == ("upper", "lower")
    np.testing.assert_allclose(model.mass, [1.5, 1.0], rtol=ROUND_OFF)
    np.testing.assert_allclose(model.r0[0], [0, 0, 0.8], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(model.inertia[0][0, 1], 0.001, rtol=ROUND_OFF)
    assert [s.kind for s in model.shapes[0]] == ["cylinder"]
    assert model.constraint_joints[:5] == ("shoulder",) * 5
    # the elbow axis: x of the lower link's frame (rolled by 0.1 about x: still x)
    axis = np.asarray(model.A0[1]) @ np.array([1.0, 0, 0])
    np.testing.assert_allclose(axis, [1, 0, 0], rtol=0, atol=ROUND_OFF)


UNSUPPORTED = """<mujoco model="everything">
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body name="a" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-1 1" limited="true" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <site name="s1" pos="0.3 0 0"/>
      <body name="b" pos="0.3 0 0" gravcomp="1">
        <joint name="slider" type="slide" axis="1 0 0" stiffness="10"/>
        <geom type="sphere" size="0.05"/>
        <site name="s2"/>
      </body>
    </body>
  </worldbody>
  <tendon><spatial name="t" armature="0.1"><site site="s1"/><site site="s2"/></spatial></tendon>
  <actuator><motor name="m" joint="hinge"/></actuator>
  <equality><joint name="couple" joint1="hinge" joint2="slider"/></equality>
</mujoco>
"""


def test_unsupported_mjcf_features_in_one_warning(tmp_path):
    path = tmp_path / "everything.xml"
    path.write_text(UNSUPPORTED)
    with pytest.warns(mbd.mjcf.UnsupportedFeatureWarning) as record:
        model = mbd.load_model(path)
    assert len(record) == 1
    text = str(record[0].message)
    # a body's single hinge or slide takes its damping and stiffness (jaxmbd.forces.joint_dynamics)
    assert "joint damping" not in text and "joint stiffness" not in text
    for item in ("tendon 't' (armature)", "gravity compensation on ['b']"):
        assert item in text, item
    # the joint coupling is an equality constraint of the model (jaxmbd.joint_space.equalities)
    assert "equality" not in text and [e.kind for e in model.equalities] == ["joint"]
    assert model.body_names == ("a", "b") and model.nc == 10  # revolute + translational
    # contacts are mapped (a and b are parent and child: MuJoCo does not collide them)
    assert "contact" not in text
    assert sorted(model.contacts.pair_names) == ["a/ground", "b/ground"]
    # the motor on the hinge is an actuator (jaxmbd.actuators)
    assert "actuator" not in text and model.actuators.actuator_names == ("m",)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.xml", "<mujoco><worldbody><body>", "MuJoCo cannot parse this file"),
        ("unknown.xml", "<mujoco><worldbody><bogus/></worldbody></mujoco>", "bogus"),
        ("broken.urdf", "<robot name='r'><link name='a'>", "invalid XML"),
        ("notrobot.urdf", "<mujoco/>", "<robot> root"),
        (
            "orphan.urdf",
            "<robot name='r'><link name='a'/><joint name='j' type='revolute'>"
            "<parent link='a'/><child link='missing'/></joint></robot>",
            "MuJoCo cannot parse this file",
        ),
    ],
)
def test_malformed_files_give_model_file_error(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(mbd.ModelFileError) as err:
        mbd.load_model(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_joint_chains_map_to_library_joints(tmp_path):
    path = tmp_path / "chains.xml"
    path.write_text(
        """<mujoco><option><flag contact="disable" gravity="disable"/></option><worldbody>
        <body name="u" pos="0 0 1"><joint name="u1" axis="1 0 0"/><joint name="u2" axis="0 1 0"/>
          <geom size="0.1" mass="1"/>
          <body name="c" pos="0 0 -0.5"><joint name="c1" type="slide" axis="0 0 1"/>
            <joint name="c2" axis="0 0 1"/><geom type="box" size="0.1 0.1 0.1" mass="1"/>
            <body name="w" pos="0.3 0 0"><geom size="0.05" mass="0.5"/></body></body>
        </body>
        <body name="free" pos="2 0 0"><freejoint/><geom size="0.1" mass="1"/></body>
        <body name="p" pos="0 2 0"><joint name="px" type="slide" axis="1 0 0"/>
          <joint name="py" type="slide" axis="0 1 0"/><joint name="pz" axis="0 0 1"/>
          <geom size="0.1" mass="1"/></body>
        <body name="t" pos="0 -2 0"><joint name="tx" type="slide" axis="1 0 0"/>
          <joint name="ty" type="slide" axis="0 1 0"/><joint name="tz" type="slide" axis="0 1 1"/>
          <geom size="0.1" mass="1"/></body>
        </worldbody></mujoco>"""
    )
    model = _load(path)
    assert model.body_names == ("u", "c", "free", "p", "t")  # w is welded into c
    np.testing.assert_array_equal(model.gravity, 0.0)  # MuJoCo's gravity flag is honoured
    # universal (3 CD + DP1), cylindrical (2 DP1 + 2 DP2), planar (2 DP1 + DP2), translation
    # (3 DP1): 2 + 2 + 6 (free) + 3 + 3 degrees of freedom
    assert model.gcon_counts() == {"DP1": 8, "DP2": 3, "D": 0, "CD": 3, "ROT": 0}
    assert 6 * model.nb - model.nc == 16
    assert set(model.constraint_joints) == {"u1+u2", "c1+c2", "px+py+pz", "tx+ty+tz"}
    np.testing.assert_allclose(model.mass, [1.0, 1.5, 1.0, 1.0, 1.0], rtol=ROUND_OFF)
    np.testing.assert_allclose(model.r0[1], [0.1, 0, 0.5], rtol=0, atol=ROUND_OFF)  # combined COM


WELDED = """<mujoco><option><flag contact="disable"/></option><worldbody>
  <body name="a" pos="0 0 1"><joint name="h" axis="0.3 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.02" mass="1"/>
    {child}
  </body>
  {outside}
</worldbody>{equality}
<keyframe><key qvel="{qvel}"/></keyframe></mujoco>"""


@pytest.mark.slow
def test_weld_equality_is_a_rigid_body(tmp_path):
    """A body welded to a pendulum by an equality weld moves as the same body merged into
    the pendulum (a child without joints). Released at rest (a keyframe with velocities that
    break the weld would be projected onto it differently). Both run formulation="rA" with
    gen_alpha: a model read from MJCF now defaults to "joint" under MuJoCo's soft
    constraints, where the weld is a soft spring (solref) that does not hold the bodies
    together rigidly (0.018 apart at both steps); rA's hard weld gives 1.6e-6 at h = 1e-3."""
    box = '<geom type="box" pos="0.1 0.05 0" size="0.1 0.05 0.03" mass="0.5"/>'
    merged, welded = tmp_path / "merged.xml", tmp_path / "welded.xml"
    merged.write_text(
        WELDED.format(
            child=f'<body name="b" pos="0.4 0 0" euler="0 0 0.5">{box}</body>',
            outside="", equality="", qvel="0",
        )
    )  # fmt: skip
    welded.write_text(
        WELDED.format(
            child="",
            outside=f'<body name="b" pos="0.4 0 1" euler="0 0 0.5"><freejoint/>{box}</body>',
            equality='<equality><weld body1="a" body2="b"/></equality>',
            qvel="0 0 0 0 0 0 0",
        )
    )  # fmt: skip
    m1, m2 = _load(merged), _load(welded)
    assert m1.body_names == ("a",) and m2.body_names == ("a", "b")
    # two discretisations of the same motion (two bodies, each updated about its own centre
    # of mass, vs one): their difference is gen_alpha's O(h^2) error, and it converges
    diffs = []
    for h in (1e-3, 5e-4):
        run = dict(formulation="rA", integrator="gen_alpha", t_end=0.5, h=h)
        s1, s2 = mbd.simulate(m1, **run), mbd.simulate(m2, **run)
        r2 = np.einsum("b,tbi->ti", np.asarray(m2.mass), np.asarray(s2.r)) / float(m2.mass.sum())
        diffs.append(
            max(
                np.abs(r2 - np.asarray(s1.r)[:, 0]).max(),
                np.abs(np.asarray(s2.A)[:, 0] - np.asarray(s1.A)[:, 0]).max(),
            )
        )
    assert diffs[0] < 1e-5 and diffs[1] < diffs[0] / 3, diffs
    weld = mbd.diagnostics.joint_violation(m2, s2)
    assert np.asarray(weld.position).max() < 1e-10
    assert np.ptp(np.asarray(s1.r)[:, 0, 2]) > 0.01
