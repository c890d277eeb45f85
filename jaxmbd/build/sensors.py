"""Markers (:mod:`jaxmbd.model.markers`) and sensors (:mod:`jaxmbd.sensors`)."""

from __future__ import annotations

from typing import Self

import numpy as np

from ..compiled.host_arrays import device_array
from ..errors import ModelError
from ..geometry._ray_cast import RAY_FIELDS, RAY_SHAPES
from ..geometry._ray_zone import ZONE_SHAPES
from ..model import GROUND
from ..model._values import (
    _numbers,
    _rotation_matrix,
    _vec3,
)
from ..sensors import SENSOR_KINDS, Sensors, sensor_dim, sensor_kind
from ..sensors._kinds import (
    ActuatorSet,
    FrameReference,
    RayTargets,
    SubtreeBodies,
    TouchZone,
    WeldedPart,
)
from ..sensors.tendon_sensors import SensorTendon


class _SensorBuilder:
    """The marker and sensor methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_marker(self, name, body, point, axes=None) -> Self:
        """A frame fixed on ``body``, read as ``sol.markers[name]`` (position, velocity,
        acceleration, orientation, angular velocity and acceleration over time;
        :mod:`jaxmbd.model.markers`) and usable as a body sensor's site
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
        noise=0.0, marker=None, reference=None, subtree=None, zone=None, actuator=None,
        parent=None, tendon=None, part=None, targets=None,
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
        are listed, and a policy observes them, in the order they are added.

        MuJoCo's further kinds (:mod:`jaxmbd.sensors`): "body_x_axis", "body_y_axis",
        "body_z_axis"; the frame kinds (position, quaternion, axes, linear and angular
        velocity) also on ``body="ground"`` (a fixed frame, ``site`` and ``frame`` global)
        and against a ``reference`` frame, a dict ``{"body": ..., "site": ..., "frame":
        ...}`` (or ``{"marker": name}``) of the same form; "subtree_com",
        "subtree_linear_velocity", "subtree_angular_momentum" of the subtree of ``body``
        (the ground: every body), whose bodies ``subtree`` names (None: ``body`` and every
        body joined to it away from the ground); "touch" at the site, with ``zone`` =
        (shape, size): MuJoCo's site shape ("sphere", "capsule", "ellipsoid",
        "cylinder", "box") and size (3,); "actuator_force" of the actuator named
        ``actuator``; "joint_actuator_force" on ``joint`` (the sum of gear times force of
        the actuators that drive it); "interaction_force" and "interaction_torque" at the
        site: the wrench ``body`` receives from its ``parent`` through its joint (None: the
        body next to it on the way to the ground), ``subtree`` as for the subtree kinds;
        with ``part``, a dict ``{"mass", "com", "inertia", "shapes"}`` of a rigid part of
        ``body`` (a MuJoCo body welded to its parent; ``com`` global and ``inertia`` (3, 3)
        about it in global axes, at the initial configuration; ``shapes``: indices into the
        body's shapes), the wrench the rest of ``body`` exerts on that part and on the
        ``subtree`` bodies hanging from it (``parent``: ``body``); "rangefinder" at the
        site (also on the ground): the distance along the site's z axis to the nearest of
        the shapes ``targets``, a list of dicts ``{"kind", "body", "pos", "axes", "size"}``
        (MuJoCo's geom kind: "plane", "sphere", "capsule", "ellipsoid", "cylinder" or
        "box", and its size (3,); ``pos`` and ``axes`` global at the initial
        configuration), -1 where it meets none."""
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
                    frame=np.eye(3), params=None)  # fmt: skip
        option = sensor_kind(kind).params
        given = dict(reference=reference, subtree=subtree, zone=zone, actuator=actuator,
                     parent=parent, tendon=tendon, part=part, targets=targets)  # fmt: skip
        takes = {"interaction": ("subtree", "parent", "part")}.get(option, (option,))
        extra = [k for k, v in given.items() if v is not None and k not in takes]
        if extra:
            raise ModelError(f"{where}: kind {kind!r} takes no {extra[0]}=")
        if SENSOR_KINDS[kind] == "model":
            if body is not None or frame is not None or tuple(np.ravel(site)) != (0, 0, 0):
                raise ModelError(f"{where}: kind {kind!r} is read from the actuators; body=, "
                                 "site= and frame= are options of body sensors")  # fmt: skip
            key = option if option in ("actuator", "tendon") else "joint"
            spec["params"] = (option, {"actuator": actuator, "tendon": tendon, "joint": joint}[key])
            spec["joint"] = joint if option == "joint_actuators" else None
            if spec["params"][1] is None:
                raise ModelError(f"{where}: kind {kind!r} needs {key}=")
        elif SENSOR_KINDS[kind] == "joint":
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
            if body == GROUND and not sensor_kind(kind).on_ground:
                raise ModelError(f"{where}.body: the ground does not move; give a moving body")
            if body != GROUND and body not in [b.name for b in self._bodies]:
                raise ModelError(f"{where}.body: unknown body {body!r}; known bodies: "
                                 f"{[b.name for b in self._bodies]}")  # fmt: skip
            spec["body"] = body
            spec["site"] = _vec3(site, where=f"{where}.site")
            if frame is not None:
                spec["frame"] = _rotation_matrix(frame, where=f"{where}.frame")[0]
            spec["params"] = (
                self._ray_targets(where, targets) if option == "targets"
                else self._sensor_option(where, option, body, reference, subtree, zone, parent,
                                         part)
            )  # fmt: skip
        sigma = _numbers(noise, where=f"{where}.noise", expected="a number")
        if sigma.shape != () or not sigma >= 0:
            raise ModelError(f"{where}.noise: expected a non-negative number, got {noise!r}")
        spec["noise"] = float(sigma)
        self._sensors.append(spec)
        return self

    def _sensor_option(self, where, option, body, reference, subtree, zone, parent=None,
                       part=None):  # fmt: skip
        """The builder-time form of a body sensor's option (resolved by
        :meth:`_sensor_params` when the model is built)."""
        if option == "reference" and reference is not None:
            if not isinstance(reference, dict):
                raise ModelError(f"{where}.reference: expected a dict with 'body', 'site' and "
                                 f"'frame' (or 'marker'), got {reference!r}")  # fmt: skip
            if "marker" in reference:
                found = [m for m in self._markers if m["name"] == reference["marker"]]
                if not found:
                    raise ModelError(f"{where}.reference: no marker {reference['marker']!r}")
                m = found[0]
                return ("reference", m["body"], m["point"], m["axes"])
            ref_body = reference.get("body")
            if ref_body != GROUND and ref_body not in [b.name for b in self._bodies]:
                raise ModelError(f"{where}.reference.body: unknown body {ref_body!r}")
            site = _vec3(reference.get("site", (0.0, 0.0, 0.0)), where=f"{where}.reference.site")
            axes = reference.get("frame")
            F = np.eye(3) if axes is None else _rotation_matrix(axes, where=f"{where}.reference")[0]
            return ("reference", ref_body, site, F)
        if option in ("subtree", "interaction"):
            names = None if subtree is None else tuple(subtree)
            known = [b.name for b in self._bodies]
            for n in names or ():
                if n not in known:
                    raise ModelError(f"{where}.subtree: unknown body {n!r}")
            if parent is not None and parent != GROUND and parent not in known:
                raise ModelError(f"{where}.parent: unknown body {parent!r}")
            if part is not None:
                part = self._welded_part(where, body, part)
                names = () if names is None else names
                parent = body if parent is None else parent
            return (option, body, names, parent, part)
        if option == "zone":
            if zone is None:
                raise ModelError(f"{where}: a touch sensor needs zone=(shape, size)")
            if not isinstance(zone, tuple | list) or len(zone) != 2:
                raise ModelError(f"{where}.zone: expected (shape, size), got {zone!r}")
            shape, size = zone
            if shape not in ZONE_SHAPES:
                raise ModelError(f"{where}.zone: shape must be one of {ZONE_SHAPES}, got {shape!r}")
            size = _vec3(size, where=f"{where}.zone")
            if not np.all(size[: {"sphere": 1, "capsule": 2, "cylinder": 2}.get(shape, 3)] > 0):
                raise ModelError(f"{where}.zone: sizes must be positive, got {size}")
            return ("zone", shape, size)
        return None

    def _ray_targets(self, where, targets):
        """A rangefinder's ``targets`` (global at the initial configuration) in their
        bodies' frames: ("targets", [(kind, body, pos, rot, size, heights), ...]); a height
        field's size is (half extent x, half extent y, base depth), its heights (nrow,
        ncol), None for the others."""
        if targets is None:
            raise ModelError(f"{where}: a rangefinder needs targets= (the shapes it sees)")
        out = []
        for k, t in enumerate(targets):
            at = f"{where}.targets[{k}]"
            keys = {"kind", "body", "pos", "axes", "size", "heights"}
            if not isinstance(t, dict) or set(t) - keys:
                raise ModelError(f"{at}: expected a dict with 'kind', 'body', 'pos', 'axes', "
                                 f"'size' (and a height field's 'heights'), got {t!r}")  # fmt: skip
            if t.get("kind") not in (*RAY_SHAPES, *RAY_FIELDS):
                raise ModelError(f"{at}.kind: expected one of {(*RAY_SHAPES, *RAY_FIELDS)}, "
                                 f"got {t.get('kind')!r}")  # fmt: skip
            r, A = self._frame(t.get("body"), where=f"{at}.body")
            pos = A.T @ (_vec3(t.get("pos"), where=f"{at}.pos") - r)
            rot = A.T @ _rotation_matrix(t.get("axes", np.eye(3)), where=f"{at}.axes")[0]
            size = _vec3(t.get("size"), where=f"{at}.size")
            heights = None
            if t["kind"] in RAY_FIELDS:
                heights = _numbers(t.get("heights"), where=f"{at}.heights",
                                   expected="(nrow, ncol) elevations")  # fmt: skip
                if heights.ndim != 2 or min(heights.shape) < 2:
                    raise ModelError(f"{at}.heights: expected (nrow, ncol) elevations, "
                                     f"nrow, ncol >= 2, got shape {heights.shape}")  # fmt: skip
                if not (size[0] > 0 and size[1] > 0 and size[2] >= 0):
                    raise ModelError(f"{at}.size: a height field's (half x, half y, base) "
                                     f"must be positive, got {size}")  # fmt: skip
            elif "heights" in t:
                raise ModelError(f"{at}.heights: only a height field ('hfield') has heights")
            out.append((t["kind"], t["body"], pos, rot, size, heights))
        return ("targets", out)

    def _welded_part(self, where, body, part) -> WeldedPart:
        """An interaction sensor's ``part`` (global at the initial configuration) in the
        body's frame."""
        if not isinstance(part, dict) or set(part) - {"mass", "com", "inertia", "shapes"}:
            raise ModelError(f"{where}.part: expected a dict with 'mass', 'com', 'inertia' "
                             f"and 'shapes', got {part!r}")  # fmt: skip
        r, A = self._frame(body, where=f"{where}.body")
        mass = _numbers(part.get("mass"), where=f"{where}.part.mass", expected="a number")
        if mass.shape != () or not mass > 0:
            raise ModelError(f"{where}.part.mass: expected a positive number, got {mass}")
        com = A.T @ (_vec3(part.get("com"), where=f"{where}.part.com") - r)
        J = _numbers(part.get("inertia"), where=f"{where}.part.inertia", expected="a 3x3 matrix")
        if J.shape != (3, 3):
            raise ModelError(f"{where}.part.inertia: expected a 3x3 matrix, got shape {J.shape}")
        shapes = tuple(int(k) for k in part.get("shapes", ()))
        n = len(self._shapes_of(body) or ())
        if any(not 0 <= k < n for k in shapes):
            raise ModelError(f"{where}.part.shapes: indices into the {n} shapes of '{body}', "
                             f"got {list(shapes)}")  # fmt: skip
        return WeldedPart(device_array(float(mass)), device_array(com),
                          device_array(A.T @ J @ A), shapes)  # fmt: skip

    def _subtree_of(self, root: str, index: dict[str, int], joints) -> tuple[tuple[int, ...], int]:
        """(``root`` and every body joined to it away from the ground, the body before it on
        the way to the ground): by the first paths from the ground found through the
        joints; the ground's subtree is every body."""
        nb = len(self._bodies)
        if root == GROUND:
            return tuple(range(nb)), -1
        links: dict[int, set[int]] = {k: set() for k in range(nb + 1)}
        for d in joints:
            links[d.body_i].add(d.body_j)
            links[d.body_j].add(d.body_i)
        parent, frontier = {nb: None}, [nb]
        while frontier:
            nxt = []
            for a in frontier:
                for b in sorted(links[a]):
                    if b not in parent:
                        parent[b] = a
                        nxt.append(b)
            frontier = nxt
        r = index[root]
        out = []
        for b in range(nb):
            a = b
            while a is not None and a != r:
                a = parent.get(a)
            if a == r:
                out.append(b)
        up = parent.get(r)
        return (tuple(out) if r in out else (r,)), (nb if up is None else up)

    def _sensor_params(self, s, index: dict[str, int], joints):
        """The :class:`~jaxmbd.sensors.SensorMount` ``params`` of sensor ``s``."""
        p = s["params"]
        if p is None:
            return None
        where = f"sensor '{s['name']}'"
        if p[0] == "reference":
            return FrameReference(index[p[1]], device_array(p[2]), device_array(p[3]))
        if p[0] in ("subtree", "interaction"):
            bodies, up = self._subtree_of(p[1], index, joints)
            if p[2] is not None:
                bodies = tuple(index[n] for n in p[2])
            if p[0] == "subtree":
                return SubtreeBodies(bodies)
            return SubtreeBodies(bodies, up if p[3] is None else index[p[3]], p[4])
        if p[0] == "zone":
            return TouchZone(p[1], device_array(p[2]))
        if p[0] == "targets":
            rows = p[1]
            return RayTargets(
                tuple(t[0] for t in rows),
                tuple(index[t[1]] for t in rows),
                device_array(np.reshape([t[2] for t in rows], (-1, 3))),
                device_array(np.reshape([t[3] for t in rows], (-1, 3, 3))),
                device_array(np.reshape([t[4] for t in rows], (-1, 3))),
                tuple(device_array(t[5]) for t in rows if t[5] is not None),
            )
        if p[0] == "tendon":
            tendons = [t["name"] for t in self._tendons]
            if p[1] not in tendons:
                raise ModelError(f"{where}.tendon: no tendon {p[1]!r}; tendons: {tendons}")
            return SensorTendon(p[1])
        names = [a["name"] for a in self._actuators]
        if p[0] == "actuator":
            if p[1] not in names:
                raise ModelError(f"{where}.actuator: no actuator {p[1]!r}; actuators: {names}")
            return ActuatorSet((names.index(p[1]),))
        driven = [k for k, a in enumerate(self._actuators) if a["joint"] == p[1]]
        known = {a["joint"] for a in self._actuators} | {j.name for j in self._joints}
        if p[1] not in known:
            raise ModelError(f"{where}.joint: no joint {p[1]!r}")
        return ActuatorSet(tuple(driven))

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
            site=device_array(np.stack([s["site"] for s in self._sensors])),
            frame=device_array(np.stack([s["frame"] for s in self._sensors])),
            noise=device_array([s["noise"] for s in self._sensors], np.float64),
            params=tuple(self._sensor_params(s, index, joints) for s in self._sensors)
            if any(s["params"] is not None for s in self._sensors)
            else (),
        )
