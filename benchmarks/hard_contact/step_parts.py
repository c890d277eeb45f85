"""Per-step cost of exact contact (``contact="hard"``), part by part.

Each part of one projected Moreau-Jean step (jaxmbd/integrators/moreau_jean.py) is jitted
alone and timed at the same state (median of repeated calls after a warm-up, so the
Python dispatch of one call, ~10-30 us, is in every figure): the narrow phase, the
unilateral rows' Jacobians, the velocity problem (warm-started from the last step's
impulses, and cold from zero impulses, when its Newton iterates), the position projection,
the whole step, and the whole step's reverse-mode derivative (a vjp of q_{k+1}, v_{k+1}
with respect to q_k, v_k and the friction coefficients). ``--before FILE`` times the same
parts with an earlier version of the module in the same process, so the ratios compare like
with like on a loaded machine; the results' "before" is the module before the Delassus form:
``git show a1b7f36~1:jaxmbd/integrators/moreau_jean.py > /tmp/mj_before.py``. A single
jitted call carries its dispatch (a few hundred µs on the loaded machine), which dominates
the small parts; the ball's run as a plain ``lax.scan`` (:func:`scan_gradient`) has none.

``--stack-scan``: only the resting box stacks (N = 2, 3) as plain ``lax.scan`` programs of
100 steps, versions interleaved (results/hard_contact_step_parts_stack_scan.{json,md}).

    python -m benchmarks.hard_contact step-parts [--before /tmp/mj_before.py] [--out F]
    python -m benchmarks.hard_contact step-parts --stack-scan --before /tmp/mj_before.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks import problems  # noqa: E402
from benchmarks._harness import RESULTS, command  # noqa: E402
from benchmarks._harness import interleaved as harness_interleaved  # noqa: E402
from benchmarks.problems import box_stack  # noqa: E402
from jaxmbd.formulations import get_formulation  # noqa: E402
from jaxmbd.integrators import moreau_jean as current  # noqa: F401

G = 9.81


def ball():
    """A ball sliding on the ground at 0.3 m/s (its contact active, friction slipping)."""
    return problems.ball(height=0.0, rdot=(0.3, 0.0, 0.0))


def load_module(path):
    spec = importlib.util.spec_from_file_location("jaxmbd.integrators._moreau_jean_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def interleaved(calls, repeats):
    """Median time (us) of each (fn, args) in ``calls`` (a dict), the calls alternating in
    every round so that a change of the machine's load reaches all of them alike."""
    timings = harness_interleaved(
        {name: (lambda fn=fn, args=args: fn(*args)) for name, (fn, args) in calls.items()},
        repeats=repeats,
    )
    return {name: tm.median * 1e6 for name, tm in timings.items()}


def parts(module, model, steps_before=5, h=1e-3):
    """The parts (name -> (jitted fn, args)) with the module's integrator at the state after
    ``steps_before`` steps from the model's start, and the Newton iterations of the
    velocity problem there (warm, cold)."""
    form = get_formulation("rA")
    integ = module.MoreauJean()
    q = (model.r0, model.A0)
    v = jnp.concatenate([model.rdot0, model.omega0], 1)
    _, ns, _, n_lim = module._parts(model)
    zero = jnp.zeros(3 * ns + n_lim)
    state = module.MoreauJeanState(q, v, zero, zero)
    step = jax.jit(lambda s, k: integ.step(model, form, s, k, h))
    for k in range(1, steps_before + 1):
        state, res = step(state, k)
    k = steps_before + 1
    q, v = state.q, state.v
    q_mid = form.retract(q, 0.5 * h * v.reshape(-1))
    t_mid = (k - 0.5) * h
    element = module.contact_element(model)
    out = {}
    out["narrow phase"] = (
        jax.jit(lambda q: element.collide(module._body_state(form, q, v))),
        (q_mid,),
    )
    out["unilateral rows + Jacobians"] = (
        jax.jit(lambda q: module._unilateral(model, form, q, v)),
        (q_mid,),
    )

    def velocity(warm):
        return integ._velocity_step(model, form, q_mid, v, t_mid, h, warm)[:6]

    fn = jax.jit(velocity)
    cold = jnp.zeros_like(state.impulses)
    out["velocity problem, warm"] = (fn, (state.impulses,))
    out["velocity problem, cold"] = (fn, (cold,))
    iterations = (int(fn(state.impulses)[3]), int(fn(cold)[3]))
    v1 = fn(state.impulses)[0].reshape(v.shape)
    q1 = form.retract(q_mid, 0.5 * h * v1.reshape(-1))
    if "solve_M" in module.MoreauJean._projection.__code__.co_varnames:
        system = module.index1_system(module._smooth_model(model), form, q_mid, v, t_mid)

        def project(q1, system):
            solve_M = module._mass_solver(system)  # built by the velocity step
            return integ._projection(model, form, q1, v1, k * h, solve_M)

        out["projection"] = (jax.jit(project), (q1, system))
    else:
        out["projection"] = (jax.jit(lambda q1: integ._projection(model, form, q1, v1, k * h)),
                             (q1,))  # fmt: skip
    out["whole step"] = (step, (state, k))

    def loss(q, v, friction):
        m = eqx.tree_at(lambda m: m.contacts.friction, model, friction)
        new, _ = integ.step(m, form, state._replace(q=q, v=v), k, h)
        return new.q, new.v

    def vjp(q, v, friction):
        out, pullback = jax.vjp(loss, q, v, friction)
        return pullback(jax.tree_util.tree_map(jnp.ones_like, out))

    out["whole step, vjp"] = (jax.jit(vjp), (q, v, model.contacts.friction))
    return out, iterations


