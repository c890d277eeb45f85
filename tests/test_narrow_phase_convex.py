"""Narrow phases of capsule-box, the cylinder pairs and convex meshes, against independent
references: a brute-force signed distance (the support functions maximised over a dense
set of directions and polished by scipy), MuJoCo's ``mj_collision`` contact lists and the
closed form of a mesh resting on a plane in joint coordinates.

The brute force: for convex A and B, the signed distance (negative: penetration depth) is
max over unit n of -(h_A(n) + h_B(-n)), h the support function (the separating-axis
theorem for convex sets); the maximiser is the normal from A to B.

MuJoCo's capsule-box (mjraw_CapsuleBox) and sphere-cylinder are closed forms: compared to
1e-8. Its cylinder and mesh pairs are iterative (nativeccd: GJK, EPA; tolerance
``ccd_tolerance``, 1e-6 by default): compared with the tolerance set to 1e-10, where
MuJoCo's depths agree with the brute force to about 1e-10 and its normals to about 1e-5.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.spatial.transform import Rotation
from tolerances import ROUND_OFF

import jaxmbd as mbd
import jaxmbd.geometry as G
from jaxmbd.contact.narrow_phase import COLLIDE, pair_kind, shape_size
from jaxmbd.mjcf import UnsupportedFeatureWarning

mujoco = pytest.importorskip("mujoco")

SIZES = {
    "sphere": (0.07,),
    "capsule": (0.05, 0.2),
    "cylinder": (0.1, 0.15),
    "box": (0.1, 0.15, 0.08),
    "ellipsoid": (0.11, 0.07, 0.05),
}
# a convex mesh: 14 points on an ellipsoid (the convex hull: every one a vertex)
_RNG = np.random.default_rng(7)
_U = _RNG.normal(size=(14, 3))
MESH_VERTICES = _U / np.linalg.norm(_U, axis=1, keepdims=True) * np.array([0.12, 0.09, 0.07])


def _shape(kind, s):
    return {
        "sphere": lambda: G.sphere(s[0]),
        "capsule": lambda: G.capsule(s[0], 2 * s[1]),
        "cylinder": lambda: G.cylinder(s[0], 2 * s[1]),
        "box": lambda: G.box(2 * np.asarray(s)),
        "ellipsoid": lambda: G.ellipsoid(2 * np.asarray(s)),
        "mesh": lambda: G.mesh(s, [[0, 1, 2]]),
    }[kind]()


def _rot(rng):
    return Rotation.random(random_state=rng).as_matrix()


# ----------------------------------------------------------------------------- ours


BATCH = 8  # poses per call (padded): one compiled program per pair kind


def _ours(k1, s1, k2, s2, pa, Ra, pb, Rb):
    """(gap, point, normal from 1 to 2) of every slot, for stacked poses (n, ...)."""
    count = len(pa)
    chunks = []
    for start in range(0, count, BATCH):
        part = [np.asarray(x[start : start + BATCH]) for x in (pa, Ra, pb, Rb)]
        short = BATCH - len(part[0])
        part = [np.concatenate([x, np.repeat(x[:1], short, axis=0)]) for x in part]
        chunks.append([x[: BATCH - short] for x in _ours_batch(k1, s1, k2, s2, *part)])
    return tuple(np.concatenate(parts) for parts in zip(*chunks, strict=True))


def _ours_batch(k1, s1, k2, s2, pa, Ra, pb, Rb):
    kind, swapped = pair_kind(k1, k2)
    sa, sb = shape_size(_shape(k1, s1)), shape_size(_shape(k2, s2))
    n = len(pa)
    a = (jnp.asarray(pa), jnp.asarray(Ra), jnp.broadcast_to(sa, (n,) + sa.shape))
    b = (jnp.asarray(pb), jnp.asarray(Rb), jnp.broadcast_to(sb, (n,) + sb.shape))
    args = (*b, *a) if swapped else (*a, *b)
    gap, point, normal = (np.asarray(x) for x in _collide(kind)(*args))
    return gap, point, -normal if swapped else normal


_COMPILED = {}


def _collide(kind):
    if kind not in _COMPILED:
        _COMPILED[kind] = jax.jit(jax.vmap(COLLIDE[kind]))
    return _COMPILED[kind]


def _touching_poses(k1, s1, k2, s2, count, offset, seed):
    """Random orientations, B's centre along a random direction at the distance where the
    two touch (bisection on the gap, to 6e-5 of the unit bracket) plus ``offset``
    (a number, or a tuple of them: one pose set per offset from the one bisection)."""
    rng = np.random.default_rng(seed)
    Ra = np.stack([_rot(rng) for _ in range(count)])
    Rb = np.stack([_rot(rng) for _ in range(count)])
    u = rng.normal(size=(count, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    pa = np.zeros((count, 3))
    lo, hi = np.zeros(count), np.ones(count)
    for _ in range(14):  # one collider call a step: 6e-5 m is close enough to touching
        mid = 0.5 * (lo + hi)
        inside = _ours(k1, s1, k2, s2, pa, Ra, mid[:, None] * u, Rb)[0][:, 0] < 0
        lo, hi = np.where(inside, mid, lo), np.where(inside, hi, mid)
    if isinstance(offset, tuple):
        return [(pa, Ra, (lo + d)[:, None] * u, Rb) for d in offset]
    return pa, Ra, (lo + offset)[:, None] * u, Rb


# ----------------------------------------------------------------------------- brute force


def _support_value(kind, s, p, R, n):
    """h(n) = max over the shape of x . n, for directions n (k, 3)."""
    local = n @ R
    norm = np.linalg.norm(n, axis=-1)
    if kind == "sphere":
        return n @ p + s[0] * norm
    if kind == "capsule":
        return n @ p + s[0] * norm + s[1] * np.abs(local[..., 2])
    if kind == "box":
        return n @ p + np.abs(local) @ np.asarray(s)
    if kind == "cylinder":
        return n @ p + s[0] * np.linalg.norm(local[..., :2], axis=-1) + s[1] * np.abs(local[..., 2])
    if kind == "ellipsoid":
        return n @ p + np.linalg.norm(local * np.asarray(s), axis=-1)
    return n @ p + np.max(local @ np.asarray(s).T, axis=-1)  # mesh: its vertices


def _sphere_points(count):
    i = np.arange(count) + 0.5
    phi, theta = np.arccos(1 - 2 * i / count), np.pi * (1 + 5**0.5) * i
    return np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], -1)


_DIRECTIONS = _sphere_points(6000)


def _unit(x):
    return np.array([np.sin(x[0]) * np.cos(x[1]), np.sin(x[0]) * np.sin(x[1]), np.cos(x[0])])


def brute_signed_distance(k1, s1, pa, Ra, k2, s2, pb, Rb):
    """(signed distance, normal from 1 to 2): max over unit n of -(h_1(n) + h_2(-n))."""

    def f(n):
        return -(_support_value(k1, s1, pa, Ra, n) + _support_value(k2, s2, pb, Rb, -n))

    values = f(_DIRECTIONS)
    best = (-np.inf, None)
    for i in np.argsort(-values)[:3]:
        n0 = _DIRECTIONS[i]
        x0 = [np.arccos(np.clip(n0[2], -1, 1)), np.arctan2(n0[1], n0[0])]
        r = minimize(lambda x: -f(_unit(x)[None])[0], x0, method="Nelder-Mead",
                     options=dict(xatol=1e-12, fatol=1e-15, maxiter=3000))  # fmt: skip
        if -r.fun > best[0]:
            best = (-r.fun, _unit(r.x))
    return best


# ----------------------------------------------------------------------------- MuJoCo

_GEOM = {
    "sphere": lambda s: f'type="sphere" size="{s[0]}"',
    "capsule": lambda s: f'type="capsule" size="{s[0]} {s[1]}"',
    "cylinder": lambda s: f'type="cylinder" size="{s[0]} {s[1]}"',
    "box": lambda s: f'type="box" size="{s[0]} {s[1]} {s[2]}"',
    "ellipsoid": lambda s: f'type="ellipsoid" size="{s[0]} {s[1]} {s[2]}"',
    "mesh": lambda s: 'type="mesh" mesh="hull"',
}


def _mujoco_model(k1, s1, k2, s2, *, tolerance=None):
    vertices = " ".join(f"{x:.17g}" for x in MESH_VERTICES.reshape(-1))
    xml = f"""<mujoco><asset><mesh name="hull" vertex="{vertices}"/></asset><worldbody>
      <body name="a"><freejoint/><geom name="a" {_GEOM[k1](s1)}/></body>
      <body name="b"><freejoint/><geom name="b" {_GEOM[k2](s2)}/></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    # one contact, the penetration's: MuJoCo 4 turns multiccd on by default (3.x: an
    # enable flag, off), whose polygon-clipped contacts are not the depth (box-cylinder
    # 2 mm in: -8.4e-5 and -1.4e-4 m against -1.74e-3 m, capsule-mesh 5e-6 m off it)
    m.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, "mjDSBL_MULTICCD", 0))
    if tolerance is not None:
        m.opt.ccd_tolerance, m.opt.ccd_iterations = tolerance, 500
    return m


