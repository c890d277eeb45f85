"""Kinematic trees of built models (``jaxmbd.joint_space.from_model.tree_of_model``): the
tree's forward kinematics reproduces the model's initial body state, keeps the tree joints'
own constraint rows at zero at moved coordinates (an independent check of the joints'
geometry), and its coordinates and rates are the joints' own (``jaxmbd.model.joints``, what
``sol.joints`` reports), in both directions of every joint kind."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.constraints.equations import constraint_values
from jaxmbd.joint_space.from_model import tree_of_model
from jaxmbd.model.joints import joint_coordinates
from jaxmbd.tree import JointType, body_velocities, integrate_positions, poses


def _round_off(x):
    """ROUND_OFF relative to max(1, |x|) (lengths of ~1 m, rates of ~1 per second)."""
    return ROUND_OFF * max(1.0, float(np.abs(np.asarray(x)).max(initial=0.0)))


QUATERNION = np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2])

#: built-in models and the joints (row tags) that stay as exact rows: loop closers, drivers
BUILTIN_LOOPS = {
    "single_pendulum": {"driver"},
    "double_pendulum": set(),
    "four_link": {"spherical", "driver"},
    "slider_crank": {"rev_cyl_C", "driver"},
    "spinning_top": set(),
    "heavy_top": set(),
    "spherical_double_pendulum": set(),
    "floating_pair": set(),
    "spherical_three_bar": {"joint2"},
    "gyro_top": set(),
    "cylindrical_pair": set(),
    "planar_pair": set(),
    "six_body_linkage": {"joint4"},
    "bar_double_pendulum": set(),
    "pendulum_chain": set(),
    "engine": {"motor", "piston_pin0", "piston_pin1", "piston_pin2", "piston_pin3"},
    "binary_tree": set(),
}
#: models whose published initial state violates their joints (the engine projects it)
INCONSISTENT_START = {"four_link"}


def every_kind(child_is_j: bool) -> mbd.ModelBuilder:
    """ground -revolute- a -universal- b -cylindrical- c -spherical- d -planar- e
    -translational- f, each joint drawn with the child as body_j (or as body_i), a start
    away from the drawn pose, an offset and a flipped sign on the revolute joint; a free
    body "loose", and a floating pair p -revolute- q joined to nothing else."""
    b = mbd.ModelBuilder("every kind", gravity=(0.0, 0.0, -9.81))
    for k, name in enumerate("abcdef"):
        axes = ((1.0, 0.2, 0.0), (-0.2, 1.0, 0.5)) if name in "df" else None
        b.add_body(name, mass=1.0, inertia=[0.02, 0.03, 0.04], r=(k + 0.5, 0.1 * k, 0),
                   axes=axes)  # fmt: skip
    b.add_body("loose", mass=1.0, inertia=[0.1, 0.2, 0.3], r=(0, 3, 1),
               axes=((0, 1, 0), (0, 0, 1)), rdot=(0.3, -0.2, 1.0),
               omega=(0.5, 1.0, -2.0))  # fmt: skip
    b.add_body("p", mass=1.0, inertia=[0.1, 0.2, 0.3], r=(0, -3, 1), rdot=(0.1, 0, 0),
               omega=(0.0, 0.0, 0.4))  # fmt: skip
    b.add_body("q", mass=1.0, inertia=[0.1, 0.2, 0.3], r=(0, -3, 2), rdot=(0.1, 0, 0),
               omega=(0.0, 0.0, 0.4))  # fmt: skip

    def pair(parent, child):
        return (
            dict(body_i=parent, body_j=child) if child_is_j else dict(body_i=child, body_j=parent)
        )

    b.revolute("h", **pair("ground", "a"), point=(0, 0, 0), axis=(0, 1, 0.3))
    b.universal("u", **pair("a", "b"), point=(1, 0.1, 0), axis_i=(0, 0, 1), axis_j=(0, 1, 0))
    b.cylindrical("c", **pair("b", "c"), point=(2, 0.2, 0), axis=(1, 0, 0.1))
    b.spherical("s", **pair("c", "d"), point=(3, 0.3, 0))
    b.planar("pl", **pair("d", "e"), point=(4, 0.4, 0), axis=(0, 0.2, 1), x_axis=(1, 1, 0))
    b.translational("t", **pair("e", "f"), point=(5, 0.5, 0), axis=(1, 0, 0.2))
    b.revolute("pq", **pair("p", "q"), point=(0, -3, 1.5), axis=(1, 0, 0))
    b._joint_convention("h", offset=[0.3], sign=[-1])  # as MJCF loads a joint's ref and axis
    b.set_joint_state("h", q=1.2, qdot=1.5)
    b.set_joint_state("u", q=(0.3, -0.5), qdot=(0.7, -1.1))
    b.set_joint_state("c", q=(0.2, 2.0), qdot=(-0.4, 0.9))
    b.set_joint_state("s", q=QUATERNION, qdot=(0.3, -0.2, 0.5))
    b.set_joint_state("pl", q=(0.1, -0.2, -2.5), qdot=(0.5, 0.3, -1.0))
    b.set_joint_state("t", q=-0.15, qdot=0.6)
    b.set_joint_state("pq", q=0.4, qdot=-0.7)
    return b


def four_bar_with_spherical_loop() -> mbd.ModelBuilder:
    """Three revolute joints and a spherical joint closing the loop (added last)."""
    b = mbd.ModelBuilder("four bar", gravity=(0.0, 0.0, 0.0))
    for name, r in (("crank", (0, 0, 0.5)), ("coupler", (0.5, 0, 1)), ("rocker", (1, 0, 0.5))):
        b.add_body(name, mass=1.0, inertia=[0.01, 0.01, 0.01], r=r)
    y = (0, 1, 0)
    b.revolute("A", body_i="ground", body_j="crank", point=(0, 0, 0), axis=y)
    b.revolute("B", body_i="crank", body_j="coupler", point=(0, 0, 1), axis=y)
    b.revolute("D", body_i="rocker", body_j="ground", point=(1, 0, 0), axis=y)
    b.spherical("C", body_i="coupler", body_j="rocker", point=(1, 0, 1))
    return b


BUILT = {
    "every_kind_j": lambda: every_kind(True).build(),
    "every_kind_i": lambda: every_kind(False).build(),
    "four_bar_spherical": lambda: four_bar_with_spherical_loop().build(),
}


def _rows_of(model, tags):
    return tuple(k for k, tag in enumerate(model.constraint_joints) if tag in tags)


def _quat_mul(a, b):
    w1, v1, w2, v2 = a[0], a[1:], b[0], b[1:]
    return np.concatenate([[w1 * w2 - v1 @ v2], w1 * v2 + w2 * v1 + np.cross(v1, v2)])


def moved(tree, rng):
    """Coordinates away from the start on every joint, and random rates."""
    q = np.array(tree.qpos_init)
    for j, (jtype, adr) in enumerate(zip(tree.joint_type, tree.joint_qpos_adr, strict=True)):
        if jtype in (JointType.HINGE, JointType.SLIDE):
            q[adr] += rng.uniform(-1.0, 1.0)
        else:
            start = adr + (3 if jtype == JointType.FREE else 0)
            if jtype == JointType.FREE:
                q[adr : adr + 3] += rng.uniform(-1.0, 1.0, 3)
            turn = rng.normal(size=4) * np.array([0.0, 1, 1, 1]) + np.array([1.0, 0, 0, 0])
            q[start : start + 4] = _quat_mul(q[start : start + 4], turn / np.linalg.norm(turn))
        del j
    return jnp.asarray(q), jnp.asarray(rng.normal(size=tree.nv))


@eqx.filter_jit
def body_state(tree, qpos, qvel):
    P = poses(tree, qpos)
    v, w = body_velocities(tree, P, qvel)
    return P, v, w


@eqx.filter_jit
def _rows_at(model, P):
    return constraint_values(model, P.c, P.R, 0.0)


@eqx.filter_jit
def _pose_rates(tree, qpos, qvel):
    def along(s):
        return tuple(poses(tree, integrate_positions(tree, qpos, qvel, s))[2:0:-1])

    return jax.jvp(along, (0.0,), (1.0,))[1]


def check_coordinates(model, mt, qpos, qvel, P, v, w):
    """Each tree joint's coordinate and rate equal the joint map's at the tree's body state."""
    tree = mt.tree
    defs = {d.name: d for d in mt.joints}
    state = [x[None] for x in (P.c, P.R, v, w)]
    rates = _round_off(qvel)
    for j, (name, k) in enumerate(mt.coordinates):
        jtype = tree.joint_type[j]
        qa, va = tree.joint_qpos_adr[j], tree.joint_dof_adr[j]
        if jtype == JointType.FREE:
            continue
        defn = defs[name]
        c = joint_coordinates(defn, *state)
        q_map = np.reshape(np.asarray(c.q), -1)
        qd_map = np.reshape(np.asarray(c.qdot), -1)
        if jtype == JointType.BALL:
            if tree.joint_body[j] != defn.body_j:
                continue  # a reversed ball: the inverse rotation (module docstring)
            quat = np.asarray(qpos[qa : qa + 4])
            quat = quat / np.linalg.norm(quat)
            assert min(np.abs(quat - q_map).max(), np.abs(quat + q_map).max()) < ROUND_OFF, name
            np.testing.assert_allclose(qd_map, qvel[va : va + 3], rtol=0, atol=rates, err_msg=name)
            continue
        diff = float(qpos[qa]) - q_map[k]
        lengths = {"translational": 1, "cylindrical": 1, "planar": 2}.get(defn.kind, 0)
        if k >= lengths:  # an angle: equal up to whole turns
            diff = math.remainder(diff, 2 * math.pi)
        assert abs(diff) < ROUND_OFF, (tree.joint_names[j], diff)  # (lengths of ~1 m)
        assert abs(float(qvel[va]) - qd_map[k]) < rates, (tree.joint_names[j],)


