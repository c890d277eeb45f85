"""Env-steps per second of one dm_control task on jaxmbd's environment or on MuJoCo
Playground's (MJX), through each side's brax training wrapper (vmap, time limit,
auto-reset), one batch size: the program ``envs_throughput`` times, runnable in MJX's
virtual environment too (no jaxmbd import there).

    python -m benchmarks.probes.env_throughput_backends --env hopper-stand \\
        --backend jaxmbd|playground [--batch 2048] [--steps 10] [--repeats 2]

Prints one JSON line: the first call (trace, compile, run), the median of the repeated
runs and ``steps_per_s`` = batch x steps / median, with ``uptime``'s load average."""

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
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    env, wrap = make_env(args.env, args.backend)
    batched = wrap(env, episode_length=1000, action_repeat=1)
    size = env.action_size

    @jax.jit
    def run(state, key):
        def one(state, k):
            a = jax.random.uniform(k, (args.batch, size), minval=-1.0, maxval=1.0)
            return batched.step(state, a), None

        state, _ = jax.lax.scan(one, state, jax.random.split(key, args.steps))
        return state.reward

    key = jax.random.PRNGKey(0)
    state = jax.block_until_ready(jax.jit(batched.reset)(jax.random.split(key, args.batch)))
    start = time.perf_counter()
    jax.block_until_ready(run(state, key))
    first = time.perf_counter() - start
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(run(state, key))
        runs.append(time.perf_counter() - start)
    median = sorted(runs)[len(runs) // 2]
    print(json.dumps(dict(env=args.env, backend=args.backend, batch=args.batch, steps=args.steps,
                          first_call_s=round(first, 2), run_median_s=round(median, 3),
                          steps_per_s=round(args.batch * args.steps / median, 1),
                          load=os.getloadavg())))  # fmt: skip


if __name__ == "__main__":
    main()
