"""The documentation site builds strictly (warnings are errors): the docs tools are in the
dev extra (and alone in the docs extra); the same command as the docs: mkdocs build
--strict (about 3 s)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    for name in ("paper1_kissel_taves_negrut", "paper4_dumitriu_margaritescu", "slider_crank"):
        page = (site / "tutorials" / name / "index.html").read_text()
        assert "<img" in page or "data:image" in page, name
