"""Narrow phase: the contact slots of two collision shapes at given world poses.

One pure JAX function per pair kind, each returning a fixed number of slots
(:data:`SLOTS`), so that shapes stay static under ``jit`` and ``vmap``. A slot is
(``gap``, ``point``, ``normal``): the signed distance of the two surfaces along the unit
``normal`` (negative: penetration), the contact point midway between the two surfaces,
and the normal pointing from shape A (the kind's first shape) to shape B (force on B is
along +normal). A slot whose gap is positive exerts no force.

Every shape is given by its world position ``p`` (3,), rotation ``R`` (3, 3) (shape to
world) and ``size`` (3,) (:func:`shape_size`): sphere (radius, 0, 0); capsule (radius,
half length of the segment along z, 0); box (half edges along x, y, z); cylinder (radius,
half length along z, 0); plane (unused): the plane through ``p`` normal to R's z column.

========================= ======= =========================================================
kind                      slots   what
========================= ======= =========================================================
plane_sphere              1       the sphere's lowest point
plane_capsule             2       the segment's two end spheres (a lying capsule: a line)
plane_box                 8       the corners
plane_cylinder            4       the deepest rim point of both caps and two more rim points
                                  of the lower cap at +-120 deg from it (a cylinder standing
                                  on a cap rests on a triangle; as MuJoCo)
sphere_sphere             1       along the line of centres
sphere_capsule            1       the sphere against the closest point of the segment
sphere_box                1       the sphere against the closest point of the box (centre
                                  inside: the face of least penetration)
capsule_capsule           1       the closest points of the two segments (parallel: the
                                  middle of their overlap)
box_box                   16      each box's 8 corners against the other box, on the
                                  face normal of least overlap: face-face and corner-face
                                  contact, so boxes stack and rest on each other; edge-edge
                                  contact of crossing edges is not seen
========================= ======= =========================================================

Box–capsule, cylinder against anything but the plane, cones, pyramids and meshes
have no narrow phase yet (such shape pairs are skipped, with a warning, when pairs are
built). NaN-safe: unit vectors of zero length (coincident centres, a sphere centre on the
box surface, an upright cylinder, parallel segments) fall back to a fixed direction
through the double-where trick, so values and ``jax.grad`` stay finite when shapes touch
exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._small import dot as small_dot
from .._small import mv, row_vec_mat
from ..geometry import (
    BOX,
    CAPSULE,
    CYLINDER,
    PLANE,
    SHAPE_BY_NAME,
    SPHERE,
    ShapeKind,
    shape_kind,
)

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
}
#: Shape kinds that collide, in the canonical order of a pair kind (A before B).
COLLIDING_KINDS = tuple(k.name for k in (PLANE, SPHERE, CAPSULE, BOX, CYLINDER))
#: Contact slots of each supported pair kind.
SLOTS = {pair.name: pair.slots for pair in PAIRS.values()}
#: The narrow-phase function of each pair kind.
COLLIDE = {pair.name: pair.collide for pair in PAIRS.values()}
