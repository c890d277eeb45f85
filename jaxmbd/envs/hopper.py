"""dm_control's hopper (``dm_control/suite/hopper.py``): ``stand`` and ``hop``. The file's
time step (``hopper.xml``: h = 0.005 s), four per control step (``_CONTROL_TIMESTEP`` =
0.02 s), 1000 steps (20 s); with contact the linearly implicit step with the force's
velocity Jacobian (``"implicitfast"``, :class:`~jaxmbd.envs.ModelEnv`'s default: jaxmbd's
compliant contact is stiffer than MuJoCo's soft constraints, and the explicit steps
diverge at this h).

The file's sensors, computed here from the state: ``torso_subtreelinvel`` (the centre of
mass velocity of the torso's subtree, :meth:`Physics.subtree_com_velocity`) and the touch
sensors ``touch_toe``/``touch_heel`` (:func:`touch`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import _config  # noqa: F401
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, joint_sampler, lifted_to_floor
from .rewards import tolerance

STAND_HEIGHT = 0.6  # _STAND_HEIGHT
HOP_SPEED = 2.0  # _HOP_SPEED
CONTROL_TIMESTEP = 0.02


def touch(physics: Physics, body: int, centre, radius: float):
    """MuJoCo's touch sensor on a sphere site (``engine_sensor.c``, ``mjSENS_TOUCH``): the
    sum of the normal forces of the contacts on ``body`` whose points lie in the sphere
    (``centre``: the site's position in the body's frame). Contacts are jaxmbd's compliant
    slots (:meth:`Physics.contacts`), so the forces are this engine's, not MuJoCo's; 0
    without contact pairs (``contact="none"``)."""
    if physics.contact is None:
        return jnp.zeros((), physics.qpos.dtype)
    slots = physics.contacts()
    pairs = jnp.asarray([physics.contact.pairs[p] for p in slots.pair])  # (ns, 2)
    on_body = (pairs[:, 0] == body) | (pairs[:, 1] == body)
    inside = jnp.linalg.norm(slots.point - physics.point(body, centre), axis=-1) <= radius
    return jnp.sum(jnp.where(on_body & inside & slots.active, slots.normal_force, 0.0))


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
        """``randomize_limited_and_rotational_joints``, at rest, raised out of the floor
        (:func:`~jaxmbd.envs._suite.lifted_to_floor`)."""
        qpos = lifted_to_floor(model, sample(rng, jnp.zeros(model.tree.nq)), root_z)
        return qpos, jnp.zeros(model.tree.nv), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    return ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                    observation=observation, reward=reward, initial_state=initial_state,
                    episode_length=1000, **options)  # fmt: skip


def stand(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Hopper stand: stay upright (torso 0.6 above the foot) with small controls."""
    return _hopper(False, integrator, n_substeps, options)


def hop(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Hopper hop: upright and moving forward at 2 m/s or more."""
    return _hopper(True, integrator, n_substeps, options)
