"""MuJoCo's sensor kinds against MuJoCo's own ``sensordata`` on the same states.

Each kind is read by :func:`jaxmbd.read_sensors` at random joint-space states (the "joint"
formulation's forward kinematics and dynamics) and compared with ``mj_forward`` on the same
file with the same qpos, qvel and ctrl (1e-9); the absolute formulations read the same
values from a run's first row. Touch, whose contact forces differ by law (jaxmbd's
compliant law, MuJoCo's solver), is checked at rest against the weight it carries.
"""

from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

mujoco = pytest.importorskip("mujoco")

# a yaw-pitch universal joint, an elbow with three actuators, a slide with a position
# servo, a ball wrist with a jointless hand merged into it, a tumbling free body; sites
# rotated and offset; every sensor kind of this module plain, on the world and against a
# reference frame of each object type
TREE_XML = """
<mujoco model="sensor_tree">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <site name="world_site" pos="0.3 -0.2 0.4" euler="10 20 30"/>
    <body name="base" pos="0 0 1" euler="5 0 10">
      <joint name="yaw" type="hinge" axis="0 0 1"/>
      <joint name="pitch" type="hinge" axis="0 1 0"/>
      <inertial pos="0.02 0.01 -0.1" euler="5 10 0" mass="1.5" diaginertia="0.04 0.03 0.02"/>
      <geom type="box" size="0.05 0.05 0.05" contype="0" conaffinity="0"/>
      <site name="base_site" pos="0.03 -0.02 -0.05" euler="0 30 -20"/>
      <body name="upper" pos="0 0 -0.3" euler="0 0 30">
        <joint name="elbow" type="hinge" axis="1 0.2 0"/>
        <inertial pos="0 0.02 -0.2" euler="10 0 5" mass="0.8" diaginertia="0.02 0.018 0.005"/>
        <geom name="upper_geom" type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02"
              contype="0" conaffinity="0"/>
        <site name="upper_site" pos="0.01 0.02 -0.1" euler="-30 15 60"/>
        <body name="slider" pos="0 0 -0.4">
          <joint name="extend" type="slide" axis="0.1 0 1"/>
          <inertial pos="0.01 0 -0.05" mass="0.4" diaginertia="0.003 0.002 0.001"/>
          <site name="slider_site" pos="0 0.01 -0.02" euler="20 0 0"/>
          <body name="wrist" pos="0 0 -0.1">
            <joint name="ball" type="ball"/>
            <inertial pos="0 0.01 -0.04" euler="0 20 10" mass="0.3"
                      diaginertia="0.002 0.0015 0.001"/>
            <site name="wrist_site" pos="0.02 0 -0.03" euler="0 -40 25"/>
            <body name="hand" pos="0.03 0 -0.08">
              <inertial pos="0 0 0" mass="0.2" diaginertia="0.001 0.0008 0.0006"/>
              <site name="hand_site" pos="0.01 0.01 0" euler="15 15 15"/>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="tumbler" pos="1 0 2" euler="10 20 30">
      <freejoint name="free"/>
      <inertial pos="0.1 0 0" euler="0 15 0" mass="0.5" diaginertia="0.004 0.006 0.008"/>
      <site name="imu" pos="0.2 0.05 -0.03" euler="45 0 -20"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="m_elbow" joint="elbow" gear="2"/>
    <position name="p_extend" joint="extend" kp="30" kv="2" ctrlrange="-1 1"/>
    <velocity name="v_elbow" joint="elbow" kv="3" gear="1.5" forcerange="-2 2"/>
    <general name="g_elbow" joint="elbow" gainprm="4" biasprm="0.5 -6 -0.7"/>
  </actuator>
  <sensor>
    <subtreecom name="com_base" body="base"/>
    <subtreecom name="com_slider" body="slider"/>
    <subtreecom name="com_world" body="world"/>
    <subtreelinvel name="linvel_base" body="base"/>
    <subtreelinvel name="linvel_tumbler" body="tumbler"/>
    <subtreelinvel name="linvel_world" body="world"/>
    <subtreeangmom name="angmom_upper" body="upper"/>
    <subtreeangmom name="angmom_wrist" body="wrist"/>
    <subtreeangmom name="angmom_world" body="world"/>
    <framepos name="pos_hand" objtype="site" objname="hand_site"/>
    <framepos name="pos_world" objtype="site" objname="world_site"/>
    <framepos name="pos_rel_site" objtype="site" objname="hand_site" reftype="site"
              refname="upper_site"/>
    <framepos name="pos_rel_body" objtype="body" objname="wrist" reftype="xbody"
              refname="base"/>
    <framepos name="pos_world_rel" objtype="site" objname="world_site" reftype="body"
              refname="upper"/>
    <framepos name="pos_rel_world" objtype="site" objname="imu" reftype="site"
              refname="world_site"/>
    <framequat name="quat_hand" objtype="site" objname="hand_site"/>
    <framequat name="quat_rel" objtype="site" objname="wrist_site" reftype="geom"
               refname="upper_geom"/>
    <framequat name="quat_world_rel" objtype="site" objname="world_site" reftype="site"
               refname="imu"/>
    <framexaxis name="xaxis_body" objtype="xbody" objname="upper"/>
    <frameyaxis name="yaxis_rel" objtype="site" objname="slider_site" reftype="body"
                refname="base"/>
    <framezaxis name="zaxis_world" objtype="site" objname="world_site"/>
    <framezaxis name="zaxis_rel" objtype="body" objname="tumbler" reftype="site"
                refname="wrist_site"/>
    <framelinvel name="linvel_hand" objtype="site" objname="hand_site"/>
    <framelinvel name="linvel_rel" objtype="site" objname="hand_site" reftype="site"
                 refname="upper_site"/>
    <framelinvel name="linvel_world_rel" objtype="site" objname="world_site" reftype="xbody"
                 refname="wrist"/>
    <framelinvel name="linvel_body_rel" objtype="body" objname="tumbler" reftype="body"
                 refname="slider"/>
    <frameangvel name="angvel_wrist" objtype="xbody" objname="wrist"/>
    <frameangvel name="angvel_rel" objtype="site" objname="imu" reftype="site"
                 refname="base_site"/>
    <frameangvel name="angvel_world_rel" objtype="site" objname="world_site" reftype="body"
                 refname="wrist"/>
    <actuatorfrc name="frc_m_elbow" actuator="m_elbow"/>
    <actuatorfrc name="frc_extend" actuator="p_extend"/>
    <actuatorfrc name="frc_v_elbow" actuator="v_elbow"/>
    <actuatorfrc name="frc_g_elbow" actuator="g_elbow"/>
    <jointactuatorfrc name="jfrc_elbow" joint="elbow"/>
    <jointactuatorfrc name="jfrc_extend" joint="extend"/>
    <force name="force_base" site="base_site"/>
    <force name="force_upper" site="upper_site"/>
    <force name="force_wrist" site="wrist_site"/>
    <force name="force_imu" site="imu"/>
    <torque name="torque_base" site="base_site"/>
    <torque name="torque_slider" site="slider_site"/>
    <torque name="torque_wrist" site="wrist_site"/>
    <torque name="torque_imu" site="imu"/>
  </sensor>
</mujoco>
"""

