"""Visual geometry of bodies: shapes with a size and a local pose, for drawing only.

A body carries zero or more :class:`Shape` objects in its own (centre-of-mass) frame. They
are static metadata of the :class:`~jaxmbd.model.Model` (hashable, not array leaves): they
play no part in the dynamics, so ``jax.grad``, ``vmap`` and ``stack_models`` never see them.
A body without shapes is drawn as a **stick figure** (:func:`default_shapes`), the way
MuJoCo and Exudyn draw links: capsules from its centre of mass to the points where its joints
attach (:func:`joint_points`, read from the model's constraints), one radius for the whole
mechanism (:func:`stick_radius`). A body with no joint point away from its centre of mass is
drawn as its homogeneous **box of equal inertia** (:func:`equivalent_box`), from the model's
current mass and inertia. Ground attachments of spherical, revolute and universal joints are
drawn as small dark anchors (:func:`ground_shapes`).

Shape types and their fields (lengths in model units; JSON keys in parentheses):

========== =================================================================================
box        ``size`` = (lx, ly, lz) full edge lengths along the shape's x, y, z
cylinder   ``radius``, ``length`` along z, centred; optional ``inner_radius`` (a tube)
sphere     ``radius``
capsule    ``radius``, ``length`` of the cylindrical part along z (hemispherical caps)
ellipsoid  ``size`` = (lx, ly, lz) full axis lengths along the shape's x, y, z (twice the
           semi-axes)
cone       ``radius`` of the base (centred at the shape origin), apex at z = ``length``
pyramid    ``size`` = (lx, ly) of the rectangular base (centred at the origin), apex at
           z = ``height``
mesh       ``vertices`` (n, 3) and triangular ``faces`` (k, 3) of 0-based vertex indices
plane      the plane z = 0 of the shape frame, on the ground only (``add_ground_plane``);
           optional ``size`` = (lx, ly): the square drawn (default 1 x 1)
========== =================================================================================

The pose: ``pos`` (shape origin in the body frame, default 0) and either ``A`` (3x3 rotation,
shape to body) or ``axis`` (the body-frame direction of the shape's z axis), default identity.
``color`` is an optional matplotlib/CSS colour string.

Collision: shapes also collide, unless ``collide=False`` (JSON ``"collide": false``): a
contact pair (:meth:`~jaxmbd.ModelBuilder.add_contact`) checks the colliding shapes of its
two bodies (spheres, capsules, boxes, cylinders, ellipsoids, meshes (their convex hulls) and the
ground's planes; see
:mod:`jaxmbd.contact`). Shapes collide only where a contact pair is added: a model without
pairs runs as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from .errors import ModelError
from .gcons import DP2, gcon_kind

_POSE_FIELDS = ("type", "pos", "A", "axis", "color", "vertices", "faces", "collide")


@dataclass(frozen=True)
class Shape:
    """One visual shape in a body frame (hashable; see the module docstring for fields)."""

    kind: str
    params: tuple[tuple[str, tuple[float, ...]], ...] = ()
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rot: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)  # row-major 3x3
    color: str | None = None
    vertices: tuple[tuple[float, float, float], ...] = ()
    faces: tuple[tuple[int, int, int], ...] = ()
    collide: bool = True  # False: visual only (no contact)

    def param(self, key: str, default=None):
        for k, v in self.params:
            if k == key:
                return v if len(v) != 1 or key == "size" else v[0]
        return default

    @property
    def A(self) -> np.ndarray:
        return np.asarray(self.rot, dtype=np.float64).reshape(3, 3)

    def to_json(self) -> dict:
        out: dict = {"type": self.kind}
        for key, val in self.params:
            out[key] = list(val) if key == "size" else val[0]
        if shape_kind(self.kind).explicit_mesh:
            out["vertices"] = [list(v) for v in self.vertices]
            out["faces"] = [list(f) for f in self.faces]
        if any(self.pos):
            out["pos"] = list(self.pos)
        if not np.allclose(self.A, np.eye(3), atol=0, rtol=0):
            out["A"] = self.A.tolist()
        if self.color is not None:
            out["color"] = self.color
        if not self.collide:
            out["collide"] = False
        return out

    def mesh(self, resolution: int = 24) -> tuple[np.ndarray, np.ndarray]:
        """Triangle mesh (vertices (n, 3) in the body frame, faces (k, 3))."""
        v, f = _local_mesh(self, resolution)
        return v @ self.A.T + np.asarray(self.pos), f


def _positive(value, *, where: str, allow_zero: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ModelError(f"{where}: must be a positive finite number, got {value!r}")
    return x


def _matrix3(value, *, where: str) -> np.ndarray:
    try:
        A = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected a 3x3 rotation matrix, got {value!r}") from None
    if A.shape != (3, 3) or not np.all(np.isfinite(A)):
        raise ModelError(f"{where}: expected a finite 3x3 rotation matrix, got shape {A.shape}")
    if np.max(np.abs(A.T @ A - np.eye(3))) > 1e-6 or np.linalg.det(A) <= 0:
        raise ModelError(f"{where}: not a rotation matrix (A^T A != I or det <= 0)")
    if np.max(np.abs(A.T @ A - np.eye(3))) < 1e-14:
        return A
    U, _, Vt = np.linalg.svd(A)
    return U @ Vt


def _vector(value, n: int, *, where: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected {n} numbers, got {value!r}") from None
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: expected {n} finite numbers, got {value!r}")
    return arr


def _z_to(axis: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit vector ``axis``."""
    n = axis / np.linalg.norm(axis)
    trial = np.eye(3)[np.argmin(np.abs(n))]
    u = trial - n * (n @ trial)
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(n, u), n], axis=1)


