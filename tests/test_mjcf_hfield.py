"""Height fields (MJCF ``hfield`` geoms) against MuJoCo C: contacts (``mj_forward``'s
``data.contact``; nativeccd at ``ccd_tolerance`` 1e-10) and ray distances
(``mj_rayHfield``, a rangefinder's ``sensordata``) on a small synthetic field turned and
shifted; a brute-force penetration depth where MuJoCo's box contact is not the deepest
overlap; and dm_control's quadruped, whose 201 x 201 terrain (80 000 prisms) loads as
authored, its terrain contacts and rangefinders on a random terrain (slow)."""

from __future__ import annotations

import dataclasses
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import same_sensor_options
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.contact.height_field import HeightFieldGroup, field_slots, window_prisms
from jaxmbd.forces import BodyState
from jaxmbd.geometry._ray_cast import ray_hfield
from jaxmbd.joint_space.observe import read_sensors
from jaxmbd.tree.kinematics import poses

mujoco = pytest.importorskip("mujoco")

ROWS, COLS = 5, 6
HEIGHTS = np.random.default_rng(3).uniform(0.0, 1.0, ROWS * COLS)

# a 5 x 6 field, turned and shifted, and a sphere, a capsule and a box over it that
# collide with the field only (contype 2, conaffinity 1 against the field's 1 and 2); a
# rangefinder on the sphere looking down
HFIELD_XML = f"""
<mujoco model="hfield">
  <option ccd_tolerance="1e-10" ccd_iterations="500"/>
  <asset>
    <hfield name="terrain" nrow="{ROWS}" ncol="{COLS}" size="1 1.2 .3 .1"
            elevation="{" ".join(f"{h:.6f}" for h in HEIGHTS)}"/>
  </asset>
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="terrain" pos=".1 .2 0" euler="0 0 20"
          contype="1" conaffinity="2"/>
    <body name="ball" pos="0 0 1"><freejoint/><geom type="sphere" size=".15"/>
      <site name="eye" pos="0 0 -.16" zaxis=".3 .2 -1"/></body>
    <body name="pill" pos="0 0 2"><freejoint/><geom type="capsule" size=".05 .2"/></body>
    <body name="brick" pos="0 0 3"><freejoint/><geom type="box" size=".1 .08 .06"/></body>
  </worldbody>
  <sensor><rangefinder name="range" site="eye"/></sensor>
</mujoco>
"""


def _terrain_contacts(m, d, terrain):
    """[(geom, dist, pos, normal up from the field)] of MuJoCo's contacts with the field."""
    out = []
    for c in d.contact[: d.ncon]:
        if terrain in (c.geom1, c.geom2):
            other, sign = (c.geom2, 1.0) if c.geom1 == terrain else (c.geom1, -1.0)
            out.append((int(other), float(c.dist), np.array(c.pos), sign * np.array(c.frame[:3])))
    return out


def _field_collide(model):
    """(jit: qpos -> (gap, point, normal) of the height field's slots only, the jaxmbd
    body (body_i) of each of those slots)."""
    element = model.contacts
    fields = tuple(g for g in element.groups if isinstance(g, HeightFieldGroup))
    element = dataclasses.replace(element, groups=fields)

    def collide(qpos):
        p = poses(model.tree, qpos)
        zero = jnp.zeros_like(p.c)
        return element.collide(BodyState(p.c, p.R, zero, zero))

    return jax.jit(collide), element._slot_bodies()[0]


def _lower_until(m, d, qpos, a, deepest, depth=0.003):
    """qpos with its free joint at address ``a`` lowered until the deepest contact that
    ``deepest(qpos)`` gives is ``depth`` (bisection)."""
    lo, hi = qpos[a + 2] - 1.0, qpos[a + 2] + 1.0
    for _ in range(60):
        qpos[a + 2] = 0.5 * (lo + hi)
        lo, hi = (qpos[a + 2], hi) if deepest(qpos) < -depth else (lo, qpos[a + 2])
    qpos[a + 2] = hi
    return qpos


