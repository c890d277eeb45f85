"""MJCF models in joint space: every hinge's and slide's damping, stiffness, armature and
limits and every joint-transmission actuator act in ``formulation="joint"``, those of the
hinges inside universal and three-hinge spherical joints included (the absolute
formulations leave those out). Against MuJoCo C: the generalised forces
qfrc_passive + qfrc_actuator and mj_forward's qacc at random states and controls, and RK4
trajectories under random controls (MuJoCo at h / 100 as the reference solution), with
contact, limits and friction loss off in both."""

import dataclasses
import os
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.actuators import with_controls
from jaxmbd.analysis.limits_option import with_limits
from jaxmbd.contact import with_contact
from jaxmbd.forces.joint_dynamics import JointDynamics
from jaxmbd.forces.joint_limits import JointLimits
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.equalities import with_equalities
from jaxmbd.joint_space.run import model_tree

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
gymnasium = pytest.importorskip("gymnasium")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
GYM = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
PATHS = {
    "humanoid": os.path.join(SUITE, "humanoid.xml"),
    "point_mass": os.path.join(SUITE, "point_mass.xml"),
    "quadruped": os.path.join(SUITE, "quadruped.xml"),
    "reacher": os.path.join(GYM, "reacher.xml"),
    "pusher": os.path.join(GYM, "pusher.xml"),
}
OFF = mujoco.mjtDisableBit
#: MuJoCo without contact, limits and friction loss (a constraint row there, regularised
#: dry friction in jaxmbd: compared where both are off)
FLAGS = OFF.mjDSBL_CONTACT | OFF.mjDSBL_LIMIT | OFF.mjDSBL_FRICTIONLOSS


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(PATHS[name], keyframe=None)
    # MuJoCo's own (soft) equality constraints: the quadruped's tendon couplings
    model = with_equalities(with_limits(with_contact(model, "none"), "none"), "soft")
    # MuJoCo's constraint rows off as in the reference (FLAGS): the smooth dynamics alone
    model = dataclasses.replace(model, constraint_model=None)
    forces = tuple(
        dataclasses.replace(f, friction_loss=jnp.zeros_like(f.friction_loss))
        if isinstance(f, JointDynamics) else f
        for f in model.forces
    )  # fmt: skip
    return dataclasses.replace(model, forces=forces)


def _mujoco(name):
    m = mujoco.MjModel.from_xml_path(PATHS[name])
    m.opt.disableflags |= FLAGS
    return m


def _joint_transmissions(m) -> bool:
    """Whether every actuator is jaxmbd's: on a joint or a tendon, no activation dynamics
    but jaxmbd's (none, integrator, filter, filterexact)."""
    kinds = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_TENDON))
    dyn = mujoco.mjtDyn
    dynamics = [int(d) for d in (dyn.mjDYN_NONE, dyn.mjDYN_INTEGRATOR, dyn.mjDYN_FILTER,
                                 dyn.mjDYN_FILTEREXACT)]  # fmt: skip
    return (
        bool(m.nu)
        and all(int(t) in kinds for t in m.actuator_trntype)
        and all(int(t) in dynamics for t in m.actuator_dyntype)
    )


@eqx.filter_jit
def _joint_space(model, qpos, qvel, h):
    tree, loops = model_tree(model)
    # h: MuJoCo's timestep, in the soft rows' time constant max(solref[0], 2 h)
    acc = accelerations(model, tree, loops, qpos, qvel, 0.0, step=h)
    return acc.forces.tau, acc.qacc


