"""Escape's observation and reward evaluated by jaxmbd at MuJoCo C's own states: what to look
at while the escape task's rollout parts from MuJoCo's (its row in
``benchmarks/results/env_returns/``).

    python -m benchmarks.probes.escape_observation [--draws 4] [--steps 20] [--tolerance T]
        [--cold] [--ccd-tolerance T] [--ccd-iterations N]

Draws of ``env.draw`` (the terrain drawn anew each), then MuJoCo's rollout under U(-1, 1)
actions; at each control step jaxmbd's observation and reward at MuJoCo's state (the
constraint forces solved at that state, as the env's observation is) against dm_control's
formulas on ``mj_forward``'s ``sensordata``. ``--tolerance`` sets ``opt.tolerance`` in both,
``--cold`` disables MuJoCo's warm start, ``--ccd-tolerance`` sets MuJoCo's
``opt.ccd_tolerance`` (where its convex collider stops; jaxmbd's height-field collider
converges further) and ``--ccd-iterations`` its ``opt.ccd_iterations``. Printed: each draw
and step where the observation differs by more than 1e-6, and the largest difference per
observation index.
"""

from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks.env_returns import Reference
from jaxmbd.soft_constraints.model import SolverSettings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=None)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--ccd-tolerance", type=float, default=None)
    parser.add_argument("--ccd-iterations", type=int, default=None)
    args = parser.parse_args(argv)
    env = mbd.envs.make("quadruped", "escape")
    reference = Reference("quadruped", "escape")
    model, h = env._run_model(), env.h
    m, d = reference.m, reference.d
    if args.tolerance is not None:
        settings = SolverSettings(tolerance=args.tolerance)
        model = eqx.tree_at(lambda x: x.constraint_model.solver, model, settings)
        m.opt.tolerance = args.tolerance
    if args.ccd_tolerance is not None:
        m.opt.ccd_tolerance = args.ccd_tolerance
    if args.ccd_iterations is not None:
        m.opt.ccd_iterations = args.ccd_iterations
    if args.cold:
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)

    @jax.jit
    def ours(q, v, a, u, terrain):
        info = {"terrain": terrain}
        episode = env._episode(model, info)
        start = mbd.joint_space.JointState(q, v, jnp.zeros(()), a)
        forces = mbd.envs.constraint_forces(episode, start, u, h=h, integrator=env.integrator)
        physics = mbd.envs.physics_of(episode, q, v, u, forces, a)
        return env._observation(physics, info), env._reward(physics, info)

    rng = np.random.default_rng(0)
    worst = np.zeros(env.observation_size)
    for n, key in enumerate(jax.random.split(jax.random.PRNGKey(0), args.draws)):
        qpos, qvel, info = env.draw(key)
        info = {k: np.asarray(v) for k, v in info.items()}
        if not reference.start(np.asarray(qpos), np.asarray(qvel), info):
            continue
        for i in range(args.steps):
            action = rng.uniform(-1, 1, m.nu)
            state = (d.qpos.copy(), d.qvel.copy(), d.act.copy(), action.copy())
            d.ctrl[:] = action
            mujoco.mj_forward(m, d)
            reference.sensed = d.sensordata.copy()
            theirs, reward = reference.observation(), reference.reward()
            obs, our_reward = ours(*map(jnp.asarray, state), jnp.asarray(info["terrain"]))
            diff = np.abs(np.asarray(obs) - theirs)
            unfinite = np.flatnonzero(~np.isfinite(diff))
            if unfinite.size:  # a NaN would hide every other difference of the step
                sides = [name for name, x in (("jaxmbd", np.asarray(obs)), ("MuJoCo", theirs))
                         if not np.isfinite(x[unfinite]).all()]  # fmt: skip
                print(f"draw {n}, step {i}: observation {unfinite.tolist()} not finite in "
                      f"{' and '.join(sides)}", flush=True)  # fmt: skip
                diff = np.where(np.isfinite(diff), diff, np.inf)
            worst = np.maximum(worst, diff)
            if diff.max() > 1e-6:
                k = int(diff.argmax())
                print(f"draw {n}, step {i}: observation {k} apart by {diff.max():.2e} (jaxmbd "
                      f"{float(obs[k]):.6f}, MuJoCo {theirs[k]:.6f}); reward apart by "
                      f"{abs(float(our_reward) - reward):.1e}; {d.ncon} contacts",
                      flush=True)  # fmt: skip
            reference.step(action)
    print("largest difference per index above 1e-9:",
          [(k, float(f"{w:.2e}")) for k, w in enumerate(worst) if w > 1e-9])  # fmt: skip


if __name__ == "__main__":
    main()
