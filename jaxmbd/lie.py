"""SO(3) maps: hat/vee, exponential (Rodrigues) and logarithm, left/right Jacobians.

Every map with a 0/0 limit at zero angle uses a Taylor branch selected with a *safe*
argument, so that values, ``jax.grad`` and ``jax.jacfwd`` are finite and exact at and near
zero (the "double where" trick of jaxlie).
"""

from __future__ import annotations

import jax.numpy as jnp

from . import _config  # noqa: F401

# Below this squared angle the Taylor branches are used. Their truncation error is
# O(theta^6) ~ 1e-21, far below float64 round-off of the closed forms near zero.
_SMALL_ANGLE_SQ = 1e-7


def hat(w):
    """Cross-product matrix: ``hat(a) @ b == cross(a, b)``. Batched over leading axes."""
    w = jnp.asarray(w)
    zero = jnp.zeros_like(w[..., 0])
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    return jnp.stack(
        [
            jnp.stack([zero, -z, y], axis=-1),
            jnp.stack([z, zero, -x], axis=-1),
            jnp.stack([-y, x, zero], axis=-1),
        ],
        axis=-2,
    )


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
    s, c = jnp.sin(t), jnp.cos(t)
    a = jnp.where(small, 1.0 - theta_sq / 6.0 + theta_sq**2 / 120.0, s / t)
    b = jnp.where(small, 0.5 - theta_sq / 24.0 + theta_sq**2 / 720.0, (1.0 - c) / safe_sq)
    d = jnp.where(
        small, 1.0 / 6.0 - theta_sq / 120.0 + theta_sq**2 / 5040.0, (t - s) / (safe_sq * t)
    )
    return a, b, d


def _hat_squared(w, t2, eye):
    """w~ w~ = w w^T - |w|^2 I, elementwise (fuses; a batched 3x3 matmul does not on CPU)."""
    return w[..., :, None] * w[..., None, :] - t2[..., None, None] * eye


def so3_exp(w):
    """Rodrigues' formula, paper 1 eq. 5-7: exp(w~) = I + sin(t)/t w~ + (1-cos t)/t^2 w~^2."""
    w = jnp.asarray(w)
    t2 = jnp.sum(w * w, axis=-1)
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
    t2 = jnp.sum(w * w, axis=-1)
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
