"""Whether a ray meets a sensor zone: MuJoCo's ``mju_rayGeom`` (``engine_ray.c``) as a test.

A touch sensor counts a contact when the ray from the contact point along its normal
(away from the sensor's body) meets the site's volume (MuJoCo's ``engine_sensor.c``,
``mjSENS_TOUCH``: ``mju_rayGeom(...) >= 0``, which is always true when the point lies inside
the zone). ``mju_rayGeom`` returns the nearest non-negative distance at which the ray
crosses the zone's surface; such a distance exists exactly when the half-line
p + t d, t >= 0 meets the closed solid, which is what :func:`ray_meets_zone` tests, in the
zone's frame, for MuJoCo's site shapes: sphere (radius size[0]), capsule (radius size[0],
half-length size[1] along z), ellipsoid (semi-axes size), cylinder (radius size[0],
half-height size[1] along z) and box (half-sizes size).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401

_TINY = 1e-15  # MuJoCo's mjMINVAL


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def _ball(p, d, radius):
    """The half-line p + t d (t >= 0) meets the ball |x| <= radius."""
    dd = jnp.maximum(_dot(d, d), _TINY)
    t = jnp.maximum(-_dot(p, d) / dd, 0.0)
    x = p + t[..., None] * d
    return _dot(x, x) <= radius**2


def _interval(lo, hi, p, d):
    """The t-interval (t0, t1) on which lo <= p + t d <= hi, for scalar components; an
    empty interval (t0 > t1) where d = 0 and p lies outside."""
    flat = jnp.abs(d) <= _TINY
    safe = jnp.where(flat, 1.0, d)
    a, b = (lo - p) / safe, (hi - p) / safe
    inside = (p >= lo) & (p <= hi)
    t0 = jnp.where(flat, jnp.where(inside, -jnp.inf, jnp.inf), jnp.minimum(a, b))
    t1 = jnp.where(flat, jnp.where(inside, jnp.inf, -jnp.inf), jnp.maximum(a, b))
    return t0, t1


def _disc_interval(p, d, radius):
    """The t-interval on which (p + t d) restricted to x, y lies in the disc of ``radius``."""
    px, dx = p[..., :2], d[..., :2]
    a = _dot(dx, dx)
    b = _dot(px, dx)
    c = _dot(px, px) - radius**2
    flat = a <= _TINY
    disc = b * b - a * c
    root = jnp.sqrt(jnp.maximum(disc, 0.0))
    safe = jnp.where(flat, 1.0, a)
    t0 = jnp.where(disc >= 0, (-b - root) / safe, jnp.inf)
    t1 = jnp.where(disc >= 0, (-b + root) / safe, -jnp.inf)
    t0 = jnp.where(flat, jnp.where(c <= 0, -jnp.inf, jnp.inf), t0)
    t1 = jnp.where(flat, jnp.where(c <= 0, jnp.inf, -jnp.inf), t1)
    return t0, t1


def _segment_distance_sq(p, d, half, radius):
    """Squared distance from the half-line p + t d (t >= 0) to the segment z in
    [-half, half] on the z axis: the half-line cut where it is past the capsule (no point
    beyond can be nearer), then the closest points of two segments (Ericson 2005,
    Real-Time Collision Detection, section 5.1.9, ``ClosestPtSegmentSegment``)."""
    zero = jnp.zeros_like(p[..., 2])
    length = jnp.sqrt(jnp.maximum(_dot(d, d), _TINY))
    reach = (jnp.linalg.norm(p, axis=-1) + half + radius + 1.0) / length
    d1 = d * reach[..., None]  # the ray as a segment p + s d1, s in [0, 1]
    p2 = jnp.stack([zero, zero, zero - half], -1)
    d2 = jnp.stack([zero, zero, zero + 2.0 * half], -1)
    r = p - p2
    a, e = _dot(d1, d1), _dot(d2, d2)
    b, c, f = _dot(d1, d2), _dot(d1, r), _dot(d2, r)
    e_safe = jnp.where(e > _TINY, e, 1.0)
    denom = a * e - b * b
    s = jnp.where(denom > _TINY * a * e_safe, jnp.clip((b * f - c * e) / jnp.where(
        denom > _TINY * a * e_safe, denom, 1.0), 0.0, 1.0), 0.0)  # fmt: skip
    t = (b * s + f) / e_safe
    s = jnp.where(
        t < 0, jnp.clip(-c / a, 0.0, 1.0), jnp.where(t > 1, jnp.clip((b - c) / a, 0.0, 1.0), s)
    )
    t = jnp.clip(t, 0.0, 1.0)
    # a point segment (half = 0): the ray against the centre
    s = jnp.where(e > _TINY, s, jnp.clip(-c / a, 0.0, 1.0))
    t = jnp.where(e > _TINY, t, 0.0)
    gap = p + s[..., None] * d1 - (p2 + t[..., None] * d2)
    return _dot(gap, gap)


def _meets_sphere(size, p, d):
    return _ball(p, d, size[0])


def _meets_ellipsoid(size, p, d):
    return _ball(p / size, d / size, 1.0)


def _meets_box(size, p, d):
    t0, t1 = _interval(-size, size, p, d)
    start, end = jnp.max(t0, axis=-1), jnp.min(t1, axis=-1)
    return end >= jnp.maximum(start, 0.0)


def _meets_cylinder(size, p, d):
    a0, a1 = _disc_interval(p, d, size[0])
    b0, b1 = _interval(-size[1], size[1], p[..., 2], d[..., 2])
    start, end = jnp.maximum(a0, b0), jnp.minimum(a1, b1)
    return end >= jnp.maximum(start, 0.0)


def _meets_capsule(size, p, d):
    return _segment_distance_sq(p, d, size[1], size[0]) <= size[0] ** 2


#: The test of each zone shape, ``(size, p, d) -> bool (...)``, by MuJoCo's site shape name.
_MEETS = {
    "sphere": _meets_sphere,
    "capsule": _meets_capsule,
    "ellipsoid": _meets_ellipsoid,
    "cylinder": _meets_cylinder,
    "box": _meets_box,
}
#: MuJoCo's site shapes that a touch sensor's zone may have.
ZONE_SHAPES = tuple(_MEETS)


def ray_meets_zone(shape: str, size, p, d):
    """Whether the half-line from ``p`` along ``d`` (zone frame, (..., 3)) meets the zone
    ``shape`` of ``size`` (3,) (module docstring): a boolean (...)."""
    meets = _MEETS.get(shape)
    if meets is None:
        raise ValueError(f"sensor zone: expected one of {ZONE_SHAPES}, got {shape!r}")
    return meets(size, p, d)
