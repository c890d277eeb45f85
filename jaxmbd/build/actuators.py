"""Actuators (:mod:`jaxmbd.actuators`) on joint coordinates."""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from ..actuators import (
    ACTIVATION_DYNAMICS,
    ACTUATOR_KINDS,
    NO_DYNAMICS,
    Actuators,
    gains_of_kind,
)
from ..actuators._kinds import actuator_kind
from ..compiled.host_arrays import device_array, device_zeros
from ..errors import ModelError
from ..model._values import (
    _numbers,
)
from ..model.joints import JointDefinition, joint_kind
from .specs import absolute_entries


class _ActuatorBuilder:
    """The actuator methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_actuator(
        self, name, *, joint=None, kind, gear=1.0, ctrl_range=None, force_range=None, kp=None,
        kv=None, gain=None, bias=None, tendon=None, dynamics="none", time_constant=None,
        act_range=None, act_early=False,
    ) -> Self:  # fmt: skip
        """An actuator driving the coordinate of the revolute or translational ``joint``, or
        one coordinate of a cylindrical joint, ``joint="<joint>.slide"`` (force along its
        axis) or ``"<joint>.angle"`` (torque about it) (:mod:`jaxmbd.actuators`): ``kind``
        "motor" (force gear u), "position" (``kp``, optional ``kv``: kp (u - L) - kv L_dot),
        "velocity" (``kv``: kv (u - L_dot)) or
        "general" (``gain`` u + ``bias`` . (1, L, L_dot)), with L = gear q. ``ctrl_range``
        and ``force_range`` = (lower, upper) clamp the control and the force (MuJoCo's
        ``ctrllimited``, ``forcelimited``); None: unlimited (one side None: unlimited
        there). ``tendon=`` instead of ``joint=``: the actuator pulls along the tendon
        (:meth:`add_fixed_tendon`, :meth:`add_spatial_tendon`; L = gear times the tendon's
        length, the generalised force gear F J^T, MuJoCo's ``tendon=`` transmission).
        ``dynamics`` "integrator", "filter" or "filterexact" (MuJoCo's ``dyntype``) gives
        the actuator an activation in place of u (:mod:`jaxmbd.actuators`), with the filter's
        ``time_constant``, the clamp ``act_range`` = (lower, upper) (``actlimited``) and
        ``act_early`` (``actearly``); it starts at 0 (MuJoCo's ``act``). Controls are given to
        :func:`~jaxmbd.simulate` (``controls=``) in the order actuators are added."""
        where = f"actuator '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"actuator name: expected a non-empty string, got {name!r}")
        if any(a["name"] == name for a in self._actuators):
            raise ModelError(f"{where}: duplicate actuator name")
        if kind not in ACTUATOR_KINDS:
            raise ModelError(f"{where}.kind: expected one of {ACTUATOR_KINDS}, got {kind!r}")
        if (joint is None) == (tendon is None):
            raise ModelError(f"{where}: give joint= or tendon= (the transmission), not both")
        known = self._scalar_coordinates()
        spec = next((j for j in self._joints if j.name == joint), None)
        if tendon is not None:
            tendons = [t["name"] for t in self._tendons]
            if tendon not in tendons:
                raise ModelError(f"{where}.tendon: no tendon {tendon!r}; tendons: {tendons} "
                                 "(add the tendon first)")  # fmt: skip
        elif spec is None and joint not in known:
            raise ModelError(f"{where}.joint: no joint {joint!r}; actuated joints can be {known}")
        if spec is not None and joint_kind(spec.kind).views:
            raise ModelError(
                f"{where}.joint: '{joint}' is cylindrical; actuate one of its coordinates, "
                f"'{joint}.slide' or '{joint}.angle'"
            )
        if spec is not None and not joint_kind(spec.kind).one_coordinate:
            raise ModelError(
                f"{where}.joint: '{joint}' is {spec.kind}; actuators drive revolute and "
                "translational joints and the coordinates of cylindrical joints "
                "('<joint>.slide', '<joint>.angle')"
            )

        def number(key, value, *, positive=False, required=False):
            if value is None:
                if required:
                    raise ModelError(f"{where}: kind {kind!r} needs {key}=")
                return 0.0
            x = _numbers(value, where=f"{where}.{key}", expected="a number")
            if x.shape != () or (positive and not x > 0):
                raise ModelError(f"{where}.{key}: expected a positive number, got {value!r}")
            return float(x)

        def span(key, value):
            if value is None:
                return (-math.inf, math.inf)
            # one side may be None: unbounded there
            if isinstance(value, list | tuple) and len(value) == 2 and None in value:
                bounds = [-math.inf if value[0] is None else value[0],
                          math.inf if value[1] is None else value[1]]  # fmt: skip
                finite = [x for x in value if x is not None]
                if finite:
                    _numbers(finite, where=f"{where}.{key}", expected="(lower, upper)")
                lo_hi = np.asarray(bounds, dtype=np.float64)
            else:
                lo_hi = _numbers(value, where=f"{where}.{key}", expected="(lower, upper)")
            if lo_hi.shape != (2,) or not lo_hi[0] <= lo_hi[1]:
                raise ModelError(f"{where}.{key}: expected (lower, upper), lower <= upper, "
                                 f"got {value!r}")  # fmt: skip
            return (float(lo_hi[0]), float(lo_hi[1]))

        if dynamics not in ACTIVATION_DYNAMICS:
            raise ModelError(
                f"{where}.dynamics: expected one of {list(ACTIVATION_DYNAMICS)}, got {dynamics!r}"
            )
        rule = ACTIVATION_DYNAMICS[dynamics]
        if time_constant is not None and not rule.time_constant:
            takes = [d.name for d in ACTIVATION_DYNAMICS.values() if d.time_constant]
            raise ModelError(f"{where}.time_constant: only for dynamics {takes}")
        tau = number("time_constant", time_constant, positive=True, required=rule.time_constant)
        if rule is NO_DYNAMICS and (act_range is not None or act_early):
            raise ModelError(f"{where}: act_range and act_early need activation dynamics")
        gear_value = number("gear", gear)
        if gear_value == 0.0:
            raise ModelError(f"{where}.gear: must be non-zero")
        record = actuator_kind(kind)
        for key, value in (("kp", kp), ("kv", kv), ("gain", gain), ("bias", bias)):
            if value is not None and key not in record.options:
                raise ModelError(f"{where}.{key}: not an option of kind {kind!r}")
        kp_value = number("kp", kp, positive=True, required="kp" in record.required)
        kv_value = number("kv", kv, positive=True, required="kv" in record.required)
        gain_value = number("gain", gain, required="gain" in record.required)
        bias_value = (0.0, 0.0, 0.0)
        if bias is not None:
            b = _numbers(bias, where=f"{where}.bias", expected="(b0, b1, b2)")
            if b.shape != (3,):
                raise ModelError(f"{where}.bias: expected (b0, b1, b2), got {bias!r}")
            bias_value = tuple(float(x) for x in b)
        self._actuators.append(
            dict(name=name, joint=joint, tendon=tendon, kind=kind, gear=gear_value, kp=kp_value,
                 kv=kv_value, gain=gain_value, bias=bias_value, ctrl=span("ctrl_range", ctrl_range),
                 force=span("force_range", force_range), dynamics=dynamics, tau=tau,
                 act=span("act_range", act_range), act_early=bool(act_early))
        )  # fmt: skip
        return self

    def _actuator_element(self, joints, space=frozenset(), tendons=None) -> tuple:
        """The :class:`~jaxmbd.actuators.Actuators` element (none: empty); ``space``: the
        names of coordinates only joint space has (left out of the absolute formulations);
        ``tendons``: the model's :class:`~jaxmbd.tendons.Tendons` (tendon transmissions)."""
        if not self._actuators:
            return ()
        by_name = {d.name: d for d in joints}
        # a tendon actuator's entry in ``joints``: a placeholder no formulation reads (the
        # absolute formulations skip it as joint space only; the tendon gives its length)
        ground = len(self._bodies)
        zero, eye = device_zeros(3), device_array(np.eye(3))
        for a in self._actuators:
            if a.get("tendon") is not None:
                by_name[f"tendon:{a['tendon']}"] = JointDefinition(
                    name=f"tendon:{a['tendon']}", kind="tendon", body_i=ground, body_j=ground,
                    s_bar_i=zero, s_bar_j=zero, frame_i=eye, frame_j=eye,
                    offset=device_zeros(1), q_start=device_zeros(1), sign=(1,))  # fmt: skip
                a = dict(a, joint=f"tendon:{a['tendon']}")
        tendon_actuated = tuple(k for k, a in enumerate(self._actuators) if a.get("tendon"))
        space = set(space) | {f"tendon:{self._actuators[k]['tendon']}" for k in tendon_actuated}
        driven_tendons = None
        if tendon_actuated:
            driven_tendons = tendons.subset(
                [tendons.index(self._actuators[k]["tendon"]) for k in tendon_actuated]
            )
        gains = [gains_of_kind(a["kind"], kp=a["kp"], kv=a["kv"], gain=a["gain"],
                               bias=a["bias"]) for a in self._actuators]  # fmt: skip

        def column(values):
            return device_array(values, np.float64)

        driven = tuple(by_name[a["joint"] if a.get("tendon") is None else f"tendon:{a['tendon']}"]
                       for a in self._actuators)  # fmt: skip
        return (
            Actuators(
                actuator_names=tuple(a["name"] for a in self._actuators),
                kinds=tuple(a["kind"] for a in self._actuators),
                joints=driven,
                gear=column([a["gear"] for a in self._actuators]),
                gain=column([g for g, _ in gains]),
                bias=column([b for _, b in gains]),
                ctrl_lower=column([a["ctrl"][0] for a in self._actuators]),
                ctrl_upper=column([a["ctrl"][1] for a in self._actuators]),
                force_lower=column([a["force"][0] for a in self._actuators]),
                force_upper=column([a["force"][1] for a in self._actuators]),
                controls=device_zeros(len(self._actuators)),
                absolute_entries=absolute_entries(driven, space),
                tendon_actuated=tendon_actuated,
                tendons=driven_tendons,
                **self._activation_fields(),
            ),
        )

    def _activation_fields(self) -> dict:
        """The activation-dynamics fields of the element (none where no actuator has any)."""
        acts = self._actuators
        if all(ACTIVATION_DYNAMICS[a.get("dynamics", "none")] is NO_DYNAMICS for a in acts):
            return {}
        return dict(
            dynamics=tuple(a["dynamics"] for a in acts),
            act_early=tuple(a["act_early"] for a in acts),
            time_constant=device_array([a["tau"] for a in acts], np.float64),
            act_lower=device_array([a["act"][0] for a in acts], np.float64),
            act_upper=device_array([a["act"][1] for a in acts], np.float64),
            activation=device_zeros(len(acts)),
            activation_time=device_zeros(()),
            step=device_zeros(()),
        )
