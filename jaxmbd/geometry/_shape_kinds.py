"""The shape kinds (the table of :mod:`jaxmbd.geometry`): one :class:`ShapeKind` record
each, with its fields, its triangle mesh in the shape frame and its collision size (each
function here takes a :class:`~jaxmbd.geometry.Shape`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy  # its submodules load on first use (scipy.interpolate, .spatial, .linalg)

from ..errors import ModelError


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


# Triangle meshes in the shape frame, per kind: (shape, resolution) -> (vertices, faces).


def _box_mesh(shape, n: int):
    lx, ly, lz = shape.param("size")
    c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    V = 0.5 * c * np.array([lx, ly, lz])
    F = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
         (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]  # fmt: skip
    return V, np.asarray(F)


def _cylinder_mesh(shape, n: int):
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


def _round_mesh(shape, n: int):
    """A sphere, or a capsule: a sphere split at its equator by a cylinder of ``length``."""
    return _round_mesh_of(shape.param("radius"), shape.param("length", 0.0), n)


def _ellipsoid_mesh(shape, n: int):
    """The unit sphere's mesh scaled by the semi-axes."""
    V, F = _round_mesh_of(1.0, 0.0, n)
    return V * (0.5 * np.asarray(shape.param("size"))), F


def _round_mesh_of(R, L, n: int):
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


def _cone_mesh(shape, n: int):
    R, L = shape.param("radius"), shape.param("length")
    V = np.concatenate([_ring(R, 0.0, n), [[0, 0, 0], [0, 0, L]]])
    F = _fan(n, 0, n) + _fan(n + 1, 0, n, flip=True)
    return V, np.asarray(F)


def _pyramid_mesh(shape, n: int):
    (lx, ly), H = shape.param("size"), shape.param("height")
    V = np.array([[-lx / 2, -ly / 2, 0], [lx / 2, -ly / 2, 0], [lx / 2, ly / 2, 0],
                  [-lx / 2, ly / 2, 0], [0, 0, H]])  # fmt: skip
    F = [(0, 2, 1), (0, 3, 2), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)]
    return V, np.asarray(F)


def _explicit_mesh(shape, n: int):
    return np.asarray(shape.vertices, float), np.asarray(shape.faces, int)


def _height_field_mesh(shape, n: int):
    """The height field's surface: its grid points and MuJoCo's two triangles per cell."""
    nrow, ncol = (int(x) for x in shape.param("grid"))
    return np.array(height_field_points(shape)), height_field_faces(nrow, ncol)


def height_field_faces(nrow: int, ncol: int) -> np.ndarray:
    """The triangles (vertex r ncol + c at row r, column c) of MuJoCo's height field cells:
    cell (r, c) is {(r+1, c), (r, c), (r+1, c+1)} and {(r, c), (r+1, c+1), (r, c+1)}, the
    tops of its two prisms (``engine_collision_convex.c``, ``mjc_ConvexHField``)."""
    r, c = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
    v = (r * ncol + c).reshape(-1, 1)
    first = np.concatenate([v + ncol, v, v + ncol + 1], axis=1)
    second = np.concatenate([v, v + ncol + 1, v + 1], axis=1)
    return np.stack([first, second], axis=1).reshape(-1, 3)


def _plane_mesh(shape, n: int):
    lx, ly = shape.param("size") or (1.0, 1.0)
    V = 0.5 * np.array([[-lx, -ly, 0], [lx, -ly, 0], [lx, ly, 0], [-lx, ly, 0]], float)
    return V, np.asarray([(0, 1, 2), (0, 2, 3)])


# ----------------------------------------------------------------------------- the records


def _check_tube(spec, where: str) -> None:
    if "inner_radius" in spec and float(spec["inner_radius"]) >= float(spec["radius"]):
        raise ModelError(f"{where}.inner_radius: must be smaller than radius")


def _radius_size(shape) -> np.ndarray:
    return np.array([shape.param("radius"), 0.0, 0.0])


def _radius_half_length_size(shape) -> np.ndarray:
    return np.array([shape.param("radius"), 0.5 * shape.param("length"), 0.0])


def _half_edges_size(shape) -> np.ndarray:
    return 0.5 * np.asarray(shape.param("size"), dtype=np.float64)


