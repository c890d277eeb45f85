"""Where a file's soft step spends its time and its compile: a jitted 1000-step ``simulate``
under three treatments (as authored; ``contact="none"``, the limits still MuJoCo's rows;
``contact="none", limits="none"``), each with its trace-and-compile time apart, its per-step
time and its program's size (HLO instructions of the compiled run); then each part of the
step alone, in a ``fori_loop`` of its own (natively compiled), at the state after 400 random
steps: the poses, the collision, the rows, and the constraint solve on the active-row
gather and on all rows.

    python -m benchmarks.probes.soft_step_cost hopper [--steps 1000]

``hopper``, ``cheetah``, ``walker``, ``humanoid``, ``ant``: the files of
:mod:`benchmarks.soft_contact`. One process, one sample per figure (medians of 5 runs).
"""

from __future__ import annotations

import argparse
import os
import re
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")  # fresh compiles

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from benchmarks.soft_contact import path_of  # noqa: E402
from jaxmbd.joint_space.dynamics import ACTIVE_ROW_BLOCK  # noqa: E402
from jaxmbd.soft_constraints.model import collide_groups  # noqa: E402
from jaxmbd.soft_constraints.solver import solve  # noqa: E402
from jaxmbd.soft_constraints.treatments import with_soft  # noqa: E402
from jaxmbd.tree import bias_forces, mass_matrix, poses  # noqa: E402

TREATMENTS = {
    "as authored": {},
    "contact none": {"contact": "none"},
    "contact and limits none": {"contact": "none", "limits": "none"},
}


def _median_run(fn, *args, repeats=5):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def whole_runs(model, h, steps, nu):
    u = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (steps, nu)))
    for label, options in TREATMENTS.items():

        def run(model, u, options=options):
            return mbd.simulate(model, t_end=steps * h, h=h, controls=u, **options).qpos

        start = time.perf_counter()
        compiled = jax.jit(run).lower(model, u).compile()
        compile_s = time.perf_counter() - start
        size = len(re.findall(r"^\s+%\S+ = ", compiled.as_text(), re.M))
        per_step = _median_run(compiled, model, u) / steps
        print(f"{label:24s} compile {compile_s:6.1f} s  {per_step * 1e6:8.1f} us/step  "
              f"{size} HLO instructions", flush=True)  # fmt: skip


def parts(model, h, nu):
    steps = 400
    u = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (steps, nu)))
    sol = mbd.simulate(model, t_end=steps * h, h=h, controls=u)
    qpos, qvel = jnp.asarray(sol.qpos[-1]), jnp.asarray(sol.qvel[-1])
    soft = with_soft(model, contact="soft", limits="soft")[0]
    constraints, tree = soft.constraint_model, soft.tree
    p = poses(tree, qpos)
    _, rows = constraints.rows(tree, p, qpos, qvel, h)
    M = mass_matrix(tree, p, soft.mass, soft.inertia, None)
    a0 = jnp.linalg.solve(M, -bias_forces(tree, p, soft.mass, soft.inertia, soft.gravity, qvel))
    settings = constraints.solver
    print(f"row slots {rows.nefc}, active {int(rows.active.sum())}, "
          f"active-row slots {ACTIVE_ROW_BLOCK}")  # fmt: skip

    def solved(q, capacity):
        return solve(M, a0 + 0 * q[:1], rows, method=settings.method,
                     iterations=settings.iterations, tolerance=settings.tolerance,
                     ls_iterations=settings.ls_iterations,
                     ls_tolerance=settings.ls_tolerance, capacity=capacity).qacc.sum()  # fmt: skip

    def collided(q):
        x = poses(tree, q)
        return sum(jnp.sum(c.dist) for c in collide_groups(constraints.contacts, x.x, x.R))

    def built(q):
        _, r = constraints.rows(tree, poses(tree, q), q, qvel, h)
        return jnp.sum(r.aref) + jnp.sum(r.J)

    pieces = {
        "poses": lambda q: jnp.sum(poses(tree, q).x),
        "poses + collision": collided,
        "poses + rows": built,
        "solve, active-row gather": lambda q: solved(q, ACTIVE_ROW_BLOCK),
        "solve, all rows": lambda q: solved(q, None),
    }
    n = 1000
    for label, f in pieces.items():

        def loop(q, f=f):
            def body(_, carry):
                q, total = carry
                return q, total + f(q + 1e-300 * total)

            return jax.lax.fori_loop(0, n, body, (q, jnp.zeros((), q.dtype)))[1]

        compiled = jax.jit(loop).lower(qpos).compile()
        print(f"{label:26s} {_median_run(compiled, qpos) / n * 1e6:8.2f} us", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="hopper")
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    import mujoco

    m = mujoco.MjModel.from_xml_path(path_of(args.model))
    model = mbd.load_model(path_of(args.model))
    h = float(m.opt.timestep)
    whole_runs(model, h, args.steps, m.nu)
    parts(model, h, m.nu)


if __name__ == "__main__":
    main()
