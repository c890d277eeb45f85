"""Closed loops in joint coordinates: a planar four-bar against Freudenstein's closed form,
a driven slider crank against its closed form, and a spatial loop's closure over a run."""

import dataclasses

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

# crank a, coupler b, rocker c, ground d (a Grashof crank-rocker)
A_, B_, C_, D_ = 0.2, 0.6, 0.45, 0.5


def _rod(b, name, p, q, mass=1.0):
    p, q = np.asarray(p, float), np.asarray(q, float)
    length = np.linalg.norm(q - p)
    x = (q - p) / length
    z = np.array([0.0, 0.0, 1.0])
    A = np.stack([x, np.cross(z, x), z], 1)
    inertia = [1e-4, mass * length**2 / 12, mass * length**2 / 12]
    b.add_body(name, mass=mass, inertia=inertia, r=0.5 * (p + q), A=A)


def four_bar(phi0=0.7, rate=3.0):
    """Planar four-bar in the xy plane, gravity along -y, the crank at angle phi0 turning at
    ``rate`` rad/s: every joint a revolute about z; the rocker's ground pivot closes the loop."""
    O2, O4 = np.zeros(3), np.array([D_, 0.0, 0.0])
    P = A_ * np.array([np.cos(phi0), np.sin(phi0), 0.0])
    psi0 = _freudenstein(phi0)
    Q = O4 + C_ * np.array([np.cos(psi0), np.sin(psi0), 0.0])
    b = mbd.ModelBuilder("four-bar", gravity=(0.0, -9.81, 0.0))
    _rod(b, "crank", O2, P)
    _rod(b, "coupler", P, Q)
    _rod(b, "rocker", Q, O4)
    z = (0.0, 0.0, 1.0)
    b.revolute("O2", body_i="ground", body_j="crank", point=O2, axis=z)
    b.revolute("P", body_i="crank", body_j="coupler", point=P, axis=z)
    b.revolute("Q", body_i="coupler", body_j="rocker", point=Q, axis=z)
    b.revolute("O4", body_i="rocker", body_j="ground", point=O4, axis=z)
    b.set_joint_state("O2", q=0.0, qdot=rate)
    return b.build()


def _freudenstein(phi):
    """The rocker's angle psi (from +x, open branch) for crank angle phi:
    K1 cos psi - K2 cos phi + K3 = cos(phi - psi), K1 = d/a, K2 = d/c,
    K3 = (a^2 - b^2 + c^2 + d^2) / (2 a c); solved as A cos psi + B sin psi = C."""
    k1, k2 = D_ / A_, D_ / C_
    k3 = (A_**2 - B_**2 + C_**2 + D_**2) / (2 * A_ * C_)
    # cos(phi - psi) - K1 cos psi = K3 - K2 cos phi
    a = np.cos(phi) - k1
    b = np.sin(phi)
    c = k3 - k2 * np.cos(phi)
    r = np.hypot(a, b)
    return np.arctan2(b, a) + np.arccos(np.clip(c / r, -1, 1))


def test_four_bar_follows_freudenstein():
    model = four_bar()
    sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=1.0, h=1e-3)
    rocker = np.asarray(sol.r[:, 2])  # rocker's centre: O4 + c/2 (cos psi, sin psi)
    crank = np.asarray(sol.r[:, 0])
    phi = np.arctan2(crank[:, 1], crank[:, 0])
    psi = np.arctan2(rocker[:, 1], rocker[:, 0] - D_)
    expected = _freudenstein(phi)
    assert np.abs(np.angle(np.exp(1j * (psi - expected)))).max() < ROUND_OFF
    assert np.max(np.asarray(sol.residual)) < ROUND_OFF
    assert np.ptp(phi) > 1.0  # it moved


