"""The integrator interface, and the generic implicit index-3 step shared by all implicit
integrators (docs/design.md, principle 2).

An integrator discretises the h-free equations of a formulation. It owns its state pytree
(``init``) and advances it by one step (``step``). An implicit index-3 integrator only says
how the new positions and velocities depend on the unknown accelerations a_{n+1}
(:class:`Discretisation`):

    q_{n+1} = q_n (+) (d0 + c_q a_{n+1}),    v_{n+1} = v0 + c_v a_{n+1},

and :func:`implicit_step` solves the equations of motion and Phi(q_{n+1}) = 0 for
x = (a_{n+1}, lam_{n+1}) with the integrator's Newton solver object. The Newton matrix is
assembled once from the formulation's continuous-time blocks (rA: hand-coded, Tables 3-6);
formulations without hand-coded blocks get it from autodiff of the discretised residual.

The constraint rows are scaled by 1 / c_q (1 / h^2 for backward Euler, eq. 33a) so that the
matrix stays O(1) as h -> 0. With ``stabilised=True`` the step is the stabilised index-2
(GGL) form: the increment gains c_q G(q_n)^T mu, and both Phi(q_{n+1}) = 0 and
G v_{n+1} - nu = 0 (scaled by 1 / c_v) are enforced, so x = (a, lam, mu).
"""

from __future__ import annotations

import abc
import contextlib
import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._results import ILL_CONDITIONED, NONFINITE, SUCCESS
from ..constraints.equations import rA_generalized_reaction, rA_rows, rA_terms
from ..formulations import AbstractFormulation
from ..linear import schur as _schur
from ..linear import small as _small_kernels
from ..model import Model
from ..newton import (
    RCOND_MIN,
    ROUNDOFF,
    AbstractNewton,
    NewtonInfo,
    ReusedNewton,
    Scale,
    chart_solve,
    factor_matrix,
    implicit_root,
    placeholder_like,
)
from . import structured as _structured
from ._tangents import with_tangents

#: ``linear_solver="auto"`` picks the structured solver from this many Newton unknowns on
#: (measured crossover on 2 CPU cores, see benchmarks/scaling.py and the README).
STRUCTURED_FROM = 300
#: "dense": LAPACK's LU; "small": the elementwise LU of :mod:`jaxmbd.linear.small` (no custom
#: call, so XLA can compile a whole step as one native loop on the CPU); "structured":
#: block elimination on the body-joint graph; "small_structured": the same elimination in
#: elementwise kernels (:mod:`jaxmbd.linear.small_blocks`: the step stays one native loop);
#: "schur" (the explicit integrators' index-1 KKT solves only): the exact Schur complement
#: of their block-diagonal mass matrix in elementwise kernels (:mod:`jaxmbd.linear.schur`);
#: "auto": one of them by size and backend (:func:`resolve_linear_solver`).
LINEAR_SOLVERS = ("auto", "dense", "small", "structured", "small_structured", "schur")
#: The solvers that factor the Newton matrix as blocks of the body-joint graph.
BLOCK_SOLVERS = ("structured", "small_structured")

#: Paper 1 section 4.4's absolute rule Theta h^2 = 1e-11 (kept for reference; the default
#: tolerance is now relative, :data:`DEFAULT_TOL`).
THETA_H2 = 1e-11
#: Smallest default relative Newton tolerance of the implicit integrators (see
#: newton.Scale): accelerations and multipliers to 1e-10 of their magnitudes, or to the
#: round-off floor that positions impose (an acceleration moves q_{n+1} only by c_q a).
DEFAULT_TOL = 1e-10
#: The default tolerance is TOL_PER_H2 h^2 within [DEFAULT_TOL, TOL_MAX]
#: (:func:`default_tolerance`).
TOL_PER_H2 = 1e-3
TOL_MAX = 1e-6


