"""What the builder records before :meth:`~jaxmbd.ModelBuilder.build`: bodies, GCONs and
joints by name."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..compiled.host_arrays import device_array
from ..geometry import Shape
from ..model.drivers import Expression
from ..model.joints import JointDefinition


@dataclass
class _BodySpec:
    name: str
    mass: float
    inertia: np.ndarray
    r: np.ndarray
    A: np.ndarray
    rdot: np.ndarray
    omega: np.ndarray
    shapes: tuple[Shape, ...] = ()


@dataclass
class _GconSpec:
    name: str
    kind: str
    body_i: str
    body_j: str
    vectors: dict[str, np.ndarray]
    f: Expression | float
    joint: str


@dataclass
class _JointSpec:
    """A joint's frames in its bodies' frames (they coincide where drawn) and convention."""

    name: str
    kind: str
    body_i: str
    body_j: str
    s_bar_i: np.ndarray
    s_bar_j: np.ndarray
    frame_i: np.ndarray
    frame_j: np.ndarray
    offset: np.ndarray
    sign: tuple[int, ...]
    q_start: np.ndarray
    #: A coordinate that only joint space has (a hinge or slide inside a composition of
    #: MuJoCo joints that forms one library joint): not one of ``model.joints``; the joint
    #: forces on it are left to the ``"joint"`` formulation
    #: (:attr:`jaxmbd.forces._joint.AbstractJointForce.absolute_entries`).
    joint_space: bool = False

    def definition(self, index: dict[str, int]) -> JointDefinition:
        return JointDefinition(
            name=self.name,
            kind=self.kind,
            body_i=index[self.body_i],
            body_j=index[self.body_j],
            s_bar_i=device_array(self.s_bar_i),
            s_bar_j=device_array(self.s_bar_j),
            frame_i=device_array(self.frame_i),
            frame_j=device_array(self.frame_j),
            offset=device_array(np.asarray(self.offset, dtype=np.float64).reshape(-1)),
            q_start=device_array(np.asarray(self.q_start, dtype=np.float64).reshape(-1)),
            sign=self.sign,
        )


def absolute_entries(joints, space) -> tuple[bool, ...] | None:
    """The ``absolute_entries`` of a joint-force element on ``joints``: False for those
    named in ``space`` (coordinates only joint space has, :attr:`_JointSpec.joint_space`);
    None where none is."""
    if not any(d.name in space for d in joints):
        return None
    return tuple(d.name not in space for d in joints)
