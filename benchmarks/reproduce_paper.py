"""Reproduce every table and figure of section 4 of Kissel, Taves, Negrut (rA / rp / re).

    python -m benchmarks.reproduce_paper all [--quick]
    python -m benchmarks.reproduce_paper table7 | table8 | table9 | table10
    python -m benchmarks.reproduce_paper fig2 | fig3 | fig4 | fig5 | fig6 | fig7
    python -m benchmarks.reproduce_paper report          # only rebuild REPORT.md

Each command writes ``<name>.csv`` (and ``<name>.png`` for figures) plus ``<name>.json``
(command, machine, date, wall time) into ``benchmarks/results/paper/`` and then rebuilds
``REPORT.md`` there from every CSV present, so ``all`` and single commands stay consistent.
``--quick`` uses fewer step sizes and repeats (a few minutes for ``all``). Timings separate
compile time (first call minus the median of later calls) from run time and report the
median and min/max over repeats; speed ratios are measured within one run.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import logging
import time
from collections.abc import Callable

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from benchmarks import _harness  # noqa: E402
from benchmarks._harness import RESULTS, ROOT, from_tests, machine, time_call  # noqa: E402

references = from_tests("references")

OUT = RESULTS / "paper"
PUBLISHED = ROOT.parent / "shared" / "reference-models"
FORMS = ("rA", "rp", "re")
COLORS = {"rA": "tab:blue", "rp": "tab:orange", "re": "tab:green"}
MARKERS = {"rA": "o", "rp": "s", "re": "^"}
SIZES = {"rA": 9, "rp": 6.5, "re": 4}  # hollow, shrinking: overlapping curves stay visible
DRIVEN = ("single_pendulum", "four_link", "slider_crank")
ALL_MECHS = ("single_pendulum", "double_pendulum", "four_link", "slider_crank")
LABEL = {
    "single_pendulum": "1-Pendulum",
    "double_pendulum": "2-Pendulum",
    "four_link": "Four Link",
    "slider_crank": "Slider Crank",
}
T_END = {"single_pendulum": 3.0, "double_pendulum": 5.0, "four_link": 3.0, "slider_crank": 3.0}
STEPS_FULL = (1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4)
STEPS_QUICK = (1e-2, 5e-3, 2e-3, 1e-3)
CHUNK = 100  # fixed chunk size <= every step count: one compilation per (model, formulation)
GROUND_TRUTH_TOL = 1e-13
FIGSIZE, DPI = (6, 4), 100

# ------------------------------------------------------------------ paper values (section 4)
PAPER_T7 = {  # CD, DP1, DP2, D
    "single_pendulum": (3, 3, 0, 0),
    "four_link": (12, 6, 0, 0),
    "slider_crank": (6, 7, 4, 1),
}
PAPER_T8 = {  # speed-up vs rp: C1 rA, C1 re, C2 rA, C2 re
    "single_pendulum": (2.21, 1.40, 2.63, 1.27),
    "four_link": (2.38, 1.23, 2.55, 1.10),
    "slider_crank": (2.70, 1.47, 2.62, 1.23),
}
PAPER_T9 = {  # mean position-analysis iterations rp, rA, re (C1 and C2 print the same)
    "single_pendulum": (3.82, 3.80, 3.80),
    "four_link": (4.47, 4.50, 4.77),
    "slider_crank": (4.83, 4.70, 4.79),
}
PAPER_T10 = {  # speed-up vs rp: C1 rA, C1 re, C2 rA, C2 re
    "single_pendulum": (2.43, 1.29, 2.46, 1.69),
    "double_pendulum": (2.63, 1.21, 2.39, 1.53),
    "four_link": (2.62, 1.21, 2.41, 1.44),
    "slider_crank": (2.93, 1.31, 2.29, 1.30),
}

CAUSE_NEWTON = (
    "our Newton steps are exact (full Jacobian, including the reaction-force sensitivities of "
    "Tables 3-6 in dynamics) and converge quadratically, while the published code freezes a "
    "simplified matrix and converges linearly"
)
CAUSE_XLA = (
    "our solvers are XLA-compiled, so run time follows floating-point work and memory "
    "traffic, while the paper's NumPy Python pays a fixed interpreter/dispatch overhead per "
    "array operation that dominates these tiny systems (3-18 equations)"
)
CAUSE_AUTODIFF = (
    "our rp and re constraint Jacobians, gamma and Newton matrices come from autodiff of "
    "the constraint functions (forward-mode through A(p) and the trigonometric A(e), "
    "including the re inertia terms), while rA is hand-coded (Tables 2-6)"
)
CAUSE_ROT = (
    "our built-ins drive the mechanisms with a regular rotation driver ROT (one row, "
    "regular at every angle) instead of a DP1 with f = cos(angle), which is singular where "
    "the angle passes 0 or pi"
)


def noop(done, total):
    pass


def model(name):
    return getattr(mbd.models, name)()


def fmt(x, digits=2):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(x):
        return "n/a"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4):
        return f"{x:.{digits}e}"
    return f"{x:.{digits}f}"


# ------------------------------------------------------------------ files


def write_csv(name: str, rows: list[dict]):
    path = OUT / f"{name}.csv"
    _harness.write_csv(path, rows)
    print(f"wrote {path.relative_to(ROOT)}")


def read_csv(name: str) -> list[dict] | None:
    path = OUT / f"{name}.csv"
    if not path.exists():
        return None
    with path.open() as fh:
        return list(csv.DictReader(fh))


def write_meta(name: str, args, wall_s: float, **extra):
    meta = dict(
        command=f"python -m benchmarks.reproduce_paper {name}" + (" --quick" if args.quick else ""),
        run_as=f"reproduce_paper.py {args.command}" + (" --quick" if args.quick else ""),
        machine=machine(),
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        wall_s=round(wall_s, 1),
        quick=bool(args.quick),
        **extra,
    )
    (OUT / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def read_meta(name: str) -> dict:
    path = OUT / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save_fig(fig, name: str):
    fig.tight_layout()
    path = OUT / f"{name}.png"
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path.relative_to(ROOT)}")


def slope(hs, errs) -> float:
    hs, errs = np.asarray(hs, float), np.asarray(errs, float)
    ok = np.isfinite(errs) & (errs > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(hs[ok]), np.log(errs[ok]), 1)[0])


# ------------------------------------------------------------------ shared runs (cached)

_KIN: dict = {}
_DYN: dict = {}
_TRUTH: dict = {}


def kinematics_run(name, form, h, t_end, tol):
    """Summary of a chunked kinematics run (one compilation per model and formulation)."""
    key = (name, form, h, t_end, tol)
    if key not in _KIN:
        sol = mbd.kinematics(
            model(name),
            formulation=form,
            t_end=t_end,
            h=h,
            tol=tol,
            progress=noop,
            chunk_size=CHUNK,
        )
        it = np.asarray(sol.iterations)[1:]
        _KIN[key] = dict(mean_iterations=float(it.mean()), max_iterations=int(it.max()))
    return _KIN[key]


def dynamics_run(name, form, h, t_end, tol=None):
    """Chunked dynamics run: final state, z histories and iteration counts (cached)."""
    key = (name, form, h, t_end, tol)
    if key not in _DYN:
        try:
            sol = mbd.simulate(
                model(name),
                formulation=form,
                integrator="backward_euler",  # the paper's integrator
                newton="full",
                t_end=t_end,
                h=h,
                tol=tol,
                progress=noop,
                chunk_size=CHUNK,
            )
        except mbd.SolverError as err:
            print(f"  {name} {form} h={h}: {err}")
            _DYN[key] = None
            return None
        it = np.asarray(sol.iterations)[1:]
        _DYN[key] = dict(
            t=np.asarray(sol.t),
            z=np.asarray(sol.r[:, :, 2]),
            r=np.asarray(sol.r[-1]),
            rdot=np.asarray(sol.rdot[-1]),
            rddot=np.asarray(sol.rddot[-1]),
            mean_iterations=float(it.mean()),
            max_iterations=int(it.max()),
        )
    return _DYN[key]


def ground_truth(name, t_end=3.0):
    """Tight-tolerance rA kinematics at t_end (exact positions, velocities, accelerations)."""
    if name not in _TRUTH:
        sol = mbd.kinematics(
            model(name), formulation="rA", t_end=t_end, h=1e-3, tol=GROUND_TRUTH_TOL
        )
        _TRUTH[name] = dict(
            t=float(sol.t[-1]),
            r=np.asarray(sol.r[-1]),
            rdot=np.asarray(sol.rdot[-1]),
            rddot=np.asarray(sol.rddot[-1]),
        )
        jax.clear_caches()
    return _TRUTH[name]


def steps(args):
    return STEPS_QUICK if args.quick else STEPS_FULL


# ------------------------------------------------------------------ table 7


def table7(args):
    rows = []
    kinds = ("CD", "DP1", "DP2", "D", "ROT")
    for name in ALL_MECHS:
        counts = model(name).gcon_counts()
        paper = PAPER_T7.get(name)
        rows.append(
            dict(
                mechanism=name,
                source="jaxmbd built-in",
                **{k: counts[k] for k in kinds},
                paper_CD=paper[0] if paper else "",
                paper_DP1=paper[1] if paper else "",
                paper_DP2=paper[2] if paper else "",
                paper_D=paper[3] if paper else "",
            )
        )
    for path in sorted(PUBLISHED.glob("*/*")):
        if path.suffix not in (".json", ".mdl"):
            continue
        data = json.loads(path.read_text())
        raw = {k: sum(c["type"] == k for c in data["constraints"]) for k in kinds}
        quiet = logging.getLogger("jaxmbd")
        level, quiet.level = quiet.level, logging.ERROR  # files have no masses: counts only
        try:
            loaded = mbd.load_model(path).gcon_counts()
        finally:
            quiet.setLevel(level)
        rel = path.relative_to(PUBLISHED)
        rows.append(dict(mechanism=path.stem, source=f"file {rel} (as written)", **raw))
        rows.append(dict(mechanism=path.stem, source=f"file {rel} (as loaded)", **loaded))
    for row in rows:
        row["rows"] = sum(int(row[k]) for k in kinds)
    write_csv("table7", rows)


# ------------------------------------------------------------------ tables 8 and 9


def table8(args):
    """Kinematics speed (h = 1e-3, tol 1e-10, 3 s) and iterations; also feeds table 9."""
    repeats = args.repeats or (2 if args.quick else 7)
    h, t_end, tol = 1e-3, 3.0, 1e-10
    rows = []
    for name in DRIVEN:
        m = model(name)
        res = {}
        for form in FORMS:
            last = {}

            def run(form=form, m=m, last=last):
                last["sol"] = mbd.kinematics(m, formulation=form, t_end=t_end, h=h, tol=tol)
                return last["sol"].r

            first, median, (lo, hi) = time_call(run, repeats=repeats)
            sol = last["sol"]
            it = np.asarray(sol.iterations)[1:]
            res[form] = dict(
                mechanism=name,
                formulation=form,
                h=h,
                t_end=t_end,
                tol=tol,
                repeats=repeats,
                compile_s=first - median,
                run_median_s=median,
                run_min_s=lo,
                run_max_s=hi,
                steps_per_s=(len(sol.t) - 1) / median,
                mean_iterations=float(it.mean()),
                max_iterations=int(it.max()),
            )
            print(
                f"  {name:16s} {form}  compile {first - median:5.2f} s  run "
                f"{median * 1e3:8.2f} ms [{lo * 1e3:.2f}, {hi * 1e3:.2f}]  "
                f"iters {it.mean():.3f}"
            )
            _KIN[(name, form, h, t_end, tol)] = dict(
                mean_iterations=float(it.mean()), max_iterations=int(it.max())
            )
        base = res["rp"]["run_median_s"]
        for form in FORMS:
            r = res[form]
            r["speedup_vs_rp"] = base / r["run_median_s"]
            # conservative spread of the ratio: slowest rp over fastest form and vice versa
            r["speedup_min"] = res["rp"]["run_min_s"] / r["run_max_s"]
            r["speedup_max"] = res["rp"]["run_max_s"] / r["run_min_s"]
            p = PAPER_T8[name]
            r["paper_C1"] = {"rA": p[0], "re": p[1], "rp": 1.0}[form]
            r["paper_C2"] = {"rA": p[2], "re": p[3], "rp": 1.0}[form]
            rows.append(r)
        jax.clear_caches()
    write_csv("table8", rows)


def table9(args):
    h, t_end, tol = 1e-3, 3.0, 1e-10
    rows = []
    for name in DRIVEN:
        for form in FORMS:
            k = kinematics_run(name, form, h, t_end, tol)
            paper = dict(zip(("rp", "rA", "re"), PAPER_T9[name], strict=True))[form]
            rows.append(
                dict(
                    mechanism=name,
                    formulation=form,
                    h=h,
                    tol=tol,
                    mean_iterations=k["mean_iterations"],
                    max_iterations=k["max_iterations"],
                    paper_C1_C2=paper,
                )
            )
        jax.clear_caches()
    write_csv("table9", rows)


# ------------------------------------------------------------------ figure 2


def plot_iterations(rows, name, ylabel, title):
    """Mean iterations against step size, one line per formulation (Figs. 2 and 4)."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for form in FORMS:
        sel = [r for r in rows if r["formulation"] == form]
        ax.semilogx(
            [r["h"] for r in sel],
            [r["mean_iterations"] for r in sel],
            marker=MARKERS[form],
            color=COLORS[form],
            label=form,
        )
    ax.set_xlabel("step size h [s]")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save_fig(fig, name)


