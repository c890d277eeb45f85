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

from . import _config  # noqa: F401


class BodyState(NamedTuple):
    """Positions and velocities of all bodies (ground excluded); omega in the body frame."""

    r: jax.Array
    A: jax.Array
    rdot: jax.Array
    omega: jax.Array


class AbstractForce(eqx.Module):
    """An applied force element."""

    @abc.abstractmethod
    def __call__(self, t, state: BodyState) -> tuple[jax.Array, jax.Array]:
        """Return (f (nb, 3) global forces at the centres of mass, n_bar (nb, 3) body torques)."""


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


def applied_forces(forces, t, state: BodyState, mass, gravity):
    """Sum of gravity and all force elements: (f (nb, 3), n_bar (nb, 3))."""
    f = mass[:, None] * gravity[None, :]
    n = jnp.zeros_like(f)
    for element in forces:  # one term per force element (a handful), not per constraint
        df, dn = element(t, state)
        f, n = f + df, n + dn
    return f, n
