"""Joints recognised in rows written at GCON level (model files with no joint definitions).

The builder composes its joints from GCONs (paper 1 Table 1): spherical = CD x 3,
revolute = CD x 3 + DP1 x 2 (two vectors of one body normal to the axis of the other),
universal = CD x 3 + DP1, cylindrical = DP1 x 2 + DP2 x 2, translational = cylindrical + DP1.
A group of rows sharing a joint tag and a body pair with one of these compositions is read
back as a :class:`~jaxmbd.model.joints.JointDefinition` whose coordinates are zero at the model's
initial pose (the builder's "zero where drawn"), so that a tree can carry it as hinges,
slides or a ball. The composition is static; the frames are jnp functions of the rows'
vectors and the initial poses, with data-dependent choices (which body carries the shared
axis) made by ``jnp.where``, so gradients reach the rows. Where the values are concrete the
geometry is checked (the shared axis really is shared, the CD directions span space); a group
that fails stays as plain rows. Under a trace the checks are skipped, or handed to the caller
as traced booleans (``deferred``) for it to read once the program has run.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..model import Model
from ..model.joints import JOINT_KINDS, JointDefinition

_TOL = 1e-9

#: kind counts of each recognised composition
_PATTERNS = {
    "spherical": Counter({"CD": 3}),
    "revolute": Counter({"CD": 3, "DP1": 2}),
    "universal": Counter({"CD": 3, "DP1": 1}),
    "cylindrical": Counter({"DP1": 2, "DP2": 2}),
    "translational": Counter({"DP1": 3, "DP2": 2}),
}


def _concrete(x):
    """``x`` as numpy, or None under a trace (then the geometry checks are skipped)."""
    try:
        return np.asarray(x)
    except jax.errors.TracerArrayConversionError:
        return None


def _unit(v):
    return v / jnp.linalg.norm(v)


def _safe_unit(v):
    """v / |v|, finite (with finite derivatives) at v = 0, where a ``jnp.where`` drops it."""
    return v / jnp.sqrt(v @ v + 1e-300)


def _frame_about(axis):
    """Right-handed axes (columns u, v, axis) for a unit ``axis``; u from the coordinate
    direction least aligned with it (chosen by value, traceable)."""
    trial = jnp.eye(3, dtype=axis.dtype)[jnp.argmin(jnp.abs(axis))]
    u = _unit(trial - axis * (axis @ trial))
    return jnp.stack([u, jnp.cross(axis, u), axis], 1)


class _Row:
    """One row's GCON vectors, oriented to the group's pair (I, J): ``flip`` when the row
    was written with its bodies the other way round."""

    def __init__(self, model: Model, row: int, pair):
        for s in model.gcons:
            if row in s.rows:
                k = s.rows.index(row)
                self.kind = s.kind
                self.flip = (s.body_i[k], s.body_j[k]) != pair
                self.set, self.k = s, k
                return
        raise KeyError(row)

    def vec(self, name):
        return getattr(self.set, name)[self.k]


def _global(model: Model, body: int):
    nb = model.nb
    if body == nb:
        return jnp.zeros(3), jnp.eye(3)
    return model.r0[body], model.A0[body]


def _dp1_vectors(model, rows, pair):
    """Global (at the initial pose) vectors of DP1 rows: those on I and those on J."""
    A_i, A_j = (_global(model, b)[1] for b in pair)
    on_i, on_j = [], []
    for row in rows:
        a_i, a_j = row.vec("a_bar_i"), row.vec("a_bar_j")
        if row.flip:  # the row's body_i is J
            a_i, a_j = a_j, a_i
        on_i.append(A_i @ a_i)
        on_j.append(A_j @ a_j)
    return on_i, on_j


def _dp2_axis(model, rows, pair):
    """The line direction of a DP2 pair: normal to both its plane normals (global)."""
    normals = []
    for row in rows:
        A = _global(model, pair[1] if row.flip else pair[0])[1]
        normals.append(A @ row.vec("a_bar_i"))
    return _unit(jnp.cross(normals[0], normals[1]))


def _shared_axis(on_i, on_j):
    """The axis of a Perp-1 pair among DP1 rows: a vector that two rows share on one body
    (the other body's two vectors normal to it). Returns (unit axis, mismatch): the
    candidate pair and side with the smallest cross product, and that cross product's
    size (0 for a true Perp-1 pair)."""
    cands, sizes = [], []
    n = len(on_i)
    for a in range(n):
        for b in range(a + 1, n):
            for vecs in (on_i, on_j):
                cands.append(vecs[a])
                sizes.append(jnp.linalg.norm(jnp.cross(_unit(vecs[a]), _unit(vecs[b]))))
    sizes = jnp.stack(sizes)
    best = jnp.argmin(sizes)
    return _unit(jnp.stack(cands)[best]), sizes[best]


def _point_of_cd(model, rows, pair, deferred=None):
    """Body-frame points (on I, on J) of a CD triple, and whether its directions span."""
    row = rows[0]
    s_p, s_q = row.vec("s_bar_p_i"), row.vec("s_bar_q_j")
    if row.flip:
        s_p, s_q = s_q, s_p
    c = jnp.stack([r.vec("c") for r in rows])
    same = [jnp.stack([r.vec("s_bar_p_i"), r.vec("s_bar_q_j")])[:: -1 if r.flip else 1]
            for r in rows]  # fmt: skip
    spans = jnp.abs(jnp.linalg.det(c)) > _TOL
    coincide = [jnp.allclose(x, same[0], atol=_TOL) for x in same]
    return s_p, s_q, _passes(jnp.all(jnp.stack([spans, *coincide])), deferred)


def _passes(valid, deferred) -> bool:
    """Whether a geometry check ``valid`` (a jnp bool) passes: its value where concrete;
    under a trace True, with ``valid`` appended to ``deferred`` where given (the caller
    reads it after the program has run)."""
    concrete = _concrete(valid)
    if concrete is not None:
        return bool(concrete)
    if deferred is not None:
        deferred.append(valid)
    return True


def _spherical_axes(model, by_kind, pair, A_i, A_j):
    return A_i.T @ A_j, jnp.eye(3), []  # body J's own axes (MuJoCo's ball)


def _universal_axes(model, by_kind, pair, A_i, A_j):
    """x = the row's vector on I, y = its vector on J, exactly."""
    on_i, on_j = _dp1_vectors(model, by_kind["DP1"], pair)
    ai, aj = _unit(on_i[0]), _unit(on_j[0])
    y = _unit(aj - ai * (ai @ aj))
    x = _unit(ai - aj * (ai @ aj))
    axes_i = A_i.T @ jnp.stack([ai, y, jnp.cross(ai, y)], 1)
    axes_j = A_j.T @ jnp.stack([x, aj, jnp.cross(x, aj)], 1)
    return axes_i, axes_j, [jnp.abs(ai @ aj)]


def _revolute_axes(model, by_kind, pair, A_i, A_j):
    """The shared vector on one body, the normal of the two on the other."""
    on_i, on_j = _dp1_vectors(model, by_kind["DP1"], pair)
    axis, mismatch = _shared_axis(on_i, on_j)
    normal_i = _safe_unit(jnp.cross(on_i[0], on_i[1]))
    normal_j = _safe_unit(jnp.cross(on_j[0], on_j[1]))
    # the side whose two vectors are parallel carries the axis itself
    parallel_i = jnp.linalg.norm(jnp.cross(_unit(on_i[0]), _unit(on_i[1])))
    parallel_j = jnp.linalg.norm(jnp.cross(_unit(on_j[0]), _unit(on_j[1])))
    other_i = jnp.where(parallel_i < parallel_j, axis, normal_i)
    other_j = jnp.where(parallel_i < parallel_j, normal_j, axis)
    axes_i = A_i.T @ _frame_about(_unit(other_i * jnp.sign(other_i @ axis)))
    axes_j = A_j.T @ _frame_about(_unit(other_j * jnp.sign(other_j @ axis)))
    return axes_i, axes_j, [mismatch]


def _translational_axes(model, by_kind, pair, A_i, A_j):
    """The axis normal to the DP2 planes."""
    axes = _frame_about(_dp2_axis(model, by_kind["DP2"], pair))
    return A_i.T @ axes, A_j.T @ axes, []


def _cylindrical_axes(model, by_kind, pair, A_i, A_j):
    """The axis normal to the DP2 planes, which the Perp-1 pair's shared vector is."""
    axis = _dp2_axis(model, by_kind["DP2"], pair)
    on_i, on_j = _dp1_vectors(model, by_kind["DP1"], pair)
    shared, mismatch = _shared_axis(on_i, on_j)
    axes = _frame_about(axis)
    return A_i.T @ axes, A_j.T @ axes, [mismatch, jnp.linalg.norm(jnp.cross(axis, shared))]


#: Each recognised kind's joint frames on the two bodies (and the residuals that check them).
def _point_of_cd_rows(model, by_kind, pair, frame_i, frame_j, deferred=None):
    """(s_bar_i, s_bar_j): the joint point that the CD rows make coincide, or None."""
    s_i, s_j, ok = _point_of_cd(model, by_kind["CD"], pair, deferred)
    return (s_i, s_j) if ok else None


def _point_of_dp2_rows(model, by_kind, pair, frame_i, frame_j, deferred=None):
    """(s_bar_i, s_bar_j): the DP2 point on I of the line of a cylindrical or translational
    joint."""
    (r_i, A_i), (r_j, A_j) = frame_i, frame_j
    dp2 = by_kind["DP2"][0]
    point = r_j + A_j @ dp2.vec("s_bar_p_i") if dp2.flip else r_i + A_i @ dp2.vec("s_bar_p_i")
    return A_i.T @ (point - r_i), A_j.T @ (point - r_j)


#: Where each recognised joint's point comes from: the CD rows, or the DP2 rows' line.
_POINTS = {
    "spherical": _point_of_cd_rows,
    "universal": _point_of_cd_rows,
    "revolute": _point_of_cd_rows,
    "cylindrical": _point_of_dp2_rows,
    "translational": _point_of_dp2_rows,
}

_AXES = {
    "spherical": _spherical_axes,
    "universal": _universal_axes,
    "revolute": _revolute_axes,
    "cylindrical": _cylindrical_axes,
    "translational": _translational_axes,
}


def recognised_joint(model: Model, name: str, rows: tuple[int, ...],
                     deferred: list | None = None) -> JointDefinition | None:  # fmt: skip
    """The joint that the rows ``rows`` (one tag, one body pair) compose, or None.
    ``deferred``: under a trace, the geometry checks as traced booleans (see the module
    docstring); the joint is returned as if they passed."""
    first = next(s for s in model.gcons if rows[0] in s.rows)
    k = first.rows.index(rows[0])
    pair = (first.body_i[k], first.body_j[k])
    parsed = [_Row(model, row, pair) for row in rows]
    if any({p.set.body_i[p.k], p.set.body_j[p.k]} != set(pair) for p in parsed):
        return None
    counts = Counter(p.kind for p in parsed)
    kind = next((kind for kind, pattern in _PATTERNS.items() if counts == pattern), None)
    if kind is None:
        return None
    if not _passes(~jnp.any(jnp.abs(model.f_offset[np.asarray(rows)]) > _TOL), deferred):
        return None
    (r_i, A_i), (r_j, A_j) = (_global(model, b) for b in pair)
    by_kind = defaultdict(list)
    for p in parsed:
        by_kind[p.kind].append(p)
    found = _POINTS[kind](model, by_kind, pair, (r_i, A_i), (r_j, A_j), deferred)
    if found is None:
        return None
    s_i, s_j = found
    axes_i, axes_j, checks = _AXES[kind](model, by_kind, pair, A_i, A_j)
    if checks and not _passes(~jnp.any(jnp.stack(checks) > 1e-6), deferred):
        return None
    spec = JOINT_KINDS[kind]
    n = spec.scalar_size
    return JointDefinition(
        name=name,
        kind=kind,
        body_i=int(pair[0]),
        body_j=int(pair[1]),
        s_bar_i=s_i,
        s_bar_j=s_j,
        frame_i=axes_i,
        frame_j=axes_j,
        offset=jnp.zeros(n),
        q_start=jnp.asarray(spec.drawn_q(np.zeros(n))),
        sign=(1,) * n,
    )
