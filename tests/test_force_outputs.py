"""Connector outputs (issue 74 item 3): ``sol.forces[name]`` reports each force element's
force, length (or deflection) and rate per step, in every formulation, against a hand
computation from the stored body states: a spring-damper's tension k (l - l0) + c l_dot
along its line, and a bushing's deflection (C_i^T (p_j - p_i), the rotation vector of
C_i^T C_j; scipy), its rate (the inverse right Jacobian of SO(3) in closed form) and wrench
-(K s + C s_dot); a builder model's actuators, joint spring-damper, spatial tendon and point
force against their laws at the hinge angle and the cord's length read from the poses; and
an MJCF model's actuators (motor, position, velocity, a filter with actearly, one on a
tendon), joint springs and dampers (hinges, a slide, a ball) and tendons (spatial, fixed)
against MuJoCo C's ``actuator_force``, ``actuator_length``, ``actuator_velocity``,
``ten_length``, ``ten_velocity``, ``qfrc_spring`` and ``qfrc_damper`` at the same qpos, qvel,
ctrl and act."""

from __future__ import annotations

from contextlib import nullcontext

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.actuators import with_controls

K6 = np.array([100.0, 200.0, 300.0, 10.0, 20.0, 30.0])
C6 = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
ANCHOR = np.array([0.0, 0.0, 1.0])  # the spring's ground point
S_BAR = np.array([0.1, 0.0, 0.0])  # its point on the block (body frame)
# the block's initial orientation (body z horizontal: "re"'s Euler angles are regular there)
A0 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
#: Every formulation; those other than the default compile their own programs (slow).
FORMULATIONS = ["joint", "rA"] + [
    pytest.param(f, marks=pytest.mark.slow) for f in ("rp", "re", "se3", "director", "rotmat")
]


def connected_block() -> mbd.Model:
    """A free block held by a bushing to the ground at its centre and by a spring-damper
    from ANCHOR to S_BAR, no gravity, launched in the plane with a spin about its z axis
    (its principal moments not those of a flat plate, whose K = tr(J)/2 - J "rotmat"
    cannot invert)."""
    b = mbd.ModelBuilder("connected block", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=1.0, inertia=[0.01, 0.02, 0.025], r=(0.0, 0.0, 0.0), A=A0,
               rdot=(0.3, -0.2, 0.0), omega=(0.0, 0.0, 2.0))  # fmt: skip
    b.bushing("mount", "ground", "block", (0.0, 0.0, 0.0), stiffness=K6.tolist(),
              damping=C6.tolist())  # fmt: skip
    b.spring_damper("strut", body_i="ground", point_i=ANCHOR, body_j="block", point_j=S_BAR,
                    stiffness=50.0, damping=0.5, rest_length=0.8)  # fmt: skip
    return b.build()


