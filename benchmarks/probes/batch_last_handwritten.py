"""What a batch can gain on this CPU: a hand-written RK4 of a planar double pendulum
(closed-form mass matrix and bias, a 2x2 solve: a few dozen flops and three sine/cosine
pairs per stage), 1000 steps, single against a batch of ``B`` with the batch in the major
axis (``jax.vmap``) and in the minor axis (arrays (2, B)), with XLA's sine and cosine
(scalar libm calls) and with :func:`jaxmbd.compiled.trig.sin_cos` (vectorisable polynomials).

    python -m benchmarks.probes.batch_last_handwritten [B]

Timed in rounds in one process (CPU time of the process, steadier on a loaded machine).
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd  # noqa: F401  (float64, XLA's loop hoisting)
from jaxmbd.compiled.trig import sin_cos

M1, M2, L1, A1, A2, I1, I2, G = 1.0, 0.5, 2.0, 1.0, 0.5, 0.33, 0.04, 9.81


def _accelerations(q, v, trig):
    (s0, _), (s1, _), (s, c) = trig(q[0]), trig(q[1]), trig(q[0] - q[1])
    m11 = I1 + M1 * A1**2 + M2 * L1**2
    m12 = M2 * L1 * A2 * c
    m22 = I2 + M2 * A2**2
    f1 = -M2 * L1 * A2 * s * v[1] ** 2 - (M1 * A1 + M2 * L1) * G * s0
    f2 = M2 * L1 * A2 * s * v[0] ** 2 - M2 * A2 * G * s1
    det = m11 * m22 - m12 * m12
    return jnp.stack([(m22 * f1 - m12 * f2) / det, (m11 * f2 - m12 * f1) / det])


def _run(q, v, trig, n=1000, h=1e-3):
    def step(carry, _):
        q, v = carry
        k1q, k1v = v, _accelerations(q, v, trig)
        k2q, k2v = v + 0.5 * h * k1v, _accelerations(q + 0.5 * h * k1q, v + 0.5 * h * k1v, trig)
        k3q, k3v = v + 0.5 * h * k2v, _accelerations(q + 0.5 * h * k2q, v + 0.5 * h * k2v, trig)
        k4q, k4v = v + h * k3v, _accelerations(q + h * k3q, v + h * k3v, trig)
        q = q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        return (q, v), None

    return jax.lax.scan(step, (q, v), None, n)[0][0]


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.uniform(-1, 1, (size, 2)))
    v = jnp.asarray(rng.uniform(-1, 1, (size, 2)))
    libm = lambda x: (jnp.sin(x), jnp.cos(x))  # noqa: E731
    calls = {}
    for name, trig in (("libm", libm), ("polynomial", sin_cos)):
        single = jax.jit(lambda q, v, t=trig: _run(q, v, t))
        major = jax.jit(jax.vmap(lambda q, v, t=trig: _run(q, v, t)))
        minor = jax.jit(lambda q, v, t=trig: _run(q.T, v.T, t).T)
        np.testing.assert_allclose(major(q, v), minor(q, v), rtol=0, atol=1e-12)
        calls[(name, "single")] = lambda f=single: f(q[0], v[0]).block_until_ready()
        calls[(name, "batch-major")] = lambda f=major: f(q, v).block_until_ready()
        calls[(name, "batch-minor")] = lambda f=minor: f(q, v).block_until_ready()
    for fn in calls.values():
        fn()
    cpu = {k: [] for k in calls}
    for _ in range(7):
        for key, fn in calls.items():
            start = time.process_time()
            fn()
            cpu[key].append(time.process_time() - start)
    for name in ("libm", "polynomial"):
        single = 1000 / statistics.median(cpu[(name, "single")])
        for kind in ("batch-major", "batch-minor"):
            rate = size * 1000 / statistics.median(cpu[(name, kind)])
            print(f"{name:10s} {kind:11s} B={size}: {rate:,.0f} model-steps per CPU-s, "
                  f"{rate / single:.2f}x single ({single:,.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
