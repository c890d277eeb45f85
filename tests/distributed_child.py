"""The child process of tests/test_distributed.py: ``python distributed_child.py
PROCESS_ID PORT OUT.npz [full]``. Two of these, joined by ``jax.distributed`` with gloo,
run every case of the test in one launch (the launch and the compilations are the test's time):
simulate_batch (run, the run in joint coordinates, failing member, gather=False, no
recompilation), the gradient of a batch mean, identification under the user's own
``jax.jit``, a policy's run and gradient, and kinematics_batch. Each process then runs half
of the single-process references (no collective, so the two halves compile side by side)
and saves everything to OUT.npz; the test compares the files."""

import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from compile_counter import count_compilations  # tests/: the script's folder

import jaxmbd as mbd  # before initialize, as users write it: the import starts no backend

process_id, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
FULL = sys.argv[4:] == ["full"]
T0 = time.monotonic()


def mark(what):
    """Progress on stderr: the time each part took, for the test's report."""
    print(f"TIME {process_id} {what} {time.monotonic() - T0:.0f} s", file=sys.stderr, flush=True)


jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_num_cpu_devices", 1)
jax.distributed.initialize(
    f"127.0.0.1:{port}",
    num_processes=2,
    process_id=process_id,
    initialization_timeout=120,
    shutdown_timeout_seconds=900,
)
assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
assert len(jax.local_devices()) == 1
everywhere, here = jax.devices(), jax.local_devices()
saved = {}  # for the parent: results of both processes, references of one


def keep(name, tree):
    for k, leaf in enumerate(jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))):
        saved[f"{name}.{k}"] = np.asarray(leaf)


# --- double pendulum: 8 members, rod 2's mass varying (inertia scaled with it) ----------
OPTS = dict(formulation="rA", t_end=0.05, h=1e-3)  # 50 steps, gen_alpha
model = mbd.models.double_pendulum()
batch = mbd.stack_models([model] * 8)
masses = np.stack([np.full(8, 78.0), np.linspace(30.0, 48.0, 8)], axis=1)
# identification: 8 "experiments", the pendulum released from 8 angles about x (the same
# program as `batch`: only array values differ); rod 2's mass is shared
angle = np.linspace(-0.3, 0.3, 8)
R = np.zeros((8, 3, 3))
R[:, 0, 0], R[:, 1, 1], R[:, 1, 2], R[:, 2, 1], R[:, 2, 2] = (
    1,
    np.cos(angle),
    -np.sin(angle),
    np.sin(angle),
    np.cos(angle),
)
experiments = eqx.tree_at(
    lambda b: (b.r0, b.A0),
    batch,
    (jnp.einsum("bij,kj->bki", R, model.r0), jnp.einsum("bij,kjl->bkil", R, model.A0)),
)


def with_masses(m, models=batch):
    scale = m / model.mass
    return eqx.tree_at(
        lambda b: (b.mass, b.inertia), models, (m, model.inertia * scale[..., None, None])
    )


def loss(m, devices):
    sol = mbd.simulate_batch(with_masses(m), devices=devices, **OPTS)
    return jnp.mean(jnp.sum(sol.r[:, -1] ** 2, axis=(1, 2)))


def shared(m2):  # rod 1 known (78 kg), rod 2 shared; float64 (not weak): the same programs
    return jnp.stack([jnp.full(8, 78.0, dtype=jnp.float64), jnp.broadcast_to(m2, (8,))], axis=1)


def fit_loss(m2, measured, devices):  # mean squared residual over every experiment
    sol = mbd.simulate_batch(with_masses(shared(m2), experiments), devices=devices, **OPTS)
    return jnp.mean((sol.r - measured) ** 2)


