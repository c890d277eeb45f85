"""One rigid body at its centre of mass: mass blocks, Newton-Euler forces, Euler tensor.

The one copy of this physics that every formulation, integrator and analysis uses. A body
of mass m and inertia J (about its centre of mass, in the body frame), with centre-of-mass
velocity r_dot and body angular velocity omega_bar, obeys the Newton-Euler equations
(paper 1 eq. 31a; Mueller & Terze eq. 3 for the index-1 form)

    m r_ddot = f,        J omegadot_bar + omega_bar~ J omega_bar = n_bar,

with f the global force at the centre of mass and n_bar the body-frame torque of gravity
and the force elements (:func:`jaxmbd.forces.applied_forces`). Its mass block is
diag(m I, J) and its generalised force (f, n_bar - omega_bar~ J omega_bar).

Small stacked products use :mod:`jaxmbd.compiled.small` (the time-stepping hot path).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.small import mm, mv
from ..lie import hat
from . import BodyState, applied_forces


def mass_blocks(mass, inertia, *, angular_first: bool = False):
    """Per-body mass blocks (nb, 6, 6): diag(m I, J) for velocity rows (r_dot, omega_bar)
    (paper 1 eq. 31a), or diag(J, m I) with ``angular_first`` for the body twist
    (omega_bar, v_bar) of se3 (Mueller & Terze eq. 6). ``mass`` (nb,), ``inertia``
    (nb, 3, 3)."""
    nb = mass.shape[0]
    translation = mass[:, None, None] * jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
    zeros = jnp.zeros((nb, 3, 3), inertia.dtype)
    first, second = (inertia, translation) if angular_first else (translation, inertia)
    return jnp.concatenate(
        [jnp.concatenate([first, zeros], 2), jnp.concatenate([zeros, second], 2)], 1
    )


def gyroscopic_torque(inertia, omega):
    """omega_bar~ J omega_bar (nb, 3): the gyroscopic term of Euler's equation (eq. 31a)."""
    return jnp.cross(omega, mv(inertia, omega))


def gyroscopic_damping(inertia, omega):
    """d(omega_bar~ J omega_bar)/d omega_bar = omega_bar~ J - (J omega_bar)~ (nb, 3, 3): the
    angular damping block of the Newton matrix (paper 1 eq. 38c)."""
    return mm(hat(omega), inertia) - hat(mv(inertia, omega))


def newton_euler_forces(model, t, state: BodyState):
    """(f (nb, 3), n_bar - omega_bar~ J omega_bar (nb, 3)): the right-hand side of the
    Newton-Euler equations at ``state``, gravity and every force element included."""
    f, n_bar = applied_forces(model.forces, t, state, model.mass, model.gravity)
    return f, n_bar - gyroscopic_torque(model.inertia, state.omega)


def euler_tensor(inertia):
    """E = tr(J)/2 I - J (..., 3, 3) of inertia tensors J: the second moment of mass about
    the centre of mass, E = int x_bar x_bar^T dm (J = tr(E) I - E), in the frame of J. It is
    Betsch & Leyendecker's Euler tensor (eq. 20), the mass of the director velocities, and
    Dumitriu & Margaritescu's Poinsot tensor K (eq. 11), the mass of the rotation-matrix
    rates."""
    trace = jnp.trace(inertia, axis1=-2, axis2=-1)
    return 0.5 * trace[..., None, None] * jnp.eye(3) - inertia


__all__ = [
    "euler_tensor",
    "gyroscopic_damping",
    "gyroscopic_torque",
    "mass_blocks",
    "newton_euler_forces",
]
