"""The primal problem of MuJoCo's soft constraint model, as its primal solvers read it.

MuJoCo's forward dynamics solve, per time step, the convex problem ("Computation" chapter,
section "Constraint model"; Todorov, "Convex and analytically-invertible dynamics with
contacts and constraints", ICRA 2014, eq. 11)

    minimise over a:   1/2 (a - a0)' M (a - a0) + s(J a - aref),

where ``s`` is the sum of one convex piece per constraint row (or per elliptic cone),
each with the weight ``D = 1/R`` of the row's regulariser ``R``. This module holds the rows
record (:class:`SoftRows`) and MuJoCo's evaluation of those pieces at a point,
``mj_constraintUpdate_impl`` of ``engine_core_constraint.c``: the row states, the
constraint forces ``efc_force = -ds/djar``, the cost ``s`` and the second derivatives (the
``D`` of the quadratic rows and the Hessian blocks of the elliptic cones in their middle
zone) that both the Newton solver and the implicit derivatives use.

Every array has a fixed shape: rows absent this step (an empty contact slot) stay in the
record with ``active`` false and contribute nothing, so a model's rows compile once and
``vmap`` over states with different active sets.
"""

from __future__ import annotations

import math
import operator
from typing import NamedTuple, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .. import _config  # noqa: F401
from ..compiled.small import UNROLL_MAX, _sum_along
from ..tree._elementwise import cholesky_factor, cholesky_factor_solve

# Row kinds (what :attr:`SoftRows.kind` holds); :func:`kind_from_efc_type` maps MuJoCo's
# efc_type onto them.
EQUALITY = 0
FRICTION_LOSS = 1
ONE_SIDED = 2
ELLIPTIC = 3
#: Every row kind, in the order of their numbers.
ALL_KINDS = (EQUALITY, FRICTION_LOSS, ONE_SIDED, ELLIPTIC)

# Row states: MuJoCo's mjtConstraintState, same numbers (efc_state).
SATISFIED = 0
QUADRATIC = 1
LINEAR_NEG = 2
LINEAR_POS = 3
CONE = 4

#: MuJoCo's mjMINVAL (mjtNum is double): the floor of its divisions and convexity checks.
MJ_MINVAL = 1e-15

#: The largest contact dimension (mjContact.dim): normal, 2 tangents, spin, 2 rolling.
MAX_CONE_DIM = 6


#: Elements a single reduction reads at most: above about 4k, XLA's CPU backend hands a
#: reduction to a library fusion (YNNPACK), and a loop that holds one is not compiled as one
#: native loop (:mod:`jaxmbd.compiled.xla_flags`).
SUM_CHUNK = 2048
#: Chunks summed unrolled at most; more are summed by a loop over blocks of this many, so
#: that the program does not grow with the rows. Unrolled, each chunk's sum was a fusion
#: into which XLA copied the rows' whole computation: dm_control's quadruped (its terrain's
#: 2486 rows, nv 28: 1243 chunks of the Hessian's sum) compiled to 791k HLO instructions.
UNROLLED_CHUNKS = 32


