"""Contact parameters: torsional and rolling friction against the closed forms of the law
(jaxmbd.contact.friction_wrench), MuJoCo's margin/gap and condim/friction mixing and its
explicit <pair> elements against MuJoCo itself (its contact list and its resting balls)."""

from __future__ import annotations

import math
import os
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.mjcf import _contact as mc

G = 9.81
MASS, RADIUS = 1.0, 0.1
INERTIA = 0.4 * MASS * RADIUS**2
MU, MU_T, MU_R, V_S = 0.5, 0.005, 0.002, 1e-4


@pytest.fixture(scope="module")
def ball():
    """A ball on the plane with torsional and rolling friction, lowered onto its rest
    penetration (one slot carries m g): spin and rolling runs share its program."""
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -G))
    b.add_body("ball", mass=MASS, inertia=[INERTIA] * 3, r=(0, 0, RADIUS),
               shapes=[mbd.geometry.sphere(RADIUS)])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("ball", "ground", friction=MU, torsional_friction=MU_T,
                  rolling_friction=MU_R, slip_velocity=V_S)  # fmt: skip
    model = b.build()
    K = float(model.contacts.stiffness[0])
    depth = (MASS * G / K) ** (1 / 1.5)
    return eqx.tree_at(lambda m: m.r0, model, model.r0.at[0, 2].add(-depth))


def _run(model, *, rdot=(0, 0, 0), omega=(0, 0, 0), t_end=0.2):
    model = eqx.tree_at(lambda m: (m.rdot0, m.omega0), model,
                        (jnp.array([rdot], float), jnp.array([omega], float)))  # fmt: skip
    sol = mbd.simulate(model, t_end=t_end, h=1e-3)
    assert sol.result == mbd.RESULTS.successful
    return sol


def test_torsional_friction_decays_spin_as_the_law_says(ball):
    """A ball spinning about the normal: only the torsional torque acts, T = -mu_t F_n w /
    sqrt(w^2 + w_s^2) with w_s = mu v_s / mu_t and F_n = m g, so I dw/dt = T integrates to
    F(w) = F(w0) - (mu_t m g / I) t with F(w) = sqrt(w^2 + c^2) - c ln((c + sqrt(w^2 +
    c^2)) / w), c = w_s (about 12.3 rad/s^2 of deceleration here)."""
    w0 = 3.0
    sol = _run(ball, omega=(0, 0, w0))
    c = MU * V_S / MU_T
    rate = MU_T * MASS * G / INERTIA

    def F(w):
        root = math.sqrt(w * w + c * c)
        return root - c * math.log((c + root) / w)

    t = np.asarray(sol.t)
    spin = np.asarray(sol.omega[:, 0, 2])
    for k in (50, 100, 150, 200):
        target = F(w0) - rate * t[k]
        expected = brentq(lambda w, target=target: F(w) - target, 1e-9, w0)
        assert spin[k] == pytest.approx(expected, abs=2e-7), t[k]
    assert np.max(np.abs(np.asarray(sol.rdot[:, 0, :2]))) < ROUND_OFF  # no sliding


def test_rolling_friction_decelerates_a_rolling_ball_as_the_law_says(ball):
    """A ball rolling at 1 m/s. The contact point is R' = R - delta / 2 below the centre
    (midway between the surfaces, delta the rest penetration), and the sliding friction
    that keeps the ball rolling needs a creep v_c = x w (the law's regularised friction):
    v = (R' + x) w, m dv/dt = F_t, I dw/dt = -R' F_t - T_r. With S = w sqrt(x^2 + k^2),
    k = mu_r / mu (v_s << S), the law gives F_t = -mu m g x / sqrt(x^2 + k^2) and T_r =
    mu_r k m g / sqrt(x^2 + k^2) (the elliptic cone shared by both), so x solves mu x (I +
    m R' (R' + x)) = m (R' + x) mu_r k and the ball decelerates at (R' + x) T_r / (I + m R'
    (R' + x)) (0.1402 m/s^2; 5 mu_r g / (7 R) = 0.1401 for a rigid ball without creep)."""
    v0 = 1.0
    sol = _run(ball, rdot=(v0, 0, 0), omega=(0, v0 / RADIUS, 0))
    delta = (MASS * G / float(ball.contacts.stiffness[0])) ** (1 / 1.5)
    arm, k = RADIUS - delta / 2, MU_R / MU

    def lever(x):
        return MU * x * (INERTIA + MASS * arm * (arm + x)) - MASS * (arm + x) * MU_R * k

    x = brentq(lever, 0.0, 1.0)
    torque = MASS * G * MU_R * k / math.sqrt(x * x + k * k)
    expected = (arm + x) * torque / (INERTIA + MASS * arm * (arm + x))
    assert expected == pytest.approx(5 * MU_R * G / (7 * RADIUS), rel=1e-3)
    t, v = np.asarray(sol.t), np.asarray(sol.rdot[:, 0, 0])
    measured = (v[50] - v[200]) / (t[200] - t[50])
    assert measured == pytest.approx(expected, rel=2e-5)
    w = np.asarray(sol.omega[:, 0, 1])
    np.testing.assert_allclose(v[50:], (arm + x) * w[50:], rtol=5e-14)  # rolls, with creep


