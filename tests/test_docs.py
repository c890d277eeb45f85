"""The documentation: the site builds strictly (warnings are errors; the docs tools are in
the dev extra and alone in the docs extra; the same command as the docs, mkdocs build
--strict, about 10 s), every Python block of the README and the guide is valid Python, and
the examples that the pages show with their output run and print what the pages say."""

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tolerances import ROUND_OFF

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: the site's own pages (docs/reports links to benchmarks/results, which are not examples)
PAGES = [README] + sorted(p for p in DOCS.rglob("*.md") if "reports" not in p.parts)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
#: a Python block followed by the block of what it prints
EXAMPLE = re.compile(r"```python\n((?:(?!```).)*)```\s*```text\n(.*?)```", re.S)


def test_docs_build_strict(tmp_path):
    for module in ("mkdocs", "mkdocstrings_handlers.python", "mkdocs_jupyter", "material"):
        pytest.importorskip(module)
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    # the API reference comes from the docstrings, the tutorials from the notebooks
    assert "load_robot" in (site / "api/models/index.html").read_text()
    assert "equivalent_box" in (site / "api/visual/index.html").read_text()
    forces = (site / "api/forces/index.html").read_text()
    for name in ("SpringDamper", "PointForce", "BodyTorque", "GeneralForce"):
        assert name in forces, name
    for name in ("paper1_kissel_taves_negrut", "paper4_dumitriu_margaritescu", "slider_crank"):
        page = (site / "tutorials" / name / "index.html").read_text()
        assert "<img" in page or "data:image" in page, name
    # the paper notebooks' animations are rendered (a GIF data URI, whatever IPython labelled
    # it: nbconvert drops an image/gif output it has no template for)
    for name in ("paper1_kissel_taves_negrut", "paper2_mueller_terze",
                 "paper3_betsch_leyendecker", "paper4_dumitriu_margaritescu"):  # fmt: skip
        page = (site / "tutorials" / name / "index.html").read_text()
        assert re.search(r'<img[^>]*src="data:image/(gif|png);base64,R0lGOD', page), name
    # the tutorials that show their code: the code is on the page, not imported
    for name in ("parameter_identification", "swing_up_control"):
        page = (site / "tutorials" / name / "index.html").read_text()
        assert "sys.path" not in page and "mbd.simulate" in page, name
    # the experiment reports are part of the site, with their figures
    assert (site / "reports/engines/REPORT/index.html").exists()
    assert (site / "reports/engines/work_precision_slider_crank.png").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_compile(page):
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
        compile(code, str(page), "exec")


def run_example(code: str) -> tuple[str, dict]:
    """Execute a documentation example as a script; its printed output and its names."""
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<example>", "exec"), namespace)
    return out.getvalue(), namespace


def assert_prints(printed: str, shown: str, *, rtol: float):
    """The page shows what the example prints: the same lines, numbers within ``rtol``."""
    got, want = printed.strip().splitlines(), shown.strip().splitlines()
    assert len(got) == len(want), (printed, shown)
    for line, expected in zip(got, want, strict=True):
        assert NUMBER.sub("#", line) == NUMBER.sub("#", expected), (line, expected)
        a = np.array([float(x) for x in NUMBER.findall(line)])
        b = np.array([float(x) for x in NUMBER.findall(expected)])
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12, err_msg=line)


def assert_expected_values(printed: str, *, rtol: float):
    """Every printed ``... value expected reference`` line: the value is the reference."""
    checked = 0
    for line in printed.splitlines():
        if " expected " in line:
            before, after = line.split(" expected ")
            value, reference = float(NUMBER.findall(before)[-1]), float(NUMBER.findall(after)[0])
            assert abs(value - reference) <= rtol * abs(reference) + ROUND_OFF, line
            checked += 1
    assert checked, printed


FORCE_EXAMPLES = EXAMPLE.findall((DOCS / "guide/forces.md").read_text())


@pytest.mark.parametrize(
    "code, shown, rtol, shown_rtol",
    # the spring's example compiles a gradient (about a minute on 2 cores): -m slow; its
    # gradient meets the closed form to 2e-8 (the page), the others theirs to round-off, and
    # print what the page shows to round-off (the spring's printed digits: not measured)
    [
        pytest.param(*FORCE_EXAMPLES[0], 1e-5, 1e-6, marks=pytest.mark.slow),
        *[(*example, 3e-14, ROUND_OFF) for example in FORCE_EXAMPLES[1:]],
    ],
    ids=["spring_damper", "bushing", "point_force", "body_torque", "general"],
)
def test_force_element_examples(code, shown, rtol, shown_rtol):
    """Each force element's example on the guide page: the simulation meets the closed form
    it prints beside it, and the page shows the output it really prints."""
    printed, _ = run_example(code)
    assert_expected_values(printed, rtol=rtol)
    assert_prints(printed, shown, rtol=shown_rtol)


