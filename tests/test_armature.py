"""Joint armature (rotor inertia, issue 36; :mod:`jaxmbd.forces.joint_dynamics`): pendulum periods
against the closed forms, a double pendulum with armature on the elbow (between two moving
bodies: the coupling a g g^T and the velocity term -a (g_dot . V) g) against its own
joint-space Lagrangian integrated tightly and against MuJoCo, energy with 1/2 a q_dot^2,
jax.grad of the armature leaf against central differences, the MJCF mapping and the
refusals.

Every armature here is of the order of (or larger than) the link's own inertia about its
joint, so that dropping it, its coupling or its velocity term moves the answers far past
the tolerances (checked by mutation: without the g_dot . V term the slide leaves the
reference by 8e-4 m within 0.3 s (rkmk); without the index-1 coupling blocks by 0.2 rad).
"""

from __future__ import annotations

import functools
import math
import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipk
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces.joint_dynamics import JointDynamics

G = 9.81

# --------------------------------------------------------------------------- pendulums
# two independent pendulums on hinges about +y: a rod of mass M, centre of mass L below the
# pivot, inertia J about its centre (isotropic, so that any body frame serves), armature A_
M, L, J = 1.0, 0.5, 0.02
A_SMALL, A_LARGE = 0.2, 0.5
THETA_SMALL, THETA_LARGE = 0.05, 1.0
PERIOD_HORIZON = 4.0  # s: four zero crossings of the small swing, three of the large


def pendulums(*, tilted: bool = False) -> mbd.Model:
    """``tilted``: body frames turned 90 deg about x (the re formulation's ZXZ chart is
    singular at the identity; the inertia is isotropic, so nothing else changes)."""
    b = mbd.ModelBuilder("armature pendulums", gravity=(0.0, 0.0, -G))
    A = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]) if tilted else None
    for name, y, arm, theta in (("small", 0.0, A_SMALL, THETA_SMALL),
                                ("large", 1.0, A_LARGE, THETA_LARGE)):  # fmt: skip
        b.add_body(name, mass=M, inertia=[J, J, J], r=(0.0, y, -L), A=A)
        b.revolute(f"{name}_hinge", body_i="ground", body_j=name, point=(0.0, y, 0.0),
                   axis=(0, 1, 0), armature=arm)  # fmt: skip
        b.set_joint_state(f"{name}_hinge", q=theta, qdot=0.0)
    return b.build()


def exact_period(armature: float, theta0: float) -> float:
    """(I + a) q_ddot = -m g l sin q from rest at theta0: T = 4 sqrt((I + a) / (m g l))
    K(sin^2(theta0 / 2)) (complete elliptic integral of the first kind, parameter m)."""
    inertia = J + M * L**2 + armature
    return 4.0 * math.sqrt(inertia / (M * G * L)) * float(ellipk(math.sin(theta0 / 2) ** 2))


def small_amplitude_period(armature: float) -> float:
    """T = 2 pi sqrt((I + a) / (m g l)), I = J + m l^2 about the pivot."""
    return 2.0 * math.pi * math.sqrt((J + M * L**2 + armature) / (M * G * L))


def measured_period(t, q) -> float:
    """Twice the mean spacing of the zero crossings (linear interpolation: q_ddot = 0 at
    q = 0, so the interpolation error is third order in h)."""
    t, q = np.asarray(t), np.asarray(q)
    k = np.flatnonzero(np.sign(q[:-1]) * np.sign(q[1:]) < 0)
    crossings = t[k] + (t[k + 1] - t[k]) * q[k] / (q[k] - q[k + 1])
    assert len(crossings) >= 3, crossings
    slope = np.polyfit(np.arange(len(crossings)), crossings, 1)[0]
    return 2.0 * slope