def test_hard_contact_refuses_torsional_friction_by_pair(ball):
    with pytest.raises(ValueError, match=r"torsional or rolling friction: \['ball/ground'\]"):
        mbd.simulate(ball, t_end=0.01, h=1e-3, contact="hard")


# ---------------------------------------------------------------- MuJoCo's numbers

# every geom overlaps the floor and its neighbours: the contacts' dim, friction and
# includemargin are MuJoCo's mixing of the geoms' (priority, max) and of the <pair>s
MIXING_XML = """
<mujoco><worldbody>
  <geom name="floor" type="plane" size="2 2 .1" friction="0.7 0.003 0.0002" margin="0.002"/>
  <body name="a" pos="0 0 0.1"><freejoint/>
    <geom name="ga" type="sphere" size="0.15" condim="4" friction="0.4 0.02 0.001"
          margin="0.01" gap="0.003"/>
    <body name="a_child" pos="0 0 -0.05"><joint type="hinge"/>
      <geom name="gac" type="sphere" size="0.1" condim="1"/>
    </body>
  </body>
  <body name="b" pos="0.2 0 0.1"><freejoint/>
    <geom name="gb" type="box" size=".1 .1 .1" condim="6" priority="1"
          friction="0.9 0.01 0.003" gap="0.001"/>
  </body>
  <body name="c" pos="0.4 0 0.1"><freejoint/>
    <geom name="gc" type="capsule" size="0.1 0.1" condim="3" friction="1.2 0.04 0.005"/>
  </body>
</worldbody>
<contact>
  <pair geom1="ga" geom2="gac" condim="6" friction="0.3 0.3 0.006 0.0007 0.0007"
        margin="0.004" gap="0.001"/>
</contact>
</mujoco>
"""


def test_condim_friction_and_margin_are_mujocos():
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(MIXING_XML)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    ours = {frozenset((p.geom1, p.geom2)): p for p in mc.geom_pairs(mujoco, m)}
    seen = set()
    for con in d.contact[: d.ncon]:
        pair = ours[frozenset((con.geom1, con.geom2))]
        numbers = pair.numbers
        assert pair.condim == con.dim
        assert numbers["margin"] == con.includemargin
        if con.dim >= 3:
            assert numbers["friction"] == con.friction[0]
        if con.dim >= 4:
            assert numbers["torsional_friction"] == con.friction[2]
        if con.dim >= 6:
            assert numbers["rolling_friction"] == con.friction[3]
        seen.add(frozenset(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
                           for g in (con.geom1, con.geom2)))  # fmt: skip
    # the cases at work: priority (gb's condim 6 against the floor), mixing (ga-floor
    # condim 4, margins and gaps), the explicit parent-child pair, condim 1
    cases = [("ga", "floor"), ("gb", "floor"), ("gc", "floor"), ("ga", "gac"),
             ("gac", "floor"), ("ga", "gb")]  # fmt: skip
    assert {frozenset(p) for p in cases} <= seen
    assert ours[frozenset(_geom_ids(m, mujoco, "ga", "gb"))].condim == 6  # gb's priority


def _geom_ids(m, mujoco, *names):
    return tuple(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names)


