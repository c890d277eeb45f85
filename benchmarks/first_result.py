"""Time to a first result in a new process, cold (empty caches) and warm (later processes
on the caches the first one filled): import (JAX and equinox, then jaxmbd on top), JAX
tracing, lowering, XLA compilation (or its cache lookups) from ``jax.monitoring``'s
duration events, the loading of jaxmbd's stored executables, and the rest.

    python -m benchmarks.first_result [--cases kinematics pendulum cartpole] [--repeats 3]
        [--trees OLD NEW] [--no-bytecode]

Cases: ``kinematics``: the CLI's ``jaxmbd kinematics slider_crank`` (3 s at h = 1e-3);
``pendulum``: ``mbd.simulate(mbd.models.double_pendulum(), t_end=1.0, h=1e-3)``;
``cartpole``: dm_control's ``suite/cartpole.xml`` through ``mbd.mjcf.load_robot``, 1 s at
h = 1e-3; ``crank``: the slider crank in rA with gen_alpha, 2 s at h = 1e-3 (two blocks of
steps); ``chain``: ``pendulum_chain(150)`` with the defaults, 1 s at h = 1e-3;
``hopper``: dm_control's hopper as authored (MuJoCo's constraint model, its step), 1 s.
Each case and tree gets its own fresh cache folder (``XDG_CACHE_HOME``: jaxmbd's
default cache location), shared by its cold process and its ``--repeats`` warm ones; the
warm rows are medians. ``--trees``: source trees whose jaxmbd the children import
(``PYTHONPATH``), their processes alternated (old and new timed under the same load), with
the ratio of the warm totals. The children read and write Python's bytecode (``.pyc``
files, as an installed package has them; ``PYTHONDONTWRITEBYTECODE`` is dropped: the first
process writes the tree's ``__pycache__``); ``--no-bytecode`` sets it, and every import then
compiles jaxmbd's ~190 modules from source again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax
from collections import defaultdict
phases = defaultdict(float)
def listen(event, duration, **_):
    phases[event.rsplit("/", 1)[-1]] += duration
jax.monitoring.register_event_duration_secs_listener(listen)
import equinox
t_jax = time.perf_counter() - t0
import jaxmbd as mbd
t_import = time.perf_counter() - t0
try:  # the time spent loading stored executables (where the tree has them)
    from jaxmbd import _program_cache
    _load = _program_cache._load_executable
    def _timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return _load(*args, **kwargs)
        finally:
            phases["executable load"] += time.perf_counter() - start
    _program_cache._load_executable = _timed
except (ImportError, AttributeError):
    pass
case = sys.argv[1]
t1 = time.perf_counter()
if case == "kinematics":
    from jaxmbd.cli import app
    try:
        app(["kinematics", "slider_crank"], standalone_mode=False)
    except SystemExit:
        pass
elif case == "pendulum":
    sol = mbd.simulate(mbd.models.double_pendulum(), t_end=1.0, h=1e-3)
    jax.block_until_ready(sol.r)
elif case == "crank":
    sol = mbd.simulate(mbd.models.slider_crank(), formulation="rA", integrator="gen_alpha",
                       t_end=2.0, h=1e-3)
    jax.block_until_ready(sol.r)
elif case == "chain":
    sol = mbd.simulate(mbd.models.pendulum_chain(150), t_end=1.0, h=1e-3)
    jax.block_until_ready(sol.r)
elif case == "hopper":
    import importlib
    from pathlib import Path
    suite = Path(importlib.import_module("dm_control").__file__).parent / "suite"
    sol = mbd.simulate(mbd.load_model(suite / "hopper.xml"), t_end=1.0)
    jax.block_until_ready(sol.qpos)
else:
    import importlib
    from pathlib import Path
    suite = Path(importlib.import_module("dm_control").__file__).parent / "suite"
    path = suite / "cartpole.xml"
    sol = mbd.simulate(mbd.mjcf.load_robot(path), t_end=1.0, h=1e-3)
    jax.block_until_ready(sol.r)
t_run = time.perf_counter() - t1
print("RESULT" + json.dumps({"jax": t_jax, "jaxmbd": t_import - t_jax, "import": t_import,
      "run": t_run, "total": time.perf_counter() - t0, **phases}))
"""

KEYS = {
    "jax": "import jax+equinox",
    "jaxmbd": "import jaxmbd on top",
    "jaxpr_trace_duration": "trace",
    "jaxpr_to_mlir_module_duration": "lower",
    "backend_compile_duration": "XLA compile",
    "cache_retrieval_time_sec": "XLA cache read",
    "executable load": "executable load",
    "run": "first result (after import)",
    "total": "process total (to result)",
}


def child(case: str, cache: str, tree: str | None, bytecode: bool) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if bytecode:  # the installed packages' .pyc files are read, jaxmbd's written once
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    # run in an empty folder: `python -c` puts the working directory first on sys.path, where
    # the repository would shadow the tree measured and the cache's own jaxmbd/ folder
    # (XDG_CACHE_HOME/jaxmbd) the installed package
    workdir = os.path.join(cache, "workdir")
    os.makedirs(workdir, exist_ok=True)
    out = subprocess.run([sys.executable, "-c", CHILD, case], capture_output=True, text=True,
                         env=env, check=True, cwd=workdir).stdout  # fmt: skip
    line = next(x for x in out.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def _row(case: str, which: str, runs: list[dict]) -> str:
    cells = " | ".join(f"{statistics.median(r.get(k, 0.0) for r in runs):.2f}" for k in KEYS)
    return f"| {case} | {which} | {cells} |"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", default=["kinematics", "pendulum", "cartpole"])
    parser.add_argument("--repeats", type=int, default=1, help="warm processes per case")
    parser.add_argument("--trees", nargs="+", default=[None], help="source trees to compare")
    parser.add_argument("--no-bytecode", action="store_true", help="no .pyc files")
    args = parser.parse_args()
    trees = args.trees
    named = len(trees) > 1
    print(f"load average {os.getloadavg()[0]:.1f} (bytecode: {not args.no_bytecode})")
    print("| case | process | " + " | ".join(KEYS.values()) + " |")
    print("|---|---|" + "---|" * len(KEYS))
    ratios = []
    for case in args.cases:
        with tempfile.TemporaryDirectory() as root:
            caches = [os.path.join(root, str(k)) for k in range(len(trees))]
            for folder in caches:
                os.makedirs(folder)
            pairs = list(zip(caches, trees, strict=True))
            cold = [child(case, c, t, not args.no_bytecode) for c, t in pairs]
            warm = [[] for _ in trees]
            for _ in range(args.repeats):
                for k, (c, t) in enumerate(pairs):
                    warm[k].append(child(case, c, t, not args.no_bytecode))
        for k, tree in enumerate(trees):
            label = f" ({tree})" if named else ""
            print(_row(case, "cold" + label, [cold[k]]), flush=True)
            print(_row(case, "warm" + label, warm[k]), flush=True)
        if named:
            totals = [statistics.median(r["total"] for r in w) for w in warm]
            ratios.append(f"{case}: warm total {totals[-1]:.2f} / {totals[0]:.2f} = "
                          f"{totals[-1] / totals[0]:.2f}")  # fmt: skip
    for line in ratios:
        print(line)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