@pytest.fixture(scope="module")
def block():
    return connected_block()


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_spring_damper_and_bushing_outputs_equal_the_hand_computation(block, formulation):
    sol = mbd.simulate(block, formulation=formulation, t_end=0.1, h=1e-3)
    assert sol.formulation == formulation and set(sol.forces) == {"mount", "strut"}
    r, A = np.asarray(sol.r)[:, 0], np.asarray(sol.A)[:, 0]
    rdot, omega = np.asarray(sol.rdot)[:, 0], np.asarray(sol.omega)[:, 0]
    # spring-damper: P on the ground, Q = r + A s_bar moving at rdot + A (omega x s_bar)
    d = r + A @ S_BAR - ANCHOR
    length = np.linalg.norm(d, axis=1)
    velocity = rdot + np.einsum("tij,tj->ti", A, np.cross(omega, S_BAR))
    rate = np.einsum("ti,ti->t", d / length[:, None], velocity)
    strut = sol.forces["strut"]
    np.testing.assert_allclose(np.asarray(strut.length), length, rtol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(strut.rate), rate, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(strut.force), 50.0 * (length - 0.8) + 0.5 * rate,
                               rtol=ROUND_OFF)  # fmt: skip
    assert np.ptp(length) > 0.01  # it moved
    # bushing on the ground's frame at the origin, global axes, the block's frame aligned
    # with them at the start: s = (r, rotvec(A A0^T))
    mount = sol.forces["mount"]
    s = np.concatenate([r, Rotation.from_matrix(A @ A0.T).as_rotvec()], 1)
    # rotmat's rk leaves A off SO(3) by its truncation error, where scipy's nearest rotation
    # and the bushing's log part (slow-marked: 1.3e-12, 8.7e-14, 2.5e-11 measured)
    drift = formulation == "rotmat"
    np.testing.assert_allclose(
        np.asarray(mount.length), s, rtol=0, atol=5e-12 if drift else ROUND_OFF * np.abs(s).max()
    )
    # the rates: d = r gives r_dot; theta = log(A A0^T), whose (A A0^T)^T d/dt(A A0^T) is
    # (A0 omega_bar)~, gives J_r^-1(theta) A0 omega_bar with the
    # inverse right Jacobian of SO(3) in closed form (J. Sola et al., "A micro Lie theory",
    # 2018, eq. 144): I + theta~ / 2 + (1 / t^2 - (1 + cos t) / (2 t sin t)) theta~^2
    theta = s[:, 3:]
    t = np.linalg.norm(theta, axis=1)[:, None, None]
    hat = np.zeros((len(theta), 3, 3))
    hat[:, 0, 1], hat[:, 0, 2], hat[:, 1, 2] = -theta[:, 2], theta[:, 1], -theta[:, 0]
    hat = hat - np.swapaxes(hat, 1, 2)
    safe = np.where(t > 1e-6, t, 1.0)  # the coefficient's limit at 0 is 1/12
    coef = np.where(t > 1e-6, 1 / safe**2 - (1 + np.cos(safe)) / (2 * safe * np.sin(safe)), 1 / 12)
    jr_inv = np.eye(3) + hat / 2 + coef * hat @ hat
    s_dot = np.concatenate([rdot, np.einsum("tij,tj->ti", jr_inv, omega @ A0.T)], 1)
    np.testing.assert_allclose(
        np.asarray(mount.rate), s_dot, rtol=0,
        atol=4e-13 if drift else ROUND_OFF * np.abs(s_dot).max(),
    )  # fmt: skip
    force = -(K6 * s + C6 * s_dot)
    np.testing.assert_allclose(
        np.asarray(mount.force), force, rtol=0,
        atol=1e-10 if drift else ROUND_OFF * np.abs(force).max(),
    )  # fmt: skip
    assert np.ptp(np.linalg.norm(s[:, 3:], axis=1)) > 0.03  # it turned


def test_force_names_are_unique_and_required():
    b = mbd.ModelBuilder("twice")
    b.add_body("a", mass=1.0, inertia=[1.0] * 3)
    b.bushing("mount", "ground", "a", (0, 0, 0), stiffness=K6.tolist())
    with pytest.raises(mbd.ModelError, match="'mount': duplicate force name"):
        b.spring_damper("mount", body_i="ground", point_i=(0, 0, 1), body_j="a",
                        point_j=(0, 0, 0), stiffness=1.0, rest_length=1.0)  # fmt: skip


def test_spring_names_survive_model_files(block, tmp_path):
    path = tmp_path / "block.json"
    mbd.save_model(block, path)
    sol = mbd.simulate(mbd.load_model(path), t_end=0.002, h=1e-3)
    assert set(sol.forces) == {"mount", "strut"}


# ----------------------------------------------------------------------------- builder elements

W0 = 2.0  # the arm's initial rate about y (rad/s)
U_ARM = np.array([0.3, 0.2, -0.4])  # drive, servo, winch


def push(t, p):
    return p * jnp.array([1.0, 0.0, t])


