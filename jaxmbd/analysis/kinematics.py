"""Kinematic analysis of 0-DOF mechanisms (paper 1 section 2).

At each t_k = k h: position analysis by Newton (predictor eq. 11, corrections eq. 12/14d,
stop when ||delta|| < tol), then the velocity (eq. 15b) and acceleration (eq. 16) solves,
and the multipliers of inverse dynamics, G_rA^T lam = Q - M a, that the prescribed motion
needs. The whole loop is one ``lax.scan`` under ``jit``; positions carry implicit-function
gradients (docs/design.md, principle 5).

In joint coordinates (``formulation="joint"``) the unknowns are the kinematic tree's qpos
(:mod:`jaxmbd.joint_space`) and the equations the rows the tree does not carry (the joints
that close loops, drivers): the same Newton, velocity and acceleration solves with their
Jacobian G (nv x nv for a 0-DOF mechanism), the corrections applied on the joints'
manifolds; the bodies' states follow by forward kinematics and the multipliers are rA's
(G_rA^T lam = Q - M a on the bodies' states).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._checks import finish, is_traced, resolve_throw, solution_from_outputs
from .._parameter_checks import checked_parameters
from .._results import (
    CHART_SINGULARITY,
    ILL_CONDITIONED,
    MAX_ITERATIONS,
    NONFINITE,
    SUCCESS,
)
from ..compiled.host_arrays import device_array
from ..compiled.jit import RUN_ONCE, jit
from ..constraints.equations import rA_terms
from ..constraints.redundancy import rows_for_run, with_full_multipliers
from ..errors import ModelError
from ..forces import BodyState, added_mass, added_mass_forces, adds_mass
from ..forces._rigid_body import newton_euler_forces
from ..formulations import FORMULATIONS, AbstractFormulation, get_formulation
from ..integrators.base import choose_structured, own_linear_solve
from ..joint_space.constraint_rows import constraint_jacobian, constraint_terms
from ..joint_space.dynamics import body_accelerations
from ..joint_space.run import JOINT_LINEAR_SOLVER, model_tree, planned_rows
from ..linear.square import factor_square, layout_for_formulation
from ..model import Model
from ..newton import (
    RCOND_MIN,
    ROUNDOFF,
    Scale,
    chart_solve,
    checked_solver,
    implicit_root,
    lu_solver,
    newton_iterate,
)
from ..solution import Solution
from ..tree import body_velocities, integrate_positions, poses
from ._stepping import (
    SUMMARIES,
    check_euler_angle_start,
    check_save_every,
    num_steps,
    run_in_chunks,
    strided_scan,
)


def position_scale(model: Model, form: AbstractFormulation):
    """Magnitudes of a position correction (tangent layout) for the relative Newton tests:
    translations at the mechanism's size L = max |r| (the current or the initial centres of
    mass; 1 m if all are at the origin), orientation coordinates (radians, Euler parameters)
    at 1; resolution ROUNDOFF eps times that."""
    ts = form.tangent_size
    eps = ROUNDOFF * float(jnp.finfo(jnp.float64).eps)
    size0 = jnp.max(jnp.abs(model.r0)) if model.nb else 1.0

    def scale(q):
        size = jnp.maximum(jnp.max(jnp.abs(q[0])), size0)
        size = jnp.where(size > 0, size, 1.0)
        row = jnp.concatenate([jnp.full(3, size), jnp.ones(ts - 3)])
        w = jnp.tile(row, model.nb)
        return Scale(w, eps * w)

    return scale


def _position_linear_solve(model: Model, form: AbstractFormulation, q_guess, structured: bool):
    """The Newton solve of the position analysis: the equilibrated LU with its condition
    status, or, in a chart with singularities (re), :func:`chart_solve`, which may take the
    least-squares solution only where the predicted configuration is at the singularity.
    ``structured``: block elimination of G's saddle-point embedding
    (:mod:`jaxmbd.linear.square`; no chart step-over, re runs strict there)."""
    if structured:
        layout = layout_for_formulation(model, form)
        return lambda G, rhs: factor_square(layout, G)[0](rhs)
    near = form.near_chart_singularity(q_guess)
    if near is None:
        return own_linear_solve(form)
    return functools.partial(chart_solve, least_squares=jax.lax.stop_gradient(near))


def solve_positions(
    model: Model, form: AbstractFormulation, q_guess, t, *, tol, max_iter, structured=False
):
    """Newton position analysis Phi(q, t) = 0 with implicit gradients w.r.t. the model.
    ``tol`` is relative (:func:`position_scale`); ``structured``: the corrections by block
    elimination (:mod:`jaxmbd.linear.square`; the implicit gradient's solve stays dense)."""
    frozen = jax.lax.stop_gradient(model)
    q_star, info = newton_iterate(
        lambda q: form.position_terms(frozen, q, t),
        form.retract,
        jax.lax.stop_gradient(q_guess),
        tol=tol,
        max_iter=max_iter,
        residual=lambda q: form.residual(frozen, q, t),
        linear_solve=_position_linear_solve(frozen, form, q_guess, structured),
        scale=position_scale(frozen, form),
    )
    n_tangent = model.nb * form.tangent_size
    q = implicit_root(
        lambda q_, m: form.residual(m, q_, t),
        form.retract,
        q_star,
        model,
        n_tangent,
        jacobian=lambda q_: form.position_terms(frozen, q_, t)[1],
    )
    return q, info


def inverse_dynamics_multipliers(
    model: Model, r, A, rdot, omega, rddot, omegadot, t, solve_transposed=None
):
    """lam with M a + G_rA^T lam = Q (eq. 31a), for a square (0-DOF) constraint Jacobian.

    ``solve_transposed(rhs)`` may supply a factorised G_rA^T solve (rA reuses its own LU).
    """
    if solve_transposed is None:
        _, G, _, _ = rA_terms(model, r, A, rdot, omega, t)
        solve_transposed = lu_solver(G.T)
    return solve_transposed(_inverse_dynamics_rhs(model, r, A, rdot, omega, rddot, omegadot, t))


def _inverse_dynamics_rhs(model, r, A, rdot, omega, rddot, omegadot, t):
    state = BodyState(r, A, rdot, omega)
    f, torque = newton_euler_forces(model, t, state)
    if adds_mass(model.forces):  # joint armature's -a (g . V_dot) g (forces.AddedMass)
        df, dn = added_mass_forces(added_mass(model.forces, t, state), rddot, omegadot)
        f, torque = f + df, torque + dn
    rhs_r = f - model.mass[:, None] * rddot
    rhs_w = torque - jnp.einsum("bij,bj->bi", model.inertia, omegadot)
    return jnp.concatenate([rhs_r, rhs_w], axis=1).reshape(-1)


#: Relative residual a stepped-over chart singularity must meet in G v = nu and G a = gamma
#: (the least-squares solve of a consistent system meets it to round-off).
CHART_VERIFY_TOL = 1e-8


def _satisfies(G, x, rhs):
    """Norm-wise backward error ||G x - rhs|| <= CHART_VERIFY_TOL (||G|| ||x|| + ||rhs||)
    (infinity norms), and everything finite."""
    residual = jnp.max(jnp.abs(G @ x - rhs))
    norm_G = jnp.max(jnp.sum(jnp.abs(G), axis=1))
    allowed = CHART_VERIFY_TOL * (norm_G * jnp.max(jnp.abs(x)) + jnp.max(jnp.abs(rhs)))
    return residual <= allowed


def _square_solver(model, form, G, structured: bool, least_squares=False):
    """(solve, rcond) of a square G: the dense equilibrated LU, or block elimination."""
    if structured:
        return factor_square(layout_for_formulation(model, form), G)
    return checked_solver(G, least_squares=least_squares)


def _kinematic_state(model, form, q, t, structured: bool = False):
    """Velocities (eq. 15b), accelerations (eq. 16) and inverse-dynamics multipliers at the
    solved positions q, and a status for these solves: NONFINITE for non-finite results,
    ILL_CONDITIONED for a near-singular G (or G_rA for the multipliers), CHART_SINGULARITY
    for a stepped-over chart singularity that fails its verification. Returns (v, outputs,
    status, near) with ``near`` whether the chart step-over was allowed (None without a
    chart singularity)."""
    near = None if structured else form.near_chart_singularity(q)
    near = None if near is None else jax.lax.stop_gradient(near)
    G, nu = form.velocity_terms(model, q, t)
    # one factorisation for nu, gamma (and lam in rA)
    solve, rcond = _square_solver(
        model, form, G, structured, least_squares=False if near is None else near
    )
    v = solve(nu).reshape(model.nb, form.tangent_size)
    gamma = form.acceleration_rhs(model, q, v, t)
    a = solve(gamma).reshape(model.nb, form.tangent_size)
    # the body state from the formulation's own velocity rows (se3's are the body twist,
    # its angular part first)
    body = form.to_body_state(q, v, a)
    r, A, rdot, omega, rddot, omegadot = body
    rhs = _inverse_dynamics_rhs(model, *body, t)
    if form.body_state_coordinates:  # G is G_rA: reuse its factorisation for lam
        lam, rcond_rA = solve(rhs, transpose=True), rcond
    else:
        _, G_rA, nu_rA, gamma_rA = rA_terms(model, r, A, rdot, omega, t)
        if structured:
            solve_rA, rcond_rA = _square_solver(model, get_formulation("rA"), G_rA, True)
            lam = solve_rA(rhs, transpose=True)
        else:
            solve_rA, rcond_rA = checked_solver(G_rA.T)
            lam = solve_rA(rhs)
    out = body + (lam,)
    finite = jnp.all(jnp.isfinite(v)) & jnp.all(jnp.isfinite(a)) & jnp.all(jnp.isfinite(lam))
    chart_ok = jnp.asarray(True)
    if near is None:
        singular_G = rcond < RCOND_MIN
    else:
        singular_G = (rcond < RCOND_MIN) & ~near
        # the stepped-over step must satisfy the chart-free velocity and acceleration
        # constraints (eqs. 15b, 16 in rA), with finite multipliers
        v_rA = jnp.concatenate([rdot, omega], 1).reshape(-1)
        a_rA = jnp.concatenate([rddot, omegadot], 1).reshape(-1)
        verified = _satisfies(G_rA, v_rA, nu_rA) & _satisfies(G_rA, a_rA, gamma_rA)
        chart_ok = ~near | verified
    status = jnp.where(
        ~finite,
        NONFINITE,
        jnp.where(
            singular_G | (rcond_rA < RCOND_MIN),
            ILL_CONDITIONED,
            jnp.where(chart_ok, SUCCESS, CHART_SINGULARITY),
        ),
    )
    return v, out, status, near


def _analyse(model, form, q_guess, t, tol, max_iter, structured=False):
    q, info = solve_positions(
        model, form, q_guess, t, tol=tol, max_iter=max_iter, structured=structured
    )
    v, out, status, near = _kinematic_state(model, form, q, t, structured)
    status = jnp.where(info.status != SUCCESS, info.status, status)
    flag = () if near is None else (near,)
    return q, v, out + (info.iterations, status, info.residual_norm) + flag


def _initial_state(model, form, tol, max_iter, structured=False):
    q0 = (model.r0, form.coordinates(model.A0))
    q, v, out = _analyse(model, form, q0, jnp.asarray(0.0), tol, max_iter, structured)
    return (q, v), out


_initial = jit(_initial_state)


def _scan(model, form, carry, k0, n: int, h, tol, max_iter, save_every: int = 1, structured=False):
    """The steps k0 + 1, ..., k0 + n from ``carry`` (the previous step's q and v). Step 0
    is the assembly at t = 0 (its guess the model's pose, :func:`_start_carry`), each
    later one starts from the prediction of the step before: from k0 = -1 one loop holds
    the analysis once, where an assembly of its own and a loop of the steps hold it twice
    (the slider crank's compile: 5.1 -> 2.6 s)."""
    q0 = _start_carry(model, form)[0]

    def step(carry, k):
        q_prev, v_prev = carry
        predicted = form.predict(q_prev, v_prev, h)
        q_guess = jax.tree_util.tree_map(lambda a, b: jnp.where(k == 0, a, b), q0, predicted)
        q, v, out = _analyse(model, form, q_guess, k * h, tol, max_iter, structured)
        return (q, v), out

    # saved rows summarise the steps since the previous one; the chart flag: any of them
    summaries = {**SUMMARIES, 10: lambda x: jnp.any(x, 0)}
    return strided_scan(step, carry, k0 + jnp.arange(1, n + 1), save_every, summaries)


_chunk = jit(_scan)


def _start_carry(model, form):
    """The carry before step 0 (:func:`_scan` from k0 = -1): the model's pose, no motion."""
    v0 = jnp.zeros((model.nb, form.tangent_size), model.r0.dtype)
    return (model.r0, form.coordinates(model.A0)), v0


_start = jit(_start_carry, xla_options=RUN_ONCE)


@jit
def _run(model, form, n: int, h, tol, max_iter, save_every: int = 1, structured=False):
    """Initial assembly and all steps in one compiled function (saving every step, as the
    steps 0 to n of one loop: :func:`_scan`)."""
    if save_every == 1:
        carry = _start_carry(model, form)
        return _scan(model, form, carry, -1, n + 1, h, tol, max_iter, 1, structured)[1]
    carry, first = _initial_state(model, form, tol, max_iter, structured)
    _, rest = _scan(model, form, carry, 0, n, h, tol, max_iter, save_every, structured)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _check_kinematic_model(model: Model, form: AbstractFormulation, full_model=None):
    n_eq, n_q = model.nc, 6 * model.nb
    dropped = () if full_model is None else full_model.redundancy.dropped
    if n_eq != n_q:
        dof = n_q - n_eq
        kind = "under-constrained" if dof > 0 else "over-constrained"
        hint = (
            "add drivers, or use jaxmbd.simulate for a mechanism with degrees of freedom"
            if dof > 0
            else "remove redundant constraints"
        )
        raise ModelError(
            f"model '{model.name}': kinematic analysis needs 0 degrees of freedom, but it has "
            f"{n_eq} constraint equations for {n_q} coordinates ({model.nb} bodies): "
            f"{kind} by {abs(dof)}; {hint}"
            + (
                f" (after dropping {len(dropped)} redundant row(s): "
                + ", ".join(f"'{full_model.constraint_names[r]}'" for r in dropped)
                + ")"
                if dropped
                else ""
            )
        )


# ----------------------------------------------------------------------------- joint space


def _rows_solver(G):
    """(solve, rcond) of G x = rhs for the tree's rows: the equilibrated LU of a square G
    (the independent rows, :func:`_joint_rows`); where the model's values are traced every
    row is kept (dependent ones too, consistent), and the least-squares solution through
    G's SVD is exact, rcond the ratio of its nv-th to its largest singular value."""
    if G.shape[0] == G.shape[1]:
        return checked_solver(G)
    u, s, vt = jnp.linalg.svd(G, full_matrices=False)
    rcond = jnp.where(s[0] > 0, s[-1] / s[0], 0.0)

    def solve(rhs):
        return vt.T @ ((u.T @ rhs) / s)

    return solve, rcond


def _joint_newton(model: Model, rows, q_guess, t, tol, max_iter):
    """Newton on the tree's constraint rows Phi(qpos, t) = 0, corrections G delta = -Phi
    applied on the joints' manifolds (:func:`~jaxmbd.tree.integrate_positions`), until
    max |delta| <= tol times the mechanism's size (at least 1: hinge corrections are
    radians) or ``max_iter`` corrections. Returns (qpos, iterations, converged); not
    differentiated (:func:`_joint_positions` adds the implicit derivative)."""
    tree, cons = model_tree(jax.lax.stop_gradient(model), rows)
    size = jnp.maximum(jnp.max(jnp.abs(model.r0)), 1.0) if model.nb else 1.0
    bound = jax.lax.stop_gradient(tol * size)

    def cond(state):
        _, k, step = state
        return (k < max_iter) & ~(step <= bound)

    def body(state):
        q, k, _ = state
        phi, G = constraint_jacobian(cons, tree, q, t)
        delta = _rows_solver(G)[0](-phi)
        step = jnp.max(jnp.abs(delta))
        return integrate_positions(tree, q, delta, 1.0), k + 1, step

    start = (jax.lax.stop_gradient(q_guess), jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf))
    q, k, step = jax.lax.while_loop(cond, body, start)
    return q, k, step <= bound


