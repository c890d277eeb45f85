"""Damping, stiffness, friction loss and armature on ball and free joints
(:mod:`jaxmbd.forces.quaternion_joint_dynamics`) against MuJoCo C: the passive forces and
accelerations at random states (``mj_forward``), MuJoCo's RK4 trajectory, MuJoCo's
``mju_subQuat``; the absolute formulations name what they leave out."""

import tempfile
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces._joint import joint_space_entries_message
from jaxmbd.forces.quaternion_joint_dynamics import quaternion_difference, quaternion_joint_dynamics
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.run import model_tree

mujoco = pytest.importorskip("mujoco")

#: A free base (damped, sprung, with armature), a ball shoulder, a hinge elbow and a ball
#: wrist, each with its own damping, stiffness and armature; contact off.
XML = """<mujoco><option integrator="RK4" timestep="0.002"><flag contact="disable"/></option>
<worldbody>
 <body name="base" pos="0 0 1" quat="0.9 0.1 0.3 0.2">
  <joint name="root" type="free" damping="0.7" stiffness="3" armature="0.05"/>
  <geom type="box" size="0.1 0.2 0.05" mass="2"/>
  <body name="arm" pos="0.2 0 0" quat="0.8 0 0.6 0">
   <joint name="shoulder" type="ball" damping="0.5" stiffness="2" armature="0.1"/>
   <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
   <body name="fore" pos="0.3 0 0"><joint name="elbow" type="hinge" axis="0 1 0" damping="0.2"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
    <body name="hand" pos="0.3 0 0">
     <joint name="wrist" type="ball" damping="0.3" armature="0.02" stiffness="1.5"/>
     <geom type="ellipsoid" size="0.05 0.03 0.08"/></body></body></body></body>
</worldbody></mujoco>"""


