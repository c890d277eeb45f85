"""Compile time of MuJoCo's primal solver alone (:func:`jaxmbd.soft_constraints.solver.solve`)
in a 100-step ``lax.scan`` on a random problem: nv degrees of freedom, ``nefc`` one-sided
row slots of which about 5 % are active, the solver's loops on the active rows in blocks of
``--capacity`` rows (``none``: on all rows). Trace and lowering apart from XLA's compile,
and the compiled program's HLO lines, in a fresh process with no compilation cache:

    python -m benchmarks.probes.solver_compile 27 424 32     # the humanoid's sizes
    python -m benchmarks.probes.solver_compile 27 48 none
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402, F401  (float64, XLA's options)
from jaxmbd.soft_constraints.problem import ONE_SIDED, SoftRows, no_cones  # noqa: E402
from jaxmbd.soft_constraints.solver import solve  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nv", type=int)
    parser.add_argument("nefc", type=int)
    parser.add_argument("capacity", help="rows per block, or 'none'")
    args = parser.parse_args(argv)
    nv, nefc = args.nv, args.nefc
    capacity = None if args.capacity == "none" else int(args.capacity)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(nv, nv))
    M = jnp.asarray(A @ A.T + nv * np.eye(nv))
    rows = SoftRows(
        J=jnp.asarray(rng.normal(size=(nefc, nv))),
        aref=jnp.asarray(rng.normal(size=nefc)),
        R=jnp.asarray(rng.uniform(0.1, 1, nefc)),
        floss=jnp.zeros(nefc),
        active=jnp.asarray(rng.uniform(size=nefc) < 0.05),
        kind=jnp.full(nefc, ONE_SIDED, jnp.int32),
        kinds=(ONE_SIDED,),
        **no_cones(),
    )

    def run(M, a0, rows):
        def step(c, _):
            return c + 1e-3 * solve(M, a0 + c, rows, capacity=capacity).qacc, None

        return jax.lax.scan(step, jnp.zeros(nv), None, length=100)[0]

    start = time.perf_counter()
    lowered = jax.jit(run).lower(M, jnp.zeros(nv), rows)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    print(f"nv {nv}, {nefc} row slots, blocks of {capacity}: trace + lower "
          f"{lowered_at - start:.1f} s, XLA compile {compiled_at - lowered_at:.1f} s, "
          f"{compiled.as_text().count(chr(10))} HLO lines")  # fmt: skip


if __name__ == "__main__":
    main()