def _joint_positions(model: Model, rows, q_guess, t, tol, max_iter):
    """The solved qpos with implicit-function derivatives w.r.t. the model: one more Newton
    correction from the converged (undifferentiated) root, whose derivative there is
    -G^-1 dPhi/dmodel (Phi = 0 at the root), the implicit function theorem's."""
    q_star, iterations, converged = _joint_newton(model, rows, q_guess, t, tol, max_iter)
    tree, cons = model_tree(model, rows)
    phi, G = constraint_jacobian(cons, tree, q_star, t)
    q = integrate_positions(tree, q_star, -_rows_solver(jax.lax.stop_gradient(G))[0](phi), 1.0)
    return q, iterations, converged


def _joint_analyse(full_model: Model, model: Model, rows, q_guess, t, tol, max_iter):
    """Positions, velocities (G qvel = nu), accelerations (G qacc = gamma) in joint
    coordinates at t, the bodies' states from them and rA's inverse-dynamics multipliers
    of ``model`` (``full_model`` without its redundant rows: G_rA square); the tree and its
    ``rows`` are ``full_model``'s. Returns (qpos, qvel, qacc, outputs) with the outputs of
    :func:`_analyse` plus qpos and qvel."""
    q, iterations, converged = _joint_positions(full_model, rows, q_guess, t, tol, max_iter)
    tree, cons = model_tree(full_model, rows)
    phi, G, nu, _ = constraint_terms(cons, tree, q, jnp.zeros(tree.nv, q.dtype), t)
    solve, rcond = _rows_solver(G)
    qvel = solve(nu)
    gamma = constraint_terms(cons, tree, q, qvel, t)[3]
    qacc = solve(gamma)
    p = poses(tree, q)
    rdot, omega = body_velocities(tree, p, qvel)
    rddot, omegadot = body_accelerations(tree, p, qvel, qacc)
    r, A = p.c, p.R
    _, G_rA, _, _ = rA_terms(model, r, A, rdot, omega, t)
    solve_rA, rcond_rA = checked_solver(G_rA.T)
    lam = solve_rA(_inverse_dynamics_rhs(model, r, A, rdot, omega, rddot, omegadot, t))
    residual = jnp.max(jnp.abs(phi)) if phi.size else jnp.zeros((), q.dtype)
    finite = jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qvel)) & jnp.all(jnp.isfinite(qacc))
    finite = finite & jnp.all(jnp.isfinite(lam))
    status = jnp.where(
        ~finite,
        NONFINITE,
        jnp.where(
            ~converged,
            MAX_ITERATIONS,
            jnp.where((rcond < RCOND_MIN) | (rcond_rA < RCOND_MIN), ILL_CONDITIONED, SUCCESS),
        ),
    ).astype(jnp.int32)
    outs = (r, A, rdot, omega, rddot, omegadot, lam, iterations, status, residual, q, qvel)
    return q, qvel, qacc, outs


