"""What the trainers of this folder share: environments by name (jaxmbd's, or MuJoCo
Playground's MJX environment of the same dm_control task), deterministic policies (equinox
MLPs), the evaluation of a policy over whole episodes, the loop that trains until an
evaluation reaches a target return, and learning curves (JSON lines appended as the run
goes, JSON and PNG, in an ``--out`` folder under the current directory).

The same trainer runs unchanged in MJX's virtual environment, which has no jaxmbd, on
Playground's environment (``time_to_return.py``), with the repository root on
``PYTHONPATH`` (``benchmarks/__init__.py`` imports nothing)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

# both backends in float64: jaxmbd's environments compute in it, so MJX does too
jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

#: name -> (dm_control domain, task, MuJoCo Playground's registry name)
ENVS = {
    "cartpole-balance": ("cartpole", "balance", "CartpoleBalance"),
    "cartpole-swingup": ("cartpole", "swingup", "CartpoleSwingup"),
    "pendulum-swingup": ("pendulum", "swingup", "PendulumSwingup"),
    "acrobot-swingup": ("acrobot", "swingup", "AcrobotSwingup"),
    "reacher-easy": ("reacher", "easy", "ReacherEasy"),
    "hopper-stand": ("hopper", "stand", "HopperStand"),
    "hopper-hop": ("hopper", "hop", "HopperHop"),
    "cheetah-run": ("cheetah", "run", "CheetahRun"),
    "walker-stand": ("walker", "stand", "WalkerStand"),
    "walker-walk": ("walker", "walk", "WalkerWalk"),
    "walker-run": ("walker", "run", "WalkerRun"),
    "humanoid-stand": ("humanoid", "stand", "HumanoidStand"),
    "humanoid-walk": ("humanoid", "walk", "HumanoidWalk"),
    "humanoid-run": ("humanoid", "run", "HumanoidRun"),
}

BACKENDS = ("jaxmbd", "mjx", "playground")


def make_env(name: str, backend: str = "jaxmbd"):
    """``(env, wrap)``: the unwrapped brax-style environment of the task ``name`` (a key of
    :data:`ENVS`) and its training wrapper (brax's pattern ``wrap(env, episode_length,
    action_repeat)``: vmap, time limit, auto-reset to the cached first state).

    * ``"jaxmbd"``: ``jaxmbd.envs.make(domain, task)`` and ``jaxmbd.envs.wrap``;
    * ``"playground"``: MuJoCo Playground's environment as shipped
      (``mujoco_playground.registry.load``, MJX's JAX implementation, Playground's copy of
      the suite file: semi-implicit Euler, one solver iteration), the same dm_control
      reward code, and ``mujoco_playground.wrapper.wrap_for_brax_training``;
    * ``"mjx"``: the same with the suite file's own integrator (dm_control's
      ``cartpole.xml``: RK4), the one jaxmbd's environment runs."""
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(ENVS)}")
    domain, task, playground_name = ENVS[name]
    if backend == "jaxmbd":
        import jaxmbd as mbd  # noqa: PLC0415  (absent from MJX's environment)

        return mbd.envs.make(domain, task), mbd.envs.wrap
    if backend in ("mjx", "playground"):
        import mujoco  # noqa: PLC0415  (MJX's environment)
        from mujoco import mjx  # noqa: PLC0415
        from mujoco_playground import registry, wrapper  # noqa: PLC0415

        env = registry.load(playground_name, config_overrides={"impl": "jax"})
        if backend == "mjx" and domain == "cartpole":
            env._mj_model.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
            env._mjx_model = mjx.put_model(env._mj_model, impl="jax")
        return env, wrapper.wrap_for_brax_training
    raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


def orthogonal_mlp(mlp: eqx.nn.MLP, key, *, hidden_scale: float, out_scale: float):
    """``mlp`` with orthogonal weights (gain ``hidden_scale`` for the hidden layers,
    ``out_scale`` for the last) and zero biases: PureJaxRL's initialisation
    (``flax.linen.initializers.orthogonal``, Saxe et al. 2014)."""
    keys = jax.random.split(key, len(mlp.layers))
    layers = []
    for i, (layer, k) in enumerate(zip(mlp.layers, keys, strict=True)):
        gain = out_scale if i == len(mlp.layers) - 1 else hidden_scale
        w = jax.nn.initializers.orthogonal(gain)(k, layer.weight.shape, layer.weight.dtype)
        layer = eqx.tree_at(lambda m: m.weight, layer, w)
        layer = eqx.tree_at(lambda m: m.bias, layer, jnp.zeros_like(layer.bias))
        layers.append(layer)
    return eqx.tree_at(lambda m: m.layers, mlp, tuple(layers))


