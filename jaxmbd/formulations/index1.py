"""The index-1 form of the equations of motion, shared by the explicit integrators.

At a state (q, v, t) the accelerations and multipliers solve the KKT system (Mueller & Terze
eq. 3)

    [[M, G^T], [G, 0]] [a; lam] = [Q; gamma],

with M the mass matrix in the formulation's velocity coordinates, Q the applied and
gyroscopic forces, G the constraint Jacobian (the GCON rows of every joint and driver) and
gamma the right-hand side of the acceleration equations G a = gamma. The sign of lam is that
of the implicit integrators (g = M a + G^T lam - Q = 0), so lam is the same multiplier in
every formulation and :func:`jaxmbd.analysis.diagnostics.reaction_forces` applies unchanged.

A formulation supports the index-1 form by the capability ``index1_blocks`` and its
method ``index1_system(model, q, v, t)`` returning an :class:`Index1System` (by default
from its h-free equations; the rA system, Mueller-Terze's SO(3) x R^3 with the hybrid
twist (r_dot, omega_bar), is built here from the hand-coded rA rows). Any explicit
integrator calls :func:`index1_dynamics` (``rkmk``, ``rk``).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..constraints.equations import rA_terms
from ..forces import BodyState, added_mass, added_mass_matrix, adds_mass
from ..forces._rigid_body import mass_blocks, newton_euler_forces
from ..linear import schur
from ..linear.graph import newton_layout
from ..linear.structured import BlockMatrix
from ..model import Model
from ..newton import condition_status, solve_with_condition


class Index1System(NamedTuple):
    """The blocks of the index-1 KKT system at one state.

    ``mass`` (nb, k, k): per-body blocks of M; ``force`` (nb, k): Q; ``G`` (m, nb k)
    body-major; ``gamma`` (m,); ``coupling`` (nb k, nb k) or None: M's blocks between
    bodies, which only a force element's added mass gives (joint armature between two
    moving bodies, :class:`~jaxmbd.forces.AddedMass`): M = blockdiag(mass) + coupling."""

    mass: jax.Array
    force: jax.Array
    G: jax.Array
    gamma: jax.Array
    coupling: jax.Array | None = None


class Index1Solution(NamedTuple):
    """Accelerations ``a`` (nb, k) and multipliers ``lam`` (m,) of the index-1 system at one
    state, and the ``status`` of the solve that gave them (SUCCESS, ILL_CONDITIONED or
    NONFINITE, :func:`jaxmbd.newton.solve_with_condition`): an integrator's step reports
    the worst status of its solves."""

    a: jax.Array
    lam: jax.Array
    status: jax.Array


class AbstractMultiplierElimination(eqx.Module):
    """How an explicit step gets the accelerations and multipliers at a stage state: the
    full KKT system (the integrator's own, for every formulation with index-1 blocks) or a
    formulation's own elimination (rotmat's two-step eq. 25, the formulation's
    ``two_step_multipliers``). The integrator asks this object, never the formulation's
    name (as diffrax's implicit solvers hold their root finder)."""

    #: Whether :meth:`solve` solves a KKT system (the KKT linear solvers apply to it).
    solves_kkt: ClassVar[bool]

    def constants(self, model, form, q) -> Any:
        """Per-simulation constants computed once at the start (None: none)."""
        return None

    @abc.abstractmethod
    def solve(self, model, form, constants, q, v, t) -> Index1Solution:
        """The accelerations, multipliers and the status of their solve at (q, v, t)."""

    @abc.abstractmethod
    def given(self, model, form, constants, q, v, t, lam):
        """(a, status): the accelerations M^-1 (Q - G^T lam) for given multipliers lam."""


def _block_diagonal(blocks):
    nb, k, _ = blocks.shape
    # a product with the identity's pattern, not einsum (a dot: no hoisted step)
    eye = jnp.eye(nb, dtype=blocks.dtype)
    return (eye[:, None, :, None] * blocks[:, :, None, :]).reshape(nb * k, nb * k)


def _own_rows(model: Model | None, m: int, nb: int) -> int | None:
    """Rows per body after the model's constraint rows (rp's normalisation, rotmat's
    orthonormality), or None where that is not known (no model) or not a whole number."""
    if model is None or nb == 0:
        return None
    per_body, rest = divmod(m - model.nc, nb)
    return None if rest or per_body < 0 else per_body


def solve_index1(
    system: Index1System, *, model: Model | None = None, structured: bool = False
) -> Index1Solution:
    """(a (nb, k), lam (m,), status) of the KKT system, solved with the pivot-ratio condition
    test of every linear solve: a singular system (redundant constraints, a configuration
    where constraint rows become dependent, a zero mass) is status NONFINITE, a near-singular
    one ILL_CONDITIONED, and the integrators report it as a failed step.

    ``structured=True`` (needs ``model``): block elimination on the body-joint graph
    (:mod:`jaxmbd.linear.structured`) instead of a dense LU; the KKT matrix is gathered
    into blocks from its dense form (the factorisation is structured, the assembly not).

    Inside :func:`jaxmbd.linear.schur.prefer` (``linear_solver="schur"``, or "auto" on the
    CPU for small systems), with ``model`` given and M block-diagonal (no added mass between
    bodies), the system is solved exactly through the Schur complement G M^{-1} G^T in
    elementwise kernels (:mod:`jaxmbd.linear.schur`; same statuses)."""
    nb, k, _ = system.mass.shape
    m = system.G.shape[0]
    own_rows = _own_rows(model, m, nb)
    if not structured and own_rows is not None and system.coupling is None and schur.active():
        # exact Schur complement of the block-diagonal M (jaxmbd.linear.schur)
        a, lam, rcond = schur.solve(
            system.mass, system.G, system.force, system.gamma, own_rows=own_rows
        )
        return Index1Solution(a, lam, condition_status(rcond, jnp.concatenate([a.ravel(), lam])))
    Q = system.force.reshape(-1)
    M = _block_diagonal(system.mass)
    if system.coupling is not None:
        M = M + system.coupling
    if m == 0:
        a, status = solve_with_condition(M, Q)
        return Index1Solution(a.reshape(nb, k), jnp.zeros((0,), Q.dtype), status)
    kkt = jnp.concatenate(
        [
            jnp.concatenate([M, system.G.T], 1),
            jnp.concatenate([system.G, jnp.zeros((m, m), Q.dtype)], 1),
        ],
        0,
    )
    rhs = jnp.concatenate([Q, system.gamma])
    if structured:
        per_body, rest = divmod(m - model.nc, nb)
        if rest:
            raise ValueError(
                f"structured index-1 solve: {m - model.nc} rows besides the model's "
                f"{model.nc} are not a fixed number per body ({nb} bodies)"
            )
        layout = newton_layout(model, tangent_size=k, extra_rows=per_body)
        blocks = BlockMatrix(layout.structure.gather(kkt), layout.structure, layout.n)
        x, status = solve_with_condition(blocks, rhs)
    else:
        x, status = solve_with_condition(kkt, rhs)
    return Index1Solution(x[: nb * k].reshape(nb, k), x[nb * k :], status)


def rA_index1_system(model: Model, q, v, t) -> Index1System:
    """rA (SO(3) x R^3, hybrid twist v = (r_dot, omega_bar)): M = diag(m I, J),
    Q = (f, n_bar - omega x J omega), G = [Phi_r, Pi_bar(Phi)] and gamma of paper 1 eq. 16
    (for two bodies on spherical joints: Mueller-Terze eqs. 41-42 and 61-64). Added mass
    (joint armature) in these coordinates is sum_k a_k g_k g_k^T itself
    (:func:`~jaxmbd.forces.added_mass_matrix`): its diagonal blocks join M's, the rest is
    the ``coupling``; its velocity part is in Q through the force element."""
    r, A = q
    rdot, omega = v[:, :3], v[:, 3:]
    _, G, _, gamma = rA_terms(model, r, A, rdot, omega, t)
    state = BodyState(r, A, rdot, omega)
    force = jnp.concatenate(newton_euler_forces(model, t, state), 1)
    mass = mass_blocks(model.mass, model.inertia)
    am = added_mass(model.forces, t, state) if adds_mass(model.forces) else None
    if am is None:
        return Index1System(mass, force, G, gamma)
    nb = model.nb
    added = added_mass_matrix(am, nb)
    own = jnp.einsum("aiaj->aij", added.reshape(nb, 6, nb, 6))
    coupling = added - _block_diagonal(own)
    return Index1System(mass + own, force, G, gamma, coupling)


def index1_system(model: Model, form, q, v, t) -> Index1System:
    """The formulation's :class:`Index1System` (capability ``index1_blocks``)."""
    if not form.index1_blocks:
        raise ValueError(
            f"formulation {form.name!r} does not declare the capability 'index1_blocks' "
            "(an index1_system(model, q, v, t) method giving the index-1 KKT blocks)"
        )
    return form.index1_system(model, q, v, t)


def index1_dynamics(model: Model, form, q, v, t, *, structured: bool = False) -> Index1Solution:
    """(a (nb, tangent_size), lam, status): accelerations, multipliers and the solve's status
    of the index-1 system at (q, v, t) (Mueller-Terze eq. 3); ``structured``: see
    :func:`solve_index1`."""
    system = index1_system(model, form, q, v, t)
    return solve_index1(system, model=model, structured=structured)


__all__ = [
    "Index1Solution",
    "Index1System",
    "index1_dynamics",
    "index1_system",
    "rA_index1_system",
    "solve_index1",
]
