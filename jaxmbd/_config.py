"""Library-wide settings made on import.

jaxmbd works in float64 throughout (docs/design.md, principle 6): constraint residuals of 1e-12 and
the 1/h^2 scaling of index-3 dynamics are out of reach in float32. Importing jaxmbd
therefore enables ``jax_enable_x64``.

Compilation, not running, is most of a new user's first minutes: a short run of a small
model compiles for 10-15 s and a gradient program for tens of seconds, again in every new
Python process. Importing jaxmbd therefore turns on JAX's persistent compilation cache in a
per-user folder (:func:`default_cache_dir`), so a second process (a rerun script, a
restarted notebook) loads the compiled programs instead. It never overrides a cache the user
configured (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update("jax_compilation_cache_dir",
...)`` before the import), and ``JAXMBD_NO_COMPILATION_CACHE=1`` in the environment (or
``jax.config.update("jax_enable_compilation_cache", False)`` at any time) turns it off.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

#: The environment variable that turns jaxmbd's default compilation cache off ("1", "true").
NO_CACHE_ENV = "JAXMBD_NO_COMPILATION_CACHE"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/jaxmbd/xla``, else ``~/.cache/jaxmbd/xla`` (the XDG convention
    that platformdirs follows on Linux; the same path on macOS and Windows keeps the rule
    simple and needs no dependency)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxmbd" / "xla"


def _opted_out() -> bool:
    return os.environ.get(NO_CACHE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def enable_compilation_cache() -> str | None:
    """Turns on JAX's persistent compilation cache in :func:`default_cache_dir` unless the
    user opted out or configured a cache folder; returns the folder used, or None. An
    unwritable folder leaves the cache off (no error: compiling still works)."""
    if _opted_out() or not jax.config.jax_enable_compilation_cache:
        return None
    if jax.config.jax_compilation_cache_dir is not None:  # the user's own choice
        return jax.config.jax_compilation_cache_dir
    path = default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(path, os.W_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # jaxmbd's many small programs (under JAX's default of 1 s each) add up to seconds
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:  # a program compiled before this import decided "no cache" for the process
        from jax.experimental.compilation_cache.compilation_cache import reset_cache

        reset_cache()
    except ImportError:  # pragma: no cover
        pass
    return str(path)


enable_compilation_cache()
