"""Actuators with activation dynamics (MuJoCo's dyntype integrator, filter, filterexact,
actlimited, actearly) loaded from MJCF, against MuJoCo C on the same controls: the joint
formulation's MuJoCo steps integrate the activations as MuJoCo's integrators integrate
``act`` (Euler: ``mj_nextActivation`` of the start's rate; RK4: by the stages of
``mj_RungeKutta``), so qpos, qvel and act agree to round-off at the same step.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.joint_space import advance, initial_joint_state
from jaxmbd.mjcf import UnsupportedFeatureWarning

mujoco = pytest.importorskip("mujoco")

XML = """<mujoco><option timestep="0.002" integrator="{integrator}"/><worldbody>
  <body name="a" pos="0 0 1"><joint name="ja" type="hinge" axis="0 1 0" damping="0.05"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
    <body name="b" pos="0.3 0 0"><joint name="jb" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"/></body></body>
  <body name="c" pos="1 0 1"><joint name="jc" type="hinge" axis="1 0 0"/>
    <geom type="box" size="0.1 0.05 0.2" pos="0 0 -0.2" mass="1"/>
    <body name="d" pos="0 0 -0.4"><joint name="jd" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.05" mass="0.3"/></body></body>
</worldbody><actuator>
  <general name="int" joint="ja" dyntype="integrator" gainprm="4" ctrlrange="-1 1"
           ctrllimited="true" actlimited="true" actrange="-0.1 0.1"/>
  <general name="filt" joint="jb" dyntype="filter" dynprm="0.05" gainprm="2"
           biastype="affine" biasprm="0 -1 -0.1"/>
  <general name="exact" joint="jc" dyntype="filterexact" dynprm="0.03" gainprm="3"/>
  <general name="early" joint="jd" dyntype="filterexact" dynprm="0.02" gainprm="5"
           actearly="true"/>
  <motor name="plain" joint="jd" gear="2"/>
</actuator></mujoco>"""


def _load(tmp_path, integrator, xml=XML):
    path = tmp_path / f"act_{integrator}.xml"
    path.write_text(xml.format(integrator=integrator))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedFeatureWarning)
        model = mbd.load_model(str(path), keyframe=None)
    return model, mujoco.MjModel.from_xml_path(str(path))


def _controls(n, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.5, 1.5, (n, 5))
    u[: n // 2, 0] = 1.0  # the integrator runs into its actrange
    return u


def _mujoco_states(m, controls):
    """MuJoCo's (qpos, qvel, act) from its initial state and after each step under
    ``controls``."""
    d = mujoco.MjData(m)
    states = [(np.array(d.qpos), np.array(d.qvel), np.array(d.act))]
    for u in controls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        states.append((np.array(d.qpos), np.array(d.qvel), np.array(d.act)))
    return states


def _mujoco(m, controls):
    """qpos and act after each step (not the start)."""
    states = _mujoco_states(m, controls)[1:]
    return np.array([q for q, _, _ in states]), np.array([a for _, _, a in states])


@pytest.fixture(scope="module")
def euler(tmp_path_factory):
    return _load(tmp_path_factory.mktemp("act"), "Euler")


def test_activation_is_loaded_as_mujocos(euler, tmp_path):
    """MuJoCo's dyntype, dynprm[0], actrange and actearly, kept through a model file."""
    model, m = euler
    path = mbd.save_model(model, tmp_path / "act.json")
    for a in (model.actuators, mbd.load_model(path).actuators):
        assert a.dynamics == ("integrator", "filter", "filterexact", "filterexact", "none")
        np.testing.assert_array_equal(a.time_constant[1:4], m.actuator_dynprm[1:4, 0])
        assert a.act_early == (False, False, False, True, False)
        np.testing.assert_array_equal([a.act_lower[0], a.act_upper[0]], [-0.1, 0.1])


def test_euler_activations_are_mujocos(euler):
    """Every dynamics kind (the integrator clamped to its actrange, filter, filterexact,
    actearly) under MuJoCo's Euler, 150 steps of random controls through
    :func:`~jaxmbd.joint_space.advance`: act and qpos to 1e-12 of MuJoCo's Euler
    at the same step (its ``mj_nextActivation``: the filter's explicit update)."""
    model, m = euler
    n = 150
    u = _controls(n)
    qpos_mj, act_mj = _mujoco(m, u)
    assert act_mj[:, 0].max() == 0.1  # it ran into its actrange
    step = jax.jit(lambda state, u: advance(model, state, u, h=0.002, integrator="euler"))
    state = initial_joint_state(model)
    acts = []
    for k in range(n):  # one compiled step (the controls are an argument)
        state = step(state, jnp.asarray(u[k]))
        acts.append(np.asarray(state.act))
    # JointState.act: MuJoCo's act (na,), the actuators with dynamics
    np.testing.assert_allclose(np.asarray(acts), act_mj, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(state.qpos), qpos_mj[-1], rtol=0, atol=ROUND_OFF)


