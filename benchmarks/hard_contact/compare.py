"""Exact-contact benchmark: jaxmbd's hard contact
(``simulate(contact="hard")``, projected Moreau–Jean) against its compliant contact and
MuJoCo C, on closed-form problems, in steps/s on many bodies, and in gradient cost.

    python -m benchmarks.hard_contact compare [--quick] [--parts wp stack grad]
        [--repeats 3] [--report-only]

Writes benchmarks/results/bench_hard_contact.{json,csv,md,png}. ``--report-only``
rebuilds the markdown and the figure from the json (no runs).

**1. Work-precision** (error against run time per simulated second, h in
``H_SWEEP``), three closed-form problems on the plane z = 0 (the same as
tests/test_hard_contact.py):

* **ball**: a 5 cm, 1 kg solid sphere whose bottom starts 0.45 m above the floor, e = 0.8,
  mu = 0.5, 1.6 s (three complete flights after the drop). Error: the largest
  |apex ratio / e^2 - 1| of the first three bounces (apex: the highest sampled height of a
  flight, above touching). Penetration: the largest R - z.
* **slide**: a 20 cm, 2 kg cube on its face, pushed at v0 = 2 m/s, mu = 0.4, 0.8 s (it stops
  at 0.51 s). Error: |distance - (v0^2 / (2 mu g) + mu s)| / (v0^2 / (2 mu g)), s the
  cube's sink over the run (0 for hard contact; a compliant cube that keeps sinking
  while it slides is pushed down by a larger normal force, friction mu N; the term is
  exact for any normal-force history, benchmarks/contact.py). Penetration: the
  deepest corner below the floor.
* **incline**: the same cube at rest on a slope with tan(theta) = 0.3 < mu = 0.4, 1 s.
  The slope is made by tilting gravity by theta about y (the same as tilting the plane;
  one floor for every engine). Error: the drift, the largest displacement of the cube's
  centre parallel to the floor (sinking into the floor does not count: that is the
  penetration column).

Engines:

* jaxmbd **hard**: ``contact="hard"`` (moreau_jean, its defaults tol 1e-10, max_iter 50,
  projection on), rA.
* jaxmbd **compliant**: the default ``contact="compliant"`` (gen_alpha with rho_inf = 0 and
  LineSearchNewton, rA; Hunt–Crossley with the default stiffness from the pair's mass
  and size, slip velocity 1e-4 m/s, restitution calibrated in closed form), and the
  same with ten times the stiffness (shorter impacts, less penetration: its better
  setting at small steps in benchmarks/contact.py). Compliant cubes start at their
  static penetration (the weight shared by four corners), so that they do not drop.
* **MuJoCo** 4 (C, ``mujoco.rollout``, one thread): Euler (default) and implicitfast,
  elliptic cone, condim 3, default solver, solimp and (slide, incline) solref. The ball's
  restitution comes from a direct solref "-K -B": MuJoCo's reference acceleration
  -B v - K r is a linear spring-damper per unit mass (exactly so beyond solimp's width,
  where the impedance is dmax and MuJoCo divides K by dmax^2 and B by dmax), whose
  damping ratio zeta = B / (2 sqrt K) gives, for a linear oscillator that leaves the
  floor where it touched it, e = exp(-pi zeta / sqrt(1 - zeta^2)), so
  zeta = -ln e / sqrt(pi^2 + ln^2 e) = 0.0709 for e = 0.8, B = 2 zeta sqrt K. Two
  stiffnesses: K = 1e5 and 1e6 1/s^2 (impact 9.9 ms and 3.1 ms). The restitution MuJoCo
  really achieves is measured twice: from the apex ratios of each run, and from one
  impact at 2.97 m/s without gravity at a fine step (RK4, 4000 steps per impact); a
  unilateral spring-damper (MuJoCo's normal force cannot pull) releases the ball when its
  force, not its depth, reaches zero, which raises e above the linear oscillator's (that
  clamped model's e is computed in closed form here too).

Timing: jaxmbd runs ``mbd.simulate`` with ``progress=`` and one ``chunk_size`` per problem
(the steps of the largest h), so that one compiled chunk serves every h (h is traced);
the run time includes the chunks' dispatch and the Solution's assembly; compile time is
the first call's time less the median run. MuJoCo: ``rollout`` of the whole run. Medians
of ``--repeats`` runs in one process (two for a run over 2 s).

**2. Steps/s against N** (h = 1e-3, 0.3 s; ``--parts stack``). Written when box-box
contact had no narrow phase in jaxmbd, so the "box stack" was first replaced by what
existed: (a) a row of N cubes on the floor, 0.3 m apart (box-floor pairs only), every
other one sliding at 1 m/s, the others resting; (b) a vertical stack of N spheres
(sphere-sphere pairs between neighbours and the bottom sphere on the floor), 0.1 mm apart
at the start. Hard against compliant (default numbers), one program per N.
``--parts boxstack``: the box stack itself (box-box narrow phase of commit 18937d3), N
cubes face to face, touching at the start, 0.1 s (16 slots a box-box pair: the hard step's
dense system grows fast), and MuJoCo C's steps/s on the same stack.

**3. Gradient cost**: ``jax.value_and_grad`` of a loss through the run divided by the
forward run of the same loss (both jitted, compile apart): the ball's first apex after
its bounce (h = 1e-3, 0.55 s; d/de = 2 e h0 = 0.72) and the sliding cube's position at
0.6 s, after it stopped (d/dmu = -v0^2 / (2 mu^2 g) = -1.274), hard against compliant.

Both engines run on one core: ``OPENBLAS_NUM_THREADS=1`` is set before NumPy and JAX load
(see benchmarks/contact.py). The persistent compilation cache
(~/.cache/jaxmbd/xla, set by ``import jaxmbd``) keeps compile times of a second run short;
the compile column is then the cache's load time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see the module docstring

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks import problems  # noqa: E402
from benchmarks._harness import RESULTS, command, repeat, timing_fields, write_csv  # noqa: E402
from benchmarks.problems import cube_inertia  # noqa: E402

OUT = RESULTS
STEM = "bench_hard_contact"
G = 9.81

BALL = dict(radius=0.05, mass=1.0, drop=0.45, e=0.8, mu=0.5, t_end=1.6)
CUBE = dict(half=0.1, mass=2.0, mu=0.4)
SLIDE = dict(v0=2.0, t_end=0.8)
INCLINE = dict(tan=0.3, t_end=1.0)
CASES = ("ball", "slide", "incline")
H_SWEEP = (1e-2, 2.5e-3, 1e-3, 2.5e-4)  # every horizon is a multiple of the largest step
MUJOCO_K = (1e5, 1e6)  # the ball's direct solref stiffnesses (1/s^2)
STIFFER = 10.0
JAXMBD = ("jaxmbd hard", "jaxmbd compliant", f"jaxmbd compliant, stiffness x{STIFFER:g}")
MUJOCO_INTEGRATORS = ("Euler", "implicitfast")


def zeta_linear(e):
    """The damping ratio of a linear oscillator whose speed after one half-period of
    contact is e times the speed before: e = exp(-pi zeta / sqrt(1 - zeta^2))."""
    log = np.log(e)
    return -log / np.sqrt(np.pi**2 + log**2)


def e_clamped(zeta):
    """e of the unilateral spring-damper x'' + 2 zeta w x' + w^2 x = 0 (force >= 0): the
    ball leaves when the force w^2 x + 2 zeta w x' reaches zero, at w_d t = pi -
    atan(2 zeta sqrt(1 - zeta^2) / (1 - 2 zeta^2)) (Schwager & Poschel, PRE 75 (2007)
    051304, without their gravity)."""
    wd = np.sqrt(1 - zeta**2)
    phase = np.pi - np.arctan2(2 * zeta * wd, 1 - 2 * zeta**2)
    t = phase / wd  # in units of 1 / w
    return np.exp(-zeta * t) * abs(np.cos(phase) - zeta / wd * np.sin(phase))


def gravity(case):
    if case != "incline":
        return np.array([0.0, 0.0, -G])
    theta = np.arctan(INCLINE["tan"])
    return G * np.array([np.sin(theta), 0.0, -np.cos(theta)])


def horizon(case):
    return {"ball": BALL, "slide": SLIDE, "incline": INCLINE}[case]["t_end"]


def steps(case, h):
    return int(round(horizon(case) / h))


# ---------------------------------------------------------------------------- jaxmbd models


def jaxmbd_model(case, *, stiffness_factor=1.0, hard=False):
    """The problem as a jaxmbd model; compliant cubes start at their static penetration."""
    import equinox as eqx

    if case == "ball":
        model = problems.ball(radius=BALL["radius"], mass=BALL["mass"], height=BALL["drop"],
                              friction=BALL["mu"], restitution=BALL["e"],
                              gravity=gravity(case), name=case)  # fmt: skip
    else:
        v0 = SLIDE["v0"] if case == "slide" else 0.0
        model = problems.cube(half=CUBE["half"], mass=CUBE["mass"], friction=CUBE["mu"],
                              rdot=(v0, 0, 0), gravity=gravity(case), name=case)  # fmt: skip
    if stiffness_factor != 1.0:
        stiffer = model.contacts.stiffness * stiffness_factor
        model = eqx.tree_at(lambda mo: mo.contacts.stiffness, model, stiffer)
    if case != "ball" and not hard:
        K = float(model.contacts.stiffness[0])
        weight = CUBE["mass"] * -gravity(case)[2]
        depth = (weight / 4 / K) ** (1 / float(model.contacts.exponent[0]))
        model = eqx.tree_at(lambda mo: mo.r0, model, model.r0.at[0, 2].add(-depth))
    return model


def _variant_model(case, label):
    if label == "jaxmbd hard":
        return jaxmbd_model(case, hard=True), "hard"
    factor = STIFFER if "stiffness" in label else 1.0
    return jaxmbd_model(case, stiffness_factor=factor), "compliant"


def _quiet(done, total):
    pass


def _failure(sol):
    status = np.asarray(sol.status)
    if np.any(status != 0):
        from jaxmbd._results import code_message

        k = int(np.argmax(status != 0))
        return f"step {k} (t = {float(sol.t[k]):.4g} s): {code_message(int(status[k]))}"
    if not np.all(np.isfinite(np.asarray(sol.r))):
        return "non-finite state"
    return None


def _timed(rec, first, times):
    median = statistics.median(times)
    return {
        **rec,
        **timing_fields(first, times),
        "steps_per_s": rec["steps"] / median,
        "us_per_step": 1e6 * median / rec["steps"],
        "wall_per_sim_s": median / (rec["steps"] * rec["h"]),
    }


def _repeat(call, repeats, first_seconds, long_run=2.0):
    return repeat(call, repeats, long_run=long_run)


def run_jaxmbd(case, label, hs, repeats):
    """Records (one per h) and outputs (r, A per saved step) of one jaxmbd variant."""
    import jax

    import jaxmbd as mbd

    model, contact = _variant_model(case, label)
    chunk = steps(case, max(hs))

    def call(h):
        sol = mbd.simulate(model, formulation="rA", contact=contact, h=h, t_end=horizon(case),
                           progress=_quiet,
                           chunk_size=chunk, throw=False)  # fmt: skip
        return jax.block_until_ready(sol)

    records, outputs = [], {}
    for h in hs:
        rec = dict(part="wp", case=case, engine="jaxmbd", variant=label, h=h, steps=steps(case, h))
        start = time.perf_counter()
        sol = call(h)
        first = time.perf_counter() - start
        failed = _failure(sol)
        if failed:
            records.append({**rec, "failed": failed})
            print(f"{case} {label} h={h:g}: failed, {failed}", flush=True)
            continue
        times = _repeat(lambda h=h: call(h), repeats, first)
        outputs[h] = dict(r=np.asarray(sol.r[:, 0]), A=np.asarray(sol.A[:, 0]))
        rec["iterations_mean"] = float(np.mean(np.asarray(sol.iterations)[1:]))
        rec["iterations_max"] = int(np.max(np.asarray(sol.iterations)))
        records.append(_timed(rec, first, times))
    return records, outputs


# ---------------------------------------------------------------------------- MuJoCo


def ball_solref(K, e=BALL["e"]):
    zeta = zeta_linear(e)
    return (-K, -2 * zeta * np.sqrt(K))


def mujoco_xml(case, h, integrator, solref=None, grav=None):
    g = gravity(case) if grav is None else grav
    option = (
        f'<option timestep="{h}" integrator="{integrator}" cone="elliptic" '
        f'gravity="{g[0]:.17g} {g[1]:.17g} {g[2]:.17g}"/>'
    )
    ref = ""
    if solref is not None:
        ref = f'<default><geom solref="{solref[0]:.17g} {solref[1]:.17g}"/></default>'
    if case == "ball":
        R, m, mu = BALL["radius"], BALL["mass"], BALL["mu"]
        i = 0.4 * m * R * R
        inner = (f'<inertial pos="0 0 0" mass="{m}" diaginertia="{i} {i} {i}"/>'
                 f'<geom type="sphere" size="{R}" friction="{mu} 0.005 0.0001"/>')  # fmt: skip
        z = R + BALL["drop"]
    else:
        a, m, mu = 2 * CUBE["half"], CUBE["mass"], CUBE["mu"]
        i = cube_inertia(m, a)
        inner = (f'<inertial pos="0 0 0" mass="{m}" diaginertia="{i} {i} {i}"/>'
                 f'<geom type="box" size="{a / 2} {a / 2} {a / 2}" '
                 f'friction="{mu} 0.005 0.0001"/>')  # fmt: skip
        z = a / 2
    mu = BALL["mu"] if case == "ball" else CUBE["mu"]
    floor = f'<geom type="plane" size="0 0 1" friction="{mu} 0.005 0.0001"/>'
    body = f'<body pos="0 0 {z:.17g}"><freejoint/>{inner}</body>'
    return f"<mujoco>{option}{ref}<worldbody>{floor}{body}</worldbody></mujoco>"


def _rotation(quat):
    """Rotation matrices (T, 3, 3) of MuJoCo's (w, x, y, z) quaternions (T, 4)."""
    w, x, y, z = (quat / np.linalg.norm(quat, axis=-1, keepdims=True)).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)  # fmt: skip


