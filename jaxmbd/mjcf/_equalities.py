"""MJCF equality constraints (``<equality>``: connect, weld, joint, tendon; active or not).

Every equality becomes a :mod:`jaxmbd.joint_space.equalities` constraint of ``model.equalities``,
with
MuJoCo's compiled data (``eq_data``: anchors, the relative pose that the compiler fills
from ``qpos0``, torquescale, polycoef), ``eq_solref``, ``eq_solimp`` and the diagonal
approximation of ``mj_diagApprox`` (bodies', dofs' ``invweight0``), on the tree's bodies
(a jointless body's anchor and frame carried into the body that owns it). The ``"joint"``
formulation runs them. For the absolute formulations an active connect is also a spherical
joint at the anchor and an active weld a fixed joint at the relative pose of ``qpos0``
(GCON rows of the equality's name); a joint or tendon coupling, and a connect or weld that does not
hold at ``qpos0`` (an explicit ``relpose``, sites apart), make the model joint-space only
(``Model.joint_space_only`` says which).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compiled.host_arrays import device_array
from ..errors import ModelError
from ..joint_space.equalities import Connect, JointCoupling, TendonCoupling, Weld
from ..model import GROUND
from ..tree.constraint_rows import Softness
from ._joints import _joint_type, _name, _rot_lock_vectors

logger = logging.getLogger("jaxmbd")

#: The residual at qpos0 below which a connect or weld holds there (metres, radians).
HOLDS_AT_QPOS0 = 1e-9


def _quat_matrix(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


class _Bodies:
    """MuJoCo bodies on the tree: each body's owner (the tree body it is welded into, -1:
    the world) and its frame in the owner's frame at qpos0."""

    def __init__(self, m, d0, roots, owner):
        self.m, self.d0 = m, d0
        self.index = {b: k for k, b in enumerate(roots)}
        self.owner = owner

    def tree_body(self, b: int) -> int:
        o = int(self.owner[b])
        return -1 if o < 0 else self.index[o]

    def in_owner(self, b: int, point, rot):
        """(point, rotation) given in body b's frame, in its owner's frame."""
        d0 = self.d0
        o = int(self.owner[b])
        x_b, R_b = d0.xpos[b], d0.xmat[b].reshape(3, 3)
        x_o, R_o = (np.zeros(3), np.eye(3)) if o < 0 else (d0.xpos[o], d0.xmat[o].reshape(3, 3))
        return R_o.T @ (x_b + R_b @ point - x_o), R_o.T @ R_b @ rot


def _objects(mujoco, m, e: int):
    """(body1, body2, site1, site2) of a connect or weld (sites None for body semantics)."""
    o1, o2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    if int(m.eq_objtype[e]) == int(mujoco.mjtObj.mjOBJ_SITE):
        return int(m.site_bodyid[o1]), int(m.site_bodyid[o2]), o1, o2
    return o1, o2, None, None


def _connect(mujoco, m, e, name, bodies: _Bodies, params, active, tendons):
    b1, b2, s1, s2 = _objects(mujoco, m, e)
    data = np.asarray(m.eq_data[e], dtype=np.float64)
    a1 = data[0:3] if s1 is None else np.asarray(m.site_pos[s1])
    a2 = data[3:6] if s2 is None else np.asarray(m.site_pos[s2])
    p1, _ = bodies.in_owner(b1, a1, np.eye(3))
    p2, _ = bodies.in_owner(b2, a2, np.eye(3))
    return Connect(name=name, body1=bodies.tree_body(b1), body2=bodies.tree_body(b2),
                   anchor1=device_array(p1), anchor2=device_array(p2), parameters=params,
                   active=active)  # fmt: skip


def _weld(mujoco, m, e, name, bodies: _Bodies, params, active, tendons):
    b1, b2, s1, s2 = _objects(mujoco, m, e)
    data = np.asarray(m.eq_data[e], dtype=np.float64)
    if s1 is None:  # body 1 carries the relative pose, body 2 the anchor
        a1, f1 = data[3:6], _quat_matrix(data[6:10])
        a2, f2 = data[0:3], np.eye(3)
    else:
        a1, f1 = np.asarray(m.site_pos[s1]), _quat_matrix(m.site_quat[s1])
        a2, f2 = np.asarray(m.site_pos[s2]), _quat_matrix(m.site_quat[s2])
    p1, F1 = bodies.in_owner(b1, a1, f1)
    p2, F2 = bodies.in_owner(b2, a2, f2)
    return Weld(name=name, body1=bodies.tree_body(b1), body2=bodies.tree_body(b2),
                anchor1=device_array(p1), anchor2=device_array(p2), frame1=device_array(F1),
                frame2=device_array(F2), torquescale=device_array(data[10]),
                parameters=params, active=active)  # fmt: skip


