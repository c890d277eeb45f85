"""Batched simulation throughput: jaxmbd ``simulate_batch`` against MuJoCo's
threaded ``rollout``, model-steps per second against batch size, compile time apart.

    python -m benchmarks.batch [--sizes 1 16 64 256 1024]
        [--mechanisms double_pendulum slider_crank] [--integrators gen_alpha backward_euler]
        [--devices 1 2] [--threads 1 2] [--t-end 1.0] [--h 1e-3] [--repeats 3]

jaxmbd: rA, the integrator's default Newton (reused matrix), ``mbd.simulate_batch`` over a
batch whose members differ in their masses (member 0 is the nominal model). ``--devices 2``
runs in a child process with ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` (the
flag must be set before JAX starts), so the batch is split over two host devices, one per
core. Per (mechanism, integrator, devices): the first call of every batch size (trace +
compile + run), then ``--repeats`` rounds of timed calls with new parameter values (no
recompilation: later calls cost only the run), each round visiting every batch size once,
so that a drift of the machine's speed hits all sizes alike. Reported: the median run, and
the throughput relative to the next smaller batch as the median of the per-round ratios.

MuJoCo: ``mujoco.rollout.rollout`` of ``batch`` copies of the nominal initial state with 1 and
2 threads (one MjData per thread), integrators RK4 and implicitfast, median of the repeats.

Accuracy: max |error| over [0, t_end] of member 0's output against the independent
references of tests/references.py (double pendulum: z of rod 2's tip; slider crank: slider
x), so throughputs are compared at stated accuracy.

Writes benchmarks/results/batch/{bench_batch.csv, bench_batch.png, bench_batch.md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import (  # noqa: E402
    RESULTS,
    child,
    command,
    footer,
    from_tests,
    log,
    seconds,
    write_csv,
)

OUT = RESULTS / "batch"


def reference(mechanism: str, t: np.ndarray) -> np.ndarray:
    references = from_tests("references")
    double_pendulum, slider_crank = references.double_pendulum, references.slider_crank

    if mechanism == "slider_crank":
        return slider_crank(t)["x_slider"]
    ref = double_pendulum(t)
    return ref["r"][:, 1, 2] + ref["A"][:, 1, 2, 0]


def _output(mechanism, r, A):
    return r[:, 2, 0] if mechanism == "slider_crank" else r[:, 1, 2] + A[:, 1, 2, 0]


# ---- jaxmbd (runs in a worker process: the device count is fixed at JAX start) ----------


def jaxmbd_worker(args) -> list[dict]:
    import equinox as eqx
    import jax

    import jaxmbd as mbd

    rows = []
    n = int(round(args.t_end / args.h))
    for mechanism in args.mechanisms:
        model = getattr(mbd.models, mechanism)()
        for integrator in args.integrators:

            def batch(shift, size, model=model):
                scale = 1.0 + shift + 1e-2 * np.arange(size) / max(size, 1)
                scale[0] = 1.0 + shift  # member 0: the nominal model on the first call
                # the stack of members that differ in their masses, built on the host in
                # one go (mbd.stack_models of 16384 members dispatches an op per leaf and
                # member)
                stacked = jax.tree_util.tree_map(
                    lambda x: (
                        np.repeat(np.asarray(x)[None], size, axis=0) if eqx.is_array(x) else x
                    ),
                    model,
                )
                mass = np.asarray(model.mass)[None] * scale.reshape(
                    (size,) + (1,) * model.mass.ndim
                )
                return eqx.tree_at(lambda m: m.mass, stacked, mass)

            def run(models, integrator=integrator):
                sol = mbd.simulate_batch(
                    models, formulation="rA", integrator=integrator, t_end=args.t_end, h=args.h
                )
                return jax.block_until_ready(sol)

            # first calls (trace + compile + run) of every size, then the timed calls in
            # rounds that visit every size once: a drift of the machine's speed (this one
            # swings by up to 2x between minutes) hits all sizes alike, and the ratio of
            # two sizes' throughputs is taken within each round
            first, rows_of = {}, {}
            for size in args.sizes:
                models = batch(0.0, size)
                start = time.perf_counter()
                sol = run(models)
                first[size] = time.perf_counter() - start
                _progress(f"{mechanism} {integrator} batch {size}: first call {first[size]:.1f} s")
                t = np.asarray(sol.t)[0] if np.ndim(sol.t) == 2 else np.asarray(sol.t)
                y = _output(mechanism, np.asarray(sol.r)[0], np.asarray(sol.A)[0])
                rows_of[size] = dict(
                    all_converged=bool(np.all(np.asarray(sol.status) == 0)),
                    max_error=float(np.max(np.abs(y - reference(mechanism, t)))),
                    newton_iterations=float(np.mean(np.asarray(sol.iterations)[:, 1:])),
                )
            times = {size: [] for size in args.sizes}
            for k in range(args.repeats):
                for size in args.sizes:
                    models = batch(1e-3 * (k + 1), size)  # new values: no recompilation
                    times[size].append(seconds(lambda models=models: run(models)))
                    _progress(f"  round {k} batch {size}: {times[size][-1]:.3f} s")
            previous = None
            for size in args.sizes:
                median = statistics.median(times[size])
                # throughput relative to the next smaller size, median over the rounds
                ratio = (
                    statistics.median(
                        (size / a) / (previous / b)
                        for a, b in zip(times[size], times[previous], strict=True)
                    )
                    if previous is not None
                    else float("nan")
                )
                previous = size
                row = dict(
                    engine="jaxmbd",
                    mechanism=mechanism,
                    method=f"rA {integrator}",
                    workers=len(jax.devices()),
                    batch=size,
                    first_call_s=first[size],
                    compile_s=first[size] - median,
                    run_s=median,
                    run_min_s=min(times[size]),
                    run_max_s=max(times[size]),
                    model_steps_per_s=size * n / median,
                    ratio_to_smaller=ratio,
                    **rows_of[size],
                )
                print(json.dumps(row), flush=True)
                _progress(json.dumps(row))
                rows.append(row)
            jax.clear_caches()
    return rows


# progress on stderr (passed through by the parent process), with the elapsed time
_progress = log


def measure_jaxmbd(args, devices: int) -> list[dict]:
    cmd, env = child(__spec__.name, "--worker", *_forward(args))
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    # stderr (progress, errors) passes through
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise RuntimeError(f"jaxmbd worker ({devices} devices) failed: see its stderr above")
    return rows


def _forward(args) -> list[str]:
    out = ["--sizes", *map(str, args.sizes), "--mechanisms", *args.mechanisms]
    out += ["--integrators", *args.integrators, "--t-end", str(args.t_end), "--h", str(args.h)]
    return out + ["--repeats", str(args.repeats)]


# ---- MuJoCo --------------------------------------------------------------------------


def measure_mujoco(args) -> list[dict]:
    import mujoco
    from mujoco import rollout

    from benchmarks.engines.in_mujoco import MujocoSim

    rows = []
    for mechanism in args.mechanisms:
        for integrator in ("RK4", "implicitfast"):
            sim = MujocoSim(mechanism, args.h, args.t_end, integrator)
            nstep = sim.n_steps + 1  # sensors of step k at t_k: n + 1 rollout steps
            t_out, y = sim.run()
            error = float(np.max(np.abs(y - reference(mechanism, t_out))))
            for threads in args.threads:
                datas = [mujoco.MjData(sim.model) for _ in range(threads)]
                for size in args.sizes:
                    state = np.repeat(sim.state0[None], size, axis=0)

                    def call(state=state, datas=datas, model=sim.model, nstep=nstep):
                        start = time.perf_counter()
                        rollout.rollout(model, datas, state, nstep=nstep)
                        return time.perf_counter() - start

                    first = call()
                    times = [call() for _ in range(args.repeats)]
                    median = statistics.median(times)
                    row = dict(
                        engine="mujoco",
                        mechanism=mechanism,
                        method=integrator,
                        workers=threads,
                        batch=size,
                        first_call_s=first,
                        compile_s=0.0,
                        run_s=median,
                        run_min_s=min(times),
                        run_max_s=max(times),
                        model_steps_per_s=size * nstep / median,
                        max_error=error,
                        newton_iterations=float("nan"),
                        all_converged=True,
                    )
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    return rows


# ---- output ----------------------------------------------------------------------------


def _fmt_ratio(ratio) -> str:
    return "" if ratio is None or not np.isfinite(ratio) else f"{ratio:.2f}"


def write_outputs(rows, args, elapsed):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "bench_batch.csv", rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.mechanisms), figsize=(6 * len(args.mechanisms), 4.5))
    axes = np.atleast_1d(axes)
    for ax, mechanism in zip(axes, args.mechanisms, strict=True):
        series = sorted({(r["engine"], r["method"], r["workers"]) for r in rows})
        for engine, method, workers in series:
            pts = [
                r
                for r in rows
                if (r["mechanism"], r["engine"], r["method"], r["workers"])
                == (mechanism, engine, method, workers)
            ]
            if not pts:
                continue
            unit = "device" if engine == "jaxmbd" else "thread"
            label = f"{engine} {method}, {workers} {unit}{'s' if workers > 1 else ''}"
            label += f" (err {pts[0]['max_error']:.1e})"
            ax.plot(
                [p["batch"] for p in pts],
                [p["model_steps_per_s"] for p in pts],
                "o-" if engine == "jaxmbd" else "s--",
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("model-steps / s (median)")
        ax.set_title(f"{mechanism}, {args.t_end:g} s at h = {args.h:g}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "bench_batch.png", dpi=120)

    from benchmarks._harness import machine

    lines = [
        "# Batched simulation throughput",
        "",
        f"`{command()}` on {machine()}; "
        f"{elapsed:.0f} s in all. Model-steps/s = batch x steps / median run time; compile = "
        "first call minus the median run. x smaller batch: the throughput over that of the "
        "next smaller batch, median over the rounds of timed calls (jaxmbd). "
        "jaxmbd: `simulate_batch`, rA, default Newton; "
        "MuJoCo: `rollout`. Error: max |output - reference| of member 0 over the run.",
        "",
        "| mechanism | engine | method | workers | batch | model-steps/s | run s (median) "
        "| x smaller batch | compile s | max error | Newton it. |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mechanism']} | {r['engine']} | {r['method']} | {r['workers']} | {r['batch']} "
            f"| {r['model_steps_per_s']:,.0f} | {r['run_s']:.3f} "
            f"| {_fmt_ratio(r.get('ratio_to_smaller'))} | {r['compile_s']:.1f} "
            f"| {r['max_error']:.2e} | {r['newton_iterations']:.2f} |"
        )
    (out / "bench_batch.md").write_text("\n".join(lines) + "\n\n" + footer())
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 256, 1024])
    parser.add_argument("--mechanisms", nargs="+", default=["double_pendulum", "slider_crank"])
    parser.add_argument("--integrators", nargs="+", default=["gen_alpha", "backward_euler"])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-mujoco", action="store_true")
    parser.add_argument("--out", default=str(OUT), help="folder of the csv, png and md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        jaxmbd_worker(args)
        return
    start = time.perf_counter()
    rows = []
    if not args.skip_mujoco:
        rows += measure_mujoco(args)
    for devices in args.devices:
        rows += measure_jaxmbd(args, devices)
    write_outputs(rows, args, time.perf_counter() - start)


if __name__ == "__main__":
    main()