def _mesh_in_geom_frame(m):
    """MuJoCo's mesh vertices (its geom frame: recentred and rotated by MuJoCo)."""
    return np.asarray(m.mesh_vert[: m.mesh_vertnum[0]], dtype=np.float64)


def _mujoco_contacts(m, pa, Ra, pb, Rb):
    """[(dist, pos, normal from geom a to geom b)] with the geoms' frames at the poses (a
    mesh geom's frame is MuJoCo's, offset in its body: the bodies are placed to match)."""
    d = mujoco.MjData(m)
    for g, (p, R) in enumerate([(pa, Ra), (pb, Rb)]):
        offset = np.zeros(9)
        mujoco.mju_quat2Mat(offset, m.geom_quat[g])
        R_body = np.asarray(R) @ offset.reshape(3, 3).T
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, R_body.reshape(-1))
        d.qpos[7 * g : 7 * g + 7] = np.r_[np.asarray(p) - R_body @ m.geom_pos[g], q]
    mujoco.mj_kinematics(m, d)
    mujoco.mj_collision(m, d)
    out = []
    for c in d.contact[: d.ncon]:
        sign = 1.0 if c.geom1 == 0 else -1.0
        out.append((float(c.dist), np.array(c.pos), sign * np.array(c.frame[:3])))
    return out


