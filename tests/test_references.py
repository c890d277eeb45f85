"""Self-tests for the independent golden references in ``references.py``."""

import numpy as np
import pytest
from references import (
    GRAVITY,
    ROD1_INERTIA,
    ROD1_LENGTH,
    ROD1_MASS,
    ROD2_INERTIA,
    ROD2_LENGTH,
    ROD2_MASS,
    ROD_LENGTH,
    double_pendulum,
    single_pendulum,
    skew,
    slider_crank,
    unskew,
)
from tolerances import ROUND_OFF

SQRT_HALF = np.sqrt(0.5)
E_X = np.array([1.0, 0.0, 0.0])
SAMPLE_TIMES = np.linspace(0.05, 4.95, 23)
STEP = 2e-4

REFERENCES = {
    "single_pendulum": single_pendulum,
    "slider_crank": slider_crank,
    "double_pendulum": double_pendulum,
}


def central_difference(function, key, t, h=STEP):
    """Fourth-order five-point central difference of ``function(t)[key]`` with step h."""
    return (
        8.0 * (function(t + h)[key] - function(t - h)[key])
        - (function(t + 2.0 * h)[key] - function(t - 2.0 * h)[key])
    ) / (12.0 * h)


def body_rate_from_orientation(function, t, h=STEP):
    """omega_bar from skew(omega_bar) = A^T Adot with Adot by central differences."""
    orientation = function(t)["A"]
    orientation_dot = central_difference(function, "A", t, h)
    return unskew(np.swapaxes(orientation, -1, -2) @ orientation_dot)


