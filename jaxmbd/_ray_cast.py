"""The distance along a ray to a shape's surface: MuJoCo's ``mju_rayGeom`` (``engine_ray.c``:
``ray_plane``, ``ray_sphere``, ``ray_capsule``, ``ray_ellipsoid``, ``ray_cylinder``,
``ray_box``, with its ``ray_quad``), as array functions.

Each ``ray_<shape>(size, p, v)`` takes the ray's start ``p`` and direction ``v`` (3,) in the
shape's frame (MuJoCo's ``ray_map``; ``v`` need not be unit, the distance is in units of
``|v|``) and MuJoCo's geom ``size`` (3,), and returns the smallest x >= 0 with p + x v on
the surface, or -1 where the ray misses; with MuJoCo's branches kept (the bounding-sphere
rejections, a quadratic's first non-negative root only, a plane seen from its back side
missed, a plane's rendered rectangle), so that the values are MuJoCo's. Branches are
selected with ``where`` on safe operands: values are differentiable in ``p``, ``v`` and
``size`` wherever the hit surface is smooth and the ray is not tangent to it.
"""

from __future__ import annotations

import jax.numpy as jnp

from . import _config  # noqa: F401

_MINVAL = 1e-15  # MuJoCo's mjMINVAL


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def _nearest(*candidates):
    """The smallest non-negative of the candidates (each -1 where absent), else -1."""
    out = jnp.full_like(candidates[0], jnp.inf)
    for x in candidates:
        out = jnp.where(x >= 0, jnp.minimum(out, x), out)
    return jnp.where(jnp.isinf(out), -1.0, out)


def _roots(a, b, c):
    """MuJoCo's ``ray_quad``: the roots (x0, x1) of a x^2 + 2 b x + c = 0 (-1, -1 where
    b^2 - a c < mjMINVAL) and its answer: x0 if x0 >= 0, else x1 if x1 >= 0, else -1."""
    det = b * b - a * c
    real = det >= _MINVAL
    root = jnp.sqrt(jnp.where(real, det, 1.0))
    safe_a = jnp.where(real, a, 1.0)
    x0 = jnp.where(real, (-b - root) / safe_a, -1.0)
    x1 = jnp.where(real, (-b + root) / safe_a, -1.0)
    first = jnp.where(x0 >= 0, x0, jnp.where(x1 >= 0, x1, -1.0))
    return x0, x1, first


def _sphere_hit(p, v, radius_sq):
    """MuJoCo's ``ray_sphere`` about the origin, ``radius_sq`` its squared radius."""
    return _roots(_dot(v, v), _dot(v, p), _dot(p, p) - radius_sq)[2]


def ray_plane(size, p, v):
    """The plane z = 0, hit from its front (+z) side only, within MuJoCo's rendered
    rectangle |x| <= size[0], |y| <= size[1] (a size <= 0: unbounded)."""
    front = v[2] <= -_MINVAL
    x = -p[2] / jnp.where(front, v[2], -1.0)
    p0, p1 = p[0] + x * v[0], p[1] + x * v[1]
    inside = ((size[0] <= 0) | (jnp.abs(p0) <= size[0])) & (
        (size[1] <= 0) | (jnp.abs(p1) <= size[1])
    )
    return jnp.where(front & (x >= 0) & inside, x, -1.0)


def ray_sphere(size, p, v):
    """A sphere of radius size[0]."""
    return _sphere_hit(p, v, size[0] ** 2)


def ray_ellipsoid(size, p, v):
    """An ellipsoid of semi-axes ``size``."""
    s = 1.0 / size**2
    return _roots(_dot(s * v, v), _dot(s * v, p), _dot(s * p, p) - 1.0)[2]


