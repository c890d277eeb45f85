"""Recursions over a kinematic tree as loops over its depth levels: one ``lax.scan`` step per
level, every body of a level at once, so that the traced program is one loop body whatever
the tree's depth or size.

The bodies at depth g are stored in the slots of a level, padded to the widest level's
width W (host tables built once per tree structure, :func:`level_tables`): a sweep from the
root (:func:`down`) carries the level above's values and each slot reads its parent's by a
constant slot index; a sweep from the leaves (:func:`up`) carries the level below's and
each slot sums its children's through a padded table. These are the orders of MJX's
``scan.body_tree`` and of Featherstone's recursive algorithms (*Rigid Body Dynamics
Algorithms*, 2008, chapters 5-7), with depth in place of body index.

The unrolled forms (:func:`jaxmbd.tree.picked_sum` with 0/1 ancestor matrices, a Python
step per level) trace to a program that grows with the tree, at least linearly in the
depth and quadratically along a chain; they remain the choice for shallow trees, where they
run faster (:func:`scanned`, the threshold :data:`SCAN_MIN_DEPTH`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .topology import WORLD, JointType, KinematicTree

#: Trees with more depth levels than this, or more bodies than :data:`SCAN_MIN_BODIES`,
#: run their recursions as level scans (``benchmarks/chain_scaling.py``, 2-core CPU, RK4):
#: a 12-link chain of balls stepped in 0.16 ms unrolled against 0.37 ms scanned, but
#: compiled in 68 s against 21 s; binary trees of 15, 31 and 63 balls stepped as fast or
#: faster scanned (0.53, 0.54, 2.2 ms against 0.54, 1.07, 2.4 ms), compiled in 20-29 s
#: against 31-87 s.
SCAN_MIN_DEPTH = 12
SCAN_MIN_BODIES = 24


class LevelTables(NamedTuple):
    """Host index tables of a tree's depth levels (L levels of W slots; ``nb`` is the
    padding body, a row appended to per-body arrays)."""

    bodies: np.ndarray  # (L, W): body in each slot, nb for a pad slot
    parent_slot: np.ndarray  # (L, W): the parent's slot in the level above, W for the world
    children: np.ndarray  # (L, W, C): the children's slots in the level below, W for none
    body_slot: np.ndarray  # (nb,): l * W + w of each body
    dofs: np.ndarray  # (nb, K): each body's dofs in order, nv for none
    dof_slot: np.ndarray  # (nv,): b_slot * K + k of each dof
    preceding: np.ndarray  # (nv, K): the dofs of its own body that move dof d's axis, nv pads


def scanned(tree: KinematicTree) -> bool:
    """Whether the tree's recursions run as level scans (deeper than
    :data:`SCAN_MIN_DEPTH`, more bodies than :data:`SCAN_MIN_BODIES`, or
    ``KinematicTree.mass_solver="articulated"``)."""
    if tree.nb == 0:
        return False
    if tree.mass_solver == "articulated":
        return True
    return _depth(tree.parent) > SCAN_MIN_DEPTH or tree.nb > SCAN_MIN_BODIES


@functools.lru_cache(maxsize=64)
def _depth(parent: tuple[int, ...]) -> int:
    depth = [0] * len(parent)
    for b, p in enumerate(parent):  # parents come first in a tree order; otherwise walk
        d, q = 1, p
        while q != WORLD:
            if q < b:
                d += depth[q]
                break
            d, q = d + 1, parent[q]
        depth[b] = d
    return max(depth, default=0)


def level_tables(tree: KinematicTree) -> LevelTables:
    """The tables of :class:`LevelTables` for ``tree`` (cached by its structure)."""
    return _tables(tree.parent, tree.joint_type, tree.joint_body)


@functools.lru_cache(maxsize=64)
def _tables(parent, joint_type, joint_body) -> LevelTables:
    nb = len(parent)
    depth = np.zeros(nb, dtype=int)
    for b in range(nb):
        d, p = 1, parent[b]
        while p != WORLD:
            d, p = d + 1, parent[p]
        depth[b] = d
    top = int(depth.max(initial=0))
    levels = [np.flatnonzero(depth == g) for g in range(1, top + 1)]
    width = max((len(level) for level in levels), default=1)
    slot = np.zeros(nb, dtype=int)  # position within the level
    for level in levels:
        slot[level] = np.arange(len(level))
    bodies = np.full((top, width), nb, dtype=int)
    parent_slot = np.full((top, width), width, dtype=int)
    kids = [[] for _ in range(nb)]
    for b in range(nb):
        if parent[b] != WORLD:
            kids[parent[b]].append(b)
    n_kids = max((len(k) for k in kids), default=0)
    children = np.full((top, width, max(n_kids, 1)), width, dtype=int)
    for g, level in enumerate(levels):
        bodies[g, : len(level)] = level
        for w, b in enumerate(level):
            if parent[b] != WORLD:
                parent_slot[g, w] = slot[parent[b]]
            children[g, w, : len(kids[b])] = slot[kids[b]]
    body_slot = depth - 1
    body_slot = body_slot * width + slot
    # dofs per body, in order
    nv_joint = [JointType(t).nv for t in joint_type]
    dof_adr = np.cumsum([0] + nv_joint)[:-1]
    nv = int(sum(nv_joint))
    per_body = [[] for _ in range(nb)]
    for j, b in enumerate(joint_body):
        per_body[b] += list(range(dof_adr[j], dof_adr[j] + nv_joint[j]))
    k_max = max((len(d) for d in per_body), default=0)
    dofs = np.full((nb, max(k_max, 1)), nv, dtype=int)
    dof_slot = np.zeros(nv, dtype=int)
    for b, ds in enumerate(per_body):
        dofs[b, : len(ds)] = ds
        dof_slot[ds] = body_slot[b] * dofs.shape[1] + np.arange(len(ds))
    # MuJoCo's mj_comVel: a dof's axis moves with the joints before it on its body (a ball's
    # three counted together; a free joint's rotations see its translations)
    preceding = np.full((nv, dofs.shape[1]), nv, dtype=int)
    dof_joint = np.repeat(np.arange(len(joint_type)), nv_joint)
    for ds in per_body:
        for d in ds:
            j = dof_joint[d]
            before = [
                e
                for e in ds
                if dof_joint[e] < j
                or (
                    dof_joint[e] == j
                    and joint_type[j] == JointType.FREE
                    and d - dof_adr[j] >= 3
                    and e - dof_adr[j] < 3
                )
            ]
            preceding[d, : len(before)] = before
    return LevelTables(bodies, parent_slot, children, body_slot, dofs, dof_slot, preceding)


def padded(values, pad=None):
    """``values`` (n, ...) with one more row: ``pad`` (zeros when None), the row that pad
    indices of the tables read."""
    row = jnp.zeros((1,) + values.shape[1:], values.dtype) if pad is None else pad[None]
    return jnp.concatenate([values, row.astype(values.dtype)])


def by_level(tables: LevelTables, values, pad=None):
    """Per-body ``values`` (nb, ...) as level slots (L, W, ...); pad slots read ``pad``."""
    return padded(values, pad)[tables.bodies]


def by_body(tables: LevelTables, levels):
    """Level slots (L, W, ...) back to per-body rows (nb, ...)."""
    flat = levels.reshape((-1,) + levels.shape[2:])
    return flat[tables.body_slot]


def down(tables: LevelTables, step, own, root):
    """A sweep from the root: for each level, ``step(parent_values, own_level)`` ->
    (values passed to the children, output), where parent_values are those of each slot's
    parent (``root``, a pytree of single rows, for the world). ``own``: a pytree of
    (L, W, ...) level slots. Returns the outputs stacked (L, W, ...)."""
    width = tables.bodies.shape[1]

    def carry0(r):
        return jnp.broadcast_to(r, (width + 1,) + r.shape).astype(r.dtype)

    def body(carry, xs):
        parent_slot, level = xs
        above = jax.tree.map(lambda c: c[parent_slot], carry)
        passed, out = step(above, level)
        carry = jax.tree.map(lambda p, r: jnp.concatenate([p, r[None]]), passed, root)
        return carry, out

    init = jax.tree.map(carry0, root)
    _, outs = jax.lax.scan(body, init, (jnp.asarray(tables.parent_slot), own))
    return outs


def up(tables: LevelTables, step, own, zero):
    """A sweep from the leaves: for each level, ``step(children_sum, own_level)`` ->
    (values passed to the parent, output), children_sum the sum of what the slot's children
    passed up (``zero``, a pytree of single rows, without children). Returns the outputs
    stacked (L, W, ...)."""
    width = tables.bodies.shape[1]

    def body(carry, xs):
        children, level = xs
        below = jax.tree.map(lambda c: jnp.sum(c[children], axis=1), carry)
        passed, out = step(below, level)
        carry = jax.tree.map(lambda p, z: jnp.concatenate([p, z[None]]), passed, zero)
        return carry, out

    init = jax.tree.map(lambda z: jnp.broadcast_to(z, (width + 1,) + z.shape), zero)
    _, outs = jax.lax.scan(body, init, (jnp.asarray(tables.children), own), reverse=True)
    return outs


def ancestor_sum(tree: KinematicTree, values):
    """sum over b's ancestors and b itself of ``values`` (nb, ...), for each body b."""
    tables = level_tables(tree)
    zero = jnp.zeros(values.shape[1:], values.dtype)

    def step(above, own):
        total = above + own
        return total, total

    return by_body(tables, down(tables, step, by_level(tables, values), zero))


def subtree_sum(tree: KinematicTree, values):
    """sum over the subtree of b (b and its descendants) of ``values`` (nb, ...)."""
    tables = level_tables(tree)
    zero = jnp.zeros(values.shape[1:], values.dtype)

    def step(below, own):
        total = below + own
        return total, total

    return by_body(tables, up(tables, step, by_level(tables, values), zero))


def per_body(tree: KinematicTree, dof_values):
    """Each body's dofs' ``dof_values`` (nv, ...) gathered as (nb, K, ...), pads zero."""
    return padded(dof_values)[level_tables(tree).dofs]


def body_totals(tree: KinematicTree, dof_values):
    """sum over each body's dofs of ``dof_values`` (nv, ...): (nb, ...)."""
    return jnp.sum(per_body(tree, dof_values), axis=1)