def _random_poses(m, d, rng, bodies, terrain):
    """The bodies (free joints 0.. in order) over the field at random places and
    attitudes, each lowered until its deepest contact with the field is 3 mm."""
    qpos = np.array(m.qpos0)
    for b in range(bodies):
        a = 7 * b
        qpos[a : a + 3] = [-0.6 + 0.6 * b, rng.uniform(-0.6, 0.6), 0.5]
        q = rng.normal(size=4)
        qpos[a + 3 : a + 7] = q / np.linalg.norm(q)
    for b in range(bodies):

        def deepest(qpos, b=b):
            d.qpos[:] = qpos
            mujoco.mj_forward(m, d)
            mine = [c[1] for c in _terrain_contacts(m, d, terrain)
                    if m.geom_bodyid[c[0]] == b + 1]  # fmt: skip
            return min(mine, default=1.0)

        qpos = _lower_until(m, d, qpos, 7 * b, deepest)
    d.qpos[:] = qpos
    mujoco.mj_forward(m, d)
    return qpos


def _load_field(tmp_path_factory, xml):
    path = tmp_path_factory.mktemp("hfield") / "hfield.xml"
    path.write_text(xml)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        # the box's pair, which MuJoCo's constraint model leaves out and names
        warnings.filterwarnings("ignore", message=".*contact='soft', this file's default")
        model = mbd.load_model(path, keyframe=None)
    return model, mujoco.MjModel.from_xml_path(str(path))


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    return _load_field(tmp_path_factory, HFIELD_XML)


@pytest.fixture(scope="module")
def native_field(tmp_path_factory):
    """The field at MuJoCo's default ccd options (ccd_iterations 35, ccd_tolerance 1e-6),
    whose prisms the soft model collides by the port of MuJoCo's native GJK and EPA, with
    an ellipsoid (EPA's round case, where MuJoCo stops at its tolerance) after the capsule."""
    default = HFIELD_XML.replace('<option ccd_tolerance="1e-10" ccd_iterations="500"/>', "")
    brick = '    <body name="brick"'
    egg = (
        '    <body name="egg" pos="0 0 2.5"><freejoint/>'
        '<geom type="ellipsoid" size=".12 .09 .07"/></body>\n'
    )
    default = default.replace(brick, egg + brick)
    assert default.count("egg") == 1 and "ccd" not in default
    return _load_field(tmp_path_factory, default)


def _same_contacts(ours, theirs, gap, point, normal, tol=(1e-12, 1e-10, 1e-12)) -> int:
    """Our penetrating slots ``ours`` are MuJoCo's contacts ``theirs`` (geom, dist, pos,
    normal), each matched to our nearest point: distance, normal and point to ``tol``
    (the slow quadruped's, not measured here: 1e-12, 1e-10, 1e-12). Returns how many were
    compared."""
    assert len(ours) == len(theirs) >= 1
    for _, dist, pos, nrm in theirs:
        k = ours[np.argmin(np.linalg.norm(point[ours] - pos, axis=1))]
        assert abs(gap[k] - dist) < tol[0]
        assert np.abs(normal[k] - nrm).max() < tol[1]
        assert np.abs(point[k] - pos).max() < tol[2]
    return len(theirs)


def test_hfield_contacts_are_mujocos(field):
    """The sphere and the capsule lowered into the field at 3 random places and
    attitudes: every prism each penetrates gives one contact, as MuJoCo's (the same
    number), depth and point to round-off (5.6e-17, 2.2e-16 measured), normal to 1e-13
    (1.8e-14) of MuJoCo's."""
    model, m = field
    assert sum(j == model.nb for _, j in model.contacts.pairs) == 3  # each body - the field
    assert {g.kind for g in model.contacts.groups} == {"hfield_sphere", "hfield_capsule",
                                                       "hfield_box"}  # fmt: skip
    d = mujoco.MjData(m)
    model = dataclasses.replace(model, forces=tuple(
        f if f is not model.contacts else dataclasses.replace(f, groups=tuple(
            g for g in f.groups if g.kind != "hfield_box")) for f in model.forces))  # fmt: skip
    collide, body = _field_collide(model)
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(3):
        qpos = _random_poses(m, d, rng, 2, 0)
        gap, point, normal = (np.asarray(x) for x in collide(jnp.asarray(qpos)))
        for b in range(2):
            theirs = [c for c in _terrain_contacts(m, d, 0) if m.geom_bodyid[c[0]] == b + 1]
            ours = np.flatnonzero((body == b) & (gap < 0))
            tol = (ROUND_OFF, 1e-13, ROUND_OFF)
            seen += _same_contacts(ours, theirs, gap, point, normal, tol)
    assert seen >= 8


