"""The defaults of a run of a model file: MuJoCo's constraint model (contact, limits,
friction loss and equalities "soft", solved together), the file's integrator and timestep,
as ``mj_step`` runs the file; a part switched to one of jaxmbd's treatments leaves the
others soft. Models built in code, and the absolute formulations, keep jaxmbd's defaults.
References: MuJoCo C (``mj_step``), with the solver's tolerance tightened in both."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

import jaxmbd as mbd  # noqa: E402
from jaxmbd.formulations.joint import JointCoordinates  # noqa: E402

HOPPER = Path(dm_control.__file__).parent / "suite" / "hopper.xml"
TIGHT = dict(tolerance=1e-14, iterations=1000)

#: Two hinges with limits, friction loss and a joint equality (elbow = shoulder / 2), a
#: sphere and a capsule over a floor they do not reach in the run; the shoulder meets its
#: upper limit at the 8th step.
ARM = """
<mujoco model="coupled arm">
  <option timestep="0.002" integrator="implicitfast" tolerance="1e-14" iterations="1000"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" limited="true" range="-30 30"
             frictionloss="0.05" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" limited="true" range="-20 20"
               frictionloss="0.02"/>
        <geom type="sphere" pos="0.3 0 0" size="0.05" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="elbow" joint2="shoulder" polycoef="0 0.5 0 0 0"/>
  </equality>
  <keyframe><key qpos="0.45 0.225" qvel="6 3"/></keyframe>
</mujoco>
"""


def _mj_steps(m, controls=None, steps=None):
    """qpos of ``mj_step`` from the file's start (its first keyframe, else qpos0)."""
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    out, rows = [d.qpos.copy()], []
    for k in range(len(controls) if controls is not None else steps):
        if controls is not None:
            d.ctrl[:] = controls[k]
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
        rows.append(d.nefc)
    return np.asarray(out), rows


@pytest.fixture(scope="module")
def arm_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("file_defaults") / "arm.xml"
    path.write_text(ARM)
    return path


def test_plain_call_runs_the_file_as_mj_step():
    """``simulate(model, t_end=...)`` of dm_control's hopper, nothing else named: soft
    contact and limits, the file's Euler and 5 ms step; 40 steps from the file's start
    (the foot lands at the 20th) equal ``mj_step``'s to round-off."""
    m = mujoco.MjModel.from_xml_path(str(HOPPER))
    m.opt.tolerance, m.opt.iterations = TIGHT["tolerance"], TIGHT["iterations"]
    controls = np.random.default_rng(7).uniform(-1, 1, (40, m.nu))
    expected, rows = _mj_steps(m, controls)
    assert max(rows) > 4, "the run should meet contacts and limits"
    model = mbd.load_model(HOPPER)
    cm = model.constraint_model
    cm = dataclasses.replace(cm, solver=dataclasses.replace(cm.solver, **TIGHT))
    model = dataclasses.replace(model, constraint_model=cm)
    sol = mbd.simulate(model, t_end=40 * float(m.opt.timestep), controls=controls)
    plan = sol.plan
    assert (plan.formulation, plan.integrator) == ("joint", "euler")
    assert (plan.contact, plan.limits) == ("soft", "soft")
    assert plan.step_size == float(m.opt.timestep) and plan.steps == 40
    error = np.abs(np.asarray(sol.qpos) - expected).max()
    assert error < ROUND_OFF, error  # round-off (the bound: 1e-9)
    # the touch sensors read the solved contact forces: MuJoCo's sensordata after
    # mj_forward at each row's state under the row's controls (the rows' solves warm
    # started where mj_forward's is not: to the tight tolerance)
    assert sol.sensors["torso_subtreelinvel"].shape == (41, 3)
    d = mujoco.MjData(m)
    qpos, qvel, ctrl = (np.asarray(x) for x in (sol.qpos, sol.qvel, sol.controls))
    for name in ("touch_toe", "touch_heel"):
        ours = np.asarray(sol.sensors[name])[:, 0]
        theirs = []
        for k in range(len(ours)):
            d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[k], qvel[k], ctrl[k]
            mujoco.mj_forward(m, d)
            theirs.append(d.sensor(name).data[0])
        theirs = np.asarray(theirs)
        assert np.sum(theirs > 0) >= 5, name  # rows in contact
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9 * theirs.max())


