"""The default look of a model's bodies (:mod:`jaxmbd.geometry`): stick figures of capsules
from each centre of mass to its joint points, boxes of equal inertia, and the ground's
anchors and rails."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..gcons import DP2, gcon_kind
from ._shape import Shape, box, capsule

# GCON rows that carry body points rank by GconKind.point_rank, best first: CD rows make two
# points coincide (an attachment), DP2 rows keep a point on a line or plane through the
# other (a sliding pair's reference point), D rows hold two points at a distance
# (construction points, possibly far from the body)
STICK_RADIUS = 0.02  # of the mechanism's size (its bounding-box diagonal at the start)
STICK_RADIUS_PER_LINK = 0.08  # at most this fraction of the median link length
GROUND_COLOR = "#3a3a3a"


def equivalent_box(mass: float, inertia) -> Shape:
    """The homogeneous box with the body's mass and inertia (principal axes as its edges).

    Edges a_k^2 = 6 (J_j + J_l - J_k) / m; a degenerate (e.g. zero) moment gives a thin
    plate or rod, drawn with at least 2 % of the largest edge so that it stays visible.
    """
    J = np.asarray(inertia, dtype=np.float64)
    if J.shape == (3,):
        J = np.diag(J)
    w, V = np.linalg.eigh(0.5 * (J + J.T))
    if np.linalg.det(V) < 0:
        V[:, 2] *= -1
    m = max(float(mass), 1e-300)
    total = w.sum()
    sq = np.array([6.0 * (total - 2.0 * w[k]) / m for k in range(3)])
    edges = np.sqrt(np.clip(sq, 0.0, None))
    top = float(edges.max()) if edges.max() > 0 else 1.0
    edges = np.maximum(edges, 0.02 * top)
    return Shape(kind="box", params=(("size", tuple(float(x) for x in edges)),),
                 rot=tuple(float(x) for x in V.reshape(-1)))  # fmt: skip


class JointPoint(NamedTuple):
    """Where a joint attaches to a body: ``point`` in the body frame (global coordinates for
    the ground, ``body == model.nb``); ``kind`` is the GCON kind it comes from (``"CD"``: the
    two bodies share the point at all times)."""

    joint: str
    body: int
    point: np.ndarray
    kind: str


def joint_points(model) -> list[JointPoint]:
    """The joints' attachment points on every body, the ground included.

    One point per (joint, body): from the joint's CD rows if it has any on that body, else
    its DP2 rows, else its D rows (the first such row). Ordered by the joint's first
    constraint row, then by body; joints without points (DP1, ROT only) give none.
    """
    first_row: dict[str, int] = {}
    for row, joint in enumerate(model.constraint_joints):
        first_row.setdefault(joint, row)
    best: dict[tuple[str, int], tuple[int, int, np.ndarray, str]] = {}
    for gset in model.gcons:
        rank = gcon_kind(gset.kind).point_rank
        if rank is None or not gset.rows:
            continue
        sp, sq = np.asarray(gset.s_bar_p_i), np.asarray(gset.s_bar_q_j)
        for k, row in enumerate(gset.rows):
            joint = model.constraint_joints[row]
            for body, point in ((gset.body_i[k], sp[k]), (gset.body_j[k], sq[k])):
                key = (joint, int(body))
                if key not in best or (rank, row) < best[key][:2]:
                    best[key] = (rank, row, np.array(point, dtype=np.float64), gset.kind)
    order = sorted(best, key=lambda key: (first_row[key[0]], key[1]))
    return [JointPoint(j, b, best[j, b][2], best[j, b][3]) for j, b in order]


def _joins(point: JointPoint) -> bool:
    """The point comes from rows that keep the two bodies' points together (CD)."""
    return gcon_kind(point.kind).joins_points


def _world_point(model, body: int, point: np.ndarray) -> np.ndarray:
    if body >= model.nb:
        return point
    return np.asarray(model.r0[body]) + np.asarray(model.A0[body]) @ point


