"""MuJoCo's primal constraint solver in JAX (jaxmbd.soft_constraints.solver) against MuJoCo C.

Each MuJoCo case puts a model in a state with active constraints (random controls for a few
hundred steps), runs ``mj_forward`` with dense Jacobians and islands off, feeds MuJoCo's
``M``, ``qacc_smooth``, ``efc_*`` rows and contacts, and ``qacc_warmstart`` to
:func:`solve`, and requires MuJoCo's ``qacc``, ``efc_force``, ``efc_state`` and
``solver_niter``: at the file's own settings and with ``opt.tolerance`` = 1e-12 in both.

Every problem is padded to one size (dofs with identity inertia, inactive rows with random
Jacobians and zero regularisers, inactive cone slots with mu = 0) and its rows are shuffled,
so one compiled program per method serves the whole file and every comparison also checks
that inactive rows are ignored and that the row order is free.
"""

from __future__ import annotations

import os
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

from jaxmbd.soft_constraints import problem as sp  # noqa: E402
from jaxmbd.soft_constraints.solver import (  # noqa: E402
    MAX_ITERATIONS,
    SOLVED,
    solve,
)

NV, NEFC, NCONE = 30, 64, 10  # the padded sizes of every problem in this file

TIGHT = dict(tolerance=1e-12, iterations=200)

CONES_XML = """
<mujoco>
  <option timestep="0.002" impratio="5" cone="elliptic"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" friction="0.8 0.02 0.001"/>
    <body pos="0 0 0.059"><freejoint/>
      <geom type="box" size=".1 .08 .06" condim="6" friction="0.7 0.03 0.002"/></body>
    <body pos="0.5 0 0.079"><freejoint/>
      <geom type="sphere" size=".08" condim="4" friction="0.6 0.05 0.001"/></body>
    <body pos="-0.5 0 0.049"><freejoint/>
      <geom type="capsule" size=".05 .1" euler="0 90 0" condim="3"/></body>
  </worldbody>
</mujoco>
"""

FRICTIONLOSS_XML = """
<mujoco>
  <worldbody>
    <body pos="0 0 1">
      <joint name="j0" axis="0 1 0" frictionloss="0.5" limited="true" range="-40 40"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <site name="s0" pos="0.1 0 0.05"/>
      <body pos="0.4 0 0">
        <joint name="j1" axis="0 1 0" frictionloss="2" limited="true" range="-30 60"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
        <site name="s1" pos="0.3 0 0.05"/>
        <body pos="0.4 0 0">
          <joint name="j2" axis="0 0 1" frictionloss="0.05"/>
          <joint name="j3" type="slide" axis="1 0 0" frictionloss="1" limited="true"
                 range="-0.1 0.1"/>
          <geom type="box" size="0.05 0.05 0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial frictionloss="0.3" limited="true" range="0 0.45">
      <site site="s0"/><site site="s1"/>
    </spatial>
  </tendon>
  <actuator>
    <motor joint="j0" gear="5"/><motor joint="j1" gear="3"/>
    <motor joint="j2" gear="1"/><motor joint="j3" gear="5"/>
  </actuator>
</mujoco>
"""

EQUALITY_XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <body name="l1" pos="0 0 1">
      <joint axis="0 1 0" name="h1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
      <body name="l2" pos="0.5 0 0">
        <joint axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>
      </body>
    </body>
    <body name="l3" pos="0.8 0 1">
      <joint axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 -0.3 0 -0.5" size="0.03"/>
    </body>
    <body name="box" pos="0 0.5 0.3">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1"/>
    </body>
    <body pos="0.4 0.6 0.6">
      <joint name="sl" type="slide" axis="0 0 1"/>
      <joint name="hs" axis="1 0 0"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="l2" body2="l3" anchor="0 0 -0.5"/>
    <weld body1="box" solref="0.05 1"/>
    <joint joint1="sl" joint2="hs" polycoef="0 0.5 0 0 0"/>
  </equality>
  <actuator><motor joint="h1" gear="10"/><motor joint="hs" gear="1"/></actuator>
