"""Energy-momentum integration of director bodies (Betsch & Leyendecker 2006, Sec. 2.2).

Two schemes for the same discrete equations, the midpoint scheme (10) with a discrete
gradient:

    q_{n+1} - q_n = h v_{n+1/2},                     v_{n+1/2} = (v_n + v_{n+1}) / 2
    M (v_{n+1} - v_n) = -h grad_bar V(q_n, q_{n+1}) + h Q_nc - h G(q_{n+1/2})^T lam
    Phi(q_{n+1}) = 0

* ``scheme="constrained"``: Newton on (q_{n+1}, lam) (n + m unknowns) after eliminating
  v_{n+1} = 2 (q_{n+1} - q_n) / h - v_n (notes 1.2):
  R1 = (2/h) M (q_{n+1} - q_n) - 2 M v_n + h grad_bar V + h G(q_{n+1/2})^T lam, R2 = Phi.
  The solver works on the equivalent rows (h/2) R1 with lam_hat = h^2 lam / 2 (an O(1)
  matrix); :func:`constrained_matrix` gives the paper's unscaled matrix, whose condition
  number grows like h^-3 (Tables II-V).
* ``scheme="null_space"``: the discrete null space method (Sec. 2.2.2, eqs. 11-15). The
  unknowns are d incremental minimal coordinates mu, q_{n+1} = F_{q_n}(mu) with
  Phi(F(mu)) = 0, and the reduced equations P(q_n, q_{n+1})^T R1 = 0 (lam eliminated).
  Two constructions of F and P (option ``parametrisation``):

  - ``"pairs"`` (default): the paper's. F(mu) and P(q_n, q_{n+1}) in closed form for the
    S, R, P, C and E pairs (with the non-midpoint discrete matrices of C, P and E), composed
    along a spanning tree through the recursive twist map (serial chains, Sec. 5.4.1); the
    rows of joints outside the tree (a loop's closing joint, other joints, drivers) are
    closure rows, handled as in Sec. 5.4.2 / notes 1.6: d = the tree's unknowns, equations
    [p_c^T P^T R1; B^T Phi_c(F(mu))] (:func:`pairs_residual`,
    :mod:`jaxmbd.formulations.director_pairs`). The unknowns are the paper's (u_phi1,
    theta1, joint increments), so the reduced condition numbers are the paper's (Tables
    II-V).
  - ``"numerical"``: a generic variant for any joint, mu in an orthonormal basis of the
    twist null space from an SVD at q_n, F by an inner Newton projection onto the joints
    (:func:`reparametrise`), P by projecting P(q_n) onto null G(q_{n+1/2})
    (:func:`discrete_null_space`); slower to compile and run.

Discrete gradient: gravity exactly (linear V); springs with Gonzalez's discrete gradient
grad V(q_mid) + [V(q1) - V(q0) - grad V(q_mid).dq] dq / |dq|^2 (notes 1.2); forces that
have no potential (dampers, user laws) at the midpoint (q_{n+1/2}, v_{n+1/2}, t_{n+1/2}).
Because every director constraint is at most quadratic, G(q_{n+1/2}) is an exact discrete
derivative (:mod:`jaxmbd.formulations.director`), so both schemes conserve the energy
exactly (to the Newton tolerance) and the momentum maps of symmetries of V and Phi.

Newton: :class:`DampedNewton` (backtracking on ||F||) from the Cayley-angle rotation predictor
2 atan(h |omega| / 2) (notes 2.1), so the gyro top runs at h = 0.05 (~2.6 rad per step).
Redundant joint rows (a closed loop such as the six-body linkage, 30 rows of rank 29): pass
``dof``; both schemes then use the same independent rows W^T Phi (:func:`row_selection`: all
rows of the spanning tree and d - dof combinations of the closure rows, W fixed during the
step, so still an exact discrete derivative), and the consistent start uses least-norm
multipliers (:meth:`EnergyMomentum.redundant_constraints`).

Both schemes end with the same root (q_{n+1}, lam) of the constrained equations; the
gradient of a step is attached to it by the implicit function theorem
(:func:`jaxmbd.newton.implicit_root` on the constrained residual), so ``jax.grad`` never
differentiates Newton iterations and is the same for both schemes.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .._results import SUCCESS, as_status, finite_status, first_failure
from ..compiled.jit import jit
from ..forces import adds_mass
from ..formulations import director_pairs as pairs
from ..linear.graph import newton_layout
from ..linear.structured import BlockMatrix, empty_factors
from ..newton import (
    AbstractNewton,
    DampedNewton,
    NewtonInfo,
    ReusedNewton,
    get_newton,
    implicit_root,
    solve_with_condition,
)
from ._discrete_gradient import (
    apply_twists,
    constrained_matrix,
    constrained_residual,
    midpoint_rows_status,
    multipliers,
    row_selection,
    twist_predictor,
)
from ._null_space import (
    closure_data,
    pairs_residual,
    reduced_residual,
    reparametrise,
    twist_basis,
)
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

SCHEMES = ("constrained", "null_space")
#: ``linear_solver="auto"`` solves the constrained scheme's Newton systems (independent rows)
#: with the elementwise kernels of :mod:`jaxmbd.linear.small` on the CPU up to this many
#: unknowns: the step loop is then hoisted, and measured faster at 24 and 46 unknowns
#: (single pendulum 7.1k -> 11.8k, double pendulum 3.9k -> 4.5k steps per CPU-second) but
#: slower at 72 (slider crank 1.2k -> 1.0k: the elementwise LU's n masked whole-matrix
#: updates per factorisation, 3 per step, outweigh the runtime overhead hoisting saves in a
#: step of ~1 ms); the crossover between is not measured
#: (``benchmarks/results/bench_small_solve_energy_momentum.txt``).
AUTO_SMALL_MAX = 46
PARAMETRISATIONS = ("pairs", "numerical")


class EMState(NamedTuple):
    q: Any
    v: jax.Array
    lam_hat: jax.Array  # h^2 lam / 2 of the last step (Newton guess)
    newton: Any = None  # the Newton solver's state, carried across steps (newton="reuse")
    # the first failure of the run so far: a step starts from its predecessor's state
    status: Any = None


def _jacobian(newton, residual):
    """None lets :class:`DampedNewton` form the residual and its Jacobian in one pass."""
    return None if isinstance(newton, DampedNewton) else jax.jacfwd(residual)


def form_rows(model) -> int:
    """Rows of the constrained scheme: the joints' GCON rows and 6 internal rows per body."""
    return model.nc + 6 * model.nb


