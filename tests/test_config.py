"""Settings made by ``import jaxmbd`` (jaxmbd/_config.py): float64 and the per-user
persistent compilation cache, its opt-out, and that a cache folder the user chose wins."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax

from jaxmbd._config import NO_CACHE_ENV, default_cache_dir, enable_compilation_cache

CHILD = """
import json, jax, jax.numpy as jnp
import jaxmbd
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.block_until_ready(jax.jit(lambda x: jnp.sin(x) * 3.0)(1.0))
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir,
                  "x64": jax.config.jax_enable_x64}))
"""


def test_compilation_cache_default(tmp_path):
    """A fresh interpreter (own XDG_CACHE_HOME: the user's real cache is never touched, the
    suite's cache settings removed) stores its programs in XDG_CACHE_HOME/jaxmbd/xla."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION")}
    environ.pop(NO_CACHE_ENV, None)
    environ["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=environ, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["x64"]
    folder = tmp_path / "jaxmbd" / "xla"
    assert got["dir"] == str(folder)
    assert any(p.name.endswith("-cache") for p in folder.iterdir())  # a program was stored


def test_compilation_cache_opt_out_and_user_dir(monkeypatch, tmp_path):
    """The suite configured its own cache folder before importing jaxmbd: it is kept; the
    opt-out leaves the configuration alone and creates no folder."""
    configured = jax.config.jax_compilation_cache_dir
    assert configured is not None  # tests/conftest.py
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert enable_compilation_cache() == configured
    assert jax.config.jax_compilation_cache_dir == configured
    for value in ("1", "true", "yes"):
        monkeypatch.setenv(NO_CACHE_ENV, value)
        assert enable_compilation_cache() is None
    assert jax.config.jax_compilation_cache_dir == configured
    assert not (tmp_path / "jaxmbd").exists()
    monkeypatch.setenv(NO_CACHE_ENV, "0")
    assert enable_compilation_cache() == configured
    assert default_cache_dir() == tmp_path / "jaxmbd" / "xla"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "jaxmbd" / "xla"
