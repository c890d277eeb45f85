"""A plain ``simulate`` call reuses what depends only on the model's structure and the
options, and never what depends on anything else (jaxmbd/analysis/plan.py,
``_model_obstacles_of`` and ``Plan.described``; jaxmbd/compiled/program_cache.py, the
programs of a process by their arguments' structure; jaxmbd/joint_space/run.py,
``_counted_program``).

Checked: a second call with new parameter values (the same shapes) traces and compiles
nothing and gives the new model's answer (against one jitted program of the run, a
separate path); a model of another structure and other options get their own plans; the
start correction that the run's program computes equals the separate program's."""

from __future__ import annotations

import dataclasses
import gc

import jax
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd._checks import start_correction
from jaxmbd.analysis.plan import plan_simulation
from jaxmbd.models.generated import pendulum_chain

H, STEPS = 1e-3, 10


def _jitted_states(model):
    """r and omega of the run under jax.jit: one program of its steps, not the plain
    call's counted program."""
    sol = jax.jit(lambda m: mbd.simulate(m, t_end=STEPS * H, h=H))(model)
    return np.asarray(sol.r), np.asarray(sol.omega)


def test_new_parameter_values_compile_nothing_and_give_the_new_answer():
    model = mbd.models.double_pendulum()
    first = mbd.simulate(model, t_end=STEPS * H, h=H)
    heavier = dataclasses.replace(model, mass=np.asarray(model.mass) * np.asarray([1.0, 3.0]))
    with count_compilations() as counts:
        second = mbd.simulate(heavier, t_end=STEPS * H, h=H)
        jax.block_until_ready(second.r)
    assert counts == {"trace": 0, "compile": 0}, counts
    r, omega = _jitted_states(heavier)
    # the two loops round differently in the last bits (tests/test_short_runs.py)
    np.testing.assert_allclose(second.r, r, rtol=0, atol=ROUND_OFF * np.abs(r).max())
    np.testing.assert_allclose(second.omega, omega, rtol=0, atol=ROUND_OFF * np.abs(omega).max())
    # the second link's mass changes the motion: a stale program or plan would not
    assert np.max(np.abs(np.asarray(second.omega) - np.asarray(first.omega))) > 1e-6


def test_a_model_of_another_structure_gets_its_own_plan():
    """The double pendulum's two hinges and a 3-link chain's three balls, asked in turn
    (each after the other's answer was kept)."""
    pendulum, chain = mbd.models.double_pendulum(), pendulum_chain(3)
    for _ in range(2):
        plans = [plan_simulation(m, t_end=STEPS * H, h=H) for m in (pendulum, chain)]
        assert [(p.tree.nq, p.tree.nv) for p in plans] == [(2, 2), (12, 9)]
        assert [p.model_name for p in plans] == [pendulum.name, chain.name]
    sol = mbd.simulate(chain, t_end=STEPS * H, h=H)
    assert sol.r.shape == (STEPS + 1, chain.nb, 3)


def test_the_kept_answer_is_the_models_whatever_the_options():
    """The kept answer depends on the model alone: an integrator option that the default
    joint formulation lacks (``tol``) is refused each time it is asked, never answered from
    or into the kept formulation; without it, and with rA named, the same model runs."""
    model = mbd.models.double_pendulum()
    for _ in range(2):
        assert plan_simulation(model, t_end=STEPS * H, h=H).formulation == "joint"
        with pytest.raises(ValueError, match='tol=1e-09 .* pass formulation="rA"'):
            plan_simulation(model, t_end=STEPS * H, h=H, tol=1e-9)
        plan = plan_simulation(model, formulation="rA", t_end=STEPS * H, h=H, tol=1e-9)
        assert plan.formulation == "rA"


def test_a_collected_model_is_not_answered_for_a_new_one():
    """The kept answers name their model through a weak reference: a model built after
    the first was collected (possibly at its address) is asked again."""
    plan_simulation(mbd.models.double_pendulum(), t_end=STEPS * H, h=H)
    gc.collect()
    plan = plan_simulation(pendulum_chain(2), t_end=STEPS * H, h=H)
    assert (plan.tree.nq, plan.tree.nv) == (8, 6)


def test_the_run_programs_start_correction_is_the_solutions():
    model = mbd.models.double_pendulum()
    moved = dataclasses.replace(model, rdot0=np.asarray(model.rdot0) + 0.1)
    # the report of the projection reads the run program's correction
    with pytest.warns(mbd.AssemblyWarning, match="rod 2' 0.1 m/s"):
        sol = mbd.simulate(moved, t_end=STEPS * H, h=H)
    expected = start_correction(moved, sol.r[0], sol.A[0], sol.rdot[0], sol.omega[0])
    for name in ("position", "rotation", "velocity"):  # below ROUND_OFF (0 here)
        np.testing.assert_allclose(
            getattr(sol.start_correction, name), getattr(expected, name), rtol=0, atol=1e-15
        )
    assert float(np.max(sol.start_correction.velocity)) > 1e-3  # the projection moved it


