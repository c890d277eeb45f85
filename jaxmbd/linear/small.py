"""Dense LU, solves and inverse with partial pivoting for small systems in elementwise XLA
operations only: no LAPACK custom call, no ``dot``, no scatter, no sort.

Why: on the CPU, XLA runs a ``while`` loop (the ``lax.scan`` over time steps, a Newton loop)
as one compiled native loop instead of a sequence of runtime "thunks" when its body holds
none of those instructions and accesses few bytes (XLA's ``SmallWhileLoopHoistingPass``;
the byte threshold is raised by ``xla_cpu_small_while_loop_byte_threshold``, which
:mod:`jaxmbd.compiled.xla_flags` sets). A LAPACK getrf or trsm is a custom call, and a ``dot`` is
emitted as a YNNPACK custom fusion: a loop around either is never hoisted. With these
kernels in the Newton solve a whole time step becomes one native loop
(``benchmarks/small_solve.py``: the double pendulum's gen_alpha step several times
faster on a 2-core CPU).

Each routine is one ``fori_loop`` over the pivots whose step updates the whole (fixed-shape)
array under masks: a small program that compiles in a fraction of a second for any n (a
trace-time unrolled elimination compiled for minutes at n = 32). The factors and
permutation follow LAPACK's getrf conventions (P M = L U packed with unit L below the
diagonal, ``matrix[permutation] = L U``, the first largest |pivot| chosen, an all-zero
pivot column left unscaled), so the callers' pivot-ratio conditioning tests
(:func:`jaxmbd.newton.condition_status`) see the same pivots up to round-off. Everything
vectorises under ``vmap``.

Which solves use them is chosen while a program is traced (:func:`prefer`, set by the
integrators from their ``linear_solver`` option; :func:`active`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401

#: ``linear_solver="auto"`` uses these kernels on the CPU for dense systems up to this many
#: unknowns (``benchmarks/small_solve.py``: whole-step throughput of the double
#: pendulum, n = 32, and the slider crank, n = 54, with the hoisting flag).
SMALL_MAX = 64

_LIMIT: contextvars.ContextVar[float] = contextvars.ContextVar("jaxmbd_small_limit", default=0)


@contextlib.contextmanager
def prefer(limit: float):
    """Within the block (while a program is traced), dense solves of up to ``limit``
    unknowns use these kernels (``math.inf``: all, 0: none, LAPACK)."""
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def limit() -> float:
    """The :func:`prefer` limit in force here (to re-enter it where a derivative rule runs
    after the trace that chose it has closed)."""
    return _LIMIT.get()


def active(n: int) -> bool:
    """Whether a dense system of n unknowns is solved by these kernels here."""
    return n <= _LIMIT.get()


def hoistable() -> bool:
    """Whether the program traced here prefers elementwise products to ``dot`` (a step
    solved by these kernels: a ``dot`` would keep XLA from compiling it as one loop)."""
    return _LIMIT.get() > 0


def incidence_sum(incidence, values):
    """sum_k incidence[i, k] values[k, ...] for a constant (numpy) 0/1 ``incidence`` (m, r):
    the rows summed per body in :mod:`jaxmbd.constraints.equations`. ``jnp.tensordot`` where a
    ``dot``
    is fine; in a hoistable step (:func:`hoistable`) a sum of each output's rows, picked by
    static indices (a product with the 0/1 matrix followed by a sum is matched back into
    a dot-like YNNPACK fusion by XLA's CPU compiler)."""
    if not hoistable():
        return jnp.tensordot(incidence, values, axes=1)
    zero = jnp.zeros(values.shape[1:], values.dtype)
    parts = []
    for row in np.asarray(incidence):
        picked = np.flatnonzero(row)
        # static row slices summed, not ``values[picked]``: a gather's transpose in a
        # gradient is a scatter, which keeps XLA from hoisting the transposed loop
        rows = [values[int(k)] for k in picked]
        parts.append(functools.reduce(jnp.add, rows) if rows else zero)
    return jnp.stack(parts)


def weighted_row_sum(rows, weights):
    """sum_k weights[k] rows[k, ...] (G^T lam from stacked Jacobian rows) without a ``dot``:
    an elementwise product and a sum, unrolled in a hoistable step (:func:`hoistable`),
    where the Newton matrix differentiates it with respect to lam and XLA's CPU compiler
    would match the product of a constant one-hot tangent and a ``reduce`` into a YNNPACK
    dot fusion (which blocks hoisting, :func:`_sum_unrolled`)."""
    product = rows * weights.reshape(weights.shape + (1,) * (rows.ndim - 1))
    return _sum_unrolled(product, 0) if hoistable() else jnp.sum(product, axis=0)


def transpose_times(G, lam):
    """G^T lam: :func:`weighted_row_sum` in a hoistable step, else one ``dot`` (LAPACK
    paths, GPU)."""
    return weighted_row_sum(G, lam) if hoistable() else G.T @ lam


def limit_for(choice: str) -> float:
    """The :func:`prefer` limit of an integrator's resolved ``linear_solver``: "small" and
    "small_structured" (whose block elimination runs in these kernels,
    :mod:`jaxmbd.linear.small_blocks`) all dense solves, anything else none."""
    return math.inf if choice in ("small", "small_structured") else 0


def _rows(n):
    return jnp.arange(n, dtype=jnp.int32)


def _at(v, k, axis=0):
    return jax.lax.dynamic_index_in_dim(v, k, axis, keepdims=False)


def _pivot_and_swap(work, perm, k, rows):
    """Partial pivoting at step k: the first row p >= k of largest |work[p, k]|, swapped
    with row k (whole rows, as LAPACK's laswp)."""
    column = jnp.where(rows >= k, jnp.abs(_at(work, k, 1)), -1.0)
    p = jnp.argmax(column).astype(jnp.int32)
    row_k, row_p = _at(work, k), _at(work, p)
    work = jnp.where((rows == k)[:, None], row_p[None], work)
    work = jnp.where(((rows == p) & (p != k))[:, None], row_k[None], work)
    perm_k, perm_p = _at(perm, k), _at(perm, p)
    perm = jnp.where(rows == k, perm_p, jnp.where(rows == p, perm_k, perm))
    return work, perm, row_p


def lu(matrix):
    """(lu, permutation) of P M = L U (``matrix`` (n, n)), packed as LAPACK's getrf: L's
    multipliers below the diagonal, U on and above; ``matrix[permutation] = L U``. A zero
    pivot column is left as it is (LAPACK's rule), so an exactly singular matrix gives a
    zero on U's diagonal, never a NaN."""
    n = matrix.shape[-1]
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"small LU: expected a square matrix, got shape {matrix.shape}")
    rows = _rows(n)

    def step(k, carry):
        work, perm = carry
        work, perm, pivot_row = _pivot_and_swap(work, perm, k, rows)
        pivot = _at(pivot_row, k)
        below = rows > k
        column = _at(work, k, 1)
        safe = jnp.where(pivot != 0, pivot, 1.0)
        multipliers = jnp.where(below & (pivot != 0), column / safe, 0.0)
        update = multipliers[:, None] * jnp.where(below, pivot_row, 0.0)[None, :]
        work = jnp.where(below[:, None] & (rows == k)[None, :], multipliers[:, None], work - update)
        # a zero pivot: the column below stays (all zeros, as LAPACK leaves it)
        return work, perm

    return jax.lax.fori_loop(0, n, step, (matrix, rows))


