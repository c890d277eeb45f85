"""Reactions of the tree joints in joint coordinates (Newton-Euler over subtrees) against
independent references: the multipliers of the rA formulation, MuJoCo C's ``cfrc_int``,
and each body's own Newton-Euler balance in a closed loop."""

import os
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.actuators import with_controls
from jaxmbd.analysis import diagnostics
from jaxmbd.contact import with_contact
from jaxmbd.forces import BodyState
from jaxmbd.joint_space import body_loads, constraint_wrenches, transmitted_wrenches
from jaxmbd.joint_space.dynamics import body_accelerations
from jaxmbd.tree import body_velocities, poses


def _runs(model, **run):
    return (
        model,
        mbd.simulate(model, formulation="joint", **run),
        mbd.simulate(model, formulation="rA", **run),
    )


@pytest.fixture(scope="module")
def pendulum_runs():
    return _runs(mbd.models.double_pendulum(), integrator="rkmk", t_end=0.05, h=1e-3)


@pytest.mark.parametrize("per", ["constraint", "joint"])
def test_double_pendulum_against_rA_multipliers(pendulum_runs, per):
    """The joint run's reactions (Newton-Euler, written as the rows' multipliers) equal the
    rA run's, which come from its own multipliers, row by row and joint by joint."""
    model, joint, absolute = pendulum_runs
    assert np.abs(np.asarray(joint.lam)).max() == 0.0  # no loops: nothing stored
    _same_reactions(model, joint, absolute, per=per)


def test_actuated_cartpole_against_rA_multipliers():
    """dm_control's cartpole under a constant control: the slider's motor and the hinge's
    damping act along the joints, applied loads in rA; the joint run's constraint reactions
    (those forces removed: a slide's along its axis through its anchor, a hinge's about its
    axis) equal rA's row by row, and at the joints in their frames."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(os.path.join(SUITE, "cartpole.xml"), keyframe=None)
    model, joint, absolute = _runs(model, integrator="rkmk", t_end=0.01, h=1e-3,
                                   controls=np.array([0.8]), limits="none",
                                   contact="none")  # fmt: skip
    _same_reactions(model, joint, absolute, per="constraint")
    _same_reactions(model, joint, absolute, per="joint", at="joint", frame="joint")


def _same_reactions(model, joint, absolute, **options):
    a = diagnostics.reaction_forces(model, joint, **options)
    b = diagnostics.reaction_forces(model, absolute, **options)
    assert a.names == b.names
    scale = max(np.abs(np.asarray(y)).max() for y in b[:6])
    assert scale > 1.0
    for x, y in zip(a[:6], b[:6], strict=True):
        assert np.abs(np.asarray(x) - np.asarray(y)).max() < ROUND_OFF * scale


# ----------------------------------------------------------------------------- MuJoCo

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mbd.load_model(os.path.join(SUITE, name + ".xml"), keyframe=None)


def _mujoco(path):
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return m, mujoco.MjData(m)


def _cfrc_int(m, d, qpos, qvel, ctrl, names):
    """MuJoCo's interaction wrenches of the bodies ``names`` as (n_O, f) about the world
    origin: cfrc_int is (torque, force) about the subtree centre of mass of the body's
    root, in world axes."""
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(m, d)
    mujoco.mj_rnePostConstraint(m, d)
    out = []
    for name in names:
        b = m.body(name).id
        torque, force = d.cfrc_int[b, :3], d.cfrc_int[b, 3:]
        point = d.subtree_com[m.body_rootid[b]]
        out.append(np.concatenate([torque + np.cross(point, force), force]))
    return np.stack(out), np.array(d.qacc)


SPATIAL = """
<mujoco model="spatial tree">
  <option gravity="0.3 -0.5 -9.81"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ball" type="ball" pos="0 0 0.05" damping="0.2"/>
      <geom type="box" size="0.1 0.2 0.3" mass="2" pos="0.1 0 -0.2" euler="5 -10 15"/>
      <body name="b" pos="0.2 0.1 -0.5" euler="10 20 30">
        <joint name="h1" type="hinge" axis="1 0.3 0.2" pos="0 0 0.1" damping="0.5"/>
        <joint name="s1" type="slide" axis="0 1 0.2" stiffness="3"/>
        <geom type="ellipsoid" size="0.1 0.15 0.2" mass="1" pos="0.05 0 -0.2"/>
        <body name="c" pos="0 0 -0.4">
          <joint name="h2" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.3" size="0.05" mass="0.5"/>
        </body>
      </body>
    </body>
    <body name="free" pos="1 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.15 0.05" mass="0.7"/>
      <body name="d" pos="0.2 0 0">
        <joint name="h3" type="hinge" axis="0 0.6 0.8"/>
        <geom type="box" size="0.2 0.05 0.08" mass="0.4" pos="0.2 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="h2" gear="2"/><motor joint="h3"/></actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def spatial_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mjcf") / "spatial.xml"
    path.write_text(SPATIAL)
    return str(path)


