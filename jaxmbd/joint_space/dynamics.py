"""Forward dynamics in joint coordinates: M qacc + C = tau + J^T w (- G^T lam), G qacc = gamma.

The tree's equations (:mod:`jaxmbd.tree.dynamics`) with the force elements of
:mod:`jaxmbd.joint_space.forces`; loops add their multipliers by the Schur complement on
one factorisation of M (:func:`jaxmbd.tree.mass_solve`: a dense Cholesky, or for large
trees the tree-sparse L^T D L of Featherstone 2008, section 6.2): with Y = M^-1 G^T,
(G Y + R) lam = G qacc_0 - gamma and qacc = qacc_0 - Y lam (Featherstone 2008, section
8.1, eq. 8.12-8.13 with the sign of the multipliers of :mod:`jaxmbd.formulations`: the
reaction on the bodies is -G^T lam); R and the target of soft rows are MuJoCo's
(:mod:`jaxmbd.joint_space.constraint_rows`), zero R on exact rows."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..compiled.xla_flags import hoisted_call, outside_hoisting
from ..errors import ModelError
from ..model import Model
from ..soft_constraints.equalities import EqualityTerms
from ..soft_constraints.problem import transposed_times
from ..soft_constraints.solver import solve
from ..soft_constraints.treatments import soft_constraints_of
from ..tree import (
    KinematicTree,
    TreePoses,
    bias_forces,
    body_velocities,
    integrate_positions,
    joint_forces,
    mass_matrix,
    mass_solve,
    poses,
)
from ..tree._elementwise import cross, halves, mtv, mv
from ..tree.articulated import forward_dynamics, uses_articulated
from ..tree.kinematics import dof_ancestor_sum, velocities
from .constraint_rows import (
    TreeConstraints,
    acceleration_terms,
    constraint_terms,
    solve_normal,
)
from .forces import JointSpaceForces, body_state, joint_space_forces


class Accelerations(NamedTuple):
    qacc: jax.Array
    lam: jax.Array  # (n_constraint_rows,)
    poses: TreePoses
    forces: JointSpaceForces
    loop_residual: jax.Array  # ||Phi|| of the exact constraint rows (0 without)
    rhs: jax.Array  # tau + J^T w - C: M qacc = rhs (- G^T lam)
    mass: jax.Array  # M (with armature; without the Euler step's h D)
    velocity_jacobian: jax.Array | None  # d(tau + J^T w)/d qvel, where asked for
    # a step's unilateral forces (impulses / h) and its solver status: steppers with exact
    # contact (jaxmbd.joint_space.hard_contact) set them
    unilateral: jax.Array | None = None
    status: jax.Array | None = None
    # the generalized-alpha method's algorithmic acceleration a_k
    algorithmic: jax.Array | None = None
    # d(tau + J^T w)/d q along the tangent qpos (+) d, where asked for
    position_jacobian: jax.Array | None = None
    # the generalised force of MuJoCo's soft constraint rows (qfrc_constraint, nv), where a
    # run solves them (jaxmbd.soft_constraints): M qacc = rhs + constraint_force
    constraint_force: jax.Array | None = None
    # the optimum of that solve (MuJoCo's d->qacc before an Euler step's implicit damping),
    # which mj_advance keeps as the next step's qacc_warmstart
    solver_qacc: jax.Array | None = None


def applied_generalised_forces(model: Model, tree: KinematicTree, qpos, qvel, t):
    """The force elements' generalised forces tau + J^T w (nv,) at (qpos, qvel, t)."""
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    forces = joint_space_forces(model, tree, p, body_state(p, rdot, omega), qpos, qvel, t)
    if forces.wrenches is None:
        return forces.tau
    return forces.tau + joint_forces(tree, p, forces.wrenches)


def _generalised(model, tree, p, qpos, t):
    """qvel -> (tau + J^T w, the JointSpaceForces) at fixed poses."""

    def at(qvel):
        rdot, omega = body_velocities(tree, p, qvel)
        forces = joint_space_forces(model, tree, p, body_state(p, rdot, omega), qpos, qvel, t)
        if forces.wrenches is None:
            return forces.tau, forces
        return forces.tau + joint_forces(tree, p, forces.wrenches), forces

    return at


def _mass_and_rhs(model, tree, p, forces, tau, qvel):
    """(M, tau - c): the joint-space mass matrix (armature on its diagonal) and the
    forces less the bias (Coriolis, centrifugal, gravity)."""
    mass = mass_matrix(tree, p, model.mass, model.inertia, forces.armature)
    return mass, tau - bias_forces(tree, p, model.mass, model.inertia, model.gravity, qvel)


