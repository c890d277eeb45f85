"""Exact (hard) contact: ``simulate(..., contact="hard")``, the projected Moreau–Jean
scheme of jaxmbd/integrators/moreau_jean.py, against closed forms.

References: free fall and Newton's restitution law (apex heights h_n = e^(2n) h_0), a box
sliding to rest under Coulomb friction (distance v0^2 / (2 mu g)), a block held on an
incline with tan(theta) < mu (no motion at all), a solid sphere rolling down it
(s = 5/14 g sin(theta) t^2), Newton's cradle with e = 1 (the momentum passes to the last
ball), and the derivative of an apex with respect to e (2 e h_0) by central differences.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces import BodyState

G = 9.81
R_BALL, H0, E = 0.05, 0.45, 0.8


def _ball(restitution=E):
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=1.0, inertia=[0.4 * R_BALL**2] * 3, r=(0.0, 0.0, H0 + R_BALL),
               shapes=[mbd.geometry.sphere(R_BALL)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, restitution=restitution)
    return b.build()


def _gaps(model, sol):
    """The gap of every contact slot at every saved step (T, ns)."""
    element = model.contacts

    def one(r, A):
        zero = jnp.zeros_like(r)
        return element.collide(BodyState(r, A, zero, zero)).gap

    return np.asarray(jax.vmap(one)(sol.r, sol.A))


def _apexes(height, vz):
    return [height[k] for k in range(1, len(height)) if vz[k - 1] > 0 >= vz[k]]


def test_bouncing_ball_apexes_follow_e_squared():
    """Each bounce reaches e^2 of the previous apex (up to the event timing error of the
    step), and the ball never penetrates the ground."""
    model = _ball()
    sol = mbd.simulate(model, contact="hard", t_end=1.5, h=1e-3)
    assert np.all(np.asarray(sol.status) == 0)
    height = np.asarray(sol.r[:, 0, 2]) - R_BALL
    apexes = _apexes(height, np.asarray(sol.rdot[:, 0, 2]))
    assert len(apexes) >= 3
    np.testing.assert_allclose(apexes[0], E**2 * H0, rtol=2e-3)
    np.testing.assert_allclose(np.array(apexes[1:]) / np.array(apexes[:-1]), E**2, rtol=3e-3)
    assert _gaps(model, sol).min() > -1e-10


def _box(*, incline=0.0, v0=0.0, friction=0.4, half=0.1):
    """A cube of edge 2 ``half`` resting on a plane tilted by ``incline`` about y (downhill
    along +x'), sliding downhill at ``v0``."""
    c, s = np.cos(incline), np.sin(incline)
    normal = np.array([s, 0.0, c])  # the plane's normal: downhill is +x along (c, 0, -s)
    A = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])  # R_y(incline): z -> normal
    b = mbd.ModelBuilder("box", gravity=(0.0, 0.0, -G))
    b.add_body(
        "box",
        mass=2.0,
        inertia=[2.0 * (2 * half) ** 2 / 6] * 3,
        r=half * normal,
        A=A,
        rdot=v0 * np.array([c, 0.0, -s]),
        shapes=[mbd.geometry.box([2 * half] * 3)],
    )
    b.add_ground_plane(point=(0, 0, 0), normal=normal)
    b.add_contact("box", "ground", friction=friction, restitution=0.0)
    return b.build()


