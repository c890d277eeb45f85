"""Reproduce Mueller & Terze (DETC2013-12151) section 5 with jaxmbd's ``rkmk`` integrator.

    python -m benchmarks.reproduce_mueller_terze figures [--t-end 5]   # Figs. 2-15, tables
    python -m benchmarks.reproduce_mueller_terze bench                 # work-precision

Writes ``benchmarks/results/mueller_terze/REPORT.md`` and its PNGs: SE(3) (formulation
``se3``) beside SO(3) x R^3 (formulation ``rA``), explicit Munthe-Kaas RK4 at h = 1e-3 (the
paper's tableau is not stated; the notes assume RK4), no stabilisation:

* fig02_heavy_top_pivot.png     drift of the rotation centre (paper Fig. 2)
* fig03_heavy_top_energy.png    kinetic-energy drift |T - T0| / T0 (Fig. 3)
* fig05_07_double_pendulum.png  joint-1 / joint-2 violation and total energy (Figs. 5-7)
* fig09_10_floating_pair.png    joint violation and kinetic energy (Figs. 9-10)
* fig12_15_three_bar.png        violations of joints 1-3 and energy (Figs. 12-15)
* work_precision.png            error against wall time on the heavy top and the double
                                pendulum: MK-RK4 (se3, rA), gen_alpha and backward_euler (rA)

plus tables: the flagged energy claim over tableaus and horizons, the order of MK-RK4 against
an independent DOP853 reference (with the +Psi sign error), and steps/s and error at
h = 1e-3. The paper prints no magnitudes except T0 = 13.97 kJ; its claims are the captions'.
"""

from __future__ import annotations

import argparse
import datetime
import time

import jax
import matplotlib
import numpy as np
from scipy.integrate import solve_ivp

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from benchmarks._harness import RESULTS, command, machine  # noqa: E402

OUT = RESULTS / "mueller_terze"
H = 1e-3
FORMS = (("se3", "SE(3)", "C0"), ("rA", "SO(3)xR3", "C3"))


def run(model, formulation, t_end, h=H, integrator="rkmk", **options):
    return mbd.simulate(
        model, formulation=formulation, integrator=integrator, t_end=t_end, h=h, **options
    )


def rel_energy(model, sol, kind="total"):
    e = np.asarray(getattr(mbd.diagnostics.energy(model, sol), kind))
    return np.abs(e - e[0]) / abs(e[0])


def pivot_drift(sol):
    r0 = np.array([0.5, 0.0, 0.0])
    return np.linalg.norm(
        np.asarray(sol.r[:, 0]) - np.einsum("tij,j->ti", np.asarray(sol.A[:, 0]), r0), axis=1
    )


def floor(x):
    return np.maximum(x, 1e-17)


# -- independent reference of the heavy top ------------------------------------------------------
def heavy_top_reference(times):
    """Quaternion Euler equations about the pivot, DOP853 rtol = atol = 1e-12 (no jaxmbd)."""
    J = np.diag([0.36, 0.306, 0.09])
    r0 = np.array([0.5, 0.0, 0.0])
    J_O = J + 21.6 * (r0 @ r0 * np.eye(3) - np.outer(r0, r0))
    J_O_inv = np.linalg.inv(J_O)

    def rhs(_t, y):
        p, w = y[:4], y[4:]
        p_dot = 0.5 * np.concatenate([[-p[1:] @ w], p[0] * w + np.cross(p[1:], w)])
        return np.concatenate([p_dot, J_O_inv @ (-np.cross(w, J_O @ w))])

    y0 = np.array([1.0, 0, 0, 0, 0.0, 20 * np.pi, 10 * np.pi])
    sol = solve_ivp(
        rhs, (0, max(times)), y0, method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True
    )
    out = []
    for t in times:
        p = sol.sol(t)[:4]
        p = p / np.linalg.norm(p)
        e0, e = p[0], p[1:]
        E = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
        out.append((2 * e0**2 - 1) * np.eye(3) + 2 * (np.outer(e, e) + e0 * E))
    return np.array(out)


