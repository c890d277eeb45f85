"""A run costs the steps asked (jaxmbd/analysis/simulation.py, ``_run_blocks``;
jaxmbd/joint_space/run.py, ``_counted_run``).

Outside any transformation ``simulate`` runs programs whose number of steps is an input
(:func:`jaxmbd.compiled.counted_scan.counted_scan`): one program serves every horizon up to
its rows, and a short run takes its own steps, not the program's. Checked in joint
coordinates (the default) and in rA with gen_alpha (the block path): the steps the
program executes (a stepper that counts its calls on the host), runs of 1 to 3000 steps
against one program of 3000 steps under ``jax.jit`` (the path gradients take), a new
horizon that compiles nothing, and a gradient through a short run whose program holds
loops of its own steps, against central differences. The long runs are of the double
pendulum in joint coordinates and of the slider crank in rA with rkmk: the two loops
may round differently in the last bits, and the double pendulum's chaos grows such a
difference (gen_alpha: 1e-11 in 1000 steps), where the slider crank's one degree of
freedom keeps it at round-off."""

from __future__ import annotations

import dataclasses

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.plan import plan_simulation
from jaxmbd.analysis.simulation import BLOCK_STEPS, run_plan

H = 1e-3
LONG = 3000
STEPS = (1, 10, 100, 1000, 1025, LONG)
FIELDS = ("r", "A", "rdot", "omega", "rddot", "omegadot", "lam")


def _round_off(steps):
    """Two loops' last bits carried over a run: about one ROUND_OFF every 30 steps of the
    slider crank's rotation matrices (measured on an AVX2 CPU: 3.4e-14 at 1025 steps,
    2e-14 to 3.5e-13 at 3000 from one pytest run to the next)."""
    return ROUND_OFF * max(1.0, steps / 30)


RATES = ("rddot", "omegadot", "lam")
# the formulations' paths: joint coordinates (the default) and rA's blocks
JOINT, RA = {}, {"formulation": "rA", "integrator": "gen_alpha"}
# the long runs: rA's blocks with rkmk, whose steps solve no Newton iteration to a
# tolerance (gen_alpha's stops within its tolerance, where a last bit can move a step's
# result by that much)
CASES = {
    "joint": (mbd.models.double_pendulum, JOINT),
    "rA": (mbd.models.slider_crank, {"formulation": "rA", "integrator": "rkmk"}),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """(model, options, the fields of one LONG-step program under jax.jit)."""
    build, options = CASES[request.param]
    model = build()

    @jax.jit
    def one_program(model):
        sol = mbd.simulate(model, t_end=LONG * H, h=H, **options)
        return {name: getattr(sol, name) for name in FIELDS}

    return model, options, jax.tree_util.tree_map(np.asarray, one_program(model))


def _counting(stepper, calls):
    """``stepper`` whose every step (the method the run's loop calls once per iteration)
    appends to ``calls`` on the host when it runs."""
    method = "start_and_step" if hasattr(stepper, "start_and_step") else "step"

    class Counting(type(stepper)):
        pass

    def counted(self, *args, **kwargs):
        jax.debug.callback(lambda: calls.append(1))
        return getattr(super(Counting, self), method)(*args, **kwargs)

    setattr(Counting, method, counted)
    fields = {f.name: getattr(stepper, f.name) for f in dataclasses.fields(stepper)}
    return Counting(**fields)


@pytest.mark.parametrize("options", [JOINT, RA], ids=["joint", "rA"])
@pytest.mark.parametrize("steps", [10, 20])
def test_a_short_run_executes_its_steps(options, steps):
    """A 10-step run of the double pendulum executes 10 steps of the program that serves
    every horizon up to BLOCK_STEPS (1024), not 1024; joint coordinates' loop ends with the
    accelerations of each state, one iteration more than the steps (``_run_from_starts``)."""
    model = mbd.models.double_pendulum()
    calls = []
    plan = plan_simulation(model, t_end=steps * H, h=H, **options)
    plan = dataclasses.replace(plan, stepper=_counting(plan.stepper, calls))
    sol = run_plan(plan)
    jax.effects_barrier()
    extra = 1 if plan.form.runs_in_joint_space else 0
    assert len(calls) == steps + extra
    assert sol.r.shape[0] == steps + 1


@pytest.mark.parametrize("steps", STEPS)
def test_runs_equal_the_prefix_of_one_long_run(case, steps):
    """Runs of 1 to 3000 steps (one block, a block and a step, several blocks) equal the
    first rows of one 3000-step program to round-off; accelerations and multipliers as
    the velocity increments and impulses (h a, h lam) they are steps of."""
    model, options, reference = case
    sol = mbd.simulate(model, t_end=steps * H, h=H, **options)
    for name in FIELDS:
        x = np.asarray(getattr(sol, name))
        y = reference[name][: steps + 1]
        assert x.shape == y.shape, name
        if name in RATES:
            x, y = H * x, H * y
        scale = max(1.0, float(np.max(np.abs(y))))
        tol = _round_off(steps)
        assert np.max(np.abs(x - y)) <= tol * scale, name


def test_a_new_horizon_compiles_nothing(case):
    """After the runs above, horizons never run before (within one block, and across
    blocks) trace and compile nothing."""
    model, options, reference = case
    # the programs of a short run, of a long one and of one across blocks (this test may
    # run first in its pytest worker)
    for steps in (1, 1000, LONG):
        mbd.simulate(model, t_end=steps * H, h=H, **options)
    for steps in (7, 517, 2345):
        with count_compilations() as counts:
            sol = mbd.simulate(model, t_end=steps * H, h=H, **options)
        assert counts == {"trace": 0, "compile": 0}, (steps, counts)
        want = reference["r"][: steps + 1]
        tol = _round_off(steps)
        np.testing.assert_allclose(sol.r, want, rtol=0, atol=tol * np.abs(want).max())


def _loop_lengths(jaxpr):
    """The lengths of every ``scan`` in ``jaxpr`` and its sub-jaxprs."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            found.append(eqn.params["length"])
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            found += _loop_lengths(sub)
    return found


@pytest.mark.parametrize("options", [JOINT, RA], ids=["joint", "rA"])
def test_a_gradient_through_a_short_run_takes_its_steps(options):
    """jax.grad of a 10-step run of the double pendulum: its program's time loop is 10
    steps long (no loop of BLOCK_STEPS), and the derivative with respect to a link's mass
    matches central differences of plain runs."""
    model, steps = mbd.models.double_pendulum(), 10

    def loss(mass):
        m = dataclasses.replace(model, mass=mass)
        sol = mbd.simulate(m, t_end=steps * H, h=H, **options)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.omega[-1] ** 2)

    mass = jnp.asarray(model.mass)
    lengths = _loop_lengths(jax.make_jaxpr(jax.grad(loss))(mass).jaxpr)
    # the time loop: 10 steps (rA), or 11 starts (joint coordinates); the others are a
    # step's own small loops (RK4's 4 stages, the solvers' kernels)
    assert (steps in lengths or steps + 1 in lengths) and max(lengths) < BLOCK_STEPS, lengths
    grad = np.asarray(jax.grad(loss)(mass))
    eps = 1e-5
    for b in range(mass.shape[0]):
        up, down = mass.at[b].add(eps), mass.at[b].add(-eps)
        fd = (float(loss(up)) - float(loss(down))) / (2 * eps)
        assert abs(grad[b] - fd) <= 1e-9 * max(1.0, abs(fd)), (b, grad[b], fd)
