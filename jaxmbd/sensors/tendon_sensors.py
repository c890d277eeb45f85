"""Tendon sensors: MuJoCo's ``tendonpos`` and ``tendonvel`` (registered sensor kinds).

===================== ===== ===============================================================
kind                  dim   reading
===================== ===== ===============================================================
tendon_position       1     the tendon's length L (:mod:`jaxmbd.tendons`)
tendon_velocity       1     its velocity L_dot
===================== ===== ===============================================================

Read from the saved body states, as every sensor (:mod:`jaxmbd.sensors`): a spatial tendon
through its sites, a fixed tendon through its joints' coordinates (a fixed tendon over the
hinges of a composite joint, which only joint space has, cannot be read: a clear error).
Added with ``add_sensor(name, kind="tendon_position", tendon="...")``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..forces import BodyState
from ..tendons import lengths_and_gradients, velocities
from . import SensorKind, register_sensor_kind


class SensorTendon(eqx.Module):
    """A tendon sensor's mount ``params``: the tendon's name (one of ``model.tendons``)."""

    tendon: str = eqx.field(static=True)


def _along(model, mount, run):
    """(L (T,), L_dot (T,)) of the sensor's tendon at the run's states."""
    tendons = getattr(model, "tendons", None)
    name = mount.params.tendon
    if tendons is None or name not in tendons.names:
        raise ValueError(f"tendon sensor: model '{model.name}' has no tendon {name!r}")
    one = tendons.subset([tendons.index(name)])

    def at(r, A, rdot, omega):
        state = BodyState(r, A, rdot, omega)
        length, G = lengths_and_gradients(one, state)
        return length[0], velocities(G, state)[0]

    return jax.vmap(at)(run.r, run.A, run.rdot, run.omega)


def read_tendon_position(model, mount, run):
    """MuJoCo's ``tendonpos``: the tendon's length (T, 1)."""
    return _along(model, mount, run)[0][:, None]


def read_tendon_velocity(model, mount, run):
    """MuJoCo's ``tendonvel``: the tendon's velocity (T, 1)."""
    return jnp.reshape(_along(model, mount, run)[1], (-1, 1))


TENDON_SENSOR_KINDS = tuple(
    register_sensor_kind(SensorKind(name, "model", read, 1, params="tendon"))
    for name, read in (("tendon_position", read_tendon_position),
                       ("tendon_velocity", read_tendon_velocity))
)  # fmt: skip
