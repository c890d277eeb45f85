"""Tendons (fixed and spatial, wrapping on spheres and cylinders with side sites, pulleys),
their passive forces, limits and actuators, against MuJoCo C: ten_length and ten_J at
random states (1e-10), qfrc_passive + qfrc_actuator, trajectories under random controls;
a tendon limit against scipy's integration of the same law; gradients against central
differences."""

import dataclasses
import os
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.actuators import with_controls
from jaxmbd.analysis.limits_option import with_limits
from jaxmbd.contact import with_contact
from jaxmbd.errors import ModelError
from jaxmbd.forces.joint_limits import DAMPING_RAMP, LIMIT_TIME_CONSTANT
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.run import model_tree
from jaxmbd.tendons import Tendons, lengths_and_jacobians
from jaxmbd.tendons.tendon_forces import TendonForces

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
OFF = mujoco.mjtDisableBit

#: Two bodies on four joints; spatial tendons wrap a sphere and a cylinder with and without
#: side sites, one runs over two pulleys; a fixed tendon over three joints; actuators pull
#: along tendons of each kind (between a joint actuator).
WRAP = """<mujoco><worldbody>
  <site name="anchor" pos="0 0 1"/>
  <site name="anchor2" pos="0.3 0.1 1.1"/>
  <body name="arm" pos="0 0 1">
    <joint name="j1" type="hinge" axis="0 1 0"/>
    <joint name="j2" type="hinge" axis="1 0 0"/>
    <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="1"/>
    <geom name="ball" type="sphere" pos="0.05 0 -0.25" size="0.08" mass="0.1"/>
    <site name="side_s" pos="SIDE_S"/>
    <site name="mid" pos="0 0 -0.5"/>
    <body name="fore" pos="0 0 -0.5">
      <joint name="j3" type="hinge" axis="0 1 0"/>
      <joint name="s1" type="slide" axis="0 0 1"/>
      <geom name="cyl" type="cylinder" fromto="-0.05 0 0 0.05 0 0" size="0.06" mass="0.5"/>
      <site name="side_c" pos="SIDE_C"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 -0.2" size="0.02" mass="0.5"/>
      <site name="tip" pos="0.4 0 -0.2"/>
      <site name="tip2" pos="0.3 0.05 -0.15"/>
    </body>
  </body>
</worldbody>
<tendon>
  <spatial name="sphere_side" stiffness="20" springlength="0.3 0.6" damping="0.7">
    <site site="anchor2"/><geom geom="ball" sidesite="side_s"/><site site="mid"/>
  </spatial>
  <spatial name="sphere_plain"><site site="anchor"/><geom geom="ball"/><site site="tip"/></spatial>
  <spatial name="cylinder_side" damping="0.3">
    <site site="mid"/><geom geom="cyl" sidesite="side_c"/><site site="tip"/>
  </spatial>
  <spatial name="cylinder_plain"><site site="anchor2"/><geom geom="cyl"/><site site="tip2"/>
  </spatial>
  <spatial name="pulley" stiffness="5" springlength="1.0">
    <site site="anchor"/><site site="mid"/><pulley divisor="2"/><site site="mid"/>
    <site site="tip"/><pulley divisor="3"/><site site="mid"/><site site="tip2"/>
  </spatial>
  <fixed name="fixed" stiffness="3" springlength="0.2" damping="0.4">
    <joint joint="j1" coef="1.5"/><joint joint="j3" coef="-0.5"/><joint joint="s1" coef="2"/>
  </fixed>
</tendon>
<actuator>
  <motor tendon="fixed" gear="2"/>
  <position tendon="sphere_side" kp="30" kv="2"/>
  <motor joint="j2"/>
  <general tendon="pulley" gainprm="3" biastype="affine" biasprm="0.1 -2 -0.5"/>
</actuator></mujoco>"""

