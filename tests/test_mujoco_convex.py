"""jaxmbd.contact.mujoco.convex (MuJoCo's ``mjc_Convex`` with native GJK/EPA) against
MuJoCo's own mj_collision.

The kernels port ``engine_collision_gjk.c`` / ``engine_collision_convex.c`` as of MuJoCo
3.12 (the newest source available); compiled from that source (a harness around
``mjc_ccd``), the C code gives the kernels' contacts to 1e-15. The installed reference,
MuJoCo 4.0.0, changed its GJK since: it finds a contact for coincident centres (3.12 finds
none) and its GJK iterates differ, so that where GJK or EPA stop on their tolerance
(``ccd_tolerance`` 1e-6, 35 iterations) the results differ by up to that tolerance in depth
and by its square root in normal and position. Where both stop at the same converged
iterate (most shallow contacts, many deep ones) they agree to 1e-10. The tests therefore
check, at random poses without coincident centres: the same contact count at nearly every
pose, agreement to 1e-10 at a share of the poses, and median errors near what is achieved
(measured on MuJoCo 4.0.0, seeds below; tolerances about 10x those).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

sys.path.insert(0, str(Path(__file__).parent))
from test_mujoco_collision import _model, _mujoco_contacts, _poses  # noqa: E402

from jaxmbd.contact.mujoco import KERNELS, convex  # noqa: E402
from jaxmbd.contact.mujoco.pairs import GEOM_NAMES  # noqa: E402

N_POSES = 60
EXACT = 1e-10

# per pair: (size1, size2, the share of poses with MuJoCo's contact count, the share that
# agree to 1e-10, median error bounds (dist, pos, normal) over the poses with the same count,
# zero-contact poses included); measured on these seeds over 90 poses without coincident
# centres, worst of the two margins: sphere-ellipsoid 90/90 same count, 27 exact, medians
# (1.7e-12, 4.2e-7, 4.9e-6); capsule-ellipsoid 90/90, 40, (6.2e-13, 9.3e-8, 1.5e-6);
# capsule-cylinder 53/90 (the multi-contact search finds other extra contacts), 31, (0, 0,
# 0); ellipsoid-ellipsoid 90/90, 43, (8.6e-8, 3.0e-7, 4.4e-4); ellipsoid-cylinder 90/90, 38,
# (3.5e-8, 2.5e-6, 2.6e-6); ellipsoid-box 90/90, 49, (9.7e-17, 2.0e-15, 4.0e-14);
# cylinder-cylinder 32/90, 13, (3.8e-8, 6.5e-6, 1.5e-6); cylinder-box 29/90, 17, (0, 4.9e-17,
# 2.2e-16): the multi-contact search of the cylinder pairs differs most
CASES = {
    "sphere_ellipsoid": ("0.1", "0.11 0.17 0.06", 0.95, 0.15, (2e-11, 2e-6, 5e-5)),
    "capsule_ellipsoid": ("0.06 0.2", "0.11 0.17 0.06", 0.95, 0.2, (6e-12, 1e-6, 1.5e-5)),
    "capsule_cylinder": ("0.06 0.2", "0.12 0.09", 0.4, 0.15, (EXACT, EXACT, EXACT)),
    "ellipsoid_ellipsoid": ("0.11 0.17 0.06", "0.09 0.13 0.1", 0.95, 0.2, (1e-6, 3e-6, 4e-3)),
    "ellipsoid_cylinder": ("0.11 0.17 0.06", "0.12 0.09", 0.95, 0.2, (4e-7, 2.5e-5, 3e-5)),
    "ellipsoid_box": ("0.11 0.17 0.06", "0.1 0.16 0.07", 0.95, 0.3, (EXACT, EXACT, EXACT)),
    "cylinder_cylinder": ("0.12 0.09", "0.1 0.14", 0.25, 0.05, (4e-7, 6.5e-5, 1.5e-5)),
    "cylinder_box": ("0.12 0.09", "0.1 0.16 0.07", 0.25, 0.1, (EXACT, EXACT, EXACT)),
}
DEFAULT = {"sphere_ellipsoid"}  # the others run under -m slow (each compiles for ~1 minute)


def _errors(ours, theirs):
    """None when the counts differ, else the largest (dist, pos, normal) error over
    MuJoCo's contacts, each matched to our nearest valid slot."""
    dist, pos, frame, valid = (np.asarray(x) for x in ours)
    keep = list(np.flatnonzero(valid))
    if len(keep) != len(theirs):
        return None
    worst = np.zeros(3)
    for c in theirs:
        k = min(keep, key=lambda k: np.linalg.norm(pos[k] - c.pos))
        keep.remove(k)
        worst = np.maximum(worst, [abs(dist[k] - c.dist), np.max(np.abs(pos[k] - c.pos)),
                                   np.max(np.abs(frame[k][0] - c.frame[:3]))])  # fmt: skip
    return worst


