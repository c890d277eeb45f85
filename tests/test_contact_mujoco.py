"""Compliant contact against MuJoCo (issue 35): a box that lands while sliding and slides
to rest, and a chain of capsules joined by hinges that falls onto the floor and settles.

Each model is written twice, as a plain MuJoCo XML string and with ``mbd.ModelBuilder``
(the same masses, inertias, shapes, friction and initial state; MuJoCo's body frames are
jaxmbd's body frames: checked at t = 0), run at the same step h = 1e-3 s, and the rest
poses are compared with the closed forms and with each other.

Why the engines differ. MuJoCo's contact is a soft constraint: the solver gives the normal
acceleration d' a_ref + (1 - d') a_0 with a_ref = -B v - K d(r) r (solref = (0.02 s, 1),
solimp = (0.9, 0.95, 0.001)), a critically damped response with a 0.02 s time constant,
mass independent. It penetrates deep into an impact (about v tau / e: 7 mm at 1 m/s; the
box's four corners landing at 1 m/s sink 3.8 mm, the chain's 3 m/s whip 2.7 cm) and
rests at the depth r_s where d' K d r_s = (1 - d') g: 3.7e-4 m for one contact with an
elliptic cone, less when contacts share a load (jaxmbd.mjcf._contact.static_penetration,
checked against MuJoCo in tests/test_mjcf_contact.py). Its friction lies in an elliptic
or (default) pyramidal cone, exactly Coulomb along the pyramid's axes. jaxmbd's contact is
a Hunt-Crossley penalty force, stiff by default (a body's weight on one slot penetrates
1e-3 of the shape's size), with restitution 0 (taken as 0.01) and friction regularised
below v_s = 1e-4 m/s. Its impacts last under a millisecond, so at h = 1e-3 they are taken
in one or two steps; gen_alpha runs with rho_inf = 0, whose numerical damping removes the
unresolved stiff mode (the default rho_inf = 0.9 keeps 90 % of it: the box would rebound
at 0.87 of its landing speed and tumble; docs/guide/contact.md, "Restitution needs
resolved impacts").
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

import jaxmbd as mbd  # noqa: E402

G = 9.81
H = 1e-3
# MuJoCo's rest penetration for one contact with the default solref/solimp and an elliptic
# cone (the largest of these runs: the pyramidal cone and shared loads sink less)
MJ_REST_DEPTH = 3.7e-4
MJ_VARIANTS = [
    ("Euler", "elliptic"),
    ("implicitfast", "elliptic"),
    ("RK4", "elliptic"),
    ("implicitfast", "pyramidal"),
]


def _mujoco_run(xml, t_end, *, qvel=None, start=None):
    """Steps MuJoCo to t_end; returns (model, data at t_end with its derived quantities,
    the deepest penetration of any contact over the run, the number of contacts between
    two non-world geoms over the run)."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if qvel is not None:
        d.qvel[: len(qvel)] = qvel
    mujoco.mj_forward(m, d)
    if start is not None:
        start(d)
    depth, between_bodies = 0.0, 0
    for _ in range(int(round(t_end / m.opt.timestep))):
        mujoco.mj_step(m, d)
        n = d.ncon
        if n:
            depth = max(depth, -float(np.min(d.contact.dist[:n])))
            world = (m.geom_bodyid[d.contact.geom1[:n]] == 0) | (
                m.geom_bodyid[d.contact.geom2[:n]] == 0
            )
            between_bodies += int(np.sum(~world))
    mujoco.mj_forward(m, d)  # positions and contacts of the final state
    return m, d, depth, between_bodies


def _mujoco_normal_force(m, d):
    """The sum of the normal forces of all contacts (N)."""
    f = np.zeros(6)
    total = 0.0
    for i in range(d.ncon):
        mujoco.mj_contactForce(m, d, i, f)
        total += f[0]
    return total


# ----------------------------------------------------------------------------- box

EDGE, BOX_MASS, MU_BOX, V0, DROP = 0.1, 1.0, 0.4, 2.0, 0.05
T_BOX = 0.7  # lands at 0.101 s, stops at 0.51 s