def test_driven_slider_crank_follows_its_closed_form():
    """A planar slider crank (crank a, rod b, the slider on the x axis) whose crank a driver
    turns at 2 pi rad/s, run with the default formulation: "joint" (a tree plus a closing
    revolute and a driver row), the slider at x = a cos theta + sqrt(b^2 - a^2 sin^2
    theta) to 1e-9 over a quarter turn, the rows closed to 1e-10."""
    a, b, theta0, rate = 0.2, 0.5, 0.3, 2.0 * np.pi
    z = (0.0, 0.0, 1.0)
    pin = a * np.array([np.cos(theta0), np.sin(theta0), 0.0])
    end = np.array([a * np.cos(theta0) + np.sqrt(b**2 - (a * np.sin(theta0)) ** 2), 0.0, 0.0])
    builder = mbd.ModelBuilder("slider crank")
    _rod(builder, "crank", np.zeros(3), pin)
    _rod(builder, "rod", pin, end)
    builder.add_body("slider", mass=0.5, inertia=[1e-3] * 3, r=end)
    builder.revolute("O", body_i="ground", body_j="crank", point=(0, 0, 0), axis=z)
    builder.revolute("A", body_i="crank", body_j="rod", point=pin, axis=z)
    builder.translational("S", body_i="ground", body_j="slider", point=end, axis=(1, 0, 0))
    builder.revolute("B", body_i="rod", body_j="slider", point=end, axis=z)
    builder.rotation_driver("motor", body_i="ground", body_j="crank", axis=z,
                            angle=f"{rate!r}*t")  # fmt: skip
    model = builder.build()
    assert mbd.default_formulation(model) == "joint"
    sol = mbd.simulate(model, t_end=0.25, h=1e-3)
    assert sol.formulation == "joint"
    theta = theta0 + rate * np.asarray(sol.t)
    x = a * np.cos(theta) + np.sqrt(b**2 - (a * np.sin(theta)) ** 2)
    assert np.abs(np.asarray(sol.r[:, 2, 0]) - x).max() < ROUND_OFF
    assert np.max(np.asarray(sol.residual)) < ROUND_OFF


# two programs of their own (rA at h = 2e-4): test_sensors.py::
# test_four_bar_reaction_sensors_in_joint_coordinates_equal_ra compares joint coordinates with
# rA on a four-bar falling from rest, test_four_bar_follows_freudenstein runs rkmk on the loop
@pytest.mark.slow
def test_four_bar_agrees_with_ra():
    """From rest (a start both formulations take as it is), falling under gravity: joint
    coordinates with RK4 against rA with generalized-alpha at a step 5x smaller."""
    model = four_bar(rate=0.0)
    joint = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=0.5, h=1e-3)
    ra = mbd.simulate(model, formulation="rA", t_end=0.5, h=2e-4, rho_inf=1.0)
    assert np.abs(np.asarray(joint.r[-1]) - np.asarray(ra.r[-1])).max() < 1e-6


def _unbuilt_four_bar(name: str) -> mbd.ModelBuilder:
    """A planar four-bar's builder (revolutes O2, P, Q, O4 about z; Q or O4 closes the loop),
    to add a sensor or an actuator to."""
    b = mbd.ModelBuilder(name)
    b.add_body("crank", mass=1.0, inertia=[1e-4, 1e-2, 1e-2], r=(0.1, 0.0, 0.0))
    b.add_body("coupler", mass=1.0, inertia=[1e-4, 1e-2, 1e-2], r=(0.3, 0.2, 0.0))
    b.add_body("rocker", mass=1.0, inertia=[1e-4, 1e-2, 1e-2], r=(0.5, 0.1, 0.0))
    z = (0.0, 0.0, 1.0)
    b.revolute("O2", body_i="ground", body_j="crank", point=(0.0, 0.0, 0.0), axis=z)
    b.revolute("P", body_i="crank", body_j="coupler", point=(0.2, 0.0, 0.0), axis=z)
    b.revolute("Q", body_i="coupler", body_j="rocker", point=(0.4, 0.2, 0.0), axis=z)
    b.revolute("O4", body_i="rocker", body_j="ground", point=(0.5, 0.0, 0.0), axis=z)
    return b


