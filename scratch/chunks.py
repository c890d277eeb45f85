import sys, tempfile, time, statistics, os
from pathlib import Path
import numpy as np
from benchmarks.engines.joint_coordinates import model_file, _jaxmbd_with_qvel, _qpos
import jax, jax.numpy as jnp
import jaxmbd as mbd
import jaxmbd.joint_space.run as run
name = sys.argv[1]; B = int(sys.argv[2]); chunks = [int(c) for c in sys.argv[3].split(",")]; n = 1000
F = model_file(name, Path(tempfile.mkdtemp()))
with_qvel = _jaxmbd_with_qvel(F)
opts = dict(formulation="joint", t_end=n * F["h"], h=F["h"], integrator="rk", limits="none")
def final_qpos(v):
    return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]
rng = np.random.default_rng(0)
qv = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1, 1, size=(B, F["nv"])))
calls = {"single": (jax.jit(final_qpos), qv[0])}
for c in chunks:
    run.BATCH_CHUNK = c
    f = jax.jit(jax.vmap(final_qpos)); f(qv).block_until_ready()
    calls[c] = (f, qv)
for f, a in calls.values(): f(a).block_until_ready()
cpu = {k: [] for k in calls}; wall = {k: [] for k in calls}
for _ in range(5):
    for k, (f, a) in calls.items():
        c, w = time.process_time(), time.perf_counter(); f(a).block_until_ready(); cpu[k].append(time.process_time() - c); wall[k].append(time.perf_counter() - w)
s = n / statistics.median(cpu["single"]); sw = n / statistics.median(wall["single"])
print(f"{name} B={B}: single {s:,.0f} cpu-steps/s ({sw:,.0f} wall) load {os.getloadavg()[0]:.1f}")
for k in calls:
    if k != "single":
        b = B * n / statistics.median(cpu[k]); bw = B * n / statistics.median(wall[k]); print(f"  chunk {k}: {b:,.0f} {b/s:.2f}x  (wall {bw:,.0f} {bw/sw:.2f}x)")
