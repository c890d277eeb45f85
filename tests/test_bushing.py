"""The bushing (jaxmbd/forces/bushing.py, ModelBuilder.bushing): its force against closed forms at
large deflections, the damped oscillators it makes with a free body, the energy balance
with damping, its gradient, and the model file round trip."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces import BodyState
from jaxmbd.lie import so3_exp

M = 2.0
INERTIA = (0.3, 0.4, 0.5)
K = np.array([400.0, 500.0, 600.0, 70.0, 80.0, 90.0])
C = np.array([4.0, 5.0, 6.0, 0.7, 0.8, 0.9])
H, T_END = 1e-3, 0.5


def _axes(angle=0.4):
    """The bushing's axes: the global ones turned by ``angle`` about (1, 1, 1)."""
    return np.asarray(so3_exp(jnp.asarray([1.0, 1.0, 1.0]) * angle / math.sqrt(3.0)))


def _body_on_bushing(*, point=(0.0, 0.0, 0.0), axes=None, damping=C, gravity=(0.0, 0.0, 0.0)):
    """A free body (no joint) held by a bushing to the ground at ``point``."""
    b = mbd.ModelBuilder("bushed", gravity=gravity)
    b.add_body("block", mass=M, inertia=list(INERTIA), r=(0.0, 0.0, 0.0))
    b.bushing("mount", "ground", "block", point, stiffness=K, damping=damping, axes=axes)
    return b.build()


def _load(model, r, A, rdot=None, omega=None):
    """(f, n_bar) of the model's bushing with body 0 at (r, A)."""
    z = jnp.zeros((1, 3))
    state = BodyState(jnp.asarray(r)[None], jnp.asarray(A)[None],
                      z if rdot is None else jnp.asarray(rdot)[None],
                      z if omega is None else jnp.asarray(omega)[None])  # fmt: skip
    f, n = model.forces[0](0.0, state)
    return np.asarray(f[0]), np.asarray(n[0])


def test_force_and_torque_against_closed_forms_at_large_deflection():
    """Rotated axes, offset point. A translation by 5 cm along bushing axis y: force
    -k_y 0.05 along it, torque (s_bar x A^T f) from the offset. A turn by 0.6 rad about
    bushing axis z through the point: torque exactly -k_rz 0.6 about that axis (the
    rotation vector is exact, not a small-angle formula) and no force."""
    E, point = _axes(), np.array([0.1, -0.2, 0.3])
    model = _body_on_bushing(point=point, axes=E)
    f, n = _load(model, 0.05 * E[:, 1], np.eye(3))
    np.testing.assert_allclose(f, -K[1] * 0.05 * E[:, 1], rtol=ROUND_OFF)
    np.testing.assert_allclose(n, np.cross(point, f), rtol=ROUND_OFF)
    R = np.asarray(so3_exp(jnp.asarray(0.6 * E[:, 2])))
    r = point - R @ point  # turned about the bushing point: that point stays put
    f, n = _load(model, r, R)
    np.testing.assert_allclose(f, 0.0, rtol=0, atol=ROUND_OFF * K[2] * np.linalg.norm(point))
    np.testing.assert_allclose(R @ n, -K[5] * 0.6 * E[:, 2], rtol=ROUND_OFF)


def test_linearisation_is_the_stiffness_and_damping_in_the_bushing_axes():
    """d(force)/d(displacement) and d(force)/d(velocity) at the drawn pose, with the point
    at the centre of mass: -E diag(k) E^T and -E diag(c) E^T, translation and rotation
    (global rotation vectors) apart."""
    E = _axes()
    model = _body_on_bushing(axes=E)

    def load(x, xdot):  # x: global translation and rotation vector of the body
        A = so3_exp(x[3:])
        f, n = model.forces[0](0.0, BodyState(x[None, :3], A[None], xdot[None, :3],
                                              (A.T @ xdot[3:])[None]))  # fmt: skip
        return jnp.concatenate([f[0], A @ n[0]])

    z = jnp.zeros(6)
    stiff, damp = jax.jacfwd(load, argnums=(0, 1))(z, z)
    for gains, matrix in ((K, stiff), (C, damp)):
        expected = np.zeros((6, 6))
        expected[:3, :3] = E @ np.diag(gains[:3]) @ E.T
        expected[3:, 3:] = E @ np.diag(gains[3:]) @ E.T
        np.testing.assert_allclose(matrix, -expected, rtol=0, atol=ROUND_OFF * gains.max())


def _damped(k, c, m, x0, v0, t):
    """x(t) of m x'' + c x' + k x = 0 (underdamped)."""
    w0, zeta = math.sqrt(k / m), c / (2.0 * math.sqrt(k * m))
    wd = w0 * math.sqrt(1.0 - zeta**2)
    return np.exp(-zeta * w0 * t) * (
        x0 * np.cos(wd * t) + (v0 + zeta * w0 * x0) / wd * np.sin(wd * t)
    )


@pytest.fixture(scope="module")
def oscillating():
    """The block pushed along x and spun about z from rest at the drawn pose (bushing at
    its centre of mass, global axes): two uncoupled damped oscillators."""
    import dataclasses

    model = _body_on_bushing()
    model = dataclasses.replace(
        model,
        rdot0=model.rdot0.at[0, 0].set(0.3),
        omega0=model.omega0.at[0, 2].set(2.0),
    )
    return model, mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=T_END, h=H)


