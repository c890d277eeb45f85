"""Multiplier (reaction) errors of generalized-alpha: stabilised (GGL) against index-3.

    python -m benchmarks.gen_alpha_multipliers

Double pendulum (rA), 1 s, h = 4e-3 ... 5e-4, rho_inf 0.9 and 1. The joint forces held in
the CD multipliers are compared with Newton's law on each rod evaluated on the scipy ODE
reference (tests/references.py): the ground joint carries m1 (a1 - g) + m2 (a2 - g) onto
rod 1, the elbow -m2 (a2 - g). Reports the max error over time, the error at t_end and the
acceleration error, with observed orders; writes benchmarks/results/gen_alpha_multipliers.csv.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._harness import RESULTS, from_tests, write_csv  # noqa: E402

references = from_tests("references")

import jaxmbd as mbd  # noqa: E402

STEPS = (4e-3, 2e-3, 1e-3, 5e-4)


def main(argv=None):
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    model = mbd.models.double_pendulum()
    names = model.constraint_names
    cd1 = [names.index(f"revJoint_CD_{k}") for k in (1, 2, 3)]
    cd2 = [names.index(f"revJoint2_CD_{k}") for k in (1, 2, 3)]
    g = np.asarray(model.gravity)
    m1, m2 = (float(x) for x in model.mass)
    rows = []
    for rho in (0.9, 1.0):
        for variant in ("stabilised", "index3"):
            errors = []
            for h in STEPS:
                sol = mbd.simulate(
                    model,
                    formulation="rA",
                    integrator="gen_alpha",
                    rho_inf=rho,
                    variant=variant,
                    t_end=1.0,
                    h=h,
                    progress=lambda *_: None,
                    chunk_size=250,
                    throw=False,
                )
                ref = references.double_pendulum(np.asarray(sol.t))
                a1, a2 = ref["rddot"][:, 0], ref["rddot"][:, 1]
                lam = np.asarray(sol.lam)
                err = np.maximum(
                    np.abs(lam[:, cd1] - (m1 * (a1 - g) + m2 * (a2 - g))).max(axis=1),
                    np.abs(lam[:, cd2] + m2 * (a2 - g)).max(axis=1),
                )
                errors.append((err.max(), err[-1], float(np.abs(sol.rddot - ref["rddot"]).max())))
            errors = np.array(errors)
            orders = np.vstack([[np.nan] * 3, np.log2(errors[:-1] / errors[1:])])
            for h, e, o in zip(STEPS, errors, orders, strict=True):
                rows.append(
                    dict(
                        rho_inf=rho,
                        variant=variant,
                        h=h,
                        lam_err_max=e[0],
                        lam_err_end=e[1],
                        acc_err_max=e[2],
                        order_lam_max=o[0],
                        order_lam_end=o[1],
                        order_acc=o[2],
                    )
                )
                print(
                    f"rho_inf {rho:.1f} {variant:10s} h {h:.0e}  lam max {e[0]:.2e} "
                    f"(order {o[0]:5.2f})  lam end {e[1]:.2e} (order {o[1]:5.2f})  "
                    f"acc max {e[2]:.2e} (order {o[2]:5.2f})"
                )
    path = RESULTS / "gen_alpha_multipliers.csv"
    write_csv(path, rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
