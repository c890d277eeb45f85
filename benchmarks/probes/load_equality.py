"""Model loading, this tree against another (a base checkout): the same models, and the
time each takes, in one process.

Loads the 32 MJCF files of :mod:`benchmarks.mjcf_files` (dm_control's suite without
lqr.xml, gymnasium's MuJoCo assets) and builds every built-in model (``REGISTRY``, the
builder's path) with both trees' ``jaxmbd``: the base tree is imported as the package
``jaxmbd_base`` (the library's imports inside the package are relative). Each model's array
leaves (``eqx.partition(model, eqx.is_array)``) are compared bit for bit (else the largest
absolute and relative difference is printed), and its static part by its text (tree
structure and static leaves; the package name and object addresses left out). Loads
alternate between the trees (the base first in odd repeats); the medians per file go to
``--out`` as a markdown table, with ``uptime`` before and after.

    git worktree add --detach /tmp/loadspeed_base <base commit>
    python -m benchmarks.probes.load_equality --base /tmp/loadspeed_base --repeats 3 \
        --out benchmarks/results/load_time.md
    python -m benchmarks.probes.load_equality --base /tmp/loadspeed_base --fresh \
        --repeats 3 --out benchmarks/results/load_time.md

``--fresh`` appends a second table: each tree loads the 32 files one after another in a
fresh process (a user's first loads, and a test run's), alternating, medians.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import warnings

import equinox as eqx
import jax
import numpy as np

import jaxmbd

FOCUS = ("dm_control/dog.xml", "dm_control/humanoid_CMU.xml", "dm_control/humanoid.xml",
         "dm_control/quadruped.xml")  # fmt: skip


def import_tree(root: str, name: str):
    """The ``jaxmbd`` package of checkout ``root`` imported as ``name``."""
    init = os.path.join(root, "jaxmbd", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[os.path.dirname(init)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def files() -> list[tuple[str, str]]:
    """(label, path) of the 32 files."""
    import dm_control
    import gymnasium

    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    out = [(f"dm_control/{os.path.basename(p)}", p)
           for p in sorted(glob.glob(os.path.join(suite, "*.xml")))
           if os.path.basename(p) != "lqr.xml"]  # fmt: skip
    out += [(f"gymnasium/{os.path.basename(p)}", p)
            for p in sorted(glob.glob(os.path.join(assets, "*.xml")))]  # fmt: skip
    return out


def _static_text(static, package: str) -> str:
    text = repr((jax.tree_util.tree_structure(static), jax.tree_util.tree_leaves(static)))
    text = text.replace(package, "jaxmbd")
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def compare(old, new, package: str) -> list[str]:
    """What differs between two models (empty: bit for bit the same)."""
    a_arrays, a_static = eqx.partition(old, eqx.is_array)
    b_arrays, b_static = eqx.partition(new, eqx.is_array)
    out = []
    a_leaves = jax.tree_util.tree_leaves_with_path(a_arrays)
    b_leaves = jax.tree_util.tree_leaves_with_path(b_arrays)
    if len(a_leaves) != len(b_leaves):
        out.append(f"{len(a_leaves)} array leaves against {len(b_leaves)}")
    for (path, a), (_, b) in zip(a_leaves, b_leaves, strict=False):
        where = jax.tree_util.keystr(path)
        if getattr(a, "weak_type", None) != getattr(b, "weak_type", None):
            out.append(f"{where}: weak type {a.weak_type} against {b.weak_type}")
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append(f"{where}: {a.shape} {a.dtype} against {b.shape} {b.dtype}")
        elif a.tobytes() != b.tobytes():
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            out.append(f"{where}: max abs diff {np.nanmax(diff):.2g} "
                       f"(max abs value {np.nanmax(np.abs(a)):.2g})")  # fmt: skip
    if _static_text(a_static, package) != _static_text(b_static, "jaxmbd"):
        out.append("static parts differ")
    return out


def _timed(make):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make()
    return time.perf_counter() - start, model


def child(labels) -> None:
    """Load the files ``labels`` in this (fresh) process, in order: JSON {label: seconds}."""
    paths = dict(files())
    out = {}
    for label in labels:
        out[label] = _timed(lambda label=label: jaxmbd.load_model(paths[label]))[0]
    print(json.dumps(out))


def fresh(base: str, labels, repeats: int, out_path: str | None) -> None:
    """Each tree loads ``labels`` in a fresh process (a user's first loads, the files one
    after another as a test run meets them); the trees alternate, ``repeats`` times."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    uptime = [subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()]
    times: dict[str, dict[str, list]] = {"base": {}, "this": {}}
    for repeat in range(repeats):
        trees = (("base", base), ("this", here))
        for name, root in trees if repeat % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=root)
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *labels],
                                 env=env, capture_output=True, text=True, check=True)  # fmt: skip
            for label, seconds in json.loads(run.stdout.strip().splitlines()[-1]).items():
                times[name].setdefault(label, []).append(seconds)
            print(f"repeat {repeat} {name}: {sum(times[name][k][-1] for k in labels):.1f} s",
                  flush=True)  # fmt: skip
    uptime.append(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    lines = ["| file (fresh process, in this order) | base (s) | this (s) | base / this |",
             "|---|---|---|---|"]  # fmt: skip
    totals = [0.0, 0.0]
    for label in labels:
        old, new = (float(np.median(times[t][label])) for t in ("base", "this"))
        totals = [totals[0] + old, totals[1] + new]
        lines.append(f"| {label} | {old:.2f} | {new:.2f} | {old / new:.1f} |")
    lines.append(f"| **total** | {totals[0]:.1f} | {totals[1]:.1f} | "
                 f"{totals[0] / totals[1]:.1f} |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    print("\n".join(f"uptime: {u}" for u in uptime))
    if out_path:
        with open(out_path, "a") as fh:
            fh.write("\n" + text + "\n\n" + "\n".join(f"`uptime`: {u}" for u in uptime) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="checkout of the base tree")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="labels to run (default: all)")
    parser.add_argument("--out", help="markdown table of the load times")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="time the files' first loads in fresh processes (no comparison)",
    )
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child)
    if args.fresh:
        labels = [label for label, _ in files()
                  if not args.only or any(key in label for key in args.only)]  # fmt: skip
        return fresh(args.base, labels, args.repeats, args.out)
    base = import_tree(args.base, "jaxmbd_base")
    jobs = [(label, "file", path) for label, path in files()]
    jobs += [(f"builtin/{name}", "builtin", name) for name in jaxmbd.models.REGISTRY]
    if args.only:
        jobs = [job for job in jobs if any(key in job[0] for key in args.only)]

    def maker(tree, kind, what):
        if kind == "file":
            return lambda: tree.load_model(what)
        entry = tree.models.REGISTRY[what]
        if what in tree.models.SHIPPED:  # the file, not the cached model
            return lambda: tree.load_model(tree.models.path(what))
        if entry.size_argument is None:
            return entry.build
        return lambda: entry.build(**{entry.size_argument: entry.default_size})

    uptime = [subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()]
    times = {label: ([], []) for label, _, _ in jobs}
    differences = {}
    for repeat in range(args.repeats):
        for label, kind, what in jobs:
            order = ((0, base), (1, jaxmbd)) if repeat % 2 == 0 else ((1, jaxmbd), (0, base))
            models = {}
            for slot, tree in order:
                seconds, models[slot] = _timed(maker(tree, kind, what))
                times[label][slot].append(seconds)
            if repeat == 0:
                differences[label] = compare(models[0], models[1], "jaxmbd_base")
                status = "same" if not differences[label] else "; ".join(differences[label])
                print(f"{label}: {status}", flush=True)
            print(f"  repeat {repeat}: base {times[label][0][-1]:.2f} s, "
                  f"this {times[label][1][-1]:.2f} s", flush=True)  # fmt: skip
    uptime.append(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    rows = []
    for label, _, _ in jobs:
        old, new = (float(np.median(t)) for t in times[label])
        rows.append((label, old, new))
    files_rows = [r for r in rows if not r[0].startswith("builtin/")]
    lines = [
        "| model | base (s) | this (s) | base / this | same |",
        "|---|---|---|---|---|",
    ]
    for label, old, new in rows:
        same = "bit for bit" if not differences[label] else "; ".join(differences[label])
        lines.append(f"| {label} | {old:.2f} | {new:.2f} | {old / new:.1f} | {same} |")
    total_old = sum(r[1] for r in files_rows)
    total_new = sum(r[2] for r in files_rows)
    if files_rows:
        lines.append(f"| **{len(files_rows)} files, total** | {total_old:.1f} | "
                     f"{total_new:.1f} | {total_old / total_new:.1f} | |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    print("\n".join(f"uptime: {u}" for u in uptime))
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n\n" + "\n".join(f"`uptime`: {u}" for u in uptime) + "\n")


if __name__ == "__main__":
    main()
