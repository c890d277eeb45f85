"""Proximal policy optimisation (Schulman et al. 2017, arXiv:1707.06347) on a brax-style
environment, in one file after PureJaxRL's design (Lu et al. 2022, "Discovered Policy
Optimisation", arXiv:2210.05639; github.com/luchris429/purejaxrl,
``purejaxrl/ppo_continuous_action.py``): the rollout, generalised advantage estimation
(Schulman et al. 2016, arXiv:1506.02438), the clipped surrogate and value losses and the
minibatch epochs are one compiled function, ``jax.vmap`` over the environments through
brax's training wrappers (batch, time limit, auto-reset) and ``lax.scan`` over time.

    python -m benchmarks.rl.ppo --env cartpole-balance [--backend jaxmbd|mjx]
        [--num-envs 256] [--num-steps 16] [--steps 2000000] [--target 800]

As in PureJaxRL: separate actor and critic MLPs (tanh, orthogonal initialisation), a
state-independent log standard deviation, the Gaussian of distrax, actions clipped to
[-1, 1] for the environment (the log-probability is the unclipped sample's), Adam with
the gradient clipped to a global norm, advantages normalised per minibatch, an episode's
end (time limit included) treated as terminal. The networks are equinox modules instead
of flax's. Writes the learning curve (the deterministic policy's evaluation return, the
Gaussian's mean) as it goes to ``<--out>/ppo_<env>_<backend>.jsonl`` (one line per
evaluation) and ``.json``, and at the end ``.png``: return against env steps and against
wall time (``--out``: default ``rl_results`` under the current directory).

The humanoid stand task (MuJoCo's physics, 21 actions, 67 observations):

    python -m benchmarks.rl.ppo --env humanoid-stand --num-envs 256 --num-steps 16 \
        --steps 20000000 --target 500 --out rl_results"""

from __future__ import annotations

import argparse
import dataclasses
from typing import NamedTuple

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.rl._common import (
    ProgressFile,
    add_common_arguments,
    add_config_arguments,
    config_of,
    make_env,
    mean_return,
    orthogonal_mlp,
    run_until,
)


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PureJaxRL's configuration keys, lower-cased; ``updates_per_eval``: updates per
    compiled call between two evaluations."""

    num_envs: int = 256
    num_steps: int = 16
    num_minibatches: int = 8
    update_epochs: int = 4
    learning_rate: float = 3e-4
    anneal_lr: bool = False
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    width: int = 64
    depth: int = 2
    episode_length: int = 1000
    total_updates: int = 1000  # the horizon of the annealed learning rate
    updates_per_eval: int = 10


class ActorCritic(eqx.Module):
    """PureJaxRL's ``ActorCritic``: the Gaussian's mean and the state value, each its own
    tanh MLP, and a state-independent log standard deviation (initially 0)."""

    actor: eqx.nn.MLP
    critic: eqx.nn.MLP
    log_std: jax.Array

    def __init__(self, obs_size: int, action_size: int, key, *, width: int, depth: int):
        ka, kc, ka0, kc0 = jax.random.split(key, 4)
        gain = float(np.sqrt(2))
        actor = eqx.nn.MLP(obs_size, action_size, width, depth, activation=jnp.tanh, key=ka)
        critic = eqx.nn.MLP(obs_size, "scalar", width, depth, activation=jnp.tanh, key=kc)
        self.actor = orthogonal_mlp(actor, ka0, hidden_scale=gain, out_scale=0.01)
        self.critic = orthogonal_mlp(critic, kc0, hidden_scale=gain, out_scale=1.0)
        self.log_std = jnp.zeros(action_size)

    def __call__(self, obs):
        """The policy's Gaussian and the values of a batch of observations (n, obs)."""
        mean = jax.vmap(self.actor)(obs)
        std = jnp.broadcast_to(jnp.exp(self.log_std), mean.shape)
        return distrax.MultivariateNormalDiag(mean, std), jax.vmap(self.critic)(obs)


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array


class Runner(NamedTuple):
    params: eqx.Module
    opt_state: optax.OptState
    env_state: object
    rng: jax.Array


