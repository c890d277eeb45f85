"""A model file's constraint model as MuJoCo runs it, on jaxmbd's kinematic tree.

:class:`MujocoConstraints` holds what ``mj_makeConstraint`` reads of an ``mjModel`` (the
candidate geom pairs with their mixed contact parameters, the limited joints, the dofs with
friction loss, ``opt``'s solver settings), read once when the file is loaded, and builds a
step's rows from the tree's poses: the geoms' world poses, MuJoCo's narrow phase
(:mod:`jaxmbd.contact.mujoco`), the contact points' Jacobians from the tree's motion
subspaces, and the rows and their parameters of :mod:`jaxmbd.soft_constraints.rows`. The rows
go to the convex solve of :mod:`jaxmbd.soft_constraints.solver` as a
:class:`~jaxmbd.soft_constraints.problem.SoftRows` (:func:`solver_rows`).

Every group has a fixed number of slots (a contact slot per pair and kernel slot, a row per
limited joint and side), so that shapes stay static under ``jit`` and ``vmap``; slots that
MuJoCo would not include this step are inactive rows, which exert nothing.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.flagged import any_flagged, kth_set, on_flagged
from ..compiled.small import mm, mv, row_vec_mat
from ..contact.height_field import (
    field_slots,
    prism_contact,
    prism_within,
    search_budget,
    window_prisms,
)
from ..contact.mujoco import hfield as mujoco_hfield
from ..contact.mujoco.common import Contacts, make_frame
from ..contact.mujoco.pairs import GEOM_NAMES, collide_pairs, kernel_for, program_key
from ..contact.narrow_phase import convex_shape_of
from ..geometry import SHAPE_BY_NAME
from ..tendons import Tendons, lengths_and_jacobians
from ..tree.kinematics import dof_ancestors
from .equalities import EqualityTerms, tree_equality_rows
from .parameters import SoftOptions
from .problem import ELLIPTIC, EQUALITY, FRICTION_LOSS, ONE_SIDED, SoftRows, no_cones
from .rows import (
    ConstraintRows,
    DofFrictionSpec,
    JointLimitSpec,
    TendonFrictionSpec,
    TendonLimitSpec,
    concatenate,
    contact_rows,
    dof_friction_rows,
    joint_limit_rows,
    tendon_friction_rows,
    tendon_limit_rows,
)

#: ``mjtSolver``: the methods :func:`~jaxmbd.soft_constraints.solver.solve` offers
SOLVER_METHODS = {1: "cg", 2: "newton"}


class SolverSettings(eqx.Module):
    """``opt.solver``, ``iterations``, ``tolerance``, ``ls_iterations``, ``ls_tolerance``,
    and whether the solve starts warm (the ``warmstart`` flag of ``opt.disableflags``)."""

    method: str = eqx.field(static=True, default="newton")
    iterations: int = eqx.field(static=True, default=100)
    tolerance: float = eqx.field(static=True, default=1e-8)
    ls_iterations: int = eqx.field(static=True, default=50)
    ls_tolerance: float = eqx.field(static=True, default=0.01)
    warmstart: bool = eqx.field(static=True, default=True)


class ContactGroup(eqx.Module):
    """The candidate geom pairs of one geom-type pair and ``condim``: k pairs, each with the
    kernel's slots. Geom 1 (the lower MuJoCo type) sits on tree body ``body1`` (-1: the
    world) at the local pose (``pos1``, ``mat1``) in that body's frame (the world frame for
    -1), with MuJoCo's ``geom_size`` ``size1``; likewise geom 2. ``margin``: the collision
    functions' margin (margin plus gap); ``includemargin``: the distance below which a
    contact is a constraint; ``friction`` (k, 5), ``solref``, ``solreffriction`` (k, 2),
    ``solimp`` (k, 5): ``mj_contactParam``'s mix; ``invweight`` (k, 2): the two bodies'
    ``body_invweight0`` summed (translational, rotational); ``geoms`` (k, 2) MuJoCo's geom
    ids (for reports). A height field's group (geom 1 the field of MuJoCo id ``field``,
    ``window`` its cells under each geom, one window for all the field's groups) carries the
    field's ``heights`` (nrow, ncol) and ``field_size`` (half extents x and y, base depth):
    MuJoCo's prisms, one contact slot each (:mod:`jaxmbd.contact.height_field`);
    ``native_ccd``: the prisms collide by MuJoCo's native GJK and EPA at the file's (default)
    ccd options, as ``mjc_ConvexHField`` does (:mod:`jaxmbd.contact.mujoco.hfield`), where
    False by jaxmbd's support-function collider, to convergence (a file that sets other
    ccd options)."""

    type1: int = eqx.field(static=True)
    type2: int = eqx.field(static=True)
    condim: int = eqx.field(static=True)
    body1: tuple[int, ...] = eqx.field(static=True)
    body2: tuple[int, ...] = eqx.field(static=True)
    geoms: tuple[tuple[int, int], ...] = eqx.field(static=True)
    pos1: jax.Array
    mat1: jax.Array
    size1: jax.Array
    pos2: jax.Array
    mat2: jax.Array
    size2: jax.Array
    margin: jax.Array
    includemargin: jax.Array
    friction: jax.Array
    solref: jax.Array
    solreffriction: jax.Array
    solimp: jax.Array
    invweight: jax.Array
    window: tuple[int, ...] = eqx.field(static=True, default=())
    field: int = eqx.field(static=True, default=-1)
    heights: jax.Array | None = None
    field_size: jax.Array | None = None
    native_ccd: bool = eqx.field(static=True, default=False)

    @property
    def slots(self) -> int:
        if self.window:  # a height field: two prisms a cell of the window
            return 2 * self.window[0] * self.window[1]
        return kernel_for(self.type1, self.type2)[1]

    def world_poses(self, x, R):
        """World (pos, mat) of both geoms of every pair, from the tree bodies' frames."""

        def place(body, pos, mat):
            b = np.asarray(body)
            fixed = jnp.asarray(b < 0)
            xb, Rb = x[np.maximum(b, 0)], R[np.maximum(b, 0)]
            p = jnp.where(fixed[:, None], pos, xb + mv(Rb, pos))
            m = jnp.where(fixed[:, None, None], mat, mm(Rb, mat))
            return p, m

        return place(self.body1, self.pos1, self.mat1), place(self.body2, self.pos2, self.mat2)


