"""MuJoCo's general convex collider ``mjc_Convex`` (``engine_collision_convex.c``) for the
smooth geom pairs it serves (ellipsoids against spheres, capsules, ellipsoids, cylinders and
boxes; cylinders against capsules, cylinders and boxes), with MuJoCo's native GJK and EPA
(:mod:`.gjk`, :mod:`.epa`; the default: ``mjDSBL_NATIVECCD`` clear) and its multi-contact
search (``mjDSBL_MULTICCD`` clear): for pairs without a sphere or ellipsoid, the first contact is
followed by four searches with both geoms turned by 1e-3 rad about the contact's tangents
(geom1 one way, geom2 the other, about the contact point), each new contact kept when it lies
farther than 1e-3 of the smaller bounding radius from those found, with the first contact's
depth.

Kernels take ``(pos1, mat1, size1, pos2, mat2, size2, margin)`` like those of
:mod:`.primitive`; the geoms' support functions (``mjc_*Support``) grow by half the margin
each, as MuJoCo's ``support`` grows them. Spheres and capsules first run GJK as a point and
a segment and take their radius off the distance (``mjc_ccd``); a deep contact reruns GJK
and EPA on the full shapes.

The port follows MuJoCo 3.12's source (the newest available) and, evaluated op by op,
gives its contacts to 1e-15 (checked against that C code compiled around ``mjc_ccd``).
Compiled, XLA fuses multiply-adds as the program's shape leads it, so a pose where GJK or
EPA stops on a tolerance, or a degenerate aligned pose, can take another iterate (and a
multi-contact slot another perturbed contact) from a one-ulp difference. MuJoCo 4.0 changed its
GJK: it finds a contact for coincident centres, where 3.12 finds none, and where GJK or EPA
stop on ``ccd_tolerance`` its iterates differ, by up to that tolerance in depth; see
tests/test_mujoco_convex.py for what agrees with 4.0 and how closely.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from ...compiled.batching import while_loop
from .common import Contacts, Raw, compact, finish, make_frame
from .epa import epa, initial_polytope
from .gjk import MINVAL2, _sqrt, dot3, gjk, matvec, matvec_t, normalize3

SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX = 2, 3, 4, 5, 6
_CONVEX_TYPES = (SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX)

#: MuJoCo's default ``opt.ccd_iterations`` and ``opt.ccd_tolerance``
ITERATIONS = 35
TOLERANCE = 1e-6

# multiCCD parameters of ``mjc_Convex``
_RELATIVE_TOLERANCE = 1e-3
_PERTURBATION_ANGLE = 1e-3


def _support(geom_type: int, pos, mat, size, direction):
    """MuJoCo's ``mjc_<type>Support`` (no margin) of a geom along a unit direction."""
    if geom_type == SPHERE:
        return size[0] * direction + pos
    local = matvec_t(mat, direction)
    if geom_type == CAPSULE:
        supp = local * size[0]
        supp = supp.at[2].add(jnp.where(local[2] >= 0, size[1], -size[1]))
        return matvec(mat, supp) + pos
    if geom_type == ELLIPSOID:
        supp = local * size
        norm2 = dot3(supp, supp)
        small = norm2 < MINVAL2
        inv = 1 / _sqrt(jnp.where(small, 1.0, norm2))
        supp = supp * (inv * size)
        return jnp.where(small, mat[:, 0] * size[0] + pos, matvec(mat, supp) + pos)
    if geom_type == CYLINDER:
        l0, l1, l2 = jnp.unstack(local)
        n2 = l0 * l0 + l1 * l1
        scl = jnp.where(n2 >= MINVAL2, size[0] / _sqrt(jnp.where(n2 > 0, n2, 1.0)), 0.0)
        supp = jnp.stack([scl * l0, scl * l1, jnp.where(l2 >= 0, size[1], -size[1])])
        return matvec(mat, supp) + pos
    if geom_type == BOX:
        return matvec(mat, jnp.where(local >= 0, size, -size)) + pos
    raise ValueError(f"mjc_Convex: no support function for geom type {geom_type}")


