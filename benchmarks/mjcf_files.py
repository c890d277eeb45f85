"""The 32 MJCF files a robotics user starts from (dm_control's suite without the lqr
template, gymnasium's MuJoCo assets), each loaded as authored and run against MuJoCo C.

For each file:

* **loads as authored**: ``jaxmbd.load_model`` with no
  :class:`~jaxmbd.mjcf.UnsupportedFeatureWarning`; otherwise what the warning names (or
  the load error);
* **difference to MuJoCo**: the largest joint-coordinate (qpos) difference after 1 s of
  random controls (uniform in each actuator's control range, one row per step), from the
  reference pose with random joint rates (uniform in [-0.5, 0.5]), with contact and limits
  disabled by flags in MuJoCo (``limits="none"``, ``contact="none"`` in jaxmbd) and friction
  loss off in both (a constraint row in MuJoCo, regularised in jaxmbd), the equality
  constraints MuJoCo's soft ones in both (``equality="soft"``; the notes give jaxmbd's exact
  ones, its default, beside them). Reference: MuJoCo's RK4 at h / 100 (at the smallest
  steps h / s, s >= 10 sub-steps, at most a million steps; the notes say where); jaxmbd:
  ``formulation="joint"`` with the stepper that takes MuJoCo's RK4 step
  (:func:`mujoco_rk4_stepper`: ``"rkmk"`` from MuJoCo 4.0, ``"rk"`` before), at the
  file's step h, or at h / 2^k where MuJoCo's own RK4 at h diverges (its automatic reset
  off; the stiff files, such as the fingertips of manipulator, whose damping over their tiny
  inertia needs h < 2e-5 s) or does not resolve
  the motion (its error against the reference larger than the motion itself: round-off
  grows to O(1) there, and the same-step column would measure that, not the model; the
  notes say where). MuJoCo's actuators that jaxmbd does not map get zero controls in both.
  Two more columns tell the model's difference from RK4's own error:
  ``diff_to_mujoco_rk4_at_h``, jaxmbd against MuJoCo's RK4 at the same step h (the same
  scheme, activations included: round-off where the models agree), and
  ``mujoco_rk4_at_h_error``,
  MuJoCo's RK4 at h against its reference;
* **steps/s**: MuJoCo C's ``mj_step`` at the file's own settings (integrator, step,
  contact) from the reference pose, and jaxmbd's compiled run (the whole 1 s as one
  ``jit``-compiled ``lax.scan``, the run above), its compile time apart.

Run ``python -m benchmarks.mjcf_files`` (``--only NAME ...`` for some files) from the
repository root; writes ``benchmarks/results/mjcf_files.{md,json,csv}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import time
import traceback
import warnings

import dm_control
import equinox as eqx
import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks._harness import RESULTS, log, markdown_table, time_call, write_results
from jaxmbd.forces.joint_dynamics import JointDynamics
from jaxmbd.joint_space import model_tree
from jaxmbd.joint_space.constraint_rows import constraint_residual
from jaxmbd.joint_space.equalities import active_equalities


def files() -> dict[str, str]:
    """{label: path} of the 32 files, read from the installed packages."""
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    gym = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    out = {}
    for folder, prefix in ((suite, "dm_control"), (gym, "gymnasium")):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".xml") and name != "lqr.xml":
                out[f"{prefix}/{name[:-4]}"] = os.path.join(folder, name)
    return out


def load_as_authored(path: str):
    """(model or None, the unsupported-features warning text ("" if none), load error)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            model = mbd.load_model(path)
        except Exception as err:  # noqa: BLE001  (reported in the table)
            return None, "", " ".join(str(err).split())
    text = " ".join(
        str(w.message) for w in record if issubclass(w.category, mbd.mjcf.UnsupportedFeatureWarning)
    )
    return model, text.split("ignored: ", 1)[-1] if text else "", ""


#: MuJoCo's warnings of a diverged state (``mj_checkPos``, ``mj_checkVel``, ``mj_checkAcc``).
DIVERGED = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
            mujoco.mjtWarning.mjWARN_BADQACC)  # fmt: skip

