"""save_every: long runs that keep every k-th step (memory flat in the number of steps)
without hiding the failures of the steps in between."""

import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis._stepping import strided_scan


def test_strided_scan_summarises_the_steps_between_rows():
    """A failure at step 3 of a segment of 5 (later steps succeed) is reported on the saved
    row, with the segment's largest iteration count and residual; other outputs are the
    saved step's own."""

    def step(carry, k):
        outs = tuple(jnp.asarray(float(i)) * k for i in range(7))
        status = jnp.where(k == 3, 1, jnp.where(k == 8, 2, 0))
        iterations = jnp.where(k == 2, 9, 1)
        residual = jnp.where(k == 7, 5.0, 0.0)
        return carry + 1, outs + (iterations, status, residual)

    carry, outs = strided_scan(step, 0, jnp.arange(1, 11), 5)
    assert int(carry) == 10
    np.testing.assert_array_equal(outs[1], [5.0, 10.0])  # the saved steps 5 and 10
    np.testing.assert_array_equal(outs[7], [9, 1])
    np.testing.assert_array_equal(outs[8], [1, 2])
    np.testing.assert_array_equal(outs[9], [0.0, 5.0])


def test_kinematics_rows_are_the_full_run_subsampled(crank):
    full = mbd.kinematics(crank, t_end=0.02, h=1e-3)
    every = mbd.kinematics(crank, t_end=0.02, h=1e-3, save_every=5)
    assert every.r.shape[0] == 5 and every.save_every == 5
    for key in ("t", "r", "A", "omega", "omegadot", "lam"):
        want = np.asarray(getattr(full, key))[::5]
        # at least the unit scale: the crank's centre of mass stays on its axis (r = 0 up
        # to 1e-18, which two programs round differently)
        np.testing.assert_allclose(
            getattr(every, key), want, rtol=0, atol=ROUND_OFF * max(1.0, np.abs(want).max())
        )
    chunked = mbd.kinematics(
        crank, t_end=0.02, h=1e-3, save_every=5, progress=lambda d, n: None, chunk_size=7
    )
    want = np.asarray(every.r)
    np.testing.assert_allclose(chunked.r, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())


def test_failures_between_rows_are_reported():
    # the slider crank at h = 0.01 needs two Newton iterations per step: max_iter=1 fails
    slider = mbd.models.slider_crank()
    with pytest.raises(mbd.SolverError, match=r"between saved rows 0 and 1 \(t = 0 to 0.05 s"):
        mbd.kinematics(slider, t_end=0.1, h=1e-2, save_every=5, max_iter=1)


def test_simulate_rows_are_the_full_run_subsampled():
    model = mbd.models.double_pendulum()
    full = mbd.simulate(model, formulation="rA", t_end=0.02, h=1e-3)
    every = mbd.simulate(model, formulation="rA", t_end=0.02, h=1e-3, save_every=4)
    assert every.r.shape[0] == 6
    for key in ("t", "r", "A", "rdot", "omega", "lam", "q", "v"):
        want = np.asarray(getattr(full, key))[::4]
        np.testing.assert_allclose(
            getattr(every, key), want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
        )
    # rA's own coordinates are its body state: read from r, A, rdot, omega, not stored twice
    assert full.stored_q is None and full.stored_v is None
    np.testing.assert_array_equal(full.q[:, :, 3:].reshape(-1, 2, 3, 3), full.A)
    np.testing.assert_array_equal(full.v, np.concatenate([full.rdot, full.omega], -1))


def test_own_coordinates_are_subsampled_too():
    model = mbd.models.double_pendulum()
    full = mbd.simulate(model, formulation="rp", t_end=0.02, h=1e-3)
    every = mbd.simulate(model, formulation="rp", t_end=0.02, h=1e-3, save_every=4)
    assert full.q.shape == (21, 2, 7) and full.v.shape == (21, 2, 7)  # (r, p), (r_dot, p_dot)
    for key in ("q", "v"):
        want = np.asarray(getattr(full, key))[::4]
        np.testing.assert_allclose(
            getattr(every, key), want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
        )


def test_bad_save_every(crank):
    with pytest.raises(ValueError, match="must divide the number of steps"):
        mbd.kinematics(crank, t_end=0.01, h=1e-3, save_every=3)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            mbd.kinematics(crank, t_end=0.01, h=1e-3, save_every=bad)
    with pytest.raises(ValueError, match="cannot be combined"):
        mbd.simulate(mbd.models.double_pendulum(), formulation="rA", t_end=0.01, h=1e-3,
                     save_every=5, checkpoint=5)  # fmt: skip


def test_chunked_run_compiles_its_chunk_once(monkeypatch):
    """Regression: the reused-matrix Newton's initial contraction rate was weakly typed, so
    the second chunk of a progress run traced and compiled the chunk again (counted here
    by the chunk function's jit cache: one entry per compiled signature; the disk cache of
    exported programs, which would serve it instead, is off)."""
    from jaxmbd.analysis.simulation import _block as _chunk

    monkeypatch.setenv("JAXMBD_NO_COMPILATION_CACHE", "1")
    model = mbd.models.double_pendulum()
    cache = (
        _chunk.tuned._cached
    )  # a top-level call compiles the tuned version (jaxmbd.compiled.jit)
    before = cache._cache_size()
    done = []
    mbd.simulate(model, formulation="rA", t_end=0.012, h=1e-3, chunk_size=4,
                 progress=lambda k, n: done.append(k))  # fmt: skip
    assert done == [4, 8, 12]
    assert cache._cache_size() - before == 1


def test_long_run_keeps_rotations_orthonormal():
    """10^4 steps: ||A^T A - I|| stays at round-off (each update is re-orthonormalised; without
    it the error grew linearly, 7.7e-11 after 10^6 slider-crank steps)."""
    from jaxmbd.analysis.diagnostics import constraint_violation

    model = mbd.models.double_pendulum()
    sol = mbd.simulate(model, formulation="rA", t_end=10.0, h=1e-3, save_every=500)
    drift = float(np.max(np.asarray(constraint_violation(model, sol).orthonormality)))
    assert drift < 2e-15, drift


def test_top_level_programs_compile_with_xla_options_and_nested_ones_without(monkeypatch):
    """jaxmbd.compiled.jit: a top-level simulate compiles the tuned program (XLA options); under an
    outer jit the plain one is inlined (XLA refuses compiler options on a nested jit), with
    the same result. (The disk cache of exported programs, which would serve the top-level
    call instead, is off.)"""
    import jax

    monkeypatch.setenv("JAXMBD_NO_COMPILATION_CACHE", "1")

    from jaxmbd.analysis.simulation import _block
    from jaxmbd.compiled.jit import _options_accepted

    model = mbd.models.single_pendulum()
    tuned = _block.tuned._cached
    before = tuned._cache_size()
    top = mbd.simulate(model, formulation="rA", t_end=0.003, h=1e-3).r
    assert tuned._cache_size() - before == (1 if _options_accepted() else 0)
    # nested: inlined into the outer program (compiler options there would raise)
    nested = jax.jit(
        lambda m: mbd.simulate(m, formulation="rA", t_end=0.003, h=1e-3, throw=False).r
    )(model)
    assert tuned._cache_size() - before == (1 if _options_accepted() else 0)
    np.testing.assert_allclose(nested, top, rtol=0, atol=ROUND_OFF * np.abs(top).max())
