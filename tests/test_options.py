"""Options are honoured or refused (issue 33 item 2).

Every documented option of every valid (formulation, integrator) pair is accepted and
reaches the integrator, or is refused with an error naming the valid choices where it does
not apply to the pair; undocumented options and values are refused naming the valid ones;
the defaults are documented values. A tiny run per pair (two steps) uses non-default
options, so each pair really runs with options other than its defaults.
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.formulations import FORMULATIONS
from jaxmbd.integrators import (
    DEFAULT_INTEGRATOR,
    DEFAULT_OPTIONS,
    INTEGRATORS,
    AbstractImplicitIntegrator,
    get_integrator,
    valid_pairs,
)
from jaxmbd.integrators.energy_momentum import DampedNewton
from jaxmbd.newton import NEWTON_METHODS, FullNewton, get_newton

#: Every documented option of every integrator with its documented choices (numbers:
#: examples of their kind).
DOCUMENTED = {
    "backward_euler": {
        "newton": ("full", "modified", "reuse"),
        "max_iter": (10,),
        "tol": (1e-8,),
        "linear_solver": ("auto", "dense", "structured"),
    },
    "gen_alpha": {
        "newton": ("full", "modified", "reuse"),
        "max_iter": (10,),
        "tol": (1e-8,),
        "linear_solver": ("auto", "dense", "structured"),
        "rho_inf": (0.0, 0.5, 1.0),
        "variant": ("stabilised", "index3"),
    },
    "rkmk": {
        "tableau": ("euler", "heun", "rk3", "rk4"),
        "stabilize": (None, "projection"),
        "projection_iterations": (2,),
        "dexp_sign": (-1, 1),
        "linear_solver": ("auto", "dense", "structured"),
    },
    "rk": {
        "tableau": ("euler", "heun", "rk3", "rk4"),
        "multipliers": ("two_step", "one_step", "frozen"),
        "linear_solver": ("auto", "dense", "structured"),
    },
    "energy_momentum": {
        "scheme": ("constrained", "null_space"),
        "parametrisation": ("pairs", "numerical"),
        "newton": ("damped", "full", "modified", "reuse"),
        "max_iter": (10,),
        "tol": (1e-10,),
        "dof": (3,),
        "record_condition": (True, False),
        "linear_solver": ("auto", "dense", "structured"),
    },
    "moreau_jean": {
        "tol": (1e-8,),
        "max_iter": (10,),
        "project": (True, False),
        "relaxation": (0.0, 1e-3),
    },
}

#: Options that apply only together with another one.
NEEDS = {
    ("rkmk", "projection_iterations"): {"stabilize": "projection"},
    ("energy_momentum", "parametrisation"): {"scheme": "null_space"},
}


def refusal(form, integrator: str, option: str, value) -> str | None:
    """The error expected where a documented choice does not apply to the formulation."""
    if integrator == "rk" and option == "multipliers" and value == "two_step":
        return None if form.two_step_multipliers else "needs the rotmat formulation"
    if integrator == "rk" and option == "linear_solver" and value == "structured":
        # the default multipliers of a two-step formulation solve no KKT system
        return "applies to KKT solves" if form.two_step_multipliers else None
    return None


def resolved(obj, option: str):
    """The value of ``option`` as the integrator object holds it."""
    if option == "newton":
        newton = obj.newton
        if isinstance(newton, str):  # energy_momentum builds its solver per run
            return newton
        if isinstance(newton, DampedNewton):
            return "damped"
        return {cls: name for name, cls in NEWTON_METHODS.items()}[type(newton)]
    if option == "max_iter" and isinstance(obj, AbstractImplicitIntegrator):
        return obj.newton.max_iter
    if option == "tableau":
        return obj.tableau.name
    return getattr(obj, option)


#: the per-body formulations' pairs (the joint formulation's steppers: test_joint_formulation)
PAIRS = [pair for pair in valid_pairs() if pair[0] in FORMULATIONS]


def test_every_option_is_documented_and_tested():
    """The table above lists exactly the options of every integrator, and each option is
    named in the docstrings a user reads (the class, ``simulate`` or ``get_integrator``)."""
    from jaxmbd.integrators import _options_of

    assert set(DOCUMENTED) == set(INTEGRATORS)
    docs = mbd.simulate.__doc__ + get_integrator.__doc__
    for name, cls in INTEGRATORS.items():
        options = set(_options_of(cls))
        if issubclass(cls, AbstractImplicitIntegrator):
            options.add("max_iter")  # for a Newton method given by name
        assert options == set(DOCUMENTED[name]), name
        for option in options:
            assert option in (cls.__doc__ or "") + docs, (name, option)


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_documented_options_reach_the_integrator_or_are_refused(pair):
    """Each documented choice on each valid pair: the integrator holds it, or the pair
    refuses it with a clear error."""
    formulation, name = pair
    form = FORMULATIONS[formulation]()
    for option, values in DOCUMENTED[name].items():
        for value in values:
            options = {**NEEDS.get((name, option), {}), option: value}
            expected = refusal(form, name, option, value)
            if expected is not None:
                with pytest.raises(ValueError, match=expected):
                    get_integrator(name, formulation, **options)
                continue
            obj = get_integrator(name, formulation, **options)
            if value is not None:  # None: the default
                assert resolved(obj, option) == value, (pair, option, value)


def _names_all(message: str, choices) -> bool:
    return all(str(c) in message for c in choices)


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_undocumented_options_and_values_are_refused_naming_the_valid_ones(pair):
    formulation, name = pair
    documented = DOCUMENTED[name]
    with pytest.raises(ValueError, match="has no option") as err:
        get_integrator(name, formulation, stabilise="projection")
    assert _names_all(str(err.value), documented), str(err.value)
    for option, values in documented.items():
        choices = [v for v in values if isinstance(v, str)]
        if not choices:
            continue
        options = {**NEEDS.get((name, option), {}), option: "bogus"}
        with pytest.raises(ValueError, match=re.escape(option) + "|tableau") as err:
            get_integrator(name, formulation, **options)
        assert "bogus" in str(err.value)
        assert _names_all(str(err.value), choices), str(err.value)


def test_options_that_do_not_apply_are_refused():
    """Options a chosen variant would ignore, naming what they apply to."""
    with pytest.raises(ValueError, match="projection_iterations applies to stabilize"):
        get_integrator("rkmk", "se3", projection_iterations=2)
    with pytest.raises(ValueError, match="parametrisation applies to scheme='null_space'"):
        get_integrator("energy_momentum", "director", parametrisation="numerical")
    with pytest.raises(ValueError, match="structured' needs scheme='constrained'"):
        get_integrator(
            "energy_momentum", "director", scheme="null_space", linear_solver="structured"
        )
    with pytest.raises(ValueError, match="multipliers='one_step'"):
        get_integrator("rk", "rotmat", linear_solver="structured")
    with pytest.raises(ValueError, match="max_iter is set on the newton object"):
        get_integrator("gen_alpha", "rA", newton=FullNewton(), max_iter=5)
    with pytest.raises(ValueError, match="max_iter is set on the newton object"):
        get_integrator("energy_momentum", "director", newton=FullNewton(), max_iter=5)
    with pytest.raises(ValueError, match=r"given with an integrator object; set them on it"):
        get_integrator(mbd.GeneralizedAlpha(), "rA", rho_inf=0.5)
    with pytest.raises(ValueError, match=r"has no option\(s\) \['max_iter'\]"):
        get_integrator("rk", "rotmat", max_iter=5)
    model = mbd.models.single_pendulum()
    with pytest.raises(ValueError, match="chunk_size .* needs progress="):
        mbd.simulate(model, formulation="rA", t_end=2 * H, h=H, chunk_size=1)
    with pytest.raises(ValueError, match="chunk_size .* needs progress="):
        mbd.kinematics(mbd.models.slider_crank(), t_end=2 * H, h=H, chunk_size=1)


def test_defaults_are_documented_and_applied():
    """DEFAULT_INTEGRATOR and DEFAULT_OPTIONS name valid pairs and documented choices, and
    an integrator built without options holds them."""
    assert "DEFAULT_OPTIONS" in mbd.simulate.__doc__
    for formulation, name in DEFAULT_INTEGRATOR.items():
        assert (formulation, name) in PAIRS
    assert DEFAULT_OPTIONS  # the implicit integrators' Newton defaults at least
    for pair, options in DEFAULT_OPTIONS.items():
        assert pair in PAIRS
        obj = get_integrator(pair[1], pair[0])
        for option, value in options.items():
            assert value in DOCUMENTED[pair[1]][option], (pair, option)
            assert resolved(obj, option) == value, (pair, option)
    # the chart singularity decides re's defaults (a capability, not a name)
    assert DEFAULT_OPTIONS[("re", "gen_alpha")] == {"newton": "full", "variant": "index3"}
    assert DEFAULT_OPTIONS[("rA", "gen_alpha")] == {"newton": "reuse"}


# -- tiny runs: every valid pair with non-default options ------------------------------------

H = 1e-3
MODELS = {
    "director": mbd.models.gyro_top,
    "rotmat": mbd.models.bar_double_pendulum,
}
#: Non-default options per pair (several at once: one compilation per pair).
RUN_OPTIONS = {
    ("rA", "backward_euler"): dict(newton="full", linear_solver="structured", tol=1e-8),
    ("rp", "backward_euler"): dict(newton="modified", max_iter=10),
    ("re", "backward_euler"): dict(newton="reuse", linear_solver="dense"),
    ("rA", "gen_alpha"): dict(newton="modified", variant="index3", rho_inf=0.5),
    ("rp", "gen_alpha"): dict(newton="full", linear_solver="structured", rho_inf=1.0),
    ("re", "gen_alpha"): dict(variant="stabilised", rho_inf=0.0, tol=1e-8),
    ("rA", "rkmk"): dict(tableau="heun", stabilize="projection", projection_iterations=2),
    ("se3", "rkmk"): dict(tableau="rk3", dexp_sign=1, linear_solver="structured"),
    ("director", "energy_momentum"): dict(
        scheme="null_space", parametrisation="numerical", newton="reuse", record_condition=True
    ),
    ("rp", "rk"): dict(tableau="euler", multipliers="frozen", linear_solver="structured"),
    ("re", "rk"): dict(tableau="rk3", linear_solver="auto"),
    ("rotmat", "rk"): dict(tableau="heun", multipliers="one_step", linear_solver="structured"),
    ("rA", "moreau_jean"): dict(tol=1e-8, max_iter=10),
    ("se3", "moreau_jean"): dict(project=False),
}


def test_every_valid_pair_has_a_run():
    assert set(RUN_OPTIONS) == set(PAIRS)


def _run(formulation, integrator, **options):
    model = MODELS.get(formulation, mbd.models.single_pendulum)()
    return mbd.simulate(
        model, formulation=formulation, integrator=integrator, t_end=2 * H, h=H, **options
    )


#: pairs whose runs repeat another pair's integrator with another formulation of the
#: same family: ``-m slow`` (each compiles 5-27 s on 2 cores)
SLOW_PAIRS = {("rp", "gen_alpha"), ("re", "gen_alpha"), ("rp", "backward_euler"),
              ("re", "backward_euler"), ("rp", "rk"), ("re", "rk"),
              ("director", "energy_momentum")}  # fmt: skip


@pytest.mark.parametrize(
    "pair",
    [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PAIRS else p for p in PAIRS],
    ids="-".join,
)
def test_tiny_run_with_non_default_options(pair):
    sol = _run(*pair, **RUN_OPTIONS[pair])
    assert np.all(np.asarray(sol.status) == 0)
    assert np.all(np.isfinite(np.asarray(sol.r)))
    if pair == ("director", "energy_momentum"):
        assert sol.condition is not None and np.all(np.isfinite(np.asarray(sol.condition)[1:]))


def test_rk_linear_solver_is_honoured_for_rotmat():
    """The structured KKT solve of rotmat's one-step multipliers (6 orthogonality rows per
    body) gives the dense solve's motion (the run above is the structured one)."""
    options = dict(tableau="heun", multipliers="one_step")
    structured = _run("rotmat", "rk", linear_solver="structured", **options)
    dense = _run("rotmat", "rk", linear_solver="dense", **options)
    assert np.max(np.abs(np.asarray(structured.r - dense.r))) < ROUND_OFF
    assert np.max(np.abs(np.asarray(structured.lam - dense.lam))) < ROUND_OFF


def test_energy_momentum_reuse_carries_its_solver_state():
    """newton="reuse" keeps the factored matrix in the integrator's state from step to
    step (the reused solver's state for the step's n unknowns), and converges to the damped
    Newton's root."""
    from jaxmbd.analysis.simulation import _initial

    model = mbd.models.gyro_top()
    integrator = get_integrator("energy_momentum", "director", newton="reuse")
    form = FORMULATIONS["director"]()
    carry = jax.eval_shape(lambda m: _initial(m, form, integrator, H)[0], model)
    n = 12 * model.nb + model.nc + 6 * model.nb
    expected = jax.eval_shape(lambda: get_newton("reuse").init(n))
    shapes = jax.tree_util.tree_map(lambda x: x.shape, (carry.newton, expected))
    assert shapes[0] == shapes[1] and jax.tree_util.tree_leaves(carry.newton)
    reuse = _run("director", "energy_momentum", newton="reuse")
    damped = _run("director", "energy_momentum")
    assert np.max(np.abs(np.asarray(reuse.r - damped.r))) < ROUND_OFF
