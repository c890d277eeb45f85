"""Applied forces: pure, differentiable JAX functions of (t, state, parameters).

Each element returns the global force on every body's centre of mass, ``f (nb, 3)``, and
the applied torque in every body frame, ``n_bar (nb, 3)`` (paper 1 eq. 31a). Gravity is not
an element: it is ``model.gravity`` times the masses. Parameters are array leaves, so
``jax.grad`` reaches stiffness, damping and user parameters.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401


class BodyState(NamedTuple):
    """Positions and velocities of all bodies (ground excluded); omega in the body frame."""

    r: jax.Array
    A: jax.Array
    rdot: jax.Array
    omega: jax.Array


class AddedMass(NamedTuple):
    """Inertia that a force element adds along p scalar coordinates of the bodies' motion
    (joint armature, :mod:`jaxmbd.joint_dynamics`): the kinetic energy
    1/2 sum_k a_k q_dot_k^2 with q_dot_k = g_k . V, V the stacked hybrid twists
    (r_dot, omega_bar) of the coordinate's two bodies.

    ``inertia`` a (p,); ``gradient`` g (p, 4, 3), the gradients of each coordinate with
    respect to the twists (delta r_i, theta_bar_i, delta r_j, theta_bar_j) of its bodies
    ``body_i``, ``body_j`` (static (p,) numpy; nb is the ground, whose rows are ignored).

    By Lagrange-d'Alembert the element's force along q_k is -a_k q_ddot_k with
    q_ddot_k = g_k . V_dot + g_dot_k . V: the element returns the velocity part
    -a_k (g_dot_k . V) g_k from ``__call__`` like any force, and the formulations add the
    acceleration part -a_k (g_k . V_dot) g_k, i.e. the mass sum_k a_k g_k g_k^T in body-twist
    coordinates (:func:`added_mass_forces`, :func:`added_mass_matrix`), which couples the
    two bodies when neither is the ground."""

    inertia: jax.Array
    gradient: jax.Array
    body_i: np.ndarray
    body_j: np.ndarray


class AbstractForce(eqx.Module):
    """An applied force element."""

    @abc.abstractmethod
    def __call__(self, t, state: BodyState) -> tuple[jax.Array, jax.Array]:
        """Return (f (nb, 3) global forces at the centres of mass, n_bar (nb, 3) body torques)."""

    @property
    def adds_mass(self) -> bool:
        """Whether :meth:`added_mass` gives inertia (static: known when tracing). Elements
        that add mass must set it so that formulations and solvers include the coupling."""
        return False

    def added_mass(self, t, state: BodyState) -> AddedMass | None:
        """The :class:`AddedMass` of the element at ``state`` (None: none, the default).
        Its velocity part belongs in ``__call__``; see :class:`AddedMass`."""
        return None


def _point_kinematics(state: BodyState, body: int, s_bar):
    """Global position and velocity of a body point; ``body == nb`` is the ground."""
    nb = state.r.shape[0]
    if body == nb:
        return s_bar, jnp.zeros(3)
    A = state.A[body]
    p = state.r[body] + A @ s_bar
    v = state.rdot[body] + A @ jnp.cross(state.omega[body], s_bar)
    return p, v


def _apply_point_force(state: BodyState, body: int, s_bar, force):
    """Generalised force of a global ``force`` acting at body point ``s_bar``."""
    nb = state.r.shape[0]
    f = jnp.zeros((nb, 3))
    n = jnp.zeros((nb, 3))
    if body == nb:
        return f, n
    f = f.at[body].add(force)
    n = n.at[body].add(jnp.cross(s_bar, state.A[body].T @ force))  # n_bar = s_bar~ A^T f
    return f, n


class PointForce(AbstractForce):
    """A force ``fn(t, params)`` (global frame, 3-vector) acting at a point of one body."""

    body: int = eqx.field(static=True)
    s_bar: jax.Array
    fn: Callable = eqx.field(static=True)
    params: jax.Array

    def __call__(self, t, state):
        return _apply_point_force(state, self.body, self.s_bar, self.fn(t, self.params))


class BodyTorque(AbstractForce):
    """A torque ``fn(t, params)`` given in the body frame of one body."""

    body: int = eqx.field(static=True)
    fn: Callable = eqx.field(static=True)
    params: jax.Array

    def __call__(self, t, state):
        nb = state.r.shape[0]
        n = jnp.zeros((nb, 3)).at[self.body].add(self.fn(t, self.params))
        return jnp.zeros((nb, 3)), n


class SpringDamper(AbstractForce):
    """Translational spring-damper between point P of body i and point Q of body j.

    Tension T = stiffness (l - rest_length) + damping l_dot acts along the line PQ, pulling
    the points together when positive. ``body == nb`` denotes the ground (points global).
    """

    body_i: int = eqx.field(static=True)
    body_j: int = eqx.field(static=True)
    s_bar_p_i: jax.Array
    s_bar_q_j: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    rest_length: jax.Array

    def __call__(self, t, state):
        p, vp = _point_kinematics(state, self.body_i, self.s_bar_p_i)
        q, vq = _point_kinematics(state, self.body_j, self.s_bar_q_j)
        d = q - p
        length = jnp.sqrt(jnp.sum(d * d) + 1e-30)
        e = d / length
        length_dot = e @ (vq - vp)
        tension = self.stiffness * (length - self.rest_length) + self.damping * length_dot
        fi, ni = _apply_point_force(state, self.body_i, self.s_bar_p_i, tension * e)
        fj, nj = _apply_point_force(state, self.body_j, self.s_bar_q_j, -tension * e)
        return fi + fj, ni + nj


class GeneralForce(AbstractForce):
    """Any user law ``fn(t, state, params) -> (f (nb, 3), n_bar (nb, 3))``."""

    fn: Callable = eqx.field(static=True)
    params: jax.Array | dict | tuple

    def __call__(self, t, state):
        return self.fn(t, state, self.params)


def adds_mass(forces) -> bool:
    """Whether any force element adds mass (joint armature; static)."""
    return any(f.adds_mass for f in forces)


def added_mass(forces, t, state: BodyState) -> AddedMass | None:
    """The :class:`AddedMass` of all force elements at ``state`` (concatenated), or None."""
    parts = [f.added_mass(t, state) for f in forces if f.adds_mass]
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return AddedMass(
        jnp.concatenate([p.inertia for p in parts]),
        jnp.concatenate([p.gradient for p in parts]),
        np.concatenate([np.asarray(p.body_i, dtype=int) for p in parts]),
        np.concatenate([np.asarray(p.body_j, dtype=int) for p in parts]),
    )


def _twist_rates(am: AddedMass, rdot, omega):
    """g_k . V (p,) for per-body rows (nb, 3) of linear and angular rates (ground at rest)."""
    pad = jnp.zeros((1, 3), rdot.dtype)
    v, w = jnp.concatenate([rdot, pad]), jnp.concatenate([omega, pad])
    g, bi, bj = am.gradient, am.body_i, am.body_j
    return jnp.sum(g[:, 0] * v[bi] + g[:, 1] * w[bi] + g[:, 2] * v[bj] + g[:, 3] * w[bj], -1)


def added_mass_forces(am: AddedMass, rddot, omegadot):
    """(f, n_bar) (nb, 3) of the acceleration part -a_k (g_k . V_dot) g_k of the added mass
    for body accelerations V_dot = (r_ddot, omegadot_bar) (nb, 3) each: minus the added mass
    matrix times V_dot, applied through the virtual work like a joint force."""
    nb = rddot.shape[0]
    force = (-am.inertia * _twist_rates(am, rddot, omegadot))[:, None]
    g, bi, bj = am.gradient, am.body_i, am.body_j
    f = jnp.zeros((nb + 1, 3), rddot.dtype).at[bi].add(force * g[:, 0]).at[bj].add(force * g[:, 2])
    n = jnp.zeros((nb + 1, 3), rddot.dtype).at[bi].add(force * g[:, 1]).at[bj].add(force * g[:, 3])
    return f[:nb], n[:nb]


def added_mass_matrix(am: AddedMass, nb: int):
    """sum_k a_k g_k g_k^T (6 nb, 6 nb) in body-major hybrid twist coordinates
    (r_dot, omega_bar) of every body (the ground's rows dropped)."""
    p = am.inertia.shape[0]
    rows = jnp.zeros((p, nb + 1, 6), am.gradient.dtype)
    k = np.arange(p)
    rows = rows.at[k, am.body_i].add(am.gradient[:, :2].reshape(p, 6))
    rows = rows.at[k, am.body_j].add(am.gradient[:, 2:].reshape(p, 6))
    rows = rows[:, :nb].reshape(p, 6 * nb)
    return jnp.einsum("k,ki,kj->ij", am.inertia, rows, rows)


def added_kinetic_energy(am: AddedMass, rdot, omega):
    """1/2 sum_k a_k (g_k . V)^2: the kinetic energy of the added mass (armature)."""
    return 0.5 * jnp.sum(am.inertia * _twist_rates(am, rdot, omega) ** 2)


def applied_forces(forces, t, state: BodyState, mass, gravity):
    """Sum of gravity and all force elements: (f (nb, 3), n_bar (nb, 3))."""
    from ._joint_forces import AbstractJointForce, joint_forces_together

    f = mass[:, None] * gravity[None, :]
    n = jnp.zeros_like(f)
    # the joint-force elements (limits, joint dynamics, actuators) together: each joint's
    # coordinates evaluated once, however many of them act on it
    joint_elements = [e for e in forces if isinstance(e, AbstractJointForce)]
    if len(joint_elements) > 1:
        df, dn = joint_forces_together(joint_elements, t, state)
        f, n = f + df, n + dn
        forces = [e for e in forces if not isinstance(e, AbstractJointForce)]
    for element in forces:  # one term per force element (a handful), not per constraint
        df, dn = element(t, state)
        f, n = f + df, n + dn
    return f, n
