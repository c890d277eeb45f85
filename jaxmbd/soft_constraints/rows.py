"""MuJoCo's constraint rows (``efc_*``), vectorised over fixed-size groups of slots.

Each builder reproduces one ``mj_instantiate*`` function of ``src/engine/engine_core_constraint.c``
(MuJoCo 4.0, dense Jacobians) together with the rows' parameters of ``mj_diagApprox``,
``mj_makeImpedance`` and ``mj_referenceConstraint`` (MuJoCo documentation, Computation >
Constraint model, Soft constraints). A group has one slot per row that MuJoCo could create; a
slot that MuJoCo would not include this step (a limit not within its margin, a contact slot
without a contact) stays in the arrays with ``active=False``, J = 0, vel = aref = 0 (so it exerts
no force in any solver) and finite parameters. :func:`concatenate` joins groups and
:func:`mujoco_order` sorts the active rows into MuJoCo's ``efc`` order.

The static data of a group (which dofs, joints, tendons; their solref, solimp, invweight0) is a
``*Spec`` record that ``from_model`` reads from a ``mujoco.MjModel`` at load time (numpy arrays;
this module does not import mujoco); the state (qpos, qvel, tendon lengths and Jacobians,
contacts and their Jacobians) comes in as arrays.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.small import _sum_along
from .parameters import (
    MIN_VALUE,
    SoftOptions,
    adjusted_diag,
    clamp_solimp,
    contact_diag_approx,
    contact_regulariser,
    impedance,
    reference_acceleration,
    reference_gains,
    regulariser,
    safe_solref,
)
from .problem import product_sum


class ConstraintType(enum.IntEnum):
    """MuJoCo's ``mjtConstraint`` (the values of ``efc_type``)."""

    EQUALITY = 0
    FRICTION_DOF = 1
    FRICTION_TENDON = 2
    LIMIT_JOINT = 3
    LIMIT_TENDON = 4
    CONTACT_FRICTIONLESS = 5
    CONTACT_PYRAMIDAL = 6
    CONTACT_ELLIPTIC = 7


# mjtJoint values and mjtDisableBit bits the specs read
_BALL, _SLIDE, _HINGE = 1, 2, 3
_DISABLE_EQUALITY, _DISABLE_FRICTIONLOSS, _DISABLE_LIMIT, _DISABLE_CONTACT = 2, 4, 8, 16


class ConstraintRows(eqx.Module):
    """n constraint rows as MuJoCo's ``efc_*`` arrays hold them (final).

    ``J`` (n, nv) ``efc_J``; ``pos``, ``margin``, ``frictionloss`` ``efc_pos``, ``efc_margin``,
    ``efc_frictionloss``; ``type``, ``id`` ``efc_type`` (:class:`ConstraintType`), ``efc_id``;
    ``active``: the row is one MuJoCo includes this step. ``diag_approx``: ``mj_diagApprox``'s
    value; ``KBIP`` (n, 4) ``efc_KBIP`` (stiffness, damping, impedance, impedance slope);
    ``R``, ``D`` = 1 / R ``efc_R``, ``efc_D``; ``diag_a`` ``efc_diagA`` (R d / (1 - d), after
    ``mj_makeImpedance``); ``mu``: a contact row's regularised cone mu (``mjContact.mu``), 0 for
    others; ``vel`` = J qvel ``efc_vel`` and ``aref`` ``efc_aref``, None without qvel."""

    J: jax.Array
    pos: jax.Array
    margin: jax.Array
    frictionloss: jax.Array
    type: jax.Array
    id: jax.Array
    active: jax.Array
    diag_approx: jax.Array
    KBIP: jax.Array
    R: jax.Array
    D: jax.Array
    diag_a: jax.Array
    mu: jax.Array
    vel: jax.Array | None
    aref: jax.Array | None

    @property
    def size(self) -> int:
        return self.pos.shape[0]


