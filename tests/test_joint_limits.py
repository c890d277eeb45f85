"""Compliant joint limits (jaxmbd.forces.joint_limits): the penetration bound, energy lost only at
the limit, the slide limit, the builder's checks and MJCF ranges."""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces.joint_limits import DAMPING_RAMP, LIMIT_TIME_CONSTANT, JointLimits

L, M, G = 1.0, 1.0, 9.81
LOWER, UPPER = -0.3, 1.2


def limited_pendulum():
    """A rod of length L hinged at one end about y, released horizontal: it swings down
    (positive angle) into the upper limit 1.2 rad."""
    b = mbd.ModelBuilder("limited_pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=M, inertia=[1e-4, M * L * L / 12, M * L * L / 12], r=(L / 2, 0, 0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(LOWER, UPPER))  # fmt: skip
    return b.build()


MODEL = limited_pendulum()
SOL = mbd.simulate(MODEL, formulation="rA", t_end=1.5, h=2e-3, rho_inf=1.0)


def test_default_gains_from_the_effective_inertia():
    """k = I / tau^2, c = 2 I / tau with I = m L^2 / 3 about the hinge (the rod's own
    inertia about its centre plus m (L/2)^2)."""
    (limits,) = [f for f in MODEL.forces if isinstance(f, JointLimits)]
    inertia = M * L * L / 12 + M * (L / 2) ** 2
    tau = LIMIT_TIME_CONSTANT
    np.testing.assert_allclose(np.asarray(limits.stiffness), [inertia / tau**2], rtol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(limits.damping), [2 * inertia / tau], rtol=ROUND_OFF)
    assert limits.names == ("hinge",)


def test_pendulum_stays_within_the_documented_bound():
    """The penetration past 1.2 rad stays below v sqrt(I/k) + 2 Q_max / k (v: the rate at
    the limit, Q_max = m g L / 2 the largest gravity torque) and is positive (it does reach
    the limit)."""
    q = np.asarray(SOL.joints["hinge"].q)
    qdot = np.asarray(SOL.joints["hinge"].qdot)
    (limits,) = [f for f in MODEL.forces if isinstance(f, JointLimits)]
    k = float(limits.stiffness[0])
    inertia = M * L * L / 3
    first = int(np.argmax(q > UPPER))
    assert first > 0, "the limit was not reached"
    v = abs(qdot[first - 1])
    bound = v * np.sqrt(inertia / k) + 2 * M * G * L / 2 / k
    penetration = q.max() - UPPER
    assert 0 < penetration <= bound, (penetration, bound)
    assert q.min() > LOWER - 1e-12


def test_energy_is_lost_only_at_the_limit():
    """Total energy (the limit spring's 1/2 k delta^2 counted by diagnostics.energy) never
    grows, stays constant away from the limit (rho_inf = 1), and drops at each impact."""
    energy = np.asarray(mbd.diagnostics.energy(MODEL, SOL).total)
    q = np.asarray(SOL.joints["hinge"].q)
    inside = (q <= UPPER) & (q >= LOWER)
    free = inside[1:] & inside[:-1]
    step = np.diff(energy)
    scale = M * G * L / 2  # the energy released by the swing: about 4.6 J
    # no growth beyond gen_alpha's own error at h = 2e-3 (~1e-6 J per step, at the stiff
    # limit spring as in free swing)
    assert step.max() < 1e-6 * scale, step.max()
    assert np.abs(step[free]).max() < 1e-6 * scale
    assert energy[-1] < energy[0] - 0.5  # the impacts dissipated (critically damped)


def _slide_reference(t, *, mass, lower, upper, stiffness, damping, x0, v0):
    """x(t), x_dot(t) of m x'' = F(x, x') with the limit law written out here (the module
    docstring's F: spring k delta, damper c delta_dot ramped in over DAMPING_RAMP, never
    pulling), integrated by scipy (DOP853, rtol = atol = 1e-12; Radau agrees to 4e-11 m)."""
    from scipy.integrate import solve_ivp

    def push(delta, delta_dot):
        if delta <= 0:
            return 0.0
        ramp = min(1.0, delta / DAMPING_RAMP)
        return max(0.0, stiffness * delta + damping * ramp * delta_dot)

    def rhs(_, y):
        x, v = y
        return [v, (push(lower - x, -v) - push(x - upper, v)) / mass]

    sol = solve_ivp(rhs, (0.0, t[-1]), [x0, v0], method="DOP853", rtol=1e-12, atol=1e-12,
                    dense_output=True)  # fmt: skip
    return sol.sol(t)


def test_slide_limit():
    """A block sliding at 1 m/s along x without gravity into the slide limit 0.2 m: it stops
    within v sqrt(m / k) of the limit and does not rebound past its impact speed; its
    trajectory is the one of the limit law integrated by scipy (RK4 at h = 1e-4 meets it to
    2.5e-7 m and 1.2e-5 m/s; gen_alpha at the same h to 6e-6 m, 2.6e-4 m/s)."""
    b = mbd.ModelBuilder("slide", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=2.0, inertia=[0.1, 0.1, 0.1], rdot=(1.0, 0.0, 0.0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0),
                    limits=(-0.5, 0.2))  # fmt: skip
    model = b.build()
    sol = mbd.simulate(model, formulation="rp", integrator="rk", t_end=0.4, h=1e-4)
    x = np.asarray(sol.joints["rail"].q)
    xdot = np.asarray(sol.joints["rail"].qdot)
    (limits,) = [f for f in model.forces if isinstance(f, JointLimits)]
    k, c = float(limits.stiffness[0]), float(limits.damping[0])
    assert (k, c) == pytest.approx(
        (2.0 / LIMIT_TIME_CONSTANT**2, 4.0 / LIMIT_TIME_CONSTANT), rel=ROUND_OFF
    )
    assert 0 < x.max() - 0.2 <= 1.0 * np.sqrt(2.0 / k)
    assert xdot[-1] <= 0 and abs(xdot[-1]) < 1.0  # stopped or moving back slower
    np.testing.assert_allclose(np.asarray(sol.r)[:, 0, 1:], 0.0, rtol=0, atol=ROUND_OFF)
    x_ref, xdot_ref = _slide_reference(np.asarray(sol.t), mass=2.0, lower=-0.5, upper=0.2,
                                       stiffness=k, damping=c, x0=0.0, v0=1.0)  # fmt: skip
    np.testing.assert_allclose(x, x_ref, rtol=0, atol=7.5e-7)
    np.testing.assert_allclose(xdot, xdot_ref, rtol=0, atol=3.6e-5)


def test_limit_arguments_are_checked():
    b = mbd.ModelBuilder("bad")
    b.add_body("rod", mass=1.0, inertia=[1, 1, 1])
    with pytest.raises(mbd.ModelError, match="lower < upper"):
        b.revolute("a", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 0, 1),
                   limits=(1.0, -1.0))  # fmt: skip
    with pytest.raises(mbd.ModelError, match="narrower than a full turn"):
        b.revolute("b", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 0, 1),
                   limits=(-4.0, 4.0))  # fmt: skip
    with pytest.raises(mbd.ModelError, match="need limits="):
        b.revolute("c", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 0, 1),
                   limit_stiffness=10.0)  # fmt: skip
    with pytest.raises(mbd.ModelError, match="limit_damping: must be positive"):
        b.translational("d", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 0, 1),
                        limits=(0, 1), limit_damping=-1.0)  # fmt: skip


