# ruff: noqa: E402, E501, B023
"""What a joint-formulation gradient recomputes and stores, per step: the equations of one
step (forward), of its linearisation (jvp) and of its transpose, by primitive; the
residuals the checkpointed step keeps; and, in the compiled gradient of ``STEPS`` steps,
its while loops, scatters and the loops XLA hoisted. From the tree's root:

    python benchmarks/probes/gradient_profile.py arm3 humanoid

Models as ``benchmarks/engines/joint_coordinates.py`` writes them (contact and limits off,
rkmk); the gradient is that benchmark's: |qpos(T)|^2 with respect to the initial qvel.
``COMPILE=0`` skips the compiled program.
"""

import os

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")
import collections
import re
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
from benchmarks.engines.joint_coordinates import _jaxmbd_with_qvel, _qpos, model_file
from jaxmbd.compiled.xla_flags import hoisted_sizes, loop_hoisted
from jaxmbd.joint_space.run import _adjoint_recomputes, model_tree
from jaxmbd.joint_space.steppers import RungeKutta4

STEPS = int(os.environ.get("STEPS", "1000"))


def _subjaxprs(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _subjaxprs(v)
        elif hasattr(v, "eqns"):
            yield v
        elif hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):
            yield v.jaxpr


def count(jaxpr, out=None):
    """Equations by primitive, sub-jaxprs included (a scan's body once)."""
    out = collections.Counter() if out is None else out
    for eqn in jaxpr.eqns:
        out[eqn.primitive.name] += 1
        for sub in _subjaxprs(eqn.params.values()):
            count(sub, out)
    return out


def summary(c, top=12):
    return f"{sum(c.values())} eqns: " + ", ".join(f"{k} {v}" for k, v in c.most_common(top))


def setup(name, tmp):
    F = model_file(name, Path(tmp))
    F["qvel"] = np.asarray(F["v0"])[None]
    with_qvel = _jaxmbd_with_qvel(F)
    model = with_qvel(jnp.asarray(F["v0"]))
    opts = dict(
        formulation="joint", integrator="rkmk", t_end=STEPS * F["h"], h=F["h"], limits="none"
    )
    return F, with_qvel, model, opts


for name in sys.argv[1:]:
    with tempfile.TemporaryDirectory() as tmp:
        F, with_qvel, model, opts = setup(name, tmp)
        tree, loops = model_tree(model)
        stepper = RungeKutta4(munthe_kaas=True)
        h = jnp.asarray(F["h"])
        q, v = tree.qpos_init, tree.qvel_init
        print(
            f"{name}: nq {tree.nq} nv {tree.nv} nb {tree.nb} loops {loops is not None}", flush=True
        )

        def step(q, v):
            acc, q1, v1 = stepper.start_and_step(model, tree, loops, q, v, 0.0, h)
            return q1, v1

        fwd = jax.make_jaxpr(step)(q, v)
        print(f"  forward step: {summary(count(fwd.jaxpr))}", flush=True)
        jvp = jax.make_jaxpr(lambda q, v, dq, dv: jax.jvp(step, (q, v), (dq, dv)))(q, v, q, v)
        print(f"  jvp: {summary(count(jvp.jaxpr))}", flush=True)
        _, lin = jax.linearize(step, q, v)
        linj = jax.make_jaxpr(lin)(q, v)
        print(f"  linear part: {summary(count(linj.jaxpr))}", flush=True)
        vjp = jax.make_jaxpr(lambda q, v, a, b: jax.vjp(step, q, v)[1]((a, b)))(q, v, q, v)
        print(
            f"  vjp (forward + linearisation + transpose): {summary(count(vjp.jaxpr))}", flush=True
        )
        _, pull = jax.vjp(step, q, v)
        tr = jax.make_jaxpr(pull)((q, v))
        print(f"  transpose alone: {summary(count(tr.jaxpr))}", flush=True)
        res = [x for x in jax.tree_util.tree_leaves(pull) if hasattr(x, "shape")]
        print(
            f"  residuals stored without checkpoint: {len(res)} arrays, {sum(int(np.size(x)) for x in res)} floats",
            flush=True,
        )
        ck = _adjoint_recomputes(step)
        _, pull_ck = jax.vjp(ck, q, v)
        res = [x for x in jax.tree_util.tree_leaves(pull_ck) if hasattr(x, "shape")]
        print(
            f"  residuals with the default checkpoint: {len(res)} arrays, {sum(int(np.size(x)) for x in res)} floats",
            flush=True,
        )
        if os.environ.get("COMPILE", "1") == "0":
            continue

        def final_qpos(v0):
            return _qpos(mbd.simulate(with_qvel(v0), **opts), F["joints"])[-1]

        loss = lambda v0: jnp.sum(final_qpos(v0) ** 2)  # noqa: E731
        x = jnp.asarray(F["v0"])
        t0 = time.perf_counter()
        low = jax.jit(jax.grad(loss), compiler_options=mbd.compiled.jit.XLA_OPTIONS).lower(x)
        t1 = time.perf_counter()
        c = low.compile()
        t2 = time.perf_counter()
        text = c.as_text()
        whiles = re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', text)
        print(
            f"  gradient: trace+lower {t1 - t0:.1f} s, XLA {t2 - t1:.1f} s; while trip counts {collections.Counter(whiles)}",
            flush=True,
        )
        ops = {
            k: text.count(f" {k}(") for k in ("scatter", "gather", "dot", "custom-call", "while")
        }
        print(f"  compiled ops {ops}", flush=True)
        print(
            f"  hoisted loops (sizes) {hoisted_sizes(text)[:8]}; the {STEPS + 1}-trip loop hoisted: {loop_hoisted(text, STEPS + 1)}",
            flush=True,
        )
        Path(f"/tmp/grad/{name}_grad.hlo").write_text(text)