def scan_gradient(versions, steps=550, h=1e-3):
    """The benchmark's bouncing ball (d(apex)/de, benchmarks/hard_contact/compare.py --parts
    grad) stepped by a plain lax.scan of the integrator's step (no simulate around it):
    forward and value_and_grad per step (us), each version, and the current one without
    the projection (its share of the gradient)."""
    from benchmarks.hard_contact.compare import jaxmbd_model

    model = jaxmbd_model("ball", hard=True)
    form = get_formulation("rA")

    def make(module, **options):
        integ = module.MoreauJean(**options)
        _, ns, _, n_lim = module._parts(model)

        def apex(e):
            m = eqx.tree_at(lambda m: m.contacts.restitution, model, jnp.array([e]))
            v = jnp.concatenate([m.rdot0, m.omega0], 1)
            zero = jnp.zeros(3 * ns + n_lim)
            start = module.MoreauJeanState((m.r0, m.A0), v, zero, zero)

            def body(state, k):
                state, _ = integ.step(m, form, state, k, h)
                return state, state.q[0][0, 2]

            _, z = jax.lax.scan(body, start, jnp.arange(1, steps + 1))
            return jnp.max(z[400:])

        return jax.jit(apex), jax.jit(jax.value_and_grad(apex))

    variants = [(label, module, {}) for label, module in versions.items()]
    variants.append(("current, project=False", versions["current"], {"project": False}))
    calls = {}
    for label, module, options in variants:
        forward, both = make(module, **options)
        calls[(label, "forward")] = (forward, (0.8,))
        calls[(label, "value_and_grad")] = (both, (0.8,))
    times = interleaved(calls, 7)
    return [{"variant": label, "forward us/step": times[(label, "forward")] / steps,
             "value_and_grad us/step": times[(label, "value_and_grad")] / steps}
            for label, _, _ in variants]  # fmt: skip


def scan_stack(versions, n, steps=100, h=1e-3, repeats=7):
    """The box stack of N boxes at rest (0.1 s, the benchmark's box stack part) stepped by a
    plain lax.scan of each version's step, interleaved: us per step and the mean Newton
    iterations per step."""
    model = box_stack(n)
    form = get_formulation("rA")
    calls = {}
    for label, module in versions.items():
        integ = module.MoreauJean()
        _, ns, _, n_lim = module._parts(model)
        zero = jnp.zeros(3 * ns + n_lim)
        v = jnp.concatenate([model.rdot0, model.omega0], 1)
        start = module.MoreauJeanState((model.r0, model.A0), v, zero, zero)

        def run(start, integ=integ):
            def body(state, k):
                state, res = integ.step(model, form, state, k, h)
                return state, res.info.iterations

            return jax.lax.scan(body, start, jnp.arange(1, steps + 1))

        calls[label] = (jax.jit(run), (start,))
    times = interleaved(calls, repeats)
    rows = []
    for label, (fn, args) in calls.items():
        final, iterations = fn(*args)
        sink = float(jnp.min(final.q[0][:, 2] - model.r0[:, 2]))
        rows.append({"variant": label, "n": n, "us/step": times[label] / steps,
                     "iterations/step": float(jnp.mean(iterations)), "lowest z": sink})  # fmt: skip
    return rows


PARTS = ("narrow phase", "unilateral rows + Jacobians", "velocity problem, warm",
         "velocity problem, cold", "projection", "whole step", "whole step, vjp")  # fmt: skip


