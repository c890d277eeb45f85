"""jaxmbd.compiled.flagged: a function on the flagged items of an axis alone, in blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmbd.compiled.flagged import any_flagged, kth_set, on_flagged


def _fn(x, y):
    return {"sum": x + y.sum(), "rows": jnp.outer(x, y)}


@pytest.mark.parametrize("block", [1, 3, 16])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_on_flagged_is_vmap_where_flagged_and_fill_elsewhere(block, density):
    """Outputs of the flagged items equal ``jax.vmap(fn)``'s at those items, in place; the
    others are ``fill``'s: blocks of one, of three (passes that end within a block) and of
    more than the items, no flag, some, every flag."""
    rng = np.random.default_rng(0)
    n = 11
    x = jnp.asarray(rng.normal(size=(n, 2)))
    y = jnp.asarray(rng.normal(size=(n, 3)))
    flags = jnp.asarray(rng.uniform(size=n) < density)
    fill = {"sum": jnp.full((n, 2), -7.0), "rows": jnp.zeros((n, 2, 3))}
    out = jax.jit(lambda f, x, y: on_flagged(_fn, f, (x, y), block=block, fill=fill))(flags, x, y)
    want = jax.vmap(_fn)(x, y)
    on = np.asarray(flags)
    for key in want:
        np.testing.assert_array_equal(np.asarray(out[key])[on], np.asarray(want[key])[on])
        np.testing.assert_array_equal(np.asarray(out[key])[~on], np.asarray(fill[key])[~on])


def test_on_flagged_runs_the_passes_its_flags_fill():
    """The loop runs ceil(flags / block) passes of ``fn`` (counted by a callback)."""
    calls = []

    def fn(x):
        jax.debug.callback(lambda: calls.append(1))
        return x * 2

    run = jax.jit(lambda f, x: on_flagged(fn, f, (x,), block=4, fill=jnp.zeros(10)))
    x = jnp.arange(10.0)
    for count in (0, 3, 4, 9):
        calls.clear()
        flags = jnp.arange(10) < count
        np.testing.assert_array_equal(run(flags, x), np.where(np.arange(10) < count, 2 * x, 0))
        jax.effects_barrier()
        assert len(calls) == -(-count // 4)


def test_kth_set_is_the_index_of_each_flag():
    flags = np.array([0, 1, 1, 0, 0, 1, 0, 1], bool)
    index = kth_set(jnp.cumsum(flags), jnp.arange(1, 7))
    np.testing.assert_array_equal(index, [1, 2, 5, 7, 7, 7])


@pytest.mark.parametrize("block", [1, 3, 16])
def test_any_flagged_is_any_of_the_flagged_items(block):
    """``any_flagged`` holds where ``pred`` holds for a flagged item: not for an unflagged
    item where it holds (the last item, which pads the last block), nor with no flag set;
    and its loop stops at the first block where it holds (passes counted by a callback)."""
    x = jnp.arange(10.0)
    calls = []

    def pred(x):
        jax.debug.callback(lambda: calls.append(1))
        return (x == 4.0) | (x == 9.0)

    run = jax.jit(lambda f: any_flagged(pred, f, (x,), block=block))
    cases = [
        (np.zeros(10, bool), False, 0),
        (np.arange(10) < 4, False, -(-4 // block)),  # 9 holds but is only padding
        (np.arange(10) < 5, True, 4 // block + 1),  # 4 is the fifth flagged item
        (np.isin(np.arange(10), [4, 6, 7, 8]), True, 1),  # 4 first: one pass
        (np.isin(np.arange(10), [1, 2, 3, 5, 6, 9]), True, -(-6 // block)),
    ]
    for flags, holds, passes in cases:
        calls.clear()
        assert bool(run(jnp.asarray(flags))) is holds
        jax.effects_barrier()
        assert len(calls) == passes
