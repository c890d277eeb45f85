"""MJCF contacts: MuJoCo's collision filters, its solref/solimp and friction, mapped to
jaxmbd contact pairs (jaxmbd/mjcf/_contact.py), checked against MuJoCo itself: the geom
pairs it finds in contact, the penetration at which its ball rests and the speed at which
its ball bounces back."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

import jaxmbd as mbd  # noqa: E402
from jaxmbd.mjcf import UnsupportedFeatureWarning  # noqa: E402
from jaxmbd.mjcf import _contact as mc  # noqa: E402

# Every geom overlaps every other and the floor, so MuJoCo's contact list is exactly the set
# of pairs its filters let through: contype/conaffinity bits, the parent-child filter (a
# child of the world is not filtered), welded bodies, <exclude> and an explicit <pair>.
FILTERS_XML = """
<mujoco model="filters">
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" contype="1" conaffinity="3"/>
    <body name="a" pos="0 0 0.1">
      <freejoint/>
      <geom name="ga" type="sphere" size="0.2" mass="1"/>
      <body name="b" pos="0 0 0.05">
        <joint type="hinge" axis="0 1 0"/>
        <geom name="gb" type="capsule" size="0.1 0.2" mass="1"/>
        <body name="b_weld" pos="0.05 0 0">
          <geom name="gbw" type="sphere" size="0.2" mass="0.5"/>
        </body>
        <body name="c" pos="0 0 0.05">
          <joint type="hinge" axis="1 0 0"/>
          <geom name="gc" type="sphere" size="0.25" mass="1"/>
        </body>
      </body>
    </body>
    <body name="d" pos="0.05 0 0.1">
      <freejoint/>
      <geom name="gd" type="sphere" size="0.2" mass="1" contype="2" conaffinity="2"/>
    </body>
    <body name="e" pos="-0.05 0 0.1">
      <freejoint/>
      <geom name="ge" type="box" size="0.1 0.1 0.1" mass="1"/>
      <geom name="ge2" type="ellipsoid" size="0.05 0.05 0.08" pos="0 0 -0.05" mass="0.1"/>
    </body>
    <body name="f" pos="0 0.05 0.1">
      <freejoint/>
      <geom name="gf" type="sphere" size="0.2" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <exclude body1="a" body2="e"/>
    <pair geom1="gd" geom2="gc" friction="0.3 0.3 0.005 0.0001 0.0001"/>
  </contact>