@pytest.mark.parametrize("name", REFERENCES)
@pytest.mark.parametrize(
    ("quantity", "derivative"),
    [("r", "rdot"), ("rdot", "rddot"), ("omega_bar", "omegadot_bar")],
)
def test_translational_and_angular_derivatives(name, quantity, derivative):
    function = REFERENCES[name]
    expected = function(SAMPLE_TIMES)[derivative]
    estimate = central_difference(function, quantity, SAMPLE_TIMES)
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(estimate, expected, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("name", REFERENCES)
def test_omega_bar_is_body_rate_of_orientation(name):
    function = REFERENCES[name]
    expected = function(SAMPLE_TIMES)["omega_bar"]
    estimate = body_rate_from_orientation(function, SAMPLE_TIMES)
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(estimate, expected, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("name", REFERENCES)
def test_orientations_are_proper_rotations(name):
    orientation = REFERENCES[name](SAMPLE_TIMES)["A"]
    identity = np.broadcast_to(np.eye(3), orientation.shape)
    np.testing.assert_allclose(
        np.swapaxes(orientation, -1, -2) @ orientation, identity, rtol=0, atol=ROUND_OFF
    )
    np.testing.assert_allclose(np.linalg.det(orientation), 1.0, rtol=0, atol=ROUND_OFF)


@pytest.mark.parametrize("name", REFERENCES)
def test_output_shapes(name):
    n_bodies = {"single_pendulum": None, "slider_crank": 3, "double_pendulum": 2}[name]
    data = REFERENCES[name](SAMPLE_TIMES)
    body_axes = () if n_bodies is None else (n_bodies,)
    for key in ("r", "rdot", "rddot", "omega_bar", "omegadot_bar"):
        assert data[key].shape == (SAMPLE_TIMES.size, *body_axes, 3), key
    assert data["A"].shape == (SAMPLE_TIMES.size, *body_axes, 3, 3)


# --- single pendulum ---------------------------------------------------------------------


def test_single_pendulum_initial_state():
    data = single_pendulum(np.array([0.0]))
    np.testing.assert_allclose(
        data["r"][0], [0.0, np.sqrt(2.0), -np.sqrt(2.0)], rtol=0, atol=ROUND_OFF
    )
    expected_orientation = [[0, 0, 1], [SQRT_HALF, SQRT_HALF, 0], [-SQRT_HALF, SQRT_HALF, 0]]
    np.testing.assert_allclose(data["A"][0], expected_orientation, rtol=0, atol=ROUND_OFF)


def test_single_pendulum_pivot_fixed_and_driver_satisfied():
    data = single_pendulum(SAMPLE_TIMES)
    pivot = data["r"] + data["A"] @ np.array([-2.0, 0.0, 0.0])
    np.testing.assert_allclose(pivot, 0.0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_array_equal(data["A"][:, :, 2], np.broadcast_to(E_X, pivot.shape))
    body_y = data["A"][:, :, 1]
    angle_to_minus_z = np.arccos(-body_y[:, 2])
    np.testing.assert_allclose(
        angle_to_minus_z,
        0.5 * np.pi + 0.25 * np.pi * np.cos(2.0 * SAMPLE_TIMES),
        rtol=0,
        atol=ROUND_OFF,
    )


# --- slider crank ------------------------------------------------------------------------


def test_slider_crank_initial_state():
    data = slider_crank(np.array([0.0]))
    np.testing.assert_allclose(data["B"][0], [0.0, 0.1, 0.2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(data["r"][0, 2], [0.2, 0.0, 0.0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        data["A"][0, 0], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], rtol=0, atol=ROUND_OFF
    )
    rod_orientation0 = [
        [0.666667, 0.0, 0.745356],
        [-0.333333, 0.894427, 0.298142],
        [-0.666667, -0.447214, 0.596285],
    ]
    np.testing.assert_allclose(data["A"][0, 1], rod_orientation0, atol=1e-6)


def test_slider_crank_constraints():
    data = slider_crank(SAMPLE_TIMES)
    crank, rod, slider = (data["A"][:, i] for i in range(3))
    pin_on_crank = data["r"][:, 0] + crank @ np.array([0.0, 0.08, 0.0])
    pin_on_rod = data["r"][:, 1] + rod @ np.array([-0.15, 0.0, 0.0])
    slider_point_on_rod = data["r"][:, 1] + rod @ np.array([0.15, 0.0, 0.0])
    np.testing.assert_allclose(pin_on_rod, pin_on_crank, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(slider_point_on_rod, data["r"][:, 2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        np.linalg.norm(pin_on_crank - data["r"][:, 2], axis=-1),
        ROD_LENGTH,
        rtol=0,
        atol=ROUND_OFF,
    )
    np.testing.assert_allclose(data["r"][:, 2, 1:], 0.0, atol=0)
    assert np.all(data["r"][:, 2, 0] > 0.0)
    # rod y-axis perpendicular to x
    np.testing.assert_allclose(rod[:, 0, 1], 0.0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_array_equal(slider[:, :, 2], np.broadcast_to(E_X, (SAMPLE_TIMES.size, 3)))
    # crank: fixed centre, rotation about -x at 2 pi rad/s
    np.testing.assert_array_equal(data["r"][:, 0], np.broadcast_to([0.0, 0.1, 0.12], (23, 3)))
    crank_omega_global = np.einsum("tij,tj->ti", crank, data["omega_bar"][:, 0])
    np.testing.assert_allclose(
        crank_omega_global,
        np.broadcast_to([-2 * np.pi, 0, 0], (23, 3)),
        rtol=0,
        atol=ROUND_OFF * 2 * np.pi,
    )


def test_slider_crank_rod_frame_is_continuous():
    """The rod frame never flips sign between closely spaced samples over one revolution."""
    times = np.linspace(0.0, 1.0, 2001)
    rod = slider_crank(times)["A"][:, 1]
    column_dots = np.einsum("tij,tij->tj", rod[1:], rod[:-1])
    assert column_dots.min() > 0.99


# --- double pendulum ---------------------------------------------------------------------


def test_double_pendulum_initial_state():
    data = double_pendulum(np.array([0.0]))
    np.testing.assert_allclose(data["r"][0], [[0, 2, 0], [0, 4, -1]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        data["A"][0, 0], [[0, 0, 1], [1, 0, 0], [0, 1, 0]], rtol=0, atol=ROUND_OFF
    )
    np.testing.assert_allclose(
        data["A"][0, 1], [[0, 0, 1], [0, 1, 0], [-1, 0, 0]], rtol=0, atol=ROUND_OFF
    )
    np.testing.assert_allclose(data["rdot"][0], 0.0, atol=0)
    np.testing.assert_allclose(data["omega_bar"][0], 0.0, atol=0)


def test_double_pendulum_joints_coincide():
    data = double_pendulum(SAMPLE_TIMES)
    rod1, rod2 = data["A"][:, 0], data["A"][:, 1]
    pivot = data["r"][:, 0] + rod1 @ np.array([-0.5 * ROD1_LENGTH, 0.0, 0.0])
    elbow_on_rod1 = data["r"][:, 0] + rod1 @ np.array([0.5 * ROD1_LENGTH, 0.0, 0.0])
    elbow_on_rod2 = data["r"][:, 1] + rod2 @ np.array([-0.5 * ROD2_LENGTH, 0.0, 0.0])
    np.testing.assert_allclose(pivot, 0.0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(elbow_on_rod1, elbow_on_rod2, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(data["r"][..., 0], 0.0, atol=0)  # planar motion in y-z


def double_pendulum_energy(data):
    """Total energy from CM velocities, body rates and body inertias (independent of EOM)."""
    masses = np.array([ROD1_MASS, ROD2_MASS])
    inertias = np.stack([ROD1_INERTIA, ROD2_INERTIA])
    translational = 0.5 * np.einsum("b,tbi,tbi->t", masses, data["rdot"], data["rdot"])
    rotational = 0.5 * np.einsum("tbi,bij,tbj->t", data["omega_bar"], inertias, data["omega_bar"])
    potential = GRAVITY * np.einsum("b,tb->t", masses, data["r"][..., 2])
    return translational + rotational + potential


def test_double_pendulum_energy_conserved():
    data = double_pendulum(np.linspace(0.0, 5.0, 501))
    energy = double_pendulum_energy(data)
    assert np.abs(energy - energy[0]).max() <= 2e-11 * np.abs(energy[0])


def test_double_pendulum_newton_euler_balance():
    """Accelerations satisfy the Newton-Euler equations with joint reaction forces."""
    data = double_pendulum(SAMPLE_TIMES)
    gravity = np.array([0.0, 0.0, -GRAVITY])
    rod1, rod2 = data["A"][:, 0], data["A"][:, 1]
    elbow = data["r"][:, 0] + rod1 @ np.array([0.5 * ROD1_LENGTH, 0.0, 0.0])
    # force on rod 2 from rod 1 at the elbow, then on rod 1 from ground at the pivot
    elbow_force = ROD2_MASS * (data["rddot"][:, 1] - gravity)
    pivot_force = ROD1_MASS * (data["rddot"][:, 0] - gravity) + elbow_force
    torque2 = np.cross(elbow - data["r"][:, 1], elbow_force)
    torque1 = np.cross(-data["r"][:, 0], pivot_force) + np.cross(
        elbow - data["r"][:, 0], -elbow_force
    )
    for body, orientation, inertia, torque in (
        (0, rod1, ROD1_INERTIA, torque1),
        (1, rod2, ROD2_INERTIA, torque2),
    ):
        omega_bar = data["omega_bar"][:, body]
        gyroscopic = np.cross(omega_bar, omega_bar @ inertia)
        residual = (
            data["omegadot_bar"][:, body] @ inertia
            + gyroscopic
            - np.einsum("tji,tj->ti", orientation, torque)
        )
        np.testing.assert_allclose(residual, 0.0, rtol=0, atol=ROUND_OFF * np.abs(torque).max())


def test_double_pendulum_cache_and_horizon_consistent():
    times = np.array([0.7, 2.3, 4.9])
    first = double_pendulum(times)["theta"]
    again = double_pendulum(times)["theta"]
    np.testing.assert_array_equal(first, again)
    single = np.array([double_pendulum(time)["theta"][0] for time in times])
    np.testing.assert_allclose(single, first, rtol=ROUND_OFF, atol=0)


def test_skew_unskew_roundtrip():
    vector = np.array([0.3, -1.2, 2.5])
    np.testing.assert_array_equal(unskew(skew(vector)), vector)
    np.testing.assert_allclose(skew(vector) @ E_X, np.cross(vector, E_X), rtol=0, atol=ROUND_OFF)