class PPO:
    """``init(rng) -> Runner``; ``updates(runner)``: ``config.updates_per_eval`` PPO
    updates (rollout of ``num_steps`` x ``num_envs``, GAE, ``update_epochs`` epochs of
    ``num_minibatches`` minibatches) in one compiled call; ``policy(runner)``: the
    deterministic policy (the Gaussian's mean, clipped)."""

    def __init__(self, env, wrap, config: PPOConfig, key):
        self.config = c = config
        self.env = wrap(env, episode_length=c.episode_length)
        network = ActorCritic(env.observation_size, env.action_size, key,
                              width=c.width, depth=c.depth)  # fmt: skip
        self.params, self.static = eqx.partition(network, eqx.is_inexact_array)
        minibatches_per_update = c.num_minibatches * c.update_epochs

        def schedule(count):
            frac = 1.0 - (count // minibatches_per_update) / c.total_updates
            return c.learning_rate * jnp.maximum(frac, 0.0)

        lr = schedule if c.anneal_lr else c.learning_rate
        self.tx = optax.chain(optax.clip_by_global_norm(c.max_grad_norm),
                              optax.adam(learning_rate=lr, eps=1e-5))  # fmt: skip
        self.updates = jax.jit(self._updates)

    def network(self, params) -> ActorCritic:
        return eqx.combine(params, self.static)

    def init(self, rng) -> Runner:
        k_env, rng = jax.random.split(rng)
        env_state = jax.jit(self.env.reset)(jax.random.split(k_env, self.config.num_envs))
        return Runner(self.params, self.tx.init(self.params), env_state, rng)

    def _env_step(self, runner: Runner, _):
        params, opt_state, env_state, rng = runner
        rng, k = jax.random.split(rng)
        pi, value = self.network(params)(env_state.obs)
        action = pi.sample(seed=k)
        log_prob = pi.log_prob(action)
        obs = env_state.obs
        env_state = self.env.step(env_state, jnp.clip(action, -1.0, 1.0))
        t = Transition(env_state.done, action, value, env_state.reward, log_prob, obs)
        return Runner(params, opt_state, env_state, rng), t

    def _gae(self, traj: Transition, last_val):
        c = self.config

        def backward(carry, t: Transition):
            gae, next_value = carry
            delta = t.reward + c.gamma * next_value * (1 - t.done) - t.value
            gae = delta + c.gamma * c.gae_lambda * (1 - t.done) * gae
            return (gae, t.value), gae

        _, advantages = jax.lax.scan(backward, (jnp.zeros_like(last_val), last_val), traj,
                                     reverse=True, unroll=16)  # fmt: skip
        return advantages, advantages + traj.value

    def _loss(self, params, traj: Transition, gae, targets):
        c = self.config
        pi, value = self.network(params)(traj.obs)
        log_prob = pi.log_prob(traj.action)
        value_clipped = traj.value + jnp.clip(value - traj.value, -c.clip_eps, c.clip_eps)
        value_loss = 0.5 * jnp.mean(
            jnp.maximum(jnp.square(value - targets), jnp.square(value_clipped - targets))
        )
        ratio = jnp.exp(log_prob - traj.log_prob)
        gae = (gae - gae.mean()) / (gae.std() + 1e-8)
        actor_loss = -jnp.mean(
            jnp.minimum(ratio * gae, jnp.clip(ratio, 1 - c.clip_eps, 1 + c.clip_eps) * gae)
        )
        entropy = jnp.mean(pi.entropy())
        return actor_loss + c.vf_coef * value_loss - c.ent_coef * entropy

    def _minibatch(self, state, batch):
        params, opt_state = state
        traj, advantages, targets = batch
        grads = jax.grad(self._loss)(params, traj, advantages, targets)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    def _epoch(self, carry, _):
        params, opt_state, batch, rng = carry
        c = self.config
        rng, k = jax.random.split(rng)
        size = c.num_steps * c.num_envs
        permutation = jax.random.permutation(k, size)

        def shuffle(x):
            x = jnp.take(x.reshape((size, *x.shape[2:])), permutation, axis=0)
            return x.reshape((c.num_minibatches, -1, *x.shape[1:]))

        minibatches = jax.tree.map(shuffle, batch)
        (params, opt_state), _ = jax.lax.scan(self._minibatch, (params, opt_state), minibatches)
        return (params, opt_state, batch, rng), None

    def _update(self, runner: Runner, _):
        c = self.config
        runner, traj = jax.lax.scan(self._env_step, runner, None, c.num_steps)
        params, opt_state, env_state, rng = runner
        _, last_val = self.network(params)(env_state.obs)
        advantages, targets = self._gae(traj, last_val)
        carry = (params, opt_state, (traj, advantages, targets), rng)
        (params, opt_state, _, rng), _ = jax.lax.scan(self._epoch, carry, None, c.update_epochs)
        return Runner(params, opt_state, env_state, rng), None

    def _updates(self, runner: Runner) -> Runner:
        runner, _ = jax.lax.scan(self._update, runner, None, self.config.updates_per_eval)
        return runner

    def policy(self, runner: Runner):
        actor = self.network(runner.params).actor
        return lambda obs: jnp.clip(actor(obs), -1.0, 1.0)

    @property
    def env_steps_per_call(self) -> int:
        c = self.config
        return c.updates_per_eval * c.num_steps * c.num_envs


def train(env, wrap, config: PPOConfig, *, seed: int = 0, max_env_steps: int, target=None,
          eval_episodes: int = 16, eval_length: int | None = None, log=print,
          on_point=None):  # fmt: skip
    """Trains until ``max_env_steps`` or an evaluation return of ``target``: (the
    deterministic policy, the learning curve)."""
    key, rng = jax.random.split(jax.random.PRNGKey(seed))
    ppo = PPO(env, wrap, config, key)
    evaluate = mean_return(env, lambda params: ppo.policy(Runner(params, None, None, None)),
                           episodes=eval_episodes,
                           length=eval_length or config.episode_length)  # fmt: skip

    runner, curve = run_until(
        step=ppo.updates,
        evaluate=lambda runner: evaluate(runner.params),
        carry=ppo.init(rng),
        env_steps_per_call=ppo.env_steps_per_call,
        max_env_steps=max_env_steps,
        target=target,
        log=log,
        on_point=on_point,
    )
    return ppo.policy(runner), curve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    add_config_arguments(parser, PPOConfig)
    args = parser.parse_args(argv)
    config = config_of(args, PPOConfig)
    env, wrap = make_env(args.env, args.backend)
    progress = ProgressFile("ppo", args, config)
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
