"""The tree of joints of several coordinates built in code (``several_coordinates_tree`` of
tests/test_joint_builder_trees.py, checked there against rA) against MuJoCo C, the
reference wherever it runs the same model: the same mechanism written as MJCF
below, stepped by MuJoCo's RK4 (``mj_step``) beside jaxmbd's joint formulation with
``rkmk`` at the same h and the same held controls. Body poses at every step, every sensor
MuJoCo has (against ``sensordata``), the joints' coordinates (``jointpos``, ``jointvel``,
``ballquat``, ``ballangvel``) and the joints' reactions (MuJoCo's ``force``/``torque`` at
the joint point less the joint's own generalised forces) agree to round-off: jaxmbd's
``rkmk`` is MuJoCo 4's RK4 step, on the ball joint too. The rangefinder and touch sensors
(no contact here) are left to the rA comparison.

The MJCF's conventions: each builder body is a MuJoCo body at its centre of mass r (an
``<inertial>`` at the body frame with the principal moments, body axes the world's at
t = 0, as ``add_body`` draws them), nested as the tree's spanning tree; each joint's
MuJoCo joints sit on the child body at the joint point, with axes chosen so that MuJoCo's
qpos and qvel are jaxmbd's coordinates: a universal joint is two hinges (axis_i, then
axis_j, which moves with the child), negated and in reverse order where the child is body
i (``u2``: the coordinates read j relative to i); the cylindrical joint a slide and a
hinge on its axis (damping (0.1, 0.02): the slide's, the hinge's); the planar joint, whose
child is body i, a hinge about -normal through its point, then two slides along -x, -y of
its frame (x: (1, 0, 0), y: normal x x), which turn with the hinge as the coordinates are
in body i's axes; the revolute joint ``h`` (child body i) a hinge about -axis; the ball
joint's qpos is the conjugate of jaxmbd's quaternion (j relative to i) and its qvel minus
jaxmbd's rate turned into the child's frame.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_joint_builder_trees import BODY_KINDS, CONTROLS, STEPS, T_END, H, several_coordinates_tree

import jaxmbd as mbd
from jaxmbd.lie.rotations import ep_to_A
from jaxmbd.sensors import joint_axes

try:
    import mujoco
except ImportError:  # the mjcf extra
    mujoco = None
pytestmark = pytest.mark.skipif(mujoco is None, reason="needs mujoco (the mjcf extra)")

BODIES = ("a", "b", "c", "d", "e", "f")  # the builder's body order
MJCF = """
<mujoco model="several_coordinates">
  <option timestep="0.001" integrator="RK4" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="a" pos="0.05 0 -0.5">
      <inertial pos="0 0 0" mass="1.0" diaginertia="0.08 0.09 0.02"/>
      <joint name="u_1" type="hinge" pos="-0.05 0 0.5" axis="1 0 0"/>
      <joint name="u_2" type="hinge" pos="-0.05 0 0.5" axis="0 1 0"/>
      <site name="mk" pos="0.05 0 0.1"/>
      <site name="u_at" pos="-0.05 0 0.5"/>
      <body name="b" pos="0.15 0.05 -0.7">
        <inertial pos="0 0 0" mass="0.7" diaginertia="0.03 0.02 0.04"/>
        <joint name="cyl_slide" type="slide" pos="-0.2 -0.05 0.2" axis="0 0 1" damping="0.1"/>
        <joint name="cyl_angle" type="hinge" pos="-0.2 -0.05 0.2" axis="0 0 1"
               damping="0.02"/>
        <site name="cyl_at" pos="-0.2 -0.05 0.2"/>
        <body name="c" pos="0.1 0.05 -0.5">
          <inertial pos="0 0 0" mass="0.5" diaginertia="0.01 0.02 0.015"/>
          <joint name="s" type="ball" pos="-0.05 -0.05 0.2"/>
          <site name="c_site" pos="0.01 0.02 -0.03"/>
          <site name="s_at" pos="-0.05 -0.05 0.2"/>
          <body name="e" pos="0.05 -0.1 -0.4">
            <inertial pos="0 0 0" mass="0.4" diaginertia="0.01 0.012 0.008"/>
            <joint name="u2_2" type="hinge" pos="-0.05 0 0.2" axis="-1 0 -1"/>
            <joint name="u2_1" type="hinge" pos="-0.05 0 0.2" axis="0 -1 0"/>
            <site name="e_site"/>
            <site name="u2_at" pos="-0.05 0 0.2"/>
          </body>
        </body>
      </body>
    </body>
    <body name="d" pos="1 0 0.3">
      <inertial pos="0 0 0" mass="0.9" diaginertia="0.02 0.03 0.025"/>
      <joint name="p_angle" type="hinge" pos="0 0 -0.3" axis="0 -1 -1"/>
      <joint name="p_x" type="slide" axis="-1 0 0"/>
      <joint name="p_y" type="slide" axis="0 -1 1"/>
      <site name="p_at" pos="0 0 -0.3"/>
      <body name="f" pos="0.2 0.3 0">
        <inertial pos="0 0 0" mass="0.3" diaginertia="0.01 0.012 0.008"/>
        <joint name="h" type="hinge" pos="-0.1 -0.1 0" axis="-1 0 0" damping="0.05"/>
        <site name="f_site" pos="0.01 0.02 -0.03"/>
        <site name="h_at" pos="-0.1 -0.1 0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t">
      <joint joint="cyl_slide" coef="1.0"/>
      <joint joint="h" coef="0.5"/>
    </fixed>
  </tendon>
  <actuator>
    <motor name="m1" joint="cyl_angle" gear="2"/>
    <position name="m2" joint="h" kp="3" kv="0.2"/>
  </actuator>
  <sensor>
