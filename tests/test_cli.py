"""Command line: runs a built-in example, writes results and a plot."""

import numpy as np
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app


def test_kinematics_command(tmp_path):
    out, plot = tmp_path / "run.npz", tmp_path / "run.png"
    result = CliRunner().invoke(
        app,
        [
            "kinematics",
            "single_pendulum",
            "--h",
            "1e-2",
            "--t-end",
            "1",
            "--out",
            str(out),
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "single pendulum" in result.output
    sol = mbd.Solution.load(out)
    assert sol.t.shape == (101,) and sol.body_names == ("pendulum",)
    ref = mbd.kinematics(mbd.models.single_pendulum(), t_end=1.0, h=1e-2)
    np.testing.assert_allclose(sol.r, ref.r)
    assert plot.stat().st_size > 10_000


def test_kinematics_linear_solver_option(tmp_path):
    """--linear-solver structured gives the dense run's positions; a bad value exits with
    a one-line error naming the choices."""
    out = tmp_path / "run.npz"
    args = ["kinematics", "single_pendulum", "--h", "1e-2", "--t-end", "0.1"]
    result = CliRunner().invoke(app, args + ["--linear-solver", "structured", "--out", str(out)])
    assert result.exit_code == 0, result.output
    ref = mbd.kinematics(mbd.models.single_pendulum(), t_end=0.1, h=1e-2, linear_solver="dense")
    np.testing.assert_allclose(mbd.Solution.load(out).r, ref.r, rtol=0, atol=1e-14)
    bad = CliRunner().invoke(app, args + ["--linear-solver", "sparse"])
    assert bad.exit_code != 0 and "linear_solver must be one of" in bad.output


def test_csv_output(tmp_path):
    out = tmp_path / "run.csv"
    result = CliRunner().invoke(
        app,
        [
            "kinematics",
            str(mbd.models.path("slider_crank")),
            "--h",
            "1e-2",
            "--t-end",
            "0.5",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    header = out.read_text().splitlines()[0].split(",")
    assert "slider.r.x" in header and "lam.driver" in header
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    assert data.shape == (51, len(header))


def test_info_command():
    result = CliRunner().invoke(app, ["info", "four_link"])
    assert result.exit_code == 0 and "degrees of freedom: 0" in result.output


def test_simulate_command(tmp_path):
    out = tmp_path / "dp.npz"
    result = CliRunner().invoke(
        app, ["simulate", "double_pendulum", "--h", "1e-2", "--t-end", "0.5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    sol = mbd.Solution.load(out)
    ref = mbd.simulate(mbd.models.double_pendulum(), t_end=0.5, h=1e-2)
    np.testing.assert_allclose(sol.r, ref.r)


def test_simulate_command_integrator_options(tmp_path):
    out = tmp_path / "be.npz"
    args = ["simulate", "double_pendulum", "--h", "1e-2", "--t-end", "0.2", "--out", str(out)]
    result = CliRunner().invoke(app, args + ["--integrator", "backward_euler"])
    assert result.exit_code == 0, result.output
    sol = mbd.Solution.load(out)
    assert sol.integrator == "backward_euler"
    ref = mbd.simulate(mbd.models.double_pendulum(), integrator="backward_euler", t_end=0.2, h=1e-2)
    np.testing.assert_allclose(sol.r, ref.r)
    result = CliRunner().invoke(app, args + ["--rho-inf", "1.0", "--variant", "index3"])
    assert result.exit_code == 0, result.output
    assert mbd.Solution.load(out).integrator == "gen_alpha"
    bad = CliRunner().invoke(app, args + ["--rho-inf", "2"])
    assert bad.exit_code == 1 and "rho_inf must lie in [0, 1]" in bad.output
    bad = CliRunner().invoke(app, args + ["--integrator", "rk9"])
    assert bad.exit_code == 1 and "unknown integrator" in bad.output