def default_tolerance(h):
    """The implicit integrators' default relative Newton tolerance at step size h:
    1e-3 h^2 within [1e-10, 1e-6] (h = 1e-2: 1e-7, h = 1e-3: 1e-9, h <= 3e-4: 1e-10).

    The Newton error should be a small fraction of the discretisation error, as in stiff
    integrators (Hairer & Wanner IV.8: kappa Tol with kappa ~ 0.01-0.1). Generalized-alpha's
    errors in a and lam are O(h^2); 1e-3 h^2 keeps the Newton error at a fraction of them
    even in the index-3 variant, whose multipliers amplify it (double pendulum, lam at
    h = 1e-3: error 0.0387 against 0.0379 at tol 1e-10, while 1e-2 h^2 gave 0.0458 and
    broke its second order). A fixed 1e-10 costs coarse steps iterations for nothing
    (double pendulum, h = 1e-2: 4.9 -> 3.4 iterations per step, positions moved by 8e-8 m
    against a discretisation error of 8e-2 m)."""
    h = jnp.asarray(h, jnp.float64)
    return jnp.clip(TOL_PER_H2 * h * h, DEFAULT_TOL, TOL_MAX)


#: "auto" means "schur" for the explicit integrators' KKT solves on the CPU up to
#: :data:`~jaxmbd.linear.small.SMALL_MAX` unknowns (:func:`dense_kernels`).
SCHUR_AUTO = True


def resolve_linear_solver(choice: str, n_unknowns: int, nc: int, *, own_solve=False) -> str:
    """The solver a ``linear_solver`` option means for a system of ``n_unknowns``: "auto"
    is "structured" from :data:`STRUCTURED_FROM` on (with constraints, and no formulation's
    own solve), else "small" up to :data:`~jaxmbd.linear.small.SMALL_MAX` unknowns when
    the default backend is the CPU (on a GPU the vendor's kernels), else "dense". "auto"
    never means "small_structured": measured (``benchmarks/small_solve.py``, the
    guide's performance page) at half the dense kernel's speed or less up to 54 unknowns,
    level with LAPACK at 120 and no longer hoisted at 240."""
    if choice not in LINEAR_SOLVERS:
        raise ValueError(f"linear_solver must be one of {LINEAR_SOLVERS}, got {choice!r}")
    if choice != "auto":
        return choice
    if n_unknowns >= STRUCTURED_FROM and nc > 0 and not own_solve:
        return "structured"
    if n_unknowns <= _small_kernels.SMALL_MAX and jax.default_backend() == "cpu":
        return "small"
    return "dense"


def choose_structured(choice: str, n_unknowns: int, nc: int) -> bool:
    """Whether a ``linear_solver`` option ("auto", "dense", "small", "structured",
    "small_structured") means a block solver for a system of ``n_unknowns`` ("auto": the
    structured one from STRUCTURED_FROM on)."""
    return resolve_linear_solver(choice, n_unknowns, nc) in BLOCK_SOLVERS


def kernel_solver(
    choice: str, n_unknowns: int, nc: int = 0, *, auto_small=True, kkt=True, blocks=True
) -> str:
    """The solver name :func:`dense_kernels` runs with these arguments ("auto" resolved);
    ``blocks=False``: a step without a block factorisation, whose dense solves a block
    solver's choice leaves on LAPACK ("dense")."""
    resolved = resolve_linear_solver(choice, n_unknowns, nc)
    if choice == "auto" and not auto_small and resolved == "small":
        resolved = "schur" if kkt and SCHUR_AUTO else "dense"
    if not blocks and resolved in BLOCK_SOLVERS:
        return "dense"
    return resolved


