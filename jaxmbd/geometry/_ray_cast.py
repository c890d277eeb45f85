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

from .. import _config  # noqa: F401

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


def _triangle_hit(a, b, c, p, v):
    """The distance x along p + x v to the plane of the triangle (a, b, c) where the ray
    crosses it inside the triangle (either side), else -1 (MuJoCo's ``ray_triangle``;
    Moller and Trumbore's barycentric test)."""
    e1, e2 = b - a, c - a
    q = jnp.cross(v, e2)
    det = _dot(e1, q)
    ok = jnp.abs(det) >= _MINVAL
    inv = 1.0 / jnp.where(ok, det, 1.0)
    s = p - a
    u = _dot(s, q) * inv
    r = jnp.cross(s, e1)
    w = _dot(v, r) * inv
    x = _dot(e2, r) * inv
    inside = ok & (u >= 0) & (w >= 0) & (u + w <= 1)
    return jnp.where(inside & (x >= 0), x, -1.0)


def ray_hfield(size, p, v, *, heights):
    """A height field (MuJoCo's ``mj_rayHfield``, ``engine_ray.c``) of ``heights`` (nrow,
    ncol) over [-size[0], size[0]] x [-size[1], size[1]] with its base box down to
    z = -size[2]: the nearest of the base box, the field's triangles and the side walls
    below its edges. MuJoCo tests the triangles of every cell in the (padded) rectangle
    that the ray's stretch over the field spans; here those of the cells that stretch
    crosses, a fixed number (nrow + ncol + 1: between consecutive crossings of grid lines),
    which hold every triangle the ray can meet."""
    nrow, ncol = heights.shape
    sx, sy, base = size[0], size[1], size[2]
    dx, dy = 2.0 * sx / (ncol - 1), 2.0 * sy / (nrow - 1)
    hit_base = ray_box(jnp.stack([sx, sy, 0.5 * base]), p + jnp.stack([0.0, 0.0, 0.5 * base]), v)
    lo = jnp.minimum(jnp.min(heights), 0.0)
    hi = jnp.maximum(jnp.max(heights), 0.0)
    # the stretch t in [t0, t1] of the ray inside the box over the field (slabs)
    t0, t1 = jnp.zeros(()), jnp.full((), jnp.inf)
    for k, (a, b) in enumerate(((-sx, sx), (-sy, sy), (lo, hi))):
        along = jnp.abs(v[k]) > _MINVAL
        safe = jnp.where(along, v[k], 1.0)
        ta, tb = (a - p[k]) / safe, (b - p[k]) / safe
        within = (p[k] >= a) & (p[k] <= b)
        t0 = jnp.where(along, jnp.maximum(t0, jnp.minimum(ta, tb)), jnp.where(within, t0, jnp.inf))
        t1 = jnp.where(along, jnp.minimum(t1, jnp.maximum(ta, tb)), t1)
    crosses = t0 <= t1
    t1 = jnp.where(crosses, t1, t0)
    # the parameters where the stretch crosses grid lines, in order: between two, one cell
    lines = []
    for k, n, step, s in ((0, ncol, dx, sx), (1, nrow, dy, sy)):
        along = jnp.abs(v[k]) > _MINVAL
        safe = jnp.where(along, v[k], 1.0)
        t = (step * jnp.arange(n) - s - p[k]) / safe
        lines.append(jnp.where(along, t, t0))
    t = jnp.sort(jnp.clip(jnp.concatenate([t0[None], t1[None]] + lines), t0, t1))
    mid = 0.5 * (t[1:] + t[:-1])
    col = jnp.clip(jnp.floor((p[0] + mid * v[0] + sx) / dx), 0, ncol - 2).astype(jnp.int32)
    row = jnp.clip(jnp.floor((p[1] + mid * v[1] + sy) / dy), 0, nrow - 2).astype(jnp.int32)

    def vertex(r, c):
        return jnp.stack([dx * c - sx, dy * r - sy, heights[r, c]], axis=-1)

    v00, v01 = vertex(row, col), vertex(row, col + 1)
    v11, v10 = vertex(row + 1, col + 1), vertex(row + 1, col)
    cells = jnp.concatenate([_triangle_hit(v00, v01, v11, p, v),
                             _triangle_hit(v00, v11, v10, p, v)])  # fmt: skip
    cells = jnp.where(crosses, cells, -1.0)
    # the side walls: a face of the box over the field met below the field's edge line
    walls = []
    for k, side in ((0, -1.0), (0, 1.0), (1, -1.0), (1, 1.0)):
        j = 1 - k
        n_along, step, s_k, s_j = (nrow, dy, sx, sy) if k == 0 else (ncol, dx, sy, sx)
        along = jnp.abs(v[k]) > _MINVAL
        x = (side * s_k - p[k]) / jnp.where(along, v[k], 1.0)
        q = p + x * v
        u = (q[j] + s_j) / step
        u0 = jnp.clip(jnp.floor(u), 0, n_along - 2)
        i0 = u0.astype(jnp.int32)
        edge = (
            heights[:, 0 if side < 0 else ncol - 1]
            if k == 0
            else heights[0 if side < 0 else nrow - 1]
        )
        z_line = edge[i0] * (u0 + 1 - u) + edge[i0 + 1] * (u - u0)
        on = along & (x >= 0) & (jnp.abs(q[j]) <= s_j) & (q[2] >= lo) & (q[2] <= hi)
        walls.append(jnp.where(on & (q[2] < z_line), x, -1.0))
    return _nearest(hit_base, *walls, _nearest_of(cells))


def _nearest_of(x):
    """The smallest non-negative entry of x (n,), -1 where none is."""
    hit = x >= 0
    return jnp.where(jnp.any(hit), jnp.min(jnp.where(hit, x, jnp.inf)), -1.0)


#: The ray test of each MuJoCo geom kind over a grid of elevations, ``(size, p, v, *,
#: heights) -> x`` (the target carries its ``heights``).
RAY_FIELDS = {"hfield": ray_hfield}

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