def _finish(
    *,
    J,
    pos,
    margin,
    frictionloss,
    type,
    id,
    active,
    diag_approx,
    solref,
    solimp,
    imp_pos,
    imp_margin,
    frictional,
    qvel,
    options: SoftOptions,
    R=None,
    mu=None,
    imp=None,
) -> ConstraintRows:
    """Parameters of rows (``mj_makeImpedance``, ``mj_referenceConstraint``) from per-row
    solref (already ``safe_solref``), solimp, and the position and margin that set the
    impedance (a group's first row, or its norm). ``frictional`` rows have K = 0; ``R``
    overrides the regulariser (contacts' friction scaling); ``imp``: the rows' (impedance,
    slope) where the caller has them already (a contact's rows share its own)."""
    n = pos.shape[0]
    solimp = clamp_solimp(solimp)
    imp, imp_slope = impedance(imp_pos, imp_margin, solimp) if imp is None else imp
    stiffness, damping = reference_gains(solref, solimp[:, 1])
    stiffness = jnp.where(frictional, 0.0, stiffness)
    if R is None:
        R = regulariser(imp, diag_approx)
    active = jnp.asarray(active, dtype=bool)
    J = jnp.where(active[:, None], J, 0.0)
    vel = aref = None
    if qvel is not None:
        # in chunks: one reduction over many rows is a library fusion that stops the rows'
        # native call (hoisted_call)
        vel = product_sum(jnp.multiply, (J, qvel[None, :]), -1)
        aref = reference_acceleration(vel, pos, margin, stiffness, damping, imp)
        aref = jnp.where(active, aref, 0.0)
    return ConstraintRows(
        J=J,
        pos=pos,
        margin=margin,
        frictionloss=jnp.broadcast_to(jnp.asarray(frictionloss, dtype=jnp.float64), (n,)),
        type=jnp.broadcast_to(jnp.asarray(type, dtype=jnp.int32), (n,)),
        id=jnp.broadcast_to(jnp.asarray(id, dtype=jnp.int32), (n,)),
        active=active,
        diag_approx=diag_approx,
        KBIP=jnp.stack([stiffness, damping, imp, imp_slope], axis=-1),
        R=R,
        D=1 / R,
        diag_a=adjusted_diag(R, imp),
        mu=jnp.zeros(n) if mu is None else mu,
        vel=vel,
        aref=aref,
    )


def _nonempty(J):
    # dense mj_addConstraint skips a non-contact row whose Jacobian is all zeros
    return jnp.any(J != 0, axis=-1)


def _f64(x, shape=None):
    x = np.asarray(x, dtype=np.float64)
    return x if shape is None else x.reshape(shape)


# --------------------------------------------------------------------------- equality


def _joint_invweight(m):
    return _f64(m.dof_invweight0)[np.asarray(m.jnt_dofadr)]


def _tendon_invweight(m):
    return _f64(m.tendon_invweight0)


#: MuJoCo's equality kinds: (``mjtEq`` value, rows, the objects' invweight0 of a coupling;
#: None: two bodies, translational then rotational rows)
_EQUALITY_KINDS = {
    "connect": (0, 3, None),
    "weld": (1, 6, None),
    "joint": (2, 1, _joint_invweight),
    "tendon": (3, 1, _tendon_invweight),
}


class EqualitySpec(eqx.Module):
    """The equality constraints of one kind ("connect", "weld", "joint", "tendon"; none under
    ``<flag equality="disable"/>``): ``eq_id`` (k,), ``solref`` ``eq_solref``, ``solimp``
    ``eq_solimp``, ``diag_approx`` (k, rows) of ``mj_diagApprox`` (connect, weld: the bodies'
    ``body_invweight0``, of the sites' bodies for site semantics; joint, tendon: the objects'
    ``dof_invweight0`` or ``tendon_invweight0``)."""

    eq_id: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    diag_approx: np.ndarray
    kind: str = eqx.field(static=True, kw_only=True)

    @property
    def rows_per_constraint(self) -> int:
        return _EQUALITY_KINDS[self.kind][1]

    @classmethod
    def from_model(cls, m, kind: str) -> EqualitySpec:
        eq_type, dim, coupling_weight = _EQUALITY_KINDS[kind]
        on = not (int(m.opt.disableflags) & _DISABLE_EQUALITY)
        ids = np.flatnonzero(np.asarray(m.eq_type) == eq_type) if on else np.zeros(0, int)
        obj1, obj2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
        if coupling_weight is None:
            site = np.asarray(m.eq_objtype)[ids] == 6  # mjOBJ_SITE
            site_body = np.asarray(m.site_bodyid)
            b1 = np.where(site, site_body[np.where(site, obj1, 0)], obj1)
            b2 = np.where(site, site_body[np.where(site, obj2, 0)], obj2)
            w = _f64(m.body_invweight0, (-1, 2))
            tran, rot = w[b1, 0] + w[b2, 0], w[b1, 1] + w[b2, 1]
            parts = [tran] * 3 + [rot] * (dim - 3)
            diag = np.stack(parts, axis=-1) if ids.size else np.zeros((0, dim))
        else:
            weight = coupling_weight(m)
            diag = weight[obj1] + np.where(obj2 >= 0, weight[np.maximum(obj2, 0)], 0.0)
            diag = diag.reshape(-1, 1)
        return cls(
            ids,
            _f64(m.eq_solref, (-1, 2))[ids],
            _f64(m.eq_solimp, (-1, 5))[ids],
            diag,
            kind=kind,
        )