SENSORS
  </sensor>
</mujoco>
"""
# MuJoCo's sensor of each body kind ({s}: the sensor's site, {b}: its body)
MUJOCO_BODY_SENSORS = {
    "body_position": 'framepos objtype="site" objname="{s}"',
    "body_quaternion": 'framequat objtype="site" objname="{s}"',
    "body_linear_velocity": 'framelinvel objtype="site" objname="{s}"',
    "body_angular_velocity": 'frameangvel objtype="site" objname="{s}"',
    "body_x_axis": 'framexaxis objtype="site" objname="{s}"',
    "body_y_axis": 'frameyaxis objtype="site" objname="{s}"',
    "body_z_axis": 'framezaxis objtype="site" objname="{s}"',
    "velocimeter": 'velocimeter site="{s}"',
    "gyro": 'gyro site="{s}"',
    "accelerometer": 'accelerometer site="{s}"',
    "subtree_com": 'subtreecom body="{b}"',
    "subtree_linear_velocity": 'subtreelinvel body="{b}"',
    "subtree_angular_momentum": 'subtreeangmom body="{b}"',
    "interaction_force": 'force site="{s}"',
    "interaction_torque": 'torque site="{s}"',
}
# each joint's MuJoCo joints, in jaxmbd's coordinate order (their qpos is jaxmbd's q);
# the ball joint s has none (its quaternion and rate are mapped)
COORDINATES = {"u": ("u_1", "u_2"), "cyl": ("cyl_slide", "cyl_angle"), "u2": ("u2_1", "u2_2"),
               "p": ("p_x", "p_y", "p_angle"), "h": ("h",)}  # fmt: skip
CHILD = {"u": "a", "cyl": "b", "s": "c", "u2": "e", "p": "d", "h": "f"}  # MuJoCo's tree
# the builder's set_joint_state rates (test_joint_builder_trees), in MuJoCo's qvel
SET_QDOT = {"u": (0.7, -0.4), "cyl": (0.3, 1.5), "u2": (1.0, 0.5), "p": (0.5, 1.0, 2.0),
            "h": (1.0,), "s": (-0.2, 0.5, -0.9)}  # fmt: skip
OTHER_SENSORS = ("e.against_marker", "m1.force", "m2.force", "h.actuators", "cyl.actuators",
                 "t.length", "t.rate")  # fmt: skip


def mjcf() -> str:
    """The MJCF with its sensors, named as the builder's where they read the same."""
    lines = [f'<{MUJOCO_BODY_SENSORS[kind].format(s=f"{b}_site", b=b)} name="{b}.{kind}"/>'
             for b in ("c", "f") for kind in BODY_KINDS]  # fmt: skip
    lines += [
        '<framepos objtype="site" objname="e_site" reftype="site" refname="mk" '
        'name="e.against_marker"/>',
        '<actuatorfrc actuator="m1" name="m1.force"/>',
        '<actuatorfrc actuator="m2" name="m2.force"/>',
        '<jointactuatorfrc joint="h" name="h.actuators"/>',
        '<jointactuatorfrc joint="cyl_angle" name="cyl.actuators"/>',
        '<tendonpos tendon="t" name="t.length"/>',
        '<tendonvel tendon="t" name="t.rate"/>',
        '<ballquat joint="s" name="s.quat"/>',
        '<ballangvel joint="s" name="s.angvel"/>',
    ]
    for names in COORDINATES.values():
        for n in names:
            lines += [f'<jointpos joint="{n}" name="{n}.pos"/>',
                      f'<jointvel joint="{n}" name="{n}.vel"/>']  # fmt: skip
    for joint in CHILD:  # the interaction wrench at each joint point
        lines += [f'<force site="{joint}_at" name="{joint}.force"/>',
                  f'<torque site="{joint}_at" name="{joint}.torque"/>']  # fmt: skip
    return MJCF.replace("SENSORS", "\n".join("    " + x for x in lines))