class Policy(eqx.Module):
    """A deterministic policy: ``tanh(MLP(obs))``, actions in the actuators' [-1, 1]."""

    mlp: eqx.nn.MLP

    def __init__(self, obs_size: int, action_size: int, key, *, width: int = 32, depth: int = 1):
        mlp = eqx.nn.MLP(obs_size, action_size, width, depth, activation=jnp.tanh, key=key)
        self.mlp = orthogonal_mlp(mlp, key, hidden_scale=float(np.sqrt(2)), out_scale=0.01)

    def __call__(self, obs):
        return jnp.tanh(self.mlp(obs))


def episode_returns(env, act: Callable, rng, *, episodes: int, length: int):
    """The returns of ``episodes`` episodes of ``length`` control steps of the unwrapped
    ``env`` under the deterministic ``act(obs)``, each from its own reset of ``rng``;
    the rewards after an early ``done`` do not count. The batch as the env asks for
    (``member_chunk`` 1: the members one after another, else ``vmap``)."""
    if getattr(env, "member_chunk", None) == 1:
        batched = lambda f: lambda *a: jax.lax.map(lambda x: f(*x), a)  # noqa: E731
    else:
        batched = jax.vmap
    state = batched(env.reset)(jax.random.split(rng, episodes))
    zero = jnp.zeros(episodes, state.reward.dtype)

    def step(carry, _):
        state, alive, total = carry
        state = batched(env.step)(state, jax.vmap(act)(state.obs))
        total = total + alive * state.reward
        return (state, alive * (1 - state.done), total), None

    (_, _, total), _ = jax.lax.scan(step, (state, zero + 1, zero), None, length)
    return total


def run_until(
    *,
    step: Callable,
    evaluate: Callable,
    carry,
    env_steps_per_call: int,
    max_env_steps: int,
    target: float | None,
    log: Callable = print,
    on_point: Callable[[dict], None] | None = None,
) -> tuple[Any, list[dict]]:
    """Calls ``carry = step(carry)`` (a compiled chunk of training) until ``max_env_steps``
    environment steps or until ``evaluate(carry)`` (the mean evaluation return, run after
    every call and at the start) reaches ``target``. Returns the carry and the learning
    curve: per evaluation the env steps, the training wall time (``train_s``: the steps'
    calls, their first compilation included; evaluations excluded), the first call's time
    (``first_call_s``) and the return. ``on_point(point)``: called with each evaluation as
    it is made (:class:`ProgressFile` appends it to the results), so a run cut short keeps
    its curve."""
    curve = []
    train_s = 0.0
    first_call_s = None
    env_steps = 0
    while True:
        start = time.perf_counter()
        ret = float(evaluate(carry))
        eval_s = time.perf_counter() - start
        point = dict(env_steps=env_steps, train_s=train_s, eval_s=eval_s, ret=ret,
                     first_call_s=first_call_s)  # fmt: skip
        curve.append(point)
        if on_point is not None:
            on_point(point)
        log(f"env steps {env_steps:>10d}  train {train_s:7.1f} s  return {ret:8.1f}")
        if (target is not None and ret >= target) or env_steps >= max_env_steps:
            break
        start = time.perf_counter()
        carry = jax.block_until_ready(step(carry))
        elapsed = time.perf_counter() - start
        first_call_s = elapsed if first_call_s is None else first_call_s
        train_s += elapsed
        env_steps += env_steps_per_call
    for point in curve:
        point["first_call_s"] = first_call_s
    return carry, curve


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="cartpole-balance", choices=list(ENVS))
    parser.add_argument("--backend", default="jaxmbd", choices=BACKENDS)
    parser.add_argument("--steps", type=int, default=2_000_000, help="env steps at most")
    parser.add_argument("--target", type=float, default=None, help="stop at this return")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--episode-length", type=int, default=1000)
    parser.add_argument("--out", default="rl_results",
                        help="folder of the results (default: rl_results, under the current "
                        "directory)")  # fmt: skip
    parser.add_argument(
        "--name", default=None, help="the results' file name (default: <trainer>_<env>_<backend>)"
    )
    parser.add_argument("--no-plot", action="store_true")