# -- figures -------------------------------------------------------------------------------------
def heavy_top(t_end, lines, claims):
    model = mbd.models.heavy_top()
    sols = {f: run(model, f, t_end) for f, _, _ in FORMS}
    heun = {f: run(model, f, t_end, tableau="heun") for f, _, _ in FORMS}
    t = np.asarray(sols["se3"].t)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for f, label, color in FORMS:
        ax.semilogy(t, floor(pivot_drift(sols[f])), color=color, label=f"{label}, RK4")
        ax.semilogy(t, floor(pivot_drift(heun[f])), color=color, ls=":", label=f"{label}, Heun")
    ax.set(xlabel="t [s]", ylabel="|r - A r0| [m]", title="Heavy top: drift of the pivot (Fig. 2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "fig02_heavy_top_pivot.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for f, label, color in FORMS:
        ax.semilogy(t, floor(rel_energy(model, sols[f], "kinetic")), color=color, label=label)
    ax.set(xlabel="t [s]", ylabel="|T - T0| / T0", title="Heavy top: kinetic energy (Fig. 3)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "fig03_heavy_top_energy.png", dpi=120)
    plt.close(fig)

    T0 = float(mbd.diagnostics.energy(model, sols["se3"]).kinetic[0])
    piv = {f: pivot_drift(sols[f]).max() for f, _, _ in FORMS}
    piv_h = {f: pivot_drift(heun[f]).max() for f, _, _ in FORMS}
    en = {f: rel_energy(model, sols[f], "kinetic").max() for f, _, _ in FORMS}
    L = {
        f: np.asarray(mbd.diagnostics.angular_momentum(model, sols[f], point=(0, 0, 0)))
        for f, _, _ in FORMS
    }
    dL = {f: np.abs(L[f] - L[f][0]).max() / np.linalg.norm(L[f][0]) for f in L}
    lines += [
        f"## Heavy top (section 5.1), RK4, h = {H}, {t_end} s",
        "",
        f"T0 = {T0:.2f} J (paper: 13.97 kJ).",
        "",
        "| quantity | SE(3) | SO(3)xR3 |",
        "|---|---|---|",
        f"| max pivot drift, RK4 [m] | {piv['se3']:.2e} | {piv['rA']:.2e} |",
        f"| max pivot drift, Heun [m] | {piv_h['se3']:.2e} | {piv_h['rA']:.2e} |",
        f"| max abs(T - T0) / T0, RK4 | {en['se3']:.2e} | {en['rA']:.2e} |",
        f"| max abs(L - L0) / abs(L0) about the pivot, RK4 | {dL['se3']:.2e} | {dL['rA']:.2e} |",
        "",
        "![pivot](fig02_heavy_top_pivot.png) ![energy](fig03_heavy_top_energy.png)",
        "",
    ]
    claims.append(
        (
            "Fig. 2: SE(3) keeps the pivot 'within the computation accuracy', SO(3)xR3 drifts",
            f"SE(3) {piv['se3']:.1e} m, SO(3)xR3 {piv['rA']:.1e} m (RK4); "
            f"Heun {piv_h['se3']:.1e} vs {piv_h['rA']:.1e} m",
            "holds" if piv["se3"] < 1e-10 and piv["rA"] > 100 * piv["se3"] else "does not hold",
        )
    )
    ratio = en["rA"] / en["se3"]
    claims.append(
        (
            "Fig. 3: SE(3) energy drift 'two orders of magnitude smaller' (flagged by the notes)",
            f"SO(3)xR3 / SE(3) = {ratio:.2g} (RK4, {t_end} s); see the tableau table",
            "holds" if ratio >= 100 else "does not hold",
        )
    )
    return model


def energy_claim_table(model, lines, horizons):
    lines += [
        "### The flagged energy claim over tableaus and horizons",
        "",
        "max abs(T - T0) / T0 of the heavy top, h = 1e-3 (ratio = SO(3)xR3 / SE(3)):",
        "",
        "| tableau | horizon [s] | SE(3) | SO(3)xR3 | ratio |",
        "|---|---|---|---|---|",
    ]
    for tab in ("heun", "rk3", "rk4"):
        for T in horizons:
            e = {
                f: rel_energy(model, run(model, f, T, tableau=tab), "kinetic").max()
                for f in ("se3", "rA")
            }
            lines.append(
                f"| {tab} | {T} | {e['se3']:.2e} | {e['rA']:.2e} | {e['rA'] / e['se3']:.2g} |"
            )
    lines.append("")


def order_table(lines):
    model = mbd.models.heavy_top()
    t_end = 0.5
    A_ref = heavy_top_reference([t_end])[0]
    lines += [
        "### Order of MK-RK4 against the DOP853 reference (R at t = 0.5 s)",
        "",
        "| h | SE(3) | SO(3)xR3 | SE(3), +Psi sign error |",
        "|---|---|---|---|",
    ]
    errs = {"se3": [], "rA": [], "plus": []}
    hs = (2e-3, 1e-3, 5e-4, 2.5e-4)
    for h in hs:
        for key, f, sign in (("se3", "se3", -1), ("rA", "rA", -1), ("plus", "se3", 1)):
            sol = run(model, f, t_end, h=h, dexp_sign=sign)
            errs[key].append(np.abs(np.asarray(sol.A[-1, 0]) - A_ref).max())
        lines.append(
            f"| {h:g} | {errs['se3'][-1]:.2e} | {errs['rA'][-1]:.2e} | {errs['plus'][-1]:.2e} |"
        )
    rates = {k: np.log2(np.array(v[:-1]) / np.array(v[1:])) for k, v in errs.items()}
    lines += [
        "| observed order | "
        + " | ".join(", ".join(f"{x:.2f}" for x in rates[k]) for k in ("se3", "rA", "plus"))
        + " |",
        "",
        "The order approaches 4 from above (the h^5 term is large: h |omega| up to 0.14); "
        "the +Psi sign error gives order 2 (notes 3.5).",
        "",
    ]


def joints_figure(model, t_end, joints, energy_kind, title, fname, lines, claims, claim_fn):
    sols = {f: run(model, f, t_end) for f, _, _ in FORMS}
    n = len(joints) + 1
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n, 3.4))
    stats = {}
    for f, label, color in FORMS:
        viol = mbd.diagnostics.joint_violation(model, sols[f])
        t = np.asarray(sols[f].t)
        for k, j in enumerate(joints):
            x = np.asarray(viol.position[:, viol.names.index(j)])
            axes[k].semilogy(t, floor(x), color=color, label=label)
            stats[(f, j)] = x.max()
        e = rel_energy(model, sols[f], energy_kind)
        axes[-1].semilogy(t, floor(e), color=color, label=label)
        stats[(f, "energy")] = e.max()
    for k, j in enumerate(joints):
        axes[k].set(title=f"{j} violation [m]", xlabel="t [s]")
    axes[-1].set(title=f"|{energy_kind} E - E0| / E0", xlabel="t [s]")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT / fname, dpi=120)
    plt.close(fig)
    lines += [
        f"## {title}, RK4, h = {H}, {t_end} s",
        "",
        "| quantity | SE(3) | SO(3)xR3 |",
        "|---|---|---|",
    ]
    for j in joints:
        lines.append(
            f"| max {j} violation [m] | {stats[('se3', j)]:.2e} | {stats[('rA', j)]:.2e} |"
        )
    lines += [
        f"| max {energy_kind} energy drift | {stats[('se3', 'energy')]:.2e} | "
        f"{stats[('rA', 'energy')]:.2e} |",
        "",
        f"![{fname}]({fname})",
        "",
    ]
    claims.extend(claim_fn(stats))