@pytest.fixture(scope="module")
def jaxmbd_run():
    model = several_coordinates_tree()
    sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=T_END, h=H,
                       controls=CONTROLS)  # fmt: skip
    sensors = {name: np.asarray(sol.sensors[name]) for name in model.sensors.sensor_names}
    return model, sol, sensors


def _fitted_qvel(m, d, sol, ids):
    """MuJoCo's qvel whose body velocities (``mj_jacBody``, at the centres of mass) are
    jaxmbd's at t = 0 (least squares), and the fit's largest residual."""
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    rows, rhs = [], []
    A = np.asarray(sol.A[0])
    rdot, omega = np.asarray(sol.rdot[0]), np.asarray(sol.omega[0])  # omega: body frame
    for k, body in enumerate(ids):
        mujoco.mj_jacBody(m, d, jp, jr, body)
        rows += [jp.copy(), jr.copy()]
        rhs += [rdot[k], A[k] @ omega[k]]
    J, v = np.vstack(rows), np.concatenate(rhs)
    qvel = np.linalg.lstsq(J, v, rcond=None)[0]
    return qvel, np.abs(J @ qvel - v).max()


@pytest.fixture(scope="module")
def mujoco_run(jaxmbd_run):
    """MuJoCo's run from qpos0 and the fitted qvel: at each row k (t = k h) ``mj_forward``
    with row k's controls (the last row: the last step's), the state, sensors and the
    joints' generalised forces, then ``mj_step``, whose sensordata is kept too."""
    _, sol, _ = jaxmbd_run
    m = mujoco.MjModel.from_xml_string(mjcf())
    d = mujoco.MjData(m)
    ids = [m.body(b).id for b in BODIES]
    mujoco.mj_forward(m, d)
    pose0 = d.xpos[ids].copy(), d.xmat[ids].reshape(-1, 3, 3).copy()
    qvel, residual = _fitted_qvel(m, d, sol, ids)
    d.qvel[:] = qvel
    rows = {key: [] for key in ("xpos", "xmat", "sensordata", "site_xpos", "site_xmat",
                                "xaxis", "qfrc", "stepped")}  # fmt: skip
    for k in range(STEPS + 1):
        d.ctrl[:] = CONTROLS[min(k, STEPS - 1)]
        mujoco.mj_forward(m, d)
        rows["xpos"].append(d.xpos[ids].copy())
        rows["xmat"].append(d.xmat[ids].reshape(-1, 3, 3).copy())
        rows["sensordata"].append(d.sensordata.copy())
        rows["site_xpos"].append(d.site_xpos.copy())
        rows["site_xmat"].append(d.site_xmat.reshape(-1, 3, 3).copy())
        rows["xaxis"].append(d.xaxis.copy())
        rows["qfrc"].append(d.qfrc_passive + d.qfrc_actuator)
        if k < STEPS:
            mujoco.mj_step(m, d)
            rows["stepped"].append(d.sensordata.copy())
    out = {key: np.array(value) for key, value in rows.items()}
    return m, dict(out, pose0=pose0, qvel=qvel, residual=residual)


def _sensor(m, run, name):
    """MuJoCo sensor ``name`` along the run (T, dim)."""
    s = m.sensor(name)
    return run["sensordata"][:, s.adr[0] : s.adr[0] + s.dim[0]]


def _error(x, ref):
    """The largest difference over the reference's scale (at least 1)."""
    ref = np.asarray(ref)
    return np.abs(np.asarray(x).reshape(ref.shape) - ref).max() / max(1.0, np.abs(ref).max())


