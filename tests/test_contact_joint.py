"""The closed-form contact cases of test_contact.py (sliding block, incline, rolling sphere,
static penetration, bouncing ball) in joint coordinates (``formulation="joint"``: the
block and the ball on free joints), at the tolerances they have in rA, stepped by an
explicit RK4 at small steps; and dm_control's hopper with its contacts as authored.

The default joint step for these models (gen_alpha solved by Newton with impact
sub-steps, :mod:`jaxmbd.joint_space.contact_step`) meets the same closed forms at
h = 1e-3: test_contact.py runs them in both formulations, test_impact_restitution.py the
bounce at the users' step. The RK4 runs here (slow: 62500 and 70000 steps) check the law
in joint coordinates with no implicit solve at all, and the drops against the law's own
ODE integrated by scipy.

The step: ``rkmk`` (RK4) below its stability bound on the regularised friction. Where a
contact point sticks, friction acts as a viscous damper of rate mu N / v_slip per slot
(v_slip = 1e-4 m/s); the stiffest mode of M^-1 D (D: the forces' velocity Jacobian) at
rest is 1.34e5 1/s for the block on its four corners (its tilting modes) and 1.03e5 1/s
for the ball (slip of its contact point, 1/m + R^2/I = 3.5/m). RK4 is stable on the
negative real axis for h lambda < 2.785: h = 1.6e-5 for the block (2.15), 2e-5 for the
ball (2.06). Above the bound (block at 5e-5) the stopped block does not come to rest but
rocks in a limit cycle (sum of normal forces 0.59 m g). The linearly implicit step
(``implicit``, with or without the position Jacobian: MuJoCo's, the default of models read
from a file) is stable at 1e-3 but cannot stick:
linearised where the friction is saturated, its one solve per step flips the stopped
block's velocity to -v each step, at v = mu g h / 2 = 2e-3 m/s; and, first order, it
misses the stopping distance by 2e-3 (2.1e-4 at h = 1e-4; tolerance 2e-5).

Each structure compiles once: the three block runs share one program (gravity, friction
and initial state are array leaves) on one time grid, the five ball runs (rolling, two
resting, two bouncing) another.
"""

from __future__ import annotations

import os
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_contact import G, _ball, _block, _settled

import jaxmbd as mbd
from jaxmbd.contact.law import normal_force
from jaxmbd.joint_space import LinearlyImplicitEuler

H_BLOCK, T_BLOCK = 1.6e-5, 1.0  # as rA: stops at 0.51 s, then its tilt relaxes (rate 22 1/s)
H_BALL, T_BALL = 2e-5, 1.4  # three bounces of the drops; rolling and resting runs too


def _joint(model, h, t_end):
    return mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=t_end, h=h)


# slow: test_contact.py's block and ball cases cover joint coordinates at h = 1e-3
SMALL_STEPS = pytest.mark.slow


@pytest.fixture(scope="module")
def blocks():
    """The sliding block (v0 = 2 m/s) and the two inclines, on one program."""
    out = {"slide": _block(v0=2.0)}
    for tan_theta in (0.3, 0.5):
        out[tan_theta] = _block(theta=np.arctan(tan_theta))
    return {k: (m, _joint(m, H_BLOCK, T_BLOCK)) for k, m in out.items()}


@SMALL_STEPS
def test_sliding_block_stops_at_the_coulomb_distance_and_time(blocks):
    """v0 = 2 m/s, mu = 0.4: it stops after v0^2 / (2 mu g) (to 2e-5; 1.1e-5 measured) at
    t = v0 / (mu g) (to 1.8e-3; 4.8e-4); at rest its four lower corners press at the
    static penetration, their normal forces summing to the weight (to 1e-6; 4e-10)."""
    mu, v0 = 0.4, 2.0
    model, sol = blocks["slide"]
    assert sol.formulation == "joint"
    x = np.asarray(sol.r[:, 0, 0])
    v = np.asarray(sol.rdot[:, 0, 0])
    t = np.asarray(sol.t)
    distance = x[-1] - x[0]
    assert distance == pytest.approx(v0**2 / (2 * mu * G), rel=2e-5)
    assert abs(v[-1]) < 1e-6
    stop = t[np.argmax(np.abs(v) < 1e-3)]
    assert stop == pytest.approx(v0 / (mu * G), rel=1.8e-3)
    c = sol.contact
    assert c.gap.shape == c.normal_force.shape == (len(t), 8)
    assert c.tangential_force.shape == (len(t), 8, 3) and c.active.dtype == bool
    assert int(np.sum(np.asarray(c.active[-1]))) == 4
    np.testing.assert_allclose(
        np.asarray(c.gap[-1])[np.asarray(c.active[-1])],
        -((G / 4 / float(model.contacts.stiffness[0])) ** (2 / 3)),
        rtol=2e-5,  # 6.7e-6: the last of its tilt (front and rear pairs differ)
    )
    assert float(jnp.sum(c.normal_force[-1])) == pytest.approx(G, rel=1e-6)
    f = mbd.diagnostics.contact_forces(model, sol)
    np.testing.assert_allclose(f.force[-1, 0], [0, 0, G], atol=1e-6)
    k = int(round(0.1 / H_BLOCK))  # sliding: kinetic friction
    np.testing.assert_allclose(f.force[k, 0, 0], -mu * G, rtol=1e-3)
    np.testing.assert_allclose(f.point[-1, 0, :2], sol.r[-1, 0, :2], atol=1e-9)


