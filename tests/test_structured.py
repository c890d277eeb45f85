"""The structured (block-sparse, body-joint graph) linear solver against the dense LU."""

import zlib
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import INDEX3_MULTIPLIERS, ROUND_OFF

import jaxmbd as mbd
from jaxmbd.formulations import get_formulation
from jaxmbd.integrators.base import Discretisation, step_system
from jaxmbd.integrators.structured import layout_for
from jaxmbd.linear.graph import newton_layout
from jaxmbd.linear.structured import BlockStructure, factor_values, solve_values
from jaxmbd.newton import ILL_CONDITIONED, NONFINITE, lu_factors, lu_factors_solve

MODELS = {
    "chain": lambda: mbd.models.pendulum_chain(5),
    "tree": lambda: mbd.models.binary_tree(7),
    "four_link": mbd.models.four_link,
    "engine": lambda: mbd.models.engine(3),
    "six_body": mbd.models.six_body_linkage,
}
RTOL = 1e-12


def _relative(x, y):
    return float(np.linalg.norm(np.asarray(x) - np.asarray(y)) / np.linalg.norm(np.asarray(y)))


def _bound(J):
    """1e-12 relative, or what the condition allows (each solve errs by ~ cond eps): the
    random KKT matrices have condition numbers up to ~1e5.

    The condition's worst case: most solves land 1e-4 to 1e-1 of it (the embedding's rp
    four-link solve, 0.11, fails a tenfold tighter floor)."""
    return RTOL * max(1.0, np.linalg.cond(J) / 1e2)


def _random_matrix(structure: BlockStructure, multipliers: np.ndarray, rng):
    """Random values on the structure's (unfilled) pattern, zero in the multipliers'
    columns of the multipliers' rows (``multipliers``: the lam unknowns; the mu columns of
    a stabilised step are not zero): a KKT-like matrix whose elimination needs the fill and
    the saddle-point pivots."""
    n = structure.n
    mask = np.zeros((n, n), bool)
    for k in range(structure.num_nodes):
        for j in set(structure.adjacency[k]) | {k}:
            mask[np.ix_(structure.nodes[k], structure.nodes[j])] = True
    J = rng.normal(size=(n, n)) * mask
    rows = np.arange(multipliers[0], n) if len(multipliers) else multipliers
    J[np.ix_(rows, multipliers)] = 0.0
    own = np.setdiff1d(np.arange(n), multipliers)
    J[own, own] += 4.0 * np.sqrt(structure.b)
    return J


def _solve_both(structure, J, rhs):
    # one compiled program (op by op, a factorisation and its solves took ~200 small ones)
    @jax.jit
    def both(J, rhs):
        vals, dinv, _, _ = factor_values(structure, structure.gather(J))
        x = solve_values(structure, vals, dinv, rhs)
        return x, solve_values(structure, vals, dinv, rhs, transpose=True)

    return both(jnp.asarray(J), jnp.asarray(rhs))


# the stabilised patterns also meet real Newton matrices below: their random variants run
# with -m slow (CI budget)
_SLOW = pytest.mark.slow
RANDOM = [(name, "kkt") for name in MODELS]
RANDOM += [pytest.param(name, "stabilised", marks=_SLOW) for name in MODELS]
RANDOM += [pytest.param(name, "stabilised_rp", marks=_SLOW) for name in ("chain", "engine")]


@pytest.mark.parametrize("name,kind", RANDOM)
def test_random_matrices_on_model_structures(name, kind):
    """Random matrices with the block pattern of each system: solves (and transposed
    solves) equal dense LU solves to 1e-12 relative."""
    model = MODELS[name]()
    rng = np.random.default_rng(zlib.crc32(f"{name} {kind}".encode()))
    rp = kind == "stabilised_rp"
    stabilised = kind != "kkt" and kind != "index3"
    ts = 7 if rp else 6
    layout = newton_layout(model, tangent_size=ts, extra_rows=rp, stabilised=stabilised)
    st = layout.structure
    m = (st.n - model.nb * ts) // (2 if stabilised else 1)
    J = _random_matrix(st, np.arange(model.nb * ts, model.nb * ts + m), rng)
    rhs = rng.normal(size=st.n)
    x, xt = _solve_both(st, J, rhs)
    # both: the condition's worst case (see _bound)
    assert _relative(x, np.linalg.solve(J, rhs)) < _bound(J)
    assert _relative(xt, np.linalg.solve(J.T, rhs)) < _bound(J)


