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


# ----------------------------------------------------------------- reaction sensitivities


def _blocks(n):
    return jnp.zeros((n, 2, 2, 6, 6))


def _put(K, a, b, rows, cols, value):
    """K[:, a, b, rows, cols] += value (rows/cols: 'r' -> 0:3, 't' -> 3:6)."""
    r0 = 0 if rows == "r" else 3
    c0 = 0 if cols == "r" else 3
    return K.at[:, a, b, r0 : r0 + 3, c0 : c0 + 3].add(value)


def _lam(lam):
    return lam[:, None, None]


def rA_sensitivity_dp1(A_i, A_j, a_bar_i, a_bar_j, lam):
    """d/d(r, theta_bar) of the generalised reaction [Phi_r^T lam; Pi_bar^T lam] of DP1.

    Generalised torque on i: lam a_bar_i~ (A_i^T a_j); on j: lam a_bar_j~ (A_j^T a_i). Blocks
    K[:, a, b] (a: body acted on, b: body varied; 6x6 each). Paper 1 Table 3 up to the sign
    convention n^c = -Pi_bar^T lam.
    """
    n = lam.shape[0]
    a_i, a_j = _mv(A_i, a_bar_i), _mv(A_j, a_bar_j)
    Ai_aj = jnp.einsum("nji,nj->ni", A_i, a_j)
    Aj_ai = jnp.einsum("nji,nj->ni", A_j, a_i)
    Ait_Aj = jnp.einsum("nki,nkj->nij", A_i, A_j)
    hai, haj = hat(a_bar_i), hat(a_bar_j)
    L = _lam(lam)
    K = _blocks(n)
    K = _put(K, 0, 0, "t", "t", L * hai @ hat(Ai_aj))
    K = _put(K, 0, 1, "t", "t", -L * hai @ Ait_Aj @ haj)
    K = _put(K, 1, 1, "t", "t", L * haj @ hat(Aj_ai))
    K = _put(K, 1, 0, "t", "t", -L * haj @ jnp.swapaxes(Ait_Aj, -1, -2) @ hai)
    return K


def rA_sensitivity_cd(A_i, A_j, c, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of CD (Table 6): only the torques depend on the orientation."""
    n = lam.shape[0]
    L = _lam(lam)
    Ai_c = jnp.einsum("nji,nj->ni", A_i, c)
    Aj_c = jnp.einsum("nji,nj->ni", A_j, c)
    K = _blocks(n)
    K = _put(K, 0, 0, "t", "t", -L * hat(s_bar_p_i) @ hat(Ai_c))
    K = _put(K, 1, 1, "t", "t", L * hat(s_bar_q_j) @ hat(Aj_c))
    return K


def rA_sensitivity_d(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of D (Table 5). F_i = -2 lam d, T_i = -2 lam s_i~ A_i^T d,
    F_j = 2 lam d, T_j = 2 lam s_j~ A_j^T d with delta d = dr_j - A_j s_j~ th_j - dr_i +
    A_i s_i~ th_i."""
    n = lam.shape[0]
    L = _lam(lam)
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    eye = jnp.broadcast_to(jnp.eye(3), (n, 3, 3))
    hs_i, hs_j = hat(s_bar_p_i), hat(s_bar_q_j)
    Ais, Ajs = A_i @ hs_i, A_j @ hs_j
    Ait, Ajt = jnp.swapaxes(A_i, -1, -2), jnp.swapaxes(A_j, -1, -2)
    Ai_d, Aj_d = jnp.einsum("nij,nj->ni", Ait, d), jnp.einsum("nij,nj->ni", Ajt, d)
    # derivative of d with respect to (r_i, th_i, r_j, th_j)
    dd = [(-eye, "r", 0), (Ais, "t", 0), (eye, "r", 1), (-Ajs, "t", 1)]
    K = _blocks(n)
    for D, kind, b in dd:
        K = _put(K, 0, b, "r", kind, -2 * L * D)
        K = _put(K, 1, b, "r", kind, 2 * L * D)
        K = _put(K, 0, b, "t", kind, -2 * L * hs_i @ Ait @ D)
        K = _put(K, 1, b, "t", kind, 2 * L * hs_j @ Ajt @ D)
    K = _put(K, 0, 0, "t", "t", -2 * L * hs_i @ hat(Ai_d))
    K = _put(K, 1, 1, "t", "t", 2 * L * hs_j @ hat(Aj_d))
    return K


def rA_sensitivity_dp2(r_i, A_i, r_j, A_j, a_bar_i, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of DP2 (Table 4). F_i = -lam a_i, F_j = lam a_i,
    T_i = lam (a_bar_i~ A_i^T d - s_i~ a_bar_i), T_j = lam s_j~ A_j^T a_i."""
    n = lam.shape[0]
    L = _lam(lam)
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    a_i = _mv(A_i, a_bar_i)
    eye = jnp.broadcast_to(jnp.eye(3), (n, 3, 3))
    ha, hs_i, hs_j = hat(a_bar_i), hat(s_bar_p_i), hat(s_bar_q_j)
    Ait, Ajt = jnp.swapaxes(A_i, -1, -2), jnp.swapaxes(A_j, -1, -2)
    Aia = A_i @ ha
    K = _blocks(n)
    K = _put(K, 0, 0, "r", "t", L * Aia)
    K = _put(K, 1, 0, "r", "t", -L * Aia)
    dd = [(-eye, "r", 0), (A_i @ hs_i, "t", 0), (eye, "r", 1), (-A_j @ hs_j, "t", 1)]
    for D, kind, b in dd:
        K = _put(K, 0, b, "t", kind, L * ha @ Ait @ D)
    K = _put(K, 0, 0, "t", "t", L * ha @ hat(jnp.einsum("nij,nj->ni", Ait, d)))
    K = _put(K, 1, 1, "t", "t", L * hs_j @ hat(jnp.einsum("nij,nj->ni", Ajt, a_i)))
    K = _put(K, 1, 0, "t", "t", -L * hs_j @ Ajt @ Aia)
    return K


def rA_sensitivity_rot(A_i, A_j, u_bar_i, v_bar_i, a_bar_j, angle, lam):
    """Rotation driver: Phi = cos(theta) DP1(v_i, a_j) - sin(theta) DP1(u_i, a_j)."""
    return rA_sensitivity_dp1(A_i, A_j, v_bar_i, a_bar_j, lam * jnp.cos(angle)) + (
        rA_sensitivity_dp1(A_i, A_j, u_bar_i, a_bar_j, -lam * jnp.sin(angle))
    )