def _stacked_poses(groups, x, R):
    """((pos1, mat1), (pos2, mat2)): :meth:`ContactGroup.world_poses` of ``groups``, their
    pairs stacked."""
    poses = [g.world_poses(x, R) for g in groups]
    return tuple(
        tuple(jnp.concatenate([pose[side][k] for pose in poses]) for k in (0, 1)) for side in (0, 1)
    )


def _field_kinds(groups) -> tuple[tuple[str, ...], np.ndarray]:
    """(the shape kinds of a height field's partner geoms, in order of first appearance;
    each member's index among them (k,))."""
    kinds = tuple(dict.fromkeys(SHAPE_BY_NAME[GEOM_NAMES[g.type2]] for g in groups))
    return kinds, np.concatenate(
        [np.full(len(g.body1), kinds.index(SHAPE_BY_NAME[GEOM_NAMES[g.type2]])) for g in groups]
    )


def _member_prisms(groups, x, R):
    """(shape(m): member m's geom in the field's frame, :func:`~jaxmbd.contact.height_field.
    window_prisms` of every member (k, P, ...)) for height field groups of one field."""
    first = groups[0]
    kinds, which = _field_kinds(groups)
    which = jnp.asarray(which)
    (pa, Ra), (pb, Rb) = _stacked_poses(groups, x, R)
    size2 = jnp.concatenate([g.size2 for g in groups])
    margin = jnp.concatenate([g.margin for g in groups])

    def shape(m):
        local_pos, local_mat = row_vec_mat(pb[m] - pa[m], Ra[m]), Ra[m].T @ Rb[m]
        return convex_shape_of(kinds, which[m], local_pos, local_mat, size2[m])

    def prisms(m):
        return window_prisms(shape(m), first.window, first.heights, first.field_size,
                             margin=margin[m])  # fmt: skip

    return shape, jax.vmap(prisms)(jnp.arange(pa.shape[0]))


