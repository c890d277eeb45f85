"""The formulation interface: how orientation is represented, constrained and updated.

Kinematics and dynamics are written once against :class:`AbstractFormulation`
(docs/design.md, principle 2). A formulation fixes:

* positions ``q = (r (nb, 3), ori)`` where ``ori`` is A (nb, 3, 3) for rA, p (nb, 4) for rp
  and eps (nb, 3) for re;
* velocities and accelerations as per-body rows ``(nb, tangent_size)``: (r_dot, omega_bar)
  for rA, (r_dot, p_dot) for rp, (r_dot, eps_dot) for re;
* a retraction ``q (+) delta`` (body-major tangent layout) and its tangent map;
* the constraint system Phi (plus normalisation for rp), its Jacobian G, nu and gamma;
* the continuous-time equations of motion g(q, v, a, lam, t) = 0 with dg/dlam = G^T, and
  optionally their hand-coded linearisation (:class:`DynamicsBlocks`, rA).

A formulation knows nothing of the step size: integrators (:mod:`jaxmbd.integrators`)
discretise these equations.
"""

from __future__ import annotations

import abc
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..constraints.equations import constraint_values
from ..forces import BodyState, added_mass, added_mass_forces, adds_mass, applied_forces
from ..model import Model
from ..newton import lu_solver, solve_linear
from .index1 import AbstractMultiplierElimination, Index1System

#: The capability flags of :class:`AbstractFormulation`: what a formulation provides, and
#: what an integrator may require (``AbstractIntegrator.requires``).
CAPABILITIES = (
    "body_state_coordinates",
    "has_pose",
    "index3_blocks",
    "index1_blocks",
    "vector_space",
    "lie_group",
    "director_coordinates",
    "two_step_multipliers",
    "has_chart_singularity",
)


class FormulationCapabilities(eqx.Module):
    """The capability flags (:data:`CAPABILITIES`, each False unless set) that integrators
    and analyses ask a formulation for, never its name: every formulation declares them,
    the per-body ones (:class:`AbstractFormulation`) and the joint coordinates
    (:class:`~jaxmbd.formulations.joint.JointCoordinates`) alike."""

    # -- capabilities ------------------------------------------------------------------------
    #: q = (r, A) and v = (r_dot, omega_bar) are the body state itself: the hand-coded rA
    #: rows apply (G = G_rA, paper 1 Tables 2-6) and the Newton matrix is block-assembled.
    body_state_coordinates: ClassVar[bool] = False
    #: ``coordinates(A)`` and ``rotation(ori)`` map absolute orientations (kinematics needs
    #: them; rotmat's coordinates are relative to the configuration at t = 0).
    has_pose: ClassVar[bool] = True
    #: ``dynamics_equations``, ``retract`` and its tangent map drive the implicit index-3
    #: step (:func:`~jaxmbd.integrators.implicit_step`; validated for backward Euler and
    #: generalized-alpha).
    index3_blocks: ClassVar[bool] = False
    #: :meth:`index1_system` gives the index-1 KKT blocks (explicit integrators).
    index1_blocks: ClassVar[bool] = False
    #: The coordinates form a vector space with v = q_dot: retract(q, d) = q + d.
    vector_space: ClassVar[bool] = False
    #: A Lie group with left-trivialised velocities: ``dexpinv(delta, v, sign=)`` gives the
    #: Munthe-Kaas increment (Mueller & Terze eq. 37).
    lie_group: ClassVar[bool] = False
    #: Director coordinates (phi, d1, d2, d3) with a constant mass matrix and constraints at
    #: most quadratic (Betsch & Leyendecker): the energy-momentum scheme's discrete gradient.
    director_coordinates: ClassVar[bool] = False
    #: The formulation's own multiplier elimination for explicit steps, an
    #: :class:`~jaxmbd.formulations.index1.AbstractMultiplierElimination` (rotmat: two-step
    #: elimination, Dumitriu & Margaritescu eq. 25), or None: the integrator's KKT solve.
    two_step_multipliers: ClassVar[AbstractMultiplierElimination | None] = None
    #: The orientation chart has singular points: ``near_chart_singularity`` flags them and
    #: ``start_chart_problems`` refuses a start on one.
    has_chart_singularity: ClassVar[bool] = False

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        """The capability flags this formulation sets."""
        return frozenset(c for c in CAPABILITIES if getattr(cls, c) not in (False, None))

    #: Runs go to the joint-space engine (:class:`~jaxmbd.formulations.joint.
    #: JointCoordinates`) instead of the per-body interface.
    runs_in_joint_space: ClassVar[bool] = False