def _random_state(m, rng):
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + rng.uniform(-0.8, 0.8, m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
    return d


@pytest.fixture(scope="module")
def models():
    """jaxmbd's model, starting at a random state (a keyframe), and MuJoCo's."""
    m = mujoco.MjModel.from_xml_string(XML)
    d = _random_state(m, np.random.default_rng(4))
    key = '<keyframe><key qpos="{}" qvel="{}"/></keyframe></mujoco>'.format(
        " ".join(repr(float(x)) for x in d.qpos), " ".join(repr(float(x)) for x in d.qvel)
    )
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(XML.replace("</mujoco>", key))
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.mjcf.load_robot(f.name)
    return model, m, d


def test_passive_forces_and_accelerations_equal_mj_forward(models):
    """tau (every joint element's generalised force) = qfrc_passive, and qacc (the
    armature on the ball and free dofs in M) = mj_forward's, to 1e-12 relative, at
    random states; each element's part is non-zero there."""
    model, m, _ = models
    tree, loops = model_tree(model)
    forward = jax.jit(lambda q, v: accelerations(model, tree, loops, q, v, 0.0))
    rng = np.random.default_rng(3)
    for _ in range(3):
        d = _random_state(m, rng)
        mujoco.mj_forward(m, d)
        acc = forward(jnp.asarray(d.qpos), jnp.asarray(d.qvel))
        for part in (d.qfrc_spring, d.qfrc_damper):
            assert np.abs(part[:9]).min() > 1e-3  # free and shoulder dofs act
        scale = np.abs(d.qfrc_passive).max()
        assert np.abs(np.asarray(acc.forces.tau) - d.qfrc_passive).max() < ROUND_OFF * scale
        scale = np.abs(d.qacc).max()
        assert np.abs(np.asarray(acc.qacc) - d.qacc).max() < 6e-14 * scale


@pytest.mark.parametrize(
    ("integrator", "mj_integrator"), [("rkmk", "mjINT_RK4"), ("euler", "mjINT_EULER")]
)
def test_run_equals_mujocos(models, integrator, mj_integrator):
    """50 steps from a random state = MuJoCo's: rkmk its RK4 (Munthe-Kaas on the
    quaternions), euler its semi-implicit Euler step (the ball and free dofs' damping in
    M + h D), qpos and qvel to 1e-11."""
    model, m, start = models
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = start.qpos, start.qvel
    integrator_before = m.opt.integrator
    m.opt.integrator = getattr(mujoco.mjtIntegrator, mj_integrator)
    n = 50
    sol = mbd.simulate(model, t_end=n * m.opt.timestep, h=m.opt.timestep, integrator=integrator)
    for _ in range(n):
        mujoco.mj_step(m, d)
    m.opt.integrator = integrator_before
    assert np.abs(np.asarray(sol.qpos[-1]) - d.qpos).max() < ROUND_OFF
    assert np.abs(np.asarray(sol.qvel[-1]) - d.qvel).max() < 2e-13


def test_quaternion_difference_is_mujocos_and_nan_safe():
    """mju_subQuat at random pairs (angles beyond pi included) to 1e-14; at q = q_ref the
    value is 0 and its derivative the Jacobian 2 [0 | I] (finite, no NaN)."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        qa, qb = rng.normal(size=4), rng.normal(size=4)
        qa, qb = qa / np.linalg.norm(qa), qb / np.linalg.norm(qb)
        expected = np.zeros(3)
        mujoco.mju_subQuat(expected, qa, qb)
        got = np.asarray(quaternion_difference(jnp.asarray(qa), jnp.asarray(qb)))
        assert np.abs(got - expected).max() < ROUND_OFF
    q = jnp.asarray([0.6, 0.0, 0.8, 0.0])
    assert np.abs(np.asarray(quaternion_difference(q, q))).max() == 0.0
    jac = np.asarray(jax.jacfwd(quaternion_difference)(q, q))
    assert np.all(np.isfinite(jac))
    # d/dq of the vector part of q_ref^-1 q, times 2
    expected = 2 * np.asarray(jax.jacfwd(lambda x: _conj_mul(q, x)[1:])(q))
    assert np.abs(jac - expected).max() < ROUND_OFF


def _conj_mul(a, b):
    w0, v0 = a[0], -a[1:]
    return jnp.concatenate([
        (w0 * b[0] - v0 @ b[1:])[None], w0 * b[1:] + b[0] * v0 + jnp.cross(v0, b[1:])
    ])  # fmt: skip


def test_friction_loss_is_coulomb_beyond_the_regularisation(models):
    """A ball joint's friction loss f on each dof: -f tanh(v / v_r), -f sign(v) to 1e-9 at
    |v| >= 0.5 rad/s (v_r = 1e-2)."""
    element = quaternion_joint_dynamics(
        ["ball"], [False], damping=[0.0], stiffness=[0.0], spring_reference=[[0, 0, 0, 1, 0, 0, 0]],
        friction_loss=[0.4], armature=[0.0], where="test",
    )  # fmt: skip
    v = jnp.asarray([0.5, -1.0, 2.0])
    force = element.dof_force(0.0, 0, jnp.asarray([1.0, 0, 0, 0]), v)
    assert np.abs(np.asarray(force) + 0.4 * np.sign(v)).max() < ROUND_OFF


def test_absolute_formulations_name_what_they_leave_out(models):
    """The text of the warning an absolute formulation's run gives
    (:func:`jaxmbd.forces._joint.joint_space_entries_message`) names the three joints."""
    message = joint_space_entries_message(models[0].forces, "simulate")
    assert "damping, stiffness, friction loss or armature on ['root', 'shoulder', 'wrist']" in (
        message
    )


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [("damping", [-1.0], "damping"), ("armature", [np.nan], "armature")],
)
def test_bad_values_are_refused_by_name(key, value, match):
    values = dict(damping=[0.0], stiffness=[0.0], friction_loss=[0.0], armature=[0.0])
    values[key] = value
    with pytest.raises(mbd.ModelError, match=f"{match}.*'b'"):
        quaternion_joint_dynamics(["b"], [False], spring_reference=[[0, 0, 0, 1, 0, 0, 0]],
                                  where="test", **values)  # fmt: skip


def test_model_file_round_trip(models, tmp_path):
    """save_model writes the element (no warning) and load_model reads it back equal."""
    model = models[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mbd.save_model(model, tmp_path / "arm.json")
    back = mbd.load_model(tmp_path / "arm.json")
    (before,) = [f for f in model.forces if f.acts_along_dofs]
    (after,) = [f for f in back.forces if f.acts_along_dofs]
    assert (after.joints, after.free) == (("root", "shoulder", "wrist"), (True, False, False))
    for key in ("damping", "stiffness", "spring_reference", "friction_loss", "armature"):
        assert np.array_equal(np.asarray(getattr(before, key)), np.asarray(getattr(after, key)))
