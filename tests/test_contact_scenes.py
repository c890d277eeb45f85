"""Contact scenes at rest against MuJoCo C: a stack of three boxes, dm_control's humanoid
lying on the floor and gymnasium's ant standing. MuJoCo steps each scene to rest
(``mj_step``, its own time step); jaxmbd starts from that state (a keyframe added with
``MjSpec``, so the comparison is of the resting states, not of the path of a fall) and
runs until it rests under its own contact law. Resting heights of the bodies agree to
1 mm, and at rest the floor's normal forces carry the weight to 1e-6. The humanoid and
the ant take minutes to compile and run: ``slow``."""

from __future__ import annotations

import dataclasses
import os
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.forces.joint_limits import JointLimits

mujoco = pytest.importorskip("mujoco")

G = 9.81

# three boxes of decreasing size; beside them the two balls of
# tests/test_contact_params.py: "a" with a margin and a gap, "b" colliding through an
# explicit <pair> only (its bits exclude it), with the pair's margin
STACK_XML = """<mujoco model="stack"><option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" friction="1 0.005 0.0001"/>
    <body name="b1" pos="0 0 0.1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
    <body name="b2" pos="0.01 0.005 0.3"><freejoint/>
      <geom type="box" size=".08 .08 .1" mass="0.5"/></body>
    <body name="b3" pos="-0.005 0.005 0.48"><freejoint/>
      <geom type="box" size=".06 .06 .08" mass="0.3"/></body>
    <body name="a" pos="0.5 0 0.11"><freejoint/>
      <geom name="ga" type="sphere" size="0.1" mass="1" margin="0.01" gap="0.004"/>
    </body>
    <body name="b" pos="1 0 0.105"><freejoint/>
      <geom name="gb" type="sphere" size="0.1" mass="2" contype="0" conaffinity="0"
            friction="1.5 0.005 0.0001"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="gb" geom2="floor" condim="6" friction="0.2 0.2 0.01 0.001 0.001"
          margin="0.006" gap="0.001" solref="0.01 1"/>
  </contact>
</mujoco>"""


def _mujoco_rest(spec, settle, *, qpos=None):
    """MuJoCo's model and data after ``settle`` s of mj_step from ``qpos`` (or its own)."""
    m = spec.compile()
    d = mujoco.MjData(m)
    if qpos is not None:
        d.qpos[:] = qpos
    while d.time < settle:
        mujoco.mj_step(m, d)
    return m, d


def _ours_from(spec, d, path):
    """The scene in jaxmbd, starting from MuJoCo's state ``d`` (a keyframe, at rest)."""
    spec.add_key(name="mujoco_rest", qpos=np.array(d.qpos))
    path.write_text(spec.to_xml())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.mjcf.UnsupportedFeatureWarning)
        return mbd.load_model(path)


def _compare(m, d, model, sol):
    """(largest difference of the bodies' centres of mass heights (m), floor normal force
    over the weight - 1 at the end, the last state's largest |qvel|). A jaxmbd body is
    MuJoCo's bodies welded together (no joint between them): their common centre."""
    names = list(model.body_names)
    weld = np.asarray(m.body_weldid)
    diffs = []
    for b in range(1, m.nbody):
        if weld[b] != b:
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
        group = np.flatnonzero(weld == b)
        mass = np.asarray(m.body_mass)[group]
        k = names.index(name)
        # rel 1e-5: the model is read from MjSpec.to_xml's file, whose sizes and positions
        # MuJoCo 4.0 writes to about 7 digits (the ant's legs: 0.03915768 kg from the file,
        # as MuJoCo compiles it too, against 0.03915775 from the spec, 1.8e-6 relative)
        assert float(model.mass[k]) == pytest.approx(mass.sum(), rel=1e-5, abs=0)
        centre = mass @ np.asarray(d.xipos)[group, 2] / mass.sum()
        diffs.append(float(sol.r[-1, k, 2]) - centre)
    c = model.contacts
    on_floor = np.array([c.pair_names[p].split("#")[0].endswith("/ground") for p in c.slot_pair])
    vertical = np.asarray(sol.contact.normal_force[-1] * sol.contact.normal[-1, :, 2])
    weight = float(np.sum(model.mass)) * G
    return (np.max(np.abs(diffs)), float(vertical[on_floor].sum()) / weight - 1,
            float(np.max(np.abs(np.asarray(sol.qvel[-1])))))  # fmt: skip


