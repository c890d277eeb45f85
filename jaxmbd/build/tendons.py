"""Tendons (:mod:`jaxmbd.tendons`) and their passive forces
(:mod:`jaxmbd.tendons.tendon_forces`)."""

from __future__ import annotations

from typing import Self

import jax.numpy as jnp
import numpy as np

from ..compiled.host_arrays import device_array
from ..errors import ModelError
from ..forces.joint_dynamics import FRICTION_VELOCITY
from ..forces.joint_limits import JointLimits, default_limit_gains
from ..model._values import _numbers, _vec3
from ..tendons import FixedTendon, SpatialTendon, Tendons
from ..tendons._paths import path_element_kind
from ..tendons.tendon_forces import TendonForces


class _TendonBuilder:
    """The tendon methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_fixed_tendon(self, name, *, joints, **options) -> Self:
        """A fixed tendon of length L = sum coef_i q_i over revolute and translational
        joints (or the coordinates of cylindrical joints, ``"<joint>.slide"``,
        ``"<joint>.angle"``): ``joints`` {joint name: coef} or [(joint, coef), ...] (MuJoCo's
        ``<fixed>``). ``options``: the tendon's passive forces, see
        :meth:`add_spatial_tendon`."""
        where = f"tendon '{name}'"
        self._new_tendon(name)
        pairs = list(joints.items()) if isinstance(joints, dict) else list(joints)
        if not pairs:
            raise ModelError(f"{where}.joints: a fixed tendon needs at least one joint")
        names, coefs = [], []
        for k, pair in enumerate(pairs):
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise ModelError(f"{where}.joints[{k}]: expected (joint, coef), got {pair!r}")
            joint, coef = pair
            coefs.append(float(_numbers(coef, where=f"{where}.joints[{joint!r}]",
                                        expected="a number")))  # fmt: skip
            names.append(joint)
        known = self._scalar_coordinates()
        unknown = [j for j in names if j not in known]
        if unknown:
            raise ModelError(f"{where}.joints: {unknown} are not revolute or translational "
                             f"joint coordinates; they can be {known}")  # fmt: skip
        options = self._tendon_options(where, options)
        self._tendons.append(dict(name=name, geometry=_fixed_tendon, joints=tuple(names),
                                  coef=np.asarray(coefs), **options))  # fmt: skip
        return self

    def add_spatial_tendon(self, name, *, path, stiffness=0.0, spring_length=None, damping=0.0,
                           friction_loss=0.0, limits=None, limit_stiffness=None,
                           limit_damping=None, limit_inertia=None) -> Self:  # fmt: skip
        """A spatial tendon: a path through sites on bodies (MuJoCo's ``<spatial>``).
        ``path``: a list of elements, points global at the initial configuration (as
        drawn, like joint points):

        * ``("site", body, point)``;
        * ``("sphere", body, centre, radius)`` or ``("cylinder", body, centre, axes,
          radius)`` (``axes``: the cylinder's frame as a 3x3 rotation, axis third, or its
          axis), each optionally with ``side=(body, point)`` as a fifth/sixth element: a
          geom the path wraps around between the sites before and after it;
        * ``("pulley", divisor)``: the segments after it count 1/divisor.

        Passive forces along the tendon (:mod:`jaxmbd.tendons.tendon_forces`): ``stiffness`` about
        ``spring_length`` (one length, or (lower, upper): a dead band; needed with a
        stiffness), ``damping``, ``friction_loss``; ``limits=(lower, upper)``: a compliant
        limit with ``limit_stiffness`` and ``limit_damping``, or the defaults of the
        tendon's effective inertia ``limit_inertia`` (kg, kg m^2 per rad^2: 1 / (J M^-1 J^T),
        MuJoCo's 1 / ``tendon_invweight0``)."""
        where = f"tendon '{name}'"
        self._new_tendon(name)
        options = self._tendon_options(where, dict(
            stiffness=stiffness, spring_length=spring_length, damping=damping,
            friction_loss=friction_loss, limits=limits, limit_stiffness=limit_stiffness,
            limit_damping=limit_damping, limit_inertia=limit_inertia))  # fmt: skip
        elements = [self._path_element(f"{where}.path[{k}]", e) for k, e in enumerate(path)]
        kinds = [e["kind"] for e in elements]
        if len(kinds) < 2 or not (kinds[0].passes and kinds[-1].passes):
            raise ModelError(f"{where}.path: a spatial tendon starts and ends at a site, got "
                             f"{[k.name for k in kinds]}")  # fmt: skip
        for k, kind in enumerate(kinds):
            if kind.wraps and not (kinds[k - 1].passes and kinds[k + 1].passes):
                raise ModelError(f"{where}.path[{k}]: a wrapping geom lies between two sites")
            if kind.divides and not kinds[k + 1].passes:
                raise ModelError(f"{where}.path[{k}]: a pulley is followed by a site")
        self._tendons.append(dict(name=name, geometry=_spatial_tendon, path=elements, **options))
        return self

    def _new_tendon(self, name):
        if not isinstance(name, str) or not name:
            raise ModelError(f"tendon name: expected a non-empty string, got {name!r}")
        if any(t["name"] == name for t in self._tendons):
            raise ModelError(f"tendon '{name}': duplicate tendon name")

    def _tendon_options(self, where, options):
        known = {"stiffness", "spring_length", "damping", "friction_loss", "limits",
                 "limit_stiffness", "limit_damping", "limit_inertia"}  # fmt: skip
        unknown = set(options) - known
        if unknown:
            raise ModelError(f"{where}: unknown options {sorted(unknown)}; use {sorted(known)}")

        def number(key, default=None, *, positive=False):
            value = options.get(key, default)
            if value is None:
                return None
            x = _numbers(value, where=f"{where}.{key}", expected="a number")
            if x.shape != () or x < 0 or (positive and x == 0):
                sign = "positive" if positive else "non-negative"
                raise ModelError(f"{where}.{key}: expected a {sign} number, got {value!r}")
            return float(x)

        out = {key: number(key, 0.0) for key in ("stiffness", "damping", "friction_loss")}
        spring = options.get("spring_length")
        if spring is None:
            if out["stiffness"] > 0:
                raise ModelError(f"{where}: a stiffness needs spring_length=")
            spring = (0.0, 0.0)
        spring = np.broadcast_to(_numbers(spring, where=f"{where}.spring_length",
                                          expected="a length or (lower, upper)"), (2,))  # fmt: skip
        if not spring[0] <= spring[1]:
            raise ModelError(f"{where}.spring_length: lower > upper in {tuple(spring)}")
        out["spring"] = (float(spring[0]), float(spring[1]))
        limits = options.get("limits")
        out["limits"] = None
        if limits is not None:
            lo_hi = _numbers(limits, where=f"{where}.limits", expected="(lower, upper)")
            if lo_hi.shape != (2,) or not lo_hi[0] < lo_hi[1]:
                raise ModelError(f"{where}.limits: expected (lower, upper), lower < upper, got "
                                 f"{limits!r}")  # fmt: skip
            k, c = number("limit_stiffness"), number("limit_damping")
            inertia = number("limit_inertia", positive=True)
            if k is None or c is None:
                if inertia is None:
                    raise ModelError(
                        f"{where}: limits need limit_stiffness= and limit_damping=, or the "
                        "tendon's effective inertia limit_inertia="
                    )
                k_def, c_def = default_limit_gains(inertia)
                k = k_def if k is None else k
                c = c_def if c is None else c
            out["limits"] = (float(lo_hi[0]), float(lo_hi[1]), k, c)
        return out

    def _path_element(self, where, element):
        if not isinstance(element, tuple | list) or not element:
            raise ModelError(f"{where}: expected a tuple such as ('site', body, point)")
        name, *rest = element
        kind = path_element_kind(name, where=where)
        if len(rest) not in kind.sizes:
            raise ModelError(f"{where}: expected {kind.usage}")

        def axes(at, body):
            return self._frame(body, where=at)[1]

        return dict(kind=kind, **kind.read(where, rest, self._path_point, axes))

    def _path_point(self, where, body, point):
        """A global point at the initial configuration in ``body``'s frame."""
        r, A = self._frame(body, where=f"{where}.body")
        return A.T @ (_vec3(point, where=f"{where}.point") - r)

    def _tendon_geometry(self, index, joints, space=frozenset()) -> Tendons | None:
        """The model's :class:`~jaxmbd.tendons.Tendons` (None without tendons); ``joints``:
        the definitions of the joint coordinates forces act on, by name (a coordinate only
        joint space has is left out: the tendon's definition is None there)."""
        if not self._tendons:
            return None
        by_name = {d.name: d for d in joints if d.name not in space}
        return Tendons(tuple(t["geometry"](t, index, by_name) for t in self._tendons))

    def _tendon_element(self, tendons: Tendons | None) -> tuple:
        """The :class:`~jaxmbd.tendons.tendon_forces.TendonForces` of the tendons with passive
        forces or limits (none: empty)."""
        if tendons is None:
            return ()
        specs = self._tendons
        active = any(t["stiffness"] or t["damping"] or t["friction_loss"] or t["limits"]
                     for t in specs)  # fmt: skip
        if not active:
            return ()
        limited = [k for k, t in enumerate(specs) if t["limits"] is not None]
        limits = None
        if limited:
            lo, hi, k, c = (
                device_array([specs[i]["limits"][m] for i in limited]) for m in range(4)
            )
            limits = JointLimits(joints=(), lower=lo, upper=hi, stiffness=k, damping=c)

        def column(key):
            return device_array([float(t[key]) for t in specs])

        return (
            TendonForces(
                tendons=tendons, stiffness=column("stiffness"),
                spring_lower=device_array([t["spring"][0] for t in specs]),
                spring_upper=device_array([t["spring"][1] for t in specs]),
                damping=column("damping"), friction_loss=column("friction_loss"),
                friction_velocity=jnp.full(len(specs), FRICTION_VELOCITY),
                limits=limits, limited=tuple(limited),
            ),
        )  # fmt: skip


def _fixed_tendon(t, index, by_name) -> FixedTendon:
    """The :class:`~jaxmbd.tendons.FixedTendon` of the record ``t`` (``by_name``: the joint
    coordinates' definitions)."""
    return FixedTendon(name=t["name"], joints=t["joints"], coef=device_array(t["coef"]),
                       definitions=tuple(by_name.get(j) for j in t["joints"]),
                       tree_joints=t.get("tree_joints", ()))  # fmt: skip


def _spatial_tendon(t, index, by_name) -> SpatialTendon:
    """The :class:`~jaxmbd.tendons.SpatialTendon` of the record ``t`` on the bodies
    ``index`` (name: model index)."""
    path = t["path"]
    return SpatialTendon(
        name=t["name"], kinds=tuple(e["kind"] for e in path),
        bodies=tuple(-1 if e["body"] is None else index[e["body"]] for e in path),
        side_bodies=tuple(-1 if e["side"] is None else index[e["side"][0]] for e in path),
        points=device_array(np.stack([e["point"] for e in path])),
        frames=device_array(np.stack([e["frame"] for e in path])),
        radius=device_array([e["radius"] for e in path]),
        divisor=device_array([e["divisor"] for e in path]),
        side_points=device_array(np.stack([np.zeros(3) if e["side"] is None else e["side"][1]
                                          for e in path])),
    )  # fmt: skip
