"""Fluid forces (jaxmbd.forces.fluid: MuJoCo's inertia-box and ellipsoid models) against MuJoCo
C: the generalised fluid forces against qfrc_passive with every other passive force off,
swimmer trajectories against MuJoCo's RK4 at h / 100, a sphere's terminal velocity in a
viscous fluid against the closed form of the box model, and the gradients with respect to
density and viscosity against central differences."""

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
from jaxmbd.joint_space.dynamics import accelerations, applied_generalised_forces
from jaxmbd.joint_space.run import model_tree

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")
gymnasium = pytest.importorskip("gymnasium")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
GYM = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
OFF = mujoco.mjtDisableBit

#: every ellipsoid term (added mass, drags, Kutta, Magnus) on geoms of every kind, a
#: geom of an ellipsoid body without the ellipsoid model, inertia boxes on a slide's body
#: and on a jointless body merged into it, viscosity and wind
ELLIPSOIDS = """<mujoco><option density="1.3" viscosity="0.2" wind="0.4 -0.3 0.2"/>
<worldbody>
 <body name="torso" pos="0 0 1" euler="10 20 30"><freejoint/>
  <geom type="ellipsoid" size="0.3 0.1 0.05" fluidshape="ellipsoid"
        fluidcoef="0.6 0.3 1.2 1.1 0.9"/>
  <geom type="box" size="0.05 0.2 0.02" pos="0 0 0.1" fluidshape="ellipsoid"/>
  <geom type="sphere" size="0.05" pos="0.2 0 0"/>
  <body name="wing" pos="0.1 0.1 0">
   <joint name="a" axis="1 0.2 0"/><joint name="b" axis="0 0 1"/>
   <geom type="capsule" size="0.02 0.2" euler="0 90 0" pos="0.2 0 0" fluidshape="ellipsoid"
         fluidcoef="0.5 0.25 1.5 1.0 1.0"/>
   <geom type="cylinder" size="0.05 0.01" pos="0.35 0 0" euler="30 0 0"
         fluidshape="ellipsoid"/>
  </body>
  <body name="tail" pos="-0.3 0 0"><joint name="c" type="slide" axis="1 0 0"/>
   <geom type="box" size="0.1 0.03 0.02" pos="-0.1 0 0" euler="0 10 5"/>
   <body name="fin" pos="-0.2 0 0" euler="0 0 30"><geom type="box" size="0.05 0.04 0.005"/>
   </body>
  </body>
 </body>
</worldbody></mujoco>"""

#: a sphere on a vertical slide in a viscous, dense fluid
RADIUS, MASS, DENSITY, VISCOSITY = 0.1, 2.0, 50.0, 50.0
SPHERE = f"""<mujoco><option density="{DENSITY}" viscosity="{VISCOSITY}" gravity="0 0 -9.81">
 <flag contact="disable"/></option>
<worldbody><body name="ball" pos="0 0 10"><joint name="z" type="slide" axis="0 0 1"/>
 <geom type="sphere" size="{RADIUS}" mass="{MASS}"/></body></worldbody></mujoco>"""


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mbd.load_model(path, keyframe=None)


def _swimmer6(tmp_path):
    """dm_control's six-link swimmer (``swimmer.get_model_and_assets``), written out."""
    from dm_control.suite import swimmer

    xml, assets = swimmer.get_model_and_assets(6)
    for name, data in assets.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    path = tmp_path / "swimmer6.xml"
    path.write_bytes(xml)
    return str(path)


@pytest.fixture(scope="module")
def xml_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fluid")


@pytest.fixture(scope="module")
def loaded(xml_dir):
    """name -> (path, model), each file loaded once for the module."""
    cache = {}

    def get(name):
        if name not in cache:
            path = _path(name, xml_dir)
            cache[name] = (path, _load(path))
        return cache[name]

    return get


def _path(name, directory):
    if name == "ellipsoids":
        path = directory / "ellipsoids.xml"
        path.write_text(ELLIPSOIDS)
        return str(path)
    if name == "swimmer6":
        return _swimmer6(directory)
    return {"dm_swimmer": os.path.join(SUITE, "swimmer.xml"),
            "fish": os.path.join(SUITE, "fish.xml"),
            "gym_swimmer": os.path.join(GYM, "swimmer.xml")}[name]  # fmt: skip


def _fluid_only(model):
    return dataclasses.replace(
        model, forces=tuple(f for f in model.forces if isinstance(f, mbd.FluidForce))
    )


SLOW = pytest.mark.slow


@pytest.mark.parametrize("name", ["swimmer6", "ellipsoids", pytest.param("fish", marks=SLOW),
                                  pytest.param("dm_swimmer", marks=SLOW),
                                  pytest.param("gym_swimmer", marks=SLOW)])  # fmt: skip