# MuJoCo's sensor types by the names in TREE_XML's tags
KINDS = {
    "subtreecom": "SUBTREECOM",
    "subtreelinvel": "SUBTREELINVEL",
    "subtreeangmom": "SUBTREEANGMOM",
    "framepos": "FRAMEPOS",
    "framequat": "FRAMEQUAT",
    "frameaxes": ("FRAMEXAXIS", "FRAMEYAXIS", "FRAMEZAXIS"),
    "framelinvel": "FRAMELINVEL",
    "frameangvel": "FRAMEANGVEL",
    "actuatorfrc": "ACTUATORFRC",
    "jointactuatorfrc": "JOINTACTFRC",
    "force": "FORCE",
    "torque": "TORQUE",
}


def _random_state(m, rng):
    """A random (qpos, qvel, ctrl): hinges and slides spread, ball and free quaternions
    random, controls beyond their ranges too."""
    qpos = np.array(m.qpos0) + rng.normal(size=m.nq) * 0.6
    for j in range(m.njnt):
        adr = m.jnt_qposadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            q = rng.normal(size=4)
            qpos[adr : adr + 4] = q / np.linalg.norm(q)
        elif m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            q = rng.normal(size=4)
            qpos[adr + 3 : adr + 7] = q / np.linalg.norm(q)
    return qpos, rng.normal(size=m.nv) * 1.5, rng.uniform(-1.5, 1.5, size=m.nu)