@pytest.mark.parametrize("fixture", ["field", "native_field"])
def test_soft_model_field_contacts_are_mujocos(fixture, request):
    """MuJoCo's constraint model (``contact="soft"``, the file's default) collides the field
    as ``mj_collision`` does: at random poses (each body 3 mm deep), the same number of
    contacts, each of the sphere and the capsule with MuJoCo's distance and point
    (round-off) and frame (1e-13, 1.8e-14 measured; 1e-11 at the default ccd options, 1.4e-12
    measured); the box's pair is left out and named by the loader.

    At the file's ccd options (1e-10, 500 iterations) jaxmbd's collider converges. At
    MuJoCo's defaults (35 iterations, 1e-6) the prisms go through the port of MuJoCo's native
    CCD, which stops on the tolerance as MuJoCo does: the ellipsoid (EPA's round case)
    agrees in the median to 1e-11 in distance (measured over 10 poses: 3.4e-13) and 1e-9 in
    normal (3.1e-11), where the converged collider parts from MuJoCo 4.0 by 4.5e-9 and
    2.1e-8 (the port is of MuJoCo 3.12's GJK, which 4.0 changed: single contacts differ
    by up to the tolerance, 5.6e-7 in distance, 8.5e-3 in normal)."""
    from jaxmbd.soft_constraints.model import collide_groups

    model, m = request.getfixturevalue(fixture)
    native = fixture == "native_field"
    groups = [g for g in model.constraint_model.contacts if g.window]
    # sphere, capsule (and the ellipsoid); no box
    assert sorted(int(g.type2) for g in groups) == ([2, 3, 4] if native else [2, 3])
    assert all(g.native_ccd == native for g in groups)
    collide = jax.jit(lambda q: collide_groups(groups, *(lambda p: (p.x, p.R))(
        poses(model.tree, q))))  # fmt: skip
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    seen, round_errors = 0, []
    for _ in range(6 if native else 3):
        qpos = _random_poses(m, d, rng, len(groups), 0)
        found = collide(jnp.asarray(qpos))
        for group, contacts in zip(groups, found, strict=True):
            geom = group.geoms[0][1]
            theirs = [c for c in _terrain_contacts(m, d, 0) if c[0] == geom]
            valid = np.asarray(contacts.valid)[0]
            dist, pos = np.asarray(contacts.dist)[0][valid], np.asarray(contacts.pos)[0][valid]
            frame = np.asarray(contacts.frame)[0][valid]
            assert len(dist) == len(theirs) >= 1
            for _, depth, point, normal in theirs:
                k = np.argmin(np.linalg.norm(pos - point, axis=1))
                errors = (abs(dist[k] - depth), np.abs(frame[k, 0] - normal).max())
                if group.type2 == 4:  # the ellipsoid
                    round_errors.append(errors)
                    continue
                assert errors[0] < ROUND_OFF
                assert np.abs(pos[k] - point).max() < ROUND_OFF
                assert errors[1] < (1e-11 if native else 1e-13)
            seen += len(theirs)
    assert seen >= 8
    if native:
        assert len(round_errors) >= 6
        dist_median, normal_median = np.median(round_errors, axis=0)
        assert dist_median < 1e-11 and normal_median < 1e-9, (dist_median, normal_median)


@pytest.mark.parametrize("fixture", ["field", "native_field"])
def test_any_contact_is_mujocos_ncon_over_the_field(fixture, request):
    """:func:`jaxmbd.envs._suite.in_contact` (the live prisms a block at a time, the first
    block that touches ending the search; GJK alone at the file's ccd options, MuJoCo's
    native CCD at the defaults) is MuJoCo's ``ncon > 0`` for each geom at 3 random poses:
    each body alone sunk 20 cm (its core in the prisms) or lifted 0-5 cm from 3 mm deep,
    across the surface (both answers seen for each body), the others far above. Deciding by
    overlapping cores alone (the geoms' radii left out) or by GJK's gap alone (overlapping
    cores have none) fails."""
    from jaxmbd.envs._suite import in_contact

    model, m = request.getfixturevalue(fixture)
    n = 3 if fixture == "native_field" else 2
    d = mujoco.MjData(m)
    touching = jax.jit(lambda q: in_contact(model, q))
    rng = np.random.default_rng(1)
    seen = {b: set() for b in range(n)}
    for _ in range(3):
        qpos = _random_poses(m, d, rng, n, 0)
        for b in range(n):
            for lift in (-0.2, 0.0, 0.001, 0.002, 0.0027, 0.0033, 0.004, 0.01, 0.05):
                q = qpos.copy()
                for other in set(range(n)) - {b}:
                    q[7 * other + 2] += 2.0
                q[7 * b + 2] += lift
                d.qpos[:] = q
                mujoco.mj_forward(m, d)
                theirs = d.ncon > 0
                assert bool(touching(jnp.asarray(q))) is theirs, (b, lift)
                seen[b].add(theirs)
    assert all(answers == {False, True} for answers in seen.values())