def product_sum(product, factors: tuple, axis: int) -> jax.Array:
    """``product(*factors)`` (each factor one of its broadcast operands) summed over
    ``axis`` by reductions that each read at most :data:`SUM_CHUNK` elements (slices along
    ``axis``, each summed, then added in order): elementwise loops, not library calls, for
    the products of a step's rows. Past :data:`UNROLLED_CHUNKS` chunks, a ``fori_loop``
    over blocks of that many takes each block's slices of the factors and forms their
    product inside: one block's code in the program, and the product never whole in memory.
    The chunks are added in order either way (a block's padding rows are zeros, whose sums
    add exactly nothing)."""
    shape = jnp.broadcast_shapes(*(f.shape for f in factors))
    ndim = len(shape)
    axis = axis % ndim
    n = shape[axis]
    if n <= UNROLL_MAX:
        return _sum_along(product(*factors), axis - ndim)
    per = max(1, SUM_CHUNK // max(1, math.prod(shape) // n))
    if n <= per:
        return jnp.sum(product(*factors), axis)
    chunks = -(-n // per)

    def block_sum(total, parts, length):
        x = product(*parts)
        for start in range(0, length, per):
            part = jnp.sum(lax.slice_in_dim(x, start, min(start + per, length), axis=axis), axis)
            total = part if total is None else total + part
        return total

    if chunks <= UNROLLED_CHUNKS:
        return block_sum(None, factors, n)
    block = UNROLLED_CHUNKS * per
    blocks = -(-n // block)

    # each factor padded with zero rows along the axis to whole blocks (a factor of length
    # 1 there is broadcast and kept)
    def along(f):
        """The factor's own axis index for ``axis``, or None where it is broadcast."""
        f_axis = axis - ndim + f.ndim
        return None if f_axis < 0 or f.shape[f_axis] == 1 else f_axis

    padded = []
    for f in factors:
        if along(f) is None:
            padded.append(f)
            continue
        widths = [(0, 0)] * f.ndim
        widths[along(f)] = (0, blocks * block - n)
        padded.append(jnp.pad(f, widths))

    def body(k, total):
        parts = [
            f if along(f) is None else lax.dynamic_slice_in_dim(f, k * block, block, along(f))
            for f in padded
        ]
        return block_sum(total, parts, block)

    # from zeros (adding the first block's sum to them is exact): one copy of the block's code
    zeros = jnp.zeros(shape[:axis] + shape[axis + 1 :], jnp.result_type(*factors))
    return lax.fori_loop(0, blocks, body, zeros)


def times(A: jax.Array, x: jax.Array) -> jax.Array:
    """``A x`` for ``A`` (m, n), ``x`` (n,), as a broadcast product and a sum: on the CPU a
    ``dot`` keeps XLA from compiling a time loop as one native loop
    (:mod:`jaxmbd.compiled.xla_flags`), and these products are far too small to gain from
    one."""
    return product_sum(operator.mul, (A, x[None, :]), -1)


def transposed_times(A: jax.Array, y: jax.Array) -> jax.Array:
    """``A' y`` for ``A`` (m, n), ``y`` (m,) (elementwise, as :func:`times`)."""
    return product_sum(operator.mul, (A, y[:, None]), -2)


def inner(x: jax.Array, y: jax.Array) -> jax.Array:
    """``x' y`` of two vectors (elementwise, as :func:`times`)."""
    return product_sum(operator.mul, (x, y), -1)


#: The solver's factors (of M and of Newton's Hessian, three or more a step) are unrolled
#: at trace time up to this size, larger ones a loop over columns. Jitted 1000-step runs
#: under random controls, one process each, twice: dm_control's cheetah (nv 9) compiled in
#: 4.5 / 4.2 s unrolled, 3.9 / 3.3 s as loops (HLO 30.6k -> 27.1k lines), 24.3k / 24.8k
#: against 24.7k / 23.2k steps/s; gymnasium's pusher (nv 11) 11.0 / 10.4 s against
#: 10.0 / 10.5 s, 5.2k / 5.1k steps/s either way.
UNROLLED_FACTOR_MAX = 4


def spd_factor(A: jax.Array):
    """The Cholesky factor of a symmetric positive definite ``A`` (n, n), elementwise
    (:func:`jaxmbd.tree._elementwise.cholesky_factor`; no LAPACK call: see :func:`times`)."""
    return cholesky_factor(A, unrolled_max=UNROLLED_FACTOR_MAX)


def spd_solve(A: jax.Array, b: jax.Array) -> jax.Array:
    """``A^-1 b`` for a symmetric positive definite ``A`` (n, n) (:func:`spd_factor`)."""
    return cholesky_factor_solve(spd_factor(A), b)


def kind_from_efc_type(efc_type):
    """Row kinds from MuJoCo's ``efc_type`` (mjtConstraint values 0..7).

    mjCNSTR_EQUALITY (0) -> EQUALITY; mjCNSTR_FRICTION_DOF, _FRICTION_TENDON (1, 2) ->
    FRICTION_LOSS; mjCNSTR_LIMIT_JOINT, _LIMIT_TENDON, _CONTACT_FRICTIONLESS,
    _CONTACT_PYRAMIDAL (3..6) -> ONE_SIDED; mjCNSTR_CONTACT_ELLIPTIC (7) -> ELLIPTIC.
    """
    efc_type = jnp.asarray(efc_type)
    kind = jnp.where(
        efc_type == 0,
        EQUALITY,
        jnp.where(efc_type <= 2, FRICTION_LOSS, jnp.where(efc_type == 7, ELLIPTIC, ONE_SIDED)),
    )
    return kind.astype(jnp.int32)


@final
class SoftRows(eqx.Module):
    """One time step's constraint rows (MuJoCo's ``efc_*`` arrays and its contacts' cones).

    Shapes: ``nefc`` rows, ``nv`` degrees of freedom, ``ncone`` elliptic-cone slots. All
    fields but ``kinds`` are arrays: a model's rows keep their kinds and slots from step to
    step, and one compiled solve serves every problem of the same sizes and kinds. The rows
    may come in any order (MuJoCo's efc order is not required); a cone's rows need not be
    adjacent.

    Attributes:
        J: ``(nefc, nv)`` constraint Jacobian (``efc_J``).
        aref: ``(nefc,)`` reference acceleration (``efc_aref``).
        R: ``(nefc,)`` regulariser (``efc_R``); the row weight is ``D = 1/R`` (``efc_D``).
            Friction-loss rows also use it for the half-width ``R*floss`` of their
            quadratic zone. Must be positive on active rows (any value on inactive ones).
        floss: ``(nefc,)`` friction loss (``efc_frictionloss``); read on FRICTION_LOSS rows.
        active: ``(nefc,)`` bool; inactive rows contribute no cost and no force. An
            elliptic cone is active when the row of its normal is.
        kind: ``(nefc,)`` int, one of EQUALITY, FRICTION_LOSS, ONE_SIDED (joint and tendon
            limits, frictionless and pyramidal contact rows), ELLIPTIC
            (:func:`kind_from_efc_type`).
        cone_rows: ``(ncone, 6)`` int, per elliptic cone the rows of its normal (column 0)
            and of its ``dim - 1`` friction directions (columns 1..dim-1, MuJoCo's order:
            two tangents, spin, two rolling), ``-1`` in the unused columns. MuJoCo lays
            them out as ``efc_address + 0 .. dim-1``. A row of kind ELLIPTIC contributes
            only through its cone.
        cone_mu: ``(ncone,)`` the regularised cone's friction ``mjContact.mu``
            (``friction[0] * sqrt(R[1]/R[0])`` of ``mj_makeImpedance``, i.e.
            ``friction[0] / sqrt(impratio)``).
        cone_friction: ``(ncone, 5)`` the contact's friction coefficients
            ``mjContact.friction`` (tangent1, tangent2, spin, roll1, roll2); cone direction
            ``j >= 1`` is scaled by ``cone_friction[:, j-1]``.
        kinds: the kinds that ``kind`` may hold (static; default all): the cost, force and
            line-search code of the others is left out of the program (a model without
            friction loss compiles none of its zones). A row of a kind not listed would
            contribute nothing.
    """

    J: jax.Array
    aref: jax.Array
    R: jax.Array
    floss: jax.Array
    active: jax.Array
    kind: jax.Array
    cone_rows: jax.Array
    cone_mu: jax.Array
    cone_friction: jax.Array
    kinds: tuple[int, ...] = eqx.field(static=True, default=ALL_KINDS)

    def __check_init__(self):
        if not set(self.kinds) <= set(ALL_KINDS) or tuple(sorted(set(self.kinds))) != self.kinds:
            raise ValueError(
                f"SoftRows.kinds must be a sorted tuple of distinct row kinds from {ALL_KINDS}, "
                f"not {self.kinds!r}"
            )
        nefc = self.J.shape[-2]
        for name in ("aref", "R", "floss", "active", "kind"):
            if getattr(self, name).shape[-1:] != (nefc,):
                raise ValueError(f"SoftRows.{name} must have shape (nefc,) = ({nefc},)")
        ncone = self.cone_rows.shape[-2]
        if self.cone_rows.shape[-1] != MAX_CONE_DIM:
            raise ValueError("SoftRows.cone_rows must have shape (ncone, 6)")
        if self.cone_mu.shape[-1:] != (ncone,) or self.cone_friction.shape[-1] != 5:
            raise ValueError("SoftRows.cone_mu is (ncone,), SoftRows.cone_friction (ncone, 5)")

    @property
    def nefc(self) -> int:
        return self.J.shape[-2]

    @property
    def ncone(self) -> int:
        return self.cone_rows.shape[-2]


def no_cones(dtype=jnp.float64) -> dict[str, jax.Array]:
    """Empty cone fields: ``SoftRows(..., **no_cones())`` for rows without elliptic cones."""
    return dict(
        cone_rows=jnp.zeros((0, MAX_CONE_DIM), jnp.int32),
        cone_mu=jnp.zeros((0,), dtype),
        cone_friction=jnp.zeros((0, 5), dtype),
    )


class ConeLayout(NamedTuple):
    """Gather/scatter indices between rows and elliptic cones (from ``cone_rows``)."""

    gather: jax.Array  # (ncone, 6) row index, 0 in unused slots (masked)
    scatter: jax.Array  # (ncone, 6) row index, nefc in unused slots (dropped)
    used: jax.Array  # (ncone, 6) bool: slot j < dim
    active: jax.Array  # (ncone,) bool
    scale: jax.Array  # (ncone, 6): mu, friction[0..dim-2], 0 in unused slots


def cone_layout(rows: SoftRows) -> ConeLayout:
    used = rows.cone_rows >= 0
    gather = jnp.where(used, rows.cone_rows, 0)
    scatter = jnp.where(used, rows.cone_rows, rows.nefc)
    active = rows.active[gather[:, 0]] & used[:, 0]
    scale = jnp.concatenate([rows.cone_mu[:, None], rows.cone_friction], axis=1)
    scale = jnp.where(used, scale, 0.0)
    return ConeLayout(gather, scatter, used, active, scale)


def to_cones(layout: ConeLayout, row_values: jax.Array) -> jax.Array:
    """(nefc,) row values -> (ncone, 6), zero in unused slots."""
    return jnp.where(layout.used, row_values[layout.gather], 0)


def from_cones(layout: ConeLayout, base: jax.Array, cone_values: jax.Array) -> jax.Array:
    """Write (ncone, 6) cone values into the rows of ``base`` (unused slots dropped)."""
    return base.at[layout.scatter.reshape(-1)].set(cone_values.reshape(-1), mode="drop")


def row_weight(rows: SoftRows) -> jax.Array:
    """D = 1/R on active rows, 0 on inactive ones (``mj_makeImpedance``: efc_D = 1/efc_R)."""
    safe_R = jnp.where(rows.active, rows.R, 1.0)  # an inactive R may be 0: keep 1/R finite
    return jnp.where(rows.active, 1.0 / safe_R, 0.0)


def safe_sqrt(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """sqrt(x) for x > 0, else 0, without an infinite derivative at 0; and x > 0."""
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0), positive


class ConstraintUpdate(NamedTuple):
    """MuJoCo's ``mj_constraintUpdate_impl`` at one point ``jar = J a - aref``."""

    force: jax.Array  # (nefc,) efc_force
    state: jax.Array  # (nefc,) efc_state (mjtConstraintState)
    cost: jax.Array  # () s(jar), the constraint part of the cost
    D_quadratic: jax.Array  # (nefc,) D on QUADRATIC rows, 0 elsewhere (Newton's Hessian)
    cone_hessian: jax.Array  # (ncone, 6, 6) d2s/djar2 of middle-zone cones, else 0


def constraint_update(rows: SoftRows, jar: jax.Array) -> ConstraintUpdate:
    """Row states, forces, cost and cone Hessians at ``jar = J a - aref``.

    Exactly ``mj_constraintUpdate_impl`` (engine_core_constraint.c), row by row:

    * equality: always quadratic, force ``-D jar``, cost ``D jar^2 / 2``;
    * friction loss (``f = floss``): linear negative when ``jar <= -R f`` (force ``f``,
      cost ``-R f^2/2 - f jar``), linear positive when ``jar >= R f`` (force ``-f``, cost
      ``-R f^2/2 + f jar``), quadratic in between (a Huber function of jar);
    * one-sided (limits, frictionless and pyramidal contact): satisfied (no force) when
      ``jar >= 0``, else quadratic;
    * elliptic cone, in the cone's circular coordinates ``U = diag(mu, friction) jar``,
      ``N = U[0]``, ``T = |U[1:]|``: top zone (satisfied) when ``N >= mu T`` (or ``T = 0``,
      ``N >= 0``), bottom zone (all rows quadratic) when ``mu N + T <= 0``, else the middle
      zone with cost ``Dm (N - mu T)^2 / 2``, ``Dm = D[0] / (mu^2 (1 + mu^2))``, state
      CONE and the Hessian block MuJoCo stores in ``contact.H``.

    Written with ``jnp.where`` and guarded divisions, so that its derivatives (used by
    :mod:`~jaxmbd.soft_constraints.implicit`) are finite where a row switches state.
    """
    D = row_weight(rows)
    kind = rows.kind
    active = rows.active

    # equality and the quadratic zones of the others share force -D jar
    quadratic_force = -D * jar
    quadratic_cost = 0.5 * D * jar * jar

    conditions, forces, states, costs = [], [], [], []
    if EQUALITY in rows.kinds:
        conditions.append(kind == EQUALITY)
        forces.append(quadratic_force)
        states.append(QUADRATIC)
        costs.append(quadratic_cost)
    if FRICTION_LOSS in rows.kinds:
        # friction loss (Huber): bounds at +-R*floss
        floss = jnp.where(active, rows.floss, 0.0)
        bound = jnp.where(active, rows.R, 1.0) * floss
        neg = jar <= -bound
        pos = (~neg) & (jar >= bound)
        conditions.append(kind == FRICTION_LOSS)
        forces.append(jnp.where(neg, floss, jnp.where(pos, -floss, quadratic_force)))
        states.append(jnp.where(neg, LINEAR_NEG, jnp.where(pos, LINEAR_POS, QUADRATIC)))
        costs.append(
            jnp.where(
                neg,
                -0.5 * bound * floss - floss * jar,
                jnp.where(pos, -0.5 * bound * floss + floss * jar, quadratic_cost),
            )
        )
    if ONE_SIDED in rows.kinds:
        # one-sided: satisfied at jar >= 0
        satisfied = jar >= 0
        conditions.append(kind == ONE_SIDED)
        forces.append(jnp.where(satisfied, 0.0, quadratic_force))
        states.append(jnp.where(satisfied, SATISFIED, QUADRATIC))
        costs.append(jnp.where(satisfied, 0.0, quadratic_cost))

    zero = jnp.zeros_like(jar)
    force = jnp.select(conditions, forces, 0.0) if conditions else zero
    state = jnp.select(conditions, states, SATISFIED) if conditions else zero.astype(jnp.int32)
    row_cost = jnp.select(conditions, costs, 0.0) if conditions else zero
    force = jnp.where(active, force, 0.0)
    state = jnp.where(active, state, SATISFIED).astype(jnp.int32)
    row_cost = jnp.where(active, row_cost, 0.0)
    D_quadratic = jnp.where(state == QUADRATIC, D, 0.0)
    cost = jnp.sum(row_cost)

    # elliptic cones
    ncone = rows.ncone
    cone_hessian = jnp.zeros((ncone, MAX_CONE_DIM, MAX_CONE_DIM), jar.dtype)
    if ncone:
        layout = cone_layout(rows)
        s = layout.scale
        jar_c = to_cones(layout, jar)
        D_c = to_cones(layout, D)
        U = jar_c * s
        N = U[:, 0]
        mu = rows.cone_mu
        T, has_T = safe_sqrt(jnp.sum(U[:, 1:] ** 2, axis=1))
        top = (N >= mu * T) | ((~has_T) & (N >= 0)) | ~layout.active
        bottom = (~top) & ((mu * N + T <= 0) | ((~has_T) & (N < 0)))
        middle = (~top) & (~bottom)

        # the middle zone's formulas, guarded so that other zones see finite values
        safe_mu = jnp.where(middle, mu, 1.0)
        safe_T = jnp.where(middle, T, 1.0)
        Dm = D_c[:, 0] / (safe_mu * safe_mu * (1 + safe_mu * safe_mu))
        NmT = N - safe_mu * safe_T
        f0 = -Dm * NmT * safe_mu
        middle_force = jnp.concatenate(
            [f0[:, None], -f0[:, None] / safe_T[:, None] * U[:, 1:] * s[:, 1:]], axis=1
        )
        cone_force = jnp.where(
            middle[:, None], middle_force, jnp.where(bottom[:, None], -D_c * jar_c, 0.0)
        )
        cone_cost = jnp.where(
            middle,
            0.5 * Dm * NmT * NmT,
            jnp.where(bottom, jnp.sum(0.5 * D_c * jar_c * jar_c, axis=1), 0.0),
        )
        cone_state = jnp.where(middle, CONE, jnp.where(bottom, QUADRATIC, SATISFIED))

        # contact.H: first row (1, -mu/T U), block mu N/T^3 U U' + (mu^2 - mu N/T) I, both
        # sides scaled by diag(mu, friction), times Dm (mj_constraintUpdate_impl)
        first = jnp.concatenate(
            [jnp.ones_like(N)[:, None], (-safe_mu / safe_T)[:, None] * U[:, 1:]], axis=1
        )
        block = (safe_mu * N / safe_T**3)[:, None, None] * (U[:, 1:, None] * U[:, None, 1:])
        block = block + (safe_mu * safe_mu - safe_mu * N / safe_T)[:, None, None] * jnp.eye(
            MAX_CONE_DIM - 1
        )
        H = jnp.zeros((ncone, MAX_CONE_DIM, MAX_CONE_DIM), jar.dtype)
        H = H.at[:, 0, :].set(first).at[:, 1:, 0].set(first[:, 1:]).at[:, 1:, 1:].set(block)
        H = Dm[:, None, None] * s[:, :, None] * H * s[:, None, :]
        cone_hessian = jnp.where(middle[:, None, None], H, 0.0)

        on = layout.used & layout.active[:, None]
        force = from_cones(layout, force, jnp.where(on, cone_force, 0.0))
        state = from_cones(layout, state, jnp.where(on, cone_state[:, None], SATISFIED))
        D_quadratic = from_cones(layout, D_quadratic, jnp.where(on & bottom[:, None], D_c, 0.0))
        cost = cost + jnp.sum(jnp.where(layout.active, cone_cost, 0.0))

    return ConstraintUpdate(force, state, cost, D_quadratic, cone_hessian)


def quadratic_rows_hessian(J: jax.Array, D_quadratic: jax.Array) -> jax.Array:
    """``J' diag(D_quadratic) J``: the quadratic rows' part of Newton's Hessian."""
    DJ = J * D_quadratic[:, None]
    return product_sum(operator.mul, (J[:, :, None], DJ[:, None, :]), 0)


def hessian(M: jax.Array, rows: SoftRows, update: ConstraintUpdate) -> jax.Array:
    """Newton's Hessian ``M + J' D_quadratic J + sum over middle-zone cones Jc' Hc Jc``.

    ``MakeHessian`` and ``HessianCone`` of engine_solver.c (MuJoCo adds the cone blocks by
    rank-1 updates of the Cholesky factor; the matrix is the same).
    """
    J = rows.J
    H = M + quadratic_rows_hessian(J, update.D_quadratic)
    if rows.ncone:
        layout = cone_layout(rows)
        Jc = jnp.where(layout.used[:, :, None], J[layout.gather], 0.0)  # (ncone, 6, nv)
        H = H + jnp.einsum("cin,cij,cjm->nm", Jc, update.cone_hessian, Jc)
    return H