def test_an_assembled_solution_is_the_constructed_one():
    """``Solution.assembled`` (the analyses' constructor without equinox's checks) gives
    the Solution that ``Solution(...)`` builds of the same arguments: the same fields,
    leaves and static parts, so that a jitted function of it meets the same program."""
    from jaxmbd.solution import Solution

    rng = np.random.default_rng(0)
    arrays = {k: jax.device_put(rng.normal(size=(4, 2, 3))) for k in ("r", "rdot", "omega")}
    args = dict(
        t=np.arange(4.0), A=np.zeros((4, 2, 3, 3)), rddot=arrays["r"], omegadot=arrays["r"],
        lam=np.zeros((4, 1)), iterations=np.zeros(4, np.int32), status=np.zeros(4, np.int32),
        residual=np.zeros(4), q=np.ones((4, 2)), formulation="joint", integrator="rkmk",
        body_names=("a", "b"), joint_definitions=[], force_elements=[], save_every=2,
        **arrays,
    )  # fmt: skip
    built, assembled = Solution(**args), Solution.assembled(**args)
    leaves_b, tree_b = jax.tree_util.tree_flatten(built)
    leaves_a, tree_a = jax.tree_util.tree_flatten(assembled)
    assert tree_a == tree_b
    assert all(a is b for a, b in zip(leaves_a, leaves_b, strict=True))
    assert vars(assembled).keys() == vars(built).keys()
    assert assembled.q is args["q"] and assembled.v is None
    assert isinstance(assembled.joint_definitions, tuple) and assembled.save_every == 2
    with pytest.raises(TypeError, match="unknown arguments.*'qq'"):
        Solution.assembled(**args, qq=1)


def test_to_device_is_device_put():
    """:func:`jaxmbd.compiled.host_arrays.to_device` (the transfer under JAX's device_put)
    gives what ``jax.device_put`` gives: values, dtype, weak type, placement."""
    from jaxmbd.compiled.host_arrays import to_device

    host = [np.arange(6.0).reshape(2, 3), np.arange(3, dtype=np.int32), np.array(True),
            np.asarray(2.5), np.arange(12.0).reshape(3, 4)[:, ::2]]  # fmt: skip
    for ours, theirs in zip(to_device(host), jax.device_put(host), strict=True):
        assert isinstance(ours, jax.Array)
        assert (ours.dtype, ours.shape, ours.weak_type, ours.committed) == (
            theirs.dtype, theirs.shape, theirs.weak_type, theirs.committed
        )  # fmt: skip
        assert ours.sharding == theirs.sharding
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_a_files_treated_model_is_kept_for_the_same_model_and_options():
    """The treated model of a plain call (MuJoCo's constraint model for a file) is kept for
    the same model object and options: a second plan reuses it (and what is kept by its
    identity downstream), while other options or another model object get their own."""
    import dm_control

    path = f"{dm_control.__path__[0]}/suite/cartpole.xml"
    model = mbd.load_model(path)
    first = plan_simulation(model, t_end=0.1)
    assert plan_simulation(model, t_end=0.2).model is first.model
    other = plan_simulation(model, t_end=0.1, contact="compliant", limits="compliant")
    assert other.model is not first.model and other.contact == "compliant"
    again = plan_simulation(mbd.load_model(path), t_end=0.1)
    assert again.model is not first.model and again.contact == first.contact == "soft"


def test_a_first_call_compiles_its_programs_not_its_operations():
    """A model built in code, in a process whose in-memory programs are dropped: the plain
    call compiles its tree's program and its run's (or loads them from the disk caches),
    and no operation on its own: outside any trace its programs keep their constants
    (no compile-time evaluation), where eager constant folding made about 60 programs of
    one operation each."""
    from jaxmbd.compiled.program_cache import forget_loaded
    from jaxmbd.joint_space import from_model, run

    model = pendulum_chain(5)
    jax.clear_caches()
    forget_loaded()
    from_model._LAST_CONCRETE[:] = [None, None]
    run._LAST_CONCRETE_TREE[:] = [None, None]
    with count_compilations() as counts:
        sol = mbd.simulate(model, t_end=STEPS * H, h=H)
        jax.block_until_ready(sol.r)
    assert counts["compile"] <= 4, counts