def _sensordata(m, qpos, qvel, ctrl):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(m, d)
    return np.array(d.sensordata)


@pytest.fixture(scope="module")
def tree_readings(tmp_path_factory):
    """(MuJoCo model, {sensor name: (ours (S, dim), MuJoCo's (S, dim))}) at four random
    states (one compiled program for all of them)."""
    path = tmp_path_factory.mktemp("sensors") / "tree.xml"
    path.write_text(TREE_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    rng = np.random.default_rng(7)
    states = [_random_state(m, rng) for _ in range(4)]
    theirs = np.stack([_sensordata(m, *s) for s in states])
    rows = [mbd.read_sensors(model, q, v, controls=u) for q, v, u in states]  # one program
    ours = {name: np.stack([row[name] for row in rows]) for name in rows[0]}
    out = {}
    for k in range(m.nsensor):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)
        a, n = m.sensor_adr[k], m.sensor_dim[k]
        out[name] = (np.asarray(ours[name]), theirs[:, a : a + n], int(m.sensor_type[k]))
    return m, model, states, out


def _errors(readings, kind):
    types = KINDS[kind]
    types = (types,) if isinstance(types, str) else types
    wanted = {int(getattr(mujoco.mjtSensor, f"mjSENS_{t}")) for t in types}
    errors = {}
    for name, (ours, theirs, stype) in readings.items():
        if stype not in wanted:
            continue
        if stype == int(mujoco.mjtSensor.mjSENS_FRAMEQUAT):  # up to sign
            theirs = np.where(np.sum(ours * theirs, -1, keepdims=True) < 0, -theirs, theirs)
        assert np.ptp(theirs) > 1e-3 or kind in ("force", "torque"), (name, theirs)
        errors[name] = float(np.max(np.abs(ours - theirs)))
    assert errors, kind
    return errors


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_sensor_kind_matches_mujoco_sensordata(tree_readings, kind):
    """Every sensor of one MuJoCo kind (on sites, bodies, inertial and body frames, geoms,
    the world; against reference frames of each object type) equals MuJoCo's sensordata
    at four random states with random controls, to 1e-9."""
    _, _, _, readings = tree_readings
    errors = _errors(readings, kind)
    assert max(errors.values()) < 5e-13, errors


def test_free_body_receives_no_interaction_wrench(tree_readings):
    """Closed form: a free body without contact receives no wrench from the world (its
    rates of momentum are its weight's), whatever its motion."""
    _, _, _, readings = tree_readings
    for name in ("force_imu", "torque_imu"):
        np.testing.assert_allclose(readings[name][0], 0.0, rtol=0, atol=ROUND_OFF)


@pytest.mark.slow
def test_absolute_formulation_reads_the_same_at_the_start(tree_readings):
    """The absolute formulations' body states, accelerations and multipliers give every
    one of these kinds: the first row of an rA run (the reference pose at rest, random
    controls) against sensordata, 1e-9 (the interaction wrenches from rA's multipliers)."""
    m, model, states, _ = tree_readings
    ctrl = states[0][2]
    sol = mbd.simulate(model, formulation="rA", t_end=1e-3, h=1e-3,
                       controls=jnp.asarray(ctrl)[None])  # fmt: skip
    theirs = _sensordata(m, np.array(m.qpos0), np.zeros(m.nv), ctrl)
    worst = {}
    for k in range(m.nsensor):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)
        a, n = m.sensor_adr[k], m.sensor_dim[k]
        ours, ref = np.asarray(sol.sensors[name][0]), theirs[a : a + n]
        if int(m.sensor_type[k]) == int(mujoco.mjtSensor.mjSENS_FRAMEQUAT):
            ref = ref if ours @ ref >= 0 else -ref
        worst[name] = float(np.max(np.abs(ours - ref)))
    assert max(worst.values()) < 1e-9, worst