def _smooth(model, tree, qpos, qvel, t, velocity_jacobian):
    """(poses, JointSpaceForces, M, tau - c, d(tau)/d qvel or None, tau) at (qpos, qvel,
    t): MuJoCo's smooth dynamics."""
    p = poses(tree, qpos)
    at = _generalised(model, tree, p, qpos, t)
    tau, forces = at(qvel)
    D = jax.jacfwd(lambda v: at(v)[0])(qvel) if velocity_jacobian else None
    return (p, forces, *_mass_and_rhs(model, tree, p, forces, tau, qvel), D, tau)


def _with_jacobians(model, tree, qpos, qvel, t):
    """(tau + J^T w, its Jacobians K = d/d q along the tangent qpos (+) d and
    D = d/d qvel, the JointSpaceForces, the poses): K from a forward-mode evaluation of the
    force elements with nv tangents in q (its primal gives the forces and poses), D from
    one with nv tangents in qvel at those poses. One evaluation with 2 nv tangents holds
    fewer ops (the hopper's env step 9.6k against 12.0k), but its qvel tangents run through
    the poses and the narrow phase as zeros: dm_control's hopper took 1.4x the CPU time per
    step that way (1000 steps, both programs in one process)."""

    def at(d):
        moved = integrate_positions(tree, qpos, d, 1.0)
        # the primal is qpos itself (bitwise); the tangent is the retraction's
        q = qpos + (moved - jax.lax.stop_gradient(moved))
        p = poses(tree, q)
        rdot, omega = body_velocities(tree, p, qvel)
        forces = joint_space_forces(model, tree, p, body_state(p, rdot, omega), q, qvel, t)
        if forces.wrenches is None:
            return forces.tau, (forces, p)
        return forces.tau + joint_forces(tree, p, forces.wrenches), (forces, p)

    K, (forces, p) = jax.jacfwd(at, has_aux=True)(jnp.zeros(tree.nv, qvel.dtype))
    at_poses = _generalised(model, tree, p, qpos, t)

    def generalised(v):
        f = at_poses(v)[0]
        return f, f

    D, tau = jax.jacfwd(generalised, has_aux=True)(qvel)
    return tau, K, D, forces, p


def accelerations(model: Model, tree: KinematicTree, loops: TreeConstraints | None, qpos, qvel,
                  t, *, step=None, damping_step=None, velocity_jacobian=False,
                  position_jacobian=False, warm=None) -> Accelerations:  # fmt: skip
    """qacc at (qpos, qvel, t). ``step``: the run's h (soft rows' ``refsafe``; None: 0).
    ``warm``: MuJoCo's ``qacc_warmstart`` for the soft rows' solve (the previous step's
    qacc; None: the solve starts from the unconstrained qacc, as with ``mjDSBL_WARMSTART``).
    ``damping_step``: h of MuJoCo's Euler step, which treats
    joint damping implicitly: M + h D replaces M (``mj_Euler``); None: explicit.
    ``velocity_jacobian``: also the forces' Jacobian d(tau + J^T w)/d qvel, from the same
    evaluation (forward mode, one tangent per dof). ``position_jacobian``: also
    K = d(tau + J^T w)/d q along the tangent qpos (+) d (with D, in the same evaluation)."""
    K = D = None
    constraints = soft_constraints_of(model)
    if position_jacobian:
        tau, K, D, forces, p = _with_jacobians(model, tree, qpos, qvel, t)
        mass, rhs = _mass_and_rhs(model, tree, p, forces, tau, qvel)
    elif constraints is not None:
        # a step of MuJoCo's constraint model runs as XLA thunks (see _solved): the poses,
        # forces, M and the bias as one native call instead of ~180 kernels
        p, forces, mass, rhs, D, tau = hoisted_call(_smooth, model, tree, qpos, qvel, t,
                                                    velocity_jacobian)  # fmt: skip
    else:
        p, forces, mass, rhs, D, tau = _smooth(model, tree, qpos, qvel, t, velocity_jacobian)
    M = mass
    if damping_step is not None and forces.damping is not None:
        M = M + damping_step * jnp.diag(forces.damping)
    if constraints is not None:
        h = damping_step if step is None else step
        qacc, force, qfrc, lam, optimum = _solved(constraints, tree, loops, p, qpos, qvel, t,
                                                  mass, M, rhs, h, warm)  # fmt: skip
        zero = jnp.zeros((), qacc.dtype)
        return Accelerations(qacc, lam, p, forces, zero, rhs, mass, D,
                             unilateral=force, position_jacobian=K,
                             constraint_force=qfrc, solver_qacc=optimum)  # fmt: skip
    if loops is None:
        if uses_articulated(tree):
            diagonal = forces.armature
            if damping_step is not None and forces.damping is not None:
                extra = damping_step * forces.damping
                diagonal = extra if diagonal is None else diagonal + extra
            qacc = forward_dynamics(tree, p, model.mass, model.inertia, model.gravity, qvel, tau,
                                    diagonal)  # fmt: skip
        else:
            qacc = mass_solve(tree, M, rhs)
        zero = jnp.zeros((), qacc.dtype)
        return Accelerations(qacc, jnp.zeros(0, qacc.dtype), p, forces, zero, rhs, mass, D,
                             position_jacobian=K)  # fmt: skip
    h = damping_step if step is None else step
    h = 0.0 if h is None else h
    phi, G, _, target, R = acceleration_terms(loops, tree, qpos, qvel, t, h, p)
    # one factorisation of M for qacc_0 and Y = M^-1 G^T (nv, m)
    solved = mass_solve(tree, M, jnp.concatenate([rhs[:, None], G.T], 1))
    qacc, Y = solved[:, 0], solved[:, 1:]
    lam = solve_normal(loops, G, Y.T, mv(G, qacc) - target, R)
    if R is not None:  # the drift of soft rows is theirs to have
        phi = jnp.where(jnp.asarray(loops.soft), 0.0, phi)
    return Accelerations(qacc - mv(Y, lam), lam, p, forces, jnp.linalg.norm(phi), rhs, mass, D,
                         position_jacobian=K)  # fmt: skip


