"""MuJoCo's native convex collision detection (``engine_collision_gjk.c``, ``mjc_ccd``) in
JAX: GJK for distances (with its ``gjkIntersect`` fallback) and EPA for penetration depth,
for one contact per call (``max_contacts = 1``, MuJoCo's setting for every pair of smooth
geoms).

GJK is Montanari et al., "Improving the GJK algorithm for faster and more reliable distance
queries between convex objects", ACM ToG 36(3), 2017 (signed-volume subdistance); EPA is van
den Bergen's expanding polytope with MuJoCo's initial polytopes (``polytope2/3/4``), face map
and depth-first horizon. Every loop keeps MuJoCo's iteration order, tie-breaking and caps
(``opt.ccd_iterations``, ``opt.ccd_tolerance``) as ``lax.while_loop`` over fixed-size
buffers: the polytope holds ``5 + iterations`` vertices and ``6 * iterations`` faces, as
MuJoCo's ``mjc_ccdSize`` allocates, and the horizon search runs on an explicit stack.

A support function here is ``support(dir) -> point`` of one geom (margin included, as
MuJoCo's ``support`` adds half the margin along ``dir``); a Minkowski-difference vertex is a
(3, 3) array of rows (vert = vert1 - vert2, vert1, vert2).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ... import _config  # noqa: F401  (float64)
from .common import MINVAL

MINVAL2 = MINVAL * MINVAL
MAX_LIMIT = 1.7976931348623157e308  # DBL_MAX, MuJoCo's mjMAX_LIMIT
MAXVAL2 = 1e10 * 1e10  # mjMAXVAL squared
_MINDIST = MINVAL2  # mjMINDIST2/3/4 in double precision


# --------------------------------------------------------------------------------------------
# vector helpers with MuJoCo's order of operations (the sums are spelled out so that the
# rounding is the C code's)


def dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross3(a, b):
    return jnp.stack(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )


def det3(v1, v2, v3):
    return (
        v1[0] * (v2[1] * v3[2] - v2[2] * v3[1])
        + v1[1] * (v2[2] * v3[0] - v2[0] * v3[2])
        + v1[2] * (v2[0] * v3[1] - v2[1] * v3[0])
    )


def _sqrt(x):
    return jnp.sqrt(jnp.maximum(x, 0.0))


def _div(num, den):
    """num / den, with den replaced by 1 where it is 0 (callers mask that branch)."""
    return num / jnp.where(den == 0, 1.0, den)


def lincomb(coef, n, vs):
    """MuJoCo's ``lincomb``: sum of coef[i] * vs[i] over the first n (0..4) terms."""
    terms = [coef[i] * vs[i] for i in range(4)]
    out = jnp.zeros(3)
    partial = []
    acc = None
    for t in terms:
        acc = t if acc is None else acc + t
        partial.append(acc)
    for count in range(1, 5):
        out = jnp.where(n == count, partial[count - 1], out)
    return out


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
    """MuJoCo's ``projectOriginPlane``: (projection of the origin, 1 where degenerate)."""
    diff21, diff31, diff32 = v2 - v1, v3 - v1, v3 - v2
    candidates = []
    for n_vec, base in ((cross3(diff32, diff21), v2), (cross3(diff21, diff31), v1),
                        (cross3(diff31, diff32), v3)):  # fmt: skip
        nv, nn = dot3(n_vec, base), dot3(n_vec, n_vec)
        candidates.append((n_vec * _div(nv, nn), nv, nn))
    (r1, nv1, nn1), (r2, nv2, nn2), (r3, _, nn3) = candidates
    take1 = (nv1 != 0) & (nn1 > MINVAL)
    take2 = (nv2 != 0) & (nn2 > MINVAL)
    res = jnp.where(take1, r1, jnp.where(take2, r2, r3))
    degenerate = (nn1 == 0) | (~take1 & (nn2 == 0))
    return res, degenerate


