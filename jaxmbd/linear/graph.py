"""The body-joint graph of a model, and the block structure of its Newton / KKT systems.

Static and numpy-only: computed once per topology (cached on the model's static fields).

Nodes: one per body, holding its tangent block (a_b; for the stabilised step also the
auxiliary z_b = (G_n^T mu)_b; rp's normalisation multiplier) *and the rows of the joints
that attach it to its parent* in a spanning tree of the body-joint graph (breadth first
from the ground; Baraff 1996's grouping of a joint with its child body); one node per
loop-closing joint (its multiplier rows), eliminated only after both of its bodies. A
grouped body node has the invertible saddle-point block [[M_b, G_b^T], [G_b, 0]] (as long
as its joint rows do not exceed the body's freedoms, which the grouping respects).

Blocks: bodies sharing a constraint row or a force are coupled (K, force sensitivities),
bodies are coupled to the rows that touch them (G, G^T). The stabilised index-2 step
couples more (rows sharing a body through G_T G_n^T); its block-assembled form avoids that
with the auxiliary unknowns z = G_n^T mu (see :mod:`jaxmbd.integrators.structured`).
"""

from __future__ import annotations

import functools
from collections import deque
from typing import NamedTuple

import numpy as np

from .structured import BlockStructure


class Layout(NamedTuple):
    """Where the unknowns of a system are: ``structure`` (nodes, slots, schedule), the
    number ``n`` of the system's own unknowns (the first n of the structure's; the rest are
    auxiliary), and per body / row the node that holds them."""

    structure: BlockStructure
    n: int
    body_node: np.ndarray
    row_node: np.ndarray


def _topology(model):
    nb = model.nb
    bodies = np.asarray(model.constraint_bodies, dtype=int).reshape(-1, 2)
    force_bodies = []
    for force in model.forces:
        found = tuple(sorted({int(b) for b in (force.bodies or ()) if int(b) < nb}))
        force_bodies.append(found if found else tuple(range(nb)))  # unknown: all coupled
    return (nb, tuple(map(tuple, bodies)), tuple(model.constraint_joints), tuple(force_bodies))


def spanning_tree(nb: int, row_bodies, row_joint):
    """Joints (name -> rows, endpoints), each body's tree parent (ground = nb, -1 for a root
    of a free component), and the joints grouped with each body (breadth first)."""
    joints: dict[str, list[int]] = {}
    for r, name in enumerate(row_joint):
        joints.setdefault(name, []).append(r)
    ends = {j: frozenset(int(b) for r in rows for b in row_bodies[r]) for j, rows in joints.items()}
    neighbours: dict[int, list[str]] = {k: [] for k in range(nb + 1)}
    for j, e in ends.items():
        for b in e:
            neighbours[b].append(j)
    parent = np.full(nb, -2)
    depth = np.zeros(nb, dtype=int)
    queue = deque([nb])
    seen = {nb}
    roots = [nb] + list(range(nb))
    for root in roots:
        if root in seen and root != nb:
            continue
        if root != nb:
            parent[root] = -1
            seen.add(root)
            queue.append(root)
        while queue:
            u = queue.popleft()
            for j in neighbours[u]:
                for v in ends[j]:
                    if v not in seen:
                        seen.add(v)
                        parent[v] = u
                        depth[v] = 0 if u == nb or u < 0 else depth[u] + 1
                        queue.append(v)
    return joints, ends, parent, depth


@functools.lru_cache(maxsize=64)
def _layout(topology, ts: int, extra: int, stabilised: bool, augmented: bool) -> Layout:
    nb, row_bodies, row_joint, force_bodies = topology
    nc = len(row_bodies)
    n = nb * ts
    m = nc + nb * extra
    n_own = n + (2 * m if stabilised else m)
    joints, ends, parent, depth = spanning_tree(nb, row_bodies, row_joint)

    def rows_of(r):  # unknowns of constraint row r (lambda, and mu when stabilised)
        return [n + r] + ([n + m + r] if stabilised else [])

    nodes: list[list[int]] = []
    body_node = np.arange(nb)
    for b in range(nb):
        unknowns = list(range(b * ts, (b + 1) * ts))
        if augmented:
            unknowns += list(range(n_own + b * ts, n_own + (b + 1) * ts))
        for i in range(extra):
            unknowns += rows_of(nc + b * extra + i)
        nodes.append(unknowns)
    row_node = np.full(nc, -1)
    grouped_rows = np.zeros(nb, dtype=int)
    for j, rows in joints.items():
        e = ends[j]
        child = [b for b in e if b < nb and parent[b] >= -1 and e == frozenset({b, parent[b]})]
        freedoms = ts - extra
        if len(child) == 1 and grouped_rows[child[0]] + len(rows) <= freedoms:
            b = child[0]
            grouped_rows[b] += len(rows)
            for r in rows:
                nodes[b] += rows_of(r)
                row_node[r] = b
    after = {}
    for j, rows in joints.items():
        if row_node[rows[0]] >= 0:
            continue
        k = len(nodes)
        nodes.append([u for r in rows for u in rows_of(r)])
        row_node[np.asarray(rows)] = k
        after[k] = [b for b in ends[j] if b < nb]
    # couplings
    edges = set()
    touches = [[b for b in row_bodies[r] if b < nb] for r in range(nc)]
    body_pairs = set()
    for group in list(touches) + [list(f) for f in force_bodies]:
        for a in group:
            for c in group:
                body_pairs.add((a, c))
    for a, c in body_pairs:
        edges.add((body_node[a], body_node[c]))
    rows_at = [[] for _ in range(nb)]
    for r, bs in enumerate(touches):
        for b in bs:
            edges.add((body_node[b], row_node[r]))
            rows_at[b].append(r)
    if stabilised and not augmented:
        for rs in rows_at:
            for r in rs:
                for s in rs:
                    edges.add((row_node[r], row_node[s]))
        for a, c in body_pairs:
            for s in rows_at[c]:
                edges.add((body_node[a], row_node[s]))
    priority = [-depth[b] for b in range(nb)] + [0] * (len(nodes) - nb)
    structure = BlockStructure(nodes, edges, after=after, priority=priority)
    return Layout(structure, n_own, body_node, row_node)


def newton_layout(model, *, tangent_size: int, extra_rows: bool | int = False,
                  stabilised: bool = False, augmented: bool = False) -> Layout:  # fmt: skip
    """The block layout of the implicit step's Newton matrix (x = (a, lam[, mu])), or, with
    ``stabilised=False``, of the index-1 KKT matrix [[M, G^T], [G, 0]]. ``extra_rows``:
    multipliers of each body's own rows after the constraint rows, body-major (True: one,
    rp's normalisation; 6: a director body's internal constraints). ``augmented``: the
    stabilised step with auxiliary z = G_n^T mu (block-assembled rA)."""
    extra = int(extra_rows)
    if not 0 <= extra < tangent_size:
        raise ValueError(f"extra_rows must lie in [0, {tangent_size}), got {extra_rows!r}")
    return _layout(_topology(model), tangent_size, extra, stabilised, augmented)


__all__ = ["Layout", "newton_layout", "spanning_tree"]
