"""Environment throughput: env-steps per second of ``jaxmbd.envs`` tasks for batches of
1, 256 and 2048 members, compile time apart.

    python -m benchmarks.envs_throughput [--tasks cartpole/balance hopper/hop cheetah/run]
        [--sizes 1 256 2048] [--steps 100] [--repeats 3] [--contact soft|compliant]

One program per (task, batch size): ``lax.scan`` over ``--steps`` control steps of the
batched step (:class:`jaxmbd.envs.VmapWrapper`: ``vmap``, or the members one after another
where the env asks for it, ``env.member_chunk``) under random actions in [-1, 1] (one
draw per step, inside the program), from the batched reset's states. An env-step is one
member's control step (``env.n_substeps`` time steps of the model: cartpole 1 x RK4 at
10 ms, hopper 4 x Euler at 5 ms, cheetah 1 x Euler at 10 ms, on MuJoCo's constraint
model, the tasks' default; ``--contact compliant``: jaxmbd's compliant contact, with
``"implicitfast"`` for the contact tasks).
Reported: the first call (trace + compile + run) less the median run as ``compile_s``,
the median run, and ``steps_per_s`` = batch x steps / median run; the batched reset (its
own program, cheetah's settling steps included) likewise as ``reset_compile_s`` and
``reset_s``.

Writes benchmarks/results/envs_throughput/{envs_throughput.json, .md, .csv}.
"""

from __future__ import annotations

import argparse

import jax

import jaxmbd as mbd  # noqa: E402  (after the harness: its XLA settings first)
from benchmarks._harness import log, machine, repeat, seconds, timing_fields, write_results


def programs(env, batch: int, steps: int):
    """Jitted (key) -> batched states from resets, and (states, key) -> final rewards:
    ``steps`` batched control steps under random actions."""
    batched = mbd.envs.VmapWrapper(env)

    @jax.jit
    def reset(key):
        return batched.reset(jax.random.split(key, batch))

    @jax.jit
    def run(state, key):
        def one(state, k):
            a = jax.random.uniform(k, (batch, env.action_size), minval=-1.0, maxval=1.0)
            return batched.step(state, a), None

        state, _ = jax.lax.scan(one, state, jax.random.split(key, steps))
        return state.reward

    return batched, reset, run


def measure(task: str, sizes, steps: int, repeats: int, contact=None) -> list[dict]:
    domain, name = task.split("/")
    env = mbd.envs.make(domain, name, contact=contact)
    rows = []
    for batch in sizes:
        # resets are a program of their own (cheetah's settles 200 file steps): timed apart
        batched, reset, run = programs(env, batch, steps)
        key = jax.random.PRNGKey(0)
        reset_first = seconds(lambda reset=reset, key=key: reset(key))
        state = reset(key)
        jax.block_until_ready(state)
        reset_s = min(repeat(lambda reset=reset, key=key: reset(key), repeats))
        first = seconds(lambda run=run, state=state, key=key: run(state, key))
        runs = repeat(lambda run=run, state=state, key=key: run(state, key), repeats)
        row = {"task": task, "batch": batch, "steps": steps, "contact": env.contact,
               "integrator": env.integrator,
               "n_substeps": env.n_substeps, "member_chunk": str(batched.member_chunk),
               **timing_fields(first, runs)}  # fmt: skip
        row["reset_s"] = reset_s
        row["reset_compile_s"] = reset_first - reset_s
        row["steps_per_s"] = batch * steps / row["run_median_s"]
        log(f"{task} batch {batch}: {row['steps_per_s']:.4g} env-steps/s, compile "
            f"{row['compile_s']:.1f} s (reset {row['reset_compile_s']:.1f} s)")  # fmt: skip
        rows.append(row)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+",
                        default=["cartpole/balance", "hopper/hop", "cheetah/run"])  # fmt: skip
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 256, 2048])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--contact",
        default=None,
        choices=["soft", "compliant"],
        help="the tasks' physics (default: theirs, MuJoCo's constraint model)",
    )
    args = parser.parse_args(argv)
    log(machine())
    rows = [row for task in args.tasks for row in measure(task, args.sizes, args.steps,
                                                          args.repeats, args.contact)]  # fmt: skip
    columns = ["task", "batch", "steps", "contact", "integrator", "n_substeps",
               "member_chunk", "compile_s", "run_median_s", "reset_compile_s", "reset_s",
               "steps_per_s"]  # fmt: skip
    paths = write_results("envs_throughput/envs_throughput", rows, columns=columns,
                          title="jaxmbd.envs: env-steps per second (compile apart)")  # fmt: skip
    for path in paths:
        log(f"wrote {path}")


if __name__ == "__main__":
    main()
