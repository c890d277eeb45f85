"""Batched analyses (issue 16): compiled once per (topology, options, batch shape), equal to
the loop of single runs for every integrator, and failures reported per member."""

import types

import equinox as eqx
import jax
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.newton import SUCCESS


def _members(model, scales):
    return [
        eqx.tree_at(lambda m: (m.mass, m.gravity), model, (model.mass * s, model.gravity * s))
        for s in scales
    ]


#: one horizon for every double-pendulum run below, and batches of three: the default
#: program (gen_alpha) of a single run and of a batch is compiled once for the file
OPTS = dict(t_end=0.004, h=1e-3)


def _massless_second_rod(model):
    """The double pendulum with a massless second rod: a singular Newton matrix."""
    return eqx.tree_at(
        lambda m: (m.mass, m.inertia),
        model,
        (model.mass.at[1].set(0.0), model.inertia.at[1].set(0.0)),
    )


def test_simulate_batch_compiles_once():
    """Regression: simulate_batch built a fresh closure per call, so every call recompiled."""
    model = mbd.models.double_pendulum()
    opts = OPTS
    first = mbd.simulate_batch(mbd.stack_models(_members(model, [1.0, 1.1, 1.2])), **opts)
    with count_compilations() as counts:
        again = mbd.simulate_batch(mbd.stack_models(_members(model, [0.9, 1.3, 0.8])), **opts)
        jax.block_until_ready(again.r)
    assert counts == {"trace": 0, "compile": 0}, counts
    assert not np.allclose(np.asarray(first.r), np.asarray(again.r))  # new values, same program
    # simulate itself: only array leaves change
    mbd.simulate(model, **opts)
    with count_compilations() as counts:
        for member in _members(model, [0.7, 1.2]):
            jax.block_until_ready(mbd.simulate(member, **opts).r)
    assert counts == {"trace": 0, "compile": 0}, counts


def test_kinematics_batch_compiles_once():
    model = mbd.models.slider_crank()

    def member(w):
        return eqx.tree_at(lambda m: m.drivers[0].constants, model, model.drivers[0].constants * w)

    opts = dict(t_end=0.004, h=1e-3)
    mbd.kinematics_batch(mbd.stack_models([member(1.0), member(1.1)]), **opts)
    with count_compilations() as counts:
        sol = mbd.kinematics_batch(mbd.stack_models([member(0.9), member(1.2)]), **opts)
        jax.block_until_ready(sol.r)
    assert counts == {"trace": 0, "compile": 0}, counts
    for k, w in enumerate((0.9, 1.2)):
        single = mbd.kinematics(member(w), **opts)
        scale = max(1.0, float(np.abs(single.r).max()))  # lengths of ~1 m
        np.testing.assert_allclose(np.asarray(sol.r)[k], single.r, rtol=0, atol=ROUND_OFF * scale)


# (model, formulation, integrator, options): every integrator of the integrator layer
CASES = {
    "gen_alpha": ("double_pendulum", "rA", "gen_alpha", {}),
    "backward_euler": ("double_pendulum", "rA", "backward_euler", {}),
    "rkmk": ("double_pendulum", "se3", "rkmk", {}),
    "rk": ("double_pendulum", "rotmat", "rk", {}),
    "energy_momentum": ("double_pendulum", "director", "energy_momentum", {}),
}


# gen_alpha and backward_euler in the default suite; the explicit and director integrators
# (one more compilation each) with -m slow, for the CI budget
FAST = ("gen_alpha",)


