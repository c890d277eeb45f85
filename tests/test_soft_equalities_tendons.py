"""Equality constraints, tendon limits and tendon friction loss in MuJoCo's convex problem
(contact="soft", limits="soft", equality="soft" on a file model), against MuJoCo C with
dense Jacobians and a tight solver tolerance: the rows (jaxmbd.soft_constraints.model and
.equalities on jaxmbd's kinematics and tendons) against mj_forward's efc arrays, qacc
against mj_forward at rollout states, and trajectories against mj_step."""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

import jaxmbd as mbd  # noqa: E402
from jaxmbd.analysis.limits_option import with_limits  # noqa: E402
from jaxmbd.joint_space.dynamics import _soft_equalities, accelerations  # noqa: E402
from jaxmbd.joint_space.equalities import with_equalities  # noqa: E402
from jaxmbd.joint_space.run import model_tree  # noqa: E402
from jaxmbd.soft_constraints.rows import ConstraintType, mujoco_order, take  # noqa: E402
from jaxmbd.soft_constraints.treatments import with_soft  # noqa: E402
from jaxmbd.tree import poses  # noqa: E402

TOLERANCE = 1e-14

#: a fixed base with two arms closed into a loop by a connect, a site weld to the world, a
#: body weld with a relative pose and torquescale, a joint and a tendon coupling (all
#: violated at qpos0), a limited fixed tendon with friction loss, a limited spatial
#: tendon with friction loss, a limited hinge and a slide with friction loss
XML = """
<mujoco model="equalities_and_tendons">
  <option timestep="0.005" jacobian="dense"/>
  <default>
    <joint damping="0.05"/>
    <geom contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <site name="anchor_w" pos="0.5 0.52 0.95" euler="0.1 0 0"/>
    <body name="base" pos="0 0 1.2">
      <geom type="box" size="0.15 0.1 0.05" mass="2"/>
      <site name="s_base" pos="0.1 0.05 0.05"/>
      <body name="l1" pos="0.15 0 0">
        <joint name="h1" axis="0 1 0" range="-1 1" limited="true"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.4"/>
        <body name="l2" pos="0.3 0 0">
          <joint name="h2" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03" mass="0.3"/>
          <site name="s_l2" pos="0.2 0 0.02"/>
        </body>
      </body>
      <body name="r1" pos="-0.15 0 0">
        <joint name="k1" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 -0.3 0 0" size="0.03" mass="0.4"/>
        <body name="r2" pos="-0.3 0 0">
          <joint name="k2" axis="0 1 0"/>
          <geom type="sphere" size="0.05" pos="-0.2 0 0" mass="0.3"/>
        </body>
      </body>
      <body name="arm" pos="0 0.1 0">
        <joint name="a1" axis="1 0 0"/>
        <joint name="a2" type="slide" axis="0 1 0" frictionloss="0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0.3 0.1" size="0.025" mass="0.3"/>
        <body name="hand" pos="0 0.3 0.1">
          <joint name="w1" type="ball"/>
          <geom type="sphere" size="0.04" mass="0.2"/>
        </body>
      </body>
    </body>
    <body name="pend" pos="0.5 0.5 1.6">
      <joint name="p1" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="0.5"/>
      <body name="pend2" pos="0 0 -0.4">
        <joint name="p2" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.3"/>
        <site name="s_tip" pos="0 0.02 -0.3"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fl" limited="true" range="-0.3 0.3" frictionloss="0.1">
      <joint joint="h1" coef="1"/>
      <joint joint="h2" coef="0.5"/>
    </fixed>
    <fixed name="fr">
      <joint joint="k1" coef="1"/>
      <joint joint="k2" coef="-0.7"/>
    </fixed>
    <fixed name="fp">
      <joint joint="p1" coef="0.8"/>
    </fixed>
    <spatial name="sp" limited="true" range="0.2 0.42" frictionloss="0.02" width="0.005">
      <site site="s_base"/>
      <site site="s_l2"/>
    </spatial>
  </tendon>
  <equality>
    <connect name="c" body1="hand" body2="pend2" anchor="0 0 0"/>
    <weld name="w" site1="s_tip" site2="anchor_w" torquescale="0.2" solref="0.05 1"
          solimp="0.8 0.95 0.01 0.5 2"/>
    <weld name="w2" body1="hand" body2="arm" relpose="0 -0.3 -0.1 0.9950042 0.0998334 0 0"
          torquescale="2"/>
    <joint name="j" joint1="k2" joint2="k1" polycoef="0.1 0.5 -0.2 0 0"/>
    <tendon name="t" tendon1="fr" tendon2="fp" polycoef="0 0.6 0.1 0 0"/>
  </equality>
  <actuator>
    <motor joint="h1" gear="5"/>
    <motor joint="k1" gear="5"/>
    <motor joint="a1" gear="3"/>
    <motor tendon="sp" gear="10"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    out = tmp_path_factory.mktemp("soft_equalities") / "equalities_and_tendons.xml"
    out.write_text(XML)
    return str(out)


def _suite(name):
    dm_control = pytest.importorskip("dm_control")
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", name)


def _mujoco(path):
    return _tighten(mujoco.MjModel.from_xml_path(path))


def _tighten(m):
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = TOLERANCE, 1000, 100
    return m


def _tight(model):
    cm = model.constraint_model
    solver = dataclasses.replace(cm.solver, tolerance=TOLERANCE, iterations=1000,
                                 ls_iterations=100)  # fmt: skip
    return dataclasses.replace(model, constraint_model=dataclasses.replace(cm, solver=solver))


def _soft_model(path):
    """The file's model with contact, limits and equality "soft", as a run makes it."""
    model, contact, limits = with_soft(mbd.load_model(path), contact="soft", limits="soft")
    model = with_limits(mbd.contact.with_contact(model, contact), limits)
    return _tight(with_equalities(model, "soft"))