def _mujoco_prisms(groups) -> bool:
    """Whether a field's prisms collide by MuJoCo's native CCD (:mod:`jaxmbd.contact.
    mujoco.hfield`): the file's ccd options are the defaults and the partners smooth."""
    return all(g.native_ccd and g.type2 in mujoco_hfield.SMOOTH_TYPES for g in groups)


def _prism_collider(groups, x, R):
    """``contact(rows4, m)``: (found, dist, point, normal) in the world's frame of one prism
    (a :func:`~jaxmbd.contact.height_field.window_prisms` hull row block: its centre, the
    top triangle, the base) against member m's geom, by MuJoCo's ``mjc_ConvexHField``
    (:mod:`jaxmbd.contact.mujoco.hfield`)."""
    (pa, Ra), (pb, Rb) = _stacked_poses(groups, x, R)
    types = np.concatenate([np.full(len(g.body1), g.type2) for g in groups])
    kinds = tuple(sorted({int(t) for t in types}))
    types = jnp.asarray(types)
    size2 = jnp.concatenate([g.size2 for g in groups])
    margin = jnp.concatenate([g.margin for g in groups])

    def contact(rows4, m):
        top, bottom = rows4[1:4, :3], rows4[4:7, :3]
        pos, mat = mujoco_hfield.local_pose(pa[m], Ra[m], pb[m], Rb[m])
        found, dist, point, normal = mujoco_hfield.prism_contact(
            bottom, top, types[m], pos, mat, size2[m], margin[m], kinds=kinds
        )
        point, normal = mujoco_hfield.to_world(pa[m], Ra[m], point, normal)
        return found, dist, point, normal

    return contact


def field_contacts(groups, x, R, *, block: int | None = None) -> Contacts:
    """The contacts (k, slots) of height field groups of one field and window, their pairs
    stacked (k in all): each prism of the window under each geom against it, as
    ``mjc_ConvexHField`` finds them (the signed distance, the point midway, the normal from
    the field to the geom; the frame as ``mju_makeFrame`` makes it from the normal alone), a
    slot valid where MuJoCo's collider returns a contact (:func:`_mujoco_prisms`: its native
    CCD's negative distance) or, with jaxmbd's converged collider, where the distance is
    below the margin. Partners of several geom types are
    collided in one program (their types become data).

    ``block``: the live prisms of every member (:func:`~jaxmbd.contact.height_field.
    window_prisms`: in MuJoCo's range, reaching the geom) are gathered and searched this
    many at a time (:func:`~jaxmbd.compiled.flagged.on_flagged`), each prism the geom
    penetrates giving its contact, as MuJoCo's. None: every prism of every window (no loop:
    what derivatives go through), the penetration search for the :data:`~jaxmbd.contact.
    height_field.DEEP_PRISMS` nearest of each window only (EPA's buffers for every prism of
    every window would take 1.7 MB each): a geom sunk past its core into more prisms than
    those has contacts that the derivatives do not see."""
    first = groups[0]
    kinds, which = _field_kinds(groups)
    (pa, Ra), (pb, Rb) = _stacked_poses(groups, x, R)
    size2 = jnp.concatenate([g.size2 for g in groups])
    margin = jnp.concatenate([g.margin for g in groups])
    if block is None:

        def one(pa, Ra, pb, Rb, sb, margin, which):
            return field_slots(kinds, first.window, first.heights, first.field_size, pa, Ra,
                               pb, Rb, sb, margin=margin, which=which)  # fmt: skip

        slots = jax.vmap(one)(pa, Ra, pb, Rb, size2, margin, jnp.asarray(which))
        gap, point, normal = slots.gap, slots.point, slots.normal
        valid = gap < margin[:, None]
    else:
        shape, (rows4, live, idle) = _member_prisms(groups, x, R)
        k, per = live.shape
        up = jnp.zeros((k * per, 3), pa.dtype).at[:, 2].set(1.0)
        items = (rows4.reshape(k * per, *rows4.shape[2:]), jnp.repeat(jnp.arange(k), per))
        if _mujoco_prisms(groups):
            fill = (jnp.zeros(k * per, bool), idle.reshape(-1),
                    jnp.zeros((k * per, 3), pa.dtype), up)  # fmt: skip
            outs = on_flagged(_prism_collider(groups, x, R), live.reshape(-1), items,
                              block=block, fill=fill)  # fmt: skip
            # a prism without contact keeps the fill (MuJoCo's witnesses there can be far)
            outs = tuple(jnp.where(outs[0].reshape((-1,) + (1,) * (out.ndim - 1)), out, f)
                         for out, f in zip(outs, fill, strict=True))  # fmt: skip
            found, gap, point, normal = (out.reshape(k, per, *out.shape[1:]) for out in outs)
            valid = live & found
        else:
            _, iterations = search_budget(kinds)

            def one(rows4, m):
                return prism_contact(rows4, shape(m), epa_iterations=iterations)

            fill = (idle.reshape(-1), jnp.zeros((k * per, 3), pa.dtype), up)
            gap, point, normal = (
                x.reshape(k, per, *x.shape[1:])
                for x in on_flagged(one, live.reshape(-1), items, block=block, fill=fill)
            )
            point = pa[:, None] + jnp.einsum("kij,kpj->kpi", Ra, point)
            normal = jnp.einsum("kij,kpj->kpi", Ra, normal)
            valid = live & (gap < margin[:, None])
    frame = jax.vmap(jax.vmap(make_frame, in_axes=(0, None)), in_axes=(0, None))(
        normal, jnp.zeros(3, normal.dtype)
    )
    return Contacts(dist=gap, pos=point, frame=frame, valid=valid)