# ball "a": margin and gap of its geom; ball "b": filtered out of every pair by its bits,
# collides through an explicit <pair> whose numbers replace the geoms'
RESTING_XML = """
<mujoco><option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" friction="1 0.005 0.0001"/>
    <body name="a" pos="0 0 0.11"><freejoint/>
      <geom name="ga" type="sphere" size="0.1" mass="1" margin="0.01" gap="0.004"/>
    </body>
    <body name="b" pos="0.5 0 0.105"><freejoint/>
      <geom name="gb" type="sphere" size="0.1" mass="2" contype="0" conaffinity="0"
            friction="1.5 0.005 0.0001"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="gb" geom2="floor" condim="6" friction="0.2 0.2 0.01 0.001 0.001"
          margin="0.006" gap="0.001" solref="0.01 1"/>
  </contact>
</mujoco>
"""


def test_margin_gap_and_explicit_pair_are_mujocos(tmp_path):
    """MuJoCo's balls rest at the closed form of our meaning, R + includemargin - r_s (r_s:
    MuJoCo's rest penetration, :func:`static_penetration`; includemargin from the geoms'
    or the pair's margin and gap by the installed MuJoCo's rule,
    jaxmbd.mjcf._contact.margin_rule), and each resting contact's includemargin is the
    margin of our pair; the explicit pair collides although the bits exclude its ball, with
    its own friction, condim and margin. That jaxmbd rests them there:
    tests/test_contact_scenes.py (these balls beside the stack of boxes)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "resting.xml"
    path.write_text(RESTING_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    contacts = model.contacts
    k = contacts.pair_names.index("b/ground")
    assert float(contacts.friction[k]) == 0.2
    assert float(contacts.torsional_friction[k]) == 0.01
    assert float(contacts.rolling_friction[k]) == 0.001
    assert 0.004 < float(contacts.margin[k]) < 0.007  # the pair's 0.006 - 0.001 or 0.006

    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    for _ in range(1000):
        mujoco.mj_step(m, d)
    assert np.max(np.abs(d.qvel)) < 5e-11
    heights = {"a": d.qpos[2], "b": d.qpos[9]}
    body = {frozenset(_geom_ids(m, mujoco, "ga", "floor")): "a",
            frozenset(_geom_ids(m, mujoco, "gb", "floor")): "b"}  # fmt: skip
    for pair in mc.geom_pairs(mujoco, m):
        c = mc.cone_factor("pyramidal", pair.condim, pair.friction)
        rest = mc.static_penetration(pair.solref, pair.solimp, gravity=G, timestep=0.002,
                                     cone_factor=c)  # fmt: skip
        name = body[frozenset((pair.geom1, pair.geom2))]
        # 1e-9 for "a"; "b"'s condim 6 pyramid has 10 edges where cone_factor assumes
        # condim 3's four: 1.4e-6 m
        assert heights[name] == pytest.approx(RADIUS + pair.includemargin - rest, abs=2e-6)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[c.geom2]))
             for c in d.contact[: d.ncon]]  # fmt: skip
    assert sorted(names) == ["a", "b"]
    for name, con in zip(names, d.contact[: d.ncon], strict=True):
        ours = float(contacts.margin[contacts.pair_names.index(f"{name}/ground")])
        assert ours == con.includemargin


def _suite_files():
    dm_control = pytest.importorskip("dm_control")
    gymnasium = pytest.importorskip("gymnasium")
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    return suite, assets


def _names_no_contact_parameter(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mbd.load_model(path)
    said = " ".join(str(w.message) for w in caught)
    for word in ("margin", "gap", "condim", "torsional", "rolling"):
        assert word not in said, (path, said)


def test_suite_files_load_their_contact_parameters():
    """gymnasium's hopper (margin, condim 1 and 3): the importer's warning names none of
    them (it names what is dropped; all 32 files: the slow test below)."""
    _, assets = _suite_files()
    _names_no_contact_parameter(os.path.join(assets, "hopper.xml"))


@pytest.mark.slow
def test_no_suite_file_names_a_contact_parameter():
    """All 32 files (dm_control's suite without lqr, gymnasium's assets): margin, gap,
    condim 1/4/6, priority are read, never named in the warning."""
    import glob

    suite, assets = _suite_files()
    files = sorted(f for f in glob.glob(os.path.join(suite, "*.xml"))
                   if os.path.basename(f) != "lqr.xml") + sorted(
        glob.glob(os.path.join(assets, "*.xml")))  # fmt: skip
    assert len(files) == 32
    for path in files:
        _names_no_contact_parameter(path)
