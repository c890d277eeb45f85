"""Wall time for a trainer to reach a return on a task: jaxmbd's environment against MJX's
(MuJoCo Playground's environment of the same dm_control task: its reward code is
dm_control's, as jaxmbd's is), the same trainer, hyperparameters and seed.

    python -m benchmarks.rl.time_to_return [--trainers ppo es] [--envs cartpole-balance]
        [--backends jaxmbd mjx] [--target 800] [--steps 5000000]
        [--mjx-python /work/venvs/mjx/bin/python]

Each run is its own process, one at a time (``python -m benchmarks.rl.<trainer> --env ...
--backend ... --target ...``): jaxmbd's in this interpreter, MJX's in MJX's virtual
environment (which has no jaxmbd; it needs ``pip install playground optax evosax distrax
equinox matplotlib`` there, which keeps its JAX), both in float64. The time to the target
is the training calls' wall time up to the first evaluation at or above it, their first
compilation included (no persistent compilation cache on either side; ``first_call_s``:
the first call, compilation and one chunk); evaluations are excluded. ``mjx`` runs
Playground's environment with the suite file's RK4 (what jaxmbd runs), ``playground`` as
Playground ships it (semi-implicit Euler). Writes
``benchmarks/results/rl/time_to_return.{json,md,png}``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "rl"


def run(trainer: str, env: str, backend: str, args) -> dict:
    stem = RESULTS / f"time_{trainer}_{env}_{backend}"
    python = sys.executable if backend == "jaxmbd" else args.mjx_python
    cmd = [python, "-m", f"benchmarks.rl.{trainer}", "--env", env, "--backend", backend,
           "--target", str(args.target), "--steps", str(args.steps), "--seed", str(args.seed),
           "--out", str(stem.parent), "--name", stem.name, "--no-plot"]  # fmt: skip
    # every run compiles afresh: no persistent compilation cache (jaxmbd turns one on)
    environ = dict(os.environ, PYTHONPATH=str(ROOT), JAXMBD_NO_COMPILATION_CACHE="1",
                   JAX_ENABLE_COMPILATION_CACHE="false")  # fmt: skip
    load = os.getloadavg()[0]
    print(f"[{time.strftime('%H:%M:%S')}] load {load:.1f}: {shlex.join(cmd)}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return dict(trainer=trainer, env=env, backend=backend, failed=proc.stderr[-500:])
    return summary(stem, args.target, process_wall_s=wall, load_before=load,
                   command=shlex.join(cmd))  # fmt: skip


def summary(stem: Path, target: float, **extra) -> dict:
    """The row of one run from its result file ``<stem>.json``."""
    result = json.loads(stem.with_suffix(".json").read_text())
    curve = result["curve"]
    reached = next((p for p in curve if p["ret"] >= target), None)
    # the training rate once compiled: the calls after the first
    later = [p for p in curve if p["env_steps"] > curve[1]["env_steps"]] if len(curve) > 2 else []
    rate = None
    if later:
        rate = (later[-1]["env_steps"] - curve[1]["env_steps"]) / (
            later[-1]["train_s"] - curve[1]["train_s"]
        )
    return dict(
        trainer=result["trainer"],
        env=result["env"],
        backend=result["backend"],
        target=target,
        reached=reached is not None,
        time_to_target_s=reached["train_s"] if reached else None,
        env_steps_to_target=reached["env_steps"] if reached else None,
        first_call_s=curve[-1]["first_call_s"],
        steps_per_s_compiled=rate,
        final_return=curve[-1]["ret"],
        **extra,
        curve=curve,
        config=result["config"],
        versions=result["versions"],
    )


def report(rows: list[dict], args) -> str:
    lines = [
        f"# Time to a return of {args.target:g}: jaxmbd's environments against MJX's",
        "",
        "Regenerate: `python -m benchmarks.rl.time_to_return --trainers "
        + " ".join(dict.fromkeys(r["trainer"] for r in rows))
        + " --envs "
        + " ".join(dict.fromkeys(r["env"] for r in rows))
        + " --backends "
        + " ".join(dict.fromkeys(r["backend"] for r in rows))
        + f" --target {args.target:g}` (each row's own command is in time_to_return.json).",
        "",
        "| trainer | task | environment | time to target (s) | first call (s) | "
        "env steps to target | training env steps/s, compiled | final return | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['trainer']} | {r['env']} | {r['backend']} | failed | | | | | |")
            continue
        t = f"{r['time_to_target_s']:.1f}" if r["reached"] else "not reached"
        steps = f"{r['env_steps_to_target']:,}" if r["reached"] else "-"
        rate = r.get("steps_per_s_compiled")
        rate = f"{rate:,.0f}" if rate else "-"
        lines.append(
            f"| {r['trainer']} | {r['env']} | {r['backend']} | {t} | {r['first_call_s']:.1f} "
            f"| {steps} | {rate} | {r['final_return']:.0f} | {r['load_before']:.1f} |"
        )
    versions = {}
    for r in rows:
        if "versions" in r:
            v = {k: x for k, x in r["versions"].items() if k not in ("devices", "machine")}
            versions.setdefault(r["backend"], v)
    lines += [
        "",
        "Time to target: the training calls' wall time up to the first evaluation at or above "
        "the target, compilation included; first call: the first compiled call "
        "(compilation and one chunk of training); training env steps/s, compiled: the env "
        "steps of the later calls over their wall time (rollouts and updates). Load: the "
        "machine's 1-minute load average before the run (other work shares the CPU: times "
        "are noisy beyond about 1).",
        "Versions: "
        + "; ".join(f"{b}: {json.dumps(v, sort_keys=True)}" for b, v in versions.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainers", nargs="+", default=["ppo", "es"])
    parser.add_argument("--envs", nargs="+", default=["cartpole-balance"])
    parser.add_argument("--backends", nargs="+", default=["jaxmbd", "mjx"])
    parser.add_argument("--target", type=float, default=800.0)
    parser.add_argument("--steps", type=int, default=5_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mjx-python", default="/work/venvs/mjx/bin/python")
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the rows of time_to_return.json that these runs do not redo",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild the report from the runs' result files"
    )
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = RESULTS / "time_to_return.json"
    reuse = (args.add or args.report_only) and store.exists()
    rows = json.loads(store.read_text()) if reuse else []
    if args.report_only:
        keep = ("process_wall_s", "load_before", "command")

        def again(r):
            stem = RESULTS / f"time_{r['trainer']}_{r['env']}_{r['backend']}"
            return summary(stem, args.target, **{k: r[k] for k in keep})

        rows = [r if "failed" in r else again(r) for r in rows]
        store.write_text(json.dumps(rows, indent=1))
        args.envs = []
    for env in args.envs:
        for trainer in args.trainers:
            for backend in args.backends:
                row = run(trainer, env, backend, args)
                rows = [r for r in rows if (r["trainer"], r["env"], r["backend"])
                        != (trainer, env, backend)] + [row]  # fmt: skip
                store.write_text(json.dumps(rows, indent=1))
    args.envs = sorted({r["env"] for r in rows})
    (RESULTS / "time_to_return.md").write_text(report(rows, args))
    from benchmarks.rl._common import plot_curves  # noqa: PLC0415  (imports jaxmbd first)

    for env in args.envs:
        done = [r for r in rows if r["env"] == env and "failed" not in r]
        for r in done:
            r["label"] = f"{r['trainer']}, {r['backend']}"
        if done:
            plot_curves(done, RESULTS / f"time_to_return_{env}.png",
                        title=f"{env}: time to a return of {args.target:g}")  # fmt: skip
    print(report(rows, args))


if __name__ == "__main__":
    main()
