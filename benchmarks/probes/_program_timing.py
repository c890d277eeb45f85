"""Compile-and-time helpers shared by the gradient probes: a program lowered, compiled and
run once with its phases timed apart, and its later calls timed."""

from __future__ import annotations

import hashlib
import time

import jax
import jax.numpy as jnp

from jaxmbd.compiled.jit import XLA_OPTIONS


def compiled(f, x, known=None):
    """The program compiled and run once, unless its StableHLO is one of ``known`` (a dict
    hash -> earlier result): then that result, with this lowering's time."""
    t0 = time.perf_counter()
    low = jax.jit(f, compiler_options=XLA_OPTIONS).lower(x)
    t1 = time.perf_counter()
    digest = hashlib.sha1(low.as_text(debug_info=False).encode()).hexdigest()[:10]
    if known and digest in known:
        return dict(known[digest], lower=t1 - t0, same=True)
    c = low.compile()
    t2 = time.perf_counter()
    out = jax.block_until_ready(c(x))
    t3 = time.perf_counter()
    return dict(c=c, lower=t1 - t0, xla=t2 - t1, first=t3 - t0, hash=digest, out=out)


def timed(c, x):
    """Seconds of one call of the compiled program ``c``."""
    return timed_both(c, x)[0]


def timed_both(c, x):
    """(wall seconds, CPU seconds of this process) of one call of ``c``: on a shared,
    loaded machine the wall time counts the waits for a core, the CPU time does not (a
    hoisted time loop runs on one thread)."""
    t, p = time.perf_counter(), time.process_time()
    jax.block_until_ready(c(x))
    return time.perf_counter() - t, time.process_time() - p


def leaves(out):
    """Every leaf of ``out``, flattened into one vector."""
    return jnp.concatenate([jnp.ravel(a) for a in jax.tree_util.tree_leaves(out)])
