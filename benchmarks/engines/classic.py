"""jaxmbd side by side with Exudyn and MuJoCo: speed at h = 1e-3 and work-precision.

    python -m benchmarks.engines classic
        [--mechanisms slider_crank double_pendulum heavy_top] [--repeats 5] [--quick]
        [--study-h 1e-2 5e-3 ...] [--study-jaxmbd gen_alpha index3 backward_euler rkmk]
        [--skip-full-newton]

Needs the optional engines: pip install -e '.[bench]' (and scipy for the reference).
Slider crank 3 s (crank driven at 2 pi rad/s; output: slider x), double pendulum 5 s
(output: z of rod 2's tip), heavy top 1 s (output: the rotation matrix A; its error at a
time is the max-abs entry of A - A_ref). Reference: tests/references.py. For every
engine/integrator: run time per step (median, min/max over the repeats; jaxmbd's compile
time apart), steps/s, max abs error over time and at t_end, MuJoCo's loop-closure
violation. Then a work-precision study over h. jaxmbd's explicit RK4 (``rkmk``, rA) runs on
the double pendulum and the heavy top (against MuJoCo's RK4 at equal
error); the slider crank's closed loop is left to the implicit integrators. Writes
benchmarks/results/engines/{speed.csv, work_precision.csv, series_<mechanism>.csv,
work_precision_<mechanism>.png, REPORT.md}.

Exudyn's "fastest" runs use its exudynCPPfast module (no range checks), which is chosen at
import time, so they run in a child process (this script with --exudyn-worker).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import RESULTS, child, command, from_tests, write_csv  # noqa: E402

BENCH_HINT = "engines/classic.py needs Exudyn and MuJoCo: pip install -e '.[bench]'"
T_END = {"slider_crank": 3.0, "double_pendulum": 5.0, "heavy_top": 1.0}
H_MAIN = 1e-3
H_STUDY = (1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4)
H_STUDY_QUICK = (1e-2, 2e-3, 1e-3)
OUTPUT = {
    "slider_crank": "slider x",
    "double_pendulum": "rod-2 tip z",
    "heavy_top": "rotation matrix entries",
}
UNIT = {"slider_crank": "m", "double_pendulum": "m", "heavy_top": "-"}


def reference(mechanism: str, t: np.ndarray) -> np.ndarray:
    """The reference output: a scalar series (T,) or, for the heavy top, A(t) (T, 3, 3)."""
    references = from_tests("references")
    double_pendulum, heavy_top, slider_crank = (
        references.double_pendulum,
        references.heavy_top,
        references.slider_crank,
    )

    if mechanism == "slider_crank":
        return slider_crank(t)["x_slider"]
    if mechanism == "heavy_top":
        from benchmarks.engines import (
            HEAVY_TOP as top,  # checked against jaxmbd's model in measure_jaxmbd
        )

        return heavy_top(
            t,
            mass=top.mass,
            inertia=top.inertia,
            com_from_pivot=top.com,
            gravity=top.gravity,
            A0=top.A0,
            omega0=top.omega0,  # body frame, as jaxmbd's omega0
            pivot=top.pivot,
        )["A"]
    ref = double_pendulum(t)
    return ref["r"][:, 1, 2] + ref["A"][:, 1, 2, 0]  # centre + 1 m along rod 2's body x


def _record(mechanism, engine, variant, h, times, t, y, compile_s=float("nan"), loop=None):
    steps = int(round(T_END[mechanism] / h))
    median = statistics.median(times)
    # per time: max abs over the output's entries (one entry for the scalar outputs)
    error = np.abs(y - reference(mechanism, t)).reshape(len(t), -1).max(axis=1)
    if not np.isclose(t[-1], T_END[mechanism]) or len(t) != steps + 1:
        raise RuntimeError(f"{engine} {variant}: output grid ends at {t[-1]} with {len(t)} points")
    return dict(
        mechanism=mechanism,
        engine=engine,
        variant=variant,
        h=h,
        steps=steps,
        compile_s=compile_s,
        run_median_s=median,
        run_min_s=min(times),
        run_max_s=max(times),
        us_per_step=1e6 * median / steps,
        steps_per_s=steps / median,
        err_max=float(error.max()),
        err_end=float(error[-1]),
        loop_violation_max=float("nan") if loop is None else float(np.max(loop)),
        _t=t,
        _y=y,
        _err=error,
    )


def jaxmbd_output(mechanism, sol):
    """The compared output from a jaxmbd solution (as ``reference`` gives it)."""
    r, a = np.asarray(sol.r), np.asarray(sol.A)
    if mechanism == "slider_crank":
        return r[:, 2, 0]
    if mechanism == "heavy_top":
        return a[:, 0]
    return r[:, 1, 2] + a[:, 1, 2, 0]


# ---- jaxmbd -----------------------------------------------------------------------------


def measure_jaxmbd(
    mechanism, h, newton, repeats, integrator="gen_alpha", variant=None, formulation="rA"
):
    """``newton=None``: an explicit integrator (rkmk), which takes no Newton option."""
    import jax

    import jaxmbd as mbd
    from benchmarks._harness import time_call

    # the heavy top is jaxmbd's spinning_top (heavy_top is torque-free: no gravity)
    model = (
        mbd.models.spinning_top() if mechanism == "heavy_top" else getattr(mbd.models, mechanism)()
    )
    if mechanism == "heavy_top":  # the other engines and the reference use engines.HEAVY_TOP
        from benchmarks.engines import check_top_data

        check_top_data(model)

    def run():
        return mbd.simulate(
            model,
            formulation=formulation,
            integrator=integrator,
            t_end=T_END[mechanism],
            h=h,
            **({} if newton is None else {"newton": newton}),
            **({} if variant is None else {"variant": variant}),
        )

    times = []

    def timed():
        start = time.perf_counter()
        sol = jax.block_until_ready(run())
        times.append(time.perf_counter() - start)
        return sol.r

    first, median, _ = time_call(timed, repeats=repeats)
    runs = times[1:]  # time_call's own median over the same calls is `median`
    sol = run()
    t, y = np.asarray(sol.t), jaxmbd_output(mechanism, sol)
    if newton is None:
        label = f"{formulation} {integrator} RK4"
    else:
        label = (
            f"{formulation} {integrator}{'' if variant is None else ' ' + variant} {newton} Newton"
        )
    rec = _record(mechanism, "jaxmbd", label, h, runs, t, y, first - median)
    jax.clear_caches()
    return rec


# ---- Exudyn -----------------------------------------------------------------------------

EXUDYN_CONFIGS = {
    # label: (integrator, settings, module)
    "GA, default settings": ("GA", "default", "standard"),
    "GA, fastest settings": ("GA", "fastest", "standard"),
    "GA, fastest settings + fast module": ("GA", "fastest", "fast"),
    "GA, fastest + Newton relTol 1e-4 + fast module": ("GA", "loose", "fast"),
    "Newmark-BE, fastest settings + fast module": ("Newmark-BE", "fastest", "fast"),
}
EXUDYN_STUDY = (
    "GA, fastest settings + fast module",
    "GA, fastest + Newton relTol 1e-4 + fast module",
    "Newmark-BE, fastest settings + fast module",
)
# (integrator, Newton, gen_alpha variant: None for the default "stabilised" / not gen_alpha,
# formulation)
JAXMBD_MAIN = (
    ("gen_alpha", "full", None, "rA"),
    ("gen_alpha", "reuse", None, "rA"),
    ("gen_alpha", "reuse", "index3", "rA"),
    ("backward_euler", "full", None, "rA"),
    ("backward_euler", "reuse", None, "rA"),
)
# every mechanism in joint coordinates: classical and Munthe-Kaas RK4 (explicit; loops
# projected)
JAXMBD_JOINT = (("rk", None, None, "joint"), ("rkmk", None, None, "joint"))
# with the reused-matrix Newton. gen_alpha index3 is the like-for-like counterpart of
# Exudyn's generalized-alpha (also index 3); the stabilised (GGL) variant is jaxmbd's
# default, which also makes accelerations and multipliers second order
JAXMBD_STUDY = (("gen_alpha", None), ("gen_alpha", "index3"), ("backward_euler", None))
# explicit Munthe-Kaas RK4 (rkmk's default tableau; no Newton) on the tree-structured
# mechanisms, main table and work-precision study: its counterpart is MuJoCo's RK4
RKMK_MECHANISMS = ("double_pendulum", "heavy_top")


def jaxmbd_main(mechanism, reuse_only=False):
    """(integrator, newton, variant) of the h = H_MAIN table; ``reuse_only`` leaves out the
    full-Newton rows (one compilation each)."""
    rows = JAXMBD_MAIN + ((("rkmk", None, None, "rA"),) if mechanism in RKMK_MECHANISMS else ())
    rows += JAXMBD_JOINT
    return tuple(r for r in rows if not (reuse_only and r[1] == "full"))


def jaxmbd_study(mechanism, names=None):
    """(integrator, newton, variant, formulation) of the work-precision study; ``names``
    (e.g. "gen_alpha", "index3", "backward_euler", "rkmk", "joint") picks some of them."""
    study = tuple((i, "reuse", v, "rA") for i, v in JAXMBD_STUDY)
    study += (("rkmk", None, None, "rA"),) if mechanism in RKMK_MECHANISMS else ()
    study += JAXMBD_JOINT
    if names:
        study = tuple(s for s in study if (s[2] or (s[3] if s[3] != "rA" else s[0])) in names)
    return study


FAILED = []  # runs that did not complete: dict(mechanism, engine, variant, h, failed=reason)


def _exudyn_in_process(jobs, repeats):
    from benchmarks.engines.in_exudyn import ExudynSim, ExudynSolveError

    out = []
    for mechanism, h, label in jobs:
        integrator, settings, _ = EXUDYN_CONFIGS[label]
        sim = ExudynSim(mechanism, h, T_END[mechanism], integrator, settings)
        try:
            times = [sim.solve() for _ in range(repeats)]
        except ExudynSolveError as err:
            out.append(
                dict(mechanism=mechanism, engine="Exudyn", variant=label, h=h, failed=str(err))
            )
            continue
        t, y = sim.output()
        out.append(_record(mechanism, "Exudyn", label, h, times, t, y))
    return out


def measure_exudyn(jobs, repeats):
    """jobs: (mechanism, h, label); the fast-module ones run in one child process."""
    standard = [j for j in jobs if EXUDYN_CONFIGS[j[2]][2] == "standard"]
    fast = [j for j in jobs if EXUDYN_CONFIGS[j[2]][2] == "fast"]
    records = _exudyn_in_process(standard, repeats)
    if fast:
        with tempfile.TemporaryDirectory() as tmp:
            job_file, result_file = Path(tmp) / "jobs.json", Path(tmp) / "out.pkl"
            job_file.write_text(json.dumps({"jobs": fast, "repeats": repeats}))
            cmd, env = child(__spec__.name, "--exudyn-worker", job_file, result_file)
            env["EXUDYN_MODULE"] = "fast"
            subprocess.run(cmd, check=True, env=env)
            with result_file.open("rb") as fh:
                records += pickle.load(fh)
    order = {tuple(j): i for i, j in enumerate(jobs)}
    records = sorted(records, key=lambda r: order[(r["mechanism"], r["h"], r["variant"])])
    for r in records:
        if "failed" in r:
            FAILED.append(r)
            print(f"{r['mechanism']} Exudyn {r['variant']} h={r['h']:g}: {r['failed']}", flush=True)
    return [r for r in records if "failed" not in r]


def _exudyn_worker(job_file, result_file):
    sys.exudynFast = True
    spec = json.loads(Path(job_file).read_text())
    records = _exudyn_in_process([tuple(j) for j in spec["jobs"]], spec["repeats"])
    with open(result_file, "wb") as fh:
        pickle.dump(records, fh)


# ---- MuJoCo -----------------------------------------------------------------------------


def mujoco_configs(mechanism):
    configs = [(f"{i}", i, None) for i in ("Euler", "implicitfast", "RK4")]
    if mechanism == "slider_crank":
        configs = [(f"{i}, solref default", i, None) for i in ("Euler", "implicitfast", "RK4")]
        configs += [(f"{i}, solref 2h", i, "2h") for i in ("Euler", "implicitfast", "RK4")]
    return configs


def measure_mujoco(mechanism, h, label, integrator, solref, repeats):
    from benchmarks.engines.in_mujoco import MujocoSim

    ref = None if solref is None else (2.0 * h, 1.0)
    sim = MujocoSim(mechanism, h, T_END[mechanism], integrator, ref)
    times = [sim.solve() for _ in range(repeats)]
    if sim.unstable:  # a failed run: listed in FAILED, returns None
        reason = "unstable (MuJoCo warned of a bad acceleration and reset the state)"
        FAILED.append(dict(mechanism=mechanism, engine="MuJoCo", variant=label, h=h, failed=reason))
        print(f"{mechanism} MuJoCo {label} h={h:g}: {reason}", flush=True)
        return None
    t, y = sim.output()
    loop = sim.loop_violation() if mechanism == "slider_crank" else None
    # rollout runs n+1 steps (sensors at t_0..t_n); time per step over n+1 steps
    steps = sim.n_steps
    times = [w * steps / (steps + 1) for w in times]
    return _record(mechanism, "MuJoCo", label, h, times, t, y, loop=loop)


# ---- report -----------------------------------------------------------------------------

COLUMNS = [
    "mechanism",
    "engine",
    "variant",
    "h",
    "steps",
    "compile_s",
    "run_median_s",
    "run_min_s",
    "run_max_s",
    "us_per_step",
    "steps_per_s",
    "err_max",
    "err_end",
    "loop_violation_max",
]


def write_records(path, records):
    write_csv(path, records, COLUMNS)


def write_series(path, records):
    """The output over time per record; for a non-scalar output (heavy top: A), its error
    (max-abs entry of y - reference) over time instead, and no reference column."""
    t = records[0]["_t"]
    mechanism = records[0]["mechanism"]
    labels = [f"{r['engine']}: {r['variant']}" for r in records]
    if records[0]["_y"].ndim == 1:
        header = ["t", "reference"] + labels
        columns = [t, reference(mechanism, t)] + [r["_y"] for r in records]
    else:
        header = ["t"] + [f"error {label}" for label in labels]
        columns = [t] + [r["_err"] for r in records]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows([[f"{x:.12g}" for x in row] for row in np.stack(columns, axis=1)])


def plot_work_precision(path, mechanism, records):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    lines = {}
    for r in records:
        lines.setdefault(f"{r['engine']}: {r['variant']}", []).append(r)
    markers = {"jaxmbd": "o", "Exudyn": "s", "MuJoCo": "^"}
    for label, recs in lines.items():
        recs = sorted(recs, key=lambda r: -r["h"])
        err = [max(r["err_max"], 1e-16) for r in recs]
        ax.loglog(
            [r["run_median_s"] for r in recs], err, marker=markers[recs[0]["engine"]], label=label
        )
    ax.set_xlabel(f"run time over {T_END[mechanism]:g} s [s] (median)")
    ax.set_ylabel(f"max abs error of {OUTPUT[mechanism]} over time [{UNIT[mechanism]}]")
    ax.set_title(
        f"{mechanism}: work-precision, h = {min(r['h'] for r in records):g} ... "
        f"{max(r['h'] for r in records):g}"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _fmt(x, spec):
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def speed_table(records):
    lines = [
        "| engine | variant | compile [s] | run median [ms] (min-max) | us/step | steps/s "
        "| max err | err at t_end | loop violation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['engine']} | {r['variant']} | {_fmt(r['compile_s'], '.1f')} "
            f"| {1e3 * r['run_median_s']:.1f} ({1e3 * r['run_min_s']:.1f}-"
            f"{1e3 * r['run_max_s']:.1f}) | {r['us_per_step']:.1f} | {r['steps_per_s']:,.0f} "
            f"| {r['err_max']:.2e} | {r['err_end']:.2e} | {_fmt(r['loop_violation_max'], '.1e')} |"
        )
    return "\n".join(lines)


def study_table(records):
    hs = sorted({r["h"] for r in records}, reverse=True)
    lines = {}
    for r in records:
        lines.setdefault(f"{r['engine']}: {r['variant']}", {})[r["h"]] = r
    out = ["| engine: variant | " + " | ".join(f"h={h:g}" for h in hs) + " |"]
    out.append("|---|" + "---|" * len(hs))
    for label, by_h in lines.items():
        cells = [
            f"{by_h[h]['err_max']:.1e} / {1e3 * by_h[h]['run_median_s']:.0f} ms"
            if h in by_h
            else ""
            for h in hs
        ]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


LEVELS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def time_to_accuracy_table(records):
    """Least median run time among the study points whose max error is at or below each
    level (no interpolation), per engine variant, and jaxmbd gen_alpha / best Exudyn GA."""
    lines = {}
    for r in records:
        lines.setdefault(f"{r['engine']}: {r['variant']}", []).append(r)

    def best(points, level):
        ok = [p["run_median_s"] for p in points if p["err_max"] <= level]
        return min(ok) if ok else None

    out = ["| engine: variant | " + " | ".join(f"err <= {lv:.0e}" for lv in LEVELS) + " |"]
    out.append("|---|" + "---|" * len(LEVELS))
    for label, points in lines.items():
        cells = [best(points, lv) for lv in LEVELS]
        out.append(
            f"| {label} | " + " | ".join("-" if c is None else f"{1e3 * c:.1f} ms" for c in cells)
        )
        out[-1] += " |"
    ex = [p for k, v in lines.items() if k.startswith("Exudyn: GA") for p in v]
    for variant, name in (("rA gen_alpha reuse", "gen_alpha"), ("index3", "gen_alpha index3")):
        ga = [v for k, v in lines.items() if k.startswith("jaxmbd") and variant in k]
        if not (ga and ex):
            continue
        ratios = []
        for lv in LEVELS:
            a, b = best(ga[0], lv), best(ex, lv)
            ratios.append("-" if a is None or b is None else f"{a / b:.2f}")
        out.append(f"| **time ratio jaxmbd {name} / fastest Exudyn GA** | " + " | ".join(ratios))
        out[-1] += " |"
    rk = [v for k, v in lines.items() if k.startswith("jaxmbd") and k.endswith("rkmk RK4")]
    mj = [v for k, v in lines.items() if k == "MuJoCo: RK4"]
    if rk and mj:
        ratios = []
        for lv in LEVELS:
            a, b = best(rk[0], lv), best(mj[0], lv)
            ratios.append("-" if a is None or b is None else f"{a / b:.2f}")
        out.append("| **time ratio jaxmbd rkmk RK4 / MuJoCo RK4** | " + " | ".join(ratios) + " |")
    return "\n".join(out)


REPORT_NOTES = """\
## What differs between the engines