def _rollout_states(m, steps, every, seed=0):
    """(qpos, qvel) every ``every`` steps of MuJoCo's run under random controls."""
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_step(m, d)
        if k % every == every - 1:
            out.append((d.qpos.copy(), d.qvel.copy()))
    return out


def _forward(m, qpos, qvel):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    return d


def test_rows_are_mujocos(path):
    """Every active row (equality rows of all four kinds, dof and tendon friction loss, joint
    and tendon limits) in MuJoCo's order equals mj_forward's efc_type, efc_id, efc_J,
    efc_pos, efc_R and efc_aref."""
    m = _mujoco(path)
    model = _soft_model(path)
    tree, loops = model_tree(model)
    constraints = model.constraint_model

    @jax.jit
    def rows_at(q, v):
        p = poses(tree, q)
        equality = _soft_equalities(loops, tree, p, q, v, 0.0)
        rows, _ = constraints.rows(tree, p, q, v, m.opt.timestep, equality=equality)
        order, count = mujoco_order(rows)
        return take(rows, order), count

    seen = set()
    for qpos, qvel in _rollout_states(m, 200, 50):
        d = _forward(m, qpos, qvel)
        rows, count = rows_at(jnp.asarray(qpos), jnp.asarray(qvel))
        n = int(count)
        assert n == d.nefc
        np.testing.assert_array_equal(np.asarray(rows.type)[:n], d.efc_type)
        np.testing.assert_array_equal(np.asarray(rows.id)[:n], d.efc_id)
        J = d.efc_J.reshape(d.nefc, m.nv)
        for ours, ref in ((rows.J, J), (rows.pos, d.efc_pos), (rows.R, d.efc_R)):
            np.testing.assert_allclose(np.asarray(ours)[:n], ref, rtol=0, atol=1e-13)
        aref = np.asarray(rows.aref)[:n]
        np.testing.assert_allclose(aref, d.efc_aref, rtol=0,
                                   atol=ROUND_OFF * np.abs(d.efc_aref).max())  # fmt: skip
        seen |= set(int(t) for t in d.efc_type)
    kinds = {ConstraintType.EQUALITY, ConstraintType.FRICTION_DOF, ConstraintType.FRICTION_TENDON,
             ConstraintType.LIMIT_JOINT, ConstraintType.LIMIT_TENDON}  # fmt: skip
    assert kinds <= seen, f"row kinds not exercised: {kinds - seen}"


def test_accelerations_are_mujocos(path):
    """qacc equals mj_forward's at rollout states with every row kind of the file (measured
    5.6e-13 of |qacc|: the welds' stiffness, ~3e3 per unit of violation, amplifies the
    round-off of the rotation error, 1e-14, in aref)."""
    m = _mujoco(path)
    model = _soft_model(path)
    tree, loops = model_tree(model)
    qacc_of = jax.jit(
        lambda q, v: accelerations(model, tree, loops, q, v, 0.0, step=m.opt.timestep).qacc
    )
    for qpos, qvel in _rollout_states(m, 200, 50, seed=1):
        d = _forward(m, qpos, qvel)
        qacc = np.asarray(qacc_of(jnp.asarray(qpos), jnp.asarray(qvel)))
        scale = max(1.0, np.abs(d.qacc).max())
        assert np.abs(qacc - d.qacc).max() < 3e-12 * scale, (np.abs(qacc - d.qacc).max(), scale)


