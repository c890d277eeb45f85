import sys, tempfile
from pathlib import Path
import numpy as np
from benchmarks._harness import interleaved
from benchmarks.engines.joint_coordinates import model_file, _jaxmbd_with_qvel, _qpos
import jax, jax.numpy as jnp
import jaxmbd as mbd
name = sys.argv[1]
sizes = [int(s) for s in sys.argv[2].split(",")]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
F = model_file(name, Path(tempfile.mkdtemp()))
with_qvel = _jaxmbd_with_qvel(F)
opts = dict(formulation="joint", t_end=n * F["h"], h=F["h"], integrator="rk", limits="none")
def final_qpos(v):
    return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]
rng = np.random.default_rng(0)
qv = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1, 1, size=(max(sizes), F["nv"])))
single = mbd.jit(final_qpos)
batch = mbd.jit(jax.vmap(final_qpos))
calls = {"single": lambda: jax.block_until_ready(single(qv[0]))}
for B in sizes:
    calls[B] = (lambda B: lambda: jax.block_until_ready(batch(qv[:B])))(B)
import time, statistics, os
for f in calls.values(): f()
wall = {k: [] for k in calls}; cpu = {k: [] for k in calls}
for _ in range(int(os.environ.get("REPEATS", "5"))):
    for k, f in calls.items():
        w, c = time.perf_counter(), time.process_time(); f()
        wall[k].append(time.perf_counter() - w); cpu[k].append(time.process_time() - c)
med = lambda d, k: statistics.median(d[k])
s, sc = n / med(wall, "single"), n / med(cpu, "single")
print(f"{name}: single {s:,.0f} steps/s (cpu-time {sc:,.0f}); load {os.getloadavg()[0]:.1f}")
for B in sizes:
    b, bc = B * n / med(wall, B), B * n / med(cpu, B)
    print(f"  B={B}: {b:,.0f} model-steps/s  {b/s:.2f}x   cpu-time: {bc:,.0f} {bc/sc:.2f}x")