def _box_distance(sink=0.0):
    """Travel from release to rest: v0 t_f in flight, then v1^2 / (2 mu g) with
    v1 = v0 - mu w0 (w0 = sqrt(2 g drop)) plus mu times the sink after touchdown.

    Exact for any normal force history while every corner slides forwards: then the
    friction is mu N, so m dv/dt = -mu N = mu m (dw/dt - g) with w the sink rate, and
    v = v1 - mu g t + mu w(t); the box stops at t = v1 / (mu g) once settled (w = 0), and
    integrating v gives v1^2 / (2 mu g) + mu (sink). A bounce does not change it."""
    t_fall = np.sqrt(2 * DROP / G)
    v1 = V0 - MU_BOX * G * t_fall
    return V0 * t_fall + v1**2 / (2 * MU_BOX * G) + MU_BOX * sink


BOX_XML = f"""
<mujoco>
  <option timestep="{H}" integrator="{{integrator}}" cone="{{cone}}"/>
  <worldbody>
    <geom type="plane" size="0 0 1" friction="{MU_BOX} 0.005 0.0001"/>
    <body pos="0 0 {EDGE / 2 + DROP}">
      <freejoint/>
      <inertial pos="0 0 0" mass="{BOX_MASS}" diaginertia="{BOX_MASS * EDGE**2 / 6} \
{BOX_MASS * EDGE**2 / 6} {BOX_MASS * EDGE**2 / 6}"/>
      <geom type="box" size="{EDGE / 2} {EDGE / 2} {EDGE / 2}" friction="{MU_BOX} 0.005 0.0001"/>
    </body>
  </worldbody>
</mujoco>
"""


def _corner_speed(v, omega):
    """A bound on the speed of every point of the box: |v| + |omega| a sqrt(3) / 2."""
    return float(np.linalg.norm(v) + np.linalg.norm(omega) * EDGE * np.sqrt(3) / 2)


def _box_model():
    b = mbd.ModelBuilder("box", gravity=(0.0, 0.0, -G))
    b.add_body("box", mass=BOX_MASS, inertia=[BOX_MASS * EDGE**2 / 6] * 3,
               r=(0, 0, EDGE / 2 + DROP), rdot=(V0, 0, 0),
               shapes=[mbd.geometry.box((EDGE, EDGE, EDGE))])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("box", "ground", friction=MU_BOX)
    return b.build()


@pytest.fixture(scope="module")
def box_jaxmbd():
    model = _box_model()
    sol = mbd.simulate(model, t_end=T_BOX, h=H, rho_inf=0.0)
    K = float(model.contacts.stiffness[0])
    return dict(
        x0=np.asarray(sol.r[0, 0]),
        r=np.asarray(sol.r[-1, 0]),
        A=np.asarray(sol.A[-1, 0]),
        speed=_corner_speed(sol.rdot[-1, 0], sol.omega[-1, 0]),
        normal=float(np.sum(sol.contact.normal_force[-1])),
        depth=(BOX_MASS * G / 4 / K) ** (1 / 1.5),  # four corners share the weight
    )


@pytest.fixture(scope="module")
def box_mujoco():
    out = {}
    for integrator, cone in MJ_VARIANTS:
        xml = BOX_XML.format(integrator=integrator, cone=cone)
        m, d, depth, _ = _mujoco_run(xml, T_BOX, qvel=(V0, 0, 0))
        out[integrator, cone] = dict(
            x0=np.array([0.0, 0.0, EDGE / 2 + DROP]),
            r=d.xpos[1].copy(),
            A=d.xmat[1].reshape(3, 3).copy(),
            speed=_corner_speed(d.qvel[:3], d.qvel[3:]),
            normal=_mujoco_normal_force(m, d),
            max_depth=depth,
        )
    return out