def _no_size(shape) -> np.ndarray:
    return np.zeros(3)


def _hull_size(shape) -> np.ndarray:
    """A mesh's collision geometry, the convex hull of its vertices (MuJoCo's, too): rows
    (x, y, z, weight) in the shape frame, first an interior point (the shape origin when it
    lies inside the hull, else the mean of the hull's vertices) with weight 0, then the
    hull's vertices (scipy.spatial.ConvexHull, Qhull) with weight 1; all vertices where
    they span no volume."""
    V = np.asarray(shape.vertices, dtype=np.float64)
    try:
        hull = scipy.spatial.ConvexHull(V)
    except scipy.spatial.QhullError:
        return np.concatenate([[[*V.mean(axis=0), 0.0]], np.c_[V, np.ones(len(V))]])
    H = V[hull.vertices]
    size = float(np.ptp(H, axis=0).max())
    inside = bool(np.all(hull.equations[:, 3] < -1e-9 * size))  # origin: A 0 + b < 0
    centre = np.zeros(3) if inside else H.mean(axis=0)
    return np.concatenate([[[*centre, 0.0]], np.c_[H, np.ones(len(H))]])


def _hull_bound(size: np.ndarray) -> float:
    return float(np.linalg.norm(size[:, :3], axis=1).max())


def _hull_scale(size: np.ndarray) -> float:
    return 0.5 * float(np.ptp(size[1:, :3], axis=0).min())


