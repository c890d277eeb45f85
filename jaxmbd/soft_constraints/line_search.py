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


def row_quadratics(rows: SoftRows, Jaref: jax.Array, Jv: jax.Array) -> jax.Array:
    """(3, nefc): per row ``D Jaref^2 / 2, D Jaref Jv, D Jv^2 / 2`` (``PrimalPrepare``)."""
    D = row_weight(rows)
    DJ0 = D * Jaref
    return jnp.stack([0.5 * (Jaref * DJ0), Jv * DJ0, 0.5 * (Jv * D * Jv)])


def gauss_polynomial(Ma, qfrc_smooth, search, Mv) -> tuple[jax.Array, jax.Array]:
    """The Gauss term's coefficients along ``search``: ``v'(Ma - qfrc_smooth)``, ``v'Mv/2``."""
    return inner(search, Ma) - inner(qfrc_smooth, search), 0.5 * inner(search, Mv)


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
    quad = row_quadratics(rows, Jaref, Jv)
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
    gauss1, gauss2 = gauss_polynomial(Ma, qfrc_smooth, search, Mv)
    return Direction(
        gauss1=gauss1,
        gauss2=gauss2,
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


class RowTerms(NamedTuple):
    """The rows' part of ``PrimalEval`` at one step: the shifted cost of the piecewise rows
    and its two derivatives, and the coefficients of the rows that are quadratic there
    (``total0 + alpha total1 + alpha^2 total2``, the Gauss term's included)."""

    cost: jax.Array
    d0: jax.Array
    d1: jax.Array
    total0: jax.Array
    total1: jax.Array
    total2: jax.Array


def no_row_terms(direction: Direction) -> RowTerms:
    """The terms before any row is added: the Gauss term's polynomial alone."""
    zero = jnp.zeros((), direction.start.dtype)
    return RowTerms(zero, zero, zero, zero, direction.gauss1, direction.gauss2)


def add_row_terms(rows: SoftRows, direction: Direction, alpha: jax.Array, terms: RowTerms):
    """``terms`` with the rows' contributions at ``alpha`` added (``PrimalEval``'s loop over
    rows and cones): a direction's rows may be added in parts, the parts in their order."""
    kind = rows.kind
    start, slope = direction.start, direction.slope
    q0, q1, q2 = direction.quad
    D = row_weight(rows)

    kinds = rows.kinds
    x = start + alpha * slope
    cost, d0, d1, total0, total1, total2 = terms

    if EQUALITY in kinds:  # shifted quadratic (quad[0] dropped)
        is_eq = kind == EQUALITY
        total1 = total1 + jnp.sum(jnp.where(is_eq, q1, 0.0))
        total2 = total2 + jnp.sum(jnp.where(is_eq, q2, 0.0))

    if FRICTION_LOSS in kinds:  # the cost difference evaluated directly (frictionCostDif)
        fr_cost, fr_d0, fr_d1 = _friction_loss_terms(rows, start, slope, x, D)
        cost, d0, d1 = cost + fr_cost, d0 + fr_d0, d1 + fr_d1

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

    return RowTerms(cost, d0, d1, total0, total1, total2)


def point(alpha: jax.Array, terms: RowTerms) -> Point:
    """The shifted cost and its derivatives at ``alpha`` from all rows' ``terms``."""
    cost, d0, d1, total0, total1, total2 = terms
    cost = cost + (alpha * alpha * total2 + alpha * total1 + total0)
    d0 = d0 + (2 * alpha * total2 + total1)
    d1 = d1 + 2 * total2
    # convexity guard of PrimalEval (SHOULD NOT OCCUR: M is positive definite)
    d1 = jnp.where(d1 <= 0, MJ_MINVAL, d1)
    return Point(jnp.asarray(alpha, cost.dtype), cost, d0, d1)


def evaluate(rows: SoftRows, direction: Direction, alpha: jax.Array) -> Point:
    """Shifted cost ``cost(alpha) - cost(0)`` and its two derivatives (``PrimalEval``)."""
    return point(alpha, add_row_terms(rows, direction, alpha, no_row_terms(direction)))


class SearchResult(NamedTuple):
    alpha: jax.Array  # the step; 0 when the search found no improvement
    improvement: jax.Array  # -cost(alpha) + cost(0), unscaled
    evaluations: jax.Array  # ctx->LSiter
    result: jax.Array  # ctx->LSresult (LS_* codes)


def _where_point(flag, a: Point, b: Point) -> Point:
    return Point(*(jnp.where(flag, x, y) for x, y in zip(a, b, strict=True)))


# Phases of the search's loop; each evaluates the cost once, at the point its phase names.
_ZERO = 0  # alpha = 0, where every point of the search starts
_FIRST = 1  # the Newton step from alpha = 0
_ONE_SIDED = 2  # a Newton step while the derivative keeps its sign
_NEXT = 3  # the Newton step from the one-sided end: the bracket's first next point
_MID = 4  # the bracket's midpoint
_UPDATE_1 = 5  # the Newton step from the moved first end of the bracket
_UPDATE_2 = 6  # the Newton step from the moved second end
_DONE = 7  # a result is set


class _State(NamedTuple):
    phase: jax.Array
    p1: Point
    p2: Point
    p1next: Point
    p2next: Point
    count: jax.Array
    direction_sign: jax.Array
    update_2: jax.Array  # the second end moved too (its next point is still to evaluate)
    alpha: jax.Array
    improvement: jax.Array
    result: jax.Array


def search(
    evaluate_at,
    snorm: jax.Array,
    scale: jax.Array,
    tolerance: jax.Array,
    ls_iterations: jax.Array,
) -> SearchResult:
    """MuJoCo's exact line search (``PrimalSearch``): Newton steps on alpha, then bracketing.

    ``evaluate_at(alpha)``: the :class:`Point` at ``alpha`` along the search direction
    (:func:`evaluate` of its rows and :func:`prepare`'s direction, or the same summed over
    parts of the rows).
    ``tolerance`` is ``opt.tolerance * opt.ls_tolerance``; the derivative tolerance is
    ``gtol = tolerance * |v| / scale`` (``scale`` = 1 / trace(M) in MuJoCo 4.0, the scaling
    of the solver's termination tests). ``ls_iterations`` bounds the number of cost
    evaluations, counted as MuJoCo counts them (the evaluation at alpha = 0 included).

    ``PrimalSearch``'s sequence of evaluations (the first Newton step, the one-sided steps,
    the bracket's next points, midpoints and moved ends' Newton steps) runs as one loop of
    one evaluation per pass (the first at alpha = 0), its phase saying which point comes
    next: the per-row evaluation appears once in the program, and a search that ends at
    its first Newton step (the common case) evaluates twice.
    """
    dtype = snorm.dtype
    gtol = tolerance * snorm / scale
    zero = jnp.zeros((), dtype)
    too_small = snorm < MJ_MINVAL
    int32 = jnp.int32

    def newton_point(p: Point) -> jax.Array:
        return p.alpha - p.d0 / p.d1

    def converged(p: Point) -> jax.Array:
        return jnp.abs(p.d0) < gtol

    def outcome(s: _State, flag, alpha, improvement, result) -> _State:
        return s._replace(
            phase=jnp.where(flag, _DONE, s.phase).astype(jnp.int32),
            alpha=jnp.where(flag, alpha, s.alpha),
            improvement=jnp.where(flag, improvement, s.improvement),
            result=jnp.where(flag, result, s.result).astype(jnp.int32),
        )

    def after_one_sided(s: _State) -> _State:
        """The one-sided search goes on while the derivative keeps its sign; out of
        evaluations there, the search failed to bracket; else the bracket starts."""
        p1, count = s.p1, s.count
        more = (p1.d0 * s.direction_sign <= -gtol) & (count < ls_iterations)
        no_bracket = (~more) & (count >= ls_iterations)
        s = s._replace(phase=jnp.where(more, _ONE_SIDED, _NEXT).astype(int32))
        return outcome(s, no_bracket, p1.alpha, -p1.cost, LS_NO_BRACKET)

    def bracket_next(s: _State) -> _State:
        """The bracket's next midpoint; out of evaluations, the end with the better
        (negative) cost, or no step. (Decided inside the loop: the result leaves it as a
        buffer, so that XLA does not repeat the choice in every consumer's fusion.)"""
        p1, p2 = s.p1, s.p2
        out = s.count >= ls_iterations
        take1 = (p1.cost <= p2.cost) & (p1.cost < 0)
        take2 = (~take1) & (p2.cost <= p1.cost) & (p2.cost < 0)
        s = s._replace(phase=jnp.where(out, _DONE, _MID).astype(int32))
        return outcome(
            s,
            out,
            jnp.where(take1, p1.alpha, jnp.where(take2, p2.alpha, 0.0)),
            jnp.where(take1, -p1.cost, jnp.where(take2, -p2.cost, 0.0)),
            jnp.where(take1 | take2, LS_NO_CONVERGENCE, LS_NO_IMPROVEMENT),
        )

    def first(s: _State, p: Point) -> _State:
        done = too_small | (converged(p) & ((p.alpha == 0) | (p.cost < 0)))
        s = s._replace(
            p1=p,
            count=jnp.where(too_small, 0, 2).astype(int32),
            direction_sign=jnp.where(p.d0 < 0, 1.0, -1.0).astype(dtype),
        )
        s = after_one_sided(s)
        return outcome(
            s,
            done,
            jnp.where(too_small, zero, p.alpha),
            jnp.where(too_small, zero, -p.cost),
            jnp.where(
                too_small,
                LS_SEARCH_TOO_SMALL,
                jnp.where(p.alpha == 0, LS_NO_IMPROVEMENT_CONVERGED, LS_SUCCESS),
            ),
        )

    def one_sided(s: _State, p: Point) -> _State:
        s = after_one_sided(s._replace(p1=p, p2=s.p1, count=s.count + 1))
        return outcome(s, converged(p) & (p.cost < 0), p.alpha, -p.cost, LS_SUCCESS)

    def next_point(s: _State, p: Point) -> _State:
        return bracket_next(s._replace(p1next=p, p2next=s.p1, count=s.count + 1))

    def first_least(key, candidates) -> tuple[Point, jax.Array]:
        """The candidate of least finite ``key`` (the first of equals), and whether any: the
        choice made on the keys alone, then one gather of the chosen candidate's fields.
        (Not ``jnp.argmin``: under XLA's CPU backend at optimisation level 0 it chose wrongly
        inside the solver's loops, parting dm_control's hopper from MuJoCo at step 5.)"""
        index, least = jnp.zeros((), int32), key[0]
        for k in range(1, len(candidates)):
            take = key[k] < least
            index = jnp.where(take, k, index)
            least = jnp.where(take, key[k], least)
        stacked = jnp.stack([jnp.stack(c) for c in candidates])  # (candidate, field)
        return Point(*stacked[index]), jnp.isfinite(least)

    def move_end(p: Point, candidates) -> tuple[Point, jax.Array]:
        """updateBracket: move a bracket end to the candidate of least |derivative| among
        those whose derivative has the end's sign and a smaller magnitude (the first of
        equals: updateBracket's pass over the candidates in order)."""
        d0 = jnp.stack([c.d0 for c in candidates])
        same_side = ((p.d0 < 0) & (d0 < 0) & (p.d0 < d0)) | ((p.d0 > 0) & (d0 > 0) & (p.d0 > d0))
        cand, moved = first_least(jnp.where(same_side, jnp.abs(d0), jnp.inf), candidates)
        return _where_point(moved, cand, p), moved

    def midpoint(s: _State, pmid: Point) -> _State:
        count = s.count + 1
        candidates = (s.p1next, s.p2next, pmid)
        # the converged candidate with the lowest cost (the first of equals)
        costs = jnp.stack([c.cost for c in candidates])
        ok = jnp.stack([converged(c) for c in candidates])
        best, best_found = first_least(jnp.where(ok, costs, jnp.inf), candidates)
        p1, moved_1 = move_end(s.p1, candidates)
        p2, moved_2 = move_end(s.p2, candidates)
        stuck = (~best_found) & (~moved_1) & (~moved_2)
        go_on = (~best_found) & (~stuck)
        s = s._replace(
            phase=jnp.where(moved_1, _UPDATE_1, _UPDATE_2).astype(int32),
            p1=_where_point(go_on, p1, s.p1),
            p2=_where_point(go_on, p2, s.p2),
            count=count + jnp.where(go_on, moved_1.astype(int32) + moved_2.astype(int32), 0),
            update_2=moved_2,
        )
        # numerical accuracy reached without a converged candidate: use the midpoint
        s = outcome(
            s,
            stuck,
            pmid.alpha,
            -pmid.cost,
            jnp.where(pmid.cost < 0, LS_SUCCESS, LS_NO_IMPROVEMENT_NO_BRACKET),
        )
        return outcome(s, best_found, best.alpha, -best.cost, LS_SUCCESS)

    def update_1(s: _State, p: Point) -> _State:
        s = s._replace(p1next=p)
        second = s._replace(phase=jnp.asarray(_UPDATE_2, int32))
        return jax.tree.map(lambda a, b: jnp.where(s.update_2, a, b), second, bracket_next(s))

    def update_2(s: _State, p: Point) -> _State:
        return bracket_next(s._replace(p2next=p))

    def at_zero(s: _State, p: Point) -> _State:
        return s._replace(phase=jnp.asarray(_FIRST, int32), p1=p, p2=p, p1next=p, p2next=p)

    def cond(s: _State):
        return s.phase < _DONE

    def body(s: _State) -> _State:
        at = jnp.where(
            s.phase == _MID,
            0.5 * (s.p1.alpha + s.p2.alpha),
            jnp.where(s.phase == _UPDATE_2, newton_point(s.p2), newton_point(s.p1)),
        )
        p = evaluate_at(at)
        phases = (at_zero, first, one_sided, next_point, midpoint, update_1, update_2)
        steps = [step(s, p) for step in phases]

        def pick(*leaves):
            out = leaves[0]
            for k, leaf in enumerate(leaves[1:], start=1):
                out = jnp.where(s.phase == k, leaf, out)
            return out.astype(leaves[0].dtype)

        return jax.tree.map(pick, *steps)

    # the loop's first pass evaluates alpha = 0 (the Newton point of this placeholder: the
    # evaluation appears once in the program)
    zero_int = jnp.zeros((), int32)
    start = Point(zero, zero, zero, jnp.ones((), dtype))
    state = _State(
        phase=zero_int + _ZERO,
        p1=start,
        p2=start,
        p1next=start,
        p2next=start,
        count=zero_int,
        direction_sign=zero,
        update_2=jnp.asarray(False),
        alpha=zero,
        improvement=zero,
        result=zero_int + LS_SUCCESS,
    )
    s = lax.while_loop(cond, body, state)

    return SearchResult(s.alpha, s.improvement, s.count, s.result)
