"""What brax's training wrappers cost on top of the batched physics: env-steps/s of
``VmapWrapper(env)`` against ``wrap(env)`` (time limit and auto-reset added), both timed in
alternation in one process, by wall clock and by CPU time.

    PYTHONPATH=$PWD python -m benchmarks.probes.env_wrapper_cost cartpole balance 256 [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax

import jaxmbd as mbd


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("domain")
    p.add_argument("task")
    p.add_argument("batch", type=int)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args(argv)
    env = mbd.envs.make(a.domain, a.task)
    progs = {}
    for name, batched in (("vmap", mbd.envs.VmapWrapper(env)), ("wrap", mbd.envs.wrap(env))):

        @jax.jit
        def run(state, key, b=batched):
            def one(state, k):
                act = jax.random.uniform(k, (a.batch, env.action_size), minval=-1.0, maxval=1.0)
                return b.step(state, act), None

            return jax.lax.scan(one, state, jax.random.split(key, a.steps))[0].reward

        key = jax.random.PRNGKey(0)
        state = jax.block_until_ready(jax.jit(batched.reset)(jax.random.split(key, a.batch)))
        progs[name] = (run.lower(state, key).compile(), state, key)
    wall = {n: [] for n in progs}
    cpu = {n: [] for n in progs}
    for _ in range(a.repeats):
        for n, (compiled, state, key) in progs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(compiled(state, key))
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append(time.process_time() - c0)
    for n in progs:
        w, c = statistics.median(wall[n]), statistics.median(cpu[n])
        steps = a.batch * a.steps
        print(f"{a.domain}/{a.task} batch {a.batch} {n}: {steps / w:.4g} env-steps/s "
              f"(per CPU-s {steps / c:.4g})  load {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