def test_box_lands_and_slides_the_coulomb_distance(box_jaxmbd):
    """jaxmbd: a 10 cm, 1 kg cube released 5 cm above the floor at 2 m/s (mu = 0.4) comes
    to rest at the closed-form distance, flat, at the static penetration of its four
    lower corners, carrying its weight.

    Tolerances: distance 2e-5 m (4.1e-6 m measured; the landing step could miss it by
    (v0 - v1) h = 4e-4 m, plus mu times the sink, 1e-5 m); the rest height to 5e-11 m
    (1.1e-11 m measured) of a/2 - (m g / (4 K))^(2/3) = a/2 - 2e-5 m (static equilibrium,
    each corner a quarter of the weight by symmetry); no tilt or yaw beyond 2e-8 rad
    (3.2e-9 rad measured: symmetric corners)."""
    s = box_jaxmbd
    assert s["speed"] < 1e-7  # at rest (2.4e-8 m/s)
    distance = s["r"][0] - s["x0"][0]
    assert distance == pytest.approx(_box_distance(s["depth"]), abs=2e-5)
    assert s["r"][2] == pytest.approx(EDGE / 2 - s["depth"], abs=5e-11)
    assert abs(s["r"][1]) < ROUND_OFF
    np.testing.assert_allclose(s["A"], np.eye(3), rtol=0, atol=2e-8)
    assert s["normal"] == pytest.approx(BOX_MASS * G, rel=2e-8)  # 3.4e-9


@pytest.mark.parametrize("variant", MJ_VARIANTS, ids=lambda v: "-".join(v))
def test_box_mujoco_and_jaxmbd_rest_at_the_same_pose(box_jaxmbd, box_mujoco, variant):
    """MuJoCo (Euler, implicitfast, RK4; elliptic cone, and its default pyramidal one whose
    axes lie along x and y, so that sliding along x meets exactly mu N) against the same
    closed form and against jaxmbd.

    Tolerances from how each engine differs from the rigid closed form, not from a fit:
    MuJoCo's distance within 3e-3 m = h (v0 + v1 / 2) + mu r_s, the first-order error of its
    Euler position update while sliding (h v1 / 2), of the landing speed it carries into
    the slide (g h, worth h v1 of distance) and of the touchdown step ((v0 - v1) h), plus
    mu times its rest depth r_s (RK4 is inside it too); its rest height between a/2 and
    a/2 - r_s (MJ_REST_DEPTH = 3.7e-4 m); its tilt, and the two engines' orientations
    apart, below 2e-5 rad (4.0e-6 measured, far inside r_s / a = 3.7e-3)."""
    s = box_mujoco[variant]
    j = box_jaxmbd
    assert s["speed"] < 5e-5
    assert 1e-3 < s["max_depth"] < 2e-2  # soft: it sinks millimetres while landing
    distance = s["r"][0] - s["x0"][0]
    assert distance == pytest.approx(_box_distance(), abs=3e-3)
    assert distance == pytest.approx(j["r"][0] - j["x0"][0], abs=3e-3 + 5e-4)
    assert 0.0 <= EDGE / 2 - s["r"][2] <= MJ_REST_DEPTH
    assert abs(s["r"][2] - j["r"][2]) <= MJ_REST_DEPTH
    assert abs(s["r"][1]) < ROUND_OFF
    tilt = np.arccos(min(1.0, s["A"][2, 2]))
    assert tilt < 2e-5
    assert abs(s["A"][0, 1]) < ROUND_OFF  # no yaw: the slide is symmetric in y
    np.testing.assert_allclose(s["A"], j["A"], rtol=0, atol=2e-5)
    assert s["normal"] == pytest.approx(BOX_MASS * G, rel=1e-4)  # still rocking at 1e-4 rad/s


# ----------------------------------------------------------------------------- chain

