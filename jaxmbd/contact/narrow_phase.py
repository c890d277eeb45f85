"""Narrow phase: the contact slots of two collision shapes at given world poses.

One pure JAX function per pair kind, each returning a fixed number of slots
(:data:`SLOTS`), so that shapes stay static under ``jit`` and ``vmap``. A slot is
(``gap``, ``point``, ``normal``): the signed distance of the two surfaces along the unit
``normal`` (negative: penetration), the contact point midway between the two surfaces,
and the normal pointing from shape A (the kind's first shape) to shape B (force on B is
along +normal). A slot whose gap is positive exerts no force.

Every shape is given by its world position ``p`` (3,), rotation ``R`` (3, 3) (shape to
world) and ``size`` (:func:`shape_size`): sphere (radius, 0, 0); capsule (radius, half
length of the segment along z, 0); box (half edges along x, y, z); cylinder (radius, half
length along z, 0); ellipsoid (semi-axes along x, y, z); plane (unused): the plane
through ``p`` normal to R's z column; mesh:
its convex hull's rows (x, y, z, weight) (:func:`jaxmbd.geometry` ``_hull_size``; padded
rows of weight 0 in a group of meshes of different sizes).

========================= ======= =========================================================
kind                      slots   what
========================= ======= =========================================================
plane_sphere              1       the sphere's lowest point
plane_capsule             2       the segment's two end spheres (a lying capsule: a line)
plane_box                 8       the corners
plane_cylinder            4       the deepest rim point of both caps and two more rim points
                                  of the lower cap at +-120 deg from it (a cylinder standing
                                  on a cap rests on a triangle; as MuJoCo)
plane_ellipsoid           1       the ellipsoid's deepest point, its support along -n (as
                                  MuJoCo's mjc_PlaneConvex)
plane_mesh                4       hull vertices: the deepest and three spread over the face
                                  it rests on (:func:`plane_mesh`)
sphere_sphere             1       along the line of centres
sphere_capsule            1       the sphere against the closest point of the segment
sphere_box                1       the sphere against the closest point of the box (centre
                                  inside: the face of least penetration)
capsule_capsule           1       the closest points of the two segments (parallel: the
                                  middle of their overlap)
capsule_box               2       spheres of the capsule against the box: the segment's
                                  closest (or deepest) point, and the far end of the part
                                  over that box face (a lying capsule rests on both ends;
                                  MuJoCo's mjraw_CapsuleBox)
box_box                   16      each box's 8 corners against the other box, on the
                                  face normal of least overlap: face-face and corner-face
                                  contact, so boxes stack and rest on each other; edge-edge
                                  contact of crossing edges is not seen
sphere_cylinder,          1       support-function distance (:mod:`jaxmbd.contact.convex`:
capsule_cylinder,                 GJK apart, EPA in penetration): the signed distance, its
box_cylinder,                     normal and the point midway between the surfaces, as
cylinder_cylinder,                MuJoCo's mjc_Convex (nativeccd) gives its first contact
sphere_ellipsoid,
capsule_ellipsoid,
box_ellipsoid,
cylinder_ellipsoid,
ellipsoid_ellipsoid,
sphere_mesh, capsule_mesh,
box_mesh, cylinder_mesh,
ellipsoid_mesh, mesh_mesh
========================= ======= =========================================================

One slot for the support-function pairs: MuJoCo adds up to four contacts of equal depth
found by rotating the shapes slightly about the first (multiccd) or by clipping polygon
faces (box and mesh pairs); a box or mesh resting flat on another here rests on one
point (compliant contact: it tips until a second point touches). Height fields
collide with every convex shape as MuJoCo's, prism by prism, in a window of cells that
follows the shape (``hfield_<kind>``, :mod:`jaxmbd.contact.height_field`). Cones and
pyramids have no narrow phase (such shape pairs are skipped, with a
warning, when pairs are built). NaN-safe: unit vectors of zero length (coincident
centres, a sphere centre on the box surface, an upright cylinder, parallel segments) fall
back to a fixed direction through the double-where trick, so values and ``jax.grad`` stay
finite when shapes touch exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.small import dot as small_dot
from ..compiled.small import mv, row_vec_mat
from ..geometry import (
    BOX,
    CAPSULE,
    CYLINDER,
    ELLIPSOID,
    HFIELD,
    MESH,
    PLANE,
    SHAPE_BY_NAME,
    SPHERE,
    ShapeKind,
    shape_kind,
)
from . import convex

_TINY = 1e-24  # squared length below which a direction is taken as undefined


class Slots(NamedTuple):
    """Contact slots: ``gap`` (..., s), ``point`` (..., s, 3), ``normal`` (..., s, 3)."""

    gap: jax.Array
    point: jax.Array
    normal: jax.Array


def pair_kind(kind_a: str, kind_b: str) -> tuple[str | None, bool]:
    """The pair kind of shapes of kinds (kind_a, kind_b) and whether they are swapped
    (B first) in it; (None, False) when the pair has no narrow phase."""
    a, b = SHAPE_BY_NAME.get(kind_a), SHAPE_BY_NAME.get(kind_b)
    if a is HFIELD and b in HFIELD_PARTNERS:
        return f"hfield_{b.name}", False
    if b is HFIELD and a in HFIELD_PARTNERS:
        return f"hfield_{a.name}", True
    if (a, b) in PAIRS:
        return PAIRS[a, b].name, False
    if (b, a) in PAIRS:
        return PAIRS[b, a].name, True
    return None, False


def shape_size(shape) -> np.ndarray:
    """The (3,) size vector of a :class:`~jaxmbd.geometry.Shape` (see the module docstring)."""
    spec = SHAPE_BY_NAME.get(shape.kind)
    if spec is None or not spec.collides:
        raise ValueError(
            f"shape kind {shape.kind!r} does not collide; colliding: {COLLIDING_KINDS}"
        )
    return spec.collision_size(shape)


def shape_scale(shape) -> float:
    """The smallest dimension of a colliding shape (radius, half edge; inf for a plane)."""
    return shape_kind(shape.kind).collision_scale(shape_size(shape))


# ----------------------------------------------------------------------------- helpers


def _dot(a, b):
    return small_dot(a, b)


def _unit(v, fallback):
    """(v / |v|, |v|), with ``fallback`` and 0 where |v| = 0 (double where: finite grads)."""
    n2 = _dot(v, v)
    ok = n2 > _TINY
    length = jnp.sqrt(jnp.where(ok, n2, 1.0))
    unit = jnp.where(ok[..., None], v / length[..., None], fallback)
    return unit, jnp.where(ok, length, 0.0)


def _spheres(ca, ra, cb, rb, fallback):
    """Sphere (ca, ra) against sphere (cb, rb): one slot (arrays without the slot axis)."""
    n, dist = _unit(cb - ca, fallback)
    gap = dist - ra - rb
    return gap, ca + n * (ra + 0.5 * gap), n


def _one(gap, point, normal) -> Slots:
    return Slots(gap[None], point[None], normal[None])


def _closest_on_segment(c, p, d):
    """The point of segment p + s d, s in [0, 1], closest to c."""
    dd = _dot(d, d)
    s = jnp.clip(_dot(c - p, d) / jnp.where(dd > _TINY, dd, 1.0), 0.0, 1.0)
    return p + s[..., None] * d


def _segment_ends(pos, R, half):
    axis = R[:, 2] * half
    return pos - axis, 2.0 * axis


# ----------------------------------------------------------------------------- pair kinds


def plane_sphere(pa, Ra, sa, pb, Rb, sb) -> Slots:
    n = Ra[:, 2]
    r = sb[0]
    gap = _dot(n, pb - pa) - r
    return _one(gap, pb - n * (r + 0.5 * gap), n)


def plane_capsule(pa, Ra, sa, pb, Rb, sb) -> Slots:
    n = Ra[:, 2]
    r, half = sb[0], sb[1]
    ends = pb[None, :] + jnp.array([[-1.0], [1.0]]) * (Rb[:, 2] * half)[None, :]
    gap = _dot(ends, n) - _dot(n, pa) - r
    point = ends - n[None, :] * (r + 0.5 * gap)[:, None]
    return Slots(gap, point, jnp.broadcast_to(n, (2, 3)))


_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)


def plane_box(pa, Ra, sa, pb, Rb, sb) -> Slots:
    n = Ra[:, 2]
    corners = pb[None, :] + mv(Rb, jnp.asarray(_CORNERS) * sb[None, :])
    gap = _dot(corners, n) - _dot(n, pa)
    point = corners - n[None, :] * (0.5 * gap)[:, None]
    return Slots(gap, point, jnp.broadcast_to(n, (8, 3)))


_RIM_BIAS = 1e-9  # weight of the cylinder's x axis in the rim direction (upright fallback)


def plane_cylinder(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Four slots (MuJoCo's choice): the deepest rim point of the cap nearer the plane, two
    more points of that rim at +-120 deg from it (a cylinder standing on the cap rests on
    a triangle), and the deepest rim point of the far cap (a lying cylinder: a line). The
    rim direction is the part of -n normal to the axis; upright, where it vanishes, the
    cylinder's own x axis (blended in with weight ``_RIM_BIAS``: smooth, no 0/0)."""
    n = Ra[:, 2]
    r, half = sb[0], sb[1]
    axis = Rb[:, 2]
    along = _dot(n, axis)
    axis = jnp.where(along > 0, -axis, axis)  # towards the plane
    toward = -n + _dot(n, axis) * axis  # part of -n normal to the axis
    rim, _ = _unit(toward + _RIM_BIAS * Rb[:, 0], Rb[:, 0])
    side = jnp.cross(axis, rim)
    low, high = pb + half * axis, pb - half * axis
    c, s = -0.5, 0.5 * np.sqrt(3.0)
    points = jnp.stack(
        [
            low + r * rim,
            low + r * (c * rim + s * side),
            low + r * (c * rim - s * side),
            high + r * rim,
        ]
    )
    gap = _dot(points, n) - _dot(n, pa)
    point = points - n[None, :] * (0.5 * gap)[:, None]
    return Slots(gap, point, jnp.broadcast_to(n, (4, 3)))