def test_hfield_rays_are_mujocos(field, tmp_path):
    """:func:`jaxmbd.geometry._ray_cast.ray_hfield` against ``mj_rayHfield`` on 1000 random rays
    (about a quarter hit: the top, the side walls, the base box), to round-off; and the
    sphere's rangefinder against ``sensordata`` at 4 random poses over the field
    (round-off). A model file keeps the field's shape and the rangefinder's elevations."""
    model, m = field
    same_sensor_options(model, tmp_path)
    loaded = mbd.load_model(mbd.save_model(model, tmp_path / "field.json"))
    assert loaded.ground_shapes == model.ground_shapes
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    data = np.asarray(m.hfield_data, dtype=np.float64).reshape(ROWS, COLS) * m.hfield_size[0][2]
    size = jnp.asarray(m.hfield_size[0][[0, 1, 3]])
    pos, R = d.geom_xpos[0], d.geom_xmat[0].reshape(3, 3)
    rays = jax.jit(jax.vmap(lambda p, v: ray_hfield(
        size, R.T @ (p - pos), R.T @ v, heights=jnp.asarray(data))))  # fmt: skip
    rng = np.random.default_rng(0)
    P = rng.uniform([-1.5, -1.5, -0.3], [1.5, 1.5, 1.0], size=(1000, 3))
    V = rng.normal(size=(1000, 3))
    ours = np.asarray(rays(P, V))
    theirs = np.array([mujoco.mj_rayHfield(m, d, 0, P[k], V[k], None) for k in range(1000)])
    assert (theirs >= 0).sum() > 200
    np.testing.assert_allclose(ours, theirs, atol=ROUND_OFF, rtol=0)
    read = jax.jit(lambda q: read_sensors(model, q, jnp.zeros(m.nv), names=("range",)))
    hits = 0
    for _ in range(4):
        qpos = np.array(m.qpos0)
        qpos[:3] = [*rng.uniform(-0.8, 0.8, 2), rng.uniform(0.4, 1.0)]
        q = np.array([1.0, *rng.normal(scale=0.2, size=3)])
        qpos[3:7] = q / np.linalg.norm(q)
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        theirs = d.sensordata[0]
        hits += theirs >= 0
        assert abs(float(read(jnp.asarray(qpos))["range"][0]) - theirs) < ROUND_OFF
    assert hits >= 3


def _penetration(P, B):
    """The penetration depth of two convex point sets: the least overlap along a unit
    direction n, max P.n - min B.n (scipy's Nelder-Mead from 20 starts)."""
    from scipy.optimize import minimize

    def overlap(u):
        n = u / np.linalg.norm(u)
        return (P @ n).max() - (B @ n).min()

    starts = np.random.default_rng(1).normal(size=(20, 3))
    options = dict(xatol=1e-12, fatol=1e-15, maxiter=4000)
    return min(minimize(overlap, x, method="Nelder-Mead", options=options).fun for x in starts)


def _prisms(m, d, g):
    """The global vertices (6, 3) of every prism of height field geom g, in MuJoCo's cell
    order (rows, then columns, two per cell)."""
    h = int(m.geom_dataid[g])
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    size = m.hfield_size[h]
    z = np.asarray(m.hfield_data, dtype=np.float64).reshape(nrow, ncol) * size[2]
    dx, dy = 2 * size[0] / (ncol - 1), 2 * size[1] / (nrow - 1)
    R, p = d.geom_xmat[g].reshape(3, 3), d.geom_xpos[g]
    out = []
    for r in range(nrow - 1):
        for c in range(ncol - 1):
            for tri in (((r + 1, c), (r, c), (r + 1, c + 1)), ((r, c), (r + 1, c + 1), (r, c + 1))):
                top = [(dx * j - size[0], dy * i - size[1], z[i, j]) for i, j in tri]
                bottom = [(x, y, -size[3]) for x, y, _ in top]
                out.append(np.array(top + bottom) @ R.T + p)
    return out