@functools.cache
def _batched(kernel):
    """One compiled program per kernel, shared by the margins and seeds."""
    return jax.jit(jax.vmap(kernel, in_axes=(0, 0, None, 0, 0, None, None)))


def _compare(name, margin, seed):
    type1, type2 = name.split("_")
    size1, size2, same_share, exact_share, medians = CASES[name]
    t1, t2 = GEOM_NAMES.index(type1), GEOM_NAMES.index(type2)
    kernel, slots = KERNELS[(t1, t2)]
    m = _model(type1, type2, size1, size2, margin)
    d = mujoco.MjData(m)
    poses = [
        q for k, q in enumerate(_poses(m, np.random.default_rng(seed), N_POSES)) if k % 10 != 0
    ]  # fmt: skip  (coincident centres: see the module docstring)
    frames, theirs = [], []
    for qpos in poses:
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        frames.append([d.geom_xpos[0].copy(), d.geom_xmat[0].reshape(3, 3).copy(),
                       d.geom_xpos[1].copy(), d.geom_xmat[1].reshape(3, 3).copy()])  # fmt: skip
        theirs.append(_mujoco_contacts(m, d, 0, 1))
    p1, r1, p2, r2 = (jnp.array(np.stack(x)) for x in zip(*frames, strict=True))
    ours = _batched(kernel)(
        p1, r1, jnp.array(m.geom_size[0]), p2, r2, jnp.array(m.geom_size[1]), 2 * margin
    )
    assert ours.dist.shape == (len(poses), slots)
    errors = [_errors([x[k] for x in ours], theirs[k]) for k in range(len(poses))]
    same = [e for e in errors if e is not None]
    assert len(same) >= same_share * len(poses), f"{name}: {len(poses) - len(same)} counts differ"
    exact = sum(bool(np.all(e <= EXACT)) for e in same)
    assert exact >= exact_share * len(poses), f"{name}: {exact} exact of {len(poses)}"
    median = np.median(np.array(same), axis=0)
    assert np.all(median <= np.array(medians)), f"{name}: median errors {median}"
    assert sum(len(t) > 0 for t in theirs) > len(poses) // 4


@pytest.mark.parametrize(
    "name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in CASES]
)
def test_convex_matches_mujoco(name):
    """Each mjc_Convex kernel's contacts against MuJoCo's, with and without margin."""
    _compare(name, margin=0.0, seed=1)
    _compare(name, margin=0.02, seed=2)


def test_convex_options_gate():
    """Files with other CCD settings are not collided by these kernels (static options)."""
    from jaxmbd.contact.mujoco.pairs import convex_options_supported

    m = mujoco.MjModel.from_xml_string("<mujoco/>")
    assert convex_options_supported(m)
    m.opt.ccd_iterations = 50
    assert not convex_options_supported(m)
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><option><flag multiccd="disable"/></option></mujoco>'
    )
    assert not convex_options_supported(m)
    assert convex.ITERATIONS == 35 and convex.TOLERANCE == 1e-6


def _equations(jaxpr):
    """Equations of a jaxpr, those of its sub-jaxprs (loop bodies, branches) included."""
    from jax.extend.core import jaxprs_in_params

    return sum(1 + sum(_equations(sub) for sub in jaxprs_in_params(e.params)) for e in jaxpr.eqns)


@pytest.mark.parametrize(
    "pair, bound",
    [
        # measured: 3955 equations
        ((convex.ELLIPSOID, convex.ELLIPSOID), 5100),
        # measured: 5288 (one traced CCD serves the first contact and the four perturbed
        # searches, one traced GJK the shrunk and the full search)
        ((convex.CAPSULE, convex.CYLINDER), 6800),
    ],
)
def test_convex_program_size(pair, bound):
    """A convex kernel's program stays small (its size sets XLA's compile time): its jaxpr,
    traced and not compiled, counts at most about 1.3 times the equations measured."""
    args = (jnp.zeros(3), jnp.eye(3), jnp.full(3, 0.1), jnp.array([0.0, 0.0, 0.15]),
            jnp.eye(3), jnp.full(3, 0.1), 0.0)  # fmt: skip
    jaxpr = jax.make_jaxpr(convex.kernel(*pair))(*args).jaxpr
    assert _equations(jaxpr) <= bound


