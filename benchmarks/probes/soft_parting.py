"""Where a file's default run (MuJoCo's constraint model) first parts from ``mj_step``, and
the contacts of both at that step: what to look at when a file disagrees with MuJoCo.

    python -m benchmarks.probes.soft_parting dm:quadruped [--gait-s 3] [--threshold 1e-9]

The file's 3 s open-loop gait of :mod:`benchmarks.soft_agreement` runs in jaxmbd (a plain
``mbd.simulate`` with the file's defaults) and in MuJoCo C from jaxmbd's start. Printed: the
first step whose qpos differ by more than each of 1e-12 ... 1e-3, and, at the step before the
first above ``--threshold``, MuJoCo's contacts (``mj_forward`` at jaxmbd's state: geoms, dist,
position) beside the contacts of jaxmbd's soft model at the same state (its contact groups
collided at the state's body poses), each with its geom pair. A pair that only MuJoCo lists is
one that jaxmbd's soft model does not collide (the loader's warning names such pairs).
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks.soft_agreement import gait
from benchmarks.soft_files import file_path
from jaxmbd.soft_constraints.model import collide_groups
from jaxmbd.tree import poses


def contacts_of_mujoco(m, d) -> list[tuple]:
    """(geom1, geom2, dist, pos) of MuJoCo's contacts in ``d`` (after ``mj_forward``)."""
    return [(int(c.geom1), int(c.geom2), float(c.dist), np.array(c.pos))
            for c in d.contact[: d.ncon]]  # fmt: skip


def contacts_of_jaxmbd(model, qpos) -> list[tuple]:
    """(geom1, geom2, dist, pos) of the contacts jaxmbd's soft model finds at ``qpos``:
    every valid slot within its pair's margin."""
    groups = model.constraint_model.contacts
    p = poses(model.tree, jnp.asarray(qpos))
    found = []
    for group, contacts in zip(groups, collide_groups(groups, p.x, p.R), strict=True):
        valid, dist, pos = (np.asarray(x) for x in (contacts.valid, contacts.dist, contacts.pos))
        margin = np.asarray(group.margin)
        for i, (g1, g2) in enumerate(group.geoms):
            for s in range(valid.shape[1]):
                if valid[i, s] and dist[i, s] < margin[i]:
                    found.append((g1, g2, float(dist[i, s]), pos[i, s]))
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tag", help="a file tag of benchmarks.soft_files, e.g. dm:quadruped")
    parser.add_argument("--gait-s", type=float, default=3.0)
    parser.add_argument("--threshold", type=float, default=1e-9)
    args = parser.parse_args(argv)
    path = file_path(args.tag)
    m = mujoco.MjModel.from_xml_path(path)
    model = mbd.load_model(path)
    h = float(m.opt.timestep)
    steps = round(args.gait_s / h)
    u = gait(m, steps, h)
    sol = mbd.simulate(model, t_end=steps * h, controls=u)
    qpos, qvel = np.asarray(sol.qpos), np.asarray(sol.qvel)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos[0], np.asarray(model.tree.qvel_init)
    theirs = [d.qpos.copy()]
    for k in range(steps):
        d.ctrl[:] = u[k]
        mujoco.mj_step(m, d)
        theirs.append(d.qpos.copy())
    gap = np.abs(qpos - np.asarray(theirs)).max(axis=1)
    for level in (1e-12, 1e-9, 1e-6, 1e-3):
        above = np.flatnonzero(gap > level)
        first = f"step {above[0]} (t = {above[0] * h:.3f} s)" if above.size else "never"
        print(f"qpos apart by more than {level:g}: {first}")
    above = np.flatnonzero(gap > args.threshold)
    if not above.size:
        return
    k = max(int(above[0]) - 1, 0)
    d.qpos[:], d.qvel[:] = qpos[k], qvel[k]
    mujoco.mj_forward(m, d)

    def name(g):
        return m.geom(g).name or f"geom {g}"

    print(f"\ncontacts at step {k}, jaxmbd's state:")
    for who, found in (("MuJoCo", contacts_of_mujoco(m, d)),
                       ("jaxmbd", contacts_of_jaxmbd(model, qpos[k]))):  # fmt: skip
        print(f"  {who}: {len(found)}")
        for g1, g2, dist, pos in found:
            print(f"    {name(g1)} - {name(g2)}  dist {dist:+.6e}  pos {np.round(pos, 6)}")


if __name__ == "__main__":
    main()
