"""Sensors (jaxmbd.sensors): every kind against closed forms, joint reactions against the
static and dynamic closed forms of a pendulum and the Newton-Euler balance of a four-bar
loop's bodies, noise statistics with a fixed key, MJCF sensors against MuJoCo's
sensordata, a policy that observes sensors, and gradients through sensor readings.

References: a rod spinning at constant rate about a vertical hinge (every reading is a
closed form of t), a pendulum swinging under gravity (its angular acceleration from the
equation of motion I_p theta_ddot = -m g d sin theta), the Newton-Euler equations of each
body of a planar four-bar, MuJoCo's RK4 on the same MJCF file, central differences.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.errors import ModelError
from jaxmbd.sensors import joint_axes

G = 9.81
# the spinner: rod of mass M, centre of mass at distance D from a vertical hinge, spinning
# at W rad/s; its sensors sit at the site S (body frame, from the centre of mass) with the
# site axes FRAME (a rotation by 0.3 rad about body x)
M, D, W = 2.0, 0.5, 3.0
S = np.array([0.2, -0.1, 0.05])
C3, S3 = np.cos(0.3), np.sin(0.3)
FRAME = np.array([[1.0, 0.0, 0.0], [0.0, C3, -S3], [0.0, S3, C3]])
H, T_END = 1e-3, 0.3
# RK4 on the rA body state: its accelerations satisfy the constraints at acceleration level
# (gen_alpha's are second-order approximations of them), so the closed forms hold to ~1e-9
RUN = dict(integrator="rkmk", t_end=T_END, h=H)


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _quat_mul(p, q):
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    w1, v1, w2, v2 = p[0], p[1:], q[0], q[1:]
    return np.concatenate([[w1 * w2 - v1 @ v2], w1 * v2 + w2 * v1 + np.cross(v1, v2)])


def spinner(*, omega=W, noise=0.0):
    b = mbd.ModelBuilder("spinner", gravity=(0.0, 0.0, -G))
    b.add_body("arm", mass=M, inertia=[0.01, 0.05, 0.05], r=(D, 0.0, 0.0))
    b.revolute("hinge", body_i="ground", body_j="arm", point=(0, 0, 0), axis=(0, 0, 1))
    b.set_joint_state("hinge", q=0.0, qdot=omega)
    site = {"body": "arm", "site": S, "frame": FRAME}
    b.add_sensor("angle", kind="joint_position", joint="hinge")
    b.add_sensor("rate", kind="joint_velocity", joint="hinge", noise=noise)
    b.add_sensor("pos", kind="body_position", **site, noise=noise)
    b.add_sensor("quat", kind="body_quaternion", **site)
    b.add_sensor("linvel", kind="body_linear_velocity", **site)
    b.add_sensor("angvel", kind="body_angular_velocity", body="arm")
    b.add_sensor("velocimeter", kind="velocimeter", **site)
    b.add_sensor("gyro", kind="gyro", **site, noise=noise)
    b.add_sensor("imu", kind="accelerometer", **site)
    b.add_sensor("force", kind="joint_reaction_force", joint="hinge")
    b.add_sensor("torque", kind="joint_reaction_torque", joint="hinge")
    return b.build()


@pytest.fixture(scope="module")
def spin():
    model = spinner()
    return model, mbd.simulate(model, **RUN)


def test_spinner_every_kind_matches_its_closed_form(spin):
    """Uniform rotation theta = W t about the vertical hinge: every reading is a closed form
    of t (the accelerometer: centripetal W^2 rho towards the axis and +g up, in the site
    frame; the hinge carries m g and the centripetal force, and the moment m g D of the
    weight about the joint point)."""
    model, sol = spin
    t = np.asarray(sol.t)
    read = {name: np.asarray(sol.sensors[name]) for name in sol.sensors}
    assert list(read) == list(model.sensors.sensor_names)
    A = np.stack([_rz(W * tk) for tk in t])  # body to global
    rho = np.array([D, 0.0, 0.0]) + S  # the site from the hinge axis, body frame
    pos = np.einsum("tij,j->ti", A, rho)
    vel = np.cross([0.0, 0.0, W], pos)
    acc = np.cross([0.0, 0.0, W], vel)
    gvec = np.array([0.0, 0.0, -G])
    to_site = np.einsum("ji,tkj->tik", FRAME, A)  # F^T A^T
    quat = np.stack([_quat_mul([np.cos(W * tk / 2), 0, 0, np.sin(W * tk / 2)],
                               [np.cos(0.15), np.sin(0.15), 0, 0]) for tk in t])  # fmt: skip
    quat = np.where(quat[:, :1] < 0, -quat, quat)
    r_cm = np.einsum("tij,j->ti", A, [D, 0.0, 0.0])
    f = M * (np.cross([0.0, 0.0, W], np.cross([0.0, 0.0, W], r_cm)) - gvec)  # on the arm
    n = np.cross(r_cm, f)  # about the joint point (no moment about the centre of mass)
    F_j = np.einsum("tij,jk->tik", A, np.asarray(joint_axes(model.joints[0])))  # joint axes
    expected = {
        "angle": W * t[:, None],
        "rate": np.full((len(t), 1), W),
        "pos": pos,
        "quat": quat,
        "linvel": vel,
        "angvel": np.tile([0.0, 0.0, W], (len(t), 1)),
        "velocimeter": np.einsum("tij,tj->ti", to_site, vel),
        "gyro": np.tile(FRAME.T @ [0.0, 0.0, W], (len(t), 1)),
        "imu": np.einsum("tij,tj->ti", to_site, acc - gvec),
        "force": np.einsum("tji,tj->ti", F_j, f),
        "torque": np.einsum("tji,tj->ti", F_j, n),
    }
    scale = {"imu": G, "force": M * G, "torque": M * G * D}
    for name, value in expected.items():
        assert read[name].shape == value.shape, name
        err = np.abs(read[name] - value).max() / scale.get(name, 1.0)
        assert err < ROUND_OFF, (name, err)
    # the sensor vector: the readings concatenated in model order
    vector = np.asarray(sol.sensors.vector())
    assert vector.shape == (len(t), model.sensors.size)
    np.testing.assert_array_equal(vector, np.concatenate(list(read.values()), axis=1))


# the pendulum: rod of mass PM with its centre of mass PD below a horizontal hinge (axis y)
PM, PD, PI, SITE = 1.5, 0.4, 0.02, 0.25


def pendulum(theta0):
    b = mbd.ModelBuilder("pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=PM, inertia=[PI, PI, 0.001], r=(0.0, 0.0, -PD))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.set_joint_state("hinge", q=theta0)
    b.add_sensor("imu", kind="accelerometer", body="rod", site=(0.0, 0.0, -SITE))
    b.add_sensor("force", kind="joint_reaction_force", joint="hinge")
    b.add_sensor("torque", kind="joint_reaction_torque", joint="hinge")
    return b.build()


@pytest.fixture(scope="module")
def swing():
    model = pendulum(1.0)
    return model, mbd.simulate(model, **RUN)


def test_joint_reactions_are_filled_in_only_for_the_sensors_that_read_them(monkeypatch):
    """A run's tree-joint multipliers (a Newton-Euler pass over every row of the run: a
    tenth of a plain 1000-step call of dm_control's hopper) are computed for the joint
    reaction sensors, which read them, and for no other sensor."""
    from jaxmbd.joint_space import run as joint_run

    calls = []
    fill = joint_run.tree_multipliers
    monkeypatch.setattr(joint_run, "tree_multipliers", lambda m, s: calls.append(1) or fill(m, s))
    b = mbd.ModelBuilder("pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=PM, inertia=[PI, PI, 0.001], r=(0.0, 0.0, -PD))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.set_joint_state("hinge", q=1.0)
    b.add_sensor("imu", kind="accelerometer", body="rod", site=(0.0, 0.0, -SITE))
    sol = mbd.simulate(b.build(), **RUN)  # the swinging pendulum's program
    assert calls == [] and sol.sensors["imu"].shape == (len(sol.t), 3)
    mbd.simulate(pendulum(1.0), **RUN)
    assert calls == [1]


def test_pendulum_hanging_at_rest_carries_its_weight():
    """Static closed form: the hinge of a hanging pendulum carries m g straight up and no
    moment; the accelerometer reads +g up."""
    model = pendulum(0.0)
    sol = mbd.simulate(model, **RUN)  # the swinging pendulum's program
    F_j = np.asarray(joint_axes(model.joints[0]))  # the rod hangs in its drawn pose
    force = np.asarray(sol.sensors["force"]) @ F_j.T  # back to global
    np.testing.assert_allclose(force, np.tile([0.0, 0.0, PM * G], (len(sol.t), 1)), rtol=0,
                               atol=ROUND_OFF * PM * G)  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.sensors["torque"]), 0.0, rtol=0,
                               atol=ROUND_OFF * PM * G * PD)  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.sensors["imu"]), [[0.0, 0.0, G]] * len(sol.t),
                               rtol=0, atol=ROUND_OFF * G)  # fmt: skip


def test_pendulum_accelerometer_and_reactions_match_the_equation_of_motion(swing):
    """Swinging from 1 rad: with theta and theta_dot of the run and theta_ddot = -m g d
    sin(theta) / I_p, the site's proper acceleration (tangential, centripetal, -g) in the
    body frame, the hinge force m a_cm - m g, and no moment about the hinge point."""
    model, sol = swing
    c = sol.joints["hinge"]
    th, thd = np.asarray(c.q), np.asarray(c.qdot)
    thdd = -PM * G * PD * np.sin(th) / (PI + PM * PD**2)
    assert np.abs(th - 1.0).max() > 0.2  # it swings
    w = np.stack([np.zeros_like(th), thd, np.zeros_like(th)], 1)  # body frame
    wd = np.stack([np.zeros_like(th), thdd, np.zeros_like(th)], 1)

    def body_acc(rho):  # acceleration of a body point rho (from the hinge), body frame
        return np.cross(wd, rho) + np.cross(w, np.cross(w, rho))

    A = np.stack([_ry(x) for x in th])
    g_bar = np.einsum("tji,j->ti", A, [0.0, 0.0, -G])
    imu = body_acc(np.array([0.0, 0.0, -PD - SITE])) - g_bar
    np.testing.assert_allclose(np.asarray(sol.sensors["imu"]), imu, rtol=0, atol=ROUND_OFF * G)
    f_bar = PM * (body_acc(np.array([0.0, 0.0, -PD])) - g_bar)  # on the rod, body frame
    F_j = np.asarray(joint_axes(model.joints[0]))
    np.testing.assert_allclose(np.asarray(sol.sensors["force"]), f_bar @ F_j, rtol=0,
                               atol=ROUND_OFF * PM * G)  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.sensors["torque"]), 0.0, rtol=0,
                               atol=ROUND_OFF * PM * G * PD)  # fmt: skip


# planar four-bar (crank, coupler, rocker; four parallel revolutes, 3 redundant rows)
Z = (0.0, 0.0, 1.0)


def four_bar():
    a, b_, c, d, theta = 1.0, 3.5, 3.0, 4.0, np.pi / 3
    o2, o4 = np.zeros(3), np.array([d, 0.0, 0.0])
    pa = a * np.array([np.cos(theta), np.sin(theta), 0.0])
    # the rocker's end: |pb - pa| = b, |pb - o4| = c (the open branch, above the ground)
    e = o4 - pa
    L = np.linalg.norm(e)
    x = (b_**2 - c**2 + L**2) / (2 * L)
    y = np.sqrt(b_**2 - x**2)
    pb = pa + x * e / L + y * np.array([-e[1], e[0], 0.0]) / L
    bld = mbd.ModelBuilder("four_bar", gravity=(0.0, -G, 0.0))
    for name, p, q, mass in (("crank", o2, pa, 1.0), ("coupler", pa, pb, 2.0),
                             ("rocker", o4, pb, 1.5)):  # fmt: skip
        u = (q - p) / np.linalg.norm(q - p)
        ell = float(np.linalg.norm(q - p))
        bld.add_body(name, mass=mass, inertia=[1e-3, mass * ell**2 / 12, mass * ell**2 / 12],
                     r=(p + q) / 2, axes=(u, Z))  # fmt: skip
    joints = (("J1", "ground", "crank", o2), ("J2", "crank", "coupler", pa),
              ("J3", "coupler", "rocker", pb), ("J4", "rocker", "ground", o4))  # fmt: skip
    for name, i, j, p in joints:
        bld.revolute(name, body_i=i, body_j=j, point=p, axis=Z)
        bld.add_sensor(f"{name}.force", kind="joint_reaction_force", joint=name)
        bld.add_sensor(f"{name}.torque", kind="joint_reaction_torque", joint=name)
    return bld.build()


@pytest.fixture(scope="module")
def four_bar_runs():
    """The four-bar's run in rA (redundant rows dropped) and in joint coordinates, where
    the loop's closing joint carries multipliers and the tree joints' reactions come from
    Newton-Euler."""
    model = four_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        ra = mbd.simulate(model, formulation="rA", t_end=0.2, h=5e-3)
    joint = mbd.simulate(model, formulation="joint", integrator="rk", t_end=0.2, h=5e-3)
    return model, {"rA": ra, "joint": joint}


@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_four_bar_reactions_balance_every_body(four_bar_runs, formulation):
    """A closed loop: each body's Newton-Euler equations hold with the joint reactions read
    as sensors (joint j's load on its body j, minus it on body i), and they equal
    diagnostics.reaction_forces(per="joint", at="joint", frame="joint") on body j (the
    same axes: the joint axis first), in both formulations (in joint coordinates the
    reactions are Newton-Euler's, which must not count the tree joints' rows that the
    sensors' run filled as loads again)."""
    model, runs = four_bar_runs
    sol = runs[formulation]
    r, A = np.asarray(sol.r), np.asarray(sol.A)
    w, wd = np.asarray(sol.omega), np.asarray(sol.omegadot)
    force = np.zeros_like(r)
    moment = np.zeros_like(r)  # about each centre of mass, global
    A_all = np.concatenate([A, np.tile(np.eye(3), (len(A), 1, 1, 1))], axis=1)
    r_all = np.concatenate([r, np.zeros_like(r[:, :1])], axis=1)
    reactions = mbd.diagnostics.reaction_forces(model, sol, per="joint", at="joint",
                                                frame="joint")  # fmt: skip
    for defn in model.joints:
        F_j = np.einsum("tij,jk->tik", A_all[:, defn.body_j], np.asarray(joint_axes(defn)))
        f_joint = np.asarray(sol.sensors[f"{defn.name}.force"])
        n_joint = np.asarray(sol.sensors[f"{defn.name}.torque"])
        k = reactions.names.index(defn.name)
        np.testing.assert_allclose(f_joint, np.asarray(reactions.force_j[:, k]), rtol=0,
                                   atol=3e-14)  # fmt: skip
        np.testing.assert_allclose(n_joint, np.asarray(reactions.torque_j[:, k]), rtol=0,
                                   atol=7e-14)  # fmt: skip
        np.testing.assert_allclose(n_joint[:, 0], 0.0, rtol=0, atol=2e-14)  # free about the axis
        f = np.einsum("tij,tj->ti", F_j, f_joint)  # global
        n = np.einsum("tij,tj->ti", F_j, n_joint)
        p = r_all[:, defn.body_j] + np.einsum("tij,j->ti", A_all[:, defn.body_j],
                                              np.asarray(defn.s_bar_j))  # fmt: skip
        for body, sign in ((defn.body_j, 1.0), (defn.body_i, -1.0)):
            if body < model.nb:
                force[:, body] += sign * f
                moment[:, body] += sign * (n + np.cross(p - r[:, body], f))
    assert np.abs(force).max() > 1.0  # the joints carry load
    mass = np.asarray(model.mass)[None, :, None]
    np.testing.assert_allclose(force, mass * (np.asarray(sol.rddot) - [0.0, -G, 0.0]),
                               rtol=0, atol=ROUND_OFF * 4.5 * G)  # fmt: skip
    J = np.asarray(model.inertia)
    euler = np.einsum("bij,tbj->tbi", J, wd) + np.cross(w, np.einsum("bij,tbj->tbi", J, w))
    # rA's moments hold to its Newton tolerance, joint coordinates' to round-off
    tol = 1e-8 * 50 if formulation == "rA" else 1e-9
    np.testing.assert_allclose(np.einsum("tbji,tbj->tbi", A, moment), euler, atol=tol)


def test_four_bar_reaction_sensors_in_joint_coordinates_equal_ra(four_bar_runs):
    """The loop's reactions read by the sensors in joint coordinates (tree joints by
    Newton-Euler, the closing joint by its multipliers) are rA's, to the runs' agreement:
    h = 5e-3 over 0.2 s, RK4 against generalized-alpha: positions within 1e-5 m, loads
    within 1e-3 of their largest (generalized-alpha's second order at this step)."""
    model, runs = four_bar_runs
    ra, joint = runs["rA"], runs["joint"]
    assert np.abs(np.asarray(joint.r) - np.asarray(ra.r)).max() < 1e-5
    for name in ra.sensors:
        a, b = np.asarray(joint.sensors[name]), np.asarray(ra.sensors[name])
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-4 * max(1.0, np.abs(b).max()))


def _read_site_height(model, mount, run):
    """Height of the site above the ground plane z = 0 (one component)."""
    p = run.r[:, mount.body] + jnp.einsum("tij,j->ti", run.A[:, mount.body], mount.site)
    return p[:, 2:3]


def test_a_sensor_kind_registered_from_outside_reads_like_a_built_in():
    """A kind added with register_sensor_kind is accepted by add_sensor, has its dim, reads
    its function along the run and matches the built-in body_position's z component."""
    mbd.register_sensor_kind(mbd.SensorKind("site_height", "body", _read_site_height, 1))
    assert mbd.sensors.SENSOR_KINDS["site_height"] == "body"
    b = mbd.ModelBuilder("pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=1.0, inertia=[0.01, 0.01, 0.001], r=(0.5, 0.0, 0.0))
    b.revolute("pin", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_sensor("height", kind="site_height", body="rod", site=S)
    b.add_sensor("pos", kind="body_position", body="rod", site=S)
    model = b.build()
    assert model.sensors.dims == (1, 3)
    sol = mbd.simulate(model, integrator="rkmk", t_end=0.05, h=1e-3)
    height, pos = np.asarray(sol.sensors["height"]), np.asarray(sol.sensors["pos"])
    assert height.shape == (len(sol.t), 1)
    np.testing.assert_array_equal(height[:, 0], pos[:, 2])
    assert height[-1, 0] < height[0, 0]  # the pendulum falls
    with pytest.raises(ValueError, match="built in"):
        mbd.register_sensor_kind(mbd.SensorKind("gyro", "body", _read_site_height, 1))


def test_noise_statistics_and_key(spin):
    """Gaussian noise with the sensor's standard deviation, only with a key: zero mean and
    the given std within sampling error, the same readings for the same key, other ones
    for another key, independent between sensors, none on noise-free sensors."""
    sigma = 0.05
    model = spinner(noise=sigma)
    clean = spin[1]
    key = jax.random.PRNGKey(7)
    sol = mbd.simulate(model, **RUN, sensor_key=key)  # the spinner's program
    again = mbd.simulate(model, **RUN, sensor_key=key)
    other = mbd.simulate(model, **RUN, sensor_key=jax.random.PRNGKey(8))
    plain = mbd.simulate(model, **RUN)  # no key: noise-free
    noise = {}
    for name in ("rate", "pos", "gyro"):
        noise[name] = np.asarray(sol.sensors[name]) - np.asarray(clean.sensors[name])
        z = noise[name].ravel() / sigma
        assert abs(z.mean()) < 4.0 / np.sqrt(z.size), (name, z.mean())
        assert abs(z.std() - 1.0) < 4.0 / np.sqrt(2 * z.size), (name, z.std())
        np.testing.assert_array_equal(np.asarray(again.sensors[name]), sol.sensors[name])
        assert np.abs(np.asarray(other.sensors[name]) - sol.sensors[name]).min() > 0
        np.testing.assert_allclose(np.asarray(plain.sensors[name]), clean.sensors[name],
                                   rtol=0, atol=ROUND_OFF)  # fmt: skip
    np.testing.assert_allclose(
        np.asarray(sol.sensors["imu"]), clean.sensors["imu"], rtol=0, atol=ROUND_OFF
    )
    corr = np.corrcoef(noise["pos"][:, 0], noise["gyro"][:, 0])[0, 1]
    assert abs(corr) < 4.0 / np.sqrt(len(sol.t)), corr
    with pytest.raises(ValueError, match="has no sensors"):
        mbd.simulate(pendulum_without_sensors(), t_end=0.01, h=H, sensor_key=key)


def pendulum_without_sensors():
    b = mbd.ModelBuilder("bare", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=1.0, inertia=[0.1, 0.1, 0.1], r=(0.0, 0.0, -1.0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    return b.build()


# a cart on a rail, pushed by a motor; the policy observes its sensors
CART = 2.0


def cart(*, accelerometer=False):
    b = mbd.ModelBuilder("cart", gravity=(0.0, 0.0, -G))
    b.add_body("cart", mass=CART, inertia=[0.1, 0.1, 0.1], r=(0.0, 0.0, 0.0))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
    b.set_joint_state("rail", q=0.3)
    b.add_actuator("push", joint="rail", kind="motor")
    b.add_sensor("x", kind="joint_position", joint="rail", noise=0.01)
    b.add_sensor("v", kind="body_linear_velocity", body="cart", site=(0.1, 0.0, 0.0), noise=0.02)
    if accelerometer:
        b.add_sensor("imu", kind="accelerometer", body="cart")
    return b.build()


def test_policy_observes_the_noisy_sensor_vector():
    """The observation is the sensor vector (model order) with the run's noise: the control
    the policy chose at step k (m x_ddot at the end of the step, the motor's force) equals
    its reply to sol.sensors.vector()[k]."""
    import equinox as eqx

    class Linear(eqx.Module):
        gain: jax.Array

        def __call__(self, t, observation):
            return self.gain @ observation

    gain = jnp.array([[-8.0, -1.0, 0.5, 0.2]])
    model = cart()
    key = jax.random.PRNGKey(3)
    sol = mbd.simulate(
        model, formulation="rA", t_end=0.1, h=1e-2, policy=Linear(gain), sensor_key=key
    )
    obs = np.asarray(sol.sensors.vector())
    assert obs.shape == (len(sol.t), 4)
    u = obs[:-1] @ np.asarray(gain).T
    np.testing.assert_allclose(CART * np.asarray(sol.rddot)[1:, 0, :1], u, rtol=0, atol=ROUND_OFF)
    # the first observation is the start (x = 0.3, at rest) plus the noise of step 0
    assert 1e-4 < np.abs(obs[0] - [0.3, 0.0, 0.0, 0.0]).max() < 0.1
    with pytest.raises(ValueError, match=r"\['imu'\] need the step's accelerations"):
        mbd.simulate(cart(accelerometer=True), t_end=0.1, h=1e-2, policy=Linear(gain))


@pytest.mark.slow
def test_gradient_through_sensor_readings():
    """jax.grad of a loss of the hinge force and the accelerometer with respect to the
    rod's mass (through the run) equals central differences."""
    model = pendulum(1.0)

    def loss(mass):
        m = eqx_set(model, lambda m: m.mass, mass)
        sol = mbd.simulate(m, integrator="rkmk", t_end=0.02, h=H)
        return jnp.sum(sol.sensors["force"] ** 2) + jnp.sum(sol.sensors["imu"][:, 0])

    m0 = model.mass
    grad = jax.grad(loss)(m0)
    e = jnp.zeros_like(m0).at[0].set(1e-5)
    fd = (loss(m0 + e) - loss(m0 - e)) / 2e-5
    assert abs(float(grad[0]) - float(fd)) < 1e-6 * abs(float(fd)), (grad, fd)


@pytest.mark.slow
def test_batched_readings_equal_single_runs():
    """sol.sensors of simulate_batch (members spinning at 1, 2, 3 rad/s) has the batch axis
    first and equals each member's own run."""
    models = [spinner(omega=w) for w in (1.0, 2.0, 3.0)]
    run = dict(RUN, t_end=0.05)
    sol = mbd.simulate_batch(mbd.stack_models(models), **run)
    single = mbd.simulate(models[1], **run)
    assert sol.sensors.vector().shape == (3, 51, models[0].sensors.size)
    for name in ("imu", "force", "quat"):
        np.testing.assert_allclose(np.asarray(sol.sensors[name][1]), single.sensors[name],
                                   atol=1e-12)  # fmt: skip


def eqx_set(model, where, value):
    import equinox as eqx

    return eqx.tree_at(where, model, value)


def test_builder_errors_name_the_sensor_and_field():
    b = mbd.ModelBuilder("m")
    b.add_body("rod", mass=1.0, inertia=[1, 1, 1], r=(0, 0, -1))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    cases = [
        (dict(kind="thermometer", body="rod"), "sensor 's'.kind"),
        (dict(kind="gyro", body="nope"), r"sensor 's'.body: unknown body 'nope'"),
        (dict(kind="gyro", body="ground"), "the ground does not move"),
        (dict(kind="gyro", joint="hinge"), "is read on a body"),
        (dict(kind="joint_position", joint="x"), r"sensor 's'.joint: no joint 'x'"),
        (dict(kind="joint_position", joint="hinge", body="rod"), "read at its joint"),
        (dict(kind="gyro", body="rod", noise=-1.0), r"sensor 's'.noise"),
        (dict(kind="gyro", body="rod", frame=np.ones((3, 3))), r"sensor 's'.frame"),
        (dict(kind="gyro", body="rod", site=(0, 1)), r"sensor 's'.site"),
    ]
    for options, message in cases:
        with pytest.raises(ModelError, match=message):
            b.add_sensor("s", **options)
    b.add_sensor("s", kind="gyro", body="rod")
    with pytest.raises(ModelError, match="duplicate sensor name"):
        b.add_sensor("s", kind="gyro", body="rod")


def test_unknown_sensor_name_lists_the_sensors(spin, tmp_path):
    with pytest.raises(KeyError, match="the model's sensors are"):
        spin[1].sensors["nope"]
    sol = mbd.Solution.load(spin[1].save(tmp_path / "run.npz"))  # a file keeps no model
    assert len(sol.sensors) == 0
    with pytest.raises(KeyError, match="has no sensors"):
        sol.sensors["imu"]


def test_sensors_survive_save_and_load(tmp_path, spin):
    model = spin[0]
    path = mbd.save_model(model, tmp_path / "spinner.json")
    back = mbd.load_model(path)
    a, b = model.sensors, back.sensors
    assert (a.sensor_names, a.kinds, a.dims, a.bodies, a.joints) == (
        b.sensor_names, b.kinds, b.dims, b.bodies, b.joints)  # fmt: skip
    for field in ("site", "frame", "noise"):
        np.testing.assert_allclose(
            np.asarray(getattr(b, field)), getattr(a, field), rtol=0, atol=ROUND_OFF
        )


# -- MJCF <sensor> against MuJoCo's sensordata ------------------------------------------------
# a two-hinge arm (non-parallel axes, offset inertial frames) with a jointless weight merged
# into the lower link, a tumbling free body (asymmetric inertia: omega changes), rotated
# sites, every mapped sensor type and three unmapped ones
CHAIN_XML = """
<mujoco model="sensor_chain">
  <option timestep="1e-4" integrator="RK4" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <inertial pos="0.05 0 -0.25" mass="1.2" diaginertia="0.03 0.025 0.008"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" contype="0" conaffinity="0"/>
      <site name="upper_site" pos="0.02 0.03 -0.4" euler="20 -10 35"/>
      <body name="lower" pos="0 0 -0.5" euler="0 0 30">
        <joint name="elbow" type="hinge" axis="1 0.2 0"/>
        <inertial pos="0 0.02 -0.2" euler="10 0 5" mass="0.8" diaginertia="0.02 0.018 0.005"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02" contype="0" conaffinity="0"/>
        <site name="tip" pos="0.01 0 -0.4" euler="-30 15 60"/>
        <body name="weight" pos="0.05 0 -0.4">
          <inertial pos="0 0 0" mass="0.3" diaginertia="0.001 0.001 0.001"/>
          <site name="weight_site" pos="0 0.02 0" euler="0 40 0"/>
        </body>
      </body>
    </body>
    <body name="tumbler" pos="1 0 2" euler="10 20 30">
      <freejoint name="free"/>
      <inertial pos="0.1 0 0" euler="0 15 0" mass="0.5" diaginertia="0.004 0.006 0.008"/>
      <site name="imu" pos="0.2 0.05 -0.03" euler="45 0 -20"/>
    </body>
  </worldbody>
  <keyframe>
    <key qpos="0.8 -0.5 1 0 2 0.9 0.1 0.3 0.2" qvel="1.5 -2 0.3 -0.2 1 2 -3 5"/>
  </keyframe>
  <sensor>
    <jointpos name="q_shoulder" joint="shoulder"/>
    <jointvel name="v_elbow" joint="elbow"/>
    <framepos name="tip_pos" objtype="site" objname="tip"/>
    <framepos name="lower_com" objtype="body" objname="lower"/>
    <framepos name="lower_origin" objtype="xbody" objname="lower"/>
    <framequat name="tip_quat" objtype="site" objname="tip"/>
    <framequat name="upper_quat" objtype="body" objname="upper"/>
    <framequat name="lower_xquat" objtype="xbody" objname="lower"/>
    <framelinvel name="tip_linvel" objtype="site" objname="tip"/>
    <framelinvel name="lower_linvel" objtype="xbody" objname="lower"/>
    <frameangvel name="lower_angvel" objtype="body" objname="lower"/>
    <accelerometer name="tip_acc" site="tip"/>
    <gyro name="tip_gyro" site="tip"/>
    <velocimeter name="tip_vel" site="tip"/>
    <accelerometer name="weight_acc" site="weight_site"/>
    <framepos name="upper_site_pos" objtype="site" objname="upper_site" noise="0.01"/>
    <touch name="tip_touch" site="tip"/>
    <framepos name="relative" objtype="site" objname="tip" reftype="body" refname="upper"/>
    <subtreecom name="com" body="upper"/>
    <accelerometer name="free_acc" site="imu"/>
    <gyro name="free_gyro" site="imu"/>
    <velocimeter name="free_vel" site="imu"/>
    <framequat name="free_quat" objtype="site" objname="imu"/>
    <framepos name="free_com" objtype="body" objname="tumbler"/>
  </sensor>
</mujoco>
"""


def mujoco_sensordata(m, h, t_end, per_row=None):
    """MuJoCo's sensordata (RK4 at m's timestep) at t = k h, each from mj_forward at the
    state (MuJoCo computes sensors in mj_forward, at the start of mj_step)."""
    import mujoco

    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    rows = []
    for _ in range(int(round(t_end / h)) + 1):
        mujoco.mj_forward(m, d)
        rows.append(d.sensordata.copy())
        for _ in range(int(round(h / m.opt.timestep))):
            mujoco.mj_step(m, d)
    return np.array(rows)


def compare_sensors(m, model, sol, rows):
    """Largest difference of each mapped sensor (quaternions up to sign) over ``rows``."""
    import mujoco

    errors = {}
    for k in range(m.nsensor):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, k)
        if name not in model.sensors.sensor_names:
            continue
        theirs = rows[:, m.sensor_adr[k] : m.sensor_adr[k] + m.sensor_dim[k]]
        ours = np.asarray(sol.sensors[name])[: len(rows)]
        if int(m.sensor_type[k]) == int(mujoco.mjtSensor.mjSENS_FRAMEQUAT):
            theirs = np.where(np.sum(theirs * ours, 1, keepdims=True) < 0, -theirs, theirs)
        errors[name] = float(np.abs(ours - theirs).max())
    return errors


def test_mjcf_sensors_follow_mujoco_sensordata(tmp_path):
    """Every mapped MJCF sensor type (joint, frame on site/body/xbody, accelerometer, gyro,
    velocimeter, touch without contact, a frame against a reference, a subtree; sites on a
    merged jointless body and on a tumbling free body) follows MuJoCo's sensordata along
    RK4 runs of the same file (MuJoCo at 1e-4, jaxmbd's rkmk at 1e-3: 5e-11 measured),
    loaded with no warning; noise is mapped."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "chain.xml"
    path.write_text(CHAIN_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    assert len(model.sensors.sensor_names) == 24
    assert float(model.sensors.noise[model.sensors.index("upper_site_pos")]) == 0.01
    m = mujoco.MjModel.from_xml_path(str(path))
    h, t_end = 1e-3, 0.2
    rows = mujoco_sensordata(m, h, t_end)
    sol = mbd.simulate(model, integrator="rkmk", t_end=t_end, h=h)
    assert np.ptp(rows[:, 0]) > 0.05  # it moves
    errors = compare_sensors(m, model, sol, rows)
    assert len(errors) == 24
    assert max(errors.values()) < 2e-10, errors


@pytest.mark.slow
def test_dm_control_finger_sensors_follow_mujoco():
    """dm_control's finger (jointpos, jointvel, framepos on sites and an xbody) under random
    motor controls, contacts off in both, the same RK4 step (1e-4): the joint sensors agree
    to 1e-13 and the site positions to the RK4 drift of the hinge constraints (~5e-8 in
    0.3 s; the joint angles are relative and do not see it)."""
    mujoco = pytest.importorskip("mujoco")
    dm_control = pytest.importorskip("dm_control")
    from pathlib import Path

    path = Path(dm_control.__file__).parent / "suite" / "finger.xml"
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, 1e-4
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    with warnings.catch_warnings():  # narrow phases the finger's contacts lack (off here)
        warnings.simplefilter("ignore", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path, keyframe=None)
    h, t_end, hold = 1e-4, 0.3, 100  # controls held 0.01 s
    table = np.random.default_rng(0).uniform(-1, 1, size=(int(round(t_end / h / hold)), m.nu))
    d = mujoco.MjData(m)
    rows = []
    for u in table:
        d.ctrl[:] = u
        for _ in range(hold):
            mujoco.mj_forward(m, d)
            rows.append(d.sensordata.copy())
            mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    rows = np.array(rows + [d.sensordata.copy()])
    controls = jnp.asarray(np.repeat(table, hold, axis=0))
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", contact="none",
                       t_end=t_end, h=h, controls=controls)  # fmt: skip
    errors = compare_sensors(m, model, sol, rows)
    drift = float(np.abs(np.asarray(mbd.diagnostics.position_residual(model, sol))).max())
    assert np.ptp(rows[:, 0]) > 0.1
    for name in ("proximal", "distal", "proximal_velocity", "distal_velocity"):
        assert errors[name] < 1e-12, errors
    for name in ("touchtop_pos", "touchbottom_pos", "tip", "spinner"):
        assert errors[name] < 2 * drift + 1e-12, (errors, drift)


def test_reaction_sensors_in_joint_coordinates_equal_ra(swing):
    """The joint formulation's tree-joint reactions (Newton-Euler) read by the same sensors
    as rA's multipliers: the swinging pendulum's hinge force and torque agree, also where
    the joint run is traced (under ``jit``)."""
    model, _ = swing
    sol = mbd.simulate(model, formulation="rA", **RUN)
    joint = mbd.simulate(model, formulation="joint", **RUN)

    @eqx.filter_jit
    def traced(model):
        run = mbd.simulate(model, formulation="joint", **RUN)
        return {name: run.sensors[name] for name in ("force", "torque")}

    inside = traced(model)
    for name in ("force", "torque"):
        b = np.asarray(sol.sensors[name])
        scale = max(1.0, np.abs(b).max())
        for a in (np.asarray(joint.sensors[name]), np.asarray(inside[name])):
            assert np.abs(a).max() > 0.1 * scale or name == "torque"
            np.testing.assert_allclose(a, b, rtol=0, atol=ROUND_OFF * scale)


def test_builder_subtree_and_reference_sensors_closed_forms():
    """Sensors built in code: a subtree defaults to the body and those joined to it away
    from the ground (closed-form centre of mass, its velocity, angular momentum about it),
    a frame against a marker's frame and a fixed frame on the ground read R_ref^T (p -
    p_ref) and R_ref^T (w - w_ref), at a moving state; bad options are refused by name."""
    b = mbd.ModelBuilder("chain", gravity=(0.0, 0.0, -9.81))
    b.add_body("upper", mass=2.0, inertia=[0.03, 0.02, 0.01], r=(0.0, 0.0, -0.3))
    b.add_body("lower", mass=1.0, inertia=[0.02, 0.015, 0.01], r=(0.0, 0.0, -0.9))
    b.revolute("shoulder", body_i="ground", body_j="upper", point=(0, 0, 0), axis=(0, 1, 0))
    b.revolute("elbow", body_i="upper", body_j="lower", point=(0, 0, -0.6), axis=(1, 0, 0))
    b.add_marker("mount", "upper", (0.1, 0.0, -0.4), axes=mbd.rotations.ep_to_A(
        np.array([0.9, 0.1, 0.3, -0.2]) / np.linalg.norm([0.9, 0.1, 0.3, -0.2])))  # fmt: skip
    b.add_sensor("com", kind="subtree_com", body="upper")
    b.add_sensor("vel", kind="subtree_linear_velocity", body="upper")
    b.add_sensor("spin", kind="subtree_angular_momentum", body="ground")
    b.add_sensor("rel", kind="body_position", body="lower", site=(0.0, 0.1, 0.0),
                 reference={"marker": "mount"})  # fmt: skip
    b.add_sensor("rel_w", kind="body_angular_velocity", body="lower",
                 reference={"marker": "mount"})  # fmt: skip
    b.add_sensor("fixed", kind="body_position", body="ground", site=(1.0, 2.0, 3.0),
                 reference={"body": "lower"})  # fmt: skip
    model = b.build()
    rng = np.random.default_rng(0)
    r = np.asarray(model.r0) + rng.normal(size=(2, 3)) * 0.1
    A = np.stack([np.asarray(mbd.so3_exp(jnp.asarray(rng.normal(size=3)))) for _ in range(2)])
    rdot, omega = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    zero = np.zeros((1, 2, 3))
    read = jax.jit(lambda *x: mbd.sensors.readings(model, model.sensors.sensor_names, *x))
    values = read(jnp.zeros(1), r[None], A[None], rdot[None], omega[None], zero, zero,
                  jnp.zeros((1, model.nc)))  # fmt: skip
    got = {k: np.asarray(v[0]) for k, v in values.items()}
    m = np.asarray(model.mass)
    com, vel = m @ r / m.sum(), m @ rdot / m.sum()
    np.testing.assert_allclose(got["com"], com, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(got["vel"], vel, rtol=0, atol=ROUND_OFF)
    J = np.asarray(model.inertia)
    spin = sum(A[k] @ J[k] @ omega[k] + m[k] * np.cross(r[k] - com, rdot[k] - vel)
               for k in range(2))  # fmt: skip
    np.testing.assert_allclose(got["spin"], spin, rtol=0, atol=ROUND_OFF)
    marker = model.markers
    k = marker.marker_names.index("mount")
    p_ref = r[0] + A[0] @ np.asarray(marker.point[k])
    R_ref = A[0] @ np.asarray(marker.axes[k])
    p = r[1] + A[1] @ np.array([0.0, 0.1, 0.0])
    np.testing.assert_allclose(got["rel"], R_ref.T @ (p - p_ref), rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(got["rel_w"], R_ref.T @ (A[1] @ omega[1] - A[0] @ omega[0]),
                               rtol=0, atol=ROUND_OFF)  # fmt: skip
    np.testing.assert_allclose(got["fixed"], A[1].T @ (np.array([1.0, 2.0, 3.0]) - r[1]),
                               rtol=0, atol=ROUND_OFF)  # fmt: skip
    for options, message in (
        (dict(kind="touch", body="upper"), "zone"),
        (dict(kind="touch", body="upper", zone=("cone", (1, 1, 1))), "zone"),
        (dict(kind="gyro", body="upper", subtree=["upper"]), "takes no subtree"),
        (dict(kind="subtree_com", body="upper", subtree=["nobody"]), "nobody"),
        (dict(kind="actuator_force"), "actuator="),
    ):
        with pytest.raises(ModelError, match=message):
            b.add_sensor("bad", **options)
