"""MJCF equality constraints (jaxmbd.joint_space.equalities) in the joint formulation: every type
in one
file of our own, against a closed form, MuJoCo C and the same mechanism in the rA
formulation (ModelBuilder joints)."""

import dataclasses
import os
import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.limits_option import with_limits
from jaxmbd.contact import with_contact
from jaxmbd.joint_space import model_tree
from jaxmbd.joint_space.constraint_rows import constraint_residual
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.equalities import with_equalities

mujoco = pytest.importorskip("mujoco")

# a four-bar closed by a connect, a free box welded off-centre to a spherical pendulum, two
# pendulums coupled by a quartic, a slide held by a one-joint equality, an inactive one
LOOPS = """
    <body name="crank">
      <joint name="crank" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="coupler" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.3" size="0.02" mass="0.7"/>
      </body>
    </body>
    <body name="rocker" pos="0.5 0 0">
      <joint name="rocker" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0.3" size="0.02" mass="0.4"/>
    </body>
    <body name="arm" pos="1 0 0.5">
      <joint name="arm" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.2" size="0.02" mass="0.6"/>
    </body>
    <body name="box" pos="1.3 0.1 -0.2" euler="10 20 30">
      <freejoint name="box"/>
      <geom type="box" size="0.05 0.08 0.1" mass="0.8"/>
    </body>"""
COUPLED = """
    <body name="one" pos="2 0 0">
      <joint name="one" type="hinge" axis="0 1 0" ref="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.5"/>
    </body>
    <body name="two" pos="2.5 0 0">
      <joint name="two" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02" mass="0.3"/>
    </body>
    <body name="slider" pos="3 0 0">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" mass="0.2"/>
    </body>"""
LOOP_EQUALITIES = """
    <connect name="close" body1="coupler" body2="rocker" anchor="0.4 0 0.3"/>
    <weld name="glue" body1="box" body2="arm" anchor="0.3 0.1 -0.2"/>"""
COUPLINGS = """
    <joint name="couple" joint1="two" joint2="one" polycoef="0.05 0.8 0.3 -0.2 0.1"/>
    <joint name="hold" joint1="slide" polycoef="0 0 0 0 0"/>
    <joint name="idle" joint1="slide" joint2="one" polycoef="0.3 1 0 0 0" active="false"/>"""


def _xml(bodies, equalities, qpos, qvel):
    return f"""<mujoco model="equalities">
  <option timestep="0.001" integrator="RK4"><flag contact="disable"/></option>
  <worldbody>{bodies}</worldbody>
  <equality>{equalities}</equality>
  <keyframe><key qpos="{qpos}" qvel="{qvel}"/></keyframe>
</mujoco>"""


# every type; the keyframe does not satisfy the constraints: the run's start projects it
XML = _xml(
    LOOPS + COUPLED,
    LOOP_EQUALITIES + COUPLINGS,
    "0.3 0 0  1 0 0 0  1.3 0.1 -0.2 1 0 0 0  0.4 0.37 0",
    "1 0 0  0.5 -0.4 0.8  0 0 0 0 0 0  2 0 0",
)
# the hinges' mechanisms alone (the four-bar and the couplings): the runs of the default
# tests (a shorter program to compile than the ball and free joints of the weld)
HINGES = _xml(
    LOOPS.split('<body name="arm"')[0] + COUPLED,
    LOOP_EQUALITIES.split("<weld")[0] + COUPLINGS,
    "0.3 0 0  0.4 0.37 0",
    "1 0 0  2 0 0",
)
H, T_END = 1e-3, 1.0


def _load(tmp_path_factory, xml, name):
    path = tmp_path_factory.mktemp("equalities") / name
    path.write_text(xml)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        return mbd.load_model(path)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return _load(tmp_path_factory, XML, "equalities.xml")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return _load(tmp_path_factory, HINGES, "hinges.xml")


