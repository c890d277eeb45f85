"""MJCF ``<option><flag ...="disable"/></option>`` honoured as MuJoCo honours them.

Each flag's file is compared with MuJoCo C on the same file: the accelerations at a random
state (the flags that scale forces: gravity, spring, damper, actuation, clampctrl), what
the loaded model contains (no contact pairs, limits or loops where a flag removes them),
and short trajectories with the flag (slow: the flags that remove constraints, whose laws
differ between the engines only while they act).
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.actuators import with_controls
from jaxmbd.joint_space.dynamics import accelerations

mujoco = pytest.importorskip("mujoco")

# a double pendulum with a limited, damped, sprung, rubbing shoulder and two actuators (one
# clamped), a ball just above the floor, and the pendulum's tip tied to the world by a
# connect equality; {flags} is the <flag .../> element under test
FLAGS_XML = """
<mujoco model="flags">
  <option timestep="1e-4" integrator="RK4" gravity="0.5 0 -9.81">{flags}</option>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="arm" pos="0 0 1.5">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-0.35 0.6" damping="0.3"
             stiffness="4" springref="0.3" frictionloss="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"
            contype="0" conaffinity="0"/>
      <body name="link" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.1" stiffness="1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"
              contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="chain" pos="-1 0 1.5">
      <joint name="top" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.4"
            contype="0" conaffinity="0"/>
      <body name="chain2" pos="0.3 0 0">
        <joint name="mid" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.4"
              contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="ball" pos="1 0 0.12">
      <freejoint name="ball"/>
      <geom type="sphere" size="0.1" mass="0.3"/>
    </body>
  </worldbody>
  <equality>
    <connect name="tie" body1="chain2" body2="world" anchor="0.3 0 0"/>
  </equality>
  <actuator>
    <motor name="motor" joint="shoulder" gear="2" ctrlrange="-0.5 0.5"/>
    <position name="servo" joint="elbow" kp="3" ctrlrange="-0.5 0.5"/>
  </actuator>
</mujoco>
"""

FLAGS = ("contact", "limit", "constraint", "equality", "frictionloss", "actuation",
         "gravity", "damper", "spring", "clampctrl")  # fmt: skip
CONTROLS = np.array([0.9, -1.2])  # beyond the control ranges: clamping matters


def _load(tmp_path, flags: str):
    path = tmp_path / f"flags_{abs(hash(flags))}.xml"
    path.write_text(FLAGS_XML.format(flags=flags))
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path, keyframe=None)
    return mujoco.MjModel.from_xml_path(str(path)), model


def _limits(model):
    return next((f for f in model.forces if isinstance(f, mbd.joint_limits.JointLimits)), None)


def _flags(*names: str) -> str:
    """One ``<flag/>`` element disabling ``names`` (MuJoCo allows one per option)."""
    if not names:
        return ""
    return "<flag " + " ".join(f'{n}="disable"' for n in names) + "/>"


@eqx.filter_jit
def _qacc(model, tree, qpos, qvel, u):
    return accelerations(with_controls(model, u), tree, None, qpos, qvel, 0.0).qacc


@pytest.mark.parametrize("flag", [None, "gravity", "spring", "damper", "actuation", "clampctrl"])
def test_force_flags_give_mujocos_accelerations(tmp_path, flag):
    """With constraints off (the ``constraint`` flag too, so that only forces act), the
    joint-space accelerations at a moving state with controls beyond their ranges equal
    MuJoCo's qacc with the same flag (1e-10), and each flag changes them."""
    flags = _flags("constraint", *(() if flag is None else (flag,)))
    m, model = _load(tmp_path, flags)
    assert model.contacts is None and _limits(model) is None and "tie" not in model.joint_names
    rng = np.random.default_rng(1)
    qpos = np.array(m.qpos0) + rng.normal(size=m.nq) * 0.3
    qpos[-4:] /= np.linalg.norm(qpos[-4:])
    qvel = rng.normal(size=m.nv)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, CONTROLS
    mujoco.mj_forward(m, d)
    ours = np.asarray(_qacc(model, model.tree, qpos, qvel, jnp.asarray(CONTROLS)))
    np.testing.assert_allclose(ours, d.qacc, rtol=0, atol=5e-11)
    if flag is not None:  # the flag matters here
        m.opt.disableflags &= ~int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag.upper()}"))
        mujoco.mj_forward(m, d)
        assert np.max(np.abs(d.qacc - ours)) > 1e-2


@pytest.mark.parametrize("flag", ["contact", "limit", "equality", "constraint"])
def test_constraint_flags_remove_what_they_switch_off(tmp_path, flag):
    """``contact``, ``limit`` and ``equality`` remove the contact pairs, the joint limits
    and the loop, ``constraint`` all three (and friction loss), and nothing else; no
    warning."""
    _, full = _load(tmp_path, "")
    _, model = _load(tmp_path, _flags(flag))
    off = {"contact": {"contact"}, "limit": {"limit"}, "equality": {"equality"},
           "constraint": {"contact", "limit", "equality"}}[flag]  # fmt: skip
    assert full.contacts is not None and _limits(full) is not None
    assert "tie" in full.joint_names
    assert (model.contacts is None) == ("contact" in off)
    assert ("tie" not in model.joint_names) == ("equality" in off)
    assert (_limits(model) is None) == ("limit" in off)


def _mujoco_qpos(m, t_end):
    d = mujoco.MjData(m)
    d.ctrl[:] = CONTROLS
    for _ in range(int(round(t_end / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return np.array(d.qpos)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["contact", "limit", "equality", "frictionloss"])
def test_flag_trajectories_follow_mujoco(tmp_path, flag):
    """0.3 s with the flag and every other constraint that the run meets disabled too (the
    engines' constraint laws differ only while a constraint acts): the joint coordinates
    equal MuJoCo's RK4 at 1e-4 to 1e-6; MuJoCo's run without the flag differs (the limit
    stops the shoulder, the floor holds the ball, the tie holds the chain, friction loss
    slows the shoulder), so the flag is what makes them agree."""
    others = {"contact", "limit", "equality", "frictionloss"} - {flag}
    flags = _flags(*sorted(others | {flag}))
    m, model = _load(tmp_path, flags)
    t_end, h = 0.3, 1e-3
    sol = mbd.simulate(model, formulation="joint", t_end=t_end, h=h,
                       controls=jnp.asarray(CONTROLS))  # fmt: skip
    theirs = _mujoco_qpos(m, t_end)
    np.testing.assert_allclose(np.asarray(sol.qpos[-1]), theirs, atol=1e-6)
    m.opt.disableflags &= ~int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag.upper()}"))
    assert np.max(np.abs(_mujoco_qpos(m, t_end) - theirs)) > 1e-3


@pytest.mark.slow
def test_limits_none_is_the_limit_flag(tmp_path):
    """``simulate(..., limits="none")`` in the joint formulation runs the file with limits
    as MuJoCo runs it with ``<flag limit="disable"/>`` (the other constraints off in both)."""
    others = ("contact", "equality", "frictionloss")
    m, _ = _load(tmp_path, _flags(*others, "limit"))
    _, model = _load(tmp_path, _flags(*others))
    assert _limits(model) is not None
    sol = mbd.simulate(model, formulation="joint", t_end=0.3, h=1e-3, limits="none",
                       controls=jnp.asarray(CONTROLS))  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.qpos[-1]), _mujoco_qpos(m, 0.3), atol=1e-6)
