"""Index-3 dynamics with backward Euler (paper 1 section 3): ``simulate``.

Each step solves g(x) = 0 for x = (accelerations, multipliers) by Newton (eq. 38d), with the
1/h^2 constraint scaling (eq. 33a) and the stopping rule ||delta||_2 < Theta (eq. 46), Theta
defaulting to the rule Theta h^2 = 1e-11. The step's root carries implicit-function gradients
with respect to the model and the previous state, so ``jax.grad`` of a trajectory loss never
differentiates through Newton iterations. The whole loop is one ``lax.scan`` under ``jit``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from ._checks import finish, is_traced, solution_from_outputs
from .equations import constraint_values, rA_terms
from .forces import BodyState, applied_forces
from .formulations import AbstractFormulation, get_formulation
from .kinematics import check_euler_angle_start, num_steps, run_in_chunks
from .lie import hat, so3_exp, vee
from .model import Model
from .newton import (
    MAX_ITERATIONS,
    NONFINITE,
    SUCCESS,
    NewtonInfo,
    empty_lu_factors,
    implicit_root,
    lu_solver,
    newton_iterate,
    newton_iterate_reusing,
)
from .solution import Solution

logger = logging.getLogger("jaxmbd")

#: Newton variants of :func:`simulate`.
NEWTON_METHODS = ("full", "modified", "reuse")

#: Default tolerance rule of paper 1 section 4.4: Theta h^2 = 1e-11.
THETA_H2 = 1e-11


class InitialCorrection(NamedTuple):
    """How far the consistent start moved the model's initial state."""

    position: jax.Array  # max |delta r| over bodies
    rotation: jax.Array  # max rotation angle of the orientation correction [rad]
    velocity: jax.Array  # max |delta (r_dot, omega_bar)|


def consistent_initial_state(model: Model, *, t=0.0, tol=1e-13, max_iter=30):
    """Project the initial state onto the constraints and solve for accelerations.

    Positions: Gauss-Newton with minimum-norm corrections on Phi(q, t) = 0; velocities:
    minimum-norm projection onto G v = nu; accelerations and multipliers: the index-1 system
    [M G^T; G 0][a; lam] = [Q; gamma]. All in rA quantities (formulation independent).
    Returns ((r, A, rdot, omega, rddot, omegadot, lam), InitialCorrection, NewtonInfo).
    """
    t = jnp.asarray(t, dtype=jnp.float64)
    nb = model.nb
    zero = jnp.zeros((nb, 3))

    def min_norm_solve(G, rhs):
        return G.T @ jnp.linalg.solve(G @ G.T, rhs)

    if model.nc:
        q, info = _project_positions(model, t, tol, max_iter)
    else:
        q, info = (
            (model.r0, model.A0),
            NewtonInfo(jnp.asarray(0), jnp.asarray(SUCCESS), jnp.asarray(0.0), jnp.asarray(0.0)),
        )
    r, A = q
    _, G, nu, _ = rA_terms(model, r, A, zero, zero, t)
    v0 = jnp.concatenate([model.rdot0, model.omega0], 1).reshape(-1)
    v = v0 + (min_norm_solve(G, nu - G @ v0) if model.nc else 0.0)
    v = v.reshape(nb, 6)
    rdot, omega = v[:, :3], v[:, 3:]
    _, _, _, gamma = rA_terms(model, r, A, rdot, omega, t)
    f, n = applied_forces(model.forces, t, BodyState(r, A, rdot, omega), model.mass, model.gravity)
    J = model.inertia
    Q = jnp.concatenate([f, n - jnp.cross(omega, jnp.einsum("bij,bj->bi", J, omega))], 1)
    eye = jnp.broadcast_to(jnp.eye(3), (nb, 3, 3))
    zeros = jnp.zeros((nb, 3, 3))
    M = jnp.concatenate(
        [
            jnp.concatenate([model.mass[:, None, None] * eye, zeros], 2),
            jnp.concatenate([zeros, J], 2),
        ],
        1,
    )
    M = jnp.einsum("ab,aij->aibj", jnp.eye(nb), M).reshape(6 * nb, 6 * nb)
    nc = model.nc
    kkt = jnp.block([[M, G.T], [G, jnp.zeros((nc, nc))]])
    sol = jnp.linalg.solve(kkt, jnp.concatenate([Q.reshape(-1), gamma]))
    acc, lam = sol[: 6 * nb].reshape(nb, 6), sol[6 * nb :]
    # a report, not a differentiable output (arccos and norms are not smooth at 0)
    dA = jnp.einsum("bji,bjk->bik", model.A0, A)
    angle = jnp.arccos(jnp.clip(0.5 * (jnp.trace(dA, axis1=1, axis2=2) - 1.0), -1.0, 1.0))
    correction = jax.lax.stop_gradient(
        InitialCorrection(
            position=jnp.max(jnp.linalg.norm(r - model.r0, axis=1)),
            rotation=jnp.max(angle),
            velocity=jnp.max(jnp.abs(v.reshape(-1) - v0)),
        )
    )
    status = jnp.where(jnp.all(jnp.isfinite(sol)), info.status, NONFINITE)
    info = info._replace(status=status)
    return (r, A, rdot, omega, acc[:, :3], acc[:, 3:], lam), correction, info


