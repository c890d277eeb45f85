"""Static equilibrium: the pose where the applied loads and the joint reactions balance.

At rest (v = 0, a = 0) the formulation's equations of motion (for rA eq. 31a with the
constraints, paper 1) reduce to

    F(q, lam) = [ G(q)^T lam - Q(q, t) ;  Phi(q, t) ] = 0,

Q the applied forces (gravity, springs, bushings, joint stiffness and limits, actuators at
their current controls, compliant contact at rest). :func:`static_equilibrium` solves it by
Newton on the formulation's own manifold (q (+) delta, the same retraction and the same
residual the integrators use; its matrix by forward-mode autodiff of that residual), from
the model's initial pose or a given one.

**Load stepping.** With ``load_steps = n > 1`` it follows the Newton homotopy
F(x) - (1 - s) F(x_0), s = 1/n, 2/n, ..., 1: at s = 0 the start x_0 = (q_0, 0) solves it
exactly (a fictitious load equal to the start's imbalance holds it), and each stage
removes 1/n of that load, starting from the previous stage's root. It reaches equilibria
that a single Newton solve from a far start misses (a soft spring under a heavy load), at
n solves' cost. The last stage is the true equilibrium F = 0.

**Gradients** are implicit (:func:`jaxmbd.newton.implicit_root`): d(equilibrium)/d(any
model array) = -(dF/dx)^-1 dF/dparams, never through the Newton iterations. A neutral
equilibrium (a free coordinate without stiffness, e.g. a cart on a rail) is found (the
Newton corrections are minimum-norm least squares, and leave such a coordinate where it
starts) but has no unique derivative.

The start's multipliers are the least-squares reactions of its pose: at lam = 0 the
matrix would lack the reactions' geometric stiffness, which is the only stiffness of a
hanging pendulum.

Redundant rows (an overconstrained loop) are dropped as in :func:`~jaxmbd.simulate`
(``redundant="drop"``) and their multipliers are zero. Compliant friction is velocity
regularised: at rest it carries no load, so a body on a frictional incline has no static
equilibrium in this model.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._checks import is_traced
from .._parameter_checks import checked_parameters, parameters_invalid
from .._results import INVALID_PARAMETERS, code_message, result_from_code
from ..constraints.redundancy import full_multipliers, rows_for_run
from ..errors import SolverError
from ..formulations import get_formulation
from ..joint_space import independent_loop_rows, model_tree, rest_multipliers
from ..joint_space.analysis import static_residual
from ..model import Model
from ..newton import ROUNDOFF, Scale, implicit_root, newton_iterate
from ..solution import Solution
from ..tree import poses
from ..tree._mujoco_layout import tree_layout
from .initial_state import to_formulation
from .kinematics import position_scale
from .plan import (
    absolute_only_requests,
    absolute_refusals,
    default_formulation,
    refusal_message,
    treated_model,
)


class Equilibrium(eqx.Module):
    """A static equilibrium: ``r`` (nb, 3), ``A`` (nb, 3, 3) the pose, ``lam`` (nc,) the
    multipliers of the model's constraint rows (the reactions, as in a Solution: the force
    on the bodies is -G^T lam; :meth:`as_solution` for
    :func:`~jaxmbd.analysis.diagnostics.reaction_forces`), ``t`` the time, ``status`` the integer
    RESULTS code of the last stage (0: converged; :attr:`result`), ``iterations`` the
    Newton iterations of all stages, ``residual`` the last stage's residual norm, ``stage``
    the load stage that failed (-1 when none did)."""

    r: jax.Array
    A: jax.Array
    lam: jax.Array
    status: jax.Array
    iterations: jax.Array
    residual: jax.Array
    stage: jax.Array
    t: jax.Array
    #: The joint coordinates (nq,) in the tree's (MuJoCo's) layout, for an equilibrium
    #: found in joint coordinates (``formulation="joint"``); None otherwise.
    qpos: jax.Array | None = None
    body_names: tuple[str, ...] = eqx.field(static=True, default=())
    constraint_names: tuple[str, ...] = eqx.field(static=True, default=())

    @property
    def result(self):
        """The outcome as a :class:`~jaxmbd.RESULTS` item."""
        return result_from_code(self.status)

    def as_solution(self):
        """The equilibrium as a one-sample :class:`~jaxmbd.Solution` at rest (time ``t``),
        for the tools that read Solutions, e.g.
        ``reaction_forces(model, eq.as_solution(), per="joint")``."""
        zero = jnp.zeros_like(self.r)[None]
        return Solution(
            jnp.asarray(self.t)[None], self.r[None], self.A[None], zero, zero, zero, zero,
            self.lam[None], jnp.asarray(self.iterations)[None], jnp.asarray(self.status)[None],
            jnp.asarray(self.residual)[None], body_names=self.body_names,
            constraint_names=self.constraint_names,
        )  # fmt: skip

    def with_model(self, model: Model) -> Model:
        """``model`` with its initial pose at this equilibrium and at rest (velocities zero):
        the start of a run that stays put, or of a linearisation."""
        zero = jnp.zeros_like(model.rdot0)
        return dataclasses.replace(model, r0=self.r, A0=self.A, rdot0=zero, omega0=zero)


def _static_system(model: Model, form, t):
    """(residual(x, model), retract, sizes) of the static equations in the unknowns
    x = (q, lam) of ``form``: the dynamics equations at v = a = 0 and the constraints."""
    nb, ts = model.nb, form.tangent_size
    n_q = nb * ts

    def residual(x, m):
        q, lam = x
        zero = jnp.zeros((nb, ts), jnp.float64)
        g, phi = form.dynamics_equations(m, q, zero, zero, lam, t)
        return jnp.concatenate([jnp.ravel(g), jnp.ravel(phi)])

    def retract(x, delta):
        q, lam = x
        return form.retract(q, delta[:n_q]), lam + delta[n_q:]

    return residual, retract, n_q


#: Relative singular-value cut-off of the least-squares solves (start multipliers, Newton
#: corrections): well above round-off.
LSTSQ_RTOL = 1e-12


def _least_squares(J, rhs):
    """The minimum-norm least-squares Newton correction: along a neutral direction (a cart
    on a rail, no stiffness) the matrix is singular and any position there is an
    equilibrium; the correction then leaves it alone instead of failing. A residual
    that no correction removes still fails the residual test."""
    return jnp.linalg.lstsq(J, rhs, rcond=LSTSQ_RTOL)[0]


#: A row whose Jacobian vanishes (a neutral coordinate: a body free to spin about its
#: hinge axis through its centre of mass) holds only round-off; it may keep this fraction
#: of the largest row tolerance (the usual |J| (tol w + e) would demand an exact zero).
NEUTRAL_ROW_FRACTION = 1e-6


def _row_tolerance(J, allowed):
    rows = jnp.abs(J) @ allowed
    # J = 0 (every coordinate neutral, a lone hinge through the centre of mass): only an
    # exact zero passes, not 0 / 0
    return rows + NEUTRAL_ROW_FRACTION * jnp.max(rows) + jnp.finfo(rows.dtype).tiny


def _system(model: Model, form, t, rows):
    """(residual, retract, n_q, n_lam, q_scale) of ``form``'s static equations; ``rows``:
    the joint formulation's independent loop rows."""
    if form.runs_in_joint_space:
        tree, loops = model_tree(model, rows)
        residual, retract, n_q, n_lam = static_residual(model, tree, loops, t)

        def unit_scale(q):  # joint angles in radians and slides in metres, both O(1)
            w = jnp.ones(n_q, q.dtype)
            return Scale(w, ROUNDOFF * float(jnp.finfo(jnp.float64).eps) * w)

        return residual, retract, n_q, n_lam, unit_scale
    residual, retract, n_q = _static_system(model, form, t)
    q_scale = position_scale(jax.lax.stop_gradient(model), form)
    return residual, retract, n_q, form.num_multipliers(model), q_scale


