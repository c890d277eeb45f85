"""Batches across processes (issue 40): two CPU processes on localhost, joined by
``jax.distributed`` with gloo collectives, each passing the same batch to
``simulate_batch(devices=jax.devices())``, against a single-process run in the same child.

One child script does every check (the run, the gradient of a batch-mean loss, a failing
member, the addressable shards of ``gather=False``, no recompilation on new values), so the
programs compile once per process; both children share the suite's persistent compilation
cache through JAX_COMPILATION_CACHE_DIR (tests/conftest.py), which they inherit."""

import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

CHILD = textwrap.dedent("""
    import sys
    process_id, port = int(sys.argv[1]), int(sys.argv[2])
    import equinox as eqx, jax, jax.numpy as jnp, numpy as np
    import jaxmbd as mbd  # before initialize, as users write it: the import starts no backend
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_num_cpu_devices", 1)
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                               initialization_timeout=120)

    assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
    assert len(jax.local_devices()) == 1
    OPTS = dict(t_end=0.05, h=1e-3)  # 50 steps
    model = mbd.models.double_pendulum()
    batch = mbd.stack_models([model] * 8)
    # rod 2's mass differs per member (78 kg rod 1 kept); its inertia scales with it
    masses = np.stack([np.full(8, 78.0), np.linspace(30.0, 48.0, 8)], axis=1)

    def with_masses(m):
        scale = m / model.mass
        return eqx.tree_at(lambda b: (b.mass, b.inertia), batch,
                           (m, model.inertia * scale[..., None, None]))

    def loss(m, devices):
        sol = mbd.simulate_batch(with_masses(m), devices=devices, **OPTS)
        return jnp.mean(jnp.sum(sol.r[:, -1] ** 2, axis=(1, 2)))

    everywhere, here = jax.devices(), jax.local_devices()
    sol = mbd.simulate_batch(with_masses(masses), devices=everywhere, **OPTS)
    ref = mbd.simulate_batch(with_masses(masses), devices=here, **OPTS)
    assert sol.r.sharding.mesh.devices.size == 2 and sol.r.is_fully_replicated
    for key in ("r", "A", "rdot", "omega"):
        err = np.abs(np.asarray(getattr(sol, key)) - np.asarray(getattr(ref, key))).max()
        assert err <= 1e-12, (key, err)
    np.testing.assert_array_equal(np.asarray(sol.iterations), np.asarray(ref.iterations))
    assert not np.allclose(np.asarray(sol.r)[0], np.asarray(sol.r)[-1])  # masses matter

    # compiled once per process: new values reuse the program
    counts = {"trace": 0, "compile": 0}
    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            counts["trace"] += 1
        elif event == "/jax/core/compile/backend_compile_duration":
            counts["compile"] += 1
    jax.monitoring.register_event_duration_secs_listener(listen)
    again = mbd.simulate_batch(with_masses(masses * [1.0, 1.1]), devices=everywhere, **OPTS)
    jax.block_until_ready(again.r)
    mesh = jax.sharding.Mesh(np.array(everywhere), ("members",))  # a Mesh: the same program
    via_mesh = mbd.simulate_batch(with_masses(masses), devices=mesh, **OPTS)
    jax.block_until_ready(via_mesh.r)
    jax.monitoring.unregister_event_duration_listener(listen)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert not np.allclose(np.asarray(again.r), np.asarray(sol.r))
    np.testing.assert_array_equal(np.asarray(via_mesh.r), np.asarray(sol.r))

    # the gradient of the batch mean, all-reduced by XLA: replicated, the single process's
    grad = jax.grad(loss)(jnp.asarray(masses), everywhere)
    grad_ref = jax.grad(loss)(jnp.asarray(masses), here)
    assert grad.is_fully_replicated, grad.sharding
    g, g_ref = np.asarray(grad), np.asarray(grad_ref)
    assert np.abs(g_ref).max() > 1e-7, g_ref  # the loss depends on the masses
    err = np.abs(g - g_ref).max() / np.abs(g_ref).max()
    assert err <= 1e-10, (err, g, g_ref)  # relative to the largest component (~1e-5)
    print("GRAD", process_id, repr(g.tolist()), flush=True)

    # member 5 fails (massless second rod: a singular Newton matrix), the others do not
    bad = masses.copy(); bad[5, 1] = 0.0
    failed = mbd.simulate_batch(with_masses(bad), devices=everywhere, **OPTS)
    ok = np.asarray(failed.result == mbd.RESULTS.successful)
    assert ok.tolist() == [k != 5 for k in range(8)], ok
    step = np.asarray(failed.failed_step)
    assert step[5] >= 0 and np.all(np.delete(step, 5) == -1), step
    result = np.asarray(failed.status)[5, step[5]]  # the member's own code
    keep = np.arange(8) != 5
    err = np.abs(np.asarray(failed.r)[keep] - np.asarray(ref.r)[keep]).max()
    assert err <= 1e-12, err
    for gather in (True, False):  # every process raises, also when it holds 4 members
        try:
            mbd.simulate_batch(with_masses(bad), devices=everywhere, throw=True, gather=gather,
                               **OPTS)
            raise AssertionError("throw=True did not raise")
        except mbd.SolverError as e:
            assert "1 of 8 batch members failed: member 5:" in str(e), e

    # gather=False: each process keeps its own 4 members, no communication
    mine = mbd.simulate_batch(with_masses(bad), devices=everywhere, gather=False, **OPTS)
    (shard,) = mine.status.addressable_shards
    rows = np.arange(8)[shard.index[0]]
    assert rows.tolist() == list(range(4 * process_id, 4 * process_id + 4)), rows
    np.testing.assert_array_equal(np.asarray(shard.data), np.asarray(failed.status)[rows])
    try:  # 7 members on 2 devices: no equal shards to keep
        mbd.simulate_batch(mbd.stack_models([model] * 7), gather=False, **OPTS)
        raise AssertionError("an indivisible batch with gather=False did not raise")
    except ValueError as e:
        assert "gather=False needs a batch divisible by the 2 devices" in str(e), e
    print("RESULT", process_id, int(result), step.tolist(), flush=True)
    print("OK", process_id, flush=True)
""")


