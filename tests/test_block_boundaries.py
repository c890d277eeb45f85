"""Runs across the block boundaries of a forward run (issue 77).

Outside any transformation ``simulate`` runs as blocks of ``BLOCK_STEPS`` steps
(:func:`jaxmbd.analysis.simulation._run_blocks`): the start is one program, every block
another, the integrator's carry (with its reused Newton matrix)
passed from one to the next. A program that the disk cache loads returns its outputs'
static parts unpickled: the carry's factors then hold a copy of their ``BlockStructure``,
and the next block's ``lax.cond`` (refresh the matrix or keep it) met a structure built
again that compared unequal (by identity), so every run longer than one block failed with
the structured solvers in a process whose cache held the first program. Here each later
block gets its carry pickled and unpickled, as such a process does, so the tests fail
without the fix whatever the cache holds. ``BLOCK_STEPS`` is set to 8 (three blocks for
20 steps, the last one past t_end); the reference is one block of the same length.
"""

import pickle

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis import simulation
from jaxmbd.analysis.plan import plan_simulation
from jaxmbd.linear import graph
from jaxmbd.linear.structured import (
    BlockFactors,
    BlockMatrix,
    BlockStructure,
    empty_factors,
    factor_block_matrix,
)

H = 1e-3
STEPS = 20
BLOCK = 8
TOL = 1e-12  # the -m slow runs: backward Euler's rates reach 5e-14 (see _assert_same)
FIELDS = ("r", "A", "rdot", "omega", "rddot", "omegadot", "lam")
RATES = ("rddot", "omegadot", "lam")


def chain():
    """Two links on spherical joints (the issue's model), tilted off re's chart singularity."""
    c, s = np.cos(0.3), np.sin(0.3)
    axes = ((1.0, 0.0, 0.0), (0.0, c, s))
    b = mbd.ModelBuilder("two spherical links", gravity=(0.0, 0.0, -9.81))
    b.add_body("a", mass=1.0, inertia=(1e-2, 2e-2, 3e-2), r=(0.5, 0.0, 0.0), axes=axes)
    b.add_body("c", mass=1.0, inertia=(1e-2, 2e-2, 3e-2), r=(1.5, 0.0, 0.0), axes=axes)
    b.spherical("s0", body_i="ground", body_j="a", point=(0.0, 0.0, 0.0))
    b.spherical("s1", body_i="a", body_j="c", point=(1.0, 0.0, 0.0))
    return b.build()


@pytest.fixture(scope="module")
def model():
    return chain()


def _reloaded_carries(monkeypatch):
    """Each later block's carry pickled and unpickled (what a process whose disk cache
    holds the first program passes on)."""
    block = simulation._block

    def reloaded(model, form, stepper, carry, *rest):
        return block(model, form, stepper, pickle.loads(pickle.dumps(carry)), *rest)

    monkeypatch.setattr(simulation, "_block", reloaded)


def _assert_same(sol, ref, tol=TOL):
    """The states to ``tol`` (relative to max(1, |x|)); the accelerations and multipliers
    as the velocity increments h a and impulses h lam they are steps of: a backward Euler
    step's a is (v_{n+1} - v_n) / h, so a last-bit change of a velocity (two programs
    differ there: blocks of another size are another program; measured 6e-14 in rdot) is
    1/h larger in a and lam
    (5e-11 relative, rA with backward_euler under the suite's XLA options)."""
    for name in FIELDS:
        x, y = np.asarray(getattr(sol, name)), np.asarray(getattr(ref, name))
        assert x.shape == y.shape, name
        if name in RATES:
            x, y = H * x, H * y
        scale = max(1.0, float(np.max(np.abs(y))))
        assert np.max(np.abs(x - y)) <= tol * scale, name  # ROUND_OFF in the default suite


def _blocked_and_single(monkeypatch, model, formulation="rA", **options):
    """The run as blocks of BLOCK steps (carries reloaded), once more through
    ``chunk_size`` (and ``progress``), and as one block of STEPS steps."""
    run = dict(formulation=formulation, t_end=STEPS * H, h=H, **options)
    monkeypatch.setattr(simulation, "BLOCK_STEPS", STEPS)
    single = mbd.simulate(model, **run)
    _reloaded_carries(monkeypatch)
    calls = []
    # chunk_size: blocks of BLOCK steps whatever BLOCK_STEPS (here still STEPS)
    chunked = mbd.simulate(model, **run, chunk_size=BLOCK, progress=lambda d, n: calls.append(d))
    assert calls == [8, 16, 20]
    monkeypatch.setattr(simulation, "BLOCK_STEPS", BLOCK)
    blocked = mbd.simulate(model, **run)  # the same two programs as the chunked run
    return blocked, chunked, single