@pytest.mark.parametrize("warmstart", [True, False])
def test_the_solve_starts_where_mujocos_does(warmstart):
    """One Newton iteration per step (``opt.iterations`` 1): each step's answer depends on
    where its solve starts, MuJoCo's warm start (the previous step's constraint-solver qacc,
    before the Euler step's implicit damping) or, with the file's ``warmstart`` flag
    disabled, the unconstrained qacc. The hopper's 40 steps equal ``mj_step``'s to
    round-off either way (measured 1.7e-13 warm, 1.2e-14 cold: a single unconverged
    iteration carries each factorisation's last bits into the next step; a run that
    started every solve cold, with MuJoCo warm, parted by 0.3 in qpos)."""
    m = mujoco.MjModel.from_xml_path(str(HOPPER))
    m.opt.iterations, m.opt.ls_iterations = 1, 4
    if not warmstart:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    controls = np.random.default_rng(7).uniform(-1, 1, (40, m.nu))
    expected, _ = _mj_steps(m, controls)
    model = mbd.load_model(HOPPER)
    cm = model.constraint_model
    assert cm.solver.warmstart
    solver = dataclasses.replace(cm.solver, iterations=1, ls_iterations=4, warmstart=warmstart)
    model = dataclasses.replace(model, constraint_model=dataclasses.replace(cm, solver=solver))
    sol = mbd.simulate(model, t_end=40 * float(m.opt.timestep), controls=controls)
    error = np.abs(np.asarray(sol.qpos) - expected).max()
    assert error < 1e-12, error


def test_the_files_warmstart_flag_is_read(tmp_path):
    path = tmp_path / "cold.xml"
    path.write_text(ARM.replace('iterations="1000"/>', 'iterations="1000">'
                                '<flag warmstart="disable"/></option>'))  # fmt: skip
    assert not mbd.load_model(path).constraint_model.solver.warmstart


def test_rows_left_soft_are_solved_together(arm_path):
    """contact="compliant" on a file: its limits, friction loss and equality stay MuJoCo's
    rows, solved together; the pairs never touch in the run, so it is MuJoCo's step with
    contact disabled (the step of the compliant contact, ``implicit``, is the file's
    ``implicitfast`` here: no force depends on the positions), to round-off."""
    m = mujoco.MjModel.from_xml_path(str(arm_path))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    expected, rows = _mj_steps(m, steps=20)
    assert rows[0] == 3 and rows[-1] == 4  # equality, 2 friction loss; then the limit
    model = mbd.load_model(arm_path)
    sol = mbd.simulate(model, t_end=0.04, contact="compliant")
    plan = sol.plan
    assert (plan.contact, plan.limits, plan.equality) == ("compliant", "soft", "soft")
    assert plan.integrator == JointCoordinates.file_contact_integrator
    assert plan.step_size == 0.002
    error = np.abs(np.asarray(sol.qpos) - expected).max()
    assert error < ROUND_OFF, error
    # the compliant pairs' slots (not the soft rows' forces read as hard contact's)
    assert not np.asarray(sol.contact.active).any()
    assert np.asarray(sol.contact.normal_force).max() == 0.0