def _die_with_parent():
    """Linux: the child gets SIGKILL when the test process dies (killed by a CI timeout,
    say), so no child outlives it holding the coordinator's port."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _multiprocess_cpu_support() -> str | None:
    """Why this platform cannot run two CPU processes under jax.distributed (None: it can)."""
    import jax

    if not hasattr(jax, "distributed") or not hasattr(jax.config, "jax_num_cpu_devices"):
        return f"jax {jax.__version__} has no jax.distributed with CPU device counts"
    if not hasattr(jax.config, "jax_cpu_collectives_implementation"):
        return f"jax {jax.__version__} has no CPU collectives (gloo)"
    if sys.platform == "win32":  # gloo's CPU collectives are built for Linux and macOS
        return "jax's gloo CPU collectives are not built for Windows"
    return None


def test_two_processes_equal_one(tmp_path):
    """Run, gradient and a failing member across 2 processes equal one process's."""
    reason = _multiprocess_cpu_support()
    if reason:
        pytest.skip(reason)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    port = _free_port()
    logs = [(tmp_path / f"out{k}.txt", tmp_path / f"err{k}.txt") for k in range(2)]
    procs = []
    try:
        for k, (out, err) in enumerate(logs):
            with open(out, "w") as fo, open(err, "w") as fe:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(script), str(k), str(port)],
                        stdout=fo,
                        stderr=fe,
                        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                    )  # fmt: skip
                )
        deadline = time.monotonic() + 900
        # a process that fails leaves the other waiting in a collective: stop at the first
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if any(p.returncode not in (None, 0) for p in procs):
                break
            time.sleep(0.2)
    finally:  # on any failure or timeout, no child (nor its port) outlives the test
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    outs = [(out.read_text(), err.read_text()) for out, err in logs]
    for k, p in enumerate(procs):
        assert p.returncode == 0, f"process {k} (exit {p.returncode}):\n{outs[k][1][-4000:]}"
        assert f"OK {k}" in outs[k][0], outs[k][0]
    # both processes saw the same per-member outcomes
    results = [line.split(" ", 2)[2] for out, _ in outs for line in out.splitlines()
               if line.startswith("RESULT")]  # fmt: skip
    assert len(results) == 2 and results[0] == results[1], results
    grads = [line for out, _ in outs for line in out.splitlines() if line.startswith("GRAD")]
    assert len(grads) == 2 and grads[0][7:] == grads[1][7:], grads  # bit for bit


def test_gather_must_be_a_bool():
    """A clear error before anything compiles (gather=False matters only across processes)."""
    import jaxmbd as mbd

    batch = mbd.stack_models([mbd.models.double_pendulum()] * 2)
    with pytest.raises(TypeError, match="gather= must be True or False, got 'no'"):
        mbd.simulate_batch(batch, gather="no", t_end=0.01, h=1e-3)
