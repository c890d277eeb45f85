"""MJCF actuators (jaxmbd/mjcf/_actuators.py): MuJoCo's motor, position, velocity and
general actuators on hinges and slides become jaxmbd actuators, and a driven double
pendulum follows MuJoCo's own trajectory under the same piecewise-constant controls."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import jaxmbd as mbd  # noqa: E402
from jaxmbd.mjcf import UnsupportedFeatureWarning  # noqa: E402

DRIVEN = """
<mujoco model="driven">
  <option timestep="0.01"><flag contact="disable"/></option>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" ref="0.2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.025" mass="0.6"/>
        <body name="slider" pos="0 0 -0.25">
          <joint name="slide" type="slide" axis="0 0 1"/>
          <geom type="sphere" size="0.04" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="torque" joint="shoulder" gear="2" ctrlrange="-1 1" ctrllimited="true"/>
    <position name="servo" joint="elbow" kp="20" kv="0.5" ctrlrange="-1 1"/>
    <velocity name="feed" joint="slide" kv="5" forcerange="-3 3" forcelimited="true"/>
    <general name="spring" joint="slide" gainprm="0.5" biastype="affine" biasprm="0.1 -30 -0.2"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    path = tmp_path_factory.mktemp("mjcf") / "driven.xml"
    path.write_text(DRIVEN)
    return path


def test_actuators_map_kinds_gains_and_ranges(driven):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing in the file is left out
        model = mbd.load_model(driven)
    act = model.actuators
    assert act.actuator_names == ("torque", "servo", "feed", "spring")
    assert act.kinds == ("motor", "position", "velocity", "general")
    np.testing.assert_array_equal(act.gear, [2, 1, 1, 1])
    np.testing.assert_array_equal(act.gain, [1, 20, 5, 0.5])
    np.testing.assert_array_equal(
        act.bias, [[0, 0, 0], [0, -20, -0.5], [0, 0, -5], [0.1, -30, -0.2]]
    )
    np.testing.assert_array_equal(act.ctrl_lower, [-1, -1, -np.inf, -np.inf])
    np.testing.assert_array_equal(act.force_upper, [np.inf, np.inf, 3, np.inf])


def test_driven_pendulum_follows_mujoco(driven):
    """Controls change every 0.01 s (MuJoCo's step), held constant in both engines; joint
    positions (MuJoCo's qpos, jaxmbd's joint coordinates with the elbow's ref offset)
    agree to 1e-6 over 0.5 s with the clamps active (u up to 1.5 on ranges of 1): jaxmbd's
    RK4 on SE(3) (rkmk, h = 5e-4, which evaluates each step's first stage with that step's
    controls) against MuJoCo's RK4 at 1e-4 (both fourth order; the switches fall on step
    boundaries of both). gen_alpha is second order and, carrying its acceleration across
    a switch, first order at each switch: it is not used for this comparison."""
    rng = np.random.default_rng(3)
    T, period = 0.5, 0.01
    table = rng.uniform(-1.5, 1.5, size=(int(T / period), 4))
    m = mujoco.MjModel.from_xml_string(DRIVEN)
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, 1e-4
    d = mujoco.MjData(m)
    qpos = [d.qpos.copy()]
    per = int(round(period / 1e-4))
    for row in table:
        d.ctrl[:] = row
        for _ in range(per):
            mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
    qpos = np.array(qpos)

    model = mbd.load_model(driven)
    h = 5e-4
    controls = jnp.asarray(np.repeat(table, int(round(period / h)), axis=0))
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=T, h=h, controls=controls)
    stride = int(round(period / h))
    ours = np.stack(
        [np.asarray(sol.joints[j].q)[::stride] for j in ("shoulder", "elbow", "slide")], 1
    )
    err = np.abs(ours - qpos).max()
    print(f"driven pendulum: max joint error vs MuJoCo {err:.2e}")
    assert np.ptp(qpos[:, 0]) > 0.3 and np.ptp(qpos[:, 2]) > 0.01  # it really moves
    assert err < 1e-6


def test_unmapped_actuators_are_named(tmp_path):
    xml = """<mujoco><worldbody><body name="a"><joint name="h" axis="0 1 0"/>
      <geom size="0.1" mass="1"/><site name="s"/></body></worldbody>
      <actuator><motor name="m" joint="h"/><intvelocity name="iv" joint="h" kp="1"
        actrange="-1 1"/><motor name="site" site="s" gear="0 0 1 0 0 0"/>
        <general name="mu" joint="h" dyntype="muscle"/></actuator></mujoco>"""
    path = tmp_path / "a.xml"
    path.write_text(xml)
    with pytest.warns(UnsupportedFeatureWarning) as record:
        model = mbd.load_model(path)
    (text,) = [str(w.message) for w in record]
    assert "'mu' (activation dynamics muscle" in text and "'site' (transmission)" in text
    assert model.actuators.actuator_names == ("m", "iv")  # iv: an integrator
    assert model.actuators.dynamics == ("none", "integrator")
