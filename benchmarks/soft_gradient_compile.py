"""Cold compile and run time of a gradient through MuJoCo's soft contact: dm_control's hopper.

    JAXMBD_NO_COMPILATION_CACHE=1 python -m benchmarks.soft_gradient_compile [--t-end 0.5]
        [--hlo]

``jax.jit(jax.value_and_grad(loss))`` of the torso's final height after ``t_end`` s of
``contact="soft", limits="soft", integrator="euler"`` at the file's h = 5 ms, with respect to
a constant control (4,), the hopper standing on its foot (rootz lowered so that the foot
touches, knee bent by 0.3 rad). Trace, lowering and XLA compilation are timed apart through
the stages API (``--mbd-options``: jaxmbd's XLA options, as ``mbd.jit``; ``--opt-level``:
LLVM's level); ``--hlo`` also counts the lowered program's lines and ``while`` loops and the
compiled HLO's while loops. Run it in a fresh process with the persistent cache off.
"""

from __future__ import annotations

import argparse
import os
import re
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxmbd as mbd
from jaxmbd.tree import body_velocities, poses

HOPPER = os.path.join(os.path.dirname(__import__("dm_control").__file__), "suite", "hopper.xml")


def standing_hopper():
    """The hopper on its foot: knee bent 0.3 rad, the foot's lowest point 1 mm in the floor."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(HOPPER)
    d = mujoco.MjData(m)
    d.qpos[:] = 0.0
    d.qpos[5] = 0.3  # knee (range 5..150 degrees)
    mujoco.mj_kinematics(m, d)
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "foot")
    # the foot capsule's lowest point: centre height minus radius and half-length * |sin|
    axis = d.geom_xmat[foot].reshape(3, 3)[:, 2]
    low = d.geom_xpos[foot][2] - m.geom_size[foot][0] - m.geom_size[foot][1] * abs(axis[2])
    qpos = d.qpos.copy()
    qpos[1] -= low + 1e-3
    return qpos


def with_state(model, qpos, qvel=None):
    """``model`` starting from (qpos, qvel) of its tree, differentiably (the bodies' initial
    states follow by the tree's kinematics, as ``Model.with_joint_state`` sets them)."""
    tree = model.tree
    qvel = tree.qvel_init if qvel is None else qvel
    tree = eqx.tree_at(lambda t: (t.qpos_init, t.qvel_init), tree, (qpos, qvel))
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    return eqx.tree_at(
        lambda m: (m.tree, m.r0, m.A0, m.rdot0, m.omega0), model, (tree, p.c, p.R, rdot, omega)
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--t-end", type=float, default=0.5)
    parser.add_argument("--hlo", action="store_true")
    parser.add_argument("--mbd-options", action="store_true",
                        help="compile with jaxmbd's XLA options (mbd.jit's)")  # fmt: skip
    parser.add_argument("--opt-level", type=int, default=None,
                        help="xla_backend_optimization_level (XLA's default 2)")  # fmt: skip
    args = parser.parse_args()
    options = {}
    if args.mbd_options:
        from jaxmbd.compiled.jit import XLA_OPTIONS

        options.update(XLA_OPTIONS)
    if args.opt_level is not None:
        options["xla_backend_optimization_level"] = args.opt_level
    warnings.simplefilter("ignore")
    model = with_state(mbd.load_model(HOPPER), jnp.asarray(standing_hopper()))

    def loss(u):
        sol = mbd.simulate(model, t_end=args.t_end, h=0.005, contact="soft", limits="soft",
                           integrator="euler", controls=u)  # fmt: skip
        return sol.qpos[-1, 1]

    u = jnp.array([0.1, -0.2, 0.3, 0.1])
    f = jax.jit(jax.value_and_grad(loss))
    t0 = time.perf_counter()
    traced = f.trace(u)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile(compiler_options=options or None)
    t3 = time.perf_counter()
    value, grad = jax.block_until_ready(compiled(u))
    t4 = time.perf_counter()
    jax.block_until_ready(compiled(u))
    t5 = time.perf_counter()
    print(f"options {options}, JAXMBD_HOIST_GRADIENT_LOOPS="
          f"{os.environ.get('JAXMBD_HOIST_GRADIENT_LOOPS', '')!r}")  # fmt: skip
    print(f"hopper t_end={args.t_end}: trace {t1 - t0:.1f} s, lower {t2 - t1:.1f} s, "
          f"XLA compile {t3 - t2:.1f} s, first call {t4 - t3:.3f} s, "
          f"second {t5 - t4:.3f} s")  # fmt: skip
    print(f"value {float(value):.6f} grad {grad}")
    if args.hlo:
        text = lowered.as_text()
        print(f"StableHLO: {len(text.splitlines())} lines, {text.count('stablehlo.while')} while, "
              f"{text.count('func.func')} functions")  # fmt: skip
        hlo = compiled.as_text()
        whiles = len(re.findall(r"= .*? while\(", hlo))
        print(f"compiled HLO: {len(hlo.splitlines())} lines, {whiles} while ops")
        jaxpr = str(traced.jaxpr)
        print(f"jaxpr: {len(jaxpr.splitlines())} lines, {jaxpr.count('while[')} while")


if __name__ == "__main__":
    main()
