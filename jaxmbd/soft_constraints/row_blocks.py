"""The primal solver's operations on its rows: on all rows at once (:class:`AllRows`), or on
the active rows gathered in front and taken block by block, the blocks that hold any of them
only (:class:`ActiveRowBlocks`).

A robot's step has few active rows among its row slots (dm_control's humanoid lying on the
floor: 37 of 424), and the solver's loops on those alone run several times faster than on
all of them. Gathered into one fixed number of slots, they would need the solve on all
rows beside them for the steps with more active rows: two copies of the solver in the
program, each a large native loop for XLA to compile (the humanoid's 1000-step run compiles
in 14 s with both, 8 s with blocks). Blocks keep one copy: each operation on the rows
(MuJoCo's loops over ``efc`` rows in ``mj_solPrimal``: ``J v``, ``J' f``,
``mj_constraintUpdate_impl``, ``MakeHessian``, ``PrimalPrepare``, ``PrimalEval``) is a loop
over the blocks in use, with one block's code in the program, and a step with more active
rows takes more passes.

Inactive rows contribute nothing to any of these quantities, so the blocks give the solve on
all rows up to the order of the sums; a step whose active rows fit in one block sums them
as the solve on all rows would after the same gather.
"""

from __future__ import annotations

import abc
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .. import _config  # noqa: F401
from ..compiled.batching import while_loop
from ..compiled.flagged import kth_set
from . import line_search
from .problem import (
    ConstraintUpdate,
    SoftRows,
    constraint_update,
    hessian,
    quadratic_rows_hessian,
    times,
    transposed_times,
)


class RowOperations(eqx.Module):
    """What the primal solver computes from its rows (:mod:`.solver`)."""

    rows: eqx.AbstractVar[SoftRows]

    @abc.abstractmethod
    def times(self, v: jax.Array) -> jax.Array:
        """``J v`` (one value per row)."""

    @abc.abstractmethod
    def transposed_times(self, y: jax.Array) -> jax.Array:
        """``J' y`` for ``y`` one value per row."""

    @abc.abstractmethod
    def update(self, jar: jax.Array) -> ConstraintUpdate:
        """:func:`~.problem.constraint_update` at ``jar = J a - aref``."""

    @abc.abstractmethod
    def hessian(self, M: jax.Array, update: ConstraintUpdate) -> jax.Array:
        """Newton's Hessian (:func:`~.problem.hessian`)."""

    @abc.abstractmethod
    def prepare(self, Ma, qfrc_smooth, search, Mv, Jaref, Jv) -> line_search.Direction:
        """The cost's polynomials along ``search`` (:func:`~.line_search.prepare`)."""

    @abc.abstractmethod
    def evaluate(self, direction: line_search.Direction, alpha: jax.Array) -> line_search.Point:
        """The shifted cost at ``alpha`` along ``direction`` (:func:`~.line_search.evaluate`)."""


@final
class AllRows(RowOperations):
    """Every row at once, in the rows' own order (rows of elliptic cones included)."""

    rows: SoftRows

    def times(self, v):
        return times(self.rows.J, v)

    def transposed_times(self, y):
        return transposed_times(self.rows.J, y)

    def update(self, jar):
        return constraint_update(self.rows, jar)

    def hessian(self, M, update):
        return hessian(M, self.rows, update)

    def prepare(self, Ma, qfrc_smooth, search, Mv, Jaref, Jv):
        return line_search.prepare(self.rows, Ma, qfrc_smooth, search, Mv, Jaref, Jv)

    def evaluate(self, direction, alpha):
        return line_search.evaluate(self.rows, direction, alpha)