def _random_step_matrices(model, form, *, stabilised, rng):
    """(dense, structured) Newton matrices of one implicit step at a random state."""
    form = get_formulation(form)
    q = form.from_body_state(model.r0, model.A0, model.rdot0, model.omega0, 0 * model.r0,
                             0 * model.r0)[0]  # fmt: skip
    nb, ts = model.nb, form.tangent_size
    m = form.num_multipliers(model)
    delta = 0.05 * rng.normal(size=nb * ts)
    q = form.retract(q, jnp.asarray(delta))
    disc = Discretisation(
        jnp.asarray(0.01 * rng.normal(size=nb * ts)),
        jnp.asarray(1e-4),
        jnp.asarray(rng.normal(size=(nb, ts))),
        jnp.asarray(1e-2),
    )
    n = nb * ts + (2 * m if stabilised else m)
    x = jnp.asarray(rng.normal(size=n))
    t = 0.3

    @jax.jit
    def both(q, disc, x):
        dense = step_system(model, form, q, disc, t, stabilised=stabilised).jacobian(x)
        blocks = step_system(
            model, form, q, disc, t, stabilised=stabilised, linear_solver="structured"
        ).jacobian(x)
        return dense, blocks

    dense, blocks = both(q, disc, x)
    return np.asarray(dense), blocks


# the stabilised step's matrix (its z = G_n^T mu rows and columns) on the engine and the
# four-link loop by default; on the chain, the tree and the six-body linkage (graphs whose
# unstabilised matrices stay default) with -m slow
CASES = [
    (name, "rA", stab)
    if not stab or name in ("engine", "four_link")
    else pytest.param(name, "rA", stab, marks=pytest.mark.slow)
    for name in MODELS
    for stab in (False, True)
]
CASES += [("engine", "rp", True), ("chain", "re", False)]


@pytest.mark.parametrize("name,form,stabilised", CASES)
def test_newton_matrices_structured_equals_dense(name, form, stabilised):
    """The implicit step's Newton matrix at a random state (rA: block-assembled, with the
    auxiliary z = G_n^T mu when stabilised; rp/re: gathered from the dense one): the
    structured solve (and the transposed one, used by reverse mode) equals the dense LU
    solve to 1e-12 relative (on the six-body linkage's redundant loop the matrix is
    singular: only the block matrix itself is compared)."""
    model = MODELS[name]()
    rng = np.random.default_rng(7)
    dense, blocks = _random_step_matrices(model, form, stabilised=stabilised, rng=rng)
    if not stabilised or form != "rA":
        np.testing.assert_allclose(np.asarray(blocks.todense()), dense, rtol=0,
                                   atol=ROUND_OFF * np.abs(dense).max())  # fmt: skip
    if name == "six_body":
        return
    rhs = rng.normal(size=dense.shape[0])

    @jax.jit  # one program, not op by op
    def solves(blocks, rhs):
        factors = lu_factors(blocks)
        return lu_factors_solve(factors, rhs), lu_factors_solve(factors, rhs, transpose=True)

    x, xt = solves(blocks, jnp.asarray(rhs))
    # both: the condition's worst case (see _bound)
    assert _relative(x, np.linalg.solve(dense, rhs)) < _bound(dense)
    assert _relative(xt, np.linalg.solve(dense.T, rhs)) < _bound(dense)


def test_broken_factorisation_is_caught():
    """The comparison above fails on a wrong factorisation: dropping the Schur updates of
    one round changes the solution."""
    model = MODELS["engine"]()
    rng = np.random.default_rng(3)
    st = newton_layout(model, tangent_size=6).structure
    J = _random_matrix(st, np.arange(model.nb * 6, st.n), rng)
    rhs = rng.normal(size=st.n)
    assert _relative(_solve_both(st, J, rhs)[0], np.linalg.solve(J, rhs)) < _bound(J)
    values = st.gather(jnp.asarray(J))
    vals, dinv, _, _ = jax.jit(lambda v: factor_values(st, v))(values)
    broken = vals.at[st.runs[0].lower_w[0, 0, 0]].multiply(0.5)
    x = jax.jit(lambda v, d, b: solve_values(st, v, d, b))(broken, dinv, jnp.asarray(rhs))
    assert _relative(x, np.linalg.solve(J, rhs)) > 1e-6


