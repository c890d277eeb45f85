"""Distance and penetration of two convex shapes given by their support functions.

A convex shape here is a *core* (a point, a segment, a box, a solid cylinder or the convex
hull of a vertex set) swept by a sphere of radius ``margin`` (a sphere is a point core with
its radius, a capsule a segment core with its radius). Its support function s(d) is the
core's point farthest along d. Two shapes A and B are compared through their Minkowski
difference M = B - A, whose support is s_B(d) - s_A(-d): the cores are apart by the
distance of M from the origin, and overlap when M contains the origin.

* **Separated cores**: GJK, the distance algorithm of Gilbert, Johnson and Keerthi (IEEE J.
  Robotics and Automation 4(2), 1988), the closest point of M to the origin by a simplex of
  at most four support points that moves towards the origin; the closest point of each
  simplex by its sub-simplices (all fifteen of a tetrahedron: the closest point of the hull
  is the projection onto the one whose barycentric coordinates are all positive and that
  lies nearest). Exact after finitely many steps on polytopes (box, hull, segment, point);
  linearly convergent on the cylinder's round surfaces.
* **Overlapping cores**: MPR, Minkowski portal refinement (G. Snethen, "XenoCollide:
  complex collision made simple", Game Programming Gems 7, 2008), as libccd implements it
  (``ccdMPRPenetration``, MuJoCo's convex collision with ``<flag nativeccd="disable"/>``):
  the ray from an interior point of M (the difference of the shapes' centres) through the
  origin is followed to M's surface by a triangle of support points (the portal), refined
  until a support point in its normal direction no longer moves it; the depth and normal
  are those of the portal's point closest to the origin. For shallow contact (resting, the
  compliant law's range) it is the minimum translation distance wherever the ray leaves M
  through the face or surface patch nearest the origin; MuJoCo's default (nativeccd's EPA,
  van den Bergen 2001) gives the minimum translation distance everywhere. Deep
  penetrations near an edge of M can differ (MPR's normal is then that of the face the ray
  crosses).

Both loops run a fixed number of iterations (:data:`GJK_ITERATIONS`,
:data:`MPR_ITERATIONS`; converged iterations leave the state unchanged) on values without
gradients, elementwise, with no data-dependent shapes. What they find is the witness
simplex: the support directions d_i and barycentric weights w_i of the closest point, and
the normal n. The result is then evaluated again from the live inputs: the witness points
x_A = sum w_i s_A(-d_i), x_B = sum w_i s_B(d_i) and gap = n . (x_B - x_A) - margin_A -
margin_B, whose derivative at fixed witness and normal is the distance's derivative (the
envelope theorem: the witness points move with the shapes; exact for the GJK distance and
for a minimum translation distance). NaN-safe: every normalisation and division has a
fallback for zero length (coincident centres, touching cores, parallel edges).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .._small import dot, mv, row_vec_mat

#: GJK iterations (each adds one support point; MuJoCo's ``ccd_iterations`` is 35).
GJK_ITERATIONS = 40
#: MPR portal-discovery and refinement iterations (each).
MPR_ITERATIONS = 40
_REL_TOL = 1e-12  # convergence, relative to the pair's size
_TINY = 1e-30


class Convex(NamedTuple):
    """One convex shape at its world pose: ``support(d)`` (world point of its core farthest
    along d; d need not be unit), ``centre`` (an interior point of the core), ``margin``
    (the radius swept around the core) and ``scale`` (a length of the size of the shape)."""

    support: object
    centre: jax.Array
    margin: jax.Array
    scale: jax.Array


# ----------------------------------------------------------------------------- shapes


def _sign(x):
    return jnp.where(x >= 0, 1.0, -1.0)


def point(p, r) -> Convex:
    """A sphere of radius ``r`` about ``p``."""
    return Convex(lambda d: p + 0.0 * d, p, r, r)


def segment(p, R, r, half) -> Convex:
    """A capsule: the segment p +- half R[:, 2], radius ``r``."""
    axis = R[:, 2]

    def support(d):
        return p + (half * _sign(dot(axis, d)))[..., None] * axis

    return Convex(support, p, r, r + half)


def box(p, R, half) -> Convex:
    """A box of half edges ``half`` (3,) along R's columns."""

    def support(d):
        return p + mv(R, half * _sign(row_vec_mat(d, R)))

    return Convex(support, p, jnp.zeros(()), jnp.min(half))


