"""The acceptance test shared by every Newton loop of jaxmbd: how large the unknowns are
(:class:`Scale`), the scaled step test (:class:`StepTest`), the scaled residual test, and
the decision to accept an iterate or keep a matrix (:func:`converged`)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401

#: Round-off resolution of an unknown, in units of machine epsilon times its magnitude.
ROUNDOFF = 32.0
_EPS = float(jnp.finfo(jnp.float64).eps)


class Scale(NamedTuple):
    """How large the unknowns are (``magnitude`` w > 0) and how finely floating point can
    resolve them (``resolution`` e >= 0), both in the unknowns' own units, per unknown.

    The Newton tests are relative: a step passes when |delta_j| <= tol w_j + e_j for every
    j (paper eq. 46 in a scaled norm), the residual when |F_i| <= sum_j |J_ij| (tol w_j + e_j)
    for every row i, i.e. F is no larger than what that perturbation of x would cause. Each
    row is compared with its own terms, so accelerations, multipliers, forces and
    constraint rows never mix units, and ``tol`` is a relative accuracy that can be asked
    for down to the round-off floor e."""

    magnitude: jax.Array
    resolution: jax.Array


def default_scale(x) -> Scale:
    """Unknowns of unknown units: one magnitude max(||x||_inf, 1) for all of them."""
    leaves = [jnp.max(jnp.abs(leaf)) for leaf in jax.tree_util.tree_leaves(x) if leaf.size]
    m = jnp.maximum(jnp.max(jnp.stack(leaves)) if leaves else 1.0, 1.0)
    return Scale(m, ROUNDOFF * _EPS * m)


def group_scale(x, groups, floors) -> Scale:
    """Magnitudes per group of unknowns: w_j = max(max_{i in g(j)} |x_i|, floor_g), the
    resolution ROUNDOFF eps w_j. ``groups``: a static integer array (group of each unknown),
    ``floors``: the smallest magnitude of each group (e.g. |g| for accelerations)."""
    groups = jnp.asarray(groups)
    size = len(floors)
    largest = jax.ops.segment_max(jnp.abs(x), groups, num_segments=size)
    w = jnp.maximum(largest, jnp.asarray(floors, x.dtype))[groups]
    return Scale(w, ROUNDOFF * _EPS * w)


def allowed_step(scale: Scale, tol, shape):
    """(w, tol w + e) broadcast to ``shape``: the unknowns' magnitudes and the largest
    correction the step test accepts for each."""
    w = jnp.broadcast_to(scale.magnitude, shape)
    return w, tol * w + jnp.broadcast_to(scale.resolution, shape)


#: How far above the round-off resolution e an exact Newton iteration may stop (see
#: :class:`StepTest`): a correction computed from a residual that holds only round-off is
#: that round-off times the matrix's condition, so on a badly conditioned matrix exact
#: Newton corrections stagnate above e. Where they demonstrably have (two in a row, the
#: second not below half the first), the solve stops there, but never at a correction above
#: tol w + FLOOR_GAIN_MAX e: with ROUNDOFF = 32, 7e-11 of the unknowns' magnitudes (or of
#: what the state resolves of them) beyond tol. The former floor e / rcond, applied to
#: every correction, reached 7e-3 at rcond = RCOND_MIN.
FLOOR_GAIN_MAX = 1e4


class StepTest(NamedTuple):
    """A Newton correction delta measured against the scaled tolerances (:class:`Scale`:
    magnitudes w, round-off resolutions e), each the max over the unknowns j:

    * ``ratio``: |delta_j| / (tol w_j + e_j) (<= 1 passes the step test: paper eq. 46 in a
      scaled norm);
    * ``attainable``: |delta_j| / (tol w_j + FLOOR_GAIN_MAX e_j): where exact Newton
      corrections have stopped shrinking they are round-off, and the solve is at its
      attainable accuracy if this passes; never used otherwise;
    * ``floor_ratio``: |delta_j| / e_j (<= 1: the correction is round-off);
    * ``relative``: |delta_j| / w_j (the reported step norm).

    tol w + e, or after stagnation tol w + FLOOR_GAIN_MAX e, is the fixed bound on what a
    Newton loop of jaxmbd accepts; the matrix's condition estimate does not widen it. A
    solve whose corrections stay above it ends with MAX_ITERATIONS, never with SUCCESS at
    an inaccurate root.
    """

    ratio: jax.Array
    attainable: jax.Array
    floor_ratio: jax.Array
    relative: jax.Array


def step_test(delta, scale: Scale, tol) -> StepTest:
    """:class:`StepTest` of ``delta`` (shared by every Newton loop of jaxmbd)."""
    w, allowed = allowed_step(scale, tol, delta.shape)
    e = jnp.broadcast_to(scale.resolution, delta.shape)
    denominators = jnp.stack([allowed, tol * w + FLOOR_GAIN_MAX * e, e, w])
    return StepTest(*jnp.max(jnp.abs(delta)[None] / denominators, axis=1))


def residual_test(F, row_tolerance):
    """max_i |F_i| / row_tolerance_i (<= 1 passes the residual test; the row tolerances are
    (|J| (tol w + e))_i, what a perturbation of x within tolerance would cause); NaN-safe
    (NaN -> inf). Shared by every Newton loop of jaxmbd."""
    r = jnp.max(jnp.abs(F) / row_tolerance)
    return jnp.where(jnp.isnan(r), jnp.inf, r)


def converged(test: StepTest, after: StepTest, fresh, trusted, residual, least_squares, *,
               max_rate: float):  # fmt: skip
    """Whether x (+) delta is the root, from the correction ``test`` taken at x and the
    same matrix's correction ``after`` at the new iterate (the rules are listed at
    :func:`jaxmbd.newton._iterate.iterate`), and whether that matrix still contracts well
    enough to be kept; theta is their ratio."""
    theta = after.ratio / test.ratio
    # a fresh matrix: |delta| passes, or the next correction does (error to first order);
    # a kept one: |delta_next| / (1 - theta) bounds the error (Hairer & Wanner IV.8), or
    # the next correction is round-off while the iteration still contracts
    kept_bound = jnp.where(theta <= max_rate, after.ratio / (1.0 - theta), jnp.inf)
    at_floor = (after.floor_ratio <= 1.0) & (theta < 1.0)
    step_ok = jnp.where(fresh, (test.ratio <= 1.0) | (after.ratio <= 1.0), kept_bound <= 1.0)
    step_ok = step_ok | at_floor
    # a correction followed by one no smaller than half of it, from an exact matrix or one
    # that has contracted well in this solve: both are round-off, and the solve is at its
    # attainable accuracy if they pass the capped floor
    stagnated = trusted & (theta >= 0.5) & (test.attainable <= 1.0) & (after.attainable <= 1.0)
    step_ok = step_ok | stagnated
    # a least-squares step-over leaves the part of F outside the singular matrix's range:
    # there (only) the residual test is waived, and the caller verifies that step
    residual_ok = (residual <= 1.0) | (least_squares & (test.ratio <= 1.0))
    keep = (theta <= max_rate) | at_floor
    return step_ok & residual_ok, keep, theta