</mujoco>
"""


def _suite(name: str) -> str:
    import dm_control

    return os.path.join(os.path.dirname(dm_control.__file__), "suite", name)


def _ant() -> str:
    import gymnasium

    return os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/ant.xml")


# ------------------------------------------------------------------ problems from MuJoCo


def _kind(efc_type) -> np.ndarray:
    return np.asarray(sp.kind_from_efc_type(np.asarray(efc_type)))


def _mujoco_state(source, *, steps, cone=None, seed=0, sliding=False):
    """A model (dense Jacobian, islands off) run ``steps`` steps with random controls."""
    if source.lstrip().startswith("<"):
        m = mujoco.MjModel.from_xml_string(source)
    else:
        m = mujoco.MjModel.from_xml_path(source)
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ISLAND
    if cone is not None:
        m.opt.cone = cone
    d = mujoco.MjData(m)
    if sliding:  # the free bodies of CONES_XML slide and spin on the floor
        d.qvel[[0, 5, 7, 9, 12]] = [1.0, 3.0, -0.8, 2.0, 0.5]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_step(m, d)
    return m, d


def _problem(m, d):
    """(M, a0, a_warm, rows) of mjData after mj_forward, unpadded (numpy)."""
    nv, nefc = m.nv, d.nefc
    M = np.zeros((nv, nv))
    mujoco.mj_fullM(m, d, M)
    cone_rows, mu, friction = [], [], []
    for i in range(d.ncon):
        adr, dim = d.contact.efc_address[i], d.contact.dim[i]
        if adr >= 0 and d.efc_type[adr] == mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC:
            cone_rows.append(np.r_[adr + np.arange(dim), -np.ones(6 - dim)])
            mu.append(d.contact.mu[i])
            friction.append(np.array(d.contact.friction[i]))
    rows = dict(
        J=np.array(d.efc_J).reshape(nefc, nv),
        aref=d.efc_aref.copy(),
        R=d.efc_R.copy(),
        floss=d.efc_frictionloss.copy(),
        active=np.ones(nefc, bool),
        kind=_kind(d.efc_type),
        cone_rows=np.array(cone_rows, np.int32).reshape(-1, 6),
        cone_mu=np.array(mu, float).reshape(-1),
        cone_friction=np.array(friction, float).reshape(-1, 5),
    )
    return M, d.qacc_smooth.copy(), d.qacc_warmstart.copy(), rows


def _pad(M, a0, a_warm, rows, *, seed=0):
    """Pad to (NV, NEFC, NCONE) with decoupled dofs, inactive rows and cones; shuffle rows.

    Returns the padded problem and ``order``: padded row ``order[i]`` is row ``i``."""
    rng = np.random.default_rng(seed)
    nv, nefc, ncone = M.shape[0], rows["J"].shape[0], rows["cone_rows"].shape[0]
    assert nv <= NV and nefc <= NEFC - 6 and ncone <= NCONE - 1, (nv, nefc, ncone)
    Mp = np.eye(NV)
    Mp[:nv, :nv] = M
    pad = NEFC - nefc
    J = np.zeros((NEFC, NV))
    J[:nefc, :nv] = rows["J"]
    J[nefc:] = rng.normal(size=(pad, NV))  # inactive rows: must be ignored
    cat = np.concatenate
    R = cat([rows["R"], np.zeros(pad)])  # inactive R = 0: no division by it
    aref = cat([rows["aref"], rng.normal(size=pad)])
    floss = cat([rows["floss"], rng.uniform(0, 1, pad)])
    active = cat([rows["active"], np.zeros(pad, bool)])
    kind = cat([rows["kind"], rng.integers(0, 3, pad)])
    kind[-6:] = sp.ELLIPTIC  # an inactive 6-dim cone in the last padded rows
    cone_rows = np.full((NCONE, 6), -1)
    cone_rows[:ncone] = rows["cone_rows"]
    cone_rows[ncone] = np.arange(NEFC - 6, NEFC)
    cone_mu = np.zeros(NCONE)  # inactive mu = 0
    cone_mu[:ncone] = rows["cone_mu"]
    cone_friction = np.zeros((NCONE, 5))
    cone_friction[:ncone] = rows["cone_friction"]
    # shuffle the rows: row i of the original goes to position where[i]
    perm = rng.permutation(NEFC)  # padded row k holds original row perm[k]
    where = np.argsort(perm)
    cone_rows = np.where(cone_rows >= 0, where[np.maximum(cone_rows, 0)], -1)
    padded = sp.SoftRows(
        J=jnp.asarray(J[perm]),
        aref=jnp.asarray(aref[perm]),
        R=jnp.asarray(R[perm]),
        floss=jnp.asarray(floss[perm]),
        active=jnp.asarray(active[perm]),
        kind=jnp.asarray(kind[perm], jnp.int32),
        cone_rows=jnp.asarray(cone_rows, jnp.int32),
        cone_mu=jnp.asarray(cone_mu),
        cone_friction=jnp.asarray(cone_friction),
    )
    a0p = np.zeros(NV)
    a0p[:nv] = a0
    awp = np.zeros(NV)
    awp[:nv] = a_warm
    return jnp.asarray(Mp), jnp.asarray(a0p), jnp.asarray(awp), padded, where[:nefc]


_SOLVE = jax.jit(solve, static_argnames=("method",))


def _solve_padded(
    M, a0, a_warm, rows, *, method, scale, iterations, tolerance, ls_iterations, ls_tolerance,
    warmstart=True,
):  # fmt: skip
    """The file's one program per method: every option traced, with fixed dtypes."""
    return _SOLVE(
        M, a0, rows, a_warm, method=method, scale=jnp.asarray(scale, jnp.float64),
        iterations=jnp.asarray(iterations, jnp.int32),
        tolerance=jnp.asarray(tolerance, jnp.float64),
        ls_iterations=jnp.asarray(ls_iterations, jnp.int32),
        ls_tolerance=jnp.asarray(ls_tolerance, jnp.float64),
        warmstart=jnp.asarray(warmstart, bool),
    )  # fmt: skip


