"""The elementwise small solves (``linear_solver="small"``) and XLA's small-loop hoisting:
steps per second with and without each, compile time apart.

    python -m benchmarks.small_solve kernels    # one dense solve per scan step
    python -m benchmarks.small_solve simulate   # whole simulate runs
    python -m benchmarks.small_solve all
    python -m benchmarks.small_solve integrators  # every default integrator path

``kernels``: a ``lax.scan`` of ``--steps`` steps each doing one dense solve with an
iterate-dependent matrix, n = 8, 24, 54: LAPACK (``jnp.linalg.solve``) against the
elementwise LU + substitution of :mod:`jaxmbd.linear.small`, with and without
``xla_cpu_small_while_loop_byte_threshold``. ``simulate``: the double pendulum, slider crank
(gen_alpha, rA, default options), the MJCF arm of ``tests/data/arm3.xml`` (gen_alpha and
rkmk RK4) and chains of 10 and 20 bodies (``pendulum_chain``, gen_alpha), h = 1e-3 for
``--t-end`` s, with ``linear_solver`` "dense" (LAPACK), "small" (elementwise dense LU),
"structured" (block elimination, LAPACK) or "small_structured" (block elimination in
elementwise kernels), flag on or off. Each row runs in a fresh process
(``JAXMBD_XLA_FLAGS=0`` turns jaxmbd's own flag handling off); ``hoisted`` says whether
XLA compiled the time-stepping loop as one native call (:func:`step_loop_hoisted`, read
from the compiled HLO: structure, not time).
Medians of ``--repeats`` runs after compilation.

``integrators``: every default integrator path (gen_alpha both variants with each Newton
policy, backward_euler, rkmk, rk, energy_momentum) on the double pendulum and slider crank
(arm3 where the formulation takes MJCF models' joints), ``linear_solver`` "dense" against
"auto" (what a user gets; for rk/rkmk's KKT solves on the CPU that is "schur",
:mod:`jaxmbd.linear.schur`) and, for the explicit integrators and energy_momentum, "small"
(the dense matrices in elementwise kernels), all with jaxmbd's
default flag handling (the threshold set). Per row: whether the time loop is hoisted,
compile time (wall and CPU), steps per CPU-second.

A jax upgrade that drops the option or the hoisting shows up as ``hoisted = no`` and the
"flag" rows falling back to the "no flag" ones.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAG = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={}"

KERNEL_CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
import jaxmbd  # noqa: F401  (float64)
from jaxmbd.linear import small
from jaxmbd.compiled.xla_flags import loop_hoisted
n, method, steps, repeats = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
A0 = jnp.asarray(rng.standard_normal((n, n)) + 0.1 * n * np.eye(n))
b0 = jnp.asarray(rng.standard_normal(n))
eye = jnp.eye(n)

def solve(A, b):
    if method == "lapack":
        return jnp.linalg.solve(A, b)
    lu, p = small.lu(A)
    return small.lu_solve(lu, p, b)

def body(x, _):
    return solve(A0 + 1e-6 * eye * x[None, :], b0 + 1e-3 * x), None

f = jax.jit(lambda x: jax.lax.scan(body, x, None, length=steps)[0])
t0, c0 = time.perf_counter(), time.process_time()
compiled = f.lower(b0).compile()
tc, cc = time.perf_counter() - t0, time.process_time() - c0
runs, cpu = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(compiled(b0))
    runs.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
print(json.dumps({"compile": tc, "compile_cpu": cc,
                  "steps_per_s": steps / sorted(runs)[len(runs) // 2],
                  "steps_per_cpu_s": steps / sorted(cpu)[len(cpu) // 2],
                  "hoisted": loop_hoisted(compiled.as_text(), steps)}))
"""

SIM_CHILD = r"""
import json, sys, time
from pathlib import Path
import jax
import jaxmbd as mbd
from jaxmbd.compiled.xla_flags import loop_hoisted
which, integrator, solver = sys.argv[1:4]
t_end, repeats = float(sys.argv[4]), int(sys.argv[5])
root = Path(sys.argv[6])
h = 1e-3
if which == "arm3":
    model = mbd.mjcf.load_robot(root / "tests" / "data" / "arm3.xml")
elif which.startswith("chain"):  # chainN: pendulum_chain(N), N spherical joints
    model = mbd.models.pendulum_chain(int(which[5:]))
else:
    model = getattr(mbd.models, which)()
steps = round(t_end / h)
opts = {"integrator": integrator, "linear_solver": solver}
f = jax.jit(lambda m: mbd.simulate(m, t_end=t_end, h=h, throw=False, **opts))
t0, c0 = time.perf_counter(), time.process_time()
compiled = f.lower(model).compile()
tc, cc = time.perf_counter() - t0, time.process_time() - c0
runs, cpu = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    sol = jax.block_until_ready(compiled(model))
    runs.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
ok = bool((sol.status == 0).all())
print(json.dumps({"compile": tc, "compile_cpu": cc,
                  "steps_per_s": steps / sorted(runs)[len(runs) // 2],
                  "steps_per_cpu_s": steps / sorted(cpu)[len(cpu) // 2],
                  "hoisted": loop_hoisted(compiled.as_text(), steps), "ok": ok,
                  "r_end": [float(v) for v in sol.r[-1].reshape(-1)[:3]]}))
"""


