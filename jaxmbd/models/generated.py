"""Generated mechanisms of any size, for scaling studies and the structured solver's tests.

* :func:`pendulum_chain`: N rods on spherical joints, the first one to the ground (a path);
* :func:`engine`: an inline N-cylinder engine, one driven crankshaft, N rods and N pistons
  (N closed loops through the shaft);
* :func:`binary_tree`: a complete binary tree of rods on spherical joints (a branched tree).
"""

from __future__ import annotations

import math

import numpy as np

from ..build import ModelBuilder
from ..model import Model


def pendulum_chain(n_links: int, *, length: float = 0.5) -> Model:
    """N rods (length 0.5 m, 1 kg) on spherical joints, released at rest from a helix."""
    builder = ModelBuilder(f"pendulum chain {n_links}")
    point = np.zeros(3)
    for k in range(n_links):
        # link direction on a helix: horizontal-ish and turning, so the chain is spatial
        angle = 0.6 * k
        direction = np.array([math.cos(angle), math.sin(angle), -0.3])
        direction /= np.linalg.norm(direction)
        helper = np.array([0.0, 0.0, 1.0])
        y_axis = np.cross(helper, direction)
        y_axis /= np.linalg.norm(y_axis)
        builder.add_body(
            f"link{k}",
            mass=1.0,
            inertia=(1e-3, length**2 / 12, length**2 / 12),
            r=point + 0.5 * length * direction,
            axes=(direction, y_axis),
        )
        builder.spherical(
            f"ball{k}",
            body_i="ground" if k == 0 else f"link{k - 1}",
            body_j=f"link{k}",
            point=point,
        )
        point = point + length * direction
    return builder.build()


def engine(n_cylinders: int, *, radius=0.08, rod=0.3, pitch=0.2) -> Model:
    """An inline N-cylinder engine: one driven crankshaft, N rods and N pistons."""
    builder = ModelBuilder(f"engine {n_cylinders}")
    shaft_len = pitch * n_cylinders
    builder.add_body(
        "shaft",
        mass=1.0 * n_cylinders,
        # a rod along x: equal moments about y and z (the triangle inequality of a body)
        inertia=(
            1e-3 * n_cylinders,
            shaft_len**2 / 12 * n_cylinders,
            shaft_len**2 / 12 * n_cylinders,
        ),
        r=(shaft_len / 2, 0.0, 0.0),
    )
    builder.revolute(
        "main_bearing", body_i="ground", body_j="shaft", point=(0.0, 0.0, 0.0), axis=(1, 0, 0)
    )
    builder.rotation_driver(
        "motor", body_i="ground", body_j="shaft", axis=(1, 0, 0), angle="2*pi*t"
    )
    for k in range(n_cylinders):
        x = pitch * (k + 0.5)
        phase = 2 * math.pi * k / n_cylinders
        pin = np.array([x, radius * math.sin(phase), radius * math.cos(phase)])
        # piston on the z axis above the shaft: |pin - piston| = rod
        z_piston = pin[2] + math.sqrt(rod**2 - pin[1] ** 2)
        piston = np.array([x, 0.0, z_piston])
        axis = (piston - pin) / rod
        builder.add_body(
            f"rod{k}",
            mass=0.5,
            inertia=(1e-4, rod**2 / 12 * 0.5, rod**2 / 12 * 0.5),
            r=(pin + piston) / 2,
            axes=(axis, (1.0, 0.0, 0.0) - axis[0] * axis),
        )
        builder.add_body(f"piston{k}", mass=2.0, inertia=(1e-3, 1e-3, 1e-3), r=piston)
        builder.spherical(f"crank_pin{k}", body_i="shaft", body_j=f"rod{k}", point=pin)
        # universal joint at the piston pin: the rod's spin about its own axis is fixed
        cross_axis = np.cross(axis, (1.0, 0.0, 0.0))
        builder.universal(
            f"piston_pin{k}",
            body_i=f"piston{k}",
            body_j=f"rod{k}",
            point=piston,
            axis_i=(1.0, 0.0, 0.0),
            axis_j=cross_axis / np.linalg.norm(cross_axis),
        )
        builder.translational(
            f"cylinder{k}", body_i="ground", body_j=f"piston{k}", point=piston, axis=(0, 0, 1)
        )
    return builder.build()


def binary_tree(n_bodies: int, *, length: float = 0.4) -> Model:
    """``n_bodies`` rods (1 kg) in a binary tree on spherical joints: body k hangs from the
    far end of body (k - 1) // 2, body 0 from the ground; the two children of a body leave
    it in different directions so that the tree is spatial."""
    builder = ModelBuilder(f"binary tree {n_bodies}")
    tips = []
    for k in range(n_bodies):
        parent = (k - 1) // 2 if k else None
        start = np.zeros(3) if parent is None else tips[parent]
        depth = int(math.log2(k + 1))
        angle = 0.9 * k + 0.3 * depth
        direction = np.array([math.cos(angle), math.sin(angle), -0.8])
        direction /= np.linalg.norm(direction)
        y_axis = np.cross([0.0, 0.0, 1.0], direction)
        y_axis /= np.linalg.norm(y_axis)
        builder.add_body(
            f"rod{k}",
            mass=1.0,
            inertia=(1e-3, length**2 / 12, length**2 / 12),
            r=start + 0.5 * length * direction,
            axes=(direction, y_axis),
        )
        builder.spherical(
            f"ball{k}",
            body_i="ground" if parent is None else f"rod{parent}",
            body_j=f"rod{k}",
            point=start,
        )
        tips.append(start + length * direction)
    return builder.build()


__all__ = ["pendulum_chain", "engine", "binary_tree"]