def _mesh_data(spec, where: str):
    """(vertices, faces) of a mesh's JSON form, checked."""
    for key in ("vertices", "faces"):
        if key not in spec:
            raise ModelError(f"{where}.{key}: missing required field for a mesh")
    try:
        V = np.asarray(spec["vertices"], dtype=np.float64)
        F = np.asarray(spec["faces"])
    except (TypeError, ValueError):
        raise ModelError(f"{where}: vertices and faces must be numeric arrays") from None
    if V.ndim != 2 or V.shape[1] != 3 or len(V) < 3 or not np.all(np.isfinite(V)):
        raise ModelError(f"{where}.vertices: expected (n >= 3, 3) finite numbers")
    if F.ndim != 2 or F.shape[1] != 3 or len(F) < 1 or not np.issubdtype(F.dtype, np.integer):
        raise ModelError(f"{where}.faces: expected (k, 3) integer vertex indices")
    if F.min() < 0 or F.max() >= len(V):
        raise ModelError(f"{where}.faces: vertex index out of range 0..{len(V) - 1}")
    vertices = tuple(tuple(float(x) for x in row) for row in V)
    faces = tuple(tuple(int(i) for i in row) for row in F)
    return vertices, faces


def make_shape(spec, *, where: str = "shape") -> Shape:
    """A :class:`Shape` from a dict (the JSON form, ``type`` plus fields) or a Shape."""
    if isinstance(spec, Shape):
        return spec
    if not isinstance(spec, Mapping):
        raise ModelError(f"{where}: expected a shape object with a 'type', got {spec!r}")
    kind = spec.get("type")
    record = SHAPE_BY_NAME.get(kind) if isinstance(kind, str) else None
    if record is None:
        raise ModelError(f"{where}.type: unknown shape type {kind!r}; known: {list(SHAPE_KINDS)}")
    known = {name for name, _, _ in record.fields} | set(_POSE_FIELDS)
    extra = sorted(set(spec) - known)
    if extra:
        raise ModelError(
            f"{where}: unknown field(s) {extra} for a {kind}; allowed: {sorted(known - {'type'})}"
        )
    params = []
    for name, count, required in record.fields:
        if name not in spec:
            if required:
                raise ModelError(f"{where}.{name}: missing required field for a {kind}")
            continue
        if count is None:
            params.append((name, (_positive(spec[name], where=f"{where}.{name}"),)))
        else:
            vec = _vector(spec[name], count, where=f"{where}.{name}")
            if np.any(vec <= 0):
                raise ModelError(f"{where}.{name}: sizes must be positive, got {spec[name]!r}")
            params.append((name, tuple(float(x) for x in vec)))
    if record.check is not None:
        record.check(spec, where)
    vertices: tuple = ()
    faces: tuple = ()
    if record.explicit_mesh:
        vertices, faces = _mesh_data(spec, where)
    pos = _vector(spec.get("pos", (0.0, 0.0, 0.0)), 3, where=f"{where}.pos")
    if "A" in spec and "axis" in spec:
        raise ModelError(f"{where}: give either A or axis, not both")
    if "A" in spec:
        A = _matrix3(spec["A"], where=f"{where}.A")
    elif "axis" in spec:
        ax = _vector(spec["axis"], 3, where=f"{where}.axis")
        if np.linalg.norm(ax) < 1e-12:
            raise ModelError(f"{where}.axis: must not be the zero vector")
        A = _z_to(ax)
    else:
        A = np.eye(3)
    color = spec.get("color")
    if color is not None and not isinstance(color, str):
        raise ModelError(f"{where}.color: expected a colour string, got {color!r}")
    collide = spec.get("collide", True)
    if not isinstance(collide, bool | np.bool_):
        raise ModelError(f"{where}.collide: expected true or false, got {collide!r}")
    return Shape(
        kind=kind,
        params=tuple(params),
        pos=tuple(float(x) for x in pos),
        rot=tuple(float(x) for x in A.reshape(-1)),
        color=color,
        vertices=vertices,
        faces=faces,
        collide=bool(collide),
    )


