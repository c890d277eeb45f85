"""Linearisation and modes (jaxmbd/analysis/linearize.py) against closed forms: a compound
pendulum's frequency sqrt(m g d / I_O) and damping ratio, a fixed-fixed spring-mass
chain's eigenvalues and shapes, the double pendulum's two frequencies from its linearised
equations, and a cart-pole's A and B about the upright pose (the LQR model)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

G = 9.81
M_ROD, D_ROD, IC_ROD, C_HINGE = 2.0, 0.4, 0.05, 0.1  # compound pendulum
N_CHAIN, M_CHAIN, K_CHAIN, SPACING = 3, 0.5, 200.0, 0.4  # spring-mass chain


def _pendulum_and_chain(angle=None, rate=None):
    """A damped compound pendulum (hinge at the origin) and, apart from it, a chain of
    three blocks on rails along x joined to each other and to two walls by springs (no
    gravity along x): independent, so their modes are the union of each one's. ``angle``,
    ``rate``: the hinge's initial state."""
    b = mbd.ModelBuilder("pendulum and chain")
    b.add_body("rod", mass=M_ROD, inertia=[IC_ROD, IC_ROD, 0.01], r=(0, 0, -D_ROD))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               damping=C_HINGE)  # fmt: skip
    y = 2.0
    for k in range(N_CHAIN):
        name = f"block{k}"
        x = (k + 1) * SPACING
        b.add_body(name, mass=M_CHAIN, inertia=[0.01] * 3, r=(x, y, 0))
        b.translational(f"rail{k}", body_i="ground", body_j=name, point=(x, y, 0),
                        axis=(1, 0, 0))  # fmt: skip
        left = "ground" if k == 0 else f"block{k - 1}"
        b.spring_damper(f"spring{k}", body_i=left, point_i=(x - SPACING, y, 0), body_j=name,
                        point_j=(x, y, 0), stiffness=K_CHAIN, rest_length=SPACING)  # fmt: skip
    x = (N_CHAIN + 1) * SPACING
    b.spring_damper("wall", body_i=f"block{N_CHAIN - 1}", point_i=(x - SPACING, y, 0),
                    body_j="ground", point_j=(x, y, 0), stiffness=K_CHAIN,
                    rest_length=SPACING)  # fmt: skip
    if angle is not None:
        b.set_joint_state("hinge", q=angle, qdot=rate)
    return b.build()


@pytest.fixture(scope="module")
def pendulum_and_chain():
    model = _pendulum_and_chain()
    return model, mbd.modes(model)


def test_compound_pendulum_frequency_and_damping(pendulum_and_chain):
    _, modes = pendulum_and_chain
    i_o = IC_ROD + M_ROD * D_ROD**2
    f = math.sqrt(M_ROD * G * D_ROD / i_o) / (2 * math.pi)
    zeta = C_HINGE / (2 * math.sqrt(M_ROD * G * D_ROD * i_o))
    k = int(np.argmin(np.abs(modes.frequencies - f)))
    assert modes.frequencies[k] == pytest.approx(f, rel=ROUND_OFF, abs=0)
    assert modes.damping_ratios[k] == pytest.approx(zeta, rel=ROUND_OFF, abs=0)
    # its shape moves the rod only: a turn about y and the centre's swing d per radian
    shape = modes.shapes[k]
    assert np.abs(shape[1:]).max() < ROUND_OFF  # (shapes of unit size)
    np.testing.assert_allclose(shape[0, [0, 4]] / shape[0, 4], [-D_ROD, 1.0], rtol=ROUND_OFF)


def test_spring_mass_chain_eigenvalues_and_shapes(pendulum_and_chain):
    """omega_j = 2 sqrt(k / m) sin(j pi / (2 (n + 1))), shapes sin(i j pi / (n + 1))."""
    _, modes = pendulum_and_chain
    for j in range(1, N_CHAIN + 1):
        w = 2 * math.sqrt(K_CHAIN / M_CHAIN) * math.sin(j * math.pi / (2 * (N_CHAIN + 1)))
        k = int(np.argmin(np.abs(modes.frequencies - w / (2 * math.pi))))
        assert modes.frequencies[k] == pytest.approx(w / (2 * math.pi), rel=ROUND_OFF, abs=0)
        assert modes.damping_ratios[k] == pytest.approx(0.0, abs=ROUND_OFF)
        x = modes.shapes[k][1:, 0]  # the blocks' x displacements
        expected = np.sin(np.arange(1, N_CHAIN + 1) * j * math.pi / (N_CHAIN + 1))
        top = np.argmax(np.abs(x))
        np.testing.assert_allclose(x / x[top], expected / expected[top], rtol=0, atol=ROUND_OFF)
    assert len(modes.frequencies) == 1 + N_CHAIN  # one mode per degree of freedom


