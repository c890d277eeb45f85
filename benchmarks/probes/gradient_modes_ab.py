# ruff: noqa: E402, E501
"""A gradient's cost against its forward run for the modes of
``JAXMBD_HOIST_GRADIENT_LOOPS`` in another tree (imported as jaxmbd_main) and this one, in
one process: compile split, runs alternated, medians. From this tree's root:

    JAXMBD_OTHER=/path/to/main python benchmarks/probes/gradient_modes_ab.py \\
        double_pendulum:rA:gen_alpha arm3:rA:rkmk

Programs: the other tree's default ("main"), the other tree with every loop hoisted
("main:1") and this tree with every loop hoisted ("branch:1", the step recomputed in the
adjoint). Loss |r(T)|^2 + |rdot(T)|^2 of the bodies after 1000 steps (h = 1e-3),
gradient with respect to a gravity scale. The mode is read at trace time; the caches are
cleared between programs.
"""

import os
import statistics
import sys
import time

# isort: off
import benchmarks.probes._other_tree  # noqa: F401  (jaxmbd_main; caches off)

# isort: on
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxmbd_main as old

import jaxmbd as new
from benchmarks.problems import ARM3

N = int(os.environ.get("STEPS", "1000"))
REP = int(os.environ.get("REP", "7"))
MODE = "JAXMBD_HOIST_GRADIENT_LOOPS"
PROGRAMS = [("main", old, ""), ("main:1", old, "1"), ("branch:1", new, "1")]


def loss_for(pkg, case):
    name, form, integ = case.split(":")
    if name == "double_pendulum":
        model = pkg.models.double_pendulum()
    else:
        model = pkg.load_model(str(ARM3), keyframe="swing")

    def loss(s):
        m = eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)
        sol = pkg.simulate(m, t_end=N * 1e-3, h=1e-3, formulation=form, integrator=integ)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return loss


def compiled(f, x):
    t0 = time.perf_counter()
    low = jax.jit(f).lower(x)
    t1 = time.perf_counter()
    c = low.compile()
    t2 = time.perf_counter()
    jax.block_until_ready(c(x))
    return c, t1 - t0, t2 - t1


x = jnp.asarray(1.1)
for case in sys.argv[1:]:
    progs, forwards = {}, {}
    for name, pkg, mode in PROGRAMS:
        os.environ[MODE] = mode
        jax.clear_caches()
        loss = loss_for(pkg, case)
        if pkg not in forwards:
            forwards[pkg] = compiled(loss, x)
        fwd, grad = forwards[pkg], compiled(jax.grad(loss), x)
        progs[name] = (fwd, grad)
        print(
            f"{case} {name}: forward XLA {fwd[2]:.1f} s; gradient trace+lower {grad[1]:.1f} s "
            f"XLA {grad[2]:.1f} s; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    os.environ.pop(MODE)
    times = {(n, k): [] for n in progs for k in (0, 1)}
    for _ in range(REP):
        for n in progs:
            for k in (0, 1):
                c = progs[n][k][0]
                t = time.perf_counter()
                jax.block_until_ready(c(x))
                times[(n, k)].append(time.perf_counter() - t)
    g0 = float(progs["main"][1][0](x))
    for n in progs:
        f, g = statistics.median(times[(n, 0)]), statistics.median(times[(n, 1)])
        gv = float(progs[n][1][0](x))
        print(
            f"{case} {n}: forward {f * 1e3:.2f} ms gradient {g * 1e3:.2f} ms ratio {g / f:.2f}; "
            f"gradient {gv!r}, relative to main's {abs(gv - g0) / abs(g0):.1e}",
            flush=True,
        )
    print(f"{case}: load {os.getloadavg()}", flush=True)