def fig2(args):
    name, t_end, tol = "four_link", 3.0, 1e-11
    rows = []
    for form in FORMS:
        for h in steps(args):
            k = kinematics_run(name, form, h, t_end, tol)
            rows.append(dict(mechanism=name, formulation=form, h=h, tol=tol, **k))
        jax.clear_caches()
    write_csv("fig2", rows)
    plot_iterations(
        rows,
        "fig2",
        "mean position-analysis iterations",
        "Four link kinematics, tol 1e-11, 3 s (cf. paper Fig. 2)",
    )


# ------------------------------------------------------------------ figure 3


def fig3(args):
    name, t_end = "double_pendulum", 5.0
    rows = []
    for form in FORMS:
        for h in steps(args):
            d = dynamics_run(name, form, h, t_end)
            if d is None:
                rows.append(dict(mechanism=name, formulation=form, h=h, dz_end=np.nan))
                continue
            ref = references.double_pendulum(d["t"])
            dz = np.abs(d["z"][:, 1] - ref["r"][:, 1, 2])  # centre of mass of rod 2
            rows.append(
                dict(
                    mechanism=name,
                    formulation=form,
                    h=h,
                    t_end=float(d["t"][-1]),
                    dz_end=float(dz[-1]),
                    dz_max=float(dz.max()),
                    mean_iterations=d["mean_iterations"],
                )
            )
        jax.clear_caches()
    for form in FORMS:
        sel = [r for r in rows if r["formulation"] == form]
        for key in ("dz_end", "dz_max"):
            s = slope([r["h"] for r in sel], [r.get(key, np.nan) for r in sel])
            for r in sel:
                r[f"slope_{key}"] = s
    write_csv("fig3", rows)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for form in FORMS:
        sel = [r for r in rows if r["formulation"] == form]
        hs = [r["h"] for r in sel]
        style = dict(marker=MARKERS[form], color=COLORS[form])
        ax.loglog(hs, [r["dz_end"] for r in sel], label=f"{form}, at t = 5 s", **style)
        dz_max = [r.get("dz_max", np.nan) for r in sel]
        ax.loglog(hs, dz_max, ls="--", alpha=0.5, mfc="none", label=f"{form}, max", **style)
    ax.set_xlabel("step size h [s]")
    ax.set_ylabel("|Δz| of rod 2 centre of mass [m]")
    ax.set_title("Double pendulum dynamics vs DOP853 reference (cf. Fig. 3)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    save_fig(fig, "fig3")


# ------------------------------------------------------------------ table 10


def table10(args):
    """Dynamics speed at h = 1e-3 with Theta = 1e-3 (caption) and Theta h^2 = 1e-11 (text)."""
    repeats = args.repeats or (1 if args.quick else 5)
    h = 1e-3
    tolerances = {"caption Theta=1e-3": 1e-3, "text Theta*h^2=1e-11": mbd.THETA_H2 / h**2}
    variants = (("rA", "full"), ("rA", "modified"), ("rp", "full"), ("re", "full"))
    rows = []
    for name in ALL_MECHS:
        m, t_end = model(name), T_END[name]
        res = {}
        for form, newton in variants:
            for label, tol in tolerances.items():
                last = {}

                def run(form=form, newton=newton, tol=tol, m=m, t_end=t_end, last=last):
                    last["sol"] = mbd.simulate(
                        m,
                        formulation=form,
                        integrator="backward_euler",
                        t_end=t_end,
                        h=h,
                        tol=tol,
                        newton=newton,
                    )
                    return last["sol"].r

                first, median, (lo, hi) = time_call(run, repeats=repeats)
                # the tolerance is a traced argument: only the first tolerance compiles
                compile_s = first - median if label == next(iter(tolerances)) else np.nan
                sol = last["sol"]
                it = np.asarray(sol.iterations)[1:]
                res[(label, form, newton)] = dict(
                    mechanism=name,
                    tolerance=label,
                    Theta=tol,
                    formulation=form,
                    newton=newton,
                    h=h,
                    t_end=t_end,
                    repeats=repeats,
                    first_call_s=first,
                    compile_s=compile_s,
                    run_median_s=median,
                    run_min_s=lo,
                    run_max_s=hi,
                    steps_per_s=(len(sol.t) - 1) / median,
                    mean_iterations=float(it.mean()),
                    max_iterations=int(it.max()),
                )
                print(
                    f"  {name:16s} {form} {newton:8s} {label:22s} first {first:5.2f} s  run "
                    f"{median * 1e3:8.1f} ms [{lo * 1e3:.1f}, {hi * 1e3:.1f}]  "
                    f"iters {it.mean():.3f}"
                )
            jax.clear_caches()
        p = PAPER_T10[name]
        for (label, form, newton), r in res.items():
            base = res[(label, "rp", "full")]
            r["speedup_vs_rp"] = base["run_median_s"] / r["run_median_s"]
            r["speedup_min"] = base["run_min_s"] / r["run_max_s"]
            r["speedup_max"] = base["run_max_s"] / r["run_min_s"]
            paper = {"rA": (p[0], p[2]), "re": (p[1], p[3]), "rp": (1.0, 1.0)}[form]
            r["paper_C1"], r["paper_C2"] = paper if newton == "full" else ("", "")
            rows.append(r)
    write_csv("table10", rows)


# ------------------------------------------------------------------ figure 4


def fig4(args):
    name, t_end = "four_link", 3.0
    rows = []
    for form in FORMS:
        for h in steps(args):
            d = dynamics_run(name, form, h, t_end)
            rows.append(
                dict(
                    mechanism=name,
                    formulation=form,
                    h=h,
                    Theta=mbd.THETA_H2 / h**2,
                    mean_iterations=d["mean_iterations"] if d else np.nan,
                    max_iterations=d["max_iterations"] if d else np.nan,
                )
            )
        jax.clear_caches()
    write_csv("fig4", rows)
    plot_iterations(
        rows,
        "fig4",
        "mean Newton iterations per step",
        "Four link dynamics, Θh² = 1e-11, 3 s (cf. paper Fig. 4)",
    )


# ------------------------------------------------------------------ figures 5-7 (order)

ORDER = {  # figure: (mechanism, body index, coordinate, formulations plotted, quantities)
    "fig5": ("single_pendulum", 0, 2, ("rA",), ("r", "rdot", "rddot")),
    "fig6": ("slider_crank", 2, 0, FORMS, ("rdot", "rddot")),
    "fig7": ("four_link", 2, 2, FORMS, ("rdot", "rddot")),
}
QTY_LABEL = {"r": "position", "rdot": "velocity", "rddot": "acceleration"}
AXIS = "xyz"


def order_figure(fig_name, args):
    name, body, k, plotted, quantities = ORDER[fig_name]
    t_end = 3.0
    truth = ground_truth(name, t_end)
    rows = []
    for form in FORMS:  # all three in the CSV; the figure shows what the paper shows
        for h in steps(args):
            d = dynamics_run(name, form, h, t_end)
            row = dict(mechanism=name, body=model(name).body_names[body], coordinate=AXIS[k])
            row.update(formulation=form, h=h, Theta=mbd.THETA_H2 / h**2)
            for q in ("r", "rdot", "rddot"):
                row[f"err_{q}"] = (
                    abs(float(d[q][body, k]) - float(truth[q][body, k])) if d else np.nan
                )
            row["mean_iterations"] = d["mean_iterations"] if d else np.nan
            rows.append(row)
        jax.clear_caches()
    for form in FORMS:
        sel = [r for r in rows if r["formulation"] == form]
        for q in ("r", "rdot", "rddot"):
            errs = [r[f"err_{q}"] for r in sel]
            # round-off level errors (index-3 positions) have no meaningful slope
            s = slope([r["h"] for r in sel], errs) if np.nanmax(errs) > 1e-10 else np.nan
            for r in sel:
                r[f"slope_{q}"] = s
    write_csv(fig_name, rows)

    fig, ax = plt.subplots(figsize=FIGSIZE)
    styles = {"r": ":", "rdot": "-", "rddot": "--"}
    hs = np.array(steps(args))
    for form in plotted:
        sel = [r for r in rows if r["formulation"] == form]
        for q in quantities:
            err = np.array([r[f"err_{q}"] for r in sel])
            shown = np.where(err > 0, err, np.nan)
            lab = f"{QTY_LABEL[q]} ({form})" if len(plotted) > 1 else QTY_LABEL[q]
            s_q = sel[0][f"slope_{q}"]
            lab += f", slope {s_q:.2f}" if np.isfinite(s_q) else ", round-off"
            ax.loglog(hs, shown, ls=styles[q], marker=MARKERS[form], color=COLORS[form],
                      ms=SIZES[form], mfc="none", label=lab)  # fmt: skip
    ref_err = np.nanmax([r["err_rdot"] for r in rows if r["formulation"] == plotted[0]])
    trend = 0.3 * ref_err * hs / hs.max()
    ax.loglog(hs, trend, color="k", lw=0.8, label="order 1 trendline")
    ax.set_xlabel("step size h [s]")
    ax.set_ylabel(f"|error| of {AXIS[k]} at T_end = 3 s")
    title = {
        "fig5": "Single pendulum, rA: z of the pendulum (cf. Fig. 5)",
        "fig6": "Slider crank: x of the slider (cf. Fig. 6)",
        "fig7": "Four link: z of link 3 (cf. Fig. 7)",
    }[fig_name]
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save_fig(fig, fig_name)


def fig5(args):
    order_figure("fig5", args)


def fig6(args):
    order_figure("fig6", args)


def fig7(args):
    order_figure("fig7", args)


# ------------------------------------------------------------------ report


def _md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _provenance(name: str) -> str:
    meta = read_meta(name)
    if not meta:
        return ""
    quick = " **(quick mode: fewer step sizes/repeats)**" if meta.get("quick") else ""
    return (
        f"\n_Command:_ `{meta['command']}`{quick} (this run: `{meta.get('run_as', '')}`); "
        f"{meta['date']}, wall {meta['wall_s']} s; "
        f"machine: {meta['machine']}.\n"
    )


def _missing(name: str) -> str:
    return f"_Not run yet:_ `python -m benchmarks.reproduce_paper {name}`.\n"


def report_table7() -> str:
    rows = read_csv("table7")
    out = ["## Table 7: GCONs per mechanism\n"]
    if rows is None:
        return out[0] + _missing("table7")
    kinds = ("CD", "DP1", "DP2", "D", "ROT")
    built = [r for r in rows if r["source"] == "jaxmbd built-in"]
    tab = []
    for r in built:
        paper = " / ".join(r[f"paper_{k}"] for k in kinds[:4]) if r["paper_CD"] else "not in table"
        tab.append([LABEL[r["mechanism"]], *(r[k] for k in kinds), paper])
    out.append(_md_table(["mechanism", *kinds, "paper CD / DP1 / DP2 / D"], tab))
    files = [r for r in rows if r["source"] != "jaxmbd built-in"]
    out.append("\nPublished model files (read from `shared/reference-models`), as written and as "
               "`jaxmbd.load_model` reads them:\n")  # fmt: skip
    out.append(_md_table(["file", *kinds], [[r["source"], *(r[k] for k in kinds)] for r in files]))
    out.append(
        "\n**Differences.** Every built-in driven mechanism has one DP1 fewer and one ROT more "
        f"than the paper because {CAUSE_ROT}; all other counts match the paper exactly. "
        "The published files as written reproduce the paper's counts; on loading, a DP1 whose "
        "f is cos(angle(t)) is replaced by the equivalent ROT, while the SimEngineMBD "
        "single_pendulum.json and four_link.json stay DP1 because their driver f is '0' in the "
        "file (C2 sets it in Python). The double pendulum is not in the paper's table "
        "(no driver: CD 6, DP1 4, same as the published file).\n"
    )
    out.append(_provenance("table7"))
    return "\n".join(out)


def _ratio_range(rows, form, key="speedup_vs_rp"):
    vals = [float(r[key]) for r in rows if r["formulation"] == form]
    return min(vals), max(vals)


def _re_vs_rp(lo: float, hi: float, paper: str) -> str:
    rng = f"re/rp {fmt(lo)}-{fmt(hi)}, paper {paper}"
    if hi < 1:
        return f"re is slower than rp here ({rng}), the opposite of the paper's finding"
    if lo > 1:
        return f"re is faster than rp here too ({rng}), as in the paper"
    return (
        f"re and rp swap places between mechanisms here ({rng}), whereas the paper finds re "
        "consistently faster"
    )


def report_table8() -> str:
    rows = read_csv("table8")
    out = ["## Table 8: kinematics speed-up relative to rp (h = 1e-3, ‖δ‖ < 1e-10, 3 s)\n"]
    if rows is None:
        return out[0] + _missing("table8")
    tab = []
    for name in DRIVEN:
        sel = {r["formulation"]: r for r in rows if r["mechanism"] == name}
        if not sel:
            continue
        p = PAPER_T8[name]
        tab.append(
            [
                LABEL[name],
                f"{fmt(sel['rA']['speedup_vs_rp'])} [{fmt(sel['rA']['speedup_min'])}, "
                f"{fmt(sel['rA']['speedup_max'])}]",
                f"{fmt(sel['re']['speedup_vs_rp'])} [{fmt(sel['re']['speedup_min'])}, "
                f"{fmt(sel['re']['speedup_max'])}]",
                f"{p[0]:.2f} / {p[1]:.2f}",
                f"{p[2]:.2f} / {p[3]:.2f}",
                " / ".join(fmt(float(sel[f]["run_median_s"]) * 1e3, 1) for f in FORMS),
                " / ".join(fmt(sel[f]["compile_s"], 1) for f in FORMS),
            ]
        )
    out.append(
        _md_table(
            [
                "mechanism",
                "ours rA/rp [range]",
                "ours re/rp [range]",
                "paper C1 rA / re",
                "paper C2 rA / re",
                "run ms rA / rp / re (median)",
                "compile s rA / rp / re",
            ],
            tab,
        )
    )
    ra_lo, ra_hi = _ratio_range(rows, "rA")
    re_lo, re_hi = _ratio_range(rows, "re")
    rep = rows[0]["repeats"]
    out.append(
        f"\nRatios are rp's median run time over the formulation's (median of {rep} runs after "
        "a compiling first call); the bracket is the worst/best case over the min/max run "
        "times. Compile time is reported apart and excluded.\n"
    )
    rA_dir = "smaller than" if ra_hi < 2.21 else "comparable to" if ra_lo < 2.7 else "larger than"
    out.append(
        f"**Differences.** rA/rp is {fmt(ra_lo)}-{fmt(ra_hi)} here, {rA_dir} the paper's "
        f"2.21-2.70, because {CAUSE_XLA}; what remains is rp's one extra equation per body "
        f"and the cost of forming A(p) and its derivatives. {_re_vs_rp(re_lo, re_hi, '1.10-1.47')}"
        f", because {CAUSE_AUTODIFF}: the trigonometric work of re is real floating-point cost "
        "under XLA, whereas in the paper's Python the larger rp system costs more interpreted "
        "operations. rA is the fastest formulation, as in the paper.\n"
    )
    out.append(_provenance("table8"))
    return "\n".join(out)


def report_table9() -> str:
    rows = read_csv("table9")
    out = ["## Table 9: mean position-analysis iterations (h = 1e-3, ‖δ‖ < 1e-10)\n"]
    if rows is None:
        return out[0] + _missing("table9")
    tab = []
    for name in DRIVEN:
        sel = {r["formulation"]: r for r in rows if r["mechanism"] == name}
        if not sel:
            continue
        tab.append(
            [
                LABEL[name],
                *(fmt(sel[f]["mean_iterations"], 2) for f in ("rp", "rA", "re")),
                " / ".join(f"{v:.2f}" for v in PAPER_T9[name]),
            ]
        )
    out.append(_md_table(["mechanism", "ours rp", "ours rA", "ours re", "paper rp / rA / re"], tab))
    vals = [float(r["mean_iterations"]) for r in rows]
    out.append(
        f"\n**Differences.** We need {min(vals):.2f}-{max(vals):.2f} iterations per step against "
        f"the paper's 3.80-4.83 because {CAUSE_NEWTON} (in kinematics: the exact constraint "
        "Jacobian at every iteration instead of one frozen per step); from the explicit "
        "predictor the first exact correction leaves an error far below 1e-10 and the "
        "second only confirms ‖δ‖ < 1e-10. As in the paper, the iteration counts hardly "
        "depend on the formulation, and the single pendulum needs the fewest.\n"
    )
    out.append(_provenance("table9"))
    return "\n".join(out)


def _by_form(rows, key):
    return {
        f: [(float(r["h"]), float(r[key])) for r in rows if r["formulation"] == f] for f in FORMS
    }


def _spread_between_forms(rows, key) -> float:
    """Largest relative difference between formulations at equal h."""
    by_h: dict = {}
    for r in rows:
        by_h.setdefault(float(r["h"]), []).append(float(r[key]))
    rel = [
        (max(v) - min(v)) / max(abs(min(v)), 1e-300)
        for v in by_h.values()
        if np.all(np.isfinite(v))
    ]
    return max(rel) if rel else float("nan")


def _iteration_trend(rows) -> str:
    hs = sorted({float(r["h"]) for r in rows})
    small = np.mean([float(r["mean_iterations"]) for r in rows if float(r["h"]) == hs[0]])
    large = np.mean([float(r["mean_iterations"]) for r in rows if float(r["h"]) == hs[-1]])
    return small, large, hs[0], hs[-1]


def _trend_words(small: float, large: float) -> str:
    if abs(small - large) < 0.05 * large:
        return "nearly independent of h"
    if small < large:
        return "fewer iterations for smaller steps"
    return "more iterations for smaller steps"


def _iteration_table(rows) -> str:
    hs = sorted({float(r["h"]) for r in rows}, reverse=True)
    tab = []
    for h in hs:
        sel = {r["formulation"]: r for r in rows if float(r["h"]) == h}
        tab.append([f"{h:g}", *(fmt(sel[f]["mean_iterations"], 3) for f in FORMS if f in sel)])
    return _md_table(["h", *FORMS], tab)


def report_fig2() -> str:
    rows = read_csv("fig2")
    out = ["## Figure 2: four link kinematics, mean iterations vs step size (tol 1e-11, 3 s)\n"]
    if rows is None:
        return out[0] + _missing("fig2")
    out.append("![fig2](fig2.png)\n")
    out.append(_iteration_table(rows))
    small, large, h0, h1 = _iteration_trend(rows)
    spread = _spread_between_forms(rows, "mean_iterations")
    out.append(
        f"\n**Comparison.** Paper: iterations depend on h, not significantly on the "
        f"formulation. Ours: {large:.2f} iterations at h = {h1:g} and {small:.2f} at "
        f"h = {h0:g} ({_trend_words(small, large)}); the formulations differ by at most "
        f"{100 * spread:.0f}% at equal h, so the second conclusion holds. Our counts are "
        f"lower than the paper's because {CAUSE_NEWTON}; with quadratic convergence the "
        "count hardly depends on how close the predictor starts, hence the weak dependence "
        "on h.\n"
    )
    out.append(_provenance("fig2"))
    return "\n".join(out)


def report_fig3() -> str:
    rows = read_csv("fig3")
    out = ["## Figure 3: double pendulum dynamics, |Δz| of rod 2 vs the reference (5 s)\n"]
    if rows is None:
        return out[0] + _missing("fig3")
    out.append("![fig3](fig3.png)\n")
    hs = sorted({float(r["h"]) for r in rows}, reverse=True)
    tab = []
    for h in hs:
        sel = {r["formulation"]: r for r in rows if float(r["h"]) == h}
        tab.append([f"{h:g}", *(fmt(sel[f]["dz_end"], 3) for f in FORMS),
                    *(fmt(sel[f].get("dz_max", ""), 3) for f in FORMS)])  # fmt: skip
    out.append(_md_table(["h", *(f"{f} at 5 s" for f in FORMS), *(f"{f} max" for f in FORMS)], tab))
    slopes = {
        f: float(next(r for r in rows if r["formulation"] == f)["slope_dz_max"]) for f in FORMS
    }
    spread = _spread_between_forms(rows, "dz_max")
    same = all(
        abs(float(a["dz_max"]) - float(b["dz_max"])) < 1e-6 * float(a["dz_max"])
        for a in rows
        if a["formulation"] == "rA"
        for b in rows
        if b["formulation"] == "re" and b["h"] == a["h"]
    )
    same_txt = (
        " rA and re coincide to round-off: for a rotation about a fixed axis both apply "
        "backward Euler to the same angle (rA through exp, re through the one changing Euler "
        "angle), while rp applies it to Euler parameters constrained to unit norm."
        if same
        else ""
    )
    out.append(
        "\nThe reference is `tests/references.py::double_pendulum` (Lagrange equations in the "
        "two absolute angles, DOP853 with rtol = atol = 1e-13, independent of jaxmbd); Δz is "
        "the z coordinate of rod 2's centre of mass, the body position the paper's codes "
        "report. The paper does not say whether Δz is taken at t = 5 s or over the run, so "
        "both are given.\n"
    )
    out.append(
        "**Comparison.** Paper: all three formulations tend to the reference as h decreases, "
        "with nearly identical Δz. Ours: the same; the fitted log-log slopes of the maximum "
        f"error are {', '.join(f'{f} {s:.2f}' for f, s in slopes.items())}: backward Euler "
        "is first order, but over 5 s the swinging double pendulum amplifies the phase error "
        "of its numerical damping, so the largest steps are not yet in the asymptotic range "
        "(at t = 1 s the error falls by about 9x per decade of h, "
        "`tests/test_dynamics.py::test_double_pendulum_first_order`), and the formulations "
        "differ by at most "
        f"{100 * spread:.0f}% at equal h (each applies backward Euler to different orientation "
        "coordinates, so they agree to O(h), not exactly). The paper's reference used "
        "an ODE solver with h = 1e-7; ours is an adaptive 8th-order solver at 1e-13, a "
        "difference that is invisible at these error levels. The pointwise error at t = 5 s "
        "can dip where the solution crosses the reference, so its slope is less regular than "
        f"that of the maximum.{same_txt}\n"
    )
    out.append(_provenance("fig3"))
    return "\n".join(out)


def report_table10() -> str:
    rows = read_csv("table10")
    out = ["## Table 10: dynamics speed-up relative to rp (h = 1e-3; 2-pendulum 5 s, others 3 s)\n"]
    if rows is None:
        return out[0] + _missing("table10")
    labels = list(dict.fromkeys(r["tolerance"] for r in rows))
    tab = []
    for name in ALL_MECHS:
        p = PAPER_T10[name]
        for label in labels:
            sel = {
                (r["formulation"], r["newton"]): r
                for r in rows
                if r["mechanism"] == name and r["tolerance"] == label
            }
            if not sel:
                continue

            def cell(key, sel=sel):
                r = sel[key]
                return (
                    f"{fmt(r['speedup_vs_rp'])} [{fmt(r['speedup_min'])}, {fmt(r['speedup_max'])}]"
                )

            tab.append(
                [
                    LABEL[name],
                    label.replace("*", "·"),
                    cell(("rA", "full")),
                    cell(("re", "full")),
                    cell(("rA", "modified")),
                    f"{p[0]:.2f} / {p[1]:.2f}",
                    f"{p[2]:.2f} / {p[3]:.2f}",
                    " / ".join(
                        f"{float(sel[k]['run_median_s']) * 1e3:.0f}"
                        for k in (
                            ("rA", "full"),
                            ("rp", "full"),
                            ("re", "full"),
                            ("rA", "modified"),
                        )
                    ),
                    " / ".join(
                        fmt(sel[k]["mean_iterations"], 2)
                        for k in (
                            ("rA", "full"),
                            ("rp", "full"),
                            ("re", "full"),
                            ("rA", "modified"),
                        )
                    ),
                ]
            )
    out.append(
        _md_table(
            [
                "mechanism",
                "tolerance",
                "ours rA/rp",
                "ours re/rp",
                "ours rA modified/rp",
                "paper C1 rA / re",
                "paper C2 rA / re",
                "run ms rA / rp / re / rA-mod",
                "iterations rA / rp / re / rA-mod",
            ],
            tab,
        )
    )
    rep = rows[0]["repeats"]
    full = [r for r in rows if r["newton"] == "full"]
    ra = [float(r["speedup_vs_rp"]) for r in full if r["formulation"] == "rA"]
    re_ = [float(r["speedup_vs_rp"]) for r in full if r["formulation"] == "re"]
    mod = [float(r["speedup_vs_rp"]) for r in rows if r["newton"] == "modified"]
    mod_its = [float(r["mean_iterations"]) for r in rows if r["newton"] == "modified"]
    its = [float(r["mean_iterations"]) for r in full]
    compile_s = [float(r["compile_s"]) for r in rows if float(r["compile_s"] or "nan") > 0.5]
    out.append(
        f'\n"caption Θ=1e-3" is the tolerance of the Table 10 caption (‖δ‖ < 1e-3 on the '
        'accelerations and multipliers); "text Θ·h²=1e-11" is the rule of section 4.4, '
        "which gives Θ = 1e-5 at h = 1e-3. Each Θ is passed as jaxmbd's `tol`, which is "
        "relative, not the paper's absolute bound: an unknown passes the step test when "
        "|δ_j| ≤ Θ w_j with w_j its magnitude (accelerations at least |g| = 9.81, multipliers "
        "at least m s_a), and the residual test must pass too; so the step bound is looser "
        "than the paper's by w_j where w_j > 1, and the extra residual test stricter. The "
        "default `tol` is 1e-10 (relative). Ratios are rp's median run "
        f"time over the variant's within the same tolerance (median of {rep} runs after a "
        "compiling first call; bracket: worst/best case over min/max). rA modified = the "
        'Newton matrix frozen per step (newton="modified"), not in the paper. Compile times '
        f"(excluded) are {fmt(min(compile_s) if compile_s else np.nan, 1)}-"
        f"{fmt(max(compile_s) if compile_s else np.nan, 1)} s per variant.\n"
    )
    out.append(
        f"**Differences.** rA/rp is {fmt(min(ra))}-{fmt(max(ra))} here (paper 2.29-2.93) and "
        f"{_re_vs_rp(min(re_), max(re_), '1.21-1.69')}. Both ratios differ from the paper "
        f"because {CAUSE_XLA}, and rp and re additionally because {CAUSE_AUTODIFF}: their "
        "Newton matrices are dense forward-mode Jacobians of the whole residual, whose cost "
        "grows with the square of the system size, so the gap to the hand-coded rA widens "
        "with the number of bodies. "
        f"Mean iterations are {min(its):.2f}-{max(its):.2f} per step because {CAUSE_NEWTON}. "
        f"Modified Newton (rA) gives {fmt(min(mod))}-{fmt(max(mod))} x rp with "
        f"{min(mod_its):.2f}-{max(mod_its):.2f} iterations per step: freezing the exact "
        "matrix at the step's first iterate saves its assembly and factorisation in later "
        "iterations and costs almost no extra iterations at h = 1e-3, where the matrix "
        "barely changes within a step.\n"
    )
    out.append(_provenance("table10"))
    return "\n".join(out)


def report_fig4() -> str:
    rows = read_csv("fig4")
    out = ["## Figure 4: four link dynamics, mean Newton iterations vs step size (Θh² = 1e-11)\n"]
    if rows is None:
        return out[0] + _missing("fig4")
    out.append("![fig4](fig4.png)\n")
    out.append(_iteration_table(rows))
    small, large, h0, h1 = _iteration_trend(rows)
    spread = _spread_between_forms(rows, "mean_iterations")
    out.append(
        f"\n**Comparison.** Paper: iterations depend strongly on h and not significantly on "
        f"the formulation. Ours: {large:.2f} at h = {h1:g} and {small:.2f} at h = {h0:g} "
        f"({_trend_words(small, large)}), and the formulations differ by at most "
        f"{100 * spread:.0f}% at equal h, so both conclusions hold. The counts fall with h "
        "because Θ = 1e-11/h² grows as h shrinks (Θ = 1e-7 at h = 1e-2, 1e-3 at h = 1e-4) "
        "while the predictor improves. They are lower than the paper's because "
        f"{CAUSE_NEWTON}.\n"
    )
    out.append(_provenance("fig4"))
    return "\n".join(out)


def report_order(fig_name) -> str:
    name, body, k, plotted, quantities = ORDER[fig_name]
    titles = {
        "fig5": "Figure 5: order analysis, single pendulum, rA, z of the pendulum",
        "fig6": "Figure 6: order analysis, slider crank, x of the slider",
        "fig7": "Figure 7: order analysis, four link, z of link 3",
    }
    rows = read_csv(fig_name)
    out = [f"## {titles[fig_name]} (T_end = 3 s)\n"]
    if rows is None:
        return out[0] + _missing(fig_name)
    out.append(f"![{fig_name}]({fig_name}.png)\n")
    hs = sorted({float(r["h"]) for r in rows}, reverse=True)
    tab = []
    for h in hs:
        sel = {r["formulation"]: r for r in rows if float(r["h"]) == h}
        tab.append(
            [f"{h:g}"]
            + [f"{float(sel[f][f'err_{q}']):.2e}" for f in FORMS for q in ("r", "rdot", "rddot")]
        )
    header = ["h"] + [f"{f} {QTY_LABEL[q][:3]}" for f in FORMS for q in ("r", "rdot", "rddot")]
    out.append(_md_table(header, tab))
    slopes = {
        f: {
            q: float(next(r for r in rows if r["formulation"] == f)[f"slope_{q}"])
            for q in ("r", "rdot", "rddot")
        }  # fmt: skip
        for f in FORMS
    }
    slope_txt = "; ".join(
        f"{f}: velocity {slopes[f]['rdot']:.2f}, acceleration {slopes[f]['rddot']:.2f}"
        for f in FORMS
    )
    pos = max(float(r["err_r"]) for r in rows)
    spread = max(_spread_between_forms(rows, "err_rdot"), _spread_between_forms(rows, "err_rddot"))
    out.append(
        f"\nGround truth: rA kinematics with ‖δ‖ < {GROUND_TRUTH_TOL:g} at t = 3 s (exact up to "
        "round-off at any h, the mechanism having zero degrees of freedom). Fitted log-log "
        f"slopes: {slope_txt}. Position errors are at most {pos:.1e} (round-off: index 3 "
        "enforces the position constraints), so their slope is meaningless.\n"
    )
    paper = {
        "fig5": "velocity and acceleration z errors parallel to the order-1 trendline, no "
        "position error",
        "fig6": "first order for rA, rp and re (C1 data)",
        "fig7": "first order for rA, rp and re (C1 data)",
    }[fig_name]
    shown = "rA only, as in the paper" if fig_name == "fig5" else "all three formulations"
    out.append(
        f"**Comparison.** Paper: {paper}. Ours (figure: {shown}; CSV: all three): "
        "slopes close to 1 confirm first order for every formulation, and the formulations' "
        f"velocity and acceleration errors differ by at most {100 * spread:.1g}% at equal h "
        "(in a 0-DOF mechanism the translational velocities and accelerations are backward "
        "differences of the enforced positions, whatever the rotation coordinates). No "
        "numbers are printed in the paper, so the comparison is qualitative.\n"
    )
    out.append(_provenance(fig_name))
    return "\n".join(out)


def report(args=None):
    sections = [
        report_table7(),
        report_table8(),
        report_table9(),
        report_fig2(),
        report_fig3(),
        report_table10(),
        report_fig4(),
        report_order("fig5"),
        report_order("fig6"),
        report_order("fig7"),
    ]
    machines = sorted({read_meta(n).get("machine") for n in COMMANDS} - {None})
    head = [
        "# Reproduction of section 4 of Kissel, Taves, Negrut (rA / rp / re)\n",
        "Generated by `benchmarks/reproduce_paper.py` from the CSV files in this folder; "
        "rerun `python -m benchmarks.reproduce_paper all` (or one subcommand, which rebuilds "
        "this page from every CSV present). Paper values are typed in from the paper's text; "
        "its figures carry no numbers, so they are compared qualitatively.\n",
        "Machine(s): " + ("; ".join(machines) if machines else "none recorded") + "\n",
        "General causes of differences, referred to below: (1) "
        + CAUSE_NEWTON
        + "; (2) "
        + CAUSE_ROT
        + "; (3) "
        + CAUSE_XLA
        + "; (4) "
        + CAUSE_AUTODIFF
        + ".\n",
    ]
    text = "\n".join(head) + "\n" + "\n\n".join(sections) + "\n"
    path = OUT / "REPORT.md"
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)}")


# ------------------------------------------------------------------ command line

COMMANDS: dict[str, Callable] = {
    "table7": table7,
    "table8": table8,
    "table9": table9,
    "fig2": fig2,
    "fig3": fig3,
    "table10": table10,
    "fig4": fig4,
    "fig5": fig5,
    "fig6": fig6,
    "fig7": fig7,
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=[*COMMANDS, "all", "report"])
    parser.add_argument("--quick", action="store_true", help="fewer step sizes and repeats")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs after the first")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    names = list(COMMANDS) if args.command == "all" else [] if args.command == "report" else [
        args.command
    ]  # fmt: skip
    for name in names:
        print(f"== {name}")
        start = time.perf_counter()
        COMMANDS[name](args)
        wall = time.perf_counter() - start
        write_meta(name, args, wall)
        print(f"   {name}: {wall:.1f} s")
        report()
    if not names:
        report()


if __name__ == "__main__":
    main()
