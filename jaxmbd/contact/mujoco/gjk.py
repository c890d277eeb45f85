"""MuJoCo's native convex collision detection (``engine_collision_gjk.c``, ``mjc_ccd``) in
JAX, the distance half: GJK (with its ``gjkIntersect`` fallback) and the vector helpers that
:mod:`.epa` (the penetration depth) shares, for one contact per call (``max_contacts = 1``,
MuJoCo's setting for every pair of smooth geoms).

GJK is Montanari et al., "Improving the GJK algorithm for faster and more reliable distance
queries between convex objects", ACM ToG 36(3), 2017 (signed-volume subdistance). Every loop
keeps MuJoCo's iteration order, tie-breaking and caps (``opt.ccd_iterations``,
``opt.ccd_tolerance``) as ``lax.while_loop`` over fixed-size buffers.

A support function here is ``support(dir) -> point`` of one geom (margin included, as
MuJoCo's ``support`` adds half the margin along ``dir``); a Minkowski-difference vertex is a
(3, 3) array of rows (vert = vert1 - vert2, vert1, vert2).

The arithmetic is MuJoCo's operation for operation (the same products summed in the same
order, so that the rounding is the C code's), written on whole (3,) vectors and, where MuJoCo
repeats a computation over a simplex's faces or edges, batched over them with ``jax.vmap``:
the program stays small, and evaluated op by op (``jax.disable_jit``) it rounds as the C code
does. Compiled, XLA's fusion may contract a product and a sum into one FMA, so that results
move by an ulp with the shape of the program (batched or not); where GJK or EPA stop on
their tolerance, or at degenerate (aligned) poses, that ulp can pick another iterate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from ...compiled.batching import while_loop
from .common import MINVAL

MINVAL2 = MINVAL * MINVAL
MAX_LIMIT = 1.7976931348623157e308  # DBL_MAX, MuJoCo's mjMAX_LIMIT
MAXVAL2 = 1e10 * 1e10  # mjMAXVAL squared
_MINDIST = MINVAL2  # mjMINDIST2/3/4 in double precision


# --------------------------------------------------------------------------------------------
# vector helpers with MuJoCo's order of operations: one product of whole vectors, its
# components (one ``unstack``) summed left to right as the C code sums them


def dot3(a, b):
    p0, p1, p2 = jnp.unstack(a * b, axis=-1)
    return p0 + p1 + p2


def cross3(a, b):
    a0, a1, a2 = jnp.unstack(a, axis=-1)
    b0, b1, b2 = jnp.unstack(b, axis=-1)
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def det3(v1, v2, v3):
    """v1 . (v2 x v3), MuJoCo's ``det3`` term for term."""
    return dot3(v1, cross3(v2, v3))


def matvec(mat, v):
    """mat v as MuJoCo's ``mju_mulMatVec3`` sums it."""
    return dot3(mat, v)


def matvec_t(mat, v):
    """mat^T v as MuJoCo's ``mju_mulMatTVec3`` sums it."""
    r0, r1, r2 = jnp.unstack(mat * v[:, None], axis=0)
    return r0 + r1 + r2


def _sqrt(x):
    return jnp.sqrt(jnp.maximum(x, 0.0))


def _div(num, den):
    """num / den, with den replaced by 1 where it is 0 (callers mask that branch)."""
    return num / jnp.where(den == 0, 1.0, den)


def lincomb(coef, n, vs):
    """MuJoCo's ``lincomb``: sum of coef[i] * vs[i] over the first n (0..4) terms."""
    t0, t1, t2, t3 = jnp.unstack(coef[:, None] * vs, axis=0)
    s1 = t0 + t1
    s2 = s1 + t2
    partial = jnp.stack([jnp.zeros(3), t0, s1, s2, s2 + t3])
    return partial[jnp.clip(n, 0, 4)]


def normalize3(v):
    """MuJoCo's ``mju_normalize3`` (multiplies by the inverse norm; (1, 0, 0) below mjMINVAL)."""
    norm = _sqrt(dot3(v, v))
    small = norm < MINVAL
    unit = v * _div(1.0, norm)
    return jnp.where(small, jnp.array([1.0, 0.0, 0.0]), unit), norm


# --------------------------------------------------------------------------------------------
# GJK's distance subalgorithm (signed volumes)


def _same_sign(a, b):
    return ((a > 0) & (b > 0)) | ((a < 0) & (b < 0))