def test_default_formulation_is_joint_where_joint_space_runs_everything():
    """Builder trees (contact pairs, joint limits, joints of several coordinates and sensors
    included) and trees plus loops or drivers default to "joint" unless something in the
    model has no joint-space path: then "rA", and mbd.joint_space_obstacles says why. An
    option of the call never changes it: one that the joint formulation lacks raises,
    naming the formulation that takes it. Nothing is compiled."""
    tree, loop = mbd.models.double_pendulum(), four_bar()
    driven = (mbd.models.single_pendulum(), mbd.models.slider_crank())
    for model in (tree, loop, *driven):
        assert mbd.joint_space_obstacles(model) == (), model.name
    assert mbd.default_formulation(loop, "rkmk") == "joint"
    for model in (tree, loop):
        assert mbd.default_formulation(model) == "joint"
        assert mbd.default_formulation(model, "gen_alpha", {"rho_inf": 0.5}) == "joint"
        assert mbd.default_formulation(model, "backward_euler", {"tol": None}) == "joint"
        # a pair that joint coordinates lack, an option of the absolute integrators only,
        # a request of the absolute runs (simulate's save_every, say): refused, naming them
        with pytest.raises(ValueError, match='energy_momentum.* formulation="director"'):
            mbd.default_formulation(model, "energy_momentum")
        with pytest.raises(ValueError, match='linear_solver=.dense.* formulation="rA"'):
            mbd.default_formulation(model, None, {"linear_solver": "dense"})
        with pytest.raises(ValueError, match='save_every=10 .* formulation="rA"'):
            mbd.default_formulation(model, absolute_only=("save_every=10",))
    # a tree built in code with joint limits (restitution, a cylindrical joint's limited
    # coordinate), joints of several coordinates and sensors of every family: "joint"; a
    # loop's reaction sensors add no reason to its rows'
    b = mbd.ModelBuilder("limited tree", gravity=(0.0, 0.0, -9.81))
    b.add_body("arm", mass=1.0, inertia=[1e-2, 1e-2, 1e-3], r=(0.0, 0.0, -0.5))
    b.add_body("sleeve", mass=0.5, inertia=[1e-3, 1e-3, 1e-3], r=(0.0, 0.0, -1.0))
    b.universal("u", body_i="ground", body_j="arm", point=(0, 0, 0), axis_i=(1, 0, 0),
                axis_j=(0, 1, 0))  # fmt: skip
    b.cylindrical("c", body_i="arm", body_j="sleeve", point=(0, 0, -1.0), axis=(0, 0, 1),
                  limits=((-0.1, 0.1), None), limit_restitution=(0.5, None))  # fmt: skip
    for kind, where in (("joint_position", {"joint": "u"}),
                        ("joint_reaction_force", {"joint": "c"}),
                        ("accelerometer", {"body": "sleeve"}),
                        ("interaction_torque", {"body": "arm"})):  # fmt: skip
        b.add_sensor(kind, kind=kind, **where)
    limited = b.build()
    assert mbd.joint_space_obstacles(limited) == ()
    assert mbd.default_formulation(limited) == "joint"
    b = _unbuilt_four_bar("sensed four-bar")
    b.add_sensor("Q.force", kind="joint_reaction_force", joint="Q")
    assert mbd.joint_space_obstacles(b.build()) == ()
    # contact pairs: the joint steps solve them by Newton and sub-step impacts as rA's do
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[4e-3] * 3, r=(0, 0, 0.2),
               shapes=[mbd.geometry.sphere(0.1)])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("ball", "ground", friction=0.5, restitution=0.6)
    ball = b.build()
    assert mbd.joint_space_obstacles(ball) == ()
    assert mbd.default_formulation(ball) == "joint"
    assert mbd.default_formulation(ball, None, {"rho_inf": 0.5, "impact_substeps": 4}) == "joint"
    assert mbd.default_formulation(ball, "rkmk", {"impact_speed": 0.1}) == "joint"
    with pytest.raises(ValueError, match="linear_solver='dense' is an option"):
        mbd.default_formulation(ball, None, {"linear_solver": "dense"})
    # a motor on the joint that closes the loop: no coordinate of the spanning tree (grown
    # breadth first from the ground: O2 and O4, then P; Q closes it)
    b = _unbuilt_four_bar("driven four-bar")
    b.add_actuator("motor", joint="Q", kind="motor")
    driven = b.build()
    reasons = mbd.joint_space_obstacles(driven)
    assert any("['Q']" in r and "close a loop" in r for r in reasons), reasons
    assert mbd.default_formulation(driven) == "rA"
    # the model's "rA" takes the absolute options as they are
    assert mbd.default_formulation(driven, None, {"linear_solver": "dense"}) == "rA"
    assert mbd.default_formulation(driven, absolute_only=("save_every=10",)) == "rA"
    # a model that only joint coordinates express stays "joint" (its error names the rest)
    assert (
        mbd.default_formulation(
            dataclasses.replace(tree, joint_space_only=("two hinges on one body",)),
            "energy_momentum",
        )
        == "joint"
    )


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_spatial_loop_stays_closed():
    """The spherical three-bar (a spatial loop closed by a spherical joint) in joint
    coordinates over 1 s: the loop's rows stay at round-off (1e-10), and the motion is
    the absolute formulation's."""
    model = mbd.models.spherical_three_bar()
    sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=1.0, h=1e-3)
    assert np.max(np.asarray(sol.residual)) < ROUND_OFF
    # every constraint row of the model (tree joints and loop) on the bodies' states, in rA
    v = mbd.diagnostics.constraint_violation(model, sol)
    assert float(np.max(np.asarray(v.position))) < ROUND_OFF
    assert float(np.max(np.asarray(v.velocity))) < 4e-11
    assert np.ptp(np.asarray(sol.r)) > 1e-2  # it moved
