"""MuJoCo's native penetration depth (``engine_collision_gjk.c``, ``mjc_ccd``) in JAX:
van den Bergen's expanding polytope algorithm (EPA) with MuJoCo's initial polytopes
(``polytope2/3/4``, built from the simplex :func:`.gjk.gjk` ends with), face map and
depth-first horizon, for one contact per call.

The polytope holds ``5 + iterations`` vertices and ``6 * iterations`` faces, as MuJoCo's
``mjc_ccdSize`` allocates; the horizon search runs on an explicit stack. The arithmetic is
MuJoCo's operation for operation (see :mod:`.gjk`); the faces of an initial polytope, which
MuJoCo attaches one after another but which depend on its vertices only, are computed as
one batch.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from ...compiled.batching import while_loop
from .common import MINVAL
from .gjk import (
    _MINDIST,
    MAX_LIMIT,
    _area_cofactors,
    _minors,
    _project_origin_plane,
    _select,
    _sqrt,
    _vertex,
    cross3,
    det3,
    dot3,
    matvec,
)


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


def _set_faces(pt: Polytope, faces, adjacent) -> tuple[Polytope, jnp.ndarray]:
    """MuJoCo's ``attachFace`` for each face of an initial polytope in turn (faces 0..k-1 of
    an empty polytope), then all of them mapped: (polytope, squared distances (k,), 0 where
    degenerate)."""
    faces, adjacent = np.asarray(faces), np.asarray(adjacent)
    k = len(faces)
    pv = pt.verts[:, 0]
    v1, v2, v3 = pv[faces[:, 0]], pv[faces[:, 1]], pv[faces[:, 2]]
    proj, degenerate = jax.vmap(_project_origin_plane)(v3, v2, v1)
    outward = v1 - pt.center
    proj = jnp.where((dot3(proj, outward) < 0)[:, None], proj * -1, proj)
    dist2 = jnp.where(degenerate, 0.0, dot3(proj, proj))
    ids = jnp.arange(k)
    pt = pt._replace(
        face_verts=pt.face_verts.at[:k].set(faces),
        face_adj=pt.face_adj.at[:k].set(adjacent),
        face_v=pt.face_v.at[:k].set(proj),
        face_dist2=pt.face_dist2.at[:k].set(dist2),
        face_index=pt.face_index.at[:k].set(ids),
        nfaces=jnp.asarray(k),
        map=pt.map.at[:k].set(ids),
        nmap=jnp.asarray(k),
    )
    return pt, dist2


def _first_small_face(faces, dist2):
    """Whether a face lies within mjMINDIST of the origin, and the first such (its vertex
    ids), as MuJoCo's ``polytope2/4`` fall back to ``polytope3`` on it."""
    small = dist2 < _MINDIST
    fallback = jnp.any(small)
    return fallback, jnp.where(fallback, jnp.asarray(np.asarray(faces))[jnp.argmax(small)], 0)


def _tri_affine(v1, v2, v3, p):
    m_max, x, y = _minors(v1, v2, v3)
    c31, c32, c33 = _area_cofactors(p, v1, v2, v3, x, y)
    return jnp.stack([c31 / m_max, c32 / m_max, c33 / m_max])


def _tri_point_intersect(v1, v2, v3, p):
    lam = _tri_affine(v1, v2, v3, p)
    l0, l1, l2 = jnp.unstack(lam[:, None] * jnp.stack([v1, v2, v3]))
    diff = ((l0 + l1) + l2) - p
    return ~jnp.any(lam < 0) & (_sqrt(dot3(diff, diff)) < MINVAL)


def _same_side(p0, p1, p2, p3):
    n = cross3(p1 - p0, p2 - p0)
    dot1 = dot3(n, p3 - p0)
    dot2 = dot3(n, p0 * -1)
    return ((dot1 > 0) & (dot2 > 0)) | ((dot1 < 0) & (dot2 < 0))


_CYCLIC4 = np.array([[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]])


def _test_tetra(p):
    """MuJoCo's ``testTetra`` of the (4, 3) tetrahedron p (its four ``sameSide`` tests)."""
    q = p[_CYCLIC4]
    return jnp.all(jax.vmap(_same_side)(q[:, 0], q[:, 1], q[:, 2], q[:, 3]))


def _rotmat(axis):
    n = _sqrt(dot3(axis, axis))
    u1, u2, u3 = axis[0] / n, axis[1] / n, axis[2] / n
    sin, cos = 0.86602540378, -0.5
    return jnp.array([
        [cos + u1 * u1 * (1 - cos), u1 * u2 * (1 - cos) - u3 * sin, u1 * u3 * (1 - cos) + u2 * sin],
        [u2 * u1 * (1 - cos) + u3 * sin, cos + u2 * u2 * (1 - cos), u2 * u3 * (1 - cos) - u1 * sin],
        [u1 * u3 * (1 - cos) - u2 * sin, u2 * u3 * (1 - cos) + u1 * sin, cos + u3 * u3 * (1 - cos)],
    ])  # fmt: skip


def _ray_triangle(v1, v2, v3, v4, v5):
    d12, d13, d14, d15 = v2 - v1, v3 - v1, v4 - v1, v5 - v1
    vols = jax.vmap(det3, in_axes=(0, 0, None))(
        jnp.stack([d13, d14, d15]), jnp.stack([d14, d15, d13]), d12
    )
    return jnp.all(vols >= 0) | jnp.all(vols <= 0)


