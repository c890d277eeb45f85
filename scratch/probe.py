import sys, time, tempfile, statistics
from pathlib import Path
import numpy as np
from benchmarks._harness import interleaved
from benchmarks.engines.joint_coordinates import model_file, _jaxmbd_with_qvel, _qpos
import jax, jax.numpy as jnp
import jaxmbd as mbd

name = sys.argv[1] if len(sys.argv) > 1 else "double_pendulum"
B = int(sys.argv[2]) if len(sys.argv) > 2 else 256
n = 1000
tmp = Path(tempfile.mkdtemp())
F = model_file(name, tmp)
with_qvel = _jaxmbd_with_qvel(F)
opts = dict(formulation="joint", t_end=n * F["h"], h=F["h"], integrator="rk", limits="none")
def final_qpos(v):
    return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]
rng = np.random.default_rng(0)
qvel = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1, 1, size=(B, F["nv"])))
single = mbd.jit(final_qpos)
batch = mbd.jit(jax.vmap(final_qpos))
if "--hlo" in sys.argv:
    txt = jax.jit(jax.vmap(final_qpos)).lower(qvel).compile().as_text()
    Path(f"scratch/hlo_{name}_{B}.txt").write_text(txt)
t = interleaved({"single": lambda: jax.block_until_ready(single(qvel[0])),
                 "batch": lambda: jax.block_until_ready(batch(qvel))}, repeats=5)
s = n / t["single"].median; b = B * n / t["batch"].median
print(f"{name} B={B}: single {s:,.0f} steps/s  batch {b:,.0f} model-steps/s  ratio {b/s:.2f}")
if "--check" in sys.argv:
    a = np.asarray(batch(qvel)); b = np.stack([np.asarray(single(v)) for v in qvel[:8]])
    print("max |batch - single| over 8 members:", np.max(np.abs(a[:8]-b)))