def cylinder(p, R, radius, half) -> Convex:
    """A solid cylinder of ``radius``, half length ``half`` along R[:, 2] (the support of a
    direction along the axis: the cap's centre)."""

    def support(d):
        local = row_vec_mat(d, R)
        rho2 = local[0] ** 2 + local[1] ** 2
        ok = rho2 > _TINY
        scale = jnp.where(ok, radius / jnp.sqrt(jnp.where(ok, rho2, 1.0)), 0.0)
        return p + mv(R, jnp.stack([scale * local[0], scale * local[1], half * _sign(local[2])]))

    return Convex(support, p, jnp.zeros(()), jnp.minimum(radius, half))


def hull(p, R, vertices) -> Convex:
    """The convex hull of ``vertices`` (n, 4): rows of x, y, z in the shape frame and a
    weight, 1 for a hull vertex and 0 for the first row (an interior point, the centre of
    MPR's ray) and for padding (repeats of a vertex: a group stacks meshes of different
    vertex counts). Neither changes the support, the vertex of largest projection,
    selected by a one-hot mask (an elementwise product, no gather)."""
    xyz = vertices[:, :3]
    centre = xyz[0]
    extent = jnp.max(jnp.abs(xyz - centre))

    def support(d):
        local = row_vec_mat(d, R)
        score = xyz[:, 0] * local[0] + xyz[:, 1] * local[1] + xyz[:, 2] * local[2]
        one = jnp.arange(xyz.shape[0]) == jnp.argmax(score)
        return p + mv(R, jnp.sum(jnp.where(one[:, None], xyz, 0.0), axis=0))

    return Convex(support, p + mv(R, centre), jnp.zeros(()), extent)


# ----------------------------------------------------------------------------- simplices

_EDGES = [(i, j) for i in range(4) for j in range(i + 1, 4)]
_TRIANGLES = [(i, j, k) for i in range(4) for j in range(i + 1, 4) for k in range(j + 1, 4)]


def _det(a, b, c):
    return dot(a, jnp.cross(b, c))


def closest_of_simplex(W, valid, tiny):
    """The point of the convex hull of the valid rows of W (4, 3) closest to the origin:
    (weights (4,), the rows it uses (4,), the point (3,)). Each of the fifteen sub-simplices
    gives the projection of the origin onto its affine hull; the nearest of those with all
    barycentric coordinates positive is the answer (a vertex always qualifies)."""
    cands = []  # (weights (4,), used (4,), ok)
    eye = jnp.eye(4, dtype=W.dtype)
    for i in range(4):
        cands.append((eye[i], eye[i] > 0, valid[i]))
    for i, j in _EDGES:
        e = W[j] - W[i]
        ee = dot(e, e)
        ok = valid[i] & valid[j] & (ee > tiny)
        t = -dot(W[i], e) / jnp.where(ok, ee, 1.0)
        w = (1.0 - t) * eye[i] + t * eye[j]
        cands.append((w, (eye[i] + eye[j]) > 0, ok & (t > 0) & (t < 1)))
    for i, j, k in _TRIANGLES:
        n = jnp.cross(W[j] - W[i], W[k] - W[i])
        nn = dot(n, n)
        ok = valid[i] & valid[j] & valid[k] & (nn > tiny * tiny)
        inv = 1.0 / jnp.where(ok, nn, 1.0)
        li = dot(n, jnp.cross(W[j], W[k])) * inv
        lj = dot(n, jnp.cross(W[k], W[i])) * inv
        lk = dot(n, jnp.cross(W[i], W[j])) * inv
        w = li * eye[i] + lj * eye[j] + lk * eye[k]
        used = (eye[i] + eye[j] + eye[k]) > 0
        cands.append((w, used, ok & (li > 0) & (lj > 0) & (lk > 0)))
    vol = _det(W[1] - W[0], W[2] - W[0], W[3] - W[0])
    ok4 = jnp.all(valid) & (jnp.abs(vol) > tiny**1.5)
    inv = 1.0 / jnp.where(ok4, vol, 1.0)
    zero = jnp.zeros(3, W.dtype)
    lam = []
    for i in range(4):
        Wi = [W[k] if k != i else zero for k in range(4)]
        lam.append(_det(Wi[1] - Wi[0], Wi[2] - Wi[0], Wi[3] - Wi[0]) * inv)
    lam = jnp.stack(lam)
    cands.append((lam, jnp.ones(4, bool), ok4 & jnp.all(lam > 0)))
    weights = jnp.stack([c[0] for c in cands])  # (15, 4)
    used = jnp.stack([c[1] for c in cands])
    ok = jnp.stack([c[2] for c in cands])
    points = mv(jnp.swapaxes(jnp.broadcast_to(W, (15, 4, 3)), -1, -2), weights)  # (15, 3)
    dist2 = jnp.where(ok, dot(points, points), jnp.inf)
    one = jnp.arange(15) == jnp.argmin(dist2)
    pick = jnp.sum(jnp.where(one[:, None], weights, 0.0), axis=0)
    use = jnp.any(one[:, None] & used, axis=0)
    return jnp.where(use, pick, 0.0), use, jnp.sum(jnp.where(one[:, None], points, 0.0), axis=0)