def _epa_vertices(support1, support2, directions):
    """:func:`_epa_vertex` along each row of directions (k, 3)."""
    norms = _sqrt(dot3(directions, directions))
    return jax.vmap(lambda d, n: _epa_vertex(support1, support2, d, n))(directions, norms)


# MuJoCo's faces (vertex ids) and their neighbours of ``polytope2/3/4``
_FACES3 = ((4, 0, 1), (4, 2, 0), (4, 1, 2), (3, 1, 0), (3, 0, 2), (3, 2, 1))
_ADJ3 = ((1, 3, 2), (2, 4, 0), (0, 5, 1), (5, 0, 4), (3, 1, 5), (4, 2, 3))
_FACES2 = ((0, 2, 3), (0, 4, 2), (0, 3, 4), (1, 3, 2), (1, 2, 4), (1, 4, 3))
_ADJ2 = ((1, 3, 2), (2, 4, 0), (0, 5, 1), (5, 0, 4), (3, 1, 5), (4, 2, 3))
_FACES4 = ((0, 1, 2), (0, 3, 1), (0, 2, 3), (3, 2, 1))
_ADJ4 = ((1, 3, 2), (2, 3, 0), (0, 3, 1), (2, 0, 1))


def _polytope3(support1, support2, simplex, iterations: int):
    """MuJoCo's ``polytope3`` on a fresh polytope: (polytope, ok)."""
    v1, v2, v3 = simplex[0, 0], simplex[1, 0], simplex[2, 0]
    pt = _empty_polytope(iterations)
    pt = pt._replace(center=((v1 + v2) + v3) * (1.0 / 3.0))
    n = cross3(v2 - v1, v3 - v1)
    n_norm = _sqrt(dot3(n, n))
    bad_normal = n_norm < MINVAL
    # vertex ids in MuJoCo's order: v1i 0, v2i 1, v3i 2, v5i 3 (along -n), v4i 4 (along n)
    more = jax.vmap(lambda d: _epa_vertex(support1, support2, d, n_norm))(jnp.stack([n * -1, n]))
    pt = pt._replace(
        verts=pt.verts.at[:3].set(simplex[:3]).at[3:5].set(more), nverts=jnp.asarray(5)
    )
    v5, v4 = more[0, 0], more[1, 0]
    hits = jax.vmap(_tri_point_intersect, in_axes=(None, None, None, 0))(
        v1, v2, v3, jnp.stack([v4, v5])
    )
    # (MuJoCo's test that the hexahedron holds the origin is skipped: its distance is 0 here)
    pt, d2 = _set_faces(pt, _FACES3, _ADJ3)
    on_face = jnp.any(d2 < _MINDIST)
    return pt, ~(bad_normal | jnp.any(hits) | on_face)


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
    d2 = matvec(rot, d1)
    d3 = matvec(rot, d2)
    more = _epa_vertices(support1, support2, jnp.stack([d1, d2, d3]))
    pt = pt._replace(
        verts=pt.verts.at[:2].set(simplex[:2]).at[2:5].set(more), nverts=jnp.asarray(5)
    )
    pt, dist2 = _set_faces(pt, _FACES2, _ADJ2)
    fallback, tri = _first_small_face(_FACES2, dist2)
    p = pt.verts[:, 0]
    convex = _ray_triangle(p[0], p[1], p[2], p[3], p[4])
    return pt, convex, fallback, pt.verts[tri]


def _polytope4(simplex, iterations: int):
    """MuJoCo's ``polytope4``: (polytope, ok, fallback, 3-simplex for polytope3)."""
    pt = _empty_polytope(iterations)
    pt = pt._replace(verts=pt.verts.at[:4].set(simplex), nverts=jnp.asarray(4))
    p = pt.verts[:, 0]
    pt = pt._replace(center=(((p[0] + p[1]) + p[2]) + p[3]) * 0.25)
    pt, dist2 = _set_faces(pt, _FACES4, _ADJ4)
    fallback, tri = _first_small_face(_FACES4, dist2)
    inside = _test_tetra(p[:4])
    return pt, inside, fallback, pt.verts[tri]


def initial_polytope(support1, support2, simplex, nsimplex, iterations: int):
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

    c = while_loop(lambda c: c["mode"] != _HDONE, step, init)
    return c["pt"], c["hidx"], c["hedge"], c["nedges"]


def epa(support1, support2, pt: Polytope, *, tolerance, iterations: int, skip=False):
    """MuJoCo's ``epa``: (found, x1, x2, dist) with dist = -depth. Where ``skip`` (GJK did
    not ask for it: the caller discards the result), no iteration: under ``vmap`` a batch
    then iterates for the members that penetrate alone."""
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
        attached = while_loop(
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

    init = dict(pt=pt, face=jnp.asarray(-1), k=jnp.asarray(0), done=jnp.asarray(skip),
                upper=jnp.asarray(MAX_LIMIT), upper2=jnp.asarray(MAX_LIMIT))  # fmt: skip
    c = while_loop(cond, body, init)
    pt, face = c["pt"], c["face"]
    found = face >= 0
    f = jnp.maximum(face, 0)
    ids = pt.face_verts[f]
    vs = pt.verts[ids]  # (3, 3, 3)
    lam = _tri_affine(vs[0, 0], vs[1, 0], vs[2, 0], pt.face_v[f])
    x1 = lam[0] * vs[0, 1] + lam[1] * vs[1, 1] + lam[2] * vs[2, 1]
    x2 = lam[0] * vs[0, 2] + lam[1] * vs[1, 2] + lam[2] * vs[2, 2]
    return found, x1, x2, -_sqrt(pt.face_dist2[f])