def _mesh_size():
    """MuJoCo's compiled mesh vertices (its geom frame)."""
    return _mesh_in_geom_frame(_mujoco_model("mesh", None, "mesh", None))


def _size(kind):
    return _mesh_size() if kind == "mesh" else SIZES[kind]


# ----------------------------------------------------------------------------- capsule-box


def test_capsule_box_first_contact_is_mujocos():
    """Random poses with the capsule's segment outside the box (its sphere may overlap):
    the first slot is MuJoCo's first contact (mjraw_CapsuleBox: the sphere at the segment's
    closest point against the box), dist, position and normal to 1e-8 (5e-14 measured);
    MuJoCo reports no contact exactly where the gap is beyond its margin (0.5)."""
    rng = np.random.default_rng(1)
    n = 120
    Ra = np.stack([_rot(rng) for _ in range(n)])
    Rb = np.stack([_rot(rng) for _ in range(n)])
    pa, pb = rng.uniform(-0.45, 0.45, (n, 3)), np.zeros((n, 3))
    s1, s2 = SIZES["capsule"], SIZES["box"]
    gap, point, normal = _ours("capsule", s1, "box", s2, pa, Ra, pb, Rb)
    xml = _mujoco_model("capsule", s1, "box", s2)
    xml.geom_margin[:] = 0.5
    compared = 0
    for k in range(n):
        if gap[k, 0] < -s1[0]:
            continue  # the segment inside the box: MuJoCo's heuristics (below)
        mj = _mujoco_contacts(xml, pa[k], Ra[k], pb[k], Rb[k])
        assert bool(mj) == (gap[k, 0] < 0.5)
        if mj:
            dist, pos, nrm = mj[0]
            assert abs(dist - gap[k, 0]) < ROUND_OFF
            np.testing.assert_allclose(pos, point[k, 0], rtol=0, atol=ROUND_OFF)
            np.testing.assert_allclose(nrm, normal[k, 0], rtol=0, atol=ROUND_OFF)
            compared += 1
    assert compared > 80


