"""Short runs cost their steps, and a plain call runs at the jitted speed.

    python -m benchmarks.short_runs --models double_pendulum cartpole chain64 --steps 10 100 1000
    python -m benchmarks.short_runs --models humanoid double_pendulum --steps 1000

Per model and number of steps: the plain call a user makes (``mbd.simulate(model,
t_end=..., h=...)``, after its first call) and the same call under ``jax.jit`` (returning
the states r, A, rdot, omega; and returning the whole Solution, with nothing for XLA to
drop), timed in alternating rounds in one process (median of
``--repeats``), their ratio, and the compile time of each (first call less the median).
Then, per model, the XLA compilations of a plain call of ``--new-horizon`` steps, a t_end
not run before (0 where the programs of the calls above serve it).

Models: the double pendulum (``mbd.models.double_pendulum``, its defaults: joint
coordinates, RK4), dm_control's cart-pole and humanoid (``suite/cartpole.xml``,
``suite/humanoid.xml`` of the installed dm_control, the file's defaults and its time step
passed as ``h``: a jitted call needs it concrete), dm_control's hopper, cheetah and walker
likewise (MuJoCo's constraint model; their steps compiled whole), and a 64-link chain on
spherical joints (``pendulum_chain(64)``, rA, gen_alpha, structured solver: the block
path).
"""

from __future__ import annotations

import argparse
import os

import equinox as eqx
import jax

import jaxmbd as mbd
from benchmarks import _harness as H
from jaxmbd.models.generated import pendulum_chain

FILES = {
    name: f"suite/{name}.xml" for name in ("cartpole", "hopper", "cheetah", "walker", "humanoid")
}


def case(name: str):
    """(model, h, simulate options) of a benchmark model."""
    if name == "double_pendulum":
        return mbd.models.double_pendulum(), 1e-3, {}
    if name == "chain64":
        return pendulum_chain(64), 1e-3, {"formulation": "rA", "linear_solver": "structured"}
    import dm_control

    model = mbd.load_model(os.path.join(os.path.dirname(dm_control.__file__), FILES[name]))
    return model, None, {}


def states(sol):
    return sol.r, sol.A, sol.rdot, sol.omega


def one(name: str, steps: int, repeats: int) -> dict:
    model, h, options = case(name)
    h = mbd.plan_simulation(model, t_end=0.0, h=h, **options).h  # a file's own step
    t_end = steps * h

    def plain():
        return states(mbd.simulate(model, t_end=t_end, h=h, **options))

    jitted = jax.jit(lambda model: states(mbd.simulate(model, t_end=t_end, h=h, **options)))
    # the whole Solution out of the jitted call: nothing left for XLA to drop (a run with
    # sensors fills sol.lam's tree rows, which the states-only call never computes)
    whole = eqx.filter_jit(lambda model: mbd.simulate(model, t_end=t_end, h=h, **options))

    def jit_solution():
        return jax.tree.leaves(eqx.filter(whole(model), eqx.is_array))

    calls = {"plain": plain, "jit": lambda: jitted(model), "jit_solution": jit_solution}
    timings = H.interleaved(calls, repeats=repeats)
    p, j, w = timings["plain"], timings["jit"], timings["jit_solution"]
    return {
        "model": name, "steps": steps, "plain_ms": 1e3 * p.median, "jit_ms": 1e3 * j.median,
        "plain/jit": p.median / j.median, "jit_solution_ms": 1e3 * w.median,
        "plain/jit_solution": p.median / w.median, "plain_steps_per_s": steps / p.median,
        "jit_steps_per_s": steps / j.median, "plain_compile_s": p.compile,
        "jit_compile_s": j.compile,
    }  # fmt: skip


def new_horizon_compiles(name: str, steps: int) -> int:
    """XLA compilations of a plain call of ``steps`` steps after the calls timed above."""
    from tests.compile_counter import count_compilations

    model, h, options = case(name)
    h = mbd.plan_simulation(model, t_end=0.0, h=h, **options).h
    with count_compilations() as counts:
        jax.block_until_ready(states(mbd.simulate(model, t_end=steps * h, h=h, **options)))
    return counts["compile"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["double_pendulum", "cartpole", "chain64"])
    parser.add_argument("--steps", nargs="+", type=int, default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--new-horizon", type=int, default=517, help="steps of a new t_end")
    parser.add_argument("--tag", default="short_runs")
    args = parser.parse_args()
    print(H.machine(), flush=True)
    rows = []
    for name in args.models:
        for steps in args.steps:
            row = one(name, steps, args.repeats)
            rows.append(row)
            print(H.markdown_table([row]).splitlines()[-1], flush=True)
        compiles = new_horizon_compiles(name, args.new_horizon)
        print(f"{name}: a new t_end of {args.new_horizon} steps compiled {compiles} programs")
        rows[-1]["new_horizon_compiles"] = compiles
    print(H.markdown_table(rows))
    H.write_results(f"short_runs/{args.tag}", rows, title="Short runs: plain calls and jax.jit")


if __name__ == "__main__":
    main()