def equality_rows(
    spec: EqualitySpec, J, pos, qvel=None, *, options: SoftOptions, active=None, jdot_qvel=None
) -> ConstraintRows:
    """Rows of k equality constraints of one kind (``mj_instantiateEquality``), each
    constraint's rows consecutive (k * rows in all: connect 3, weld 6, joint and tendon 1).

    ``J`` (k, rows, nv) and ``pos`` (k, rows): the constraint's Jacobian and violation, as
    jaxmbd's kinematics computes them (connect: anchor of body 1 minus anchor of body 2;
    weld: that, then the orientation error scaled by torquescale; joint, tendon: the
    polynomial coupling's residual). ``active`` (k,): ``eq_active`` (default all).
    ``jdot_qvel`` (k, rows): J_dot qvel, which ``mj_referenceConstraint`` subtracts from aref of
    connect and weld rows (``mj_Jdotv``); None leaves it out. The impedance is set by
    |pos| of the whole constraint (``getposdim``), margin 0."""
    k, dim = spec.eq_id.shape[0], spec.rows_per_constraint
    J = jnp.asarray(J)
    nv = J.shape[-1]
    J, pos = J.reshape(k, dim, nv), jnp.asarray(pos).reshape(k, dim)
    active = jnp.ones(k, bool) if active is None else jnp.asarray(active, dtype=bool)
    # getposdim: the norm of a connect's or weld's rows (below mjMINVAL taken as 0, which
    # changes d by less than 1e-15 and keeps the gradient finite)
    size = _normalize(pos)[1] if dim > 1 else pos[:, 0]
    # dense mj_addConstraint skips a constraint whose Jacobian is all zeros
    active = active & jnp.any(J.reshape(k, dim * nv) != 0, axis=1)

    def each(x):
        return jnp.repeat(jnp.asarray(x), dim, axis=0)

    flat_pos = pos.reshape(k * dim)
    zeros = jnp.zeros(k * dim)
    rows = _finish(
        J=J.reshape(k * dim, nv),
        pos=flat_pos,
        margin=zeros,
        frictionloss=0.0,
        type=ConstraintType.EQUALITY,
        id=each(spec.eq_id),
        active=each(active),
        diag_approx=jnp.asarray(spec.diag_approx).reshape(k * dim),
        solref=safe_solref(each(spec.solref), timestep=options.timestep, refsafe=options.refsafe),
        solimp=each(spec.solimp),
        imp_pos=each(size),
        imp_margin=zeros,
        frictional=False,
        qvel=qvel,
        options=options,
    )
    if jdot_qvel is not None and rows.aref is not None:
        correction = jnp.asarray(jdot_qvel).reshape(k * dim)
        aref = jnp.where(rows.active, rows.aref - correction, 0.0)
        rows = eqx.tree_at(lambda r: r.aref, rows, aref)
    return rows


# --------------------------------------------------------------------------- friction loss


