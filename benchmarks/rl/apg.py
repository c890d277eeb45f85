"""Analytic policy gradients: back-propagation through time through ``env.step`` (brax's
APG, ``brax/training/agents/apg/train.py``; Freeman et al. 2021, arXiv:2106.13281; the
short-horizon form of Xu et al. 2022, "Accelerated Policy Learning with Parallel
Differentiable Simulation", arXiv:2204.07137).

    python -m benchmarks.rl.apg --env cartpole-balance [--num-envs 8] [--horizon 128]
        [--truncation 0] [--learning-rate 2e-2] [--steps 1000000] [--target 800]

A deterministic MLP policy acts in ``--num-envs`` environments through brax's training
wrappers (batch, time limit, auto-reset). Each update rolls them ``--horizon`` steps on
from where the last update left them, takes the gradient of minus the mean reward of that
window with respect to the policy's weights by ``jax.grad`` through every step (the
simulator's own derivatives: jaxmbd's steps are differentiable in float64), clips it to a
global norm (exploding gradients through long chaotic rollouts are APG's known failure;
brax clips too) and takes an Adam step with an exponentially decaying learning rate
(brax's ``schedule_decay``). The state entering a window is a constant of its gradient
(``lax.stop_gradient``), so the horizon bounds the back-propagation's length and memory;
``--truncation`` cuts it inside a window too (brax's truncated BPTT). Adam moves each
weight by about the learning rate per update, and the policy starts near zero (output
gain 0.01), so the learning rate and the number of updates decide how soon the policy's
gains reach a balancing controller's: few environments (8) and a large rate (2e-2) give
many large updates per environment step. The training episodes can be shorter than the evaluation's
(``--train-episode-length``): on cart-pole balance a policy that cannot yet balance spends
most of a 1000-step episode with the pole hanging, where a window's gradient teaches
swinging, not balancing; restarting every few windows keeps the windows near upright.
Writes the learning curve as it goes to ``<--out>/apg_<env>_<backend>.jsonl`` (one line
per evaluation) and ``.json``, and at the end ``.png`` (``--out``: default ``rl_results``
under the current directory; :class:`benchmarks.rl._common.ProgressFile`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from benchmarks.rl._common import (
    Policy,
    ProgressFile,
    add_common_arguments,
    add_config_arguments,
    config_of,
    make_env,
    mean_return,
    run_until,
)


@dataclasses.dataclass(frozen=True)
class APGConfig:
    num_envs: int = 8
    horizon: int = 128
    #: the training episodes' time limit (steps; 0: ``episode_length``): short, so that
    #: the windows start from states near the reset distribution (the horizon: every
    #: window starts from a reset)
    train_episode_length: int = 128
    #: stop the gradient through the state every ``truncation`` steps of a window (0:
    #: never): brax's truncated back-propagation; the window's rewards all count
    truncation: int = 0
    learning_rate: float = 2e-2
    #: the learning rate's factor per update (brax's ``schedule_decay``; 1: constant)
    learning_rate_decay: float = 0.998
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    max_grad_norm: float = 1.0
    width: int = 32
    depth: int = 1
    episode_length: int = 1000
    updates_per_eval: int = 20


class Runner(NamedTuple):
    params: eqx.Module
    opt_state: optax.OptState
    env_state: object


def window_loss(env, act, state, horizon: int, truncation: int = 0):
    """(minus the mean reward over ``horizon`` steps of the batched ``env`` from
    ``state`` under ``act``, the state at the end): the loss whose gradient BPTT takes.
    ``truncation`` > 0: the state is a constant of the gradient every ``truncation``
    steps (``horizon`` a multiple of it), so each action's gradient sees the rewards of
    at most ``truncation`` steps while the loss counts all ``horizon``."""
    truncation = truncation or horizon
    if horizon % truncation:
        raise ValueError(f"APG: horizon {horizon} is not a multiple of truncation {truncation}")

    def step(state, _):
        state = env.step(state, jax.vmap(act)(state.obs))
        return state, state.reward

    def segment(state, _):
        return jax.lax.scan(step, jax.lax.stop_gradient(state), None, truncation)

    if truncation == horizon:
        state, rewards = jax.lax.scan(step, state, None, horizon)
    else:
        state, rewards = jax.lax.scan(segment, state, None, horizon // truncation)
    return -jnp.mean(rewards), state


class APG:
    """``init(rng) -> Runner``; ``updates(runner)``: ``config.updates_per_eval`` updates
    in one compiled call; ``policy(runner)``: the policy."""

    def __init__(self, env, wrap, config: APGConfig, key):
        self.config = c = config
        self.env = wrap(env, episode_length=c.train_episode_length or c.episode_length)
        policy = Policy(env.observation_size, env.action_size, key, width=c.width, depth=c.depth)
        self.params, self.static = eqx.partition(policy, eqx.is_inexact_array)
        rate = optax.exponential_decay(c.learning_rate, 1, c.learning_rate_decay)
        self.tx = optax.chain(optax.clip_by_global_norm(c.max_grad_norm),
                              optax.adam(rate, b1=c.adam_b1, b2=c.adam_b2))  # fmt: skip
        self.updates = jax.jit(self._updates)

    def act(self, params):
        return eqx.combine(params, self.static)

    def init(self, rng) -> Runner:
        env_state = jax.jit(self.env.reset)(jax.random.split(rng, self.config.num_envs))
        return Runner(self.params, self.tx.init(self.params), env_state)

    def _update(self, runner: Runner, _):
        params, opt_state, env_state = runner
        env_state = jax.lax.stop_gradient(env_state)

        def loss(params):
            c = self.config
            return window_loss(self.env, self.act(params), env_state, c.horizon, c.truncation)

        (value, env_state), grads = jax.value_and_grad(loss, has_aux=True)(params)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return Runner(optax.apply_updates(params, updates), opt_state, env_state), value

    def _updates(self, runner: Runner) -> Runner:
        runner, _ = jax.lax.scan(self._update, runner, None, self.config.updates_per_eval)
        return runner

    def policy(self, runner: Runner):
        return self.act(runner.params)

    @property
    def env_steps_per_call(self) -> int:
        c = self.config
        return c.updates_per_eval * c.horizon * c.num_envs


def train(env, wrap, config: APGConfig, *, seed: int = 0, max_env_steps: int, target=None,
          eval_episodes: int = 16, eval_length: int | None = None, log=print,
          on_point=None):  # fmt: skip
    """Trains until ``max_env_steps`` or an evaluation return of ``target``: (the policy,
    the learning curve)."""
    key, rng = jax.random.split(jax.random.PRNGKey(seed))
    apg = APG(env, wrap, config, key)
    evaluate = mean_return(env, apg.act, episodes=eval_episodes,
                           length=eval_length or config.episode_length)  # fmt: skip

    runner, curve = run_until(
        step=apg.updates,
        evaluate=lambda runner: evaluate(runner.params),
        carry=apg.init(rng),
        env_steps_per_call=apg.env_steps_per_call,
        max_env_steps=max_env_steps,
        target=target,
        log=log,
        on_point=on_point,
    )
    return apg.policy(runner), curve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    add_config_arguments(parser, APGConfig)
    args = parser.parse_args(argv)
    config = config_of(args, APGConfig)
    env, wrap = make_env(args.env, args.backend)
    progress = ProgressFile("apg", args, config)
    _, curve = train(
        env,
        wrap,
        config,
        seed=args.seed,
        max_env_steps=args.steps,
        target=args.target,
        eval_episodes=args.eval_episodes,
        on_point=progress.add,
    )
    progress.finish(curve)


if __name__ == "__main__":
    main()
