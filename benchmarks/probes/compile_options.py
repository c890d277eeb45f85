"""Compile time of a user's gradient program under ``jax.jit`` and under ``mbd.jit``.

    python -m benchmarks.probes.compile_options [--t-end 1.0] [--h 2e-3]

``mbd.jit`` is ``eqx.filter_jit`` with the XLA options of jaxmbd's own top-level programs
(``jaxmbd.compiled.jit.XLA_OPTIONS``). The program is the value and gradient of a loss on rod 2's
positions of the double pendulum (gen_alpha, reused-matrix Newton) with respect to its
mass. Each variant runs in a fresh process (no in-memory compilation cache shared between
them); tracing and lowering are timed apart from XLA compilation, and the run once
compiled.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CHILD = """
import sys, time
import equinox as eqx, jax, jax.numpy as jnp
import jaxmbd as mbd
t_end, h, which = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
model = mbd.models.double_pendulum()
def loss(mass2):
    m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass2))
    return jnp.sum(mbd.simulate(m, t_end=t_end, h=h).r[:, 1] ** 2)
program = (mbd.jit if which == "mbd.jit" else jax.jit)(jax.value_and_grad(loss))
x = jnp.asarray(45.0)
t0 = time.perf_counter(); lowered = program.lower(x)
t1 = time.perf_counter(); compiled = lowered.compile()
t2 = time.perf_counter(); jax.block_until_ready(compiled(x))
t3 = time.perf_counter(); jax.block_until_ready(compiled(x)); t4 = time.perf_counter()
print(f"{which},{t1 - t0:.2f},{t2 - t1:.2f},{t4 - t3:.3f}")
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--h", type=float, default=2e-3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rows = {"jax.jit": [], "mbd.jit": []}
    for _ in range(args.repeats):
        for which in rows:  # alternated, so both see the same machine load
            out = (
                subprocess.run(
                    [sys.executable, "-c", CHILD, str(args.t_end), str(args.h), which],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            rows[which].append([float(v) for v in out.split(",")[1:]])
    print(f"value_and_grad of a {round(args.t_end / args.h)}-step double-pendulum loss")
    print(f"{'':8s} {'trace+lower [s]':>16s} {'XLA compile [s]':>16s} {'run [s]':>9s}  (medians)")
    for which, values in rows.items():
        med = [sorted(col)[len(col) // 2] for col in zip(*values, strict=True)]
        print(f"{which:8s} {med[0]:16.2f} {med[1]:16.2f} {med[2]:9.3f}")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
