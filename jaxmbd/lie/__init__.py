"""SO(3) maps: hat/vee, exponential (Rodrigues) and logarithm, left/right Jacobians.

Every map with a 0/0 limit at zero angle uses a Taylor branch selected with a *safe*
argument, so that values, ``jax.grad`` and ``jax.jacfwd`` are finite and exact at and near
zero (the "double where" trick of jaxlie).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.small import dot, mm, mtm
from ..compiled.trig import sin, sin_cos

# Below this squared angle the Taylor branches are used. Their truncation error is
# O(theta^6) ~ 1e-21, far below float64 round-off of the closed forms near zero.
_SMALL_ANGLE_SQ = 1e-7


def hat(w):
    """Cross-product matrix: ``hat(a) @ b == cross(a, b)``. Batched over leading axes.

    Built from three unit slices and one concatenation: 9 jaxpr equations instead of
    ~26 for nested stacks of indexed components (hat is everywhere in a step; fewer
    equations trace, linearise and compile faster)."""
    w = jnp.asarray(w)
    x, y, z = w[..., 0:1], w[..., 1:2], w[..., 2:3]
    zero = jnp.zeros_like(x)
    rows = jnp.concatenate([zero, -z, y, z, zero, -x, -y, x, zero], axis=-1)
    return rows.reshape(w.shape[:-1] + (3, 3))


def vee(m):
    """Inverse of :func:`hat` (uses the skew part of ``m``)."""
    m = jnp.asarray(m)
    return 0.5 * jnp.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]],
        axis=-1,
    )


def _sin_coeffs(theta_sq):
    """Return (sin t / t, (1 - cos t) / t^2, (t - sin t) / t^3), NaN-safe at t = 0."""
    small = theta_sq < _SMALL_ANGLE_SQ
    safe_sq = jnp.where(small, 1.0, theta_sq)
    t = jnp.sqrt(safe_sq)
    s, c = sin_cos(t)
    a = jnp.where(small, 1.0 - theta_sq / 6.0 + theta_sq**2 / 120.0, s / t)
    b = jnp.where(small, 0.5 - theta_sq / 24.0 + theta_sq**2 / 720.0, (1.0 - c) / safe_sq)
    d = jnp.where(
        small, 1.0 / 6.0 - theta_sq / 120.0 + theta_sq**2 / 5040.0, (t - s) / (safe_sq * t)
    )
    return a, b, d


def _hat_squared(w, t2, eye):
    """w~ w~ = w w^T - |w|^2 I, elementwise (fuses; a batched 3x3 matmul does not on CPU)."""
    return w[..., :, None] * w[..., None, :] - t2[..., None, None] * eye


def reorthonormalize(R):
    """One Newton-Schulz (Bjorck) step towards the nearest rotation: R (3 I - R^T R) / 2.

    For R = Q (I + E) with Q orthonormal and E symmetric (the round-off of a product of
    rotations), the error E becomes O(E^2): applied after every update it keeps
    ||A^T A - I|| at round-off over any number of steps instead of letting it grow linearly
    (7.7e-11 after 10^6 slider-crank steps without it). It is the identity on SO(3) and its
    derivative there is the identity on the tangent space (R^T dR skew), so solutions and
    gradients are unchanged to round-off."""
    return 0.5 * mm(R, 3.0 * jnp.eye(3, dtype=R.dtype) - mtm(R, R))


def so3_exp(w):
    """Rodrigues' formula, paper 1 eq. 5-7: exp(w~) = I + sin(t)/t w~ + (1-cos t)/t^2 w~^2."""
    w = jnp.asarray(w)
    t2 = dot(w, w)
    a, b, _ = _sin_coeffs(t2)
    W = hat(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=W.dtype), W.shape)
    return eye + a[..., None, None] * W + b[..., None, None] * _hat_squared(w, t2, eye)


def so3_right_jacobian(w):
    """Right Jacobian J_r(w): exp(w + dw) ~= exp(w) exp(J_r(w) dw).

    J_r = I - (1-cos t)/t^2 w~ + (t - sin t)/t^3 w~^2 (the tangent map dexp of the
    right-trivialised exponential; dexp_{-w} in Mueller-Terze's notation).
    """
    w = jnp.asarray(w)
    t2 = dot(w, w)
    _, b, d = _sin_coeffs(t2)
    W = hat(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=W.dtype), W.shape)
    return eye - b[..., None, None] * W + d[..., None, None] * _hat_squared(w, t2, eye)


