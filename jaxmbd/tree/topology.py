"""A kinematic tree in joint coordinates: bodies, their parents and the joints on each body.

Joints are MuJoCo's (``<joint type=...>``): hinge and slide (one coordinate each), ball
(a unit quaternion, 4 coordinates and 3 velocities, the angular velocity in the body's own
frame) and free (position and quaternion, 7 and 6: the body origin's world velocity, then
the body-frame angular velocity). A body carries any number of joints, applied in order
from its reference placement in the parent frame, as MuJoCo's ``mj_kinematics`` applies
them. ``qpos``/``qvel`` are MuJoCo's layout: joints in tree order, each joint's block at
its address.

The structure (parents, joint types and addresses) is static; every number is an array
leaf. Bodies are the model's bodies, in the model's order: ``body_pos``/``body_rot`` place
a body's frame in its parent's frame before its joints act, ``com`` is its centre of mass
in that frame (where the model's body frame sits, so ``r = x + R com``, ``A = R``).
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.host_arrays import device_array
from ..errors import ModelError


class JointType(enum.IntEnum):
    """MuJoCo's ``mjtJoint`` codes."""

    FREE = 0
    BALL = 1
    SLIDE = 2
    HINGE = 3

    @property
    def nq(self) -> int:
        return (7, 4, 1, 1)[self]

    @property
    def nv(self) -> int:
        return (6, 3, 1, 1)[self]


WORLD = -1

#: The values of :attr:`KinematicTree.mass_solver`.
MASS_SOLVERS = ("auto", "dense", "ltdl", "articulated")