@pytest.mark.slow  # the brute-force depths: minutes
def test_hfield_box_depths_are_the_penetration(field):
    """The box lowered into the field at 4 random places and attitudes: as many contacts
    as MuJoCo's, each the brute-force penetration depth of the box's corners and a prism's
    vertices (1e-8; MuJoCo's box contacts can be shallower than that overlap)."""
    model, m = field
    d = mujoco.MjData(m)
    collide, body = _field_collide(model)
    g = int(m.body_geomadr[3])
    rng = np.random.default_rng(2)
    for _ in range(4):
        qpos = _random_poses(m, d, rng, 3, 0)
        prisms = _prisms(m, d, 0)  # the field's pose, once mj_forward has placed it
        gap, point, _ = (np.asarray(x) for x in collide(jnp.asarray(qpos)))
        theirs = [c for c in _terrain_contacts(m, d, 0) if c[0] == g]
        ours = np.flatnonzero((body == 2) & (gap < 0))
        assert len(ours) == len(theirs) >= 1
        R, size = d.geom_xmat[g].reshape(3, 3), m.geom_size[g]
        corners = (np.array(np.meshgrid(*[[-1, 1]] * 3)).reshape(3, -1).T * size) @ R.T
        corners += d.geom_xpos[g]
        for k in ours:  # the prism whose overlap is the slot's depth
            depths = [_penetration(P, corners) for P in prisms
                      if np.linalg.norm(P.mean(0) - point[k]) < 0.6]  # fmt: skip
            assert min(abs(gap[k] + x) for x in depths) < 1e-8


# ----------------------------------------------------------------------------- quadruped


@pytest.fixture(scope="module")
def quadruped_terrain(tmp_path_factory):
    """dm_control's quadruped on a random terrain (its height field's data, as its escape
    task sets it): bumps of up to 2 cm (MuJoCo scales the data to [0, 1] times the 5 m of
    size[2]: one corner at 1)."""
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "quadruped.xml")
    spec = mujoco.MjSpec.from_file(path)
    h = spec.hfields[0]
    data = np.random.default_rng(0).uniform(0, 0.004, (h.nrow, h.ncol))
    data[0, 0] = 1.0
    h.userdata = list(data.reshape(-1))
    out = tmp_path_factory.mktemp("quadruped") / "quadruped_terrain.xml"
    out.write_text(spec.to_xml())
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(out, keyframe=None)
    m = mujoco.MjModel.from_xml_path(str(out))
    m.opt.ccd_tolerance, m.opt.ccd_iterations = 1e-10, 500
    return model, m


def _quadruped_on_terrain(m, d, terrain, rng, count):
    """``count`` quadruped states (qpos) at random places, headings and joint angles, each
    lowered until its deepest terrain contact is 3 mm (``d`` left at the last of them)."""
    for _ in range(count):
        qpos = np.array(m.qpos0)
        qpos[:2] = rng.uniform(-3, 3, 2)
        quat = np.zeros(4)
        mujoco.mju_euler2Quat(quat, np.array([*rng.normal(scale=0.15, size=2),
                                              rng.uniform(0, 2 * np.pi)]), "xyz")  # fmt: skip
        qpos[3:7] = quat
        for j in np.flatnonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_HINGE):
            lo, hi = m.jnt_range[j]
            qpos[m.jnt_qposadr[j]] = rng.uniform(lo, hi)

        def deepest(qpos):
            d.qpos[:] = qpos
            mujoco.mj_forward(m, d)
            return min([c[1] for c in _terrain_contacts(m, d, terrain)], default=1.0)

        qpos = _lower_until(m, d, qpos, 0, deepest)
        deepest(qpos)
        yield qpos


def test_quadruped_loads_as_authored():
    """dm_control's quadruped, terrain and rangefinders included: no warning (both jaxmbd's
    contact and MuJoCo's constraint model collide the terrain with every geom over it)."""
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "quadruped.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    fields = [g for g in model.constraint_model.contacts if g.window]
    assert sum(len(g.body1) for g in fields) == 20  # 12 capsules, 5 spheres, 2 + 1
    kinds = {g.kind: g.window for g in model.contacts.groups if isinstance(g, HeightFieldGroup)}
    # windows of cells (0.3 m) under each geom: not the field's 40 000 cells
    assert kinds == {"hfield_sphere": (2, 2), "hfield_capsule": (3, 3),
                     "hfield_ellipsoid": (3, 3), "hfield_cylinder": (2, 2)}  # fmt: skip


