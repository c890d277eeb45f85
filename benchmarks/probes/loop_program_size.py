"""Size of the joint formulation's run program for loop models built in code: the jaxpr's
equation count (nested ones included), the lowered StableHLO text's size and XLA's compile
time of ``run_joint_space`` (``rk``, 1000 steps, h = 1e-3). Run from the tree's root:

    python benchmarks/probes/loop_program_size.py slider_crank,six_body_linkage
"""

import os
import sys
import time

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxmbd as mbd  # noqa: E402
from jaxmbd.compiled.jit import XLA_OPTIONS  # noqa: E402
from jaxmbd.joint_space.constraint_rows import independent_rows_of  # noqa: E402
from jaxmbd.joint_space.run import _run_joint_space, concrete_tree  # noqa: E402
from jaxmbd.joint_space.steppers import get_stepper  # noqa: E402


def equations(jaxpr) -> int:
    count = 0
    for eqn in jaxpr.eqns:
        count += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else [param]:
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    count += equations(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    count += equations(sub)
    return count


def main(mechanisms, integrator="rk"):
    for mech in mechanisms:
        model = getattr(mbd.models, mech)()
        _, cons, G = concrete_tree(model)
        rows = None if G is None else independent_rows_of(cons, G)
        stepper = get_stepper(integrator)
        h = jnp.asarray(1e-3)

        @eqx.filter_jit
        def program(model, h, stepper=stepper, rows=rows):
            return _run_joint_space(model, stepper, 1000, h, None, None, rows)

        jaxpr = jax.make_jaxpr(lambda m, h: program(m, h))(model, h)
        start = time.perf_counter()
        lowered = program.lower(model, h)
        lower_s = time.perf_counter() - start
        text = lowered.as_text()
        start = time.perf_counter()
        lowered.compile(compiler_options=XLA_OPTIONS)
        compile_s = time.perf_counter() - start
        print(f"{mech:18s} {integrator:6s} equations {equations(jaxpr.jaxpr):6d}  "
              f"StableHLO {len(text) / 1e3:7.0f} kB  lower {lower_s:5.1f} s  "
              f"compile {compile_s:5.1f} s   {os.popen('uptime').read().strip()[-30:]}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1].split(","), *(sys.argv[2:3]))
