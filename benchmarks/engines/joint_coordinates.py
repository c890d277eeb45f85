"""jaxmbd's joint-coordinate formulation against MJX and MuJoCo C on robot files:
single-model steps/s, batch model-steps/s, gradient time, compile time and the error
against MuJoCo C RK4 at h/100.

    python -m benchmarks.engines joint-coordinates [--engines jaxmbd mjx mujoco]
        [--models double_pendulum arm3 cartpole acrobot humanoid hopper]
        [--steps 1000] [--batch 256] [--repeats 5] [--batch-repeats 3]
        [--mjx-python /work/venvs/mjx/bin/python] [--contact-batch] [--report-only]

``--engines`` chooses what runs; the rows of the engines that do not run are kept from the
last run's ``joint_coordinates.json`` (each row names the run it comes from), so
``--engines jaxmbd`` reruns only jaxmbd's rows beside the kept MJX and MuJoCo C rows.

Files (each engine reads the same one, written by ``mujoco.MjSpec`` with its initial state
as keyframe 0 and the sensors removed, which do not change the dynamics and which MJX
partly lacks): ``double_pendulum`` (engines/classic.py's, h = 1e-3, from horizontal at
rest), ``arm3`` (tests/data/arm3.xml, h = 1e-3, its keyframe ``swing``), dm_control's
``cartpole`` (h = 0.01 as authored, pole 0.3 rad, cart 0.2 m/s), ``acrobot`` (h = 0.01 as
authored, q = (0.5, -0.3) rad, qdot = (0.2, 0) rad/s) and ``humanoid`` (h = 0.005 as
authored, qpos0, joint rates uniform in +-0.3, seed 1): RK4, contacts and constraints
(joint limits) off, energy flag off (MJX refuses it); dm_control's ``hopper``: contacts,
limits, integrator (Euler) and step (0.005 s) as authored, falling from qpos0 onto the
floor (up to 5 contacts). dm_control's files are read from the installed package.

Engines (float64 everywhere, ``--steps`` steps from the initial state):

* jaxmbd: ``mbd.simulate(model, formulation="joint", integrator="rkmk", limits="none",
  t_end, h)`` (MuJoCo's RK4 from 4.0: the Munthe-Kaas step on ball and free joints)
  with ``sol.qpos`` in MuJoCo's layout (the hopper: the default integrator and the limits
  as authored; jaxmbd's loader keeps joint limits under MuJoCo's disabled
  constraint flag, so ``limits="none"`` matches MJX and the reference), inside
  ``jax.jit`` (``mbd.jit``) as a function of the initial joint rates; batch
  ``jit(vmap(...))``. When the formulation is missing or fails, the row says so.
* MJX (``mujoco-mjx``): ``jit`` of ``lax.scan`` over ``mjx.step``, batch
  ``jit(vmap(...))``, in a child process with MJX's own virtual environment
  (``--mjx-python``; ``python -m venv /work/venvs/mjx && /work/venvs/mjx/bin/pip install
  mujoco-mjx``) so that jaxmbd's environment is not changed; ``jax_enable_x64`` on; the
  child gets this process's environment (XLA_FLAGS included).
* MuJoCo C: ``mujoco.rollout`` (``mj_step`` in C, one thread) of one state (steps/s) and
  of the batch (model-steps/s): a reference row, no compile, no gradient.

Programs: *single*: initial qvel (nv,) -> final qpos; *plain*: the call a user writes,
``mbd.simulate(model, ...)`` on the file's model (its initial rates set) without
``jax.jit``, timed in the same alternating rounds as *single* (its first call includes
everything a fresh process compiles; its final qpos must equal the single run's); *batch*:
``--batch`` members that differ in their initial joint rates (member 0 the single run, the
others +-0.5 uniform, seed 0); *gradient*: ``jax.grad`` of |qpos(T)|^2 with respect to the
initial qvel, checked against a central difference of MuJoCo C's own run at the same h and
integrator (eps 1e-6, a random unit direction). Each program's first call (trace + compile
+ run) is timed apart from the median of ``--repeats`` later calls (batch ``--batch-
repeats``): compile = first less the median; jaxmbd's single run and gradient are timed in
alternating rounds, so that their ratio is measured at one load. jaxmbd's persistent
compilation cache is off (``JAXMBD_NO_COMPILATION_CACHE=1``, unless set otherwise), so
compile figures are compiles. The hopper (contact): single-model steps/s only (``--contact-
batch`` adds the batch: MJX's vmap of 256 hoppers ran slower per model than one hopper, 2.6
min a call).

Error: largest difference of the final qpos from MuJoCo C RK4 at h/100 (same file, contacts
and limits off), rad or m (the free joint's quaternion compared as numbers); beside it the
difference from MuJoCo C at the same h and integrator (the implementation's share, without
the truncation error, which dominates on the chaotic acrobot).

Writes benchmarks/results/joint_coordinates.{md,json}.
"""

