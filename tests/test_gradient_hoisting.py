"""A gradient's time loops stay out of XLA's small-while-loop hoisting, simulate's do not.

``jaxmbd._xla_flags.unhoisted_when_differentiated`` passes a time step's carry through a
custom call only in differentiated programs (compile time: a hoisted loop is one LLVM
function). Checked on the compiled HLO of a toy scan (cheap) and on the jaxpr of a real
simulate gradient (tracing only); values must be unchanged to the bit."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core

import jaxmbd as mbd
from jaxmbd import _xla_flags
from jaxmbd._xla_flags import hoisted_sizes, loop_hoisted, unhoisted_when_differentiated


def _toy(p, guard=True):
    def step(carry, k):
        carry = unhoisted_when_differentiated(carry) if guard else carry
        x, v = carry
        v = v - 0.01 * jnp.sin(x) * p * k
        return (x + 0.01 * v, v), x

    return jnp.sum(jax.lax.scan(step, (jnp.ones(3), jnp.zeros(3)), jnp.arange(1.0, 21.0))[1] ** 2)


def _cpu_only():
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU backend's")


def test_forward_loop_hoisted_gradient_loops_not():
    _cpu_only()
    forward = jax.jit(_toy).lower(0.7).compile().as_text()
    assert loop_hoisted(forward, 20)
    assert len(hoisted_sizes(forward)) == 1 and hoisted_sizes(forward)[0] > 10
    grad = jax.jit(jax.value_and_grad(_toy)).lower(0.7).compile().as_text()
    assert not loop_hoisted(grad, 20) and hoisted_sizes(grad) == []
    plain = jax.jit(jax.value_and_grad(lambda p: _toy(p, guard=False))).lower(0.7).compile()
    assert loop_hoisted(plain.as_text(), 20)  # the guard is what keeps them out
    value, g = jax.jit(jax.value_and_grad(_toy))(0.7)
    value0, g0 = plain(0.7)
    assert value == value0 and g == g0  # an exact identity: same bits


def test_opt_out_and_higher_order(monkeypatch):
    _cpu_only()
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "1")
    grad = jax.jit(jax.value_and_grad(_toy)).lower(0.7).compile().as_text()
    assert loop_hoisted(grad, 20)
    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS)
    # second order and forward mode go through the rule too (exact identity at every order)
    h = jax.grad(jax.grad(_toy))(0.7)
    h0 = jax.grad(jax.grad(lambda p: _toy(p, guard=False)))(0.7)
    np.testing.assert_allclose(h, h0, rtol=1e-14)
    assert jax.jacfwd(_toy)(0.7) == jax.jacfwd(lambda p: _toy(p, guard=False))(0.7)


def test_simulate_gradient_has_the_guard_and_forward_not():
    """simulate's time step carries the guard (rkmk's stage loop does not: see
    munthe_kaas.py): a 1x1 triangular solve in the gradient's forward and transposed
    loops (counted in the jaxpr: tracing only), none in the forward program."""
    _cpu_only()
    model = mbd.models.single_pendulum()

    def loss(scale):
        moved = eqx.tree_at(lambda m: m.mass, model, model.mass * scale)
        sol = mbd.simulate(moved, t_end=3e-3, h=1e-3, integrator="rkmk")
        return jnp.sum(sol.r[-1] ** 2)

    def guards(jaxpr):
        found = []  # the guard's 1x1 triangular solves, by transpose_a
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "triangular_solve" and eqn.invars[0].aval.shape == (1, 1):
                found.append(eqn.params["transpose_a"])
            for sub in jax_core.jaxprs_in_params(eqn.params):
                found += guards(sub)
        return found

    assert guards(jax.make_jaxpr(loss)(1.0).jaxpr) == []
    # the time step: in the forward and the transposed scan
    assert sorted(guards(jax.make_jaxpr(jax.grad(loss))(1.0).jaxpr)) == [False, True]
