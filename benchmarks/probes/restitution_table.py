"""The first-apex table of docs/guide/contact.md: a 1 kg ball of radius 0.1 m (default
stiffness) dropped from h0 onto the plane; prints apex / (e^2 h0) for e in (0.3, 0.6, 0.9)
(rows) and h0 in (0.1, 0.5, 1.0) m (columns) per integrator setting. One compiled program
per setting: e and h0 enter through ``eqx.tree_at`` on the model's leaves.

    python benchmarks/probes/restitution_table.py [h]
"""

from __future__ import annotations

import sys

import equinox as eqx
import numpy as np

import jaxmbd as mbd

G = 9.81
SETTINGS = (
    {},
    {"rho_inf": 0.5},
    {"rho_inf": 0.9},
    {"rho_inf": 1.0},
    {"integrator": "backward_euler"},
    {"integrator": "rkmk"},
)


def ball():
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=1.0, inertia=[0.004] * 3, r=(0, 0, 0.6),
               shapes=[mbd.geometry.sphere(0.1)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, restitution=0.6)
    return b.build()


def apex_ratio(model, options, e, h0, h):
    """First apex above touching (ballistic, from the first rising state off the plane)
    over e^2 h0."""
    m = eqx.tree_at(lambda m: m.contacts.restitution, model, model.contacts.restitution * 0 + e)
    m = eqx.tree_at(lambda m: m.r0, m, m.r0.at[0, 2].set(0.1 + h0))
    sol = mbd.simulate(m, t_end=1.0, h=h, **options)
    z, vz = np.asarray(sol.r[:, 0, 2]) - 0.1, np.asarray(sol.rdot[:, 0, 2])
    hit = int(np.argmax(z < 0))
    up = hit + int(np.argmax((z[hit:] > 0) & (vz[hit:] > 0)))
    return (z[up] + vz[up] ** 2 / (2 * G)) / (e * e * h0)


def main(h=1e-3):
    model = ball()
    for options in SETTINGS:
        table = np.array([[apex_ratio(model, options, e, h0, h) for h0 in (0.1, 0.5, 1.0)]
                          for e in (0.3, 0.6, 0.9)])  # fmt: skip
        print(options or "defaults", np.round(table, 3).tolist(),
              "max e_eff / e:", round(float(np.sqrt(table.max())), 3))  # fmt: skip


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1e-3)