def _options(m):
    return dict(
        iterations=m.opt.iterations,
        tolerance=m.opt.tolerance,
        ls_iterations=m.opt.ls_iterations,
        ls_tolerance=m.opt.ls_tolerance,
    )


def _relative(ours, theirs):
    return np.max(np.abs(np.asarray(ours) - theirs)) / max(np.max(np.abs(theirs)), 1e-300)


def _compare(m, d, method, *, tight, expect_iterations, accuracy, force_accuracy):
    M, a0, a_warm, rows = _problem(m, d)
    nv = m.nv
    Mp, a0p, awp, rp, where = _pad(M, a0, a_warm, rows)
    sol = _solve_padded(Mp, a0p, awp, rp, method=method, scale=1 / np.trace(M), **_options(m))
    qacc = np.asarray(sol.qacc)
    assert np.all(qacc[nv:] == 0)  # the padded dofs stay decoupled
    assert int(sol.status) == SOLVED
    assert _relative(qacc[:nv], d.qacc) < accuracy, (tight, _relative(qacc[:nv], d.qacc))
    force = np.asarray(sol.efc_force)[where]
    assert _relative(force, d.efc_force) < force_accuracy, (tight, _relative(force, d.efc_force))
    np.testing.assert_array_equal(np.asarray(sol.efc_state)[where], d.efc_state)
    inactive = np.ones(NEFC, bool)
    inactive[where] = False
    assert np.all(np.asarray(sol.efc_force)[inactive] == 0)
    if expect_iterations:
        assert int(sol.iterations) == d.solver_niter[0], (int(sol.iterations), d.solver_niter[0])
    return sol


def _check_against_mujoco(m, d, *, min_rows=1):
    """At the file's settings (same iterations) and at tolerance 1e-12 (5e-10 relative)."""
    method = "cg" if m.opt.solver == mujoco.mjtSolver.mjSOL_CG else "newton"
    mujoco.mj_forward(m, d)
    assert d.nefc >= min_rows
    _compare(
        m, d, method, tight=False, expect_iterations=True, accuracy=1e-9, force_accuracy=2e-10
    )  # qacc 1.1e-10, forces 3.7e-11
    m.opt.tolerance, m.opt.iterations = TIGHT["tolerance"], TIGHT["iterations"]
    mujoco.mj_forward(m, d)
    _compare(
        m, d, method, tight=True, expect_iterations=False, accuracy=5e-10, force_accuracy=2e-10
    )
    return d


NEWTON, CG = mujoco.mjtSolver.mjSOL_NEWTON, mujoco.mjtSolver.mjSOL_CG
ELLIPTIC, PYRAMIDAL = mujoco.mjtCone.mjCONE_ELLIPTIC, mujoco.mjtCone.mjCONE_PYRAMIDAL


@pytest.mark.parametrize(
    "name, steps, solver",
    [("hopper.xml", 300, NEWTON), ("cheetah.xml", 400, CG), ("humanoid.xml", 400, NEWTON),
     ("humanoid.xml", 100, CG)],
)  # fmt: skip
def test_pyramidal_contacts_and_limits_match_mujoco(name, steps, solver):
    m, d = _mujoco_state(_suite(name), steps=steps, cone=PYRAMIDAL)
    m.opt.solver = solver
    d = _check_against_mujoco(m, d, min_rows=4)
    assert mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL in d.efc_type


@pytest.mark.parametrize(
    "source, steps, solver",
    [("humanoid", 100, NEWTON), ("humanoid", 400, CG), ("ant", 400, NEWTON), ("ant", 400, CG)],
)
def test_elliptic_cones_of_robots_match_mujoco(source, steps, solver):
    path = _suite("humanoid.xml") if source == "humanoid" else _ant()
    m, d = _mujoco_state(path, steps=steps, cone=ELLIPTIC)
    m.opt.solver = solver
    d = _check_against_mujoco(m, d, min_rows=3)
    assert mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC in d.efc_type


@pytest.mark.parametrize("solver", [NEWTON, CG])
def test_sliding_cones_of_dim_3_4_6_match_mujoco(solver):
    """Box (condim 6), sphere (4), capsule (3) sliding and spinning, impratio = 5."""
    m, d = _mujoco_state(CONES_XML, steps=30, sliding=True)
    m.opt.solver = solver
    d = _check_against_mujoco(m, d)
    assert sorted(set(d.contact.dim[: d.ncon])) == [3, 4, 6]
    assert sp.CONE in d.efc_state and sp.QUADRATIC in d.efc_state  # middle and bottom zones


