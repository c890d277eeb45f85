"""Whether a file's difference to MuJoCo C comes from the file's own solver: the 3 s gait
of :mod:`benchmarks.soft_agreement` in jaxmbd (``mbd.simulate`` with the file's defaults:
MuJoCo's primal problem by Newton's method) against ``mj_step`` twice, once with the file's
``opt.solver`` and once with it set to Newton, from the same start.

    python -m benchmarks.probes.solver_of_file gym:humanoid

gymnasium's ``humanoid.xml`` says ``solver="PGS"`` (MuJoCo's projected Gauss-Seidel on
the dual problem, 50 iterations): its table row in ``soft_agreement.md`` differs from
MuJoCo by 3.4e-3 in distance, and by 4.6e-12 against MuJoCo's Newton on the same file.
Printed per reference: the tracked distance of both, their relative difference, the
largest |qpos difference| at the end, and the first time the runs are apart by more than
1e-9, 1e-6 and 1e-3.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks.soft_agreement import Tracker, gait, mujoco_run
from benchmarks.soft_files import file_path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tag", help="a file tag of benchmarks.soft_files, e.g. gym:humanoid")
    parser.add_argument("--gait-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    path = file_path(args.tag)
    m = mujoco.MjModel.from_xml_path(path)
    names = {int(v): k for k, v in mujoco.mjtSolver.__members__.items()}
    print(f"{args.tag}: opt.solver {names[int(m.opt.solver)]}, iterations {m.opt.iterations}, "
          f"tolerance {m.opt.tolerance:g}")  # fmt: skip
    model = mbd.load_model(path)
    h = float(m.opt.timestep)
    steps = round(args.gait_s / h)
    controls = gait(m, steps, h)
    ours = np.asarray(mbd.simulate(model, t_end=steps * h, controls=controls).qpos)
    tracker = Tracker(m)
    x = tracker.of_qpos(ours)
    distance = x[-1] - x[0]
    qvel0 = np.asarray(model.tree.qvel_init)
    for solver in dict.fromkeys((int(m.opt.solver), int(mujoco.mjtSolver.mjSOL_NEWTON))):
        with_solver = mujoco.MjModel.from_xml_path(path)
        with_solver.opt.solver = solver
        xt, theirs = mujoco_run(with_solver, tracker, ours[0], qvel0, controls)
        reference = xt[-1] - xt[0]
        gap = np.abs(ours - theirs).max(axis=1)
        apart = ", ".join(
            f"{level:g}: " + (f"{np.flatnonzero(gap > level)[0] * h:.3f} s" if
                              np.any(gap > level) else "never")
            for level in (1e-9, 1e-6, 1e-3)
        )  # fmt: skip
        print(f"MuJoCo {names[solver]}: distance {reference:.6f} m, jaxmbd {distance:.6f} m, "
              f"relative difference {abs(distance - reference) / abs(reference):.2e}, "
              f"|qpos difference| at the end {gap[-1]:.2e}; apart by more than "
              f"{apart}")  # fmt: skip


if __name__ == "__main__":
    main()
