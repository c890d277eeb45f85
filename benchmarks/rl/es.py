"""Evolution strategies on a brax-style environment: evosax's OpenAI-ES (Salimans et al.
2017, arXiv:1703.03864) or CMA-ES (Hansen 2016, arXiv:1604.00772) on the weights of a
deterministic MLP policy, each generation's population rolled out in one compiled, batched
program (``jax.vmap`` over members and episodes, ``lax.scan`` over the steps).

    python -m benchmarks.rl.es --env cartpole-balance [--backend jaxmbd|mjx]
        [--strategy cma_es|open_es] [--population 64] [--steps 2000000] [--target 800]

The fitness of a member is its mean return over ``--episodes`` episodes of
``--episode-length`` steps from resets shared by the whole generation (common random
numbers), new each generation. Writes the learning curve (the mean policy's evaluation
return) as it goes to ``<--out>/es_<env>_<backend>.jsonl`` and ``.json``, and at the end
``.png`` (``--out``: default ``rl_results`` under the current directory)."""

from __future__ import annotations

import argparse
import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from evosax.algorithms import CMA_ES, Open_ES

from benchmarks.rl._common import (
    Policy,
    ProgressFile,
    add_common_arguments,
    episode_returns,
    make_env,
    run_until,
)


@dataclasses.dataclass(frozen=True)
class ESConfig:
    strategy: str = "cma_es"
    population: int = 64
    episodes: int = 1  # per member and generation
    episode_length: int = 1000
    sigma: float = 0.1  # OpenAI-ES's perturbation scale (CMA-ES adapts its own)
    learning_rate: float = 0.03  # OpenAI-ES's Adam step on the mean
    generations_per_eval: int = 5
    width: int = 32
    depth: int = 1


class ES:
    """An evosax strategy over ``Policy``'s weights on the unwrapped ``env``. ``init(rng)``
    gives the carry ``(strategy state, rng)``, ``generations(carry)`` runs
    ``config.generations_per_eval`` generations in one compiled call, ``policy(carry)``
    is the mean policy."""

    def __init__(self, env, config: ESConfig, key):
        self.env, self.config = env, config
        policy = Policy(env.observation_size, env.action_size, key,
                        width=config.width, depth=config.depth)  # fmt: skip
        self.params, self.static = eqx.partition(policy, eqx.is_inexact_array)
        if config.strategy == "open_es":
            self.strategy = Open_ES(
                population_size=config.population,
                solution=self.params,
                optimizer=optax.adam(config.learning_rate),
                std_schedule=optax.constant_schedule(config.sigma),
            )
        elif config.strategy == "cma_es":
            self.strategy = CMA_ES(population_size=config.population, solution=self.params)
        else:
            raise ValueError(f"unknown strategy {config.strategy!r}: open_es or cma_es")
        self.es_params = self.strategy.default_params
        self.generations = jax.jit(self._generations)

    def act(self, params):
        return eqx.combine(params, self.static)

    def fitness(self, population, rng):
        """Minus each member's mean return (evosax minimises) over shared resets."""
        c = self.config

        def member(params):
            returns = episode_returns(self.env, self.act(params), rng,
                                      episodes=c.episodes, length=c.episode_length)  # fmt: skip
            return -jnp.mean(returns)

        return jax.vmap(member)(population)

    def init(self, rng):
        k_init, rng = jax.random.split(rng)
        state = self.strategy.init(k_init, self.params, self.es_params)
        # the dtypes a generation returns (evosax starts some scalars weakly typed): else
        # the second call of ``generations`` compiles again
        out = jax.eval_shape(self._generations, (state, rng))
        return jax.tree.map(lambda x, s: jnp.asarray(x, dtype=s.dtype), (state, rng), out)

    def _generation(self, carry, _):
        state, rng = carry
        rng, k_ask, k_eval, k_tell = jax.random.split(rng, 4)
        population, state = self.strategy.ask(k_ask, state, self.es_params)
        fitness = self.fitness(population, k_eval)
        state, _ = self.strategy.tell(k_tell, population, fitness, state, self.es_params)
        return (state, rng), -jnp.mean(fitness)

    def _generations(self, carry):
        carry, _ = jax.lax.scan(self._generation, carry, None, self.config.generations_per_eval)
        return carry

    def policy(self, carry):
        return self.act(self.strategy.get_mean(carry[0]))

    @property
    def env_steps_per_call(self) -> int:
        c = self.config
        return c.generations_per_eval * c.population * c.episodes * c.episode_length


def make_evaluator(env, *, episodes: int, length: int, seed: int = 1234):
    """``evaluate(policy) -> mean return`` over fixed held-out resets (one compiled
    program for every policy of the same structure)."""
    rng = jax.random.PRNGKey(seed)

    @eqx.filter_jit
    def mean_return(params, static):
        act = eqx.combine(params, static)
        return jnp.mean(episode_returns(env, act, rng, episodes=episodes, length=length))

    def evaluate(policy):
        params, static = eqx.partition(policy, eqx.is_inexact_array)
        return mean_return(params, static)

    return evaluate


def train(env, config: ESConfig, *, seed: int = 0, max_env_steps: int, target=None,
          eval_episodes: int = 16, eval_length: int | None = None, log=print,
          on_point=None):  # fmt: skip
    """Trains until ``max_env_steps`` or an evaluation return of ``target``: (the mean
    policy, the learning curve)."""
    key, rng = jax.random.split(jax.random.PRNGKey(seed))
    es = ES(env, config, key)
    evaluate = make_evaluator(env, episodes=eval_episodes,
                              length=eval_length or config.episode_length)  # fmt: skip
    carry, curve = run_until(
        step=es.generations,
        evaluate=lambda carry: evaluate(es.policy(carry)),
        carry=es.init(rng),
        env_steps_per_call=es.env_steps_per_call,
        max_env_steps=max_env_steps,
        target=target,
        log=log,
        on_point=on_point,
    )
    return es.policy(carry), curve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--strategy", default="cma_es", choices=["open_es", "cma_es"])
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.1)
    parser.add_argument("--learning-rate", type=float, default=0.03)
    parser.add_argument("--generations-per-eval", type=int, default=5)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args(argv)
    config = ESConfig(strategy=args.strategy, population=args.population,
                      episodes=args.episodes, episode_length=args.episode_length,
                      sigma=args.sigma, learning_rate=args.learning_rate,
                      generations_per_eval=args.generations_per_eval, width=args.width)  # fmt: skip
    env, _ = make_env(args.env, args.backend)
    progress = ProgressFile("es", args, config)
    _, curve = train(
        env,
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
