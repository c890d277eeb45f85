"""Compile time and step time of an env's jit(step) (batch 1) and jit(vmap(step)).

PYTHONPATH=$PWD python benchmarks/probes/env_step_batch.py hopper hop 32 [integrator]
"""

import statistics
import sys
import time

import jax
import jax.numpy as jnp

from jaxmbd import envs
from jaxmbd.joint_space import initial_joint_state

domain, task, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = {"integrator": sys.argv[4]} if len(sys.argv) > 4 else {}
env = envs.make(domain, task, **opts)
keys = jax.random.split(jax.random.PRNGKey(0), batch)
# states from the model's own start (no settling program), the same for every member
s1 = jax.eval_shape(env.reset, keys[0])

st = initial_joint_state(env._run_model())
s1 = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), s1)
s1 = s1.replace(pipeline_state=st)
sB = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), s1)
a1 = 0.3 * jnp.ones(env.action_size)
aB = jnp.broadcast_to(a1, (batch, env.action_size))
for name, f, s, a in (
    ("single", jax.jit(env.step), s1, a1),
    (f"vmap{batch}", jax.jit(jax.vmap(env.step)), sB, aB),
):
    t0 = time.time()
    c = f.lower(s, a).compile()
    tc = time.time() - t0
    h = c.as_text()
    open(f"/tmp/envspeed_{domain}_{name}.hlo", "w").write(h)
    out = c(s, a)
    jax.block_until_ready(out)
    ts = []
    for _ in range(7):
        t0 = time.time()
        out = c(out, a)
        jax.block_until_ready(out)
        ts.append(time.time() - t0)
    med = statistics.median(ts)
    n = 1 if name == "single" else batch
    print(
        f"{domain}/{task} {env.integrator} {name}: compile {tc:.1f} s, step {1e3 * med:.2f} ms, "
        f"per member {1e3 * med / n:.3f} ms, finite {bool(jnp.all(jnp.isfinite(out.obs)))}",
        flush=True,
    )
