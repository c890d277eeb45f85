"""MJCF's equality constraints as constraint rows of the kinematic tree's state
(:class:`~jaxmbd.tree.constraint_rows.AbstractTreeConstraint`), with MuJoCo's definitions of
their rows (``mj_instantiateEquality``, ``engine_core_constraint.c``; MuJoCo XML reference,
``equality``):

* :class:`Connect`: the anchor on body 1 and its image on body 2 coincide (3 rows,
  p1 - p2 in the world);
* :class:`Weld`: p1 - p2 of the two anchors, and the axis part of the quaternion
  neg(q2) q1 q_rel times ``torquescale`` (6 rows);
* :class:`JointCoupling`: q1 - q1_ref = c0 + c1 x + c2 x^2 + c3 x^3 + c4 x^4 with
  x = q2 - q2_ref (``polycoef``; without joint 2: q1 - q1_ref = c0), on hinge and slide
  coordinates, the references MuJoCo's ``qpos0`` (1 row);
* :class:`TendonCoupling`: the same polynomial on two tendons' lengths (:mod:`jaxmbd.tendons`)
  relative to their lengths at ``qpos0`` (MuJoCo's ``tendon_length0``; 1 row).

Each is exact by default: the ``"joint"`` formulation holds its rows at zero
(:mod:`jaxmbd.joint_space.constraint_rows`). ``soft=True`` (:func:`with_equalities` with
``"soft"``) makes it MuJoCo's soft constraint with the file's ``solref`` and ``solimp``
(:class:`~jaxmbd.tree.constraint_rows.Softness`). ``active=False`` (the file's
``active="false"``) keeps it in the model without rows.
"""

from __future__ import annotations

import abc
import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..model import Model
from ..tendons import Tendons, lengths_and_jacobians
from ..tree.constraint_rows import AbstractTreeConstraint, Softness
from ..tree.kinematics import TreePoses
from ..tree.topology import KinematicTree

#: The ``equality=`` options of a run (:func:`with_equalities`).
EQUALITY_OPTIONS = ("exact", "soft", "none")


def _frame(p: TreePoses, body: int):
    """(origin, rotation) of tree body ``body`` in the world (-1: the world itself)."""
    if body < 0:
        return jnp.zeros(3, p.x.dtype), jnp.eye(3, dtype=p.x.dtype)
    return p.x[body], p.R[body]


def _anchor_gap(p: TreePoses, equality):
    """(p1 - p2, R1, R2) of a connect or weld: its anchors' gap p_k = x_k + R_k anchor_k
    and its bodies' rotations."""
    x1, R1 = _frame(p, equality.body1)
    x2, R2 = _frame(p, equality.body2)
    return x1 + R1 @ equality.anchor1 - x2 - R2 @ equality.anchor2, R1, R2


def rotation_error(E):
    """The axis part v of the unit quaternion (w >= 0) of the rotation matrix ``E``:
    E - E^T = 4 w [v]x and w = sqrt(1 + tr E) / 2 (exact for rotations below a half
    turn; a row's sign does not change a constraint's dynamics)."""
    w = 0.5 * jnp.sqrt(jnp.maximum(1.0 + jnp.trace(E), 1e-300))
    skew = E - E.T
    return jnp.stack([skew[2, 1], skew[0, 2], skew[1, 0]]) / (4.0 * w)


class AbstractEquality(AbstractTreeConstraint):
    """An MJCF equality constraint: its ``name``, ``active`` (static: an inactive one has
    no rows in a run), MuJoCo's ``parameters`` (solref, solimp and the diagonal
    approximation, :class:`~jaxmbd.tree.constraint_rows.Softness`) and whether they act
    (``soft``; False: exact rows)."""

    name: eqx.AbstractVar[str]
    parameters: eqx.AbstractVar[Softness]
    active: eqx.AbstractVar[bool]
    soft: eqx.AbstractVar[bool]

    @property
    def softness(self) -> Softness | None:
        return self.parameters if self.soft else None

    @property
    @abc.abstractmethod
    def kind(self) -> str:
        """MuJoCo's element name (``connect``, ``weld``, ``joint``, ``tendon``)."""


class Connect(AbstractEquality):
    """p1 - p2 = 0 with p_k = x_k + R_k anchor_k of tree bodies ``body1``, ``body2`` (-1:
    the world), the anchors in those bodies' frames (MuJoCo's ``anchor`` on body 1 and its
    position on body 2 at ``qpos0``; a site's position for ``site1``/``site2``)."""

    name: str = eqx.field(static=True)
    body1: int = eqx.field(static=True)
    body2: int = eqx.field(static=True)
    anchor1: jax.Array
    anchor2: jax.Array
    parameters: Softness
    active: bool = eqx.field(static=True, default=True, kw_only=True)
    soft: bool = eqx.field(static=True, default=False, kw_only=True)

    @property
    def kind(self) -> str:
        return "connect"

    @property
    def size(self) -> int:
        return 3

    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        return _anchor_gap(p, self)[0]


class Weld(AbstractEquality):
    """The translation rows of :class:`Connect` and the rotation rows ``torquescale`` times
    the axis part of the quaternion of frame2^T R2^T R1 frame1: MuJoCo's
    neg(q2) q1 q_rel, with ``frame1`` body 1's rotation to the welded pose (``relpose``
    in the body's frame, or a site's frame) and ``frame2`` body 2's (identity, or a site's),
    in the tree bodies' frames."""

    name: str = eqx.field(static=True)
    body1: int = eqx.field(static=True)
    body2: int = eqx.field(static=True)
    anchor1: jax.Array
    anchor2: jax.Array
    frame1: jax.Array
    frame2: jax.Array
    torquescale: jax.Array
    parameters: Softness
    active: bool = eqx.field(static=True, default=True, kw_only=True)
    soft: bool = eqx.field(static=True, default=False, kw_only=True)

    @property
    def kind(self) -> str:
        return "weld"

    @property
    def size(self) -> int:
        return 6

    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        translation, R1, R2 = _anchor_gap(p, self)
        E = self.frame2.T @ R2.T @ R1 @ self.frame1
        return jnp.concatenate([translation, self.torquescale * rotation_error(E)])