# the solvers; the dense ones never failed (no structure in their factors) and run
# with -m slow with the other formulations (each solver compiles four programs)
_SLOW = pytest.mark.slow
SOLVERS = ["structured", "small_structured"]
SOLVERS += [pytest.param(s, marks=_SLOW) for s in ("dense", "small")]


@pytest.mark.parametrize("solver", SOLVERS)
def test_runs_across_block_boundaries(monkeypatch, model, solver):
    """rA's reused Newton matrix passes three block boundaries, its carry reloaded at
    each: the trajectory equals one block's to round-off (with and without chunk_size)."""
    blocked, chunked, single = _blocked_and_single(monkeypatch, model, linear_solver=solver)
    assert int(np.max(np.asarray(blocked.status))) == 0
    _assert_same(blocked, single, tol=ROUND_OFF)
    _assert_same(chunked, single, tol=ROUND_OFF)


FORMULATIONS = [
    ("rA", "backward_euler"),
    ("rp", None),
    ("re", None),
    ("se3", None),
    ("director", None),
    ("director", "energy_momentum"),
    ("rp", "rk"),
    ("se3", "rkmk"),
]


@_SLOW
@pytest.mark.parametrize("formulation,integrator", FORMULATIONS)
@pytest.mark.parametrize("solver", ["structured", "small_structured", "dense", "small"])
def test_formulations_across_block_boundaries(monkeypatch, model, formulation, integrator,
                                              solver):  # fmt: skip
    """Every formulation and integrator that takes a linear solver, as the test above."""
    run = dict(formulation=formulation, integrator=integrator, linear_solver=solver)
    blocked, chunked, single = _blocked_and_single(monkeypatch, model, **run)
    _assert_same(blocked, single)
    _assert_same(chunked, single)


def _carry_structure(model, formulation, integrator, solver):
    """The pytree structure of the carry that the start's program passes to the first later
    block (traced, nothing compiled), and that of the same carry pickled and unpickled."""
    plan = plan_simulation(model, formulation=formulation, integrator=integrator,
                           t_end=4 * H, h=H, linear_solver=solver)  # fmt: skip
    h = jnp.asarray(H)

    def first_block():
        carry, _ = simulation._initial(plan.model, plan.form, plan.stepper, h)
        return simulation._scan(plan.model, plan.form, plan.stepper, carry, 0, 2, h)[0]

    carry = jax.eval_shape(first_block)
    again = pickle.loads(pickle.dumps(carry))
    return jax.tree_util.tree_structure(carry), jax.tree_util.tree_structure(again)


@pytest.mark.parametrize("formulation,integrator", [("rA", None)] + FORMULATIONS)
# (traced, nothing compiled; small_structured's carry holds the same factors: -m slow)
@pytest.mark.parametrize("solver", ["structured", pytest.param("small_structured", marks=_SLOW)])
def test_carry_metadata_compares_by_value(model, formulation, integrator, solver):
    """The static metadata of every carry that crosses a block boundary (the Newton state
    with its factors) is equal to its pickled copy's: a block whose carry came from another
    trace or from the disk cache has the same pytree structure (the implicit steps'
    ``lax.cond`` between a fresh and the kept matrix then traces)."""
    first, again = _carry_structure(model, formulation, integrator, solver)
    assert first == again


def test_block_structure_compares_by_value():
    """A layout built twice (its cache cleared, or unpickled) is the same static value:
    equal, with equal hashes, and so are the treedefs of factors and matrices on it."""
    model = chain()
    first = graph.newton_layout(model, tangent_size=6, stabilised=True, augmented=True)
    graph._layout.cache_clear()
    second = graph.newton_layout(model, tangent_size=6, stabilised=True, augmented=True)
    a, b = first.structure, second.structure
    assert a is not b
    assert a == b and hash(a) == hash(b)
    c = pickle.loads(pickle.dumps(a))
    assert c == a and hash(c) == hash(a) and c.cache == {}
    # another structure stays another: a node's unknowns in another order, or fewer edges
    assert a != BlockStructure([[1, 0]], [])
    assert BlockStructure([[0, 1]], []) != BlockStructure([[1, 0]], [])
    assert BlockStructure([[0], [1]], [(0, 1)]) != BlockStructure([[0], [1]], [])
    assert BlockStructure([[0], [1]], [(0, 1)]) == BlockStructure([[0], [1]], [(1, 0), (0, 1)])

    n = second.n
    fa, fb, fc = (empty_factors(s, n) for s in (a, b, c))
    treedef = jax.tree_util.tree_structure
    assert treedef(fa) == treedef(fb) == treedef(fc)
    ma = BlockMatrix(jnp.zeros((a.num_slots, a.b, a.b)), a, n)
    mb = BlockMatrix(jnp.zeros((b.num_slots, b.b, b.b)), b, n)
    assert treedef(ma) == treedef(mb)

    # the Newton loop's refresh: factor on one structure or keep factors on the other
    def refresh(stale, values):
        fresh = BlockMatrix(values, a, n)
        w = jnp.ones(n)
        return jax.lax.cond(stale, lambda: factor_block_matrix(fresh, w, w), lambda: fb)

    out = jax.eval_shape(refresh, True, ma.values)
    assert isinstance(out, BlockFactors) and out.structure == a


