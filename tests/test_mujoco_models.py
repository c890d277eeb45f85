"""The standard control models of dm_control's suite and gymnasium's MuJoCo environments,
read from the installed packages, follow MuJoCo under the same random open-loop controls
(issue 36): joint positions to 1e-6, bodies in MuJoCo's order. The harness is
``benchmarks/control_models.py`` (2 s there; 0.5 s here, two models by default and all six
with ``-m slow``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("mujoco")

_spec = importlib.util.spec_from_file_location(
    "mujoco_models", Path(__file__).parents[1] / "experiments" / "control_models.py"
)
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

# cheetah and hopper (joint armature; limits off in both engines): ~2 min each to compile
SLOW = {"pendulum", "reacher", "inverted_pendulum", "inverted_double_pendulum", "cheetah",
        "hopper"}  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in harness.MODELS],
)
def test_standard_model_follows_mujoco(name):
    package = harness.MODELS[name][0]
    pytest.importorskip(package)
    result = harness.compare(name, t_end=0.5, seed=1)
    assert result["bodies_in_mujoco_order"]
    assert result["travel"] > 0.01  # the controls really move it
    # compared up to the first time a joint limit acts (a soft limit in MuJoCo, a compliant
    # one here), if one does within the run
    assert result["error"] < 1e-6, result
