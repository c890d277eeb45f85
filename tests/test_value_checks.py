"""Parameter values are checked at every analysis's entry, not only the builder's arguments
(jaxmbd/_parameter_checks.py): a value set after building (``eqx.tree_at``) that no rigid
body or contact law allows raises a ModelError naming the body or contact pair, the value
and the rule; under a trace the run's status is ``invalid_parameters``. Floating leaves are
cast to strongly typed float64 at entry, so a weakly typed one compiles nothing new."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd._parameter_checks import checked_parameters, parameters_invalid
from jaxmbd._results import INVALID_PARAMETERS


def _sliding_box():
    b = mbd.ModelBuilder("box", gravity=(0.0, 0.0, -9.81))
    b.add_body("box", mass=2.0, inertia=[2.0 * 0.2**2 / 6] * 3, r=(0, 0, 0.1),
               rdot=(2.0, 0.0, 0.0), shapes=[mbd.geometry.box([0.2] * 3)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("box", "ground", friction=0.4, restitution=0.0)
    return b.build()


def _pendulum(inertia=(0.01, 1.0, 1.0)):
    """A rod along x hanging from a spherical joint at its end."""
    b = mbd.ModelBuilder("rod on a ball joint", gravity=(0.0, 0.0, -9.81))
    b.add_body("rod", mass=1.0, inertia=list(inertia), r=(0.5, 0.0, 0.0))
    b.spherical("ball", body_i="ground", body_j="rod", point=(0.0, 0.0, 0.0))
    return b.build()


def test_negative_friction_set_after_building_names_the_contact_pair():
    model = eqx.tree_at(lambda m: m.contacts.friction, _sliding_box(), jnp.array([-0.4]))
    with pytest.raises(mbd.ModelError, match=r"contact pair .*'box' and 'ground'.*friction -0.4"):
        mbd.simulate(model, contact="compliant", t_end=0.01, h=1e-3)


@pytest.mark.parametrize("value", [1.5, -0.1])
def test_restitution_outside_zero_one_is_refused(value):
    model = eqx.tree_at(lambda m: m.contacts.restitution, _sliding_box(), jnp.array([value]))
    with pytest.raises(mbd.ModelError, match=r"restitution .*must be in \[0, 1\]"):
        mbd.simulate(model, contact="compliant", t_end=0.01, h=1e-3)


def test_negative_contact_stiffness_and_mass_are_refused():
    box = _sliding_box()
    model = eqx.tree_at(lambda m: m.contacts.stiffness, box, -box.contacts.stiffness)
    with pytest.raises(mbd.ModelError, match="stiffness .*must be >= 0"):
        mbd.simulate(model, t_end=0.01, h=1e-3)
    model = eqx.tree_at(lambda m: m.mass, box, jnp.array([0.0]))
    with pytest.raises(mbd.ModelError, match="body 'box' has mass 0; masses must be positive"):
        mbd.static_equilibrium(model)


def test_triangle_inequality_in_the_builder_names_the_body_and_moments():
    b = mbd.ModelBuilder("bad")
    with pytest.raises(mbd.ModelError, match=r"body 'b'.*principal moments \(1, 0.1, 0.1\)"):
        b.add_body("b", mass=1.0, inertia=[1.0, 0.1, 0.1])


def test_triangle_inequality_after_building_names_the_body_and_moments():
    model = mbd.models.double_pendulum()
    bad = model.inertia.at[1].set(jnp.diag(jnp.array([1.0, 0.1, 0.1])))
    model = eqx.tree_at(lambda m: m.inertia, model, bad)
    name = model.body_names[1]
    for run in (
        lambda: mbd.simulate(model, t_end=0.01, h=1e-3),
        lambda: mbd.linearize(model, "initial"),
        lambda: mbd.kinematics(model, t_end=0.01, h=1e-3),
    ):
        with pytest.raises(mbd.ModelError, match=rf"body '{name}'.*\(1, 0.1, 0.1\).*triangle"):
            run()


def test_physical_inertias_and_the_shipped_models_pass():
    """A thin plate (J_z = J_x + J_y) and a slender rod (a zero moment about its axis, held
    by a joint: the four-link's textbook data) are accepted."""
    b = mbd.ModelBuilder("plate")
    b.add_body("plate", mass=1.0, inertia=[0.3, 0.7, 1.0])
    for name in ("four_link", "double_pendulum", "slider_crank"):
        model = getattr(mbd.models, name)()
        checked_parameters(model, where="test")
        assert not bool(parameters_invalid(model))


def test_singular_inertia_on_a_spherical_joint_is_an_inertia_error():
    """The rod's zero moment about its own axis, which the ball joint leaves free: its
    acceleration there is undetermined. Reported as the body's inertia, not an assembly."""
    model = _pendulum(inertia=(0.0, 1.0, 1.0))
    with pytest.raises(mbd.ModelError, match=r"body 'rod' has a singular inertia") as err:
        mbd.simulate(model, t_end=0.01, h=1e-3)
    assert "assemble" not in str(err.value)


def test_invalid_traced_value_gives_the_status_invalid_parameters():
    """Under jit the values are tracers: the status says invalid_parameters from step 0,
    and a valid value through the same program says success."""
    model = _pendulum()

    @jax.jit
    def status(mass):
        run = mbd.simulate(eqx.tree_at(lambda m: m.mass, model, mass), t_end=0.003, h=1e-3,
                           throw=False)  # fmt: skip
        return run.status, run.result

    ok, result = status(jnp.array([1.0]))
    assert np.all(np.asarray(ok) == 0) and result == mbd.RESULTS.successful
    bad, result = status(jnp.array([-1.0]))
    assert np.all(np.asarray(bad) == INVALID_PARAMETERS)
    assert result == mbd.RESULTS.invalid_parameters


def test_invalid_traced_value_under_grad_raises():
    model = _pendulum()

    def loss(inertia):
        run = mbd.simulate(eqx.tree_at(lambda m: m.inertia, model, inertia), t_end=0.003,
                           h=1e-3)  # fmt: skip
        return jnp.sum(run.r[-1] ** 2)

    bad = jnp.diag(jnp.array([1.0, 0.1, 0.1]))[None]
    with pytest.raises(Exception, match="invalid model parameters"):
        jax.block_until_ready(jax.grad(loss)(bad))


def test_weakly_typed_mass_compiles_nothing_new():
    model = _pendulum()
    mbd.simulate(model, t_end=0.003, h=1e-3)
    weak = eqx.tree_at(lambda m: m.mass, model, jnp.full(1, 2.0))
    assert jax.typeof(weak.mass).weak_type
    with count_compilations() as counts:
        mbd.simulate(weak, t_end=0.003, h=1e-3)
    assert counts["compile"] == 0, counts


def test_invalid_batch_member_is_marked_and_spoils_no_other():
    """A batch refuses nothing at entry: the member with an invalid value has the status
    invalid_parameters at every step, the others run as alone."""
    model = _pendulum()
    members = [model, eqx.tree_at(lambda m: m.mass, model, jnp.array([-1.0]))]
    batch = mbd.simulate_batch(mbd.stack_models(members), t_end=0.003, h=1e-3)
    status = np.asarray(batch.status)
    assert np.all(status[0] == 0) and np.all(status[1] == INVALID_PARAMETERS)
    single = mbd.simulate(model, t_end=0.003, h=1e-3)
    want = np.asarray(single.r)
    np.testing.assert_allclose(
        np.asarray(batch.r)[0], want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
    )


def test_static_equilibrium_under_jit_reports_invalid_parameters():
    b = mbd.ModelBuilder("hanging rod", gravity=(0.0, 0.0, -9.81))
    b.add_body("rod", mass=1.0, inertia=[1.0, 1.0, 0.01], r=(0.0, 0.0, -0.5))
    b.spherical("ball", body_i="ground", body_j="rod", point=(0.0, 0.0, 0.0))
    model = b.build()

    @jax.jit
    def status(mass):
        m = eqx.tree_at(lambda m: m.mass, model, mass)
        return mbd.static_equilibrium(m, throw=False).status

    assert int(status(jnp.array([1.0]))) == 0
    assert int(status(jnp.array([-1.0]))) == INVALID_PARAMETERS
