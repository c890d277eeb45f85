# ruff: noqa: E402, E501
"""Another tree's jaxmbd (imported as jaxmbd_main) and this one's in one process: compile
split, runs alternated, medians. From this tree's root:

    JAXMBD_OTHER=/work/main python benchmarks/probes/gradient_ab.py \
        double_pendulum:rA:gen_alpha arm3:rA:rkmk
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
from jaxmbd.compiled.xla_flags import loop_hoisted

N = int(os.environ.get("STEPS", "1000"))
REP = int(os.environ.get("REP", "7"))


def loss_for(pkg, case):
    if case == "double_pendulum:rA:gen_alpha":
        model, integ = pkg.models.double_pendulum(), "gen_alpha"
    else:
        model, integ = pkg.load_model(str(ARM3), keyframe="swing"), "rkmk"

    def loss(s):
        m = eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)
        sol = pkg.simulate(m, t_end=N * 1e-3, h=1e-3, integrator=integ)
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


for case in sys.argv[1:]:
    progs = {}
    for name, pkg in (("main", old), ("branch", new)):
        loss = loss_for(pkg, case)
        x = jnp.asarray(1.1)
        progs[name] = dict(fwd=compiled(loss, x), grad=compiled(jax.grad(loss), x), x=x)
        print(
            f"{case} {name}: forward trace+lower {progs[name]['fwd'][1]:.2f} s XLA {progs[name]['fwd'][2]:.2f} s; "
            f"gradient trace+lower {progs[name]['grad'][1]:.2f} s XLA {progs[name]['grad'][2]:.2f} s; "
            f"grad {float(progs[name]['grad'][0](x))!r}; transposed/forward loop native {loop_hoisted(progs[name]['grad'][0].as_text(), N)}; load {os.getloadavg()}",
            flush=True,
        )
    times = {(n, k): [] for n in progs for k in ("fwd", "grad")}
    for _ in range(REP):
        for n in progs:
            for k in ("fwd", "grad"):
                c = progs[n][k][0]
                t = time.perf_counter()
                jax.block_until_ready(c(progs[n]["x"]))
                times[(n, k)].append(time.perf_counter() - t)
    for n in progs:
        f, g = statistics.median(times[(n, "fwd")]), statistics.median(times[(n, "grad")])
        print(
            f"{case} {name if False else n}: forward {f * 1e3:.2f} ms gradient {g * 1e3:.2f} ms ratio {g / f:.2f}",
            flush=True,
        )
    gm, gb = (
        float(progs["main"]["grad"][0](progs["main"]["x"])),
        float(progs["branch"]["grad"][0](progs["branch"]["x"])),
    )
    print(
        f"{case}: gradient relative difference {abs(gm - gb) / abs(gm):.2e}; load {os.getloadavg()}",
        flush=True,
    )
