"""How fast MuJoCo's own RK4 run of an MJCF file amplifies a round-off-sized change of its
start: the setting of :mod:`benchmarks.mjcf_files` (contact, limits and friction loss off,
the row's random rates and controls, MuJoCo's RK4 at the row's step h), run twice in
MuJoCo C, once from the row's start and once with each qpos coordinate moved by
+-1e-14 (random signs, several draws). Where the two MuJoCo runs part by as much after
1 s as jaxmbd's run and MuJoCo's at the same step do (``diff_to_mujoco_rk4_at_h`` of
``mjcf_files``), that column measures the motion's sensitivity to round-off (a chaotic
motion), not a difference of the models: two programs that evaluate the same equations
in another order differ by round-off at every step.

Run ``python -m benchmarks.round_off_growth [--only dm_control/dog ...]`` from the
repository root; writes ``benchmarks/results/round_off_growth.{md,json,csv}``. MuJoCo only
(no jaxmbd program), a few seconds a file.
"""

from __future__ import annotations

import argparse
import json

import mujoco
import numpy as np

from benchmarks._harness import RESULTS, log, markdown_table, write_results
from benchmarks.mjcf_files import _diverged, _mujoco_model, files, random_controls

#: The size of the change of each qpos coordinate.
PERTURBATION = 1e-14
#: The random draws of its signs.
DRAWS = 3
#: The times (s) at which the runs are compared.
TIMES = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)


def row_setup(path: str, h: float):
    """(MuJoCo model at RK4 step h, qvel, (n, nu) controls) of :func:`benchmarks.mjcf_files.
    compare` for the file at the step h that its row ran at (the same draws: rates, then
    one control row per file step, held over the h steps within it)."""
    m = _mujoco_model(path, reference=True)
    file_h = float(m.opt.timestep)
    rng = np.random.default_rng(0)
    qvel = rng.uniform(-0.5, 0.5, m.nv)
    controls = random_controls(m, round(1.0 / file_h), rng)
    controls = np.repeat(controls, round(file_h / h), axis=0)
    m.opt.timestep, m.opt.integrator = h, mujoco.mjtIntegrator.mjINT_RK4
    return m, qvel, controls


def trajectory(m, qpos, qvel, controls, h) -> np.ndarray | None:
    """qpos at :data:`TIMES` of MuJoCo's RK4 run (None where it diverges)."""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    marks = {round(t / h): k for k, t in enumerate(TIMES)}
    out = np.zeros((len(TIMES), m.nq))
    for step, u in enumerate(controls, start=1):
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        if _diverged(d):
            return None
        if step in marks:
            out[marks[step]] = d.qpos
    return out


def growth(path: str, h: float) -> dict:
    """The largest |qpos difference| between MuJoCo's run and its perturbed runs at each
    of :data:`TIMES` (the largest over the draws)."""
    m, qvel, controls = row_setup(path, h)
    base = trajectory(m, np.array(m.qpos0), qvel, controls, h)
    worst = np.zeros(len(TIMES))
    for draw in range(DRAWS):
        signs = np.random.default_rng(100 + draw).choice([-1.0, 1.0], m.nq)
        moved = trajectory(m, m.qpos0 + PERTURBATION * signs, qvel, controls, h)
        if base is None or moved is None:
            return {f"t={t:g}": float("nan") for t in TIMES}  # diverged
        worst = np.maximum(worst, np.abs(moved - base).max(axis=1))
    return {f"t={t:g}": float(w) for t, w in zip(TIMES, worst, strict=True)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="labels (dm_control/dog, ...); default: "
                        "every file that mjcf_files compared")  # fmt: skip
    args = parser.parse_args(argv)
    rows_of = {r["file"]: r for r in json.loads((RESULTS / "mjcf_files.json").read_text())["rows"]}
    rows = []
    for label, path in files().items():
        previous = rows_of.get(label, {})
        if "h" not in previous or (args.only and label not in args.only):
            continue
        log(label)
        row = {"file": label, "h": previous["h"],
               "jaxmbd_vs_mujoco_at_h": previous["diff_to_mujoco_rk4_at_h"]}  # fmt: skip
        row |= growth(path, previous["h"])
        rows.append(row)
    columns = ["file", "h", "jaxmbd_vs_mujoco_at_h", *(f"t={t:g}" for t in TIMES)]
    report = (
        "# Round-off growth in MuJoCo's own RK4 runs\n\n"
        + __doc__.split("\n\n", 1)[1].split("Run ``python")[0]
        + "Columns: ``jaxmbd_vs_mujoco_at_h``, the largest qpos difference after 1 s of "
        "jaxmbd's run to MuJoCo's at the same step (``mjcf_files``); ``t=...``, the largest "
        f"qpos difference at that time between MuJoCo's run and its runs from qpos moved by "
        f"+-{PERTURBATION:g} ({DRAWS} draws).\n\n" + markdown_table(rows, columns) + "\n"
    )
    print(*write_results("round_off_growth", rows, report=report, columns=columns), sep="\n")


if __name__ == "__main__":
    main()
