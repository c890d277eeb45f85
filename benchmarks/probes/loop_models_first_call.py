"""Loop models built in code (tree plus loop rows) in joint coordinates (``rk``) against
rA's default (``gen_alpha``), one process, alternated: each configuration's first call
(trace and compile of every program it runs, caches cleared before each) and its steps/s
(median of 5 calls) over 1 s at h = 1e-3; with ``three`` as third argument also the joint
run whose program computes each step's accelerations apart from the step (before the loop,
in the stages, after each step: ``state_accelerations`` off). Run from the tree's root:

    python benchmarks/probes/loop_models_first_call.py six_body_linkage,slider_crank 2 three
"""

import os
import statistics
import sys
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from jaxmbd.joint_space.steppers import RungeKutta4  # noqa: E402


class ThreeCopies(RungeKutta4):
    """RK4 run with the accelerations computed before the loop and after each step."""

    state_accelerations = False


CONFIGS = [("joint", "rk"), ("rA", "gen_alpha")]
N = 1000


def run(model, formulation, integrator):
    sol = mbd.simulate(model, formulation=formulation, integrator=integrator, t_end=N * 1e-3,
                       h=1e-3)  # fmt: skip
    jax.block_until_ready(sol.r)


def main(mechanisms, reps):
    for mech in mechanisms:
        model = getattr(mbd.models, mech)()
        first = {c: [] for c in CONFIGS}
        runs = {c: [] for c in CONFIGS}
        for _ in range(reps):
            for config in CONFIGS:
                jax.clear_caches()
                start = time.perf_counter()
                run(model, *config)
                first[config].append(time.perf_counter() - start)
        for _ in range(5):
            for config in CONFIGS:
                start = time.perf_counter()
                run(model, *config)
                runs[config].append(time.perf_counter() - start)
        for config in CONFIGS:
            times = [round(x, 1) for x in first[config]]
            name = config[1] if isinstance(config[1], str) else "rk, 3 copies"
            print(f"{mech:18s} {config[0]:6s} {name:12s} first call "
                  f"{statistics.median(first[config]):6.1f} s {times}"
                  f"  steps/s {N / statistics.median(runs[config]):8.0f}", flush=True)  # fmt: skip
        print(os.popen("uptime").read().strip(), flush=True)


if __name__ == "__main__":
    if sys.argv[3:4] == ["three"]:
        CONFIGS.insert(1, ("joint", ThreeCopies()))
    main(sys.argv[1].split(","), int(sys.argv[2]) if len(sys.argv) > 2 else 1)