def test_a_fields_partners_of_every_kind_collide_in_one_program(monkeypatch):
    """MuJoCo's constraint model collides the quadruped's terrain with its 20 partners
    (spheres under two condims, capsules, an ellipsoid, cylinders) in one program: one
    window for the field, one traced prism search (a program per kind and condim, five,
    made the file's run compile in 161 s against 92 s, 470k HLO lines against 334k)."""
    from jaxmbd.soft_constraints import model as soft_model

    dm_control = pytest.importorskip("dm_control")
    model = mbd.load_model(os.path.join(os.path.dirname(dm_control.__file__), "suite",
                                        "quadruped.xml"))  # fmt: skip
    groups = model.constraint_model.contacts
    fields = [g for g in groups if g.window]
    assert len(fields) == 5 and {g.window for g in fields} == {(3, 3)}
    traced, windows = [], []

    def counted(*args, **kwargs):
        traced.append(args[0])
        return field_slots(*args, **kwargs)

    def counted_windows(*args, **kwargs):
        windows.append(args[0])
        return window_prisms(*args, **kwargs)

    monkeypatch.setattr(soft_model, "field_slots", counted)
    monkeypatch.setattr(soft_model, "window_prisms", counted_windows)
    p = poses(model.tree, jnp.asarray(model.tree.qpos_init))
    for gather in (True, False):
        found = jax.eval_shape(
            lambda x, R, gather=gather: soft_model.collide_groups(groups, x, R, gather=gather),
            p.x, p.R,
        )  # fmt: skip
        for group, contacts in zip(groups, found, strict=True):
            assert contacts.dist.shape == (len(group.body1), group.slots)
    assert len(windows) == 1  # the gathered prisms: one window program for the 20 partners
    assert len(traced) == 1 and len(traced[0]) == 4  # sphere, capsule, ellipsoid, cylinder


@pytest.mark.slow  # compiles the field's prism search: a minute
def test_quadruped_soft_terrain_contacts_are_mujocos(quadruped_terrain):
    """MuJoCo's constraint model's terrain contacts of the quadruped (its partners of four
    geom types in one program) at 3 random places, headings and joint angles, lowered until
    the deepest is 3 mm: MuJoCo's (number, depth and point 1e-12, normal 1e-10)."""
    from jaxmbd.soft_constraints.model import collide_groups

    model, m = quadruped_terrain
    d = mujoco.MjData(m)
    terrain = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "terrain")
    groups = [g for g in model.constraint_model.contacts if g.window]

    @jax.jit
    def collide(qpos):
        p = poses(model.tree, qpos)
        found = collide_groups(groups, p.x, p.R)
        return (jnp.concatenate([c.dist.reshape(-1) for c in found]),
                jnp.concatenate([c.pos.reshape(-1, 3) for c in found]),
                jnp.concatenate([c.frame[..., 0, :].reshape(-1, 3) for c in found]),
                jnp.concatenate([c.valid.reshape(-1) for c in found]))  # fmt: skip

    seen = 0
    for qpos in _quadruped_on_terrain(m, d, terrain, np.random.default_rng(4), 3):
        dist, pos, normal, valid = (np.asarray(x) for x in collide(jnp.asarray(qpos)))
        theirs = _terrain_contacts(m, d, terrain)
        assert int(valid.sum()) == len(theirs) >= 1
        dist, pos, normal = dist[valid], pos[valid], normal[valid]
        for _, depth, point, up in theirs:
            k = np.argmin(np.linalg.norm(pos - point, axis=1))
            assert abs(dist[k] - depth) < 1e-12
            assert np.abs(pos[k] - point).max() < 1e-12
            assert np.abs(normal[k] - up).max() < 1e-10
        seen += len(theirs)
    assert seen >= 4


