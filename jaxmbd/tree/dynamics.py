"""Joint-space dynamics of a kinematic tree: the mass matrix by the composite rigid body
algorithm and the bias forces by recursive Newton-Euler (Featherstone 2008, sections 6.2
and 5.3), in the one-frame spatial algebra of :mod:`jaxmbd.tree.kinematics`.

Both recursions are sums over subtrees (composite inertias, the forces transmitted by a
joint) and over chains of ancestors (velocities, bias accelerations): with all spatial
quantities in one frame each sum is a product with a constant 0/1 ancestor matrix, so the
whole tree is a handful of dense products, with no loop over bodies or levels.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.small import _sum_along
from ._elementwise import cross, halves, mm, mtv, mv, pick, picked_sum, row_products
from .kinematics import TreePoses, cross_force, dof_ancestor_sum, velocities
from .sweeps import scanned, subtree_sum
from .topology import KinematicTree


def world_inertias(poses: TreePoses, mass, inertia):
    """Rotational inertias about the centres of mass in world axes, R J R^T (nb, 3, 3),
    from the body-frame inertias ``inertia`` (nb, 3, 3)."""
    return mm(mm(poses.R, inertia), jnp.swapaxes(poses.R, -1, -2))


def spatial_inertia(c, mass, Ic):
    """The 6x6 spatial inertias at the origin (Featherstone eq. 2.63 moved to the origin):
    [[Ic - m c~ c~, m c~], [-m c~, m 1]] for centres of mass c (nb, 3)."""
    m = mass[:, None, None]
    cx = _hat(c)
    top = jnp.concatenate([Ic - m * mm(cx, cx), m * cx], -1)
    bottom = jnp.concatenate([-m * cx, m * jnp.eye(3, dtype=c.dtype)], -1)
    return jnp.concatenate([top, bottom], -2)


def _hat(v):
    # the components by one split (reverse mode: one concatenation, not a pad per slice)
    x, y, w = (c[..., 0] for c in jnp.split(v, 3, axis=-1))
    z = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([z, -w, y], -1), jnp.stack([w, z, -x], -1), jnp.stack([-y, x, z], -1)], -2
    )


def inertia_times(c, mass, Ic, V):
    """I V (nb, 6) without forming I: momentum (Ic w + c x p, p), p = m (v + w x c)."""
    w, v = halves(V)
    p = mass[:, None] * (v + cross(w, c))
    return jnp.concatenate([mv(Ic, w) + cross(c, p), p], -1)


def mass_matrix(tree: KinematicTree, poses: TreePoses, mass, inertia, armature=None):
    """The joint-space mass matrix M (nv, nv), composite rigid body algorithm
    (Featherstone Table 6.2): composite inertias Ic_b = sum of the subtree's inertias,
    F_j = Ic_body(j) S_j and M_ij = S_i . F_j where body(i) is body(j) or one of its
    ancestors. ``armature`` (nv,) is added to the diagonal (MuJoCo's ``dof_armature``)."""
    Ic = world_inertias(poses, mass, inertia)
    spatial = spatial_inertia(poses.c, mass, Ic)
    anc = tree.ancestors()  # [b, a]: a is b or an ancestor of b
    composite = body_subtree_sum(tree, spatial)  # [a] = sum over the subtree of a
    dof_body = np.asarray(tree.dof_body, dtype=int)
    F = mv(pick(composite, dof_body), poses.S)
    P = row_products(poses.S, F)  # P[i, j] = S_i . F_j
    above = anc[dof_body][:, dof_body]  # [i, j]: body(j) is body(i) or its ancestor
    M = jnp.where(above.T, P, jnp.where(above, P.T, 0.0))
    if armature is not None:
        M = M + armature[:, None] * jnp.eye(tree.nv, dtype=M.dtype)
    return M


def bias_forces(tree: KinematicTree, poses: TreePoses, mass, inertia, gravity, qvel,
                wrenches=None):  # fmt: skip
    """C(q, qdot) - tau_ext (nv,) by recursive Newton-Euler at zero joint accelerations
    (Featherstone Table 5.1): body bias accelerations a_b = -g + sum of S_dot qdot over
    the chain, body forces f_b = I a_b + v_b x* I v_b - w_b, tau_i = S_i . (sum of f over
    the subtree of body(i)). Gravity enters as the acceleration -g of the base (eq. 5.20).
    ``wrenches`` (nb, 6): applied world wrenches (n_O, f) at the origin, or None.
    Equals MuJoCo's ``qfrc_bias`` (``mj_rne`` with zero acceleration) without wrenches."""
    V, S_dot = velocities(tree, poses.S, qvel)
    base = jnp.concatenate([jnp.zeros(3, qvel.dtype), -gravity])
    A = base[None, :] + dof_ancestor_sum(tree, S_dot * qvel[:, None])
    Ic = world_inertias(poses, mass, inertia)
    f = inertia_times(poses.c, mass, Ic, A) + cross_force(V, inertia_times(poses.c, mass, Ic, V))
    if wrenches is not None:
        f = f - wrenches
    return joint_forces(tree, poses, f)


def joint_forces(tree: KinematicTree, poses: TreePoses, body_forces):
    """tau_i = S_i . (sum of ``body_forces`` (nb, 6) over the subtree of body(i)): the
    generalised forces of world wrenches, J^T w (Featherstone eq. 5.14)."""
    subtree = body_subtree_sum(tree, body_forces)  # [a]: the subtree of a
    dof_body = np.asarray(tree.dof_body, dtype=int)
    return _sum_along(poses.S * pick(subtree, dof_body), -1)


def body_subtree_sum(tree: KinematicTree, values):
    """sum over the subtree of each body (it and its descendants) of ``values`` (nb, ...)."""
    if scanned(tree):
        return subtree_sum(tree, values)
    return picked_sum(tree.ancestors().T, values)


def body_velocities(tree: KinematicTree, poses: TreePoses, qvel):
    """(centre-of-mass velocities (nb, 3), body-frame angular velocities (nb, 3))."""
    V, _ = velocities(tree, poses.S, qvel)
    w, v = halves(V)
    return v + cross(w, poses.c), mtv(poses.R, w)


def body_wrenches(poses: TreePoses, f, n_bar):
    """World wrenches (n_O, f) (nb, 6) at the origin of forces f (nb, 3) at the centres of
    mass and body-frame torques n_bar (nb, 3)."""
    n = mv(poses.R, n_bar) + cross(poses.c, f)
    return jnp.concatenate([n, f], -1)
