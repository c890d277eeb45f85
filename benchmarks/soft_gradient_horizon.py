"""How a gradient through MuJoCo's soft contact grows with the horizon: dm_control's hopper.

    python -m benchmarks.soft_gradient_horizon [--t-end 1.0] [--sequences 8] [--seed 0]
        [--out benchmarks/results/soft_gradient_horizon]

The hopper starts on its foot (knee bent 0.3 rad, the foot 1 mm in the floor) and runs
``contact="soft", limits="soft", integrator="euler"`` at the file's h = 5 ms under a random
control sequence (piecewise constant over 50 ms, uniform in [-0.8, 0.8]: inside ctrlrange,
so that no clipping zeroes a derivative). The derivative of the torso's height z(T) with
respect to a constant offset ``du`` (4,) added to every step's controls is computed for every
T on the grid at once by forward mode (``jax.jacfwd`` of the height trajectory: one program
whatever the horizon, four tangents through each step's implicit derivative). Writes
``<out>.png`` (|dz(T)/du| against T, one line per sequence, and the spread over the
sequences) and ``<out>.md`` (the table at T = 0.05, 0.1, 0.2, 0.5, 1 s).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
from benchmarks.soft_gradient_compile import HOPPER, standing_hopper, with_state
from jaxmbd.compiled.jit import XLA_OPTIONS

H = 0.005
HOLD = 10  # steps per control value (50 ms)
REPORTED = (0.05, 0.1, 0.2, 0.5, 1.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/soft_gradient_horizon")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    model = with_state(mbd.load_model(HOPPER), jnp.asarray(standing_hopper()))
    n = round(args.t_end / H)

    def heights(du, sequence):
        sol = mbd.simulate(model, t_end=args.t_end, h=H, contact="soft", limits="soft",
                           integrator="euler", controls=sequence + du)  # fmt: skip
        return sol.qpos[:, 1]  # rootz: the torso's height above its start

    # jaxmbd's XLA options, as mbd.jit compiles a top-level program (4x less XLA time here)
    jac = jax.jit(jax.jacfwd(heights), compiler_options=XLA_OPTIONS)
    rng = np.random.default_rng(args.seed)
    t = np.arange(n + 1) * H
    norms, z = [], []
    for k in range(args.sequences):
        held = rng.uniform(-0.8, 0.8, size=(-(-n // HOLD), 4))
        sequence = jnp.asarray(np.repeat(held, HOLD, axis=0)[:n])
        start = time.perf_counter()
        J = np.asarray(jac(jnp.zeros(4), sequence))  # (n + 1, 4)
        elapsed = time.perf_counter() - start
        z.append(np.asarray(heights(jnp.zeros(4), sequence)))
        norms.append(np.linalg.norm(J, axis=1))
        print(f"sequence {k}: {elapsed:.1f} s, |dz/du| at T = {args.t_end}: {norms[-1][-1]:.3g}")
    norms, z = np.array(norms), np.array(z)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for k in range(len(norms)):
        ax1.semilogy(t[1:], norms[k, 1:], lw=0.8)
        ax2.plot(t, z[k], lw=0.8)
    ax1.semilogy(t[1:], np.median(norms[:, 1:], axis=0), "k", lw=2, label="median")
    ax1.set(xlabel="horizon T [s]", ylabel="|dz(T)/du| [m per unit control]",
            title="hopper, soft contact: gradient against horizon")  # fmt: skip
    ax1.legend()
    ax2.set(xlabel="t [s]", ylabel="rootz [m]", title="the runs (random controls)")
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_suffix(".png"), dpi=120)

    lines = [
        "# Gradient through soft contact against the horizon (dm_control's hopper)",
        "",
        f"`python -m benchmarks.soft_gradient_horizon --t-end {args.t_end} --sequences "
        f"{args.sequences} --seed {args.seed}`; |dz(T)/du| over {len(norms)} random control "
        "sequences (median, min, max, and the ratio of the largest to the smallest).",
        "",
        "| T [s] | median | min | max | max / min |",
        "|---|---|---|---|---|",
    ]
    for horizon in REPORTED:
        if horizon > args.t_end + 1e-12:
            continue
        i = round(horizon / H)
        col = norms[:, i]
        lines.append(f"| {horizon:g} | {np.median(col):.3g} | {col.min():.3g} | "
                     f"{col.max():.3g} | {col.max() / col.min():.3g} |")  # fmt: skip
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