class DofFrictionSpec(eqx.Module):
    """The dofs with friction loss (``dof_frictionloss != 0``; none under
    ``<flag frictionloss="disable"/>``): ``dof`` (k,), ``frictionloss``, ``solref`` (k, 2)
    ``dof_solref``, ``solimp`` (k, 5) ``dof_solimp``, ``invweight`` ``dof_invweight0``."""

    dof: np.ndarray
    frictionloss: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    invweight: np.ndarray
    nv: int = eqx.field(static=True, kw_only=True)

    @classmethod
    def from_model(cls, m) -> DofFrictionSpec:
        on = not (int(m.opt.disableflags) & _DISABLE_FRICTIONLOSS)
        dof = np.flatnonzero(np.asarray(m.dof_frictionloss) != 0) if on else np.zeros(0, int)
        return cls(
            dof,
            _f64(m.dof_frictionloss)[dof],
            _f64(m.dof_solref, (-1, 2))[dof],
            _f64(m.dof_solimp, (-1, 5))[dof],
            _f64(m.dof_invweight0)[dof],
            nv=int(m.nv),
        )


def dof_friction_rows(spec: DofFrictionSpec, qvel=None, *, options: SoftOptions):
    """Friction-loss rows of dofs (``mj_instantiateFriction``): J = e_dof, pos = margin = 0,
    ``efc_frictionloss`` = ``dof_frictionloss``, K = 0, diagApprox = ``dof_invweight0``."""
    J = jax.nn.one_hot(spec.dof, spec.nv, dtype=jnp.float64)
    active = jnp.ones(spec.dof.shape[0], dtype=bool)
    return _friction_rows(spec, J, ConstraintType.FRICTION_DOF, spec.dof, active, qvel, options)


def _friction_rows(spec, J, type, id, active, qvel, options: SoftOptions) -> ConstraintRows:
    """Friction-loss rows with Jacobian J (``mj_instantiateFriction``): pos = margin = 0,
    K = 0, ``efc_frictionloss`` and diagApprox from the spec."""
    zeros = jnp.zeros(J.shape[0])
    return _finish(
        J=J,
        pos=zeros,
        margin=zeros,
        frictionloss=spec.frictionloss,
        type=type,
        id=id,
        active=active,
        diag_approx=jnp.asarray(spec.invweight),
        solref=safe_solref(spec.solref, timestep=options.timestep, refsafe=options.refsafe),
        solimp=spec.solimp,
        imp_pos=zeros,
        imp_margin=zeros,
        frictional=True,
        qvel=qvel,
        options=options,
    )


class TendonFrictionSpec(eqx.Module):
    """The tendons with friction loss (``tendon_frictionloss > 0``): ``tendon`` (k,),
    ``frictionloss``, ``solref`` ``tendon_solref_fri``, ``solimp`` ``tendon_solimp_fri``,
    ``invweight`` ``tendon_invweight0``."""

    tendon: np.ndarray
    frictionloss: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    invweight: np.ndarray

    @classmethod
    def from_model(cls, m) -> TendonFrictionSpec:
        on = not (int(m.opt.disableflags) & _DISABLE_FRICTIONLOSS)
        ten = np.flatnonzero(np.asarray(m.tendon_frictionloss) > 0) if on else np.zeros(0, int)
        return cls(
            ten,
            _f64(m.tendon_frictionloss)[ten],
            _f64(m.tendon_solref_fri, (-1, 2))[ten],
            _f64(m.tendon_solimp_fri, (-1, 5))[ten],
            _f64(m.tendon_invweight0)[ten],
        )


def tendon_friction_rows(spec: TendonFrictionSpec, ten_J, qvel=None, *, options: SoftOptions):
    """Friction-loss rows of tendons (``mj_instantiateFriction``): J = the tendon's row of
    ``ten_J`` (ntendon, nv), pos = margin = 0, K = 0, diagApprox = ``tendon_invweight0``. A
    tendon whose Jacobian is zero has no row (dense MuJoCo)."""
    J = jnp.asarray(ten_J)[spec.tendon]
    return _friction_rows(
        spec, J, ConstraintType.FRICTION_TENDON, spec.tendon, _nonempty(J), qvel, options
    )


# --------------------------------------------------------------------------- limits


