"""How much slower a call runs right after the process was idle: a fixed piece of work
(pure Python, NumPy, and a compiled jaxmbd run) timed three times in a row after a pause,
against the same work timed warm. On the shared 2-core virtual machine this project is
measured on, any call after ~0.1 s of idleness (or after another engine's run, whose
threads leave the core this one wakes on) takes tens of milliseconds longer, for a few
calls: a short benchmark call timed between other engines' calls measures the machine's
wake-up, not the engine (``benchmarks._harness.interleaved`` warms each call first).

    python -m benchmarks.probes.idle_penalty
    python -m benchmarks.probes.idle_penalty --pause 0.5 --repeats 6
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pause", type=float, default=0.15, help="seconds idle before a call")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--no-jax", action="store_true", help="leave the jaxmbd run out")
    args = parser.parse_args(argv)
    data = list(range(300_000))
    arr = np.random.default_rng(0).random(2_000_000)
    work = {"python sum": lambda: sum(data), "numpy": lambda: float((arr * 2.0).sum())}
    if not args.no_jax:
        import jax
        import jax.numpy as jnp

        import jaxmbd as mbd

        model = mbd.models.double_pendulum()
        run = jax.jit(lambda m: mbd.simulate(m, t_end=0.2, h=1e-3, formulation="joint").qpos)
        run(model).block_until_ready()
        work["jaxmbd run (200 steps)"] = lambda: jnp.asarray(run(model)).block_until_ready()
    print(f"milliseconds of three consecutive calls after {args.pause} s idle; warm: the "
          "median of 20 back-to-back calls")  # fmt: skip
    for name, fn in work.items():
        warm = float(np.median([_timed(fn) for _ in range(20)]))
        after = []
        for _ in range(args.repeats):
            time.sleep(args.pause)
            after.append([_timed(fn) for _ in range(3)])
        first = np.median([a[0] for a in after])
        rows = "; ".join(" ".join(f"{x:.1f}" for x in a) for a in after)
        print(f"{name:24s} warm {warm:6.2f}  first after idle (median) {first:6.2f} "
              f"({first / warm:.1f}x)  [{rows}]")  # fmt: skip


if __name__ == "__main__":
    main()
