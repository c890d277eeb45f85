"""Trees built in code in joint coordinates against rA: joints of several coordinates
(universal, cylindrical, planar, spherical, some with their child as body i) read as
``sol.joints`` and reactions as in the absolute formulation, and every sensor kind a model
built in code can carry reads the same; such a model defaults to ``"joint"``."""

from __future__ import annotations

import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.sensors import SENSOR_KINDS, sensor_kind

T_END, H = 0.05, 1e-3
STEPS = int(round(T_END / H))
CONTROLS = np.tile([0.3, 0.2], (STEPS, 1))
BODY_KINDS = ("body_position", "body_quaternion", "body_linear_velocity",
              "body_angular_velocity", "body_x_axis", "body_y_axis", "body_z_axis",
              "velocimeter", "gyro", "accelerometer", "subtree_com", "subtree_linear_velocity",
              "subtree_angular_momentum", "interaction_force", "interaction_torque")  # fmt: skip
JOINT_KINDS = ("joint_position", "joint_velocity", "joint_reaction_force",
               "joint_reaction_torque")  # fmt: skip


def several_coordinates_tree():
    """Six bodies on a universal joint, a cylindrical one, a spherical and a universal joint
    whose child is body i, a planar joint (child body i, on the ground) and a revolute one,
    all moving; actuators, a fixed tendon, and a sensor of every kind."""
    b = mbd.ModelBuilder("several_coordinates", gravity=(0.0, 0.0, -9.81))
    b.add_body("a", mass=1.0, inertia=[0.08, 0.09, 0.02], r=(0.05, 0.0, -0.5))
    b.add_body("b", mass=0.7, inertia=[0.03, 0.02, 0.04], r=(0.2, 0.05, -1.2))
    b.add_body("c", mass=0.5, inertia=[0.01, 0.02, 0.015], r=(0.3, 0.1, -1.7))
    b.add_body("d", mass=0.9, inertia=[0.02, 0.03, 0.025], r=(1.0, 0.0, 0.3))
    b.add_body("e", mass=0.4, inertia=[0.01, 0.012, 0.008], r=(0.35, 0.0, -2.1))
    b.add_body("f", mass=0.3, inertia=[0.01, 0.012, 0.008], r=(1.2, 0.3, 0.3))
    b.universal("u", body_i="ground", body_j="a", point=(0, 0, 0), axis_i=(1, 0, 0),
                axis_j=(0, 1, 0))  # fmt: skip
    b.cylindrical("cyl", body_i="a", body_j="b", point=(0, 0, -1.0), axis=(0, 0, 1),
                  damping=(0.1, 0.02))  # fmt: skip
    b.spherical("s", body_i="c", body_j="b", point=(0.25, 0.05, -1.5))
    b.universal("u2", body_i="e", body_j="c", point=(0.3, 0.0, -1.9), axis_i=(0, 1, 0),
                axis_j=(1, 0, 1))  # fmt: skip
    b.planar("p", body_i="d", body_j="ground", point=(1.0, 0.0, 0.0), axis=(0, 1, 1))
    b.revolute("h", body_i="f", body_j="d", point=(1.1, 0.2, 0.3), axis=(1, 0, 0), damping=0.05)
    for name, qdot in (("u", (0.7, -0.4)), ("cyl", (0.3, 1.5)), ("s", (0.2, -0.5, 0.9)),
                       ("u2", (1.0, 0.5)), ("p", (0.5, 1.0, 2.0)), ("h", 1.0)):  # fmt: skip
        b.set_joint_state(name, qdot=qdot)
    b.add_actuator("m1", joint="cyl.angle", kind="motor", gear=2.0)
    b.add_actuator("m2", joint="h", kind="position", kp=3.0, kv=0.2)
    b.add_fixed_tendon("t", joints={"cyl.slide": 1.0, "h": 0.5})
    b.add_marker("mk", "a", (0.1, 0.0, -0.4))
    for joint in ("u", "cyl", "s", "u2", "p", "h"):
        for kind in JOINT_KINDS:
            b.add_sensor(f"{joint}.{kind}", kind=kind, joint=joint)
    for body in ("c", "f"):
        for kind in BODY_KINDS:
            b.add_sensor(f"{body}.{kind}", kind=kind, body=body, site=(0.01, 0.02, -0.03))
    b.add_sensor("e.against_marker", kind="body_position", body="e", reference={"marker": "mk"})
    b.add_sensor("m1.force", kind="actuator_force", actuator="m1")
    b.add_sensor("m2.force", kind="actuator_force", actuator="m2")
    b.add_sensor("h.actuators", kind="joint_actuator_force", joint="h")
    b.add_sensor("cyl.actuators", kind="joint_actuator_force", joint="cyl.angle")
    b.add_sensor("t.length", kind="tendon_position", tendon="t")
    b.add_sensor("t.rate", kind="tendon_velocity", tendon="t")
    floor = {"kind": "plane", "body": "ground", "pos": (0, 0, -3.0), "axes": np.eye(3),
             "size": (1, 1, 1)}  # fmt: skip
    b.add_sensor("e.range", kind="rangefinder", body="e", targets=[floor])
    b.add_sensor("e.touch", kind="touch", body="e", zone=("sphere", (0.1, 0.1, 0.1)))
    return b.build()


