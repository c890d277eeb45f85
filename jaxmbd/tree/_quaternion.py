"""Unit quaternions (w, x, y, z), MuJoCo's convention, for ball and free joint coordinates."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.trig import sin_cos


def quat_mul(a, b):
    """Hamilton product a b (..., 4)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_to_matrix(q):
    """Rotation matrix (..., 3, 3) of a quaternion, normalised first (MuJoCo normalises the
    ball and free joints' qpos before using it)."""
    q = q / jnp.sqrt(jnp.sum(q * q, -1, keepdims=True))
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def quat_exp(w):
    """exp(w / 2) as a unit quaternion: the rotation by the rotation vector ``w`` (..., 3);
    a Taylor branch keeps it and its derivatives finite at w = 0."""
    t2 = jnp.sum(w * w, -1)
    small = t2 < 1e-12
    t2_safe = jnp.where(small, 1.0, t2)
    t = jnp.sqrt(t2_safe)
    sin_half, cos_half = sin_cos(0.5 * t)
    half_sinc = jnp.where(small, 0.5 - t2 / 48.0, sin_half / t)
    cos_half = jnp.where(small, 1.0 - t2 / 8.0, cos_half)
    return jnp.concatenate([cos_half[..., None], half_sinc[..., None] * w], -1)


def rotate_by_quat_increment(q, w):
    """q exp(w): a quaternion turned by the body-frame rotation vector ``w``, normalised
    (MuJoCo's ``mj_integratePos`` for ball and free joints)."""
    out = quat_mul(q, quat_exp(w))
    return out / jnp.sqrt(jnp.sum(out * out, -1, keepdims=True))
