"""formulation="joint" against MuJoCo C: the same files stepped by both, RK4, joint
coordinates compared (MuJoCo at h / 100 as the reference solution), with random controls."""

import os
import warnings

import numpy as np
import pytest

import jaxmbd as mbd

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(os.path.join(SUITE, name + ".xml"), keyframe=None)
    if model.tree is None:
        import dataclasses

        from jaxmbd.tree import tree_from_mujoco

        m = mujoco.MjModel.from_xml_path(os.path.join(SUITE, name + ".xml"))
        model = dataclasses.replace(model, tree=tree_from_mujoco(mujoco, m).tree)
    return model


def _mujoco_reference(path, qpos, qvel, controls, h, substeps=100):
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep = h / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    out = [np.array(d.qpos)]
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
        out.append(np.array(d.qpos))
    return np.stack(out)


@pytest.mark.parametrize("name", ["cartpole", "acrobot"])
def test_rk4_against_mujoco_under_random_controls(name):
    model = _load(name)
    h, n = 1e-3, 300
    rng = np.random.default_rng(0)
    controls = rng.uniform(-1.0, 1.0, (n, model.nu))
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls, limits="none", contact="none")  # fmt: skip
    tree = model.tree
    reference = _mujoco_reference(os.path.join(SUITE, name + ".xml"),
                                  np.asarray(tree.qpos_init), np.asarray(tree.qvel_init),
                                  controls, h)  # fmt: skip
    assert np.abs(np.asarray(sol.qpos) - reference).max() < 1e-6
    assert sol.qpos.shape == (n + 1, tree.nq) and sol.qvel.shape == (n + 1, tree.nv)
    for j, joint in enumerate(tree.joint_names):
        np.testing.assert_array_equal(sol.joints[joint].q, sol.qpos[:, tree.joint_qpos_adr[j]])


def test_joint_pairs_are_listed():
    pairs = mbd.valid_pairs()
    assert {("joint", "rk"), ("joint", "euler"), ("joint", "implicit")} <= set(pairs)
    with pytest.raises(ValueError, match="formulation 'joint' has no integrator"):
        mbd.simulate(_load("cartpole"), formulation="joint", integrator="gen_alpha", t_end=0.01,
                     h=1e-3)  # fmt: skip
