import os
import sys
from importlib.metadata import version
from pathlib import Path

# The suite's time is compilation, not running (a gradient program: ~13 s tracing, ~23 s
# XLA). Nested programs (a test's own jax.jit / jax.grad around jaxmbd) compile with the XLA
# option jaxmbd's top-level programs already use (jaxmbd.compiled.jit): ~35 % less XLA compile time
# for the gradient tests. LLVM optimisation level 0 saves ~20 % more of a gradient test
# (46.6 -> 37.3 s) and even the run-heavy notebooks come out faster (slider crank + swing-up:
# 65 -> 56 s); results are unchanged (no fast-math at any level). Set before jax creates its
# CPU client; the notebook kernels inherit it. XLA aborts the process on a flag it does not
# know, and jax 0.11's XLA has no fusion-emitter switch (seen on a GPU machine's jax 0.11.2):
# the switch is added only for the jaxlib it was measured on.
_XLA_TEST_FLAGS = ["--xla_backend_optimization_level=0"]
if tuple(int(p) for p in version("jaxlib").split(".")[:2]) < (0, 11):
    _XLA_TEST_FLAGS.insert(0, "--xla_cpu_use_fusion_emitters=false")
os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *_XLA_TEST_FLAGS]).strip()

# Identical computations reached through different Python objects (the same mechanism from
# a published file and from a built-in, say) compile once: XLA's cache is keyed by the HLO.
# The child processes (notebook kernels, CLI runs, the multi-device runs) share the cache
# through the environment, which they inherit. Set before jax and jaxmbd are imported:
# jaxmbd then keeps this folder instead of its per-user default (jaxmbd/_config.py).
# JAXMBD_TEST_CACHE_DIR moves it (an empty folder measures the suite as CI runs it).
CACHE_DIR = os.environ.get(
    "JAXMBD_TEST_CACHE_DIR", str(Path.home() / ".cache" / "jaxmbd" / "xla-tests")
)
os.environ["JAX_COMPILATION_CACHE_DIR"] = CACHE_DIR
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"

import gc  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# Tracing allocates millions of short-lived containers, and a worker's heap grows with every
# program it keeps: Python's default collection thresholds (700, 10, 10) then run the cyclic
# collector over that heap thousands of times (5-9 % of a cold run's samples in perf). Rarer
# collections: tests/test_batch.py and test_betsch_leyendecker.py in one process, empty
# caches, 197 -> 175 s.
gc.set_threshold(50_000, 20, 100)

import jaxmbd as mbd  # noqa: E402  (enables float64 before any test builds arrays)
from jaxmbd.compiled.program_cache import forget_loaded  # noqa: E402

assert jax.config.jax_compilation_cache_dir == CACHE_DIR


ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE_MODELS = SHARED / "reference-models"
sys.path.insert(0, str(Path(__file__).parent))
from compile_counter import count_compilations  # noqa: E402, F401  (tests import it from here)
from tolerances import ROUND_OFF  # noqa: E402

# JAXMBD_TOLERANCE_LOG=FOLDER: each assert_allclose logs what it achieved against what it
# allowed; `python tests/tolerance_log.py FOLDER` lists the tolerances looser than 10x.
if os.environ.get("JAXMBD_TOLERANCE_LOG"):
    from tolerance_log import install  # noqa: E402

    install(os.environ["JAXMBD_TOLERANCE_LOG"])

    def pytest_assertion_pass(item, lineno, orig, expl):
        """A passing bare assert's achieved / allowed (with -o enable_assertion_pass_hook=true)."""
        from tolerance_log import assertion_passed

        assertion_passed(os.environ["JAXMBD_TOLERANCE_LOG"], item, lineno, orig, expl)


# Masses and inertias of PAPER_NOTES section 1 (the published files have none).
PAPER_MASSES = {
    "single_pendulum.json": {"First pendulum": (78.0, (0.0325, 104.01625, 104.01625))},
    "double_pendulum.json": {
        "body_1": (78.0, (0.0325, 104.01625, 104.01625)),
        "body_2": (39.0, (0.01625, 13.008125, 13.008125)),
    },
    "four_link.json": {
        "rotor": (2.0, (4.0, 2.0, 0.0)),
        "link 2": (1.0, (12.4, 0.01, 0.0)),
        "link 3": (1.0, (4.54, 0.01, 0.0)),
    },
    "slider_crank.json": {
        "crank": (0.12, (1e-4, 1e-5, 1e-4)),
        "connecting rod": (0.5, (4e-3, 4e-4, 4e-3)),
        "slider": (2.0, (1e-4, 1e-4, 1e-4)),
    },
}


def same_sensor_options(model, tmp_path):
    """A model file keeps the sensors' options: the loaded model's equal the saved ones."""
    loaded = mbd.load_model(mbd.save_model(model, tmp_path / "saved.json")).sensors
    saved = model.sensors
    assert loaded.kinds == saved.kinds
    for a, b in zip(loaded.params, saved.params, strict=True):
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            # a frame rebuilt from the file's rotation: unit-scale values, round-off
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=ROUND_OFF)


