"""Markers (jaxmbd.model.markers): frames fixed on bodies, read as ``sol.markers[name]``.

References: the closed-form pose of a driven spatial two-link chain (its time derivatives by
forward-mode autodiff of the closed form, independent of the solver's velocity and
acceleration analyses), central differences of a free run's marker positions and
orientations, MuJoCo's site kinematics (``site_xpos``, ``site_xmat``) of dm_control's
acrobot and finger at the run's joint coordinates, and central differences of a loss on a
marker.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.errors import ModelError, ModelFileError

G = 9.81
L1, L2 = 1.0, 0.8
# the second hinge's axis (global at the drawn pose), not parallel to the first (x): the
# chain moves in 3D
AXIS2 = np.array([0.0, 1.0, 1.0]) / np.sqrt(2.0)
TIP = np.array([0.1, 0.05, -L1 - L2])  # global point of the tip marker as drawn
ELBOW = np.array([0.0, 0.0, -L1])
C, S = np.cos(0.4), np.sin(0.4)
TIP_AXES = np.array([[C, 0.0, S], [0.0, 1.0, 0.0], [-S, 0.0, C]])  # global, as drawn


def _rot(axis, angle):
    """Rotation about the unit ``axis`` (jnp, differentiable in ``angle``)."""
    k = jnp.asarray(axis)
    K = jnp.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return jnp.eye(3) + jnp.sin(angle) * K + (1.0 - jnp.cos(angle)) * K @ K


def _two_link(*, driven: bool):
    b = mbd.ModelBuilder("two_link", gravity=(0.0, 0.0, -G))
    b.add_body("upper", mass=1.0, inertia=[0.08, 0.08, 0.01], r=(0.0, 0.0, -L1 / 2))
    b.add_body("lower", mass=0.6, inertia=[0.03, 0.03, 0.005], r=(0.0, 0.0, -L1 - L2 / 2))
    b.revolute("shoulder", body_i="ground", body_j="upper", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("elbow", body_i="upper", body_j="lower", point=ELBOW, axis=AXIS2)
    b.add_marker("tip", "lower", TIP, axes=TIP_AXES)
    b.add_marker("elbow_mark", "upper", ELBOW)
    if driven:
        b.rotation_driver("drive_shoulder", body_i="ground", body_j="upper", axis=(1, 0, 0),
                          angle="t")  # fmt: skip
        b.rotation_driver("drive_elbow", body_i="upper", body_j="lower", axis=AXIS2,
                          angle="0.5*sin(2*t)")  # fmt: skip
    else:
        b.set_joint_state("shoulder", q=0.6, qdot=1.5)
        b.set_joint_state("elbow", q=-0.4, qdot=2.0)
        b.add_marker("imu_site", "lower", (0.05, 0.0, -L1 - 0.6), axes=TIP_AXES)
        b.add_sensor("imu", kind="accelerometer", marker="imu_site")
        b.add_sensor("imu_by_hand", kind="accelerometer", body="lower",
                     site=(0.05, 0.0, -0.6 + L2 / 2), frame=TIP_AXES)  # fmt: skip
    return b.build()


def _closed_form_tip(t):
    """(position, orientation) of the tip marker of the driven chain at time t."""
    R1 = _rot(np.array([1.0, 0.0, 0.0]), t)
    R2 = _rot(AXIS2, 0.5 * jnp.sin(2.0 * t))  # relative rotation, drawn-pose axes
    position = R1 @ (ELBOW + R2 @ (TIP - ELBOW))
    return position, R1 @ R2 @ TIP_AXES


def test_kinematic_markers_follow_the_closed_form():
    """Position, velocity, acceleration, orientation and angular rates of a marker of a
    driven spatial chain against the closed form and its autodiff time derivatives."""
    model = _two_link(driven=True)
    sol = mbd.kinematics(model, t_end=1.0, h=0.05)
    tip = sol.markers["tip"]
    t = np.asarray(sol.t)

    def position(t):
        return _closed_form_tip(t)[0]

    def orientation(t):
        return _closed_form_tip(t)[1]

    p = jax.vmap(position)(t)
    v = jax.vmap(jax.jacfwd(position))(t)
    a = jax.vmap(jax.jacfwd(jax.jacfwd(position)))(t)
    R = jax.vmap(orientation)(t)
    R_dot = jax.vmap(jax.jacfwd(orientation))(t)
    W = R_dot @ jnp.swapaxes(R, -1, -2)  # the global angular velocity's skew matrix
    w = jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=-1)
    w_dot = jax.vmap(jax.jacfwd(lambda s: jax.jacfwd(orientation)(s)
                                 @ orientation(s).T))(t)  # fmt: skip
    alpha = jnp.stack([w_dot[:, 2, 1], w_dot[:, 0, 2], w_dot[:, 1, 0]], axis=-1)
    np.testing.assert_allclose(tip.position[0], TIP, rtol=0, atol=ROUND_OFF)  # as drawn
    np.testing.assert_allclose(tip.orientation[0], TIP_AXES, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(tip.position, p, rtol=0, atol=5e-13)
    np.testing.assert_allclose(tip.velocity, v, rtol=0, atol=2e-13)
    np.testing.assert_allclose(tip.acceleration, a, rtol=0, atol=7e-13)
    np.testing.assert_allclose(tip.orientation, R, rtol=0, atol=4e-13)
    np.testing.assert_allclose(tip.angular_velocity, w, rtol=0, atol=2e-13)
    np.testing.assert_allclose(tip.angular_acceleration, alpha, rtol=0, atol=4e-13)
    # the elbow marker sits on the first hinge's circle of radius L1 about x
    elbow = np.asarray(sol.markers["elbow_mark"].position)
    np.testing.assert_allclose(np.linalg.norm(elbow, axis=-1), L1, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(elbow[:, 0], 0.0, rtol=0, atol=ROUND_OFF)


@pytest.fixture(scope="module")
def free_run():
    model = _two_link(driven=False)
    return model, mbd.simulate(model, integrator="rkmk", t_end=0.3, h=1e-3)


def test_dynamic_markers_are_the_time_derivatives_of_their_position(free_run):
    """A free spatial double pendulum (RK4): the markers' velocity, acceleration and angular
    velocity equal central differences of their position, velocity and orientation."""
    _, sol = free_run
    h = float(sol.t[1] - sol.t[0])
    for name in ("tip", "elbow_mark", "imu_site"):
        m = sol.markers[name]
        p, v, a, R = (np.asarray(x) for x in (m.position, m.velocity, m.acceleration,
                                                m.orientation))  # fmt: skip
        v_fd = (p[2:] - p[:-2]) / (2 * h)
        a_fd = (v[2:] - v[:-2]) / (2 * h)
        scale_v, scale_a = np.abs(v).max(), np.abs(a).max()
        # central differences: error h^2/6 |p'''| ~ 1e-6 of the scale here
        np.testing.assert_allclose(v_fd, v[1:-1], atol=1e-5 * scale_v, err_msg=name)
        np.testing.assert_allclose(a_fd, a[1:-1], atol=2e-5 * scale_a, err_msg=name)
        W = (R[2:] - R[:-2]) / (2 * h) @ np.swapaxes(R[1:-1], -1, -2)
        w_fd = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=-1)
        w = np.asarray(m.angular_velocity)
        np.testing.assert_allclose(w_fd, w[1:-1], atol=1e-5 * np.abs(w).max(), err_msg=name)
        np.testing.assert_allclose(np.linalg.det(R), 1.0, rtol=0, atol=ROUND_OFF)
    # the marker on a body moves with it: the distance between two markers on one body
    # stays as drawn
    d = np.linalg.norm(np.asarray(sol.markers["tip"].position)
                       - np.asarray(sol.markers["imu_site"].position), axis=-1)  # fmt: skip
    np.testing.assert_allclose(
        d, np.linalg.norm(TIP - (0.05, 0.0, -L1 - 0.6)), rtol=0, atol=ROUND_OFF
    )


def test_a_marker_is_a_sensor_site(free_run):
    """add_sensor(marker=) takes the marker's body, point and axes: it reads what the same
    sensor given by body, site and frame reads, and the accelerometer is the marker's
    proper acceleration in the marker's axes."""
    model, sol = free_run
    k, j = model.sensors.index("imu"), model.sensors.index("imu_by_hand")
    assert model.sensors.bodies[k] == model.sensors.bodies[j]
    np.testing.assert_allclose(model.sensors.site[k], model.sensors.site[j], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(
        model.sensors.frame[k], model.sensors.frame[j], rtol=0, atol=ROUND_OFF
    )
    m = sol.markers["imu_site"]
    proper = np.asarray(m.acceleration) - np.array([0.0, 0.0, -G])
    expected = np.einsum("tji,tj->ti", np.asarray(m.orientation), proper)
    np.testing.assert_allclose(sol.sensors["imu"], expected, rtol=0, atol=2e-14)


def test_marker_readings_are_differentiable(free_run):
    """A loss on sol.markers is differentiable in the marker's point and axes (model
    leaves) and in the run's body states: jax.grad against central differences."""
    model, sol = free_run
    markers = model.markers

    def loss(point, axes, omega):
        moved = eqx.tree_at(lambda m: (m.point, m.axes), markers, (point, axes))
        run = eqx.tree_at(lambda s: s.omega, sol, omega)
        tip = mbd.markers.MarkerMap(moved, run)["tip"]
        return jnp.sum(tip.acceleration[-1] ** 2) + jnp.sum(tip.orientation[-1, :, 0])

    args = (markers.point, markers.axes, sol.omega)
    grads = jax.grad(loss, argnums=(0, 1, 2))(*args)
    rng = np.random.default_rng(0)
    eps = 1e-6
    for k, g in enumerate(grads):
        direction = jnp.asarray(rng.normal(size=args[k].shape))

        def shifted(sign, k=k, direction=direction):
            moved = list(args)
            moved[k] = args[k] + sign * eps * direction
            return loss(*moved)

        central = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
        assert abs(float(jnp.sum(g * direction))) > 1e-3
        np.testing.assert_allclose(jnp.sum(g * direction), central, rtol=6e-9)


@pytest.mark.slow  # a gradient program through simulate: ~40 s to compile on 2 cores
def test_markers_are_differentiable_in_a_loss():
    """d(final tip height)/d(lower link's mass) through simulate and sol.markers against
    central differences (a short run)."""
    model = _two_link(driven=False)
    run = dict(integrator="rkmk", t_end=0.02, h=1e-3)

    def loss(mass):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].set(mass))
        return mbd.simulate(m, **run).markers["tip"].position[-1, 2]

    grad = jax.grad(loss)(0.6)
    eps = 1e-4
    central = (loss(0.6 + eps) - loss(0.6 - eps)) / (2 * eps)
    assert abs(float(grad)) > 1e-6  # the mass matters: the links' coupling
    np.testing.assert_allclose(grad, central, rtol=1e-5)


