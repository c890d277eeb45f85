"""Joint damping, stiffness and friction loss (jaxmbd.forces.joint_dynamics): closed-form damped
oscillators and a friction stop, gradients against central differences, the builder's
checks, and MJCF's damping, stiffness and springref against MuJoCo itself."""

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
from scipy.integrate import cumulative_simpson
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces.joint_dynamics import FRICTION_VELOCITY, JointDynamics
from jaxmbd.forces.quaternion_joint_dynamics import QuaternionJointDynamics

# block on a slide: under-damped spring about a reference, started moving
M, C_SLIDE, K_SLIDE, REF_SLIDE, V0 = 2.0, 2.0, 50.0, 0.1, 0.5
# rotor on a revolute joint about its own axis: critically damped spring about 0.5 rad
J_ROTOR, K_ROTOR, REF_ROTOR = 0.1, 4.0, 0.5
C_ROTOR = 2.0 * math.sqrt(K_ROTOR * J_ROTOR)
# rotor spinning down under friction loss alone: Coulomb stops it at J W0 / F = 1 s
W0, F_LOSS = 2.0, 0.2
T_END, H = 1.2, 1e-3


def joint_dynamics(model) -> JointDynamics:
    (element,) = [f for f in model.forces if isinstance(f, JointDynamics)]
    return element


def oscillators() -> mbd.Model:
    """Three independent bodies without gravity, each on its own joint to the ground."""
    b = mbd.ModelBuilder("joint dynamics", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=M, inertia=[0.1, 0.1, 0.1], rdot=(V0, 0.0, 0.0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0),
                    damping=C_SLIDE, stiffness=K_SLIDE, spring_reference=REF_SLIDE)  # fmt: skip
    b.add_body("rotor", mass=1.0, inertia=[J_ROTOR, 0.3, 0.3], r=(0, 1, 0))
    b.revolute("spindle", body_i="ground", body_j="rotor", point=(0, 1, 0), axis=(1, 0, 0),
               damping=C_ROTOR, stiffness=K_ROTOR, spring_reference=REF_ROTOR)  # fmt: skip
    b.add_body("wheel", mass=1.0, inertia=[0.3, 0.3, J_ROTOR], r=(0, 2, 0), omega=(0, 0, W0))
    b.revolute("axle", body_i="ground", body_j="wheel", point=(0, 2, 0), axis=(0, 0, 1),
               friction_loss=F_LOSS)  # fmt: skip
    return b.build()


@functools.cache
def oscillator_run():
    """rA with the fourth-order Munthe-Kaas RK at h = 1e-3: its own error is far below the
    tolerances here (the friction stop's time constant J v_r / F = 5e-3 s is 5 steps)."""
    model = oscillators()
    return model, mbd.simulate(model, integrator="rkmk", t_end=T_END, h=H)


def under_damped(t, c, k):
    """x(t) of M x'' + c x' + k (x - REF_SLIDE) = 0, x(0) = 0, x'(0) = V0."""
    wn, zeta = math.sqrt(k / M), c / (2 * math.sqrt(k * M))
    wd = wn * math.sqrt(1 - zeta**2)
    a = 0.0 - REF_SLIDE
    b = (V0 + zeta * wn * a) / wd
    return REF_SLIDE + np.exp(-zeta * wn * t) * (a * np.cos(wd * t) + b * np.sin(wd * t))


def test_damped_oscillators_follow_the_closed_forms():
    """The slide (damping ratio 0.14) and the critically damped rotor, theta(t) = q_ref
    (1 - (1 + w_n t) exp(-w_n t)), to 1e-8; the total energy (with the springs' 1/2 k
    (q - q_ref)^2) falls by exactly the work of the dampers and the friction loss."""
    model, sol = oscillator_run()
    t = np.asarray(sol.t)
    x = np.asarray(sol.joints["rail"].q)
    np.testing.assert_allclose(x, under_damped(t, C_SLIDE, K_SLIDE), rtol=0, atol=8e-12)
    wn = math.sqrt(K_ROTOR / J_ROTOR)
    theta = REF_ROTOR * (1 - (1 + wn * t) * np.exp(-wn * t))
    np.testing.assert_allclose(np.asarray(sol.joints["spindle"].q), theta, rtol=0, atol=3e-11)
    # energy balance: E(0) - E(t) = integral of c qdot^2 + f qdot tanh(qdot / v_r)
    rates = {name: np.asarray(sol.joints[name].qdot) for name in ("rail", "spindle", "axle")}
    power = (C_SLIDE * rates["rail"] ** 2 + C_ROTOR * rates["spindle"] ** 2
             + F_LOSS * rates["axle"] * np.tanh(rates["axle"] / FRICTION_VELOCITY))  # fmt: skip
    dissipated = cumulative_simpson(power, dx=H, initial=0.0)
    energy = np.asarray(mbd.diagnostics.energy(model, sol).total)
    springs = 0.5 * K_SLIDE * REF_SLIDE**2 + 0.5 * K_ROTOR * REF_ROTOR**2
    assert energy[0] == pytest.approx(
        0.5 * M * V0**2 + 0.5 * J_ROTOR * W0**2 + springs, rel=ROUND_OFF
    )
    # Simpson's rule (its error, O(h^4), measured 1.6e-9 J of the 1.05 J dissipated)
    np.testing.assert_allclose(energy[0] - energy, dissipated, rtol=0, atol=1e-8)


