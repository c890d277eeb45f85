"""Robots in contact as MuJoCo runs them: jaxmbd's ``contact="soft"``, ``limits="soft"``
(MuJoCo's constraint model, the file's integrator and step) against MuJoCo C's ``mj_step``
on the same file, the same start and the same random controls.

    python -m benchmarks.soft_contact --models hopper cheetah humanoid --steps 1000

Per file: the largest qpos difference after 0.1 s and at the end (the file's own solver
settings in both), the compile time of jaxmbd's run apart from its run time (``jax.jit``
of the run, and the plain ``simulate`` call a user makes), steps/s of each, and the ratio
to MuJoCo C, timed in alternating rounds in one process.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
from benchmarks import _harness as H

FILES = {
    "hopper": ("dm_control", "suite/hopper.xml"),
    "cheetah": ("dm_control", "suite/cheetah.xml"),
    "walker": ("dm_control", "suite/walker.xml"),
    "humanoid": ("dm_control", "suite/humanoid.xml"),
    "ant": ("gymnasium", "envs/mujoco/assets/ant.xml"),
}


def path_of(name: str) -> str:
    package, rel = FILES[name]
    module = __import__(package)
    return os.path.join(os.path.dirname(module.__file__), rel)


def mujoco_run(m, qpos, qvel, controls):
    import mujoco

    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    out = np.empty((len(controls) + 1, m.nq))
    out[0] = d.qpos
    for k, u in enumerate(controls):
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        out[k + 1] = d.qpos
    return out


def one(name: str, steps: int, repeats: int) -> dict:
    import mujoco

    path = path_of(name)
    m = mujoco.MjModel.from_xml_path(path)
    h = float(m.opt.timestep)
    model = mbd.load_model(path)
    controls = np.random.default_rng(0).uniform(-1, 1, (steps, m.nu))
    u = jnp.asarray(controls)

    def plain():
        return mbd.simulate(model, t_end=steps * h, h=h, controls=u, contact="soft",
                            limits="soft").qpos  # fmt: skip

    jitted = jax.jit(
        lambda model, u: (
            mbd.simulate(
                model, t_end=steps * h, h=h, controls=u, contact="soft", limits="soft"
            ).qpos
        )  # fmt: skip
    )
    start = time.perf_counter()
    compiled = jitted.lower(model, u).compile()
    compile_s = time.perf_counter() - start
    qpos = np.asarray(compiled(model, u))
    reference = mujoco_run(m, qpos[0], np.asarray(model.tree.qvel_init), controls)
    k01 = min(steps, round(0.1 / h))
    timings = H.interleaved(
        {
            "jit": lambda: compiled(model, u),
            "plain": plain,
            "mujoco": lambda: mujoco_run(m, qpos[0], np.asarray(model.tree.qvel_init), controls),
        },
        repeats=repeats,
    )
    return {
        "model": name,
        "integrator": model.constraint_model.integrator,
        "h": h,
        "steps": steps,
        "qpos_diff_0.1s": float(np.abs(qpos[k01] - reference[k01]).max()),
        "qpos_diff_end": float(np.abs(qpos[-1] - reference[-1]).max()),
        "compile_jit_s": compile_s,
        "first_plain_s": timings["plain"].first,
        "jaxmbd_jit_steps_per_s": steps / timings["jit"].median,
        "jaxmbd_plain_steps_per_s": steps / timings["plain"].median,
        "mujoco_steps_per_s": steps / timings["mujoco"].median,
        "jit_over_mujoco": timings["mujoco"].median / timings["jit"].median,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["hopper", "cheetah", "humanoid"])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    for name in args.models:
        rows.append(one(name, args.steps, args.repeats))
        H.log(str(rows[-1]))
    H.write_results("soft_contact", rows, title="Robots in contact: jaxmbd soft vs MuJoCo C")


if __name__ == "__main__":
    main()
