"""Run a test script in a subprocess whose JAX shows several CPU devices."""

import os
import subprocess
import sys


def run_on_host_devices(script: str, n: int, *, timeout: int = 900) -> str:
    """The stdout of ``python -c script`` with ``n`` host devices (the suite's XLA flags
    kept: tests/conftest.py) and this folder importable; fails with its stderr's end."""
    flags = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n}"
    # host devices are CPU devices: on a GPU machine the default backend would be its one GPU
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
