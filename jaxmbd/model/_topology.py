"""The body graph of a model: which body pairs form its spanning tree and which close loops.

Static (model topology only). The edges are the body pairs joined by constraint rows, taken
in the order they first appear in the model; a union-find over that order puts each edge in
the spanning tree unless its bodies are already connected, so the joint a user adds last to
a loop is the one that closes it. The ground is a node like the bodies (index ``nb``); a
part of the model not connected to the ground is rooted at its first body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class BodyGraph(NamedTuple):
    """Spanning tree of the body graph (nodes 0..nb-1 bodies, nb the ground)."""

    tree_pairs: tuple[tuple[int, int], ...]  # body pairs (as first written) in the tree
    closing_pairs: tuple[tuple[int, int], ...]  # pairs whose rows close a loop
    parent: tuple[int, ...]  # parent node of each body (nb = ground; -1 = a root body)
    loops: tuple[tuple[int, ...], ...]  # per closing pair: the bodies of the loop it closes

    def is_tree_pair(self, i: int, j: int) -> bool:
        return (i, j) in self.tree_pairs or (j, i) in self.tree_pairs

    def subtree(self, body: int) -> tuple[int, ...]:
        """``body`` and every body whose path to the root passes through it."""
        out = []
        for b in range(len(self.parent)):
            node = b
            while node != -1 and node < len(self.parent):
                if node == body:
                    out.append(b)
                    break
                node = self.parent[node]
        return tuple(out)

    def child_of(self, i: int, j: int) -> int:
        """Of a tree pair (i, j): the body farther from the root."""
        if j < len(self.parent) and self.parent[j] == i:
            return j
        if i < len(self.parent) and self.parent[i] == j:
            return i
        raise ValueError(f"bodies {i} and {j} are not a pair of the spanning tree")


def body_graph(nb: int, pairs: Sequence[tuple[int, int]]) -> BodyGraph:
    """Spanning tree of the graph whose edges are ``pairs`` (body indices, ground = nb), in
    order; repeated pairs (several joints or drivers between the same bodies) are one edge."""
    edges: list[tuple[int, int]] = []
    seen: set[frozenset[int]] = set()
    for i, j in pairs:
        key = frozenset((i, j))
        if i != j and key not in seen:
            seen.add(key)
            edges.append((i, j))
    root = list(range(nb + 1))

    def find(a):
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    tree, closing = [], []
    for i, j in edges:
        a, b = find(i), find(j)
        if a == b:
            closing.append((i, j))
        else:
            root[a] = b
            tree.append((i, j))
    adjacency: dict[int, list[int]] = {k: [] for k in range(nb + 1)}
    for i, j in tree:
        adjacency[i].append(j)
        adjacency[j].append(i)
    parent = [-2] * nb
    starts = [nb] + list(range(nb))
    for start in starts:  # the ground first, then each unreached body as a root
        if start < nb and parent[start] != -2:
            continue
        if start < nb:
            parent[start] = -1
        stack = [start]
        while stack:
            node = stack.pop()
            for other in adjacency[node]:
                if other < nb and parent[other] == -2 and other != start:
                    parent[other] = node
                    stack.append(other)
    loops = tuple(_loop(parent, nb, i, j) for i, j in closing)
    return BodyGraph(tuple(tree), tuple(closing), tuple(parent), loops)


def _path_to_root(parent, nb, node) -> list[int]:
    path = [node]
    while node < nb and parent[node] >= 0:
        node = parent[node]
        path.append(node)
    return path


def _loop(parent, nb, i, j) -> tuple[int, ...]:
    """The nodes of the loop closed by the pair (i, j): the tree paths from i and j to their
    nearest common ancestor."""
    up_i, up_j = _path_to_root(parent, nb, i), _path_to_root(parent, nb, j)
    common = next((node for node in up_i if node in set(up_j)), None)
    if common is None:
        return tuple(up_i + up_j[::-1])
    return tuple(up_i[: up_i.index(common) + 1] + up_j[: up_j.index(common)][::-1])
