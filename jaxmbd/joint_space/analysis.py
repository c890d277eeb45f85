"""Statics and linearisation in joint coordinates: the equations that
:func:`jaxmbd.static_equilibrium`, :func:`jaxmbd.linearize` and :func:`jaxmbd.modes` solve
and differentiate when the formulation is ``"joint"``.

**At rest** (qvel = 0, qacc = 0) the tree's equations M qacc + C = tau + J^T w - G^T lam
with the loops' rows Phi(q) = 0 become

    F(qpos, lam) = [ tau(q, 0) + J^T w(q, 0) - C(q, 0) - G(q)^T lam ;  Phi(q) ] = 0,

C(q, 0) the gravity forces of the recursive Newton-Euler pass (Featherstone 2008, section
5.3) and tau, w every force element at rest. Newton steps on the joints' manifolds:
qpos (+) delta (:func:`jaxmbd.tree.integrate_positions`), so a ball's or a free body's
quaternion stays unit.

**Linearised**, about (qpos*, qvel*) on the loops' manifold, minimal coordinates are
z, with delta = N z + P w(z) (N (nv, f) an orthonormal basis of the null space of G at
qpos*, P of its complement, w closing Phi by Newton; N = I for a tree without loops), and
zeta = N^T qvel, the rest of qvel from G qvel = nu. The rates are
z_dot = N^T d(delta)/dt, d(delta)/dt the joints' tangent rates of qvel
(:func:`jaxmbd.tree.kinematics.tangent_rates`: the identity on hinges and slides,
J_r(theta)^-1 omega on rotations), and zeta_dot = N^T qacc, qacc the forward dynamics of
:func:`jaxmbd.joint_space.dynamics.accelerations` (every force element, armature and
actuator, the loops by the Schur complement). For a tree without loops x = (delta, qvel)
is MuJoCo's tangent layout of (qpos, qvel), the one of ``mjd_transitionFD``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..actuators import with_controls
from ..model import Model
from ..tree import KinematicTree, bias_forces, integrate_positions, poses
from ..tree.kinematics import tangent_rates
from .dynamics import accelerations, applied_generalised_forces
from .loops import Loops, loop_jacobian, loop_residual

#: Newton iterations that close the loops at q(z) (quadratic convergence: round-off long
#: before; forward-mode derivatives of a converged Newton map are the implicit ones).
CLOSURE_ITERATIONS = 8


def static_residual(model: Model, tree: KinematicTree, loops: Loops | None, t):
    """(residual(x, model), retract(x, delta), n_q, n_lam) of the static equations in the
    unknowns x = (qpos, lam) (module docstring); delta = (tangent of qpos (nv,), lam's)."""
    nv = tree.nv
    n_lam = 0 if loops is None else len(loops.rows)

    def residual(x, m):
        qpos, lam = x
        zero = jnp.zeros(nv, qpos.dtype)
        p = poses(tree, qpos)
        forces = applied_generalised_forces(m, tree, qpos, zero, t)
        forces = forces - bias_forces(tree, p, m.mass, m.inertia, m.gravity, zero)
        if loops is None:
            return forces
        _, G = loop_jacobian(loops, tree, qpos, t)
        return jnp.concatenate([forces - G.T @ lam, loop_residual(loops, tree, qpos, t)])

    def retract(x, delta):
        qpos, lam = x
        return integrate_positions(tree, qpos, delta[:nv], 1.0), lam + delta[nv:]

    return residual, retract, nv, n_lam


def null_space(G):
    """(N, P): orthonormal bases of the null space of G (m, n) and of its complement
    (numpy; an SVD, singular values below 1e-9 of the largest count as zero)."""
    G = np.asarray(G)
    n = G.shape[1]
    if G.shape[0] == 0:
        return np.eye(n), np.zeros((n, 0))
    _, s, vt = np.linalg.svd(G)
    rank = int(np.sum(s > 1e-9 * max(s[0], 1e-300))) if s.size else 0
    return vt[rank:].T, vt[:rank].T


def loop_bases(tree: KinematicTree, loops: Loops | None, qpos_star, t):
    """(N, P) of the loops' Jacobian at qpos* (module docstring); N = I without loops."""
    if loops is None:
        return np.eye(tree.nv), np.zeros((tree.nv, 0))
    return null_space(loop_jacobian(loops, tree, jnp.asarray(qpos_star), t)[1])


def closed_increment(tree, loops, qpos_star, t, N, P, z):
    """delta = N z + P w with Phi(qpos* (+) delta) = 0 (Newton from w = 0)."""
    if P.shape[1] == 0:
        return N @ z

    def phi(w):
        return loop_residual(loops, tree, integrate_positions(tree, qpos_star, N @ z + P @ w,
                                                              1.0), t)  # fmt: skip

    def newton(_, w):
        return w - jnp.linalg.solve(jax.jacfwd(phi)(w), phi(w))

    w = jax.lax.fori_loop(0, CLOSURE_ITERATIONS, newton, jnp.zeros(P.shape[1], z.dtype))
    return N @ z + P @ w


def minimal_rates(model: Model, tree: KinematicTree, loops: Loops | None, qpos_star, t, N, P):
    """(rates(x, u) -> x_dot, state(x) -> (delta, qpos, qvel)) in the minimal coordinates
    x = (z, zeta) of the module docstring."""
    f = N.shape[1]

    def state(x):
        z, zeta = x[:f], x[f:]
        delta = closed_increment(tree, loops, qpos_star, t, N, P, z)
        qpos = integrate_positions(tree, qpos_star, delta, 1.0)
        qvel = N @ zeta
        if P.shape[1]:
            _, G = loop_jacobian(loops, tree, qpos, t)
            zero = jnp.zeros((), qpos.dtype)
            _, phi_t = jax.jvp(lambda s: loop_residual(loops, tree, qpos, t + s), (zero,),
                               (1.0 + zero,))  # fmt: skip
            qvel = qvel + P @ jnp.linalg.solve(G @ P, -phi_t - G @ qvel)
        return delta, qpos, qvel

    def rates(x, u):
        delta, qpos, qvel = state(x)
        m = model if u is None else with_controls(model, u)
        qacc = accelerations(m, tree, loops, qpos, qvel, t).qacc
        return jnp.concatenate([N.T @ tangent_rates(tree, delta, qvel), N.T @ qacc])

    return rates, state


def body_displacement_basis(tree: KinematicTree, qpos_star, state, f: int):
    """(nb 6, f): each body's displacement per unit of z (translation of its centre of
    mass, then its body-frame rotation: R*^T dR = [theta]x), body-major, as the absolute
    formulations' tangent coordinates."""
    R_star = poses(tree, qpos_star).R

    def pose(z):
        qpos = state(jnp.concatenate([z, jnp.zeros(f, z.dtype)]))[1]
        p = poses(tree, qpos)
        return p.c, p.R

    dc, dR = jax.jacfwd(pose)(jnp.zeros(f, R_star.dtype))  # (nb, 3, f), (nb, 3, 3, f)
    W = jnp.einsum("bji,bjkf->bikf", R_star, dR)  # R*^T dR: skew per column
    theta = jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1)  # (nb, 3, f)
    return jnp.concatenate([dc, theta], axis=1).reshape(-1, f)


__all__ = [
    "body_displacement_basis",
    "closed_increment",
    "loop_bases",
    "minimal_rates",
    "null_space",
    "static_residual",
]
