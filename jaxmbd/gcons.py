"""The basic geometric constraints (GCONs) DP1, DP2, D, CD and the rotation driver.

Kernels act on *stacked* constraints of one type (docs/design.md, principle 3): every input has a
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

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp

from . import _config  # noqa: F401
from .compiled.small import dot, mm, mtm, mv, row_vec_mat
from .lie import hat

# Small-matrix products are the unrolled sums of jaxmbd.compiled.small (fused loops instead of tiny
# batched dots on XLA:CPU); the short names are the ones the kernels below use.
_mv, _dot, _row_vec_mat, _mm, _mtm = mv, dot, row_vec_mat, mm, mtm


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
    th_i = jnp.cross(a_bar_i, _row_vec_mat(a_j, A_i))  # = -a_j^T A_i a_bar_i~
    th_j = jnp.cross(a_bar_j, _row_vec_mat(a_i, A_j))
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
    th_i = jnp.cross(a_bar_i, s_bar_p_i + _row_vec_mat(d, A_i))
    th_j = jnp.cross(s_bar_q_j, _row_vec_mat(a_i, A_j))
    da_i, qa_i = _ang_vel_terms(A_i, w_i, a_bar_i)
    quad = _dot(qa_i, d) + 2.0 * _dot(da_i, d_dot) + _dot(a_i, d_quad)
    return RaRows(jnp.concatenate([-a_i, th_i], -1), jnp.concatenate([a_i, th_j], -1), quad)


def rA_d(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j):
    """D rows (Table 2): r_i: -2 d^T, theta_i: 2 d^T A_i s_bar_i~, r_j: 2 d^T,
    theta_j: -2 d^T A_j s_bar_j~."""
    d, d_dot, d_quad = _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j)
    th_i = 2.0 * jnp.cross(_row_vec_mat(d, A_i), s_bar_p_i)
    th_j = -2.0 * jnp.cross(_row_vec_mat(d, A_j), s_bar_q_j)
    quad = 2.0 * _dot(d_dot, d_dot) + 2.0 * _dot(d, d_quad)
    return RaRows(jnp.concatenate([-2.0 * d, th_i], -1), jnp.concatenate([2.0 * d, th_j], -1), quad)


def rA_cd(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, c, s_bar_p_i, s_bar_q_j):
    """CD rows (Table 2): r_i: -c^T, theta_i: c^T A_i s_bar_i~, r_j: c^T,
    theta_j: -c^T A_j s_bar_j~."""
    _, _, d_quad = _d_and_derivs(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s_bar_p_i, s_bar_q_j)
    th_i = jnp.cross(_row_vec_mat(c, A_i), s_bar_p_i)
    th_j = -jnp.cross(_row_vec_mat(c, A_j), s_bar_q_j)
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


class _Blocks:
    """Collects 3x3 pieces of the (n, 2, 2, 6, 6) sensitivity blocks; assembled in one stack."""

    def __init__(self, n):
        self.n = n
        self.parts = {}

    def add(self, a, b, rows, cols, value):
        key = (a, b, rows, cols)
        self.parts[key] = self.parts[key] + value if key in self.parts else value

    def assemble(self):
        zero = jnp.zeros((self.n, 3, 3))

        def piece(a, b, rows, cols):
            return self.parts.get((a, b, rows, cols), zero)

        def block(a, b):
            return jnp.concatenate(
                [
                    jnp.concatenate([piece(a, b, rw, "r"), piece(a, b, rw, "t")], -1)
                    for rw in ("r", "t")
                ],
                -2,
            )

        return jnp.stack([jnp.stack([block(a, b) for b in (0, 1)], 1) for a in (0, 1)], 1)


def _lam(lam):
    return lam[:, None, None]


def _transpose(M):
    return jnp.swapaxes(M, -1, -2)


def rA_sensitivity_dp1(A_i, A_j, a_bar_i, a_bar_j, lam):
    """d/d(r, theta_bar) of the generalised reaction [Phi_r^T lam; Pi_bar^T lam] of DP1.

    Generalised torque on i: lam a_bar_i~ (A_i^T a_j); on j: lam a_bar_j~ (A_j^T a_i). Blocks
    K[:, a, b] (a: body acted on, b: body varied; 6x6 each). Paper 1 Table 3 up to the sign
    convention n^c = -Pi_bar^T lam.
    """
    B = _Blocks(lam.shape[0])
    _dp1_pieces(B, A_i, A_j, a_bar_i, a_bar_j, lam)
    return B.assemble()


def _dp1_pieces(B, A_i, A_j, a_bar_i, a_bar_j, lam):
    a_i, a_j = _mv(A_i, a_bar_i), _mv(A_j, a_bar_j)
    Ai_aj = _row_vec_mat(a_j, A_i)
    Aj_ai = _row_vec_mat(a_i, A_j)
    Ait_Aj = _mtm(A_i, A_j)
    hai, haj = hat(a_bar_i), hat(a_bar_j)
    L = _lam(lam)
    B.add(0, 0, "t", "t", L * _mm(hai, hat(Ai_aj)))
    B.add(0, 1, "t", "t", -L * _mm(hai, _mm(Ait_Aj, haj)))
    B.add(1, 1, "t", "t", L * _mm(haj, hat(Aj_ai)))
    B.add(1, 0, "t", "t", -L * _mm(haj, _mm(_transpose(Ait_Aj), hai)))


def rA_sensitivity_cd(A_i, A_j, c, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of CD (Table 6): only the torques depend on the orientation."""
    L = _lam(lam)
    B = _Blocks(lam.shape[0])
    B.add(0, 0, "t", "t", -L * _mm(hat(s_bar_p_i), hat(_row_vec_mat(c, A_i))))
    B.add(1, 1, "t", "t", L * _mm(hat(s_bar_q_j), hat(_row_vec_mat(c, A_j))))
    return B.assemble()


