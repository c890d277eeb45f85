"""The compliant contact force element: every contact pair of a model, evaluated at once.

:class:`ContactForce` is an ordinary force element (:class:`~jaxmbd.forces.AbstractForce`):
:meth:`~jaxmbd.ModelBuilder.build` appends it to ``model.forces`` and ``model.contacts``
returns it. Every formulation applies it like any other force, and the implicit
integrators put its state derivatives (stiffness and damping of the contacts and of the
regularised friction) into their Newton matrix: nothing below ``integrators/`` knows it.

Static: the pairs (bodies), the collision groups (one per pair kind, shape pairs stacked,
see :mod:`jaxmbd.contact.narrow_phase`; a height field's with the shapes of one kind,
:mod:`jaxmbd.contact.height_field`) and so the slots. Array leaves (``jax.grad``
reaches them): per pair ``friction``, ``torsional_friction``, ``rolling_friction``,
``restitution``, ``stiffness``, ``damping``, ``exponent``, ``slip_velocity`` and
``margin``; per collision shape its local pose and size; the contact
laws (``laws``, :class:`~jaxmbd.contact.abstract_law.AbstractContactLaw`, and
``pair_law``, static: the law of each pair); ``mass``, the bodies' masses, and
``mechanism``, the model without its forces, which :func:`~jaxmbd.simulate` sets before a
run (so ``jax.grad`` with respect to ``model.mass`` and ``model.inertia`` is complete).

The normal law calibrates its damping on the effective mass of each slot along its normal
(:meth:`ContactForce.effective_mass`): m_eff = 1 / (n^T J M^-1 J^T n) with J the Jacobian of
the relative velocity at the contact point and M^-1 the inverse inertia of the mechanism
as its joints constrain it: the inverse of the normal entry of the Delassus matrix
J M^-1 J^T (F. Pfeiffer and C. Glocker, Multibody Dynamics with Unilateral Contacts, Wiley
1996, ch. 7), which in a central impact of free bodies is the pair's translational reduced
mass that Flores et al.'s law was written for. A rod pinned at one end, struck at its tip, has
m_eff = I_pivot / l^2 = m / 3; a free rod landing on one end, m / 4.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.materialize import materialized
from ..compiled.rows import with_ground
from ..compiled.small import mm, mv
from ..constraints.equations import rA_jacobian_from_rows, rA_rows
from ..forces import AbstractForce, BodyState
from ..forces._joint import _sum_per_body
from ..model import Model
from ..tree._elementwise import cholesky_solve, row_products
from .abstract_law import AbstractContactLaw, PairParameters
from .height_field import HeightFieldGroup
from .narrow_phase import COLLIDE, SLOTS, Slots

CONTACT_OPTIONS = ("compliant", "none", "hard")


class CollisionGroup(eqx.Module):
    """All shape pairs of one pair kind, stacked (k members of SLOTS[kind] slots each).

    Shape A of member m is fixed to body ``body_a[m]`` (``nb``: the ground) at the local
    pose (``pos_a[m]``, ``rot_a[m]``) with size ``size_a[m]``; likewise B. ``pair[m]`` is
    the contact pair the member belongs to; ``b_is_i[m]`` whether B is on the pair's
    body_i (else A is)."""

    kind: str = eqx.field(static=True)
    pair: tuple[int, ...] = eqx.field(static=True)
    body_a: tuple[int, ...] = eqx.field(static=True)
    body_b: tuple[int, ...] = eqx.field(static=True)
    b_is_i: tuple[bool, ...] = eqx.field(static=True)
    pos_a: jax.Array
    rot_a: jax.Array
    size_a: jax.Array
    pos_b: jax.Array
    rot_b: jax.Array
    size_b: jax.Array
    shape_a: tuple[int, ...] = eqx.field(static=True, default=())
    shape_b: tuple[int, ...] = eqx.field(static=True, default=())

    @property
    def member_slots(self) -> int:
        return SLOTS[self.kind]

    @property
    def slots(self) -> int:
        return self.member_slots * len(self.pair)

    def narrow_phase(self, pa, Ra, pb, Rb) -> Slots:
        """The slots (k, SLOTS[kind]) of the k members at the world poses (pa, Ra) of the
        A shapes and (pb, Rb) of the B shapes."""
        return jax.vmap(COLLIDE[self.kind])(pa, Ra, self.size_a, pb, Rb, self.size_b)


class ContactSlots(NamedTuple):
    """The state of every contact slot (time first where over a Solution: ``sol.contact``).

    ``gap`` (..., ns): signed distance less the pair's margin, negative when penetrating
    (the margin: the distance at which the surfaces start to push); ``active`` (..., ns):
    gap < 0 (the slot can push); ``normal_force`` (..., ns) >= 0; ``tangential_force``
    (..., ns, 3): the friction force on the pair's body_i (global); ``friction_torque``
    (..., ns, 3): the torsional and rolling friction torque on body_i (global; body_j
    feels the opposite, no force); ``point`` (..., ns, 3):
    contact point (global); ``normal`` (..., ns, 3): unit normal from body_j to body_i (the
    direction of the normal force on body_i); ``slip`` (..., ns, 3): velocity of body_i
    relative to body_j at the point, in the tangent plane. ``pair`` (ns,): the contact pair
    of each slot (model.contacts.pair_names)."""

    gap: jax.Array
    active: jax.Array
    normal_force: jax.Array
    tangential_force: jax.Array
    point: jax.Array
    normal: jax.Array
    slip: jax.Array
    friction_torque: jax.Array
    pair: tuple[int, ...]


class ContactForce(AbstractForce):
    """Compliant contact of all pairs of a model, each with its contact law (``laws``,
    ``pair_law``; :mod:`jaxmbd.contact.law`: Hunt–Crossley)."""

    pairs: tuple[tuple[int, int], ...] = eqx.field(static=True)
    pair_names: tuple[str, ...] = eqx.field(static=True)
    # per pair: the (k_i, k_j) shape pairs it checks, None for every colliding pair
    shapes: tuple[tuple[tuple[int, int], ...] | None, ...] = eqx.field(static=True)
    groups: tuple[CollisionGroup | HeightFieldGroup, ...]
    friction: jax.Array  # (n_pairs,)
    torsional_friction: jax.Array  # (n_pairs,) mu_t (m): torque mu_t F_n about the normal
    rolling_friction: jax.Array  # (n_pairs,) mu_r (m): torque mu_r F_n in the tangent plane
    margin: jax.Array  # (n_pairs,) distance (m) at which the surfaces start to push
    restitution: jax.Array  # (n_pairs,)
    stiffness: jax.Array  # (n_pairs,)
    damping: jax.Array  # (n_pairs,) Hunt–Crossley chi (s/m)
    exponent: jax.Array  # (n_pairs,)
    slip_velocity: jax.Array  # (n_pairs,)
    mass: jax.Array  # (nb,) set to model.mass by simulate
    laws: tuple[AbstractContactLaw, ...]  # the distinct laws
    pair_law: tuple[int, ...] = eqx.field(static=True)  # (n_pairs,) index into laws
    gravity: jax.Array | None = None  # (3,) set to model.gravity by simulate; None: none
    # the model without its forces, set by simulate: the effective masses of the slots;
    # None: the pairs' translational reduced masses
    mechanism: Model | None = None
    #: Model files store the pairs in their own list (``"contacts"``).
    file_section: ClassVar[str] = "contacts"

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @property
    def slot_pair(self) -> tuple[int, ...]:
        """The pair of every slot, in slot order (groups, members, slots of a member)."""
        return tuple(p for g in self.groups for p in g.pair for _ in range(g.member_slots))

    @property
    def n_slots(self) -> int:
        return sum(g.slots for g in self.groups)

    # -- geometry --------------------------------------------------------------------------
    def collide(self, state: BodyState) -> Slots:
        """Narrow phase of every slot (gap, point, normal from body_j to body_i), (ns, ...),
        the gap less the pair's ``margin`` (the surfaces push from that distance on, as
        MuJoCo's contacts from their includemargin; :mod:`jaxmbd.mjcf._contact`). The function
        other analyses can use (joint limits, sensors, hard contact)."""
        r, A, _, _ = _with_ground(state)
        gaps, points, normals = [], [], []
        for g in self.groups:  # one batched call per pair kind (a handful)
            a, b = np.asarray(g.body_a), np.asarray(g.body_b)
            pa = r[a] + mv(A[a], g.pos_a)
            pb = r[b] + mv(A[b], g.pos_b)
            Ra = mm(A[a], g.rot_a)
            Rb = mm(A[b], g.rot_b)
            slots = g.narrow_phase(pa, Ra, pb, Rb)
            sign = jnp.where(jnp.asarray(g.b_is_i), 1.0, -1.0)[:, None, None]
            gaps.append(slots.gap.reshape(-1))
            points.append(slots.point.reshape(-1, 3))
            normals.append((sign * slots.normal).reshape(-1, 3))
        margin = self.margin[np.asarray(self.slot_pair, dtype=int)]
        return Slots(
            jnp.concatenate(gaps) - margin, jnp.concatenate(points), jnp.concatenate(normals)
        )

    def _slot_bodies(self):
        """(body_i, body_j) of every slot as index arrays."""
        pairs = np.asarray(self.pairs, dtype=int).reshape(-1, 2)
        slot_pair = np.asarray(self.slot_pair, dtype=int)
        return pairs[slot_pair, 0], pairs[slot_pair, 1]

    def slot_shapes(self):
        """(shape_i, shape_j) of every slot as index arrays: the index of the slot's shape in
        body_i's (body_j's) shape list."""
        on_i, on_j = [], []
        for g in self.groups:
            n = g.member_slots
            a, b = np.asarray(g.shape_a, dtype=int), np.asarray(g.shape_b, dtype=int)
            if a.size != len(g.pair):  # built without shape indices
                raise ValueError("contact element: its collision groups carry no shape indices")
            flip = np.asarray(g.b_is_i, dtype=bool)
            on_i.append(np.repeat(np.where(flip, b, a), n))
            on_j.append(np.repeat(np.where(flip, a, b), n))
        return np.concatenate(on_i), np.concatenate(on_j)

    # -- the law ---------------------------------------------------------------------------
    def _relative_motion(self, state: BodyState):
        """(gap, point, normal, v_rel, w_rel) of every slot: v_rel the velocity of body_i
        relative to body_j at the point, w_rel their relative angular velocity (global)."""
        gap, point, normal = self.collide(state)
        r, A, rdot, omega = _with_ground(state)
        bi, bj = self._slot_bodies()
        w = mv(A, omega)  # global angular velocities

        def velocity(b):
            return rdot[b] + jnp.cross(w[b], point - r[b])

        return gap, point, normal, velocity(bi) - velocity(bj), w[bi] - w[bj]

    def impact_speeds(self, state: BodyState):
        """(gap, approach rate delta_dot, energy speed, rest speed) of every slot. The energy
        speed sqrt(delta_dot^2 + 2 E / m_eff) (E the law's elastic energy) is the approach
        speed that the slot's normal kinetic and elastic energy correspond to; the rest
        speed sqrt(2 g delta_s / (n + 1)) is the energy speed of the pair resting on the
        slot under gravity g (penetration delta_s = (m_eff g / K)^(1/n); 0 without)."""
        gap, point, normal, v_rel, _ = self._relative_motion(state)
        rate = -jnp.sum(normal * v_rel, axis=-1)
        bi, bj = self._slot_bodies()
        pair = self._with_gravity(self._slot_parameters(bi, bj), normal, state)
        energy = self._by_law(lambda law: law.elastic_energy(-gap, pair))
        g = jnp.maximum(pair.gravity, 0.0)
        n = pair.exponent
        # the pair resting on the slot: its translational reduced mass carries the load
        rest = (pair.m_eff * g / pair.stiffness) ** (1.0 / n) * 2.0 * g / (n + 1.0)
        m_eff = self.effective_mass(state, point, normal)
        return gap, rate, jnp.sqrt(rate**2 + 2.0 * energy / m_eff), jnp.sqrt(rest)

    def _with_gravity(self, pair: PairParameters, normal, state: BodyState) -> PairParameters:
        """``pair`` with each slot's penetration acceleration due to gravity (gravity
        accelerates the bodies, not the ground); as it is without ``gravity``."""
        if self.gravity is None:
            return pair
        nb = state[0].shape[0]  # r
        bi, bj = self._slot_bodies()
        free = jnp.asarray((bi < nb).astype(float) - (bj < nb).astype(float))
        return pair._replace(gravity=-(normal @ self.gravity) * free)

    def slots(self, state: BodyState) -> ContactSlots:
        """Gap, forces and kinematics of every slot at ``state`` (no time axis)."""
        gap, point, normal, v_rel, w_rel = self._relative_motion(state)
        bi, bj = self._slot_bodies()
        along = jnp.sum(normal * v_rel, axis=-1)
        slip = v_rel - along[:, None] * normal
        spin = jnp.sum(normal * w_rel, axis=-1)[:, None] * normal
        roll = w_rel - spin
        pair = self._with_gravity(self._slot_parameters(bi, bj), normal, state)
        pair = pair._replace(m_eff=self.effective_mass(state, point, normal))
        fn = self._by_law(lambda law: law.normal_force(-gap, -along, pair))
        ft, tf = self._by_law(lambda law: law.friction_wrench(slip, spin, roll, fn, pair))
        return ContactSlots(gap, gap < 0, fn, ft, point, normal, slip, tf, self.slot_pair)

    def _slot_parameters(self, bi, bj) -> PairParameters:
        """Each slot's pair numbers and the pair's reduced mass."""
        slot_pair = np.asarray(self.slot_pair, dtype=int)
        inv_mass = jnp.concatenate([1.0 / self.mass, jnp.zeros(1, self.mass.dtype)])
        m_eff = 1.0 / (inv_mass[bi] + inv_mass[bj])  # the pair's reduced mass
        return PairParameters(
            stiffness=self.stiffness[slot_pair],
            restitution=self.restitution[slot_pair],
            damping=self.damping[slot_pair],
            exponent=self.exponent[slot_pair],
            friction=self.friction[slot_pair],
            slip_velocity=self.slip_velocity[slot_pair],
            m_eff=m_eff,
            torsional_friction=self.torsional_friction[slot_pair],
            rolling_friction=self.rolling_friction[slot_pair],
        )

    def effective_mass(self, state: BodyState, point, normal) -> jax.Array:
        """The effective mass (ns,) of every slot along its normal at its point (module
        docstring): 1 / (n^T J M^-1 J^T n), M^-1 the bodies' inverse inertia projected onto
        the motions the mechanism's constraint rows G allow,

            M^-1 - M^-1 G^T (G M^-1 G^T)^-1 G M^-1,

        in the bodies' twists (r_dot, omega_bar). Redundant rows (a closed loop) are
        harmless: G M^-1 G^T is regularised by 1e-12 of its mean diagonal. Without
        ``mechanism``: the pairs' translational reduced masses."""
        bi, bj = self._slot_bodies()
        mech = self.mechanism
        if mech is None:
            return self._slot_parameters(bi, bj).m_eff
        r, A = state[0], state[1]
        nb = r.shape[0]
        r_all, A_all = with_ground(r, np.zeros(3)), with_ground(A, np.eye(3))
        inv_mass = jnp.concatenate([1.0 / mech.mass, jnp.zeros(1, r.dtype)])
        inv_inertia = jnp.concatenate([_inverse_3x3(mech.inertia), jnp.zeros((1, 3, 3))])

        def twist_direction(b, sign):
            # the slot's normal velocity n . (r_dot + A (omega_bar x rho_bar)) as a row
            # on body b's twist: (n, rho_bar x A^T n)
            At = jnp.swapaxes(A_all[b], -1, -2)
            rho, n_bar = mv(At, point - r_all[b]), mv(At, normal)
            return sign * jnp.concatenate([normal, jnp.cross(rho, n_bar)], -1)

        def inverse_inertia_times(b, u):
            return jnp.concatenate(
                [inv_mass[b][:, None] * u[:, :3], mv(inv_inertia[b], u[:, 3:])], -1
            )

        u_i, u_j = twist_direction(bi, 1.0), twist_direction(bj, -1.0)
        free = jnp.sum(u_i * inverse_inertia_times(bi, u_i), -1)
        free = free + jnp.sum(u_j * inverse_inertia_times(bj, u_j), -1)
        w = free
        if mech.nc > 0:
            _, jac_i, jac_j = rA_rows(mech, r, A, 0.0)
            G = rA_jacobian_from_rows(mech, jac_i, jac_j).reshape(mech.nc, nb, 6)
            GM = jnp.concatenate(  # G M^-1, the ground's (zero) column appended
                [
                    G[..., :3] * inv_mass[None, :nb, None],
                    jnp.einsum("cbk,bkl->cbl", G[..., 3:], inv_inertia[:nb]),
                ],
                -1,
            )
            GM_all = jnp.concatenate([GM, jnp.zeros((mech.nc, 1, 6), GM.dtype)], 1)
            S = row_products(GM.reshape(mech.nc, -1), G.reshape(mech.nc, -1))
            S = S + 1e-12 * jnp.trace(S) / mech.nc * jnp.eye(mech.nc)
            b = jnp.einsum("csk,sk->cs", GM_all[:, bi], u_i)
            b = b + jnp.einsum("csk,sk->cs", GM_all[:, bj], u_j)
            # elementwise (no LAPACK call inside the time loop: jaxmbd.compiled.xla_flags)
            w = w - jnp.sum(b * cholesky_solve(S, b), 0)
        # a slot whose normal the constraints hold still: a very large effective mass
        return 1.0 / jnp.maximum(w, 1e-12 * free)

    def _by_law(self, evaluate):
        """``evaluate(law)`` for every slot, each slot's value from its pair's law (one law:
        that law's values; several: each evaluated on every slot, picked by constant masks)."""
        if len(self.laws) == 1:
            return evaluate(self.laws[0])
        slot_law = np.asarray(self.pair_law, dtype=int)[np.asarray(self.slot_pair, dtype=int)]
        out = None
        for k, law in enumerate(self.laws):
            value = evaluate(law)

            def pick(new, old, k=k):
                mine = jnp.asarray(slot_law == k).reshape((-1,) + (1,) * (new.ndim - 1))
                return jnp.where(mine, new, old)

            out = value if out is None else jax.tree.map(pick, value, out)
        return out

    def __call__(self, t, state):
        nb = state.r.shape[0]
        if self.n_slots == 0:
            return jnp.zeros((nb, 3)), jnp.zeros((nb, 3))
        s = self.slots(state)
        r, A, _, _ = _with_ground(state)
        bi, bj = self._slot_bodies()
        force = s.normal_force[:, None] * s.normal + s.tangential_force  # on body_i
        # read by the sums per body and the moments' cross products: computed once
        force, torque = materialized((force, s.friction_torque))
        # summed per body by constant indices, not scattered (keeps a step hoistable,
        # jaxmbd.compiled.xla_flags); the ground's rows (index nb) are dropped
        bodies = np.concatenate([bi, bj])
        f = _sum_per_body(bodies, jnp.concatenate([force, -force]), nb)
        moment_i = jnp.cross(s.point - r[bi], force) + torque
        moment_j = jnp.cross(s.point - r[bj], -force) - torque
        n = _sum_per_body(bodies, jnp.concatenate([moment_i, moment_j]), nb)  # global
        return f, mv(jnp.swapaxes(A[:nb], -1, -2), n)  # body frame

    @property
    def law_of_pair(self) -> tuple[AbstractContactLaw, ...]:
        """The contact law of each pair."""
        return tuple(self.laws[k] for k in self.pair_law)

    def potential_energy(self, state: BodyState):
        """Elastic energy stored in the contacts (Hunt–Crossley: sum of K delta^(n+1) /
        (n + 1))."""
        if self.n_slots == 0:
            return jnp.zeros(())
        gap = self.collide(state).gap
        pair = self._slot_parameters(*self._slot_bodies())
        return jnp.sum(self._by_law(lambda law: law.elastic_energy(-gap, pair)))

    def with_mass(self, mass) -> ContactForce:
        return dataclasses.replace(self, mass=jnp.asarray(mass))