class JointLimitSpec(eqx.Module):
    """The limited hinge, slide and ball joints (none under ``<flag limit="disable"/>``):
    ``joint`` (k,), ``ball`` (k,) bool, ``qposadr``, ``dofadr``, ``range`` (k, 2), ``margin``
    ``jnt_margin``, ``solref`` ``jnt_solref``, ``solimp`` ``jnt_solimp``, ``invweight`` the
    joint's (first) ``dof_invweight0``."""

    joint: np.ndarray
    ball: np.ndarray
    qposadr: np.ndarray
    dofadr: np.ndarray
    range: np.ndarray
    margin: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    invweight: np.ndarray
    nv: int = eqx.field(static=True, kw_only=True)

    @classmethod
    def from_model(cls, m) -> JointLimitSpec:
        on = not (int(m.opt.disableflags) & _DISABLE_LIMIT)
        kind = np.asarray(m.jnt_type)
        limited = (np.asarray(m.jnt_limited) != 0) & np.isin(kind, (_BALL, _SLIDE, _HINGE))
        joint = np.flatnonzero(limited) if on else np.zeros(0, int)
        dofadr = np.asarray(m.jnt_dofadr)[joint]
        return cls(
            joint,
            kind[joint] == _BALL,
            np.asarray(m.jnt_qposadr)[joint],
            dofadr,
            _f64(m.jnt_range, (-1, 2))[joint],
            _f64(m.jnt_margin)[joint],
            _f64(m.jnt_solref, (-1, 2))[joint],
            _f64(m.jnt_solimp, (-1, 5))[joint],
            _f64(m.dof_invweight0)[dofadr],
            nv=int(m.nv),
        )


def _normalize(vec, axis=-1):
    """``mju_normalize3``: (vec / |vec|, |vec|), with (1, 0, 0) and 0 if |vec| < mjMINVAL (the
    true tiny norm is dropped so that the gradient stays finite)."""
    sq = jnp.sum(vec * vec, axis=axis, keepdims=True)
    small = sq < MIN_VALUE * MIN_VALUE
    norm = jnp.sqrt(jnp.where(small, 1.0, sq))
    unit_x = jnp.zeros(vec.shape[-1]).at[0].set(1.0)
    unit = jnp.where(small, unit_x, vec * (1 / norm))
    return unit, jnp.where(small, 0.0, norm)[..., 0]


def ball_angle_axis(quat) -> tuple[jax.Array, jax.Array]:
    """The rotation angle in [0, pi] of a ball joint's quaternion (..., 4) and its unit axis
    (...,3), as ``mj_instantiateLimit`` gets them (``mju_normalize4``, ``mju_quat2Vel``,
    ``mju_normalize3``): a quaternion with w < 0 turns the other way round."""
    sq = jnp.sum(quat * quat, axis=-1, keepdims=True)
    small = sq < MIN_VALUE * MIN_VALUE
    norm = jnp.sqrt(jnp.where(small, 1.0, sq))
    identity = jnp.array([1.0, 0.0, 0.0, 0.0])
    # mju_normalize4 leaves a quaternion within mjMINVAL of unit length untouched
    quat = jnp.where(small, identity, jnp.where(jnp.abs(norm - 1) > MIN_VALUE, quat / norm, quat))
    axis, sin_half = _normalize(quat[..., 1:])
    speed = 2 * jnp.arctan2(sin_half, quat[..., 0])
    speed = jnp.where(speed > jnp.pi, speed - 2 * jnp.pi, speed)
    direction, angle = _normalize(axis * speed[..., None])
    return angle, direction


