"""Modules of ``tests/`` for the benchmarks, imported by path (no jax import here: a test
module's conftest may have to configure jax before it loads)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"


def from_tests(name: str):
    """A module of ``tests/`` (``references``: the scipy reference solutions), imported by
    its path and cached in ``sys.modules`` under ``name``."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
