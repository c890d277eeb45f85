"""The examples of Betsch & Leyendecker (2006), built in code with the data of
``shared/notes/betsch-leyendecker.md`` (section 2). Body numbering follows the paper.

Assumptions (the paper leaves them open; notes section 3):

* cylindrical pair: m1 = e1, m2 = e2 in body 1, joint point at both centres of mass;
* the joints are the library's GCON joints (Perp-1 + Perp-2 for C, Perp-1 + DP2 for the
  planar pair E): the same constraint manifolds as the paper's (100) and E-pair rows,
  written with other (equivalent) quadratic rows;
* initial velocities v = P nu (eqs. 174-177) are written out as body velocities.
"""

from __future__ import annotations

import math

import numpy as np

from ..build import ModelBuilder
from ..geometry import box, cone, cylinder, mesh, pyramid
from ..lie import so3_log
from ..model import Model


def _rot_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def gyro_top_data(*, nutation=math.pi / 3, precession=10.0):
    """Sec. 5.1 data: cone H = 0.1, R = 0.05, rho = 2700, COM at L = 3H/4 from the apex
    (eq. 156); inertias (157); the spin rate (165) of steady precession; g = 9.81."""
    H, R, rho, g = 0.1, 0.05, 2700.0, 9.81
    M = rho * math.pi * R**2 * H / 3.0
    L = 0.75 * H
    J1 = 3.0 * M / 80.0 * (4.0 * R**2 + H**2)
    J3 = 0.3 * M * R**2
    M1 = J1 + M * L**2  # reduced mass (166)-(168) about the pivot
    M3 = J3
    w_p = precession
    w_s = M * g * L / (M3 * w_p) + (M1 - M3) / M3 * w_p * math.cos(nutation)
    return dict(M=M, L=L, J1=J1, J3=J3, M1=M1, M3=M3, g=g, w_p=w_p, w_s=w_s, theta=nutation)


def gyro_top(*, nutation: float = math.pi / 3, precession: float = 10.0) -> Model:
    """Steady precession of a heavy cone about a fixed pivot at the origin (Sec. 5.1).

    d_I = exp(theta e1~) e_I, phi = L d3, omega = omega_p e3 + omega_s d3 with omega_s from
    (165); gravity along -e3 (V = M g phi.e3, eq. 159). The analytical COM path is
    (L sin(theta) sin(omega_p t), -L sin(theta) cos(omega_p t), L cos(theta))."""
    d = gyro_top_data(nutation=nutation, precession=precession)
    A = _rot_x(nutation)
    d3 = A[:, 2]
    phi = d["L"] * d3
    omega = d["w_p"] * np.array([0.0, 0.0, 1.0]) + d["w_s"] * d3
    b = ModelBuilder(name="gyro_top", gravity=(0.0, 0.0, -d["g"]))
    b.add_body(
        "top",
        mass=d["M"],
        inertia=[d["J1"], d["J1"], d["J3"]],
        r=phi,
        A=A,
        rdot=np.cross(omega, phi),
        omega=A.T @ omega,
        # the cone: apex at the pivot (body point -L d3), base H - L above the centre of mass
        shapes=[cone(0.05, 0.1, pos=(0.0, 0.0, 0.1 - d["L"]), axis=(0.0, 0.0, -1.0))],
    )
    b.spherical("pivot", body_i="ground", body_j="top", point=(0.0, 0.0, 0.0))
    return b.build()


def cylindrical_pair() -> Model:
    """Two cylinders joined by a cylindrical pair, free flight without gravity (Sec. 5.2).

    Body 1: solid cylinder, M = 4, J = (304, 304, 8); body 2: hollow cylinder, M = 3,
    J = (18.75, 18.75, 19.5); axis n1 = e3 through both centres of mass; phi2 = (0, 0, -11).
    nu = (v_phi1, omega1, u2_dot, theta2_dot) = ((0, 50, 0), (1, 1.5, 0), 35.5, -100) (eq. 175),
    so omega2 = omega1 + theta2_dot n1 and v_phi2 = v_phi1 + omega1 x (phi2 - phi1) +
    u2_dot n1 (eq. 106 with rho2 = 0)."""
    n = np.array([0.0, 0.0, 1.0])
    phi1, phi2 = np.zeros(3), np.array([0.0, 0.0, -11.0])
    v1, w1, u_dot, th_dot = np.array([0.0, 50.0, 0.0]), np.array([1.0, 1.5, 0.0]), 35.5, -100.0
    w2 = w1 + th_dot * n
    v2 = v1 + np.cross(w1, phi2 - phi1) + u_dot * n
    b = ModelBuilder(name="cylindrical_pair", gravity=(0.0, 0.0, 0.0))
    # shapes from the inertias: solid cylinder R = 2, L = 30; tube R = 3, r = 2, L = 6
    b.add_body(
        "cylinder",
        mass=4.0,
        inertia=[304.0, 304.0, 8.0],
        r=phi1,
        rdot=v1,
        omega=w1,
        shapes=[cylinder(2.0, 30.0)],
    )
    b.add_body(
        "sleeve",
        mass=3.0,
        inertia=[18.75, 18.75, 19.5],
        r=phi2,
        rdot=v2,
        omega=w2,
        shapes=[cylinder(3.0, 6.0, inner_radius=2.0)],
    )
    b.cylindrical("C", body_i="cylinder", body_j="sleeve", point=(0.0, 0.0, 0.0), axis=n)
    return b.build()


