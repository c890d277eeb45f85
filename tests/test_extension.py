"""A force element, a contact law and a sensor kind defined outside the package: they run
through simulate, save/load and the energy diagnostics without any change to jaxmbd."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.contact import AbstractContactLaw, PairParameters, register_contact_law
from jaxmbd.forces import AbstractForce, BodyState, register_force_type


@register_force_type("test_anchor_spring")
class AnchorSpring(AbstractForce):
    """An isotropic linear spring pulling a body's centre of mass to a fixed global point:
    f = -k (r - anchor), potential 1/2 k |r - anchor|^2."""

    body: int = eqx.field(static=True)
    anchor: jax.Array
    stiffness: jax.Array
    file_keys: ClassVar[frozenset[str]] = frozenset({"body", "anchor", "stiffness"})

    def __call__(self, t, state: BodyState):
        nb = state.r.shape[0]
        f = (
            jnp.zeros((nb, 3))
            .at[self.body]
            .add(-self.stiffness * (state.r[self.body] - self.anchor))
        )
        return f, jnp.zeros((nb, 3))

    @property
    def bodies(self):
        return (self.body,)

    def potential_energy(self, state: BodyState):
        d = state.r[self.body] - self.anchor
        return 0.5 * self.stiffness * jnp.sum(d * d)

    def to_json(self, body_label):
        return {
            "type": self.file_type,
            "body": body_label(self.body),
            "anchor": np.asarray(self.anchor).tolist(),
            "stiffness": float(self.stiffness),
        }

    @classmethod
    def from_json(cls, builder, entry):
        builder.add_force(
            cls(
                body=builder.body_index(entry.string("body")),
                anchor=jnp.asarray(entry.vector("anchor")),
                stiffness=jnp.asarray(float(entry.get("stiffness"))),
            )
        )


@register_contact_law("test_own_spring")
class OwnSpring(AbstractContactLaw):
    """F_n = max(0, k delta + c delta_dot) with the law's own k and c (array leaves of the
    law, not the pair's numbers)."""

    k: jax.Array
    c: jax.Array

    def normal_force(self, delta, delta_dot, pair: PairParameters):
        touching = delta > 0
        force = self.k * jnp.where(touching, delta, 0.0) + self.c * delta_dot
        return jnp.where(touching, jnp.maximum(force, 0.0), 0.0)

    def elastic_energy(self, delta, pair: PairParameters):
        d = jnp.where(delta > 0, delta, 0.0)
        return 0.5 * self.k * d * d


def _oscillator():
    b = mbd.ModelBuilder("anchored", gravity=(0.0, 0.0, 0.0))
    b.add_body("mass", mass=2.0, inertia=[0.1] * 3, r=(0.1, 0.0, 0.0))
    b.add_force(AnchorSpring(body=0, anchor=jnp.zeros(3), stiffness=jnp.asarray(8.0)))
    return b.build()


def test_force_element_from_outside(tmp_path):
    model = _oscillator()
    again = mbd.load_model(mbd.save_model(model, tmp_path / "anchored.json"))
    (element,) = again.forces
    assert isinstance(element, AnchorSpring)
    assert float(element.stiffness) == 8.0 and element.body == 0
    sol = mbd.simulate(again, formulation="rA", integrator="gen_alpha", t_end=1.0, h=1e-3)
    omega = np.sqrt(8.0 / 2.0)  # x(t) = 0.1 cos(omega t)
    np.testing.assert_allclose(sol.r[:, 0, 0], 0.1 * np.cos(omega * sol.t), rtol=0, atol=3e-7)
    energy = mbd.diagnostics.energy(again, sol)
    e0 = 0.5 * 8.0 * 0.1**2  # all potential at the start
    np.testing.assert_allclose(energy.potential[0], e0, rtol=ROUND_OFF)
    np.testing.assert_allclose(energy.total, e0, rtol=1e-8)


