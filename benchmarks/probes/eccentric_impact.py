"""The pinned rod of docs/guide/contact.md (Eccentric impacts): a 1 kg, 1 m rod pinned at
one end, released horizontal, strikes a wall with the sphere (radius 0.1 m, default
stiffness) at its tip where it hangs; prints its rebound angle over acos(1 - e^2) for
e = 0.3, 0.5, 0.9 at h = 1e-3, with the default integrator of the joint formulation
(gen_alpha with contact) and with RK4 ("rk"). One compiled program per integrator (the
restitution enters through ``eqx.tree_at``).

    python -m benchmarks.probes.eccentric_impact
"""

from __future__ import annotations

import equinox as eqx
import numpy as np

import jaxmbd as mbd

RADIUS = 0.1
E_VALUES = (0.3, 0.5, 0.9)


def rod_at_a_wall() -> mbd.Model:
    """As tests/test_eccentric_impact.py builds it."""
    b = mbd.ModelBuilder("pinned rod", gravity=(0.0, 0.0, -9.81))
    b.add_body("rod", mass=1.0, inertia=[1e-6, 1 / 12, 1 / 12], r=(-0.5, 0.0, 0.0),
               shapes=[mbd.geometry.sphere(RADIUS, pos=(-0.5, 0.0, 0.0))])  # fmt: skip
    b.revolute("pin", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_ground_plane(point=(RADIUS, 0.0, 0.0), normal=(-1.0, 0.0, 0.0))
    b.add_contact("rod", "ground", friction=0.0, restitution=0.5)
    return b.build()


def _rebound(sol):
    tip = -np.asarray(sol.A)[:, 0, :, 0]
    angle = np.arctan2(-tip[:, 0], -tip[:, 2])
    return angle[int(np.argmin(angle)) + 1 :].max()


def main():
    model = rod_at_a_wall()
    for integrator in (None, "rk"):
        ratios = []
        for e in E_VALUES:
            run = eqx.tree_at(lambda m: m.contacts.restitution, model,
                              model.contacts.restitution * 0 + e)  # fmt: skip
            sol = mbd.simulate(run, integrator=integrator, t_end=1.2, h=1e-3)
            ratios.append(_rebound(sol) / np.arccos(1.0 - e * e))
        print(f"{sol.formulation} {sol.integrator}: rebound / acos(1 - e^2) for e = "
              f"{E_VALUES}: " + ", ".join(f"{x:.4f}" for x in ratios))  # fmt: skip


if __name__ == "__main__":
    main()
