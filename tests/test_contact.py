"""Compliant contact (issue 35): narrow phase, the law, pairs as model data, and the
closed-form cases: sliding block, incline, bouncing ball, static penetration, rolling
sphere, gradients, vmap, energy.

Every dynamic case is checked against a closed form, never against an earlier output of
jaxmbd. The runs share compiled programs: every block case runs one model structure on
one time grid (gravity, friction and the initial state are array leaves), every rolling
or resting ball case another. The closed-form cases run in rA and in joint coordinates
(``FORMULATIONS``: the free bodies' joints, the default for these models), at the same
step and tolerances.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.contact import narrow_phase as nph
from jaxmbd.contact.law import (
    E_MIN,
    damping_factor,
    elastic_energy,
    friction_force,
    normal_force,
    restitution_of,
)

G = 9.81
I3 = np.eye(3)


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return I3 + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _collide(kind, pa, Ra, sa, pb, Rb, sb):
    out = nph.COLLIDE[kind](*(jnp.asarray(x, float) for x in (pa, Ra, sa, pb, Rb, sb)))
    return tuple(np.asarray(x) for x in out)


PLANE = ((0, 0, 0), I3, (0, 0, 0))


# ----------------------------------------------------------------------------- narrow phase


def test_plane_sphere_and_tilted_plane():
    gap, point, normal = _collide("plane_sphere", *PLANE, (1, 2, 0.3), I3, (0.5, 0, 0))
    np.testing.assert_allclose(gap, [-0.2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[1, 2, -0.1]], rtol=0, atol=ROUND_OFF)  # midway: -0.2 and 0
    np.testing.assert_allclose(normal, [[0, 0, 1]], rtol=0, atol=ROUND_OFF)
    R = _rot((1, 0, 0), 0.3)  # plane normal R[:, 2] through (0, 0, 1)
    n = R[:, 2]
    c = np.array([0.2, 1.0, 1.5])
    gap, _, normal = _collide("plane_sphere", (0, 0, 1), R, (0, 0, 0), c, I3, (0.4, 0, 0))
    np.testing.assert_allclose(gap, [n @ (c - [0, 0, 1]) - 0.4], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal[0], n, rtol=0, atol=ROUND_OFF)


def test_plane_capsule_lying_and_tilted():
    R = _rot((0, 1, 0), np.pi / 2)  # capsule axis along x
    gap, point, _ = _collide("plane_capsule", *PLANE, (0, 0, 0.05), R, (0.1, 0.5, 0))
    np.testing.assert_allclose(gap, [-0.05, -0.05], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.sort(point[:, 0]), [-0.5, 0.5], rtol=0, atol=ROUND_OFF)
    R = _rot((0, 1, 0), 0.4)
    gap, _, _ = _collide("plane_capsule", *PLANE, (0, 0, 1.0), R, (0.1, 0.5, 0))
    low = 1.0 - 0.5 * np.cos(0.4) - 0.1
    np.testing.assert_allclose(np.sort(gap), [low, low + np.cos(0.4)], rtol=0, atol=ROUND_OFF)


def test_plane_box_corners():
    R = _rot((1, 2, 3), 0.7)
    h = np.array([0.1, 0.2, 0.3])
    c = np.array([0.5, -0.2, 0.25])
    gap, point, normal = _collide("plane_box", *PLANE, c, R, h)
    corners = np.array([c + R @ (np.array(s) * h) for s in nph._CORNERS])
    np.testing.assert_allclose(np.sort(gap), np.sort(corners[:, 2]), rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[:, :2], corners[:, :2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[:, 2], 0.5 * corners[:, 2], rtol=0, atol=ROUND_OFF)
    assert normal.shape == (8, 3)


def test_plane_cylinder_upright_lying_tilted():
    r, half = 0.2, 0.3
    # upright, standing on its lower cap 1 cm deep: three rim points of that cap touch
    gap, point, _ = _collide("plane_cylinder", *PLANE, (0, 0, 0.29), I3, (r, half, 0))
    np.testing.assert_allclose(gap, [-0.01, -0.01, -0.01, 0.59], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.linalg.norm(point[:3, :2], axis=1), r, rtol=0, atol=ROUND_OFF)
    # lying along x: the two rims' lowest points, the other two points 1.5 r higher
    R = _rot((0, 1, 0), np.pi / 2)
    gap, point, _ = _collide("plane_cylinder", *PLANE, (0, 0, 0.19), R, (r, half, 0))
    np.testing.assert_allclose(np.sort(gap), [-0.01, -0.01, 0.29, 0.29], rtol=0, atol=ROUND_OFF)
    low = point[np.argsort(gap)[:2]]
    np.testing.assert_allclose(np.sort(low[:, 0]), [-half, half], rtol=0, atol=ROUND_OFF)
    # tilted by theta: the lowest point is half cos(theta) + r sin(theta) below the centre
    for theta in (0.3, 1.2, 2.5):
        R = _rot((1, 1, 0), theta)
        gap, _, _ = _collide("plane_cylinder", *PLANE, (0, 0, 1.0), R, (r, half, 0))
        t = theta if theta < np.pi / 2 else np.pi - theta
        np.testing.assert_allclose(
            gap.min(), 1.0 - half * np.cos(t) - r * np.sin(t), rtol=0, atol=ROUND_OFF
        )


def test_sphere_sphere_and_sphere_capsule():
    gap, point, normal = _collide("sphere_sphere", (0, 0, 0), I3, (1, 0, 0), (1.5, 0, 0), I3,
                                  (1, 0, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.5], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0.75, 0, 0]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[1, 0, 0]], rtol=0, atol=ROUND_OFF)
    # capsule along z from -1 to 1, radius 0.1; the sphere above its top end
    s = np.array([0.3, 0.0, 1.4])
    gap, _, normal = _collide("sphere_capsule", s, I3, (0.25, 0, 0), (0, 0, 0), I3, (0.1, 1, 0))
    d = np.linalg.norm(s - [0, 0, 1])
    np.testing.assert_allclose(gap, [d - 0.35], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        normal[0], -(s - [0, 0, 1]) / d, rtol=0, atol=ROUND_OFF
    )  # sphere -> capsule
    # beside the segment's middle
    gap, _, normal = _collide("sphere_capsule", (0.3, 0, 0.2), I3, (0.25, 0, 0), (0, 0, 0), I3,
                              (0.1, 1, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.05], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[-1, 0, 0]], rtol=0, atol=ROUND_OFF)


def test_sphere_box_outside_and_inside(rng):
    R = _rot((0.3, -1, 2), 0.9)
    c = np.array([0.1, 0.2, -0.1])
    h = np.array([0.3, 0.2, 0.1])
    # brute force: the distance to the box surface from points outside
    for _ in range(20):
        local = rng.uniform(-0.8, 0.8, 3)
        if np.all(np.abs(local) < h):
            continue
        p = c + R @ local
        closest = np.clip(local, -h, h)
        dist = np.linalg.norm(local - closest)
        gap, point, normal = _collide("sphere_box", p, I3, (0.05, 0, 0), c, R, h)
        np.testing.assert_allclose(gap, [dist - 0.05], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(normal[0], -R @ (local - closest) / dist, rtol=0, atol=ROUND_OFF)
    # centre inside, nearest the +y face
    p = c + R @ np.array([0.05, 0.15, 0.0])
    gap, _, normal = _collide("sphere_box", p, I3, (0.05, 0, 0), c, R, h)
    np.testing.assert_allclose(gap, [-(0.05 + 0.05)], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal[0], -R[:, 1], rtol=0, atol=ROUND_OFF)


def test_box_box_corners_face_to_face_and_tilted(rng):
    """Box B resting on box A (shifted by 0.05 m): the four corners of the contact patch
    (two of each box) touch along +z and every other corner is clear; pressed 1 mm into
    A they penetrate by 1 mm. A tilted box B with one corner 2 mm into A's top face:
    that corner alone, at the brute-force depth along A's face normal. Swapping the boxes
    gives the same gaps with the normals reversed."""
    h = np.array([0.1, 0.1, 0.1])
    for lift, gap_on in ((0.2, 0.0), (0.199, -0.001)):
        gap, point, normal = _collide("box_box", (0, 0, 0), I3, h, (0.05, 0, lift), I3, h)
        touching = np.flatnonzero(gap < 1e-12)
        assert len(touching) == 4
        np.testing.assert_allclose(gap[touching], gap_on, rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(
            normal[touching], np.tile([0, 0, 1.0], (4, 1)), rtol=0, atol=ROUND_OFF
        )
        np.testing.assert_allclose(point[touching, 2], 0.1 + 0.5 * gap_on, rtol=0, atol=ROUND_OFF)
        assert np.all(gap[gap > 1e-12] >= 0.05 - 1e-15)
        swapped = _collide("box_box", (0.05, 0, lift), I3, h, (0, 0, 0), I3, h)
        np.testing.assert_allclose(np.sort(swapped[0]), np.sort(gap), rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(
            swapped[2][swapped[0] < 1e-12], -normal[touching], rtol=0, atol=ROUND_OFF
        )
    R = _rot((1, 1, 0), 0.6)
    lowest = (R @ (nph._CORNERS * h).T).T[:, 2].min()
    centre = np.array([0.0, 0.0, 0.1 - lowest - 0.002])
    gap, _, normal = _collide("box_box", (0, 0, 0), I3, h, centre, R, h)
    k = int(np.argmin(gap))
    np.testing.assert_allclose(gap[k], -0.002, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal[k], [0, 0, 1.0], rtol=0, atol=ROUND_OFF)
    assert np.sum(gap < 0) == 1


def _segment_distance(p1, d1, p2, d2, n=2001):
    s = np.linspace(0, 1, n)
    a = p1[None] + s[:, None] * d1
    b = p2[None] + s[:, None] * d2
    return np.min(np.linalg.norm(a[:, None] - b[None], axis=-1))


def test_capsule_capsule_crossing_parallel_and_random(rng):
    Rx = _rot((0, 1, 0), np.pi / 2)  # along x
    Ry = _rot((1, 0, 0), np.pi / 2)  # along y
    gap, point, normal = _collide("capsule_capsule", (0, 0, 0), Rx, (0.1, 1, 0), (0.2, 0.3, 0.15),
                                  Ry, (0.1, 1, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.05], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 0, 1]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0.2, 0, 0.075]], rtol=0, atol=ROUND_OFF)
    # parallel along x, overlapping over x in [-0.5, 1]: the middle of the overlap
    gap, point, _ = _collide("capsule_capsule", (0, 0, 0), Rx, (0.1, 1, 0), (0.5, 0.15, 0), Rx,
                             (0.1, 1, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.05], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[0, 0], 0.25, rtol=0, atol=ROUND_OFF)
    for _ in range(6):
        pa, pb = rng.normal(size=3), rng.normal(size=3)
        Ra, Rb = _rot(rng.normal(size=3), 2.0), _rot(rng.normal(size=3), 1.0)
        gap, _, _ = _collide("capsule_capsule", pa, Ra, (0.1, 0.7, 0), pb, Rb, (0.2, 0.4, 0))
        dist = _segment_distance(pa - 0.7 * Ra[:, 2], 1.4 * Ra[:, 2], pb - 0.4 * Rb[:, 2],
                                 0.8 * Rb[:, 2])  # fmt: skip
        np.testing.assert_allclose(
            gap, [dist - 0.3], rtol=0, atol=2e-7
        )  # 5.5e-8: the grid of _segment_distance


@pytest.mark.parametrize(
    "kind, a, b",
    [
        ("plane_sphere", PLANE, ((0, 0, 0.1), I3, (0.1, 0, 0))),  # exactly touching
        ("plane_box", PLANE, ((0, 0, 0.1), I3, (0.1, 0.1, 0.1))),
        ("plane_capsule", PLANE, ((0, 0, 0.1), _rot((0, 1, 0), np.pi / 2), (0.1, 0.3, 0))),
        ("plane_cylinder", PLANE, ((0, 0, 0.3), I3, (0.1, 0.3, 0))),  # upright: no rim dir
        ("plane_cylinder", PLANE, ((0, 0, 0.1), _rot((1, 0, 0), np.pi / 2), (0.1, 0.3, 0))),
        ("sphere_sphere", ((0, 0, 0), I3, (0.1, 0, 0)), ((0, 0, 0), I3, (0.1, 0, 0))),  # same
        ("sphere_sphere", ((0, 0, 0), I3, (0.1, 0, 0)), ((0, 0, 0.2), I3, (0.1, 0, 0))),
        ("sphere_capsule", ((0, 0, 0.2), I3, (0.1, 0, 0)), ((0, 0, 0), I3, (0.1, 0.2, 0))),
        ("sphere_box", ((0, 0, 0.2), I3, (0.1, 0, 0)), ((0, 0, 0), I3, (0.1, 0.1, 0.1))),
        ("sphere_box", ((0, 0, 0.1), I3, (0.1, 0, 0)), ((0, 0, 0), I3, (0.1, 0.1, 0.1))),  # on
        ("capsule_capsule", ((0, 0, 0), I3, (0.1, 0.3, 0)), ((0, 0.2, 0), I3, (0.1, 0.3, 0))),
        ("capsule_capsule", ((0, 0, 0), I3, (0.1, 0.3, 0)), ((0, 0, 0), I3, (0.1, 0.3, 0))),
        ("box_box", ((0, 0, 0), I3, (0.1, 0.1, 0.1)), ((0.05, 0, 0.2), I3, (0.1, 0.1, 0.1))),
        ("box_box", ((0, 0, 0), I3, (0.1, 0.1, 0.1)), ((0, 0, 0), I3, (0.1, 0.1, 0.1))),  # same
    ],
)
def test_narrow_phase_gradients_finite_when_touching(kind, a, b):
    """Exactly touching shapes and the degenerate configurations (coincident centres, a
    centre on the box surface, an upright cylinder, parallel or coincident segments): the
    slots and their derivatives with respect to both poses are finite."""
    args = [jnp.asarray(x, float) for x in (*a, *b)]

    def flat(pa, pb):
        s = nph.COLLIDE[kind](pa, args[1], args[2], pb, args[4], args[5])
        return jnp.concatenate([s.gap, s.point.reshape(-1), s.normal.reshape(-1)])

    value = flat(args[0], args[3])
    jac = jax.jacfwd(flat, argnums=(0, 1))(args[0], args[3])
    assert np.all(np.isfinite(value)) and all(np.all(np.isfinite(j)) for j in jac)
    assert value.shape[0] == 7 * nph.SLOTS[kind]


def _unit(n, atol=ROUND_OFF):
    np.testing.assert_allclose(np.linalg.norm(n, axis=-1), 1.0, rtol=0, atol=atol)


def test_narrow_phase_values_in_degenerate_configurations():
    """The degenerate cases of the gradient check above, by value: the gap is what the
    geometry makes it, the normal is one of the directions that separate the shapes by
    that gap (any unit vector where all do: perpendicular to a capsule's axis for a point
    on it), and the point lies midway between the two surfaces along that normal."""
    # exactly touching: gap 0, the point on both surfaces
    gap, point, normal = _collide("plane_sphere", *PLANE, (0, 0, 0.1), I3, (0.1, 0, 0))
    np.testing.assert_allclose(gap, [0.0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0, 0]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 0, 1]], rtol=0, atol=ROUND_OFF)
    gap, point, normal = _collide("plane_box", *PLANE, (0, 0, 0.1), I3, (0.1, 0.1, 0.1))
    corners = np.array([[0, 0, 0.1] + np.array(s) * 0.1 for s in nph._CORNERS])
    np.testing.assert_allclose(gap, corners[:, 2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[:, :2], corners[:, :2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[:, 2], corners[:, 2] / 2, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, np.tile([0, 0, 1.0], (8, 1)), rtol=0, atol=ROUND_OFF)
    R = _rot((0, 1, 0), np.pi / 2)
    gap, point, normal = _collide("plane_capsule", *PLANE, (0, 0, 0.1), R, (0.1, 0.3, 0))
    np.testing.assert_allclose(gap, [0, 0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point[np.argsort(point[:, 0])], [[-0.3, 0, 0], [0.3, 0, 0]],
                               rtol=0, atol=ROUND_OFF)  # fmt: skip
    np.testing.assert_allclose(normal, [[0, 0, 1.0]] * 2, rtol=0, atol=ROUND_OFF)
    # upright cylinder on its cap (no rim direction): three distinct rim points at gap 0
    gap, point, normal = _collide("plane_cylinder", *PLANE, (0, 0, 0.3), I3, (0.1, 0.3, 0))
    np.testing.assert_allclose(gap, [0, 0, 0, 0.6], rtol=0, atol=ROUND_OFF)
    rim = point[:3]
    np.testing.assert_allclose(np.linalg.norm(rim[:, :2], axis=1), 0.1, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(rim[:, 2], 0.0, rtol=0, atol=ROUND_OFF)
    sides = np.linalg.norm(rim - np.roll(rim, 1, axis=0), axis=1)
    np.testing.assert_allclose(sides, 0.1 * np.sqrt(3), rtol=0, atol=ROUND_OFF)  # 120 degrees apart
    np.testing.assert_allclose(normal, [[0, 0, 1.0]] * 4, rtol=0, atol=ROUND_OFF)
    # lying along y: both rims' lowest points touch, the other two points 1.5 r higher
    R = _rot((1, 0, 0), np.pi / 2)
    gap, point, _ = _collide("plane_cylinder", *PLANE, (0, 0, 0.1), R, (0.1, 0.3, 0))
    np.testing.assert_allclose(gap, [0, 0.15, 0.15, 0], rtol=0, atol=3e-10)  # 8.7e-11
    np.testing.assert_allclose(
        point[[0, 3]], [[0, 0.3, 0], [0, -0.3, 0]], rtol=0, atol=5e-10
    )  # 1.0e-10
    # spheres touching, and concentric (every direction separates them by 2 r)
    gap, point, normal = _collide("sphere_sphere", (0, 0, 0), I3, (0.1, 0, 0), (0, 0, 0.2), I3,
                                  (0.1, 0, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [0.0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0, 0.1]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 0, 1]], rtol=0, atol=ROUND_OFF)
    gap, point, normal = _collide("sphere_sphere", (0, 0, 0), I3, (0.1, 0, 0), (0, 0, 0), I3,
                                  (0.1, 0, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.2], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0, 0]], rtol=0, atol=ROUND_OFF)
    _unit(normal)
    # a sphere centre on the capsule's axis (at its end, inside it): the normal is
    # perpendicular to the axis, the gap -(r_a + r_b), the point the centre (equal radii)
    for z in (0.2, 0.1):
        gap, point, normal = _collide("sphere_capsule", (0, 0, z), I3, (0.1, 0, 0), (0, 0, 0),
                                      I3, (0.1, 0.2, 0))  # fmt: skip
        np.testing.assert_allclose(gap, [-0.2], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(point, [[0, 0, z]], rtol=0, atol=ROUND_OFF)
        _unit(normal)
        assert abs(normal[0, 2]) < ROUND_OFF
    # a sphere touching a box face, its centre on the face, on an edge, at the centre
    h = (0.1, 0.1, 0.1)
    gap, point, normal = _collide("sphere_box", (0, 0, 0.2), I3, (0.1, 0, 0), (0, 0, 0), I3, h)
    np.testing.assert_allclose(gap, [0.0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0, 0.1]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 0, -1]], rtol=0, atol=ROUND_OFF)  # sphere -> box
    gap, point, normal = _collide("sphere_box", (0, 0, 0.1), I3, (0.1, 0, 0), (0, 0, 0), I3, h)
    np.testing.assert_allclose(gap, [-0.1], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0, 0.05]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 0, -1]], rtol=0, atol=ROUND_OFF)
    edge = np.array([0.1, 0.1, 0.0])
    gap, point, normal = _collide("sphere_box", edge, I3, (0.05, 0, 0), (0, 0, 0), I3, h)
    np.testing.assert_allclose(gap, [-0.05], rtol=0, atol=ROUND_OFF)
    n = normal[0]
    assert any(
        np.allclose(n, d, rtol=0, atol=ROUND_OFF) for d in ([-1, 0, 0], [0, -1, 0])
    )  # either face
    np.testing.assert_allclose(point[0], edge + 0.025 * n, rtol=0, atol=ROUND_OFF)
    gap, point, normal = _collide("sphere_box", (0, 0, 0), I3, (0.05, 0, 0), (0, 0, 0), I3, h)
    np.testing.assert_allclose(
        gap, [-0.15], rtol=0, atol=ROUND_OFF
    )  # out through any face: 0.1 + r
    n = normal[0]
    assert np.isclose(np.max(np.abs(n)), 1.0, rtol=0, atol=ROUND_OFF) and np.isclose(
        np.linalg.norm(n), 1.0, rtol=0, atol=ROUND_OFF
    )  # a face normal
    np.testing.assert_allclose(point[0], -0.025 * n, rtol=0, atol=ROUND_OFF)
    # parallel capsules touching side by side: the middle of the overlap; coincident ones
    gap, point, normal = _collide("capsule_capsule", (0, 0, 0), I3, (0.1, 0.3, 0), (0, 0.2, 0),
                                  I3, (0.1, 0.3, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [0.0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(point, [[0, 0.1, 0]], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(normal, [[0, 1, 0]], rtol=0, atol=ROUND_OFF)
    gap, point, normal = _collide("capsule_capsule", (0, 0, 0), I3, (0.1, 0.3, 0), (0, 0, 0),
                                  I3, (0.1, 0.3, 0))  # fmt: skip
    np.testing.assert_allclose(gap, [-0.2], rtol=0, atol=ROUND_OFF)
    assert abs(point[0, 0]) < ROUND_OFF and abs(point[0, 1]) < ROUND_OFF and abs(point[0, 2]) <= 0.3
    _unit(normal)
    assert abs(normal[0, 2]) < ROUND_OFF
    # coincident boxes: every corner 2 h deep along a face normal of the other box
    gap, _, normal = _collide("box_box", (0, 0, 0), I3, h, (0, 0, 0), I3, h)
    assert gap.min() == pytest.approx(-0.2, abs=ROUND_OFF)
    _unit(normal)
    np.testing.assert_allclose(np.max(np.abs(normal), axis=1), 1.0, rtol=0, atol=ROUND_OFF)


# ----------------------------------------------------------------------------- the law


def test_restitution_quadrature_matches_the_impact_ode():
    """e(a) of the closed-form quadrature against a direct integration of the dimensionless
    impact x'' = -max(0, x^n (1 + a x' / v_est)) for two exponents (n drops out)."""
    from scipy.integrate import solve_ivp

    def e_ode(a, n):
        def rhs(_, y):
            x, v = y
            xp = max(x, 0.0)
            ve = np.sqrt(v * v + 2 * xp ** (n + 1) / (n + 1))
            return [v, -max(0.0, xp**n * (1 + a * (v / ve if ve > 0 else 0.0)))]

        def leave(_, y):
            return y[0]

        leave.terminal, leave.direction = True, -1
        sol = solve_ivp(rhs, (0, 200), [0.0, 1.0], method="DOP853", events=leave, rtol=1e-11,
                        atol=1e-13, first_step=1e-6)  # fmt: skip
        return -sol.y_events[0][0][1]

    for a in (0.2, 0.966, 2.5, 12.0):
        for n in (1.0, 1.5):
            assert abs(restitution_of(a) - e_ode(a, n)) < 1e-10  # 1.9e-11


def test_damping_factor_inverts_restitution():
    e = np.linspace(E_MIN, 1.0, 397)
    a = np.asarray(damping_factor(jnp.asarray(e)))
    assert np.max(np.abs(restitution_of(a) - e)) < 1e-4
    assert abs(float(damping_factor(1.0))) < ROUND_OFF
    assert float(damping_factor(0.0)) == float(damping_factor(E_MIN))  # e clipped to E_MIN
    # C1: derivative continuous across a table node, equal to 1 / (de/da)
    de = (1.0 - E_MIN) / 200
    node = E_MIN + 80 * de
    left, right = jax.grad(damping_factor)(node - 1e-9), jax.grad(damping_factor)(node + 1e-9)
    assert abs(left - right) < 4e-8 * abs(left)  # 8.4e-9
    a0 = float(damping_factor(node))
    slope = 2e-7 / (restitution_of(a0 + 1e-7) - restitution_of(a0 - 1e-7))
    assert float(left) == pytest.approx(slope, rel=3e-8)  # 5.3e-9


def test_normal_force_impact_gives_the_restitution():
    """The JAX law itself, integrated through an impact of a mass m with scipy, returns
    the restitution it was given (any stiffness, mass, speed, exponent)."""
    from scipy.integrate import solve_ivp

    @jax.jit
    def law(d, dd, K, e, m, n):
        return normal_force(d, dd, stiffness=K, restitution=e, damping=0.0, m_eff=m, exponent=n)

    for e, K, m, v0, n in ((0.5, 1e6, 2.0, 3.0, 1.5), (0.8, 3e4, 0.5, 0.4, 1.0),
                           (0.1, 1e8, 1.0, 1.0, 1.5)):  # fmt: skip

        def rhs(_, y, e=e, K=K, m=m, n=n):
            return [y[1], -float(law(y[0], y[1], K, e, m, n)) / m]

        def leave(_, y):
            return y[0]

        leave.terminal, leave.direction = True, -1
        T = (m * v0**2 / K) ** (1 / (n + 1)) / v0
        sol = solve_ivp(rhs, (0, 1e3 * T), [0.0, v0], events=leave, rtol=1e-10, atol=1e-14,
                        first_step=1e-6 * T, method="DOP853")  # fmt: skip
        assert -sol.y_events[0][0][1] / v0 == pytest.approx(e, rel=4e-7)  # 8.2e-8


def test_law_zero_and_finite_at_zero_penetration_and_slip():
    kw = dict(stiffness=1e6, restitution=0.5, damping=0.01, m_eff=1.0, exponent=1.5)
    assert float(normal_force(-1e-3, 2.0, **kw)) == 0.0
    assert float(normal_force(0.0, 0.0, **kw)) == 0.0
    for d, dd in ((0.0, 0.0), (0.0, 1.0), (1e-6, 0.0), (-1e-3, 0.0), (1e-4, -5.0)):
        g = jax.grad(lambda d_, dd_: normal_force(d_, dd_, **kw), argnums=(0, 1))(d, dd)
        assert np.all(np.isfinite(g))
    assert float(normal_force(1e-4, -100.0, **kw)) == 0.0  # never pulls
    slip = jnp.zeros(3)
    f = friction_force(slip, 10.0, friction=0.5, slip_velocity=1e-4)
    J = jax.jacfwd(lambda s: friction_force(s, 10.0, friction=0.5, slip_velocity=1e-4))(slip)
    assert np.all(f == 0) and np.allclose(J, -0.5 * 10 / 1e-4 * I3, rtol=ROUND_OFF, atol=0)
    f = friction_force(jnp.array([3.0, 4.0, 0.0]), 10.0, friction=0.5, slip_velocity=1e-4)
    np.testing.assert_allclose(f, -5.0 * np.array([0.6, 0.8, 0]), rtol=1e-9)  # isotropic
    assert float(elastic_energy(-1.0, stiffness=1.0)) == 0.0


def test_line_search_newton_converges_where_newton_cycles():
    """An implicit step of a block coming to rest under regularised friction (m (v - v_n)
    / h + mu m g s(v) = 0, s of width v_s = 1e-4 m/s): exact Newton from v_n cycles between
    the flat sides; damped by backtracking it converges to the root, with the same test."""
    from jaxmbd.newton import MAX_ITERATIONS, SUCCESS

    v_n, h, mu_g, v_s = 1e-3, 1e-3, 0.4 * G, 1e-4

    def residual(v):
        return (v - v_n) / h + mu_g * v / jnp.sqrt(v * v + v_s**2)

    jacobian = jax.jacfwd(residual)
    x0 = jnp.array([v_n])
    _, info, _ = mbd.FullNewton().solve(residual, jacobian, x0, None, tol=1e-10)
    assert int(info.status) == MAX_ITERATIONS
    x, info, _ = mbd.LineSearchNewton().solve(residual, jacobian, x0, None, tol=1e-10)
    assert int(info.status) == SUCCESS and abs(float(residual(x)[0])) < 1e-5  # from 3.9
    assert abs(float(x[0])) < v_s  # stopped: within the regularisation


# ----------------------------------------------------------------------------- model data


def _ball(mass=1.0, radius=0.1, *, r=None, rdot=(0, 0, 0), omega=(0, 0, 0), **contact):
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    r = (0, 0, radius) if r is None else r
    b.add_body("ball", mass=mass, inertia=[0.4 * mass * radius**2] * 3, r=r, rdot=rdot,
               omega=omega, shapes=[mbd.geometry.sphere(radius)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", **{"friction": 0.3, **contact})
    return b.build()


def _settled(model, n_slots=1, gravity=G):
    """``model`` with its one body lowered onto the static penetration of its slots."""
    K, n = float(model.contacts.stiffness[0]), float(model.contacts.exponent[0])
    depth = (float(model.mass[0]) * gravity / n_slots / K) ** (1 / n)
    return eqx.tree_at(lambda m: m.r0, model, model.r0.at[0, 2].add(-depth))


def test_pairs_are_model_data():
    b = mbd.ModelBuilder("drop", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[1e-3] * 3, r=(0, 0, 0.5),
               shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, restitution=0.6)
    model = b.build()
    c = model.contacts
    assert c.friction.shape == c.restitution.shape == c.stiffness.shape == (1,)
    assert float(c.friction[0]) == 0.5 and float(c.restitution[0]) == 0.6
    # default stiffness: the weight on one slot penetrates 1e-3 of the radius (Hertz)
    assert float(c.stiffness[0]) == pytest.approx(9.81 / (1e-3 * 0.05) ** 1.5, rel=ROUND_OFF)
    other = eqx.tree_at(lambda m: m.contacts.friction, model, jnp.array([0.2]))
    assert float(other.contacts.friction[0]) == 0.2 and float(model.contacts.friction[0]) == 0.5
    leaves = jax.tree_util.tree_leaves(model)
    assert any(leaf is c.friction for leaf in leaves)  # an array leaf: jax.grad reaches it
    assert model.ground_shapes[0].kind == "plane"
    assert mbd.ModelBuilder("x").add_body("a", mass=1, inertia=[1] * 3).build().contacts is None


def test_add_contacts_filters_joined_bodies_visual_shapes_and_unsupported_pairs():
    b = mbd.ModelBuilder("chain")
    b.add_body("a", mass=1, inertia=[1] * 3, r=(0, 0, 1), shapes=[mbd.geometry.capsule(0.1, 1)])
    b.add_body("b", mass=2, inertia=[1] * 3, r=(0, 0, 2), shapes=[mbd.geometry.sphere(0.1)])
    b.add_body("c", mass=1, inertia=[1] * 3, r=(1, 0, 2),
               shapes=[mbd.geometry.sphere(0.1, collide=False)])  # fmt: skip
    b.add_body("d", mass=1, inertia=[1] * 3, r=(2, 0, 2), shapes=[mbd.geometry.box((1, 1, 1))])
    e_shapes = [mbd.geometry.cylinder(0.1, 1), mbd.geometry.sphere(0.1, pos=(0, 0, 1))]
    b.add_body("e", mass=1, inertia=[1] * 3, r=(3, 0, 2), shapes=e_shapes)
    b.add_body("f", mass=1, inertia=[1] * 3, r=(4, 0, 2), shapes=[mbd.geometry.cone(0.1, 0.2)])
    b.add_ground_plane()
    b.spherical("ab", body_i="a", body_j="b", point=(0, 0, 1.5))
    b.revolute("ga", body_i="ground", body_j="a", point=(0, 0, 0.5), axis=(0, 1, 0))
    b.add_contacts(friction=0.3, exclude=[("b", "ground")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every colliding shape pair has a narrow phase
        model = b.build()
    names = set(model.contacts.pair_names)
    assert "a/b" not in names and "b/a" not in names  # joined
    assert "a/ground" in names  # joined to the ground: kept (as MuJoCo)
    assert "b/ground" not in names  # excluded
    assert not any("c" in n.split("/") for n in names)  # visual only
    assert {"b/d", "d/ground", "e/ground", "a/e", "d/e", "a/d"} <= names
    assert not any("f" in n.split("/") for n in names)  # a cone: no narrow phase, no pair
    k = model.contacts.pair_names.index("d/e")  # the box against e's sphere and cylinder
    assert [g.kind for g in model.contacts.groups if k in g.pair] == ["sphere_box", "box_cylinder"]
    # mass of the box-sphere pair: reduced mass in the default stiffness
    k = model.contacts.pair_names.index("b/d")
    assert float(model.contacts.stiffness[k]) == pytest.approx(
        (2 * 1 / 3) * 9.81 / (1e-3 * 0.1) ** 1.5, rel=ROUND_OFF
    )


def test_contact_errors():
    b = mbd.ModelBuilder("x")
    b.add_body("a", mass=1, inertia=[1] * 3, shapes=[mbd.geometry.cone(0.1, 0.2)])
    b.add_body("p", mass=1, inertia=[1] * 3, r=(1, 0, 0), shapes=[mbd.geometry.sphere(0.1)])
    with pytest.raises(mbd.ModelError, match="a body cannot contact itself"):
        b.add_contact("a", "a", friction=0.1)
    with pytest.raises(mbd.ModelError, match="unknown body"):
        b.add_contact("a", "nope", friction=0.1)
    with pytest.raises(mbd.ModelError, match="restitution: expected a number in"):
        b.add_contact("p", "ground", friction=0.1, restitution=1.5)
    with pytest.raises(mbd.ModelError, match="friction"):
        b.add_contact("p", "ground", friction=-0.1)
    with pytest.raises(mbd.ModelError, match="a plane is ground geometry"):
        b.add_body("q", mass=1, inertia=[1] * 3, shapes=[mbd.geometry.plane()])
    b.add_contact("p", "ground", friction=0.1)
    with pytest.raises(mbd.ModelError, match="duplicate"):
        b.add_contact("p", "ground", friction=0.2)
    b.add_contact("a", "ground", friction=0.1)
    with pytest.raises(mbd.ModelError, match="no pair of their colliding shapes"):
        b.build()


def test_collide_flag_round_trips_and_hashes(tmp_path):
    s = mbd.geometry.sphere(0.1, collide=False)
    assert not s.collide and s.to_json()["collide"] is False
    assert mbd.geometry.make_shape(s.to_json()) == s
    assert hash(s) != hash(mbd.geometry.sphere(0.1))
    b = mbd.ModelBuilder("v")
    b.add_body("a", mass=1, inertia=[1] * 3, shapes=[s, mbd.geometry.box((1, 1, 1))])
    b.add_body("b", mass=2, inertia=[1] * 3, r=(0, 0, 2), shapes=[mbd.geometry.sphere(0.2)])
    b.add_ground_plane(point=(0, 0, -1), normal=(0, 1, 1))
    b.add_ground_shape(mbd.geometry.sphere(0.3, pos=(1, 0, 0)))
    b.add_contact("a", "ground", friction=0.4, restitution=0.3)
    b.add_contact("b", "a", friction=0.2, stiffness=1e5, damping=0.1, exponent=1.0,
                  slip_velocity=1e-3)  # fmt: skip
    model = b.build()
    back = mbd.load_model(mbd.save_model(model, tmp_path / "v.json"))
    assert back.shapes == model.shapes and back.ground_shapes == model.ground_shapes
    assert back.contacts.pair_names == model.contacts.pair_names
    assert jax.tree_util.tree_structure(back.contacts) == jax.tree_util.tree_structure(
        model.contacts
    )
    for x, y in zip(jax.tree_util.tree_leaves(back.contacts),
                    jax.tree_util.tree_leaves(model.contacts), strict=True):  # fmt: skip
        np.testing.assert_array_equal(x, y)


def test_contact_options_refused():
    model = _ball()
    with pytest.raises(ValueError, match="stepped by integrator='moreau_jean'"):
        mbd.simulate(
            model, formulation="rA", t_end=0.01, h=1e-3, contact="hard", integrator="gen_alpha"
        )
    with pytest.raises(ValueError, match="option of simulate only"):
        mbd.static_equilibrium(model, formulation="rA", contact="hard")
    with pytest.raises(ValueError, match="contact must be one of"):
        mbd.simulate(model, formulation="rA", t_end=0.01, h=1e-3, contact="sticky")
    with pytest.raises(mbd.ModelError, match="was built in code"):
        mbd.simulate(model, formulation="rA", t_end=0.01, h=1e-3, contact="soft")
    with pytest.raises(TypeError):
        mbd.kinematics(model, t_end=0.01, h=1e-3, contact="none")


# ----------------------------------------------------------------------------- closed forms

H = 1e-3  # the block and ball runs: one time grid, one compiled program per structure
T_BLOCK = 1.0
T_BALL = 0.4
#: The formulations of the closed-form cases (joint: the Newton-solved gen_alpha step with
#: impact sub-steps, :mod:`jaxmbd.joint_space.contact_step`, as rA's).
FORMULATIONS = ("rA", "joint")


def _block(*, mu=0.4, v0=0.0, theta=0.0):
    """A 10 cm, 1 kg cube on the plane z = 0, gravity tilted by theta (an incline along x),
    resting on its four lower corners at their static penetration."""
    grav = (G * np.sin(theta), 0.0, -G * np.cos(theta))
    b = mbd.ModelBuilder("block", gravity=grav)
    a = 0.1
    b.add_body("box", mass=1.0, inertia=[a * a / 6] * 3, r=(0, 0, a / 2), rdot=(v0, 0, 0),
               shapes=[mbd.geometry.box((a, a, a))])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("box", "ground", friction=mu)
    return _settled(b.build(), n_slots=4, gravity=G * np.cos(theta))


@pytest.fixture(scope="module", params=FORMULATIONS)
def sliding(request):
    return mbd.simulate(_block(v0=2.0), formulation=request.param, t_end=T_BLOCK, h=H)


def test_sliding_block_stops_at_the_coulomb_distance_and_time(sliding):
    """v0 = 2 m/s, mu = 0.4: it stops after v0^2 / (2 mu g) at t = v0 / (mu g) (rA and
    joint alike: the same step on a free body)."""
    mu, v0 = 0.4, 2.0
    x = np.asarray(sliding.r[:, 0, 0])
    v = np.asarray(sliding.rdot[:, 0, 0])
    t = np.asarray(sliding.t)
    distance = x[-1] - x[0]
    assert distance == pytest.approx(v0**2 / (2 * mu * G), rel=2e-5)  # met to 8.0e-6
    assert abs(v[-1]) < ROUND_OFF * v0  # at rest, no creep without a tangential load
    stop = t[np.argmax(np.abs(v) < 1e-3)]  # 1e-3 m/s: 5e-4 of v0 before the end
    assert stop == pytest.approx(v0 / (mu * G), rel=1.8e-3)  # met to 6.2e-4 (grid: 2e-3)
    # the slot view: four corners press, summing to the weight once the block rests
    c = sliding.contact
    assert c.gap.shape == c.normal_force.shape == (len(t), 8)
    assert c.tangential_force.shape == (len(t), 8, 3) and c.active.dtype == bool
    assert int(np.sum(np.asarray(c.active[-1]))) == 4
    assert float(jnp.sum(c.normal_force[-1])) == pytest.approx(G, rel=2e-12)  # 4.0e-13
    f = mbd.diagnostics.contact_forces(_block(v0=2.0), sliding)
    assert f.names == ("box/ground",)
    np.testing.assert_allclose(f.force[-1, 0], [0, 0, G], rtol=0, atol=2e-11)  # 4.0e-12
    np.testing.assert_allclose(f.force[100, 0, 0], -mu * G, rtol=1e-5)  # kinetic friction
    np.testing.assert_allclose(f.point[-1, 0, :2], sliding.r[-1, 0, :2], rtol=0, atol=ROUND_OFF)


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("tan_theta", [0.3, 0.5])
def test_incline_sticks_or_slides_at_the_coulomb_acceleration(tan_theta, formulation):
    """Gravity tilted by theta on mu = 0.4: tan(theta) = 0.3 sticks (creep below 0.3 mm in
    1 s; 0.12 mm measured), tan(theta) = 0.5 slides with a = g (sin(theta) - mu cos(theta))
    (met to 4.0e-3)."""
    theta = np.arctan(tan_theta)
    sol = mbd.simulate(_block(theta=theta), formulation=formulation, t_end=T_BLOCK, h=H)
    assert sol.formulation == formulation
    x = np.asarray(sol.r[:, 0, 0] - sol.r[0, 0, 0])
    if tan_theta < 0.4:
        assert np.max(np.abs(x)) < 3e-4
    else:
        a = G * (np.sin(theta) - 0.4 * np.cos(theta))
        assert x[-1] == pytest.approx(0.5 * a * T_BLOCK**2, rel=1e-2)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_rolling_sphere_slides_then_rolls(formulation):
    """v0 = 2 m/s, omega0 = 0, mu = 0.3: slides until v = 5/7 v0 at t = 2 v0 / (7 mu g),
    then rolls with omega R = v."""
    R, v0, mu = 0.1, 2.0, 0.3
    model = _settled(_ball(radius=R, rdot=(v0, 0, 0), friction=mu))
    sol = mbd.simulate(model, formulation=formulation, t_end=T_BALL, h=H)
    v = np.asarray(sol.rdot[:, 0, 0])
    w = np.asarray(sol.omega[:, 0, 1])  # about y (body = global axes up to the roll)
    t = np.asarray(sol.t)
    depth = R - float(model.r0[0, 2])
    slip = v - w * (R - depth)  # the contact point sits at the penetrated radius
    t_roll = t[np.argmax(np.abs(slip) < 1e-3 * v0)]
    assert t_roll == pytest.approx(2 * v0 / (7 * mu * G), rel=1e-2)  # met to 4.3e-3
    assert v[-1] == pytest.approx(5 / 7 * v0, rel=8e-4)  # met to 2.9e-4
    assert w[-1] * R == pytest.approx(v[-1], rel=1.5e-3)  # met to 5.0e-4


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("exponent, stiffness", [(1.5, 1e7), (1.0, 1e5)])
def test_ball_settles_at_the_static_penetration(exponent, stiffness, formulation):
    """A ball put on the plane settles where K delta^n = m g: mg / k (linear) or
    (mg / K)^(2/3) (Hertz)."""
    model = _ball(restitution=0.5, stiffness=stiffness, exponent=exponent)
    sol = mbd.simulate(model, formulation=formulation, t_end=T_BALL, h=H)
    depth = 0.1 - float(sol.r[-1, 0, 2])
    assert depth == pytest.approx(
        (1.0 * G / stiffness) ** (1 / exponent), rel=1e-12, abs=0
    )  # 1.8e-13
    assert float(sol.contact.normal_force[-1, 0]) == pytest.approx(G, rel=5e-13)  # 1.0e-13


@pytest.fixture(
    scope="module",
    # joint: 28000 Newton steps of a program of its own (slow); its bounce at the users'
    # step (h = 1e-3) is test_impact_restitution's default-suite table, its apex ratios
    # against the law's ODE test_contact_joint's
    params=["rA", pytest.param("joint", marks=pytest.mark.slow)],
)
def bounces(request):
    """Drops of a 5 cm ball with e = 0.5 (from 1 m) and e = 0.8 (from 0.5 m), K = 3e8
    (ten times the default: a shorter impact, in which gravity acts less; 22-40 steps an
    impact at h = 5e-5)."""
    out = {}
    for e, z0 in ((0.5, 1.0), (0.8, 0.5)):
        model = _ball(radius=0.05, r=(0, 0, z0), restitution=e, stiffness=3e8)
        out[e] = model, mbd.simulate(model, formulation=request.param, t_end=1.4, h=5e-5)
    return out


@pytest.mark.parametrize("e", [0.5, 0.8])
def test_bouncing_ball_apex_heights_follow_e_squared(bounces, e):
    """Apex heights above touching follow e^2 per bounce over three bounces (impact speeds
    4.3 to 1.1 m/s for e = 0.5, 3.0 to 1.9 m/s for e = 0.8): within 1.5e-3 for e = 0.5 (met
    to 4.6e-4, the law's gravity factor keeping e during the impact) and 4.5e-4 for e = 0.8
    (met to 1.4e-4)."""
    model, sol = bounces[e]
    z = np.asarray(sol.r[:, 0, 2]) - 0.05
    peaks = np.nonzero((z[1:-1] > z[:-2]) & (z[1:-1] >= z[2:]) & (z[1:-1] > 0))[0] + 1
    apex = np.concatenate([[z[0]], z[peaks]])[:4]
    assert len(apex) == 4
    ratios = apex[1:] / apex[:-1]
    np.testing.assert_allclose(ratios, e**2, rtol={0.5: 1.5e-3, 0.8: 4.5e-4}[e])


def test_energy_never_grows_at_a_contact(bounces):
    """Kinetic + gravity + elastic contact energy: never above its value before a bounce
    (gen_alpha, per impact), never growing by a step with backward Euler, and the law's
    power never positive at any state (a property of the element, not of a run)."""
    model, sol = bounces[0.5]
    energy = np.asarray(mbd.diagnostics.energy(model, sol).total)
    touching = np.asarray(sol.contact.active[:, 0])
    starts = np.nonzero(touching[1:] & ~touching[:-1])[0]
    ends = np.nonzero(~touching[1:] & touching[:-1])[0] + 1
    assert len(starts) >= 3
    for s, f in zip(starts, ends, strict=False):
        assert np.max(energy[s : f + 1]) <= energy[s] * (1 + ROUND_OFF)
        assert energy[f] < energy[s]
    # the element's power + the rate of its elastic energy <= 0 at random states
    element = model.contacts.with_mass(model.mass)

    @jax.jit
    @jax.vmap
    def balance(key):
        ks = jax.random.split(key, 4)
        r = jnp.array([0.0, 0.0, 0.05]) + 2e-3 * jax.random.normal(ks[0], (1, 3))
        A = mbd.so3_exp(jax.random.normal(ks[1], (1, 3)))
        rdot = jax.random.normal(ks[2], (1, 3))
        omega = 10 * jax.random.normal(ks[3], (1, 3))
        state = mbd.BodyState(r, A, rdot, omega)
        f, n_bar = element(0.0, state)
        power = jnp.sum(f * rdot) + jnp.sum(n_bar * omega)
        _, rate = jax.jvp(
            lambda r_, A_: element.potential_energy(state._replace(r=r_, A=A_)),
            (r, A), (rdot, A @ mbd.hat(omega)),
        )  # fmt: skip
        return power + rate, power

    total, power = balance(jax.random.split(jax.random.PRNGKey(0), 64))
    assert np.sum(np.asarray(power) < 0) > 10  # penetrating, dissipating states were drawn
    assert np.all(np.asarray(total) <= ROUND_OFF * (1 + np.abs(np.asarray(power))))
    # backward Euler: energy of a bouncing, sliding pair of bodies never grows by a step
    b = mbd.ModelBuilder("pair", gravity=(0, 0, -G))
    b.add_body("ball", mass=1.0, inertia=[4e-4] * 3, r=(0, 0, 0.3), rdot=(1.0, 0, 0),
               shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
    b.add_body("box", mass=1.0, inertia=[1 / 600] * 3, r=(0.4, 0, 0.3), rdot=(-1.0, 0, 0),
               omega=(1, 2, 0), shapes=[mbd.geometry.box((0.1, 0.1, 0.1))])  # fmt: skip
    b.add_ground_plane()
    b.add_contacts(friction=0.4, restitution=0.5, stiffness=1e6)
    pair = b.build()
    assert set(pair.contacts.pair_names) == {"ball/box", "ball/ground", "box/ground"}
    run = mbd.simulate(pair, formulation=sol.formulation, integrator="backward_euler",
                       t_end=0.6, h=1e-3)  # fmt: skip
    e_pair = np.asarray(mbd.diagnostics.energy(pair, run).total)
    assert np.max(np.diff(e_pair)) <= 0.0  # it falls by 9.6e-6 J a step at least
    assert np.any(np.asarray(run.contact.active)[:, pair.contacts.slot_pair.index(0)])


def test_contact_none_ignores_every_pair():
    model = _ball(r=(0, 0, 0.2))
    sol = mbd.simulate(model, formulation="rA", t_end=0.3, h=1e-2, contact="none")
    assert sol.contact is None
    np.testing.assert_allclose(sol.r[-1, 0, 2], 0.2 - 0.5 * G * 0.3**2, rtol=ROUND_OFF)


# ----------------------------------------------------------------------------- gradients


def _gradient_model():
    """One program for every gradient check: the sliding block (v0 = 2 m/s, mu = 0.4), a
    ball dropped 0.45 m onto the plane (soft contact, e = 0.5) and a ball that starts
    exactly touching the plane at rest (gap 0, zero approach speed and slip)."""
    b = mbd.ModelBuilder("three", gravity=(0, 0, -G))
    a = 0.1
    b.add_body("box", mass=1.0, inertia=[a * a / 6] * 3, r=(0, 0, a / 2), rdot=(2.0, 0, 0),
               shapes=[mbd.geometry.box((a, a, a))])  # fmt: skip
    b.add_contact("box", "ground", friction=0.4)
    for name, y, z in (("drop", 1.0, 0.55), ("rest", 2.0, 0.1)):
        b.add_body(name, mass=1.0, inertia=[4e-3] * 3, r=(0, y, z),
                   shapes=[mbd.geometry.sphere(0.1)])  # fmt: skip
        b.add_contact(name, "ground", friction=0.3, restitution=0.5, stiffness=1e5)
    b.add_ground_plane()
    model = b.build()
    K = float(model.contacts.stiffness[0])
    return eqx.tree_at(lambda m: m.r0, model, model.r0.at[0, 2].add(-((G / 4 / K) ** (2 / 3))))


def _gradient_outputs(model):
    """(stopping distance of the block, rebound apex of the dropped ball from its ballistic
    state at t = 0.6 s (smooth in every parameter), final height of the resting ball)."""
    sol = mbd.simulate(model, formulation="rA", t_end=0.6, h=H)
    z, vz = sol.r[-1, 1, 2], sol.rdot[-1, 1, 2]
    apex = z - 0.1 + vz**2 / (2 * G)
    return sol.r[-1, 0, 0] - sol.r[0, 0, 0], apex, sol.r[-1, 2, 2], sol.contact.gap[-1]


def test_gradients_friction_restitution_and_touchdown():
    """d(stopping distance)/d mu against the central difference of the simulated distance
    (to 2e-9; met to 3.6e-10) and against -v0^2 / (2 mu^2 g) (to 1.5e-3; met to 5.1e-4);
    d(rebound apex)/d(restitution) against central differences (1e-8; met to 1.5e-9);
    every derivative finite for the ball that starts exactly touching the plane."""
    mu, v0 = 0.4, 2.0
    model = _gradient_model()
    outputs = mbd.jit(_gradient_outputs)  # one program for the run and the differences
    distance, apex, _, gap = outputs(model)
    assert float(distance) == pytest.approx(v0**2 / (2 * mu * G), rel=2e-5)  # met to 6.5e-6
    assert float(gap[model.contacts.slot_pair.index(1)]) > 0  # the dropped ball flies
    assert 0.7 * 0.45 * 0.25 < float(apex) < 1.1 * 0.45 * 0.25

    # one compiled program (mbd.jit), not the backward pass op by op
    grad = mbd.jit(jax.grad(lambda m: sum(_gradient_outputs(m)[:3])))(model)
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(grad))
    d_mu = float(grad.contacts.friction[0])
    assert d_mu == pytest.approx(-(v0**2) / (2 * mu**2 * G), rel=1.5e-3)

    def distance_at(friction):
        m = eqx.tree_at(lambda m: m.contacts.friction, model,
                        model.contacts.friction.at[0].set(friction))  # fmt: skip
        return float(outputs(m)[0])

    # step 1e-6: truncation 1.2e-7 at 1e-5, round-off 4.4e-9 at 1e-7 (relative)
    step = 1e-6
    central = (distance_at(mu + step) - distance_at(mu - step)) / (2 * step)
    assert d_mu == pytest.approx(central, rel=2e-9)

    def apex_at(e):
        restitution = model.contacts.restitution.at[1].set(e)
        m = eqx.tree_at(lambda m: m.contacts.restitution, model, restitution)
        return float(outputs(m)[1])

    step = 1e-5  # 1.3e-8 at 1e-4
    central = (apex_at(0.5 + step) - apex_at(0.5 - step)) / (2 * step)
    assert float(grad.contacts.restitution[1]) == pytest.approx(central, rel=1e-8)
    assert central == pytest.approx(2 * 0.5 * 0.45, rel=5e-2)  # ~ d(e^2 h)/de; 1.8e-2


# ----------------------------------------------------------------------------- vmap


def test_vmap_over_friction_equals_single_runs():
    model = _block(v0=2.0)
    mus = jnp.array([0.3, 0.5, 0.8])

    def final(mu):
        m = eqx.tree_at(lambda m: m.contacts.friction, model, jnp.reshape(mu, (1,)))
        sol = mbd.simulate(m, formulation="rA", t_end=T_BLOCK, h=H)
        return sol.r[-1, 0], sol.contact.normal_force[-1]

    batched = jax.vmap(final)(mus)
    for k, mu in enumerate(mus):
        single = final(mu)
        np.testing.assert_allclose(batched[0][k], single[0], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(batched[1][k], single[1], rtol=0, atol=ROUND_OFF * G)
    stops = np.asarray(batched[0][:, 0])
    np.testing.assert_allclose(stops, 4.0 / (2 * np.asarray(mus) * G), rtol=1e-4)  # 3.9e-5


# ----------------------------------------------------------------------------- guide page


def _guide_examples():
    from pathlib import Path

    from test_docs import EXAMPLE

    page = Path(__file__).resolve().parents[1] / "docs/guide/contact.md"
    return EXAMPLE.findall(page.read_text())


@pytest.mark.parametrize(
    "part",
    # the second block compiles a gradient: -m slow
    [0, pytest.param(1, marks=pytest.mark.slow)],
)
def test_guide_page_example(part):
    """The contact guide's example (the sliding block, then its friction gradient) meets
    the closed forms it prints, and the page shows what it prints."""
    from test_docs import assert_expected_values, assert_prints, run_example

    examples = _guide_examples()
    code = "\n".join(c for c, _ in examples[: part + 1])
    printed, _ = run_example(code)
    shown = "\n".join(s.strip() for _, s in examples[: part + 1])
    assert_expected_values(
        printed, rtol=1e-4 if part == 0 else 2e-3
    )  # printed to 4-5 digits; d/d mu 5.5e-4 from its closed form
    assert_prints(printed, shown, rtol=1e-4)


# ----------------------------------------------------------------------------- formulations


@pytest.mark.parametrize(
    "formulation, integrator, h",
    [
        ("rA", "gen_alpha", H),
        ("joint", "gen_alpha", H),  # the program of the rolling and resting balls
        pytest.param("rp", "gen_alpha", H, marks=pytest.mark.slow),
        pytest.param("rA", "backward_euler", 1e-4, marks=pytest.mark.slow),
        ("se3", "rkmk", 1e-4),
        pytest.param("rp", "backward_euler", 1e-4, marks=pytest.mark.slow),
        pytest.param("re", "gen_alpha", H, marks=pytest.mark.slow),
        pytest.param("director", "energy_momentum", 1e-4, marks=pytest.mark.slow),
        pytest.param("rotmat", "rk", 1e-4, marks=pytest.mark.slow),
    ],
)
def test_every_formulation_rolls_to_the_same_closed_form(formulation, integrator, h):
    """A spinning ball dropped onto the plane while sliding: after the bounce it rolls with
    v = 5/7 v0 (the spin about the vertical does not couple), whichever formulation and
    integrator step it."""
    R, v0 = 0.1, 1.0
    model = _ball(radius=R, r=(0, 0, R + 0.05), rdot=(v0, 0, 0), omega=(0, 0, 3.0),
                  restitution=0.5, stiffness=1e6)  # fmt: skip
    if formulation == "re":  # away from the ZXZ chart singularity at A = I, same motion
        A = jnp.asarray(_rot((1, 0, 0), 1.0))
        model = eqx.tree_at(lambda m: (m.A0, m.omega0), model,
                            (A[None], (A.T @ jnp.array([0.0, 0.0, 3.0]))[None]))  # fmt: skip
    sol = mbd.simulate(model, formulation=formulation, integrator=integrator, t_end=T_BALL, h=h)
    v = np.asarray(sol.rdot[-1, 0])
    assert np.hypot(v[0], v[1]) == pytest.approx(5 / 7 * v0, rel=1e-2)
    assert abs(float(sol.r[-1, 0, 2]) - R) < 1e-3


@pytest.mark.slow  # two compiles of a contact model (about 50 s on 2 busy cores)
def test_structured_solver_with_contact_equals_dense():
    """The structured (block) linear solve couples the bodies a contact element joins as
    it does any force element: a three-link chain hanging from a spherical joint, dropped
    onto the floor, runs through the same steps with either solver."""
    b = mbd.ModelBuilder("chain", gravity=(0, 0, -9.81))
    for k in range(3):
        b.add_body(f"l{k}", mass=1.0, inertia=[1e-2, 1e-2, 1e-3], r=(0.2 * k + 0.1, 0, 0.05),
                   shapes=[mbd.geometry.capsule(0.03, 0.2, axis=(1, 0, 0))])  # fmt: skip
    b.spherical("j0", body_i="ground", body_j="l0", point=(0, 0, 0.05))
    for k in range(2):
        b.revolute(f"h{k}", body_i=f"l{k}", body_j=f"l{k + 1}", point=(0.2 * k + 0.2, 0, 0.05),
                   axis=(0, 1, 0))  # fmt: skip
    b.add_ground_plane()
    b.add_contacts(friction=0.5, restitution=0.3)
    model = b.build()
    dense = mbd.simulate(model, formulation="rA", t_end=0.12, h=2e-3)
    structured = mbd.simulate(
        model, formulation="rA", t_end=0.12, h=2e-3, linear_solver="structured"
    )
    assert np.asarray(dense.contact.active).any()  # the links hit the floor
    np.testing.assert_allclose(structured.r, dense.r, atol=1e-9)
    np.testing.assert_allclose(structured.lam, dense.lam, rtol=1e-6, atol=1e-6)
