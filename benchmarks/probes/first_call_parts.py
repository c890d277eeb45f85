"""One plain ``simulate`` call's first result in a fresh process under the test suite's XLA
flags (``tests/conftest.py``: LLVM at optimisation level 0) and no disk caches, split into
JAX tracing, lowering and XLA compilation (``jax.monitoring``'s duration events), then the
same call again (compiled). What the suite pays per model and run; compare two source trees
by running the probe from each in turn (old and new alternated, the same load):

    PYTHONPATH=OLD_TREE python -m benchmarks.probes.first_call_parts slide
    python -m benchmarks.probes.first_call_parts slide
    python -m benchmarks.probes.first_call_parts double_pendulum --t-end 1.5 \\
        --option formulation=rA --option integrator=gen_alpha
    python -m benchmarks.probes.first_call_parts hopper --t-end 0.5

Cases: ``slide`` (a block on a rail into its limit: rp with rk, 0.4 s at h = 1e-4, four
blocks of steps), a built-in model's name (``--t-end``, h = 1e-3, ``--option KEY=VALUE``
passed to ``simulate``), or a dm_control suite file's name (as authored, its own step).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ["XLA_FLAGS"] = " ".join(
    [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]
).strip()
os.environ["JAXMBD_NO_COMPILATION_CACHE"] = "1"

import jax  # noqa: E402

import jaxmbd as mbd  # noqa: E402

PARTS = {
    "jaxpr_trace_duration": "trace",
    "jaxpr_to_mlir_module_duration": "lower",
    "backend_compile_duration": "compile",
}


def _run(case: str, t_end: float | None, options: dict):
    if case == "slide":
        b = mbd.ModelBuilder("slide", gravity=(0.0, 0.0, 0.0))
        b.add_body("block", mass=2.0, inertia=[0.1, 0.1, 0.1], rdot=(1.0, 0.0, 0.0))
        b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0),
                        axis=(1, 0, 0), limits=(-0.5, 0.2))  # fmt: skip
        model = b.build()
        return lambda: mbd.simulate(model, formulation="rp", integrator="rk", t_end=0.4, h=1e-4)
    if hasattr(mbd.models, case):
        model = getattr(mbd.models, case)()
        return lambda: mbd.simulate(model, t_end=t_end or 1.5, h=1e-3, **options)
    import dm_control

    path = Path(dm_control.__file__).parent / "suite" / f"{case}.xml"
    model = mbd.load_model(path)
    return lambda: mbd.simulate(model, t_end=t_end or 0.5, **options)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--t-end", type=float, default=None)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    parts = dict.fromkeys(PARTS.values(), 0.0)

    def record(event, duration, **_):
        name = PARTS.get(event.rsplit("/", 1)[-1])
        if name:
            parts[name] += duration

    jax.monitoring.register_event_duration_secs_listener(record)
    run = _run(args.case, args.t_end, dict(o.split("=", 1) for o in args.option))
    start = time.perf_counter()
    jax.block_until_ready(run().t)
    first = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(run().t)
    again = time.perf_counter() - start
    split = f"trace {parts['trace']:.2f}, lower {parts['lower']:.2f}, "
    split += f"XLA compile {parts['compile']:.2f}"
    print(mbd.__file__)
    print(f"{args.case}: first result {first:.2f} s ({split}); again {again:.2f} s")


if __name__ == "__main__":
    main()
