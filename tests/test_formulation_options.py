"""The default formulation never changes because of an option (issue 74, item 1): where a
model's default is ``"joint"``, an option that only the absolute formulations take raises
a ``ValueError`` that names the option, the default joint formulation and the
``formulation=`` to pass (jaxmbd/analysis/plan.py, ``default_formulation`` and
``joint_refusals``); the same call with that formulation named plans (or runs) in it. A
model whose own default is ``"rA"`` takes those options as they are.

The refusals are checked before anything compiles; the "runs" side is planned
(``plan_simulation``: every decision of ``simulate``, nothing compiled) but for one tiny
run with ``save_every``."""

from __future__ import annotations

import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis.plan import plan_simulation
from jaxmbd.integrators import GeneralizedAlpha

T_END, H = 0.004, 1e-3
ABSOLUTE = ("rA", "rp", "re", "se3", "director", "rotmat")


def _sensed_pendulum():
    """A pendulum with a motor and a noisy angle sensor (a policy observes the sensor):
    built in code, default "joint"."""
    b = mbd.ModelBuilder("sensed pendulum", gravity=(0.0, 0.0, -9.81))
    b.add_body("rod", mass=1.0, inertia=[1e-2, 1e-2, 1e-3], r=(0.0, 0.0, -0.5))
    b.revolute("hinge", body_i="ground", body_j="rod", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_actuator("motor", joint="hinge", kind="motor")
    b.add_sensor("angle", kind="joint_position", joint="hinge", noise=0.01)
    return b.build()


def _policy(t, observation):
    return -jnp.ones(1) * observation[0]


#: simulate's options that the default joint formulation does not take: (keyword options,
#: what the error must name, the formulation it must offer).
SIMULATE_REFUSED = {
    "save_every": ({"save_every": 2}, "save_every=2", "rA"),
    "chunk_size": (
        {"chunk_size": 2, "progress": lambda done, total: None},
        "chunk_size=2",
        "rA",
    ),  # fmt: skip
    "checkpoint": ({"checkpoint": 2}, "checkpoint=2", "rA"),
    "redundant": ({"redundant": "error"}, "redundant='error'", "rA"),
    "sensor_key with a policy": (
        {"policy": _policy, "sensor_key": jax.random.PRNGKey(0)},
        "sensor_key= with a policy",
        "rA",
    ),  # fmt: skip
    "rho_inf": ({"rho_inf": 0.5}, "rho_inf=0.5", "rA"),
    "linear_solver": ({"linear_solver": "dense"}, "linear_solver='dense'", "rA"),
    "tol": ({"tol": 1e-9}, "tol=1e-09", "rA"),
    "newton": ({"newton": "full"}, "newton='full'", "rA"),
    "variant": ({"integrator": "gen_alpha", "variant": "index3"}, "variant='index3'", "rA"),
    "energy_momentum": (
        {"integrator": "energy_momentum"},
        "integrator='energy_momentum'",
        "director",
    ),  # fmt: skip
    "integrator object": (
        {"integrator": GeneralizedAlpha()},
        "integrator=GeneralizedAlpha",
        "rA",
    ),  # fmt: skip
}


DOUBLE = mbd.models.double_pendulum()


def _model_for(name):
    return _sensed_pendulum() if name == "sensor_key with a policy" else DOUBLE


def _message(what: str, formulation: str) -> str:
    """The pattern of the refusal: the option, the default joint formulation of the model,
    the formulation to pass."""
    return (
        f"{_escaped(what)}.*not of the default joint formulation of model .*; "
        f'pass formulation="{formulation}"'
    )


def _escaped(text: str) -> str:
    return re.escape(text)


def test_the_models_default_is_joint():
    assert mbd.default_formulation(DOUBLE) == "joint"
    assert mbd.default_formulation(_sensed_pendulum()) == "joint"


@pytest.mark.parametrize("name", list(SIMULATE_REFUSED))
def test_simulate_refuses_an_option_the_default_lacks_and_names_the_formulation(name):
    options, what, formulation = SIMULATE_REFUSED[name]
    model = _model_for(name)
    with pytest.raises(ValueError, match="^simulate: " + _message(what, formulation)):
        mbd.simulate(model, t_end=T_END, h=H, **options)
    # the same call with the formulation named: planned in it (nothing compiled)
    options = {k: v for k, v in options.items() if k != "progress"}
    plan = plan_simulation(model, formulation=formulation, t_end=T_END, h=H, **options)
    assert plan.formulation == formulation


@pytest.mark.parametrize("name", ["save_every", "checkpoint", "redundant",
                                  "sensor_key with a policy"])  # fmt: skip
def test_a_named_joint_formulation_refuses_them_too(name):
    """Named, "joint" refuses what it cannot honour instead of leaving it out."""
    options, what, formulation = SIMULATE_REFUSED[name]
    with pytest.raises(ValueError, match=f"{_escaped(what)}.*not of formulation 'joint'; "
                       f'pass formulation="{formulation}"'):  # fmt: skip
        mbd.simulate(_model_for(name), formulation="joint", t_end=T_END, h=H, **options)


def test_the_options_joint_takes_keep_it():
    """tableau="rk4" (its own scheme), gen_alpha's rho_inf with that integrator named, and
    an implicit step's tol stay in joint coordinates."""
    kept = [
        {"integrator": "rkmk", "tableau": "rk4"},
        {"integrator": "gen_alpha", "rho_inf": 0.5, "tol": 1e-9},
        {"integrator": "backward_euler", "newton": "full"},
        {"impact_substeps": 4},
    ]
    for options in kept:
        plan = plan_simulation(DOUBLE, t_end=T_END, h=H, **options)
        assert plan.formulation == "joint", options


def test_every_refused_option_is_named_at_once():
    with pytest.raises(ValueError) as error:
        plan_simulation(DOUBLE, t_end=T_END, h=H, save_every=2, linear_solver="dense")
    message = str(error.value)
    assert "save_every=2 is an option" in message
    assert "linear_solver='dense' is an option" in message
    assert message.endswith('; pass formulation="rA" to use them')


def test_the_message_lists_every_formulation_that_takes_it():
    with pytest.raises(ValueError) as error:
        mbd.simulate(DOUBLE, t_end=T_END, h=H, save_every=2)
    listed = ", ".join(f'"{f}"' for f in ABSOLUTE)
    assert f"(formulation={listed})" in str(error.value)
    assert "model 'double pendulum'" in str(error.value)


def test_the_named_formulation_runs_with_the_option():
    """One tiny run: save_every=2 in rA keeps every second step of the same trajectory."""
    every = mbd.simulate(DOUBLE, formulation="rA", t_end=T_END, h=H, save_every=2)
    assert every.formulation == "rA"
    np.testing.assert_allclose(np.asarray(every.t), [0.0, 2 * H, 4 * H], rtol=ROUND_OFF)


def test_a_model_whose_default_is_rA_takes_them_as_they_are():
    """A motor on the joint that closes a four-bar's loop: the model's default is "rA"
    (the model decides), and the absolute options plan there without a word."""
    b = mbd.ModelBuilder("driven four-bar", gravity=(0.0, -9.81, 0.0))
    b.add_body("crank", mass=1.0, inertia=[1e-4, 1e-3, 1e-3], r=(0.1, 0.0, 0.0))
    b.add_body("coupler", mass=1.0, inertia=[1e-4, 1e-2, 1e-2], r=(0.3, 0.1, 0.0))
    b.add_body("rocker", mass=1.0, inertia=[1e-4, 1e-2, 1e-2], r=(0.5, 0.1, 0.0))
    z = (0.0, 0.0, 1.0)
    b.revolute("O2", body_i="ground", body_j="crank", point=(0.0, 0.0, 0.0), axis=z)
    b.revolute("P", body_i="crank", body_j="coupler", point=(0.2, 0.0, 0.0), axis=z)
    b.revolute("Q", body_i="coupler", body_j="rocker", point=(0.4, 0.2, 0.0), axis=z)
    b.revolute("O4", body_i="rocker", body_j="ground", point=(0.5, 0.0, 0.0), axis=z)
    b.add_actuator("motor", joint="Q", kind="motor")
    driven = b.build()
    assert mbd.default_formulation(driven) == "rA"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        plan = plan_simulation(driven, t_end=T_END, h=H, save_every=2, linear_solver="dense")
    assert (plan.formulation, plan.save_every, plan.linear_solver) == ("rA", 2, "dense")


def test_static_equilibrium_and_linearize_refuse_redundant_error():
    pattern = _message("redundant='error'", "rA")
    with pytest.raises(ValueError, match="^static_equilibrium: " + pattern):
        mbd.static_equilibrium(DOUBLE, redundant="error")
    with pytest.raises(ValueError, match="^linearize: " + pattern):
        mbd.linearize(DOUBLE, "initial", redundant="error")
    with pytest.raises(
        ValueError, match="static_equilibrium: redundant='error'.*formulation 'joint'"
    ):
        mbd.static_equilibrium(DOUBLE, formulation="joint", redundant="error")


def test_linearize_refuses_an_equilibrium_in_absolute_coordinates():
    """An Equilibrium without qpos (solved in rA) is no state of the default joint
    formulation: the error names the formulation to pass."""
    z = jnp.zeros(1)
    absolute = mbd.Equilibrium(jnp.asarray(DOUBLE.r0), jnp.asarray(DOUBLE.A0),
                               jnp.zeros(DOUBLE.nc), z, z, z, z, z)  # fmt: skip
    with pytest.raises(ValueError, match='absolute coordinates.*formulation="rA"'):
        mbd.linearize(DOUBLE, absolute)


def test_simulate_batch_refuses_them_too():
    batch = mbd.stack_models([DOUBLE, DOUBLE])
    with pytest.raises(ValueError, match=_message("save_every=2", "rA")):
        mbd.simulate_batch(batch, t_end=T_END, h=H, save_every=2)


def test_a_file_model_refuses_them_and_runs_them_in_rA_with_jaxmbd_treatments():
    """dm_control's cart-pole (MJCF: default joint with MuJoCo's constraint model): the
    option is refused; with rA named the run takes jaxmbd's compliant treatments, as an
    absolute formulation does."""
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "cartpole.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mbd.load_model(path)
        assert mbd.default_formulation(model) == "joint"
        with pytest.raises(ValueError, match=_message("save_every=2", "rA")):
            plan_simulation(model, t_end=0.04, save_every=2)
        plan = plan_simulation(model, formulation="rA", t_end=0.04, save_every=2)
    assert (plan.formulation, plan.save_every) == ("rA", 2)
    assert "soft" not in (plan.contact, plan.limits)