def test_sliding_box_stops_at_the_closed_form_without_penetrating():
    """A box sliding at v0 on four corners decelerates at mu g and stops after
    v0^2 / (2 mu g); it neither tilts nor penetrates (gaps within 1e-8 m of zero)."""
    mu, v0 = 0.4, 2.0
    model = _box(v0=v0, friction=mu)
    sol = mbd.simulate(model, contact="hard", t_end=0.8, h=1e-3)
    assert np.all(np.asarray(sol.status) == 0)
    t, x = np.asarray(sol.t), np.asarray(sol.r[:, 0, 0])
    stop = v0 / (mu * G)
    expected = np.where(t < stop, v0 * t - 0.5 * mu * G * t**2, v0**2 / (2 * mu * G))
    np.testing.assert_allclose(x[-1], v0**2 / (2 * mu * G), rtol=4e-6)  # 8.3e-7
    np.testing.assert_allclose(x, expected, rtol=0, atol=4e-6 * x[-1])
    # sol.contact: the mean forces of each step; while sliding, the four corners carry
    # m g and Coulomb's mu m g against the motion
    contact = sol.contact
    sliding = slice(1, int(0.9 * stop / 1e-3))
    normal = np.asarray(contact.normal_force).sum(axis=1)
    friction = np.asarray(contact.tangential_force).sum(axis=1)
    np.testing.assert_allclose(normal[sliding], 2.0 * G, rtol=ROUND_OFF)
    np.testing.assert_allclose(friction[sliding, 0], -mu * 2.0 * G, rtol=ROUND_OFF)
    assert np.all(np.asarray(contact.active)[sliding].sum(axis=1) >= 3)
    corners = _gaps(model, sol)[:, :8]
    lowest = np.sort(corners, axis=1)[:, :4]  # the four corners on the ground
    assert np.abs(lowest).max() < ROUND_OFF, np.abs(lowest).max()
    np.testing.assert_allclose(np.asarray(sol.A[:, 0]), np.broadcast_to(np.eye(3), (len(t), 3, 3)),
                               rtol=0, atol=ROUND_OFF)  # fmt: skip


def test_block_sticks_on_the_incline():
    """tan(theta) = 0.3 < mu = 0.4: the block stays exactly where it is (Coulomb's cone,
    not a regularised law that creeps)."""
    theta = np.arctan(0.3)
    model = _box(incline=theta, friction=0.4)
    sol = mbd.simulate(model, contact="hard", t_end=1.0, h=2e-3)
    assert np.all(np.asarray(sol.status) == 0)
    drift = np.linalg.norm(np.asarray(sol.r[:, 0]) - np.asarray(sol.r[0, 0]), axis=-1)
    assert drift.max() < ROUND_OFF, drift.max()