- **Coordinates.** jaxmbd (rA: position + rotation matrix per body, Lie update) and Exudyn
  (centre of mass + Euler parameters per body; the slider-crank crank uses Tait-Bryan Rxyz
  coordinates so that its drive can act on one coordinate) are absolute/redundant-coordinate
  codes: every joint is an algebraic constraint solved exactly (to the Newton tolerance) at
  every step. MuJoCo uses reduced (joint) coordinates: the double pendulum has no constraint
  at all; the slider crank is a tree (crank hinge; slider slide + two rod hinges) whose loop
  is closed by an `<equality><connect>` constraint.
- **Hard vs soft loop closure.** MuJoCo's equality constraints are soft: a spring-damper-like
  impedance set by `solref` (default time constant 0.02 s) and `solimp`. With the default the
  loop opens by ~3e-4 m under the inertial/gravity loads, so the slider x (kinematically
  prescribed by the driven crank) is off by ~5e-4 m at any h. With `solref = (2h, 1)`
  (MuJoCo's recommended stiffest setting, time constant >= 2 timesteps) the violation is
  ~1e-5 m at h = 1e-3 and falls with h. jaxmbd and Exudyn hold all constraints to the Newton
  tolerance (slider x error ~1e-15 and ~1e-9 respectively). This is a property of the
  formulation, not a bug, and the table reports the loop violation.
- **Integrators.** jaxmbd: Lie group generalized-alpha (second order, rho_inf 0.9;
  stabilised index 2 by default, and the plain index-3 variant, Exudyn's formulation, whose
  positions are as accurate but whose accelerations and multipliers keep an O(h) start-up
  transient) and backward Euler on the index-3 DAE (first order, strongly
  damped), Newton on (a, lam[, mu]) with the default relative tolerance 1e-3 h^2 within
  [1e-10, 1e-6], reused matrix unless stated; and rkmk, explicit Munthe-Kaas RK4 on the
  index-1 form (four KKT solves per step, fourth order; the joints drift at the
  truncation error's level, not projected). Exudyn: generalized-alpha
  (second order, spectral radius 0.9, index 3) and Newmark beta = 1/2, gamma = 1 (first
  order, damped, the closest to backward Euler Exudyn offers). MuJoCo: semi-implicit Euler
  (first order), implicitfast (Euler with the velocity-dependent forces implicit, their
  Coriolis derivative dropped; nearly identical to Euler here: no damping, no actuators),
  RK4 (fourth order, four force evaluations per step). The double pendulum errors follow
  these orders: RK4 is the most accurate per step by far (~1e-9 m at h = 1e-3),
  generalized-alpha ~1e-3 m; the first-order schemes (jaxmbd's backward Euler, Exudyn's
  Newmark-BE, MuJoCo Euler/implicitfast) lose amplitude through numerical damping (implicit)
  or drift (semi-implicit) and are off by tenths of a metre after 5 s at h = 1e-3 (the error
  falls ~10x per 10x smaller h). The slider crank has no free degree of freedom, so there the
  integrator order hardly matters for the exact-constraint engines.
- **What a step costs.** jaxmbd: one Newton solve of the (6n + m) index-3 system per step,
  full (a new matrix each iteration), modified (matrix frozen per step) or reuse (factored
  matrix carried across steps, refreshed when the contraction rate exceeds 0.2; quadratic
  extrapolation of the last three roots as the initial guess), compiled by XLA;
  the whole trajectory is one compiled `lax.scan`. Exudyn: Newton on the generalized-alpha
  residual, sparse/dense LU in C++; its default modified Newton reuses the Jacobian over
  many steps and needs ~7 iterations per step on the slider crank, the "fastest" setting
  updates it once per step (~3 iterations). MuJoCo: one forward-dynamics evaluation (CRB
  mass matrix + Cholesky in joint space) plus a convex constraint solve (Newton solver) for
  the loop per step (RK4: four evaluations); `mujoco.rollout` runs the whole trajectory in C.
- **Crank drive.** jaxmbd: a rotation driver constraint (angle = pi/2 - 2 pi t, exact, regular
  at every angle). Exudyn: velocity-level `CoordinateConstraint` fixing the rate of the
  crank's Rxyz x-angle to -2 pi rad/s (with the revolute joint, the angle is exactly 2 pi t;
  no Python callback). MuJoCo: a flywheel, i.e. `armature` = 1e6 kg m^2 on the crank hinge
  with the initial rate -2 pi rad/s (angle error ~1e-9 rad); servo actuators would have to
  be weak to stay stable with Euler/RK4 on the crank's small inertia and lag by ~1e-2 rad, a
  joint equality to a moving target lags by ~2 x timeconst x 2 pi. The crank's inertia only
  enters the drive torque, which is not compared.
- **Initial state.** Same positions in all engines; the slider crank's initial velocities are
  the unique ones consistent with the joints and the drive (computed in
  `engines.slider_crank_initial_velocities`; jaxmbd projects its own).
- **Timing scope.** jaxmbd: `simulate` call after compilation (compile time apart). Exudyn:
  `mbs.SolveDynamic` (model assembled once; includes its initial-acceleration solve and the
  sensor recording every step). MuJoCo: one `rollout` call from the initial state (sensors
  every step). Model construction is excluded for all three.
- **Heavy top.** jaxmbd's `spinning_top`: an asymmetric 2 kg body, J = diag(0.05, 0.08,
  0.11) kg m^2 about its centre of mass, on a ball joint at the origin under gravity, tilted
  (general A0, centre of mass off every principal axis) and spinning. (jaxmbd's model named
  `heavy_top` is Mueller & Terze's torque-free box, without gravity.) Every engine
  takes these values from `engines.HEAVY_TOP` (checked against the jaxmbd model). jaxmbd:
  rA, one spherical joint (3 constraint rows). Exudyn: Euler-parameter body at the centre
  of mass + `CreateSphericalJoint` at the pivot, initial velocities in the global frame
  (A0 omega_bar, omega x A0 c). MuJoCo: a `ball` joint at the pivot (quaternion, reduced
  coordinates, no constraint), `<inertial pos="c" fullinertia>`, qvel = omega_bar
  (MuJoCo's ball-joint velocity is body-local). Output:
  A(t); the error at a time is the max-abs entry of A - A_ref, at most 2 (A and A_ref
  rotated by pi relative to each other). Runs that do not complete (an Exudyn Newton
  failure, or adaptive step control taking other steps than round(T/h) of size h; a
  MuJoCo instability, after which MuJoCo resets the state) are listed as not completed.
"""


def _at(records, mechanism, engine, variant):
    for r in records:
        if (r["mechanism"], r["engine"], r["variant"]) == (mechanism, engine, variant):
            return r
    return None


def _best_time(records, level):
    ok = [r["run_median_s"] for r in records if r["err_max"] <= level]
    return min(ok) if ok else None


def goals(speed, study, mechanisms):
    """The goals against the other engines, each with its figures and met / not met.

    At h = H_MAIN: jaxmbd's faster gen_alpha row (reused-matrix Newton, stabilised or index
    3) against Exudyn's GA with the fast module (same integrator family, same order, errors
    side by side); the slider crank's goal is against Exudyn's fastest row of any setting.
    rkmk: least time to reach each error level in the study (no interpolation) against
    MuJoCo's RK4, the goal being a ratio <= 3 at the levels both reach."""
    out = []
    fast = "GA, fastest settings + fast module"
    for m in mechanisms:
        sp = [r for r in speed if r["mechanism"] == m]
        ga = [r for r in sp if r["engine"] == "jaxmbd" and "gen_alpha" in r["variant"]
              and r["variant"].endswith("reuse Newton")]  # fmt: skip
        ex = _at(sp, m, "Exudyn", fast)
        if not ga or ex is None:
            continue
        best = max(ga, key=lambda r: r["steps_per_s"])
        if m == "slider_crank":
            jx = max((r for r in sp if r["engine"] == "jaxmbd"), key=lambda r: r["steps_per_s"])
            ex = max((r for r in sp if r["engine"] == "Exudyn"), key=lambda r: r["steps_per_s"])
            ratio, target, what = jx["steps_per_s"] / ex["steps_per_s"], 1.0, "ahead of"
            best = jx
        else:
            target = 1.5 if m == "double_pendulum" else 1.0
            ratio = best["steps_per_s"] / ex["steps_per_s"]
            what = "1.5x ahead of" if target > 1 else "ahead of"
        met = ratio >= target and best["err_max"] <= 1.05 * ex["err_max"]
        if m == "slider_crank":  # like for like too: generalized-alpha against Exudyn's GA
            ga_best = max(ga, key=lambda r: r["steps_per_s"])
            ex_ga = max(
                (r for r in sp if r["engine"] == "Exudyn" and r["variant"].startswith("GA")),
                key=lambda r: r["steps_per_s"],
            )
            out.append(
                f"- {m}, generalized-alpha only: jaxmbd {ga_best['variant']} "
                f"{ga_best['steps_per_s']:,.0f} steps/s (max error {ga_best['err_max']:.2e}) "
                f"against Exudyn {ex_ga['variant']} {ex_ga['steps_per_s']:,.0f} (max error "
                f"{ex_ga['err_max']:.2e}): ratio "
                f"{ga_best['steps_per_s'] / ex_ga['steps_per_s']:.2f}."
            )
        out.append(
            f"- {m}: jaxmbd {best['variant']} {best['steps_per_s']:,.0f} steps/s (max error "
            f"{best['err_max']:.2e}) against Exudyn {ex['variant']} {ex['steps_per_s']:,.0f} "
            f"(max error {ex['err_max']:.2e}) at h = {H_MAIN:g}: ratio {ratio:.2f}; goal "
            f"({what} Exudyn at equal or better error): **{'met' if met else 'not met'}**."
        )
        # any formulation and integrator (joint coordinates included) at equal or better error
        ex_any = max((r for r in sp if r["engine"] == "Exudyn"), key=lambda r: r["steps_per_s"])
        as_good = [r for r in sp if r["engine"] == "jaxmbd" and r["err_max"] <= ex_any["err_max"]]
        if as_good:
            top = max(as_good, key=lambda r: r["steps_per_s"])
            out.append(
                f"- {m}, any jaxmbd row at Exudyn's error or better: {top['variant']} "
                f"{top['steps_per_s']:,.0f} steps/s (max error {top['err_max']:.2e}) against "
                f"Exudyn {ex_any['variant']} {ex_any['steps_per_s']:,.0f} (max error "
                f"{ex_any['err_max']:.2e}): ratio {top['steps_per_s'] / ex_any['steps_per_s']:.2f}."
            )
    for m in mechanisms:
        st = [r for r in study if r["mechanism"] == m]
        rk = [r for r in st if r["engine"] == "jaxmbd" and r["variant"].endswith("rkmk RK4")]
        mj = [r for r in st if r["engine"] == "MuJoCo" and r["variant"] == "RK4"]
        if not (rk and mj):
            continue
        pairs = [(lv, _best_time(rk, lv), _best_time(mj, lv)) for lv in LEVELS]
        pairs = [(lv, a, b) for lv, a, b in pairs if a is not None and b is not None]
        if not pairs:
            out.append(f"- {m}: rkmk RK4 and MuJoCo RK4 reach no common error level.")
            continue
        ratios = ", ".join(f"{a / b:.1f} at {lv:.0e}" for lv, a, b in pairs)
        met = all(a / b <= 3.0 for _, a, b in pairs)
        out.append(
            f"- {m}: time ratio jaxmbd rkmk RK4 / MuJoCo RK4 at equal error: {ratios}; goal "
            f"(within 3x): **{'met' if met else 'not met'}**."
        )
    return "\n".join(out)