@pytest.mark.parametrize("name", ["acrobot", "cartpole", "spatial"])
def test_interaction_wrenches_against_mujoco_at_random_states(name, spatial_file):
    """At random states and controls: MuJoCo's qacc fed to the tree's body accelerations,
    and the subtree sums of Newton-Euler against ``cfrc_int`` (which includes the
    actuators' and passive forces along the joints) to 1e-9. "spatial": a ball, a hinge
    and a slide composed on one body, skew axes, a free subtree, asymmetric inertias
    turning in 3-D (the gyroscopic terms count)."""
    path = spatial_file if name == "spatial" else os.path.join(SUITE, name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = with_contact(mbd.load_model(path, keyframe=None), "none")
    tree = model.tree

    @eqx.filter_jit
    def wrenches(model, qpos, qvel, qacc):
        p = poses(tree, qpos)
        rdot, omega = body_velocities(tree, p, qvel)
        rddot, omegadot = body_accelerations(tree, p, qvel, qacc)
        f, n = body_loads(model, p.c, p.R, rdot, omega, 0.0, jnp.zeros(model.nc))
        whole = transmitted_wrenches(tree, model.mass, model.inertia, p.c, p.R, omega, rddot,
                                     omegadot, f, n)  # fmt: skip
        return whole, constraint_wrenches(tree, qpos, whole), p.S

    m, d = _mujoco(path)
    rng = np.random.default_rng(1)
    for _ in range(5):
        qpos = rng.uniform(-2.0, 2.0, tree.nq)
        mujoco.mj_normalizeQuat(m, qpos)
        qvel = rng.uniform(-3.0, 3.0, tree.nv)
        ctrl = rng.uniform(-1.0, 1.0, m.nu)
        reference, qacc = _cfrc_int(m, d, qpos, qvel, ctrl, model.body_names)
        ours, reaction, S = map(np.asarray, wrenches(model, qpos, qvel, qacc))
        scale = np.abs(reference).max()
        assert np.abs(ours - reference).max() < 2e-14 * scale
        # the constraint reactions do no work in any joint's motion; a ball's is a force
        # through its centre (MuJoCo's anchor), a free joint's nothing
        dof_body = np.asarray(tree.dof_body)
        power = np.sum(S * reaction[dof_body], -1)
        assert np.abs(power).max() < ROUND_OFF * scale
        for j, kind in enumerate(m.jnt_type):
            b = model.body_names.index(m.body(m.jnt_bodyid[j]).name)
            if kind == mujoco.mjtJoint.mjJNT_BALL:
                moment = reaction[b, :3] - np.cross(d.xanchor[j], reaction[b, 3:])
                assert np.abs(moment).max() < ROUND_OFF * scale
                assert np.abs(reaction[b, 3:]).max() > 1e-3 * scale
            if kind == mujoco.mjtJoint.mjJNT_FREE:
                assert np.abs(reaction[b]).max() < ROUND_OFF * scale


def test_joint_wrenches_of_a_run_against_mujoco():
    """``diagnostics.joint_wrenches`` along an acrobot run under random controls (the
    Solution's accelerations) against ``cfrc_int`` at its saved states, and the constraint
    reactions: no component along the hinges, the rest equal to the interaction's."""
    model = _load("acrobot")
    h, n = 1e-3, 5
    controls = np.random.default_rng(2).uniform(-1.0, 1.0, (n, model.nu))
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls, limits="none", contact="none")  # fmt: skip
    whole = diagnostics.joint_wrenches(model, sol)
    reaction = diagnostics.joint_wrenches(model, sol, along_joints=False)
    m, d = _mujoco(os.path.join(SUITE, "acrobot.xml"))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    for k in range(n + 1):
        ctrl = controls[max(k - 1, 0)]  # state k's accelerations used the step's controls
        reference, _ = _cfrc_int(m, d, sol.qpos[k], sol.qvel[k], ctrl, model.body_names)
        ours = np.concatenate([whole.torque_origin[k], whole.force[k]], -1)
        assert np.abs(ours - reference).max() < 2e-14 * np.abs(reference).max()
    p = [poses(model.tree, q) for q in sol.qpos]
    axes = np.stack([np.asarray(x.S[:, :3]) for x in p])  # hinges: S = (a, anchor x a)
    for b in range(model.nb):
        S = np.stack([np.asarray(x.S[b]) for x in p])
        w = np.concatenate([reaction.torque_origin[:, b], reaction.force[:, b]], -1)
        assert np.abs(np.sum(S * w, -1)).max() < ROUND_OFF * np.abs(w).max()
        np.testing.assert_allclose(
            reaction.force[:, b], whole.force[:, b], rtol=0, atol=ROUND_OFF * np.abs(w).max()
        )
        along = np.sum(axes[:, b] * (whole.torque[:, b] - reaction.torque[:, b]), -1)
        np.testing.assert_allclose(
            whole.torque[:, b] - reaction.torque[:, b],
            along[:, None] * axes[:, b],
            rtol=0,
            atol=ROUND_OFF,
        )