def _shrunk_support(geom_type: int, pos, mat, size, direction):
    """``mjc_pointSupport`` (sphere) and ``mjc_lineSupport`` (capsule)."""
    if geom_type == SPHERE:
        return pos
    z = mat[:, 2]
    along = dot3(z, direction)
    return z * jnp.where(along >= 0, size[1], -size[1]) + pos


def _with_margin(support, margin):
    """MuJoCo's ``support``: the geom's support point moved by margin / 2 along dir."""

    def grown(direction):
        point = support(direction)
        return jnp.where(margin > 0, point + direction * (0.5 * margin), point)

    return grown


def _support_any(geom_type, pos, mat, size, direction, *, kinds=_CONVEX_TYPES):
    """:func:`_support` for a geom type given as data (a traced mjtGeom number) among
    ``kinds`` (static: the types the data can take): each kind's support point, the one of
    ``geom_type`` chosen."""
    return _of_kind(geom_type, kinds, [_support(t, pos, mat, size, direction) for t in kinds])


def _of_kind(geom_type, kinds, values):
    """The entry of ``values`` (one per type of ``kinds``) of the traced ``geom_type``."""
    if len(kinds) == 1:
        return values[0]
    index = sum(jnp.where(geom_type == t, k, 0) for k, t in enumerate(kinds))
    return jnp.stack(values)[index]


def _shrunk_support_any(geom_type, pos, mat, size, direction):
    """:func:`_shrunk_support` for a sphere or capsule given as data."""
    return jnp.where(geom_type == SPHERE, pos, _shrunk_support(CAPSULE, pos, mat, size, direction))


class CCDObject(NamedTuple):
    """One side of ``mjc_ccd``: ``support`` (grown by half the margin, as MuJoCo's
    ``support``), the ``shrunk`` support that GJK first runs on (``mjc_pointSupport`` of a
    sphere, ``mjc_lineSupport`` of a capsule; the same as ``support`` otherwise), the
    ``radius`` the shrunk search takes off the distance (its radius and half the margin; 0
    otherwise), whether it ``shrinks`` (a Python bool, or traced for a type given as data)
    and its ``center`` (``mjc_center``: GJK's first witness)."""

    support: Callable
    shrunk: Callable
    radius: Any
    shrinks: Any
    center: jnp.ndarray


def geom_object(geom_type, pos, mat, size, margin, *, kinds=_CONVEX_TYPES) -> CCDObject:
    """The :class:`CCDObject` of a primitive geom at (pos, mat): ``geom_type`` an int (the
    pair's own program), or data (a traced mjtGeom number among ``kinds``, static)."""
    shrinks = (SPHERE, CAPSULE)
    if isinstance(geom_type, int):
        full = _with_margin(functools.partial(_support, geom_type, pos, mat, size), margin)
        if geom_type not in shrinks:
            return CCDObject(full, full, 0.0, False, pos)
        point = functools.partial(_shrunk_support, geom_type, pos, mat, size)
        return CCDObject(full, point, size[0] + 0.5 * margin, True, pos)
    full = _with_margin(
        functools.partial(_support_any, geom_type, pos, mat, size, kinds=kinds), margin
    )
    if not set(kinds) & set(shrinks):
        return CCDObject(full, full, 0.0, False, pos)
    shrinks_here = (geom_type == SPHERE) | (geom_type == CAPSULE)

    def point(direction):
        shrunk = _shrunk_support_any(geom_type, pos, mat, size, direction)
        return jnp.where(shrinks_here, shrunk, full(direction))

    radius = jnp.where(shrinks_here, size[0] + 0.5 * margin, 0.0)
    return CCDObject(full, point, radius, shrinks_here, pos)


