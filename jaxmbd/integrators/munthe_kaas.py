"""Explicit Munthe-Kaas Runge-Kutta on SE(3) or SO(3) x R^3 (Mueller & Terze eqs. 35-37).

The index-1 equations (eq. 3) make the state X = (C, V) an ODE on the Lie group
S = G x R^{6n}, X_dot = X F(t, X) with F = (V, V_dot) (eq. 35). With the ansatz
X(t) = X_{i-1} exp Phi(t), Phi solves Phi_dot = dexp^-1_{-Phi} F(t, X_{i-1} exp Phi) (eq. 36;
the minus sign comes from the left-trivialised velocities), and any explicit Butcher tableau
(a, b, c) gives the step (eq. 37):

    Psi_1 = 0,    Psi_j = h sum_{l<j} a_jl k_l,
    k_j = dexp^-1_{-Psi_j} F(t_{i-1} + c_j h, X_{i-1} exp Psi_j),
    X_i = X_{i-1} exp(h sum_j b_j k_j).

Per body the configuration part of k_j is dexp^-1_{-Psi_j^C} V_j (SE(3), eq. 10) or
(r_dot_j, dexp^-1_{-Psi_j^omega} omega_j) (SO(3) x R^3, eq. 11 and 19) and the velocity
part is V_dot_j, from the index-1 KKT system at the stage state (multipliers recomputed at
every stage). The velocity group R^{6n} is abelian, so V_j = V_{i-1} + Psi_j^V.

No constraint stabilisation by default: the drift is what Mueller & Terze measure, and with
se3 a body on a fixed pivot keeps its joint to round-off for every tableau (the admissible
twists form a subalgebra). ``stabilize="projection"`` projects the new positions onto
Phi = 0 (Gauss-Newton with minimum-norm corrections in the retraction's tangent space,
``projection_iterations`` of them) and then the velocities onto G v = nu (minimum-norm)
after every step, for users who want exact constraints; it changes the energy behaviour.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import SUCCESS, as_status, finite_status, first_failure
from ..compiled.xla_flags import unhoisted_when_differentiated
from ..formulations.index1 import index1_dynamics
from ..newton import NewtonInfo
from ..newton._min_norm import min_norm_solve
from ._tangents import with_tangents
from .base import (
    LINEAR_SOLVERS,
    AbstractIntegrator,
    StepResult,
    choose_structured,
    dense_kernels,
    fields_with_tangents,
    kernel_solver,
)
from .tableau import ButcherTableau, get_tableau, stage_combination

STABILIZE = (None, "projection")


class MuntheKaasState(NamedTuple):
    """Positions, velocities and the index-1 accelerations and multipliers at t_n (the
    first stage of the next step: first same as last), and the first failure of the run so
    far (SUCCESS while none: a step builds on its predecessor's state uncorrected, so it
    inherits it)."""

    q: Any
    v: jax.Array
    a: jax.Array
    lam: jax.Array
    status: jax.Array


class MuntheKaas(AbstractIntegrator):
    """Explicit Munthe-Kaas RK (eq. 37) for ``se3`` (SE(3)) and ``rA`` (SO(3) x R^3).

    Options (keyword): ``tableau`` ("euler", "heun", "rk3", "rk4" (default), a
    :class:`~jaxmbd.integrators.ButcherTableau` or a table (a, b, c)); ``stabilize`` (None,
    the default, or "projection"); ``projection_iterations`` (3, with "projection" only);
    ``linear_solver`` for the index-1 KKT solves ("auto", the default: on the CPU "schur" up
    to :data:`~jaxmbd.linear.small.SMALL_MAX` KKT unknowns, "structured" from
    :data:`~jaxmbd.integrators.base.STRUCTURED_FROM` on, else "dense"; "dense", LAPACK;
    "structured"; "small", the elementwise kernels of :mod:`jaxmbd.linear.small`; or
    "schur", the exact Schur complement of the block-diagonal mass matrix in those kernels,
    :mod:`jaxmbd.linear.schur`, which keeps the step one hoisted loop on the CPU);
    ``dexp_sign`` (-1, the correct sign for left-trivialised velocities; +1 exists only to
    show that the wrong sign drops RK4 to order 2).
    """

    name: ClassVar[str] = "rkmk"
    requires: ClassVar[frozenset[str]] = frozenset({"lie_group", "index1_blocks"})
    tableau: ButcherTableau = eqx.field(static=True, converter=get_tableau, default="rk4")
    stabilize: str | None = eqx.field(static=True, default=None)
    projection_iterations: int | None = eqx.field(static=True, default=None)
    dexp_sign: int = eqx.field(static=True, default=-1)
    linear_solver: str = eqx.field(static=True, default="auto")

    def _structured(self, model) -> bool:
        """KKT solves by structured block elimination (option ``linear_solver``)."""
        n = model.nb * 6 + model.nc
        return choose_structured(self.linear_solver, n, model.nc)

    def __check_init__(self):
        if self.stabilize not in STABILIZE:
            raise ValueError(
                f"rkmk: stabilize must be None or 'projection', got {self.stabilize!r}"
            )
        if self.dexp_sign not in (-1, 1):
            raise ValueError(f"rkmk: dexp_sign must be -1 or +1, got {self.dexp_sign!r}")
        if self.linear_solver not in LINEAR_SOLVERS:
            raise ValueError(
                f"rkmk: linear_solver must be one of {LINEAR_SOLVERS}, got {self.linear_solver!r}"
            )
        if self.projection_iterations is None:
            return
        if self.stabilize != "projection":
            raise ValueError(
                "rkmk: projection_iterations applies to stabilize='projection' only; with "
                f"stabilize={self.stabilize!r} nothing is projected"
            )
        n = self.projection_iterations
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"rkmk: projection_iterations must be a positive integer, got {n!r}")

    @property
    def iterations(self) -> int:
        """Gauss-Newton projections per step (``projection_iterations``, 3 by default with
        ``stabilize="projection"``; none without)."""
        if self.stabilize != "projection":
            return 0
        return 3 if self.projection_iterations is None else self.projection_iterations

    def with_state_tangents(self, state, extra):
        return fields_with_tangents(state, ("q", "v", "a", "lam"), ("a", "lam"), extra)

    def init(self, model, form, start, h):
        def solve():
            t = jnp.asarray(0.0)
            return index1_dynamics(
                model, form, start.q, start.v, t, structured=self._structured(model)
            )

        if model.nu:
            # with controls every step solves its first stage again (_step), at this same
            # state with the same controls: a solve here would be discarded, and it would
            # add a copy of the force model and the KKT solve (and their derivatives) to
            # every program; its shapes only, then
            shapes = jax.eval_shape(solve)
            a, lam = (jnp.zeros(x.shape, x.dtype) for x in shapes[:2])
            return MuntheKaasState(start.q, start.v, a, lam, as_status(SUCCESS))
        a, lam, status = solve()
        status = first_failure(status, finite_status(a, lam))
        return MuntheKaasState(start.q, start.v, a, lam, status)

    def _project(self, model, form, q, v, t):
        """Gauss-Newton projection of q onto Phi = 0, then v onto G v = nu, by minimum-norm
        corrections; the first failure of their solves (dependent rows: ill-conditioned)."""
        statuses = []
        for _ in range(self.iterations):
            phi, G = form.position_terms(model, q, t)
            correction, status = min_norm_solve(G, phi)
            q = form.retract(q, -correction)
            statuses.append(status)
        G, nu = form.velocity_terms(model, q, t)
        correction, status = min_norm_solve(G, G @ v.reshape(-1) - nu)
        return q, v - correction.reshape(v.shape), first_failure(*statuses, status)

    def linear_solver_name(self, model, form) -> str:
        n = model.nb * 6 + model.nc
        return kernel_solver(self.linear_solver, n, model.nc, auto_small=False)

    def step(self, model, form, state: MuntheKaasState, k, h):
        """One step (eq. 37), its dense KKT solves by the kernels ``linear_solver`` picks
        (:func:`~jaxmbd.integrators.base.dense_kernels`)."""
        n = model.nb * 6 + model.nc
        with dense_kernels(self.linear_solver, n, model.nc, auto_small=False):
            return self._step(model, form, state, k, h)

    def _step(self, model, form, state: MuntheKaasState, k, h):
        """One step (eq. 37). Its stages and the end of the step (the index-1 solve at the
        new state) share one traced index-1 solve inside a ``lax.scan`` over the tableau's
        rows, as in ``rk``: the force model and the KKT solve are traced, differentiated
        and compiled once instead of once per stage (cart-pole gradient: see
        ``benchmarks/results/bench_compile.md``). Its status: the first failure of the run
        before it, of its index-1 and projection solves (pivot-ratio conditioning) and of
        finiteness."""
        tab = self.tableau
        s = tab.stages
        t0 = (k - 1) * h
        q, v = state.q, state.v
        n = v.size
        structured = self._structured(model)
        project = self.stabilize == "projection"
        # with controls the first stage is solved again (the step's controls hold from t0
        # on: the carried acceleration used the previous step's, and first same as last
        # would shift each switch by h / 6): it is the scan's row 0, with zero increments
        first = 0 if model.nu else 1
        # the end of the step is the scan's last row (b) unless it is projected first
        last = s if project else s + 1
        rows = [list(tab.a[j]) for j in range(first, s)] + ([] if project else [list(tab.b)])
        stage_index = jnp.arange(first, last)
        coefficients = jnp.asarray(rows, v.dtype)  # (iterations, s)
        times = jnp.asarray(list(tab.c[first:]) + ([] if project else [1.0]), v.dtype)
        slots = jnp.arange(s)
        Kq = Kv = jnp.zeros((s, n), v.dtype)
        if first:  # stage 1 without a solve: the carried acceleration (first same as last)
            rest = jnp.zeros((s - 1, n), v.dtype)
            kq0 = form.dexpinv(jnp.zeros_like(v), v, sign=self.dexp_sign).reshape(1, -1)
            Kq = jnp.concatenate([kq0, rest])
            Kv = jnp.concatenate([state.a.reshape(1, -1), rest])

        def stage(carry, inputs):
            # a gradient's stage loop stays out of XLA's small-loop hoisting like the time
            # loop (_xla_flags.unhoisted_when_differentiated): hoisted, each of the cart-pole
            # gradient's forward and transposed stage loops was one LLVM function of ~7k
            # instructions, about half of its XLA compile time
            carry = unhoisted_when_differentiated(carry)
            Kq, Kv, _, _, _, _, status = carry
            i, row, ci = inputs
            psi_q = h * stage_combination(row, Kq)
            psi_v = h * stage_combination(row, Kv).reshape(v.shape)
            qi = form.retract(q, psi_q)
            if first == 0:  # row 0 is the step's start itself (no retraction round-off)
                qi = jax.tree_util.tree_map(lambda a, b: jnp.where(i == 0, a, b), q, qi)
            vi = v + psi_v
            # the end of the step at t = k h, as the stages' t0 + c h
            ti = jnp.where(i == s, k * h, t0 + ci * h)
            ai, lami, status_i = index1_dynamics(model, form, qi, vi, ti, structured=structured)
            status = first_failure(status, status_i)
            increment = form.dexpinv(psi_q.reshape(vi.shape), vi, sign=self.dexp_sign)
            here = (slots == i)[:, None]  # the end of the step (i = s) is stored nowhere
            Kq = jnp.where(here, increment.reshape(1, -1), Kq)
            Kv = jnp.where(here, ai.reshape(1, -1), Kv)
            return (Kq, Kv, qi, vi, ai, lami, status), None

        init = (Kq, Kv, q, v, state.a, state.lam, state.status)
        init = with_tangents(init, (state.a,))  # one pass of JAX's scan linearisation
        (Kq, Kv, q1, v1, a1, lam1, status), _ = jax.lax.scan(
            stage, init, (stage_index, coefficients, times)
        )
        if project:
            t1 = k * h
            phi_q = h * stage_combination(jnp.asarray(tab.b, v.dtype), Kq)
            phi_v = h * stage_combination(jnp.asarray(tab.b, v.dtype), Kv).reshape(v.shape)
            q1, v1, status_p = self._project(model, form, form.retract(q, phi_q), v + phi_v, t1)
            a1, lam1, status_1 = index1_dynamics(model, form, q1, v1, t1, structured=structured)
            status = first_failure(status, status_p, status_1)
        status = first_failure(status, finite_status(q1, v1, a1, lam1))
        iterations = self.iterations
        info = NewtonInfo(
            jnp.asarray(iterations), status, jnp.asarray(0.0, v.dtype), jnp.asarray(0.0, v.dtype)
        )
        return MuntheKaasState(q1, v1, a1, lam1, status), StepResult(q1, v1, a1, lam1, info)
