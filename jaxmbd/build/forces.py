"""Applied force elements: any :class:`~jaxmbd.forces.AbstractForce`, spring-dampers and
bushings."""

from __future__ import annotations

import dataclasses
import math
from typing import Self

import numpy as np

from ..compiled.host_arrays import device_array
from ..errors import ModelError
from ..forces import AbstractForce, SpringDamper
from ..forces.bushing import Bushing
from ..model._values import (
    MAX_MAGNITUDE,
    _numbers,
    _rotation_matrix,
    _short,
    _vec3,
)


class _ForceBuilder:
    """The force methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_force(self, force: AbstractForce) -> Self:
        """Add an applied force element (see :mod:`jaxmbd.forces`)."""
        if not isinstance(force, AbstractForce):
            raise ModelError(f"add_force: expected a jaxmbd force element, got {type(force)}")
        for name in force.output_names:
            if self._reports_as(name):
                raise ModelError(f"add_force: force '{name}': duplicate force name")
        self._forces.append(force)
        return self

    def _reports_as(self, name: str) -> bool:
        """Whether a force element added so far reports in ``sol.forces`` as ``name``."""
        return any(name in f.output_names for f in self._forces)

    def _resolved_forces(self) -> tuple[AbstractForce, ...]:
        """``_forces`` with the body indices of the builder's own elements (spring-dampers,
        bushings) resolved now: one added before a later body keeps pointing at its body
        (and the ground at nb)."""
        return tuple(
            dataclasses.replace(f, **{k: self.body_index(b) for k, b in bodies.items()})
            if (bodies := self._force_bodies.get(k)) else f
            for k, f in enumerate(self._forces)
        )  # fmt: skip

    def spring_damper(
        self, name, *, body_i, point_i, body_j, point_j, stiffness, damping=0.0, rest_length
    ):
        """Translational spring-damper between two points (global, initial configuration);
        ``sol.forces[name]`` reports its tension, length and rate."""
        w = f"force '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"spring_damper name: expected a non-empty string, got {name!r}")
        if self._reports_as(name):
            raise ModelError(f"{w}: duplicate force name")
        for key, val in (
            ("stiffness", stiffness),
            ("damping", damping),
            ("rest_length", rest_length),
        ):
            if not (
                isinstance(val, int | float)
                and not isinstance(val, bool)
                and math.isfinite(val)
                and abs(val) <= MAX_MAGNITUDE
                and val >= 0
            ):
                raise ModelError(f"{w}.{key}: must be a non-negative number, got {val!r}")
        self._force_bodies[len(self._forces)] = {"body_i": body_i, "body_j": body_j}
        return self.add_force(
            SpringDamper(
                body_i=self.body_index(body_i),
                body_j=self.body_index(body_j),
                s_bar_p_i=device_array(self._local_point(body_i, point_i, where=f"{w}.point_i")),
                s_bar_q_j=device_array(self._local_point(body_j, point_j, where=f"{w}.point_j")),
                stiffness=device_array(float(stiffness)),
                damping=device_array(float(damping)),
                rest_length=device_array(float(rest_length)),
                name=name,
            )
        )

    def bushing(self, name, body_i, body_j, point, *, stiffness, damping=None, axes=None):
        """A linear 6-DOF spring-damper between ``body_i`` and ``body_j`` (either may be
        "ground") at the global ``point`` of the drawn pose, with global ``axes`` (a 3x3
        rotation, columns = the bushing's x, y, z axes; None: the global axes):
        ``stiffness`` and ``damping`` (6,) along and about those axes, translation first
        (N/m, N m/rad; N s/m, N m s/rad; damping None: zero). Small rotations are measured
        by the rotation vector of the relative rotation (:mod:`jaxmbd.forces.bushing`)."""
        w = f"bushing '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"bushing name: expected a non-empty string, got {name!r}")
        if self._reports_as(name):
            raise ModelError(f"{w}: duplicate force name")
        if body_i == body_j:
            raise ModelError(f"{w}: body_i and body_j are both {body_i!r}")
        E = np.eye(3)
        if axes is not None:
            E = _rotation_matrix(axes, where=f"{w}.axes")[0]
        frames = {}
        for body, side in ((body_i, "i"), (body_j, "j")):
            _, A = self._frame(body, where=f"{w}.body_{side}")
            frames[f"s_bar_{side}"] = self._local_point(body, point, where=f"{w}.point")
            frames[f"frame_{side}"] = A.T @ E
        return self._add_bushing(name, body_i, body_j, **frames, stiffness=stiffness,
                                 damping=damping)  # fmt: skip

    def _add_bushing(self, name, body_i, body_j, *, s_bar_i, s_bar_j, frame_i, frame_j,
                     stiffness, damping):  # fmt: skip
        """A bushing from its body-frame points and axes (model files, :func:`save_model`)."""
        w = f"bushing '{name}'"
        values = {"s_bar_i": _vec3(s_bar_i, where=f"{w}.s_bar_i"),
                  "s_bar_j": _vec3(s_bar_j, where=f"{w}.s_bar_j")}  # fmt: skip
        for key, value in (("stiffness", stiffness), ("damping", damping)):
            x = np.zeros(6) if value is None else _numbers(value, where=f"{w}.{key}",
                                                           expected="6 numbers")  # fmt: skip
            if x.shape != (6,) or np.any(x < 0):
                raise ModelError(
                    f"{w}.{key}: expected 6 non-negative numbers (x, y, z, rx, ry, rz), got "
                    f"{_short(value)}"
                )
            values[key] = x
        for key, value in (("frame_i", frame_i), ("frame_j", frame_j)):
            values[key] = _rotation_matrix(value, where=f"{w}.{key}")[0]
        self._force_bodies[len(self._forces)] = {"body_i": body_i, "body_j": body_j}
        return self.add_force(
            Bushing(
                name=name, body_i=self.body_index(body_i), body_j=self.body_index(body_j),
                **{k: device_array(v, np.float64) for k, v in values.items()},
            )
        )  # fmt: skip
