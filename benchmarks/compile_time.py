"""Time to first result of a gradient program: tracing, lowering and XLA compilation apart.

    python -m benchmarks.compile_time [--models arm3 cartpole] [--variants ...]
        [--repeats 3] [--out benchmarks/results/bench_compile.md]

The program is ``jax.value_and_grad`` of a loss on one simulation of

- ``arm3``: the 3-link MJCF arm of ``tests/data/arm3.xml``, loss = sum of the bodies'
  squared positions over 0.1 s at h = 1e-3, with respect to the three masses
  (rA + gen_alpha, the defaults);
- ``cartpole``: dm_control's ``suite/cartpole.xml`` (read from the installed package),
  loss = squared final state plus effort, with respect to the controls of 0.1 s at
  h = 0.01 (rA + rkmk as in ``benchmarks/cartpole_swing_up.py``; ``cartpole_ga``: rA +
  gen_alpha; ``cartpole_dense``: rkmk with LAPACK's KKT solves, ``linear_solver="dense"``,
  whose time loop XLA does not hoist into one native function).

Each variant runs in a fresh process with the persistent compilation cache off
(``JAXMBD_NO_COMPILATION_CACHE=1``, ``JAX_COMPILATION_CACHE_DIR`` unset), so every figure is a
cold start as a new user sees it:

- ``jit``: ``jax.jit(value_and_grad(loss))`` through the stages API: trace (Python to
  jaxpr), lower (jaxpr to StableHLO) and XLA compile timed apart, then the first and a
  second call;
- ``mbd.jit``: the same with jaxmbd's XLA options (``jaxmbd.compiled.jit.XLA_OPTIONS``), as
  ``mbd.jit`` compiles a top-level program;
- ``mbd.jit+O0``, ``mbd.jit+O1``: also LLVM optimisation level 0 or 1
  (``xla_backend_optimization_level``; XLA's default 2, the test suite 0), run time
  reported to show its cost;
- ``eager``: the un-jitted ``jax.value_and_grad(loss)`` called three times (first call, then
  the later calls: they must not compile again);
- ``mbd.jit-fwd``, ``jit-fwd``: the loss alone (simulate's forward program), to compare the
  forward program's compile and run (``sum abs(grad)`` is then 0);
- ``mbd.jit-jk``: ``mbd.jit`` with the joint forces' coordinate kernel
  (``jaxmbd.forces._joint._group``) replaced by its unjitted function, i.e. traced and
  linearised at every force evaluation as before commit 22d0f4e (A/B of that change).

Medians over ``--repeats`` processes, alternated so all variants see the same machine load.
Wall-clock seconds, and the process's CPU seconds (all its threads), which a shared
machine's load inflates less; HLO lines measure the program's size independently of load.
"hoisted loops (largest)": how many loops XLA's small-while-loop pass compiled each as one
native function, and the largest one's HLO instructions
(``jaxmbd.compiled.xla_flags.hoisted_sizes``):
LLVM's time goes mostly into those.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import importlib, json, sys, time
from pathlib import Path
t_import = time.perf_counter()
import equinox as eqx, jax, jax.numpy as jnp
import jaxmbd as mbd
from jaxmbd.compiled.jit import XLA_OPTIONS
t_import = time.perf_counter() - t_import
print("JAXMBD", mbd.__file__)
model_name, variant, root = sys.argv[1], sys.argv[2], sys.argv[3]
if variant.endswith("-jk"):  # the joint-force kernel traced at every call, as before 22d0f4e
    import jaxmbd.forces._joint as JF
    JF._group = JF._group.__wrapped__
    variant = variant[: -len("-jk")]
if model_name == "arm3":
    model = mbd.mjcf.load_robot(Path(root) / "tests" / "data" / "arm3.xml")
    def loss(masses):
        m = eqx.tree_at(lambda m: m.mass, model, masses)
        return jnp.sum(mbd.simulate(m, t_end=0.1, h=1e-3).r ** 2)
    x = jnp.asarray(model.mass)
else:
    path = Path(importlib.import_module("dm_control").__file__).parent / "suite" / "cartpole.xml"
    model = mbd.mjcf.load_robot(path)
    integrator = "gen_alpha" if model_name == "cartpole_ga" else "rkmk"
    solver_options = {"linear_solver": "dense"} if model_name == "cartpole_dense" else {}
    def loss(u):
        sol = mbd.simulate(model, t_end=0.1, h=0.01, controls=u, integrator=integrator,
                           **solver_options)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2) + 1e-3 * jnp.sum(u ** 2)
    x = jnp.full((10, model.nu), 0.3)
forward = variant.endswith("-fwd")  # the loss alone: simulate's forward program
if forward:
    variant = variant[: -len("-fwd")]
vg = (lambda x: (loss(x), x)) if forward else jax.value_and_grad(loss)
out = {"import": t_import}
if variant == "eager":
    for i in range(3):
        t0 = time.perf_counter(); jax.block_until_ready(vg(x + 0.01 * i))
        out[f"call{i + 1}"] = time.perf_counter() - t0
else:
    options = None if variant == "jit" else dict(XLA_OPTIONS)
    if "+O" in variant:  # LLVM's optimisation level (XLA's default is 2)
        options["xla_backend_optimization_level"] = int(variant.split("+O")[1])
    program = jax.jit(vg, compiler_options=options)
    cpu = time.process_time
    t0, c0 = time.perf_counter(), cpu(); traced = program.trace(x)
    t1, c1 = time.perf_counter(), cpu(); lowered = traced.lower()
    t2, c2 = time.perf_counter(), cpu(); compiled = lowered.compile()
    t3, c3 = time.perf_counter(), cpu(); value, grad = jax.block_until_ready(compiled(x))
    t4 = time.perf_counter()
    out.update(value=float(value), grad_abs_sum=0.0 if forward else float(jnp.sum(jnp.abs(grad))))
    text = compiled.as_text()
    sizes = hoisted_sizes(text)  # prepended by run_child (from the working tree)
    out.update(hoisted=len(sizes), hoisted_largest=max(sizes, default=0),
               custom_calls=text.count("custom-call("))
    out.update(cpu_trace=c1 - c0, cpu_lower=c2 - c1, cpu_compile=c3 - c2,
               hlo_lines=lowered.as_text().count("\n"))
    runs = []
    for _ in range(21):
        s = time.perf_counter(); jax.block_until_ready(compiled(x))
        runs.append(time.perf_counter() - s)
    out.update(trace=t1 - t0, lower=t2 - t1, compile=t3 - t2, first_run=t4 - t3,
               run=sorted(runs)[10], eqns=len(traced.jaxpr.eqns))
print("RESULT " + json.dumps(out))
"""

