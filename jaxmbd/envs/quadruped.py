"""dm_control's quadruped (``dm_control/suite/quadruped.py``): ``walk`` and ``run``
(``Move``), the model as ``make_model`` edits the file (:func:`make_spec`: no terrain,
walls, ball, target or rangefinders), its time step (h = 0.005 s, MuJoCo's Euler), four per
control step (``_CONTROL_TIMESTEP`` = 0.02 s), 1000 steps (20 s), on MuJoCo's constraint
model (:class:`~jaxmbd.envs.ModelEnv`'s default for a file).

The observation is ``_common_observations`` from the file's sensors, computed from the state
as MuJoCo's ``engine_sensor.c`` computes them: the velocimeter and the gyro at the new
state; the accelerometer and the toes' force and torque sensors (the wrench the ankle exerts
on the toe, a body welded to it: MuJoCo's ``cfrc_int``) at the start of the control step's
last time step, with that step's solved contact forces (``mj_step`` computes the
acceleration-stage sensors before it integrates, and dm_control's step ends with
``mj_step1``, which leaves them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..joint_space.dynamics import body_accelerations
from ..tree import body_velocities, poses
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, contact_count, suite_file
from .rewards import tolerance

TIME_LIMIT = 20.0  # _DEFAULT_TIME_LIMIT (s)
CONTROL_TIMESTEP = 0.02  # _CONTROL_TIMESTEP
RUN_SPEED = 5.0  # _RUN_SPEED
WALK_SPEED = 0.5  # _WALK_SPEED
EPISODE_LENGTH = round(TIME_LIMIT / CONTROL_TIMESTEP)
TOES = ("toe_front_left", "toe_back_left", "toe_back_right", "toe_front_right")  # _TOES
WALLS = ("wall_px", "wall_py", "wall_nx", "wall_ny")  # _WALLS
#: dm_control's reset lifts the body in steps of 1 cm until MuJoCo finds no contact
LIFT_STEP = 0.01
LIFT_ATTEMPTS = 10_000
#: which part of the toe's wrench (force, torque) each of MuJoCo's sensor kinds reads
WRENCH_PART = {"FORCE": 0, "TORQUE": 1}


def make_spec(*, floor_size: float | None = None, terrain: bool = False,
              rangefinders: bool = False, walls_and_ball: bool = False):  # fmt: skip
    """``quadruped.make_model`` as a ``mujoco.MjSpec`` of ``quadruped.xml``: the floor's
    half size ``floor_size`` (None: the file's), the walls, ball and target, the terrain
    and the rangefinders removed unless asked for."""
    import mujoco  # noqa: PLC0415  (optional dependency)

    spec = mujoco.MjSpec.from_file(suite_file("quadruped"))
    if floor_size is not None:
        spec.geom("floor").size = [floor_size, floor_size, 0.5]
    if not walls_and_ball:
        for wall in WALLS:
            spec.delete(spec.geom(wall))
        spec.delete(spec.body("ball"))
        spec.delete(spec.site("target"))
    if not terrain:
        spec.delete(spec.geom("terrain"))
    if not rangefinders:
        for sensor in list(spec.sensors):
            if sensor.type == mujoco.mjtSensor.mjSENS_RANGEFINDER:
                spec.delete(sensor)
    return spec


def _sensors_of(suite: SuiteModel, *kinds: str) -> list[tuple[str, str]]:
    """(kind, site name) of the file's sensors of the ``mjtSensor`` kinds ``kinds``, in the
    file's order (``Physics._get_sensor_names``)."""
    import mujoco  # noqa: PLC0415  (optional dependency)

    mj, out = suite.mj, []
    wanted = {int(getattr(mujoco.mjtSensor, f"mjSENS_{k}")): k for k in kinds}
    for k in range(mj.nsensor):
        kind = wanted.get(int(mj.sensor_type[k]))
        if kind is not None:
            site = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_SITE, int(mj.sensor_objid[k]))
            out.append((kind, site))
    return out


def _site(physics: Physics, frame):
    """(position (3,), rotation (3, 3)) of a site (:meth:`SuiteModel.frame`) in the world."""
    b, pos, R = frame
    return physics.point(b, pos), physics.rotation(b, R)


