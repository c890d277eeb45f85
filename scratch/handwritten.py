"""Hand-written RK4 of a planar double pendulum (closed-form M, bias; 2x2 solve), batch-last
(arrays (2, B)) against batch-first (B, 2) under vmap and the single model, 1000 steps."""
import sys, os
from scratch.vsin import sincos
POLY = os.environ.get("POLY") == "1"
import jax, jax.numpy as jnp, numpy as np
import jaxmbd  # flags
from benchmarks._harness import interleaved
m1, m2, l1, a1, a2, I1, I2, g = 1.0, 0.5, 2.0, 1.0, 0.5, 0.33, 0.04, 9.81
def acc(q, v):  # q, v: (2, ...) trailing batch
    if POLY:
        (s0,_),(s1,_),(s,c) = sincos(q[0]), sincos(q[1]), sincos(q[0]-q[1])
        return _acc(s0,s1,s,c,v)
    return _acc(jnp.sin(q[0]),jnp.sin(q[1]),jnp.sin(q[0]-q[1]),jnp.cos(q[0]-q[1]),v)
def _acc(s0,s1,s,c,v):

    M11 = I1 + m1 * a1**2 + m2 * l1**2
    M12 = m2 * l1 * a2 * c
    M22 = I2 + m2 * a2**2
    f1 = -m2 * l1 * a2 * s * v[1] ** 2 - (m1 * a1 + m2 * l1) * g * s0
    f2 = m2 * l1 * a2 * s * v[0] ** 2 - m2 * a2 * g * s1
    det = M11 * M22 - M12 * M12
    return jnp.stack([(M22 * f1 - M12 * f2) / det, (M11 * f2 - M12 * f1) / det])
def step(q, v, h):
    k1q, k1v = v, acc(q, v)
    k2q, k2v = v + 0.5*h*k1v, acc(q + 0.5*h*k1q, v + 0.5*h*k1v)
    k3q, k3v = v + 0.5*h*k2v, acc(q + 0.5*h*k2q, v + 0.5*h*k2v)
    k4q, k4v = v + h*k3v, acc(q + h*k3q, v + h*k3v)
    return q + h/6*(k1q+2*k2q+2*k3q+k4q), v + h/6*(k1v+2*k2v+2*k3v+k4v)
def run(q, v, n=1000, h=1e-3):
    (q, v), _ = jax.lax.scan(lambda c, _: (step(*c, h), None), (q, v), None, n)
    return q
B = int(sys.argv[1]) if len(sys.argv) > 1 else 256
rng = np.random.default_rng(0)
q = jnp.asarray(rng.uniform(-1, 1, (B, 2))); v = jnp.asarray(rng.uniform(-1, 1, (B, 2)))
single = jax.jit(run)
first = jax.jit(jax.vmap(run))
last = jax.jit(lambda q, v: run(q.T, v.T).T)
assert np.allclose(first(q, v), last(q, v), atol=1e-12, rtol=0)
t = interleaved({"single": lambda: jax.block_until_ready(single(q[0], v[0])),
                 "vmap": lambda: jax.block_until_ready(first(q, v)),
                 "last": lambda: jax.block_until_ready(last(q, v))}, repeats=7)
s = 1000 / t["single"].median
for k in ("vmap", "last"):
    b = B * 1000 / t[k].median
    print(f"B={B} {k}: {b:,.0f} model-steps/s, {b/s:.2f}x single ({s:,.0f} steps/s)")
