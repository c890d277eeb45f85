"""Which redundant row to drop matters: the six-body (Bricard-type) linkage of Betsch &
Leyendecker, 30 joint rows of rank 29, run for 1 s (director formulation, energy_momentum,
constrained scheme, h = 0.01) with each choice of the dropped row of its closing joint.

    python -m benchmarks.probes.redundant_row_choice

The row :func:`jaxmbd.find_redundancy` picks (the closing row with the largest self-stress
share) keeps the loop closed to round-off; the last dependent row in model order (what a
plain greedy QR drops) lets the motion leave the loop, because the self-stress share of that
row passes near zero on the way (the kept rows then stop implying it).
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings

import jax
import numpy as np

import jaxmbd as mbd
from jaxmbd.constraints.equations import constraint_values
from jaxmbd.models.betsch_leyendecker import six_body_joint_angles


def run(model, dropped_name: str):
    row = model.constraint_names.index(dropped_name)
    info = dataclasses.replace(model.redundancy, dropped=(row,), loops=())
    chosen = dataclasses.replace(model, redundancy=info)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        sol = mbd.simulate(chosen, formulation="director", integrator="energy_momentum",
                           scheme="constrained", t_end=1.0, h=0.01, throw=False)  # fmt: skip
    phi = jax.vmap(lambda r, A, t: constraint_values(model, r, A, t))(sol.r, sol.A, sol.t)
    th = six_body_joint_angles(sol.A)
    s1, s2 = np.sin(th[:, 0]), np.sin(th[:, 1])
    failed = np.nonzero(np.asarray(sol.status))[0]
    return {
        "dropped row": dropped_name,
        "first failed step": int(failed[0]) if failed.size else None,
        "max |Phi| (all 30 rows)": float(np.nanmax(np.abs(np.asarray(phi)))),
        "closure relation": float(np.nanmax(np.abs(s2 * (1 - s1) - s1))),
        "symmetry theta1 - theta3": float(np.nanmax(np.abs(th[:, 0] - th[:, 2]))),
    }


def main(argv=None):
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    model = mbd.models.six_body_linkage()
    picked = model.constraint_names[model.redundancy.dropped[0]]
    for name in (picked, "joint6.perp1.dp1_b", "joint6.cd_z"):
        print(run(model, name))


if __name__ == "__main__":
    main()
