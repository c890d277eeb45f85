"""Counting JAX traces and XLA compilations: shared by the tests (through conftest) and the
child processes of tests/test_distributed.py, which cannot import conftest (it sets
XLA_FLAGS and the compilation cache for the test process)."""

import contextlib

import jax


@contextlib.contextmanager
def count_compilations():
    """Counts JAX traces and XLA compilations (jax.monitoring events) inside the block."""
    counts = {"trace": 0, "compile": 0}

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            counts["trace"] += 1
        elif event == "/jax/core/compile/backend_compile_duration":
            counts["compile"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counts
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