@final
class ActiveRowBlocks(RowOperations):
    """The active rows first, in their order, then inactive rows with ``J = 0``, in blocks
    of ``size`` rows; each operation loops over the ``used`` blocks that hold active rows.
    Built by :func:`active_row_blocks`. Rows without elliptic cones."""

    rows: SoftRows
    used: jax.Array
    size: int = eqx.field(static=True)

    def _block(self, start) -> SoftRows:
        rows = self.rows

        def take(x):
            return lax.dynamic_slice_in_dim(x, start, self.size, axis=0)

        return SoftRows(
            J=take(rows.J),
            aref=take(rows.aref),
            R=take(rows.R),
            floss=take(rows.floss),
            active=take(rows.active),
            kind=take(rows.kind),
            cone_rows=rows.cone_rows,
            cone_mu=rows.cone_mu,
            cone_friction=rows.cone_friction,
            kinds=rows.kinds,
        )

    def _over_blocks(self, fn, per_row: tuple, sums):
        """``fn(block, slices, sums) -> (row values, sums)`` over the used blocks in turn
        (``slices``: each array of ``per_row`` cut to the block's rows, along axis 0), the
        row values written into arrays over all slots (zero in the unused blocks); returns
        (those arrays, the sums after the last block)."""
        nefc = self.rows.nefc

        def cut(start):
            return tuple(lax.dynamic_slice_in_dim(x, start, self.size, axis=0) for x in per_row)

        shapes, _ = jax.eval_shape(fn, self._block(0), cut(0), sums)
        values = jax.tree.map(lambda s: jnp.zeros((nefc, *s.shape[1:]), s.dtype), shapes)

        def body(carry):
            k, values, sums = carry
            start = k * self.size
            out, sums = fn(self._block(start), cut(start), sums)
            values = jax.tree.map(
                lambda whole, part: lax.dynamic_update_slice_in_dim(whole, part, start, 0),
                values,
                out,
            )
            return k + 1, values, sums

        start = (jnp.zeros((), jnp.int32), values, sums)
        _, values, sums = while_loop(
            lambda carry: carry[0] < self.used, body, start, like=(self, per_row)
        )
        return values, sums

    def times(self, v):
        values, _ = self._over_blocks(lambda block, _, sums: (times(block.J, v), sums), (), ())
        return values

    def transposed_times(self, y):
        def part(block, parts, total):
            (y_block,) = parts
            return (), total + transposed_times(block.J, y_block)

        _, total = self._over_blocks(part, (y,), jnp.zeros(self.rows.J.shape[-1], y.dtype))
        return total

    def update(self, jar):
        def part(block, parts, cost):
            (jar_block,) = parts
            u = constraint_update(block, jar_block)
            return (u.force, u.state, u.D_quadratic), cost + u.cost

        zero = jnp.zeros((), jar.dtype)
        (force, state, D_quadratic), cost = self._over_blocks(part, (jar,), zero)
        return ConstraintUpdate(force, state, cost, D_quadratic, jnp.zeros((0, 6, 6), jar.dtype))

    def hessian(self, M, update):
        def part(block, parts, total):
            (D_quadratic,) = parts
            return (), total + quadratic_rows_hessian(block.J, D_quadratic)

        _, total = self._over_blocks(part, (update.D_quadratic,), jnp.zeros_like(M))
        return M + total

    def prepare(self, Ma, qfrc_smooth, search, Mv, Jaref, Jv):
        def part(block, parts, sums):
            Jaref_block, Jv_block = parts
            return line_search.row_quadratics(block, Jaref_block, Jv_block).T, sums

        quad, _ = self._over_blocks(part, (Jaref, Jv), ())
        gauss1, gauss2 = line_search.gauss_polynomial(Ma, qfrc_smooth, search, Mv)
        dtype = Jaref.dtype
        return line_search.Direction(
            gauss1=gauss1,
            gauss2=gauss2,
            start=Jaref,
            slope=Jv,
            quad=quad.T,
            cone_quad=jnp.zeros((3, 0), dtype),
            cone_uv=jnp.zeros((5, 0), dtype),
            cone_Dm=jnp.zeros((0,), dtype),
        )

    def evaluate(self, direction, alpha):
        def part(block, parts, terms):
            start, slope, quad = parts
            block_direction = direction._replace(start=start, slope=slope, quad=quad.T)
            return (), line_search.add_row_terms(block, block_direction, alpha, terms)

        per_row = (direction.start, direction.slope, direction.quad.T)
        _, terms = self._over_blocks(part, per_row, line_search.no_row_terms(direction))
        return line_search.point(alpha, terms)


def active_row_blocks(rows: SoftRows, size: int) -> ActiveRowBlocks:
    """``rows`` (without elliptic cones) with their active rows gathered in front, in their
    order, padded with inactive rows to whole blocks of ``size`` rows. A gather (the first
    row whose running count of active rows reaches k), no scatter or sort: the solver's
    loops stay loops that XLA's CPU backend compiles natively."""
    if rows.ncone:
        raise ValueError("active_row_blocks: rows with elliptic cones are solved on all rows")
    slots = -(-rows.nefc // size) * size
    count = jnp.cumsum(rows.active.astype(jnp.int32))
    index = kth_set(count, jnp.arange(1, slots + 1, dtype=jnp.int32))
    used = jnp.arange(slots) < count[-1]
    gathered = SoftRows(
        J=jnp.where(used[:, None], rows.J[index], 0.0),
        aref=jnp.where(used, rows.aref[index], 0.0),
        R=jnp.where(used, rows.R[index], 1.0),
        floss=jnp.where(used, rows.floss[index], 0.0),
        active=used,
        kind=rows.kind[index],
        cone_rows=rows.cone_rows,
        cone_mu=rows.cone_mu,
        cone_friction=rows.cone_friction,
        kinds=rows.kinds,
    )
    return ActiveRowBlocks(rows=gathered, used=(count[-1] + size - 1) // size, size=size)
