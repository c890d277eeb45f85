"""MJX's programs of ``joint_coordinates.py``, run in MJX's own virtual environment.

    /work/venvs/mjx/bin/python benchmarks/engines/_mjx_worker.py SPEC.json OUT.json

Run by path, not as ``-m benchmarks...``: the ``benchmarks`` package imports jaxmbd, which
MJX's environment does not have. Only numpy, jax and mujoco (with ``mujoco.mjx``) are
imported here. For each model of SPEC (an MJCF path, the initial qpos, the batch of initial
qvel (member 0 the single run), the number of steps, what to run), float64 throughout:

* single: ``jax.jit`` of ``lax.scan`` over ``mjx.step``, initial qvel -> final qpos;
* batch: ``jax.jit(jax.vmap(...))`` of the same function over the batch's qvel;
* gradient: ``jax.jit(jax.grad(...))`` of |qpos(T)|^2 with respect to the initial qvel.

Each program's first call (trace + compile + run) is timed apart from ``repeats`` later
calls: compile = first less the median. Writes OUT.json: per model the timings, the final
qpos, the gradient, or ``failed`` with the error.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] mjx: {line}", file=sys.stderr, flush=True)


def timed(fn, repeats: int):
    """(output, timing dict) of ``fn`` called once and then ``repeats`` times."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        runs.append(time.perf_counter() - start)
    med = statistics.median(runs)
    return out, dict(
        first_s=first,
        median_s=med,
        min_s=min(runs),
        max_s=max(runs),
        compile_s=max(first - med, 0.0),
        repeats=repeats,
    )


def run_model(M: dict, repeats: int) -> dict:
    m = mujoco.MjModel.from_xml_path(M["path"])
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(M["q0"]))
    n = int(M["n"])

    def final_qpos(v):
        def step(d, _):
            return mjx.step(mx, d), None

        d, _ = jax.lax.scan(step, d0.replace(qvel=v), None, length=n)
        return d.qpos

    qvel = jnp.asarray(M["qvel"])
    res: dict = dict(
        integrator=mujoco.mjtIntegrator(m.opt.integrator).name.removeprefix("mjINT_"),
        timestep=float(m.opt.timestep),
    )
    log(f"{M['name']}: single")
    single = jax.jit(final_qpos)
    q, res["single"] = timed(lambda: single(qvel[0]), repeats)
    res["qpos_final"] = np.asarray(q).tolist()
    if M.get("grad"):
        log(f"{M['name']}: gradient")
        grad = jax.jit(jax.grad(lambda v: jnp.sum(final_qpos(v) ** 2)))
        g, res["grad"] = timed(lambda: grad(qvel[0]), repeats)
        res["gradient"] = np.asarray(g).tolist()
    if M.get("batch"):
        log(f"{M['name']}: batch {qvel.shape[0]}")
        batch = jax.jit(jax.vmap(final_qpos))
        qb, res["batch"] = timed(lambda: batch(qvel), M.get("batch_repeats", repeats))
        res["batch_qpos_final0"] = np.asarray(qb[0]).tolist()
    return res


def main(spec_file: str, out_file: str) -> None:
    import importlib.metadata as md

    spec = json.loads(open(spec_file).read())
    out: dict = dict(
        versions=dict(
            mujoco=mujoco.__version__,
            mjx=md.version("mujoco-mjx"),
            jax=jax.__version__,
            python=sys.version.split()[0],
        ),
        x64=bool(jax.config.jax_enable_x64),
        models={},
    )
    for M in spec["models"]:
        try:
            out["models"][M["name"]] = run_model(M, spec["repeats"])
        except Exception as err:  # one model's failure is its row's, not the run's
            traceback.print_exc()
            out["models"][M["name"]] = dict(failed=f"{type(err).__name__}: {err}"[:300])
        jax.clear_caches()
        with open(out_file, "w") as fh:  # after each model: a killed run keeps what it has
            json.dump(out, fh)


if __name__ == "__main__":
    main(*sys.argv[1:3])