def test_sphere_rolls_down_the_incline():
    """A solid sphere on the incline (mu = 0.4 > 2/7 tan(theta)) rolls without slipping:
    s(t) = (5/14) g sin(theta) t^2, and its contact point does not slip."""
    theta, R = np.arctan(0.3), 0.1
    c, s = np.cos(theta), np.sin(theta)
    normal = np.array([s, 0.0, c])
    b = mbd.ModelBuilder("sphere", gravity=(0.0, 0.0, -G))
    b.add_body("sphere", mass=1.0, inertia=[0.4 * R**2] * 3, r=R * normal,
               shapes=[mbd.geometry.sphere(R)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=normal)
    b.add_contact("sphere", "ground", friction=0.4, restitution=0.0)
    model = b.build()
    sol = mbd.simulate(model, contact="hard", t_end=0.5, h=1e-3)
    assert np.all(np.asarray(sol.status) == 0)
    downhill = np.array([c, 0.0, -s])
    travelled = (np.asarray(sol.r[:, 0]) - R * normal) @ downhill
    t = np.asarray(sol.t)
    expected = 5.0 / 14.0 * G * s * t**2
    np.testing.assert_allclose(travelled[-1], expected[-1], rtol=ROUND_OFF)
    np.testing.assert_allclose(travelled, expected, rtol=0, atol=ROUND_OFF)
    # rolling: the contact point's velocity r_dot + omega x (-R n) vanishes
    w = np.einsum("tij,tj->ti", np.asarray(sol.A[:, 0]), np.asarray(sol.omega[:, 0]))
    slip = np.asarray(sol.rdot[:, 0]) + np.cross(w, -R * normal)
    assert np.abs(slip).max() < ROUND_OFF, np.abs(slip).max()


def test_newtons_cradle_passes_the_momentum_to_the_last_ball():
    """Three equal balls in a row, 0.1 mm apart, e = 1: the first arrives at v0, and after
    the two impacts the last leaves at v0 while the others are at rest."""
    v0, R, gap = 1.0, 0.05, 1e-4
    b = mbd.ModelBuilder("cradle", gravity=(0.0, 0.0, 0.0))
    for k in range(3):
        b.add_body(f"ball{k}", mass=1.0, inertia=[0.4 * R**2] * 3,
                   r=(k * (2 * R + gap), 0.0, 0.0), rdot=(v0 if k == 0 else 0.0, 0.0, 0.0),
                   shapes=[mbd.geometry.sphere(R)])  # fmt: skip
    b.add_contact("ball0", "ball1", friction=0.0, restitution=1.0)
    b.add_contact("ball1", "ball2", friction=0.0, restitution=1.0)
    sol = mbd.simulate(b.build(), contact="hard", t_end=0.01, h=1e-4)
    assert np.all(np.asarray(sol.status) == 0)
    v = np.asarray(sol.rdot[-1, :, 0])
    np.testing.assert_allclose(v, [0.0, 0.0, v0], rtol=0, atol=ROUND_OFF)
    momentum = np.asarray(sol.rdot[:, :, 0]).sum(axis=1)
    np.testing.assert_allclose(momentum, v0, rtol=0, atol=ROUND_OFF)


# the joint formulation's impact gradient is -m slow (its program compiles for ~20 s)
@pytest.mark.parametrize("formulation", ["rA", pytest.param("joint", marks=pytest.mark.slow)])
def test_gradient_through_one_impact(formulation):
    """100 steps of a ball dropped 2 cm while sliding at 0.5 m/s (mu = 0.1: it slides
    through the impact): reverse-mode derivatives of its apex and its horizontal speed after
    the bounce with respect to (e, mu), one compiled program for values and Jacobian. They
    equal the central differences of the run (to 1e-10; met to 5e-14) and the impact's
    closed forms up to the step's event timing: d apex/de = 2 e h_0 (met to 4.5e-3),
    d v_x/de = -mu v_i (2.3e-3) and d v_x/d mu = -(1 + e) v_i (1.1e-2: the impact step's
    normal impulse also carries g h), v_i = sqrt(2 g h_0)."""
    h0, mu, vx = 0.02, 0.1, 0.5
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=1.0, inertia=[0.4 * R_BALL**2] * 3, r=(0.0, 0.0, h0 + R_BALL),
               rdot=(vx, 0.0, 0.0), shapes=[mbd.geometry.sphere(R_BALL)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=mu, restitution=E)
    model = b.build()

    def outputs(p, model):
        m = eqx.tree_at(lambda m: (m.contacts.restitution, m.contacts.friction), model,
                        (p[:1], p[1:]))  # fmt: skip
        sol = mbd.simulate(m, formulation=formulation, contact="hard", t_end=0.1, h=1e-3)
        z, vz = sol.r[-1, 0, 2], sol.rdot[-1, 0, 2]
        out = jnp.stack([z - R_BALL + vz**2 / (2 * G), sol.rdot[-1, 0, 0]])
        return out, out

    jacobian = mbd.jit(jax.jacrev(outputs, has_aux=True))
    p0 = jnp.array([E, mu])
    J, (apex, speed) = jacobian(p0, model)
    v_i = np.sqrt(2 * G * h0)
    assert float(apex) == pytest.approx(E**2 * h0, rel=1.3e-2)  # it bounced: 4.5e-3
    assert float(speed) == pytest.approx(vx - mu * (1 + E) * v_i, rel=9e-3)  # slid: 3.2e-3
    eps = 1e-4
    central = np.stack(
        [(jacobian(p0 + d, model)[1] - jacobian(p0 - d, model)[1]) / (2 * eps)
         for d in eps * np.eye(2)], axis=1,
    )  # fmt: skip
    np.testing.assert_allclose(J, central, rtol=0, atol=3e-13 * np.max(np.abs(J)))
    # the apex does not depend on friction: a structural zero (1.8e-41 measured)
    assert abs(float(J[0, 1])) < 1e-30
    assert float(J[0, 0]) == pytest.approx(2 * E * h0, rel=1.3e-2)
    assert float(J[1, 0]) == pytest.approx(-mu * v_i, rel=6.5e-3)
    assert float(J[1, 1]) == pytest.approx(-(1 + E) * v_i, rel=3.2e-2)


@pytest.mark.slow  # a gradient program through 550 steps: ~80 s to compile on 2 cores
def test_apex_gradient_with_respect_to_restitution():
    """d(first apex)/de = 2 e h_0 (up to the event timing of the step), and exactly the
    central difference of the discrete run."""
    model = _ball()

    def apex(e):
        m = eqx.tree_at(lambda m: m.contacts.restitution, model, jnp.array([e]))
        sol = mbd.simulate(m, contact="hard", t_end=0.55, h=1e-3)
        return jnp.max(sol.r[400:, 0, 2]) - R_BALL  # after the bounce (t ~ 0.3 s)

    grad = jax.grad(apex)(E)
    eps = 1e-5
    central = (apex(E + eps) - apex(E - eps)) / (2 * eps)
    np.testing.assert_allclose(grad, central, rtol=1e-7)
    np.testing.assert_allclose(grad, 2 * E * H0, rtol=2e-3)


def test_hard_contact_options_are_checked():
    model = _ball()
    with pytest.raises(ValueError, match="stepped by integrator='moreau_jean'"):
        mbd.simulate(model, contact="hard", integrator="gen_alpha", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="pass contact='hard'"):
        mbd.simulate(model, integrator="moreau_jean", t_end=0.01, h=1e-3)
    with pytest.raises(ValueError, match="option of simulate only"):
        mbd.linearize(model, "initial", contact="hard")
    with pytest.raises(ValueError, match="max_iter must be positive"):
        mbd.simulate(model, contact="hard", max_iter=0, t_end=0.01, h=1e-3)


@pytest.mark.slow  # the hard stop is also test_limit_reaction_holds_a_pendulum_at_its_stop
def test_pendulum_never_passes_a_hard_limit():
    """Joint limits are unilateral constraints with contact='hard': a pendulum thrown at
    4 rad/s against its 0.6 rad stop stays within the range to 1e-10 rad (a plastic stop),
    in rA, se3 and joint coordinates, with its hinge closed."""
    b = mbd.ModelBuilder("stop", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=1.0, inertia=[0.02, 0.02, 0.001], r=(0.0, 0.0, -0.5))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(-0.6, 0.6))  # fmt: skip
    b.set_joint_state("hinge", q=0.0, qdot=4.0)
    model = b.build()
    for formulation in ("rA", "se3", "joint"):
        sol = mbd.simulate(model, contact="hard", formulation=formulation, t_end=0.6, h=1e-3)
        assert np.all(np.asarray(sol.status) == 0)
        q = np.asarray(sol.joints["hinge"].q)
        assert q.max() > 0.6 - 1e-10  # it reached the stop ...
        assert q.max() < 0.6 + 1e-10 and q.min() > -0.6 - 1e-10  # ... and never passed it
        assert np.abs(np.asarray(mbd.diagnostics.position_residual(model, sol))).max() < 1e-9