@SMALL_STEPS
@pytest.mark.parametrize("tan_theta", [0.3, 0.5])
def test_incline_sticks_or_slides_at_the_coulomb_acceleration(blocks, tan_theta):
    """Gravity tilted by theta on mu = 0.4: tan(theta) = 0.3 sticks (creep below 0.3 mm a
    second, rA's bound; 0.117 mm measured), tan(theta) = 0.5 slides with
    a = g (sin(theta) - mu cos(theta)) (to 1e-2; 5.6e-4 measured)."""
    theta = np.arctan(tan_theta)
    _, sol = blocks[tan_theta]
    x = np.asarray(sol.r[:, 0, 0] - sol.r[0, 0, 0])
    if tan_theta < 0.4:
        assert np.max(np.abs(x)) < 3e-4
    else:
        a = G * (np.sin(theta) - 0.4 * np.cos(theta))
        assert x[-1] == pytest.approx(0.5 * a * T_BLOCK**2, rel=1e-2)


@pytest.fixture(scope="module")
def balls():
    """The ball runs on one program: rolling (v0 = 2 m/s, mu = 0.3), resting (Hertz and
    linear law), dropped (e = 0.5 from 1 m, e = 0.8 from 0.5 m; K = 3e8)."""
    R, v0 = 0.1, 2.0
    models = {
        "roll": _settled(_ball(radius=R, rdot=(v0, 0, 0), friction=0.3)),
        (1.5, 1e7): _ball(restitution=0.5, stiffness=1e7, exponent=1.5),
        (1.0, 1e5): _ball(restitution=0.5, stiffness=1e5, exponent=1.0),
        0.5: _ball(radius=0.05, r=(0, 0, 1.0), restitution=0.5, stiffness=3e8),
        0.8: _ball(radius=0.05, r=(0, 0, 0.5), restitution=0.8, stiffness=3e8),
    }
    return {k: (m, _joint(m, H_BALL, T_BALL)) for k, m in models.items()}


@SMALL_STEPS
def test_rolling_sphere_slides_then_rolls(balls):
    """v0 = 2 m/s, omega0 = 0, mu = 0.3: slides until v = 5/7 v0 at t = 2 v0 / (7 mu g)
    (to 1e-2; 7.6e-5 measured), then rolls with v = 5/7 v0 (8e-4; 2.9e-4) and omega R = v
    (1.5e-3; 5.0e-4)."""
    R, v0, mu = 0.1, 2.0, 0.3
    model, sol = balls["roll"]
    v = np.asarray(sol.rdot[:, 0, 0])
    w = np.asarray(sol.omega[:, 0, 1])
    t = np.asarray(sol.t)
    depth = R - float(model.r0[0, 2])
    slip = v - w * (R - depth)
    t_roll = t[np.argmax(np.abs(slip) < 1e-3 * v0)]
    assert t_roll == pytest.approx(2 * v0 / (7 * mu * G), rel=1e-2)
    assert v[-1] == pytest.approx(5 / 7 * v0, rel=8e-4)
    assert w[-1] * R == pytest.approx(v[-1], rel=1.5e-3)


@SMALL_STEPS
@pytest.mark.parametrize("exponent, stiffness", [(1.5, 1e7), (1.0, 1e5)])
def test_ball_settles_at_the_static_penetration(balls, exponent, stiffness):
    """K delta^n = m g: mg / k (linear) or (mg / K)^(2/3) (Hertz) (to 5e-11; 8e-12 measured);
    sol.contact's gap is that depth and its normal force the weight (1e-9)."""
    _, sol = balls[(exponent, stiffness)]
    depth = 0.1 - float(sol.r[-1, 0, 2])
    assert depth == pytest.approx((1.0 * G / stiffness) ** (1 / exponent), rel=5e-11, abs=0)
    assert float(sol.contact.gap[-1, 0]) == pytest.approx(-depth, rel=1e-9)
    assert float(sol.contact.normal_force[-1, 0]) == pytest.approx(G, rel=1e-9)