def test_mjcf_range_becomes_a_limit(tmp_path):
    """A limited hinge's ``range`` (degrees in the file, radians compiled) is the limit in
    qpos units, including a ``ref`` offset; the unsupported-features warning no longer
    names it."""
    pytest.importorskip("mujoco")
    xml = """<mujoco><compiler angle="degree"/><worldbody>
      <body name="link" pos="0 0 1"><joint name="hinge" type="hinge" axis="0 1 0"
        limited="true" range="-30 45" ref="10"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02"/></body>
      <body name="cart" pos="0 1 1"><joint name="slide" type="slide" axis="1 0 0"
        limited="true" range="-0.1 0.3"/><geom type="box" size="0.1 0.1 0.1"/></body>
    </worldbody></mujoco>"""
    path = tmp_path / "limited.xml"
    path.write_text(xml)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mbd.load_model(path)
    assert not any("joint limits" in str(w.message) for w in caught)
    (limits,) = [f for f in model.forces if isinstance(f, JointLimits)]
    assert limits.names == ("hinge", "slide")
    np.testing.assert_allclose(np.asarray(limits.lower), [np.radians(-30), -0.1], rtol=ROUND_OFF)
    np.testing.assert_allclose(np.asarray(limits.upper), [np.radians(45), 0.3], rtol=ROUND_OFF)