def test_trajectory_is_mujocos(path):
    """20 of MuJoCo's Euler steps under random controls from qpos0, where the welds and
    couplings start violated: qpos and qvel equal mj_step's."""
    m = _mujoco(path)
    model = _tight(mbd.load_model(path))
    steps, h = 20, m.opt.timestep
    u = np.random.default_rng(2).uniform(-1, 1, (steps, m.nu))
    sol = mbd.simulate(model, t_end=steps * h, h=h, controls=u, contact="soft", limits="soft",
                       equality="soft", integrator="euler")  # fmt: skip
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = np.asarray(sol.qpos[0]), np.asarray(sol.qvel[0])
    for k in range(steps):
        d.ctrl[:] = u[k]
        mujoco.mj_step(m, d)
    assert d.ne == 17  # every equality row acts
    np.testing.assert_allclose(np.asarray(sol.qpos[-1]), d.qpos, rtol=0, atol=ROUND_OFF)
    # 20 steps with sums in the order of XLA's native loops against MuJoCo's, amplified by
    # the welds' stiffness: 3.6e-13 of max |qvel| seen
    np.testing.assert_allclose(np.asarray(sol.qvel[-1]), d.qvel, rtol=0,
                               atol=1e-12 * np.abs(d.qvel).max())  # fmt: skip


def test_exact_equalities_are_refused(path):
    """Exact equality rows do not join the convex problem: asked for in a soft run, a clear
    error names the way (a soft run that names no ``equality`` takes them soft)."""
    model = mbd.load_model(path)
    with pytest.raises(mbd.ModelError, match="equality='soft'"):
        mbd.simulate(model, t_end=0.01, h=0.005, contact="soft", limits="soft",
                     equality="exact", integrator="euler")  # fmt: skip


def _quadruped_walk():
    """dm_control's quadruped as its walk task builds it (``make_model``: no terrain, walls,
    ball, target or rangefinders), a ``mujoco.MjSpec``."""
    from jaxmbd.envs.quadruped import make_spec

    return make_spec(floor_size=10.0)


@pytest.mark.parametrize("name", ["manipulator.xml", "quadruped walk"])
def test_dm_control_accelerations_are_mujocos(name):
    """dm_control's manipulator (a tendon coupling, elliptic contacts) and quadruped (four
    tendon couplings, pyramidal contacts; its walk task's model, loaded from an edited
    ``MjSpec``): qacc equals mj_forward's at rollout states (zero controls and activations
    there). The quadruped's terrain: ``tests/test_mjcf_hfield.py``."""
    source = _quadruped_walk() if name == "quadruped walk" else _suite(name)
    m = source.compile() if name == "quadruped walk" else mujoco.MjModel.from_xml_path(source)
    _tighten(m)
    model = _soft_model(source)
    tree, loops = model_tree(model)
    assert loops is not None and bool(np.all(loops.soft))
    qacc_of = jax.jit(
        lambda q, v: accelerations(model, tree, loops, q, v, 0.0, step=m.opt.timestep).qacc
    )
    for qpos, qvel in _rollout_states(m, 300, 100):
        d = _forward(m, qpos, qvel)
        assert d.ne > 0
        qacc = np.asarray(qacc_of(jnp.asarray(qpos), jnp.asarray(qvel)))
        scale = max(1.0, np.abs(d.qacc).max())
        assert np.abs(qacc - d.qacc).max() < 1e-12 * scale, (np.abs(qacc - d.qacc).max(), scale)


def test_soft_runs_take_the_equalities_soft_by_default():
    """A soft run of a file with equality constraints that names no ``equality`` solves them
    with the contacts and limits (MuJoCo's one problem); the plan says so."""
    path = _suite("quadruped.xml")
    model = mbd.load_model(path)
    plan = mbd.plan_simulation(model, t_end=0.01, h=0.005, contact="soft", limits="soft")
    assert plan.equality == "soft"
    assert plan.integrator == "euler"


def test_couplings_of_joint_coordinates_differentiate_no_kinematics(monkeypatch):
    """The quadruped's four couplings of fixed tendons (lengths linear in qpos) read no
    poses: their rows' Jacobian, nu and gamma differentiate no forward kinematics (which the
    run's program held four times over, 16k of the quadruped's 166k jaxpr equations), and
    they still equal MuJoCo's (test_dm_control_accelerations_are_mujocos)."""
    from jaxmbd.joint_space import constraint_rows

    model = _soft_model(_quadruped_walk())
    tree, loops = model_tree(model)
    assert all(not part.reads_poses for part in loops.parts)

    def refused(*args, **kwargs):
        raise AssertionError("the couplings' rows ran the forward kinematics")

    monkeypatch.setattr(constraint_rows, "poses", refused)
    q, v = jnp.asarray(tree.qpos_init), jnp.ones(tree.nv)
    phi, G, _, gamma = jax.jit(
        lambda q, v: constraint_rows._generic_terms(loops.parts, tree, q, v, 0.0, rates=2)
    )(q, v)
    assert phi.shape == (4,) and G.shape == (4, tree.nv)
    # a fixed tendon's rows: G its coefficients, gamma zero (the polynomial is linear here)
    assert np.count_nonzero(np.asarray(G)) == 12
    np.testing.assert_allclose(np.asarray(gamma), 0.0, atol=1e-15)