def report(data, path):
    """The markdown table of the json: each part's time per version, and their ratio."""
    rows = data["rows"]
    versions = list(dict.fromkeys(r["version"] for r in rows))
    lines = [
        "# Per-step cost of exact contact, part by part",
        "",
        f"`{data['command']}`, {data['date']}, load average {data['load'][0]:.1f} / "
        f"{data['load'][1]:.1f} (2 shared cores: compare versions within a row, not across "
        "runs). Medians in µs of interleaved jitted calls, each call's dispatch included (it "
        "dominates the ball's parts: compare its whole step with the scan below). 'before': "
        "moreau_jean.py at a1b7f36~1 (before the Delassus form). "
        "Parts and states: the docstring of benchmarks/hard_contact/step_parts.py.",
        "",
        "| model | part | " + " | ".join(versions) + (" | current / before |" if
                                                       len(versions) == 2 else " |"),
        "|---|---|" + "---|" * (len(versions) + (len(versions) == 2)),
    ]  # fmt: skip
    for model in dict.fromkeys(r["model"] for r in rows):
        by = {r["version"]: r for r in rows if r["model"] == model}
        its = ", ".join(f"{v} {by[v]['iterations warm / cold'][0]} / "
                        f"{by[v]['iterations warm / cold'][1]}" for v in versions)  # fmt: skip
        lines.append(f"| {model} | Newton iterations of the velocity problem, warm / cold | "
                     f"{its} |" + " |" * len(versions))  # fmt: skip
        for part in PARTS:
            times = [by[v][part] for v in versions]
            ratio = f" {times[1] / times[0]:.2f} |" if len(times) == 2 else ""
            lines.append(f"| {model} | {part} | " + " | ".join(f"{t:.0f}" for t in times)
                         + " |" + ratio)  # fmt: skip
    if data.get("scan"):
        lines += [
            "",
            f"The bouncing ball of `hard_contact/compare.py --parts grad` ({data['scan_steps']} "
            "steps of h = 1e-3, d(apex)/de) as a plain `lax.scan` of the step (no dispatch "
            "per step; medians of 7 interleaved runs):",
            "",
            "| variant | forward (µs/step) | value_and_grad (µs/step) | ratio |",
            "|---|---|---|---|",
            *(f"| {r['variant']} | {r['forward us/step']:.1f} | "
              f"{r['value_and_grad us/step']:.1f} | "
              f"{r['value_and_grad us/step'] / r['forward us/step']:.1f} |"
              for r in data["scan"]),
        ]  # fmt: skip
    Path(path).write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="an earlier moreau_jean.py to time alongside")
    parser.add_argument("--models", nargs="+", default=["ball", "stack2", "stack3"])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default=str(RESULTS /
                                             "hard_contact_step_parts.json"))  # fmt: skip
    parser.add_argument("--report-only", action="store_true", help="the markdown from --out")
    parser.add_argument("--stack-scan", action="store_true",
                        help="only the box stacks as plain scans")  # fmt: skip
    args = parser.parse_args(argv)
    if args.stack_scan:
        versions = {"before": load_module(args.before)} if args.before else {}
        versions["current"] = current
        load0 = os.getloadavg()[0]
        rows = [row for n in (2, 3) for row in scan_stack(versions, n)]
        for row in rows:
            print(json.dumps(row), flush=True)
        cmd_line = command()
        out = RESULTS / "hard_contact_step_parts_stack_scan.json"
        out.write_text(json.dumps(dict(command=cmd_line, load=[load0, os.getloadavg()[0]],
                                       date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                       rows=rows), indent=1))  # fmt: skip
        lines = [f"# Box stacks at rest as plain scans (`{cmd_line}`)", "",
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load "
                 f"{load0:.1f} / {os.getloadavg()[0]:.1f}; 100 steps of h = 1e-3, versions "
                 "interleaved (median of 7). 'before': moreau_jean.py at a1b7f36~1.", "",
                 "| N | variant | µs/step | Newton iterations/step | lowest z (m) |",
                 "|---|---|---|---|---|",
                 *(f"| {r['n']} | {r['variant']} | {r['us/step']:.0f} | "
                   f"{r['iterations/step']:.2f} | {r['lowest z']:.2g} |"
                   for r in rows)]  # fmt: skip
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
        return
    if args.report_only:
        report(json.loads(Path(args.out).read_text()), Path(args.out).with_suffix(".md"))
        return
    versions = {"current": current}
    if args.before:
        versions = {"before": load_module(args.before), **versions}
    models = {"ball": ball, "stack2": lambda: box_stack(2), "stack3": lambda: box_stack(3)}
    load0 = os.getloadavg()[0]
    rows = []
    for name in args.models:
        model = models[name]()
        calls, iterations = {}, {}
        for label, module in versions.items():
            fns, iterations[label] = parts(module, model)
            calls.update({(label, part): call for part, call in fns.items()})
        times = interleaved(calls, args.repeats)
        for label in versions:
            row = {"model": name, "version": label, "iterations warm / cold": iterations[label]}
            row.update({part: t for (lab, part), t in times.items() if lab == label})
            print(json.dumps(row), flush=True)
            rows.append(row)
        jax.clear_caches()
    scan = scan_gradient(versions) if "current" in versions else []
    for row in scan:
        print(json.dumps(row), flush=True)
    cmd_line = command()
    load = [load0, os.getloadavg()[0]]
    data = dict(
        command=cmd_line,
        load=load,
        rows=rows,
        scan=scan,
        scan_steps=550,
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
    Path(args.out).write_text(json.dumps(data, indent=1))
    report(data, Path(args.out).with_suffix(".md"))
    print("wrote", args.out, "and .md; load", data["load"])


if __name__ == "__main__":
    main()
