"""Independent golden reference solutions (numpy/scipy only, no jax, no jaxmbd).

Conventions: SI units, gravity 9.81 along global -z. ``A`` maps body-frame vectors to
global ones (global = A @ local), ``omega_bar`` is the angular velocity in the body frame
(Adot = A @ skew(omega_bar)), ``r`` is the centre of mass position. Every function takes
an array of times ``t`` of shape (T,) (a scalar is promoted to shape (1,)) and returns a
dict of arrays whose leading axis is time.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.integrate import solve_ivp

GRAVITY = 9.81
E_X = np.array([1.0, 0.0, 0.0])


def skew(vector: np.ndarray) -> np.ndarray:
    """Skew-symmetric cross-product matrix(es) of vector(s) of shape (..., 3)."""
    vector = np.asarray(vector, dtype=float)
    x, y, z = vector[..., 0], vector[..., 1], vector[..., 2]
    zero = np.zeros_like(x)
    rows = [
        np.stack([zero, -z, y], axis=-1),
        np.stack([z, zero, -x], axis=-1),
        np.stack([-y, x, zero], axis=-1),
    ]
    return np.stack(rows, axis=-2)


def unskew(matrix: np.ndarray) -> np.ndarray:
    """Axial vector(s) of the skew part of matrix(es) of shape (..., 3, 3)."""
    matrix = np.asarray(matrix, dtype=float)
    return 0.5 * np.stack(
        [
            matrix[..., 2, 1] - matrix[..., 1, 2],
            matrix[..., 0, 2] - matrix[..., 2, 0],
            matrix[..., 1, 0] - matrix[..., 0, 1],
        ],
        axis=-1,
    )


def _times(t) -> np.ndarray:
    return np.atleast_1d(np.asarray(t, dtype=float))


def _rotation_about_global_x(angle: np.ndarray) -> np.ndarray:
    """Orientation with body z = global x and body x = (0, cos, sin) in the y-z plane."""
    cos, sin = np.cos(angle), np.sin(angle)
    zero, one = np.zeros_like(angle), np.ones_like(angle)
    return np.stack(
        [
            np.stack([zero, zero, one], axis=-1),
            np.stack([cos, -sin, zero], axis=-1),
            np.stack([sin, cos, zero], axis=-1),
        ],
        axis=-2,
    )


def _in_plane(angle: np.ndarray) -> np.ndarray:
    """Unit vector (0, cos, sin) in the global y-z plane, shape (T, 3)."""
    return np.stack([np.zeros_like(angle), np.cos(angle), np.sin(angle)], axis=-1)


def _in_plane_normal(angle: np.ndarray) -> np.ndarray:
    """Derivative of ``_in_plane`` with respect to the angle: (0, -sin, cos)."""
    return np.stack([np.zeros_like(angle), -np.sin(angle), np.cos(angle)], axis=-1)


# ---------------------------------------------------------------------------------------
# 1. Driven single pendulum
# ---------------------------------------------------------------------------------------

SINGLE_PENDULUM_LENGTH = 4.0


def single_pendulum(t) -> dict[str, np.ndarray]:
    """Rod of length 4 driven about global x so that angle(body y, -z) = pi/2 + pi/4 cos 2t.

    The swing angle ``phi`` (body x = (0, sin phi, -cos phi), measured from -z towards +y)
    equals pi/4 cos 2t; body z is global x, so omega_bar = (0, 0, phidot).
    Keys: r, rdot, rddot, omega_bar, omegadot_bar (T, 3); A (T, 3, 3); phi, phidot,
    phiddot (T,).
    """
    t = _times(t)
    phi = 0.25 * np.pi * np.cos(2.0 * t)
    phidot = -0.5 * np.pi * np.sin(2.0 * t)
    phiddot = -np.pi * np.cos(2.0 * t)
    half_length = 0.5 * SINGLE_PENDULUM_LENGTH
    # body x-axis in global coordinates and its derivative with respect to phi
    axis = np.stack([np.zeros_like(phi), np.sin(phi), -np.cos(phi)], axis=-1)
    axis_prime = np.stack([np.zeros_like(phi), np.cos(phi), np.sin(phi)], axis=-1)
    r = half_length * axis
    rdot = half_length * phidot[:, None] * axis_prime
    rddot = half_length * (phiddot[:, None] * axis_prime - (phidot**2)[:, None] * axis)
    zero, one = np.zeros_like(phi), np.ones_like(phi)
    # columns: body x = axis, body y = axis_prime, body z = global x
    orientation = np.stack(
        [
            np.stack([zero, zero, one], axis=-1),
            np.stack([np.sin(phi), np.cos(phi), zero], axis=-1),
            np.stack([-np.cos(phi), np.sin(phi), zero], axis=-1),
        ],
        axis=-2,
    )
    omega_bar = np.stack([zero, zero, phidot], axis=-1)
    omegadot_bar = np.stack([zero, zero, phiddot], axis=-1)
    return {
        "r": r,
        "rdot": rdot,
        "rddot": rddot,
        "A": orientation,
        "omega_bar": omega_bar,
        "omegadot_bar": omegadot_bar,
        "phi": phi,
        "phidot": phidot,
        "phiddot": phiddot,
    }


# ---------------------------------------------------------------------------------------
# 2. Driven slider crank
# ---------------------------------------------------------------------------------------

CRANK_PIVOT = np.array([0.0, 0.1, 0.12])
CRANK_PIN_LOCAL = np.array([0.0, 0.08, 0.0])
CRANK_ANGULAR_SPEED = 2.0 * np.pi
ROD_LENGTH = 0.3
SLIDER_ORIENTATION = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


def _normalised_with_derivatives(vec, vec_dot, vec_ddot):
    """Unit vector v/|v| and its first two time derivatives, all of shape (T, 3)."""
    norm = np.linalg.norm(vec, axis=-1, keepdims=True)
    norm_dot = np.sum(vec * vec_dot, axis=-1, keepdims=True) / norm
    norm_ddot = (
        np.sum(vec_dot * vec_dot + vec * vec_ddot, axis=-1, keepdims=True) - norm_dot**2
    ) / norm
    unit = vec / norm
    unit_dot = (vec_dot - unit * norm_dot) / norm
    unit_ddot = (vec_ddot - 2.0 * unit_dot * norm_dot - unit * norm_ddot) / norm
    return unit, unit_dot, unit_ddot


def _body_rates(orientation, orientation_dot, orientation_ddot):
    """omega_bar and omegadot_bar from A, Adot, Addot (exact for orthonormal A)."""
    a_t = np.swapaxes(orientation, -1, -2)
    omega_bar = unskew(a_t @ orientation_dot)
    # d/dt (A^T Adot) = Adot^T Adot (symmetric) + A^T Addot; its skew part is skew(omegadot)
    omegadot_bar = unskew(a_t @ orientation_ddot)
    return omega_bar, omegadot_bar


def slider_crank(t) -> dict[str, np.ndarray]:
    """Crank turning at 2*pi rad/s about -x, rod of length 0.3, slider on the global x axis.

    Bodies in order crank, rod, slider. Keys: r, rdot, rddot, omega_bar, omegadot_bar
    (T, 3, 3) body-major; A (T, 3, 3, 3); plus alpha (crank angle), x_slider,
    x_slider_dot, x_slider_ddot (T,) and B, C (crank pin, slider point; (T, 3)).
    """
    t = _times(t)
    n_times = t.size
    alpha = CRANK_ANGULAR_SPEED * t
    alpha_dot = CRANK_ANGULAR_SPEED
    sin_a, cos_a = np.sin(alpha), np.cos(alpha)
    zero, one = np.zeros_like(alpha), np.ones_like(alpha)

    # crank: A = Rx(-alpha) @ A0 = [[1,0,0],[0,sin,-cos],[0,cos,sin]]
    crank_orientation = np.stack(
        [
            np.stack([one, zero, zero], axis=-1),
            np.stack([zero, sin_a, -cos_a], axis=-1),
            np.stack([zero, cos_a, sin_a], axis=-1),
        ],
        axis=-2,
    )
    crank_omega_bar = np.tile([-alpha_dot, 0.0, 0.0], (n_times, 1))

    # crank pin B = pivot + 0.08 * (0, sin, cos)
    pin_radius = CRANK_PIN_LOCAL[1]
    point_b = CRANK_PIVOT + pin_radius * np.stack([zero, sin_a, cos_a], axis=-1)
    point_b_dot = pin_radius * alpha_dot * np.stack([zero, cos_a, -sin_a], axis=-1)
    point_b_ddot = pin_radius * alpha_dot**2 * np.stack([zero, -sin_a, -cos_a], axis=-1)

    # slider point C = (x, 0, 0) with x^2 + |B|^2 = L^2 (B has no x component)
    b_sq = np.sum(point_b**2, axis=-1)
    x_slider = np.sqrt(ROD_LENGTH**2 - b_sq)
    x_slider_dot = -np.sum(point_b * point_b_dot, axis=-1) / x_slider
    x_slider_ddot = (
        -(np.sum(point_b_dot**2 + point_b * point_b_ddot, axis=-1) + x_slider_dot**2) / x_slider
    )
    point_c = np.stack([x_slider, zero, zero], axis=-1)
    point_c_dot = np.stack([x_slider_dot, zero, zero], axis=-1)
    point_c_ddot = np.stack([x_slider_ddot, zero, zero], axis=-1)

    # rod frame: x = (C - B)/L, y = normalise(e_x cross x), z = x cross y
    rod_x = (point_c - point_b) / ROD_LENGTH
    rod_x_dot = (point_c_dot - point_b_dot) / ROD_LENGTH
    rod_x_ddot = (point_c_ddot - point_b_ddot) / ROD_LENGTH
    rod_y, rod_y_dot, rod_y_ddot = _normalised_with_derivatives(
        np.cross(E_X, rod_x), np.cross(E_X, rod_x_dot), np.cross(E_X, rod_x_ddot)
    )
    rod_z = np.cross(rod_x, rod_y)
    rod_z_dot = np.cross(rod_x_dot, rod_y) + np.cross(rod_x, rod_y_dot)
    rod_z_ddot = (
        np.cross(rod_x_ddot, rod_y)
        + 2.0 * np.cross(rod_x_dot, rod_y_dot)
        + np.cross(rod_x, rod_y_ddot)
    )
    rod_orientation = np.stack([rod_x, rod_y, rod_z], axis=-1)
    rod_omega_bar, rod_omegadot_bar = _body_rates(
        rod_orientation,
        np.stack([rod_x_dot, rod_y_dot, rod_z_dot], axis=-1),
        np.stack([rod_x_ddot, rod_y_ddot, rod_z_ddot], axis=-1),
    )

    crank_r = np.tile(CRANK_PIVOT, (n_times, 1))
    still = np.zeros((n_times, 3))
    return {
        "r": np.stack([crank_r, 0.5 * (point_b + point_c), point_c], axis=1),
        "rdot": np.stack([still, 0.5 * (point_b_dot + point_c_dot), point_c_dot], axis=1),
        "rddot": np.stack([still, 0.5 * (point_b_ddot + point_c_ddot), point_c_ddot], axis=1),
        "A": np.stack(
            [crank_orientation, rod_orientation, np.tile(SLIDER_ORIENTATION, (n_times, 1, 1))],
            axis=1,
        ),
        "omega_bar": np.stack([crank_omega_bar, rod_omega_bar, still], axis=1),
        "omegadot_bar": np.stack([still, rod_omegadot_bar, still], axis=1),
        "alpha": alpha,
        "x_slider": x_slider,
        "x_slider_dot": x_slider_dot,
        "x_slider_ddot": x_slider_ddot,
        "B": point_b,
        "C": point_c,
    }


# ---------------------------------------------------------------------------------------
# 3. Double pendulum
# ---------------------------------------------------------------------------------------

ROD1_LENGTH = 4.0
ROD1_MASS = 78.0
ROD1_INERTIA = np.diag([0.0325, 104.01625, 104.01625])
ROD2_LENGTH = 2.0
ROD2_MASS = 39.0
ROD2_INERTIA = np.diag([0.01625, 13.008125, 13.008125])
# absolute angles of the body x-axes, body x = (0, cos theta, sin theta)
DOUBLE_PENDULUM_THETA0 = np.array([0.0, -0.5 * np.pi])
DOUBLE_PENDULUM_RTOL = 1e-13
DOUBLE_PENDULUM_ATOL = 1e-13
DOUBLE_PENDULUM_MIN_HORIZON = 5.0


def double_pendulum_accelerations(theta: np.ndarray, theta_dot: np.ndarray) -> np.ndarray:
    """Angular accelerations (..., 2) from the Lagrange equations in absolute angles."""
    half1, half2 = 0.5 * ROD1_LENGTH, 0.5 * ROD2_LENGTH
    inertia1 = ROD1_INERTIA[2, 2] + ROD1_MASS * half1**2 + ROD2_MASS * ROD1_LENGTH**2
    inertia2 = ROD2_INERTIA[2, 2] + ROD2_MASS * half2**2
    coupling = ROD2_MASS * ROD1_LENGTH * half2
    delta = theta[..., 0] - theta[..., 1]
    m12 = coupling * np.cos(delta)
    # M @ thetaddot = rhs
    rhs1 = -coupling * np.sin(delta) * theta_dot[..., 1] ** 2 - GRAVITY * (
        ROD1_MASS * half1 + ROD2_MASS * ROD1_LENGTH
    ) * np.cos(theta[..., 0])
    rhs2 = coupling * np.sin(delta) * theta_dot[..., 0] ** 2 - GRAVITY * ROD2_MASS * half2 * np.cos(
        theta[..., 1]
    )
    det = inertia1 * inertia2 - m12**2
    return np.stack(
        [(inertia2 * rhs1 - m12 * rhs2) / det, (inertia1 * rhs2 - m12 * rhs1) / det], axis=-1
    )


def _double_pendulum_rhs(_time: float, state: np.ndarray) -> np.ndarray:
    return np.concatenate([state[2:], double_pendulum_accelerations(state[:2], state[2:])])


@functools.lru_cache(maxsize=8)
def _double_pendulum_solution(horizon: float):
    """Dense DOP853 solution on [0, horizon], cached per horizon."""
    state0 = np.concatenate([DOUBLE_PENDULUM_THETA0, np.zeros(2)])
    solution = solve_ivp(
        _double_pendulum_rhs,
        (0.0, horizon),
        state0,
        method="DOP853",
        rtol=DOUBLE_PENDULUM_RTOL,
        atol=DOUBLE_PENDULUM_ATOL,
        dense_output=True,
    )
    if not solution.success:
        raise RuntimeError(f"double pendulum integration failed: {solution.message}")
    return solution.sol


def double_pendulum(t) -> dict[str, np.ndarray]:
    """Double pendulum released from rest (rod 1 along +y, rod 2 hanging along -z).

    theta[:, i] is the absolute angle of rod i's body x-axis in the y-z plane, measured
    from +y towards +z (theta0 = (0, -pi/2)); omega_bar = (0, 0, thetadot).
    Keys: r, rdot, rddot, omega_bar, omegadot_bar (T, 2, 3); A (T, 2, 3, 3);
    theta, thetadot, thetaddot (T, 2). Integrated once to max(5, ceil(max t)) s and cached.
    """
    t = _times(t)
    if np.any(t < 0.0):
        raise ValueError("double_pendulum reference is only defined for t >= 0")
    horizon = max(DOUBLE_PENDULUM_MIN_HORIZON, float(np.ceil(t.max())))
    state = _double_pendulum_solution(horizon)(t).T
    theta, theta_dot = state[:, :2], state[:, 2:]
    theta_ddot = double_pendulum_accelerations(theta, theta_dot)

    half1, half2 = 0.5 * ROD1_LENGTH, 0.5 * ROD2_LENGTH
    axis1, axis2 = _in_plane(theta[:, 0]), _in_plane(theta[:, 1])
    normal1, normal2 = _in_plane_normal(theta[:, 0]), _in_plane_normal(theta[:, 1])

    def axis_rate(normal, i):
        return theta_dot[:, i : i + 1] * normal

    def axis_acceleration(axis, normal, i):
        return theta_ddot[:, i : i + 1] * normal - theta_dot[:, i : i + 1] ** 2 * axis

    joint_rate = ROD1_LENGTH * axis_rate(normal1, 0)
    joint_acceleration = ROD1_LENGTH * axis_acceleration(axis1, normal1, 0)
    r = np.stack([half1 * axis1, ROD1_LENGTH * axis1 + half2 * axis2], axis=1)
    rdot = np.stack(
        [half1 * axis_rate(normal1, 0), joint_rate + half2 * axis_rate(normal2, 1)], axis=1
    )
    rddot = np.stack(
        [
            half1 * axis_acceleration(axis1, normal1, 0),
            joint_acceleration + half2 * axis_acceleration(axis2, normal2, 1),
        ],
        axis=1,
    )
    orientation = np.stack(
        [_rotation_about_global_x(theta[:, 0]), _rotation_about_global_x(theta[:, 1])], axis=1
    )
    zeros = np.zeros_like(theta)
    omega_bar = np.stack([zeros, zeros, theta_dot], axis=-1)
    omegadot_bar = np.stack([zeros, zeros, theta_ddot], axis=-1)
    return {
        "r": r,
        "rdot": rdot,
        "rddot": rddot,
        "A": orientation,
        "omega_bar": omega_bar,
        "omegadot_bar": omegadot_bar,
        "theta": theta,
        "thetadot": theta_dot,
        "thetaddot": theta_ddot,
    }


# ---------------------------------------------------------------------------------------
# 4. Heavy top on a fixed ball joint (Euler's equations about the pivot, quaternions)
# ---------------------------------------------------------------------------------------


def _quaternion_to_matrix(p: np.ndarray) -> np.ndarray:
    """Rotation matrix of unit quaternions (scalar first), shape (..., 4) -> (..., 3, 3)."""
    p = p / np.linalg.norm(p, axis=-1, keepdims=True)
    w, x, y, z = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def _matrix_to_quaternion(A: np.ndarray) -> np.ndarray:
    """Unit quaternion (scalar first) of one rotation matrix (Shepperd's method)."""
    A = np.asarray(A, dtype=float)
    trace = np.trace(A)
    k = int(np.argmax([trace, A[0, 0], A[1, 1], A[2, 2]]))
    if k == 0:
        w = 0.5 * np.sqrt(1 + trace)
        q = [
            w,
            (A[2, 1] - A[1, 2]) / (4 * w),
            (A[0, 2] - A[2, 0]) / (4 * w),
            (A[1, 0] - A[0, 1]) / (4 * w),
        ]
    elif k == 1:
        x = 0.5 * np.sqrt(1 + 2 * A[0, 0] - trace)
        q = [
            (A[2, 1] - A[1, 2]) / (4 * x),
            x,
            (A[0, 1] + A[1, 0]) / (4 * x),
            (A[0, 2] + A[2, 0]) / (4 * x),
        ]
    elif k == 2:
        y = 0.5 * np.sqrt(1 + 2 * A[1, 1] - trace)
        q = [
            (A[0, 2] - A[2, 0]) / (4 * y),
            (A[0, 1] + A[1, 0]) / (4 * y),
            y,
            (A[1, 2] + A[2, 1]) / (4 * y),
        ]
    else:
        z = 0.5 * np.sqrt(1 + 2 * A[2, 2] - trace)
        q = [
            (A[1, 0] - A[0, 1]) / (4 * z),
            (A[0, 2] + A[2, 0]) / (4 * z),
            (A[1, 2] + A[2, 1]) / (4 * z),
            z,
        ]
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def heavy_top(
    t, *, mass, inertia, com_from_pivot, gravity, A0, omega0, pivot=(0.0, 0.0, 0.0)
) -> dict[str, np.ndarray]:
    """A rigid body on a fixed ball joint at ``pivot`` under uniform gravity.

    Euler's equations about the pivot in the body frame, J_O w_dot = c x (m A^T g) -
    w x J_O w with J_O = J + m (|c|^2 I - c c^T) (parallel axes), and the quaternion
    kinematics p_dot = p (x) (0, w) / 2, integrated by DOP853 at rtol = atol = 1e-12.
    ``inertia`` is about the centre of mass in body axes, ``com_from_pivot`` = c in body
    axes, so r = pivot + A c. Keys: r, rdot, rddot (T, 3); A (T, 3, 3); omega_bar,
    omegadot_bar (T, 3); reaction (T, 3), the global force of the joint on the body
    (m r_ddot - m g); energy (T,); angular_momentum_pivot (T, 3), global, A J_O w.
    """
    t = _times(t)
    c = np.asarray(com_from_pivot, dtype=float)
    g = np.asarray(gravity, dtype=float)
    J_O = np.asarray(inertia, dtype=float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    J_O_inv = np.linalg.inv(J_O)

    def omega_dot(A, w):
        torque = np.cross(c, mass * (A.T @ g))
        return J_O_inv @ (torque - np.cross(w, J_O @ w))

    def rhs(_time, y):
        p, w = y[:4], y[4:]
        A = _quaternion_to_matrix(p)
        s, v = p[0], p[1:]
        p_dot = 0.5 * np.concatenate([[-v @ w], s * w + np.cross(v, w)])
        return np.concatenate([p_dot, omega_dot(A, w)])

    y0 = np.concatenate([_matrix_to_quaternion(A0), np.asarray(omega0, dtype=float)])
    if float(t.max()) > 0:
        sol = solve_ivp(
            rhs,
            (0.0, float(t.max())),
            y0,
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            dense_output=True,
        )
        if not sol.success:
            raise RuntimeError(sol.message)
        y = sol.sol(t).T
    else:
        y = np.broadcast_to(y0, (len(t), 7))
    p, w = y[:, :4], y[:, 4:]
    A = _quaternion_to_matrix(p)
    wd = np.stack([omega_dot(A[k], w[k]) for k in range(len(t))])
    rel = A @ c
    r = np.asarray(pivot, dtype=float) + rel
    rdot = np.einsum("tij,tj->ti", A, np.cross(w, c))
    rddot = np.einsum("tij,tj->ti", A, np.cross(wd, c) + np.cross(w, np.cross(w, c)))
    return {
        "r": r,
        "rdot": rdot,
        "rddot": rddot,
        "A": A,
        "omega_bar": w,
        "omegadot_bar": wd,
        "reaction": mass * (rddot - g),
        "energy": 0.5 * np.einsum("ti,ij,tj->t", w, J_O, w) - mass * (rel @ g),
        "angular_momentum_pivot": np.einsum("tij,jk,tk->ti", A, J_O, w),
    }


# ---------------------------------------------------------------------------------------
# 5. Torque-free rigid body (Euler's equations about the centre of mass, quaternions)
# ---------------------------------------------------------------------------------------


def free_rigid_body(t, *, inertia, A0, omega0) -> dict[str, np.ndarray]:
    """Rotation of a torque-free rigid body (no gravity; the centre of mass is irrelevant).

    Euler's equations in the body frame, J w_dot = -w x J w, with ``inertia`` = J about
    the centre of mass in body axes (may be non-diagonal), and the quaternion kinematics
    p_dot = p (x) (0, w) / 2 (p scalar first, A(p) maps body to global), integrated from
    A(0) = A0, w(0) = omega0 by DOP853 at rtol = atol = 1e-12 with dense output; the
    quaternion is normalised only when converted to A. Kinetic energy 0.5 w^T J w and the
    global angular momentum A J w are invariants. Keys: A (T, 3, 3); omega_bar,
    omegadot_bar (T, 3); energy (T,); angular_momentum (T, 3), global, A J w.
    """
    t = _times(t)
    if np.any(t < 0.0):
        raise ValueError("free_rigid_body reference is only defined for t >= 0")
    J = np.asarray(inertia, dtype=float)
    J_inv = np.linalg.inv(J)

    def omega_dot(w):
        """Body angular acceleration(s), w of shape (..., 3)."""
        return np.einsum("ij,...j->...i", J_inv, -np.cross(w, np.einsum("ij,...j->...i", J, w)))

    def rhs(_time, y):
        p, w = y[:4], y[4:]
        s, v = p[0], p[1:]
        p_dot = 0.5 * np.concatenate([[-v @ w], s * w + np.cross(v, w)])
        return np.concatenate([p_dot, omega_dot(w)])

    y0 = np.concatenate([_matrix_to_quaternion(A0), np.asarray(omega0, dtype=float)])
    horizon = float(t.max())
    if horizon > 0.0:
        sol = solve_ivp(
            rhs, (0.0, horizon), y0, method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True
        )
        if not sol.success:
            raise RuntimeError(f"free rigid body integration failed: {sol.message}")
        state = sol.sol(t).T
    else:
        state = np.tile(y0, (len(t), 1))
    p, w = state[:, :4], state[:, 4:]
    A = _quaternion_to_matrix(p)
    return {
        "A": A,
        "omega_bar": w,
        "omegadot_bar": omega_dot(w),
        "energy": 0.5 * np.einsum("ti,ij,tj->t", w, J, w),
        "angular_momentum": np.einsum("tij,jk,tk->ti", A, J, w),
    }