# a model of its own to linearise: modes of bodies jointed to each other in rA are checked by
# test_joint_analysis.py::test_four_bar_modes_match_the_closed_form_and_absolute and
# test_reports_switches.py::test_cartpole_linearization_in_joint_coordinates_matches_mujoco[joint]
@pytest.mark.slow
def test_double_pendulum_frequencies_against_the_linearised_equations():
    """Two rods (masses m1, m2, centres at d1, d2 below their hinges, hinge 2 at L1) hanging
    down: M theta_ddot + K theta = 0 with M = [[I1 + m1 d1^2 + m2 L1^2, m2 L1 d2],
    [m2 L1 d2, I2 + m2 d2^2]], K = diag((m1 d1 + m2 L1) g, m2 d2 g)."""
    m1, m2, d1, d2, l1, i1, i2 = 1.5, 0.8, 0.3, 0.25, 0.6, 0.04, 0.02
    b = mbd.ModelBuilder("double")
    b.add_body("upper", mass=m1, inertia=[i1, i1, 0.01], r=(0, 0, -d1))
    b.add_body("lower", mass=m2, inertia=[i2, i2, 0.01], r=(0, 0, -l1 - d2))
    b.revolute("shoulder", body_i="ground", body_j="upper", point=(0, 0, 0), axis=(0, 1, 0))
    b.revolute("elbow", body_i="upper", body_j="lower", point=(0, 0, -l1), axis=(0, 1, 0))
    modes = mbd.modes(b.build())
    M = np.array([[i1 + m1 * d1**2 + m2 * l1**2, m2 * l1 * d2], [m2 * l1 * d2, i2 + m2 * d2**2]])
    K = np.diag([(m1 * d1 + m2 * l1) * G, m2 * d2 * G])
    expected = np.sort(np.sqrt(np.linalg.eigvals(np.linalg.solve(M, K)).real)) / (2 * np.pi)
    np.testing.assert_allclose(np.sort(modes.frequencies), expected, rtol=1e-10)