#: side sites outside the geoms, and inside them (MuJoCo's wrap_inside)
OUTSIDE = WRAP.replace("SIDE_S", "0.2 0.05 -0.25").replace("SIDE_C", "0 0.2 -0.1")
INSIDE = WRAP.replace("SIDE_S", "0.07 0.01 -0.25").replace("SIDE_C", "0.01 0.02 -0.01")
SOURCES = {
    "wrap": OUTSIDE,
    "wrap_inside": INSIDE,
    "point_mass": os.path.join(SUITE, "point_mass.xml"),
    "ball_in_cup": os.path.join(SUITE, "ball_in_cup.xml"),
    "manipulator": os.path.join(SUITE, "manipulator.xml"),
}


def _path(name, tmp_path_factory):
    source = SOURCES[name]
    if source.endswith(".xml"):
        return source
    path = tmp_path_factory.mktemp("tendons") / f"{name}.xml"
    path.write_text(source)
    return str(path)


def _mujoco(path):
    return mujoco.MjModel.from_xml_path(path)


def _load(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mbd.load_model(path, keyframe=None, **options)


def _tendons(model) -> dict:
    """Every tendon of the model, by name."""
    return {t.name: t for t in model.tendons.tendons}


def _dense_jacobian(m, d):
    J = np.zeros((m.ntendon, m.nv))
    for i in range(m.ntendon):
        a, n = m.ten_J_rowadr[i], m.ten_J_rownnz[i]
        J[i, m.ten_J_colind[a : a + n]] = d.ten_J[a : a + n]
    return J


@eqx.filter_jit
def _lengths(tendons, tree, qpos, qvel):
    L, J = lengths_and_jacobians(tendons, tree, qpos)
    return L, J, J @ qvel


@pytest.mark.parametrize(
    "name",
    ["wrap", pytest.param("wrap_inside", marks=pytest.mark.slow), "point_mass", "ball_in_cup",
     "manipulator"],
)  # fmt: skip
def test_lengths_jacobians_and_velocities_against_mujoco(name, tmp_path_factory):
    """ten_length, ten_J and ten_velocity of mj_forward at random states, to round-off
    (1e-10 and 1e-9 for the slow wrap_inside, not measured); the custom files' spatial
    tendons wrap at a good share of the states."""
    path = _path(name, tmp_path_factory)
    model, m = _load(path), _mujoco(path)
    d = mujoco.MjData(m)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, i) for i in range(m.ntendon)]
    found = _tendons(model)
    assert set(found) == set(names)
    tendons = Tendons(tuple(found[n] for n in names))
    rng = np.random.default_rng(0)
    wrapped = np.zeros(m.ntendon)
    for _ in range(8):
        d.qpos[:] = m.qpos0 + rng.uniform(-1.0, 1.0, m.nq)
        mujoco.mj_normalizeQuat(m, d.qpos)
        d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
        mujoco.mj_forward(m, d)
        L, J, v = _lengths(tendons, model.tree, jnp.asarray(d.qpos), jnp.asarray(d.qvel))
        assert np.abs(np.asarray(L) - d.ten_length).max() < (
            1e-10 if name == "wrap_inside" else ROUND_OFF
        )
        # a side site inside the geom: MuJoCo solves the tangent point by Newton's method
        # to 1e-6 and moves it with the geom; jaxmbd differentiates the same iterations
        tol = 1e-9 if name == "wrap_inside" else 3e-14  # the others: 1.9e-14
        assert np.abs(np.asarray(J) - _dense_jacobian(m, d)).max() < tol
        assert np.abs(np.asarray(v) - d.ten_velocity).max() < 4 * tol  # |qvel| <= 2
        for i in range(m.ntendon):
            kinds = m.wrap_type[m.tendon_adr[i] : m.tendon_adr[i] + m.tendon_num[i]]
            geoms = np.sum((kinds == mujoco.mjtWrap.mjWRAP_SPHERE)
                           | (kinds == mujoco.mjtWrap.mjWRAP_CYLINDER))  # fmt: skip
            # each wrap adds two wrap points to the path
            wrapped[i] += d.ten_wrapnum[i] - (m.tendon_num[i] - geoms) >= 2
    if name.startswith("wrap"):
        assert np.all(wrapped[:4] >= 1), wrapped  # every wrapping tendon wrapped


@eqx.filter_jit
def _joint_space(model, qpos, qvel):
    tree, loops = model_tree(model)
    acc = accelerations(model, tree, loops, qpos, qvel, 0.0)
    return acc.forces.tau, acc.qacc