N_LINKS, RADIUS, LENGTH, LINK_MASS, MU_CHAIN = 5, 0.02, 0.2, 0.2, 0.5
TILT, LIFT = 0.5, 0.02  # the straight chain pitched up 0.5 rad, its low end 2 cm up
T_CHAIN = 0.8  # at rest from about 0.5 s in both engines
# a capsule's inertia taken as a cylinder of its full length (the same numbers in both)
I_AXIS = LINK_MASS * RADIUS**2 / 2
I_PERP = LINK_MASS * (3 * RADIUS**2 + (LENGTH + 2 * RADIUS) ** 2) / 12
AXIS = np.array([np.cos(TILT), 0.0, np.sin(TILT)])  # the links' x axis at the start
A_TILT = np.array([[np.cos(TILT), 0, -np.sin(TILT)], [0, 1, 0], [np.sin(TILT), 0, np.cos(TILT)]])
COMS = [np.array([0, 0, RADIUS + LIFT]) + (k + 0.5) * LENGTH * AXIS for k in range(N_LINKS)]


def _links_from(k, link):
    """Link k's geometry and, inside it, link k + 1 hinged at their common end, and so on."""
    if k == N_LINKS - 1:
        return link
    child = (
        f'<body pos="{LENGTH} 0 0"><joint name="j{k + 1}" type="hinge"'
        f' pos="{-LENGTH / 2} 0 0" axis="0 1 0"/>{_links_from(k + 1, link)}</body>'
    )
    return link + child


def _chain_xml(integrator):
    link = (
        f'<inertial pos="0 0 0" mass="{LINK_MASS}" diaginertia="{I_AXIS} {I_PERP} {I_PERP}"/>'
        f'<geom type="capsule" fromto="{-LENGTH / 2} 0 0 {LENGTH / 2} 0 0" size="{RADIUS}"'
        f' friction="{MU_CHAIN} 0.005 0.0001"/>'
    )
    c = COMS[0]
    q = (np.cos(TILT / 2), 0.0, -np.sin(TILT / 2), 0.0)  # A_TILT: about y by -TILT
    return f"""
<mujoco>
  <option timestep="{H}" integrator="{integrator}" cone="elliptic"/>
  <worldbody>
    <geom type="plane" size="0 0 1" friction="{MU_CHAIN} 0.005 0.0001"/>
    <body pos="{c[0]} {c[1]} {c[2]}" quat="{q[0]} {q[1]} {q[2]} {q[3]}">
      <freejoint/>{_links_from(0, link)}
    </body>
  </worldbody>
</mujoco>
"""


def _chain_model():
    """The chain with contact pairs between each link and the ground only: the MuJoCo runs
    check that no two links touch (it collides every pair but parent and child)."""
    b = mbd.ModelBuilder("chain", gravity=(0.0, 0.0, -G))
    for k in range(N_LINKS):
        capsule = mbd.geometry.capsule(RADIUS, LENGTH, axis=(1, 0, 0))
        b.add_body(f"l{k}", mass=LINK_MASS, inertia=[I_AXIS, I_PERP, I_PERP], r=COMS[k],
                   A=A_TILT, shapes=[capsule])  # fmt: skip
        b.add_contact(f"l{k}", "ground", friction=MU_CHAIN)
    for k in range(1, N_LINKS):
        b.revolute(f"j{k}", body_i=f"l{k - 1}", body_j=f"l{k}",
                   point=COMS[k] - 0.5 * LENGTH * AXIS, axis=(0, 1, 0))  # fmt: skip
    b.add_ground_plane()
    return b.build()


@pytest.fixture(scope="module")
def chain_jaxmbd():
    model = _chain_model()
    sol = mbd.simulate(model, t_end=T_CHAIN, h=H, rho_inf=0.0)
    return dict(
        r=np.asarray(sol.r[-1]),
        A=np.asarray(sol.A[-1]),
        q=np.array([float(sol.joints[f"j{k}"].q[-1]) for k in range(1, N_LINKS)]),
        speed=float(np.max(np.abs(np.concatenate([sol.rdot[-1], sol.omega[-1]])))),
        fastest=float(np.max(np.linalg.norm(np.asarray(sol.rdot), axis=-1))),
        normal=float(np.sum(sol.contact.normal_force[-1])),
    )