def box(size, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None, collide=True) -> Shape:
    """A box with full edge lengths ``size`` = (lx, ly, lz)."""
    return make_shape(_spec("box", pos, A, axis, color, collide, size=list(size)))


def cylinder(radius, length, *, inner_radius=None, pos=(0.0, 0.0, 0.0), A=None, axis=None,
             color=None, collide=True) -> Shape:  # fmt: skip
    """A cylinder (a tube with ``inner_radius``) of ``length`` along its z axis, centred."""
    extra = {} if inner_radius is None else {"inner_radius": inner_radius}
    return make_shape(
        _spec("cylinder", pos, A, axis, color, collide, radius=radius, length=length, **extra)
    )


def sphere(radius, *, pos=(0.0, 0.0, 0.0), color=None, collide=True) -> Shape:
    return make_shape(_spec("sphere", pos, None, None, color, collide, radius=radius))


def capsule(radius, length, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None,
            collide=True) -> Shape:  # fmt: skip
    return make_shape(_spec("capsule", pos, A, axis, color, collide, radius=radius, length=length))


def ellipsoid(size, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None,
              collide=True) -> Shape:  # fmt: skip
    """An ellipsoid with full axis lengths ``size`` = (lx, ly, lz) (twice its semi-axes)."""
    return make_shape(_spec("ellipsoid", pos, A, axis, color, collide, size=list(size)))


def cone(radius, length, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None,
         collide=True) -> Shape:  # fmt: skip
    """A cone with its base centred at ``pos`` and its apex ``length`` along ``axis``."""
    return make_shape(_spec("cone", pos, A, axis, color, collide, radius=radius, length=length))


def pyramid(size, height, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None,
            collide=True) -> Shape:  # fmt: skip
    """A pyramid on a rectangular base ``size`` = (lx, ly) centred at ``pos``."""
    return make_shape(
        _spec("pyramid", pos, A, axis, color, collide, size=list(size), height=height)
    )


def mesh(vertices, faces, *, pos=(0.0, 0.0, 0.0), A=None, color=None, collide=True) -> Shape:
    return make_shape(
        _spec("mesh", pos, A, None, color, collide, vertices=np.asarray(vertices).tolist(),
              faces=np.asarray(faces).tolist())
    )  # fmt: skip


def plane(point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0), *, size=None, color=None) -> Shape:
    """The plane through ``point`` normal to ``normal`` (for the ground,
    :meth:`~jaxmbd.ModelBuilder.add_ground_plane`); ``size`` = (lx, ly) is what is drawn."""
    extra = {} if size is None else {"size": list(size)}
    return make_shape(_spec("plane", point, None, normal, color, True, **extra))


