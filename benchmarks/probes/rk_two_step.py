"""rk on rotmat (two-step multipliers, eq. 25): programs with different ``linear_solver``
compiled in one process and run alternately (the machine's load drifts less between them
than between fresh processes): steps per CPU-second, medians of 9 runs, and whether the
time loop is hoisted. Where "small" (hoisted) beats LAPACK decides
``runge_kutta.TWO_STEP_SMALL_MAX``.

    python -m benchmarks.probes.rk_two_step MODEL[:N] T_END MULTIPLIERS SOLVER...
    python -m benchmarks.probes.rk_two_step slider_crank 0.4 two_step dense small
    python -m benchmarks.probes.rk_two_step pendulum_chain:3 1.0 two_step dense small

``MODEL:N`` calls ``jaxmbd.models.MODEL(N)`` (``pendulum_chain:3``); h = 1e-3.
"""

import argparse
import time

import jax
import numpy as np

import jaxmbd as mbd
from jaxmbd.compiled.xla_flags import loop_hoisted

REPEATS = 9


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", help="MODEL or MODEL:N of jaxmbd.models")
    parser.add_argument("t_end", type=float)
    parser.add_argument("multipliers", help="the rk integrator's multipliers option")
    parser.add_argument("solvers", nargs="+", help="linear_solver values")
    args = parser.parse_args(argv)
    name, t_end, multipliers, solvers = args.model, args.t_end, args.multipliers, args.solvers
    builder, _, arg = name.partition(":")
    model = getattr(mbd.models, builder)(*([int(arg)] if arg else []))
    steps = round(t_end / 1e-3)
    programs = {}
    for solver in solvers:
        run = jax.jit(
            lambda m, s=solver: mbd.simulate(
                m, formulation="rotmat", integrator="rk", multipliers=multipliers,
                linear_solver=s, t_end=t_end, h=1e-3, throw=False,
            )
        )  # fmt: skip
        programs[solver] = run.lower(model).compile()
        jax.block_until_ready(programs[solver](model))
    cpu = {solver: [] for solver in solvers}
    for _ in range(REPEATS):
        for solver in solvers:
            start = time.process_time()
            jax.block_until_ready(programs[solver](model))
            cpu[solver].append(time.process_time() - start)
    n = 12 * model.nb + model.nc
    print(f"{name} (12 nb + nc = {n}) {multipliers}, {t_end} s, steps per CPU-second:")
    for solver in solvers:
        hoisted = loop_hoisted(programs[solver].as_text(), steps)
        rate = steps / float(np.median(cpu[solver]))
        print(f"  {solver:6s} {rate:8.0f}  {'hoisted' if hoisted else 'not hoisted'}")


if __name__ == "__main__":
    main()