</mujoco>
"""


def _names(m, pairs):
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)  # noqa: E731
    return {frozenset((name(g1), name(g2))) for g1, g2 in pairs}


def test_geom_pairs_are_mujocos_contacts(tmp_path):
    m = mujoco.MjModel.from_xml_string(FILTERS_XML)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    found = _names(m, [(c.geom1, c.geom2) for c in d.contact[: d.ncon]])
    ours = _names(m, [(p.geom1, p.geom2) for p in mc.geom_pairs(mujoco, m)])
    assert ours == found
    # the rules at work (the set above would pass for an empty scene too)
    assert frozenset(("ga", "gb")) not in ours  # parent-child
    assert frozenset(("gb", "gbw")) not in ours  # welded
    assert frozenset(("ga", "ge")) not in ours  # excluded
    assert frozenset(("gd", "ga")) not in ours  # bits 2 & 1
    assert frozenset(("gd", "floor")) in ours  # contype 2 & the floor's conaffinity 3
    assert frozenset(("gd", "gc")) in ours  # explicit pair
    assert not any("gf" in pair for pair in ours)  # collides with nothing
    assert frozenset(("ga", "gc")) in ours  # grandparent: not filtered

    path = tmp_path / "filters.xml"
    path.write_text(FILTERS_XML)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mbd.load_model(path)
    contacts = model.contacts
    # jaxmbd's pairs are the MuJoCo pairs between distinct jaxmbd bodies (b_weld is merged
    # into b), each with exactly the shapes of the geom pairs that collide
    pairs = {frozenset(n.split("/")) for n in contacts.pair_names}
    assert pairs == {
        frozenset(p)
        for p in [("a", "ground"), ("b", "ground"), ("c", "ground"), ("d", "ground"),
                  ("e", "ground"), ("a", "c"), ("c", "d"), ("b", "e"), ("c", "e")]
    }  # fmt: skip
    k = contacts.pair_names.index("b/ground")
    assert contacts.shapes[k] == ((0, 0), (1, 0))  # b's capsule and its welded sphere
    k = [set(n.split("/")) for n in contacts.pair_names].index({"c", "d"})
    assert float(contacts.friction[k]) == 0.3  # the <pair>'s own friction
    # b's capsule and welded sphere against e's box and ellipsoid (every pair collided:
    # nothing is named)
    k = [set(n.split("/")) for n in contacts.pair_names].index({"b", "e"})
    assert contacts.shapes[k] == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert not [w for w in caught if w.category is UnsupportedFeatureWarning]


@pytest.mark.parametrize(
    "solref, solimp_geom, condim, friction, cone",
    [
        ((0.02, 1.0), (0.9, 0.95, 0.001, 0.5, 2.0), 3, 1.0, "pyramidal"),  # MuJoCo's default
        ((0.02, 1.0), (0.9, 0.95, 0.001, 0.5, 2.0), 3, 0.4, "pyramidal"),  # c = 0.093
        ((0.02, 0.6), (0.9, 0.95, 0.001, 0.5, 2.0), 3, 0.4, "elliptic"),
        ((0.05, 1.0), (0.5, 0.9, 0.01, 0.5, 2.0), 1, 1.0, "pyramidal"),  # condim 1 (both)
        ((0.001, 1.0), (0.9, 0.95, 0.001, 0.5, 2.0), 3, 2.0, "pyramidal"),  # refsafe
        ((-5000.0, -100.0), (0.95, 0.95, 0.001, 0.5, 2.0), 3, 1.0, "elliptic"),  # direct
    ],
)
def test_rest_penetration_and_rebound_are_mujocos(solref, solimp_geom, condim, friction, cone):
    """MuJoCo's ball resting on its plane, and bouncing off it (no gravity, 1 m/s), against
    :func:`static_penetration` and :func:`restitution` of the geom pair's mixed numbers
    (the plane keeps MuJoCo's defaults, so solref and solimp are mixed half and half)."""
    geom = (
        f'solref="{solref[0]} {solref[1]}" solimp="{" ".join(map(str, solimp_geom))}" '
        f'condim="{condim}" friction="{friction} 0.005 0.0001"'
    )
    base = """<mujoco><option timestep="{h}" gravity="0 0 {g}" cone="{cone}"/><worldbody>
      <geom type="plane" size="1 1 .1" condim="{condim}" friction="0.01 0.005 0.0001"/>
      <body pos="0 0 {z}"><freejoint/><geom type="sphere" size="0.1" mass="2" {geom}/></body>
    </worldbody></mujoco>"""
    xml = dict(geom=geom, cone=cone, condim=condim)
    m = mujoco.MjModel.from_xml_string(base.format(h=0.002, g=-9.81, z=0.1, **xml))
    (pair,) = mc.geom_pairs(mujoco, m)
    assert pair.friction == friction and pair.condim == condim
    c = mc.cone_factor(cone, condim, friction)
    d = mujoco.MjData(m)
    for _ in range(2500):
        mujoco.mj_step(m, d)
    rest = 0.1 - d.qpos[2]
    assert abs(d.qvel[2]) < 5e-11
    predicted = mc.static_penetration(
        pair.solref, pair.solimp, gravity=9.81, timestep=0.002, cone_factor=c
    )
    assert predicted == pytest.approx(rest, rel=1e-9, abs=0)  # 1.8e-10

    # the rebound at h = 1e-5: MuJoCo's discrete stepping meets the continuous impact
    # within 2.0e-4 of e there (7.6e-4 ... 1.7e-3 at h = 2e-5, 1.9e-4 ... 4.4e-4 at 5e-6)
    m = mujoco.MjModel.from_xml_string(base.format(h=1e-5, g=0, z=0.1005, **xml))
    d = mujoco.MjData(m)
    d.qvel[2] = -1.0
    touched = False
    for _ in range(100000):  # until it has left the floor (1 s at most)
        mujoco.mj_step(m, d)
        touched = touched or d.qpos[2] < 0.1
        if touched and d.qpos[2] > 0.1001:
            break
    e = mc.restitution(tuple(pair.solref), tuple(pair.solimp), timestep=1e-5, cone_factor=c)
    assert d.qpos[2] > 0.1 and e == pytest.approx(d.qvel[2], rel=6e-4)


SPHERE_XML = """
<mujoco model="ball"><option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 .1" friction="0.6 0.005 0.0001"/>
    <body name="ball" pos="0 0 0.2"><freejoint/>
      <geom type="sphere" size="0.1" mass="2" friction="0.3 0.005 0.0001"
            solref="0.01 0.5" solimp="0.8 0.9 0.002 0.5 2"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_loaded_ball_rests_at_mujocos_penetration(tmp_path):
    """The MJCF ball falls onto the floor and settles in jaxmbd at MuJoCo's own rest
    penetration (the stiffness is calibrated to it), with MuJoCo's mixed friction
    (max(0.3, 0.6)) and a restitution from its solref."""
    path = tmp_path / "ball.xml"
    path.write_text(SPHERE_XML)
    model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    mujoco_rest = 0.1 - d.qpos[2]
    contacts = model.contacts
    assert float(contacts.friction[0]) == 0.6
    (pair,) = mc.geom_pairs(mujoco, m)
    c = mc.cone_factor("pyramidal", 3, 0.6)
    e = mc.restitution(tuple(pair.solref), tuple(pair.solimp), timestep=0.002, cone_factor=c)
    assert (
        float(contacts.restitution[0]) == pytest.approx(e, rel=ROUND_OFF, abs=0) and 0.05 < e < 0.5
    )
    slip = mc.slip_velocity(pair.solref, pair.solimp, friction=0.6, gravity=9.81, timestep=0.002)
    assert (
        float(contacts.slip_velocity[0]) == pytest.approx(slip, rel=ROUND_OFF, abs=0)
        and 1e-3 < slip < 1e-1
    )

    sol = mbd.simulate(model, t_end=1.5, h=2e-3)
    assert sol.result == mbd.RESULTS.successful
    ours = 0.1 - float(sol.r[-1, 0, 2])
    assert abs(float(sol.rdot[-1, 0, 2])) < 2e-11
    # one slot carries the whole weight: K delta^1.5 = m g, delta = MuJoCo's penetration
    assert ours == pytest.approx(mujoco_rest, rel=5e-9, abs=0)  # 9.0e-10


def test_disabled_contact_and_what_is_named(tmp_path):
    """<flag contact="disable"/> creates no pairs and names nothing about contact; a
    box-ellipsoid pair, condim 6 and a margin are read (nothing named); condim 1 pairs get
    no friction."""
    xml = """<mujoco><option><flag contact="{flag}"/></option>
      <default><geom condim="{condim}"/></default><worldbody>
      <geom type="plane" size="1 1 .1" margin="{margin}"/>
      <body name="a" pos="0 0 0.1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
      <body name="b" pos="0 0 0.35"><freejoint/><geom type="capsule" size=".05 .1" mass="1"/>
        <geom type="ellipsoid" size=".05 .05 .08" pos="0 0 .1" mass=".1"/></body>
    </worldbody></mujoco>"""
    path = tmp_path / "boxes.xml"

    def load(**values):
        path.write_text(xml.format(**values))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = mbd.load_model(path)
        return model, " ".join(str(w.message) for w in caught)

    model, said = load(flag="disable", condim=3, margin=0)
    assert model.contacts is None and "contact" not in said
    assert [s.kind for s in model.ground_shapes] == ["plane"]  # still drawn

    model, said = load(flag="enable", condim=6, margin=0.01)
    assert sorted(model.contacts.pair_names) == ["a/b", "a/ground", "b/ground"]
    assert not said  # condim 6, a margin and the box-ellipsoid pair are all read
    k = model.contacts.pair_names.index("a/b")
    assert model.contacts.shapes[k] == ((0, 0), (0, 1))  # a's box: b's capsule, ellipsoid
    margins = dict(zip(model.contacts.pair_names, np.asarray(model.contacts.margin), strict=True))
    assert margins == pytest.approx(
        {"a/ground": 0.01, "b/ground": 0.01, "a/b": 0.0}, rel=ROUND_OFF, abs=0
    )
    assert np.all(np.asarray(model.contacts.torsional_friction) == 0.005)  # MuJoCo's defaults
    assert np.all(np.asarray(model.contacts.rolling_friction) == 0.0001)

    model, said = load(flag="enable", condim=1, margin=0)
    assert np.all(np.asarray(model.contacts.friction) == 0.0)
    assert "condim" not in said and "margin" not in said


def test_standard_models_collide_as_in_mujoco():
    """dm_control's hopper: every geom pair MuJoCo collides is a shape pair of a jaxmbd
    contact pair and nothing else is (the floor, and the non-adjacent links)."""
    dm_control = pytest.importorskip("dm_control")
    from pathlib import Path

    path = Path(dm_control.__file__).parent / "suite" / "hopper.xml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    expected = set()
    for pair in mc.geom_pairs(mujoco, m):
        bodies = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[g]))
                  for g in (pair.geom1, pair.geom2)]  # fmt: skip
        expected.add(frozenset(b or "ground" for b in bodies))
    assert {frozenset(n.split("/")) for n in model.contacts.pair_names} == {
        frozenset("ground" if b == "world" else b for b in pair) for pair in expected
    }
    assert all(math.isfinite(float(k)) and k > 0 for k in model.contacts.stiffness)


def test_shape_pairs_are_checked_and_saved(tmp_path):
    """add_contact(shapes=...) names the shape pairs a contact pair checks: bad indices
    are clear errors, and the selection survives save_model / load_model."""
    b = mbd.ModelBuilder("two", gravity=(0, 0, -9.81))
    shapes = [mbd.geometry.sphere(0.1), mbd.geometry.box((0.1, 0.1, 0.1), collide=False),
              mbd.geometry.capsule(0.05, 0.2, pos=(0, 0, 0.2))]  # fmt: skip
    b.add_body("a", mass=1.0, inertia=[1e-2] * 3, r=(0, 0, 0.5), shapes=shapes)
    b.add_ground_plane()
    with pytest.raises(mbd.ModelError, match=r"'a' has no colliding shape 1 \(its colliding"):
        b.add_contact("a", "ground", friction=0.5, shapes=[(1, 0)])
    with pytest.raises(mbd.ModelError, match="'ground' has no colliding shape 3"):
        b.add_contact("a", "ground", friction=0.5, shapes=[(0, 3)])
    with pytest.raises(mbd.ModelError, match="expected pairs"):
        b.add_contact("a", "ground", friction=0.5, shapes=[0, 0])
    b.add_contact("a", "ground", friction=0.5, shapes=[(2, 0)])
    model = b.build()
    assert model.contacts.shapes == (((2, 0),),)
    (group,) = model.contacts.groups
    assert group.kind == "plane_capsule"  # the sphere is not checked
    path = mbd.save_model(model, tmp_path / "two.json")
    again = mbd.load_model(path)
    assert again.contacts.shapes == (((2, 0),),)
    assert again.contacts.groups[0].kind == "plane_capsule"
