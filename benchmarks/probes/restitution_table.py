"""The first-apex table of docs/guide/contact.md: a 1 kg ball of radius 0.1 m (default
stiffness 9.8e6 N/m^1.5) dropped from h0 onto the plane; prints apex / (e^2 h0) for e in
(0.3, 0.6, 0.9) (rows) and h0 in (0.1, 0.5, 1.0) m (columns) per integrator setting, and
the largest e_eff / e. The run starts 5 mm above the plane at the drop's speed there (the
flight before is ballistic). One compiled program per setting: e and the speed enter
through ``eqx.tree_at`` on the model's leaves. ``impact_substeps=1`` switches the impact
sub-steps off (the law alone).

    python -m benchmarks.probes.restitution_table [h]
"""

from __future__ import annotations

import sys

import equinox as eqx
import numpy as np

import jaxmbd as mbd

G = 9.81
RADIUS = 0.1
GAP0 = 0.005
SETTINGS = (
    {},
    {"impact_substeps": 1},
    {"rho_inf": 0.5},
    {"rho_inf": 0.9},
    {"rho_inf": 1.0},
    {"integrator": "backward_euler"},
    {"integrator": "rkmk"},
)


def ball():
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=1.0, inertia=[0.004] * 3, r=(0, 0, RADIUS + GAP0),
               shapes=[mbd.geometry.sphere(RADIUS)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, restitution=0.6)
    return b.build()


def apex_ratio(model, options, e, h0, h):
    """First apex above touching (ballistic, from the first rising state off the plane)
    over e^2 h0."""
    m = eqx.tree_at(lambda m: m.contacts.restitution, model, model.contacts.restitution * 0 + e)
    m = eqx.tree_at(lambda m: m.rdot0, m, m.rdot0.at[0, 2].set(-np.sqrt(2 * G * (h0 - GAP0))))
    sol = mbd.simulate(m, t_end=0.03, h=h, **options)
    z, vz = np.asarray(sol.r[:, 0, 2]) - RADIUS, np.asarray(sol.rdot[:, 0, 2])
    hit = int(np.argmax(z < 0))
    rising = (z[hit:] > 0) & (vz[hit:] > 0)
    if not rising.any():
        return np.nan  # still in contact at the end
    up = hit + int(np.argmax(rising))
    return (z[up] + vz[up] ** 2 / (2 * G)) / (e * e * h0)


def main(h=1e-3, settings=SETTINGS):
    model = ball()
    for options in settings:
        table = np.array([[apex_ratio(model, options, e, h0, h) for h0 in (0.1, 0.5, 1.0)]
                          for e in (0.3, 0.6, 0.9)])  # fmt: skip
        print(options or "defaults", np.round(table, 3).tolist(),
              "max e_eff / e:", round(float(np.sqrt(table.max())), 3), flush=True)  # fmt: skip


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1e-3)