EQUATIONS = r"""
import collections, sys
import jax
from jax._src import source_info_util
from jax.extend import core
jaxpr = jax.make_jaxpr(loss)(x)  # the forward program (loss, model, x from CHILD)
counts, seen = collections.Counter(), set()
def walk(j):
    if id(j) in seen:
        return
    seen.add(id(j))
    for e in j.eqns:
        tb = e.source_info.traceback
        frames = source_info_util.user_frames(tb) if tb else []
        own = [f for f in frames if "/jaxmbd/" in f.file_name]
        key = f"{own[0].file_name.split('/jaxmbd/')[-1]}:{own[0].function_name}" if own else "other"
        counts[key] += 1
        for p in e.params.values():
            for sub in p if isinstance(p, (list, tuple)) else [p]:
                if isinstance(sub, core.ClosedJaxpr):
                    walk(sub.jaxpr)
                elif isinstance(sub, core.Jaxpr):
                    walk(sub)
walk(jaxpr.jaxpr)
print("equations", sum(counts.values()), "(distinct sub-jaxprs counted once)")
for key, n in counts.most_common(15):
    print(f"{n:7d} {key}")
"""

VARIANTS = (
    "jit",
    "mbd.jit",
    "mbd.jit+O0",
    "eager",
    "mbd.jit-jk",
    "mbd.jit-fwd",
    "jit-fwd",
    "mbd.jit+O1",
    "mbd.jit+O1-fwd",
)
MODELS = ("arm3", "cartpole", "cartpole_ga", "cartpole_dense")


