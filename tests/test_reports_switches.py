"""Reports and switches: the linear solver a run used (``sol.linear_solver``), ``jaxmbd info``
on an MJCF file, ``jaxmbd simulate --controls FILE.csv``, ``simulate(limits="none")``,
joint dynamics by joint name, and ``linearize(coordinates="joint")`` against MuJoCo."""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.analysis.linearize import mode_motion, modes_of
from jaxmbd.cli import app
from jaxmbd.integrators.base import STRUCTURED_FROM
from jaxmbd.solution import Solution

L, M, G = 1.0, 1.0, 9.81
LOWER, UPPER = -0.3, 1.2


def _cartpole_path() -> str:
    dm_control = pytest.importorskip("dm_control")
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", "cartpole.xml")


def limited_pendulum(damping: float = 0.05):
    """A rod hinged at one end about y, released horizontal: it swings into the upper
    limit 1.2 rad (as tests/test_joint_limits.py's), with joint damping."""
    b = mbd.ModelBuilder("limited_pendulum", gravity=(0.0, 0.0, -G))
    b.add_body("rod", mass=M, inertia=[1e-4, M * L * L / 12, M * L * L / 12], r=(L / 2, 0, 0))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(LOWER, UPPER), damping=damping)  # fmt: skip
    return b.build()


# -- sol.linear_solver ---------------------------------------------------------------------


def test_linear_solver_of_a_small_model_is_named():
    """ "auto" resolves to the elementwise kernels on the CPU (LAPACK elsewhere) for a small
    rA model; an explicit choice is recorded as given."""
    model = mbd.models.double_pendulum()
    sol = mbd.simulate(model, formulation="rA", t_end=0.002, h=1e-3)
    assert sol.linear_solver == ("small" if jax.default_backend() == "cpu" else "dense")
    sol = mbd.simulate(model, formulation="rA", t_end=0.002, h=1e-3, linear_solver="dense")
    assert sol.linear_solver == "dense"


def test_linear_solver_of_a_long_chain_is_structured():
    """A 25-link chain has 12 x 25 = 300 Newton unknowns (gen_alpha, stabilised): "auto"
    picks the structured solver from STRUCTURED_FROM = 300 on, and the 24-link chain
    (288) stays dense."""
    assert STRUCTURED_FROM == 300
    sol = mbd.simulate(mbd.models.pendulum_chain(25), formulation="rA", t_end=0.002, h=1e-3)
    assert sol.linear_solver == "structured"
    form = mbd.get_formulation("rA")
    stepper = mbd.integrators.get_integrator("gen_alpha", form)
    chain = mbd.models.pendulum_chain(24)
    assert stepper.num_unknowns(chain, form) == 288
    assert stepper.linear_solver_name(chain, form) != "structured"


# -- jaxmbd info ---------------------------------------------------------------------------


