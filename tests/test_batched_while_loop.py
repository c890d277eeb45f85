"""``jaxmbd.compiled.batching.while_loop``: ``lax.while_loop``'s values and derivatives, whose
``vmap`` batches each loop body once (JAX's batching rule otherwise passes over a body again
for each carry the body turns batched, and again for the loops nested inside each pass)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxmbd.compiled.batching import while_loop

batching = pytest.importorskip("jax._src.interpreters.batching")


def _nested(x, loop):
    """Two loops, the inner one nested in the outer's body, both carries starting from
    constants and turned batched by the body (it adds x)."""

    def outer(c):
        i, total = c
        _, total = loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + x * s[1] + x),
                        (jnp.asarray(0), total), x)  # fmt: skip
        return i + 1, total

    return loop(lambda c: c[0] < 4, outer, (jnp.asarray(0), jnp.zeros(())), x)[1]


def _plain(cond, body, init, like):
    return lax.while_loop(cond, body, init)


def _ours(cond, body, init, like):
    return while_loop(cond, body, init, like=like)


def test_values_and_derivatives_are_lax_while_loops():
    xs = jnp.linspace(0.1, 0.4, 3)
    for fn in (jax.vmap, lambda f: jax.jit(jax.vmap(f))):
        np.testing.assert_array_equal(fn(lambda x: _nested(x, _ours))(xs),
                                      fn(lambda x: _nested(x, _plain))(xs))  # fmt: skip
    np.testing.assert_array_equal(
        jax.vmap(jax.jvp, in_axes=(None, 0, 0))(lambda x: _nested(x, _ours), (xs,), (xs,)),
        jax.vmap(jax.jvp, in_axes=(None, 0, 0))(lambda x: _nested(x, _plain), (xs,), (xs,)),
    )


def test_vmap_batches_each_body_once(monkeypatch):
    """The nested loops under vmap: 4 batchings of a body and a condition (the outer loop's
    body and condition, the inner one's in the batched outer body), against 10 with
    ``lax.while_loop``."""
    calls = []
    original = batching.batch_jaxpr

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(batching, "batch_jaxpr", counted)
    counts = {}
    for name, loop in (("plain", _plain), ("ours", _ours)):
        calls.clear()
        jax.make_jaxpr(jax.vmap(lambda x, loop=loop: _nested(x, loop)))(jnp.ones(3))
        counts[name] = len(calls)
    assert counts["ours"] <= 4 < counts["plain"], counts
