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
from .._results import as_status, finite_status, first_failure
from ..formulations.index1 import AbstractMultiplierElimination, index1_system, solve_index1
from ..newton import NewtonInfo, solve_with_condition
from .base import (
    BLOCK_SOLVERS,
    LINEAR_SOLVERS,
    AbstractIntegrator,
    StepResult,
    choose_structured,
    dense_kernels,
    fields_with_tangents,
    kernel_solver,
)
from .tableau import ButcherTableau, get_tableau, stage_combination

MULTIPLIERS = ("two_step", "one_step", "frozen")
#: With two-step multipliers (rotmat) "auto" means "small" on the CPU up to this many
#: unknowns 12 nb + nc (the step hoisted), else LAPACK: steps per CPU-second, LAPACK ->
#: "small" (``benchmarks/probes/rk_two_step.py``, two runs): double pendulum (34)
#: 11.2k/11.5k -> 15.2k/15.7k, three-link spherical chain (45) 10.3k/7.2k -> 12.6k/10.3k,
#: slider crank (54) 5.8k/4.8k -> 4.6k/4.0k, four-link chain (60) 7.0k/5.7k -> 6.3k/5.0k
TWO_STEP_SMALL_MAX = 48


class RungeKuttaState(NamedTuple):
    """Positions, velocities, accelerations and all multipliers at t_n (stage 1 of the next
    step), the formulation's per-simulation constants (rotmat: K^-1 and its
    eigen-decomposition; None otherwise) and the first failure of the run so far (SUCCESS
    while none: a step builds on its predecessor's state uncorrected, so it inherits it)."""

    q: Any
    v: jax.Array
    a: jax.Array
    lam: jax.Array
    constants: Any
    status: jax.Array


class KKTMultipliers(AbstractMultiplierElimination):
    """Accelerations and multipliers from the full index-1 KKT system (every formulation
    with index-1 blocks), solved by ``linear_solver``; for given multipliers, the mass
    matrix's solve."""

    solves_kkt: ClassVar[bool] = True
    linear_solver: str = eqx.field(static=True, default="auto")

    def solve(self, model, form, constants, q, v, t):
        system = index1_system(model, form, q, v, t)
        n = system.force.size + system.G.shape[0]
        structured = choose_structured(self.linear_solver, n, model.nc)
        return solve_index1(system, model=model, structured=structured)

    def given(self, model, form, constants, q, v, t, lam):
        nb, ts = model.nb, form.tangent_size

        def g(a_flat):
            return form.dynamics_equations(model, q, v, a_flat.reshape(nb, ts), lam, t)[0]

        zero = jnp.zeros(nb * ts, v.dtype)
        M = jax.jacfwd(g)(zero)
        a, status = solve_with_condition(M, -g(zero))
        return a.reshape(nb, ts), status


