"""The sensor kinds of MuJoCo's that need more than a site: frames against a reference frame
and frame axes, subtree centre of mass, linear velocity and angular momentum, touch,
actuator forces and the interaction wrench at a site (registered by :mod:`jaxmbd.sensors`,
whose docstring tables them).

Each reader takes ``(model, mount, run)`` (a :class:`~jaxmbd.sensors.SensorMount` whose
``params`` is one of the records below, and a :class:`~jaxmbd.sensors.SensorInput`) and
returns the noise-free reading (T, dim) along the run, traceable. Semantics follow MuJoCo's
``engine_sensor.c`` (``mj_computeSensorPos``, ``...Vel``, ``...Acc``) and ``mj_subtreeVel``
(``engine_core_smooth.c``); where a body index equals ``model.nb`` it is the ground (the
world frame, fixed).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..constraints.equations import rA_terms_rows
from ..forces import BodyState
from ..forces._joint import coordinates_and_rates
from ..geometry._ray_cast import RAY_FIELDS, RAY_SHAPES, nearest_hit
from ..geometry._ray_zone import ray_meets_zone
from ..lie.rotations import A_to_ep
from ..tendons import lengths_and_gradients, velocities


class FrameReference(eqx.Module):
    """The frame a frame sensor reads against (MuJoCo's ``reftype``/``refname``): a site
    ``site`` (3,) with axes ``frame`` (3, 3) on ``body`` (model index; ``nb``: the ground,
    where site and frame are global)."""

    body: int = eqx.field(static=True)
    site: jax.Array
    frame: jax.Array


class WeldedPart(eqx.Module):
    """A rigid part of a sensor's body: a MuJoCo body welded to its parent and merged into
    the jaxmbd body (:mod:`jaxmbd.mjcf`), with the bodies welded below it. ``mass``, its
    centre of mass ``com`` (3,) (body frame, from the body's centre of mass) and its
    inertia ``inertia`` (3, 3) about that point (body axes); ``shapes``: the indices in the
    body's shape list of the part's shapes, whose contact forces act on the part."""

    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    shapes: tuple[int, ...] = eqx.field(static=True, default=())


class SubtreeBodies(eqx.Module):
    """The bodies (model indices) of a subtree sensor's subtree; for the interaction wrench,
    also the subtree root's ``parent`` (model index; ``nb``: the ground), whose joint
    carries the wrench, and where the subtree's root is a part of the sensor's body welded
    to the rest of it, that ``part`` (:class:`WeldedPart`; then ``bodies`` are the whole
    bodies below the part and ``parent`` is the sensor's body)."""

    bodies: tuple[int, ...] = eqx.field(static=True)
    parent: int = eqx.field(static=True, default=-1)
    part: WeldedPart | None = None


class TouchZone(eqx.Module):
    """A touch sensor's zone: MuJoCo's site ``shape``
    (:data:`jaxmbd.geometry._ray_zone.ZONE_SHAPES`)
    of ``size`` (3,) (MuJoCo's ``site_size``) at the sensor's site and axes."""

    shape: str = eqx.field(static=True)
    size: jax.Array


class RayTargets(eqx.Module):
    """The shapes a rangefinder's ray sees: MuJoCo's geom ``kinds``
    (:data:`jaxmbd.geometry._ray_cast.
    RAY_SHAPES`) on ``bodies`` (model indices; ``nb``: the ground), at ``pos`` (n, 3) with
    axes ``rot`` (n, 3, 3) in their bodies' frames (global on the ground), of MuJoCo's geom
    ``size`` (n, 3); a height field (kind ``"hfield"``,
    :func:`jaxmbd.geometry._ray_cast.ray_hfield`)
    has size (half extent x, half extent y, base depth) and its elevations in ``heights``
    (one (nrow, ncol) array per height field target, in target order)."""

    kinds: tuple[str, ...] = eqx.field(static=True)
    bodies: tuple[int, ...] = eqx.field(static=True)
    pos: jax.Array
    rot: jax.Array
    size: jax.Array
    heights: tuple[jax.Array, ...] = ()  # of the height field targets, in order


class ActuatorSet(eqx.Module):
    """The actuators (indices into ``model.actuators``) whose force a sensor reads: one for
    ``actuator_force``, those of a joint for ``joint_actuator_force``."""

    actuators: tuple[int, ...] = eqx.field(static=True)


def _t(M):
    return jnp.swapaxes(M, -1, -2)


def _mv(M, v):
    return (M @ v[..., None])[..., 0]


def frame_motion(body: int, site, frame, run):
    """(point, axes, point velocity, angular velocity) (T, 3), (T, 3, 3), (T, 3), (T, 3),
    global, of the frame ``(site, frame)`` on ``body`` (``nb``: the ground, fixed)."""
    T, nb = run.r.shape[0], run.r.shape[1]
    if body >= nb:
        p = jnp.broadcast_to(site, (T, 3))
        R = jnp.broadcast_to(frame, (T, 3, 3))
        zero = jnp.zeros((T, 3), run.r.dtype)
        return p, R, zero, zero
    A = run.A[:, body]
    w = _mv(A, run.omega[:, body])
    arm = _mv(A, jnp.broadcast_to(site, (T, 3)))
    return run.r[:, body] + arm, A @ frame, run.rdot[:, body] + jnp.cross(w, arm), w


def _object(mount, run):
    return frame_motion(mount.body, mount.site, mount.frame, run)


def _reference(mount, run):
    ref = mount.params
    return None if ref is None else frame_motion(ref.body, ref.site, ref.frame, run)


def read_frame_position(model, mount, run):
    """MuJoCo's ``framepos``: the point, global or R_ref^T (p - p_ref)."""
    p = _object(mount, run)[0]
    ref = _reference(mount, run)
    return p if ref is None else _mv(_t(ref[1]), p - ref[0])


def _axis(k: int):
    def read(model, mount, run):
        axis = _object(mount, run)[1][..., k]
        ref = _reference(mount, run)
        return axis if ref is None else _mv(_t(ref[1]), axis)

    read.__doc__ = f"MuJoCo's ``frame{'xyz'[k]}axis``: the frame's {'xyz'[k]} axis."
    return read


read_frame_x_axis, read_frame_y_axis, read_frame_z_axis = (_axis(k) for k in range(3))


def read_frame_quaternion(model, mount, run):
    """MuJoCo's ``framequat``: the frame's rotation (R_ref^T R against a reference) as a
    unit quaternion (w, x, y, z) with w >= 0."""
    R = _object(mount, run)[1]
    ref = _reference(mount, run)
    R = R if ref is None else _t(ref[1]) @ R
    q = A_to_ep(R)
    return jnp.where(q[..., :1] < 0, -q, q)


def read_frame_linear_velocity(model, mount, run):
    """MuJoCo's ``framelinvel``: the point's velocity, global; against a reference frame
    R_ref^T (v - v_ref - w_ref x (p - p_ref)), the velocity seen in the moving frame."""
    p, _, v, _ = _object(mount, run)
    ref = _reference(mount, run)
    if ref is None:
        return v
    p_ref, R_ref, v_ref, w_ref = ref
    return _mv(_t(R_ref), v - v_ref - jnp.cross(w_ref, p - p_ref))


def read_frame_angular_velocity(model, mount, run):
    """MuJoCo's ``frameangvel``: the angular velocity, global or R_ref^T (w - w_ref)."""
    w = _object(mount, run)[3]
    ref = _reference(mount, run)
    return w if ref is None else _mv(_t(ref[1]), w - ref[3])


# ----------------------------------------------------------------------------- subtrees


def _subtree(model, mount, run):
    """(masses (n,), centres of mass (T, n, 3), their velocities (T, n, 3), total mass,
    the subtree's centre of mass (T, 3) and its velocity (T, 3))."""
    idx = np.asarray(mount.params.bodies, dtype=int)
    m = model.mass[idx]
    total = jnp.sum(m)
    r, v = run.r[:, idx], run.rdot[:, idx]
    com = jnp.einsum("k,tki->ti", m, r) / total
    vel = jnp.einsum("k,tki->ti", m, v) / total
    return m, r, v, com, vel


def read_subtree_com(model, mount, run):
    """MuJoCo's ``subtreecom``: the subtree's centre of mass (global)."""
    return _subtree(model, mount, run)[3]


def read_subtree_linear_velocity(model, mount, run):
    """MuJoCo's ``subtreelinvel``: the velocity of the subtree's centre of mass (global),
    its linear momentum over its mass."""
    return _subtree(model, mount, run)[4]


def read_subtree_angular_momentum(model, mount, run):
    """MuJoCo's ``subtreeangmom``: the subtree's angular momentum about its centre of mass
    (global): sum_k A_k J_k omega_k + m_k (r_k - c) x (r_dot_k - c_dot)."""
    m, r, v, com, vel = _subtree(model, mount, run)
    idx = np.asarray(mount.params.bodies, dtype=int)
    A, w = run.A[:, idx], run.omega[:, idx]
    spin = _mv(A, _mv(model.inertia[idx], w))
    orbit = m[None, :, None] * jnp.cross(r - com[:, None], v - vel[:, None])
    return jnp.sum(spin + orbit, axis=1)


# ----------------------------------------------------------------------------- touch


def read_touch(model, mount, run):
    """MuJoCo's ``touch``: the normal forces of the contacts of the sensor's body whose ray
    (from the contact point along the normal, away from the body) meets the zone
    (:mod:`jaxmbd.geometry._ray_zone`), summed: the solved contacts of MuJoCo's constraint
    model where the run kept them (:attr:`SensorInput.contacts`), else the compliant law's
    forces of ``model.contacts`` (zero without contact). (T, 1)."""
    if run.contacts is not None:
        return _touch_of_solved(mount, run)
    element = model.contacts
    T = run.r.shape[0]
    if element is None or element.n_slots == 0:
        return jnp.zeros((T, 1), run.r.dtype)
    b = mount.body
    bi, bj = element._slot_bodies()
    on_i, on_j = bi == b, bj == b
    if not np.any(on_i | on_j):
        return jnp.zeros((T, 1), run.r.dtype)
    zone = mount.params

    def one(r, A, rdot, omega):
        s = element.slots(BodyState(r, A, rdot, omega))
        centre = r[b] + A[b] @ mount.site
        R = A[b] @ mount.frame
        away = jnp.where(jnp.asarray(on_i)[:, None], -s.normal, s.normal)
        hit = ray_meets_zone(zone.shape, zone.size, (s.point - centre) @ R, away @ R)
        counted = jnp.asarray(on_i | on_j) & hit & (s.normal_force > 0)
        return jnp.sum(jnp.where(counted, s.normal_force, 0.0))[None]

    return jax.vmap(one)(run.r, run.A, run.rdot, run.omega)


def _touch_of_solved(mount, run):
    """``touch`` from the solved contacts (``engine_sensor.c``, ``mjSENS_TOUCH``): a
    contact's normal (``mjContact.frame``'s first row) points from geom 1 to geom 2, so
    the ray leaves the sensor's body along it where the body is geom 1's, against it where
    it is geom 2's (checked second, as MuJoCo does)."""
    contacts, b, zone = run.contacts, mount.body, mount.params
    on_second = np.asarray(contacts.body2) == b
    on_body = on_second | (np.asarray(contacts.body1) == b)
    if not np.any(on_body):
        return jnp.zeros((run.r.shape[0], 1), run.r.dtype)

    def one(r, A, pos, normal, normal_force):
        centre = r[b] + A[b] @ mount.site
        R = A[b] @ mount.frame
        away = jnp.where(jnp.asarray(on_second)[:, None], -normal, normal)
        hit = ray_meets_zone(zone.shape, zone.size, (pos - centre) @ R, away @ R)
        counted = jnp.asarray(on_body) & hit & (normal_force > 0)
        return jnp.sum(jnp.where(counted, normal_force, 0.0))[None]

    return jax.vmap(one)(run.r, run.A, contacts.pos, contacts.normal, contacts.normal_force)


# ----------------------------------------------------------------------------- rangefinder


def read_rangefinder(model, mount, run):
    """MuJoCo's ``rangefinder`` (``mj_ray`` from the site along its z axis,
    ``engine_sensor.c``): the distance to the nearest surface of the sensor's targets
    (:class:`RayTargets`, :mod:`jaxmbd.geometry._ray_cast`), -1 where the ray meets none. (T, 1)."""
    p, R, _, _ = _object(mount, run)
    return ray_distances(mount.params, run.r, run.A, p, R[..., 2])[:, None]


def ray_distances(targets: RayTargets, r, A, p, direction):
    """(T,) distances from the points ``p`` (T, 3) along the unit ``direction`` (T, 3) to
    the nearest surface of ``targets``, -1 where a ray meets none (``mj_ray``); the bodies
    at ``r`` (T, nb, 3) with axes ``A`` (T, nb, 3, 3) (their centres of mass, as the
    sensors' runs place them): one ray per row, e.g. a time step or a rangefinder."""
    T, nb = r.shape[0], r.shape[1]
    found = []
    fields = [i for i, x in enumerate(targets.kinds) if x in RAY_FIELDS]
    groups = [(kind, [i for i, x in enumerate(targets.kinds) if x == kind])
              for kind in sorted(set(targets.kinds) - set(RAY_FIELDS))]  # fmt: skip
    groups += [(targets.kinds[i], [i]) for i in fields]  # each field its own grid
    for kind, k in groups:  # one batched test per shape kind
        k = np.array(k, dtype=int)
        b = np.asarray(targets.bodies, dtype=int)[k]
        moving = b < nb
        rb = jnp.concatenate([r, jnp.zeros((T, 1, 3), r.dtype)], axis=1)[:, b]
        Ab = jnp.concatenate([A, jnp.broadcast_to(jnp.eye(3, dtype=A.dtype),
                                                  (T, 1, 3, 3))], axis=1)[:, b]  # fmt: skip
        pos = jnp.where(moving[None, :, None], rb + _mv(Ab, targets.pos[k]), targets.pos[k])
        rot = jnp.where(moving[None, :, None, None], Ab @ targets.rot[k], targets.rot[k])
        field = RAY_FIELDS.get(kind)
        if field is not None:
            test = functools.partial(field, heights=targets.heights[fields.index(k[0])])
        else:
            test = RAY_SHAPES[kind]

        def local(size, pos, rot, point, vec, test=test):
            return test(size, _mv(_t(rot), point - pos), _mv(_t(rot), vec))

        over_targets = jax.vmap(local, in_axes=(0, 0, 0, None, None))
        found.append(jax.vmap(over_targets, in_axes=(None, 0, 0, 0, 0))(
            targets.size[k], pos, rot, p, direction))  # fmt: skip
    if not found:
        return jnp.full((T,), -1.0, r.dtype)
    return jax.vmap(nearest_hit)(jnp.concatenate(found, axis=1))


# ----------------------------------------------------------------------------- actuators


def actuator_forces(model, run):
    """The actuator forces F (T, nu) (before the gear; :mod:`jaxmbd.actuators`) at each
    state with the run's controls (``run.controls``, else the element's own) and, with
    activation dynamics, the run's activations (``run.act``, else the element's own)."""
    element = model.actuators
    if element is None:
        raise ValueError(f"model '{model.name}' has no actuators for an actuator sensor")
    T = run.r.shape[0]
    u = run.controls
    u = jnp.broadcast_to(element.controls, (T, element.nu)) if u is None else u

    rows = np.asarray(element.tendon_actuated, dtype=int)

    act = run.act
    if act is None or not element.has_dynamics:
        act = jnp.zeros((T, 0), run.r.dtype)

    def one(u, r, A, rdot, omega, t, act):
        state = BodyState(r, A, rdot, omega)
        q, qdot, _ = coordinates_and_rates(element.joints, state)
        if rows.size:  # tendon transmissions: the tendons' lengths and velocities
            length, G = lengths_and_gradients(element.tendons, state)
            q, qdot = q.at[rows].set(length), qdot.at[rows].set(velocities(G, state))
        if act.size:  # the row's activations, MuJoCo's act (act_early: a step ahead)
            at = dataclasses.replace(element, activation=element.full_activation(act),
                                     activation_state=True)  # fmt: skip
            return at.actuator_force(u, q, qdot)
        return element.actuator_force(u, q, qdot)

    return jax.vmap(one)(u, run.r, run.A, run.rdot, run.omega, run.t, act)


def read_actuator_force(model, mount, run):
    """MuJoCo's ``actuatorfrc``: the actuator's force F (its ``actuator_force``)."""
    k = np.asarray(mount.params.actuators, dtype=int)
    return actuator_forces(model, run)[:, k]


def read_joint_actuator_force(model, mount, run):
    """MuJoCo's ``jointactuatorfrc``: the joint's generalised actuator force,
    sum of gear F over the actuators on it (``qfrc_actuator`` at its dof)."""
    k = np.asarray(mount.params.actuators, dtype=int)
    if k.size == 0:
        return jnp.zeros((run.r.shape[0], 1), run.r.dtype)
    F = actuator_forces(model, run)[:, k]
    return jnp.sum(model.actuators.gear[k] * F, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- interaction


def _external_loads(model, bodies, root: int, parent: int, run, *, welded: bool = False):
    """(f (T, n, 3) global, n_bar (T, n, 3) body frame) on the subtree's bodies from
    outside it, besides the joint to its parent: gravity, contact (the compliant law of
    ``model.contacts``) and the constraint rows that join a subtree body to a body outside
    it other than through that joint (loops closed by equalities). MuJoCo's ``cfrc_ext``
    with gravity (``mj_rnePostConstraint``); forces along joints and passive forces stay
    inside the interaction, as MuJoCo's do. ``welded``: the subtree hangs from a part of
    ``root`` (``root`` outside it), whose rows to the subtree are the joints below the part
    (inside the interaction)."""
    nb = run.r.shape[1]
    idx = np.asarray(bodies, dtype=int)
    inside = np.zeros(nb + 1, dtype=bool)
    inside[idx] = True
    rows = []  # (row, subtree body, its block is jac_i)
    for c, (i, j) in enumerate(model.constraint_bodies):
        if inside[i] == inside[j] or {i, j} == {root, parent} or (welded and root in (i, j)):
            continue
        rows.append((c, i if inside[i] else j, bool(inside[i])))
    element = model.contacts

    def one(t, r, A, rdot, omega, lam):
        f = jnp.broadcast_to(model.mass[:, None] * model.gravity, r.shape)
        n = jnp.zeros_like(r)
        if element is not None and element.n_slots:
            df, dn = element(t, BodyState(r, A, rdot, omega))
            f, n = f + df, n + dn
        f, n = f[idx], n[idx]
        if rows:
            zero = jnp.zeros_like(r)
            _, jac_i, jac_j, _, _ = rA_terms_rows(model, r, A, zero, zero, t)
            for c, b, on_i in rows:
                load = -(jac_i[c] if on_i else jac_j[c]) * lam[c]
                k = int(np.flatnonzero(idx == b)[0])
                f = f.at[k].add(load[:3])
                n = n.at[k].add(load[3:])
        return f, n

    if idx.size == 0:
        empty = jnp.zeros((run.r.shape[0], 0, 3), run.r.dtype)
        return empty, empty
    return jax.vmap(one)(run.t, run.r, run.A, run.rdot, run.omega, run.lam)


def _part_contact(model, body: int, shapes, run):
    """(force, moment about the body's centre of mass) (T, 3) each, global: the contact
    forces (the compliant law of ``model.contacts``) on the shapes ``shapes`` of ``body``."""
    element = model.contacts
    T = run.r.shape[0]
    zero = jnp.zeros((T, 3), run.r.dtype)
    if element is None or element.n_slots == 0 or not shapes:
        return zero, zero
    bi, bj = element._slot_bodies()
    si, sj = element.slot_shapes()
    mine = np.isin(np.arange(max(si.max(), sj.max()) + 1), shapes)
    on_i, on_j = (bi == body) & mine[si], (bj == body) & mine[sj]
    if not np.any(on_i | on_j):
        return zero, zero
    sign = jnp.asarray(on_i.astype(float) - on_j.astype(float))

    def one(r, A, rdot, omega):
        s = element.slots(BodyState(r, A, rdot, omega))
        force = sign[:, None] * (s.normal_force[:, None] * s.normal + s.tangential_force)
        moment = jnp.cross(s.point - r[body], force) + sign[:, None] * s.friction_torque
        return jnp.sum(force, axis=0), jnp.sum(moment, axis=0)

    return jax.vmap(one)(run.r, run.A, run.rdot, run.omega)


def _part_wrench(model, body: int, part: WeldedPart, site_point, run):
    """(force, moment about ``site_point``) (T, 3) each, global: the part's rate of
    momentum less its gravity and contact forces (the wrench the rest of its body exerts
    on it, besides what the bodies below it exert)."""
    A, w_bar, a_bar = run.A[:, body], run.omega[:, body], run.omegadot[:, body]
    w, alpha = _mv(A, w_bar), _mv(A, a_bar)
    arm = _mv(A, jnp.broadcast_to(part.com, w.shape))
    acc = run.rddot[:, body] + jnp.cross(alpha, arm) + jnp.cross(w, jnp.cross(w, arm))
    f_c, n_c = _part_contact(model, body, part.shapes, run)  # n_c about the body's com
    force = part.mass * (acc - model.gravity) - f_c
    Ic = A @ part.inertia @ _t(A)
    spin = _mv(Ic, alpha) + jnp.cross(w, _mv(Ic, w))
    point = run.r[:, body] + arm
    # the contact moment about the body's com moved to the part's centre of mass
    spin = spin - (n_c - jnp.cross(arm, f_c))
    return force, spin + jnp.cross(point - site_point, force)


def interaction_wrench(model, mount, run):
    """(force, torque) (T, 3) each: the wrench that the sensor's body receives from its
    parent through its joint (MuJoCo's ``cfrc_int``: the subtree's rates of momentum less
    its external loads, Featherstone 2008, Table 5.1), the torque about the site, both in
    the site's axes (MuJoCo's ``force`` and ``torque`` sensors, ``mju_transformSpatial``
    to the site). Where the sensor's MuJoCo body is welded to its parent (a
    :class:`WeldedPart` of the jaxmbd body), the subtree is that part and the bodies below
    it, and the wrench is the one the rest of the body exerts on the part."""
    sub = mount.params
    idx = np.asarray(sub.bodies, dtype=int)
    welded = sub.part is not None
    f_ext, n_ext = _external_loads(model, sub.bodies, mount.body, sub.parent, run,
                                   welded=welded)  # fmt: skip
    r, A = run.r[:, idx], run.A[:, idx]
    w, alpha = _mv(A, run.omega[:, idx]), _mv(A, run.omegadot[:, idx])
    J = model.inertia[idx]
    Ic = A @ J @ _t(A)
    force = model.mass[idx][None, :, None] * run.rddot[:, idx] - f_ext
    spin = _mv(Ic, alpha) + jnp.cross(w, _mv(Ic, w)) - _mv(A, n_ext)
    p, R, _, _ = _object(mount, run)
    F = jnp.sum(force, axis=1)
    N = jnp.sum(spin + jnp.cross(r - p[:, None], force), axis=1)
    if welded:
        f_p, n_p = _part_wrench(model, mount.body, sub.part, p, run)
        F, N = F + f_p, N + n_p
    return _mv(_t(R), F), _mv(_t(R), N)


def read_interaction_force(model, mount, run):
    """MuJoCo's ``force``: the interaction force at the site, in its axes."""
    return interaction_wrench(model, mount, run)[0]


def read_interaction_torque(model, mount, run):
    """MuJoCo's ``torque``: the interaction torque about the site, in its axes."""
    return interaction_wrench(model, mount, run)[1]
