"""MuJoCo's ``<option><flag name="disable"/></option>`` as the importer honours them.

MuJoCo's meaning (XML reference, ``option/flag``; ``mjtDisableBit``): ``constraint``
switches off every constraint (contacts, joint limits, equalities, friction loss);
``contact``, ``limit``, ``equality`` and ``frictionloss`` one kind each; ``actuation``
zeroes the actuator forces (``mj_fwdActuation``); ``gravity`` the gravity; ``spring`` and
``damper`` the joints' stiffness and damping (``mj_passive``; with both off every passive
force is skipped, fluid forces included); ``clampctrl`` the clamping of the controls to
``ctrlrange``. The importer leaves out what a flag switches off (no contact pairs, limits
or equality loops; zero stiffness, damping and friction loss, :mod:`jaxmbd.mjcf._joints`;
zero gravity) and keeps the actuators with zero force, so that a model's controls keep
their layout.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

#: Each switch and the MuJoCo disable bits (``mjDSBL_<NAME>``) any one of which turns it off.
SWITCHES = {
    "contact": ("CONTACT", "CONSTRAINT"),
    "limit": ("LIMIT", "CONSTRAINT"),
    "equality": ("EQUALITY", "CONSTRAINT"),
    "frictionloss": ("FRICTIONLOSS", "CONSTRAINT"),
    "actuation": ("ACTUATION",),
    "gravity": ("GRAVITY",),
    "spring": ("SPRING",),
    "damper": ("DAMPER",),
    "clampctrl": ("CLAMPCTRL",),
}


def switched_off(m, switch: str) -> bool:
    """Whether the compiled MuJoCo model ``m`` has ``switch`` (a key of :data:`SWITCHES`)
    disabled by its flags."""
    import mujoco

    bits = mujoco.mjtDisableBit
    mask = 0
    for name in SWITCHES[switch]:
        mask |= int(getattr(bits, f"mjDSBL_{name}"))
    return bool(int(m.opt.disableflags) & mask)


def passive_forces_off(m) -> bool:
    """Both ``spring`` and ``damper`` disabled: MuJoCo skips every passive force (fluid
    forces and gravity compensation too)."""
    return switched_off(m, "spring") and switched_off(m, "damper")


def with_actuation_flags(m, model):
    """``model`` with the actuators of ``m``'s flags: zero force under ``actuation``
    disabled (gain, bias and force range zero), unclamped controls under ``clampctrl``
    disabled."""
    element = model.actuators
    if element is None:
        return model
    changes = {}
    if switched_off(m, "actuation"):
        zero = jnp.zeros_like(element.gain)
        changes.update(gain=zero, bias=jnp.zeros_like(element.bias), force_lower=zero,
                       force_upper=zero)  # fmt: skip
    if switched_off(m, "clampctrl"):
        changes.update(ctrl_lower=jnp.full_like(element.gain, -jnp.inf),
                       ctrl_upper=jnp.full_like(element.gain, jnp.inf))  # fmt: skip
    if not changes:
        return model
    new = dataclasses.replace(element, **changes)
    forces = tuple(new if f is element else f for f in model.forces)
    return dataclasses.replace(model, forces=forces)