@eqx.filter_jit
def _solve(model: Model, form, q0, t, tol, max_iter: int, load_steps: int, rows=None):
    residual, retract, n_q, n_lam, q_scale = _system(model, form, t, rows)
    frozen = jax.lax.stop_gradient(model)
    # the start's multipliers: the least-squares reactions of its pose (with lam = 0 the
    # matrix lacks the reactions' geometric stiffness, the only stiffness of a hanging
    # pendulum, and is singular)
    lam_zero = jnp.zeros(n_lam, jnp.float64)
    F_q = residual((q0, lam_zero), frozen)[:n_q]
    G_T = jax.jacfwd(lambda lam: residual((q0, lam), frozen)[:n_q])(lam_zero)
    x0 = (q0, jnp.linalg.lstsq(G_T, -F_q, rcond=LSTSQ_RTOL)[0])
    F0 = jax.lax.stop_gradient(residual(x0, frozen))
    if F0.shape[0] != n_q + n_lam:
        raise ValueError(
            f"static_equilibrium: formulation {form.name!r} gives {F0.shape[0]} static "
            f"equations for {n_q + n_lam} unknowns; use formulation='rA'"
        )
    eps = ROUNDOFF * float(jnp.finfo(jnp.float64).eps)

    def scale(x):
        q, lam = x
        # multipliers at the size of the largest (at least the start's imbalance, |F0|)
        size = jnp.maximum(jnp.max(jnp.abs(lam), initial=0.0), jnp.max(jnp.abs(F0)))
        size = jnp.where(size > 0, size, 1.0)
        w = jnp.concatenate([q_scale(q).magnitude, jnp.full(n_lam, size)])
        return Scale(w, eps * w)

    def stage(carry, s):
        x, iterations, status, failed_at, k = carry

        def F(x_):
            return residual(x_, frozen) - (1.0 - s) * F0

        def F_and_J(x_):
            J = jax.jacfwd(lambda d: F(retract(x_, d)))(jnp.zeros(n_q + n_lam))
            return F(x_), J

        x_new, info = newton_iterate(
            F_and_J, retract, x, tol=tol, max_iter=max_iter, residual=F, scale=scale,
            linear_solve=_least_squares, row_tolerance=_row_tolerance,
        )  # fmt: skip
        first = (status == 0) & (info.status != 0)
        status = jnp.where(status == 0, info.status, status)
        failed_at = jnp.where(first, k, failed_at)
        return (x_new, iterations + info.iterations, status, failed_at, k + 1), info

    fractions = jnp.arange(1, load_steps + 1, dtype=jnp.float64) / load_steps
    init = (x0, jnp.asarray(0), jnp.asarray(0), jnp.asarray(-1), jnp.asarray(0))
    (x_star, iterations, status, failed_at, _), infos = jax.lax.scan(stage, init, fractions)
    x = implicit_root(residual, retract, x_star, model, n_q + n_lam)
    return x, iterations, status, failed_at, infos.residual_norm[-1]