def _soft_equalities(loops: TreeConstraints, tree, p, qpos, qvel, t) -> EqualityTerms:
    """The run's equality rows for MuJoCo's convex problem (all soft: exact rows, such as
    joints that close loops, are refused), with their values, Jacobian and J_dot qvel."""
    if not loops.soft.all():
        raise ModelError(
            "contact='soft' and limits='soft' solve MuJoCo's convex problem, which takes "
            "equality constraints as MuJoCo's soft rows: pass equality='soft' (or 'none'); "
            "exact rows (equality='exact', joints that close loops) are not supported with "
            "them"
        )
    cons = loops._replace(keep=None)  # every soft row is kept
    phi, G, _, gamma = constraint_terms(cons, tree, qpos, qvel, t, p)
    return EqualityTerms(cons.parts, phi, G, gamma)


#: The solver's loops run on the step's active rows gathered in blocks of this many rows
#: (:func:`jaxmbd.soft_constraints.solver.solve`), as many blocks as they fill. Jitted
#: 1000-step runs under random controls (one process each, ``jax.jit(lambda u:
#: mbd.simulate(model, t_end=..., controls=u))``): dm_control's humanoid (424 row slots, 37
#: active lying on the floor) 5236 / 5153 / 4634 / 4166 steps/s at blocks of 16 / 32 / 48 /
#: 64 rows, its cheetah 25.5k / 25.2k / 23.3k / 20.6k, XLA compile within 1 s of each other.
ACTIVE_ROW_BLOCK = 32


#: The most dofs of a step under MuJoCo's constraint model whose time loop XLA compiles as
#: one native function (its collisions primitive: no GJK or height field): the thunks
#: between its kernels cost more than the step's arithmetic. Jitted 1000-step runs under
#: random controls, the 2-core CPU (``python -m benchmarks.probes.soft_step_cost NAME``):
#: dm_control's hopper (nv 6) 63.0 -> 29.1 us a step, compile 7.5 -> 11.9 s; walker (9)
#: 50.2 -> 30.4 us, 6.2 -> 11.0 s; cheetah (9) 62.7 -> 40.1 us, 7.6 -> 15.2 s; the humanoid
#: (27) 270 -> 205 us but 15.8 -> 39.4 s, LLVM's time on one function growing faster than
#: its size.
WHOLE_STEP_NV = 12


def whole_step_hoisted(constraints, nv: int) -> bool:
    """Whether a step of ``nv`` dofs under ``constraints`` (MuJoCo's constraint model) has its
    time loop compiled as one native function (:data:`WHOLE_STEP_NV`)."""
    return nv <= WHOLE_STEP_NV and not constraints.searches_contacts


