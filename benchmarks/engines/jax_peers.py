"""jaxmbd against its JAX peers, MJX and jaxsim, on the same MJCF files:
single-model steps/s, batch-256 model-steps/s, gradient/forward cost and the error
against MuJoCo C RK4 at h = 1e-5, all at the same step h = 1e-3 on this CPU.

    python -m benchmarks.engines jax-peers [--models double_pendulum arm3 cartpole]
        [--t-end 1.0] [--batch 256] [--repeats 7] [--jaxsim-python PATH] [--quick]
        [--engines jaxmbd mjx jaxsim] [--integrators gen_alpha rkmk]
        [--grad-engines jaxmbd mjx jaxsim] [--reuse RAW.pkl]

Partial reruns: ``--engines``, ``--integrators`` (jaxmbd's) and ``--grad-engines`` choose
what runs; ``--reuse RAW.pkl`` (an earlier run's raw results, ``--raw``) fills in the rows
that did not run and the gradients of rows whose gradient did not run, each marked in the
report with that run's date, commit and load (a reused gradient keeps its own run's
forward time for grad/forward). Only the rows and figures of one run compare at one load.

Files (each engine reads the same one): ``double_pendulum``, engines/classic.py's double
pendulum (two rods of 4 m and 2 m, 78 kg and 39 kg, hinges about global x, starting
horizontal; ``engines.mujoco_models.double_pendulum_xml``); ``arm3``, the 3-link spatial
arm of ``tests/data/arm3.xml`` (skew hinge axes, full inertias, its keyframe ``swing``);
``cartpole``, dm_control's ``suite/cartpole.xml`` read from the installed package (never
copied), started at pole angle 0.3 rad, cart rate 0.2 m/s, no control. Each is compiled
with ``mujoco.MjSpec`` at h = 1e-3 with the initial state as keyframe 0 and written to a
temporary file, which jaxmbd (``mbd.load_model(file, keyframe=0)``), MJX and MuJoCo C read;
jaxsim reads URDF or SDF (URDF only through Gazebo's ``gz`` executable), so the worker
converts the compiled MuJoCo model to SDF (one link per body, the joint frame at MuJoCo's
joint position, the full inertia about the centre of mass, joint damping as SDF damping,
which jaxsim applies as viscous joint friction). A file
jaxsim cannot express (ball or free joints, several joints in a body, armature, stiffness,
friction loss, closed loops) is listed with the reason.

Engines and integrators (h = 1e-3, 1 s = 1000 steps, float64 everywhere):

* jaxmbd, formulation rA: ``gen_alpha`` (defaults: rho_inf 0.9, stabilised index 2,
  reused-matrix Newton, tol 1e-10) and ``rkmk`` (explicit Munthe-Kaas RK4); defaults
  otherwise (``linear_solver="auto"``: the elementwise small solves on the CPU; the XLA
  small-loop flag that ``import jaxmbd`` sets; one BLAS thread).
* MJX (``mujoco-mjx``): RK4, ``jax.jit`` of ``lax.scan`` over ``mjx.step``;
  ``opt.enableflags = 0`` (MJX refuses cartpole's energy flag), contacts and constraints
  off (cartpole's slider limit is never reached: checked on the reference; with the limit
  on, MJX's constraint solver is a while loop that reverse mode cannot differentiate).
* jaxsim: ``IntegratorType.RungeKutta4``, ``jax.jit`` of ``lax.scan`` over
  ``js.model.step``, in a child process with its own virtual environment
  (``--jaxsim-python``; ``python -m venv --system-site-packages DIR && DIR/bin/pip install
  jaxsim``) so that jaxmbd's environment is not changed. The child gets the parent's
  XLA_FLAGS (the same two devices and small-loop option).

Programs, each engine: *single*: one model, 1000 steps, the jit'd final-state loss with
its trajectory, the program that the gradient differentiates (jaxmbd ``mbd.jit``, MJX and
jaxsim ``jax.jit``; ``--api`` adds jaxmbd's ``mbd.simulate`` call, what a user calls, one
more compilation per integrator); *batch*: ``--batch`` members that differ in their
initial joint rates (member 0 the single run, the others +-0.5 rad/s or m/s uniform, seed 0), jaxmbd
``mbd.simulate_batch`` over ``mbd.stack_models`` of the members (the rates reach jaxmbd
through the file: body velocities are linear in the joint rates at a fixed pose, so the
body velocities of keyframes qvel = e_i are combined per member), MJX and jaxsim
``jax.jit(jax.vmap(...))``; the process has two host devices
(``--xla_force_host_platform_device_count=2``) and every engine's batch is split over both
(jaxmbd's simulate_batch by itself, MJX and jaxsim by a batch-sharded input); *gradient*:
``jax.grad`` of L = |q(t_end)|^2 (joint coordinates at the end) with respect to the initial
joint rates qvel (nv,), one model (jaxmbd through the same linear map to body velocities);
grad/forward = gradient time / the jit'd single loss's time. jaxsim's gradient runs for
``--jaxsim-grad-models`` only (default arm3: its compilation took 4-5 min per model at load
7-9 on the shared machine). The gradients are checked
against central differences of each engine's own loss (eps 1e-6, a random unit direction)
and against each other.

Error: largest joint-coordinate difference (rad or m) from MuJoCo C RK4 at h = 1e-5
(``mujoco.rollout``, same file and initial state, constraints off as MJX) over the 1001
points of the run; batch: over members 0..7 (their own references).

Timing: each program's first call (compile + run) first, then ``--repeats`` calls (batch:
``--batch-repeats``): median, min, max; compile = first call less the median. The
persistent compilation cache stays as jaxmbd sets it (on; ``JAXMBD_NO_COMPILATION_CACHE=1``
turns it off), so a rerun's compile figures can be cache loads. The machine is a shared
2-core CPU: the load average at the start and end is in the report.

Writes benchmarks/results/compare_jax_engines.{json,md}.
"""

from __future__ import annotations

import os

