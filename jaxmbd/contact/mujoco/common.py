"""What every MuJoCo collision kernel shares: the `Contacts` slots, MuJoCo's `mju_normalize3`
and `mju_makeFrame`, and the compaction of candidate contacts into a fixed number of slots.

Every kernel has the signature ``kernel(pos1, mat1, size1, pos2, mat2, size2, margin)``, with
MuJoCo's ``geom_xpos`` (3,), ``geom_xmat`` as a (3, 3) matrix (columns are the geom's axes),
``geom_size`` (3,) and the margin MuJoCo passes to its collision functions (the pair's
margin plus gap). Values stay finite, and so do their gradients, in degenerate poses: square
roots and divisions go through :func:`safe_sqrt` and :func:`safe_div`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from ... import _config  # noqa: F401  (float64)

MINVAL = 1e-15  # MuJoCo's mjMINVAL
MAXVAL = 1e10  # MuJoCo's mjMAXVAL


class Contacts(NamedTuple):
    """A kernel's fixed contact slots; a slot with ``valid`` False is one MuJoCo does not
    return. ``frame[k, 0]`` is the normal (from geom1 to geom2), ``frame[k, 1:]`` the tangents
    exactly as MuJoCo's ``mjContact.frame``."""

    dist: jnp.ndarray  # (k,)
    pos: jnp.ndarray  # (k, 3)
    frame: jnp.ndarray  # (k, 3, 3)
    valid: jnp.ndarray  # (k,) bool


class Raw(NamedTuple):
    """Contacts as MuJoCo's collision functions fill ``mjPreContact`` (normal and tangent
    still apart; a zero tangent asks ``mju_makeFrame`` for its default)."""

    dist: jnp.ndarray
    pos: jnp.ndarray
    normal: jnp.ndarray
    tangent: jnp.ndarray
    valid: jnp.ndarray


def safe_sqrt(x):
    """sqrt with a zero (not infinite) gradient at 0 and below."""
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


def safe_div(num, den):
    """num / den where den != 0, else 0 (finite values and gradients; callers mask the
    branch MuJoCo does not take)."""
    nonzero = den != 0
    return jnp.where(nonzero, num / jnp.where(nonzero, den, 1.0), 0.0)


def normalize3(vec):
    """MuJoCo's ``mju_normalize3``: (unit vector, length); (1, 0, 0) below mjMINVAL."""
    norm = safe_sqrt(jnp.sum(vec * vec, axis=-1))
    small = norm < MINVAL
    unit = vec / jnp.where(small, 1.0, norm)[..., None]
    unit = jnp.where(small[..., None], jnp.array([1.0, 0.0, 0.0]), unit)
    return unit, norm


def make_frame(normal, tangent):
    """MuJoCo's ``mju_makeFrame`` for one contact: the normal normalised, the tangent set to
    (0, 1, 0), or (0, 0, 1) when the normal's y is at least 0.5 in size, if it is shorter than
    0.5, then orthonormalised; the third row is normal x tangent."""
    x, _ = normalize3(normal)
    unset = jnp.dot(tangent, tangent) < 0.25
    default = jnp.where(
        (x[1] < 0.5) & (x[1] > -0.5), jnp.array([0.0, 1.0, 0.0]), jnp.array([0.0, 0.0, 1.0])
    )
    y = jnp.where(unset, default, tangent)
    y, _ = normalize3(y - x * jnp.dot(x, y))
    return jnp.stack([x, y, jnp.cross(x, y)])


def finish(raw: Raw) -> Contacts:
    """The slots as MuJoCo's ``mj_setContact`` leaves them (frames completed)."""
    frame = jnp.vectorize(make_frame, signature="(3),(3)->(3,3)")(raw.normal, raw.tangent)
    return Contacts(raw.dist, raw.pos, frame, raw.valid)


def stack(*raws: Raw) -> Raw:
    """Single-contact Raw values (scalars, 3-vectors) stacked into slots."""
    return Raw(*(jnp.stack([jnp.asarray(getattr(r, f)) for r in raws]) for f in Raw._fields))


def first_k(valid, slots: int):
    """Indices of the first ``slots`` True entries of ``valid`` (in order) and which of the
    slots got one."""
    rank = jnp.cumsum(valid) - 1
    chosen = valid[None, :] & (rank[None, :] == jnp.arange(slots)[:, None])
    return jnp.argmax(chosen, axis=1), jnp.any(chosen, axis=1)


def compact(raw: Raw, slots: int) -> Raw:
    """The first ``slots`` valid candidates, in order, as MuJoCo's collision functions write
    their contacts one after another (``con + n``)."""
    index, ok = first_k(raw.valid, slots)
    return Raw(raw.dist[index], raw.pos[index], raw.normal[index], raw.tangent[index], ok)


def select(condition, a: Raw, b: Raw) -> Raw:
    """a where condition (a scalar) else b, field by field."""
    return Raw(*(jnp.where(condition, x, y) for x, y in zip(a, b, strict=True)))


def axis_z(mat):
    """A geom's z axis: column 2 of its xmat (MuJoCo's mat[2], mat[5], mat[8])."""
    return mat[:, 2]
