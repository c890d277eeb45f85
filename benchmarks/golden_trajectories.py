"""Bit-identical trajectories of a fixed set of models, for refactors that must not change
behaviour.

    python benchmarks/golden_trajectories.py --save before.npz      # on the old tree
    python benchmarks/golden_trajectories.py --check before.npz     # on the new tree

``--check`` compares every array of every model bit for bit and exits non-zero on the first
difference, naming the model and the field.
"""

from __future__ import annotations

import argparse
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd

FIELDS = ("t", "r", "A", "rdot", "omega", "lam", "q", "v")


def _cartpole_policy():
    b = mbd.ModelBuilder("cartpole", gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", mass=1.0, inertia=[0.01] * 3, r=(0, 0, 0))
    b.add_body("pole", mass=0.1, inertia=[0.01, 0.01, 1e-4], r=(0, 0, 0.5))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("hinge", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_actuator("push", joint="rail", kind="motor", gear=10.0, ctrl_range=(-1, 1))
    b.set_joint_state("hinge", q=0.2, qdot=0.0)
    model = b.build()

    class Policy(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, obs):
            return self.mlp(obs)

    policy = Policy(eqx.nn.MLP(4, 1, 8, 1, activation=jnp.tanh, key=jax.random.key(0)))
    return mbd.simulate(model, formulation="rA", integrator="rkmk", policy=policy,
                        t_end=0.5, h=0.01)  # fmt: skip


def _sliding_box():
    b = mbd.ModelBuilder("box", gravity=(0.0, 0.0, -9.81))
    b.add_body("box", mass=2.0, inertia=[2.0 * 0.2**2 / 6] * 3, r=(0, 0, 0.1),
               rdot=(2.0, 0.0, 0.0), shapes=[mbd.geometry.box([0.2] * 3)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("box", "ground", friction=0.4, restitution=0.0)
    return mbd.simulate(b.build(), contact="compliant", t_end=0.3, h=1e-3)


def _hard_ball():
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[0.4 * 0.05**2] * 3, r=(0.0, 0.0, 0.5),
               shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, restitution=0.8)
    return mbd.simulate(b.build(), contact="hard", t_end=0.5, h=1e-3)


CASES = {
    "double_pendulum_gen_alpha": lambda: mbd.simulate(
        mbd.models.double_pendulum(), formulation="rA", integrator="gen_alpha", t_end=1.0, h=1e-3
    ),
    "slider_crank_rp": lambda: mbd.simulate(
        mbd.models.slider_crank(), formulation="rp", t_end=1.0, h=1e-3
    ),
    "heavy_top_se3_rkmk": lambda: mbd.simulate(
        mbd.models.heavy_top(),
        formulation="se3",
        integrator="rkmk",
        tableau="rk4",
        t_end=0.5,
        h=1e-3,
    ),
    "gyro_top_energy_momentum": lambda: mbd.simulate(
        mbd.models.gyro_top(),
        formulation="director",
        integrator="energy_momentum",
        t_end=0.5,
        h=1e-2,
    ),
    "bar_double_pendulum_rotmat_rk": lambda: mbd.simulate(
        mbd.models.bar_double_pendulum(),
        formulation="rotmat",
        integrator="rk",
        tableau="rk4",
        t_end=0.5,
        h=1e-3,
    ),
    "cartpole_policy": _cartpole_policy,
    "sliding_box_compliant": _sliding_box,
    "hard_contact_ball": _hard_ball,
}


def collect() -> dict[str, np.ndarray]:
    out = {}
    for name, run in CASES.items():
        sol = run()
        for field in FIELDS:
            value = getattr(sol, field, None)
            if value is not None:
                out[f"{name}/{field}"] = np.asarray(value)
        print(f"{name}: {len(np.asarray(sol.t))} steps", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = parser.parse_args()
    arrays = collect()
    if args.save:
        np.savez(args.save, **arrays)
        print(f"saved {len(arrays)} arrays to {args.save}")
        return 0
    before = dict(np.load(args.check))
    bad = sorted(set(before) ^ set(arrays))
    for key in sorted(set(before) & set(arrays)):
        old, new = before[key], arrays[key]
        if old.shape != new.shape or old.tobytes() != new.tobytes():
            bad.append(key)
    for key in bad:
        print(f"DIFFERENT: {key}")
    print(f"{len(arrays) - len(bad)} of {len(arrays)} arrays bit-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
