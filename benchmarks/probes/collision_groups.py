"""What each contact group of a file's soft model costs to collide: every group of
``model.constraint_model.contacts`` alone (its kinds, condim, pairs and slots), jitted, at
states of MuJoCo C's own run under uniform random controls (one state every ``--every``
steps), then the groups of each collision program (one call for every convex pair, one for a height
field's partners) and all groups together, as a step collides them.

    python -m benchmarks.probes.collision_groups dm:quadruped [--steps 400] [--every 50]

Printed per group: mjtGeom types, condim, pairs, slots a pair, and the median microseconds
of one call at each state (dispatch included: a call of a trivial group costs about
0.1-0.2 ms on the 2-core machine, so read the differences). MuJoCo's contacts at the last
state name the pairs in touch.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks.soft_agreement import ctrl_range
from benchmarks.soft_files import file_path
from jaxmbd.contact.mujoco.pairs import program_key
from jaxmbd.soft_constraints.model import collide_groups
from jaxmbd.soft_constraints.treatments import with_soft
from jaxmbd.tree import poses


def states_of_mujoco(m, steps: int, every: int, seed: int = 0) -> np.ndarray:
    """qpos of ``mj_step`` under uniform controls within each actuator's range
    (:func:`~benchmarks.soft_agreement.ctrl_range`), every ``every`` steps."""
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    low, high = ctrl_range(m)
    out = []
    for k in range(steps):
        d.ctrl[:] = rng.uniform(low, high)
        mujoco.mj_step(m, d)
        if k % every == every - 1:
            out.append(d.qpos.copy())
    names = [(m.geom(c.geom1).name, m.geom(c.geom2).name) for c in d.contact[: d.ncon]]
    print(f"MuJoCo's contacts at the last state: {names}")
    return np.array(out)


def median_us(fn, states, repeats: int = 10) -> list[int]:
    jitted = jax.jit(fn)
    jax.block_until_ready(jitted(states[0]))
    out = []
    for q in states:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(jitted(q))
            times.append(time.perf_counter() - start)
        out.append(round(float(np.median(times)) * 1e6))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tag", help="a file tag of benchmarks.soft_files, e.g. dm:quadruped")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=50)
    args = parser.parse_args(argv)
    path = file_path(args.tag)
    m = mujoco.MjModel.from_xml_path(path)
    soft = with_soft(mbd.load_model(path), contact="soft", limits="soft")[0]
    groups, tree = soft.constraint_model.contacts, soft.tree
    states = jnp.asarray(states_of_mujoco(m, args.steps, args.every))

    def colliding(chosen):
        def fn(q):
            p = poses(tree, q)
            return [c.dist for c in collide_groups(chosen, p.x, p.R)]

        return fn

    print("types  condim  pairs  slots  us per call at each state")
    for g in groups:
        times = median_us(colliding([g]), states)
        print(f"{g.type1},{g.type2}  {g.condim:6d}  {len(g.geoms):5d}  {g.slots:5d}  {times}",
              flush=True)  # fmt: skip
    programs: dict = {}
    for g in groups:
        key = "height field" if g.window else program_key(g.type1, g.type2)
        programs.setdefault(str(key), []).append(g)
    for key, chosen in programs.items():
        pairs = sum(len(g.geoms) for g in chosen)
        print(f"program {key} ({pairs} pairs): {median_us(colliding(chosen), states)}", flush=True)
    print(f"all groups: {median_us(colliding(groups), states)}")


if __name__ == "__main__":
    main()
