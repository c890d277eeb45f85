"""Visual geometry of bodies: shapes with a size and a local pose, for drawing only.

A body carries zero or more :class:`Shape` objects in its own (centre-of-mass) frame. They
are static metadata of the :class:`~jaxmbd.model.Model` (hashable, not array leaves): they
play no part in the dynamics, so ``jax.grad``, ``vmap`` and ``stack_models`` never see them.
A body without shapes is drawn as the homogeneous **box of equal inertia**
(:func:`equivalent_box`), computed from the model's current mass and inertia, so a model
edited with ``eqx.tree_at`` is drawn with its edited inertia.

Shape types and their fields (lengths in model units; JSON keys in parentheses):

========== =================================================================================
box        ``size`` = (lx, ly, lz) full edge lengths along the shape's x, y, z
cylinder   ``radius``, ``length`` along z, centred; optional ``inner_radius`` (a tube)
sphere     ``radius``
capsule    ``radius``, ``length`` of the cylindrical part along z (hemispherical caps)
cone       ``radius`` of the base (centred at the shape origin), apex at z = ``length``
pyramid    ``size`` = (lx, ly) of the rectangular base (centred at the origin), apex at
           z = ``height``
mesh       ``vertices`` (n, 3) and triangular ``faces`` (k, 3) of 0-based vertex indices
========== =================================================================================

The pose: ``pos`` (shape origin in the body frame, default 0) and either ``A`` (3x3 rotation,
shape to body) or ``axis`` (the body-frame direction of the shape's z axis), default identity.
``color`` is an optional matplotlib/CSS colour string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import ModelError

SHAPE_KINDS = ("box", "cylinder", "sphere", "capsule", "cone", "pyramid", "mesh")

# JSON / keyword fields of each kind: (name, count) with count None for a scalar
_FIELDS: dict[str, tuple[tuple[str, int | None, bool], ...]] = {
    # (field, length or None for scalar, required)
    "box": (("size", 3, True),),
    "cylinder": (("radius", None, True), ("length", None, True), ("inner_radius", None, False)),
    "sphere": (("radius", None, True),),
    "capsule": (("radius", None, True), ("length", None, True)),
    "cone": (("radius", None, True), ("length", None, True)),
    "pyramid": (("size", 2, True), ("height", None, True)),
    "mesh": (),
}
_POSE_FIELDS = ("type", "pos", "A", "axis", "color", "vertices", "faces")


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
        if self.kind == "mesh":
            out["vertices"] = [list(v) for v in self.vertices]
            out["faces"] = [list(f) for f in self.faces]
        if any(self.pos):
            out["pos"] = list(self.pos)
        if not np.allclose(self.A, np.eye(3), atol=0, rtol=0):
            out["A"] = self.A.tolist()
        if self.color is not None:
            out["color"] = self.color
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


def make_shape(spec, *, where: str = "shape") -> Shape:
    """A :class:`Shape` from a dict (the JSON form, ``type`` plus fields) or a Shape."""
    if isinstance(spec, Shape):
        return spec
    if not isinstance(spec, Mapping):
        raise ModelError(f"{where}: expected a shape object with a 'type', got {spec!r}")
    kind = spec.get("type")
    if kind not in SHAPE_KINDS:
        raise ModelError(f"{where}.type: unknown shape type {kind!r}; known: {list(SHAPE_KINDS)}")
    known = {name for name, _, _ in _FIELDS[kind]} | set(_POSE_FIELDS)
    extra = sorted(set(spec) - known)
    if extra:
        raise ModelError(
            f"{where}: unknown field(s) {extra} for a {kind}; allowed: {sorted(known - {'type'})}"
        )
    params = []
    for name, count, required in _FIELDS[kind]:
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
    if kind == "cylinder" and "inner_radius" in spec:
        if float(spec["inner_radius"]) >= float(spec["radius"]):
            raise ModelError(f"{where}.inner_radius: must be smaller than radius")
    vertices: tuple = ()
    faces: tuple = ()
    if kind == "mesh":
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
    return Shape(
        kind=kind,
        params=tuple(params),
        pos=tuple(float(x) for x in pos),
        rot=tuple(float(x) for x in A.reshape(-1)),
        color=color,
        vertices=vertices,
        faces=faces,
    )


def box(size, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None) -> Shape:
    """A box with full edge lengths ``size`` = (lx, ly, lz)."""
    return make_shape(_spec("box", pos, A, axis, color, size=list(size)))


def cylinder(radius, length, *, inner_radius=None, pos=(0.0, 0.0, 0.0), A=None, axis=None,
             color=None) -> Shape:  # fmt: skip
    """A cylinder (a tube with ``inner_radius``) of ``length`` along its z axis, centred."""
    extra = {} if inner_radius is None else {"inner_radius": inner_radius}
    return make_shape(_spec("cylinder", pos, A, axis, color, radius=radius, length=length, **extra))


def sphere(radius, *, pos=(0.0, 0.0, 0.0), color=None) -> Shape:
    return make_shape(_spec("sphere", pos, None, None, color, radius=radius))


def capsule(radius, length, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None) -> Shape:
    return make_shape(_spec("capsule", pos, A, axis, color, radius=radius, length=length))


def cone(radius, length, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None) -> Shape:
    """A cone with its base centred at ``pos`` and its apex ``length`` along ``axis``."""
    return make_shape(_spec("cone", pos, A, axis, color, radius=radius, length=length))


def pyramid(size, height, *, pos=(0.0, 0.0, 0.0), A=None, axis=None, color=None) -> Shape:
    """A pyramid on a rectangular base ``size`` = (lx, ly) centred at ``pos``."""
    return make_shape(_spec("pyramid", pos, A, axis, color, size=list(size), height=height))


def mesh(vertices, faces, *, pos=(0.0, 0.0, 0.0), A=None, color=None) -> Shape:
    return make_shape(
        _spec("mesh", pos, A, None, color, vertices=np.asarray(vertices).tolist(),
              faces=np.asarray(faces).tolist())
    )  # fmt: skip


def _spec(kind, pos, A, axis, color, **fields):
    spec = {"type": kind, "pos": list(pos), **fields}
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


# ----------------------------------------------------------------------------- default


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


def body_shapes(model, b: int) -> tuple[Shape, ...]:
    """The shapes of body ``b``: its own, or the box of equal inertia."""
    shapes = getattr(model, "shapes", ()) or ()
    own = shapes[b] if b < len(shapes) else ()
    if own:
        return own
    return (equivalent_box(float(np.asarray(model.mass[b])), np.asarray(model.inertia[b])),)


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
    kind = shape.kind
    if kind == "box":
        lx, ly, lz = shape.param("size")
        c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
        V = 0.5 * c * np.array([lx, ly, lz])
        F = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
             (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]  # fmt: skip
        return V, np.asarray(F)
    if kind == "cylinder":
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
    if kind in ("sphere", "capsule"):
        R = shape.param("radius")
        L = shape.param("length", 0.0) if kind == "capsule" else 0.0
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
    if kind == "cone":
        R, L = shape.param("radius"), shape.param("length")
        V = np.concatenate([_ring(R, 0.0, n), [[0, 0, 0], [0, 0, L]]])
        F = _fan(n, 0, n) + _fan(n + 1, 0, n, flip=True)
        return V, np.asarray(F)
    if kind == "pyramid":
        (lx, ly), H = shape.param("size"), shape.param("height")
        V = np.array([[-lx / 2, -ly / 2, 0], [lx / 2, -ly / 2, 0], [lx / 2, ly / 2, 0],
                      [-lx / 2, ly / 2, 0], [0, 0, H]])  # fmt: skip
        F = [(0, 2, 1), (0, 3, 2), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)]
        return V, np.asarray(F)
    if kind == "mesh":
        return np.asarray(shape.vertices, float), np.asarray(shape.faces, int)
    raise ModelError(f"unknown shape type {kind!r}")  # pragma: no cover


def extent(model) -> float:
    """A length scale of the model's drawing (largest shape dimension at the initial pose)."""
    size = 0.0
    for b in range(model.nb):
        for s in body_shapes(model, b):
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
