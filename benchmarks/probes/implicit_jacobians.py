"""The ``implicit`` joint step with K, D and the forces from one forward-mode evaluation
(the library's) against three traced copies (the forces, jacfwd in qvel, jacfwd in q):
lowered op count, compile time and step time of jit(env.step), alternated in one process.

    PYTHONPATH=$PWD python benchmarks/probes/implicit_jacobians.py hopper hop [rounds]
"""

import statistics
import sys
import time

import jax
import jax.numpy as jnp

from jaxmbd import envs
from jaxmbd.joint_space import initial_joint_state
from jaxmbd.joint_space.dynamics import accelerations, applied_generalised_forces
from jaxmbd.joint_space.steppers import LinearlyImplicitEuler
from jaxmbd.tree import integrate_positions

jax.config.update("jax_enable_compilation_cache", False)  # compile times, not cache hits


class ThreeCopies(LinearlyImplicitEuler):
    """K by its own jacfwd of the applied forces, D by another (the forces traced thrice)."""

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h):
        acc = accelerations(model, tree, loops, qpos, qvel, t, step=h, velocity_jacobian=True)

        def applied_at(d):
            q = integrate_positions(tree, qpos, d, 1.0)
            return applied_generalised_forces(model, tree, q, qvel, t)

        return acc._replace(position_jacobian=jax.jacfwd(applied_at)(jnp.zeros(tree.nv)))


domain, task = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
extra = {"settle_steps": 0} if domain == "cheetah" else {}
variants = {"one_evaluation": "implicit", "three_copies": ThreeCopies()}
results = {k: [] for k in variants}
for _round in range(rounds):
    for name, integrator in variants.items():
        env = envs.make(domain, task, integrator=integrator, **extra)
        s = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
        s = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), s)
        s = s.replace(pipeline_state=initial_joint_state(env._run_model()))
        a = 0.3 * jnp.ones(env.action_size)
        t0 = time.time()
        low = jax.jit(env.step).lower(s, a)
        tl = time.time() - t0
        ops = low.as_text().count("= stablehlo.")
        t0 = time.time()
        c = low.compile()
        tc = time.time() - t0
        out = c(s, a)
        jax.block_until_ready(out)
        ts = []
        for _ in range(9):
            t0 = time.time()
            out = c(out, a)
            jax.block_until_ready(out)
            ts.append(time.time() - t0)
        results[name].append((ops, tl, tc, statistics.median(ts), out))
        print(
            f"{domain}/{task} {name}: ops {ops}, lower {tl:.1f} s, compile {tc:.1f} s, "
            f"step {1e3 * statistics.median(ts):.3f} ms",
            flush=True,
        )
a_, b_ = results["one_evaluation"][-1][4], results["three_copies"][-1][4]
print(
    "max |qpos diff| after 10 steps",
    float(jnp.max(jnp.abs(a_.pipeline_state.qpos - b_.pipeline_state.qpos))),
    "obs",
    float(jnp.max(jnp.abs(a_.obs - b_.obs))),
)