def test_vmap_of_structured_solve():
    model = MODELS["tree"]()
    st = newton_layout(model, tangent_size=6).structure
    rng = np.random.default_rng(1)
    mats = [_random_matrix(st, np.arange(model.nb * 6, st.n), rng) for _ in range(3)]
    rhs = rng.normal(size=(3, st.n))

    def solve(J, b):
        vals, dinv, _, _ = factor_values(st, st.gather(J))
        return solve_values(st, vals, dinv, b)

    x = jax.jit(jax.vmap(solve))(jnp.asarray(np.stack(mats)), jnp.asarray(rhs))
    for k in range(3):
        assert _relative(x[k], np.linalg.solve(mats[k], rhs[k])) < _bound(mats[k])  # (see _bound)


@pytest.fixture(scope="module")
def chain3():
    return mbd.models.pendulum_chain(3)


def test_simulation_and_gradients_match_dense(chain3):
    """A structured-solver simulation (gen_alpha, stabilised, block-assembled rA) equals
    the dense one, and so do its gradients (implicit-function tangents through the
    structured factors, transposed in reverse mode)."""

    def loss(model, solver):
        sol = mbd.simulate(model, formulation="rA", t_end=0.006, h=2e-3, newton="full", tol=1e-12,
                           linear_solver=solver)  # fmt: skip
        return jnp.sum(sol.r[-1] ** 2) + 1e-3 * jnp.sum(sol.lam[-1] ** 2)

    values, grads = {}, {}
    for s in ("dense", "structured"):
        values[s], grads[s] = mbd.jit(jax.value_and_grad(loss))(chain3, s)
    # the loss holds the multipliers: its value and gradients agree as they do
    tol = INDEX3_MULTIPLIERS
    assert abs(values["dense"] - values["structured"]) <= tol * abs(values["dense"])
    for field in ("mass", "inertia", "gravity", "r0"):
        g_d = np.asarray(getattr(grads["dense"], field))
        g_s = np.asarray(getattr(grads["structured"], field))
        np.testing.assert_allclose(g_s, g_d, rtol=0, atol=tol * np.abs(g_d).max())


def test_auto_picks_by_size():
    small = get_formulation("rA")
    integ = mbd.integrators.get_integrator("gen_alpha", "rA")
    # small systems: the elementwise kernels on the CPU (jaxmbd.linear.small), else LAPACK
    cpu = jax.default_backend() == "cpu"
    expected = "small" if cpu else "dense"
    assert integ.linear_solver_for(mbd.models.slider_crank(), small) == expected
    assert integ.linear_solver_for(mbd.models.pendulum_chain(64), small) == "structured"
    with pytest.raises(ValueError, match="linear_solver"):
        mbd.integrators.get_integrator("gen_alpha", "rA", linear_solver="sparse").linear_solver_for(
            mbd.models.slider_crank(), small
        )


def _redundant_loop():
    """Two bodies (ball, elbow) closed to the ground by a distance constraint, twice: the
    second closure repeats the first (rows linearly dependent), a singular Newton matrix."""
    b = mbd.ModelBuilder("redundant loop")
    b.add_body("a", mass=1.0, inertia=(1e-2, 1e-2, 1e-2), r=(0.5, 0.0, 0.0))
    b.add_body("c", mass=1.0, inertia=(1e-2, 1e-2, 1e-2), r=(1.0, -0.5, 0.0),
               axes=((0.0, -1.0, 0.0), (1.0, 0.0, 0.0)))  # fmt: skip
    b.spherical("ball", body_i="ground", body_j="a", point=(0.0, 0.0, 0.0))
    b.revolute("elbow", body_i="a", body_j="c", point=(1.0, 0.0, 0.0), axis=(0, 0, 1))
    b.add_d("rope", body_i="ground", s_bar_p_i=(1.0, -1.5, 0.0), body_j="c",
            s_bar_q_j=(0.5, 0.0, 0.0), f=0.25)  # fmt: skip
    b.add_d("copy", body_i="ground", s_bar_p_i=(1.0, -1.5, 0.0), body_j="c",
            s_bar_q_j=(0.5, 0.0, 0.0), f=0.25)  # fmt: skip
    return b.build()


