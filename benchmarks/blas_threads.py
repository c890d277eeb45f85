"""One OpenBLAS thread against OpenBLAS's default (one per core) for the LAPACK calls inside
jaxmbd's compiled programs (jaxmbd/compiled/blas_threads.py makes one thread the default).

    python -m benchmarks.blas_threads [--repeats 3] [--threads 1 2]

Each case runs in a fresh process with ``OPENBLAS_NUM_THREADS`` set (a user's setting,
which jaxmbd keeps), the thread counts alternating, ``--repeats`` processes each; in every
process the program is compiled, run once, then timed three times (median). Cases:

* ``svd138``, ``lu138``: ``jnp.linalg.svd`` / ``jnp.linalg.solve`` of a random 138 x 138
  matrix (the size of the 3-box stack's contact Newton system);
* ``stack``: ``simulate(contact="hard")`` of three boxes stacked on the ground, 200 steps
  (each step's semismooth Newton solve is an SVD least squares);
* ``chain6``, ``chain20``: a spatial chain of 6 / 20 links on revolute joints,
  ``integrator="gen_alpha"``, ``linear_solver="dense"`` (LAPACK getrf), 200 steps.

Writes ``benchmarks/results/bench_blas_threads.md`` (wall and CPU time per call or step,
medians over processes, and the load average before and after: this machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# not benchmarks._harness: it imports jaxmbd, which sets the BLAS threads this measures
RESULTS = Path(__file__).resolve().parent / "results"

CHILD = r"""
import json, sys, time
import numpy as np, jax, jax.numpy as jnp

import jaxmbd as mbd

case = sys.argv[1]

def chain(n):
    b = mbd.ModelBuilder("chain", gravity=(0, 0, -9.81))
    prev = "ground"
    for k in range(n):
        b.add_body(f"l{k}", mass=1.0, inertia=[0.01, 0.1, 0.1], r=(0.5 + k, 0, 0))
        axis = (0, 1, 0) if k % 2 == 0 else (0, 0, 1)
        b.revolute(f"j{k}", body_i=prev, body_j=f"l{k}", point=(float(k), 0, 0), axis=axis)
        prev = f"l{k}"
    return b.build()

def stack():
    a = 0.1
    b = mbd.ModelBuilder("stack", gravity=(0.0, 0.0, -9.81))
    for k in range(3):
        b.add_body(f"box{k}", mass=1.0, inertia=[2 * (2 * a) ** 2 / 6] * 3,
                   r=(0.0, 0.0, a + 2 * a * k), shapes=[mbd.geometry.box([2 * a] * 3)])
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("box0", "ground", friction=0.5, restitution=0.0)
    for k in range(2):
        b.add_contact(f"box{k}", f"box{k + 1}", friction=0.5, restitution=0.0)
    return b.build()

rng = np.random.default_rng(0)
matrix = jnp.asarray(rng.standard_normal((138, 138)))
if case == "svd138":
    fn, per = jax.jit(lambda a: jnp.linalg.svd(a)[1]), 1
    run = lambda: fn(matrix)
elif case == "lu138":
    fn, per = jax.jit(lambda a: jnp.linalg.solve(a, a[0])), 1
    run = lambda: fn(matrix)
elif case == "stack":
    model, per = stack(), 200
    run = lambda: mbd.simulate(model, contact="hard", t_end=0.2, h=1e-3, progress=None).r
else:
    model, per = chain(int(case[5:])), 200
    run = lambda: mbd.simulate(model, integrator="gen_alpha", t_end=0.2, h=1e-3,
                               linear_solver="dense", progress=None).r
jax.block_until_ready(run())
walls, cpus = [], []
for _ in range(3):
    w, c = time.perf_counter(), time.process_time()
    jax.block_until_ready(run())
    walls.append(time.perf_counter() - w)
    cpus.append(time.process_time() - c)
print(json.dumps({"wall_us": 1e6 * float(np.median(walls)) / per,
                  "cpu_us": 1e6 * float(np.median(cpus)) / per}))
"""

CASES = ("svd138", "lu138", "stack", "chain6", "chain20")


def run_case(case: str, threads: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 2])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    samples: dict[tuple[str, int], list[dict]] = {}
    for case in args.cases:
        for _ in range(args.repeats):
            for threads in args.threads:
                samples.setdefault((case, threads), []).append(run_case(case, threads))
                print(case, threads, samples[(case, threads)][-1], flush=True)
    load_after = os.getloadavg()[0]
    lines = [
        "# One OpenBLAS thread against one per core (jaxmbd/compiled/blas_threads.py)",
        "",
        f"`python -m benchmarks.blas_threads --repeats {args.repeats}`, {start}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load_before:.1f} before "
        f"and {load_after:.1f} after (a shared machine). Medians over {args.repeats} processes "
        "(each: compile, one run, median of three timed runs); per call (svd, lu) or per step.",
        "",
        "| case | threads | wall (us) | CPU (us) | wall / wall with 1 thread |",
        "|---|---|---|---|---|",
    ]
    for case in args.cases:
        base = float(np.median([s["wall_us"] for s in samples[(case, args.threads[0])]]))
        for threads in args.threads:
            wall = float(np.median([s["wall_us"] for s in samples[(case, threads)]]))
            cpu = float(np.median([s["cpu_us"] for s in samples[(case, threads)]]))
            lines.append(f"| {case} | {threads} | {wall:.0f} | {cpu:.0f} | {wall / base:.2f} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_blas_threads.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