def _s1d(s1, s2):
    diff = s2 - s1
    scl = -(dot3(s2, diff) / dot3(diff, diff))
    p_o = s2 + scl * diff
    mu = s1 - s2
    index, mu_max = 0, mu[0]
    take = jnp.abs(mu[1]) >= jnp.abs(mu_max)
    index, mu_max = jnp.where(take, 1, index), jnp.where(take, mu[1], mu_max)
    take = jnp.abs(mu[2]) >= jnp.abs(mu_max)
    index, mu_max = jnp.where(take, 2, index), jnp.where(take, mu[2], mu_max)
    c1 = p_o[index] - s2[index]
    c2 = s1[index] - p_o[index]
    same = _same_sign(mu_max, c1) & _same_sign(mu_max, c2)
    return jnp.where(same, _div(c1, mu_max), 0.0), jnp.where(same, _div(c2, mu_max), 1.0)


def _minors(s1, s2, s3):
    m14 = (
        s2[1] * s3[2]
        - s2[2] * s3[1]
        - s1[1] * s3[2]
        + s1[2] * s3[1]
        + s1[1] * s2[2]
        - s1[2] * s2[1]
    )  # noqa: E501
    m24 = (
        s2[0] * s3[2]
        - s2[2] * s3[0]
        - s1[0] * s3[2]
        + s1[2] * s3[0]
        + s1[0] * s2[2]
        - s1[2] * s2[0]
    )  # noqa: E501
    m34 = (
        s2[0] * s3[1]
        - s2[1] * s3[0]
        - s1[0] * s3[1]
        + s1[1] * s3[0]
        + s1[0] * s2[1]
        - s1[1] * s2[0]
    )  # noqa: E501
    mu1, mu2, mu3 = jnp.abs(m14), jnp.abs(m24), jnp.abs(m34)
    first = (mu1 >= mu2) & (mu1 >= mu3)
    second = ~first & (mu2 >= mu3)
    m_max = jnp.where(first, m14, jnp.where(second, m24, m34))
    x = jnp.where(first, 1, 0)
    y = jnp.where(first | second, 2, 1)
    return m_max, x, y


def _area_cofactors(p, v1, v2, v3, x, y):
    c31 = p[x] * v2[y] + p[y] * v3[x] + v2[x] * v3[y] - p[x] * v3[y] - p[y] * v2[x] - v3[x] * v2[y]
    c32 = p[x] * v3[y] + p[y] * v1[x] + v3[x] * v1[y] - p[x] * v1[y] - p[y] * v3[x] - v1[x] * v3[y]
    c33 = p[x] * v1[y] + p[y] * v2[x] + v1[x] * v2[y] - p[x] * v2[y] - p[y] * v1[x] - v2[x] * v1[y]
    return c31, c32, c33


def _s2d(s1, s2, s3):
    p_o, degenerate = _project_origin_plane(s1, s2, s3)
    m_max, x, y = _minors(s1, s2, s3)
    c31, c32, c33 = _area_cofactors(p_o, s1, s2, s3, x, y)
    comp1, comp2, comp3 = _same_sign(m_max, c31), _same_sign(m_max, c32), _same_sign(m_max, c33)
    inside = comp1 & comp2 & comp3
    lam = jnp.stack([_div(c31, m_max), _div(c32, m_max), _div(c33, m_max)])

    # the nearest edge among those whose cofactor sign differs (first minimum wins)
    best, dmin = jnp.zeros(3), jnp.asarray(MAX_LIMIT)
    for first, comp, (a, b), (ia, ib) in (
        (True, comp1, (s2, s3), (1, 2)),
        (False, comp2, (s1, s3), (0, 2)),
        (False, comp3, (s1, s2), (0, 1)),
    ):
        la, lb = _s1d(a, b)
        point = la * a + lb * b
        d = dot3(point, point)
        take = ~comp if first else ~comp & (d < dmin)
        cand = jnp.zeros(3).at[ia].set(la).at[ib].set(lb)
        best = jnp.where(take, cand, best)
        dmin = jnp.where(take, d, dmin)
    lam = jnp.where(inside, lam, best)
    l1, l2 = _s1d(s1, s2)
    return jnp.where(degenerate, jnp.stack([l1, l2, 0.0]), lam)