def test_pairs_of_several_types_collide_in_one_program():
    """convex.collide_any (the geom types as data, one program for every convex pair of a
    model) gives each pair the contacts of its own kernel: a smooth pair (one slot, the
    others left empty) and a multi-contact pair (five slots) in one call, at random poses.
    Where EPA stops on its tolerance, XLA's other fusion of the same operations takes
    another iterate (measured, seeds below: sphere-ellipsoid 6.5e-10 in depth, 1.7e-6 in
    position, 2.5e-5 in frame; capsule-cylinder 3.4e-12, 5.2e-7, 8.0e-6). EPA stops once a
    new support point gains less than 1e-10 of the pair's size (2e-11 here): that bounds
    the depth; on a round surface the point and normal of a face that close move about
    the root of it. Tolerances about 10x, the depth's that stopping bound."""
    from scipy.spatial.transform import Rotation

    pairs = [(convex.SPHERE, convex.ELLIPSOID), (convex.CAPSULE, convex.CYLINDER)]
    tolerances = [(3e-9, 1e-5, 1e-4), (2e-11, 1e-5, 1e-4)]  # depth, position, frame
    sizes = {convex.SPHERE: [0.1, 0, 0], convex.ELLIPSOID: [0.11, 0.17, 0.06],
             convex.CAPSULE: [0.06, 0.2, 0], convex.CYLINDER: [0.12, 0.09, 0]}  # fmt: skip
    k = 12
    rng = np.random.default_rng(3)
    pos1 = rng.normal(size=(2 * k, 3)) * 0.05
    pos2 = rng.normal(size=(2 * k, 3)) * 0.05 + np.array([0.0, 0.0, 0.2])
    mat1 = Rotation.random(2 * k, random_state=4).as_matrix()
    mat2 = Rotation.random(2 * k, random_state=5).as_matrix()
    types1 = np.repeat([t1 for t1, _ in pairs], k)
    types2 = np.repeat([t2 for _, t2 in pairs], k)
    size1 = np.array([sizes[t] for t in types1])
    size2 = np.array([sizes[t] for t in types2])
    together = jax.jit(functools.partial(convex.collide_any, types1, types2))(
        pos1, mat1, size1, pos2, mat2, size2, np.zeros(2 * k)
    )
    assert together.dist.shape == (2 * k, 5)
    found = 0
    for j, (t1, t2) in enumerate(pairs):
        rows = slice(j * k, (j + 1) * k)
        kernel, slots = KERNELS[(t1, t2)]
        own = _batched(kernel)(pos1[rows], mat1[rows], jnp.array(sizes[t1]), pos2[rows],
                               mat2[rows], jnp.array(sizes[t2]), 0.0)  # fmt: skip
        ours = jax.tree.map(lambda a, rows=rows: np.asarray(a[rows]), together)
        assert not ours.valid[:, slots:].any()
        np.testing.assert_array_equal(ours.valid[:, :slots], own.valid)
        valid = np.asarray(own.valid)
        found += valid.sum()
        for field, atol in zip(("dist", "pos", "frame"), tolerances[j], strict=True):
            mine, theirs = getattr(ours, field)[:, :slots], np.asarray(getattr(own, field))
            np.testing.assert_allclose(mine[valid], theirs[valid], rtol=0, atol=atol)
    assert found >= k  # contacts at many of the poses, multi-contact slots among them


