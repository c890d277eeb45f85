"""The contacts of MuJoCo's constraint model and their solved forces, as MuJoCo's
acceleration-stage sensors read them (``mj_contactForce``, ``engine_sensor.c``): the contact
slots of a model's geom pairs collided at a pose, with the forces of their rows decoded
into contact-frame forces."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..tree import KinematicTree, poses
from .model import collide_groups, condim_sets
from .rows import contact_row_count


class ConstraintForces(eqx.Module):
    """MuJoCo's contacts and their forces as its acceleration-stage sensors read them
    (``touch``, ``accelerometer``, ``force``, ``torque``: ``engine_sensor.c``): those of one
    solve, at the state it was solved at (``mj_step`` computes the sensors before it
    integrates).
    ``pos`` (c, 3), ``normal`` (c, 3) (``mjContact.frame``'s first row, from geom 1 to
    geom 2), ``body1``/``body2`` (c,) the tree bodies of the two geoms (-1: the world),
    ``geoms`` (c,) MuJoCo's (geom 1, geom 2) of each slot, ``normal_force`` (c,):
    ``mj_contactForce``'s normal component (a pyramid's edges summed,
    ``mju_decodePyramid``; 0 where the slot holds no contact in the problem), ``force`` and
    ``torque`` (c, 3): the whole contact force and torque in world axes, on geom 2 (its
    negative on geom 1; the torque's rows are zero below condim 4), ``qpos``, ``qvel``,
    ``qacc``: the state they were found at and its solved acceleration (``mj_forward``'s
    ``qacc``), one entry per contact slot of the file's pairs. A run's record has the rows'
    axis first on every array."""

    pos: jax.Array
    normal: jax.Array
    normal_force: jax.Array
    qpos: jax.Array
    force: jax.Array | None = None
    torque: jax.Array | None = None
    qvel: jax.Array | None = None
    qacc: jax.Array | None = None
    body1: tuple[int, ...] = eqx.field(static=True, default=())
    body2: tuple[int, ...] = eqx.field(static=True, default=())
    geoms: tuple[tuple[int, int], ...] = eqx.field(static=True, default=())


def contact_frame_force(edges, friction, condim: int, elliptic: bool):
    """(c, 6) the contact-frame force of each slot from its rows' forces ``edges`` (c, per):
    ``mj_contactForce`` (elliptic: the rows are the components; pyramidal:
    ``mju_decodePyramid``, the normal the edges' sum, tangent i mu_i (f_2i - f_2i+1))."""
    c = edges.shape[0]
    out = jnp.zeros((c, 6), edges.dtype)
    if condim == 1 or elliptic:
        return out.at[:, : edges.shape[1]].set(edges)
    out = out.at[:, 0].set(jnp.sum(edges, axis=1))
    tangent = (edges[:, 0::2] - edges[:, 1::2]) * friction[:, : condim - 1]
    return out.at[:, 1:condim].set(tangent)


def slot_labels(groups):
    """(group indices in the rows' order, body1, body2, geoms per contact slot): the static
    part of :class:`ConstraintForces`, one entry per slot of each group."""
    order = [i for members in condim_sets(groups) for i in members]
    body1, body2, geoms = [], [], []
    for i in order:
        group = groups[i]
        body1 += [int(b) for b in np.repeat(group.body1, group.slots)]
        body2 += [int(b) for b in np.repeat(group.body2, group.slots)]
        geoms += [(int(a), int(b)) for a, b in group.geoms for _ in range(group.slots)]
    return order, tuple(body1), tuple(body2), tuple(geoms)


def solved_contact_forces(constraints, x, R, force, qpos, qvel=None, qacc=None):
    """:class:`ConstraintForces` of ``constraints`` (a model's
    :class:`~jaxmbd.soft_constraints.model.ConstraintModel`) at the bodies' frames (``x``,
    ``R``) from the solve's row forces ``force`` (``efc_force``; the contact rows come last,
    ``mj_makeConstraint``'s order)."""
    groups = constraints.contacts
    founds = collide_groups(groups, x, R)
    order, body1, body2, geoms = slot_labels(groups)
    per_group = []
    for i in order:  # the rows' order
        group, found = groups[i], founds[i]
        k, slots = len(group.body1), group.slots
        per = contact_row_count(group.condim, elliptic=constraints.options.elliptic)
        pos = jnp.reshape(found.pos, (k * slots, 3))
        frame = jnp.reshape(found.frame, (k * slots, 3, 3))
        dist = jnp.reshape(found.dist, (k * slots,))
        active = jnp.reshape(found.valid, (k * slots,)) & (
            dist < jnp.repeat(group.includemargin, slots)
        )
        per_group.append((group, k * slots, per, pos, frame, active))
    rows = sum(c * per for _, c, per, *_ in per_group)
    offset = force.shape[0] - rows
    pieces = []
    for group, c, per, pos, frame, active in per_group:
        edges = jnp.reshape(force[offset : offset + c * per], (c, per))
        offset += c * per
        elliptic = constraints.options.elliptic and group.condim > 1
        friction = jnp.repeat(jnp.reshape(group.friction, (-1, 5)), group.slots, axis=0)
        local = contact_frame_force(edges, friction, group.condim, elliptic)
        local = jnp.where(active[:, None], local, 0.0)
        # world axes: the frame's rows are the normal and the two tangents
        world = jnp.einsum("cij,ci->cj", frame, local[:, :3])
        spin = jnp.einsum("cij,ci->cj", frame, local[:, 3:])
        pieces.append((pos, frame[:, 0], local[:, 0], world, spin))
    if not pieces:
        empty = jnp.zeros((0, 3), qpos.dtype)
        return ConstraintForces(empty, empty, jnp.zeros(0, qpos.dtype), qpos, empty, empty,
                                qvel, qacc)  # fmt: skip
    pos, normal, normal_force, world, spin = (jnp.concatenate(x) for x in zip(*pieces, strict=True))
    return ConstraintForces(pos, normal, normal_force, qpos, world, spin, qvel, qacc, body1,
                            body2, geoms)  # fmt: skip


@eqx.filter_jit  # one program per model structure
def rows_contact_forces(constraints, tree: KinematicTree, qpos, row_forces) -> ConstraintForces:
    """:func:`solved_contact_forces` at each row of a run: the leading axes of ``qpos``
    (..., nq) and of the rows' solved forces ``row_forces`` (..., nefc)."""

    def one(q, force):
        p = poses(tree, q)
        return solved_contact_forces(constraints, p.x, p.R, force, q)

    for _ in range(qpos.ndim - 1):
        one = jax.vmap(one)
    return one(qpos, row_forces)


__all__ = [
    "ConstraintForces",
    "contact_frame_force",
    "rows_contact_forces",
    "slot_labels",
    "solved_contact_forces",
]
