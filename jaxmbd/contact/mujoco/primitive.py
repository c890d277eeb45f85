"""MuJoCo's primitive colliders (``engine_collision_primitive.c``) and the plane-ellipsoid
case of ``mjc_PlaneConvex`` (``engine_collision_convex.c``), in JAX.

Each public kernel takes ``(pos1, mat1, size1, pos2, mat2, size2, margin)`` for MuJoCo's geom1
(the lower geom type) and geom2 and returns :class:`~.common.Contacts` with as many slots as
MuJoCo's ``mj_maxContact`` allows for the pair. The ``_raw_*`` helpers reproduce MuJoCo's
``mjraw_*`` functions, which other colliders call with modified arguments.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from .common import (
    MINVAL,
    Contacts,
    Raw,
    axis_z,
    compact,
    finish,
    normalize3,
    safe_div,
    safe_sqrt,
    select,
    stack,
)

_ZERO3 = np.zeros(3)  # NumPy: a jnp array here would start JAX's backend at import


def _raw_plane_sphere(margin, pos1, mat1, pos2, radius2) -> Raw:
    """MuJoCo's ``mjraw_PlaneSphere``: one contact, normal the plane's z axis."""
    normal = axis_z(mat1)
    cdist = jnp.dot(pos2 - pos1, normal)
    dist = cdist - radius2
    pos = pos2 + normal * (-dist / 2 - radius2)
    return Raw(dist, pos, normal, _ZERO3, cdist <= margin + radius2)


def _raw_sphere_sphere(margin, pos1, mat1, radius1, pos2, mat2, radius2) -> Raw:
    """MuJoCo's ``mjraw_SphereSphere``; coincident centres take the normal from the cross
    product of the two z axes ((1, 0, 0) when they are parallel too)."""
    dif = pos1 - pos2
    cdist_sqr = jnp.dot(dif, dif)
    min_dist = margin + radius1 + radius2
    dist = safe_sqrt(cdist_sqr) - radius1 - radius2
    normal, length = normalize3(pos2 - pos1)
    coincident, _ = normalize3(jnp.cross(axis_z(mat1), axis_z(mat2)))
    normal = jnp.where(length < MINVAL, coincident, normal)
    pos = pos1 + normal * (radius1 + dist / 2)
    return Raw(dist, pos, normal, _ZERO3, cdist_sqr <= min_dist * min_dist)


def _raw_sphere_capsule(margin, pos1, mat1, radius1, pos2, mat2, size2) -> Raw:
    """MuJoCo's ``mjraw_SphereCapsule``: sphere against the nearest point of the segment."""
    axis = axis_z(mat2)
    x = jnp.clip(jnp.dot(axis, pos1 - pos2), -size2[1], size2[1])
    return _raw_sphere_sphere(margin, pos1, mat1, radius1, pos2 + axis * x, mat2, size2[0])


