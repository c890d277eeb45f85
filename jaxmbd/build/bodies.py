"""Bodies: their mass, inertia, pose and velocity as drawn, and their frames."""

from __future__ import annotations

import logging
from typing import Self

import numpy as np

from ..errors import ModelError
from ..geometry import make_shapes, shape_kind
from ..model import GROUND
from ..model._values import (
    _frame_from_axes,
    _inertia,
    _numbers,
    _rotation_matrix,
    _short,
    _unit,
    _vec3,
)
from .specs import _BodySpec

logger = logging.getLogger("jaxmbd")


class _BodyBuilder:
    """The body methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_body(
        self,
        name: str,
        *,
        mass: float,
        inertia,
        r=(0.0, 0.0, 0.0),
        A=None,
        axes=None,
        rdot=(0.0, 0.0, 0.0),
        omega=(0.0, 0.0, 0.0),
        shapes=None,
    ) -> Self:
        """Add a rigid body. ``A`` (3x3, body to global) or ``axes`` = (x, y) global axes.

        ``r`` is the centre of mass, ``inertia`` is about the centre of mass in the body frame
        (3 principal moments or a 3x3 matrix), ``omega`` is in the body frame. ``shapes``:
        visual geometry in the body frame (:mod:`jaxmbd.geometry` shapes or their dicts);
        none = a stick figure joining its joint points (:func:`jaxmbd.geometry.default_shapes`).
        """
        where = f"body '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"body name must be a non-empty string, got {name!r}")
        if name == GROUND:
            raise ModelError(f"{where}: the name '{GROUND}' is reserved for the fixed frame")
        if any(b.name == name for b in self._bodies):
            raise ModelError(f"{where}: duplicate body name")
        m = _numbers(mass, where=f"{where}.mass", expected="a number")
        if m.shape != ():
            raise ModelError(f"{where}.mass: expected a number, got {_short(mass)}")
        m = float(m)
        if m <= 0:
            raise ModelError(f"{where}.mass: must be positive and finite, got {mass!r}")
        J = _inertia(inertia, where=f"{where}.inertia")
        if A is not None and axes is not None:
            raise ModelError(f"{where}: give either A or axes, not both")
        if axes is not None:
            R = _frame_from_axes(axes[0], axes[1], where=f"{where}.axes")
        elif A is not None:
            R, moved = _rotation_matrix(A, where=f"{where}.A")
            if moved > 1e-12:
                logger.info("orthonormalised A of %s (changed by %.2e)", where, moved)
        else:
            R = np.eye(3)
        body_shapes = make_shapes(shapes, where=f"{where}.shapes")
        if any(shape_kind(s.kind).ground_only for s in body_shapes):
            raise ModelError(f"{where}.shapes: a plane is ground geometry (add_ground_plane)")
        self._bodies.append(
            _BodySpec(
                name,
                m,
                J,
                _vec3(r, where=f"{where}.r"),
                R,
                _vec3(rdot, where=f"{where}.rdot"),
                _vec3(omega, where=f"{where}.omega"),
                body_shapes,
            )
        )
        return self

    def set_shapes(self, body: str, shapes) -> Self:
        """Replace the visual shapes of ``body`` (see :mod:`jaxmbd.geometry`)."""
        for b in self._bodies:
            if b.name == body:
                b.shapes = make_shapes(shapes, where=f"body '{body}'.shapes")
                if any(shape_kind(s.kind).ground_only for s in b.shapes):
                    raise ModelError(f"body '{body}'.shapes: a plane is ground geometry")
                return self
        raise ModelError(
            f"set_shapes: unknown body {body!r}; known: {[b.name for b in self._bodies]}"
        )

    def _frame(self, body: str, *, where: str) -> tuple[np.ndarray, np.ndarray]:
        if body == GROUND:
            return np.zeros(3), np.eye(3)
        for b in self._bodies:
            if b.name == body:
                return b.r, b.A
        known = [b.name for b in self._bodies] + [GROUND]
        raise ModelError(f"{where}: unknown body {body!r}; known bodies: {known}")

    def _local_point(self, body, point, *, where):
        r, A = self._frame(body, where=where)
        return A.T @ (_vec3(point, where=where) - r)

    def _local_dir(self, body, direction, *, where):
        _, A = self._frame(body, where=where)
        return A.T @ _unit(direction, where=where)

    def body_index(self, name: str) -> int:
        for k, b in enumerate(self._bodies):
            if b.name == name:
                return k
        if name == GROUND:
            return len(self._bodies)
        raise ModelError(f"unknown body {name!r}; known bodies: {[b.name for b in self._bodies]}")
