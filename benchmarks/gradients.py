"""Cost of gradients and batching (issue: differentiable and batched simulation).

    python -m benchmarks.gradients [--repeats 5] [--max-batch 4096]

1. Reverse-mode gradient of a trajectory loss relative to the forward run (slider crank,
   double pendulum and spinning top, rA, gen_alpha and backward Euler with the default
   reused-matrix Newton, h = 1e-3, 1000 steps); target at most 4x.
2. Peak temporary memory of the compiled gradient (XLA memory analysis) against the horizon,
   with and without a checkpointed scan, and against the Newton iteration cap (it must not
   depend on it: iterations are never differentiated).
3. Batched throughput (jit(vmap), model-steps per second) for batch sizes 1 .. 4096.
Writes benchmarks/results/gradients_*.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxmbd as mbd
from benchmarks._harness import RESULTS, machine, time_call, write_csv


def loss_fn(model, t_end, h, **options):
    def loss(m):
        sol = mbd.simulate(m, t_end=t_end, h=h, **options)
        return jnp.sum(sol.r**2) + jnp.sum(sol.rdot**2)

    return loss


def gradient_cost(repeats, rows):
    for name, integrator in (
        ("slider_crank", "gen_alpha"),
        ("double_pendulum", "gen_alpha"),
        ("spinning_top", "gen_alpha"),
        ("slider_crank", "backward_euler"),
        ("double_pendulum", "backward_euler"),
    ):
        model = getattr(mbd.models, name)()
        loss = loss_fn(model, 1.0, 1e-3, integrator=integrator)
        fwd = eqx.filter_jit(loss)
        grad = eqx.filter_jit(jax.grad(loss))
        f_first, f_med, _ = time_call(lambda fwd=fwd, model=model: fwd(model), repeats=repeats)
        g_first, g_med, _ = time_call(lambda grad=grad, model=model: grad(model), repeats=repeats)
        rows.append(
            dict(
                mechanism=name,
                integrator=integrator,
                forward_ms=f_med * 1e3,
                gradient_ms=g_med * 1e3,
                ratio=g_med / f_med,
                forward_compile_s=f_first - f_med,
                gradient_compile_s=g_first - g_med,
            )
        )
        print(
            f"{name:16s} {integrator:14s} forward {f_med * 1e3:8.1f} ms  "
            f"gradient {g_med * 1e3:8.1f} ms  "
            f"ratio {g_med / f_med:5.2f}  (compile {f_first - f_med:.1f} s / "
            f"{g_first - g_med:.1f} s)"
        )


def temp_bytes(fn, *args):
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def gradient_memory(rows):
    model = mbd.models.double_pendulum()
    for steps in (250, 500, 1000, 2000, 4000):
        for checkpoint in (None, 50):
            for max_iter in (5, 50):
                loss = loss_fn(model, steps * 1e-3, 1e-3, formulation="rA", checkpoint=checkpoint,
                               max_iter=max_iter)  # fmt: skip
                mem = temp_bytes(jax.grad(loss), model)
                rows.append(
                    dict(
                        steps=steps,
                        checkpoint=checkpoint or 0,
                        max_iter=max_iter,
                        temp_MiB=mem / 2**20,
                    )
                )
                print(
                    f"steps {steps:5d}  checkpoint {checkpoint!s:5s}  max_iter {max_iter:3d}  "
                    f"gradient temp memory {mem / 2**20:8.2f} MiB"
                )


def batched_throughput(repeats, max_batch, rows):
    model = mbd.models.double_pendulum()
    steps = 200
    size = 1
    while size <= max_batch:
        offsets = jnp.linspace(-1.0, 1.0, size)
        batch = jax.vmap(
            lambda w: eqx.tree_at(lambda m: m.omega0, model, model.omega0.at[0, 2].set(w))
        )(offsets)
        run = eqx.filter_jit(
            eqx.filter_vmap(lambda m: mbd.simulate(m, t_end=steps * 1e-3, h=1e-3, throw=False).r)
        )
        first, med, _ = time_call(
            lambda run=run, batch=batch: run(batch), repeats=max(1, repeats // (1 + size // 512))
        )
        rate = size * steps / med
        rows.append(dict(batch=size, run_s=med, compile_s=first - med, model_steps_per_s=rate))
        print(
            f"batch {size:5d}  run {med * 1e3:9.1f} ms  {rate:12.0f} model-steps/s  "
            f"(compile {first - med:.1f} s)"
        )
        size *= 4


def write(rows, path):
    write_csv(path, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-batch", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--parts",
        nargs="*",
        default=["cost", "memory", "batch"],
        choices=["cost", "memory", "batch"],
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}, devices: {jax.devices()}")
    parts = {
        "cost": (lambda rows: gradient_cost(args.repeats, rows), "gradients_cost.csv"),
        "memory": (gradient_memory, "gradients_memory.csv"),
        "batch": (
            lambda rows: batched_throughput(args.repeats, args.max_batch, rows),
            "gradients_batch.csv",
        ),
    }
    for part in args.parts:
        fn, name = parts[part]
        rows = []
        fn(rows)
        write(rows, args.out / name)


if __name__ == "__main__":
    main()