def test_cart_pole_a_and_b_about_upright():
    """A cart (M) on a rail with a motor and a pole (m, centre l above the pivot, I) on a
    hinge about y, upright. In (x, theta): [[M + m, m l], [m l, I + m l^2]] q_ddot =
    [F, m g l theta]: A and B from linearize (default state: the static equilibrium,
    found though the cart's coordinate is neutral) mapped to (x, theta) equal it."""
    cart, pole, l, inertia = 1.0, 0.3, 0.5, 0.02
    b = mbd.ModelBuilder("cart-pole")
    b.add_body("cart", mass=cart, inertia=[0.1] * 3, r=(0, 0, 0))
    b.add_body("pole", mass=pole, inertia=[inertia, inertia, 0.001], r=(0, 0, l))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("pivot", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_actuator("push", joint="rail", kind="motor")
    lin = mbd.linearize(b.build())
    # physical coordinates from the basis: the cart's x translation, the pole's y rotation
    C = np.asarray(lin.basis)[[0, 6 + 4]]
    T = np.kron(np.eye(2), C)
    A_phys = T @ np.asarray(lin.A) @ np.linalg.inv(T)
    B_phys = T @ np.asarray(lin.B)
    M = np.array([[cart + pole, pole * l], [pole * l, inertia + pole * l**2]])
    stiffness = np.linalg.solve(M, np.array([[0.0, 0.0], [0.0, pole * G * l]]))
    expected_A = np.block([[np.zeros((2, 2)), np.eye(2)], [stiffness, np.zeros((2, 2))]])
    expected_B = np.concatenate([np.zeros(2), np.linalg.solve(M, [1.0, 0.0])])[:, None]
    np.testing.assert_allclose(
        A_phys, expected_A, rtol=0, atol=ROUND_OFF * np.abs(expected_A).max()
    )
    np.testing.assert_allclose(
        B_phys, expected_B, rtol=0, atol=ROUND_OFF * np.abs(expected_B).max()
    )


def test_mode_motion_and_the_cli(pendulum_and_chain, tmp_path):
    """A chain mode as a motion: every sample closes the constraints, the blocks move in
    the mode's shape (peak at a quarter period), the pendulum stays; ``jaxmbd animate
    MODEL --mode k`` writes it."""
    from PIL import Image
    from typer.testing import CliRunner

    from jaxmbd.analysis.linearize import mode_motion
    from jaxmbd.cli import app

    model, modes = pendulum_and_chain
    k = int(np.argmax(modes.frequencies))  # the chain's highest mode
    sol = mode_motion(model, modes, k, amplitude=0.05, cycles=1, samples_per_cycle=8)
    assert sol.t.shape == (9,)
    residual = mbd.diagnostics.position_residual(model, sol)
    np.testing.assert_allclose(residual, 0.0, rtol=0, atol=ROUND_OFF)  # (lengths of ~1 m)
    peak = np.asarray(sol.r[2] - sol.r[0])  # sin(2 pi f t) = 1 at sample 2
    scale = np.abs(np.asarray(sol.r)).max()  # a difference of positions
    np.testing.assert_allclose(peak[1:, 0], 0.05 * modes.shapes[k][1:, 0], rtol=0,
                               atol=ROUND_OFF * scale)  # fmt: skip
    np.testing.assert_allclose(peak[0], 0.0, rtol=0, atol=ROUND_OFF * scale)
    path = mbd.save_model(model, tmp_path / "chain.json")
    gif = tmp_path / "mode.gif"
    # 6 frames a second: 17 frames to draw (25 a second drew 69, 7 CPU-s more)
    result = CliRunner().invoke(app, ["animate", str(path), "--out", str(gif), "--mode", "0",
                                      "--fps", "6"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "mode 0:" in result.output and Image.open(gif).n_frames > 10
    bad = CliRunner().invoke(app, ["animate", str(path), "--out", str(gif), "--mode", "9"])
    assert bad.exit_code != 0 and "mode 9 of 4" in bad.output


@pytest.mark.parametrize(("axis", "stable"), [(2, True), (1, False)])
def test_moving_state_steady_spin_stability(axis, stable):
    """About a moving state: a body pinned at its centre of mass (torque-free) spinning
    at Omega about a principal axis k. Euler's equations linearised there have the
    eigenvalues 0 and lambda^2 = Omega^2 (I_k - I_i)(I_j - I_k) / (I_i I_j): an oscillation
    about the largest axis, an exponential divergence about the intermediate one (the
    tennis-racket instability), which A (gyroscopic terms of the moving state included)
    must contain."""
    inertia, spin = np.array([1.0, 2.0, 3.0]), 2.0
    omega0 = np.zeros(3)
    omega0[axis] = spin
    b = mbd.ModelBuilder("spinner", gravity=(0.0, 0.0, -G))
    b.add_body("body", mass=1.5, inertia=inertia.tolist(), r=(0.0, 0.0, 0.0), omega=omega0)
    b.spherical("pivot", body_i="ground", body_j="body", point=(0.0, 0.0, 0.0))
    lin = mbd.linearize(b.build(), "initial")
    i, j = (k for k in range(3) if k != axis)
    lam2 = spin**2 * (inertia[axis] - inertia[i]) * (inertia[j] - inertia[axis])
    lam2 /= inertia[i] * inertia[j]
    assert (lam2 < 0) == stable
    lam = np.sqrt(complex(lam2))
    eig = np.linalg.eigvals(np.asarray(lin.A))
    assert lin.A.shape == (6, 6)
    for target in (lam, -lam):
        assert np.min(np.abs(eig - target)) < ROUND_OFF * spin, (target, eig)
    assert (np.max(eig.real) > 0.5 * abs(lam)) == (not stable)
