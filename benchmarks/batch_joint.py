"""Batches of the joint formulation (RK4): model-steps per second of ``jax.vmap`` over a
run, against one model's steps per second, for batch sizes 1-1024.

    python -m benchmarks.batch_joint [--models double_pendulum arm3 cartpole acrobot humanoid]
        [--sizes 1 4 16 64 256 1024] [--steps 300] [--repeats 3] [--integrator rkmk]
        [--vmap] [--batch-last] [--chunks 16 32 128] [--devices 2]

The programs are those of ``python -m benchmarks.engines joint-coordinates``: the files
of that harness (dm_control's cartpole, acrobot and humanoid, the arm3 and double
pendulum files, limits and contact off), *single*: initial qvel (nv,) -> final qpos;
*batch*: ``jax.vmap(single)`` over members with their own initial rates. Each program is
traced and compiled on its own (``jax.jit(...).lower(...).compile()``, JAX's caches
cleared before each: the joint run's ``jit`` would otherwise reuse the trace of the first
setting for every later one); then ``--repeats`` rounds time every program once each, so
that the shared machine's load falls on all alike. Reported: medians of wall time and of
the process's CPU time (on a loaded machine the CPU-time ratios are the steadier ones),
batch / single (the ratio of model-steps per second), and each program's first call
(trace, compile and one run).

*batch B*: the default, the explicit steps' batches as per-member scalar code on tiles of
members (:mod:`jaxmbd.compiled.batch_lanes`, ``BATCH_LANES_CHUNK`` tiles a chunk); ``--vmap``:
also *vmap B*, ``jax.vmap``'s own batching (``BATCH_LANES_STEPPERS = ()``, the members in
every array's major axis); ``--batch-last``: also *batch-last B* (the members in every
array's minor axis, :mod:`jaxmbd.compiled.batch_last`); ``--chunks``: the default at 1024
members with other chunk sizes (tiles of 4 members); ``--devices N``: also *batch B on N
devices* for the sizes N divides, the default program split over N host devices by
``shard_map`` (what ``simulate_batch`` does with ``devices``; the process then starts N CPU
devices, ``--xla_force_host_platform_device_count``, each running on its own core; the
single model and the other programs stay on the first).

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

MODELS = ("double_pendulum", "arm3", "cartpole", "acrobot", "humanoid")


def _programs(name: str, args, tmp: Path):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jaxmbd as mbd
    import jaxmbd.joint_space.run as joint_run

    # imported here: its problems start JAX's backend, which reads --devices' flag
    from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, _qpos, model_file
    from jaxmbd.joint_space import RungeKutta4, SemiImplicitEuler

    F = model_file(name, tmp)
    with_qvel = _jaxmbd_with_qvel(F)
    opts = dict(formulation="joint", integrator=args.integrator, t_end=args.steps * F["h"],
                h=F["h"], limits="none")  # fmt: skip

    def final_qpos(v):
        return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]

    rng = np.random.default_rng(0)
    top = max(max(args.sizes), 1024 if args.chunks else 1)
    qvel = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1.0, 1.0, size=(top, F["nv"])))
    explicit = (RungeKutta4, SemiImplicitEuler)
    saved = (joint_run.BATCH_LANES_STEPPERS, joint_run.BATCH_LANES_CHUNK,
             joint_run.BATCH_LAST_STEPPERS)  # fmt: skip
    programs = {}

    def add(key, fn, x, size, lanes=saved[0], chunk=saved[1], last=saved[2]):
        joint_run.BATCH_LANES_STEPPERS, joint_run.BATCH_LANES_CHUNK = lanes, chunk
        joint_run.BATCH_LAST_STEPPERS = last
        jax.clear_caches()
        t = time.perf_counter()
        program = jax.jit(fn).lower(x).compile()
        jax.block_until_ready(program(x))
        programs[key] = (program, x, size, time.perf_counter() - t)

    try:
        add("single", final_qpos, qvel[0], 1)
        batch = jax.vmap(final_qpos)
        for size in args.sizes:
            add(f"batch {size}", batch, qvel[:size], size)
        for chunk in args.chunks:
            add(f"batch 1024, chunk {chunk}", batch, qvel[:1024], 1024, chunk=chunk)
        if args.vmap:
            for size in args.sizes:
                add(f"vmap {size}", batch, qvel[:size], size, lanes=())
        if args.batch_last:
            for size in args.sizes:
                add(f"batch-last {size}", batch, qvel[:size], size, lanes=(), last=explicit)
        if args.devices > 1:
            if len(jax.devices()) < args.devices:
                raise SystemExit(f"--devices {args.devices}: JAX started with "
                                 f"{len(jax.devices())} device(s)")  # fmt: skip
            mesh = Mesh(np.asarray(jax.devices()[: args.devices]), ("batch",))
            split = jax.shard_map(batch, mesh=mesh, in_specs=PartitionSpec("batch"),
                                  out_specs=PartitionSpec("batch"), check_vma=False)  # fmt: skip
            for size in (s for s in args.sizes if s % args.devices == 0):
                x = jax.device_put(qvel[:size], NamedSharding(mesh, PartitionSpec("batch")))
                add(f"batch {size} on {args.devices} devices", split, x, size)
    finally:
        (joint_run.BATCH_LANES_STEPPERS, joint_run.BATCH_LANES_CHUNK,
         joint_run.BATCH_LAST_STEPPERS) = saved  # fmt: skip
        jax.clear_caches()
    return programs


def _time(programs: dict, repeats: int) -> dict:
    import jax

    wall = {k: [] for k in programs}
    cpu = {k: [] for k in programs}
    for _ in range(repeats):
        for key, (fn, x, _, _) in programs.items():
            w, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(x))
            wall[key].append(time.perf_counter() - w)
            cpu[key].append(time.process_time() - c)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in programs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 16, 64, 256, 1024])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--integrator", default="rkmk", choices=("rk", "rkmk"))
    parser.add_argument("--vmap", action="store_true")
    parser.add_argument("--batch-last", action="store_true")
    parser.add_argument("--chunks", nargs="*", type=int, default=[])
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args(argv)
    if args.devices > 1:  # read when JAX starts its backend: nothing has run yet
        flag = f"--xla_force_host_platform_device_count={args.devices}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
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
            for key, (_, _, size, first) in programs.items():
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
                        "first_call_s": first,
                        "run": f"{when}, load {load}; {args.integrator}, {args.steps} steps, "
                        f"medians of {args.repeats}",
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
        "Medians of rounds that run every program of a model once; *vs single*: "
        "model-steps/s over the single model's steps/s, from wall time and from the "
        "process's CPU time (steadier on a loaded machine). Each row's *run* column: when "
        "its model was timed, the load then, the integrator, the steps per run and the "
        f"rounds (this run: {args.integrator!r}, {args.steps} steps, {args.repeats} rounds).",
        "",
        f"Machine load (1/5/15 min) {load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f} "
        f"at the start, {load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f} at the end "
        "(a shared 2-core CPU); a run with ``--models`` keeps the other models' rows.",
        "",
        "| model | program | members | model-steps/s | vs single | CPU-time model-steps/s "
        "| vs single (CPU time) | first call s | run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['program']} | {r['members']} | {r['model_steps_per_s']:,.0f} "
            f"| {r['vs_single']:.2f}x | {r['cpu_model_steps_per_s']:,.0f} "
            f"| {r['cpu_vs_single']:.2f}x | {r.get('first_call_s', float('nan')):.1f} "
            f"| {r.get('run', '')} |"
        )
    lines += [
        "",
        "*batch B*: the default program (the explicit steps' batches as per-member scalar "
        "code on tiles of 4 members, ``jaxmbd.compiled.batch_lanes``; a program too large for it, "
        "the humanoid's, is ``jax.vmap``'s own batching); *vmap B*: ``jax.vmap``'s own "
        "batching (``BATCH_LANES_STEPPERS = ()``, the members in every array's major axis); "
        "*batch-last B*: the members in every array's minor axis (``BATCH_LAST_STEPPERS``); "
        "*chunk k*: 1024 members, k tiles of 4 at a time; *on N devices*: the batch program "
        "split over N host devices (``shard_map``), one core each. *first call*: trace, "
        "compile and one run, wall time.",
    ]
    write_results("batch/batch_joint", rows, report="\n".join(lines) + "\n",
                  data={"args": vars(args)})  # fmt: skip


if __name__ == "__main__":
    main()
