"""MJCF files as kinematic trees: every file of dm_control's suite and of gymnasium's MuJoCo
assets loads with ``model.tree`` in MuJoCo's joints, whose poses at the initial state are
the model's bodies; bodies whose joints compose into no GCON joint are named in
``model.joint_space_only`` and keep their joints' limits, passive values and actuators.
Loading only (no simulation)."""

import dataclasses
import glob
import os
import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd import tree as T
from jaxmbd.forces.joint_dynamics import JointDynamics
from jaxmbd.forces.joint_limits import JointLimits
from jaxmbd.mjcf import UnsupportedFeatureWarning

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
gymnasium = pytest.importorskip("gymnasium")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
FILES = sorted(
    f for f in glob.glob(os.path.join(SUITE, "*.xml")) if os.path.basename(f) != "lqr.xml"
) + sorted(glob.glob(os.path.join(ASSETS, "*.xml")))
# the files with a body whose joints compose into no GCON joint (two slides, two hinges
# on one body that are not a universal joint's, ...), read from the files
COMPOSITE = {
    "suite/ball_in_cup.xml": ["cup", "ball"],
    "suite/dog.xml": ["scapula_L", "scapula_R"],
    "suite/fish.xml": ["finright", "finleft"],
    "suite/humanoid.xml": ["right_foot", "left_foot"],
    "suite/point_mass.xml": ["pointmass"],
    "assets/pusher.xml": ["object", "goal"],
    "assets/pusher_v5.xml": ["object", "goal"],
    "assets/reacher.xml": ["target"],
}


def _key(path):
    return "/".join(path.split(os.sep)[-2:])


# the dog's 29 tree levels: its poses take ~15 s op by op (-m slow)
DEEP = {"suite/dog.xml"}


def _file_param(path):
    marks = (pytest.mark.slow,) if _key(path) in DEEP else ()
    return pytest.param(path, marks=marks, id=_key(path))


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        return mbd.load_model(path)


def _mujoco_state(m):
    if m.nkey:
        return np.array(m.key_qpos[0]), np.array(m.key_qvel[0])
    return np.array(m.qpos0), np.zeros(m.nv)


def _joint_names(m):
    return tuple(
        mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}" for j in range(m.njnt)
    )


@pytest.mark.parametrize("path", [_file_param(f) for f in FILES])
def test_file_loads_as_a_kinematic_tree(path):
    model = _load(path)
    m = mujoco.MjModel.from_xml_path(path)
    tree = model.tree
    assert isinstance(tree, T.KinematicTree)
    assert (tree.nq, tree.nv) == (m.nq, m.nv)
    assert tree.joint_names == _joint_names(m)
    assert tree.body_names == model.body_names
    qpos, qvel = _mujoco_state(m)
    np.testing.assert_array_equal(tree.qpos_init, qpos)
    np.testing.assert_array_equal(tree.qvel_init, qvel)
    # the bodies whose joints compose into no GCON joint, and only those
    composite = [r for r in model.joint_space_only if "compose into no GCON joint" in r]
    bodies = [reason.split("'")[1] for reason in composite]
    assert bodies == COMPOSITE.get(_key(path), [])
    # the rest: fixed tendons over those bodies' hinges
    assert all("tendon" in r for r in model.joint_space_only if r not in composite)
    # the tree's frames at the initial state are the model's bodies (MuJoCo's kinematics)
    poses = T.poses(tree, tree.qpos_init)
    np.testing.assert_allclose(poses.c, model.r0, rtol=0, atol=2e-14)
    np.testing.assert_allclose(poses.R, model.A0, rtol=0, atol=3e-14)
    # the same masses and inertias (welded bodies merged alike)
    built = T.tree_from_mujoco(mujoco, m, qpos, qvel)
    np.testing.assert_allclose(model.mass, built.mass, rtol=ROUND_OFF)
    np.testing.assert_allclose(
        model.inertia, built.inertia, rtol=0, atol=ROUND_OFF * np.abs(built.inertia).max()
    )
    # every joint force element acts on joints of the tree, by MuJoCo's joint names
    for force in model.forces:
        for defn in getattr(force, "joints", ()):
            if defn.kind != "tendon":  # a tendon actuator's placeholder entry
                assert defn.name in tree.joint_names, (force, defn.name)


def _forces(model, kind):
    return next((f for f in model.forces if isinstance(f, kind)), None)