# a 2 kg box lying on the floor on its four bottom corners; zones around the whole bottom,
# around its +x half (two corners) and on the top
TOUCH_XML = """
<mujoco model="touch_rest">
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="box" pos="0 0 0.1">
      <freejoint name="free"/>
      <geom type="box" size="0.2 0.1 0.1" mass="2"/>
      <site name="bottom" type="box" pos="0 0 -0.1" size="0.25 0.15 0.02"/>
      <site name="half" type="box" pos="0.1 0 -0.1" size="0.12 0.15 0.02"/>
      <site name="top" type="sphere" pos="0 0 0.1" size="0.05"/>
    </body>
  </worldbody>
  <sensor>
    <touch name="all" site="bottom"/>
    <touch name="half" site="half"/>
    <touch name="top" site="top"/>
  </sensor>
</mujoco>
"""


def test_touch_reads_the_weight_it_carries_at_rest(tmp_path):
    """Touch at rest, where contact laws agree: jaxmbd's box at its equilibrium height (the
    root of its vertical acceleration, compliant law) and MuJoCo's after 2 s of settling
    both read the weight m g on the zone around the bottom, half of it on the zone around
    two of the four corners (symmetry), and nothing on the top (1e-9 relative; MuJoCo to
    its solver's 1e-6)."""
    from scipy.optimize import brentq

    from jaxmbd.contact import with_contact
    from jaxmbd.joint_space.dynamics import accelerations

    path = tmp_path / "touch.xml"
    path.write_text(TOUCH_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    weight = 2.0 * 9.81
    tree, loops = mbd.joint_space.model_tree(model)
    run = with_contact(model, "compliant")

    def state(z):
        return jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]).at[2].set(z)

    # the vertical acceleration at height z, at rest
    lift = jax.jit(lambda z: accelerations(run, tree, loops, state(z), jnp.zeros(6), 0.0).qacc[2])

    z = brentq(lambda z: float(lift(z)), 0.099, 0.1, xtol=1e-16, rtol=1e-15)
    ours = {k: float(v[0]) for k, v in mbd.read_sensors(model, state(z), jnp.zeros(6)).items()}
    assert abs(ours["all"] - weight) < 3e-13 * weight, ours
    assert abs(ours["half"] - weight / 2) < 2e-13 * weight, ours
    assert ours["top"] == 0.0

    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    while d.time < 2.0:
        mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    theirs = dict(zip(("all", "half", "top"), d.sensordata, strict=True))
    assert abs(theirs["all"] - weight) < 1e-8 * weight, theirs
    assert abs(theirs["half"] - weight / 2) < 5e-9 * weight, theirs
    assert theirs["top"] == 0.0


DM_CONTROL = ("hopper", "cheetah", "walker", "finger", "swimmer", "manipulator")


def _dm_control_model(name):
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    return path, model, " ".join(str(w.message) for w in record)


@pytest.mark.parametrize("name", DM_CONTROL)
def test_dm_control_sensors_all_read(name):
    """dm_control's hopper, cheetah, walker, finger, swimmer and manipulator: every sensor
    of the file is a jaxmbd sensor of the same name and size, and the importer's warning
    names none."""
    path, model, message = _dm_control_model(name)
    assert "sensor" not in message, message
    m = mujoco.MjModel.from_xml_path(path)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k) for k in range(m.nsensor)]
    assert list(model.sensors.sensor_names) == names
    assert list(model.sensors.dims) == [int(x) for x in m.sensor_dim]


@pytest.mark.slow
@pytest.mark.parametrize("name", DM_CONTROL)
def test_dm_control_sensors_match_sensordata(name):
    """The same files at random states without contact (the touch sensors then read zero
    in both): every sensor equals MuJoCo's sensordata to 1e-9."""
    path, model, _ = _dm_control_model(name)
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    rng = np.random.default_rng(3)
    for _ in range(2):
        qpos, qvel, ctrl = _random_state(m, rng)
        theirs = _sensordata(m, qpos, qvel, ctrl)
        ours = mbd.read_sensors(model, qpos, qvel, controls=ctrl[: model.nu], contact="none")
        for k in range(m.nsensor):
            name_k = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)
            a, n = m.sensor_adr[k], m.sensor_dim[k]
            ref = theirs[a : a + n]
            value = np.asarray(ours[name_k])
            if int(m.sensor_type[k]) == int(mujoco.mjtSensor.mjSENS_FRAMEQUAT):
                ref = ref if value @ ref >= 0 else -ref
            np.testing.assert_allclose(value, ref, atol=1e-9, err_msg=name_k)


