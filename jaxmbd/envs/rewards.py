"""dm_control's soft indicator ``tolerance`` in JAX (``dm_control/utils/rewards.py``,
``tolerance`` and ``_sigmoids``): 1 inside ``bounds``, falling off with the distance to the
nearest bound over ``margin`` by a sigmoid that equals ``value_at_margin`` at one
margin. The same arithmetic as dm_control's NumPy code, so the values agree to round-off;
differentiable in ``x`` (``jnp.where`` picks, the sigmoids are smooth)."""

from __future__ import annotations

import math

import jax.numpy as jnp

from .. import _config  # noqa: F401

DEFAULT_VALUE_AT_MARGIN = 0.1
SIGMOIDS = ("gaussian", "hyperbolic", "long_tail", "reciprocal", "cosine", "linear",
            "quadratic", "tanh_squared")  # fmt: skip


def _sigmoids(x, value_at_1: float, sigmoid: str):
    """1 at x = 0, ``value_at_1`` at x = 1 (dm_control's ``_sigmoids``)."""
    if sigmoid in ("cosine", "linear", "quadratic"):
        if not 0 <= value_at_1 < 1:
            raise ValueError(f"tolerance: value_at_margin must be in [0, 1), got {value_at_1}")
    elif not 0 < value_at_1 < 1:
        raise ValueError(f"tolerance: value_at_margin must be in (0, 1), got {value_at_1}")
    if sigmoid == "gaussian":
        scale = math.sqrt(-2 * math.log(value_at_1))
        return jnp.exp(-0.5 * (x * scale) ** 2)
    if sigmoid == "hyperbolic":
        scale = math.acosh(1 / value_at_1)
        return 1 / jnp.cosh(x * scale)
    if sigmoid == "long_tail":
        scale = math.sqrt(1 / value_at_1 - 1)
        return 1 / ((x * scale) ** 2 + 1)
    if sigmoid == "reciprocal":
        scale = 1 / value_at_1 - 1
        return 1 / (jnp.abs(x) * scale + 1)
    if sigmoid == "cosine":
        scale = math.acos(2 * value_at_1 - 1) / math.pi
        scaled = x * scale
        return jnp.where(jnp.abs(scaled) < 1, (1 + jnp.cos(jnp.pi * scaled)) / 2, 0.0)
    if sigmoid == "linear":
        scaled = x * (1 - value_at_1)
        return jnp.where(jnp.abs(scaled) < 1, 1 - scaled, 0.0)
    if sigmoid == "quadratic":
        scaled = x * math.sqrt(1 - value_at_1)
        return jnp.where(jnp.abs(scaled) < 1, 1 - scaled**2, 0.0)
    if sigmoid == "tanh_squared":
        scale = math.atanh(math.sqrt(1 - value_at_1))
        return 1 - jnp.tanh(x * scale) ** 2
    raise ValueError(f"tolerance: unknown sigmoid {sigmoid!r}; choose one of {SIGMOIDS}")


def tolerance(x, bounds=(0.0, 0.0), margin: float = 0.0, sigmoid: str = "gaussian",
              value_at_margin: float = DEFAULT_VALUE_AT_MARGIN):  # fmt: skip
    """1 where ``bounds[0] <= x <= bounds[1]``, else the sigmoid of the distance to the
    nearest bound in units of ``margin`` (0 outside where ``margin == 0``). Elementwise
    over ``x``; the options are Python numbers, as dm_control's."""
    lower, upper = bounds
    if lower > upper:
        raise ValueError(f"tolerance: lower bound {lower} > upper bound {upper}")
    if margin < 0:
        raise ValueError(f"tolerance: margin must be non-negative, got {margin}")
    x = jnp.asarray(x)
    in_bounds = (lower <= x) & (x <= upper)
    if margin == 0:
        return jnp.where(in_bounds, 1.0, 0.0)
    d = jnp.where(x < lower, lower - x, x - upper) / margin
    # inside, d is unused: 0 there keeps gradients finite at infinite bounds (d = -inf)
    d = jnp.where(in_bounds, 0.0, d)
    return jnp.where(in_bounds, 1.0, _sigmoids(d, value_at_margin, sigmoid))
