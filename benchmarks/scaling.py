"""How compile time, step time and memory grow with the size of the mechanism.

    python -m benchmarks.scaling [--families chain engine tree] [--sizes 2 4 ... 1024]
                                  [--solvers dense structured] [--steps 20] [--repeats 3]
                                  [--tag structured]

Three generated families (:mod:`jaxmbd.models.generated`), rA with gen_alpha (stabilised,
reused Newton matrix), dense LU against the structured solver (``linear_solver``):

* an N-link spatial pendulum chain: N rods joined end to end by spherical joints, the first
  one to the ground, released from a helix so that the motion is three-dimensional
  (6N coordinates, 3N constraint equations, 3N degrees of freedom);
* an N-cylinder engine: one crankshaft (revolute joint, driven at 2 pi rad/s) with N crank
  pins at phases 2 pi k / N, each with a connecting rod (spherical joint at the pin,
  universal joint at the piston) and a piston on a
  translational joint: 2N + 1 bodies, closed loops, one driver, zero degrees of freedom;
* a binary tree of N rods on spherical joints (a branched tree).

For each N and solver: compile time of the time-stepping scan (``jit(...).lower().compile()``,
apart from running), time per step (the scan alone from the consistent start, which is
dense and computed once beforehand; median over ``--repeats``), XLA temporaries, and
scipy SuperLU (``splu``) factor + solve of the same Newton matrix (first step), and one dense
LU factorisation and solve of a random system of the Newton matrix's size (n <=
``--dense-solve-max``), the yardstick the structured step is quoted against. Fitted
exponents of time per step against N (16..1024) are printed and plotted (log-log).
Writes ``results/scaling_<tag>.csv`` and ``results/scaling_<tag>.png``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, machine, write_csv
from jaxmbd.models.generated import binary_tree, engine, pendulum_chain

FAMILIES = {"chain": pendulum_chain, "engine": engine, "tree": binary_tree}


def dense_solve_seconds(n: int, repeats: int) -> float:
    """Median time of one LU factorisation and solve of a dense n x n system."""
    key = jax.random.PRNGKey(0)
    matrix = jax.random.normal(key, (n, n)) + n * jnp.eye(n)
    rhs = jnp.ones(n)
    solve = jax.jit(jnp.linalg.solve)
    jax.block_until_ready(solve(matrix, rhs))
    runs = []
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        jax.block_until_ready(solve(matrix, rhs))
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def memory_bytes(model, steps, h, newton) -> dict:
    """XLA's memory analysis of the compiled simulation (arguments, outputs, temporaries)."""

    def run(model):
        return mbd.simulate(model, formulation="rA", t_end=steps * h, h=h, newton=newton,
                            throw=False).r  # fmt: skip

    analysis = jax.jit(run).lower(model).compile().memory_analysis()
    if analysis is None:
        return {}
    return {
        "argument_bytes": analysis.argument_size_in_bytes,
        "output_bytes": analysis.output_size_in_bytes,
        "temp_bytes": analysis.temp_size_in_bytes,
    }


