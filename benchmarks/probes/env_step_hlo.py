"""Op counts of the lowered (and optionally compiled) env step, single and batched."""

import collections
import re
import sys
import time

import jax
import jax.numpy as jnp

from jaxmbd import envs

domain, task = sys.argv[1], sys.argv[2]
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 0
compile_ = len(sys.argv) > 4 and sys.argv[4] == "compile"
env = envs.make(domain, task)
key = jax.random.PRNGKey(0)
step = env.step
if batch:
    keys = jax.random.split(key, batch)
    s = jax.eval_shape(jax.vmap(env.reset), keys)
    a = jnp.zeros((batch, env.action_size))
    step = jax.vmap(env.step)
else:
    s = jax.eval_shape(env.reset, key)
    a = jnp.zeros(env.action_size)
t0 = time.time()
low = jax.jit(step).lower(s, a)
print("trace+lower", round(time.time() - t0, 1))
txt = low.as_text()
ops = collections.Counter(re.findall(r"= (stablehlo\.[a-z_]+)", txt))
print("total ops", sum(ops.values()))
print(ops.most_common(14))
for name in ("while", "custom_call", "gather", "scatter", "case", "if"):
    print(name, ops.get("stablehlo." + name, 0))
print("custom call targets", collections.Counter(re.findall(r"call_target_name = \"(\w+)\"", txt)))
if compile_:
    t0 = time.time()
    c = low.compile()
    print("compile", round(time.time() - t0, 1))
    h = c.as_text()
    open(f"/tmp/envspeed_{domain}_{batch}.hlo", "w").write(h)
    print(
        "compiled while",
        h.count(" while("),
        "custom-call",
        h.count("custom-call("),
        "gather",
        h.count(" gather("),
        "scatter",
        h.count(" scatter("),
        "conditional",
        h.count("conditional("),
    )
