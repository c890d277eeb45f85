"""A gradient's loops are linearised once each (jaxmbd.integrators._tangents.with_tangents).

JAX linearises a scan by a fixed point over which carries have non-zero tangents, the
whole body again each time one turns non-zero. The state enters simulate's time scan (and
rkmk's stage scan) with its tangents present, so each body is linearised once: the
dm_control cart-pole's gradient with respect to its controls linearised rkmk's stage body
six times and the time body twice before (tracing time; benchmarks/results/
bench_compile.md, section 7). Tracing only, nothing is compiled here."""

import collections
import importlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.integrators._tangents import with_tangents


def test_with_tangents_changes_no_bit_and_passes_no_derivative():
    x = jnp.array([0.0, -0.0, 1.5, -2.0, jnp.inf, -jnp.inf, jnp.nan])
    for witness in (jnp.array([3.0]), jnp.array([jnp.nan]), jnp.array([-jnp.inf, 1.0])):
        out, status = with_tangents((x, jnp.array(3)), (witness,))
        assert np.array_equal(np.signbit(out), np.signbit(x))  # -0.0 stays -0.0
        np.testing.assert_array_equal(out, x)  # NaN where NaN, inf where inf
        assert status.dtype == jnp.int32 or status.dtype == jnp.int64  # integers untouched

    def f(x, w):
        return jnp.sum(with_tangents(x, w) ** 2)

    x = jnp.array([1.0, -2.0, 0.5])
    gx, gw = jax.grad(f, argnums=(0, 1))(x, jnp.array([4.0, 5.0]))
    np.testing.assert_array_equal(gx, 2 * x)
    np.testing.assert_array_equal(gw, 0.0)  # exactly zero, not round-off
    # forward mode: the witness's tangent adds nothing to the value's
    _, t = jax.jvp(lambda w: with_tangents(x, w), (jnp.array([4.0]),), (jnp.array([1.0]),))
    np.testing.assert_array_equal(t, 0.0)


def _linearised_bodies(fun, *args):
    """How often JAX linearised each loop body (jaxprs of more than 30 equations) while
    tracing ``jax.grad(fun)``: by the body's identity."""
    from jax._src.interpreters import ad
    from jax._src.lax.control_flow import loops

    if not hasattr(ad, "linearize_jaxpr") or getattr(loops, "ad", None) is not ad:
        pytest.skip("this jax linearises scans another way (jax._src internals moved)")
    original = ad.linearize_jaxpr
    calls = collections.Counter()

    def counting(jaxpr, nonzeros, *rest, **kwargs):
        if len(jaxpr.jaxpr.eqns) > 30:
            calls[id(jaxpr.jaxpr)] += 1
        return original(jaxpr, nonzeros, *rest, **kwargs)

    ad.linearize_jaxpr = counting
    try:
        jax.make_jaxpr(jax.grad(fun))(*args)
    finally:
        ad.linearize_jaxpr = original
    return calls


def test_cartpole_gradient_linearises_each_loop_body_once():
    path = Path(importlib.import_module("dm_control").__file__).parent / "suite" / "cartpole.xml"
    model = mbd.mjcf.load_robot(path)

    def loss(u):
        sol = mbd.simulate(model, formulation="rA", t_end=0.03, h=0.01, controls=u,
                           integrator="rkmk")  # fmt: skip
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    calls = _linearised_bodies(loss, jnp.full((3, model.nu), 0.3))
    assert calls, "no loop body was linearised: the probe no longer sees JAX's scans"
    # the time body and the stage body (and the pjit bodies around them) once each
    assert max(calls.values()) == 1, sorted(calls.values())
