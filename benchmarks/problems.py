"""Problems shared by several benchmarks: model files, the exact-contact scenes and the
batches built from them.

The built-in models (``jaxmbd.models``: slider crank, double pendulum, heavy top, generated
chains) are used as they are; their counterparts in other engines are in
``benchmarks/engines/`` (``in_mujoco.py``, ``in_exudyn.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd

ROOT = Path(__file__).resolve().parents[1]
G = 9.81

# ---- model files -----------------------------------------------------------------------------
#: the control models of dm_control's suite and gymnasium's MuJoCo environments, read from
#: the installed packages (never copied): name -> (package, file inside it)
CONTROL_MODELS = {
    "acrobot": ("dm_control", "suite/acrobot.xml"),
    "cartpole": ("dm_control", "suite/cartpole.xml"),
    "pendulum": ("dm_control", "suite/pendulum.xml"),
    "reacher": ("dm_control", "suite/reacher.xml"),
    "inverted_pendulum": ("gymnasium", "envs/mujoco/assets/inverted_pendulum.xml"),
    "inverted_double_pendulum": ("gymnasium", "envs/mujoco/assets/inverted_double_pendulum.xml"),
    # joint armature (0.1 and 1 kg m^2 on light links) with damping, stiffness and limits
    "cheetah": ("dm_control", "suite/cheetah.xml"),
    "hopper": ("gymnasium", "envs/mujoco/assets/hopper.xml"),
}
#: the 3-link spatial arm (skew hinge axes, full inertias, keyframe ``swing``)
ARM3 = ROOT / "tests" / "data" / "arm3.xml"


def control_model_path(name: str) -> Path:
    """The MJCF file of a control model of dm_control or gymnasium (``CONTROL_MODELS``)."""
    package, relative = CONTROL_MODELS[name]
    return Path(importlib.import_module(package).__file__).parent / relative


# ---- exact-contact scenes on the floor z = 0 ---------------------------------------------------
def cube_inertia(m: float, a: float) -> float:
    """Principal moment of inertia of a cube of mass ``m`` and edge ``a``."""
    return m * a * a / 6


def ball(*, radius=0.05, mass=1.0, height=0.45, friction=0.5, restitution=0.8,
         rdot=(0.0, 0.0, 0.0), gravity=(0.0, 0.0, -G), name="ball"):  # fmt: skip
    """A solid sphere whose bottom is ``height`` above the floor."""
    b = mbd.ModelBuilder(name, gravity=tuple(gravity))
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_body("ball", mass=mass, inertia=[0.4 * mass * radius * radius] * 3,
               r=(0.0, 0.0, radius + height), rdot=rdot,
               shapes=[mbd.geometry.sphere(radius)])  # fmt: skip
    b.add_contact("ball", "ground", friction=friction, restitution=restitution)
    return b.build()


def cube(*, half=0.1, mass=2.0, friction=0.4, rdot=(0.0, 0.0, 0.0), gravity=(0.0, 0.0, -G),
         name="cube"):  # fmt: skip
    """A cube on one face on the floor (body ``box``)."""
    a = 2 * half
    b = mbd.ModelBuilder(name, gravity=tuple(gravity))
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_body("box", mass=mass, inertia=[cube_inertia(mass, a)] * 3, r=(0.0, 0.0, half),
               rdot=rdot, shapes=[mbd.geometry.box((a, a, a))])  # fmt: skip
    b.add_contact("box", "ground", friction=friction, restitution=0.0)
    return b.build()


def incline_block(mu: float, *, tan_theta=0.3, half=0.1, mass=1.0, inertia=None):
    """A cube resting on a plane inclined by ``arctan(tan_theta)`` about y (faces on it)."""
    theta = float(np.arctan(tan_theta))
    c, s = np.cos(theta), np.sin(theta)
    normal = np.array([s, 0.0, c])
    A = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    b = mbd.ModelBuilder("incline", gravity=(0.0, 0.0, -G))
    inertia = cube_inertia(mass, 2 * half) if inertia is None else inertia
    b.add_body("block", mass=mass, inertia=[inertia] * 3,
               r=half * normal, A=A, shapes=[mbd.geometry.box([2 * half] * 3)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=normal)
    b.add_contact("block", "ground", friction=mu, restitution=0.0)
    return b.build()


def box_stack(n: int, *, a=0.1, m=1.0, friction=0.5):
    """``n`` cubes face to face, touching, the lowest on the floor."""
    b = mbd.ModelBuilder(f"stack{n}", gravity=(0.0, 0.0, -G))
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    for k in range(n):
        b.add_body(f"b{k}", mass=m, inertia=[cube_inertia(m, a)] * 3,
                   r=(0.0, 0.0, a / 2 + a * k), shapes=[mbd.geometry.box((a, a, a))])  # fmt: skip
        b.add_contact(f"b{k}", "ground" if k == 0 else f"b{k - 1}", friction=friction)
    return b.build()


# ---- batches ----------------------------------------------------------------------------------
def broadcast(model, size: int):
    """``size`` copies of ``model`` as one batched Model (what ``stack_models`` gives,
    without a Python loop over the members)."""
    return jax.tree_util.tree_map(
        lambda x: jnp.broadcast_to(jnp.asarray(x), (size,) + jnp.shape(x)), model
    )


def member(models, k: int):
    """Member ``k`` of a batched Model."""
    return jax.tree_util.tree_map(lambda x: x[k], models)


def with_leaf(models, where, value):
    """``eqx.tree_at`` with the value made an array."""
    return eqx.tree_at(where, models, jnp.asarray(value))