def test_friction_loss_stops_a_spinning_rotor():
    """J w' = -f tanh(w / v_r) from w0: w(t) = v_r asinh(sinh(w0 / v_r) exp(-f t / (J v_r)))
    to 1e-7 rad/s, within asinh(1/2) v_r of Coulomb's max(0, w0 - f t / J) (the
    regularisation error stated in jaxmbd.forces.joint_dynamics; Coulomb stops it at 1 s), and
    below 1e-3 v_r ten time constants J v_r / f after Coulomb's stop."""
    _, sol = oscillator_run()
    t = np.asarray(sol.t)
    w = np.asarray(sol.joints["axle"].qdot)
    v = FRICTION_VELOCITY
    x0 = W0 / v
    log_sinh = x0 + math.log1p(-math.exp(-2 * x0)) - math.log(2) - F_LOSS * t / (J_ROTOR * v)
    np.testing.assert_allclose(w, v * np.arcsinh(np.exp(log_sinh)), rtol=0, atol=1e-7)
    coulomb = np.maximum(0.0, W0 - F_LOSS * t / J_ROTOR)
    error = np.abs(w - coulomb)
    assert error.max() <= math.asinh(0.5) * v + 1e-7
    assert error.max() > 0.9 * math.asinh(0.5) * v  # the bound is reached, near the stop
    stop = J_ROTOR * W0 / F_LOSS
    after = t >= stop + 10 * J_ROTOR * v / F_LOSS
    assert after.any()
    assert np.abs(w[after]).max() < 1e-4 * v


def test_rkmk_step_with_joint_forces_is_one_hoisted_loop():
    """A cart-pole's joint forces (damping and a limit on the slide, damping on the hinge,
    a motor on the slide: limits, joint dynamics and actuators, both joint kinds on a
    chain) add no dot or scatter to the step (their 3x3 dots and scatter-adds kept the
    MJCF cart-pole's rkmk step out of XLA's CPU small-loop hoisting, 8x slower): read from
    each element's jaxpr (the test process's XLA flags hoist either way), then rkmk's time
    loop compiled as one native loop, computing what LAPACK's unhoisted step does."""
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU compiler's")
    from jaxmbd.compiled.xla_flags import loop_hoisted
    from jaxmbd.forces import BodyState

    b = mbd.ModelBuilder("cart-pole")
    b.add_body("cart", mass=1.0, inertia=[0.1, 0.1, 0.1], rdot=(0.2, 0.0, 0.0))
    b.translational("slider", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0),
                    damping=5e-4, limits=(-1.8, 1.8))  # fmt: skip
    b.add_body("pole", mass=0.1, inertia=[0.01, 0.01, 0.001], r=(0.0, 0.0, 0.5))
    b.revolute("hinge", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0),
               damping=2e-6)  # fmt: skip
    b.add_actuator("push", joint="slider", kind="motor", gear=10.0, ctrl_range=(-1, 1))
    model = b.build()
    assert len(model.forces) == 3
    state = BodyState(model.r0, model.A0, model.rdot0, model.omega0)
    for element in model.forces:
        jaxpr = str(jax.make_jaxpr(lambda s, e=element: e(0.0, s))(state))
        assert "dot_general" not in jaxpr and "scatter" not in jaxpr, type(element).__name__
    runs = {}
    for solver in ("auto", "dense"):
        run = jax.jit(
            lambda m, s=solver: (
                mbd.simulate(
                    m,
                    formulation="rA",
                    integrator="rkmk",
                    t_end=20 * H,
                    h=H,
                    linear_solver=s,
                    controls=jnp.ones(1),
                ).r
            )
        )
        compiled = run.lower(model).compile()
        runs[solver] = (compiled.as_text(), compiled(model))
    assert loop_hoisted(runs["auto"][0], 20)
    np.testing.assert_allclose(runs["auto"][1], runs["dense"][1], rtol=0, atol=ROUND_OFF)
    assert runs["auto"][1][-1, 0, 0] > 0.2 * 20 * H  # pushed by the motor


