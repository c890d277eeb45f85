"""Training on jaxmbd's environments with the trainers of benchmarks/rl/: a short run of
evolution strategies (evosax) and of PPO (after PureJaxRL) on cart-pole balance each
improve the evaluation return over the untrained policy (fixed seeds; PPO's in the slow
run, a short run of its whole loop by default), and the gradient that analytic policy
gradients take through ``env.step`` equals central differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from benchmarks.rl import apg


def _es():
    pytest.importorskip("evosax")  # the rl extra; es imports it at the top
    from benchmarks.rl import es

    return es


def _ppo():
    pytest.importorskip("distrax")  # the rl extra; ppo imports it at the top
    from benchmarks.rl import ppo

    return ppo


#: short episodes: the untrained policy lets the pole fall within them, a trained one
#: holds it (evaluation over the same held-out resets before and after)
LENGTH = 200
EVAL_EPISODES = 8


@pytest.fixture(scope="module")
def env():
    # compliant limits: the trainers do not depend on the physics, and that step compiles in
    # seconds (MuJoCo's constraint model, the default, is checked in test_envs_mujoco.py)
    return mbd.envs.make("cartpole", "balance", contact="compliant")


def test_es_improves_cartpole_balance(env):
    es = _es()
    config = es.ESConfig(strategy="cma_es", population=32, episode_length=LENGTH,
                         generations_per_eval=6, depth=0)  # fmt: skip
    _, curve = es.train(env, config, seed=0, max_env_steps=1, eval_episodes=EVAL_EPISODES)
    before, after = curve[0]["ret"], curve[-1]["ret"]
    assert after > before + 0.1 * LENGTH, (before, after)


@pytest.mark.slow  # ~15 CPU-s of compilation; the notebook trains with ES in the default run
def test_ppo_improves_cartpole_balance(env):
    ppo = _ppo()
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
    np.testing.assert_allclose(float(analytic), float(numeric), rtol=3e-9)  # 7.1e-10


def test_ppo_trainer_runs_on_the_environment(env):
    """A short PPO run through the trainer's whole loop (two updates of 8 environments by
    8 steps in one compiled call, evaluations before and after): the environment steps are
    counted, the returns are finite episode sums (at most one per step), and the update
    changed the policy (the improvement over a longer run is the slow test above)."""
    ppo = _ppo()
    config = ppo.PPOConfig(num_envs=8, num_steps=8, num_minibatches=2, update_epochs=2,
                           width=16, depth=1, learning_rate=1e-3, episode_length=LENGTH,
                           updates_per_eval=2)  # fmt: skip
    _, curve = ppo.train(env, mbd.envs.wrap, config, seed=0, max_env_steps=1,
                         eval_episodes=EVAL_EPISODES)  # fmt: skip
    assert [point["env_steps"] for point in curve] == [0, 2 * 8 * 8]
    returns = np.array([point["ret"] for point in curve])
    assert np.all(np.isfinite(returns)) and np.all((returns > 0) & (returns <= LENGTH))
    assert returns[1] != returns[0]