def _joint_initial_state(full_model: Model, model: Model, rows, tol, max_iter):
    tree, _ = model_tree(full_model, rows)
    t0 = jnp.asarray(0.0)
    q, v, a, out = _joint_analyse(full_model, model, rows, tree.qpos_init, t0, tol, max_iter)
    return (q, v, a), out


_joint_initial = jit(_joint_initial_state)


def _joint_scan(full_model: Model, model: Model, rows, carry, k0, n: int, h, tol, max_iter,
                save_every: int = 1):  # fmt: skip
    """The steps k0 + 1, ..., k0 + n from ``carry`` (q, v, a); step 0 is the assembly
    from the tree's initial pose (as :func:`_scan`'s)."""
    tree, _ = model_tree(full_model, rows)

    def step(carry, k):
        q_prev, v_prev, a_prev = carry
        # the predictor of eq. 11 on the joints' manifolds: q (+) (h v + h^2 / 2 a)
        predicted = integrate_positions(tree, q_prev, h * v_prev + 0.5 * h * h * a_prev, 1.0)
        q_guess = jnp.where(k == 0, tree.qpos_init, predicted)
        q, v, a, out = _joint_analyse(full_model, model, rows, q_guess, k * h, tol, max_iter)
        return (q, v, a), out

    return strided_scan(step, carry, k0 + jnp.arange(1, n + 1), save_every)


