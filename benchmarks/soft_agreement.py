"""The standard files as authored (contact, limits, friction loss and equalities on, the
file's integrator and step: ``mbd.load_model(path)`` then ``mbd.simulate`` with its
defaults, MuJoCo's constraint model "soft") against MuJoCo C's ``mj_step`` over longer
runs than :mod:`benchmarks.soft_files`:

* a fixed open-loop gait (one sinusoid per actuator, 2 Hz, phases spread evenly over the
  actuators, 80 % of each half ctrlrange about its middle) for 3 s from the file's start:
  how far the root body travels in x in jaxmbd and in MuJoCo;
* the same gait in MuJoCo alone from qpos0 moved by +-1e-14 per coordinate (random signs,
  three draws, as :mod:`benchmarks.round_off_growth` does): how far round-off alone moves
  the distance. Where that spread is as large as jaxmbd's difference to MuJoCo, the
  difference is the motion's sensitivity to round-off (contact events amplify it), not a
  difference of the models;
* 64 runs of 1 s of uniform random controls within ctrlrange at the file's step, one
  ``simulate_batch`` program (``--one-by-one TAG``: that file's runs as 64 plain
  ``simulate`` calls, ``throw=False``, which reuse the gait's program): how many stay
  finite and how many report a solver failure (``sol.status`` non-zero at some step).

The root body is the body of the file's first joint. Where that joint is a hinge (a fixed
base: finger, manipulator, pusher) the body's origin does not move, and its subtree's centre
of mass is tracked instead (``com(...)`` in the table).

    python -m benchmarks.soft_agreement [--only dm:hopper gym:ant ...] [--gait-s 3] [--merge]

Writes ``benchmarks/results/soft_agreement.{md,json,csv}``: the files of this run, and with
``--merge`` the earlier rows of the files it does not repeat (each JSON row names the
command that made it). Default: all 14 files (humanoid and quadruped compile for minutes).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, command, log, markdown_table, seconds, write_results
from benchmarks.soft_files import FILES, file_path

#: Gait frequency (Hz) and the fraction of each actuator's half ctrlrange it spans.
GAIT_HZ, GAIT_AMPLITUDE = 2.0, 0.8
#: The size of the change of each qpos coordinate, and the draws of its signs.
PERTURBATION, DRAWS = 1e-14, 3
#: Two runs "part" at the first step where their tracked x differ by more than this (m).
PARTING = 1e-3
#: Members of the random-control batch and their horizon (s).
BATCH, BATCH_S = 64, 1.0

_INTEGRATORS = {int(v): k for k, v in mujoco.mjtIntegrator.__members__.items()}


def ctrl_range(m: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of each actuator: its ctrlrange where limited, else [-1, 1]."""
    limited = m.actuator_ctrllimited.astype(bool)
    low = np.where(limited, m.actuator_ctrlrange[:, 0], -1.0)
    high = np.where(limited, m.actuator_ctrlrange[:, 1], 1.0)
    return low, high


def gait(m: mujoco.MjModel, steps: int, h: float) -> np.ndarray:
    """(steps, nu) open-loop controls, row k acting from t = k h: per actuator j a sinusoid
    of :data:`GAIT_HZ` with phase 2 pi j / nu about the middle of its range."""
    low, high = ctrl_range(m)
    t = np.arange(steps)[:, None] * h
    phase = 2 * np.pi * np.arange(m.nu) / max(m.nu, 1)
    wave = np.sin(2 * np.pi * GAIT_HZ * t + phase)
    return (low + high) / 2 + GAIT_AMPLITUDE * (high - low) / 2 * wave


class Tracker:
    """The tracked x of a qpos: the root body's origin, or (fixed base) its subtree's centre
    of mass, by MuJoCo's own kinematics (independent of jaxmbd)."""

    def __init__(self, m: mujoco.MjModel):
        self.m, self.d = m, mujoco.MjData(m)
        self.body = int(m.body_rootid[m.jnt_bodyid[0]])
        self.fixed_base = m.jnt_type[0] == mujoco.mjtJoint.mjJNT_HINGE
        name = m.body(self.body).name
        self.label = f"com({name})" if self.fixed_base else name

    def of_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """The tracked x of each row of a (T, nq) qpos."""
        out = np.empty(len(qpos))
        for k, q in enumerate(qpos):
            self.d.qpos[:] = q
            mujoco.mj_kinematics(self.m, self.d)
            mujoco.mj_comPos(self.m, self.d)
            at = self.d.subtree_com if self.fixed_base else self.d.xpos
            out[k] = at[self.body, 0]
        return out


