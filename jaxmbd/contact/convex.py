"""Distance and penetration of two convex shapes given by their support functions.

A convex shape here is a *core* (a point, a segment, a box, a solid cylinder, an ellipsoid
or the convex hull of a vertex set) swept by a sphere of radius ``margin`` (a sphere is a
point core with its radius, a capsule a segment core with its radius). Its support
function s(d) is the core's point farthest along d. Two shapes A and B are compared
through their Minkowski difference M = B - A, whose support is s_B(d) - s_A(-d): the cores
are apart by the distance of M from the origin, and overlap when M contains the origin.

* **Separated cores**: GJK, the distance algorithm of Gilbert, Johnson and Keerthi (IEEE J.
  Robotics and Automation 4(2), 1988), the closest point of M to the origin by a simplex of
  at most four support points that moves towards the origin; the closest point of each
  simplex by its sub-simplices (all fifteen of a tetrahedron: the closest point of the hull
  is the projection onto the one whose barycentric coordinates are all positive and that
  lies nearest). Exact after finitely many steps on polytopes (box, hull, segment, point);
  linearly convergent on round surfaces (the cylinder's side, the ellipsoid).
* **Overlapping cores**: the penetration depth (the minimum translation distance, the
  distance from the origin to M's surface) by EPA, the expanding polytope algorithm (G. van
  den Bergen, "Proximity queries and penetration depth computation on 3D game objects",
  GDC 2001), as MuJoCo's default convex collision (nativeccd) computes it. EPA needs a
  polytope inside M that contains the origin: the tetrahedron of MPR's portal, Minkowski
  portal refinement (G. Snethen, "XenoCollide: complex collision made simple", Game
  Programming Gems 7, 2008; libccd's discoverPortal and refinePortal), whose ray from an
  interior point of M (the difference of the shapes' centres, set slightly off their line
  so that symmetric poses keep the origin off the ray) crosses a triangle of support
  points beyond the origin.

The loops run at most :data:`GJK_ITERATIONS`, :data:`MPR_ITERATIONS`,
:data:`EPA_ITERATIONS` iterations and stop when every search is done (a finished state is
a fixed point, so the result does not depend on when they stop; under ``vmap``, when the
last member is done), on values without gradients, elementwise, with no data-dependent
shapes. The penetration search (MPR and EPA) does not iterate where GJK found the cores
apart. What
they find is the witness simplex: the support directions d_i and barycentric weights w_i
of the closest point, and the normal n. The result is then evaluated again from the live
inputs: the witness points x_A = sum w_i s_A(-d_i), x_B = sum w_i s_B(d_i) and gap = n .
(x_B - x_A) - margin_A - margin_B, whose derivative at fixed witness and normal is the
distance's derivative (the envelope theorem: the witness points move with the shapes;
exact for the distance and the minimum translation distance). Accuracy: to rounding on
polytopes (boxes, hulls), about 1e-12 of the size on the cylinders' round surfaces.
NaN-safe: every normalisation and division has a fallback for zero length (coincident
centres, touching cores, parallel edges).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.batching import while_loop
from ..compiled.small import dot, mv, row_vec_mat

#: GJK iterations (each adds one support point; MuJoCo's ``ccd_iterations`` is 35).
GJK_ITERATIONS = 40
#: MPR portal-discovery and refinement iterations (each).
MPR_ITERATIONS = 24
#: EPA iterations (each adds one vertex to the polytope).
EPA_ITERATIONS = 32
_REL_TOL = 1e-12  # convergence, relative to the pair's size
_EPA_TOL = 1e-10  # EPA's (its new faces degenerate near convergence: rounding)
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


def _sign(x, d):
    """sign(x) of a component x of direction d, +1 within 1e-12 |d| of 0: a tie (a face
    along d) is decided the same way wherever rounding leaves x (XLA may compute a value
    in several fusions, and the search loops must see one support point)."""
    return jnp.where(x >= -1e-12 * jnp.sqrt(dot(d, d))[..., None], 1.0, -1.0)


def point(p, r) -> Convex:
    """A sphere of radius ``r`` about ``p``."""
    return Convex(lambda d: p + 0.0 * d, p, r, r)


def segment(p, R, r, half) -> Convex:
    """A capsule: the segment p +- half R[:, 2], radius ``r``."""
    axis = R[:, 2]

    def support(d):
        return p + (half * _sign(dot(axis, d)[..., None], d)[..., 0])[..., None] * axis

    return Convex(support, p, r, r + half)


def box(p, R, half) -> Convex:
    """A box of half edges ``half`` (3,) along R's columns."""

    def support(d):
        return p + mv(R, half * _sign(row_vec_mat(d, R), d))

    return Convex(support, p, jnp.zeros(()), jnp.min(half))