def _s3d(s1, s2, s3, s4):
    c41, c42, c43, c44 = -det3(s2, s3, s4), det3(s1, s3, s4), -det3(s1, s2, s4), det3(s1, s2, s3)
    m_det = c41 + c42 + c43 + c44
    comps = [_same_sign(m_det, c) for c in (c41, c42, c43, c44)]
    inside = comps[0] & comps[1] & comps[2] & comps[3]
    lam = jnp.stack([_div(c, m_det) for c in (c41, c42, c43, c44)])
    s = (s1, s2, s3, s4)
    best, dmin = jnp.zeros(4), jnp.asarray(MAX_LIMIT)
    for drop in range(4):
        keep = [i for i in range(4) if i != drop]
        l2d = _s2d(*(s[i] for i in keep))
        point = l2d[0] * s[keep[0]] + l2d[1] * s[keep[1]] + l2d[2] * s[keep[2]]
        d = dot3(point, point)
        take = ~comps[drop] if drop == 0 else ~comps[drop] & (d < dmin)
        cand = jnp.zeros(4).at[jnp.array(keep)].set(l2d)
        best = jnp.where(take, cand, best)
        dmin = jnp.where(take, d, dmin)
    return jnp.where(inside, lam, best)


def _subdistance(n, verts):
    """Barycentric coordinates (4,) of the point nearest the origin in the n-simplex."""
    s1, s2, s3, s4 = verts
    lam4 = _s3d(s1, s2, s3, s4)
    lam3 = jnp.concatenate([_s2d(s1, s2, s3), jnp.zeros(1)])
    l1, l2 = _s1d(s1, s2)
    lam2 = jnp.stack([l1, l2, 0.0, 0.0])
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


def gjk(support1, support2, x1, x2, *, tolerance, iterations: int, dist_cutoff=None):
    """MuJoCo's ``gjk`` from the starting witnesses x1, x2 (the geoms' centres).

    ``dist_cutoff`` None: no distance needed (MuJoCo's ``dist_cutoff = 0``), the search may
    stop at a separating direction and falls back to ``gjkIntersect`` once it holds a
    tetrahedron; else geoms farther apart than the cutoff stop the search as separated.
    """
    get_dist = dist_cutoff is not None
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
        if get_dist:
            separated = (lower > 0) & (lower >= dist_cutoff * xnorm)
        else:
            separated = lower > 0
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
        faces = ((2, 1, 3), (0, 2, 3), (1, 0, 3), (0, 1, 2))
        dists, normals = [], []
        for a, b, d in faces:
            normal = cross3(verts[d] - verts[a], verts[b] - verts[a])
            norm2 = dot3(normal, normal)
            ok = (norm2 > MINVAL2) & (norm2 < MAXVAL2)
            normal = jnp.where(ok, normal * (1 / _sqrt(jnp.where(ok, norm2, 1.0))), normal)
            dists.append(jnp.where(ok, dot3(normal, verts[a]), MAX_LIMIT))
            normals.append(normal)
        dists, normals = jnp.stack(dists), jnp.stack(normals)
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
        backup=jnp.asarray(not get_dist), local=zero_simplex, perm=jnp.arange(4),
    )  # fmt: skip
    c = lax.while_loop(cond, body, init)

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


# --------------------------------------------------------------------------------------------
# EPA


class Polytope(NamedTuple):
    verts: jnp.ndarray  # (nv, 3, 3) Minkowski vertices
    nverts: jnp.ndarray
    face_verts: jnp.ndarray  # (nf, 3) int
    face_adj: jnp.ndarray  # (nf, 3) int
    face_v: jnp.ndarray  # (nf, 3) projection of the origin on the face
    face_dist2: jnp.ndarray  # (nf,)
    face_index: jnp.ndarray  # (nf,) index in map; -1 not in map, -2 deleted
    nfaces: jnp.ndarray
    map: jnp.ndarray  # (nf,) face ids
    nmap: jnp.ndarray
    center: jnp.ndarray


