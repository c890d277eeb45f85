"""Batches of the joint formulation (RK4, ``integrator="rk"``): model-steps per second of
``jax.vmap`` over a run, against one model's steps per second, for batch sizes 1-1024.

    python -m benchmarks.batch_joint [--models double_pendulum arm3 cartpole acrobot]
        [--sizes 1 4 16 64 256 1024] [--steps 500] [--repeats 3] [--chunks 16 32 64 128]

The programs are those of ``python -m benchmarks.engines joint-coordinates``: the files
of that harness (dm_control's cartpole and acrobot, the arm3 and double pendulum files,
limits and contact off), *single*: initial qvel (nv,) -> final qpos with ``mbd.jit``;
*batch*: ``mbd.jit(jax.vmap(single))`` over members with their own initial rates. Each
batch size is compiled once; then ``--repeats`` rounds time every program once each, so
that the shared machine's load falls on all alike. Reported: medians of wall time and of
the process's CPU time (on a loaded machine the CPU-time ratios are the steadier ones),
and batch / single, the ratio of model-steps per second.

*batch-last*: the same batches with the joint run's batch-last rule switched on
(``jaxmbd.joint_space.run.BATCH_LAST_STEPPERS``, :mod:`jaxmbd._batch_last`: the members
in every array's minor axis), against the default (``jax.vmap``'s own batching, the
members in the major axis). ``--chunks``: batch-last 256 members with other chunk sizes
(``BATCH_CHUNK``, members stepped together).

Writes benchmarks/results/batch/batch_joint.{md,json,csv}.
"""

from __future__ import annotations

import os

# each program compiles in this process: jaxmbd's disk cache of programs is keyed by the
# function and its arguments, not by the module settings the variants below switch
os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import argparse
import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import RESULTS, log, write_results
from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, _qpos, model_file

MODELS = ("double_pendulum", "arm3", "cartpole", "acrobot")


def _programs(name: str, args, tmp: Path):
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd
    import jaxmbd.joint_space.run as joint_run
    from jaxmbd.joint_space import RungeKutta4, SemiImplicitEuler

    F = model_file(name, tmp)
    with_qvel = _jaxmbd_with_qvel(F)
    opts = dict(formulation="joint", integrator="rk", t_end=args.steps * F["h"], h=F["h"],
                limits="none")  # fmt: skip

    def final_qpos(v):
        return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]

    rng = np.random.default_rng(0)
    top = max(max(args.sizes), 256)
    qvel = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1.0, 1.0, size=(top, F["nv"])))
    programs = {"single": (mbd.jit(final_qpos), qvel[0], 1)}
    for size in args.sizes:
        program = mbd.jit(jax.vmap(final_qpos))
        jax.block_until_ready(program(qvel[:size]))
        programs[f"batch {size}"] = (program, qvel[:size], size)
    # the variants trace when first called: each under its own setting
    default_chunk, default_steppers = joint_run.BATCH_CHUNK, joint_run.BATCH_LAST_STEPPERS
    try:
        joint_run.BATCH_LAST_STEPPERS = (RungeKutta4, SemiImplicitEuler)
        for chunk in args.chunks:
            joint_run.BATCH_CHUNK = chunk
            program = mbd.jit(jax.vmap(final_qpos))
            jax.block_until_ready(program(qvel[:256]))
            programs[f"batch-last, chunk {chunk}"] = (program, qvel[:256], 256)
        joint_run.BATCH_CHUNK = default_chunk
        for size in args.sizes:
            program = mbd.jit(jax.vmap(final_qpos))
            jax.block_until_ready(program(qvel[:size]))
            programs[f"batch-last {size}"] = (program, qvel[:size], size)
    finally:
        joint_run.BATCH_CHUNK, joint_run.BATCH_LAST_STEPPERS = default_chunk, default_steppers
    return programs


def _time(programs: dict, repeats: int) -> dict:
    import jax

    for fn, x, _ in programs.values():
        jax.block_until_ready(fn(x))
    wall = {k: [] for k in programs}
    cpu = {k: [] for k in programs}
    for _ in range(repeats):
        for key, (fn, x, _) in programs.items():
            w, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(x))
            wall[key].append(time.perf_counter() - w)
            cpu[key].append(time.process_time() - c)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in programs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 16, 64, 256, 1024])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", nargs="*", type=int, default=[])
    args = parser.parse_args(argv)
    rows = []
    load_start = os.getloadavg()
    stem = RESULTS / "batch" / "batch_joint"
    kept = []  # the rows of the models this run leaves out, from the last run
    if stem.with_suffix(".json").exists():
        last = json.loads(stem.with_suffix(".json").read_text())
        kept = [r for r in last.get("rows", []) if r["model"] not in args.models]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            log(f"{name}: compiling")
            programs = _programs(name, args, Path(tmp))
            log(f"{name}: timing")
            timed = _time(programs, args.repeats)
            when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())
            wall_1, cpu_1 = timed["single"]
            for key, (_, _, size) in programs.items():
                wall, cpu = timed[key]
                rate_wall, rate_cpu = size * args.steps / wall, size * args.steps / cpu
                rows.append(
                    {
                        "model": name,
                        "program": key,
                        "members": size,
                        "model_steps_per_s": rate_wall,
                        "vs_single": rate_wall / (args.steps / wall_1),
                        "cpu_model_steps_per_s": rate_cpu,
                        "cpu_vs_single": rate_cpu / (args.steps / cpu_1),
                        "run": f"{when}, load {load}",
                    }
                )
                r = rows[-1]
                log(f"  {r['program']}: {rate_wall:,.0f} model-steps/s ({r['vs_single']:.2f}x; "
                    f"CPU time {r['cpu_vs_single']:.2f}x)")  # fmt: skip
    load_end = os.getloadavg()
    rows = kept + rows
    lines = [
        "# Batches of the joint formulation (RK4): batch / single",
        "",
        f"{args.steps} steps per run; medians of {args.repeats} rounds (every program once a "
        "round); *vs single*: model-steps/s over the single model's steps/s, from wall time "
        "and from the process's CPU time (steadier on a loaded machine).",
        "",
        f"Machine load (1/5/15 min) {load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f} "
        f"at the start, {load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f} at the end "
        "(a shared 2-core CPU); each row's *run* column: when its model was timed, and the "
        "load then (a run with ``--models`` keeps the other models' rows).",
        "",
        "| model | program | members | model-steps/s | vs single | CPU-time model-steps/s "
        "| vs single (CPU time) | run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['program']} | {r['members']} | {r['model_steps_per_s']:,.0f} "
            f"| {r['vs_single']:.2f}x | {r['cpu_model_steps_per_s']:,.0f} "
            f"| {r['cpu_vs_single']:.2f}x | {r.get('run', '')} |"
        )
    lines += [
        "",
        "*batch B*: the default program (``jax.vmap``'s own batching, the members in every "
        "array's major axis); *batch-last B*: the joint run's batch-last rule switched on "
        "(``BATCH_LAST_STEPPERS``: the members in the minor axis, stepped "
        "``BATCH_CHUNK`` = 64 at a time); *chunk k*: 256 members batch-last, k at a time.",
    ]
    write_results("batch/batch_joint", rows, report="\n".join(lines) + "\n",
                  data={"args": vars(args)})  # fmt: skip


if __name__ == "__main__":
    main()
