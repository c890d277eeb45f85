"""The tutorials in notebooks/ run from top to bottom.

Every notebook executes with -m slow; the default suite runs the two cheapest (paper2,
paper4) and ``reinforcement_learning`` (eight CMA-ES generations on cart-pole balance,
about 20 CPU-s; the only run of jaxmbd.envs under evosax in the default suite);
SLOW_NOTEBOOKS lists the rest and what covers them. The four paper notebooks
(``paper*.ipynb``, each reproducing its paper's headline figure with an animation) take
11-22 s each on a 2-core CPU (measured at df10698 with nbclient, one at a time; most of it
compilation), ``slider_crank`` about 35 s (six compiled programs: kinematics in rA, rp, re,
two integrators, the diagnostics), ``swing_up_control`` (25 Adam iterations at h = 4e-3)
about 25 s, ``parameter_identification`` (Gauss-Newton on forward-mode sensitivities, one
compiled program per integrator) about 22 s. The paper notebooks are committed executed;
their stored outputs are checked too, all four by default."""

import re
from pathlib import Path

import pytest

#: base64 of b"GIF8": an animation, whichever way it is labelled
GIF = "R0lGOD"


def animations(outputs) -> list[str]:
    """The base64 GIFs among a notebook's outputs, under whichever MIME type the IPython that
    ran it chose (IPython 8 labels GIF bytes image/png, IPython 9 image/gif) or as the data URI
    of an HTML image (:func:`jaxmbd.viz.plot.inline`, which nbconvert renders in the docs)."""
    found = []
    for o in outputs:
        data = o.get("data", {})
        found += [data[m] for m in ("image/gif", "image/png") if data.get(m, "").startswith(GIF)]
        html = data.get("text/html", "")
        html = html if isinstance(html, str) else "".join(html)
        found += re.findall(rf"data:image/(?:gif|png);base64,({GIF}[A-Za-z0-9+/=]*)", html)
    return found


def figures(outputs) -> list[str]:
    """The base64 PNG plots (matplotlib) among a notebook's outputs."""
    return [
        o["data"]["image/png"]
        for o in outputs
        if not o.get("data", {}).get("image/png", GIF).startswith(GIF)
    ]


#: Run by the tests before a notebook's first cell: its animations render at most 5 frames
#: (matplotlib draws each frame, ~0.2 s of CPU: a paper notebook's 50-60 frames took ~10 s
#: of its ~35). Everything else runs as a reader runs it; the GIF is still written and shown
#: (checked below), and test_animation.py checks the frames themselves.
TEST_SETUP = """\
import functools as _functools

import jaxmbd.viz.plot as _plot


def _few_frames(animate):
    @_functools.wraps(animate)
    def few(*args, **kwargs):
        kwargs["max_frames"] = min(kwargs.get("max_frames", 250), 5)
        return animate(*args, **kwargs)

    return few


_plot.animate = _few_frames(_plot.animate)
"""

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
PAPERS = [p for p in NOTEBOOKS if p.name.startswith("paper")]


#: Notebooks run with -m slow (CI budget: the default suite keeps the two cheapest, paper2
#: and paper4, 8-9 s each, plus every paper notebook's stored outputs below). They use the
#: public API that default tests cover: robot_control (batched policy training) and
#: swing_up_control (38 s, a checkpointed swing-up gradient) -> test_batch_control.py,
#: test_gradients.py::test_checkpointed_gradient_equals_plain; slider_crank (31 s, kinematics
#: in three formulations, two integrators) -> test_kinematics.py, test_integrators.py;
#: parameter_identification (22 s, forward-mode sensitivities) -> test_gradients.py,
#: test_higher_derivatives.py; paper1 (17 s) -> test_kinematics.py's closed forms; paper3
#: (11 s) -> test_betsch_leyendecker.py. Seconds: the full default run, 2 workers.
SLOW_NOTEBOOKS = {
    "robot_control.ipynb",
    "swing_up_control.ipynb",
    "slider_crank.ipynb",
    "parameter_identification.ipynb",
    "paper1_kissel_taves_negrut.ipynb",
    "paper3_betsch_leyendecker.ipynb",
}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_NOTEBOOKS else p for p in NOTEBOOKS],
    ids=lambda p: p.name,
)
def test_notebook_runs(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(TEST_SETUP))
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
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert figures(outputs) and animations(outputs)


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
    assert figures(outputs)  # the headline figure
    assert animations(outputs)  # the animation


def test_animation_found_under_every_label():
    """The check above finds a GIF however IPython labelled it, and nothing else."""
    gif = GIF + "lhAQABAAAAACw="
    png = "iVBORw0KGgo="
    assert animations([{"data": {"image/gif": gif}}]) == [gif]
    assert animations([{"data": {"image/png": gif}}]) == [gif]
    html = f'<img src="data:image/gif;base64,{gif}" alt="a.gif"/>'
    assert animations([{"data": {"text/html": html}}]) == [gif]
    assert animations([{"data": {"image/png": png, "text/plain": "<Figure>"}}]) == []
    assert figures([{"data": {"image/png": png}}, {"data": {"image/png": gif}}]) == [png]
