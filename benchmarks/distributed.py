"""Batched simulation across processes (jax.distributed): model-steps/s for 1, 2, 4 processes.

    python -m benchmarks.distributed [--processes 1 2 4] [--batch 256] [--t-end 0.2]

Starts, for each process count P, P Python processes on this machine joined by
``jax.distributed.initialize`` (a coordinator on a free localhost port), each with one
device: one CPU device per process with gloo collectives on a CPU-only host, or one GPU per
process (``local_device_ids``) on a GPU host, where P may not exceed the GPU count. Every
process builds the same batch of ``--batch`` double pendulums (rod 2's mass varying, rA,
generalized-alpha, h = 1e-3) and calls ``mbd.simulate_batch(batch, devices=jax.devices())``
exactly as a user would: the batch is split over the P devices, each runs its members with
no communication, and the result comes back either gathered in every process
(``gather=True``, the default: an all-gather of the whole Solution) or left where it was
computed (``gather=False``). On a CPU host one more row runs one process with two CPU
devices (``jax_num_cpu_devices``; no gloo, no distributed runtime), the single-machine
baseline of ``batch.py``.

Per configuration: the first call (compile + run) and the median of ``--repeats`` timed
calls, each between two barriers (``multihost_utils.sync_global_devices``), so a time is the
slowest process's. model-steps/s = batch x steps / median. Results go to
benchmarks/results/bench_distributed.md (``--out``), with the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

# not benchmarks._harness at the top: it imports jaxmbd, which a worker imports only after
# jax.distributed.initialize
RESULTS = Path(__file__).resolve().parent / "results" / "bench_distributed.md"


# --------------------------------------------------------------------------------------
# One process of a configuration
# --------------------------------------------------------------------------------------


def worker(args) -> None:
    import jax

    gpu = args.platform == "gpu"
    if not gpu:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", args.devices_per_process)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.nproc > 1:
        first = args.pid * args.devices_per_process
        jax.distributed.initialize(
            f"127.0.0.1:{args.port}",
            num_processes=args.nproc,
            process_id=args.pid,
            local_device_ids=list(range(first, first + args.devices_per_process)) if gpu else None,
            initialization_timeout=300,
        )
    import equinox as eqx
    import numpy as np
    from jax.experimental import multihost_utils

    import jaxmbd as mbd

    # one process alone sees every GPU of the host: it takes its share, like the others
    devices = jax.devices() if args.nproc > 1 else jax.devices()[: args.devices_per_process]
    assert len(devices) == args.nproc * args.devices_per_process, devices
    model = mbd.models.double_pendulum()
    batch = mbd.stack_models([model] * args.batch)
    rod2 = np.linspace(30.0, 48.0, args.batch)
    scale = np.stack([np.ones(args.batch), rod2 / float(model.mass[1])], axis=1)
    batch = eqx.tree_at(
        lambda b: (b.mass, b.inertia),
        batch,
        (model.mass * scale, model.inertia * scale[..., None, None]),
    )
    opts = dict(t_end=args.t_end, h=1e-3)
    steps = round(args.t_end / 1e-3)

    def barrier():
        if args.nproc > 1:
            multihost_utils.sync_global_devices("bench")

    out = {}
    for gather in (True, False) if args.nproc > 1 else (True,):

        def run(gather=gather):
            sol = mbd.simulate_batch(batch, devices=devices, gather=gather, **opts)
            jax.block_until_ready((sol.r, sol.status))
            return sol

        barrier()
        start = time.perf_counter()
        sol = run()
        barrier()
        first = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            barrier()
            start = time.perf_counter()
            run()
            barrier()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        out["gather" if gather else "local"] = dict(
            first_s=first,
            median_s=median,
            min_s=min(times),
            max_s=max(times),
            model_steps_per_s=args.batch * steps / median,
        )
        if gather:
            status = np.asarray(sol.status)
            out["failed_members"] = int((status != 0).any(axis=1).sum())
    if args.pid == 0:
        out.update(
            processes=args.nproc,
            devices=len(devices),
            device_kind=devices[0].device_kind,
            batch=args.batch,
            steps=steps,
        )
        print("RESULT " + json.dumps(out), flush=True)


# --------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe() -> tuple[str, int, str]:
    """(platform, accelerator count, device kind) of this host, in a throwaway process (the
    workers must configure JAX before it starts its backend)."""
    code = (
        "import jax, json; d = jax.devices(); "
        "print(json.dumps([jax.default_backend(), len(d), d[0].device_kind]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    backend, count, kind = json.loads(out.stdout.strip().splitlines()[-1])
    return ("gpu" if backend in ("gpu", "cuda", "rocm") else "cpu"), count, kind


def launch(nproc: int, devices_per_process: int, args, platform: str) -> dict:
    """Run one configuration: nproc workers; kill them all if one fails or time runs out."""
    port = _free_port()
    from benchmarks._harness import child

    cmd, env = child(__spec__.name, "--worker", "--nproc", nproc, "--port", port,
                     "--platform", platform, "--devices-per-process", devices_per_process,
                     "--batch", args.batch, "--t-end", args.t_end,
                     "--repeats", args.repeats)  # fmt: skip
    procs = [
        subprocess.Popen(
            cmd + ["--pid", str(k)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if k else None,
            env=env,
            text=True,
        )
        for k in range(nproc)
    ]
    try:
        out, _ = procs[0].communicate(timeout=args.timeout)
        for p in procs[1:]:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        raise RuntimeError(f"{nproc} processes: exit codes {[p.returncode for p in procs]}")
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"
    except OSError:
        return "load average unknown"


def report(rows: list[dict], args, platform: str, kind: str, loads: tuple[str, str]) -> str:
    from benchmarks._harness import machine

    base = rows[0]["gather"]["model_steps_per_s"]
    lines = [
        "# Batched simulation across processes (jax.distributed)",
        "",
        f"`python -m benchmarks.distributed --processes "
        f"{' '.join(map(str, args.processes))} --batch {args.batch} --t-end {args.t_end} "
        f"--repeats {args.repeats}`",
        "",
        f"Machine: {machine()}; {platform} devices: {kind}. Load before the runs: {loads[0]}; "
        f"after: {loads[1]}.",
        "",
        f"Double pendulum (rA, generalized-alpha, h = 1e-3, {rows[0]['steps']} steps), batch "
        f"{args.batch}, rod 2's mass varying over the batch. Median of {args.repeats} calls "
        "after the first (compile + run), each between two barriers. `gathered`: the "
        "default, every process gets the whole Solution (an all-gather); `local`: "
        "`gather=False`, each process keeps its own members.",
        "",
        "| processes x devices | first call (s) | gathered: median (best) s | gathered: "
        "model-steps/s, median (best) | local: median (best) s | local: model-steps/s, median "
        "(best) | gathered vs 1 x 1, median (best) |",
        "|---|---|---|---|---|---|---|",
    ]
    work = rows[0]["batch"] * rows[0]["steps"]
    best = work / rows[0]["gather"]["min_s"]

    def cells(t):
        if t is None:
            return "- | -"
        return (
            f"{t['median_s']:.3f} ({t['min_s']:.3f}) | {work / t['median_s'] / 1e3:.0f}k "
            f"({work / t['min_s'] / 1e3:.0f}k)"
        )

    for r in rows:
        g = r["gather"]
        lines.append(
            f"| {r['processes']} x {r['devices'] // r['processes']} | {g['first_s']:.1f} | "
            f"{cells(g)} | {cells(r.get('local'))} | {work / g['median_s'] / base:.2f} "
            f"({work / g['min_s'] / best:.2f}) |"
        )
    lines += [
        "",
        "Why it scales this way: each process runs its share of the batch on its own device,",
        "with no communication during the steps, so P processes can at best run P times as",
        "fast, and only while each has hardware of its own (a core per CPU device, a GPU",
        "each). Beyond that they share the cores and gain nothing. The default `gather=True`",
        "adds one all-gather of the whole Solution after the run, and on a CPU gloo",
        "moves it through the host's memory and sockets: the `local` columns",
        "(`gather=False`) are the same runs without it.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--t-end", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per config")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pid", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--nproc", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--platform", default="cpu", help=argparse.SUPPRESS)
    parser.add_argument("--devices-per-process", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    platform, count, kind = _probe()
    configs = []
    for p in args.processes:
        if platform == "gpu" and p > count:
            print(f"skipping {p} processes: {count} GPUs (one per process)")
            continue
        configs.append((p, 1))
    if platform == "cpu":  # the single-process, two-device baseline (batch.py's)
        configs.insert(1, (1, 2))
    elif count > 1:
        configs.insert(1, (1, count))
    loads = [_load()]
    rows = []
    for p, d in configs:
        print(f"{p} process(es) x {d} device(s) ...", flush=True)
        rows.append(launch(p, d, args, platform))
        print(json.dumps(rows[-1]), flush=True)
    loads.append(_load())
    text = report(rows, args, platform, kind, tuple(loads))
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
