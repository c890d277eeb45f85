"""The defaults the guides state (issue 74 item 6) are one table, docs/guide/defaults.md,
checked here against ``mbd.default_formulation`` and the plan of a run (formulation,
integrator, step, contact, limits, equality) for a model of each kind, so that the guides
cannot drift from the code."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

import jaxmbd as mbd
from jaxmbd.analysis.plan import plan_simulation

TABLE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "defaults.md"
COLUMNS = ("model", "formulation", "integrator", "step", "contact", "limits", "equality")


def table_rows() -> dict[str, dict[str, str]]:
    """The rows of the marked table, by model kind, backticks removed."""
    text = TABLE.read_text()
    body = text.split("<!-- defaults-table")[1].split("<!-- end defaults-table")[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS) or cells[0] in ("model", "") or set(cells[0]) <= {"-"}:
            continue
        rows[cells[0]] = dict(zip(COLUMNS, cells, strict=True))
    return rows


def _pendulum(contact: bool) -> mbd.Model:
    b = mbd.ModelBuilder("pendulum")
    b.add_body("bob", mass=1.0, inertia=[0.01] * 3, r=(0.5, 0.0, 0.0),
               shapes=[mbd.geometry.sphere(0.05)] if contact else None)  # fmt: skip
    b.revolute("hinge", body_i="ground", body_j="bob", point=(0, 0, 0), axis=(0, 1, 0),
               limits=(-1.0, 1.0))  # fmt: skip
    if contact:
        b.add_ground_plane(point=(0.0, 0.0, -0.6))
        b.add_contact("bob", "ground", friction=0.5)
    return b.build()


def _model_file(tmp_path) -> mbd.Model:
    path = tmp_path / "pendulum.toml"
    mbd.save_model(_pendulum(False), path)
    return mbd.load_model(path)


def _mjcf_file(tmp_path) -> mbd.Model:
    """dm_control's cart-pole (its option: RK4, 0.01 s)."""
    import dm_control

    suite = Path(os.path.dirname(dm_control.__file__)) / "suite"
    return mbd.load_model(suite / "cartpole.xml")


MODELS = {
    "built in code, no contact pairs": lambda tmp: _pendulum(False),
    "built in code, with contact pairs": lambda tmp: _pendulum(True),
    "jaxmbd model file (JSON, TOML)": _model_file,
    "MJCF or URDF file": _mjcf_file,
}


def test_the_table_has_a_row_for_every_model_kind():
    assert set(table_rows()) == set(MODELS)


@pytest.mark.parametrize("kind", list(MODELS))
def test_stated_defaults_are_the_code(kind, tmp_path):
    row = table_rows()[kind]
    model = MODELS[kind](tmp_path)
    file = model.constraint_model
    h = None if row["step"] == "the file's" else 1e-3
    plan = plan_simulation(model, t_end=0.02, h=h)
    assert mbd.default_formulation(model) == plan.formulation == row["formulation"]
    if row["integrator"] == "the file's":
        assert plan.integrator == file.integrator
    else:
        assert plan.integrator == row["integrator"]
    if row["step"] == "the file's":
        assert plan.step_size == file.timestep
    else:  # a model built in code needs h
        with pytest.raises(ValueError, match="h"):
            plan_simulation(model, t_end=0.02)
    assert plan.contact == row["contact"] or "contact" in plan.absent
    assert plan.limits == row["limits"] or "limits" in plan.absent
    assert plan.equality == row["equality"] or not model.equalities


def test_kinematics_defaults_to_ra_as_stated():
    assert "`kinematics` runs in `rA`" in TABLE.read_text()
    assert inspect.signature(mbd.kinematics).parameters["formulation"].default == "rA"


def test_the_guides_state_no_other_defaults():
    """The statements the guides used to make against the code are gone: models in code or
    model files in rA by default, RK4 as the name of the default integrator."""
    guide = TABLE.parent
    text = {p.name: p.read_text() for p in guide.glob("*.md")}
    text["README.md"] = (guide.parents[1] / "README.md").read_text()
    wrong = [r"`\"rA\"` otherwise", r"and a model file with `rA`", r"\+ RK4 \(the default\)"]
    for name, page in text.items():
        for pattern in wrong:
            assert not re.search(pattern, page), (name, pattern)
