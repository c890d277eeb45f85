"""How compile time, step time and memory grow with the size of the mechanism.

    python experiments/scaling.py [--sizes 2 4 8 ... 256] [--steps 40] [--repeats 3]
                                  [--newton full reuse] [--tag after]

Two generated families (see :func:`pendulum_chain` and :func:`engine`):

* an N-link spatial pendulum chain: N rods joined end to end by spherical joints, the first
  one to the ground, released from a helix so that the motion is three-dimensional
  (6N coordinates, 3N constraint equations, 3N degrees of freedom);
* an N-cylinder engine: one crankshaft (revolute joint, driven at 2 pi rad/s) with N crank
  pins at phases 2 pi k / N, each with a connecting rod (spherical joint at the pin,
  universal joint at the piston) and a piston on a
  translational joint: 2N + 1 bodies, closed loops, one driver, zero degrees of freedom.

For each N: compile time (first call minus the median of the later ones), run time per step
(median, min, max over ``--repeats``), the size n of the Newton system, the time of one dense
LU solve of size n (the reference cost the step should not exceed by more than a constant),
and the compiled program's memory (XLA memory analysis: arguments, outputs, temporaries).
Writes ``results/scaling_<tag>.csv`` and ``results/scaling_<tag>.png``.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _timing import machine, time_call

import jaxmbd as mbd
from jaxmbd.models.generated import binary_tree, engine, pendulum_chain

RESULTS = Path(__file__).parent / "results"


FAMILIES = {"chain": pendulum_chain, "engine": engine, "tree": binary_tree}


def dense_solve_seconds(n: int, repeats: int) -> float:
    """Median time of one LU factorisation and solve of a dense n x n system."""
    key = jax.random.PRNGKey(0)
    matrix = jax.random.normal(key, (n, n)) + n * jnp.eye(n)
    rhs = jnp.ones(n)
    solve = jax.jit(jnp.linalg.solve)
    jax.block_until_ready(solve(matrix, rhs))
    runs = []
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        jax.block_until_ready(solve(matrix, rhs))
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def memory_bytes(model, steps, h, newton) -> dict:
    """XLA's memory analysis of the compiled simulation (arguments, outputs, temporaries)."""

    def run(model):
        return mbd.simulate(model, t_end=steps * h, h=h, newton=newton, throw=False).r

    analysis = jax.jit(run).lower(model).compile().memory_analysis()
    if analysis is None:
        return {}
    return {
        "argument_bytes": analysis.argument_size_in_bytes,
        "output_bytes": analysis.output_size_in_bytes,
        "temp_bytes": analysis.temp_size_in_bytes,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--sizes", nargs="*", type=int, default=[2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--steps", type=int, default=40, help="steps for n <= 400, fewer above")
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--newton", nargs="*", default=["full", "reuse"])
    parser.add_argument("--tag", default="after")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="no runs: plot the time per step of two earlier runs (tags) side by side",
    )
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    RESULTS.mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    rows = []
    for family in args.families:
        for size in args.sizes:
            model = FAMILIES[family](size)
            n = 6 * model.nb + model.nc
            lu_s = dense_solve_seconds(n, args.repeats)
            # large systems: fewer steps and repeats (a dense LU of n = 6000 takes seconds)
            steps = max(5, min(args.steps, (args.steps * 400) // n))
            repeats = args.repeats if n <= 1500 else 1
            for newton in args.newton:
                t_end = steps * args.h

                def run(model=model, newton=newton, t_end=t_end):
                    return mbd.simulate(model, t_end=t_end, h=args.h, newton=newton).r

                first, median, (low, high) = time_call(run, repeats=repeats)
                sol = mbd.simulate(model, t_end=t_end, h=args.h, newton=newton)
                row = dict(
                    family=family,
                    size=size,
                    bodies=model.nb,
                    constraints=model.nc,
                    newton_size=n,
                    newton=newton,
                    steps=steps,
                    compile_s=first - median,
                    step_median_s=median / steps,
                    step_min_s=low / steps,
                    step_max_s=high / steps,
                    dense_solve_s=lu_s,
                    step_over_solve=median / steps / lu_s,
                    mean_iterations=float(np.mean(np.asarray(sol.iterations)[1:])),
                    **memory_bytes(model, steps, args.h, newton),
                )
                rows.append(row)
                print(
                    f"{family:6s} N={size:4d} n={n:5d} {newton:7s} "
                    f"compile {row['compile_s']:6.2f} s"
                    f"  step {row['step_median_s'] * 1e3:9.3f} ms  dense solve "
                    f"{lu_s * 1e3:8.3f} ms  ratio {row['step_over_solve']:7.2f}"
                    f"  iters {row['mean_iterations']:.2f}  temp "
                    f"{row.get('temp_bytes', 0) / 2**20:8.1f} MiB",
                    flush=True,
                )
                jax.clear_caches()
    path = RESULTS / f"scaling_{args.tag}.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    plot(rows, RESULTS / f"scaling_{args.tag}.png")


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for family in sorted({r["family"] for r in rows}):
        for newton in sorted({r["newton"] for r in rows}):
            sel = [r for r in rows if r["family"] == family and r["newton"] == newton]
            if not sel:
                continue
            size = [r["size"] for r in sel]
            label = f"{family}, {newton}"
            axes[0].loglog(size, [r["compile_s"] for r in sel], "o-", label=label)
            axes[1].loglog(size, [r["step_median_s"] * 1e3 for r in sel], "o-", label=label)
            axes[2].loglog(
                size, [r.get("temp_bytes", np.nan) / 2**20 for r in sel], "o-", label=label
            )
        sel = [r for r in rows if r["family"] == family and r["newton"] == rows[0]["newton"]]
        axes[1].loglog(
            [r["size"] for r in sel],
            [r["dense_solve_s"] * 1e3 for r in sel],
            "k--",
            alpha=0.5,
            label=f"{family}: one dense solve",
        )
    axes[0].set(xlabel="N", ylabel="compile time [s]", title="compile")
    axes[1].set(xlabel="N", ylabel="time per step [ms]", title="run")
    axes[2].set(xlabel="N", ylabel="XLA temporaries [MiB]", title="memory")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def compare(before: str, after: str):
    """Time per step of two tagged runs (e.g. the solver before and after a change)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def read(tag):
        with (RESULTS / f"scaling_{tag}.csv").open() as fh:
            return list(csv.DictReader(fh))

    runs = {before: read(before), after: read(after)}
    families = sorted({r["family"] for rows in runs.values() for r in rows})
    fig, axes = plt.subplots(1, len(families), figsize=(6 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for tag, rows in runs.items():
            for newton in sorted({r["newton"] for r in rows}):
                sel = [r for r in rows if r["family"] == family and r["newton"] == newton]
                ax.loglog(
                    [int(r["size"]) for r in sel],
                    [float(r["step_median_s"]) * 1e3 for r in sel],
                    "o-",
                    label=f"{tag}: {newton} Newton",
                )
        sel = [r for r in runs[after] if r["family"] == family and r["newton"] == "full"]
        ax.loglog(
            [int(r["size"]) for r in sel],
            [float(r["dense_solve_s"]) * 1e3 for r in sel],
            "k--",
            alpha=0.6,
            label="one dense LU solve of the Newton system",
        )
        ax.set(xlabel="N", ylabel="time per step [ms]", title=family)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS / f"scaling_{before}_vs_{after}.png"
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")
    for family in families:
        for row_a in (r for r in runs[after] if r["family"] == family):
            match = [
                r
                for r in runs[before]
                if r["family"] == family and r["size"] == row_a["size"] and r["newton"] == "full"
            ]
            if match:
                ratio = float(match[0]["step_median_s"]) / float(row_a["step_median_s"])
                print(
                    f"{family:6s} N={int(row_a['size']):4d} {row_a['newton']:6s} step "
                    f"{float(row_a['step_median_s']) * 1e3:9.3f} ms, {ratio:5.1f}x faster "
                    f"than {before} full"
                )


if __name__ == "__main__":
    main()
