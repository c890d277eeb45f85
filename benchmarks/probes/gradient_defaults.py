# ruff: noqa: E402, E501
"""A gradient's cost against its forward run, and its compile, for each mode of
``JAXMBD_HOIST_GRADIENT_LOOPS`` in one process: the formulation a user gets by naming none
("default") and named ones. From the tree's root:

    VARIANTS="main:,branch:,branch:1" JAXMBD_OTHER=/work/main \\
        python benchmarks/probes/gradient_defaults.py \\
        double_pendulum:default:gen_alpha double_pendulum:rA:gen_alpha \\
        arm3:default:rkmk arm3:rA:rkmk cartpole:default:default first:arm3 first:cartpole

A case MODEL:FORMULATION:INTEGRATOR ("default": name none) is the loss
|r(T)|^2 + |rdot(T)|^2 of the bodies after ``STEPS`` (1000) steps of h = 1e-3, its gradient
with respect to a gravity scale. ``first:arm3`` and ``first:cartpole`` are the programs of
``benchmarks/compile_time.py`` (``value_and_grad``: arm3 over 0.1 s with respect to the
masses, the cart-pole over 0.1 s at h = 0.01 with respect to the controls; the
formulation and integrator of ``first:cartpole:rA:rkmk`` named after it), timed to a first
result. ``jc:MODEL`` is ``benchmarks/engines/joint_coordinates.py``'s gradient (its file and
h, rkmk, contact and limits off; |qpos(T)|^2 after ``STEPS`` steps with respect to the
initial qvel): ``jc:humanoid``, ``jc:arm3``, ``jc:cartpole``, ``jc:double_pendulum``. Every program under ``jaxmbd.jit``'s XLA options. The mode is read at trace time,
caches are cleared between programs; a variant whose gradient lowers to the same StableHLO
as an earlier one's is not compiled again (printed as "same program as"). Runs alternated,
medians of ``REP`` (wall time, and the CPU time of the
process, which a loaded machine inflates less: the ratios are each tree's gradient over its
own forward run). ``VARIANTS``: TREE:MODE pairs, TREE "branch" (this tree) or "main"
(the tree at ``JAXMBD_OTHER``, imported as ``jaxmbd_main``), MODE the value of
``JAXMBD_HOIST_GRADIENT_LOOPS`` ("" unset), and an optional third field SAVES, what
the joint formulation's adjoint step keeps (``jaxmbd.joint_space.run.ADJOINT_SAVES``,
"+"-joined: ``poses``, ``factor``; "" none); the first is the reference of the gradients'
differences, and the forward run is each tree's own.
"""

import os

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")
VARIANTS = [
    (*v.split(":"), "")[:3] if v.count(":") == 1 else tuple(v.split(":"))
    for v in os.environ.get("VARIANTS", "branch:,branch:1").split(",")
]
if any(v[0] == "main" for v in VARIANTS):
    import benchmarks.probes._other_tree  # noqa: F401  (jaxmbd_main)

import importlib
import statistics
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxmbd as mbd
from benchmarks.probes._program_timing import compiled, leaves, timed_both
from benchmarks.problems import ARM3
from jaxmbd.compiled.xla_flags import HOIST_GRADIENT_LOOPS, hoisted_sizes

PACKAGES = {"branch": mbd}
if any(v[0] == "main" for v in VARIANTS):
    import jaxmbd_main

    PACKAGES["main"] = jaxmbd_main

N = int(os.environ.get("STEPS", "1000"))
REP = int(os.environ.get("REP", "5"))
ROOT = Path(__file__).resolve().parents[2]


def _options(form, integ):
    opts = {}
    if form != "default":
        opts["formulation"] = form
    if integ != "default":
        opts["integrator"] = integ
    return opts


def program(case, mbd):
    """(function, x) for a case, of the package ``mbd``."""
    parts = case.split(":")
    if parts[0] == "first":
        name = parts[1]
        opts = _options(*parts[2:4]) if len(parts) == 4 else {}
        if name == "arm3":
            model = mbd.mjcf.load_robot(ROOT / "tests" / "data" / "arm3.xml")

            def loss(masses):
                m = eqx.tree_at(lambda m: m.mass, model, masses)
                return jnp.sum(mbd.simulate(m, t_end=0.1, h=1e-3, **opts).r ** 2)

            return jax.value_and_grad(loss), jnp.asarray(model.mass)
        path = Path(importlib.import_module("dm_control").__file__).parent / "suite"
        model = mbd.mjcf.load_robot(path / "cartpole.xml")
        opts.setdefault("integrator", "rkmk")

        def loss(u):
            sol = mbd.simulate(model, t_end=0.1, h=0.01, controls=u, **opts)
            return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2) + 1e-3 * jnp.sum(u**2)

        return jax.value_and_grad(loss), jnp.full((10, model.nu), 0.3)
    if parts[0] == "jc":
        return _joint_coordinates(parts[1], mbd)
    name, form, integ = parts
    if name == "double_pendulum":
        model = mbd.models.double_pendulum()
    elif name == "arm3":
        model = mbd.load_model(str(ARM3), keyframe="swing")
    else:
        path = Path(importlib.import_module("dm_control").__file__).parent / "suite"
        model = mbd.mjcf.load_robot(path / "cartpole.xml")
    opts = _options(form, integ)

    def loss(s):
        m = eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)
        sol = mbd.simulate(m, t_end=N * 1e-3, h=1e-3, **opts)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return loss, jnp.asarray(1.1)