def same_order(a, b):
    return 0.1 <= a / b <= 10


def similar(a, b):
    """Verdict of a 'similar' claim for SE(3) value a and SO(3)xR3 value b."""
    if same_order(a, b):
        return "holds"
    return f"does not hold: {'SE(3)' if a < b else 'SO(3)xR3'} {max(a, b) / min(a, b):.0f}x smaller"


def dp_claims(s):
    return [
        (
            "Figs. 5-6: better SE(3) performance; joint 2 violation higher than joint 1",
            f"joint1 SE(3) {s[('se3', 'joint1')]:.1e} vs SO(3)xR3 {s[('rA', 'joint1')]:.1e} m; "
            f"joint2 {s[('se3', 'joint2')]:.1e} vs {s[('rA', 'joint2')]:.1e} m",
            "holds"
            if s[("se3", "joint1")] < 1e-12 and s[("se3", "joint2")] > s[("se3", "joint1")]
            else "does not hold",
        ),
        (
            "Fig. 7: energy drift 'comparable'",
            f"{s[('se3', 'energy')]:.1e} vs {s[('rA', 'energy')]:.1e}",
            similar(s[("se3", "energy")], s[("rA", "energy")]),
        ),
    ]


def fp_claims(s):
    ok = same_order(s[("se3", "joint2")], s[("rA", "joint2")]) and same_order(
        s[("se3", "energy")], s[("rA", "energy")]
    )
    return [
        (
            "Figs. 9-10: 'both formulations perform similarly'",
            f"joint2 {s[('se3', 'joint2')]:.1e} vs {s[('rA', 'joint2')]:.1e} m; energy "
            f"{s[('se3', 'energy')]:.1e} vs {s[('rA', 'energy')]:.1e}",
            "holds" if ok else "does not hold",
        )
    ]


