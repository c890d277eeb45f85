"""MuJoCo's qpos/qvel from body states (``jaxmbd.tree._mujoco_layout``) against MuJoCo C: at
random (qpos, qvel), ``mj_forward``'s body frames and ``mj_objectVelocity`` give the body
states, which must give back (qpos, qvel)."""

import os
import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.mjcf import UnsupportedFeatureWarning
from jaxmbd.tree._mujoco_layout import mujoco_layout

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
gymnasium = pytest.importorskip("gymnasium")

# every joint type, joints off their bodies' origins, tilted body frames and axes, refs
JOINTS = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
  <body name="floater" pos="0.1 0.2 1" quat="0.9 0.1 0.3 0.2"><freejoint name="root"/>
    <geom type="box" size="0.2 0.1 0.05" pos="0.05 0 0" mass="2"/>
    <body name="arm" pos="0.3 0 0" quat="0.8 0 0.5 0.3">
      <joint name="hinge" axis="0.3 1 0.2" pos="0.02 -0.01 0.03" ref="0.4"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.7"/>
      <body name="slider" pos="0.3 0 0" euler="10 20 30">
        <joint name="slide" type="slide" axis="1 0.2 0.1" ref="-0.1"/>
        <geom type="box" size="0.05 0.04 0.03" pos="0.01 0.02 0" mass="0.3"/>
        <body name="tip" pos="0.1 0 0.05"><geom size="0.02" mass="0.1"/></body>
        <body name="wrist" pos="0.1 0.05 0" quat="0.7 0.7 0 0">
          <joint name="ball" type="ball" pos="0.01 0 0.02"/>
          <geom type="ellipsoid" size="0.05 0.03 0.02" pos="0.04 0 0" mass="0.2"/>
        </body></body></body></body>
  <body name="pole" pos="1 0 0.5"><joint name="swing" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02" mass="0.5"/>
    <body name="gimbal" pos="0 0 -0.4" quat="0.9 0.3 0.1 0">
      <joint name="gx" axis="0.6 0.8 0" pos="0.01 0 0" ref="0.2"/>
      <joint name="gz" type="slide" axis="0 0 1" ref="0.05"/>
      <joint name="gy" axis="-0.8 0.6 0" pos="0 0.02 -0.01"/>
      <geom type="box" size="0.05 0.04 0.03" pos="0.02 0 0" mass="0.4"/></body></body>
</worldbody></mujoco>"""


def _files(tmp_path):
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    path = tmp_path / "joints.xml"
    path.write_text(JOINTS)
    return {
        "joints": str(path),
        "cheetah": os.path.join(suite, "cheetah.xml"),
        "ant": os.path.join(assets, "ant.xml"),
        "quadruped": os.path.join(suite, "quadruped.xml"),
        "humanoid": os.path.join(suite, "humanoid.xml"),
        "point_mass": os.path.join(suite, "point_mass.xml"),
    }


def _random_state(m, rng):
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t in (2, 3):
            qpos[a] += 0.4 * rng.normal()  # three hinges: middle angle in +-pi/2
        else:
            k = a + (3 if t == 0 else 0)
            if t == 0:
                qpos[a : a + 3] += rng.normal(size=3)
            quat = rng.normal(size=4)
            qpos[k : k + 4] = quat / np.linalg.norm(quat)
    return qpos, rng.normal(size=m.nv)


def _body_states(m, model, qpos, qvel):
    """(r, A, rdot, body-frame omega) of the model's bodies from MuJoCo's kinematics: the
    centre of mass of each body with its welded children, MuJoCo's body rotation."""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    # unnamed MuJoCo bodies are named "body<id>"
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in model.body_names]
    ids = [int(n[4:]) if k < 0 else k for k, n in zip(ids, model.body_names, strict=True)]

    def owner(g):
        while g and g not in ids:
            g = m.body_parentid[g]
        return g

    r, A, rdot, omega = [], [], [], []
    vel = np.zeros(6)
    for b in ids:
        group = [g for g in range(1, m.nbody) if owner(g) == b]
        mass = sum(m.body_mass[g] for g in group)
        com = sum(m.body_mass[g] * d.xipos[g] for g in group) / mass
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
        w = vel[:3].copy()  # world frame; the linear part at the body's own centre of mass
        R = d.xmat[b].reshape(3, 3)
        r.append(com)
        A.append(R)
        rdot.append(vel[3:] + np.cross(w, com - d.xipos[b]))
        omega.append(R.T @ w)
    return tuple(np.array(v) for v in (r, A, rdot, omega))