def test_file_plans(arm_path):
    """What a file's run decides without running it: every part soft with the file's
    integrator and step by default; a part switched keeps the others soft; an absolute
    formulation named keeps jaxmbd's compliant contact and limits and exact equalities;
    statics and linearisation, which have no soft model, refuse "soft" by name."""
    model = mbd.load_model(arm_path)
    plan = mbd.plan_simulation(model, t_end=0.01)
    assert (plan.contact, plan.limits, plan.equality) == ("soft", "soft", "soft")
    assert (plan.integrator, plan.step_size, plan.steps) == ("implicitfast", 0.002, 5)
    assert "soft" in str(plan)
    switched = mbd.plan_simulation(model, t_end=0.01, contact="none", equality="none")
    assert (switched.contact, switched.limits, switched.equality) == ("none", "soft", "none")
    assert switched.integrator == "implicitfast"
    # the joint equality is joint coordinates' alone: the arm without it
    free = arm_path.with_name("free_arm.xml")
    free.write_text(ARM.split("<equality>")[0] + ARM.split("</equality>")[1])
    free_model = mbd.load_model(free)
    absolute = mbd.plan_simulation(free_model, t_end=0.01, formulation="rA")
    assert (absolute.contact, absolute.limits, absolute.equality) == (
        "compliant", "compliant", "exact"
    )  # fmt: skip
    with pytest.raises(ValueError, match="contact='soft' .* is an option of simulate only"):
        mbd.static_equilibrium(model, contact="soft")
    with pytest.raises(ValueError, match="limits='soft' .* is an option of simulate only"):
        mbd.linearize(model, limits="soft")


def test_built_model_keeps_its_defaults():
    """A model built in code: compliant contact and limits, exact equalities, the joint
    formulation's integrators; its step must be given."""
    b = mbd.ModelBuilder("drop", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[1e-3] * 3, r=(0, 0, 0.5),
               shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5)
    model = b.build()
    assert model.constraint_model is None
    plan = mbd.plan_simulation(model, t_end=0.01, h=1e-3)
    assert (plan.contact, plan.limits, plan.equality) == ("compliant", "compliant", "exact")
    assert plan.integrator == JointCoordinates.contact_integrator
    with pytest.raises(ValueError, match="pass the step size h= for model 'drop'"):
        mbd.plan_simulation(model, t_end=0.01)


BALL_WITH_TOUCH = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="ball" pos="0 0 0.12">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.1" mass="1"/>
      <site name="below" type="box" pos="0 0 -0.3" size="0.05 0.05 0.05"/>
      <site name="above" type="sphere" pos="0 0 0.3" size="0.05"/>
    </body>
  </worldbody>
  <sensor>
    <touch name="below" site="below"/>
    <touch name="above" site="above"/>
  </sensor>
</mujoco>
"""


def test_touch_zones_see_the_solved_contacts_as_mujoco_does(tmp_path):
    """A ball dropped on the floor, its touch zones away from the contact point: MuJoCo
    counts a contact whose ray, from the contact point along the normal away from the
    sensor's body, meets the zone. The zone below the floor sees the ball's weight, the
    one above sees nothing; both equal sensordata after mj_forward at each row."""
    path = tmp_path / "ball.xml"
    path.write_text(BALL_WITH_TOUCH)
    m = mujoco.MjModel.from_xml_path(str(path))
    sol = mbd.simulate(mbd.load_model(path), t_end=100 * m.opt.timestep)
    assert sol.plan.contact == "soft"
    d = mujoco.MjData(m)
    theirs = {"below": [], "above": []}
    for q, v in zip(np.asarray(sol.qpos), np.asarray(sol.qvel), strict=True):
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_forward(m, d)
        for name in theirs:
            theirs[name].append(d.sensor(name).data[0])
    below, above = (np.asarray(theirs[n]) for n in ("below", "above"))
    assert below.max() > 5 and above.max() == 0  # the weight, 9.81 N, seen from below only
    np.testing.assert_allclose(np.asarray(sol.sensors["below"])[:, 0], below, atol=1e-6)
    np.testing.assert_allclose(np.asarray(sol.sensors["above"])[:, 0], above, atol=0)