def _spec(kind, pos, A, axis, color, collide=True, **fields):
    spec = {"type": kind, "pos": list(pos), **fields}
    if not collide:
        spec["collide"] = False
    if A is not None:
        spec["A"] = np.asarray(A).tolist()
    if axis is not None:
        spec["axis"] = list(axis)
    if color is not None:
        spec["color"] = color
    return spec


def make_shapes(specs, *, where: str) -> tuple[Shape, ...]:
    if specs is None:
        return ()
    if isinstance(specs, Shape | Mapping):
        specs = [specs]
    try:
        items = list(specs)
    except TypeError:
        raise ModelError(f"{where}: expected a list of shapes, got {specs!r}") from None
    return tuple(make_shape(s, where=f"{where}[{k}]") for k, s in enumerate(items))


# ----------------------------------------------------------------------------- default look

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


# ----------------------------------------------------------------------------- meshes


def _ring(radius, z, n):
    a = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    return np.stack([radius * np.cos(a), radius * np.sin(a), np.full(n, z)], axis=1)


def _band(i0, i1, n):
    """Faces joining ring i0..i0+n-1 and ring i1..i1+n-1."""
    faces = []
    for k in range(n):
        k1 = (k + 1) % n
        faces += [(i0 + k, i0 + k1, i1 + k1), (i0 + k, i1 + k1, i1 + k)]
    return faces


def _fan(centre, i0, n, flip=False):
    faces = [(centre, i0 + (k + 1) % n, i0 + k) for k in range(n)]
    return [(a, c, b) for a, b, c in faces] if flip else faces


def _local_mesh(shape: Shape, n: int) -> tuple[np.ndarray, np.ndarray]:
    return shape_kind(shape.kind).local_mesh(shape, n)


# Triangle meshes in the shape frame, per kind: (shape, resolution) -> (vertices, faces).


def _box_mesh(shape: Shape, n: int):
    lx, ly, lz = shape.param("size")
    c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    V = 0.5 * c * np.array([lx, ly, lz])
    F = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
         (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]  # fmt: skip
    return V, np.asarray(F)


def _cylinder_mesh(shape: Shape, n: int):
    R, L = shape.param("radius"), shape.param("length")
    Ri = shape.param("inner_radius", 0.0) or 0.0
    bottom, top = _ring(R, -L / 2, n), _ring(R, L / 2, n)
    if Ri > 0:
        ib, it = _ring(Ri, -L / 2, n), _ring(Ri, L / 2, n)
        V = np.concatenate([bottom, top, ib, it])
        F = _band(0, n, n) + _band(3 * n, 2 * n, n) + _band(n, 3 * n, n) + _band(2 * n, 0, n)
        return V, np.asarray(F)
    V = np.concatenate([bottom, top, [[0, 0, -L / 2], [0, 0, L / 2]]])
    F = _band(0, n, n) + _fan(2 * n, 0, n) + _fan(2 * n + 1, n, n, flip=True)
    return V, np.asarray(F)


def _round_mesh(shape: Shape, n: int):
    """A sphere, or a capsule: a sphere split at its equator by a cylinder of ``length``."""
    R = shape.param("radius")
    L = shape.param("length", 0.0)
    m = max(n // 2, 4)
    rings = []
    for k in range(1, m):
        th = np.pi * k / m
        z, r = -R * np.cos(th), R * np.sin(th)
        if k == m / 2:  # the equator: the capsule's cylinder runs from -L/2 to L/2
            rings.append(_ring(r, -L / 2, n))
            if L > 0:
                rings.append(_ring(r, L / 2, n))
        else:
            rings.append(_ring(r, z + (L / 2 if th > np.pi / 2 else -L / 2), n))
    V = np.concatenate(rings + [np.array([[0, 0, -R - L / 2], [0, 0, R + L / 2]])])
    nr = len(rings)
    F = []
    for k in range(nr - 1):
        F += _band(k * n, (k + 1) * n, n)
    F += _fan(nr * n, 0, n) + _fan(nr * n + 1, (nr - 1) * n, n, flip=True)
    return V, np.asarray(F)


def _ellipsoid_mesh(shape: Shape, n: int):
    """The unit sphere's mesh scaled by the semi-axes."""
    V, F = _round_mesh(sphere(1.0), n)
    return V * (0.5 * np.asarray(shape.param("size"))), F


def _cone_mesh(shape: Shape, n: int):
    R, L = shape.param("radius"), shape.param("length")
    V = np.concatenate([_ring(R, 0.0, n), [[0, 0, 0], [0, 0, L]]])
    F = _fan(n, 0, n) + _fan(n + 1, 0, n, flip=True)
    return V, np.asarray(F)


def _pyramid_mesh(shape: Shape, n: int):
    (lx, ly), H = shape.param("size"), shape.param("height")
    V = np.array([[-lx / 2, -ly / 2, 0], [lx / 2, -ly / 2, 0], [lx / 2, ly / 2, 0],
                  [-lx / 2, ly / 2, 0], [0, 0, H]])  # fmt: skip
    F = [(0, 2, 1), (0, 3, 2), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)]
    return V, np.asarray(F)


