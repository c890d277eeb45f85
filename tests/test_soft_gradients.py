"""Gradients through MuJoCo's soft contact (``contact="soft", limits="soft"``) of robots read
from MJCF, against converged central differences.

Each step's acceleration is the optimum of MuJoCo's convex problem, differentiated
implicitly (:mod:`jaxmbd.soft_constraints.implicit`); these tests check the whole chain (the
collisions, the rows' parameters, the solve's implicit tangent, the Euler step) on three
runs: a box sliding on a plane to rest (initial velocity, friction, solref), a sphere
bouncing on a plane (initial height, solref, mass) and dm_control's hopper standing on its
foot with constant controls (the controls, the initial qpos). A reference is the Richardson
extrapolation of central differences at eps and eps/2, accepted only when that at eps/2 and
at eps/4 agree (the difference quotient has converged: no row changes its state within the
stencil); the gradient must then match it to a relative 1e-6. Where a contact opens or
closes (a ball just touching at t = 0, one that bounces off) values and gradients are finite.
"""

from __future__ import annotations

import os
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.tree import body_velocities, poses

RTOL = 1e-6  # the slow hopper's (not measured here); the default run passes its own below

BOX = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" solref="0.02 1"/>
    <body name="box" pos="0 0 0.0499">
      <freejoint/>
      <geom name="box" type="box" size=".05 .05 .05" mass="1" friction="0.8 0.005 0.0001"
            solref="0.02 1"/>
    </body>
  </worldbody>
</mujoco>
"""

# solref in MuJoCo's direct form (-stiffness, -damping), lightly damped: the ball bounces
# back to 0.19 m (a damping ratio of 0.1 in the standard form still lands it plastically,
# rebounding 1.5 cm, through the impedance's share of the force)
BALL = """
<mujoco>
  <option timestep="0.002" cone="{cone}"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" solref="-5000 -5"/>
    <body name="ball" pos="0 0 0.3">
      <freejoint/>
      <geom name="ball" type="sphere" size=".05" mass="1" solref="-5000 -5"/>
    </body>
  </worldbody>
</mujoco>
"""

HOPPER = os.path.join(os.path.dirname(__import__("dm_control").__file__), "suite", "hopper.xml")


def _load(tmp_path_factory, name, xml):
    path = tmp_path_factory.mktemp("soft_gradients") / f"{name}.xml"
    path.write_text(xml)
    return mbd.load_model(str(path))


def with_state(model, qpos=None, qvel=None):
    """``model`` starting from its tree's (qpos, qvel), differentiably: the bodies' initial
    states follow from the tree's kinematics, as :meth:`jaxmbd.Model.with_joint_state` sets
    them (which reads numbers, not traced arrays)."""
    tree = model.tree
    qpos = tree.qpos_init if qpos is None else qpos
    qvel = tree.qvel_init if qvel is None else qvel
    tree = eqx.tree_at(lambda t: (t.qpos_init, t.qvel_init), tree, (qpos, qvel))
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    return eqx.tree_at(
        lambda m: (m.tree, m.r0, m.A0, m.rdot0, m.omega0), model, (tree, p.c, p.R, rdot, omega)
    )


def with_contact(model, **fields):
    """The first contact group's pair parameters replaced (``friction``, ``solref``, ...)."""
    group = model.constraint_model.contacts[0]
    names = tuple(fields)
    return eqx.tree_at(
        lambda m: tuple(getattr(m.constraint_model.contacts[0], n) for n in names),
        model,
        tuple(jnp.broadcast_to(fields[n], jnp.shape(getattr(group, n))) for n in names),
    )


def run(model, t_end, h, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.AssemblyWarning)
        return mbd.simulate(model, t_end=t_end, h=h, contact="soft", limits="soft",
                            integrator="euler", **options)  # fmt: skip


def reference(f, x, eps):
    """The converged central-difference derivative of scalar ``f`` at scalar ``x``:
    Richardson's extrapolation of the quotients at eps and eps/2, after checking that the
    quotients at eps/2 and eps/4 agree (to 1e-4; the extrapolation's error is then far
    below RTOL where f is smooth within the stencil)."""

    def quotient(e):
        return (float(f(x + e)) - float(f(x - e))) / (2 * e)

    d1, d2, d4 = quotient(eps), quotient(eps / 2), quotient(eps / 4)
    scale = max(abs(d2), 1e-8)
    # a precondition on the reference, not a bound on the gradient (7.8e-5 of it measured)
    assert abs(d2 - d4) <= 1e-4 * scale, f"central differences not converged: {d1, d2, d4}"
    return (4 * d2 - d1) / 3, abs((4 * d4 - d2) / 3 - (4 * d2 - d1) / 3)


