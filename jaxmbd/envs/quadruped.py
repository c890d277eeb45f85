"""dm_control's quadruped (``dm_control/suite/quadruped.py``): ``walk`` and ``run``
(``Move``) and ``escape``, the model as ``make_model`` edits the file (:func:`make_spec`:
the walk and run tasks without terrain, walls, ball, target or rangefinders; escape with
the terrain and the rangefinders), its time step (h = 0.005 s, MuJoCo's Euler), four per
control step (``_CONTROL_TIMESTEP`` = 0.02 s), 1000 steps (20 s), on MuJoCo's constraint
model (:class:`~jaxmbd.envs.ModelEnv`'s default for a file).

Escape draws a new terrain every episode, as ``Escape.initialize_episode`` does: a bowl
times smooth random bumps, the bumps a 30 x 30 grid of U(0.15, 1) (2 m apart over the
60 m field) zoomed to the height field's 201 x 201 by ``scipy.ndimage.zoom``'s cubic
spline. That zoom is linear and separable (a tensor product of one-dimensional splines),
so it is ``Z B Z^T`` with ``Z`` (201, 30) computed once on the host
(:func:`zoom_operator`): the terrain is drawn in JAX,
per member of a batch, and carried in ``state.info["terrain"]`` (float32, as MuJoCo stores
``hfield_data``); each step runs on the model with that terrain (``episode_model``).

The observation is ``_common_observations`` from the file's sensors, computed from the state
as MuJoCo's ``engine_sensor.c`` computes them: the velocimeter and the gyro at the new
state; the accelerometer and the toes' force and torque sensors (the wrench the ankle exerts
on the toe, a body welded to it: MuJoCo's ``cfrc_int``) at the start of the control step's
last time step, with that step's solved contact forces (``mj_step`` computes the
acceleration-stage sensors before it integrates, and dm_control's step ends with
``mj_step1``, which leaves them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..joint_space.dynamics import body_accelerations
from ..sensors._kinds import RayTargets, ray_distances
from ..tree import body_velocities, poses
from ._model_env import ModelEnv, Physics
from ._suite import SuiteModel, in_contact, suite_file
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
ESCAPE_FLOOR_SIZE = 40.0  # escape(): make_model(floor_size=40, terrain=True, ...)
TERRAIN_SMOOTHNESS = 0.15  # _TERRAIN_SMOOTHNESS: the bumps' lower bound
TERRAIN_BUMP_SCALE = 2.0  # _TERRAIN_BUMP_SCALE: the bumps' spacing (m)
ESCAPE_DEVIATION = 20.0  # Escape.get_reward: _upright_reward(deviation_angle=20), degrees
NO_INTERSECTION = -1.0  # a rangefinder that meets nothing (Physics.rangefinder)


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


class _Common(NamedTuple):
    """What every quadruped task reads: ``observation(physics)`` (``_common_observations``),
    ``torso_velocity(physics)`` (the velocimeter), ``upright(physics, deviation)``
    (``_upright_reward``) and ``lifted(model, rng)`` (a random orientation at (x, y) = 0,
    lifted until MuJoCo finds no contact: ``_find_non_contacting_height``)."""

    observation: Callable
    torso_velocity: Callable
    upright: Callable
    lifted: Callable


def _common(suite: SuiteModel) -> _Common:
    import mujoco  # noqa: PLC0415  (optional dependency)

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

    def observation(physics: Physics):
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

    def upright(physics: Physics, deviation: float = 0.0):
        """``_upright_reward``: 1 within ``deviation`` degrees of the vertical, 0 upside
        down, linear in between."""
        cos = float(np.cos(np.deg2rad(deviation)))
        return tolerance(physics.xmat[physics.body("torso"), 2, 2], bounds=(cos, float("inf")),
                         sigmoid="linear", margin=1 + cos, value_at_margin=0)  # fmt: skip

    def lifted(model, rng):
        """A random orientation (a normal 4-vector normalised) at the origin, raised from
        z = 0 in steps of 1 cm until MuJoCo's collider finds no contact, at rest."""
        quat = jax.random.normal(rng, (4,), model.tree.qpos0.dtype)
        qpos = model.tree.qpos0.at[root_adr + 3 : root_adr + 7].set(quat / jnp.linalg.norm(quat))

        def at(z):
            return qpos.at[root_adr : root_adr + 3].set(jnp.stack([0.0, 0.0, z]))

        def touching(carry):
            z, k = carry
            return in_contact(model, at(z)) & (k < LIFT_ATTEMPTS)

        z, _ = jax.lax.while_loop(touching, lambda c: (c[0] + LIFT_STEP, c[1] + 1),
                                  (jnp.zeros((), qpos.dtype), 0))  # fmt: skip
        return at(z), jnp.zeros(model.tree.nv, qpos.dtype)

    return _Common(observation, torso_velocity, upright, lifted)


