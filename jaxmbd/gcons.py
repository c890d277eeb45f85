"""The basic geometric constraints (GCONs) DP1, DP2, D, CD and the rotation driver.

Kernels act on *stacked* constraints of one type (DESIGN principle 3): every input has a
leading axis of length n (constraints of that type), bodies already gathered. Two families:

* ``value_*``: the constraint value Phi(r, A, f) (paper 1 eqs. 1-4). rp and re differentiate
  these with autodiff.
* ``rA_*``: the hand-coded rA quantities, returned as a :class:`RaRows`: the Jacobian rows
  with respect to (r_i, theta_bar_i, r_j, theta_bar_j) from the Pi-bar variations (Table 2,
  corrected as in PAPER_NOTES) and the velocity-quadratic part of the second time derivative
  (the GCON part of gamma, eq. 18).

Conventions: ``s = A s_bar``; ``delta(A s_bar) = -A s_bar~ theta_bar`` (eq. 13a); body angular
velocities are in the body frame; ``d_ij = r_j + A_j s_bar_j^Q - r_i - A_i s_bar_i^P``.

The rotation driver ``ROT`` prescribes the angle phi of a body-j vector a_j about a joint axis
of body i, measured from u_i towards v_i (u_i, v_i, axis right-handed on body i):
``Phi = cos(theta(t)) v_i.a_j - sin(theta(t)) u_i.a_j = sin(phi - theta(t))``, whose gradient
never vanishes at the solution, unlike the DP1 driver ``u_i.a_j - cos(theta(t))`` that loses
rank when theta passes 0 or pi.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from . import _config  # noqa: F401
from .lie import hat


def _mv(M, v):
    return jnp.einsum("...ij,...j->...i", M, v)


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def _row_vec_mat(v, M):
    """v^T M for stacked v (n,3) and M (n,3,3) -> (n,3)."""
    return jnp.einsum("...i,...ij->...j", v, M)


# ----------------------------------------------------------------------------- values


def value_dp1(A_i, A_j, a_bar_i, a_bar_j, f):
    """Eq. 1: a_bar_i^T A_i^T A_j a_bar_j - f."""
    return _dot(_mv(A_i, a_bar_i), _mv(A_j, a_bar_j)) - f


def _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j):
    return r_j + _mv(A_j, s_bar_q_j) - r_i - _mv(A_i, s_bar_p_i)


def value_dp2(r_i, A_i, r_j, A_j, a_bar_i, s_bar_p_i, s_bar_q_j, f):
    """Eq. 2: a_bar_i^T A_i^T d_ij - f."""
    return _dot(_mv(A_i, a_bar_i), _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)) - f


def value_d(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j, f):
    """Eq. 3: d_ij^T d_ij - f."""
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    return _dot(d, d) - f


def value_cd(r_i, A_i, r_j, A_j, c, s_bar_p_i, s_bar_q_j, f):
    """Eq. 4: c^T d_ij - f."""
    return _dot(c, _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)) - f


def value_rot(A_i, A_j, u_bar_i, v_bar_i, a_bar_j, angle):
    """Rotation driver: cos(theta) v_i.a_j - sin(theta) u_i.a_j = sin(phi - theta)."""
    a_j = _mv(A_j, a_bar_j)
    return jnp.cos(angle) * _dot(_mv(A_i, v_bar_i), a_j) - jnp.sin(angle) * _dot(
        _mv(A_i, u_bar_i), a_j
    )


# ----------------------------------------------------------------------------- rA rows


class RaRows(NamedTuple):
    """Hand-coded rA quantities of n stacked constraints.

    ``jac_i``/``jac_j``: (n, 6) Jacobian rows [Phi_r, Pi_bar(Phi)] for bodies i and j.
    ``quad``: (n,) the part of d^2 Phi/dt^2 that does not depend on accelerations, with the
    driver's f_ddot excluded; gamma = f_ddot - quad (eq. 18 with the f_ddot typo fixed).
    ``nu_extra``/``gamma_extra`` carry time-derivative terms that are not simply f_dot and
    f_ddot (only the rotation driver has them).
    """

    jac_i: jnp.ndarray
    jac_j: jnp.ndarray
    quad: jnp.ndarray


def _ang_vel_terms(A, w, s_bar):
    """d/dt (A s_bar) = A w~ s_bar and the velocity part of its second derivative, A w~ w~ s_bar."""
    ws = jnp.cross(w, s_bar)
    return _mv(A, ws), _mv(A, jnp.cross(w, ws))


def rA_dp1(A_i, w_i, A_j, w_j, a_bar_i, a_bar_j):
    """DP1 rows: theta_i: -a_bar_j^T A_j^T A_i a_bar_i~, theta_j: -a_bar_i^T A_i^T A_j a_bar_j~."""
    a_i, a_j = _mv(A_i, a_bar_i), _mv(A_j, a_bar_j)
    zero = jnp.zeros_like(a_i)
    th_i = -_row_vec_mat(a_j, A_i @ hat(a_bar_i))
    th_j = -_row_vec_mat(a_i, A_j @ hat(a_bar_j))
    da_i, qa_i = _ang_vel_terms(A_i, w_i, a_bar_i)
    da_j, qa_j = _ang_vel_terms(A_j, w_j, a_bar_j)
    quad = _dot(qa_i, a_j) + 2.0 * _dot(da_i, da_j) + _dot(a_i, qa_j)
    return RaRows(jnp.concatenate([zero, th_i], -1), jnp.concatenate([zero, th_j], -1), quad)


def _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j):
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    ds_i, qs_i = _ang_vel_terms(A_i, w_i, s_bar_p_i)
    ds_j, qs_j = _ang_vel_terms(A_j, w_j, s_bar_q_j)
    d_dot = rd_j + ds_j - rd_i - ds_i
    d_quad = qs_j - qs_i
    return d, d_dot, d_quad


def rA_dp2(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, a_bar_i, s_bar_p_i, s_bar_q_j):
    """DP2 rows (Table 2): r_i: -a_i^T, theta_i: a_bar_i^T s_bar_i~ - d^T A_i a_bar_i~,
    r_j: a_i^T, theta_j: -a_i^T A_j s_bar_j~."""
    a_i = _mv(A_i, a_bar_i)
    d, d_dot, d_quad = _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j)
    th_i = _row_vec_mat(a_bar_i, hat(s_bar_p_i)) - _row_vec_mat(d, A_i @ hat(a_bar_i))
    th_j = -_row_vec_mat(a_i, A_j @ hat(s_bar_q_j))
    da_i, qa_i = _ang_vel_terms(A_i, w_i, a_bar_i)
    quad = _dot(qa_i, d) + 2.0 * _dot(da_i, d_dot) + _dot(a_i, d_quad)
    return RaRows(jnp.concatenate([-a_i, th_i], -1), jnp.concatenate([a_i, th_j], -1), quad)


def rA_d(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j):
    """D rows (Table 2): r_i: -2 d^T, theta_i: 2 d^T A_i s_bar_i~, r_j: 2 d^T,
    theta_j: -2 d^T A_j s_bar_j~."""
    d, d_dot, d_quad = _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j)
    th_i = 2.0 * _row_vec_mat(d, A_i @ hat(s_bar_p_i))
    th_j = -2.0 * _row_vec_mat(d, A_j @ hat(s_bar_q_j))
    quad = 2.0 * _dot(d_dot, d_dot) + 2.0 * _dot(d, d_quad)
    return RaRows(jnp.concatenate([-2.0 * d, th_i], -1), jnp.concatenate([2.0 * d, th_j], -1), quad)


def rA_cd(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, c, s_bar_p_i, s_bar_q_j):
    """CD rows (Table 2): r_i: -c^T, theta_i: c^T A_i s_bar_i~, r_j: c^T,
    theta_j: -c^T A_j s_bar_j~."""
    _, _, d_quad = _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j)
    th_i = _row_vec_mat(c, A_i @ hat(s_bar_p_i))
    th_j = -_row_vec_mat(c, A_j @ hat(s_bar_q_j))
    return RaRows(jnp.concatenate([-c, th_i], -1), jnp.concatenate([c, th_j], -1), _dot(c, d_quad))


def rA_rot(
    A_i, w_i, A_j, w_j, u_bar_i, v_bar_i, a_bar_j, angle, angle_dot, angle_ddot, rd_i_dummy=None
):
    """Rotation driver rows and its full nu and gamma (it is not of the form g(q) - f(t)).

    With x = (v_i.a_j, u_i.a_j) and c(t) = (cos theta, -sin theta): Phi = c.x, so
    nu = -c_dot.x and gamma = -c.x_quad - 2 c_dot.x_dot - c_ddot.x. Returns
    (RaRows with quad = -gamma, nu).
    """
    v_rows = rA_dp1(A_i, w_i, A_j, w_j, v_bar_i, a_bar_j)
    u_rows = rA_dp1(A_i, w_i, A_j, w_j, u_bar_i, a_bar_j)
    a_j = _mv(A_j, a_bar_j)
    x = jnp.stack([_dot(_mv(A_i, v_bar_i), a_j), _dot(_mv(A_i, u_bar_i), a_j)], -1)
    # x_dot = J_x [v_i; v_j]; only the angular parts are nonzero for DP1.
    x_dot = jnp.stack(
        [
            _dot(v_rows.jac_i[:, 3:], w_i) + _dot(v_rows.jac_j[:, 3:], w_j),
            _dot(u_rows.jac_i[:, 3:], w_i) + _dot(u_rows.jac_j[:, 3:], w_j),
        ],
        -1,
    )
    s, co = jnp.sin(angle), jnp.cos(angle)
    c = jnp.stack([co, -s], -1)
    c_dot = angle_dot[:, None] * jnp.stack([-s, -co], -1)
    c_ddot = angle_ddot[:, None] * jnp.stack([-s, -co], -1) + (angle_dot**2)[:, None] * jnp.stack(
        [-co, s], -1
    )
    x_quad = jnp.stack([v_rows.quad, u_rows.quad], -1)
    jac_i = co[:, None] * v_rows.jac_i - s[:, None] * u_rows.jac_i
    jac_j = co[:, None] * v_rows.jac_j - s[:, None] * u_rows.jac_j
    gamma = -_dot(c, x_quad) - 2.0 * _dot(c_dot, x_dot) - _dot(c_ddot, x)
    nu = -_dot(c_dot, x)
    return RaRows(jac_i, jac_j, -gamma), nu
