"""Batch over single on the CPU: ``simulate_batch`` model-steps/s over one member's steps/s,
against the chunk (members per vmap) at a fixed batch, and against the batch size with the
default chunk; whether each program's time loop is one native loop.

    python -m benchmarks.batch_chunks [--cases rA-gen_alpha joint-rk] [--batch 256]
        [--chunks 4 8 16 32 256] [--sizes 1 4 16 64 256 1024] [--steps 200] [--repeats 3]
        [--out benchmarks/results/batch/batch_chunks.md]

Cases: ``rA-gen_alpha``, ``mbd.models.double_pendulum()`` in rA with gen_alpha (members'
masses scaled by 1 +- 0.2); ``joint-rk``, the MJCF double pendulum of
``benchmarks.engines`` (two hinges, RK4) in the joint formulation (members' initial joint
rates +-0.5 rad/s); h = 1 ms, ``--steps`` steps. *Single*: ``mbd.jit`` of
``mbd.simulate`` of member 0 with the batch's options (``throw=False``: no run-time
checks; the whole Solution, as a member of the batch gets). *Batch*:
the program ``simulate_batch`` runs on one device, compiled once per (chunk, size) and
timed with the single run in alternating rounds (``benchmarks._harness.interleaved``),
medians; batch / single = (batch x steps / batch time) / (steps / single time). Hoisted:
``jaxmbd.compiled.xla_flags.loop_hoisted`` of the compiled program (the time loop one native
loop). Compile: trace, lowering and XLA compile of the batch program.
"""

from __future__ import annotations

import os

# before jaxmbd is imported: jaxmbd.jit's disk cache of exported programs keys a top-level
# function by its name, not by the values it closes over (the options of the lambdas
# below), and XLA's cache would hide the compile times
os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks._harness import (  # noqa: E402
    RESULTS,
    footer,
    interleaved,
    log,
    machine,
    markdown_table,
)

OUT = RESULTS / "batch" / "batch_chunks.md"


def members(case: str, batch: int, steps: int):
    import equinox as eqx
    import jax.numpy as jnp

    import jaxmbd as mbd

    rng = np.random.default_rng(0)
    if case == "joint-rk":
        from benchmarks.engines.joint_coordinates import model_file

        file = model_file("double_pendulum", Path(tempfile.mkdtemp()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = mbd.load_model(file["path"], keyframe=0)
        opts = dict(formulation="joint", integrator="rk", limits="none")
        rates = 0.5 * rng.uniform(-1, 1, (batch, 2))
        out = [eqx.tree_at(lambda m: m.tree.qvel_init, model, jnp.asarray(v)) for v in rates]
    elif case == "rA-gen_alpha":
        model = mbd.models.double_pendulum()
        opts = dict(formulation="rA", integrator="gen_alpha")
        scales = 1 + 0.2 * rng.uniform(-1, 1, batch)
        out = [eqx.tree_at(lambda m: m.mass, model, model.mass * s) for s in scales]
    else:
        raise ValueError(f"unknown case {case!r}")
    return out, dict(opts, t_end=steps * 1e-3, h=1e-3)


def measure(case: str, sizes_chunks: list[tuple[int, int | None]], steps: int, repeats: int):
    """Rows of (size, chunk): chunk None is simulate_batch's default."""
    import jax

    import jaxmbd as mbd
    from jaxmbd.analysis import batch as mb
    from jaxmbd.compiled.xla_flags import loop_hoisted

    biggest = max(size for size, _ in sizes_chunks)
    pool, opts = members(case, biggest, steps)
    static = mb._static_options(opts)  # throw=False, as for every member of a batch
    single = mbd.jit(lambda m: mbd.simulate(m, **static))
    calls, info = {"single": lambda: jax.block_until_ready(single(pool[0]).r)}, {}
    for size, chunk in sizes_chunks:
        stack = mbd.stack_models(pool[:size])
        used = mb._chunk_size(stack, size, chunk, 1, jax.devices()[0].platform)
        args = ("simulate", (stack, None), static, used)
        start = time.perf_counter()
        compiled = mb._vmapped.lower(*args).compile()
        text = compiled.compiled.as_text()
        trips = steps + (opts["formulation"] == "joint")  # the joint run loops n + 1 times
        info[size, chunk] = dict(used=used, hoisted=loop_hoisted(text, trips),
                                 compile=time.perf_counter() - start)  # fmt: skip
        calls[f"{size}/{chunk}"] = lambda c=compiled, a=args: jax.block_until_ready(c(*a).r)
        done = info[size, chunk]
        log(f"{case} batch {size} chunk {chunk} ({used}): compiled in {done['compile']:.0f} s, "
            f"hoisted {done['hoisted']}")  # fmt: skip
    timings = interleaved(calls, repeats=repeats)
    single_rate = steps / timings["single"].median
    rows = []
    for size, chunk in sizes_chunks:
        t = timings[f"{size}/{chunk}"]
        rate = size * steps / t.median
        rows.append({
            "case": case, "batch": size,
            "chunk": "default" if chunk is None else chunk,
            "members per vmap": info[size, chunk]["used"] or size,
            "hoisted": info[size, chunk]["hoisted"],
            "single steps/s": round(single_rate), "batch model-steps/s": round(rate),
            "batch / single": rate / single_rate,
            "compile s": info[size, chunk]["compile"],
        })  # fmt: skip
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["rA-gen_alpha", "joint-rk"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--chunks", nargs="*", type=int, default=[4, 8, 16, 32, 256])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1, 4, 16, 64, 256, 1024])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()
    rows = []
    for case in args.cases:
        plan = [(args.batch, c) for c in args.chunks] + [(s, None) for s in args.sizes]
        rows += measure(case, list(dict.fromkeys(plan)), args.steps, args.repeats)
    load_end = os.getloadavg()
    loads = "/".join(f"{x:.1f}" for x in load_start), "/".join(f"{x:.1f}" for x in load_end)
    text = (
        "# Batch over single: chunks and batch sizes (CPU)\n\n"
        f"{__doc__.split(chr(10) + chr(10), 2)[2]}\n"
        f"Load averages (1/5/15 min) {loads[0]} at the start, {loads[1]} at the end: a "
        "shared 2-core machine, ratios come from alternating calls in one process.\n\n"
        + markdown_table(rows)
        + "\n"
        + footer(machine_line=machine())
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.exists() and args.cases != ["rA-gen_alpha", "joint-rk"]:
        text = args.out.read_text() + "\n" + text  # a run of some cases adds its section
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
