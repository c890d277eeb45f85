"""The contact environments' step program: its size (compile time grows with it) and how a
batch of members runs on the CPU. Structure only; speed lives in
``benchmarks/envs_throughput.py`` and ``benchmarks/probes/env_step_chunks.py``."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd

#: StableHLO ops of the lowered hopper/hop step (4 implicit substeps in one scan, the
#: observation and the reward). K from a jacfwd in q whose primal gives the forces and D
#: from a jacfwd in qvel at its poses give about 12.0k; one jacfwd of 2 nv tangents gave
#: 9.6k (and 1.4x the run time), three traced copies (forces, jacfwd in qvel, jacfwd in q)
#: 14.5k.
HOPPER_STEP_OPS_MAX = 12_500


@pytest.fixture(scope="module")
def hopper():
    # "implicit" (the largest step program; its Jacobians mark the batched arrays)
    return mbd.envs.make("hopper", "hop", integrator="implicit")


def _ops(text):
    return len(re.findall(r"= stablehlo\.\w+", text))


def test_hopper_step_lowers_to_a_bounded_program(hopper):
    state = jax.eval_shape(hopper.reset, jax.random.PRNGKey(0))
    action = jnp.zeros(hopper.action_size)
    n = _ops(jax.jit(hopper.step).lower(state, action).as_text())
    assert n < HOPPER_STEP_OPS_MAX, n


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's batching choice")
def test_vmap_wrapper_steps_contact_members_one_at_a_time(hopper):
    """On the CPU the wrapper maps the single-member step over the batch: no array of the
    lowered program carries the batch axis with the Jacobians' nv x nv, as vmap's program
    does."""
    batch, nv = 3, mbd.joint_space.model_tree(hopper.sys)[0].nv
    wrapped = mbd.envs.VmapWrapper(hopper)
    assert wrapped.member_chunk == 1
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    state = jax.eval_shape(jax.vmap(hopper.reset), keys)
    action = jnp.zeros((batch, hopper.action_size))
    batched_tangents = f"tensor<{batch}x{nv}x{nv}x"
    vmapped = jax.jit(jax.vmap(hopper.step)).lower(state, action).as_text()
    assert batched_tangents in vmapped  # the check sees vmap's program
    mapped = jax.jit(wrapped.step).lower(state, action).as_text()
    assert batched_tangents not in mapped


def test_members_one_at_a_time_equal_vmap():
    """member_chunk 1 and 2 (a remainder chunk) give vmap's states and rewards."""
    env = mbd.envs.make("cartpole", "swingup")
    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    action = jnp.linspace(-1.0, 1.0, 5)[:, None]
    expected = jax.jit(lambda k: jax.vmap(env.step)(jax.vmap(env.reset)(k), action))(keys)
    for chunk in (1, 2):
        wrapped = mbd.envs.VmapWrapper(env, member_chunk=chunk)
        got = jax.jit(lambda k, w=wrapped: w.step(w.reset(k), action))(keys)
        for a, b in ((got.pipeline_state.qpos, expected.pipeline_state.qpos),
                     (got.obs, expected.obs), (got.reward, expected.reward)):  # fmt: skip
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_member_chunk_must_be_positive():
    env = mbd.envs.make("cartpole", "balance")
    with pytest.raises(ValueError, match="member_chunk"):
        mbd.envs.VmapWrapper(env, member_chunk=0)
