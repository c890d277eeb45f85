"""Robots in contact as MuJoCo runs them: jaxmbd's ``contact="soft"``, ``limits="soft"``
(MuJoCo's constraint model, the file's integrator and step) against MuJoCo C's ``mj_step``
and MJX's ``mjx.step`` on the same file, the same start and the same random controls.

    python -m benchmarks.soft_contact --models hopper cheetah humanoid --steps 1000

Per file: the largest qpos difference to MuJoCo C after 0.1 s and at the end (the file's
own solver settings in both), the compile time of jaxmbd's run apart from its run time
(``jax.jit`` of the run, and the plain ``simulate`` call a user makes), steps/s of each,
of MuJoCo C and of MJX (``jax.jit`` of a ``lax.scan`` over ``mjx.step``; MJX from its own
environment, :mod:`benchmarks.soft_mjx`), timed in alternating rounds in one process, and
the ratios. ``--batch N``: ``jax.jit(jax.vmap(...))`` of N members with their own controls,
model-steps/s of jaxmbd and MJX and their compile times. ``--gradient-steps N``: the
gradient of the final qpos' sum with respect to the controls over N steps (reverse mode),
its run and compile time, jaxmbd and MJX. ``--treatments``: jaxmbd's other contact
treatments of the same file (``compliant``, ``hard``) as rows of their own, steps/s under
``jax.jit``.
"""

from __future__ import annotations

import argparse
import os
import time

# compile times of a fresh compile for every engine: XLA's persistent cache (which
# jaxmbd turns on) would serve MJX's and jaxmbd's programs from an earlier run
os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from benchmarks import _harness as H