def test_stack_of_boxes_and_balls_with_margins_rest_as_in_mujoco(tmp_path):
    """Three boxes of decreasing size, each resting on the one below (8 corner contacts per
    interface here, MuJoCo's box-box clipping there), and the balls with a margin and an
    explicit pair: heights to 0.1 mm (0.075 mm measured for the boxes, the difference of
    the two laws' penetrations shared by several contacts; 1.4e-6 for the balls, whose one
    contact is calibrated to MuJoCo's), and the floor carries the 4.8 kg to 3e-9 (6.8e-10
    measured)."""
    spec = mujoco.MjSpec.from_string(STACK_XML)
    m, d = _mujoco_rest(spec, 2.0)
    assert np.max(np.abs(d.qvel)) < 3e-6
    model = _ours_from(spec, d, tmp_path / "stack.xml")
    sol = mbd.simulate(model, t_end=0.3, h=2e-3, contact="compliant")
    assert sol.result == mbd.RESULTS.successful
    height, load, speed = _compare(m, d, model, sol)
    assert height < 1e-4 and abs(load) < 3e-9 and speed < 1e-5, (height, load, speed)
    balls = [list(model.body_names).index(name) for name in ("a", "b")]
    # one contact each: "a" calibrated to MuJoCo's exactly, "b" (condim 6) to 1.4e-6
    np.testing.assert_allclose(np.asarray(sol.r[-1, balls, 2]), d.qpos[[23, 30]], atol=3e-6)


@pytest.mark.slow
def test_humanoid_lying_on_the_floor_rests_as_in_mujoco(tmp_path):
    """dm_control's humanoid turned onto its back and lowered to 12 cm, stepped by MuJoCo
    for 20 s (|qvel| < 2e-4), then 2 s in jaxmbd: the bodies' heights to 1 mm (0.37 mm
    measured after 1 s), the weight on the floor to 1e-6 (1.4e-6 after 1 s, still
    settling at |qvel| 4e-4). The run names contact="compliant" and limits="compliant", the
    laws these numbers were measured with (as the stack's above): a model read from MJCF
    now defaults to MuJoCo's soft constraint model."""
    dm_control = pytest.importorskip("dm_control")
    spec = mujoco.MjSpec.from_file(os.path.dirname(dm_control.__file__) + "/suite/humanoid.xml")
    qpos = np.array(spec.compile().qpos0)
    qpos[2], qpos[3:7] = 0.12, [np.cos(-np.pi / 4), 0, np.sin(-np.pi / 4), 0]
    m, d = _mujoco_rest(spec, 20.0, qpos=qpos)
    assert np.max(np.abs(d.qvel)) < 1e-3
    model = _ours_from(spec, d, tmp_path / "humanoid.xml")
    sol = mbd.simulate(model, t_end=2.0, h=2e-3, contact="compliant", limits="compliant")
    assert sol.result == mbd.RESULTS.successful
    height, load, speed = _compare(m, d, model, sol)
    assert height < 1e-3 and abs(load) < 1e-6, (height, load, speed)


def _limit_stiffness_of_mujoco(model, m, d):
    """``model`` with the stiffness of each limit MuJoCo holds at rest set to MuJoCo's
    static one there, its limit force over its violation (efc_force / efc_pos): the
    importer's limits keep jaxmbd's default stiffness (:mod:`jaxmbd.forces.joint_limits`), which
    lets the ant's ankles 0.011 rad into their stops where MuJoCo's soft limits give
    4e-5 rad, 6 mm of torso height. The scene checks the contacts."""
    held = {}
    for row in range(d.nefc):
        if d.efc_type[row] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT:
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(d.efc_id[row]))
            held[name] = abs(float(d.efc_force[row]) / float(d.efc_pos[row]))
    forces = []
    for f in model.forces:
        if isinstance(f, JointLimits):
            k = [held.get(j.name, float(s)) for j, s in zip(f.joints, f.stiffness, strict=True)]
            f = dataclasses.replace(f, stiffness=jnp.asarray(k))
        forces.append(f)
    assert held
    return dataclasses.replace(model, forces=tuple(forces))


@pytest.mark.slow
def test_ant_standing_rests_as_in_mujoco(tmp_path):
    """gymnasium's ant without controls, stepped by MuJoCo for 15 s until it stands still
    on its four feet with its ankles on their stops (contact margin 0.01 in its file), then
    1 s in jaxmbd with the stops' static stiffness set to MuJoCo's: heights to 1 mm (0.48
    mm measured), the weight on the floor to 1e-6 (8e-15). Compliant contact and limits
    (the file's default is now MuJoCo's soft model, where the stops' stiffness set here
    would not act)."""
    gymnasium = pytest.importorskip("gymnasium")
    path = os.path.dirname(gymnasium.__file__) + "/envs/mujoco/assets/ant.xml"
    spec = mujoco.MjSpec.from_file(path)
    m, d = _mujoco_rest(spec, 15.0)
    assert np.max(np.abs(d.qvel)) < 1e-8 and d.ncon == 4
    model = _limit_stiffness_of_mujoco(_ours_from(spec, d, tmp_path / "ant.xml"), m, d)
    assert np.allclose(model.contacts.margin, 0.02)  # the floor's and the feet's 0.01
    sol = mbd.simulate(model, t_end=1.0, h=5e-3, contact="compliant", limits="compliant")
    assert sol.result == mbd.RESULTS.successful
    height, load, speed = _compare(m, d, model, sol)
    assert height < 1e-3 and abs(load) < 1e-6, (height, load, speed)
