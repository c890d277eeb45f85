"""The one copy of the rigid-body physics (jaxmbd.forces._rigid_body) and of the minimum-norm solve
(jaxmbd.newton._min_norm): each function against an independent reference, and short runs of
three formulations against the values they gave before the copies were merged."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces import BodyState, BodyTorque
from jaxmbd.forces._rigid_body import (
    euler_tensor,
    gyroscopic_damping,
    gyroscopic_torque,
    mass_blocks,
    newton_euler_forces,
)
from jaxmbd.formulations import director, rotmat
from jaxmbd.newton import ILL_CONDITIONED, NONFINITE, SUCCESS
from jaxmbd.newton._min_norm import min_norm_solve

REFERENCE = Path(__file__).parent / "data" / "rigid_body_reference.npz"


def forced_pair():
    """Two bodies with full (non-principal) inertia, a spin, a spring-damper, a body torque
    and an oblique gravity: every term of the Newton-Euler equations is non-zero."""
    b = mbd.ModelBuilder("forced_pair", gravity=(0.3, -0.2, -9.81))
    J1 = np.array([[0.02, 0.003, -0.001], [0.003, 0.015, 0.002], [-0.001, 0.002, 0.01]])
    b.add_body("arm", mass=1.3, inertia=J1, r=(0.2, 0.1, 0.0), axes=((1, 0, 0), (0, 0.8, 0.6)))
    b.add_body(
        "bob",
        mass=0.7,
        inertia=[0.004, 0.006, 0.005],
        r=(0.4, 0.2, -0.1),
        axes=((0.0, 0.6, 0.8), (1.0, 0.0, 0.0)),
        omega=(1.0, -2.0, 3.0),
    )
    axis = np.array([0.1, 0.2, 1.0]) / np.linalg.norm([0.1, 0.2, 1.0])
    b.revolute("hinge", body_i="ground", body_j="arm", point=(0.0, 0.0, 0.0), axis=tuple(axis))
    b.spherical("ball", body_i="arm", body_j="bob", point=(0.4, 0.2, 0.0))
    b.spring_damper(
        "spring", body_i="ground", point_i=(0.5, 0.0, 0.3), body_j="bob",
        point_j=(0.4, 0.2, -0.1), stiffness=40.0, damping=0.5, rest_length=0.2,
    )  # fmt: skip
    torque = jnp.array([0.1, -0.2, 1.0])
    b.add_force(
        BodyTorque(body=0, fn=lambda t, p: p * torque * jnp.cos(3 * t), params=jnp.asarray(0.05))
    )
    return b.build()


def _random_inertia(rng, nb):
    """Symmetric positive definite inertias that satisfy the triangle inequalities: those
    of clouds of point masses."""
    masses = rng.uniform(0.1, 1.0, (nb, 7))
    points = rng.normal(size=(nb, 7, 3))
    E = np.einsum("bk,bki,bkj->bij", masses, points, points)
    J = np.trace(E, axis1=1, axis2=2)[:, None, None] * np.eye(3) - E
    return masses, points, E, J


def test_euler_tensor_is_the_second_moment_of_mass_of_both_papers():
    """E = tr(J)/2 I - J equals the second moment sum m x x^T of point clouds, the
    director formulation's Euler tensor and the rotmat formulation's Poinsot tensor are
    this one function, and the formula each had before gives the same bits; a box gives
    Dumitriu & Margaritescu's K = m/12 diag(l^2, a^2, b^2) (eq. 11)."""
    rng = np.random.default_rng(0)
    _, _, E, J = _random_inertia(rng, 5)
    shared = np.asarray(euler_tensor(jnp.asarray(J)))
    np.testing.assert_allclose(shared, E, rtol=0, atol=ROUND_OFF * np.abs(E).max())
    assert director.euler_tensor is euler_tensor
    assert rotmat.poinsot_tensor is euler_tensor
    Jj = jnp.asarray(J)
    old_director = 0.5 * jnp.trace(Jj, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3) - Jj
    old_rotmat = 0.5 * jnp.trace(Jj, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3) - Jj
    np.testing.assert_array_equal(shared, np.asarray(old_director))
    np.testing.assert_array_equal(shared, np.asarray(old_rotmat))
    m, (lx, ly, lz) = 2.0, (0.3, 0.2, 0.1)
    box = m / 12 * np.diag([ly**2 + lz**2, lx**2 + lz**2, lx**2 + ly**2])
    expected = m / 12 * np.diag([lx**2, ly**2, lz**2])
    np.testing.assert_allclose(
        euler_tensor(jnp.asarray(box)), expected, rtol=0, atol=ROUND_OFF * np.abs(expected).max()
    )