@pytest.mark.parametrize("name", ["humanoid", "point_mass"])
def test_joint_space_joints_keep_limits_damping_and_actuators(name):
    """The hinges and slides of bodies whose joints compose into no GCON joint are joints
    of their MuJoCo names whose coordinate is their qpos (offset qpos0), with MuJoCo's
    ranges, damping and actuators."""
    path = os.path.join(SUITE, name + ".xml")
    model = _load(path)
    m = mujoco.MjModel.from_xml_path(path)
    names = _joint_names(m)
    composite = [
        j
        for j in range(m.njnt)
        if m.jnt_bodyid[j] in {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b)
                               for b in COMPOSITE[f"suite/{name}.xml"]}
    ]  # fmt: skip
    defs = {d.name: d for d in model.joints}
    limits = _forces(model, JointLimits)
    dynamics = _forces(model, JointDynamics)
    for j in composite:
        d = defs[names[j]]
        assert d.kind == {2: "translational", 3: "revolute"}[int(m.jnt_type[j])]
        assert float(d.offset[0]) == m.qpos0[m.jnt_qposadr[j]] and d.sign == (1,)
        body = model.body_names.index(mujoco.mj_id2name(m, 1, m.jnt_bodyid[j]))
        assert d.body_j == body
        # no rows: the joint is evaluated in joint space
        assert names[j] not in model.constraint_joints
        if m.jnt_limited[j]:
            k = [x.name for x in limits.joints].index(names[j])
            np.testing.assert_array_equal(
                [limits.lower[k], limits.upper[k]], np.asarray(m.jnt_range[j])
            )
        if m.dof_damping[m.jnt_dofadr[j]]:
            k = [x.name for x in dynamics.joints].index(names[j])
            assert float(dynamics.damping[k]) == m.dof_damping[m.jnt_dofadr[j]]
    driven = {
        names[m.actuator_trnid[a][0]]
        for a in range(m.nu)
        if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
    }
    acts = model.actuators
    got = set() if acts is None else {d.name for d in acts.joints}
    assert {names[j] for j in composite} & driven <= got


def test_two_hinges_on_one_body_load_for_the_joint_formulation(tmp_path):
    path = tmp_path / "twohinges.xml"
    path.write_text(
        "<mujoco><worldbody><body name='b'><joint name='h1' axis='0 1 0' range='-1 1'"
        " limited='true' damping='0.5'/><joint name='h2' axis='0 1 0' pos='0.1 0 0'/>"
        "<geom size='0.1'/></body></worldbody>"
        "<actuator><motor name='m' joint='h2'/></actuator></mujoco>"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mbd.load_model(path)
    lost = " ".join(str(w.message) for w in caught)
    assert "h1" not in lost and "h2" not in lost and "'m'" not in lost
    assert model.joint_space_only == (
        "body 'b': joints h1 (hinge), h2 (hinge) compose into no GCON joint (supported on one "
        "body: one hinge/slide/ball/free joint, two hinges on perpendicular axes through one "
        "point, a slide and a hinge on one axis, three hinges through one point, two slides "
        "and a hinge normal to them, three slides)",
    )
    assert [(d.name, d.kind) for d in model.joints] == [("h1", "revolute"), ("h2", "revolute")]
    assert model.nc == 0
    np.testing.assert_allclose(model.joints[1].s_bar_j, [0.1, 0, 0], rtol=0, atol=ROUND_OFF)
    assert model.actuators.actuator_names == ("m",)
    assert [d.name for d in _forces(model, JointLimits).joints] == ["h1"]
    assert [d.name for d in _forces(model, JointDynamics).joints] == ["h1"]


def test_tree_and_joint_space_only_round_trip_through_model_files(tmp_path):
    import jax

    # gymnasium's reacher: its target is a slide-slide body, joint-space only (no tendons, which
    # model files do not hold)
    model = _load(os.path.join(ASSETS, "reacher.xml"))
    assert model.joint_space_only and model.tendons is None
    again = mbd.load_model(mbd.save_model(model, tmp_path / "reacher.json"))
    assert again.joint_space_only == model.joint_space_only
    # MuJoCo's constraint model (contact="soft") stays with the MJCF file: model files hold
    # jaxmbd's own elements
    assert model.constraint_model is not None and again.constraint_model is None
    model = dataclasses.replace(model, constraint_model=None)
    assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