def _with_ground(state: BodyState):
    """(r, A, rdot, omega) with the ground appended as body nb (origin, identity, at rest)."""
    r, A, rdot, omega = state
    zero = jnp.zeros((1, 3), r.dtype)
    return (
        jnp.concatenate([r, zero]),
        jnp.concatenate([A, jnp.eye(3, dtype=A.dtype)[None]]),
        jnp.concatenate([rdot, zero]),
        jnp.concatenate([omega, zero]),
    )


# ----------------------------------------------------------------------------- models


def contact_element(model) -> ContactForce | None:
    """The model's contact element (``model.contacts``), or None."""
    return next((f for f in model.forces if isinstance(f, ContactForce)), None)


def with_contact(model, contact: str | None, *, where: str = "simulate", hard: bool = False):
    """``model`` as a run with ``contact`` sees it: "compliant" (the default): the contact
    element's masses set to ``model.mass``; "none": without the contact element (every pair
    ignored); "hard": the element kept for an integrator that treats its pairs as
    unilateral constraints (:mod:`jaxmbd.integrators.moreau_jean`), only where the caller
    has one (``hard=True``: :func:`~jaxmbd.simulate`), else refused."""
    if contact is None:
        contact = "compliant"
    if contact not in CONTACT_OPTIONS:
        raise ValueError(
            f"{where}: contact must be one of {list(CONTACT_OPTIONS)}, got {contact!r}"
        )
    if contact == "hard" and not hard:
        raise ValueError(
            f"{where}: contact='hard' (unilateral constraints with impacts) is an option of "
            "simulate only; use contact='compliant' (Hunt–Crossley contact with regularised "
            "Coulomb friction) or contact='none' here"
        )
    element = contact_element(model)
    if element is None:
        return model
    if contact == "none":
        forces = tuple(f for f in model.forces if f is not element)
    else:
        mechanism = dataclasses.replace(model, forces=())
        run = dataclasses.replace(
            element.with_mass(model.mass), gravity=model.gravity, mechanism=mechanism
        )
        forces = tuple(run if f is element else f for f in model.forces)
    return dataclasses.replace(model, forces=forces)


