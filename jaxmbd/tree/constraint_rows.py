"""Constraint rows of a kinematic tree's state: Phi(qpos, t) = 0, one interface for the joints
that close loops and for MJCF's equality constraints.

An implementation says how many rows it has (``size``) and computes them from the tree's
poses (``residual``); their Jacobian, velocity and acceleration right-hand sides come from
autodiff (:mod:`jaxmbd.joint_space.constraint_rows`). Rows are exact by default. A
``softness`` (:class:`Softness`) makes them MuJoCo's soft constraints instead: the
multipliers of a regularised Schur complement with MuJoCo's reference acceleration."""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from .kinematics import TreePoses
from .topology import KinematicTree

#: MuJoCo's bounds on the impedance and its ``mjMINVAL`` (``engine_core_constraint.c``,
#: ``getsolparam`` and ``mj_makeImpedance``).
MIN_IMPEDANCE, MAX_IMPEDANCE, MIN_VALUE = 0.0001, 0.9999, 1e-15


class Softness(eqx.Module):
    """MuJoCo's soft-constraint parameters of one group of rows (one equality constraint):
    ``solref`` (timeconst, dampratio) or, both negative, (-stiffness, -damping);
    ``solimp`` (dmin, dmax, width, midpoint, power); ``diag_approx`` (size,), MuJoCo's
    approximation of the diagonal of J M^-1 J^T from the bodies', dofs' or tendons'
    ``invweight0`` (``mj_diagApprox``). ``refsafe``: raise timeconst to at least 2 h, as
    MuJoCo does unless ``<flag refsafe="disable"/>``. ``velocity_product``: the target
    acceleration of J qacc also carries the rows' velocity-product term gamma = -J_dot qvel
    (MuJoCo 4.0 does so for connect and weld rows, not for joint and tendon couplings;
    measured on ``efc_aref``).

    With pos the group's violation (its rows' norm, MuJoCo's ``getposdim``), the impedance
    d(pos) of ``getimpedance`` gives per row R = (1 - d) / d * diag_approx, and the
    reference acceleration is aref = -B (J qvel) - K d phi with K = 1 / (dmax^2 timeconst^2
    dampratio^2), B = 2 / (dmax timeconst) (``mj_makeImpedance``,
    ``mj_referenceConstraint``; MuJoCo documentation, Computation > Soft constraints)."""

    solref: jax.Array
    solimp: jax.Array
    diag_approx: jax.Array
    refsafe: bool = eqx.field(static=True, default=True)
    velocity_product: bool = eqx.field(static=True, default=False)

    def impedance(self, pos):
        """d(pos) of MuJoCo's ``getimpedance`` (solimp clamped as ``getsolparam``)."""
        dmin, dmax = (jnp.clip(self.solimp[k], MIN_IMPEDANCE, MAX_IMPEDANCE) for k in (0, 1))
        width = jnp.maximum(self.solimp[2], 0.0)
        mid = jnp.clip(self.solimp[3], MIN_IMPEDANCE, MAX_IMPEDANCE)
        power = jnp.maximum(self.solimp[4], 1.0)
        x = jnp.abs(pos) / jnp.where(width > MIN_VALUE, width, 1.0)
        xs = jnp.clip(x, 0.0, 1.0)
        low = xs**power / mid ** (power - 1.0)
        high = 1.0 - (1.0 - xs) ** power / (1.0 - mid) ** (power - 1.0)
        y = jnp.where(power == 1.0, xs, jnp.where(xs <= mid, low, high))
        d = dmin + y * (dmax - dmin)
        flat = (dmin == dmax) | (width <= MIN_VALUE)
        return jnp.where(flat, 0.5 * (dmin + dmax), d), dmax

    def terms(self, phi, velocity, h):
        """(R, aref) of the rows with values ``phi`` and rates ``velocity`` (J qvel) in a
        run of step ``h``."""
        pos = jnp.sqrt(jnp.sum(phi * phi))
        d, dmax = self.impedance(pos)
        R = jnp.maximum(MIN_VALUE, (1.0 - d) * self.diag_approx / d)
        ref0, ref1 = self.solref[0], self.solref[1]
        standard = ref0 > 0
        if self.refsafe:
            ref0 = jnp.where(standard, jnp.maximum(ref0, 2.0 * h), ref0)
        K = jnp.where(
            standard,
            1.0 / jnp.maximum(MIN_VALUE, dmax**2 * ref0**2 * ref1**2),
            -ref0 / jnp.maximum(MIN_VALUE, dmax**2),
        )
        B = jnp.where(ref1 > 0, 2.0 / jnp.maximum(MIN_VALUE, dmax * ref0), -ref1 / dmax)
        return R, -B * velocity - K * d * phi


class AbstractTreeConstraint(eqx.Module):
    """Rows Phi(qpos, t) = 0 of a kinematic tree's state (see the module docstring).
    ``softness``: None for exact rows, else MuJoCo's soft constraint (:class:`Softness`)."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """The number of rows (static)."""

    @property
    def softness(self) -> Softness | None:
        return None

    @property
    def gcon_rows(self) -> tuple[int, ...]:
        """The model's GCON rows these rows are (their indices in the model, in order), or
        () for rows of another kind (equalities)."""
        return ()

    @property
    def reads_poses(self) -> bool:
        """Whether :meth:`residual` reads the tree's poses (static); rows of the joint
        coordinates alone say False, and a run then differentiates no forward kinematics
        for them."""
        return True

    @abc.abstractmethod
    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        """Phi (size,) at ``qpos`` (whose poses are ``p``; None where no part of the run
        :attr:`reads_poses`) and time ``t``."""


__all__ = ["AbstractTreeConstraint", "Softness"]
