"""MuJoCo's box colliders (``engine_collision_box.c``) in JAX: sphere-box, capsule-box and the
separating-axis box-box collider (MuJoCo's ``mjc_BoxBox`` as rewritten in 2026: face clipping
or one edge-edge contact).

Kernels take ``(pos1, mat1, size1, pos2, mat2, size2, margin)`` like those of
:mod:`.primitive`. The candidates of MuJoCo's sequential searches (capsule-box's twelve
edges, box-box's nine edge axes and its clipped vertices) are computed together as arrays,
and the running best over them is a loop in MuJoCo's order, so that ties resolve as in
MuJoCo. Unrolled, each comparison's inputs were copied by XLA into every fusion that read
them: capsule-box compiled to 16.6k HLO instructions, box-box to 30.6k (now 4.2k and 8.9k).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from .common import (
    MAXVAL,
    MINVAL,
    Contacts,
    Raw,
    axis_z,
    compact,
    finish,
    first_k,
    normalize3,
    safe_div,
    safe_sqrt,
    select,
    stack,
)

_ZERO3 = np.zeros(3)  # NumPy: a jnp array here would start JAX's backend at import
_INF = jnp.inf


def _raw_sphere_box(margin, pos1, radius1, pos2, mat2, size2) -> Raw:
    """MuJoCo's ``mjraw_SphereBox``: the nearest box point, or for a centre inside the box
    the nearest face (normal along that face's inward axis, as MuJoCo signs it)."""
    center = mat2.T @ (pos1 - pos2)
    clamped = jnp.clip(center, -size2, size2)
    unit, dist = normalize3(clamped - center)
    valid = dist - radius1 <= margin

    # centre inside: the first face (in the order -x, +x, -y, +y, -z, +z) of least depth
    face_dist = jnp.abs(jnp.stack([-size2, size2], axis=1).reshape(6) - jnp.repeat(center, 2))
    k = jnp.argmin(face_dist)
    closest = face_dist[k]
    nearest = jnp.where(
        jnp.arange(3) == k // 2, jnp.where(k % 2 == 1, -1.0, 1.0), 0.0
    )  # MuJoCo's sign
    inside_pos = center + nearest * ((radius1 - closest) / 2)

    deepest = center + unit * radius1
    outside_pos = 0.5 * clamped + 0.5 * deepest

    inside = dist <= MINVAL
    pos = jnp.where(inside, inside_pos, outside_pos)
    normal = mat2 @ jnp.where(inside, nearest, unit)
    dist = jnp.where(inside, -closest, dist)
    return Raw(dist - radius1, mat2 @ pos + pos2, normal, _ZERO3, valid)


def sphere_box(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_SphereBox`` (1 slot)."""
    return finish(stack(_raw_sphere_box(margin, pos1, size1[0], pos2, mat2, size2)))


def _box_edges():
    """MuJoCo's edge loop order in ``mjraw_CapsuleBox``: axis j, then corner i (bit j clear)."""
    return [(j, i) for j in range(3) for i in range(8) if not i & (1 << j)]


#: The twelve edges in that order: axis, corner, the corner's signs with the axis' zeroed,
#: the axis as a one-hot row.
_EDGE_AXIS, _EDGE_CORNER = (np.array(c) for c in zip(*_box_edges(), strict=True))
_EDGES = np.arange(12)
_EDGE_SIGNS = np.where((_EDGE_CORNER[:, None] >> np.arange(3)) & 1, 1.0, -1.0)
_EDGE_SIGNS[_EDGES, _EDGE_AXIS] = 0.0
_EDGE_ONEHOT = (np.arange(3) == _EDGE_AXIS[:, None]).astype(float)


def capsule_box(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_CapsuleBox`` (2 slots; MuJoCo reserves 4): the capsule segment's point
    nearest the box (over the two ends against the faces and the twelve edges), and a second
    point along the segment chosen from how the segment lies over the box; each collides with
    the box as a sphere (``mjraw_SphereBox``)."""
    radius, halflength = size1[0], size1[1]
    pos = mat2.T @ (pos1 - pos2)  # capsule centre in the box frame
    axis = mat2.T @ axis_z(mat1)
    halfaxis = axis * halflength
    positive = (halfaxis > 0).astype(jnp.int32)
    axisdir = positive[0] + 2 * positive[1] + 4 * positive[2]

    bestdist = margin + 2 * (radius + halflength + size2[0] + size2[1] + size2[2])
    bestsegmentpos = jnp.asarray(0.0)
    bestboxpos = jnp.asarray(0.0)
    cltype = jnp.asarray(-4)
    clface = jnp.asarray(-1)
    clcorner = jnp.asarray(0)
    cledge = jnp.asarray(0)

    # segment ends against the faces: an end outside at most one face slab
    for end in (-1, 1):
        point = pos + halfaxis * end
        below, above = point < -size2, point > size2
        outside = below | above
        n_out = jnp.sum(outside)
        last_out = jnp.max(jnp.where(outside, jnp.arange(3), -1))
        dif = jnp.clip(point, -size2, size2) - point
        dist = jnp.dot(dif, dif)
        better = (n_out <= 1) & (dist < bestdist)
        bestdist = jnp.where(better, dist, bestdist)
        bestsegmentpos = jnp.where(better, float(end), bestsegmentpos)
        cltype = jnp.where(better, -2 + end, cltype)
        clface = jnp.where(better, last_out, clface)

    # segment against the twelve edges (line-line nearest points, clamped as MuJoCo does),
    # all twelve as arrays, then MuJoCo's running best over them in its order
    j, i = _EDGE_AXIS, _EDGE_CORNER
    start = _EDGE_SIGNS * size2
    dif = start - pos
    half_j = size2[j]
    ma = half_j * half_j
    mb = -half_j * halfaxis[j]
    mc = size1[1] * size1[1]
    u = -half_j * dif[_EDGES, j]
    v = dif @ halfaxis
    det = ma * mc - mb * mb
    usable = jnp.abs(det) >= MINVAL
    idet = safe_div(1.0, det)
    x1 = (mc * u - mb * v) * idet
    x2 = (ma * v - mb * u) * idet
    s1 = jnp.where(x1 > 1, 2, jnp.where(x1 < -1, 0, 1))
    x2 = jnp.where(
        x1 > 1,
        (v - mb) * safe_div(1.0, mc),
        jnp.where(x1 < -1, (v + mb) * safe_div(1.0, mc), x2),
    )
    x1 = jnp.clip(x1, -1, 1)
    s2 = jnp.where(x2 > 1, 2, jnp.where(x2 < -1, 0, 1))
    refit = jnp.where(x2 > 1, (u - mb) * safe_div(1.0, ma), (u + mb) * safe_div(1.0, ma))
    clipped = (x2 > 1) | (x2 < -1)
    s1 = jnp.where(clipped, jnp.where(refit > 1, 2, jnp.where(refit < -1, 0, s1)), s1)
    x1 = jnp.where(clipped, jnp.clip(refit, -1, 1), x1)
    x2 = jnp.clip(x2, -1, 1)
    gap = start - pos - halfaxis * x2[:, None] + _EDGE_ONEHOT * (half_j * x1)[:, None]
    dist = jnp.sum(gap * gap, axis=1)
    code = s1 * 3 + s2

    def running_best(k, carry):
        best, chosen = carry
        better = usable[k] & (dist[k] < best - MINVAL)
        return jnp.where(better, dist[k], best), jnp.where(better, k, chosen)

    bestdist, chosen = jax.lax.fori_loop(0, 12, running_best, (bestdist, jnp.asarray(-1)))
    on_edge = chosen >= 0
    k = jnp.maximum(chosen, 0)
    bestsegmentpos = jnp.where(on_edge, x2[k], bestsegmentpos)
    bestboxpos = jnp.where(on_edge, x1[k], bestboxpos)
    clcorner = jnp.where(on_edge, jnp.asarray(i)[k] + (1 << jnp.asarray(j)[k]) * (code[k] // 6),
                         clcorner)  # fmt: skip
    cledge = jnp.where(on_edge, jnp.asarray(j)[k], cledge)
    cltype = jnp.where(on_edge, code[k], cltype)

    abs_half = jnp.abs(halfaxis)

    def reach(length, component):
        """length / |halfaxis[component]|, infinite where that is zero (MuJoCo's division
        by zero never wins a minimum)."""
        h = abs_half[component]
        return jnp.where(h > 0, length / jnp.where(h > 0, h, 1.0), _INF)

    # case 1: a box corner is nearest
    c_corner = axisdir ^ clcorner
    corner_pointing = (c_corner == 0) | (c_corner == 7)
    one_bit = (c_corner == 1) | (c_corner == 2) | (c_corner == 4)
    mul_a = jnp.where(one_bit, 1.0, -1.0)
    c_norm = jnp.where(one_bit, c_corner, 7 - c_corner)
    de = jnp.where(one_bit, 1 - bestsegmentpos, 1 + bestsegmentpos)
    dp = jnp.where(one_bit, 1 + bestsegmentpos, 1 - bestsegmentpos)
    ax_a = jnp.where(c_norm == 1, 0, jnp.where(c_norm == 2, 1, 2))
    ax1_a, ax2_a = (ax_a + 1) % 3, (ax_a + 2) % 3
    along_edge = axis[ax_a] * axis[ax_a] > 0.5
    second_edge = jnp.minimum(de, reach(2 * size2[ax_a], ax_a)) * mul_a
    second_face = (
        jnp.minimum(dp, jnp.minimum(reach(2 * size2[ax1_a], ax1_a), reach(2 * size2[ax2_a], ax2_a)))
        * -mul_a
    )
    second_a = jnp.where(corner_pointing, -4.0, jnp.where(along_edge, second_edge, second_face))

    # case 2: the middle of a box edge is nearest
    c_edge = (axisdir ^ clcorner) & (7 - (1 << cledge))
    crossing = (c_edge == 1) | (c_edge == 2) | (c_edge == 4)
    ax_b = cledge
    ax1_b, ax2_b = (cledge + 1) % 3, (cledge + 2) % 3
    ax1_b = jnp.where(jnp.abs(axis[ax1_b]) > jnp.abs(axis[ax2_b]), ax2_b, ax1_b)
    ax2_b = 3 - ax_b - ax1_b
    towards = (c_edge & (1 << ax2_b)) != 0
    mul_b = jnp.where(towards, 1.0, -1.0)
    second_b = jnp.where(towards, 1 - bestsegmentpos, 1 + bestsegmentpos)
    second_b = jnp.minimum(second_b, reach(2 * size2[ax2_b], ax2_b))
    same_side = ((axisdir & (1 << ax_b)) != 0) == towards
    e2 = jnp.where(same_side, 1 - bestboxpos, 1 + bestboxpos)
    second_b = jnp.minimum(second_b, reach(size2[ax_b] * e2, ax_b))
    second_b = jnp.where(crossing, second_b * mul_b, -4.0)

    # case 3: a segment end is nearest to a face: the farthest point still over that face
    mul_c = jnp.where(cltype == -3, 1.0, -1.0)
    far_end = pos - halfaxis * mul_c
    second_c = jnp.asarray(2.0)
    for k in range(3):
        h = halfaxis[k]
        usable = (k != clface) & (h != 0)
        for bound in (size2[k], -size2[k]):
            e1 = safe_div(bound - far_end[k], h) * mul_c
            second_c = jnp.where(usable & (e1 > 0) & (e1 < second_c), e1, second_c)
    second_c = jnp.where(clface == -1, -4.0, second_c * mul_c)

    secondpos = jnp.where(
        cltype < 0,
        second_c,
        jnp.where(cltype // 3 != 1, second_a, second_b),
    )
    found = cltype != -4

    def sphere(segmentpos):
        center = mat2 @ (pos + halfaxis * segmentpos) + pos2
        return _raw_sphere_box(margin, center, radius, pos2, mat2, size2)

    first = sphere(bestsegmentpos)
    first = first._replace(valid=first.valid & found)
    second = sphere(jnp.where(secondpos > -3, secondpos, 0.0) + bestsegmentpos)
    second = second._replace(valid=second.valid & found & (secondpos > -3))
    return finish(compact(stack(first, second), 2))


# box-box constants of engine_collision_box.c (double precision)
_SEPEPS = 1e-13
_PAREPS = 1e-16
_SGNEPS = 1e-9
_DUPEPS = 1e-14
_EDGEBIAS = 1e-6
_MAXVERT = 12
_BOXBOX_SLOTS = 8  # mj_maxContact's box-box limit (a clipped quad has at most 8 vertices)


def _clip_half_plane(poly, count, coord, sign, limit):
    """MuJoCo's ``clipHalfPlane``: the polygon (fixed buffer of _MAXVERT vertices, ``count``
    used) clipped to sign * v[coord] <= limit, vertices and crossings in MuJoCo's order."""
    index = jnp.arange(_MAXVERT)
    active = index < count
    d = sign * poly[:, coord] - limit
    following = jnp.where(index + 1 == count, 0, index + 1)
    dq = d[following]
    q = poly[following]
    keep = active & (d <= 0)
    cross = active & (((d < 0) & (dq > 0)) | ((d > 0) & (dq < 0)))
    t = safe_div(d, d - dq)
    crossing = poly + t[:, None] * (q - poly)
    candidates = jnp.stack([poly, crossing], axis=1).reshape(2 * _MAXVERT, 3)
    emit = jnp.stack([keep, cross], axis=1).reshape(2 * _MAXVERT)
    chosen, ok = first_k(emit, _MAXVERT)
    return candidates[chosen], jnp.sum(ok)


def _edge_contact(i, j, rot, pos21, size1, size2):
    """Stage 2a of MuJoCo's ``mjc_BoxBox`` for edge axis (i, j) (traced indices): (axis,
    witness points) in box1's frame; ambiguous support corners are enumerated and the
    closest pair kept."""
    i1, i2 = (i + 1) % 3, (i + 2) % 3
    j1, j2 = (j + 1) % 3, (j + 2) % 3
    lanes = jnp.arange(3)
    at_i, at_i1, at_i2 = lanes == i, lanes == i1, lanes == i2
    at_j1, at_j2 = lanes == j1, lanes == j2
    axis = jnp.where(at_i1, -rot[i2, j], 0.0) + jnp.where(at_i2, rot[i1, j], 0.0)
    axis, _ = normalize3(axis)
    axis = jnp.where(jnp.dot(axis, pos21) < 0, -axis, axis)
    a2 = rot.T @ axis
    amb1 = jnp.where(
        jnp.abs(axis[i1]) < _SGNEPS, i1, jnp.where(jnp.abs(axis[i2]) < _SGNEPS, i2, -1)
    )
    amb2 = jnp.where(jnp.abs(a2[j1]) < _SGNEPS, j1, jnp.where(jnp.abs(a2[j2]) < _SGNEPS, j2, -1))
    d2 = rot[:, j]
    b = d2[i]
    denom = 1 - b * b
    # the support corners: box1's towards the axis, box2's away from it, on the edge axes
    c1_base = jnp.where(at_i1 | at_i2, jnp.where(axis >= 0, size1, -size1), 0.0)
    cc_base = jnp.where(at_j1 | at_j2, jnp.where(a2 >= 0, -size2, size2), 0.0)

    best_gap2 = jnp.asarray(MAXVAL)
    w1 = w2 = jnp.zeros(3)
    for flip1 in (0, 1):
        for flip2 in (0, 1):
            c1 = jnp.where(lanes == amb1, -c1_base, c1_base) if flip1 else c1_base
            cc = jnp.where(lanes == amb2, -cc_base, cc_base) if flip2 else cc_base
            c2 = rot @ cc + pos21
            e = c2 - c1
            d1e = e[i]
            d2e = jnp.dot(d2, e)
            s = jnp.where(denom < MINVAL, 0.0, safe_div(d1e - b * d2e, denom))
            s = jnp.clip(s, -size1[i], size1[i])
            t = jnp.clip(b * s - d2e, -size2[j], size2[j])
            s = jnp.clip(d1e + b * t, -size1[i], size1[i])
            p1 = c1 + jnp.where(at_i, s, 0.0)
            p2 = c2 + d2 * t
            gap = p2 - p1
            gap2 = jnp.dot(gap, gap)
            tried = (amb1 >= 0 if flip1 else True) & (amb2 >= 0 if flip2 else True)
            better = tried & (gap2 < best_gap2)
            best_gap2 = jnp.where(better, gap2, best_gap2)
            w1 = jnp.where(better, p1, w1)
            w2 = jnp.where(better, p2, w2)
    return axis, w1, w2


#: The nine edge-cross axes in MuJoCo's order (code 6 + 3 i + j): i, j and their successors.
_CROSS_I, _CROSS_J = (np.repeat(np.arange(3), 3), np.tile(np.arange(3), 3))
_CROSS_I1, _CROSS_I2 = (_CROSS_I + 1) % 3, (_CROSS_I + 2) % 3
_CROSS_J1, _CROSS_J2 = (_CROSS_J + 1) % 3, (_CROSS_J + 2) % 3


def box_box(pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """MuJoCo's ``mjc_BoxBox`` (8 slots): the separating-axis test over the 6 face and 9
    edge-cross axes; a face axis clips the incident face against the reference face
    (Sutherland-Hodgman) and keeps every vertex within the margin, an edge axis gives one
    contact midway between the supporting edges."""
    pos21 = mat1.T @ (pos2 - pos1)
    pos12 = mat2.T @ (pos1 - pos2)
    rot = mat1.T @ mat2  # box2's axes (columns) in box1's frame
    rotabs = jnp.abs(rot)
    septol = margin + _SEPEPS * (jnp.sum(size1) + jnp.sum(size2))

    # stage 1: separating axes
    sep_faces = jnp.concatenate(
        [jnp.abs(pos21) - size1 - rotabs @ size2, jnp.abs(pos12) - size2 - rotabs.T @ size1]
    )
    separated = jnp.any(sep_faces > septol)
    code_face = jnp.argmax(sep_faces)
    sep_face = sep_faces[code_face]
    sep_best, code = sep_face, code_face
    # the nine edge-cross axes as arrays, then MuJoCo's running best over them in its order
    i1, i2, j1, j2 = _CROSS_I1, _CROSS_I2, _CROSS_J1, _CROSS_J2
    ax1, ax2 = -rot[i2, _CROSS_J], rot[i1, _CROSS_J]
    norm2 = ax1 * ax1 + ax2 * ax2
    usable = norm2 >= _PAREPS
    inv = jnp.where(usable, 1 / safe_sqrt(jnp.where(usable, norm2, 1.0)), 0.0)
    ax1, ax2 = ax1 * inv, ax2 * inv
    radius1 = size1[i1] * jnp.abs(ax1) + size1[i2] * jnp.abs(ax2)
    a2_1 = ax1 * rot[i1, j1] + ax2 * rot[i2, j1]
    a2_2 = ax1 * rot[i1, j2] + ax2 * rot[i2, j2]
    radius2 = size2[j1] * jnp.abs(a2_1) + size2[j2] * jnp.abs(a2_2)
    sep = jnp.abs(ax1 * pos21[i1] + ax2 * pos21[i2]) - radius1 - radius2
    separated = separated | jnp.any(usable & (sep > septol))

    def running_best(k, carry):
        best, chosen = carry
        better = usable[k] & (sep[k] - _EDGEBIAS * jnp.abs(sep[k]) > best) & (sep[k] > sep_face)
        return jnp.where(better, sep[k], best), jnp.where(better, 6 + k, chosen)

    sep_best, code = jax.lax.fori_loop(0, 9, running_best, (sep_best, code))

    # an edge axis within ~8 degrees of the best face axis gives way to it
    edge_i, edge_j = jnp.maximum(code - 6, 0) // 3, jnp.maximum(code - 6, 0) % 3
    lanes = jnp.arange(3)
    edge_axis = jnp.where(lanes == (edge_i + 1) % 3, -rot[(edge_i + 2) % 3, edge_j], 0.0)
    edge_axis = edge_axis + jnp.where(lanes == (edge_i + 2) % 3, rot[(edge_i + 1) % 3, edge_j], 0.0)
    edge_axis = jnp.where(code >= 6, edge_axis, 0.0)
    edge_axis, _ = normalize3(edge_axis)
    face_dot = jnp.where(
        code_face < 3,
        jnp.abs(edge_axis[jnp.minimum(code_face, 2)]),
        jnp.abs(edge_axis @ rot[:, jnp.maximum(code_face - 3, 0)]),
    )
    give_way = (
        (code >= 6) & (face_dot > 0.99) & (sep_best < sep_face + 0.05 * jnp.abs(sep_face) + MINVAL)
    )
    code = jnp.where(give_way, code_face, code)

    # stage 2a: edge-edge contact of the winning edge axis (any, where a face axis won)
    edge_i, edge_j = jnp.maximum(code - 6, 0) // 3, jnp.maximum(code - 6, 0) % 3
    axis, w1, w2 = _edge_contact(edge_i, edge_j, rot, pos21, size1, size2)
    dist = jnp.dot(w2 - w1, axis)
    mid = 0.5 * (w1 + w2)
    edge = Raw(dist, mat1 @ mid + pos1, mat1 @ axis, _ZERO3, dist <= septol)
    unused = edge._replace(valid=jnp.asarray(False))
    edge_raw = stack(edge, *[unused] * (_BOXBOX_SLOTS - 1))

    # stage 2b: face contact; the reference box owns the winning face
    ref1 = code < 3
    a = jnp.where(ref1, code, code - 3) % 3
    size_ref = jnp.where(ref1, size1, size2)
    size_inc = jnp.where(ref1, size2, size1)
    pos_ref = jnp.where(ref1, pos1, pos2)
    mat_ref = jnp.where(ref1, mat1, mat2)
    pos_inc = jnp.where(ref1, pos21, pos12)  # incident centre in the reference frame
    rinc = jnp.where(ref1, rot, rot.T)  # rinc[r, c]: component r of incident axis c
    sgn = jnp.where(pos_inc[a] >= 0, 1.0, -1.0)
    binc = jnp.argmax(jnp.abs(rinc[a]))
    tinc = jnp.where(sgn * rinc[a, binc] > 0, -1.0, 1.0)
    ax, ay = (a + 1) % 3, (a + 2) % 3
    bu, bv = (binc + 1) % 3, (binc + 2) % 3
    rows = jnp.stack([ax, ay, a])
    cx = pos_inc[rows] + tinc * size_inc[binc] * rinc[rows, binc]
    du = size_inc[bu] * rinc[rows, bu]
    dv = size_inc[bv] * rinc[rows, bv]
    cx = cx.at[2].set(sgn * cx[2] - size_ref[a])
    du = du.at[2].multiply(sgn)
    dv = dv.at[2].multiply(sgn)
    corner_sign = jnp.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
    quad = cx + corner_sign[:, :1] * du + corner_sign[:, 1:] * dv
    poly = jnp.zeros((_MAXVERT, 3)).at[:4].set(quad)
    count = jnp.asarray(4)
    for coord, sign, limit in ((0, 1.0, size_ref[ax]), (0, -1.0, size_ref[ax]),
                               (1, 1.0, size_ref[ay]), (1, -1.0, size_ref[ay])):  # fmt: skip
        poly, count = _clip_half_plane(poly, count, coord, sign, limit)

    # vertices within the margin, near-duplicates (clipping at corners) dropped in order
    dupe2 = _DUPEPS * (size_ref[ax] * size_ref[ax] + size_ref[ay] * size_ref[ay])
    within = (jnp.arange(_MAXVERT) < count) & (poly[:, 2] <= margin)
    planar = poly[:, None, :2] - poly[None, :, :2]
    close = jnp.sum(planar * planar, axis=-1) < dupe2
    earlier = jnp.arange(_MAXVERT)[:, None] < jnp.arange(_MAXVERT)[None, :]

    def accept(k, accepted):
        dupe = jnp.any(accepted & close[:, k] & earlier[:, k])
        return jnp.where(jnp.arange(_MAXVERT) == k, within[k] & ~dupe, accepted)

    accepted = jax.lax.fori_loop(0, _MAXVERT, accept, jnp.zeros(_MAXVERT, bool))
    chosen, ok = first_k(accepted, _BOXBOX_SLOTS)
    vert = poly[chosen]
    normal = jnp.where(ref1, sgn, -sgn) * mat_ref[:, a]
    pos_local = (
        jnp.zeros((_BOXBOX_SLOTS, 3))
        .at[:, ax]
        .set(vert[:, 0])
        .at[:, ay]
        .set(vert[:, 1])
        .at[:, a]
        .set(sgn * (size_ref[a] + 0.5 * vert[:, 2]))
    )
    face_raw = Raw(
        vert[:, 2],
        pos_local @ mat_ref.T + pos_ref,
        jnp.broadcast_to(normal, (_BOXBOX_SLOTS, 3)),
        jnp.zeros((_BOXBOX_SLOTS, 3)),
        ok,
    )
    raw = select(code >= 6, edge_raw, face_raw)
    return finish(raw._replace(valid=raw.valid & ~separated))
