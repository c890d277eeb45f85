"""Contact pairs as model data: from the builder's pairs and shapes to a :class:`ContactForce`.

Broad phase is static: the pairs are fixed when the model is built. A pair (body_i, body_j)
checks every colliding shape of body_i against every colliding shape of body_j (the
ground's: its planes and the shapes fixed to it) whose pair kind has a narrow phase
(:data:`~jaxmbd.contact.narrow_phase.SLOTS`); shape pairs without one are skipped with a
warning naming them.

Default stiffness (``stiffness=None``): the pair's reduced mass m_eff resting on one slot
under gravity (|g|, or 9.81 m/s^2 in a model without gravity) penetrates
:data:`STATIC_PENETRATION` (1e-3) of the smallest dimension L of the pair's shapes (a radius,
a half edge): K = m_eff |g| / (1e-3 L)^n for Hunt–Crossley (each law's
:meth:`~jaxmbd.contact.abstract_law.AbstractContactLaw.default_stiffness`). A 1 kg sphere
of radius 5 cm then has K = 2.8e7 N/m^1.5 and an impact at 1 m/s lasts 4 ms; choose h at
most a tenth of that for an accurate restitution, or give a softer stiffness.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import equinox as eqx
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.host_arrays import device_array
from ..geometry import height_field_points, shape_kind
from .abstract_law import AbstractContactLaw
from .element import CollisionGroup, ContactForce
from .height_field import HeightFieldGroup, window_of
from .law import HuntCrossley
from .narrow_phase import SLOTS, pair_kind, shape_scale, shape_size

#: Static penetration of the default stiffness, as a fraction of the pair's smallest size.
STATIC_PENETRATION = 1e-3
STANDARD_GRAVITY = 9.81


@dataclass
class ContactSpec:
    """One pair as given to the builder (``body_j`` may be "ground")."""

    body_i: str
    body_j: str
    friction: float
    restitution: float
    stiffness: float | None
    damping: float
    exponent: float
    slip_velocity: float
    torsional_friction: float = 0.0
    rolling_friction: float = 0.0
    margin: float = 0.0
    # (k_i, k_j) indices into the two bodies' shape lists (the ground's: its ground shapes in
    # the order added) of the shape pairs that collide; None: every pair of colliding shapes
    shapes: tuple[tuple[int, int], ...] | None = None
    law: AbstractContactLaw | None = None  # None: Hunt–Crossley


@dataclass
class _Body:
    name: str
    mass: float  # inf for the ground
    shapes: tuple  # every shape, visual-only ones included (their indices are the user's)


def _member_data(shape):
    return (
        np.asarray(shape.pos, dtype=np.float64),
        np.asarray(shape.A, dtype=np.float64),
        shape_size(shape),
    )


def _stacked(arrays) -> np.ndarray:
    """The members' arrays stacked; meshes' hull rows (n_k, 4) padded to the longest by
    repeating their second row (a vertex) with weight 0, which changes neither the hull's
    support nor its vertex slots (:func:`~jaxmbd.geometry` ``_hull_size``)."""
    n = max(a.shape[0] for a in arrays)
    if arrays[0].ndim < 2 or all(a.shape[0] == n for a in arrays):
        return np.stack(arrays)
    pad = [np.concatenate([a, np.tile(np.r_[a[1, :3], 0.0], (n - len(a), 1))]) for a in arrays]
    return np.stack(pad)


def _kinds(body: _Body) -> list[str]:
    return [s.kind for s in body.shapes if s.collide]


def _shape_pairs(body_i: _Body, body_j: _Body, spec: ContactSpec):
    """The shape pairs ((k_i, k_j) indices into the bodies' shape lists) a contact pair
    checks: every pair of colliding shapes, or the pairs ``spec.shapes`` names (validated
    by the builder)."""
    if spec.shapes is None:
        return [(a, b) for a, sa in enumerate(body_i.shapes) if sa.collide
                for b, sb in enumerate(body_j.shapes) if sb.collide]  # fmt: skip
    return list(spec.shapes)


def build_contact_element(
    bodies: list[_Body], specs: list[ContactSpec], gravity, *, warn=True
) -> ContactForce | None:
    """The contact element of the pairs ``specs`` between ``bodies`` (the ground last),
    or None without pairs. Raises ValueError for a pair without any shape pair that has a
    narrow phase."""
    if not specs:
        return None
    index = {b.name: k for k, b in enumerate(bodies)}
    nb = len(bodies) - 1
    g_ref = float(np.linalg.norm(gravity)) or STANDARD_GRAVITY
    members: dict[str, list] = {name: [] for name in SLOTS}
    fields: dict[tuple, list] = {}  # (kind, field's body, its shape index) -> members
    skipped: list[str] = []
    stiffness = []
    laws: list[AbstractContactLaw] = []
    pair_law = []
    for p, spec in enumerate(specs):
        law = HuntCrossley() if spec.law is None else spec.law
        same = [k for k, known in enumerate(laws) if _same_law(known, law)]
        if not same:
            laws.append(law)
        pair_law.append(same[0] if same else len(laws) - 1)
        i, j = index[spec.body_i], index[spec.body_j]
        used = []
        for ki, kj in _shape_pairs(bodies[i], bodies[j], spec):
            si, sj = bodies[i].shapes[ki], bodies[j].shapes[kj]
            kind, swapped = pair_kind(si.kind, sj.kind)
            if kind is None:
                skipped.append(f"{si.kind} of '{spec.body_i}' - {sj.kind} of '{spec.body_j}'")
                continue
            (ba, sa, ka), (bb, sb, kb) = (
                ((j, sj, kj), (i, si, ki)) if swapped else ((i, si, ki), (j, sj, kj))
            )
            row = (p, ba, bb, bb == i, _member_data(sa), _member_data(sb), ka, kb)
            group = members.get(kind)
            if group is not None:
                group.append(row)
            else:  # a height field (shape A) and a convex shape
                fields.setdefault((kind, ba, ka), []).append(row + (sa, sb))
            used += [si, sj]
        if not used:
            raise ValueError(
                f"contact '{spec.body_i}' - '{spec.body_j}': no pair of their colliding "
                f"shapes has a narrow phase (shapes: {_kinds(bodies[i])} and "
                f"{_kinds(bodies[j])}; supported pairs: {sorted(SLOTS)})"
            )
        if spec.stiffness is None:
            m_i, m_j = bodies[i].mass, bodies[j].mass
            m_eff = (
                m_i if math.isinf(m_j) else (m_j if math.isinf(m_i) else m_i * m_j / (m_i + m_j))
            )
            scale = min(shape_scale(s) for s in used)
            stiffness.append(
                law.default_stiffness(m_eff * g_ref, STATIC_PENETRATION * scale, spec.exponent)
            )
        else:
            stiffness.append(float(spec.stiffness))
    if skipped and warn:
        warnings.warn(
            "contact: shape pairs without a narrow phase are skipped: " + "; ".join(skipped),
            stacklevel=4,
        )
    groups = []
    for kind, rows in members.items():
        if not rows:
            continue
        (pa, Ra, sa), (pb, Rb, sb) = (
            [_stacked([row[4][k] for row in rows]) for k in range(3)],
            [_stacked([row[5][k] for row in rows]) for k in range(3)],
        )
        groups.append(
            CollisionGroup(
                kind=kind,
                pair=tuple(row[0] for row in rows),
                body_a=tuple(row[1] for row in rows),
                body_b=tuple(row[2] for row in rows),
                b_is_i=tuple(bool(row[3]) for row in rows),
                pos_a=device_array(pa),
                rot_a=device_array(Ra),
                size_a=device_array(sa),
                pos_b=device_array(pb),
                rot_b=device_array(Rb),
                size_b=device_array(sb),
                shape_a=tuple(row[6] for row in rows),
                shape_b=tuple(row[7] for row in rows),
            )
        )
    for (kind, _, _), rows in fields.items():
        groups += _height_field_groups(kind, rows)

    def per_pair(key):
        return device_array([float(getattr(s, key)) for s in specs])

    return ContactForce(
        pairs=tuple((index[s.body_i], index[s.body_j]) for s in specs),
        shapes=tuple(s.shapes for s in specs),
        pair_names=_pair_names(specs),
        groups=tuple(groups),
        friction=per_pair("friction"),
        torsional_friction=per_pair("torsional_friction"),
        rolling_friction=per_pair("rolling_friction"),
        margin=per_pair("margin"),
        restitution=per_pair("restitution"),
        stiffness=device_array(stiffness),
        damping=per_pair("damping"),
        exponent=per_pair("exponent"),
        slip_velocity=per_pair("slip_velocity"),
        mass=device_array([b.mass for b in bodies[:nb]]),
        laws=tuple(laws),
        pair_law=tuple(pair_law),
    )


def _height_field_groups(kind: str, rows) -> list[HeightFieldGroup]:
    """The groups of one height field (every row's shape A) with shapes of one kind, one
    per window size that the shapes need (:func:`~jaxmbd.contact.height_field.window_of`)."""
    field = rows[0][8]
    nrow, ncol = (int(x) for x in field.param("grid"))
    size = shape_size(field)
    heights = height_field_points(field)[:, 2].reshape(nrow, ncol)
    by_window: dict[tuple[int, int], list] = {}
    for row in rows:
        bound = shape_kind(row[9].kind).collision_bound(row[5][2])
        window = window_of(bound, size, (nrow, ncol))
        by_window.setdefault(window, []).append(row)
    return [_height_field_group(kind, window, rows, size, heights)
            for window, rows in by_window.items()]  # fmt: skip


def _height_field_group(kind, window, rows, size, heights) -> HeightFieldGroup:
    return HeightFieldGroup(
        kind=kind,
        pair=tuple(row[0] for row in rows),
        body_a=tuple(row[1] for row in rows),
        body_b=tuple(row[2] for row in rows),
        b_is_i=tuple(bool(row[3]) for row in rows),
        window=window,
        pos_a=device_array(np.stack([row[4][0] for row in rows])),
        rot_a=device_array(np.stack([row[4][1] for row in rows])),
        size_a=device_array(size),
        heights=device_array(heights),
        pos_b=device_array(_stacked([row[5][0] for row in rows])),
        rot_b=device_array(_stacked([row[5][1] for row in rows])),
        size_b=device_array(_stacked([row[5][2] for row in rows])),
        shape_a=tuple(row[6] for row in rows),
        shape_b=tuple(row[7] for row in rows),
    )


def _pair_names(specs) -> tuple[str, ...]:
    """ "body_i/body_j" of each pair; a further pair between the same bodies (other shape
    pairs with other numbers) gets "#2", "#3", ..."""
    seen: dict[frozenset, int] = {}
    names = []
    for s in specs:
        key = frozenset((s.body_i, s.body_j))
        seen[key] = seen.get(key, 0) + 1
        names.append(f"{s.body_i}/{s.body_j}" + (f"#{seen[key]}" if seen[key] > 1 else ""))
    return tuple(names)


def _same_law(a: AbstractContactLaw, b: AbstractContactLaw) -> bool:
    """Whether two laws are the same law with equal parameters (pairs then share it)."""
    return type(a) is type(b) and bool(eqx.tree_equal(a, b))


def check_contact_law(where: str, law) -> None:
    """``law`` must be None or a contact law (ValueError otherwise)."""
    if law is not None and not isinstance(law, AbstractContactLaw):
        raise ValueError(
            f"{where}.law: expected a contact law (jaxmbd.contact.AbstractContactLaw), got "
            f"{type(law).__name__}"
        )


def check_contact_numbers(where: str, **values) -> dict:
    """Validated pair parameters (plain floats; stiffness may be None)."""
    rules = {
        "friction": (0.0, math.inf, True),
        "torsional_friction": (0.0, math.inf, True),
        "rolling_friction": (0.0, math.inf, True),
        "margin": (-math.inf, math.inf, True),
        "restitution": (0.0, 1.0, True),
        "stiffness": (0.0, math.inf, False),
        "damping": (0.0, math.inf, True),
        "exponent": (1.0, 3.0, True),
        "slip_velocity": (0.0, math.inf, False),
    }
    out = {}
    for key, value in values.items():
        if value is None and key in ("stiffness", "damping"):
            out[key] = None if key == "stiffness" else 0.0  # None: the default
            continue
        lo, hi, closed = rules[key]
        ok = isinstance(value, int | float | np.floating | np.integer) and not isinstance(
            value, bool
        )
        x = float(value) if ok else math.nan
        if not (math.isfinite(x) and (lo <= x if closed else lo < x) and x <= hi):
            span = f"[{lo:g}, {hi:g}]" if closed else f"({lo:g}, {hi:g}]"
            raise ValueError(f"{where}.{key}: expected a number in {span}, got {value!r}")
        out[key] = x
    return out