#: :func:`lu_stack` unrolls its steps up to this many unknowns (beyond, ``vmap`` of
#: :func:`lu`): B = 256 stacks on 2 CPU cores (``python -m benchmarks.probes.lu_stack``, a
#: scan of 20 LUs), us per stack against ``vmap(lu)``: n = 6 56 / 103, n = 10 255 / 691,
#: n = 16 1750 / 1823, n = 20 3077 / 3772 (compile 5 s), n = 32 8211 / 5761.
LU_STACK_UNROLLED_MAX = 12


def lu_stack(stack):
    """:func:`lu` of every member of a stack (B, n, n): (lu (B, n, n), permutation (B, n)),
    each finite member's factors bitwise equal to :func:`lu`'s (a non-finite member: the
    same permutation and diagonal; :func:`lu`'s masked updates also spread a NaN or inf
    into U's rows above it, 0 * NaN). For the batched rules of the
    callers (a batched program's loop is not hoisted, so gathers are fine here).

    Why not ``vmap(lu)``: its ``fori_loop`` step updates the whole stack under masks and
    fetches each member's pivot row by a gather over a dynamic step index; here the n
    steps are unrolled with static, shrinking slices (only the rows below the pivot and
    the columns right of it are updated), the pivot row taken by one gather per step
    (n = 10, B = 256: 2.5x faster, see :data:`LU_STACK_UNROLLED_MAX`). The same
    operations per entry as :func:`lu`: the multipliers a_ik (1 / pivot) as XLA compiles
    :func:`lu`'s division by the broadcast pivot, the first largest |a| (``argmax``), a
    zero pivot column left unscaled."""
    B, n, _ = stack.shape
    if n > LU_STACK_UNROLLED_MAX:
        return jax.vmap(lu)(stack)
    rows = _rows(n)
    permutation = jnp.broadcast_to(rows, (B, n))
    work = stack
    for k in range(n):
        p = (jnp.argmax(jnp.abs(work[:, k:, k]), axis=1) + k).astype(jnp.int32)
        chosen = rows[None] == p[:, None]
        row_p = jnp.take_along_axis(work, p[:, None, None], axis=1)[:, 0]
        work = jnp.where(chosen[:, :, None], work[:, k : k + 1], work).at[:, k].set(row_p)
        perm_p = jnp.take_along_axis(permutation, p[:, None], axis=1)[:, 0]
        permutation = jnp.where(chosen, permutation[:, k : k + 1], permutation)
        permutation = permutation.at[:, k].set(perm_p)
        if k == n - 1:
            break
        pivot = row_p[:, k]
        nonzero = pivot != 0
        reciprocal = 1.0 / jnp.where(nonzero, pivot, 1.0)
        multipliers = jnp.where(nonzero[:, None], work[:, k + 1 :, k] * reciprocal[:, None], 0.0)
        below = work[:, k + 1 :, k + 1 :] - multipliers[:, :, None] * row_p[:, None, k + 1 :]
        work = work.at[:, k + 1 :, k + 1 :].set(below).at[:, k + 1 :, k].set(multipliers)
    return work, permutation