#: The most MuJoCo steps of a reference run: at the smallest steps h (the stiff files) the
#: reference takes h / s with s = REFERENCE_STEPS / (1 / h) sub-steps (at least 10).
REFERENCE_STEPS = 1_000_000

#: The halvings of the file's step tried for one at which MuJoCo's RK4 is stable.
HALVINGS = 8


def _mujoco_model(path: str, *, reference: bool):
    """MuJoCo's model of the file; ``reference``: contact, limits and friction loss off,
    and no automatic reset (MuJoCo resets a diverged state to ``qpos0`` and runs on, which
    hides the divergence from the state)."""
    m = mujoco.MjModel.from_xml_path(path)
    if reference:
        off = mujoco.mjtDisableBit
        m.opt.disableflags |= off.mjDSBL_CONTACT | off.mjDSBL_LIMIT | off.mjDSBL_FRICTIONLOSS
        m.opt.disableflags |= off.mjDSBL_AUTORESET
    return m


def _diverged(d) -> bool:
    return any(d.warning[w].number for w in DIVERGED) or not np.all(np.isfinite(d.qpos))


def random_controls(m, n: int, rng) -> np.ndarray:
    """(n, nu) uniform in the control ranges ([-1, 1] where unlimited)."""
    low = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 0], -1.0)
    high = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 1], 1.0)
    return rng.uniform(low, high, (n, m.nu))


def mujoco_reference(path, qpos, qvel, controls, h, substeps=100, *, equality=True,
                     residual=False):  # fmt: skip
    """qpos after the controls (each held over a step h), MuJoCo's RK4 at h / substeps
    (contact, limits, friction loss off; ``equality=False``: equality constraints off too);
    None where it diverges (MuJoCo's bad-qpos, bad-qvel or bad-qacc warning, or a
    non-finite qpos). ``residual``: (qpos, the largest |efc_pos| of the equality rows
    over the run)."""
    m = _mujoco_model(path, reference=True)
    if not equality:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EQUALITY
    m.opt.timestep = h / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    worst = 0.0
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
        if _diverged(d):
            return None
        if residual:  # the rows at the state reached (a step leaves its last stage's)
            mujoco.mj_fwdPosition(m, d)
            worst = max(worst, float(np.abs(d.efc_pos[: d.ne]).max(initial=0.0)))
    return (np.array(d.qpos), worst) if residual else np.array(d.qpos)


def mujoco_steps_per_second(path, controls, seconds: float = 1.0) -> float:
    """mj_step at the file's own settings, random controls, for about ``seconds``."""
    m = _mujoco_model(path, reference=False)
    d = mujoco.MjData(m)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for u in controls[:100]:
            d.ctrl[:] = u
            mujoco.mj_step(m, d)
        steps += min(100, len(controls))
    return steps / (time.perf_counter() - start)


def _without_friction_loss(model):
    forces = tuple(
        dataclasses.replace(f, friction_loss=jnp.zeros_like(f.friction_loss))
        if isinstance(f, JointDynamics) else f
        for f in model.forces
    )  # fmt: skip
    return dataclasses.replace(model, forces=forces)


@eqx.filter_jit
def _run(model, controls, h, n, integrator):
    sol = mbd.simulate(model, formulation="joint", integrator=integrator, t_end=n * h, h=h,
                       controls=controls, contact="none", limits="none",
                       equality="soft")  # fmt: skip
    return sol.qpos[-1]


@eqx.filter_jit
def _exact_run(model, controls, h, n, integrator):
    """(final qpos, the largest |row| of the exact equality constraints over the run)."""
    sol = mbd.simulate(model, formulation="joint", integrator=integrator, t_end=n * h, h=h,
                       controls=controls, contact="none", limits="none")  # fmt: skip
    tree, cons = model_tree(model)
    rows = jax.vmap(lambda q: constraint_residual(cons, tree, q, 0.0))(sol.qpos)
    return sol.qpos[-1], jnp.abs(rows).max()