def test_passive_and_actuator_forces_against_mujoco(tmp_path_factory):
    """qfrc_passive + qfrc_actuator (tendon springs with a dead band, dampers, actuators
    on fixed, wrapped and pulley tendons beside a joint actuator) and qacc, to 1e-10
    relative, at random states and controls."""
    path = _path("wrap", tmp_path_factory)
    model, m = _load(path), _mujoco(path)
    assert model.actuators.actuator_names == ("actuator0", "actuator1", "actuator2", "actuator3")
    assert model.actuators.tendon_actuated == (0, 1, 3)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    for _ in range(4):
        d.qpos[:] = rng.uniform(-1.0, 1.0, m.nq)
        d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
        d.ctrl[:] = u = rng.uniform(-1.0, 1.0, m.nu)
        mujoco.mj_forward(m, d)
        tau, qacc = _joint_space(with_controls(model, u), jnp.asarray(d.qpos),
                                 jnp.asarray(d.qvel))  # fmt: skip
        expected = d.qfrc_passive + d.qfrc_actuator
        assert np.abs(np.asarray(tau) - expected).max() < ROUND_OFF * np.abs(expected).max()
        assert np.abs(np.asarray(qacc) - d.qacc).max() < 7e-14 * np.abs(d.qacc).max()  # 1.4e-14


def _reference(m, qpos, qvel, controls, h, substeps):
    m.opt.timestep = h / substeps
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    out = [np.array(d.qpos)]
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
        out.append(np.array(d.qpos))
    return np.stack(out)


def _trajectories(name, integrator, mj_integrator, h, n, substeps):
    path = SOURCES[name]
    model = with_limits(with_contact(_load(path), "none"), "none")
    model = dataclasses.replace(model, sensors=None)  # the joint coordinates alone
    m = _mujoco(path)
    # contact, limits and friction loss (soft constraint rows) off; the tendon equality of
    # the manipulator is not part of this comparison (off in both: with it, jaxmbd's run
    # left MuJoCo's by 4.4e-4 in one step)
    m.opt.disableflags |= (OFF.mjDSBL_CONTACT | OFF.mjDSBL_LIMIT | OFF.mjDSBL_FRICTIONLOSS
                           | OFF.mjDSBL_EQUALITY)  # fmt: skip
    m.opt.integrator = mj_integrator
    tree = model.tree
    rng = np.random.default_rng(2)
    qvel = rng.uniform(-0.5, 0.5, tree.nv)
    model = dataclasses.replace(model, tree=dataclasses.replace(tree, qvel_init=jnp.asarray(qvel)))
    controls = rng.uniform(-1.0, 1.0, (n, m.nu))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        sol = mbd.simulate(model, formulation="joint", integrator=integrator, t_end=n * h, h=h,
                           controls=controls, equality="none")  # fmt: skip
    reference = _reference(m, np.asarray(tree.qpos_init), qvel, controls, h, substeps)
    assert np.abs(reference[-1] - reference[0]).max() > 1e-2  # it moved
    return np.abs(np.asarray(sol.qpos) - reference).max()


def test_point_mass_rk4_against_mujoco():
    """point_mass's two tendon actuators (fixed tendons over its slides): 1 s of random
    controls, jaxmbd's RK4 at h = 0.01 against MuJoCo's RK4 at h / 100, to 2e-9 (3.0e-10
    measured)."""
    assert _trajectories("point_mass", "rk", mujoco.mjtIntegrator.mjINT_RK4, 1e-2, 100, 100) < 2e-9


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="2026-12-01: equal to round-off for 146 steps (1e-15), then at step 147 the "
    "peg's three joints leave mj_step's by 1e-3 at once (5.1 rad after 1 s): a discrete "
    "event of one engine, not found yet",
)
def test_manipulator_euler_against_mujoco():
    """The manipulator's grasp (a tendon actuator on a fixed tendon over the fingers) and
    its joint actuators: 1 s of random controls at the file's h = 1e-3 in MuJoCo's own
    integrator (Euler, joint damping implicit), jaxmbd's "euler" against mj_step, to
    1e-6. (RK4 is out of reach: the fingertips' damping over their 7e-8 kg m^2 is a rate
    of 2e5 /s, so explicit steps need h < 1e-5.)"""
    error = _trajectories("manipulator", "euler", mujoco.mjtIntegrator.mjINT_EULER, 1e-3, 1000, 1)
    assert error < 1e-6