# ----------------------------------------------------------------------------- GJK


def _support_m(a: Convex, b: Convex, d):
    return b.support(d) - a.support(-d)


def _gjk(a: Convex, b: Convex, size):
    """GJK on the cores: (directions (4, 3), weights (4,), closest point v of M (3,))."""
    tiny = (1e-14 * size) ** 2
    c = b.centre - a.centre
    d0 = jnp.where(dot(c, c) > tiny, -c, jnp.array([1.0, 0.0, 0.0]))
    w0 = _support_m(a, b, d0)
    valid = jnp.arange(4) == 0
    D = jnp.where(valid[:, None], d0, 0.0)
    W = jnp.where(valid[:, None], w0, 0.0)
    lam = valid.astype(W.dtype)
    slot = jnp.arange(4)

    def step(_, state):
        D, W, valid, lam, v, done = state
        vv = dot(v, v)
        d = -v
        w = _support_m(a, b, d)
        stalled = vv - dot(v, w) <= _REL_TOL * jnp.maximum(vv, tiny)
        finish = done | stalled | (vv <= tiny)
        free = slot == jnp.argmin(valid)
        D1 = jnp.where(free[:, None], d, D)
        W1 = jnp.where(free[:, None], w, W)
        lam1, valid1, v1 = closest_of_simplex(W1, valid | free, tiny)
        keep = finish
        return (
            jnp.where(keep, D, D1),
            jnp.where(keep, W, W1),
            jnp.where(keep, valid, valid1),
            jnp.where(keep, lam, lam1),
            jnp.where(keep, v, v1),
            finish,
        )

    state = (D, W, valid, lam, w0, jnp.zeros((), bool))
    D, W, valid, lam, v, _ = jax.lax.fori_loop(0, GJK_ITERATIONS, step, state)
    return D, jnp.where(valid, lam, 0.0), v


# ----------------------------------------------------------------------------- MPR