@pytest.fixture(scope="module")
def run(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        sol = mbd.simulate(model, formulation="joint", t_end=T_END, h=H, equality="exact")
    return np.asarray(sol.qpos), np.asarray(sol.qvel)


def _mujoco_model(xml=HINGES):
    return mujoco.MjModel.from_xml_string(xml)


def _qpos_error(m, q_ours, q_mj):
    dq = np.zeros(m.nv)
    mujoco.mj_differentiatePos(m, dq, 1.0, q_ours, q_mj)
    return np.abs(dq).max()


def test_every_type_is_read_without_warning(full):
    """Loading raised no UnsupportedFeatureWarning (the fixture turns it into an error)."""
    model = full
    kinds = [(e.name, e.kind, e.active) for e in model.equalities]
    assert kinds == [
        ("close", "connect", True),
        ("glue", "weld", True),
        ("couple", "joint", True),
        ("hold", "joint", True),
        ("idle", "joint", False),
    ]
    # joint couplings are rows of joint coordinates: the absolute formulations refuse them
    assert any("equality 'couple'" in reason for reason in model.joint_space_only)
    with pytest.raises(mbd.ModelError, match="equality 'couple'"):
        mbd.simulate(model, formulation="rA", t_end=H, h=H)


def test_rows_stay_at_zero_for_one_second(model, run):
    qpos, _ = run
    tree, cons = model_tree(model)
    rows = jax.jit(jax.vmap(lambda q: constraint_residual(cons, tree, q, 0.0)))(qpos)
    assert cons.size == 3 + 1 + 1  # the inactive coupling has no rows
    assert np.abs(np.asarray(rows)).max() < ROUND_OFF
    # the inactive one does not act: its row (slide - 0.3 - x_one) moves as the pendulum swings
    idle = qpos[:, 5] - 0.3 - (qpos[:, 3] - float(model.equalities[3].ref2))
    assert np.ptp(idle) > 0.1


def test_polynomial_coupling_is_one_pendulum(run):
    """q_two = f(q_one), f the quartic of ``polycoef``: the two pendulums are one degree of
    freedom with Lagrangian 0.5 (I1 + I2 f'^2) w^2 - V1(th) - V2(f(th)), integrated by
    scipy (DOP853, rtol 1e-12)."""
    qpos, qvel = run
    m = _mujoco_model()

    def body(name):
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, m.body_iquat[b])
        R = R.reshape(3, 3)
        c, mass = m.body_ipos[b], m.body_mass[b]
        I_y = (R @ np.diag(m.body_inertia[b]) @ R.T)[1, 1] + mass * (c[0] ** 2 + c[2] ** 2)
        return mass, I_y, c

    (m1, I1, c1), (m2, I2, c2) = body("one"), body("two")
    f = np.polynomial.Polynomial(m.eq_data[1][:5])
    df, ddf = f.deriv(1), f.deriv(2)
    g = -m.opt.gravity[2]

    def dV(th, mass, c):  # d/dth of m g z, z = -sin(th) c_x + cos(th) c_z (about +y)
        return mass * g * (-np.cos(th) * c[0] - np.sin(th) * c[2])

    def rhs(t, y):
        th, w = y
        fp, fpp = df(th), ddf(th)
        torque = I2 * fp * fpp * w * w + dV(th, m1, c1) + dV(f(th), m2, c2) * fp
        return [w, -torque / (I1 + I2 * fp * fp)]

    ref1 = m.qpos0[3]
    t = np.arange(len(qpos)) * H
    ivp = solve_ivp(rhs, (0, t[-1]), [qpos[0, 3] - ref1, qvel[0, 3]], t_eval=t,
                    rtol=1e-12, atol=1e-12, method="DOP853")  # fmt: skip
    assert np.abs(qpos[:, 3] - ref1 - ivp.y[0]).max() < 2e-10  # measured 3.6e-11
    assert np.abs(qpos[:, 4] - f(ivp.y[0])).max() < 1e-10  # 3.0e-11


def test_against_stiff_mujoco(run):
    """MuJoCo C with near-rigid equalities (impedance 0.9999, timeconst 2 h at h = 1e-4,
    RK4) from our consistent start: the joint coordinates agree to its accuracy and ours
    (RK4 at h = 1e-3; measured 6.6e-7 rad or m after 1 s, both MuJoCo steps giving the
    same)."""
    qpos, qvel = run
    m = _mujoco_model()
    m.opt.timestep = 1e-4
    m.eq_solref[:] = [2e-4, 1.0]
    m.eq_solimp[:] = [0.9999, 0.9999, 0.001, 0.5, 2]
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos[0], qvel[0]
    worst = 0.0
    for k in range(1, len(qpos)):
        for _ in range(10):
            mujoco.mj_step(m, d)
        if k % 100 == 0:
            worst = max(worst, _qpos_error(m, qpos[k], d.qpos))
    assert worst < 2e-6