@pytest.mark.parametrize("name", ["humanoid", "point_mass", "quadruped", "reacher", "pusher"])
def test_forces_and_accelerations_against_mujoco_at_random_states(name):
    """tau (the joint elements' generalised forces) = qfrc_passive + qfrc_actuator and
    qacc = mj_forward's, to 1e-10 relative, at random states and controls (point_mass's
    actuators drive its tendons). quadruped's have activation dynamics (filters): at the
    start of a run their activation is MuJoCo's initial act, 0, whatever u; its tendon
    couplings are MuJoCo's soft equality constraints (``equality="soft"``), their forces in
    qacc."""
    model, m = _load(name), _mujoco(name)
    d = mujoco.MjData(m)
    actuated = _joint_transmissions(m)
    if actuated:
        assert model.nu == m.nu
        # MuJoCo's order: each actuator drives the joint (or tendon) of MuJoCo's actuator
        obj = mujoco.mjtObj
        tendon = int(mujoco.mjtTrn.mjTRN_TENDON)
        assert model.actuators.names == tuple(
            "tendon:" + mujoco.mj_id2name(m, obj.mjOBJ_TENDON, int(m.actuator_trnid[k][0]))
            if int(m.actuator_trntype[k]) == tendon
            else mujoco.mj_id2name(m, obj.mjOBJ_JOINT, int(m.actuator_trnid[k][0]))
            for k in range(m.nu)
        )
    rng = np.random.default_rng(1)
    for _ in range(3):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        mujoco.mj_normalizeQuat(m, d.qpos)
        d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
        u = rng.uniform(-1.0, 1.0, m.nu) if actuated else np.zeros(m.nu)
        d.ctrl[:] = u
        mujoco.mj_forward(m, d)
        run = with_controls(model, u) if actuated else model
        tau, qacc = _joint_space(run, jnp.asarray(d.qpos), jnp.asarray(d.qvel), m.opt.timestep)
        # quadruped's position servos have activation states: bias forces at zero activation
        expected = d.qfrc_passive + (d.qfrc_actuator if actuated else 0.0)
        assert np.abs(expected).max() > 0
        scale = np.abs(expected).max()
        assert np.abs(np.asarray(tau) - expected).max() < ROUND_OFF * scale, name
        assert m.neq == 0 or np.abs(d.qfrc_constraint).max() > 1.0  # the couplings act
        scale = np.abs(d.qacc).max()
        assert np.abs(np.asarray(qacc) - d.qacc).max() < 2e-13 * scale, name


def _reference(name, qpos, qvel, controls, h, substeps=10):
    m = _mujoco(name)
    m.opt.timestep = h / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    out = [np.array(d.qpos)]
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
        out.append(np.array(d.qpos))
    return np.stack(out)


@pytest.mark.parametrize(
    ("name", "h", "n"),
    [("humanoid", 5e-4, 400), ("point_mass", 1e-3, 300), ("reacher", 1e-3, 300),
     ("pusher", 1e-3, 300)],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore::jaxmbd.AssemblyWarning")  # rates set in the tree only
def test_rk4_trajectories_against_mujoco_under_random_controls(name, h, n):
    """Joint coordinates of jaxmbd's RK4 against MuJoCo's RK4 at h / 10 (to 1e-6), from
    random rates, under random controls (point_mass's pull along its tendons). The humanoid
    at h = 5e-4: RK4's own error at 1e-3 is 6e-6 after 0.2 s (and 3e-7 at 5e-4, the factor
    16 of fourth order; the reference's own, at h / 10, is 1e-4 of that)."""
    model, m = _load(name), _mujoco(name)
    tree = model.tree
    rng = np.random.default_rng(2)
    qvel = rng.uniform(-0.5, 0.5, tree.nv)
    model = dataclasses.replace(model, tree=dataclasses.replace(tree, qvel_init=jnp.asarray(qvel)))
    actuated = _joint_transmissions(m)
    controls = rng.uniform(-1.0, 1.0, (n, m.nu))
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls if actuated else None)  # fmt: skip
    reference = _reference(name, np.asarray(tree.qpos_init), qvel,
                           controls if actuated else np.zeros((n, m.nu)), h)  # fmt: skip
    assert np.abs(reference[-1] - reference[0]).max() > 1e-2  # it moved
    assert np.abs(np.asarray(sol.qpos) - reference).max() < 1e-6