from __future__ import annotations

import os

# before jaxmbd is imported (the harness imports it): compile times are compiles
os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks._harness import (  # noqa: E402
    RESULTS,
    Timing,
    footer,
    interleaved,
    log,
    machine,
    provenance,
    time_call,
    write_results,
)
from benchmarks.problems import ARM3  # noqa: E402

MODELS = ("double_pendulum", "arm3", "cartpole", "acrobot", "humanoid", "hopper")
ENGINES = ("jaxmbd", "mjx", "mujoco")
ENGINE_NAMES = {"jaxmbd": "jaxmbd joint", "mjx": "MJX", "mujoco": "MuJoCo C"}
#: models run with contacts as authored (steps/s only)
WITH_CONTACT = ("hopper",)
MJX_PYTHON = "/work/venvs/mjx/bin/python"
STEM = "joint_coordinates"
REF_DIVISOR = 100  # the reference runs at h / REF_DIVISOR
QVEL_SPREAD = 0.5
FD_EPS = 1e-6
SEED = 0
WORKER = Path(__file__).resolve().parent / "_mjx_worker.py"


# ---------------------------------------------------------------------------- the files


def dm_control_path(name: str) -> Path:
    """dm_control's suite file ``name``.xml, from the installed package."""
    import dm_control

    return Path(dm_control.__file__).parent / "suite" / f"{name}.xml"


def model_file(name: str, tmp: Path) -> dict:
    """The model's MJCF with its initial state as keyframe 0, written to ``tmp``."""
    import mujoco

    rng = np.random.default_rng(1)
    if name == "double_pendulum":
        from benchmarks.engines.in_mujoco import double_pendulum_xml

        spec, h = mujoco.MjSpec.from_string(double_pendulum_xml(1e-3, "RK4")), 1e-3
    elif name == "arm3":
        spec, h = mujoco.MjSpec.from_file(str(ARM3)), 1e-3
    elif name in ("cartpole", "acrobot", "humanoid", "hopper"):
        spec = mujoco.MjSpec.from_file(str(dm_control_path(name)))
        h = spec.option.timestep
    else:
        raise ValueError(f"unknown model {name!r}; choose from {MODELS}")
    contact = name in WITH_CONTACT
    spec.option.timestep = h
    spec.option.enableflags = 0  # MJX refuses the energy flag; the energy is unused
    if not contact:
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
        spec.option.disableflags |= (
            mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
        )
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    m = spec.compile()
    q0, v0 = m.qpos0.copy(), np.zeros(m.nv)
    if name == "arm3":
        key = m.key("swing")
        q0, v0 = np.array(key.qpos), np.array(key.qvel)
    elif name == "cartpole":
        q0, v0 = np.array([0.0, 0.3]), np.array([0.2, 0.0])
    elif name == "acrobot":
        q0, v0 = np.array([0.5, -0.3]), np.array([0.2, 0.0])
    elif name == "humanoid":
        v0 = 0.3 * rng.uniform(-1.0, 1.0, m.nv)
    for _ in range(len(spec.keys)):  # the file's own keys go; keyframe 0 is the start
        spec.delete(spec.keys[0])
    key = spec.add_key()  # named: MjSpec.to_xml leaves out an unnamed key at the defaults
    key.name, key.qpos, key.qvel = "start", q0, v0
    path = tmp / f"{name}.xml"
    path.write_text(spec.to_xml())
    m = mujoco.MjModel.from_xml_path(str(path))
    joints = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    return dict(
        name=name,
        path=str(path),
        joints=joints,
        q0=q0,
        v0=v0,
        h=float(h),
        contact=contact,
        integrator=mujoco.mjtIntegrator(m.opt.integrator).name.removeprefix("mjINT_"),
        nq=m.nq,
        nv=m.nv,
    )


# ---------------------------------------------------------------------------- MuJoCo C


