"""Backward Euler for index-3 DAEs (paper 1 section 3, eqs. 32 and 40).

v_{n+1} = v_n + h a_{n+1} and q_{n+1} = q_n (+) h v_{n+1}: for rA the rotation update is
A_{n+1} = A_n exp(h omega_bar_{n+1}~) (eq. 32). First order in positions, velocities,
accelerations and multipliers; strongly dissipative (rho_inf = 0).
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ..newton import AbstractNewton, ReusedNewton
from .base import AbstractImplicitIntegrator, Discretisation, StepResult


class BackwardEuler(AbstractImplicitIntegrator):
    """Index-3 backward Euler with the 1/h^2 constraint scaling of eq. 33a."""

    name: ClassVar[str] = "backward_euler"
    newton: AbstractNewton = ReusedNewton()
    tol: float | None = None
    linear_solver: str = "auto"

    def init(self, model, form, start, h):
        return self.implicit_init(model, form, start)

    def step(self, model, form, state, k, h):
        disc = Discretisation(d0=h * state.v.reshape(-1), c_q=h**2, v0=state.v, c_v=h)
        x, q1, v1, info, newton = self.solve_step(model, form, state, disc, k, h)
        n = model.nb * form.tangent_size
        a1 = x[:n].reshape(state.v.shape)
        lam = x[n : n + form.num_multipliers(model)]
        history = jnp.stack([x, state.history[0], state.history[1]])
        new = state._replace(q=q1, v=v1, history=history, newton=newton)
        return new, StepResult(q1, v1, a1, lam, info)
