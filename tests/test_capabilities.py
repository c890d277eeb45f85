"""Capabilities, not names (issue 33 item 3): a formulation and an integrator defined here,
outside the package and registered nowhere, run through ``simulate``, ``simulate_batch`` and
``jax.grad``; the registered integrators step the new formulation exactly where it has the
capabilities they require.

The formulation is genuinely new: exponential coordinates (rotation vector theta, A =
exp(theta~)), with omega_bar = J_r(theta) theta_dot (J_r the right Jacobian of SO(3)). The
integrator is symplectic Euler on the index-1 equations: v_{n+1} = v_n + h a(q_n, v_n, t_n),
q_{n+1} = q_n (+) h v_{n+1}, first order.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
from jaxmbd.constraints.equations import constraint_values
from jaxmbd.formulations import FORMULATIONS, AbstractAutodiffFormulation, get_formulation
from jaxmbd.formulations.index1 import index1_dynamics
from jaxmbd.integrators import AbstractIntegrator, StepResult, get_integrator, valid_pairs
from jaxmbd.lie import so3_dexpinv, so3_exp, so3_log, so3_right_jacobian
from jaxmbd.newton import NONFINITE, NewtonInfo


def _mv(M, x):
    return jnp.einsum("bij,bj->bi", M, x)


class RotationVector(AbstractAutodiffFormulation):
    """(r, theta) per body, A = exp(theta~), velocities (r_dot, theta_dot)."""

    name: ClassVar[str] = "rotation_vector_test"
    tangent_size: ClassVar[int] = 6
    orientation_size: ClassVar[int] = 3
    default_integrator: ClassVar[str] = "gen_alpha"
    index3_blocks: ClassVar[bool] = True
    index1_blocks: ClassVar[bool] = True  # the default index1_system from the equations

    def coordinates(self, A):
        return so3_log(A)

    def rotation(self, ori):
        return so3_exp(ori)

    def rate_from_omega(self, ori, omega):
        return _mv(so3_dexpinv(-ori), omega)  # J_r(theta)^-1

    def omega_from_rate(self, ori, rate, rate_dot):
        B = so3_right_jacobian(ori)
        B_dot = jax.jvp(so3_right_jacobian, (ori,), (rate,))[1]
        return _mv(B, rate), _mv(B, rate_dot) + _mv(B_dot, rate)

    def dynamics_equations(self, model, q, v, a, lam, t):
        """Newton-Euler in (r, theta) (as re's eqs. 43-44 with B = J_r(theta)):
        B^T J B theta_ddot + Phi_theta^T lam = B^T (n - w x J w - J B_dot theta_dot)."""
        nb = model.nb
        r, theta = q
        rate, rate_dot = v[:, 3:], a[:, 3:]
        reaction = (self.constraint_jacobian(model, q, t).T @ lam).reshape(nb, 6)
        f, n = self._forces(model, q, v, t)
        B = so3_right_jacobian(theta)
        B_dot = jax.jvp(so3_right_jacobian, (theta,), (rate,))[1]
        J = model.inertia
        w = _mv(B, rate)
        Bt = jnp.swapaxes(B, -1, -2)
        rhs = n - jnp.cross(w, _mv(J, w)) - _mv(J, _mv(B_dot, rate))
        g_r = model.mass[:, None] * a[:, :3] + reaction[:, :3] - f
        g_w = _mv(Bt @ J @ B, rate_dot) + reaction[:, 3:] - _mv(Bt, rhs)
        phi = constraint_values(model, r, so3_exp(theta), t)
        return jnp.concatenate([g_r, g_w], 1).reshape(-1), phi


class SymplecticEuler(AbstractIntegrator):
    """Symplectic Euler on the index-1 ODE (first order); needs only the index-1 blocks and
    the formulation's retraction."""

    name: ClassVar[str] = "symplectic_euler_test"
    requires: ClassVar[frozenset[str]] = frozenset({"index1_blocks"})

    def init(self, model, form, start, h):
        a, lam, _ = index1_dynamics(model, form, start.q, start.v, jnp.asarray(0.0))
        return start.q, start.v, a, lam

    def step(self, model, form, state, k, h):
        q, v, a, _ = state
        v1 = v + h * a
        q1 = form.retract(q, h * v1.reshape(-1))
        a1, lam1, solve_status = index1_dynamics(model, form, q1, v1, k * h)
        residual = form.residual(model, q1, k * h)
        finite = jnp.all(jnp.isfinite(a1)) & jnp.all(jnp.isfinite(lam1))
        info = NewtonInfo(
            jnp.asarray(0),
            jnp.where(finite, solve_status, NONFINITE),
            jnp.linalg.norm(residual),
            jnp.asarray(0.0),
        )
        return (q1, v1, a1, lam1), StepResult(q1, v1, a1, lam1, info)


H, T_END = 1e-3, 0.02


@pytest.fixture(scope="module")
def top():
    return mbd.models.heavy_top()


@pytest.fixture(scope="module")
def reference(top):
    """rA with Munthe-Kaas RK4: fourth order, errors ~1e-12 here."""
    return mbd.simulate(top, formulation="rA", integrator="rkmk", t_end=T_END, h=H)


def test_nothing_is_registered_and_pairs_follow_capabilities():
    form = RotationVector()
    assert form.name not in FORMULATIONS
    assert all(form.name != f and "symplectic_euler_test" != i for f, i in valid_pairs())
    # a Solution's formulation name finds the class again (without registering it)
    assert isinstance(get_formulation(form.name), RotationVector)
    assert form.capabilities() == {"has_pose", "index1_blocks", "index3_blocks", "vector_space"}
    # registered integrators step it where it has what they require ...
    for name in ("gen_alpha", "backward_euler", "rk"):
        assert get_integrator(name, form).supports(form)
    # ... and refuse it, naming the missing capability, where it has not
    with pytest.raises(ValueError, match=r"cannot step formulation 'rotation_vector_test'.*"
                       r"lie_group"):  # fmt: skip
        get_integrator("rkmk", form)
    with pytest.raises(ValueError, match="director_coordinates"):
        get_integrator("energy_momentum", form)
    # the new integrator steps every registered formulation with index-1 blocks, only those
    for name, cls in FORMULATIONS.items():
        assert SymplecticEuler.supports(cls) == cls.index1_blocks, name
    with pytest.raises(ValueError, match=r"cannot step formulation 'director'.*index1_blocks"):
        get_integrator(SymplecticEuler(), "director")


def test_new_formulation_runs_with_registered_integrators(top, reference):
    """rk (RK4) in rotation-vector coordinates reproduces rA's Munthe-Kaas RK4 within their
    fourth-order errors (h |omega| = 0.06 per step: ~1e-7); the default integrator (the
    class's ``default_integrator``, gen_alpha) runs too."""
    rk4 = mbd.simulate(top, formulation=RotationVector(), integrator="rk", t_end=T_END, h=H)
    assert rk4.formulation == "rotation_vector_test" and rk4.integrator == "rk"
    assert np.max(np.abs(np.asarray(rk4.A - reference.A))) < 3e-7
    assert np.max(np.abs(np.asarray(rk4.omega - reference.omega))) < 1e-4
    assert np.asarray(rk4.q).shape == (rk4.t.shape[0], 1, 6)
    # the top spins (|theta| reaches ~1.3 rad): the coordinates are exercised
    assert np.max(np.abs(np.asarray(rk4.q)[:, :, 3:])) > 1.0
    energy = np.asarray(mbd.diagnostics.energy(top, rk4).total)
    assert np.ptp(energy) < 3e-7 * np.max(np.abs(energy))  # RK4: 7e-8
    implicit = mbd.simulate(top, formulation=RotationVector(), t_end=T_END, h=H)
    assert implicit.integrator == "gen_alpha"
    assert np.max(np.abs(np.asarray(implicit.A - reference.A))) < 1e-3


SYMPLECTIC = dict(integrator=SymplecticEuler(), t_end=T_END)


@pytest.fixture(scope="module")
def symplectic(top):
    """The new formulation stepped by the new integrator (shared: one compilation)."""
    return mbd.simulate(top, formulation=RotationVector(), h=H, **SYMPLECTIC)


@pytest.mark.parametrize("formulation", ["rA", RotationVector()])
def test_new_integrator_is_first_order(top, reference, symplectic, formulation):
    """Symplectic Euler on a registered (rA) and on the new formulation: error O(h)."""
    errors = []
    for h in (H, H / 2):
        if h == H and isinstance(formulation, RotationVector):
            sol = symplectic
        else:
            sol = mbd.simulate(top, formulation=formulation, h=h, **SYMPLECTIC)
        assert sol.integrator == "symplectic_euler_test"
        errors.append(np.max(np.abs(np.asarray(sol.A[-1] - reference.A[-1]))))
    assert 1e-6 < errors[0] < 1e-2
    assert 1.7 < errors[0] / errors[1] < 2.3  # first order


@pytest.mark.slow  # a registered pair's run: test_new_formulation_runs_*
def test_new_pair_in_batch_and_gradient(top, symplectic):
    """simulate_batch and jax.grad of the new formulation with the new integrator."""
    options = dict(formulation=RotationVector(), h=H, **SYMPLECTIC)
    masses = jnp.asarray([1.0, 1.3]) * top.mass[0]
    batch = mbd.stack_models([eqx.tree_at(lambda m: m.mass, top, m * jnp.ones(1)) for m in masses])
    sol = mbd.simulate_batch(batch, **options)
    assert sol.r.shape[:2] == (2, round(T_END / H) + 1)
    assert np.all(np.asarray(sol.status) == 0)
    assert np.max(np.abs(np.asarray(sol.r[0] - symplectic.r))) < 1e-12
    assert np.max(np.abs(np.asarray(sol.r[1] - sol.r[0]))) > 1e-6  # the mass matters

    def loss(mass):
        model = eqx.tree_at(lambda m: m.mass, top, mass)
        return jnp.sum(mbd.simulate(model, **options).r[-1] ** 2)

    grad = jax.grad(loss)(top.mass)
    eps = 1e-5 * top.mass
    fd = (loss(top.mass + eps) - loss(top.mass - eps)) / (2 * eps)
    assert abs(float(grad[0])) > 1e-8
    assert abs(float(grad[0] - fd[0])) < 1e-6 * max(1.0, abs(float(fd[0])))
