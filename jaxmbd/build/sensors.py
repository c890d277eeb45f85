"""Markers (:mod:`jaxmbd.markers`) and sensors (:mod:`jaxmbd.sensors`)."""

from __future__ import annotations

from typing import Self

import jax.numpy as jnp
import numpy as np

from .._values import (
    _numbers,
    _rotation_matrix,
    _vec3,
)
from ..errors import ModelError
from ..model import GROUND
from ..sensors import SENSOR_KINDS, Sensors, sensor_dim


class _SensorBuilder:
    """The marker and sensor methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_marker(self, name, body, point, axes=None) -> Self:
        """A frame fixed on ``body``, read as ``sol.markers[name]`` (position, velocity,
        acceleration, orientation, angular velocity and acceleration over time;
        :mod:`jaxmbd.markers`) and usable as a body sensor's site
        (``add_sensor(..., marker=name)``).

        ``point``: global, at the initial configuration (as drawn, like joint points);
        ``axes``: the marker's x, y, z axes as the columns of a global 3x3 rotation at that
        configuration (None: the body's own axes). Both are stored in the body frame, so
        they move with the body when :meth:`set_joint_state` poses the model."""
        where = f"marker '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"marker name: expected a non-empty string, got {name!r}")
        if any(m["name"] == name for m in self._markers):
            raise ModelError(f"{where}: duplicate marker name")
        if body == GROUND:
            raise ModelError(f"{where}.body: the ground does not move; a marker goes on a "
                             "moving body (a point on the ground is a constant)")  # fmt: skip
        r, A = self._frame(body, where=f"{where}.body")
        s = A.T @ (_vec3(point, where=f"{where}.point") - r)
        F = np.eye(3) if axes is None else A.T @ _rotation_matrix(axes, where=f"{where}.axes")[0]
        self._markers.append(dict(name=name, body=body, point=s, axes=F))
        return self

    def add_sensor(
        self, name, *, kind, joint=None, body=None, site=(0.0, 0.0, 0.0), frame=None,
        noise=0.0, marker=None,
    ) -> Self:  # fmt: skip
        """A sensor read as ``sol.sensors[name]`` (T, dim) (:mod:`jaxmbd.sensors`).

        ``kind``: "joint_position", "joint_velocity", "joint_reaction_force" or
        "joint_reaction_torque" (on ``joint``, any joint with coordinates; reactions in its
        frame on body j), or "body_position", "body_quaternion", "body_linear_velocity",
        "body_angular_velocity", "velocimeter", "gyro" or "accelerometer" (on ``body``, at
        the site ``site``: a point in the body frame, from the centre of mass; ``frame``:
        the site's axes as the columns of a 3x3 rotation in body coordinates, None: the
        body's own). ``marker``: instead of ``body``, ``site`` and ``frame``, a marker of
        :meth:`add_marker` (its body, point and axes). ``noise``: the standard deviation of
        Gaussian noise, applied when :func:`~jaxmbd.simulate` gets ``sensor_key=``. Sensors
        are listed, and a policy observes them, in the order they are added."""
        where = f"sensor '{name}'"
        if marker is not None:
            if body is not None or frame is not None or tuple(np.ravel(site)) != (0, 0, 0):
                raise ModelError(f"{where}: marker= gives the sensor's body, site and frame; "
                                 "leave body=, site= and frame= out")  # fmt: skip
            found = [m for m in self._markers if m["name"] == marker]
            if not found:
                raise ModelError(
                    f"{where}.marker: no marker {marker!r}; markers are "
                    f"{[m['name'] for m in self._markers]} (add_marker first)"
                )
            body, site, frame = found[0]["body"], found[0]["point"], found[0]["axes"]
        if not isinstance(name, str) or not name:
            raise ModelError(f"sensor name: expected a non-empty string, got {name!r}")
        if any(s["name"] == name for s in self._sensors):
            raise ModelError(f"{where}: duplicate sensor name")
        if kind not in SENSOR_KINDS:
            raise ModelError(f"{where}.kind: expected one of {tuple(SENSOR_KINDS)}, got {kind!r}")
        spec = dict(name=name, kind=kind, joint=None, body=None, site=np.zeros(3),
                    frame=np.eye(3))  # fmt: skip
        if SENSOR_KINDS[kind] == "joint":
            if body is not None or frame is not None or tuple(np.ravel(site)) != (0, 0, 0):
                raise ModelError(f"{where}: kind {kind!r} is read at its joint; body=, site= "
                                 "and frame= are options of body sensors")  # fmt: skip
            known = [j.name for j in self._joints]
            if joint not in known:
                raise ModelError(f"{where}.joint: no joint {joint!r}; joints with coordinates "
                                 f"are {known}")  # fmt: skip
            spec["joint"] = joint
        else:
            if joint is not None:
                raise ModelError(f"{where}: kind {kind!r} is read on a body (body=), not joint=")
            if body == GROUND:
                raise ModelError(f"{where}.body: the ground does not move; give a moving body")
            if body not in [b.name for b in self._bodies]:
                raise ModelError(f"{where}.body: unknown body {body!r}; known bodies: "
                                 f"{[b.name for b in self._bodies]}")  # fmt: skip
            spec["body"] = body
            spec["site"] = _vec3(site, where=f"{where}.site")
            if frame is not None:
                spec["frame"] = _rotation_matrix(frame, where=f"{where}.frame")[0]
        sigma = _numbers(noise, where=f"{where}.noise", expected="a number")
        if sigma.shape != () or not sigma >= 0:
            raise ModelError(f"{where}.noise: expected a non-negative number, got {noise!r}")
        spec["noise"] = float(sigma)
        self._sensors.append(spec)
        return self

    def _sensor_element(self, index: dict[str, int], joints):
        """The :class:`~jaxmbd.sensors.Sensors` of the model (None without sensors)."""
        if not self._sensors:
            return None
        kinds = {d.name: d.kind for d in joints}
        return Sensors(
            sensor_names=tuple(s["name"] for s in self._sensors),
            kinds=tuple(s["kind"] for s in self._sensors),
            dims=tuple(sensor_dim(s["kind"], kinds.get(s["joint"])) for s in self._sensors),
            bodies=tuple(-1 if s["body"] is None else index[s["body"]] for s in self._sensors),
            joints=tuple(s["joint"] for s in self._sensors),
            site=jnp.asarray(np.stack([s["site"] for s in self._sensors])),
            frame=jnp.asarray(np.stack([s["frame"] for s in self._sensors])),
            noise=jnp.asarray([s["noise"] for s in self._sensors], dtype=jnp.float64),
        )