def test_model_files_keep_markers(tmp_path):
    model = _two_link(driven=False).with_joint_state("elbow", q=0.3)
    path = mbd.save_model(model, tmp_path / "m.json")
    again = mbd.load_model(path)
    assert again.markers.marker_names == model.markers.marker_names
    assert again.markers.bodies == model.markers.bodies
    np.testing.assert_allclose(again.markers.point, model.markers.point, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(again.markers.axes, model.markers.axes, rtol=0, atol=ROUND_OFF)


def test_bad_markers_are_named():
    b = mbd.ModelBuilder("m")
    b.add_body("a", mass=1.0, inertia=[1, 1, 1])
    b.add_marker("p", "a", (0, 0, 1))
    with pytest.raises(ModelError, match="marker 'p': duplicate"):
        b.add_marker("p", "a", (0, 0, 1))
    with pytest.raises(ModelError, match=r"marker 'q'.body: unknown body 'nope'"):
        b.add_marker("q", "nope", (0, 0, 1))
    with pytest.raises(ModelError, match="the ground does not move"):
        b.add_marker("q", "ground", (0, 0, 1))
    with pytest.raises(ModelError, match=r"marker 'q'.axes: not a rotation matrix"):
        b.add_marker("q", "a", (0, 0, 1), axes=np.zeros((3, 3)) + np.eye(3) * [1, 1, -1])
    with pytest.raises(ModelError, match=r"marker 'q'.point"):
        b.add_marker("q", "a", (0, 1))
    with pytest.raises(ModelError, match=r"sensor 's'.marker: no marker 'zz'"):
        b.add_sensor("s", kind="gyro", marker="zz")
    with pytest.raises(ModelError, match="leave body=, site= and frame= out"):
        b.add_sensor("s", kind="gyro", marker="p", body="a")
    model = b.build()
    sol = mbd.Solution.__new__(mbd.Solution)  # only the mapping's lookup is exercised
    object.__setattr__(sol, "marker_element", model.markers)
    with pytest.raises(KeyError, match=r"no marker 'tipp'; the model's markers are \['p'\]"):
        mbd.markers.MarkerMap(model.markers, sol)["tipp"]
    with pytest.raises(KeyError, match="has no markers"):
        mbd.markers.MarkerMap(None, sol)["tip"]


def test_model_file_markers_are_checked(tmp_path):
    model = _two_link(driven=False)
    path = mbd.save_model(model, tmp_path / "m.json")
    import json

    doc = json.loads(path.read_text())
    doc["markers"][0]["body"] = "nope"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=r"markers\[0\] \('tip'\).*unknown body 'nope'"):
        mbd.load_model(path)