def cylinder(p, R, radius, half) -> Convex:
    """A solid cylinder of ``radius``, half length ``half`` along R[:, 2] (the support of a
    direction along the axis: the cap's centre)."""

    def support(d):
        local = row_vec_mat(d, R)
        rho2 = local[0] ** 2 + local[1] ** 2
        ok = rho2 > _TINY
        scale = jnp.where(ok, radius / jnp.sqrt(jnp.where(ok, rho2, 1.0)), 0.0)
        z = half * _sign(local[2:], d)[0]
        return p + mv(R, jnp.stack([scale * local[0], scale * local[1], z]))

    return Convex(support, p, jnp.zeros(()), jnp.minimum(radius, half))


def ellipsoid(p, R, radii) -> Convex:
    """An ellipsoid of semi-axes ``radii`` (3,) along R's columns: for the local direction
    l = R^T d its support is R (r^2 l) / |r l| (r l elementwise), the point whose outward
    normal r^-2 x is along l (MuJoCo's mjc_support, engine_collision_convex.c)."""

    def support(d):
        rl = radii * row_vec_mat(d, R)
        n2 = dot(rl, rl)
        ok = n2 > _TINY
        scale = jnp.where(ok, 1.0 / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
        return p + mv(R, radii * rl * scale[..., None])

    return Convex(support, p, jnp.zeros(()), jnp.min(radii))


def hull(p, R, vertices) -> Convex:
    """The convex hull of ``vertices`` (n, 4): rows of x, y, z in the shape frame and a
    weight, 1 for a hull vertex and 0 for the first row (an interior point, the centre of
    MPR's ray) and for padding (repeats of a vertex: a group stacks meshes of different
    vertex counts). Neither changes the support, the vertex of largest projection,
    selected by a one-hot mask (an elementwise product, no gather)."""
    xyz = vertices[:, :3]
    centre = xyz[0]
    extent = jnp.max(jnp.abs(xyz - centre))
    tie = 1e-13 * extent * jnp.arange(xyz.shape[0])

    def support(d):
        local = row_vec_mat(d, R)
        score = xyz[:, 0] * local[0] + xyz[:, 1] * local[1] + xyz[:, 2] * local[2]
        # ties (a face along d) to the first vertex, whatever the rounding (see _sign)
        score = score - tie * jnp.sqrt(dot(d, d))
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


def _until_done(n, step, state):
    """``step(i, state)`` for i = 0, 1, ... while i < n and the state's last entry (its
    done flag) is False. A finished state is a fixed point of every loop here, so this
    equals n steps; it stops early on the single path (under ``vmap``, when every member
    is done)."""

    def more(carry):
        i, state = carry
        return (i < n) & ~state[-1]

    def once(carry):
        i, state = carry
        return i + 1, step(i, state)

    return while_loop(more, once, (jnp.zeros((), jnp.int32), state))[1]


def _support_m(a: Convex, b: Convex, d):
    """The support point of M = B - A along d, computed once: a barrier keeps XLA from
    recomputing it inside each consumer's fusion, where rounding can flip a tied choice
    (a box face along d) and give the consumers different points."""
    return jax.lax.optimization_barrier(b.support(d) - a.support(-d))


def _gjk(a: Convex, b: Convex, size, skip=False):
    """GJK on the cores: (directions (4, 3), weights (4,), closest point v of M (3,)).
    Where ``skip``: no iteration (v is the first support point, a point of M: its length
    bounds the distance from above)."""
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

    state = (D, W, valid, lam, w0, jnp.asarray(skip))
    D, W, valid, lam, v, _ = _until_done(GJK_ITERATIONS, step, state)
    return D, jnp.where(valid, lam, 0.0), v


# ----------------------------------------------------------------------------- MPR


def _unit(v, fallback):
    n2 = dot(v, v)
    ok = n2 > _TINY
    return jnp.where(ok, v / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


_OBLIQUE = np.array([2.0, 3.0, 5.0]) / np.sqrt(38.0)


def _vertex(a: Convex, b: Convex, d, centre):
    """The points of A and B that make a vertex of M: support points of direction d (B's
    along d, A's along -d), or, for MPR's interior point (``centre``), the centres with d
    added to B's."""
    pa = jnp.where(centre[..., None], a.centre, a.support(-d))
    pb = jnp.where(centre[..., None], b.centre + d, b.support(d))
    return pa, pb


def _portal(a: Convex, b: Convex, size, offset, skip=False):
    """MPR's portal (Snethen 2008; libccd's discoverPortal and refinePortal): from the
    interior point v0 = c_B - c_A + ``offset`` (off the line of the centres, so that
    symmetric poses do not put the origin on the ray), three support points (directions
    (3, 3), points (3, 3)) whose triangle the ray from v0 through the origin crosses
    beyond the origin: the tetrahedron (v0, portal) contains the origin. Also whether the
    origin lies on the line of v0 and the first support point (no portal)."""
    tiny = (1e-14 * size) ** 2
    v0 = b.centre - a.centre + offset
    ex = jnp.array([1.0, 0.0, 0.0])
    d1 = _unit(-v0, ex)
    w1 = _support_m(a, b, d1)
    cross = jnp.cross(v0, w1)
    on_ray = dot(cross, cross) <= tiny * tiny
    d2 = _unit(cross, _unit(jnp.cross(d1, jnp.asarray(_OBLIQUE)), ex))
    w2 = _support_m(a, b, d2)
    n = _unit(jnp.cross(w1 - v0, w2 - v0), d2)
    flip = dot(n, v0) > 0
    d1, d2 = jnp.where(flip, d2, d1), jnp.where(flip, d1, d2)
    w1, w2 = jnp.where(flip, w2, w1), jnp.where(flip, w1, w2)
    n = jnp.where(flip, -n, n)
    eps = tiny * size

    def discover(_, state):
        d1, w1, d2, w2, d3, w3, n, ready = state
        w = _support_m(a, b, n)
        out_2 = dot(jnp.cross(w1, w), v0) < -eps  # outside (v1, v0, v3): v3 replaces v2
        out_1 = ~out_2 & (dot(jnp.cross(w, w2), v0) < -eps)  # outside (v3, v0, v2)
        moved = (out_1 | out_2) & ~ready
        d1n = jnp.where(moved & out_1, n, d1)
        w1n = jnp.where(moved & out_1, w, w1)
        d2n = jnp.where(moved & out_2, n, d2)
        w2n = jnp.where(moved & out_2, w, w2)
        nn = _unit(jnp.cross(w1n - v0, w2n - v0), n)
        return (
            d1n, w1n, d2n, w2n,
            jnp.where(ready, d3, n), jnp.where(ready, w3, w),
            jnp.where(moved, nn, n), ready | ~(out_1 | out_2),
        )  # fmt: skip

    state = (d1, w1, d2, w2, d1, w1, n, jnp.asarray(skip))
    d1, w1, d2, w2, d3, w3, n, _ = _until_done(MPR_ITERATIONS, discover, state)

    def refine(_, state):
        D, W, done = state
        n = _unit(jnp.cross(W[1] - W[0], W[2] - W[0]), d1)
        w = _support_m(a, b, n)
        encloses = dot(n, W[0]) >= 0  # the origin behind the portal (libccd: 0)
        reach = jnp.min(dot(w, n) - dot(W, n)) <= _REL_TOL * size
        finish = done | encloses | reach
        v4v0 = jnp.cross(w, v0)
        first, second, third = (dot(W[k], v4v0) > 0 for k in range(3))
        # libccd's expandPortal: which portal point the new support point replaces
        k = jnp.where(first, jnp.where(second, 0, 2), jnp.where(third, 1, 0))
        one = (jnp.arange(3) == k) & ~finish
        return jnp.where(one[:, None], n, D), jnp.where(one[:, None], w, W), finish

    D = jnp.stack([d1, d2, d3])
    W = jnp.stack([w1, w2, w3])
    D, W, _ = _until_done(MPR_ITERATIONS, refine, (D, W, on_ray | skip))
    return D, W, v0, on_ray


# ----------------------------------------------------------------------------- EPA

_TETRA_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])


