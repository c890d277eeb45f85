"""The tree-sparse L^T D L factorisation of the mass matrix (:mod:`jaxmbd.tree.mass_factor`):
its dof parents against MuJoCo's ``dof_parentid``, L^T D L against ``mj_fullM`` and its
solves against ``mj_solveM`` and numpy at random states of dm_control's robots, gradients
against central differences, ``vmap`` against a loop, and the joint formulation's
accelerations and runs against the dense Cholesky's (a loop closed by an MJCF connect; the
humanoid in the slow set)."""

import dataclasses
import os
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd import tree as T
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.run import model_tree
from jaxmbd.tree import mass_factor as MF

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")


def _random_qpos(m, rng):
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t in (2, 3):
            qpos[a] += 0.3 * rng.normal()
        else:
            k = a + (3 if t == 0 else 0)
            quat = rng.normal(size=4)
            qpos[k : k + 4] = quat / np.linalg.norm(quat)
    return qpos


def _robot(name):
    m = mujoco.MjModel.from_xml_path(os.path.join(SUITE, name + ".xml"))
    return m, mujoco.MjData(m), T.tree_from_mujoco(mujoco, m)


@pytest.fixture(scope="module")
def humanoid():
    return _robot("humanoid")


def _check_against_mujoco(m, d, built, states=2):
    assert MF.dof_parents(built.tree) == tuple(int(p) for p in m.dof_parentid)

    @jax.jit
    def factor_and_solve(M, b):
        ld = MF.ltdl_factor(built.tree, M)
        L, D = MF.ltdl_dense(built.tree, ld)
        return L, D, MF.ltdl_solve(built.tree, ld, b), MF.ltdl_solve(built.tree, ld, b[:, 0])

    rng = np.random.default_rng(3)
    for _ in range(states):
        d.qpos[:] = _random_qpos(m, rng)
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        b = rng.normal(size=(m.nv, 3))
        L, D, x, x1 = (np.asarray(v) for v in factor_and_solve(jnp.asarray(M), jnp.asarray(b)))
        assert np.all(D > 0) and np.all(np.diag(L) == 1.0) and np.all(np.triu(L, 1) == 0)
        np.testing.assert_allclose(
            L.T @ np.diag(D) @ L, M, rtol=0, atol=ROUND_OFF * np.abs(M).max()
        )
        reference = np.zeros((3, m.nv))
        mujoco.mj_solveM(m, d, reference, np.ascontiguousarray(b.T))
        scale = np.abs(reference).max()
        # both: a solve errs by up to cond eps; the -m slow robots reach 4.1e-14 and 1.8e-14
        # of the largest entry (the humanoid here: 5.5e-15 and 2.2e-15)
        np.testing.assert_allclose(x, reference.T, rtol=0, atol=2e-13 * scale)
        np.testing.assert_allclose(x, np.linalg.solve(M, b), rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(x1, x[:, 0], rtol=0, atol=ROUND_OFF * scale)


def test_humanoid_factor_and_solves_against_mujoco(humanoid):
    _check_against_mujoco(*humanoid)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quadruped", "humanoid_CMU", "dog"])
def test_large_robots_factor_and_solves_against_mujoco(name):
    _check_against_mujoco(*_robot(name), states=1)


@pytest.fixture(scope="module")
def branched():
    """The branched loop model's tree (6 dofs, the ball's three under a hinge) forced to
    L^T D L, with MuJoCo's mass matrices at two random states (same sparsity)."""
    m = mujoco.MjModel.from_xml_string(BRANCHED_LOOP)
    d = mujoco.MjData(m)
    tree = dataclasses.replace(T.tree_from_mujoco(mujoco, m).tree, mass_solver="ltdl")
    rng = np.random.default_rng(5)
    Ms = []
    for _ in range(3):
        d.qpos[:] = _random_qpos(m, rng)
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        Ms.append(M)
    return tree, jnp.asarray(np.stack(Ms)), jnp.asarray(rng.normal(size=(3, m.nv)))


def test_gradients_against_central_differences(branched):
    """d/ds of w . (M0 + s M1)^-1 b through the factorisation, reverse and forward mode,
    against central differences (2e-9 relative) and the dense Cholesky's derivative."""
    tree, Ms, bs = branched

    def f(s, solve):
        return jnp.dot(bs[1], solve(Ms[0] + s * Ms[1], bs[0]))

    def ltdl(M, b):
        return T.mass_solve(tree, M, b)

    @jax.jit
    def derivatives(s):
        reverse = jax.grad(f)(s, ltdl)
        forward = jax.jvp(lambda s: f(s, ltdl), (s,), (jnp.ones_like(s),))[1]
        return reverse, forward, jax.grad(f)(s, T.cholesky_solve)

    eps, s0 = 1e-5, jnp.asarray(0.3)
    central = (f(s0 + eps, ltdl) - f(s0 - eps, ltdl)) / (2 * eps)
    reverse, forward, dense = derivatives(s0)
    assert np.isfinite(float(reverse)) and abs(float(central)) > 1e-3
    np.testing.assert_allclose(float(reverse), float(central), rtol=2e-9)
    np.testing.assert_allclose(float(forward), float(reverse), rtol=5e-14)
    np.testing.assert_allclose(float(reverse), float(dense), rtol=3e-14)


def test_vmap_equals_the_loop(branched):
    tree, Ms, bs = branched

    def solve(M, b):
        return T.mass_solve(tree, M, b)

    batched = jax.jit(jax.vmap(solve))(Ms, bs)
    for k in range(3):
        want = solve(Ms[k], bs[k])
        np.testing.assert_allclose(batched[k], want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
        np.testing.assert_allclose(batched[k], np.linalg.solve(Ms[k], bs[k]), rtol=5e-14)


def _nested_hinges(n):
    body = ""
    for k in reversed(range(n)):
        body = (f'<body pos="0 0 -0.1"><joint name="j{k}" axis="0 1 0"/>'
                f'<geom size="0.02" mass="0.1"/>{body}</body>')  # fmt: skip
    xml = f"<mujoco><worldbody>{body}</worldbody></mujoco>"
    return T.tree_from_mujoco(mujoco, mujoco.MjModel.from_xml_string(xml)).tree


def test_the_choice(humanoid):
    """ "auto": dense up to the unrolled Cholesky's size, L^T D L beyond it, dense again on
    trees deeper than LTDL_MAX_DEPTH (measured, benchmarks/mass_factor.py)."""
    small = T.tree_from_mujoco(mujoco, mujoco.MjModel.from_xml_string(BRANCHED_LOOP)).tree
    assert not T.uses_ltdl(small)
    assert T.uses_ltdl(dataclasses.replace(small, mass_solver="ltdl"))
    assert T.uses_ltdl(humanoid[2].tree)
    assert not T.uses_ltdl(dataclasses.replace(humanoid[2].tree, mass_solver="dense"))
    assert T.uses_ltdl(_nested_hinges(MF.LTDL_MAX_DEPTH))
    assert not T.uses_ltdl(_nested_hinges(MF.LTDL_MAX_DEPTH + 1))
    with pytest.raises(mbd.errors.ModelError, match="mass_solver"):
        dataclasses.replace(small, mass_solver="sparse")


# a branched tree (a hinge carrying a hinge and a ball) whose hinge end is tied to a rocker
# by a connect: the loop's Schur complement solves M with several right-hand sides
BRANCHED_LOOP = """<mujoco model="branched loop">
  <option timestep="0.001"><flag contact="disable"/></option>
  <worldbody>
    <body name="crank">
      <joint name="crank" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="coupler" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.3" size="0.02" mass="0.7"/>
      </body>
      <body name="arm" pos="0.2 0 0">
        <joint name="arm" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.1 0.2 -0.2" size="0.02" mass="0.3"/>
      </body>
    </body>
    <body name="rocker" pos="0.5 0 0">
      <joint name="rocker" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0.3" size="0.02" mass="0.4"/>
    </body>
  </worldbody>
  <equality><connect name="close" body1="coupler" body2="rocker" anchor="0.4 0 0.3"/></equality>
  <keyframe><key qpos="0.3 0  1 0 0 0  0.4" qvel="1 0  0.5 -0.4 0.8  0"/></keyframe>
</mujoco>"""


def _with_solver(model, solver):
    return eqx.tree_at(lambda mo: mo.tree, model,
                       dataclasses.replace(model.tree, mass_solver=solver))  # fmt: skip


def _run(model, t_end, h, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        sol = mbd.simulate(model, formulation="joint", integrator="rkmk", t_end=t_end, h=h,
                           **options)  # fmt: skip
    return np.asarray(sol.qpos), np.asarray(sol.qvel)


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("ltdl") / "branched_loop.xml"
    path.write_text(BRANCHED_LOOP)
    model = mbd.load_model(path)
    assert model.tree is not None and model.tree.mass_solver == "auto"
    return model


@eqx.filter_jit
def _accelerations(model, tree, loops, qpos, qvel):
    acc = accelerations(model, tree, loops, qpos, qvel, 0.0)
    return acc.qacc, acc.lam


def test_loop_accelerations_with_ltdl_equal_the_dense_ones(loop_model):
    """qacc and the loop's multipliers (the Schur complement solves M with 1 + m right-hand
    sides) by L^T D L equal the dense Cholesky's to 7e-14 at random states."""
    rng = np.random.default_rng(11)
    m = mujoco.MjModel.from_xml_string(BRANCHED_LOOP)
    trees = [model_tree(_with_solver(loop_model, s))[0] for s in ("dense", "ltdl")]
    _, loops = model_tree(loop_model)
    assert loops is not None and loops.size > 0
    for _ in range(2):
        qpos = jnp.asarray(_random_qpos(m, rng))
        qvel = jnp.asarray(rng.normal(size=m.nv))
        a, b = (_accelerations(loop_model, tr, loops, qpos, qvel) for tr in trees)
        assert np.abs(np.asarray(a[1])).max() > 1e-3
        for x, y in zip(b, a, strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=7e-14 * np.abs(y).max())


@pytest.mark.slow
def test_a_run_with_ltdl_equals_the_dense_run(loop_model):
    """The loop model with every solve by L^T D L equals the dense Cholesky's run (1e-10)."""
    dense = _run(_with_solver(loop_model, "dense"), 0.3, 1e-3)
    ltdl = _run(_with_solver(loop_model, "ltdl"), 0.3, 1e-3)
    assert np.ptp(dense[0]) > 1e-2  # it moved
    np.testing.assert_allclose(ltdl[0], dense[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(ltdl[1], dense[1], rtol=0, atol=1e-10)


@pytest.mark.slow
def test_humanoid_run_with_ltdl_equals_the_dense_run():
    """dm_control's humanoid (contact off), 50 steps of RK4 at its step."""
    model = mbd.load_model(os.path.join(SUITE, "humanoid.xml"))
    dense = _run(_with_solver(model, "dense"), 0.05, 0.001, contact="none", limits="none")
    ltdl = _run(_with_solver(model, "ltdl"), 0.05, 0.001, contact="none", limits="none")
    assert T.uses_ltdl(model.tree)  # what the humanoid gets by default
    np.testing.assert_allclose(ltdl[0], dense[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(ltdl[1], dense[1], rtol=0, atol=1e-10)


def _primitive_names(jaxpr, names=None):
    names = set() if names is None else names
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            _primitive_names(sub, names)
    return names


@pytest.mark.parametrize("solver", ["ltdl", "dense"])
def test_reverse_mode_is_a_solve_not_a_transposed_factorisation(branched, solver, monkeypatch):
    """Reverse mode through ``mass_solve``: the cotangents of b and M (L^T D L: one more
    solve with the factor, M symmetric; dense: the elementwise Cholesky's) hold no
    scatter (XLA's CPU backend would then run a gradient's time loop op by op) and equal
    the transposed factorisation's (``JAXMBD_HOIST_GRADIENT_LOOPS=0``, the plain program)
    to round-off, and numpy's (M^-1 w, -(M^-1 w) x^T)."""
    import jax.extend  # noqa: F401  (jaxprs_in_params)

    from jaxmbd.compiled import xla_flags as _xla_flags

    tree = dataclasses.replace(branched[0], mass_solver=solver)
    Ms, bs = branched[1], branched[2]

    def f(M, b):
        return jnp.dot(bs[1], T.mass_solve(tree, M, b))

    def gradients():
        jax.clear_caches()  # the mode is read at trace time
        jaxpr = jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(Ms[0], bs[0]).jaxpr
        return _primitive_names(jaxpr), jax.jit(jax.grad(f, argnums=(0, 1)))(Ms[0], bs[0])

    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS, raising=False)
    names, (dM, db) = gradients()
    assert not {"scatter", "scatter-add"} & names
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "0")
    names0, (dM0, db0) = gradients()
    if solver == "ltdl":
        assert "scatter-add" in names0  # what the plain program's gathers transpose to
    M, b, w = (np.asarray(a) for a in (Ms[0], bs[0], bs[1]))
    y, x = np.linalg.solve(M, w), np.linalg.solve(M, b)
    np.testing.assert_allclose(db, y, rtol=5e-14)
    np.testing.assert_allclose(db, db0, rtol=ROUND_OFF)

    # the plain program's dM is the derivative along the entries its factorisation reads
    # (L^T D L: the tree's pattern, a dof and its ancestors; dense: the lower triangle);
    # the solve's is the full -y x^T: along perturbations of M's form (symmetric, zero off
    # the pattern) they are the same
    read = np.tril(np.ones_like(M, dtype=bool))
    if solver == "ltdl":
        sch = MF.schedule(MF.dof_parents(tree))
        read = np.zeros_like(read)
        read[sch.entry_row, sch.entry_col] = True

    def lower(A):
        A = np.asarray(A)
        return np.where(read, np.tril(A + A.T) - np.diag(np.diag(A)), 0.0)

    np.testing.assert_allclose(lower(dM), lower(-np.outer(y, x)), rtol=1e-12, atol=1e-14)
    want = lower(dM0)
    np.testing.assert_allclose(lower(dM), want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    if solver == "ltdl":  # the solve's derivative: the full product
        want = -np.outer(y, x)
        np.testing.assert_allclose(dM, want, rtol=0, atol=3e-14 * np.abs(want).max())


@pytest.mark.parametrize("n", [9, 27])
def test_elementwise_cholesky_equals_lapack(n):
    """The elementwise Cholesky factor (unrolled up to UNROLLED_CHOLESKY_MAX, a column loop
    above it) and its solve equal LAPACK's, jitted as in a step."""
    from jaxmbd.tree._elementwise import (
        UNROLLED_CHOLESKY_MAX,
        cholesky_factor,
        cholesky_factor_solve,
    )

    rng = np.random.default_rng(n)
    A = rng.normal(size=(n, n))
    M = jnp.asarray(A @ A.T + n * np.eye(n))
    b = jnp.asarray(rng.normal(size=(n, 2)))
    assert (n > UNROLLED_CHOLESKY_MAX) == (n == 27)
    L = jax.jit(cholesky_factor)(M)
    L = np.array([[0.0 if x is None else float(x) for x in row] for row in L]) if isinstance(
        L, list) else np.asarray(L)  # fmt: skip
    want = np.linalg.cholesky(np.asarray(M))
    np.testing.assert_allclose(L, want, rtol=0, atol=1e-14 * np.abs(want).max())
    x = jax.jit(lambda M, b: cholesky_factor_solve(cholesky_factor(M), b))(M, b)
    np.testing.assert_allclose(x, np.linalg.solve(np.asarray(M), np.asarray(b)), rtol=1e-13)