def rA_sensitivity_d(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of D (Table 5). F_i = -2 lam d, T_i = -2 lam s_i~ A_i^T d,
    F_j = 2 lam d, T_j = 2 lam s_j~ A_j^T d with delta d = dr_j - A_j s_j~ th_j - dr_i +
    A_i s_i~ th_i."""
    n = lam.shape[0]
    L = _lam(lam)
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    eye = jnp.broadcast_to(jnp.eye(3), (n, 3, 3))
    hs_i, hs_j = hat(s_bar_p_i), hat(s_bar_q_j)
    Ais, Ajs = _mm(A_i, hs_i), _mm(A_j, hs_j)
    hs_i_Ait, hs_j_Ajt = _mm(hs_i, _transpose(A_i)), _mm(hs_j, _transpose(A_j))
    B = _Blocks(n)
    # derivative of d with respect to (r_i, th_i, r_j, th_j)
    for D, kind, b in ((-eye, "r", 0), (Ais, "t", 0), (eye, "r", 1), (-Ajs, "t", 1)):
        B.add(0, b, "r", kind, -2 * L * D)
        B.add(1, b, "r", kind, 2 * L * D)
        B.add(0, b, "t", kind, -2 * L * _mm(hs_i_Ait, D))
        B.add(1, b, "t", kind, 2 * L * _mm(hs_j_Ajt, D))
    B.add(0, 0, "t", "t", -2 * L * _mm(hs_i, hat(_row_vec_mat(d, A_i))))
    B.add(1, 1, "t", "t", 2 * L * _mm(hs_j, hat(_row_vec_mat(d, A_j))))
    return B.assemble()


def rA_sensitivity_dp2(r_i, A_i, r_j, A_j, a_bar_i, s_bar_p_i, s_bar_q_j, lam):
    """Reaction sensitivity of DP2 (Table 4). F_i = -lam a_i, F_j = lam a_i,
    T_i = lam (a_bar_i~ A_i^T d - s_i~ a_bar_i), T_j = lam s_j~ A_j^T a_i."""
    n = lam.shape[0]
    L = _lam(lam)
    d = _d_ij(r_i, A_i, r_j, A_j, s_bar_p_i, s_bar_q_j)
    a_i = _mv(A_i, a_bar_i)
    eye = jnp.broadcast_to(jnp.eye(3), (n, 3, 3))
    ha, hs_i, hs_j = hat(a_bar_i), hat(s_bar_p_i), hat(s_bar_q_j)
    Aia = _mm(A_i, ha)
    ha_Ait = _mm(ha, _transpose(A_i))
    B = _Blocks(n)
    B.add(0, 0, "r", "t", L * Aia)
    B.add(1, 0, "r", "t", -L * Aia)
    for D, kind, b in (
        (-eye, "r", 0),
        (_mm(A_i, hs_i), "t", 0),
        (eye, "r", 1),
        (-_mm(A_j, hs_j), "t", 1),
    ):
        B.add(0, b, "t", kind, L * _mm(ha_Ait, D))
    B.add(0, 0, "t", "t", L * _mm(ha, hat(_row_vec_mat(d, A_i))))
    B.add(1, 1, "t", "t", L * _mm(hs_j, hat(_row_vec_mat(a_i, A_j))))
    B.add(1, 0, "t", "t", -L * _mm(hs_j, _mtm(A_j, Aia)))
    return B.assemble()


def rA_sensitivity_rot(A_i, A_j, u_bar_i, v_bar_i, a_bar_j, angle, lam):
    """Rotation driver: Phi = cos(theta) DP1(v_i, a_j) - sin(theta) DP1(u_i, a_j)."""
    B = _Blocks(lam.shape[0])
    _dp1_pieces(B, A_i, A_j, v_bar_i, a_bar_j, lam * jnp.cos(angle))
    _dp1_pieces(B, A_i, A_j, u_bar_i, a_bar_j, -lam * jnp.sin(angle))
    return B.assemble()


# ----------------------------------------------------------------------------- the records
#
# Each kernel below takes one stacked GconSet ``s`` (duck-typed: its vector fields) and the
# poses gathered for it. ``rows_of(x)`` picks the set's rows of a per-row array (the driver
# values f, f_dot, f_ddot), so that a kind takes only what it reads.


def _value_dp1(s, r_i, A_i, r_j, A_j, f):
    return value_dp1(A_i, A_j, s.a_bar_i, s.a_bar_j, f)


def _value_dp2(s, r_i, A_i, r_j, A_j, f):
    return value_dp2(r_i, A_i, r_j, A_j, s.a_bar_i, s.s_bar_p_i, s.s_bar_q_j, f)


def _value_d(s, r_i, A_i, r_j, A_j, f):
    return value_d(r_i, A_i, r_j, A_j, s.s_bar_p_i, s.s_bar_q_j, f)


def _value_cd(s, r_i, A_i, r_j, A_j, f):
    return value_cd(r_i, A_i, r_j, A_j, s.c, s.s_bar_p_i, s.s_bar_q_j, f)


def _value_rot(s, r_i, A_i, r_j, A_j, f):
    return value_rot(A_i, A_j, s.a_bar_i, s.b_bar_i, s.a_bar_j, f)


def _driven_by_f(rows_kernel):
    """rA quantities of a kind of the form g(q) - f(t): nu = f_dot, gamma = f_ddot - quad."""

    def rA(s, poses, rows_of, f, f_dot, f_ddot):
        out = rows_kernel(s, *poses)
        return out, rows_of(f_dot), rows_of(f_ddot) - out.quad

    return rA


def _rA_dp1(s, r_i, A_i, r_j, A_j, rd_i, w_i, rd_j, w_j):
    return rA_dp1(A_i, w_i, A_j, w_j, s.a_bar_i, s.a_bar_j)


def _rA_dp2(s, r_i, A_i, r_j, A_j, rd_i, w_i, rd_j, w_j):
    return rA_dp2(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s.a_bar_i, s.s_bar_p_i, s.s_bar_q_j)


def _rA_d(s, r_i, A_i, r_j, A_j, rd_i, w_i, rd_j, w_j):
    return rA_d(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s.s_bar_p_i, s.s_bar_q_j)


def _rA_cd(s, r_i, A_i, r_j, A_j, rd_i, w_i, rd_j, w_j):
    return rA_cd(r_i, A_i, rd_i, w_i, r_j, A_j, rd_j, w_j, s.c, s.s_bar_p_i, s.s_bar_q_j)


def _rA_rot_set(s, poses, rows_of, f, f_dot, f_ddot):
    _, A_i, _, A_j, _, w_i, _, w_j = poses
    out, nu = rA_rot(A_i, w_i, A_j, w_j, s.a_bar_i, s.b_bar_i, s.a_bar_j,
                     rows_of(f), rows_of(f_dot), rows_of(f_ddot))  # fmt: skip
    return out, nu, -out.quad


def _sens_dp1(s, r_i, A_i, r_j, A_j, lam, f_rows):
    return rA_sensitivity_dp1(A_i, A_j, s.a_bar_i, s.a_bar_j, lam)


def _sens_dp2(s, r_i, A_i, r_j, A_j, lam, f_rows):
    return rA_sensitivity_dp2(r_i, A_i, r_j, A_j, s.a_bar_i, s.s_bar_p_i, s.s_bar_q_j, lam)


def _sens_d(s, r_i, A_i, r_j, A_j, lam, f_rows):
    return rA_sensitivity_d(r_i, A_i, r_j, A_j, s.s_bar_p_i, s.s_bar_q_j, lam)


def _sens_cd(s, r_i, A_i, r_j, A_j, lam, f_rows):
    return rA_sensitivity_cd(A_i, A_j, s.c, s.s_bar_p_i, s.s_bar_q_j, lam)


def _sens_rot(s, r_i, A_i, r_j, A_j, lam, f_rows):
    return rA_sensitivity_rot(A_i, A_j, s.a_bar_i, s.b_bar_i, s.a_bar_j, f_rows(), lam)


@dataclass(frozen=True)
class GconKind:
    """One GCON kind: its kernels and how its rows read as Phi = u.w - beta f.

    ``value(s, r_i, A_i, r_j, A_j, f)``: Phi of the stacked set ``s``.
    ``rA(s, poses, rows_of, f, f_dot, f_ddot)``: (RaRows, nu, gamma) with poses the
    gathered (r_i, A_i, r_j, A_j, rdot_i, omega_i, rdot_j, omega_j).
    ``sensitivity(s, r_i, A_i, r_j, A_j, lam, f_rows)``: the (n, 2, 2, 6, 6) blocks of
    d(G^T lam)/d(r, theta_bar); ``f_rows()`` gives the set's driver values.
    ``row_vectors(s)``: the nonzero vectors of the row form (``p_bar``, ``q_bar``,
    ``w_bar``, ``s_bar_p``, ``s_bar_q``, ``c``) and ``alpha``, ``delta``, ``beta``,
    ``kappa`` its 0/1 coefficients (the table of :mod:`jaxmbd.constraints.equations`).
    ``fields``: the builder's vector keywords. ``point_rank``: how well a row marks where
    a joint attaches (0 best; None: no points). ``joins_points``: its rows make two body
    points coincide (an attachment, not a slide). ``file_value``: the file key of f
    (``"angle"`` for the rotation driver). ``positive_f``: f must be > 0 (a squared
    distance)."""

    name: str
    fields: tuple[str, ...]
    value: Callable
    rA: Callable
    sensitivity: Callable
    row_vectors: Callable
    alpha: float = 0.0
    delta: float = 0.0
    beta: float = 1.0
    kappa: float = 0.0
    point_rank: int | None = None
    file_value: str = "f"
    positive_f: bool = False
    joins_points: bool = False

    @property
    def has_points(self) -> bool:
        """Its rows carry body points (s_bar_p_i, s_bar_q_j)."""
        return self.point_rank is not None

    @property
    def builder_method(self) -> str:
        """The :class:`~jaxmbd.ModelBuilder` method that adds a row (f by the keyword
        ``file_value``)."""
        return f"add_{self.name.lower()}"

    @property
    def angle_driven(self) -> bool:
        """Its f(t) is an angle the rows turn with (not subtracted: beta = 0)."""
        return self.kappa != 0.0


DP1 = GconKind(
    "DP1", ("a_bar_i", "a_bar_j"), _value_dp1, _driven_by_f(_rA_dp1), _sens_dp1,
    lambda s: {"p_bar": s.a_bar_i, "w_bar": s.a_bar_j},
)  # fmt: skip
DP2 = GconKind(
    "DP2", ("a_bar_i", "s_bar_p_i", "s_bar_q_j"), _value_dp2, _driven_by_f(_rA_dp2), _sens_dp2,
    lambda s: {"p_bar": s.a_bar_i, "s_bar_p": s.s_bar_p_i, "s_bar_q": s.s_bar_q_j},
    delta=1.0, point_rank=1,
)  # fmt: skip
D = GconKind(
    "D", ("s_bar_p_i", "s_bar_q_j"), _value_d, _driven_by_f(_rA_d), _sens_d,
    lambda s: {"s_bar_p": s.s_bar_p_i, "s_bar_q": s.s_bar_q_j},
    alpha=1.0, delta=1.0, point_rank=2, positive_f=True,
)  # fmt: skip
CD = GconKind(
    "CD", ("c", "s_bar_p_i", "s_bar_q_j"), _value_cd, _driven_by_f(_rA_cd), _sens_cd,
    lambda s: {"s_bar_p": s.s_bar_p_i, "s_bar_q": s.s_bar_q_j, "c": s.c},
    delta=1.0, point_rank=0, joins_points=True,
)  # fmt: skip
ROT = GconKind(
    "ROT", ("u_bar_i", "v_bar_i", "a_bar_j"), _value_rot, _rA_rot_set, _sens_rot,
    lambda s: {"p_bar": s.b_bar_i, "q_bar": -s.a_bar_i, "w_bar": s.a_bar_j},
    beta=0.0, kappa=1.0, file_value="angle",
)  # fmt: skip

#: Every GCON kind, in the order of ``Model.gcons``.
GCON_SPECS: tuple[GconKind, ...] = (DP1, DP2, D, CD, ROT)
#: The records by name (the strings of files, the builder and ``Model.constraint_kinds``).
GCON_BY_NAME: dict[str, GconKind] = {spec.name: spec for spec in GCON_SPECS}


def gcon_kind(name: str) -> GconKind:
    """The record of the GCON kind ``name``."""
    try:
        return GCON_BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown GCON kind {name!r}; known: {list(GCON_BY_NAME)}") from None