def moved_by(ancestors) -> np.ndarray:
    """(nb + 1, nv): row b says which dofs move tree body b; the last row (body -1, the
    world) none."""
    return np.concatenate([ancestors, np.zeros((1, ancestors.shape[1]))])


def point_jacobians(S, moves, points):
    """(c, 6, nv): the translational then rotational Jacobians of points (c, 3) fixed on tree
    bodies: column d is (S_lin + S_ang x p, S_ang) of dof d where d moves the point's body
    (``moves`` (c, nv): the bodies' rows of :func:`moved_by`, zero for the world),
    Featherstone's S_i in world coordinates (the linear part is the velocity of the body
    point at the world's origin, eq. 2.23)."""
    ang, lin = S[:, :3], S[:, 3:]  # (nv, 3)
    trans = lin[None] + jnp.cross(ang[None], points[:, None, :])  # (c, nv, 3)
    rot = jnp.broadcast_to(ang[None], trans.shape)
    J = jnp.concatenate([trans, rot], axis=-1) * jnp.asarray(moves)[..., None]  # (c, nv, 6)
    return jnp.swapaxes(J, 1, 2)


#: A step's candidates for the costly colliders, gathered where they may touch and searched
#: this many at a time (:func:`collide_groups`): pairs of MuJoCo's convex collider, and
#: height-field prisms.
CONVEX_PAIR_BLOCK = 4
FIELD_PRISM_BLOCK = 8


