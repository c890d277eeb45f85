"""Exact contact in batches (under vmap and jit with the active set changing per
member, and on a GPU): ``simulate_batch(..., contact="hard")`` on whatever
backend JAX runs on (a GPU where there is one), checked member by member against the closed
forms of tests/test_hard_contact.py, and timed.

    python -m benchmarks.hard_contact batch [--sizes 1 64 1024 8192] [--repeats 3]
        [--grad-size 1024] [--out DIR]

Writes DIR/hard_contact_batch.{json,md} (default benchmarks/results/hard_contact_batch).

Cases, each member its own parameters, so the members' contacts open and close at
different steps (each its own active set and semismooth Newton iterations):

* **balls**: a 5 cm, 1 kg sphere dropped from h0 in [0.05, 0.45] m with restitution e in
  [0.5, 0.9] (mu = 0.5), h = 1e-3, 0.6 s. Checked per member: every step converged, no
  penetration below 1e-10 m, the first apex after the first bounce e^2 h0 (relative error,
  the step's event timing), and the first and last members against their own single
  ``simulate`` runs (largest difference of r).
* **cubes**: a 20 cm, 2 kg cube on four corners pushed at v0 in [0.5, 2] m/s with
  mu in [0.3, 0.6], h = 1e-3, 0.8 s (every member stops before the end). Checked per
  member: the distance v0^2 / (2 mu g) (relative error).
* **gradient**: ``jax.value_and_grad`` of the sum of the members' first apexes after the
  bounce (h0 = 0.45 m, e in [0.6, 0.9], 0.6 s) with respect to the members' e, against
  d apex / d e = 2 e h0, and its time as a multiple of the same loss's forward run.

Timing: model-steps/s = batch x steps / median run time of ``--repeats`` calls; compile =
first call less the median run. The default chunking of ``simulate_batch`` (on a GPU the
whole batch in one vmap).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd  # noqa: E402
from benchmarks._harness import (  # noqa: E402
    RESULTS,
    command,
    machine,
    time_call,
    write_results,
)
from benchmarks.problems import ball, broadcast, cube, member  # noqa: E402

G = 9.81
R_BALL = 0.05
HALF = 0.1
OUT = RESULTS / "hard_contact_batch"


def _balls(size, rng, *, h0=None, e=None):
    h0 = rng.uniform(0.05, 0.45, size) if h0 is None else h0
    e = rng.uniform(0.5, 0.9, size) if e is None else e
    models = broadcast(ball(), size)
    z0 = models.r0.at[:, 0, 2].set(jnp.asarray(h0) + R_BALL)
    models = eqx.tree_at(lambda m: m.r0, models, z0)
    models = eqx.tree_at(lambda m: m.contacts.restitution, models, jnp.asarray(e)[:, None])
    return models, h0, e


def _cubes(size, rng):
    v0 = rng.uniform(0.5, 2.0, size)
    mu = rng.uniform(0.3, 0.6, size)
    models = broadcast(cube(friction=0.4, rdot=(1.0, 0.0, 0.0)), size)
    models = eqx.tree_at(lambda m: m.rdot0, models, models.rdot0.at[:, 0, 0].set(jnp.asarray(v0)))
    models = eqx.tree_at(lambda m: m.contacts.friction, models, jnp.asarray(mu)[:, None])
    return models, v0, mu


def _first_apex_after_bounce(height, vz):
    """Per member: the height where vz first turns from up to down after the first bounce
    (vz jumps up), as a NumPy array (B,)."""
    B = height.shape[0]
    out = np.full(B, np.nan)
    for b in range(B):
        up = np.nonzero(np.diff(vz[b]) > 0.5)[0]
        if not len(up):
            continue
        k0 = up[0] + 1
        turn = np.nonzero((vz[b, k0:-1] > 0) & (vz[b, k0 + 1 :] <= 0))[0]
        if len(turn):
            out[b] = height[b, k0 + turn[0] + 1]
    return out


def run_balls(size, repeats, rng, records):
    models, h0, e = _balls(size, rng)
    options = dict(contact="hard", t_end=0.6, h=1e-3)

    def run():
        return mbd.simulate_batch(models, **options)

    first, median, spread = time_call(run, repeats=repeats)
    sol = run()
    steps = sol.r.shape[1] - 1
    status_ok = bool(np.all(np.asarray(sol.status) == 0))
    height = np.asarray(sol.r[:, :, 0, 2]) - R_BALL
    vz = np.asarray(sol.rdot[:, :, 0, 2])
    apex = _first_apex_after_bounce(height, vz)
    apex_error = np.abs(apex / (e**2 * h0) - 1.0)
    single = []
    for k in sorted({0, size - 1}):
        one = mbd.simulate(member(models, k), **options)
        single.append(float(np.abs(np.asarray(one.r) - np.asarray(sol.r[k])).max()))
    records.append(dict(
        case="balls", batch=size, steps=steps, model_steps_per_s=size * steps / median,
        run_s=median, spread_s=list(spread), compile_s=first - median, converged=status_ok,
        min_gap=float(height.min()), apex_error_max=float(np.nanmax(apex_error)),
        apex_missing=int(np.isnan(apex).sum()), single_run_difference=max(single),
    ))  # fmt: skip
    print(json.dumps(records[-1]), flush=True)


def run_cubes(size, repeats, rng, records):
    models, v0, mu = _cubes(size, rng)

    def run():
        return mbd.simulate_batch(models, contact="hard", t_end=0.8, h=1e-3)

    first, median, spread = time_call(run, repeats=repeats)
    sol = run()
    steps = sol.r.shape[1] - 1
    distance = np.asarray(sol.r[:, -1, 0, 0])
    error = np.abs(distance / (v0**2 / (2 * mu * G)) - 1.0)
    records.append(dict(
        case="cubes", batch=size, steps=steps, model_steps_per_s=size * steps / median,
        run_s=median, spread_s=list(spread), compile_s=first - median,
        converged=bool(np.all(np.asarray(sol.status) == 0)),
        distance_error_max=float(error.max()),
    ))  # fmt: skip
    print(json.dumps(records[-1]), flush=True)


def run_gradient(size, repeats, rng, records):
    h0 = np.full(size, 0.45)
    models, _, e = _balls(size, rng, h0=h0, e=rng.uniform(0.6, 0.9, size))

    def loss(restitution):
        m = eqx.tree_at(lambda m: m.contacts.restitution, models, restitution[:, None])
        sol = mbd.simulate_batch(m, contact="hard", t_end=0.6, h=1e-3)
        # the first impact is at 0.303 s; the rebound's apex between 0.4 and 0.58 s
        return jnp.sum(jnp.max(sol.r[:, 400:, 0, 2], axis=1) - R_BALL)

    e = jnp.asarray(e)
    forward = jax.jit(loss)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    first_f, median_f, _ = time_call(lambda: forward(e), repeats=repeats)
    first_g, median_g, _ = time_call(lambda: value_and_grad(e), repeats=repeats)
    _, grad = value_and_grad(e)
    grad = np.asarray(grad)
    closed = 2 * np.asarray(e) * h0
    records.append(dict(
        case="gradient", batch=size, forward_run_s=median_f,
        forward_compile_s=first_f - median_f, grad_run_s=median_g,
        grad_compile_s=first_g - median_g, grad_over_forward=median_g / median_f,
        finite=bool(np.all(np.isfinite(grad))),
        grad_error_max=float(np.abs(grad / closed - 1.0).max()),
    ))  # fmt: skip
    print(json.dumps(records[-1]), flush=True)


def report(data) -> str:
    lines = [
        "# Exact contact in batches",
        "",
        f"`{data['command']}` on {data['machine']}; {data['seconds']:.0f} s in all. "
        "Model-steps/s = batch x steps / median run; compile = first call less the median. "
        "Checks per member against the closed forms (benchmarks/hard_contact/batch.py "
        "docstring).",
        "",
        "| case | batch | model-steps/s | run s | compile s | converged | check | value |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["records"]:
        if r["case"] == "balls":
            check = "apex / (e^2 h0) - 1 max; min gap; single runs"
            value = (f"{r['apex_error_max']:.1e}; {r['min_gap']:.1e} m; "
                     f"{r['single_run_difference']:.1e}")  # fmt: skip
        elif r["case"] == "cubes":
            check, value = "distance / closed form - 1 max", f"{r['distance_error_max']:.1e}"
        else:
            lines.append(
                f"| gradient (d sum apex / d e) | {r['batch']} | | grad {r['grad_run_s']:.3f}, "
                f"forward {r['forward_run_s']:.3f} | grad {r['grad_compile_s']:.1f} | "
                f"finite {r['finite']} | grad / (2 e h0) - 1 max; grad/forward | "
                f"{r['grad_error_max']:.1e}; {r['grad_over_forward']:.1f} |"
            )
            continue
        lines.append(
            f"| {r['case']} | {r['batch']} | {r['model_steps_per_s']:,.0f} | {r['run_s']:.3f} | "
            f"{r['compile_s']:.1f} | {r['converged']} | {check} | {value} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 8192])
    parser.add_argument("--cases", nargs="+", default=["balls", "cubes", "gradient"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grad-size", type=int, default=1024)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rng = np.random.default_rng(0)
    records = []
    for size in args.sizes:
        if "balls" in args.cases:
            run_balls(size, args.repeats, rng, records)
        if "cubes" in args.cases:
            run_cubes(size, args.repeats, rng, records)
    if "gradient" in args.cases:
        run_gradient(args.grad_size, args.repeats, rng, records)
    data = dict(
        command=command(),
        machine=machine(), date=time.strftime("%Y-%m-%d"),
        seconds=time.perf_counter() - start, records=records,
    )  # fmt: skip
    write_results(Path(args.out) / "hard_contact_batch", data=data, report=report(data),
                  formats=("json", "md"))  # fmt: skip
    print(report(data))


if __name__ == "__main__":
    main()