_joint_chunk = jit(_joint_scan)


@jit
def _joint_run(full_model: Model, model: Model, rows, n: int, h, tol, max_iter,
               save_every: int = 1):  # fmt: skip
    """Initial assembly and all steps in joint coordinates in one compiled function (as
    :func:`_run`'s: saving every step, the steps 0 to n of one loop)."""
    if save_every == 1:
        tree, _ = model_tree(full_model, rows)
        zeros = jnp.zeros(tree.nv, tree.qpos_init.dtype)
        carry = (tree.qpos_init, zeros, zeros)
        return _joint_scan(full_model, model, rows, carry, -1, n + 1, h, tol, max_iter)[1]
    carry, first = _joint_initial_state(full_model, model, rows, tol, max_iter)
    _, rest = _joint_scan(full_model, model, rows, carry, 0, n, h, tol, max_iter, save_every)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _joint_rows(full_model: Model, model: Model):
    """(tree, rows) of a kinematic analysis in joint coordinates: the constraint rows the
    run keeps (:func:`~jaxmbd.joint_space.run.planned_rows`: those independent at the
    start; a dependent driver is refused), checked to be as many as the tree's joint
    velocities (0 degrees of freedom); rows None where the model's values are traced."""
    tree, rows, _ = planned_rows(full_model)
    if rows is not None and len(rows) != tree.nv:
        dof = tree.nv - len(rows)
        kind = "under-constrained" if dof > 0 else "over-constrained"
        raise ModelError(
            f"model '{model.name}': kinematic analysis needs 0 degrees of freedom, but in joint "
            f"coordinates it has {len(rows)} independent constraint rows for {tree.nv} joint "
            f"velocities: {kind} by {abs(dof)}; add drivers, or use jaxmbd.simulate"
        )
    return tree, rows