def _joint(mujoco, m, e, name, bodies: _Bodies, params, active, tendons):
    joints = [int(m.eq_obj1id[e]), int(m.eq_obj2id[e])]
    for j in joints:
        if j >= 0 and not _joint_type(mujoco, m, j).coordinate:
            jname = _name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
            raise ModelError(
                f"equality joint '{name}': joint '{jname}' is not a hinge or slide (MuJoCo "
                "couples a joint's first qpos entry; only scalar joints are supported)"
            )
    a1 = int(m.jnt_qposadr[joints[0]])
    a2 = int(m.jnt_qposadr[joints[1]]) if joints[1] >= 0 else -1
    qpos0 = np.asarray(m.qpos0, dtype=np.float64)
    return JointCoupling(name=name, address1=a1, address2=a2, ref1=device_array(qpos0[a1]),
                         ref2=device_array(qpos0[a2] if a2 >= 0 else 0.0),
                         polycoef=device_array(m.eq_data[e][:5], np.float64),
                         parameters=params, active=active)  # fmt: skip


def _tendon(mujoco, m, e, name, bodies: _Bodies, params, active, tendons):
    ids = [k for k in (int(m.eq_obj1id[e]), int(m.eq_obj2id[e])) if k >= 0]
    names = [_name(mujoco, m, mujoco.mjtObj.mjOBJ_TENDON, k, "tendon") for k in ids]
    if tendons is None or any(n not in tendons.names for n in names):
        raise ModelError(f"equality tendon '{name}': tendons {names} are not read")
    return TendonCoupling(name=name, tendons=tendons.subset([tendons.index(n) for n in names]),
                          length0=device_array([m.tendon_length0[k] for k in ids]),
                          polycoef=device_array(m.eq_data[e][:5], np.float64),
                          parameters=params, active=active)  # fmt: skip


def _body_weights(mujoco, m, e: int, size: int) -> np.ndarray:
    """``mj_diagApprox`` of a connect or weld: the bodies' translational then rotational
    ``body_invweight0``."""
    b1, b2, _, _ = _objects(mujoco, m, e)
    w = np.asarray(m.body_invweight0).reshape(-1, 2)
    tran, rot = w[b1, 0] + w[b2, 0], w[b1, 1] + w[b2, 1]
    return np.asarray([tran] * 3 + [rot] * (size - 3))


def _dof_weights(mujoco, m, e: int, size: int) -> np.ndarray:
    """``mj_diagApprox`` of a joint coupling: its joints' dofs' ``dof_invweight0``."""
    return np.full(size, sum(float(m.dof_invweight0[m.jnt_dofadr[j]]) for j in _coupled(m, e)))


def _tendon_weights(mujoco, m, e: int, size: int) -> np.ndarray:
    """``mj_diagApprox`` of a tendon coupling: its tendons' ``tendon_invweight0``."""
    return np.full(size, sum(float(m.tendon_invweight0[k]) for k in _coupled(m, e)))


def _coupled(m, e: int) -> list[int]:
    """The objects of equality e (the second one where there is one)."""
    return [k for k in (int(m.eq_obj1id[e]), int(m.eq_obj2id[e])) if k >= 0]


def _spherical(builder, name, i, j, anchor):
    """A connect's joint for the absolute formulations: spherical at the anchor."""
    builder.spherical(name, body_i=i, body_j=j, point=anchor)


def _fixed(builder, name, i, j, anchor):
    """A weld's joint for the absolute formulations: the spherical rows at the anchor and
    three DP1 rows that lock the relative rotation at the reference pose."""
    builder._spherical_rows(name, body_i=i, body_j=j, point=anchor)
    A_i = builder._frame(i, where=name)[1]
    A_j = builder._frame(j, where=name)[1]
    for k, (a_i, a_j) in enumerate(_rot_lock_vectors(A_i, A_j)):
        builder.add_dp1(f"{name}.dp1_{k}", body_i=i, a_bar_i=a_i, body_j=j, a_bar_j=a_j,
                        joint=name)  # fmt: skip


@dataclass(frozen=True)
class _EqualityKind:
    """How one MuJoCo equality type is read. ``make(mujoco, m, e, name, bodies, params,
    active, tendons)``: its constraint; ``size``: its rows; ``weights(mujoco, m, e, size)``:
    its ``mj_diagApprox`` rows. ``joint(builder, name, i, j, anchor)``: the GCON joint of an
    equality of two bodies' frames for the absolute formulations (MuJoCo's velocity product
    term in its reference acceleration, too); None for a coupling of joint coordinates,
    whose ``couples`` says what it couples (the model is then joint-space only)."""

    make: Callable
    size: int
    weights: Callable
    joint: Callable | None = None
    couples: str = ""