def polynomial_coupling(coefficients, value1, value2):
    """MuJoCo's joint and tendon coupling row: value1 - c0 - (c1 x + ... + c4 x^4) with
    x = value2 (None: value1 - c0). Values are relative to their references."""
    if value2 is None:
        return value1 - coefficients[0]
    x = value2
    return (
        value1
        - coefficients[0]
        - x
        * (coefficients[1] + x * (coefficients[2] + x * (coefficients[3] + x * coefficients[4])))
    )


class JointCoupling(AbstractEquality):
    """q1 - ref1 = poly(q2 - ref2) on the hinge or slide coordinates at qpos addresses
    ``address1`` and ``address2`` (-1: no joint 2), ``polycoef`` (5,)."""

    name: str = eqx.field(static=True)
    address1: int = eqx.field(static=True)
    address2: int = eqx.field(static=True)
    ref1: jax.Array
    ref2: jax.Array
    polycoef: jax.Array
    parameters: Softness
    active: bool = eqx.field(static=True, default=True, kw_only=True)
    soft: bool = eqx.field(static=True, default=False, kw_only=True)

    @property
    def kind(self) -> str:
        return "joint"

    @property
    def size(self) -> int:
        return 1

    @property
    def reads_poses(self) -> bool:
        return False

    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        q2 = None if self.address2 < 0 else qpos[self.address2] - self.ref2
        return polynomial_coupling(self.polycoef, qpos[self.address1] - self.ref1, q2)[None]


class TendonCoupling(AbstractEquality):
    """L1 - length0_1 = poly(L2 - length0_2) on the lengths of ``tendons`` (one or two
    tendons of :mod:`jaxmbd.tendons`: tendon 1, then tendon 2 where there is one),
    ``polycoef`` (5,)."""

    name: str = eqx.field(static=True)
    tendons: Tendons
    length0: jax.Array  # (1,) or (2,)
    polycoef: jax.Array
    parameters: Softness
    active: bool = eqx.field(static=True, default=True, kw_only=True)
    soft: bool = eqx.field(static=True, default=False, kw_only=True)

    @property
    def kind(self) -> str:
        return "tendon"

    @property
    def size(self) -> int:
        return 1

    @property
    def reads_poses(self) -> bool:
        return self.tendons.reads_poses

    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        lengths = lengths_and_jacobians(self.tendons, tree, qpos, p)[0] - self.length0
        second = lengths[1] if self.tendons.nt > 1 else None
        return polynomial_coupling(self.polycoef, lengths[0], second)[None]


def active_equalities(model: Model) -> tuple[AbstractEquality, ...]:
    """The model's equality constraints that act in a run."""
    return tuple(e for e in model.equalities if e.active)


def equality_rows(model: Model) -> tuple[int, ...]:
    """The model's GCON rows of its equality constraints (connect and weld in the absolute
    formulations are GCON joints of the equality's name)."""
    names = {e.name for e in model.equalities}
    return tuple(k for k, joint in enumerate(model.constraint_joints) if joint in names)


def _without_equality_reasons(model: Model) -> tuple[str, ...]:
    names = {e.name for e in model.equalities}
    return tuple(
        reason
        for reason in model.joint_space_only
        if not any(reason.startswith(f"equality '{name}'") for name in names)
    )


def with_equalities(model: Model, equality: str | None, *, where: str = "simulate") -> Model:
    """``model`` as a run with ``equality`` sees its equality constraints: None or "exact"
    (the default): exact rows; "soft": MuJoCo's soft constraints with the file's
    ``solref``/``solimp`` (the ``"joint"`` formulation only); "none": switched off, as
    MuJoCo's ``<flag equality="disable"/>`` (their GCON rows and joints removed too, so
    the absolute formulations run without them)."""
    if equality is None:
        return model
    if equality not in EQUALITY_OPTIONS:
        raise ValueError(
            f"{where}: equality must be one of {list(EQUALITY_OPTIONS)}, got {equality!r}"
        )
    if not model.equalities:
        return model
    if equality == "none":
        rows = equality_rows(model)
        stripped = model.without_rows(rows) if rows else model
        names = {e.name for e in model.equalities}
        return dataclasses.replace(
            stripped,
            equalities=(),
            joints=tuple(d for d in stripped.joints if d.name not in names),
            joint_space_only=_without_equality_reasons(model),
        )
    soft = equality == "soft"
    return dataclasses.replace(
        model, equalities=tuple(dataclasses.replace(e, soft=soft) for e in model.equalities)
    )


def check_soft_equalities(model: Model, formulation: str):
    """Soft equalities run in the ``"joint"`` formulation only: a clear refusal elsewhere."""
    soft = [e.name for e in model.equalities if e.soft and e.active]
    if soft:
        raise ModelError(
            f"formulation {formulation!r}: the soft equality constraints {soft} (MuJoCo's "
            "solref/solimp) run in formulation='joint'; the absolute formulations hold "
            "connect and weld exactly (equality='exact')"
        )


__all__ = [
    "EQUALITY_OPTIONS",
    "AbstractEquality",
    "Connect",
    "JointCoupling",
    "TendonCoupling",
    "Weld",
    "active_equalities",
    "check_soft_equalities",
    "equality_rows",
    "polynomial_coupling",
    "rotation_error",
    "with_equalities",
]
