"""Env-steps per second of one dm_control task on jaxmbd's environment or on MuJoCo
Playground's (MJX), through each side's brax training wrapper (vmap, time limit,
auto-reset), for one or more batch sizes: the program ``envs_throughput`` times, runnable in MJX's
virtual environment too (no jaxmbd import there).

    python -m benchmarks.probes.env_throughput_backends --env hopper-stand \\
        --backend jaxmbd|playground [--batch 1 256 2048] [--steps 10] [--repeats 2]

Prints one JSON line per batch size: the batched reset's first call and its median, the
first call (trace, compile, run), the median of the repeated
runs and ``steps_per_s`` = batch x steps / median, the runs' median CPU time of the
process (above the wall time where XLA runs a program's kernels on several threads), with
``uptime``'s load average."""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

from benchmarks.rl._common import ENVS, make_env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="hopper-stand", choices=list(ENVS))
    parser.add_argument("--backend", default="jaxmbd", choices=["jaxmbd", "mjx", "playground"])
    parser.add_argument("--batch", type=int, nargs="+", default=[2048])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--devices", type=int, default=1,
                        help="host devices (threads) to split the batch over")  # fmt: skip
    args = parser.parse_args(argv)
    if args.devices > 1:  # before anything starts JAX's backend
        flag = f"--xla_force_host_platform_device_count={args.devices}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    env, wrap = make_env(args.env, args.backend)
    batched = wrap(env, episode_length=1000, action_repeat=1)
    for batch in args.batch:
        print(json.dumps(measure(args, batched, env.action_size, batch)), flush=True)


def timed(f, *a):
    start = time.perf_counter()
    jax.block_until_ready(f(*a))
    return time.perf_counter() - start


def _split_over_devices(run, n: int, batch: int):
    """``run(state, key)`` with the batch split over ``n`` host devices by ``shard_map``
    (the same for both engines: each device steps its members through the wrapper)."""
    from jax.sharding import Mesh, PartitionSpec  # noqa: PLC0415

    mesh = Mesh(jax.devices()[:n], ("batch",))

    def spec(x):
        return (
            PartitionSpec("batch") if jax.numpy.ndim(x) and x.shape[0] == batch else PartitionSpec()
        )

    def split(state, key):
        specs = jax.tree.map(spec, state)
        split_run = jax.shard_map(run, mesh=mesh, in_specs=(specs, PartitionSpec()),
                                  out_specs=PartitionSpec("batch"), check_vma=False)  # fmt: skip
        return split_run(state, key)

    return jax.jit(split)


def measure(args, batched, size: int, batch: int) -> dict:
    def run(state, key):
        def one(state, k):
            # the members this device holds (all of them on one device)
            a = jax.random.uniform(k, (state.obs.shape[0], size), minval=-1.0, maxval=1.0)
            return batched.step(state, a), None

        state, _ = jax.lax.scan(one, state, jax.random.split(key, args.steps))
        return state.reward

    if args.devices > 1:
        run = _split_over_devices(run, args.devices, batch)

    run = jax.jit(run) if args.devices == 1 else run
    key = jax.random.PRNGKey(0)
    reset = jax.jit(batched.reset)
    keys = jax.random.split(key, batch)
    reset_first = timed(reset, keys)
    resets = sorted(timed(reset, keys) for _ in range(args.repeats))
    state = jax.block_until_ready(reset(keys))
    first = timed(run, state, key)
    cpu = []
    runs = []
    for _ in range(args.repeats):
        start = time.process_time()
        runs.append(timed(run, state, key))
        cpu.append(time.process_time() - start)
    runs, cpu = sorted(runs), sorted(cpu)
    median = runs[len(runs) // 2]
    return dict(env=args.env, backend=args.backend, batch=batch, steps=args.steps,
                devices=args.devices,
                reset_first_call_s=round(reset_first, 2),
                reset_s=round(resets[len(resets) // 2], 4), first_call_s=round(first, 2),
                run_median_s=round(median, 4), steps_per_s=round(batch * args.steps / median, 1),
                run_cpu_median_s=round(cpu[len(cpu) // 2], 4),
                load=os.getloadavg())  # fmt: skip


if __name__ == "__main__":
    main()