def collide_groups(groups, x, R, *, gather: bool = True) -> list[Contacts]:
    """Each contact group's contacts (k, slots) at the bodies' frames (x, R). Groups whose
    pairs share a collision program (:func:`~jaxmbd.contact.mujoco.pairs.program_key`: the
    same geom types under several ``condim``, every convex pair; every partner of one height
    field) are collided in one call, so that a model traces each kernel once. ``gather``:
    the convex collider's pairs and the height fields' prisms run where their bounds say
    they may touch, gathered :data:`CONVEX_PAIR_BLOCK` and :data:`FIELD_PRISM_BLOCK` at a
    time in loops; False: on every candidate (no loop: what derivatives go through). The
    contacts are the same either way."""
    by_key: dict = {}
    found: list = [None] * len(groups)
    for i, group in enumerate(groups):
        key = ("field", group.field) if group.window else program_key(group.type1, group.type2)
        by_key.setdefault(key, []).append(i)
    for members in by_key.values():
        parts = [groups[i] for i in members]
        if parts[0].window:  # a height field's prisms (one window for the field)
            together = field_contacts(parts, x, R, block=FIELD_PRISM_BLOCK if gather else None)
            offsets = np.cumsum([0] + [len(g.body1) for g in parts])
            for i, start, stop in zip(members, offsets[:-1], offsets[1:], strict=True):
                found[i] = jax.tree.map(lambda a, o=start, e=stop: a[o:e], together)
            continue
        types1 = np.concatenate([np.full(len(g.body1), g.type1) for g in parts])
        types2 = np.concatenate([np.full(len(g.body1), g.type2) for g in parts])
        (p1, m1), (p2, m2) = _stacked_poses(parts, x, R)
        together = collide_pairs(
            types1, types2, p1, m1, jnp.concatenate([g.size1 for g in parts]), p2, m2,
            jnp.concatenate([g.size2 for g in parts]), jnp.concatenate([g.margin for g in parts]),
            block=CONVEX_PAIR_BLOCK if gather else None,
        )  # fmt: skip
        offset = 0
        for i, group in zip(members, parts, strict=True):
            k, slots = len(group.body1), group.slots
            found[i] = jax.tree.map(lambda a, o=offset, k=k, s=slots: a[o : o + k, :s], together)
            offset += k
    return found


def any_contact(groups, x, R) -> jax.Array:
    """Whether :func:`collide_groups` finds a contact: MuJoCo's ``ncon > 0``. A height
    field's live prisms are tested :data:`FIELD_PRISM_BLOCK` at a time until one touches
    (:func:`~jaxmbd.compiled.flagged.any_flagged`), by the collider :func:`field_contacts`
    takes (MuJoCo's native CCD), or, at other ccd options, by GJK alone
    (:func:`~jaxmbd.contact.height_field.prism_within`): a geom sunk into many prisms costs
    one block, where its contacts would cost a search on every one."""
    fields: dict = {}
    others = []
    for group in groups:
        if group.window:
            fields.setdefault(group.field, []).append(group)
        else:
            others.append(group)
    found = jnp.zeros((), bool)
    for contacts in collide_groups(others, x, R):
        found = found | jnp.any(contacts.valid)
    for parts in fields.values():
        shape, (rows4, live, _) = _member_prisms(parts, x, R)
        k, per = live.shape
        margin = jnp.concatenate([g.margin for g in parts])

        if _mujoco_prisms(parts):
            collider = _prism_collider(parts, x, R)

            def touches(rows4, m, collider=collider):
                return collider(rows4, m)[0]
        else:

            def touches(rows4, m, margin=margin, shape=shape):
                return prism_within(rows4, shape(m), margin[m])

        items = (rows4.reshape(k * per, *rows4.shape[2:]), jnp.repeat(jnp.arange(k), per))
        found = found | any_flagged(touches, live.reshape(-1), items, block=FIELD_PRISM_BLOCK)
    return found


def condim_sets(groups) -> list[list[int]]:
    """The contact groups' indices by ``condim``, in the order of their rows: one set of
    rows per condim (in the order the condims first appear), each group's slots in the
    order of the groups (:func:`contact_set_rows`)."""
    sets: dict[int, list[int]] = {}
    for i, group in enumerate(groups):
        sets.setdefault(group.condim, []).append(i)
    return list(sets.values())


#: Contacts of one condim whose rows a step builds at a time: the slots with a contact
#: inside the margin are gathered, in order, this many at a time (one pass where a step has
#: at most this many, as robots mostly do: dm_control's humanoid has 106 slots and ~10
#: contacts lying on the floor), and their rows placed back in their slots.
CONTACT_CAPACITY = 16


