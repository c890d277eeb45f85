"""The kinds of a spatial tendon's path elements (MuJoCo's ``<spatial>`` children: ``<site>``,
a ``<geom>`` to wrap around, a sphere or a cylinder, and ``<pulley>``; MuJoCo documentation,
XML reference "tendon/spatial"): one record each, which says where the kind may stand in a
path, reads its tuple of :meth:`~jaxmbd.ModelBuilder.add_spatial_tendon` and, for a
wrapping geom, does the kind's part of MuJoCo's ``mju_wrap`` (engine_util_misc.c): the
plane the path wraps in, and on a cylinder the helix's rise along the axis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..model._values import _numbers, _rotation_matrix

#: MuJoCo's mjMINVAL: below it, a length or determinant is taken as zero.
MINVAL = 1e-15


def _norm(v):
    """|v| with a finite gradient at v = 0 (zero there)."""
    sq = jnp.sum(v * v, -1)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def _unit(v):
    n = _norm(v)
    return v / jnp.where(n < MINVAL, 1.0, n)[..., None]


#: ``place(where, body, point)``: a global point at the initial configuration in
#: ``body``'s frame; ``axes(where, body)``: the body's rotation there.
Place = Callable[[str, str, object], np.ndarray]
Axes = Callable[[str, str], np.ndarray]


def _element(**fields) -> dict:
    """A path element's fields, with the defaults of the fields its kind does not set."""
    out = dict(body=None, point=np.zeros(3), frame=np.eye(3), radius=0.0, divisor=1.0, side=None)
    out.update(fields)
    return out


@dataclass(frozen=True)
class PathElementKind:
    """One kind of path element. ``name``: the first entry of its tuple; ``usage``: the
    tuple it takes (for errors); ``sizes``: how many entries may follow the name.
    ``passes``: a point the path passes through (a site: a path starts and ends at one, and
    one stands on each side of a wrapping geom and after a pulley); ``wraps``: a geom the
    path wraps around between the sites before and after it; ``divides``: the segments
    after it count 1/divisor."""

    name: ClassVar[str]
    usage: ClassVar[str]
    sizes: ClassVar[tuple[int, ...]]
    passes: ClassVar[bool] = False
    wraps: ClassVar[bool] = False
    divides: ClassVar[bool] = False

    def read(self, where: str, rest: list, place: Place, axes: Axes) -> dict:
        """The element's fields (``body``, ``point``, ``frame``, ``radius``, ``divisor``,
        ``side``) from the entries ``rest`` after its name."""
        raise NotImplementedError


@dataclass(frozen=True)
class Site(PathElementKind):
    """``("site", body, point)``: a site the path passes through."""

    name: ClassVar[str] = "site"
    usage: ClassVar[str] = "('site', body, point)"
    sizes: ClassVar[tuple[int, ...]] = (2,)
    passes: ClassVar[bool] = True

    def read(self, where, rest, place, axes):
        return _element(body=rest[0], point=place(where, rest[0], rest[1]))


@dataclass(frozen=True)
class Pulley(PathElementKind):
    """``("pulley", divisor)``: the segments after it count 1/divisor."""

    name: ClassVar[str] = "pulley"
    usage: ClassVar[str] = "('pulley', divisor)"
    sizes: ClassVar[tuple[int, ...]] = (1,)
    divides: ClassVar[bool] = True

    def read(self, where, rest, place, axes):
        d = _numbers(rest[0], where=f"{where}.divisor", expected="a positive number")
        if d.shape != () or not d > 0:
            raise ModelError(f"{where}.divisor: expected a positive number, got {rest[0]!r}")
        return _element(divisor=float(d))