def _states(m, q0, qvel):
    import mujoco

    d = mujoco.MjData(m)
    what = mujoco.mjtState.mjSTATE_FULLPHYSICS
    out = []
    for v in np.atleast_2d(qvel):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = q0, v
        s = np.zeros(mujoco.mj_stateSize(m, what))
        mujoco.mj_getState(m, d, s, what)
        out.append(s)
    return np.array(out), d


def mujoco_final_qpos(F: dict, qvel: np.ndarray, n: int, h: float) -> np.ndarray:
    """MuJoCo C's final qpos (B, nq) after ``n`` steps of ``h`` from (q0, qvel[b])."""
    import mujoco
    from mujoco import rollout

    m = mujoco.MjModel.from_xml_path(F["path"])
    m.opt.timestep = h
    states, d = _states(m, F["q0"], qvel)
    final = []
    for s in states:  # one at a time: the trajectory of n = 1e5 steps is kept in memory
        out, _ = rollout.rollout(m, d, s[None], nstep=n)
        final.append(out[0, -1, 1 : 1 + m.nq])
    return np.array(final)


def run_mujoco(F: dict, qvel: np.ndarray, n: int, args) -> dict:
    """MuJoCo C's steps/s (one state) and model-steps/s (the batch), one thread."""
    import mujoco
    from mujoco import rollout

    m = mujoco.MjModel.from_xml_path(F["path"])
    states, d = _states(m, F["q0"], qvel)
    one = states[:1]
    res = dict(integrator=F["integrator"])
    log(f"{F['name']} MuJoCo C: single")
    res["single"] = _timing(
        time_call(lambda: rollout.rollout(m, d, one, nstep=n), repeats=args.repeats)
    )
    res["qpos_final"] = rollout.rollout(m, d, one, nstep=n)[0][0, -1, 1 : 1 + m.nq]
    if F["batch"]:
        log(f"{F['name']} MuJoCo C: batch {len(states)}")
        res["batch"] = _timing(
            time_call(lambda: rollout.rollout(m, d, states, nstep=n), repeats=args.batch_repeats)
        )
    for key in ("single", "batch"):
        if key in res:
            res[key]["compile_s"] = None  # nothing to compile
    return res


def _timing(t) -> dict:
    return dict(
        first_s=t.first,
        median_s=t.median,
        min_s=t.spread[0],
        max_s=t.spread[1],
        compile_s=t.compile,
    )


