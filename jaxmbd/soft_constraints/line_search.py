"""MuJoCo's exact line search of the primal solvers (``PrimalSearch``, engine_solver.c).

Along a search direction ``v`` the cost of the primal problem is a piecewise quadratic in
the step ``alpha`` (piecewise smooth for elliptic cones): the Gauss term and each row's
piece are evaluated from per-row polynomials prepared once per direction
(``PrimalPrepare``), and the search is Newton's method in one dimension on the cost's
derivative, with MuJoCo's bracketing safeguard and its tests ("Computation" chapter,
section "Algorithms": "Line-search is exact, using Newton's method in one dimension with
analytical second derivatives on the piecewise-quadratic cost").

The cost is evaluated shifted, as ``cost(alpha) - cost(0)`` (``PrimalEval``,
``frictionCostDif``, ``ellipticCostDif``), which keeps the improvement accurate when it is
tiny compared with the cost. The control flow, the evaluation count (``ls_iterations``
bounds it) and the result codes follow ``PrimalSearch`` statement by statement, so that the
solver stops at the same iteration as MuJoCo.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import _config  # noqa: F401
from .problem import (
    EQUALITY,
    FRICTION_LOSS,
    MJ_MINVAL,
    ONE_SIDED,
    SoftRows,
    cone_layout,
    inner,
    row_weight,
    safe_sqrt,
    to_cones,
)

# Line-search results (ctx->LSresult of PrimalSearch).
LS_SUCCESS = 0
LS_SEARCH_TOO_SMALL = 1
LS_NO_IMPROVEMENT_CONVERGED = 2
LS_NO_BRACKET = 3
LS_NO_CONVERGENCE = 4
LS_NO_IMPROVEMENT = 5
LS_NO_IMPROVEMENT_NO_BRACKET = 7


class Point(NamedTuple):
    """A line-search point (mjPrimalPnt): step, shifted cost, first and second derivative."""

    alpha: jax.Array
    cost: jax.Array
    d0: jax.Array
    d1: jax.Array


class Direction(NamedTuple):
    """The per-direction polynomials of ``PrimalPrepare``."""

    gauss1: jax.Array  # v'(Ma - qfrc_smooth)
    gauss2: jax.Array  # v'Mv / 2
    start: jax.Array  # (nefc,) Jaref = J a - aref
    slope: jax.Array  # (nefc,) Jv
    quad: jax.Array  # (3, nefc) per row: D Jaref^2 / 2, D Jaref Jv, D Jv^2 / 2
    cone_quad: jax.Array  # (3, ncone) the same summed over each cone's rows
    cone_uv: jax.Array  # (5, ncone) U0, V0, UU, UV, VV in the cone's circular coordinates
    cone_Dm: jax.Array  # (ncone,) D[0] / (mu^2 (1 + mu^2)), 0 on inactive cones


def prepare(
    rows: SoftRows,
    Ma: jax.Array,
    qfrc_smooth: jax.Array,
    search: jax.Array,
    Mv: jax.Array,
    Jaref: jax.Array,
    Jv: jax.Array,
) -> Direction:
    """Polynomials of the cost along ``search`` (``PrimalPrepare``)."""
    D = row_weight(rows)
    DJ0 = D * Jaref
    quad = jnp.stack([0.5 * (Jaref * DJ0), Jv * DJ0, 0.5 * (Jv * D * Jv)])
    ncone = rows.ncone
    if ncone:
        layout = cone_layout(rows)
        mu = rows.cone_mu
        Jaref_c = to_cones(layout, Jaref)
        Jv_c = to_cones(layout, Jv)
        D_c = to_cones(layout, D)
        DJ_c = D_c * Jaref_c
        cone_quad = jnp.stack(
            [
                0.5 * jnp.sum(Jaref_c * DJ_c, axis=1),
                jnp.sum(Jv_c * DJ_c, axis=1),
                0.5 * jnp.sum(Jv_c * D_c * Jv_c, axis=1),
            ]
        )
        # rescale to make the primal cone circular
        U = Jaref_c * layout.scale
        V = Jv_c * layout.scale
        cone_uv = jnp.stack(
            [
                U[:, 0],
                V[:, 0],
                jnp.sum(U[:, 1:] * U[:, 1:], axis=1),
                jnp.sum(U[:, 1:] * V[:, 1:], axis=1),
                jnp.sum(V[:, 1:] * V[:, 1:], axis=1),
            ]
        )
        safe_mu = jnp.where(layout.active, mu, 1.0)
        cone_Dm = jnp.where(
            layout.active, D_c[:, 0] / ((safe_mu * safe_mu) * (1 + (safe_mu * safe_mu))), 0.0
        )
    else:
        cone_quad = jnp.zeros((3, 0), Jaref.dtype)
        cone_uv = jnp.zeros((5, 0), Jaref.dtype)
        cone_Dm = jnp.zeros((0,), Jaref.dtype)
    return Direction(
        gauss1=inner(search, Ma) - inner(qfrc_smooth, search),
        gauss2=0.5 * inner(search, Mv),
        start=Jaref,
        slope=Jv,
        quad=quad,
        cone_quad=cone_quad,
        cone_uv=cone_uv,
        cone_Dm=cone_Dm,
    )


def _friction_cost(x, f, Rf, D):
    """Huber cost of a friction-loss row at ``x`` (``frictionCost``)."""
    return jnp.where(
        (-Rf < x) & (x < Rf),
        0.5 * D * x * x,
        jnp.where(x <= -Rf, f * (-0.5 * Rf - x), f * (-0.5 * Rf + x)),
    )


def _friction_zone(x, Rf):
    return jnp.where((-Rf < x) & (x < Rf), 0, jnp.where(x <= -Rf, -1, 1))


def _elliptic_zone(N, Tsqr, mu):
    """1 top, 2 bottom, 3 middle (``ellipticCostDif``) and T = sqrt(Tsqr)."""
    T, has_T = safe_sqrt(Tsqr)
    zone = jnp.where(
        ~has_T,
        jnp.where(N < 0, 2, 1),
        jnp.where(N >= mu * T, 1, jnp.where(mu * N + T <= 0, 2, 3)),
    )
    return zone, T


def _friction_loss_terms(rows: SoftRows, start, slope, x, D):
    """The friction-loss rows' shifted cost and its two derivatives at ``x = start + alpha
    slope`` (``frictionCostDif`` and PrimalEval's derivatives)."""
    is_fr = rows.kind == FRICTION_LOSS
    f = jnp.where(rows.active & is_fr, rows.floss, 0.0)
    Rf = jnp.where(rows.active, rows.R, 1.0) * f
    zone_start = _friction_zone(start, Rf)
    zone_x = _friction_zone(x, Rf)
    fr_dif = jnp.where(
        (zone_start == 0) & (zone_x == 0),
        0.5 * D * (x - start) * (x + start),
        jnp.where(
            (zone_start == -1) & (zone_x == -1),
            f * (start - x),
            jnp.where(
                (zone_start == 1) & (zone_x == 1),
                f * (x - start),
                _friction_cost(x, f, Rf, D) - _friction_cost(start, f, Rf, D),
            ),
        ),
    )
    fr_d0 = jnp.where(zone_x == 0, D * x * slope, jnp.where(zone_x == -1, -f * slope, f * slope))
    fr_d1 = jnp.where(zone_x == 0, D * slope * slope, 0.0)
    return (
        jnp.sum(jnp.where(is_fr, fr_dif, 0.0)),
        jnp.sum(jnp.where(is_fr, fr_d0, 0.0)),
        jnp.sum(jnp.where(is_fr, fr_d1, 0.0)),
    )


def evaluate(rows: SoftRows, direction: Direction, alpha: jax.Array) -> Point:
    """Shifted cost ``cost(alpha) - cost(0)`` and its two derivatives (``PrimalEval``)."""
    kind = rows.kind
    start, slope = direction.start, direction.slope
    q0, q1, q2 = direction.quad
    D = row_weight(rows)
    dtype = start.dtype

    kinds = rows.kinds
    x = start + alpha * slope
    zero = jnp.zeros((), dtype)
    total0, total1, total2 = zero, direction.gauss1, direction.gauss2
    cost = d0 = d1 = zero

    if EQUALITY in kinds:  # shifted quadratic (quad[0] dropped)
        is_eq = kind == EQUALITY
        total1 = total1 + jnp.sum(jnp.where(is_eq, q1, 0.0))
        total2 = total2 + jnp.sum(jnp.where(is_eq, q2, 0.0))

    if FRICTION_LOSS in kinds:  # the cost difference evaluated directly (frictionCostDif)
        cost, d0, d1 = _friction_loss_terms(rows, start, slope, x, D)

    if ONE_SIDED in kinds:  # quadratic where x < 0, shifted by the cost at alpha = 0
        is_os = kind == ONE_SIDED
        cost0 = jnp.where(start < 0, q0, 0.0)
        os_active = is_os & (x < 0)
        total0 = total0 + jnp.sum(jnp.where(os_active, q0 - cost0, 0.0))
        total1 = total1 + jnp.sum(jnp.where(os_active, q1, 0.0))
        total2 = total2 + jnp.sum(jnp.where(os_active, q2, 0.0))
        cost = cost - jnp.sum(jnp.where(is_os & ~(x < 0), cost0, 0.0))

    # elliptic cones (ellipticCostDif and the derivatives of PrimalEval)
    if rows.ncone:
        mu = rows.cone_mu
        cq0, cq1, cq2 = direction.cone_quad
        U0, V0, UU, UV, VV = direction.cone_uv
        Dm = direction.cone_Dm
        zone0, T0 = _elliptic_zone(U0, UU, mu)
        N = U0 + alpha * V0
        Tsqr = UU + alpha * (2 * UV + alpha * VV)
        zone, T = _elliptic_zone(N, Tsqr, mu)
        safe_T = jnp.where(zone == 3, T, 1.0)
        safe_TT0 = jnp.where((zone == 3) & (zone0 == 3), T + T0, 1.0)
        bottom_dif = alpha * alpha * cq2 + alpha * cq1
        # both middle: rationalised difference, free of cancellation
        T_delta = alpha * (2 * UV + alpha * VV) / safe_TT0
        r_delta = alpha * V0 - mu * T_delta
        r0 = U0 - mu * T0
        dq = alpha * (alpha * cq2 + cq1)
        boundary0 = mu * U0 + T0
        boundary = mu * N + T
        r = N - mu * T
        cases = [
            ((zone0 == 1) & (zone == 1), 0.0),
            ((zone0 == 2) & (zone == 2), bottom_dif),
            ((zone0 == 3) & (zone == 3), 0.5 * Dm * r_delta * (2 * r0 + r_delta)),
            ((zone0 == 3) & (zone == 2), dq + 0.5 * Dm * boundary0 * boundary0),
            ((zone0 == 2) & (zone == 3), dq - 0.5 * Dm * boundary * boundary),
            ((zone0 == 1) & (zone == 2), alpha * alpha * cq2 + alpha * cq1 + cq0),
            ((zone0 == 1) & (zone == 3), 0.5 * Dm * r * r),
            ((zone0 == 3) & (zone == 1), -0.5 * Dm * r0 * r0),
            ((zone0 == 2) & (zone == 1), -cq0),
        ]
        cone_dif = jnp.select([c for c, _ in cases], [v for _, v in cases], 0.0)
        N1 = V0
        T1 = (UV + alpha * VV) / safe_T
        T2 = VV / safe_T - (UV + alpha * VV) * T1 / (safe_T * safe_T)
        cone_d0 = jnp.where(
            zone == 2,
            2 * alpha * cq2 + cq1,
            jnp.where(zone == 3, Dm * (N - mu * T) * (N1 - mu * T1), 0.0),
        )
        cone_d1 = jnp.where(
            zone == 2,
            2 * cq2,
            jnp.where(
                zone == 3, Dm * ((N1 - mu * T1) * (N1 - mu * T1) + (N - mu * T) * (-mu * T2)), 0.0
            ),
        )
        cone_on = cone_layout(rows).active
        cost = cost + jnp.sum(jnp.where(cone_on, cone_dif, 0.0))
        d0 = d0 + jnp.sum(jnp.where(cone_on, cone_d0, 0.0))
        d1 = d1 + jnp.sum(jnp.where(cone_on, cone_d1, 0.0))

    cost = cost + (alpha * alpha * total2 + alpha * total1 + total0)
    d0 = d0 + (2 * alpha * total2 + total1)
    d1 = d1 + 2 * total2
    # convexity guard of PrimalEval (SHOULD NOT OCCUR: M is positive definite)
    d1 = jnp.where(d1 <= 0, MJ_MINVAL, d1)
    return Point(jnp.asarray(alpha, dtype), cost, d0, d1)


class SearchResult(NamedTuple):
    alpha: jax.Array  # the step; 0 when the search found no improvement
    improvement: jax.Array  # -cost(alpha) + cost(0), unscaled
    evaluations: jax.Array  # ctx->LSiter
    result: jax.Array  # ctx->LSresult (LS_* codes)


def _where_point(flag, a: Point, b: Point) -> Point:
    return Point(*(jnp.where(flag, x, y) for x, y in zip(a, b, strict=True)))


def search(
    rows: SoftRows,
    direction: Direction,
    snorm: jax.Array,
    scale: jax.Array,
    tolerance: jax.Array,
    ls_iterations: jax.Array,
) -> SearchResult:
    """MuJoCo's exact line search (``PrimalSearch``): Newton steps on alpha, then bracketing.

    ``tolerance`` is ``opt.tolerance * opt.ls_tolerance``; the derivative tolerance is
    ``gtol = tolerance * |v| / scale`` (``scale`` = 1 / trace(M) in MuJoCo 4.0, the scaling
    of the solver's termination tests). ``ls_iterations`` bounds the number of cost
    evaluations, counted as MuJoCo counts them (the evaluation at alpha = 0 included).
    """
    dtype = direction.start.dtype

    def ev(alpha):
        return evaluate(rows, direction, alpha)

    def newton_point(p: Point) -> jax.Array:
        return p.alpha - p.d0 / p.d1

    gtol = tolerance * snorm / scale
    zero = jnp.zeros((), dtype)
    too_small = snorm < MJ_MINVAL

    p0 = ev(zero)
    p1 = ev(newton_point(p0))  # always attempt one Newton step
    count = jnp.where(too_small, 0, 2).astype(jnp.int32)

    # initial convergence
    done = too_small | ((jnp.abs(p1.d0) < gtol) & ((p1.alpha == 0) | (p1.cost < 0)))
    alpha = jnp.where(too_small, zero, p1.alpha)
    improvement = jnp.where(too_small, zero, -p1.cost)
    result = jnp.where(
        too_small,
        LS_SEARCH_TOO_SMALL,
        jnp.where(p1.alpha == 0, LS_NO_IMPROVEMENT_CONVERGED, LS_SUCCESS),
    )
    direction_sign = jnp.where(p1.d0 < 0, 1.0, -1.0)

    # one-sided search: Newton steps while the derivative keeps its sign
    def one_sided_cond(c):
        p1, _, count, done, *_ = c
        return (~done) & (p1.d0 * direction_sign <= -gtol) & (count < ls_iterations)

    def one_sided_body(c):
        p1, _, count, done, alpha, improvement, result = c
        p2 = p1
        p1 = ev(newton_point(p1))
        converged = (jnp.abs(p1.d0) < gtol) & (p1.cost < 0)
        return (
            p1,
            p2,
            count + 1,
            converged,
            jnp.where(converged, p1.alpha, alpha),
            jnp.where(converged, -p1.cost, improvement),
            jnp.where(converged, LS_SUCCESS, result),
        )

    p1, p2, count, done, alpha, improvement, result = lax.while_loop(
        one_sided_cond, one_sided_body, (p1, p0, count, done, alpha, improvement, result)
    )

    # failure to bracket
    no_bracket = (~done) & (count >= ls_iterations)
    alpha = jnp.where(no_bracket, p1.alpha, alpha)
    improvement = jnp.where(no_bracket, -p1.cost, improvement)
    result = jnp.where(no_bracket, LS_NO_BRACKET, result)
    done = done | no_bracket

    # next points of the bracket
    p2next = p1
    p1next = ev(newton_point(p1))
    count = count + jnp.where(done, 0, 1).astype(jnp.int32)

    def update_bracket(p: Point, candidates, pnext: Point):
        """updateBracket: move a bracket end to a candidate with a smaller |derivative|."""
        flag = jnp.asarray(0, jnp.int32)
        for cand in candidates:
            neg = (p.d0 < 0) & (cand.d0 < 0) & (p.d0 < cand.d0)
            pos = (~neg) & (p.d0 > 0) & (cand.d0 > 0) & (p.d0 > cand.d0)
            p = _where_point(neg | pos, cand, p)
            flag = jnp.where(neg, 1, jnp.where(pos, 2, flag))
        updated = flag != 0
        pnext = _where_point(updated, ev(newton_point(p)), pnext)
        return p, pnext, updated

    def bracket_cond(c):
        count, done = c[4], c[5]
        return (~done) & (count < ls_iterations)

    def bracket_body(c):
        p1, p2, p1next, p2next, count, done, alpha, improvement, result = c
        pmid = ev(0.5 * (p1.alpha + p2.alpha))
        count = count + 1
        candidates = (p1next, p2next, pmid)

        # converged candidate with the lowest cost (first one on ties)
        best_found = jnp.asarray(False)
        best = pmid
        for cand in candidates:
            take = (jnp.abs(cand.d0) < gtol) & ((~best_found) | (cand.cost < best.cost))
            best = _where_point(take, cand, best)
            best_found = best_found | take

        new_p1, new_p1next, b1 = update_bracket(p1, candidates, p1next)
        new_p2, new_p2next, b2 = update_bracket(p2, candidates, p2next)
        stuck = (~best_found) & (~b1) & (~b2)
        go_on = (~best_found) & (~stuck)
        count = count + jnp.where(go_on, b1.astype(jnp.int32) + b2.astype(jnp.int32), 0)
        # numerical accuracy reached without a converged candidate: use the midpoint
        alpha = jnp.where(best_found, best.alpha, jnp.where(stuck, pmid.alpha, alpha))
        improvement = jnp.where(best_found, -best.cost, jnp.where(stuck, -pmid.cost, improvement))
        result = jnp.where(
            best_found,
            LS_SUCCESS,
            jnp.where(
                stuck,
                jnp.where(pmid.cost < 0, LS_SUCCESS, LS_NO_IMPROVEMENT_NO_BRACKET),
                result,
            ),
        )
        return (
            _where_point(go_on, new_p1, p1),
            _where_point(go_on, new_p2, p2),
            _where_point(go_on, new_p1next, p1next),
            _where_point(go_on, new_p2next, p2next),
            count,
            best_found | stuck,
            alpha,
            improvement,
            result,
        )

    p1, p2, _, _, count, bracket_done, alpha, improvement, result = lax.while_loop(
        bracket_cond,
        bracket_body,
        (p1, p2, p1next, p2next, count, done, alpha, improvement, result),
    )

    # out of evaluations: the bracket end with the better (negative) cost
    take1 = (~bracket_done) & (p1.cost <= p2.cost) & (p1.cost < 0)
    take2 = (~bracket_done) & (~take1) & (p2.cost <= p1.cost) & (p2.cost < 0)
    neither = (~bracket_done) & (~take1) & (~take2)
    alpha = jnp.where(take1, p1.alpha, jnp.where(take2, p2.alpha, jnp.where(neither, 0.0, alpha)))
    improvement = jnp.where(
        take1, -p1.cost, jnp.where(take2, -p2.cost, jnp.where(neither, 0.0, improvement))
    )
    result = jnp.where(
        take1 | take2, LS_NO_CONVERGENCE, jnp.where(neither, LS_NO_IMPROVEMENT, result)
    )
    return SearchResult(alpha, improvement, count, result.astype(jnp.int32))