@pytest.fixture(scope="module")
def chain_mujoco():
    out = {}
    for integrator in ("Euler", "implicitfast", "RK4"):

        def same_start(d):  # MuJoCo's body frames are jaxmbd's, at the same pose
            np.testing.assert_allclose(d.xpos[1:], COMS, atol=1e-12)
            np.testing.assert_allclose(d.xmat[1:].reshape(-1, 3, 3), [A_TILT] * N_LINKS,
                                       atol=1e-12)  # fmt: skip

        m, d, depth, between = _mujoco_run(_chain_xml(integrator), T_CHAIN, start=same_start)
        out[integrator] = dict(
            r=d.xpos[1:].copy(),
            A=d.xmat[1:].reshape(-1, 3, 3).copy(),
            q=d.qpos[7:].copy(),
            speed=float(np.max(np.abs(d.qvel))),
            normal=_mujoco_normal_force(m, d),
            max_depth=depth,
            between_links=between,
        )
    return out


@pytest.mark.slow  # the chain's friction bites in test_chain_slides_*
def test_chain_settles_flat_and_straight(chain_jaxmbd):
    """jaxmbd: five hinged capsules (r = 2 cm, 20 cm between the hinges) released straight,
    pitched up 0.5 rad with the low end 2 cm above the floor, fall, whip down (the far end
    lands at about 3 m/s) and come to rest lying straight along x on the floor.

    Tolerances: no end slot carries more than a link's weight, which the default stiffness
    lets penetrate 1e-3 of the radius (2e-5 m), so every link's centre is between r and
    r - 2e-5, its axis tilts at most 2e-5 / 0.2 = 1e-4 rad and each hinge angle at most
    twice that; the motion stays in the x-z plane (hinges about y); the floor carries the
    weight (static equilibrium, 1e-6)."""
    s = chain_jaxmbd
    assert s["speed"] < 1e-5
    assert np.all(s["r"][:, 2] <= RADIUS) and np.all(s["r"][:, 2] >= RADIUS - 2e-5)
    assert np.max(np.abs(s["A"][:, 2, 0])) < 1e-4  # link axes horizontal
    assert np.max(np.abs(s["q"])) < 2e-4  # straight
    np.testing.assert_allclose(s["r"][:, 1], 0.0, atol=1e-12)
    np.testing.assert_allclose(s["A"][:, 1, 1], 1.0, atol=1e-12)  # no yaw, no roll
    np.testing.assert_allclose(np.diff(s["r"][:, 0]), LENGTH, atol=1e-6)
    assert s["normal"] == pytest.approx(N_LINKS * LINK_MASS * G, rel=1e-6)


@pytest.mark.slow  # its fixture compiles ~25 s
@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_chain_mujoco_and_jaxmbd_rest_at_the_same_pose(chain_jaxmbd, chain_mujoco, integrator):
    """MuJoCo (elliptic cone) against the same closed forms and against jaxmbd.

    Heights, straightness and orientation have closed forms: MuJoCo's links rest between
    r and r - r_s (r_s = 3.7e-4 m, MJ_REST_DEPTH), their axes tilt at most r_s / 0.2 and its
    hinge angles at most twice that. Where along x the chain comes to rest has none: it is
    set by how the landings of the five links, with friction, are resolved. The two
    engines resolve them differently by the depth to which a link sinks into the floor
    while landing: MuJoCo's soft contact (measured in the run: about 2.7 cm at the 3 m/s
    whip) and jaxmbd's one-step impacts, whose contact point is known to the distance
    travelled in a step, v h (v: the fastest link speed of the run, about 2.7 m/s) for each
    link's landing. The rest positions along x must agree to the sum of these,
    depth_MuJoCo + 5 v h (about 4 cm; they differ by 1.3 cm). That is coarse: no friction
    (mu = 0 instead of 0.5 moves MuJoCo's chain by 6.6 cm) fails it, half the friction
    (2 cm) passes: the sliding chain below checks its friction."""
    s = chain_mujoco[integrator]
    j = chain_jaxmbd
    assert s["between_links"] == 0  # only link-floor contacts, as in the jaxmbd model
    assert s["speed"] < 1e-4
    assert np.all(s["r"][:, 2] <= RADIUS) and np.all(s["r"][:, 2] >= RADIUS - MJ_REST_DEPTH)
    assert np.max(np.abs(s["A"][:, 2, 0])) < MJ_REST_DEPTH / LENGTH
    assert np.max(np.abs(s["q"])) < 2 * MJ_REST_DEPTH / LENGTH
    np.testing.assert_allclose(s["r"][:, 1], 0.0, atol=1e-12)
    np.testing.assert_allclose(s["A"][:, 1, 1], 1.0, atol=1e-12)
    assert s["normal"] == pytest.approx(N_LINKS * LINK_MASS * G, rel=1e-6)
    # against jaxmbd
    np.testing.assert_allclose(s["r"][:, 2], j["r"][:, 2], atol=MJ_REST_DEPTH)
    tolerance = s["max_depth"] + N_LINKS * j["fastest"] * H
    assert 1e-2 < s["max_depth"] < 5e-2  # the soft landing this tolerance rests on
    np.testing.assert_allclose(s["r"][:, 0], j["r"][:, 0], atol=tolerance)