def run_mujoco(case, integrator, h, repeats, *, K=None):
    import mujoco
    from mujoco import rollout

    solref = None if K is None else ball_solref(K)
    m = mujoco.MjModel.from_xml_string(mujoco_xml(case, h, integrator, solref))
    d = mujoco.MjData(m)
    if case == "slide":
        d.qvel[0] = SLIDE["v0"]
    mujoco.mj_forward(m, d)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, state0, spec)
    n = steps(case, h)
    label = f"MuJoCo {integrator}" + ("" if K is None else f", K={K:.0e}")
    rec = dict(part="wp", case=case, engine="MuJoCo", variant=label, h=h, steps=n)
    if solref is not None:
        rec["solref"] = [float(x) for x in solref]
    times, warnings, state = [], 0, None
    for _ in range(max(repeats, 3)):
        bad = d.warning[mujoco.mjtWarning.mjWARN_BADQACC]
        bad.number = 0
        start = time.perf_counter()
        state, _ = rollout.rollout(m, d, state0[None], nstep=n)
        times.append(time.perf_counter() - start)
        warnings += bad.number
    if warnings:
        reason = "unstable (MuJoCo warned of a bad acceleration and reset the state)"
        print(f"{case} {label} h={h:g}: {reason}", flush=True)
        return {**rec, "failed": reason}, None
    qpos = np.concatenate([state0[None, 1 : 1 + m.nq], state[0, :, 1 : 1 + m.nq]])
    out = dict(r=qpos[:, :3], A=_rotation(qpos[:, 3:7]))
    return _timed(rec, times[0], times), out


