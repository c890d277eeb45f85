"""A batch of 256 on tiles of members with and without buffers for the entries several
equations read (``jaxmbd.compiled.batch_lanes.MATERIALIZE_GROUP``), in one process: each setting's
program traced and compiled afresh, then timed in alternation (medians of the process's
CPU time), with the largest difference of the final states.

    PYTHONPATH=$PWD python -m benchmarks.probes.tile_buffers MODEL STEPS GROUP [GROUP ...]

MODEL: a model of ``benchmarks.engines joint-coordinates`` (its file and start, rkmk,
limits off, initial rates drawn per member); GROUP: an integer or ``None`` (no buffers).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
import jaxmbd.compiled.batch_lanes as lanes
from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, model_file

BATCH = 256


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    name, steps, groups = argv[0], int(argv[1]), argv[2:]
    F = model_file(name, Path(tempfile.mkdtemp()))
    F["qvel"] = F["v0"]
    V = jnp.asarray(0.1 * np.random.default_rng(0).normal(size=(BATCH, F["nv"])))
    programs = {}
    for g in groups:
        lanes.MATERIALIZE_GROUP = None if g == "None" else int(g)
        jax.clear_caches()
        with_qvel = _jaxmbd_with_qvel(F)

        def final(v, with_qvel=with_qvel):
            sol = mbd.simulate(with_qvel(v), formulation="joint", integrator="rkmk",
                               limits="none", t_end=steps * F["h"], h=F["h"])  # fmt: skip
            return sol.qpos[-1]

        t0 = time.perf_counter()
        programs[g] = jax.jit(jax.vmap(final)).lower(V).compile()
        print(f"group {g}: trace + compile {time.perf_counter() - t0:.1f} s", flush=True)
    cpu = {g: [] for g in programs}
    outs = {}
    for _ in range(5):
        for g, run in programs.items():
            c0 = time.process_time()
            outs[g] = jax.block_until_ready(run(V))
            cpu[g].append(time.process_time() - c0)
    for g in programs:
        rate = BATCH * steps / statistics.median(cpu[g])
        print(f"{name} group {g}: {rate:,.0f} model-steps per CPU-second")
    first = outs[groups[0]]
    for g in groups[1:]:
        print(
            f"max |difference| {groups[0]} vs {g}: {float(jnp.max(jnp.abs(outs[g] - first))):.1e}"
        )


if __name__ == "__main__":
    main()