def planar_pair() -> Model:
    """A square pyramid sliding on a plate (planar pair E), free flight without gravity
    (Sec. 5.3). Plate: M = 5, J = (5125/48, 5125/48, 640/3), phi1 = (5, 5, 5), rho1 =
    (0, 0, 0.25); pyramid: M = 2, J = (43/40, 43/40, 4/5), phi2 = (-2, -2, 6.25), rho2 =
    (0, 0, -1); n1 = e3, m1 = e1, m2 = e2. nu = (v_phi1, omega1, u1_dot, u2_dot, theta_dot) =
    (0, (-20, -20, 10), 150, -120, 60) (eq. 177): omega2 = omega1 + theta_dot n1, v_phi2 =
    v_phi1 + omega1 x (phi2 - phi1) + u_dot_a m_a + theta_dot rho2 x n1. The pyramid's
    contact point floats 0.25 above its base (notes, ambiguity 11): data used as given."""
    n = np.array([0.0, 0.0, 1.0])
    phi1, phi2 = np.array([5.0, 5.0, 5.0]), np.array([-2.0, -2.0, 6.25])
    rho1, rho2 = np.array([0.0, 0.0, 0.25]), np.array([0.0, 0.0, -1.0])
    w1 = np.array([-20.0, -20.0, 10.0])
    u1_dot, u2_dot, th_dot = 150.0, -120.0, 60.0
    w2 = w1 + th_dot * n
    v2 = np.cross(w1, phi2 - phi1) + u1_dot * np.eye(3)[0] + u2_dot * np.eye(3)[1]
    v2 = v2 + th_dot * np.cross(rho2, n)
    b = ModelBuilder(name="planar_pair", gravity=(0.0, 0.0, 0.0))
    # shapes from the inertias: plate 16 x 16 x 0.5; square pyramid, base 2 x 2, height 3,
    # centre of mass a quarter of the height above the base
    b.add_body(
        "plate",
        mass=5.0,
        inertia=[5125 / 48, 5125 / 48, 640 / 3],
        r=phi1,
        omega=w1,
        shapes=[box((16.0, 16.0, 0.5))],
    )
    b.add_body(
        "pyramid",
        mass=2.0,
        inertia=[43 / 40, 43 / 40, 0.8],
        r=phi2,
        rdot=v2,
        omega=w2,
        shapes=[pyramid((2.0, 2.0), 3.0, pos=(0.0, 0.0, -0.75))],
    )
    b.planar("E", body_i="plate", body_j="pyramid", point=phi1 + rho1, point_j=phi2 + rho2, axis=n)
    return b.build()


def _tetrahedron(vertices: np.ndarray, rho: float):
    """Mass, centre of mass and inertia about it (global axes) of a uniform tetrahedron:
    int x x^T dm = m / 20 (sum v_i v_i^T + s s^T), s = sum v_i, about the origin."""
    v = np.asarray(vertices, dtype=np.float64)
    vol = abs(np.linalg.det(np.stack([v[1] - v[0], v[2] - v[0], v[3] - v[0]]))) / 6.0
    m = rho * vol
    c = v.mean(0)
    s = v.sum(0)
    second = m / 20.0 * (v.T @ v + np.outer(s, s)) - m * np.outer(c, c)
    J = np.trace(second) * np.eye(3) - second
    return m, c, J


