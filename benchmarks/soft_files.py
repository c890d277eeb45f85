"""The standard files as authored with MuJoCo's constraint model (contact and limits "soft",
the file's equalities with them, the file's integrator and step) against MuJoCo C's
``mj_step``: 0.1 s of uniform random controls from the file's start, the largest qpos
difference at the end, the most contacts MuJoCo had on the way.

    python -m benchmarks.soft_files [names ...]      # e.g. dm:hopper gym:ant
"""

from __future__ import annotations

import os
import sys
import time

import dm_control
import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
GYM = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
FILES = [f"dm:{n}" for n in ("hopper", "cheetah", "walker", "humanoid", "quadruped", "finger",
                              "ball_in_cup", "manipulator")] + [
    f"gym:{n}" for n in ("ant", "half_cheetah", "hopper", "walker2d", "humanoid", "pusher")
]  # fmt: skip


def file_path(tag: str) -> str:
    """The XML file of a tag of :data:`FILES` ("dm:hopper": dm_control's suite, "gym:ant":
    gymnasium's MuJoCo assets)."""
    if not tag.startswith(("dm:", "gym:")):
        raise ValueError(f"file tag {tag!r}: expected 'dm:NAME' or 'gym:NAME', e.g. {FILES[0]}")
    folder, name = (SUITE, tag[3:]) if tag.startswith("dm:") else (GYM, tag[4:])
    return os.path.join(folder, name + ".xml")


def compare(tag: str) -> str:
    path = file_path(tag)
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    model = mbd.load_model(path)
    h = float(m.opt.timestep)
    steps = int(round(0.1 / h))
    u = np.random.default_rng(0).uniform(-1, 1, (steps, m.nu))

    def run(model, u):
        return mbd.simulate(model, t_end=steps * h, h=h, controls=u, contact="soft", limits="soft")

    start = time.perf_counter()
    sol = jax.jit(run)(model, jnp.asarray(u))
    wall = time.perf_counter() - start
    q = np.asarray(sol.qpos)
    d.qpos[:], d.qvel[:] = q[0], np.asarray(model.tree.qvel_init)
    ncon = 0
    for k in range(steps):
        d.ctrl[:] = u[k]
        mujoco.mj_step(m, d)
        ncon = max(ncon, d.ncon)
    diff = np.abs(q[-1] - d.qpos).max()
    return (f"{tag:18s} {sol.integrator:8s} {steps:4d} steps, most contacts {ncon:3d}, "
            f"|qpos - MuJoCo's| after 0.1 s {diff:.2e} (first call {wall:.0f} s)")  # fmt: skip


def main(argv: list[str]) -> None:
    for tag in argv or FILES:
        try:
            print(compare(tag), flush=True)
        except Exception as err:  # report every file, whatever one of them raises
            print(f"{tag:18s} {type(err).__name__}: {str(err)[:300]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