#: A slider pulled along a line by a spatial tendon (length x) with a limit at 1.2 m: the
#: slide starts at 1 m moving out at 2 m/s.
ROPE = """<mujoco><option gravity="0 0 0"/><worldbody><site name="a" pos="0 0 0"/>
  <body name="bob"><joint name="x" type="slide" axis="1 0 0"/>
    <geom type="sphere" size="0.05" mass="2"/><site name="b"/></body></worldbody>
  <tendon><spatial name="rope" limited="true" range="0 1.2"><site site="a"/><site site="b"/>
  </spatial></tendon><keyframe><key qpos="1" qvel="2"/></keyframe></mujoco>"""


def test_tendon_limit_against_scipy(tmp_path):
    """The rope's compliant limit, m x'' = -F(x - 1.2, x'), F the joint limits' law with the
    default gains of the tendon's inertia (the bob's mass, 1 / tendon_invweight0): jaxmbd's
    RK4 against scipy's integration of the same law (to 1e-6), and the rope holds the bob
    near 1.2 m (the spring stops it within v tau)."""
    from scipy.integrate import solve_ivp

    path = tmp_path / "rope.xml"
    path.write_text(ROPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(str(path))
    mass, tau = 2.0, LIMIT_TIME_CONSTANT
    k, c = mass / tau**2, 2 * mass / tau

    def rhs(t, y):
        x, v = y
        delta = x - 1.2
        force = k * delta + c * min(1.0, delta / DAMPING_RAMP) * v if delta > 0 else 0.0
        return [v, -max(0.0, force) / mass]

    h, n = 1e-4, 1500
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       limits="compliant")  # fmt: skip
    t = np.arange(n + 1) * h
    ref = solve_ivp(rhs, (0, t[-1]), [1.0, 2.0], t_eval=t, rtol=1e-12, atol=1e-12,
                    max_step=1e-4, method="DOP853")  # fmt: skip
    x = np.asarray(sol.qpos)[:, 0]
    assert np.abs(x - ref.y[0]).max() < 1e-6
    assert x.max() > 1.2 and x.max() < 1.2 + 2.0 * tau
    assert np.asarray(sol.qvel)[-1, 0] < 0  # bounced back
    # limits="none" takes the tendon's limit out with the joints'
    free = mbd.simulate(model, formulation="joint", integrator="rk", t_end=0.15, h=1e-3,
                        limits="none")  # fmt: skip
    assert abs(float(free.qpos[-1, 0]) - (1.0 + 2.0 * 0.15)) < ROUND_OFF


#: A double pendulum (single hinges) with a spatial spring-damper through a site on each
#: link (KNOB: wrapping a sphere on the upper link instead) and a motor along it: runs in
#: every formulation.
SPRING = """<mujoco><option gravity="0 0 -9.81"/><worldbody><site name="top" pos="0.3 0 1.2"/>
  <body name="upper" pos="0 0 1"><joint name="h1" axis="0 1 0"/>
    <geom name="knob" type="sphere" pos="0.15 0 -0.15" size="0.06" mass="0.2"/>
    <site name="knob_site" pos="0.15 0.05 -0.15"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/>
    <body name="lower" pos="0 0 -0.4"><joint name="h2" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.03" mass="0.5"/>
      <site name="end" pos="0.3 0 -0.3"/></body></body></worldbody>
  <tendon><spatial name="spring" stiffness="40" springlength="0.6" damping="0.5">
    <site site="top"/>VIA<site site="end"/></spatial></tendon>
  <actuator><motor tendon="spring" gear="3"/></actuator>
  <keyframe><key qpos="0.4 -0.6" qvel="1 0"/></keyframe></mujoco>"""
