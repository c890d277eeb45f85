"""Joint limits and joint dynamics (damping, stiffness, friction loss, armature): the
joint force elements of a built model."""

from __future__ import annotations

import math

import numpy as np

from ..compiled.host_arrays import device_array
from ..errors import ModelError
from ..forces.joint_dynamics import FRICTION_VELOCITY, JointDynamics
from ..forces.joint_limits import JointLimits, default_limit_gains, effective_inertia
from ..model import GROUND
from ..model._topology import body_graph
from ..model._values import (
    _numbers,
    _short,
)
from ..model.joints import joint_kind
from .specs import absolute_entries


class _JointForceBuilder:
    """The joint-limit and joint-dynamics parts of :class:`~jaxmbd.ModelBuilder`."""

    def _record_limits(self, name, limits, stiffness, damping, restitution=None, *,
                       kind=None) -> None:  # fmt: skip
        """Keep a joint's ``limits=(lower, upper)``, optional gains and restitution (checked
        here).
        ``kind``: the coordinate's kind where ``name`` is a cylindrical joint's coordinate
        view (``"<joint>.slide"``, ``"<joint>.angle"``; default: the joint's kind)."""
        if limits is None:
            if stiffness is not None or damping is not None or restitution is not None:
                raise ModelError(
                    f"joint '{name}': limit_stiffness/limit_damping/limit_restitution need limits="
                )
            return
        w = f"joint '{name}'.limits"
        lo_hi = _numbers(limits, where=w, expected="(lower, upper)")
        if lo_hi.shape != (2,) or not lo_hi[0] < lo_hi[1]:
            raise ModelError(f"{w}: expected (lower, upper) with lower < upper, got {limits!r}")
        kind = kind or next(j for j in self._joints if j.name == name).kind
        if joint_kind(kind).angular and lo_hi[1] - lo_hi[0] >= 2 * math.pi:
            raise ModelError(f"{w}: a revolute range must be narrower than a full turn")
        gains = []
        for key, value in (("limit_stiffness", stiffness), ("limit_damping", damping)):
            if value is not None:
                x = _numbers(value, where=f"joint '{name}'.{key}", expected="a number")
                if x.shape != () or x < 0 or (key == "limit_stiffness" and x == 0):
                    raise ModelError(f"joint '{name}'.{key}: must be positive, got {value!r}")
                value = float(x)
            gains.append(value)
        if restitution is not None:
            x = _numbers(restitution, where=f"joint '{name}'.limit_restitution",
                         expected="a number")  # fmt: skip
            if x.shape != () or not 0 <= x <= 1:
                raise ModelError(
                    f"joint '{name}'.limit_restitution: expected a number in [0, 1], got "
                    f"{_short(restitution)}"
                )
            restitution = float(x)
        self._limits[name] = (float(lo_hi[0]), float(lo_hi[1]), *gains, restitution)

    def _record_limit_impedance(self, name, solimp) -> None:
        """Keep a limited joint's MuJoCo ``solimp`` (:attr:`JointLimits.impedance`)."""
        x = _numbers(solimp, where=f"joint '{name}'.limit_impedance", expected="5 numbers")
        if name not in self._limits or x.shape != (5,) or not np.all(np.isfinite(x)):
            raise ModelError(
                f"joint '{name}'.limit_impedance: expected MuJoCo's solimp (5 numbers) on a "
                f"limited joint, got {_short(solimp)}"
            )
        self._limit_impedance[name] = tuple(float(v) for v in x)

    def _limits_element(self, index: dict[str, int], joints, space=frozenset()) -> tuple:
        """The :class:`~jaxmbd.forces.joint_limits.JointLimits` force element of the limited joints
        (none: empty), default gains from each joint's child side at the drawn pose;
        ``space``: the names of coordinates only joint space has (left out of the absolute
        formulations, :func:`absolute_entries`)."""
        if not self._limits:
            return ()
        nb = len(self._bodies)
        graph = body_graph(nb, [(index[g.body_i], index[g.body_j]) for g in self._gcons])
        defns, rows = [], []
        for defn in joints:
            if defn.name not in self._limits:
                continue
            lo, hi, k, c, e = self._limits[defn.name]
            if e is not None and c is None:
                c = 0.0  # the restitution damps (module docstring of joint_limits)
            # the effective inertia: the default gains' scale and the restitution's v_est
            i, j = defn.body_i, defn.body_j
            child = graph.child_of(i, j) if graph.is_tree_pair(i, j) else j
            side = graph.subtree(child) if child < nb else ()
            spec = self._coordinate_joint(defn.name)
            b0 = self._bodies[index[spec.body_i]] if spec.body_i != GROUND else None
            r_i, A_i = (b0.r, b0.A) if b0 is not None else (np.zeros(3), np.eye(3))
            point, axis = r_i + A_i @ spec.s_bar_i, A_i @ spec.frame_i[:, 2]
            bodies = [
                (self._bodies[b].mass, self._bodies[b].A @ self._bodies[b].inertia
                 @ self._bodies[b].A.T, self._bodies[b].r)
                for b in side
            ]  # fmt: skip
            inertia = effective_inertia(defn.kind, point, axis, bodies)
            k_def, c_def = default_limit_gains(inertia)
            k = k_def if k is None else k
            c = c_def if c is None else c
            defns.append(defn)
            rows.append((lo, hi, k, c, 0.0 if e is None else e, float(e is not None), inertia))
        lo, hi, k, c, e, on, inertia = (device_array([row[m] for row in rows]) for m in range(7))
        impedance = None
        if self._limit_impedance:
            # joints without one: a flat impedance (constant gains)
            flat = (0.5, 0.5, 1.0, 0.5, 1.0)
            impedance = device_array([self._limit_impedance.get(d.name, flat) for d in defns])
        if not any(row[5] for row in rows):
            e = on = inertia = None  # the plain spring-damper law
        return (
            JointLimits(joints=tuple(defns), lower=lo, upper=hi, stiffness=k, damping=c,
                        restitution=e, calibrated=on, inertia=inertia, impedance=impedance,
                        absolute_entries=absolute_entries(defns, space)),
        )  # fmt: skip

    def _record_dynamics(self, name, damping, stiffness, spring_reference, friction_loss,
                         armature=None):  # fmt: skip
        """Keep a joint's damping, stiffness, spring reference, friction loss and armature
        (checked here) when any is non-zero or the armature is given."""
        values = {}
        for key, value in (("damping", damping), ("stiffness", stiffness),
                           ("friction_loss", friction_loss)):  # fmt: skip
            x = _numbers(value, where=f"joint '{name}'.{key}", expected="a number")
            if x.shape != () or x < 0:
                raise ModelError(
                    f"joint '{name}'.{key}: expected a non-negative number, got {_short(value)}"
                )
            values[key] = float(x)
        if spring_reference is not None:
            if values["stiffness"] == 0:
                raise ModelError(f"joint '{name}': spring_reference needs stiffness > 0")
            x = _numbers(spring_reference, where=f"joint '{name}'.spring_reference",
                         expected="a number")  # fmt: skip
            if x.shape != ():
                raise ModelError(
                    f"joint '{name}'.spring_reference: expected a number, got "
                    f"{_short(spring_reference)}"
                )
            spring_reference = float(x)
        if armature is not None:
            x = _numbers(armature, where=f"joint '{name}'.armature", expected="a number")
            if x.shape != () or not x >= 0 or not np.isfinite(x):
                raise ModelError(
                    f"joint '{name}'.armature: expected a non-negative number, got "
                    f"{_short(armature)}"
                )
            armature = float(x)
        if any(values.values()) or armature is not None:
            self._dynamics[name] = (
                values["damping"], values["stiffness"], spring_reference, values["friction_loss"],
                armature,
            )  # fmt: skip

    def _dynamics_element(self, joints, space=frozenset()) -> tuple:
        """The :class:`~jaxmbd.forces.joint_dynamics.JointDynamics` force element of the joints with
        damping, stiffness or friction loss (none: empty); a spring reference of None is
        the joint's coordinate where drawn (its offset); ``space``: as
        :meth:`_limits_element`'s."""
        if not self._dynamics:
            return ()
        defns = [d for d in joints if d.name in self._dynamics]
        rows = [self._dynamics[d.name] for d in defns]
        c, k, ref, f = (
            device_array([
                float(np.asarray(d.offset)[0]) if m == 2 and row[m] is None else row[m]
                for d, row in zip(defns, rows, strict=True)
            ])
            for m in range(4)
        )  # fmt: skip
        # armature: a leaf where some joint was given one (0 for the others), else None
        given = [row[4] for row in rows]
        armature = None
        if any(x is not None for x in given):
            armature = device_array([0.0 if x is None else x for x in given])
        return (
            JointDynamics(
                joints=tuple(defns), damping=c, stiffness=k, spring_reference=ref,
                friction_loss=f, friction_velocity=device_array([FRICTION_VELOCITY] * len(defns)),
                armature=armature, absolute_entries=absolute_entries(defns, space),
            ),
        )  # fmt: skip