@pytest.mark.parametrize(
    "case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in CASES]
)
def test_batch_equals_loop(case):
    name, formulation, integrator, options = CASES[case]
    model = getattr(mbd.models, name)()
    members = _members(model, [1.0, 0.8, 1.25])
    opts = dict(formulation=formulation, integrator=integrator, **OPTS, **options)
    batch = mbd.simulate_batch(mbd.stack_models(members), **opts)
    assert np.asarray(batch.status).shape == (3, 5)
    for k, member in enumerate(members):
        single = mbd.simulate(member, **opts)
        for key in ("r", "A", "rdot", "omega"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
        lam, lam_single = np.asarray(batch.lam)[k], np.asarray(single.lam)
        np.testing.assert_allclose(lam, lam_single, rtol=0, atol=ROUND_OFF * np.abs(lam).max())
        np.testing.assert_array_equal(np.asarray(batch.status)[k], np.asarray(single.status))
        iterations = np.asarray(batch.iterations)[k]
        np.testing.assert_array_equal(iterations, np.asarray(single.iterations))


def test_failed_member_is_reported_alone():
    """One member with a massless second rod (singular Newton matrix) fails with its own
    status; the others' results equal their single runs."""
    model = mbd.models.double_pendulum()
    good = _members(model, [1.0, 1.2])
    bad = _massless_second_rod(model)
    opts = OPTS
    batch = mbd.simulate_batch(mbd.stack_models([good[0], bad, good[1]]), **opts)
    status = np.asarray(batch.status)
    assert np.all(status[[0, 2]] == SUCCESS)
    assert np.any(status[1] != SUCCESS)
    with pytest.raises(mbd.ModelError, match="body 'rod 2' has mass 0"):  # refused at entry
        mbd.simulate(bad, **opts)
    for k, member in zip((0, 2), good, strict=True):
        single = mbd.simulate(member, **opts)
        want = np.asarray(single.r)
        np.testing.assert_allclose(
            np.asarray(batch.r)[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
        )
        assert np.all(np.isfinite(np.asarray(batch.lam)[k]))


def _uneven_members(case):
    """(members, options, index of the failing member) of a batch whose members take
    different numbers of Newton iterations per step, one of them failing: double
    pendulums under 0, 1 and 30 times gravity beside a massless second rod (a singular
    Newton matrix) at h = 10 ms; hard contact: balls above the ground, landing slowly
    and fast, beside one with a NaN rate (its Newton loop runs to the cap and fails)."""
    from test_hard_contact import R_BALL, _ball

    opts = dict(t_end=0.04, h=1e-2)
    if case == "hard":
        ball = _ball()

        def dropped(gap, v):
            return eqx.tree_at(
                lambda m: (m.r0, m.rdot0),
                ball,
                (ball.r0.at[0, 2].set(R_BALL + gap), ball.rdot0.at[0, 2].set(-v)),
            )

        members = [dropped(0.01, 0.0), dropped(5e-4, 1.0), dropped(5e-4, np.nan)]
        # rA: its Moreau-Jean steps solve Newton loops (joint coordinates' hard steps report none)
        return members + [dropped(5e-4, 3.0)], dict(opts, formulation="rA", contact="hard"), 2
    model = mbd.models.double_pendulum()
    formulation = "se3" if case == "rkmk" else "rA"
    members = [eqx.tree_at(lambda m: m.gravity, model, model.gravity * g) for g in (0, 1, 30)]
    members.insert(2, _massless_second_rod(model))
    return members, dict(opts, formulation=formulation, integrator=case), 2


@pytest.mark.parametrize(
    "case",
    [
        "gen_alpha",
        pytest.param("rkmk", marks=pytest.mark.slow),
        pytest.param("hard", marks=pytest.mark.slow),
    ],
)
def test_uneven_newton_work_equals_single_runs(case):
    """Members whose Newton loops take different numbers of iterations, and one that
    fails, in one vmapped chunk: the batched loop runs until its slowest member is done,
    and a member that has converged (or failed) keeps its values (masked updates), so
    every good member equals its single run to round-off, iteration counts included, and
    the failing member fails alone."""
    members, opts, bad = _uneven_members(case)
    batch = mbd.simulate_batch(mbd.stack_models(members), **opts)
    status, iterations = np.asarray(batch.status), np.asarray(batch.iterations)
    assert np.any(status[bad] != SUCCESS)
    good = [k for k in range(len(members)) if k != bad]
    assert np.all(status[good] == SUCCESS)
    if case != "rkmk":  # rkmk's steps are explicit: its Newton runs at the start only
        assert len({tuple(iterations[k]) for k in good}) > 1, iterations
    for k in good:
        single = mbd.simulate(members[k], **opts)
        for key in ("r", "A", "rdot", "omega"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
        lam, lam_single = np.asarray(batch.lam)[k], np.asarray(single.lam)
        scale = max(1.0, float(np.abs(lam).max(initial=0.0)))
        np.testing.assert_allclose(lam, lam_single, rtol=0, atol=ROUND_OFF * scale)
        np.testing.assert_array_equal(status[k], np.asarray(single.status))
        np.testing.assert_array_equal(iterations[k], np.asarray(single.iterations))


def test_chunked_batch_equals_loop_and_isolates_failures():
    """``chunk``: members vmapped a few at a time (lax.map over chunks, here 2 + 2 + a
    remainder of 1) give the single runs' results, and a failed member stays alone in its
    chunk's report."""
    model = mbd.models.double_pendulum()
    good = _members(model, [1.0, 1.2, 0.9, 1.1])
    bad = _massless_second_rod(model)
    members = [good[0], bad, good[1], good[2], good[3]]
    opts = OPTS
    batch = mbd.simulate_batch(mbd.stack_models(members), chunk=2, **opts)
    status = np.asarray(batch.status)
    assert status.shape == (5, 5)
    assert np.any(status[1] != SUCCESS)
    assert np.all(status[[0, 2, 3, 4]] == SUCCESS)
    for k in (0, 2, 3, 4):
        single = mbd.simulate(members[k], **opts)
        for key in ("r", "A", "omega"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    for wrong in (0, 1.5, True):
        with pytest.raises(ValueError, match="chunk must be a positive integer"):
            mbd.simulate_batch(mbd.stack_models(members), chunk=wrong, **opts)


SENSED_PENDULUM = """<mujoco><worldbody><body name="a">
<joint name="j1" type="hinge" axis="1 0 0"/><geom type="capsule" fromto="0 0 0 0 1 0" size="0.05"
mass="1"/><body name="b" pos="0 1 0"><joint name="j2" type="hinge" axis="1 0 0"/>
<geom type="capsule" fromto="0 0 0 0 1 0" size="0.05" mass="1"/></body></body></worldbody>
<sensor><jointpos joint="j2"/></sensor></mujoco>"""


def test_chunked_batch_with_empty_arrays_in_the_solution(tmp_path):
    """A Solution can hold zero-size arrays (an MJCF model with sensors keeps a copy of the
    model, with its empty constraint-parameter arrays): ``lax.map``'s chunking divided by
    zero on them (a batch of the MJCF double pendulum with the default chunk failed);
    chunked members equal the one-vmap batch, sensors included."""
    file = tmp_path / "sensed.xml"
    file.write_text(SENSED_PENDULUM)
    model = mbd.load_model(file)
    members = [eqx.tree_at(lambda m: m.omega0, model, model.omega0 + s) for s in (0, 1, 2, 3)]
    opts = dict(integrator="rkmk", t_end=0.004, h=1e-3, devices=jax.devices()[:1])
    stacked = mbd.stack_models(members)
    chunked = mbd.simulate_batch(stacked, chunk=2, **opts)
    whole = mbd.simulate_batch(stacked, chunk=4, **opts)
    assert np.all(np.asarray(chunked.status) == SUCCESS)
    for key in ("r", "A", "omega", "lam"):
        got, want = np.asarray(getattr(chunked, key)), np.asarray(getattr(whole, key))
        np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    (name,) = whole.sensors
    want = np.asarray(whole.sensors[name])
    np.testing.assert_allclose(
        chunked.sensors[name], want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
    )


def test_default_chunk():
    """The default chunk: HOISTED_CHUNK members for a small model (n = 6 nb + 2 nc up to
    SMALL_MAX, its chunk's time loop one native loop), for a larger one the largest power
    of two of members whose Newton matrices fit in the device's share of CHUNK_BYTES; a
    device with no more members than that runs them in one vmap (None), and so does a run
    of the joint formulation (its time loop chunks the batch itself)."""
    from jaxmbd.analysis.batch import CHUNK_BYTES, HOISTED_CHUNK, _chunk_size
    from jaxmbd.linear.small import SMALL_MAX

    pendulum, crank = mbd.models.double_pendulum(), mbd.models.slider_crank()
    for model in (pendulum, crank):  # n = 32 and 54
        assert 6 * model.nb + 2 * model.nc <= SMALL_MAX
        for devices in (1, 2):
            assert _chunk_size(model, 10**6, None, devices) == HOISTED_CHUNK
    assert _chunk_size(pendulum, HOISTED_CHUNK, None, 2) is None  # one vmap
    assert _chunk_size(pendulum, HOISTED_CHUNK + 1, None, 2) == HOISTED_CHUNK
    assert _chunk_size(pendulum, 1000, 7, 2) == 7  # the caller's choice wins
    # the joint formulation's run chunks its batch itself, batch-last (BATCH_CHUNK)
    assert _chunk_size(pendulum, 10**6, None, 1, joint=True) is None
    assert _chunk_size(pendulum, 10**6, 7, 1, joint=True) == 7
    chain = types.SimpleNamespace(nb=11, nc=0)  # n = 66: what the default reads of a model
    for devices in (1, 2):
        n = 6 * chain.nb + 2 * chain.nc
        chunk = _chunk_size(chain, 10**6, None, devices)
        assert chunk * 8 * n * n <= CHUNK_BYTES // devices**2 < 2 * chunk * 8 * n * n


@pytest.mark.parametrize("newton", ["reuse", pytest.param("full", marks=pytest.mark.slow)])
def test_accelerator_paths_equal_single_runs(newton, monkeypatch):
    """The GPU paths of the batching rules (the whole batch refreshed in one vmap where any
    member is stale; batched getrf and triangular solves), taken here on the CPU through
    the testing hook: each member equals its single run to round-off, and a failed member
    stays alone. Default Newton: refresh and inverse; full: LU factors and solves."""
    from jaxmbd.compiled import batching as _batching
    from jaxmbd.linear.dense import dense_lu, inverse_and_pivots

    model = mbd.models.double_pendulum()
    good = _members(model, [1.0, 1.2])
    bad = _massless_second_rod(model)
    members = [good[0], bad, good[1]]
    opts = dict(OPTS, formulation="rA", newton=newton)  # the Newton paths of rA
    stack = np.stack([np.eye(3) + 0.1 * k for k in range(4)])

    def loops(fn):  # the CPU paths run getrf on one member at a time, the GPU paths batched
        text = jax.jit(jax.vmap(fn)).lower(stack).as_text()
        return 'num_batch_dims = "0"' in text and 'num_batch_dims = "1"' not in text

    # on the CPU its own paths; on a GPU the batched ones without the hook (seen on an H100)
    cpu = jax.default_backend() == "cpu"
    assert loops(dense_lu) == cpu and loops(inverse_and_pivots) == cpu
    # the single runs first, on the CPU paths (the default Newton's program is the file's)
    singles = {k: mbd.simulate(members[k], **opts) for k in (0, 2)}
    jax.clear_caches()  # the hook is read when a program is traced
    monkeypatch.setattr(_batching, "ACCELERATOR_PATHS_EVERYWHERE", True)
    try:
        assert not loops(dense_lu) and not loops(inverse_and_pivots)
        batch = mbd.simulate_batch(mbd.stack_models(members), **opts)
        jax.block_until_ready(batch.r)
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    status = np.asarray(batch.status)
    assert np.any(status[1] != SUCCESS)
    assert np.all(status[[0, 2]] == SUCCESS)
    for k, single in singles.items():
        for key in ("r", "A", "rdot", "omega"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
        np.testing.assert_array_equal(status[k], np.asarray(single.status))


HINGE_PENDULUM = """<mujoco><option timestep="0.001"/><worldbody><body name="a">
<joint name="j1" type="hinge" axis="1 0 0"/><geom type="capsule" fromto="0 0 0 0 1 0" size="0.05"
mass="1"/><body name="b" pos="0 1 0"><joint name="j2" type="hinge" axis="1 0 0"/>
<geom type="capsule" fromto="0 0 0 0 1 0" size="0.05" mass="1"/></body></body></worldbody>
</mujoco>"""

#: steps of the structural test: a trip count no other loop of these programs has (rk's
#: four stages, Newton's iteration caps)
HOIST_STEPS = 7


def _hinge_pendulum(tmp_path):
    file = tmp_path / "hinge_pendulum.xml"
    file.write_text(HINGE_PENDULUM)
    return mbd.load_model(file)


@pytest.mark.parametrize(
    "case",
    [
        ("joint", "rk"),
        ("rA", "gen_alpha"),
    ],
    ids=lambda c: f"{c[0]}-{c[1]}",
)
def test_batched_time_loop_is_one_native_loop(case, tmp_path):
    """Structure, not time: the program ``simulate_batch`` compiles for 256 members by
    default runs each chunk's time loop as one native loop (XLA's small-while-loop
    hoisting, as for a single run), not as XLA's runtime thunks, which cost every member
    the per-operation dispatch that a single run avoids. It failed when the batch was one
    vmap of 256 (the loop body's bytes over the hoisting threshold) and when YNNPACK
    library fusions (reductions and constant-matrix products grown by the batch axis)
    sat in the loop."""
    from jaxmbd.analysis.batch import _chunk_size, _is_joint, _static_options, _vmapped
    from jaxmbd.compiled.xla_flags import loop_hoisted

    formulation, integrator = case
    if formulation == "joint":
        model = _hinge_pendulum(tmp_path)
    else:
        model = mbd.models.double_pendulum()
    members = mbd.stack_models([model] * 256)
    opts = _static_options(
        dict(formulation=formulation, integrator=integrator, t_end=HOIST_STEPS * 1e-3, h=1e-3)
    )
    joint = _is_joint(members, opts)  # the joint run's batch-last rule chunks its batch
    chunk = _chunk_size(members, 256, None, 1, jax.devices()[0].platform, joint)
    text = _vmapped.lower("simulate", (members, None), opts, chunk).compile().compiled.as_text()
    # the joint run's loop takes n + 1 iterations, each from a state's accelerations
    trips = HOIST_STEPS + (formulation == "joint")
    assert loop_hoisted(text, trips), f"chunk {chunk}: the time loop is not hoisted"