@contextlib.contextmanager
def dense_kernels(
    choice: str,
    n_unknowns: int,
    nc: int = 0,
    *,
    auto_small: bool = True,
    kkt: bool = True,
):
    """Context (while a step is traced) in which the dense solves use the elementwise
    kernels of :mod:`jaxmbd.linear.small` where ``linear_solver`` resolves to "small"
    (:func:`resolve_linear_solver`), else LAPACK, and the index-1 KKT solves the Schur
    complement (:mod:`jaxmbd.linear.schur`) where it resolves to "schur".

    ``auto_small=False``: "auto" never means "small" (only an explicit
    ``linear_solver="small"`` does): the explicit integrators factor a KKT matrix at every
    stage, and there the elementwise LU of the whole KKT matrix was not measured faster
    (``benchmarks/results/bench_small_solve_simulate.txt``: double pendulum rkmk 11.3k ->
    8.0k steps per CPU-second, arm3 rkmk 6.0k -> 7.3k). ``kkt`` (True: rk, rkmk, whose
    step solves index-1 KKT systems; energy_momentum passes False): "auto" means "schur"
    where it would mean "small" (:data:`SCHUR_AUTO`; measured by
    ``benchmarks/small_solve.py integrators``: rkmk 2-4x the steps per CPU-second,
    rk on rp 1.4-3x), the other dense solves of the step (rkmk's projection) then staying
    on LAPACK."""
    resolved = kernel_solver(choice, n_unknowns, nc, auto_small=auto_small, kkt=kkt)
    if resolved == "schur" and not kkt:
        raise ValueError(
            "linear_solver='schur' applies to the index-1 KKT solves of the explicit "
            "integrators (rk, rkmk); use 'auto', 'dense' or 'small'"
        )
    with _small_kernels.prefer(_small_kernels.limit_for(resolved)):
        with _schur.prefer(resolved == "schur"):
            yield


def fields_with_tangents(state, names: tuple[str, ...], witness: tuple[str, ...], extra=()):
    """``state`` (a NamedTuple) with the fields ``names`` passed through
    :func:`jaxmbd.integrators._tangents.with_tangents`, the fields ``witness`` and ``extra`` its
    witness
    (for :meth:`AbstractIntegrator.with_state_tangents`)."""
    picked = tuple(getattr(state, name) for name in names)
    own = tuple(getattr(state, name) for name in witness)
    picked = with_tangents(picked, (own, extra))
    return state._replace(**dict(zip(names, picked, strict=True)))


class StartState(NamedTuple):
    """A consistent state in formulation coordinates: q, v (nb, ts), a (nb, ts), lam (nm,)."""

    q: Any
    v: jax.Array
    a: jax.Array
    lam: jax.Array


class StepResult(NamedTuple):
    """What one step produced: the new state in formulation coordinates and solver info;
    ``condition``: the iteration matrix's condition number, when the integrator records it
    (``record_condition``), else None."""

    q: Any
    v: jax.Array
    a: jax.Array
    lam: jax.Array
    info: NewtonInfo
    condition: jax.Array | None = None


class AbstractIntegrator(eqx.Module):
    """A time discretisation. ``requires``: the formulation capabilities it uses
    (:data:`~jaxmbd.formulations.CAPABILITIES`); it steps every formulation that provides
    them (:meth:`supports`)."""

    name: ClassVar[str]
    requires: ClassVar[frozenset[str]]
    #: Whether the step resolves impacts itself (an impact law on unilateral rows), so that
    #: compliant-contact sub-steps (:mod:`jaxmbd.integrators.impact_substeps`) never apply.
    resolves_impacts: ClassVar[bool] = False

    @classmethod
    def missing(cls, form) -> frozenset[str]:
        """The required capabilities that ``form`` (a formulation or its class) lacks."""
        return frozenset(cls.requires) - form.capabilities()

    @classmethod
    def supports(cls, form) -> bool:
        """Whether this integrator can step ``form`` (a formulation or its class)."""
        return not cls.missing(form)

    def check_formulation(self, form) -> None:
        """Refuse, with a ValueError naming the valid choices, options that do not apply to
        ``form`` (called by :func:`~jaxmbd.integrators.get_integrator`); default: none."""

    @abc.abstractmethod
    def init(self, model: Model, form: AbstractFormulation, start: StartState, h):
        """The integrator's state at t = 0 from a consistent start."""

    @abc.abstractmethod
    def step(self, model: Model, form: AbstractFormulation, state, k, h):
        """(state, StepResult) at t = k h from the state at (k - 1) h."""

    def with_state_tangents(self, state, extra):
        """``state`` with its physical quantities (positions, velocities, accelerations,
        multipliers) entering a differentiated time loop with tangents wherever its
        accelerations or multipliers or ``extra`` (the loop's controls, policy, masses)
        have one (:func:`jaxmbd.integrators._tangents.with_tangents`; the start's accelerations
        depend on the masses, forces, controls and policy, its positions not): JAX's scan
        linearisation then takes one pass instead of one per carry that turns non-zero.
        Values unchanged to the bit. Default: ``state`` as it is. Never the Newton
        solver's carried matrices or other quantities whose tangents stay zero: a tangent
        there would reach a loop JAX cannot linearise."""
        del extra
        return state

    def positions_velocities(self, state):
        """(q, v) in formulation coordinates of the integrator's ``state`` (a policy's
        observation is taken from them at the start of each step)."""
        return state.q, state.v

    def redundant_constraints(self, model: Model) -> bool:
        """True when the integrator is told the constraint rows are dependent (closed loops):
        the consistent start then uses pseudo-inverses (least-norm multipliers)."""
        return False

    def linear_solver_name(self, model: Model, form: AbstractFormulation) -> str:
        """The linear solver a run of ``model`` in ``form`` uses (its ``linear_solver``
        option with "auto" resolved; ``Solution.linear_solver``). Default: "dense"."""
        del model, form
        return "dense"


