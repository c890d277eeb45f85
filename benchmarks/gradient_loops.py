"""A gradient's cost against its forward run, compile apart from run, and whether its time
loops are native (XLA's small-while-loop hoisting).

    python -m benchmarks.gradient_loops double_pendulum:rA:gen_alpha arm3:rA:rkmk \
        arm3:joint:rk [--steps 1000] [--repeats 5]

Each case is MODEL:FORMULATION:INTEGRATOR (models of ``benchmarks.engines.jax_peers``:
double_pendulum, arm3, cartpole). The loss is |q(T)|^2 of the joint coordinates after
``--steps`` steps of h = 1e-3, differentiated with respect to the initial joint rates (as
in ``python -m benchmarks.engines jax-peers`` and ``joint-coordinates``). Per case, in one
process: the forward program and the gradient, each lowered (trace + lower seconds),
XLA-compiled (seconds) and run (median of ``--repeats`` calls); the gradient's ratio to the
forward run; how many while loops the compiled program has, whether a loop of ``--steps``
iterations is one native call, and the largest hoisted loops (HLO instructions). To compare
two trees, run it once with each on ``PYTHONPATH`` (``JAXMBD_NO_COMPILATION_CACHE=1``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from jaxmbd.compiled.xla_flags import hoisted_sizes, loop_hoisted  # noqa: E402


def loss_of_rates(spec: str, steps: int, tmp: Path):
    """(loss(v), v0) for ``MODEL:FORMULATION:INTEGRATOR``."""
    from benchmarks.engines.jax_peers import jaxmbd_models, model_file
    from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, _qpos

    name, form, integrator = spec.split(":")
    F = model_file(name, tmp)
    v0 = jnp.asarray(F["v0"] if np.any(F["v0"]) else np.full(F["nv"], 0.3))
    opts = dict(formulation=form, integrator=integrator, t_end=steps * 1e-3, h=1e-3)
    if form == "joint":
        with_qvel = _jaxmbd_with_qvel(F)
        opts["limits"] = "none"

        def final(v):
            return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]
    else:
        with_rates = jaxmbd_models(F, np.asarray(v0)[None])[2]

        def final(v):
            sol = mbd.simulate(with_rates(v), **opts)
            return jnp.stack([sol.joints[k].q for k in F["joints"]], axis=-1)[-1]

    return (lambda v: jnp.sum(final(v) ** 2)), v0


def measure(fn, x, steps: int, repeats: int) -> dict:
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(x)
    traced = time.perf_counter()
    compiled = lowered.compile()
    done = time.perf_counter()
    jax.block_until_ready(compiled(x))
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(x))
        runs.append(time.perf_counter() - t)
    text = compiled.as_text()
    return dict(
        trace_lower_s=traced - start,
        xla_s=done - traced,
        run_ms=1e3 * statistics.median(runs),
        whiles=len(re.findall(r" while\(", text)),
        # the joint explicit runs loop n + 1 times (each state's start)
        time_loop_native=loop_hoisted(text, steps) or loop_hoisted(text, steps + 1),
        hoisted=hoisted_sizes(text)[:3],
        value=compiled(x),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"jaxmbd {Path(mbd.__file__).parent}, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.cases:
            loss, v0 = loss_of_rates(spec, args.steps, Path(tmp))
            fwd = measure(loss, v0, args.steps, args.repeats)
            grad = measure(jax.grad(loss), v0, args.steps, args.repeats)
            for label, r in (("forward", fwd), ("gradient", grad)):
                print(
                    f"{spec:28s} {label:8s} trace+lower {r['trace_lower_s']:6.2f} s  "
                    f"XLA {r['xla_s']:6.2f} s  run {r['run_ms']:8.2f} ms  whiles {r['whiles']}"
                    f"  time loop native {r['time_loop_native']}  hoisted {r['hoisted']}"
                )
            print(
                f"{spec:28s} grad/forward {grad['run_ms'] / fwd['run_ms']:.2f}  "
                f"gradient {np.asarray(grad['value']).tolist()}",
                flush=True,
            )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
