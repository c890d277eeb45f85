"""Factor + solve with the joint-space mass matrix: dense Cholesky against the tree-sparse
L^T D L (:mod:`jaxmbd.tree.mass_factor`), to place ``LTDL_MIN_NV``.

    python -m benchmarks.mass_factor [--chains 16 32 64 128] [--trees 16 32 64 128]
                                     [--loop 200] [--repeats 7] [--batch 64]

Cases: dm_control's humanoid, quadruped, humanoid_CMU and dog (M from ``mj_fullM`` at a
random state, the files read from the installed package), and the generated builder models
of :mod:`jaxmbd.models.generated`: ``pendulum_chain`` (N links on spherical joints, nv = 3N,
M dense) and ``binary_tree`` (N bodies on spherical joints, nv = 3N, branched), M from
:func:`jaxmbd.tree.mass_matrix` at the initial state.

Each program is a ``fori_loop`` of ``--loop`` factor + solve calls with one right-hand side,
each matrix depending on the previous solution (so nothing is hoisted out of the loop, as
in a time-stepping loop): "dense" is :func:`jaxmbd.tree.cholesky_solve` (unrolled up to 12
unknowns, a loop of masked column updates beyond), "ltdl" the sparse factorisation and
solve, "lapack" ``jax.scipy.linalg.cho_factor``/``cho_solve`` for reference (a LAPACK custom
call, which keeps XLA from compiling a small model's time loop natively). ``--batch``: the
same loop under ``vmap`` over that many matrices. All programs of a case run in one process,
timed in alternating rounds (medians of ``--repeats``) after compiling each apart.
Writes ``results/bench_mass_factor.{md,json,csv}``.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._harness import interleaved, markdown_table, write_results
from jaxmbd import tree as T
from jaxmbd.compiled.xla_flags import loop_hoisted
from jaxmbd.joint_space.from_model import tree_of_model
from jaxmbd.models.generated import binary_tree, pendulum_chain
from jaxmbd.tree import mass_factor as MF

ROBOTS = ("humanoid", "quadruped", "humanoid_CMU", "dog")


def robot_case(name):
    import dm_control
    import mujoco

    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", name + ".xml")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:] = m.qpos0
    for j in range(m.njnt):
        if m.jnt_type[j] in (2, 3):
            d.qpos[m.jnt_qposadr[j]] += 0.3 * rng.normal()
    mujoco.mj_forward(m, d)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    return T.tree_from_mujoco(mujoco, m).tree, M


def builder_case(make, n):
    model = make(n)
    tree = tree_of_model(model).tree
    p = T.poses(tree, tree.qpos_init)
    M = T.mass_matrix(tree, p, model.mass, model.inertia)
    return tree, np.asarray(M)


def programs(tree, loop, batch):
    def dense(M, b):
        return T.cholesky_solve(M, b)

    def ltdl(M, b):
        return MF.ltdl_solve(tree, MF.ltdl_factor(tree, M), b)

    def lapack(M, b):
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(M, lower=True), b)

    def looped(solve):
        def run(M, b):
            def body(i, x):
                # bounded dependence on the previous solution (M may be ill-conditioned)
                s = 1e-9 * jnp.tanh(x[0])
                return solve(M + s * jnp.eye(M.shape[0], dtype=M.dtype), b * (1.0 + s))

            return jax.lax.fori_loop(0, loop, body, b)

        return jax.jit(jax.vmap(run) if batch else run)

    return {name: looped(f) for name, f in (("dense", dense), ("ltdl", ltdl), ("lapack", lapack))}


def measure(label, tree, M, loop, repeats, batch):
    sch = MF.schedule(MF.dof_parents(tree))
    nv = tree.nv
    rng = np.random.default_rng(1)
    b = jnp.asarray(rng.normal(size=nv))
    Mj = jnp.asarray(M)
    if batch:
        Mj = jnp.broadcast_to(Mj, (batch, nv, nv)) * (1 + 0.01 * jnp.arange(batch))[:, None, None]
        b = jnp.broadcast_to(b, (batch, nv))
    progs = programs(tree, loop, batch)
    compiled, compile_s, hoisted = {}, {}, {}
    for k, f in progs.items():
        start = time.perf_counter()
        compiled[k] = f.lower(Mj, b).compile()
        compile_s[k] = time.perf_counter() - start
        hoisted[k] = loop_hoisted(compiled[k].as_text(), loop)
    calls = {k: (lambda f=f: jax.block_until_ready(f(Mj, b))) for k, f in compiled.items()}
    timing = interleaved(calls, repeats=repeats)
    outs = {k: np.asarray(f(Mj, b)) for k, f in compiled.items()}
    scale = float(np.abs(outs["lapack"]).max())
    agree = max(float(np.abs(outs[k] - outs["lapack"]).max()) for k in ("dense", "ltdl")) / scale
    per = {k: t.median / loop * 1e6 for k, t in timing.items()}
    row = {
        "case": label,
        "batch": batch or 1,
        "nv": nv,
        "depth": sch.max_depth,
        "nnz_over_dense": sch.nnz / (nv * (nv + 1) / 2),
        "dense_us": per["dense"],
        "ltdl_us": per["ltdl"],
        "lapack_us": per["lapack"],
        "dense_over_ltdl": per["dense"] / per["ltdl"],
        "compile_dense_s": compile_s["dense"],
        "compile_ltdl_s": compile_s["ltdl"],
        "hoisted": "/".join("y" if hoisted[k] else "n" for k in ("dense", "ltdl", "lapack")),
        "max_rel_diff": agree,
    }
    print(
        f"{label:>22} b={row['batch']:<3} nv={nv:<4} dense {per['dense']:9.1f} us  "
        f"ltdl {per['ltdl']:9.1f} us  lapack {per['lapack']:9.1f} us  "
        f"ratio {row['dense_over_ltdl']:.2f}  "
        f"compile {compile_s['dense']:.1f}/{compile_s['ltdl']:.1f} s  hoisted {row['hoisted']}  "
        f"|diff| {agree:.1e}  [{os.getloadavg()[0]:.1f}]",
        flush=True,
    )
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="*", default=list(ROBOTS))
    ap.add_argument("--chains", nargs="*", type=int, default=[16, 32, 64, 128])
    ap.add_argument("--trees", nargs="*", type=int, default=[16, 32, 64, 128])
    ap.add_argument("--loop", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    cases = [(name, lambda name=name: robot_case(name)) for name in args.robots]
    cases += [(f"chain {n}", lambda n=n: builder_case(pendulum_chain, n)) for n in args.chains]
    cases += [(f"binary tree {n}", lambda n=n: builder_case(binary_tree, n)) for n in args.trees]
    rows = []
    for label, make in cases:
        tree, M = make()
        rows.append(measure(label, tree, M, args.loop, args.repeats, args.batch))
    stem = "bench_mass_factor" + (f"_{args.tag}" if args.tag else "")
    report = (
        "# Factor + solve with M: dense Cholesky against tree-sparse LTDL\n\n"
        "Microseconds per factor + solve (one right-hand side), median of "
        f"{args.repeats} alternating rounds of a {args.loop}-call loop"
        + (f", vmap over {args.batch} matrices" if args.batch else "")
        + "; `dense_over_ltdl` > 1: LTDL faster. `depth`: the longest dof chain; "
        "`nnz_over_dense`: L's entries over a dense triangle's; compile: seconds to compile "
        "each loop program (`JAXMBD_NO_COMPILATION_CACHE=1`); `hoisted`: whether XLA "
        "compiled the loop as one native call (dense/ltdl/lapack).\n\n"
    )
    report += markdown_table(rows)
    write_results(stem, rows, title=None, report=report)


if __name__ == "__main__":
    main()
