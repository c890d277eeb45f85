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
    np.testing.assert_allclose(second.r, r, rtol=0, atol=1e-12)
    np.testing.assert_allclose(second.omega, omega, rtol=0, atol=1e-12)
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


def test_other_options_get_their_own_formulation():
    """An integrator option that the joint formulation lacks (``tol``) takes rA; the same
    model without it is back in joint coordinates, the kept answer not reused."""
    model = mbd.models.double_pendulum()
    asked = [{}, {"tol": 1e-9}, {}, {"tol": 1e-9}]
    found = [plan_simulation(model, t_end=STEPS * H, h=H, **kw).formulation for kw in asked]
    assert found == ["joint", "rA", "joint", "rA"]


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
    for name in ("position", "rotation", "velocity"):
        np.testing.assert_allclose(
            getattr(sol.start_correction, name), getattr(expected, name), rtol=0, atol=1e-15
        )
    assert float(np.max(sol.start_correction.velocity)) > 1e-3  # the projection moved it