def test_rod_slides_and_falls_without_a_spurious_jump():
    """A rod (capsule) leaning at 45 degrees on its lower end, sliding with friction: the
    end stays on the plane while it slides (no jump, no penetration) and friction
    dissipates energy."""
    L, R, mu = 1.0, 0.02, 0.3
    c = np.cos(np.pi / 4)
    b = mbd.ModelBuilder("rod", gravity=(0.0, 0.0, -G))
    A = np.array([[c, 0.0, c], [0.0, 1.0, 0.0], [-c, 0.0, c]])  # capsule axis (z) tilted
    b.add_body("rod", mass=1.0, inertia=[L**2 / 12, L**2 / 12, 1e-4], A=A,
               r=(0.0, 0.0, R + 0.5 * L * c), rdot=(1.0, 0.0, 0.0),
               shapes=[mbd.geometry.capsule(R, L)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("rod", "ground", friction=mu, restitution=0.0)
    model = b.build()
    sol = mbd.simulate(model, contact="hard", t_end=0.3, h=1e-3)
    assert np.all(np.asarray(sol.status) == 0)
    gaps = _gaps(model, sol)
    assert gaps.min() > -1e-8
    lower_end = gaps.min(axis=1)  # the end on the plane
    assert np.abs(lower_end).max() < 1e-8, np.abs(lower_end).max()
    energy = np.asarray(mbd.diagnostics.energy(model, sol).total)
    # friction dissipates ~1e-3 J per step; the position projection may lift the end by
    # O(h^2) after a step it spent airborne (+1e-5 J), never more, and never above the start
    assert np.all(np.diff(energy) < 1e-5 * abs(energy[0])), np.diff(energy).max()
    assert np.all(energy[1:] < energy[0])
    assert energy[-1] < energy[0] - 0.05


def test_batch_with_a_different_active_set_per_member():
    """simulate_batch under vmap: balls dropped from four heights hit the ground at
    different steps (each member its own active set and Newton iterations) and each
    equals its own single run."""
    model = _ball()

    def dropped(z):
        return eqx.tree_at(lambda m: m.r0, model, model.r0.at[0, 2].set(z + R_BALL))

    heights = (0.1, 0.2, 0.35, 0.05)
    batch = mbd.simulate_batch(mbd.stack_models([dropped(z) for z in heights]),
                               contact="hard", t_end=0.4, h=1e-3)  # fmt: skip
    assert np.all(np.asarray(batch.status) == 0)
    for k in (0, 2):
        one = mbd.simulate(dropped(heights[k]), contact="hard", t_end=0.4, h=1e-3)
        np.testing.assert_allclose(batch.r[k], one.r, rtol=0, atol=ROUND_OFF)
    # the impacts happen at different steps: the first bounces' times differ
    vz = np.asarray(batch.rdot[:, :, 0, 2])
    first_bounce = np.argmax(np.diff(vz, axis=1) > 0.5, axis=1)
    assert len(set(first_bounce.tolist())) == len(heights)


@pytest.mark.slow  # a gradient program through 600 steps: ~70 s to compile on 2 cores
def test_stopping_distance_gradient_through_stick_slip():
    """d(x at 0.6 s)/d(mu) for the sliding box (it stops at 0.51 s, then sticks on four
    corners where the impulses are not unique): the central difference of the run, and
    the closed form -v0^2 / (2 mu^2 g) up to the step's event timing."""
    v0, mu = 2.0, 0.4
    model = _box(v0=v0, friction=mu)

    def distance(friction):
        m = eqx.tree_at(lambda m: m.contacts.friction, model, jnp.array([friction]))
        return mbd.simulate(m, contact="hard", t_end=0.6, h=1e-3).r[-1, 0, 0]

    grad = jax.grad(distance)(mu)
    eps = 1e-6
    central = (distance(mu + eps) - distance(mu - eps)) / (2 * eps)
    np.testing.assert_allclose(grad, central, rtol=1e-7)
    np.testing.assert_allclose(grad, -(v0**2) / (2 * mu**2 * G), rtol=2e-3)


@pytest.mark.slow  # 40 contact slots: ~4 min to compile and run on a loaded 2-core machine
def test_box_stack_stands_still():
    """Three boxes stacked on the ground (box-box corners, aligned faces: each touching
    corner seen twice, so the impulses are not unique): nothing moves or sinks."""
    a = 0.1
    b = mbd.ModelBuilder("stack", gravity=(0.0, 0.0, -G))
    for k in range(3):
        b.add_body(f"box{k}", mass=1.0, inertia=[2 * (2 * a) ** 2 / 6] * 3,
                   r=(0.0, 0.0, a + 2 * a * k), shapes=[mbd.geometry.box([2 * a] * 3)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("box0", "ground", friction=0.5, restitution=0.0)
    for k in range(2):
        b.add_contact(f"box{k}", f"box{k + 1}", friction=0.5, restitution=0.0)
    model = b.build()
    sol = mbd.simulate(model, contact="hard", t_end=0.2, h=1e-3)
    assert np.all(np.asarray(sol.status) == 0)
    np.testing.assert_allclose(sol.r, np.broadcast_to(sol.r[0], sol.r.shape), atol=1e-10)
    assert _gaps(model, sol).min() > -1e-10


@pytest.mark.slow  # a gradient program with the second (relaxed) solve: ~4 min to compile
def test_relaxed_gradients_are_close_and_leave_the_motion_alone():
    """relaxation=1e-3: the run is the exact one, and d x(T)/d mu of a block sliding down
    the incline stays within 0.5 % of the closed form -g cos(theta) T^2 / 2."""
    theta, T = np.arctan(0.3), 0.3
    model = _box(incline=theta, friction=0.26)
    downhill = jnp.array([np.cos(theta), 0.0, -np.sin(theta)])

    def travelled(mu, relaxation):
        m = eqx.tree_at(lambda m: m.contacts.friction, model, jnp.array([mu]))
        sol = mbd.simulate(
            m, formulation="rA", contact="hard", relaxation=relaxation, t_end=T, h=1e-3
        )
        return (sol.r[-1, 0] - sol.r[0, 0]) @ downhill

    # the same motion (a different compiled program: round-off apart)
    np.testing.assert_allclose(travelled(0.26, 1e-3), travelled(0.26, 0.0), atol=1e-12)
    grad = jax.grad(travelled)(0.26, 1e-3)
    np.testing.assert_allclose(grad, -0.5 * G * np.cos(theta) * T**2, rtol=5e-3)


def _resting_pendulum(angle, *, lower, upper):
    """A rod (1 kg, centre 0.5 m below a hinge about y) held at ``angle`` at rest."""
    b = mbd.ModelBuilder("rest", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=1.0, inertia=[0.02, 0.02, 0.001], r=(0.0, 0.0, -0.5))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(lower, upper))  # fmt: skip
    b.set_joint_state("hinge", q=angle, qdot=0.0)
    return b.build()


def test_limit_reaction_holds_a_pendulum_at_its_stop():
    """sol.limits: a pendulum resting on its hard stop (gravity pulls it back towards
    q = 0, out of the range (0.3, 1.0) rad or (-1.0, -0.3)) is held by the stop's torque
    m g l sin(q) along +q at the lower stop, -m g l sin|q| at the upper, to 1e-8; the
    compliant limit settles on the same torque."""
    for angle, lower, upper in ((0.3, 0.3, 1.0), (-0.3, -1.0, -0.3)):
        model = _resting_pendulum(angle, lower=lower, upper=upper)
        sol = mbd.simulate(model, contact="hard", t_end=0.02, h=1e-3)
        assert np.all(np.asarray(sol.status) == 0)
        q = np.asarray(sol.joints["hinge"].q)
        np.testing.assert_allclose(q, angle, rtol=0, atol=ROUND_OFF)
        torque = np.asarray(sol.limits["hinge"])
        assert torque[0] == 0.0  # no step ended at t = 0
        np.testing.assert_allclose(torque[1:], 1.0 * G * 0.5 * np.sin(angle), rtol=ROUND_OFF)
    assert sol.contact is None and set(sol.limits) == {"hinge"}
    # compliant: the critically damped limit (tau = 0.01 s) settles within 0.3 s
    sol = mbd.simulate(model, t_end=0.3, h=1e-3)
    q, torque = np.asarray(sol.joints["hinge"].q), np.asarray(sol.limits["hinge"])
    assert q[-1] > -0.3  # in the upper stop's spring
    np.testing.assert_allclose(torque[-1], G * 0.5 * np.sin(q[-1]), rtol=2e-7)  # 5.0e-8


def test_closed_form_generalised_jacobian_matches_autodiff():
    """The semismooth Newton's generalised Jacobian of the Alart-Curnier equations in
    Delassus form (closed form, Alart & Curnier eqs. 36-38), exact and smoothed, equals
    forward-mode autodiff of the residual away from its kinks (random points: a slot
    inactive, the others sticking or sliding)."""
    from jaxmbd.integrators import moreau_jean as mj

    rng = np.random.default_rng(0)
    n_N, ns = 5, 3  # 3 contact slots and 2 limit rows
    p = n_N + 2 * ns
    low_rank = rng.normal(size=(p, 4))  # a rank-deficient Delassus matrix
    closed_form = jax.jit(mj._proximal_jacobian, static_argnums=2)
    autodiff = jax.jit(jax.jacfwd(mj._proximal_residual), static_argnums=2)
    for smoothing in (None, 0.05):
        for _ in range(3):
            contact = mj._Contact(
                jnp.asarray(rng.normal(size=p)), jnp.asarray(low_rank @ low_rank.T),
                jnp.asarray(rng.uniform(0.5, 2.0, size=p)), jnp.array([0.3, 0.5, 0.7]),
                jnp.array([1.0, 1.0, 0.0, 1.0, 1.0]),
            )  # fmt: skip
            P = jnp.asarray(rng.normal(size=p))
            np.testing.assert_allclose(closed_form(P, contact, smoothing),
                                       autodiff(P, contact, smoothing),
                                       rtol=0, atol=ROUND_OFF)  # fmt: skip
