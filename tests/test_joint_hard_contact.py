"""Exact contact in joint coordinates (``formulation="joint", contact="hard"``): the
projected Moreau–Jean step with the tree's mass matrix, against closed forms, central
differences and the absolute formulation's step."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_hard_contact import H0, R_BALL, E, G, _apexes, _ball

import jaxmbd as mbd


def test_gradient_through_one_impact_in_joint_coordinates():
    """A ball dropped 2 cm while sliding at 0.5 m/s (mu = 0.1), 100 steps: the apex and the
    horizontal speed after the bounce, and their reverse-mode derivatives with respect to
    (e, mu), against the impact's closed forms and central differences of the run."""
    h0, mu, vx = 0.02, 0.1, 0.5
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=1.0, inertia=[0.4 * R_BALL**2] * 3, r=(0.0, 0.0, h0 + R_BALL),
               rdot=(vx, 0.0, 0.0), shapes=[mbd.geometry.sphere(R_BALL)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=mu, restitution=E)
    model = b.build()

    def outputs(p, model):
        m = eqx.tree_at(lambda m: (m.contacts.restitution, m.contacts.friction), model,
                        (p[:1], p[1:]))  # fmt: skip
        sol = mbd.simulate(m, formulation="joint", contact="hard", t_end=0.1, h=1e-3)
        z, vz = sol.r[-1, 0, 2], sol.rdot[-1, 0, 2]
        out = jnp.stack([z - R_BALL + vz**2 / (2 * G), sol.rdot[-1, 0, 0]])
        return out, out

    jacobian = mbd.jit(jax.jacrev(outputs, has_aux=True))
    p0 = jnp.array([E, mu])
    J, (apex, speed) = jacobian(p0, model)
    v_i = np.sqrt(2 * G * h0)
    assert float(apex) == pytest.approx(E**2 * h0, rel=1.3e-2)
    assert float(speed) == pytest.approx(vx - mu * (1 + E) * v_i, rel=9e-3)
    eps = 1e-4
    central = np.stack(
        [(jacobian(p0 + d, model)[1] - jacobian(p0 - d, model)[1]) / (2 * eps)
         for d in eps * np.eye(2)], axis=1,
    )  # fmt: skip
    np.testing.assert_allclose(J, central, rtol=0, atol=1e-10 * np.max(np.abs(J)))
    assert float(J[0, 0]) == pytest.approx(2 * E * h0, rel=1.3e-2)
    assert float(J[1, 0]) == pytest.approx(-mu * v_i, rel=6.5e-3)
    assert float(J[1, 1]) == pytest.approx(-(1 + E) * v_i, rel=3.2e-2)


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
