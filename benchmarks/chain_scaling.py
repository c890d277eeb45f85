"""Deep and wide kinematic trees on the joint formulation: program size, compile time and time
per step against the number of bodies, the level scans with the articulated-body algorithm
(:mod:`jaxmbd.tree.sweeps`, :mod:`jaxmbd.tree.articulated`) against the unrolled recursions
with a factor of M.

    python -m benchmarks.chain_scaling [--chains 8 16 32 64 128 256 512]
        [--trees 15 31 63 127 255 511] [--paths auto unrolled scanned] [--t-end 0.2]
        [--chain150] [--out benchmarks/results/bench_chain_scaling.md]

Models: :func:`jaxmbd.models.generated.pendulum_chain` (N rods on spherical joints, a path
of depth N, nv = 3N) and :func:`~jaxmbd.models.generated.binary_tree` (depth log2 N).
Paths: ``auto`` (the defaults), ``unrolled`` (the unrolled recursions and the factor of M
that ``mass_solver="auto"`` picks below the scan threshold, forced by raising
:data:`jaxmbd.tree.sweeps.SCAN_MIN_DEPTH` and ``SCAN_MIN_BODIES``), ``scanned``
(``mass_solver="articulated"``). Each case runs in a fresh process with the persistent
compilation cache off: jaxpr equations of the run, the first ``simulate`` call (trace,
lowering and XLA compile included) and the median of 3 later calls, per step (RK4,
``integrator="rkmk"``, h = 1e-3). ``--chain150``: the 150-link chain hanging and released,
1 s at h = 1e-3 with the defaults (Exudyn's figure, 3.1 ms per step, is quoted here;
:mod:`benchmarks.engines.chain_exudyn` measures Exudyn beside jaxmbd).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
t_process = time.perf_counter()
import jax
import jaxmbd as mbd
from jax.extend.core import jaxprs_in_params
from jaxmbd.joint_space.run import _run_joint_space
from jaxmbd.joint_space.steppers import get_stepper
from jaxmbd.models.generated import binary_tree, pendulum_chain
from jaxmbd.tree import sweeps
kind, n, path, t_end = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
if path == "unrolled":
    sweeps.SCAN_MIN_DEPTH = sweeps.SCAN_MIN_BODIES = 10**9
model = (pendulum_chain if kind == "chain" else binary_tree)(n)
if path == "scanned":
    sweeps.SCAN_MIN_DEPTH = sweeps.SCAN_MIN_BODIES = 0
def equations(jaxpr):
    return sum(1 + sum(equations(s) for s in jaxprs_in_params(e.params)) for e in jaxpr.eqns)
stepper = get_stepper("rkmk")
t0 = time.perf_counter()
count = equations(jax.make_jaxpr(
    lambda m: _run_joint_space(m, stepper, 4, 1e-3, None, None, None))(model).jaxpr)
t_trace = time.perf_counter() - t0
steps = round(t_end / 1e-3)
t0 = time.perf_counter()
sol = mbd.simulate(model, t_end=t_end, h=1e-3, integrator="rkmk")
jax.block_until_ready(sol.q)
first = time.perf_counter() - t0
times = []
for _ in range(3):
    t0 = time.perf_counter()
    sol = mbd.simulate(model, t_end=t_end, h=1e-3, integrator="rkmk")
    jax.block_until_ready(sol.q)
    times.append(time.perf_counter() - t0)
print(json.dumps(dict(kind=kind, n=n, path=path, nv=3 * n, equations=count,
                      first_s=first, process_first_s=time.perf_counter() - t_process
                      - sum(times), ms_per_step=1e3 * statistics.median(times) / steps,
                      linear_solver=sol.linear_solver, steps=steps)))
"""


def case(kind, n, path, t_end):
    env = dict(os.environ, JAXMBD_NO_COMPILATION_CACHE="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, "-c", CHILD, kind, str(n), path, str(t_end)]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return dict(kind=kind, n=n, path=path, error=out.stderr.strip().splitlines()[-1:])
    return json.loads(lines[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, nargs="*", default=[8, 16, 32, 64, 128])
    parser.add_argument("--trees", type=int, nargs="*", default=[15, 31, 63, 127])
    parser.add_argument("--paths", nargs="*", default=["auto", "unrolled", "scanned"])
    parser.add_argument("--t-end", type=float, default=0.2)
    parser.add_argument("--chain150", action="store_true")
    default_out = ROOT / "benchmarks/results/bench_chain_scaling.md"
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args(argv)
    rows = []
    cases = [("chain", n) for n in args.chains] + [("tree", n) for n in args.trees]
    for kind, n in cases:
        for path in args.paths:
            row = case(kind, n, path, args.t_end)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.chain150:
        row = case("chain", 150, "auto", 1.0)
        row["exudyn_ms_per_step"] = 3.1
        print(json.dumps(row), flush=True)
        rows.append(row)
    lines = [
        "# Chains and trees on the joint formulation (`python -m benchmarks.chain_scaling`)",
        "",
        "| model | bodies | path | jaxpr eqns (4-step run) | first call s | ms / step | solver |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kind']} | {r['n']} | {r['path']} | error: {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['kind']} | {r['n']} | {r['path']} | {r['equations']} | {r['first_s']:.1f} "
            f"| {r['ms_per_step']:.3f} | {r['linear_solver']} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