def mujoco_run(m, tracker: Tracker, qpos, qvel, controls) -> tuple[np.ndarray, np.ndarray]:
    """(the tracked x, qpos) at the start and after each ``mj_step`` of MuJoCo's run (x of
    the qpos the step ends with: ``mj_step`` leaves ``xpos`` at the step's start)."""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    path = [np.array(d.qpos)]
    for u in controls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        path.append(np.array(d.qpos))
    path = np.asarray(path)
    return tracker.of_qpos(path), path


def parting_time(a: np.ndarray, b: np.ndarray, h: float) -> float | None:
    """The first time (s) at which two tracked-x series differ by more than PARTING (None
    where they never do)."""
    apart = np.nonzero(~(np.abs(a - b) <= PARTING))[0]
    return float(apart[0] * h) if apart.size else None


def study(tag: str, gait_s: float, one_by_one: bool = False) -> dict:
    path = file_path(tag)
    m = mujoco.MjModel.from_xml_path(path)
    model = mbd.load_model(path)
    h = float(m.opt.timestep)
    tracker = Tracker(m)
    row = {"file": tag, "integrator": _INTEGRATORS[int(m.opt.integrator)], "h": h,
           "x_of": tracker.label}  # fmt: skip

    # (a) the gait, jaxmbd (plain simulate, its defaults: throw=True) against MuJoCo
    steps = round(gait_s / h)
    u = gait(m, steps, h)
    first = seconds(lambda: mbd.simulate(model, t_end=steps * h, controls=u))
    start = time.perf_counter()
    sol = jax.block_until_ready(mbd.simulate(model, t_end=steps * h, controls=u))
    run = time.perf_counter() - start
    qpos = np.asarray(sol.qpos)
    qvel0 = np.asarray(model.tree.qvel_init)
    row["start_qpos_vs_qpos0"] = float(np.abs(qpos[0] - m.qpos0).max())
    x_jaxmbd = tracker.of_qpos(qpos)
    x_mujoco, qpos_mujoco = mujoco_run(m, tracker, qpos[0], qvel0, u)
    distance = float(x_mujoco[-1] - x_mujoco[0])
    row["jaxmbd_m"] = float(x_jaxmbd[-1] - x_jaxmbd[0])
    row["mujoco_m"] = distance
    row["rel_diff"] = abs(row["jaxmbd_m"] - distance) / abs(distance)
    row["jaxmbd_parts_s"] = parting_time(x_jaxmbd, x_mujoco, h)
    row["qpos_diff_end"] = float(np.abs(qpos[-1] - qpos_mujoco[-1]).max())

    # (c) MuJoCo alone from qpos moved by round-off
    spread, parts, first_step = 0.0, None, 0.0
    for draw in range(DRAWS):
        signs = np.random.default_rng(100 + draw).choice([-1.0, 1.0], m.nq)
        x_moved, qpos_moved = mujoco_run(m, tracker, qpos[0] + PERTURBATION * signs, qvel0, u)
        first_step = max(first_step, float(np.abs(qpos_moved[1] - qpos_mujoco[1]).max()))
        moved = float(x_moved[-1] - x_moved[0])
        spread = max(spread, abs(moved - distance) / abs(distance))
        parted = parting_time(x_moved, x_mujoco, h)
        parts = min((t for t in (parts, parted) if t is not None), default=None)
        if draw == 0:
            row["mujoco_perturbed_m"] = moved
    row["perturbed_rel_spread"] = spread
    row["perturbed_parts_s"] = parts
    row["perturbed_step1_dqpos"] = first_step
    row["gait_compile_s"], row["gait_run_s"] = max(first - run, 0.0), run

    # (b) random controls, one batch program; failures reported per member
    n = round(BATCH_S / h)
    low, high = ctrl_range(m)
    controls = np.random.default_rng(0).uniform(low, high, (BATCH, n, m.nu))
    if one_by_one:  # plain calls of the gait's program (no batch program to compile)

        def run_batch():
            sols = [mbd.simulate(model, t_end=n * h, controls=u, throw=False) for u in controls]
            return [np.stack([np.asarray(getattr(s, k)) for s in sols]) for k in KEYS]

    else:
        batch = mbd.stack_models([model] * BATCH)

        def run_batch():
            sols = mbd.simulate_batch(batch, t_end=n * h, controls=controls)
            return [np.asarray(getattr(sols, k)) for k in KEYS]

    row["members"] = "one by one" if one_by_one else "one batch"
    first = seconds(run_batch)
    start = time.perf_counter()
    q, v, status = jax.block_until_ready(run_batch())
    run = time.perf_counter() - start
    finite = np.isfinite(q).all(axis=(1, 2)) & np.isfinite(v).all(axis=(1, 2))
    failed = (status != 0).any(axis=1)
    row["finite_of_64"] = int(finite.sum())
    row["solver_failures"] = int(failed.sum())
    codes = sorted({int(c) for c in np.unique(status) if c != 0})
    row["failure_codes"] = " ".join(map(str, codes))
    row["batch_compile_s"], row["batch_run_s"] = max(first - run, 0.0), run
    return row