class Discretisation(NamedTuple):
    """q_{n+1} = q_n (+) (d0 + c_q a), v_{n+1} = v0 + c_v a (flat tangent d0, v0 (nb, ts))."""

    d0: jax.Array
    c_q: jax.Array
    v0: jax.Array
    c_v: jax.Array


class ImplicitState(NamedTuple):
    """State shared by the implicit integrators: positions, velocities, the last three
    Newton roots (for the predictor) and the Newton solver's own state."""

    q: Any
    v: jax.Array
    history: jax.Array  # (3, nx)
    newton: Any


class AbstractImplicitIntegrator(AbstractIntegrator):
    """Implicit index-3 integrators (or stabilised index 2): one Newton solve per step."""

    requires: ClassVar[frozenset[str]] = frozenset({"index3_blocks"})
    newton: eqx.AbstractVar[AbstractNewton]
    tol: eqx.AbstractVar[float | None]

    @property
    def stabilised(self) -> bool:
        return False

    def __check_init__(self):
        if getattr(self, "linear_solver", None) == "schur":
            raise ValueError(
                f"{self.name}: linear_solver='schur' applies to the explicit integrators' "
                "index-1 KKT systems (rk, rkmk), whose mass matrix is block-diagonal; the "
                "Newton matrix of an implicit step couples bodies through its stiffness "
                "(use 'auto', 'dense', 'small', 'structured' or 'small_structured')"
            )

    def with_state_tangents(self, state, extra):
        # not the Newton state (its matrix, reused across steps, has no tangent); the
        # history holds the start's accelerations and multipliers
        return fields_with_tangents(state, ("q", "v", "history"), ("history",), extra)

    def linear_solver_for(self, model, form) -> str:
        """ "dense", "small", "structured" or "small_structured": the integrator's
        ``linear_solver`` option resolved (:func:`resolve_linear_solver`; a formulation's own
        solve keeps it off "structured"; "auto" means "small" only for formulations whose
        step is hoisted with it, ``hoistable_implicit_step``: rA and rp)."""
        choice = getattr(self, "linear_solver", "dense")
        own = own_linear_solve(form) is not None
        n = self.num_unknowns(model, form)
        resolved = resolve_linear_solver(choice, n, model.nc, own_solve=own)
        if choice == "auto" and resolved == "small" and not form.hoistable_implicit_step:
            # rA and rp measured (the step hoisted, 2-5x the steps per CPU-second:
            # benchmarks/results/bench_small_solve_*.txt); other formulations' steps keep
            # a dot or LAPACK (re: the chart singularity's least-squares step), where the
            # small kernels alone are slower than LAPACK
            return "dense"
        return resolved

    def linear_solver_name(self, model, form) -> str:
        return self.linear_solver_for(model, form)

    def tolerance(self, h):
        """Relative Newton tolerance (eq. 46 in scaled norms); default
        :func:`default_tolerance` (h)."""
        if self.tol is None:
            return default_tolerance(h)
        return jnp.asarray(self.tol, jnp.float64)

    def num_unknowns(self, model, form) -> int:
        n = model.nb * form.tangent_size
        m = form.num_multipliers(model)
        return n + (2 * m if self.stabilised else m)

    def initial_unknowns(self, model, form, start: StartState):
        m = form.num_multipliers(model)
        parts = [start.a.reshape(-1), start.lam]
        if self.stabilised:
            parts.append(jnp.zeros(m, start.lam.dtype))
        return jnp.concatenate(parts)

    def implicit_init(self, model, form, start: StartState) -> ImplicitState:
        x0 = self.initial_unknowns(model, form, start)
        n = x0.shape[0]
        solver = self.linear_solver_for(model, form)
        if isinstance(self.newton, ReusedNewton) and solver in BLOCK_SOLVERS:
            # the stored matrix is structured factors: a NaN placeholder of their shapes
            disc = Discretisation(jnp.zeros(n - form.num_multipliers(model) * (
                2 if self.stabilised else 1)), 1.0, start.v, 1.0)  # fmt: skip
            system = step_system(
                model, form, start.q, disc, 0.0, stabilised=self.stabilised,
                linear_solver=solver,
            )  # fmt: skip
            with _small_kernels.prefer(_small_kernels.limit_for(solver)):
                shapes = jax.eval_shape(
                    lambda x: _factor_shapes(system.jacobian(x), x), jax.lax.stop_gradient(x0)
                )
            state = self.newton.init(n, placeholder=placeholder_like(shapes))
        else:
            state = self.newton.init(n)
        return ImplicitState(start.q, start.v, jnp.stack([x0, x0, x0]), state)

    def solve_step(self, model, form, state: ImplicitState, disc: Discretisation, k, h):
        """Predict x from the last three roots, solve, and return (x, q1, v1, info, newton)."""
        # Quadratic extrapolation of the last three roots (error O(h^3) instead of O(h);
        # linear at the second step) saves iterations, most with a reused matrix. The root
        # does not depend on the guess: no gradient through it.
        x1, x2, x3 = state.history
        guess = jnp.where(k >= 3, 3.0 * x1 - 3.0 * x2 + x3, jnp.where(k == 2, 2.0 * x1 - x2, x1))
        solver = self.linear_solver_for(model, form)
        with _small_kernels.prefer(_small_kernels.limit_for(solver)):
            return implicit_step(
                model,
                form,
                self.newton,
                state.q,
                disc,
                jax.lax.stop_gradient(guess),
                state.newton,
                k * h,
                tol=self.tolerance(h),
                stabilised=self.stabilised,
                linear_solver=solver,
            )


