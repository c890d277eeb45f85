"""Command line: runs a built-in example, writes results and a plot."""

import numpy as np
import pytest
from tolerances import ROUND_OFF
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app
from jaxmbd.integrators import DEFAULT_INTEGRATOR
from jaxmbd.models import BUILTIN, REGISTRY


def quiet(done, total):
    pass


# The references below run through the chunked driver as the command does (it reports
# progress): the command's compiled chunk serves them (one compilation, not two per test).
QUIET = {"progress": quiet}


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
    ref = mbd.kinematics(mbd.models.single_pendulum(), t_end=1.0, h=1e-2, **QUIET)
    np.testing.assert_array_equal(sol.r, ref.r)
    assert plot.stat().st_size > 10_000


def test_kinematics_linear_solver_option(tmp_path):
    """--linear-solver structured gives the dense run's positions; a bad value exits with
    a one-line error naming the choices."""
    out = tmp_path / "run.npz"
    args = ["kinematics", "single_pendulum", "--h", "1e-2", "--t-end", "0.1"]
    result = CliRunner().invoke(app, args + ["--linear-solver", "structured", "--out", str(out)])
    assert result.exit_code == 0, result.output
    ref = mbd.kinematics(
        mbd.models.single_pendulum(), t_end=0.1, h=1e-2, linear_solver="dense", **QUIET
    )
    np.testing.assert_allclose(mbd.Solution.load(out).r, ref.r, rtol=0, atol=ROUND_OFF)
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
    # Solution.load reads it back: every body state, multiplier and outcome as written
    back = mbd.Solution.load(out)
    npz = mbd.Solution.load(mbd.Solution.load(out).save(tmp_path / "again.npz"))
    for sol in (back, npz):
        assert sol.body_names == ("crank", "rod", "slider")
        assert "driver" in sol.constraint_names and sol.r.shape == (51, 3, 3)
    ref = np.loadtxt(out, delimiter=",", skiprows=1)
    column = header.index("rod.A23")
    np.testing.assert_array_equal(back.A[:, 1, 1, 2], ref[:, column])
    np.testing.assert_array_equal(back.lam[:, back.constraint_names.index("driver")],
                                  ref[:, header.index("lam.driver")])  # fmt: skip
    np.testing.assert_array_equal(back.status, ref[:, header.index("status")])
    (tmp_path / "bad.csv").write_text("t,x\n0,1\n")
    with pytest.raises(ValueError, match="not a Solution CSV"):
        mbd.Solution.load(tmp_path / "bad.csv")
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
    # a built-in runs in its paper's formulation (rA), not simulate's default
    ref = mbd.simulate(mbd.models.double_pendulum(), formulation="rA", t_end=0.5, h=1e-2, **QUIET)
    np.testing.assert_array_equal(sol.r, ref.r)


def test_simulate_command_integrator_options(tmp_path):
    out = tmp_path / "be.npz"
    args = ["simulate", "double_pendulum", "--h", "1e-2", "--t-end", "0.2", "--out", str(out)]
    result = CliRunner().invoke(app, args + ["--integrator", "backward_euler"])
    assert result.exit_code == 0, result.output
    sol = mbd.Solution.load(out)
    assert sol.integrator == "backward_euler"
    ref = mbd.simulate(
        mbd.models.double_pendulum(),
        formulation="rA",
        integrator="backward_euler",
        t_end=0.2,
        h=1e-2,
        **QUIET,
    )
    np.testing.assert_array_equal(sol.r, ref.r)
    result = CliRunner().invoke(app, args + ["--rho-inf", "1.0", "--variant", "index3"])
    assert result.exit_code == 0, result.output
    assert mbd.Solution.load(out).integrator == "gen_alpha"
    bad = CliRunner().invoke(app, args + ["--rho-inf", "2"])
    assert bad.exit_code == 1 and "rho_inf must lie in [0, 1]" in bad.output
    bad = CliRunner().invoke(app, args + ["--integrator", "rk9"])
    assert bad.exit_code == 1 and "unknown integrator" in bad.output


# ---------------------------------------------------------------- built-in models, defaults

WIDE = {"COLUMNS": "200"}  # rich tables unwrapped, so that each row reads as one line


def _models_table() -> dict[str, tuple[str, list[str]]]:
    """`jaxmbd models` parsed: model name -> (paper heading above it, the row's words)."""
    result = CliRunner().invoke(app, ["models"], env=WIDE)
    assert result.exit_code == 0, result.output
    papers = {entry.paper for entry in REGISTRY.values()}
    rows, paper = {}, None
    for line in result.output.splitlines():
        words = line.split()
        if line.strip() in papers:
            paper = line.strip()
        elif words and words[0].removesuffix(":N") in REGISTRY:
            rows[words[0].removesuffix(":N")] = (paper, words)
    return rows


