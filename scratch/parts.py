import sys, tempfile, time, statistics, os
from pathlib import Path
import numpy as np
from benchmarks.engines.joint_coordinates import model_file
import jax, jax.numpy as jnp
import jaxmbd as mbd
from jaxmbd._batch_last import batch_last
from jaxmbd.joint_space.run import model_tree
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.tree import poses, mass_matrix, bias_forces, cholesky_solve, integrate_positions
name = sys.argv[1]; B = int(sys.argv[2])
F = model_file(name, Path(tempfile.mkdtemp()))
import warnings; warnings.simplefilter("ignore")
model = mbd.load_model(F["path"], keyframe=0)
from jaxmbd.contact import with_contact
model = mbd.with_limits(model, "none") if hasattr(mbd, "with_limits") else model
tree, loops = model_tree(model)
nv = tree.nv
def rep(f):
    # f(q, v) -> array like v ; iterate 100 times feeding back
    def run(q, v):
        def body(i, c):
            q, v = c
            out = f(q, v)
            return (q + 1e-9 * out[: q.shape[0]] if out.shape[0] >= q.shape[0] else q + 1e-9 * jnp.sum(out), v)
        return jax.lax.fori_loop(0, 100, body, (q, v))[0]
    return run
parts = {
  "poses": lambda q, v: poses(tree, q).x.reshape(-1),
  "mass_matrix": lambda q, v: mass_matrix(tree, poses(tree, q), model.mass, model.inertia).reshape(-1),
  "bias": lambda q, v: bias_forces(tree, poses(tree, q), model.mass, model.inertia, model.gravity, v),
  "accelerations": lambda q, v: accelerations(model, tree, loops, q, v, 0.0, step=1e-3).qacc,
}
rng = np.random.default_rng(0)
q = jnp.asarray(rng.uniform(-1, 1, (B, tree.nq))); v = jnp.asarray(rng.uniform(-1, 1, (B, nv)))
calls = {}
for k, f in parts.items():
    r = rep(f)
    s = jax.jit(r); bl = jax.jit(jax.vmap(batch_last(r))); vm = jax.jit(jax.vmap(r))
    calls[(k, "single")] = (lambda s: lambda: jax.block_until_ready(s(q[0], v[0])))(s)
    calls[(k, "vmap")] = (lambda s: lambda: jax.block_until_ready(s(q, v)))(vm)
    calls[(k, "last")] = (lambda s: lambda: jax.block_until_ready(s(q, v)))(bl)
for f in calls.values(): f()
cpu = {k: [] for k in calls}
for _ in range(7):
    for k, f in calls.items():
        c = time.process_time(); f(); cpu[k].append(time.process_time() - c)
for k in parts:
    s = statistics.median(cpu[(k, "single")]) / 100 * 1e9
    vm = statistics.median(cpu[(k, "vmap")]) / 100 / B * 1e9
    la = statistics.median(cpu[(k, "last")]) / 100 / B * 1e9
    print(f"{k:14s} single {s:7.0f} ns  vmap {vm:6.0f} ns/member  last {la:6.0f} ns/member  ({s/la:.1f}x)")