def _factor_shapes(matrix, x):
    one = jnp.ones_like(x)
    return factor_matrix(matrix, one, one)


class StepSystem(NamedTuple):
    """The nonlinear system of one implicit step: ``residual(x, params)``, its Newton matrix
    ``jacobian(x)`` at the (gradient-stopped) ``params``, and ``update(x, params)`` giving
    (q_{n+1}, v_{n+1})."""

    residual: Callable
    jacobian: Callable
    update: Callable
    params: Any


def step_system(
    model, form, q, disc: Discretisation, t, *, stabilised: bool = False,
    linear_solver: str = "dense",
):  # fmt: skip
    """Residual and Newton matrix of one implicit step for x = (a_{n+1}, lam_{n+1}[, mu]):

        [g(q_{n+1}, v_{n+1}, a_{n+1}, lam_{n+1}, t); Phi(q_{n+1}, t) / c_q
         [; (G v_{n+1} - nu)(q_{n+1}, t) / c_v]]

    with the increment d0 + c_q (a + G(q_n)^T mu) in the stabilised form.

    ``linear_solver="structured"``: the Newton matrix is a block matrix of the body-joint
    graph (:mod:`jaxmbd.integrators.structured`), block-assembled for rA (then G(q_n) is
    kept as rows and G_n^T mu is a scatter-add, O(N)), gathered from the dense matrix
    otherwise.
    """
    nb, ts = model.nb, form.tangent_size
    n = nb * ts
    m = form.num_multipliers(model)
    structured = linear_solver in BLOCK_SOLVERS
    assembled = structured and _structured.block_assembled(model, form)
    layout = _structured.layout_for(model, form, stabilised=stabilised) if structured else None
    if stabilised and assembled:
        G_n = rA_rows(model, q[0], q[1], t)[1:]  # (jac_i, jac_j) of G(q_n)
    else:
        G_n = form.position_terms(model, q, t)[1] if stabilised else None

    def unpack(x):
        return x[:n], x[n : n + m], x[n + m :]

    def transpose_times(G_n, mu):
        if assembled:
            return rA_generalized_reaction(model, G_n[0], G_n[1], mu).reshape(-1)
        return _product(G_n.T, mu)

    def increment(x, disc, G_n):
        a, _, mu = unpack(x)
        move = a + transpose_times(G_n, mu) if stabilised else a
        return disc.d0 + disc.c_q * move

    def update(x, params):
        _, q, disc, G_n = params
        q1 = form.retract(q, increment(x, disc, G_n))
        return q1, disc.v0 + disc.c_v * x[:n].reshape(nb, ts)

    def residual(x, params):
        model, _, disc, _ = params
        a, lam, _ = unpack(x)
        q1, v1 = update(x, params)
        if not stabilised:
            g, phi = form.dynamics_equations(model, q1, v1, a.reshape(nb, ts), lam, t)
            return jnp.concatenate([g, phi / disc.c_q])
        g, phi, psi = form.dynamics_and_velocity_equations(model, q1, v1, a.reshape(nb, ts), lam, t)
        return jnp.concatenate([g, phi / disc.c_q, psi / disc.c_v])

    params = (model, q, disc, G_n)
    frozen = jax.lax.stop_gradient(params)

    def jacobian(x):
        model_, _, disc_, G_n_ = frozen
        a, lam, _ = unpack(x)
        q1, v1 = update(x, frozen)
        if assembled:
            delta = increment(x, disc_, G_n_)
            return _structured.newton_blocks(
                layout, model_, q1, v1, a, lam, t, delta, disc_, G_n_, stabilised=stabilised
            )
        if structured:
            return _structured.gathered_blocks(layout, dense_jacobian(x))
        return dense_jacobian(x)

    def dense_jacobian(x):
        model_, _, disc_, G_n_ = frozen
        a, lam, _ = unpack(x)
        q1, v1 = update(x, frozen)
        blocks = form.dynamics_linearisation(model_, q1, v1, a.reshape(nb, ts), lam, t)
        if blocks is None:
            _, lin = jax.linearize(lambda y: residual(y, frozen), x)
            return jax.vmap(lin, out_axes=1)(jnp.eye(x.shape[0], dtype=x.dtype))
        delta = increment(x, disc_, G_n_)
        return assemble_newton_matrix(
            form, blocks, delta, disc_, G_n_, model_, q1, v1, t, stabilised=stabilised
        )

    return StepSystem(residual, jacobian, update, params)