# ----------------------------------------------------------------------------- closed loop


def _four_bar():
    """A spatial-looking planar four-bar under gravity (axes along y, out of the plane of
    gravity's action), damped and sprung at A, a motor at B, a spring-damper from the
    coupler to the ground: joint-space forces on tree joints and a body-acting element."""
    b = mbd.ModelBuilder("four bar", gravity=(0.0, 0.0, -9.81))
    for name, r, m in (("crank", (0, 0, 0.5), 1.0), ("coupler", (0.5, 0, 1), 2.0),
                       ("rocker", (1, 0, 0.5), 1.5)):  # fmt: skip
        b.add_body(name, mass=m, inertia=[0.02 * m, 0.03 * m, 0.015 * m], r=r)
    y = (0, 1, 0)
    b.revolute("A", body_i="ground", body_j="crank", point=(0, 0, 0), axis=y, damping=0.3,
               stiffness=2.0)  # fmt: skip
    b.revolute("B", body_i="crank", body_j="coupler", point=(0, 0, 1), axis=y, damping=0.1)
    b.revolute("C", body_i="coupler", body_j="rocker", point=(1, 0, 1), axis=y)
    b.revolute("D", body_i="rocker", body_j="ground", point=(1, 0, 0), axis=y)
    b.add_actuator("motor", joint="B", kind="motor", gear=2.0)
    b.spring_damper("spring", body_i="coupler", point_i=(0.5, 0, 1), body_j="ground",
                    point_j=(0.2, 0, 1.6), stiffness=50.0, damping=1.0,
                    rest_length=0.3)  # fmt: skip
    return b.set_joint_state("A", q=0.2, qdot=1.5).build()


def test_four_bar_bodies_balance():
    """Every body of a four-bar run in joint coordinates: m r_ddot = m g + applied + the
    loads of every joint's rows (tree joints by Newton-Euler, the closing joint by its
    multipliers), and J omegadot + omega x J omega likewise, to 1e-9. The applied loads
    include the joint dampers, springs and motor as the absolute formulations apply them
    (torques about the hinge axes on both bodies): the reactions carry none of them."""
    model = _four_bar()
    u = np.array([0.7])
    with warnings.catch_warnings():  # the set crank angle moves the rest of the loop
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=0.02,
                           h=1e-3, controls=u)  # fmt: skip
    assert np.abs(np.asarray(sol.lam)).max() > 0.1  # the loop's rows carry multipliers
    rx = diagnostics.reaction_forces(model, sol, per="constraint")
    driven = with_controls(model, u)
    nb = model.nb
    bi = np.array([i for i, _ in model.constraint_bodies])
    bj = np.array([j for _, j in model.constraint_bodies])
    one_i, one_j = np.eye(nb + 1)[bi][:, :nb], np.eye(nb + 1)[bj][:, :nb]
    force = np.einsum("tci,cb->tbi", rx.force_i, one_i) + np.einsum(
        "tci,cb->tbi", rx.force_j, one_j
    )
    torque = np.einsum("tci,cb->tbi", rx.torque_i, one_i) + np.einsum(
        "tci,cb->tbi", rx.torque_j, one_j
    )
    J, mass = np.asarray(model.inertia), np.asarray(model.mass)
    for k in range(sol.t.shape[0]):
        state = BodyState(sol.r[k], sol.A[k], sol.rdot[k], sol.omega[k])
        f = mass[:, None] * np.asarray(model.gravity)
        n = np.zeros((nb, 3))
        for element in driven.forces:
            df, dn = element(sol.t[k], state)
            f, n = f + np.asarray(df), n + np.asarray(dn)
        w, alpha = np.asarray(sol.omega[k]), np.asarray(sol.omegadot[k])
        newton = mass[:, None] * np.asarray(sol.rddot[k]) - f - force[k]
        euler = np.einsum("bij,bj->bi", J, alpha) + np.cross(w, np.einsum("bij,bj->bi", J, w))
        euler = euler - n - torque[k]
        scale = np.abs(force[k]).max()
        assert np.abs(newton).max() < ROUND_OFF * scale
        assert np.abs(euler).max() < ROUND_OFF * scale