def test_pyramidal_cones_of_dim_4_6_match_mujoco():
    m, d = _mujoco_state(CONES_XML, steps=30, sliding=True, cone=PYRAMIDAL)
    d = _check_against_mujoco(m, d)
    assert sorted(set(d.contact.dim[: d.ncon])) == [3, 4, 6]


@pytest.mark.parametrize("solver", [NEWTON, CG])
def test_friction_loss_and_limits_match_mujoco(solver):
    m, d = _mujoco_state(FRICTIONLOSS_XML, steps=200)
    m.opt.solver = solver
    d = _check_against_mujoco(m, d)
    states = set(d.efc_state[_kind(d.efc_type) == sp.FRICTION_LOSS])
    assert {sp.LINEAR_NEG, sp.LINEAR_POS, sp.QUADRATIC} <= states  # all three zones
    assert mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON in d.efc_type
    assert mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT in d.efc_type


@pytest.mark.parametrize("solver", [NEWTON, CG])
def test_equality_rows_match_mujoco(solver):
    """connect, weld and joint equalities, with contact."""
    m, d = _mujoco_state(EQUALITY_XML, steps=200)
    m.opt.solver = solver
    d = _check_against_mujoco(m, d)
    assert np.sum(d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) == 10


def test_options_status_and_inactive_rows():
    m, d = _mujoco_state(FRICTIONLOSS_XML, steps=200)
    mujoco.mj_forward(m, d)
    M, a0, a_warm, rows = _problem(m, d)
    Mp, a0p, awp, rp, _ = _pad(M, a0, a_warm, rows)
    scale = 1 / np.trace(M)
    # one iteration from a cold start cannot meet tolerance 0
    cold = _solve_padded(
        Mp, a0p, a0p, rp, method="newton", scale=scale, iterations=1, tolerance=0.0,
        ls_iterations=50, ls_tolerance=0.01, warmstart=False,
    )  # fmt: skip
    assert int(cold.status) == MAX_ITERATIONS and int(cold.iterations) == 1
    assert not bool(cold.warmstart_used)
    # no active row: qacc = a0 at once
    none = eqx.tree_at(lambda r: r.active, rp, jnp.zeros(NEFC, bool))
    free = _solve_padded(
        Mp, a0p, awp, none, method="newton", scale=scale, iterations=100, tolerance=1e-8,
        ls_iterations=50, ls_tolerance=0.01, warmstart=True,
    )  # fmt: skip
    assert int(free.iterations) == 0 and int(free.status) == SOLVED
    np.testing.assert_array_equal(np.asarray(free.qacc), np.asarray(a0p))
    assert np.all(np.asarray(free.efc_force) == 0)


# ------------------------------------------------------------------ implicit derivatives

_CONVERGED = dict(iterations=100, tolerance=1e-15, ls_iterations=50, ls_tolerance=0.01)


def _theta(M, a0, rows):
    return (M, a0, rows.J, rows.aref, rows.R, rows.floss, rows.cone_mu, rows.cone_friction)


def _rebuild(theta, rows):
    M, a0, J, aref, R, floss, mu, friction = theta
    rows = sp.SoftRows(
        J=J, aref=aref, R=R, floss=floss, active=rows.active, kind=rows.kind,
        cone_rows=rows.cone_rows, cone_mu=mu, cone_friction=friction,
    )  # fmt: skip
    return M, a0, rows


def _outputs(theta, rows, a_warm, scale, method="newton"):
    M, a0, rows = _rebuild(theta, rows)
    sol = solve(M, a0, rows, a_warm, method=method, scale=scale, **_CONVERGED)
    return sol.qacc, sol.efc_force


@jax.jit
def _jvp(theta, dtheta, rows, a_warm, scale):
    return jax.jvp(lambda t: _outputs(t, rows, a_warm, scale), (theta,), (dtheta,))


@jax.jit
def _grad(theta, rows, a_warm, scale, w_qacc, w_force):
    def loss(t):
        qacc, force = _outputs(t, rows, a_warm, scale)
        return jnp.dot(w_qacc, qacc) + jnp.dot(w_force, force)

    return jax.grad(loss)(theta)


def _converged_solve(theta, rows, a_warm, scale):
    M, a0, rows = _rebuild(theta, rows)
    return _solve_padded(M, a0, a_warm, rows, method="newton", scale=scale, **_CONVERGED)