INTEGRATOR_CHILD = r"""
import json, sys, time
from pathlib import Path
import jax
import jaxmbd as mbd
from jaxmbd.compiled.xla_flags import loop_hoisted
which, formulation, integrator, options, solver = sys.argv[1:6]
t_end, repeats = float(sys.argv[6]), int(sys.argv[7])
root = Path(sys.argv[8])
h = 1e-3
if which == "arm3":
    model = mbd.mjcf.load_robot(root / "tests" / "data" / "arm3.xml")
else:
    model = getattr(mbd.models, which)()
steps = round(t_end / h)
opts = {"formulation": formulation, "integrator": integrator, "linear_solver": solver,
        **json.loads(options)}
f = jax.jit(lambda m: mbd.simulate(m, t_end=t_end, h=h, throw=False, **opts))
t0, c0 = time.perf_counter(), time.process_time()
compiled = f.lower(model).compile()
tc, cc = time.perf_counter() - t0, time.process_time() - c0
runs, cpu = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    sol = jax.block_until_ready(compiled(model))
    runs.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
print(json.dumps({"compile": tc, "compile_cpu": cc,
                  "steps_per_s": steps / sorted(runs)[len(runs) // 2],
                  "steps_per_cpu_s": steps / sorted(cpu)[len(cpu) // 2],
                  "hoisted": loop_hoisted(compiled.as_text(), steps),
                  "ok": bool((sol.status == 0).all()),
                  "r_end": [float(v) for v in sol.r[-1].reshape(-1)[:3]]}))
"""


def _child(code, args, flag_bytes):
    env = dict(os.environ)
    env["JAXMBD_XLA_FLAGS"] = "0"  # this script decides
    env["JAXMBD_NO_COMPILATION_CACHE"] = "1"  # compile times, not cache loads
    flags = env.get("XLA_FLAGS", "")
    if flag_bytes:
        flags = f"{flags} {FLAG.format(flag_bytes)}".strip()
    env["XLA_FLAGS"] = flags
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernels(args):
    print(
        f"\none dense solve per scan step, {args.steps} steps (steps/s, medians of {args.repeats})"
    )
    print(
        f"{'n':>3s} {'method':8s} {'flag':5s} {'hoisted':8s} {'compile [s]':>11s} {'steps/s':>10s}"
    )
    rows = []
    for n in (8, 24, 54):
        for method in ("lapack", "small"):
            for flag in (0, args.threshold):
                r = _child(KERNEL_CHILD, [n, method, args.steps, args.repeats], flag)
                rows.append({"n": n, "method": method, "flag": bool(flag), **r})
                if "error" in r:
                    print(f"{n:3d} {method:8s} {'on' if flag else 'off':5s} error: {r['error']}")
                    continue
                print(
                    f"{n:3d} {method:8s} {'on' if flag else 'off':5s} "
                    f"{'yes' if r['hoisted'] else 'no':8s} {r['compile']:11.2f} "
                    f"{r['steps_per_s']:9.0f} {r['steps_per_cpu_s']:11.0f}",
                    flush=True,
                )
    return rows


CASES = (
    ("double_pendulum", "gen_alpha"),
    ("double_pendulum", "rkmk"),
    ("slider_crank", "gen_alpha"),
    ("arm3", "gen_alpha"),
    ("arm3", "rkmk"),
    ("chain10", "gen_alpha"),
    ("chain20", "gen_alpha"),
)
#: "dense" (LAPACK), "small" (elementwise dense LU), "structured" (block elimination with
#: LAPACK and scatters), "small_structured" (block elimination in elementwise kernels)
SOLVERS = ("dense", "small", "structured", "small_structured")


def simulate(args):
    print(f"\nsimulate, h = 1e-3, {args.t_end} s (steps/s, medians of {args.repeats})")
    print(
        f"{'model':16s} {'integrator':10s} {'solver':16s} {'flag':5s} {'hoisted':8s} "
        f"{'compile [s]':>11s} {'cpu [s]':>7s} {'steps/s':>9s} {'steps/cpu-s':>11s}  r_end"
    )
    rows = []
    for which, integrator in CASES:
        if args.models and which not in args.models:
            continue
        if args.integrators and integrator not in args.integrators:
            continue
        for solver in SOLVERS:
            for flag in (0, args.threshold):
                if args.configs and f"{solver}:{'on' if flag else 'off'}" not in args.configs:
                    continue
                a = [which, integrator, solver, args.t_end, args.repeats, ROOT]
                r = _child(SIM_CHILD, a, flag)
                rows.append(
                    {"model": which, "integrator": integrator, "solver": solver,
                     "flag": bool(flag), **r}
                )  # fmt: skip
                tag = f"{which:16s} {integrator:10s} {solver:16s} {'on' if flag else 'off':5s}"
                if "error" in r:
                    print(f"{tag} error: {r['error']}")
                    continue
                print(
                    f"{tag} {'yes' if r['hoisted'] else 'no':8s} {r['compile']:11.1f} "
                    f"{r['compile_cpu']:7.1f} {r['steps_per_s']:9.0f} {r['steps_per_cpu_s']:11.0f}"
                    f"  {r['r_end']}{'' if r['ok'] else '  (failed)'}",
                    flush=True,
                )
    return rows