def assert_gradient(grad, f, x, eps, atol=0.0, rtol=RTOL):
    want, spread = reference(f, x, eps)
    got = float(grad)
    print(
        f"gradient {got:.12g}, differences {want:.12g}, relative error "
        f"{abs(got - want) / max(abs(want), 1e-300):.2g}"
    )  # fmt: skip (shown with -s)
    assert abs(got - want) <= rtol * abs(want) + atol + 2 * spread, (got, want, spread)


# ------------------------------------------------------------------ a box sliding to rest


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    model = _load(tmp_path_factory, "box", BOX)
    group = model.constraint_model.contacts[0]
    assert (group.type1, group.type2) == (0, 6)  # plane, box: four corner slots

    def final_x(v0, mu, timeconst):
        m = with_state(model, qvel=jnp.zeros(6).at[0].set(v0))
        m = with_contact(m, friction=jnp.asarray(group.friction).at[:, 0:2].set(mu),
                         solref=jnp.asarray(group.solref).at[:, 0].set(timeconst))  # fmt: skip
        sol = run(m, 0.4, 0.005)
        return sol.qpos[-1, 0], sol.qvel[-1]

    return final_x


def test_box_slides_to_rest_gradients(box):
    """d(final x)/d(initial velocity, friction, solref time constant) of a box that slides
    6 cm and stops (measured: relative errors 2e-11, 1e-7, 5e-9)."""
    x0 = (1.0, 0.8, 0.02)
    x, qvel = box(*x0)
    grads = jax.grad(lambda *a: box(*a)[0], argnums=(0, 1, 2))(*x0)
    assert np.abs(np.asarray(qvel)).max() < 1e-3  # at rest
    assert 0.05 < float(x) < 0.07
    assert all(np.isfinite(float(g)) for g in grads)
    # Coulomb's block would stop after v0^2 / (2 mu g) = 6.4 cm, with d/dv0 = 0.13 and
    # d/dmu = -0.08; the soft friction (its regularised force below mu N while sliding)
    # lets it slide 6.0 cm: the same signs and orders of magnitude
    assert 0.05 < float(grads[0]) < 0.2 and -0.3 < float(grads[1]) < -0.05
    rtols = (2e-10, 4e-7, 2e-8)  # measured 3.4e-11, 9e-8, 4.5e-9
    for i, eps in enumerate((1e-5, 1e-5, 1e-6)):

        def f(value, i=i):
            args = list(x0)
            args[i] = value
            return box(*args)[0]

        assert_gradient(grads[i], f, x0[i], eps, rtol=rtols[i])


# ------------------------------------------------------------- a ball bouncing on a plane

T_BALL, H_BALL = 0.36, 0.002


@pytest.fixture(scope="module")
def ball(tmp_path_factory):
    """final height of the ball (z0, contact stiffness -solref[0], mass, vz0) -> (z_end,
    trajectory z), and its jitted gradient (one program for every start)."""
    model = _load(tmp_path_factory, "ball", BALL.format(cone="pyramidal"))
    group = model.constraint_model.contacts[0]
    assert (group.type1, group.type2) == (0, 2)  # plane, sphere

    def final_z(z0, stiffness, mass, vz0=0.0):
        qpos = jnp.asarray(model.tree.qpos_init).at[2].set(z0)
        m = with_state(model, qpos=qpos, qvel=jnp.zeros(6).at[2].set(vz0))
        m = with_contact(m, solref=jnp.asarray(group.solref).at[:, 0].set(-stiffness))
        m = eqx.tree_at(lambda m: m.mass, m, jnp.asarray(m.mass).at[0].set(mass))
        sol = run(m, T_BALL, H_BALL)
        return sol.qpos[-1, 2], sol.qpos[:, 2]

    grad = jax.jit(jax.grad(lambda *a: final_z(*a)[0], argnums=(0, 1, 2, 3)))
    return final_z, grad


def test_ball_bounce_gradients(ball):
    """d(height after the bounce)/d(initial height, contact stiffness, mass): the ball
    falls 0.25 m, bounces and is in flight at the end."""
    final_z, grad = ball
    x0 = (0.3, 5000.0, 1.0)
    z, zs = final_z(*x0)
    zs = np.asarray(zs)
    # in contact (below the radius) in the middle, in flight at the end, rising or near apex
    assert zs.min() < 0.05 and zs[-1] > 0.1 and np.argmin(zs) < len(zs) - 20
    grads = grad(*x0, 0.0)
    assert all(np.isfinite(float(g)) for g in grads)
    # the contact force scales with D = 1 / R from the file's invweight0 (kept fixed, as
    # MuJoCo's body_invweight0 until mj_setConst): the mass does change the bounce
    assert abs(float(grads[2])) > 1e-4
    rtols = (1e-11, 1e-8, 1e-7)  # measured 1.5e-12, 2.6e-9, 2.9e-8
    for i, eps in enumerate((1e-5, 5e-3, 1e-5)):

        def f(value, i=i):
            args = list(x0)
            args[i] = value
            return final_z(*args)[0]

        assert_gradient(grads[i], f, x0[i], eps, rtol=rtols[i])