def test_mjcf_is_the_builder_tree_at_t0(jaxmbd_run, mujoco_run):
    """At qpos0 MuJoCo's body poses (``xpos``, ``xmat``) are jaxmbd's r, A at t = 0
    (1.1e-16, 3.3e-16 measured); the qvel whose body velocities are jaxmbd's (least
    squares over the six bodies' linear and angular velocities, 36 equations in 12 dofs)
    fits them to round-off (residual 2.0e-15: the MJCF is the same mechanism, joint axes
    and points included) and is the builder's set_joint_state rates in the MJCF's axes
    (the ball joint's: minus them, j's rate relative to i turned into i's frame)."""
    model, sol, _ = jaxmbd_run
    m, run = mujoco_run
    assert model.body_names == BODIES
    assert m.opt.timestep == H and m.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    assert m.nu == 2 and [m.actuator(k).name for k in range(2)] == ["m1", "m2"]
    xpos, xmat = run["pose0"]
    assert np.abs(xpos - np.asarray(sol.r[0])).max() < 1e-15
    assert np.abs(xmat - np.asarray(sol.A[0])).max() < 3e-15
    assert run["residual"] < 2e-14
    for joint, qdot in SET_QDOT.items():
        names = COORDINATES.get(joint, ("s",))
        dofs = np.concatenate([np.arange(m.joint(n).dofadr[0], m.joint(n).dofadr[0]
                               + (3 if n == "s" else 1)) for n in names])  # fmt: skip
        np.testing.assert_allclose(run["qvel"][dofs], qdot, rtol=0, atol=2e-14, err_msg=joint)


def test_body_poses_match_mujoco_along_the_run(jaxmbd_run, mujoco_run):
    """Every body's position and orientation at each of the 51 rows (t = 0 .. 0.05 s) is
    MuJoCo's RK4 run's (``xpos``, ``xmat``) to round-off (8.9e-16 m, 1.4e-15 measured):
    jaxmbd's ``rkmk`` is MuJoCo's RK4 step, ball joint included; and MuJoCo's sensordata
    after ``mj_step`` is the one of the step's start (equal bit for bit to ``mj_forward``
    at the row before), so the rows below compare with it at the row's state."""
    _, sol, _ = jaxmbd_run
    m, run = mujoco_run
    assert np.abs(run["xpos"] - np.asarray(sol.r)).max() < 5e-15
    assert np.abs(run["xmat"] - np.asarray(sol.A)).max() < 1e-14
    assert np.array_equal(run["stepped"], run["sensordata"][:-1])


def test_sensors_match_mujoco_sensordata(jaxmbd_run, mujoco_run):
    """Every sensor of a body kind on bodies c (on the ball joint, with the subtree c, e)
    and f (on the revolute joint), at the site (0.01, 0.02, -0.03), reads MuJoCo's sensor of
    the same kind at each row (``framepos``, ``framequat`` up to sign, ``framelinvel``,
    ``frameangvel``, ``frame{x,y,z}axis``, ``velocimeter``, ``gyro``, ``accelerometer``,
    ``subtreecom``, ``subtreelinvel``, ``subtreeangmom``, ``force``, ``torque``: 1.1e-14 of
    the scale measured, the accelerometer's; the others 8.4e-15 and below), as do the frame
    position against a marker, the actuator and joint-actuator forces and the tendon's
    length and rate (6.7e-16)."""
    _, _, sensors = jaxmbd_run
    m, run = mujoco_run
    worst = {}
    for name in [f"{b}.{kind}" for b in ("c", "f") for kind in BODY_KINDS] + list(OTHER_SENSORS):
        x, ref = _sensor(m, run, name), sensors[name]
        if name.endswith("quaternion"):  # MuJoCo's keeps its sign, jaxmbd's has w >= 0
            x = x * np.where(x[:, :1] < 0, -1.0, 1.0)
        worst[name] = _error(x, ref)
        assert np.abs(ref).max() > 1e-3, name  # every sensor reads something
    assert max(worst.values()) < 1e-13, max(worst.items(), key=lambda kv: kv[1])
    assert max(worst[n] for n in OTHER_SENSORS) < 5e-15