def test_models_command_lists_every_builtin():
    """Every registry entry appears once, under its paper, with its default formulation and
    that formulation's default integrator; generated models show their size syntax."""
    rows = _models_table()
    assert list(rows) == list(REGISTRY)
    for name, entry in REGISTRY.items():
        paper, words = rows[name]
        assert paper == entry.paper, name
        assert words[1:3] == [entry.formulation, DEFAULT_INTEGRATOR[entry.formulation]], name
        assert (words[0] == f"{name}:N") == (entry.size_argument is not None), name
    expected = {"four_link": "Kissel, Taves & Negrut", "heavy_top": "Mueller & Terze",
                "gyro_top": "Betsch & Leyendecker", "bar_double_pendulum":
                "Dumitriu & Margaritescu", "engine": "generated"}  # fmt: skip
    assert {name: rows[name][0] for name in expected} == expected


#: one built-in per paper (and a generated one) in the default suite; the others compile
#: 6-20 s each on 2 cores and run with ``-m slow``
EVERY_SUITE = ("slider_crank", "heavy_top", "six_body_linkage", "bar_double_pendulum")


@pytest.mark.parametrize(
    "name",
    [n if n in EVERY_SUITE else pytest.param(n, marks=pytest.mark.slow) for n in BUILTIN],
)
def test_every_builtin_runs_with_its_defaults(name, tmp_path):
    """`jaxmbd simulate NAME` with no --formulation / --integrator: the model's default
    formulation and that formulation's default integrator (six_body_linkage's redundant
    row is dropped for the run, no option needed), three steps, exit 0, a summary naming
    the pair and every body, and a saved Solution with finite states and verified steps."""
    entry, out = REGISTRY[name], tmp_path / "run.npz"
    integrator = DEFAULT_INTEGRATOR[entry.formulation]
    args = ["simulate", name, "--h", "1e-3", "--t-end", "0.003", "--out", str(out)]
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert f": {entry.formulation}, {integrator}, 3 steps" in result.output
    sol = mbd.Solution.load(out)
    assert (sol.formulation, sol.integrator) == (entry.formulation, integrator)
    for body in sol.body_names:
        assert f"r of {body} at t_end" in result.output
    assert sol.r.shape == (4, len(sol.body_names), 3) and np.all(np.isfinite(sol.r))
    assert np.all(np.asarray(sol.status) == 0)
    assert np.max(np.abs(sol.r[-1] - sol.r[0])) > 0  # it moved


def test_simulate_se3_uses_the_se3_default_integrator(tmp_path):
    """`--formulation se3` alone runs rkmk (se3's default), the library's own run; an
    invalid pair exits 1 with the library's message, no traceback."""
    out = tmp_path / "top.npz"
    args = ["simulate", "heavy_top", "--formulation", "se3", "--h", "1e-3", "--t-end", "0.003"]
    result = CliRunner().invoke(app, args + ["--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    sol = mbd.Solution.load(out)
    assert sol.integrator == DEFAULT_INTEGRATOR["se3"] == "rkmk"
    ref = mbd.simulate(mbd.models.heavy_top(), formulation="se3", t_end=0.003, h=1e-3, **QUIET)
    np.testing.assert_array_equal(np.asarray(sol.r), np.asarray(ref.r))
    bad = CliRunner().invoke(app, args + ["--integrator", "energy_momentum"], env=WIDE)
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    assert "energy_momentum" in bad.output and "se3" in bad.output


def test_generated_model_size_after_a_colon(tmp_path):
    """NAME:N builds a generated model of size N; a bad size or a size on a fixed model is a
    usage error (exit 2) naming the problem."""
    out = tmp_path / "chain.npz"
    args = ["--h", "1e-3", "--t-end", "0.002", "--out", str(out)]
    result = CliRunner().invoke(app, ["simulate", "pendulum_chain:2", *args], env=WIDE)
    assert result.exit_code == 0, result.output
    assert mbd.Solution.load(out).body_names == ("link0", "link1")
    for size in ("two", "0", "9" * 5000):
        bad = CliRunner().invoke(app, ["info", f"engine:{size}"], env=WIDE)
        assert bad.exit_code == 2 and "n_cylinders" in bad.output, size
    bad = CliRunner().invoke(app, ["info", "heavy_top:3"], env=WIDE)
    assert bad.exit_code == 2 and "neither a file nor a built-in model" in bad.output