# two host devices, so that each engine's batch runs on both cores (set before JAX starts)
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks._harness import RESULTS, ROOT, child, command  # noqa: E402
from benchmarks.engines import mjx_compatible_model, progress  # noqa: E402
from benchmarks.problems import ARM3, control_model_path  # noqa: E402

OUT = RESULTS
MODELS = ("double_pendulum", "arm3", "cartpole")
H = 1e-3
H_REF = 1e-5
QVEL_SPREAD = 0.5
REF_MEMBERS = 8  # batch members whose error is measured against their own references
FD_EPS = 1e-6
SEED = 0
JAXSIM_PYTHON = "/tmp/s47/jsvenv/bin/python"
#: jaxsim's gradient program compiled in 4-5 min per model on the loaded 2-core machine
#: (load 7-9): by default only this model's (``--jaxsim-grad-models`` for more)
JAXSIM_GRAD_MODELS = ("arm3",)
#: cartpole's initial state (the file's qpos0 is the upright pole at rest: an equilibrium)
CARTPOLE_START = (np.array([0.0, 0.3]), np.array([0.2, 0.0]))


_progress = progress


def timed(fn, repeats: int):
    """(last output, dict of first-call, median, min, max seconds and compile = first -
    median) of ``fn`` called once and then ``repeats`` times, blocking on its output; also
    the median process CPU time of the calls (all threads: on the shared machine the
    steadier figure)."""
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - start
    runs, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(fn())
        runs.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    med = statistics.median(runs)
    return out, dict(
        first_s=first,
        median_s=med,
        cpu_median_s=statistics.median(cpu),
        min_s=min(runs),
        max_s=max(runs),
        compile_s=first - med,
        repeats=repeats,
    )


# ---------------------------------------------------------------------------- the files


def model_file(name: str, tmp: Path) -> dict:
    """The model's MJCF at h with its initial state as keyframe 0, written to ``tmp``: path,
    q0, v0, joint names, nq, nv."""
    import mujoco

    if name == "double_pendulum":
        from benchmarks.engines.in_mujoco import double_pendulum_xml

        spec = mujoco.MjSpec.from_string(double_pendulum_xml(H, "RK4"))
    elif name == "arm3":
        spec = mujoco.MjSpec.from_file(str(ARM3))
    elif name == "cartpole":
        spec = mujoco.MjSpec.from_file(str(control_model_path("cartpole")))
    else:
        raise ValueError(f"unknown model {name!r}; choose from {MODELS}")
    spec.option.timestep = H
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m = spec.compile()
    if name == "arm3":
        key = m.key("swing")
        q0, v0 = np.array(key.qpos), np.array(key.qvel)
    elif name == "cartpole":
        q0, v0 = CARTPOLE_START
    else:
        q0, v0 = m.qpos0.copy(), np.zeros(m.nv)
    for _ in range(len(spec.keys)):  # the file's own keys go; keyframe 0 is the start
        spec.delete(spec.keys[0])
    key = spec.add_key()  # named: MjSpec.to_xml leaves out an unnamed key at the defaults
    key.name, key.qpos, key.qvel = "start", q0, v0
    path = tmp / f"{name}.xml"
    path.write_text(spec.to_xml())
    m = mujoco.MjModel.from_xml_path(str(path))
    joints = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    return dict(
        name=name, path=str(path), q0=q0, v0=v0, joints=joints, nq=m.nq, nv=m.nv, nbody=m.nbody - 1
    )


def _mj_model(path: str, h: float):
    return mjx_compatible_model(path, "RK4", h, limits=False)


def reference(F: dict, qvel: np.ndarray, n: int) -> np.ndarray:
    """MuJoCo C RK4 at H_REF from (q0, qvel[b]): qpos (B, n + 1, nq) on the grid k H."""
    import mujoco
    from mujoco import rollout

    m = _mj_model(F["path"], H_REF)
    d = mujoco.MjData(m)
    sub = int(round(H / H_REF))
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = []
    for v in qvel:
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = F["q0"], v
        s = np.zeros(mujoco.mj_stateSize(m, spec))
        mujoco.mj_getState(m, d, s, spec)
        states.append(s)
    states = np.array(states)
    out, _ = rollout.rollout(m, d, states, nstep=n * sub)
    qpos = out[:, sub - 1 :: sub, 1 : 1 + m.nq]
    return np.concatenate([states[:, None, 1 : 1 + m.nq], qpos], axis=1)


