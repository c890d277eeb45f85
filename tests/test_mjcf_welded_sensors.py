"""Force/torque sensors on bodies welded to their parent (merged into the parent's jaxmbd
body), and dm_control's quadruped (with its rangefinders) and dog, against MuJoCo C's
``sensordata`` after ``mj_forward`` on the same states.

* Without contact: every force and torque reading to 1e-9 (rangefinders 1e-10).
* With contact: jaxmbd's compliant contact forces are not MuJoCo's, so MuJoCo gets
  jaxmbd's: each active contact slot's force is applied to the MuJoCo body whose geom
  MuJoCo's own collision finds at that point (``xfrc_applied``, at the body's centre of
  mass), with MuJoCo's constraints off, and its sensors then read the same wrenches (1e-9).
  A foot welded to its shin, with a jointed claw below it: the contacts on the foot and
  the claw count, those on the shin (the same jaxmbd body) do not.

dm_control's files are read with joint limits and equalities switched off by their flags
(their constraint laws differ) and quadruped's height field hidden (``rgba`` alpha 0:
``mj_ray`` skips it, and so do jaxmbd's rangefinders; their rays against it are checked in
``tests/test_mjcf_hfield.py``).
"""

from __future__ import annotations

import os
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import same_sensor_options

import jaxmbd as mbd
from jaxmbd.contact import with_contact
from jaxmbd.forces import BodyState
from jaxmbd.joint_space import model_tree
from jaxmbd.tree import body_velocities, poses

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
OFF = ("LIMIT", "EQUALITY")


def _files(tmp, name, *, hide=()):
    """(jaxmbd model, MuJoCo model without constraints, MuJoCo model with contacts) of
    dm_control's ``name`` with limits and equalities off and the geoms ``hide`` invisible."""
    spec = mujoco.MjSpec.from_file(os.path.join(SUITE, f"{name}.xml"))
    for flag in OFF:
        spec.option.disableflags |= int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}"))
    for geom in hide:
        g = spec.geom(geom)
        g.rgba[3], g.material = 0.0, ""
    for sub in ("common", f"{name}_assets"):
        if os.path.isdir(os.path.join(SUITE, sub)) and not (tmp / sub).exists():
            os.symlink(os.path.join(SUITE, sub), tmp / sub)
    path = tmp / f"{name}.xml"
    path.write_text(spec.to_xml())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    colliding = mujoco.MjModel.from_xml_path(str(path))
    free = mujoco.MjModel.from_xml_path(str(path))
    free.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    return model, free, colliding


def _names(m, *types):
    wanted = {int(getattr(mujoco.mjtSensor, f"mjSENS_{t}")) for t in types}
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k) for k in range(m.nsensor)
            if int(m.sensor_type[k]) in wanted]  # fmt: skip


def _sensordata(m, qpos, qvel, ctrl, xfrc=None):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    if xfrc is not None:
        d.xfrc_applied[:] = xfrc
    mujoco.mj_forward(m, d)
    out = {}
    for k in range(m.nsensor):
        a, n = m.sensor_adr[k], m.sensor_dim[k]
        out[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)] = np.array(d.sensordata[a : a + n])
    return out


def _random_state(m, rng, *, height):
    qpos = np.array(m.qpos0) + rng.normal(size=m.nq) * 0.3
    qpos[:2] = rng.uniform(-10, 10, 2)
    qpos[2] = height
    q = rng.normal(size=4)
    qpos[3:7] = q / np.linalg.norm(q)
    return qpos, rng.normal(size=m.nv), rng.uniform(-1, 1, m.nu)


# a leg on a free hip: a shin on a knee, a foot welded to the shin (a sphere and a box) with
# the sensors' site, a claw on a hinge below the foot; all four touch the floor at FLOOR
FOOT_XML = """
<mujoco model="welded_foot">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="leg" pos="0 0 .5">
      <freejoint name="root"/>
      <geom name="thigh" type="capsule" fromto="0 0 0 .2 0 -.3" size=".04" mass="1"/>
      <body name="shin" pos=".2 0 -.3">
        <joint name="knee" type="hinge" axis="0 1 0"/>
        <geom name="shin" type="capsule" fromto="0 0 0 0 0 -.3" size=".03" mass=".5"/>
        <body name="foot" pos="0 0 -.3" euler="10 20 30">
          <geom name="toe" type="sphere" size=".03" pos=".04 0 0" mass=".2"/>
          <geom name="heel" type="box" size=".02 .02 .02" pos="-.03 0 .01" mass=".1"/>
          <site name="foot" pos=".01 .01 0" euler="30 -20 40"/>
          <body name="claw" pos=".06 0 0">
            <joint name="claw" type="hinge" axis="0 0 1"/>
            <geom name="claw" type="capsule" fromto="0 0 0 .06 0 0" size=".01" mass=".05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="knee"/><motor joint="claw"/></actuator>
  <sensor><force name="force" site="foot"/><torque name="torque" site="foot"/></sensor>
</mujoco>
"""
FLOOR = [0.0, 0.0, 0.574557, 0.42269, -0.4004, 0.442695, 0.681934, -1.472064, -1.747214]