def ccd(obj1: CCDObject, obj2: CCDObject, *, iterations: int, tolerance):
    """MuJoCo's ``mjc_ccd`` with one contact (``max_contacts = 1``, no distance cutoff) of
    two smooth objects (not both discrete: GJK's and EPA's tolerances are
    ``ccd_tolerance``): (found, dist, x1, x2), the witness points on each. A sphere or
    capsule first runs GJK shrunk to its point or segment, its radius taken off the
    distance; a deep contact reruns GJK and EPA on the full shapes."""
    options = dict(tolerance=tolerance, iterations=iterations)
    s1, s2 = obj1.support, obj2.support

    def deep(status, unused=False):
        """GJK's result, then EPA where it penetrates (none where ``unused``)."""
        run_epa = (status.dist <= tolerance) & (status.nsimplex > 1) & ~status.separated
        pt, ok = initial_polytope(s1, s2, status.simplex, status.nsimplex, iterations)
        found, x1, x2, dist = epa(s1, s2, pt, skip=~(run_epa & ok) | unused, **options)
        contact = run_epa & ok & found & (dist < 0)
        return contact, dist, x1, x2

    if obj1.shrinks is False and obj2.shrinks is False:
        return deep(gjk(s1, s2, obj1.center, obj2.center, **options))
    # spheres and capsules shrink to a point and a segment, their radius (and half the
    # margin) taken off the distance; the shrunk search and the full one (for a deep
    # contact) as two lanes of one GJK
    r1, r2 = obj1.radius, obj2.radius

    def search(shrunk):
        def lane(obj):
            return lambda direction: jnp.where(shrunk, obj.shrunk(direction),
                                               obj.support(direction))  # fmt: skip

        cutoff = jnp.where(shrunk, r1 + r2, 0.0)
        return gjk(lane(obj1), lane(obj2), obj1.center, obj2.center, dist_cutoff=cutoff,
                   get_dist=shrunk, **options)  # fmt: skip

    both = jax.vmap(search)(jnp.array([True, False]))
    status = jax.tree.map(lambda x: x[0], both)
    full = jax.tree.map(lambda x: x[1], both)
    n, _ = normalize3(status.x2 - status.x1)
    sx1 = status.x1 + r1 * n
    sx2 = status.x2 - r2 * n
    sdist = status.dist - (r1 + r2)
    shallow = (status.dist > tolerance) & (obj1.shrinks | obj2.shrinks)
    d_contact, d_dist, dx1, dx2 = deep(full, unused=shallow)
    contact = jnp.where(shallow, sdist < 0, d_contact)
    dist = jnp.where(shallow, sdist, d_dist)
    return contact, dist, jnp.where(shallow, sx1, dx1), jnp.where(shallow, sx2, dx2)


def _ccd(type1, type2, pos1, mat1, size1, pos2, mat2, size2, margin, *, iterations: int,
         tolerance, kinds=(_CONVEX_TYPES, _CONVEX_TYPES)):  # fmt: skip
    """MuJoCo's ``mjc_penetration`` with native CCD and one contact: (found, dist, pos,
    normal). ``type1``, ``type2``: mjtGeom numbers, static (an int: the pair's own program)
    or data (traced: one program for every convex pair, :func:`convex_any`), then among
    ``kinds`` (static: the types each can take)."""
    obj1 = geom_object(type1, pos1, mat1, size1, margin, kinds=kinds[0])
    obj2 = geom_object(type2, pos2, mat2, size2, margin, kinds=kinds[1])
    contact, dist, x1, x2 = ccd(obj1, obj2, iterations=iterations, tolerance=tolerance)
    pos = (x1 + x2) * 0.5
    normal, _ = normalize3(x1 - x2)
    return contact, margin + dist, pos, normal


def _axis_angle_mat(axis, angle):
    """``mju_quat2Mat(mji_axisAngle2Quat(axis, angle))`` for a nonzero angle."""
    s = jnp.sin(angle * 0.5)
    q = jnp.stack([jnp.cos(angle * 0.5), axis[0] * s, axis[1] * s, axis[2] * s])
    q00, q01, q02, q03 = q[0] * q[0], q[0] * q[1], q[0] * q[2], q[0] * q[3]
    q11, q12, q13 = q[1] * q[1], q[1] * q[2], q[1] * q[3]
    q22, q23, q33 = q[2] * q[2], q[2] * q[3], q[3] * q[3]
    return jnp.array([
        [q00 + q11 - q22 - q33, 2 * (q12 - q03), 2 * (q13 + q02)],
        [2 * (q12 + q03), q00 - q11 + q22 - q33, 2 * (q23 - q01)],
        [2 * (q13 - q02), 2 * (q23 + q01), q00 - q11 - q22 + q33],
    ])  # fmt: skip