def limit_margin(F: dict, ref: np.ndarray) -> float | None:
    """Smallest distance of the reference runs from a joint range (None: no limited joint)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(F["path"])
    gaps = []
    for j in range(m.njnt):
        if m.jnt_limited[j]:
            q = ref[:, :, m.jnt_qposadr[j]]
            lo, hi = m.jnt_range[j]
            gaps.append(min(float(np.min(q - lo)), float(np.min(hi - q))))
    return min(gaps) if gaps else None


def _error(q, ref) -> float:
    return float(np.max(np.abs(np.asarray(q) - np.asarray(ref))))


def _fd_direction(nv: int) -> np.ndarray:
    d = np.random.default_rng(SEED + 1).standard_normal(nv)
    return d / np.linalg.norm(d)


def _fd_check(loss, v, grad) -> dict:
    """g . d against the central difference of ``loss`` (a float of v) along a unit d."""
    d = _fd_direction(v.shape[0])
    fd = (loss(v + FD_EPS * d) - loss(v - FD_EPS * d)) / (2 * FD_EPS)
    gd = float(np.dot(np.asarray(grad), d))
    return dict(g_dot_d=gd, central_difference=fd, rel=abs(gd - fd) / abs(fd))


# ---------------------------------------------------------------------------- jaxmbd


def jaxmbd_models(F: dict, qvel: np.ndarray):
    """(member 0's model, the stacked batch, a function qvel (nv,) -> model): the file's model
    with the given initial joint rates, the rates combined from keyframes qvel = e_i."""
    import equinox as eqx
    import jax.numpy as jnp
    import mujoco

    import jaxmbd as mbd

    spec = mujoco.MjSpec.from_file(F["path"])
    for i in range(F["nv"]):
        key = spec.add_key()
        key.name, key.qpos, key.qvel = f"rate_{i}", F["q0"], np.eye(F["nv"])[i]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the importer's notes on unused MJCF features
        file = Path(tmp) / "basis.xml"
        file.write_text(spec.to_xml())
        base = mbd.load_model(F["path"], keyframe=0)
        loaded = [mbd.load_model(file, keyframe=k + 1) for k in range(F["nv"])]
    basis_v = jnp.stack([jnp.asarray(x.rdot0) for x in loaded])  # (nv, nb, 3)
    basis_w = jnp.stack([jnp.asarray(x.omega0) for x in loaded])

    def with_rates(v):
        rdot = jnp.einsum("i,ibk->bk", v, basis_v)
        omega = jnp.einsum("i,ibk->bk", v, basis_w)
        return eqx.tree_at(lambda mo: (mo.rdot0, mo.omega0), base, (rdot, omega))

    check = max(
        float(
            np.abs(
                np.asarray(with_rates(jnp.asarray(F["v0"])).rdot0) - np.asarray(base.rdot0)
            ).max()
        ),
        float(
            np.abs(
                np.asarray(with_rates(jnp.asarray(F["v0"])).omega0) - np.asarray(base.omega0)
            ).max()
        ),
    )
    stacked = mbd.stack_models([with_rates(jnp.asarray(v)) for v in qvel])
    return base, stacked, with_rates, check


def run_jaxmbd(F, integrator, qvel, n, args) -> dict:
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd

    base, stacked, with_rates, check = jaxmbd_models(F, qvel)
    opts = dict(formulation="rA", integrator=integrator, t_end=n * H, h=H)
    names = F["joints"]

    def joints_q(sol):
        return jnp.stack([sol.joints[k].q for k in names], axis=-1)

    def loss_traj(v):
        q = joints_q(mbd.simulate(with_rates(v), **opts))
        return jnp.sum(q[-1] ** 2), q

    v0 = jnp.asarray(qvel[0])
    res = dict(
        engine="jaxmbd",
        integrator=f"rA {integrator}" + (" RK4" if integrator == "rkmk" else ""),
        rates_check=check,
    )
    if args.api:
        _progress(f"{F['name']} jaxmbd {integrator}: simulate call")
        sol, res["api1"] = timed(lambda: mbd.simulate(base, **opts), args.repeats)
        res["q_api1"] = np.asarray(joints_q(sol))
    _progress(f"{F['name']} jaxmbd {integrator}: jit'd loss")
    fwd1 = mbd.jit(loss_traj)
    (loss0, q1), res["fwd1"] = timed(lambda: fwd1(v0), args.repeats)
    res["q_fwd1"], res["loss"] = np.asarray(q1), float(loss0)
    if not args.no_grad and "jaxmbd" in args.grad_engines:
        _progress(f"{F['name']} jaxmbd {integrator}: gradient")
        grad1 = mbd.jit(jax.grad(lambda v: loss_traj(v)[0]))
        g, res["grad1"] = timed(lambda: grad1(v0), args.repeats)
        res["grad"] = np.asarray(g)
        res["fd"] = _fd_check(lambda v: float(fwd1(jnp.asarray(v))[0]), np.asarray(v0), g)
    if not args.no_batch:
        _progress(f"{F['name']} jaxmbd {integrator}: batch {len(qvel)}")
        # simulate_batch's default chunks (its chunked lax.map failed on these models' empty
        # array leaves before 2026-11-26 evening: the first run used one vmap per device)
        res["batch_chunk"] = None
        solB, res["fwdB"] = timed(
            lambda: mbd.simulate_batch(stacked, chunk=res["batch_chunk"], **opts),
            args.batch_repeats,
        )
        res["q_fwdB"] = np.asarray(joints_q(solB))[:REF_MEMBERS]
    jax.clear_caches()
    return res


# ---------------------------------------------------------------------------- MJX


def _batch_sharded(x):
    """``x`` with its leading (batch) axis split over all devices."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("batch",))
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("batch")))


def run_mjx(F, qvel, n, args) -> dict:
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    mx = mjx.put_model(_mj_model(F["path"], H))
    d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(F["q0"]))

    def loss_traj(v):
        def step(d, _):
            d = mjx.step(mx, d)
            return d, d.qpos

        d = d0.replace(qvel=v)
        _, q = jax.lax.scan(step, d, None, length=n)
        q = jnp.concatenate([d.qpos[None], q])
        return jnp.sum(q[-1] ** 2), q

    v0 = jnp.asarray(qvel[0])
    res = dict(engine="MJX", integrator="RK4")
    _progress(f"{F['name']} MJX: jit'd loss")
    fwd1 = jax.jit(loss_traj)
    (loss0, q1), res["fwd1"] = timed(lambda: fwd1(v0), args.repeats)
    res["q_fwd1"], res["loss"] = np.asarray(q1), float(loss0)
    if not args.no_grad and "mjx" in args.grad_engines:
        _progress(f"{F['name']} MJX: gradient")
        grad1 = jax.jit(jax.grad(lambda v: loss_traj(v)[0]))
        g, res["grad1"] = timed(lambda: grad1(v0), args.repeats)
        res["grad"] = np.asarray(g)
        res["fd"] = _fd_check(lambda v: float(fwd1(jnp.asarray(v))[0]), np.asarray(v0), g)
    if not args.no_batch:
        _progress(f"{F['name']} MJX: batch {len(qvel)}")
        fwdB = jax.jit(jax.vmap(lambda v: loss_traj(v)[1]))
        vB = _batch_sharded(jnp.asarray(qvel))
        qB, res["fwdB"] = timed(lambda: fwdB(vB), args.batch_repeats)
        res["q_fwdB"] = np.asarray(qB)[:REF_MEMBERS]
    jax.clear_caches()
    return res


# ---------------------------------------------------------------------------- jaxsim


