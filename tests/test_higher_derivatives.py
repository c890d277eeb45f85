"""Second derivatives through the implicit roots: Hessian-vector products (forward over
reverse), jax.hessian, and jvp of grad against central differences of the gradient.

Regression: implicit_root used to stop gradients through the Newton matrix at the root, so
second derivatives missed -J^{-1} dJ J^{-1} and came out silently wrong.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.newton import implicit_root


def test_implicit_root_second_derivative_closed_form():
    """x(p) with x^3 + p x - 1 = 0: x' = -x / (3x^2 + p), x'' from differentiating x'."""

    def residual(x, p):
        return x**3 + p * x - 1.0

    def root(p):
        x = jnp.array([1.0])
        pc = jax.lax.stop_gradient(p)
        for _ in range(40):  # converged Newton, no gradient through it
            x = x - residual(x, pc) / (3 * x**2 + pc)
        # the hand-coded Jacobian path (as rA's Newton matrix), gradient-stopped params
        return implicit_root(
            residual, lambda x, d: x + d, x, p, 1, jacobian=lambda x: (3 * x**2 + pc)[:, None]
        )[0]

    p = 0.7
    x = float(root(p))
    dx = -x / (3 * x**2 + p)
    ddx = -(dx * (3 * x**2 + p) - x * (6 * x * dx + 1)) / (3 * x**2 + p) ** 2
    np.testing.assert_allclose(float(jax.grad(root)(p)), dx, rtol=ROUND_OFF)
    np.testing.assert_allclose(float(jax.grad(jax.grad(root))(p)), ddx, rtol=ROUND_OFF)
    np.testing.assert_allclose(float(jax.jacfwd(jax.jacrev(root))(p)), ddx, rtol=ROUND_OFF)
    assert abs(ddx) > 0.05  # the stopped-gradient bug gave a visibly different number


# every formulation with its default integrator (gen_alpha; rA hand-coded matrix)
# rA (hand-coded Newton matrix) in the default suite; rp and re (autodiff matrices; each
# a ~1 min compilation of forward-over-reverse) with `pytest -m slow`.
FORMULATIONS = (
    "rA",
    pytest.param("rp", marks=pytest.mark.slow),
    pytest.param("re", marks=pytest.mark.slow),
)
# re's Newton step stalls near 1e-9 on this model (a round-off floor of its unscaled step
# norm), so it runs at 1e-6; Newton's quadratic convergence leaves the root far tighter.
TOL = {"rA": 1e-8, "rp": 1e-8, "re": 1e-6}
KINDS = {
    "mass": lambda m: m.mass,
    "inertia": lambda m: m.inertia,
    "gravity": lambda m: m.gravity,
    # geometry and the initial state move the consistent start (initial projection)
    "joint point": lambda m: m.gcon("CD").s_bar_q_j,
    "initial positions": lambda m: m.r0,
}


def _direction(model, rng):
    """One random direction over all KINDS together (zero elsewhere)."""
    zero = jax.tree_util.tree_map(jnp.zeros_like, model)
    for name, where in KINDS.items():
        step = rng.normal(size=where(model).shape)
        if name == "inertia":  # symmetric: the run rejects a non-symmetric inertia
            step = 0.5 * (step + np.swapaxes(step, -1, -2))
        zero = eqx.tree_at(where, zero, jnp.asarray(step))
    return zero


# -m slow: test_simulate_hessian_masses differentiates the same run twice in the default suite
@pytest.mark.slow
@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_simulate_hessian_vector_product(formulation):
    model = mbd.models.double_pendulum()
    rng = np.random.default_rng(3)
    d = _direction(model, rng)

    def loss(m):
        sol = mbd.simulate(m, formulation=formulation, t_end=0.008, h=1e-3, tol=TOL[formulation])
        return jnp.sum(sol.r[:, :, 1:] ** 2) + jnp.sum(sol.omega**2) + 1e-4 * jnp.sum(sol.lam)

    # one program (a ~1 min compilation): its primal output is the gradient, which the
    # central differences of the gradient below evaluate (a separate jit(grad) compiled a
    # second program of the same forward and reverse passes)
    grad_and_hvp = jax.jit(lambda m, d_: jax.jvp(jax.grad(loss), (m,), (d_,)))
    hvp = grad_and_hvp(model, d)[1]

    def grad(step):
        return grad_and_hvp(jax.tree_util.tree_map(lambda a, b: a + step * b, model, d), d)[0]

    eps = 1e-3
    fd = jax.tree_util.tree_map(
        lambda a, b, c, e: (8 * (a - b) - (c - e)) / (12 * eps),
        grad(eps),
        grad(-eps),
        grad(2 * eps),
        grad(-2 * eps),
    )
    for name, where in KINDS.items():
        ad, ref = np.asarray(where(hvp)), np.asarray(where(fd))
        scale = np.max(np.abs(ref))
        assert scale > 1e-6, name
        np.testing.assert_allclose(ad, ref, atol=1e-6 * scale, err_msg=f"{formulation} {name}")


@pytest.mark.slow  # compiling the hessian of kinematics takes ~2 min on 2 cores
def test_kinematics_hessian():
    """jax.hessian (forward over reverse) through kinematics, driver parameters of the slider
    crank; jvp of grad is the simulate test above."""
    model = mbd.models.slider_crank()

    def loss(constants):
        m = eqx.tree_at(lambda m: m.drivers[0].constants, model, constants)
        kin = mbd.kinematics(m, formulation="rA", t_end=0.05, h=1e-2, tol=1e-12)
        return jnp.sum(kin.r[:, 2, 0] ** 2) + jnp.sum(kin.lam[:, -1]) * 1e-3

    c0 = model.drivers[0].constants
    hessian = jax.jit(jax.hessian(loss))(c0).reshape(c0.size, c0.size)
    grad = jax.jit(jax.grad(loss))
    eps = 1e-4
    for i in range(c0.size):
        e = jnp.zeros(c0.size).at[i].set(1.0).reshape(c0.shape)
        fd = (grad(c0 + eps * e) - grad(c0 - eps * e)).reshape(-1) / (2 * eps)
        np.testing.assert_allclose(hessian[:, i], fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())


def _hessian_against_fd(loss, p, eps):
    """jax.hessian of ``loss`` at ``p`` (a vector) and central differences of its gradient,
    both from one compiled program (jacfwd of grad returns the gradient as an aux)."""

    def grad_twice(p_):
        g = jax.grad(loss)(p_)
        return g, g

    hessian_and_grad = jax.jit(jax.jacfwd(grad_twice, has_aux=True))
    hessian = np.asarray(hessian_and_grad(p)[0])
    fd = np.stack(
        [
            (hessian_and_grad(p + eps * e)[1] - hessian_and_grad(p - eps * e)[1]) / (2 * eps)
            for e in np.eye(p.size)
        ],
        axis=1,
    )
    return hessian, fd


def _double_pendulum_mass_loss(steps, **options):
    model = mbd.models.double_pendulum()

    def loss(mass):
        m = eqx.tree_at(lambda m_: m_.mass, model, mass)
        sol = mbd.simulate(m, t_end=steps * 1e-3, h=1e-3, **options)
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.omega[-1] ** 2)

    return loss, model.mass


@pytest.mark.parametrize(
    "steps, options",
    [
        # rA gen_alpha (the default) with tight roots: the differences of the gradient see
        # the Newton tolerance divided by the step (1e-5 relative at the default tolerance)
        (200, {"formulation": "rA", "tol": 1e-11}),
        pytest.param(1000, {"formulation": "rA", "tol": 1e-11}, marks=pytest.mark.slow),
        pytest.param(1000, {"integrator": "rkmk"}, marks=pytest.mark.slow),
    ],
)
def test_simulate_hessian_masses(steps, options):
    """jax.hessian (jacfwd of grad: vmap over the tangents of jvp of grad) through simulate.
    Regression: the batching rules of the Newton loop gave the tangent-batched derivative a
    doubled batch axis (a TypeError in the step's slicing)."""
    loss, mass = _double_pendulum_mass_loss(steps, **options)
    # masses 78 and 39 kg; 200 steps: 4e-10 relative (steps 1e-2: 4e-8, 1e-4: 6e-10)
    hessian, fd = _hessian_against_fd(loss, mass, 1e-3)
    # both shared with the -m slow 1000-step and rkmk cases (not measured; 200 steps: 1.6e-16
    # and 4.2e-10 of the largest entry)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-9, atol=1e-12 * np.abs(hessian).max())
    np.testing.assert_allclose(hessian, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())


@pytest.mark.slow  # ~2 min compilation of the hessian of kinematics on 2 cores
@pytest.mark.parametrize("steps", [200, 1000])
def test_kinematics_hessian_long(steps):
    """jax.hessian through kinematics over a long horizon: the slider crank's driver
    parameters (initial angle and speed)."""
    model = mbd.models.slider_crank()
    c0 = model.drivers[0].constants
    h = 1e-3

    def loss(p):
        m = eqx.tree_at(lambda m_: m_.drivers[0].constants, model, p.reshape(c0.shape))
        kin = mbd.kinematics(m, t_end=steps * h, h=h, tol=1e-12)
        return jnp.sum(kin.r[-1] ** 2) + 1e-3 * jnp.sum(kin.lam[-1])

    hessian, fd = _hessian_against_fd(loss, c0.reshape(-1), 1e-5)
    np.testing.assert_allclose(hessian, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())


def test_contact_impulses_second_derivatives():
    """The exact-contact step's implicit root (the Alart-Curnier equations of one slot,
    jaxmbd/integrators/moreau_jean.py, shared by the absolute and the joint formulations)
    differentiated twice: a ball hitting the ground while sliding (the impulse on the edge
    of the friction disk), jax.hessian of its impulses with respect to the pre-impact
    velocities and the friction coefficient, against central differences of the gradient.
    Regression: the root's derivative rule was first order only, and the Hessian came out
    non-symmetric and wrong (without an error)."""
    from jaxmbd.integrators.moreau_jean import (
        _Contact,
        _implicit_root,
        _newton,
        _proximal_jacobian,
        _proximal_residual,
    )

    # the Delassus matrix of a ball of radius 0.05, mass 1 and inertia 0.4 m r^2 on a plane:
    # normal 1/m, tangents 1/m + r^2/I; a small coupling keeps the normal impulse from
    # being linear in the parameters
    delassus = jnp.array([[1.0, 0.1, -0.05], [0.1, 3.5, 0.02], [-0.05, 0.02, 3.5]])

    def impulses(p):  # p: normal, two tangential free velocities, friction coefficient
        contact = _Contact(p[:3], delassus, 1.0 / jnp.diagonal(delassus), p[3:], jnp.ones(1))
        P, *_ = _newton(
            lambda x: _proximal_residual(x, contact), jnp.zeros(3), 1e-15, 50,
            jacobian=lambda x: _proximal_jacobian(x, contact),
        )  # fmt: skip
        return _implicit_root(_proximal_residual, _proximal_jacobian, P, contact)

    def loss(p):
        P = impulses(p)
        return P[0] ** 2 + P[1] * P[2] + jnp.sum(jnp.sin(P))

    p = jnp.array([-1.8, 3.0, 1.5, 0.3])  # sliding: |P_T| = mu P_N
    P = impulses(p)
    np.testing.assert_allclose(np.linalg.norm(P[1:]), 0.3 * P[0], rtol=ROUND_OFF)
    hessian, fd = _hessian_against_fd(loss, p, 1e-5)
    np.testing.assert_allclose(hessian, hessian.T, rtol=0, atol=ROUND_OFF * np.abs(hessian).max())
    np.testing.assert_allclose(hessian, fd, rtol=0, atol=2e-10 * np.abs(fd).max())


@pytest.mark.slow  # forward over reverse through the hard-contact step: 1-4 min to compile
@pytest.mark.parametrize("formulation", ["rA", "joint"])
def test_simulate_hessian_through_an_impact(formulation):
    """jax.hessian through 100 steps of ``contact="hard"`` (the Moreau-Jean step, its
    velocity and position roots): a ball dropped 2 cm while sliding at 0.5 m/s bounces
    once; the loss of its apex and speed with respect to (restitution, friction, mass
    scale) against central differences of its gradient (met to 8e-11), symmetric to
    round-off. The mass scale changes nothing in this motion: its row and column are 0."""
    g, radius, e, mu = 9.81, 0.05, 0.8, 0.1
    b = mbd.ModelBuilder("ball", gravity=(0.0, 0.0, -g))
    b.add_body("ball", mass=1.0, inertia=[0.4 * radius**2] * 3, r=(0.0, 0.0, 0.02 + radius),
               rdot=(0.5, 0.0, 0.0), shapes=[mbd.geometry.sphere(radius)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=mu, restitution=e)
    model = b.build()

    def loss(p):
        m = eqx.tree_at(lambda m_: (m_.contacts.restitution, m_.contacts.friction), model,
                        (p[:1], p[1:2]))  # fmt: skip
        m = eqx.tree_at(lambda m_: m_.mass, m, m.mass * p[2])
        sol = mbd.simulate(m, formulation=formulation, contact="hard", t_end=0.1, h=1e-3)
        z, vz, vx = sol.r[-1, 0, 2], sol.rdot[-1, 0, 2], sol.rdot[-1, 0, 0]
        return 1e3 * (z - radius + vz**2 / (2 * g)) ** 2 + vx**2 + z * vx

    hessian, fd = _hessian_against_fd(loss, jnp.array([e, mu, 1.0]), 1e-5)
    scale = np.abs(fd).max()
    assert abs(hessian[0, 0]) > 0.3 * scale  # the first-order rule gave 0 here
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-12 * scale)
    np.testing.assert_allclose(hessian, fd, atol=1e-8 * scale)