def _equalities_note(path, start, ctrl, full, qvel, h, n, integrator, substeps,
                     reference_soft) -> str:  # fmt: skip
    """The run's equalities as jaxmbd holds them by default (exact) against MuJoCo's soft
    ones: the largest |row| over the run in each, and the qpos difference after 1 s."""
    qpos, row = _exact_run(start, ctrl, h, n, integrator)
    _, mj_row = mujoco_reference(path, np.array(start.tree.qpos_init), qvel, full, h,
                                 substeps, residual=True)  # fmt: skip
    return (
        "held exact (jaxmbd's default), the equality constraints' largest |row| over the "
        f"run is {float(row):.2g} (MuJoCo's soft rows: {mj_row:.2g}) and the qpos "
        f"difference to MuJoCo's reference {np.abs(np.asarray(qpos) - reference_soft).max():.3g}"
    )


def mujoco_rk4_stepper(version: str = mujoco.__version__) -> str:
    """jaxmbd's joint-space stepper that takes MuJoCo's RK4 step. MuJoCo 4.0 made RK4 fourth
    order on the orientations of ball and free joints by the Runge-Kutta-Munthe-Kaas
    correction of the stages' angular velocities (its changelog, 4.0.0, commit 9a7f240f0):
    jaxmbd's ``"rkmk"``; before, the stages' angular velocities were combined as vectors:
    ``"rk"``. The two are the same step on hinges and slides."""
    return "rkmk" if int(version.split(".")[0]) >= 4 else "rk"


