"""The LU of a stack of small matrices under ``vmap``: :func:`jaxmbd.linear.small.lu_stack`
(its steps unrolled with static, shrinking slices) against ``vmap`` of
:func:`jaxmbd.linear.small.lu` (a ``fori_loop`` of masked whole-matrix updates), the
measurement behind ``small.LU_STACK_UNROLLED_MAX``.

    python -m benchmarks.probes.lu_stack [--sizes 6 10 16 20 32] [--batch 256]

A ``lax.scan`` of 20 LUs of a stack of B random n x n matrices (ties in the first column,
so members pivot differently); prints microseconds per stack (median of 7 calls after
compilation) and the compile time, and checks that the factors are bitwise equal. Above
``LU_STACK_UNROLLED_MAX``, ``lu_stack`` itself falls back to ``vmap(lu)``: the unrolled
variant is timed here through its body regardless of that bound.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd  # noqa: F401  (float64, XLA flags)
from jaxmbd.linear import small

REPEATS = 20


def _stack(batch: int, n: int):
    rng = np.random.default_rng(0)
    M = rng.normal(size=(batch, n, n))
    M[:, [0, 3 % n], 0] = 1.0  # a tie for the first pivot
    return jnp.asarray(M)


def _timed(factor, M):
    def run(m):
        def body(c, _):
            lu, p = factor(m + c * 1e-12)
            return c + 1e-9 * (lu.sum() + p.sum()), None

        return jax.lax.scan(body, 0.0, None, length=REPEATS)[0]

    start = time.perf_counter()
    compiled = jax.jit(run).lower(M).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(M))
    times = []
    for _ in range(7):
        start = time.perf_counter()
        jax.block_until_ready(compiled(M))
        times.append(time.perf_counter() - start)
    return np.median(times) / REPEATS * 1e6, compile_s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[6, 10, 16, 20, 32])
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, B = {args.batch}")
    for n in args.sizes:
        M = _stack(args.batch, n)
        with mock.patch.object(small, "LU_STACK_UNROLLED_MAX", max(n, 1)):
            unrolled = jax.jit(small.lu_stack)
            l1, p1 = unrolled(M)
            looped = jax.jit(jax.vmap(small.lu))
            l2, p2 = looped(M)
            same = bool(np.array_equal(l1, l2) and np.array_equal(p1, p2))
            t_unrolled, c_unrolled = _timed(small.lu_stack, M)
        t_looped, c_looped = _timed(jax.vmap(small.lu), M)
        print(
            f"n = {n:2d}: lu_stack {t_unrolled:7.0f} us (compile {c_unrolled:.1f} s), "
            f"vmap(lu) {t_looped:7.0f} us (compile {c_looped:.1f} s), bitwise equal: {same}"
        )


if __name__ == "__main__":
    main()