def _environment(suite: SuiteModel, *, observation, reward, initial_state, integrator,
                 n_substeps, options, episode_model=None) -> ModelEnv:  # fmt: skip
    if n_substeps is None:
        n_substeps = round(CONTROL_TIMESTEP / suite.timestep)
    options["contact_forces"] = True
    env = ModelEnv(suite.model, h=suite.timestep, n_substeps=n_substeps, integrator=integrator,
                   observation=observation, reward=reward, initial_state=initial_state,
                   episode_length=EPISODE_LENGTH, episode_model=episode_model,
                   **options)  # fmt: skip
    if env.contact != "soft":
        raise ValueError(
            f"quadruped: the observation reads MuJoCo's contact forces (the toes' force and "
            f"torque sensors): contact='soft' only, got contact={env.contact!r}"
        )
    return env


def _move(desired_speed: float, integrator, n_substeps, options) -> ModelEnv:
    suite = SuiteModel("quadruped", spec=make_spec(floor_size=TIME_LIMIT * desired_speed))
    common = _common(suite)

    def reward(physics: Physics, info):
        """``Move.get_reward``: ``_upright_reward`` x the forward speed's tolerance."""
        move = tolerance(common.torso_velocity(physics)[0], bounds=(desired_speed, float("inf")),
                         margin=desired_speed, value_at_margin=0.5, sigmoid="linear")  # fmt: skip
        return common.upright(physics) * move

    def initial_state(model, rng):
        """``Move.initialize_episode``: ``_find_non_contacting_height`` of a random
        orientation."""
        return (*common.lifted(model, rng), {})

    def observation(physics: Physics, info):
        """``_common_observations``."""
        return common.observation(physics)

    return _environment(suite, observation=observation, reward=reward,
                        initial_state=initial_state, integrator=integrator,
                        n_substeps=n_substeps, options=options)  # fmt: skip


def zoom_operator(n: int, factor: float) -> np.ndarray:
    """``scipy.ndimage.zoom``'s cubic spline (order 3, its defaults) of a length-``n``
    signal by ``factor`` as a matrix (round(n factor), n): the zoom of each unit vector. The
    zoom of a 2-D array is the tensor product of these (``zoom(B, factor) = Z B Z^T``
    for a square ``B``): ndimage's spline prefilter and interpolation run axis by axis."""
    from scipy import ndimage  # noqa: PLC0415

    return np.stack([ndimage.zoom(np.eye(n)[k], factor) for k in range(n)], axis=1)


def with_terrain(model, heights):
    """``model`` with its height field's elevations set to ``heights`` (nrow, ncol), in
    metres (MuJoCo's ``hfield_data`` times the field's ``size[2]``): in MuJoCo's constraint
    model's height-field contact groups and in the rangefinders' targets."""
    fields = [i for i, g in enumerate(model.constraint_model.contacts) if g.window]
    sensors = model.sensors
    targets = [k for k, p in enumerate(sensors.params) if isinstance(p, RayTargets) and p.heights]
    heights = jnp.asarray(heights, jnp.float64)
    return eqx.tree_at(
        lambda m: (
            [m.constraint_model.contacts[i].heights for i in fields]
            + [m.sensors.params[k].heights for k in targets]
        ),
        model,
        [heights] * len(fields) + [(heights,)] * len(targets),
    )