def _rank(mask):
    """The number of True entries before each entry (a masked sum over a triangle: no
    cumulative-sum kernel in the loop)."""
    k = jnp.arange(mask.shape[0])
    return jnp.sum(jnp.where((k[None, :] < k[:, None]) & mask[None, :], 1, 0), axis=1)


def _faces(W):
    """Unit outward normals (F, 3) and squared doubled areas (F,) of faces W (F, 3, 3)."""
    n = jnp.cross(W[:, 1] - W[:, 0], W[:, 2] - W[:, 0])
    nn = dot(n, n)
    ok = nn > _TINY
    return jnp.where(ok[:, None], n / jnp.sqrt(jnp.where(ok, nn, 1.0))[:, None], 0.0), nn


def _epa(a: Convex, b: Convex, size, D, W, v0, offset, iterations=None, skip=False):
    """EPA, the expanding polytope algorithm (G. van den Bergen, "Proximity queries and
    penetration depth computation on 3D game objects", GDC 2001; Collision Detection in
    Interactive 3D Environments, 2004, 4.3.3), from the tetrahedron of MPR's interior point
    and portal. Each step takes the face nearest the origin, adds the support point along
    its normal, removes the faces that point sees and closes the hole with triangles from
    the point to the horizon (the edges of seen faces whose twin is not seen); it stops
    when the support point does not lie beyond the face. Fixed arrays: up to
    ``iterations`` (default :data:`EPA_ITERATIONS`) + 4 vertices (by id), 2 V - 4 face
    slots with a live mask; the horizon by comparing every directed edge of the seen faces
    with every other, the new faces placed in free slots by matching ranks (no scatter).
    Returns the nearest face's directions (3, 3), centre flags (3,), points (3, 3) and
    outward unit normal (where ``skip``: of the starting tetrahedron, no iteration)."""
    iterations = EPA_ITERATIONS if iterations is None else iterations
    nv = iterations + 4
    nf = 2 * nv - 4
    tol = _EPA_TOL * size
    # the tetrahedron: vertex 0 is MPR's interior point (flag: the shapes' centres)
    Dv = jnp.concatenate([offset[None], D])
    Wv = jnp.concatenate([v0[None], W])
    Cv = jnp.arange(4) == 0
    ids = jnp.asarray(_TETRA_FACES)
    fW = Wv[ids]
    normal, _ = _faces(fW)
    centroid = jnp.mean(Wv, axis=0)
    inward = dot(normal, centroid[None] - fW[:, 0]) > 0
    ids = jnp.where(inward[:, None], ids[:, [0, 2, 1]], ids)
    pad = nf - 4
    fid = jnp.concatenate([ids, jnp.zeros((pad, 3), ids.dtype)])
    fW = jnp.concatenate([Wv[ids], jnp.zeros((pad, 3, 3))])
    fD = jnp.concatenate([Dv[ids], jnp.zeros((pad, 3, 3))])
    fC = jnp.concatenate([Cv[ids], jnp.zeros((pad, 3), bool)])
    alive = jnp.arange(nf) < 4
    nxt = np.array([1, 2, 0])
    slot = jnp.arange(nf)

    def nearest(fW, alive):
        normal, nn = _faces(fW)
        dist = jnp.where(alive & (nn > _TINY), dot(normal, fW[:, 0]), jnp.inf)
        one = slot == jnp.argmin(dist)
        return one, normal, jnp.min(dist)

    def step(i, state):
        fid, fW, fD, fC, alive, done = state
        one, normal, dist = nearest(fW, alive)
        n = jnp.sum(jnp.where(one[:, None], normal, 0.0), axis=0)
        w = _support_m(a, b, n)
        finish = done | (dot(n, w) - dist <= tol) | ~jnp.isfinite(dist)
        # discrete choices computed once (barriers): XLA may otherwise recompute them in
        # several fusions, where rounding can decide a face seen in one and not another
        seen = jax.lax.optimization_barrier(alive & (dot(normal, w[None] - fW[:, 0]) > tol))
        # directed edges k -> k+1 of every face, (3 nf,) each
        ea, eb = fid.T.reshape(-1), fid[:, nxt].T.reshape(-1)
        e_seen = jnp.tile(seen, 3)
        twin_seen = jnp.any(
            e_seen[None, :] & (ea[None, :] == eb[:, None]) & (eb[None, :] == ea[:, None]), axis=1
        )
        horizon = e_seen & ~twin_seen
        left = alive & ~seen
        free = ~left
        rank_e = _rank(horizon)
        rank_s = _rank(free)
        match = jax.lax.optimization_barrier(
            free[:, None] & horizon[None, :] & (rank_s[:, None] == rank_e[None, :])
        )
        new = jnp.any(match, axis=1)

        def pick(x):  # the matched edge's value, per slot
            return jnp.sum(jnp.where(match.reshape(match.shape + (1,) * (x.ndim - 1)), x, 0),
                           axis=1)  # fmt: skip

        Wa, Wb = fW.transpose(1, 0, 2).reshape(-1, 3), fW[:, nxt].transpose(1, 0, 2).reshape(-1, 3)
        Da, Db = fD.transpose(1, 0, 2).reshape(-1, 3), fD[:, nxt].transpose(1, 0, 2).reshape(-1, 3)
        Ca, Cb = fC.T.reshape(-1), fC[:, nxt].T.reshape(-1)
        new_id = jnp.stack([pick(ea), pick(eb), jnp.full(nf, 4 + i, fid.dtype)], axis=1)
        new_W = jnp.stack([pick(Wa), pick(Wb), jnp.broadcast_to(w, (nf, 3))], axis=1)
        new_D = jnp.stack([pick(Da), pick(Db), jnp.broadcast_to(n, (nf, 3))], axis=1)
        new_C = jnp.stack([pick(Ca) > 0, pick(Cb) > 0, jnp.zeros(nf, bool)], axis=1)
        take = new & ~finish
        fW1 = jnp.where(take[:, None, None], new_W, fW)
        alive1 = jnp.where(finish, alive, left | new)
        # the nearest distance never falls: where rounding broke the polytope (a new face
        # almost in the plane of its neighbours), keep the last one and stop
        broken = nearest(fW1, alive1)[2] < dist - tol
        go = ~finish & ~broken
        take = take & go
        return (
            jnp.where(take[:, None], new_id, fid),
            jnp.where(take[:, None, None], new_W, fW),
            jnp.where(take[:, None, None], new_D, fD),
            jnp.where(take[:, None], new_C, fC),
            jnp.where(go, alive1, alive),
            finish | broken,
        )

    state = (fid, fW, fD, fC, alive, jnp.asarray(skip))
    fid, fW, fD, fC, alive, _ = _until_done(iterations, step, state)
    one, normal, _ = nearest(fW, alive)

    def take(x):
        return jnp.sum(jnp.where(one.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0), axis=0)

    return take(fD), take(fC) > 0, take(fW), take(normal)