#: What the random runs report per member.
KEYS = ("qpos", "qvel", "status")

COLUMNS = ["file", "integrator", "h", "x_of", "jaxmbd_m", "mujoco_m", "rel_diff",
           "qpos_diff_end", "mujoco_perturbed_m", "perturbed_rel_spread", "jaxmbd_parts_s",
           "perturbed_parts_s", "perturbed_step1_dqpos", "members", "finite_of_64",
           "solver_failures", "gait_compile_s", "gait_run_s", "batch_compile_s",
           "batch_run_s"]  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help=f"file tags (default: all of {FILES})")
    parser.add_argument("--gait-s", type=float, default=3.0, help="gait horizon (s)")
    parser.add_argument("--one-by-one", nargs="*", default=[], metavar="TAG",
                        help="files whose 64 random runs are plain simulate calls one after "
                        "another (the gait's program) instead of one simulate_batch program, "
                        "whose compile takes minutes for the largest files")  # fmt: skip
    parser.add_argument("--merge", action="store_true", help="keep the other files' rows of "
                        "the results file (each row names the command that made it)")  # fmt: skip
    args = parser.parse_args(argv)
    rows = []
    for tag in args.only or FILES:
        log(tag)
        try:
            rows.append(study(tag, args.gait_s, one_by_one=tag in args.one_by_one))
        except Exception as err:  # report every file, whatever one of them raises
            rows.append({"file": tag, "error": f"{type(err).__name__}: {str(err)[:300]}"})
        rows[-1]["command"] = command()
        print(markdown_table(rows[-1:], COLUMNS + (["error"] if "error" in rows[-1] else [])),
              flush=True)  # fmt: skip
    if args.merge and (RESULTS / "soft_agreement.json").exists():
        done = {r["file"] for r in rows}
        earlier = json.loads((RESULTS / "soft_agreement.json").read_text())["rows"]
        rows += [
            {k: None if isinstance(v, float) and np.isnan(v) else v for k, v in r.items()}
            for r in earlier
            if r["file"] not in done
        ]
        rows.sort(key=lambda r: FILES.index(r["file"]) if r["file"] in FILES else len(FILES))
    errors = [r for r in rows if "error" in r]
    report = (
        "# The standard files as authored against MuJoCo C: a 3 s gait, round-off, "
        "64 random runs\n\n"
        + __doc__.split("\n\n", 1)[1].split("    python -m")[0]
        + f"Columns: ``jaxmbd_m``, ``mujoco_m``: the tracked x after {args.gait_s:g} s less "
        "its start (``x_of``: the body, or com(body) its subtree's centre of mass); "
        "``rel_diff`` = |jaxmbd - MuJoCo| / |MuJoCo|; ``qpos_diff_end``: the largest "
        "|qpos difference| of the two runs at the end; ``mujoco_perturbed_m``: MuJoCo's "
        f"distance from qpos0 moved by +-{PERTURBATION:g} (first draw); "
        f"``perturbed_rel_spread``: the largest |perturbed - MuJoCo| / |MuJoCo| of {DRAWS} "
        f"draws; ``*_parts_s``: the first time the tracked x of jaxmbd's run (of a perturbed "
        f"MuJoCo run, the earliest draw) is more than {PARTING:g} m from MuJoCo's (empty: "
        f"never); ``perturbed_step1_dqpos``: the largest |qpos difference| of the perturbed "
        "runs to MuJoCo's after one step (far above the perturbation where the start sits "
        "on a threshold, a contact at distance 0 or a joint at its limit, and the "
        "perturbation moves it across); ``finite_of_64``, ``solver_failures``: members of "
        f"{BATCH} runs of "
        f"{BATCH_S:g} s of random controls with finite qpos and qvel, and with a non-zero "
        "``sol.status``; compile = first call less the second (less where jaxmbd's "
        "persistent compilation cache already held the program: a cold cache's first "
        "dm:hopper took 53 s (gait) and 103 s (batch) to compile on the loaded 2-core "
        "machine), run = the second call. "
        "Rows made by other commands than the one below (``--merge``) name theirs in the "
        "JSON file's ``command`` field.\n\n"
        + markdown_table([r for r in rows if "error" not in r], COLUMNS)
        + (
            "\nErrors:\n\n" + "".join(f"* {r['file']}: {r['error']}\n" for r in errors)
            if errors
            else ""
        )  # fmt: skip
    )
    print(*write_results("soft_agreement", rows, report=report, columns=COLUMNS), sep="\n")


if __name__ == "__main__":
    main()