def plane_sphere(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_PlaneSphere`` (1 slot)."""
    return finish(stack(_raw_plane_sphere(margin, pos1, mat1, pos2, size2[0])))


def plane_capsule(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_PlaneCapsule`` (2 slots: the +z and the -z end); the first tangent is
    the capsule's axis."""
    axis = axis_z(mat2)
    segment = axis * size2[1]
    ends = [_raw_plane_sphere(margin, pos1, mat1, pos2 + s * segment, size2[0]) for s in (1, -1)]
    return finish(stack(*(end._replace(tangent=axis) for end in ends)))


def plane_cylinder(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_PlaneCylinder`` (4 slots): the deepest rim point of the cap nearer the
    plane, the matching point of the other cap, and two more points of the near cap's rim
    (120 degrees either side) when they are within the margin."""
    normal = axis_z(mat1)
    axis = axis_z(mat2)
    radius, half_height = size2[0], size2[1]

    # make sure the axis points towards the plane
    prjaxis = jnp.dot(normal, axis)
    flip = prjaxis > 0
    axis = jnp.where(flip, -axis, axis)
    prjaxis = jnp.where(flip, -prjaxis, prjaxis)

    dist0 = jnp.dot(pos2 - pos1, normal)

    # the rim direction nearest the plane: -normal without its axis part, radius long; the
    # cylinder's x axis when the disk is parallel to the plane
    vec = axis * prjaxis - normal
    len_sqr = jnp.dot(vec, vec)
    general = len_sqr >= MINVAL * MINVAL
    vec = jnp.where(general, vec * safe_div(radius, safe_sqrt(len_sqr)), mat2[:, 0] * radius)
    prjvec = jnp.dot(vec, normal)

    axis = axis * half_height
    prjaxis = prjaxis * half_height

    d_first = dist0 + prjaxis + prjvec
    first_ok = d_first <= margin
    first = Raw(d_first, pos2 + vec + axis - normal * (d_first * 0.5), normal, _ZERO3, first_ok)
    d_second = dist0 - prjaxis + prjvec
    second = Raw(
        d_second,
        pos2 + vec - axis - normal * (d_second * 0.5),
        normal,
        _ZERO3,
        first_ok & (d_second <= margin),
    )

    # the two side points of the near cap, at -vec/2 +- sideways * sqrt(3)/2 radius
    d_side = dist0 + prjaxis - prjvec * 0.5
    side_ok = first_ok & (d_side <= margin)
    sideways, _ = normalize3(jnp.cross(vec, axis))
    sideways = sideways * (radius * jnp.sqrt(3.0) / 2)
    base = pos2 + axis - 0.5 * vec - normal * (d_side * 0.5)
    side_a = Raw(d_side, base + sideways, normal, _ZERO3, side_ok)
    side_b = Raw(d_side, base - sideways, normal, _ZERO3, side_ok)
    # MuJoCo writes the side points after the second point, whether or not it kept it
    return finish(compact(stack(first, second, side_a, side_b), 4))


_CORNER_SIGNS = np.array(
    [[1.0 if i & 1 else -1.0, 1.0 if i & 2 else -1.0, 1.0 if i & 4 else -1.0] for i in range(8)]
)


def plane_box(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_PlaneBox`` (4 slots): the first four corners, in MuJoCo's corner order
    (bit 0 x, bit 1 y, bit 2 z), that lie within the margin and below the box centre."""
    normal = axis_z(mat1)
    dist = jnp.dot(pos2 - pos1, normal)
    corners = (_CORNER_SIGNS * size2) @ mat2.T  # relative to the box centre, world axes
    ldist = corners @ normal
    depth = dist + ldist
    keep = ~((depth > margin) | (ldist > 0))
    pos = corners + pos2 - normal * (depth / 2)[:, None]
    raw = Raw(depth, pos, jnp.broadcast_to(normal, (8, 3)), jnp.zeros((8, 3)), keep)
    return finish(compact(raw, 4))


def plane_ellipsoid(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_PlaneConvex`` for an ellipsoid (1 slot): the ellipsoid's support point
    along -normal (``mjc_support``) against the plane."""
    normal = axis_z(mat1)
    local_dir = mat2.T @ -normal
    unit, _ = normalize3(local_dir * size2)
    support = mat2 @ (unit * size2) + pos2
    dist = jnp.dot(normal, support - pos1)
    pos = support - normal * (0.5 * dist)
    return finish(stack(Raw(dist, pos, normal, _ZERO3, dist <= margin)))


def sphere_sphere(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_SphereSphere`` (1 slot)."""
    return finish(stack(_raw_sphere_sphere(margin, pos1, mat1, size1[0], pos2, mat2, size2[0])))


def sphere_capsule(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_SphereCapsule`` (1 slot)."""
    return finish(stack(_raw_sphere_capsule(margin, pos1, mat1, size1[0], pos2, mat2, size2)))


def sphere_cylinder(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_SphereCylinder`` (1 slot): against the side (sphere-sphere with the
    axis point), a cap (plane-sphere, normal flipped) or the rim (a point sphere)."""
    radius, height = size2[0], size2[1]
    axis = axis_z(mat2)
    vec = pos1 - pos2
    x = jnp.dot(axis, vec)
    a_proj = axis * x
    p_proj = vec - a_proj
    p_proj_sqr = jnp.dot(p_proj, p_proj)

    collide_side = jnp.abs(x) < height
    collide_cap = p_proj_sqr < radius * radius
    # centre inside: keep the nearer of side and cap
    both = collide_side & collide_cap
    cap_nearer = (height - jnp.abs(x)) < (radius - safe_sqrt(p_proj_sqr))
    collide_side = collide_side & ~(both & cap_nearer)
    collide_cap = collide_cap & ~(both & ~cap_nearer)

    side = _raw_sphere_sphere(margin, pos1, mat1, size1[0], a_proj + pos2, mat2, radius)

    top = x > 0
    pos_cap = pos2 + axis * jnp.where(top, height, -height)
    flipmat = mat2 * jnp.array([-1.0, 1.0, -1.0])  # MuJoCo's bottom cap: columns 0, 2 negated
    mat_cap = jnp.where(top, mat2, flipmat)
    cap = _raw_plane_sphere(margin, pos_cap, mat_cap, pos1, size1[0])
    cap = cap._replace(normal=-cap.normal)  # the plane is geom2 here

    # the rim point nearest the centre (p_proj is not zero here: the centre is beyond the rim)
    rim_point = (
        p_proj * safe_div(radius, safe_sqrt(p_proj_sqr))
        + axis * jnp.where(top, height, -height)
        + pos2
    )
    corner = _raw_sphere_sphere(margin, pos1, mat1, size1[0], rim_point, mat2, 0.0)

    raw = select(collide_side, side, select(collide_cap, cap, corner))
    return finish(stack(raw))


# MuJoCo >= 3.16 treats axes as parallel when sin^2 of their angle is below this (measured on
# MuJoCo 4.0.0: the switch from one contact to two lies at sin(angle) = 1e-4 for any lengths)
_PARALLEL_SIN2 = 1e-8


def _raw_capsule_capsule(margin, pos1, mat1, size1, pos2, mat2, size2) -> Raw:
    """MuJoCo's ``mjraw_CapsuleCapsule`` as 2 slots: the nearest points of the two segments,
    or for parallel axes one contact per end of capsule 1, each end's nearest point on
    segment 2 projected back onto segment 1 (the ends of the overlap; a shared nearest pair
    twice when the segments do not overlap).

    MuJoCo 3.16 changed this function ("floating-point cancellation ... for parallel and
    near-parallel axes"); its source is not in the available snapshot (3.12), so the
    parallel test (relative, sin^2 < 1e-8), the determinant as |axis1 x axis2|^2 and the
    parallel contacts are reconstructed from MuJoCo 4.0.0's output and checked against it.
    """
    axis1 = axis_z(mat1) * size1[1]
    axis2 = axis_z(mat2) * size2[1]
    dif = pos1 - pos2
    ma = jnp.dot(axis1, axis1)
    mb = -jnp.dot(axis1, axis2)
    mc = jnp.dot(axis2, axis2)
    u = -jnp.dot(axis1, dif)
    v = jnp.dot(axis2, dif)
    cross = jnp.cross(axis1, axis2)
    det = jnp.dot(cross, cross)  # ma * mc - mb^2 without its cancellation
    general = det >= _PARALLEL_SIN2 * ma * mc

    def sphere(x1, x2):
        return _raw_sphere_sphere(
            margin, pos1 + axis1 * x1, mat1, size1[0], pos2 + axis2 * x2, mat2, size2[0]
        )

    # general configuration: clip the unconstrained solution to the segments, as MuJoCo does
    x1 = safe_div(mc * u - mb * v, det)
    x2 = safe_div(ma * v - mb * u, det)
    x2 = jnp.where(x1 > 1, safe_div(v - mb, mc), jnp.where(x1 < -1, safe_div(v + mb, mc), x2))
    x1 = jnp.clip(x1, -1, 1)
    x1 = jnp.where(
        x2 > 1,
        jnp.clip(safe_div(u - mb, ma), -1, 1),
        jnp.where(x2 < -1, jnp.clip(safe_div(u + mb, ma), -1, 1), x1),
    )
    x2 = jnp.clip(x2, -1, 1)
    nearest = sphere(x1, x2)
    unused = nearest._replace(valid=jnp.asarray(False))
    general_raw = stack(nearest, unused)

    # parallel axes: each end of segment 1, its nearest point on segment 2, projected back
    ends = []
    for end in (-1.0, 1.0):
        x2 = jnp.clip(safe_div(v - mb * end, mc), -1, 1)
        x1 = jnp.clip(safe_div(u - mb * x2, ma), -1, 1)
        ends.append(sphere(x1, x2))
    parallel_raw = compact(stack(*ends), 2)
    return select(general, general_raw, parallel_raw)


def capsule_capsule(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_CapsuleCapsule`` (2 slots)."""
    return finish(_raw_capsule_capsule(margin, pos1, mat1, size1, pos2, mat2, size2))