@pytest.mark.parametrize("offset, angle", [(0.05, 0.0), (0.2, 0.0), (0.05, 0.4), (0.25, 0.7)])
def test_capsule_box_lying_on_a_face_rests_on_mujocos_two_contacts(offset, angle):
    """A capsule lying on the box's top face, turned by ``angle`` about the vertical and
    shifted along x (overhanging at 0.2 and 0.25): both slots are MuJoCo's two contacts
    (dist, position, normal to 1e-8), the ends of the part of the segment over the face."""
    s1, s2 = SIZES["capsule"], SIZES["box"]
    Ra = Rotation.from_euler("yz", [np.pi / 2, angle]).as_matrix()
    pa = np.array([offset, 0.02, s2[2] + s1[0] - 1e-3])
    gap, point, normal = _ours("capsule", s1, "box", s2, pa[None], Ra[None], np.zeros((1, 3)),
                               np.eye(3)[None])  # fmt: skip
    mj = _mujoco_contacts(_mujoco_model("capsule", s1, "box", s2), pa, Ra, np.zeros(3), np.eye(3))
    assert len(mj) == 2
    np.testing.assert_allclose(gap[0], [-1e-3, -1e-3], rtol=0, atol=ROUND_OFF)
    for dist, pos, nrm in mj:
        k = int(np.argmin(np.linalg.norm(point[0] - pos, axis=1)))
        assert abs(dist - gap[0, k]) < ROUND_OFF
        np.testing.assert_allclose(pos, point[0, k], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(nrm, normal[0, k], rtol=0, atol=ROUND_OFF)


def test_capsule_box_first_slot_is_the_segments_deepest_point():
    """Random poses, the segment inside the box too: the first slot's gap is the least
    signed distance to the box of the segment's points, less the radius (dense samples of
    the segment polished by a bounded scalar minimisation), to 1e-9; every slot is a
    sphere of the capsule against the box (its gap at least the first's)."""
    rng = np.random.default_rng(3)
    n = 40
    Ra = np.stack([_rot(rng) for _ in range(n)])
    pa = rng.uniform(-0.3, 0.3, (n, 3))
    s1, s2 = SIZES["capsule"], np.asarray(SIZES["box"])
    gap, _, _ = _ours(
        "capsule", s1, "box", s2, pa, Ra, np.zeros((n, 3)), np.tile(np.eye(3), (n, 1, 1))
    )

    def sdf(x):
        q = np.abs(x) - s2
        return np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(axis=-1), 0)

    t = np.linspace(-1, 1, 4001)
    for k in range(n):
        seg = pa[k] + t[:, None] * Ra[k][:, 2] * s1[1]
        values = sdf(seg)
        i = int(np.argmin(values))
        lo, hi = t[max(i - 1, 0)], t[min(i + 1, len(t) - 1)]
        centre, axis = pa[k], Ra[k][:, 2] * s1[1]
        r = minimize_scalar(lambda x, c=centre, a=axis: sdf(c + x * a), bounds=(lo, hi),
                            method="bounded", options=dict(xatol=1e-12))  # fmt: skip
        assert abs(gap[k, 0] - (min(r.fun, values[i]) - s1[0])) < 1e-9
        assert gap[k, 1] >= gap[k, 0] - 1e-12


# ----------------------------------------------------------------------------- support pairs

SUPPORT_PAIRS = [
    ("sphere", "cylinder"),
    ("capsule", "cylinder"),
    ("box", "cylinder"),
    ("cylinder", "cylinder"),
    ("sphere", "ellipsoid"),
    ("capsule", "ellipsoid"),
    ("box", "ellipsoid"),
    ("cylinder", "ellipsoid"),
    ("ellipsoid", "ellipsoid"),
    ("ellipsoid", "mesh"),
    ("sphere", "mesh"),
    ("capsule", "mesh"),
    ("box", "mesh"),
    ("cylinder", "mesh"),
    ("mesh", "mesh"),
]
# compiling GJK, MPR and EPA takes about 20 s a pair kind: one in the default run
QUICK = {("capsule", "cylinder")}