def test_gathered_pairs_are_every_pairs_contacts():
    """collide_pairs with ``block`` (the pairs within their bounding spheres grown by the
    margin gathered, four at a time) gives the contacts of every pair through the kernel:
    pairs of three types at random poses, a third of them apart, a third touching, a
    third overlapping, with a margin; more near pairs than a block holds, so the loop takes
    several passes, and the pairs apart must come back empty. Tolerances as in
    test_pairs_of_several_types_collide_in_one_program (another fusion of the same
    operations), the depth's 2e-8."""
    from scipy.spatial.transform import Rotation

    from jaxmbd.contact.mujoco.pairs import collide_pairs

    pairs = [(convex.SPHERE, convex.ELLIPSOID), (convex.CAPSULE, convex.CYLINDER),
             (convex.ELLIPSOID, convex.CYLINDER)]  # fmt: skip
    sizes = {convex.SPHERE: [0.1, 0, 0], convex.ELLIPSOID: [0.11, 0.17, 0.06],
             convex.CAPSULE: [0.06, 0.2, 0], convex.CYLINDER: [0.12, 0.09, 0]}  # fmt: skip
    k = 9
    rng = np.random.default_rng(7)
    types1 = np.repeat([t1 for t1, _ in pairs], k)
    types2 = np.repeat([t2 for _, t2 in pairs], k)
    n = types1.size
    apart = np.tile(np.repeat([1.2, 0.32, 0.15], 3), len(pairs))  # centre distances
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    pos1 = rng.normal(size=(n, 3)) * 0.05
    pos2 = pos1 + apart[:, None] * direction
    mat1 = Rotation.random(n, random_state=8).as_matrix()
    mat2 = Rotation.random(n, random_state=9).as_matrix()
    # two pairs within the margin at the very edge of their bounding spheres: a sphere and
    # an ellipsoid, two ellipsoids, each ellipsoid's longest axis (y) on the line of centres
    grazing = [(convex.SPHERE, 0.1), (convex.ELLIPSOID, 0.17)]
    on_line = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # y along x
    for t1, reach in grazing:
        types1, types2 = np.append(types1, t1), np.append(types2, convex.ELLIPSOID)
        pos1 = np.vstack([pos1, np.zeros(3)])
        pos2 = np.vstack([pos2, [reach + 0.17 + 0.009, 0.0, 0.0]])
        mat1 = np.concatenate([mat1, on_line[None]])
        mat2 = np.concatenate([mat2, on_line[None]])
        apart = np.append(apart, 0.0)
    n = types1.size
    size1 = np.array([sizes[t] for t in types1])
    size2 = np.array([sizes[t] for t in types2])
    margin = np.full(n, 0.01)
    args = (pos1, mat1, size1, pos2, mat2, size2, margin)
    every = jax.jit(functools.partial(collide_pairs, types1, types2))(*args)
    gathered = jax.jit(functools.partial(collide_pairs, types1, types2, block=4))(*args)
    np.testing.assert_array_equal(gathered.valid, every.valid)
    valid = np.asarray(every.valid)
    assert not valid[apart > 1].any() and valid[apart < 0.2].any(axis=1).all()
    assert valid[-2:, 0].all()  # the grazing pairs touch within the margin
    # depth: within 2e-8 where EPA stops on its tolerance (measured up to 5.1e-9), far
    # below MuJoCo's ccd_tolerance (1e-6)
    for field, atol in zip(("dist", "pos", "frame"), (2e-8, 1e-5, 1e-4), strict=True):
        mine, theirs = np.asarray(getattr(gathered, field)), np.asarray(getattr(every, field))
        np.testing.assert_allclose(mine[valid], theirs[valid], rtol=0, atol=atol)
    # one type pair (its kernel's static program) gathered alike
    rows = slice(k, 2 * k)
    one = jax.jit(functools.partial(collide_pairs, types1[rows], types2[rows], block=4))(
        *(a[rows] for a in args)
    )
    own = every._replace(**{f: getattr(every, f)[rows] for f in every._fields})
    np.testing.assert_array_equal(one.valid, own.valid)
    on = np.asarray(own.valid)
    np.testing.assert_allclose(np.asarray(one.dist)[on],
                               np.asarray(own.dist)[on], rtol=0, atol=2e-8)  # fmt: skip


def test_a_model_traces_each_collider_once():
    """dm_control's quadruped: its 16 contact groups (geom types x condim) hold 11 type
    pairs, 4 of them convex; collide_groups traces one kernel per type pair and one for
    every convex pair, half the equations of a call per group (measured 12.7k against
    25.6k)."""
    from test_soft_equalities_tendons import _soft_model, _suite

    from jaxmbd.contact.mujoco.pairs import collide
    from jaxmbd.soft_constraints.model import collide_groups
    from jaxmbd.tree import poses

    model = _soft_model(_suite("quadruped.xml"))
    # the geom pairs' groups (the terrain's prisms are a program of their own)
    groups = [g for g in model.constraint_model.contacts if not g.window]

    def per_group(q):
        p = poses(model.tree, q)
        found = []
        for g in groups:
            (p1, m1), (p2, m2) = g.world_poses(p.x, p.R)
            found.append(collide(g.type1, g.type2, p1, m1, g.size1, p2, m2, g.size2, g.margin))
        return found

    def together(q):
        p = poses(model.tree, q)
        return collide_groups(groups, p.x, p.R)

    q = jnp.zeros(model.tree.nq)
    alone = _equations(jax.make_jaxpr(per_group)(q).jaxpr)
    shared = _equations(jax.make_jaxpr(together)(q).jaxpr)
    assert shared <= 0.55 * alone, (shared, alone)