def test_fluid_forces_against_qfrc_passive(name, loaded):
    """J^T of the fluid wrenches = MuJoCo's qfrc_passive with joint and tendon damping and
    stiffness zeroed, to round-off, at random states: the inertia-box model (the
    swimmers, fish's free body and fins) and the ellipsoid model (every geom kind, custom
    coefficients, wind)."""
    path, model = loaded(name)
    model = _fluid_only(model)
    m = mujoco.MjModel.from_xml_path(path)
    # (disabling both flags would skip the fluid too: MuJoCo's mj_passive)
    for field in ("dof_damping", "jnt_stiffness", "tendon_damping", "tendon_stiffness"):
        getattr(m, field)[:] = 0.0
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    for _ in range(3):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        mujoco.mj_normalizeQuat(m, d.qpos)
        d.qvel[:] = rng.uniform(-3.0, 3.0, m.nv)
        mujoco.mj_forward(m, d)
        assert np.array_equal(d.qfrc_passive, d.qfrc_fluid)  # fluid forces alone
        tau = applied_generalised_forces(model, model.tree, jnp.asarray(d.qpos),
                                         jnp.asarray(d.qvel), 0.0)  # fmt: skip
        scale = np.abs(d.qfrc_passive).max()
        assert scale > 0.1
        assert np.abs(np.asarray(tau) - d.qfrc_passive).max() < ROUND_OFF * scale


def _reference(m, qpos, qvel, controls, h, substeps=100):
    m.opt.timestep = h / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
    return np.array(d.qpos)


@pytest.mark.parametrize(("name", "steps_per_file_step"),
                         [("swimmer6", 1), pytest.param("gym_swimmer", 4, marks=SLOW)])  # fmt: skip
@pytest.mark.filterwarnings("ignore::jaxmbd.AssemblyWarning")
def test_swimmer_after_one_second_of_random_controls(name, steps_per_file_step, loaded):
    """Joint coordinates after 1 s of random controls, jaxmbd's RK4 against MuJoCo's RK4 at
    a hundredth of jaxmbd's step, contact and limits off in both: to 1e-6. dm_control's
    swimmer at its file's step; gymnasium's (gear 150) at a quarter of its 0.01 s, where
    RK4's own error is 1e-7 (2e-5 at 0.01 s, falling 16-fold per halving)."""
    path, model = loaded(name)
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= OFF.mjDSBL_CONTACT | OFF.mjDSBL_LIMIT
    h = float(m.opt.timestep) / steps_per_file_step
    n = round(1.0 / h)
    rng = np.random.default_rng(4)
    controls = rng.uniform(-1.0, 1.0, (n, m.nu))
    qvel = rng.uniform(-0.5, 0.5, m.nv)
    tree = model.tree
    model = dataclasses.replace(model, tree=dataclasses.replace(tree, qvel_init=jnp.asarray(qvel)))
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls, contact="none", limits="none")  # fmt: skip
    reference = _reference(m, np.asarray(tree.qpos_init), qvel, controls, h)
    assert np.abs(reference - np.asarray(tree.qpos_init)).max() > 0.1  # it swam
    assert np.abs(np.asarray(sol.qpos[-1]) - reference).max() < 1e-6


def _terminal_velocity():
    """The box model's fall speed where drag balances weight: the sphere's box has sides
    b = R sqrt(12/5) (I = 2/5 m R^2), so m g = 3 pi b beta v + rho/2 b^2 v^2."""
    b = RADIUS * np.sqrt(12.0 / 5.0)
    linear, quadratic = 3.0 * np.pi * b * VISCOSITY, 0.5 * DENSITY * b * b
    return (-linear + np.sqrt(linear**2 + 4.0 * quadratic * MASS * 9.81)) / (2.0 * quadratic)


@pytest.fixture(scope="module")
def sphere(xml_dir):
    path = xml_dir / "sphere.xml"
    path.write_text(SPHERE)
    return _load(str(path))


def test_sphere_reaches_the_terminal_velocity(sphere):
    """A sphere released at rest in the fluid falls at the closed-form terminal velocity
    of the inertia-box model after 2 s (time constant about 0.03 s): to round-off."""
    sol = mbd.simulate(sphere, integrator="rk", t_end=2.0, h=2e-3)
    speed = -float(np.asarray(sol.joints["z"].qdot).reshape(-1)[-1])
    assert speed == pytest.approx(_terminal_velocity(), rel=ROUND_OFF, abs=0)


@pytest.mark.slow
def test_sphere_terminal_velocity_in_an_absolute_formulation(sphere):
    """The fluid force acts through the body wrench: the same terminal velocity in rA."""
    sol = mbd.simulate(sphere, formulation="rA", integrator="rkmk", t_end=2.0, h=2e-3)
    speed = -float(np.asarray(sol.rdot)[-1, 0, 2])
    assert speed == pytest.approx(_terminal_velocity(), rel=1e-9)


