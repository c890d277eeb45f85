"""CPU time per member of one batch's control steps under three schedules, in one process,
timed in alternation (medians of the process's CPU time, steadier than wall time on a
loaded machine): ``vmap`` of the environment's step as ``jax.vmap`` batches it (the
step's program without its batching rule), ``vmap`` of ``env.step`` (its rule: tiles of
members, or one member after another where the program is too large for them), and
``lax.map`` of the single step (the members one after another, ``VmapWrapper``'s
``member_chunk`` 1). Each program is ``lax.scan`` over ``--steps`` steps with fixed
random actions; the final states are compared.

    PYTHONPATH=$PWD python -m benchmarks.probes.env_step_tiles cartpole balance 256 [--steps 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

import jaxmbd as mbd


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("domain")
    p.add_argument("task")
    p.add_argument("batch", type=int)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--schedules", nargs="+", default=["vmap_plain", "vmap_rule", "map"])
    a = p.parse_args(argv)
    env = mbd.envs.make(a.domain, a.task)
    keys = jax.random.split(jax.random.PRNGKey(0), a.batch)
    state = jax.block_until_ready(jax.jit(jax.vmap(env.reset))(keys))
    actions = jax.random.uniform(jax.random.PRNGKey(1), (a.steps, a.batch, env.action_size),
                                 minval=-1.0, maxval=1.0)  # fmt: skip
    schedules = {
        "vmap_plain": jax.vmap(lambda s, u: env._step(env.sys, s, u)),
        "vmap_rule": jax.vmap(env.step),
        "map": lambda s, u: jax.lax.map(lambda x: env.step(*x), (s, u)),
    }
    compiled = {}
    for name in a.schedules:
        batched = schedules[name]

        @jax.jit
        def run(state, actions, batched=batched):
            return jax.lax.scan(lambda s, u: (batched(s, u), None), state, actions)[0]

        t0 = time.perf_counter()
        compiled[name] = run.lower(state, actions).compile()
        print(f"{name}: trace + compile {time.perf_counter() - t0:.1f} s", flush=True)
    cpu = {name: [] for name in compiled}
    outs = {}
    for _ in range(a.repeats):
        for name, run in compiled.items():
            c0 = time.process_time()
            outs[name] = jax.block_until_ready(run(state, actions))
            cpu[name].append(time.process_time() - c0)
    first = next(iter(outs.values()))
    base = statistics.median(cpu[a.schedules[0]])
    for name in compiled:
        med = statistics.median(cpu[name])
        pairs = zip(jax.tree.leaves(outs[name]), jax.tree.leaves(first), strict=True)
        diff = max(float(jnp.max(jnp.abs(x - y))) for x, y in pairs)
        print(f"{a.domain}/{a.task} batch {a.batch} {name}: {med / (a.batch * a.steps) * 1e6:.2f} "
              f"CPU-us per member-step, {base / med:.2f}x {a.schedules[0]}, "
              f"max |diff| {diff:.1e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