def _min_norm_newton(model, t, tol, max_iter):
    nb = model.nb
    zero = jnp.zeros((nb, 3))

    def residual_and_jacobian(q):
        phi, G, _, _ = rA_terms(model, q[0], q[1], zero, zero, t)
        return phi, G

    def retract(q, delta):
        d = delta.reshape(nb, 6)
        return q[0] + d[:, :3], q[1] @ so3_exp(d[:, 3:])

    return newton_iterate(
        residual_and_jacobian,
        retract,
        (model.r0, model.A0),
        tol=tol,
        max_iter=max_iter,
        linear_solve=lambda G, rhs: G.T @ jnp.linalg.solve(G @ G.T, rhs),
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _project_positions(model, t, tol, max_iter):
    """Minimum-norm Gauss-Newton projection of (r0, A0) onto Phi(q, t) = 0.

    Its derivative is that of the nearest-point map at a point on the constraint manifold:
    d q = (I - G^+ G) d q0 - G^+ Phi_p dp with G^+ = G^T (G G^T)^{-1} (exact when the
    model's initial state is already consistent, first order in the distance otherwise),
    so gradients never pass through the iteration.
    """
    return _min_norm_newton(model, t, tol, max_iter)


@_project_positions.defjvp
def _project_positions_jvp(tol, max_iter, primals, tangents):
    model, t = primals
    model_dot, _ = tangents
    (r, A), info = _min_norm_newton(jax.lax.stop_gradient(model), t, tol, max_iter)
    nb = model.nb
    zero = jnp.zeros((nb, 3))
    _, G, _, _ = rA_terms(model, r, A, zero, zero, t)
    G = jax.lax.stop_gradient(G)
    theta0_dot = vee(jnp.einsum("bji,bjk->bik", model.A0, model_dot.A0))
    q0_dot = jnp.concatenate([model_dot.r0, theta0_dot], 1).reshape(-1)
    # Phi_p p_dot at the projected configuration (r0, A0 do not enter Phi)
    _, phi_p = jax.jvp(lambda m: constraint_values(m, r, A, t), (model,), (model_dot,))
    rhs = G @ q0_dot + phi_p
    delta = q0_dot - G.T @ jnp.linalg.solve(G @ G.T, rhs)
    d = delta.reshape(nb, 6)
    A_dot = jnp.einsum("bij,bjk->bik", A, hat(d[:, 3:]))
    zeros_info = jax.tree_util.tree_map(
        lambda x: (
            jnp.zeros(x.shape, jax.dtypes.float0)
            if not jnp.issubdtype(x.dtype, jnp.floating)
            else jnp.zeros_like(x)
        ),
        info,
    )
    return ((r, A), info), ((d[:, :3], A_dot), zeros_info)


def _to_formulation(form: AbstractFormulation, r, A, rdot, omega, rddot, omegadot):
    """Formulation state (q, v) and accelerations from rA quantities."""
    ori = form.coordinates(A)
    if form.name == "rA":
        rate, rate_dot = omega, omegadot
    else:
        rate = form.rate_from_omega(ori, omega)
        # d/dt rate_from_omega(ori(t), omega(t)) with ori_dot = rate
        rate_dot = jax.jvp(form.rate_from_omega, (ori, omega), (rate, omegadot))[1]
    v = jnp.concatenate([rdot, rate], 1)
    a = jnp.concatenate([rddot, rate_dot], 1)
    return (r, ori), v, a


def _outputs(form, q, v, a, lam_all, nc):
    r, ori = q
    omega, omegadot = form.omega_from_rate(ori, v[:, 3:], a[:, 3:])
    return (r, form.rotation(ori), v[:, :3], omega, a[:, :3], omegadot, lam_all[:nc])


def _newton_step(model, form, q, v, x0, factors, t, h, tol, max_iter, newton: str):
    frozen = jax.lax.stop_gradient((model, q, v))
    fm, fq, fv = frozen

    def residual(x):
        return form.dynamics_residual(fm, x, fq, fv, t, h)

    def add(x, d):
        return x + d

    if newton == "reuse":
        x_star, info, factors, _ = newton_iterate_reusing(
            residual,
            lambda x: form.dynamics_jacobian(fm, x, fq, fv, t, h),
            x0,
            factors,
            tol=tol,
            max_iter=max_iter,
        )
    elif newton == "modified":
        solve = lu_solver(form.dynamics_jacobian(fm, x0, fq, fv, t, h))
        x_star, info = newton_iterate(
            lambda x: (residual(x), None),
            add,
            x0,
            tol=tol,
            max_iter=max_iter,
            linear_solve=lambda _, F: solve(F),
        )
    else:
        x_star, info = newton_iterate(
            lambda x: (residual(x), form.dynamics_jacobian(fm, x, fq, fv, t, h)),
            add,
            x0,
            tol=tol,
            max_iter=max_iter,
        )
    x = implicit_root(
        lambda y, params: form.dynamics_residual(params[0], y, params[1], params[2], t, h),
        add,
        x_star,
        (model, q, v),
        x0.shape[0],
        jacobian=lambda y: form.dynamics_jacobian(fm, y, fq, fv, t, h),
    )
    return x, info, factors


def _initial(model, form, h, newton: str):
    state, _, info = consistent_initial_state(model)
    q, v, a = _to_formulation(form, *state[:6])
    lam = state[6]
    extra = form.num_multipliers(model) - model.nc
    x0 = jnp.concatenate([a.reshape(-1), lam, jnp.zeros(extra)])
    out = state + (info.iterations, info.status, info.residual_norm)
    # newton="reuse" carries the factored iteration matrix across steps; NaN = none yet
    factors = empty_lu_factors(x0.shape[0] if newton == "reuse" else 0)
    return (q, v, jnp.stack([x0, x0, x0]), factors), out


def _scan(
    model, form, carry, k0, n: int, h, tol, max_iter, newton: str, checkpoint: int | None = None
):
    nb, ts, nc = model.nb, form.tangent_size, model.nc

    def step(carry, k):
        q, v, history, factors = carry
        t = k * h
        # Initial guess: quadratic extrapolation of the last three roots (error O(h^3) instead
        # of O(h) for the last root; linear at the second step), which saves iterations, most
        # with a reused matrix (linear convergence). The root does not depend on the guess:
        # no gradient through it.
        x1, x2, x3 = history
        guess = jnp.where(k >= 3, 3.0 * x1 - 3.0 * x2 + x3, jnp.where(k == 2, 2.0 * x1 - x2, x1))
        x0 = jax.lax.stop_gradient(guess)
        x, info, factors = _newton_step(model, form, q, v, x0, factors, t, h, tol, max_iter, newton)
        a = x[: nb * ts].reshape(nb, ts)
        q1, v1 = form.advance(q, v, a, h)
        out = _outputs(form, q1, v1, a, x[nb * ts :], nc)
        return (q1, v1, jnp.stack([x, x1, x2]), factors), out + (
            info.iterations,
            info.status,
            info.residual_norm,
        )

    steps = k0 + jnp.arange(1, n + 1)
    if not checkpoint or n <= checkpoint:
        return jax.lax.scan(step, carry, steps)
    # Checkpointed scan for reverse mode over long horizons: only segment boundaries are
    # stored; each segment of ``checkpoint`` steps is recomputed in the backward pass, so
    # memory grows like n / checkpoint + checkpoint instead of n.
    segments = -(-n // checkpoint)
    padded = k0 + jnp.arange(1, segments * checkpoint + 1).reshape(segments, checkpoint)

    @jax.checkpoint
    def segment(carry, ks):
        return jax.lax.scan(step, carry, ks)

    carry, outs = jax.lax.scan(segment, carry, padded)
    outs = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:])[:n], outs)
    return carry, outs