def _empty_polytope(iterations: int) -> Polytope:
    nv, nf = 5 + iterations, 6 * iterations
    zero = jnp.asarray(0)
    return Polytope(
        jnp.zeros((nv, 3, 3)), zero, jnp.zeros((nf, 3), int), jnp.zeros((nf, 3), int),
        jnp.zeros((nf, 3)), jnp.zeros(nf), jnp.full(nf, -1), zero, jnp.zeros(nf, int), zero,
        jnp.zeros(3),
    )  # fmt: skip


def _insert(pt: Polytope, vertex) -> tuple[Polytope, jnp.ndarray]:
    n = pt.nverts
    return pt._replace(verts=pt.verts.at[n].set(vertex), nverts=n + 1), n


def _epa_vertex(support1, support2, d, dnorm):
    """MuJoCo's ``epaSupport`` direction: d / |d|, or (1, 0, 0) for a tiny d."""
    ok = dnorm > MINVAL
    direction = jnp.where(ok, d / jnp.where(ok, dnorm, 1.0), jnp.array([1.0, 0.0, 0.0]))
    return _vertex(support1, support2, direction, direction * -1)


def _attach(pt: Polytope, v1, v2, v3, adj1, adj2, adj3):
    """MuJoCo's ``attachFace``: (polytope, squared distance of the face, 0 if degenerate)."""
    f = pt.nfaces
    pv = pt.verts[:, 0]
    proj, degenerate = _project_origin_plane(pv[v3], pv[v2], pv[v1])
    outward = pv[v1] - pt.center
    proj = jnp.where(dot3(proj, outward) < 0, proj * -1, proj)
    dist2 = jnp.where(degenerate, 0.0, dot3(proj, proj))
    pt = pt._replace(
        face_verts=pt.face_verts.at[f].set(jnp.stack([v1, v2, v3])),
        face_adj=pt.face_adj.at[f].set(
            jnp.stack([jnp.asarray(adj1), jnp.asarray(adj2), jnp.asarray(adj3)])
        ),  # fmt: skip
        face_v=pt.face_v.at[f].set(proj),
        face_dist2=pt.face_dist2.at[f].set(dist2),
        face_index=pt.face_index.at[f].set(-1),
        nfaces=f + 1,
    )
    return pt, dist2


def _map_faces(pt: Polytope, count: int) -> Polytope:
    ids = jnp.arange(count)
    return pt._replace(
        map=pt.map.at[ids].set(ids), face_index=pt.face_index.at[ids].set(ids), nmap=count
    )


def _tri_affine(v1, v2, v3, p):
    m_max, x, y = _minors(v1, v2, v3)
    c31, c32, c33 = _area_cofactors(p, v1, v2, v3, x, y)
    return jnp.stack([c31 / m_max, c32 / m_max, c33 / m_max])


def _tri_point_intersect(v1, v2, v3, p):
    lam = _tri_affine(v1, v2, v3, p)
    pr = v1 * lam[0] + v2 * lam[1] + v3 * lam[2]
    diff = pr - p
    return ~jnp.any(lam < 0) & (_sqrt(dot3(diff, diff)) < MINVAL)


def _same_side(p0, p1, p2, p3):
    n = cross3(p1 - p0, p2 - p0)
    dot1 = dot3(n, p3 - p0)
    dot2 = dot3(n, p0 * -1)
    return ((dot1 > 0) & (dot2 > 0)) | ((dot1 < 0) & (dot2 < 0))


def _test_tetra(p0, p1, p2, p3):
    return (
        _same_side(p0, p1, p2, p3)
        & _same_side(p1, p2, p3, p0)
        & _same_side(p2, p3, p0, p1)
        & _same_side(p3, p0, p1, p2)
    )


def _rotmat(axis):
    n = _sqrt(dot3(axis, axis))
    u1, u2, u3 = axis[0] / n, axis[1] / n, axis[2] / n
    sin, cos = 0.86602540378, -0.5
    return jnp.array([
        [cos + u1 * u1 * (1 - cos), u1 * u2 * (1 - cos) - u3 * sin, u1 * u3 * (1 - cos) + u2 * sin],
        [u2 * u1 * (1 - cos) + u3 * sin, cos + u2 * u2 * (1 - cos), u2 * u3 * (1 - cos) - u1 * sin],
        [u1 * u3 * (1 - cos) - u2 * sin, u2 * u3 * (1 - cos) + u1 * sin, cos + u3 * u3 * (1 - cos)],
    ])  # fmt: skip