def _arrays(sol):
    return tuple(getattr(sol, name) for name in FIELDS)


def _assert_arrays(xs, ys, tol=TOL):
    for name, x, y in zip(FIELDS, xs, ys, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if name in RATES:
            x, y = H * x, H * y
        scale = max(1.0, float(np.max(np.abs(y))))
        assert np.max(np.abs(x - y)) <= tol * scale, name  # ROUND_OFF in the default suite


def test_structured_under_jit_equals_blocks(monkeypatch, model):
    """Under ``jit`` the run is one program (no blocks): the same trajectory as the run in
    blocks of 8 steps (carries reloaded), to round-off."""
    run = dict(formulation="rA", t_end=STEPS * H, h=H, linear_solver="structured")
    _reloaded_carries(monkeypatch)
    monkeypatch.setattr(simulation, "BLOCK_STEPS", BLOCK)
    blocked = mbd.simulate(model, **run)
    jitted = jax.jit(lambda m: _arrays(mbd.simulate(m, **run)))(model)
    _assert_arrays(jitted, _arrays(blocked), tol=ROUND_OFF)


@_SLOW  # a gradient program and a batched one (tens of seconds each)
@pytest.mark.parametrize("solver", ["structured", "small_structured"])
def test_structured_under_grad_and_vmap(monkeypatch, model, solver):
    """Under ``grad`` and ``vmap`` (one program each): the values equal the runs in blocks
    of 8 steps to 1e-12, and the gradient the dense solver's."""
    run = dict(formulation="rA", t_end=STEPS * H, h=H)
    _reloaded_carries(monkeypatch)
    monkeypatch.setattr(simulation, "BLOCK_STEPS", BLOCK)
    scales = jnp.array([1.0, 1.3])

    def with_gravity(s):
        return eqx.tree_at(lambda m: m.gravity, model, model.gravity * s)

    blocked = [mbd.simulate(with_gravity(s), **run, linear_solver=solver) for s in scales]
    batched = jax.vmap(lambda s: _arrays(mbd.simulate(with_gravity(s), **run,
                                                      linear_solver=solver)))(scales)  # fmt: skip
    for k, sol in enumerate(blocked):
        _assert_arrays([x[k] for x in batched], _arrays(sol))

    def loss(s, solver):
        sol = mbd.simulate(with_gravity(s), **run, linear_solver=solver)
        return jnp.sum(sol.r[-1]), sol.r

    (_, r), grad = jax.value_and_grad(loss, has_aux=True)(scales[1], solver)
    assert np.max(np.abs(np.asarray(r) - np.asarray(blocked[1].r))) <= TOL
    dense = jax.grad(lambda s: loss(s, "dense")[0])(scales[1])
    assert abs(float(grad) - float(dense)) <= 1e-9 * max(1.0, abs(float(dense)))


def test_a_run_of_several_blocks_traces_its_step_once(monkeypatch, model):
    """The blocks of a forward run are calls of one program, which traces the integrator's
    step once: three blocks and the start trace it once (a program for the first block
    beside the later blocks' traced it twice more, a shapes pass before each loop doubled
    that), with nothing on disk or in memory to skip the tracing."""
    from jaxmbd.compiled import program_cache
    from jaxmbd.integrators.runge_kutta import RungeKutta

    traced = []
    step = RungeKutta._step

    def counted(self, *args):
        traced.append(1)
        return step(self, *args)

    monkeypatch.setattr(RungeKutta, "_step", counted)
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    monkeypatch.setattr(simulation, "BLOCK_STEPS", BLOCK)
    jax.clear_caches()
    sol = mbd.simulate(model, formulation="rp", integrator="rk", t_end=STEPS * H, h=H)
    assert np.asarray(sol.r).shape[0] == STEPS + 1 and int(np.max(sol.status)) == 0
    assert len(traced) == 1
