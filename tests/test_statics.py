"""Static equilibrium (jaxmbd/analysis/statics.py) against closed forms: a pendulum held by a
torsion spring and a block hung on a linear spring, a two-bar truss (a closed loop with
redundant rows) under a load against the hand solution, d(equilibrium)/d(stiffness)
against central differences, load stepping, and the failure report."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

M_ROD, L_ROD, K_HINGE = 1.0, 0.5, 8.0  # the pendulum: mass, centre of mass, N m/rad
M_BLOCK, K_SPRING, REST = 2.0, 150.0, 0.3  # the hung block: mass, N/m, rest length
G = 9.81


def _springs(k_hinge=K_HINGE):
    """A rod on a hinge with a torsion spring, drawn horizontal (relaxed there), and a
    block on a vertical guide hung from the ground by a linear spring."""
    b = mbd.ModelBuilder("springs")
    b.add_body("rod", mass=M_ROD, inertia=[0.02, 0.02, 0.001], r=(L_ROD, 0, 0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               stiffness=k_hinge)  # fmt: skip
    b.add_body("block", mass=M_BLOCK, inertia=[0.01] * 3, r=(2.0, 0, -REST))
    b.translational("guide", body_i="ground", body_j="block", point=(2.0, 0, -REST),
                    axis=(0, 0, 1))  # fmt: skip
    b.spring_damper("spring", body_i="ground", point_i=(2.0, 0, 0), body_j="block",
                    point_j=(2.0, 0, -REST), stiffness=K_SPRING, rest_length=REST)  # fmt: skip
    return b.build()


def _drop_angle(k):
    """The root of k phi = m g l cos(phi) in (0, pi/2): the rod's angle below the
    horizontal."""
    from scipy.optimize import brentq

    return brentq(lambda phi: k * phi - M_ROD * G * L_ROD * math.cos(phi), 0.0, math.pi / 2,
                  xtol=1e-15)  # fmt: skip


@pytest.fixture(scope="module")
def springs():
    model = _springs()
    return model, mbd.static_equilibrium(model)


def test_springs_rest_where_the_closed_forms_say(springs):
    model, eq = springs
    assert int(eq.status) == 0 and eq.result == mbd.RESULTS.successful
    rod, block = np.asarray(eq.r)
    assert math.atan2(-rod[2], rod[0]) == pytest.approx(_drop_angle(K_HINGE), abs=1e-13)
    assert block[2] == pytest.approx(-(REST + M_BLOCK * G / K_SPRING), abs=ROUND_OFF)
    # at rest there: a run from the equilibrium does not move
    sol = mbd.simulate(eq.with_model(model), t_end=0.05, h=1e-2)
    np.testing.assert_allclose(sol.r[-1], eq.r, rtol=0, atol=ROUND_OFF * np.abs(eq.r).max())


def test_equilibrium_gradient_matches_central_differences(springs):
    """d(drop angle)/d(k) by the implicit function theorem, against central differences
    and the closed form -phi / (k + m g l sin phi)."""
    model, _ = springs
    import equinox as eqx

    index = next(k for k, f in enumerate(model.forces)
                 if isinstance(f, mbd.joint_dynamics.JointDynamics))  # fmt: skip

    def angle(k):
        m = eqx.tree_at(lambda m: m.forces[index].stiffness, model, jax.numpy.atleast_1d(k))
        rod = mbd.static_equilibrium(m).r[0]
        return jax.numpy.arctan2(-rod[2], rod[0])

    g = jax.grad(angle)(K_HINGE)
    e = 1e-4
    fd = (angle(K_HINGE + e) - angle(K_HINGE - e)) / (2 * e)
    phi = _drop_angle(K_HINGE)
    assert float(g) == pytest.approx(float(fd), rel=3e-10, abs=0)
    assert float(g) == pytest.approx(-phi / (K_HINGE + M_ROD * G * L_ROD * math.sin(phi)),
                                     rel=2e-13, abs=0)  # fmt: skip


def test_two_bar_truss_reactions_against_the_hand_solution():
    """Two bars pinned to the ground at (-1, 0, 0) and (1, 0, 0), pinned to each other at
    the apex (0, 0, 1), loaded there by P = 100 N downwards (no gravity): each bar carries
    P / (2 sin 45 deg) in compression, so the ground pushes bar 1 at A with (50, 0, 50) N.
    The planar loop's redundant rows are dropped (one warning) and the rest give it."""
    b = mbd.ModelBuilder("truss", gravity=(0.0, 0.0, 0.0))
    b.add_body("bar1", mass=1.0, inertia=[0.1, 0.1, 0.1], r=(-0.5, 0, 0.5))
    b.add_body("bar2", mass=1.0, inertia=[0.1, 0.1, 0.1], r=(0.5, 0, 0.5))
    b.revolute("A", body_i="ground", body_j="bar1", point=(-1, 0, 0), axis=(0, 1, 0))
    b.revolute("C", body_i="ground", body_j="bar2", point=(1, 0, 0), axis=(0, 1, 0))
    b.revolute("B", body_i="bar1", body_j="bar2", point=(0, 0, 1), axis=(0, 1, 0))
    down = jax.numpy.array([0.0, 0.0, -100.0])
    load = mbd.PointForce(body=0, s_bar=jax.numpy.array([0.5, 0.0, 0.5]),
                          fn=lambda t, p: p, params=down)  # fmt: skip
    b.add_force(load)
    model = b.build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eq = mbd.static_equilibrium(model, formulation="rA")
    assert any(issubclass(w.category, mbd.RedundancyWarning) for w in caught)
    reactions = mbd.diagnostics.reaction_forces(model, eq.as_solution(), per="joint")
    at_a = np.asarray(reactions.force_j[0, reactions.names.index("A")])
    np.testing.assert_allclose(at_a, [50.0, 0.0, 50.0], rtol=0, atol=ROUND_OFF * 100.0)  # P
    at_c = np.asarray(reactions.force_j[0, reactions.names.index("C")])
    np.testing.assert_allclose(at_c, [-50.0, 0.0, 50.0], rtol=0, atol=ROUND_OFF * 100.0)
    # 0 DOF: the pose is given
    np.testing.assert_allclose(eq.r, model.r0, rtol=0, atol=ROUND_OFF * np.abs(model.r0).max())


