# ruff: noqa: E402, E501
"""What the joint formulation's gradient stores and what it recomputes: a gradient's cost
against its forward run for several ways of treating the step in reverse mode, in one
process. From the tree's root:

    POLICIES="off,recompute,store" python benchmarks/probes/gradient_policies.py \\
        arm3:rkmk double_pendulum:gen_alpha first:cartpole

A case MODEL:INTEGRATOR (the formulation users get: joint) is the loss
|r(T)|^2 + |rdot(T)|^2 of the bodies after ``STEPS`` (1000) steps of h = 1e-3, its gradient
with respect to a gravity scale; ``first:cartpole`` is the program of
``benchmarks/compile_time.py`` (``value_and_grad`` of the cart-pole over 10 steps of
h = 0.01 with respect to the controls, rkmk). ``POLICIES``, the first the reference of the
gradients' differences:

- ``off``: ``JAXMBD_HOIST_GRADIENT_LOOPS=0`` (the step linearised in the forward loop, its
  tree picks gathers whose transposes are scatters);
- ``recompute``: the default (``jax.checkpoint`` of the step, saving the Newton roots and
  their factors: the adjoint reruns the step and linearises it);
- ``store``: no checkpoint, the picks' tangents by slices (the forward loop linearises the
  step and stores its residuals; the adjoint transposes them);
- any other name: the step checkpointed with ``jax.checkpoint_policies.<name>``.

Every program under ``jaxmbd.jit``'s XLA options, caches cleared between programs; runs
alternated, medians of ``REP``.
"""

import os

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import importlib
import statistics
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxmbd as mbd
from benchmarks.probes._program_timing import compiled, leaves, timed
from benchmarks.problems import ARM3
from jaxmbd.compiled.xla_flags import HOIST_GRADIENT_LOOPS, hoisted_sizes
from jaxmbd.joint_space import run as joint_run
from jaxmbd.newton._implicit import ROOT, ROOT_FACTORS

POLICIES = os.environ.get("POLICIES", "off,recompute,store").split(",")
N = int(os.environ.get("STEPS", "1000"))
REP = int(os.environ.get("REP", "7"))
ROOT_DIR = Path(__file__).resolve().parents[2]
DEFAULT = joint_run._adjoint_recomputes


def policy(name):
    """(value of JAXMBD_HOIST_GRADIENT_LOOPS, replacement of run._adjoint_recomputes)."""
    if name == "off":
        return "0", DEFAULT
    if name == "recompute":
        return "", DEFAULT
    if name == "store":
        return "", lambda advance: advance
    chosen = getattr(jax.checkpoint_policies, name)
    if name.startswith("save_only_these_names"):
        chosen = chosen(ROOT, ROOT_FACTORS)
    return "", lambda advance: jax.checkpoint(advance, prevent_cse=False, policy=chosen)


def program(case):
    name, integ = case.split(":")
    path = Path(importlib.import_module("dm_control").__file__).parent / "suite"
    if name == "first":
        model = mbd.mjcf.load_robot(path / "cartpole.xml")

        def loss(u):
            sol = mbd.simulate(model, t_end=0.1, h=0.01, controls=u, integrator="rkmk")
            return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2) + 1e-3 * jnp.sum(u**2)

        return loss, jnp.full((10, model.nu), 0.3), True
    if name == "double_pendulum":
        model = mbd.models.double_pendulum()
    elif name == "arm3":
        model = mbd.load_model(str(ARM3), keyframe="swing")
    else:
        model = mbd.mjcf.load_robot(path / f"{name}.xml")

    def loss(s):
        m = eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)
        sol = mbd.simulate(m, t_end=N * 1e-3, h=1e-3, integrator=integ)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return loss, jnp.asarray(1.1), False


for case in sys.argv[1:]:
    loss, x, value_and_grad = program(case)
    os.environ.pop(HOIST_GRADIENT_LOOPS, None)
    jax.clear_caches()
    fwd = compiled(loss, x)
    print(f"{case} forward: trace+lower {fwd['lower']:.1f} s XLA {fwd['xla']:.1f} s", flush=True)
    progs = {}
    for name in POLICIES:
        mode, adjoint = policy(name)
        os.environ[HOIST_GRADIENT_LOOPS] = mode
        joint_run._adjoint_recomputes = adjoint
        jax.clear_caches()
        loss, x, _ = program(case)
        g = compiled(jax.value_and_grad(loss) if value_and_grad else jax.grad(loss), x)
        joint_run._adjoint_recomputes = DEFAULT
        os.environ.pop(HOIST_GRADIENT_LOOPS, None)
        sizes = hoisted_sizes(g["c"].as_text())
        print(
            f"{case} {name}: gradient trace+lower {g['lower']:.1f} s XLA {g['xla']:.1f} s "
            f"first result {g['first']:.1f} s; hoisted {len(sizes)} (largest "
            f"{max(sizes, default=0)}); program {g['hash']}; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        progs[name] = g
    times = {v: [] for v in progs}
    ftimes = []
    for _ in range(REP):
        ftimes.append(timed(fwd["c"], x))
        for v in progs:
            times[v].append(timed(progs[v]["c"], x))
    ref = leaves(progs[POLICIES[0]]["out"])
    f = statistics.median(ftimes)
    print(f"{case} forward run {f * 1e3:.2f} ms", flush=True)
    for v in progs:
        g = statistics.median(times[v])
        diff = float(jnp.max(jnp.abs(leaves(progs[v]["out"]) - ref)) / jnp.max(jnp.abs(ref)))
        print(
            f"{case} {v}: gradient run {g * 1e3:.2f} ms (min {min(times[v]) * 1e3:.2f}) "
            f"ratio {g / f:.2f}; relative to {POLICIES[0]}: {diff:.1e}",
            flush=True,
        )
    print(f"{case}: load {os.getloadavg()}", flush=True)