def _matvec(mat, v):
    return jnp.stack([mat[i, 0] * v[0] + mat[i, 1] * v[1] + mat[i, 2] * v[2] for i in range(3)])


def _ray_triangle(v1, v2, v3, v4, v5):
    d12, d13, d14, d15 = v2 - v1, v3 - v1, v4 - v1, v5 - v1
    vol1, vol2, vol3 = det3(d13, d14, d12), det3(d14, d15, d12), det3(d15, d13, d12)
    pos = (vol1 >= 0) & (vol2 >= 0) & (vol3 >= 0)
    neg = (vol1 <= 0) & (vol2 <= 0) & (vol3 <= 0)
    return pos | neg


def _polytope3(support1, support2, simplex, iterations: int):
    """MuJoCo's ``polytope3`` on a fresh polytope: (polytope, ok)."""
    v1, v2, v3 = simplex[0, 0], simplex[1, 0], simplex[2, 0]
    pt = _empty_polytope(iterations)
    pt = pt._replace(center=((v1 + v2) + v3) * (1.0 / 3.0))
    n = cross3(v2 - v1, v3 - v1)
    n_norm = _sqrt(dot3(n, n))
    bad_normal = n_norm < MINVAL
    for i in range(3):
        pt, _ = _insert(pt, simplex[i])
    pt, _ = _insert(pt, _epa_vertex(support1, support2, n * -1, n_norm))  # v5: index 3
    pt, _ = _insert(pt, _epa_vertex(support1, support2, n, n_norm))  # v4: index 4
    v5, v4 = pt.verts[3, 0], pt.verts[4, 0]
    invalid = _tri_point_intersect(v1, v2, v3, v4) | _tri_point_intersect(v1, v2, v3, v5)
    # (MuJoCo's test that the hexahedron holds the origin is skipped: its distance is 0 here)
    on_face = jnp.asarray(False)
    # vertex ids in MuJoCo's order: v1i 0, v2i 1, v3i 2, v5i 3, v4i 4
    for a, b, c, j1, j2, j3 in (
        (4, 0, 1, 1, 3, 2), (4, 2, 0, 2, 4, 0), (4, 1, 2, 0, 5, 1),
        (3, 1, 0, 5, 0, 4), (3, 0, 2, 3, 1, 5), (3, 2, 1, 4, 2, 3),
    ):  # fmt: skip
        pt, d2 = _attach(pt, a, b, c, j1, j2, j3)
        on_face = on_face | (d2 < _MINDIST)
    pt = _map_faces(pt, 6)
    return pt, ~(bad_normal | invalid | on_face)


def _polytope2(support1, support2, simplex, iterations: int):
    """MuJoCo's ``polytope2``: (polytope, ok, fallback, 3-simplex for polytope3)."""
    v1, v2 = simplex[0, 0], simplex[1, 0]
    pt = _empty_polytope(iterations)
    pt = pt._replace(center=(v1 + v2) * 0.5)
    diff = v2 - v1
    value, index = jnp.asarray(MAX_LIMIT), jnp.asarray(0)
    for i in range(3):
        take = jnp.abs(diff[i]) < value
        value, index = jnp.where(take, jnp.abs(diff[i]), value), jnp.where(take, i, index)
    e = jnp.zeros(3).at[index].set(1.0)
    d1 = cross3(e, diff)
    rot = _rotmat(diff)
    d2 = _matvec(rot, d1)
    d3 = _matvec(rot, d2)
    pt, _ = _insert(pt, simplex[0])
    pt, _ = _insert(pt, simplex[1])
    for d in (d1, d2, d3):
        pt, _ = _insert(pt, _epa_vertex(support1, support2, d, _sqrt(dot3(d, d))))
    fallback = jnp.asarray(False)
    tri = jnp.zeros((3,), int)
    for a, b, c, j1, j2, j3 in (
        (0, 2, 3, 1, 3, 2), (0, 4, 2, 2, 4, 0), (0, 3, 4, 0, 5, 1),
        (1, 3, 2, 5, 0, 4), (1, 2, 4, 3, 1, 5), (1, 4, 3, 4, 2, 3),
    ):  # fmt: skip
        pt, d2_ = _attach(pt, a, b, c, j1, j2, j3)
        first = ~fallback & (d2_ < _MINDIST)
        tri = jnp.where(first, jnp.array([a, b, c]), tri)
        fallback = fallback | first
    p = pt.verts[:, 0]
    convex = _ray_triangle(p[0], p[1], p[2], p[3], p[4])
    pt = _map_faces(pt, 6)
    return pt, convex, fallback, pt.verts[tri]


