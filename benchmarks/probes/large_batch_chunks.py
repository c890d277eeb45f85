"""CPU time per member of a large model's batch (too large for tiles of members) against
its single model, for ``jax.vmap`` of the whole batch and ``lax.map`` over chunks of
members, the programs alternated in one process (medians of 3 rounds of 3 calls), and the
wall time (where XLA runs a whole batch's large kernels on several threads).

    python -m benchmarks.probes.large_batch_chunks [--model humanoid] [--steps 20]
        [--batch 256] [--chunks 1 4 8 16 32]

``jax.vmap`` here is the plain program's batching with the tile rule's own fallback off
(``jaxmbd.compiled.batch_lanes.VMAP_CHUNK`` set to the batch); ``chunkN`` is ``lax.map(...,
batch_size=N)`` of the single program; ``default`` is what ``jax.vmap`` of ``simulate``
runs."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
import jaxmbd.compiled.batch_lanes as batch_lanes
from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, _qpos, model_file


def cpu_seconds(f, a, calls: int = 3) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call, medians of ``calls``."""
    cpu, wall = [], []
    for _ in range(calls):
        start, start_wall = time.process_time(), time.perf_counter()
        jax.block_until_ready(f(a))
        cpu.append(time.process_time() - start)
        wall.append(time.perf_counter() - start_wall)
    return statistics.median(cpu), statistics.median(wall)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="humanoid")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--chunks", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    args = parser.parse_args(argv)
    F = model_file(args.model, Path(tempfile.mkdtemp()))
    rng = np.random.default_rng(0)
    v0 = np.asarray(F["v0"]) if np.any(F["v0"]) else 0.3 * np.ones(F["nv"])
    F["qvel"] = v0[None] * (1 + 0.1 * rng.uniform(-1, 1, (args.batch, F["nv"])))
    with_qvel = _jaxmbd_with_qvel(F)
    opts = dict(formulation="joint", t_end=args.steps * F["h"], h=F["h"])
    if not F["contact"]:
        opts["limits"] = "none"

    def final_qpos(v):
        return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]

    qvel = jnp.asarray(F["qvel"])
    programs = {}

    def add(name, f, a, members):
        # compiled ahead of time: VMAP_CHUNK is read when the batch is traced, and JAX
        # caches batched programs (jax.clear_caches() between the two settings)
        start = time.perf_counter()
        compiled = f.lower(a).compile()
        jax.block_until_ready(compiled(a))
        print(f"{name}: first call {time.perf_counter() - start:.1f} s", flush=True)
        programs[name] = (compiled, a, members)

    default_chunk = batch_lanes.VMAP_CHUNK
    batch_lanes.VMAP_CHUNK = args.batch  # the whole batch in one vmap
    add("vmap", mbd.jit(jax.vmap(final_qpos)), qvel, args.batch)
    batch_lanes.VMAP_CHUNK = default_chunk
    jax.clear_caches()
    add("default", mbd.jit(jax.vmap(final_qpos)), qvel, args.batch)
    add("single", mbd.jit(final_qpos), qvel[0], 1)
    for chunk in args.chunks:
        mapped = mbd.jit(lambda v, c=chunk: jax.lax.map(final_qpos, v, batch_size=c))
        add(f"chunk{chunk}", mapped, qvel, args.batch)
    per_member = {name: [] for name in programs}
    walls = {name: [] for name in programs}
    for _ in range(3):
        for name, (f, a, members) in programs.items():
            cpu, wall = cpu_seconds(f, a)
            per_member[name].append(cpu / members)
            walls[name].append(wall / members)
    single = statistics.median(per_member["single"])
    single_wall = statistics.median(walls["single"])
    print(f"{args.model}, {args.steps} steps, batch {args.batch}: CPU ms per member "
          "(against the single model); wall ms per member (against the single's)")  # fmt: skip
    for name, values in per_member.items():
        value, wall = statistics.median(values), statistics.median(walls[name])
        print(f"  {name:>8}: {value * 1e3:.3f} ms ({value / single:.2f}x); wall "
              f"{wall * 1e3:.3f} ms ({wall / single_wall:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
