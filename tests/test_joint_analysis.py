"""Statics, linearisation and modes in joint coordinates (``formulation="joint"``): a loop
(the four-bar) against its closed form (Freudenstein's position analysis and Lagrange's
equation in the crank angle) and against the absolute coordinates, and a ball joint's
pendulum against its closed-form frequency."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from test_joint_loops import A_, B_, C_, D_, four_bar
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.linearize import mode_motion, modes_of

G = 9.81


def _four_bar_centres(phi):
    """The closed-form positions of test_joint_loops' four-bar at crank angle ``phi``: the
    rods' centres (x, y) and angles (crank phi, coupler theta, rocker psi), the rocker's
    psi on the open branch of Freudenstein's equation (as ``_freudenstein`` there)."""
    k1, k2 = D_ / A_, D_ / C_
    k3 = (A_**2 - B_**2 + C_**2 + D_**2) / (2 * A_ * C_)
    a, b, c = jnp.cos(phi) - k1, jnp.sin(phi), k3 - k2 * jnp.cos(phi)
    psi = jnp.arctan2(b, a) + jnp.arccos(c / jnp.hypot(a, b))
    p = A_ * jnp.array([jnp.cos(phi), jnp.sin(phi)])
    o4 = jnp.array([D_, 0.0])
    q = o4 + C_ * jnp.array([jnp.cos(psi), jnp.sin(psi)])
    theta = jnp.arctan2(q[1] - p[1], q[0] - p[0])
    return jnp.stack([p / 2, (p + q) / 2, (q + o4) / 2]), jnp.stack([phi, theta, psi])


@functools.cache
def _four_bar_closed_form():
    """The hanging equilibrium's crank angle and centres and its frequency (Hz), from
    V(phi) = g sum_k m_k y_k(phi) (unit masses, rods of I_zz = L^2 / 12): V'(phi*) = 0
    and omega^2 = V''(phi*) / M(phi*), M = sum_k m_k |dc_k/dphi|^2 + I_k (dtheta_k/dphi)^2
    (Lagrange's equation linearised; derivatives by jax of the closed form)."""
    inertia = jnp.array([A_, B_, C_]) ** 2 / 12
    # compiled: brentq calls dV ~50 times, and op by op each primitive compiles on its own
    dV = jax.jit(jax.grad(lambda phi: G * jnp.sum(_four_bar_centres(phi)[0][:, 1])))
    phi = scipy.optimize.brentq(lambda x: float(dV(x)), -1.8, -1.4, xtol=1e-15)
    dc, dtheta = jax.jit(jax.jacfwd(_four_bar_centres))(phi)
    mass = jnp.sum(dc**2) + jnp.sum(inertia * dtheta**2)
    omega = np.sqrt(float(jax.grad(dV)(phi)) / float(mass))
    return phi, np.asarray(_four_bar_centres(phi)[0]), omega / (2 * np.pi)


@pytest.fixture(scope="module")
def hanging_four_bar():
    model = four_bar(phi0=-1.2, rate=0.0)  # near the hanging pose, below the pivots
    joint = mbd.static_equilibrium(model, formulation="joint")
    ra = mbd.static_equilibrium(model, formulation="rA")
    return model, joint, ra


def test_four_bar_equilibrium_and_reactions_match_the_closed_form_and_absolute(hanging_four_bar):
    """The equilibrium is the closed form's (centres to 6.7e-12 m measured), and rA's (poses
    to 6.7e-12 and 3.9e-11, reactions to 1.2e-10 N measured)."""
    model, joint, ra = hanging_four_bar
    assert joint.qpos is not None and int(joint.status) == 0
    _, centres, _ = _four_bar_closed_form()
    np.testing.assert_allclose(np.asarray(joint.r)[:, :2], centres, rtol=0, atol=5e-11)
    np.testing.assert_allclose(np.asarray(joint.r)[:, 2], 0.0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(joint.r), np.asarray(ra.r), rtol=0, atol=3e-11)
    assert np.asarray(joint.r)[:, 1].max() < 0  # the stable, hanging branch
    np.testing.assert_allclose(np.asarray(joint.A), np.asarray(ra.A), rtol=0, atol=2e-10)
    # the reactions of every joint, tree rows (Newton-Euler) and the closing rows alike
    f_joint = mbd.diagnostics.reaction_forces(model, joint.as_solution(), per="joint")
    f_ra = mbd.diagnostics.reaction_forces(model, ra.as_solution(), per="joint")
    assert f_joint.names == f_ra.names == ("O2", "P", "Q", "O4")
    for field in ("force_i", "force_j", "torque_i_global", "torque_j_global"):
        np.testing.assert_allclose(np.asarray(getattr(f_joint, field)),
                                   np.asarray(getattr(f_ra, field)),
                                   rtol=0, atol=5e-10)  # fmt: skip
    assert np.abs(np.asarray(f_ra.force_j)[0, 3]).max() > 1.0  # the loop carries load


def test_four_bar_modes_match_the_closed_form_and_absolute(hanging_four_bar):
    """One mode at the closed form's frequency (3.7e-12 relative measured), rA's frequency
    and shape (3.7e-12, 7.8e-12)."""
    model, joint, ra = hanging_four_bar
    lin = mbd.linearize(model, joint, formulation="joint")
    assert lin.dof == 1 and lin.coordinate_names == ()  # a loop: minimal z, no joint names
    with pytest.raises(ValueError, match="needs a tree without loops"):
        mbd.linearize(model, joint, formulation="joint", coordinates="joint")
    m_joint, m_ra = modes_of(lin), mbd.modes(model, ra, formulation="rA")
    np.testing.assert_allclose(m_joint.frequencies, [_four_bar_closed_form()[2]], rtol=3e-11)
    np.testing.assert_allclose(m_joint.frequencies, m_ra.frequencies, rtol=3e-11)
    np.testing.assert_allclose(np.abs(m_joint.shapes), np.abs(m_ra.shapes), atol=5e-11)
    motion = mode_motion(model, m_joint, 0, amplitude=0.2, cycles=1)
    assert np.ptp(np.asarray(motion.r)[:, 2, 0]) > 1e-3  # the rocker moves with the crank
    assert np.max(np.abs(np.asarray(motion.r)[:, 0])) < 1.0  # bounded: a sanity check


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
    np.testing.assert_allclose(freq[-2:], np.sort(expected), rtol=ROUND_OFF)
    assert freq[0] < ROUND_OFF
