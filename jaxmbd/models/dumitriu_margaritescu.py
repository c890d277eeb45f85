"""Dumitriu & Mărgăritescu's planar double pendulum of two bars on spherical joints (section 4,
eqs. 15-18, Fig. 1), and the angle post-processing of eq. 27 (corrected).

Data (paper, SI units): two identical homogeneous bars, m = 0.108 kg, l = 0.2 m (along the
bar), a = 0.02 m (in the plane), b = 0.01 m (along z_0); C = m (l^2 + a^2) / 12 =
3.636e-4 kg m^2. x_0 points down, gravity is +g x_0 with g = 9.81 (assumed: not stated).
Spherical joints S_1-ground at O and S_2-S_1 at H_1, the end of bar 1. Initial angles
phi_0 = pi/9 (bar 1) and psi_0 = pi/18 (bar 2) from x_0 towards y_0, at rest.

Body order: S_1 ("bar 1"), S_2 ("bar 2"). Joint multipliers: with joint "O" built as
(i = ground, j = bar 1) and "H1" as (i = bar 1, j = bar 2), ``sol.lam`` rows are the
paper's Lambda_01 (rows 0-2) and Lambda_12 (rows 3-5) with its sign convention (eq. 14:
body j receives -Lambda): Lambda_12 = m (g x_0 - a_G2) and Lambda_01 = m (2 g x_0 - a_G1 -
a_G2).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..build import ModelBuilder
from ..formulations.rotmat import is_rotmat_solution
from ..geometry import box
from ..model import Model

#: The paper's data (SI units).
MASS = 0.108
LENGTH = 0.2
WIDTH = 0.02
THICKNESS = 0.01
PHI0 = math.pi / 9
PSI0 = math.pi / 18
GRAVITY = 9.81


def _unit(theta):
    return np.array([math.cos(theta), math.sin(theta), 0.0])


def bar_double_pendulum(
    *,
    phi0: float = PHI0,
    psi0: float = PSI0,
    g: float = GRAVITY,
    mass: float = MASS,
    length: float = LENGTH,
    width: float = WIDTH,
    thickness: float = THICKNESS,
) -> Model:
    """The two-bar pendulum on spherical joints (paper section 4), at rest at angles
    (phi0, psi0) from the downward x_0 axis. Body frames: x along the bar (away from the
    upper joint), y in the plane, z = z_0; inertia about the centre of mass
    m/12 diag(a^2 + b^2, l^2 + b^2, l^2 + a^2), so the Poinsot tensor is
    m/12 diag(l^2, a^2, b^2) (eq. 15)."""
    m, l, a, b = mass, length, width, thickness
    inertia = (m / 12.0) * np.array([a * a + b * b, l * l + b * b, l * l + a * a])
    e1, e2 = _unit(phi0), _unit(psi0)
    n1, n2 = _unit(phi0 + math.pi / 2), _unit(psi0 + math.pi / 2)
    H1 = l * e1
    builder = ModelBuilder(name="bar double pendulum", gravity=(g, 0.0, 0.0))
    bar = [box((l, a, b))]  # the bar l x a x b along body x, y, z
    builder.add_body("bar 1", mass=m, inertia=inertia, r=0.5 * l * e1, axes=(e1, n1), shapes=bar)
    builder.add_body(
        "bar 2", mass=m, inertia=inertia, r=H1 + 0.5 * l * e2, axes=(e2, n2), shapes=bar
    )
    builder.spherical("O", body_i="ground", body_j="bar 1", point=(0.0, 0.0, 0.0))
    builder.spherical("H1", body_i="bar 1", body_j="bar 2", point=H1)
    return builder.build()


def _reference_vectors(sol):
    """OG_10 and H_10 G_20 from the reference configuration (t = 0) of a Solution."""
    r0 = sol.r[0]
    return r0[0], r0[1] - 2.0 * r0[0]


def rotmat_matrices(sol):
    """(T* (T, nb, 3), R (T, nb, 3, 3)) of a rotmat Solution (its own coordinates)."""
    if not is_rotmat_solution(sol):
        raise ValueError(
            f"rotmat_matrices needs a Solution of formulation 'rotmat', got {sol.formulation!r}"
        )
    q = jnp.asarray(sol.q)
    return q[..., :3], q[..., 3:].reshape(q.shape[:-1] + (3, 3))


def angles(sol):
    """(phi, psi) (T,) of eq. 27, corrected: phi = atan2(<R_1 OG_10, y_0>, <R_1 OG_10, x_0>)
    and psi = atan2 of R_2 H_10G_20 (not T_2* + R_2 H_10G_20 as printed). For any other
    formulation the same angles of the bar directions A_b x_b."""
    if is_rotmat_solution(sol):
        _, R = rotmat_matrices(sol)
        og10, hg20 = _reference_vectors(sol)
        u1 = jnp.einsum("tij,j->ti", R[:, 0], og10)
        u2 = jnp.einsum("tij,j->ti", R[:, 1], hg20)
    else:
        u1, u2 = sol.A[:, 0, :, 0], sol.A[:, 1, :, 0]
    return jnp.arctan2(u1[:, 1], u1[:, 0]), jnp.arctan2(u2[:, 1], u2[:, 0])


def angles_as_printed(sol):
    """psi of eq. 27 as printed, from T_2* + R_2 H_10G_20: wrong once the bars rotate
    relative to each other (T_2* = (R_1 - R_2) OH_10 is not zero); kept to document it."""
    T, R = rotmat_matrices(sol)
    _, hg20 = _reference_vectors(sol)
    u2 = T[:, 1] + jnp.einsum("tij,j->ti", R[:, 1], hg20)
    return jnp.arctan2(u2[:, 1], u2[:, 0])


__all__ = [
    "GRAVITY",
    "LENGTH",
    "MASS",
    "PHI0",
    "PSI0",
    "THICKNESS",
    "WIDTH",
    "angles",
    "angles_as_printed",
    "bar_double_pendulum",
    "rotmat_matrices",
]
