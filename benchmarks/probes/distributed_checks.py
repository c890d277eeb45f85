"""Checks of batches across 2 CPU processes (jax.distributed, gloo) outside the test suite.

    python -m benchmarks.probes.distributed_checks skew [--late 60] [--no-connect]
    python -m benchmarks.probes.distributed_checks forward
    python -m benchmarks.probes.distributed_checks weak

``skew``: the first distributed call of the run is traced inside the user's own
``jax.jit`` (``jax.jit(run).lower(...)``), then process 1 waits ``--late`` seconds before
it compiles and runs it, as a slower compilation would make it. On CPUs gloo connects the
processes at their first collective over a set of devices and waits only 30 s there;
jaxmbd makes that connection when it traces the call, behind a barrier
(``jaxmbd.analysis.batch._open_collectives``), so the late process is waited for. With
``--no-connect`` that step is switched off: the run is expected to fail with 'Gloo context
initialization failed' once ``--late`` exceeds 30 s.

``forward``: identification in forward mode, as benchmarks/identify_parameters.py's
Gauss-Newton does it (``jax.jvp``): d(mean squared residual)/d(rod 2's mass) over 8
experiments (the double pendulum released from 8 angles, 50 steps) across the 2 processes,
against one process's ``jax.jvp`` (1e-10) and against the reverse-mode gradient (1e-9).

``weak`` (one process, the advice of docs/guide/distributed.md): the gradient of a
double-pendulum batch's loss, then the same loss of a shared mass whose known column is
float64 (the compiled programs reused) or ``jnp.full(8, 78.0)``, weakly typed in JAX (a
different input type: traced and compiled again). Prints time and compilations of each.

Each prints one line per process and exits 0 when the check holds (``skew
--no-connect``: when the run failed as expected).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time


def worker(check: str, pid: int, port: int, late: float, connect: bool) -> None:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxmbd as mbd
    import jaxmbd.analysis.batch

    if not connect:
        jaxmbd.analysis.batch._open_collectives = lambda devices: None
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_num_cpu_devices", 1)
    jax.distributed.initialize(
        f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=300
    )
    if check == "skew":  # a small model: the run's own compilation is not what is timed
        b = mbd.ModelBuilder("crank")
        b.add_body("rod", mass=2.0, inertia=[0.01, 1, 1], r=[0, 1, 0], axes=([0, 1, 0], [0, 0, 1]))
        b.revolute("pin", body_i="ground", body_j="rod", point=[0, 0, 0], axis=[1, 0, 0])
        b.rotation_driver("turn", body_i="ground", body_j="rod", axis=[1, 0, 0], angle="2*t")
        crank = b.build()

        def run(rates):
            cranks = eqx.tree_at(
                lambda m: m.drivers[0].constants, mbd.stack_models([crank] * 2), rates
            )
            return mbd.kinematics_batch(cranks, t_end=0.002, h=1e-3).A[:, -1, 0]

        rates = np.array([2.0, 3.0])[:, None, None]
        lowered = jax.jit(run).lower(rates)  # traced: jaxmbd connects the processes here
        if pid == 1:
            time.sleep(late)
        start = time.perf_counter()
        out = np.asarray(lowered.compile()(rates))
        angle = np.arctan2(out[:, 2, 0], out[:, 1, 0])  # the rod's axis (body x) about x
        print(f"process {pid}: ran, {time.perf_counter() - start:.1f} s; angles {angle}")
        np.testing.assert_allclose(np.abs(angle), [0.004, 0.006], rtol=1e-9)  # 2 ms at 2, 3 rad/s
        return

    model = mbd.models.double_pendulum()
    batch = mbd.stack_models([model] * 8)
    angle = np.linspace(-0.3, 0.3, 8)
    c, s = np.cos(angle), np.sin(angle)
    rot = np.zeros((8, 3, 3))
    rot[:, 0, 0], rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = 1, c, -s, s, c
    experiments = eqx.tree_at(
        lambda b: (b.r0, b.A0),
        batch,
        (jnp.einsum("bij,kj->bki", rot, model.r0), jnp.einsum("bij,kjl->bkil", rot, model.A0)),
    )

    def with_mass(m2):
        m = jnp.stack([jnp.full(8, 78.0, dtype=jnp.float64), jnp.broadcast_to(m2, (8,))], 1)
        scale = m / model.mass
        return eqx.tree_at(
            lambda b: (b.mass, b.inertia), experiments, (m, model.inertia * scale[..., None, None])
        )

    opts = dict(t_end=0.05, h=1e-3)
    results = {}
    for name, devices in (("2 processes", jax.devices()), ("1 process", jax.local_devices())):
        # data made at 45 kg on the same devices (a local array cannot enter a global program)
        measured = mbd.simulate_batch(with_mass(45.0), devices=devices, **opts).r

        def fit_loss(m2, devices=devices, measured=measured):
            sol = mbd.simulate_batch(with_mass(m2), devices=devices, **opts)
            return jnp.mean((sol.r - measured) ** 2)

        start = time.perf_counter()
        _, tangent = jax.jvp(fit_loss, (39.0,), (1.0,))
        results[name] = float(tangent)
        took = time.perf_counter() - start
        print(f"process {pid}: jvp on {name}: {results[name]!r} ({took:.0f} s, compile + run)")
    grad = float(jax.grad(fit_loss)(39.0))  # the last loss: one process
    both, one = results["2 processes"], results["1 process"]
    across, modes = abs(both - one) / abs(one), abs(one - grad) / abs(grad)
    print(
        f"process {pid}: reverse gradient {grad!r}; |2 - 1| / |1| = {across:.1e}, "
        f"|jvp - grad| / |grad| = {modes:.1e}"
    )
    assert abs(both - one) <= 1e-10 * abs(one) and abs(one - grad) <= 1e-9 * abs(grad)


def weak_types() -> None:
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxmbd as mbd

    compiles = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    model = mbd.models.double_pendulum()
    batch = mbd.stack_models([model] * 8)

    def loss(m):
        scale = m / model.mass
        members = eqx.tree_at(
            lambda b: (b.mass, b.inertia), batch, (m, model.inertia * scale[..., None, None])
        )
        return jnp.mean(mbd.simulate_batch(members, t_end=0.01, h=1e-3).r[:, -1] ** 2)

    def timed(what, f):
        compiles.clear()
        start = time.perf_counter()
        jax.block_until_ready(f())
        print(f"{what}: {time.perf_counter() - start:.1f} s, {len(compiles)} compilations, "
              f"longest {max(compiles, default=0.0):.1f} s", flush=True)  # fmt: skip

    def shared(known):
        return lambda m2: loss(jnp.stack([known, jnp.broadcast_to(m2, (8,))], axis=1))

    known = jnp.full(8, 78.0, dtype=jnp.float64)
    masses = jnp.stack([known, jnp.linspace(30.0, 48.0, 8)], axis=1)
    timed("gradient w.r.t. (8, 2) float64 masses (compiles)", lambda: jax.grad(loss)(masses))
    timed("shared mass, known column float64", lambda: jax.grad(shared(known))(39.0))
    weak = jnp.full(8, 78.0)
    assert weak.weak_type
    timed("shared mass, known column jnp.full(8, 78.0)", lambda: jax.grad(shared(weak))(39.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", choices=("skew", "forward", "weak"))
    parser.add_argument("--late", type=float, default=60.0, help="skew: process 1's delay (s)")
    parser.add_argument("--no-connect", action="store_true", help="skew: without the fix")
    parser.add_argument("--worker", type=int, nargs=2, help=argparse.SUPPRESS)  # pid, port
    args = parser.parse_args()
    if args.check == "weak":
        weak_types()
        return
    if args.worker:
        worker(args.check, *args.worker, args.late, not args.no_connect)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the workers import jax and jaxmbd themselves, after their configuration
    from benchmarks._harness import child

    command, env = child(__spec__.name, *sys.argv[1:], "--worker")
    procs = [subprocess.Popen([*command, str(pid), str(port)], stderr=subprocess.PIPE, text=True,
                              env=env) for pid in range(2)]  # fmt: skip
    try:
        errors = [p.communicate(timeout=1800)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = [p.returncode for p in procs]
    gloo = [line for e in errors for line in e.splitlines() if "Gloo context initial" in line]
    if args.no_connect:
        print(f"without the connection step: exit codes {codes}; gloo failed: {bool(gloo)}")
        print("\n".join(gloo[:1]))
        sys.exit(0 if gloo else 1)
    for pid, (code, err) in enumerate(zip(codes, errors, strict=True)):
        if code:
            print(f"process {pid} failed ({code}):\n{err[-3000:]}", file=sys.stderr)
    sys.exit(max(codes, key=abs))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
