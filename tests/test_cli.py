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
