# ruff: noqa: E402, E501
"""One model's joint-formulation RK4 run (the engines harness's program: initial qvel ->
final qpos, 1000 steps) with another tree's jaxmbd (imported as jaxmbd_main) and this
one's, in one process, runs alternated, medians of wall and CPU time. From this tree's root:

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
            progs = {"main": program(old, F), "branch": program(new, F)}
            for fn in progs.values():
                jax.block_until_ready(fn(v))
            wall = {k: [] for k in progs}
            cpu = {k: [] for k in progs}
            for _ in range(9):
                for key, fn in progs.items():
                    w, c = time.perf_counter(), time.process_time()
                    jax.block_until_ready(fn(v))
                    wall[key].append(time.perf_counter() - w)
                    cpu[key].append(time.process_time() - c)
            diff = float(jnp.max(jnp.abs(progs["main"](v) - progs["branch"](v))))
            rate = {k: (STEPS / statistics.median(wall[k]), STEPS / statistics.median(cpu[k]))
                    for k in progs}  # fmt: skip
            print(f"{name}: main {rate['main'][0]:,.0f} steps/s ({rate['main'][1]:,.0f} per "
                  f"CPU-s), branch {rate['branch'][0]:,.0f} ({rate['branch'][1]:,.0f}); "
                  f"branch/main {rate['branch'][0] / rate['main'][0]:.2f} (CPU time "
                  f"{rate['branch'][1] / rate['main'][1]:.2f}); |final qpos diff| {diff:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
