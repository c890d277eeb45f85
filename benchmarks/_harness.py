"""What every benchmark shares: timing, the machine, provenance and the result files.

Run a benchmark as a module from the repository root, ``python -m benchmarks.NAME``, so
that ``benchmarks`` is a package and ``import jaxmbd`` finds the working tree first.

* :func:`time_call`: the first call (trace + compile + run) apart from the median of the
  later calls, each ended by ``jax.block_until_ready``; compile = first - median.
* :func:`machine` / :func:`machine_info`: CPU model, cores, load average, versions and the
  environment flags that change timings (``XLA_FLAGS``, BLAS threads, JAX options).
* :func:`provenance`: the tree's commit, the date and the exact command line.
* :func:`write_results`: one call writes JSON, a markdown table and CSV, each naming the
  command that regenerates it.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

import jax

# before anything starts JAX's backend (machine() does): importing jaxmbd sets XLA's
# small-loop threshold and one BLAS thread, which it cannot do once the backend runs
import jaxmbd  # noqa: F401, E402
from benchmarks._tests import from_tests  # noqa: E402, F401  (re-exported)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
TESTS = ROOT / "tests"

#: environment variables that change what a benchmark measures
FLAG_PREFIXES = ("XLA_", "JAX_", "JAXMBD_", "OPENBLAS_", "OMP_", "MKL_", "CUDA_VISIBLE")


# ---- timing ------------------------------------------------------------------------------
class Timing(NamedTuple):
    """First call (compile + run) and the median and (min, max) of the later calls, in s."""

    first: float
    median: float
    spread: tuple[float, float]

    @property
    def compile(self) -> float:
        return max(self.first - self.median, 0.0)


def seconds(fn: Callable[[], Any]) -> float:
    """Wall seconds of one call, its result blocked on."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def repeat(fn: Callable[[], Any], repeats: int = 7, *, long_run: float | None = None):
    """Seconds of up to ``repeats`` calls of ``fn``. With ``long_run`` (s), a long run stops
    early: after two calls both longer than it, or one ten times longer."""
    runs: list[float] = []
    for _ in range(repeats):
        runs.append(seconds(fn))
        if long_run is not None and (
            len(runs) == 2 and min(runs) > long_run or runs[0] > 10 * long_run
        ):
            break
    return runs


def time_call(fn: Callable[[], Any], *, repeats: int = 7, long_run: float | None = None):
    """Time ``fn()``: the first call, then the median and spread of ``repeats`` more."""
    first = seconds(fn)
    runs = repeat(fn, repeats, long_run=long_run)
    return Timing(first, statistics.median(runs), (min(runs), max(runs)))


def timing_fields(first: float, runs: Sequence[float]) -> dict:
    """The record fields of a timing: repeats, compile (first less the median) and the
    median, min and max run seconds."""
    median = statistics.median(runs)
    return {
        "repeats": len(runs),
        "compile_s": max(first - median, 0.0),
        "run_median_s": median,
        "run_min_s": min(runs),
        "run_max_s": max(runs),
    }


#: a call is warmed this long before it is timed (see :func:`interleaved`)
WARM_UP_S = 0.1
#: calls longer than this are timed without warming: the wake-up is under 5 % of them
WARM_UP_UNTIL_S = 1.0


def warmed(fn: Callable[[], Any], *, warm_up: float = WARM_UP_S) -> float:
    """Seconds of one call of ``fn`` after calling it untimed for ``warm_up`` seconds."""
    start = time.perf_counter()
    while time.perf_counter() - start < warm_up:
        jax.block_until_ready(fn())
    return seconds(fn)


def interleaved(
    calls: Mapping[str, Callable[[], Any]], *, repeats: int = 7, warm_up: float = WARM_UP_S
) -> dict[str, Timing]:
    """Median seconds of each call, timed in rounds (one call of each per round) so that a
    changing load falls on all alike; every call's first (compiling) call comes first.

    Each timed call follows ``warm_up`` seconds of untimed calls of itself (unless its
    last timed call took over :data:`WARM_UP_UNTIL_S`): on the shared virtual machine the
    project is measured on, a call right after the process idled, or after another
    engine's call, runs up to 30 ms longer for a few calls, whatever the work (``python -m
    benchmarks.probes.idle_penalty``: a 1.6 ms pure-Python sum takes 37 ms after 0.15 s
    idle), which halved a 35 ms jaxmbd run timed between MJX's calls. Warmed, every engine
    is timed at its steady rate."""
    first = {name: seconds(fn) for name, fn in calls.items()}
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            long = bool(runs[name]) and runs[name][-1] > WARM_UP_UNTIL_S
            runs[name].append(seconds(fn) if long else warmed(fn, warm_up=warm_up))
    return {
        name: Timing(first[name], statistics.median(r), (min(r), max(r)))
        for name, r in runs.items()
    }


# ---- the machine ---------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def machine_info() -> dict:
    """The machine and software a result was measured on."""
    device = jax.devices()[0]
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average": load,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "numpy": _version("numpy"),
        "backend": jax.default_backend(),
        "device": device.device_kind,
        "devices": jax.device_count(),
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(FLAG_PREFIXES)},
    }


