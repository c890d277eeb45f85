"""Training on jaxmbd's environments with the trainers of benchmarks/rl/: a short run of
evolution strategies (evosax) and of PPO (after PureJaxRL) on cart-pole balance each
improve the evaluation return over the untrained policy (fixed seeds), the gradient that
analytic policy gradients take through ``env.step`` equals central differences, and
brax's own PPO trains on the environment where brax's trainer runs on this JAX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd

pytest.importorskip("evosax")
pytest.importorskip("distrax")

from benchmarks.rl import apg, es, ppo  # noqa: E402

#: short episodes: the untrained policy lets the pole fall within them, a trained one
#: holds it (evaluation over the same held-out resets before and after)
LENGTH = 200
EVAL_EPISODES = 8


@pytest.fixture(scope="module")
def env():
    return mbd.envs.make("cartpole", "balance")


def test_es_improves_cartpole_balance(env):
    config = es.ESConfig(strategy="cma_es", population=32, episode_length=LENGTH,
                         generations_per_eval=6, depth=0)  # fmt: skip
    _, curve = es.train(env, config, seed=0, max_env_steps=1, eval_episodes=EVAL_EPISODES)
    before, after = curve[0]["ret"], curve[-1]["ret"]
    assert after > before + 0.1 * LENGTH, (before, after)


@pytest.mark.slow  # ~15 CPU-s of compilation; the notebook trains with ES in the default run
def test_ppo_improves_cartpole_balance(env):
    config = ppo.PPOConfig(num_envs=64, num_steps=16, num_minibatches=4, width=32,
                           learning_rate=1e-3, episode_length=LENGTH,
                           updates_per_eval=125)  # fmt: skip
    _, curve = ppo.train(env, mbd.envs.wrap, config, seed=0, max_env_steps=1,
                         eval_episodes=EVAL_EPISODES)  # fmt: skip
    before, after = curve[0]["ret"], curve[-1]["ret"]
    assert after > before + 0.1 * LENGTH, (before, after)


def test_apg_gradient_equals_central_differences(env):
    """The gradient of a window's mean reward through 5 steps of two wrapped (batched,
    time-limited, auto-resetting) environments with respect to the policy's weights,
    along a random direction, against central differences (float64, step 1e-5); one
    compiled program computes both."""
    config = apg.APGConfig(num_envs=2, horizon=5, width=8)
    trainer = apg.APG(env, mbd.envs.wrap, config, jax.random.PRNGKey(0))
    # weights large enough that the actions vary over the window
    params = jax.tree.map(lambda w: 30 * w, trainer.params)
    direction = jax.tree.map(lambda w: jax.random.normal(jax.random.PRNGKey(2), w.shape), params)
    eps = 1e-5

    @jax.jit
    def derivatives(params, direction):
        state = trainer.env.reset(jax.random.split(jax.random.PRNGKey(1), 2))

        def loss(params):
            return apg.window_loss(trainer.env, trainer.act(params), state, 5)[0]

        def shifted(eps):
            return loss(jax.tree.map(lambda w, d: w + eps * d, params, direction))

        grad = jax.grad(loss)(params)
        pairs = zip(jax.tree.leaves(grad), jax.tree.leaves(direction), strict=True)
        analytic = sum(jnp.vdot(g, d) for g, d in pairs)
        plus, minus = jax.vmap(shifted)(jnp.array([eps, -eps]))
        return analytic, (plus - minus) / (2 * eps)

    analytic, numeric = derivatives(params, direction)
    assert abs(float(analytic)) > 1e-4  # the window's reward depends on the weights
    np.testing.assert_allclose(float(analytic), float(numeric), rtol=1e-6)


def test_brax_ppo_trains_on_the_environment(env):
    """brax's PPO, unchanged, on jaxmbd's environment (brax's interface)."""
    if not hasattr(jax, "device_put_replicated"):
        pytest.skip(
            "brax's trainers (brax 0.14) call jax.device_put_replicated, which JAX 0.10 "
            "removed: brax's PPO cannot run on the JAX this project pins"
        )
    brax_ppo = pytest.importorskip("brax.training.agents.ppo.train")
    _, params, metrics = brax_ppo.train(
        environment=env, num_timesteps=2048, episode_length=LENGTH, num_envs=16,
        batch_size=16, num_minibatches=4, unroll_length=8, num_evals=2, seed=0,
    )  # fmt: skip
    assert np.isfinite(metrics["eval/episode_reward"])