def write_report(path, args, speed, study, machine, elapsed):
    cmd = command()
    import exudyn
    import mujoco

    parts = [
        "# jaxmbd vs Exudyn vs MuJoCo",
        "",
        f"Command: `{cmd.strip()}` (wall time {elapsed / 60:.1f} min)",
        "",
        f"Machine: {machine}; Exudyn {exudyn.__version__}, MuJoCo {mujoco.__version__}.",
        f"Load average (1 min) at the start {args.load[0]:.1f}, at the end {args.load[1]:.1f}: "
        "other processes shared the 2 cores; treat single timings as +-30%.",
        "",
        f"Outputs: slider crank: slider x over {T_END['slider_crank']:g} s; double pendulum: z "
        f"of rod 2's tip over {T_END['double_pendulum']:g} s; heavy top: the rotation matrix "
        f"A over {T_END['heavy_top']:g} s (error at a time: max-abs entry of A - A_ref). "
        "Reference: tests/references.py (slider crank in closed form, double pendulum DOP853 "
        "with rtol = atol = 1e-13, heavy top DOP853 on Euler's equations about the pivot with "
        "quaternions, rtol = atol = 1e-12).",
        "Errors are max abs over all steps and at t_end. Repeats per configuration: "
        f"{args.repeats} at h = {H_MAIN:g}, {args.study_repeats} in the work-precision study.",
        "",
        "Exudyn settings. *default*: `exu.SimulationSettings()` unchanged (generalized alpha, "
        "spectral radius 0.9, modified Newton reusing the Jacobian across steps, EXUdense, "
        "solution file every 0.01 s) plus one internal sensor every step. *fastest*: no "
        "solution file (`solution.file.write=False`), `verboseMode=0`, modified Newton with "
        "one Jacobian update per step (`newton.modifiedNewtonJacUpdatePerStep=True`), "
        "`reuseConstantMassMatrix=True`, EXUdense (EigenSparse was not faster for these "
        "sizes). *relTol 1e-4*: fastest with `newton.relativeTolerance=1e-4` (default 1e-8). "
        "*fast module*: `sys.exudynFast=True` (exudynCPPfast, no range checks, AVX2). jaxmbd: "
        "rA, gen_alpha (rho_inf 0.9, stabilised by default, index3 where stated) or backward "
        "Euler, full or reused-matrix Newton; rkmk: explicit Munthe-Kaas RK4 (rkmk's "
        "default tableau, rA; double pendulum and heavy top only). jaxmbd's defaults otherwise: "
        "linear_solver='auto' (elementwise small solves on the CPU, with XLA's small-loop "
        "hoisting flag that `import jaxmbd` sets) and one BLAS thread.",
        "",
        "## Goals",
        "",
        goals(speed, study, args.mechanisms),
        "",
    ]
    for mechanism in args.mechanisms:
        parts += [
            f"## {mechanism}, h = {H_MAIN:g}",
            "",
            speed_table([r for r in speed if r["mechanism"] == mechanism]),
            "",
            f"### {mechanism}: work-precision (max error / median run time)",
            "",
            f"![work-precision](work_precision_{mechanism}.png)",
            "",
            "Least run time to reach each max-error level (any h of the study):",
            "",
            time_to_accuracy_table([r for r in study if r["mechanism"] == mechanism]),
            "",
            study_table([r for r in study if r["mechanism"] == mechanism]),
            "",
        ]
        failed = [r for r in FAILED if r["mechanism"] == mechanism]
        if failed:
            parts += ["Runs that did not complete (left out of the tables and the plot):", ""]
            parts += [
                f"- {r['engine']}: {r['variant']}, h = {r['h']:g}: {r['failed']}" for r in failed
            ]
            parts.append("")
    parts.append(REPORT_NOTES)
    path.write_text("\n".join(parts))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--mechanisms", nargs="*", default=list(T_END), choices=list(T_END))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 step sizes, 2 repeats")
    parser.add_argument(
        "--study-h",
        nargs="*",
        type=float,
        help=f"the work-precision study's steps (default {' '.join(map(str, H_STUDY))}); "
        "each is one compilation per jaxmbd variant",
    )
    parser.add_argument(
        "--skip-full-newton",
        action="store_true",
        help="leave jaxmbd's full-Newton rows out of the h = 1e-3 table",
    )
    parser.add_argument(
        "--study-jaxmbd",
        nargs="*",
        choices=["gen_alpha", "index3", "backward_euler", "rkmk"],
        help="the jaxmbd variants of the work-precision study (default: all); the h = 1e-3 "
        "table has them all",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "engines")
    parser.add_argument("--exudyn-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.exudyn_worker:
        _exudyn_worker(*args.exudyn_worker)
        return
    try:
        import exudyn  # noqa: F401
        import mujoco  # noqa: F401
    except ImportError:
        sys.exit(BENCH_HINT)
    from benchmarks._harness import machine

    if args.quick:
        args.repeats = min(args.repeats, 2)
    args.study_repeats = 1 if args.quick else 3
    hs = H_STUDY_QUICK if args.quick else H_STUDY
    if args.study_h:
        hs = tuple(args.study_h) if H_MAIN in args.study_h else (*args.study_h, H_MAIN)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    print(f"machine: {machine()}; load {load_start:.1f}", flush=True)
    speed, study = [], []
    for mechanism in args.mechanisms:
        recs = []
        for integrator, newton, variant, form in jaxmbd_main(mechanism, args.skip_full_newton):
            recs.append(
                measure_jaxmbd(mechanism, H_MAIN, newton, args.repeats, integrator, variant, form)
            )
        recs += measure_exudyn(
            [(mechanism, H_MAIN, label) for label in EXUDYN_CONFIGS], args.repeats
        )
        for label, integrator, solref in mujoco_configs(mechanism):
            recs.append(measure_mujoco(mechanism, H_MAIN, label, integrator, solref, args.repeats))
        recs = [r for r in recs if r is not None]
        for r in recs:
            print(
                f"{mechanism:15s} {r['engine']:6s} {r['variant']:45s} {r['steps_per_s']:>10,.0f} "
                f"steps/s  err max {r['err_max']:.2e} end {r['err_end']:.2e}"
                + (
                    ""
                    if np.isnan(r["loop_violation_max"])
                    else f"  loop {r['loop_violation_max']:.1e}"
                ),
                flush=True,
            )
        speed += recs
        write_series(args.out / f"series_{mechanism}.csv", recs)

        # work-precision: jaxmbd reused-matrix Newton, Exudyn fastest, every MuJoCo integrator
        wp = [
            r
            for r in recs
            if r["engine"] == "jaxmbd"
            and (r["variant"].endswith("reuse Newton") or r["variant"].endswith("RK4"))
        ]
        wp += [r for r in recs if r["variant"] in EXUDYN_STUDY]
        wp += [r for r in recs if r["engine"] == "MuJoCo"]
        other = [h for h in hs if h != H_MAIN]
        for h in other:
            for integrator, newton, variant, form in jaxmbd_study(mechanism, args.study_jaxmbd):
                wp.append(
                    measure_jaxmbd(
                        mechanism, h, newton, args.study_repeats, integrator, variant, form
                    )
                )
                print(
                    f"{mechanism} jaxmbd {wp[-1]['variant']} h={h:g} err {wp[-1]['err_max']:.2e}",
                    flush=True,
                )
        wp += measure_exudyn(
            [(mechanism, h, label) for h in other for label in EXUDYN_STUDY], args.study_repeats
        )
        for h in other:
            for label, integrator, solref in mujoco_configs(mechanism):
                wp.append(
                    measure_mujoco(mechanism, h, label, integrator, solref, args.study_repeats)
                )
        wp = [r for r in wp if r is not None]
        study += wp
        plot_work_precision(args.out / f"work_precision_{mechanism}.png", mechanism, wp)
    write_records(args.out / "speed.csv", speed)
    write_records(args.out / "work_precision.csv", study)
    elapsed = time.perf_counter() - start
    args.load = (load_start, os.getloadavg()[0])
    write_report(args.out / "REPORT.md", args, speed, study, machine(), elapsed)
    print(f"wrote {args.out} in {elapsed:.0f} s", flush=True)


if __name__ == "__main__":
    main()