class AbstractFormulation(FormulationCapabilities):
    """Strategy object for one orientation representation.

    A formulation declares what it provides by capability flags (:data:`CAPABILITIES`,
    each a ClassVar below, False unless set); integrators and analyses ask for these, never
    for a formulation's name, so a new formulation is one new class.
    """

    name: ClassVar[str]
    tangent_size: ClassVar[int]  # Newton unknowns per body
    #: The integrator :func:`jaxmbd.simulate` uses when none is named.
    default_integrator: ClassVar[str]

    #: The implicit step's own products are elementwise (no ``dot``, no LAPACK outside the
    #: Newton solve), so with the elementwise small solves XLA:CPU compiles the whole time
    #: step as one native loop: ``linear_solver="auto"`` then means "small" for the
    #: implicit integrators (``AbstractImplicitIntegrator.linear_solver_for``, measured in
    #: ``benchmarks/small_solve.py integrators``). Not a capability: every
    #: formulation runs either way.
    hoistable_implicit_step: ClassVar[bool] = False

    #: Whether a Solution stores the formulation's own coordinates ``q`` and velocities
    #: ``v`` besides the body state (r, A, r_dot, omega_bar). Not where they are that body
    #: state itself (rA): the copy would be about a third of every stored step.
    stores_own_coordinates: ClassVar[bool] = True

    # -- orientation representation ------------------------------------------------------
    @abc.abstractmethod
    def coordinates(self, A):
        """Orientation coordinates ``ori`` of rotation matrices A (nb, 3, 3)."""

    @abc.abstractmethod
    def rotation(self, ori):
        """Rotation matrices (nb, 3, 3) of orientation coordinates."""

    @abc.abstractmethod
    def rate_from_omega(self, ori, omega):
        """Orientation rates (nb, tangent_size - 3) giving body angular velocity omega."""

    @abc.abstractmethod
    def omega_from_rate(self, ori, rate, rate_dot):
        """(omega_bar, omegadot_bar) of orientation rates and their derivatives."""

    @abc.abstractmethod
    def retract(self, q, delta):
        """q (+) delta for a flat body-major correction of length nb * tangent_size."""

    @abc.abstractmethod
    def predict(self, q, v, h):
        """Initial Newton guess at t + h from positions and velocities at t."""

    # -- body quantities (the Solution's common fields) ---------------------------------
    def from_body_state(self, r, A, rdot, omega, rddot, omegadot):
        """(q, v, a) in this formulation's coordinates from centre-of-mass positions r
        (nb, 3), rotation matrices A (nb, 3, 3), velocities rdot, body-frame angular
        velocities omega and their time derivatives. Default: q = (r, ori), rows
        (r_dot, orientation rate)."""
        ori = self.coordinates(A)
        rate = self.rate_from_omega(ori, omega)
        # d/dt rate_from_omega(ori(t), omega(t)) with ori_dot = rate
        rate_dot = jax.jvp(self.rate_from_omega, (ori, omega), (rate, omegadot))[1]
        v = jnp.concatenate([rdot, rate], 1)
        a = jnp.concatenate([rddot, rate_dot], 1)
        return (r, ori), v, a

    def to_body_state(self, q, v, a):
        """(r, A, rdot, omega, rddot, omegadot) of a formulation state: the inverse of
        :meth:`from_body_state`."""
        r, ori = q
        omega, omegadot = self.omega_from_rate(ori, v[:, 3:], a[:, 3:])
        return r, self.rotation(ori), v[:, :3], omega, a[:, :3], omegadot

    def flat_coordinates(self, q):
        """The formulation's own coordinates as one row per body (..., nb, nq): Solution.q."""
        r, ori = q
        return jnp.concatenate([r, ori.reshape(r.shape[:-1] + (-1,))], -1)

    def near_chart_singularity(self, q):
        """Whether ``q`` is at a singularity of the orientation chart
        (``has_chart_singularity``): None, i.e. never."""
        return None

    def start_chart_problems(self, A) -> dict[int, str]:
        """Bodies whose orientations A (nb, 3, 3) the chart cannot represent at the start,
        each with the reason (``has_chart_singularity``): none."""
        return {}

    def solve(self, matrix, rhs):
        """Linear solves of the analyses (dense LU; singular -> non-finite -> error)."""
        return solve_linear(matrix, rhs)

    def solver(self, matrix):
        """A factorisation of ``matrix`` reused for several right-hand sides."""
        return lu_solver(matrix)

    # -- constraint system ---------------------------------------------------------------
    def num_equations(self, model: Model) -> int:
        return model.nc

    @abc.abstractmethod
    def residual(self, model: Model, q, t):
        """All position-level equations (constraints, plus normalisation for rp)."""

    @abc.abstractmethod
    def position_terms(self, model: Model, q, t):
        """(residual, G) with G the Jacobian in the tangent layout."""

    @abc.abstractmethod
    def velocity_terms(self, model: Model, q, t):
        """(G, nu): the velocity equations G v = nu."""

    @abc.abstractmethod
    def acceleration_rhs(self, model: Model, q, v, t):
        """gamma of the acceleration equations G a = gamma."""

    # -- continuous-time equations of motion (h-free; integrators discretise them) ----------
    def num_multipliers(self, model: Model) -> int:
        return self.num_equations(model)

    def tangent_map(self, delta):
        """T(delta) with d retract(q, delta) = retract(q, delta) (+) T(delta) d delta, as
        per-body blocks (nb, tangent_size, tangent_size); identity for vector spaces."""
        nb = delta.size // self.tangent_size
        return jnp.broadcast_to(
            jnp.eye(self.tangent_size), (nb, self.tangent_size, self.tangent_size)
        )

    def times_tangent_map(self, matrix, delta):
        """``matrix @ blockdiag(T(delta))`` for a matrix with body-major tangent columns."""
        return matrix

    @abc.abstractmethod
    def dynamics_equations(self, model: Model, q, v, a, lam, t):
        """(g, phi): the equations of motion g(q, v, a, lam, t) = 0, written so that
        dg/dlam = G^T (G the Jacobian of ``residual``), and the position equations
        phi = ``residual(q, t)``, from one evaluation."""

    def dynamics_and_velocity_equations(self, model: Model, q, v, a, lam, t):
        """(g, phi, G v - nu): ``dynamics_equations`` and ``velocity_residual`` together (a
        formulation may share their evaluation)."""
        g, phi = self.dynamics_equations(model, q, v, a, lam, t)
        return g, phi, self.velocity_residual(model, q, v, t)

    def added_mass_forces(self, model: Model, q, v, a, t):
        """(f, n_bar) (nb, 3) of the acceleration part of the force elements' added mass
        (joint armature, :class:`~jaxmbd.forces.AddedMass`) at the formulation's
        accelerations ``a``: -sum_k a_k (g_k . V_dot) g_k with the body accelerations
        V_dot = (r_ddot, omegadot_bar) of :meth:`to_body_state` (which include the parts
        that the velocities give, e.g. se3's omega x v_bar); None without added mass
        (static). Every ``dynamics_equations`` adds it to the applied forces, so autodiff of
        them puts the mass a g^T g (in the formulation's coordinates) in Newton matrices and
        index-1 systems."""
        if not adds_mass(model.forces):
            return None
        r, A, rdot, omega, rddot, omegadot = self.to_body_state(q, v, a)
        am = added_mass(model.forces, t, BodyState(r, A, rdot, omega))
        return added_mass_forces(am, rddot, omegadot)

    def index1_system(self, model: Model, q, v, t):
        """The index-1 KKT blocks (:class:`~jaxmbd.formulations.index1.Index1System`) at
        (q, v, t) from the h-free equations (``index1_blocks``): g(q, v, a, lam, t) is linear
        in a with dg/dlam = G^T, so M = dg/da and Q = -g(a = 0, lam = 0). M is block
        diagonal (bodies are coupled only by G) unless a force element adds mass between
        two bodies (joint armature): its off-diagonal blocks are then the system's
        ``coupling``. Formulations with closed forms override it (and call this one when
        the model adds mass)."""
        return index1_from_equations(self, model, q, v, t)

    def dynamics_linearisation(self, model: Model, q, v, a, lam, t):
        """Hand-coded :class:`DynamicsBlocks` at (q, v, a, lam), or None when the formulation
        relies on autodiff of the discretised residual (the default)."""
        return None

    def velocity_residual(self, model: Model, q, v, t):
        """G(q) v - nu(q, t) = d/ds residual(retract(q, s v), t + s) at s = 0."""
        zero = jnp.zeros((), dtype=v.dtype)

        def along(s):
            return self.residual(model, self.retract(q, s * v.reshape(-1)), t + s)

        return jax.jvp(along, (zero,), (jnp.ones_like(zero),))[1]

    def velocity_residual_linearisation(self, model: Model, q, v, t):
        """d(G v - nu)/d(tangent of q), shape (num_equations, nb * tangent_size) (autodiff)."""
        n = v.size

        def fn(xi):
            return self.velocity_residual(model, self.retract(q, xi), v, t)

        return jax.jacfwd(fn)(jnp.zeros(n, dtype=v.dtype))