def director_layout(model):
    """The block layout of the constrained scheme's matrix (unknowns (q1 flat, lam_hat)):
    each director body (12 coordinates) with its 6 internal rows and the rows of the joint
    to its parent (:func:`~jaxmbd.linear.graph.newton_layout`)."""
    return newton_layout(model, tangent_size=12, extra_rows=6)


def _solve_structured(newton, residual, y0, layout, tol, state):
    """One constrained-scheme solve with the structured factorisation: the dense Jacobian
    gathered into the blocks of ``layout``, then block elimination instead of a dense LU
    (DampedNewton: as its linear solve; the other variants factor the block matrix).
    ``state``: the solver's state from the previous step (:func:`_newton_state`)."""
    st = layout.structure

    def blocks(J):
        return BlockMatrix(st.gather(J), st, layout.n)

    if isinstance(newton, DampedNewton):

        def linear_solve(J, F):  # block elimination, with its pivot-ratio status
            return solve_with_condition(blocks(J), F)

        return newton.solve(residual, None, y0, None, tol=tol, linear_solve=linear_solve)
    jac = jax.jacfwd(residual)
    return newton.solve(residual, lambda y: blocks(jac(y)), y0, state, tol=tol)


def _newton_state(newton, n: int, layout=None):
    """The initial state of the Newton solver for n unknowns (structured: ``layout``, whose
    reused factors start as a placeholder of their shapes)."""
    if layout is not None and isinstance(newton, ReusedNewton):
        st = layout.structure
        return newton.init(layout.n, placeholder=empty_factors(st, layout.n, jnp.float64))
    return newton.init(n)


def _newton(newton, max_iter):
    """The Newton solver object of the options ``newton`` and ``max_iter`` (None: 30; an
    object carries its own)."""
    if isinstance(newton, AbstractNewton):
        if max_iter is not None:
            raise ValueError(
                "energy_momentum: max_iter is set on the newton object itself "
                f"({type(newton).__name__}(max_iter=...)), not as an option beside it"
            )
        return newton
    max_iter = 30 if max_iter is None else max_iter
    if isinstance(newton, str) and newton == "damped":
        return DampedNewton(max_iter=max_iter)
    try:
        return get_newton(newton, max_iter=max_iter)
    except ValueError:
        raise ValueError(
            "energy_momentum: newton must be one of ['damped', 'full', 'modified', 'reuse'] "
            f"or a Newton solver object, got {newton!r}"
        ) from None


