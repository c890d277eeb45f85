"""Optimal control through the simulator: swing the double pendulum's tip up.

    python -m benchmarks.swing_up [--iterations 80] [--t-end 2.0]

A motor at the pivot applies a torque tau(t) (piecewise linear between 21 knots) to rod 1 of
the paper's double pendulum. Adam (optax) minimises (z_tip(T) - 3 m)^2 + w * integral tau^2,
differentiating through every backward-Euler step with implicit gradients; reverse mode
uses a checkpointed scan. Writes benchmarks/results/swing_up.{csv,png}.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxmbd as mbd
from benchmarks._harness import RESULTS  # noqa: E402

TARGET_Z = 3.0
EFFORT_WEIGHT = 1e-8


def knot_torque(t, params):
    """Body-frame torque on rod 1 about its z axis (= global x), interpolated in time."""
    knots, values = params
    return jnp.array([0.0, 0.0, jnp.interp(t, knots, values)])


def model_with_motor(t_end, n_knots=21):
    base = mbd.models.double_pendulum()
    motor = mbd.BodyTorque(
        body=0, fn=knot_torque, params=(jnp.linspace(0.0, t_end, n_knots), jnp.zeros(n_knots))
    )
    return eqx.tree_at(lambda m: m.forces, base, (motor,))


def tip_height(sol):
    tip = sol.r[:, 1] + sol.A[:, 1, :, 0] * 1.0  # rod 2's far end: body point (1, 0, 0)
    return tip[:, 2]


def run(*, iterations=80, t_end=2.0, h=2e-3, learning_rate=150.0, verbose=True):
    model = model_with_motor(t_end)

    def simulate(values):
        m = eqx.tree_at(lambda m: m.forces[0].params[1], model, values)
        return mbd.simulate(m, formulation="rA", t_end=t_end, h=h, checkpoint=50)

    def objective(values):
        z_end = tip_height(simulate(values))[-1]
        knots = model.forces[0].params[0]
        effort = jnp.trapezoid(values**2, knots)
        return (z_end - TARGET_Z) ** 2 + EFFORT_WEIGHT * effort

    optimizer = optax.adam(learning_rate)
    values = jnp.zeros_like(model.forces[0].params[1])
    state = optimizer.init(values)

    @mbd.jit  # jax.jit with jaxmbd's compile options
    def step(values, state):
        value, grad = jax.value_and_grad(objective)(values)
        updates, state = optimizer.update(grad, state, values)
        return optax.apply_updates(values, updates), state, value

    history = []
    start = time.perf_counter()
    for k in range(iterations):
        values, state, value = step(values, state)
        history.append(float(value))
        if verbose and (k % 10 == 0 or k == iterations - 1):
            print(f"iter {k:3d}  objective {float(value):10.5f}")
    seconds = time.perf_counter() - start
    sol = simulate(values)
    return dict(
        values=np.asarray(values),
        knots=np.asarray(model.forces[0].params[0]),
        history=np.asarray(history),
        t=np.asarray(sol.t),
        z_tip=np.asarray(tip_height(sol)),
        seconds=seconds,
        z_tip_start=np.asarray(tip_height(simulate(jnp.zeros_like(values)))),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=80)
    parser.add_argument("--t-end", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    res = run(iterations=args.iterations, t_end=args.t_end)
    print(
        f"{args.iterations} Adam iterations in {res['seconds']:.1f} s (incl. compilation); "
        f"objective {res['history'][0]:.4f} -> {res['history'][-1]:.6f}; tip height at T: "
        f"{res['z_tip_start'][-1]:.3f} m unactuated, {res['z_tip'][-1]:.4f} m optimised "
        f"(target {TARGET_Z} m)"
    )
    with (args.out / "swing_up.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["knot_time_s", "torque_Nm"])
        writer.writerows(zip(res["knots"], res["values"], strict=True))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    axes[0].semilogy(res["history"])
    axes[0].set_xlabel("Adam iteration")
    axes[0].set_ylabel("objective")
    axes[1].plot(res["knots"], res["values"], "o-")
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylabel("motor torque [N m]")
    axes[2].plot(res["t"], res["z_tip_start"], label="no torque")
    axes[2].plot(res["t"], res["z_tip"], label="optimised")
    axes[2].axhline(TARGET_Z, color="k", ls="--", lw=0.8, label="target")
    axes[2].set_xlabel("t [s]")
    axes[2].set_ylabel("tip height z [m]")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out / "swing_up.png", dpi=110)
    print(f"wrote {args.out / 'swing_up.csv'} and swing_up.png")


if __name__ == "__main__":
    main()