@pytest.fixture(scope="module")
def runs():
    model = several_coordinates_tree()
    return model, {
        form: mbd.simulate(
            model, formulation=form, integrator="rkmk", t_end=T_END, h=H, controls=CONTROLS
        )  # fmt: skip
        for form in ("rA", "joint")
    }


def test_the_tree_defaults_to_joint_coordinates(runs):
    model, _ = runs
    assert mbd.joint_space_obstacles(model) == ()
    assert mbd.default_formulation(model) == "joint"


def test_joints_of_several_coordinates_read_as_in_ra(runs):
    """``sol.joints[name]`` of every joint (q, qdot, the spherical joint's rotation vector)
    and the joints' reactions (``reaction_forces(per="joint", at="joint",
    frame="joint")``, on a run whose sensors have filled ``sol.lam``) agree with rA's
    along the same RK4 run (positions 3.0e-12, coordinates 1.5e-12, rates 1.4e-11,
    reactions 8.4e-12 of their scale measured); the tree's own joints that make a joint stay
    readable (``"u.angle_1"``: the first coordinate)."""
    model, sols = runs
    ra, joint = sols["rA"], sols["joint"]
    assert np.abs(np.asarray(ra.r) - np.asarray(joint.r)).max() < 2e-11
    assert list(joint.joints)[: len(model.joint_names)] == list(model.joint_names)
    for name in model.joint_names:
        a, b = ra.joints[name], joint.joints[name]
        assert b.kind == a.kind and np.shape(b.q) == np.shape(a.q), name
        np.testing.assert_allclose(np.asarray(b.q), np.asarray(a.q), rtol=0, atol=1e-11)
        np.testing.assert_allclose(np.asarray(b.qdot), np.asarray(a.qdot), rtol=0, atol=1e-10)
        assert np.ptp(np.asarray(a.q), axis=0).min() > 1e-3 or a.kind == "spherical", name
    np.testing.assert_allclose(np.asarray(joint.joints["s"].rotation_vector),
                               np.asarray(ra.joints["s"].rotation_vector),
                               rtol=0, atol=5e-13)  # fmt: skip
    for part, name, k in (("u.angle_1", "u", 0), ("u2.angle_2", "u2", 1), ("p.y", "p", 1)):
        np.testing.assert_allclose(np.asarray(joint.joints[part].q),
                                   np.asarray(ra.joints[name].q[:, k]),
                                   rtol=0, atol=2e-12)  # fmt: skip
    # the reactions of the joint run (Newton-Euler) are rA's multipliers' reaction sensors
    b = mbd.diagnostics.reaction_forces(model, joint, per="joint", at="joint", frame="joint")
    assert b.names == tuple(model.joint_names)
    for k, name in enumerate(b.names):
        for key, kind in (("force_j", "force"), ("torque_j", "torque")):
            x = np.asarray(ra.sensors[f"{name}.joint_reaction_{kind}"])
            y = np.asarray(getattr(b, key))[:, k]
            np.testing.assert_allclose(y, x, rtol=0, atol=5e-11 * max(1.0, np.abs(x).max()))
        assert np.abs(np.asarray(b.force_j)[:, k]).max() > 0.1, name  # every joint carries


def test_every_sensor_kind_of_a_tree_reads_as_in_ra(runs):
    """Every sensor kind of the registry (joint coordinates and reactions on every joint
    kind, frames, subtrees, interaction wrenches, actuators, tendons, rangefinder, touch)
    reads the same in joint coordinates as in rA (9.1e-11 measured, relative to each
    sensor's scale)."""
    model, sols = runs
    library = {k for k in SENSOR_KINDS if sensor_kind(k).read.__module__.startswith("jaxmbd.")}
    assert set(model.sensors.kinds) == library  # not those other tests register
    for name in model.sensors.sensor_names:
        a, b = np.asarray(sols["rA"].sensors[name]), np.asarray(sols["joint"].sensors[name])
        scale = max(1.0, np.abs(a).max())
        np.testing.assert_allclose(b, a, rtol=0, atol=5e-10 * scale, err_msg=name)