FILES = {
    "hopper": ("dm_control", "suite/hopper.xml"),
    "cheetah": ("dm_control", "suite/cheetah.xml"),
    "walker": ("dm_control", "suite/walker.xml"),
    "humanoid": ("dm_control", "suite/humanoid.xml"),
    "quadruped": ("dm_control", "suite/quadruped.xml"),
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


def _controls(m, steps, batch=None, seed=0):
    shape = (steps, m.nu) if batch is None else (batch, steps, m.nu)
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _soft_run(model, steps, h, contact="soft", limits="soft"):
    def run(model, u):
        return mbd.simulate(
            model, t_end=steps * h, h=h, controls=u, contact=contact, limits=limits
        ).qpos

    return run


def _compiled(fn, *args):
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def one(name: str, steps: int, repeats: int, *, mjx=None, batch: int = 0,
        gradient_steps: int = 0) -> dict:  # fmt: skip
    import mujoco

    path = path_of(name)
    m = mujoco.MjModel.from_xml_path(path)
    h = float(m.opt.timestep)
    model = mbd.load_model(path)
    controls = _controls(m, steps)
    u = jnp.asarray(controls)
    run = _soft_run(model, steps, h)

    def plain():
        return run(model, u)

    compiled, compile_s = _compiled(run, model, u)
    qpos = np.asarray(compiled(model, u))
    qvel0 = np.asarray(model.tree.qvel_init)
    reference = mujoco_run(m, qpos[0], qvel0, controls)
    k01 = min(steps, round(0.1 / h))
    calls = {
        "jit": lambda: compiled(model, u),
        "plain": plain,
        "mujoco": lambda: mujoco_run(m, qpos[0], qvel0, controls),
    }
    row = {"model": name, "integrator": model.constraint_model.integrator, "h": h,
           "steps": steps}  # fmt: skip
    if mjx is not None:
        from benchmarks import soft_mjx

        mjx_single, mjx_args, row["mjx_compile_s"] = soft_mjx.single_program(mjx, m, controls)
        mjx_qpos = np.asarray(mjx_single(*mjx_args))
        row["mjx_qpos_diff_end"] = float(np.abs(mjx_qpos[-1] - reference[-1]).max())
        calls["mjx"] = lambda: mjx_single(*mjx_args)
    timings = H.interleaved(calls, repeats=repeats)
    row.update(
        {
            "qpos_diff_0.1s": float(np.abs(qpos[k01] - reference[k01]).max()),
            "qpos_diff_end": float(np.abs(qpos[-1] - reference[-1]).max()),
            "compile_jit_s": compile_s,
            "first_plain_s": timings["plain"].first,
            "jaxmbd_jit_steps_per_s": steps / timings["jit"].median,
            "jaxmbd_plain_steps_per_s": steps / timings["plain"].median,
            "mujoco_steps_per_s": steps / timings["mujoco"].median,
            "jit_over_mujoco": timings["mujoco"].median / timings["jit"].median,
        }
    )
    if mjx is not None:
        row["mjx_steps_per_s"] = steps / timings["mjx"].median
        row["jit_over_mjx"] = timings["mjx"].median / timings["jit"].median
    if batch:
        row.update(_batch(name, m, model, steps, h, batch, repeats, mjx))
    if gradient_steps:
        row.update(_gradient(m, model, gradient_steps, h, repeats, mjx))
    return row


def _batch(name, m, model, steps, h, batch, repeats, mjx) -> dict:
    """Batch rows: ``jax.jit(jax.vmap)`` of the run over members' controls."""
    controls = _controls(m, steps, batch, seed=1)
    u = jnp.asarray(controls)
    run = _soft_run(model, steps, h)
    compiled, compile_s = _compiled(jax.vmap(lambda u: run(model, u)[-1]), u)
    calls = {"batch": lambda: compiled(u)}
    out = {"batch": batch, "batch_compile_s": compile_s}
    if mjx is not None:
        from benchmarks import soft_mjx

        mjx_batch, mjx_args, compile_mjx = soft_mjx.batch_program(mjx, m, controls)
        out["mjx_batch_compile_s"] = compile_mjx
        calls["mjx_batch"] = lambda: mjx_batch(*mjx_args)
    timings = H.interleaved(calls, repeats=max(1, repeats // 2))
    out["batch_model_steps_per_s"] = batch * steps / timings["batch"].median
    if mjx is not None:
        out["mjx_batch_model_steps_per_s"] = batch * steps / timings["mjx_batch"].median
    H.log(f"{name}: batch {batch}: {out}")
    return out


def _gradient(m, model, steps, h, repeats, mjx) -> dict:
    """Gradient rows: reverse mode of the final qpos' sum with respect to the controls."""
    controls = _controls(m, steps, seed=2)
    u = jnp.asarray(controls)
    run = _soft_run(model, steps, h)
    compiled, compile_s = _compiled(jax.grad(lambda u: jnp.sum(run(model, u)[-1])), u)
    calls = {"gradient": lambda: compiled(u)}
    out = {"gradient_steps": steps, "gradient_compile_s": compile_s}
    if mjx is not None:
        from benchmarks import soft_mjx

        mjx_grad, mjx_args, out["mjx_gradient_compile_s"] = soft_mjx.gradient_program(
            mjx, m, controls
        )
        calls["mjx_gradient"] = lambda: mjx_grad(*mjx_args)
    timings = H.interleaved(calls, repeats=repeats)
    out["gradient_s"] = timings["gradient"].median
    if mjx is not None:
        out["mjx_gradient_s"] = timings["mjx_gradient"].median
    return out


def treatment_row(name: str, treatment: str, steps: int, repeats: int) -> dict:
    """jaxmbd's ``contact=treatment`` (with ``limits=treatment``) on the file: steps/s
    under ``jax.jit`` and compile time."""
    import mujoco

    path = path_of(name)
    m = mujoco.MjModel.from_xml_path(path)
    h = float(m.opt.timestep)
    model = mbd.load_model(path)
    u = jnp.asarray(_controls(m, steps))
    run = _soft_run(model, steps, h, contact=treatment, limits=treatment)
    compiled, compile_s = _compiled(run, model, u)
    timing = H.interleaved({"jit": lambda: compiled(model, u)}, repeats=repeats)["jit"]
    return {
        "model": name,
        "treatment": treatment,
        "steps": steps,
        "compile_jit_s": compile_s,
        "jaxmbd_jit_steps_per_s": steps / timing.median,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["hopper", "cheetah", "humanoid"])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="members of the batch rows")
    parser.add_argument("--gradient-steps", type=int, default=0)
    parser.add_argument("--no-mjx", action="store_true", help="leave MJX's rows out")
    parser.add_argument("--treatments", nargs="*", default=[],
                        help="other contact treatments' rows: compliant, hard")  # fmt: skip
    parser.add_argument("--out", default="soft_contact")
    args = parser.parse_args(argv)
    mjx = None
    if not args.no_mjx:
        from benchmarks import soft_mjx

        mjx, why = soft_mjx.load_mjx()
        if mjx is None:
            H.log(f"no MJX rows: {why}")
    rows = []
    for name in args.models:
        rows.append(one(name, args.steps, args.repeats, mjx=mjx, batch=args.batch,
                        gradient_steps=args.gradient_steps))  # fmt: skip
        H.log(str(rows[-1]))
    others = []
    for name in args.models:
        for treatment in args.treatments:
            others.append(treatment_row(name, treatment, args.steps, args.repeats))
            H.log(str(others[-1]))
    H.write_results(args.out, rows, data={"treatments": others},
                    title="Robots in contact: jaxmbd soft vs MuJoCo C and MJX")  # fmt: skip


if __name__ == "__main__":
    main()
