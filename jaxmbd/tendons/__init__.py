"""Tendons: lengths along joint coordinates or along paths through sites (MuJoCo's tendons).

A **fixed tendon** is a linear combination of the coordinates of hinges and slides,
L = sum_i coef_i q_i (MuJoCo's ``<fixed>``, ``mjWRAP_JOINT``). A **spatial tendon** is a
path through sites on bodies: the sum of the straight segments between consecutive sites,
wrapping around a sphere or cylinder geom placed between two sites (MuJoCo's
``<spatial>`` with ``<site>``, ``<geom>`` and an optional ``sidesite``), every segment
after a ``<pulley divisor="d">`` counted 1/d (MuJoCo documentation, XML reference
"tendon/spatial"; ``mj_tendon`` in engine_core_smooth.c, ``mju_wrap`` in
engine_util_misc.c, whose geometry :func:`wrap_length` follows step by step).

Both kinds are pure JAX functions of the bodies' poses, so the length's Jacobian is the
autodiff of the length:

* :func:`lengths_and_jacobians` (the ``"joint"`` formulation): L (nt,) and J = dL/dqvel
  (nt, nv) at ``qpos`` of a :class:`~jaxmbd.tree.KinematicTree` (MuJoCo's ``ten_length``
  and ``ten_J``). A spatial tendon's gradient with respect to a world twist of every body
  (the bodies' frames moved by (omega, v_O)) times each dof's motion subspace over the
  bodies it moves gives J; a fixed tendon's J is its coefficients at the joints' dofs.
* :func:`lengths_and_gradients` (the absolute formulations): L and its gradients (nt, nb,
  2, 3) with respect to each body's twist (delta r, theta_bar), from the body states: a
  spatial tendon through its sites, a fixed tendon through its joints' coordinates
  (:func:`jaxmbd.forces._joint.coordinates_and_gradients`).

The tendon velocity is J qvel, or the gradients dotted with the twists (r_dot, omega_bar);
a tension F along the tendon is the generalised force J^T F (the forces F G on the bodies).
Where a wrapped segment is tangent to the geom (MuJoCo's wrap points on the sphere's great
circle and the cylinder's helix), the autodiff gradient equals MuJoCo's ``ten_J``, which
moves the wrap points with the geom (the length is stationary in them); only a side site
inside the geom (``wrap_inside``, solved by MuJoCo's Newton iteration to 1e-6) gives a
length whose gradient differs from MuJoCo's by that tolerance.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..forces import BodyState, OutputContext
from ..forces._joint import coordinates_and_gradients, coordinates_and_rates
from ..lie import hat
from ..model.joints import JointDefinition
from ..tree import JointType, KinematicTree, TreePoses, poses
from ..tree.kinematics import dof_ancestors
from ._paths import MINVAL, PATH_ELEMENT_KINDS, PathElementKind, WrapGeom, _norm, _unit

#: The names of the kinds of a spatial tendon's path elements.
PATH_KINDS = tuple(PATH_ELEMENT_KINDS)


class FixedTendon(eqx.Module):
    """L = sum_i ``coef[i]`` q_i over the hinges and slides ``joints`` (names; static).
    ``definitions``: each joint's :class:`~jaxmbd.model.joints.JointDefinition` for the absolute
    formulations, None where the body states do not give the coordinate (a hinge inside a
    composition of MuJoCo joints)."""

    name: str = eqx.field(static=True)
    joints: tuple[str, ...] = eqx.field(static=True)
    coef: jax.Array
    definitions: tuple[JointDefinition | None, ...] = ()
    #: the joints' names in the kinematic tree (a file's: MuJoCo's joints), () where they
    #: are ``joints``
    tree_joints: tuple[str, ...] = eqx.field(static=True, default=())

    @property
    def absolute(self) -> bool:
        """Whether the body states give every joint's coordinate (static)."""
        return len(self.definitions) == len(self.joints) and all(
            d is not None for d in self.definitions
        )