@pytest.fixture(scope="module")
def arm():
    """A rod hinged to the ground about y (damping 0.2, stiffness 3 about 0.1 rad), a cord
    from the ground point (0, 0, 0.8) to its point (0.8, 0, 0) (stiffness 10 about 0.9 m,
    damping 0.1), a motor (gear 2) and a servo (kp 4, kv 0.5) on the hinge, a winch (gear
    1.5) on the cord and a named point force."""
    b = mbd.ModelBuilder("connected arm")
    # body frame A0 ("re"'s Euler angles are regular there); omega in it: W0 about global y
    b.add_body("arm", mass=1.0, inertia=[0.01, 0.1, 0.1], r=(0.5, 0.0, 0.0), A=A0,
               rdot=(0.0, 0.0, -0.5 * W0), omega=A0.T @ (0.0, W0, 0.0))  # fmt: skip
    b.revolute("hinge", body_i="ground", body_j="arm", point=(0, 0, 0), axis=(0, 1, 0),
               damping=0.2, stiffness=3.0, spring_reference=0.1)  # fmt: skip
    b.add_spatial_tendon("cord", path=[("site", "ground", (0.0, 0.0, 0.8)),
                                       ("site", "arm", (0.8, 0.0, 0.0))],
                         stiffness=10.0, spring_length=0.9, damping=0.1)  # fmt: skip
    b.add_actuator("drive", joint="hinge", kind="motor", gear=2.0)
    b.add_actuator("servo", joint="hinge", kind="position", kp=4.0, kv=0.5)
    b.add_actuator("winch", tendon="cord", kind="motor", gear=1.5)
    b.add_force(mbd.PointForce(body=0, s_bar=jnp.array([0.3, 0.0, 0.0]), fn=push,
                               params=jnp.array(2.0), name="push"))  # fmt: skip
    return b.build()


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_builder_elements_report_their_laws(arm, formulation):
    controls = np.tile(U_ARM, (20, 1))
    controls[:, 0] += 0.01 * np.arange(20)  # the motor's changes every step
    sol = mbd.simulate(arm, formulation=formulation, t_end=0.02, h=1e-3, controls=controls)
    assert sol.formulation == formulation
    forces = sol.forces
    assert set(forces) == {"push", "joint:hinge", "tendon:cord", "actuator:drive",
                           "actuator:servo", "actuator:winch"}  # fmt: skip
    r, A = np.asarray(sol.r)[:, 0], np.asarray(sol.A)[:, 0]
    rdot, omega = np.asarray(sol.rdot)[:, 0], np.asarray(sol.omega)[:, 0]
    turn = A @ A0.T  # R_y(angle)
    angle = np.arctan2(turn[:, 0, 2], turn[:, 0, 0])
    rate = np.einsum("tij,tj->ti", A, omega)[:, 1]  # about global y
    assert np.ptp(angle) > 0.03  # it turned

    def check(name, force, length, velocity):
        out = forces[name]
        for got, want in zip(out, (force, length, velocity), strict=True):
            scale = max(1.0, np.abs(want).max())
            # rotmat (slow-marked): its A off SO(3) by rk's truncation error, 8.8e-13 measured
            tol = 1e-12 if formulation == "rotmat" else ROUND_OFF
            np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=tol * scale)

    check("joint:hinge", -0.2 * rate - 3.0 * (angle - 0.1), angle - 0.1, rate)
    # row i: the controls held over the step that ended there (row 0: the first step's)
    held = controls[np.maximum(np.arange(len(angle)) - 1, 0), 0]
    check("actuator:drive", held, 2.0 * angle, 2.0 * rate)
    check("actuator:servo", 4.0 * (0.2 - angle) - 0.5 * rate, angle, rate)
    s_bar = A0.T @ (0.3, 0.0, 0.0)  # the cord's point on the arm, from its centre
    d = r + A @ s_bar - np.array([0.0, 0.0, 0.8])
    length = np.linalg.norm(d, axis=1)
    velocity = np.einsum("ti,ti->t", d / length[:, None],
                         rdot + np.einsum("tij,tj->ti", A, np.cross(omega, s_bar)))  # fmt: skip
    check("tendon:cord", -10.0 * (length - 0.9) - 0.1 * velocity, length, velocity)
    check("actuator:winch", np.full_like(angle, -0.4), 1.5 * length, 1.5 * velocity)
    t = np.asarray(sol.t)
    nan = np.full_like(t, np.nan)
    check("push", 2.0 * np.stack([np.ones_like(t), np.zeros_like(t), t], 1), nan, nan)