# The chain lying straight on the floor, pushed along its length at V_SLIDE: every link slides
# on its two end slots and the chain stops after V_SLIDE^2 / (2 mu g) (Coulomb; no rolling
# along the links' axes), a distance friction sets (half the friction doubles it).
V_SLIDE = 1.0
FLAT = np.array([[(k + 0.5) * LENGTH, 0.0, RADIUS] for k in range(N_LINKS)])


@pytest.fixture(scope="module")
def chain_slides():
    """Slide distances along x of the five links: jaxmbd (the chain model of the fixture
    above with another initial state: the same compiled program) and MuJoCo's three
    integrators."""
    model = _chain_model()
    start = (jnp.asarray(FLAT), jnp.tile(jnp.eye(3), (N_LINKS, 1, 1)),
             jnp.tile(jnp.array([V_SLIDE, 0.0, 0.0]), (N_LINKS, 1)))  # fmt: skip
    model = eqx.tree_at(lambda m: (m.r0, m.A0, m.rdot0), model, start)
    sol = mbd.simulate(model, t_end=T_CHAIN, h=H, rho_inf=0.0)
    out = {"jaxmbd": np.asarray(sol.r[-1, :, 0] - sol.r[0, :, 0])}
    for integrator in ("Euler", "implicitfast", "RK4"):

        def flat_start(d):
            d.qpos[:3], d.qpos[3:7], d.qpos[7:] = FLAT[0], (1.0, 0.0, 0.0, 0.0), 0.0
            d.qvel[:] = 0.0
            d.qvel[0] = V_SLIDE

        _, d, _, _ = _mujoco_run(_chain_xml(integrator), T_CHAIN, start=flat_start)
        assert np.max(np.abs(d.qvel)) < 5e-8  # stopped (9.9e-9)
        out[integrator] = d.xpos[1:, 0] - FLAT[:, 0]
    return out


def test_chain_slides_the_coulomb_distance_in_both_engines(chain_slides):
    """The friction the rest pose above cannot resolve: the sliding chain stops after
    V_SLIDE^2 / (2 mu g) = 0.102 m, in jaxmbd to 2.3e-4 (met to 7.7e-5) and in MuJoCo to
    7.7e-3 (met to 2.6e-3: its soft friction creeps), the two engines within 7.9e-3 of
    each other (met to 2.6e-3)."""
    closed = V_SLIDE**2 / (2 * MU_CHAIN * G)
    ours = chain_slides["jaxmbd"]
    np.testing.assert_allclose(ours, closed, rtol=2.3e-4)
    for integrator in ("Euler", "implicitfast", "RK4"):
        theirs = chain_slides[integrator]
        np.testing.assert_allclose(theirs, closed, rtol=7.7e-3)
        np.testing.assert_allclose(ours, theirs, rtol=7.9e-3)