def test_absolute_formulations_leave_out_the_composite_hinges():
    """The humanoid's hinges inside universal and three-hinge spherical joints carry their
    damping, limits and actuators for the joint formulation; the absolute formulations'
    view of the elements (absolute_part) is the single hinges' alone, as the model's
    joints give them, and a model file keeps which entries are which."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = mbd.load_model(PATHS["humanoid"])
    message = " ".join(str(w.message) for w in record)
    assert "abdomen_z" not in message  # the joint formulation, the default, applies them
    names = {d.name for d in model.joints}
    assert "abdomen_z" not in names and "abdomen_z+abdomen_y" in names
    for element in model.forces:
        if not element.acts_along_joints:
            continue
        kept = element.absolute_part()
        assert {d.name for d in kept.joints} <= names
        assert "abdomen_z" in element.names and "abdomen_z" not in kept.names
    assert model.actuators.absolute_part().nu < model.nu == 21


GIMBAL = """<mujoco><option><flag contact="disable"/></option><worldbody>
  <body name="gimbal" pos="0 0 1">
    <joint name="u1" axis="1 0 0" damping="0.5" stiffness="3" range="-1 1" limited="true"/>
    <joint name="u2" axis="0 1 0" damping="0.2" armature="0.1"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 -0.4" size="0.05" mass="1"/>
    <body name="arm" pos="0.3 0 -0.4"><joint name="elbow" axis="0 1 0" damping="0.1"
        range="-0.5 0.5" limited="true"/>
      <geom type="capsule" fromto="0 0 0 0 0.2 -0.3" size="0.04" mass="0.5"/></body></body>
</worldbody><actuator><motor joint="u1" gear="2"/><motor joint="elbow"/></actuator>
<keyframe><key qpos="0.3 -0.2 0.4" qvel="1 -2 3"/></keyframe></mujoco>"""


def test_absolute_run_ignores_the_composite_hinges_entries(tmp_path):
    """rA on a universal joint whose hinges are damped, sprung, limited and actuated is
    the run of the same file without those entries (to round-off: the absolute
    formulations leave them out, and the run's JointSpaceOnlyWarning names them), with the
    same observation and limits; the model file round trip keeps the entries and which
    formulations apply them."""
    plain = (
        GIMBAL.replace(' damping="0.5" stiffness="3" range="-1 1" limited="true"', "")
        .replace(' damping="0.2" armature="0.1"', "")
        .replace('<motor joint="u1" gear="2"/>', "")
    )
    models = []
    for text, name in ((GIMBAL, "gimbal.xml"), (plain, "plain.xml")):
        (tmp_path / name).write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.append(mbd.load_model(tmp_path / name))
    full, bare = models
    assert (full.nu, bare.nu) == (2, 1)
    # MuJoCo's limit gains scale with the joint's inverse inertia at qpos0, which u2's
    # armature changes: the elbow's stop takes the full model's gains in both
    full_limits = next(f for f in full.forces if isinstance(f, JointLimits)).absolute_part()
    bare = dataclasses.replace(bare, forces=tuple(
        full_limits if isinstance(f, JointLimits) else f for f in bare.forces))  # fmt: skip
    rng = np.random.default_rng(3)
    u = rng.uniform(-1.0, 1.0, (50, 2))
    with pytest.warns(mbd.JointSpaceOnlyWarning) as record:
        runs = [
            mbd.simulate(
                model, formulation="rA", integrator="rkmk", t_end=0.05, h=1e-3, controls=controls
            )  # fmt: skip
            for model, controls in ((full, u), (bare, u[:, 1:]))
        ]
    (warning,) = [w for w in record if w.category is mbd.JointSpaceOnlyWarning]  # full only
    text = str(warning.message)
    assert "formulation 'rA'" in text and "limits on ['u1']" in text, text
    assert "['u1', 'u2']" in text and "actuators on ['u1']" in text, text
    assert np.abs(np.asarray(runs[0].r) - runs[0].r[0]).max() > 1e-2  # it moved
    np.testing.assert_allclose(runs[0].r, runs[1].r, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(runs[0].limits["elbow"], runs[1].limits["elbow"], rtol=0,
                               atol=5e-12)  # fmt: skip
    assert sorted(runs[0].limits) == ["elbow"]
    np.testing.assert_array_equal(
        mbd.actuators.observation(full, full.r0, full.A0, full.rdot0, full.omega0),
        mbd.actuators.observation(bare, bare.r0, bare.A0, bare.rdot0, bare.omega0),
    )
    path = mbd.save_model(full, tmp_path / "gimbal.json")
    again = mbd.load_model(path)
    for a, b in zip(full.forces, again.forces, strict=True):
        if a.acts_along_joints:
            assert a.names == b.names and a.absolute_entries == b.absolute_entries
            assert a.absolute_entries is not None