def so3_log(R):
    """Rotation vector w with ``so3_exp(w) == R``, |w| <= pi; NaN-safe at 0 and near pi."""
    R = jnp.asarray(R)
    trace = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    cos_t = jnp.clip(0.5 * (trace - 1.0), -1.0, 1.0)
    skew = vee(R)  # = sin(t) * axis
    sin_sq = jnp.sum(skew * skew, axis=-1)
    near_pi = cos_t < -0.99
    small = (sin_sq < _SMALL_ANGLE_SQ) & ~near_pi

    # Regular branch: w = t / sin(t) * vee(R); t/sin(t) = 1 + s^2/6 + 3 s^4/40 + ... for small s.
    sin_regular = jnp.sqrt(jnp.where(small | near_pi, 1.0, sin_sq))
    theta_regular = jnp.arctan2(sin_regular, cos_t)
    factor = jnp.where(
        small, 1.0 + sin_sq / 6.0 + 3.0 * sin_sq**2 / 40.0, theta_regular / sin_regular
    )
    w_regular = factor[..., None] * skew

    # Near pi: (R + R^T)/2 = cos t I + (1 - cos t) u u^T; take the best-conditioned column.
    sym = 0.5 * (R + jnp.swapaxes(R, -1, -2))
    one_minus_cos = jnp.where(near_pi, 1.0 - cos_t, 1.0)
    uu = (sym - cos_t[..., None, None] * jnp.eye(3)) / one_minus_cos[..., None, None]
    diag = jnp.diagonal(uu, axis1=-2, axis2=-1)
    k = jnp.argmax(diag, axis=-1)
    col = jnp.take_along_axis(uu, k[..., None, None], axis=-1)[..., 0]
    col_norm = jnp.linalg.norm(col, axis=-1, keepdims=True)
    u = col / jnp.where(col_norm > 0, col_norm, 1.0)
    # The sign of u follows the skew part (sin t * u); at exactly pi either sign is valid.
    sign = jnp.where(jnp.sum(u * skew, axis=-1) < 0, -1.0, 1.0)
    sin_pi = jnp.sqrt(jnp.where(near_pi, sin_sq, 1.0))
    theta_pi = jnp.arctan2(sin_pi, cos_t)
    w_pi = (sign * theta_pi)[..., None] * u
    return jnp.where(near_pi[..., None], w_pi, w_regular)


def orthonormalize(A):
    """Nearest rotation matrix (polar decomposition via SVD), with det = +1."""
    A = jnp.asarray(A)
    U, _, Vt = jnp.linalg.svd(A)
    D = jnp.ones(A.shape[:-1], A.dtype).at[..., -1].set(jnp.linalg.det(U @ Vt))
    return (U * D[..., None, :]) @ Vt


# -- Mueller-Terze: SE(3) and SO(3) maps for Munthe-Kaas integration ---------------------------
# Twists are ordered (omega, v) as in Mueller & Terze (eq. 6): angular part first.

# Below this squared angle the dexp^-1 coefficients use their Taylor series. The closed forms
# of eq. 10 cancel catastrophically for small angles (c4 ~ 1/t^4 - 1/t^4); at t = 0.2 the
# truncated series below are exact to < 1e-15 (checked against 60-digit arithmetic).
_DEXPINV_SMALL_SQ = 0.04


def _safe_angle(theta_sq, threshold):
    """(small, t) with t = sqrt(theta_sq) on the regular branch and 1 on the small one, so that
    neither branch produces a NaN value or gradient (the double-where trick)."""
    small = theta_sq < threshold
    return small, jnp.sqrt(jnp.where(small, 1.0, theta_sq))


def so3_dexpinv(w):
    """Inverse of the right-trivialised dexp of SO(3), Mueller-Terze eq. 11:

        dexp^-1_w = I - 1/2 w~ + (1 - (t/2) cot(t/2)) / t^2 w~^2,    t = |w|,

    with the last coefficient's series 1/12 + t^2/720 + t^4/30240 + t^6/1209600 +
    t^8/47900160 for t < 0.2. ``so3_dexpinv(-w) @ so3_right_jacobian(w) == I``.
    """
    w = jnp.asarray(w)
    t2 = dot(w, w)
    small, t = _safe_angle(t2, _DEXPINV_SMALL_SQ)
    half = 0.5 * t
    sin_half, cos_half = sin_cos(half)
    closed = (1.0 - half * cos_half / sin_half) / (t * t)
    series = 1.0 / 12.0 + t2 / 720.0 + t2**2 / 30240.0 + t2**3 / 1209600.0 + t2**4 / 47900160.0
    c = jnp.where(small, series, closed)
    W = hat(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=W.dtype), W.shape)
    return eye - 0.5 * W + c[..., None, None] * _hat_squared(w, t2, eye)


def se3_hat(xi):
    """4x4 matrix of a twist xi = (omega, v): [[omega~, v], [0, 0]] (eq. 6)."""
    xi = jnp.asarray(xi)
    top = jnp.concatenate([hat(xi[..., :3]), xi[..., 3:, None]], axis=-1)
    bottom = jnp.zeros(xi.shape[:-1] + (1, 4), xi.dtype)
    return jnp.concatenate([top, bottom], axis=-2)


def se3_ad(xi):
    """Adjoint of se(3), eq. 7: ad_xi = [[omega~, 0], [v~, omega~]] for xi = (omega, v), so that
    ad_X Y = [X, Y] = (w1 x w2, w1 x v2 - w2 x v1)."""
    xi = jnp.asarray(xi)
    W, U = hat(xi[..., :3]), hat(xi[..., 3:])
    zero = jnp.zeros_like(W)
    return jnp.concatenate(
        [jnp.concatenate([W, zero], axis=-1), jnp.concatenate([U, W], axis=-1)], axis=-2
    )


