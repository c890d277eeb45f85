"""A loss evaluated again compiles nothing again, jitted or not (jaxmbd/compiled/jit.py).

An un-jitted ``jax.value_and_grad(loss)`` in an optimisation loop calls ``loss`` anew each
iteration, and a ``policy=lambda t, obs: -gain @ obs`` inside it is a new function each
time. jaxmbd's programs take such closures as code (static) plus closed-over values
(traced), so the second and later calls reuse the compiled programs: the compile counter
(``conftest.count_compilations``, jax.monitoring events) sees no trace and no compile.
The same for simulate(policy=lambda ...) runs: tests/test_actuators.py
(test_policy_closes_the_loop_each_step)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd


@mbd.jit
def _apply(x, f, g=None):
    return jnp.sin(f(x)) + (0.0 if g is None else g(x))


def _helper(w):
    return lambda x: w**2 * x


def _loss(w):
    """Closures built per call: a lambda over w and over another closure over w, and a
    default argument computed from w."""
    inner = _helper(w)
    return _apply(jnp.ones(3), lambda x: w * x + inner(x), g=lambda x, k=2.0 * w: k * x).sum()


def _dloss(w):  # d/dw of 3 sin(w + w^2) + 6 w
    return 3 * np.cos(w + w**2) * (1 + 2 * w) + 6


def test_closures_compile_once_under_value_and_grad_jitted_or_not():
    values = []
    for i in range(3):
        with count_compilations() as counts:
            v, g = jax.value_and_grad(_loss)(1.0 + 0.5 * i)
        values.append((float(v), float(g)))
        np.testing.assert_allclose(float(g), _dloss(1.0 + 0.5 * i), rtol=ROUND_OFF)
        if i:
            assert counts == {"trace": 0, "compile": 0}, counts
    assert len({v for v, _ in values}) == 3  # the closed-over values are used, not baked in
    jitted = jax.jit(jax.value_and_grad(_loss))
    jitted(1.0)
    with count_compilations() as counts:
        _, g = jitted(2.0)
    assert counts == {"trace": 0, "compile": 0}
    np.testing.assert_allclose(float(g), _dloss(2.0), rtol=ROUND_OFF)


def test_closures_that_cannot_be_split_still_run():
    """A recursive closure and one over an unhashable object stay plain functions (static,
    compiled per new function as before) and give the right values."""

    class Unhashable:
        __hash__ = None

        def __init__(self, scale):
            self.scale = scale

    def run(w):
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)

        box = Unhashable(3.0)
        return _apply(jnp.ones(2), lambda x: w * x * depth(2) + 0 * jnp.asarray(box.scale))

    # both: a few ulps (0 here), floors already below ROUND_OFF
    np.testing.assert_allclose(run(0.5), np.sin(1.0) * np.ones(2), rtol=1e-15)
    np.testing.assert_allclose(run(0.25), np.sin(0.5) * np.ones(2), rtol=1e-15)


@pytest.mark.parametrize("formulation", [None, "rA"])
def test_a_model_a_jitted_function_closes_over_runs_as_its_eager_run(formulation):
    """``jax.jit(lambda: simulate(model))`` with the model closed over (all its values
    concrete while the jit traces): the run with its checks (``throw=True``) is the eager
    run's. The slider crank is a closed loop (the joint formulation's rows chosen from its
    concrete start)."""
    options = {} if formulation is None else {"formulation": formulation}
    for model in (mbd.models.double_pendulum(), mbd.models.slider_crank()):
        eager = mbd.simulate(model, t_end=0.01, h=1e-3, **options)
        jitted = jax.jit(lambda m=model: mbd.simulate(m, t_end=0.01, h=1e-3, **options).r)()
        scale = max(1.0, float(np.abs(eager.r).max()))  # lengths of ~1 m
        np.testing.assert_allclose(jitted, eager.r, rtol=0, atol=ROUND_OFF * scale)


def _rail_and_rotor():
    """tests/test_actuators.py's block on a rail and rotor, each with a motor, kicked."""
    b = mbd.ModelBuilder("driven", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=2.0, inertia=[1.0, 1.0, 1.0], r=(0, 0, 0))
    b.add_body("rotor", mass=1.0, inertia=[0.1, 0.1, 0.05], r=(0, 1, 0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("spin", body_i="ground", body_j="rotor", point=(0, 1, 0), axis=(0, 0, 1))
    b.add_actuator("push", joint="rail", kind="motor", gear=1.0)
    b.add_actuator("turn", joint="spin", kind="motor", gear=2.0)
    model = b.build()
    return dataclasses.replace(model, rdot0=model.rdot0.at[0, 0].set(0.5),
                               omega0=model.omega0.at[1, 2].set(1.0))  # fmt: skip


GAIN = jnp.array([[30.0, 0.0, 4.0, 0.0], [0.0, 2.0, 0.0, 0.3]])


@pytest.mark.slow  # a gradient program through a closed loop: about 2 min on 2 cores
def test_unjitted_value_and_grad_of_a_policy_loss_compiles_once():
    """The reported case: an optimiser loop around an un-jitted jax.value_and_grad(loss)
    whose loss builds a policy closure. Before, each iteration compiled the whole gradient
    program again (43-47 s per iteration on the shared 2-core machine, 0.4 s after)."""
    model = _rail_and_rotor()

    def loss(gain):
        sol = mbd.simulate(model, t_end=0.1, h=1e-3, formulation="se3", integrator="rkmk",
                           policy=lambda t, obs: -gain @ obs)  # fmt: skip
        return jnp.sum(sol.r[-1] ** 2)

    gain = GAIN
    for i in range(3):
        with count_compilations() as counts:
            _, g = jax.value_and_grad(loss)(gain)
        if i:
            assert counts == {"trace": 0, "compile": 0}, counts
        gain = gain - 1e-2 * g
    g = jax.grad(loss)(gain)  # compiled above: no new program
    d = g / jnp.linalg.norm(g)  # the directional derivative along g is |g|
    e = 1e-4
    fd = (loss(gain + e * d) - loss(gain - e * d)) / (2 * e)
    assert float(fd) == pytest.approx(float(jnp.linalg.norm(g)), rel=1e-6)