def stick_radius(model, points: list[JointPoint] | None = None) -> float | None:
    """The radius of the default look's capsules: :data:`STICK_RADIUS` of the diagonal of
    the box around every centre of mass and joint point at the initial configuration, and
    at most :data:`STICK_RADIUS_PER_LINK` of the median link (centre of mass to joint
    point) length. ``None`` for a model without joint points."""
    points = joint_points(model) if points is None else points
    if not points:
        return None
    world = [_world_point(model, p.body, p.point) for p in points]
    world = np.concatenate([np.asarray(model.r0).reshape(-1, 3), np.stack(world)])
    size = float(np.linalg.norm(np.ptp(world, axis=0)))
    links = [float(np.linalg.norm(p.point)) for p in points if p.body < model.nb]
    links = [x for x in links if x > 1e-9 * size]
    radius = STICK_RADIUS * size
    if links:
        radius = min(radius, STICK_RADIUS_PER_LINK * float(np.median(links)))
    return radius if radius > 0 else None


def stick_figure(points, radius: float) -> tuple[Shape, ...]:
    """Capsules of ``radius`` from the body origin (its centre of mass) to each of
    ``points`` (body frame), the way MuJoCo and Exudyn draw links. Two points on either side
    of the origin, on one line through it (a rod's two ends), share one capsule; points at
    the origin or repeated give none."""
    ends = _link_ends(points, radius)
    shapes, used = [], set()
    for a, end in enumerate(ends):
        if a in used:
            continue
        through = [
            c
            for c in range(a + 1, len(ends))
            if c not in used and _through_origin(end, ends[c], 1e-2 * radius)
        ]
        start = ends[through[0]] if through else np.zeros(3)
        used.update([a, *through[:1]])
        shapes.append(_capsule_between(start, end, radius))
    return tuple(shapes)


def _link_ends(points, radius: float) -> list[np.ndarray]:
    """The distinct ``points`` away from the origin (closer than 1e-6 radius: the same)."""
    tol = 1e-6 * radius
    ends: list[np.ndarray] = []
    for p in points:
        p = np.asarray(p, dtype=np.float64)
        if np.linalg.norm(p) > tol and all(np.linalg.norm(p - q) > tol for q in ends):
            ends.append(p)
    return ends