def compiled_runs(model, solvers, *, t_end, h=1e-3):
    """``{solver: (compiled HLO text, Solution)}``: ``simulate(model)`` compiled once per
    ``linear_solver`` in ``solvers`` (the hoisting tests read the loop's structure from
    the text and compare the runs)."""
    out = {}
    for solver in solvers:
        run = jax.jit(
            lambda m, s=solver: mbd.simulate(
                m, formulation="rA", t_end=t_end, h=h, linear_solver=s, throw=False
            )
        )
        compiled = run.lower(model).compile()
        out[solver] = (compiled.as_text(), compiled(model))
    return out


def reference_model(relative: str) -> Path:
    path = REFERENCE_MODELS / relative
    if not path.exists():
        pytest.skip(f"published model files not available at {path}")
    return path


@pytest.fixture(scope="session")
def crank():
    """One body on a pin, driven: kinematics compiles in a few seconds."""
    b = mbd.ModelBuilder("crank")
    b.add_body("a", mass=1, inertia=[1, 1, 1], r=[1, 0, 0])
    b.revolute("pin", body_i="ground", body_j="a", point=[0, 0, 0], axis=[0, 0, 1])
    b.rotation_driver("m", body_i="ground", body_j="a", axis=[0, 0, 1], angle="t")
    return b.build()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def _memory_map_count() -> int:
    try:
        with open("/proc/self/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: a worker's resident memory above which it drops its compiled programs: each program a
#: test compiles stays in JAX's caches, and two workers grew past 10 GB each over the suite
#: (20 of the 24 GB of a CI machine, which then pages the shared libraries and stalls)
RESIDENT_LIMIT = int(float(os.environ.get("JAXMBD_TEST_RESIDENT_GB", "5")) * 2**30)


def _return_free_heap() -> None:
    """glibc keeps freed heap pages (XLA's compiler frees GBs over a suite); hand them back."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """Drop JAX's caches and the programs jaxmbd's cache has loaded when a worker holds too
    much: too much memory (:data:`RESIDENT_LIMIT`), or too many memory regions (XLA:CPU maps
    every compiled program into ~800 of them, and at the kernel's limit, vm.max_map_count
    65530, LLVM aborts). JAX's caches alone leave jaxmbd's programs mapped, the count stays
    above the mark, and every later test would clear again (and trace, lower and compile its
    small programs anew: about twice the suite's time). Programs come back from the disk
    cache when a later test calls them."""
    yield
    if _memory_map_count() > 30_000 or _resident_bytes() > RESIDENT_LIMIT:
        import gc

        jax.clear_caches()
        forget_loaded()
        gc.collect()
        _return_free_heap()


#: the tests of the extended tier (``tests/default_tier.py`` chooses them)
EXTENDED = Path(__file__).parent / "extended.txt"


def _extended_tier() -> set[str]:
    lines = EXTENDED.read_text().splitlines() if EXTENDED.exists() else []
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the markers
def pytest_collection_modifyitems(config, items):
    """Tests named in ``tests/extended.txt`` are marked ``extended`` (deselected by the
    default ``-m``; CI runs them after the default tier). A name there that its file no
    longer collects is an error: renamed tests must not leave the tiers silently.

    The notebook runs first (8-25 s each, a new kernel and its compiles): the two
    workers split the collection in halves and steal from the end of each other's queue,
    so long tests at the front keep the last minutes for short ones instead of one
    worker finishing a notebook while the other idles."""
    extended = _extended_tier()
    collected = set()
    for item in items:
        collected.add(item.nodeid)
        if item.nodeid in extended:
            item.add_marker(pytest.mark.extended)
    files = {item.nodeid.split("::", 1)[0] for item in items}
    stale = sorted(n for n in extended - collected if n.split("::", 1)[0] in files)
    # whole files are collected unless tests are named, or --lf / --sw keep some of a file's
    partial = any("::" in arg for arg in config.args) or any(
        config.getoption(option, False) for option in ("lf", "stepwise")
    )
    if stale and not partial:
        raise pytest.UsageError(
            f"{EXTENDED.name} names tests that their files no longer collect: {stale[:5]}"
        )
    items.sort(key=lambda item: item.path.name != "test_notebooks.py")


# JAXMBD_SUITE_PROFILE=FOLDER: each worker writes, per test, the seconds spent tracing,
# lowering and in XLA's compile (jax.monitoring's events) and running the rest, as JSON
# lines; `python tests/suite_profile.py FOLDER` sums them. What to shrink when the suite grows.
_PROFILE_DIR = os.environ.get("JAXMBD_SUITE_PROFILE")
_PROFILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
_profile_now: dict[str, float] = {}


if _PROFILE_DIR:

    def _record(event, duration, **_):
        if event in _PROFILE_EVENTS:
            key = _PROFILE_EVENTS[event]
            _profile_now[key] = _profile_now.get(key, 0.0) + duration

    jax.monitoring.register_event_duration_secs_listener(_record)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        import json
        import time

        _profile_now.clear()
        start = time.perf_counter()
        yield
        row = {"test": item.nodeid, "wall": time.perf_counter() - start, **_profile_now}
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(_PROFILE_DIR).mkdir(parents=True, exist_ok=True)
        with open(Path(_PROFILE_DIR) / f"{worker}.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
