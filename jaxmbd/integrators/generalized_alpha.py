"""Lie group generalized-alpha (Arnold & Bruls 2007; Bruls, Cardona & Arnold 2012).

With the acceleration-like variable a_hat (Chung & Hulbert's recurrence),

    q_{n+1} = q_n (+) h dq_n,   dq_n = v_n + h (1/2 - beta) a_hat_n + h beta a_hat_{n+1},
    v_{n+1} = v_n + h (1 - gamma) a_hat_n + h gamma a_hat_{n+1},
    (1 - alpha_m) a_hat_{n+1} + alpha_m a_hat_n = (1 - alpha_f) a_{n+1} + alpha_f a_n,

and the equations of motion and constraints at t_{n+1}. For rA the update is
A_{n+1} = A_n exp(h dtheta_n~) on SO(3) and additive on r (SO(3) x R^3); rp and re step
their coordinates as vectors. a_{n+1} is the true acceleration; the unknowns are
(a_{n+1}, lam_{n+1}) with the Newton matrix scaled by beta' h^2 (Arnold & Bruls,
Algorithm 1).

Variants:

* ``"index3"``: Phi(q_{n+1}) = 0 only. Positions and velocities are second order, but a and
  lam carry an O(h) start-up perturbation that decays geometrically, ever more slowly as
  rho_inf -> 1, and not at all at rho_inf = 1 (Arnold, Bruls & Cardona 2015).
* ``"stabilised"`` (default, GGL): the position increment gains beta' h^2 G(q_n)^T mu and both
  Phi(q_{n+1}) = 0 and G v_{n+1} = nu hold at every step; q, v, a and lam converge at second
  order without the transient.

Parameters from the spectral radius at infinity rho_inf in [0, 1] (Chung & Hulbert 1993):
alpha_m = (2 rho - 1) / (rho + 1), alpha_f = rho / (rho + 1), gamma = 1/2 + alpha_f -
alpha_m, beta = (gamma + 1/2)^2 / 4: second order, unconditionally stable (linear), maximal
high-frequency dissipation for the given rho_inf.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ..newton import AbstractNewton, ReusedNewton
from .base import (
    AbstractImplicitIntegrator,
    Discretisation,
    ImplicitState,
    StepResult,
    fields_with_tangents,
)

VARIANTS = ("stabilised", "index3")


class Coefficients(NamedTuple):
    alpha_m: float
    alpha_f: float
    beta: float
    gamma: float


#: rho_inf of gen_alpha for models with contact pairs unless given
#: (:func:`jaxmbd.analysis.simulation.simulate`, :mod:`jaxmbd.joint_space.contact_step`).
CONTACT_RHO_INF = 0.0


def coefficients(rho_inf: float) -> Coefficients:
    """Chung-Hulbert parameters of the spectral radius at infinity (second order); a JAX
    array ``rho_inf`` gives arrays (one compiled program for every value)."""
    rho = rho_inf if isinstance(rho_inf, jax.Array) else float(rho_inf)
    alpha_m = (2.0 * rho - 1.0) / (rho + 1.0)
    alpha_f = rho / (rho + 1.0)
    gamma = 0.5 + alpha_f - alpha_m
    beta = 0.25 * (gamma + 0.5) ** 2
    return Coefficients(alpha_m, alpha_f, beta, gamma)


class GenAlphaState(NamedTuple):
    implicit: ImplicitState
    a: jax.Array  # true accelerations a_n (nb, ts)
    a_hat: jax.Array  # acceleration-like variable (nb, ts)


class GeneralizedAlpha(AbstractImplicitIntegrator):
    """Second-order Lie group generalized-alpha; ``variant`` "stabilised" (GGL) or "index3".

    ``rho_inf`` = 0.9 by default (Exudyn's and Arnold & Bruls' choice): it damps the
    spurious high-frequency response of the index-3 constraints and of an inconsistent start
    within tens of steps, while the error constant stays within a few percent of the
    non-dissipative rho_inf = 1. Use rho_inf = 1 when energy must not decay (no numerical
    dissipation; the index-3 variant then keeps its start-up transient).
    """

    name: ClassVar[str] = "gen_alpha"
    newton: AbstractNewton = ReusedNewton()
    tol: float | None = None
    linear_solver: str = "auto"
    rho_inf: float = 0.9
    variant: str = "stabilised"

    def __check_init__(self):
        if not (0.0 <= float(self.rho_inf) <= 1.0):
            raise ValueError(f"gen_alpha: rho_inf must lie in [0, 1], got {self.rho_inf!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"gen_alpha: variant must be one of {VARIANTS}, got {self.variant!r}")

    @property
    def stabilised(self) -> bool:
        return self.variant == "stabilised"

    def with_state_tangents(self, state, extra):
        extra = (extra, state.a, state.a_hat)
        implicit = fields_with_tangents(state.implicit, ("q", "v", "history"), (), extra)
        return fields_with_tangents(state._replace(implicit=implicit), ("a", "a_hat"), (), extra)

    def init(self, model, form, start, h):
        return GenAlphaState(self.implicit_init(model, form, start), start.a, start.a)

    def positions_velocities(self, state: GenAlphaState):
        return state.implicit.q, state.implicit.v

    def step(self, model, form, state: GenAlphaState, k, h):
        am, af, beta, gamma = coefficients(self.rho_inf)
        s = state.implicit
        # a_hat_{n+1} = a_hat_known + (1 - af) / (1 - am) a_{n+1}
        a_hat_known = (af * state.a - am * state.a_hat) / (1.0 - am)
        ratio = (1.0 - af) / (1.0 - am)
        d0 = h * s.v + h**2 * ((0.5 - beta) * state.a_hat + beta * a_hat_known)
        v0 = s.v + h * ((1.0 - gamma) * state.a_hat + gamma * a_hat_known)
        disc = Discretisation(
            d0=d0.reshape(-1), c_q=h**2 * beta * ratio, v0=v0, c_v=h * gamma * ratio
        )
        x, q1, v1, info, newton = self.solve_step(model, form, s, disc, k, h)
        n = model.nb * form.tangent_size
        a1 = x[:n].reshape(s.v.shape)
        lam = x[n : n + form.num_multipliers(model)]
        history = jnp.stack([x, s.history[0], s.history[1]])
        implicit = s._replace(q=q1, v=v1, history=history, newton=newton)
        new = GenAlphaState(implicit, a1, a_hat_known + ratio * a1)
        return new, StepResult(q1, v1, a1, lam, info)


__all__ = ["GeneralizedAlpha", "coefficients", "Coefficients", "VARIANTS"]