def test_singular_structured_system_reported_like_dense():
    """Redundant loop closure kept in (``redundancy=None``: the rows are not analysed, as
    before jaxmbd dropped redundant rows): both solvers end the step with a singular-matrix
    status, and the error names the constraints at fault."""
    import dataclasses

    model = dataclasses.replace(_redundant_loop(), redundancy=None)
    status = {}
    for solver in ("dense", "structured"):
        sol = mbd.simulate(
            model, formulation="rA", t_end=0.004, h=1e-3, linear_solver=solver, throw=False
        )
        status[solver] = int(np.max(np.asarray(sol.status)))
        with pytest.raises(mbd.SolverError) as err:
            mbd.simulate(model, formulation="rA", t_end=0.004, h=1e-3, linear_solver=solver)
        assert "'rope'" in str(err.value) and "'copy'" in str(err.value)
    assert status["dense"] in (NONFINITE, ILL_CONDITIONED)
    assert status["structured"] in (NONFINITE, ILL_CONDITIONED)


def test_layout_of_a_tree_groups_joints_with_child_bodies():
    """A tree: one node per body (its joint to the parent inside), eliminated in
    O(log N) rounds; the engine's loop-closing piston pins are nodes of their own."""
    tree = layout_for(mbd.models.binary_tree(31), get_formulation("rA"), stabilised=False)
    assert tree.structure.num_nodes == 31 and tree.structure.b == 9
    assert tree.structure.num_rounds <= 8
    engine = layout_for(mbd.models.engine(4), get_formulation("rA"), stabilised=False)
    assert engine.structure.num_nodes == 9 + 4


@pytest.mark.parametrize(
    "formulation,integrator",
    [
        pytest.param("rA", "rkmk", marks=pytest.mark.slow),
        pytest.param("rp", "rk", marks=pytest.mark.slow),
    ],
)
def test_index1_kkt_structured_equals_dense(chain3, formulation, integrator):
    """The explicit integrators' index-1 KKT solves [[M, G^T], [G, 0]] (rp: with the
    normalisation rows in the body nodes) give the dense solves' trajectories."""
    sols = {
        s: mbd.simulate(
            chain3,
            formulation=formulation,
            integrator=integrator,
            t_end=0.004,
            h=1e-3,
            linear_solver=s,
        )  # fmt: skip
        for s in ("dense", "structured")
    }
    for field in ("r", "lam"):
        d, s = (
            np.asarray(getattr(sols["dense"], field)),
            np.asarray(getattr(sols["structured"], field)),
        )
        np.testing.assert_allclose(s, d, rtol=0, atol=1e-10 * np.abs(d).max())


# ---------------------------------------------------------------- kinematics (square G)
# 0-DOF mechanisms: the slider crank, the four link, and the engine (closed loops through
# the crankshaft, a driver on it)
SQUARE = {
    "slider_crank": mbd.models.slider_crank,
    "four_link": mbd.models.four_link,
    "engine": lambda: mbd.models.engine(3),
}


@pytest.mark.parametrize("name", sorted(SQUARE))
@pytest.mark.parametrize("formulation", ["rA", "rp", "re"])
def test_square_solve_of_the_embedding_equals_dense(name, formulation):
    """G x = b and G^T y = b for a square constraint Jacobian by block elimination of its
    saddle-point embedding [[I, G^T], [G, 0]] equal the dense LU solves to 1e-12 relative
    (a generic configuration: the engine's reference pose is re's chart singularity)."""
    from jaxmbd.linear.square import factor_square, layout_for_formulation

    model = SQUARE[name]()
    form = get_formulation(formulation)
    rng = np.random.default_rng(zlib.crc32(f"{name}{formulation}".encode()))
    q = (model.r0, form.coordinates(model.A0))
    tangent = jnp.asarray(0.3 * rng.normal(size=model.nb * form.tangent_size))
    layout = layout_for_formulation(model, form)

    @jax.jit  # one program, not op by op (~200 small compilations)
    def solves(tangent, b):
        G = form.velocity_terms(model, form.retract(q, tangent), 0.3)[0]
        solve, rcond = factor_square(layout, G)
        return G, solve(b), solve(b, transpose=True), rcond

    b = rng.normal(size=form.num_multipliers(model))
    G, x, xt, rcond = (np.asarray(a) for a in solves(tangent, jnp.asarray(b)))
    assert G.shape[0] == G.shape[1] == b.size
    assert float(rcond) > 1e-8
    assert _relative(x, np.linalg.solve(G, b)) < _bound(G)
    assert _relative(xt, np.linalg.solve(G.T, b)) < _bound(G)