def test_joint_coordinates_match_jointpos_and_jointvel(jaxmbd_run, mujoco_run):
    """Each joint's ``joint_position`` and ``joint_velocity`` sensors (and ``sol.joints``)
    are MuJoCo's ``jointpos`` and ``jointvel`` of its hinges and slides in the MJCF's axes
    (1.1e-15 of the scale measured, the planar joint's rates), the ball joint's quaternion
    the conjugate of ``ballquat`` and its rate -R(ballquat) ``ballangvel`` (7.8e-16,
    1.0e-15)."""
    _, sol, sensors = jaxmbd_run
    m, run = mujoco_run
    worst = {}
    for joint, names in COORDINATES.items():
        q = np.stack([_sensor(m, run, f"{n}.pos")[:, 0] for n in names], 1)
        qdot = np.stack([_sensor(m, run, f"{n}.vel")[:, 0] for n in names], 1)
        for key, x, refs in (("q", q, (sensors[f"{joint}.joint_position"], sol.joints[joint].q)),
                             ("qdot", qdot, (sensors[f"{joint}.joint_velocity"],
                                             sol.joints[joint].qdot))):  # fmt: skip
            for ref in refs:
                worst[joint, key] = max(worst.get((joint, key), 0.0), _error(x, ref))
    ball, rate = _sensor(m, run, "s.quat"), _sensor(m, run, "s.angvel")
    conj = ball * np.array([1.0, -1.0, -1.0, -1.0])
    turned = -np.einsum("tij,tj->ti", np.asarray(ep_to_A(ball)), rate)
    worst["s", "q"] = max(
        _error(conj, sensors["s.joint_position"]), _error(conj, sol.joints["s"].q)
    )
    worst["s", "qdot"] = max(_error(turned, sensors["s.joint_velocity"]),
                             _error(turned, sol.joints["s"].qdot))  # fmt: skip
    assert np.ptp(ball[:, 1:], axis=0).max() > 1e-2  # the ball joint turns
    assert max(worst.values()) < 1e-14, max(worst.items(), key=lambda kv: kv[1])


def test_joint_reactions_match_mujoco_interaction_wrench(jaxmbd_run, mujoco_run):
    """Each joint's ``joint_reaction_force``/``torque`` (the force of body i on body j, its
    torque about the joint point on j, in the joint's axes on j) is MuJoCo's interaction
    wrench on the child body (``force``/``torque`` at a site at the joint point on the
    child), less the joint's own generalised forces (``qfrc_passive + qfrc_actuator`` of
    its hinges as torques, of its slides as forces, along ``xaxis``), negated where the
    child is body i and moved to j's point (the planar joint's on the ground): 1.8e-14 of
    the scale measured (the planar joint's torque), the others 1.1e-14 and below."""
    model, sol, sensors = jaxmbd_run
    m, run = mujoco_run
    nb, T = len(BODIES), STEPS + 1
    A = np.concatenate([np.asarray(sol.A), np.broadcast_to(np.eye(3), (T, 1, 3, 3))], 1)
    r = np.concatenate([np.asarray(sol.r), np.zeros((T, 1, 3))], 1)  # index nb: ground
    worst = {}
    for defn in model.joints:
        name, E = defn.name, np.asarray(joint_axes(defn))
        Aj = A[:, defn.body_j]
        p_j = r[:, defn.body_j] + Aj @ np.asarray(defn.s_bar_j)
        force = np.einsum("tij,jk,tk->ti", Aj, E, sensors[f"{name}.joint_reaction_force"])
        torque = np.einsum("tij,jk,tk->ti", Aj, E, sensors[f"{name}.joint_reaction_torque"])
        site = m.site(f"{name}_at").id
        R, p = run["site_xmat"][:, site], run["site_xpos"][:, site]
        F = np.einsum("tij,tj->ti", R, _sensor(m, run, f"{name}.force"))
        N = np.einsum("tij,tj->ti", R, _sensor(m, run, f"{name}.torque"))
        for n in COORDINATES.get(name, ()):  # the joint's own forces along its axes
            j = m.joint(n)
            along = run["qfrc"][:, j.dofadr[0], None] * run["xaxis"][:, j.id]
            if j.type[0] == mujoco.mjtJoint.mjJNT_HINGE:
                N = N - along
            else:
                F = F - along
        N = N + np.cross(p - p_j, F)  # about j's copy of the point
        sign = 1.0 if defn.body_j < nb and BODIES[defn.body_j] == CHILD[name] else -1.0
        worst[name, "force"] = _error(sign * F, force)
        worst[name, "torque"] = _error(sign * N, torque)
        assert np.abs(force).max() > 0.1, name  # every joint carries
    assert max(worst.values()) < 5e-14, max(worst.items(), key=lambda kv: kv[1])