def _directions(theta, rows, rng, nv):
    """Random directions, relative to each entry's size, only on the real entries."""
    M, a0, J, aref, R, floss, mu, friction = (np.asarray(t) for t in theta)
    active = np.asarray(rows.active)
    used = np.arange(NV) < nv
    dM = rng.normal(size=M.shape) * np.abs(M) * (used[:, None] & used)
    dM = 0.5 * (dM + dM.T)
    groups = {
        "M": dM,
        "a0": rng.normal(size=a0.shape) * np.abs(a0) * used,
        "J": rng.normal(size=J.shape) * np.abs(J) * active[:, None],
        "aref": rng.normal(size=aref.shape) * np.abs(aref) * active,
        "R": rng.normal(size=R.shape) * R * active,
        "floss": rng.normal(size=floss.shape) * floss * active,
        "mu": rng.normal(size=mu.shape) * mu,
        "friction": rng.normal(size=friction.shape) * friction,
    }
    names = list(groups)
    out = {}
    for name in names:
        out[name] = tuple(
            jnp.asarray(groups[n] if n == name else np.zeros_like(groups[n])) for n in names
        )
    out["all"] = tuple(jnp.asarray(groups[n]) for n in names)
    return out


def _padded_problem(source, **state):
    m, d = _mujoco_state(source, **state)
    mujoco.mj_forward(m, d)
    M, a0, a_warm, rows = _problem(m, d)
    Mp, a0p, awp, rp, _ = _pad(M, a0, a_warm, rows)
    return _theta(Mp, a0p, rp), rp, awp, 1 / np.trace(M), m.nv


@pytest.mark.parametrize(
    "case",
    ["cones", "friction_loss", "equality"],
)
def test_implicit_jvp_matches_central_differences(case):
    source, state = {
        "cones": (CONES_XML, dict(steps=30, sliding=True)),
        "friction_loss": (FRICTIONLOSS_XML, dict(steps=200)),
        "equality": (EQUALITY_XML, dict(steps=200)),
    }[case]
    theta, rows, a_warm, scale, nv = _padded_problem(source, **state)
    base = _converged_solve(theta, rows, a_warm, scale)
    assert int(base.status) in (SOLVED, 2)
    a_warm = base.qacc  # warm starts carry no derivative; this one speeds up the differences
    rng = np.random.default_rng(1)
    for name, dtheta in _directions(theta, rows, rng, nv).items():
        if not any(float(jnp.max(jnp.abs(x))) > 0 for x in dtheta):
            continue  # e.g. no friction loss in this model
        (qacc, force), (dqacc, dforce) = _jvp(theta, dtheta, rows, a_warm, scale)
        assert np.all(np.isfinite(dqacc)) and np.all(np.isfinite(dforce))
        differences = []
        for eps in (1e-5, 1e-6):
            plus = _converged_solve(
                tuple(t + eps * dt for t, dt in zip(theta, dtheta, strict=True)),
                rows, a_warm, scale,
            )  # fmt: skip
            minus = _converged_solve(
                tuple(t - eps * dt for t, dt in zip(theta, dtheta, strict=True)),
                rows, a_warm, scale,
            )  # fmt: skip
            assert np.array_equal(plus.efc_state, minus.efc_state)  # no state switch
            differences.append(
                np.concatenate([plus.qacc - minus.qacc, plus.efc_force - minus.efc_force])
                / (2 * eps)
            )
        implicit = np.concatenate([dqacc, dforce])
        size = np.max(np.abs(implicit))
        assert size > 0, name
        assert np.max(np.abs(differences[0] - differences[1])) < 1e-6 * size, name
        assert np.max(np.abs(implicit - differences[1])) < 1e-6 * size, (
            name,
            np.max(np.abs(implicit - differences[1])) / size,
        )


def test_reverse_mode_is_the_transpose_of_the_jvp():
    theta, rows, a_warm, scale, nv = _padded_problem(CONES_XML, steps=30, sliding=True)
    rng = np.random.default_rng(2)
    w_qacc, w_force = jnp.asarray(rng.normal(size=NV)), jnp.asarray(rng.normal(size=NEFC))
    gradient = _grad(theta, rows, a_warm, scale, w_qacc, w_force)
    dtheta = _directions(theta, rows, rng, nv)["all"]
    _, (dqacc, dforce) = _jvp(theta, dtheta, rows, a_warm, scale)
    forward = jnp.dot(w_qacc, dqacc) + jnp.dot(w_force, dforce)
    reverse = sum(jnp.vdot(g, dt) for g, dt in zip(gradient, dtheta, strict=True))
    assert abs(float(forward - reverse)) < ROUND_OFF * abs(float(forward))


