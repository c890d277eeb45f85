"""SO(3) maps, Euler parameters and ZXZ angles against autodiff and closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

from jaxmbd import hat, so3_exp, so3_log, so3_right_jacobian, vee
from jaxmbd.lie import orthonormalize
from jaxmbd.lie.rotations import (
    A_to_ep,
    A_to_zxz,
    ep_B,
    ep_E,
    ep_G,
    ep_to_A,
    zxz_Bbar,
    zxz_to_A,
)


def random_rotation(rng):
    w = rng.normal(size=3)
    return np.asarray(so3_exp(w / np.linalg.norm(w) * rng.uniform(0.1, 3.0)))


def test_hat_vee(rng):
    a, b = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(hat(a) @ b, np.cross(a, b), rtol=0, atol=ROUND_OFF)
    np.testing.assert_array_equal(vee(hat(a)), a)


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1e-4, 0.3, 2.0, np.pi - 1e-3, np.pi - 1e-9])
def test_exp_log_roundtrip(rng, angle):
    axis = rng.normal(size=3)
    w = axis / np.linalg.norm(axis) * angle
    R = so3_exp(w)
    np.testing.assert_allclose(R.T @ R, np.eye(3), rtol=0, atol=ROUND_OFF)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=ROUND_OFF)
    np.testing.assert_allclose(so3_log(R), w, rtol=0, atol=ROUND_OFF * angle)


def test_exp_matches_series(rng):
    w = 0.7 * rng.normal(size=3)
    W = np.asarray(hat(w))
    series, term = np.eye(3), np.eye(3)
    for k in range(1, 30):
        term = term @ W / k
        series = series + term
    np.testing.assert_allclose(so3_exp(w), series, rtol=0, atol=ROUND_OFF)


@pytest.mark.parametrize("fn", [so3_exp, so3_right_jacobian])
def test_gradients_finite_at_zero(fn):
    for jac in (jax.jacfwd(fn), jax.jacrev(fn)):
        g = jac(jnp.zeros(3))
        assert np.all(np.isfinite(g))
    # d exp(w)/dw at 0 is the hat map
    J = jax.jacfwd(so3_exp)(jnp.zeros(3))
    for k in range(3):
        np.testing.assert_allclose(J[..., k], hat(np.eye(3)[k]), rtol=0, atol=ROUND_OFF)


def test_log_gradient_at_identity():
    J = jax.jacfwd(lambda w: so3_log(so3_exp(w)))(jnp.zeros(3))
    np.testing.assert_allclose(J, np.eye(3), rtol=0, atol=ROUND_OFF)
    H = jax.hessian(lambda w: jnp.sum(so3_exp(w)))(jnp.zeros(3))
    assert np.all(np.isfinite(H))


@pytest.mark.parametrize("scale", [1e-6, 0.5, 2.5])
def test_right_jacobian(rng, scale):
    """exp(w + dw) ~= exp(w) exp(J_r(w) dw): compare with autodiff of exp."""
    w = scale * rng.normal(size=3)
    dw = rng.normal(size=3)
    R = so3_exp(w)
    dR = jax.jvp(so3_exp, (jnp.asarray(w),), (jnp.asarray(dw),))[1]
    np.testing.assert_allclose(vee(R.T @ dR), so3_right_jacobian(w) @ dw, rtol=0, atol=ROUND_OFF)


def test_orthonormalize(rng):
    R = random_rotation(rng)
    noisy = R + 1e-6 * rng.normal(size=(3, 3))
    Q = orthonormalize(noisy)
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), rtol=0, atol=ROUND_OFF)
    assert np.abs(Q - R).max() < 4e-6


def test_euler_parameters(rng):
    p = rng.normal(size=4)
    p /= np.linalg.norm(p)
    A = np.asarray(ep_to_A(p))
    np.testing.assert_allclose(A.T @ A, np.eye(3), rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(A_to_ep(A), p * np.sign(p[0]), rtol=0, atol=ROUND_OFF)
    # G G^T = I, G p = 0, and A = E G^T (Haug 1989)
    G, E = np.asarray(ep_G(p)), np.asarray(ep_E(p))
    np.testing.assert_allclose(G @ G.T, np.eye(3), rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(G @ p, 0, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(E @ G.T, A, rtol=0, atol=ROUND_OFF)
    # omega_bar = 2 G p_dot and omega = 2 E p_dot along a curve
    p_dot = rng.normal(size=4)
    p_dot -= p * (p @ p_dot)
    A_dot = jax.jvp(ep_to_A, (jnp.asarray(p),), (jnp.asarray(p_dot),))[1]
    np.testing.assert_allclose(vee(A.T @ A_dot), 2 * G @ p_dot, rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(vee(A_dot @ A.T), 2 * E @ p_dot, rtol=0, atol=ROUND_OFF)
    # B(p, s) = d(A(p) s)/dp, eq. 23a
    s = rng.normal(size=3)
    B_ad = jax.jacfwd(lambda q: ep_to_A(q) @ s)(jnp.asarray(p))
    np.testing.assert_allclose(ep_B(p, s), B_ad, rtol=0, atol=ROUND_OFF)


@pytest.mark.parametrize(
    "pivot", [np.eye(3), np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])]
)
def test_ep_from_matrix_all_branches(pivot):
    p = np.asarray(A_to_ep(pivot))
    np.testing.assert_allclose(ep_to_A(p), pivot, rtol=0, atol=ROUND_OFF)


def test_zxz(rng):
    eps = np.array([0.4, 1.2, -2.1])
    A = np.asarray(zxz_to_A(eps))
    np.testing.assert_allclose(A_to_zxz(A), eps, rtol=0, atol=ROUND_OFF)
    # B_bar of eq. 43b: omega_bar = B_bar eps_dot
    eps_dot = rng.normal(size=3)
    A_dot = jax.jvp(zxz_to_A, (jnp.asarray(eps),), (jnp.asarray(eps_dot),))[1]
    np.testing.assert_allclose(vee(A.T @ A_dot), zxz_Bbar(eps) @ eps_dot, rtol=0, atol=ROUND_OFF)
    assert abs(np.linalg.det(zxz_Bbar(np.array([0.3, 0.0, 0.2])))) < ROUND_OFF  # singular at 0