def test_info_lists_actuators_joint_dynamics_and_limits_of_an_mjcf_file():
    result = CliRunner().invoke(app, ["info", _cartpole_path()], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    for text in ("actuators", "slide", "motor", "gear", "[-1, 1]",  # the actuator
                 "joints", "slider", "hinge_1", "0.0005", "2e-06",  # joint damping
                 "[-1.8, 1.8]"):  # fmt: skip
        assert text in out, (text, out)


# -- jaxmbd simulate --controls FILE.csv ---------------------------------------------------


def test_controls_csv_equals_simulate_controls(tmp_path):
    """One line per step and lines at times t (held to the next) give the run of
    simulate(controls=u); wrong columns and row counts are refused with clear errors."""
    path = _cartpole_path()
    h, t_end, n = 0.01, 0.05, 5
    u = np.array([[0.5], [0.5], [-0.3], [-0.3], [0.2]])
    per_step = tmp_path / "u.csv"
    per_step.write_text("slide\n" + "".join(f"{x[0]}\n" for x in u))
    timed = tmp_path / "ut.csv"
    timed.write_text("t,slide\n0,0.5\n0.02,-0.3\n0.04,0.2\n")
    model = mbd.load_model(path)
    expected = mbd.simulate(model, t_end=t_end, h=h, controls=jnp.asarray(u))
    runner = CliRunner()
    for name, csv in (("a", per_step), ("b", timed)):
        out = tmp_path / f"{name}.npz"
        args = ["simulate", path, "--t-end", str(t_end), "--h", str(h), "--controls", str(csv),
                "--out", str(out)]  # fmt: skip
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        sol = Solution.load(out)
        assert len(sol.t) == n + 1
        np.testing.assert_allclose(
            np.asarray(sol.r), np.asarray(expected.r), rtol=0, atol=ROUND_OFF
        )
        np.testing.assert_allclose(
            np.asarray(sol.rdot), np.asarray(expected.rdot), rtol=0, atol=ROUND_OFF
        )
    from jaxmbd.io.controls_file import read_controls

    np.testing.assert_array_equal(read_controls(timed, model, t_end=t_end, h=h), u)
    bad = tmp_path / "bad.csv"
    bad.write_text("slid\n1\n")
    with pytest.raises(ValueError, match="unknown columns \\['slid'\\]; missing actuators"):
        read_controls(bad, model, t_end=t_end, h=h)
    bad.write_text("slide\n1\n2\n")
    with pytest.raises(ValueError, match="2 lines of controls, expected one per step \\(5"):
        read_controls(bad, model, t_end=t_end, h=h)
    bad.write_text("t,slide\n0,1\n0,2\n")
    with pytest.raises(ValueError, match="line 3: times must increase"):
        read_controls(bad, model, t_end=t_end, h=h)
    result = runner.invoke(app, ["simulate", path, "--t-end", "0.05", "--h", "0.01",
                                 "--controls", str(bad)])  # fmt: skip
    assert result.exit_code == 1 and "times must increase" in result.output


# -- limits= and joint dynamics by name ----------------------------------------------------


def test_limits_none_lets_the_pendulum_pass_its_limit():
    model = limited_pendulum()
    limited = mbd.simulate(model, t_end=1.0, h=2e-3)
    free = mbd.simulate(model, t_end=1.0, h=2e-3, limits="none")
    q_limited = np.asarray(limited.joints["hinge"].q)
    q_free = np.asarray(free.joints["hinge"].q)
    assert q_limited.max() < UPPER + 0.05
    assert q_free.max() > 1.5  # swings down past 1.2 rad to about pi / 2 and beyond
    assert free.limits is None
    with pytest.raises(ValueError, match="limits must be one of"):
        mbd.simulate(model, t_end=0.01, h=2e-3, limits="off")
    with pytest.raises(ValueError, match="limits='hard'.*moreau_jean"):
        mbd.simulate(model, t_end=0.01, h=2e-3, limits="hard", integrator="gen_alpha")
    with pytest.raises(ValueError, match="simulate only"):
        mbd.static_equilibrium(model, limits="hard")


def test_joint_dynamics_by_joint_name():
    model = limited_pendulum(damping=0.05)
    view = model.joint_dynamics("hinge")
    assert float(view.damping) == 0.05
    assert float(view.stiffness) == 0.0 and float(view.armature) == 0.0
    damped = model.with_joint_dynamics("hinge", damping=20.0)
    assert float(damped.joint_dynamics("hinge").damping) == 20.0
    assert float(model.joint_dynamics("hinge").damping) == 0.05  # a new model
    # the eqx.tree_at recipe on the element's own leaves
    same = eqx.tree_at(lambda m: m.joint_dynamics("hinge").element.damping, model,
                       jnp.asarray([20.0]))  # fmt: skip
    assert float(same.joint_dynamics("hinge").damping) == 20.0
    slow = mbd.simulate(damped, t_end=0.3, h=2e-3, limits="none")
    fast = mbd.simulate(model, t_end=0.3, h=2e-3, limits="none")
    assert slow.joints["hinge"].q[-1] < 0.8 * fast.joints["hinge"].q[-1]
    with pytest.raises(mbd.ModelError, match="joint 'nope' has no joint dynamics"):
        model.joint_dynamics("nope")
    with pytest.raises(mbd.ModelError, match="unknown \\['dampin'\\]"):
        model.with_joint_dynamics("hinge", dampin=1.0)


# -- linearize in joint coordinates against MuJoCo -----------------------------------------


@pytest.mark.parametrize("formulation", [pytest.param("rA", marks=pytest.mark.slow), "joint"])
def test_cartpole_linearization_in_joint_coordinates_matches_mujoco(formulation):
    """dm_control's cartpole at the upright equilibrium: A, B of linearize(coordinates=
    "joint") in (qpos, qvel) order against central differences of MuJoCo's mj_forward, from
    the absolute coordinates (rA) and from the joint formulation."""
    mujoco = pytest.importorskip("mujoco")
    path = _cartpole_path()
    lin = mbd.linearize(mbd.load_model(path), coordinates="joint", formulation=formulation)
    assert lin.coordinates == "joint" and lin.coordinate_names == ("slider", "hinge_1")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)

    def f(x, u):
        d.qpos[:], d.qvel[:], d.ctrl[:] = x[: m.nq], x[m.nq :], u
        mujoco.mj_forward(m, d)
        return np.concatenate([d.qvel, d.qacc])

    x0, u0, eps = np.zeros(m.nq + m.nv), np.zeros(m.nu), 1e-6
    A = np.stack([(f(x0 + eps * e, u0) - f(x0 - eps * e, u0)) / (2 * eps)
                  for e in np.eye(x0.size)], axis=1)  # fmt: skip
    B = np.stack([(f(x0, u0 + eps * e) - f(x0, u0 - eps * e)) / (2 * eps)
                  for e in np.eye(m.nu)], axis=1)  # fmt: skip
    np.testing.assert_allclose(np.asarray(lin.A), A, rtol=0, atol=2e-11)
    np.testing.assert_allclose(np.asarray(lin.B), B, rtol=0, atol=7e-14)
    assert abs(A[3, 1]) > 10  # the pole's gravity term is in the comparison
    # the same modes as in the tangent coordinates: frequencies and body shapes
    model = mbd.load_model(path)
    joint, tangent = modes_of(lin), modes_of(mbd.linearize(model, formulation="rA"))
    np.testing.assert_allclose(joint.frequencies, tangent.frequencies, rtol=0, atol=2e-14)
    # rA's (slow-marked) shapes: 3.6e-14 measured
    tol = 2e-13 if formulation == "rA" else ROUND_OFF
    np.testing.assert_allclose(np.abs(joint.shapes), np.abs(tangent.shapes), rtol=0, atol=tol)
    motion = mode_motion(model, joint, 3, amplitude=0.1, cycles=1)
    assert np.ptp(np.asarray(motion.r)[:, 1, 0]) > 0.01  # the pole moves
