"""Time to a first result in a new process, cold (empty caches) and warm (a second process
on the caches the first one filled): import, JAX tracing, lowering, XLA compilation (or
its cache lookups) and the rest, from ``jax.monitoring``'s duration events.

    python -m benchmarks.first_result [--cases kinematics pendulum cartpole] [--repeats 1]

Cases: ``kinematics``: the CLI's ``jaxmbd kinematics slider_crank`` (3 s at h = 1e-3);
``pendulum``: ``mbd.simulate(mbd.models.double_pendulum(), t_end=1.0, h=1e-3)``;
``cartpole``: dm_control's ``suite/cartpole.xml`` through ``mbd.mjcf.load_robot``, 1 s at
h = 1e-3 (the defaults: rA + gen_alpha). Each process gets its own fresh cache folder
(``XDG_CACHE_HOME``: jaxmbd's default cache location), shared by the cold and the warm run.
"""

from __future__ import annotations

import argparse
import json
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
import jaxmbd as mbd
t_import = time.perf_counter() - t0
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
else:
    import importlib
    from pathlib import Path
    path = Path(importlib.import_module("dm_control").__file__).parent / "suite" / "cartpole.xml"
    sol = mbd.simulate(mbd.mjcf.load_robot(path), t_end=1.0, h=1e-3)
    jax.block_until_ready(sol.r)
t_run = time.perf_counter() - t1
print("RESULT" + json.dumps({"import": t_import, "run": t_run,
      "total": time.perf_counter() - t0, **phases}))
"""

KEYS = {
    "import": "import",
    "jaxpr_trace_duration": "trace",
    "jaxpr_to_mlir_module_duration": "lower",
    "backend_compile_duration": "XLA compile",
    "cache_retrieval_time_sec": "cache read",
    "run": "first result (after import)",
    "total": "process total (to result)",
}


def child(case: str, cache: str) -> dict:
    env = {"XDG_CACHE_HOME": cache}
    import os

    env = {**os.environ, **env}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case], capture_output=True, text=True, env=env, check=True
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", default=["kinematics", "pendulum", "cartpole"])
    args = parser.parse_args()
    print("| case | process | " + " | ".join(KEYS.values()) + " |")
    print("|---|---|" + "---|" * len(KEYS))
    for case in args.cases:
        with tempfile.TemporaryDirectory() as cache:
            for which in ("cold", "warm"):
                r = child(case, cache)
                cells = " | ".join(f"{r.get(k, 0.0):.2f}" for k in KEYS)
                print(f"| {case} | {which} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
