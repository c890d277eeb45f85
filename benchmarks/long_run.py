"""10^6 steps of the slider crank in rA: memory stays flat, orthonormality and constraints hold.

    python -m benchmarks.long_run [--steps 1000000] [--save-every 1000]
                                   [--integrators backward_euler gen_alpha]

For each integrator: ``mbd.simulate(..., save_every=k, progress=...)`` at h = 1e-3 (t_end =
steps * h), resident memory (VmRSS) before the run, after the first chunk (compiled) and at
the end, the wall time (compile apart: the first chunk's time minus the median chunk's),
max ||A^T A - I|| and max |Phi| over the saved rows, and the largest Newton residual
norm of all steps (each saved row carries the largest of its segment). Writes
``results/long_run.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, machine
from jaxmbd.analysis.diagnostics import constraint_violation


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run(integrator: str, steps: int, save_every: int, h: float = 1e-3) -> dict:
    model = mbd.models.slider_crank()
    marks = []  # (time, done, rss) after each chunk
    start_rss = rss_mib()
    t0 = time.perf_counter()

    def progress(done, total):
        marks.append((time.perf_counter(), done, rss_mib()))

    sol = mbd.simulate(
        model,
        formulation="rA",
        integrator=integrator,
        t_end=steps * h,
        h=h,
        save_every=save_every,
        chunk_size=100 * save_every,
        progress=progress,
    )
    wall = time.perf_counter() - t0
    times = np.diff([t0] + [m[0] for m in marks])
    done = np.diff([0] + [m[1] for m in marks])
    per_step = [t / d for t, d in zip(times[1:], done[1:], strict=True)]
    median_step = statistics.median(per_step) if per_step else times[0] / done[0]
    compile_s = times[0] - median_step * done[0]
    viol = constraint_violation(model, sol)
    return {
        "integrator": integrator,
        "steps": steps,
        "rows": int(sol.r.shape[0]),
        "rss_start": start_rss,
        "rss_after_first_chunk": marks[0][2],
        "rss_end": marks[-1][2],
        "wall": wall,
        "compile": compile_s,
        "steps_per_s": 1.0 / median_step,
        "ortho": float(np.max(np.asarray(viol.orthonormality))),
        "phi": float(np.max(np.asarray(viol.position))),
        "newton_residual": float(np.max(np.asarray(sol.residual))),
        "status": int(np.max(np.asarray(sol.status))),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--save-every", type=int, default=1000)
    parser.add_argument("--integrators", nargs="+", default=["backward_euler", "gen_alpha"])
    args = parser.parse_args(argv)
    rows = [run(name, args.steps, args.save_every) for name in args.integrators]
    lines = [
        f"# {args.steps:,} steps of the slider crank in rA (h = 1e-3, save_every = "
        f"{args.save_every})",
        "",
        f"`python -m benchmarks.long_run --steps {args.steps} --save-every {args.save_every}`"
        f" on {machine()}",
        "",
        "| integrator | saved rows | RSS start / after 1st chunk / end (MiB) | wall (s) | "
        "compile (s) | steps/s (median chunk) | max ‖AᵀA−I‖ | max |Φ| | max Newton residual "
        "| status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['integrator']} | {r['rows']} | {r['rss_start']:.0f} / "
            f"{r['rss_after_first_chunk']:.0f} / {r['rss_end']:.0f} | {r['wall']:.1f} | "
            f"{r['compile']:.1f} | {r['steps_per_s']:,.0f} | {r['ortho']:.1e} | {r['phi']:.1e} "
            f"| {r['newton_residual']:.1e} | {r['status']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "long_run.md").write_text(text)


if __name__ == "__main__":
    main()