def _polytope4(simplex, iterations: int):
    """MuJoCo's ``polytope4``: (polytope, ok, fallback, 3-simplex for polytope3)."""
    pt = _empty_polytope(iterations)
    for i in range(4):
        pt, _ = _insert(pt, simplex[i])
    p = pt.verts[:, 0]
    pt = pt._replace(center=(((p[0] + p[1]) + p[2]) + p[3]) * 0.25)
    fallback = jnp.asarray(False)
    tri = jnp.zeros((3,), int)
    for a, b, c, j1, j2, j3 in ((0, 1, 2, 1, 3, 2), (0, 3, 1, 2, 3, 0), (0, 2, 3, 0, 3, 1),
                                (3, 2, 1, 2, 0, 1)):  # fmt: skip
        pt, d2 = _attach(pt, a, b, c, j1, j2, j3)
        first = ~fallback & (d2 < _MINDIST)
        tri = jnp.where(first, jnp.array([a, b, c]), tri)
        fallback = fallback | first
    inside = _test_tetra(p[0], p[1], p[2], p[3])
    pt = _map_faces(pt, 4)
    return pt, inside, fallback, pt.verts[tri]


def _initial_polytope(support1, support2, simplex, nsimplex, iterations: int):
    """The polytope EPA starts from (MuJoCo's ``polytope2/3/4`` by simplex size) and
    whether it could be built."""
    pt2, ok2, fb2, tri2 = _polytope2(support1, support2, simplex, iterations)
    pt4, ok4, fb4, tri4 = _polytope4(simplex, iterations)
    tri = jnp.where(nsimplex == 2, tri2, jnp.where(nsimplex == 4, tri4, simplex[:3]))
    pt3, ok3 = _polytope3(support1, support2, tri, iterations)
    use3 = (nsimplex == 3) | ((nsimplex == 2) & fb2) | ((nsimplex == 4) & fb4)
    pt = _select(nsimplex == 2, pt2, pt4)
    ok = jnp.where(nsimplex == 2, ok2, ok4)
    return _select(use3, pt3, pt), jnp.where(use3, ok3, ok)


def _delete_face(pt: Polytope, f):
    idx = pt.face_index[f]
    in_map = idx >= 0
    last = pt.map[jnp.maximum(pt.nmap - 1, 0)]
    safe_idx = jnp.maximum(idx, 0)
    new_map = jnp.where(in_map, pt.map.at[safe_idx].set(last), pt.map)
    face_index = jnp.where(in_map, pt.face_index.at[last].set(idx), pt.face_index)
    return pt._replace(
        map=new_map,
        face_index=face_index.at[f].set(-2),
        nmap=pt.nmap - in_map.astype(pt.nmap.dtype),
    )


def _get_edge(pt: Polytope, f, vertex):
    verts = pt.face_verts[f]
    return jnp.where(verts[0] == vertex, 0, jnp.where(verts[1] == vertex, 1, 2))


_CONT, _CALL, _RET, _HDONE = range(4)


