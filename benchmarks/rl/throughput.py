"""Env-steps per second of the training environments, jaxmbd's against MuJoCo Playground's,
as a trainer steps them: the training wrapper (vmap, time limit, auto-reset; jaxmbd's
``mbd.envs.wrap``, Playground's ``wrap_for_brax_training``) over a batch of members, under
uniform random actions in [-1, 1].

    python -m benchmarks.rl.throughput [--envs cheetah-run humanoid-stand]
        [--batches 1 256 2048] [--steps 100] [--repeats 3]
        [--mjx-python /work/venvs/mjx/bin/python] [--playground-float32]

Each (task, batch) runs in both backends in turn, each in a process of its own (``--one
BACKEND TASK BATCH``: jaxmbd's in this interpreter, Playground's in MJX's virtual
environment, set up as :mod:`benchmarks.rl.time_to_return` says), jaxmbd first, then
Playground, task by task and batch by batch, so that a drift of the machine's load falls
on both. A process builds the wrapped environment, resets the batch, and compiles one
``lax.scan`` over ``--steps`` control steps; ``compile_s`` is its first call less the
median run, compiled afresh (no persistent compilation cache on either side);
``steps_per_s`` = batch x steps / the median of ``--repeats`` runs. Both
compute in float64 (:mod:`benchmarks.rl._common`), unless ``--playground-float32``: then
Playground's rows (``mjx`` and ``playground``) compute in float32, its native precision
(``jax_enable_x64`` off before its environment is built), jaxmbd's stay in float64; each
row's ``dtype`` is its reward's. Playground's environments run as it ships them (its
copies of the suite files). Writes
``benchmarks/results/rl/throughput.{json,md}``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "rl"


def one(
    backend: str, name: str, batch: int, steps: int, repeats: int, playground_float32=False
) -> dict:
    """One (backend, task, batch) row, measured in this process; ``playground_float32``:
    Playground's backends in float32 (jaxmbd's unaffected)."""
    import jax  # noqa: PLC0415

    from benchmarks.rl._common import make_env  # noqa: PLC0415  (sets float64)

    if playground_float32 and backend != "jaxmbd":
        jax.config.update("jax_enable_x64", False)  # Playground's native precision
    start = time.perf_counter()
    env, wrap = make_env(name, backend)
    wrapped = wrap(env, episode_length=1000)
    build_s = time.perf_counter() - start
    state = jax.jit(wrapped.reset)(jax.random.split(jax.random.PRNGKey(0), batch))
    jax.block_until_ready(state)

    @jax.jit
    def run(state, key):
        def step(state, k):
            action = jax.random.uniform(k, (batch, env.action_size), minval=-1.0, maxval=1.0)
            state = wrapped.step(state, action)
            return state, state.reward

        state, rewards = jax.lax.scan(step, state, jax.random.split(key, steps))
        return state, rewards.sum()

    times = []
    for k in range(repeats + 1):
        start = time.perf_counter()
        jax.block_until_ready(run(state, jax.random.PRNGKey(k)))
        times.append(time.perf_counter() - start)
    median = sorted(times[1:])[len(times[1:]) // 2]
    return {"backend": backend, "task": name, "batch": batch, "steps": steps,
            "build_s": build_s, "compile_s": times[0] - median, "run_s": median,
            "steps_per_s": batch * steps / median, "dtype": str(state.reward.dtype),
            "load": os.getloadavg()[0]}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["cheetah-run", "humanoid-stand"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 256, 2048])
    parser.add_argument("--backends", nargs="+", default=["jaxmbd", "playground"])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mjx-python", default="/work/venvs/mjx/bin/python")
    parser.add_argument("--one", nargs=3, metavar=("BACKEND", "TASK", "BATCH"),
                        help="measure one row in this process and print it as JSON")  # fmt: skip
    parser.add_argument("--playground-float32", action="store_true",
                        help="Playground's rows in float32, its native precision (default: "
                        "float64 as jaxmbd's)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.one:
        backend, name, batch = args.one
        row = one(backend, name, int(batch), args.steps, args.repeats, args.playground_float32)
        print(json.dumps(row))
        return
    rows = []
    # every process compiles afresh: no persistent compilation cache (jaxmbd turns one on,
    # and Playground's programs would come from an earlier run)
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "JAXMBD_NO_COMPILATION_CACHE": "1",
               "JAX_ENABLE_COMPILATION_CACHE": "false"}  # fmt: skip
    for name in args.envs:
        for batch in args.batches:
            for backend in args.backends:
                python = sys.executable if backend == "jaxmbd" else args.mjx_python
                cmd = [python, "-m", "benchmarks.rl.throughput", "--one", backend, name,
                       str(batch), "--steps", str(args.steps),
                       "--repeats", str(args.repeats)]  # fmt: skip
                if args.playground_float32:
                    cmd.append("--playground-float32")
                proc = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True)
                if proc.returncode:
                    print(proc.stderr[-2000:], file=sys.stderr)
                    rows.append({"backend": backend, "task": name, "batch": batch,
                                 "error": proc.stderr.strip().splitlines()[-1:]})  # fmt: skip
                    continue
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "throughput.json").write_text(json.dumps({"args": vars(args), "rows": rows},
                                                        indent=1))  # fmt: skip
    lines = [
        "| task | batch | backend | env-steps/s | compile (s) | load |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['task']} | {r['batch']} | {r['backend']} | failed: {r['error']} | | |"
            )
            continue
        backend = r["backend"] + (" (float32)" if r.get("dtype") == "float32" else "")
        lines.append(f"| {r['task']} | {r['batch']} | {backend} | {r['steps_per_s']:,.0f} | "
                     f"{r['compile_s']:.1f} | {r['load']:.1f} |")  # fmt: skip
    command = "python -m benchmarks.rl.throughput " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    (RESULTS / "throughput.md").write_text(
        "# Env-steps per second: jaxmbd's environments against MuJoCo Playground's\n\n"
        f"Regenerate: `{command.strip()}` (from the repository root).\n\n" + "\n".join(lines) + "\n"
    )


if __name__ == "__main__":
    main()