def _rotate_frame(origin, rot, mat, pos):
    """MuJoCo's ``mju_rotateFrame``: the frame turned by rot about the point origin."""
    r0, r1, r2 = jnp.unstack(rot[:, :, None] * mat[None, :, :], axis=1)
    new_mat = r0 + r1 + r2
    rel = origin - pos
    vec = matvec(rot, rel) - rel
    return new_mat, pos - vec


def rbound(geom_type, size, *, kinds=_CONVEX_TYPES):
    """MuJoCo's ``geom_rbound`` (without margin) of a primitive geom; ``geom_type`` an int,
    or data (a traced mjtGeom number of a convex type among ``kinds``)."""
    if not isinstance(geom_type, int):
        return _of_kind(geom_type, kinds, [rbound(t, size) for t in kinds])
    if geom_type == SPHERE:
        return size[0]
    if geom_type == CAPSULE:
        return size[0] + size[1]
    if geom_type == ELLIPSOID:
        return jnp.max(size)
    if geom_type == CYLINDER:
        return _sqrt(size[0] * size[0] + size[1] * size[1])
    return _sqrt(dot3(size, size))


def _is_smooth(geom_type):
    """Whether a geom is a sphere or an ellipsoid (``mjc_Convex`` then finds one contact)."""
    if isinstance(geom_type, int):
        return geom_type in (SPHERE, ELLIPSOID)
    return (geom_type == SPHERE) | (geom_type == ELLIPSOID)


def convex(type1, type2, pos1, mat1, size1, pos2, mat2, size2, margin, *,
           iterations: int = ITERATIONS, tolerance=TOLERANCE, slots: int | None = None,
           kinds=(_CONVEX_TYPES, _CONVEX_TYPES)) -> Contacts:  # fmt: skip
    """MuJoCo's ``mjc_Convex`` for geom types type1 <= type2: 1 slot for pairs with a sphere
    or an ellipsoid, else 5 (the first contact and up to four from the multi-contact search).

    ``type1``, ``type2``: ints (the pair's own program), or data (traced mjtGeom numbers of
    :data:`PAIRS`: one program for pairs of several types, :func:`collide_any`), then with
    ``slots`` (static) 1 where every pair of the call has a sphere or an ellipsoid, else 5,
    the slots past a pair's own left empty; ``kinds`` (static): the types each of them can
    take (their support functions are the program's)."""
    ccd = functools.partial(_ccd, type1, type2, iterations=iterations, tolerance=tolerance,
                            kinds=kinds)  # fmt: skip
    zero3 = jnp.zeros(3)
    smooth = _is_smooth(type1) | _is_smooth(type2)
    if slots is None:
        slots = 1 if smooth else 5
    if slots == 1:
        found, dist, pos, normal = ccd(pos1, mat1, size1, pos2, mat2, size2, margin)
        first = Raw(dist, pos, normal, zero3, found)
        return finish(jax.tree.map(lambda x: x[None], first))

    def search(j, results):
        """Contact j: the first (j = 0), else the first's search with both geoms turned by
        the (j - 1)-th rotation about the first contact's tangents (one traced CCD serves
        all five)."""
        contact_pos, contact_normal = results[2][0], results[3][0]
        frame = make_frame(contact_normal, zero3)
        rotations = []
        for axis in (frame[1], frame[2]):
            for angle in (-_PERTURBATION_ANGLE, _PERTURBATION_ANGLE):
                rotations.append(_axis_angle_mat(axis, angle))
        rot = jnp.stack(rotations)[jnp.maximum(j - 1, 0)]
        m1, p1 = _rotate_frame(contact_pos, rot, mat1, pos1)
        m2, p2 = _rotate_frame(contact_pos, rot.T, mat2, pos2)
        unturned = j == 0
        m1, p1 = jnp.where(unturned, mat1, m1), jnp.where(unturned, pos1, p1)
        m2, p2 = jnp.where(unturned, mat2, m2), jnp.where(unturned, pos2, p2)
        out = ccd(p1, m1, size1, p2, m2, size2, margin)
        return tuple(r.at[j].set(o) for r, o in zip(results, out, strict=True))

    def more_to_search(carry):  # the turned searches only where the first found a contact
        j, results = carry
        return (j < 5) & ((j == 0) | results[0][0])

    slots_found = (jnp.zeros(5, bool), jnp.zeros(5), jnp.zeros((5, 3)), jnp.zeros((5, 3)))
    founds, dists_ccd, poss_ccd, normals_ccd = while_loop(
        more_to_search,
        lambda c: (c[0] + 1, search(c[0], c[1])),
        (jnp.asarray(0), slots_found),
        like=(pos1, mat1, size1, pos2, mat2, size2, margin, type1, type2),
    )[1]
    found, dist, pos, normal = founds[0], dists_ccd[0], poss_ccd[0], normals_ccd[0]
    more = (founds[1:], dists_ccd[1:], poss_ccd[1:], normals_ccd[1:])
    tolerance_distinct = _RELATIVE_TOLERANCE * jnp.minimum(
        rbound(type1, size1, kinds=kinds[0]), rbound(type2, size2, kinds=kinds[1])
    )
    positions, valid = [pos], [found]
    dists, poss, normals = [dist], [pos], [normal]
    for j in range(4):
        n_j, _, pos_j, normal_j = (x[j] for x in more)
        distinct = jnp.asarray(True)
        for p, v in zip(positions, valid, strict=True):
            gap = pos_j - p
            distinct = distinct & ~(v & (_sqrt(dot3(gap, gap)) <= tolerance_distinct))
        keep = found & n_j & distinct
        if not isinstance(smooth, bool):  # a smooth pair of a program of several types
            keep = keep & ~smooth
        positions.append(pos_j)
        valid.append(keep)
        dists.append(dist)
        poss.append(pos_j)
        normals.append(normal_j)
    raw = Raw(jnp.stack(dists), jnp.stack(poss), jnp.stack(normals),
              jnp.zeros((5, 3)), jnp.stack(valid))  # fmt: skip
    return finish(compact(raw, 5))


