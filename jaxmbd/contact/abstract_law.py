"""What the contact element asks of a contact law, and the laws' registry for model files.

A law gives the normal force of every contact slot from its penetration delta (= -gap) and
approach rate delta_dot and the pair's numbers (:class:`PairParameters`, one row per slot),
the elastic energy it stores, and the friction force and torque (:func:`friction_wrench`);
the contact element (:class:`~jaxmbd.contact.ContactForce`) does the geometry and applies
the forces. A law is an ``eqx.Module``, a field of the contact element: its own array
fields are leaves that ``jax.grad`` reaches. Laws: :class:`~jaxmbd.contact.law.HuntCrossley`
(the default) and :class:`~jaxmbd.contact.linear_law.LinearSpringDamper`; a new one is one
class, registered for model files with :func:`register_contact_law`.
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
    :meth:`~jaxmbd.ModelBuilder.add_contact`, the slot's effective mass ``m_eff`` and
    ``gravity``, the part of the slot's penetration acceleration due to gravity (m/s^2)."""

    stiffness: jax.Array
    restitution: jax.Array
    damping: jax.Array
    exponent: jax.Array
    friction: jax.Array
    slip_velocity: jax.Array
    m_eff: jax.Array
    torsional_friction: jax.Array | float = 0.0
    rolling_friction: jax.Array | float = 0.0
    # the acceleration gravity gives the pair's penetration (>= 0 where it pushes in)
    gravity: jax.Array | float = 0.0


def friction_force(slip, normal, *, friction, slip_velocity=SLIP_VELOCITY):
    """Regularised Coulomb friction -mu F_n v_t / sqrt(|v_t|^2 + v_s^2) (..., 3) opposing
    the slip velocity ``slip`` (..., 3, in the tangent plane); smooth at zero slip
    (:mod:`jaxmbd.contact.law` says what the regularisation costs)."""
    speed2 = jnp.sum(slip * slip, axis=-1)
    scale = friction * normal / jnp.sqrt(speed2 + jnp.asarray(slip_velocity) ** 2)
    return -scale[..., None] * slip


#: The sliding coefficient below which :func:`friction_wrench` scales the torsional and
#: rolling slips as if it were this (MuJoCo's mjMINMU; a frictionless pair with torsional
#: friction has a finite regularisation).
MIN_FRICTION = 1e-5


def friction_wrench(slip, spin, roll, normal, *, friction, torsional, rolling,
                    slip_velocity=SLIP_VELOCITY):  # fmt: skip
    """Regularised Coulomb friction with torsional and rolling friction: (force (..., 3),
    torque (..., 3)) on body_i.

    ``slip`` (..., 3): the slip velocity in the tangent plane; ``spin`` (..., 3): the
    relative angular velocity along the normal; ``roll`` (..., 3): its part in the tangent
    plane; ``normal``: the normal force F_n; ``friction`` mu, ``torsional`` mu_t (m) and
    ``rolling`` mu_r (m): MuJoCo's ``friction`` = (mu, mu_t, mu_r) of a condim 6 contact.
    The friction vector (F_t, T_n, T_r) lies in the elliptic cone |F_t / mu|^2 +
    |T_n / mu_t|^2 + |T_r / mu_r|^2 <= F_n^2 (MuJoCo's elliptic cone, documentation
    "Computation", section Contact) and opposes the slips by the maximal dissipation
    principle, regularised by ``slip_velocity`` v_s as the sliding friction alone is:

        S = sqrt(|v_t|^2 + (k_t w_n)^2 + (k_r |w_r|)^2 + v_s^2),  k = mu_t / mu, mu_r / mu,
        F_t = -mu F_n v_t / S,  T_n = -mu_t k_t F_n w_n / S,  T_r = -mu_r k_r F_n w_r / S.

    With mu_t = mu_r = 0 this is :func:`friction_force`. Spin alone: T_n = -mu_t F_n w_n /
    sqrt(w_n^2 + w_s^2) with the angular regularisation w_s = v_s mu / mu_t, so a
    friction direction's creep under a given load scales with mu / mu_j, as MuJoCo's
    regularisers R_j mu_j^2 = R_1 mu^2 make it (engine_core_constraint.c,
    mj_makeImpedance). MuJoCo's default pyramidal cone differs only where several
    directions slip at once (its cone is the polytope sum_j |f_j| / mu_j <= F_n)."""
    mu = jnp.maximum(friction, MIN_FRICTION)
    k_t, k_r = torsional / mu, rolling / mu
    total = (
        jnp.sum(slip * slip, axis=-1)
        + k_t**2 * jnp.sum(spin * spin, axis=-1)
        + k_r**2 * jnp.sum(roll * roll, axis=-1)
        + jnp.asarray(slip_velocity) ** 2
    )
    scale = normal / jnp.sqrt(total)
    force = -(friction * scale)[..., None] * slip
    torque = (
        -(torsional * k_t * scale)[..., None] * spin - (rolling * k_r * scale)[..., None] * roll
    )
    return force, torque


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

    def friction_wrench(self, slip, spin, roll, normal, pair: PairParameters):
        """The friction force and torque ((..., 3) each, on body_i) for the slip velocity
        ``slip``, the relative angular velocity's normal part ``spin`` and tangential part
        ``roll``: :func:`friction_wrench` with the pair's torsional and rolling friction."""
        return friction_wrench(
            slip, spin, roll, normal, friction=pair.friction, torsional=pair.torsional_friction,
            rolling=pair.rolling_friction, slip_velocity=pair.slip_velocity,
        )  # fmt: skip

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
