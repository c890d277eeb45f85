"""How a joint-space run steps compliant contact: the Newton contact solve and sub-steps
through impacts, as the absolute formulations take them, on the tree's joint coordinates.

**The Newton solve.** A stopping block's friction saturates within a slip of
``slip_velocity`` (1e-4 m/s): a step linearised once (``implicit``) flips the stopped
block's velocity to -v each step, and being of first order it misses Coulomb's stopping
distance by v0 h / 2 (2e-3 of it at h = 1e-3). The implicit steps solved by Newton
(``gen_alpha``, ``backward_euler``: :mod:`jaxmbd.joint_space.implicit_steppers`) take the
nonlinear step exactly; with contact pairs they default to
:class:`~jaxmbd.newton.line_search.LineSearchNewton` (exact Newton cycles between the two flat
sides of the saturated law) and ``gen_alpha`` to ``rho_inf = 0``
(:data:`~jaxmbd.integrators.generalized_alpha.CONTACT_RHO_INF`: the stiff contact mode is
damped out within a step instead of ringing), as :func:`jaxmbd.simulate` sets them for the
absolute formulations. The unknowns are the joints' accelerations (velocities for
backward Euler), the Newton matrix the residual's Jacobian in joint space
(M(q) and the forces' Jacobians through the forward kinematics' point Jacobians), nv x nv
for a tree.

**Impact sub-steps.** A compliant impact lasts a few of its own time scales t* = delta* / v
(:mod:`jaxmbd.integrators.impact_substeps`); a step of 1 ms spans only a few of them for a
stiff contact, and the restitution the run shows is the discrete map's, not the law's. A
step whose start has a slot in contact or closing to touch within two steps, with an
energy speed above ``impact_speed`` and twice the pair's resting speed (the slots' body
states from the forward kinematics), is taken as ``substeps`` steps of h / substeps of
the same stepper (a fixed-count ``lax.scan`` over one copy of the step, each pass after
the first a ``lax.cond``); resting and sliding contacts stay at the full step.

Models read from a file (MJCF, URDF) step as MuJoCo steps them by default: its
linearly implicit step at the file's time step, without sub-steps (their contact numbers,
restitution and slip velocity, are MuJoCo's at that step, :mod:`jaxmbd.mjcf._contact`),
and one solve a step is what makes a robot fast (dm_control's hopper at its 5 ms: 2361
steps/s, 31 with the Newton step and sub-steps before that step's solve was compiled into
the loop, not measured since; ``benchmarks/probes/hopper_contact_ab.py`` times the
default); any of them takes the Newton step and the sub-steps when asked."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..contact.element import contact_element
from ..integrators.generalized_alpha import CONTACT_RHO_INF
from ..integrators.impact_substeps import IMPACT_SPEED, IMPACT_SUBSTEPS, impact_in
from ..model import Model
from ..newton.line_search import LineSearchNewton
from ..tree import body_velocities
from ._stepper_base import AbstractJointStepper
from .dynamics import Accelerations
from .forces import body_state

#: The :func:`jaxmbd.simulate` options of the sub-steps (:func:`with_impact_substeps`).
SUBSTEP_OPTIONS = ("impact_substeps", "impact_speed")


def impact_ahead(element, tree, acc: Accelerations, qvel, h, speed) -> jax.Array:
    """Whether a slot of ``element`` is being hit at the state of ``acc`` (its poses) and
    ``qvel``: in contact or touching within two steps at its approach rate, with an energy
    speed above ``speed`` and twice the speed of the pair resting on it (module docstring;
    :func:`jaxmbd.integrators.impact_substeps.impact_ahead` on the tree's body states)."""
    # a branch choice: no derivative
    element, p, qvel = jax.lax.stop_gradient((element, acc.poses, qvel))
    rdot, omega = body_velocities(tree, p, qvel)
    return impact_in(element, body_state(p, rdot, omega), h, speed)


class JointImpactSubsteps(AbstractJointStepper):
    """``inner`` with its impact steps taken as ``substeps`` steps of h / substeps (module
    docstring); everything else is ``inner``'s."""

    inner: AbstractJointStepper
    substeps: int = eqx.field(static=True, default=IMPACT_SUBSTEPS)
    speed: float = eqx.field(static=True, default=IMPACT_SPEED)
    resolves_impacts: ClassVar[bool] = True
    # the sub-steps' choice reads the start's accelerations, and each sub-step ends with its
    # own: a start computed apart would add one evaluation per step, no code less
    state_accelerations: ClassVar[bool] = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *,
                            warm=None) -> Accelerations:  # fmt: skip
        return self.inner.start_accelerations(model, tree, loops, qpos, qvel, t, h, warm=warm)

    def finish(self, model, tree, loops, qpos, qvel, t, h):
        return self.inner.finish(model, tree, loops, qpos, qvel, t, h)

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        return self.advance(model, tree, loops, qpos, qvel, acc, t, h)[:2]

    def advance(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        n = self.substeps
        hit = impact_ahead(contact_element(model), tree, acc, qvel, h, self.speed)
        size = jnp.where(hit, h / n, h)

        def sub(carry, j):
            def take(c):
                return self.inner.advance(model, tree, loops, *c, t + (j - 1) * size, size)

            return jax.lax.cond(hit | (j == 1), take, lambda c: c, carry), None

        (qpos, qvel, acc), _ = jax.lax.scan(sub, (qpos, qvel, acc), jnp.arange(1, n + 1))
        return qpos, qvel, acc


def _has(stepper, field: str) -> bool:
    return field in getattr(type(stepper), "__dataclass_fields__", {})


def contact_options(model: Model, stepper: AbstractJointStepper, options: dict) -> dict:
    """``options`` of ``stepper`` for a run of ``model`` (module docstring): with contact
    pairs a Newton-solved step without a ``newton`` option gets
    :class:`~jaxmbd.newton.line_search.LineSearchNewton` (``max_iter`` moves onto it), one with
    ``rho_inf`` without it :data:`CONTACT_RHO_INF`."""
    if contact_element(model) is None or not _has(stepper, "newton"):
        return options
    options = dict(options)
    if options.get("newton") is None:
        max_iter = options.pop("max_iter", None)
        options["newton"] = LineSearchNewton() if max_iter is None else LineSearchNewton(
            max_iter=max_iter)  # fmt: skip
    if _has(stepper, "rho_inf") and options.get("rho_inf") is None:
        options["rho_inf"] = CONTACT_RHO_INF
    return options


def with_impact_substeps(model: Model, stepper: AbstractJointStepper, substeps=None,
                         speed=None) -> AbstractJointStepper:  # fmt: skip
    """``stepper`` wrapped in :class:`JointImpactSubsteps` for a run of ``model`` with
    compliant contact pairs (``substeps`` None: :data:`IMPACT_SUBSTEPS` for a model built
    in code, 1 for one read from a file; 1: the stepper itself)."""
    if substeps is None:
        substeps = IMPACT_SUBSTEPS if model.tree is None else 1
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"impact_substeps must be a positive integer, got {substeps!r}")
    element = contact_element(model)
    if element is None or element.n_slots == 0 or substeps == 1 or stepper.resolves_impacts:
        return stepper
    speed = IMPACT_SPEED if speed is None else float(speed)
    return JointImpactSubsteps(stepper, substeps, speed)


__all__ = [
    "SUBSTEP_OPTIONS",
    "JointImpactSubsteps",
    "contact_options",
    "impact_ahead",
    "with_impact_substeps",
]