def run_child(model: str, variant: str, source: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["JAXMBD_NO_COMPILATION_CACHE"] = "1"
    env.pop("XLA_FLAGS", None)
    if source is not None:  # another jaxmbd tree first on the path (an older commit's)
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")]).strip(
            os.pathsep
        )
    # python -c puts the working directory first on sys.path: run in the tree to import
    from jaxmbd.compiled.xla_flags import hoisted_sizes  # the same measure for every tree

    child = "import re\n" + inspect.getsource(hoisted_sizes) + CHILD
    proc = subprocess.run(
        [sys.executable, "-c", child, model, variant, str(ROOT)],
        capture_output=True, text=True, env=env, cwd=source or ROOT,
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{model}/{variant} failed:\n{proc.stderr[-3000:]}")
    imported = [ln for ln in proc.stdout.splitlines() if ln.startswith("JAXMBD ")]
    expected = (source or ROOT).resolve() / "jaxmbd"
    if not imported or Path(imported[-1].split(" ", 1)[1]).resolve().parent != expected:
        raise RuntimeError(f"{model}/{variant} imported {imported} instead of {expected}")
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS[:4]), choices=VARIANTS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--note", default="")
    parser.add_argument(
        "--jaxmbd",
        type=Path,
        default=None,
        help="import jaxmbd from this directory (e.g. `git archive <commit> jaxmbd | tar -x "
        "-C DIR`) instead of the installed one: before/after comparisons",
    )
    parser.add_argument(
        "--equations",
        choices=MODELS,
        default=None,
        help="count the forward jaxpr's equations by jaxmbd function instead",
    )
    args = parser.parse_args(argv)
    if args.equations:
        head = CHILD[: CHILD.index("forward = variant.endswith")]
        subprocess.run([sys.executable, "-c", head + EQUATIONS, args.equations, "jit", str(ROOT)],
                       check=True)  # fmt: skip
        return
    from benchmarks._harness import machine

    rows: dict = {}
    for _ in range(args.repeats):
        for model in args.models:
            for variant in args.variants:
                got = run_child(model, variant, args.jaxmbd)
                exact = ("value", "grad_abs_sum")
                shown = {k: v if k in exact else round(v, 3) for k, v in got.items()}
                print(model, variant, shown, flush=True)
                rows.setdefault((model, variant), []).append(got)
    med = {
        key: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for key, runs in rows.items()
    }
    lines = [
        f"Machine: {machine()}; load average at the end {os.getloadavg()[0]:.1f}. "
        f"Medians of {args.repeats} fresh processes, persistent cache off. {args.note}",
        "",
        "| model | variant | trace [s] | lower [s] | XLA compile [s] | total to first "
        "result [s] | run [s] | CPU s: trace / lower / compile | HLO lines | "
        "value, sum abs(grad) | hoisted loops (largest) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (model, variant), m in med.items():
        if variant == "eager":
            lines.append(
                f"| {model} | eager value_and_grad | | | | {m['call1']:.1f} (calls 2, 3: "
                f"{m['call2']:.2f}, {m['call3']:.2f}) | | | | |"
            )
            continue
        first = m["trace"] + m["lower"] + m["compile"] + m["first_run"]
        lines.append(
            f"| {model} | {variant} | {m['trace']:.1f} | {m['lower']:.1f} | "
            f"{m['compile']:.1f} | {first:.1f} | {m['run']:.4f} | {m['cpu_trace']:.1f} / "
            f"{m['cpu_lower']:.1f} / {m['cpu_compile']:.1f} | {int(m['hlo_lines'])} | "
            f"{m['value']:.15g}, {m['grad_abs_sum']:.15g} | "
            f"{m.get('hoisted', 0):.0f} ({m.get('hoisted_largest', 0):.0f}) |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as fh:
            fh.write(table + "\n\n")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