def static_equilibrium(
    model: Model,
    *,
    formulation=None,
    q0=None,
    t: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 50,
    load_steps: int = 1,
    redundant: str = "drop",
    contact: str | None = None,
    limits: str | None = None,
    throw: bool = True,
) -> Equilibrium:
    """The static equilibrium of ``model`` (see the module docstring): the pose, the
    multipliers (reactions) and a status.

    ``q0``: the start, as body poses ``(r (nb, 3), A (nb, 3, 3))``; None: the model's
    initial pose (it need not satisfy the constraints: the solve closes them). ``t``: the
    time at which drivers are held. ``tol``: the relative Newton tolerance (as
    :func:`~jaxmbd.simulate`'s), ``max_iter`` per load stage, ``load_steps``: the stages of
    the load-stepping homotopy (1: plain Newton). ``redundant``, ``contact``, ``limits``: as for
    :func:`~jaxmbd.simulate`. ``formulation``: as :func:`~jaxmbd.simulate`'s default
    (:func:`~jaxmbd.analysis.plan.default_formulation`: "joint" where it runs the model,
    else "rA"; ``redundant="error"`` is an option of the absolute formulations, and with
    the default "joint" raises ``ValueError`` naming ``formulation="rA"``), or any
    formulation whose static equations
    are square; in "joint", ``q0`` may also be qpos (nq,) in the tree's layout, and the
    equilibrium's ``qpos`` is set. Under ``jit``/``grad``/``vmap`` the outcome is in
    ``status``; outside, a failure raises :class:`~jaxmbd.SolverError` unless
    ``throw=False``. Differentiable with implicit gradients.
    """
    if isinstance(load_steps, bool) or not isinstance(load_steps, int) or load_steps < 1:
        raise ValueError(f"static_equilibrium: load_steps must be a positive integer, got "
                         f"{load_steps!r}")  # fmt: skip
    model = treated_model(model, contact=contact, limits=limits, where="static_equilibrium").model
    model = checked_parameters(model, where="static_equilibrium")
    # the joint path drops dependent rows itself: it has no redundant="error"
    absolute_only = absolute_only_requests(redundant=redundant)
    if formulation is None:
        formulation = default_formulation(
            model, absolute_only=absolute_only, where="static_equilibrium"
        )
    form = get_formulation(formulation)
    t = jnp.asarray(t, jnp.float64)
    if form.runs_in_joint_space:
        if absolute_only:
            refused = absolute_refusals(absolute_only)
            raise ValueError(
                refusal_message(refused, model, where="static_equilibrium", named=True)
            )
        eq = _joint_equilibrium(model, form, q0, t, tol, max_iter, load_steps)
        return _finished(model, eq, load_steps, throw)
    full_model = model
    model, kept = rows_for_run(model, redundant, where="static_equilibrium")
    if q0 is None:
        r0, A0 = model.r0, model.A0
    else:
        r0, A0 = _body_poses(model, q0)
    zero = jnp.zeros_like(r0)
    q_start = to_formulation(form, r0, A0, zero, zero, zero, zero)[0]
    x, iterations, status, stage, residual = _solve(
        model, form, q_start, t, tol, max_iter, load_steps
    )
    q, lam = x
    r, A = form.to_body_state(q, jnp.zeros((model.nb, form.tangent_size)),
                              jnp.zeros((model.nb, form.tangent_size)))[:2]  # fmt: skip
    lam = full_multipliers(lam[: model.nc], kept, full_model.nc)
    eq = Equilibrium(
        r, A, lam, status, iterations, residual, stage, t,
        body_names=full_model.body_names, constraint_names=full_model.constraint_names,
    )  # fmt: skip
    return _finished(full_model, eq, load_steps, throw)