def check(model, consistent_start=True, seed=0):
    mt = tree_of_model(model)
    tree = mt.tree
    tree_rows = np.setdiff1d(np.arange(model.nc), np.asarray(mt.loop_rows, dtype=int))
    # the start: the model's initial body state, in the joints' coordinates
    P, v, w = body_state(tree, tree.qpos_init, tree.qvel_init)
    if consistent_start:
        np.testing.assert_allclose(P.c, model.r0, rtol=0, atol=_round_off(model.r0))
        np.testing.assert_allclose(P.R, model.A0, rtol=0, atol=5e-14)
        np.testing.assert_allclose(v, model.rdot0, rtol=0, atol=_round_off(model.rdot0))
        spin = max(1.0, float(np.abs(model.omega0).max()))
        np.testing.assert_allclose(w, model.omega0, rtol=0, atol=5e-14 * spin)
        check_coordinates(model, mt, tree.qpos_init, tree.qvel_init, P, v, w)
    # moved: the tree joints' rows vanish, their velocity rows too, coordinates agree
    rng = np.random.default_rng(seed)
    for _ in range(1):
        qpos, qvel = moved(tree, rng)
        P, v, w = body_state(tree, qpos, qvel)
        phi = np.asarray(_rows_at(model, P))
        assert np.abs(phi[tree_rows]).max(initial=0.0) < ROUND_OFF  # (lengths of ~1 m)

        # the body velocities are the poses' time derivatives along qvel
        c_dot, R_dot = _pose_rates(tree, qpos, qvel)
        np.testing.assert_allclose(v, c_dot, rtol=0, atol=_round_off(c_dot))
        W = jnp.einsum("bji,bjk->bik", P.R, R_dot)
        w_dot = jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], -1)
        np.testing.assert_allclose(w, w_dot, rtol=0, atol=_round_off(w_dot))
        check_coordinates(model, mt, qpos, qvel, P, v, w)
    return mt


