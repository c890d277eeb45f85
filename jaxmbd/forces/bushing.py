"""Bushing: a linear 6-DOF spring-damper between a frame on each of two bodies.

A bushing joins the frame F_i (origin s_bar_i, axes E_i, fixed in body i) and the frame
F_j (s_bar_j, E_j on body j) that coincide in the drawn pose. Its deflection
s = (d, theta) (6,) is measured in F_i's axes C_i = A_i E_i:

    d     = C_i^T (p_j - p_i),      p = r + A s_bar       (translation, m),
    theta = log(C_i^T C_j)                                (rotation vector, rad),

with ``log`` the SO(3) logarithm (:func:`jaxmbd.lie.so3_log`; its small-angle branch is
NaN-safe). theta is the rotation vector of the relative rotation, not a set of Cardan
angles: the two agree to second order in the angle (for a rotation about one bushing axis
exactly), and theta has no gimbal lock and no preferred axis order. With the diagonal
stiffness K = diag(k) and damping C = diag(c) (6,) each (N/m, N m/rad; N s/m, N m s/rad)
the bushing stores the energy V = 1/2 s^T K s and its force is, by virtual work,

    Q = -J^T (K s + C s_dot),   J = ds/d(twist), s_dot = J V,

J the gradient of s with respect to the twists (delta r_i, theta_bar_i, delta r_j,
theta_bar_j) of the two bodies (autodiff of the map above) and V their rates
(r_dot, omega_bar): the force on each body's centre of mass (global) and the torque in its
body frame. So the power of the bushing's forces is -d/dt V - s_dot^T C s_dot exactly:
with damping, energy decreases by the integral of s_dot^T C s_dot (Rayleigh
dissipation), and the linearisation about the drawn pose is K in F_i's axes. Everything
is differentiable; ``stiffness`` and ``damping`` are array leaves.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..lie import hat, so3_log
from . import AbstractForce, BodyState, ForceOutput, register_force_type

#: The fields of a bushing's model-file entry besides its name and bodies.
_FILE_KEYS = ("s_bar_i", "s_bar_j", "frame_i", "frame_j", "stiffness", "damping")


@register_force_type("bushing")
class Bushing(AbstractForce):
    """A bushing between body ``body_i`` and ``body_j`` (indices; ``nb``: the ground), at
    the body-frame points ``s_bar_i``, ``s_bar_j`` (3,) with body-frame axes ``frame_i``,
    ``frame_j`` (3, 3, columns); ``stiffness`` and ``damping`` (6,): translation along,
    then rotation about, the axes of ``frame_i`` (see the module docstring)."""

    name: str = eqx.field(static=True)
    body_i: int = eqx.field(static=True)
    body_j: int = eqx.field(static=True)
    s_bar_i: jax.Array
    s_bar_j: jax.Array
    frame_i: jax.Array
    frame_j: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    file_keys: ClassVar[frozenset[str]] = frozenset({"body_i", "body_j", *_FILE_KEYS})

    @property
    def bodies(self):
        return (self.body_i, self.body_j)

    def to_json(self, body_label):
        return {
            "name": self.name,
            "type": self.file_type,
            "body_i": body_label(self.body_i),
            "body_j": body_label(self.body_j),
            **{key: np.asarray(getattr(self, key)).tolist() for key in _FILE_KEYS},
        }

    @classmethod
    def from_json(cls, builder, entry):
        builder._add_bushing(
            entry.string("name"),
            entry.string("body_i"),
            entry.string("body_j"),
            **{key: entry.get(key) for key in _FILE_KEYS[:4]},
            stiffness=entry.get("stiffness"),
            damping=entry.get("damping", None),
        )

    def _pose(self, state: BodyState, body: int):
        if body == state.r.shape[0]:  # the ground
            return jnp.zeros(3, state.r.dtype), jnp.eye(3, dtype=state.r.dtype)
        return state.r[body], state.A[body]

    def _rates(self, state: BodyState, body: int):
        if body == state.r.shape[0]:
            return jnp.zeros(3, state.r.dtype), jnp.zeros(3, state.r.dtype)
        return state.rdot[body], state.omega[body]

    def deflection_and_gradient(self, state: BodyState):
        """The deflection s (6,) at ``state`` and its gradient J (6, 4, 3) with respect to
        the twists (delta r_i, theta_bar_i, delta r_j, theta_bar_j) of the two bodies."""
        r_i, A_i = self._pose(state, self.body_i)
        r_j, A_j = self._pose(state, self.body_j)

        def deflection(tw):
            a_i = A_i @ (jnp.eye(3) + hat(tw[1]))
            a_j = A_j @ (jnp.eye(3) + hat(tw[3]))
            c_i, c_j = a_i @ self.frame_i, a_j @ self.frame_j
            d = c_i.T @ (r_j + tw[2] + a_j @ self.s_bar_j - r_i - tw[0] - a_i @ self.s_bar_i)
            return jnp.concatenate([d, so3_log(c_i.T @ c_j)])

        zero = jnp.zeros((4, 3), state.r.dtype)
        return deflection(zero), jax.jacfwd(deflection)(zero)

    def deflection(self, state: BodyState):
        """(s, s_dot) (6,) each: the deflection and its rate at ``state``."""
        s, J = self.deflection_and_gradient(state)
        v_i, w_i = self._rates(state, self.body_i)
        v_j, w_j = self._rates(state, self.body_j)
        twist = jnp.stack([v_i, w_i, v_j, w_j])
        return s, jnp.einsum("kab,ab->k", J, twist)

    @property
    def output_name(self):
        return self.name

    def outputs(self, context):
        """The generalised wrench -(K s + C s_dot) on body j along and about F_i's axes (the
        force, N, and, to first order in the rotation, the torque, N m), the deflection s
        and its rate s_dot (6 each)."""
        s, s_dot = self.deflection(context.state)
        return {self.name: ForceOutput(-(self.stiffness * s + self.damping * s_dot), s, s_dot)}

    @property
    def output_batch_ndim(self):
        return jnp.ndim(self.stiffness) - 1

    def __call__(self, t, state: BodyState):
        s, J = self.deflection_and_gradient(state)
        v_i, w_i = self._rates(state, self.body_i)
        v_j, w_j = self._rates(state, self.body_j)
        s_dot = jnp.einsum("kab,ab->k", J, jnp.stack([v_i, w_i, v_j, w_j]))
        generalised = -jnp.einsum("k,kab->ab", self.stiffness * s + self.damping * s_dot, J)
        nb = state.r.shape[0]
        # rows on the ground (index nb) are summed into a row that is dropped
        f = jnp.zeros((nb + 1, 3), state.r.dtype)
        n = jnp.zeros((nb + 1, 3), state.r.dtype)
        f = f.at[self.body_i].add(generalised[0]).at[self.body_j].add(generalised[2])
        n = n.at[self.body_i].add(generalised[1]).at[self.body_j].add(generalised[3])
        return f[:nb], n[:nb]

    def potential_energy(self, state: BodyState):
        """1/2 s^T K s (counted by :func:`jaxmbd.analysis.diagnostics.energy`)."""
        s, _ = self.deflection_and_gradient(state)
        return 0.5 * jnp.sum(self.stiffness * s * s)

    def dissipation(self, state: BodyState):
        """The power the dampers take out, s_dot^T C s_dot (W): with it, the energy balance
        E(t) + integral of the dissipation = E(0) holds exactly (module docstring)."""
        _, s_dot = self.deflection(state)
        return jnp.sum(self.damping * s_dot * s_dot)


__all__ = ["Bushing"]
