"""Height fields against convex shapes: MuJoCo's prisms under a window that follows the shape.

MuJoCo collides a convex geom with a height field (``engine_collision_convex.c``,
``mjc_ConvexHField``; documentation, XML reference, ``hfield``) cell by cell: the field's
elevations h[r, c] over x = -size0 + c dx, y = -size1 + r dy (dx = 2 size0 / (ncol - 1),
dy = 2 size1 / (nrow - 1)) split each cell (r, c)-(r+1, c+1) into the triangles
{(r+1, c), (r, c), (r+1, c+1)} and {(r, c), (r+1, c+1), (r, c+1)}, each the top of a
prism down to the base z = -base. Only the cells under the geom's bounding box in the
field's frame (its support points along +-x, +-y) are tried: columns floor((x_min +
size0) / (2 size0) (ncol - 1)) to ceil((x_max + size0) / (2 size0) (ncol - 1)), rows
alike; a prism whose top (raised by the margin) lies below the geom's lowest point is
skipped (the prism height test); every other prism the geom penetrates gives one contact
(``mjc_penetration``: MuJoCo's nativeccd, GJK and EPA).

Here, so that shapes stay static under ``jit``: each shape of a group gets a fixed window
of ``window`` = (rows, cols) cells, from the bound of its size (a shape of bounding radius
rho spans at most ceil(2 rho / dx) + 1 columns), placed each step by index arithmetic at
MuJoCo's first row and column (moved inwards at the field's edges) and read from the
elevations by one ``dynamic_slice``; its 2 rows cols prisms are the shape's slots, each by
the support-function narrow phase (:func:`jaxmbd.contact.convex.collide_rows`: the signed
distance, the point midway and the normal from the field to the shape, as MuJoCo's; GJK
for every prism, the costly penetration search for the few deepest, :data:`DEEP_PRISMS`).
Cells of the window outside MuJoCo's range, and every cell where the bounding box misses
the field, give no contact (a positive gap). The elevations are one array leaf of the
group: ``jax.grad`` reaches them, and a new terrain of the same grid needs no new program.

MuJoCo stops at 50 contacts per geom pair (``mjMAXCONPAIR``); a window has no such limit.
With a contact margin, MuJoCo raises the prisms' tops and widens the geom by it; here the
gap is the distance and the contact element subtracts the pair's margin.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.small import mv, row_vec_mat
from ..geometry import SHAPE_BY_NAME
from . import convex
from .narrow_phase import Slots, convex_shape_of

#: Per shape kind: (the most prisms of a window in which the shape's core (a sphere's
#: centre, a capsule's segment, the whole of any other shape) can lie at once and each
#: give its contact, EPA's budget). :func:`jaxmbd.contact.convex.collide_rows` runs the
#: costly penetration search for these prisms only: a sphere or capsule sunk deeper than
#: its radius into more than one prism, a box or mesh into more than 4, an ellipsoid or
#: cylinder into more than 2, gets no contact from the others. A prism has 6 vertices:
#: against a point (a sphere's core) or a segment EPA reaches the nearest face of their
#: difference within 8 or 14 vertices; round shapes take EPA's full budget.
DEEP_PRISMS = {"sphere": (1, 8), "capsule": (1, 14), "box": (4, 16), "mesh": (4, 24),
               "ellipsoid": (2, None), "cylinder": (2, None)}  # fmt: skip


class HeightFieldGroup(eqx.Module):
    """The shape pairs of one height field (shape A, on body ``body_a``) with shapes of one
    kind (B), stacked: ``kind`` is ``"hfield_<B's kind>"``. The field: its local pose
    (``pos_a``, ``rot_a``, one row per member), ``heights`` (nrow, ncol) and ``size_a`` =
    (half extent along x, along y, base depth). Each member has ``window`` (rows, cols)
    cells, 2 rows cols slots (the window's prisms, cell by cell, two each). The rest as
    :class:`~jaxmbd.contact.element.CollisionGroup`."""

    kind: str = eqx.field(static=True)
    pair: tuple[int, ...] = eqx.field(static=True)
    body_a: tuple[int, ...] = eqx.field(static=True)
    body_b: tuple[int, ...] = eqx.field(static=True)
    b_is_i: tuple[bool, ...] = eqx.field(static=True)
    window: tuple[int, int] = eqx.field(static=True)
    pos_a: jax.Array
    rot_a: jax.Array
    size_a: jax.Array
    heights: jax.Array
    pos_b: jax.Array
    rot_b: jax.Array
    size_b: jax.Array
    shape_a: tuple[int, ...] = eqx.field(static=True, default=())
    shape_b: tuple[int, ...] = eqx.field(static=True, default=())

    @property
    def member_slots(self) -> int:
        return 2 * self.window[0] * self.window[1]

    @property
    def slots(self) -> int:
        return self.member_slots * len(self.pair)

    def narrow_phase(self, pa, Ra, pb, Rb) -> Slots:
        """The slots (k, 2 rows cols) of the k members at the world poses of the field
        (pa, Ra) and of the shapes (pb, Rb)."""
        kind_b = SHAPE_BY_NAME[self.kind.removeprefix("hfield_")]

        def one(pa, Ra, pb, Rb, sb):
            return field_slots(kind_b, self.window, self.heights, self.size_a, pa, Ra, pb, Rb, sb)

        return jax.vmap(one)(pa, Ra, pb, Rb, self.size_b)


def window_of(bound: float, size, grid) -> tuple[int, int]:
    """The (rows, cols) of cells that a shape of bounding radius ``bound`` can span over a
    field of ``size`` (half extents x, y) and ``grid`` (nrow, ncol): ceil(2 bound / dy) + 1
    rows, likewise columns, at most the field's."""
    (nrow, ncol), (sx, sy) = grid, size[:2]
    cells = []
    for n, s in ((nrow, sy), (ncol, sx)):
        step = 2.0 * s / (n - 1)
        cells.append(min(n - 1, math.ceil(2.0 * bound / step) + 1))
    return cells[0], cells[1]


def _field_cells(n, s, lo, hi):
    """MuJoCo's first and last grid line (clipped) under [lo, hi] along an axis of n grid
    lines over [-s, s]."""
    first = jnp.floor((lo + s) / (2.0 * s) * (n - 1)).astype(jnp.int32)
    last = jnp.ceil((hi + s) / (2.0 * s) * (n - 1)).astype(jnp.int32)
    return jnp.clip(first, 0, n - 1), jnp.clip(last, 0, n - 1)


def field_slots(kind_b, window, heights, size_a, pa, Ra, pb, Rb, sb, *, margin=None,
                which=None) -> Slots:  # fmt: skip
    """One member's slots: the prisms of its window against the shape of ``kind_b``
    (module docstring). World poses: field (pa, Ra), shape (pb, Rb), its size ``sb``.
    Given the pair's contact ``margin``, a prism whose top lies below the shape's lowest
    point less the margin is not searched (MuJoCo's prism height test): its gap is that
    vertical clearance, above the margin. ``kind_b`` may be a tuple of kinds and ``which``
    (traced) the shape's index among them: one program for a field's partners of several
    kinds (each prism search then takes the largest :data:`DEEP_PRISMS` of them)."""
    kinds = tuple(kind_b) if isinstance(kind_b, tuple) else (kind_b,)
    local = convex_shape_of(kinds, which, row_vec_mat(pb - pa, Ra), Ra.T @ Rb, sb)
    rows4, live, idle = window_prisms(local, window, heights, size_a, margin=margin)
    zero, eye = jnp.zeros(3, pb.dtype), jnp.eye(3, dtype=pb.dtype)

    def prism(rows4):
        return convex.hull(zero, eye, rows4)

    deep, iterations = search_budget(kinds)
    gap, point, normal = convex.collide_rows(prism, rows4, local, deep=deep,
                                             epa_iterations=iterations, live=live)  # fmt: skip
    gap = jnp.where(live, gap, jnp.maximum(gap, idle))
    return Slots(gap, pa + mv(Ra, point), mv(Ra, normal))


def search_budget(kinds) -> tuple[int, int | None]:
    """(the prisms a window searches for penetration, EPA's iterations) for a shape of one
    of ``kinds``: the largest :data:`DEEP_PRISMS` of them."""
    budgets = [DEEP_PRISMS[shape.name] for shape in kinds]
    deep = max(b[0] for b in budgets)
    iterations = None if any(b[1] is None for b in budgets) else max(b[1] for b in budgets)
    return deep, iterations


def prism_contact(rows4, shape: convex.Convex, *, epa_iterations=None):
    """(gap, point, normal) of one prism (:func:`window_prisms`' rows) against a shape in
    the field's frame (:func:`jaxmbd.contact.convex.collide`)."""
    zero, eye = jnp.zeros(3, rows4.dtype), jnp.eye(3, dtype=rows4.dtype)
    return convex.collide(convex.hull(zero, eye, rows4), shape, epa_iterations=epa_iterations)


def prism_within(rows4, shape: convex.Convex, margin) -> jax.Array:
    """Whether :func:`prism_contact` gives a gap below ``margin`` (:func:`jaxmbd.contact.
    convex.within`: GJK alone)."""
    zero, eye = jnp.zeros(3, rows4.dtype), jnp.eye(3, dtype=rows4.dtype)
    return convex.within(convex.hull(zero, eye, rows4), shape, margin)


def window_prisms(local: convex.Convex, window, heights, size_a, *, margin=None):
    """The prisms of a shape's window, in the field's frame: (their hull rows (P, 7, 4) for
    :func:`jaxmbd.contact.convex.hull`, which are live (P,), a positive gap for the others
    (P,)). ``local``: the shape in the field's frame; the window is placed under its
    bounding box (MuJoCo's, from its support); a prism is live where its cell lies in
    MuJoCo's range and, given the pair's ``margin``, its top reaches the shape's lowest point
    less the margin (MuJoCo's prism height test)."""
    rows, cols = window
    nrow, ncol = heights.shape
    sx, sy, base = size_a[0], size_a[1], size_a[2]
    dtype = local.centre.dtype
    sg = jax.lax.stop_gradient
    axes = jnp.eye(3, dtype=dtype)
    hi = sg(jnp.stack([local.support(axes[k])[k] for k in range(2)]) + local.margin)
    lo = sg(jnp.stack([local.support(-axes[k])[k] for k in range(2)]) - local.margin)
    sxg, syg = sg(sx), sg(sy)
    cmin, cmax = _field_cells(ncol, sxg, lo[0], hi[0])
    rmin, rmax = _field_cells(nrow, syg, lo[1], hi[1])
    over = (lo[0] <= sxg) & (hi[0] >= -sxg) & (lo[1] <= syg) & (hi[1] >= -syg)
    r0 = jnp.clip(rmin, 0, nrow - 1 - rows)
    c0 = jnp.clip(cmin, 0, ncol - 1 - cols)
    h = jax.lax.dynamic_slice(heights, (r0, c0), (rows + 1, cols + 1))
    r = r0 + jnp.arange(rows + 1)
    c = c0 + jnp.arange(cols + 1)
    dx, dy = 2.0 * sx / (ncol - 1), 2.0 * sy / (nrow - 1)
    x = dx * c - sx  # MuJoCo's dx * c - size0
    y = dy * r - sy
    # the grid points of the window (rows + 1, cols + 1, 3), then each cell's two triangles
    top = jnp.stack(jnp.broadcast_arrays(x[None, :], y[:, None], h), axis=-1)
    a, b = top[1:, :-1], top[:-1, :-1]  # (r+1, c), (r, c)
    e, f = top[1:, 1:], top[:-1, 1:]  # (r+1, c+1), (r, c+1)
    tris = jnp.stack([jnp.stack([a, b, e], -2), jnp.stack([b, e, f], -2)], axis=2)
    tris = tris.reshape(-1, 3, 3)  # cell by cell, two triangles each
    bottom = tris.at[..., 2].set(-base)
    V = jnp.concatenate([tris, bottom], axis=1)  # (P, 6, 3)
    centre = jnp.mean(V, axis=1, keepdims=True)  # MuJoCo's prism centre
    rows4 = jnp.concatenate([jnp.concatenate([centre, V], 1),
                             jnp.concatenate([jnp.zeros((V.shape[0], 1, 1)),
                                              jnp.ones((V.shape[0], 6, 1))], 1)], -1)  # fmt: skip
    cell_r = jnp.repeat(r[:-1], 2 * cols)
    cell_c = jnp.tile(jnp.repeat(c[:-1], 2), rows)
    live = over & (cell_r >= rmin) & (cell_r < rmax) & (cell_c >= cmin) & (cell_c < cmax)
    clearance = jnp.zeros(tris.shape[0], dtype)
    if margin is not None:
        lowest = sg(local.support(-axes[2])[2] - local.margin)
        clearance = lowest - jnp.max(sg(tris[..., 2]), axis=1)
        live = live & (clearance <= sg(margin))
    return rows4, live, jnp.maximum(clearance, 0.0) + dx + dy