def _apexes(z):
    """The first four apex heights of a drop (the start, then the grid's local maxima)."""
    peaks = np.nonzero((z[1:-1] > z[:-2]) & (z[1:-1] >= z[2:]) & (z[1:-1] > 0))[0] + 1
    return np.concatenate([[z[0]], z[peaks]])[:4]


def _drop_apexes(model, z0, radius):
    """The apex heights of the same drop as one vertical ODE, m z'' = -m g + N(-gap,
    -gap'), with the contact law's own function (gravity g pushing the ball in): flights
    in closed form, each impact integrated by scipy (DOP853, rtol 1e-12) from touchdown to
    lift-off. The model's
    answer independent of any jaxmbd step."""
    from scipy.integrate import solve_ivp

    c = model.contacts
    m = float(model.mass[0])
    kw = dict(stiffness=float(c.stiffness[0]), restitution=float(c.restitution[0]),
              damping=float(c.damping[0]), m_eff=m, exponent=float(c.exponent[0]),
              gravity=G)  # fmt: skip
    law = jax.jit(lambda d, dd: normal_force(d, dd, **kw))

    def rhs(_, y):  # y = (penetration, its rate)
        return [y[1], G - float(law(y[0], y[1])) / m]

    def lift_off(_, y):
        return y[0]

    lift_off.terminal, lift_off.direction = True, -1
    apexes = [z0 - radius]
    while len(apexes) < 4:
        v_in = np.sqrt(2 * G * apexes[-1])
        T = (m * v_in**2 / kw["stiffness"]) ** 0.4 / v_in  # the impact's time scale
        impact = solve_ivp(rhs, (0, 100 * T), [0.0, v_in], method="DOP853", rtol=1e-12,
                           atol=1e-15, events=lift_off, first_step=1e-4 * T)  # fmt: skip
        v_out = -impact.y_events[0][0][1]
        apexes.append(v_out**2 / (2 * G))
    return np.asarray(apexes)


@SMALL_STEPS
@pytest.mark.parametrize("e", [0.5, 0.8])
def test_bouncing_ball_apex_heights_follow_e_squared(balls, e):
    """Apex heights above touching follow e^2 per bounce over three bounces: within 5e-4
    for e = 0.5 (1.5e-4 measured) and 1.5e-4 for e = 0.8 (4.3e-5): the law's gravity factor
    keeps e while gravity acts during the impact (without it the model's own ODE gave
    -3.1e-3 and -1.88e-3 on the third bounce). The joint run meets the ODE's apex ratios,
    integrated by scipy with the law's own function, to 1e-4 (1.6e-4 relative to e^2 at
    most for both)."""
    model, sol = balls[e]
    radius = 0.05
    apex = _apexes(np.asarray(sol.r[:, 0, 2]) - radius)
    assert len(apex) == 4
    ratios = apex[1:] / apex[:-1]
    tolerance = {0.5: 5e-4, 0.8: 1.5e-4}[e]
    reference = _drop_apexes(model, float(model.r0[0, 2]), radius)
    assert np.all(np.abs(ratios / e**2 - 1) < tolerance), ratios / e**2 - 1
    np.testing.assert_allclose(ratios, reference[1:] / reference[:-1], rtol=1e-4)


# ----------------------------------------------------------------------------- hopper

HOPPER_STEPS = 500  # 2.5 s at the file's own step, 5 ms


@pytest.fixture(scope="module")
def hopper():
    """dm_control's hopper with its contacts as authored, in joint coordinates, from its
    reference pose (the foot 6 cm above the floor, the knee below its limit): it drops,
    topples backwards and comes to rest lying on its back. The step: the linearly implicit
    Euler step with the forces' position Jacobian too. The contacts' normal stiffness
    reaches h omega = 2.0 at 5 ms as the foot lands (1.2 at rest), the bound of a step
    explicit in positions: ``implicit`` without that Jacobian lifts the torso off the floor
    again after it lands (0.21 to 0.41 m from 0.8 to 1.0 s) and rests only after 3 s."""
    dm_control = pytest.importorskip("dm_control")
    path = os.path.dirname(dm_control.__file__) + "/suite/hopper.xml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its sensors are not read
        model = mbd.load_model(path)
    h = 0.005
    stepper = LinearlyImplicitEuler(position_jacobian=True)
    sol = mbd.simulate(model, integrator=stepper, contact="compliant", limits="compliant",
                       t_end=HOPPER_STEPS * h, h=h)  # fmt: skip
    return path, model, sol


