"""The compiled size of each of MuJoCo's colliders (:data:`jaxmbd.contact.mujoco.pairs.KERNELS`):
jaxpr equations and HLO instructions of the kernel jitted alone at one pose, and its XLA
compile time (without the compilation cache). Run from the tree's root:

    python -m benchmarks.probes.collider_hlo [capsule-box box-box ...]
"""

from __future__ import annotations

import argparse
import os
import re
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxmbd.contact.mujoco.pairs import GEOM_NAMES, KERNELS  # noqa: E402


def instructions(text: str) -> int:
    """HLO instructions of a compiled module's text."""
    return sum(1 for ln in text.splitlines() if re.match(r"\s*(ROOT )?%?[\w.\-]+ = ", ln))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", help="type1-type2 names (default: every kernel)")
    args = parser.parse_args(argv)
    pose = (jnp.zeros(3), jnp.eye(3), jnp.array([0.1, 0.2, 0.3]),
            jnp.ones(3), jnp.eye(3), jnp.array([0.1, 0.2, 0.3]), 0.0)  # fmt: skip
    print(f"{'pair':20s} {'slots':>5s} {'jaxpr':>7s} {'HLO':>7s} {'compile s':>9s}")
    for (a, b), (kernel, slots) in KERNELS.items():
        name = f"{GEOM_NAMES[a]}-{GEOM_NAMES[b]}"
        if args.pairs and name not in args.pairs:
            continue
        equations = len(jax.make_jaxpr(kernel)(*pose).jaxpr.eqns)
        start = time.perf_counter()
        compiled = jax.jit(kernel).lower(*pose).compile()
        seconds = time.perf_counter() - start
        print(f"{name:20s} {slots:5d} {equations:7d} {instructions(compiled.as_text()):7d} "
              f"{seconds:9.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