# ----------------------------------------------------------------------------- the pair


def collide(a: Convex, b: Convex, *, epa_iterations: int | None = None):
    """(gap, point, normal) of shapes A and B: the signed distance of their surfaces
    (negative: penetration), the point midway between the two surfaces and the unit
    normal from A to B (module docstring). ``epa_iterations``: EPA's budget (None:
    :data:`EPA_ITERATIONS`)."""
    sg = jax.lax.stop_gradient
    a0, b0 = _frozen(_still(a)), _frozen(_still(b))
    size = _pair_size(a0, b0)
    D_g, lam_g, v = (sg(x) for x in _gjk(a0, b0, size))
    deep = _penetration(a0, b0, size, epa_iterations, skip=~_overlap(v, size))
    return _witness(a, b, size, (D_g, lam_g, v), deep, jnp.ones((), bool))


def within(a: Convex, b: Convex, margin) -> jax.Array:
    """Whether :func:`collide` gives A and B a gap below ``margin``, decided by GJK alone:
    cores that overlap are in contact (their gap is the negative penetration), cores apart
    have GJK's gap. No penetration search: what a test of contact, not its depth, needs."""
    a0, b0 = _frozen(_still(a)), _frozen(_still(b))
    size = _pair_size(a0, b0)
    apart = tuple(jax.lax.stop_gradient(x) for x in _gjk(a0, b0, size))
    inside = _overlap(apart[2], size)
    dt = apart[2].dtype
    no_face = (jnp.zeros((3, 3), dt), jnp.zeros(3, bool), jnp.zeros((3, 3), dt), jnp.zeros(3, dt))
    gap = _witness(a, b, size, apart, no_face, jnp.zeros((), bool))[0]
    return inside | (gap < margin)


