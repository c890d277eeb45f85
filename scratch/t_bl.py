import re
import jax, jax.numpy as jnp, numpy as np
import jaxmbd
from jaxmbd._batch_last import batch_last
import scratch.handwritten_mod as hw
f = batch_last(hw.run)
q = jnp.asarray(np.random.default_rng(0).uniform(-1,1,(16,2))); v = q*0.3
a = jax.jit(jax.vmap(hw.run))(q, v); b = jax.jit(jax.vmap(f))(q, v)
print(np.max(np.abs(a-b)))
print(jax.make_jaxpr(jax.vmap(f))(q, v).jaxpr.eqns[0].params.keys())
g = jax.grad(lambda q: jnp.sum(jax.vmap(f)(q, v)**2))(q)
g0 = jax.grad(lambda q: jnp.sum(jax.vmap(hw.run)(q, v)**2))(q)
print(np.max(np.abs(g-g0)))
txt = jax.jit(jax.vmap(f)).lower(q, v).compile().as_text()
print(txt.count("transpose"), re.findall(r"f64\[[0-9,]+\]", txt)[:20] if False else "")