def _explicit_mesh(shape: Shape, n: int):
    return np.asarray(shape.vertices, float), np.asarray(shape.faces, int)


def _plane_mesh(shape: Shape, n: int):
    lx, ly = shape.param("size") or (1.0, 1.0)
    V = 0.5 * np.array([[-lx, -ly, 0], [lx, -ly, 0], [lx, ly, 0], [-lx, ly, 0]], float)
    return V, np.asarray([(0, 1, 2), (0, 2, 3)])


# ----------------------------------------------------------------------------- the records


def _check_tube(spec, where: str) -> None:
    if "inner_radius" in spec and float(spec["inner_radius"]) >= float(spec["radius"]):
        raise ModelError(f"{where}.inner_radius: must be smaller than radius")


def _radius_size(shape: Shape) -> np.ndarray:
    return np.array([shape.param("radius"), 0.0, 0.0])


def _radius_half_length_size(shape: Shape) -> np.ndarray:
    return np.array([shape.param("radius"), 0.5 * shape.param("length"), 0.0])


def _half_edges_size(shape: Shape) -> np.ndarray:
    return 0.5 * np.asarray(shape.param("size"), dtype=np.float64)


def _no_size(shape: Shape) -> np.ndarray:
    return np.zeros(3)


def _hull_size(shape: Shape) -> np.ndarray:
    """A mesh's collision geometry, the convex hull of its vertices (MuJoCo's, too): rows
    (x, y, z, weight) in the shape frame, first an interior point (the shape origin when it
    lies inside the hull, else the mean of the hull's vertices) with weight 0, then the
    hull's vertices (scipy.spatial.ConvexHull, Qhull) with weight 1; all vertices where
    they span no volume."""
    V = np.asarray(shape.vertices, dtype=np.float64)
    try:
        hull = ConvexHull(V)
    except QhullError:
        return np.concatenate([[[*V.mean(axis=0), 0.0]], np.c_[V, np.ones(len(V))]])
    H = V[hull.vertices]
    size = float(np.ptp(H, axis=0).max())
    inside = bool(np.all(hull.equations[:, 3] < -1e-9 * size))  # origin: A 0 + b < 0
    centre = np.zeros(3) if inside else H.mean(axis=0)
    return np.concatenate([[[*centre, 0.0]], np.c_[H, np.ones(len(H))]])


def _hull_scale(size: np.ndarray) -> float:
    return 0.5 * float(np.ptp(size[1:, :3], axis=0).min())


@dataclass(frozen=True)
class ShapeKind:
    """One shape kind (the table of the module docstring).

    ``fields``: its JSON / keyword fields (name, length or None for a scalar, required);
    ``local_mesh(shape, resolution)``: its triangle mesh in the shape frame; ``check(spec,
    where)``: checks across fields (None: none); ``explicit_mesh``: it carries
    ``vertices`` and ``faces``; ``ground_only``: ground geometry (a plane), refused on a
    body. Collision (:mod:`jaxmbd.contact.narrow_phase`): ``collision_size(shape)`` its
    (3,) size vector (None: the kind does not collide) and ``collision_scale(size)`` its
    smallest dimension (the default contact stiffness's length)."""

    name: str
    fields: tuple[tuple[str, int | None, bool], ...]
    local_mesh: Callable
    check: Callable | None = None
    explicit_mesh: bool = False
    ground_only: bool = False
    collision_size: Callable | None = None
    collision_scale: Callable = lambda size: float(size[0])  # noqa: E731

    @property
    def collides(self) -> bool:
        return self.collision_size is not None