def test_soft_accelerations_are_mujocos(full):
    """equality="soft": MuJoCo's solref/solimp rows; at the (inconsistent) keyframe, where
    every row is far from zero, qacc equals mj_forward's (measured 2.8e-11 of 1.0e3)."""
    soft = with_equalities(full, "soft")
    tree, cons = model_tree(soft)
    m = _mujoco_model(XML)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    qacc = jax.jit(lambda q, v: accelerations(soft, tree, cons, q, v, 0.0, step=H).qacc)(
        jnp.asarray(d.qpos), jnp.asarray(d.qvel)
    )
    np.testing.assert_allclose(np.asarray(qacc), d.qacc, rtol=0, atol=2e-13 * np.abs(d.qacc).max())


def test_switched_off_and_refused(full):
    model = full
    off = with_equalities(model, "none", where="test")
    assert off.equalities == () and not off.joint_space_only
    assert not {"close", "glue"} & set(off.constraint_joints)
    with pytest.raises(ValueError, match="equality must be one of"):
        with_equalities(model, "rigid")
    with pytest.raises(mbd.ModelError, match="soft equality constraints"):
        mbd.simulate(model, formulation="rA", t_end=H, h=H, equality="soft")


# ------------------------------------------------------------------ slow studies


def _loops_xml(qpos, qvel):
    """The connect and weld mechanism alone, starting from the run's consistent start."""
    key = " ".join(repr(float(x)) for x in qpos[0, :14])
    vel = " ".join(repr(float(x)) for x in qvel[0, :12])
    return _xml(LOOPS, LOOP_EQUALITIES, key, vel)


@pytest.mark.slow
def test_connect_and_weld_against_rA(full, tmp_path_factory):
    """The same mechanism in the rA formulation, where the loader builds the connect as a
    spherical joint and the weld as a fixed joint (ModelBuilder joints, exact): body poses
    agree to 1e-8 over 1 s (Munthe-Kaas RK4, rkmk, in both at h = 1.25e-4; the joint
    formulation's rk is of second order on the free box's rotation: 1.1e-8 there). The
    joint run names equality="exact": a model read from MJCF now defaults to MuJoCo's soft
    equalities, whose rows open by up to 0.27 over the run."""
    model, h = full, 1.25e-4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=T_END, h=h,
                           equality="exact")  # fmt: skip
    qpos, qvel = np.asarray(sol.qpos), np.asarray(sol.qvel)
    loops = _load(tmp_path_factory, _loops_xml(qpos, qvel), "loops.xml")
    assert not loops.joint_space_only
    ra = mbd.simulate(loops, formulation="rA", integrator="rkmk", t_end=T_END, h=h)
    tree, cons = model_tree(model)
    rows = jax.jit(jax.vmap(lambda q: constraint_residual(cons, tree, q, 0.0)))(qpos)
    assert np.abs(np.asarray(rows)).max() < 1e-9  # the weld's rows too
    bodies = [model.body_names.index(b) for b in loops.body_names]
    np.testing.assert_allclose(np.asarray(ra.r), np.asarray(sol.r)[:, bodies], rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.asarray(ra.A), np.asarray(sol.A)[:, bodies], rtol=0, atol=1e-8)
    # sol.lam of the connect's and weld's GCON rows: the multipliers that exert the
    # equality rows' force (measured against rA's own)
    mine = [k for k, joint in enumerate(loops.constraint_joints) if joint in ("close", "glue")]
    rows = [model.constraint_names.index(loops.constraint_names[k]) for k in mine]
    lam = np.asarray(sol.lam)[:, rows]
    assert len(rows) == 3 + 6 and np.abs(lam).max() > 1.0
    np.testing.assert_allclose(np.asarray(ra.lam)[:, mine], lam, rtol=0,
                               atol=1e-6 * np.abs(lam).max())  # fmt: skip


@pytest.mark.slow
def test_soft_trajectory_is_mujocos(model):
    """equality="soft" against MuJoCo's own RK4 at the same step from the same keyframe
    (default solref 0.02, solimp 0.9 0.95): the joint coordinates over 1 s. The default
    "rkmk" is MuJoCo's RK4 step (from 4.0) on ball and free joints too."""
    sol = mbd.simulate(model, formulation="joint", t_end=T_END, h=H, equality="soft")
    qpos = np.asarray(sol.qpos)
    m = _mujoco_model()
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    worst = 0.0
    for k in range(1, len(qpos)):
        mujoco.mj_step(m, d)
        worst = max(worst, _qpos_error(m, qpos[k], d.qpos))
    assert worst < 1e-9


