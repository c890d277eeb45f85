"""Contact: collision geometry, narrow phase and the compliant contact law.

- :mod:`jaxmbd.contact.narrow_phase`: the slots (gap, point, normal) of each supported pair
  of shapes, pure JAX functions with a fixed number of slots per pair kind.
- :mod:`jaxmbd.contact.law`: Hunt–Crossley normal force with a restitution-calibrated
  damping, regularised isotropic Coulomb friction.
- :mod:`jaxmbd.contact.element`: :class:`ContactForce`, the force element that evaluates
  every pair of a model (``model.contacts``), and the ``contact=`` option of
  :func:`~jaxmbd.simulate`.
- :mod:`jaxmbd.contact.build`: pairs as model data (default stiffness, the all-pairs rule).

Pairs are added with :meth:`~jaxmbd.ModelBuilder.add_contact` /
:meth:`~jaxmbd.ModelBuilder.add_contacts`, the ground's geometry with
:meth:`~jaxmbd.ModelBuilder.add_ground_plane` and
:meth:`~jaxmbd.ModelBuilder.add_ground_shape`.
"""

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
from .law import (
    E_MIN,
    HERTZ_EXPONENT,
    SLIP_VELOCITY,
    calibrate_restitution,
    damping_factor,
    elastic_energy,
    friction_force,
    normal_force,
    restitution_of,
)
from .narrow_phase import COLLIDE, COLLIDING_KINDS, SLOTS, Slots, pair_kind

__all__ = [
    "COLLIDE",
    "COLLIDING_KINDS",
    "CONTACT_OPTIONS",
    "E_MIN",
    "HERTZ_EXPONENT",
    "SLIP_VELOCITY",
    "SLOTS",
    "STATIC_PENETRATION",
    "CollisionGroup",
    "ContactForce",
    "ContactSlots",
    "Slots",
    "calibrate_restitution",
    "contact_element",
    "damping_factor",
    "elastic_energy",
    "friction_force",
    "normal_force",
    "pair_kind",
    "restitution_of",
    "slot_history",
    "with_contact",
]