class SpatialTendon(eqx.Module):
    """A path of n elements (static ``kinds``, :mod:`jaxmbd.tendons._paths` records): sites,
    wrapping geoms
    (between two sites) and pulleys. ``bodies`` (static): each element's body (model index;
    nb, one past the last, is the ground, whose points are global; -1 for a pulley).
    ``points`` (n, 3): a site's point or a geom's centre in its body's frame (from the
    centre of mass); ``frames`` (n, 3, 3): a geom's axes in that frame (a cylinder's axis is
    the third column); ``radius`` (n,): a geom's radius; ``divisor`` (n,): a pulley's
    divisor (1 elsewhere). A geom's side site: ``side_bodies`` (static, -1 where none) and
    ``side_points`` (n, 3)."""

    name: str = eqx.field(static=True)
    kinds: tuple[PathElementKind, ...] = eqx.field(static=True)
    bodies: tuple[int, ...] = eqx.field(static=True)
    side_bodies: tuple[int, ...] = eqx.field(static=True)
    points: jax.Array
    frames: jax.Array
    radius: jax.Array
    divisor: jax.Array
    side_points: jax.Array

    absolute = True  # sites on bodies: every formulation's body states give the path


class Tendons(eqx.Module):
    """The tendons of a model (:class:`FixedTendon`, :class:`SpatialTendon`), in order."""

    tendons: tuple[FixedTendon | SpatialTendon, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tendons)

    @property
    def nt(self) -> int:
        return len(self.tendons)

    def index(self, name: str) -> int:
        if name not in self.names:
            raise ModelError(f"no tendon {name!r}; tendons: {list(self.names)}")
        return self.names.index(name)

    def subset(self, indices) -> Tendons:
        """The tendons ``indices`` (static), in that order."""
        return Tendons(tuple(self.tendons[int(k)] for k in indices))

    @property
    def reads_poses(self) -> bool:
        """Whether a length reads the bodies' poses (a spatial tendon; fixed tendons are
        linear in the joint coordinates), static."""
        return any(isinstance(t, SpatialTendon) for t in self.tendons)

    @property
    def joint_space_only(self) -> tuple[str, ...]:
        """The fixed tendons whose coordinates the body states do not give (static)."""
        return tuple(t.name for t in self.tendons if not t.absolute)


# ----------------------------------------------------------------------------- geometry


def _acos(x):
    """arccos clamped to [-1, 1] (MuJoCo's ``mju_acos``), with finite gradients at the
    ends (zero: the clamped side)."""
    inside = jnp.abs(x) < 1
    return jnp.where(inside, jnp.arccos(jnp.where(inside, x, 0.0)), jnp.where(x > 0, 0.0, jnp.pi))


def _asin(x):
    """arcsin clamped to [-1, 1] (``mju_asin``), finite gradients at the ends."""
    inside = jnp.abs(x) < 1
    end = jnp.where(x > 0, 0.5 * jnp.pi, -0.5 * jnp.pi)
    return jnp.where(inside, jnp.arcsin(jnp.where(inside, x, 0.0)), end)