def test_sensor_options_survive_save_and_load(tree_readings, tmp_path):
    """A model file keeps every sensor's options (reference frames, subtrees, parents,
    zones, actuators): the loaded model's sensors equal the saved ones."""
    _, model, _, _ = tree_readings
    path = mbd.save_model(model, tmp_path / "tree.json")
    loaded = mbd.load_model(path).sensors
    saved = model.sensors
    assert (loaded.sensor_names, loaded.kinds, loaded.dims, loaded.bodies, loaded.joints) == (
        saved.sensor_names, saved.kinds, saved.dims, saved.bodies, saved.joints)  # fmt: skip
    for a, b in zip(loaded.params, saved.params, strict=True):
        assert type(a) is type(b)
        if a is not None:
            assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b),
                            strict=True):  # fmt: skip
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=ROUND_OFF)


SERVO_XML = """
<mujoco model="servo">
  <worldbody>
    <body name="rod" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kp="20" kv="1.5" gear="2" ctrlrange="-0.5 0.5"/>
  </actuator>
  <sensor>
    <actuatorfrc name="force" actuator="servo"/>
    <jointactuatorfrc name="torque" joint="hinge"/>
  </sensor>
</mujoco>
"""


@pytest.mark.slow
def test_actuator_sensors_read_each_steps_controls_along_a_run(tmp_path):
    """Along a joint-space run with a control per step (beyond the range on some), row i
    reads the controls held over the step that ended there (row 0: the first step's):
    F = kp (clip(u) - L) - kv L_dot with L = gear q (closed form on sol.qpos, sol.qvel),
    and the joint reads gear F."""
    path = tmp_path / "servo.xml"
    path.write_text(SERVO_XML)
    model = mbd.load_model(path)
    u = np.linspace(-0.9, 0.9, 20)[:, None]
    sol = mbd.simulate(model, formulation="joint", t_end=0.02, h=1e-3, controls=jnp.asarray(u))
    held = np.clip(u[np.maximum(np.arange(21) - 1, 0), 0], -0.5, 0.5)
    q, qdot = np.asarray(sol.qpos[:, 0]), np.asarray(sol.qvel[:, 0])
    force = 20 * (held - 2 * q) - 1.5 * 2 * qdot
    np.testing.assert_allclose(np.asarray(sol.sensors["force"][:, 0]), force, atol=1e-12)
    np.testing.assert_allclose(np.asarray(sol.sensors["torque"][:, 0]), 2 * force, atol=1e-12)


@pytest.mark.slow
def test_humanoid_sensors_match_sensordata_without_constraints(tmp_path):
    """dm_control's humanoid (force and torque at the ankles, knees and hips, touch,
    accelerometer, subtree velocity, on single and composed joints) with MuJoCo's
    ``constraint`` flag disabled (the engines' constraint laws differ): every sensor equals
    sensordata at a random state with random controls, 1e-9 (7.6e-11 measured)."""
    import shutil

    dm_control = pytest.importorskip("dm_control")
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    shutil.copytree(os.path.join(suite, "common"), tmp_path / "common")
    spec = mujoco.MjSpec.from_file(os.path.join(suite, "humanoid.xml"))
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    path = tmp_path / "humanoid.xml"
    path.write_text(spec.to_xml())
    model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    qpos, qvel, ctrl = _random_state(m, np.random.default_rng(0))
    theirs = _sensordata(m, qpos, qvel, ctrl)
    ours = mbd.read_sensors(model, qpos, qvel, controls=ctrl)
    assert len(ours) == m.nsensor
    for k in range(m.nsensor):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)
        a, n = m.sensor_adr[k], m.sensor_dim[k]
        np.testing.assert_allclose(np.asarray(ours[name]), theirs[a : a + n], atol=1e-9,
                                   err_msg=name)  # fmt: skip