truth = with_masses(shared(45.0), experiments)  # rod 2 of 45 kg made the "measurements"
sol = mbd.simulate_batch(with_masses(masses), devices=everywhere, **OPTS)
assert sol.r.sharding.mesh.devices.size == 2 and sol.r.is_fully_replicated
keep("run", (sol.r, sol.A, sol.rdot, sol.omega))
keep("run_iterations", sol.iterations)
mark("double pendulum run")
# the same batch in joint coordinates (MuJoCo's semi-implicit Euler: the cheapest program)
JOPTS = dict(formulation="joint", integrator="euler", t_end=0.05, h=1e-3)
joint = mbd.simulate_batch(with_masses(masses), devices=everywhere, **JOPTS)
assert joint.r.is_fully_replicated and joint.formulation == "joint"
keep("joint_run", (joint.r, joint.A, joint.qpos, joint.qvel))
mark("double pendulum run in joint coordinates")
# compiled once per process: new values, and a Mesh as devices=, reuse the program
with count_compilations() as counts:
    again = mbd.simulate_batch(with_masses(masses * [1.0, 1.1]), devices=everywhere, **OPTS)
    mesh = jax.sharding.Mesh(np.array(everywhere), ("members",))
    via_mesh = mbd.simulate_batch(with_masses(masses), devices=mesh, **OPTS)
    measured = mbd.simulate_batch(truth, devices=everywhere, **OPTS).r
    keep("measured", measured)
    jax.block_until_ready((again.r, via_mesh.r, measured))
assert counts == {"trace": 0, "compile": 0}, counts
assert not np.allclose(np.asarray(again.r), np.asarray(sol.r))
np.testing.assert_array_equal(np.asarray(via_mesh.r), np.asarray(sol.r))

# member 5 fails (massless second rod: a singular Newton matrix), the others do not
bad = masses.copy()
bad[5, 1] = 0.0
failed = mbd.simulate_batch(with_masses(bad), devices=everywhere, **OPTS)
ok = np.asarray(failed.result == mbd.RESULTS.successful)
assert ok.tolist() == [k != 5 for k in range(8)], ok
step = np.asarray(failed.failed_step)
assert step[5] >= 0 and np.all(np.delete(step, 5) == -1), step
keep("failed_r", failed.r)
keep("failed_status", (failed.status, failed.failed_step))
for gather in (True, False):  # every process raises, also when it holds 4 members
    try:
        mbd.simulate_batch(with_masses(bad), devices=everywhere, throw=True, gather=gather, **OPTS)
        raise AssertionError("throw=True did not raise")
    except mbd.SolverError as e:
        assert "1 of 8 batch members failed: member 5:" in str(e), e
# gather=False: each process keeps its own 4 members, no communication
mine = mbd.simulate_batch(with_masses(bad), devices=everywhere, gather=False, **OPTS)
(shard,) = mine.status.addressable_shards
rows = np.arange(8)[shard.index[0]]
assert rows.tolist() == list(range(4 * process_id, 4 * process_id + 4)), rows
np.testing.assert_array_equal(np.asarray(shard.data), np.asarray(failed.status)[rows])
try:  # 7 members on 2 devices: no equal shards to keep
    mbd.simulate_batch(mbd.stack_models([model] * 7), gather=False, **OPTS)
    raise AssertionError("an indivisible batch with gather=False did not raise")
except ValueError as e:
    assert "gather=False needs a batch divisible by the 2 devices" in str(e), e
mark("double pendulum failures")


# --- policy: one MLP shared by 4 carts on a rail (1 body), 5 steps ------------------------
b = mbd.ModelBuilder("cart", gravity=(0.0, 0.0, -9.81))
b.add_body("cart", mass=1.0, inertia=[0.01] * 3, r=(0, 0, 0))
b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
b.add_actuator("push", joint="rail", kind="motor", gear=1.0)
cart = b.build()
carts = mbd.stack_models(
    [
        eqx.tree_at(lambda m: m.rdot0, cart, cart.rdot0.at[0, 0].set(v))
        for v in (0.1, -0.2, 0.3, 0.0)
    ]
)


class Policy(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, obs):  # obs: the rail's position and speed
        return self.mlp(obs)