def collide_rows(
    make_a, rows, b: Convex, *, deep: int, epa_iterations: int | None = None, live=None
):
    """:func:`collide` of the shapes ``make_a(row)`` (one per row of ``rows`` (P, ...))
    with B, (P,) each: GJK for every row, the penetration search (MPR and EPA, the costly
    part) only for the ``deep`` rows whose cores are nearest to overlapping (smallest GJK
    distance). A row whose cores overlap but which is not among those gets no contact (a
    gap of +1 times the pair's size): callers choose ``deep`` as the most rows that can
    overlap at once (a height field's prisms under one shape, :mod:`jaxmbd.contact.
    height_field`). Rows not ``live`` (P,) (a caller's bound shows them apart) are not
    searched: their gap is that of their first support point, an upper bound of the
    distance."""
    sg = jax.lax.stop_gradient
    b0 = _frozen(_still(b))
    live = jnp.ones(rows.shape[0], bool) if live is None else sg(live)

    def one(row, live):
        a0 = _frozen(_still(make_a(row)))
        size = _pair_size(a0, b0)
        D_g, lam_g, v = (sg(x) for x in _gjk(a0, b0, size, skip=~live))
        return size, D_g, lam_g, v

    size, D_g, lam_g, v = jax.vmap(one)(rows, live)
    deep = min(deep, rows.shape[0])
    # rows not live last: their first support point says nothing of their distance
    nearness = jnp.where(live, -dot(v, v) / size**2, -jnp.inf)
    near = jax.lax.top_k(nearness, deep)[1]  # (deep,) row indices
    pick = jnp.arange(rows.shape[0])[None, :] == near[:, None]  # (deep, P) one-hot

    def take(x):
        return jnp.sum(jnp.where(pick.reshape(pick.shape + (1,) * (x.ndim - 1)), x[None], 0),
                       axis=1)  # fmt: skip

    def search(row, size, v):
        a0 = _frozen(_still(make_a(row)))
        return _penetration(a0, b0, size, epa_iterations, skip=~_overlap(v, size))

    found = jax.vmap(search)(take(rows), take(size), take(v))  # (deep, ...) each
    chosen = jnp.any(pick, axis=0)

    def spread(x):  # each row's search result (zeros where none ran)
        w = jnp.where(pick.reshape(pick.shape + (1,) * (x.ndim - 1)), x[:, None], 0)
        return jnp.sum(w, axis=0)

    found = tuple(spread(x) for x in found)

    def finish(row, size, D_g, lam_g, v, chosen, *found):
        return _witness(make_a(row), b, size, (D_g, lam_g, v), found, chosen)

    return jax.vmap(finish)(rows, size, D_g, lam_g, v, chosen, *found)


