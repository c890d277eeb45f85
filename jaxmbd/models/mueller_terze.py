"""The four examples of Mueller & Terze (DETC2013-12151, section 5), with the data of
``shared/notes/mueller-terze.md`` (paper data, and the assumptions where the paper is silent).

The shipped models are JSON files in ``data/`` written by :func:`write_data` from the builders
below; ``jaxmbd.models.heavy_top()`` etc. load those files (like every built-in), and a test
checks that the files equal these builders. Body numbering follows the paper; joints are
named ``joint1``, ``joint2``, ... as in its figures. All joints are spherical (three CD rows
each). Units: SI.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from ..build import ModelBuilder
from ..geometry import box, cylinder
from ..io import save_model
from ..model import GROUND, Model

#: Aluminium density used for the boxes of sections 5.1-5.4 [kg/m^3].
RHO = 2700.0


def box_inertia(mass, a, b, c):
    """Principal moments of a homogeneous box with edges a, b, c along body x, y, z about its
    centre of mass: m/12 (b^2 + c^2, a^2 + c^2, a^2 + b^2)."""
    return mass / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])


def _link_shapes():
    """The links' visual shape: the 0.2 x 0.1 x 0.05 m box, centred at the centre of mass."""
    return [box((0.2, 0.1, 0.05))]