#: (formulation, integrator, h, relative period tolerance). RK4 (rkmk) at h = 0.02 s:
#: (w h)^4 ~ 2e-5 per radian of phase, far below 1e-6 of the period here; gen_alpha
#: (second order) at h = 0.01 s: the period elongation of the trapezoidal family,
#: (w h)^2 / 12 = 8.7e-5 for the small swing (w = 3.2 rad/s), allowed 3e-4.
PERIOD_CASES = [
    ("se3", "rkmk", 2e-2, 1e-6),
    # rA with both integrators is checked by default on the double pendulum below
    pytest.param("rA", "gen_alpha", 1e-2, 3e-4, marks=pytest.mark.slow),
    pytest.param("rA", "rkmk", 2e-2, 1e-6, marks=pytest.mark.slow),
    pytest.param("rp", "gen_alpha", 1e-2, 3e-4, marks=pytest.mark.slow),
    pytest.param("re", "gen_alpha", 1e-2, 3e-4, marks=pytest.mark.slow),
    # rk steps R as a plain matrix (orthogonality held by multipliers): 2.6e-6 measured
    pytest.param("rotmat", "rk", 2e-2, 1e-5, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("formulation, integrator, h, tol", PERIOD_CASES)
def test_pendulum_period_matches_the_closed_form(formulation, integrator, h, tol):
    """Both swings' periods against the exact elliptic-integral period of (I + a) q_ddot =
    -m g l sin q, and the 0.05 rad swing also against T = 2 pi sqrt((I + a) / (m g l))
    (the amplitude raises it by theta0^2 / 16 = 1.6e-4). Without the armature the periods
    would be 17 % and 26 % shorter."""
    model = pendulums(tilted=formulation == "re")
    options = {"multipliers": "one_step"} if formulation == "rotmat" else {}
    sol = mbd.simulate(model, formulation=formulation, integrator=integrator, h=h,
                       t_end=PERIOD_HORIZON, **options)  # fmt: skip
    assert bool(jnp.all(sol.status == 0))
    for name, arm, theta in (("small", A_SMALL, THETA_SMALL), ("large", A_LARGE, THETA_LARGE)):
        period = measured_period(sol.t, sol.joints[f"{name}_hinge"].q)
        exact = exact_period(arm, theta)
        assert abs(period / exact - 1) < tol, (name, period, exact)
    small = measured_period(sol.t, sol.joints["small_hinge"].q)
    assert abs(small / small_amplitude_period(A_SMALL) - 1) < THETA_SMALL**2 / 16 + tol


# --------------------------------------------------------------------- double pendulum
# upper link on the shoulder (armature 0.05), lower link on the elbow (armature 0.3, from
# <default>, about 7 times the lower link's own 0.044 kg m^2 about the elbow: armature
# dominates as on dm_control's cheetah), and a slider sprung along the lower link (armature
# 0.4 kg against its 0.3 kg mass); hinges about +y, qpos = the jaxmbd coordinates. On a
# hinge g_dot . V = (omega_i x n) . (omega_j - omega_i) vanishes (the relative rotation is
# about n): the slide on the turning link is what exercises the velocity term.
M1, L1C, L1, I1 = 1.0, 0.3, 0.6, 0.03
M2, L2C, I2 = 0.5, 0.25, 0.012
M3, L3, I3, K3 = 0.3, 0.4, 0.002, 50.0
ARM_SHOULDER, ARM_ELBOW, ARM_SLIDE = 0.05, 0.3, 0.4
Q0, QDOT0 = (0.8, -0.5, 0.05), (0.0, 1.0, 0.3)
JOINTS = ("shoulder", "elbow", "slide")
H_DOUBLE, T_DOUBLE = 1e-3, 0.3

DOUBLE_XML = f"""
<mujoco model="armature double pendulum">
  <option gravity="0 0 -{G}" timestep="1e-4" integrator="RK4"/>
  <default><joint type="hinge" axis="0 1 0" armature="{ARM_ELBOW}"/></default>
  <worldbody>
    <body name="upper">
      <joint name="shoulder" armature="{ARM_SHOULDER}"/>
      <inertial pos="0 0 -{L1C}" mass="{M1}" diaginertia="0.02 {I1} 0.02"/>
      <body name="lower" pos="0 0 -{L1}">
        <joint name="elbow"/>
        <inertial pos="0 0 -{L2C}" mass="{M2}" diaginertia="0.01 {I2} 0.01"/>
        <body name="slider" pos="0 0 -{L3}">
          <joint name="slide" type="slide" axis="0 0 -1" armature="{ARM_SLIDE}"
                 stiffness="{K3}"/>
          <inertial pos="0 0 0" mass="{M3}" diaginertia="{I3} {I3} {I3}"/>
        </body>
      </body>
    </body>
  </worldbody>
  <keyframe>
    <key name="start" qpos="{" ".join(map(str, Q0))}" qvel="{" ".join(map(str, QDOT0))}"/>
  </keyframe>
</mujoco>
"""


def lagrangian(q, qdot):
    """L = T - V in joint coordinates (shoulder and elbow angles, slide s), armature
    included: T = 1/2 (sum m |v|^2 + I w^2 + a1 q1_dot^2 + a2 q2_dot^2 + a3 s_dot^2) with
    the centres of mass at distances l along (-sin phi, -cos phi) in (x, z), the slider at
    L3 + s along the lower link and turning with it; V = gravity + 1/2 k s^2."""

    def centres(q):
        def along(phi, length):
            return length * jnp.array([-jnp.sin(phi), -jnp.cos(phi)])

        phi2 = q[0] + q[1]
        elbow = along(q[0], L1)
        return along(q[0], L1C), elbow + along(phi2, L2C), elbow + along(phi2, L3 + q[2])

    p1, p2, p3 = centres(q)
    v1, v2, v3 = jax.jvp(centres, (q,), (qdot,))[1]
    w1, w2 = qdot[0], qdot[0] + qdot[1]
    kinetic = 0.5 * (M1 * v1 @ v1 + I1 * w1**2 + M2 * v2 @ v2 + I2 * w2**2
                     + M3 * v3 @ v3 + I3 * w2**2 + ARM_SHOULDER * qdot[0] ** 2
                     + ARM_ELBOW * qdot[1] ** 2 + ARM_SLIDE * qdot[2] ** 2)  # fmt: skip
    potential = G * (M1 * p1[1] + M2 * p2[1] + M3 * p3[1]) + 0.5 * K3 * q[2] ** 2
    return kinetic - potential


@jax.jit
def _lagrange_rhs(x):
    """Euler-Lagrange: M(q) q_ddot = dL/dq - (d^2 L / dq_dot dq) q_dot."""
    q, qdot = x[:3], x[3:]
    mass = jax.hessian(lagrangian, argnums=1)(q, qdot)
    mixed = jax.jacfwd(jax.grad(lagrangian, argnums=1), argnums=0)(q, qdot)
    rhs = jax.grad(lagrangian, argnums=0)(q, qdot) - mixed @ qdot
    return jnp.concatenate([qdot, jnp.linalg.solve(mass, rhs)])


@functools.cache
def lagrange_reference():
    """(t, q (T, 3), q_ddot at t = 0) of the 3-DOF ODE, DOP853 at rtol = atol = 1e-12."""
    t = np.linspace(0.0, T_DOUBLE, round(T_DOUBLE / H_DOUBLE) + 1)
    x0 = np.array([*Q0, *QDOT0])
    out = solve_ivp(lambda _, x: np.asarray(_lagrange_rhs(jnp.asarray(x))), (0.0, T_DOUBLE),
                    x0, method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t)  # fmt: skip
    return t, out.y[:3].T, np.asarray(_lagrange_rhs(jnp.asarray(x0)))[3:]


@functools.cache
def double_model(tmp: str) -> mbd.Model:
    from pathlib import Path

    path = Path(tmp) / "double.xml"
    path.write_text(DOUBLE_XML)
    return mbd.load_model(path, keyframe="start")


@pytest.fixture(scope="module")
def double(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # armature no longer named as unsupported
        return double_model(str(tmp_path_factory.mktemp("armature")))


_RUNS: dict = {}


def double_run(model, integrator, formulation="rA"):
    """One run per (formulation, integrator), shared by the tests (``model``: the module's
    fixture)."""
    key = (formulation, integrator)
    if key not in _RUNS:
        _RUNS[key] = mbd.simulate(model, formulation=formulation, integrator=integrator,
                                  t_end=T_DOUBLE, h=H_DOUBLE)  # fmt: skip
    return _RUNS[key]


def joint_angles(sol):
    return np.stack([np.asarray(sol.joints[n].q) for n in JOINTS], 1)


def joint_element(model) -> JointDynamics:
    (element,) = [f for f in model.forces if isinstance(f, JointDynamics)]
    return element


def test_mjcf_armature_and_default_are_read(double):
    """``armature`` on a joint and through ``<default>`` become the (n,) leaf, in joint
    order; the import warns about nothing (the fixture turns warnings into errors)."""
    element = joint_element(double)
    assert [d.name for d in element.joints] == list(JOINTS)
    np.testing.assert_array_equal(
        np.asarray(element.armature), [ARM_SHOULDER, ARM_ELBOW, ARM_SLIDE]
    )


@pytest.mark.parametrize(
    "formulation, integrator, tol",
    [
        ("rA", "rkmk", 2e-11),
        pytest.param("rA", "gen_alpha", 2e-5, marks=pytest.mark.slow),
        ("joint", "rkmk", 2e-11),
    ],
)
def test_double_pendulum_follows_its_lagrangian(double, formulation, integrator, tol):
    """Armature between two moving bodies: rA with rkmk (the index-1 system's coupling
    blocks) and gen_alpha (the dynamics equations and the hand-coded Newton matrix) against
    the joint-space Euler-Lagrange equations integrated with DOP853 at 1e-12, over 0.3 s
    at h = 1e-3 (RK4's error ~1e-11; gen_alpha's second-order error ~1e-6 rad). The
    consistent start's accelerations are the reference's q_ddot(0)."""
    t, q_ref, qddot0 = lagrange_reference()
    sol = double_run(double, integrator, formulation)
    assert bool(jnp.all(sol.status == 0))
    np.testing.assert_allclose(np.asarray(sol.t), t, rtol=ROUND_OFF)
    np.testing.assert_allclose(joint_angles(sol), q_ref, rtol=0, atol=tol)
    # q_ddot(0) of the start: the hinges' relative angular accelerations about +y (the
    # body frames turn about y, which they keep)
    w = np.asarray(sol.omegadot[0])
    np.testing.assert_allclose([w[0, 1], w[1, 1] - w[0, 1]], qddot0[:2], rtol=ROUND_OFF)


def test_energy_counts_the_rotors(double):
    """No damping: the total energy with 1/2 a q_dot^2 holds to RK4's error (1e-10
    relative over 0.3 s); the rotors carry a fifth of the kinetic energy here, so leaving
    them out of the energy (or of the dynamics) breaks it by far more."""
    sol = double_run(double, "rkmk")
    e = mbd.diagnostics.energy(double, sol)
    drift = np.max(np.abs(np.asarray(e.total) - float(e.total[0])))
    assert drift < 2e-11 * float(np.max(np.abs(e.kinetic))), drift
    qdot = np.stack([np.asarray(sol.joints[n].qdot) for n in JOINTS], 1)
    rotors = 0.5 * qdot**2 @ np.array([ARM_SHOULDER, ARM_ELBOW, ARM_SLIDE])
    assert np.max(rotors) > 0.1 * float(np.max(e.kinetic))


def test_double_pendulum_follows_mujoco(double, tmp_path):
    """The same file in MuJoCo (RK4, dt = 1e-4): MuJoCo adds armature to the diagonal of
    its joint-space mass matrix; jaxmbd (rA, rkmk, h = 1e-3) adds a g g^T in absolute
    coordinates. They agree to 1e-9 rad over 0.3 s."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(DOUBLE_XML)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    per = round(H_DOUBLE / m.opt.timestep)
    q_mj = [d.qpos.copy()]
    for _ in range(round(T_DOUBLE / H_DOUBLE)):
        for _ in range(per):
            mujoco.mj_step(m, d)
        q_mj.append(d.qpos.copy())
    sol = double_run(double, "rkmk")
    np.testing.assert_allclose(joint_angles(sol), np.array(q_mj), rtol=0, atol=2e-11)


@pytest.mark.slow  # the gradient program takes minutes to compile on a busy 2-core machine
def test_grad_of_armature_matches_central_differences(double):
    """d (q_elbow + s)(0.1 s) / d armature by jax.grad (implicit gradients of gen_alpha's
    Newton steps, whose matrix must hold the a g g^T blocks exactly) against central
    differences of the same compiled runs (step 1e-4, error ~1e-8 relative); the leaf is
    reached through eqx.tree_at. Measured: (-0.0320, -0.0451, 0.0069) both ways."""
    k = next(i for i, f in enumerate(double.forces) if isinstance(f, JointDynamics))

    def loss(armature):
        model = eqx.tree_at(lambda m: m.forces[k].armature, double, armature)
        sol = mbd.simulate(model, integrator="gen_alpha", t_end=0.1, h=H_DOUBLE)
        return sol.joints["elbow"].q[-1] + sol.joints["slide"].q[-1]

    a0 = double.forces[k].armature
    grad = np.asarray(jax.grad(loss)(a0))
    step = 1e-4
    fd = [
        (float(loss(a0.at[i].add(step))) - float(loss(a0.at[i].add(-step)))) / (2 * step)
        for i in range(3)
    ]
    assert np.all(np.abs(np.asarray(fd)) > 1e-3)  # every armature matters
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_structured_solver_handles_the_coupling(double):
    """linear_solver='structured' (gathered into the body-joint graph's blocks: the joint's
    two bodies share a block through its rows and its force element) gives the dense
    answer to round-off."""
    run = dict(formulation="rA", integrator="gen_alpha", t_end=0.05, h=H_DOUBLE)
    dense = mbd.simulate(double, **run)
    structured = mbd.simulate(double, **run, linear_solver="structured")
    np.testing.assert_allclose(joint_angles(structured), joint_angles(dense), atol=1e-12)


# ------------------------------------------------------------------------ builder checks
def test_builder_refuses_bad_armature_and_keeps_models_without_it_unchanged():
    b = mbd.ModelBuilder("bad")
    b.add_body("rod", mass=1.0, inertia=[1.0, 1.0, 1.0])
    with pytest.raises(mbd.ModelError, match=re.escape("joint 'hinge'.armature")):
        b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
                   armature=-0.1)  # fmt: skip
    # a joint with damping only: the element exists, its armature leaf does not
    b = mbd.ModelBuilder("damped")
    b.add_body("rod", mass=1.0, inertia=[1.0, 1.0, 1.0])
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               damping=0.1)  # fmt: skip
    element = joint_element(b.build())
    assert element.armature is None and not element.adds_mass
    # armature=0.0 given: a leaf (a gradient can start from zero)
    b = mbd.ModelBuilder("zero")
    b.add_body("rod", mass=1.0, inertia=[1.0, 1.0, 1.0])
    b.translational("rail", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(1, 0, 0),
                    armature=0.0)  # fmt: skip
    element = joint_element(b.build())
    np.testing.assert_array_equal(np.asarray(element.armature), [0.0])


def test_closed_forms_that_assume_a_block_diagonal_mass_refuse_armature(double):
    with pytest.raises(ValueError, match="multipliers='one_step'"):
        mbd.simulate(double, formulation="rotmat", integrator="rk", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="energy_momentum: .* armature"):
        mbd.simulate(double, formulation="director", integrator="energy_momentum",
                     t_end=0.01, h=1e-3)  # fmt: skip