@pytest.mark.slow
def test_gradient_through_constrained_run(model):
    """d(final coordinates)/d(polycoef c1) and d/d(connect anchor) through 50 steps of
    the hinges' mechanisms (the four-bar's connect and the couplings, exact), against
    central differences."""
    close, couple = model.equalities[0], model.equalities[1]
    assert (close.kind, couple.kind) == ("connect", "joint")

    def final(c1, anchor):
        m = eqx.tree_at(lambda m: m.equalities[1].polycoef, model, couple.polycoef.at[1].set(c1))
        m = eqx.tree_at(lambda m: m.equalities[0].anchor2, m, anchor)
        sol = mbd.simulate(m, formulation="joint", t_end=0.05, h=H, equality="exact")
        return jnp.sum(sol.qpos[-1, :5])  # the four-bar's and the pendulums' angles

    c1, anchor = couple.polycoef[1], close.anchor2
    g_c1, g_anchor = jax.jit(jax.grad(final, argnums=(0, 1)))(c1, anchor)
    f = jax.jit(final)
    eps = 1e-6
    fd_c1 = (f(c1 + eps, anchor) - f(c1 - eps, anchor)) / (2 * eps)
    e0 = jnp.eye(3)[0] * eps
    fd_a = (f(c1, anchor + e0) - f(c1, anchor - e0)) / (2 * eps)
    assert abs(float(fd_c1)) > 1e-3 and abs(float(fd_a)) > 1e-3
    assert abs(float(g_c1 - fd_c1)) < 1e-6 * abs(float(fd_c1))
    assert abs(float(g_anchor[0] - fd_a)) < 1e-6 * abs(float(fd_a))


def test_xml_blocks_are_consistent():
    """The file's parts compose into files MuJoCo compiles (a guard on the string edits)."""
    m = _mujoco_model(XML)
    assert (m.nq, m.nv, m.neq) == (17, 15, 5)
    assert _mujoco_model().nq == 6
    assert re.search(r'<connect name="close"', XML)


# ------------------------------------------------------------ MuJoCo's own files


@pytest.fixture(scope="module")
def manipulator():
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "manipulator.xml")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = mbd.load_model(path)
    messages = [str(w.message) for w in record]
    return path, model, messages


def _without_contact_and_limits(m):
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    return m


def test_manipulator_tendon_coupling_is_mujocos(manipulator):
    """dm_control's manipulator couples its two fingers by a tendon equality (solref .005):
    read without a warning naming it; with equality="soft" the accelerations at random
    states equal mj_forward's (contact and limits off, zero controls)."""
    path, model, messages = manipulator
    assert not any("equality" in text for text in messages)
    assert [(e.name, e.kind) for e in model.equalities] == [("coupling", "tendon")]
    soft = with_equalities(with_limits(with_contact(model, "none"), "none"), "soft")
    tree, cons = model_tree(soft)
    qacc_of = jax.jit(lambda q, v: accelerations(soft, tree, cons, q, v, 0.0, step=H).qacc)
    m = _without_contact_and_limits(mujoco.MjModel.from_xml_path(path))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    for _ in range(3):
        d.qpos[:] = m.qpos0
        d.qpos[:8] += rng.uniform(-0.3, 0.3, 8)  # the arm's and fingers' hinges
        d.qvel[:] = rng.uniform(-1.0, 1.0, m.nv)
        mujoco.mj_forward(m, d)
        assert abs(d.efc_pos[0]) > 1e-3  # the coupling row is violated
        qacc = np.asarray(qacc_of(jnp.asarray(d.qpos), jnp.asarray(d.qvel)))
        np.testing.assert_allclose(qacc, d.qacc, rtol=0, atol=1e-11 * np.abs(d.qacc).max())


@pytest.mark.slow
def test_manipulator_tendon_coupling_holds(manipulator):
    """Exact: the coupling row stays at zero over 1 s of the arm and the
    grasp driven (semi-implicit Euler at h = 1e-3, MuJoCo's own step for this file)."""
    _, model, _ = manipulator
    controls = np.full(model.nu, 0.3)  # the arm's motors and the grasp tendon's
    sol = mbd.simulate(model, formulation="joint", integrator="euler", contact="none",
                       limits="none", equality="exact", t_end=T_END, h=H,
                       controls=controls)  # fmt: skip
    tree, cons = model_tree(model)
    rows = jax.jit(jax.vmap(lambda q: constraint_residual(cons, tree, q, 0.0)))(sol.qpos)
    assert np.abs(np.asarray(rows)).max() < 1e-9
    assert np.ptp(np.asarray(sol.qpos)[:, :8]) > 0.1  # the arm and the fingers moved


