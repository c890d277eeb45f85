"""Euler parameters and ZXZ Euler angles (paper 1, sections 2.2, 2.3, 3.2, 3.3).

Conventions (PAPER_NOTES section 1): Euler parameters are scalar first, p = (e0, e);
A(p) = (e0^2 - e.e) I + 2 (e e^T + e0 e~) (eq. 22); G = [-e, -e~ + e0 I] and
E = [-e, e~ + e0 I] so that omega_bar = 2 G p_dot and omega = 2 E p_dot. Euler angles are
ZXZ intrinsic, A = Rz(phi) Rx(theta) Rz(psi), singular at theta in {0, pi}.
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.small import dot, mm
from . import hat


def ep_to_A(p):
    """Rotation matrix of Euler parameters p = (e0, e1, e2, e3), eq. 22."""
    p = jnp.asarray(p)
    e0, e = p[..., 0], p[..., 1:]
    eye = jnp.eye(3, dtype=p.dtype)
    # e.e unrolled (jaxmbd.compiled.small.dot), not a reduce: differentiated twice with constant
    # one-hot tangents, XLA:CPU matches a product and a reduce into a dot fusion, which
    # keeps a time step from being hoisted
    return (e0**2 - dot(e, e))[..., None, None] * eye + 2.0 * (
        e[..., :, None] * e[..., None, :] + e0[..., None, None] * hat(e)
    )


def ep_G(p):
    """G(p) (3x4): omega_bar = 2 G(p) p_dot (body frame)."""
    p = jnp.asarray(p)
    e0, e = p[..., 0], p[..., 1:]
    right = -hat(e) + e0[..., None, None] * jnp.eye(3, dtype=p.dtype)
    return jnp.concatenate([-e[..., :, None], right], axis=-1)


def ep_E(p):
    """E(p) (3x4): omega = 2 E(p) p_dot (global frame)."""
    p = jnp.asarray(p)
    e0, e = p[..., 0], p[..., 1:]
    right = hat(e) + e0[..., None, None] * jnp.eye(3, dtype=p.dtype)
    return jnp.concatenate([-e[..., :, None], right], axis=-1)


def ep_B(p, s_bar):
    """B(p, s_bar) = d(A(p) s_bar)/dp (3x4), eq. 23a.

    Closed form (Haug 1989): B = 2 [(e0 I + e~) s_bar, e s_bar^T - (e0 I + e~) s_bar~].
    """
    p = jnp.asarray(p)
    s_bar = jnp.asarray(s_bar)
    e0, e = p[..., 0], p[..., 1:]
    m = e0[..., None, None] * jnp.eye(3, dtype=p.dtype) + hat(e)
    first = (m @ s_bar[..., None])[..., 0]
    right = e[..., :, None] * s_bar[..., None, :] - m @ hat(s_bar)
    return 2.0 * jnp.concatenate([first[..., :, None], right], axis=-1)


def A_to_ep(A):
    """Euler parameters of a rotation matrix (Shepperd's method), with e0 >= 0."""
    A = jnp.asarray(A)
    tr = A[..., 0, 0] + A[..., 1, 1] + A[..., 2, 2]
    # Four candidate formulas; pick the one with the largest pivot for accuracy.
    pivots = jnp.stack([tr, A[..., 0, 0], A[..., 1, 1], A[..., 2, 2]], axis=-1)
    k = jnp.argmax(pivots, axis=-1)

    def from_pivot(idx):
        # The chosen pivot's radicand (4 e_i^2) is at least 2/3. The other candidates' are
        # replaced by 1 (their values are discarded): a radicand near 0 there (every
        # candidate but the first at the identity) gives finite values but a derivative
        # of 1/s^3 that overflows, and 0 * inf = NaN reaches a second derivative.
        def pivot(radicand):
            return jnp.where(k == idx, radicand, 1.0)

        a = A
        if idx == 0:
            s = 2.0 * jnp.sqrt(pivot(1.0 + tr))
            q = [
                0.25 * s,
                (a[..., 2, 1] - a[..., 1, 2]) / s,
                (a[..., 0, 2] - a[..., 2, 0]) / s,
                (a[..., 1, 0] - a[..., 0, 1]) / s,
            ]
        elif idx == 1:
            s = 2.0 * jnp.sqrt(pivot(1.0 + a[..., 0, 0] - a[..., 1, 1] - a[..., 2, 2]))
            q = [
                (a[..., 2, 1] - a[..., 1, 2]) / s,
                0.25 * s,
                (a[..., 0, 1] + a[..., 1, 0]) / s,
                (a[..., 0, 2] + a[..., 2, 0]) / s,
            ]
        elif idx == 2:
            s = 2.0 * jnp.sqrt(pivot(1.0 - a[..., 0, 0] + a[..., 1, 1] - a[..., 2, 2]))
            q = [
                (a[..., 0, 2] - a[..., 2, 0]) / s,
                (a[..., 0, 1] + a[..., 1, 0]) / s,
                0.25 * s,
                (a[..., 1, 2] + a[..., 2, 1]) / s,
            ]
        else:
            s = 2.0 * jnp.sqrt(pivot(1.0 - a[..., 0, 0] - a[..., 1, 1] + a[..., 2, 2]))
            q = [
                (a[..., 1, 0] - a[..., 0, 1]) / s,
                (a[..., 0, 2] + a[..., 2, 0]) / s,
                (a[..., 1, 2] + a[..., 2, 1]) / s,
                0.25 * s,
            ]
        return jnp.stack(q, axis=-1)

    candidates = jnp.stack([from_pivot(i) for i in range(4)], axis=-2)
    p = jnp.take_along_axis(candidates, k[..., None, None], axis=-2)[..., 0, :]
    p = jnp.where(p[..., :1] < 0, -p, p)
    return p / jnp.linalg.norm(p, axis=-1, keepdims=True)


def _rz(a):
    c, s = jnp.cos(a), jnp.sin(a)
    z, o = jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack(
        [jnp.stack([c, -s, z], -1), jnp.stack([s, c, z], -1), jnp.stack([z, z, o], -1)], -2
    )


def _rx(a):
    c, s = jnp.cos(a), jnp.sin(a)
    z, o = jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack(
        [jnp.stack([o, z, z], -1), jnp.stack([z, c, -s], -1), jnp.stack([z, s, c], -1)], -2
    )


def zxz_to_A(eps):
    """A(phi, theta, psi) = Rz(phi) Rx(theta) Rz(psi), paper 1 section 2.3."""
    eps = jnp.asarray(eps)
    # elementwise products, not @: a dot keeps a time step from being hoisted
    return mm(mm(_rz(eps[..., 0]), _rx(eps[..., 1])), _rz(eps[..., 2]))


def zxz_Bbar(eps):
    """B_bar(eps) of eq. 43b: omega_bar = B_bar eps_dot (body frame)."""
    eps = jnp.asarray(eps)
    th, ps = eps[..., 1], eps[..., 2]
    st, ct, sp, cp = jnp.sin(th), jnp.cos(th), jnp.sin(ps), jnp.cos(ps)
    z, o = jnp.zeros_like(th), jnp.ones_like(th)
    return jnp.stack(
        [
            jnp.stack([sp * st, cp, z], -1),
            jnp.stack([cp * st, -sp, z], -1),
            jnp.stack([ct, z, o], -1),
        ],
        -2,
    )


def A_to_zxz(A):
    """ZXZ angles of A with theta in [0, pi]; inaccurate near the singularity theta in {0, pi}."""
    A = jnp.asarray(A)
    theta = jnp.arctan2(jnp.hypot(A[..., 2, 0], A[..., 2, 1]), A[..., 2, 2])
    phi = jnp.arctan2(A[..., 0, 2], -A[..., 1, 2])
    psi = jnp.arctan2(A[..., 2, 0], A[..., 2, 1])
    return jnp.stack([phi, theta, psi], axis=-1)
