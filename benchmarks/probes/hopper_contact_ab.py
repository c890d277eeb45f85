# ruff: noqa: E402
"""dm_control's hopper with its contacts as authored (defaults, its own step 0.005 s) in
another tree's jaxmbd (imported as jaxmbd_main) and this one's, in one process: steps/s of
``simulate`` inside ``jit`` (compile apart, runs alternated, medians) and the figures of
its contact test (tests/test_contact_joint.py: the floor's normal forces against the
vertical momentum's rate, the rest, the torso's pose). From this tree's root:

    JAXMBD_OTHER=/work/main python benchmarks/probes/hopper_contact_ab.py
"""

import os
import statistics
import time
import warnings

# isort: off
import benchmarks.probes._other_tree  # noqa: F401  (jaxmbd_main; caches off)

# isort: on
import dm_control
import jax
import jaxmbd_main as old
import numpy as np

import jaxmbd as new

N = int(os.environ.get("STEPS", "500"))
REP = int(os.environ.get("REP", "7"))
H = 0.005
G = 9.81
PATH = os.path.dirname(dm_control.__file__) + "/suite/hopper.xml"


def load(pkg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its sensors are not read
        return pkg.load_model(PATH)


def contact_figures(pkg, model):
    """The hopper contact test's quantities of a run of ``N`` steps with the defaults."""
    sol = pkg.simulate(model, t_end=N * H, h=H)
    c = model.contacts
    on_floor = np.array([c.pair_names[p].endswith("/ground") for p in c.slot_pair])
    floor = np.asarray(sol.contact.normal_force)[:, on_floor].sum(axis=1)
    mass = np.asarray(model.mass)
    weight = float(mass.sum()) * G
    rate = (mass * (G + np.asarray(sol.rddot[:, :, 2]))).sum(axis=1)
    return dict(
        integrator=sol.integrator,
        balance=float(np.max(np.abs(floor - rate)) / weight),
        rest=float(floor[-1] / weight - 1.0),
        qvel_end=float(np.linalg.norm(np.asarray(sol.qvel[-1]))),
        torso=float(1.0 + sol.qpos[-1, 1]),
        rooty=float(sol.qpos[-1, 2]),
    )


def final_qpos(pkg):
    return pkg.jit(lambda m: pkg.simulate(m, t_end=N * H, h=H).qpos[-1])


programs, figures = {}, {}
for name, pkg in (("main", old), ("branch", new)):
    model = load(pkg)
    run = final_qpos(pkg)
    t0 = time.perf_counter()
    jax.block_until_ready(run(model))
    programs[name] = (run, model, time.perf_counter() - t0)
    figures[name] = contact_figures(pkg, model)

times = {name: [] for name in programs}
for _ in range(REP):
    for name, (run, model, _) in programs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(run(model))
        times[name].append(time.perf_counter() - t0)

print(f"hopper, {N} steps of {H} s, load average {os.getloadavg()[0]:.1f}")
for name, (_, _, first) in programs.items():
    median = statistics.median(times[name])
    print(f"{name:7s} first call {first:6.1f} s, median {median * 1e3:7.1f} ms, "
          f"{N / median:8.0f} steps/s; {figures[name]}")  # fmt: skip
ratio = statistics.median(times["main"]) / statistics.median(times["branch"])
print(f"speed ratio branch / main: {ratio:.3f}")