def test_statics_example():
    """The statics page: the sprung pendulum's equilibrium angle and its mode print what the
    page shows (and the closed forms the page derives: 0.529243 rad, 0.991391 Hz)."""
    code, shown = EXAMPLE.findall((DOCS / "guide/statics.md").read_text())[0]
    printed, _ = run_example(code)
    assert_prints(printed, shown, rtol=ROUND_OFF)


def test_markers_example():
    """The markers page: the crank tip's speed, centripetal acceleration and position meet
    the closed forms printed beside them, and the page shows what the example prints."""
    code, shown = EXAMPLE.findall((DOCS / "guide/markers.md").read_text())[0]
    printed, _ = run_example(code)
    assert_expected_values(printed, rtol=ROUND_OFF)
    assert_prints(printed, shown, rtol=ROUND_OFF)


def test_closed_loop_example():
    """The closed-loops page: the four-bar of four revolutes builds, runs without its 3
    redundant rows, and prints what the page shows."""
    code, shown = EXAMPLE.findall((DOCS / "guide/closed-loops.md").read_text())[0]
    printed, _ = run_example(code)
    got, want = printed.strip().splitlines(), shown.strip().splitlines()
    assert "['J4.cd_z', 'J4.perp1.dp1_a', 'J4.perp1.dp1_b']" in got[0]
    residual = float(NUMBER.findall(got[2])[-1])  # round-off: its digits vary
    assert residual < 1e-11
    assert float(NUMBER.findall(want[2])[-1]) < 1e-11
    assert_prints("\n".join(got[:2] + got[3:]), "\n".join(want[:2] + want[3:]), rtol=ROUND_OFF)


def test_readme_example():
    """The README's Python example runs and computes what its comments say."""
    readme = README.read_text()
    code = re.findall(r"```python\n(.*?)```", readme[readme.index("## Python") :], re.S)[0]
    printed, ns = run_example(code)
    assert ns["sol"].r.shape == (1001, 2, 3) and ns["sol"].A.shape == (1001, 2, 3, 3)
    energy = ns["E"]
    assert abs(float(energy[-1] - energy[0])) < 1e-10 * float(np.abs(energy).max())
    # the slider crank's crank turns once a second: the slider is back at x = 0.2
    assert abs(float(ns["kin"].r[-1, 2, 0]) - 0.2) < 1e-11
    # the MJCF arm runs in joint coordinates, MuJoCo's layout
    assert ns["arm"].formulation == "joint" and ns["arm"].qpos.shape == (1001, 3)
    gradient = [line for line in printed.splitlines() if line.startswith("d z / d mass:")]
    assert len(gradient) == 1 and np.isfinite(float(NUMBER.findall(gradient[0])[-1]))


def mujoco_centres(m, names, *, t_end, every, dt=1e-4):
    """MuJoCo RK4 from the first keyframe: centres of mass of the named bodies every
    ``every`` seconds."""
    import mujoco

    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, dt
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name) for name in names]
    stride, r = round(every / dt), []
    for k in range(round(t_end / dt) + 1):
        if k % stride == 0:
            r.append(d.xipos[ids].copy())
        mujoco.mj_step(m, d)
    return np.array(r)


@pytest.mark.slow
def test_mujoco_guide_examples(tmp_path, monkeypatch):
    """The "coming from MuJoCo" page: jaxmbd's trajectory of the MJCF arm and its hinge
    angles match MuJoCo's RK4 as the page shows (the file's RK4 in joint coordinates, the
    default for a model read from MJCF, at h = 1e-3: 9.5e-11 m); with the joint damping
    element, the damped arm follows MuJoCo's damped run as closely (1.6e-11 m measured; in
    rA, gen_alpha's 5.3e-6 m)."""
    pytest.importorskip("mujoco")
    page = (DOCS / "guide/mujoco.md").read_text()
    code, shown = EXAMPLE.findall(page)[0]
    damping = re.findall(r"```python\n(import warnings.*?)```", page, re.S)[0]
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)  # the examples read tests/data/ and write their variant here
    printed, _ = run_example(code)
    assert_prints(printed, shown, rtol=1e-3)
    _, ns = run_example(damping)
    sol, model = ns["sol"], ns["model"]
    r_mj = mujoco_centres(ns["m"], model.body_names, t_end=0.5, every=1e-3)
    assert np.abs(np.asarray(sol.r) - r_mj).max() < 1e-10