def six_body_linkage_geometry(*, L: float = 0.1, gamma: float = 0.16 * math.pi):
    """The notes' reconstruction (section 2.4): hexagon H_0..H_5 on the cube of side L,
    edge directions a(H_k), tetrahedral bodies k = 0..5 with spine H_k -> H_{k+1}."""
    a = math.tan(gamma)
    H = L * np.array(
        [[0, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, -1], [1, 0, -1], [0, 0, -1]], dtype=np.float64
    )
    e = np.eye(3)
    axes = np.array([e[0], -e[2], -e[1], -e[0], e[2], e[1]])
    bodies, vertices = [], []
    for k in range(6):
        k1 = (k + 1) % 6
        verts = [H[k], H[k] + a * L * axes[k], H[k1], H[k1] + a * L * axes[k1]]
        bodies.append(_tetrahedron(np.array(verts), 1000.0))
        vertices.append(np.array(verts))
    return dict(a=a, L=L, H=H, axes=axes, bodies=bodies, vertices=vertices)


def six_body_linkage(*, theta_dot: float = 30.0) -> Model:
    """Closed six-body loop (Bricard-type overconstrained 6R, Sec. 5.4.2) with the notes'
    reconstructed geometry (paper's ref. [27] is missing): body 0 is the ground, bodies
    1..5 move. Joint k (k = 1..6) at H_k (H_6 = H_0) with axis a(H_k), between body k - 1
    and body k; joint 6 closes the loop between body 5 and body 0. rho = 1000, gamma =
    0.16 pi, L = 0.1; gravity 9.81 along -e3 [assumed]; theta1_dot = 30 with all five
    open-chain joint rates 30 (dtheta2/dtheta1 = 1 at theta1 = 0).

    The six revolute joints give 30 rows of rank 29 (one degree of freedom): simulate with
    ``dof=1`` (energy_momentum then uses 29 independent combinations of the rows, fixed per
    step). Dropping one closure row instead (the notes' z-position row) is not enough: at
    h = 0.01 the motion then leaves the loop near theta1 = -pi/2, where the 29 remaining
    rows stop implying the dropped one (measured: the dropped row reaches -0.15).
    Inertias are the tetrahedra's, non-principal in the (global-aligned) body frames,
    handled by the director formulation's full Euler
    tensor."""
    geo = six_body_linkage_geometry()
    H, axes, bodies = geo["H"], geo["axes"], geo["bodies"]
    b = ModelBuilder(name="six_body_linkage", gravity=(0.0, 0.0, -9.81))
    # open-chain velocities: omega_k = omega_{k-1} + theta_dot a(H_k), body k turns about H_k
    omega_prev, v_point_prev, c_prev = np.zeros(3), np.zeros(3), None
    names = ["ground"] + [f"body{k}" for k in range(1, 6)]
    for k in range(1, 6):
        m, c, J = bodies[k]
        omega = omega_prev + theta_dot * axes[k]
        # velocity of the joint point H_k on body k - 1, then of body k's COM
        v_joint = np.zeros(3) if k == 1 else v_point_prev + np.cross(omega_prev, H[k] - c_prev)
        v_c = v_joint + np.cross(omega, c - H[k])
        tet = geo["vertices"][k] - c  # body frames are global-aligned at t = 0
        faces = [(0, 2, 1), (0, 1, 3), (1, 2, 3), (0, 3, 2)]
        b.add_body(
            names[k], mass=m, inertia=J, r=c, rdot=v_c, omega=omega, shapes=[mesh(tet, faces)]
        )
        omega_prev, v_point_prev, c_prev = omega, v_c, c
    for k in range(1, 6):
        b.revolute(f"joint{k}", body_i=names[k - 1], body_j=names[k], point=H[k], axis=axes[k])
    # joint 6 closes the loop (body 5 - ground at H_0, axis a(H_0) fixed in body 5)
    b.revolute("joint6", body_i="body5", body_j="ground", point=H[0], axis=axes[0])
    return b.build()


def six_body_joint_angles(A):
    """Relative joint angles theta_1..theta_6 (T, 6) from body rotations A (T, 5, 3, 3):
    the rotation angle of body k relative to body k - 1 about the joint axis a(H_k)."""
    geo = six_body_linkage_geometry()
    axes = geo["axes"]
    A = np.asarray(A)
    eye = np.broadcast_to(np.eye(3), A[:, 0].shape)
    frames = [eye] + [A[:, k] for k in range(5)] + [eye]
    out = []
    for k in range(1, 7):
        rel = np.einsum("tji,tjk->tik", frames[k - 1], frames[k])  # A_{k-1}^T A_k
        w = np.asarray(so3_log(rel))
        out.append(w @ axes[k % 6])  # body frames coincide with global at t = 0
    return np.stack(out, 1)