@pytest.mark.parametrize(
    "z0, vz0",
    [
        (0.05, 0.0),  # just touching at t = 0 (dist = 0), at rest
        (0.05, 0.5),  # touching and leaving at once
        (0.0499, 0.0),  # resting, 0.1 mm in the plane
        (0.3, 0.0),  # the contact closes, then opens again
    ],
)
def test_ball_contact_opening_and_closing_is_finite(ball, z0, vz0):
    """No NaN in values or gradients where a contact opens or closes."""
    final_z, grad = ball
    z, zs = final_z(z0, 5000.0, 1.0, vz0)
    assert np.all(np.isfinite(np.asarray(zs)))
    grads = grad(z0, 5000.0, 1.0, vz0)
    assert all(np.isfinite(float(g)) for g in grads), grads


def test_ball_touching_elliptic_is_finite(tmp_path_factory):
    """An elliptic cone at rest: the friction directions' velocity is exactly zero at the
    cone's axis, where the cone's Hessian divides by its norm."""
    model = _load(tmp_path_factory, "ball_elliptic", BALL.format(cone="elliptic"))

    def final(z0, vx0):
        qpos = jnp.asarray(model.tree.qpos_init).at[2].set(z0)
        m = with_state(model, qpos=qpos, qvel=jnp.zeros(6).at[0].set(vx0))
        sol = run(m, 0.05, H_BALL)
        return sol.qpos[-1, 0] + sol.qpos[-1, 2], sol.qpos

    qpos = final(0.05, 0.0)[1]
    assert np.all(np.isfinite(np.asarray(qpos)))
    grads = jax.jit(jax.grad(lambda *a: final(*a)[0], argnums=(0, 1)))(0.05, 0.0)
    assert all(np.isfinite(float(g)) for g in grads), grads


# --------------------------------------------------- dm_control's hopper standing on its foot

T_HOPPER = 0.1


def standing_hopper():
    """The hopper's qpos on its foot: knee bent 0.3 rad, the foot's lowest point 1 mm in the
    floor (from MuJoCo's kinematics)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(HOPPER)
    d = mujoco.MjData(m)
    d.qpos[:] = 0.0
    d.qpos[5] = 0.3  # knee (range 5..150 degrees)
    mujoco.mj_kinematics(m, d)
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "foot")
    axis = d.geom_xmat[foot].reshape(3, 3)[:, 2]
    low = d.geom_xpos[foot][2] - m.geom_size[foot][0] - m.geom_size[foot][1] * abs(axis[2])
    qpos = d.qpos.copy()
    qpos[1] -= low + 1e-3
    return qpos


@pytest.fixture(scope="module")
def hopper():
    model = mbd.load_model(HOPPER)
    rng = np.random.default_rng(0)
    w_q, w_v = jnp.asarray(rng.normal(size=7)), jnp.asarray(0.01 * rng.normal(size=7))

    def loss(u, qpos):
        sol = run(with_state(model, qpos=qpos), T_HOPPER, 0.005, controls=u)
        return w_q @ sol.qpos[-1] + w_v @ sol.qvel[-1], sol

    return loss


@pytest.mark.slow  # a gradient program of the hopper's 15 geom pairs: ~1 min to compile
def test_hopper_standing_gradients(hopper):
    """d(a fixed combination of the final qpos, qvel)/d(constant controls, initial qpos),
    the hopper's foot on the floor through the run (its contacts and the knee's limit rows
    from the file): the gradients along random directions of each, against central
    differences along them (measured: relative errors 1e-9 and 1e-9)."""
    u0 = jnp.array([0.1, -0.2, 0.3, 0.1])
    q0 = jnp.asarray(standing_hopper())
    _, sol = hopper(u0, q0)
    assert np.all(np.isfinite(np.asarray(sol.qpos)))
    assert float(jnp.min(sol.qpos[:, 1])) < q0[1] + 0.01  # on the floor, not jumping off
    grad_u, grad_q = jax.grad(lambda u, q: hopper(u, q)[0], argnums=(0, 1))(u0, q0)
    assert np.all(np.isfinite(np.asarray(grad_u))) and np.all(np.isfinite(np.asarray(grad_q)))
    rng = np.random.default_rng(1)
    du = jnp.asarray(rng.normal(size=4))
    dq = jnp.asarray(rng.normal(size=7))

    def along_u(s):
        return hopper(u0 + s * du, q0)[0]

    def along_q(s):
        return hopper(u0, q0 + s * dq)[0]

    assert_gradient(grad_u @ du, along_u, 0.0, 1e-5)
    assert_gradient(grad_q @ dq, along_q, 0.0, 1e-6)