def test_mass_blocks_and_gyroscopic_terms():
    rng = np.random.default_rng(1)
    nb = 3
    mass = rng.uniform(0.5, 2.0, nb)
    _, _, _, J = _random_inertia(rng, nb)
    omega = rng.normal(size=(nb, 3))
    M = np.asarray(mass_blocks(jnp.asarray(mass), jnp.asarray(J)))
    M_twist = np.asarray(mass_blocks(jnp.asarray(mass), jnp.asarray(J), angular_first=True))
    for b in range(nb):
        expected = np.zeros((6, 6))
        expected[:3, :3] = mass[b] * np.eye(3)
        expected[3:, 3:] = J[b]
        np.testing.assert_array_equal(M[b], expected)
        np.testing.assert_array_equal(
            M_twist[b], expected[[3, 4, 5, 0, 1, 2]][:, [3, 4, 5, 0, 1, 2]]
        )
    gyro = np.asarray(gyroscopic_torque(jnp.asarray(J), jnp.asarray(omega)))
    expected = np.cross(omega, np.einsum("bij,bj->bi", J, omega))
    np.testing.assert_allclose(gyro, expected, rtol=0, atol=ROUND_OFF * np.abs(expected).max())
    # the damping block is the derivative of the gyroscopic torque, body by body
    D = np.asarray(gyroscopic_damping(jnp.asarray(J), jnp.asarray(omega)))
    for b in range(nb):
        auto = jax.jacfwd(lambda w, b=b: gyroscopic_torque(jnp.asarray(J[b][None]), w[None])[0])(
            jnp.asarray(omega[b])
        )
        np.testing.assert_allclose(D[b], auto, rtol=0, atol=ROUND_OFF * np.abs(auto).max())


def test_newton_euler_forces_of_gravity_torque_and_spring():
    """(f, n_bar - omega x J omega) with every force element of the model, against the
    forces written out by hand."""
    model = forced_pair()
    rng = np.random.default_rng(2)
    state = BodyState(
        jnp.asarray(rng.normal(size=(2, 3))),
        model.A0,
        jnp.asarray(rng.normal(size=(2, 3))),
        jnp.asarray(rng.normal(size=(2, 3))),
    )
    t = 0.3
    f, torque = (np.asarray(x) for x in newton_euler_forces(model, t, state))
    r, A, rdot, omega = (np.asarray(x) for x in state)
    spring = model.forces[0]
    s_bar = np.asarray(spring.s_bar_q_j)
    p = np.asarray(spring.s_bar_p_i)  # ground point
    x = r[1] + A[1] @ s_bar
    xdot = rdot[1] + A[1] @ np.cross(omega[1], s_bar)
    d = x - p
    length = np.linalg.norm(d)
    tension = 40.0 * (length - 0.2) + 0.5 * (d / length) @ xdot
    f_expected = np.asarray(model.mass)[:, None] * np.asarray(model.gravity)
    f_expected[1] -= tension * d / length
    n_expected = np.zeros((2, 3))
    n_expected[1] = np.cross(s_bar, A[1].T @ (-tension * d / length))
    n_expected[0] = 0.05 * np.array([0.1, -0.2, 1.0]) * np.cos(3 * t)
    J = np.asarray(model.inertia)
    n_expected -= np.cross(omega, np.einsum("bij,bj->bi", J, omega))
    np.testing.assert_allclose(f, f_expected, rtol=0, atol=ROUND_OFF * np.abs(f_expected).max())
    np.testing.assert_allclose(
        torque, n_expected, rtol=0, atol=ROUND_OFF * np.abs(n_expected).max()
    )


def test_min_norm_solve():
    """Full row rank: G x = b with x in range(G^T) (the least-norm solution, = pinv);
    dependent rows: reported (never a silent least-squares answer) unless ``redundant``."""
    rng = np.random.default_rng(3)
    G = rng.normal(size=(4, 9))
    b = rng.normal(size=4)
    x, status = min_norm_solve(jnp.asarray(G), jnp.asarray(b))
    assert int(status) == SUCCESS
    np.testing.assert_allclose(G @ np.asarray(x), b, rtol=0, atol=ROUND_OFF * np.abs(b).max())
    x_ref = np.linalg.pinv(G) @ b
    np.testing.assert_allclose(np.asarray(x), x_ref, rtol=0, atol=ROUND_OFF * np.abs(x_ref).max())
    dependent = np.vstack([G, G[0] + 2.0 * G[1]])
    rhs = dependent @ np.asarray(x)  # consistent
    _, status = min_norm_solve(jnp.asarray(dependent), jnp.asarray(rhs))
    assert int(status) in (ILL_CONDITIONED, NONFINITE)
    x_r, status = min_norm_solve(jnp.asarray(dependent), jnp.asarray(rhs), redundant=True)
    assert int(status) == SUCCESS
    np.testing.assert_allclose(
        np.asarray(x_r), np.asarray(x), rtol=0, atol=ROUND_OFF * np.abs(np.asarray(x)).max()
    )


RUNS = {
    # the reference's full Newton ended on an exact step (at round-off); tol 1e-12 asks
    # the same of the current one, which stops once its simplified correction passes
    "fp_rA_gen_alpha": dict(formulation="rA", newton="full", tol=1e-12),
    "fp_se3_rkmk": dict(formulation="se3", integrator="rkmk"),
    "fp_rotmat_rk": dict(formulation="rotmat", integrator="rk"),
}


@pytest.mark.parametrize("case", sorted(RUNS))
def test_short_runs_match_the_values_before_the_merge(case):
    """Five steps of the forced pair give what they gave with the formulations' own copies
    of the Newton-Euler terms and the second-moment tensor (commit 5631440). The runs
    differ from those only by round-off: the consistent start's velocity projection now
    uses the equilibrated, condition-checked solve (1 ulp), and an implicit step's Newton
    iterate may end elsewhere inside its tolerance."""
    reference = np.load(REFERENCE)
    sol = mbd.simulate(forced_pair(), t_end=0.005, h=1e-3, **RUNS[case])
    for field in ("r", "A", "rdot", "omega", "lam"):
        expected = reference[f"{case}/{field}"]
        got = np.asarray(getattr(sol, field))
        scale = np.max(np.abs(expected))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale, err_msg=field)