def _still(shape: Convex) -> Convex:
    sg = jax.lax.stop_gradient
    return Convex(shape.support, sg(shape.centre), sg(shape.margin), sg(shape.scale))


def _pair_size(a0: Convex, b0: Convex):
    c = b0.centre - a0.centre
    return jnp.maximum(a0.scale, b0.scale) + jnp.sqrt(dot(c, c))


def _offset(a0: Convex, b0: Convex):
    return 1e-4 * jnp.minimum(a0.scale, b0.scale) * jnp.asarray(_OBLIQUE)


def _penetration(a0: Convex, b0: Convex, size, iterations=None, skip=False):
    """MPR's portal and EPA (gradient-free): the nearest face's directions, centre flags,
    points and normal (:func:`_epa`); where ``skip`` (cores apart: :func:`_witness` does
    not read the result), no iteration."""
    offset = _offset(a0, b0)
    D_p, W_p, v0, _ = _portal(a0, b0, size, offset, skip)
    found = _epa(a0, b0, size, D_p, W_p, v0, offset, iterations, skip)
    return tuple(jax.lax.stop_gradient(x) for x in found)


def _overlap(v, size):
    """Whether GJK's closest point ``v`` says the cores overlap (:func:`_witness`)."""
    return dot(v, v) <= (1e-10 * size) ** 2


