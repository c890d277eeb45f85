"""Timing helpers shared by the benchmarks: compile time apart from run time, medians."""

from __future__ import annotations

import platform
import statistics
import time

import jax

# before anything starts JAX's backend (machine() does): importing jaxmbd sets XLA's
# small-loop threshold and one BLAS thread, which it cannot do once the backend runs
import jaxmbd  # noqa: F401, E402


def machine() -> str:
    import os

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"jax {jax.__version__} on {jax.default_backend()} ({jax.devices()[0].device_kind})"
    )


def time_call(fn, *, repeats: int = 7):
    """(first call seconds = compile + run, median and spread of the next ``repeats`` calls)."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - start)
    return first, statistics.median(runs), (min(runs), max(runs))
