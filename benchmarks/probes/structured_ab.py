"""Interleaved A/B of the linear solvers on one model in one process: each solver's
program is compiled once, then the runs alternate (solver after solver, ``--rounds``
times), so that a loaded machine's changing load falls on all of them alike.

    python -m benchmarks.probes.structured_ab chain10 --solvers dense structured small_structured

Models: ``chainN`` (``pendulum_chain(N)``), ``arm3`` (``tests/data/arm3.xml``) or a name of
``jaxmbd.models``; gen_alpha (stabilised, reused Newton matrix), h = 1e-3 for ``--t-end``
s. jaxmbd's small-loop option is on for every solver here (it is set at import; LAPACK's
programs are not hoisted either way). Prints per solver the median steps per CPU-second and
per second, compile time apart, and whether the time loop was hoisted.
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxmbd as mbd
from benchmarks.problems import ARM3
from jaxmbd.compiled.xla_flags import loop_hoisted


def load(which):
    if which.startswith("chain"):
        return mbd.models.pendulum_chain(int(which[5:]))
    if which == "arm3":
        return mbd.mjcf.load_robot(ARM3)
    return getattr(mbd.models, which)()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--solvers", nargs="+", default=["dense", "structured", "small_structured"])
    parser.add_argument("--t-end", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    model = load(args.model)
    steps = round(args.t_end / 1e-3)
    programs, compile_s, hoisted = {}, {}, {}
    for s in args.solvers:
        f = jax.jit(
            lambda m, s=s: mbd.simulate(
                m, formulation="rA", t_end=args.t_end, h=1e-3, linear_solver=s, throw=False
            )
        )
        t0 = time.process_time()
        programs[s] = f.lower(model).compile()
        compile_s[s] = time.process_time() - t0
        hoisted[s] = loop_hoisted(programs[s].as_text(), steps)
        sol = jax.block_until_ready(programs[s](model))
        assert int(sol.status.max()) == 0, s
    cpu = {s: [] for s in args.solvers}
    wall = {s: [] for s in args.solvers}
    for _ in range(args.rounds):
        for s in args.solvers:
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(programs[s](model))
            wall[s].append(time.perf_counter() - t0)
            cpu[s].append(time.process_time() - c0)

    def median(v):
        return sorted(v)[len(v) // 2]

    print(f"{args.model}: gen_alpha, h = 1e-3, {args.t_end} s, medians of {args.rounds} "
          "interleaved runs")  # fmt: skip
    print(
        f"{'solver':16s} {'hoisted':8s} {'compile cpu [s]':>15s} {'steps/s':>9s} "
        f"{'steps/cpu-s':>11s}"
    )
    for s in args.solvers:
        print(
            f"{s:16s} {'yes' if hoisted[s] else 'no':8s} {compile_s[s]:15.1f} "
            f"{steps / median(wall[s]):9.0f} {steps / median(cpu[s]):11.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
