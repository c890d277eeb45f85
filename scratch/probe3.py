import sys, tempfile, time, statistics, os
from pathlib import Path
import numpy as np
from benchmarks.engines.joint_coordinates import model_file, _jaxmbd_with_qvel, _qpos
import jax, jax.numpy as jnp
import jaxmbd as mbd
name = sys.argv[1]; B = int(sys.argv[2]); n = 1000
F = model_file(name, Path(tempfile.mkdtemp()))
with_qvel = _jaxmbd_with_qvel(F)
opts = dict(formulation="joint", t_end=n * F["h"], h=F["h"], integrator="rk", limits="none")
def final_qpos(v):
    return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]
rng = np.random.default_rng(0)
qv = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1, 1, size=(B, F["nv"])))
variants = {
  "default": {"xla_cpu_use_fusion_emitters": False},
  "emitters": {"xla_cpu_use_fusion_emitters": True},
  "w512": {"xla_cpu_use_fusion_emitters": False, "xla_cpu_prefer_vector_width": 512},
  "w512e": {"xla_cpu_use_fusion_emitters": True, "xla_cpu_prefer_vector_width": 512},
}
calls = {"single": (jax.jit(final_qpos).lower(qv[0]).compile({"xla_cpu_use_fusion_emitters": False}), qv[0])}
low = jax.jit(jax.vmap(final_qpos)).lower(qv)
for k, o in variants.items():
    try:
        calls[k] = (low.compile(o), qv)
    except Exception as e:
        print(k, "failed", str(e)[:200])
for f, a in calls.values(): f(a).block_until_ready()
cpu = {k: [] for k in calls}
for _ in range(5):
    for k, (f, a) in calls.items():
        c = time.process_time(); f(a).block_until_ready(); cpu[k].append(time.process_time() - c)
s = n / statistics.median(cpu["single"])
print(f"single {s:,.0f} cpu-steps/s load {os.getloadavg()[0]:.1f}")
for k in calls:
    if k != "single":
        b = B * n / statistics.median(cpu[k]); print(f"  {k}: {b:,.0f} {b/s:.2f}x")
