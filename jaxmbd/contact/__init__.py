"""Contact: collision geometry, narrow phase and the compliant contact law.

- :mod:`jaxmbd.contact.narrow_phase`: the slots (gap, point, normal) of each supported pair
  of shapes, pure JAX functions with a fixed number of slots per pair kind.
- :mod:`jaxmbd.contact.height_field`: a height field against convex shapes, MuJoCo's prisms
  under a window of cells that follows each shape (:class:`HeightFieldGroup`).
- :mod:`jaxmbd.contact.abstract_law`: :class:`AbstractContactLaw`, what a contact law gives
  (normal force, elastic energy, friction), and the laws' registry for model files.
- :mod:`jaxmbd.contact.law`: :class:`HuntCrossley` (the default), Hunt–Crossley normal force
  with a restitution-calibrated damping, regularised isotropic Coulomb friction, with
  torsional and rolling friction (:func:`friction_wrench`).
- :mod:`jaxmbd.contact.linear_law`: :class:`LinearSpringDamper`, k delta + c delta_dot.
- :mod:`jaxmbd.contact.element`: :class:`ContactForce`, the force element that evaluates
  every pair of a model (``model.contacts``), and the ``contact=`` option of
  :func:`~jaxmbd.simulate`.
- :mod:`jaxmbd.contact.build`: pairs as model data (default stiffness, the all-pairs rule).

Pairs are added with :meth:`~jaxmbd.ModelBuilder.add_contact` /
:meth:`~jaxmbd.ModelBuilder.add_contacts`, the ground's geometry with
:meth:`~jaxmbd.ModelBuilder.add_ground_plane` and
:meth:`~jaxmbd.ModelBuilder.add_ground_shape`.
"""

from .abstract_law import (
    CONTACT_LAWS,
    MIN_FRICTION,
    AbstractContactLaw,
    PairParameters,
    friction_wrench,
    law_from_json,
    register_contact_law,
)
from .build import STATIC_PENETRATION
from .element import (
    CONTACT_OPTIONS,
    CollisionGroup,
    ContactForce,
    ContactSlots,
    contact_element,
    slot_history,
    with_contact,
)
from .height_field import HeightFieldGroup
from .law import (
    E_MIN,
    HERTZ_EXPONENT,
    SLIP_VELOCITY,
    HuntCrossley,
    calibrate_restitution,
    damping_factor,
    elastic_energy,
    friction_force,
    normal_force,
    restitution_of,
)
from .linear_law import LinearSpringDamper
from .narrow_phase import COLLIDE, COLLIDING_KINDS, SLOTS, Slots, pair_kind

__all__ = [
    "CONTACT_LAWS",
    "AbstractContactLaw",
    "HuntCrossley",
    "LinearSpringDamper",
    "PairParameters",
    "law_from_json",
    "register_contact_law",
    "COLLIDE",
    "COLLIDING_KINDS",
    "CONTACT_OPTIONS",
    "MIN_FRICTION",
    "E_MIN",
    "HERTZ_EXPONENT",
    "SLIP_VELOCITY",
    "SLOTS",
    "STATIC_PENETRATION",
    "CollisionGroup",
    "HeightFieldGroup",
    "ContactForce",
    "ContactSlots",
    "Slots",
    "calibrate_restitution",
    "contact_element",
    "damping_factor",
    "elastic_energy",
    "friction_force",
    "friction_wrench",
    "normal_force",
    "pair_kind",
    "restitution_of",
    "slot_history",
    "with_contact",
]
