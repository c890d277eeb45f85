"""Actuators and control inputs (jaxmbd/actuators.py, simulate(controls=...)), against the
closed forms of a driven slider and rotor: a motor's constant force, a position servo's
second-order response, a velocity servo's first-order one, the clamps; gradients with
respect to controls and gains against central differences."""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd

M, I_ROTOR = 2.0, 0.05  # slider mass (kg), rotor inertia about its axis (kg m^2)
H, T_END = 1e-3, 0.5


def _slider(**actuator):
    """A block on a frictionless rail along x (no gravity) and a rotor spinning about z,
    each with one actuator."""
    b = mbd.ModelBuilder("driven", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=M, inertia=[1.0, 1.0, 1.0], r=(0, 0, 0))
    b.add_body("rotor", mass=1.0, inertia=[0.1, 0.1, I_ROTOR], r=(0, 1, 0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("spin", body_i="ground", body_j="rotor", point=(0, 1, 0), axis=(0, 0, 1))
    b.add_actuator("push", joint="rail", **actuator)
    b.add_actuator("turn", joint="spin", kind="motor", gear=2.0)
    return b.build()


@pytest.fixture(scope="module")
def position_servo():
    return _slider(kind="position", kp=50.0, kv=4.0, ctrl_range=(-1.0, 1.0))


def test_position_servo_follows_the_second_order_response(position_servo):
    """m x'' = kp (u - x) - kv x': under-damped step response to u = 0.3, and the rotor's
    motor turns at theta = 1/2 (gear u / I) t^2."""
    model = position_servo
    assert model.nu == 2 and model.actuators.actuator_names == ("push", "turn")
    u = jnp.array([0.3, 0.01])
    sol = mbd.simulate(model, t_end=T_END, h=H, controls=u, integrator="gen_alpha")
    t = np.asarray(sol.t)
    wn, zeta = math.sqrt(50.0 / M), 4.0 / (2 * math.sqrt(50.0 * M))
    wd = wn * math.sqrt(1 - zeta**2)
    x = 0.3 * (1 - np.exp(-zeta * wn * t) * (np.cos(wd * t) + zeta * wn / wd * np.sin(wd * t)))
    np.testing.assert_allclose(sol.joints["rail"].q, x, atol=2e-5)
    theta = 0.5 * 2.0 * 0.01 / I_ROTOR * t**2
    np.testing.assert_allclose(sol.joints["spin"].q, theta, rtol=0, atol=ROUND_OFF * theta.max())


def test_control_and_force_clamps():
    """A motor with u = 5 clamped to ctrl_range (-1, 1) and then to force_range (-0.5, 0.5):
    x = 1/2 (F / m) t^2 with F = gear clip(clip(u)) = 3 * 0.5 (the force clamp is on the
    actuator force, before the gear, as MuJoCo's)."""
    model = _slider(kind="motor", gear=3.0, ctrl_range=(-1.0, 1.0), force_range=(-0.5, 0.5))
    sol = mbd.simulate(model, t_end=0.2, h=H, controls=jnp.array([5.0, 0.0]))
    t = np.asarray(sol.t)
    x = 0.5 * (3.0 * 0.5 / M) * t**2
    np.testing.assert_allclose(sol.joints["rail"].q, x, rtol=0, atol=ROUND_OFF * x.max())
    # at rest with zero controls, no gravity and no other force: nothing to scale the Newton
    # tests by (they read 0 / 0 as non-finite before), and nothing moves
    rest = mbd.simulate(model, t_end=0.2, h=H, controls=jnp.array([0.0, 0.0]))
    assert np.all(np.asarray(rest.r) == np.asarray(model.r0)[None])


def test_velocity_servo_and_time_varying_controls():
    """m v' = kv (u - v) with u switching from 1 to -1 at t = 0.25 s (a function of t, held
    over each step): v = u (1 - e^{-kv t / m}) then decays towards -1 from there. The same
    controls as an (N, nu) array give the same run."""
    model = _slider(kind="velocity", kv=8.0)
    n = round(T_END / H)
    rows = np.zeros((n, 2))
    rows[:, 0] = np.where(np.arange(n) * H < 0.25 - 1e-12, 1.0, -1.0)
    sol = mbd.simulate(model, t_end=T_END, h=H, controls=jnp.asarray(rows),
                       integrator="backward_euler")  # fmt: skip

    def switch(t):
        return jnp.array([jnp.where(t < 0.25 - 1e-12, 1.0, -1.0), 0.0])

    same = mbd.simulate(model, t_end=T_END, h=H, integrator="backward_euler", controls=switch)
    np.testing.assert_allclose(
        same.joints["rail"].qdot, sol.joints["rail"].qdot, rtol=0, atol=ROUND_OFF
    )
    t = np.asarray(sol.t)
    rate = 8.0 / M
    v1 = 1 - np.exp(-rate * 0.25)
    v = np.where(t <= 0.25, 1 - np.exp(-rate * t), -1 + (v1 + 1) * np.exp(-rate * (t - 0.25)))
    # backward Euler's first-order error in the exponential, O(h rate) relative
    np.testing.assert_allclose(sol.joints["rail"].qdot, v, atol=5e-3)


def test_gradients_with_respect_to_controls_and_gains(position_servo):
    """d x(T) / d u and d x(T) / d kp against central differences (the servo's gain leaf
    is model.actuators.gain; its stiffness bias -kp moves with it)."""
    n = 100

    @jax.jit  # one program for the differences, one for the gradient
    def final(u_push, kp):
        model = eqx.tree_at(lambda m: m.actuators.gain, position_servo,
                            position_servo.actuators.gain.at[0].set(kp))  # fmt: skip
        model = eqx.tree_at(lambda m: m.actuators.bias, model,
                            model.actuators.bias.at[0, 1].set(-kp))  # fmt: skip
        u = jnp.stack([u_push, jnp.zeros(n)], axis=1)
        sol = mbd.simulate(model, t_end=n * H, h=H, controls=u, throw=False)
        return sol.r[-1, 0, 0]

    u0 = 0.2 + 0.1 * jnp.sin(jnp.arange(n) * 0.05)
    g_u, g_kp = jax.jit(jax.grad(final, argnums=(0, 1)))(u0, 50.0)
    e = 1e-5
    for k in (0, 77):
        du = jnp.zeros(n).at[k].set(e)
        fd = (final(u0 + du, 50.0) - final(u0 - du, 50.0)) / (2 * e)
        assert float(g_u[k]) == pytest.approx(float(fd), rel=3e-9)
    fd = (final(u0, 50.0 + e) - final(u0, 50.0 - e)) / (2 * e)
    assert float(g_kp) == pytest.approx(float(fd), rel=3e-9)


def test_bad_actuators_and_controls(position_servo):
    b = mbd.ModelBuilder("bad")
    b.add_body("a", mass=1.0, inertia=[1, 1, 1], r=(0, 0, 0))
    b.spherical("ball", body_i="ground", body_j="a", point=(0, 0, 0))
    with pytest.raises(mbd.ModelError, match="no joint 'nope'"):
        b.add_actuator("m", joint="nope", kind="motor")
    with pytest.raises(mbd.ModelError, match="'ball' is spherical"):
        b.add_actuator("m", joint="ball", kind="motor")
    b.revolute("hinge", body_i="a", body_j="ground", point=(0, 0, 0), axis=(0, 0, 1))
    with pytest.raises(mbd.ModelError, match="kind 'position' needs kp="):
        b.add_actuator("m", joint="hinge", kind="position")
    with pytest.raises(mbd.ModelError, match="kind"):
        b.add_actuator("m", joint="hinge", kind="servo")
    with pytest.raises(mbd.ModelError, match="kv: not an option of kind 'motor'"):
        b.add_actuator("m", joint="hinge", kind="motor", kv=1.0)
    with pytest.raises(mbd.ModelError, match="ctrl_range"):
        b.add_actuator("m", joint="hinge", kind="motor", ctrl_range=(1.0, -1.0))
    with pytest.raises(ValueError, match=r"expected \(10, 2\)"):
        mbd.simulate(position_servo, t_end=0.01, h=H, controls=jnp.zeros((9, 2)))
    with pytest.raises(ValueError, match="not finite at step 3, actuator 'turn'"):
        mbd.simulate(position_servo, t_end=0.01, h=H,
                     controls=jnp.zeros((10, 2)).at[3, 1].set(jnp.nan))  # fmt: skip
    plain = mbd.ModelBuilder("plain")
    plain.add_body("a", mass=1.0, inertia=[1, 1, 1], r=(0, 0, 0))
    with pytest.raises(ValueError, match="has no actuators"):
        mbd.simulate(plain.build(), t_end=0.01, h=H, controls=jnp.zeros((10, 1)))


class _Feedback(eqx.Module):
    """u = -gain @ observation (observation: rail, spin coordinates, then their rates)."""

    gain: jax.Array

    def __call__(self, t, observation):
        return -self.gain @ observation


def test_policy_closes_the_loop_each_step(position_servo):
    """A linear state feedback as a policy: the controls it produced (read back from the
    run's own joint states at each step's start) replayed open loop give the same run.
    (A policy module, _Feedback: tests/test_batch_control.py, tests/test_sensors.py and the
    slow gradient test below.)"""
    model = _slider(kind="motor", gear=1.0)
    gain = jnp.array([[30.0, 0.0, 4.0, 0.0], [0.0, 2.0, 0.0, 0.3]])
    # the model above starts at rest: give it a kick
    model = dataclasses.replace(model, rdot0=model.rdot0.at[0, 0].set(0.5),
                                omega0=model.omega0.at[1, 2].set(1.0))  # fmt: skip
    n = 100

    # the law as a new lambda per run: its closed-over gains are traced leaves
    # (jaxmbd/compiled/jit.py, tests/test_compile_once.py), so the second run compiles nothing
    def run(k):
        return mbd.simulate(model, t_end=n * H, h=H, policy=lambda t, o: -k @ o,
                            integrator="rkmk", formulation="se3")  # fmt: skip

    other = gain * 1.5  # (an eager op compiles: outside the count)
    sol = run(gain)
    with count_compilations() as counts:
        other_run = run(other)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert float(jnp.abs(other_run.r - sol.r).max()) > 1e-4  # its own gains, not baked in
    obs = np.concatenate(
        [np.stack([sol.joints[j].q for j in ("rail", "spin")], 1),
         np.stack([sol.joints[j].qdot for j in ("rail", "spin")], 1)], axis=1
    )  # fmt: skip
    replay = -obs[:-1] @ np.asarray(gain).T
    again = mbd.simulate(model, t_end=n * H, h=H, controls=jnp.asarray(replay),
                         integrator="rkmk", formulation="se3")  # fmt: skip
    np.testing.assert_allclose(again.r, sol.r, rtol=0, atol=ROUND_OFF)
    assert float(sol.joints["rail"].q[-1]) < 0.95 * 0.5 * n * H  # the feedback brakes
    with pytest.raises(ValueError, match=r"returned shape \(3,\), expected \(2,\)"):
        mbd.simulate(model, t_end=0.01, h=H, policy=lambda t, o: jnp.zeros(3))
    with pytest.raises(ValueError, match="excludes controls="):
        mbd.simulate(model, t_end=0.01, h=H, policy=_Feedback(gain), controls=jnp.zeros(2))


@pytest.mark.slow  # two compiles of a gradient through a closed loop (about a minute)
def test_policy_parameter_gradient():
    """d x(T) / d gain of a state-feedback policy matches central differences."""
    model = _slider(kind="motor", gear=1.0)
    model = dataclasses.replace(model, rdot0=model.rdot0.at[0, 0].set(0.5))
    gain = jnp.array([[30.0, 0.0, 4.0, 0.0], [0.0, 2.0, 0.0, 0.3]])
    n = 100

    @jax.jit
    def final(k):
        policy = _Feedback(gain.at[0, 0].set(k))
        run = mbd.simulate(model, t_end=n * H, h=H, policy=policy, throw=False)
        return run.r[-1, 0, 0]

    g = jax.jit(jax.grad(final))(30.0)
    e = 1e-4
    fd = (final(30.0 + e) - final(30.0 - e)) / (2 * e)
    assert float(g) == pytest.approx(float(fd), rel=1e-5)