def _spin(physics: Physics, b: int):
    """The world angular velocity of tree body ``b``."""
    return physics.xmat[b] @ physics.angular_velocity[b]


def _move(desired_speed: float, integrator, n_substeps, options) -> ModelEnv:
    import mujoco  # noqa: PLC0415  (optional dependency)

    suite = SuiteModel("quadruped", spec=make_spec(floor_size=TIME_LIMIT * desired_speed))
    mj = suite.mj
    hinges = [j for j in range(mj.njnt) if mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    hinge_qpos = np.array([mj.jnt_qposadr[j] for j in hinges])
    hinge_qvel = np.array([mj.jnt_dofadr[j] for j in hinges])
    torso_site = suite.frame("site", "torso")
    gravity = np.array(mj.opt.gravity)
    imu = _sensors_of(suite, "ACCELEROMETER", "GYRO")
    wrenches = _sensors_of(suite, "FORCE", "TORQUE")
    # each toe: its site, its body (welded to the ankle) and the geom the floor touches
    toes = {}
    for _, site in wrenches:
        s = suite.id("site", site)
        body = int(mj.site_bodyid[s])
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, body)
        if mj.body_jntnum[body] or mj.body_geomnum[body] != 1:
            raise ValueError(f"{suite.path}: the sensor site '{site}' is not on a welded toe")
        toes[site] = (suite.inertial(name), int(mj.body_geomadr[body]))
    # every site a sensor reads, on the tree body that carries it
    sites = {site: suite.frame("site", site) for _, site in (*imu, *wrenches)}
    root = suite.id("joint", "root")
    root_adr = int(mj.jnt_qposadr[root])

    def start_kinematics(physics: Physics):
        """(poses, com velocities, body angular velocities, com accelerations, body
        angular accelerations) at the control step's last time step's start."""
        forces = physics.constraint_forces
        p = poses(physics.tree, forces.qpos)
        rdot, omega = body_velocities(physics.tree, p, forces.qvel)
        rddot, omegadot = body_accelerations(physics.tree, p, forces.qvel, forces.qacc)
        return p, rdot, omega, rddot, omegadot

    def point_acceleration(kin, b: int, local):
        """(world acceleration, angular velocity, angular acceleration) of the point
        ``local`` fixed in tree body ``b`` (its frame), at the step's start."""
        p, _, omega, rddot, omegadot = kin
        w, alpha = p.R[b] @ omega[b], p.R[b] @ omegadot[b]
        arm = p.x[b] + p.R[b] @ local - p.c[b]
        return rddot[b] + jnp.cross(alpha, arm) + jnp.cross(w, jnp.cross(w, arm)), w, alpha

    def accelerometer(site, kin):
        """``mjSENS_ACCELEROMETER``: the site's linear acceleration less gravity, site axes."""
        p = kin[0]
        b, pos, R = sites[site]
        a, _, _ = point_acceleration(kin, b, pos)
        return (p.R[b] @ R).T @ (a - gravity)

    def toe_wrench(physics: Physics, site, kin):
        """(force, torque) of ``mjSENS_FORCE``/``mjSENS_TORQUE`` at a toe site: the wrench
        the ankle exerts on the toe (``cfrc_int``: its rate of momentum less gravity and
        its contact forces), in the site's axes, the torque about the site."""
        p = kin[0]
        (b, pos, R), (_, mass, com, inertia), geom = sites[site], *toes[site]
        forces = physics.constraint_forces
        sign = np.array([1.0 if g2 == geom else -1.0 if g1 == geom else 0.0
                         for g1, g2 in forces.geoms])  # fmt: skip
        Rb = p.R[b]
        a, w, alpha = point_acceleration(kin, b, com)
        c = p.x[b] + Rb @ com
        f_contact = sign[:, None] * forces.force
        F_c = jnp.sum(f_contact, axis=0)
        N_c = jnp.sum(jnp.cross(forces.pos - c, f_contact) + sign[:, None] * forces.torque, 0)
        Iw = Rb @ inertia @ Rb.T
        F = mass * (a - gravity) - F_c
        N = Iw @ alpha + jnp.cross(w, Iw @ w) - N_c
        x, Rs = p.x[b] + Rb @ pos, Rb @ R
        return Rs.T @ F, Rs.T @ (N + jnp.cross(c - x, F))

    def torso_velocity(physics: Physics):
        """``velocimeter``: the torso site's linear velocity in its axes."""
        b = torso_site[0]
        x, Rs = _site(physics, torso_site)
        v = physics.com_velocity[b] + jnp.cross(_spin(physics, b), x - physics.xipos[b])
        return Rs.T @ v

    def observation(physics: Physics, info):
        """``_common_observations``: egocentric_state (the hinges' qpos and qvel, act),
        torso_velocity, torso_upright, imu (accelerometer, gyro in the file's order),
        force_torque (arcsinh of the toes' force and torque sensors)."""
        kin = start_kinematics(physics)
        torso = physics.body("torso")

        def gyro(site):
            _, Rs = _site(physics, sites[site])
            return Rs.T @ _spin(physics, sites[site][0])

        readings = {"GYRO": gyro, "ACCELEROMETER": lambda site: accelerometer(site, kin)}
        imu_values = [readings[kind](site) for kind, site in imu]
        ft = [toe_wrench(physics, site, kin)[WRENCH_PART[kind]] for kind, site in wrenches]
        return jnp.concatenate([physics.qpos[hinge_qpos], physics.qvel[hinge_qvel], physics.act,
                                torso_velocity(physics), physics.xmat[torso, 2, 2:3],
                                *imu_values, jnp.arcsinh(jnp.concatenate(ft))])  # fmt: skip

    def reward(physics: Physics, info):
        """``Move.get_reward``: ``_upright_reward`` x the forward speed's tolerance."""
        torso = physics.body("torso")
        upright = tolerance(physics.xmat[torso, 2, 2], bounds=(1.0, float("inf")),
                            sigmoid="linear", margin=2.0, value_at_margin=0)  # fmt: skip
        move = tolerance(torso_velocity(physics)[0], bounds=(desired_speed, float("inf")),
                         margin=desired_speed, value_at_margin=0.5, sigmoid="linear")  # fmt: skip
        return upright * move

    def initial_state(model, rng):
        """``Move.initialize_episode``: a random orientation (a normal 4-vector
        normalised) at the origin, raised from z = 0 in steps of 1 cm until MuJoCo's
        collider finds no contact (``_find_non_contacting_height``), at rest."""
        quat = jax.random.normal(rng, (4,), model.tree.qpos0.dtype)
        qpos = model.tree.qpos0.at[root_adr + 3 : root_adr + 7].set(quat / jnp.linalg.norm(quat))

        def at(z):
            return qpos.at[root_adr : root_adr + 3].set(jnp.stack([0.0, 0.0, z]))

        def touching(carry):
            z, k = carry
            return (contact_count(model, at(z)) > 0) & (k < LIFT_ATTEMPTS)

        z, _ = jax.lax.while_loop(touching, lambda c: (c[0] + LIFT_STEP, c[1] + 1),
                                  (jnp.zeros((), qpos.dtype), 0))  # fmt: skip
        return at(z), jnp.zeros(model.tree.nv, qpos.dtype), {}

    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    options["contact_forces"] = True
    env = ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                   observation=observation, reward=reward, initial_state=initial_state,
                   episode_length=EPISODE_LENGTH, **options)  # fmt: skip
    if env.contact != "soft":
        raise ValueError(
            f"quadruped: the observation reads MuJoCo's contact forces (the toes' force and "
            f"torque sensors): contact='soft' only, got contact={env.contact!r}"
        )
    return env


def walk(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Quadruped walk: ``Move(desired_speed=0.5)``, a 10 m floor."""
    return _move(WALK_SPEED, integrator, n_substeps, options)


def run(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Quadruped run: ``Move(desired_speed=5)``, a 100 m floor."""
    return _move(RUN_SPEED, integrator, n_substeps, options)
