"""Actuator kinds: one record each, with its options and its gain and bias (the table of
:mod:`jaxmbd.actuators`: force = gain * u + b0 + b1 q + b2 qdot)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ActuatorKind:
    """One actuator kind.

    ``options``: the keyword options of :meth:`~jaxmbd.ModelBuilder.add_actuator` it takes
    (and the model file's keys), ``required`` those it needs. ``gains(kp=, kv=, gain=,
    bias=)``: its (gain, (b0, b1, b2)). ``to_options(gain, bias)``: the options that give
    them back (what a model file stores)."""

    name: str
    options: tuple[str, ...]
    required: tuple[str, ...]
    gains: Callable
    to_options: Callable


MOTOR = ActuatorKind(
    "motor", (), (),
    lambda *, kp, kv, gain, bias: (1.0, (0.0, 0.0, 0.0)),
    lambda gain, bias: {},
)  # fmt: skip
POSITION = ActuatorKind(
    "position", ("kp", "kv"), ("kp",),
    lambda *, kp, kv, gain, bias: (kp, (0.0, -kp, -kv)),
    lambda gain, bias: {"kp": gain, **({"kv": -bias[2]} if bias[2] else {})},
)  # fmt: skip
VELOCITY = ActuatorKind(
    "velocity", ("kv",), ("kv",),
    lambda *, kp, kv, gain, bias: (kv, (0.0, 0.0, -kv)),
    lambda gain, bias: {"kv": gain},
)  # fmt: skip
GENERAL = ActuatorKind(
    "general", ("gain", "bias"), ("gain",),
    lambda *, kp, kv, gain, bias: (gain, tuple(bias)),
    lambda gain, bias: {"gain": gain, "bias": bias},
)  # fmt: skip

#: The actuator kinds by name (the strings of ``add_actuator(kind=)`` and model files).
ACTUATOR_KINDS_BY_NAME: dict[str, ActuatorKind] = {
    k.name: k for k in (MOTOR, POSITION, VELOCITY, GENERAL)
}
#: Their names, in order.
ACTUATOR_KIND_NAMES = tuple(ACTUATOR_KINDS_BY_NAME)


def actuator_kind(name: str) -> ActuatorKind:
    """The record of the actuator kind ``name``."""
    try:
        return ACTUATOR_KINDS_BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown actuator kind {name!r}; known: {list(ACTUATOR_KIND_NAMES)}"
        ) from None