class DynamicsBlocks(NamedTuple):
    """Continuous-time blocks of the equations of motion at one state (n = nb * tangent_size,
    m = num_equations); an implicit integrator assembles its Newton matrix from them.

    ``mass`` = dg/da, ``damping`` = dg/dv, ``stiffness`` = dg/d(tangent of q) and ``G`` =
    dphi/d(tangent of q), all (.., n); dg/dlam = G^T.
    """

    g: jax.Array
    phi: jax.Array
    mass: jax.Array
    damping: jax.Array
    stiffness: jax.Array
    G: jax.Array


class AbstractAutodiffFormulation(AbstractFormulation):
    """A formulation whose Jacobian, nu and gamma come from autodiff of Phi(q, t)."""

    orientation_size: ClassVar[int]
    vector_space: ClassVar[bool] = True  # q = (r, ori) flat, retract = addition

    def _flat(self, q):
        r, ori = q
        return jnp.concatenate([r, ori], axis=1).reshape(-1)

    def _unflat(self, x, nb):
        x = x.reshape(nb, 3 + self.orientation_size)
        return x[:, :3], x[:, 3:]

    def extra_equations(self, ori):
        return jnp.zeros((0,))

    def residual(self, model, q, t):
        r, ori = q
        phi = constraint_values(model, r, self.rotation(ori), t)
        return jnp.concatenate([phi, self.extra_equations(ori)])

    def _flat_residual(self, model, nb):
        return lambda x, t: self.residual(model, self._unflat(x, nb), t)

    def position_terms(self, model, q, t):
        fn = self._flat_residual(model, model.nb)
        x = self._flat(q)
        return fn(x, t), jax.jacfwd(fn)(x, t)

    def velocity_terms(self, model, q, t):
        fn = self._flat_residual(model, model.nb)
        x = self._flat(q)
        G = jax.jacfwd(fn)(x, t)
        _, phi_t = jax.jvp(lambda s: fn(x, s), (t,), (jnp.ones_like(t),))
        return G, -phi_t

    def acceleration_rhs(self, model, q, v, t):
        """gamma = -d^2/ds^2 Phi(q + s q_dot, t + s) at s = 0 (velocity-quadratic terms)."""
        fn = self._flat_residual(model, model.nb)
        x, xd = self._flat(q), v.reshape(-1)
        one = jnp.ones_like(t)

        def first(x_, t_):
            return jax.jvp(fn, (x_, t_), (xd, one))[1]

        return -jax.jvp(first, (x, t), (xd, one))[1]

    def retract(self, q, delta):
        r, ori = q
        x = self._flat(q) + delta
        return self._unflat(x, r.shape[0])

    def predict(self, q, v, h):
        r, ori = q
        return r + h * v[:, :3], ori + h * v[:, 3:]

    def constraint_jacobian(self, model, q, t):
        """Phi_q (nc, nb * tangent_size) of the GCON rows only (no normalisation)."""
        nb = model.nb

        def phi(x):
            r, ori = self._unflat(x, nb)
            return constraint_values(model, r, self.rotation(ori), t)

        return jax.jacfwd(phi)(self._flat(q))

    def _forces(self, model, q, v, t, a=None):
        """(f, n_bar) of gravity and the force elements, and with accelerations ``a`` the
        acceleration part of their added mass (:meth:`added_mass_forces`)."""
        r, ori = q
        omega, _ = self.omega_from_rate(ori, v[:, 3:], jnp.zeros_like(v[:, 3:]))
        f, n = applied_forces(
            model.forces,
            t,
            BodyState(r, self.rotation(ori), v[:, :3], omega),
            model.mass,
            model.gravity,
        )
        inertial = None if a is None else self.added_mass_forces(model, q, v, a, t)
        if inertial is not None:
            f, n = f + inertial[0], n + inertial[1]
        return f, n


def index1_from_equations(form, model: Model, q, v, t):
    """:meth:`AbstractFormulation.index1_system` by autodiff of ``form.dynamics_equations``
    (for any formulation; those with closed forms use it for models with added mass)."""
    nb, ts = model.nb, form.tangent_size
    lam0 = jnp.zeros(form.num_multipliers(model), v.dtype)

    def g(a_flat):
        return form.dynamics_equations(model, q, v, a_flat.reshape(nb, ts), lam0, t)[0]

    zero = jnp.zeros(nb * ts, v.dtype)
    minus_Q = g(zero)
    M = jax.jacfwd(g)(zero)
    blocks = jnp.einsum("aiaj->aij", M.reshape(nb, ts, nb, ts))
    G = form.position_terms(model, q, t)[1]
    gamma = form.acceleration_rhs(model, q, v, t)
    coupling = None
    if adds_mass(model.forces):
        eye = jnp.eye(nb, dtype=M.dtype)
        diagonal = (eye[:, None, :, None] * blocks[:, :, None, :]).reshape(nb * ts, nb * ts)
        coupling = M - diagonal
    return Index1System(blocks, -minus_Q.reshape(nb, ts), G, gamma, coupling)
