"""The standard control models of dm_control and gymnasium in jaxmbd and in MuJoCo, under
the same random open-loop controls: joint positions over 2 s.

The files are read from the installed packages (``pip install dm-control gymnasium``),
never copied. Both engines hold each control for 0.01 s (a multiple of both steps) and
integrate with RK4: MuJoCo at dt = 1e-4, jaxmbd's RK4 on SE(3) (``rkmk``, formulation
se3) at h = 5e-4; contacts are disabled in both. The error is taken up to the first time a
joint limit acts in MuJoCo, if one does (MuJoCo's limit is a soft constraint, jaxmbd's a
compliant spring-damper: they differ; the error after it is reported too). Body order and
names are MuJoCo's. Prints, per model, the largest joint-position difference and writes
benchmarks/results/mujoco_models.md.

    python -m benchmarks.control_models            # all six, 2 s
    python -m benchmarks.control_models --t-end 0.5 acrobot cartpole
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._harness import RESULTS, write_results  # noqa: E402
from benchmarks.problems import CONTROL_MODELS, control_model_path

MODELS = CONTROL_MODELS
model_path = control_model_path
PERIOD = 0.01  # control hold (s)


def controls_table(nu: int, t_end: float, seed: int, amplitude: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return amplitude * rng.uniform(-1.0, 1.0, size=(int(round(t_end / PERIOD)), nu))


def mujoco_joint_positions(path: Path, table: np.ndarray, dt: float = 1e-4, limits: bool = True):
    """MuJoCo RK4 (contacts off; joint limits off unless ``limits``) from qpos0 at rest:
    qpos at every control switch, the joint names (one qpos per hinge/slide) and whether a
    limit was reached."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, dt
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not limits:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = mujoco.MjData(m)
    per = int(round(PERIOD / dt))
    out, limited = [d.qpos.copy()], None  # limited: the first sample after a limit acted
    for row in table:
        d.ctrl[:] = row
        for _ in range(per):
            mujoco.mj_step(m, d)
            if limited is None and any(d.efc_type == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT):
                limited = len(out)
        out.append(d.qpos.copy())
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    bodies = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, m.nbody)]
    return np.array(out), names, bodies, limited


def jaxmbd_joint_positions(path: Path, table: np.ndarray, names, h: float = 5e-4,
                           limits: bool = True):  # fmt: skip
    import equinox as eqx
    import jax.numpy as jnp

    import jaxmbd as mbd
    from jaxmbd.forces.joint_limits import JointLimits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the file's unsupported features are listed apart
        model = mbd.load_model(path, keyframe=None)
    if not limits:
        kept = tuple(f for f in model.forces if not isinstance(f, JointLimits))
        model = eqx.tree_at(lambda m: m.forces, model, kept)
    per = int(round(PERIOD / h))
    controls = jnp.asarray(np.repeat(table, per, axis=0))
    t0 = time.perf_counter()
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", contact="none",
                       t_end=len(table) * PERIOD, h=h, controls=controls)  # fmt: skip
    wall = time.perf_counter() - t0
    q = np.stack([_coordinate(sol, n)[::per] for n in names], axis=1)
    return q, model, wall


def _coordinate(sol, name: str) -> np.ndarray:
    """MuJoCo joint ``name``'s qpos over time: its own jaxmbd joint's coordinate, or its
    component of a planar joint that MuJoCo's root slides and hinge became (named
    'rootx+rootz+rooty', coordinates in that order)."""
    for joint in sol.joints:
        parts = joint.split("+")
        if name in parts and len(parts) > 1:
            return np.asarray(sol.joints[joint].q)[:, parts.index(name)]
    return np.asarray(sol.joints[name].q)


#: Models compared with their joint limits off in both engines: a limit acts at once
#: (hopper starts on two of its limits, cheetah's front thigh is 0.4 deg from one), and a
#: limit is a soft constraint in MuJoCo and a compliant spring here; off, the comparison
#: checks the rest, armature included.
WITHOUT_LIMITS = {"cheetah", "hopper"}


def compare(name: str, t_end: float, seed: int = 0):
    path = model_path(name)
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    table = controls_table(m.nu, t_end, seed, amplitude=1.0)
    limits = name not in WITHOUT_LIMITS
    q_mj, names, bodies, limited = mujoco_joint_positions(path, table, limits=limits)
    q, model, wall = jaxmbd_joint_positions(path, table, names, limits=limits)
    # jaxmbd bodies: MuJoCo's moving bodies in MuJoCo's order (static ones are the ground)
    same_order = list(model.body_names) == [b for b in bodies if b in model.body_names]
    before = len(q) if limited is None else limited  # a soft limit in MuJoCo, compliant here
    return {
        "model": name,
        "limits": limits,
        "error": float(np.abs(q[:before] - q_mj[:before]).max()),
        "error_after_limit": None if limited is None else float(np.abs(q - q_mj).max()),
        "travel": float(np.ptp(q_mj[:before], axis=0).max()),
        "limit_reached": limited is not None,
        "first_limit_s": None if limited is None else limited * PERIOD,
        "bodies_in_mujoco_order": same_order,
        "wall_s": wall,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--t-end", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of mujoco_models.md")
    args = parser.parse_args(argv)
    rows = [compare(name, args.t_end) for name in args.models]
    lines = ["| model | max joint error (before any limit) | largest travel | joint limit "
             "reached | body order | "
             "jaxmbd wall (s, with compile) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        print(r)
        limit = (
            "no"
            if not r["limit_reached"]
            else (f"at {r['first_limit_s']:.2f} s (error after: {r['error_after_limit']:.1e})")
        )
        cells = (r["model"], f"{r['error']:.1e}", f"{r['travel']:.2f}", limit,
                 r["bodies_in_mujoco_order"], f"{r['wall_s']:.1f}")  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    report = (
        "# Control models in jaxmbd and MuJoCo\n\n"
        f"t_end = {args.t_end} s, controls held {PERIOD} s, seed 0\n\n" + "\n".join(lines)
    )
    print(*write_results(args.out / "mujoco_models", report=report, formats=("md",)))


if __name__ == "__main__":
    main()