class RungeKutta(AbstractIntegrator):
    """Explicit Runge-Kutta on the index-1 ODE, for formulations whose coordinates form a
    vector space and that give the index-1 blocks (rotmat, its default integrator; rp; re).

    Options (keyword): ``tableau`` ("euler", "heun", "rk3", "rk4" (default), a
    :class:`~jaxmbd.integrators.ButcherTableau` or a table (a, b, c)); ``multipliers``
    ("two_step", eq. 25, the default where the formulation offers it (rotmat); "one_step",
    the full KKT system, the default elsewhere; or "frozen", multipliers constant over a
    step, first order); ``linear_solver`` for the KKT solves ("auto", the default:
    "structured" from :data:`~jaxmbd.integrators.base.STRUCTURED_FROM` KKT unknowns on,
    else on the CPU "schur", else "dense"; "dense", LAPACK; "structured"; "small", the
    elementwise kernels of :mod:`jaxmbd.linear.small`; or "schur", the exact Schur
    complement of the block-diagonal mass matrix in those kernels,
    :mod:`jaxmbd.linear.schur`. With "schur" or "small" the whole rp or re step compiles
    as one native loop on the CPU (the formulations' products are elementwise,
    :mod:`jaxmbd.compiled.small`); ``benchmarks/small_solve.py integrators --paths "rk rp"``:
    double pendulum 6.5k (dense) -> 19.1k (schur) steps per CPU-second, slider crank
    3.8k -> 5.4k. "two_step" has no KKT solve: "structured" and "schur" are refused there,
    and "auto" is "small" on the CPU up to :data:`TWO_STEP_SMALL_MAX` unknowns
    (12 nb + nc): the joint system W in the elementwise kernels and rotmat's products
    elementwise, the step one native loop; same bench, ``--paths "rk rotmat"``, two
    rounds, steps per CPU-second: double pendulum 4.9k-7.8k (before the step was hoisted, every
    solver) -> 16.0k, 16.4k, the paper's bar double pendulum 4.9k-8.2k -> 24.5k, 29.2k).
    """

    name: ClassVar[str] = "rk"
    requires: ClassVar[frozenset[str]] = frozenset({"vector_space", "index1_blocks"})
    tableau: ButcherTableau = eqx.field(static=True, converter=get_tableau, default="rk4")
    multipliers: str | None = eqx.field(static=True, default=None)
    linear_solver: str = eqx.field(static=True, default="auto")

    def __check_init__(self):
        if self.multipliers is not None and self.multipliers not in MULTIPLIERS:
            raise ValueError(
                f"rk: multipliers must be one of {list(MULTIPLIERS)}, got {self.multipliers!r}"
            )
        if self.linear_solver not in LINEAR_SOLVERS:
            raise ValueError(
                f"rk: linear_solver must be one of {LINEAR_SOLVERS}, got {self.linear_solver!r}"
            )

    def check_formulation(self, form) -> None:
        self.method(form)

    def method(self, form) -> str:
        """The multiplier method used with ``form`` (checks that the choice makes sense)."""
        own = form.two_step_multipliers
        method = self.multipliers or ("one_step" if own is None else "two_step")
        if method == "two_step" and own is None:
            raise ValueError(
                "rk: multipliers='two_step' (eq. 25) needs the rotmat formulation or another "
                f"with the capability 'two_step_multipliers', not {form.name!r}; use "
                "'one_step' (full KKT system) or 'frozen'"
            )
        kkt = self.elimination(form, method).solves_kkt  # frozen: a KKT system at the start
        if (self.linear_solver in BLOCK_SOLVERS or self.linear_solver == "schur") and not kkt:
            raise ValueError(
                f"rk: linear_solver={self.linear_solver!r} applies to KKT solves, and "
                f"multipliers={method!r} with formulation {form.name!r} has none (per-body "
                "eq. 25 and a small dense joint system); use linear_solver 'dense' or "
                "'auto', or multipliers='one_step'"
            )
        return method

    def elimination(self, form, method: str | None = None) -> AbstractMultiplierElimination:
        """Who gives the accelerations and multipliers at a stage state: the formulation's
        own elimination (two-step; "frozen" too where the formulation has one), else the
        KKT system."""
        method = self.method(form) if method is None else method
        own = form.two_step_multipliers
        if method == "one_step" or own is None:
            return KKTMultipliers(linear_solver=self.linear_solver)
        return own

    # -- index-1 solves -------------------------------------------------------------------
    def _solve(self, model, form, constants, q, v, t):
        """(a, lam, status) at a stage state with the chosen method (frozen: at the step
        start); status: the conditioning of its solve (SUCCESS, ILL_CONDITIONED, NONFINITE)."""
        solution = self.elimination(form).solve(model, form, constants, q, v, t)
        return solution._replace(status=as_status(solution.status))

    def _given(self, model, form, constants, q, v, t, lam):
        """(a, status): accelerations M^-1 (Q - G^T lam) for frozen multipliers lam."""
        a, status = self.elimination(form).given(model, form, constants, q, v, t, lam)
        return a, as_status(status)

    # -- integrator interface -------------------------------------------------------------
    def with_state_tangents(self, state, extra):
        # not the formulation's constants (rotmat's eigen-decomposition has no tangent)
        return fields_with_tangents(state, ("q", "v", "a", "lam"), ("a", "lam"), extra)

    def init(self, model, form, start, h):
        self.method(form)
        constants = self.elimination(form).constants(model, form, start.q)
        a, lam, status = self._solve(model, form, constants, start.q, start.v, jnp.asarray(0.0))
        status = first_failure(status, finite_status(a, lam))
        return RungeKuttaState(start.q, start.v, a, lam, constants, status)

    def _kernels(self, model, form):
        """(n, auto_small, kkt): the arguments of the step's
        :func:`~jaxmbd.integrators.base.dense_kernels`."""
        n = model.nb * form.tangent_size + model.nc
        kkt = self.elimination(form).solves_kkt
        # two_step's only dense solve is the small joint system W: "auto" = "small" there
        # where measured faster (the rotmat step hoisted); KKT solves keep "schur" or LAPACK,
        # "frozen" LAPACK (its step is not hoisted: the vjp of its reaction scatters)
        auto_small = self.method(form) == "two_step" and n <= TWO_STEP_SMALL_MAX
        return n, auto_small, kkt

    def linear_solver_name(self, model, form) -> str:
        n, auto_small, kkt = self._kernels(model, form)
        return kernel_solver(
            self.linear_solver, n, model.nc, auto_small=auto_small, kkt=kkt, blocks=kkt
        )

    def step(self, model, form, state: RungeKuttaState, k, h):
        """One step, its dense solves by the kernels ``linear_solver`` picks
        (:func:`~jaxmbd.integrators.base.dense_kernels`)."""
        n, auto_small, kkt = self._kernels(model, form)
        with dense_kernels(self.linear_solver, n, model.nc, auto_small=auto_small, kkt=kkt):
            return self._step(model, form, state, k, h)

    def _step(self, model, form, state: RungeKuttaState, k, h):
        """One step. The stages i = 2..s and the end of the step (row b) share one traced
        index-1 solve inside a ``lax.scan`` (compile time does not grow with s). Its status:
        the first failure of the run before it, of its solves (pivot-ratio conditioning) and
        of finiteness."""
        tab = self.tableau
        s = tab.stages
        frozen = self.method(form) == "frozen"
        t0 = (k - 1) * h
        q, v, c = state.q, state.v, state.constants
        n = v.size
        # rows 1..s-1 of a, then b: stage i (or the step's end, i = s) increments
        rows = jnp.asarray(list(tab.a[1:]) + [list(tab.b)], dtype=v.dtype)  # (s, s)
        times = jnp.asarray(list(tab.c[1:]) + [1.0], dtype=v.dtype)
        a0, status0 = state.a, state.status
        if model.nu:
            # the step's controls hold from t0 on: the carried acceleration used the previous
            # step's (first same as last would shift each switch by a stage)
            a0, _, status_a = self._solve(model, form, c, q, v, t0)
            status0 = first_failure(status0, status_a)
        # no scatter and no dot in the step (a step whose solves are elementwise, "schur"
        # or "small", then stays one hoisted loop on the CPU, jaxmbd.linear.small)
        rest = jnp.zeros((s - 1, n), v.dtype)
        Kq = jnp.concatenate([v.reshape(1, -1), rest])
        Kv = jnp.concatenate([a0.reshape(1, -1), rest])
        slots = jnp.arange(s)

        def stage(carry, inputs):
            Kq, Kv, _, _, _, _, status = carry
            i, row, ci = inputs
            qi = form.retract(q, h * stage_combination(row, Kq))
            vi = v + h * stage_combination(row, Kv).reshape(v.shape)
            ti = t0 + ci * h
            if frozen:

                def given():
                    ai, status_i = self._given(model, form, c, qi, vi, ti, state.lam)
                    return ai, state.lam, status_i

                ai, lami, status_i = jax.lax.cond(
                    i == s, lambda: tuple(self._solve(model, form, c, qi, vi, ti)), given
                )
            else:
                ai, lami, status_i = self._solve(model, form, c, qi, vi, ti)
            status = first_failure(status, status_i)
            # the end of the step (i = s) is stored nowhere
            here = (slots == i)[:, None]
            Kq = jnp.where(here, vi.reshape(1, -1), Kq)
            Kv = jnp.where(here, ai.reshape(1, -1), Kv)
            return (Kq, Kv, qi, vi, ai, lami, status), None

        init = (Kq, Kv, q, v, a0, state.lam, status0)
        inputs = (jnp.arange(1, s + 1), rows, times)
        (_, _, q1, v1, a1, lam1, status), _ = jax.lax.scan(stage, init, inputs)
        residual = form.residual(model, q1, k * h)
        status = first_failure(status, finite_status(v1, a1, lam1, residual))
        info = NewtonInfo(
            jnp.asarray(0), status, jnp.linalg.norm(residual), jnp.asarray(0.0, v.dtype)
        )
        return (
            RungeKuttaState(q1, v1, a1, lam1, c, status),
            StepResult(q1, v1, a1, lam1, info),
        )


__all__ = [
    "MULTIPLIERS",
    "TWO_STEP_SMALL_MAX",
    "KKTMultipliers",
    "RungeKutta",
    "RungeKuttaState",
]