# ------------------------------------------------------------------------------ integrator


class EnergyMomentum(AbstractIntegrator):
    """Energy-momentum midpoint scheme (10) for the director formulation.

    Options (keyword-only):

    * ``scheme``: "constrained" (Newton on (q_{n+1}, lam), n + m unknowns) or "null_space"
      (the discrete null space method, Newton on the reduced unknowns mu).
    * ``parametrisation`` (null_space): "pairs" (default), the paper's method: the closed-form
      reparametrisation F(mu) and discrete null space matrices of the S, R, P, C and E pairs
      along a spanning tree, closure rows of loops as extra equations
      (:mod:`~jaxmbd.formulations.director_pairs`, :func:`pairs_residual`); Newton size d
      (tree unknowns: 3 gyro top, 8 C pair, 9 E pair, 5 six-body linkage). "numerical": a
      generic variant for any joint, null space from an SVD of G_ext P_int at q_n and an
      inner Newton projection onto the joints (:func:`reparametrise`,
      :func:`discrete_null_space`); Newton size dof. Both have the same root.
    * ``record_condition``: also return, per step, the 2-norm condition number of the
      scheme's iteration matrix at the converged iterate (constrained: the paper's unscaled
      (n+m) matrix, :func:`constrained_matrix`; null_space: the Jacobian of the reduced
      equations): ``Solution.condition`` (T,), NaN at t = 0 (no step). Tables II-V.
    * ``tol`` (relative Newton tolerance: scaled step and residual tests; default 1e-12),
      ``max_iter`` (30), ``newton`` ("damped": :class:`DampedNewton`, the default; "full",
      "modified", "reuse": the factored matrix is carried from step to step and refreshed
      when it stops contracting; or a solver object, which then carries its own max_iter).
    * ``dof``: a check, never needed: the degrees of freedom you expect, compared with
      6 nb - rank (a mismatch raises). Redundant rows (the six-body linkage's closing joint
      has one) are found when the model is built and dropped by ``simulate`` before the run
      (``redundant="drop"``, :mod:`jaxmbd.constraints.redundancy`), so the rows left are
      independent.
      On a model whose rows are still dependent (``Model.redundancy`` None), ``dof`` below
      6 nb - nc selects the rows of :func:`row_selection` (all tree rows, d - dof
      combinations of the closure rows), in both schemes.
    * ``linear_solver`` (constrained scheme): "dense" (LU of the (n + m) matrix),
      "structured" (block elimination on the body-joint graph, :func:`director_layout`: O(N)
      per solve on a tree; the matrix is still formed densely by forward-mode autodiff) or
      "auto" (default: structured from 300 unknowns on; on the CPU "small", the elementwise
      kernels with the step compiled as one native loop, up to :data:`AUTO_SMALL_MAX`
      unknowns; else "dense"), "small" (every dense solve in elementwise kernels, no
      ``dot`` in the step: XLA hoists the step loop). Block solvers not with redundant rows
      (``dof``) or the null-space scheme, whose reduced matrix is dense.
    """

    name: ClassVar[str] = "energy_momentum"
    requires: ClassVar[frozenset[str]] = frozenset({"director_coordinates"})
    scheme: str = "constrained"
    tol: float | None = None
    max_iter: int | None = eqx.field(static=True, default=None)
    newton: Any = "damped"
    dof: int | None = eqx.field(static=True, default=None)
    parametrisation: str | None = eqx.field(static=True, default=None)
    record_condition: bool = eqx.field(static=True, default=False)
    linear_solver: str = eqx.field(static=True, default="auto")

    def __check_init__(self):
        if self.linear_solver not in LINEAR_SOLVERS:
            raise ValueError(
                f"energy_momentum: linear_solver must be one of {LINEAR_SOLVERS}, "
                f"got {self.linear_solver!r}"
            )
        if self.linear_solver == "schur":
            raise ValueError(
                "energy_momentum: linear_solver='schur' applies to the index-1 KKT systems of "
                "rk and rkmk; the midpoint scheme's Newton matrix is not of that form (use "
                "'auto', 'dense', 'small', 'structured' or 'small_structured')"
            )
        if self.scheme not in SCHEMES:
            raise ValueError(
                f"energy_momentum: scheme must be one of {SCHEMES}, got {self.scheme!r}"
            )
        if self.parametrisation is not None and self.parametrisation not in PARAMETRISATIONS:
            raise ValueError(
                f"energy_momentum: parametrisation must be one of {PARAMETRISATIONS}, "
                f"got {self.parametrisation!r}"
            )
        if self.linear_solver in BLOCK_SOLVERS and self.scheme != "constrained":
            raise ValueError(
                f"energy_momentum: linear_solver={self.linear_solver!r} needs "
                "scheme='constrained' (the "
                "null-space scheme's reduced matrix is dense); use 'dense' or 'auto'"
            )
        if self.parametrisation is not None and self.scheme != "null_space":
            raise ValueError(
                "energy_momentum: parametrisation applies to scheme='null_space' only; "
                f"scheme={self.scheme!r} solves for (q_{{n+1}}, lam) directly"
            )
        _newton(self.newton, self.max_iter)
        if self.tol is not None and not (float(self.tol) > 0):
            raise ValueError(f"energy_momentum: tol must be positive, got {self.tol!r}")

    def _tol(self):
        return 1e-12 if self.tol is None else self.tol

    def _dof(self, model):
        dof = 6 * model.nb - model.nc if self.dof is None else self.dof
        if not 0 <= dof <= 6 * model.nb:
            raise ValueError(f"energy_momentum: dof = {dof} outside [0, {6 * model.nb}]")
        rank = None if model.redundancy is None else model.redundancy.rank
        if self.dof is not None and rank is not None and dof != 6 * model.nb - rank:
            # a check, never needed: redundant rows are found when the model is built
            raise ValueError(
                f"energy_momentum: dof = {dof}, but model '{model.name}' has "
                f"{6 * model.nb - rank} degrees of freedom (6 x {model.nb} body coordinates, "
                f"constraint rank {rank} at the initial pose); leave dof out"
            )
        return dof

    def redundant_constraints(self, model):
        return self._dof(model) != 6 * model.nb - model.nc

    def structured(self, model) -> bool:
        """Whether the constrained scheme's solves use the structured factorisation."""
        if self.linear_solver in BLOCK_SOLVERS:
            if self.scheme != "constrained" or self.redundant_constraints(model):
                raise ValueError(
                    f"energy_momentum: linear_solver={self.linear_solver!r} needs "
                    "scheme='constrained' "
                    "and independent joint rows (no dof option); the null-space scheme's "
                    "reduced matrix and the selected rows W^T Phi of a redundant loop are "
                    "dense: use linear_solver='dense'"
                )
            return True
        if self.scheme != "constrained" or self.redundant_constraints(model):
            return False
        return choose_structured(self.linear_solver, 12 * model.nb + form_rows(model), model.nc)

    def with_state_tangents(self, state, extra):
        return fields_with_tangents(state, ("q", "v", "lam_hat"), ("lam_hat",), extra)

    def init(self, model, form, start, h):
        if not self.supports(form):
            raise ValueError(
                f"energy_momentum cannot step formulation {form.name!r}: it needs "
                "director coordinates (capability 'director_coordinates')"
            )
        if adds_mass(model.forces):
            raise ValueError(
                f"energy_momentum: model '{model.name}' has joint armature, whose inertia "
                "a g g^T depends on the configuration; the scheme's discrete gradient needs "
                "the constant director mass matrix. Use formulation 'rA' with integrator "
                "'gen_alpha' or 'rkmk'"
            )
        dof = self._dof(model)
        structure = pairs.pair_structure(model)
        k = structure.size - dof
        if not 0 <= k <= len(structure.closure_rows):
            raise ValueError(
                f"energy_momentum: dof = {dof} is impossible for model '{model.name}': its "
                f"spanning tree ({structure.describe(model)}) has {structure.size} unknowns "
                f"and {len(structure.closure_rows)} closure rows"
            )
        structured = self.structured(model)  # refuses an impossible choice before compiling
        lam_hat = jnp.where(jnp.isfinite(start.lam), 0.5 * h**2 * start.lam, 0.0)
        newton = _newton(self.newton, self.max_iter)
        layout = director_layout(model) if structured else None
        state = _newton_state(newton, self._num_unknowns(model, structure, dof), layout)
        return EMState(start.q, start.v, lam_hat, state, as_status(SUCCESS))

    def _num_unknowns(self, model, structure, dof: int) -> int:
        """Newton unknowns of a step: (q_{n+1}, lam_hat) of the rows used (constrained), the
        tree's increments d (null space, pairs) or dof (null space, numerical)."""
        if self.scheme == "constrained":
            if not self.redundant_constraints(model):
                return 12 * model.nb + form_rows(model)
            k = structure.size - dof  # row_selection: tree, internal and k closure rows
            return 12 * model.nb + len(structure.tree_rows) + 6 * model.nb + k
        return structure.size if self.parametrisation in (None, "pairs") else dof

    def _null_space_root(self, newton, form, model, q0, v0, structure, dof, W, h, k, state):
        """The null-space scheme's root as (q_{n+1} flat, lam_hat), its Newton info and
        state, the reduced matrix (``record_condition``) and the first failure of the
        inner solves at the root: the projection onto the joints (numerical) and the
        conditioning of the multipliers' rows G(q_{n+1/2}) (:func:`multipliers`)."""
        tol = self._tol()
        x0 = form._flat(q0)
        inner = as_status(SUCCESS)
        if self.parametrisation in (None, "pairs"):
            table = pairs.edge_table(model, structure)
            closure = closure_data(form, model, structure, q0, k * h, dof, table)
            mu0 = pairs.predictor(model, structure, q0, v0, h, table=table)

            def res_mu(mu):
                return pairs_residual(form, model, structure, closure, q0, v0, mu, h, k, table)

            def F(mu):
                q1 = pairs.reparametrise(model, structure, q0, mu, table=table)
                return form._flat(q1), inner
        else:
            basis = twist_basis(form, model, q0, k * h, dof)
            mu0 = basis.N.T @ twist_predictor(form, q0, v0, h).reshape(-1)

            def res_mu(mu):
                return reduced_residual(form, model, q0, v0, basis, mu, h, k, tol=1e-3 * tol, W=W)

            def F(mu):
                q1, status = reparametrise(form, model, q0, basis, mu, k * h, tol=1e-3 * tol)
                return form._flat(q1), status

        mu_star, info, newton_state = newton.solve(
            res_mu, _jacobian(newton, res_mu), mu0, state, tol=tol
        )
        x1, projection = F(mu_star)
        lam, rows = multipliers(form, model, x0, v0, x1, h, k, W)
        y_star = jnp.concatenate([x1, 0.5 * h**2 * lam])
        reduced_matrix = jax.jacfwd(res_mu)(mu_star) if self.record_condition else None
        return y_star, info, newton_state, reduced_matrix, first_failure(projection, rows)

    def _kernels(self, model):
        """(n, auto_small): the arguments of the step's
        :func:`~jaxmbd.integrators.base.dense_kernels`."""
        n = 12 * model.nb + form_rows(model)
        # "auto" means "small" where measured faster (AUTO_SMALL_MAX; the constrained scheme
        # with independent rows only: the others were not measured)
        auto_small = (
            n <= AUTO_SMALL_MAX
            and self.scheme == "constrained"
            and not self.redundant_constraints(model)
        )
        return n, auto_small

    def linear_solver_name(self, model, form) -> str:
        n, auto_small = self._kernels(model)
        return kernel_solver(
            self.linear_solver, n, model.nc, auto_small=auto_small, kkt=False,
            blocks=self.structured(model),
        )  # fmt: skip

    def step(self, model, form, state, k, h):
        """One step, its dense solves by the kernels ``linear_solver`` picks
        (:func:`~jaxmbd.integrators.base.dense_kernels`)."""
        n, auto_small = self._kernels(model)
        with dense_kernels(self.linear_solver, n, model.nc, auto_small=auto_small, kkt=False):
            return self._step(model, form, state, k, h)

    def _step(self, model, form, state, k, h):
        """One step of the midpoint scheme (10). Its status: the first failure of the run
        before it (the step starts from that state), of its Newton solve, of its inner
        solves at the root (the projection onto the joints, the conditioning of the
        multipliers' rows G(q_{n+1/2})) and of finiteness."""
        newton = _newton(self.newton, self.max_iter)
        nb = model.nb
        n = 12 * nb
        q0, v0 = state.q, state.v
        x0 = form._flat(q0)
        tol = self._tol()
        frozen = jax.lax.stop_gradient((model, x0, v0))
        m_, x0_, v0_ = frozen
        q0_ = form._unflat(x0_, nb)
        dof = self._dof(model)
        structure = pairs.pair_structure(model)
        W = None
        if dof != 6 * nb - model.nc:  # redundant joint rows (closed loop): rank n - dof
            W = row_selection(form, m_, structure, x0_, k * h, dof)
        reduced_matrix = None

        if self.scheme == "constrained":
            guess = form._flat(apply_twists(form, q0, twist_predictor(form, q0, v0, h)))
            lam_guess = state.lam_hat if W is None else W.T @ state.lam_hat
            y0 = jax.lax.stop_gradient(jnp.concatenate([guess, lam_guess]))

            def res(y):
                return constrained_residual(form, m_, x0_, v0_, y, h, k, W)

            if self.structured(model):
                y_star, info, newton_state = _solve_structured(
                    newton, res, y0, director_layout(m_), tol, state.newton
                )
            else:
                y_star, info, newton_state = newton.solve(
                    res, _jacobian(newton, res), y0, state.newton, tol=tol
                )
            inner = midpoint_rows_status(form, m_, x0_, y_star[:n], k * h, W)
        else:
            y_star, info, newton_state, reduced_matrix, inner = self._null_space_root(
                newton, form, m_, q0_, v0_, structure, dof, W, h, k, state.newton
            )

        condition = None
        if self.record_condition:
            if reduced_matrix is None:
                lam = y_star[n:] * (2.0 / h**2)
                reduced_matrix = constrained_matrix(form, m_, x0_, v0_, y_star[:n], lam, h, k, W)
            condition = jnp.linalg.cond(reduced_matrix)

        # implicit gradients of the (scheme-independent) root of the constrained equations
        def residual(y, params):
            m_, x0_, v0_ = params
            return constrained_residual(form, m_, x0_, v0_, y, h, k, W)

        y = implicit_root(residual, lambda y_, d: y_ + d, y_star, (model, x0, v0), y_star.shape[0])
        x1, lam_hat = y[:n], y[n:]
        if W is not None:  # multipliers of all rows (minimum norm)
            lam_hat = W @ lam_hat
        q1 = form._unflat(x1, nb)
        v1 = (2.0 / h) * (x1 - x0).reshape(nb, 12) - v0
        a1 = (v1 - v0) / h
        lam = lam_hat * (2.0 / h**2)
        status = first_failure(state.status, info.status, inner, finite_status(q1, v1, lam))
        info = NewtonInfo(info.iterations, status, info.residual_norm, info.step_norm)
        result = StepResult(q1, v1, a1, lam, info, condition)
        return EMState(q1, v1, lam_hat, newton_state, status), result


