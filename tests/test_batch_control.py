"""Batched controls and policies (issue 36 item 7): ``simulate_batch(models, policy=pi)``
runs one policy, shared by every member, whose parameters are dynamic arguments of the
compiled program (new parameters: no recompilation), and ``jax.grad`` of a mean over the
members reaches them; ``controls=`` takes per-member arrays with a leading batch axis,
(B, N, nu) or (B, nu). A batch equals the loop of its single runs.

The programs are few and shared (module fixtures): a cart-pole of two bodies, 20 steps
of RK4 (``rkmk``, rA) at h = 0.01 s, three members, an MLP of 4 -> 8 -> 1."""

import dataclasses
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from host_devices import run_on_host_devices
from jax.flatten_util import ravel_pytree
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.actuators import observation
from jaxmbd.model.joints import place_joint_states

OPTS = dict(formulation="rA", integrator="rkmk", t_end=0.2, h=0.01)
N = 20
ANGLES = (0.1, -0.2, 0.3)


def cartpole():
    b = mbd.ModelBuilder("cartpole", gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", mass=1.0, inertia=[0.01] * 3, r=(0, 0, 0))
    b.add_body("pole", mass=0.1, inertia=[0.01, 0.01, 1e-4], r=(0, 0, 0.5))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("hinge", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_actuator("push", joint="rail", kind="motor", gear=10.0, ctrl_range=(-1, 1))
    return b.build()


def with_pole_angle(model, angle):
    r0, A0, rdot0, omega0, joints = place_joint_states(model, {"hinge": (angle, 0.0)})
    arrays = {k: jnp.asarray(x) for k, x in dict(r0=r0, A0=A0, rdot0=rdot0, omega0=omega0).items()}
    return dataclasses.replace(model, joints=joints, **arrays)


class Policy(eqx.Module):
    """u = MLP(observation); the observation is (x, angle, x_dot, angle_dot)."""

    mlp: eqx.nn.MLP

    def __call__(self, t, obs):
        return self.mlp(obs)


def perturbed(policy, direction, eps):
    params, static = eqx.partition(policy, eqx.is_array)
    moved = jax.tree_util.tree_map(lambda p, d: p + eps * d, params, direction)
    return eqx.combine(moved, static)


def loss_of(sol):
    """Mean over members of the squared pole angle and cart position over the run."""
    q = sol.joints["hinge"].q, sol.joints["rail"].q
    return jnp.mean(jnp.sum(q[0] ** 2 + 0.1 * q[1] ** 2, axis=-1))


@pytest.fixture(scope="module")
def setup():
    model = cartpole()
    members = [with_pole_angle(model, a) for a in ANGLES]
    policy = Policy(eqx.nn.MLP(4, 1, 8, 1, activation=jnp.tanh, key=jax.random.key(0)))
    # the chunked path (lax.map of vmaps of 2 members: 2 + 1 here), the file's forward batch
    sol = mbd.simulate_batch(mbd.stack_models(members), policy=policy, chunk=2, **OPTS)
    return model, members, policy, sol


def test_policy_batch_equals_loop_of_single_runs(setup):
    _, members, policy, sol = setup
    assert sol.r.shape == (len(members), N + 1, 2, 3)
    for k, member in enumerate(members):
        single = mbd.simulate(member, policy=policy, **OPTS)
        for key in ("r", "A", "rdot", "omega"):
            got, want = np.asarray(getattr(sol, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # the members started apart and were steered apart: not one run repeated
    assert np.ptp(np.asarray(sol.joints["hinge"].q)[:, -1]) > 0.1


def test_per_member_controls_replay_the_policy(setup):
    """The controls the policy produced (from each member's own states), replayed open loop
    as (B, N, nu) per-member rows, give the same runs (one vmap, no chunks); (B, nu)
    constants are their rows held (the same program)."""
    _, members, policy, sol = setup
    obs = jax.vmap(jax.vmap(lambda r, A, v, w: observation(members[0], r, A, v, w)))(
        sol.r, sol.A, sol.rdot, sol.omega
    )
    u = jax.vmap(jax.vmap(lambda o: policy(0.0, o)))(obs[:, :-1])
    assert u.shape == (len(members), N, 1)
    batch = mbd.stack_models(members)
    replay = mbd.simulate_batch(batch, controls=u, **OPTS)
    want = np.asarray(sol.r)
    np.testing.assert_allclose(
        np.asarray(replay.r), want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
    )
    constants = np.array([[0.5], [-1.0], [0.2]])
    with count_compilations() as counts:
        held = mbd.simulate_batch(batch, controls=constants, **OPTS)
        rows = mbd.simulate_batch(batch, controls=np.repeat(constants[:, None], N, 1), **OPTS)
        jax.block_until_ready((held.r, rows.r))
    assert counts == {"trace": 0, "compile": 0}, counts
    np.testing.assert_array_equal(np.asarray(held.r), np.asarray(rows.r))
    x_end = np.asarray(held.joints["rail"].q)[:, -1]
    assert x_end[0] > 0 > x_end[1]  # each member pushed its own way


def test_policy_gradient_matches_central_differences_without_recompiling(setup):
    """d(mean loss)/d(policy parameters) along one random direction (all parameters
    at once) against central differences of the batched forward program, which new
    parameter values reuse (no trace, no compile)."""
    _, members, policy, sol = setup
    batch = mbd.stack_models(members)

    def loss(p):
        return loss_of(mbd.simulate_batch(batch, policy=p, **OPTS))

    value, grad = mbd.jit(eqx.filter_value_and_grad(loss))(policy)
    assert float(value) == pytest.approx(float(loss_of(sol)), rel=ROUND_OFF, abs=0)  # vmap = chunks
    flat, unravel = ravel_pytree(eqx.filter(policy, eqx.is_array))
    d = jax.random.normal(jax.random.key(1), flat.shape)
    direction = unravel(d)
    analytic = float(jnp.vdot(ravel_pytree(eqx.filter(grad, eqx.is_array))[0], d))
    eps = 1e-5
    moved = [perturbed(policy, direction, s) for s in (eps, -eps)]
    with count_compilations() as counts:
        up, down = (mbd.simulate_batch(batch, policy=p, chunk=2, **OPTS) for p in moved)
        jax.block_until_ready((up.r, down.r))
    fd = (float(loss_of(up)) - float(loss_of(down))) / (2 * eps)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert abs(analytic) > 1e-3
    assert analytic == pytest.approx(fd, rel=2e-9, abs=0)


def test_bad_controls_and_policy_arguments_are_named(setup):
    model, members, policy, _ = setup
    batch = mbd.stack_models(members)
    with pytest.raises(ValueError, match=r"controls has shape \(20, 1\); expected \(3, 20, 1\)"):
        mbd.simulate_batch(batch, controls=jnp.zeros((N, 1)), **OPTS)
    with pytest.raises(ValueError, match="not finite for member 2 at step 7, actuator 'push'"):
        mbd.simulate_batch(batch, controls=jnp.zeros((3, N, 1)).at[2, 7, 0].set(jnp.nan), **OPTS)
    with pytest.raises(ValueError, match="not finite for member 1, actuator 'push'"):
        mbd.simulate_batch(batch, controls=jnp.zeros((3, 1)).at[1, 0].set(jnp.inf), **OPTS)
    with pytest.raises(ValueError, match="policy= excludes controls="):
        mbd.simulate_batch(batch, controls=jnp.zeros((3, 1)), policy=policy, **OPTS)
    plain = mbd.ModelBuilder("plain")
    plain.add_body("a", mass=1.0, inertia=[1, 1, 1], r=(0, 0, 0))
    bare = mbd.stack_models([plain.build()] * 2)
    with pytest.raises(ValueError, match="has no actuators"):
        mbd.simulate_batch(bare, controls=jnp.zeros((2, 1)), **OPTS)


@pytest.mark.slow  # a fresh process compiling four programs (about 3 min on 2 busy cores)
def test_sharded_policy_batch_and_gradient_equal_one_device():
    """Two host devices (shard_map; the policy's parameters closed over, replicated) against
    one: the runs and the gradient of the mean loss with respect to the policy."""
    script = textwrap.dedent("""
        import equinox as eqx, jax, jax.numpy as jnp, numpy as np
        import jaxmbd as mbd
        from test_batch_control import OPTS, Policy, cartpole, loss_of, with_pole_angle
        assert len(jax.devices()) == 2, jax.devices()
        model = cartpole()
        batch = mbd.stack_models([with_pole_angle(model, a) for a in (0.1, -0.2, 0.3)])
        policy = Policy(eqx.nn.MLP(4, 1, 8, 1, activation=jnp.tanh, key=jax.random.key(0)))
        out = {}
        for name, devices in (("two", jax.devices()), ("one", jax.devices()[:1])):
            def loss(p):
                return loss_of(mbd.simulate_batch(batch, policy=p, devices=devices, **OPTS))
            sol = mbd.simulate_batch(batch, policy=policy, devices=devices, **OPTS)
            out[name] = sol.r, eqx.filter_grad(loss)(policy)
        np.testing.assert_allclose(out["two"][0], out["one"][0], rtol=0, atol=1e-13)
        for a, b in zip(*(jax.tree_util.tree_leaves(out[k][1]) for k in ("two", "one"))):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)
        print("OK")
    """)
    assert "OK" in run_on_host_devices(script, 2)