def escape(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Quadruped escape (``Escape``): a 40 m floor and a 60 m bowl of a terrain drawn anew
    each episode (module docstring), the rangefinders and the origin in the observation
    (101 values), the reward ``_upright_reward(20 degrees)`` x the distance of the
    ``workspace`` site from the origin against the terrain's half size."""
    import mujoco  # noqa: PLC0415  (optional dependency)

    spec = make_spec(floor_size=ESCAPE_FLOOR_SIZE, terrain=True, rangefinders=True)
    suite = SuiteModel("quadruped", spec=spec)
    common = _common(suite)
    mj = suite.mj
    res = int(mj.hfield_nrow[0])
    if res != int(mj.hfield_ncol[0]):
        raise ValueError(f"{suite.path}: the terrain is not square ({res} x {mj.hfield_ncol[0]})")
    rows, cols = np.ogrid[-1 : 1 : res * 1j, -1 : 1 : res * 1j]
    bowl = 0.5 - np.cos(2 * np.pi * np.clip(np.sqrt(cols**2 + rows**2), 0.04, 1)) / 2
    half = float(mj.hfield_size[0, 0])
    bumps_n = int(2 * half / TERRAIN_BUMP_SCALE)
    zoom = zoom_operator(bumps_n, res / float(bumps_n))
    workspace = suite.frame("site", "workspace")
    sensors = suite.model.sensors
    finders = [k for k in range(mj.nsensor)
               if mj.sensor_type[k] == mujoco.mjtSensor.mjSENS_RANGEFINDER]  # fmt: skip
    finders = [sensors.index(mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_SENSOR, k))
               for k in finders]  # fmt: skip
    if len({sensors.bodies[k] for k in finders}) != 1:
        raise ValueError(f"{suite.path}: the rangefinders are not all on one body")
    finder_body = sensors.bodies[finders[0]]
    finder_targets = sensors.params[finders[0]]
    elevation = float(mj.hfield_size[0, 2])

    def terrain(rng):
        """``Escape.initialize_episode``'s terrain: bowl x zoomed U(0.15, 1) bumps."""
        bumps = jax.random.uniform(rng, (bumps_n, bumps_n), jnp.float64,
                                   TERRAIN_SMOOTHNESS, 1.0)  # fmt: skip
        return (jnp.asarray(bowl) * (zoom @ bumps @ zoom.T)).astype(jnp.float32)

    def elevations(info):
        """The episode's terrain in metres (``hfield_data`` x ``size[2]``)."""
        return jnp.asarray(info["terrain"], jnp.float64) * elevation

    def episode_model(model, info):
        return with_terrain(model, elevations(info))

    def initial_state(model, rng):
        """The terrain, then ``_find_non_contacting_height`` over it."""
        key_terrain, key_pose = jax.random.split(rng)
        info = {"terrain": terrain(key_terrain)}
        return (*common.lifted(episode_model(model, info), key_pose), info)

    def rangefinders(physics: Physics, info):
        """``Physics.rangefinder`` over the episode's terrain: tanh of each reading, 1
        where the ray meets nothing."""
        targets = eqx.tree_at(lambda t: t.heights, finder_targets, (elevations(info),))
        b, k, n = finder_body, np.asarray(finders), len(finders)
        p = physics.xipos[b] + sensors.site[k] @ physics.xmat[b].T
        direction = (physics.xmat[b] @ sensors.frame[k])[..., 2]
        r = jnp.broadcast_to(physics.xipos[None], (n, *physics.xipos.shape))
        A = jnp.broadcast_to(physics.xmat[None], (n, *physics.xmat.shape))
        reading = ray_distances(targets, r, A, p, direction)
        return jnp.where(reading == NO_INTERSECTION, 1.0, jnp.tanh(reading))

    def observation(physics: Physics, info):
        """``_common_observations``, then ``origin`` (the world origin in the torso's
        frame) and ``rangefinder``."""
        torso = physics.body("torso")
        origin = -physics.xpos[torso] @ physics.xmat[torso]
        return jnp.concatenate([common.observation(physics), origin, rangefinders(physics, info)])

    def reward(physics: Physics, info):
        """``Escape.get_reward``."""
        distance = jnp.linalg.norm(_site(physics, workspace)[0])
        away = tolerance(distance, bounds=(half, float("inf")), margin=half, value_at_margin=0,
                         sigmoid="linear")  # fmt: skip
        return common.upright(physics, ESCAPE_DEVIATION) * away

    return _environment(suite, observation=observation, reward=reward,
                        initial_state=initial_state, integrator=integrator,
                        n_substeps=n_substeps, options=options,
                        episode_model=episode_model)  # fmt: skip


def walk(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Quadruped walk: ``Move(desired_speed=0.5)``, a 10 m floor."""
    return _move(WALK_SPEED, integrator, n_substeps, options)


def run(*, integrator=None, n_substeps: int | None = None, **options) -> ModelEnv:
    """Quadruped run: ``Move(desired_speed=5)``, a 100 m floor."""
    return _move(RUN_SPEED, integrator, n_substeps, options)
