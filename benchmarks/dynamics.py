"""Dynamics speed of rA, rp, re (paper 1 Table 10) with backward Euler and generalized-alpha,
full, modified and reused-matrix Newton.

    python -m benchmarks.dynamics [--h 1e-3] [--repeats 5]

h = 1e-3 over 3 s (double pendulum 5 s), default Newton tolerance (1e-3 h^2). Reports
compile time apart from the median run time, steps/s, mean Newton iterations and the speed
ratio versus rp, all measured in this one run, and writes
benchmarks/results/dynamics_speed.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, machine, time_call, write_csv

PAPER_TABLE10 = {  # speed-up vs rp: (C1 rA, C1 re, C2 rA, C2 re)
    "single_pendulum": (2.43, 1.29, 2.46, 1.69),
    "double_pendulum": (2.63, 1.21, 2.39, 1.53),
    "four_link": (2.62, 1.21, 2.41, 1.44),
    "slider_crank": (2.93, 1.31, 2.29, 1.30),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mechanisms", nargs="*", default=[*PAPER_TABLE10, "spinning_top"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    rows = []
    for name in args.mechanisms:
        model = getattr(mbd.models, name)()
        t_end = 5.0 if name == "double_pendulum" else 3.0
        results = {}
        for form, integrator, newton in (
            ("rA", "backward_euler", "full"),
            ("rA", "backward_euler", "modified"),
            ("rA", "backward_euler", "reuse"),
            ("rp", "backward_euler", "full"),
            ("re", "backward_euler", "full"),
            ("rA", "gen_alpha", "full"),
            ("rA", "gen_alpha", "reuse"),
            ("rp", "gen_alpha", "reuse"),
            ("re", "gen_alpha", "full"),  # re's default variant: index3
        ):
            options = dict(
                formulation=form, integrator=integrator, newton=newton, t_end=t_end, h=args.h
            )

            def run(model=model, options=options):
                return mbd.simulate(model, **options).r

            first, median, spread = time_call(run, repeats=args.repeats)
            sol = mbd.simulate(model, **options)
            steps = len(sol.t) - 1
            results[(form, integrator, newton)] = dict(
                mechanism=name,
                formulation=form,
                integrator=integrator,
                newton=newton,
                compile_s=first - median,
                run_median_s=median,
                run_min_s=spread[0],
                run_max_s=spread[1],
                steps_per_s=steps / median,
                mean_iterations=float(np.mean(np.asarray(sol.iterations)[1:])),
            )
        base = results[("rp", "backward_euler", "full")]["run_median_s"]
        for res in results.values():
            res["speedup_vs_rp"] = base / res["run_median_s"]
            rows.append(res)
            print(
                f"{name:16s} {res['formulation']:3s} {res['integrator']:14s} "
                f"{res['newton']:8s} compile "
                f"{res['compile_s']:6.2f} s  run {res['run_median_s'] * 1e3:8.1f} ms "
                f"({res['steps_per_s']:8.0f} steps/s)  iters {res['mean_iterations']:.3f}  "
                f"x{res['speedup_vs_rp']:.2f} vs rp   paper: {PAPER_TABLE10.get(name, '-')}"
            )
    path = args.out / "dynamics_speed.csv"
    write_csv(path, rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