def _body_poses(model: Model, q0):
    r0, A0 = (jnp.asarray(x, jnp.float64) for x in q0)
    if r0.shape != (model.nb, 3) or A0.shape != (model.nb, 3, 3):
        raise ValueError(
            f"static_equilibrium: q0 must be (r ({model.nb}, 3), A ({model.nb}, 3, 3)), "
            f"got shapes {r0.shape}, {A0.shape}"
        )
    return r0, A0


def _joint_equilibrium(model: Model, form, q0, t, tol, max_iter, load_steps) -> Equilibrium:
    """The equilibrium in joint coordinates (:mod:`jaxmbd.joint_space.analysis`): ``q0``
    None (the tree's initial qpos), qpos (nq,), or body poses (r, A)."""
    rows = independent_loop_rows(model)
    tree, _ = model_tree(model, rows)
    if q0 is None:
        qpos0 = tree.qpos_init
    elif isinstance(q0, (tuple, list)) and len(q0) == 2:
        r0, A0 = _body_poses(model, q0)
        zero = jnp.zeros_like(r0)
        qpos0 = tree_layout(tree, r0, A0, zero, zero, name=model.name)[0]
    else:
        qpos0 = jnp.asarray(q0, jnp.float64)
        if qpos0.shape != (tree.nq,):
            raise ValueError(
                f"static_equilibrium: q0 must be qpos ({tree.nq},) in the tree's layout or "
                f"body poses (r, A), got shape {qpos0.shape}"
            )
    x, iterations, status, stage, residual = _solve(
        model, form, qpos0, t, tol, max_iter, load_steps, rows
    )
    qpos, lam_loops = x
    p = poses(tree, qpos)
    lam = rest_multipliers(model, form, qpos, lam_loops, t)
    return Equilibrium(
        p.c, p.R, lam, status, iterations, residual, stage, t, qpos,
        body_names=model.body_names, constraint_names=model.constraint_names,
    )  # fmt: skip


def _finished(full_model: Model, eq: Equilibrium, load_steps: int, throw: bool) -> Equilibrium:
    status, stage, residual = eq.status, eq.stage, eq.residual
    if is_traced(full_model):  # concrete values were checked above
        invalid = parameters_invalid(full_model)
        status = jnp.where(invalid, jnp.asarray(INVALID_PARAMETERS, status.dtype), status)
        eq = eqx.tree_at(lambda e: e.status, eq, status)
    if throw and not is_traced(full_model) and int(status) != 0:
        where = f" at load stage {int(stage) + 1} of {load_steps}" if load_steps > 1 else ""
        hint = "" if load_steps > 1 else "; load_steps=10 follows the load in stages"
        raise SolverError(
            f"static_equilibrium of model '{full_model.name}' failed{where}: "
            f"{code_message(int(status))} (residual {float(residual):.3g}){hint}"
        )
    if throw and is_traced(full_model):
        eq = eqx.error_if(eq, status != 0, "static_equilibrium: Newton did not converge")
    return eq


__all__ = ["Equilibrium", "static_equilibrium"]