def _rod_on_a_stop(restitution):
    """The rod of :func:`limited_pendulum` released horizontal onto a stop at the hanging
    position (upper limit pi/2) with ``limit_restitution``; an accelerometer at its tip and
    the hinge's reaction sensors."""
    b = mbd.ModelBuilder("rod_on_a_stop", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=M, inertia=[1e-4, M * L * L / 12, M * L * L / 12], r=(L / 2, 0, 0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(-1.0, np.pi / 2), limit_restitution=restitution)  # fmt: skip
    b.add_sensor("tip", kind="accelerometer", body="rod", site=(L / 2, 0.0, 0.0))
    b.add_sensor("force", kind="joint_reaction_force", joint="hinge")
    b.add_sensor("torque", kind="joint_reaction_torque", joint="hinge")
    return b.build()


def _with_restitution(model, e):
    import equinox as eqx

    (k,) = [i for i, f in enumerate(model.forces) if isinstance(f, JointLimits)]
    return eqx.tree_at(lambda m: m.forces[k].restitution, model, np.asarray([e]))


# rA's runs in the slow suite: the default suite keeps the default formulation's
@pytest.mark.parametrize("formulation", [pytest.param("rA", marks=pytest.mark.slow), "joint"])
@pytest.mark.parametrize("limits", ["compliant", "hard"])
def test_limit_restitution_rebound_angle(limits, formulation):
    """Rebound speed e v at the stop: the rod rises e^2 of its drop height, L/2 (1 - cos phi)
    = e^2 L/2, to phi = acos(1 - e^2) from hanging (gravity has no torque at the stop), to
    2 % (measured: rA 0.4 %, joint coordinates 0.2 %); one compiled program for every e (the
    restitution is a leaf). The rise is counted from the stop, from the first row where the
    rod moves back: a hard stop in joint coordinates meets the rod at a step's midpoint, so
    the saved rows need not lie on it. The default of each formulation: "joint"."""
    model = _rod_on_a_stop(0.5)
    assert mbd.default_formulation(model) == "joint"
    for e in (0.3, 0.6, 0.9):
        m = _with_restitution(model, e)
        sol = mbd.simulate(m, formulation=formulation, limits=limits, t_end=1.2, h=1e-3)
        q = np.asarray(sol.joints["hinge"].q)
        back = int(np.argmax(np.asarray(sol.joints["hinge"].qdot) < 0))
        assert back > 0 and q[:back].max() > np.pi / 2 - 3e-3, (e, q.max())
        rise = np.pi / 2 - q[back:].min()
        assert rise == pytest.approx(np.arccos(1 - e * e), rel=0.02), (e, rise)


def test_rod_at_rest_on_a_hard_stop_reads_as_in_ra():
    """A plastic hard stop (``limit_restitution=0``): the rod comes to rest on it, where the
    joint formulation's sensors (the tip's accelerometer from the step's mean acceleration,
    the hinge's reactions by Newton-Euler) read rA's (5.9e-13 measured here, 4.1e-12 before):
    +g at rest, the hinge carrying the weight less the stop's share."""
    model = _with_restitution(_rod_on_a_stop(0.5), 0.0)
    rest = {}
    for formulation in ("rA", "joint"):
        sol = mbd.simulate(model, formulation=formulation, limits="hard", t_end=1.2, h=1e-3)
        names = ("tip", "force", "torque")
        rest[formulation] = {n: np.asarray(sol.sensors[n])[-100:] for n in names}
    for name, value in rest["rA"].items():
        np.testing.assert_allclose(rest["joint"][name], value, rtol=0, atol=5e-12)
    # round-off: 5e-17 measured, a few ulps of g (1.8e-15) allowed
    np.testing.assert_allclose(rest["joint"]["tip"][-1], [-G, 0.0, 0.0], rtol=0, atol=ROUND_OFF)


@pytest.mark.slow  # a table of impact speeds
@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_default_limit_rebound_is_documented(formulation):
    """The default critically damped limit (never pulling) rebounds as the module docstring's
    table says: 0.149 of the impact rate at 1 m/s, 0.41 at 0.1 m/s (the damper's ramp), and
    ``limit_restitution=0`` rebounds at 0.01 (the smallest restitution of the law) at both,
    in rA's default integrator and joint coordinates' (rA 0.14890, 0.41073; joint 0.14886,
    0.41072); one compiled program (the impact rate is the initial state)."""
    import equinox as eqx

    def slide(**kw):
        b = mbd.ModelBuilder("slide", gravity=(0.0, 0.0, 0.0))
        b.add_body("block", mass=2.0, inertia=[0.1, 0.1, 0.1], rdot=(1.0, 0.0, 0.0))
        b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0),
                        axis=(1, 0, 0), limits=(-0.5, 0.02), **kw)  # fmt: skip
        return b.build()

    for model, expected in ((slide(), (0.149, 0.41)), (slide(limit_restitution=0.0), (0.01,) * 2)):
        for v0, rebound in zip((1.0, 0.1), expected, strict=True):
            m = eqx.tree_at(lambda m: m.rdot0, model, model.rdot0 * v0)
            sol = mbd.simulate(m, formulation=formulation, t_end=0.4, h=1e-4)
            xdot = np.asarray(sol.joints["rail"].qdot)
            assert -xdot[-1] / v0 == pytest.approx(rebound, rel=0.03, abs=1e-3), (v0, xdot[-1])


def test_limit_restitution_round_trips(tmp_path):
    """``limit_restitution`` is written to the model file and read back."""
    model = _rod_on_a_stop(0.7)
    path = tmp_path / "rod.json"
    mbd.save_model(model, path)
    (lim,) = [f for f in mbd.load_model(path).forces if isinstance(f, JointLimits)]
    np.testing.assert_array_equal(np.asarray(lim.restitution), [0.7])
    np.testing.assert_array_equal(np.asarray(lim.damping), [0.0])