@cache
def engine_kinematics(formulation, linear_solver):
    """The engine's kinematic analysis over 5 steps (shared: one compilation per run)."""
    return mbd.kinematics(SQUARE["engine"](), formulation=formulation, t_end=0.05, h=1e-2,
                          linear_solver=linear_solver)  # fmt: skip


# rp with -m slow: its square solves (normalisation rows in the body nodes) are checked by
# test_square_solve_of_the_embedding_equals_dense[rp-*], the structured kinematics loop by rA
@pytest.mark.slow  # the structured solver against dense: test_simulation_and_gradients_match_dense
@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow)])
def test_structured_kinematics_equals_dense(formulation):
    """Kinematic analysis of the engine (loops closed through the crankshaft) with the
    structured solves gives the dense run's positions, velocities, accelerations and
    inverse-dynamics multipliers."""
    sols = {s: engine_kinematics(formulation, s) for s in ("dense", "structured")}
    d, s = sols["dense"], sols["structured"]
    for field, tol in (("r", 1e-12), ("rdot", 1e-10), ("rddot", 1e-9), ("lam", 1e-9)):
        a, b = np.asarray(getattr(s, field)), np.asarray(getattr(d, field))
        assert np.max(np.abs(a - b)) <= tol * max(1.0, np.max(np.abs(b))), field
    # (the structured corrections run the generic Newton loop of a custom linear solve,
    # without the contraction estimate of the equilibrated dense one: at most one more
    # iteration to reach the same tolerance)
    extra = np.asarray(s.iterations) - np.asarray(d.iterations)
    assert np.all((extra >= 0) & (extra <= 1))


@pytest.mark.slow  # the singular report: test_singular_structured_system_reported_like_dense
def test_structured_kinematics_singular_jacobian_reported_like_dense():
    """A 0-DOF model whose sixth row is dependent (a DP1 row the revolute already implies):
    the structured kinematics ends with a singular-matrix status
    like the dense one, and raises a SolverError, never returns a silent NaN."""
    b = mbd.ModelBuilder("degenerate drive")
    b.add_body("a", mass=1.0, inertia=(1e-2, 1e-2, 1e-2), r=(0.5, 0.0, 0.0))
    b.revolute("pin", body_i="ground", body_j="a", point=(0.0, 0.0, 0.0), axis=(0, 0, 1))
    # x_ground . z_a = 0: implied by the revolute (z_a stays along z), a dependent row
    b.add_dp1("dup", body_i="ground", a_bar_i=(1.0, 0.0, 0.0), body_j="a", a_bar_j=(0.0, 0.0, 1.0))
    import dataclasses

    # rows not analysed (redundancy=None): the dependent row stays in, as before jaxmbd
    # dropped redundant rows, so the solvers meet the singular matrix themselves
    model = dataclasses.replace(b.build(), redundancy=None)
    for solver in ("dense", "structured"):
        sol = mbd.kinematics(model, t_end=0.02, h=1e-2, linear_solver=solver, throw=False)
        assert int(np.asarray(sol.status)[0]) in (NONFINITE, ILL_CONDITIONED), solver
        with pytest.raises(mbd.SolverError):
            mbd.kinematics(model, t_end=0.02, h=1e-2, linear_solver=solver)
    with pytest.raises(ValueError, match="linear_solver"):
        mbd.kinematics(model, t_end=0.02, h=1e-2, linear_solver="sparse")


