"""Bad input gives a clear error naming the file, the field and the object."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app
from jaxmbd.model.drivers import Expression, ExpressionError


def write(tmp_path, doc, name="model.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def pendulum_doc(**changes):
    doc = json.loads(mbd.models.path("single_pendulum").read_text())
    for key, value in changes.items():
        doc[key] = value
    return doc


def test_malformed_json(tmp_path):
    path = write(tmp_path, '{"bodies": [1, 2,, ]}')
    with pytest.raises(mbd.ModelFileError, match=r"model\.json.*invalid JSON at line 1, column"):
        mbd.load_model(path)


def test_missing_file(tmp_path):
    with pytest.raises(mbd.ModelFileError, match="file not found"):
        mbd.load_model(tmp_path / "nope.json")


def test_missing_field(tmp_path):
    doc = pendulum_doc()
    del doc["bodies"][0]["mass"]
    with pytest.raises(mbd.ModelFileError, match=r"bodies\[0\] \('pendulum'\)\.mass: missing"):
        mbd.load_model(write(tmp_path, doc))


def test_unknown_body_name(tmp_path):
    doc = pendulum_doc()
    doc["constraints"][2]["body_j"] = "gorund"
    with pytest.raises(
        mbd.ModelFileError, match=r"constraints\[2\] \('revJoint_CD_1'\).*unknown body 'gorund'"
    ):
        mbd.load_model(write(tmp_path, doc))


def test_unknown_published_body_id(tmp_path):
    doc = {
        "bodies": [
            {"name": "ground", "id": 0},
            {"name": "b", "id": 1, "r": [0, 0, 0], "A": np.eye(3).tolist()},
        ],
        "constraints": [
            {
                "name": "c1",
                "type": "CD",
                "body_i": 1,
                "body_j": 7,
                "c": [1, 0, 0],
                "s_bar_p_i": [0, 0, 0],
                "s_bar_q_j": [0, 0, 0],
                "f": "0",
            }
        ],
    }
    with pytest.raises(
        mbd.ModelFileError, match=r"constraints\[0\] \('c1'\)\.body_j: unknown body id 7; known ids"
    ):
        mbd.load_model(write(tmp_path, doc))


def test_zero_axis_vector(tmp_path):
    doc = pendulum_doc()
    doc["constraints"][0]["a_bar_i"] = [0, 0, 0]
    with pytest.raises(mbd.ModelFileError, match=r"revJoint_DP1_1.*a_bar_i: must not be the zero"):
        mbd.load_model(write(tmp_path, doc))


@pytest.mark.parametrize(
    ("mass", "inertia", "message"),
    [
        (0.0, [1, 1, 1], "mass: must be positive"),
        (-2.0, [1, 1, 1], "mass: must be positive"),
        (1.0, [1, -1, 1], "inertia must be positive"),
        (1.0, [0, 0, 0], "inertia must be positive"),
        ("heavy", [1, 1, 1], "mass: expected a number"),
    ],
)
def test_non_positive_mass_or_inertia(tmp_path, mass, inertia, message):
    doc = pendulum_doc()
    doc["bodies"][0]["mass"] = mass
    doc["bodies"][0]["inertia"] = inertia
    with pytest.raises(mbd.ModelFileError, match=rf"bodies\[0\] \('pendulum'\).*{message}"):
        mbd.load_model(write(tmp_path, doc))


def test_parallel_axes():
    b = mbd.ModelBuilder("u")
    b.add_body("a", mass=1, inertia=[1, 1, 1])
    with pytest.raises(mbd.ModelError, match="joint 'cross'.*must be perpendicular"):
        b.universal(
            "cross",
            body_i="ground",
            body_j="a",
            point=[0, 0, 0],
            axis_i=[1, 0, 0],
            axis_j=[2, 0, 0],
        )
    with pytest.raises(mbd.ModelError, match="driver 'motor'.*parallel to the axis"):
        b.rotation_driver(
            "motor", body_i="ground", body_j="a", axis=[0, 0, 1], reference=[0, 0, 3], angle="t"
        )
    with pytest.raises(mbd.ModelError, match="axes.*parallel"):
        b.add_body("c", mass=1, inertia=[1, 1, 1], axes=([1, 0, 0], [2, 0, 0]))


def test_published_driver_with_parallel_vectors(tmp_path):
    doc = {
        "bodies": [
            {"name": "ground", "id": 0},
            {"name": "b", "id": 1, "r": [0, 0, 0], "A": np.eye(3).tolist()},
        ],
        "constraints": [
            {
                "name": "drive",
                "type": "DP1",
                "body_i": 1,
                "body_j": 0,
                "a_bar_i": [1, 0, 0],
                "a_bar_j": [1, 0, 0],
                "f": "cos(t)",
            }
        ],
    }
    with pytest.raises(mbd.ModelFileError, match="drive.*parallel at the initial pose"):
        mbd.load_model(write(tmp_path, doc))


def test_bad_rotation_matrix(tmp_path):
    doc = pendulum_doc()
    doc["bodies"][0].pop("axes")
    doc["bodies"][0]["A"] = [[1, 0, 0], [0, 1, 0], [0, 0, -1]]
    with pytest.raises(mbd.ModelFileError, match=r"pendulum.*not a rotation matrix"):
        mbd.load_model(write(tmp_path, doc))


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "t.real",
        "open('x')",
        "lambda: 1",
        "x + 1",
        "'a'",
        "sin(t, 2)",
    ],
)
def test_expressions_are_whitelisted(source):
    with pytest.raises(ExpressionError):
        Expression(source)


def test_expression_error_names_constraint(tmp_path):
    doc = pendulum_doc()
    doc["constraints"][-1]["angle"] = "cos(t"
    with pytest.raises(mbd.ModelFileError, match=r"constraints\[5\] \('driver'\).*cannot parse"):
        mbd.load_model(write(tmp_path, doc))


def test_unknown_types(tmp_path):
    doc = pendulum_doc()
    doc["constraints"][0]["type"] = "DP3"
    with pytest.raises(
        mbd.ModelFileError, match=r"constraints\[0\].*type: unknown constraint type 'DP3'"
    ):
        mbd.load_model(write(tmp_path, doc))
    doc = pendulum_doc(
        joints=[{"name": "j", "type": "helical", "body_i": "pendulum", "body_j": "ground"}]
    )
    with pytest.raises(mbd.ModelFileError, match=r"joints\[0\] \('j'\)\.type: unknown joint type"):
        mbd.load_model(write(tmp_path, doc))


def test_under_constrained_kinematics():
    with pytest.raises(mbd.ModelError, match="double pendulum.*under-constrained by 2"):
        mbd.kinematics(mbd.models.double_pendulum(), t_end=0.1, h=1e-3)


def test_over_driven_model_refused():
    """A second motor on a joint with one freedom: the driven row depends on the others, so
    the run refuses the model, naming the driver (it cannot be dropped)."""
    b = mbd.ModelBuilder("over")
    b.add_body("a", mass=1, inertia=[1, 1, 1])
    b.revolute("pin", body_i="ground", body_j="a", point=[0, 0, 0], axis=[0, 0, 1])
    b.rotation_driver("m1", body_i="ground", body_j="a", axis=[0, 0, 1], angle="t")
    b.rotation_driver("m2", body_i="ground", body_j="a", axis=[0, 0, 1], angle="t")
    model = b.build()
    for run in (mbd.kinematics, mbd.simulate):
        with pytest.raises(mbd.ModelError, match="driven row.*'m2'.*no freedom left"):
            run(model, t_end=0.1, h=1e-3)


def _redundant_model():
    """6 equations for 6 coordinates but two of them are the same: 'copy' is redundant."""
    b = mbd.ModelBuilder("redundant")
    b.add_body("a", mass=1, inertia=[1, 1, 1], r=[1, 0, 0], axes=([1, 0, 0], [0, 0.6, 0.8]))
    b.spherical("ball", body_i="ground", body_j="a", point=[0, 0, 0])
    b.add_dp1("first", body_i="ground", a_bar_i=[0, 0, 1], body_j="a", a_bar_j=[1, 0, 0])
    b.add_dp1("copy", body_i="ground", a_bar_i=[0, 0, 1], body_j="a", a_bar_j=[1, 0, 0])
    b.add_dp1("third", body_i="ground", a_bar_i=[0, 1, 0], body_j="a", a_bar_j=[0, 0, 1], f=-0.8)
    return b.build()


@pytest.mark.parametrize("formulation", ["rA", "rp", "re"])
def test_redundant_rows_named_in_kinematics(formulation):
    """The duplicated row is dropped (the later one), which leaves 1 DOF: kinematics says
    so and names the dropped row; redundant="error" refuses the model naming it. (re used
    to take the least-squares solution silently: status 0 and non-finite multipliers,
    issue 10.)"""
    model = _redundant_model()
    with pytest.warns(mbd.RedundancyWarning, match="'copy'"):
        with pytest.raises(mbd.ModelError, match="under-constrained by 1.*'copy'"):
            mbd.kinematics(model, formulation=formulation, t_end=0.003, h=1e-3)
    with pytest.raises(mbd.ModelError, match="1 of 6 constraint rows are redundant.*'copy'"):
        mbd.kinematics(model, formulation=formulation, t_end=0.003, h=1e-3, redundant="error")


@pytest.mark.parametrize(
    "formulation, integrator",
    [("rA", "gen_alpha"), ("re", "gen_alpha"), ("se3", "rkmk"), ("rotmat", "rk")],
)
def test_redundant_rows_dropped_or_refused_in_dynamics(formulation, integrator):
    """A ball joint and the same DP1 twice (2 DOF, one redundant row): every formulation
    runs without the copy (its multiplier zero), or refuses it with redundant="error",
    naming it. (Inertia not a flat lamina: rotmat's Poinsot tensor must be invertible.)"""
    b = mbd.ModelBuilder("redundant")
    b.add_body("a", mass=1, inertia=[1, 2, 2.5], r=[1, 0, 0], axes=([1, 0, 0], [0, 0.6, 0.8]))
    b.spherical("ball", body_i="ground", body_j="a", point=[0, 0, 0])
    b.add_dp1("first", body_i="ground", a_bar_i=[0, 0, 1], body_j="a", a_bar_j=[1, 0, 0])
    b.add_dp1("copy", body_i="ground", a_bar_i=[0, 0, 1], body_j="a", a_bar_j=[1, 0, 0])
    model = b.build()
    with pytest.warns(mbd.RedundancyWarning):
        sol = mbd.simulate(
            model, formulation=formulation, integrator=integrator, t_end=0.002, h=1e-3
        )
    assert np.all(np.asarray(sol.status) == 0)
    assert np.all(np.asarray(sol.lam)[:, model.constraint_names.index("copy")] == 0.0)
    with pytest.raises(mbd.ModelError, match="redundant.*'copy'"):
        mbd.simulate(
            model, formulation=formulation, integrator=integrator, t_end=0.002, h=1e-3,
            redundant="error",
        )  # fmt: skip


def test_kinematic_status_covers_velocity_acceleration_and_multipliers():
    """The status of a kinematic step includes its velocity, acceleration and multiplier
    solves (it used to be the position Newton's alone): at a configuration that satisfies
    Phi = 0 but has a rank-deficient Jacobian, those solves are refused."""
    from jaxmbd.analysis.kinematics import _kinematic_state
    from jaxmbd.formulations import get_formulation

    model = _redundant_model()
    for name in ("rA", "re"):
        form = get_formulation(name)
        q = (model.r0, form.coordinates(model.A0))
        # 0 here: a floor already below ROUND_OFF's
        np.testing.assert_allclose(form.residual(model, q, 0.0), 0, rtol=0, atol=1e-15)
        _, _, status, _ = _kinematic_state(model, form, q, jnp.asarray(0.0))
        assert int(status) in (mbd.NONFINITE, mbd.ILL_CONDITIONED), name


def test_inconsistent_driver_is_projected():
    """A driver that starts away from the initial pose: the t = 0 analysis moves the body."""
    b = mbd.ModelBuilder("projected")
    b.add_body("a", mass=1, inertia=[1, 1, 1], r=[1, 0, 0])
    b.revolute("pin", body_i="ground", body_j="a", point=[0, 0, 0], axis=[0, 0, 1])
    b.rotation_driver("m", body_i="ground", body_j="a", axis=[0, 0, 1], angle="0.1 + t")
    sol = mbd.kinematics(b.build(), t_end=0.01, h=1e-3)
    np.testing.assert_allclose(sol.r[0, 0], [np.cos(0.1), np.sin(0.1), 0], rtol=0, atol=ROUND_OFF)


def test_bad_step_size():
    with pytest.raises(ValueError, match="step size h must be positive"):
        mbd.kinematics(mbd.models.single_pendulum(), t_end=1.0, h=0.0)
    with pytest.raises(ValueError, match="unknown formulation 'rq'"):
        mbd.kinematics(mbd.models.single_pendulum(), formulation="rq", t_end=1.0, h=1e-3)


def test_re_rejects_singular_start():
    b = mbd.ModelBuilder("flat")
    b.add_body("a", mass=1, inertia=[1, 1, 1], r=[1, 0, 0])
    b.revolute("pin", body_i="ground", body_j="a", point=[0, 0, 0], axis=[0, 0, 1])
    b.rotation_driver("m", body_i="ground", body_j="a", axis=[0, 0, 1], angle="t")
    with pytest.raises(mbd.ModelError, match="body 'a'.*Euler-angle singularity"):
        mbd.kinematics(b.build(), formulation="re", t_end=0.1, h=1e-3)


def test_cli_reports_errors(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["kinematics", "double_pendulum"])
    assert result.exit_code == 1 and "under-constrained" in result.output
    result = runner.invoke(app, ["kinematics", str(tmp_path / "missing.json")])
    assert result.exit_code != 0 and "neither a file nor a built-in" in result.output
