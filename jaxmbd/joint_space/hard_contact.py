"""Exact contact in joint coordinates: the projected Moreau–Jean step of
:mod:`jaxmbd.integrators.moreau_jean` with the tree's mass matrix.

One step from (qpos_k, qvel_k) at t_k (V. Acary, CMAME 256 (2013), eqs. 3.1 and 4.2; the
absolute formulations' module docstring gives the scheme in full):

1. qpos_M = qpos_k (+) (h / 2) qvel_k; at qpos_M the contact slots give the gaps, normals
   and tangents, and the unilateral rows' Jacobians W (n . v_rel, t1 . v_rel, t2 . v_rel
   of each slot, by forward-mode autodiff of the bodies' velocities in qvel), and each
   hard joint limit the rows +-e_dof of its coordinate.
2. M(qpos_M) (qvel_{k+1} - qvel_k) = h (tau + J^T w - C)(qpos_M, qvel_k) - G^T Lambda
   + W^T P, G qvel_{k+1} = nu for the loops, and Newton's impact law with Coulomb's
   friction on the active slots as Alart-Curnier's proximal equations in the impulses P
   alone (Delassus form: the loops eliminated by the Schur complement on M's Cholesky
   factor), solved by the same semismooth Newton method, with implicit-function gradients.
3. qpos_{k+1} = qpos_M (+) (h / 2) qvel_{k+1}.
4. Projection: qpos_{k+1} (+) M^-1 W_N^T mu_N with 0 <= mu_N complementary to the gaps
   (no penetration to the position tolerance); the loops are then projected as after
   every joint-space step.

The tree's mass matrix is dense (nv x nv) and small; the unilateral rows are few, so the
Delassus matrix W M^-1 W^T is formed explicitly, as in the absolute formulations."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._results import MAX_ITERATIONS, SUCCESS
from ..contact.element import contact_element
from ..forces.joint_limits import JointLimits
from ..integrators.moreau_jean import (
    ACTIVE_GAP_PER_TOL,
    VELOCITY_FLOOR,
    _Contact,
    _implicit_min_norm,
    _implicit_root,
    _newton,
    _positive_part,
    _proximal_jacobian,
    _proximal_residual,
    _smooth_model,
    _tangents,
)
from ..tree import body_velocities, cholesky_solve, integrate_positions, mass_solve, poses
from ._stepper_base import AbstractJointStepper
from .dynamics import Accelerations, accelerations
from .forces import body_state, joint_coordinate_indices
from .loops import loop_terms


def _limit_rows(model, tree):
    """(qpos addresses, dof addresses, lower, upper, restitution) of every hard-limited
    coordinate (all the model's joint limits: with contact="hard" they are unilateral)."""
    qadr, dadr, lower, upper, restitution = [], [], [], [], []
    for element in model.forces:
        if not isinstance(element, JointLimits) or not element.joints:
            continue
        q, d = joint_coordinate_indices(tree, [j.name for j in element.joints],
                                        where="contact='hard' joint limits")  # fmt: skip
        qadr.append(q)
        dadr.append(d)
        lower.append(element.lower)
        upper.append(element.upper)
        e = element.restitution
        restitution.append(jnp.zeros_like(element.lower) if e is None else e)
    if not qadr:
        return None
    return (np.concatenate(qadr), np.concatenate(dadr), jnp.concatenate(lower),
            jnp.concatenate(upper), jnp.concatenate(restitution))  # fmt: skip


def unilateral_count(model) -> int:
    """The number of unilateral forces a step reports: each slot's normal and two
    tangential components, and two rows per hard-limited coordinate."""
    element = contact_element(model)
    ns = 0 if element is None else element.n_slots
    n_limits = sum(len(f.joints) for f in model.forces if isinstance(f, JointLimits))
    return 3 * ns + 2 * n_limits


def _gaps(model, tree, qpos):
    """The gaps (n_N,) of the slots, then the limits (q - lower, upper - q)."""
    element = contact_element(model)
    rows = []
    if element is not None:
        p = poses(tree, qpos)
        zero = jnp.zeros_like(p.c)
        rows.append(element.collide(body_state(p, zero, zero)).gap)
    limits = _limit_rows(model, tree)
    if limits is not None:
        qadr, _, lower, upper, _ = limits
        rows += [qpos[qadr] - lower, upper - qpos[qadr]]
    return jnp.concatenate(rows) if rows else jnp.zeros(0, qpos.dtype)


def _unilateral(model, tree, qpos, qvel):
    """(gap (n_N,), W_N (n_N, nv), W_T (2 ns, nv), restitution (n_N,), friction (ns,)) at
    qpos: the slots' rows (the velocity of the pair's body_i relative to its body_j at the
    contact point along the normal and the two tangents), then the limits' +-q_dot rows."""
    element = contact_element(model)
    ns = 0 if element is None else element.n_slots
    p = poses(tree, qpos)
    dtype = qvel.dtype
    gaps, restitution = [], []
    if ns:
        zero = jnp.zeros_like(p.c)
        gap, point, normal = element.collide(body_state(p, zero, zero))[:3]
        t1, t2 = _tangents(normal)
        bi, bj = element._slot_bodies()
        slot_pair = np.asarray(element.slot_pair, dtype=int)
        gaps.append(gap)
        restitution.append(element.restitution[slot_pair])
    limits = _limit_rows(model, tree)
    if limits is not None:
        qadr, dadr, lower, upper, e = limits
        gaps += [qpos[qadr] - lower, upper - qpos[qadr]]
        restitution += [e, e]

    def rates(v):
        normal_rows, tangent_rows = [], []
        if ns:
            rdot, omega = body_velocities(tree, p, v)
            zero3 = jnp.zeros((1, 3), dtype)
            c_all = jnp.concatenate([p.c, zero3])
            rdot_all = jnp.concatenate([rdot, zero3])
            w_all = jnp.concatenate([jnp.einsum("bij,bj->bi", p.R, omega), zero3])

            def at(b):
                return rdot_all[b] + jnp.cross(w_all[b], point - c_all[b])

            v_rel = at(bi) - at(bj)
            normal_rows.append(jnp.sum(normal * v_rel, -1))
            tangent_rows.append(jnp.stack([jnp.sum(t1 * v_rel, -1),
                                           jnp.sum(t2 * v_rel, -1)], -1).reshape(-1))  # fmt: skip
        if limits is not None:
            normal_rows += [v[dadr], -v[dadr]]
        rows = normal_rows + tangent_rows
        return jnp.concatenate(rows) if rows else jnp.zeros(0, dtype)

    W = jax.jacfwd(rates)(jnp.zeros(tree.nv, dtype))
    n_N = W.shape[0] - 2 * ns
    friction = element.friction[np.asarray(element.slot_pair, dtype=int)] if ns else \
        jnp.zeros(0, dtype)  # fmt: skip
    empty = jnp.zeros(0, dtype)
    return (jnp.concatenate(gaps) if gaps else empty, W[:n_N], W[n_N:],
            jnp.concatenate(restitution) if restitution else empty, friction)  # fmt: skip


class JointMoreauJean(AbstractJointStepper):
    """The projected Moreau–Jean step in joint coordinates (module docstring): the
    integrator of ``simulate(..., formulation="joint", contact="hard")``. Options as the
    absolute formulations' :class:`~jaxmbd.integrators.MoreauJean`: ``tol`` (1e-10) of
    the impulses relative to the step's momentum scale and of the projection in metres,
    ``max_iter`` (50), ``project`` (True)."""

    name: ClassVar[str] = "moreau_jean"
    resolves_impacts: ClassVar[bool] = True
    state_accelerations: ClassVar[bool] = False  # the step's mean accelerations
    tol: float = 1e-10
    max_iter: int = 50
    project: bool = True

    def __check_init__(self):
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int | np.integer):
            raise ValueError(f"moreau_jean: max_iter must be a positive integer, got "
                             f"{self.max_iter!r}")  # fmt: skip
        if self.max_iter < 1:
            raise ValueError(f"moreau_jean: max_iter must be positive, got {self.max_iter}")

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *,
                            warm=None) -> Accelerations:  # fmt: skip
        acc = accelerations(_smooth_model(model), tree, loops, qpos, qvel, t)
        return acc._replace(unilateral=jnp.zeros(unilateral_count(model), qvel.dtype),
                            status=jnp.zeros((), jnp.int32))  # fmt: skip

    def _velocity_step(self, model, tree, loops, q_mid, v, t_mid, h):
        """Step 2: (qvel_{k+1}, impulses P)."""
        smooth = _smooth_model(model)
        acc = accelerations(smooth, tree, None, q_mid, v, t_mid)
        M, Q = acc.mass, acc.rhs
        gap, W_N, W_T, restitution, friction = _unilateral(model, tree, q_mid, v)
        ns = friction.shape[0]
        active = jnp.where(gap <= ACTIVE_GAP_PER_TOL * self.tol, 1.0, 0.0)
        W = jnp.concatenate([W_N, W_T])
        Y = mass_solve(tree, M, W.T)  # (nv, p)
        rho = 1.0 / jnp.maximum(jnp.einsum("ij,ji->i", W, Y), 1e-300)
        v_star = v + h * mass_solve(tree, M, Q)
        if loops is not None:
            _, G, nu, _ = loop_terms(loops, tree, q_mid, v, t_mid)
            MinvGT = mass_solve(tree, M, G.T)
            S = G @ MinvGT
            solve_S = (lambda b: cholesky_solve(S, b)) if loops.independent else \
                (lambda b: jnp.linalg.lstsq(S, b)[0])  # fmt: skip
            v_free = v_star - MinvGT @ solve_S(G @ v_star - nu)
            X = Y - MinvGT @ solve_S(G @ Y)
        else:
            v_free, X = v_star, Y
        xi_N0 = restitution * (W_N @ v)  # Newton's law: the pre-impact normal velocity
        free = W @ v_free + jnp.concatenate([xi_N0, jnp.zeros(2 * ns, v.dtype)])
        contact = _Contact(free, W @ X, rho, friction, active)
        scale = jnp.max(jnp.abs(M @ v), initial=0.0) + h * jnp.max(jnp.abs(Q), initial=0.0)
        scale = jnp.maximum(scale, jnp.max(jnp.diagonal(M)) * VELOCITY_FLOOR)
        P0 = jnp.zeros(W.shape[0], v.dtype)
        P, _, done, _ = _newton(
            lambda P: _proximal_residual(P, contact), P0, self.tol * scale, self.max_iter,
            jacobian=lambda P: _proximal_jacobian(P, contact),
        )  # fmt: skip
        P = _implicit_root(_proximal_residual, _proximal_jacobian, P, contact)
        return v_free + X @ P, P, done, M

    def _projection(self, model, tree, qpos, qvel, M):
        """Step 4: qpos (+) M^-1 W_N^T mu_N with 0 <= mu_N complementary to the gaps."""
        gap, W_N = _unilateral(model, tree, qpos, qvel)[:2]
        MinvB = mass_solve(tree, M, W_N.T)
        rho = 1.0 / jnp.maximum(jnp.einsum("ij,ji->i", W_N, MinvB), 1e-300)

        def moved(mu):
            return integrate_positions(tree, qpos, MinvB @ mu, 1.0)

        def residual(mu):
            g = _gaps(model, tree, moved(mu))
            return (mu - _positive_part(mu - rho * g)) / rho

        mu0 = jnp.zeros(W_N.shape[0], qvel.dtype)
        F0 = (mu0 - _positive_part(mu0 - rho * gap)) / rho
        mu, _, done, _ = _newton(residual, mu0, self.tol, self.max_iter, F0=F0)
        return moved(_implicit_min_norm(residual, mu)), done

    def _advance(self, model, tree, loops, qpos, qvel, t, h):
        t_mid = t + 0.5 * h
        q_mid = integrate_positions(tree, qpos, 0.5 * h * qvel, 1.0)
        v1, P, done, M = self._velocity_step(model, tree, loops, q_mid, qvel, t_mid, h)
        q1 = integrate_positions(tree, q_mid, 0.5 * h * v1, 1.0)
        if self.project:
            q1, done_p = self._projection(model, tree, q1, v1, M)
            done = done & done_p
        return q1, v1, P / h, done

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        return self._advance(model, tree, loops, qpos, qvel, t, h)[:2]

    def advance(self, model, tree, loops, qpos, qvel, acc, t, h):
        """The step, with the step's mean acceleration (qvel_{k+1} - qvel_k) / h as the
        state's ``qacc`` (impulses included, as the absolute formulations' step reports
        (v_{k+1} - v_k) / h): what the accelerometers and the tree joints' reactions
        (Newton-Euler, with the unilateral rows' mean forces) read."""
        start = qvel
        qpos, qvel, forces, done = self._advance(model, tree, loops, qpos, qvel, t, h)
        qpos, qvel, acc = self.finish(model, tree, loops, qpos, qvel, t + h, h)
        status = jnp.where(done, SUCCESS, MAX_ITERATIONS).astype(jnp.int32)
        return qpos, qvel, acc._replace(qacc=(qvel - start) / h, unilateral=forces,
                                        status=status)  # fmt: skip


__all__ = ["JointMoreauJean", "unilateral_count"]