def collide_any(types1, types2, pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """:func:`convex` for k pairs of :data:`PAIRS` of any types, in one program: ``types1``,
    ``types2`` (k,) the pairs' mjtGeom numbers (static), the poses, sizes and margins with a
    leading axis of k. Slots: the most any pair has (1 or 5); a pair of one slot leaves the
    others empty."""
    types1, types2 = np.asarray(types1, int), np.asarray(types2, int)
    slots = max(PAIRS[(int(a), int(b))] for a, b in zip(types1, types2, strict=True))
    one = functools.partial(convex, slots=slots, kinds=kinds_of(types1, types2))
    return jax.vmap(one)(jnp.asarray(types1), jnp.asarray(types2), pos1, mat1, size1, pos2,
                         mat2, size2, margin)  # fmt: skip


def kinds_of(types1, types2) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The geom types that the first and the second geoms of pairs of ``types1``,
    ``types2`` (static) take: :func:`convex`'s ``kinds``."""
    return tuple(sorted({int(t) for t in types1})), tuple(sorted({int(t) for t in types2}))


def kernel(type1: int, type2: int):
    """The :func:`convex` kernel of one geom-type pair, with the kernel signature."""

    def collide(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
        return convex(type1, type2, pos1, mat1, size1, pos2, mat2, size2, margin)

    collide.__name__ = collide.__qualname__ = f"convex_{type1}_{type2}"
    collide.__doc__ = f"MuJoCo's ``mjc_Convex`` for geom types {type1} and {type2}."
    return collide


#: the pairs ``mj_collision`` sends to ``mjc_Convex`` that this module collides, with their
#: slots (``mj_maxContact``)
PAIRS = {
    (SPHERE, ELLIPSOID): 1,
    (CAPSULE, ELLIPSOID): 1,
    (CAPSULE, CYLINDER): 5,
    (ELLIPSOID, ELLIPSOID): 1,
    (ELLIPSOID, CYLINDER): 1,
    (ELLIPSOID, BOX): 1,
    (CYLINDER, CYLINDER): 5,
    (CYLINDER, BOX): 5,
}