def _switching_problem():
    """Rows exactly at their switching points at the optimum (M = I, rows on single dofs).

    Dof 0-2: an elliptic cone in the bottom zone with zero tangential slip (T = 0, N < 0);
    dof 3: a one-sided row with jar = 0 exactly; dof 4: friction loss with jar = R floss
    exactly; dofs 5-7: an elliptic cone at its tip (jar = 0). The warm start is the exact
    optimum, so the solver certifies it and no rounding moves a row off its switch."""
    a0 = np.zeros(NV)
    a0[:8] = [-1.0, 0.0, 0.0, 0.25, 3.0, 0.0, 0.0, 0.0]
    optimum = a0.copy()
    optimum[0] = -0.5  # quadratic normal with R = 1: jar = a0 / (1 + D)
    optimum[4] = 1.0  # friction loss f = 2, R = 0.5: a = a0 - f, jar = 1 = R f
    J = np.zeros((NEFC, NV))
    for row, dof in enumerate(range(8)):
        J[row, dof] = 1.0
    aref = np.zeros(NEFC)
    aref[3] = 0.25
    R = np.zeros(NEFC)
    R[:8] = [1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0]
    floss = np.zeros(NEFC)
    floss[4] = 2.0
    active = np.zeros(NEFC, bool)
    active[:8] = True
    kind = np.full(NEFC, sp.ONE_SIDED)
    kind[[0, 1, 2, 5, 6, 7]] = sp.ELLIPTIC
    kind[4] = sp.FRICTION_LOSS
    cone_rows = np.full((NCONE, 6), -1)
    cone_rows[0, :3] = [0, 1, 2]
    cone_rows[1, :3] = [5, 6, 7]
    mu = np.zeros(NCONE)
    mu[:2] = 0.5
    friction = np.zeros((NCONE, 5))
    friction[:2] = [1.0, 1.0, 0.01, 0.001, 0.001]
    rows = sp.SoftRows(
        J=jnp.asarray(J), aref=jnp.asarray(aref), R=jnp.asarray(R), floss=jnp.asarray(floss),
        active=jnp.asarray(active), kind=jnp.asarray(kind, jnp.int32),
        cone_rows=jnp.asarray(cone_rows, jnp.int32), cone_mu=jnp.asarray(mu),
        cone_friction=jnp.asarray(friction),
    )  # fmt: skip
    return _theta(jnp.eye(NV), jnp.asarray(a0), rows), rows, jnp.asarray(optimum)


def test_derivatives_are_finite_at_switching_points():
    theta, rows, optimum = _switching_problem()
    sol = _converged_solve(theta, rows, optimum, 1 / NV)
    assert int(sol.iterations) == 0
    np.testing.assert_array_equal(np.asarray(sol.qacc), np.asarray(optimum))
    states = np.asarray(sol.efc_state)[:8]
    assert list(states) == [sp.QUADRATIC] * 3 + [sp.SATISFIED, sp.LINEAR_POS] + [sp.SATISFIED] * 3
    rng = np.random.default_rng(3)
    w_qacc, w_force = jnp.asarray(rng.normal(size=NV)), jnp.asarray(rng.normal(size=NEFC))
    gradient = _grad(theta, rows, optimum, 1 / NV, w_qacc, w_force)
    assert all(np.all(np.isfinite(g)) for g in gradient)
    dtheta = tuple(jnp.asarray(rng.normal(size=t.shape)) for t in theta)
    _, (dqacc, dforce) = _jvp(theta, dtheta, rows, optimum, 1 / NV)
    assert np.all(np.isfinite(dqacc)) and np.all(np.isfinite(dforce))
    # decoupled dofs: d qacc / d a0 = 1/(1 + D) on the quadratic (bottom-zone) cone, else 1
    d_a0 = tuple(jnp.zeros_like(t) if i != 1 else jnp.ones(NV) for i, t in enumerate(theta))
    _, (dqacc, _) = _jvp(theta, d_a0, rows, optimum, 1 / NV)
    np.testing.assert_allclose(
        np.asarray(dqacc)[:8], [0.5, 0.5, 0.5, 1, 1, 1, 1, 1], rtol=ROUND_OFF
    )


@partial(jax.jit, static_argnames=("method",))
def _batched(M, a0, rows, a_warm, scale, *, method):
    return jax.vmap(
        lambda M, a0, rows, a_warm, scale: solve(
            M, a0, rows, a_warm, method=method, scale=scale, **_CONVERGED
        )
    )(M, a0, rows, a_warm, scale)