def _columns(rhs):
    if rhs.ndim == 1:
        return rhs[:, None], lambda x: x[:, 0]
    return rhs, lambda x: x


def _unpermute(permutation, y):
    """x with x[permutation] = y, as a one-hot sum (no scatter, no sort)."""
    n = permutation.shape[0]
    onehot = permutation[:, None] == _rows(n)[None, :]
    return jnp.sum(jnp.where(onehot[:, :, None], y[:, None, :], 0.0), axis=0)


def lu_solve(lu_, permutation, rhs, *, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from :func:`lu`'s factors (``rhs`` (n,) or (n, k)): two
    substitution loops of n steps, each an elementwise update of all rows under a mask."""
    n = lu_.shape[-1]
    rows = _rows(n)
    b, back = _columns(rhs)

    def eliminate(x, k, coefficients, mask, divisor=None):
        xk = _at(x, k)
        if divisor is not None:
            xk = xk / divisor
            x = jnp.where((rows == k)[:, None], xk[None], x)
        return x - jnp.where(mask, coefficients, 0.0)[:, None] * xk[None]

    if not transpose:  # L y = P b (unit diagonal), then U x = y

        def forward(k, x):
            return eliminate(x, k, _at(lu_, k, 1), rows > k)

        def backward(j, x):
            k = n - 1 - j
            column = _at(lu_, k, 1)
            return eliminate(x, k, column, rows < k, _at(column, k))

        y = jax.lax.fori_loop(0, n, forward, b[permutation])
        return back(jax.lax.fori_loop(0, n, backward, y))

    # M^T = U^T L^T P: U^T z = b (forward), L^T y = z (backward, unit), x[perm] = y
    def forward_t(k, x):
        row = _at(lu_, k)
        return eliminate(x, k, row, rows > k, _at(row, k))

    def backward_t(j, x):
        k = n - 1 - j
        return eliminate(x, k, _at(lu_, k), rows < k)

    z = jax.lax.fori_loop(0, n, forward_t, b)
    return back(_unpermute(permutation, jax.lax.fori_loop(0, n, backward_t, z)))


def inverse_and_pivots(matrix):
    """(M^{-1}, |U_kk|): the inverse by Gauss-Jordan elimination with partial pivoting on
    [M | I], and the magnitudes of its pivots. Each row is eliminated as in :func:`lu`
    (a_ij - (a_ik / a_kk) a_kj, the pivot row unscaled until the end), so the rows below
    the diagonal, the row choices and the pivots are exactly those of the LU
    factorisation: an exactly singular matrix gives the same zero pivot (and a NaN
    inverse, where LAPACK's factors give a non-finite one)."""
    n = matrix.shape[-1]
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"small inverse: expected a square matrix, got shape {matrix.shape}")
    rows = _rows(n)
    work = jnp.concatenate([matrix, jnp.eye(n, dtype=matrix.dtype)], axis=1)
    columns = jnp.arange(2 * n, dtype=jnp.int32)

    def step(k, work):
        work, _, pivot_row = _pivot_and_swap(work, rows, k, rows)
        pivot = _at(pivot_row, k)
        safe = jnp.where(pivot != 0, pivot, 1.0)
        column = _at(work, k, 1)
        multipliers = jnp.where((pivot != 0) & (rows != k), column / safe, 0.0)
        work = work - multipliers[:, None] * pivot_row[None, :]
        # column k is exactly zero off the pivot (as LU's rows below it), not round-off
        # that a later tiny pivot's multiplier would amplify into the kept diagonal
        cleared = (pivot != 0) & (rows != k)[:, None] & (columns == k)[None, :]
        return jnp.where(cleared, 0.0, work)

    work = jax.lax.fori_loop(0, n, step, work)
    diagonal = jnp.diagonal(work[:, :n])
    pivots = jnp.abs(diagonal)
    inverse = work[:, n:] / jnp.where(pivots > 0, diagonal, jnp.nan)[:, None]
    return inverse, pivots


def _sum_unrolled(product, axis):
    """sum over ``axis`` as a chain of additions of unit slices (one fused elementwise
    loop): XLA's CPU compiler matches an elementwise product followed by a ``reduce``
    into a YNNPACK dot fusion (a custom fusion, which blocks hoisting), but not this."""
    if product.shape[axis] == 0:  # an empty sum (a model without constraint rows)
        return jnp.sum(product, axis=axis)
    parts = jnp.split(product, product.shape[axis], axis=axis)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return jnp.squeeze(total, axis)


def matvec(matrix, vector):
    """M v as an elementwise product and an unrolled sum (no ``dot``)."""
    return _sum_unrolled(matrix * vector[None, :], 1)


def matmul(a, b):
    """A B (or A v for a vector v) as an elementwise product and an unrolled sum (no
    ``dot``), for small operands."""
    if b.ndim == 1:
        return matvec(a, b)
    return _sum_unrolled(a[:, :, None] * b[None, :, :], 1)