def _horizon(pt: Polytope, face, w):
    """MuJoCo's ``horizon``/``horizonRec`` (depth first, on an explicit stack): the faces
    visible from w deleted, and the horizon edges (face, edge) in MuJoCo's order."""
    nf = pt.face_dist2.shape[0]
    pt = _delete_face(pt, face)
    # the starting face is a frame whose children are its three edges (k = 1, 2, 3 with
    # e = 2 give edges 0, 1, 2); a recursive frame visits the two edges after its own
    stack = jnp.zeros((nf, 4), int).at[0].set(jnp.stack([face, 2, 1, 4]))
    init = dict(pt=pt, stack=stack, sp=jnp.asarray(1), mode=jnp.asarray(_CONT),
                child=jnp.zeros(2, int), ret=jnp.asarray(0), hidx=jnp.zeros(nf, int),
                hedge=jnp.zeros(nf, int), nedges=jnp.asarray(0))  # fmt: skip

    def step(c):
        pt, stack, sp, mode = c["pt"], c["stack"], c["sp"], c["mode"]
        top = stack[sp - 1]
        f, e, k, kend = top[0], top[1], top[2], top[3]

        # CONT: visit the next child of the top frame, or return from it
        finished = k == kend
        i = (e + k) % 3
        adj = pt.face_adj[f, i]
        alive = pt.face_index[adj] > -2
        adj_edge = _get_edge(pt, adj, pt.face_verts[f, (i + 1) % 3])
        popped = dict(c, sp=sp - 1, ret=jnp.asarray(1), child=jnp.stack([f, e]),
                      mode=jnp.where(sp - 1 == 0, _HDONE, _RET))  # fmt: skip
        call = dict(c, child=jnp.stack([adj, adj_edge]), mode=jnp.asarray(_CALL))
        skip = dict(c, stack=stack.at[sp - 1, 2].add(1))
        cont = _select(finished, popped, _select(alive, call, skip))

        # CALL: a visible face is deleted and searched; else the edge is on the horizon
        cf, ce = c["child"][0], c["child"][1]
        visible = dot3(pt.face_v[cf], w) - pt.face_dist2[cf] > MINVAL
        pushed = dict(c, pt=_delete_face(pt, cf), stack=stack.at[sp].set(jnp.stack([cf, ce, 1, 3])),
                      sp=sp + 1, mode=jnp.asarray(_CONT))  # fmt: skip
        not_visible = dict(c, ret=jnp.asarray(0), mode=jnp.asarray(_RET))
        called = _select(visible, pushed, not_visible)

        # RET: the child's edge joins the horizon if the child was not visible
        n = c["nedges"]
        add = c["ret"] == 0
        returned = dict(
            c,
            hidx=jnp.where(add, c["hidx"].at[n].set(cf), c["hidx"]),
            hedge=jnp.where(add, c["hedge"].at[n].set(ce), c["hedge"]),
            nedges=n + add.astype(n.dtype),
            stack=stack.at[sp - 1, 2].add(1),
            mode=jnp.asarray(_CONT),
        )
        out = _select(mode == _CALL, called, returned)
        return _select(mode == _CONT, cont, out)

    c = lax.while_loop(lambda c: c["mode"] != _HDONE, step, init)
    return c["pt"], c["hidx"], c["hedge"], c["nedges"]


