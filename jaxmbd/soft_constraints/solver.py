"""MuJoCo's primal constraint solvers, Newton and CG, in JAX, with implicit derivatives.

Per time step MuJoCo finds the constrained acceleration as the minimiser of (Todorov,
ICRA 2014, eq. 11; "Computation" chapter, "Constraint model" and "Algorithms")

    cost(a) = 1/2 (a - a0)' M (a - a0) + s(J a - aref),

``a0 = qacc_smooth`` and ``s`` the rows' convex pieces (:mod:`.problem`). :func:`solve`
reproduces ``mj_solPrimal`` of engine_solver.c (MuJoCo 4.0): the warm start (``warmstart``
of engine_forward.c: the better of ``qacc_warmstart`` and ``qacc_smooth``), the
zero-iteration duality-gap certificate, the exact line search (:mod:`.line_search`), the
Newton direction ``-H^-1 grad`` or CG's Hager-Zhang direction preconditioned by ``M^-1``,
and the three termination tests on the scaled improvement, gradient and (Newton) decrement,
so that it stops at MuJoCo's iteration. All loops are ``lax.while_loop`` over fixed shapes:
the solve jits and vmaps. Its ``qacc`` and ``efc_force`` are differentiable with respect to
every floating-point input by implicit differentiation of the optimum (:mod:`.implicit`).

Differences from MuJoCo that do not change results beyond rounding: the Hessian is
factorised afresh (dense Cholesky) at each iteration rather than updated by rank-1 steps;
sums run in XLA's order; ``efc_force`` is evaluated at ``J qacc - aref`` of the final
``qacc`` (MuJoCo keeps ``J qacc - aref`` updated along the steps). Islands are not formed:
the problem is solved as one (MuJoCo with ``mjDSBL_ISLAND``, or a model whose constrained
dofs form one island).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from .. import _config  # noqa: F401
from ..compiled.xla_flags import hoisted_call
from ..newton._implicit import ROOT
from ..tree._elementwise import cholesky_factor_solve
from . import line_search
from .implicit import attach_implicit_derivatives
from .problem import (
    MJ_MINVAL,
    SoftRows,
    constraint_update,
    inner,
    spd_factor,
    spd_solve,
    times,
)
from .row_blocks import AllRows, RowOperations, active_row_blocks

# Solve status codes (SoftSolution.status).
#: A termination test passed (improvement, gradient or Newton decrement below
#: ``tolerance``), or the warm start was certified optimal, or no row is active.
SOLVED = 0
#: ``iterations`` ran out before a termination test passed.
MAX_ITERATIONS = 1
#: The line search found no decrease (MuJoCo stops there too): the iterate is optimal to
#: the precision of the cost's evaluation, or the problem is ill-posed.
NO_IMPROVEMENT = 2
#: The result is not finite (e.g. a non-positive-definite M or a non-positive active R).
NONFINITE = 3

STATUS_NAMES = {
    SOLVED: "solved",
    MAX_ITERATIONS: "max iterations",
    NO_IMPROVEMENT: "no improvement",
    NONFINITE: "non-finite",
}


@final
class SoftSolution(eqx.Module):
    """The result of :func:`solve` (the mjData fields it reproduces in brackets).

    Attributes:
        qacc: ``(nv,)`` constrained acceleration (``qacc``), differentiable.
        efc_force: ``(nefc,)`` row forces (``efc_force``), differentiable; MuJoCo's sign:
            ``-D (J a - aref)`` on quadratic rows, ``+-floss`` on saturated friction loss.
        efc_state: ``(nefc,)`` row states (``efc_state``, mjtConstraintState numbers).
        cost: total cost at ``qacc`` (Gauss plus constraint).
        iterations: solver iterations taken (``solver_niter``).
        status: SOLVED, MAX_ITERATIONS, NO_IMPROVEMENT or NONFINITE.
        gradient: the last scaled gradient norm ``scale * |grad|`` (``solver.gradient``).
        improvement: the last scaled improvement (``solver.improvement``).
        warmstart_used: whether the solve started from ``a_warm`` rather than ``a0``.
    """

    qacc: jax.Array
    efc_force: jax.Array
    efc_state: jax.Array
    cost: jax.Array
    iterations: jax.Array
    status: jax.Array
    gradient: jax.Array
    improvement: jax.Array
    warmstart_used: jax.Array


class _Carry(NamedTuple):
    qacc: jax.Array
    Ma: jax.Array
    Jaref: jax.Array
    grad: jax.Array
    Mgrad: jax.Array
    search: jax.Array
    iteration: jax.Array
    done: jax.Array
    status: jax.Array
    gradient: jax.Array
    improvement: jax.Array


def _hager_zhang(search, grad, gradold, Mgrad, Mgradold):
    """CG direction of mj_solPrimal: Hager-Zhang beta, truncated below (MuJoCo 4.0 default).

    Hager & Zhang, "A new conjugate gradient method with guaranteed descent and an
    efficient line search", SIAM J. Optim. 16 (2005), eq. 1.5 and the lower bound eta_k,
    in the metric of the preconditioner M^-1; steepest descent when d'y < mjMINVAL.
    """
    graddif = grad - gradold
    Mgraddif = Mgrad - Mgradold
    d_dot_y = inner(search, graddif)
    restart = d_dot_y < MJ_MINVAL
    safe_d_dot_y = jnp.where(restart, 1.0, d_dot_y)
    y_dot_My = inner(graddif, Mgraddif)
    y_dot_Mgrad = inner(graddif, Mgrad)
    d_dot_grad = inner(search, grad)
    beta_hz = (y_dot_Mgrad - 2 * (y_dot_My / safe_d_dot_y) * d_dot_grad) / safe_d_dot_y
    eta = 0.01
    eta_k = -1.0 / jnp.maximum(
        MJ_MINVAL, jnp.sqrt(inner(search, search)) * jnp.minimum(eta, jnp.sqrt(inner(grad, grad)))
    )
    beta = jnp.where(restart, 0.0, jnp.maximum(eta_k, beta_hz))
    return -Mgrad + beta * search


def _primal_solve(
    M, a0, ops: RowOperations, a_warm, newton: bool, iterations, tolerance, ls_iterations,
    ls_tolerance, scale, warmstart: bool,
):  # fmt: skip
    """mj_solPrimal (no derivatives): returns (qacc, iterations, status, gradient,
    improvement, warmstart_used)."""
    dtype = a0.dtype

    def newton_Mgrad(M, ops, update, grad):
        return spd_solve(ops.hessian(M, update), grad)

    def start(M, a0, ops, a_warm, scale, tolerance, warmstart):
        aref = ops.rows.aref
        qfrc_smooth = times(M, a0)
        if scale is None:
            # MuJoCo 4.0 scales its tests by the trace of the current inertia (changelog 4.0.0,
            # "Constraint solvers now scale their termination criteria by the trace")
            scale = 1.0 / jnp.trace(M)
        scale = jnp.asarray(scale, dtype)
        tolerance = jnp.asarray(tolerance, dtype)

        # warm start: the better of a_warm and a0 (engine_forward.c, warmstart); the cost
        # at a0 is the constraint cost alone (M a0 = qfrc_smooth)
        Ma_warm = times(M, a_warm)
        Jaref_warm = ops.times(a_warm) - aref
        update_warm = ops.update(Jaref_warm)
        cost_warm = update_warm.cost + 0.5 * inner(Ma_warm - qfrc_smooth, a_warm - a0)
        Jaref_smooth = ops.times(a0) - aref
        update_smooth = ops.update(Jaref_smooth)
        warmstart_used = jnp.asarray(warmstart) & ~(cost_warm > update_smooth.cost)
        any_active = jnp.any(ops.rows.active)
        from_warm = warmstart_used & any_active
        qacc = jnp.where(from_warm, a_warm, a0)

        # the start's products and rows' update: those of the point it starts from
        Ma = jnp.where(from_warm, Ma_warm, qfrc_smooth)
        Jaref = jnp.where(from_warm, Jaref_warm, Jaref_smooth)
        update = jax.tree.map(lambda w, s: jnp.where(from_warm, w, s), update_warm, update_smooth)
        grad = Ma - qfrc_smooth - ops.transposed_times(update.force)
        M_factor = spd_factor(M)
        Mgrad_M = cholesky_factor_solve(M_factor, grad)

        # duality-gap certificate: cost(a) - cost* <= grad' M^-1 grad / 2; Newton also requires
        # the gradient test (mj_solPrimal, "convergence certificate")
        gap_small = jnp.maximum(0.0, 0.5 * scale * inner(grad, Mgrad_M)) < tolerance
        gradient = scale * jnp.sqrt(inner(grad, grad))
        gradient_small = gradient < tolerance
        if newton:
            certified = gap_small & gradient_small
            Mgrad = newton_Mgrad(M, ops, update, grad)
            decrement = jnp.maximum(0.0, 0.5 * scale * inner(grad, Mgrad))
            done = certified | (gradient_small & (decrement < tolerance))
        else:
            done = gap_small
            Mgrad = Mgrad_M
        done = done | ~any_active

        carry = _Carry(
            qacc=qacc,
            Ma=Ma,
            Jaref=Jaref,
            grad=grad,
            Mgrad=Mgrad,
            search=-Mgrad,
            iteration=jnp.asarray(0, jnp.int32),
            done=done,
            status=jnp.where(done, SOLVED, MAX_ITERATIONS).astype(jnp.int32),
            gradient=gradient,
            improvement=jnp.zeros((), dtype),
        )
        return carry, qfrc_smooth, scale, tolerance, M_factor, warmstart_used

    # the setup as one native call (the loop below is hoisted on its own)
    carry, qfrc_smooth, scale, tolerance, M_factor, warmstart_used = hoisted_call(
        start, M, a0, ops, a_warm, scale, tolerance, warmstart
    )

    def cond(c: _Carry):
        return (~c.done) & (c.iteration < iterations)

    def body(c: _Carry) -> _Carry:
        Mv = times(M, c.search)
        Jv = ops.times(c.search)
        direction = ops.prepare(c.Ma, qfrc_smooth, c.search, Mv, c.Jaref, Jv)
        found = line_search.search(
            lambda alpha: ops.evaluate(direction, alpha),
            jnp.sqrt(inner(c.search, c.search)),
            scale,
            tolerance * ls_tolerance,
            ls_iterations,
        )
        moved = found.alpha != 0
        alpha = found.alpha
        qacc = c.qacc + alpha * c.search
        Ma = c.Ma + alpha * Mv
        Jaref = c.Jaref + alpha * Jv
        update = ops.update(Jaref)
        grad = Ma - qfrc_smooth - ops.transposed_times(update.force)
        if newton:
            Mgrad = newton_Mgrad(M, ops, update, grad)
            decrement = jnp.maximum(0.0, 0.5 * scale * inner(grad, Mgrad))
        else:
            Mgrad = cholesky_factor_solve(M_factor, grad)
            decrement = jnp.asarray(jnp.inf, dtype)
        improvement = scale * found.improvement
        gradient = scale * jnp.sqrt(inner(grad, grad))
        converged = (
            ((improvement > 0) & (improvement < tolerance))
            | (gradient < tolerance)
            | (decrement < tolerance)
        )
        if newton:
            search = -Mgrad
        else:
            search = _hager_zhang(c.search, grad, c.grad, Mgrad, c.Mgrad)
        new = _Carry(
            qacc=qacc,
            Ma=Ma,
            Jaref=Jaref,
            grad=grad,
            Mgrad=Mgrad,
            search=search,
            iteration=c.iteration + 1,
            done=converged,
            status=jnp.where(converged, SOLVED, MAX_ITERATIONS).astype(jnp.int32),
            gradient=gradient,
            improvement=improvement,
        )
        # a failed line search leaves the iterate as it was and stops (mj_solPrimal: break)
        stopped = c._replace(done=jnp.asarray(True), status=jnp.asarray(NO_IMPROVEMENT, jnp.int32))
        return jax.tree.map(lambda a, b: jnp.where(moved, a, b), new, stopped)

    final = lax.while_loop(cond, body, carry)
    return (
        final.qacc,
        final.iteration,
        final.status,
        final.gradient,
        final.improvement,
        warmstart_used,
    )


def _all_batched(inputs, batched, axis_size: int):
    """``inputs`` with each leaf that ``batched`` marks unbatched broadcast to the batch."""
    return jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))), inputs, batched
    )


#: At most this many members of a ``vmap`` that share M and the rows are solved one after
#: the other on the CPU (:func:`_members_apart`): a run's step and the step before's end.
#: Wider batches (many forces at one state) keep the batched solve's vectorisation.
MEMBERS_APART = 2


def _members_apart(f):
    """``f(inputs)`` (``inputs = (M, a0, rows, ...)``), whose ``vmap`` on the CPU solves up
    to :data:`MEMBERS_APART` members that share M and the rows (one state under several
    forces: a run's step under its controls and the step before's end under the step
    before's) one after the other, a ``lax.map`` over them that XLA compiles as one native
    loop, each for its own iterations, where a batched solve runs every member for the
    slowest one's. Other batches stay one batched solve."""

    @jax.custom_batching.custom_vmap
    def apart(inputs):
        return f(inputs)

    @apart.def_vmap
    def _apart_vmap(axis_size, in_batched, inputs):
        (batched,) = in_batched
        shared = not any(jax.tree.leaves((batched[0], batched[2])))
        if not (shared and axis_size <= MEMBERS_APART and jax.default_backend() == "cpu"):
            inputs = _all_batched(inputs, batched, axis_size)
            out = jax.vmap(f)(inputs)
        else:
            treedef = jax.tree.structure(inputs)
            leaves = treedef.flatten_up_to(inputs)
            flags = treedef.flatten_up_to(batched)

            def member(xs):
                it = iter(xs)
                pairs = zip(leaves, flags, strict=True)
                return f(treedef.unflatten([next(it) if b else x for x, b in pairs]))

            out = lax.map(member, [x for x, b in zip(leaves, flags, strict=True) if b])
        return out, jax.tree.map(lambda _: True, out)

    return apart


def _none_active(inputs):
    """:func:`_primal_solve`'s result where no row is active: a0, no iteration, solved; the
    warm start counted as used where its cost (the Gauss term alone) is not above a0's."""
    M, a0, rows, a_warm, iterations, tolerance, ls_iterations, ls_tolerance, scale, warm = inputs
    gauss = 0.5 * inner(times(M, a_warm - a0), a_warm - a0)
    zero = jnp.zeros((), a0.dtype)
    return (
        a0,
        jnp.asarray(0, jnp.int32),
        jnp.asarray(SOLVED, jnp.int32),
        zero,
        zero,
        jnp.asarray(warm) & ~(gauss > 0),
    )


def _at_optimum(M, a0, rows, qacc):
    """(efc_force, efc_state, cost) of the rows at the solve's optimum ``qacc``."""
    update = constraint_update(rows, times(rows.J, qacc) - rows.aref)
    return update.force, update.state, update.cost + 0.5 * inner(times(M, qacc - a0), qacc - a0)


def solve(
    M: jax.Array,
    a0: jax.Array,
    rows: SoftRows,
    a_warm: jax.Array | None = None,
    *,
    method: Literal["newton", "cg"] = "newton",
    iterations: int | jax.Array = 100,
    tolerance: float | jax.Array = 1e-8,
    ls_iterations: int | jax.Array = 50,
    ls_tolerance: float | jax.Array = 0.01,
    scale: float | jax.Array | None = None,
    warmstart: bool | jax.Array = True,
    capacity: int | None = None,
) -> SoftSolution:
    """Solve MuJoCo's primal constraint problem for the acceleration (``mj_solPrimal``).

    Args:
        M: ``(nv, nv)`` joint-space inertia (``mj_fullM``), symmetric positive definite.
        a0: ``(nv,)`` unconstrained acceleration ``qacc_smooth = M^-1 qfrc_smooth``.
        rows: the constraint rows (:class:`~jaxmbd.soft_constraints.problem.SoftRows`).
        a_warm: ``(nv,)`` warm start (``qacc_warmstart``: the previous step's ``qacc``);
            ``None`` starts from ``a0``.
        method: ``"newton"`` (``mj_solNewton``, MuJoCo's default) or ``"cg"``
            (``mj_solCG``). Static.
        iterations: most iterations (``opt.iterations``; MuJoCo's default 100).
        tolerance: termination tolerance on the scaled improvement, gradient and Newton
            decrement (``opt.tolerance``; default 1e-8; 0 runs all iterations).
        ls_iterations: most cost evaluations per line search (``opt.ls_iterations``).
        ls_tolerance: line-search tolerance relative to ``tolerance`` (``opt.ls_tolerance``).
        scale: the scaling of the termination tests; ``None``: MuJoCo 4.0's
            ``1 / trace(M)``. (MuJoCo before 4.0 used ``1 / (stat.meaninertia * nv)``; pass
            that to reproduce it, or the unpadded trace when padding M.)
        warmstart: compare the cost at ``a_warm`` and ``a0`` and start from the better
            (``warmstart`` of engine_forward.c); false starts from ``a0`` (mjDSBL_WARMSTART).
            May be traced.
        capacity: the solver's loops run on the active rows alone, gathered in front and
            taken in blocks of this many rows, as many blocks as hold active rows
            (:class:`~.row_blocks.ActiveRowBlocks`; rows without elliptic cones); with
            ``None``, a capacity not below ``nefc`` or elliptic cones, on all rows. Static.
            The result is the same up to the order of sums: inactive rows contribute
            nothing to any quantity of the solve.

    Returns:
        A :class:`SoftSolution`. ``qacc`` and ``efc_force`` are differentiable with respect to
        ``M``, ``a0`` and the rows' ``J``, ``aref``, ``R``, ``floss``, ``cone_mu`` and
        ``cone_friction`` (implicit differentiation at the optimum; reliable when the solve
        converged). Options and ``a_warm`` carry no derivatives.
    """
    if method not in ("newton", "cg"):
        raise ValueError(f"method must be 'newton' or 'cg', not {method!r}")
    M = jnp.asarray(M)
    a0 = jnp.asarray(a0)
    a_warm = a0 if a_warm is None else jnp.asarray(a_warm)
    newton = method == "newton"
    inputs = (M, a0, rows, a_warm, iterations, tolerance, ls_iterations, ls_tolerance,
              scale, warmstart)  # fmt: skip
    inputs = jax.tree.map(lambda x: lax.stop_gradient(jnp.asarray(x)), inputs)

    # a jitted function: its traces are reused wherever the inputs' shapes recur (the
    # batching rules below trace the solve again, member by member)
    @jax.jit
    def on(inputs):
        M, a0, rows, a_warm, iterations, tolerance, ls_iterations, ls_tolerance, scale, warm = (
            inputs
        )
        if capacity is None or capacity >= rows.nefc or rows.ncone:
            ops = AllRows(rows)
        else:
            ops = active_row_blocks(rows, capacity)
        return _primal_solve(
            M, a0, ops, a_warm, newton=newton, iterations=iterations, tolerance=tolerance,
            ls_iterations=ls_iterations, ls_tolerance=ls_tolerance, scale=scale,
            warmstart=warm,
        )  # fmt: skip

    # no active row: the optimum is a0 at once (mj_solPrimal's first test), and the solve's
    # setup (the warm start's costs, M's factor, the first Newton direction) is skipped
    solved = lax.cond(jnp.any(inputs[2].active), _members_apart(on), _none_active, inputs)
    qacc, iters, status, gradient, improvement, warm_used = solved
    # the optimum is what a time step recomputed in reverse mode (jax.checkpoint with
    # jaxmbd.newton.SAVED_FOR_ADJOINT) keeps: the adjoint never reruns the solver's loops
    qacc = checkpoint_name(qacc, ROOT)
    qacc = attach_implicit_derivatives(qacc, M, a0, rows)
    force, state, cost = hoisted_call(_at_optimum, M, a0, rows, qacc)
    finite = jnp.all(jnp.isfinite(qacc))
    status = jnp.where(finite, status, NONFINITE).astype(jnp.int32)
    return SoftSolution(
        qacc=qacc,
        efc_force=force,
        efc_state=state,
        cost=cost,
        iterations=iters,
        status=status,
        gradient=gradient,
        improvement=improvement,
        warmstart_used=warm_used,
    )
