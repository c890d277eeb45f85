"""Settings made by ``import jaxmbd`` (jaxmbd/_config.py): float64 and the per-user
persistent compilation cache, its opt-out, and that a cache folder the user chose wins;
one BLAS thread for jax's LAPACK kernels (jaxmbd/compiled/blas_threads.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax

from jaxmbd._config import NO_CACHE_ENV, default_cache_dir, enable_compilation_cache
from jaxmbd.compiled import blas_threads as _blas

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


BLAS_CHILD = """
import json, sys
if sys.argv[1] == "scipy-first":
    import scipy.linalg  # scipy's OpenBLAS loaded before jaxmbd: limited by threadpoolctl
import jax.numpy as jnp
import jaxmbd
jnp.linalg.solve(jnp.eye(3) + 1.0, jnp.ones(3)).block_until_ready()  # loads jax's LAPACK
from threadpoolctl import threadpool_info
print(json.dumps({info["filepath"]: info["num_threads"] for info in threadpool_info()
                  if info["user_api"] == "blas"}))
"""


def _blas_threads(case, **env):
    clean = {
        k: v for k, v in os.environ.items() if k not in _blas.USER_VARIABLES + (_blas.OPT_OUT,)
    }
    # jax's LAPACK kernels are its CPU backend's (on a GPU the solve would not load them)
    env = {"JAX_PLATFORMS": "cpu", **env}
    out = subprocess.run([sys.executable, "-c", BLAS_CHILD, case], env={**clean, **env},
                         capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_lapack_kernels_get_one_blas_thread():
    """jax's LAPACK calls run in scipy's OpenBLAS; after ``import jaxmbd`` it has one
    thread (jaxmbd/compiled/blas_threads.py), whether scipy was imported before jaxmbd or not."""
    for case in ("fresh", "scipy-first"):
        threads = _blas_threads(case)
        scipy_blas = [n for path, n in threads.items() if "scipy" in Path(path).parent.name]
        assert scipy_blas == [1], (case, threads)


def test_blas_configuration_respects_the_user(monkeypatch):
    """A thread count the user set, or the opt-out, leaves the environment alone."""
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert _blas.configure() == "user"
    for name in _blas.USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(_blas.OPT_OUT, "0")
    assert _blas.configure() == "opt-out"
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_program_cache_keys_what_a_lambda_closes_over():
    """The disk cache of exported programs (jaxmbd/compiled/program_cache.py) keys a top-level
    function by its code and the values it closes over: two lambdas of the same source line
    over another scale or another length are two programs, never the first one reloaded."""
    import jax.numpy as jnp

    import jaxmbd as mbd
    from jaxmbd.compiled.program_cache import folder

    assert folder() is not None  # the suite's cache is on: the call goes through the disk

    def program(scale, n):
        return mbd.jit(lambda x: jnp.full(n, scale) * x)

    x = jnp.asarray(1.5)
    for scale, n in ((2.0, 3), (3.0, 3), (3.0, 5)):
        out = program(scale, n)(x)
        assert out.shape == (n,) and float(out[0]) == scale * 1.5


def test_program_cache_keys_simulates_programs(monkeypatch):
    """simulate's top-level programs (``_consistent_start``, ``_start``, the blocks'
    ``_scan``: functions their module holds under ``@jit``) get a key, so a new process
    reloads them instead of tracing them (they were unkeyable: pickle refused the decorated
    functions, then recursed on ``tuple``, and every warm process traced them again)."""
    import jaxmbd as mbd
    from jaxmbd.compiled import program_cache as _program_cache

    outcomes = []
    key = _program_cache._key

    def recording(fun, name, static, avals):
        try:
            found = key(fun, name, static, avals)
        except _program_cache._Unkeyable:
            outcomes.append((name, False))
            raise
        outcomes.append((name, True))
        return found

    monkeypatch.setattr(_program_cache, "_key", recording)
    # options of its own: a program this process has not met (the in-memory memo is skipped)
    mbd.simulate(mbd.models.double_pendulum(), formulation="rA", t_end=0.012, h=1e-3, save_every=3)
    assert ("jaxmbd.analysis.simulation._scan", True) in outcomes
    assert all(ok for _, ok in outcomes), outcomes


def _named_scaled_mass(model, scale):
    """A program whose value depends on a static field of the model (its name)."""
    return scale * model.mass * len(model.name)


def test_program_cache_reloads_the_compiled_executable(monkeypatch, tmp_path):
    """A program met before (here: by another ``jit`` of the same function, as in a new
    process) is the stored executable: the same bits, no trace and no compilation. A model
    of another structure (a static field) or a closure over another value is another
    program, never the stored one; a corrupt executable file is compiled again."""
    import dataclasses

    import jax.numpy as jnp
    import numpy as np
    from conftest import count_compilations

    import jaxmbd as mbd
    from jaxmbd.compiled import program_cache as _program_cache

    monkeypatch.setattr(_program_cache, "folder", lambda: tmp_path)
    model = mbd.models.double_pendulum()
    renamed = dataclasses.replace(model, name=model.name + "_x")  # same arrays
    scale = jnp.asarray(1.5)
    first = mbd.jit(_named_scaled_mass)(model, scale)
    assert list(tmp_path.glob("*.xlaexe"))
    with count_compilations() as counts:
        again = mbd.jit(_named_scaled_mass)(model, scale)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert np.array_equal(np.asarray(again), np.asarray(first))
    other = mbd.jit(_named_scaled_mass)(renamed, scale)
    np.testing.assert_array_equal(other, 1.5 * model.mass * len(renamed.name))

    def closing(factor):
        return mbd.jit(lambda m: factor * m.mass)

    for factor in (2.0, 3.0, 2.0):
        np.testing.assert_array_equal(closing(factor)(model), factor * model.mass)
    for path in tmp_path.glob("*.xlaexe"):
        path.write_bytes(b"not an executable")
    np.testing.assert_array_equal(mbd.jit(_named_scaled_mass)(model, scale), first)


def test_forgotten_programs_load_again_from_disk(monkeypatch, tmp_path):
    """``forget_loaded`` drops the programs a process holds (with their memory maps, as the
    suite's conftest does between tests): the next call loads the stored executable, with
    no trace or compilation, and returns the same bits."""
    import jax.numpy as jnp
    import numpy as np
    from conftest import count_compilations

    import jaxmbd as mbd
    from jaxmbd.compiled import program_cache as _program_cache

    monkeypatch.setattr(_program_cache, "folder", lambda: tmp_path)
    model, scale = mbd.models.double_pendulum(), jnp.asarray(2.5)
    run = mbd.jit(_named_scaled_mass)
    first = run(model, scale)
    assert any(_program_cache._LOADED.values())
    _program_cache.forget_loaded()
    assert not any(_program_cache._LOADED.values())
    with count_compilations() as counts:
        again = run(model, scale)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert np.array_equal(np.asarray(again), np.asarray(first))


WARM_CHILD = """
import json, jax, jaxmbd as mbd
from compile_counter import count_compilations
with count_compilations() as counts:
    sol = mbd.simulate(mbd.models.double_pendulum(), t_end=0.05, h=1e-3)
    jax.block_until_ready(sol.r)
print(json.dumps({**counts, "formulation": sol.formulation}))
"""


def test_a_warm_process_runs_the_double_pendulum_without_tracing():
    """A new process runs a model that this one ran before with no JAX trace and no XLA
    compilation at all (benchmarks/first_result.py's warm start): its kinematic tree, its
    run and its start-correction report are executables loaded from the disk cache, and
    nothing runs op by op (each eager operation is a trace and a compile)."""
    import jaxmbd as mbd

    sol = mbd.simulate(mbd.models.double_pendulum(), t_end=0.05, h=1e-3)
    assert sol.formulation == "joint"
    tests = Path(__file__).parent
    path = os.pathsep.join([str(tests.parent), str(tests), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", WARM_CHILD], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path}, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"trace": 0, "compile": 0, "formulation": "joint"}, got


def _fused(x):
    """A program with fusions (compare, convert, reduce): its kernels are named in the
    executable's object code."""
    import jax.numpy as jnp

    return jnp.sum(jnp.where(x > 0.5, x.astype(jnp.int32) * 2, 3)) + jnp.linalg.norm(x)


def test_program_cache_stores_what_xla_cache_holds(monkeypatch, tmp_path):
    """A program that XLA's persistent cache already holds (compiled by another process, or
    before an edit of jaxmbd changed every key) is stored from the cache's own bytes: the
    executable that the cache hands out loses its object code when serialized again, and a
    later process that loaded it failed on its first call and traced again."""
    import jax.numpy as jnp
    import numpy as np
    from conftest import count_compilations

    import jaxmbd as mbd
    from jaxmbd.compiled import program_cache as _program_cache

    x = jnp.linspace(0.0, 1.0, 7)
    monkeypatch.setattr(_program_cache, "folder", lambda: tmp_path / "first")
    least = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        first = mbd.jit(_fused)(x)  # compiled, and now in XLA's cache
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", least)
    monkeypatch.setattr(_program_cache, "folder", lambda: tmp_path / "second")
    mbd.jit(_fused)(x)  # exported again, compiled from XLA's cache, stored
    assert list((tmp_path / "second").glob("*.xlaexe"))
    with count_compilations() as counts:
        again = mbd.jit(_fused)(x)  # the stored executable, as a new process loads it
    assert counts == {"trace": 0, "compile": 0}, counts
    np.testing.assert_array_equal(again, first)