def test_load_stepping_and_the_failure_report():
    """A soft hinge spring (k = 0.3 N m/rad) under the rod's weight: the rod swings far
    below the horizontal (phi = 1.48 rad); load stepping reaches the closed form from the
    drawn pose, and an iteration limit that cannot be met is reported with its stage."""
    model = _springs(k_hinge=0.3)
    eq = mbd.static_equilibrium(model, load_steps=8)
    rod = np.asarray(eq.r[0])
    assert math.atan2(-rod[2], rod[0]) == pytest.approx(_drop_angle(0.3), abs=ROUND_OFF)
    assert _drop_angle(0.3) > 1.4
    with pytest.raises(mbd.SolverError, match=r"static_equilibrium of model 'springs' failed"
                                              r" at load stage 1 of 8"):  # fmt: skip
        mbd.static_equilibrium(model, load_steps=8, max_iter=1)
    quiet = mbd.static_equilibrium(model, load_steps=8, max_iter=1, throw=False)
    assert int(quiet.status) != 0 and int(quiet.stage) == 0
    with pytest.raises(ValueError, match="load_steps must be a positive integer"):
        mbd.static_equilibrium(model, load_steps=0)


def test_joint_frame_reactions_of_a_rod_on_its_hinge_axis():
    """A rod whose centre of mass lies 0.4 m along its hinge's axis (y) at rest: the hinge
    carries the weight m g up and the moment m g L about global x, nothing about its axis.
    At the joint, in the joint's frame (axis first): force (0, a, b) with a, b the weight's
    components on the frame's other two axes, torque (0, ...) with norm m g L; at the
    centre of mass the torque is zero."""
    mass, arm = 1.5, 0.4
    b = mbd.ModelBuilder("cantilever")
    b.add_body("rod", mass=mass, inertia=[0.02, 0.01, 0.02], r=(0, arm, 0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    model = b.build()
    sol = mbd.static_equilibrium(model).as_solution()
    at_com = mbd.diagnostics.reaction_forces(model, sol, per="joint")
    force, moment = ROUND_OFF * mass * G, ROUND_OFF * mass * G * arm  # round-off of each
    np.testing.assert_allclose(at_com.force_j[0, 0], [0, 0, mass * G], rtol=0, atol=force)
    np.testing.assert_allclose(at_com.torque_j_global[0, 0], 0.0, rtol=0, atol=moment)
    joint = mbd.diagnostics.reaction_forces(model, sol, per="joint", at="joint", frame="joint")
    np.testing.assert_allclose(joint.torque_j_global[0, 0], [mass * G * arm, 0, 0], rtol=0,
                               atol=moment)  # fmt: skip
    E = np.asarray(model.joints[0].frame_j)[:, [2, 0, 1]]  # axis first
    np.testing.assert_allclose(joint.force_j[0, 0], E.T @ [0, 0, mass * G], rtol=0, atol=force)
    np.testing.assert_allclose(joint.torque_j[0, 0], E.T @ [mass * G * arm, 0, 0], rtol=0,
                               atol=moment)  # fmt: skip
    assert abs(float(joint.torque_j[0, 0, 0])) < moment  # none about the axis
    # the ground's side: equal and opposite, at the same point
    np.testing.assert_allclose(joint.torque_i_global[0, 0], [-mass * G * arm, 0, 0], rtol=0,
                               atol=moment)  # fmt: skip
    with pytest.raises(ValueError, match="at='joint' needs per='joint'"):
        mbd.diagnostics.reaction_forces(model, sol, at="joint")