SPRINGS = {"sites": SPRING.replace("VIA", '<site site="knob_site"/>'),
           "wrap": SPRING.replace("VIA", '<geom geom="knob"/>')}  # fmt: skip


def _spring(kind, tmp_path_factory):
    path = tmp_path_factory.mktemp("spring") / f"spring_{kind}.xml"
    path.write_text(SPRINGS[kind])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(str(path))
    return with_contact(model, "none"), str(path)


@pytest.fixture(scope="module")
def spring_model(tmp_path_factory):
    return _spring("sites", tmp_path_factory)


def test_absolute_formulation_spatial_tendon(spring_model):
    """The spatial tendon and its actuator act on the bodies at their sites, so the
    absolute formulation (rA) runs them: its joint angles follow the joint formulation's
    to the integrators' accuracy (and both follow MuJoCo's RK4)."""
    model, path = spring_model
    h, n = 1e-3, 100
    u = jnp.full((n, 1), 0.7)
    joint = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                         controls=u)  # fmt: skip
    absolute = mbd.simulate(model, formulation="rA", t_end=n * h, h=h, controls=u,
                            tol=1e-12)  # fmt: skip
    m = _mujoco(path)
    m.opt.disableflags |= OFF.mjDSBL_CONTACT
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    ref = _reference(m, m.key_qpos[0], m.key_qvel[0], np.full((n, 1), 0.7), h, 10)
    assert np.abs(np.asarray(joint.qpos) - ref).max() < 2e-10  # 4.3e-11
    for k, name in enumerate(("h1", "h2")):
        q = np.asarray(absolute.joints[name].q)
        assert np.abs(q - ref[:, k]).max() < 2e-5, name  # 4.0e-6


@pytest.mark.parametrize("kind", ["sites", pytest.param("wrap", marks=pytest.mark.slow)])
def test_gradient_through_tendon_forces(kind, tmp_path_factory):
    """d(final angle)/d(tendon stiffness, motor control) by jax.grad through a joint
    formulation run, against central differences (2e-12 relative, 1e-6 for the slow wrap):
    a path through sites,
    and one wrapping a sphere."""
    model, _ = _spring(kind, tmp_path_factory)
    h, n = 1e-3, 50

    def final(params):
        k, u = params
        element = next(f for f in model.forces if isinstance(f, TendonForces))
        m2 = eqx.tree_at(lambda mm: next(f for f in mm.forces if isinstance(f, TendonForces))
                         .stiffness, model, element.stiffness.at[0].set(k))  # fmt: skip
        sol = mbd.simulate(m2, formulation="joint", integrator="rk", t_end=n * h, h=h,
                           controls=jnp.full((n, 1), u))  # fmt: skip
        return sol.qpos[-1, 1]

    params = jnp.asarray([40.0, 0.7])
    grad = jax.grad(final)(params)
    tol = 2e-12 if kind == "sites" else 1e-6  # sites: 4.5e-13; the slow wrap not measured
    for k, step in ((0, 1e-3), (1, 1e-4)):
        e = jnp.zeros(2).at[k].set(step)
        fd = (final(params + e) - final(params - e)) / (2 * step)
        assert abs(float(grad[k]) - float(fd)) < tol * max(1.0, abs(float(fd))), k
    assert np.all(np.abs(np.asarray(grad)) > 1e-6)


def test_fixed_tendon_over_composite_joints_is_joint_space_only(tmp_path):
    """A fixed tendon over the hinges of a universal joint: the joint formulation runs it,
    the absolute formulations refuse the model, naming the tendon."""
    xml = """<mujoco><worldbody><body name="b" pos="0 0 1">
      <joint name="u1" axis="1 0 0"/><joint name="u2" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/></body></worldbody>
      <tendon><fixed name="sum" stiffness="2" springlength="0"><joint joint="u1" coef="1"/>
      <joint joint="u2" coef="1"/></fixed></tendon></mujoco>"""
    path = tmp_path / "u.xml"
    path.write_text(xml)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = mbd.load_model(str(path))
    assert not any("tendon" in str(w.message) for w in record)
    assert any("fixed tendon 'sum'" in reason for reason in model.joint_space_only)
    mbd.simulate(model, formulation="joint", t_end=0.01, h=1e-3)
    with pytest.raises((ValueError, ModelError), match="fixed tendon 'sum'"):
        mbd.simulate(model, formulation="rA", t_end=0.01, h=1e-3)