@pytest.mark.slow  # compiles every narrow phase against the field: minutes
def test_quadruped_terrain_contacts_are_mujocos(quadruped_terrain):
    """The quadruped at 4 random places, headings and joint angles, lowered until its
    deepest terrain contact is 3 mm: its terrain contacts are MuJoCo's (number, depth
    1e-12, normal 1e-10, point 1e-12)."""
    model, m = quadruped_terrain
    d = mujoco.MjData(m)
    terrain = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "terrain")
    collide, _ = _field_collide(model)
    seen = 0
    for qpos in _quadruped_on_terrain(m, d, terrain, np.random.default_rng(1), 4):
        gap, point, normal = (np.asarray(x) for x in collide(jnp.asarray(qpos)))
        theirs = _terrain_contacts(m, d, terrain)
        ours = np.flatnonzero(gap < 0)
        seen += _same_contacts(ours, theirs, gap, point, normal)
    assert seen >= 4


@pytest.mark.slow  # 20 ray tests over a 201 x 201 field: minutes to compile
def test_quadruped_rangefinders_see_the_terrain(quadruped_terrain):
    """The 20 rangefinders at 4 random poses over the terrain against ``sensordata``
    (1e-12), some of them hitting the terrain."""
    model, m = quadruped_terrain
    d = mujoco.MjData(m)
    names = tuple(n for n in model.sensors.sensor_names if n.startswith("rf_"))
    read = jax.jit(lambda q: read_sensors(model, q, jnp.zeros(m.nv), names=names))
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(4):
        qpos = np.array(m.qpos0)
        qpos[:3] = [*rng.uniform(-20, 20, 2), rng.uniform(0.3, 3)]
        q = rng.normal(size=4)
        qpos[3:7] = q / np.linalg.norm(q)
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        ours = read(jnp.asarray(qpos))
        for n in names:
            k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, n)
            theirs = d.sensordata[m.sensor_adr[k]]
            hits += theirs >= 0
            assert abs(float(ours[n][0]) - theirs) < 1e-12
    assert hits >= 10


BOWL = 9  # a 9 x 9 bowl, z = 0.1 (x^2 + y^2) over [-1, 1]^2
_AXIS = np.linspace(-1, 1, BOWL)
_BOWL_HEIGHTS = " ".join(f"{x * x + y * y:.6f}" for y in _AXIS for x in _AXIS)
BOWL_XML = f"""
<mujoco model="bowl">
  <asset>
    <hfield name="bowl" nrow="{BOWL}" ncol="{BOWL}" size="1 1 .2 .1"
            elevation="{_BOWL_HEIGHTS}"/>
  </asset>
  <worldbody>
    <geom name="bowl" type="hfield" hfield="bowl"/>
    <body name="brick" pos=".02 -.01 .2" euler="0 0 15"><freejoint/>
      <geom type="box" size=".1 .1 .05" density="500"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow  # a contact run: minutes to compile
def test_brick_comes_to_rest_in_a_bowl_as_in_mujoco(tmp_path):
    """A brick dropped into a bowl-shaped field (its lower face on four prisms) and run for
    1.5 s in both engines (MuJoCo's own soft contact, Euler at 2 ms; jaxmbd's compliant
    contact with the importer's stiffness): it comes to rest at MuJoCo's place (2 mm in x,
    y) and height within 2 mm (MuJoCo's soft contacts each sink its rest penetration
    whatever their number; the Hertz law, calibrated on one contact, sinks 4^(-2/3) of it
    on each of four), and the field's contact forces carry its weight (1e-6)."""
    path = tmp_path / "bowl.xml"
    path.write_text(BOWL_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        # the box's pair, which MuJoCo's constraint model (a file's default) leaves out and
        # names: the brick runs jaxmbd's compliant contact, which this test calibrates
        warnings.filterwarnings("ignore", message=".*contact='soft', this file's default")
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    h, n = float(m.opt.timestep), 750
    for _ in range(n):
        mujoco.mj_step(m, d)
    sol = mbd.simulate(model, t_end=n * h, h=h, contact="compliant")
    qpos = np.asarray(sol.qpos[-1])
    slots = sol.contact
    weight = float(model.mass[0]) * 9.81
    up = np.asarray(slots.normal[-1])[:, 2] * np.asarray(slots.normal_force[-1])
    up += np.asarray(slots.tangential_force[-1])[:, 2]  # friction on the slopes
    found = dict(z=qpos[2] - d.qpos[2], xy=np.abs(qpos[:2] - d.qpos[:2]).max(),
                 weight=up.sum() / weight - 1, contacts=(int(np.sum(up > 0)), d.ncon))  # fmt: skip
    assert abs(found["z"]) < 2e-3, found
    assert found["xy"] < 2e-3, found
    assert abs(found["weight"]) < 1e-6, found
