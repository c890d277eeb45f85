"""The parameters of MuJoCo's soft constraint rows, vectorised over rows: impedance d(r),
reference gains K and B, regulariser R, the contacts' friction scaling (``impratio``) and the
diagonal approximation ``diagApprox`` of A = J M^-1 J^T.

Each function reproduces one piece of ``src/engine/engine_core_constraint.c`` (MuJoCo 4.0;
``getsolparam``, ``getimpedance``, ``mj_makeImpedance``, ``mj_diagApprox``,
``mj_referenceConstraint``) in the same floating-point order where that is cheap, so that the
rows match MuJoCo's ``efc_*`` arrays to rounding (MuJoCo documentation, Computation > Soft
constraints). Everything is elementwise over leading axes, with fixed shapes under jit and vmap,
and finite (with finite gradients) for any input.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401

#: ``mjMINVAL``: the smallest denominator MuJoCo allows.
MIN_VALUE = 1e-15
#: ``mjMINIMP``, ``mjMAXIMP``: the range of the impedance d and of solimp's dmin, dmax, midpoint.
MIN_IMPEDANCE, MAX_IMPEDANCE = 1e-4, 0.9999
#: ``mjMINMU``: the smallest friction coefficient a contact keeps (``mj_assignFriction``).
MIN_FRICTION = 1e-5
#: ``mj_defaultSolRefImp``'s solref, which replaces a solref of mixed signs.
DEFAULT_SOLREF = (0.02, 1.0)


class SoftOptions(eqx.Module):
    """The options of ``mjModel.opt`` that the rows' parameters read: ``timestep`` h,
    ``impratio`` (friction-to-normal impedance ratio of contacts), ``refsafe`` (False under
    ``<flag refsafe="disable"/>``: timeconst is then not raised to 2 h) and ``elliptic``
    (``cone="elliptic"``; else pyramidal)."""

    timestep: float | jax.Array
    impratio: float | jax.Array = 1.0
    refsafe: bool = eqx.field(static=True, default=True, kw_only=True)
    elliptic: bool = eqx.field(static=True, default=False, kw_only=True)

    @classmethod
    def from_model(cls, m) -> SoftOptions:
        """Read from a ``mujoco.MjModel`` (``mjDSBL_REFSAFE`` = 1 << 12, ``mjCONE_ELLIPTIC`` =
        1)."""
        return cls(
            float(m.opt.timestep),
            float(m.opt.impratio),
            refsafe=not (int(m.opt.disableflags) & (1 << 12)),
            elliptic=int(m.opt.cone) == 1,
        )


def _power(base, exponent):
    """``power`` of engine_core_constraint.c: exact for the common exponents 1 and 2."""
    return jnp.where(
        exponent == 1.0, base, jnp.where(exponent == 2.0, base * base, jnp.power(base, exponent))
    )


def clamp_solimp(solimp) -> jax.Array:
    """solimp (..., 5) = (dmin, dmax, width, midpoint, power) clamped as ``getsolparam`` does:
    dmin, dmax, midpoint to [mjMINIMP, mjMAXIMP], width >= 0, power >= 1."""
    solimp = jnp.asarray(solimp, dtype=jnp.float64)
    dmin, dmax, width, mid, power = (solimp[..., k] for k in range(5))
    return jnp.stack(
        [
            jnp.clip(dmin, MIN_IMPEDANCE, MAX_IMPEDANCE),
            jnp.clip(dmax, MIN_IMPEDANCE, MAX_IMPEDANCE),
            jnp.maximum(width, 0.0),
            jnp.clip(mid, MIN_IMPEDANCE, MAX_IMPEDANCE),
            jnp.maximum(power, 1.0),
        ],
        axis=-1,
    )


def safe_solref(solref, *, timestep, refsafe: bool = True, friction: bool = False) -> jax.Array:
    """solref (..., 2) as ``getsolparam`` uses it. Standard (timeconst, dampratio) when
    solref[0] > 0, direct (-stiffness, -damping) otherwise; mixed signs are replaced by
    (0.02, 1) (for ``friction=True``, a contact's solreffriction, by (0, 0): "use solref").
    With ``refsafe``, a standard timeconst is raised to at least 2 h."""
    solref = jnp.asarray(solref, dtype=jnp.float64)
    mixed = (solref[..., 0] > 0) ^ (solref[..., 1] > 0)
    default = jnp.zeros(2) if friction else jnp.asarray(DEFAULT_SOLREF)
    solref = jnp.where(mixed[..., None], default, solref)
    if refsafe:
        timeconst = solref[..., 0]
        timeconst = jnp.where(timeconst > 0, jnp.maximum(timeconst, 2 * timestep), timeconst)
        solref = solref.at[..., 0].set(timeconst)
    return solref


def impedance(pos, margin, solimp) -> tuple[jax.Array, jax.Array]:
    """The impedance d(r) in (0, 1) and its slope d'(r) at r = pos - margin: ``getimpedance``.

    With x = |r| / width: d = dmin for x = 0, dmax for x >= 1, and in between
    dmin + y(x) (dmax - dmin) with y = a x^p up to the midpoint and 1 - b (1 - x)^p after it
    (y = x for p = 1). Flat (d = (dmin + dmax) / 2) if dmin = dmax or width <= mjMINVAL.
    ``solimp`` (..., 5) is clamped first (``clamp_solimp``), as ``getsolparam`` does."""
    solimp = clamp_solimp(solimp)
    dmin, dmax, width, mid, power = (solimp[..., k] for k in range(5))
    flat = (dmin == dmax) | (width <= MIN_VALUE)
    signed = (pos - margin) / jnp.where(flat, 1.0, width)
    x = jnp.abs(signed)
    sign = jnp.where(signed < 0, -1.0, 1.0)
    interior = (x > 0) & (x < 1) & ~flat
    # evaluate the curve at a harmless x where it is not used, so no branch makes a NaN
    xs = jnp.where(interior, x, 0.5)
    # one side of the midpoint per row: y = a x^p (a = 1 / mid^(p-1)) or 1 - b (1-x)^p
    # (b = 1 / (1-mid)^(p-1)); x^p as x^(p-1) x, as getimpedance's power() gives it for
    # p = 2 (x x), so two powers a row instead of six
    low = xs <= mid
    base = jnp.where(low, xs, 1 - xs)
    scale = 1 / _power(jnp.where(low, mid, 1 - mid), power - 1)
    base_pow = _power(base, power - 1)
    y = jnp.where(low, scale * (base_pow * base), 1 - scale * (base_pow * base))
    y_slope = power * scale * base_pow
    linear = power == 1.0
    y = jnp.where(linear, xs, y)
    y_slope = jnp.where(linear, 1.0, y_slope)
    imp_interior = dmin + y * (dmax - dmin)
    slope_interior = y_slope * sign * (dmax - dmin) / jnp.where(flat, 1.0, width)
    imp = jnp.where(
        flat, 0.5 * (dmin + dmax), jnp.where(interior, imp_interior, jnp.where(x >= 1, dmax, dmin))
    )
    return imp, jnp.where(interior, slope_interior, 0.0)


def reference_gains(solref, dmax) -> tuple[jax.Array, jax.Array]:
    """Stiffness K and damping B of the reference acceleration (``mj_makeImpedance``), from a
    solref already passed through ``safe_solref`` and the clamped dmax = solimp[1]:
    standard K = 1 / (dmax^2 timeconst^2 dampratio^2), B = 2 / (dmax timeconst);
    direct K = -solref[0] / dmax^2, B = -solref[1] / dmax. Each gain picks its form from the
    sign of its own solref entry, as MuJoCo does."""
    ref0, ref1 = solref[..., 0], solref[..., 1]
    stiffness = jnp.where(
        ref0 > 0,
        1 / jnp.maximum(MIN_VALUE, dmax * dmax * ref0 * ref0 * ref1 * ref1),
        -ref0 / jnp.maximum(MIN_VALUE, dmax * dmax),
    )
    damping = jnp.where(
        ref1 > 0, 2 / jnp.maximum(MIN_VALUE, dmax * ref0), -ref1 / jnp.maximum(MIN_VALUE, dmax)
    )
    return stiffness, damping


def regulariser(imp, diag_approx) -> jax.Array:
    """R = max(mjMINVAL, (1 - d) / d * diagApprox) (``mj_makeImpedance``)."""
    return jnp.maximum(MIN_VALUE, (1 - imp) * diag_approx / imp)


def adjusted_diag(R, imp) -> jax.Array:
    """MuJoCo's ``efc_diagA`` after ``mj_makeImpedance``: R d / (1 - d), the diagonal that the
    final R (after the contacts' friction scaling) implies."""
    return R * imp / (1 - imp)


def reference_acceleration(vel, pos, margin, stiffness, damping, imp) -> jax.Array:
    """aref = -B vel - K d (pos - margin) (``mj_referenceConstraint``; the impedance d
    multiplies the stiffness term only)."""
    return -damping * vel - stiffness * imp * (pos - margin)


def contact_regulariser(
    R_normal, friction, *, condim: int, elliptic: bool, impratio
) -> tuple[jax.Array, jax.Array]:
    """The R of a frictional contact's rows and the regularised cone's mu (``mj_makeImpedance``).

    ``R_normal`` (...,) is R of the contact's first row; ``friction`` (..., 5). With
    R1 = R_normal / impratio, mu = friction[0] sqrt(R1 / R_normal). Elliptic: rows
    (R_normal, R1, R1 friction[0]^2 / friction[j]^2 for j = 1..condim-2). Pyramidal: every one of
    the 2 (condim - 1) edge rows gets 2 mu^2 R_normal. Returns (R (..., rows), mu (...,))."""
    R1 = R_normal / jnp.maximum(MIN_VALUE, impratio)
    mu = friction[..., 0] * jnp.sqrt(R1 / R_normal)
    if elliptic:
        f0 = friction[..., 0]
        rest = [R1 * f0 * f0 / (friction[..., j] * friction[..., j]) for j in range(1, condim - 1)]
        return jnp.stack([R_normal, R1, *rest], axis=-1), mu
    edge = 2 * mu * mu * R_normal
    return jnp.broadcast_to(edge[..., None], (*edge.shape, 2 * (condim - 1))), mu


def contact_diag_approx(translation, rotation, friction, *, condim: int, elliptic: bool):
    """``mj_diagApprox`` for a contact's rows, (..., rows). ``translation``, ``rotation``: the
    sums of the two bodies' ``body_invweight0`` (translational, rotational). Frictionless:
    translation. Elliptic: translation for rows 0-2, rotation for rows 3-5. Pyramidal: edges
    2j, 2j + 1 get translation + friction[j]^2 (translation if j < 2 else rotation)."""
    if condim == 1:
        return translation[..., None]
    if elliptic:
        return jnp.stack([translation if j < 3 else rotation for j in range(condim)], axis=-1)
    cols = []
    for j in range(condim - 1):
        fri = friction[..., j]
        value = translation + fri * fri * (translation if j < 2 else rotation)
        cols += [value, value]
    return jnp.stack(cols, axis=-1)


def connect_diag_approx(body_invweight0, body1, body2) -> jax.Array:
    """``mj_diagApprox`` of a connect constraint's 3 rows (bodies' translational weights; for
    site semantics pass the sites' bodies)."""
    tran = body_invweight0[body1, 0] + body_invweight0[body2, 0]
    return jnp.stack([tran, tran, tran], axis=-1)


def weld_diag_approx(body_invweight0, body1, body2) -> jax.Array:
    """``mj_diagApprox`` of a weld constraint's 6 rows: translational weights for rows 0-2,
    rotational for rows 3-5."""
    tran = body_invweight0[body1, 0] + body_invweight0[body2, 0]
    rot = body_invweight0[body1, 1] + body_invweight0[body2, 1]
    return jnp.stack([tran, tran, tran, rot, rot, rot], axis=-1)


def coupling_diag_approx(invweight1, invweight2=None) -> jax.Array:
    """``mj_diagApprox`` of a joint or tendon equality: the first object's ``dof_invweight0``
    (of its first dof) or ``tendon_invweight0``, plus the second's if there is one."""
    return invweight1 if invweight2 is None else invweight1 + invweight2