def _depth_tolerance(k1, k2):
    """1e-9; 1e-8 with an ellipsoid, round in two directions: EPA's polytope of
    :data:`~jaxmbd.contact.convex.EPA_ITERATIONS` vertices finds its depth to about 4e-9
    (MuJoCo's own tolerance, ``ccd_tolerance``, is 1e-6)."""
    return 1e-8 if "ellipsoid" in (k1, k2) else 1e-9


#: pairs whose gap misses the brute force's bound, a known defect of the collider: capsule-
#: ellipsoid 2 cm apart is 6e-8 to 3.4e-7 short (below the brute force's value, a lower
#: bound of the distance), with GJK's iterations 40 or 400 alike; the witness point on the
#: ellipsoid, a weighted blend of support points along several directions, lies inside it
KNOWN_SHORT = {("capsule", "ellipsoid")}


def _marks(pair):
    marks = () if pair in QUICK else (pytest.mark.slow,)
    if pair in KNOWN_SHORT:
        reason = "GJK's witness on the ellipsoid lies inside it (KNOWN_SHORT)"
        marks += (pytest.mark.xfail(strict=True, reason=reason),)
    return marks


@pytest.mark.parametrize(
    "k1, k2", [pytest.param(*p, marks=_marks(p), id=f"{p[0]}_{p[1]}") for p in SUPPORT_PAIRS]
)
def test_support_pairs_against_brute_force(k1, k2):
    """Random orientations, 2 cm apart and 2 mm into each other: the gap to the brute-force
    signed distance to 1e-9 (at most 5e-11 measured), the normal to 1e-4 (the round
    surfaces' EPA converges in depth to 1e-10 of the size, in angle to about its root)."""
    s1, s2 = _size(k1), _size(k2)
    # capsule-cylinder (the default run) meets 4.4e-12 in depth and 2.7e-6 in the normal;
    # EPA stops once a new support point gains less than 1e-10 of the pair's size (0.2 m
    # here), which bounds the depth's gap to 2e-11 whatever order XLA's fusions round in;
    # the slow pairs (not measured here) keep the docstring's bounds
    quick = (k1, k2) in QUICK
    tol = 2e-11 if quick else _depth_tolerance(k1, k2)
    offsets = (0.02, -0.002)
    for offset, poses in zip(offsets, _touching_poses(k1, s1, k2, s2, 6, offsets, 5), strict=True):
        gap, _, normal = _ours(k1, s1, k2, s2, *poses)
        for k in range(6):
            sd, n = brute_signed_distance(k1, s1, poses[0][k], poses[1][k], k2, s2,
                                          poses[2][k], poses[3][k])  # fmt: skip
            assert abs(gap[k, 0] - sd) < tol, (offset, k, gap[k, 0], sd)
            assert np.abs(normal[k, 0] - n).max() < (1e-5 if quick else 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("k1, k2", [pytest.param(*p, id=f"{p[0]}_{p[1]}") for p in SUPPORT_PAIRS])
def test_support_pairs_against_mujoco(k1, k2):
    """2 mm into each other: MuJoCo's first contact (nativeccd with ccd_tolerance 1e-10;
    sphere-cylinder: its closed form), dist to 1e-9 (1e-8 with an ellipsoid), normal to
    2e-4, position to 1e-5; and with MuJoCo's default tolerance 1e-6, dist to 2e-6."""
    _against_mujoco(k1, k2, 8)


def _against_mujoco(k1, k2, count):
    s1, s2 = _size(k1), _size(k2)
    tol = _depth_tolerance(k1, k2)
    poses = _touching_poses(k1, s1, k2, s2, count, -0.002, 11)
    gap, point, normal = _ours(k1, s1, k2, s2, *poses)
    tight = _mujoco_model(k1, s1, k2, s2, tolerance=1e-10)
    loose = _mujoco_model(k1, s1, k2, s2)
    for k in range(count):
        pose = [x[k] for x in poses]
        dist, pos, nrm = _mujoco_contacts(tight, *pose)[0]
        assert abs(dist - gap[k, 0]) < tol
        assert np.abs(nrm - normal[k, 0]).max() < 2e-4
        assert np.abs(pos - point[k, 0]).max() < 1e-5
        assert abs(_mujoco_contacts(loose, *pose)[0][0] - gap[k, 0]) < 2e-6


@pytest.mark.slow
def test_ellipsoid_pair_against_mujoco():
    """Two ellipsoids 2 mm into each other at 4 random poses: MuJoCo's contact (nativeccd)
    as in :func:`test_support_pairs_against_mujoco` (which runs every ellipsoid pair)."""
    _against_mujoco("ellipsoid", "ellipsoid", 4)


def test_plane_ellipsoid_is_mujocos_contact():
    """An ellipsoid into a tilted plane at random orientations: one slot, MuJoCo's contact
    (mjc_PlaneConvex: the support point along -n), dist, position and normal to 1e-12."""
    s = SIZES["ellipsoid"]
    rng = np.random.default_rng(12)
    collide = jax.jit(COLLIDE["plane_ellipsoid"])
    size = jnp.asarray(shape_size(_shape("ellipsoid", s)))
    for _ in range(6):
        normal = rng.normal(size=3) + np.array([0, 0, 3.0])
        normal /= np.linalg.norm(normal)
        axis = " ".join(f"{x:.17g}" for x in normal)
        xml = f"""<mujoco><worldbody>
          <geom name="floor" type="plane" size="1 1 .1" zaxis="{axis}"/>
          <body name="b"><freejoint/><geom name="b" {_GEOM["ellipsoid"](s)}/></body>
        </worldbody></mujoco>"""
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, _rot(rng).reshape(-1))
        d.qpos[:] = np.r_[0.01 * rng.normal(size=3) + 0.04 * normal, q]
        mujoco.mj_forward(m, d)
        assert d.ncon == 1
        c = d.contact[0]
        plane = (jnp.asarray(d.geom_xpos[0]), jnp.asarray(d.geom_xmat[0].reshape(3, 3)))
        body = (jnp.asarray(d.geom_xpos[1]), jnp.asarray(d.geom_xmat[1].reshape(3, 3)))
        gap, point, nrm = (np.asarray(x) for x in collide(*plane, jnp.zeros(3), *body, size))
        assert gap.shape == (1,) and gap[0] < 0
        assert abs(c.dist - gap[0]) < ROUND_OFF
        np.testing.assert_allclose(c.pos, point[0], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(c.frame[:3], nrm[0], rtol=0, atol=ROUND_OFF)


# ----------------------------------------------------------------------------- plane-mesh


def test_plane_mesh_deepest_vertex_is_mujocos_first_contact():
    """A mesh above and into a tilted plane: the first slot is MuJoCo's first contact
    (mjc_PlaneConvex: the hull's support point along -n), dist, position and normal to
    1e-8; the four slots are distinct hull vertices, each at its own height."""
    vertices = " ".join(f"{x:.17g}" for x in MESH_VERTICES.reshape(-1))
    rng = np.random.default_rng(4)
    for _ in range(5):
        normal = rng.normal(size=3) + np.array([0, 0, 3.0])
        normal /= np.linalg.norm(normal)
        axis = " ".join(f"{x:.17g}" for x in normal)
        xml = f"""<mujoco><asset><mesh name="hull" vertex="{vertices}"/></asset><worldbody>
          <geom name="floor" type="plane" size="1 1 .1" zaxis="{axis}"/>
          <body name="b"><freejoint/><geom name="b" type="mesh" mesh="hull"/></body>
        </worldbody></mujoco>"""
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        R = _rot(rng)
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, R.reshape(-1))
        d.qpos[:] = np.r_[0.02 * rng.normal(size=2), 0.02 * rng.uniform(0.5, 1.0), q]
        mujoco.mj_kinematics(m, d)  # then 5 mm deep: the lowest vertex below the plane
        local = _mesh_in_geom_frame(m)
        world = d.geom_xpos[1] + local @ d.geom_xmat[1].reshape(3, 3).T
        lowest = np.min((world - d.geom_xpos[0]) @ normal)
        d.qpos[:3] -= (lowest + 0.005) * normal
        mujoco.mj_forward(m, d)
        assert d.ncon >= 1
        c = d.contact[0]
        plane_R = d.geom_xmat[0].reshape(3, 3)
        size = shape_size(_shape("mesh", _mesh_in_geom_frame(m)))
        gap, point, nrm = (np.asarray(x) for x in COLLIDE["plane_mesh"](
            jnp.asarray(d.geom_xpos[0]), jnp.asarray(plane_R), jnp.zeros(3),
            jnp.asarray(d.geom_xpos[1]), jnp.asarray(d.geom_xmat[1].reshape(3, 3)),
            jnp.asarray(size)))  # fmt: skip
        assert abs(c.dist - gap[0]) < ROUND_OFF
        np.testing.assert_allclose(c.pos, point[0], rtol=0, atol=ROUND_OFF)
        np.testing.assert_allclose(c.frame[:3], nrm[0], rtol=0, atol=ROUND_OFF)
        world = d.geom_xpos[1] + size[1:, :3] @ d.geom_xmat[1].reshape(3, 3).T
        heights = (world - d.geom_xpos[0]) @ plane_R[:, 2]
        assert gap[0] == pytest.approx(heights.min(), abs=ROUND_OFF)
        picked = [int(np.argmin(np.abs(heights - g))) for g in gap]
        assert len(set(picked)) == 4