def compare(path: str, model, rng) -> dict:
    """The difference to MuJoCo after 1 s and both engines' steps/s (see the docstring).
    Where MuJoCo's own RK4 diverges at the file's step (a stiff model) or does not resolve
    the motion, both engines run at the largest step h / 2^k at which it does, and the row's
    note says so."""
    m = _mujoco_model(path, reference=True)
    file_h = float(m.opt.timestep)
    names = [
        mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, k) or f"actuator{k}" for k in range(m.nu)
    ]
    ours = [] if model.actuators is None else list(model.actuators.actuator_names)
    mapped = [names.index(a) for a in ours if a in names]
    if len(mapped) != len(ours):
        raise RuntimeError(f"actuators {ours} are not MuJoCo's {names}")
    qvel = rng.uniform(-0.5, 0.5, m.nv)
    controls = random_controls(m, round(1.0 / file_h), rng)
    h, why, failed = file_h, "", []
    for _ in range(HALVINGS + 1):  # the step at which MuJoCo's RK4 is stable and resolves
        n = round(1.0 / h)
        substeps = min(100, max(10, REFERENCE_STEPS // n))
        full = np.zeros((n, m.nu))  # the actuators jaxmbd does not map: zero in both
        held = np.repeat(controls, round(file_h / h), axis=0)
        full[:, mapped] = held[:, mapped]
        same_step = mujoco_reference(path, np.array(m.qpos0), qvel, full, h, substeps=1)
        reference = None if same_step is None else mujoco_reference(
            path, np.array(m.qpos0), qvel, full, h, substeps)  # fmt: skip
        if same_step is None or reference is None:
            why = "diverges"
        elif np.abs(same_step - reference).max() > np.abs(reference - m.qpos0).max():
            why = "does not resolve the motion (its error exceeds the motion)"
        else:
            break
        failed.append(f"{why} at {h:g} s")
        h /= 2
        same_step = None
    if same_step is None:  # a stiff model only an implicit step runs: no RK4 reference
        return {
            "note": f"not compared: MuJoCo's own RK4 {', '.join(failed)} (the file's step "
            f"{file_h:g} s and its halves; contact and limits off)"
        }
    notes = [f"MuJoCo's RK4 {', '.join(failed)}: both at {h:g} s"] if failed else []
    if substeps < 100:
        notes.append(f"the reference at h / {substeps}")
    start = dataclasses.replace(model, tree=dataclasses.replace(
        model.tree, qpos_init=jnp.asarray(m.qpos0), qvel_init=jnp.asarray(qvel)))  # fmt: skip
    start = _without_friction_loss(start)
    ctrl = jnp.asarray(full[:, mapped]) if mapped else None
    integrator = mujoco_rk4_stepper()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timing = time_call(lambda: _run(start, ctrl, h, n, integrator), repeats=3)
        qpos = np.asarray(_run(start, ctrl, h, n, integrator))
        if active_equalities(model):
            notes.append(_equalities_note(path, start, ctrl, full, qvel, h, n, integrator,
                                          substeps, reference))  # fmt: skip
    return {
        "h": h,
        "integrator": integrator,
        "max_qpos_diff": float(np.abs(qpos - reference).max()),
        "diff_to_mujoco_rk4_at_h": float(np.abs(qpos - same_step).max()),
        "mujoco_rk4_at_h_error": float(np.abs(same_step - reference).max()),
        "jaxmbd_qpos": qpos.tolist(),
        "mujoco_steps_per_s": mujoco_steps_per_second(path, random_controls(m, 1000, rng)),
        "jaxmbd_steps_per_s": n / timing.median,
        "jaxmbd_compile_s": timing.compile,
        "unmapped_actuators": m.nu - len(mapped),
        "note": "; ".join(notes),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="labels (dm_control/swimmer, ...) to run; "
                        "the other files are loaded again, their runs kept from the results "
                        "file")  # fmt: skip
    parser.add_argument("--stem", default="mjcf_files", help="results file stem")
    args = parser.parse_args(argv)
    previous = RESULTS / f"{args.stem}.json"
    kept = {}
    if args.only and previous.exists():
        kept = {r["file"]: r for r in json.loads(previous.read_text())["rows"]}
    rows = []
    for label, path in files().items():
        log(f"{label}: load")
        model, warning, error = load_as_authored(path)
        row = {"file": label, "loads_as_authored": "yes" if model and not warning else "no",
               "warning": error and f"does not load: {error}" or warning}  # fmt: skip
        if args.only and label not in args.only and label.split("/")[-1] not in args.only:
            run = {k: v for k, v in kept.get(label, {}).items() if k not in row}
            rows.append(row | run)  # loaded again, the run kept
            continue
        if model is not None:
            try:
                log(f"{label}: run")
                row |= compare(path, model, np.random.default_rng(0))
            except Exception as err:  # noqa: BLE001  (reported in the table)
                traceback.print_exc()
                message = " ".join(str(err).split())
                found = re.search(r"jaxmbd: [^;]*", message)
                row["note"] = f"run failed: {found.group(0) if found else message[:300]}"
        rows.append(row)
        log(f"{label}: {row}")
    columns = ["file", "loads_as_authored", "max_qpos_diff", "h", "diff_to_mujoco_rk4_at_h",
               "mujoco_rk4_at_h_error", "mujoco_steps_per_s", "jaxmbd_steps_per_s",
               "jaxmbd_compile_s", "unmapped_actuators"]  # fmt: skip
    loaded = sum(r["loads_as_authored"] == "yes" for r in rows)
    notes = [f"- **{r['file']}**: " + "; ".join(x for x in (r.get("warning"),
                                                         r.get("note")) if x)
             for r in rows if r.get("warning") or r.get("note")]  # fmt: skip
    report = (
        "# The MJCF files as authored, against MuJoCo C\n\n"
        + (__doc__.split("\n\n", 1)[1].split("Run ``python")[0])
        + f"**{loaded} of {len(rows)} load as authored.**\n\n"
        + (
            f"Every file loaded at this commit; run at it: {', '.join(args.only)}; the other "
            "runs are kept from the previous results file (the JSON's rows).\n\n"
            if args.only
            else ""
        )  # fmt: skip
        + markdown_table(rows, columns)
        + "\n\n## What the warnings name, and notes on the runs\n\n"
        + ("\n".join(notes) if notes else "Nothing.")
        + "\n"
    )
    print(*write_results(args.stem, rows, report=report, columns=columns), sep="\n")


if __name__ == "__main__":
    main()