class Unsupported(Exception):
    """A feature of the file that the SDF conversion for jaxsim cannot express."""


def sdf_from_mjcf(path: str) -> tuple[str, float]:
    """SDF of a fixed-base MuJoCo tree of hinge and slide joints (one per body), and the
    gravity magnitude (jaxsim takes gravity along -z only). SDF, not URDF: jaxsim's reader
    (rod) converts URDF with Gazebo's ``gz sdf`` executable, which pip does not install.
    Each link's frame is its body's frame moved to the joint position (the joint sits at the
    child link's origin), posed in the model frame at qpos = 0 (MuJoCo's kinematics)."""
    import mujoco
    from scipy.spatial.transform import Rotation

    m = mujoco.MjModel.from_xml_path(path)
    g = np.asarray(m.opt.gravity)
    if not np.allclose(g[:2], 0.0) or g[2] > 0:
        raise Unsupported(f"gravity {g} is not along -z")
    if m.neq:
        raise Unsupported("equality constraints (closed loops)")
    if np.any(m.qpos0 != 0):
        raise Unsupported("joint reference positions (qpos0 != 0)")
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)

    def vec(v):
        return " ".join(f"{float(x):.17g}" for x in v)

    # jaxsim's fixed base: a link fixed to "world" (its inertia is never used)
    links = [
        '<link name="base"><pose>0 0 0 0 0 0</pose><inertial><mass>1</mass><inertia><ixx>1'
        "</ixx><iyy>1</iyy><izz>1</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia>"
        "</inertial></link>"
    ]
    joints = [
        '<joint name="world_to_base" type="fixed"><parent>world</parent><child>base</child>'
        "<pose>0 0 0 0 0 0</pose></joint>"
    ]
    for b in range(1, m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
        if m.body_jntnum[b] != 1:
            raise Unsupported(f"body {name!r} has {m.body_jntnum[b]} joints (one needed)")
        j = m.body_jntadr[b]
        jtype = mujoco.mjtJoint(m.jnt_type[j])
        if jtype not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            raise Unsupported(f"joint type {jtype.name} of body {name!r}")
        dof = m.jnt_dofadr[j]
        for what, value in (
            ("armature", m.dof_armature[dof]),
            ("stiffness", m.jnt_stiffness[j]),
            ("frictionloss", m.dof_frictionloss[dof]),
        ):
            if value != 0:
                raise Unsupported(f"joint {what} ({value:g}) on body {name!r}")
        jp = np.asarray(m.jnt_pos[j], dtype=float)
        rot = d.xmat[b].reshape(3, 3)
        origin = d.xpos[b] + rot @ jp
        rpy = Rotation.from_matrix(rot).as_euler("xyz")  # R = Rz(yaw) Ry(pitch) Rx(roll)
        if not np.allclose(Rotation.from_euler("xyz", rpy).as_matrix(), rot, atol=1e-12):
            raise RuntimeError(f"roll-pitch-yaw of body {name!r}")
        ri = d.ximat[b].reshape(3, 3)  # principal axes, world; inertia about the CoM in link axes:
        inertia = rot.T @ ri @ np.diag(m.body_inertia[b]) @ ri.T @ rot
        com = np.asarray(m.body_ipos[b]) - jp
        links.append(
            f'<link name="{name}"><pose>{vec(origin)} {vec(rpy)}</pose><inertial>'
            f"<pose>{vec(com)} 0 0 0</pose><mass>{float(m.body_mass[b]):.17g}</mass><inertia>"
            f"<ixx>{inertia[0, 0]:.17g}</ixx><ixy>{inertia[0, 1]:.17g}</ixy><ixz>"
            f"{inertia[0, 2]:.17g}</ixz><iyy>{inertia[1, 1]:.17g}</iyy><iyz>"
            f"{inertia[1, 2]:.17g}</iyz><izz>{inertia[2, 2]:.17g}</izz></inertia></inertial>"
            "</link>"
        )
        parent = int(m.body_parentid[b])
        parent_name = (
            "base" if parent == 0 else mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, parent)
        )
        jname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        kind = "revolute" if jtype == mujoco.mjtJoint.mjJNT_HINGE else "prismatic"
        # limits never reached in these runs (MJX and the reference run without them too)
        joints.append(
            f'<joint name="{jname}" type="{kind}"><parent>{parent_name}</parent>'
            f"<child>{name}</child><axis><xyz>{vec(m.jnt_axis[j])}</xyz>"
            "<limit><lower>-1e6</lower><upper>1e6</upper></limit><dynamics><spring_reference>0"
            "</spring_reference><spring_stiffness>0</spring_stiffness>"
            f"<damping>{float(m.dof_damping[dof]):.17g}</damping><friction>0</friction>"
            "</dynamics></axis></joint>"
        )
    sdf = (
        '<?xml version="1.0"?>\n<sdf version="1.7"><model name="model">\n'
        + "\n".join(links + joints)
        + "\n</model></sdf>\n"
    )
    return sdf, float(-g[2])


