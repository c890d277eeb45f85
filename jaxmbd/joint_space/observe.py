"""A model's sensors at one joint-space state (qpos, qvel): what a policy or an environment
observes (MuJoCo's ``sensordata`` after ``mj_forward`` on the same state)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..actuators import with_controls
from ..contact import with_contact
from ..model import Model
from ..sensors import readings, sensor_kind
from ..tree import body_velocities, poses
from .dynamics import accelerations, body_accelerations
from .run import model_tree


@eqx.filter_jit  # one program per model structure (op by op: seconds per call)
def read_sensors(model: Model, qpos, qvel, *, names=None, t=0.0, controls=None,
                 contact: str = "compliant") -> dict:  # fmt: skip
    """Readings {name: (dim,)} of the sensors ``names`` (None: all) of ``model`` at the
    joint-space state (``qpos``, ``qvel``) in the layout of ``model.tree`` (MuJoCo's), at
    time ``t`` with the actuators' ``controls`` (nu,) (None: the model's own) and
    ``contact`` ("compliant" or "none"; touch sensors read the compliant law's forces).

    Position and velocity kinds (frames, subtrees, touch, joint coordinates, actuator
    forces) come from the forward kinematics alone; kinds that need the accelerations
    (``accelerometer``, the interaction force and torque) solve the forward dynamics at
    the state (the loops' multipliers with it). The joint reactions need a
    run's multipliers: read them from ``simulate(...).sensors``. Traceable: ``jit``,
    ``vmap`` over states and ``grad`` apply."""
    sensors = model.sensors
    if sensors is None:
        raise ValueError(f"read_sensors: model '{model.name}' has no sensors")
    names = sensors.sensor_names if names is None else tuple(names)  # static under jit
    for name in names:
        sensors.index(name)  # a clear KeyError for an unknown name
    reactions = [n for n in names if sensor_kind(sensors.kinds[sensors.index(n)]).needs_run]
    if reactions:
        raise ValueError(
            f"read_sensors: sensors {reactions} read the joints' multipliers of a run; read "
            "them from simulate(...).sensors"
        )
    model = with_contact(model, contact, where="read_sensors")
    if controls is not None and model.actuators is not None:
        model = with_controls(model, controls)
    elif controls is not None and jnp.size(controls):
        raise ValueError(f"read_sensors: controls= given, but model '{model.name}' has no "
                         "actuators")  # fmt: skip
    tree, loops = model_tree(model)
    qpos, qvel = jnp.asarray(qpos, jnp.float64), jnp.asarray(qvel, jnp.float64)
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    solved = any(sensor_kind(sensors.kinds[sensors.index(n)]).needs_solution for n in names)
    lam = jnp.zeros(model.nc, qvel.dtype)
    if solved:
        acc = accelerations(model, tree, loops, qpos, qvel, t)
        rddot, omegadot = body_accelerations(tree, p, qvel, acc.qacc)
        if loops is not None:  # the loops' multipliers (the tree's rows carry none)
            lam = lam.at[np.asarray(loops.rows, dtype=int)].set(acc.lam)
    else:
        rddot = omegadot = jnp.zeros_like(rdot)
    t = jnp.reshape(jnp.asarray(t, jnp.float64), (1,))
    values = readings(model, names, t, p.c[None], p.R[None], rdot[None], omega[None],
                      rddot[None], omegadot[None], lam[None])  # fmt: skip
    return {name: value[0] for name, value in values.items()}
