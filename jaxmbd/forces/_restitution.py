"""The damping factor a(e) of the Hunt–Crossley normal law for a coefficient of
restitution e: the calibration shared by compliant contact (:mod:`jaxmbd.contact.law`, whose
module docstring derives e(a)) and compliant joint limits (:mod:`jaxmbd.forces.joint_limits`); and
the gravity factor kappa(e) with which compliant contact keeps e under gravity (derived in
the same docstring)."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import scipy  # its submodules load on first use (scipy.interpolate, .spatial, .linalg)

from .. import _config  # noqa: F401

#: The smallest coefficient of restitution the calibration covers (smaller ones use it).
E_MIN = 0.01

#: Gauss–Legendre nodes of the quadrature in :func:`restitution_of`.
QUADRATURE_NODES = 400
#: Intervals of the table of a(e) on [E_MIN, 1].
TABLE_INTERVALS = 200


@functools.cache
def _gauss_legendre(n: int):
    """The nodes and weights of n-point Gauss–Legendre quadrature on [-1, 1], computed on
    first use (an eigenvalue problem of size n: kept out of ``import jaxmbd``)."""
    return np.polynomial.legendre.leggauss(n)


def restitution_of(a) -> np.ndarray:
    """The coefficient of restitution e(a) of the normal law with damping factor ``a``
    (NumPy, any shape; the quadrature of the module docstring, exact to ~1e-12)."""
    nodes, weights = _gauss_legendre(QUADRATURE_NODES)
    a = np.asarray(a, dtype=np.float64)[..., None]
    lo = np.where(a > 1.0, -1.0 / np.maximum(a, 1.0), -1.0)
    c = lo + 0.5 * (nodes + 1.0) * (1.0 - lo)
    integrand = a * c * c / (1.0 + a * c * (1.0 - c * c))
    total = 0.5 * (1.0 - lo[..., 0]) * np.sum(weights * integrand, axis=-1)
    return np.exp(-total) / np.maximum(a[..., 0], 1.0)


@functools.cache
def calibrate_restitution(intervals: int = TABLE_INTERVALS):
    """The damping factor a(e) on the uniform grid of ``intervals`` + 1 values of e in
    [E_MIN, 1] and its slopes da/de, as NumPy arrays (e, a, slope): each a solves
    restitution_of(a) = e by bisection (e(a) decreases strictly), the slope is the inverse
    of de/da by central differences. Computed once per process (a few milliseconds)."""
    e = np.linspace(E_MIN, 1.0, intervals + 1)
    lo, hi = np.zeros_like(e), np.full_like(e, 1e3)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        too_much = restitution_of(mid) < e  # too much damping: e(mid) below the target
        hi, lo = np.where(too_much, mid, hi), np.where(too_much, lo, mid)
    a = np.where(e >= 1.0, 0.0, 0.5 * (lo + hi))
    step = 1e-6 * np.maximum(a, 1.0)
    left = np.maximum(a - step, 0.0)
    slope = (a + step - left) / (restitution_of(a + step) - restitution_of(left))
    return e, a, slope


def damping_factor(restitution):
    """a(e) of the normal law for restitution ``e`` (array, any shape): cubic Hermite
    interpolation of the calibrated table (C1 in e; e clipped to [E_MIN, 1])."""
    _, a_tab, s_tab = calibrate_restitution()
    m = len(a_tab) - 1
    de = (1.0 - E_MIN) / m
    e = jnp.asarray(restitution, dtype=jnp.float64)
    e = jnp.where(e < E_MIN, E_MIN, jnp.where(e > 1.0, 1.0, e))  # where: full slope at 1
    u = (e - E_MIN) / de
    k = jnp.clip(jnp.floor(u), 0, m - 1).astype(jnp.int32)
    s = u - k
    a0, a1 = jnp.asarray(a_tab)[k], jnp.asarray(a_tab)[k + 1]
    m0, m1 = jnp.asarray(s_tab)[k] * de, jnp.asarray(s_tab)[k + 1] * de
    s2, s3 = s * s, s * s * s
    return (
        (2 * s3 - 3 * s2 + 1) * a0 + (s3 - 2 * s2 + s) * m0 + (-2 * s3 + 3 * s2) * a1
        + (s3 - s2) * m1
    )  # fmt: skip


#: Largest gravity correction u: the damping factor is never below a(e) / (1 + GRAVITY_CAP).
GRAVITY_CAP = 0.25
#: The dimensionless gravity g t* / v0 at which kappa(e) is calibrated (a 0.3 m drop of the
#: 1 kg ball of the contact guide; the correction holds the rebound to 1 % for 0.0025-0.02).
GRAVITY_CALIBRATION = 0.005
#: The e of the kappa(e) table (below its first entry kappa is held: the cap then decides).
GRAVITY_TABLE_E = np.linspace(0.1, 1.0, 37)
#: kappa(e) on :data:`GRAVITY_TABLE_E`, as :func:`calibrate_gravity_factor` computes it (a few
#: seconds, so stored; the tests recompute it).
GRAVITY_FACTOR = np.array([
    17.5824, 13.1737, 10.3212, 8.3388, 6.9135, 5.8500, 5.0131, 4.3431, 3.8074, 3.3636,
    2.9899, 2.6677, 2.4066, 2.1771, 1.9708, 1.7947, 1.7885, 1.8089, 1.8280, 1.8477, 1.8699,
    1.8972, 1.9118, 1.9346, 1.9447, 1.9675, 1.9782, 1.9741, 1.9901, 1.9925, 2.0290, 1.9952,
    2.0000, 2.0865, 2.0587, 2.2275, 2.2275
])  # fmt: skip


def impact_exit_speed(a, kappa, gamma, exponent=1.5, dt=4e-3) -> np.ndarray:
    """Exit speed of the dimensionless impact x'' = gamma - max(0, x^n (1 + a_g x' / R)),
    x(0) = 0, x'(0) = 1, with R = sqrt(x'^2 + 2 x^(n+1) / (n + 1)) and the damping factor
    a_g = a / (1 + min(kappa gamma R^(2/(n+1) - 2), GRAVITY_CAP)) (NumPy, a and kappa
    broadcast; classical RK4, the exit at x = 0 from the last step's energy; nan for an
    impact that does not end by t = 40)."""
    a, kappa = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(kappa, np.float64))
    n = float(exponent)
    p = 2.0 - 2.0 / (n + 1.0)

    def acc(x, xd):
        xp = np.maximum(x, 0.0)
        r = np.sqrt(xd * xd + 2.0 * xp ** (n + 1.0) / (n + 1.0))
        u = np.minimum(kappa * gamma * np.maximum(r, 1e-12) ** -p, GRAVITY_CAP)
        ratio = xd / np.maximum(r, 1e-300)
        force = np.where(x > 0, np.maximum(0.0, xp**n * (1.0 + a / (1.0 + u) * ratio)), 0.0)
        return gamma - force

    x, xd = np.zeros_like(a), np.ones_like(a)
    out = np.full_like(a, np.nan)
    t = 0.0
    while np.isnan(out).any() and t < 40.0:
        k1x, k1v = xd, acc(x, xd)
        k2x, k2v = xd + 0.5 * dt * k1v, acc(x + 0.5 * dt * k1x, xd + 0.5 * dt * k1v)
        k3x, k3v = xd + 0.5 * dt * k2v, acc(x + 0.5 * dt * k2x, xd + 0.5 * dt * k2v)
        k4x, k4v = xd + dt * k3v, acc(x + dt * k3x, xd + dt * k3v)
        x1 = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        v1 = xd + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v)
        leaves = (x1 < 0.0) & (x >= 0.0) & (t > 0.0) & np.isnan(out)
        # below the surface the motion is ballistic: the speed at x = 0 from its energy
        out = np.where(leaves, np.sqrt(np.maximum(v1 * v1 + 2.0 * gamma * x1, 0.0)), out)
        x, xd, t = x1, v1, t + dt
    return out


def calibrate_gravity_factor():
    """kappa(e) on :data:`GRAVITY_TABLE_E`: the factor with which the impact of
    :func:`impact_exit_speed` (n = 1.5, a = a(e)) leaves at e under the dimensionless gravity
    :data:`GRAVITY_CALIBRATION` (secant iterations, a few seconds: the law uses the stored
    :data:`GRAVITY_FACTOR`)."""
    e = GRAVITY_TABLE_E
    e_tab, a_tab, _ = calibrate_restitution()
    a = np.interp(e, e_tab, a_tab)
    gamma = GRAVITY_CALIBRATION
    k0, f0 = np.zeros_like(e), impact_exit_speed(a, 0.0, gamma) - e
    k1 = np.full_like(e, 2.0)
    f1 = impact_exit_speed(a, k1, gamma) - e
    for _ in range(3):
        slope = np.where(np.abs(f1 - f0) > 1e-14, (f1 - f0) / (k1 - k0), 1.0)
        k2 = np.where(np.abs(f1) > 1e-12, k1 - f1 / slope, k1)
        k0, f0, k1 = k1, f1, k2
        f1 = impact_exit_speed(a, k1, gamma) - e
    return np.where(a > 0.0, k1, k1[-2])


@functools.cache
def _gravity_slopes() -> np.ndarray:
    """d kappa / de of the cubic spline of :data:`GRAVITY_FACTOR` at its nodes."""
    return scipy.interpolate.CubicSpline(GRAVITY_TABLE_E, GRAVITY_FACTOR)(GRAVITY_TABLE_E, 1)


def gravity_factor(restitution):
    """kappa(e) (array, any shape): the cubic spline of :data:`GRAVITY_FACTOR` (scipy's
    ``CubicSpline``, C2 in e, so ``jax.grad`` reaches the restitution and central
    differences agree with it; held at the end values outside :data:`GRAVITY_TABLE_E`), in
    Hermite form."""
    e_tab, k_tab = GRAVITY_TABLE_E, GRAVITY_FACTOR
    m = len(e_tab) - 1
    de = (e_tab[-1] - e_tab[0]) / m
    slope = _gravity_slopes() * de
    e = jnp.clip(jnp.asarray(restitution, dtype=jnp.float64), e_tab[0], e_tab[-1])
    u = (e - e_tab[0]) / de
    k = jnp.clip(jnp.floor(u), 0, m - 1).astype(jnp.int32)
    s = u - k
    k0, k1 = jnp.asarray(k_tab)[k], jnp.asarray(k_tab)[k + 1]
    m0, m1 = jnp.asarray(slope)[k], jnp.asarray(slope)[k + 1]
    s2, s3 = s * s, s * s * s
    return (
        (2 * s3 - 3 * s2 + 1) * k0 + (s3 - 2 * s2 + s) * m0 + (-2 * s3 + 3 * s2) * k1
        + (s3 - s2) * m1
    )  # fmt: skip