def joint_limit_rows(spec: JointLimitSpec, qpos, qvel=None, *, options: SoftOptions):
    """Joint-limit rows (``mj_instantiateLimit``), two slots per limited joint: (lower, upper).

    Hinge and slide: the side's distance dist = q - range[0] (lower) or range[1] - q (upper),
    J = +e_dof (lower) or -e_dof (upper); active when dist < margin. Ball: the first slot is the
    row dist = max(range) - angle, J = -axis on the joint's 3 dofs (``ball_angle_axis``); the
    second slot is never active. ``qpos`` (nq,) in MuJoCo's layout."""
    qpos = jnp.asarray(qpos)
    k = spec.joint.shape[0]
    ball = jnp.asarray(spec.ball)
    value = qpos[spec.qposadr]
    lower = value - spec.range[:, 0]
    upper = spec.range[:, 1] - value
    # a hinge's quaternion slots read past its qpos; clip them, the result is unused
    quat = jnp.take(qpos, spec.qposadr[:, None] + np.arange(4), mode="clip")
    angle, direction = ball_angle_axis(quat)
    ball_dist = jnp.max(jnp.asarray(spec.range), axis=1) - angle
    dist = jnp.stack([jnp.where(ball, ball_dist, lower), upper], axis=1)
    active = (dist < spec.margin[:, None]) & jnp.stack([jnp.ones(k, bool), ~ball], axis=1)

    e_dof = jax.nn.one_hot(spec.dofadr, spec.nv, dtype=jnp.float64)
    e_ball = jax.nn.one_hot(spec.dofadr[:, None] + np.arange(3), spec.nv, dtype=jnp.float64)
    J_ball = -_sum_along(direction[:, :, None] * e_ball, -2)
    J = jnp.stack([jnp.where(ball[:, None], J_ball, e_dof), -e_dof], axis=1)

    def rows(x):
        return jnp.reshape(x, (2 * k, *x.shape[2:]))

    def twice(x):
        return jnp.repeat(jnp.asarray(x), 2, axis=0)

    dist = rows(dist)
    margin = twice(spec.margin)
    return _finish(
        J=rows(J),
        pos=dist,
        margin=margin,
        frictionloss=0.0,
        type=ConstraintType.LIMIT_JOINT,
        id=twice(spec.joint),
        active=rows(active) & _nonempty(rows(J)),
        diag_approx=twice(spec.invweight),
        solref=safe_solref(twice(spec.solref), timestep=options.timestep, refsafe=options.refsafe),
        solimp=twice(spec.solimp),
        imp_pos=dist,
        imp_margin=margin,
        frictional=False,
        qvel=qvel,
        options=options,
    )


class TendonLimitSpec(eqx.Module):
    """The limited tendons: ``tendon`` (k,), ``range`` (k, 2), ``margin`` ``tendon_margin``,
    ``solref`` ``tendon_solref_lim``, ``solimp`` ``tendon_solimp_lim``, ``invweight``
    ``tendon_invweight0``."""

    tendon: np.ndarray
    range: np.ndarray
    margin: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    invweight: np.ndarray

    @classmethod
    def from_model(cls, m) -> TendonLimitSpec:
        on = not (int(m.opt.disableflags) & _DISABLE_LIMIT)
        ten = np.flatnonzero(np.asarray(m.tendon_limited) != 0) if on else np.zeros(0, int)
        return cls(
            ten,
            _f64(m.tendon_range, (-1, 2))[ten],
            _f64(m.tendon_margin)[ten],
            _f64(m.tendon_solref_lim, (-1, 2))[ten],
            _f64(m.tendon_solimp_lim, (-1, 5))[ten],
            _f64(m.tendon_invweight0)[ten],
        )


def tendon_limit_rows(spec: TendonLimitSpec, ten_length, ten_J, qvel=None, *, options):
    """Tendon-limit rows (``mj_instantiateLimit``), two slots per limited tendon (lower, upper):
    dist = L - range[0] with J = +ten_J, or range[1] - L with J = -ten_J; active when
    dist < margin (and the Jacobian is not zero). ``ten_length`` (ntendon,), ``ten_J``
    (ntendon, nv) of all tendons."""
    k = spec.tendon.shape[0]
    length = jnp.asarray(ten_length)[spec.tendon]
    Jt = jnp.asarray(ten_J)[spec.tendon]
    dist = jnp.stack([length - spec.range[:, 0], spec.range[:, 1] - length], axis=1)
    dist = dist.reshape(2 * k)
    J = jnp.stack([Jt, -Jt], axis=1).reshape(2 * k, Jt.shape[1])
    margin = jnp.repeat(jnp.asarray(spec.margin), 2)
    return _finish(
        J=J,
        pos=dist,
        margin=margin,
        frictionloss=0.0,
        type=ConstraintType.LIMIT_TENDON,
        id=jnp.repeat(jnp.asarray(spec.tendon), 2),
        active=(dist < margin) & _nonempty(J),
        diag_approx=jnp.repeat(jnp.asarray(spec.invweight), 2),
        solref=safe_solref(
            jnp.repeat(jnp.asarray(spec.solref), 2, axis=0),
            timestep=options.timestep,
            refsafe=options.refsafe,
        ),
        solimp=jnp.repeat(jnp.asarray(spec.solimp), 2, axis=0),
        imp_pos=dist,
        imp_margin=margin,
        frictional=False,
        qvel=qvel,
        options=options,
    )


