"""Where the test suite's time goes, per test: JAX tracing, lowering to MLIR, XLA compile,
and the rest (running, Python, subprocesses), from ``jax.monitoring``'s duration events.

    JAXMBD_TEST_CACHE_DIR=$(mktemp -d) python -m pytest -q -p no:cacheprovider \\
        -p benchmarks.suite_timing           # from the repository root
    python -m benchmarks.suite_timing            # the totals and the 30 longest tests

Each pytest worker writes ``suite_timing_<worker>.json`` into ``$SUITE_TIMING_DIR``
(default: the system's temporary folder). The listener is registered when the test run
starts, after ``tests/conftest.py`` has set the compilation cache (importing jax earlier
would fix its configuration before the conftest runs).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
_current: defaultdict[str, float] = defaultdict(float)
_rows: list[dict] = []


def _folder() -> Path:
    return Path(os.environ.get("SUITE_TIMING_DIR", tempfile.gettempdir()))


def _listen(event, duration, **_):
    _current[event] += duration


def pytest_sessionstart():
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listen)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.clear()
    start, cpu = time.perf_counter(), _cpu()
    yield
    _rows.append(
        {"test": item.nodeid, "wall": time.perf_counter() - start, "cpu": _cpu() - cpu, **_current}
    )
    _write()  # after every test: a run stopped early (a timeout) still leaves its rows


def _cpu() -> float:
    """CPU seconds of this process (all its threads) and of its finished children: on a
    loaded machine a test's CPU time stays near its time on a quiet one, its wall time not."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _write():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _folder().mkdir(parents=True, exist_ok=True)
    (_folder() / f"suite_timing_{worker}.json").write_text(json.dumps(_rows))


def pytest_sessionfinish():
    _write()


def main(argv=None):
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    rows = [r for f in _folder().glob("suite_timing_*.json") for r in json.loads(f.read_text())]
    if not rows:
        raise SystemExit(f"no suite_timing_*.json in {_folder()}: run pytest with the plugin")
    parts = {"trace": TRACE, "lower": LOWER, "XLA compile": COMPILE}
    totals = {name: sum(r.get(key, 0.0) for r in rows) for name, key in parts.items()}
    wall = sum(r["wall"] for r in rows)
    cpu = sum(r.get("cpu", 0.0) for r in rows)
    print(f"{len(rows)} tests, {wall:.0f} s summed ({cpu:.0f} CPU-s)")
    for name, total in totals.items():
        print(f"  {name:12s} {total:7.0f} s  {100 * total / wall:4.1f} %")
    rest = wall - sum(totals.values())
    print(f"  {'other':12s} {rest:7.0f} s  {100 * rest / wall:4.1f} %")
    print(f"\n{'wall':>6s} {'cpu':>6s} {'trace':>6s} {'lower':>6s} {'xla':>6s}  test")
    for r in sorted(rows, key=lambda r: -r["wall"])[:30]:
        print(
            f"{r['wall']:6.1f} {r.get('cpu', 0):6.1f} {r.get(TRACE, 0):6.1f} "
            f"{r.get(LOWER, 0):6.1f} {r.get(COMPILE, 0):6.1f}  {r['test']}"
        )


if __name__ == "__main__":
    main()