def own_linear_solve(form: AbstractFormulation):
    """The formulation's linear solve where it replaces the dense LU (none of the built-in
    formulations does), else None: the Newton solvers then use their equilibrated LU with a
    condition estimate."""
    return None if type(form).solve is AbstractFormulation.solve else form.solve


def step_scale(model, q, disc: Discretisation, form, *, stabilised: bool):
    """Magnitudes and round-off resolutions of x = (a, lam[, mu]) for the Newton tests
    (:class:`~jaxmbd.newton.Scale`), per group so that units never mix:

    * accelerations: s_a = max(max |a|, |gravity|) (1 m/s^2 when both are 0).
      q_{n+1} = q_n (+) (d0 + c_q a) holds a only to eps |q| / c_q, v_{n+1} = v0 + c_v a
      to eps |v| / c_v. Index 3: the constraint rows Phi / c_q fix a's constrained part,
      so its resolution is ROUNDOFF eps (s_a + |q| / c_q). Stabilised: Phi / c_q is met by
      mu and a's constrained part by the velocity rows, so a is resolved to ROUNDOFF eps
      (s_a + |v| / c_v), far finer (an error of a moves v_{n+1}, and through it every
      later position, however small c_q a is);
    * multipliers: s_lam = max(max |lam|, s_a max(mass)) (the force of the heaviest body at
      the acceleration scale), resolution ROUNDOFF eps s_lam + max(mass) times a's;
    * the stabilisation multipliers mu (units of a, moving only q_{n+1}): s_a, resolution
      ROUNDOFF eps (s_a + |q| / c_q).
    """
    nb, ts = model.nb, form.tangent_size
    n, m = nb * ts, form.num_multipliers(model)
    eps = ROUNDOFF * float(jnp.finfo(jnp.float64).eps)
    q_mag = jnp.maximum(jnp.max(jnp.abs(form.flat_coordinates(q))), 1.0)
    by_positions = eps * q_mag / disc.c_q
    v_mag = jnp.max(jnp.abs(disc.v0)) if disc.v0.size else 0.0
    by_velocities = eps * v_mag / disc.c_v
    a_floor = by_velocities if stabilised else by_positions
    g = jnp.linalg.norm(model.gravity)
    heavy = jnp.max(model.mass) if nb else 1.0

    def scale(x):
        a, lam = x[:n], x[n : n + m]
        s_a = jnp.maximum(jnp.max(jnp.abs(a)), g)
        # a model at rest without gravity or any force has no acceleration to scale by (the
        # tests read 0 / 0 as non-finite): 1 m/s^2 then, as default_scale's floor
        s_a = jnp.where(s_a > 0, s_a, 1.0)
        s_l = jnp.maximum(jnp.max(jnp.abs(lam)) if m else 0.0, s_a * heavy)
        e_a = eps * s_a + a_floor
        w = [jnp.full(n, s_a), jnp.full(m, s_l)]
        e = [jnp.full(n, e_a), jnp.full(m, eps * s_l + heavy * e_a)]
        if stabilised:
            w.append(jnp.full(m, s_a))
            e.append(jnp.full(m, eps * s_a + by_positions))
        w, e = jnp.concatenate(w), jnp.concatenate(e)
        return Scale(jnp.where(w > 0, w, e), e)

    return scale


