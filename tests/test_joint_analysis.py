"""Statics, linearisation and modes in joint coordinates (``formulation="joint"``): a loop
(the four-bar) against the absolute coordinates, and a ball joint's pendulum against its
closed-form frequency."""

import equinox as eqx
import jax
import numpy as np
import pytest
from test_joint_loops import four_bar

import jaxmbd as mbd
from jaxmbd.analysis.linearize import mode_motion, modes_of

G = 9.81


@pytest.fixture(scope="module")
def hanging_four_bar():
    model = four_bar(phi0=-1.2, rate=0.0)  # near the hanging pose, below the pivots
    joint = mbd.static_equilibrium(model, formulation="joint")
    ra = mbd.static_equilibrium(model, formulation="rA")
    return model, joint, ra


def test_four_bar_equilibrium_and_reactions_match_absolute(hanging_four_bar):
    model, joint, ra = hanging_four_bar
    assert joint.qpos is not None and int(joint.status) == 0
    np.testing.assert_allclose(np.asarray(joint.r), np.asarray(ra.r), atol=1e-9)
    assert np.asarray(joint.r)[:, 1].max() < 0  # the stable, hanging branch
    np.testing.assert_allclose(np.asarray(joint.A), np.asarray(ra.A), atol=1e-9)
    # the reactions of every joint, tree rows (Newton-Euler) and the closing rows alike
    f_joint = mbd.diagnostics.reaction_forces(model, joint.as_solution(), per="joint")
    f_ra = mbd.diagnostics.reaction_forces(model, ra.as_solution(), per="joint")
    assert f_joint.names == f_ra.names == ("O2", "P", "Q", "O4")
    for field in ("force_i", "force_j", "torque_i_global", "torque_j_global"):
        np.testing.assert_allclose(np.asarray(getattr(f_joint, field)),
                                   np.asarray(getattr(f_ra, field)), atol=1e-8)  # fmt: skip
    assert np.abs(np.asarray(f_ra.force_j)[0, 3]).max() > 1.0  # the loop carries load


def test_four_bar_modes_match_absolute(hanging_four_bar):
    model, joint, ra = hanging_four_bar
    lin = mbd.linearize(model, joint, formulation="joint")
    assert lin.dof == 1 and lin.coordinate_names == ()  # a loop: minimal z, no joint names
    with pytest.raises(ValueError, match="needs a tree without loops"):
        mbd.linearize(model, joint, formulation="joint", coordinates="joint")
    m_joint, m_ra = modes_of(lin), mbd.modes(model, ra, formulation="rA")
    np.testing.assert_allclose(m_joint.frequencies, m_ra.frequencies, rtol=1e-8)
    assert m_joint.frequencies[0] > 0.1
    np.testing.assert_allclose(np.abs(m_joint.shapes), np.abs(m_ra.shapes), atol=1e-8)
    motion = mode_motion(model, m_joint, 0, amplitude=0.2, cycles=1)
    assert np.ptp(np.asarray(motion.r)[:, 2, 0]) > 1e-3  # the rocker moves with the crank
    assert np.max(np.abs(np.asarray(motion.r)[:, 0])) < 1.0


@pytest.mark.slow  # the implicit gradient's program: about a minute to compile
def test_four_bar_equilibrium_gradient_against_central_differences(hanging_four_bar):
    model, _, _ = hanging_four_bar

    def rocker_x(g_x):  # gravity tilted in the plane of the mechanism
        m = eqx.tree_at(lambda m: m.gravity, model, model.gravity.at[0].set(g_x))
        return mbd.static_equilibrium(m, formulation="joint").r[2, 0]

    g = float(jax.grad(rocker_x)(0.5))
    eps = 1e-5
    fd = (float(rocker_x(0.5 + eps)) - float(rocker_x(0.5 - eps))) / (2 * eps)
    assert abs(fd) > 1e-4  # the tilt moves the rocker
    assert abs(g - fd) < 1e-7 * max(1.0, abs(fd))


def _ball_pendulum(d=0.4, mass=2.0, inertia=(0.05, 0.03, 0.04)):
    b = mbd.ModelBuilder("ball pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("bob", mass=mass, inertia=inertia, r=(0.0, 0.0, -d))
    b.spherical("ball", body_i="ground", body_j="bob", point=(0.0, 0.0, 0.0))
    return b.build()


def test_ball_joint_pendulum_frequencies_closed_form():
    """A body hanging from a ball joint: two swinging modes at
    omega^2 = m g d / (I + m d^2) about each horizontal principal axis, the spin about the
    vertical neutral (omega = 0)."""
    d, mass, inertia = 0.4, 2.0, (0.05, 0.03, 0.04)
    model = _ball_pendulum(d, mass, inertia)
    eq = mbd.static_equilibrium(model, formulation="joint")
    lin = mbd.linearize(model, eq, formulation="joint", coordinates="joint")
    assert lin.coordinate_names == ("ball.rx", "ball.ry", "ball.rz")
    freq = np.sort(modes_of(lin).frequencies)
    expected = [np.sqrt(mass * G * d / (i + mass * d**2)) / (2 * np.pi) for i in inertia[:2]]
    np.testing.assert_allclose(freq[-2:], np.sort(expected), rtol=1e-10)
    assert freq[0] < 1e-8
