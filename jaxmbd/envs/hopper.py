"""dm_control's hopper (``dm_control/suite/hopper.py``): ``stand`` and ``hop``. The file's
time step (``hopper.xml``: h = 0.005 s, MuJoCo's Euler), four per control step
(``_CONTROL_TIMESTEP`` = 0.02 s), 1000 steps (20 s), on MuJoCo's constraint model
(:class:`~jaxmbd.envs.ModelEnv`'s default for a file; with ``contact="compliant"`` the
linearly implicit step ``"implicitfast"``: jaxmbd's compliant contact is stiffer than
MuJoCo's soft constraints, and the explicit steps diverge at this h).

The file's sensors, computed here from the state: ``torso_subtreelinvel`` (the centre of
mass velocity of the torso's subtree, :meth:`Physics.subtree_com_velocity`) and the touch
sensors ``touch_toe``/``touch_heel`` (:func:`touch`, from MuJoCo's contact forces of the
control step's last time step: ``ModelEnv(contact_forces=True)``)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..tree import poses
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

STAND_HEIGHT = 0.6  # _STAND_HEIGHT
HOP_SPEED = 2.0  # _HOP_SPEED
CONTROL_TIMESTEP = 0.02


def touch(physics: Physics, body: int, centre, radius: float):
    """MuJoCo's touch sensor on a sphere site (``engine_sensor.c``, ``mjSENS_TOUCH``): the
    sum of the normal forces of the contacts on ``body`` that the site's zone sees
    (``centre``: the site's position in the body's frame). With MuJoCo's constraint model
    (``physics.constraint_forces``): MuJoCo's rule, the contacts whose ray from the
    contact point along the normal (away from ``body``) meets the sphere
    (``mju_rayGeom``), at the state of the control step's last time step. With jaxmbd's
    compliant contact: its slots whose points lie in the sphere (this engine's forces);
    0 without contact (``contact="none"``)."""
    forces = physics.constraint_forces
    if forces is not None:
        p = poses(physics.tree, forces.qpos)
        centre = p.x[body] + p.R[body] @ jnp.asarray(centre, forces.qpos.dtype)
        on_first = jnp.asarray(np.asarray(forces.body1) == body)
        on_body = on_first | jnp.asarray(np.asarray(forces.body2) == body)
        ray = jnp.where(on_first[:, None], forces.normal, -forces.normal)
        return jnp.sum(jnp.where(on_body & (forces.normal_force > 0)
                                 & _ray_meets_sphere(forces.pos, ray, centre, radius),
                                 forces.normal_force, 0.0))  # fmt: skip
    if physics.contact is None:
        return jnp.zeros((), physics.qpos.dtype)
    slots = physics.contacts()
    pairs = jnp.asarray([physics.contact.pairs[p] for p in slots.pair])  # (ns, 2)
    on_body = (pairs[:, 0] == body) | (pairs[:, 1] == body)
    inside = jnp.linalg.norm(slots.point - physics.point(body, centre), axis=-1) <= radius
    return jnp.sum(jnp.where(on_body & inside & slots.active, slots.normal_force, 0.0))


def _ray_meets_sphere(origin, direction, centre, radius):
    """Whether rays (origin (c, 3), unit direction (c, 3)) meet the sphere at t >= 0
    (``mju_rayGeom``'s sphere, ``ray_quad``: the smaller non-negative root of
    |o + t d - c|^2 = r^2)."""
    rel = origin - centre
    b = jnp.sum(direction * rel, axis=-1)
    disc = b**2 - (jnp.sum(rel * rel, axis=-1) - radius**2)
    root = jnp.sqrt(jnp.maximum(disc, 0.0))
    return (disc >= 0) & ((-b - root >= 0) | (-b + root >= 0))


def _hopper(hopping: bool, integrator, n_substeps, options) -> ModelEnv:
    suite = SuiteModel("hopper")
    sites = [suite.frame("site", name) for name in ("touch_toe", "touch_heel")]
    radii = [float(suite.mj.site_size[suite.id("site", name), 0])
             for name in ("touch_toe", "touch_heel")]  # fmt: skip
    sample = joint_sampler(suite)
    root_z = int(suite.mj.jnt_qposadr[suite.id("joint", "rootz")])

    def observation(physics: Physics, info):
        """``Hopper.get_observation``: position = qpos[1:], velocity = qvel, touch =
        log1p of the touch sensors (toe, heel)."""
        sensed = jnp.stack(
            [touch(physics, b, x, r) for (b, x, _), r in zip(sites, radii, strict=True)]
        )
        return jnp.concatenate([physics.qpos[1:], physics.qvel, jnp.log1p(sensed)])

    def reward(physics: Physics, info):
        """``Hopper.get_reward``: standing = tolerance(torso - foot xipos z, (0.6, 2)),
        times the hop speed's tolerance (hop) or the small-control term (stand)."""
        height = physics.xipos[physics.body("torso"), 2] - physics.xipos[physics.body("foot"), 2]
        standing = tolerance(height, (STAND_HEIGHT, 2))
        if hopping:
            speed = physics.subtree_com_velocity(physics.body("torso"))[0]
            return standing * tolerance(speed, bounds=(HOP_SPEED, float("inf")),
                                        margin=HOP_SPEED / 2, value_at_margin=0.5,
                                        sigmoid="linear")  # fmt: skip
        small_control = tolerance(physics.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic")
        return standing * (jnp.mean(small_control) + 4) / 5

    def initial_state(model, rng):
        """``randomize_limited_and_rotational_joints``, at rest (``Hopper.initialize_episode``;
        with ``contact="compliant"`` raised out of the floor,
        :func:`~jaxmbd.envs._suite.lifted_to_floor`)."""
        qpos = lifted_to_floor(model, sample(rng, jnp.zeros(model.tree.nq)), root_z)
        return qpos, jnp.zeros(model.tree.nv), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, contact_forces=True, **options)  # fmt: skip


def stand(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Hopper stand: stay upright (torso 0.6 above the foot) with small controls."""
    return _hopper(False, integrator, n_substeps, options)


def hop(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Hopper hop: upright and moving forward at 2 m/s or more."""
    return _hopper(True, integrator, n_substeps, options)
