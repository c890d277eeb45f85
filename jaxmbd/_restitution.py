"""The damping factor a(e) of the Hunt–Crossley normal law for a coefficient of
restitution e: the calibration shared by compliant contact (:mod:`jaxmbd.contact.law`, whose
module docstring derives e(a)) and compliant joint limits (:mod:`jaxmbd.joint_limits`)."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401

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