def _solved(constraints, tree, loops, p, qpos, qvel, t, mass, M, rhs, h, warm=None):
    """(qacc, efc_force, qfrc_constraint, lam, the solve's optimum) of MuJoCo's constraint
    model at the step's state: the convex problem's optimum with the plain mass matrix,
    then, where Euler's step takes the joint damping implicitly (M + h D given as ``M``),
    (M + h D) qacc = qfrc_smooth + qfrc_constraint, as ``mj_Euler`` integrates. The soft
    equality rows of ``loops`` come first among the rows; ``lam`` = -efc_force of them (the
    multipliers of the loops' rows: the reaction on the bodies is -G^T lam). ``warm``: the
    solve's warm start (engine_forward.c's ``warmstart``: the better of it and the
    unconstrained qacc), None, or a file that disables it (``mjDSBL_WARMSTART``), for none."""
    equality = None if loops is None else _soft_equalities(loops, tree, p, qpos, qvel, t)
    m = 0 if equality is None else equality.phi.shape[0]
    # the solver's loops are hoisted by XLA one by one, and so are the mass solves and the
    # rows (hoisted_call); a small step's time loop is hoisted whole (WHOLE_STEP_NV)
    qacc0 = hoisted_call(mass_solve, tree, mass, rhs)
    if not whole_step_hoisted(constraints, rhs.shape[-1]):
        qacc0 = outside_hoisting(qacc0)
    step = 0.0 if h is None else h

    def step_rows(capacity):
        def rows(c, tree, p, qpos, qvel, step, equality):
            return c.rows(tree, p, qpos, qvel, step, equality=equality,
                          contact_capacity=capacity)  # fmt: skip

        return rows

    # derivatives of the rows of every contact slot: the contacts' gather would transpose
    # to scatters, and its choice of branch would double the differentiated program
    built = hoisted_call(step_rows(...), constraints, tree, p, qpos, qvel, step, equality,
                         tangent_f=step_rows(None))  # fmt: skip
    if built is None:
        qacc = qacc0 if M is mass else hoisted_call(mass_solve, tree, M, rhs)
        zeros = jnp.zeros(0, qacc0.dtype)
        return qacc, zeros, jnp.zeros_like(qacc0), jnp.zeros(m, qacc0.dtype), qacc0
    _, rows = built
    settings = constraints.solver
    solution = solve(
        mass, qacc0, rows, method=settings.method, iterations=settings.iterations,
        tolerance=settings.tolerance, ls_iterations=settings.ls_iterations,
        ls_tolerance=settings.ls_tolerance, capacity=ACTIVE_ROW_BLOCK, a_warm=warm,
        warmstart=warm is not None and settings.warmstart,
    )  # fmt: skip
    qacc, qfrc = hoisted_call(_constraint_force_step, tree, rows.J, solution.efc_force,
                              solution.qacc, None if M is mass else M, rhs)  # fmt: skip
    return qacc, solution.efc_force, qfrc, -solution.efc_force[:m], solution.qacc


def _constraint_force_step(tree, J, efc_force, qacc, M, rhs):
    """(qacc, qfrc_constraint = J^T efc_force): the solve's qacc, or where Euler's step
    takes the joint damping implicitly (``M`` = M + h D; None: explicit) the solution of
    (M + h D) qacc = qfrc_smooth + qfrc_constraint, as ``mj_Euler`` integrates."""
    qfrc = transposed_times(J, efc_force)
    return (qacc if M is None else mass_solve(tree, M, rhs + qfrc)), qfrc


def body_accelerations(tree: KinematicTree, p: TreePoses, qvel, qacc):
    """(centre-of-mass accelerations (nb, 3), body-frame angular accelerations (nb, 3)):
    the spatial accelerations sum over the chain of S qacc + S_dot qvel, then
    r_ddot = a_O + alpha x c + omega x v_c (the classical acceleration of the centre of
    mass from the spatial one, Featherstone eq. 2.47)."""
    # elementwise, no dot: a dot among a run's per-step outputs keeps XLA's CPU backend
    # from compiling the time loop as one function (half the speed of a small step)
    V, S_dot = velocities(tree, p.S, qvel)
    A = dof_ancestor_sum(tree, p.S * qacc[:, None] + S_dot * qvel[:, None])
    w, v = halves(V)
    alpha, a = halves(A)
    v_c = v + cross(w, p.c)
    rddot = a + cross(alpha, p.c) + cross(w, v_c)
    return rddot, mtv(p.R, alpha)