@pytest.mark.slow  # a run and its sensors: two programs (~40 s)
def test_run_keeps_mujocos_act_and_its_sensors_read_it(tmp_path):
    """A joint-space Euler run of 100 steps with random controls: ``sol.act`` (T, na) is
    MuJoCo's ``act`` after each ``mj_step`` (1e-10), and the actuator sensors read after
    the run (actuatorfrc of each actuator, jointactuatorfrc) equal MuJoCo's sensordata
    after ``mj_forward`` at MuJoCo's state of each row (qpos, qvel, act, the row's held
    control), 1e-10; far from the readings without the activation history."""
    sensors = "".join(f'<actuatorfrc name="f_{a}" actuator="{a}"/>'
                      for a in ("int", "filt", "exact", "early", "plain"))  # fmt: skip
    sensors += '<jointactuatorfrc name="jd" joint="jd"/>'
    xml = XML.replace("</actuator></mujoco>", f"</actuator><sensor>{sensors}</sensor></mujoco>")
    model, m = _load(tmp_path, "Euler", xml)
    n, h = 100, 0.002
    u = _controls(n, seed=2)
    states = _mujoco_states(m, u)
    sol = mbd.simulate(model, formulation="joint", integrator="euler", t_end=n * h, h=h,
                       controls=u)  # fmt: skip
    assert sol.act.shape == (n + 1, 4)
    np.testing.assert_allclose(np.asarray(sol.act), [a for _, _, a in states], atol=1e-10)
    np.testing.assert_allclose(np.asarray(sol.qpos[-1]), states[-1][0], atol=1e-10)
    theirs = []
    for k, (qpos, qvel, act) in enumerate(states):
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:], d.act[:] = qpos, qvel, act
        d.ctrl[:] = u[max(k - 1, 0)]  # the control held over the step that ended at row k
        mujoco.mj_forward(m, d)
        theirs.append(np.array(d.sensordata))
    theirs = np.array(theirs)
    ours = np.asarray(sol.sensors.vector())
    np.testing.assert_allclose(ours, theirs, atol=1e-10)
    assert np.abs(theirs[:, :4] - np.asarray(sol.sensors.vector())[:1, :4]).max() > 0.1


def test_rk4_steps_are_mujocos_rk4(tmp_path):
    """Every dynamics kind (as above) under MuJoCo's RK4 at h = 2 ms, 150 steps of random
    controls through ``simulate``: qpos, qvel and act after every step equal MuJoCo's
    ``mj_step`` to 1e-12 (MuJoCo's ``mj_RungeKutta`` integrates act by the stages,
    unclamped within them, the end by ``mj_nextActivation`` of the stages' mean rate:
    filterexact's tau (1 - exp(-h / tau)) in place of h, actearly an Euler step ahead),
    and the run differs from one that ignores the activation (the force follows a, not u)
    by far more."""
    model, m = _load(tmp_path, "RK4")
    n = 150
    u = _controls(n, seed=1)
    rows = _mujoco_states(m, u)
    assert max(row[2][0] for row in rows) == 0.1  # it ran into its actrange
    sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=n * 0.002, h=0.002,
                       controls=u)  # fmt: skip
    for k, name in enumerate(("qpos", "qvel", "act")):
        theirs = np.array([row[k] for row in rows])
        np.testing.assert_allclose(np.asarray(getattr(sol, name)), theirs, rtol=0, atol=5e-14)
    m.actuator_dyntype[:] = 0
    plain, _ = _mujoco(m, u)
    assert np.abs(plain[-1] - rows[-1][0]).max() > 1e-2


def test_bad_activation_options():
    b = mbd.ModelBuilder("bad")
    b.add_body("a", mass=1.0, inertia=(1.0, 1.0, 1.0))
    b.revolute("j", body_i="ground", body_j="a", point=(0, 0, 0), axis=(0, 0, 1))
    with pytest.raises(mbd.ModelError, match="dynamics"):
        b.add_actuator("m", joint="j", kind="motor", dynamics="muscle")
    with pytest.raises(mbd.ModelError, match="time_constant"):
        b.add_actuator("m", joint="j", kind="motor", dynamics="filter")
    with pytest.raises(mbd.ModelError, match="act_range"):
        b.add_actuator("m", joint="j", kind="motor", act_range=(0, 1))