def _witness(a: Convex, b: Convex, size, apart, deep, searched):
    """(gap, point, normal) from GJK's simplex (``apart``) or, where the cores overlap,
    EPA's face (``deep``; where not ``searched``: no contact), evaluated on the live
    inputs (the envelope theorem, module docstring)."""
    D_g, lam_g, v = apart
    D_e, C_e, W_e, n_e = deep
    inside = _overlap(v, size)
    # the weights of the origin's projection onto the nearest face
    nn = jnp.cross(W_e[1] - W_e[0], W_e[2] - W_e[0])
    area = dot(nn, nn)
    inv = 1.0 / jnp.where(area > _TINY, area, 1.0)
    lam_e = jnp.stack([dot(nn, jnp.cross(W_e[(k + 1) % 3], W_e[(k + 2) % 3])) * inv
                       for k in range(3)])  # fmt: skip
    lam_e = jnp.where(area > _TINY, lam_e, jnp.array([1.0, 0.0, 0.0]))
    c = jax.lax.stop_gradient(b.centre - a.centre)
    fallback = _unit(c, jnp.array([0.0, 0.0, 1.0]))
    n = jnp.where(inside, -_unit(n_e, -fallback), _unit(v, fallback))
    D = jnp.where(inside, jnp.concatenate([D_e, D_e[:1]]), D_g)
    C = jnp.where(inside, jnp.concatenate([C_e, jnp.zeros(1, bool)]), jnp.zeros(4, bool))
    lam = jnp.where(inside, jnp.concatenate([lam_e, jnp.zeros(1)]), lam_g)
    xa, xb = jax.vmap(lambda d, k: _vertex(a, b, d, k))(D, C)
    xa = jnp.sum(lam[:, None] * xa, axis=0)
    xb = jnp.sum(lam[:, None] * xb, axis=0)
    gap = dot(n, xb - xa) - a.margin - b.margin
    gap = jnp.where(inside & ~searched, size, gap)
    point = 0.5 * (xa + a.margin * n + xb - b.margin * n)
    return gap, point, n


def _frozen(shape: Convex) -> Convex:
    """The shape with its support evaluated on gradient-free inputs (the search loops)."""
    return Convex(
        lambda d: jax.lax.stop_gradient(shape.support(d)), shape.centre, shape.margin,
        shape.scale,
    )  # fmt: skip
