"""Diagnostics of a Solution: energy, momenta, constraint violations, reaction forces.

All functions are pure JAX, vectorised over time with ``vmap`` and differentiable.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..constraints.equations import constraint_values, rA_terms
from ..contact import slot_history, with_contact
from ..forces import (
    BodyState,
    added_kinetic_energy,
    added_mass,
    adds_mass,
)
from ..formulations import formulation_named, get_formulation, rotmat
from ..joint_space import tree_multipliers, tree_wrenches
from ..model import Model
from ..model.joints import joint_kind
from ..solution import Solution


class Energy(NamedTuple):
    kinetic: jax.Array  # (T,)
    potential: jax.Array  # (T,) gravity, spring-dampers' springs, contacts' elastic part
    total: jax.Array


def energy(model: Model, sol: Solution) -> Energy:
    """Kinetic energy 1/2 (m |r_dot|^2 + omega_bar^T J omega_bar) (+ 1/2 a q_dot^2 of each
    joint armature, :mod:`jaxmbd.forces.joint_dynamics`) and potential energy
    -m g^T r (+ 1/2 k (l - l0)^2 of each spring-damper, + K delta^(n+1) / (n + 1) of each
    penetrating contact slot, :mod:`jaxmbd.contact.law`). Director solutions: 1/2 v^T M v
    with the redundant velocities, where energy_momentum conserves it exactly."""
    if _director(sol):
        form, q = _director_q(sol)
        kinetic = jax.vmap(lambda v: form.kinetic_energy(model, v))(sol.v)
        potential = jax.vmap(lambda q_: form.potential(model, q_))(q)
        return Energy(kinetic, potential, kinetic + potential)
    return _energy(model, sol.r, sol.A, sol.rdot, sol.omega)


@eqx.filter_jit
def _energy(model, r, A, rdot, omega):
    """The body-state branch of :func:`energy`, compiled as one program: run op by op, each
    primitive compiled on its own for every new trajectory length (several CPU-seconds
    the first time, against about one for the program)."""
    J = model.inertia
    kinetic = 0.5 * (
        jnp.einsum("b,tbi,tbi->t", model.mass, rdot, rdot)
        + jnp.einsum("tbi,bij,tbj->t", omega, J, omega)
    )
    if adds_mass(model.forces):  # joint armature: + 1/2 a q_dot^2 (forces.AddedMass)

        def rotor(r, A, rdot, omega):
            state = BodyState(r, A, rdot, omega)
            return added_kinetic_energy(added_mass(model.forces, 0.0, state), rdot, omega)

        kinetic = kinetic + jax.vmap(rotor)(r, A, rdot, omega)
    potential = -jnp.einsum("b,i,tbi->t", model.mass, model.gravity, r)
    for force in model.forces:  # elements that store energy (springs, contacts, ...)

        def stored(r, A, force=force):
            zero = jnp.zeros_like(r)
            return force.potential_energy(BodyState(r, A, zero, zero))

        energy = jax.vmap(stored)(r, A)  # None where the element stores none
        if energy is not None:
            potential = potential + energy
    return Energy(kinetic, potential, kinetic + potential)


def linear_momentum(model: Model, sol: Solution):
    """Sum of m r_dot, (T, 3) (director solutions: sum of m v_phi)."""
    if _director(sol):
        return jnp.einsum("b,tbi->ti", model.mass, sol.v[:, :, :3])
    return jnp.einsum("b,tbi->ti", model.mass, sol.rdot)


def angular_momentum(model: Model, sol: Solution, point=(0.0, 0.0, 0.0)):
    """Global angular momentum about ``point``: sum (r - p) x m r_dot + A J omega_bar, (T, 3).
    Director solutions: sum phi x m v_phi + E_IJ d_I x v_J (redundant form)."""
    if _director(sol):
        form, q = _director_q(sol)
        return jax.vmap(lambda q_, v: form.angular_momentum(model, q_, v, point))(q, sol.v)
    rel = sol.r - jnp.asarray(point)
    orbital = jnp.cross(rel, model.mass[None, :, None] * sol.rdot)
    spin = jnp.einsum("tbij,bjk,tbk->tbi", sol.A, model.inertia, sol.omega)
    return jnp.sum(orbital + spin, axis=1)


def _director(sol) -> bool:
    """Whether ``sol`` holds director coordinates (capability ``director_coordinates``),
    whose redundant velocities carry the exactly conserved invariants."""
    form = formulation_named(sol.formulation)
    own = sol.q is not None and sol.v is not None
    return form is not None and form.director_coordinates and own


def _director_q(sol):
    return get_formulation(sol.formulation), (sol.q[:, :, :3], sol.q[:, :, 3:])


class Violations(NamedTuple):
    position: jax.Array  # ||Phi||_inf per step
    velocity: jax.Array  # ||G v - nu||_inf
    acceleration: jax.Array  # ||G a - gamma||_inf
    orthonormality: jax.Array  # max_b ||A_b^T A_b - I||_F


def constraint_violation(model: Model, sol: Solution) -> Violations:
    """Constraint violation at position, velocity and acceleration level, and ||A^T A - I||."""
    return Violations(
        *_violations(model, sol.t, sol.r, sol.A, sol.rdot, sol.omega, sol.rddot, sol.omegadot)
    )


@eqx.filter_jit  # one program (see _energy)
def _violations(model, t, r, A, rdot, omega, rddot, omegadot):
    def one(t, r, A, rdot, omega, rddot, omegadot):
        phi, G, nu, gamma = rA_terms(model, r, A, rdot, omega, t)
        v = jnp.concatenate([rdot, omega], 1).reshape(-1)
        a = jnp.concatenate([rddot, omegadot], 1).reshape(-1)
        ortho = jnp.max(jnp.linalg.norm(jnp.swapaxes(A, -1, -2) @ A - jnp.eye(3), axis=(1, 2)))

        def inf(x):
            return jnp.max(jnp.abs(x)) if x.size else jnp.asarray(0.0)

        return inf(phi), inf(G @ v - nu), inf(G @ a - gamma), ortho

    return jax.vmap(one)(t, r, A, rdot, omega, rddot, omegadot)


class Reactions(NamedTuple):
    """Reaction loads of constraints on their two bodies (the ground included).

    ``force_*`` is the global force on the body (acting at its centre of mass, together with
    the torque), ``torque_*`` the torque about the centre of mass in the body frame and
    ``torque_*_global`` the same in the global frame. Shapes (T, n, 3).
    """

    force_i: jax.Array
    torque_i: jax.Array
    force_j: jax.Array
    torque_j: jax.Array
    torque_i_global: jax.Array
    torque_j_global: jax.Array
    names: tuple[str, ...]


def reaction_forces(
    model: Model, sol: Solution, *, per: str = "constraint", at: str = "com",
    frame: str = "global",
) -> Reactions:  # fmt: skip
    """Reaction force and torque of each GCON (``per="constraint"``) or joint (``"joint"``).

    The generalised reaction on a body is -[Phi_r, Pi_bar(Phi)]^T lam (paper 1 eq. 34c).

    ``at="com"`` (default): the force acts at each body's centre of mass with the torque
    about it (``torque_*`` in the body frame, ``torque_*_global`` global). ``at="joint"``
    (with ``per="joint"``): the same load moved to the joint point on each body (the
    torque about that point, tau_P = tau_com - (A s_bar) x f). ``frame="joint"`` (with
    ``at="joint"``): force and torque (``force_*``, ``torque_*``) in the joint's frame on
    each body, its axis first for revolute, translational, cylindrical and planar joints
    (then the frame's first two axes; a universal joint's axes are axis_i, axis_j, normal;
    :mod:`jaxmbd.model.joints`): the components an engineer reads off a bearing (axial, radial)
    and the torque the joint transmits about each axis (zero about a revolute's axis
    unless something drives it). ``torque_*_global`` stays the torque about the joint
    point in global axes.

    A run with ``formulation="joint"`` has multipliers for its loops' rows only: the tree
    joints' reactions come from Newton-Euler (:func:`joint_wrenches` with
    ``along_joints=False``: the joint-space forces along a joint's own dofs, actuators,
    damping, limits, are applied loads, as in the absolute formulations), written as the
    multipliers of the rows joining each body to its parent, so that every option above
    reads them as in the other formulations. Bodies whose joints have no rows (joints
    composed on one body in a MuJoCo file) appear in :func:`joint_wrenches` only.

    Redundant rows (an overconstrained loop, :mod:`jaxmbd.constraints.redundancy`) were dropped for
    the
    run and carry zero. The split of a loop's internal force among dependent rows is not
    unique (a self-stress can be added without changing the motion); the resultant force
    and torque on each body is, and is what the rows that were kept give.
    """
    nb, nc = model.nb, model.nc
    bi = np.array([b for b, _ in model.constraint_bodies], dtype=int)
    bj = np.array([b for _, b in model.constraint_bodies], dtype=int)
    lam = tree_multipliers(model, sol) if _joint_space(sol) else sol.lam

    def one(t, r, A, lam):
        zero = jnp.zeros_like(r)
        _, G, _, _ = rA_terms(model, r, A, zero, zero, t, include_ground=True)
        G = G.reshape(nc, nb + 1, 6)
        rows = jnp.arange(nc)
        load_i = -G[rows, bi] * lam[:, None]
        load_j = -G[rows, bj] * lam[:, None]
        A_all = jnp.concatenate([A, jnp.eye(3)[None]], 0)
        ti_g = jnp.einsum("cij,cj->ci", A_all[bi], load_i[:, 3:])
        tj_g = jnp.einsum("cij,cj->ci", A_all[bj], load_j[:, 3:])
        return load_i[:, :3], load_i[:, 3:], load_j[:, :3], load_j[:, 3:], ti_g, tj_g

    out = jax.vmap(one)(sol.t, sol.r, sol.A, lam)
    names = model.constraint_names
    if per == "joint":
        joints = list(dict.fromkeys(model.constraint_joints))
        index = np.array([joints.index(j) for j in model.constraint_joints])
        one_hot = jnp.asarray(np.eye(len(joints))[index])  # (nc, n_joints)
        # A joint's rows share their two bodies, possibly in swapped order: align to the first.
        first = {j: k for k, j in reversed(list(enumerate(model.constraint_joints)))}
        swapped = np.array(
            [
                model.constraint_bodies[k] != model.constraint_bodies[first[j]]
                for k, j in enumerate(model.constraint_joints)
            ]
        )
        fi, ti, fj, tj, tig, tjg = out
        s = jnp.asarray(swapped)[None, :, None]
        fi, fj = jnp.where(s, fj, fi), jnp.where(s, fi, fj)
        ti, tj = jnp.where(s, tj, ti), jnp.where(s, ti, tj)
        tig, tjg = jnp.where(s, tjg, tig), jnp.where(s, tig, tjg)
        out = tuple(jnp.einsum("tci,cj->tji", x, one_hot) for x in (fi, ti, fj, tj, tig, tjg))
        names = tuple(joints)
        bodies = [model.constraint_bodies[first[j]] for j in joints]
    elif per != "constraint":
        raise ValueError(f"per must be 'constraint' or 'joint', got {per!r}")
    if at not in ("com", "joint") or frame not in ("global", "joint"):
        raise ValueError(f"reaction_forces: at must be 'com' or 'joint' and frame 'global' or "
                         f"'joint', got at={at!r}, frame={frame!r}")  # fmt: skip
    if frame == "joint" and at != "joint":
        raise ValueError("reaction_forces: frame='joint' needs at='joint'")
    if at == "joint":
        if per != "joint":
            raise ValueError("reaction_forces: at='joint' needs per='joint'")
        out = _at_joints(model, sol, out, names, bodies, frame)
    return Reactions(*out, names=names)


def _at_joints(model: Model, sol: Solution, out, names, bodies, frame: str):
    """The per-joint loads ``out`` (at the centres of mass) moved to each joint's point on
    each body, and in its frame when ``frame="joint"`` (see :func:`reaction_forces`)."""
    defs = {d.name: d for d in model.joints}
    missing = [n for n in names if n not in defs]
    if missing:
        raise ValueError(
            f"reaction_forces: at='joint' needs joint frames; {missing} have none (joints "
            "defined at GCON level, e.g. in a published model file); use at='com'"
        )
    nb = model.nb
    fi, ti, fj, tj, tig, tjg = out
    A_all = jnp.concatenate([sol.A, jnp.broadcast_to(jnp.eye(3), sol.A[:, :1].shape)], 1)
    new = {"fi": [], "ti": [], "fj": [], "tj": [], "tig": [], "tjg": []}
    for k, name in enumerate(names):
        d = defs[name]
        # the rows' first body is the joint's body_i unless the builder listed them swapped
        pairs = {"i": (d.body_i, d.s_bar_i, d.frame_i), "j": (d.body_j, d.s_bar_j, d.frame_j)}
        if bodies[k] != (d.body_i, d.body_j):
            pairs = {"i": pairs["j"], "j": pairs["i"]}
        for side, force, torque_g in (("i", fi, tig), ("j", fj, tjg)):
            body, s_bar, axes = pairs[side]
            A = A_all[:, body] if body < nb else A_all[:, nb]
            arm = jnp.einsum("tij,j->ti", A, s_bar)  # from the centre of mass to the point
            f, tau = force[:, k], torque_g[:, k] - jnp.cross(arm, force[:, k])
            if frame == "joint":
                E = jnp.einsum("tij,jk->tik", A, axes)
                if joint_kind(d.kind).axis_last:
                    E = E[:, :, jnp.array([2, 0, 1])]
                f_out = jnp.einsum("tij,ti->tj", E, f)
                t_out = jnp.einsum("tij,ti->tj", E, tau)
            else:
                f_out, t_out = f, jnp.einsum("tij,ti->tj", A, tau)  # body frame
            new["f" + side].append(f_out)
            new["t" + side].append(t_out)
            new["t" + side + "g"].append(tau)
    return tuple(jnp.stack(new[key], 1) for key in ("fi", "ti", "fj", "tj", "tig", "tjg"))


class JointWrenches(NamedTuple):
    """What each body receives from its parent through its tree joints (a run in joint
    coordinates), global axes, shapes (T, nb, 3): ``force``, ``torque`` about the body's
    centre of mass and ``torque_origin`` about the world origin; ``names`` the bodies."""

    force: jax.Array
    torque: jax.Array
    torque_origin: jax.Array
    names: tuple[str, ...]


def joint_wrenches(model: Model, sol: Solution, *, along_joints: bool = True) -> JointWrenches:
    """The wrench on every body from its parent through its joints along a run with
    ``formulation="joint"``, by Newton-Euler from the Solution's body accelerations: the
    sum over the body's subtree of I a + v x* I v less the applied loads (gravity, the force
    elements that act on bodies, contact as the run had it) and the loops' constraint loads
    -G^T lam (:mod:`jaxmbd.joint_space.reactions`). ``along_joints=True``: the whole
    interaction, MuJoCo's ``cfrc_int`` (which includes the forces along the joints' own
    dofs: actuators, damping, limits); False: the constraint reaction only, what
    :func:`reaction_forces` reports (those joint-space forces are applied loads there, as in
    the absolute formulations). A free root receives nothing. Body-acting force elements are
    evaluated with ``model``'s controls (joint actuators, the usual kind, act along joints
    and need none)."""
    if not _joint_space(sol):
        raise ValueError(
            "joint_wrenches: needs a run with formulation='joint' (the absolute formulations "
            "give reactions from their multipliers: reaction_forces)"
        )
    w = tree_wrenches(model, sol, along_joints)
    force, origin = w[..., 3:], w[..., :3]
    return JointWrenches(force, origin - jnp.cross(sol.r, force), origin, tuple(model.body_names))


def _joint_space(sol: Solution) -> bool:
    form = formulation_named(sol.formulation)
    return sol.tree is not None and form is not None and form.runs_in_joint_space


def position_residual(model: Model, sol: Solution):
    """Phi at every step, (T, nc)."""
    return _position_residual(model, sol.t, sol.r, sol.A)


@eqx.filter_jit  # one program (see _energy)
def _position_residual(model, t, r, A):
    return jax.vmap(lambda t_, r_, A_: constraint_values(model, r_, A_, t_))(t, r, A)


class ContactForces(NamedTuple):
    """Contact loads per pair (``model.contacts.pair_names``), global frame, time first:
    ``force`` (T, n_pairs, 3) the total force of body_j on body_i (``normal`` plus
    ``tangential``, each (T, n_pairs, 3)); ``torque`` (T, n_pairs, 3) its moment about
    body_i's centre of mass, the torsional and rolling friction torques included;
    ``point`` (T, n_pairs, 3) the centre of pressure (the normal
    forces' weighted mean of the slot points; the deepest slot's point where no force
    acts); ``gap`` (T, n_pairs) the smallest gap of the pair's slots; ``active`` (T,
    n_pairs) whether any slot penetrates. Body_j feels the opposite force."""

    force: jax.Array
    normal: jax.Array
    tangential: jax.Array
    torque: jax.Array
    point: jax.Array
    gap: jax.Array
    active: jax.Array
    names: tuple[str, ...]


def contact_forces(model: Model, sol: Solution) -> ContactForces:
    """The contact loads of every pair of ``model`` along ``sol`` (:class:`ContactForces`),
    summed over the pair's slots (``sol.contact`` has them per slot). Evaluated from the
    Solution's body states with the model's contact element (its masses set to
    ``model.mass``, as :func:`~jaxmbd.simulate` does): after a run with ``contact="none"``
    these are the forces the pairs would have exerted."""
    element = with_contact(model, "compliant", where="contact_forces").contacts
    if element is None:
        raise ValueError(f"contact_forces: model '{model.name}' has no contact pairs")
    s = slot_history(element, sol.r, sol.A, sol.rdot, sol.omega)
    one_hot = jnp.asarray(np.eye(element.n_pairs)[np.asarray(s.pair, dtype=int)])  # (ns, np)
    normal_slot = s.normal_force[..., None] * s.normal
    normal = jnp.einsum("...si,sp->...pi", normal_slot, one_hot)
    tangential = jnp.einsum("...si,sp->...pi", s.tangential_force, one_hot)
    body_i = np.asarray([i for i, _ in element.pairs], dtype=int)[np.asarray(s.pair, dtype=int)]
    r_all = jnp.concatenate([sol.r, jnp.zeros_like(sol.r[..., :1, :])], axis=-2)
    arm = s.point - r_all[..., body_i, :]
    torque = jnp.einsum(
        "...si,sp->...pi",
        jnp.cross(arm, normal_slot + s.tangential_force) + s.friction_torque,
        one_hot,
    )
    weight = jnp.einsum("...s,sp->...p", s.normal_force, one_hot)
    pressed = weight > 0
    centre = (
        jnp.einsum("...s,...si,sp->...pi", s.normal_force, s.point, one_hot)
        / jnp.where(pressed, weight, 1.0)[..., None]
    )
    depth = jnp.where(one_hot.T > 0, -s.gap[..., None, :], -jnp.inf)  # (..., np, ns)
    deepest = jnp.argmax(depth, axis=-1)
    fallback = jnp.take_along_axis(s.point[..., None, :, :], deepest[..., None, None], axis=-2)
    point = jnp.where(pressed[..., None], centre, fallback[..., 0, :])
    gap = -jnp.max(depth, axis=-1)
    active = jnp.einsum("...s,sp->...p", s.active.astype(s.gap.dtype), one_hot) > 0
    return ContactForces(
        normal + tangential, normal, tangential, torque, point, gap, active, element.pair_names
    )


# -- Mueller-Terze diagnostics: violations per joint --------------------------------------------


class JointViolations(NamedTuple):
    """Constraint violation of each joint (the Euclidean norm of its GCON rows), (T, n_joints):
    for a spherical joint ``position`` is the distance between the two joined points in m
    (Mueller & Terze Figs. 2, 5, 6, 9, 12-14) and ``velocity`` their relative speed."""

    position: jax.Array
    velocity: jax.Array
    names: tuple[str, ...]


def joint_violation(model: Model, sol: Solution) -> JointViolations:
    """Per-joint ||Phi_k|| and ||G_k v - nu_k|| at every step, from the Solution's body
    quantities (r, A, r_dot, omega_bar): the same numbers for every formulation."""
    joints = list(dict.fromkeys(model.constraint_joints))
    index = np.array([joints.index(j) for j in model.constraint_joints], dtype=int)
    one_hot = jnp.asarray(np.eye(len(joints))[index])  # (nc, n_joints)

    def one(t, r, A, rdot, omega):
        phi, G, nu, _ = rA_terms(model, r, A, rdot, omega, t)
        v = jnp.concatenate([rdot, omega], 1).reshape(-1)
        return phi, G @ v - nu

    phi, psi = jax.vmap(one)(sol.t, sol.r, sol.A, sol.rdot, sol.omega)
    return JointViolations(
        jnp.sqrt((phi**2) @ one_hot), jnp.sqrt((psi**2) @ one_hot), tuple(joints)
    )


# -- Dumitriu-Margaritescu (rotmat) diagnostics -------------------------------------------------


def orthogonality_multipliers(model: Model, sol: Solution, *, method: str = "two_step"):
    """The symmetric multipliers Lambda_i (T, nb, 3, 3) of the orthogonality constraints
    R_i^T R_i = I along a ``rotmat`` Solution (Dumitriu & Margaritescu eqs. 9 and 25), see
    :func:`jaxmbd.formulations.rotmat.orthogonality_multipliers`."""
    return rotmat.orthogonality_multipliers(model, sol, method=method)


def orthogonality_error(sol: Solution):
    """||R_i^T R_i - I||_F (T, nb) of a ``rotmat`` Solution (the drift of the quadratic
    orthogonality constraints; no stabilisation)."""
    return rotmat.orthogonality_error(sol)