#: (label, formulation, integrator, options, models, solvers): every default integrator
#: path
PATHS = (
    ("gen_alpha stab. reuse", "rA", "gen_alpha", {}, ("double_pendulum", "slider_crank", "arm3")),
    ("gen_alpha stab. full", "rA", "gen_alpha", {"newton": "full"}, None),
    ("gen_alpha stab. modified", "rA", "gen_alpha", {"newton": "modified"}, None),
    ("gen_alpha index3 reuse", "rA", "gen_alpha", {"variant": "index3"}, None),
    ("gen_alpha index3 full", "rA", "gen_alpha", {"variant": "index3", "newton": "full"}, None),
    ("gen_alpha index3 modified", "rA", "gen_alpha",
     {"variant": "index3", "newton": "modified"}, None),
    ("backward_euler", "rA", "backward_euler", {}, None),
    ("rkmk rA", "rA", "rkmk", {}, ("double_pendulum", "slider_crank", "arm3")),
    ("rkmk se3", "se3", "rkmk", {}, None),
    ("rk rotmat two_step", "rotmat", "rk", {},
     ("double_pendulum", "slider_crank", "bar_double_pendulum")),
    ("rk rotmat one_step", "rotmat", "rk", {"multipliers": "one_step"}, None),
    ("rk rp one_step", "rp", "rk", {}, None),
    ("gen_alpha rp reuse", "rp", "gen_alpha", {}, None),
    ("energy_momentum", "director", "energy_momentum", {}, None),
)  # fmt: skip
EXPLICIT = ("rkmk", "rk")


def integrators(args):
    print(f"\nevery integrator path, h = 1e-3, {args.t_end} s (medians of {args.repeats}), flag on")
    print(
        f"{'model':16s} {'path':26s} {'solver':7s} {'hoisted':8s} {'compile [s]':>11s} "
        f"{'cpu [s]':>7s} {'steps/cpu-s':>11s}  r_end"
    )
    rows = []
    for label, formulation, integrator, options, models in PATHS:
        if args.paths and not any(p in label for p in args.paths):
            continue
        # "auto" is "schur" for rk/rkmk's KKT solves on the CPU (the same program): an
        # explicit "schur" row only on request (--solvers)
        solvers = ["dense", "auto"]
        if integrator in EXPLICIT or integrator == "energy_momentum":
            solvers.append("small")
        if args.solvers:
            solvers = list(args.solvers)
        for which in models or ("double_pendulum", "slider_crank"):
            if args.models and which not in args.models:
                continue
            for solver in solvers:
                a = [which, formulation, integrator, json.dumps(options), solver, args.t_end,
                     args.repeats, ROOT]  # fmt: skip
                r = _child(INTEGRATOR_CHILD, a, args.threshold)
                rows.append({"model": which, "path": label, "formulation": formulation,
                             "integrator": integrator, "options": options, "solver": solver,
                             **r})  # fmt: skip
                tag = f"{which:16s} {label:26s} {solver:7s}"
                if "error" in r:
                    print(f"{tag} error: {r['error']}", flush=True)
                    continue
                print(
                    f"{tag} {'yes' if r['hoisted'] else 'no':8s} {r['compile']:11.1f} "
                    f"{r['compile_cpu']:7.1f} {r['steps_per_cpu_s']:11.0f}"
                    f"  {r['r_end']}{'' if r['ok'] else '  (failed)'}",
                    flush=True,
                )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=("kernels", "simulate", "all", "integrators"))
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--t-end", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threshold", type=int, default=1 << 24)
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--models", nargs="*", help="only these models (simulate)")
    parser.add_argument("--integrators", nargs="*", help="only these integrators (simulate)")
    parser.add_argument("--paths", nargs="*", help="only paths whose label has one of these")
    parser.add_argument("--solvers", nargs="*", help="only these solvers (integrators)")
    parser.add_argument(
        "--configs", nargs="*", help="only these solver:flag pairs, e.g. dense:off small:on"
    )
    args = parser.parse_args(argv)
    import jax

    print(f"jax {jax.__version__}, {os.cpu_count()} CPU cores; threshold {args.threshold} bytes")
    start = time.perf_counter()
    rows = {}
    if args.what in ("kernels", "all"):
        rows["kernels"] = kernels(args)
    if args.what in ("simulate", "all"):
        rows["simulate"] = simulate(args)
    if args.what == "integrators":
        rows["integrators"] = integrators(args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