def _project_origin_plane(v1, v2, v3):
    """MuJoCo's ``projectOriginPlane``: (projection of the origin, 1 where degenerate); the
    three candidate normals of the C code as one (3, 3) batch."""
    diff21, diff31, diff32 = v2 - v1, v3 - v1, v3 - v2
    n_vec = cross3(jnp.stack([diff32, diff21, diff31]), jnp.stack([diff21, diff31, diff32]))
    nv, nn = dot3(n_vec, jnp.stack([v2, v1, v3])), dot3(n_vec, n_vec)
    r1, r2, r3 = jnp.unstack(n_vec * _div(nv, nn)[:, None], axis=0)
    nv1, nv2, _ = jnp.unstack(nv)
    nn1, nn2, _ = jnp.unstack(nn)
    take1 = (nv1 != 0) & (nn1 > MINVAL)
    take2 = (nv2 != 0) & (nn2 > MINVAL)
    res = jnp.where(take1, r1, jnp.where(take2, r2, r3))
    degenerate = (nn1 == 0) | (~take1 & (nn2 == 0))
    return res, degenerate


def _s1d(s1, s2):
    diff = s2 - s1
    scl = -(dot3(s2, diff) / dot3(diff, diff))
    p_o = s2 + scl * diff
    m0, m1, m2 = jnp.unstack(s1 - s2)
    take1 = jnp.abs(m1) >= jnp.abs(m0)
    mu_max = jnp.where(take1, m1, m0)
    take2 = jnp.abs(m2) >= jnp.abs(mu_max)
    mu_max = jnp.where(take2, m2, mu_max)

    def pick(v):
        v0, v1, v2 = jnp.unstack(v)
        return jnp.where(take2, v2, jnp.where(take1, v1, v0))

    c1 = pick(p_o - s2)
    c2 = pick(s1 - p_o)
    same = _same_sign(mu_max, c1) & _same_sign(mu_max, c2)
    return jnp.where(same, _div(c1, mu_max), 0.0), jnp.where(same, _div(c2, mu_max), 1.0)


# (x, y) of MuJoCo's ``compute_minors`` for each of its three minors m14, m24, m34
_MINOR_X, _MINOR_Y = np.array([1, 0, 0]), np.array([2, 2, 1])


def _minors(s1, s2, s3):
    """m14, m24, m34 of MuJoCo's ``S2D`` (as one (3,) batch over the coordinate planes), the
    one largest in size and its plane (x, y)."""
    s = jnp.stack([s1, s2, s3])
    sx, sy = s[:, _MINOR_X], s[:, _MINOR_Y]  # (3 vertices, 3 minors)
    (s1x, s2x, s3x), (s1y, s2y, s3y) = jnp.unstack(sx), jnp.unstack(sy)
    m = s2x * s3y - s2y * s3x - s1x * s3y + s1y * s3x + s1x * s2y - s1y * s2x
    m14, m24, m34 = jnp.unstack(m)
    mu1, mu2, mu3 = jnp.abs(m14), jnp.abs(m24), jnp.abs(m34)
    first = (mu1 >= mu2) & (mu1 >= mu3)
    second = ~first & (mu2 >= mu3)
    m_max = jnp.where(first, m14, jnp.where(second, m24, m34))
    x = jnp.where(first, 1, 0)
    y = jnp.where(first | second, 2, 1)
    return m_max, x, y


def _area_cofactors(p, v1, v2, v3, x, y):
    """c31, c32, c33 of MuJoCo's ``S2D`` (one (3,) batch over the triangle's edges)."""
    pts = jnp.stack([p, v1, v2, v3])
    px_, v1x, v2x, v3x = jnp.unstack(pts[:, x])
    py_, v1y, v2y, v3y = jnp.unstack(pts[:, y])
    ax, ay = jnp.stack([v2x, v3x, v1x]), jnp.stack([v2y, v3y, v1y])
    bx, by = jnp.stack([v3x, v1x, v2x]), jnp.stack([v3y, v1y, v2y])
    c = px_ * ay + py_ * bx + ax * by - px_ * by - py_ * ax - bx * ay
    return jnp.unstack(c)


# the edges of a triangle (s1, s2, s3) in MuJoCo's order of ``S2D``: (s2, s3), (s1, s3),
# (s1, s2), and where each edge's two coordinates go in the triangle's three
_EDGE_A, _EDGE_B = np.array([1, 0, 0]), np.array([2, 2, 1])
_EDGE_SLOT_A = np.arange(3)[None, :] == _EDGE_A[:, None]
_EDGE_SLOT_B = np.arange(3)[None, :] == _EDGE_B[:, None]