def superlu_seconds(model, h, repeats: int) -> tuple[float, float]:
    """scipy SuperLU (``splu``, COLAMD ordering) on the same system the structured solver
    factors: the block-assembled Newton matrix of the first gen_alpha step at the start
    (the stabilised step with its auxiliary z = G_n^T mu), converted to CSC from its
    blocks (never dense). Returns (factor + solve seconds, solve seconds), medians."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spl

    from jaxmbd.formulations import get_formulation
    from jaxmbd.integrators.base import Discretisation, step_system

    form = get_formulation("rA")
    q = (model.r0, model.A0)
    nb = model.nb
    n = 6 * nb + 2 * model.nc
    disc = Discretisation(jnp.zeros(6 * nb), jnp.asarray(h * h / 4), jnp.zeros((nb, 6)),
                          jnp.asarray(h / 2))  # fmt: skip
    system = step_system(model, form, q, disc, 0.0, stabilised=True, linear_solver="structured")
    blocks = jax.jit(system.jacobian)(jnp.zeros(n))
    st = blocks.structure
    rows = np.broadcast_to(st.node_index[st.slot_row][:, :, None], blocks.values.shape)
    cols = np.broadcast_to(st.node_index[st.slot_col][:, None, :], blocks.values.shape)
    vals = np.asarray(blocks.values)
    keep = (rows < st.n) & (cols < st.n) & (vals != 0)
    A = sp.csc_matrix((vals[keep], (rows[keep], cols[keep])), shape=(st.n, st.n))
    rhs = np.ones(st.n)
    fact, solve = [], []
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        lu = spl.splu(A)
        mid = time.perf_counter()
        lu.solve(rhs)
        end = time.perf_counter()
        fact.append(end - start)
        solve.append(end - mid)
    return statistics.median(fact), statistics.median(solve)


def compiler_options():
    """The XLA options of jaxmbd's own top-level programs (``jaxmbd.compiled.jit``), so that the
    scan compiled here is the one ``simulate`` compiles; none with ``--xla-defaults``."""
    from jaxmbd.compiled.jit import XLA_OPTIONS, _options_accepted

    return XLA_OPTIONS if (_options_accepted() and not XLA_DEFAULTS) else None


XLA_DEFAULTS = False


def step_seconds(model, h, steps, repeats, newton, solver):
    """(compile s, s per step, temporaries, status, mean iterations) of gen_alpha (rA): the
    time-stepping scan alone (``steps`` steps from the consistent start, which is computed
    once beforehand and not counted: it is dense), compiled apart
    (``jit(...).lower().compile()``), median over ``repeats`` runs."""
    from jaxmbd.analysis.simulation import _initial, _scan
    from jaxmbd.formulations import get_formulation
    from jaxmbd.integrators import get_integrator

    form = get_formulation("rA")
    stepper = get_integrator("gen_alpha", "rA", newton=newton, linear_solver=solver)
    h = jnp.asarray(h)
    carry, _ = jax.jit(lambda m: _initial(m, form, stepper, h))(model)

    def run(model, carry):
        return _scan(model, form, stepper, carry, 0, steps, h)[1]

    start = time.perf_counter()
    exe = jax.jit(run, compiler_options=compiler_options()).lower(model, carry).compile()
    compile_s = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(exe(model, carry))
        runs.append((time.perf_counter() - t0) / steps)
    analysis = exe.memory_analysis()
    temp = analysis.temp_size_in_bytes if analysis is not None else float("nan")
    iterations, status = np.asarray(out[7]), np.asarray(out[8])
    return compile_s, statistics.median(runs), temp, int(status.max()), float(iterations.mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--sizes", nargs="*", type=int, default=[2, 4, 8, 16, 32, 64, 128, 256,
                                                                 512, 1024])  # fmt: skip
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--h", type=float, default=1e-3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--newton", default="reuse")
    parser.add_argument("--solvers", nargs="*", default=["dense", "structured"])
    parser.add_argument(
        "--dense-max",
        type=int,
        default=2500,
        help="largest Newton system n timed with the dense solver",
    )
    parser.add_argument(
        "--dense-solve-max",
        type=int,
        default=4096,
        help="largest n whose dense LU factorisation and solve is timed as the yardstick",
    )
    parser.add_argument("--tag", default="structured")
    parser.add_argument(
        "--xla-defaults",
        action="store_true",
        help="compile with XLA's default options instead of jaxmbd's (jaxmbd.compiled.jit)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="no runs: plot the time per step of two earlier runs (tags) side by side",
    )
    args = parser.parse_args(argv)
    global XLA_DEFAULTS
    XLA_DEFAULTS = args.xla_defaults
    if args.compare:
        compare(*args.compare)
        return
    RESULTS.mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    rows = []
    path = RESULTS / f"scaling_{args.tag}.csv"
    for family in args.families:
        for size in args.sizes:
            model = FAMILIES[family](size)
            n = 6 * model.nb + 2 * model.nc  # gen_alpha stabilised: a, lam, mu
            try:
                slu, slu_solve = superlu_seconds(model, args.h, args.repeats)
            except MemoryError:
                slu = slu_solve = float("nan")
            # one dense LU factorisation and solve of a system of the Newton matrix's size:
            # the yardstick of the structured step (skipped beyond --dense-max)
            lu_s = dense_solve_seconds(n, args.repeats) if n <= args.dense_solve_max else np.nan
            for solver in args.solvers:
                if solver == "dense" and n > args.dense_max:
                    continue
                compile_s, step_s, temp, status, iters = step_seconds(
                    model, args.h, args.steps, args.repeats, args.newton, solver
                )
                row = dict(
                    family=family,
                    size=size,
                    bodies=model.nb,
                    constraints=model.nc,
                    newton_size=n,
                    solver=solver,
                    newton=args.newton,
                    compile_s=compile_s,
                    step_median_s=step_s,
                    temp_bytes=temp,
                    mean_iterations=iters,
                    status=status,
                    superlu_factor_solve_s=slu,
                    superlu_solve_s=slu_solve,
                    dense_solve_s=lu_s,
                )
                rows.append(row)
                print(
                    f"{family:6s} N={size:4d} n={n:6d} {solver:10s} compile {compile_s:6.2f} s"
                    f"  step {step_s * 1e3:9.3f} ms  iters {iters:.2f}  temp "
                    f"{temp / 2**20:8.1f} MiB  SuperLU factor+solve {slu * 1e3:8.3f} ms"
                    f" solve {slu_solve * 1e3:7.3f} ms  dense LU+solve {lu_s * 1e3:8.3f} ms"
                    f" (step {100 * step_s / lu_s:.2f} %)  status {status}",
                    flush=True,
                )
                jax.clear_caches()
                write_csv(path, rows)
    print(f"wrote {path}")
    fits(rows)
    plot(rows, RESULTS / f"scaling_{args.tag}.png")


def fits(rows, lo=16, hi=1024):
    """Least-squares slopes of log(time per step) and log(compile) against log N."""
    out = {}
    for family in sorted({r["family"] for r in rows}):
        for solver in sorted({r["solver"] for r in rows}):
            sel = [r for r in rows if r["family"] == family and r["solver"] == solver
                   and lo <= int(r["size"]) <= hi]  # fmt: skip
            if len(sel) < 2:
                continue
            x = np.log([float(r["size"]) for r in sel])
            y = np.log([max(float(r["step_median_s"]), 1e-9) for r in sel])
            slope = float(np.polyfit(x, y, 1)[0])
            out[(family, solver)] = slope
            print(f"{family:6s} {solver:10s} time per step ~ N^{slope:.2f} "
                  f"(N = {round(np.exp(x.min()))}..{round(np.exp(x.max()))})")  # fmt: skip
    return out


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    slopes = fits(rows)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for family in sorted({r["family"] for r in rows}):
        for solver in sorted({r["solver"] for r in rows}):
            sel = [r for r in rows if r["family"] == family and r["solver"] == solver]
            if not sel:
                continue
            size = [int(r["size"]) for r in sel]
            slope = slopes.get((family, solver))
            label = f"{family}, {solver}" + (f" (N^{slope:.2f})" if slope else "")
            axes[0].loglog(size, [float(r["compile_s"]) for r in sel], "o-", label=label)
            axes[1].loglog(size, [float(r["step_median_s"]) * 1e3 for r in sel], "o-", label=label)
            axes[2].loglog(size, [float(r["temp_bytes"]) / 2**20 for r in sel], "o-", label=label)
        sel = [r for r in rows if r["family"] == family and r["solver"] == "structured"]
        axes[1].loglog(
            [int(r["size"]) for r in sel],
            [float(r["superlu_factor_solve_s"]) * 1e3 for r in sel],
            "k:",
            alpha=0.5,
            label=f"{family}: SuperLU factor+solve",
        )
    axes[0].set(xlabel="N", ylabel="compile time [s]", title="compile (gen_alpha, rA)")
    axes[1].set(xlabel="N", ylabel="time per step [ms]", title="run (median)")
    axes[2].set(xlabel="N", ylabel="XLA temporaries [MiB]", title="memory")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def compare(before: str, after: str):
    """Time per step of two tagged runs (e.g. the solver before and after a change)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def read(tag):
        with (RESULTS / f"scaling_{tag}.csv").open() as fh:
            return list(csv.DictReader(fh))

    runs = {before: read(before), after: read(after)}
    families = sorted({r["family"] for rows in runs.values() for r in rows})
    fig, axes = plt.subplots(1, len(families), figsize=(6 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for tag, rows in runs.items():
            for newton in sorted({r["newton"] for r in rows}):
                sel = [r for r in rows if r["family"] == family and r["newton"] == newton]
                ax.loglog(
                    [int(r["size"]) for r in sel],
                    [float(r["step_median_s"]) * 1e3 for r in sel],
                    "o-",
                    label=f"{tag}: {newton} Newton",
                )
        sel = [r for r in runs[after] if r["family"] == family and r["newton"] == "full"]
        ax.loglog(
            [int(r["size"]) for r in sel],
            [float(r["dense_solve_s"]) * 1e3 for r in sel],
            "k--",
            alpha=0.6,
            label="one dense LU solve of the Newton system",
        )
        ax.set(xlabel="N", ylabel="time per step [ms]", title=family)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS / f"scaling_{before}_vs_{after}.png"
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")
    for family in families:
        for row_a in (r for r in runs[after] if r["family"] == family):
            match = [
                r
                for r in runs[before]
                if r["family"] == family and r["size"] == row_a["size"] and r["newton"] == "full"
            ]
            if match:
                ratio = float(match[0]["step_median_s"]) / float(row_a["step_median_s"])
                print(
                    f"{family:6s} N={int(row_a['size']):4d} {row_a['newton']:6s} step "
                    f"{float(row_a['step_median_s']) * 1e3:9.3f} ms, {ratio:5.1f}x faster "
                    f"than {before} full"
                )


if __name__ == "__main__":
    main()