@dataclass(frozen=True)
class WrapGeom(PathElementKind):
    """A geom the path wraps around: ``(name, body, centre, [axes,] radius[, side])``,
    ``side=(body, point)`` a side site or None. Its frame in its body's frame comes from
    :meth:`geom_frame`; :meth:`plane_axes` and :meth:`rise` are its part of ``mju_wrap``."""

    wraps: ClassVar[bool] = True

    def geom_frame(self, where, rest, body_axes):
        """The geom's axes in its body's frame (3, 3) from the entries between the centre
        and the radius; ``body_axes``: the body's rotation at the initial configuration."""
        raise NotImplementedError

    def plane_axes(self, p0, p1):
        """(ax0, ax1): the plane, in the geom's frame, that the path from p0 to p1 (in that
        frame) wraps in."""
        raise NotImplementedError

    def rise(self, p0, p1, w0, w1, arc, l0, l1):
        """(w0, w1, arc) with the tangent points lifted off the wrapping plane and the arc's
        length along the surface (``l0``, ``l1``: the in-plane lengths of the straight
        segments)."""
        return w0, w1, arc

    def read(self, where, rest, place, axes):
        n = self.sizes[0]
        body, centre = rest[0], rest[1]
        point = place(where, body, centre)
        frame = self.geom_frame(where, rest[2 : n - 1], axes(f"{where}.body", body))
        radius = _numbers(rest[n - 1], where=f"{where}.radius", expected="a positive number")
        if radius.shape != () or not radius > 0:
            raise ModelError(f"{where}.radius: expected a positive number, got {rest[n - 1]!r}")
        side = None
        if len(rest) == n + 1 and rest[n] is not None:
            side = rest[n]
            if not (isinstance(side, tuple | list) and len(side) == 2):
                raise ModelError(f"{where}.side: expected (body, point), got {side!r}")
            side = (side[0], place(f"{where}.side", side[0], side[1]))
        return _element(body=body, point=point, frame=frame,
                        radius=float(radius), side=side)  # fmt: skip


@dataclass(frozen=True)
class Sphere(WrapGeom):
    """``("sphere", body, centre, radius[, side])``: the path wraps on the great circle in
    the plane of the centre and its two ends (``mju_wrap``'s sphere branch)."""

    name: ClassVar[str] = "sphere"
    usage: ClassVar[str] = "('sphere', body, centre, radius[, (side body, point)])"
    sizes: ClassVar[tuple[int, ...]] = (3, 4)

    def geom_frame(self, where, entries, body_axes):
        return body_axes.T

    def plane_axes(self, p0, p1):
        ax0 = _unit(p0)
        normal = jnp.cross(p0, p1)
        parallel = _norm(normal) < MINVAL
        big = jnp.argmax(jnp.abs(ax0))  # MuJoCo's tie-breaking: the first largest component
        second = jnp.ones(3).at[big].set(0.0)
        normal = _unit(jnp.where(parallel, jnp.cross(ax0, second), normal))
        return ax0, _unit(jnp.cross(normal, ax0))


@dataclass(frozen=True)
class Cylinder(WrapGeom):
    """``("cylinder", body, centre, axes, radius[, side])`` (``axes``: the cylinder's frame
    as a 3x3 rotation, axis third, or its axis): the path wraps on a helix about the axis,
    its projection a circle's arc in the plane normal to it (``mju_wrap``'s cylinder
    branch)."""

    name: ClassVar[str] = "cylinder"
    usage: ClassVar[str] = "('cylinder', body, centre, axes, radius[, (side body, point)])"
    sizes: ClassVar[tuple[int, ...]] = (4, 5)

    def geom_frame(self, where, entries, body_axes):
        given = np.asarray(entries[0], dtype=np.float64)
        if given.shape == (3,):
            return body_axes.T @ _frame_of_axis(given, where=f"{where}.axes")
        return body_axes.T @ _rotation_matrix(given, where=f"{where}.axes")[0]

    def plane_axes(self, p0, p1):
        eye = jnp.eye(3, dtype=p0.dtype)
        return eye[0], eye[1]

    def rise(self, p0, p1, w0, w1, arc, l0, l1):
        total = l0 + arc + l1
        total = jnp.where(total > 0, total, 1.0)
        z0 = p0[2] + (p1[2] - p0[2]) * l0 / total
        z1 = p0[2] + (p1[2] - p0[2]) * (l0 + arc) / total
        return w0.at[2].set(z0), w1.at[2].set(z1), _norm(jnp.stack([arc, z1 - z0]))


def _frame_of_axis(axis, *, where):
    """A right-handed frame whose third column is the unit ``axis``."""
    n = np.linalg.norm(axis)
    if not (np.all(np.isfinite(axis)) and n > 0 and np.isfinite(n)):
        raise ModelError(f"{where}: expected a non-zero axis, got {axis!r}")
    z = axis / n
    helper = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


SITE, SPHERE, CYLINDER, PULLEY = Site(), Sphere(), Cylinder(), Pulley()

#: The path element kinds by name (the first entry of a path element's tuple).
PATH_ELEMENT_KINDS: dict[str, PathElementKind] = {
    k.name: k for k in (SITE, SPHERE, CYLINDER, PULLEY)
}


def path_element_kind(name, *, where: str = "path element") -> PathElementKind:
    """The record of the path element kind ``name``."""
    kind = PATH_ELEMENT_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ModelError(f"{where}: kind must be 'site', 'sphere', 'cylinder' or 'pulley', "
                         f"got {name!r}")  # fmt: skip
    return kind
