"""The implicit steps in joint coordinates (``gen_alpha``, ``backward_euler``), loops at
index 3: on the four-bar against a fine RK4 reference of the same model, their orders of
convergence, the loop closure, and a gradient through the Newton roots."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest
from test_joint_loops import four_bar
from tolerances import ROUND_OFF

import jaxmbd as mbd

T_END = 0.2


@pytest.fixture(scope="module")
def model_and_reference():
    model = four_bar(rate=3.0)
    ref = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=T_END, h=1e-4)
    return model, np.asarray(ref.r[-1])


@pytest.mark.parametrize(
    ("integrator", "bound"),
    [("gen_alpha", 2e-7), pytest.param("backward_euler", 2e-3, marks=pytest.mark.slow)],
)
def test_four_bar_closes_at_index_3_and_follows_the_reference(model_and_reference, integrator,
                                                              bound):  # fmt: skip
    """h = 1 ms: the loop holds to round-off without projection, and the final positions
    are within the method's error of the reference (measured 1.6e-5 m at 0.5 s for
    gen_alpha, second order; 4.6e-3 m for backward Euler, first order)."""
    model, ref = model_and_reference
    sol = mbd.simulate(model, formulation="joint", integrator=integrator, t_end=T_END, h=1e-3)
    assert sol.integrator == integrator and np.all(np.asarray(sol.status) == 0)
    assert float(np.max(np.asarray(sol.residual))) < ROUND_OFF
    err = np.abs(np.asarray(sol.r[-1]) - ref).max()
    assert 1e-9 < err < bound


@pytest.mark.slow  # four more programs
@pytest.mark.parametrize(("integrator", "order"), [("gen_alpha", 2), ("backward_euler", 1)])
def test_orders_of_convergence(model_and_reference, integrator, order):
    model, ref = model_and_reference
    errs = [np.abs(np.asarray(mbd.simulate(model, formulation="joint", integrator=integrator,
                                           t_end=T_END, h=h).r[-1]) - ref).max()
            for h in (2e-3, 1e-3)]  # fmt: skip
    assert np.log2(errs[0] / errs[1]) == pytest.approx(order, abs=0.15)


@pytest.mark.slow  # a reverse-mode program through 50 Newton roots: minutes to compile
def test_gen_alpha_gradient_through_the_roots(model_and_reference):
    """d(crank's final x)/d(coupler mass) by reverse mode through 50 gen_alpha steps (the
    implicit derivative of each Newton root) against central differences."""
    model, _ = model_and_reference

    def crank_x(mass):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass))
        sol = mbd.simulate(m, formulation="joint", integrator="gen_alpha", t_end=0.05, h=1e-3)
        return sol.r[-1, 0, 0]

    grad = float(jax.grad(crank_x)(1.0))
    eps = 1e-5
    central = (float(crank_x(1.0 + eps)) - float(crank_x(1.0 - eps))) / (2 * eps)
    assert abs(central) > 1e-6
    assert grad == pytest.approx(central, rel=1e-6)


@pytest.mark.slow  # two programs (joint and rA gen_alpha) of a spatial loop: ~90 CPU-s
def test_slider_crank_gen_alpha_agrees_with_ra():
    """Haug's spatial slider crank (ball and slide on the tree, the rod-slider joint and the
    crank's driver as loop rows) by gen_alpha at h = 1 ms in joint coordinates against rA's
    gen_alpha over 0.1 s. The crank is driven (no free dof), so the positions are
    kinematic: both methods hold the rows at index 3 and meet to the Newton tolerance
    (measured 3e-15 m); the velocities carry each method's O(h^2) error (measured 2.7e-6
    m/s apart)."""
    model = mbd.models.slider_crank()
    options = dict(integrator="gen_alpha", t_end=0.1, h=1e-3)
    joint = mbd.simulate(model, formulation="joint", **options)
    ra = mbd.simulate(model, formulation="rA", **options)
    assert np.all(np.asarray(joint.status) == 0)
    assert np.abs(np.asarray(joint.r) - np.asarray(ra.r)).max() < 2e-14
    assert np.abs(np.asarray(joint.rdot) - np.asarray(ra.rdot)).max() < 2e-5
    assert np.ptp(np.asarray(ra.r)[:, 2, 0]) > 1e-3  # the slider moved