def _check_height_field(spec, where: str) -> None:
    """A height field's vertices: its regular grid (row-major, x along the columns, y along
    the rows, centred on the shape origin), (nrow, ncol) of ``grid``, at least 2 x 2."""
    try:
        nrow, ncol = (float(x) for x in spec["grid"])
        V = np.asarray(spec.get("vertices"), dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: grid (nrow, ncol) and vertices (n, 3) expected") from None
    if nrow != int(nrow) or ncol != int(ncol) or nrow < 2 or ncol < 2:
        raise ModelError(f"{where}.grid: expected two integers >= 2, got {spec['grid']!r}")
    nrow, ncol = int(nrow), int(ncol)
    if V.shape != (nrow * ncol, 3) or not np.all(np.isfinite(V)):
        raise ModelError(f"{where}.vertices: expected ({nrow * ncol}, 3) finite numbers "
                         f"(the grid's points), got shape {V.shape}")  # fmt: skip
    sx, sy = float(V[:, 0].max()), float(V[:, 1].max())
    x = np.linspace(-sx, sx, ncol)[None, :] * np.ones((nrow, 1))
    y = np.linspace(-sy, sy, nrow)[:, None] * np.ones((1, ncol))
    tol = 1e-9 * max(sx, sy)
    if not (sx > 0 and sy > 0 and np.allclose(V[:, 0], x.reshape(-1), rtol=0, atol=tol)
            and np.allclose(V[:, 1], y.reshape(-1), rtol=0, atol=tol)):  # fmt: skip
        raise ModelError(f"{where}.vertices: not a regular grid centred on the shape origin "
                         "(row r, column c at x = -sx + 2 sx c / (ncol - 1), "
                         "y = -sy + 2 sy r / (nrow - 1))")  # fmt: skip


@functools.lru_cache(maxsize=16)
def height_field_points(shape) -> np.ndarray:
    """A height field's grid points (nrow ncol, 3) as an array (read-only; computed once
    per shape: a large field has many thousand)."""
    V = np.asarray(shape.vertices, dtype=np.float64)
    V.flags.writeable = False
    return V


def _height_field_size(shape) -> np.ndarray:
    """(half extent along x, along y, base depth): the field spans [-size0, size0] x
    [-size1, size1] and its prisms reach down to z = -size2."""
    V = height_field_points(shape)
    return np.array([V[:, 0].max(), V[:, 1].max(), shape.param("base")])


@dataclass(frozen=True)
class ShapeKind:
    """One shape kind (the table of the module docstring).

    ``fields``: its JSON / keyword fields (name, length or None for a scalar, required);
    ``local_mesh(shape, resolution)``: its triangle mesh in the shape frame; ``check(spec,
    where)``: checks across fields (None: none); ``explicit_mesh``: it carries
    ``vertices`` and ``faces``; ``ground_only``: ground geometry (a plane), refused on a
    body. Collision (:mod:`jaxmbd.contact.narrow_phase`): ``collision_size(shape)`` its
    (3,) size vector (None: the kind does not collide) and ``collision_scale(size)`` its
    smallest dimension (the default contact stiffness's length), ``collision_bound(size)``
    the radius of a ball about the shape origin that holds it (MuJoCo's ``geom_rbound``).
    ``stored_faces``: an explicit mesh's faces are part of its data (a height field's
    follow from its grid)."""

    name: str
    fields: tuple[tuple[str, int | None, bool], ...]
    local_mesh: Callable
    check: Callable | None = None
    explicit_mesh: bool = False
    ground_only: bool = False
    collision_size: Callable | None = None
    collision_scale: Callable = lambda size: float(size[0])  # noqa: E731
    collision_bound: Callable = lambda size: float(size[0])  # noqa: E731
    stored_faces: bool = True

    @property
    def collides(self) -> bool:
        return self.collision_size is not None


_RADIUS, _LENGTH = ("radius", None, True), ("length", None, True)
BOX = ShapeKind("box", (("size", 3, True),), _box_mesh, collision_size=_half_edges_size,
                collision_scale=lambda size: float(size.min()),
                collision_bound=lambda size: float(np.linalg.norm(size)))  # fmt: skip
CYLINDER = ShapeKind(
    "cylinder", (_RADIUS, _LENGTH, ("inner_radius", None, False)), _cylinder_mesh, _check_tube,
    collision_size=_radius_half_length_size,
    collision_scale=lambda size: float(min(size[0], size[1])),
    collision_bound=lambda size: float(np.hypot(size[0], size[1])),
)  # fmt: skip
SPHERE = ShapeKind("sphere", (_RADIUS,), _round_mesh, collision_size=_radius_size)
CAPSULE = ShapeKind("capsule", (_RADIUS, _LENGTH), _round_mesh,
                    collision_size=_radius_half_length_size,
                    collision_bound=lambda size: float(size[0] + size[1]))  # fmt: skip
ELLIPSOID = ShapeKind("ellipsoid", (("size", 3, True),), _ellipsoid_mesh,
                      collision_size=_half_edges_size,
                      collision_scale=lambda size: float(size.min()),
                      collision_bound=lambda size: float(size.max()))  # fmt: skip
CONE = ShapeKind("cone", (_RADIUS, _LENGTH), _cone_mesh)
PYRAMID = ShapeKind("pyramid", (("size", 2, True), ("height", None, True)), _pyramid_mesh)
MESH = ShapeKind("mesh", (), _explicit_mesh, explicit_mesh=True, collision_size=_hull_size,
                 collision_scale=_hull_scale, collision_bound=_hull_bound)  # fmt: skip
#: MuJoCo's height field: a grid of elevations over a rectangle, each cell two triangular
#: prisms down to the base (:mod:`jaxmbd.contact.height_field`).
HFIELD = ShapeKind(
    "hfield", (("grid", 2, True), ("base", None, True)), _height_field_mesh,
    _check_height_field, explicit_mesh=True, collision_size=_height_field_size,
    collision_scale=lambda size: float("inf"), collision_bound=lambda size: float("inf"),
    stored_faces=False,
)  # fmt: skip
PLANE = ShapeKind("plane", (("size", 2, False),), _plane_mesh, ground_only=True,
                  collision_size=_no_size, collision_scale=lambda size: float("inf"),
                  collision_bound=lambda size: float("inf"))  # fmt: skip

#: Every shape kind by name (the files' ``type`` strings).
SHAPE_BY_NAME: dict[str, ShapeKind] = {
    k.name: k
    for k in (BOX, CYLINDER, SPHERE, CAPSULE, ELLIPSOID, CONE, PYRAMID, MESH, HFIELD, PLANE)
}
SHAPE_KINDS = tuple(SHAPE_BY_NAME)


def shape_kind(name: str) -> ShapeKind:
    """The record of the shape kind ``name``."""
    try:
        return SHAPE_BY_NAME[name]
    except KeyError:
        raise ModelError(f"unknown shape type {name!r}; known: {list(SHAPE_KINDS)}") from None