def test_vmap_over_problems_with_different_rows():
    problems = [
        _padded_problem(FRICTIONLOSS_XML, steps=200),
        _padded_problem(CONES_XML, steps=30, sliding=True),
    ]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *[(_rebuild(p[0], p[1]), p[2], p[3])
                                                      for p in problems])  # fmt: skip
    (M, a0, rows), a_warm, scale = stacked
    batch = _batched(M, a0, rows, a_warm, scale, method="newton")
    for i, (theta, rows_i, a_warm_i, scale_i, _) in enumerate(problems):
        single = _converged_solve(theta, rows_i, a_warm_i, scale_i)
        np.testing.assert_allclose(batch.qacc[i], single.qacc, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(batch.efc_state[i], single.efc_state)


def test_active_rows_capacity_gives_the_solve_on_all_rows():
    """``capacity``: the solver's loops on the active rows gathered in blocks of that many
    rows (hopper, pyramidal: no cones) give MuJoCo's qacc, forces and iteration count, in
    one block, in two, in blocks of 2 rows, and under vmap with a member whose rows fill
    more blocks than the other's (the same results as the solve on all rows)."""
    m, d = _mujoco_state(_suite("hopper.xml"), steps=300, cone=PYRAMIDAL)
    mujoco.mj_forward(m, d)
    M, a0, a_warm, rows = _problem(m, d)
    nefc, pad = d.nefc, 40
    assert nefc >= 4
    rng = np.random.default_rng(1)
    perm = rng.permutation(nefc + pad)
    where = np.argsort(perm)[:nefc]

    def padded(x, filler):
        return jnp.asarray(np.concatenate([x, filler])[perm])

    soft = sp.SoftRows(
        J=padded(rows["J"], rng.normal(size=(pad, m.nv))),
        aref=padded(rows["aref"], rng.normal(size=pad)),
        R=padded(rows["R"], np.zeros(pad)),
        floss=padded(rows["floss"], np.zeros(pad)),
        active=padded(rows["active"], np.zeros(pad, bool)),
        kind=padded(rows["kind"], np.full(pad, sp.ONE_SIDED)).astype(jnp.int32),
        **sp.no_cones(),
    )
    options = dict(_options(m), scale=1 / np.trace(M))
    run = jax.jit(partial(solve, **options), static_argnames=("capacity",))
    for capacity in (nefc + 2, nefc - 1, 2, None):
        sol = run(M, a0, soft, a_warm, capacity=capacity)
        assert int(sol.iterations) == d.solver_niter[0], capacity
        assert _relative(sol.qacc, d.qacc) < ROUND_OFF, capacity
        assert _relative(np.asarray(sol.efc_force)[where], d.efc_force) < ROUND_OFF, capacity
    # a batch: member 0 fits, member 1 (every padded row active, R = 1) does not
    everything = (jnp.ones(nefc + pad, bool), jnp.where(soft.active, soft.R, 1.0))
    crowded = eqx.tree_at(lambda r: (r.active, r.R), soft, everything)
    both = jax.tree.map(lambda *x: jnp.stack(x), soft, crowded)
    batched = jax.jit(jax.vmap(lambda r: solve(M, a0, r, a_warm, capacity=nefc + 2, **options)))
    plain = jax.jit(jax.vmap(lambda r: solve(M, a0, r, a_warm, **options)))
    for got, want in zip(batched(both).qacc, plain(both).qacc, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.max(np.abs(want)))


def _equations(jaxpr):
    """The equations of a jaxpr, those of its nested jaxprs (loops, branches, calls)
    included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


def _equation_count(jaxpr) -> int:
    return sum(1 for _ in _equations(jaxpr))


@pytest.mark.parametrize("source, present, fraction", [
    ("hopper", (sp.ONE_SIDED,), 0.9),  # no friction-loss zones, no equality
    ("frictionloss", (sp.FRICTION_LOSS, sp.ONE_SIDED), 1.0),  # no equality
])  # fmt: skip
def test_rows_of_the_kinds_present_only(source, present, fraction):
    """``SoftRows.kinds``: a problem declared to hold only the kinds it holds solves to
    MuJoCo's qacc, forces and iteration count, with fewer equations than the same problem
    open to every kind (the absent kinds' cost, force and line-search code is left out); a
    kinds tuple that is not a sorted tuple of row kinds is refused."""
    if source == "hopper":
        m, d = _mujoco_state(_suite("hopper.xml"), steps=300, cone=PYRAMIDAL)
    else:
        m, d = _mujoco_state(FRICTIONLOSS_XML, steps=200)
    mujoco.mj_forward(m, d)
    M, a0, a_warm, rows = _problem(m, d)
    assert tuple(sorted(set(rows["kind"].tolist()))) == present
    options = dict(_options(m), scale=1 / np.trace(M))
    arrays = {k: jnp.asarray(v) for k, v in rows.items()}
    every = sp.SoftRows(**arrays)
    declared = sp.SoftRows(**arrays, kinds=present)
    run = jax.jit(partial(solve, **options))
    for soft in (every, declared):
        sol = run(M, a0, soft, a_warm)
        assert int(sol.iterations) == d.solver_niter[0]
        assert _relative(sol.qacc, d.qacc) < ROUND_OFF
        assert _relative(sol.efc_force, d.efc_force) < ROUND_OFF
    sizes = [
        _equation_count(jax.make_jaxpr(partial(solve, **options))(M, a0, soft, a_warm).jaxpr)
        for soft in (every, declared)
    ]
    assert sizes[1] < fraction * sizes[0], sizes
    for wrong in ((sp.ONE_SIDED, sp.EQUALITY), (7,), (sp.ONE_SIDED, sp.ONE_SIDED)):
        with pytest.raises(ValueError, match="sorted tuple"):
            sp.SoftRows(**arrays, kinds=wrong)


def test_a_files_rows_declare_their_kinds():
    """The rows that a file's constraint model builds declare the kinds its groups hold:
    dm_control's hopper (pyramidal contacts and joint limits) one-sided rows alone."""
    import jaxmbd as mbd
    from jaxmbd.soft_constraints.treatments import with_soft
    from jaxmbd.tree import poses

    model = with_soft(mbd.load_model(_suite("hopper.xml")), contact="soft", limits="soft")[0]
    tree = model.tree
    qpos = jnp.asarray(tree.qpos0)
    _, rows = model.constraint_model.rows(tree, poses(tree, qpos), qpos, 0 * qpos, 0.002)
    assert rows.kinds == (sp.ONE_SIDED,)


def test_hessian_program_does_not_grow_with_the_rows():
    """``J' D J`` over many rows (a terrain's thousands of row slots, nv 28: one or two rows
    per reduction) is a loop over blocks: its jaxpr holds as many equations for 4000 rows
    as for 400 (unrolled, one slice and sum per chunk: 2000 of them); the loop's sum equals
    the unrolled one's (the same chunks, added in the same order)."""
    nv = 28
    rng = np.random.default_rng(0)

    def outer(J, D):
        DJ = J * D[:, None]
        return sp.product_sum(lambda a, b: a * b, (J[:, :, None], DJ[:, None, :]), 0)

    counts = []
    for m in (400, 4000):
        J, D = rng.standard_normal((m, nv)), rng.uniform(0, 1, m)
        counts.append(_equation_count(jax.make_jaxpr(outer)(J, D).jaxpr))
        np.testing.assert_allclose(jax.jit(outer)(J, D), (J * D[:, None]).T @ J, rtol=0,
                                   atol=1e-12 * m)  # fmt: skip
    assert counts[1] == counts[0], counts
    assert counts[0] < 1000, counts


def _scan_lengths(jaxpr) -> list[int]:
    """The lengths of the ``scan``s of a jaxpr, nested ones included."""
    return [eqn.params["length"] for eqn in _equations(jaxpr) if eqn.primitive.name == "scan"]


def test_members_that_share_the_rows_are_solved_one_after_the_other():
    """Under ``vmap``, members that share M and the rows and differ in a0 (one state under
    two sets of forces: a run's step under its controls and the step before's end under
    the step before's) are solved one after the other, a ``scan`` over the members, each
    for its own iterations: every member's qacc, forces and iteration count are those of
    its own solve (hopper, pyramidal; the active rows gathered, and all rows). Members with
    rows of their own, and more than two members, stay one batched solve (no scan over
    members)."""
    m, d = _mujoco_state(_suite("hopper.xml"), steps=300, cone=PYRAMIDAL)
    mujoco.mj_forward(m, d)
    M, a0, a_warm, rows = _problem(m, d)
    pad = 40  # inactive rows after MuJoCo's: the active ones fit the gather's slots
    filler = dict(J=np.ones((pad, m.nv)), aref=np.ones(pad), R=np.zeros(pad),
                  floss=np.zeros(pad), active=np.zeros(pad, bool),
                  kind=np.full(pad, sp.ONE_SIDED))  # fmt: skip
    soft = sp.SoftRows(
        **{k: jnp.asarray(np.concatenate([rows[k], v])) for k, v in filler.items()},
        **sp.no_cones(),
    )
    soft = eqx.tree_at(lambda r: r.kind, soft, soft.kind.astype(jnp.int32))
    # the second member's forces reversed: its solve takes other iterations (1 against 3)
    a0s = jnp.stack([a0, -a0])
    for capacity in (d.nefc + 2, None):
        options = dict(_options(m), scale=1 / np.trace(M), capacity=capacity)

        def shared(a, options=options):
            return solve(M, a, soft, a_warm, **options)

        both = jax.jit(jax.vmap(shared))(a0s)
        singles = [jax.jit(shared)(a) for a in a0s]
        assert int(singles[0].iterations) != int(singles[1].iterations)
        for i, single in enumerate(singles):
            assert int(both.iterations[i]) == int(single.iterations), capacity
            assert _relative(both.qacc[i], single.qacc) < ROUND_OFF, capacity
            assert _relative(both.efc_force[i], single.efc_force) < ROUND_OFF, capacity
        # a scan over the two members (the factors' loops are scans over the nv = 6 columns)
        assert 2 in _scan_lengths(jax.make_jaxpr(jax.vmap(shared))(a0s).jaxpr), capacity
    # wider batches at one state (many forces) keep the batched solve's vectorisation
    three = jnp.stack([a0, -a0, 2.0 * a0])
    assert 3 not in _scan_lengths(jax.make_jaxpr(jax.vmap(shared))(three).jaxpr)
    rows_each = jax.tree.map(lambda x: jnp.stack([x, x]), soft)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda a, r: solve(M, a, r, a_warm, **options)))(
        a0s, rows_each
    ).jaxpr
    assert 2 not in _scan_lengths(jaxpr)
