"""Exact contact in joint coordinates (``formulation="joint", contact="hard"``): the
projected Moreau–Jean step with the tree's mass matrix against the absolute formulation's
step (the gradient through an impact and the hard stop are tests/test_hard_contact.py's,
run in both), and a short drop in the default run: contact time, rebound and rest against
closed forms, and the gradient through the impact against central differences."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_hard_contact import H0, R_BALL, E, G, _apexes, _ball
from tolerances import ROUND_OFF

import jaxmbd as mbd

#: the short drop: gap G0 and downward speed V0 at t = 0, 40 steps of H (one impact)
G0, V0, H, STEPS = 0.01, 1.0, 1e-3, 40


def _two_drops():
    """Two balls, each over the plane at gap G0 falling at V0: the first with e = E, the
    second with e = 0 (it lands and stays)."""
    b = mbd.ModelBuilder("drops", gravity=(0.0, 0.0, -G))
    for k in range(2):
        b.add_body(f"ball{k}", mass=1.0, inertia=[0.4 * R_BALL**2] * 3,
                   r=(0.5 * k, 0.0, R_BALL + G0), rdot=(0.0, 0.0, -V0),
                   shapes=[mbd.geometry.sphere(R_BALL)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    for k, e in enumerate((E, 0.0)):
        b.add_contact(f"ball{k}", "ground", friction=0.5, restitution=e)
    return b.build()


@pytest.fixture(scope="module")
def drops():
    """One compiled program: the first ball's final vertical speed and its derivative with
    respect to its restitution e (reverse mode), with the run's heights, vertical speeds
    and normal forces; called at E and E +- 1e-4."""
    model = _two_drops()

    def final_speed(e):
        m = eqx.tree_at(lambda m: m.contacts.restitution, model, jnp.stack([e, 0.0 * e]))
        sol = mbd.simulate(m, formulation="joint", contact="hard", t_end=STEPS * H, h=H)
        run = (sol.r[:, :, 2] - R_BALL, sol.rdot[:, :, 2], sol.contact.normal_force,
               sol.status)  # fmt: skip
        return sol.rdot[-1, 0, 2], run

    program = mbd.jit(jax.value_and_grad(final_speed, has_aux=True))
    return {e: program(jnp.asarray(e)) for e in (E, E + 1e-4, E - 1e-4)}


def test_drop_rebounds_and_rests_as_the_closed_forms(drops):
    """Contact at t_c = (v_i - V0) / g with v_i = sqrt(V0^2 + 2 g G0); then the first ball
    rises at e v_i - g (t - t_c) (to the step's event timing, 2 g h: 1.8e-2 m/s measured
    against 2.0e-2), the second (e = 0) rests on the plane at zero gap and speed with its
    weight on the contact (round-off); neither ever penetrates."""
    (_, (height, vz, normal, status)), _ = drops[E]
    height, vz, normal = (np.asarray(x) for x in (height, vz, normal))
    assert np.all(np.asarray(status) == 0)
    v_i = np.sqrt(V0**2 + 2 * G * G0)
    t_c = (v_i - V0) / G
    t = H * np.arange(STEPS + 1)
    assert np.all(vz[t < t_c - H] < 0) and np.all(vz[t > t_c + 2 * H, 0] > 0)
    assert abs(vz[-1, 0] - (E * v_i - G * (t[-1] - t_c))) < 2 * G * H
    np.testing.assert_allclose([height[-1, 1], vz[-1, 1]], 0.0, rtol=0, atol=ROUND_OFF)
    assert normal[-1, 1] == pytest.approx(G, rel=ROUND_OFF, abs=0)
    assert height.min() > -ROUND_OFF  # measured 0: the scheme's gap constraint


def test_gradient_through_the_impact_equals_central_differences(drops):
    """d(final vertical speed)/de is the impact speed of the step (v_i up to the event
    timing, g h: 4.4e-3 measured) and equals the run's central difference (eps = 1e-4;
    1.1e-13 relative measured: the speed is linear in e)."""
    _, grad = drops[E]
    v_i = np.sqrt(V0**2 + 2 * G * G0)
    assert abs(float(grad) - v_i) < G * H
    central = (float(drops[E + 1e-4][0][0]) - float(drops[E - 1e-4][0][0])) / 2e-4
    assert float(grad) == pytest.approx(central, rel=1e-12)


@pytest.mark.slow  # two 1500-step programs
def test_bouncing_ball_equals_the_absolute_step():
    """For one free body the joint coordinates' step is the absolute one (the free joint's
    retraction is rA's): the bounces agree to round-off, and follow e^2 without
    penetrating."""
    model = _ball()
    joint = mbd.simulate(model, formulation="joint", contact="hard", t_end=1.5, h=1e-3)
    ra = mbd.simulate(model, formulation="rA", contact="hard", t_end=1.5, h=1e-3)
    assert joint.integrator == "moreau_jean" and np.all(np.asarray(joint.status) == 0)
    np.testing.assert_allclose(np.asarray(joint.r), np.asarray(ra.r), atol=1e-12)
    height = np.asarray(joint.r[:, 0, 2]) - R_BALL
    apexes = _apexes(height, np.asarray(joint.rdot[:, 0, 2]))
    np.testing.assert_allclose(apexes[0], E**2 * H0, rtol=2e-3)
    assert height.min() > -1e-10
    np.testing.assert_allclose(np.asarray(joint.contact.normal_force),
                               np.asarray(ra.contact.normal_force), atol=1e-6)  # fmt: skip


def test_joint_hard_contact_options_are_checked():
    model = _ball()
    with pytest.raises(ValueError, match="takes no options \\['rho_inf'\\]"):
        mbd.simulate(model, formulation="joint", contact="hard", rho_inf=0.5, t_end=0.01,
                     h=1e-3)  # fmt: skip
