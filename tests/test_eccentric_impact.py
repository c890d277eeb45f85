"""Compliant contact honours its restitution on eccentric impacts (issue 74 item 2): the
normal law calibrates its damping on the effective mass of the contact point along the
normal, 1 / (n^T J M^-1 J^T n), with the mechanism's joints, not on the pair's
translational reduced mass.

References: a rod pinned at one end and released horizontal strikes a wall at its tip
when it hangs; it rebounds to acos(1 - e^2) (energy before the impact, the tip's normal
speed reversed with factor e). A free rod falling without rotation lands on one end at
45 degrees; the impulse closed form (frictionless, no gravity) gives its velocity and
angular velocity after the impact. Head-on impacts (a ball on the plane) are
:mod:`test_impact_restitution`'s.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

G = 9.81
RADIUS = 0.1  # the spheres at the rods' ends
E_VALUES = (0.3, 0.5, 0.9)


def _with_restitution(model, e):
    """One compiled program for every e: the restitution is an array leaf."""
    return eqx.tree_at(lambda m: m.contacts.restitution, model, model.contacts.restitution * 0 + e)


def rod_at_a_wall(pinned: bool = True) -> mbd.Model:
    """A 1 kg, 1 m rod pinned at the origin (axis y; ``pinned``), drawn horizontal along
    -x, a sphere at its tip; the wall x = RADIUS touches the tip where the rod hangs."""
    b = mbd.ModelBuilder("pinned rod", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=1.0, inertia=[1e-6, 1 / 12, 1 / 12], r=(-0.5, 0.0, 0.0),
               shapes=[mbd.geometry.sphere(RADIUS, pos=(-0.5, 0.0, 0.0))])  # fmt: skip
    if pinned:
        b.revolute("pin", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_ground_plane(point=(RADIUS, 0.0, 0.0), normal=(-1.0, 0.0, 0.0))
    b.add_contact("rod", "ground", friction=0.0, restitution=0.5)
    return b.build()


@pytest.fixture(scope="module")
def pinned_rod():
    return rod_at_a_wall()


def _rebound(sol):
    """The largest angle from hanging (towards the start) after the impact."""
    tip = -np.asarray(sol.A)[:, 0, :, 0]  # from the pin to the tip
    angle = np.arctan2(-tip[:, 0], -tip[:, 2])
    return angle[int(np.argmin(angle)) + 1 :].max()


def test_effective_mass_of_the_struck_tip(pinned_rod):
    """The element's effective mass at the tip where the rod hangs: I_pivot / l^2 = 1/3 kg
    with the pin (constrained), 1/4 kg for the free rod (1 / (1/m + (l/2)^2 / I_c))."""
    run = mbd.contact.with_contact(pinned_rod, "compliant")
    A = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # body x up
    state = mbd.forces.BodyState(
        np.array([[0.0, 0.0, -0.5]]), A[None], np.zeros((1, 3)), np.zeros((1, 3))
    )
    point, normal = np.array([[RADIUS, 0.0, -1.0]]), np.array([[1.0, 0.0, 0.0]])
    m_eff = run.contacts.effective_mass(state, point, normal)
    np.testing.assert_allclose(m_eff, [1 / 3], rtol=1e-7)  # 1.7e-8: the regularisation
    free = mbd.contact.with_contact(rod_at_a_wall(pinned=False), "compliant").contacts
    np.testing.assert_allclose(free.effective_mass(state, point, normal), [0.25], rtol=ROUND_OFF)


@pytest.mark.parametrize("formulation", ["joint", pytest.param("rA", marks=pytest.mark.slow)])
def test_pinned_rod_rebounds_to_the_closed_form(pinned_rod, formulation):
    """e = 0.3, 0.5, 0.9 at h = 1e-3 with a fourth-order step (RK4; rkmk in rA): the
    rebound within 0.3 % of acos(1 - e^2) (measured +0.03, +0.01, +0.01 %; calibrated on
    the translational 1 kg the rod rebounds 16 % low at e = 0.5)."""
    integrator = "rk" if formulation == "joint" else "rkmk"
    for e in E_VALUES:
        sol = mbd.simulate(_with_restitution(pinned_rod, e), formulation=formulation,
                           integrator=integrator, t_end=1.2, h=1e-3)  # fmt: skip
        expected = np.arccos(1.0 - e * e)
        assert abs(_rebound(sol) / expected - 1.0) < 3e-3, (e, _rebound(sol), expected)


def landing_rod() -> mbd.Model:
    """A 1 kg, 1 m rod at 45 degrees in the x-z plane, no gravity, falling at 2 m/s
    without rotation; spheres at both ends, its lower end RADIUS + 1 mm above the plane."""
    c = np.cos(np.pi / 4)
    b = mbd.ModelBuilder("free rod", gravity=(0.0, 0.0, 0.0))
    A = np.array([[c, 0.0, -c], [0.0, 1.0, 0.0], [c, 0.0, c]])  # body x along (c, 0, c)
    b.add_body("rod", mass=1.0, inertia=[1e-6, 1 / 12, 1 / 12],
               r=(0.0, 0.0, 0.5 * c + RADIUS + 1e-3), A=A, rdot=(0.0, 0.0, -2.0),
               shapes=[mbd.geometry.sphere(RADIUS, pos=(-0.5, 0.0, 0.0)),
                       mbd.geometry.sphere(RADIUS, pos=(0.5, 0.0, 0.0))])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("rod", "ground", friction=0.0, restitution=0.5, stiffness=2.8e7)
    return b.build()


@pytest.fixture(scope="module")
def free_rod():
    return landing_rod()


def test_free_rod_landing_on_one_end_follows_the_impulse_closed_form(free_rod):
    """Post-impact velocity and angular velocity within 2 % of the closed form: impulse
    P = (1 + e) m_eff v0 with m_eff = 1 / (1/m + (l/2 cos 45)^2 / I_c) = 0.4 kg; v_z = -v0 +
    P / m, omega_y = P (l/2) cos 45 / I_c (default formulation and integrator, h = 1e-3;
    measured within 1.1 %)."""
    v0, c = 2.0, np.cos(np.pi / 4)
    m_eff = 1.0 / (1.0 + (0.5 * c) ** 2 * 12.0)
    for e in E_VALUES:
        sol = mbd.simulate(_with_restitution(free_rod, e), t_end=0.05, h=1e-3)
        gap = np.asarray(sol.contact.gap).min(-1)
        after = int(np.flatnonzero(gap < 0).max()) + 1  # the first step out of contact
        assert after < sol.t.shape[0] - 1 and np.all(gap[after:] > 0)
        impulse = (1.0 + e) * m_eff * v0
        vz = np.asarray(sol.rdot)[after, 0, 2]
        omega_y = (np.asarray(sol.A)[after, 0] @ np.asarray(sol.omega)[after, 0])[1]
        np.testing.assert_allclose(vz, -v0 + impulse, rtol=0.02, err_msg=str(e))
        np.testing.assert_allclose(omega_y, impulse * 0.5 * c * 12.0, rtol=0.02, err_msg=str(e))
