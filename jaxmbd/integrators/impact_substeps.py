"""Sub-stepping through impacts: a step that meets a compliant impact is taken as ``substeps``
steps of h / substeps of the same integrator.

A compliant impact lasts a few of its own time scales t* = delta* / v with delta* =
(m_eff v^2 / K)^(1/(n+1)) (the units of :mod:`jaxmbd.contact.law`); a step of 1 ms spans
only a few of them for a stiff contact, and the restitution the run shows is then the
discrete map's, not the law's (generalized-alpha even over-shoots: the contact gains
energy). Resolving t* everywhere would cost every step; resolving it where a contact is
being hit costs a few steps per impact. A step is an impact step when a slot, at the start
of the step, is closing on its surface fast enough to touch within two steps (gap < 2 h
delta_dot) or is already in contact, and its energy speed v = sqrt(delta_dot^2 + 2 E / m_eff)
(E: the law's elastic energy) exceeds ``impact_speed`` and twice the energy speed of the
pair resting on the slot under gravity: a resting or sliding contact stays at the full
step.

The step is a fixed-count ``lax.scan`` of ``substeps`` passes over one copy of the
integrator's step: the first pass takes the whole step or its first sub-step, the others
the remaining sub-steps or nothing (``lax.cond``). The run stays differentiable in both
modes (the choice is piecewise constant) and batchable; under ``vmap`` every pass runs for
every member, so a batched step costs ``substeps`` steps.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import first_failure
from ..contact.element import ContactForce, contact_element
from ..model import Model
from ..newton import NewtonInfo
from .base import AbstractIntegrator

#: Sub-steps of an impact step (the default of ``simulate(impact_substeps=)``).
IMPACT_SUBSTEPS = 10
#: Energy speed (m/s) of a slot above which its contact is an impact (``impact_speed=``).
IMPACT_SPEED = 0.05


def impact_ahead(element: ContactForce, form, q, v, h, speed) -> jax.Array:
    """Whether a slot of ``element`` is being hit: in contact or touching within two steps
    at its approach rate, with an energy speed above ``speed`` and above twice the speed of
    the pair resting on it (module docstring)."""
    # a branch choice: no derivative
    element, q, v = jax.lax.stop_gradient((element, q, v))
    return impact_in(element, form.to_body_state(q, v, jnp.zeros_like(v))[:4], h, speed)


def impact_in(element: ContactForce, state, h, speed) -> jax.Array:
    """:func:`impact_ahead` at the bodies' ``state`` (r, A, rdot, omega) of any
    formulation."""
    gap, rate, energy_speed, rest_speed = element.impact_speeds(state)
    near = gap < 2.0 * h * jnp.maximum(rate, 0.0)
    return jnp.any(near & (energy_speed > jnp.maximum(speed, 2.0 * rest_speed)))


class ImpactSubsteps(AbstractIntegrator):
    """``inner`` with its impact steps taken as ``substeps`` steps of h / substeps (module
    docstring); everything else is ``inner``'s."""

    inner: AbstractIntegrator
    substeps: int = eqx.field(static=True, default=IMPACT_SUBSTEPS)
    speed: float = eqx.field(static=True, default=IMPACT_SPEED)
    requires: ClassVar[frozenset[str]] = frozenset()

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def __getattr__(self, item):  # the inner integrator's options (rho_inf, linear_solver)
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def init(self, model: Model, form, start, h):
        return self.inner.init(model, form, start, h)

    def with_state_tangents(self, state, extra):
        return self.inner.with_state_tangents(state, extra)

    def positions_velocities(self, state):
        return self.inner.positions_velocities(state)

    def redundant_constraints(self, model: Model) -> bool:
        return self.inner.redundant_constraints(model)

    def linear_solver_name(self, model: Model, form) -> str:
        return self.inner.linear_solver_name(model, form)

    def step(self, model: Model, form, state, k, h):
        element = contact_element(model)
        n = self.substeps
        q, v = self.inner.positions_velocities(state)
        hit = impact_ahead(element, form, q, v, h, self.speed)
        size = jnp.where(hit, h / n, h)

        def one(s, j):
            # sub-step j of an impact step (time index (k - 1) n + j of the step h / n), or
            # the whole step
            return self.inner.step(model, form, s, jnp.where(hit, (k - 1) * n + j, k), size)

        # one copy of the step in the program: a scan whose first pass takes the step (or
        # the first sub-step) and whose other passes take the sub-steps or nothing
        shape = jax.eval_shape(one, state, 1)[1]
        res = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shape)

        def sub(carry, j):
            s, res, info = carry

            def take(s):
                s, r = one(s, j)
                return (
                    s,
                    r,
                    NewtonInfo(
                        info.iterations + r.info.iterations,
                        first_failure(info.status, r.info.status),
                        jnp.maximum(info.residual_norm, r.info.residual_norm),
                        jnp.maximum(info.step_norm, r.info.step_norm),
                    ),
                )

            return jax.lax.cond(hit | (j == 1), take, lambda s: (s, res, info), s), None

        info = jax.tree.map(jnp.zeros_like, res.info)
        (state, res, info), _ = jax.lax.scan(sub, (state, res, info), jnp.arange(1, n + 1))
        return state, res._replace(info=info)


def with_impact_substeps(model: Model, stepper, substeps, speed=None):
    """``stepper`` wrapped in :class:`ImpactSubsteps` for a run of ``model`` with compliant
    contact pairs (``substeps`` None: :data:`IMPACT_SUBSTEPS`; 1: the stepper itself)."""
    substeps = IMPACT_SUBSTEPS if substeps is None else substeps
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"impact_substeps must be a positive integer, got {substeps!r}")
    element = contact_element(model)
    if element is None or element.n_slots == 0 or substeps == 1 or stepper.resolves_impacts:
        return stepper
    speed = IMPACT_SPEED if speed is None else float(speed)
    return ImpactSubsteps(stepper, substeps, speed)


__all__ = ["IMPACT_SPEED", "IMPACT_SUBSTEPS", "ImpactSubsteps", "impact_ahead"]
