"""The contact environments' step program: its size (compile time grows with it) and how a
batch of members runs on the CPU. Structure only; speed lives in
``benchmarks/envs_throughput.py`` and ``benchmarks/probes/env_step_chunks.py``."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.envs._model_env import physics_of

#: StableHLO ops of the lowered hopper/hop step (4 implicit substeps in one scan, the
#: observation and the reward). K from a jacfwd in q whose primal gives the forces and D
#: from a jacfwd in qvel at its poses give about 12.0k; one jacfwd of 2 nv tangents gave
#: 9.6k (and 1.4x the run time), three traced copies (forces, jacfwd in qvel, jacfwd in q)
#: 14.5k. The step's batching rule (:func:`jaxmbd.compiled.batch_lanes.batch_lanes`, a
#: ``custom_vmap`` in a ``custom_jvp``) lowers its program with shared helpers inlined:
#: 12.0k -> 13.5k ops for the same XLA compile time (10.0 and 9.9 CPU-s, hopper/hop). The
#: effective mass of each compliant pair (:func:`jaxmbd.contact.element.effective_mass`: the
#: pair's rows of M^-1 and a 3x3 inverse, in every force evaluation) brings it to 17.7k.
HOPPER_STEP_OPS_MAX = 19_000


@pytest.fixture(scope="module")
def hopper():
    # compliant contact with "implicit" (the largest step program; its Jacobians mark the
    # batched arrays)
    return mbd.envs.make("hopper", "hop", integrator="implicit", contact="compliant")


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
    plain = jax.vmap(lambda s, u: hopper._step(hopper.sys, s, u))  # without the step's rule
    vmapped = jax.jit(plain).lower(state, action).as_text()
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
            np.testing.assert_allclose(a, b, rtol=0, atol=ROUND_OFF * np.abs(b).max())


def test_member_chunk_must_be_positive():
    env = mbd.envs.make("cartpole", "balance")
    with pytest.raises(ValueError, match="member_chunk"):
        mbd.envs.VmapWrapper(env, member_chunk=0)


def _single_steps(env, state, action):
    """Each member's own jitted step, stacked: the reference of a batched step."""
    step = jax.jit(env.step)
    members = [step(jax.tree.map(lambda x, i=i: x[i], state), action[i])
               for i in range(action.shape[0])]  # fmt: skip
    return jax.tree.map(lambda *xs: jnp.stack(xs), *members)


def _assert_states_equal(got, want):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.slow  # the tiles' trace and two gradient programs (~3 min at load 10)
def test_vmap_of_a_step_runs_on_tiles_of_members():
    """``jax.vmap(env.step)`` of three members (one tile, padded) equals their single steps,
    and its program computes on tiles of four members (the step's batching rule,
    :func:`jaxmbd.compiled.batch_lanes.batch_lanes`); gradients of an APG-style loss over the
    batched steps equal those of the step's plain program under ``jax.vmap``."""
    env = mbd.envs.make("cartpole", "balance")
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    state = jax.vmap(env.reset)(keys)
    action = jnp.asarray([[-0.8], [0.3], [1.0]])
    batched = jax.jit(jax.vmap(env.step))
    _assert_states_equal(batched(state, action), _single_steps(env, state, action))
    assert "tensor<1x4xf64>" in batched.lower(state, action).as_text()

    def loss(step):
        def total(actions):
            s, r = state, 0.0
            for u in actions:  # two steps: an APG return's shape
                s = step(s, u)
                r = r + jnp.sum(s.reward) + jnp.sum(s.obs**2)
            return r

        return total

    plain = jax.vmap(lambda s, u: env._step(env.sys, s, u))
    actions = jnp.stack([action, -action])
    got = jax.jit(jax.grad(loss(jax.vmap(env.step))))(actions)
    want = jax.jit(jax.grad(loss(plain)))(actions)
    assert float(jnp.max(jnp.abs(want))) > 0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.slow  # a contact step's compile (~1 min)
@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's batching choice")
def test_vmap_of_a_contact_step_steps_members_one_at_a_time(hopper):
    """A contact step is too large for tiles: ``jax.vmap(env.step)`` of three members steps
    them one after another (no array of the program carries the batch with the Jacobians'
    nv x nv), equal to their single steps, with contact active. The members land, bounce
    and settle: all three touch the floor at every step from step 31 on (measured up to
    step 60; member 0 bounces off at steps 25-30), so the compared step is the 33rd."""
    batch, nv = 3, mbd.joint_space.model_tree(hopper.sys)[0].nv
    keys = jax.random.split(jax.random.PRNGKey(4), batch)
    state = jax.vmap(hopper.reset)(keys)
    action = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, (batch, hopper.action_size)))
    batched = jax.jit(jax.vmap(hopper.step))
    for _ in range(32):  # onto the floor (every member touches it from step 31 on)
        state = batched(state, action)
    got = batched(state, action)
    _assert_states_equal(got, _single_steps(hopper, state, action))
    assert f"tensor<{batch}x{nv}x{nv}x" not in batched.lower(state, action).as_text()
    model, ps = hopper._run_model(), got.pipeline_state
    u = jnp.zeros(hopper.action_size)
    active = [physics_of(model, ps.qpos[i], ps.qvel[i], u).contacts().active for i in range(batch)]
    assert all(bool(jnp.any(a)) for a in active)  # every member in contact


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA's CPU fusion")
def test_contact_forces_are_one_buffer_of_the_velocity_jacobian(hopper):
    """The slots' contact forces and their nv tangents (the implicit step's forward mode)
    leave the compiled program's conditional (:func:`jaxmbd.compiled.materialize.materialized`) as
    buffers, read by the bodies' sums and the moments' cross products: fused into each of
    them, the force law ran several times over (the cheetah's step 1.5x slower)."""
    from jaxmbd.contact.element import contact_element
    from jaxmbd.joint_space.dynamics import accelerations

    model = hopper._run_model()
    tree, _ = mbd.joint_space.model_tree(model)
    ns = contact_element(model).n_slots
    state = hopper.reset(jax.random.PRNGKey(0)).pipeline_state

    def jacobian(qpos, qvel):
        acc = accelerations(model, tree, None, qpos, qvel, 0.0, step=hopper.h,
                            velocity_jacobian=True)  # fmt: skip
        return acc.velocity_jacobian

    text = jax.jit(jacobian).lower(state.qpos, state.qvel).compile().as_text()
    outputs = [line.split(" conditional(")[0] for line in text.splitlines()
               if " conditional(" in line]  # fmt: skip
    assert any(f"f64[{tree.nv},{ns},3]" in out for out in outputs), outputs
