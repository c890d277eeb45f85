"""Kinematics speed of rA, rp, re (paper 1 Table 8) and iterations (Table 9).

    python -m benchmarks.kinematics [--h 1e-3] [--t-end 3] [--repeats 7]

Driven mechanisms, h = 1e-3 over 3 s, tol 1e-10. Reports compile time (first call minus
median run) apart from the median run time, steps/s, mean Newton iterations per step and
the speed ratio versus rp, all measured in this one run. Writes CSV into
benchmarks/results/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, machine, time_call, write_csv

PAPER_TABLE8 = {  # speed-up vs rp: (C1 rA, C1 re, C2 rA, C2 re)
    "single_pendulum": (2.21, 1.40, 2.63, 1.27),
    "four_link": (2.38, 1.23, 2.55, 1.10),
    "slider_crank": (2.70, 1.47, 2.62, 1.23),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--t-end", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    rows = []
    for name in PAPER_TABLE8:
        model = getattr(mbd.models, name)()
        results = {}
        for form in ("rA", "rp", "re"):

            def run(form=form, model=model):
                return mbd.kinematics(model, formulation=form, t_end=args.t_end, h=args.h).r

            first, median, spread = time_call(run, repeats=args.repeats)
            sol = mbd.kinematics(model, formulation=form, t_end=args.t_end, h=args.h)
            steps = len(sol.t) - 1
            results[form] = dict(
                mechanism=name,
                formulation=form,
                compile_s=first - median,
                run_median_s=median,
                run_min_s=spread[0],
                run_max_s=spread[1],
                steps_per_s=steps / median,
                mean_iterations=float(np.mean(np.asarray(sol.iterations)[1:])),
            )
        for form, res in results.items():
            res["speedup_vs_rp"] = results["rp"]["run_median_s"] / res["run_median_s"]
            rows.append(res)
            print(
                f"{name:16s} {form:3s} compile {res['compile_s']:6.2f} s  "
                f"run {res['run_median_s'] * 1e3:8.2f} ms "
                f"({res['steps_per_s']:9.0f} steps/s)  iters {res['mean_iterations']:.3f}  "
                f"x{res['speedup_vs_rp']:.2f} vs rp   paper rA/re vs rp: {PAPER_TABLE8[name]}"
            )
    path = args.out / "kinematics_speed.csv"
    write_csv(path, rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
