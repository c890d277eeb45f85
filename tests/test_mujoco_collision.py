"""jaxmbd.contact.mujoco against MuJoCo's own mj_collision.

Each kernel is compared with the contacts MuJoCo returns for a two-geom model at many random
poses (overlapping, touching and within the margin; and degenerate ones: axis-aligned,
coincident centres, parallel axes), as sets matched by position, to round-off in dist and
pos and to 1e-12 in the frame (normal and tangents). On the standard models (hopper,
cheetah, walker, humanoid, ant) the contacts per geom pair of random rollouts are compared
with MuJoCo's the same way.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

from jaxmbd.contact.mujoco import KERNELS, candidate_pairs  # noqa: E402
from jaxmbd.contact.mujoco.pairs import GEOM_NAMES  # noqa: E402

#: measured worst: dist 1.1e-16, pos 9.3e-16, normal 1.9e-13, tangents 1.8e-13
TOL = {"dist": ROUND_OFF, "pos": ROUND_OFF, "normal": 1e-12, "tangents": 1e-12}
N_POSES = 300

# per pair kind: (type1, type2, size1, size2); the sizes are MuJoCo's geom size attribute
CASES = {
    "plane_sphere": ("plane", "sphere", "0 0 1", "0.13"),
    "plane_capsule": ("plane", "capsule", "0 0 1", "0.07 0.21"),
    "plane_ellipsoid": ("plane", "ellipsoid", "0 0 1", "0.11 0.17 0.06"),
    "plane_cylinder": ("plane", "cylinder", "0 0 1", "0.12 0.09"),
    "plane_box": ("plane", "box", "0 0 1", "0.1 0.16 0.07"),
    "sphere_sphere": ("sphere", "sphere", "0.1", "0.14"),
    "sphere_capsule": ("sphere", "capsule", "0.09", "0.06 0.2"),
    "sphere_cylinder": ("sphere", "cylinder", "0.08", "0.12 0.15"),
    "sphere_box": ("sphere", "box", "0.07", "0.1 0.15 0.2"),
    "capsule_capsule": ("capsule", "capsule", "0.06 0.2", "0.05 0.13"),
    "capsule_box": ("capsule", "box", "0.05 0.18", "0.12 0.1 0.15"),
    "box_box": ("box", "box", "0.1 0.13 0.07", "0.15 0.08 0.11"),
}
TYPE_IDS = {name: i for i, name in enumerate(GEOM_NAMES)}


def _model(type1, type2, size1, size2, margin):
    """geom "a" (a tilted world plane, or on a free body) and geom "b" on a free body."""
    if type1 == "plane":
        first = (
            f'<geom name="a" type="plane" size="{size1}" pos="0.1 -0.2 0.05" '
            f'quat="0.95 0.2 -0.1 0.22" margin="{margin}"/>'
        )
    else:
        first = (
            f'<body name="b1"><freejoint/><geom name="a" type="{type1}" size="{size1}" '
            f'margin="{margin}"/></body>'
        )
    second = (
        f'<body name="b2"><freejoint/><geom name="b" type="{type2}" size="{size2}" '
        f'margin="{margin}"/></body>'
    )
    xml = f"<mujoco><worldbody>{first}{second}</worldbody></mujoco>"
    return mujoco.MjModel.from_xml_string(xml)


def _special_quats():
    """Axis-aligned and 45-degree orientations (degenerate cases of the colliders)."""
    s = np.sqrt(0.5)
    return np.array(
        [
            [1, 0, 0, 0],
            [s, s, 0, 0],
            [s, 0, s, 0],
            [s, 0, 0, s],
            [0, 1, 0, 0],
            [0.5, 0.5, 0.5, 0.5],
            [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)],
            [np.cos(np.pi / 8), np.sin(np.pi / 8), 0, 0],
        ]
    )


def _quat(rng):
    if rng.random() < 0.3:
        q = _special_quats()[rng.integers(8)]
    else:
        q = rng.standard_normal(4)
    return q / np.linalg.norm(q)


def _poses(m, rng, n):
    """qpos of n poses: geom b near geom a, some degenerate (same orientation, coincident
    centres, offsets along one axis)."""
    plane = m.geom_type[0] == mujoco.mjtGeom.mjGEOM_PLANE
    rb1, rb2 = m.geom_rbound[0], m.geom_rbound[1]
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    out = []
    for k in range(n):
        qpos = np.zeros(m.nq)
        q2 = _quat(rng)
        if plane:
            normal = d.geom_xmat[0].reshape(3, 3)[:, 2]
            height = rng.uniform(-rb2, rb2 + 0.03)
            p2 = d.geom_xpos[0] + normal * height + 0.3 * rng.standard_normal(3)
            qpos[:] = np.concatenate([p2, q2])
        else:
            p1 = 0.1 * rng.standard_normal(3)
            q1 = _quat(rng)
            kind = k % 10
            if kind == 0:  # coincident centres
                p2 = p1.copy()
            elif kind == 1:  # same orientation, offset along one world axis
                q2 = q1.copy()
                p2 = p1 + np.eye(3)[rng.integers(3)] * rng.uniform(-1, 1) * (rb1 + rb2)
            elif kind == 2:  # same orientation, general offset
                q2 = q1.copy()
                p2 = p1 + rng.uniform(-1, 1, 3) * (rb1 + rb2) * 0.7
            elif kind == 3:  # nearly the same orientation (near-parallel axes and faces)
                half = 0.5 * 10 ** rng.uniform(-6, -1)
                axis = rng.standard_normal(3)
                tilt = np.r_[np.cos(half), np.sin(half) * axis / np.linalg.norm(axis)]
                q2 = np.zeros(4)
                mujoco.mju_mulQuat(q2, q1, tilt)
                p2 = p1 + rng.uniform(-1, 1, 3) * (rb1 + rb2) * 0.7
            else:
                direction = rng.standard_normal(3)
                direction /= np.linalg.norm(direction)
                p2 = p1 + direction * rng.uniform(0, 1.05) * (rb1 + rb2)
            qpos[:] = np.concatenate([p1, q1, p2, q2])
        out.append(qpos)
    return out


class _Contact:
    """A copy of one mjContact (d.contact's entries are views that the next step overwrites)."""

    def __init__(self, c):
        self.geom1, self.geom2 = int(c.geom1), int(c.geom2)
        self.dist, self.pos, self.frame = float(c.dist), np.array(c.pos), np.array(c.frame)


def _contacts(d):
    return [_Contact(c) for c in d.contact[: d.ncon]]


def _mujoco_contacts(m, d, g1, g2):
    return [c for c in _contacts(d) if {c.geom1, c.geom2} == {g1, g2}]


def _mismatch(ours, theirs, where):
    """None when our valid slots and MuJoCo's contacts agree as sets, else a message."""
    dist, pos, frame, valid = (np.asarray(x) for x in ours)
    keep = np.flatnonzero(valid)
    if len(keep) != len(theirs):
        return f"{where}: {len(keep)} contacts, MuJoCo {len(theirs)}"
    left = list(keep)
    for c in theirs:
        k = min(left, key=lambda k: np.linalg.norm(pos[k] - c.pos))
        left.remove(k)
        errors = {
            "dist": abs(dist[k] - c.dist),
            "pos": np.max(np.abs(pos[k] - c.pos)),
            "normal": np.max(np.abs(frame[k][0] - c.frame[:3])),
            "tangents": np.max(np.abs(frame[k][1:].ravel() - c.frame[3:])),
        }
        bad = {name: e for name, e in errors.items() if not e <= TOL[name]}
        if bad:
            return f"{where}: {bad} (dist {c.dist}, MuJoCo frame {c.frame})"
    return None


def _batched(kernel):
    return jax.jit(jax.vmap(kernel, in_axes=(0, 0, None, 0, 0, None, None)))


def _compare_kernel(name, margin, seed):
    type1, type2, size1, size2 = CASES[name]
    kernel, slots = KERNELS[(TYPE_IDS[type1], TYPE_IDS[type2])]
    m = _model(type1, type2, size1, size2, margin)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    poses = _poses(m, rng, N_POSES)
    xpos1, xmat1, xpos2, xmat2, theirs = [], [], [], [], []
    for qpos in poses:
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        assert all(c.geom1 == 0 and c.geom2 == 1 for c in d.contact[: d.ncon])
        xpos1.append(d.geom_xpos[0].copy())
        xmat1.append(d.geom_xmat[0].reshape(3, 3).copy())
        xpos2.append(d.geom_xpos[1].copy())
        xmat2.append(d.geom_xmat[1].reshape(3, 3).copy())
        theirs.append(_mujoco_contacts(m, d, 0, 1))
    ours = _batched(kernel)(
        jnp.array(xpos1), jnp.array(xmat1), jnp.array(m.geom_size[0]),
        jnp.array(xpos2), jnp.array(xmat2), jnp.array(m.geom_size[1]),
        2 * margin,
    )  # fmt: skip
    assert ours.dist.shape == (N_POSES, slots)
    failures = [
        msg
        for k in range(N_POSES)
        if (msg := _mismatch([x[k] for x in ours], theirs[k], f"pose {k}")) is not None
    ]
    counts = [len(t) for t in theirs]
    assert not failures, f"{name}: {len(failures)} of {N_POSES} poses differ: {failures[:3]}"
    # the poses must exercise contacts, several of them where the kernel can give several
    assert sum(c > 0 for c in counts) > N_POSES // 4, counts
    if slots > 1:
        assert max(counts) > 1, counts
    return ours, (xpos1, xmat1, xpos2, xmat2, m)


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_mujoco(name):
    """Every kernel's contacts (count, dist, pos, frame) equal MuJoCo's at random poses,
    with and without margin."""
    _compare_kernel(name, margin=0.0, seed=1)
    _compare_kernel(name, margin=0.02, seed=2)


def test_box_colliders_trace_their_searches_once():
    """Capsule-box's twelve edges and box-box's nine edge axes are arrays, their running
    bests loops: the kernels' jaxprs hold 789 and 1267 equations (unrolled: 2030 and 6000,
    which XLA compiled to 16.6k and 30.6k instructions). A count, not a time."""
    pose = (jnp.zeros(3), jnp.eye(3), jnp.array([0.1, 0.2, 0.3]),
            jnp.ones(3), jnp.eye(3), jnp.array([0.1, 0.2, 0.3]), 0.0)  # fmt: skip
    for pair, most in (("capsule", 1000), ("box", 1600)):
        kernel, _ = KERNELS[(TYPE_IDS[pair], TYPE_IDS["box"])]
        assert len(jax.make_jaxpr(kernel)(*pose).jaxpr.eqns) < most, pair


def test_box_face_clipped_at_a_corner_keeps_it_once():
    """A box turned about the normal lies on a larger one with one incident corner 1e-10
    inside the reference face's edge and its neighbour outside: clipping gives a crossing
    within 1e-10 of that corner, and MuJoCo keeps one of the two (4 contacts)."""
    kernel, _ = KERNELS[(TYPE_IDS["box"], TYPE_IDS["box"])]
    m = _model("box", "box", "0.1 0.1 0.05", "0.06 0.03 0.08", 0.0)
    d = mujoco.MjData(m)
    for degrees in (20.0, 35.0, 60.0):
        angle = np.radians(degrees)
        turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        corners = np.array([[a, b] for a in (0.06, -0.06) for b in (0.03, -0.03)]) @ turn.T
        shift = 0.1 - 1e-10 - np.sort(corners[:, 0])[-2]  # the second corner from the right
        quat = [np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)]
        d.qpos[:] = np.concatenate([[0, 0, 0, 1, 0, 0, 0], [shift, 0.0, 0.129], quat])
        mujoco.mj_forward(m, d)
        theirs = _mujoco_contacts(m, d, 0, 1)
        ours = kernel(
            jnp.array(d.geom_xpos[0]), jnp.array(d.geom_xmat[0].reshape(3, 3)),
            jnp.array(m.geom_size[0]), jnp.array(d.geom_xpos[1]),
            jnp.array(d.geom_xmat[1].reshape(3, 3)), jnp.array(m.geom_size[1]), 0.0,
        )  # fmt: skip
        assert len(theirs) == 4
        assert _mismatch(list(ours), theirs, f"turned {degrees} degrees") is None


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_gradients_finite(name):
    """Values and pose gradients stay finite in degenerate poses: coincident centres,
    identical orientations, parallel axes, a centre on a face."""
    type1, type2, size1, size2 = CASES[name]
    kernel, _ = KERNELS[(TYPE_IDS[type1], TYPE_IDS[type2])]
    m = _model(type1, type2, size1, size2, 0.01)
    eye = jnp.eye(3)
    s1, s2 = jnp.array(m.geom_size[0]), jnp.array(m.geom_size[1])
    rot = jnp.array(
        [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    )  # 90 degrees about z: axes still parallel
    on_face = jnp.array([0.0, 0.0, float(s2[-1] if type2 == "box" else 0.05)])
    pos1 = jnp.zeros((6, 3))
    pos2 = jnp.stack([jnp.zeros(3), on_face, jnp.array([0.0, 0.0, 0.1]),
                      jnp.array([0.05, 0.0, 0.0]), jnp.zeros(3), on_face])  # fmt: skip
    mat1 = jnp.stack([eye] * 6)
    mat2 = jnp.stack([eye, eye, eye, eye, rot, rot])

    def total(p1, r1, p2, r2):
        c = kernel(p1, r1, s1, p2, r2, s2, 0.02)
        return jnp.sum(c.dist * c.valid) + jnp.sum(c.pos) + jnp.sum(c.frame)

    values = jax.vmap(kernel, in_axes=(0, 0, None, 0, 0, None, None))(
        pos1, mat1, s1, pos2, mat2, s2, 0.02
    )
    grads = jax.jit(jax.vmap(jax.grad(total, argnums=(0, 1, 2, 3))))(pos1, mat1, pos2, mat2)
    for leaf in [*values, *grads]:
        assert np.all(np.isfinite(np.asarray(leaf)))


def _standard_file(name):
    if name == "ant":
        import gymnasium

        return os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/ant.xml")
    import dm_control

    return os.path.join(os.path.dirname(dm_control.__file__), f"suite/{name}.xml")


@pytest.mark.parametrize("name", ["hopper", "cheetah", "walker", "humanoid", "ant"])
def test_standard_models_contacts(name):
    """On random rollouts of the standard models, every candidate geom pair gets MuJoCo's
    contacts (count per geom pair, dist, pos, frame)."""
    m = mujoco.MjModel.from_xml_path(_standard_file(name))
    d = mujoco.MjData(m)
    pairs = candidate_pairs(m)
    kinds = {}
    for k, (g1, g2) in enumerate(zip(pairs["geom1"], pairs["geom2"], strict=True)):
        kinds.setdefault((int(m.geom_type[g1]), int(m.geom_type[g2])), []).append(k)
    assert set(kinds) <= set(KERNELS), kinds.keys()
    rng = np.random.default_rng(3)
    states = []
    for episode in range(3):
        mujoco.mj_resetData(m, d)
        d.qpos[:] += 0.05 * episode * rng.standard_normal(m.nq)
        for step in range(600):
            d.ctrl[:] = rng.uniform(-1, 1, m.nu)
            mujoco.mj_step(m, d)
            if step % 20 == 19:
                mujoco.mj_forward(m, d)
                states.append(
                    (d.geom_xpos.copy(), d.geom_xmat.copy().reshape(-1, 3, 3), _contacts(d))
                )
    covered = set()
    n_contacts = 0
    for (t1, t2), rows in kinds.items():
        kernel, _ = KERNELS[(t1, t2)]
        g1, g2 = pairs["geom1"][rows], pairs["geom2"][rows]
        call = jax.jit(jax.vmap(jax.vmap(kernel)))
        xpos = np.stack([s[0] for s in states])
        xmat = np.stack([s[1] for s in states])
        shape = (len(states), len(rows))
        ours = call(
            xpos[:, g1], xmat[:, g1], jnp.broadcast_to(m.geom_size[g1], (*shape, 3)),
            xpos[:, g2], xmat[:, g2], jnp.broadcast_to(m.geom_size[g2], (*shape, 3)),
            jnp.broadcast_to(pairs["margin"][rows], shape),
        )  # fmt: skip
        for s, state in enumerate(states):
            for r, (a, b) in enumerate(zip(g1, g2, strict=True)):
                theirs = [c for c in state[2] if (c.geom1, c.geom2) == (a, b)]
                n_contacts += len(theirs)
                msg = _mismatch([x[s, r] for x in ours], theirs, f"{name} state {s} {a}-{b}")
                assert msg is None, msg
                covered.add((a, b))
    # every MuJoCo contact belongs to a candidate pair
    for state in states:
        for c in state[2]:
            assert (c.geom1, c.geom2) in covered
    assert n_contacts > len(states) // 2


def _standard_files():
    import dm_control
    import gymnasium

    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets")
    return sorted(
        os.path.join(folder, f)
        for folder in (suite, assets)
        for f in os.listdir(folder)
        if f.endswith(".xml") and f != "common.xml"
    )


def test_candidate_pairs_are_mujocos():
    """With every margin huge, MuJoCo's contacts name exactly the candidate pairs (for the
    geom types with a kernel; others at least stay inside the list), on the standard files."""
    checked = 0
    for path in _standard_files():
        try:
            spec = mujoco.MjSpec.from_file(path)
        except ValueError:
            continue  # an include-only file
        if len(spec.geoms) > 60:
            continue  # dog: meshes with a huge margin take long in MuJoCo's convex collider
        for geom in spec.geoms:  # compiled with the margin, so that bounding volumes grow too
            geom.margin = 50.0
        for pair in spec.pairs:
            pair.margin = 50.0
        m = spec.compile()
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        pairs = candidate_pairs(m)
        ours = set(zip(pairs["geom1"].tolist(), pairs["geom2"].tolist(), strict=True))
        theirs = {(int(c.geom1), int(c.geom2)) for c in d.contact[: d.ncon]}
        assert theirs <= ours, (path, theirs - ours)
        with_kernel = {
            (a, b) for a, b in ours if (int(m.geom_type[a]), int(m.geom_type[b])) in KERNELS
        }
        assert with_kernel <= theirs, (path, with_kernel - theirs)
        checked += 1
    assert checked >= 25