def _with_medium(model, density, viscosity):
    k = next(i for i, f in enumerate(model.forces) if isinstance(f, mbd.FluidForce))
    return eqx.tree_at(lambda m: (m.forces[k].density, m.forces[k].viscosity), model,
                       (density, viscosity))  # fmt: skip


def test_gradients_with_respect_to_density_and_viscosity(sphere):
    """d(fall speed after 0.1 s)/d(density, viscosity) by jax.grad through the run against
    central differences of the run (relative 3e-8)."""

    def speed(p):
        model = _with_medium(sphere, p[0], p[1])
        sol = mbd.simulate(model, integrator="rk", t_end=0.1, h=2e-3)
        return -sol.joints["z"].qdot.reshape(-1)[-1]

    p = jnp.array([DENSITY, VISCOSITY])
    grad = np.asarray(jax.grad(speed)(p))
    assert np.all(grad < 0)  # more drag, slower fall
    for i in range(2):
        step = 1e-4 * float(p[i])
        e = jnp.zeros(2).at[i].set(step)
        central = (float(speed(p + e)) - float(speed(p - e))) / (2 * step)
        assert grad[i] == pytest.approx(central, rel=3e-8, abs=0)


def test_model_file_round_trip_keeps_the_fluid(loaded, tmp_path):
    """save_model / load_model keep the fluid element (medium and parts) exactly."""
    model = loaded("ellipsoids")[1]
    mbd.save_model(model, tmp_path / "ellipsoids.json")
    again = mbd.load_model(tmp_path / "ellipsoids.json")
    (a,) = [f for f in model.forces if isinstance(f, mbd.FluidForce)]
    (b,) = [f for f in again.forces if isinstance(f, mbd.FluidForce)]
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert (a.boxes.body, a.ellipsoids.body) == (b.boxes.body, b.ellipsoids.body)


@pytest.mark.slow
def test_velocity_jacobian_is_finite_at_rest(loaded):
    """The implicit integrators differentiate the forces with respect to qvel: the
    ellipsoid model's norms of the velocity keep that derivative finite at rest, in both
    modes (in still air the forces vanish there)."""
    model = _fluid_only(loaded("ellipsoids")[1])
    model = eqx.tree_at(lambda m: m.forces[0].wind, model, jnp.zeros(3))
    q, tree = model.tree.qpos_init, model.tree

    def tau(v):
        return applied_generalised_forces(model, tree, q, v, 0.0)

    rest = jnp.zeros(tree.nv)
    assert np.abs(np.asarray(tau(rest))).max() == 0.0
    for jacobian in (jax.jacfwd, jax.jacrev):
        assert np.all(np.isfinite(np.asarray(jacobian(tau)(rest))))


def test_fish_accelerations_against_mj_forward(loaded):
    """dm_control's fish in joint space: qacc = mj_forward's at random states and controls,
    to 2e-12 relative (limits and friction loss off in both), every actuator mapped, the
    position servo on the fixed tendon ``fins_flap`` included (its bias -kp L pulls at
    zero control), beside the inertia boxes' fluid forces, the tendon spring and the
    joint dampers and spring."""
    path, model = loaded("fish")
    model = with_limits(with_contact(model, "none"), "none")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= OFF.mjDSBL_CONTACT | OFF.mjDSBL_LIMIT | OFF.mjDSBL_FRICTIONLOSS
    tendon = int(mujoco.mjtTrn.mjTRN_TENDON)
    assert model.nu == m.nu and tendon in {int(t) for t in m.actuator_trntype}
    d = mujoco.MjData(m)
    rng = np.random.default_rng(5)
    for _ in range(3):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        mujoco.mj_normalizeQuat(m, d.qpos)
        d.qvel[:] = rng.uniform(-2.0, 2.0, m.nv)
        d.ctrl[:] = u = rng.uniform(-1.0, 1.0, m.nu)
        mujoco.mj_forward(m, d)
        assert np.abs(d.qfrc_fluid).max() > 0.1 and np.abs(d.qfrc_actuator).max() > 0
        qacc = _joint_accelerations(with_controls(model, u), jnp.asarray(d.qpos),
                                    jnp.asarray(d.qvel))  # fmt: skip
        scale = np.abs(d.qacc).max()
        assert np.abs(np.asarray(qacc) - d.qacc).max() < 2e-12 * scale


@eqx.filter_jit
def _joint_accelerations(model, qpos, qvel):
    tree, loops = model_tree(model)
    return accelerations(model, tree, loops, qpos, qvel, 0.0).qacc
