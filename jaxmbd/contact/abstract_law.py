"""What the contact element asks of a contact law, and the laws' registry for model files.

A law gives the normal force of every contact slot from its penetration delta (= -gap) and
approach rate delta_dot and the pair's numbers (:class:`PairParameters`, one row per slot),
the elastic energy it stores, and the friction force; the contact element
(:class:`~jaxmbd.contact.ContactForce`) does the geometry and applies the forces. A law is
an ``eqx.Module``, a field of the contact element: its own array fields are leaves that
``jax.grad`` reaches. Laws: :class:`~jaxmbd.contact.law.HuntCrossley` (the default) and
:class:`~jaxmbd.contact.linear_law.LinearSpringDamper`; a new one is one class, registered
for model files with :func:`register_contact_law`.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401

#: Default regularisation velocity of Coulomb friction (m/s).
SLIP_VELOCITY = 1e-4


class PairParameters(NamedTuple):
    """The numbers of each slot's contact pair (arrays, one entry per slot): the options of
    :meth:`~jaxmbd.ModelBuilder.add_contact` and the pair's reduced mass ``m_eff``."""

    stiffness: jax.Array
    restitution: jax.Array
    damping: jax.Array
    exponent: jax.Array
    friction: jax.Array
    slip_velocity: jax.Array
    m_eff: jax.Array


def friction_force(slip, normal, *, friction, slip_velocity=SLIP_VELOCITY):
    """Regularised Coulomb friction -mu F_n v_t / sqrt(|v_t|^2 + v_s^2) (..., 3) opposing
    the slip velocity ``slip`` (..., 3, in the tangent plane); smooth at zero slip
    (:mod:`jaxmbd.contact.law` says what the regularisation costs)."""
    speed2 = jnp.sum(slip * slip, axis=-1)
    scale = friction * normal / jnp.sqrt(speed2 + jnp.asarray(slip_velocity) ** 2)
    return -scale[..., None] * slip


class AbstractContactLaw(eqx.Module):
    """A compliant contact law (see the module docstring)."""

    #: The ``"type"`` of the law in model files (set by :func:`register_contact_law`).
    file_type: ClassVar[str | None] = None

    @abc.abstractmethod
    def normal_force(self, delta, delta_dot, pair: PairParameters) -> jax.Array:
        """The normal force (>= 0) of each slot: zero where ``delta`` <= 0 (no contact)."""

    @abc.abstractmethod
    def elastic_energy(self, delta, pair: PairParameters) -> jax.Array:
        """The energy stored in each slot at penetration ``delta`` (0 where delta <= 0)."""

    def friction_force(self, slip, normal, pair: PairParameters) -> jax.Array:
        """The friction force (..., 3) on body_i for the slip velocity ``slip`` and the normal
        force ``normal``: regularised Coulomb friction (:func:`friction_force`)."""
        return friction_force(
            slip, normal, friction=pair.friction, slip_velocity=pair.slip_velocity
        )

    def default_stiffness(self, weight: float, penetration: float, exponent: float) -> float:
        """The stiffness with which the load ``weight`` (N) penetrates ``penetration`` (m):
        ``add_contact``'s default (:mod:`jaxmbd.contact.build`), K = weight / delta^n."""
        return weight / penetration**exponent

    def to_json(self) -> dict:
        """The law in a model file: its ``"type"`` and its fields (numbers or lists)."""
        out = {"type": self.file_type}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = jnp.asarray(value).tolist() if not f.metadata.get("static") else value
        return out

    @classmethod
    def from_json(cls, fields: dict) -> AbstractContactLaw:
        """The law of a model file's entry (its fields, ``"type"`` removed)."""
        return cls(**{key: jnp.asarray(value) for key, value in fields.items()})


#: Contact law classes by the ``"type"`` of their model-file entries.
CONTACT_LAWS: dict[str, type[AbstractContactLaw]] = {}


def register_contact_law(name: str):
    """Class decorator: model files name the law ``{"type": name, ...}``."""

    def register(cls):
        if CONTACT_LAWS.get(name, cls) is not cls:
            raise ValueError(f"contact law {name!r} is already {CONTACT_LAWS[name].__name__}")
        CONTACT_LAWS[name] = cls
        cls.file_type = name
        return cls

    return register


def law_from_json(entry) -> AbstractContactLaw:
    """The law of a model file's ``"law"`` entry (``{"type": ..., fields}``); ValueError
    naming the known types for an unknown one."""
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise ValueError(f"expected an object with a 'type', got {entry!r}")
    fields = dict(entry)
    kind = fields.pop("type")
    if kind not in CONTACT_LAWS:
        raise ValueError(f"unknown contact law {kind!r}; known: {sorted(CONTACT_LAWS)}")
    try:
        return CONTACT_LAWS[kind].from_json(fields)
    except TypeError as err:
        raise ValueError(f"contact law {kind!r}: {err}") from None
