"""Placeholder until the builder's spanning tree lands."""

from __future__ import annotations

from typing import NamedTuple


class ModelTree(NamedTuple):
    tree: object
    loop_rows: tuple[int, ...]


def tree_of_model(model):
    raise NotImplementedError("models built in code: kinematic tree not yet derived")