def test_welded_foot_force_and_torque_match_sensordata(tmp_path):
    """The foot's force and torque (its MuJoCo body welded to the shin) at two random
    states in the air (1e-9), and on the floor with MuJoCo given jaxmbd's contact forces
    (1e-9): the shin's contact (the same jaxmbd body) left out, the foot's and the claw's
    counted; they change the readings by newtons."""
    path = tmp_path / "foot.xml"
    path.write_text(FOOT_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    assert model.nb == 3  # leg, shin (with the foot), claw
    same_sensor_options(model, tmp_path)
    m_coll = mujoco.MjModel.from_xml_path(str(path))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    rng = np.random.default_rng(4)
    states = [_random_state(m, rng, height=2.0) for _ in range(2)]
    qpos = np.array(FLOOR)
    states.append((qpos, rng.normal(size=m.nv) * 0.05, rng.uniform(-1, 1, m.nu)))
    for k, (qpos, qvel, ctrl) in enumerate(states):
        ours = mbd.read_sensors(model, qpos, qvel, controls=ctrl)
        xfrc, used = _contact_wrenches(model, m_coll, qpos, qvel)
        assert (used == 0) if k < 2 else (used >= 4)
        theirs = _sensordata(m, qpos, qvel, ctrl, xfrc)
        for n in ("force", "torque"):
            np.testing.assert_allclose(
                np.asarray(ours[n]), theirs[n], rtol=0, atol=3e-10, err_msg=n
            )
    bare = _sensordata(m, qpos, qvel, ctrl)
    assert np.abs(bare["force"] - theirs["force"]).max() > 1.0


@pytest.fixture(scope="module")
def quadruped(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("quadruped"), "quadruped", hide=("terrain",))


@pytest.mark.slow
def test_quadruped_loads_its_force_torque_and_rangefinder_sensors(quadruped):
    model, m, _ = quadruped
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k) for k in range(m.nsensor)]
    assert list(model.sensors.sensor_names) == names


def _contact_wrenches(model, m_coll, qpos, qvel):
    """MuJoCo's xfrc_applied (nbody, 6) carrying jaxmbd's compliant contact forces at
    (qpos, qvel): each active slot's force on the MuJoCo body of the geom that MuJoCo's
    collision finds nearest the slot's point."""
    tree, _ = model_tree(model)
    p = poses(tree, jnp.asarray(qpos))
    rdot, omega = body_velocities(tree, p, jnp.asarray(qvel))
    element = with_contact(model, "compliant").contacts
    s = element.slots(BodyState(p.c, p.R, rdot, omega))
    d = mujoco.MjData(m_coll)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m_coll, d)
    where = np.array([c.pos for c in d.contact[: d.ncon]])
    geoms = np.array([(c.geom1, c.geom2) for c in d.contact[: d.ncon]])
    xfrc = np.zeros((m_coll.nbody, 6))
    bi, bj = element._slot_bodies()
    force = np.asarray(s.normal_force)[:, None] * np.asarray(s.normal) + np.asarray(
        s.tangential_force
    )
    used = 0
    for k in np.flatnonzero(np.asarray(s.normal_force) > 0):
        point = np.asarray(s.point[k])
        c = int(np.argmin(np.linalg.norm(where - point, axis=1)))
        bodies = [int(m_coll.geom_bodyid[g]) for g in geoms[c]]
        moving = [b for b in bodies if b != 0]
        assert len(moving) == 1  # a foot on the floor
        b = moving[0]
        # the slot's force on its body_i is on the moving body when that is body_i
        sign = 1.0 if bi[k] < model.nb else -1.0
        f = sign * force[k]
        xfrc[b, :3] += f
        xfrc[b, 3:] += np.cross(point - d.xipos[b], f) + sign * np.asarray(s.friction_torque[k])
        used += 1
    return xfrc, used


@pytest.mark.slow
def test_quadruped_force_torque_and_rangefinders_match_sensordata(quadruped):
    """In the air (three random states): the toes' force and torque sensors (on bodies
    welded to the ankles) to 1e-9, every rangefinder to 1e-10 (most rays hit the floor,
    the walls or the legs)."""
    model, m, _ = quadruped
    names = _names(m, "FORCE", "TORQUE") + _names(m, "RANGEFINDER")
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(3):
        qpos, qvel, ctrl = _random_state(m, rng, height=rng.uniform(1.0, 2.0))
        ours = mbd.read_sensors(model, qpos, qvel, controls=ctrl, names=names, contact="none")
        theirs = _sensordata(m, qpos, qvel, ctrl)
        for n in names:
            tol = 1e-10 if n.startswith("rf_") else 1e-9
            np.testing.assert_allclose(np.asarray(ours[n]), theirs[n], atol=tol, err_msg=n)
            hits += n.startswith("rf_") and theirs[n][0] >= 0
    assert hits >= 20


@pytest.mark.slow
def test_dog_force_sensors_match_sensordata(tmp_path):
    """dm_control's dog: the force sensors on its feet and hands (bodies welded to their
    parents) at two random states in the air, 1e-9."""
    model, m, _ = _files(tmp_path, "dog")
    names = _names(m, "FORCE", "TORQUE")
    assert len(names) == 4
    rng = np.random.default_rng(2)
    for _ in range(2):
        qpos, qvel, ctrl = _random_state(m, rng, height=2.0)
        ours = mbd.read_sensors(model, qpos, qvel, controls=ctrl, names=names, contact="none")
        theirs = _sensordata(m, qpos, qvel, ctrl)
        for n in names:
            np.testing.assert_allclose(np.asarray(ours[n]), theirs[n], atol=1e-9, err_msg=n)