def epa(support1, support2, pt: Polytope, *, tolerance, iterations: int):
    """MuJoCo's ``epa``: (found, x1, x2, dist) with dist = -depth."""
    kmax = min(iterations, 1000)
    maxfaces = 6 * iterations

    def cond(c):
        return ~c["done"] & (c["k"] < kmax)

    def body(c):
        pt = c["pt"]
        pface = c["face"]
        nf = pt.face_dist2.shape[0]
        in_map = jnp.arange(nf) < pt.nmap
        d2 = jnp.where(in_map, pt.face_dist2[pt.map], jnp.inf)
        d2 = jnp.where(jnp.isnan(d2), jnp.inf, d2)
        best = jnp.argmin(d2)
        found = d2[best] < MAX_LIMIT
        face = jnp.where(found, pt.map[best], pface)
        lower2 = jnp.where(found, d2[best], MAX_LIMIT)
        invalid = (lower2 > c["upper2"]) | (face < 0)
        on_hull = lower2 <= 0

        lower = _sqrt(lower2)
        fv = pt.face_v[face]
        w = _epa_vertex(support1, support2, fv, lower)
        pt_w, wi = _insert(pt, w)
        upper_k = dot3(fv, w[0]) / lower
        better = upper_k < c["upper"]
        upper = jnp.where(better, upper_k, c["upper"])
        upper2 = jnp.where(better, upper * upper, c["upper2"])
        converged = upper - lower < tolerance
        no_contact = (c["k"] == 0) & (upper < lower - 1e-10)

        pt_h, hidx, hedge, nedges = _horizon(pt_w, face, w[0])
        broken = nedges < 3
        no_room = nedges > maxfaces - pt_h.nfaces

        def attach_one(a):
            pt, i, failed = a["pt"], a["i"], a["failed"]
            index, edge = hidx[i], hedge[i]
            hverts = pt.face_verts[index]
            v1, v2 = hverts[edge], hverts[(edge + 1) % 3]
            cur = nfaces0 + i
            pt = pt._replace(face_adj=pt.face_adj.at[index, edge].set(cur))
            prev = nfaces0 + (i - 1 + nedges) % nedges
            nxt = nfaces0 + (i + 1) % nedges
            pt, dist2 = _attach(pt, wi, v2, v1, prev, index, nxt)
            fail = dist2 == 0
            store = ~fail & (dist2 >= lower2) & (dist2 <= upper2)
            m = pt.nmap
            pt = _select(store, pt._replace(map=pt.map.at[m].set(cur),
                                            face_index=pt.face_index.at[cur].set(m),
                                            nmap=m + 1), pt)  # fmt: skip
            return dict(pt=pt, i=i + 1, failed=failed | fail)

        nfaces0 = pt_h.nfaces
        attached = lax.while_loop(
            lambda a: ~a["failed"] & (a["i"] < nedges) & ~broken & ~no_room,
            attach_one,
            dict(pt=pt_h, i=jnp.asarray(0), failed=jnp.asarray(False)),
        )
        pt_a, failed = attached["pt"], attached["failed"]
        empty = pt_a.nmap == 0

        # the outcomes in MuJoCo's order of checks
        nothing = dict(c, pt=pt_a, face=jnp.asarray(-1), done=jnp.asarray(True),
                       upper=upper, upper2=upper2)  # fmt: skip
        out = dict(c, pt=pt_a, face=face, upper=upper, upper2=upper2, k=c["k"] + 1, done=empty)
        out = _select(failed, nothing, out)
        out = _select(no_room, dict(c, pt=pt_h, face=face, upper=upper, upper2=upper2,
                                    done=jnp.asarray(True)), out)  # fmt: skip
        out = _select(broken, dict(nothing, pt=pt_h), out)
        stop = dict(c, pt=pt_w, face=jnp.where(no_contact, -1, face), upper=upper,
                    upper2=upper2, done=jnp.asarray(True))  # fmt: skip
        out = _select(converged, stop, out)
        out = _select(on_hull, dict(c, face=face, done=jnp.asarray(True)), out)
        return _select(invalid, dict(c, face=pface, done=jnp.asarray(True)), out)

    init = dict(pt=pt, face=jnp.asarray(-1), k=jnp.asarray(0), done=jnp.asarray(False),
                upper=jnp.asarray(MAX_LIMIT), upper2=jnp.asarray(MAX_LIMIT))  # fmt: skip
    c = lax.while_loop(cond, body, init)
    pt, face = c["pt"], c["face"]
    found = face >= 0
    f = jnp.maximum(face, 0)
    ids = pt.face_verts[f]
    vs = pt.verts[ids]  # (3, 3, 3)
    lam = _tri_affine(vs[0, 0], vs[1, 0], vs[2, 0], pt.face_v[f])
    x1 = lam[0] * vs[0, 1] + lam[1] * vs[1, 1] + lam[2] * vs[2, 1]
    x2 = lam[0] * vs[0, 2] + lam[1] * vs[1, 2] + lam[2] * vs[2, 2]
    return found, x1, x2, -_sqrt(pt.face_dist2[f])