def test_hopper_rests_on_the_floor_with_its_weight_on_the_contacts(hopper):
    """Every step, impacts included: the floor's normal forces equal the weight plus the
    rate of the vertical momentum, sum_ground N = sum_i m_i (g + z_i'') (the floor
    horizontal, friction in its plane, the self-contacts internal), to 5e-13 of the weight
    (8.9e-14 measured): the contact forces reach the joints through J^T and nothing else.
    At rest (2.5 s, |qvel| 4.5e-3: the stiffer stops of MuJoCo's limit gains still ring) they
    sum to the weight to 1e-5 (1.2e-6 measured: resting under gravity the contact law's
    damping is a(e) / 1.25, its gravity factor's cap), and the
    torso lies on its back on the floor (rooty = -pi/2) at its capsule's radius less the
    penetration, as in MuJoCo C (mj_step, same file and step: torso 0.06517 m there,
    0.06501 m here; the legs fold differently, a chaotic fall under two contact laws)."""
    mujoco = pytest.importorskip("mujoco")
    path, model, sol = hopper
    assert sol.formulation == "joint" and np.all(np.asarray(sol.status) == 0)
    c = model.contacts
    on_floor = np.array([c.pair_names[p].endswith("/ground") for p in c.slot_pair])
    floor = np.asarray(sol.contact.normal_force)[:, on_floor].sum(axis=1)
    mass = np.asarray(model.mass)
    weight = float(mass.sum()) * G
    momentum_rate = (mass * (G + np.asarray(sol.rddot[:, :, 2]))).sum(axis=1)
    np.testing.assert_allclose(floor, momentum_rate, rtol=0, atol=5e-13 * weight)
    assert np.linalg.norm(np.asarray(sol.qvel[-1])) < 3e-2
    assert floor[-1] == pytest.approx(weight, rel=1e-5)

    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    for _ in range(HOPPER_STEPS):
        mujoco.mj_step(m, d)
    torso = 1.0 + np.array([float(sol.qpos[-1, 1]), d.qpos[1]])  # rootz: 1 m up at rest
    radius = 0.0653
    assert np.all((radius - 1e-3 < torso) & (torso < radius))
    assert abs(torso[0] - torso[1]) < 1e-3
    np.testing.assert_allclose([float(sol.qpos[-1, 2]), d.qpos[2]], -np.pi / 2, rtol=0, atol=1e-3)


def test_gradient_through_compliant_contact_equals_central_differences():
    """20 steps (h = 1e-3, the default joint step with contact: gen_alpha by Newton) of a
    5 cm ball on a free joint arriving at 0.5 m/s on the plane while sliding at 0.3 m/s:
    the reverse-mode Jacobian of its final height and velocities with respect to the
    contact's (e, mu) equals central differences (eps = 1e-5, truncation error 2.3e-9 of
    the largest entry measured), one compiled program for values and Jacobian."""
    model = _ball(radius=0.05, r=(0, 0, 0.051), rdot=(0.3, 0, -0.5), restitution=0.5)

    def outputs(p):
        m = eqx.tree_at(lambda m: (m.contacts.restitution, m.contacts.friction), model,
                        (p[:1], p[1:]))  # fmt: skip
        sol = mbd.simulate(m, formulation="joint", t_end=0.02, h=1e-3)
        out = jnp.stack([sol.r[-1, 0, 2], sol.rdot[-1, 0, 2], sol.rdot[-1, 0, 0]])
        return out, (out, sol.contact.normal_force)

    jacobian = mbd.jit(jax.jacrev(outputs, has_aux=True))
    p0 = jnp.array([0.5, 0.3])
    J, (_, force) = jacobian(p0)
    assert np.asarray(force).max() > 1.0  # it hit the plane
    assert abs(float(J[1, 0])) > 0.1 and abs(float(J[2, 1])) > 1e-4  # e and mu act
    eps = 1e-5
    central = np.stack(
        [(jacobian(p0 + d)[1][0] - jacobian(p0 - d)[1][0]) / (2 * eps) for d in eps * np.eye(2)],
        axis=1,
    )
    np.testing.assert_allclose(J, central, rtol=0, atol=2e-8 * np.abs(J).max())