#: built-in models checked by default: rows kept by loops (revolute, spherical, cylindrical
#: closers, several loops on one crank), drivers, a start the engine projects, a branching
#: tree. The others are trees of joint kinds that test_every_kind_both_directions checks in
#: both directions (each model is a few compilations): they run with -m slow.
DEFAULT_BUILTINS = {"four_link", "slider_crank", "engine", "spherical_three_bar", "binary_tree"}


@pytest.mark.parametrize(
    "name",
    [
        name if name in DEFAULT_BUILTINS else pytest.param(name, marks=pytest.mark.slow)
        for name in sorted(BUILTIN_LOOPS)
    ],
)
def test_builtin_models(name):
    model = mbd.models.load(name)
    mt = check(model, consistent_start=name not in INCONSISTENT_START)
    assert mt.loop_rows == _rows_of(model, BUILTIN_LOOPS[name])


def test_every_kind_both_directions():
    """Every joint kind as body_j's and as body_i's parent, offsets and signs, a free body
    and a floating pair: the start, moved coordinates, and the tree's layout."""
    for child_is_j in (True, False):
        model = BUILT["every_kind_j" if child_is_j else "every_kind_i"]()
        mt = check(model)
        assert mt.loop_rows == ()
        tree = mt.tree
        names = dict(zip(tree.joint_names, tree.joint_type, strict=True))
        expected = {"h": JointType.HINGE, "u.angle_1": JointType.HINGE,
                    "u.angle_2": JointType.HINGE, "c.slide": JointType.SLIDE,
                    "c.angle": JointType.HINGE, "s": JointType.BALL, "pl.x": JointType.SLIDE,
                    "pl.y": JointType.SLIDE, "pl.angle": JointType.HINGE,
                    "t": JointType.SLIDE, "loose.free": JointType.FREE,
                    "p.free": JointType.FREE, "pq": JointType.HINGE}  # fmt: skip
        assert names == expected
        body = dict(zip(tree.joint_names, tree.joint_body, strict=True))
        assert body["loose.free"] == model.body_names.index("loose")
        assert tree.parent[model.body_names.index("q")] == model.body_names.index("p")
        # the set start reads back in the tree's coordinates
        q0 = dict(zip(tree.joint_names, np.asarray(tree.qpos_init)[list(tree.joint_qpos_adr)],
                      strict=True))  # fmt: skip
        start = {"h": 1.2, "u.angle_1": 0.3, "u.angle_2": -0.5, "c.slide": 0.2,
                 "c.angle": 2.0, "pl.angle": -2.5, "t": -0.15, "pq": 0.4}  # fmt: skip
        for key, value in start.items():
            assert abs(q0[key] - value) < ROUND_OFF, key