def contact_set_rows(parts, S, ancestors, qvel, options, *, capacity=...):
    """The rows of contact groups of one ``condim`` as one set (one program for them):
    ``parts`` a list of (group, its contacts :func:`collide_groups` found), each group's
    slots in turn, and the bodies' motion subspaces S. ``capacity``: the rows' kernels run
    on the set's contacts gathered this many at a time (a loop of as many passes as the
    step needs) and the rows are placed back in their slots; None: on every slot at once
    (no loop: what derivatives go through); not given: :data:`CONTACT_CAPACITY`, read at
    the call. The rows are the same either way (each row's kernels read its own contact)."""
    condim = parts[0][0].condim
    capacity = CONTACT_CAPACITY if capacity is ... else capacity

    def flat(field):
        return jnp.concatenate([jnp.reshape(getattr(found, field),
                                   (len(g.body1) * g.slots, *getattr(found, field).shape[2:]))
                       for g, found in parts])  # fmt: skip

    def per_slot(field):
        return jnp.concatenate([jnp.repeat(jnp.asarray(getattr(g, field)), g.slots, axis=0)
                       for g, _ in parts])  # fmt: skip

    body1 = np.concatenate([np.repeat(np.asarray(g.body1), g.slots) for g, _ in parts])
    body2 = np.concatenate([np.repeat(np.asarray(g.body2), g.slots) for g, _ in parts])
    slots = {"pos": flat("pos"), "frame": flat("frame"), "dist": flat("dist"),
             "found": flat("valid")}  # fmt: skip
    for field in ("includemargin", "friction", "solref", "solreffriction", "solimp",
                  "invweight"):  # fmt: skip
        slots[field] = per_slot(field)
    table = moved_by(ancestors)
    moves = {1: table[body1], 2: table[body2]}

    def built(slots, moves, contact_id=None):
        pos = slots["pos"]
        jac_dif = point_jacobians(S, moves[2], pos) - point_jacobians(S, moves[1], pos)
        fields = {k: v for k, v in slots.items() if k != "pos"}
        return contact_rows(jac_dif, qvel, condim=condim, contact_id=contact_id, **fields,
                            options=options)  # fmt: skip

    c = body1.size
    if capacity is None or c <= capacity:
        return built(slots, moves)
    active = slots["found"] & (slots["dist"] < slots["includemargin"])
    count = jnp.cumsum(active.astype(jnp.int32))
    passes = -(-c // capacity)
    moves = {k: jnp.asarray(v) for k, v in moves.items()}

    def gathered(k):
        # contacts k * capacity + 1 ... (k + 1) * capacity: for each, the first slot whose
        # running count of contacts reaches it (a gather, no scatter)
        wanted = k * capacity + jnp.arange(1, capacity + 1, dtype=jnp.int32)
        index = kth_set(count, wanted)
        few = {name: v[index] for name, v in slots.items()}
        few["found"] = few["found"] & (wanted <= count[-1])
        return built(few, {side: v[index] for side, v in moves.items()}, index)

    shapes = jax.eval_shape(gathered, jnp.int32(0))
    per = shapes.size // capacity
    # the passes' rows one after the other, pass k's from row k * capacity * per; rows of no
    # pass stay zero (inactive)
    store = jax.tree.map(lambda x: jnp.zeros((passes * x.shape[0], *x.shape[1:]), x.dtype),
                         shapes)  # fmt: skip

    def one_more(carry):
        k, store = carry
        rows = gathered(k)
        start = k * capacity * per
        return k + 1, jax.tree.map(
            lambda s, x: jax.lax.dynamic_update_slice_in_dim(s, x, start, 0), store, rows
        )

    needed = (count[-1] + capacity - 1) // capacity
    _, store = jax.lax.while_loop(lambda kc: kc[0] < needed, one_more, (jnp.int32(0), store))
    # back to the slots: slot s holds its contact's rows, others none
    place = jnp.maximum(count - 1, 0)[:, None] * per + jnp.arange(per)
    on = jnp.repeat(active, per)
    rows = jax.tree.map(lambda x: x[place.reshape(-1)], store)
    ids = jnp.repeat(jnp.arange(c, dtype=jnp.int32), per)
    return dataclasses.replace(
        rows,
        J=jnp.where(on[:, None], rows.J, 0.0),
        active=on,
        id=ids,
        **{k: jnp.where(on, getattr(rows, k), 0.0) for k in ("vel", "aref")
           if getattr(rows, k) is not None},
    )  # fmt: skip


class TendonGeometry(eqx.Module):
    """The tendons that rows read (limited or with friction loss), as jaxmbd's
    :class:`~jaxmbd.tendons.Tendons` on the tree, and their MuJoCo ids ``ids`` (static) of
    ``ntendon`` (MuJoCo's count)."""

    tendons: Tendons
    ids: tuple[int, ...] = eqx.field(static=True)
    ntendon: int = eqx.field(static=True)

    def lengths_and_jacobians(self, tree, p, qpos):
        """MuJoCo's ``ten_length`` (ntendon,) and dense ``ten_J`` (ntendon, nv) (``mj_tendon``)
        on the tree at ``qpos`` (poses ``p``), zero for the tendons no row reads: the lengths
        of :func:`jaxmbd.tendons.lengths_and_jacobians` and their Jacobians in qvel
        coordinates."""
        length, J = lengths_and_jacobians(self.tendons, tree, qpos, p)
        ids = np.asarray(self.ids, int)
        full_length = jnp.zeros(self.ntendon, length.dtype).at[ids].set(length)
        full_J = jnp.zeros((self.ntendon, tree.nv), J.dtype).at[ids].set(J)
        return full_length, full_J


class MujocoConstraints(eqx.Module):
    """A file's constraint rows, as MuJoCo builds them each step (module docstring):
    ``contacts`` (one :class:`ContactGroup` per geom-type pair and condim), ``joint_limits``,
    ``dof_friction``, ``tendon_limits`` and ``tendon_friction`` (None: none, or switched to
    another treatment; the tendons' rows read ``tendons``), the rows' ``options``
    (``timestep`` is replaced by the run's step) and the ``solver`` settings. ``treats``: the
    parts a run solves as MuJoCo does, of "contact" (the geom pairs) and "limits" (joint and
    tendon limits, dof and tendon friction loss); the others are left to the run's own
    treatment (:func:`jaxmbd.soft_constraints.treatments.with_soft`). A run's soft equality
    constraints join the rows where it passes them (:meth:`rows`)."""

    options: SoftOptions
    solver: SolverSettings
    contacts: tuple[ContactGroup, ...] = ()
    joint_limits: JointLimitSpec | None = None
    dof_friction: DofFrictionSpec | None = None
    tendon_limits: TendonLimitSpec | None = None
    tendon_friction: TendonFrictionSpec | None = None
    tendons: TendonGeometry | None = None
    treats: frozenset[str] = eqx.field(static=True, default=frozenset())
    #: the file's ``opt.integrator`` as a joint-space stepper's name (a run's default)
    integrator: str = eqx.field(static=True, default="euler")
    #: how a run in joint coordinates treats the parts it carries (contact pairs, limits and
    #: friction loss, equality constraints) where its options name none: MuJoCo's constraint
    #: model, as the file asks (:func:`jaxmbd.soft_constraints.treatments.model_defaults`)
    default_treatment: ClassVar[str] = "soft"

    @property
    def timestep(self) -> float:
        """The file's ``opt.timestep``: a run's step where it names none."""
        return float(self.options.timestep)

    @property
    def has_limit_rows(self) -> bool:
        """Whether the file has limit or friction-loss rows (joints', dofs', tendons')."""
        specs = (self.joint_limits, self.dof_friction, self.tendon_limits, self.tendon_friction)
        return any(spec is not None for spec in specs)

    @property
    def searches_contacts(self) -> bool:
        """Whether a run's collisions take iterative searches: MuJoCo's convex collider
        (GJK, EPA and the multi-contact search) or a height field's prisms."""
        return "contact" in self.treats and any(
            g.window or program_key(g.type1, g.type2) == "convex" for g in self.contacts
        )

    @property
    def active(self) -> bool:
        """Whether a run solves any rows of this model."""
        return bool(self.treats) and (
            ("contact" in self.treats and bool(self.contacts))
            or ("limits" in self.treats and self.has_limit_rows)
        )

    def rows(self, tree, p, qpos, qvel, h, *, equality: EqualityTerms | None = None,
             contact_capacity=...) -> tuple[ConstraintRows, SoftRows] | None:  # fmt: skip
        """The step's rows at the tree's state (``tree`` at ``qpos`` with poses ``p``), and the
        solver's view of them (None: no rows); ``h`` the run's step (``refsafe``).
        ``equality``: the run's soft equality constraints at this state, which come first
        (:func:`~jaxmbd.soft_constraints.equalities.tree_equality_rows`).
        ``contact_capacity``: :func:`contact_set_rows`'s ``capacity``. MuJoCo's order
        (``mj_makeConstraint``): equality, dof friction, tendon friction, joint limits,
        tendon limits, contacts."""
        options = eqx.tree_at(lambda o: o.timestep, self.options, h)
        groups, kinds = [], []
        cones = []  # (rows of each cone (c, 6), cone_mu (c,), friction (c, 5))
        limits = "limits" in self.treats
        if equality is not None and equality.phi.shape[0]:
            groups.append(tree_equality_rows(equality, qvel, options=options))
            kinds.append(EQUALITY)
        ten_length = ten_J = None
        if limits and self.tendons is not None:
            ten_length, ten_J = self.tendons.lengths_and_jacobians(tree, p, qpos)
        if self.dof_friction is not None and limits:
            groups.append(dof_friction_rows(self.dof_friction, qvel, options=options))
            kinds.append(FRICTION_LOSS)
        if self.tendon_friction is not None and ten_J is not None:
            groups.append(tendon_friction_rows(self.tendon_friction, ten_J, qvel, options=options))
            kinds.append(FRICTION_LOSS)
        if self.joint_limits is not None and limits:
            groups.append(joint_limit_rows(self.joint_limits, qpos, qvel, options=options))
            kinds.append(ONE_SIDED)
        if self.tendon_limits is not None and ten_J is not None:
            groups.append(
                tendon_limit_rows(self.tendon_limits, ten_length, ten_J, qvel, options=options)
            )
            kinds.append(ONE_SIDED)
        S, ancestors = p.S, dof_ancestors(tree)
        contacts = self.contacts if "contact" in self.treats else ()
        found = collide_groups(contacts, p.x, p.R, gather=contact_capacity is not None)
        for members in condim_sets(contacts):
            parts = [(contacts[i], found[i]) for i in members]
            offset = sum(g.size for g in groups)
            rows = contact_set_rows(parts, S, ancestors, qvel, options,
                                    capacity=contact_capacity)  # fmt: skip
            dim = parts[0][0].condim
            if options.elliptic and dim > 1:
                c = rows.size // dim
                index = offset + np.arange(c)[:, None] * dim + np.arange(6)[None]
                index = np.where(np.arange(6)[None] < dim, index, -1)
                friction = jnp.concatenate(
                    [jnp.repeat(g.friction, g.slots, axis=0) for g, _ in parts]
                )
                cones.append((index, rows.mu[::dim], friction))
                kinds.append(ELLIPTIC)
            else:
                kinds.append(ONE_SIDED)
            groups.append(rows)
        if not any(g.size for g in groups):
            return None
        kind = np.concatenate([np.full(g.size, k) for g, k in zip(groups, kinds, strict=True)])
        rows = concatenate(*groups)
        if cones:
            cone_rows = np.concatenate([c[0] for c in cones]).astype(np.int32)
            cone_fields = dict(
                cone_rows=jnp.asarray(cone_rows),
                cone_mu=jnp.concatenate([c[1] for c in cones]),
                cone_friction=jnp.concatenate([c[2] for c in cones]),
            )
        else:
            cone_fields = no_cones()
        present = tuple(sorted({k for g, k in zip(groups, kinds, strict=True) if g.size}))
        soft = SoftRows(
            J=rows.J, aref=rows.aref, R=rows.R, floss=rows.frictionloss, active=rows.active,
            kind=jnp.asarray(kind, jnp.int32), kinds=present, **cone_fields,
        )  # fmt: skip
        return rows, soft


__all__ = [
    "SOLVER_METHODS",
    "ContactGroup",
    "MujocoConstraints",
    "SolverSettings",
    "TendonGeometry",
    "collide_groups",
    "condim_sets",
    "contact_set_rows",
    "point_jacobians",
]