# ----------------------------------------------------------------------------- a scene

SCENE_XML = """<mujoco><asset><mesh name="cube" vertex="{cube}"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <geom name="table" type="box" size=".2 .2 .1" pos="0 0 .1"/>
    <body name="capsule" pos="0.02 0.01 0.3" euler="0 90 10"><freejoint/>
      <geom type="capsule" size=".03 .1" mass="1"/></body>
    <body name="cube" pos="0.6 0 0.12"><freejoint/>
      <geom type="mesh" mesh="cube" mass="2"/></body>
  </worldbody></mujoco>"""


@pytest.fixture(scope="module")
def scene(tmp_path_factory):  # noqa: D103 (the scene's runs in both engines)
    cube = " ".join(f"{x:g}" for x in 0.05 * np.array(
        [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]).reshape(-1))  # fmt: skip
    path = tmp_path_factory.mktemp("scene") / "scene.xml"
    path.write_text(SCENE_XML.format(cube=cube))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedFeatureWarning)
        # the mesh pairs, which MuJoCo's constraint model (a file's default since MJCF runs
        # it) leaves out and names: the scene runs jaxmbd's compliant contact, as it was built
        warnings.filterwarnings("ignore", message=".*contact='soft', this file's default")
        model = mbd.load_model(path)
    sol = mbd.simulate(model, t_end=1.5, h=2e-3, contact="compliant")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    for _ in range(750):
        mujoco.mj_step(m, d)
    return model, sol, d