def _unit(v, fallback):
    n2 = dot(v, v)
    ok = n2 > _TINY
    return jnp.where(ok, v / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


def _mpr(a: Convex, b: Convex, size):
    """MPR on overlapping cores (libccd's ccdMPRPenetration): (the portal's directions
    (3, 3), the weights of its point closest to the origin (3,), that point p (3,)); the
    depth is |p| and B leaves A along -p."""
    tiny = (1e-14 * size) ** 2
    v0 = b.centre - a.centre
    v0 = jnp.where(dot(v0, v0) > tiny, v0, v0 + jnp.array([1e-9, 0.0, 0.0]) * size)
    ex = jnp.array([1.0, 0.0, 0.0])
    d1 = _unit(-v0, ex)
    w1 = _support_m(a, b, d1)
    cross = jnp.cross(v0, w1)
    on_ray = dot(cross, cross) <= tiny * tiny  # the origin on the line v0-w1 (libccd: 1, 2)
    d2 = _unit(cross, _unit(jnp.cross(d1, ex) + jnp.cross(d1, jnp.array([0.0, 1.0, 0.0])), ex))
    w2 = _support_m(a, b, d2)
    n = _unit(jnp.cross(w1 - v0, w2 - v0), d2)
    flip = dot(n, v0) > 0
    d1, d2 = jnp.where(flip, d2, d1), jnp.where(flip, d1, d2)
    w1, w2 = jnp.where(flip, w2, w1), jnp.where(flip, w1, w2)
    n = jnp.where(flip, -n, n)

    def discover(_, state):
        d1, w1, d2, w2, d3, w3, n, ready = state
        d = n
        w = _support_m(a, b, d)
        out_2 = dot(jnp.cross(w1, w), v0) < -tiny  # outside (v1, v0, v3): v3 replaces v2
        out_1 = ~out_2 & (dot(jnp.cross(w, w2), v0) < -tiny)  # outside (v3, v0, v2)
        moved = (out_1 | out_2) & ~ready
        d1n = jnp.where(moved & out_1, d, d1)
        w1n = jnp.where(moved & out_1, w, w1)
        d2n = jnp.where(moved & out_2, d, d2)
        w2n = jnp.where(moved & out_2, w, w2)
        nn = _unit(jnp.cross(w1n - v0, w2n - v0), n)
        now_ready = ready | ~(out_1 | out_2)
        return (
            d1n, w1n, d2n, w2n,
            jnp.where(ready, d3, d), jnp.where(ready, w3, w),
            jnp.where(moved, nn, n), now_ready,
        )  # fmt: skip

    state = (d1, w1, d2, w2, d1, w1, n, jnp.zeros((), bool))
    d1, w1, d2, w2, d3, w3, n, _ = jax.lax.fori_loop(0, MPR_ITERATIONS, discover, state)

    def refine(_, state):
        D, W, done = state
        n = _unit(jnp.cross(W[1] - W[0], W[2] - W[0]), _unit(-v0, ex))
        w = _support_m(a, b, n)
        reach = jnp.min(dot(w, n) - dot(W, n)) <= _REL_TOL * size
        finish = done | reach
        v4v0 = jnp.cross(w, v0)
        first = dot(W[0], v4v0) > 0
        second = dot(W[1], v4v0) > 0
        third = dot(W[2], v4v0) > 0
        # libccd's expandPortal: which portal point the new support point replaces
        k = jnp.where(first, jnp.where(second, 0, 2), jnp.where(third, 1, 0))
        one = (jnp.arange(3) == k) & ~finish
        return jnp.where(one[:, None], n, D), jnp.where(one[:, None], w, W), finish

    D = jnp.stack([d1, d2, d3])
    W = jnp.stack([w1, w2, w3])
    D, W, _ = jax.lax.fori_loop(0, MPR_ITERATIONS, refine, (D, W, on_ray))
    D = jnp.where(on_ray, jnp.stack([d1, d1, d1]), D)
    W = jnp.where(on_ray, jnp.stack([w1, w1, w1]), W)
    lam, _, p = closest_of_simplex(jnp.concatenate([W, W[:1]]), jnp.arange(4) < 3, tiny)
    return D, lam[:3], p


# ----------------------------------------------------------------------------- the pair


def collide(a: Convex, b: Convex):
    """(gap, point, normal) of shapes A and B: the signed distance of their surfaces
    (negative: penetration), the point midway between the two surfaces and the unit
    normal from A to B (module docstring)."""
    sg = jax.lax.stop_gradient
    a0 = Convex(a.support, sg(a.centre), sg(a.margin), sg(a.scale))
    b0 = Convex(b.support, sg(b.centre), sg(b.margin), sg(b.scale))
    c = b0.centre - a0.centre
    size = jnp.maximum(a0.scale, b0.scale) + jnp.sqrt(dot(c, c))
    D_g, lam_g, v = _gjk(_frozen(a0), _frozen(b0), size)
    D_g, lam_g, v = sg(D_g), sg(lam_g), sg(v)
    inside = dot(v, v) <= (1e-10 * size) ** 2
    D_m, lam_m, p = (sg(x) for x in _mpr(_frozen(a0), _frozen(b0), size))
    fallback = _unit(c, jnp.array([0.0, 0.0, 1.0]))
    n = jnp.where(inside, _unit(-p, fallback), _unit(v, fallback))
    D = jnp.where(inside, jnp.concatenate([D_m, D_m[:1]]), D_g)
    lam = jnp.where(inside, jnp.concatenate([lam_m, jnp.zeros(1)]), lam_g)
    xa = jnp.sum(lam[:, None] * jax.vmap(a.support)(-D), axis=0)
    xb = jnp.sum(lam[:, None] * jax.vmap(b.support)(D), axis=0)
    gap = dot(n, xb - xa) - a.margin - b.margin
    point = 0.5 * (xa + a.margin * n + xb - b.margin * n)
    return gap, point, n


def _frozen(shape: Convex) -> Convex:
    """The shape with its support evaluated on gradient-free inputs (the search loops)."""
    return Convex(
        lambda d: jax.lax.stop_gradient(shape.support(d)), shape.centre, shape.margin,
        shape.scale,
    )  # fmt: skip
