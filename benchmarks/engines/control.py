"""Control benchmark: jaxmbd against MJX on dm_control's cartpole and gymnasium's
inverted double pendulum: steps/s, gradient cost and compile time, single model and batch
256, at stated (equal) accuracy.

    python -m benchmarks.engines control [--quick] [--models cartpole inverted_double_pendulum]
        [--batch 256] [--t-end 1.0] [--rounds 5] [--no-grad] [--from-json FILE]

Models: ``suite/cartpole.xml`` of dm_control and ``envs/mujoco/assets/
inverted_double_pendulum.xml`` of gymnasium, read from the installed packages (never
copied): ``mbd.load_model`` for jaxmbd, ``mujoco.MjModel.from_xml_path`` + ``mjx.put_model``
for MJX (``opt.enableflags = 0``: MJX refuses cartpole's energy flag; the energy is not
used). Both files step at h = 0.01 s with RK4, the step used here.

Runs: from the files' reference pose (member 0 at rest; batch members 1..B-1 with random
joint rates, uniform in +-0.5 rad/s or m/s) under random piecewise-constant controls, one
value per step (uniform in +-amplitude, amplitude per model so that no member of the batch
reaches a joint limit within t_end: checked on the reference runs, and members that do
are named and left out of the errors), the same for both engines from a fixed seed; member
0's controls are the single run's. The members' initial rates reach jaxmbd through the
file: the rates are linear in qvel at a fixed pose, so the body velocities of qvel = e_i
(keyframes added with ``mujoco.MjSpec``, loaded by ``mbd.load_model(keyframe=i)`` from a
temporary file) are combined per member; one member is checked against its own keyframe.

Integrator classes compared at the same h:

* explicit RK4: MJX RK4 against jaxmbd ``rkmk`` (explicit Munthe-Kaas RK4, formulation rA):
  steps/s single and batch, gradients single and batch, compile times;
* implicit / semi-implicit: MJX Euler (semi-implicit, joint damping implicit) and
  implicitfast against jaxmbd ``gen_alpha`` (second order) and ``backward_euler`` (first
  order): forward steps/s (single; Euler and gen_alpha also batch). Their gradients are
  not compared: the two engines' trajectories differ by their step errors here, so their
  gradients differ too.

Accuracy: each run's joint coordinates (``sol.joints[name].q``; MuJoCo's qpos) at every
step against MuJoCo C RK4 at h/16 (``mujoco.rollout``), the largest difference over the run
and the joints (rad or m, max over the batch's members for the batch runs). MJX is checked
against MuJoCo C at the same h and integrator, so MuJoCo C's error sweep over h (Euler,
implicitfast, RK4 at h, h/2, ... h/32) gives the step MJX needs to reach jaxmbd's error:
MJX's cost per step does not depend on h (no Newton loop, constraints off, see below), so
its wall time at that step is its measured time per step times the steps.

Settings (each engine's best honest configuration for these runs):

* jaxmbd: formulation rA, the integrators' defaults (rkmk: RK4; gen_alpha rho_inf 0.9,
  stabilised index 2, reused-matrix Newton, tol 1e-10), the model as loaded (joint limits
  compliant, evaluated every step, inactive within the ranges). Single forward: the
  ``mbd.simulate`` call (what a user calls; its second call reuses the compiled program),
  beside ``mbd.jit`` of the same simulate returning the joint coordinates (the program the
  gradient differentiates; the difference is the Solution's assembly and the run's status
  check on the host). Batch: ``mbd.simulate_batch(models, controls=(B, N, nu))`` over
  ``mbd.stack_models`` of the members, where simulate_batch takes per-member controls;
  else ``mbd.jit(jax.vmap(...))`` of the single simulate (the report says which).
* MJX: ``jax.jit`` of ``jax.lax.scan`` over ``mjx.step`` (``ctrl`` set each step), the
  batch ``jax.vmap`` of it; float64 (jaxmbd's precision; MJX's default is float32). Joint
  limits off (``mjDSBL_CONSTRAINT``): no limit is reached in these runs (checked: MJX then
  equals MuJoCo C with limits on), and with limits on MJX's constraint solver is a
  ``while_loop``, which reverse mode cannot differentiate (``opt.iterations = 1`` would be
  needed). The row "MJX RK4, limits on" (the file's model, default solver) shows the
  forward cost of keeping them.

Gradients: ``jax.grad`` of L = sum of squares of the joint coordinates at t_end with respect
to the controls (N, nu); batch: of the mean of the members' L with respect to (B, N, nu),
through simulate_batch where it takes per-member controls (else ``jax.vmap`` of the single
gradient). Checked: the two engines' gradients against each other (relative 2-norm
difference, beside their trajectories' difference) and each against central differences
of its own forward program along one random unit direction (eps = 1e-5).

Timing: every program's first call (trace + compile + run) first, then ``--rounds`` rounds
that call every program of a model once (short programs several times in a row, the mean
of those), so that the machine's drift hits all alike; reported: the median over rounds,
min/max, compile = first call less the median run; the jaxmbd/MJX ratios are the median
of the per-round ratios. ``OPENBLAS_NUM_THREADS=1`` (as contact.py): both engines run
their single programs on one core.

Writes benchmarks/results/bench_control.{json,md,png}. ``--quick``: cartpole, 0.2 s, batch
8, RK4 class forward only, 2 rounds (a smoke run of the forward code paths; its numbers are
not the report's): 6 min on the shared 2-core machine at load 4-8, five compilations of
35-105 s. Compilation dominates every run: at load 8-17 on that machine one gradient
program took 9 (single) to 19 (batch) minutes to compile, so the default run (24 programs)
takes over an hour there; ``--models`` runs one model, ``--no-grad``, ``--no-batch-grad``,
``--no-implicit-batch`` and ``--rk4-only`` leave programs out, and ``--from-json a.json
b.json`` merges runs of single models into one report.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see the module docstring

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks._harness import RESULTS, ROOT, command  # noqa: E402
from benchmarks.engines import mjx_compatible_model, progress  # noqa: E402
from benchmarks.problems import control_model_path as model_path  # noqa: E402

OUT = RESULTS


MODELS = ("cartpole", "inverted_double_pendulum")
#: control amplitude per model (fraction of the ctrl range): the largest round value that
#: keeps every member of a 256 batch off the joint limits over 1 s (checked each run)
AMPLITUDE = {"cartpole": 1.0, "inverted_double_pendulum": 0.3}
QVEL_SPREAD = 0.5  # members 1..B-1: initial joint rates uniform in +-this (rad/s or m/s)
REF_SUBSTEPS = 16  # the reference: MuJoCo C RK4 at h / 16
SWEEP = (1, 2, 4, 8, 16, 32)  # MuJoCo C error sweep: h / k
FD_EPS = 1e-5
SEED = 0

# (label, engine, integrator): the configurations of the default run
RK4_CLASS = ("jaxmbd rkmk", "MJX RK4")
CONFIGS = {
    "jaxmbd rkmk": ("jaxmbd", "rkmk"),
    "jaxmbd gen_alpha": ("jaxmbd", "gen_alpha"),
    "jaxmbd backward_euler": ("jaxmbd", "backward_euler"),
    "MJX RK4": ("MJX", "RK4"),
    "MJX RK4, limits on": ("MJX", "RK4"),
    "MJX Euler": ("MJX", "EULER"),
    "MJX implicitfast": ("MJX", "IMPLICITFAST"),
}
# the programs timed per configuration: fwd1 (single forward), api1 (jaxmbd's simulate
# call), fwdB (batch forward), grad1, gradB
PROGRAMS = {
    "jaxmbd rkmk": ("api1", "fwdB", "grad1", "gradB"),
    "jaxmbd gen_alpha": ("api1", "fwdB"),
    "MJX RK4": ("fwd1", "fwdB", "grad1", "gradB"),
    "MJX Euler": ("fwd1", "fwdB"),
}
# --extra: the other integrators, MJX with its limits, jaxmbd's simulate jit'd by the caller
EXTRA_PROGRAMS = {
    "jaxmbd rkmk": ("fwd1",),
    "jaxmbd backward_euler": ("api1",),
    "MJX RK4, limits on": ("fwd1",),
    "MJX implicitfast": ("fwd1",),
}
QUICK_PROGRAMS = {"jaxmbd rkmk": ("api1", "fwdB"), "MJX RK4": ("fwd1", "fwdB")}
# jaxmbd/MJX pairs whose ratios are reported: (jaxmbd config, program), (MJX config, program)
PAIRS = [
    (("jaxmbd rkmk", "api1"), ("MJX RK4", "fwd1")),
    (("jaxmbd rkmk", "fwd1"), ("MJX RK4", "fwd1")),
    (("jaxmbd rkmk", "fwdB"), ("MJX RK4", "fwdB")),
    (("jaxmbd rkmk", "grad1"), ("MJX RK4", "grad1")),
    (("jaxmbd rkmk", "gradB"), ("MJX RK4", "gradB")),
    (("jaxmbd gen_alpha", "api1"), ("MJX Euler", "fwd1")),
    (("jaxmbd gen_alpha", "fwdB"), ("MJX Euler", "fwdB")),
    (("jaxmbd backward_euler", "api1"), ("MJX Euler", "fwd1")),
]


_progress = progress


# ---------------------------------------------------------------------------- the problem


def problem(name: str, t_end: float, batch: int) -> dict:
    """The model's step, controls (B, N, nu), initial rates (B, nv), limits and names."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(model_path(name)))
    h = float(m.opt.timestep)
    n = int(round(t_end / h))
    rng = np.random.default_rng(SEED)
    lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    u = mid + AMPLITUDE[name] * half * rng.uniform(-1, 1, size=(batch, n, m.nu))
    qvel = QVEL_SPREAD * rng.uniform(-1, 1, size=(batch, m.nv))
    qvel[0] = 0.0  # member 0: the single run, at rest
    joints = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    return dict(name=name, h=h, n=n, t_end=n * h, controls=u, qvel=qvel, joints=joints,
                nq=m.nq, nv=m.nv, nu=m.nu, integrator_in_file=int(m.opt.integrator))  # fmt: skip