_FILES = {}


def _joint_coordinates(name, mbd):
    """``benchmarks/engines/joint_coordinates.py``'s gradient of a model (its file, its h,
    rkmk, limits and contact off): |qpos(T)|^2 after ``STEPS`` steps with respect to the
    initial qvel."""
    import tempfile

    from benchmarks.engines.joint_coordinates import model_file

    if name not in _FILES:
        _FILES[name] = model_file(name, Path(tempfile.mkdtemp()))
    F = _FILES[name]
    model = mbd.load_model(F["path"], keyframe=0)
    opts = dict(formulation="joint", integrator="rkmk", t_end=N * F["h"], h=F["h"], limits="none")

    def loss(v):
        m = eqx.tree_at(lambda m: m.tree.qvel_init, model, v)
        return jnp.sum(mbd.simulate(m, **opts).qpos[-1] ** 2)

    return loss, jnp.asarray(F["v0"])


for case in sys.argv[1:]:
    first_only = case.startswith("first:")
    progs, by_hash, fwds = {}, {}, {}
    for tree, mode, saves in VARIANTS:
        pkg = PACKAGES[tree]
        if not first_only and tree not in fwds:
            os.environ.pop(HOIST_GRADIENT_LOOPS, None)
            jax.clear_caches()
            loss, x = program(case, pkg)
            fwds[tree] = compiled(loss, x)
            print(
                f"{case} {tree} forward: trace+lower {fwds[tree]['lower']:.1f} s XLA "
                f"{fwds[tree]['xla']:.1f} s",
                flush=True,
            )
        os.environ[HOIST_GRADIENT_LOOPS] = mode
        if hasattr(pkg.joint_space.run, "ADJOINT_SAVES"):
            names = {"poses": "jaxmbd_tree_poses", "factor": "jaxmbd_mass_factor"}
            keys = [k for k in saves.split("+") if k]
            pkg.joint_space.run.ADJOINT_SAVES = tuple(names[k] for k in keys if k in names)
        jax.clear_caches()
        f, x = program(case, pkg)
        g = compiled(f if first_only else jax.grad(f), x, {h: progs[v] for h, v in by_hash.items()})
        same = by_hash.get(g["hash"])
        by_hash.setdefault(g["hash"], (tree, mode, saves))
        sizes = hoisted_sizes(g["c"].as_text())
        print(
            f"{case} {tree}:{mode}:{saves}: gradient trace+lower {g['lower']:.1f} s XLA {g['xla']:.1f} s "
            f"first result {g['first']:.1f} s; hoisted {len(sizes)} (largest {max(sizes, default=0)})"
            f"; program {g['hash']}"
            + (f" (same program as {same})" if same is not None else "")
            + f"; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        if same is None:
            progs[(tree, mode, saves)] = g
    os.environ.pop(HOIST_GRADIENT_LOOPS, None)
    times = {v: [] for v in progs}
    ftimes = {t: [] for t in fwds}
    for _ in range(REP):
        for t in fwds:
            ftimes[t].append(timed_both(fwds[t]["c"], x))
        for v in progs:
            times[v].append(timed_both(progs[v]["c"], x))
    ref = leaves(progs[VARIANTS[0]]["out"])

    def medians(runs):
        """(median wall, median CPU, minimum CPU) seconds."""
        cpu = [r[1] for r in runs]
        return statistics.median(r[0] for r in runs), statistics.median(cpu), min(cpu)

    for t in fwds:
        w, c, m = medians(ftimes[t])
        print(
            f"{case} {t} forward run {w * 1e3:.2f} ms (CPU median {c * 1e3:.2f}, min {m * 1e3:.2f})",
            flush=True,
        )
    for v in progs:
        g = medians(times[v])
        f = medians(ftimes[v[0]]) if fwds else (float("nan"),) * 3
        diff = float(jnp.max(jnp.abs(leaves(progs[v]["out"]) - ref)) / jnp.max(jnp.abs(ref)))
        print(
            f"{case} {':'.join(v)}: gradient run {g[0] * 1e3:.2f} ms ratio {g[0] / f[0]:.2f}; "
            f"CPU median {g[1] * 1e3:.2f} ms ratio {g[1] / f[1]:.2f}, min {g[2] * 1e3:.2f} ms "
            f"ratio {g[2] / f[2]:.2f}; relative to {VARIANTS[0][0]}:{VARIANTS[0][1]}: {diff:.1e}",
            flush=True,
        )
    print(f"{case}: load {os.getloadavg()}", flush=True)
