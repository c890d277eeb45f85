"""One visual shape in a body frame (:class:`Shape`), made from its JSON form or by the
constructors (:func:`box`, :func:`cylinder`, ...; the table of :mod:`jaxmbd.geometry`), and
its mass properties as a homogeneous solid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from ..errors import ModelError
from ._shape_kinds import SHAPE_BY_NAME, SHAPE_KINDS, shape_kind

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

    def __hash__(self) -> int:
        # computed once: a model's shapes are static metadata, hashed at every dispatch of
        # a compiled program, and a mesh or a height field holds many thousand vertices
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached

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
            out[key] = list(val) if key == "size" or len(val) > 1 else val[0]
        if shape_kind(self.kind).explicit_mesh:
            out["vertices"] = [list(v) for v in self.vertices]
            if self.faces:  # a height field's follow from its grid
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


def _mesh_data(spec, where: str, *, faces: bool = True):
    """(vertices, faces) of a mesh's JSON form, checked; ``faces=False``: the vertices only
    (a height field's faces follow from its grid)."""
    if not faces:
        V = np.asarray(spec["vertices"], dtype=np.float64)  # checked by the kind
        return tuple(map(tuple, V.tolist())), ()
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
    # Python floats and ints (tolist), as hashable rows
    return tuple(map(tuple, V.tolist())), tuple(map(tuple, F.astype(np.int64).tolist()))


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
        vertices, faces = _mesh_data(spec, where, faces=record.stored_faces)
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
        _spec("mesh", pos, A, None, color, collide, vertices=np.asarray(vertices),
              faces=np.asarray(faces))
    )  # fmt: skip


def height_field(heights, size, base, *, pos=(0.0, 0.0, 0.0), A=None, color=None,
                 collide=True) -> Shape:  # fmt: skip
    """A height field (MuJoCo's ``hfield``): elevations ``heights`` (nrow, ncol) over the
    rectangle [-size[0], size[0]] x [-size[1], size[1]] of the shape frame (column c at
    x = -size[0] + 2 size[0] c / (ncol - 1), row r at y = -size[1] + 2 size[1] r /
    (nrow - 1)), each cell two triangular prisms down to z = -``base``."""
    H = np.asarray(heights, dtype=np.float64)
    if H.ndim != 2:
        raise ModelError(f"height_field.heights: expected (nrow, ncol), got shape {H.shape}")
    nrow, ncol = H.shape
    x = np.linspace(-size[0], size[0], ncol)
    y = np.linspace(-size[1], size[1], nrow)
    X, Y = np.meshgrid(x, y)
    V = np.stack([X.reshape(-1), Y.reshape(-1), H.reshape(-1)], axis=1)
    return make_shape(
        _spec("hfield", pos, A, None, color, collide, grid=[nrow, ncol], base=base, vertices=V)
    )


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


def _local_mesh(shape: Shape, n: int) -> tuple[np.ndarray, np.ndarray]:
    return shape_kind(shape.kind).local_mesh(shape, n)


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