def _s2d(s1, s2, s3):
    """MuJoCo's ``S2D``: (barycentric coordinates (3,), those of ``S1D(s1, s2)``)."""
    p_o, degenerate = _project_origin_plane(s1, s2, s3)
    m_max, x, y = _minors(s1, s2, s3)
    c31, c32, c33 = _area_cofactors(p_o, s1, s2, s3, x, y)
    comp = _same_sign(m_max, jnp.stack([c31, c32, c33]))
    inside = jnp.all(comp)
    # scalar by scalar: a vector divided by a broadcast scalar may not round as the C code
    lam = jnp.stack([_div(c31, m_max), _div(c32, m_max), _div(c33, m_max)])

    # the nearest edge among those whose cofactor sign differs (first minimum wins)
    s = jnp.stack([s1, s2, s3])
    ea, eb = s[_EDGE_A], s[_EDGE_B]
    la, lb = jax.vmap(_s1d)(ea, eb)
    point = la[:, None] * ea + lb[:, None] * eb
    d = dot3(point, point)
    cand = jnp.where(_EDGE_SLOT_A, la[:, None], jnp.where(_EDGE_SLOT_B, lb[:, None], 0.0))
    lam = jnp.where(inside, lam, _nearest_outside(comp, d, cand))
    l12 = jnp.stack([la[2], lb[2]])  # the edge (s1, s2)
    return jnp.where(degenerate, jnp.stack([la[2], lb[2], 0.0]), lam), l12


def _nearest_outside(same_sign, d, cand):
    """The coordinates ``cand[k]`` of the sub-simplex k nearest the origin (squared distance
    ``d[k]``) among those whose cofactor's sign differs (``~same_sign[k]``), in MuJoCo's
    order: the first such one, then each nearer one (``S2D``, ``S3D``); zeros if none."""
    best, dmin = jnp.zeros(cand.shape[-1]), jnp.asarray(MAX_LIMIT)
    for k in range(cand.shape[0]):
        take = ~same_sign[k] if k == 0 else ~same_sign[k] & (d[k] < dmin)
        best = jnp.where(take, cand[k], best)
        dmin = jnp.where(take, d[k], dmin)
    return best


# the faces of a tetrahedron (s1..s4) in MuJoCo's order of ``S3D``: each drops one vertex
_FACES = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
_FACE_SLOTS = np.arange(4)[None, None, :] == _FACES[:, :, None]  # (face, corner, slot)
_COFACTOR_SIGN = np.array([True, False, True, False])  # c41 and c43 negated


def _subdistance(n, verts):
    """Barycentric coordinates (4,) of the point nearest the origin in the n-simplex (MuJoCo's
    ``S3D``, ``S2D``, ``S1D``); the triangle (s1, s2, s3) and the edge (s1, s2) are among the
    tetrahedron's faces and edges, so one batched ``S2D`` over the four faces serves all."""
    tri = verts[_FACES]  # (4, 3, 3)
    dets = jax.vmap(det3)(tri[:, 0], tri[:, 1], tri[:, 2])
    c = jnp.where(_COFACTOR_SIGN, -dets, dets)
    c41, c42, c43, c44 = jnp.unstack(c)
    m_det = c41 + c42 + c43 + c44
    comps = _same_sign(m_det, c)
    inside = jnp.all(comps)
    lam = jnp.stack([_div(c41, m_det), _div(c42, m_det), _div(c43, m_det), _div(c44, m_det)])
    l2d, l12 = jax.vmap(_s2d)(tri[:, 0], tri[:, 1], tri[:, 2])
    p0, p1, p2 = jnp.unstack(l2d[:, :, None] * tri, axis=1)
    point = p0 + p1 + p2
    d = dot3(point, point)
    corner0, corner1, corner2 = jnp.unstack(_FACE_SLOTS, axis=1)
    l0, l1, l2 = jnp.unstack(l2d[:, :, None], axis=1)
    cand = jnp.where(corner0, l0, jnp.where(corner1, l1, jnp.where(corner2, l2, 0.0)))
    lam4 = jnp.where(inside, lam, _nearest_outside(comps, d, cand))
    lam3 = jnp.concatenate([l2d[3], jnp.zeros(1)])
    lam2 = jnp.concatenate([l12[3], jnp.zeros(2)])
    lam1 = jnp.array([1.0, 0.0, 0.0, 0.0])
    return jnp.where(n == 4, lam4, jnp.where(n == 3, lam3, jnp.where(n == 2, lam2, lam1)))


