"""The wrenches that the joints of a kinematic tree transmit, by Newton-Euler.

The joint coordinates carry no multipliers for the tree's own joints: what a joint
transmits follows from the motion instead. The wrench on body b from its parent through
b's joints is the sum over b's subtree of the net wrenches each body needs,
I a + v x* I v minus the applied wrenches (gravity, the force elements that act on the
bodies, contact) and the loops' constraint loads -G^T lam (Featherstone 2008, Table 5.1,
the backward pass f_i = f_i^B + sum of the children's f_j, with all quantities in one
frame: a subtree sum). In classical terms each body contributes
F = m r_ddot - f and N = Ic alpha + omega x Ic omega - n about its centre of mass.

Two conventions:

- ``along_joints=True``: the whole interaction wrench, MuJoCo's ``cfrc_int`` (its
  component along each of the body's dofs, S_i . f, is what the joint-space forces on that
  dof deliver: actuators, damping, stiffness, limits, friction loss, less the armature's
  a qacc).
- ``along_joints=False``: the constraint reaction only, the interaction wrench less the
  joint-space forces' wrenches: a hinge's (or a ball's, or a free rotation's) force is a
  torque about its axis, a slide's a force along its axis through its anchor on the child
  (the body's final frame). Each is removed by the oblique projection
  f - W (S^T W)^-1 S^T f over the body's dofs (S their motion subspaces, W these wrenches),
  so that S^T f = 0 after it: the reaction does no work in the joint's motion. This is what
  the multipliers of the absolute formulations give, where joint-space forces are applied
  loads on the two bodies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..constraints.equations import rA_terms
from ..forces import BodyState
from ..model import Model
from ..tree import JointType, KinematicTree, picked_sum, poses
from ..tree._elementwise import cross, mm, mtv, mv, row_products


def body_loads(model: Model, r, A, rdot, omega, t, lam):
    """(f (nb, 3) global forces at the centres of mass, n_bar (nb, 3) body-frame torques) of
    gravity, the force elements that act on bodies (those along joint coordinates act
    between a body and its parent, inside the tree's joints) and the constraint rows'
    loads -G^T lam (paper 1 eq. 34c; in joint coordinates only the loops' rows carry
    multipliers)."""
    f = model.mass[:, None] * model.gravity[None, :]
    n = jnp.zeros_like(f)
    state = BodyState(r, A, rdot, omega)
    for element in model.forces:
        if element.acts_along_joints:
            continue
        if element.acts_along_tendons:  # the spatial tendons' loads at their sites
            element = element.spatial_part()
            if element is None:
                continue
        df, dn = element(t, state)
        f, n = f + df, n + dn
    if model.nc:
        zero = jnp.zeros_like(r)
        _, G, _, _ = rA_terms(model, r, A, zero, zero, t)
        load = -mtv(G, lam).reshape(model.nb, 6)
        f, n = f + load[:, :3], n + load[:, 3:]
    return f, n


def transmitted_wrenches(tree: KinematicTree, mass, inertia, r, A, omega, rddot, omegadot,
                         f, n_bar):  # fmt: skip
    """The world wrenches (n_O, f) (nb, 6), moments about the world origin, that each body
    receives from its parent through its joints (the module docstring, ``along_joints=True``)
    at one state: centres of mass ``r``, rotations ``A``, body-frame angular velocities
    ``omega`` and accelerations ``omegadot``, centre-of-mass accelerations ``rddot``, applied
    loads ``f``, ``n_bar`` (:func:`body_loads`)."""
    Ic = mm(mm(A, inertia), jnp.swapaxes(A, -1, -2))
    w, alpha = mv(A, omega), mv(A, omegadot)
    force = mass[:, None] * rddot - f
    torque = mv(Ic, alpha) + cross(w, mv(Ic, w)) - mv(A, n_bar)
    net = jnp.concatenate([torque + cross(r, force), force], -1)
    return picked_sum(tree.ancestors().T, net)


def _dof_wrenches(tree: KinematicTree, x, R, S):
    """W (nv, 6): each dof's unit joint-space force as a wrench (the module docstring):
    (S_angular, 0) for a rotation, (p x a, a) for a translation along a through p (a
    slide's anchor on the child, a free joint's body origin)."""
    types = np.asarray(tree.joint_type, dtype=int)
    dof_joint = np.asarray(tree.dof_joint, dtype=int)
    adr = np.asarray(tree.joint_dof_adr, dtype=int)
    dof = np.arange(tree.nv)
    jb = np.asarray(tree.joint_body, dtype=int)[dof_joint]
    dof_type = types[dof_joint]
    slide = dof_type == JointType.SLIDE
    free_move = (dof_type == JointType.FREE) & (dof - adr[dof_joint] < 3)
    anchor = jnp.where(
        jnp.asarray(slide)[:, None], x[jb] + mv(R[jb], tree.joint_pos[dof_joint]), x[jb]
    )
    moves = jnp.asarray(slide | free_move)[:, None]
    turn = jnp.concatenate([S[:, :3], jnp.zeros_like(S[:, 3:])], -1)
    shift = jnp.concatenate([cross(anchor, S[:, 3:]), S[:, 3:]], -1)
    return jnp.where(moves, shift, turn)


def constraint_wrenches(tree: KinematicTree, qpos, wrenches):
    """``wrenches`` (nb, 6) from :func:`transmitted_wrenches` less the joint-space forces'
    wrenches (the module docstring, ``along_joints=False``): per body,
    f - W (S^T W)^-1 S^T f over its dofs, one block-diagonal solve for the whole tree."""
    if tree.nv == 0:
        return wrenches
    p = poses(tree, qpos)
    W = _dof_wrenches(tree, p.x, p.R, p.S)
    dof_body = np.asarray(tree.dof_body, dtype=int)
    same = dof_body[:, None] == dof_body[None, :]
    K = jnp.where(jnp.asarray(same), row_products(p.S, W), 0.0)  # S_d . W_e on one body
    along = jnp.sum(p.S * wrenches[dof_body], -1)
    tau = jnp.linalg.solve(K, along)
    onto = np.zeros((tree.nb, tree.nv), dtype=bool)
    onto[dof_body, np.arange(tree.nv)] = True
    return wrenches - picked_sum(onto, W * tau[:, None])


def tree_joint_wrenches(model: Model, tree: KinematicTree, t, qpos, r, A, rdot, omega,
                        rddot, omegadot, lam, *, along_joints: bool = True,
                        loads=None):  # fmt: skip
    """:func:`transmitted_wrenches` along a trajectory (every argument but ``model`` and
    ``tree`` with a leading time axis; ``lam`` (T, nc) the multipliers, zero on the tree's
    rows): (T, nb, 6) world wrenches about the origin. ``along_joints=False``: the
    constraint reactions only (:func:`constraint_wrenches`). ``loads`` (T, nb, 6): further
    applied loads (f global, n_bar body frame) besides :func:`body_loads`' (a hard contact's
    mean forces)."""
    if loads is None:
        loads = jnp.zeros(r.shape[:2] + (6,), r.dtype)

    def one(t, qpos, r, A, rdot, omega, rddot, omegadot, lam, extra):
        f, n = body_loads(model, r, A, rdot, omega, t, lam)
        f, n = f + extra[:, :3], n + extra[:, 3:]
        out = transmitted_wrenches(tree, model.mass, model.inertia, r, A, omega, rddot,
                                   omegadot, f, n)  # fmt: skip
        return out if along_joints else constraint_wrenches(tree, qpos, out)

    return jax.vmap(one)(t, qpos, r, A, rdot, omega, rddot, omegadot, lam, loads)