def test_point_force_names_are_unique(arm):
    b = mbd.ModelBuilder("twice")
    b.add_body("a", mass=1.0, inertia=[1.0] * 3)
    b.spring_damper("push", body_i="ground", point_i=(0, 0, 1), body_j="a", point_j=(0, 0, 0),
                    stiffness=1.0, rest_length=1.0)  # fmt: skip
    with pytest.raises(mbd.ModelError, match="'push': duplicate force name"):
        b.add_force(mbd.PointForce(body=0, s_bar=jnp.zeros(3), fn=push,
                                   params=jnp.array(1.0), name="push"))  # fmt: skip


# ----------------------------------------------------------------------------- MJCF against MuJoCo

MJCF = """
<mujoco model="connector outputs">
  <option timestep="0.002"><flag contact="disable"/></option>
  <worldbody>
    <site name="anchor" pos="0 0.1 0.2"/>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="3" springref="0.2"
             damping="0.4"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <site name="s1" pos="0.15 0 0.03"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.025" mass="0.5"/>
        <site name="s2" pos="0.2 0 0.02"/>
        <body name="slider" pos="0.3 0 0">
          <joint name="slide" type="slide" axis="1 0 0" stiffness="20" damping="0.5"/>
          <geom type="sphere" size="0.04" mass="0.2"/>
        </body>
      </body>
    </body>
    <body name="bob" pos="0 1 0">
      <joint name="swivel" type="ball" stiffness="2" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 -0.1" size="0.02" mass="0.3"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="cable" stiffness="40" damping="0.3" springlength="0.3">
      <site site="anchor"/><site site="s1"/><site site="s2"/>
    </spatial>
    <fixed name="coupling" stiffness="2" damping="0.05" springlength="0.1">
      <joint joint="shoulder" coef="1"/><joint joint="elbow" coef="-0.5"/>
    </fixed>
  </tendon>
  <actuator>
    <motor name="drive" joint="shoulder" gear="2"/>
    <position name="servo" joint="elbow" kp="5" kv="0.3"/>
    <motor name="winch" tendon="cable" gear="1.5"/>
    <velocity name="pusher" joint="slide" kv="2"/>
    <general name="filtered" joint="slide" dyntype="filter" dynprm="0.05" gainprm="3"
             actearly="true"/>
  </actuator>
</mujoco>
"""
U_MJCF = np.array([0.3, 0.4, -0.5, 0.2, 0.7])
MJCF_FORMULATIONS = ["joint", pytest.param("rA", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def mjcf_arm(tmp_path_factory):
    path = tmp_path_factory.mktemp("mjcf") / "outputs.xml"
    path.write_text(MJCF)
    m = mujoco.MjModel.from_xml_string(MJCF)
    return mbd.load_model(path), m


def names(m, kind, count):
    return [mujoco.mj_id2name(m, kind, k) for k in range(count)]


@pytest.mark.parametrize("formulation", MJCF_FORMULATIONS)
def test_mjcf_elements_match_mujoco(mjcf_arm, formulation):
    model, m = mjcf_arm
    # the absolute formulations leave the ball joint's spring and damper out, and say so;
    # they take the controls of an actuator with activation dynamics as the model's own
    absolute = formulation != "joint"
    with pytest.warns(mbd.JointSpaceOnlyWarning) if absolute else nullcontext():
        if absolute:
            sol = mbd.simulate(with_controls(model, U_MJCF), formulation=formulation,
                               t_end=0.02, h=0.002)  # fmt: skip
        else:
            sol = mbd.simulate(model, t_end=0.02, h=0.002, controls=np.tile(U_MJCF, (10, 1)))
    assert sol.formulation == formulation
    forces = sol.forces
    actuators = names(m, mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu)
    tendons = names(m, mujoco.mjtObj.mjOBJ_TENDON, m.ntendon)
    joints = names(m, mujoco.mjtObj.mjOBJ_JOINT, m.njnt)
    assert set(forces) == {f"actuator:{a}" for a in actuators} | {
        f"tendon:{t}" for t in tendons} | {f"joint:{j}" for j in joints}  # fmt: skip
    qpos, qvel = np.asarray(sol.qpos), np.asarray(sol.qvel)
    assert np.ptp(qpos[:, 0]) > 1e-3 and np.ptp(qpos[:, 2]) > 1e-4  # it moved
    d = mujoco.MjData(m)
    in_joints = not absolute  # the absolute formulations keep no ball or act
    # the absolute formulations' joint coordinates come from body poses (rA, slow-marked:
    # 2.9e-11 measured)
    tol = 1e-10 if absolute else ROUND_OFF
    for row in range(len(sol.t)):
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[row], qvel[row], U_MJCF
        if in_joints:
            d.act[:] = np.asarray(sol.act)[row]
        mujoco.mj_forward(m, d)
        for k, name in enumerate(actuators):
            out = forces[f"actuator:{name}"]
            want = (d.actuator_force[k], d.actuator_length[k], d.actuator_velocity[k])
            if name == "filtered" and not in_joints:
                assert np.isnan(float(out.force[row]))
                want = want[1:]
                out = out[1:]
            np.testing.assert_allclose([float(x[row]) for x in out], want, rtol=0, atol=tol)
        J = np.zeros((m.ntendon, m.nv))  # MuJoCo 4 keeps ten_J sparse
        mujoco.mju_sparse2dense(J, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
        tension = np.zeros(m.ntendon)
        for k, name in enumerate(tendons):
            out = forces[f"tendon:{name}"]
            np.testing.assert_allclose([float(out.length[row]), float(out.rate[row])],
                                       [d.ten_length[k], d.ten_velocity[k]], rtol=0,
                                       atol=tol)  # fmt: skip
            stretch = d.ten_length[k] - m.tendon_lengthspring[k, 0]
            np.testing.assert_allclose(
                float(out.force[row]),
                -m.tendon_stiffness[k] * stretch - m.tendon_damping[k] * d.ten_velocity[k],
                rtol=0, atol=3e-11 if absolute else 2e-14,
            )  # fmt: skip
            tension[k] = float(out.force[row])
        # the joints' own passive forces, plus the tendons' J^T F: MuJoCo's qfrc_spring +
        # qfrc_damper
        passive = J.T @ tension
        for k, name in enumerate(joints):
            out = forces[f"joint:{name}"]
            dofs = slice(m.jnt_dofadr[k], m.jnt_dofadr[k] + (3 if name == "swivel" else 1))
            force = np.atleast_1d(np.asarray(out.force[row]))
            if name == "swivel" and not in_joints:
                assert np.all(np.isnan(force))
                passive[dofs] = d.qfrc_spring[dofs] + d.qfrc_damper[dofs]
                continue
            passive[dofs] += force
            if name != "swivel":  # a hinge's or slide's deflection q - q_spring
                q = qpos[row, m.jnt_qposadr[k]] - m.qpos_spring[m.jnt_qposadr[k]]
                np.testing.assert_allclose(float(out.length[row]), q, rtol=0, atol=ROUND_OFF)
            np.testing.assert_allclose(np.atleast_1d(np.asarray(out.rate[row])), qvel[row, dofs],
                                       rtol=0, atol=ROUND_OFF)  # fmt: skip
        np.testing.assert_allclose(
            passive, d.qfrc_spring + d.qfrc_damper, rtol=0, atol=3e-12 if absolute else ROUND_OFF
        )
    assert np.ptp(np.asarray(forces["actuator:filtered"].force)) > 0.1 or not in_joints
