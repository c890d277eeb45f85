# ruff: noqa: E402, E501
"""One model's joint-formulation RK4 run (the engines harness's program: initial qvel ->
final qpos, 1000 steps) and ``jax.vmap`` of it over 256 members, with another tree's jaxmbd
(imported as jaxmbd_main) and this one's, in one process, runs alternated, medians of wall
and CPU time. From this tree's root:

    JAXMBD_OTHER=/work/main python -m benchmarks.probes.single_joint_ab double_pendulum arm3
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

# isort: off
import benchmarks.probes._other_tree  # noqa: F401  (jaxmbd_main; caches off)

# isort: on
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxmbd_main as old
import numpy as np

import jaxmbd as new
from benchmarks.engines.joint_coordinates import model_file

STEPS = 1000


def program(pkg, F):
    base = pkg.load_model(F["path"], keyframe=0)
    opts = dict(formulation="joint", integrator="rk", t_end=STEPS * F["h"], h=F["h"],
                limits="none")  # fmt: skip

    def final_qpos(v):
        model = eqx.tree_at(lambda m: m.tree.qvel_init, base, v)
        return pkg.simulate(model, **opts).qpos[-1]

    return pkg.jit(final_qpos)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:]:
            F = model_file(name, Path(tmp))
            v = jnp.asarray(F["v0"]) + 0.1
            rng = np.random.default_rng(0)
            vs = jnp.asarray(F["v0"] + 0.5 * rng.uniform(-1.0, 1.0, (256, F["nv"])))
            progs = {"main": program(old, F), "branch": program(new, F)}
            batch = {k: jax.jit(jax.vmap(f)) for k, f in progs.items()}
            for fn in progs.values():
                jax.block_until_ready(fn(v))
            for fn in batch.values():
                jax.block_until_ready(fn(vs))
            wall = {k: [] for k in progs}
            cpu = {k: [] for k in progs}
            for key in batch:
                wall[key + " batch"], cpu[key + " batch"] = [], []
            for _ in range(7):
                for key, fn in progs.items():
                    w, c = time.perf_counter(), time.process_time()
                    jax.block_until_ready(fn(v))
                    wall[key].append(time.perf_counter() - w)
                    cpu[key].append(time.process_time() - c)
                    w, c = time.perf_counter(), time.process_time()
                    jax.block_until_ready(batch[key](vs))
                    wall[key + " batch"].append((time.perf_counter() - w) / 256)
                    cpu[key + " batch"].append((time.process_time() - c) / 256)
            diff = float(jnp.max(jnp.abs(progs["main"](v) - progs["branch"](v))))
            rate = {k: (STEPS / statistics.median(wall[k]), STEPS / statistics.median(cpu[k]))
                    for k in wall}  # fmt: skip
            print(f"{name}: main {rate['main'][0]:,.0f} steps/s ({rate['main'][1]:,.0f} per "
                  f"CPU-s), branch {rate['branch'][0]:,.0f} ({rate['branch'][1]:,.0f}); "
                  f"branch/main {rate['branch'][0] / rate['main'][0]:.2f} (CPU time "
                  f"{rate['branch'][1] / rate['main'][1]:.2f}); |final qpos diff| {diff:.1e}")  # fmt: skip
            for key in progs:
                b = rate[key + " batch"]
                print(f"  {key} batch 256: {b[0]:,.0f} model-steps/s ({b[0] / rate[key][0]:.2f}x "
                      f"single), per CPU-s {b[1]:,.0f} ({b[1] / rate[key][1]:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
