"""Joints (paper 1 Table 1) from a global point and axes at the initial configuration,
their coordinate frames, and initial states in joint coordinates."""

from __future__ import annotations

from typing import Self

import numpy as np

from ..errors import ModelError
from ..forces._joint import CYLINDRICAL_VIEWS
from ..model._values import (
    _axis_frame,
    _coordinate_pair,
    _joint_values,
    _perpendicular_pair,
    _rotation_matrix,
    _short,
    _unit,
    _vec3,
)
from ..model.joints import SIZES, joint_kind, scalar_size
from .specs import _JointSpec


class _JointBuilder:
    """The joint methods of :class:`~jaxmbd.ModelBuilder`."""

    def _check_joint_name(self, name) -> None:
        if not isinstance(name, str) or not name:
            raise ModelError(f"joint name must be a non-empty string, got {name!r}")
        if any(j.name == name for j in self._joints):
            raise ModelError(f"joint '{name}': duplicate joint name")

    def _record_joint(self, name, kind, body_i, body_j, point, axes, *,
                      joint_space=False) -> None:  # fmt: skip
        """Keep the joint frame (``point``, ``axes`` columns, global where drawn) fixed in both
        bodies: the two frames coincide here, where every coordinate is zero.
        ``joint_space``: a coordinate only joint space has (:class:`~.specs._JointSpec`)."""
        w = f"joint '{name}'"
        point = _vec3(point, where=f"{w}.point")
        r_i, A_i = self._frame(body_i, where=f"{w}.body_i")
        r_j, A_j = self._frame(body_j, where=f"{w}.body_j")
        self._define_joint(
            name, kind=kind, body_i=body_i, body_j=body_j, s_bar_i=A_i.T @ (point - r_i),
            s_bar_j=A_j.T @ (point - r_j), frame_i=A_i.T @ axes, frame_j=A_j.T @ axes,
            joint_space=joint_space,
        )  # fmt: skip

    def _spherical_rows(self, name, *, body_i, body_j, point, joint=None):
        """Three CD rows that make the point P_i of body i and Q_j of body j coincide."""
        w = f"joint '{name}'"
        sp = self._local_point(body_i, point, where=f"{w}.point")
        sq = self._local_point(body_j, point, where=f"{w}.point")
        for k, axis in enumerate("xyz"):
            self.add_cd(
                f"{name}.cd_{axis}",
                c=np.eye(3)[k],
                body_i=body_i,
                s_bar_p_i=sp,
                body_j=body_j,
                s_bar_q_j=sq,
                joint=joint or name,
            )
        return self

    def spherical(self, name, *, body_i, body_j, point):
        """SJ: three CD constraints that make point P_i and Q_j coincide.

        Coordinates: the quaternion (w, x, y, z) of body j's rotation relative to body i from
        the drawn pose, in body j's frame (MuJoCo's ball joint); rates: the relative angular
        velocity in body j's frame.
        """
        self._check_joint_name(name)
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        A_j = self._frame(body_j, where=f"joint '{name}'.body_j")[1]
        self._record_joint(name, "spherical", body_i, body_j, point, A_j)
        return self

    def fixed(self, name, *, body_i, body_j, point=None):
        """A weld (6 equations): body j keeps its pose relative to body i as drawn, all six
        relative degrees of freedom removed. Three CD rows make the point P_i of body i and
        Q_j of body j coincide at ``point`` (global, at the initial configuration; default:
        body j's centre of mass) and three DP1 rows lock the relative rotation: pairs of
        perpendicular unit vectors (x_i, y_j), (y_i, z_j), (z_i, x_j) of the global axes at
        the initial configuration, fixed in the bodies, stay perpendicular (the rows are
        regular at the drawn relative rotation). No coordinates: ``sol.joints`` does not
        list it.
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        if point is None:
            point = self._frame(body_j, where=f"{w}.body_j")[0]
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        e = np.eye(3)
        for k, (u, v) in enumerate(((e[0], e[1]), (e[1], e[2]), (e[2], e[0]))):
            self.add_dp1(
                f"{name}.dp1_{k}",
                body_i=body_i,
                a_bar_i=self._local_dir(body_i, u, where=w),
                body_j=body_j,
                a_bar_j=self._local_dir(body_j, v, where=w),
                joint=name,
            )
        return self

    def perpendicular_1(self, name, *, body_i, body_j, axis, joint=None):
        """Perp-1: a vector c_j on body j stays perpendicular to a plane (a_i, b_i) of body i."""
        w = f"joint '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        u, v = _perpendicular_pair(n)
        c_j = self._local_dir(body_j, n, where=f"{w}.axis")
        for tag, vec in (("dp1_a", u), ("dp1_b", v)):
            self.add_dp1(
                f"{name}.{tag}",
                body_i=body_i,
                a_bar_i=self._local_dir(body_i, vec, where=f"{w}.axis"),
                body_j=body_j,
                a_bar_j=c_j,
                joint=joint or name,
            )
        return self

    def perpendicular_2(self, name, *, body_i, body_j, point, axis, joint=None):
        """Perp-2: the vector P_i Q_j stays perpendicular to a plane (a_i, b_i) of body i."""
        w = f"joint '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        u, v = _perpendicular_pair(n)
        sp = self._local_point(body_i, point, where=f"{w}.point")
        sq = self._local_point(body_j, point, where=f"{w}.point")
        for tag, vec in (("dp2_a", u), ("dp2_b", v)):
            self.add_dp2(
                f"{name}.{tag}",
                body_i=body_i,
                a_bar_i=self._local_dir(body_i, vec, where=f"{w}.axis"),
                s_bar_p_i=sp,
                body_j=body_j,
                s_bar_q_j=sq,
                joint=joint or name,
            )
        return self

    def revolute(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, limit_restitution=None, damping=0.0, stiffness=0.0,
        spring_reference=None, friction_loss=0.0, armature=None,
    ):  # fmt: skip
        """RJ = SJ + Perp-1 (5 equations): rotation about ``axis`` through ``point``.

        Coordinate: the angle of body j relative to body i about ``axis`` (right hand), zero
        where drawn. ``limits=(lower, upper)`` (rad): a compliant limit on that angle, with
        ``limit_stiffness`` (N m/rad) and ``limit_damping`` (N m s/rad) defaulting to the
        joint's effective inertia over a 0.01 s time constant (:mod:`jaxmbd.forces.joint_limits`);
        ``limit_restitution`` (in [0, 1]; None: none): the joint leaves the limit at that
        fraction of its impact rate, compliant or hard (the damper then defaults to 0).
        ``damping`` (N m s/rad), ``stiffness`` (N m/rad) about ``spring_reference`` (rad;
        None: the drawn pose) and ``friction_loss`` (N m): passive torques on that angle;
        ``armature`` (kg m^2; None: none): rotor inertia on it, kinetic energy
        1/2 armature q_dot^2 (:mod:`jaxmbd.forces.joint_dynamics`).
        """
        self._check_joint_name(name)
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=axis, joint=name)
        self._record_joint(name, "revolute", body_i, body_j, point, _axis_frame(axis))
        self._record_limits(name, limits, limit_stiffness, limit_damping, limit_restitution)
        self._record_dynamics(name, damping, stiffness, spring_reference, friction_loss,
                              armature)  # fmt: skip
        return self

    def universal(self, name, *, body_i, body_j, point, axis_i, axis_j):
        """UJ = SJ + DP1 (4 equations): perpendicular cross axes axis_i (on i), axis_j (on j).

        Coordinates: (angle_1, angle_2) with body j's rotation relative to body i
        Rx(angle_1) Ry(angle_2) in the frame x = ``axis_i``, y = ``axis_j`` (the first about
        axis_i, the second about axis_j), zero where drawn.
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        ai, aj = _unit(axis_i, where=f"{w}.axis_i"), _unit(axis_j, where=f"{w}.axis_j")
        if abs(ai @ aj) > 1e-9:
            raise ModelError(f"{w}: axis_i and axis_j must be perpendicular (dot {ai @ aj:.3g})")
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        self.add_dp1(
            f"{name}.dp1",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, ai, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, aj, where=w),
            joint=name,
        )
        y = aj - ai * (ai @ aj)  # orthonormal to round-off for the joint frame
        y = y / np.linalg.norm(y)
        self._record_joint(
            name, "universal", body_i, body_j, point, np.stack([ai, y, np.cross(ai, y)], 1)
        )
        return self

    def _cylindrical_rows(self, name, *, body_i, body_j, point, axis):
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=axis, joint=name)
        self.perpendicular_2(
            f"{name}.perp2", body_i=body_i, body_j=body_j, point=point, axis=axis, joint=name
        )
        return self

    def cylindrical(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, limit_restitution=None, damping=None, stiffness=None,
        spring_reference=None, friction_loss=None, armature=None,
    ):  # fmt: skip
        """CJ = Perp-1 + Perp-2 (4 equations): slide along and rotate about ``axis``.

        Coordinates: (slide, angle) of body j relative to body i along and about ``axis``,
        zero where drawn. Each of them is also a one-coordinate joint, ``"<name>.slide"``
        (a translational joint's slide, m) and ``"<name>.angle"`` (a revolute joint's angle,
        rad), which :meth:`add_actuator` drives and whose limits and joint dynamics the
        options set: each option is a pair (slide's, angle's), in that coordinate's units,
        a None entry (or the option None) leaves that coordinate without it. ``limits``:
        ((lower, upper) or None, (lower, upper) or None), with ``limit_stiffness`` and
        ``limit_damping`` (defaults as for :meth:`revolute`, from the effective mass along
        resp. inertia about the axis) and ``limit_restitution``; ``damping``, ``stiffness``,
        ``spring_reference`` (None: the drawn pose), ``friction_loss``, ``armature``: as for
        :meth:`translational` on the slide and :meth:`revolute` on the angle. For a body
        symmetric about the axis the two coordinates are uncoupled: each is the damped
        oscillator of its mass (resp. inertia plus armature), damping and stiffness.
        """
        self._check_joint_name(name)
        options = dict(limits=limits, limit_stiffness=limit_stiffness,
                       limit_damping=limit_damping, limit_restitution=limit_restitution,
                       damping=damping, stiffness=stiffness,
                       spring_reference=spring_reference, friction_loss=friction_loss,
                       armature=armature)  # fmt: skip
        pairs = {key: _coordinate_pair(name, key, value) for key, value in options.items()}
        self._cylindrical_rows(name, body_i=body_i, body_j=body_j, point=point, axis=axis)
        self._record_joint(name, "cylindrical", body_i, body_j, point, _axis_frame(axis))
        for k, (suffix, kind) in enumerate(CYLINDRICAL_VIEWS):
            view = f"{name}.{suffix}"
            self._record_limits(view, pairs["limits"][k], pairs["limit_stiffness"][k],
                                pairs["limit_damping"][k], pairs["limit_restitution"][k],
                                kind=kind)  # fmt: skip
            self._record_dynamics(
                view, *(0.0 if pairs[key][k] is None else pairs[key][k]
                        for key in ("damping", "stiffness")),
                pairs["spring_reference"][k],
                0.0 if pairs["friction_loss"][k] is None else pairs["friction_loss"][k],
                pairs["armature"][k],
            )  # fmt: skip
        return self

    def translational(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, limit_restitution=None, damping=0.0, stiffness=0.0,
        spring_reference=None, friction_loss=0.0, armature=None,
    ):  # fmt: skip
        """TJ = CJ + DP1 (5 equations): slide along ``axis`` without rotation.

        Coordinate: the slide of body j relative to body i along ``axis``, zero where drawn.
        ``limits=(lower, upper)`` (m): a compliant limit on the slide (N/m, N s/m gains as
        for :meth:`revolute`). ``damping`` (N s/m), ``stiffness`` (N/m) about
        ``spring_reference`` (m; None: the drawn pose) and ``friction_loss`` (N): passive
        forces on the slide; ``armature`` (kg; None: none): inertia on the slide, kinetic
        energy 1/2 armature q_dot^2 (:mod:`jaxmbd.forces.joint_dynamics`).
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        self._cylindrical_rows(name, body_i=body_i, body_j=body_j, point=point, axis=axis)
        u, v = _perpendicular_pair(_unit(axis, where=f"{w}.axis"))
        self.add_dp1(
            f"{name}.dp1",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, u, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, v, where=w),
            joint=name,
        )
        self._record_joint(name, "translational", body_i, body_j, point, _axis_frame(axis))
        self._record_limits(name, limits, limit_stiffness, limit_damping, limit_restitution)
        self._record_dynamics(name, damping, stiffness, spring_reference, friction_loss,
                              armature)  # fmt: skip
        return self

    def planar(self, name, *, body_i, body_j, point, axis, point_j=None, x_axis=None):
        """Planar pair E (3 equations, Betsch & Leyendecker Sec. 4.5.5): Perp-1 (the normal
        ``axis`` fixed in body j stays perpendicular to two vectors of body i) + DP2 (the
        vector from ``point`` on body i to ``point_j`` on body j, default ``point``, stays
        in the plane through ``point`` perpendicular to ``axis``). Leaves two translations
        in the plane and the rotation about its normal.

        Coordinates: (x, y, angle): the displacement of body j's copy of ``point`` in body
        i's in-plane axes x = ``x_axis`` (its part normal to ``axis``; default: a fixed
        perpendicular direction) and y = axis x x, and the angle about ``axis``; zero where
        drawn.
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        n = _unit(axis, where=f"{w}.axis")
        if x_axis is None:
            ex = _perpendicular_pair(n)[0]
        else:
            ex = _vec3(x_axis, where=f"{w}.x_axis", nonzero=True)
            ex = ex - n * (n @ ex)
            if np.linalg.norm(ex) < 1e-9:
                raise ModelError(f"{w}.x_axis: parallel to the normal axis")
            ex = ex / np.linalg.norm(ex)
        p_i = _vec3(point, where=f"{w}.point")
        p_j = p_i if point_j is None else _vec3(point_j, where=f"{w}.point_j")
        if abs(n @ (p_j - p_i)) > 1e-9 * max(1.0, float(np.linalg.norm(p_j - p_i))):
            raise ModelError(f"{w}: point_j is not in the plane through point normal to axis")
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=n, joint=name)
        self.add_dp2(
            f"{name}.dp2",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, n, where=w),
            s_bar_p_i=self._local_point(body_i, p_i, where=f"{w}.point"),
            body_j=body_j,
            s_bar_q_j=self._local_point(body_j, p_j, where=f"{w}.point_j"),
            joint=name,
        )
        self._record_joint(
            name, "planar", body_i, body_j, p_i, np.stack([ex, np.cross(n, ex), n], 1)
        )
        return self

    def _scalar_coordinates(self) -> list[str]:
        """The names of the one-coordinate joints and of the cylindrical joints' coordinate
        views (``"<joint>.slide"``, ``"<joint>.angle"``): what joint forces act on."""
        out = []
        for j in self._joints:
            spec = joint_kind(j.kind)
            if spec.one_coordinate:
                out.append(j.name)
            else:
                out += [f"{j.name}.{suffix}" for suffix, _ in spec.views]
        return out

    def _coordinate_joint(self, name: str):
        """The recorded joint of ``name``: a joint, or the cylindrical joint of a coordinate
        view ``"<joint>.slide"`` / ``"<joint>.angle"``."""
        spec = next((s for s in self._joints if s.name == name), None)
        if spec is None and "." in name:
            base = name.rsplit(".", 1)[0]
            spec = next((s for s in self._joints if s.name == base), None)
        if spec is None:
            raise ModelError(f"no joint {name!r}; joint coordinates: {self._scalar_coordinates()}")
        return spec

    def _joint_convention(self, name: str, *, offset, sign) -> None:
        """Report joint ``name``'s scalar coordinates as offset + sign * (value from the drawn
        pose) (MJCF: MuJoCo's qpos0 and axis directions)."""
        spec = next(j for j in self._joints if j.name == name)
        n = scalar_size(spec.kind)
        spec.offset = np.asarray(offset, dtype=np.float64).reshape(n)
        spec.sign = tuple(1 if s > 0 else -1 for s in np.reshape(sign, n))
        spec.q_start = spec.offset.copy()

    def _define_joint(
        self, name, *, kind, body_i, body_j, s_bar_i, s_bar_j, frame_i, frame_j, offset=None,
        sign=None, q_start=None, joint_space=False,
    ) -> Self:  # fmt: skip
        """A joint's coordinates from its frames given in the body frames, without rows
        (model files written by :func:`~jaxmbd.save_model`). ``joint_space``: a coordinate
        only joint space has (:class:`~.specs._JointSpec`)."""
        w = f"joint '{name}'"
        self._check_joint_name(name)
        if kind not in SIZES:
            raise ModelError(f"{w}.type: unknown joint type {kind!r}; known: {sorted(SIZES)}")
        self._frame(body_i, where=f"{w}.body_i")
        self._frame(body_j, where=f"{w}.body_j")
        if body_i == body_j:
            raise ModelError(f"{w}: body_i and body_j are both {body_i!r}")
        n, nq = scalar_size(kind), SIZES[kind][0]
        offset = np.zeros(n) if offset is None else _joint_values(offset, n, where=f"{w}.offset")
        sign = [1] * n if sign is None else sign
        if (
            not isinstance(sign, list | tuple)
            or len(sign) != n
            or any(isinstance(v, bool) or v not in (1, -1) for v in sign)
        ):
            raise ModelError(f"{w}.sign: expected {n} entries, each 1 or -1, got {_short(sign)}")
        if q_start is None:
            q_start = joint_kind(kind).drawn_q(offset).copy()
        self._joints.append(
            _JointSpec(
                name=name,
                kind=kind,
                body_i=body_i,
                body_j=body_j,
                s_bar_i=_vec3(s_bar_i, where=f"{w}.s_bar_i"),
                s_bar_j=_vec3(s_bar_j, where=f"{w}.s_bar_j"),
                frame_i=_rotation_matrix(frame_i, where=f"{w}.frame_i")[0],
                frame_j=_rotation_matrix(frame_j, where=f"{w}.frame_j")[0],
                offset=offset,
                sign=tuple(int(v) for v in sign),
                q_start=_joint_values(
                    q_start, nq, where=f"{w}.q_start", quaternion=joint_kind(kind).quaternion
                ),
                joint_space=bool(joint_space),
            )
        )
        return self

    def set_joint_state(self, name: str, *, q=None, qdot=None) -> Self:
        """Set the initial state of joint ``name`` in its coordinates (as ``sol.joints[name]``
        reports them, see :mod:`jaxmbd.model.joints`); applied by :meth:`build`.

        ``q``: revolute, translational: a number; cylindrical: (slide, angle); universal:
        (angle_1, angle_2); spherical: a quaternion (w, x, y, z) (normalised; zero refused);
        planar: (x, y, angle). ``qdot``: the rates, of the same sizes, except spherical: the
        relative angular velocity (3,) in body j's frame. Left out (None), ``q`` keeps the
        pose the joint was drawn in (its zero) and ``qdot`` the bodies' relative velocity.

        At :meth:`build`, parent joints first, each set joint places its child body (the one
        farther from the ground in the spanning tree of the body graph) relative to its
        parent so that the joint reads (q, qdot), whichever of body_i, body_j that is; the
        child's subtree moves with it rigidly, keeping its own motion relative to the child
        (so joints deeper in a chain keep their coordinates). Only joints of the spanning
        tree can be set: one that closes a loop (its bodies already joined by the joints
        added before it) is refused by :meth:`build`; set the loop's other joints, and the
        consistent start of :func:`~jaxmbd.simulate` closes the loop, which may shift the
        set coordinates a little (``sol.joints[name]`` at t = 0 reports the actual value).
        Setting a joint again replaces its state.
        """
        spec = next((j for j in self._joints if j.name == name), None)
        if spec is None:
            raise ModelError(
                f"set_joint_state: unknown joint {name!r}; joints with coordinates: "
                f"{[j.name for j in self._joints]} (add the joint first)"
            )
        where = f"set_joint_state: joint '{name}' ({spec.kind})"
        if q is None and qdot is None:
            raise ModelError(f"{where}: give q, qdot or both")
        nq, nv = SIZES[spec.kind]
        self._joint_states[name] = (
            None
            if q is None
            else _joint_values(
                q, nq, where=f"{where}.q", quaternion=joint_kind(spec.kind).quaternion
            ),
            None if qdot is None else _joint_values(qdot, nv, where=f"{where}.qdot"),
        )
        return self
