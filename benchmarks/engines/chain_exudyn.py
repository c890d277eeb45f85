"""The 150-link spatial chain of spherical joints, hanging and released, in Exudyn and in jaxmbd
at the same step: first result, time per step and error against a reference.

Model: :func:`jaxmbd.models.generated.pendulum_chain` (N rods of 0.5 m and 1 kg, inertia
(1e-3, L^2/12, L^2/12) kg m^2 in body axes (rod direction, horizontal normal), released at
rest from a helix, spherical joints at the rod ends, the first to the ground at the origin,
gravity (0, 0, -9.81) m/s^2), 1 s at h = 1e-3. In Exudyn every rod is a rigid body
(``mbs.CreateRigidBody``, Euler parameters, at its centre of mass, with jaxmbd's reference
rotation), every joint a ``CreateSphericalJoint`` at the rod end in the global frame; the
geometry is rebuilt here with numpy: the Exudyn environment has no jax, so this file runs
there as a script (``benchmarks.engines`` imports jaxmbd) and imports nothing of the project;
its Exudyn setup follows ``in_exudyn.py``.

Exudyn runs in its own virtual environment (never install it into jaxmbd's)::

    python -m venv /tmp/exuvenv && /tmp/exuvenv/bin/pip install exudyn numpy

One Exudyn run (prints one JSON line: the first result from process start, the median ms
per step over ``--repeats`` further solves, the centres of mass every 0.1 s)::

    /tmp/exuvenv/bin/python benchmarks/engines/chain_exudyn.py --links 150
        [--h 1e-3] [--t-end 1] [--solver GeneralizedAlpha|RK44|...] [--settings fastest|default]
        [--linear-solver sparse|dense] [--fast] [--repeats 5]

The comparison (jaxmbd's python; runs each engine in fresh processes, alternately, and
writes the markdown table)::

    python -m benchmarks.engines.chain_exudyn --compare --links 16 64 150 [--more-h 5e-4]
        [--ref-h 1e-4] --exudyn-python /tmp/exuvenv/bin/python
        [--out benchmarks/results/chain_exudyn.md]

Exudyn's settings (``--settings``): "fastest" = the recipe of ``in_exudyn.py``: its
default implicit generalized-alpha solver (rho_inf 0.9, index 3, Newton relative tolerance
1e-8), EigenSparse with its sparsity pattern analysed once (``reuseAnalyzedPattern``), no
solution file, modified Newton with one Jacobian update per step, the constant mass matrix
reused; "default" = ``exu.SimulationSettings()`` as constructed
(solution file every 0.01 s, modified Newton) with EigenSparse. In both the run must take
exactly round(t_end / h) steps (Exudyn's adaptive step reduction is a failure here, as in
``in_exudyn.ExudynSim.solve``). ``--fast``: Exudyn's fast C++ module (``exudynCPPfast``,
``sys.exudynFast = True`` before the import: fewer run-time checks), which the comparison
uses. The explicit solvers (``--solver RK44`` ..., Lie-group rotation-vector nodes) are
there for the record: Exudyn's explicit integration runs only constraints it can eliminate
(coordinate constraints to the ground) and stops on the spherical joints ("explicit
integrator detected object 2 which contains constraints that cannot be solved").

jaxmbd: ``mbd.simulate(pendulum_chain(N), t_end=1.0, h=1e-3)`` with the defaults (the joint
formulation, RK4), in a fresh process: the first result from process start (import, build,
trace, compile, run), then the median of 5 later calls. Each N runs jaxmbd twice, with an
empty persistent compilation cache (a user's first process) and again with the cache that
run filled (a rerun); the cache lives in a private folder (``XDG_CACHE_HOME``), not the
user's. Errors: max over links of |r - r_ref| of the centres of mass at t = 1 s and 0.2 s,
r_ref = jaxmbd at ``--ref-h`` (1e-4, the same defaults); Exudyn at the reference step checks
that both engines integrate the same physics. ``--more-h``: both engines again at these
steps (default 5e-4), for their speeds at equal accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

T_PROCESS = time.perf_counter()  # the script's start; ``--t0`` gives the process's
ROOT = Path(__file__).resolve().parents[2]
LENGTH, MASS = 0.5, 1.0
GRAVITY = (0.0, 0.0, -9.81)
REPORT_EVERY = 0.1  # s: the centres of mass are stored at these times
SOLVERS = ("GeneralizedAlpha", "TrapezoidalIndex2", "RK44", "ODE23", "DOPRI5", "ExplicitEuler")


def chain_geometry(n_links: int, length: float = LENGTH):
    """(r, A, joints): centres of mass (N, 3), rotation matrices (N, 3, 3) body to global and
    the joint points (N, 3) of ``pendulum_chain(n_links)``, recomputed with numpy."""
    r, A, joints = [], [], []
    point = np.zeros(3)
    for k in range(n_links):
        angle = 0.6 * k
        direction = np.array([math.cos(angle), math.sin(angle), -0.3])
        direction /= np.linalg.norm(direction)
        y_axis = np.cross([0.0, 0.0, 1.0], direction)
        y_axis /= np.linalg.norm(y_axis)
        joints.append(point)
        r.append(point + 0.5 * length * direction)
        A.append(np.stack([direction, y_axis, np.cross(direction, y_axis)], axis=1))
        point = point + length * direction
    return np.array(r), np.array(A), np.array(joints)


# ---- Exudyn ------------------------------------------------------------------------------


def exudyn_chain(
    n_links, h, t_end, solver="GeneralizedAlpha", settings="fastest", linear_solver="sparse"
):
    """(mbs, simulation settings, solver type, position sensors, n_steps) of the chain."""
    import exudyn as exu
    from exudyn.utilities import RigidBodyInertia

    mbs = exu.SystemContainer().AddSystem()
    ground = mbs.CreateGround()
    r, A, joints = chain_geometry(n_links)
    inertia = RigidBodyInertia(
        mass=MASS,
        inertiaTensor=np.diag([1e-3, LENGTH**2 / 12, LENGTH**2 / 12]),
        inertiaTensorAtCOM=True,
    )
    explicit = solver not in ("GeneralizedAlpha", "TrapezoidalIndex2")
    previous, sensors = ground, []
    for k in range(n_links):
        body = mbs.CreateRigidBody(
            referencePosition=list(r[k]),
            referenceRotationMatrix=A[k],
            inertia=inertia,
            gravity=list(GRAVITY),
            # Lie-group rotation vectors for the explicit solvers (Exudyn's advice), Euler
            # parameters (Exudyn's default) for the implicit ones
            nodeType=(
                exu.NodeType.RotationRotationVector
                if explicit
                else exu.NodeType.RotationEulerParameters
            ),
            returnDict=True,
            show=False,
        )
        mbs.CreateSphericalJoint(
            itemNumbers=[previous, body["bodyNumber"]],
            position=list(joints[k]),
            useGlobalFrame=True,
            show=False,
        )
        sensors.append(
            mbs.AddSensor(
                exu.itemInterface.SensorNode(
                    nodeNumber=body["nodeNumber"],
                    outputVariableType=exu.OutputVariableType.Position,
                    storeInternal=True,
                    writeToFile=False,
                )
            )
        )
        previous = body["bodyNumber"]
    mbs.Assemble()
    s = exu.SimulationSettings()
    n_steps = int(round(t_end / h))
    s.timeIntegration.numberOfSteps = n_steps
    s.timeIntegration.endTime = n_steps * h
    s.solution.sensors.writePeriod = REPORT_EVERY
    s.linearSolver.solverType = {
        "dense": exu.LinearSolverType.EXUdense,
        "sparse": exu.LinearSolverType.EigenSparse,
    }[linear_solver]
    if settings == "fastest":
        s.solution.file.write = False
        s.timeIntegration.verboseMode = 0
        s.timeIntegration.newton.useModifiedNewton = True
        s.timeIntegration.newton.modifiedNewtonJacUpdatePerStep = True
        s.timeIntegration.reuseConstantMassMatrix = True
        s.linearSolver.reuseAnalyzedPattern = True  # EigenSparse: one symbolic analysis
        s.show.statistics = False
        s.show.computationTime = False
    elif settings == "default":
        tmp = tempfile.mkdtemp(prefix="exudyn_chain_")
        s.solution.file.name = os.path.join(tmp, "coordinatesSolution")
        s.solution.solverInformationFileName = os.path.join(tmp, "solverInformation.txt")
    else:
        raise ValueError(f"settings: fastest or default, got {settings!r}")
    return mbs, s, getattr(exu.DynamicSolverType, solver), sensors, n_steps


def exudyn_solve(mbs, s, solver_type, n_steps) -> float:
    """One solve from the initial state (Exudyn resets to it); its wall time in seconds.
    Raises RuntimeError if Exudyn fails or took other steps than n_steps of size h."""
    import exudyn as exu

    start = time.perf_counter()
    try:
        ok = mbs.SolveDynamic(s, solverType=solver_type, storeSolver=True)
    except (exu.SolverError, exu.ModelError) as err:  # pragma: no cover - depends on the run
        raise RuntimeError(f"Exudyn solver failed ({err})") from err
    elapsed = time.perf_counter() - start
    if not ok:
        raise RuntimeError("Exudyn solver failed")
    taken = mbs.sys["dynamicSolver"].it.currentStepIndex - 1
    if taken != n_steps:
        raise RuntimeError(f"adaptive step reduction: {taken} steps instead of {n_steps}")
    return elapsed


def exudyn_positions(mbs, sensors) -> tuple[list, list]:
    """(times, centres of mass (T, N, 3)) stored every REPORT_EVERY s by the sensors."""
    data = [np.asarray(mbs.GetSensorStoredData(sensor)) for sensor in sensors]
    return data[0][:, 0].tolist(), np.stack([d[:, 1:4] for d in data], axis=1).tolist()


def run_exudyn(args, n_links: int) -> dict:
    if args.fast:
        sys.exudynFast = True
    import exudyn as exu

    mbs, s, solver_type, sensors, n_steps = exudyn_chain(
        n_links, args.h, args.t_end, args.solver, args.settings, args.linear_solver
    )
    solve_s = exudyn_solve(mbs, s, solver_type, n_steps)
    first = time.perf_counter() - T_PROCESS
    if args.t0 is not None:  # the parent's clock when it started this process
        first = time.time() - args.t0
    times, r = exudyn_positions(mbs, sensors)
    solves = [exudyn_solve(mbs, s, solver_type, n_steps) for _ in range(args.repeats)]
    return dict(
        engine="exudyn",
        version=exu.__version__,
        fast=bool(args.fast),
        links=n_links,
        h=args.h,
        steps=n_steps,
        solver=args.solver,
        settings=args.settings,
        linear_solver=args.linear_solver,
        first_s=first,
        first_solve_s=solve_s,
        ms_per_step=1e3 * statistics.median(solves or [solve_s]) / n_steps,
        ms_per_step_all=[1e3 * t / n_steps for t in solves],
        t=times,
        r=r,
    )


# ---- jaxmbd (its own process, jaxmbd's python) --------------------------------------------

JAXMBD_CHILD = r"""
import json, statistics, sys, time
t0 = float(sys.argv[4])
import jax
import jaxmbd as mbd
from jaxmbd.models.generated import pendulum_chain
n, h, t_end, repeats = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[5])
sol = mbd.simulate(pendulum_chain(n), t_end=t_end, h=h)
jax.block_until_ready(sol.r)
first = time.time() - t0
times = []
for _ in range(repeats):
    start = time.perf_counter()
    out = mbd.simulate(pendulum_chain(n), t_end=t_end, h=h)
    jax.block_until_ready(out.r)
    times.append(time.perf_counter() - start)