def _rot_y(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def build_heavy_top() -> Model:
    """Section 5.1 (Figs. 1-3): an aluminium box 0.1 x 0.2 x 0.4 m (body x, y, z),
    m = 21.6 kg, J = diag(0.36, 0.306, 0.09) kg m^2, on a spherical joint to the ground at the
    origin; centre of mass at r0 = (0.5, 0, 0) m from the pivot in body axes (the pivot lies
    outside the box: a massless link is assumed), A(0) = I.

    Initial body angular velocity (0, 20 pi, 10 pi) rad/s. [assumed] v0 = omega0 x r0 =
    (0, 5 pi, -10 pi) m/s (not printed; it gives the printed T0 = 13.97 kJ).
    No gravity (M = F = 0, despite the section title): a torque-free body on a fixed point.
    """
    a, b, c = 0.1, 0.2, 0.4
    m = RHO * a * b * c
    r0 = np.array([0.5, 0.0, 0.0])
    omega = np.array([0.0, 20.0 * np.pi, 10.0 * np.pi])
    builder = ModelBuilder(name="heavy_top", gravity=(0.0, 0.0, 0.0))
    builder.add_body(
        "top",
        mass=m,
        inertia=box_inertia(m, a, b, c),
        r=r0,
        A=np.eye(3),
        rdot=np.cross(omega, r0),
        omega=omega,
        # the box and the massless link from the pivot (body point -r0) to the box's face
        shapes=[
            box((a, b, c)),
            cylinder(0.01, 0.5 - a / 2, pos=(-(0.5 + a / 2) / 2, 0.0, 0.0), axis=(1, 0, 0)),
        ],
    )
    builder.spherical("joint1", body_i=GROUND, body_j="top", point=(0.0, 0.0, 0.0))
    return builder.build()


def _link_mass_inertia():
    """The links of sections 5.2-5.4: boxes a, b, c = 0.2, 0.1, 0.05 m. [assumed] aluminium:
    m = 2.7 kg, J = diag(0.0028125, 0.0095625, 0.01125) kg m^2."""
    a, b, c = 0.2, 0.1, 0.05
    m = RHO * a * b * c
    return m, box_inertia(m, a, b, c)


def build_spherical_double_pendulum() -> Model:
    """Section 5.2 (Figs. 4-7): two identical links along x, C1(0) = (I, (0.1, 0, 0)),
    C2(0) = (I, (0.3, 0, 0)); joint1 = spherical joint to the ground at the origin, joint2 =
    spherical joint between the links at (0.2, 0, 0). Body angular velocities
    omega1 = (10, 0, 0) and omega2 = (10 pi, 10 pi, 20 pi) rad/s. [assumed] m, J as in
    :func:`_link_mass_inertia`, g = 9.81 m/s^2 along -z, v1 = omega1 x (0.1, 0, 0) = 0 and
    v2 = omega2 x (0.1, 0, 0) = (0, 2 pi, -pi) m/s (joint2 starts at rest)."""
    m, J = _link_mass_inertia()
    w1 = np.array([10.0, 0.0, 0.0])
    w2 = np.array([10.0 * np.pi, 10.0 * np.pi, 20.0 * np.pi])
    half = np.array([0.1, 0.0, 0.0])
    builder = ModelBuilder(name="spherical_double_pendulum", gravity=(0.0, 0.0, -9.81))
    builder.add_body(
        "link1", mass=m, inertia=J, r=half, rdot=np.cross(w1, half), omega=w1, shapes=_link_shapes()
    )
    builder.add_body(
        "link2",
        mass=m,
        inertia=J,
        r=3 * half,
        rdot=np.cross(w2, half),
        omega=w2,
        shapes=_link_shapes(),
    )
    builder.spherical("joint1", body_i=GROUND, body_j="link1", point=(0.0, 0.0, 0.0))
    builder.spherical("joint2", body_i="link1", body_j="link2", point=(0.2, 0.0, 0.0))
    return builder.build()


def build_floating_pair() -> Model:
    """Section 5.3 (Figs. 8-10): the links of section 5.2 in the same initial configuration,
    joined by joint2 only (no ground joint), no gravity. Body angular velocities
    omega1 = (0, 0, -10) and omega2 = (1, -1, 2 pi) rad/s. [assumed] v1 = 0 and
    v2 = omega1 x r10 - omega2 x r20 = (0, -1 + 0.2 pi, 0.1) m/s (r10 = (0.1, 0, 0),
    r20 = (-0.1, 0, 0): the joint velocities agree)."""
    m, J = _link_mass_inertia()
    w1 = np.array([0.0, 0.0, -10.0])
    w2 = np.array([1.0, -1.0, 2.0 * np.pi])
    r10, r20 = np.array([0.1, 0.0, 0.0]), np.array([-0.1, 0.0, 0.0])
    builder = ModelBuilder(name="floating_pair", gravity=(0.0, 0.0, 0.0))
    builder.add_body("link1", mass=m, inertia=J, r=(0.1, 0.0, 0.0), omega=w1, shapes=_link_shapes())
    builder.add_body(
        "link2",
        mass=m,
        inertia=J,
        r=(0.3, 0.0, 0.0),
        rdot=np.cross(w1, r10) - np.cross(w2, r20),
        omega=w2,
        shapes=_link_shapes(),
    )
    builder.spherical("joint2", body_i="link1", body_j="link2", point=(0.2, 0.0, 0.0))
    return builder.build()


def build_spherical_three_bar() -> Model:
    """Section 5.4 (Figs. 11-15), geometry [assumed] (the paper gives no data): two links of
    section 5.2 and the ground form an equilateral triangle in the x-z plane. joint1 at
    A = (0, 0, 0) (ground-link1), joint3 at B = (0.2, 0, 0) (link2-ground), joint2 at
    C = (0.1, 0, -0.2 sin 60 deg) (link1-link2). A1 = R_y(+60 deg) with A at body point
    (-0.1, 0, 0), A2 = R_y(-60 deg) with C at (-0.1, 0, 0). Spatial angular velocities
    omega_i = Omega x + s_i e_i (e_i along link i, Omega = 5, s1 = 10, s2 = -20 rad/s; any
    values are consistent: mobility 3), centre-of-mass velocities omega_i x (G_i - pivot_i)
    (pivots A and B), gravity 9.81 m/s^2 along -z."""
    m, J = _link_mass_inertia()
    A1, A2 = _rot_y(np.pi / 3), _rot_y(-np.pi / 3)
    e1, e2 = A1[:, 0], A2[:, 0]
    pa, pb = np.zeros(3), np.array([0.2, 0.0, 0.0])
    pc = pa + 0.2 * e1
    g1, g2 = pa + 0.1 * e1, pb - 0.1 * e2
    x = np.array([1.0, 0.0, 0.0])
    w1, w2 = 5.0 * x + 10.0 * e1, 5.0 * x - 20.0 * e2
    builder = ModelBuilder(name="spherical_three_bar", gravity=(0.0, 0.0, -9.81))
    builder.add_body(
        "link1",
        mass=m,
        inertia=J,
        r=g1,
        A=A1,
        rdot=np.cross(w1, g1 - pa),
        omega=A1.T @ w1,
        shapes=_link_shapes(),
    )
    builder.add_body(
        "link2",
        mass=m,
        inertia=J,
        r=g2,
        A=A2,
        rdot=np.cross(w2, g2 - pb),
        omega=A2.T @ w2,
        shapes=_link_shapes(),
    )
    builder.spherical("joint1", body_i=GROUND, body_j="link1", point=pa)
    builder.spherical("joint2", body_i="link1", body_j="link2", point=pc)
    builder.spherical("joint3", body_i="link2", body_j=GROUND, point=pb)
    return builder.build()


BUILDERS = {
    "heavy_top": build_heavy_top,
    "spherical_double_pendulum": build_spherical_double_pendulum,
    "floating_pair": build_floating_pair,
    "spherical_three_bar": build_spherical_three_bar,
}


def write_data(directory=None) -> None:
    """(Re)write the shipped JSON files of the four examples."""
    directory = directory or resources.files(__package__) / "data"
    for name, build in BUILDERS.items():
        save_model(build(), directory / f"{name}.json")


if __name__ == "__main__":  # python -m jaxmbd.models.mueller_terze
    write_data()