def _jaxsim_worker(spec_file: str, out_file: str):
    """Runs in the jaxsim environment: the programs of ``run_mjx`` through jaxsim."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxsim
    import jaxsim.api as js

    spec = json.loads(Path(spec_file).read_text())
    args = argparse.Namespace(**spec["args"])
    results = {"version": jaxsim.__version__}
    for F in spec["files"]:
        qvel, n = np.asarray(F["qvel"]), F["n"]
        try:
            sdf, g = sdf_from_mjcf(F["path"])
        except Unsupported as err:
            results[F["name"]] = dict(engine="jaxsim", integrator="RK4", unsupported=str(err))
            continue
        model = js.model.JaxSimModel.build_from_model_description(
            model_description=sdf,
            is_urdf=False,
            time_step=H,
            gravity=g,
            integrator=js.model.IntegratorType.RungeKutta4,
        )
        order = [list(model.joint_names()).index(k) for k in F["joints"]]
        q0 = np.zeros(len(order))
        q0[order] = F["q0"]

        def loss_traj(v, model=model, q0=q0, order=order, n=n):
            vj = jnp.zeros(len(order)).at[jnp.asarray(order)].set(v)
            data = js.data.JaxSimModelData.build(
                model=model,
                joint_positions=jnp.asarray(q0),
                joint_velocities=vj,
                velocity_representation=jaxsim.VelRepr.Inertial,
            )

            def step(d, _):
                d = js.model.step(model, d)
                return d, d.joint_positions[jnp.asarray(order)]

            _, q = jax.lax.scan(step, data, None, length=n)
            q = jnp.concatenate([data.joint_positions[jnp.asarray(order)][None], q])
            return jnp.sum(q[-1] ** 2), q

        v0 = jnp.asarray(qvel[0])
        res = dict(engine="jaxsim", integrator="RK4", sdf=sdf)
        _progress(f"{F['name']} jaxsim: jit'd loss")
        fwd1 = jax.jit(loss_traj)
        (loss0, q1), res["fwd1"] = timed(lambda fwd1=fwd1, v0=v0: fwd1(v0), args.repeats)
        res["q_fwd1"], res["loss"] = np.asarray(q1), float(loss0)
        grad_models = getattr(args, "jaxsim_grad_models", None) or JAXSIM_GRAD_MODELS
        if F["name"] not in grad_models:
            res["grad_skipped"] = f"not run (--jaxsim-grad-models: {', '.join(grad_models)})"
        if not args.no_grad and F["name"] in grad_models:
            _progress(f"{F['name']} jaxsim: gradient")
            grad1 = jax.jit(jax.grad(lambda v, f=loss_traj: f(v)[0]))
            g1, res["grad1"] = timed(lambda grad1=grad1, v0=v0: grad1(v0), args.repeats)
            res["grad"] = np.asarray(g1)
            res["fd"] = _fd_check(lambda v, f=fwd1: float(f(jnp.asarray(v))[0]), np.asarray(v0), g1)
        if not args.no_batch:
            _progress(f"{F['name']} jaxsim: batch {len(qvel)}")
            fwdB = jax.jit(jax.vmap(lambda v, f=loss_traj: f(v)[1]))
            vB = _batch_sharded(jnp.asarray(qvel))
            qB, res["fwdB"] = timed(lambda fwdB=fwdB, vB=vB: fwdB(vB), args.batch_repeats)
            res["q_fwdB"] = np.asarray(qB)[:REF_MEMBERS]
        results[F["name"]] = res
        jax.clear_caches()
    with open(out_file, "wb") as fh:
        pickle.dump(results, fh)


def run_jaxsim(files, args) -> dict:
    """jaxsim's results per model, from a child process in the jaxsim environment; a model
    it could not run says why (``unsupported`` or ``failed``)."""
    python = Path(args.jaxsim_python)
    if not python.exists():
        why = f"not installed ({python} missing: see the module docstring)"
        return {F["name"]: dict(engine="jaxsim", integrator="RK4", failed=why) for F in files}
    with tempfile.TemporaryDirectory() as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "out.pkl"
        spec = dict(
            args=dict(
                repeats=args.repeats,
                batch_repeats=args.batch_repeats,
                no_grad=args.no_grad or "jaxsim" not in args.grad_engines,
                jaxsim_grad_models=args.jaxsim_grad_models,
                no_batch=args.no_batch,
            ),
            files=[
                dict(F, q0=F["q0"].tolist(), v0=F["v0"].tolist(), qvel=F["qvel"].tolist())
                for F in files
            ],
        )
        spec_file.write_text(json.dumps(spec))
        cmd, env = child(__spec__.name, "--jaxsim-worker", spec_file, out_file)
        cmd[0] = str(python)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        sys.stderr.write(proc.stderr[-4000:])
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "?"
            return {
                F["name"]: dict(
                    engine="jaxsim", integrator="RK4", failed=f"the jaxsim process failed: {tail}"
                )
                for F in files
            }
        with open(out_file, "rb") as fh:
            out = pickle.load(fh)
    version = out.pop("version")
    for r in out.values():
        r["version"] = version
    return out


# ---------------------------------------------------------------------------- the report

ENGINES = ("jaxmbd", "mjx", "jaxsim")
ROWS = (("jaxmbd", "rA gen_alpha"), ("jaxmbd", "rA rkmk RK4"), ("MJX", "RK4"), ("jaxsim", "RK4"))


def summarise(r: dict, ref: np.ndarray, n: int, batch: int) -> dict:
    """The figures of one engine row from its raw results (times, trajectories)."""
    s = dict(engine=r["engine"], integrator=r["integrator"])
    for key in (
        "unsupported",
        "failed",
        "version",
        "rates_check",
        "grad_skipped",
        "reused",
        "grad_reused",
    ):
        if key in r:
            s[key] = r[key]
    if "fwd1" not in r:
        return s
    single = r.get("api1", r["fwd1"])
    s["single_steps_per_s"] = n / single["median_s"]
    s["single_program"] = "mbd.simulate call" if "api1" in r else "jit'd loss and trajectory"
    s["loss_steps_per_s"] = n / r["fwd1"]["median_s"]
    if "cpu_median_s" in single:
        s["single_steps_per_cpu_s"] = n / single["cpu_median_s"]
    s["error"] = _error(r.get("q_api1", r["q_fwd1"]), ref[0])
    s["error_loss_program"] = _error(r["q_fwd1"], ref[0])
    s["loss"] = r["loss"]
    s["times"] = {k: r[k] for k in ("api1", "fwd1", "grad1", "fwdB") if k in r}
    if "grad1" in r:
        s["grad_ms"] = 1e3 * r["grad1"]["median_s"]
        fwd = r.get("reused_fwd1", r["fwd1"])  # a reused gradient: its own run's forward
        s["grad_over_forward"] = r["grad1"]["median_s"] / fwd["median_s"]
        s["grad"] = r["grad"].tolist()
        s["fd"] = r["fd"]
    if r.get("batch_chunk"):
        s["batch_note"] = (
            f"simulate_batch(chunk={r['batch_chunk']}): one vmap per device (the default "
            "chunked lax.map fails on this model's empty array leaves)"
        )
    if "fwdB" in r:
        s["batch_model_steps_per_s"] = batch * n / r["fwdB"]["median_s"]
        if "cpu_median_s" in r["fwdB"]:
            s["batch_model_steps_per_cpu_s"] = batch * n / r["fwdB"]["cpu_median_s"]
        s["batch_error"] = _error(r["q_fwdB"], ref[: len(r["q_fwdB"])])
    return s


def _f(x, spec=",.0f", none="-"):
    return none if x is None else format(x, spec)


def goals(model_rows: dict) -> list[str]:
    """The goals per model: rkmk against MJX RK4 (single >= 3x at equal or better
    error, batch >= 1x, gradient time <= MJX's); gen_alpha's batch beside it."""
    lines = []
    for name, rows in model_rows.items():
        rk = rows.get("jaxmbd rA rkmk RK4", {})
        ga = rows.get("jaxmbd rA gen_alpha", {})
        mj = rows.get("MJX RK4", {})
        if "single_steps_per_s" not in rk or "single_steps_per_s" not in mj:
            continue
        ratio = rk["single_steps_per_s"] / mj["single_steps_per_s"]
        equal = rk["error"] <= 1.1 * mj["error"]
        met = ratio >= 3.0 and equal
        lines.append(
            f"- {name}, single model: rkmk {rk['single_steps_per_s']:,.0f} steps/s "
            f"({rk['single_program']}) against MJX RK4 "
            f"{mj['single_steps_per_s']:,.0f}: {ratio:.2f}x, error "
            f"{rk['error']:.1e} against {mj['error']:.1e} "
            f"({'equal or better' if equal else 'worse'}); goal >= 3x: "
            f"**{'met' if met else 'not met'}**."
        )
        if "batch_model_steps_per_s" in rk and "batch_model_steps_per_s" in mj:
            b = rk["batch_model_steps_per_s"] / mj["batch_model_steps_per_s"]
            bga = (ga.get("batch_model_steps_per_s") or float("nan")) / mj[
                "batch_model_steps_per_s"
            ]
            lines.append(
                f"- {name}, batch: rkmk {rk['batch_model_steps_per_s']:,.0f} model-steps/s "
                f"against MJX {mj['batch_model_steps_per_s']:,.0f}: {b:.2f}x (gen_alpha "
                f"{bga:.2f}x); goal >= 1x: **{'met' if b >= 1.0 else 'not met'}**."
            )
        if "grad_ms" in rk and "grad_ms" in mj:
            t = rk["grad_ms"] / mj["grad_ms"]
            lines.append(
                f"- {name}, gradient: rkmk {rk['grad_ms']:.1f} ms ({rk['grad_over_forward']:.1f} "
                f"forward runs) against MJX {mj['grad_ms']:.1f} ms "
                f"({mj['grad_over_forward']:.1f} forward runs): time ratio {t:.2f}; ahead in "
                f"time: **{'yes' if t <= 1.0 else 'no'}**, in cost per forward run: "
                f"**{'yes' if rk['grad_over_forward'] < mj['grad_over_forward'] else 'no'}**."
            )
    return lines


def write_report(data: dict, path_md: Path, path_json: Path):
    meta = data["meta"]
    lines = [
        "# jaxmbd against MJX and jaxsim on the same MJCF files",
        "",
        f"`{meta['command']}` ({meta['date']}, {meta['wall_min']:.1f} min, load average "
        f"{meta['load_start']:.1f} at the start, {meta['load_end']:.1f} at the end: a shared "
        f"2-core machine) on {meta['machine']}; MuJoCo {meta['mujoco']}, MJX {meta['mjx']}, "
        f"jaxsim {meta.get('jaxsim', '-')}, jaxmbd at {meta['commit']}; XLA_FLAGS "
        f"`{meta['xla_flags']}`.",
        "",
        f"h = {H:g} s, {meta['n']} steps ({meta['n'] * H:g} s), batch {meta['batch']}; "
        f"medians of {meta['repeats']} calls (batch: {meta['batch_repeats']}) after the "
        "first; compile = first call less the median (persistent cache on: a rerun's figures "
        "can be cache loads). Error: largest joint-coordinate difference (rad or m) from "
        f"MuJoCo C RK4 at h = {H_REF:g} over the run (batch: members 0..{REF_MEMBERS - 1}). "
        "grad/forward: jax.grad of |q(t_end)|^2 with respect to the initial joint rates, "
        "over the jit'd loss's time. Settings and protocol: the script's docstring.",
        "",
    ]
    if meta.get("reused_from"):
        lines += [
            "**Partial rerun**: the rows and gradients marked *not rerun* below come from "
            f"the {meta['reused_from']}; every other figure is this run's. Compare figures "
            "within one run only.",
            "",
        ]
    for name, rows in data["models"].items():
        info = data["files"][name]
        lines += [f"## {name}", "", info["note"], ""]
        lines += [
            "| engine | integrator | single steps/s | jit'd loss steps/s | batch model-steps/s "
            "| single steps/CPU-s | batch model-steps/CPU-s "
            "| gradient [ms] | grad/forward | error | batch error | compile [s] single / "
            "loss / batch / grad |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in rows.values():
            if "single_steps_per_s" not in s:
                why = s.get("unsupported") or s.get("failed") or "not run"
                lines.append(
                    f"| {s['engine']} | {s['integrator']} | cannot run: {why} | | | | | | | | | |"
                )
                continue
            t = s["times"]
            comp = " / ".join(
                _f(t[k]["compile_s"], ".1f") if k in t else "-"
                for k in ("api1", "fwd1", "fwdB", "grad1")
            )
            lines.append(
                f"| {s['engine']} | {s['integrator']} | {s['single_steps_per_s']:,.0f} "
                f"| {s['loss_steps_per_s']:,.0f} | {_f(s.get('batch_model_steps_per_s'))} "
                f"| {_f(s.get('single_steps_per_cpu_s'))} "
                f"| {_f(s.get('batch_model_steps_per_cpu_s'))} "
                f"| {_f(s.get('grad_ms'), '.1f')} | {_f(s.get('grad_over_forward'), '.1f')} "
                f"| {s['error']:.1e} | {_f(s.get('batch_error'), '.1e')} | {comp} |"
            )
        lines.append("")
        checks = []
        for key, s in rows.items():
            if "fd" in s:
                fd = s["fd"]
                checks.append(
                    f"* {key}: g.d = {fd['g_dot_d']:.10g}, central difference "
                    f"{fd['central_difference']:.10g} (relative {fd['rel']:.1e})"
                )
        if "grad" in rows.get("MJX RK4", {}):
            g_mj = np.asarray(rows["MJX RK4"]["grad"])
            for key, s in rows.items():
                if "grad" in s and key != "MJX RK4":
                    rel = np.linalg.norm(np.asarray(s["grad"]) - g_mj) / np.linalg.norm(g_mj)
                    checks.append(f"* {key} gradient against MJX RK4's: relative {rel:.1e}")
        notes = [f"* {key}: {s['batch_note']}" for key, s in rows.items() if "batch_note" in s]
        notes += [
            f"* {key}: **not rerun**, the row of the {s['reused']}"
            for key, s in rows.items()
            if "reused" in s
        ]
        notes += [
            f"* {key} gradient: **not rerun**, from the {s['grad_reused']} (grad/forward "
            "against that run's forward time)"
            for key, s in rows.items()
            if "grad_reused" in s
        ]
        notes += [
            f"* {key} gradient: {s['grad_skipped']}"
            for key, s in rows.items()
            if "grad_skipped" in s
        ]
        if notes:
            lines += ["Notes:", ""] + notes + [""]
        if checks:
            lines += ["Gradient checks:", ""] + checks + [""]
    lines += ["## Goals", ""] + goals(data["models"]) + [""]
    lines += [NOTES]
    path_md.write_text("\n".join(lines) + "\n")
    path_json.write_text(json.dumps(data, indent=1, default=float) + "\n")


NOTES = """## What differs between the engines

- **Coordinates.** jaxmbd integrates absolute coordinates (rA: a position and a rotation
  matrix per body; the joints are constraints, each step solves the 6 nb + nc KKT system
  per stage (rkmk) or runs Newton on the index-2/3 system (gen_alpha)). MJX and jaxsim
  integrate joint coordinates (a tree: no constraint; MJX factors the nv x nv mass matrix,
  jaxsim runs the articulated-body algorithm).
- **Integrators.** rkmk and the peers' RK4 are the same fourth-order tableau, so at h =
  1e-3 their errors are of the same order but not equal (the truncation error depends on
  the coordinates); gen_alpha is second order (its error is 1e-5..1e-3 here, not
  comparable with RK4's; its row is for the cost of jaxmbd's default integrator).
- **jaxsim's cartpole error** (1.4e-7, the others 1e-11): jaxsim's `js.model.step`
  evaluates the joint torques (here the joints' viscous damping) once at the start of the
  step and holds them over the four RK4 stages, so the damping term is integrated at first
  order (code reading of jaxsim 0.9.0's `api/model.py`; the undamped files agree with MJX to
  1e-14 in the gradient).
- **Load.** The runs share the 2 cores with other engineers' jobs (the load average is in
  the header): absolute figures swing between programs and runs (MJX's single-model
  double pendulum measured 13.1k steps/s in the 20:06 run and 19.7k in a probe at load
  2.2 minutes before); the ratios within a row's program pair (gradient over forward) are
  the steadier figures. CPU-s columns: process CPU time, all threads (a figure above the
  wall-clock one means the program waited for a core).
- **Batches.** jaxmbd's `simulate_batch` shards the members over the two host devices by
  `shard_map` and runs them in chunks per device (its default chunk size); MJX and jaxsim
  run `jax.jit(jax.vmap)` with the batch axis sharded over the same two devices (XLA
  partitions the program).
"""


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch-repeats", type=int, default=3)
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--no-batch", action="store_true")
    parser.add_argument(
        "--api", action="store_true", help="also time jaxmbd's mbd.simulate call (one more compile)"
    )
    parser.add_argument("--engines", nargs="*", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument(
        "--integrators", nargs="*", default=["gen_alpha", "rkmk"], choices=["gen_alpha", "rkmk"]
    )
    parser.add_argument(
        "--grad-engines",
        nargs="*",
        default=list(ENGINES),
        choices=list(ENGINES),
        help="engines whose gradient runs (the others' from --reuse, if given)",
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        help="an earlier run's raw results: rows and gradients that did not run come from it",
    )
    parser.add_argument("--jaxsim-python", default=JAXSIM_PYTHON)
    parser.add_argument("--jaxsim-grad-models", nargs="*", default=list(JAXSIM_GRAD_MODELS))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="0.1 s, batch 8, 2 repeats (a smoke run; not the report's)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--raw",
        type=Path,
        default=Path(tempfile.gettempdir()) / "compare_jax_engines_raw.pkl",
        help="raw results (times, trajectories)",
    )
    parser.add_argument("--from-raw", action="store_true", help="only rewrite the report")
    parser.add_argument("--jaxsim-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jaxsim_worker:
        _jaxsim_worker(*args.jaxsim_worker)
        return
    if args.quick:
        args.t_end, args.batch, args.repeats, args.batch_repeats = 0.1, 8, 2, 1
    if args.from_raw:
        with open(args.raw, "rb") as fh:
            raw = pickle.load(fh)
    else:
        raw = collect(args)
        if args.reuse:
            with open(args.reuse, "rb") as fh:
                merge_reused(raw, pickle.load(fh))
        with open(args.raw, "wb") as fh:
            pickle.dump(raw, fh)
    data = analyse(raw)
    stem = "compare_jax_engines" + ("_quick" if raw["meta"]["quick"] else "")
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(data, args.out / f"{stem}.md", args.out / f"{stem}.json")
    _progress(f"wrote {args.out / stem}.{{md,json}}")


def collect(args) -> dict:
    import jax
    import mujoco

    import jaxmbd as mbd  # float64, XLA flag; before any computation
    from benchmarks._harness import machine

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "jaxmbd"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[1::2]
    used = Path(mbd.__file__).resolve().parent.parent
    if used != ROOT:  # PYTHONPATH=<an export of a commit>: the shared tree's edits are not in it
        commit += f" (jaxmbd from {used}, an export of the commit)"
    elif dirty:  # other engineers' uncommitted edits in the working tree the run used
        commit += " + uncommitted changes to " + ", ".join(dirty)
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    _progress(f"load {load_start:.1f}; devices {jax.devices()}")
    n = int(round(args.t_end / H))
    rng = np.random.default_rng(SEED)
    raw = dict(files={}, results={}, refs={})
    tmp = Path(tempfile.mkdtemp(prefix="compare_jax_engines_"))
    files = []
    for name in args.models:
        F = model_file(name, tmp)
        qvel = F["v0"] + QVEL_SPREAD * rng.uniform(-1, 1, size=(args.batch, F["nv"]))
        qvel[0] = F["v0"]
        F["qvel"], F["n"] = qvel, n
        files.append(F)
        _progress(f"{name}: MuJoCo C reference (RK4, h = {H_REF:g})")
        ref = reference(F, qvel[:REF_MEMBERS], n)
        margin = limit_margin(F, ref)
        raw["refs"][name] = ref
        raw["files"][name] = dict(
            path=F["path"],
            q0=F["q0"].tolist(),
            v0=F["v0"].tolist(),
            joints=F["joints"],
            nq=F["nq"],
            nv=F["nv"],
            nbody=F["nbody"],
            limit_margin=margin,
        )
        rows = raw["results"].setdefault(name, {})
        if "jaxmbd" in args.engines:
            for integrator in args.integrators:
                r = run_jaxmbd(F, integrator, qvel, n, args)
                rows[f"jaxmbd {r['integrator']}"] = r
        if "mjx" in args.engines:
            rows["MJX RK4"] = run_mjx(F, qvel, n, args)
    if "jaxsim" in args.engines:
        for name, r in run_jaxsim(files, args).items():
            raw["results"][name]["jaxsim RK4"] = r
    from mujoco import mjx  # noqa: F401

    jaxsim_version = next(
        (r["version"] for rows in raw["results"].values() for r in rows.values() if "version" in r),
        None,
    )
    import importlib.metadata as md

    raw["meta"] = dict(
        command=command(),
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        wall_min=(time.perf_counter() - start) / 60,
        load_start=load_start,
        load_end=os.getloadavg()[0],
        machine=machine(),
        mujoco=mujoco.__version__,
        mjx=md.version("mujoco-mjx"),
        jaxsim=jaxsim_version,
        commit=commit,
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        n=n,
        batch=args.batch,
        repeats=args.repeats,
        batch_repeats=args.batch_repeats,
        quick=args.quick,
    )
    return raw


FILE_NOTES = {
    "double_pendulum": "engines/classic.py's double pendulum (rods 4 m / 78 kg and 2 m / 39 kg, "
    "hinges about global x at the rods' ends), starting horizontal at rest.",
    "arm3": "tests/data/arm3.xml (3 links, skew hinge axes, full inertias), from its keyframe "
    "'swing'.",
    "cartpole": "dm_control's suite/cartpole.xml (slider with damping 5e-4 and a range of +-1.8 "
    "m, hinge with damping 2e-6), from pole angle 0.3 rad and cart rate 0.2 m/s, no control.",
}


def merge_reused(raw: dict, old: dict):
    """Rows of ``old`` (an earlier run's raw results) that this run did not make, and the
    gradients of this run's rows that did not run, copied in, each marked ``reused`` with
    the earlier run's date, commit and load (a copied gradient brings its own run's forward
    time along, ``reused_fwd1``, for grad/forward)."""
    meta = old["meta"]
    origin = (
        f"{meta['date']} run at {meta['commit']}, load {meta['load_start']:.1f} to "
        f"{meta['load_end']:.1f}"
    )
    raw["meta"]["reused_from"] = origin
    if raw["meta"].get("jaxsim") is None:  # jaxsim's rows (and version) from the earlier run
        raw["meta"]["jaxsim"] = meta.get("jaxsim")
    for name, rows in raw["results"].items():
        if old["meta"]["n"] != raw["meta"]["n"] or old["meta"]["batch"] != raw["meta"]["batch"]:
            raise ValueError("--reuse: the earlier run has another horizon or batch size")
        for key, r_old in old["results"].get(name, {}).items():
            if key not in rows:
                rows[key] = dict(r_old, reused=origin)
            elif "grad1" not in rows[key] and "grad1" in r_old:
                r = rows[key]
                for k in ("grad1", "grad", "fd"):
                    r[k] = r_old[k]
                r["reused_fwd1"], r["grad_reused"] = r_old["fwd1"], origin


def analyse(raw: dict) -> dict:
    n, batch = raw["meta"]["n"], raw["meta"]["batch"]
    models = {}
    for name, rows in raw["results"].items():
        ref = raw["refs"][name]
        models[name] = {}
        for engine, integ in ROWS:
            key = f"{engine} {integ}"
            if key in rows:
                models[name][key] = summarise(rows[key], ref, n, batch)
    files = {}
    for name, info in raw["files"].items():
        note = FILE_NOTES[name]
        if info["limit_margin"] is not None:
            note += (
                f" The reference runs stay {info['limit_margin']:.2f} from the nearest joint "
                "range (limits off in MJX and the reference, inactive in jaxmbd)."
            )
        files[name] = dict(info, note=note)
    return dict(meta=raw["meta"], files=files, models=models)


if __name__ == "__main__":
    main()
