"""The tutorials in notebooks/ run from top to bottom.

The four paper notebooks (``paper*.ipynb``, each reproducing its paper's headline figure
with an animation), ``slider_crank`` and ``swing_up_control`` execute in the default
suite: the paper notebooks take 11-22 s each on a 2-core CPU (measured at df10698 with
nbclient, one at a time; most of it compilation), ``slider_crank`` about 35 s (six
compiled programs: kinematics in rA, rp, re, two integrators, the diagnostics),
``swing_up_control`` (25 Adam iterations at h = 4e-3) about 25 s. The paper notebooks are committed
executed; their stored outputs are checked too. ``parameter_identification`` compiles two
L-BFGS steps through 2000 implicit steps (about 45 s) and runs with ``-m slow``; by
default it is only validated and compiled cell by cell."""

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
PAPERS = [p for p in NOTEBOOKS if p.name.startswith("paper")]
LONG = {"parameter_identification.ipynb"}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in LONG else p for p in NOTEBOOKS],
    ids=lambda p: p.name,
)
def test_notebook_runs(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    if path in PAPERS:  # executed afresh: the headline figure and the animation are there
        images = [
            o["data"]["image/png"]
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        assert len(images) >= 2 and any(img.startswith("R0lGOD") for img in images)


@pytest.mark.parametrize("path", PAPERS, ids=lambda p: p.name)
def test_paper_notebook_valid_with_stored_figures(path):
    """Cheap check of a paper notebook: valid, every code cell compiles, executed in order
    without errors, and its outputs show the headline figure and the animation."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        compile(cell.source, path.name, "exec")
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # the figure and the animation
    assert any(img.startswith("R0lGOD") for img in images)  # an (animated) GIF


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name in LONG], ids=lambda p: p.name)
def test_long_tutorial_valid_and_compiles(path):
    """Cheap default check of the tutorials whose execution is slow: valid notebook, every
    code cell compiles, and every module it imports can be found (with the experiments
    folder on the path, as the notebooks put it)."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    modules = set()
    for cell in code:
        tree = compile(cell.source, path.name, "exec", ast.PyCF_ONLY_AST)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
    experiments = str(path.parents[1] / "experiments")
    sys.path.insert(0, experiments)
    try:
        missing = [m for m in sorted(modules) if importlib.util.find_spec(m) is None]
    finally:
        sys.path.remove(experiments)
    assert not missing
