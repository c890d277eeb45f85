"""The package's layering (``[tool.importlinter]`` in pyproject.toml) is kept: every module
imports only from the layers below its own, and no package's modules import each other in a
circle. Imports inside functions count (grimp reads every import statement of a module), as
the check on a copy with one such import shows."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]

_LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run import-linter on the ``jaxmbd`` package under ``root`` with its pyproject.toml."""
    return subprocess.run(
        [sys.executable, "-c", _LINT, str(root / "pyproject.toml")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_contracts_kept():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 broken." in run.stdout


def test_a_lazy_upward_import_breaks_the_contracts(tmp_path):
    """A low package (jaxmbd.lie) importing a high module (jaxmbd.analysis.simulation) inside a
    function breaks both contracts: the layers and, as the analyses import lie, the circles."""
    shutil.copytree(
        ROOT / "jaxmbd", tmp_path / "jaxmbd", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "jaxmbd" / "lie" / "__init__.py", "a") as f:
        f.write("\n\ndef _run(*args):\n    from ..analysis.simulation import simulate\n\n")
        f.write("    return simulate(*args)\n")
    run = lint_imports(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "jaxmbd layers (imports point down) BROKEN" in run.stdout
    assert "no import circles among the modules of any jaxmbd package BROKEN" in run.stdout
    assert "jaxmbd.lie -> jaxmbd.analysis.simulation" in run.stdout
