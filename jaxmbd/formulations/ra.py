"""The rA formulation (paper 1 sections 2.1 and 3.1): the rotation matrix itself is unknown.

Newton corrections rotate A on the right, A <- A exp(theta_bar~) (eq. 12); the Jacobian
is hand-coded from the Pi-bar variations (Table 2) in :mod:`jaxmbd.gcons`.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

from ..compiled.small import dot, mm, mv, row_vec_mat
from ..constraints.equations import (
    _row_bodies,
    constraint_values,
    rA_generalized_reaction,
    rA_jacobian_from_rows,
    rA_reaction_sensitivity,
    rA_rows,
    rA_terms,
    rA_velocity_sensitivity,
    take_rows,
)
from ..forces import BodyState, added_mass, added_mass_matrix, adds_mass, applied_forces
from ..forces._rigid_body import gyroscopic_damping, gyroscopic_torque, mass_blocks
from ..lie import reorthonormalize, so3_dexpinv, so3_exp, so3_right_jacobian
from .base import AbstractFormulation, DynamicsBlocks
from .index1 import rA_index1_system


class RA(AbstractFormulation):
    name: ClassVar[str] = "rA"
    tangent_size: ClassVar[int] = 6
    stores_own_coordinates: ClassVar[bool] = False  # q = (r, A), v = (r_dot, omega_bar)
    default_integrator: ClassVar[str] = "gen_alpha"
    body_state_coordinates: ClassVar[bool] = True
    hoistable_implicit_step: ClassVar[bool] = True
    index3_blocks: ClassVar[bool] = True
    index1_blocks: ClassVar[bool] = True
    lie_group: ClassVar[bool] = True  # SO(3) x R^3

    def coordinates(self, A):
        return A

    def rotation(self, ori):
        return ori

    def rate_from_omega(self, ori, omega):
        return omega

    def omega_from_rate(self, ori, rate, rate_dot):
        return rate, rate_dot

    def from_body_state(self, r, A, rdot, omega, rddot, omegadot):
        # the velocity rows are (r_dot, omega_bar) themselves (any leading axes: a Solution's)
        v = jnp.concatenate([rdot, omega], -1)
        return (r, A), v, jnp.concatenate([rddot, omegadot], -1)

    def dexpinv(self, delta, v, *, sign: int = -1):
        """Munthe-Kaas increment on SO(3) x R^3 (Mueller & Terze eqs. 11, 19, 37): per body
        (r_dot, dexp^-1_{sign delta_theta} omega_bar) for delta (nb, 6); sign = -1 for the
        left-trivialised body rate."""
        w = jnp.einsum("bij,bj->bi", so3_dexpinv(sign * delta[:, 3:]), v[:, 3:])
        return jnp.concatenate([v[:, :3], w], 1)

    def index1_system(self, model, q, v, t):
        """The hand-coded index-1 KKT blocks
        (:func:`~jaxmbd.formulations.index1.rA_index1_system`)."""
        return rA_index1_system(model, q, v, t)

    def retract(self, q, delta):
        r, A = q
        d = delta.reshape(r.shape[0], 6)
        # re-orthonormalised: round-off must not accumulate over long runs
        return r + d[:, :3], reorthonormalize(mm(A, so3_exp(d[:, 3:])))

    def predict(self, q, v, h):
        """Eq. 11: A exp(h omega_bar~); r + h r_dot."""
        r, A = q
        return r + h * v[:, :3], reorthonormalize(mm(A, so3_exp(h * v[:, 3:])))

    def residual(self, model, q, t):
        return constraint_values(model, q[0], q[1], t)

    def position_terms(self, model, q, t):
        r, A = q
        phi, jac_i, jac_j = rA_rows(model, r, A, t)
        return phi, rA_jacobian_from_rows(model, jac_i, jac_j)

    def velocity_terms(self, model, q, t):
        r, A = q
        zero = jnp.zeros_like(r)
        _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
        return G, nu

    def acceleration_rhs(self, model, q, v, t):
        r, A = q
        return rA_terms(model, r, A, v[:, :3], v[:, 3:], t)[3]

    # -- continuous-time dynamics (eqs. 30-31, 38c blocks) -----------------------------------
    def tangent_map(self, delta):
        """diag(I, J_r(theta_bar)) per body: A exp((theta + d theta)~) = A exp(theta~)
        exp((J_r(theta) d theta)~) to first order."""
        d = delta.reshape(-1, 6)
        nb = d.shape[0]
        eye = jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
        zeros = jnp.zeros((nb, 3, 3))
        J_r = so3_right_jacobian(d[:, 3:])
        return jnp.concatenate(
            [jnp.concatenate([eye, zeros], 2), jnp.concatenate([zeros, J_r], 2)], 1
        )

    def times_tangent_map(self, matrix, delta):
        return _times_tangent_map(matrix, so3_right_jacobian(delta.reshape(-1, 6)[:, 3:]))

    def _state_forces(self, model, q, v, t, a=None):
        """(f, n_bar) of gravity and the force elements, with accelerations ``a`` also the
        acceleration part -sum a_k (g_k . a) g_k of their added mass (joint armature)."""
        r, A = q
        f, n = applied_forces(
            model.forces, t, BodyState(r, A, v[:, :3], v[:, 3:]), model.mass, model.gravity
        )
        inertial = None if a is None else self.added_mass_forces(model, q, v, a, t)
        if inertial is not None:
            f, n = f + inertial[0], n + inertial[1]
        return f, n

    def dynamics_equations(self, model, q, v, a, lam, t):
        """Eq. 31a: [M r_ddot + Phi_r^T lam - f; J w_dot + w~ J w + Pi^T lam - n_bar], and Phi."""
        return self._dynamics_terms(model, q, v, a, lam, t, linearise=False)[:2]

    def dynamics_and_velocity_equations(self, model, q, v, a, lam, t):
        """Eq. 31a, Phi and G v + Phi_t from one evaluation of the rows and their t-derivative."""
        r, A = q
        t = jnp.asarray(t, v.dtype)
        rows, (phi_t, _, _) = jax.jvp(lambda s: rA_rows(model, r, A, s), (t,), (jnp.ones_like(t),))
        g, phi = self._dynamics_terms(model, q, v, a, lam, t, linearise=False, rows=rows)[:2]
        return g, phi, self._times_rows(model, rows, v) + phi_t

    def _times_rows(self, model, rows, v):
        """G v row by row from the one-batch rows (no dense G)."""
        _, jac_i, jac_j = rows
        bi, bj = _row_bodies(model)
        v_all = jnp.concatenate([v, jnp.zeros((1, 6), v.dtype)])
        return dot(jac_i, take_rows(v_all, bi)) + dot(jac_j, take_rows(v_all, bj))

    def dynamics_linearisation(self, model, q, v, a, lam, t):
        """The blocks of the Newton matrix of eq. 38c, hand-coded from the Pi-bar variations
        and the reaction-force sensitivities of Tables 3-6 (K = d(G^T lam)/d(r, theta_bar))."""
        return DynamicsBlocks(*self._dynamics_terms(model, q, v, a, lam, t, linearise=True))

    def _dynamics_terms(self, model, q, v, a, lam, t, *, linearise: bool, rows=None):
        nb = model.nb
        r, A = q
        phi, jac_i, jac_j = rA_rows(model, r, A, t) if rows is None else rows
        f, n = self._state_forces(model, q, v, t, a)
        w = v[:, 3:]
        J = model.inertia
        reaction = rA_generalized_reaction(model, jac_i, jac_j, lam)
        g_r = model.mass[:, None] * a[:, :3] + reaction[:, :3] - f
        g_w = mv(J, a[:, 3:]) + gyroscopic_torque(J, w) + reaction[:, 3:] - n
        g = jnp.concatenate([g_r, g_w], 1).reshape(-1)
        if not linearise:
            return g, phi
        G = rA_jacobian_from_rows(model, jac_i, jac_j)
        mass = _block_diagonal(mass_blocks(model.mass, J))
        if adds_mass(model.forces):  # joint armature: sum a_k g_k g_k^T, coupling bodies
            state = BodyState(r, A, v[:, :3], w)
            mass = mass + added_mass_matrix(added_mass(model.forces, t, state), nb)
        # only the gyroscopic term depends on the velocities: diag(0, d(w~ J w)/dw)
        # a pad, not ``.at[].set``: the latter's transpose is a scatter (no hoisted loop)
        damping = jnp.pad(gyroscopic_damping(J, w), ((0, 0), (3, 0), (3, 0)))
        damping = _block_diagonal(damping)
        stiffness = rA_reaction_sensitivity(model, r, A, lam, t)
        if model.forces:
            force_q, force_v = self._force_sensitivity(model, q, v, t, a)
            stiffness = stiffness - force_q
            damping = damping - force_v
        return g, phi, mass, damping, stiffness, G

    def velocity_residual(self, model, q, v, t):
        """G v - nu = G v + Phi_t (eq. 15b) from the one-batch rows: Phi_t by a forward
        derivative in t alone, G v row by row (no dense G)."""
        if model.nc == 0:
            return jnp.zeros((0,), v.dtype)
        r, A = q
        t = jnp.asarray(t, v.dtype)
        rows, (phi_t, _, _) = jax.jvp(lambda s: rA_rows(model, r, A, s), (t,), (jnp.ones_like(t),))
        return self._times_rows(model, rows, v) + phi_t

    def velocity_residual_linearisation(self, model, q, v, t):
        """d(G v - nu)/d(r, theta_bar), hand-coded from the per-constraint blocks of Tables
        3-6 contracted with v (see
        :func:`~jaxmbd.constraints.equations.rA_velocity_sensitivity`)."""
        return rA_velocity_sensitivity(model, q[0], q[1], v, t)

    def _force_sensitivity(self, model, q, v, t, a=None):
        """d(f, n_bar)/d(r, theta_bar) and d(f, n_bar)/d(r_dot, omega_bar) by autodiff of the
        force laws (case by case in the paper); with ``a``, at those accelerations (the
        added mass's -M_a(q) a depends on the configuration)."""
        nb = model.nb

        def forces(dq, dv):
            q_ = self.retract(q, dq)
            f, n = self._state_forces(model, q_, v + dv.reshape(nb, 6), t, a)
            return jnp.concatenate([f, n], 1).reshape(-1)

        z = jnp.zeros(6 * nb)
        return jax.jacfwd(forces, argnums=(0, 1))(z, z)


def _times_tangent_map(M, J_r):
    """M diag(I, J_r(h w_b))_b for M with 6 nb body-major columns, in O(rows nb), not a dense
    (6 nb)^3 product with the block-diagonal matrix: only the rotation columns change."""
    rows, nb = M.shape[0], J_r.shape[0]
    blocks = M.reshape(rows, nb, 2, 3)
    rotation = row_vec_mat(blocks[:, :, 1, :], J_r[None])
    return jnp.stack([blocks[:, :, 0], rotation], axis=2).reshape(rows, 6 * nb)


def _block_diagonal(blocks):
    """(nb, k, k) -> (nb k, nb k) block-diagonal matrix without a Python loop."""
    nb, k, _ = blocks.shape
    eye = jnp.eye(nb, dtype=blocks.dtype)
    # an elementwise product, not an einsum: a dot would keep a step from being hoisted
    # into one native loop (jaxmbd.linear.small)
    return (eye[:, None, :, None] * blocks[:, :, None, :]).reshape(nb * k, nb * k)