def _resting_ball(law, *, z0):
    b = mbd.ModelBuilder("resting", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[4e-4] * 3, r=(0.0, 0.0, z0),
               shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
    b.add_ground_plane()
    b.add_contact("ball", "ground", friction=0.5, stiffness=1e4, damping=200.0, law=law)
    return b.build()


def test_contact_law_from_outside(tmp_path):
    law = OwnSpring(k=jnp.asarray(2e4), c=jnp.asarray(300.0))
    model = _resting_ball(law, z0=0.05)
    again = mbd.load_model(mbd.save_model(model, tmp_path / "resting.json"))
    (loaded,) = again.contacts.laws
    assert isinstance(loaded, OwnSpring) and float(loaded.k) == 2e4 and float(loaded.c) == 300.0
    sol = mbd.simulate(again, t_end=0.5, h=1e-3)
    # the law's own k, not the pair's stiffness: it settles at m g / k
    np.testing.assert_allclose(0.05 - sol.r[-1, 0, 2], 9.81 / 2e4, rtol=3e-13)
    energy = mbd.diagnostics.energy(again, sol)
    delta = 9.81 / 2e4
    np.testing.assert_allclose(
        energy.potential[-1], 9.81 * sol.r[-1, 0, 2] + 0.5 * 2e4 * delta**2, rtol=ROUND_OFF
    )


def test_linear_contact_law_settles_at_weight_over_stiffness(tmp_path):
    """The built-in linear law: a 1 kg ball on k = 1e4 N/m settles at m g / k."""
    model = _resting_ball(mbd.contact.LinearSpringDamper(), z0=0.05)
    again = mbd.load_model(mbd.save_model(model, tmp_path / "linear.json"))
    assert isinstance(again.contacts.laws[0], mbd.contact.LinearSpringDamper)
    sol = mbd.simulate(again, t_end=0.5, h=1e-3)
    np.testing.assert_allclose(0.05 - sol.r[-1, 0, 2], 9.81 / 1e4, rtol=1e-13)


def test_default_law_is_hunt_crossley_and_is_not_written(tmp_path):
    model = _resting_ball(None, z0=0.05)
    assert model.contacts.laws == (mbd.contact.HuntCrossley(),)
    path = mbd.save_model(model, tmp_path / "hc.json")
    assert '"law"' not in path.read_text()


def _read_site_speed(model, mount, run):
    """Speed of a body-fixed site: |rdot + A (omega x s)| (one component)."""
    s = jnp.asarray(mount.site)
    v = run.rdot[:, mount.body] + jnp.einsum(
        "tij,tj->ti", run.A[:, mount.body], jnp.cross(run.omega[:, mount.body], s)
    )
    return jnp.linalg.norm(v, axis=-1, keepdims=True)


def test_sensor_kind_from_outside(tmp_path):
    """A sensor kind defined here reads along simulate, survives save/load, and feeds the
    energy diagnostics' run unchanged: a pendulum's tip speed equals |omega| L at every
    step, and sqrt(2 g (z0 - z)) from energy conservation."""
    mbd.register_sensor_kind(mbd.SensorKind("test_site_speed", "body", _read_site_speed, 1))
    length = 1.0
    b = mbd.ModelBuilder("pendulum", gravity=(0.0, 0.0, -9.81))
    b.add_body("rod", mass=1.0, inertia=[1e-6, 1e-6, 1e-6], r=(length, 0.0, 0.0))
    b.spherical("pin", body_i="ground", body_j="rod", point=(0, 0, 0))
    b.add_sensor("tip_speed", kind="test_site_speed", body="rod", site=(0, 0, 0))
    model = b.build()
    loaded = mbd.load_model(mbd.save_model(model, tmp_path / "pendulum.json"))
    for m in (model, loaded):
        sol = mbd.simulate(m, integrator="rkmk", t_end=0.2, h=1e-3)
        speed = np.asarray(sol.sensors["tip_speed"])[:, 0]
        np.testing.assert_allclose(speed, np.linalg.norm(np.asarray(sol.rdot[:, 0]), axis=-1),
                                   rtol=ROUND_OFF, atol=1e-15)  # fmt: skip
        drop = -np.asarray(sol.r[:, 0, 2])
        np.testing.assert_allclose(speed, np.sqrt(2 * 9.81 * drop), rtol=2e-6, atol=1e-9)
        energy = mbd.diagnostics.energy(m, sol).total
        assert float(np.ptp(np.asarray(energy))) < 1e-11


def test_unknown_types_in_model_files_name_the_known_ones(tmp_path):
    import json

    model = _resting_ball(mbd.contact.LinearSpringDamper(), z0=0.05)
    doc = json.loads(mbd.save_model(model, tmp_path / "m.json").read_text())
    doc["contacts"][0]["law"] = {"type": "no_such_law"}
    (tmp_path / "law.json").write_text(json.dumps(doc))
    with pytest.raises(mbd.ModelFileError, match=r"contacts\[0\]\.law.*'hunt_crossley'"):
        mbd.load_model(tmp_path / "law.json")
    doc["contacts"][0]["law"] = {"type": "linear"}
    doc["forces"] = [{"name": "f", "type": "no_such_force"}]
    (tmp_path / "force.json").write_text(json.dumps(doc))
    with pytest.raises(mbd.ModelFileError, match=r"forces\[0\]\.type.*'spring_damper'"):
        mbd.load_model(tmp_path / "force.json")


def test_pairs_with_different_laws_each_follow_their_own():
    from jaxmbd.forces import BodyState

    def model(laws):
        b = mbd.ModelBuilder("two balls", gravity=(0.0, 0.0, -9.81))
        for k in range(len(laws)):
            b.add_body(f"ball{k}", mass=1.0, inertia=[4e-4] * 3, r=(k, 0.0, 0.049),
                       rdot=(0.0, 0.0, -0.1), shapes=[mbd.geometry.sphere(0.05)])  # fmt: skip
        b.add_ground_plane()
        for k, law in enumerate(laws):
            b.add_contact(f"ball{k}", "ground", friction=0.5, stiffness=1e4, damping=20.0,
                          law=law)  # fmt: skip
        return b.build()

    def normal_forces(m):
        state = BodyState(m.r0, m.A0, m.rdot0, m.omega0)
        return np.asarray(m.contacts.slots(state).normal_force)

    linear = mbd.contact.LinearSpringDamper()
    both = model([None, linear])
    assert len(both.contacts.laws) == 2 and both.contacts.pair_law == (0, 1)
    hc, lin = normal_forces(model([None])), normal_forces(model([linear]))
    np.testing.assert_array_equal(normal_forces(both), np.concatenate([hc, lin]))
    np.testing.assert_allclose(lin, 1e4 * 1e-3 + 20.0 * 0.1, rtol=ROUND_OFF)  # k delta + c v