def implicit_step(
    model: Model,
    form: AbstractFormulation,
    newton: AbstractNewton,
    q,
    disc: Discretisation,
    x0,
    newton_state,
    t,
    *,
    tol,
    stabilised: bool = False,
    linear_solver: str = "dense",
):
    """Solve one implicit step for x = (a_{n+1}, lam_{n+1}[, mu]) with implicit gradients.

    Returns (x, q_{n+1}, v_{n+1}, NewtonInfo, newton_state). The root carries derivatives
    with respect to the model, q_n and the discretisation (implicit function theorem, no
    differentiation through Newton iterations).
    """
    system = step_system(
        model, form, q, disc, t, stabilised=stabilised, linear_solver=linear_solver
    )
    frozen = jax.lax.stop_gradient(system.params)
    linear_solve = own_linear_solve(form)
    # a chart with singularities (re): the least-squares step-over is allowed only where the
    # predicted q_{n+1} is at the singularity, and then verified below
    # (the structured solver has no step-over: re runs strict there)
    near = None
    if linear_solver not in BLOCK_SOLVERS:
        near = form.near_chart_singularity(system.update(x0, frozen)[0])
    if near is not None:
        near = jax.lax.stop_gradient(near)
        linear_solve = functools.partial(chart_solve, least_squares=near)
    x_star, info, newton_state = newton.solve(
        lambda x: system.residual(x, frozen),
        system.jacobian,
        x0,
        newton_state,
        tol=tol,
        linear_solve=None if linear_solver in BLOCK_SOLVERS else linear_solve,
        scale=step_scale(*frozen[:3], form, stabilised=stabilised),
    )
    if near is not None:
        info = _verify_chart_step(model, form, system, x_star, frozen, t, near, info)
    x = implicit_root(
        system.residual,
        lambda x, d: x + d,
        x_star,
        system.params,
        x0.shape[0],
        jacobian=system.jacobian,
    )
    q1, v1 = system.update(x, system.params)
    return x, q1, v1, info, newton_state