@pytest.mark.parametrize("newton", [pytest.param("damped", marks=pytest.mark.slow), "reuse"])
def test_energy_momentum_structured_equals_dense(newton):
    """The director bodies' constrained energy-momentum scheme (Betsch & Leyendecker eq.
    10; unknowns q_{n+1} and the multipliers of the joint and internal rows) with its
    Newton systems solved on the body-joint graph gives the dense run's motion and
    multipliers, on a branched tree of director bodies; the null-space scheme refuses it."""
    model = MODELS["tree"]()

    def run(solver, **extra):
        return mbd.simulate(model, formulation="director", integrator="energy_momentum",
                            t_end=0.02, h=2e-3, newton=newton, linear_solver=solver,
                            **extra)  # fmt: skip

    d, s = run("dense"), run("structured")
    scale = np.max(np.abs(np.asarray(d.lam)))
    assert np.max(np.abs(np.asarray(s.r) - np.asarray(d.r))) <= ROUND_OFF  # (lengths of ~1 m)
    assert np.max(np.abs(np.asarray(s.A) - np.asarray(d.A))) <= ROUND_OFF
    assert np.max(np.abs(np.asarray(s.lam) - np.asarray(d.lam))) <= 1e-10 * scale
    with pytest.raises(ValueError, match="scheme='constrained'"):
        run("structured", scheme="null_space")


# -m slow: the chunked driver is one more compilation of the same structured step (the
# default suite runs that step in engine_kinematics' scan, and the chunked kinematics
# driver with the dense solves in test_save_every.py and test_cli.py)
@pytest.mark.slow
def test_structured_kinematics_chunked():
    """The structured kinematics gives the same run through the chunked driver
    (``progress=``)."""
    model = SQUARE["engine"]()
    options = dict(t_end=0.05, h=1e-2, linear_solver="structured")
    one = engine_kinematics("rA", "structured")
    chunked = mbd.kinematics(model, progress=lambda done, total: None, chunk_size=2, **options)
    # two programs (the chunked driver compiles its own): equal to round-off
    np.testing.assert_allclose(np.asarray(chunked.r), np.asarray(one.r), rtol=0, atol=1e-14)


@pytest.mark.slow  # test_batch.py batches kinematics; test_structured_kinematics_equals_dense
def test_structured_kinematics_batched():
    """The structured kinematics gives the same run as a member of ``kinematics_batch``
    (vmap of the block solves)."""
    import equinox as eqx

    model = SQUARE["engine"]()
    options = dict(t_end=0.05, h=1e-2, linear_solver="structured")
    one = engine_kinematics("rA", "structured")
    heavier = eqx.tree_at(lambda m: m.mass, model, model.mass * 1.1)
    batch = mbd.kinematics_batch(mbd.stack_models([model, heavier]), **options)
    np.testing.assert_allclose(np.asarray(batch.r)[0], np.asarray(one.r), rtol=0, atol=1e-14)
    lam = np.asarray(one.lam)
    np.testing.assert_allclose(
        np.asarray(batch.lam)[0], lam, rtol=0, atol=1e-12 * np.abs(lam).max()
    )
    # masses enter the inverse-dynamics multipliers only
    assert np.abs(np.asarray(batch.lam)[1] - lam).max() > 1e-3 * np.abs(lam).max()


@pytest.mark.parametrize("name", ["engine", "tree"])
def test_structured_consistent_start_equals_dense(name):
    """The consistent start by block elimination from the rA rows (positions projected along
    the normals, minimum-norm velocities, index-1 accelerations and multipliers; never a
    dense G) equals the dense one, from an inconsistent start (every pose, rate and spin
    perturbed), to round-off."""
    import equinox as eqx

    from jaxmbd.analysis.initial_state import consistent_initial_state
    from jaxmbd.lie import so3_exp

    model = MODELS[name]()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    nb = model.nb
    model = eqx.tree_at(
        lambda m: (m.r0, m.A0, m.rdot0, m.omega0),
        model,
        (
            model.r0 + 1e-2 * rng.normal(size=(nb, 3)),
            model.A0 @ so3_exp(jnp.asarray(1e-2 * rng.normal(size=(nb, 3)))),
            model.rdot0 + rng.normal(size=(nb, 3)),
            model.omega0 + rng.normal(size=(nb, 3)),
        ),
    )
    start = jax.jit(lambda m, s: consistent_initial_state(m, linear_solver=s), static_argnums=1)
    dense, structured = start(model, "dense"), start(model, "structured")
    assert float(structured[1].position) > 1e-3 and float(structured[1].velocity) > 0.1
    assert int(structured[2].status) == 0
    for a, b in zip(structured[0], dense[0], strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert np.max(np.abs(a - b)) <= ROUND_OFF * max(1.0, np.max(np.abs(b)))
