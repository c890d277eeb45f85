"""Batches across processes (issue 40): two CPU processes on localhost, joined by
``jax.distributed`` with gloo collectives, each passing the same batches to
``simulate_batch``/``kinematics_batch(devices=jax.devices())``, against single-process runs.

One launch of two children (tests/distributed_child.py) does every case, so each program
compiles once per process: the double pendulum's run (in rA and in joint coordinates),
failing member, ``gather=False`` shards and gradient, identification under the user's own
``jax.jit``, a policy's run and gradient, kinematics. The single-process references are
split between the two children; this file compares what they saved. Both share the suite's
persistent compilation cache through JAX_COMPILATION_CACHE_DIR (tests/conftest.py), which
they inherit."""

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tolerances import ROUND_OFF

CHILD = Path(__file__).with_name("distributed_child.py")


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


def _tree(saved, name):
    """The leaves a child saved under ``name`` (``keep`` in the child), in order."""
    return [saved[f"{name}.{k}"] for k in range(sum(key.startswith(f"{name}.") for key in saved))]


def _close(got, want, *, atol=0.0, rel=0.0, what=""):
    """Every leaf of ``got`` within ``atol`` of ``want``'s, or within ``rel`` times the
    largest magnitude of ``want``'s leaf (gradients: relative to their largest component)."""
    assert len(got) == len(want) > 0, (what, len(got), len(want))
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, (what, k, g.shape, w.shape)
        err = np.abs(g - w).max()
        # the runs: rel=ROUND_OFF; the gradients (-m slow): their own rel
        assert err <= max(atol, rel * np.abs(w).max()), (what, k, err, np.abs(w).max())


def _compare(first, second, *, full):
    """The two children's saved results: equal to each other bit for bit, and to the
    single-process references (which one child or the other ran); ``full``: with the
    gradients, the identification and the policy."""
    # the results of the distributed calls: replicated, the same bits in both processes
    mine = [key for key in first if not key.startswith("ref_")]
    assert sorted(mine) == sorted(k for k in second if not k.startswith("ref_")), sorted(mine)
    for key in mine:
        np.testing.assert_array_equal(first[key], second[key], err_msg=key)
    ref = {**first, **second}  # each reference was run by one of them

    def both(name):
        return _tree(first, name), _tree(ref, "ref_" + name)

    # the double pendulum's run, its Newton iterations and the identification's data
    _close(*both("run"), rel=ROUND_OFF, what="run")
    np.testing.assert_array_equal(*(x[0] for x in both("run_iterations")))
    _close(*both("measured"), rel=ROUND_OFF, what="measured")
    r = _tree(first, "run")[0]
    assert not np.allclose(r[0], r[-1])  # the masses matter
    # the joint formulation's run (semi-implicit Euler on the tree): as one process's, and
    # as rA's (gen_alpha) to the first-order step's error at h = 1e-3
    _close(*both("joint_run"), rel=ROUND_OFF, what="joint run")
    np.testing.assert_allclose(_tree(first, "joint_run")[0], r, atol=1e-3)
    # member 5 failed, the others equal their undisturbed runs
    status, failed_step = _tree(first, "failed_status")
    assert (status != 0).any(axis=1).tolist() == [k == 5 for k in range(8)], failed_step
    assert failed_step[5] >= 0 and np.all(np.delete(failed_step, 5) == -1), failed_step
    keep = np.arange(8) != 5
    _close([_tree(first, "failed_r")[0][keep]], [_tree(ref, "ref_run")[0][keep]], rel=ROUND_OFF)
    # kinematics
    _close(*both("kinematics"), rel=ROUND_OFF, what="kinematics")
    kin = _tree(first, "kinematics")[1]
    assert not np.allclose(kin[0, -1], kin[1, -1])  # the drivers' rates differ
    if not full:
        left_out = ("grad", "fit_", "policy_")
        assert not any(key.removeprefix("ref_").startswith(left_out) for key in ref), sorted(ref)
        return
    # gradients, all-reduced by XLA, against one process's
    grad, grad_ref = both("grad")
    assert np.abs(grad_ref[0]).max() > 1e-7, grad_ref  # the loss depends on the masses
    _close(grad, grad_ref, rel=1e-10, what="gradient of the batch mean")
    (fit,), (fit_ref,) = both("fit_grad")
    assert fit_ref < 0, fit_ref  # towards the 45 kg that made the data
    _close([fit], [fit_ref], rel=1e-10, what="identification gradient under jax.jit")
    # the loss: a mean squared residual of near trajectories (~4e-5 m apart), whose 1e-12
    # agreement cancels to ~1e-9 of it
    _close(*both("fit_value"), rel=1e-9, what="identification loss under jax.jit")
    # the policy: value, run and gradient of one forward program
    _close(*both("policy_value"), rel=1e-12, what="policy loss")
    _close(*both("policy_run"), atol=1e-12, what="policy run")
    pgrad, pgrad_ref = both("policy_grad")
    assert max(np.abs(g).max() for g in pgrad_ref) > 1e-6, pgrad_ref
    for g, g_ref in zip(pgrad, pgrad_ref, strict=True):
        _close([g], [g_ref], rel=1e-10, what="policy gradient")
    runs = _tree(first, "policy_run")[0][:, -1, 0, 0]
    assert np.ptp(runs) > 1e-3, runs  # each cart ran its own way


@pytest.mark.parametrize(
    "full",
    [
        # runs, a failing member, gather=False, no recompilation, kinematics
        pytest.param(False, id="forward"),
        # and gradients, identification under jit, a policy: 7 more cold compilations
        # (~440 s of a launch on this 2-core machine), too long for the default suite
        pytest.param(True, id="full", marks=pytest.mark.slow),
    ],
)
def test_two_processes_equal_one(tmp_path, full):
    """Every case across 2 processes equals one process's (runs to round-off, gradients 1e-10)."""
    reason = _multiprocess_cpu_support()
    if reason:
        pytest.skip(reason)
    port = _free_port()
    logs = [(tmp_path / f"out{k}.txt", tmp_path / f"err{k}.txt") for k in range(2)]
    procs = []
    try:
        for k, (out, err) in enumerate(logs):
            with open(out, "w") as fo, open(err, "w") as fe:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(CHILD), str(k), str(port), str(tmp_path / f"{k}.npz")]
                        + (["full"] if full else []),
                        stdout=fo,
                        stderr=fe,
                        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                    )  # fmt: skip
                )
        deadline = time.monotonic() + 1500
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
    print("".join(line + "\n" for _, err in outs for line in err.splitlines()
                  if line.startswith("TIME")))  # fmt: skip
    _compare(*(dict(np.load(tmp_path / f"{k}.npz")) for k in range(2)), full=full)


def test_gather_must_be_a_bool():
    """A clear error before anything compiles (gather=False matters only across processes)."""
    import jaxmbd as mbd

    batch = mbd.stack_models([mbd.models.double_pendulum()] * 2)
    with pytest.raises(TypeError, match="gather= must be True or False, got 'no'"):
        mbd.simulate_batch(batch, gather="no", t_end=0.01, h=1e-3)