# ----------------------------------------------------------------------------- over time


def _leading(element: ContactForce) -> tuple[int, ...]:
    return element.friction.shape[:-1]


def slot_history(element: ContactForce, r, A, rdot, omega) -> ContactSlots:
    """:meth:`ContactForce.slots` at every step of a trajectory (..., T, nb, ...); leading
    batch axes of the element (a batch of models) and of the states are mapped together.
    One compiled program per element structure and trajectory shape."""
    return ContactSlots(*_slot_history(element, r, A, rdot, omega), element.slot_pair)


@jax.jit
def _slot_history(element: ContactForce, r, A, rdot, omega):

    def over_time(el, r_, A_, rd_, w_):
        return jax.vmap(lambda *x: el.slots(BodyState(*x))[:-1])(r_, A_, rd_, w_)

    fn = over_time
    extra = r.ndim - 3 - len(_leading(element))  # state batch axes beyond the element's
    for _ in range(extra):
        fn = jax.vmap(fn, in_axes=(None, 0, 0, 0, 0))
    for _ in _leading(element):  # outermost: a batch of models and their runs
        fn = jax.vmap(fn)
    return fn(element, r, A, rdot, omega)


def _inverse_3x3(I):
    """The inverses of the symmetric 3 x 3 matrices I (..., 3, 3) by their adjugates,
    elementwise (no LAPACK call inside the time loop)."""
    a, b, c = I[..., 0, 0], I[..., 0, 1], I[..., 0, 2]
    d, e, f = I[..., 1, 1], I[..., 1, 2], I[..., 2, 2]
    A, B, C = d * f - e * e, c * e - b * f, b * e - c * d
    D, E, F = a * f - c * c, b * c - a * e, a * d - b * b
    det = a * A + b * B + c * C
    adj = jnp.stack(
        [jnp.stack([A, B, C], -1), jnp.stack([B, D, E], -1), jnp.stack([C, E, F], -1)], -2
    )
    return adj / det[..., None, None]