def add_config_arguments(parser: argparse.ArgumentParser, config_class) -> None:
    """A flag ``--<field>`` for each field of the dataclass ``config_class`` but
    ``episode_length`` (a common argument): a switch for a bool, else its type with the
    class's default."""
    defaults = config_class()
    for field in dataclasses.fields(config_class):
        if field.name == "episode_length":
            continue
        flag = "--" + field.name.replace("_", "-")
        if field.type == "bool":
            parser.add_argument(flag, action="store_true")
        else:
            kind = {"int": int, "float": float}[field.type]
            parser.add_argument(flag, type=kind, default=getattr(defaults, field.name))


def config_of(args: argparse.Namespace, config_class):
    """The ``config_class`` of the parsed flags of :func:`add_config_arguments`."""
    options = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_class)
               if f.name != "episode_length"}  # fmt: skip
    return config_class(episode_length=args.episode_length, **options)


def mean_return(env, act_of: Callable, *, episodes: int, length: int, seed: int = 1234):
    """``evaluate(params) -> mean return`` of the policy ``act_of(params)`` over fixed
    held-out resets (compiled)."""
    rng = jax.random.PRNGKey(seed)

    @jax.jit
    def evaluate(params):
        act = act_of(params)
        return jnp.mean(episode_returns(env, act, rng, episodes=episodes, length=length))

    return evaluate


class ProgressFile:
    """A run's results in the folder ``args.out`` (relative: to the current directory), as
    it goes: ``<name>.jsonl`` gets one line per evaluation when it is made (the run's
    header first), ``<name>.json`` is rewritten with the curve so far (the flags,
    configuration, versions, command), and :meth:`finish` adds the plot ``<name>.png``
    (return against env steps and against training wall time). ``<name>``: ``args.name``,
    else ``<trainer>_<env>_<backend>``."""

    def __init__(self, trainer: str, args: argparse.Namespace, config):
        name = args.name or f"{trainer}_{args.env}_{args.backend}"
        self.stem = Path(args.out) / name
        self.stem.parent.mkdir(parents=True, exist_ok=True)
        self.plot = not args.no_plot
        self.result = dict(trainer=trainer, env=args.env, backend=args.backend,
                           target=args.target, config=dataclasses.asdict(config),
                           seed=args.seed, versions=versions(),
                           command=shlex.join([sys.executable, *sys.argv]), curve=[])  # fmt: skip
        header = {k: v for k, v in self.result.items() if k != "curve"}
        self.stem.with_suffix(".jsonl").write_text(json.dumps(header) + "\n")
        self._write()

    def _write(self) -> None:
        path = self.stem.with_suffix(".json")
        partial = path.with_suffix(".json.part")
        partial.write_text(json.dumps(self.result, indent=1))
        partial.replace(path)  # a reader never sees half a file

    def add(self, point: dict) -> None:
        """Append one evaluation (``run_until``'s ``on_point``)."""
        self.result["curve"].append(dict(point))
        with self.stem.with_suffix(".jsonl").open("a") as f:
            f.write(json.dumps(point) + "\n")
        self._write()

    def finish(self, curve: list[dict]) -> Path:
        """The final curve (every point with the run's ``first_call_s``) and the plot."""
        self.result["curve"] = curve
        self._write()
        if self.plot:
            plot_curves([self.result], self.stem.with_suffix(".png"))
        print(f"wrote {self.stem.with_suffix('.json')}")
        return self.stem.with_suffix(".json")


def versions() -> dict:
    import importlib.metadata as md  # noqa: PLC0415

    out = dict(python=platform.python_version(), machine=platform.processor() or "")
    for package in ("jax", "jaxlib", "equinox", "optax", "evosax", "distrax", "mujoco",
                    "mujoco-mjx", "playground"):  # fmt: skip
        try:
            out[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    out["devices"] = [str(d) for d in jax.devices()]
    out["cpus"] = os.cpu_count()
    return out


def plot_curves(results: list[dict], png: Path, *, title: str | None = None) -> None:
    """Return against env steps (left) and against training wall time (right), one line
    per result."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    for r in results:
        label = r.get("label") or f"{r['trainer']} {r['backend']}"
        steps = [p["env_steps"] for p in r["curve"]]
        wall = [p["train_s"] for p in r["curve"]]
        ret = [p["ret"] for p in r["curve"]]
        a.plot(steps, ret, marker=".", label=label)
        b.plot(wall, ret, marker=".", label=label)
    a.set(xlabel="environment steps", ylabel="evaluation return")
    b.set(xlabel="training wall time (s, compilation included)")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        if results[0].get("target") is not None:
            ax.axhline(results[0]["target"], color="k", lw=0.8, ls="--")
    a.legend(fontsize=8)
    fig.suptitle(title or f"{results[0]['env']}")
    fig.savefig(png, dpi=110)
    plt.close(fig)
