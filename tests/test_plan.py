"""``simulate`` as plan, then run (:mod:`jaxmbd.analysis.plan`): the plan names what the run
does (formulation, integrator, linear solver, treatments, rows dropped), ``sol.plan`` keeps
it, and the warnings of planning name the caller's line."""

import warnings

import pytest

import benchmarks.golden_trajectories as golden
import jaxmbd as mbd

#: What the eight runs of benchmarks/golden_trajectories.py reported (sol.formulation,
#: sol.integrator, sol.linear_solver) before simulate was split into plan and run.
BEFORE = {
    "double_pendulum_gen_alpha": ("rA", "gen_alpha", "small"),
    "slider_crank_rp": ("rp", "gen_alpha", "small"),
    "heavy_top_se3_rkmk": ("se3", "rkmk", "schur"),
    "gyro_top_energy_momentum": ("director", "energy_momentum", "small"),
    "bar_double_pendulum_rotmat_rk": ("rotmat", "rk", "small"),
    "cartpole_policy": ("rA", "rkmk", "schur"),
    "sliding_box_compliant": ("joint", "gen_alpha", "cholesky"),
    "hard_contact_ball": ("joint", "moreau_jean", "cholesky"),
}


class _Captured(Exception):
    pass


def _golden_call(monkeypatch, name):
    """(model, options) of the golden case ``name``'s simulate call, not run."""
    calls = []

    def capture(model, **options):
        calls.append((model, options))
        raise _Captured

    with monkeypatch.context() as patch:
        patch.setattr(mbd, "simulate", capture)
        with pytest.raises(_Captured):
            golden.CASES[name]()
    return calls[0]


def test_the_golden_cases_are_the_eight_recorded():
    assert set(golden.CASES) == set(BEFORE)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_plan_names_what_the_run_reports(monkeypatch, name):
    """The plan's formulation, integrator and linear solver are the run's and those of the
    run before the split; ``sol.plan`` is the plan's decisions, printable."""
    model, options = _golden_call(monkeypatch, name)
    options["t_end"] = 5 * options["h"]  # the decisions do not depend on the horizon
    plan = mbd.plan_simulation(model, **options)
    named = (plan.formulation, plan.integrator, plan.linear_solver)
    assert named == BEFORE[name]
    sol = mbd.simulate(model, **options)
    assert (sol.formulation, sol.integrator, sol.linear_solver) == named
    assert sol.plan == plan.described()
    assert sol.plan.model is None and sol.plan.stepper is None  # the decisions alone
    hash(sol.plan)  # static: a pytree's auxiliary data
    text = str(sol.plan)
    for value in named:
        assert value in text
    assert f"{plan.steps} of h = {options['h']:g}" in text


def test_hard_contact_plan_names_its_treatments(monkeypatch):
    model, options = _golden_call(monkeypatch, "hard_contact_ball")
    plan = mbd.plan_simulation(model, **options)
    assert (plan.contact, plan.limits, plan.equality) == ("hard", "hard", "exact")
    assert "hard contact: friction on the exact cone" in plan.checks
    assert plan.absent == ("joint limits", "equality constraints")


SOFT_FILE = """
<mujoco model="soft_drop">
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="ball" pos="0 0 0.3">
      <joint name="drop" type="slide" axis="0 0 1" limited="true" range="-0.5 0.5"/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_soft_plan_names_soft_treatments_and_the_files_integrator(tmp_path):
    """contact and limits "soft" (MuJoCo's constraint model): the plan names them and the
    file's integrator (implicitfast, not the joint formulation's default), as the run does."""
    pytest.importorskip("mujoco")
    path = tmp_path / "soft_drop.xml"
    path.write_text(SOFT_FILE)
    model = mbd.load_model(path)
    assert model.constraint_model.integrator == "implicitfast"
    options = dict(t_end=0.01, h=0.002, contact="soft", limits="soft")
    plan = mbd.plan_simulation(model, **options)
    assert (plan.contact, plan.limits, plan.equality) == ("soft", "soft", "exact")
    assert (plan.formulation, plan.integrator) == ("joint", "implicitfast")
    assert "MuJoCo's constraint model: formulation 'joint'" in plan.checks
    sol = mbd.simulate(model, **options)
    assert sol.integrator == "implicitfast"
    assert sol.plan == plan.described()
    text = str(sol.plan)
    assert "contact        soft" in text and "limits         soft" in text
    # the compliant treatments of the same file: the joint formulation's contact step
    compliant = mbd.plan_simulation(
        model, t_end=0.01, h=0.002, contact="compliant", limits="compliant"
    )
    assert (compliant.contact, compliant.limits) == ("compliant", "compliant")
    assert compliant.integrator == mbd.formulations.get_formulation("joint").file_contact_integrator


def test_soft_outside_joint_coordinates_is_refused_while_planning(tmp_path):
    pytest.importorskip("mujoco")
    path = tmp_path / "soft_drop.xml"
    path.write_text(SOFT_FILE)
    model = mbd.load_model(path)
    with pytest.raises(ValueError, match="run in formulation='joint', not 'rA'"):
        mbd.plan_simulation(model, formulation="rA", t_end=0.01, h=0.002, contact="soft")


def test_plan_names_dropped_rows_and_warns_at_the_callers_line():
    """A redundant row is named with its loop; the RedundancyWarning names this file's line,
    from plan_simulation as from simulate (the planner's frames skipped)."""
    model = mbd.models.six_body_linkage()
    with pytest.warns(mbd.RedundancyWarning) as record:
        plan = mbd.plan_simulation(model, formulation="rA", t_end=0.01, h=1e-3)
    assert plan.dropped_rows == ("joint6.perp1.dp1_a",)
    assert "closes the loop" in plan.dropped_because
    assert plan.kept_rows == tuple(k for k in range(model.nc) if k != 28)
    assert "run: the dropped rows' drift" in plan.checks
    assert "why:" in str(plan)
    assert {w.filename for w in record} == {__file__}
    # simulate: the same decisions; its warnings (an off-grid t_end too) name this file
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = mbd.simulate(model, formulation="rA", t_end=0.0105, h=1e-3)
    kinds = {type(w.message) for w in caught}
    assert {mbd.RedundancyWarning, mbd.AdjustmentWarning} <= kinds
    assert {w.filename for w in caught if w.category is not DeprecationWarning} == {__file__}
    assert sol.plan.dropped_rows == plan.dropped_rows
    assert sol.plan.steps == 10


def test_shared_defaults_are_the_planners():
    """statics and linearize take the planner's default formulation and treatments."""
    from jaxmbd.analysis.plan import absolute_only_requests, treated_model

    assert absolute_only_requests() == ()
    assert absolute_only_requests(redundant="error") == ("redundant='error'",)
    model = mbd.models.double_pendulum()
    assert treated_model(model, where="test").model is model
    with pytest.raises(ValueError, match="is an option of simulate only"):
        treated_model(model, contact="hard", where="static_equilibrium")
