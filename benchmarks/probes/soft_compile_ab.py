"""A file's soft step, compile and per-step time, in two checkouts side by side: a jitted
1000-step ``simulate`` as authored (MuJoCo's constraint model, the file's integrator and
step, uniform random controls), its XLA compile time from a fresh process with no
compilation cache, the median of 5 runs per step, and the compiled program's HLO
instruction count; each (checkout, file) in its own process, the two checkouts in turn file
by file so that a drift of the machine's load falls on both.

    git worktree add /tmp/before <commit>
    python -m benchmarks.probes.soft_compile_ab --before /tmp/before \\
        [hopper cheetah walker humanoid ant]

``--before``: the other checkout's root (its ``jaxmbd`` is imported from there);
``--after``: this one's by default. The files are those of :mod:`benchmarks.soft_contact`.
Prints one line per measurement and a Markdown table of both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def one(name: str, steps: int) -> dict:
    """Measure ``name`` with the ``jaxmbd`` this process imports."""
    os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")
    import re  # noqa: PLC0415
    import time  # noqa: PLC0415

    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import mujoco  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import jaxmbd as mbd  # noqa: PLC0415
    from benchmarks.soft_contact import path_of  # noqa: PLC0415

    m = mujoco.MjModel.from_xml_path(path_of(name))
    model = mbd.load_model(path_of(name))
    h = float(m.opt.timestep)
    u = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (steps, m.nu)))

    def run(model, u):
        return mbd.simulate(model, t_end=steps * h, h=h, controls=u).qpos

    start = time.perf_counter()
    compiled = jax.jit(run).lower(model, u).compile()
    compile_s = time.perf_counter() - start
    size = len(re.findall(r"^\s+%\S+ = ", compiled.as_text(), re.M))
    qpos = jax.block_until_ready(compiled(model, u))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(compiled(model, u))
        times.append(time.perf_counter() - start)
    per_step = float(np.median(times)) / steps
    return {"file": name, "compile_s": compile_s, "us_per_step": per_step * 1e6, "hlo": size,
            "final_qpos": np.asarray(qpos[-1]).tolist(), "load": os.getloadavg()[0],
            "jaxmbd": str(Path(mbd.__file__).parents[1])}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=["hopper", "cheetah", "walker", "humanoid"])
    parser.add_argument("--before", required=False)
    parser.add_argument("--after", default=str(ROOT))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--one", help="measure one file in this process, print JSON")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.steps)))
        return
    if not args.before:
        parser.error("--before ROOT is required")
    rows = []
    for name in args.files:
        for label, root in (("before", args.before), ("after", args.after)):
            # the checkout measured first on the path, ahead of the working directory
            # (``python -m`` would put this tree's jaxmbd first) and of an editable install
            child = (
                f"import sys; sys.path[:0] = [{str(root)!r}, {str(ROOT)!r}]; "
                f"from benchmarks.probes.soft_compile_ab import main; "
                f"main(['--one', {name!r}, '--steps', '{args.steps}'])"
            )
            out = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True,
                                 text=True, check=True)  # fmt: skip
            row = dict(json.loads(out.stdout.strip().splitlines()[-1]), label=label)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| file | compile s before | after | us/step before | after | HLO before | after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.files:
        b, a = (next(r for r in rows if r["file"] == name and r["label"] == x)
                for x in ("before", "after"))  # fmt: skip
        same = "" if b["final_qpos"] == a["final_qpos"] else " (final qpos differ)"
        print(f"| {name}{same} | {b['compile_s']:.1f} | {a['compile_s']:.1f} | "
              f"{b['us_per_step']:.0f} | {a['us_per_step']:.0f} | "
              f"{b['hlo']} | {a['hlo']} |")  # fmt: skip


if __name__ == "__main__":
    main()