class KinematicTree(eqx.Module):
    """Bodies ``0..nb-1`` with their ``parent`` (``WORLD`` = -1) and joints (see the
    module docstring). Array leaves: ``body_pos`` (nb, 3), ``body_rot`` (nb, 3, 3), ``com``
    (nb, 3), ``joint_pos`` (nj, 3) and ``joint_axis`` (nj, 3) in the body frame, ``qpos0``
    (nq,) the reference coordinates (hinge and slide turn by ``q - qpos0``), ``qpos_init``
    (nq,) and ``qvel_init`` (nv,) the initial state."""

    body_names: tuple[str, ...] = eqx.field(static=True)
    parent: tuple[int, ...] = eqx.field(static=True)
    joint_names: tuple[str, ...] = eqx.field(static=True)
    joint_type: tuple[int, ...] = eqx.field(static=True)
    joint_body: tuple[int, ...] = eqx.field(static=True)
    body_pos: jax.Array
    body_rot: jax.Array
    com: jax.Array
    joint_pos: jax.Array
    joint_axis: jax.Array
    qpos0: jax.Array
    qpos_init: jax.Array
    qvel_init: jax.Array
    #: The model joints (``Model.constraint_joints`` names) that close loops: their rows
    #: stay as exact constraints between the tree's bodies (MJCF's equality constraints
    #: are ``Model.equalities`` instead).
    closing_joints: tuple[str, ...] = eqx.field(static=True, default=())
    #: How solves with the mass matrix factor it (:mod:`jaxmbd.tree.mass_factor`):
    #: ``"dense"`` Cholesky, ``"ltdl"`` the tree-sparse L^T D L, ``"auto"`` by the size;
    #: ``"articulated"``: forward dynamics by the articulated-body algorithm
    #: (:mod:`jaxmbd.tree.articulated`) and level scans (:mod:`jaxmbd.tree.sweeps`) at any
    #: depth, other solves as ``"auto"`` (which takes it for deep trees).
    mass_solver: str = eqx.field(static=True, default="auto")

    def __check_init__(self):
        if self.mass_solver not in MASS_SOLVERS:
            raise ModelError(
                f"kinematic tree: mass_solver={self.mass_solver!r}; expected one of {MASS_SOLVERS}"
            )
        nb = len(self.body_names)
        for b, p in enumerate(self.parent):
            if not WORLD <= p < nb or p == b:
                raise ModelError(f"kinematic tree: body '{self.body_names[b]}' has parent {p}")
        depth = self.depth  # raises on a cycle
        del depth
        seen = set()
        for j, b in enumerate(self.joint_body):
            if b < 0 or b >= nb:
                raise ModelError(f"kinematic tree: joint '{self.joint_names[j]}' on body {b}")
            if b in seen and self.joint_body[j - 1] != b:
                raise ModelError(
                    f"kinematic tree: the joints of body '{self.body_names[b]}' are not consecutive"
                )
            seen.add(b)
            if self.joint_type[j] == JointType.FREE:
                if self.parent[b] != WORLD or self.body_joints[b] != (j,):
                    raise ModelError(
                        f"kinematic tree: free joint '{self.joint_names[j]}' must be the only "
                        f"joint of a body whose parent is the world (body "
                        f"'{self.body_names[b]}')"
                    )

    # -- sizes and addresses (static, computed at trace time) -------------------------------
    @property
    def nb(self) -> int:
        return len(self.body_names)

    @property
    def nj(self) -> int:
        return len(self.joint_names)

    @property
    def joint_qpos_adr(self) -> tuple[int, ...]:
        return tuple(np.cumsum([0] + [JointType(t).nq for t in self.joint_type])[:-1].tolist())

    @property
    def joint_dof_adr(self) -> tuple[int, ...]:
        return tuple(np.cumsum([0] + [JointType(t).nv for t in self.joint_type])[:-1].tolist())

    @property
    def nq(self) -> int:
        return int(sum(JointType(t).nq for t in self.joint_type))

    @property
    def nv(self) -> int:
        return int(sum(JointType(t).nv for t in self.joint_type))

    @property
    def body_joints(self) -> tuple[tuple[int, ...], ...]:
        out = [[] for _ in range(self.nb)]
        for j, b in enumerate(self.joint_body):
            out[b].append(j)
        return tuple(tuple(js) for js in out)

    @property
    def dof_joint(self) -> tuple[int, ...]:
        return tuple(j for j, t in enumerate(self.joint_type) for _ in range(JointType(t).nv))

    @property
    def dof_body(self) -> tuple[int, ...]:
        return tuple(self.joint_body[j] for j in self.dof_joint)

    @property
    def depth(self) -> tuple[int, ...]:
        """Each body's depth (1 for a child of the world)."""
        out = [0] * self.nb
        for b in range(self.nb):
            d, p, steps = 1, self.parent[b], 0
            while p != WORLD:
                d, p, steps = d + 1, self.parent[p], steps + 1
                if steps > self.nb:
                    raise ModelError(
                        f"kinematic tree: the parents of body '{self.body_names[b]}' form a cycle"
                    )
            out[b] = d
        return tuple(out)

    @property
    def levels(self) -> tuple[tuple[int, ...], ...]:
        """The bodies at each depth, depth 1 first: every body's parent is in an earlier
        level, so one vectorised pass per level walks the tree (MJX's scan order)."""
        depth = self.depth
        top = max(depth, default=0)
        return tuple(tuple(b for b in range(self.nb) if depth[b] == d) for d in range(1, top + 1))

    def ancestors(self) -> np.ndarray:
        """(nb, nb) bool: ``[b, a]`` when a is b or one of its ancestors."""
        out = np.eye(self.nb, dtype=bool)
        for b in range(self.nb):
            p = self.parent[b]
            while p != WORLD:
                out[b, p] = True
                p = self.parent[p]
        return out

    def joint_index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(
                f"kinematic tree: no joint '{name}'; joints: {list(self.joint_names)}"
            ) from None


def tree_arrays(**arrays) -> dict[str, jax.Array]:
    """The leaves of a :class:`KinematicTree` as float64 arrays."""
    return {k: device_array(v, np.float64) for k, v in arrays.items()}