def test_loop_closed_by_a_spherical_joint():
    model = BUILT["four_bar_spherical"]()
    mt = check(model)
    assert mt.loop_rows == _rows_of(model, {"C"})
    assert mt.tree_joints == ("A", "B", "D")


@pytest.mark.slow  # joint-run gradients: test_joint_formulation.py
def test_gradients_reach_the_model():
    """The tree's leaves are functions of the model's: d(tree c at the start)/d(r0) is the
    identity on a tree of a free body and a revolute child."""
    model = BUILT["every_kind_j"]()

    def start(r0):
        tree = tree_of_model(eqx_replace(model, r0=r0)).tree
        return poses(tree, tree.qpos_init).c

    J = jax.jacobian(start)(model.r0)
    k = model.body_names.index("loose")
    np.testing.assert_allclose(J[k, :, k, :], np.eye(3), atol=1e-12)


def eqx_replace(model, **fields):
    return eqx.tree_at(lambda m: [getattr(m, f) for f in fields], model, list(fields.values()))


def _gcon_hinge(dp1, f=0.0) -> mbd.Model:
    """Body "a" on the ground by GCON rows tagged "hinge": CD x 3 at the origin and the two
    DP1 rows ``dp1`` ((a_bar on the ground, a_bar on "a") pairs), the second with
    offset ``f``."""
    b = mbd.ModelBuilder("gcon hinge", gravity=(0.0, 0.0, -9.81))
    b.add_body("a", mass=1.0, inertia=[0.01, 0.02, 0.03], r=(0.0, 0.0, -1.0))
    for k, c in enumerate(np.eye(3)):
        b.add_cd(f"cd{k}", c=tuple(c), body_i="ground", s_bar_p_i=(0, 0, 0), body_j="a",
                 s_bar_q_j=(0, 0, 1), joint="hinge")  # fmt: skip
    for k, (on_ground, on_a) in enumerate(dp1):
        b.add_dp1(f"dp1{k}", body_i="ground", a_bar_i=on_ground, body_j="a", a_bar_j=on_a,
                  f=f if k else 0.0, joint="hinge")  # fmt: skip
    return b.build()


def test_rows_that_fail_their_geometry_check_stay_rows():
    """GCON rows of a revolute joint's composition are a hinge where their geometry is one
    (a Perp-1 pair, zero offsets); where it is not, they stay rows and the body is free.
    With concrete values the tree is one compiled program whose checks run inside it: its
    answer must be the op-by-op reading's (``tree_of_model`` under a trace skips them)."""
    hinge = ((1, 0, 0), (0, 0, 1)), ((1, 0, 0), (0, 1, 0))  # x on the ground, normal to y, z
    cases = {
        "hinge": (_gcon_hinge(hinge), ("hinge",)),
        "no shared axis": (
            _gcon_hinge((((1, 0, 0), (0, 0, 1)), ((0, 1, 0), (1, 0, 0)))),
            ("a.free",),
        ),  # fmt: skip
        "an offset": (_gcon_hinge(hinge, f=0.5), ("a.free",)),
    }
    for name, (model, joints) in cases.items():
        mt = tree_of_model(model)
        assert mt.tree.joint_names == joints, name
        assert mt.loop_rows == (() if joints == ("hinge",) else tuple(range(5))), name