def _quaternion_addresses(m):
    out = []
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t in (0, 1):
            out.append(a + (3 if t == 0 else 0))
    return out


def _same_up_to_layout(m, got, want):
    """qpos equal, quaternions up to sign and hinge angles up to full turns."""
    got, want = np.array(got), np.array(want)
    for a in _quaternion_addresses(m):
        if got[a : a + 4] @ want[a : a + 4] < 0:
            got[a : a + 4] *= -1
    for j in range(m.njnt):
        if m.jnt_type[j] == 3:
            a = m.jnt_qposadr[j]
            got[a] -= 2 * np.pi * np.round((got[a] - want[a]) / (2 * np.pi))
    np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF)


@pytest.mark.parametrize(
    "name",
    [
        "joints",
        "cheetah",
        "ant",
        pytest.param("quadruped", marks=pytest.mark.slow),
        pytest.param("humanoid", marks=pytest.mark.slow),
        "point_mass",
    ],
)
def test_layout_of_mujoco_body_states(tmp_path, name):
    path = _files(tmp_path)[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(path)
    rng = np.random.default_rng(7)
    states = [_random_state(m, rng) for _ in range(3)]
    bodies = [_body_states(m, model, q, v) for q, v in states]
    stacked = [np.stack([b[k] for b in bodies]) for k in range(4)]
    qpos, qvel = mujoco_layout(model, *stacked)
    for k, (q, v) in enumerate(states):
        _same_up_to_layout(m, qpos[k], q)
        np.testing.assert_allclose(qvel[k], v, rtol=0, atol=ROUND_OFF)
    # one sample (no time axis) gives the same
    one = mujoco_layout(model, *bodies[0])
    np.testing.assert_allclose(one[0], qpos[0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(one[1], qvel[0], rtol=0, atol=ROUND_OFF)


def test_angles_and_quaternions_are_continuous_in_time(tmp_path):
    path = _files(tmp_path)["joints"]
    model = mbd.load_model(path, keyframe=None)
    m = mujoco.MjModel.from_xml_path(path)
    hinge = m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "hinge")]
    ball = m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "ball")]
    # the hinge turns past +-pi twice; the ball turns once about x, its quaternion's w
    # changing sign on the way
    times = np.linspace(0.0, 1.0, 41)
    qs = []
    for t in times:
        q = np.array(m.qpos0)
        q[hinge] = m.qpos0[hinge] + 8.0 * t
        q[ball : ball + 4] = [np.cos(np.pi * t), np.sin(np.pi * t), 0.0, 0.0]
        qs.append(q)
    bodies = [_body_states(m, model, q, np.zeros(m.nv)) for q in qs]
    qpos, _ = mujoco_layout(model, *(np.stack([b[k] for b in bodies]) for k in range(4)))
    np.testing.assert_allclose(qpos[:, hinge], [q[hinge] for q in qs], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        qpos[:, ball : ball + 4], [q[ball : ball + 4] for q in qs], rtol=0, atol=ROUND_OFF
    )


def test_hinges_on_skew_axes_are_refused():
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "dog.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    with pytest.raises(mbd.ModelError, match="'scapula_L': 'hinges on axes that are not"):
        mujoco_layout(model, model.r0, model.A0, model.rdot0, model.omega0)
