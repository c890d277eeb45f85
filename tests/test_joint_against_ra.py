"""The joint formulation on the models MuJoCo C and rA both run: the same files, RK4 in
all three (``integrator="rkmk"``; MuJoCo's ``mjINT_RK4``, the same step on a tree of
hinges and slides), contact and limits off (``mjDSBL_CONTACT | mjDSBL_LIMIT``), 1 s from
the file's initial state with random joint rates. The reference is MuJoCo: qpos and qvel
after every step agree to round-off. rA is a second check on the same files and on a
builder model MuJoCo cannot read: it integrates 6 coordinates per body with the joints as
constraint rows, the joint formulation the tree's joint coordinates; body positions agree
to RK4's own error."""

import os
import warnings

import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.tree import JointType

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
gymnasium = pytest.importorskip("gymnasium")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
GYM = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
DATA = os.path.join(os.path.dirname(__file__), "data")

FILES = {
    "cartpole": os.path.join(SUITE, "cartpole.xml"),
    "acrobot": os.path.join(SUITE, "acrobot.xml"),
    "reacher": os.path.join(SUITE, "reacher.xml"),
    "cheetah": os.path.join(SUITE, "cheetah.xml"),
    "hopper": os.path.join(SUITE, "hopper.xml"),
    "inverted_double_pendulum": os.path.join(GYM, "inverted_double_pendulum.xml"),
    "arm3": os.path.join(DATA, "arm3.xml"),
}
QUICK = {"cartpole", "cheetah", "arm3"}
#: arm3 swings fast about skew axes: RK4's own error at h = 1e-3 is 9e-10 in either
#: formulation (its run at h against h / 2), so the two meet at 1e-9 from h = 5e-4 (2e-10)
STEP = {"arm3": 5e-4}
#: the largest differences measured (qpos and qvel against MuJoCo, body positions against
#: rA): MuJoCo's round-off (the same RK4 step), then RK4's own error (arm3's fast swing,
#: reacher's damping over its small inertia)
MEASURED = {
    "double_pendulum": (None, None, 6.5e-11),
    "cartpole": (4.4e-16, 1.8e-15, 2.6e-12),
    "acrobot": (8.9e-16, 7.1e-15, 5.7e-12),
    "reacher": (3.5e-17, 1.1e-16, 1.2e-9),
    "cheetah": (1.8e-15, 5.3e-15, 8.8e-12),
    "hopper": (1.8e-15, 4.2e-15, 1.0e-14),
    "inverted_double_pendulum": (6.1e-16, 3.6e-15, 5.2e-11),
    "arm3": (4.6e-14, 4.3e-13, 1.0e-10),
}


def _bound(measured):
    # round-off of a 1 s run: at least 1e-14, as another platform's libm rounds differently
    return max(5 * measured, 1e-14)


def _model(name):
    """The model of ``name`` with every MuJoCo joint given rates uniform in [-0.5, 0.5]
    (a file read at rest may stay at an equilibrium: the moves are what is compared)."""
    if name == "double_pendulum":
        return mbd.models.double_pendulum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(FILES[name])
    rng = np.random.default_rng(7)
    tree = model.tree
    for j, joint in enumerate(tree.joint_names):
        nv = JointType(tree.joint_type[j]).nv
        model = model.with_joint_state(joint, qdot=rng.uniform(-0.5, 0.5, nv))
    return model


def mujoco_states(name, model, h, n):
    """MuJoCo's RK4 at step ``h`` from ``model``'s initial qpos and qvel (MuJoCo's layout),
    contact and limits disabled: qpos and qvel at the n + 1 step boundaries."""
    m = mujoco.MjModel.from_xml_path(FILES[name])
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, h
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = np.asarray(model.tree.qpos_init), np.asarray(model.tree.qvel_init)
    qpos, qvel = [d.qpos.copy()], [d.qvel.copy()]
    for _ in range(n):
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
    return np.array(qpos), np.array(qvel)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=() if n in QUICK or n == "double_pendulum" else pytest.mark.slow)
     for n in ["double_pendulum", *FILES]],
)  # fmt: skip
def test_joint_agrees_with_mujoco_and_ra(name):
    model = _model(name)
    h = STEP.get(name, 1e-3)
    options = dict(t_end=1.0, h=h, contact="none", limits="none", integrator="rkmk")
    joint = mbd.simulate(model, formulation="joint", **options)
    ra = mbd.simulate(model, formulation="rA", **options)
    on_qpos, on_qvel, on_r = MEASURED[name]
    if name != "double_pendulum":  # a builder model: no MuJoCo file
        qpos, qvel = mujoco_states(name, model, h, round(1.0 / h))
        assert np.ptp(qpos, axis=0).max() > 0.01  # it moved (reacher's damping: 0.037)
        np.testing.assert_allclose(np.asarray(joint.qpos), qpos, rtol=0, atol=_bound(on_qpos))
        np.testing.assert_allclose(np.asarray(joint.qvel), qvel, rtol=0, atol=_bound(on_qvel))
    assert np.ptp(np.asarray(ra.r), axis=0).max() > 5e-3  # a body moved
    assert np.abs(np.asarray(joint.r) - np.asarray(ra.r)).max() < _bound(on_r)