steps = round(t_end / h)
every = max(1, round(0.1 / h))
r = sol.r[::every]
print(json.dumps(dict(engine="jaxmbd", version=mbd.__version__, jax=jax.__version__, links=n,
                      h=h, steps=steps, first_s=first,
                      ms_per_step=1e3 * statistics.median(times) / steps if times else None,
                      ms_per_step_all=[1e3 * t / steps for t in times],
                      linear_solver=getattr(sol, "linear_solver", None),
                      t=[float(x) for x in sol.t[::every]], r=r.tolist())))
"""


def _child(command, env=None) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return dict(error=(out.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(lines[-1])


def exudyn_child(python, n, h=1e-3, repeats=3, extra=("--fast",)) -> dict:
    command = [python, str(Path(__file__).resolve()), "--links", str(n)]
    command += ["--h", str(h), "--repeats", str(repeats), *extra, "--t0", repr(time.time())]
    return _child(command)


def jaxmbd_child(n, h=1e-3, repeats=3, cache=None) -> dict:
    """``cache``: a folder for XDG_CACHE_HOME (jaxmbd's compilation cache), None: off."""
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if cache is None:
        env["JAXMBD_NO_COMPILATION_CACHE"] = "1"
    else:
        env.pop("JAXMBD_NO_COMPILATION_CACHE", None)
        env["XDG_CACHE_HOME"] = str(cache)
    command = [sys.executable, "-c", JAXMBD_CHILD, str(n), str(h), "1.0"]
    return _child(command + [repr(time.time()), str(repeats)], env)


def _error(run, ref, t):
    """max over links of |r - r_ref| at time t (both stored every 0.1 s)."""
    if "error" in run or "error" in ref:
        return float("nan")
    i = int(np.argmin(np.abs(np.asarray(run["t"]) - t)))
    j = int(np.argmin(np.abs(np.asarray(ref["t"]) - t)))
    assert abs(run["t"][i] - t) < 1e-9 and abs(ref["t"][j] - t) < 1e-9, (run["t"], ref["t"])
    return float(np.max(np.linalg.norm(np.subtract(run["r"][i], ref["r"][j]), axis=-1)))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def compare(args) -> None:
    """Per N, alternately: Exudyn, jaxmbd (empty cache), Exudyn, jaxmbd (the cache filled),
    then both engines at each ``--more-h``, the reference and Exudyn at the reference step."""
    py = args.exudyn_python
    started, rows = _uptime(), []
    print("start:", started, flush=True)
    for n in args.links:
        runs = {}  # label -> run
        cache = Path(tempfile.mkdtemp(prefix="chain_exudyn_cache_"))
        try:
            runs["Exudyn (1st)"] = exudyn_child(py, n, repeats=args.repeats)
            runs["jaxmbd, empty cache"] = jaxmbd_child(n, repeats=args.repeats, cache=cache)
            runs["Exudyn (2nd)"] = exudyn_child(py, n, repeats=args.repeats)
            runs["jaxmbd, cache filled"] = jaxmbd_child(n, repeats=args.repeats, cache=cache)
            for h in args.more_h:
                runs[f"Exudyn h={h:g}"] = exudyn_child(py, n, h=h, repeats=args.repeats)
                runs[f"jaxmbd h={h:g}"] = jaxmbd_child(n, h=h, repeats=args.repeats, cache=cache)
            ref = jaxmbd_child(n, h=args.ref_h, repeats=0, cache=cache)
            runs["Exudyn at the reference step"] = exudyn_child(py, n, h=args.ref_h, repeats=0)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        for label, run in [*runs.items(), ("reference (jaxmbd)", ref)]:
            if "t" in run and "t" in ref:  # max_k |r_k - r_ref,k| every 0.1 s
                run["error_vs_ref"] = [_error(run, ref, t) for t in run["t"]]
            brief = {k: v for k, v in run.items() if k not in ("t", "r")}
            print(n, label, json.dumps(brief), flush=True)
        rows.append(dict(n=n, runs=runs, ref=ref))
    ended = _uptime()
    print("end:", ended, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_markdown(args, rows, started, ended))

    def strip(run):  # the runs without the positions (their errors every 0.1 s stay)
        return {k: v for k, v in run.items() if k != "r"}

    raw = [
        dict(n=row["n"], ref=strip(row["ref"]), runs={k: strip(v) for k, v in row["runs"].items()})
        for row in rows
    ]
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print(out.read_text())


def _fmt(x, spec):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


NOTES = """
Each run a fresh process; "first result" from the process's start (Python start, import,
build, solve; jaxmbd: trace, lowering and XLA compile included) to the first 1 s result in
hand; ms / step the median of the later runs (listed). jaxmbd's first result with an empty
persistent compilation cache (a private ``XDG_CACHE_HOME`` per N: a user's first process)
and again with the cache that process filled (a rerun). The ratio: Exudyn's ms / step over
the median of jaxmbd's two medians at the same h. "s per run": one 1 s run without the
first-call costs. Error: max over links of |r - r_ref| of the centres of mass, r_ref = jaxmbd
at h = {ref_h:g} (same defaults); per-0.1 s errors in the .json beside this file.

Exudyn: ``mbs.SolveDynamic`` with its default implicit generalized-alpha solver
(``DynamicSolverType.GeneralizedAlpha``, rho_inf 0.9, index 3, Euler-parameter nodes,
Newton relative tolerance 1e-8), EigenSparse, modified Newton with one Jacobian update per
step, the constant mass matrix reused, the sparsity pattern analysed once
(``linearSolver.reuseAnalyzedPattern``), no solution file, the fast C++ module
(``exudynCPPfast``), one thread; every run took exactly t_end / h steps (Exudyn's adaptive
step reduction counts as a failure). jaxmbd: ``mbd.simulate(pendulum_chain(N), t_end=1.0,
h=h)`` with the defaults (joint formulation, RK4: ``integrator="rkmk"``).
"""


def _markdown(args, rows, started, ended) -> str:
    found = [r for row in rows for r in row["runs"].values() if "version" in r]
    exu = next((r for r in found if r["engine"] == "exudyn"), {})
    jax = next((r for r in found if r["engine"] == "jaxmbd"), {})
    lines = [
        "# The spatial chain against Exudyn at the same step "
        "(`python -m benchmarks.engines.chain_exudyn --compare`)",
        "",
        "Command: `python -m benchmarks.engines.chain_exudyn --compare --links "
        + " ".join(map(str, args.links))
        + "".join(f" --more-h {h:g}" for h in args.more_h)
        + f" --exudyn-python {args.exudyn_python}`; it runs Exudyn as "
        f"`{args.exudyn_python} benchmarks/engines/chain_exudyn.py --links N --h H --fast` "
        "and jaxmbd as `mbd.simulate(pendulum_chain(N), t_end=1.0, h=H)` in fresh processes.",
        "",
        f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPU cores "
        f"(shared with other jobs), Python {platform.python_version()}. Exudyn "
        f"{exu.get('version', '?')}; jaxmbd {jax.get('version', '?')}, jax {jax.get('jax', '?')}.",
        "",
        f"Load at start: `{started}`  ",
        f"Load at end: `{ended}`",
        "",
        "| N | engine | h | first result s | ms / step (runs) | Exudyn / jaxmbd per step "
        "| s per run | error t=1 s | error t=0.2 s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ref, runs = row["ref"], row["runs"]
        jax_ms = {}  # h -> median of jaxmbd's medians at that step
        for run in runs.values():
            if run.get("engine") == "jaxmbd" and run.get("ms_per_step") is not None:
                jax_ms.setdefault(run["h"], []).append(run["ms_per_step"])
        jax_ms = {h: statistics.median(v) for h, v in jax_ms.items()}
        for label, run in runs.items():
            if "error" in run:
                lines.append(f"| {row['n']} | {label} | | error: {run['error']} | | | | | |")
                continue
            ms = run.get("ms_per_step") or 1e3 * run["first_solve_s"] / run["steps"]
            times = ", ".join(f"{x:.3f}" for x in run.get("ms_per_step_all", []))
            ratio = ""
            if run["engine"] == "exudyn" and run["h"] in jax_ms:
                ratio = _fmt(ms / jax_ms[run["h"]], ".2f")
            lines.append(
                f"| {row['n']} | {label} | {run['h']:g} | {_fmt(run['first_s'], '.2f')} | "
                f"{_fmt(ms, '.3f')} ({times}) | {ratio} | {_fmt(ms * run['steps'] / 1e3, '.2f')} "
                f"| {_fmt(_error(run, ref, 1.0), '.2e')} | {_fmt(_error(run, ref, 0.2), '.2e')} |"
            )
    return "\n".join(lines) + "\n" + NOTES.format(ref_h=args.ref_h)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, nargs="+", default=[150])
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--solver", choices=SOLVERS, default="GeneralizedAlpha")
    parser.add_argument("--settings", choices=("fastest", "default"), default="fastest")
    parser.add_argument("--linear-solver", choices=("sparse", "dense"), default="sparse")
    parser.add_argument("--fast", action="store_true", help="Exudyn's exudynCPPfast module")
    parser.add_argument("--repeats", type=int, default=5, help="timed solves after the first")
    parser.add_argument("--t0", type=float, default=None, help="time.time() at process start")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--exudyn-python", default="/tmp/exuvenv/bin/python")
    parser.add_argument("--ref-h", type=float, default=1e-4)
    parser.add_argument("--more-h", type=float, nargs="*", default=[5e-4], help="more steps")
    default_out = ROOT / "benchmarks/results/chain_exudyn.md"
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args(argv)
    if args.compare:
        compare(args)
        return
    for n in args.links:  # one N per process for an honest first result
        print(json.dumps(run_exudyn(args, n)), flush=True)


if __name__ == "__main__":
    main()