#: The equality types read, by MuJoCo's ``mjtEq`` name.
_KINDS = {
    "mjEQ_CONNECT": _EqualityKind(_connect, 3, _body_weights, joint=_spherical),
    "mjEQ_WELD": _EqualityKind(_weld, 6, _body_weights, joint=_fixed),
    "mjEQ_JOINT": _EqualityKind(_joint, 1, _dof_weights, couples="joint coordinates"),
    "mjEQ_TENDON": _EqualityKind(_tendon, 1, _tendon_weights, couples="tendon lengths"),
}


def _kind(mujoco, m, e: int) -> _EqualityKind | None:
    """The record of equality e's type, None where it is not read."""
    return _KINDS.get(mujoco.mjtEq(int(m.eq_type[e])).name)


def equalities_of(mujoco, m, d0, roots, owner, tendons=None):
    """(the model's equality constraints, the joint-space-only reasons they add): every
    equality of ``m`` of a supported type, active or not, on the tree bodies ``roots``
    (MuJoCo body ids) with ``owner`` (the tree body each MuJoCo body belongs to);
    ``tendons``: the model's :class:`~jaxmbd.tendons.Tendons` (by name)."""
    bodies = _Bodies(m, d0, roots, owner)
    refsafe = not (m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_REFSAFE))
    out, reasons = [], []
    for e in range(m.neq):
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "equality")
        kind = _kind(mujoco, m, e)
        if kind is None:
            continue  # named by unsupported_equalities
        params = Softness(
            device_array(m.eq_solref[e], np.float64),
            device_array(m.eq_solimp[e], np.float64),
            device_array(kind.weights(mujoco, m, e, kind.size)),
            refsafe=refsafe,
            velocity_product=kind.joint is not None,
        )
        active = bool(m.eq_active0[e])
        out.append(kind.make(mujoco, m, e, name, bodies, params, active, tendons))
        if kind.joint is None and active:
            reasons.append(
                f"equality '{name}' couples {kind.couples} (a constraint of joint coordinates, "
                "which the absolute formulations do not have)"
            )
    return tuple(out), reasons


def unsupported_equalities(mujoco, m) -> list[str]:
    """The unsupported-features clauses of the equalities that are not read (flex, ...)."""
    out = []
    for e in range(m.neq):
        if _kind(mujoco, m, e) is None:
            name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "equality")
            kind = mujoco.mjtEq(int(m.eq_type[e])).name.removeprefix("mjEQ_").lower()
            out.append(f"equality '{name}' of type {kind}")
    return out


def _holds_at_qpos0(mujoco, m, d0, e: int) -> bool:
    """Whether connect or weld e's MuJoCo residual vanishes at qpos0 (``efc_pos``)."""
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    d.eq_active[:] = 0
    d.eq_active[e] = 1
    mujoco.mj_forward(m, d)
    rows = np.asarray(d.efc_pos[: d.ne])
    return bool(rows.size == 0 or np.max(np.abs(rows)) < HOLDS_AT_QPOS0)


def add_equality_joints(mujoco, m, d0, builder, label, reasons: list[str]):
    """The GCON joints of the active connects and welds for the absolute formulations (a
    spherical joint at the anchor, a fixed joint at the relative pose of qpos0), named as
    the equality; ``reasons`` gets why the model is joint-space only where one does not
    hold at qpos0."""
    for e in range(m.neq):
        kind = _kind(mujoco, m, e)
        if not m.eq_active0[e] or kind is None or kind.joint is None:
            continue
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "equality")
        b1, b2, s1, _ = _objects(mujoco, m, e)
        i, j = label(b1), label(b2)
        if i == j:
            continue  # inside one rigid body: rows of no effect
        if not _holds_at_qpos0(mujoco, m, d0, e):
            reasons.append(
                f"equality '{name}' does not hold at qpos0 (an explicit relpose or anchors "
                "apart; the absolute formulations build connect and weld at qpos0)"
            )
            continue
        if s1 is None:
            R1 = d0.xmat[b1].reshape(3, 3)
            anchor = d0.xpos[b1] + R1 @ np.asarray(m.eq_data[e][:3])
        else:
            anchor = np.asarray(d0.site_xpos[s1])
        kind.joint(builder, name, i, j, anchor)


def tendons_of(builder):
    """The builder's tendons as :class:`~jaxmbd.tendons.Tendons` on its bodies (None
    without tendons): the geometry that tendon couplings read in joint space."""
    index = {b.name: k for k, b in enumerate(builder._bodies)}
    index[GROUND] = len(builder._bodies)  # as the builder's own index: the world's row
    return builder._tendon_geometry(index, ())