_RADIUS, _LENGTH = ("radius", None, True), ("length", None, True)
BOX = ShapeKind("box", (("size", 3, True),), _box_mesh, collision_size=_half_edges_size,
                collision_scale=lambda size: float(size.min()))  # fmt: skip
CYLINDER = ShapeKind(
    "cylinder", (_RADIUS, _LENGTH, ("inner_radius", None, False)), _cylinder_mesh, _check_tube,
    collision_size=_radius_half_length_size,
    collision_scale=lambda size: float(min(size[0], size[1])),
)  # fmt: skip
SPHERE = ShapeKind("sphere", (_RADIUS,), _round_mesh, collision_size=_radius_size)
CAPSULE = ShapeKind("capsule", (_RADIUS, _LENGTH), _round_mesh,
                    collision_size=_radius_half_length_size)  # fmt: skip
ELLIPSOID = ShapeKind("ellipsoid", (("size", 3, True),), _ellipsoid_mesh,
                      collision_size=_half_edges_size,
                      collision_scale=lambda size: float(size.min()))  # fmt: skip
CONE = ShapeKind("cone", (_RADIUS, _LENGTH), _cone_mesh)
PYRAMID = ShapeKind("pyramid", (("size", 2, True), ("height", None, True)), _pyramid_mesh)
MESH = ShapeKind("mesh", (), _explicit_mesh, explicit_mesh=True, collision_size=_hull_size,
                 collision_scale=_hull_scale)  # fmt: skip
PLANE = ShapeKind("plane", (("size", 2, False),), _plane_mesh, ground_only=True,
                  collision_size=_no_size, collision_scale=lambda size: float("inf"))  # fmt: skip

#: Every shape kind by name (the files' ``type`` strings).
SHAPE_BY_NAME: dict[str, ShapeKind] = {
    k.name: k for k in (BOX, CYLINDER, SPHERE, CAPSULE, ELLIPSOID, CONE, PYRAMID, MESH, PLANE)
}
SHAPE_KINDS = tuple(SHAPE_BY_NAME)


def shape_kind(name: str) -> ShapeKind:
    """The record of the shape kind ``name``."""
    try:
        return SHAPE_BY_NAME[name]
    except KeyError:
        raise ModelError(f"unknown shape type {name!r}; known: {list(SHAPE_KINDS)}") from None


def extent(model) -> float:
    """A length scale of the model's drawing (largest shape dimension at the initial pose)."""
    size = 0.0
    for shapes in model_shapes(model):
        for s in shapes:
            V, _ = s.mesh(8)
            size = max(size, float(np.ptp(V, axis=0).max()))
    return size


def mass_properties(shape: Shape, mass: float, *, resolution: int = 96):
    """Volume, centroid (body frame) and inertia about the centroid (body axes) of ``shape``
    as a homogeneous solid of ``mass``, from its closed triangle mesh (signed tetrahedra;
    the mesh must be outward oriented). Used to check shapes against a body's inertia."""
    V, F = shape.mesh(resolution)
    a, b, c = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    vol6 = np.einsum("ij,ij->i", a, np.cross(b, c))  # 6 x signed volume of (0, a, b, c)
    volume = vol6.sum() / 6.0
    centroid = (vol6[:, None] * (a + b + c)).sum(0) / (24.0 * volume)
    # second moment int x x^T dV of each tetrahedron (0, a, b, c): vol/20 (sum vv^T + s s^T)
    s = a + b + c
    second = np.einsum("i,ij,ik->jk", vol6 / 120.0, s, s) + sum(
        np.einsum("i,ij,ik->jk", vol6 / 120.0, p, p) for p in (a, b, c)
    )
    rho = mass / volume
    second = rho * second - mass * np.outer(centroid, centroid)
    return volume, centroid, np.trace(second) * np.eye(3) - second
