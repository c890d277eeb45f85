"""`jaxmbd simulate` runs every integrator, with integrator-specific options as -o KEY=VALUE."""

import numpy as np
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app


def test_simulate_explicit_integrator_with_option(tmp_path):
    """rkmk has no Newton options: the CLI must not pass any; -o tableau=heun reaches it."""
    out = tmp_path / "run.npz"
    result = CliRunner().invoke(
        app,
        ["simulate", "spinning_top", "--formulation", "se3", "--integrator", "rkmk"]
        + ["--t-end", "0.005", "-o", "tableau=heun", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    sol = mbd.Solution.load(out)
    ref = mbd.simulate(
        mbd.models.spinning_top(), formulation="se3", integrator="rkmk", tableau="heun",
        t_end=0.005, h=1e-3,
    )  # fmt: skip
    np.testing.assert_array_equal(np.asarray(sol.r), np.asarray(ref.r))
    assert sol.integrator == "rkmk"


def test_simulate_option_errors_exit_cleanly():
    runner = CliRunner()
    bad_pair = runner.invoke(app, ["simulate", "spinning_top", "-o", "no_equals_sign"])
    assert bad_pair.exit_code == 2
    assert "KEY=VALUE" in bad_pair.output
    unknown = runner.invoke(
        app, ["simulate", "spinning_top", "--t-end", "0.002", "-o", "not_an_option=1"]
    )
    assert unknown.exit_code != 0
    assert "not_an_option" in unknown.output
    assert "Traceback" not in unknown.output


def test_save_every_must_divide_the_steps():
    result = CliRunner().invoke(
        app, ["simulate", "single_pendulum", "--t-end", "1", "--save-every", "7"]
    )
    assert result.exit_code == 1 and "must divide the number of steps" in result.output
    result = CliRunner().invoke(app, ["simulate", "single_pendulum", "--save-every", "0"])
    assert result.exit_code == 2
