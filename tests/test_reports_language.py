"""Errors and reports in the formulation that ran (issue 74 item 5): a failure in joint
coordinates names the joints that went non-finite and no Newton iterations for a step that
has none; statuses print their names; the CLI summary shows only the figures the
integrator has; ``jaxmbd info`` widens or wraps instead of cutting and lists every element
with its name and parameters; Solution files keep qpos, qvel and ``sol.joints``."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app


def sprung_slider(stiffness: float = 50.0) -> mbd.Model:
    """A block on a slider ("slider", x) with a joint spring, a limit with restitution, a
    spring-damper ("strut") to the ground, and a pendulum hinged on it ("hinge")."""
    b = mbd.ModelBuilder("sprung slider", gravity=(0.0, 0.0, -9.81))
    b.add_body("block", mass=1.0, inertia=[0.01] * 3, r=(0.1, 0.0, 0.0))
    b.add_body("bob", mass=0.5, inertia=[0.005] * 3, r=(0.1, 0.0, -0.3))
    b.translational("slider", body_i="ground", body_j="block", point=(0, 0, 0),
                    axis=(1, 0, 0), stiffness=stiffness, limits=(-0.5, 0.5),
                    limit_restitution=0.7)  # fmt: skip
    b.revolute("hinge", body_i="block", body_j="bob", point=(0.1, 0, 0), axis=(0, 1, 0))
    b.spring_damper("strut_with_a_long_name", body_i="ground", point_i=(-1.0, 0.0, 0.0),
                    body_j="block", point_j=(0.1, 0.0, 0.0), stiffness=20.0, damping=0.3,
                    rest_length=1.0)  # fmt: skip
    return b.build()


def test_statuses_print_their_names():
    assert repr(mbd.RESULTS.successful).endswith("RESULTS<success>")
    sol = mbd.simulate(sprung_slider(), formulation="joint", integrator="rk", t_end=0.01,
                       h=1e-3)  # fmt: skip
    assert str(sol.result).endswith("<success>")


def test_joint_failure_names_the_joints_and_no_iterations():
    """RK4 at a step 30 times its stability limit: the joints' coordinates go non-finite;
    the message names them, not absolute-coordinate rows, and no Newton iterations."""
    model = sprung_slider(stiffness=1e8)
    with pytest.raises(mbd.SolverError) as err:
        mbd.simulate(model, formulation="joint", integrator="rk", t_end=0.5, h=1e-2)
    msg = str(err.value)
    assert "non-finite" in msg and "'slider'" in msg, msg
    assert "iterations" not in msg and ".perp" not in msg and ".dp" not in msg, msg


def _cli(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("files") / "sprung_slider.json"
    mbd.save_model(sprung_slider(), path)
    return path


def test_cli_summary_shows_only_what_the_integrator_has(model_file, tmp_path):
    out = _cli("simulate", model_file, "--formulation", "joint", "--integrator", "rk",
               "--h", "1e-3", "--t-end", "0.01")  # fmt: skip
    assert "Newton iterations" not in out and "max residual" not in out, out
    implicit = _cli("simulate", model_file, "--formulation", "rA", "--integrator",
                    "backward_euler", "--h", "1e-3", "--t-end", "0.01")  # fmt: skip
    assert "Newton iterations" in implicit and "max residual" in implicit, implicit


def test_info_lists_every_element_uncut(model_file):
    """At an 80-column terminal: names whole (no ellipsis), the spring's name and
    parameters, the limit's restitution."""
    out = _cli("info", model_file)
    assert "…" not in out, out
    flat = "".join(out.split())  # a wrapped cell joins up again without its spaces
    for text in ("strut_with_a_long_name", "translational", "stiffness", "restlength1",
                 "limitrestitution", "0.7"):  # fmt: skip
        assert text in flat, (text, out)


@pytest.mark.parametrize("suffix", ["csv", "npz"])
def test_solution_files_keep_joint_coordinates(suffix, tmp_path):
    sol = mbd.simulate(sprung_slider(), formulation="joint", t_end=0.05, h=1e-2)
    path = sol.save(tmp_path / f"run.{suffix}")
    back = mbd.Solution.load(path)
    np.testing.assert_array_equal(np.asarray(back.qpos), np.asarray(sol.qpos))
    np.testing.assert_array_equal(np.asarray(back.qvel), np.asarray(sol.qvel))
    assert set(back.joints) == set(sol.joints) == {"slider", "hinge"}
    for name in sol.joints:
        for key in ("q", "qdot"):
            np.testing.assert_array_equal(np.asarray(getattr(back.joints[name], key)),
                                          np.asarray(getattr(sol.joints[name], key)))  # fmt: skip


def test_info_lists_welds_and_drivers(tmp_path):
    """Constraints without joint coordinates (a weld, a translation driver with its
    expression) get a table of their own, with their rows, bodies and driving expression."""
    b = mbd.ModelBuilder("welded and driven")
    b.add_body("block", mass=1.0, inertia=[0.01] * 3, r=(0.1, 0.0, 0.0))
    b.add_body("tool", mass=0.2, inertia=[0.01] * 3, r=(0.1, 0.0, -0.2))
    b.translational("slider", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0))
    b.fixed("tool_weld", body_i="block", body_j="tool")
    b.translation_driver("road_input", body_i="ground", body_j="block", axis=(1, 0, 0),
                         displacement="0.1*sin(t)")  # fmt: skip
    path = tmp_path / "welded.json"
    mbd.save_model(b.build(), path)
    out = _cli("info", path)
    assert "other constraints" in out, out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 2}
    assert "slider" in lines and "CD" not in lines["slider"], out  # the joints table's
    assert "CD 3, DP1 3" in lines["tool_weld"] and "block - tool" in lines["tool_weld"], out
    assert "DP2 1" in lines["road_input"] and "sin(t)" in lines["road_input"], out


def test_joint_failure_of_a_loop_names_its_closing_rows():
    """A four-bar in joint coordinates whose implicit step is refused (one Newton iteration
    allowed): the coordinates stay finite, so the message names the loop-closing rows and
    their residuals (the joint the spanning tree leaves out), not the tree's joints."""
    from test_redundant_loops import four_bar

    newton = mbd.newton.FullNewton(max_iter=1)
    with pytest.raises(mbd.SolverError) as err:
        mbd.simulate(four_bar(driven=False), formulation="joint", integrator="backward_euler",
                     newton=newton, t_end=0.02, h=1e-2)  # fmt: skip
    msg = str(err.value)
    assert "Largest loop-closing residuals at the failed step: CD 'J3.cd_" in msg, msg
    assert "(joint 'J3') between 'coupler' and 'rocker'" in msg, msg
    assert "non-finite" not in msg and "'J1'" not in msg, msg