def _sin_coeffs_wide(theta_sq):
    """:func:`_sin_coeffs` with series up to t^10 used below t = 0.2 (not 3e-4) and
    1 - cos t = 2 sin^2(t/2): accurate to ~1e-16 at every angle (the closed forms lose
    ~eps / t^2 relative accuracy for small t)."""
    small, t = _safe_angle(theta_sq, _DEXPINV_SMALL_SQ)
    x = theta_sq
    a = jnp.where(
        small,
        1.0 - x / 6.0 + x**2 / 120.0 - x**3 / 5040.0 + x**4 / 362880.0 - x**5 / 39916800.0,
        sin(t) / t,
    )
    b = jnp.where(
        small,
        0.5 - x / 24.0 + x**2 / 720.0 - x**3 / 40320.0 + x**4 / 3628800.0 - x**5 / 479001600.0,
        2.0 * sin(0.5 * t) ** 2 / (t * t),
    )
    d = jnp.where(
        small,
        1.0 / 6.0
        - x / 120.0
        + x**2 / 5040.0
        - x**3 / 362880.0
        + x**4 / 39916800.0
        - x**5 / 6227020800.0,
        (t - sin(t)) / (t * t * t),
    )
    return a, b, d


def se3_exp(xi):
    """SE(3) exponential of xi = (omega, v) in V-matrix form (eq. 8, written regular at 0):
    returns (R, p) with R = exp(omega~) and

        p = (I + (1 - cos t)/t^2 omega~ + (t - sin t)/t^3 omega~^2) v,    t = |omega|,

    which equals eq. 8's (1/t^2)(I - R)(omega x v) + h omega (pitch h = omega.v / t^2)."""
    xi = jnp.asarray(xi)
    w, v = xi[..., :3], xi[..., 3:]
    t2 = dot(w, w)
    a, b, d = _sin_coeffs_wide(t2)
    W = hat(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=W.dtype), W.shape)
    W2 = _hat_squared(w, t2, eye)
    R = eye + a[..., None, None] * W + b[..., None, None] * W2
    V = eye + b[..., None, None] * W + d[..., None, None] * W2
    return R, jnp.einsum("...ij,...j->...i", V, v)


def se3_exp_matrix(xi):
    """4x4 homogeneous matrix of :func:`se3_exp`."""
    R, p = se3_exp(xi)
    top = jnp.concatenate([R, p[..., None]], axis=-1)
    bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], R.dtype), R.shape[:-2] + (1, 4))
    return jnp.concatenate([top, bottom], axis=-2)


def _se3_dexpinv_coeffs(theta_sq):
    """(c2, c4) of eq. 10, NaN-safe: closed forms with cos t - 1 = -2 sin^2(t/2) above t = 0.2,
    Taylor series below (gradients finite at 0)."""
    small, t = _safe_angle(theta_sq, _DEXPINV_SMALL_SQ)
    s = sin(t)
    cm1 = -2.0 * sin(0.5 * t) ** 2  # cos t - 1 without cancellation
    c2_closed = 2.0 / t**2 + (t + 3.0 * s) / (4.0 * t * cm1)
    c4_closed = 1.0 / t**4 + (t + s) / (4.0 * t**3 * cm1)
    x = theta_sq
    c2_series = 1.0 / 12.0 - x**2 / 30240.0 - x**3 / 604800.0 - x**4 / 15966720.0
    c4_series = (
        -1.0 / 720.0
        - x / 15120.0
        - x**2 / 403200.0
        - x**3 / 11975040.0
        - 691.0 * x**4 / 261534873600.0
    )
    return jnp.where(small, c2_series, c2_closed), jnp.where(small, c4_series, c4_closed)


def se3_dexpinv(xi):
    """Inverse of the right-trivialised dexp of SE(3) as a 6x6 matrix (eq. 10, after Selig):

        dexp^-1_xi = I - 1/2 ad + c2 ad^2 + c4 ad^4,    ad = ad_xi, t = |omega|,
        c2 = 2/t^2 + (t + 3 sin t) / (4 t (cos t - 1)),
        c4 = 1/t^4 + (t + sin t) / (4 t^3 (cos t - 1)),

    equal to the Bernoulli series sum_k B_k / k! ad^k. Taylor branches below t = 0.2 (the
    first Munthe-Kaas stage always evaluates it at 0)."""
    xi = jnp.asarray(xi)
    w = xi[..., :3]
    c2, c4 = _se3_dexpinv_coeffs(jnp.sum(w * w, axis=-1))
    ad = se3_ad(xi)
    ad2 = ad @ ad
    eye = jnp.broadcast_to(jnp.eye(6, dtype=ad.dtype), ad.shape)
    return eye - 0.5 * ad + c2[..., None, None] * ad2 + c4[..., None, None] * (ad2 @ ad2)
