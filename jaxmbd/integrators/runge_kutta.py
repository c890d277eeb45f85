"""Explicit Runge-Kutta on the index-1 ODE (Dumitriu & Mărgăritescu section 4; integrator "rk").

For formulations whose coordinates form a vector space with v = q_dot (``rotmat``: (T*, R);
``rp``: (r, p); ``re``: (r, eps)), the index-1 equations are the first-order ODE
y = (q, v), y' = (v, a(q, v, t)), with a and the multipliers from the acceleration-level
constraints (eqs. 23-24). Any explicit tableau (a, b, c) gives

    q_i = q_n + h sum_{j<i} a_ij v_j,    v_i = v_n + h sum_{j<i} a_ij a_j,
    a_i = a(q_i, v_i, t_n + c_i h),
    q_{n+1} = q_n + h sum_i b_i v_i,     v_{n+1} = v_n + h sum_i b_i a_i.

c_1 = 0 for every explicit tableau, so stage 1 reuses the accelerations and multipliers of
the previous step's end (first same as last): s index-1 solves per step.

``multipliers`` chooses how a(q, v, t) and the multipliers are obtained:

* ``"two_step"`` (rotmat, its default): eq. 25 per body (a Lyapunov equation solved with the
  eigen-decomposition of K^-1, computed once at the start), then the small system for the
  joint multipliers (:meth:`jaxmbd.formulations.Rotmat.two_step`). It assumes R^T R = I, so
  it differs from the full system by O(||R^T R - I||), the orthogonality drift.
* ``"one_step"`` (rp and re: their only and default method): the full KKT system with all
  rows (:mod:`jaxmbd.formulations.index1`).
* ``"frozen"``: the paper's remark that "the Lagrange multipliers are considered piecewise
  constant during each time step". All multipliers are computed at the start of the step
  (rotmat: two-step; rp/re: KKT) and held constant over the later stages, whose
  accelerations come from M a = Q - G(q_i)^T lam_n. Stage i then sees multipliers that are
  O(c_i h) off, so **every tableau drops to first order** (tested: the RK4 error ratio is
  about 2 per halving of h, against 16 with per-stage multipliers), and the linear joint
  constraints are no longer kept to round-off.

No stabilisation: the joint constraints linear in the coordinates (spherical joints in
rotmat) are kept to round-off by any RK method with per-stage multipliers (the stage
accelerations satisfy G a = gamma = 0 exactly and the update is linear); the quadratic ones
(orthogonality, rp's normalisation) drift like the method's error, O(h^p).

``rA`` is not accepted: its orientation is not a vector space (use ``rkmk``, the
Munthe-Kaas form of the same tableaus).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..formulations.index1 import Index1System, solve_index1
from ..linear import dense
from ..newton import NONFINITE, SUCCESS, NewtonInfo
from .base import AbstractIntegrator, StepResult, choose_structured
from .tableau import ButcherTableau, get_tableau

MULTIPLIERS = ("two_step", "one_step", "frozen")


class RungeKuttaState(NamedTuple):
    """Positions, velocities, accelerations and all multipliers at t_n (stage 1 of the next
    step), and the formulation's per-simulation constants (rotmat: K^-1 and its
    eigen-decomposition; None otherwise)."""

    q: Any
    v: jax.Array
    a: jax.Array
    lam: jax.Array
    constants: Any


def _generic_system(model, form, q, v, t) -> Index1System:
    """Index-1 KKT blocks of a formulation from its h-free equations (rp, re): the equations
    g(q, v, a, lam, t) are linear in a with dg/dlam = G^T, so M = dg/da and Q = -g(a=0, lam=0)."""
    nb, ts = model.nb, form.tangent_size
    lam0 = jnp.zeros(form.num_multipliers(model), v.dtype)

    def g(a_flat):
        return form.dynamics_equations(model, q, v, a_flat.reshape(nb, ts), lam0, t)[0]

    zero = jnp.zeros(nb * ts, v.dtype)
    minus_Q = g(zero)
    M = jax.jacfwd(g)(zero).reshape(nb, ts, nb, ts)
    blocks = jnp.einsum("aiaj->aij", M)  # block diagonal (bodies are coupled only by G)
    G = form.position_terms(model, q, t)[1]
    gamma = form.acceleration_rhs(model, q, v, t)
    return Index1System(blocks, -minus_Q.reshape(nb, ts), G, gamma)


class RungeKutta(AbstractIntegrator):
    """Explicit Runge-Kutta on the index-1 ODE, for ``rotmat`` (default integrator), ``rp``
    and ``re``.

    Options (keyword): ``tableau`` ("euler", "heun", "rk3", "rk4" (default), a
    :class:`~jaxmbd.integrators.ButcherTableau` or a table (a, b, c)); ``multipliers``
    ("two_step", the default for rotmat; "one_step", the full KKT system, the default and
    only per-stage method for rp and re; or "frozen", multipliers constant over a step,
    first order).
    """

    name: ClassVar[str] = "rk"
    formulations: ClassVar[tuple[str, ...]] = ("rotmat", "rp", "re")
    tableau: ButcherTableau = eqx.field(static=True, converter=get_tableau, default="rk4")
    multipliers: str | None = eqx.field(static=True, default=None)
    linear_solver: str = eqx.field(static=True, default="dense")

    def __check_init__(self):
        if self.multipliers is not None and self.multipliers not in MULTIPLIERS:
            raise ValueError(
                f"rk: multipliers must be one of {list(MULTIPLIERS)}, got {self.multipliers!r}"
            )

    def method(self, form) -> str:
        """The multiplier method used with ``form`` (checks that the pair makes sense)."""
        rotmat = form.name == "rotmat"
        method = self.multipliers or ("two_step" if rotmat else "one_step")
        if method == "two_step" and not rotmat:
            raise ValueError(
                f"rk: multipliers='two_step' (eq. 25) needs the rotmat formulation, not "
                f"{form.name!r}; use 'one_step' (full KKT system) or 'frozen'"
            )
        return method

    # -- index-1 solves -------------------------------------------------------------------
    def _solve(self, model, form, constants, q, v, t):
        """(a, lam) at a stage state with the chosen method (frozen: at the step start)."""
        if form.name == "rotmat":
            if self.method(form) == "one_step":
                return form.one_step(model, q, v, t)
            return form.two_step(model, constants, q, v, t)
        system = _generic_system(model, form, q, v, t)
        n = system.force.size + system.G.shape[0]
        structured = choose_structured(self.linear_solver, n, model.nc)
        return solve_index1(system, model=model, structured=structured)

    def _given(self, model, form, constants, q, v, t, lam):
        """Accelerations M^-1 (Q - G^T lam) for frozen multipliers lam."""
        if form.name == "rotmat":
            return form.accelerations_given_multipliers(model, constants, q, v, t, lam)
        nb, ts = model.nb, form.tangent_size

        def g(a_flat):
            return form.dynamics_equations(model, q, v, a_flat.reshape(nb, ts), lam, t)[0]

        zero = jnp.zeros(nb * ts, v.dtype)
        M = jax.jacfwd(g)(zero)
        return dense.solve(M, -g(zero)).reshape(nb, ts)

    # -- integrator interface -------------------------------------------------------------
    def init(self, model, form, start, h):
        self.method(form)
        constants = form.constants(model, start.q) if form.name == "rotmat" else None
        a, lam = self._solve(model, form, constants, start.q, start.v, jnp.asarray(0.0))
        return RungeKuttaState(start.q, start.v, a, lam, constants)

    def step(self, model, form, state: RungeKuttaState, k, h):
        """One step. The stages i = 2..s and the end of the step (row b) share one traced
        index-1 solve inside a ``lax.scan`` (compile time does not grow with s)."""
        tab = self.tableau
        s = tab.stages
        frozen = self.method(form) == "frozen"
        t0 = (k - 1) * h
        q, v, c = state.q, state.v, state.constants
        n = v.size
        # rows 1..s-1 of a, then b: stage i (or the step's end, i = s) increments
        rows = jnp.asarray(list(tab.a[1:]) + [list(tab.b)], dtype=v.dtype)  # (s, s)
        times = jnp.asarray(list(tab.c[1:]) + [1.0], dtype=v.dtype)
        Kq = jnp.zeros((s, n), v.dtype).at[0].set(v.reshape(-1))
        Kv = jnp.zeros((s, n), v.dtype).at[0].set(state.a.reshape(-1))

        def stage(carry, inputs):
            Kq, Kv, _, _, _, _ = carry
            i, row, ci = inputs
            qi = form.retract(q, h * (row @ Kq))
            vi = v + h * (row @ Kv).reshape(v.shape)
            ti = t0 + ci * h
            if frozen:
                ai, lami = jax.lax.cond(
                    i == s,
                    lambda: tuple(self._solve(model, form, c, qi, vi, ti)),
                    lambda: (self._given(model, form, c, qi, vi, ti, state.lam), state.lam),
                )
            else:
                ai, lami = self._solve(model, form, c, qi, vi, ti)
            # the end of the step (i = s) is out of range: dropped
            Kq = Kq.at[i].set(vi.reshape(-1), mode="drop")
            Kv = Kv.at[i].set(ai.reshape(-1), mode="drop")
            return (Kq, Kv, qi, vi, ai, lami), None

        init = (Kq, Kv, q, v, state.a, state.lam)
        inputs = (jnp.arange(1, s + 1), rows, times)
        (_, _, q1, v1, a1, lam1), _ = jax.lax.scan(stage, init, inputs)
        residual = form.residual(model, q1, k * h)
        finite = (
            jnp.all(jnp.isfinite(v1))
            & jnp.all(jnp.isfinite(a1))
            & jnp.all(jnp.isfinite(lam1))
            & jnp.all(jnp.isfinite(residual))
        )
        info = NewtonInfo(
            jnp.asarray(0),
            jnp.where(finite, SUCCESS, NONFINITE),
            jnp.linalg.norm(residual),
            jnp.asarray(0.0, v.dtype),
        )
        return (
            RungeKuttaState(q1, v1, a1, lam1, c),
            StepResult(q1, v1, a1, lam1, info),
        )


__all__ = ["MULTIPLIERS", "RungeKutta", "RungeKuttaState"]