_Z = np.array([0.0, 0.0, 1.0])  # NumPy: importing jaxmbd starts no JAX backend (jax.distributed)


def sphere_sphere(pa, Ra, sa, pb, Rb, sb) -> Slots:
    return _one(*_spheres(pa, sa[0], pb, sb[0], _Z))


def sphere_capsule(pa, Ra, sa, pb, Rb, sb) -> Slots:
    start, d = _segment_ends(pb, Rb, sb[1])
    q = _closest_on_segment(pa, start, d)
    return _one(*_spheres(pa, sa[0], q, sb[0], Rb[:, 0]))


def sphere_box(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Sphere A against box B. Centre outside the box: the closest point of the box;
    inside (or on its surface): the face of least penetration."""
    r, h = sa[0], sb
    c = row_vec_mat(pa - pb, Rb)  # sphere centre in the box frame
    q = jnp.clip(c, -h, h)
    out_dir, dist = _unit(c - q, jnp.zeros(3))  # box surface -> sphere centre (local)
    outside = dist > 0
    depth = h - jnp.abs(c)  # distance to each pair of faces, inside
    k = jnp.argmin(depth)
    sign = jnp.where(c[k] >= 0, 1.0, -1.0)
    picked = jnp.arange(3) == k
    face = jnp.where(picked, sign, 0.0)  # outward normal of the nearest face (local)
    to_sphere = jnp.where(outside, out_dir, face)  # from the box towards the sphere (local)
    on_face = jnp.where(picked, sign * h, c)
    on_box = jnp.where(outside, q, on_face)  # surface point of B (local)
    gap = jnp.where(outside, dist, -jnp.min(depth)) - r
    normal = -mv(Rb, to_sphere)  # from the sphere (A) to the box (B)
    surface_b = pb + mv(Rb, on_box)
    surface_a = pa + normal * r
    return _one(gap, 0.5 * (surface_a + surface_b), normal)


def capsule_capsule(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Closest points of the two segments (Ericson, Real-Time Collision Detection, 5.1.9);
    (nearly) parallel segments: the middle of their overlap along A."""
    p1, d1 = _segment_ends(pa, Ra, sa[1])
    p2, d2 = _segment_ends(pb, Rb, sb[1])
    w = p1 - p2
    a, e, b = _dot(d1, d1), _dot(d2, d2), _dot(d1, d2)
    c, f = _dot(d1, w), _dot(d2, w)
    a_safe = jnp.where(a > _TINY, a, 1.0)
    e_safe = jnp.where(e > _TINY, e, 1.0)
    denom = a * e - b * b
    general = denom > 1e-10 * a * e
    s_general = (b * f - c * e) / jnp.where(general, denom, 1.0)
    # parallel: the middle of B's projection onto A, clipped to A
    s0 = jnp.clip(-c / a_safe, 0.0, 1.0)
    s1 = jnp.clip((b - c) / a_safe, 0.0, 1.0)
    s = jnp.clip(jnp.where(general, s_general, 0.5 * (s0 + s1)), 0.0, 1.0)
    t = (b * s + f) / e_safe
    s = jnp.where(
        t < 0,
        jnp.clip(-c / a_safe, 0.0, 1.0),
        jnp.where(t > 1, jnp.clip((b - c) / a_safe, 0.0, 1.0), s),
    )
    t = jnp.clip(t, 0.0, 1.0)
    return _one(*_spheres(p1 + s * d1, sa[0], p2 + t * d2, sb[0], Ra[:, 0]))


def _box_radius(R, half, u):
    """Half extent of the box (R, half) along the unit vector u."""
    return jnp.sum(half * jnp.abs(row_vec_mat(u, R)), axis=-1)


def _corners_against_box(corners, n, pb, Rb, hb, tol):
    """Gaps, points and normals (along +n, from the corners' box to box B) of corners
    against box B: a corner outside B by more than ``tol`` against B's closest point; one
    on or inside B's surface against B's face whose outward normal is -n (the pair's
    separating axis), so that corners lying on B's edges take the face normal, not an
    arbitrary one."""
    c = row_vec_mat(corners - pb[None, :], Rb)  # corners in B's frame
    q = jnp.clip(c, -hb, hb)
    out_dir, dist = _unit(c - q, jnp.zeros(3))
    outside = dist > tol
    to_corner = mv(Rb, out_dir)  # world: from B's surface to the corner
    face_gap = _dot(pb - corners, n) - _box_radius(Rb, hb, n)
    gap = jnp.where(outside, dist, face_gap)
    normal = jnp.where(outside[:, None], -to_corner, n[None, :])
    point = corners + 0.5 * gap[:, None] * normal
    return gap, point, normal


def box_box(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Each box's 8 corners against the other box: 8 slots of A's corners on B, then 8 of
    B's corners on A, every normal from A to B. The pair's separating axis n is the face
    normal (of either box) of least overlap (the face axes of the separating-axis test);
    corners on or inside the other box are measured along it to that box's face, corners
    outside against its closest point. Two aligned boxes of one size resting face to face
    see each touching corner twice (once from each box): hard contact splits the load
    among them (the impulses are not unique, the motion is); a compliant pair is twice as
    stiff there."""
    axes = jnp.concatenate([Ra.T, Rb.T])  # (6, 3): the face normals
    d = pb - pa
    along = _dot(axes, d)
    overlap = jax.vmap(lambda u: _box_radius(Ra, sa, u) + _box_radius(Rb, sb, u))(axes)
    k = jnp.argmin(overlap - jnp.abs(along))
    n = axes[k] * jnp.where(along[k] >= 0, 1.0, -1.0)  # from A to B
    tol = 1e-9 * jnp.minimum(jnp.min(sa), jnp.min(sb))
    corners_a = pa[None, :] + mv(Ra, jnp.asarray(_CORNERS) * sa[None, :])
    corners_b = pb[None, :] + mv(Rb, jnp.asarray(_CORNERS) * sb[None, :])
    gap_a, point_a, normal_a = _corners_against_box(corners_a, n, pb, Rb, sb, tol)
    gap_b, point_b, normal_b = _corners_against_box(corners_b, -n, pa, Ra, sa, tol)
    return Slots(
        jnp.concatenate([gap_a, gap_b]),
        jnp.concatenate([point_a, point_b]),
        jnp.concatenate([normal_a, -normal_b]),
    )


def _box_sdf(x, h):
    """Signed distance of local points x (..., 3) to the box of half edges h (convex)."""
    q = jnp.abs(x) - h
    outside = jnp.maximum(q, 0.0)
    n2 = _dot(outside, outside)
    ok = n2 > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0) + jnp.minimum(
        jnp.max(q, axis=-1), 0.0
    )


_SIGNS = np.array([-1.0, 1.0])
# clamp patterns of the outside distance: each axis below (-1), inside (0) or above (+1)
_PATTERNS = np.array([p for p in np.ndindex(3, 3, 3) if p != (1, 1, 1)], float) - 1.0
_AXIS_PAIRS = [(0, 1), (0, 2), (1, 2)]


def _segment_box_deepest(c, a, h):
    """The parameter t in [-1, 1] of the point c + t a (box frame) of least signed distance
    to the box of half edges h, and that distance. The signed distance is convex along the
    segment, piecewise quadratic outside the box and piecewise linear inside it, so its
    minimum is at one of: the ends, a crossing of a face plane, the stationary point of a
    clamp pattern (each axis below, inside or above the box: 26 patterns), a point where
    two axes' inside distances are equal (12) or an axis coordinate is zero (3). Every
    candidate is evaluated and the least taken; among equal values (a segment parallel to
    a face) the smallest t, as MuJoCo's mjraw_CapsuleBox tries the end -1 first."""
    safe = jnp.where(jnp.abs(a) > _TINY, a, 1.0)
    ok = jnp.abs(a) > _TINY
    cands = [jnp.array([-1.0, 1.0])]
    for s in _SIGNS:  # face planes x_k = +-h_k
        cands.append(jnp.where(ok, (s * h - c) / safe, 0.0))
    cands.append(jnp.where(ok, -c / safe, 0.0))  # x_k = 0
    P = jnp.asarray(_PATTERNS)  # (26, 3)
    on = P != 0
    num = jnp.sum(jnp.where(on, a * (c - P * h), 0.0), axis=-1)
    den = jnp.sum(jnp.where(on, a * a, 0.0), axis=-1)
    cands.append(jnp.where(den > _TINY, -num / jnp.where(den > _TINY, den, 1.0), 0.0))
    for j, k in _AXIS_PAIRS:  # sj x_j - h_j = sk x_k - h_k
        for sj in _SIGNS:
            for sk in _SIGNS:
                den = sj * a[j] - sk * a[k]
                good = jnp.abs(den) > _TINY
                t = (h[j] - h[k] - sj * c[j] + sk * c[k]) / jnp.where(good, den, 1.0)
                cands.append(jnp.where(good, t, 0.0)[None])
    t = jnp.clip(jnp.concatenate(cands), -1.0, 1.0)
    f = _box_sdf(c[None, :] + t[:, None] * a[None, :], h)
    best = jnp.min(f)
    tol = 1e-12 * (jnp.max(h) + jnp.sqrt(_dot(a, a)))
    return jnp.min(jnp.where(f <= best + tol, t, 2.0)), best


def capsule_box(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Capsule A against box B, two slots, each a sphere of the capsule against the box
    (:func:`sphere_box`), as MuJoCo's mjraw_CapsuleBox (engine_collision_box.c) builds its
    contacts. The first: the segment's point of least signed distance to the box (its
    closest point, or its deepest inside the box; ties, a segment parallel to a face: the
    end first), so its gap is the pair's distance. The second: along the segment, the
    farther end of the part that lies over the first contact's box face (a capsule lying
    on a face rests on both ends of that part, MuJoCo's second contact there); where that
    part is a point, the segment's end farther from the first. MuJoCo places its second
    sphere by its own rules elsewhere (across an edge, at a corner), where it is not a
    contact at rest."""
    half, h = sa[1], sb
    c = row_vec_mat(pa - pb, Rb)
    a = row_vec_mat(Ra[:, 2], Rb) * half
    t1, _ = _segment_box_deepest(c, a, h)
    x1 = c + t1 * a
    q = jnp.clip(x1, -h, h)
    outside = x1 - q
    inside_axis = jnp.argmin(h - jnp.abs(x1))
    face = jnp.where(_dot(outside, outside) > 0, jnp.argmax(jnp.abs(outside)), inside_axis)
    # the part of the segment over face `face`: |x_j| <= h_j for the other axes j
    ok = jnp.abs(a) > _TINY
    safe = jnp.where(ok, a, 1.0)
    e1, e2 = (-h - c) / safe, (h - c) / safe
    lo = jnp.where(ok, jnp.minimum(e1, e2), jnp.where(jnp.abs(c) <= h, -jnp.inf, jnp.inf))
    hi = jnp.where(ok, jnp.maximum(e1, e2), jnp.where(jnp.abs(c) <= h, jnp.inf, -jnp.inf))
    other = jnp.arange(3) != face
    lo = jnp.maximum(-1.0, jnp.max(jnp.where(other, lo, -jnp.inf)))
    hi = jnp.minimum(1.0, jnp.min(jnp.where(other, hi, jnp.inf)))
    far = jnp.where(jnp.abs(hi - t1) >= jnp.abs(lo - t1), hi, lo)
    t2 = jnp.where((hi > lo) & (jnp.abs(far - t1) > 1e-6), far, jnp.where(t1 > 0, -1.0, 1.0))
    t = jnp.stack([t1, t2])
    centres = pb[None, :] + mv(Rb, c[None, :] + t[:, None] * a[None, :])
    return _stack_slots([sphere_box(centres[k], Ra, sa, pb, Rb, sb) for k in range(2)])


def _stack_slots(slots) -> Slots:
    return Slots(*(jnp.concatenate(parts) for parts in zip(*slots, strict=True)))


# ------------------------------------------------------------- support-function pairs


def convex_shape(kind, p, R, size) -> convex.Convex:
    """The shape of ``kind`` at (p, R) as a :class:`~jaxmbd.contact.convex.Convex`."""
    if kind is SPHERE:
        return convex.point(p, size[0])
    if kind is CAPSULE:
        return convex.segment(p, R, size[0], size[1])
    if kind is BOX:
        return convex.box(p, R, size)
    if kind is CYLINDER:
        return convex.cylinder(p, R, size[0], size[1])
    if kind is ELLIPSOID:
        return convex.ellipsoid(p, R, size)
    return convex.hull(p, R, size)


def convex_shape_of(kinds, which, p, R, size) -> convex.Convex:
    """The shape of kind ``kinds[which]`` at (p, R), ``kinds`` a tuple of kinds (static)
    and ``which`` an index into it that may be traced: one program serves shapes of
    several kinds (every kind's support point is computed, the one of ``which`` kept)."""
    if len(kinds) == 1:
        return convex_shape(kinds[0], p, R, size)
    shapes = [convex_shape(each, p, R, size) for each in kinds]
    one = jnp.arange(len(kinds)) == which

    def pick(values):
        values = jnp.stack(values)
        mask = one.reshape(one.shape + (1,) * (values.ndim - 1))
        return jnp.sum(jnp.where(mask, values, 0.0), axis=0)

    return convex.Convex(
        lambda d: pick([shape.support(d) for shape in shapes]),
        pick([shape.centre for shape in shapes]),
        pick([jnp.asarray(shape.margin, p.dtype) for shape in shapes]),
        pick([jnp.asarray(shape.scale, p.dtype) for shape in shapes]),
    )


def _support_pair(kind_a, kind_b):
    """The narrow phase of two convex shapes by GJK and MPR (:mod:`jaxmbd.contact.convex`):
    one slot, the closest points or the penetration's."""

    def collide(pa, Ra, sa, pb, Rb, sb) -> Slots:
        a, b = convex_shape(kind_a, pa, Ra, sa), convex_shape(kind_b, pb, Rb, sb)
        return _one(*convex.collide(a, b))

    collide.__name__ = f"{kind_a.name}_{kind_b.name}"
    return collide


def plane_ellipsoid(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Plane A against ellipsoid B, one slot: the ellipsoid's support point along -n, its
    deepest (MuJoCo's mjc_PlaneConvex, engine_collision_convex.c, for a smooth shape)."""
    n = Ra[:, 2]
    deepest = convex.ellipsoid(pb, Rb, sb).support(-n)
    gap = _dot(n, deepest - pa)
    return _one(gap, deepest - n * (0.5 * gap), n)


_MESH_TILT = 0.1  # tangent weight of plane_mesh's extra support directions (about 6 deg)


def plane_mesh(pa, Ra, sa, pb, Rb, sb) -> Slots:
    """Plane A against the convex hull B of a mesh, four slots, each a hull vertex: the
    deepest (MuJoCo's mjc_PlaneConvex first contact), then the support vertices of the
    directions -n + 0.1 t for three tangents t at 120 deg, each among the vertices not yet
    taken: a hull resting on a face rests on three points spread over that face (MuJoCo adds
    up to two vertices adjacent to the deepest one)."""
    n = Ra[:, 2]
    xyz, weight = sb[:, :3], sb[:, 3]
    world = pb[None, :] + mv(Rb, xyz)
    height = _dot(world, n) - _dot(n, pa)
    t1, t2 = Ra[:, 0], Ra[:, 1]
    c, s = -0.5, 0.5 * np.sqrt(3.0)
    tilts = [jnp.zeros(3), t1, c * t1 + s * t2, c * t1 - s * t2]
    free = weight > 0
    gaps, points = [], []
    for tilt in tilts:
        score = jnp.where(free, -height + _MESH_TILT * _dot(world, tilt), -jnp.inf)
        one = jnp.arange(xyz.shape[0]) == jnp.argmax(score)
        free = free & ~one
        gap = jnp.sum(jnp.where(one, height, 0.0))
        vertex = jnp.sum(jnp.where(one[:, None], world, 0.0), axis=0)
        gaps.append(gap)
        points.append(vertex - n * (0.5 * gap))
    return Slots(jnp.stack(gaps), jnp.stack(points), jnp.broadcast_to(n, (4, 3)))


# ----------------------------------------------------------------------------- the records


class PairKind(NamedTuple):
    """One pair kind: its name (``"<A>_<B>"``), its number of contact slots and its
    narrow-phase function ``collide(pa, Ra, sa, pb, Rb, sb) -> Slots``."""

    name: str
    slots: int
    collide: object


#: The pair kinds by the shape records of (A, B), A first.
PAIRS: dict[tuple[ShapeKind, ShapeKind], PairKind] = {
    (PLANE, SPHERE): PairKind("plane_sphere", 1, plane_sphere),
    (PLANE, CAPSULE): PairKind("plane_capsule", 2, plane_capsule),
    (PLANE, BOX): PairKind("plane_box", 8, plane_box),
    (PLANE, CYLINDER): PairKind("plane_cylinder", 4, plane_cylinder),
    (SPHERE, SPHERE): PairKind("sphere_sphere", 1, sphere_sphere),
    (SPHERE, CAPSULE): PairKind("sphere_capsule", 1, sphere_capsule),
    (SPHERE, BOX): PairKind("sphere_box", 1, sphere_box),
    (CAPSULE, CAPSULE): PairKind("capsule_capsule", 1, capsule_capsule),
    (BOX, BOX): PairKind("box_box", 16, box_box),
    (CAPSULE, BOX): PairKind("capsule_box", 2, capsule_box),
    (PLANE, MESH): PairKind("plane_mesh", 4, plane_mesh),
    (PLANE, ELLIPSOID): PairKind("plane_ellipsoid", 1, plane_ellipsoid),
}
PAIRS.update(
    {
        (a, b): PairKind(f"{a.name}_{b.name}", 1, _support_pair(a, b))
        for a, b in [
            (SPHERE, CYLINDER),
            (CAPSULE, CYLINDER),
            (BOX, CYLINDER),
            (CYLINDER, CYLINDER),
            (SPHERE, ELLIPSOID),
            (CAPSULE, ELLIPSOID),
            (BOX, ELLIPSOID),
            (CYLINDER, ELLIPSOID),
            (ELLIPSOID, ELLIPSOID),
            (ELLIPSOID, MESH),
            (SPHERE, MESH),
            (CAPSULE, MESH),
            (BOX, MESH),
            (CYLINDER, MESH),
            (MESH, MESH),
        ]
    }
)
#: The shapes a height field collides with (MuJoCo's ``mjc_ConvexHField``: every convex
#: geom), pair kinds ``"hfield_<kind>"`` (:mod:`jaxmbd.contact.height_field`: their slots
#: depend on the shape's size).
HFIELD_PARTNERS = (SPHERE, CAPSULE, BOX, CYLINDER, ELLIPSOID, MESH)
#: Shape kinds that collide, in the canonical order of a pair kind (A before B).
COLLIDING_KINDS = tuple(
    k.name for k in (PLANE, HFIELD, SPHERE, CAPSULE, BOX, CYLINDER, ELLIPSOID, MESH)
)
#: Contact slots of each supported pair kind.
SLOTS = {pair.name: pair.slots for pair in PAIRS.values()}
#: The narrow-phase function of each pair kind.
COLLIDE = {pair.name: pair.collide for pair in PAIRS.values()}
