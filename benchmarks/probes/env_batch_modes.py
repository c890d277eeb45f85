"""Env-steps/s of a task's batched step under different member schedules, in one process:
``lax.scan`` over ``steps`` control steps of ``VmapWrapper(env, member_chunk=c)`` (c 0: one
vmap over the batch; else lax.map over chunks of c), as ``benchmarks.envs_throughput``
times it; with whether XLA hoisted the time loop and its loops' sizes. The programs are
timed in alternation, by wall clock and by the process's CPU time (steadier on a loaded
machine, where a short run tends to finish within one time slice and a long one does not).

    PYTHONPATH=$PWD python -m benchmarks.probes.env_batch_modes cheetah run 256 0 1 [--steps 20]
        [--dump DIR] [--also-single]

``--also-single``: the unbatched program (batch 1, ``jax.vmap`` of one member) timed in the
same rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax

import jaxmbd as mbd
from jaxmbd.compiled.xla_flags import hoisted_sizes, loop_hoisted


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("domain")
    p.add_argument("task")
    p.add_argument("batch", type=int)
    p.add_argument("chunks", type=int, nargs="+")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dump", default=None)
    p.add_argument("--integrator", default=None)
    p.add_argument("--also-single", action="store_true")
    a = p.parse_args(argv)
    opts = {} if a.integrator is None else {"integrator": a.integrator}
    env = mbd.envs.make(a.domain, a.task, **opts)
    progs = {}
    cases = [(a.batch, c) for c in a.chunks] + ([(1, 0)] if a.also_single else [])
    for size, c in cases:
        batched = mbd.envs.VmapWrapper(env, member_chunk=None if c == 0 else c)
        reset = jax.jit(lambda key, b=batched, n=size: b.reset(jax.random.split(key, n)))

        @jax.jit
        def run(state, key, b=batched, n=size):
            def one(state, k):
                act = jax.random.uniform(k, (n, env.action_size), minval=-1.0, maxval=1.0)
                return b.step(state, act), None

            state, _ = jax.lax.scan(one, state, jax.random.split(key, a.steps))
            return state

        key = jax.random.PRNGKey(0)
        state = jax.block_until_ready(reset(key))
        t0 = time.perf_counter()
        compiled = run.lower(state, key).compile()
        tc = time.perf_counter() - t0
        text = compiled.as_text()
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            with open(f"{a.dump}/{a.domain}_{size}_c{c}.hlo", "w") as f:
                f.write(text)
        progs[size, c] = (compiled, state, key)
        print(f"batch {size} chunk {c}: compile {tc:.1f} s, time loop hoisted "
              f"{loop_hoisted(text, a.steps)}, hoisted loop sizes {hoisted_sizes(text)[:6]}",
              flush=True)  # fmt: skip
    times = {c: [] for c in progs}
    cpu = {c: [] for c in progs}
    outs = {}
    for _ in range(a.repeats):  # alternated
        for c, (compiled, state, key) in progs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            outs[c] = jax.block_until_ready(compiled(state, key))
            times[c].append(time.perf_counter() - t0)
            cpu[c].append(time.process_time() - c0)
    ref = None
    for (size, c), ts in times.items():
        med = statistics.median(ts)
        out = outs[size, c].pipeline_state
        diff = ""
        if size != a.batch:  # the single program: nothing to compare with
            pass
        elif ref is None:
            ref = out
        else:
            pairs = ((out.qpos, ref.qpos), (out.qvel, ref.qvel))
            d = max(float(abs(x - y).max()) for x, y in pairs)
            diff = f", max |diff| vs first {d:.2e}"
        cmed = statistics.median(cpu[size, c])
        print(f"{a.domain}/{a.task} batch {size} chunk {c}: {med * 1e3:.2f} ms, "
              f"{size * a.steps / med:.4g} env-steps/s (per CPU-s {size * a.steps / cmed:.4g})"
              f"{diff}  load {os.getloadavg()[0]:.2f}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