def tb_claims(s):
    base = max(s[("se3", "joint1")], s[("se3", "joint3")])
    base_rA = max(s[("rA", "joint1")], s[("rA", "joint3")])
    return [
        (
            "Figs. 12-14: base joints 1 and 3 'perfectly satisfied' with SE(3); joint 2 similar",
            f"SE(3) joints 1, 3: {base:.1e} m (SO(3)xR3 {base_rA:.1e}); "
            f"joint2 {s[('se3', 'joint2')]:.1e} vs {s[('rA', 'joint2')]:.1e} m",
            "holds"
            if base < 1e-12 and same_order(s[("se3", "joint2")], s[("rA", "joint2")])
            else "does not hold",
        ),
        (
            "Fig. 15: energy drift similar",
            f"{s[('se3', 'energy')]:.1e} vs {s[('rA', 'energy')]:.1e}",
            similar(s[("se3", "energy")], s[("rA", "energy")]),
        ),
    ]


# -- work precision --------------------------------------------------------------------------
METHODS = (
    ("MK-RK4 se3", "se3", "rkmk", {}),
    ("MK-RK4 rA", "rA", "rkmk", {}),
    ("gen_alpha rA", "rA", "gen_alpha", {}),
    ("backward_euler rA", "rA", "backward_euler", {}),
)


def timed(model, f, integ, t_end, h, options):
    sol = run(model, f, t_end, h=h, integrator=integ, **options)  # compile
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        sol = run(model, f, t_end, h=h, integrator=integ, **options)
        jax.block_until_ready(sol.r)
        best = min(best, time.perf_counter() - start)
    return sol, best


def work_precision(lines, hs, t_end):
    top = mbd.models.heavy_top()
    dp = mbd.models.spherical_double_pendulum()
    A_ref = heavy_top_reference([t_end])[0]
    ref_dp = run(dp, "se3", t_end, h=1e-4)
    check_dp = run(dp, "rA", t_end, h=1e-4)
    ref_err = np.abs(np.asarray(ref_dp.r[-1]) - np.asarray(check_dp.r[-1])).max()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rows = []
    for k, (name, model) in enumerate((("heavy top", top), ("double pendulum", dp))):
        for label, f, integ, options in METHODS:
            pts = []
            for h in hs:
                sol, wall = timed(model, f, integ, t_end, h, options)
                if model is top:
                    err = np.abs(np.asarray(sol.A[-1, 0]) - A_ref).max()
                else:
                    err = np.abs(np.asarray(sol.r[-1]) - np.asarray(ref_dp.r[-1])).max()
                pts.append((wall, err))
                if h == 1e-3:
                    rows.append((name, label, len(sol.t) - 1, wall, err))
            w, e = np.array(pts).T
            axes[k].loglog(w, e, "o-", label=label)
        axes[k].set(xlabel="wall time [s]", ylabel="error at t_end", title=f"{name}, {t_end} s")
        axes[k].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "work_precision.png", dpi=120)
    plt.close(fig)
    lines += [
        f"## Work-precision ({t_end} s, h in {list(hs)})",
        "",
        "Error: heavy top max abs(A(t_end) - A_ref) against the DOP853 quaternion reference; "
        "double pendulum max abs(r(t_end) - r_ref) against MK-RK4 se3 at h = 1e-4 (which agrees "
        f"with MK-RK4 rA at h = 1e-4 to {ref_err:.1e} m). Wall time: best of 3 compiled runs.",
        "",
        "| model | method | steps | wall [s] | steps/s | error at h = 1e-3 |",
        "|---|---|---|---|---|---|",
    ]
    for name, label, n, wall, err in rows:
        lines.append(f"| {name} | {label} | {n} | {wall:.3f} | {n / wall:.0f} | {err:.2e} |")
    lines += [
        "",
        "![work precision](work_precision.png)",
        "",
        "Timings are best-of-3 on a 2-core machine shared with other jobs (load 2-6): ratios "
        "within 2x are noise. Horizon 0.5 s: the spherical double pendulum is strongly "
        "sensitive (|omega2| = 77 rad/s). MK-RK4 converges at order ~4 towards the "
        "reference. gen_alpha's double-pendulum error is not monotone in h here (see the "
        "plot); a separate check gave 4.1e-3 at h = 1e-3 and 2.1e-4 at 2e-4 at 0.5 s (second "
        "order), but at 1 s 9.6e-3 and 1.1e-2, while se3 and rA MK-RK4 agree to 2.3e-10 at "
        "h = 1e-4. Not investigated further (gen_alpha is outside this study).",
        "",
    ]