@jit
def step_matrices(form, model, q0, v0, q1, h, k, *, dof=None, parametrisation="pairs"):
    """(constrained, reduced) iteration matrices of one converged step q0 -> q1 (for
    condition numbers, Tables II-V; ``simulate(..., record_condition=True)`` records the
    running scheme's per step): the unscaled (n+m) matrix of eq. (10) and the d x d Jacobian
    dR/dmu of the null-space scheme at its root (``parametrisation`` "numerical" or
    "pairs"). With redundant rows (``dof`` given, closed loops) both use the rows of
    :func:`row_selection`."""
    nb = model.nb
    x0, x1 = form._flat(q0), form._flat(q1)
    dof = 6 * nb - model.nc if dof is None else dof
    structure = pairs.pair_structure(model)
    W = None if dof == 6 * nb - model.nc else row_selection(form, model, structure, x0, k * h, dof)
    lam, _ = multipliers(form, model, x0, v0, x1, h, k, W)
    Kc = constrained_matrix(form, model, x0, v0, x1, lam, h, k, W)
    if parametrisation == "pairs":
        closure = closure_data(form, model, structure, q0, k * h, dof)
        mu = pairs.predictor(model, structure, q0, v0, h)

        def F(m):
            return form._flat(pairs.reparametrise(model, structure, q0, m))

        def R(m):
            return pairs_residual(form, model, structure, closure, q0, v0, m, h, k)
    else:
        basis = twist_basis(form, model, q0, k * h, dof)
        mu = basis.N.T @ twist_predictor(form, q0, v0, h).reshape(-1)

        def F(m):
            return form._flat(reparametrise(form, model, q0, basis, m, k * h, tol=1e-14)[0])

        def R(m):
            return reduced_residual(form, model, q0, v0, basis, m, h, k, tol=1e-14, W=W)

    # mu of q1: solve F(mu) = q1 in the least-squares sense by a few Newton steps
    for _ in range(6):  # unrolled Gauss-Newton (converges quadratically from the predictor)
        mu = mu - jnp.linalg.lstsq(jax.jacfwd(F)(mu), F(mu) - x1)[0]
    return Kc, jax.jacfwd(R)(mu)