@pytest.mark.parametrize(
    "file",
    ["ball_in_cup", "point_mass", "manipulator", "stacker", "fish", "quadruped",
     pytest.param("dog", marks=pytest.mark.slow)],
)  # fmt: skip
def test_importer_warning_names_no_tendons(file):
    """dm_control's files with tendons load with no tendon or tendon-actuator in the
    unsupported-features warning (tendon equality constraints aside: another part)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mbd.load_model(os.path.join(SUITE, f"{file}.xml"))
    for w in record:
        text = str(w.message)
        for part in text.split("; "):
            if "tendon" in part and "of type tendon" not in part:
                pytest.fail(f"{file}: {part}")


#: tendon sensors and an actuator-force sensor on a tendon actuator, on the spring model
SENSORS = (
    SPRINGS["wrap"]
    .replace(
        "</actuator>",
        """</actuator><sensor>
  <tendonpos name="length" tendon="spring"/><tendonvel name="rate" tendon="spring"/>
  <actuatorfrc name="pull" actuator="motor"/></sensor>""",
    )
    .replace(
        '<motor tendon="spring" gear="3"/>',
        '<position name="motor" tendon="spring" gear="3" kp="5" kv="0.5"/>',
    )
)


def test_tendon_sensors_against_mujoco(tmp_path):
    """tendonpos, tendonvel and actuatorfrc (a position servo on a wrapped tendon) equal
    MuJoCo's sensordata at random states and controls (1e-10)."""
    path = tmp_path / "sensors.xml"
    path.write_text(SENSORS)
    model, m = _load(str(path)), _mujoco(str(path))
    assert model.sensors.sensor_names == ("length", "rate", "pull")
    d = mujoco.MjData(m)
    read = eqx.filter_jit(mbd.read_sensors)
    rng = np.random.default_rng(3)
    for _ in range(4):
        d.qpos[:] = rng.uniform(-1.0, 1.0, m.nq)
        d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
        d.ctrl[:] = u = rng.uniform(-1.0, 1.0, m.nu)
        mujoco.mj_forward(m, d)
        values = read(model, jnp.asarray(d.qpos), jnp.asarray(d.qvel), controls=jnp.asarray(u))
        got = np.concatenate([np.asarray(values[n]) for n in model.sensors.sensor_names])
        assert np.abs(got - d.sensordata).max() < ROUND_OFF


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ([("site", "arm", (0, 0, 0)), ("bead", 1.0)], r"path\[1\]: kind must be 'site'"),
        ([("site", "arm", (0, 0, 0)), ("pulley",)], r"path\[1\]: expected \('pulley', divisor\)"),
        ([("site", "arm", (0, 0, 0)), ("sphere", "arm", (0, 0, 0))],
         r"path\[1\]: expected \('sphere', body, centre, radius"),
        ([("sphere", "arm", (0, 0, 0), 0.1), ("site", "arm", (1, 0, 0))],
         "starts and ends at a site"),
        ([("site", "arm", (0, 0, 0)), ("pulley", 2.0), ("cylinder", "arm", (0, 0, 0),
          (0, 0, 1), 0.1), ("site", "arm", (1, 0, 0))], r"path\[1\]: a pulley is followed"),
        ([("site", "arm", (0, 0, 0)), ("cylinder", "arm", (0, 0, 0), (0, 0, 1), -0.1),
          ("site", "arm", (1, 0, 0))], r"path\[1\].radius: expected a positive number"),
        ([("site", "arm", (0, 0, 0)), ("pulley", 0.0), ("site", "arm", (1, 0, 0))],
         r"path\[1\].divisor: expected a positive number"),
    ],
)  # fmt: skip
def test_spatial_tendon_path_errors_name_the_element(path, message):
    b = mbd.ModelBuilder("path")
    b.add_body("arm", mass=1.0, inertia=(1.0, 1.0, 1.0))
    with pytest.raises(ModelError, match=message):
        b.add_spatial_tendon("t", path=path)
