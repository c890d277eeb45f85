# ruff: noqa: E402, E501
"""A run under per-step controls, forward and gradient, with another tree's jaxmbd (imported
as jaxmbd_main) and this one's, in one process, runs alternated, medians of wall time; and
the trace of the cart-pole's first-gradient program (``benchmarks/compile_time.py``'s
``cartpole``) in CPU seconds. dm_control's suite files, rkmk, ``STEPS`` (1000) steps of
h = 0.01 under u_k = 0.3 sin(0.01 k), loss |r(T)|^2 + |rdot(T)|^2, gradient with respect to
the controls. From this tree's root:

    JAXMBD_OTHER=<other tree> REP=15 python -m benchmarks.probes.controls_run_ab cartpole acrobot
"""

import os
import statistics
import sys
import time

# isort: off
import benchmarks.probes._other_tree  # noqa: F401  (jaxmbd_main; caches off)

# isort: on
import importlib
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxmbd_main as old

import jaxmbd as new

SUITE = Path(importlib.import_module("dm_control").__file__).parent / "suite"
N = int(os.environ.get("STEPS", "1000"))
REP = int(os.environ.get("REP", "15"))
TREES = (("other", old), ("this", new))


def programs(mbd, name):
    model = mbd.mjcf.load_robot(SUITE / f"{name}.xml")
    u = 0.3 * jnp.sin(0.01 * jnp.arange(N * model.nu).reshape(N, model.nu))

    def loss(u):
        sol = mbd.simulate(model, t_end=N * 0.01, h=0.01, controls=u, integrator="rkmk",
                           throw=False)  # fmt: skip
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return {"forward": jax.jit(loss), "gradient": jax.jit(jax.grad(loss))}, u


def first_gradient_trace(mbd):
    """CPU seconds of ``jax.jit(value_and_grad(loss)).trace`` of compile_time's cart-pole."""
    model = mbd.mjcf.load_robot(SUITE / "cartpole.xml")

    def loss(u):
        sol = mbd.simulate(model, t_end=0.1, h=0.01, controls=u, integrator="rkmk")
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2) + 1e-3 * jnp.sum(u**2)

    jax.clear_caches()
    start = time.process_time()
    jax.jit(jax.value_and_grad(loss)).trace(jnp.full((10, model.nu), 0.3))
    return time.process_time() - start


def main(names):
    timed, runs = {}, {}
    for name in names:
        for tag, mbd in TREES:
            progs, u = programs(mbd, name)
            for kind, prog in progs.items():
                jax.block_until_ready(prog(u))
                timed[(name, tag, kind)] = (prog, u)
                runs[(name, tag, kind)] = []
    for _ in range(REP):
        for key, (prog, u) in timed.items():
            start = time.perf_counter()
            jax.block_until_ready(prog(u))
            runs[key].append(time.perf_counter() - start)
    for (name, tag, kind), values in runs.items():
        print(f"{name} {tag} {kind}: {1e3 * statistics.median(values):.3f} ms")
    traces = {tag: [] for tag, _ in TREES}
    for _ in range(max(3, REP // 3)):
        for tag, mbd in TREES:
            traces[tag].append(first_gradient_trace(mbd))
    for tag, values in traces.items():
        print(f"cart-pole first-gradient trace, {tag} tree: {statistics.median(values):.2f} CPU-s")
    print("load", os.getloadavg())


if __name__ == "__main__":
    main(sys.argv[1:] or ["cartpole", "acrobot"])
