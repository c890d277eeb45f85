"""Explicit Butcher tableaus, shared by the explicit Runge-Kutta integrators (rkmk, rk).

A tableau is static data (numpy, hashable through its tuples): it fixes the program, so a
new tableau compiles a new program, while its coefficients never need a gradient.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np

_NAMED = {
    # forward Euler, order 1
    "euler": ([[0.0]], [1.0], [0.0], 1),
    # Heun's method (explicit trapezoidal rule), order 2
    "heun": ([[0.0, 0.0], [1.0, 0.0]], [0.5, 0.5], [0.0, 1.0], 2),
    # Kutta's third-order method
    "rk3": (
        [[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [-1.0, 2.0, 0.0]],
        [1 / 6, 2 / 3, 1 / 6],
        [0.0, 0.5, 1.0],
        3,
    ),
    # the classical fourth-order method
    "rk4": (
        [[0.0] * 4, [0.5, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]],
        [1 / 6, 1 / 3, 1 / 3, 1 / 6],
        [0.0, 0.5, 0.5, 1.0],
        4,
    ),
}


class ButcherTableau(eqx.Module):
    """An explicit Butcher tableau: ``a`` (s, s) strictly lower triangular, ``b`` (s,),
    ``c`` (s,) with c_i = sum_j a_ij, and its classical ``order`` (None if not stated).

    The coefficients are stored as nested tuples (static, hashable) so that a tableau can be
    an integrator's static field.
    """

    a: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    b: tuple[float, ...] = eqx.field(static=True)
    c: tuple[float, ...] = eqx.field(static=True)
    order: int | None = eqx.field(static=True, default=None)
    name: str = eqx.field(static=True, default="user")

    @property
    def stages(self) -> int:
        return len(self.b)


def _check(a, b, c, where: str):
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    s = b.shape[0] if b.ndim == 1 else -1
    if b.ndim != 1 or s == 0 or a.shape != (s, s) or c.shape != (s,):
        raise ValueError(
            f"{where}: a Butcher tableau needs a (s, s), b (s,) and c (s,) with s >= 1; got "
            f"shapes a {a.shape}, b {b.shape}, c {c.shape}"
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(np.isfinite(c))):
        raise ValueError(f"{where}: the tableau has non-finite coefficients")
    if np.any(np.triu(a) != 0.0):
        raise ValueError(
            f"{where}: the tableau is not explicit (a must be strictly lower triangular)"
        )
    if not np.allclose(a.sum(1), c, atol=1e-12):
        raise ValueError(f"{where}: c must equal the row sums of a (c = {c}, sums {a.sum(1)})")
    if not np.isclose(b.sum(), 1.0, atol=1e-12):
        raise ValueError(f"{where}: the weights b must sum to 1 (consistency), got {b.sum()}")
    return a, b, c


def get_tableau(tableau) -> ButcherTableau:
    """A tableau from a name ("euler", "heun", "rk3", "rk4"), a :class:`ButcherTableau`, or a
    user table given as ``(a, b, c)`` or a mapping with keys a, b, c (and optionally order).
    Raises ``ValueError`` naming what is wrong with a bad table."""
    if isinstance(tableau, ButcherTableau):
        _check(tableau.a, tableau.b, tableau.c, f"tableau {tableau.name!r}")
        return tableau
    if isinstance(tableau, str):
        if tableau not in _NAMED:
            raise ValueError(f"unknown tableau {tableau!r}; choose one of {sorted(_NAMED)}")
        a, b, c, order = _NAMED[tableau]
        name = tableau
    elif isinstance(tableau, dict):
        missing = {"a", "b", "c"} - set(tableau)
        if missing:
            raise ValueError(f"tableau mapping lacks key(s) {sorted(missing)}")
        a, b, c, order, name = (
            tableau["a"],
            tableau["b"],
            tableau["c"],
            tableau.get("order"),
            "user",
        )
    elif isinstance(tableau, (tuple, list)) and len(tableau) == 3:
        (a, b, c), order, name = tableau, None, "user"
    else:
        raise ValueError(
            "tableau must be a name (euler, heun, rk3, rk4), a ButcherTableau, (a, b, c) or "
            f"a mapping with keys a, b, c; got {type(tableau).__name__}"
        )
    a, b, c = _check(a, b, c, f"tableau {name!r}")
    return ButcherTableau(
        a=tuple(tuple(float(x) for x in row) for row in a),
        b=tuple(float(x) for x in b),
        c=tuple(float(x) for x in c),
        order=order,
        name=name,
    )


TABLEAUS = tuple(_NAMED)

__all__ = ["ButcherTableau", "TABLEAUS", "get_tableau"]


def stage_combination(row, K):
    """sum_l row_l K_l over the stages in their order, elementwise: no dot, so a step whose
    solves are elementwise stays one hoisted loop on the CPU (jaxmbd.linear.small); zero
    coefficients add exact zeros. ``row``: (s,) coefficients, ``K``: (s, n) stage values."""
    total = row[0] * K[0]
    for j in range(1, K.shape[0]):
        total = total + row[j] * K[j]
    return total