_chunk = eqx.filter_jit(_scan)
_first = eqx.filter_jit(_initial)


@eqx.filter_jit
def _run(model, form, n: int, h, tol, max_iter, newton: str, checkpoint: int | None = None):
    carry, first = _initial(model, form, h, newton)
    _, rest = _scan(model, form, carry, 0, n, h, tol, max_iter, newton, checkpoint)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def simulate(
    model: Model,
    *,
    formulation="rA",
    t_end: float,
    h: float,
    tol: float | None = None,
    max_iter: int = 25,
    newton: str = "full",
    progress: Callable[[int, int], None] | None = None,
    chunk_size: int = 1000,
    checkpoint: int | None = None,
    check: bool = True,
) -> Solution:
    """Index-3 dynamics with backward Euler on t = k h, k = 0..round(t_end / h).

    ``formulation``: "rA", "rp" or "re". ``tol``: Newton stops when the correction norm is
    below it (eq. 46); default Theta = 1e-11 / h^2. ``newton``: "full" (matrix at every
    iteration, rA: hand-coded with Tables 3-6), "modified" (matrix frozen per step) or
    "reuse" (factored matrix kept across steps and refreshed only when convergence slows,
    see :func:`~jaxmbd.newton.newton_iterate_reusing`; fastest for a single trajectory and
    for large mechanisms, where it saves the O(n^3) factorisation in most steps; under
    ``vmap`` the refresh decision becomes a select that builds the matrix at every
    iteration, so batches should use "full"). Every variant starts Newton from a quadratic
    extrapolation of the last three roots and stops on the same rule, so they return the
    same roots to within the tolerance.
    The initial state is made consistent first (positions, velocities, accelerations and
    multipliers; see :func:`consistent_initial_state`). A non-converged step raises
    :class:`~jaxmbd.SolverError` (``check=False`` returns the status instead).

    Differentiable: ``jax.grad``/``jacfwd``/``jacrev`` of any function of the Solution with
    respect to every array of the model use implicit-function gradients of each step's root.
    ``checkpoint=k`` bounds reverse-mode memory over long horizons by recomputing segments of
    k steps (``jax.checkpoint``).
    """
    form = get_formulation(formulation)
    if newton not in NEWTON_METHODS:
        raise ValueError(f"newton must be one of {NEWTON_METHODS}, got {newton!r}")
    check_euler_angle_start(model, form)
    n = num_steps(t_end, h)
    h_arr = jnp.asarray(h, dtype=jnp.float64)
    theta = THETA_H2 / float(h) ** 2 if tol is None else tol
    tol_arr = jnp.asarray(theta, dtype=jnp.float64)
    traced = is_traced(model)
    if progress is None or traced:
        outs = _run(model, form, n, h_arr, tol_arr, max_iter, newton, checkpoint)
    else:
        outs = run_in_chunks(
            lambda: _first(model, form, h_arr, newton),
            lambda carry, k0, size: _chunk(
                model, form, carry, k0, size, h_arr, tol_arr, max_iter, newton
            ),
            n,
            chunk_size,
            progress,
        )
    sol = solution_from_outputs(model, form, h_arr, outs)
    return finish(model, sol, what="dynamics", check=check, traced=traced)


__all__ = [
    "simulate",
    "consistent_initial_state",
    "InitialCorrection",
    "THETA_H2",
    "MAX_ITERATIONS",
    "SUCCESS",
    "np",
]
