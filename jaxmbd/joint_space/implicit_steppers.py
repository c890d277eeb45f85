"""Implicit time steps in joint coordinates, solved by Newton at each step: backward Euler
and the Lie group generalized-alpha method. Loops enter at index 3 (Phi(qpos_{k+1}) = 0 is
an equation of the step, the multipliers unknowns), so they hold to the Newton tolerance.

``backward_euler``: qpos_{k+1} = qpos_k (+) h qvel_{k+1} and
M(q_{k+1}) (qvel_{k+1} - qvel_k) = h (tau + J^T w - C)(q_{k+1}, qvel_{k+1}, t_{k+1})
- G(q_{k+1})^T mu, Phi(q_{k+1}) = 0 (mu = h lam, the step's impulse): first order,
L-stable. Unknowns: qvel_{k+1} and mu.

``gen_alpha``: the Lie group generalized-alpha method (M. Arnold, O. Brüls, "Convergence
of the generalized-alpha scheme for constrained mechanical systems", Multibody System
Dynamics 18 (2007) 185-202, eq. 14; O. Brüls, A. Cardona, M. Arnold, "Lie group
generalized-alpha time integration of constrained flexible multibody systems", Mech.
Mach. Theory 48 (2012) 121-137, eqs. 29-32). With the algorithmic acceleration a,

    qpos_{k+1} = qpos_k (+) (h qvel_k + h^2 (1/2 - beta) a_k + h^2 beta a_{k+1}),
    qvel_{k+1} = qvel_k + h (1 - gamma) a_k + h gamma a_{k+1},
    (1 - alpha_m) a_{k+1} + alpha_m a_k = (1 - alpha_f) qacc_{k+1} + alpha_f qacc_k,

and M qacc_{k+1} = tau + J^T w - C - G^T lam, Phi = 0 at t_{k+1}. The parameters from
the spectral radius at infinity rho_inf (J. Chung, G. M. Hulbert, J. Appl. Mech. 60 (1993)
371-375): alpha_m = (2 rho - 1) / (rho + 1), alpha_f = rho / (rho + 1),
gamma = 1/2 + alpha_f - alpha_m, beta = (gamma + 1/2)^2 / 4. Second order on the joints'
manifolds (the increment lives in the Lie algebra of each ball and free joint: the
retraction of :func:`jaxmbd.tree.integrate_positions`). Unknowns: qacc_{k+1} and lam.

Gradients are implicit (:func:`jaxmbd.newton.implicit_root`): each step's converged root
is differentiated by the implicit function theorem, not through the iterations.

``newton``: None (the default), exact Newton (:func:`jaxmbd.newton.newton_iterate`); or a
Newton object (:class:`jaxmbd.newton.AbstractNewton`), e.g.
:class:`~jaxmbd.newton.line_search.LineSearchNewton`, which runs with compliant contact pairs
(:func:`jaxmbd.joint_space.contact_step.contact_options`): exact Newton on the saturating
friction of a block coming to rest at h = 1e-3 cycles between the two flat sides of the
law, as in the absolute formulations."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..linear import small as small_kernels
from ..newton import ROUNDOFF, AbstractNewton, Scale, get_newton, implicit_root, newton_iterate
from ..tree import integrate_positions
from ..tree._elementwise import mtv, mv
from ._stepper_base import AbstractJointStepper
from .dynamics import Accelerations, accelerations
from .loops import loop_jacobian


def _equations(model, tree, loops, qpos, qvel, qacc, lam, t):
    """(M qacc - (tau + J^T w - C) + G^T lam, Phi) at (qpos, qvel, t)."""
    acc = accelerations(model, tree, None, qpos, qvel, t)
    # elementwise products: a ``dot`` would keep the step from one native loop
    r = mv(acc.mass, qacc) - acc.rhs
    if loops is None:
        return r, jnp.zeros(0, qpos.dtype)
    phi, G = loop_jacobian(loops, tree, qpos, t, acc.poses)
    return r + mtv(G, lam), phi


def _small_limit(n: int) -> float:
    """The :func:`jaxmbd.linear.small.prefer` limit of a Newton solve of n unknowns: the
    elementwise kernels on the CPU up to :data:`~jaxmbd.linear.small.SMALL_MAX` unknowns
    (the absolute formulations' ``linear_solver="auto"``), LAPACK or the vendor's kernels
    otherwise."""
    use = n <= small_kernels.SMALL_MAX and jax.default_backend() == "cpu"
    return small_kernels.limit_for("small" if use else "dense")


def _heaviest(model):
    return jnp.maximum(jnp.max(model.mass, initial=0.0), 1.0)


class _ImplicitJointStepper(AbstractJointStepper):
    """Shared Newton solve: ``tol`` (relative, 1e-10), ``max_iter`` (20; a ``newton``
    object has its own), ``newton`` (module docstring)."""

    tol: float = 1e-10
    max_iter: int = 20
    newton: AbstractNewton | str | None = None
    # the step's accelerations are its root and the algorithmic a_k, not the new state's
    state_accelerations: ClassVar[bool] = False

    def _solve(self, residual, params, x0, nv, qpos, c_q, heavy):
        """The root of residual(x, params) from x0, with implicit gradients; and the
        Newton status (0: converged). ``c_q``: d qpos_{k+1} / d x[:nv] (h for backward
        Euler's velocities, beta h^2 (1 - alpha_f) / (1 - alpha_m) for generalized-alpha's
        accelerations).

        The resolution of the unknowns has a floor from the positions: the loop rows are
        evaluated at qpos_{k+1} ~ |qpos| to round-off eps |qpos|, which x[:nv] can resolve
        only to eps |qpos| / c_q (with h = 1e-3, 1e6 times finer than a position), as the
        absolute formulations' Newton scale has it (:func:`jaxmbd.integrators.base`);
        without it the tests ask the loop rows for less than their own round-off. The
        multipliers' floor is that times ``heavy``, the heaviest body's mass (the force
        such an error of the accelerations makes), as there."""
        frozen = jax.lax.stop_gradient(params)
        eps = ROUNDOFF * float(jnp.finfo(jnp.float64).eps)
        by_positions = eps * jnp.maximum(jnp.max(jnp.abs(qpos), initial=0.0), 1.0) / c_q

        def scale(x):
            size = jnp.maximum(jnp.max(jnp.abs(x[:nv]), initial=0.0), 1.0)
            w = jnp.full(x.shape, size, x.dtype)
            floor = jnp.where(jnp.arange(x.shape[0]) < nv, 1.0, heavy) * by_positions
            e = eps * w + floor
            return Scale(w, e)

        def F_and_J(x):
            return residual(x, frozen), jax.jacfwd(lambda y: residual(y, frozen))(x)

        if self.newton is None:
            x, info = newton_iterate(
                F_and_J, lambda x, d: x + d, x0, tol=self.tol, max_iter=self.max_iter,
                residual=lambda x: residual(x, frozen), scale=scale,
                linear_solve=jnp.linalg.solve,
            )  # fmt: skip
            x = implicit_root(residual, lambda x, d: x + d, x, params, x0.shape[0])
            return x, info.status.astype(jnp.int32)
        # a Newton object, its state (stored factors) fresh at each step; its linear solves
        # in the elementwise kernels on the CPU (jaxmbd.linear.small), as the absolute
        # formulations' "auto": no LAPACK call in the loop, so XLA compiles the whole step
        # as one native loop (jaxmbd.compiled.xla_flags)
        newton = get_newton(self.newton)
        with small_kernels.prefer(_small_limit(x0.shape[0])):
            x, info, _ = newton.solve(
                lambda x: residual(x, frozen), jax.jacfwd(lambda y: residual(y, frozen)), x0,
                newton.init(x0.shape[0]), tol=self.tol, scale=scale,
            )  # fmt: skip
            x = implicit_root(residual, lambda x, d: x + d, x, params, x0.shape[0])
        return x, info.status.astype(jnp.int32)

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *,
                            warm=None) -> Accelerations:  # fmt: skip
        acc = accelerations(model, tree, loops, qpos, qvel, t)
        return acc._replace(status=jnp.zeros((), jnp.int32), algorithmic=acc.qacc)

    def finish(self, model, tree, loops, qpos, qvel, t, h):
        # the loops hold at index 3: no projection
        return qpos, qvel, self.start_accelerations(model, tree, loops, qpos, qvel, t, h)

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        return self._step(model, tree, loops, qpos, qvel, acc, t, h)[:2]

    def advance(self, model, tree, loops, qpos, qvel, acc: Accelerations, t, h):
        qpos, qvel, qacc, a_next, status = self._step(model, tree, loops, qpos, qvel, acc, t,
                                                      h)  # fmt: skip
        _, _, new = self.finish(model, tree, loops, qpos, qvel, t + h, h)
        # the step's own accelerations (its root), not the index-1 ones of the new state
        return qpos, qvel, new._replace(qacc=qacc, status=status, algorithmic=a_next)


class BackwardEulerJoint(_ImplicitJointStepper):
    """Backward Euler in joint coordinates (module docstring)."""

    name: ClassVar[str] = "backward_euler"

    def _step(self, model, tree, loops, qpos, qvel, acc, t, h):
        nv = tree.nv
        m = 0 if loops is None else len(loops.rows)

        def residual(x, params):
            model_, qpos_, qvel_ = params
            v, mu = x[:nv], x[nv:]
            q = integrate_positions(tree, qpos_, h * v, 1.0)
            r, phi = _equations(model_, tree, loops, q, v, (v - qvel_) / h, mu / h, t + h)
            return jnp.concatenate([h * r, phi])

        x0 = jnp.concatenate([qvel + h * acc.qacc, jnp.zeros(m, qvel.dtype)])
        x, status = self._solve(residual, (model, qpos, qvel), x0, nv, qpos, h, _heaviest(model))
        v = x[:nv]
        qacc = (v - qvel) / h
        return integrate_positions(tree, qpos, h * v, 1.0), v, qacc, qacc, status


class GeneralizedAlphaJoint(_ImplicitJointStepper):
    """The Lie group generalized-alpha method in joint coordinates (module docstring);
    ``rho_inf`` (0.8): the spectral radius at infinity (1: no numerical damping)."""

    name: ClassVar[str] = "gen_alpha"
    rho_inf: float = 0.8

    def _coefficients(self):
        rho = self.rho_inf
        alpha_m = (2.0 * rho - 1.0) / (rho + 1.0)
        alpha_f = rho / (rho + 1.0)
        gamma = 0.5 + alpha_f - alpha_m
        beta = 0.25 * (gamma + 0.5) ** 2
        return alpha_m, alpha_f, gamma, beta

    def _step(self, model, tree, loops, qpos, qvel, acc, t, h):
        nv = tree.nv
        m = 0 if loops is None else len(loops.rows)
        alpha_m, alpha_f, gamma, beta = self._coefficients()

        def advanced(qpos_, qvel_, qacc_n, a_n, qacc):
            a = (alpha_f * qacc_n + (1.0 - alpha_f) * qacc - alpha_m * a_n) / (1.0 - alpha_m)
            increment = h * qvel_ + h * h * ((0.5 - beta) * a_n + beta * a)
            q = integrate_positions(tree, qpos_, increment, 1.0)
            v = qvel_ + h * ((1.0 - gamma) * a_n + gamma * a)
            return q, v, a

        def residual(x, params):
            model_, qpos_, qvel_, qacc_n, a_n = params
            qacc, lam = x[:nv], x[nv:]
            q, v, _ = advanced(qpos_, qvel_, qacc_n, a_n, qacc)
            r, phi = _equations(model_, tree, loops, q, v, qacc, lam, t + h)
            return jnp.concatenate([r, phi / (beta * h * h)])

        qacc_n = acc.qacc
        a_n = acc.qacc if acc.algorithmic is None else acc.algorithmic
        x0 = jnp.concatenate([qacc_n, jnp.zeros(m, qvel.dtype)])
        c_q = beta * h * h * (1.0 - alpha_f) / (1.0 - alpha_m)
        x, status = self._solve(residual, (model, qpos, qvel, qacc_n, a_n), x0, nv, qpos, c_q,
                                 _heaviest(model))  # fmt: skip
        q, v, a = advanced(qpos, qvel, qacc_n, a_n, x[:nv])
        return q, v, x[:nv], a, status


__all__ = ["BackwardEulerJoint", "GeneralizedAlphaJoint"]