def mujoco_restitution(K, speed=None):
    """e of MuJoCo's ball contact with solref (-K, -B) at the first impact's speed without
    gravity: RK4 at 4000 steps per undamped half-period pi / sqrt(K)."""
    import mujoco

    speed = np.sqrt(2 * G * BALL["drop"]) if speed is None else speed
    h = np.pi / np.sqrt(K) / 4000
    m = mujoco.MjModel.from_xml_string(
        mujoco_xml("ball", h, "RK4", ball_solref(K), grav=np.zeros(3))
    )
    d = mujoco.MjData(m)
    d.qpos[2] = BALL["radius"]
    d.qvel[2] = -speed
    for _ in range(40000):
        mujoco.mj_step(m, d)
        if d.qvel[2] > 0 and d.qpos[2] >= BALL["radius"]:
            return float(d.qvel[2] / speed)
    return float("nan")


# ---------------------------------------------------------------------------- errors


def apex_ratios(z):
    """Ratios of consecutive apex heights above touching (the first: the drop). An apex is
    a local maximum of the sampled height at least 1 mm above touching: the flights'
    highest samples (a hard-contact impact may leave no sample below the floor, so flights
    are not found by the gap's sign)."""
    gap = np.asarray(z) - BALL["radius"]
    k = np.arange(1, len(gap) - 1)
    peak = (gap[k] > gap[k - 1]) & (gap[k] >= gap[k + 1]) & (gap[k] > 1e-3)
    apexes = [BALL["drop"], *gap[k[peak]].tolist()]
    return np.array(apexes[1:]) / np.array(apexes[:-1])