def machine() -> str:
    """One line: CPU, cores, load, system, versions, backend and flags."""
    m = machine_info()
    load = "/".join(f"{x:g}" for x in m["load_average"]) if m["load_average"] else "?"
    flags = ", ".join(f"{k}={v}" for k, v in m["environment"].items())
    return (
        f"{m['cpu']}, {m['cores']} cores, load {load}, {m['system']}, Python {m['python']}, "
        f"jax {m['jax']} (jaxlib {m['jaxlib']}, numpy {m['numpy']}) on {m['backend']} "
        f"({m['device']} x{m['devices']})" + (f"; {flags}" if flags else "")
    )


# ---- provenance ----------------------------------------------------------------------------
def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def command() -> str:
    """The command line that started this process, as typed (``python -m benchmarks...``)."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv and Path(argv[0]).name.startswith("python"):
        argv[0] = "python"
    return shlex.join(argv)


def provenance() -> dict:
    """The tree's commit (``+dirty`` when it has uncommitted changes), the UTC date and the
    command that produced the result."""
    commit = _git("rev-parse", "--short=12", "HEAD")
    if commit and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    return {
        "commit": commit,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command(),
    }


def footer(prov: Mapping | None = None, machine_line: str | None = None) -> str:
    """The markdown lines naming the command, the commit, the date and the machine."""
    prov = prov or provenance()
    lines = [
        f"Regenerate: `{prov['command']}` (from the repository root).",
        f"Commit {prov['commit']}, {prov['date']}.",
    ]
    if machine_line:
        lines.append(f"Machine: {machine_line}.")
    return "\n\n".join(lines) + "\n"


# ---- result files --------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def markdown_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None) -> str:
    """A markdown table of ``rows`` (dicts), floats to 4 significant digits."""
    if not rows:
        return ""
    columns = list(columns or _columns(rows))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _columns(rows: Iterable[Mapping]) -> list[str]:
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    return list(columns)


def write_csv(path: Path | str, rows: Sequence[Mapping], columns: Sequence[str] | None = None):
    """``rows`` (dicts) as CSV; missing values are empty, keys outside ``columns`` dropped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(
            fh, fieldnames=list(columns or _columns(rows)), restval="", extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_results(
    stem: Path | str,
    rows: Sequence[Mapping] | None = None,
    *,
    data: Mapping | None = None,
    title: str | None = None,
    report: str | None = None,
    columns: Sequence[str] | None = None,
    formats: Iterable[str] = ("json", "md", "csv"),
) -> list[Path]:
    """Write a benchmark's results as ``stem.json``, ``stem.md`` and ``stem.csv``.

    ``stem`` is a path without suffix (relative paths are under ``benchmarks/results``);
    ``rows`` the table (dicts), ``data`` more JSON fields, ``report`` markdown written
    instead of the default title + table. Every file carries the provenance: the JSON in
    its ``provenance`` and ``machine`` fields, the markdown in a footer, the CSV beside
    it in the markdown or JSON. Returns the paths written.
    """
    stem = Path(stem)
    if not stem.is_absolute():
        stem = RESULTS / stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    formats = set(formats)
    prov, info = provenance(), machine_info()
    written = []
    if "json" in formats:
        payload = {"provenance": prov, "machine": info, **(data or {})}
        if rows is not None:
            payload["rows"] = list(rows)
        path = stem.with_suffix(".json")
        path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")
        written.append(path)
    if "csv" in formats and rows:
        written.append(write_csv(stem.with_suffix(".csv"), rows, columns))
    if "md" in formats:
        text = report if report is not None else _default_report(title or stem.name, rows, columns)
        path = stem.with_suffix(".md")
        path.write_text(text.rstrip() + "\n\n" + footer(prov, machine()))
        written.append(path)
    return written


def _default_report(title, rows, columns):
    return f"# {title}\n\n" + (markdown_table(rows, columns) if rows else "")


def _jsonable(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:
        pass
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


_START = time.perf_counter()


def log(line: str) -> None:
    """A progress line on stderr, prefixed by the seconds since the harness was imported."""
    print(f"[{time.perf_counter() - _START:7.1f} s] {line}", file=sys.stderr, flush=True)


def dispatch(package: str, parts: Mapping[str, tuple[str, str]], argv=None) -> None:
    """The entry point of a study with several parts: ``python -m PACKAGE PART [options]``
    runs ``PACKAGE.MODULE.main`` with the options; ``parts`` maps PART to (MODULE, help)."""
    import importlib

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in parts:
        width = max(map(len, parts))
        print(f"usage: python -m {package} {{{','.join(parts)}}} [options]\n")
        for name, (_, text) in parts.items():
            print(f"  {name:<{width}}  {text}")
        raise SystemExit(0 if argv and argv[0] in ("-h", "--help") else 2)
    module = importlib.import_module(f"{package}.{parts[argv[0]][0]}")
    sys.argv = [f"python -m {package} {argv[0]}", *argv[1:]]
    result = module.main(argv[1:])
    raise SystemExit(result if isinstance(result, int) else 0)


def child(module: str, *args: str) -> tuple[list[str], dict]:
    """Command and environment to run ``python -m module args`` in a child process that
    finds this ``benchmarks`` package (and the same jaxmbd) wherever it runs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    return [sys.executable, "-m", module, *map(str, args)], env
