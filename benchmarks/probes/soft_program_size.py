"""Size of the programs of MuJoCo's constraint model on the standard files: jaxpr equations
(nested ones included) of one step's accelerations, of its constraint rows, and of the
collisions inside them, traced and not compiled; with ``--compile``, the lowering and
XLA's compile time of the accelerations under ``jax.jit`` (default XLA options, no cache).
Run from the tree's root:

    python -m benchmarks.probes.soft_program_size humanoid hopper quadruped
    python -m benchmarks.probes.soft_program_size quadruped --compile
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import dm_control  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.extend.core import jaxprs_in_params  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from jaxmbd.analysis.limits_option import with_limits  # noqa: E402
from jaxmbd.joint_space.dynamics import accelerations  # noqa: E402
from jaxmbd.joint_space.equalities import with_equalities  # noqa: E402
from jaxmbd.joint_space.run import model_tree  # noqa: E402
from jaxmbd.soft_constraints.model import collide_groups  # noqa: E402
from jaxmbd.soft_constraints.treatments import with_soft  # noqa: E402
from jaxmbd.tree import poses  # noqa: E402


def equations(jaxpr) -> int:
    return sum(1 + sum(equations(sub) for sub in jaxprs_in_params(e.params)) for e in jaxpr.eqns)


def soft_model(name: str):
    """dm_control's ``suite/<name>.xml`` with contact, limits and equalities "soft"."""
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")
    model, contact, limits = with_soft(mbd.load_model(path), contact="soft", limits="soft")
    model = with_limits(mbd.contact.with_contact(model, contact), limits)
    return with_equalities(model, "soft")


def measure(name: str, compile_too: bool) -> str:
    model = soft_model(name)
    cm = model.constraint_model
    tree, loops = model_tree(model)
    q, v = jnp.zeros(model.tree.nq), jnp.zeros(model.tree.nv)
    h = cm.timestep

    def qacc(q, v):
        return accelerations(model, tree, loops, q, v, 0.0, step=h).qacc

    def rows(q, v):
        return cm.rows(model.tree, poses(model.tree, q), q, v, h)[1]

    def contacts(q):
        p = poses(model.tree, q)
        return collide_groups(cm.contacts, p.x, p.R)

    sizes = [equations(jax.make_jaxpr(f)(*args).jaxpr)
             for f, args in ((qacc, (q, v)), (rows, (q, v)), (contacts, (q,)))]  # fmt: skip
    line = (f"{name}: accelerations {sizes[0]} equations, rows {sizes[1]}, collisions "
            f"{sizes[2]} ({len(cm.contacts)} contact groups)")  # fmt: skip
    if compile_too:
        t = time.perf_counter()
        lowered = jax.jit(qacc).lower(q, v)
        t_lower = time.perf_counter() - t
        t = time.perf_counter()
        lowered.compile()
        line += f"; lowering {t_lower:.1f} s, XLA compile {time.perf_counter() - t:.1f} s"
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="dm_control suite files, without .xml")
    parser.add_argument("--compile", action="store_true", help="also lower and compile")
    args = parser.parse_args()
    for name in args.names:
        print(measure(name, args.compile), flush=True)


if __name__ == "__main__":
    main()
