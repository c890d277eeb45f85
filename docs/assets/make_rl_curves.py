"""The learning curves of docs/guide/reinforcement_learning.md: evolution strategies, PPO
and analytic policy gradients on jaxmbd's cart-pole balance and swing-up, and PPO on the
hopper, with the trainers of ``benchmarks/rl/`` at their command-line defaults.

    python docs/assets/make_rl_curves.py [--only cartpole-balance cartpole-swingup hopper-stand]
        [--trainers es ppo apg]

Writes ``docs/assets/rl_<task>.png`` and the curves with their configurations to
``docs/assets/rl_curves.json`` (per task, the curves of the trainers run are replaced,
the others kept)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root: benchmarks/

from benchmarks.rl import apg, es, ppo  # noqa: E402  (imports jaxmbd first)
from benchmarks.rl._common import make_env, plot_curves  # noqa: E402

#: per task: (trainer, configuration, env steps at most)
RUNS = {
    "cartpole-balance": [
        ("es", es.ESConfig(), 1_500_000),
        ("ppo", ppo.PPOConfig(), 1_500_000),
        ("apg", apg.APGConfig(), 400_000),
    ],
    "cartpole-swingup": [
        ("es", es.ESConfig(), 4_000_000),
        ("ppo", ppo.PPOConfig(), 4_000_000),
        ("apg", apg.APGConfig(), 2_000_000),
    ],
    "hopper-stand": [
        ("ppo", ppo.PPOConfig(), 5_000_000),
    ],
}


def run(task: str, trainer: str, config, steps: int) -> dict:
    env, wrap = make_env(task, "jaxmbd")
    print(f"{task}: {trainer} {config}", flush=True)
    if trainer == "es":
        _, curve = es.train(env, config, max_env_steps=steps)
    elif trainer == "ppo":
        _, curve = ppo.train(env, wrap, config, max_env_steps=steps)
    else:
        _, curve = apg.train(env, wrap, config, max_env_steps=steps)
    return dict(trainer=trainer, env=task, backend="jaxmbd", label=trainer.upper(),
                config=dataclasses.asdict(config), curve=curve, target=None)  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--trainers", nargs="+", default=["es", "ppo", "apg"])
    args = parser.parse_args(argv)
    store = HERE / "rl_curves.json"
    saved = json.loads(store.read_text()) if store.exists() else {}
    for task in args.only:
        new = {r[0]: run(task, *r) for r in RUNS[task] if r[0] in args.trainers}
        old = {c["trainer"]: c for c in saved.get(task, [])}
        order = [r[0] for r in RUNS[task]]
        saved[task] = [new.get(t) or old[t] for t in order if t in new or t in old]
        store.write_text(json.dumps(saved, indent=1))
        name = task.replace("-", "_")
        plot_curves(saved[task], HERE / f"rl_{name}.png",
                    title=f"jaxmbd's {task}: evaluation return")  # fmt: skip


if __name__ == "__main__":
    main()