def _mj_model(name, integrator: str, h: float, limits: bool = True):
    return mjx_compatible_model(model_path(name), integrator, h, limits=limits)


def mujoco_c(name, integrator: str, h: float, controls, qvel, substeps: int = 1,
             limits: bool = True):  # fmt: skip
    """MuJoCo C (``rollout``, one thread) at h / substeps, each control row held over
    ``substeps`` steps: qpos (B, N + 1, nq) at the rows' switches, from qpos0 and ``qvel``."""
    import mujoco
    from mujoco import rollout

    m = _mj_model(name, integrator, h / substeps, limits)
    d = mujoco.MjData(m)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = []
    for v in qvel:
        mujoco.mj_resetData(m, d)
        d.qvel[:] = v
        s = np.zeros(mujoco.mj_stateSize(m, spec))
        mujoco.mj_getState(m, d, s, spec)
        states.append(s)
    states = np.array(states)
    ctrl = np.repeat(controls, substeps, axis=1)
    out, _ = rollout.rollout(m, d, states, ctrl)
    qpos = out[:, substeps - 1 :: substeps, 1 : 1 + m.nq]
    return np.concatenate([states[:, None, 1 : 1 + m.nq], qpos], axis=1)


def limited_members(name, qpos) -> list[int]:
    """Members whose reference run comes within a joint limit's range (+ margin)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(model_path(name)))
    bad = np.zeros(qpos.shape[0], bool)
    for j in range(m.njnt):
        if m.jnt_limited[j]:
            q = qpos[:, :, m.jnt_qposadr[j]]
            lo, hi = m.jnt_range[j] + np.array([1, -1]) * m.jnt_margin[j]
            bad |= ((q <= lo) | (q >= hi)).any(axis=1)
    return [int(k) for k in np.nonzero(bad)[0]]


# ---------------------------------------------------------------------------- jaxmbd


def jaxmbd_members(name, qvel):
    """(member 0's model, the stacked batch): the file's model with each member's initial
    joint rates (see the module docstring), and the largest difference of a directly loaded
    member's body velocities from the combined ones."""
    import mujoco

    import jaxmbd as mbd

    path = model_path(name)
    spec = mujoco.MjSpec.from_file(str(path))
    m = spec.compile()
    rates = [np.eye(m.nv)[i] for i in range(m.nv)] + [qvel[-1]]  # basis, then a check
    for v in rates:
        key = spec.add_key()
        key.qpos, key.qvel = m.qpos0, v
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # none for these files; the importer's own list
        file = Path(tmp) / path.name
        file.write_text(spec.to_xml())
        base = mbd.load_model(path, keyframe=None)
        loaded = [mbd.load_model(file, keyframe=k) for k in range(len(rates))]
    basis_v = np.stack([np.asarray(x.rdot0) for x in loaded[: m.nv]])  # (nv, nb, 3)
    basis_w = np.stack([np.asarray(x.omega0) for x in loaded[: m.nv]])

    def member(v):
        rdot = np.einsum("i,ibk->bk", v, basis_v)
        omega = np.einsum("i,ibk->bk", v, basis_w)
        return rdot, omega

    rdot, omega = member(qvel[-1])
    check = max(np.abs(rdot - np.asarray(loaded[-1].rdot0)).max(),
                np.abs(omega - np.asarray(loaded[-1].omega0)).max())  # fmt: skip
    import equinox as eqx

    models = []
    for v in qvel:
        rdot, omega = member(v)
        models.append(eqx.tree_at(lambda mo: (mo.rdot0, mo.omega0), base,
                                  (base.rdot0 * 0 + rdot, base.omega0 * 0 + omega)))  # fmt: skip
    return base, mbd.stack_models(models), float(check)


def _batch_takes_controls(mbd) -> bool:
    import inspect

    from jaxmbd.analysis import batch

    return (
        "_member_controls" in dir(batch)
        or "controls" in inspect.signature(mbd.simulate_batch).parameters
    )


def jaxmbd_programs(P, integrator, wanted, base, stacked):
    """Zero-argument callables for the wanted programs, and how the batch was run."""
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd

    names = P["joints"]
    u1 = jnp.asarray(P["controls"][0])
    uB = jnp.asarray(P["controls"])
    opts = dict(formulation="rA", integrator=integrator, t_end=P["t_end"], h=P["h"])

    def joints_q(sol):
        return jnp.stack([sol.joints[k].q for k in names], axis=-1)

    def traj(model, u):
        return joints_q(mbd.simulate(model, controls=u, **opts))

    def loss(model, u):
        return jnp.sum(traj(model, u)[-1] ** 2)

    per_member = _batch_takes_controls(mbd)
    if per_member:

        def run_batch(models, u):
            return mbd.simulate_batch(models, controls=u, **opts)

        def traj_batch(models, u):
            return joints_q(run_batch(models, u))

        batch_path = "mbd.simulate_batch(models, controls=(B, N, nu))"
    else:
        traj_batch = run_batch = mbd.jit(jax.vmap(traj))
        batch_path = "mbd.jit(jax.vmap(simulate)) (simulate_batch without per-member controls)"

    def loss_batch(models, u):
        return jnp.mean(jnp.sum(traj_batch(models, u)[:, -1] ** 2, axis=-1))

    fwd1 = mbd.jit(traj)
    grad1 = mbd.jit(jax.grad(loss, argnums=1))
    gradB = mbd.jit(jax.grad(loss_batch, argnums=1))
    calls = {
        "api1": lambda: mbd.simulate(base, controls=u1, **opts),
        "fwd1": lambda: fwd1(base, u1),
        "fwdB": lambda: run_batch(stacked, uB),
        "grad1": lambda: grad1(base, u1),
        "gradB": lambda: gradB(stacked, uB),
    }
    helpers = dict(
        # the simulate call's own program (api1), for the central differences
        traj=lambda u: np.asarray(joints_q(mbd.simulate(base, controls=jnp.asarray(u), **opts))),
        api_traj=lambda sol: np.asarray(joints_q(sol)),
        batch_traj=lambda out: np.asarray(joints_q(out) if per_member else out),
        batch_path=batch_path if "fwdB" in wanted or "gradB" in wanted else None,
    )
    return {k: calls[k] for k in wanted}, helpers


# ---------------------------------------------------------------------------- MJX


def mjx_programs(P, integrator, wanted, limits: bool):
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    m = _mj_model(P["name"], integrator, P["h"], limits)
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)
    dB = jax.vmap(lambda v: d0.replace(qvel=v))(jnp.asarray(P["qvel"]))
    u1 = jnp.asarray(P["controls"][0])
    uB = jnp.asarray(P["controls"])

    def traj(d, u):
        def step(d, uk):
            d = mjx.step(mx, d.replace(ctrl=uk))
            return d, d.qpos

        _, q = jax.lax.scan(step, d, u)
        return jnp.concatenate([d.qpos[None], q])

    def loss(d, u):
        return jnp.sum(traj(d, u)[-1] ** 2)

    def loss_batch(d, u):
        return jnp.mean(jax.vmap(loss)(d, u))

    fwd1 = jax.jit(traj)
    fwdB = jax.jit(jax.vmap(traj))
    grad1 = jax.jit(jax.grad(loss, argnums=1))
    gradB = jax.jit(jax.grad(loss_batch, argnums=1))
    calls = {
        "fwd1": lambda: fwd1(d0, u1),
        "fwdB": lambda: fwdB(dB, uB),
        "grad1": lambda: grad1(d0, u1),
        "gradB": lambda: gradB(dB, uB),
    }
    helpers = dict(traj=lambda u: np.asarray(fwd1(d0, jnp.asarray(u))))
    return {k: calls[k] for k in wanted}, helpers