def fd_reference(F: dict, v0: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """A random unit direction d and the central difference of |qpos(T)|^2 along d, both
    from MuJoCo C at the file's h and integrator (the function the gradients differentiate)."""
    d = np.random.default_rng(SEED + 1).standard_normal(v0.shape[0])
    d /= np.linalg.norm(d)
    q = mujoco_final_qpos(F, np.stack([v0 + FD_EPS * d, v0 - FD_EPS * d]), n, F["h"])
    return d, float((np.sum(q[0] ** 2) - np.sum(q[1] ** 2)) / (2 * FD_EPS))


# ---------------------------------------------------------------------------- MJX


def run_mjx(files: list[dict], n: int, args) -> dict:
    """MJX's results per model from the child process in MJX's environment; every model
    says why when the child could not run it (``failed``)."""
    python = Path(args.mjx_python)
    if not python.exists():
        why = f"not installed ({python} missing: see the module docstring)"
        return {F["name"]: dict(failed=why) for F in files}
    with tempfile.TemporaryDirectory() as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec = dict(
            repeats=args.repeats,
            models=[
                dict(
                    name=F["name"],
                    path=F["path"],
                    q0=F["q0"].tolist(),
                    qvel=F["qvel"].tolist(),
                    n=n,
                    grad=not args.no_grad and not F["contact"],
                    batch=F["batch"],
                    batch_repeats=args.batch_repeats,
                )
                for F in files
            ],
        )
        spec_file.write_text(json.dumps(spec))
        log(f"MJX child: {python}")
        proc = subprocess.run([str(python), str(WORKER), str(spec_file), str(out_file)])
        out = json.loads(out_file.read_text()) if out_file.exists() else {"models": {}}
    why = f"the MJX process stopped (exit {proc.returncode}) before this model"
    results = {F["name"]: out["models"].get(F["name"], dict(failed=why)) for F in files}
    for r in results.values():
        r["versions"] = out.get("versions")
        r["x64"] = out.get("x64")
    return results


# ---------------------------------------------------------------------------- jaxmbd

#: names the joint formulation's model may give its initial joint rates
QVEL_FIELDS = ("qvel0", "qvel", "qdot0", "v0")


def _jaxmbd_with_qvel(F: dict):
    """A function of the initial joint rates (nv,) to jaxmbd's model of the file. A model
    with a kinematic tree read from the file gets its ``tree.qvel_init`` set (what the joint
    formulation starts from); one with a joint-rate field (``QVEL_FIELDS``), that field;
    otherwise its body velocities, linear in the joint rates at the fixed pose, are
    combined from the models of keyframes qvel = e_i (as in jax_peers.py)."""
    import warnings

    import equinox as eqx
    import jax.numpy as jnp
    import mujoco

    import jaxmbd as mbd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the importer's notes on unused MJCF features
        base = mbd.load_model(F["path"], keyframe=0)
    tree = getattr(base, "tree", None)  # a model read from its file: MuJoCo's joint rates
    if tree is not None and np.shape(getattr(tree, "qvel_init", None)) == (F["nv"],):
        return lambda v: eqx.tree_at(lambda mo: mo.tree.qvel_init, base, v)
    for field in QVEL_FIELDS:
        if hasattr(base, field) and np.shape(getattr(base, field)) == (F["nv"],):
            return lambda v, f=field: eqx.tree_at(lambda mo: getattr(mo, f), base, v)
    spec = mujoco.MjSpec.from_file(F["path"])
    for i in range(F["nv"]):
        key = spec.add_key()
        key.name, key.qpos, key.qvel = f"rate_{i}", F["q0"], np.eye(F["nv"])[i]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        file = Path(tmp) / "basis.xml"
        file.write_text(spec.to_xml())
        loaded = [mbd.load_model(file, keyframe=k + 1) for k in range(F["nv"])]
    basis_v = jnp.stack([jnp.asarray(x.rdot0) for x in loaded])
    basis_w = jnp.stack([jnp.asarray(x.omega0) for x in loaded])

    def with_qvel(v):
        rdot = jnp.einsum("i,ibk->bk", v, basis_v)
        omega = jnp.einsum("i,ibk->bk", v, basis_w)
        return eqx.tree_at(lambda mo: (mo.rdot0, mo.omega0), base, (rdot, omega))

    return with_qvel


def _qpos(sol, joints):
    """``sol.qpos`` (MuJoCo's layout); a solution without it (the absolute formulations'
    today, used to check this harness): its joints' coordinates in the file's order, which
    is qpos for hinge and slide joints."""
    import jax.numpy as jnp

    if hasattr(sol, "qpos"):
        return jnp.asarray(sol.qpos)
    return jnp.stack([sol.joints[k].q for k in joints], axis=-1)


def _message(err: Exception) -> str:
    """One line for a table: equinox's runtime errors carry their stack first, their
    message last."""
    lines = [x.strip() for x in str(err).splitlines() if x.strip().strip("-")]
    text = next((x for x in reversed(lines) if "jaxmbd:" in x), lines[0] if lines else "")
    return f"{type(err).__name__}: {text}"[:240]


def run_jaxmbd(F: dict, n: int, args) -> dict:
    """jaxmbd's joint formulation: the three programs; ``failed`` with the reason when the
    single run fails (the formulation is not there, or cannot run the file), a ``notes``
    entry when the batch or the gradient alone fails."""
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd

    integrator = None if F["contact"] else args.jaxmbd_integrator
    res: dict = dict(integrator=integrator or "default", notes=[])
    if args.jaxmbd_formulation != "joint":
        res["label"] = f"jaxmbd {args.jaxmbd_formulation} (harness check)"
    opts = dict(formulation=args.jaxmbd_formulation, t_end=n * F["h"], h=F["h"])
    if integrator:
        opts["integrator"] = integrator
    if not F["contact"]:  # MuJoCo's constraint flag off: jaxmbd's loader keeps the limits
        opts["limits"] = "none"
    jit = getattr(mbd, "jit", jax.jit)
    qvel = jnp.asarray(F["qvel"])

    def attempt(what, program):
        try:
            log(f"{F['name']} jaxmbd: {what}")
            program()
            return True
        except Exception as err:  # the formulation is missing, or fails on this file
            traceback.print_exc(limit=-3)
            message = _message(err)
            if what == "single":
                res["failed"] = f"not available: {message}"
            else:
                res["notes"].append(f"{what} failed: {message}")
            return False

    calls, firsts = {}, {}

    def first_call(name, fn):
        """``fn()``, timed as the program's first call (trace, compile and one run)."""
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        firsts[name], calls[name] = time.perf_counter() - start, fn
        return out

    def single_program():
        with_qvel = _jaxmbd_with_qvel(F)

        def final_qpos(v):
            return _qpos(mbd.simulate(with_qvel(v), **opts), F["joints"])[-1]

        single = jit(final_qpos)
        res["qpos_final"] = np.asarray(first_call("single", lambda: single(qvel[0])))
        res["final_qpos"] = final_qpos

    def plain_program():
        # the call a user writes: simulate on the file's model, no jax.jit around it (the
        # initial rates set on the model first, as a user's model holds its own)
        model = jax.block_until_ready(_jaxmbd_with_qvel(F)(qvel[0]))

        def plain():
            return _qpos(mbd.simulate(model, **opts), F["joints"])[-1]

        q = np.asarray(first_call("plain", plain))
        res["plain_matches_jit"] = float(np.max(np.abs(q - res["qpos_final"])))

    def grad_program():
        f = res["final_qpos"]
        grad = jit(jax.grad(lambda v: jnp.sum(f(v) ** 2)))
        res["gradient"] = np.asarray(first_call("grad", lambda: grad(qvel[0])))

    def batch_program():
        batch = jit(jax.vmap(res["final_qpos"]))
        res["batch"] = _timing(time_call(lambda: batch(qvel), repeats=args.batch_repeats))

    if attempt("single", single_program):
        attempt("plain call", plain_program)
        if not args.no_grad and not F["contact"]:
            attempt("gradient", grad_program)
        # the single run and the gradient in alternating rounds: their ratio is one load's
        for name, t in interleaved(calls, repeats=args.repeats).items():
            res[name] = _timing(Timing(firsts[name], t.median, t.spread))
        if F["batch"]:
            attempt(f"batch {qvel.shape[0]}", batch_program)
    res.pop("final_qpos", None)
    jax.clear_caches()
    return res


# ---------------------------------------------------------------------------- the rows


def row(F: dict, engine: str, r: dict, n: int, batch: int, ref, fd, run: str) -> dict:
    """The table row of one engine's raw results on one model."""
    out = dict(
        model=F["name"],
        engine=r.get("label", ENGINE_NAMES[engine]),
        integrator=r.get("integrator"),
        h=F["h"],
        steps=n,
        run=run,
    )
    if "failed" in r:
        out["note"] = r["failed"]
        return out
    if r.get("notes"):
        out["note"] = "; ".join(r["notes"])
    t = {k: r[k] for k in ("single", "plain", "batch", "grad") if k in r}
    out["single_steps_per_s"] = n / t["single"]["median_s"]
    if "plain" in t:
        out["plain_steps_per_s"] = n / t["plain"]["median_s"]
        out["plain_over_jit"] = t["plain"]["median_s"] / t["single"]["median_s"]
        out["plain_first_s"] = t["plain"]["first_s"]
        out["plain_matches_jit"] = r.get("plain_matches_jit")
    if "batch" in t:
        out["batch_model_steps_per_s"] = batch * n / t["batch"]["median_s"]
    if "grad" in t:
        out["grad_ms"] = 1e3 * t["grad"]["median_s"]
        out["grad_over_forward"] = t["grad"]["median_s"] / t["single"]["median_s"]
    for k in ("single", "batch", "grad"):
        if k in t and t[k].get("compile_s") is not None:
            out[f"compile_{k}_s"] = t[k]["compile_s"]
    if ref is not None:
        q = np.asarray(r["qpos_final"])
        out["error"] = float(np.max(np.abs(q - ref[0])))
        out["diff_mujoco_same_h"] = float(np.max(np.abs(q - ref[1])))
    out["qpos_final"] = np.asarray(r["qpos_final"]).tolist()
    if fd is not None and "gradient" in r:
        d, central = fd
        gd = float(np.dot(np.asarray(r["gradient"]), d))
        out["grad_check"] = abs(gd - central) / abs(central)
    out["timings"] = t
    return out


def collect(args) -> dict:
    import jax
    import mujoco

    prov = provenance()
    load_start = os.getloadavg()
    run = f"{prov['date']}, {prov['commit']}, load {load_start[0]:.1f}"
    log(f"load {load_start}; jax {jax.__version__}, devices {jax.devices()}")
    n = args.steps
    tmp = Path(tempfile.mkdtemp(prefix="joint_coordinates_"))
    files, refs, fds = [], {}, {}
    for name in args.models:
        F = model_file(name, tmp)
        rng = np.random.default_rng(SEED)
        qvel = F["v0"] + QVEL_SPREAD * rng.uniform(-1, 1, size=(args.batch, F["nv"]))
        qvel[0] = F["v0"]
        F["qvel"] = qvel
        F["batch"] = not args.no_batch and (not F["contact"] or args.contact_batch)
        files.append(F)
        if not F["contact"]:
            log(f"{name}: MuJoCo C reference (RK4, h = {F['h'] / REF_DIVISOR:g})")
            fine = mujoco_final_qpos(F, F["v0"][None], n * REF_DIVISOR, F["h"] / REF_DIVISOR)
            refs[name] = (fine[0], mujoco_final_qpos(F, F["v0"][None], n, F["h"])[0])
            if not args.no_grad:
                fds[name] = fd_reference(F, F["v0"], n)
    raw: dict[str, dict[str, dict]] = {F["name"]: {} for F in files}
    if "mujoco" in args.engines:
        for F in files:
            raw[F["name"]]["mujoco"] = run_mujoco(F, F["qvel"], n, args)
    mjx_versions = None
    if "mjx" in args.engines:
        for name, r in run_mjx(files, n, args).items():
            raw[name]["mjx"] = r
            mjx_versions = r.get("versions") or mjx_versions
    if "jaxmbd" in args.engines:
        for F in files:
            raw[F["name"]]["jaxmbd"] = run_jaxmbd(F, n, args)
    rows = []
    for F in files:
        for engine in ENGINES:
            if engine in raw[F["name"]]:
                rows.append(
                    row(
                        F,
                        engine,
                        raw[F["name"]][engine],
                        n,
                        args.batch,
                        refs.get(F["name"]),
                        fds.get(F["name"]),
                        run,
                    )
                )
    return dict(
        rows=rows,
        meta=dict(
            provenance=prov,
            load_start=list(load_start),
            load_end=list(os.getloadavg()),
            machine=machine(),
            mujoco=mujoco.__version__,
            mjx=mjx_versions,
            xla_flags=os.environ.get("XLA_FLAGS", ""),
            jaxmbd_cache="off" if os.environ.get("JAXMBD_NO_COMPILATION_CACHE") == "1" else "on",
            engines=list(args.engines),
            models=list(args.models),
            steps=n,
            batch=args.batch,
            repeats=args.repeats,
            batch_repeats=args.batch_repeats,
            files={
                F["name"]: dict(
                    h=F["h"],
                    integrator=F["integrator"],
                    contact=F["contact"],
                    nq=F["nq"],
                    nv=F["nv"],
                    q0=F["q0"].tolist(),
                    v0=F["v0"].tolist(),
                )
                for F in files
            },
        ),
    )


def merge_kept(data: dict, previous: dict) -> None:
    """Rows of ``previous`` (the last run's JSON) for (model, engine) pairs this run did not
    make, kept in ``data`` with their own run's label (``run``)."""
    made = {(r["model"], r["engine"]) for r in data["rows"]}
    setting = ("steps", "batch")
    if any(previous.get("meta", {}).get(k) != data["meta"][k] for k in setting):
        log("the last run used other steps or another batch: its rows are not kept")
        return
    kept = [r for r in previous.get("rows", []) if (r["model"], r["engine"]) not in made]
    order = {m: i for i, m in enumerate(MODELS)}

    def engine_order(name):
        return next(i for i, e in enumerate(("jaxmbd", "MJX", "MuJoCo C")) if name.startswith(e))

    data["rows"] = sorted(
        data["rows"] + kept, key=lambda r: (order[r["model"]], engine_order(r["engine"]))
    )
    data["meta"]["kept_rows_from"] = sorted({r["run"] for r in kept})
    for key in ("mjx", "mujoco"):  # the versions of the kept rows' engines
        data["meta"][key] = data["meta"].get(key) or previous["meta"].get(key)
    files = dict(previous["meta"].get("files", {}))
    files.update(data["meta"]["files"])
    data["meta"]["files"] = {m: files[m] for m in MODELS if m in files}
    data["meta"]["previous_meta"] = {
        k: v for k, v in previous["meta"].items() if k != "previous_meta"
    }


# ---------------------------------------------------------------------------- the report


def _f(x, spec=",.0f"):
    return "-" if x is None else format(x, spec)


def _plain(r: dict) -> str:
    """The plain call's steps/s and its time over the jitted single run's."""
    if r.get("plain_steps_per_s") is None:
        return "-"
    return (f"{r['plain_steps_per_s']:,.0f} ({r['plain_over_jit']:.2f}x the jitted time; "
            f"first call {r['plain_first_s']:.1f} s)")  # fmt: skip


def goals(rows: list[dict]) -> list[str]:
    """jaxmbd's joint formulation against MJX per model: single >= 3x, batch >= 1x, gradient
    time <= MJX's, compile <= MJX's; the hopper: single >= 1x."""
    lines = []
    by = {(r["model"], r["engine"]): r for r in rows}
    for model in MODELS:
        jm, mj = by.get((model, "jaxmbd joint")), by.get((model, "MJX"))
        if not jm or not mj or "single_steps_per_s" not in jm or "single_steps_per_s" not in mj:
            continue
        target = 1.0 if model in WITH_CONTACT else 3.0
        s = jm["single_steps_per_s"] / mj["single_steps_per_s"]
        parts = [
            f"single {s:.2f}x (goal >= {target:g}x: **{'met' if s >= target else 'not met'}**)"
        ]
        if "batch_model_steps_per_s" in jm and "batch_model_steps_per_s" in mj:
            b = jm["batch_model_steps_per_s"] / mj["batch_model_steps_per_s"]
            parts.append(f"batch {b:.2f}x (>= 1x: **{'met' if b >= 1 else 'not met'}**)")
        if "grad_ms" in jm and "grad_ms" in mj:
            g = jm["grad_ms"] / mj["grad_ms"]
            parts.append(
                f"gradient time {g:.2f} of MJX's (<= 1: **{'met' if g <= 1 else 'not met'}**)"
            )
        cj = sum(v for k, v in jm.items() if k.startswith("compile_"))
        cm = sum(v for k, v in mj.items() if k.startswith("compile_"))
        if cm:
            met = "met" if cj <= cm else "not met"
            parts.append(f"compile {cj:.1f} s against {cm:.1f} s (<= MJX's: **{met}**)")
        if "error" in jm and "error" in mj:
            parts.append(f"error {jm['error']:.1e} against {mj['error']:.1e}")
        lines.append(f"- {model}: " + "; ".join(parts) + ".")
    return lines or ["- no model has both a jaxmbd joint row and an MJX row."]


def report(data: dict) -> str:
    meta = data["meta"]
    prov = meta["provenance"]
    mjx = meta.get("mjx") or {}
    load = "/".join(f"{x:.2f}" for x in meta["load_start"])
    load_end = "/".join(f"{x:.2f}" for x in meta["load_end"])
    lines = [
        "# jaxmbd's joint coordinates against MJX and MuJoCo C",
        "",
        f"Command: `{prov['command']}`; {prov['date']}, commit {prov['commit']}.",
        "",
        f"Machine load (1/5/15 min averages) {load} at the start, {load_end} at the end "
        f"({meta.get('wall_min', float('nan')):.0f} min): a shared 2-core CPU, absolute "
        "figures swing with the load.",
        "",
        f"MuJoCo C {meta['mujoco']} (main environment); MJX {mjx.get('mjx', '-')} with "
        f"MuJoCo {mjx.get('mujoco', '-')} and jax {mjx.get('jax', '-')} in its own virtual "
        f"environment (float64); XLA_FLAGS `{meta['xla_flags']}`; jaxmbd's compilation cache "
        f"{meta['jaxmbd_cache']}.",
        "",
        f"{meta['steps']} steps from the initial state; batch {meta['batch']}; medians of "
        f"{meta['repeats']} calls (batch {meta['batch_repeats']}) after the first; compile = "
        "first call less the median. Error: largest difference of the final qpos from MuJoCo "
        "C RK4 at h/100; *vs MuJoCo C at h*: from MuJoCo C's own run at the same h and "
        "integrator (the same discrete map: what is left is the implementation's, not the "
        "truncation's). The hopper (contact): no error, no gradient. Gradient: jax.grad of "
        "|qpos(T)|^2 with respect to the initial qvel; "
        "grad check: relative difference of g.d from MuJoCo C's central difference along a "
        "random unit d. Settings and protocol: the module's docstring.",
        "",
    ]
    if meta.get("kept_rows_from"):
        lines += [
            "**Partial run** (`--engines " + " ".join(meta["engines"]) + "`): the rows of the "
            "other engines are kept from the earlier run(s) named in their *run* column "
            f"({'; '.join(meta['kept_rows_from'])}). Compare figures of one run where you can.",
            "",
        ]
    lines += [
        "| model | engine | integrator | h [s] | single steps/s (jitted) "
        "| plain call steps/s | batch model-steps/s "
        "| gradient [ms] | grad/forward | grad check | error | vs MuJoCo C at h "
        "| compile [s] single / batch / grad | run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        if "single_steps_per_s" not in r:
            lines.append(
                f"| {r['model']} | {r['engine']} | {r.get('integrator') or '-'} | {r['h']:g} "
                f"| {r.get('note', 'not run')[:160]} | | | | | | | | | {r['run']} |"
            )
            continue
        comp = " / ".join(_f(r.get(f"compile_{k}_s"), ".1f") for k in ("single", "batch", "grad"))
        lines.append(
            f"| {r['model']} | {r['engine']} | {r['integrator']} | {r['h']:g} "
            f"| {r['single_steps_per_s']:,.0f} | {_plain(r)} "
            f"| {_f(r.get('batch_model_steps_per_s'))} "
            f"| {_f(r.get('grad_ms'), '.1f')} | {_f(r.get('grad_over_forward'), '.1f')} "
            f"| {_f(r.get('grad_check'), '.1e')} | {_f(r.get('error'), '.1e')} "
            f"| {_f(r.get('diff_mujoco_same_h'), '.1e')} | {comp} "
            f"| {r['run']} |"
        )
    notes = [
        f"- {r['model']}, {r['engine']}: {r['note']}"
        for r in data["rows"]
        if r.get("note") and "single_steps_per_s" in r
    ]
    if notes:
        lines += ["", "Notes:", ""] + notes
    lines += [
        "",
        "Reading the table: an error equal in an engine's row and MuJoCo C's is RK4's "
        "truncation at h, not the engine's (the acrobot's 10 s are chaotic); MJX's gradient "
        "is jax.grad through lax.scan on the CPU; MuJoCo C's rows are mujoco.rollout on one "
        "thread (no compile). The plain call returns the whole Solution (every step's body "
        "states, multipliers and statuses) where the jitted harness returns the final qpos, "
        "which lets XLA drop the rest.",
    ]
    lines += ["", "## Goals (jaxmbd joint against MJX)", ""] + goals(data["rows"]) + [""]
    lines += [
        "## Files",
        "",
        "| model | nq | nv | h [s] | integrator | contact |",
        "|---|---|---|---|---|---|",
    ]
    for name, f in meta["files"].items():
        lines.append(
            f"| {name} | {f['nq']} | {f['nv']} | {f['h']:g} | {f['integrator']} "
            f"| {'as authored' if f['contact'] else 'off (limits off)'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-repeats", type=int, default=3)
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--no-batch", action="store_true")
    parser.add_argument(
        "--contact-batch",
        action="store_true",
        help="also batch the contact model (MJX's batch of 256 hoppers took 2.6 min a call)",
    )
    parser.add_argument(
        "--jaxmbd-integrator", default="rkmk", help="contact-off models' integrator"
    )
    parser.add_argument(
        "--jaxmbd-formulation",
        default="joint",
        help="jaxmbd's formulation (another one checks this harness on hinge/slide files)",
    )
    parser.add_argument("--mjx-python", default=MJX_PYTHON)
    parser.add_argument("--fresh", action="store_true", help="keep no rows of the last run's JSON")
    parser.add_argument("--out", type=Path, default=RESULTS / STEM, help="stem of the files")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the markdown from the JSON"
    )
    args = parser.parse_args(argv)
    json_file = args.out.with_suffix(".json")
    if args.report_only:
        data = json.loads(json_file.read_text())
        meta = data["meta"]
        text = report(data) + "\n" + footer(meta["provenance"], meta["machine"])
        args.out.with_suffix(".md").write_text(text)
        log(f"wrote {args.out.with_suffix('.md')}")
        return 0
    start = time.perf_counter()
    data = collect(args)
    if not args.fresh and json_file.exists():
        merge_kept(data, json.loads(json_file.read_text()))
    data["meta"]["wall_min"] = (time.perf_counter() - start) / 60
    for path in write_results(
        args.out, data=data, rows=None, report=report(data), formats=("json", "md")
    ):
        log(f"wrote {path}")
    return 0