def _random_arm_state(m, d, rng):
    d.qpos[:] = m.qpos0
    d.qpos[:8] += rng.uniform(-0.3, 0.3, 8)  # the arm's and fingers' hinges
    d.qvel[:] = rng.uniform(-1.0, 1.0, m.nv)


def test_manipulator_without_equality_is_mujocos(manipulator):
    """equality="none" is MuJoCo's ``<flag equality="disable"/>``: the accelerations at
    random states equal mj_forward's with the flag (contact and limits off)."""
    path, model, _ = manipulator
    off = with_equalities(with_limits(with_contact(model, "none"), "none"), "none")
    tree, cons = model_tree(off)
    assert cons is None
    qacc_of = jax.jit(lambda q, v: accelerations(off, tree, None, q, v, 0.0).qacc)
    m = _without_contact_and_limits(mujoco.MjModel.from_xml_path(path))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EQUALITY)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    for _ in range(3):
        _random_arm_state(m, d, rng)
        mujoco.mj_forward(m, d)
        assert d.ne == 0
        qacc = np.asarray(qacc_of(jnp.asarray(d.qpos), jnp.asarray(d.qvel)))
        np.testing.assert_allclose(qacc, d.qacc, rtol=0, atol=5e-12 * np.abs(d.qacc).max())


#: RK4's step for the manipulator: its fingertips' damping (0.01) over their inertia about
#: the hinge (7.3e-8 kg m^2) is a decay rate of 1.4e5 / s (2.4e5 for the unconstrained
#: system's fastest mode), and RK4 is stable for h |lambda| < 2.79: h < 2.0e-5 s with the
#: exact coupling, 1.2e-5 s without (MuJoCo's own RK4 diverges at 3.1e-5 s).
MANIPULATOR_RK_STEP = 2.0**-16


def test_manipulator_exact_coupling_holds_under_rk(manipulator):
    """Exact under RK4 at a stable step, the arm and the grasp tendon driven:
    the coupling row stays at round-off over the run and the fingers move (20 steps)."""
    _, model, _ = manipulator
    model = dataclasses.replace(model, sensors=None)  # the run alone: a shorter compile
    h, n = MANIPULATOR_RK_STEP, 20
    controls = np.full(model.nu, 0.8)
    sol = mbd.simulate(model, formulation="joint", integrator="rk", contact="none",
                       limits="none", equality="exact", t_end=n * h, h=h,
                       controls=controls)  # fmt: skip
    tree, cons = model_tree(model)
    rows = jax.jit(jax.vmap(lambda q: constraint_residual(cons, tree, q, 0.0)))(sol.qpos)
    assert np.abs(np.asarray(rows)).max() < ROUND_OFF
    qvel = np.asarray(sol.qvel)
    assert np.abs(qvel[-1, [4, 6]] - qvel[0, [4, 6]]).max() > 1e-3  # the fingers accelerate


@pytest.mark.slow
@pytest.mark.parametrize("equality", ["none", "soft"])
def test_manipulator_rk_is_mujocos_rk4(manipulator, equality):
    """With the equality off in both (``<flag equality="disable"/>``) or soft in both,
    jaxmbd's ``rk`` is MuJoCo's RK4 at the same stable step: the joint coordinates after
    200 steps of driven arm and grasp to round-off (measured 5e-17 and 7e-17 after 0.02 s)."""
    path, model, _ = manipulator
    model = dataclasses.replace(model, sensors=None)
    h, n = MANIPULATOR_RK_STEP / 2, 200  # stable without the coupling too
    controls = np.full(model.nu, 0.8)
    rng = np.random.default_rng(2)
    m = _without_contact_and_limits(mujoco.MjModel.from_xml_path(path))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS)
    if equality == "none":
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EQUALITY)
    m.opt.timestep, m.opt.integrator = h, mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qvel[:] = rng.uniform(-0.5, 0.5, m.nv)
    start = dataclasses.replace(model, tree=dataclasses.replace(
        model.tree, qpos_init=jnp.asarray(d.qpos), qvel_init=jnp.asarray(d.qvel)))  # fmt: skip
    sol = mbd.simulate(start, formulation="joint", integrator="rk", contact="none",
                       limits="none", equality=equality, t_end=n * h, h=h,
                       controls=controls)  # fmt: skip
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, k) for k in range(m.nu)]
    d.ctrl[[names.index(a) for a in model.actuators.actuator_names]] = controls
    for _ in range(n):
        mujoco.mj_step(m, d)
    assert np.abs(np.asarray(sol.qpos[-1]) - d.qpos).max() < 1e-12