def test_gradients_match_central_differences_and_the_closed_form():
    """d x(T) / d damping and d x(T) / d stiffness of the slide (gen_alpha, implicit
    gradients) against Richardson-extrapolated central differences of the same runs (1e-6)
    and against the closed form's derivatives (gen_alpha's own error, 1e-3)."""
    b = mbd.ModelBuilder("slide", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=M, inertia=[0.1, 0.1, 0.1], rdot=(V0, 0.0, 0.0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0),
                    damping=C_SLIDE, stiffness=K_SLIDE, spring_reference=REF_SLIDE)  # fmt: skip
    model = b.build()
    t_end = 0.3

    def final_slide(params):
        m = eqx.tree_at(
            lambda m: (joint_dynamics(m).damping, joint_dynamics(m).stiffness),
            model,
            (params[:1], params[1:]),
        )
        return mbd.simulate(m, t_end=t_end, h=H).joints["rail"].q[-1]

    params = jnp.asarray([C_SLIDE, K_SLIDE])
    value_and_grad = mbd.jit(jax.value_and_grad(final_slide))  # one program for both
    grad = np.asarray(value_and_grad(params)[1])
    for k, scale in enumerate((C_SLIDE, K_SLIDE)):
        step = np.zeros(2)
        step[k] = 1e-3 * scale

        def central(s, k=k):
            plus, minus = value_and_grad(params + s)[0], value_and_grad(params - s)[0]
            return float(plus - minus) / (2 * s[k])

        fd = (4 * central(step / 2) - central(step)) / 3
        assert grad[k] == pytest.approx(fd, rel=5e-11)
    eps = 1e-6
    exact = [
        (under_damped(t_end, C_SLIDE + eps, K_SLIDE) - under_damped(t_end, C_SLIDE - eps, K_SLIDE))
        / (2 * eps),
        (under_damped(t_end, C_SLIDE, K_SLIDE + eps) - under_damped(t_end, C_SLIDE, K_SLIDE - eps))
        / (2 * eps),
    ]
    np.testing.assert_allclose(grad, exact, rtol=3e-8)


def test_builder_options_are_checked():
    """Each option of revolute and translational is refused with the joint and the field
    named: negative, non-finite, non-numeric or non-scalar values, and a spring reference
    without a spring."""
    cases = [
        ({"damping": -1.0}, "joint 'j'.damping: expected a non-negative number"),
        ({"stiffness": float("nan")}, "joint 'j'.stiffness: non-finite"),
        ({"friction_loss": "0.1"}, "joint 'j'.friction_loss: expected a number"),
        ({"damping": [1.0, 2.0]}, "joint 'j'.damping: expected a non-negative number"),
        ({"spring_reference": 0.3}, "joint 'j': spring_reference needs stiffness > 0"),
        ({"stiffness": 1.0, "spring_reference": np.inf}, "joint 'j'.spring_reference: non-"),
        ({"stiffness": 1.0, "spring_reference": (0, 1)}, "joint 'j'.spring_reference: expe"),
    ]
    for kind in ("revolute", "translational"):
        for options, message in cases:
            b = mbd.ModelBuilder("bad")
            b.add_body("rod", mass=1.0, inertia=[1, 1, 1])
            with pytest.raises(mbd.ModelError, match=re.escape(message)):
                getattr(b, kind)(
                    "j", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 0, 1), **options
                )


def test_only_joints_with_dynamics_get_the_element():
    """All zero: no element (models without these options are unchanged); otherwise one
    element for the joints with a non-zero value, the spring relaxed where drawn unless a
    reference is given."""
    b = mbd.ModelBuilder("chain")
    for k in range(3):
        b.add_body(f"link{k}", mass=1.0, inertia=[1, 1, 1], r=(k, 0, 0))
    b.revolute("a", body_i="ground", body_j="link0", point=(0, 0, 0), axis=(0, 0, 1),
               damping=0.0, stiffness=0.0, friction_loss=0.0)  # fmt: skip
    assert not any(isinstance(f, JointDynamics) for f in b.build().forces)
    b.revolute("b", body_i="link0", body_j="link1", point=(1, 0, 0), axis=(0, 0, 1),
               stiffness=3.0)  # fmt: skip
    b.translational("c", body_i="link1", body_j="link2", point=(2, 0, 0), axis=(1, 0, 0),
                    friction_loss=0.5, stiffness=2.0, spring_reference=-0.25)  # fmt: skip
    element = joint_dynamics(b.build())
    assert element.names == ("b", "c")
    np.testing.assert_array_equal(element.damping, [0.0, 0.0])
    np.testing.assert_array_equal(element.stiffness, [3.0, 2.0])
    np.testing.assert_array_equal(element.spring_reference, [0.0, -0.25])
    np.testing.assert_array_equal(element.friction_loss, [0.0, 0.5])
    np.testing.assert_array_equal(element.friction_velocity, [FRICTION_VELOCITY] * 2)