def _suite(name: str) -> Path:
    dm_control = pytest.importorskip("dm_control")
    return Path(dm_control.__file__).parent / "suite" / name


@pytest.mark.parametrize(
    ("file", "states"),
    [
        ("acrobot.xml", {"shoulder": (0.7, 1.0), "elbow": (-0.5, 2.0)}),
        pytest.param(
            "finger.xml",
            {"proximal": (0.4, 1.0), "distal": (-0.3, -1.0), "hinge": (0.2, 3.0)},
            marks=pytest.mark.slow,  # a second file, the same mapping
        ),
    ],
)
def test_mjcf_sites_are_markers_at_mujocos_site_poses(file, states):
    """Every named site of a moving body becomes a marker: along a run, its position and
    axes equal MuJoCo's site kinematics at the run's joint coordinates."""
    mujoco = pytest.importorskip("mujoco")
    path = _suite(file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the file's unmapped features are named in one
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    sites = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, k) for k in range(m.nsite)]
    on_bodies = [s for k, s in enumerate(sites) if m.site_bodyid[k] != 0]
    assert model.markers.marker_names == tuple(on_bodies)
    for joint, (q, qdot) in states.items():
        model = model.with_joint_state(joint, q=q, qdot=qdot)
    sol = mbd.simulate(model, t_end=0.05, h=1e-3)  # gen_alpha: joints closed to tol
    d = mujoco.MjData(m)
    worst = 0.0
    for k in (0, 25, 50):
        for joint in model.joint_names:
            d.qpos[m.joint(joint).qposadr[0]] = float(sol.joints[joint].q[k])
        mujoco.mj_kinematics(m, d)
        for name in on_bodies:
            motion = sol.markers[name]
            worst = max(
                worst,
                np.abs(np.asarray(motion.position[k]) - d.site(name).xpos).max(),
                np.abs(np.asarray(motion.orientation[k]) - d.site(name).xmat.reshape(3, 3)).max(),
            )
    assert float(np.ptp(np.asarray(sol.joints[model.joint_names[0]].q))) > 0.01  # it moved
    assert worst < ROUND_OFF, worst