def _through_origin(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    """Whether the segment from a to b passes within ``tol`` of the origin."""
    return bool(a @ b < 0 and np.linalg.norm(np.cross(a, b)) <= tol * np.linalg.norm(a - b))


def _capsule_between(a: np.ndarray, b: np.ndarray, radius: float) -> Shape:
    length = float(np.linalg.norm(b - a))
    return capsule(radius, length, pos=tuple(0.5 * (a + b)), axis=tuple((b - a) / length))


def _hub(mass: float, inertia, radius: float | None, largest: float = np.inf) -> Shape:
    """A body's box of equal inertia, scaled down to a ``largest`` edge if bigger, every
    edge at least two capsule radii so that it stands out against the links."""
    shape = equivalent_box(mass, inertia)
    if radius is None:
        return shape
    edges = np.asarray(shape.param("size"))
    edges = edges * min(1.0, largest / edges.max())
    edges = np.maximum(edges, 2.0 * radius)
    return Shape(kind="box", params=(("size", tuple(float(x) for x in edges)),), rot=shape.rot)


def default_shapes(model, points: list[JointPoint] | None = None) -> tuple[tuple[Shape, ...], ...]:
    """The default look of every body (its own shapes ignored): a stick figure of capsules
    from its centre of mass to its joint points (:func:`stick_figure`, :func:`stick_radius`).
    A body whose joint points all sit at its centre of mass, or that has none, is its box of
    equal inertia (:func:`equivalent_box`); a body hanging from a single joint point (a
    pendulum, a top) also gets that box as a bob at its centre of mass, at most half the
    link long, so that its turning about the link shows."""
    points = joint_points(model) if points is None else points
    radius = stick_radius(model, points)
    out = []
    for b in range(model.nb):
        own = [p.point for p in points if p.body == b]
        mass, inertia = float(np.asarray(model.mass[b])), np.asarray(model.inertia[b])
        ends = _link_ends(own, radius) if radius is not None else []
        if not ends:
            out.append((_hub(mass, inertia, radius),))
            continue
        sticks = stick_figure(ends, radius)
        if len(ends) == 1 and min(np.linalg.norm(p) for p in own) > 1e-6 * radius:
            sticks += (_hub(mass, inertia, radius, 0.5 * float(np.linalg.norm(ends[0]))),)
        out.append(sticks)
    return tuple(out)


def model_shapes(model) -> tuple[tuple[Shape, ...], ...]:
    """What is drawn for each body: its own shapes, or its default look
    (:func:`default_shapes`)."""
    own = tuple(getattr(model, "shapes", ()) or ())
    own = own + ((),) * (model.nb - len(own))
    if all(own):
        return own
    defaults = default_shapes(model)
    return tuple(mine or default for mine, default in zip(own, defaults, strict=True))


def body_shapes(model, b: int) -> tuple[Shape, ...]:
    """The shapes of body ``b``: its own, or its default look (:func:`default_shapes`)."""
    return model_shapes(model)[b]


class GroundSlide(NamedTuple):
    """A body sliding along a line fixed in the ground (translational or cylindrical joint
    to the ground): its joint ``point`` (body frame) moves along ``axis`` (global unit
    vector) through ``origin`` (the ground's joint point)."""

    joint: str
    body: int
    point: np.ndarray
    origin: np.ndarray
    axis: np.ndarray


def ground_slides(model) -> list[GroundSlide]:
    """The sliding joints to the ground: joints without CD rows whose DP2 rows between the
    ground and a body keep the points' offset perpendicular to two independent vectors
    a_1, a_2 (Perp-2), i.e. along a_1 x a_2, taken at the initial configuration."""
    by_joint: dict[str, list[np.ndarray]] = {}
    gset = next((g for g in model.gcons if gcon_kind(g.kind) is DP2), None)
    for k, row in enumerate(gset.rows if gset is not None else ()):
        i, j = gset.body_i[k], gset.body_j[k]
        if model.nb in (i, j) and i != j:
            a = np.asarray(gset.a_bar_i[k], dtype=np.float64)
            by_joint.setdefault(model.constraint_joints[row], []).append(
                a if i == model.nb else np.asarray(model.A0[i]) @ a
            )
    points = joint_points(model)
    out = []
    for joint, normals in by_joint.items():
        mine = {p.body: p for p in points if p.joint == joint}
        axis = np.cross(normals[0], normals[-1])
        if any(_joins(p) for p in mine.values()) or np.linalg.norm(axis) < 1e-6:
            continue
        body = next(b for b in mine if b != model.nb)
        axis = axis / np.linalg.norm(axis)
        out.append(GroundSlide(joint, body, mine[body].point, mine[model.nb].point, axis))
    return out


def ground_shapes(model, travel: dict[str, tuple[float, float]] | None = None) -> tuple[Shape, ...]:
    """The ground's part of the default look (global frame), dark: a cube three capsule
    radii wide where a body is attached to the ground by coincident points (CD rows of
    spherical, revolute and universal joints), and a rail along each sliding joint to the
    ground (:func:`ground_slides`) covering ``travel[joint]`` = (lowest, highest) position
    of the body's joint point along the axis from the ground's point (default (0, 0)),
    with three radii to spare at each end."""
    points = joint_points(model)
    radius = stick_radius(model, points)
    if radius is None:
        return ()
    anchors: list[np.ndarray] = []
    for p in points:
        if p.body == model.nb and _joins(p):
            if not any(np.linalg.norm(p.point - q) <= 1e-9 * radius for q in anchors):
                anchors.append(p.point)
    size = (3.0 * radius,) * 3
    shapes = [box(size, pos=tuple(q), color=GROUND_COLOR) for q in anchors]
    for slide in ground_slides(model):
        lo, hi = (travel or {}).get(slide.joint, (0.0, 0.0))
        lo, hi = lo - 3.0 * radius, hi + 3.0 * radius
        mid = slide.origin + 0.5 * (lo + hi) * slide.axis
        shapes.append(
            capsule(0.5 * radius, hi - lo, pos=tuple(mid), axis=tuple(slide.axis),
                    color=GROUND_COLOR)
        )  # fmt: skip
    return tuple(shapes)


def extent(model) -> float:
    """A length scale of the model's drawing (largest shape dimension at the initial pose)."""
    size = 0.0
    for shapes in model_shapes(model):
        for s in shapes:
            V, _ = s.mesh(8)
            size = max(size, float(np.ptp(V, axis=0).max()))
    return size
