"""Elementwise building blocks of the tree's recursions: gathers by constant indices, sums of
rows picked by constant 0/1 matrices, small products as broadcast products with unrolled
sums, and a trace-time unrolled Cholesky solve.

Why not ``@``, ``einsum``, ``.at[].set`` or LAPACK: on the CPU, XLA compiles a time loop
into one native loop only when its body holds no ``dot``, scatter, sort or custom call
(:mod:`jaxmbd.compiled.xla_flags`); a small model's step is otherwise hundreds of runtime thunks,
each costing more than its arithmetic (a 2x2 LAPACK Cholesky solve took 25 us of a 33 us
acrobot step). Everything here is also what ``vmap`` turns into wide elementwise loops.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.rows import gather_rows
from ..compiled.small import UNROLL_MAX, _sum_along
from ..compiled.xla_flags import joint_loops_hoisted_when_differentiated

#: Cholesky solves are unrolled at trace time up to this many unknowns (compile time grows
#: with n^3); beyond it, a ``fori_loop`` of masked column updates.
UNROLLED_CHOLESKY_MAX = 12


def pick(x, index):
    """``x[index]`` for a static integer ``index`` of any shape: a gather. Where the
    joint formulation's gradient loops are left to XLA's hoisting (the default on the CPU,
    :func:`jaxmbd.compiled.xla_flags.joint_loops_hoisted_when_differentiated`), its tangent is
    taken by one split of ``x`` into rows and one concatenation (:func:`_split_rows`):
    JAX transposes a gather into a scatter, and XLA's CPU backend does not compile a loop
    that holds a scatter as one native loop; slices (the former tangent) transpose to zero
    pads of the whole array and their sums, a split and a concatenation to a concatenation
    and a split (arm3's adjoint loop 14.6k -> 13.7k machine instructions with
    :func:`halves` and :func:`entries`, ``benchmarks/results/gradients_defaults.md``).
    With ``JAXMBD_HOIST_GRADIENT_LOOPS=0`` a plain gather, whose scatter keeps the
    transposed time loop a runtime loop. The value stays a gather: slices joined in a
    step's native loop ran the arm3's steps ~1.4x slower
    (``benchmarks/results/gradients_cost.md``)."""
    index = np.asarray(index, dtype=int)
    if isinstance(x, np.ndarray) or np.any(index < 0):
        return x[index]
    if not joint_loops_hoisted_when_differentiated():
        flat = gather_rows(x, index)
    else:
        flat = _pick(x, tuple(index.reshape(-1).tolist()))
    return flat.reshape(index.shape + jnp.shape(x)[1:])


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _pick(x, rows: tuple):
    return gather_rows(x, rows)


@_pick.defjvp
def _pick_jvp(rows, primals, tangents):
    (x,), (dx,) = primals, tangents
    # the rows by one split and the picked ones by one concatenation: the transpose is a
    # split and a concatenation (a gather's would be a scatter, slices' zero pads and sums)
    return _pick(x, rows), _split_rows(dx, rows)


def _split_rows(x, rows: tuple):
    """x[rows] by one split of x into its rows and one concatenation of the picked ones:
    its transpose is a split and a concatenation (with adds where a row is picked twice)."""
    if len(rows) == 0:
        return jnp.zeros((0,) + x.shape[1:], x.dtype)
    if rows == tuple(range(x.shape[0])):
        return x
    parts = jax.lax.split(x, (1,) * x.shape[0], axis=0)
    return jax.lax.concatenate([parts[i] for i in rows], 0)


def assemble(n: int, parts):
    """An (n, ...) array from ``parts``: (static row indices, values) pairs whose rows
    cover 0..n-1 (later parts win), by one concatenation and one constant row pick
    (:func:`pick`)."""
    source = np.full(n, -1, dtype=int)
    offset = 0
    for rows, _ in parts:
        source[np.asarray(rows, dtype=int)] = offset + np.arange(len(rows))
        offset += len(rows)
    if np.any(source < 0):
        raise ValueError("assemble: rows not covered")
    stacked = jnp.concatenate([values for _, values in parts])
    return pick(stacked, source)


def picked_sum(incidence: np.ndarray, values):
    """sum_k incidence[i, k] values[k, ...] for a constant 0/1 ``incidence`` (m, r): each
    output the sum of its picked rows (no product with the 0/1 matrix, which XLA would
    match into a dot)."""
    incidence = np.asarray(incidence)
    if incidence.shape[0] == 0:
        return jnp.zeros((0,) + values.shape[1:], values.dtype)
    # the rows by one split and the outputs by one concatenation (reverse mode: one
    # concatenation and one split, not a pad and a sum per picked row)
    rows = jnp.split(values, values.shape[0], axis=0) if values.shape[0] else []
    zero = jnp.zeros((1,) + values.shape[1:], values.dtype)
    parts = []
    for row in incidence:
        picked = np.flatnonzero(row)
        if picked.size == 0:
            parts.append(zero)
            continue
        total = rows[int(picked[0])]
        for k in picked[1:]:
            total = total + rows[int(k)]
        parts.append(total)
    return jnp.concatenate(parts, axis=0)


def halves(x):
    """(x[..., :3], x[..., 3:]) of spatial 6-vectors by one split: in reverse mode one
    concatenation, where two slices transpose to two zero pads and their sum."""
    a, b = jnp.split(x, 2, axis=-1)
    return a, b


def entries(M):
    """The entries M[i][j] of a small matrix (n, n, ...) as nested lists, by one split into
    rows and one per row: in reverse mode concatenations, where n^2 element slices
    transpose to n^2 zero pads of the whole matrix and their sums."""
    n = M.shape[0]
    rows = jnp.split(M, n, axis=0) if n > 1 else [M]
    return [[c[0] for c in (jnp.split(r[0], n, axis=0) if n > 1 else [r[0]])] for r in rows]


def mv(M, v):
    """M v for stacked (..., n, k), (..., k)."""
    return _sum_along(M * v[..., None, :], -1)


def mm(X, Y):
    """X Y for stacked small matrices."""
    return _sum_along(X[..., :, :, None] * Y[..., None, :, :], -2)


def mtv(M, v):
    """M^T v for stacked (..., k, n), (..., k)."""
    return _sum_along(M * v[..., :, None], -2)


def cross(a, b):
    """a x b for stacked 3-vectors (elementwise). The components by one split per operand
    and the result by one concatenation: in reverse mode these transpose to one
    concatenation and one split, where three component slices transpose to three pads
    and their sums (66 cross products in a step of a 3-link arm)."""
    a0, a1, a2 = jnp.split(a, 3, axis=-1)
    b0, b1, b2 = jnp.split(b, 3, axis=-1)
    return jnp.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def row_products(X, Y):
    """P[i, j] = X_i . Y_j for rows X (m, k), Y (n, k). Each operand repeated by a
    concatenation, not a broadcast: in reverse mode a broadcast's transpose is a sum over
    the other operand's rows, which XLA's CPU backend hands to a library fusion (YNNPACK's
    reduce, a custom fusion) once that axis is long (27 dofs), and a loop that holds one is
    not compiled as one native loop; a concatenation transposes to slices and adds."""
    m, n = X.shape[0], Y.shape[0]
    if max(m, n) <= UNROLL_MAX:
        return _sum_along(X[:, None, :] * Y[None, :, :], -1)
    return _sum_along(_repeated(X[:, None, :], n, 1) * _repeated(Y[None, :, :], m, 0), -1)


def _repeated(x, n: int, axis: int):
    """``x`` (size 1 along ``axis``) repeated n times along it, by one concatenation."""
    return jnp.concatenate([x] * n, axis=axis) if n > 1 else x


def cholesky_solve(M, rhs):
    """M^-1 rhs for a symmetric positive definite M (n, n) and rhs (n,) or (n, k): a
    Cholesky factorisation unrolled at trace time (n <= :data:`UNROLLED_CHOLESKY_MAX`)
    or a loop of masked updates, then the two triangular solves, all elementwise."""
    return cholesky_factor_solve(cholesky_factor(M), rhs)


def cholesky_factor(M, *, unrolled_max: int = UNROLLED_CHOLESKY_MAX):
    """The lower Cholesky factor of M (n, n): for n <= ``unrolled_max`` its entries as
    nested lists of scalars (unrolled at trace time), else an (n, n) array
    (:func:`_cholesky_loop`). For :func:`cholesky_factor_solve`."""
    n = M.shape[0]
    if n > unrolled_max:
        return _cholesky_loop(M)
    L = [[None] * n for _ in range(n)]
    E = entries(M)
    for j in range(n):
        s = E[j][j]
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        d = jnp.sqrt(s)
        L[j][j] = d
        for i in range(j + 1, n):
            s = E[i][j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s / d
    return L


def cholesky_factor_solve(L, rhs):
    """M^-1 rhs from the factor L of :func:`cholesky_factor`: L y = rhs, L^T x = y."""
    n = len(L) if isinstance(L, list) else L.shape[0]
    vector = rhs.ndim == 1
    b = rhs[:, None] if vector else rhs
    if n == 0:
        return rhs
    if isinstance(L, list):
        y = []
        brows = jnp.split(b, n, axis=0) if n > 1 else [b]
        for i in range(n):
            s = brows[i][0]
            for k in range(i):
                s = s - L[i][k] * y[k]
            y.append(s / L[i][i])
        x = [None] * n
        for i in reversed(range(n)):
            s = y[i]
            for k in range(i + 1, n):
                s = s - L[k][i] * x[k]
            x[i] = s / L[i][i]
        out = jnp.stack(x)
        return out[:, 0] if vector else out
    rows = jnp.arange(n)

    def forward(i, y):  # L y = b
        yi = (b[i] - jnp.sum(jnp.where((rows < i)[:, None], L[i][:, None] * y, 0.0), 0)) / L[i, i]
        return jnp.where((rows == i)[:, None], yi[None], y)

    def backward(k, x):  # L^T x = y
        i = n - 1 - k
        column = L[:, i]
        xi = x[i] - jnp.sum(jnp.where((rows > i)[:, None], column[:, None] * x, 0.0), 0)
        return jnp.where((rows == i)[:, None], (xi / L[i, i])[None], x)

    y = jax.lax.fori_loop(0, n, forward, jnp.zeros_like(b))
    x = jax.lax.fori_loop(0, n, backward, y)
    return x[:, 0] if vector else x


def _cholesky_loop(M):
    """The lower Cholesky factor of M by a loop over columns, each an elementwise update of
    the whole array under masks (compiles in constant time for any n). The loop builds L^T,
    whose rows are L's columns: each column's sum then runs over the leading axis, which
    XLA's native CPU loops vectorise; over the contiguous axis it was a scalar loop (a 27 x
    27 factor 14.7 -> 4.4 us in a hoisted loop)."""
    n = M.shape[0]
    rows = jnp.arange(n)

    def column(j, Lt):
        # L[:, j] = (M[:, j] - L[:, :j] L[j, :j]) / L[j, j], rows >= j; L[:, k] = Lt[k]
        left = jnp.where((rows < j)[:, None], Lt * Lt[:, j][:, None], 0.0)
        c = M[:, j] - jnp.sum(left, 0)
        d = jnp.sqrt(c[j])
        new = jnp.where(rows > j, c / d, jnp.where(rows == j, d, 0.0))
        return jnp.where((rows == j)[:, None], new[None, :], Lt)

    return jax.lax.fori_loop(0, n, column, jnp.zeros_like(M)).T