def _sqrt(x):
    """sqrt of max(x, 0) with a finite gradient at 0."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _segments_cross(a, b, c, d):
    """Whether the 2D segments a-b and c-d intersect (MuJoCo's ``is_intersect``)."""
    det = (d[1] - c[1]) * (b[0] - a[0]) - (d[0] - c[0]) * (b[1] - a[1])
    ok = jnp.abs(det) >= MINVAL
    det = jnp.where(ok, det, 1.0)
    s = ((d[0] - c[0]) * (a[1] - c[1]) - (d[1] - c[1]) * (a[0] - c[0])) / det
    u = ((b[0] - a[0]) * (a[1] - c[1]) - (b[1] - a[1]) * (a[0] - c[0])) / det
    return ok & (s >= 0) & (s <= 1) & (u >= 0) & (u <= 1)


def _arc(p0, p1, first: bool, radius):
    """Length of the circle's arc from p0 to p1 (MuJoCo's ``length_circle``; ``first``: the
    first of the two tangent solutions)."""
    angle = _acos(jnp.dot(_unit(p0), _unit(p1)))
    turn = p0[1] * p1[0] - p0[0] * p1[1]
    flip = (turn < 0) if first else (turn > 0)
    return radius * jnp.where(flip, 2 * jnp.pi - angle, angle)


def _wrap_circle(end0, end1, side, radius):
    """MuJoCo's ``wrap_circle``: (wrap, arc length, tangent point 0, tangent point 1) of the
    2D segment end0-end1 around the circle of ``radius`` at the origin; ``side``: the side
    point scaled to the circle (None: the shorter way)."""
    sq0, sq1, sqrad = end0 @ end0, end1 @ end1, radius * radius
    wrap = (sq0 >= sqrad) & (sq1 >= sqrad) & (radius >= MINVAL)
    dif = end1 - end0
    dd = dif @ dif
    wrap = wrap & (dd >= MINVAL)
    a = jnp.clip(-(dif @ end0) / jnp.where(dd < MINVAL, 1.0, dd), 0.0, 1.0)
    near = a * dif + end0
    clear = near @ near > sqrad
    if side is not None:
        clear = clear & (side @ near >= 0)
    wrap = wrap & ~clear
    root0, root1 = _sqrt(sq0 - sqrad), _sqrt(sq1 - sqrad)
    s0 = jnp.where(wrap, sq0, 1.0)
    s1 = jnp.where(wrap, sq1, 1.0)
    sols, good = [], []
    for sgn in (1.0, -1.0):
        t0 = jnp.stack([end0[0] * sqrad + sgn * radius * end0[1] * root0,
                        end0[1] * sqrad - sgn * radius * end0[0] * root0]) / s0  # fmt: skip
        t1 = jnp.stack([end1[0] * sqrad - sgn * radius * end1[1] * root1,
                        end1[1] * sqrad + sgn * radius * end1[0] * root1]) / s1  # fmt: skip
        if side is not None:
            g = _unit(t0 + t1) @ side
        else:
            g = -((t0 - t1) @ (t0 - t1))
        g = jnp.where(_segments_cross(end0, t0, end1, t1), -10000.0, g)
        sols.append((t0, t1))
        good.append(g)
    first = good[0] > good[1]
    t0 = jnp.where(first, sols[0][0], sols[1][0])
    t1 = jnp.where(first, sols[0][1], sols[1][1])
    wrap = wrap & ~_segments_cross(end0, t0, end1, t1)
    arc = jnp.where(first, _arc(t0, t1, True, radius), _arc(t0, t1, False, radius))
    return wrap, arc, t0, t1


def _wrap_inside(end0, end1, radius):
    """MuJoCo's ``wrap_inside`` (a side site inside the geom): (wrap, the one tangent point),
    its Newton iteration on asin(A z) + asin(B z) - 2 asin(z) + G = 0 with MuJoCo's start
    1 - 1e-7, tolerance 1e-6 and 20 iterations, and its fallbacks."""
    len0, len1 = _norm(end0), _norm(end1)
    dif = end1 - end0
    dd = dif @ dif
    wrap = (len0 > radius) & (len1 > radius) & (radius >= MINVAL)
    wrap = wrap & (len0 >= MINVAL) & (len1 >= MINVAL)
    a = -(dif @ end0) / jnp.where(dd > MINVAL, dd, 1.0)
    hits = (dd > MINVAL) & (a > 0) & (a < 1) & (_norm(end0 + a * dif) <= radius)
    wrap = wrap & ~hits
    average = radius * _unit(0.5 * (end0 + end1))
    safe0, safe1 = jnp.where(wrap, len0, 1.0), jnp.where(wrap, len1, 1.0)
    A, B = radius / safe0, radius / safe1
    cos_g = (safe0**2 + safe1**2 - dd) / (2 * safe0 * safe1)
    wrap = wrap & (cos_g >= -1 + MINVAL)
    solve = wrap & (cos_g <= 1 - MINVAL)
    G = _acos(cos_g)

    def f_of(z):
        return _asin(A * z) + _asin(B * z) - 2 * _asin(z) + G

    z0 = jnp.asarray(1 - 1e-7, end0.dtype)
    f0 = f_of(z0)
    solve = solve & ~(f0 > 0)

    def step(_, carry):
        z, f, running, ok = carry
        go = running & (jnp.abs(f) > 1e-6)
        df = (A / jnp.maximum(MINVAL, _sqrt(1 - z * z * A * A))
              + B / jnp.maximum(MINVAL, _sqrt(1 - z * z * B * B))
              - 2 / jnp.maximum(MINVAL, _sqrt(1 - z * z)))  # fmt: skip
        bad = df > -MINVAL
        z1 = z - f / jnp.where(bad, -1.0, df)
        bad = bad | (z1 > z)
        f1 = f_of(z1)
        bad = bad | (f1 > 1e-6)
        stop_bad = go & bad
        z = jnp.where(go & ~bad, z1, z)
        f = jnp.where(go & ~bad, f1, f)
        return z, f, running & ~stop_bad, ok & ~stop_bad

    z, f, _, ok = jax.lax.fori_loop(0, 20, step, (z0, f0, solve, solve))
    ok = ok & (jnp.abs(f) <= 1e-6)  # converged within the iterations
    turn = end0[0] * end1[1] - end0[1] * end1[0] > 0
    vec = _unit(jnp.where(turn, end0, end1))
    ang = _asin(z) - jnp.where(turn, _asin(A * z), _asin(B * z))
    c, s = jnp.cos(ang), jnp.sin(ang)
    solved = radius * jnp.stack([c * vec[0] - s * vec[1], s * vec[0] + c * vec[1]])
    point = jnp.where(ok, solved, average)
    return wrap, point


def wrap_length(x0, x1, centre, axes, radius, kind: WrapGeom | str, side=None):
    """Length of the path from x0 to x1 (global points) around the sphere or cylinder
    (``kind``: its :class:`~jaxmbd.tendons._paths.WrapGeom` record or name) of ``radius`` at
    ``centre`` with axes ``axes`` (3, 3; a cylinder's axis the third column): the straight
    segment where the path does not wrap, else the segments to and from the tangent points
    plus the arc between them (a helix on a cylinder). ``side``: the side site's global
    point (None: none). MuJoCo's ``mju_wrap``."""
    geom = PATH_ELEMENT_KINDS.get(kind, kind) if isinstance(kind, str) else kind
    if not getattr(geom, "wraps", False):
        raise ValueError(f"wrap_length: kind must be 'sphere' or 'cylinder', got {kind!r}")
    p0, p1 = axes.T @ (x0 - centre), axes.T @ (x1 - centre)
    straight = _norm(x1 - x0)
    away = (_norm(p0) >= MINVAL) & (_norm(p1) >= MINVAL)
    ax0, ax1 = geom.plane_axes(p0, p1)
    d0 = jnp.stack([p0 @ ax0, p0 @ ax1])
    d1 = jnp.stack([p1 @ ax0, p1 @ ax1])
    if side is not None:
        s = axes.T @ (side - centre)
        sd = radius * _unit(jnp.stack([s @ ax0, s @ ax1]))
        inside = _norm(s) < radius
        wrap_o, arc_o, t0_o, t1_o = _wrap_circle(d0, d1, sd, radius)
        wrap_i, t_i = _wrap_inside(d0, d1, radius)
        wrap = jnp.where(inside, wrap_i, wrap_o)
        arc = jnp.where(inside, 0.0, arc_o)
        t0 = jnp.where(inside, t_i, t0_o)
        t1 = jnp.where(inside, t_i, t1_o)
    else:
        wrap, arc, t0, t1 = _wrap_circle(d0, d1, None, radius)
    wrap = wrap & away
    w0 = ax0 * t0[0] + ax1 * t0[1]
    w1 = ax0 * t1[0] + ax1 * t1[1]
    w0, w1, arc = geom.rise(p0, p1, w0, w1, arc, _norm(p0[:2] - w0[:2]), _norm(p1[:2] - w1[:2]))
    wrapped = _norm(p0 - w0) + arc + _norm(w1 - p1)
    return jnp.where(wrap, wrapped, straight)


def _point(c, R, body: int, local):
    """A body point's global position (``body`` = nb: the ground, ``local`` is global)."""
    if body == c.shape[0]:
        return local
    return c[body] + R[body] @ local


def spatial_length(tendon: SpatialTendon, c, R):
    """The length of a spatial tendon with the bodies' frames at ``c`` (nb, 3) (their
    origins: the centres of mass) and ``R`` (nb, 3, 3) (``mj_tendon``'s walk along the path:
    a pulley sets the divisor of what follows; a geom between two sites wraps)."""
    kinds, bodies = tendon.kinds, tendon.bodies
    n = len(kinds)
    total = jnp.zeros((), c.dtype)
    divisor = jnp.ones((), c.dtype)
    j = 0
    while j < n - 1:
        k0, k1 = kinds[j], kinds[j + 1]
        if k0.divides or k1.divides:
            if k0.divides:
                divisor = tendon.divisor[j]
            j += 1
            continue
        x0 = _point(c, R, bodies[j], tendon.points[j])
        if k1.wraps:
            g = j + 1
            x1 = _point(c, R, bodies[j + 2], tendon.points[j + 2])
            centre = _point(c, R, bodies[g], tendon.points[g])
            axes = tendon.frames[g] if bodies[g] == c.shape[0] else R[bodies[g]] @ tendon.frames[g]
            side = None
            if tendon.side_bodies[g] >= 0:
                side = _point(c, R, tendon.side_bodies[g], tendon.side_points[g])
            total = total + wrap_length(x0, x1, centre, axes, tendon.radius[g], k1, side) / divisor
            j += 2
        else:
            x1 = _point(c, R, bodies[j + 1], tendon.points[j + 1])
            total = total + _norm(x1 - x0) / divisor
            j += 1
    return total


# ----------------------------------------------------------------------------- joint space


def _tree_joint_addresses(tree: KinematicTree, tendon: FixedTendon):
    """(qpos addresses, dof addresses) of a fixed tendon's joints in ``tree``."""
    qadr, dadr = [], []
    for name in tendon.tree_joints or tendon.joints:
        if name not in tree.joint_names:
            raise ModelError(f"tendon '{tendon.name}': joint {name!r} is not a joint of the "
                             f"kinematic tree")  # fmt: skip
        j = tree.joint_names.index(name)
        if JointType(tree.joint_type[j]) not in (JointType.HINGE, JointType.SLIDE):
            raise ModelError(f"tendon '{tendon.name}': joint {name!r} is not a hinge or slide")
        qadr.append(tree.joint_qpos_adr[j])
        dadr.append(tree.joint_dof_adr[j])
    return np.asarray(qadr, int), np.asarray(dadr, int)


def lengths_and_jacobians(tendons: Tendons, tree: KinematicTree, qpos,
                          tree_poses: TreePoses | None = None):  # fmt: skip
    """The tendons' lengths L (nt,) and Jacobians J = dL/dqvel (nt, nv) at ``qpos`` of
    ``tree`` (MuJoCo's ``ten_length``, ``ten_J``; the tendon velocity is J qvel).
    ``tree_poses``: the tree's :func:`~jaxmbd.tree.poses` at ``qpos`` where already at hand.
    Tree body k is model body k (the points of a spatial tendon are in its frames)."""
    nt, nv = tendons.nt, tree.nv
    rows_L = [None] * nt
    rows_J = [None] * nt
    spatial = [k for k, t in enumerate(tendons.tendons) if isinstance(t, SpatialTendon)]
    for k, t in enumerate(tendons.tendons):
        if isinstance(t, FixedTendon):
            qadr, dadr = _tree_joint_addresses(tree, t)
            rows_L[k] = jnp.sum(t.coef * qpos[qadr])
            onehot = np.zeros((len(dadr), nv))
            onehot[np.arange(len(dadr)), dadr] = 1.0
            rows_J[k] = t.coef @ jnp.asarray(onehot)
    if spatial:
        p = poses(tree, qpos) if tree_poses is None else tree_poses
        c, R = p.c, p.R

        def lengths(twists):  # world twists (omega, v_O) of every body, to first order
            w, v = twists[:, :3], twists[:, 3:]
            c2 = c + v + jnp.cross(w, c)
            R2 = R + hat(w) @ R
            return jnp.stack([spatial_length(tendons.tendons[k], c2, R2) for k in spatial])

        zero = jnp.zeros((tree.nb, 6), c.dtype)
        values = lengths(zero)
        G = jax.jacfwd(lengths)(zero)  # (ns, nb, 6)
        anc = jnp.asarray(dof_ancestors(tree))
        J = jnp.einsum("sbk,bd,dk->sd", G, anc, p.S)
        for i, k in enumerate(spatial):
            rows_L[k], rows_J[k] = values[i], J[i]
    if nt == 0:
        return jnp.zeros(0, qpos.dtype), jnp.zeros((0, nv), qpos.dtype)
    return jnp.stack(rows_L), jnp.stack(rows_J)


# ----------------------------------------------------------------------------- body states


def lengths_and_gradients(tendons: Tendons, state: BodyState):
    """The tendons' lengths L (nt,) and their gradients G (nt, nb, 2, 3) with respect to
    each body's twist (delta r, theta_bar) at the body states ``state`` (the absolute
    formulations): the velocity is sum G . (r_dot, omega_bar) (:func:`velocities`), and a
    tension F along tendon k puts the forces F G[k, b, 0] and body torques F G[k, b, 1] on
    the bodies. Fixed tendons whose joints the body states do not give are refused."""
    nb = state.r.shape[0]
    refused = tendons.joint_space_only
    if refused:
        raise ModelError(
            f"fixed tendons {list(refused)} act on hinges or slides whose coordinates only the "
            "joint formulation has (joints inside a composition of MuJoCo joints): use "
            'formulation="joint"'
        )
    rows_L = [None] * tendons.nt
    rows_G = [None] * tendons.nt
    spatial = [k for k, t in enumerate(tendons.tendons) if isinstance(t, SpatialTendon)]
    for k, t in enumerate(tendons.tendons):
        if isinstance(t, FixedTendon):
            q, g = coordinates_and_gradients(tuple(t.definitions), state)
            rows_L[k] = jnp.sum(t.coef * q)
            G = jnp.zeros((nb + 1, 2, 3), state.r.dtype)
            bi = np.asarray([d.body_i for d in t.definitions], int)
            bj = np.asarray([d.body_j for d in t.definitions], int)
            G = G.at[bi].add(t.coef[:, None, None] * g[:, :2])
            G = G.at[bj].add(t.coef[:, None, None] * g[:, 2:])
            rows_G[k] = G[:nb]
    if spatial:
        c, A = state.r, state.A

        def lengths(twists):  # body twists (delta r, theta_bar), to first order
            c2 = c + twists[:, 0]
            A2 = A + A @ hat(twists[:, 1])
            return jnp.stack([spatial_length(tendons.tendons[k], c2, A2) for k in spatial])

        zero = jnp.zeros((nb, 2, 3), c.dtype)
        values = lengths(zero)
        G = jax.jacfwd(lengths)(zero)
        for i, k in enumerate(spatial):
            rows_L[k], rows_G[k] = values[i], G[i]
    if tendons.nt == 0:
        return jnp.zeros(0, state.r.dtype), jnp.zeros((0, nb, 2, 3), state.r.dtype)
    return jnp.stack(rows_L), jnp.stack(rows_G)


def output_lengths(tendons: Tendons, context: OutputContext):
    """The tendons' lengths and velocities (nt,) each at the state of ``context``
    (:meth:`jaxmbd.forces.AbstractForce.outputs`): a fixed tendon's from qpos and qvel by
    joint name in a run in joint coordinates, else from the body states (NaN where they do
    not give its joints' coordinates); a spatial tendon's from the body states (every
    formulation stores them)."""
    dtype = context.state.r.dtype
    nan = jnp.full((), jnp.nan, dtype)
    addresses = context.joint_addresses
    rows_L, rows_V = [nan] * tendons.nt, [nan] * tendons.nt
    spatial = [k for k, t in enumerate(tendons.tendons) if isinstance(t, SpatialTendon)]
    for k, t in enumerate(tendons.tendons):
        if isinstance(t, SpatialTendon):
            continue
        names = t.tree_joints or t.joints
        if addresses and all(name in addresses for name in names):
            qadr, dadr = (np.asarray([addresses[name][i] for name in names], int)
                          for i in (0, 1))  # fmt: skip
            rows_L[k] = jnp.sum(t.coef * context.qpos[qadr])
            rows_V[k] = jnp.sum(t.coef * context.qvel[dadr])
        elif t.absolute:
            q, qdot, _ = coordinates_and_rates(tuple(t.definitions), context.state)
            rows_L[k], rows_V[k] = jnp.sum(t.coef * q), jnp.sum(t.coef * qdot)
    if spatial:
        length, G = lengths_and_gradients(tendons.subset(spatial), context.state)
        velocity = velocities(G, context.state)
        for i, k in enumerate(spatial):
            rows_L[k], rows_V[k] = length[i], velocity[i]
    if tendons.nt == 0:
        return jnp.zeros(0, dtype), jnp.zeros(0, dtype)
    return jnp.stack(rows_L), jnp.stack(rows_V)


def velocities(G, state: BodyState):
    """Tendon velocities (nt,) from the gradients ``G`` of :func:`lengths_and_gradients`."""
    return jnp.einsum("tbi,bi->t", G[:, :, 0], state.rdot) + jnp.einsum(
        "tbi,bi->t", G[:, :, 1], state.omega
    )


def body_forces(G, tension):
    """(f (nb, 3), n_bar (nb, 3)) of tensions (nt,) along the tendons of gradients ``G``."""
    return jnp.einsum("t,tbi->bi", tension, G[:, :, 0]), jnp.einsum(
        "t,tbi->bi", tension, G[:, :, 1]
    )
