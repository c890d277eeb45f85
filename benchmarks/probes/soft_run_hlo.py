"""Where the compiled program of a run under MuJoCo's constraint model spends its HLO
instructions: dm_control's file run 1000 steps under random controls as
``benchmarks.soft_contact`` runs it (``jax.jit`` of ``simulate(...).qpos``), compiled, its
instructions counted by the innermost source function of their stack frame (XLA's
``StackFrames`` table), with the trace + lowering and XLA compile times and the run's
time per step (median of 5). Run from the tree's root:

    python -m benchmarks.probes.soft_run_hlo hopper
    python -m benchmarks.probes.soft_run_hlo humanoid --lines 20
    python -m benchmarks.probes.soft_run_hlo path/to/model.xml
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from benchmarks.soft_contact import _controls, _soft_run, path_of  # noqa: E402


def _section(text: str, title: str) -> list[str]:
    found = re.search(r"\n" + title + r"\n(.*?)\n\n", text, re.S)
    return found.group(1).splitlines() if found else []


def attribution(text: str):
    """(instructions, Counter by innermost source function, Counter by source line)."""
    files = {
        int(a): b.strip('"') for a, b in (ln.split(" ", 1) for ln in _section(text, "FileNames"))
    }
    names = {
        int(a): b.strip('"')
        for a, b in (ln.split(" ", 1) for ln in _section(text, "FunctionNames"))
    }
    locations = {}
    for ln in _section(text, "FileLocations"):
        fields = dict(re.findall(r"(\w+)=(\d+)", ln))
        path = files[int(fields["file_name_id"])]
        path = path.split("jaxmbd/")[-1] if "jaxmbd/" in path else path.split("/")[-1]
        locations[int(ln.split()[0])] = (
            path,
            names[int(fields["function_name_id"])],
            fields["line"],
        )
    frames = {}
    for ln in _section(text, "StackFrames"):
        fields = dict(re.findall(r"(\w+)=(\d+)", ln))
        frames[int(ln.split()[0])] = int(fields["file_location_id"])
    instructions = [ln for ln in text.splitlines() if re.match(r"\s*(ROOT )?%?[\w.\-]+ = ", ln)]
    by_function, by_line = collections.Counter(), collections.Counter()
    for ln in instructions:
        frame = re.search(r"stack_frame_id=(\d+)", ln)
        if frame is None or int(frame.group(1)) not in frames:
            by_function["(no source: parameters, tuples, constants)"] += 1
            continue
        path, function, line = locations[frames[int(frame.group(1))]]
        by_function[f"{path}:{function}"] += 1
        by_line[f"{path}:{function}:{line}"] += 1
    return len(instructions), by_function, by_line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="hopper")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--functions", type=int, default=25)
    parser.add_argument("--lines", type=int, default=0)
    args = parser.parse_args(argv)
    path = args.model if args.model.endswith(".xml") else path_of(args.model)
    m = mujoco.MjModel.from_xml_path(path)
    h = float(m.opt.timestep)
    model = mbd.load_model(path)
    u = jnp.asarray(_controls(m, args.steps))
    run = _soft_run(model, args.steps, h)
    start = time.perf_counter()
    lowered = jax.jit(run).lower(model, u)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    count, by_function, by_line = attribution(compiled.as_text())
    compiled(model, u).block_until_ready()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        compiled(model, u).block_until_ready()
        times.append(time.perf_counter() - t)
    print(f"{args.model}: {count} HLO instructions; trace + lower {lowered_at - start:.1f} s, "
          f"XLA compile {compiled_at - lowered_at:.1f} s; "
          f"{np.median(times) / args.steps * 1e6:.0f} us per step (median of 5)")  # fmt: skip
    for key, n in by_function.most_common(args.functions):
        print(f"{n:7d}  {key}")
    for key, n in by_line.most_common(args.lines):
        print(f"{n:7d}  {key}")


if __name__ == "__main__":
    main()