def _round_side(size, p, v):
    """The round side of a cylinder of radius size[0] between z = +-size[1]: the first
    non-negative root of the circle's quadratic, kept where it lies between the ends."""
    a = v[0] ** 2 + v[1] ** 2
    b = v[0] * p[0] + v[1] * p[1]
    c = p[0] ** 2 + p[1] ** 2 - size[0] ** 2
    x = _roots(a, b, c)[2]
    return jnp.where((x >= 0) & (jnp.abs(p[2] + x * v[2]) <= size[1]), x, -1.0)


def ray_capsule(size, p, v):
    """A capsule of radius size[0], its segment z in [-size[1], size[1]]."""
    bound = _sphere_hit(p, v, (size[0] + size[1]) ** 2)
    side = _round_side(size, p, v)
    caps = []
    for end in (1.0, -1.0):
        d = p - jnp.array([0.0, 0.0, end]) * size[1]
        x0, x1, _ = _roots(_dot(v, v), _dot(v, d), _dot(d, d) - size[0] ** 2)
        for x in (x0, x1):  # the cap's half beyond the segment's end only
            beyond = end * (p[2] + x * v[2]) >= size[1]
            caps.append(jnp.where((x >= 0) & beyond, x, -1.0))
    return jnp.where(bound < 0, -1.0, _nearest(side, *caps))


def ray_cylinder(size, p, v):
    """A cylinder of radius size[0] between z = +-size[1]."""
    bound = _sphere_hit(p, v, size[0] ** 2 + size[1] ** 2)
    axial = jnp.abs(v[2]) > _MINVAL
    safe = jnp.where(axial, v[2], 1.0)
    ends = []
    for end in (-1.0, 1.0):
        x = (end * size[1] - p[2]) / safe
        p0, p1 = p[0] + x * v[0], p[1] + x * v[1]
        ends.append(jnp.where(axial & (x >= 0) & (p0**2 + p1**2 <= size[0] ** 2), x, -1.0))
    return jnp.where(bound < 0, -1.0, _nearest(*ends, _round_side(size, p, v)))


def ray_box(size, p, v):
    """A box of half-sizes ``size``."""
    bound = _sphere_hit(p, v, _dot(size, size))
    faces = []
    for i, (j, k) in enumerate(((1, 2), (0, 2), (0, 1))):
        along = jnp.abs(v[i]) > _MINVAL
        safe = jnp.where(along, v[i], 1.0)
        for side in (-1.0, 1.0):
            x = (side * size[i] - p[i]) / safe
            on = (jnp.abs(p[j] + x * v[j]) <= size[j]) & (jnp.abs(p[k] + x * v[k]) <= size[k])
            faces.append(jnp.where(along & (x >= 0) & on, x, -1.0))
    return jnp.where(bound < 0, -1.0, _nearest(*faces))


#: The ray test of each MuJoCo geom kind that has one here, ``(size, p, v) -> x``.
RAY_SHAPES = {
    "plane": ray_plane,
    "sphere": ray_sphere,
    "capsule": ray_capsule,
    "ellipsoid": ray_ellipsoid,
    "cylinder": ray_cylinder,
    "box": ray_box,
}


def ray_distance(kind: str, size, pos, rot, point, direction):
    """MuJoCo's ``mju_rayGeom``: the distance along the ray from ``point`` along
    ``direction`` (global) to the shape ``kind`` of ``size`` at ``pos`` with axes ``rot``
    (global, columns), in units of ``|direction|``; -1 where it misses."""
    test = RAY_SHAPES.get(kind)
    if test is None:
        raise ValueError(f"ray: expected a shape of {tuple(RAY_SHAPES)}, got {kind!r}")
    return test(size, rot.T @ (point - pos), rot.T @ direction)


def nearest_hit(distances):
    """MuJoCo's ``mj_ray``: the smallest non-negative distance of ``distances`` (n,), -1
    where none is."""
    if distances.shape[0] == 0:
        return jnp.asarray(-1.0, distances.dtype)
    hit = distances >= 0
    closest = jnp.min(jnp.where(hit, distances, jnp.inf))
    return jnp.where(jnp.any(hit), closest, -1.0)
