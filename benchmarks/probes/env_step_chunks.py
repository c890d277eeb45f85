"""A batch of env steps as one vmap against lax.map over chunks of members (vmap inside a
chunk): compile and step time per member.

    PYTHONPATH=$PWD python benchmarks/probes/env_step_chunks.py hopper hop 256 1 8 0
(chunk 0: one vmap over the whole batch)
"""

import statistics
import sys
import time

import jax
import jax.numpy as jnp

from jaxmbd import envs
from jaxmbd.joint_space import initial_joint_state

domain, task, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
chunks = [int(c) for c in sys.argv[4:]]
env = envs.make(domain, task)
s1 = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
s1 = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), s1)
s1 = s1.replace(pipeline_state=initial_joint_state(env._run_model()))
sB = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), s1)
aB = 0.3 * jnp.ones((batch, env.action_size))
for chunk in chunks:
    if chunk == 0:
        f = jax.jit(jax.vmap(env.step))
    else:
        f = jax.jit(
            lambda s, a, c=chunk: jax.lax.map(lambda sa: env.step(*sa), (s, a), batch_size=c)
        )
    t0 = time.time()
    c = f.lower(sB, aB).compile()
    tc = time.time() - t0
    out = c(sB, aB)
    jax.block_until_ready(out)
    ts = []
    for _ in range(5):
        t0 = time.time()
        out = c(out, aB)
        jax.block_until_ready(out)
        ts.append(time.time() - t0)
    med = statistics.median(ts)
    print(
        f"{domain}/{task} batch {batch} chunk {chunk}: compile {tc:.1f} s, "
        f"step {1e3 * med:.1f} ms, "
        f"per member {1e3 * med / batch:.3f} ms, finite {bool(jnp.all(jnp.isfinite(out.obs)))}",
        flush=True,
    )