def _verify_chart_step(model, form, system, x_star, frozen, t, near, info: NewtonInfo):
    """A step over re's chart singularity (the least-squares solve was allowed) passed
    Newton's scaled step and residual tests; it is accepted only with finite multipliers
    and a full-row-rank chart-free Jacobian G_rA at q_{n+1} (else the rank deficiency is
    the model's: redundant constraints, reported ILL_CONDITIONED like everywhere else)."""

    def row_rank_ratio():
        q1, _ = system.update(x_star, frozen)
        r, ori = q1
        zero = jnp.zeros_like(r)
        _, G_rA, _, _ = rA_terms(model, r, form.rotation(ori), zero, zero, t)
        G_rA = G_rA / jnp.maximum(jnp.max(jnp.abs(G_rA), axis=1, keepdims=True), 1e-300)
        s = jnp.linalg.svd(G_rA, compute_uv=False)
        return jnp.where(jnp.all(jnp.isfinite(s)), s[-1] / s[0], 0.0)

    rcond = jax.lax.cond(near, row_rank_ratio, lambda: jnp.asarray(1.0)) if model.nc else 1.0
    finite = jnp.all(jnp.isfinite(x_star))
    status = jnp.where(
        near & (info.status == SUCCESS),
        jnp.where(
            ~finite,
            NONFINITE,
            jnp.where(rcond < RCOND_MIN, ILL_CONDITIONED, SUCCESS),
        ),
        info.status,
    )
    return info._replace(status=status)


def _product(a, b):
    """A B (or A v): elementwise in a step solved by the small kernels, whose loop XLA
    can compile natively only without a ``dot`` (:mod:`jaxmbd.linear.small`)."""
    return _small_kernels.matmul(a, b) if _small_kernels.hoistable() else a @ b


def assemble_newton_matrix(form, blocks, delta, disc, G_n, model, q1, v1, t, *, stabilised):
    """Newton matrix of the discretised step from the continuous-time blocks:

        [[M + c_v D_v + c_q D_q T,  G^T],
         [G T,                      0  ]]

    with T = T(delta) the retraction's tangent map (rA: J_r of the rotation increment, the
    exact dexp of eq. 38c). The stabilised form adds the mu column and the velocity rows.
    """
    c_q, c_v = disc.c_q, disc.c_v
    stiffness_T = form.times_tangent_map(blocks.stiffness, delta)
    G_T = form.times_tangent_map(blocks.G, delta)
    top_left = blocks.mass + c_v * blocks.damping + c_q * stiffness_T
    m = blocks.G.shape[0]
    if not stabilised:
        top = jnp.concatenate([top_left, blocks.G.T], 1)
        bottom = jnp.concatenate([G_T, jnp.zeros((m, m))], 1)
        return jnp.concatenate([top, bottom], 0)
    S_T = form.times_tangent_map(form.velocity_residual_linearisation(model, q1, v1, t), delta)
    ratio = c_q / c_v
    zeros = jnp.zeros((m, m))
    G_n_T = G_n.T
    rows = [
        [top_left, blocks.G.T, c_q * _product(stiffness_T, G_n_T)],
        [G_T, zeros, _product(G_T, G_n_T)],
        [blocks.G + ratio * S_T, zeros, ratio * _product(S_T, G_n_T)],
    ]
    return jnp.concatenate([jnp.concatenate(r, 1) for r in rows], 0)