def test_free_body_on_a_bushing_is_two_damped_oscillators(oscillating):
    """x(t) and the angle about z follow m x'' + c x' + k x = 0 and I a'' + c_r a' + k_r a
    = 0 (RK4 at h = 1e-3: within 1e-10 and 5e-10 of the closed forms); the other
    coordinates stay 0."""
    _, sol = oscillating
    t = np.asarray(sol.t)
    x = _damped(K[0], C[0], M, 0.0, 0.3, t)
    angle = _damped(K[5], C[5], INERTIA[2], 0.0, 2.0, t)
    np.testing.assert_allclose(sol.r[:, 0, 0], x, rtol=0, atol=1e-10)  # 2.9e-11
    np.testing.assert_allclose(np.arctan2(sol.A[:, 0, 1, 0], sol.A[:, 0, 0, 0]), angle,
                               rtol=0, atol=5e-10)  # fmt: skip
    np.testing.assert_allclose(sol.r[:, 0, 1:], 0.0, rtol=0, atol=2e-11)  # 3.9e-12
    assert abs(float(x[-1])) > 1e-3  # still moving: the comparison is not of zeros


def test_energy_balance_with_damping():
    """Offset point, turned axes, gravity, a push in every direction: the energy (kinetic,
    gravity, bushing) plus the integral of the dissipation s_dot^T C s_dot stays at its
    initial value (Simpson's rule over the steps), while the energy itself falls."""
    import dataclasses

    model = _body_on_bushing(point=(0.05, -0.1, 0.08), axes=_axes(), gravity=(0, 0, -9.81))
    model = dataclasses.replace(
        model,
        rdot0=model.rdot0.at[0].set(jnp.array([0.2, -0.1, 0.3])),
        omega0=model.omega0.at[0].set(jnp.array([1.0, -2.0, 1.5])),
    )
    sol = mbd.simulate(model, formulation="se3", integrator="rkmk", t_end=T_END, h=H)
    energy = np.asarray(mbd.diagnostics.energy(model, sol).total)
    bushing = model.forces[0]
    power = jax.vmap(lambda r, A, v, w: bushing.dissipation(BodyState(r, A, v, w)))(
        sol.r, sol.A, sol.rdot, sol.omega
    )
    power = np.asarray(power)
    # Simpson's rule over pairs of steps (the trapezoid's O(h^2) error is ~1e-5 here)
    pairs = H / 3.0 * (power[0:-2:2] + 4.0 * power[1:-1:2] + power[2::2])
    dissipated = np.concatenate([[0.0], np.cumsum(pairs)])
    energy = energy[::2]
    assert energy[0] - energy[-1] > 0.05 * abs(energy[0])  # the dampers work
    np.testing.assert_allclose(energy + dissipated, energy[0], rtol=0, atol=5e-9 * abs(energy[0]))


def test_gradient_with_respect_to_stiffness_matches_central_differences(oscillating):
    """d x(T) / d k_x through the run (rkmk, 100 steps) against central differences."""
    model, _ = oscillating
    import equinox as eqx

    @jax.jit
    def final_x(kx):
        m = eqx.tree_at(lambda m: m.forces[0].stiffness, model,
                        model.forces[0].stiffness.at[0].set(kx))  # fmt: skip
        return mbd.simulate(m, formulation="se3", integrator="rkmk", t_end=0.1, h=H).r[-1, 0, 0]

    g = jax.grad(final_x)(K[0])
    e = 1e-3
    fd = (final_x(K[0] + e) - final_x(K[0] - e)) / (2 * e)
    assert float(g) == pytest.approx(float(fd), rel=1e-9, abs=0)  # 2.4e-10
    assert abs(float(g)) > 1e-6


def test_bushing_before_a_later_body_and_the_model_file_round_trip(tmp_path):
    """A bushing (and a spring-damper) to the ground added before another body keeps the
    ground (its index is resolved at build); save_model / load_model keep every leaf."""
    b = mbd.ModelBuilder("two")
    b.add_body("a", mass=1.0, inertia=[1, 1, 1], r=(0, 0, 0))
    b.bushing("mount", "ground", "a", (0.1, 0, 0), stiffness=K, damping=C, axes=_axes())
    b.spring_damper("spring", body_i="ground", point_i=(0, 0, 1), body_j="a",
                    point_j=(0, 0, 0), stiffness=10.0, rest_length=0.5)  # fmt: skip
    b.add_body("c", mass=1.0, inertia=[1, 1, 1], r=(5, 0, 0))
    b.bushing("link", "a", "c", (2.0, 0, 0), stiffness=K)
    model = b.build()
    mount, spring, link = model.forces
    assert (mount.body_i, mount.body_j, spring.body_i, link.body_j) == (2, 0, 2, 1)
    again = mbd.load_model(mbd.save_model(model, tmp_path / "two.json"))
    assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
    for x, y in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=ROUND_OFF)
    doc = json.loads((tmp_path / "two.json").read_text())
    doc["forces"][0]["stiffness"] = [1.0, 2.0]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(mbd.ModelFileError, match=r"forces\[0\] \('mount'\).*stiffness"):
        mbd.load_model(tmp_path / "bad.json")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stiffness": [1.0] * 5}, r"bushing 'b'\.stiffness: expected 6 non-negative"),
        ({"stiffness": K, "damping": -C}, r"bushing 'b'\.damping: expected 6 non-negative"),
        ({"stiffness": K, "axes": np.ones((3, 3))}, r"bushing 'b'\.axes: not a rotation"),
    ],
)
def test_bad_bushings_are_refused_by_name(options, message):
    b = mbd.ModelBuilder("bad")
    b.add_body("a", mass=1.0, inertia=[1, 1, 1], r=(0, 0, 0))
    with pytest.raises(mbd.ModelError, match=message):
        b.bushing("b", "ground", "a", (0, 0, 0), **options)
