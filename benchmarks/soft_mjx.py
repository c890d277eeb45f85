"""MJX (MuJoCo XLA) as a peer of jaxmbd's soft contact: ``mjx.step`` under ``jax.jit``, one
model and a ``vmap``-ped batch, on the same files, states and controls.

MJX comes from its own virtual environment, so that the project's jax stays as installed::

    python -m venv /work/venvs/mjx && /work/venvs/mjx/bin/pip install mujoco-mjx

(``JAXMBD_MJX_VENV`` names another folder.) Its jax is the project's version, so
:func:`load_mjx` imports MJX into the benchmark's own process from there (that
environment's site-packages after the project's on ``sys.path``, its ``mujoco/mjx`` joined
to the project's ``mujoco`` package): MJX and jaxmbd are then timed alternately in one
process, with the same XLA flags, in float64 both (importing jaxmbd enables x64).
:mod:`benchmarks.soft_contact` uses these runs; alone::

    python -m benchmarks.soft_mjx --models hopper --steps 1000 --batch 256
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

# compile times of a fresh compile for every engine: XLA's persistent cache (which
# jaxmbd turns on) would serve MJX's and jaxmbd's programs from an earlier run
os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402, F401  (float64 and XLA flags, as in every benchmark of jaxmbd)

#: The virtual environment MJX is installed in.
DEFAULT_VENV = os.environ.get("JAXMBD_MJX_VENV", "/work/venvs/mjx")


def load_mjx(venv: str = DEFAULT_VENV):
    """``(mujoco.mjx, None)``, or ``(None, why)`` where MJX cannot be imported."""
    try:
        from mujoco import mjx

        return mjx, None
    except ImportError:
        pass
    found = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    if not found:
        return None, f"no MJX environment at {venv} (see benchmarks/soft_mjx.py)"
    site = found[0]
    import mujoco

    if not os.path.isdir(os.path.join(site, "mujoco", "mjx")):
        return None, f"{site} has no mujoco/mjx (pip install mujoco-mjx there)"
    if site not in sys.path:
        sys.path.append(site)
    mujoco.__path__.append(os.path.join(site, "mujoco"))
    try:
        from mujoco import mjx
    except ImportError as error:
        return None, f"MJX failed to import: {error}"
    return mjx, None


def single_program(mjx, m, controls):
    """(compiled program, its arguments, compile seconds): ``len(controls)`` steps of
    ``mjx.step`` from the file's initial state (qpos0, zero qvel) under the controls, as a
    ``lax.scan`` in one ``jax.jit``; the program returns the qpos trajectory (steps, nq)."""
    mx = mjx.put_model(m)
    dx = mjx.make_data(mx)

    def run(dx, u):
        def body(d, uk):
            d = mjx.step(mx, d.replace(ctrl=uk))
            return d, d.qpos

        return jax.lax.scan(body, dx, u)[1]

    u = jnp.asarray(controls)
    start = time.perf_counter()
    compiled = jax.jit(run).lower(dx, u).compile()
    return compiled, (dx, u), time.perf_counter() - start


def batch_program(mjx, m, controls):
    """As :func:`single_program` for a batch of control sequences (batch, steps, nu), each
    member from the same state, by ``jax.vmap``; the program returns the final qpos
    (batch, nq)."""
    mx = mjx.put_model(m)
    dx = mjx.make_data(mx)

    def member(u):
        def body(d, uk):
            return mjx.step(mx, d.replace(ctrl=uk)), None

        return jax.lax.scan(body, dx, u)[0].qpos

    u = jnp.asarray(controls)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(member)).lower(u).compile()
    return compiled, (u,), time.perf_counter() - start


def gradient_program(mjx, m, controls):
    """(compiled, arguments, compile seconds) of the gradient of the final qpos' sum with
    respect to the controls through ``len(controls)`` MJX steps (reverse mode)."""
    mx = mjx.put_model(m)
    dx = mjx.make_data(mx)

    def loss(u):
        def body(d, uk):
            return mjx.step(mx, d.replace(ctrl=uk)), None

        return jnp.sum(jax.lax.scan(body, dx, u)[0].qpos)

    u = jnp.asarray(controls)
    start = time.perf_counter()
    compiled = jax.jit(jax.grad(loss)).lower(u).compile()
    return compiled, (u,), time.perf_counter() - start


def main(argv=None) -> None:
    from benchmarks import _harness as H
    from benchmarks.soft_contact import path_of

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["hopper", "cheetah", "humanoid"])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import mujoco

    mjx, why = load_mjx()
    if mjx is None:
        raise SystemExit(why)
    for name in args.models:
        m = mujoco.MjModel.from_xml_path(path_of(name))
        rng = np.random.default_rng(0)
        controls = rng.uniform(-1, 1, (args.steps, m.nu))
        single, single_args, single_compile = single_program(mjx, m, controls)
        batch = rng.uniform(-1, 1, (args.batch, args.steps, m.nu))
        batched, batch_args, batch_compile = batch_program(mjx, m, batch)
        calls = {
            "single": lambda single=single, a=single_args: single(*a),
            "batch": lambda batched=batched, a=batch_args: batched(*a),
        }
        timings = H.interleaved(calls, repeats=args.repeats)
        H.log(
            f"{name}: single {args.steps / timings['single'].median:.0f} steps/s (compile "
            f"{single_compile:.1f} s); batch {args.batch} "
            f"{args.batch * args.steps / timings['batch'].median:.0f} model-steps/s (compile "
            f"{batch_compile:.1f} s)"
        )


if __name__ == "__main__":
    main()
