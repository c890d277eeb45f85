"""Parameter identification through the simulator (issue: differentiable simulation).

    python experiments/identify_parameters.py [--iterations 60] [--t-end 1.5]

A double pendulum (the paper's) with a spring-damper from the ground to rod 2's tip. From a
noisy measured trajectory (CM positions of both rods every 10 steps, sigma = 1 mm), recover
rod 2's mass (its inertia scales with it), the spring stiffness, the damping coefficient and
the spring's rest length, starting 25-35 % off, with optax L-BFGS on gradients from implicit
differentiation. Rod 1's mass is known: scaling every mass, stiffness and damping by the same
factor leaves the motion unchanged under gravity, so only their ratios are observable.
Writes experiments/results/identification.{csv,png}.
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

NAMES = ("mass rod 2", "stiffness", "damping", "rest length")
TRUE = np.array([39.0, 800.0, 40.0, 2.5])
START = TRUE * np.array([0.75, 1.35, 0.7, 1.25])


def base_model():
    b = mbd.ModelBuilder("sprung double pendulum")
    b.add_body(
        "rod 1",
        mass=78.0,
        inertia=[0.0325, 104.01625, 104.01625],
        r=[0, 2, 0],
        axes=([0, 1, 0], [0, 0, 1]),
    )
    b.add_body(
        "rod 2",
        mass=39.0,
        inertia=[0.01625, 13.008125, 13.008125],
        r=[0, 4, -1],
        axes=([0, 0, -1], [0, 1, 0]),
    )
    b.revolute("pivot", body_i="ground", body_j="rod 1", point=[0, 0, 0], axis=[1, 0, 0])
    b.revolute("elbow", body_i="rod 1", body_j="rod 2", point=[0, 4, 0], axis=[1, 0, 0])
    b.spring_damper(
        "spring",
        body_i="ground",
        point_i=[0, 5, 1],
        body_j="rod 2",
        point_j=[0, 4, -2],
        stiffness=800.0,
        damping=40.0,
        rest_length=2.5,
    )
    return b.build()


def with_parameters(model, p):
    """Rod 2's mass scales its inertia (same shape); stiffness, damping, rest length."""
    scale = p[0] / model.mass[1]
    model = eqx.tree_at(
        lambda m: (m.mass, m.inertia),
        model,
        (model.mass.at[1].set(p[0]), model.inertia.at[1].multiply(scale)),
    )

    def spring(m):
        return m.forces[0].stiffness, m.forces[0].damping, m.forces[0].rest_length

    return eqx.tree_at(spring, model, (p[1], p[2], p[3]))


def positions(model, t_end, h):
    sol = mbd.simulate(model, t_end=t_end, h=h)
    return sol.r[::10, :, 1:]  # y, z of both centres of mass every 10 steps


def run(*, iterations=60, t_end=1.5, h=1e-3, noise=1e-3, seed=0, verbose=True):
    model = base_model()
    measured = positions(with_parameters(model, jnp.asarray(TRUE)), t_end, h)
    measured = measured + noise * jax.random.normal(jax.random.PRNGKey(seed), measured.shape)

    def loss(log_p):
        pred = positions(with_parameters(model, jnp.exp(log_p)), t_end, h)
        return jnp.mean((pred - measured) ** 2) / noise**2

    value_and_grad = optax.value_and_grad_from_state(loss)
    solver = optax.lbfgs()

    @jax.jit  # one compilation for gradient, line search and update
    def step(params, state):
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return optax.apply_updates(params, updates), state, value

    params = jnp.log(jnp.asarray(START))
    state = solver.init(params)
    history = []
    start = time.perf_counter()
    for k in range(iterations):
        params, state, value = step(params, state)
        history.append(float(value))
        if verbose and (k % 10 == 0 or k == iterations - 1):
            rel = np.exp(np.asarray(params)) / TRUE - 1
            print(f"iter {k:3d}  loss {float(value):12.5g}  rel. errors {np.round(rel, 5)}")
    seconds = time.perf_counter() - start
    fitted = np.exp(np.asarray(params))
    fitted_positions = positions(with_parameters(model, jnp.asarray(fitted)), t_end, h)
    return dict(
        fitted=fitted,
        history=np.asarray(history),
        measured=np.asarray(measured),
        fitted_positions=np.asarray(fitted_positions),
        seconds=seconds,
        t=np.arange(measured.shape[0]) * 10 * h,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--t-end", type=float, default=1.5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    res = run(iterations=args.iterations, t_end=args.t_end)
    rel = res["fitted"] / TRUE - 1
    print(f"{args.iterations} L-BFGS iterations in {res['seconds']:.1f} s (incl. compilation)")
    for name, true, start, fit, e in zip(NAMES, TRUE, START, res["fitted"], rel, strict=True):
        print(
            f"{name:12s} true {true:8.3f}  start {start:8.3f}  fitted {fit:10.5f}  "
            f"relative error {e:+.2e}"
        )
    with (args.out / "identification.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["parameter", "true", "start", "fitted", "relative_error"])
        for row in zip(NAMES, TRUE, START, res["fitted"], rel, strict=True):
            writer.writerow(row)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.semilogy(res["history"])
    ax1.set_xlabel("L-BFGS iteration")
    ax1.set_ylabel("loss (mean squared error / sigma²)")
    ax1.grid(alpha=0.3)
    for b, name in enumerate(("rod 1", "rod 2")):
        ax2.plot(res["t"], res["measured"][:, b, 1], ".", ms=3, label=f"{name} z measured")
        ax2.plot(res["t"], res["fitted_positions"][:, b, 1], "-", label=f"{name} z fitted")
    ax2.set_xlabel("t [s]")
    ax2.set_ylabel("z [m]")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "identification.png", dpi=110)
    print(f"wrote {args.out / 'identification.csv'} and identification.png")


if __name__ == "__main__":
    main()
