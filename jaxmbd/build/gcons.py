"""GCONs (paper 1 eqs. 1-4), rotation and translation drivers: constraint rows between two
bodies."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..gcons import gcon_kind
from ..model._values import (
    _numbers,
    _perpendicular_pair,
    _short,
    _unit,
    _vec3,
)
from ..model.drivers import Expression
from .specs import _GconSpec


class _GconBuilder:
    """The GCON methods of :class:`~jaxmbd.ModelBuilder`."""

    def _add_gcon(self, name, kind, body_i, body_j, vectors, f, joint=None):
        where = f"constraint '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"constraint name must be a non-empty string, got {name!r}")
        if any(g.name == name for g in self._gcons):
            raise ModelError(f"{where}: duplicate constraint name")
        self._frame(body_i, where=f"{where}.body_i")
        self._frame(body_j, where=f"{where}.body_j")
        if body_i == body_j:
            raise ModelError(f"{where}: body_i and body_j are both {body_i!r}")
        nonzero = {"a_bar_i", "a_bar_j", "c", "u_bar_i", "v_bar_i"}
        checked = {
            key: _vec3(val, where=f"{where}.{key}", nonzero=key in nonzero)
            for key, val in vectors.items()
        }
        if isinstance(f, str):
            expr = Expression(f, where=f"{where}.f")
            expr.check_finite_at_start(where=f"{where}.f")
            f_value: Expression | float = expr.value_at_start() if expr.is_constant else expr
        elif isinstance(f, Expression):
            f_value = f
        else:
            f_arr = _numbers(f, where=f"{where}.f", expected="a number or an expression in t")
            if f_arr.shape != ():
                raise ModelError(f"{where}.f: expected a number or an expression, got {_short(f)}")
            f_value = float(f_arr)
        if gcon_kind(kind).positive_f and not isinstance(f_value, Expression) and f_value <= 0:
            raise ModelError(f"{where}.f: a distance constraint needs f = C^2 > 0, got {f_value}")
        self._gcons.append(_GconSpec(name, kind, body_i, body_j, checked, f_value, joint or name))
        return self

    def add_dp1(self, name, *, body_i, a_bar_i, body_j, a_bar_j, f=0.0, joint=None):
        """DP1 (eq. 1): a_bar_i^T A_i^T A_j a_bar_j = f(t)."""
        return self._add_gcon(
            name, "DP1", body_i, body_j, {"a_bar_i": a_bar_i, "a_bar_j": a_bar_j}, f, joint
        )

    def add_dp2(self, name, *, body_i, a_bar_i, s_bar_p_i, body_j, s_bar_q_j, f=0.0, joint=None):
        """DP2 (eq. 2): a_bar_i^T A_i^T d_ij = f(t)."""
        return self._add_gcon(
            name,
            "DP2",
            body_i,
            body_j,
            {"a_bar_i": a_bar_i, "s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j},
            f,
            joint,
        )

    def add_d(self, name, *, body_i, s_bar_p_i, body_j, s_bar_q_j, f, joint=None):
        """D (eq. 3): d_ij^T d_ij = f(t) > 0."""
        return self._add_gcon(
            name, "D", body_i, body_j, {"s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j}, f, joint
        )

    def add_cd(self, name, *, c, body_i, s_bar_p_i, body_j, s_bar_q_j, f=0.0, joint=None):
        """CD (eq. 4): c^T d_ij = f(t)."""
        return self._add_gcon(
            name,
            "CD",
            body_i,
            body_j,
            {"c": c, "s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j},
            f,
            joint,
        )

    def add_rot(self, name, *, body_i, u_bar_i, v_bar_i, body_j, a_bar_j, angle, joint=None):
        """Rotation driver at GCON level: the angle of a_j from u_i towards v_i is angle(t).

        ``u_bar_i`` and ``v_bar_i`` must be orthonormal; the rotation axis is u_i x v_i.
        """
        where = f"constraint '{name}'"
        u = _vec3(u_bar_i, where=f"{where}.u_bar_i", nonzero=True)
        v = _vec3(v_bar_i, where=f"{where}.v_bar_i", nonzero=True)
        if (
            abs(np.linalg.norm(u) - 1) > 1e-9
            or abs(np.linalg.norm(v) - 1) > 1e-9
            or abs(u @ v) > 1e-9
        ):
            raise ModelError(f"{where}: u_bar_i and v_bar_i must be orthonormal")
        return self._add_gcon(
            name,
            "ROT",
            body_i,
            body_j,
            {"u_bar_i": u, "v_bar_i": v, "a_bar_j": a_bar_j},
            angle,
            joint,
        )

    def rotation_driver(self, name, *, body_i, body_j, axis, angle, reference=None):
        """Prescribe the rotation angle(t) of body j relative to body i about ``axis``.

        The angle is measured from the initial configuration when ``angle(0) = 0``: the
        reference direction (default: any vector perpendicular to ``axis``) is taken on both
        bodies at the initial pose. Regular at every angle (see :mod:`jaxmbd.gcons`).
        """
        w = f"driver '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        if reference is None:
            u, v = _perpendicular_pair(n)
        else:
            u = _vec3(reference, where=f"{w}.reference", nonzero=True)
            u = u - n * (n @ u)
            if np.linalg.norm(u) < 1e-9:
                raise ModelError(f"{w}.reference: parallel to the axis")
            u /= np.linalg.norm(u)
            v = np.cross(n, u)
        return self.add_rot(
            name,
            body_i=body_i,
            u_bar_i=self._local_dir(body_i, u, where=w),
            v_bar_i=self._local_dir(body_i, v, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, u, where=w),
            angle=angle,
        )

    def translation_driver(self, name, *, body_i, body_j, axis, displacement, point=None):
        """Prescribe the displacement(t) of body j relative to body i along ``axis``.

        One DP2 row (eq. 2): a_i^T d_ij = displacement(t), with a_i the unit ``axis`` fixed
        in body i and d_ij the vector from the point P (fixed in body i) to Q (fixed in body
        j), both at ``point`` (global, at the initial configuration; default: body j's
        centre of mass): the displacement is measured from the initial configuration, so a
        consistent start has displacement(0) = 0 (else the start's assembly moves the
        bodies there). ``displacement``: a number or an expression in t, as the angle of
        :meth:`rotation_driver` (e.g. ``"0.02*sin(4*pi*t)"``). It prescribes that one
        coordinate only: the other relative motions are left to joints (e.g. a
        :meth:`translational` joint along the same axis).
        """
        w = f"driver '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        if point is None:
            point = self._frame(body_j, where=f"{w}.body_j")[0]
        return self.add_dp2(
            name,
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, n, where=f"{w}.axis"),
            s_bar_p_i=self._local_point(body_i, point, where=f"{w}.point"),
            body_j=body_j,
            s_bar_q_j=self._local_point(body_j, point, where=f"{w}.point"),
            f=displacement,
        )