CORNERS = CUBE["half"] * np.array(
    [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float
)


def penetration(case, r, A):
    """The largest depth below the floor over the run (m; 0 if never below)."""
    if case == "ball":
        lowest = r[:, 2] - BALL["radius"]
    else:
        lowest = (r[:, None, 2] + np.einsum("tij,kj->tki", A, CORNERS)[..., 2]).min(axis=1)
    return float(max(0.0, -lowest.min()))


def errors(case, out):
    r, A = out["r"], out["A"]
    rec = dict(penetration=penetration(case, r, A))
    if case == "ball":
        ratios = apex_ratios(r[:, 2])[:3]
        rec["apex_ratios"] = ratios.tolist()
        rec["e_first_bounce"] = float(np.sqrt(ratios[0])) if len(ratios) else float("nan")
        rec["error"] = (float(np.max(np.abs(ratios / BALL["e"] ** 2 - 1)))
                        if len(ratios) == 3 else float("inf"))  # fmt: skip
    elif case == "slide":
        mu, v0 = CUBE["mu"], SLIDE["v0"]
        exact = v0**2 / (2 * mu * G)
        distance = r[-1, 0] - r[0, 0]
        sink = r[0, 2] - r[-1, 2]
        rec["distance"] = float(distance)
        rec["sink"] = float(sink)
        rec["error"] = float(abs(distance - (exact + mu * sink)) / exact)
    else:
        rec["error"] = float(np.max(np.linalg.norm(r[:, :2] - r[0, :2], axis=-1)))
    return rec


# ---------------------------------------------------------------------------- part 1


def work_precision(hs, repeats):
    records, calibration = [], {}
    zeta = zeta_linear(BALL["e"])
    for K in MUJOCO_K:
        calibration[f"{K:.0e}"] = dict(
            K=K, B=-ball_solref(K)[1], zeta=zeta, e_linear=BALL["e"], e_clamped=e_clamped(zeta),
            e_measured=mujoco_restitution(K),
        )  # fmt: skip
    for case in CASES:
        print(f"--- {case}", flush=True)
        outputs = {}
        for integrator in MUJOCO_INTEGRATORS:
            for K in MUJOCO_K if case == "ball" else (None,):
                for h in hs:
                    rec, out = run_mujoco(case, integrator, h, repeats, K=K)
                    records.append(rec)
                    outputs[rec["variant"], h] = out
        for label in JAXMBD:
            recs, outs = run_jaxmbd(case, label, hs, repeats)
            records += recs
            for h, out in outs.items():
                outputs[label, h] = out
        for rec in records:
            if rec["case"] == case and "failed" not in rec:
                rec.update(errors(case, outputs[rec["variant"], rec["h"]]))
                print(_line(rec), flush=True)
        import jax

        jax.clear_caches()
    return records, calibration


def _line(rec):
    return (
        f"{rec['case']:8s} {rec['variant']:36s} h={rec['h']:<8.3g} "
        f"{rec['wall_per_sim_s']:9.3g} s/s  compile {rec['compile_s']:6.1f} s  "
        f"error {rec['error']:.3g}  penetration {rec['penetration']:.3g}"
    )


# ---------------------------------------------------------------------------- part 2


def many_bodies(kind, n, *, hard):
    import equinox as eqx

    import jaxmbd as mbd

    b = mbd.ModelBuilder(f"{kind}{n}", gravity=(0.0, 0.0, -G))
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    if kind == "boxes":
        a, m = 0.1, 1.0
        for k in range(n):
            b.add_body(f"b{k}", mass=m, inertia=[cube_inertia(m, a)] * 3,
                       r=(0.0, 0.3 * k, a / 2), rdot=(1.0 if k % 2 else 0.0, 0.0, 0.0),
                       shapes=[mbd.geometry.box((a, a, a))])  # fmt: skip
            b.add_contact(f"b{k}", "ground", friction=0.5)
        model = b.build()
        if not hard:  # start at the static penetration
            K = float(model.contacts.stiffness[0])
            depth = (m * G / 4 / K) ** (1 / 1.5)
            model = eqx.tree_at(lambda mo: mo.r0, model, model.r0.at[:, 2].add(-depth))
        return model
    if kind == "box stack":  # face to face, touching (box-box: 16 corner slots a pair)
        return problems.box_stack(n)
    R, m = 0.05, 0.5
    for k in range(n):
        b.add_body(f"s{k}", mass=m, inertia=[0.4 * m * R * R] * 3,
                   r=(0.0, 0.0, R + 1e-4 + k * (2 * R + 1e-4)),
                   shapes=[mbd.geometry.sphere(R)])  # fmt: skip
        b.add_contact(f"s{k}", "ground" if k == 0 else f"s{k - 1}", friction=0.5)
    return b.build()


def mujoco_box_stack(n, h, t_end, repeats):
    """MuJoCo's steps/s on the same box stack (Euler, elliptic cone, defaults)."""
    import mujoco
    from mujoco import rollout

    a, m = 0.1, 1.0
    i = cube_inertia(m, a)
    bodies = "".join(
        f'<body pos="0 0 {a / 2 + a * k:.17g}"><freejoint/><inertial pos="0 0 0" mass="{m}" '
        f'diaginertia="{i} {i} {i}"/><geom type="box" size="{a / 2} {a / 2} {a / 2}" '
        f'friction="0.5 0.005 0.0001"/></body>'
        for k in range(n)
    )
    xml = (f'<mujoco><option timestep="{h}" cone="elliptic"/><worldbody><geom type="plane" '
           f'size="0 0 1" friction="0.5 0.005 0.0001"/>{bodies}</worldbody></mujoco>')  # fmt: skip
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    nstep = int(round(t_end / h))
    times = []
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        state, _ = rollout.rollout(model, data, state0[None], nstep=nstep)
        times.append(time.perf_counter() - start)
    z = state[0, :, 1 : 1 + model.nq].reshape(nstep, n, 7)[:, :, 2]
    rec = dict(part="boxstack", case="box stack", engine="MuJoCo", variant="MuJoCo Euler",
               n_bodies=n, h=h, steps=nstep)  # fmt: skip
    rec = _timed(rec, times[0], times)
    rec["lowest_z_over_start"] = float((z - (a / 2 + a * np.arange(n))).min())
    return rec


def stack_speed(sizes, repeats, h=1e-3, t_end=0.3, part="stack"):
    import jax

    import jaxmbd as mbd

    records = []
    for kind, ns in sizes.items():
        for n in ns:
            if kind == "box stack":
                records.append(mujoco_box_stack(n, h, t_end, repeats))
            for contact in ("hard", "compliant"):
                model = many_bodies(kind, n, hard=contact == "hard")

                def call(model=model, contact=contact):
                    sol = mbd.simulate(model, contact=contact, h=h, t_end=t_end, throw=False)
                    return jax.block_until_ready(sol)

                rec = dict(part=part, case=kind, engine="jaxmbd", variant=f"jaxmbd {contact}",
                           n_bodies=n, h=h, steps=int(round(t_end / h)))  # fmt: skip
                start = time.perf_counter()
                sol = call()
                first = time.perf_counter() - start
                failed = _failure(sol)
                if failed:
                    records.append({**rec, "failed": failed})
                    print(f"{kind} N={n} {contact}: failed, {failed}", flush=True)
                    continue
                times = _repeat(call, repeats, first)
                rec = _timed(rec, first, times)
                r = np.asarray(sol.r)
                rec["lowest_z_over_start"] = float((r[:, :, 2] - r[0, :, 2]).min())
                rec["iterations_mean"] = float(np.mean(np.asarray(sol.iterations)[1:]))
                records.append(rec)
                print(f"{kind:6s} N={n:2d} {contact:9s} {rec['steps_per_s']:8.0f} steps/s  "
                      f"compile {rec['compile_s']:.1f} s", flush=True)  # fmt: skip
            jax.clear_caches()
    return records


# ---------------------------------------------------------------------------- part 3


def gradient_cost(repeats):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd

    R, e, h0 = BALL["radius"], BALL["e"], BALL["drop"]
    mu, v0 = CUBE["mu"], SLIDE["v0"]
    problems = {
        # (model builder, parameter setter, loss of the Solution, parameter, closed form)
        "ball": (
            lambda hard: jaxmbd_model("ball", hard=hard),
            lambda m, p: eqx.tree_at(lambda m: m.contacts.restitution, m, jnp.array([p])),
            0.55, lambda sol: jnp.max(sol.r[400:, 0, 2]) - R, e, 2 * e * h0, "d(apex)/de",
        ),
        "slide": (
            lambda hard: jaxmbd_model("slide", hard=hard),
            lambda m, p: eqx.tree_at(lambda m: m.contacts.friction, m, jnp.array([p])),
            0.6, lambda sol: sol.r[-1, 0, 0] - sol.r[0, 0, 0], mu, -(v0**2) / (2 * mu**2 * G),
            "d(x at 0.6 s)/dmu",
        ),
    }  # fmt: skip
    records = []
    for case, (build, setter, t_end, loss_of, p0, exact, what) in problems.items():
        for contact in ("hard", "compliant"):
            model = build(contact == "hard")

            def loss(p, model=model, contact=contact, setter=setter, loss_of=loss_of,
                     t_end=t_end):  # fmt: skip
                sol = mbd.simulate(setter(model, p), contact=contact, h=1e-3, t_end=t_end)
                return loss_of(sol)

            forward = jax.jit(loss)
            both = jax.jit(jax.value_and_grad(loss))
            p = jnp.asarray(p0)
            rec = dict(part="grad", case=case, engine="jaxmbd", variant=f"jaxmbd {contact}",
                       h=1e-3, steps=int(round(t_end / 1e-3)), what=what, exact=exact)  # fmt: skip
            out = {}
            for name, fn in (("forward", forward), ("grad", both)):
                start = time.perf_counter()
                value = jax.block_until_ready(fn(p))
                first = time.perf_counter() - start
                times = _repeat(lambda fn=fn, p=p: jax.block_until_ready(fn(p)), repeats, first)
                median = statistics.median(times)
                out[name] = value
                rec[f"{name}_compile_s"] = max(first - median, 0.0)
                rec[f"{name}_run_s"] = median
                rec[f"{name}_repeats"] = len(times)
            rec["loss"] = float(out["forward"])
            rec["gradient"] = float(out["grad"][1])
            rec["ratio"] = rec["grad_run_s"] / rec["forward_run_s"]
            records.append(rec)
            print(f"{case:6s} {contact:9s} forward {rec['forward_run_s']:.3f} s  grad "
                  f"{rec['grad_run_s']:.3f} s  ratio {rec['ratio']:.2f}  gradient "
                  f"{rec['gradient']:.5g} (closed form {exact:.5g})", flush=True)  # fmt: skip
            jax.clear_caches()
    return records


# ---------------------------------------------------------------------------- report


def frontier(points):
    out, best = [], np.inf
    for w, e in sorted(points):
        if e < best:
            out.append((w, e))
            best = e
    return out


def _fmt(x, spec=".3g"):
    if x is None:
        return ""
    if isinstance(x, float) and not np.isfinite(x):
        return "fewer than 3 bounces" if x == np.inf else "nan"
    return format(x, spec)


def write_records(records, path):
    write_csv(path, [{k: json.dumps(v) if isinstance(v, list) else v for k, v in rec.items()}
                     for rec in records])  # fmt: skip


def _colour(variant):
    palette = {
        "jaxmbd hard": "tab:red",
        "jaxmbd compliant": "tab:purple",
        f"jaxmbd compliant, stiffness x{STIFFER:g}": "tab:pink",
        "MuJoCo Euler": "tab:blue",
        "MuJoCo implicitfast": "tab:cyan",
        "MuJoCo Euler, K=1e+05": "tab:blue",
        "MuJoCo implicitfast, K=1e+05": "tab:cyan",
        "MuJoCo Euler, K=1e+06": "tab:green",
        "MuJoCo implicitfast, K=1e+06": "tab:olive",
    }
    return palette.get(variant, "tab:gray")


def plot(records, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wp = [r for r in records if r["part"] == "wp" and "failed" not in r]
    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    ylabel = {"ball": "max |apex ratio / e² - 1|", "slide": "|stopping distance error| / exact",
              "incline": "drift parallel to the floor (m)"}  # fmt: skip
    floor = 1e-16  # exact zeros on the log axes
    for col, case in enumerate(CASES):
        for row, key in enumerate(("error", "penetration")):
            ax = axes[row, col]
            for variant in dict.fromkeys(r["variant"] for r in wp if r["case"] == case):
                pts = sorted((r["wall_per_sim_s"], r[key], r["h"]) for r in wp
                             if r["case"] == case and r["variant"] == variant
                             and np.isfinite(r[key]))  # fmt: skip
                if not pts:
                    continue
                w, e, _ = zip(*pts, strict=True)
                style = "--" if variant.startswith("MuJoCo") else "-"
                marker = "s" if "K=1e+06" in variant or "implicitfast" in variant else "o"
                ax.loglog(w, np.maximum(e, floor), style, marker=marker, color=_colour(variant),
                          label=variant)  # fmt: skip
            ax.set_title(f"{case}: {'error' if row == 0 else 'max penetration'}")
            ax.set_xlabel("run time per simulated second (s)")
            ax.set_ylabel(ylabel[case] if row == 0 else "max penetration (m)")
            ax.grid(True, which="both", alpha=0.3)
        axes[0, col].legend(fontsize=7)
    fig.suptitle(f"Exact (hard) vs compliant contact vs MuJoCo; h in {H_SWEEP}; values below "
                 f"{floor:g} (exact zeros, round-off) drawn at {floor:g}")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(data, path):
    records, calibration = data["records"], data["calibration"]
    lines = [
        "# Exact-contact benchmark",
        "",
        f"Machine: {data['machine']}, shared with other engineers' test runs and training: "
        "one run of each part at modest sizes; every time is a median of runs in one "
        "process (the runs column), so quote ratios rather than absolute times.",
        "",
        "| part | command | date | load average start / end | minutes |",
        "|---|---|---|---|---|",
        *(
            f"| {' '.join(r['parts'])} | `{r['command']}` | {r['date']} | "
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f} | {r['total_s'] / 60:.1f} |"
            for r in data["runs"]
        ),  # fmt: skip
        "",
        "Problems, engines, error definitions and timing: the docstring of "
        "benchmarks/hard_contact/compare.py. Figure: bench_hard_contact.png; all numbers: "
        "bench_hard_contact.csv / .json.",
        "",
    ]
    wp = [r for r in records if r["part"] == "wp"]
    if wp:
        lines += _wp_section(wp, calibration)
    stack = [r for r in records if r["part"] in ("stack", "boxstack")]
    if stack:
        lines += _stack_section(stack)
    grad = [r for r in records if r["part"] == "grad"]
    if grad:
        lines += _grad_section(grad)
    if data.get("previous"):
        lines += _before_after(data["records"], data["previous"])
    lines += ["## Reading", "", *data.get("reading", ["(to be written from the numbers above)"])]
    path.write_text("\n".join(lines) + "\n")


def _wp_section(wp, calibration):
    lines = ["## 1. Work-precision on the closed-form cases", ""]
    if calibration:
        lines += [
            "MuJoCo's ball restitution: solref = (-K, -B), B = 2 zeta sqrt(K), zeta = "
            "-ln e / sqrt(pi² + ln² e) for e = 0.8 (the linear oscillator's relation, "
            "derivation in the module docstring).",
            "",
            "| K (1/s²) | B (1/s) | zeta | e intended | e of the unilateral spring-damper "
            "(closed form) | e MuJoCo achieves, one impact at 2.97 m/s, no gravity, fine RK4 |",
            "|---|---|---|---|---|---|",
        ]
        for c in calibration.values():
            lines.append(f"| {c['K']:.0e} | {c['B']:.2f} | {c['zeta']:.4f} | {c['e_linear']:.3f} "
                         f"| {c['e_clamped']:.4f} | {c['e_measured']:.4f} |")  # fmt: skip
        lines.append("")
    for case in CASES:
        recs = [r for r in wp if r["case"] == case]
        extra = {"ball": "apex ratios / e² (e from the 1st bounce)", "slide": "distance (m)",
                 "incline": ""}[case]  # fmt: skip
        lines += [
            f"### {case}",
            "",
            "| variant | h (s) | steps | wall / sim s | µs/step | compile (s) | runs | "
            f"Newton its / step | error | max penetration (m) | {extra} |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in recs:
            head = f"| {r['variant']} | {r['h']:g} | {r['steps']} |"
            if "failed" in r:
                lines.append(f"{head} failed: {r['failed']} | | | | | | | |")
                continue
            if case == "ball":
                ratios = ", ".join(f"{x / BALL['e'] ** 2:.4f}" for x in r["apex_ratios"])
                more = f"{ratios} (e = {r['e_first_bounce']:.4f})"
            elif case == "slide":
                more = f"{r['distance']:.6f}"
            else:
                more = ""
            lines.append(
                f"{head} {r['wall_per_sim_s']:.3g} | {r['us_per_step']:.1f} | "
                f"{r['compile_s']:.1f} | {r['repeats']} | {_its(r)} | {_fmt(r['error'])} | "
                f"{_fmt(r['penetration'])} | {more} |"
            )
        lines += ["", *_equal_time(recs), ""]
    return lines


def _its(rec):
    """Mean (max) Newton iterations per step of a jaxmbd run; hard: the velocity problem's
    and the projection's together."""
    if "iterations_mean" not in rec:
        return ""
    top = f" ({rec['iterations_max']})" if "iterations_max" in rec else ""
    return f"{rec['iterations_mean']:.1f}{top}"


def _equal_time(recs):
    """Per engine family, the least error reached within each measured wall time."""
    ok = [r for r in recs if "failed" not in r]
    families = {
        "jaxmbd hard": lambda v: v == "jaxmbd hard",
        "jaxmbd compliant": lambda v: v.startswith("jaxmbd compliant"),
        "MuJoCo": lambda v: v.startswith("MuJoCo"),
    }
    fronts = {
        name: frontier([(r["wall_per_sim_s"], r["error"]) for r in ok if test(r["variant"])])
        for name, test in families.items()
    }
    out = [
        "Least error reached (the Pareto frontier over variants and h) and the fastest run "
        "that reaches it:",
        "",
        "| family | least error | at wall / sim s | fastest run's wall / sim s (its error) |",
        "|---|---|---|---|",
    ]
    for name, front in fronts.items():
        if not front:
            continue
        w_best, e_best = front[-1]
        w_fast, e_fast = front[0]
        out.append(f"| {name} | {_fmt(e_best)} | {w_best:.3g} | {w_fast:.3g} ({_fmt(e_fast)}) |")
    return out


def _stack_section(stack):
    lines = [
        "## 2. Steps/s against the number of bodies (h = 1e-3; 0.3 s, the box stack 0.1 s)",
        "",
        "Measured first without box-box contact (jaxmbd had no box-box narrow phase when this "
        "part ran): a row of N cubes on the floor (every other one sliding at 1 m/s) and a "
        "vertical stack of N spheres (0.1 mm apart at the start). The box-box narrow phase "
        "landed during the benchmark (commit 18937d3): then the box stack itself, N cubes "
        "face to face, touching at the start, 0.1 s, with MuJoCo C's steps/s on the same "
        "stack (Euler, elliptic cone) for reference. 'lowest z' is the largest sink of a "
        "body below its start over the run (the stack's gaps, then penetration).",
        "",
        "| problem | N | contact | steps/s | µs/step | compile (s) | runs | Newton its / step "
        "| lowest z (m) | hard / compliant time per step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in stack:
        head = f"| {r['case']} | {r['n_bodies']} | {r['variant']} |"
        if "failed" in r:
            lines.append(f"{head} failed: {r['failed']} | | | | | | |")
            continue
        ratio = ""
        if r["variant"] == "jaxmbd compliant":
            hard = [x for x in stack if x["case"] == r["case"] and x["n_bodies"] == r["n_bodies"]
                    and x["variant"] == "jaxmbd hard" and "failed" not in x]  # fmt: skip
            if hard:
                ratio = f"{hard[0]['us_per_step'] / r['us_per_step']:.2f}"
        lines.append(f"{head} {r['steps_per_s']:.0f} | {r['us_per_step']:.0f} | "
                     f"{r['compile_s']:.1f} | {r['repeats']} | {_its(r)} | "
                     f"{r['lowest_z_over_start']:.2g} | {ratio} |")  # fmt: skip
    return [*lines, ""]


def _grad_section(grad):
    lines = [
        "## 3. Gradient cost per step (h = 1e-3)",
        "",
        "| problem | contact | steps | forward run (s) | value_and_grad run (s) | ratio | "
        "compile forward / grad (s) | gradient | closed form |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in grad:
        lines.append(
            f"| {r['case']}: {r['what']} | {r['variant']} | {r['steps']} | "
            f"{r['forward_run_s']:.3f} | {r['grad_run_s']:.3f} | {r['ratio']:.2f} | "
            f"{r['forward_compile_s']:.0f} / {r['grad_compile_s']:.0f} | {r['gradient']:.5g} | "
            f"{r['exact']:.5g} |"
        )
    return [*lines, ""]


def _before_after(records, previous):
    """The jaxmbd timings of the latest runs against the runs they replaced (``previous``:
    their metadata and records, kept in the json): steps/s, µs per step (work-precision,
    jaxmbd's variants at the default stiffness) and the gradients' run times."""
    runs = "; ".join(f"{r['date']}, load {r['load'][0]:.1f} / {r['load'][1]:.1f}"
                     for r in previous["runs"])  # fmt: skip
    lines = [
        "## Before / after (this run against the one it replaced)",
        "",
        f"The replaced runs: {runs}. Same machine, other code (see the Reading); the "
        "compliant and MuJoCo rows did not change and show how far the load moved.",
        "",
        "| problem | variant | before | after | after / before |",
        "|---|---|---|---|---|",
    ]

    def key(r):
        return (r["part"], r["case"], r.get("n_bodies"), r["variant"], r.get("h"))

    old = {key(r): r for r in previous["records"] if "failed" not in r}
    for r in records:
        o = old.get(key(r))
        if o is None or "failed" in r:
            continue
        if r["part"] in ("boxstack", "stack"):
            name = f"{r['case']} N = {r['n_bodies']}, steps/s"
            a, b = o["steps_per_s"], r["steps_per_s"]
            lines.append(f"| {name} | {r['variant']} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
        elif r["part"] == "wp" and r["variant"] in ("jaxmbd hard", "jaxmbd compliant"):
            name = f"{r['case']} h = {r['h']:g}, µs/step"
            a, b = o["us_per_step"], r["us_per_step"]
            lines.append(f"| {name} | {r['variant']} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
        elif r["part"] == "grad":
            for field, what in (("forward_run_s", "forward run (s)"),
                                ("grad_run_s", "value_and_grad run (s)"),
                                ("ratio", "gradient / forward")):  # fmt: skip
                a, b = o[field], r[field]
                lines.append(f"| {r['case']}: {what} | {r['variant']} | {a:.3g} | {b:.3g} | "
                             f"{b / a:.2f} |")  # fmt: skip
    return [*lines, ""]


# ---------------------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two steps, small N")
    parser.add_argument("--parts", nargs="+", default=["wp", "stack", "boxstack", "grad"],
                        choices=["wp", "stack", "boxstack", "grad"])  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the markdown and the figure from the json")  # fmt: skip
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    json_path = OUT / f"{STEM}.json"
    if args.report_only:
        data = json.loads(json_path.read_text())
    else:
        from benchmarks._harness import machine

        start = time.perf_counter()
        load0 = os.getloadavg()[0]
        hs = (H_SWEEP[0], H_SWEEP[2]) if args.quick else H_SWEEP
        sizes = ({"boxes": (1, 2), "spheres": (2, 4)} if args.quick
                 else {"boxes": (1, 2, 4, 8), "spheres": (2, 4, 8)})  # fmt: skip
        records, calibration = [], {}
        if "wp" in args.parts:
            recs, calibration = work_precision(hs, args.repeats)
            records += recs
        if "stack" in args.parts:
            records += stack_speed(sizes, args.repeats)
        if "boxstack" in args.parts:  # box-box contact: a stack of N boxes, 0.1 s
            boxes = (2,) if args.quick else (2, 3)
            records += stack_speed({"box stack": boxes}, args.repeats, t_end=0.1,
                                   part="boxstack")  # fmt: skip
        if "grad" in args.parts:
            records += gradient_cost(args.repeats)
        data = dict(
            command=command(),
            machine=machine(),
            load=[load0, os.getloadavg()[0]],
            date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            total_s=time.perf_counter() - start,
            records=records,
            calibration=calibration,
        )
        if json_path.exists():  # the other parts' records and a reading kept
            old = json.loads(json_path.read_text())
            kept = [r for r in old["records"] if r["part"] not in args.parts]
            data["records"] = kept + records
            # the records this run replaces, for the report's before/after table (with
            # those an earlier run replaced for the other parts)
            before = old.get("previous", {"runs": [], "records": []})
            data["previous"] = dict(
                runs=[r for r in before["runs"] if not set(r["parts"]) <= set(args.parts)]
                + [r for r in old.get("runs", [old]) if set(r.get("parts", [])) &
                   set(args.parts)],
                records=[r for r in before["records"] if r["part"] not in args.parts]
                + [r for r in old["records"] if r["part"] in args.parts],
            )  # fmt: skip
            if "wp" not in args.parts:
                data["calibration"] = old.get("calibration", {})
            data["runs"] = [r for r in old.get("runs", [old]) if not set(r.get("parts", [])) <=
                            set(args.parts)]  # fmt: skip
            if "reading" in old:
                data["reading"] = old["reading"]
        data["runs"] = data.get("runs", []) + [
            {k: data[k] for k in ("command", "machine", "load", "date", "total_s")}
            | {"parts": args.parts}
        ]
        json_path.write_text(json.dumps(data, indent=1))
    write_records(data["records"], OUT / f"{STEM}.csv")
    if any(r["part"] == "wp" for r in data["records"]):
        plot(data["records"], OUT / f"{STEM}.png")
    report(data, OUT / f"{STEM}.md")
    print(f"wrote {OUT / STEM}.{{json,csv,md,png}}")


if __name__ == "__main__":
    main()
