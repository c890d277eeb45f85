"""Dense LU with partial pivoting and the inverse from its factors, for the small Newton
and pivot-block matrices (tens of unknowns), kept away from two jaxlib CPU kernels:

* jaxlib's batched getrf (what ``vmap`` of ``jax.lax.linalg.lu`` runs) spreads the members
  over XLA's intra-op thread pool and, on jax 0.10.2 CPU, can deadlock there;
* LAPACK's triangular solve with many right-hand sides wakes the threads of a threaded
  OpenBLAS (NumPy's and SciPy's wheels) for about 0.5-1 ms a call.

Under ``vmap`` the factorisations (:func:`dense_lu`, :func:`inverse_and_pivots`) run
LAPACK's getrf on one member at a time (``lax.map``): jaxlib runs a batch that fits in one
of its work items on the calling thread, never on the pool, and a single matrix always
does (``jax::ParallelBatchMap`` in jaxlib 0.10.2's ``_lapack.so`` calls the kernel inline
when the grain is at least the batch size). That is also faster than a vectorised
elimination, whose n sequential loop steps of whole-stack XLA kernels cost more than the
members' getrf calls together (scratch ``simulate_batch`` runs, double pendulum gen_alpha,
batch 256 on two host devices, 0.3 s: modified Newton 39k -> 67k model-steps/s, full
Newton 58k -> 95k). The solves with given factors stay vectorised (row-by-row
substitution over the stack): per member, LAPACK's triangular solves were slower (slider
crank gen_alpha, n = 54: 78k against 73k). The inverse from the factors is formed in XLA
(recursive block inversion of the triangular factors). :func:`solve`, :func:`inverse` and
:func:`lu_factor` (differentiable) stand in for ``jnp.linalg.solve``/``inv``/
``lax.linalg.lu`` everywhere in jaxmbd, so that no batched CPU program runs jaxlib's
batched getrf (it deadlocked ``simulate_batch`` over two host devices). A program compiled
for a GPU takes the vendor's batched getrf and triangular solves instead (one vmap over
the stack, chosen when the program is lowered: :func:`member_by_member_on_cpu`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.batching import (
    broadcast_batched,
    cpu_or_accelerator,
    none_batched,
    on_single_member,
    unbatched,
)
from . import small


@jax.custom_batching.custom_vmap
def dense_lu(matrix):
    """(lu, permutation) of P M = L U: LAPACK's getrf for one matrix; under ``vmap`` the
    same getrf member by member (``lax.map``, each call inline on the calling thread)
    instead of jaxlib's batched getrf, which runs the members on XLA's intra-op thread
    pool and, on jax 0.10.2 CPU, can deadlock there (a pool thread waits on members queued
    behind it: ``benchmarks/batch.py`` hung at 0 % CPU in ``jax::ParallelBatchMap``
    under ``LuDecomposition``, seen in gdb). On a GPU: the batched LU
    (:func:`member_by_member_on_cpu`)."""
    return _lapack_lu(matrix)


def _lapack_lu(matrix):
    lu, _, permutation = jax.lax.linalg.lu(matrix)
    return lu, permutation


@dense_lu.def_vmap
def _dense_lu_vmap(axis_size, in_batched, matrix):
    if none_batched(in_batched):
        return unbatched(_lapack_lu, matrix)
    (matrix,) = broadcast_batched(axis_size, (matrix,), in_batched)
    if axis_size == 1:  # a batch of one: the unbatched kernel, no loop
        return on_single_member(dense_lu, matrix), (True, True)
    return member_by_member_on_cpu(_lapack_lu, matrix), (True, True)


def member_by_member_on_cpu(fn, stack):
    """``fn`` (a single-matrix computation) over a stack: on the CPU member by member
    (``lax.map`` of the single-member kernels, see the module docstring); on a GPU one
    vmap, whose batched getrf is the vendor library's batched LU
    (:func:`~jaxmbd.compiled.batching.cpu_or_accelerator`)."""
    return cpu_or_accelerator(stack, cpu=lambda s: jax.lax.map(fn, s), accelerator=jax.vmap(fn))


@jax.custom_jvp
def lu_factor(matrix):
    """(lu, permutation) of P M = L U (:func:`dense_lu`: never jaxlib's batched getrf),
    differentiable: the JVP of the factors, L^{-1} P dM U^{-1} = X, dL = L tril(X, -1),
    dU = triu(X) U (the rule of ``jax.lax.linalg.lu`` for square matrices)."""
    return dense_lu(matrix)


@lu_factor.defjvp
def _lu_factor_jvp(primals, tangents):
    (matrix,), (matrix_dot,) = primals, tangents
    lu, permutation = lu_factor(matrix)
    n = matrix.shape[-1]
    solve = jax.lax.linalg.triangular_solve
    x = matrix_dot[permutation]
    x = solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = solve(lu, x, left_side=False, lower=False)
    lower = jnp.tril(lu, -1) + jnp.eye(n, dtype=lu.dtype)
    lu_dot = lower @ jnp.tril(x, -1) + jnp.triu(x) @ jnp.triu(lu)
    return (lu, permutation), (lu_dot, np.zeros(permutation.shape, jax.dtypes.float0))


def _lapack_solve(lu, permutation, rhs, transpose):
    b = rhs if rhs.ndim == 2 else rhs[:, None]
    solve = jax.lax.linalg.triangular_solve
    if transpose:  # M^T = U^T L^T P: solve U^T, then L^T, then undo P
        y = solve(lu, b, left_side=True, lower=False, transpose_a=True)
        y = solve(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
        x = jnp.zeros_like(y).at[permutation].set(y)
    else:
        y = solve(lu, b[permutation], left_side=True, lower=True, unit_diagonal=True)
        x = solve(lu, y, left_side=True, lower=False)
    return x if rhs.ndim == 2 else x[:, 0]


def _substitution_solve(lu, permutation, rhs, transpose):
    """:func:`_lapack_solve` by row-by-row substitution (2 n loop steps of elementwise
    work, vectorised over a batch)."""
    n = lu.shape[-1]
    index = jnp.arange(n)

    def mask(condition, vector):
        return jnp.where(condition, vector, 0.0)

    if transpose:  # U^T z = b (forward), L^T y = z (backward, unit), x[perm] = y

        def forward(i, z):
            dot = mask(index < i, lu[:, i]) @ z
            return z.at[i].set((z[i] - dot) / lu[i, i])

        def backward(k, y):
            i = n - 1 - k
            return y.at[i].add(-(mask(index > i, lu[:, i]) @ y))

        y = jax.lax.fori_loop(0, n, backward, jax.lax.fori_loop(0, n, forward, rhs))
        return jnp.zeros_like(y).at[permutation].set(y)

    def forward(i, y):  # L y = P b, unit diagonal
        return y.at[i].add(-(mask(index < i, lu[i]) @ y))

    def backward(k, x):  # U x = y, from the last row
        i = n - 1 - k
        return x.at[i].set((x[i] - mask(index > i, lu[i]) @ x) / lu[i, i])

    return jax.lax.fori_loop(0, n, backward, jax.lax.fori_loop(0, n, forward, rhs[permutation]))


def _batch_safe(transpose):
    @jax.custom_batching.custom_vmap
    def lu_solve_(lu, permutation, rhs):
        return _lapack_solve(lu, permutation, rhs, transpose)

    @lu_solve_.def_vmap
    def _rule(axis_size, in_batched, lu, permutation, rhs):
        if none_batched(in_batched):
            return unbatched(_lapack_solve, lu, permutation, rhs, transpose)
        lu_b, perm_b, _ = in_batched
        if not (lu_b or perm_b):  # one matrix, many right-hand sides: no batched kernel
            out = jax.vmap(lambda r: _lapack_solve(lu, permutation, r, transpose))(rhs)
            return out, True
        lu, permutation, rhs = broadcast_batched(axis_size, (lu, permutation, rhs), in_batched)
        if axis_size == 1:
            return on_single_member(lu_solve_, lu, permutation, rhs), True
        # on a GPU the vendor's batched triangular solves (the substitution's 2 n loop
        # steps would each launch kernels)
        out = cpu_or_accelerator(
            lu,
            permutation,
            rhs,
            cpu=jax.vmap(lambda a, p, r: _substitution_solve(a, p, r, transpose)),
            accelerator=jax.vmap(lambda a, p, r: _lapack_solve(a, p, r, transpose)),
        )
        return out, True

    return lu_solve_


#: LAPACK's triangular solves for one matrix; under ``vmap`` substitution loops instead of
#: jaxlib's batched trsm, which like its batched getrf waits on XLA's intra-op pool and
#: deadlocked ``simulate_batch`` over two host devices (gdb: ``ParallelBatchMap`` under
#: ``TriMatrixEquationSolver``). Not differentiable: see :func:`lu_solve`.
_solve_plain, _solve_transposed = _batch_safe(False), _batch_safe(True)


def lu_solve_nondiff(lu, permutation, rhs, *, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from P M = L U, batch-safe (no jaxlib batched kernel) but
    not differentiable (a ``custom_vmap``): for Newton iterations."""
    return (_solve_transposed if transpose else _solve_plain)(lu, permutation, rhs)


def lu_solve(lu, permutation, rhs, *, transpose: bool = False):
    """M^{-1} rhs (or M^{-T} rhs) from P M = L U: a permutation and two triangular solves
    (``rhs`` a vector or a matrix of right-hand sides). Differentiable (LAPACK's solve,
    which under ``vmap`` is jaxlib's batched trsm: for batched programs prefer
    :func:`solve` or :func:`lu_solve_nondiff`)."""
    return _lapack_solve(lu, permutation, rhs, transpose)


def solve(matrix, rhs):
    """M^{-1} rhs by LU with partial pivoting: ``jnp.linalg.solve`` without jaxlib's batched
    getrf under ``vmap`` (see the module's note), differentiable. A stack (..., n, n) solves
    member by member (``rhs`` (..., n) or (..., n, k)). A singular matrix gives non-finite
    values."""
    if matrix.ndim > 2:
        return jax.vmap(solve)(matrix, rhs)
    # differentiated implicitly (custom_linear_solve: dx = M^{-1} (db - dM x)), so the
    # factors and their batch-safe solves are never differentiated themselves
    if small.active(matrix.shape[-1]):  # a hoistable step: elementwise kernels, no LAPACK
        factor, product, substitute = small.lu, small.matmul, small.lu_solve
    else:
        factor, product, substitute = dense_lu, jnp.matmul, lu_solve_nondiff
    lu, permutation = factor(jax.lax.stop_gradient(matrix))
    return jax.lax.custom_linear_solve(
        lambda x: product(matrix, x),
        rhs,
        solve=lambda _, b: substitute(lu, permutation, b),
        transpose_solve=lambda _, b: substitute(lu, permutation, b, transpose=True),
    )


def inverse(matrix):
    """M^{-1} (:func:`solve` with the identity; a stack (..., n, n) member by member)."""
    if matrix.ndim > 2:
        return jax.vmap(inverse)(matrix)
    return solve(matrix, jnp.eye(matrix.shape[-1], dtype=matrix.dtype))


@jax.custom_batching.custom_vmap
def inverse_and_pivots(matrix):
    """(M^{-1}, |U_kk|): the inverse of M and the pivots' magnitudes of its LU factorisation
    with partial pivoting (for a condition estimate). One matrix: LAPACK's getrf and
    :func:`inverse_from_lu`. Under ``vmap``: the same, member by member (``lax.map``; see
    :func:`dense_lu`)."""
    return _inverse_and_pivots_body(matrix)


def _inverse_and_pivots_body(matrix):
    lu, _, permutation = jax.lax.linalg.lu(matrix)
    return inverse_from_lu(lu, permutation), jnp.abs(jnp.diagonal(lu))


@inverse_and_pivots.def_vmap
def _inverse_and_pivots_vmap(axis_size, in_batched, matrix):
    if none_batched(in_batched):
        return unbatched(_inverse_and_pivots_body, matrix)
    (matrix,) = broadcast_batched(axis_size, (matrix,), in_batched)
    if axis_size == 1:
        return on_single_member(inverse_and_pivots, matrix), (True, True)
    return member_by_member_on_cpu(_inverse_and_pivots_body, matrix), (True, True)


def triangular_inverse(t, *, lower: bool):
    """T^{-1} for a stack (..., n, n) of triangular T (``lower`` or upper; the other
    triangle is ignored), by recursive 2 x 2 block inversion,

        [[A, 0], [C, D]]^{-1} = [[A^{-1}, 0], [-D^{-1} C A^{-1}, D^{-1}]]

    (upper: [[A^{-1}, -A^{-1} B D^{-1}], [0, D^{-1}]]), with A and D inverted together as
    one stacked problem: log2(n) levels of batched products (n padded with the identity
    to a power of two), a few dozen XLA kernels in all, where a row-by-row substitution
    runs 2 n sequential loop steps. Forward stable like LAPACK's blocked trtri (Du Croz &
    Higham 1992, method 2C); a zero on the diagonal gives non-finite entries."""
    n = t.shape[-1]
    t = jnp.tril(t) if lower else jnp.triu(t)
    size = 1 << max(n - 1, 0).bit_length()
    if size != n:  # pad with the identity: the inverse is blockdiag(T^{-1}, I)
        padded = jnp.broadcast_to(jnp.eye(size, dtype=t.dtype), t.shape[:-2] + (size, size))
        t = padded.at[..., :n, :n].set(t)
    return _block_inverse(t, lower)[..., :n, :n]


def _block_inverse(t, lower):
    m = t.shape[-1]
    if m == 1:
        return 1.0 / t
    h = m // 2
    both = _block_inverse(jnp.stack([t[..., :h, :h], t[..., h:, h:]]), lower)
    a, d = both[0], both[1]
    zeros = jnp.zeros_like(a)
    if lower:
        c = -(d @ (t[..., h:, :h] @ a))
        top, bottom = [a, zeros], [c, d]
    else:
        b = -(a @ (t[..., :h, h:] @ d))
        top, bottom = [a, b], [zeros, d]
    return jnp.concatenate([jnp.concatenate(top, -1), jnp.concatenate(bottom, -1)], -2)


@jax.custom_batching.custom_vmap
def inverse_from_lu(lu, permutation):
    """M^{-1} from P M = L U (packed as LAPACK does).

    One matrix: U^{-1} (L^{-1} P) with the triangular inverses by recursive block inversion
    (:func:`triangular_inverse`, a few dozen kernels). Under ``vmap``: row-by-row
    substitution over the whole stack (:func:`_inverse_by_substitution`), whose elementwise
    loop steps batch better than the block recursion's many tiny batched products. Measured
    on 2 CPU cores (one program, 100 inversions in a loop): n = 32, 20 -> 10 us for one
    matrix; a batch of 256 members, 9.3 us a member by substitution against 10.3 by blocks.

    Neither calls LAPACK's triangular solve with the n columns of the identity: with a
    threaded OpenBLAS (NumPy's and SciPy's wheels) a multi-column solve wakes its worker
    threads, about 0.5-1 ms per call for n = 32 on 2 CPU cores (jax.profiler)."""
    return _inverse_from_lu_body(lu, permutation)


def _inverse_from_lu_body(lu, permutation):
    n = lu.shape[-1]
    # both factors in one recursion, as lower triangles: L (unit diagonal) and U^T
    unit_lower = jnp.tril(lu, -1) + jnp.eye(n, dtype=lu.dtype)
    lower, upper_t = triangular_inverse(jnp.stack([unit_lower, lu.T]), lower=True)
    # L^{-1} P: column permutation[k] of it is column k of L^{-1}
    return upper_t.T @ lower[:, jnp.argsort(permutation)]


@inverse_from_lu.def_vmap
def _inverse_from_lu_vmap(axis_size, in_batched, lu, permutation):
    if none_batched(in_batched):
        return unbatched(_inverse_from_lu_body, lu, permutation)
    lu, permutation = broadcast_batched(axis_size, (lu, permutation), in_batched)
    if axis_size == 1:
        return on_single_member(inverse_from_lu, lu, permutation), True
    return jax.vmap(_inverse_by_substitution)(lu, permutation), True


def _inverse_by_substitution(lu, permutation):
    """M^{-1} from P M = L U: L Y = P, then U X = Y, a row at a time for all n columns at
    once (:func:`_substitution_solve` with the identity): 2 n loop steps of elementwise
    work that vectorises well over a batch."""
    identity = jnp.eye(lu.shape[-1], dtype=lu.dtype)
    return _substitution_solve(lu, permutation, identity, False)