# --------------------------------------------------------------------------------------------
# GJK


def _vertex(support1, support2, direction, direction_neg):
    """MuJoCo's ``support``: the Minkowski-difference vertex (rows vert, vert1, vert2)."""
    p1 = support1(direction)
    p2 = support2(direction_neg)
    return jnp.stack([p1 - p2, p1, p2])


class GJKResult(NamedTuple):
    x1: jnp.ndarray  # witness point on geom 1
    x2: jnp.ndarray
    dist: jnp.ndarray  # distance (0: touching or penetrating, MAX_LIMIT: separated early)
    separated: jnp.ndarray
    simplex: jnp.ndarray  # (4, 3, 3)
    nsimplex: jnp.ndarray


_GJK, _INTERSECT, _RESUME, _DONE, _DONE_SEPARATED, _DONE_INTERSECT = range(6)

# the faces (a, b, d) of ``gjkIntersect``'s tetrahedron, each with normal (d - a) x (b - a)
_TETRA_A, _TETRA_B, _TETRA_D = (
    np.array([2, 0, 1, 0]),
    np.array([1, 2, 0, 1]),
    np.array([3, 3, 3, 2]),
)


def gjk(support1, support2, x1, x2, *, tolerance, iterations: int, dist_cutoff=0.0,
        get_dist=False):  # fmt: skip
    """MuJoCo's ``gjk`` from the starting witnesses x1, x2 (the geoms' centres).

    ``get_dist`` False: no distance needed (MuJoCo's ``dist_cutoff = 0``), the search may
    stop at a separating direction and falls back to ``gjkIntersect`` once it holds a
    tetrahedron; True: geoms farther apart than ``dist_cutoff`` stop the search as
    separated. ``get_dist`` may be traced, so that one program serves both searches.
    """
    tol2 = tolerance * tolerance
    epsilon = 0.5 * tol2  # smooth geoms (margins or curved surfaces) only
    min_norm = tolerance
    x_k = x1 - x2
    x_norm = _sqrt(dot3(x_k, x_k))

    def gjk_support(xk, xnorm):
        inv = 1 / jnp.where(xnorm == 0, 1.0, xnorm)
        dir_neg = xk * inv
        return _vertex(support1, support2, dir_neg * -1, dir_neg)

    def second_half(c, simplex, n):
        """The distance subalgorithm, the simplex reduced to its support, the next x_k."""
        lam = _subdistance(n + 1, simplex[:, 0])
        keep = lam != 0
        rank = jnp.cumsum(keep) - 1
        order = jnp.argsort(jnp.where(keep, rank, 4 + jnp.arange(4)))
        simplex = simplex[order]
        lam = jnp.where(jnp.arange(4) < jnp.sum(keep), lam[order], 0.0)
        n_new = jnp.sum(keep)
        xk = lincomb(lam, n_new, simplex[:, 0])
        xnorm = _sqrt(dot3(xk, xk))
        none = n_new < 1
        mode = jnp.where(none, _DONE_SEPARATED, jnp.where(n_new == 4, _DONE, _GJK))
        k = jnp.where(n_new == 4, c["k"], c["k"] + 1)  # a tetrahedron stops before k++
        return dict(c, simplex=simplex, n=n_new, lam=lam, xk=xk, xnorm_prev=c["xnorm"],
                    xnorm=xnorm, mode=mode, k=k)  # fmt: skip

    def gjk_step(c):
        resume = c["mode"] == _RESUME
        xk, xnorm, n = c["xk"], c["xnorm"], c["n"]
        stop_a = (xnorm < min_norm) | (jnp.abs(c["xnorm_prev"] - xnorm) < MINVAL)
        v = gjk_support(xk, xnorm)
        simplex = jnp.where(resume, c["simplex"], c["simplex"].at[jnp.minimum(n, 3)].set(v))
        s_k = simplex[jnp.minimum(n, 3), 0]
        stop_b = dot3(xk, xk - s_k) < epsilon
        lower = dot3(xk, s_k)
        separated = jnp.where(get_dist, (lower > 0) & (lower >= dist_cutoff * xnorm), lower > 0)
        to_intersect = (n == 3) & c["backup"]
        out = second_half(c, simplex, n)
        stop_a, stop_b = stop_a & ~resume, stop_b & ~resume
        separated, to_intersect = separated & ~resume, to_intersect & ~resume
        intersect_start = dict(c, simplex=simplex, mode=_INTERSECT, local=simplex,
                               perm=jnp.arange(4))  # fmt: skip
        out = _select(to_intersect, intersect_start, out)
        out = _select(separated, dict(c, mode=_DONE_SEPARATED), out)
        out = _select(stop_a | stop_b, dict(c, simplex=simplex, mode=_DONE), out)
        return out

    def intersect_step(c):
        local, perm, k = c["local"], c["perm"], c["k"]
        verts = local[perm, 0]
        va, vb, vd = verts[_TETRA_A], verts[_TETRA_B], verts[_TETRA_D]
        normals = cross3(vd - va, vb - va)
        norm2 = dot3(normals, normals)
        ok = (norm2 > MINVAL2) & (norm2 < MAXVAL2)
        scaled = normals * (1 / _sqrt(jnp.where(ok, norm2, 1.0)))[:, None]
        normals = jnp.where(ok[:, None], scaled, normals)
        dists = jnp.where(ok, dot3(normals, va), MAX_LIMIT)
        on_hull = jnp.any(dists == 0)
        i = jnp.where(dists[0] < dists[1], 0, 1)
        j = jnp.where(dists[2] < dists[3], 2, 3)
        index = jnp.where(dists[i] < dists[j], i, j)
        inside = dists[index] > 0
        normal = normals[index]
        new = _vertex(support1, support2, normal, -normal)
        local_new = local.at[perm[index]].set(new)
        outside = dot3(normal, new[0]) < 0
        i2, j2 = (index + 1) & 3, (index + 2) & 3
        perm_new = perm.at[i2].set(perm[j2]).at[j2].set(perm[i2])
        k_new = k + 1
        exhausted = k_new >= iterations
        # inconclusive: GJK resumes its iteration with the tetrahedron it had
        resume = dict(c, mode=_RESUME, backup=jnp.asarray(False))
        out = dict(c, local=local_new, perm=perm_new, k=k_new)
        out = _select(exhausted, dict(resume, k=k_new), out)
        out = _select(outside, dict(c, mode=_DONE_SEPARATED, k=k), out)
        contained = dict(c, mode=_DONE_INTERSECT, simplex=local[perm], n=jnp.asarray(4))
        out = _select(inside, contained, out)
        return _select(on_hull, resume, out)

    def cond(c):
        running = (c["mode"] == _GJK) & (c["k"] < iterations)
        return running | (c["mode"] == _INTERSECT) | (c["mode"] == _RESUME)

    def body(c):
        return _select(c["mode"] == _INTERSECT, intersect_step(c), gjk_step(c))

    zero_simplex = jnp.zeros((4, 3, 3))
    init = dict(
        simplex=zero_simplex, n=jnp.asarray(0), k=jnp.asarray(0), xk=x_k, xnorm=x_norm,
        xnorm_prev=jnp.asarray(0.0), lam=jnp.zeros(4), mode=jnp.asarray(_GJK),
        backup=jnp.logical_not(get_dist), local=zero_simplex, perm=jnp.arange(4),
    )  # fmt: skip
    c = while_loop(cond, body, init)

    n, lam, simplex, xk, xnorm = c["n"], c["lam"], c["simplex"], c["xk"], c["xnorm"]
    w1 = jnp.where(n > 0, lincomb(lam, n, simplex[:, 1]), x1)
    w2 = jnp.where(n > 0, lincomb(lam, n, simplex[:, 2]), x2)
    final = gjk_support(xk, xnorm)
    separated = (xnorm > 0) & (dot3(xk, final[0]) > 0)
    dist = jnp.where((n == 4) & ~separated, 0.0, xnorm)
    normal_end = GJKResult(w1, w2, dist, separated, simplex, n)
    early = GJKResult(x1, x2, jnp.asarray(MAX_LIMIT), jnp.asarray(True), simplex, jnp.asarray(0))
    contained = GJKResult(x1, x2, jnp.asarray(0.0), jnp.asarray(False), simplex, jnp.asarray(4))
    mode = c["mode"]
    out = _select(mode == _DONE_SEPARATED, early, normal_end)
    return _select(mode == _DONE_INTERSECT, contained, out)


def _select(condition, a, b):
    """a where condition (a scalar) else b, leaf by leaf (pytrees of the same structure)."""
    return jax.tree.map(lambda x, y: jnp.where(condition, x, y), a, b)