policy = Policy(eqx.nn.MLP(2, 1, 4, 1, activation=jnp.tanh, key=jax.random.key(0)))
POPTS = dict(integrator="rkmk", t_end=0.05, h=0.01)


def policy_loss(p, devices):  # value, gradient and the run from one forward program
    sol = mbd.simulate_batch(carts, policy=p, devices=devices, **POPTS)
    return jnp.mean(sol.r[:, :, 0, 0] ** 2), (sol.r, sol.rdot)


steer = eqx.filter_value_and_grad(policy_loss, has_aux=True)
if FULL:
    # the gradient of the batch mean, all-reduced by XLA: replicated, as one process's
    grad = jax.grad(loss)(jnp.asarray(masses), everywhere)
    assert grad.is_fully_replicated, grad.sharding
    keep("grad", grad)
    mark("double pendulum gradient")
    # identification under the user's own jax.jit around the whole loss: value and
    # gradient with respect to rod 2's mass, shared by the 8 experiments
    fit_program = jax.jit(jax.value_and_grad(fit_loss), static_argnums=2)
    fit = fit_program(39.0, measured, tuple(everywhere))
    assert fit[1].is_fully_replicated, fit[1].sharding
    keep("fit_value", fit[0])
    keep("fit_grad", fit[1])
    mark("identification under jit")
    (value, run), grad = steer(policy, everywhere)
    keep("policy_value", value)
    keep("policy_run", run)
    keep("policy_grad", grad)
    mark("policy")

# --- kinematics: 2 rods turned by a driver at 2 and 3 rad/s, 2 steps ----------------------
b = mbd.ModelBuilder("crank")
b.add_body("rod", mass=2.0, inertia=[0.01, 1.0, 1.0], r=[0, 1.0, 0], axes=([0, 1, 0], [0, 0, 1]))
b.revolute("pin", body_i="ground", body_j="rod", point=[0, 0, 0], axis=[1, 0, 0])
b.rotation_driver("turn", body_i="ground", body_j="rod", axis=[1, 0, 0], angle="2*t")
crank = b.build()
cranks = eqx.tree_at(
    lambda m: m.drivers[0].constants,
    mbd.stack_models([crank] * 2),
    jnp.array([2.0, 3.0])[:, None, None],
)
KOPTS = dict(t_end=0.002, h=1e-3)
kin = mbd.kinematics_batch(cranks, devices=everywhere, **KOPTS)
assert kin.r.is_fully_replicated
keep("kinematics", (kin.r, kin.A, kin.rdot, kin.omega))
mark("kinematics")

# --- the single-process references, split between the processes (no collective) -----------
if process_id == 0:
    if FULL:
        (value, run), grad = steer(policy, here)
        keep("ref_policy_value", value)
        keep("ref_policy_run", run)
        keep("ref_policy_grad", grad)
    ref_joint = mbd.simulate_batch(with_masses(masses), devices=here, **JOPTS)
    keep("ref_joint_run", (ref_joint.r, ref_joint.A, ref_joint.qpos, ref_joint.qvel))
    ref_kin = mbd.kinematics_batch(cranks, devices=here, **KOPTS)
    keep("ref_kinematics", (ref_kin.r, ref_kin.A, ref_kin.rdot, ref_kin.omega))
else:
    ref = mbd.simulate_batch(with_masses(masses), devices=here, **OPTS)
    keep("ref_run", (ref.r, ref.A, ref.rdot, ref.omega))
    keep("ref_run_iterations", ref.iterations)
    ref_measured = mbd.simulate_batch(truth, devices=here, **OPTS).r
    keep("ref_measured", ref_measured)
    if FULL:
        keep("ref_grad", jax.grad(loss)(jnp.asarray(masses), here))
        value, grad = jax.value_and_grad(fit_loss)(39.0, ref_measured, tuple(here))
        keep("ref_fit_value", value)
        keep("ref_fit_grad", grad)
mark("references")
np.savez(out, **saved)
print("OK", process_id, flush=True)