def header(args):
    return [
        "# Mueller & Terze: SE(3) against SO(3) x R^3 with Munthe-Kaas RK",
        "",
        "Commands: `python -m benchmarks.reproduce_mueller_terze figures [--t-end T]` and "
        "`python -m benchmarks.reproduce_mueller_terze bench` (each writes its part and "
        "rebuilds this file from the parts present).  ",
        f"Machine: {machine()}.",
        "",
        "Formulations `se3` (SE(3), body twist) and `rA` (SO(3)xR3, hybrid twist), integrator "
        "`rkmk` (explicit Munthe-Kaas RK, eq. 37, -Psi sign), RK4 unless said otherwise, no "
        "stabilisation. Models `mbd.models.heavy_top()`, `spherical_double_pendulum()`, "
        "`floating_pair()`, `spherical_three_bar()` with the data and assumptions of "
        "`shared/notes/mueller-terze.md` (documented in `jaxmbd/models/mueller_terze.py`). "
        "The paper prints no end times and no magnitudes except T0 = 13.97 kJ; its claims are "
        "the captions' and the text's.",
        "",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=("figures", "bench", "report"))
    parser.add_argument("--t-end", type=float, default=5.0)
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    stamp = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    cmd_line = f"`{command()}`"
    if args.part == "figures":
        t_end = args.t_end
        lines, claims = [], []
        top = heavy_top(t_end, lines, claims)
        energy_claim_table(top, lines, (1.0, t_end))
        order_table(lines)
        joints_figure(
            mbd.models.spherical_double_pendulum(),
            t_end,
            ("joint1", "joint2"),
            "total",
            "Spherical double pendulum (section 5.2, Figs. 5-7)",
            "fig05_07_double_pendulum.png",
            lines,
            claims,
            dp_claims,
        )
        joints_figure(
            mbd.models.floating_pair(),
            t_end,
            ("joint2",),
            "kinetic",
            "Floating pair (section 5.3, Figs. 9-10)",
            "fig09_10_floating_pair.png",
            lines,
            claims,
            fp_claims,
        )
        joints_figure(
            mbd.models.spherical_three_bar(),
            t_end,
            ("joint1", "joint2", "joint3"),
            "total",
            "Spherical 3-bar loop, reconstructed geometry (section 5.4, Figs. 12-15)",
            "fig12_15_three_bar.png",
            lines,
            claims,
            tb_claims,
        )
        summary = [
            "## The paper's claims beside our numbers",
            "",
            "| claim (paper) | ours | verdict |",
            "|---|---|---|",
        ] + [f"| {c} | {o} | {v} |" for c, o, v in claims]
        lines = summary + [""] + lines
    elif args.part == "bench":
        lines = []
        # 0.5 s: on the double pendulum gen_alpha's error at 1 s does not fall between
        # h = 1e-3 and 2e-4 (9.6e-3, 1.1e-2) although it falls 20x at 0.5 s (see REPORT)
        work_precision(lines, (4e-3, 2e-3, 1e-3, 5e-4), 0.5)
    if args.part != "report":
        lines.append(f"({cmd_line}, {stamp}, {time.perf_counter() - start:.0f} s)")
        (OUT / f"_{args.part}.md").write_text("\n".join(lines) + "\n")
    parts = [OUT / f"_{p}.md" for p in ("figures", "bench")]
    body = "\n".join(p.read_text() for p in parts if p.exists())
    (OUT / "REPORT.md").write_text("\n".join(header(args)) + "\n" + body)
    print((OUT / "REPORT.md").read_text())


if __name__ == "__main__":
    main()