def _joint_kinematics(model, full_model, form, n, h_arr, tol_arr, max_iter, save_every,
                      linear_solver, progress, chunk_size, traced):  # fmt: skip
    """The per-step outputs and the tree of :func:`kinematics` in joint coordinates."""
    if linear_solver not in ("auto", "dense"):
        raise ValueError(
            f"kinematics: formulation 'joint' solves its nv x nv rows densely; linear_solver "
            f"must be 'auto' or 'dense', got {linear_solver!r}"
        )
    tree, rows = _joint_rows(full_model, model)
    if progress is None or traced:
        outs = _joint_run(full_model, model, rows, n, h_arr, tol_arr, max_iter, save_every)
    else:
        outs = run_in_chunks(
            lambda: _joint_initial(full_model, model, rows, tol_arr, max_iter),
            lambda carry, k0, size: _joint_chunk(
                full_model, model, rows, carry, k0, size, h_arr, tol_arr, max_iter, save_every
            ),
            n,
            500 if chunk_size is None else chunk_size,
            progress,
            save_every=save_every,
        )
    return outs, tree


def kinematics(
    model: Model,
    *,
    formulation="rA",
    t_end: float,
    h: float,
    tol: float = 1e-10,
    max_iter: int = 25,
    progress: Callable[[int, int], None] | None = None,
    chunk_size: int | None = None,
    save_every: int = 1,
    linear_solver: str = "auto",
    throw: bool = True,
    check: bool | None = None,
    redundant: str = "drop",
) -> Solution:
    """Kinematic analysis of a 0-DOF model on t = k h, k = 0..round(t_end / h).

    ``formulation``: a name or object of a formulation with absolute poses (``has_pose``:
    "rA", "rp", "re", "se3", "director"), or "joint": the kinematic tree's joint
    coordinates (qpos, ``sol.qpos``), its loop-closing rows and drivers solved on the
    joints' manifolds (module docstring); the same bodies' states and multipliers as rA's.
    ``tol``: relative Newton tolerance: a position is
    accepted when the correction (paper 1 section 4.3) and the constraint residual both pass
    in norms scaled by the mechanism's size (:func:`position_scale`), default 1e-10.
    ``progress(done, total)`` is called between chunks of ``chunk_size`` steps (default 500;
    only with ``progress``). A failed
    step raises :class:`~jaxmbd.SolverError` naming the time, residual and constraints at
    fault (``throw=False`` returns the outcome instead: ``sol.status`` per step and
    ``sol.result``, a :class:`~jaxmbd.RESULTS` item); inside ``jit``/``grad``/``vmap``
    ``throw=True`` becomes an equinox runtime error. ``check`` is the deprecated name of
    ``throw``. ``save_every=k`` keeps every k-th step (see :func:`~jaxmbd.simulate`).

    ``linear_solver``: "dense" (LU of G), "structured" (block elimination of G's
    saddle-point embedding on the body-joint graph, O(N) per solve on a tree:
    :mod:`jaxmbd.linear.square`; re then has no chart step-over) or "auto" (structured from
    300 unknowns of the embedding on, as the implicit integrators).

    ``redundant``: "drop" (default) or "error", as in :func:`~jaxmbd.simulate`: the
    degrees of freedom are counted after the redundant rows are dropped.
    """
    throw = resolve_throw(throw, check, "kinematics")
    if chunk_size is not None and progress is None:
        raise ValueError("kinematics: chunk_size (steps between progress calls) needs progress=")
    model = checked_parameters(model, where="kinematics")
    full_model = model
    model, kept = rows_for_run(model, redundant, where="kinematics")
    form = get_formulation(formulation)
    joint = getattr(form, "runs_in_joint_space", False)
    if not joint and not form.has_pose:
        raise ValueError(
            f"kinematics: formulation {form.name!r} has no absolute pose coordinates "
            "(capability 'has_pose'; e.g. rotmat's are relative to the configuration at "
            f"t = 0); use one of {sorted(n for n, c in FORMULATIONS.items() if c.has_pose)} "
            "or 'joint'"
        )
    _check_kinematic_model(model, form, full_model if kept is not None else None)
    check_euler_angle_start(model, form)
    n = num_steps(t_end, h)
    save_every = check_save_every(save_every, n)
    traced = is_traced(model)
    h_arr = device_array(h, jnp.float64)
    tol_arr = device_array(tol, jnp.float64)
    if joint:
        outs, tree = _joint_kinematics(model, full_model, form, n, h_arr, tol_arr, max_iter,
                                       save_every, linear_solver, progress, chunk_size,
                                       traced)  # fmt: skip
        sol = solution_from_outputs(
            full_model,
            form,
            h_arr,
            with_full_multipliers(outs, kept, full_model, h_arr, save_every),
            save_every=save_every,
            linear_solver=JOINT_LINEAR_SOLVER,
            tree=tree,
        )
        return finish(model, sol, what="kinematic analysis", throw=throw, traced=traced)
    n_g = form.num_multipliers(model)
    structured = choose_structured(linear_solver, model.nb * form.tangent_size + n_g, model.nc)
    if progress is None or traced:
        outs = _run(model, form, n, h_arr, tol_arr, max_iter, save_every, structured)
    elif save_every == 1:  # the n + 1 steps of one loop from the assembly (step 0)
        outs = run_in_chunks(
            lambda: (_start(model, form), None),
            lambda carry, k0, size: _chunk(
                model, form, carry, k0 - 1, size, h_arr, tol_arr, max_iter, 1, structured
            ),
            n + 1,
            500 if chunk_size is None else chunk_size,
            lambda done, total: progress(max(done - 1, 0), total - 1),
        )
    else:
        outs = run_in_chunks(
            lambda: _initial(model, form, tol_arr, max_iter, structured),
            lambda carry, k0, size: _chunk(
                model, form, carry, k0, size, h_arr, tol_arr, max_iter, save_every, structured
            ),
            n,
            500 if chunk_size is None else chunk_size,
            progress,
            save_every=save_every,
        )
    chart_singular = outs[10] if len(outs) == 11 else None
    sol = solution_from_outputs(
        full_model,
        form,
        h_arr,
        with_full_multipliers(outs[:10], kept, full_model, h_arr, save_every),
        chart_singular=chart_singular,
        save_every=save_every,
    )
    return finish(model, sol, what="kinematic analysis", throw=throw, traced=traced)
