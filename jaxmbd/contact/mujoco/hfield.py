"""MuJoCo's height-field collider ``mjc_ConvexHField`` (``engine_collision_convex.c``), one
prism at a time, with MuJoCo's native GJK and EPA (:mod:`.gjk`, :mod:`.epa`).

MuJoCo collides a geom with each prism of a height field under the geom's bounding box
(:mod:`jaxmbd.contact.height_field` places the window, cuts the prisms and applies MuJoCo's
prism height test): the prism's vertices 0-2 at the base, 3-5 the cell's triangle raised by
the pair's margin, its support ``mjc_prism_support`` (the best of the base or the top
triangle, as the direction points down or up; the first vertex on ties), its centre the
mean of the six (``mjc_center``). The geom is expressed in the field's frame and grows by
the margin (half of it per support call, as ``mjc_support`` grows every geom), and
``mjc_penetration`` runs ``mjc_ccd`` with ``opt.ccd_iterations`` and ``opt.ccd_tolerance``:
a contact where the (inflated) distance is negative, at that distance (no margin added), at
the witnesses' midpoint, with the normal from the prism's witness to the geom's.

Smooth partners only (spheres, capsules, ellipsoids, cylinders): against a box or a mesh
without margin MuJoCo runs its discrete variant (vertex indices, other tolerances), which
this port does not have.
"""

from __future__ import annotations

import jax.numpy as jnp

from ... import _config  # noqa: F401  (float64)
from .convex import (
    CAPSULE,
    CYLINDER,
    ELLIPSOID,
    ITERATIONS,
    SPHERE,
    TOLERANCE,
    CCDObject,
    ccd,
    geom_object,
)
from .gjk import dot3, matvec, matvec_t, normalize3

#: the partner geom types this port collides (MuJoCo's mjtGeom numbers)
SMOOTH_TYPES = (SPHERE, CAPSULE, ELLIPSOID, CYLINDER)


def prism_object(bottom, top) -> CCDObject:
    """The :class:`~.convex.CCDObject` of a prism with base vertices ``bottom`` (3, 3) and
    top vertices ``top`` (3, 3) (margin included), in the field's frame."""

    def support(direction):  # mjc_prism_support
        tri = jnp.where(direction[2] < 0, bottom, top)
        best, pick = dot3(tri[0], direction), tri[0]
        for i in (1, 2):
            value = dot3(tri[i], direction)
            better = value > best
            best = jnp.where(better, value, best)
            pick = jnp.where(better, tri[i], pick)
        return pick

    center = bottom[0]
    for vertex in (bottom[1], bottom[2], top[0], top[1], top[2]):
        center = center + vertex
    return CCDObject(support, support, 0.0, False, center * (1.0 / 6.0))


def local_pose(pos1, mat1, pos2, mat2):
    """A geom's pose (pos2, mat2) in the field's frame (pos1, mat1), as
    ``mjc_ConvexHField`` computes it (``mju_mulMatTVec3``, ``mji_mulMatTMat3``)."""
    pos = matvec_t(mat1, pos2 - pos1)
    mat = mat1[0][:, None] * mat2[0][None, :]
    mat = mat + mat1[1][:, None] * mat2[1][None, :]
    mat = mat + mat1[2][:, None] * mat2[2][None, :]
    return pos, mat


def prism_contact(bottom, top, geom_type, pos, mat, size, margin, *, kinds=SMOOTH_TYPES,
                  iterations: int = ITERATIONS, tolerance=TOLERANCE):  # fmt: skip
    """``mjc_penetration`` of one prism (``bottom``, ``top`` (3, 3) each: the cell's
    triangle, not yet raised by the margin) and a geom of ``geom_type`` (an int, or a
    traced mjtGeom number among ``kinds``) at (pos, mat) in the field's frame
    (:func:`local_pose`), size ``size``: (found, dist, point, normal), in the field's
    frame."""
    raised = top.at[:, 2].add(margin)
    obj1 = prism_object(bottom, raised)
    obj2 = geom_object(geom_type, pos, mat, size, margin, kinds=kinds)
    found, dist, x1, x2 = ccd(obj1, obj2, iterations=iterations, tolerance=tolerance)
    normal, _ = normalize3(x1 - x2)
    return found, dist, (x1 + x2) * 0.5, normal


def to_world(pos1, mat1, point, normal):
    """A contact's point and normal from the field's frame to the world's."""
    return matvec(mat1, point) + pos1, matvec(mat1, normal)
