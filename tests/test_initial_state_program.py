"""consistent_initial_state called by a user runs as one compiled program
(jaxmbd/analysis/initial_state.py):
op by op it compiled every primitive on its own (a fresh slider crank: 16 CPU-s, and 3 s for
every later call), now once per model structure and options, with t and tol traced."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.initial_state import _consistent_initial_state


def test_one_program_reused_for_new_values_and_equal_to_the_traced_start():
    model = mbd.models.double_pendulum()
    state, correction, info = mbd.consistent_initial_state(model)
    assert int(info.status) == mbd.newton.SUCCESS
    heavier = eqx.tree_at(lambda m: m.mass, model, model.mass * 1.5)  # new values only
    with count_compilations() as counts:
        mbd.consistent_initial_state(model, t=0.25, tol=1e-12)
        mbd.consistent_initial_state(heavier)
    assert counts == {"trace": 0, "compile": 0}, counts
    # the same numbers as the start traced inside simulate's program (op for op the same
    # computation; compiled apart, so equal to round-off)
    traced = jax.jit(
        lambda m: _consistent_initial_state(
            m, t=0.0, tol=1e-13, max_iter=30, redundant=False, linear_solver="auto"
        )
    )(model)
    for got, want in zip(state, traced[0], strict=True):
        scale = max(1.0, float(np.abs(want).max()))  # (the velocities are 0 at rest)
        np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * scale)


def test_gradient_matches_central_differences_and_bad_options_are_refused():
    """d(rod 2's initial vertical acceleration)/d(rod 2's mass): the compiled program is
    differentiable, and its derivative is the central difference of its own values."""
    model = mbd.models.double_pendulum()

    def acceleration(mass):
        heavier = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass))
        return mbd.consistent_initial_state(heavier)[0][4][1, 2]

    m2 = float(model.mass[1])
    grad = float(jax.grad(acceleration)(jnp.asarray(m2)))
    eps = 1e-4 * m2
    central = (float(acceleration(m2 + eps)) - float(acceleration(m2 - eps))) / (2 * eps)
    assert grad != 0.0
    np.testing.assert_allclose(grad, central, rtol=2e-8)
    try:
        mbd.consistent_initial_state(model, max_iter=0)
    except ValueError as error:
        assert "max_iter" in str(error)
    else:
        raise AssertionError("max_iter=0 was accepted")