# ---------------------------------------------------------------------------- the study


def _error(q, ref, members=None):
    """Largest |q - ref| over steps and joints (and the given members of a batch)."""
    q, ref = np.asarray(q), np.asarray(ref)
    if members is not None:
        q, ref = q[members], ref[members]
    return float(np.max(np.abs(q - ref)))


def _rel(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _fd_check(traj, u, grad, eps=FD_EPS):
    """(g . d, central difference of L along d, relative difference) for a random unit d."""
    d = np.random.default_rng(SEED + 1).standard_normal(u.shape)
    d /= np.linalg.norm(d)

    def loss(v):
        return float(np.sum(traj(v)[-1] ** 2))

    fd = (loss(u + eps * d) - loss(u - eps * d)) / (2 * eps)
    gd = float(np.sum(np.asarray(grad) * d))
    return gd, fd, abs(gd - fd) / abs(fd)


def study(name: str, args) -> dict:
    import jax

    P = problem(name, args.t_end, args.batch)
    h, n, B = P["h"], P["n"], args.batch
    wanted = dict(QUICK_PROGRAMS if args.quick else PROGRAMS)
    if args.extra:
        for label, ps in EXTRA_PROGRAMS.items():
            wanted[label] = wanted.get(label, ()) + ps
    if args.no_grad:
        wanted = {c: tuple(p for p in ps if "grad" not in p) for c, ps in wanted.items()}
    if args.no_batch_grad:
        wanted = {c: tuple(p for p in ps if p != "gradB") for c, ps in wanted.items()}
    if args.rk4_only:
        wanted = {c: ps for c, ps in wanted.items() if c in RK4_CLASS}
    if args.no_implicit_batch:
        wanted = {c: tuple(p for p in ps if p != "fwdB" or c in RK4_CLASS)
                  for c, ps in wanted.items()}  # fmt: skip
    _progress(f"{name}: h = {h}, {n} steps, batch {B}; references (MuJoCo C)")
    ref = mujoco_c(name, "RK4", h, P["controls"], P["qvel"], REF_SUBSTEPS)
    limited = limited_members(name, ref)
    good = [k for k in range(B) if k not in limited]
    sweep = {}
    for integ in ("EULER", "IMPLICITFAST", "RK4"):
        sweep[integ] = {}
        for k in SWEEP:
            q = mujoco_c(name, integ, h, P["controls"][:1], P["qvel"][:1], k)
            sweep[integ][str(h / k)] = _error(q, ref[:1])
    # MJX (limits off) equals MuJoCo C with limits on where no limit acts: checked per class
    c_at_h = {
        i: mujoco_c(name, i, h, P["controls"], P["qvel"]) for i in ("RK4", "EULER", "IMPLICITFAST")
    }

    base, stacked, key_check = jaxmbd_members(name, P["qvel"])
    programs, helpers, records = {}, {}, {}
    for label, ps in wanted.items():
        engine, integ = CONFIGS[label]
        if engine == "jaxmbd":
            calls, help_ = jaxmbd_programs(P, integ, ps, base, stacked)
        else:
            calls, help_ = mjx_programs(P, integ, ps, limits=label.endswith("limits on"))
        helpers[label] = help_
        for prog, fn in calls.items():
            start = time.perf_counter()
            out = jax.block_until_ready(fn())
            first = time.perf_counter() - start
            programs[(label, prog)] = fn
            records[(label, prog)] = dict(first_s=first, out=out)
            _progress(f"{name} {label} {prog}: first call {first:.1f} s")

    # rounds: every program once per round (short ones repeated to ~0.2 s)
    times = {key: [] for key in programs}
    for r in range(args.rounds):
        for key, fn in programs.items():
            if r == 0:
                start = time.perf_counter()
                jax.block_until_ready(fn())
                once = time.perf_counter() - start
                reps = max(1, min(20, int(0.2 / max(once, 1e-4))))
                records[key]["reps"] = reps
            reps = records[key]["reps"]
            start = time.perf_counter()
            for _ in range(reps):
                jax.block_until_ready(fn())
            times[key].append((time.perf_counter() - start) / reps)
        _progress(f"{name}: round {r + 1}/{args.rounds}")

    # accuracy and gradients
    rows = []
    for (label, prog), rec in records.items():
        engine, integ = CONFIGS[label]
        out = rec.pop("out")
        ts = times[(label, prog)]
        med = statistics.median(ts)
        batch = B if prog.endswith("B") else 1
        row = dict(model=name, config=label, engine=engine, integrator=integ, program=prog,
                   h=h, steps=n, batch=batch, run_median_s=med, run_min_s=min(ts),
                   run_max_s=max(ts), rounds=len(ts), reps=rec["reps"],
                   first_call_s=rec["first_s"], compile_s=max(rec["first_s"] - med, 0.0),
                   model_steps_per_s=batch * n / med, us_per_step=1e6 * med / n,
                   wall_per_sim_s=med / P["t_end"])  # fmt: skip
        if prog in ("api1", "fwd1"):
            q = helpers[label]["api_traj"](out) if prog == "api1" else np.asarray(out)
            row["error"] = _error(q, ref[0])
            if engine == "MJX" and not label.endswith("limits on"):
                row["vs_mujoco_c"] = _error(q, c_at_h[integ][0])
            rec["q"] = q
        if prog == "fwdB":
            q = helpers[label]["batch_traj"](out) if engine == "jaxmbd" else np.asarray(out)
            row["error"] = _error(q, ref, good)
            if engine == "MJX":
                row["vs_mujoco_c"] = _error(q, c_at_h[integ], good)
            if engine == "jaxmbd":
                row["batch_path"] = helpers[label]["batch_path"]
            rec["q"] = q
        if prog.startswith("grad"):
            rec["grad"] = np.asarray(out)
            if engine == "jaxmbd":
                row["batch_path"] = helpers[label]["batch_path"] if prog == "gradB" else None
        row["_rec"] = rec
        rows.append(row)

    by = {(r["config"], r["program"]): r for r in rows}
    checks = dict(keyframe_velocity_check=key_check, limited_members=limited,
                  reference=f"MuJoCo C RK4 at h/{REF_SUBSTEPS}", sweep=sweep)  # fmt: skip
    try:
        _gradient_checks(by, helpers, checks, P, good)
    except Exception as err:  # noqa: BLE001  (keep the timings of a long run)
        checks["check_failed"] = f"{type(err).__name__}: {err}"
        _progress(f"{name}: gradient checks failed: {checks['check_failed']}")
    for r in rows:
        r.pop("_rec")
    ratios = _ratios(name, times, by)
    return dict(problem={k: v for k, v in P.items() if k not in ("controls", "qvel")},
                rows=rows, ratios=ratios, checks=checks)  # fmt: skip


def _gradient_checks(by, helpers, checks, P, good):
    # gradients: the engines against each other and against central differences
    for prog in ("grad1", "gradB"):
        a, b = by.get(("jaxmbd rkmk", prog)), by.get(("MJX RK4", prog))
        if a and b:
            ga, gb = a["_rec"]["grad"], b["_rec"]["grad"]
            if prog == "gradB":
                ga, gb = ga[good], gb[good]
            checks[f"{prog}_rel_diff_jaxmbd_vs_mjx"] = _rel(ga, gb)
            checks[f"{prog}_norm_jaxmbd"] = float(np.linalg.norm(ga))
    a, b = by.get(("jaxmbd rkmk", "api1")), by.get(("MJX RK4", "fwd1"))
    if a and b:
        checks["traj_diff_jaxmbd_vs_mjx_rk4"] = _error(a["_rec"]["q"], b["_rec"]["q"])
        checks["traj_rel_final_jaxmbd_vs_mjx_rk4"] = _rel(a["_rec"]["q"][-1], b["_rec"]["q"][-1])
    for label in RK4_CLASS:
        r = by.get((label, "grad1"))
        if r:
            gd, fd, rel = _fd_check(helpers[label]["traj"], P["controls"][0], r["_rec"]["grad"])
            checks[f"fd_{label}"] = dict(g_dot_d=gd, central_difference=fd, rel_diff=rel)


def _ratios(name, times, by):
    """jaxmbd / MJX time ratios (median of the per-round ratios) and each engine's gradient
    time over its forward's (stored in the gradient rows)."""
    ratios = []
    for (ja, jp), (mj, mp) in PAIRS:
        if (ja, jp) in times and (mj, mp) in times:
            per_round = [x / y for x, y in zip(times[(ja, jp)], times[(mj, mp)], strict=True)]
            ratios.append(dict(model=name, jaxmbd=f"{ja} {jp}", mjx=f"{mj} {mp}",
                               ratio=statistics.median(per_round), min=min(per_round),
                               max=max(per_round)))  # fmt: skip
    # gradient cost: grad time over the forward's, per engine
    for label, fwd in (("jaxmbd rkmk", "api1"), ("MJX RK4", "fwd1")):
        for g, f in (("grad1", fwd), ("gradB", "fwdB")):
            if (label, g) in times and (label, f) in times:
                per_round = [x / y for x, y in zip(times[(label, g)], times[(label, f)],
                                                   strict=True)]  # fmt: skip
                by[(label, g)]["grad_over_forward"] = statistics.median(per_round)
        if label == "jaxmbd rkmk" and (label, "grad1") in times and (label, "fwd1") in times:
            per_round = [x / y for x, y in zip(times[(label, "grad1")], times[(label, "fwd1")],
                                               strict=True)]  # fmt: skip
            by[(label, "grad1")]["grad_over_jitted_forward"] = statistics.median(per_round)
    return ratios


# ---------------------------------------------------------------------------- equal accuracy


def _sweep_steps(integ, errors, h):
    """The sweep's steps, less RK4 at h / REF_SUBSTEPS and below (the reference itself)."""
    return [float(k) for k in errors if integ != "RK4" or float(k) > h / REF_SUBSTEPS * 1.001]


def equal_accuracy(result) -> list[dict]:
    """For each jaxmbd single run: the largest MuJoCo C step (h / k of the sweep) at which
    each MuJoCo integrator's error is at most jaxmbd's, and MJX's wall time per simulated
    second there (its measured time per step at h, times 1 / (h / k) steps)."""
    rows = result["rows"]
    sweep = result["checks"]["sweep"]
    h = result["problem"]["h"]
    mjx = {
        r["integrator"]: r
        for r in rows
        if r["engine"] == "MJX" and r["program"] == "fwd1" and "limits" not in r["config"]
    }
    out = []
    for r in rows:
        if r["engine"] != "jaxmbd" or r["program"] != "api1":
            continue
        for integ, errors in sweep.items():
            if integ not in mjx:
                continue
            hs = sorted(_sweep_steps(integ, errors, h), reverse=True)
            # "at least as accurate": within 1 % (RK4 and rkmk agree to rounding here)
            match = next((hk for hk in hs if errors[str(hk)] <= 1.01 * r["error"]), None)
            cost = mjx[integ]["us_per_step"] * 1e-6
            out.append(dict(model=r["model"], jaxmbd=r["config"], jaxmbd_error=r["error"],
                            jaxmbd_wall_per_sim_s=r["wall_per_sim_s"], mujoco=integ,
                            h_needed=match, error_there=None if match is None
                            else errors[str(match)],
                            mjx_wall_per_sim_s=None if match is None else cost / match,
                            smallest_h_error=errors[str(hs[-1])], h=h))  # fmt: skip
    return out


# ---------------------------------------------------------------------------- outputs

PROGRAM_TEXT = {
    "api1": "single, mbd.simulate call",
    "fwd1": "single, jit'd trajectory",
    "fwdB": "batch forward",
    "grad1": "single gradient",
    "gradB": "batch gradient",
}


def _g(x, digits=3):
    return "-" if x is None else f"{x:.{digits}g}"


def report(data, path: Path):
    meta = data["meta"]
    runs = "; ".join(
        f"`{m['command']}` ({m['date']}, {m['elapsed_s'] / 60:.1f} min, load average "
        f"{m['load_start']} at the start, {m['load_end']} at the end)"
        for m in meta.get("runs", [meta])
    )
    lines = [
        "# Control benchmark: jaxmbd against MJX",
        "",
        f"{runs} on {meta['machine']}; MuJoCo {meta['mujoco']}, MJX "
        f"{meta['mjx']}, jaxmbd at {meta['jaxmbd_commit']}; OPENBLAS_NUM_THREADS=1. "
        "Settings, error measure and "
        "timing protocol: the script's docstring. "
        + (meta["note"] + " " if meta.get("note") else "")
        + "Run time = median over "
        f"{meta['rounds']} rounds (each round calls every program; short ones several times "
        "in a row); compile = first call less the median run; ratios jaxmbd/MJX = median "
        "of the per-round ratios (> 1: jaxmbd slower). Error = largest joint-coordinate "
        "difference (rad or m) from MuJoCo C RK4 at h/16 over the run (batch: over the "
        "members that reach no joint limit).",
        "",
    ]
    for name, res in data["results"].items():
        P = res["problem"]
        c = res["checks"]
        lines += [
            f"## {name}",
            "",
            f"h = {P['h']} s (the file's), {P['n']} steps = {P['t_end']:.2f} s, batch "
            f"{meta['batch']}, control amplitude {meta['amplitude'][name]} of the range "
            f"(random, one value per step, seed {SEED}); members reaching a joint limit "
            f"in the reference: {c['limited_members'] or 'none'}; combined initial "
            f"rates against a directly loaded member: {c['keyframe_velocity_check']:.1e}.",
            "",
            "| configuration | program | batch | run (ms) | min-max (ms) | model-steps/s | "
            "µs per model-step | compile (s) | error | MJX vs MuJoCo C | grad / forward |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in res["rows"]:
            ratio = r.get("grad_over_forward")
            extra = r.get("grad_over_jitted_forward")
            gf = "-" if ratio is None else f"{ratio:.1f}"
            if extra is not None:
                gf += f" ({extra:.1f} over the jit'd forward)"
            lines.append(
                f"| {r['config']} | {PROGRAM_TEXT[r['program']]} | {r['batch']} | "
                f"{1e3 * r['run_median_s']:.3g} | {1e3 * r['run_min_s']:.3g}-"
                f"{1e3 * r['run_max_s']:.3g} | {r['model_steps_per_s']:.3g} | "
                f"{1e6 / r['model_steps_per_s']:.3g} | {r['compile_s']:.1f} | "
                f"{_g(r.get('error'), 2)} | {_g(r.get('vs_mujoco_c'), 2)} | {gf} |"
            )
        paths = {r.get("batch_path") for r in res["rows"] if r.get("batch_path")}
        if paths:
            lines += ["", "jaxmbd batch path: " + "; ".join(sorted(paths)) + "."]
        lines += ["", "| jaxmbd | MJX | time ratio jaxmbd/MJX | per-round min-max |",
                  "|---|---|---|---|"]  # fmt: skip
        for q in res["ratios"]:
            lines.append(f"| {q['jaxmbd']} | {q['mjx']} | {q['ratio']:.2f} | "
                         f"{q['min']:.2f}-{q['max']:.2f} |")  # fmt: skip
        lines += ["", "Gradients (RK4 class):", ""]
        if "traj_diff_jaxmbd_vs_mjx_rk4" in c:
            lines.append(f"* trajectories, jaxmbd rkmk against MJX RK4: largest joint "
                         f"difference {c['traj_diff_jaxmbd_vs_mjx_rk4']:.1e}, final state "
                         f"relative {c['traj_rel_final_jaxmbd_vs_mjx_rk4']:.1e}")  # fmt: skip
        for prog in ("grad1", "gradB"):
            key = f"{prog}_rel_diff_jaxmbd_vs_mjx"
            if key in c:
                lines.append(f"* {PROGRAM_TEXT[prog]}: relative difference jaxmbd/MJX "
                             f"{c[key]:.1e} (|g| = {c[f'{prog}_norm_jaxmbd']:.3g})")  # fmt: skip
        for label in RK4_CLASS:
            fd = c.get(f"fd_{label}")
            if fd:
                lines.append(f"* {label}: g·d = {fd['g_dot_d']:.10g}, central difference "
                             f"(eps {FD_EPS:g}) {fd['central_difference']:.10g}, relative "
                             f"{fd['rel_diff']:.1e}")  # fmt: skip
        eq = res.get("equal_accuracy", [])
        if eq:
            lines += [
                "",
                "Equal accuracy: the largest step h/k (k = "
                + ", ".join(str(k) for k in SWEEP)
                + ") at which MuJoCo's integrator (MuJoCo C, which MJX equals: column 'MJX "
                "vs MuJoCo C') is at least as accurate as jaxmbd's run at h, and MJX's wall "
                "time per simulated second there (its single-run time per step at h times "
                "the steps).",
                "",
                "| jaxmbd (h) | error | wall/sim s | MuJoCo | step needed | its error | MJX "
                "wall/sim s there | jaxmbd/MJX |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for e in eq:
                if e["h_needed"] is None:
                    need = f"none down to h/{SWEEP[-1]} ({e['smallest_h_error']:.1e})"
                    lines.append(f"| {e['jaxmbd']} | {e['jaxmbd_error']:.1e} | "
                                 f"{e['jaxmbd_wall_per_sim_s']:.3g} | {e['mujoco']} | {need} "
                                 "| - | - | - |")  # fmt: skip
                    continue
                lines.append(
                    f"| {e['jaxmbd']} | {e['jaxmbd_error']:.1e} | "
                    f"{e['jaxmbd_wall_per_sim_s']:.3g} | {e['mujoco']} | "
                    f"{e['h_needed']:.3g} | {e['error_there']:.1e} | "
                    f"{e['mjx_wall_per_sim_s']:.3g} | "
                    f"{e['jaxmbd_wall_per_sim_s'] / e['mjx_wall_per_sim_s']:.2f} |"
                )
            lines += ["", "MuJoCo C error against h (member 0):", "",
                      "| integrator | " + " | ".join(f"h/{k}" for k in SWEEP) + " |",
                      "|---|" + "---|" * len(SWEEP)]  # fmt: skip
            for integ, errors in c["sweep"].items():
                cells = [
                    "(the reference)"
                    if integ == "RK4" and k == REF_SUBSTEPS
                    else f"{errors[str(P['h'] / k)]:.1e}"
                    for k in SWEEP
                ]
                lines.append(f"| {integ} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Reading", "", *reading(data), ""]
    path.write_text("\n".join(lines))


def reading(data) -> list[str]:
    """Data-driven sentences: where jaxmbd is slower or faster, by how much."""
    out = []
    for name, res in data["results"].items():
        for q in res["ratios"]:
            word = "slower" if q["ratio"] > 1 else "faster"
            factor = q["ratio"] if q["ratio"] > 1 else 1 / q["ratio"]
            out.append(f"* {name}: {q['jaxmbd']} is {factor:.1f}x {word} than {q['mjx']}.")
        rows = {(r["config"], r["program"]): r for r in res["rows"]}
        for prog in ("grad1", "gradB"):
            a, b = rows.get(("jaxmbd rkmk", prog)), rows.get(("MJX RK4", prog))
            if a and b and "grad_over_forward" in a and "grad_over_forward" in b:
                out.append(
                    f"* {name}: {PROGRAM_TEXT[prog]} costs {a['grad_over_forward']:.1f} "
                    f"forward runs in jaxmbd, {b['grad_over_forward']:.1f} in MJX."
                )
        a, b = rows.get(("jaxmbd gen_alpha", "api1")), rows.get(("MJX Euler", "fwd1"))
        if a and b:
            word = "more" if a["error"] < b["error"] else "less"
            out.append(
                f"* {name}: at h = {a['h']} jaxmbd gen_alpha is {word} accurate than MJX Euler "
                f"(error {a['error']:.1e} against {b['error']:.1e})."
            )
        comp = [(r["config"], r["program"], r["compile_s"]) for r in res["rows"]]
        j = sum(c for cfg, _, c in comp if cfg.startswith("jaxmbd"))
        m = sum(c for cfg, _, c in comp if cfg.startswith("MJX"))
        out.append(f"* {name}: compile time summed over the programs: jaxmbd {j:.0f} s, "
                   f"MJX {m:.0f} s.")  # fmt: skip
    out += ["", *READING]
    return out


#: the explanation of the measured differences (profiling; see the report of the run that
#: produced the committed results)
READING = [
    "Why jaxmbd is slower per step (code reading and traced program sizes, not a profile):",
    "",
    "* Coordinates. jaxmbd integrates absolute coordinates: each RK4 stage solves the index-1 "
    "KKT system of 6 nb + nc unknowns (cartpole 22, inverted double pendulum 33) by a "
    "row-equilibrated LU with a pivot-ratio condition check; MuJoCo factors its nv x nv "
    "mass matrix (2 and 3) in reduced coordinates. The traced step (jax.make_jaxpr of the "
    "scan body, cartpole) holds 13.5k primitives with 5 LU factorisations for rkmk against "
    "10.2k for MJX RK4.",
    "* Controls cost rkmk one solve per step. With controls, the first stage is recomputed "
    "with the step's new controls (the first-same-as-last acceleration carried from the "
    "previous step used the old ones), and the end-of-step solve (for sol.a and that carry) "
    "is then used only for the output: 5 factorisations per step where RK4 needs 4. A cheap "
    "saving when controls or a policy are given: skip the end-of-step solve and report the "
    "accelerations from the next step's first stage (jaxmbd/integrators/munthe_kaas.py, "
    "not changed here).",
    "* Batches. Under vmap jaxmbd's dense LU runs member by member (lax.map of LAPACK getrf, "
    "because jaxlib's batched getrf deadlocked on the CPU: jaxmbd/linear/dense.py), so a "
    "batch of 256 makes 256 x 5 small LAPACK calls per step one after another, while MJX's "
    "small factorisations are vectorised array code: the batch ratio is larger than the "
    "single one. A vectorised LU for small systems (elimination unrolled over the batch "
    "axis) would address it; not a small change.",
    "* Implicit class. gen_alpha's large error at h = 0.01 is not analysed here; the likely "
    "cause: controls that switch at every step cost it an order at each switch (it carries "
    "its acceleration across steps, docs/guide/actuators.md). It also runs "
    "Newton iterations at every step (about 5 here, each with the Newton matrix's solve): at "
    "the files' h = 0.01 it is no more accurate than MuJoCo's semi-implicit Euler on these "
    "driven, unstable pendulums (the falling double pendulum amplifies any step error) and "
    "far slower. For these models jaxmbd's choice is rkmk.",
    "* Compile time. Every jaxmbd program contains the consistent initial state (Newton "
    "solves for positions, velocities, accelerations and multipliers) and the Solution's "
    "outputs besides the step: the cartpole forward traces 26k primitives, 12.6k of them "
    "outside the scan, against MJX's 10.2k; the gradient programs add the implicit-function "
    "adjoints of every solve. XLA's CPU compile time grows with the program.",
]


def plot(data, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["results"])
    fig, axes = plt.subplots(2, len(names), figsize=(6.5 * len(names), 9), squeeze=False)
    for col, name in enumerate(names):
        res = data["results"][name]
        ax = axes[0, col]
        rows = res["rows"]
        labels = [f"{r['config']}\n{PROGRAM_TEXT[r['program']]}" for r in rows]
        colours = ["tab:blue" if r["engine"] == "jaxmbd" else "tab:orange" for r in rows]
        ax.barh(range(len(rows)), [r["model_steps_per_s"] for r in rows], color=colours)
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("model-steps/s (gradients: model-steps of the forward per second)")
        ax.set_title(f"{name}: throughput (blue jaxmbd, orange MJX)")
        ax = axes[1, col]
        h = res["problem"]["h"]
        for r in rows:
            if r["program"] in ("api1", "fwd1") and r.get("error") is not None:
                marker = "o" if r["engine"] == "jaxmbd" else "s"
                ax.loglog(r["wall_per_sim_s"], r["error"], marker, label=r["config"]
                          + (" (jit'd)" if r["program"] == "fwd1" and r["engine"] == "jaxmbd"
                             else ""))  # fmt: skip
        mjx = {r["integrator"]: r for r in rows if r["engine"] == "MJX"
               and r["program"] == "fwd1" and "limits" not in r["config"]}  # fmt: skip
        for integ, errors in res["checks"]["sweep"].items():
            if integ in mjx:
                hs = sorted(_sweep_steps(integ, errors, h))
                cost = mjx[integ]["us_per_step"] * 1e-6
                ax.loglog([cost / hk for hk in hs], [errors[str(hk)] for hk in hs], ":",
                          label=f"MJX {integ} at h/k (cost per step at h)")  # fmt: skip
        ax.set_xlabel("wall time per simulated second, single model (s)")
        ax.set_ylabel("largest joint error (rad or m)")
        ax.set_title(f"{name}: work-precision (h = {h})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(json_path: Path):
    data = json.loads(json_path.read_text())
    plot(data, json_path.with_suffix(".png"))
    report(data, json_path.with_suffix(".md"))


def merge(paths, out: Path, note: str | None = None):
    """One results file from runs of single models (``--models`` in separate processes):
    their results side by side, each run's meta kept (``runs``)."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    results = {}
    for run in runs:
        results.update(run["results"])
    meta = dict(runs[0]["meta"], runs=[run["meta"] for run in runs], note=note)
    out.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
    write_outputs(out)


def _versions():
    import subprocess

    import mujoco

    try:
        from importlib.metadata import version

        mjx_version = version("mujoco-mjx")
    except Exception:  # noqa: BLE001
        mjx_version = "?"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "jaxmbd"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return mujoco.__version__, mjx_version, commit + (" (jaxmbd/ with uncommitted edits)"
                                                      if dirty else "")  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-grad", action="store_true", help="forward programs only")
    parser.add_argument(
        "--extra",
        action="store_true",
        help="also backward_euler, MJX implicitfast and RK4 with limits, jaxmbd's jit'd forward",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (module docstring)")
    parser.add_argument("--no-batch-grad", action="store_true", help="no batch gradients")
    parser.add_argument("--no-implicit-batch", action="store_true",
                        help="no batch runs of gen_alpha and MJX Euler")  # fmt: skip
    parser.add_argument("--rk4-only", action="store_true",
                        help="only the RK4 class (jaxmbd rkmk, MJX RK4)")  # fmt: skip
    parser.add_argument("--out", default=str(OUT), help="folder of the json, md and png")
    parser.add_argument("--note", help="a sentence for the merged report's header")
    parser.add_argument(
        "--from-json",
        nargs="+",
        help="redraw the plot and report of a "
        "results file; several: merged into --out's bench_control.json",
    )
    args = parser.parse_args(argv)
    if args.from_json and len(args.from_json) == 1:
        write_outputs(Path(args.from_json[0]))
        return
    if args.from_json:
        merge(args.from_json, Path(args.out) / "bench_control.json", args.note)
        return
    try:
        from mujoco import mjx  # noqa: F401
    except Exception as err:  # noqa: BLE001
        print(f"bench_control: MJX is not available ({type(err).__name__}: {err}); "
              "pip install mujoco-mjx. Skipped.")  # fmt: skip
        return
    import jax

    jax.config.update("jax_enable_x64", True)  # jaxmbd's precision, for both engines
    if args.quick:
        args.models, args.t_end, args.batch, args.rounds = ["cartpole"], 0.2, 8, 2
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    results = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "bench_control_quick" if args.quick else "bench_control"
    for name in args.models:
        results[name] = study(name, args)
        results[name]["equal_accuracy"] = equal_accuracy(results[name])
        _write(out / f"{stem}.json", args, argv, start, load_start, results)
    _write(out / f"{stem}.json", args, argv, start, load_start, results)
    write_outputs(out / f"{stem}.json")
    print(f"wrote {out / stem}.{{json,md,png}} in {(time.perf_counter() - start) / 60:.1f} min")


def _write(path, args, argv, start, load_start, results):
    """The results so far (after each model: a later failure keeps them)."""
    from benchmarks._harness import machine

    elapsed = time.perf_counter() - start
    mujoco_version, mjx_version, commit = _versions()
    meta = dict(command=command(),
                machine=machine(), date=time.strftime("%Y-%m-%d %H:%M"), elapsed_s=elapsed,
                mujoco=mujoco_version, mjx=mjx_version, jaxmbd_commit=commit,
                batch=args.batch, rounds=args.rounds, t_end=args.t_end, quick=args.quick,
                amplitude=AMPLITUDE, load_start=f"{load_start:.1f}",
                load_end=f"{os.getloadavg()[0]:.1f}", extra=args.extra)  # fmt: skip
    path.write_text(json.dumps(dict(meta=meta, results=results), indent=1))


if __name__ == "__main__":
    main()