# --------------------------------------------------------------------------- contacts


def contact_row_count(condim: int, *, elliptic: bool) -> int:
    """Rows of one contact: 1 frictionless, condim elliptic, 2 (condim - 1) pyramidal."""
    return 1 if condim == 1 else (condim if elliptic else 2 * (condim - 1))


def contact_rows(
    jac_dif,
    qvel=None,
    *,
    condim: int,
    frame,
    dist,
    includemargin,
    friction,
    solref,
    solreffriction,
    solimp,
    invweight,
    options: SoftOptions,
    found=None,
    contact_id=None,
    adhesion=None,
) -> ConstraintRows:
    """Rows of c contact slots of one ``condim`` (``mj_instantiateContact``), each slot's rows
    consecutive, (c * rows,) in all (:func:`contact_row_count`).

    ``jac_dif`` (c, 6, nv): the point Jacobian of the second body minus the first's at the
    contact point, translational rows then rotational, world frame (``mj_jacDifPair``).
    ``frame`` (c, 3, 3) ``mjContact.frame`` (rows: normal, tangents), ``dist``,
    ``includemargin``, ``friction`` (c, 5), ``solref``, ``solreffriction`` (c, 2), ``solimp``
    (c, 5) as in ``mjContact``; ``invweight`` (c, 2): the two bodies' ``body_invweight0`` summed
    (translational, rotational). ``found`` (c,) bool: the slot holds a contact (default all);
    a contact in the gap (dist >= includemargin) is excluded, as MuJoCo does.
    ``contact_id`` (c,): the rows' ``efc_id`` (default 0..c-1). ``adhesion`` (c,):
    ``mjContact.adhesion`` (default 0); an adhesive contact stays active in the gap, but
    MuJoCo then gives it condim 1, so a condim > 1 group drops it and the caller passes it to a
    condim-1 group (``found`` set there); its aref gains R adhesion, spread evenly over a
    pyramid's edges (``mj_adhesionRef``).

    With Jc = frame @ jac_dif (normal, two tangents; torsion and two rolling rows from the
    rotational part): frictionless: the normal row. Pyramidal: edges Jc_0 + f_j Jc_j,
    Jc_0 - f_j Jc_j for j = 1..condim-1, each with pos = dist and margin = includemargin.
    Elliptic: rows Jc_0..Jc_{condim-1}, pos = margin = 0 except the normal row. The impedance
    comes from dist - includemargin; R from ``contact_regulariser`` (``impratio``); elliptic
    friction rows use solreffriction when it is non-zero and have K = 0."""
    jac_dif = jnp.asarray(jac_dif)
    c, _, nv = jac_dif.shape
    elliptic = options.elliptic and condim > 1
    per = contact_row_count(condim, elliptic=options.elliptic)
    frame = jnp.asarray(frame).reshape(c, 3, 3)
    dist = jnp.asarray(dist)
    includemargin = jnp.asarray(includemargin)
    friction = jnp.asarray(friction)
    found = jnp.ones(c, bool) if found is None else jnp.asarray(found)
    contact_id = jnp.arange(c) if contact_id is None else jnp.asarray(contact_id)
    touching = dist < includemargin
    if adhesion is None:
        active = found & touching
    else:
        adhesion = jnp.asarray(adhesion, dtype=jnp.float64)
        # mj_setContact: adhesive contacts stay in the gap, reduced to condim 1
        active = found & (touching | ((adhesion != 0) & (condim == 1)))

    # rotate Jacobian differences to the contact frame
    Jc = _sum_along(frame[:, :, :, None] * jac_dif[:, None, :3, :], -2)
    if condim > 3:
        Jr = _sum_along(frame[:, : condim - 3, :, None] * jac_dif[:, None, 3:, :], -2)
        Jc = jnp.concatenate([Jc, Jr], axis=1)
    zero = jnp.zeros(c)
    if condim == 1:
        J = Jc[:, :1]
        pos, margin = dist[:, None], includemargin[:, None]
        kind = ConstraintType.CONTACT_FRICTIONLESS
    elif elliptic:
        J = Jc[:, :condim]
        pos = jnp.stack([dist] + [zero] * (condim - 1), axis=1)
        margin = jnp.stack([includemargin] + [zero] * (condim - 1), axis=1)
        kind = ConstraintType.CONTACT_ELLIPTIC
    else:
        edges = []
        for j in range(1, condim):
            scaled = friction[:, j - 1, None] * Jc[:, j]
            edges += [Jc[:, 0] + scaled, Jc[:, 0] - scaled]
        J = jnp.stack(edges, axis=1)
        pos = jnp.repeat(dist[:, None], per, axis=1)
        margin = jnp.repeat(includemargin[:, None], per, axis=1)
        kind = ConstraintType.CONTACT_PYRAMIDAL

    invweight = jnp.asarray(invweight)
    diag = contact_diag_approx(
        invweight[:, 0], invweight[:, 1], friction, condim=condim, elliptic=options.elliptic
    )
    solimp_c = clamp_solimp(solimp)
    imp, imp_slope = impedance(dist, includemargin, solimp_c)
    R_normal = regulariser(imp, diag[:, 0])
    if condim == 1:
        R, mu = R_normal[:, None], jnp.zeros(c)
    else:
        R, mu = contact_regulariser(
            R_normal, friction, condim=condim, elliptic=elliptic, impratio=options.impratio
        )

    ref = safe_solref(solref, timestep=options.timestep, refsafe=options.refsafe)
    ref_rows = jnp.repeat(ref[:, None], per, axis=1)
    frictional = np.zeros(per, bool)
    if elliptic:
        ref_f = safe_solref(
            solreffriction, timestep=options.timestep, refsafe=options.refsafe, friction=True
        )
        use_f = (ref_f[:, 0] != 0) | (ref_f[:, 1] != 0)
        ref_friction = jnp.where(use_f[:, None], ref_f, ref)
        ref_rows = ref_rows.at[:, 1:].set(ref_friction[:, None])
        frictional[1:] = True

    def flat(x):
        return jnp.reshape(x, (c * per, *x.shape[2:]))

    def each(x):
        return jnp.repeat(jnp.asarray(x), per, axis=0)

    rows = _finish(
        J=flat(J),
        pos=flat(pos),
        margin=flat(margin),
        frictionloss=0.0,
        type=kind,
        id=each(contact_id),
        active=each(active),
        diag_approx=flat(diag),
        solref=flat(ref_rows),
        solimp=each(solimp_c),
        imp_pos=each(dist),
        imp_margin=each(includemargin),
        frictional=jnp.tile(jnp.asarray(frictional), c),
        qvel=qvel,
        options=options,
        R=flat(R),
        mu=each(mu),
        imp=(each(imp), each(imp_slope)),
    )
    if adhesion is not None and rows.aref is not None:
        # mj_adhesionRef: the normal row, or each pyramid edge's share of the normal
        if condim > 1 and not elliptic:
            bias = rows.R * each(adhesion / per)
        else:
            bias = rows.R * each(adhesion) * jnp.tile(jax.nn.one_hot(0, per), c)
        rows = eqx.tree_at(lambda r: r.aref, rows, jnp.where(rows.active, rows.aref + bias, 0.0))
    return rows


# --------------------------------------------------------------------------- groups


def concatenate(*groups: ConstraintRows) -> ConstraintRows:
    """The rows of several groups, one after the other."""
    groups = [g for g in groups if g.size]
    if not groups:
        raise ValueError("concatenate needs at least one non-empty group")
    return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *groups)


def mujoco_order(rows: ConstraintRows) -> tuple[jax.Array, jax.Array]:
    """(permutation, count): ``rows`` permuted by the first returns the active rows first, in
    MuJoCo's ``efc`` order (equality, dof friction, tendon friction, joint limits, tendon
    limits, then contacts by id; within a group by ``efc_id``, rows of one id in their order);
    ``count`` of them are active (MuJoCo's nefc)."""
    rank = jnp.minimum(rows.type, ConstraintType.CONTACT_FRICTIONLESS)
    order = jnp.lexsort((rows.id, rank, ~rows.active))
    return order, jnp.sum(rows.active)


def take(rows: ConstraintRows, index) -> ConstraintRows:
    """The rows at ``index`` (e.g. ``take(rows, mujoco_order(rows)[0])``)."""
    return jax.tree.map(lambda x: x[index], rows)