DOUBLE_PENDULUM = """<mujoco><compiler angle="radian"/><option><flag contact="disable"/></option>
<worldbody>
  <body name="upper" pos="0 0 2"><joint name="shoulder" axis="0 1 0" damping="0.3"
      stiffness="4" springref="0.5" ref="0.2"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="1"/>
    <body name="lower" pos="0 0 -0.5"><joint name="elbow" axis="0 1 0" damping="0.1"
        stiffness="2" springref="-0.3"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 -0.3" size="0.03" mass="0.7"/></body></body>
</worldbody>
<keyframe><key qpos="0.9 0.4" qvel="1 -2"/></keyframe></mujoco>"""


def test_mjcf_damped_sprung_double_pendulum_matches_mujoco(tmp_path):
    """Hinge damping, stiffness and springref (qpos units, with a ref offset on the
    shoulder) read from MJCF without a warning; over 1 s from a keyframe, jaxmbd (rA,
    fourth-order rkmk at h = 1e-3) follows MuJoCo's RK4 at 1e-4 to 5e-10 rad (measured
    6.1e-11) in qpos, while the joints move by 0.58 rad."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "double_pendulum.xml"
    path.write_text(DOUBLE_PENDULUM)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    element = joint_dynamics(model)
    assert element.names == ("shoulder", "elbow")
    np.testing.assert_array_equal(element.damping, [0.3, 0.1])
    np.testing.assert_array_equal(element.stiffness, [4.0, 2.0])
    np.testing.assert_array_equal(element.spring_reference, [0.5, -0.3])
    sol = mbd.simulate(model, integrator="rkmk", t_end=1.0, h=1e-3)
    q = np.stack([np.asarray(sol.joints[n].q) for n in ("shoulder", "elbow")], axis=1)

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, 1e-4
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    qpos = []
    for k in range(10001):
        if k % 10 == 0:
            qpos.append(d.qpos.copy())
        mujoco.mj_step(m, d)
    qpos = np.array(qpos)
    assert np.abs(qpos - qpos[0]).max() > 0.5  # it moves
    np.testing.assert_allclose(q, qpos, rtol=0, atol=5e-10)


MAPPING = """<mujoco><worldbody>
  <body name="cart" pos="0 0 1"><joint name="slide" type="slide" axis="1 0 0"
      frictionloss="0.7" damping="2" stiffness="30" springref="0.05" ref="0.1"/>
    <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    <body name="pole" pos="0 0 0"><joint name="ball" type="ball" damping="0.2"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02" mass="0.2"/></body></body>
  <body name="gimbal" pos="2 0 1"><joint name="u1" axis="1 0 0" stiffness="3"/>
    <joint name="u2" axis="0 1 0" frictionloss="0.1"/>
    <geom type="sphere" size="0.1" mass="1"/></body>
</worldbody></mujoco>"""


def test_mjcf_maps_single_hinges_and_slides_and_names_the_rest(tmp_path):
    """A slide's frictionloss, damping, stiffness and springref (about a ref offset) are
    read; a ball joint's damping goes to the joint formulation's element of ball and free
    joints; the stiffness and friction loss of a universal joint's two hinges are kept for the joint
    formulation, and the load warning leaves them out (an absolute formulation's run names them);
    MuJoCo's damper, spring and frictionloss flags disabled: none of them."""
    pytest.importorskip("mujoco")
    path = tmp_path / "mapping.xml"
    path.write_text(MAPPING)
    with warnings.catch_warnings():
        # the joint formulation (these models' default) applies the universal joint's
        # hinges' and the ball's values: an absolute formulation's run names them
        # (JointSpaceOnlyWarning), not the load
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    (ball,) = [f for f in model.forces if isinstance(f, QuaternionJointDynamics)]
    assert ball.joints == ("ball",)
    np.testing.assert_array_equal(ball.damping, [0.2])
    element = joint_dynamics(model)
    assert element.names == ("slide", "u1", "u2")
    assert element.absolute_part().names == ("slide",)
    for leaf, value in (("damping", 2.0), ("stiffness", 30.0), ("spring_reference", 0.05),
                        ("friction_loss", 0.7)):  # fmt: skip
        np.testing.assert_array_equal(getattr(element.absolute_part(), leaf), [value])
    np.testing.assert_array_equal(element.stiffness, [30.0, 3.0, 0.0])
    np.testing.assert_array_equal(element.friction_loss, [0.7, 0.0, 0.1])
    # what MuJoCo's flags switch off is not applied, nor named
    flags = '<option><flag damper="disable" spring="disable" frictionloss="disable"/></option>'
    path.write_text(MAPPING.replace("<worldbody>", flags + "<worldbody>", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    assert not any(isinstance(f, JointDynamics | QuaternionJointDynamics) for f in model.forces)