@pytest.mark.slow
def test_capsule_on_a_box_and_mesh_on_the_floor_settle_at_rest(scene):
    """A capsule falls lying onto a fixed box (capsule_box) and a mesh cube onto the floor
    (plane_mesh), in joint coordinates: at rest the capsule lies level on its two slots
    and the cube on four corners, each slot pressing K delta^1.5 = its share of the weight
    (so the heights are the closed forms to 1e-7), and both heights are MuJoCo's to 1 mm."""
    model, sol, d = scene
    assert sol.result == mbd.RESULTS.successful
    assert np.abs(np.asarray(sol.rdot[-1])).max() < 1e-4
    c = sol.contact
    names = model.contacts.pair_names
    pair = np.asarray(c.pair)
    active = np.asarray(c.active[-1])
    force = np.asarray(c.normal_force[-1])
    for body, weight, slots, top, half in [("capsule", 9.81, 2, 0.2, 0.03),
                                           ("cube", 2 * 9.81, 4, 0.0, 0.05)]:  # fmt: skip
        k = next(i for i, n in enumerate(names) if body in n.split("/") and "ground" in n)
        mine = (pair == k) & active
        assert int(mine.sum()) == slots
        np.testing.assert_allclose(force[mine], weight / slots, rtol=1e-5)
        K = float(model.contacts.stiffness[k])
        delta = (weight / slots / K) ** (2 / 3)
        b = model.body_names.index(body)
        z = float(sol.r[-1, b, 2])
        assert z == pytest.approx(top + half - delta, abs=1e-7)
        assert z == pytest.approx(float(d.xpos[b + 1, 2]), abs=1e-3)


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize(
    "k1, k2",
    [("capsule", "box")]
    + [pytest.param(*p, marks=pytest.mark.slow, id=f"{p[0]}_{p[1]}") for p in SUPPORT_PAIRS],
)
def test_gap_gradient_is_central_differences(k1, k2):
    """d gap / d (B's position, B's rotation vector), apart (2 cm) and in penetration (2
    mm), against central differences (step 1e-6): to 2e-10 (1e-6 for the slow pairs; the
    witness points move with the shapes: the envelope theorem). Where a cylinder or an
    ellipsoid meets a shape without a point or segment core, d gap / d p_B is EPA's or
    GJK's normal, which converges only to about the root of their 1e-10 stopping tolerance
    (the normals' 1e-4 of the brute-force test): it is the brute-force normal to 6.4e-5
    (cylinder-ellipsoid 2 mm in; ellipsoid-ellipsoid 1.7e-5, box-cylinder 2.8e-6), while central
    differences at 1e-6 divide the gap's 1e-11 stopping error by the step (4.5e-4 off);
    those pairs take step 1e-4 (error 2e-7) and the normals' 1e-4."""
    s1, s2 = _size(k1), _size(k2)
    kind, swapped = pair_kind(k1, k2)
    sa, sb = shape_size(_shape(k1, s1)), shape_size(_shape(k2, s2))

    def gap(pa, Ra, x, Rb):
        p, R = x[:3], _rotation_matrix(x[3:]) @ Rb
        args = (p, R, sb, pa, Ra, sa) if swapped else (pa, Ra, sa, p, R, sb)
        return COLLIDE[kind](*args).gap[0]

    value = jax.jit(gap)
    grad = jax.jit(jax.grad(gap, argnums=2))
    pair, cores = {k1, k2}, {"sphere", "capsule"}
    round_normal = bool(pair & {"cylinder", "ellipsoid"}) and not pair & cores
    for offset, seed in [(0.02, 21), (-0.002, 22)]:
        pa, Ra, pb, Rb = (x[0] for x in _touching_poses(k1, s1, k2, s2, 1, offset, seed))
        x = jnp.concatenate([jnp.asarray(pb), jnp.zeros(3)])
        g = np.asarray(grad(pa, Ra, x, Rb))
        step = 1e-4 if round_normal else 1e-6
        fd = [(value(pa, Ra, x + step * e, Rb) - value(pa, Ra, x - step * e, Rb)) / (2 * step)
              for e in np.eye(6)]  # fmt: skip
        assert np.all(np.isfinite(g))
        # capsule-box: 5.3e-11 (central differences: round-off / step ~1e-10); the slow pairs
        # (not measured here) keep the docstring's 1e-6
        atol = 2e-10 if (k1, k2) == ("capsule", "box") else 1e-4 if round_normal else 1e-6
        np.testing.assert_allclose(g, np.asarray(fd), rtol=0, atol=atol)


def _rotation_matrix(v):
    """exp([v]x) by Rodrigues' formula, finite at v = 0."""
    theta2 = jnp.sum(v * v)
    small = theta2 < 1e-12
    theta = jnp.sqrt(jnp.where(small, 1.0, theta2))
    a = jnp.where(small, 1.0 - theta2 / 6, jnp.sin(theta) / theta)
    b = jnp.where(small, 0.5 - theta2 / 24, (1 - jnp.cos(theta)) / jnp.where(small, 1.0, theta2))
    K = jnp.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return jnp.eye(3) + a * K + b * (K @ K)
