"""jaxmbd.envs on MuJoCo's physics: the tasks' per-step rewards against MuJoCo C (``mj_step``
at the file's integrator and step, dm_control's sub-steps and reset settling, the rewards
written in numpy from dm_control's sources: :mod:`benchmarks.env_returns`) from the same
reset draws under the same random actions; the environment's checks of its inputs (the
parameters at reset, the time step at build, non-finite actions)."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("dm_control")

from benchmarks.env_returns import Reference, jaxmbd_rollout, reference_rollout  # noqa: E402

MEMBERS = 3
STEPS = 20


@pytest.mark.parametrize(("domain", "task"), [
    ("cartpole", "swingup"), ("hopper", "hop"), ("cheetah", "run"), ("humanoid", "stand"),
])  # fmt: skip
def test_rewards_equal_mujoco_c_from_the_same_draws(domain, task):
    """The first 20 control steps' rewards of a few members, from the env's reset draws
    under random actions in [-1, 1], equal MuJoCo C's (the draw set in mjData, the rest of
    dm_control's ``initialize_episode`` there: the cheetah's 200 settling steps) to
    round-off (measured: 3e-16; the humanoid's 1.2e-14), and the final qpos MuJoCo's to
    round-off of its size (6e-15 measured; the humanoid's 2.8e-13, to 1e-12); the
    hopper's observations, its touch sensors included, MuJoCo's to 2e-13 (4e-14
    measured)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = mbd.envs.make(domain, task)
        reference = Reference(domain, task)
    assert (env.h, env.n_substeps) == (reference.m.opt.timestep, reference.n_sub_steps)
    keys = jax.random.split(jax.random.PRNGKey(1), MEMBERS)
    actions = np.random.default_rng(1).uniform(-1, 1, (STEPS, MEMBERS, env.action_size))
    ours, draws, end, obs = jaxmbd_rollout(env, keys, actions)
    theirs, started, mujoco_end, mujoco_obs = reference_rollout(reference, draws, actions)
    assert started.all()  # the humanoid's draws are collision-free in MuJoCo's collider too
    # the humanoid's rewards: 1.2e-14; the others' 3.3e-16
    np.testing.assert_allclose(
        ours, theirs, rtol=0, atol=5e-14 if domain == "humanoid" else ROUND_OFF
    )
    # the states too (the hopper's and cheetah's rewards are often 0 from a random start)
    assert np.abs(mujoco_end - np.asarray(draws[0])).max() > 0.02  # they moved
    np.testing.assert_allclose(
        end,
        mujoco_end,
        rtol=0,
        atol=1e-12 if domain == "humanoid" else ROUND_OFF * np.abs(mujoco_end).max(),
    )
    if domain == "hopper":  # its touch sensors: MuJoCo's contact forces of the last time step
        touch = np.expm1(mujoco_obs[..., -2:])
        assert touch.max() > 1.0  # some contact
        # 6.0e-14 relative where the rows are computed in one native call (LLVM's own
        # order and fused multiply-adds), 9.0e-15 as thunks: round-off of the contact forces
        np.testing.assert_allclose(np.expm1(obs[..., -2:]), touch, rtol=2e-13, atol=ROUND_OFF)
        np.testing.assert_allclose(obs, mujoco_obs, rtol=0, atol=2e-13)  # 3.9e-14


# ------------------------------------------------------------------------- inputs


@pytest.fixture(scope="module")
def hopper():
    return mbd.envs.make("hopper", "stand")


def _with_friction(env, value):
    """env.sys with the friction of MuJoCo's first contact group set to ``value``."""
    return eqx.tree_at(lambda m: m.constraint_model.contacts[0].friction, env.sys,
                       replace_fn=lambda f: jnp.full_like(f, value))  # fmt: skip


def test_negative_friction_through_env_sys_is_refused_at_reset(hopper):
    env = mbd.envs.make("hopper", "stand")
    env.sys = _with_friction(env, -0.5)
    with pytest.raises(mbd.ModelError, match="friction.*-0.5.*must be >= 0"):
        env.reset(jax.random.PRNGKey(0))
    env.sys = eqx.tree_at(lambda m: m.mass, hopper.sys, replace_fn=lambda m: m.at[2].set(-1.0))
    with pytest.raises(mbd.ModelError, match="mass -1"):
        env.reset(jax.random.PRNGKey(0))


def test_invalid_members_of_a_randomised_batch_are_flagged_in_info(hopper):
    good = hopper.sys.constraint_model.contacts[0].friction

    def randomise(sys):
        friction = jnp.stack([good, -good, 2 * good])
        models = eqx.tree_at(lambda m: m.constraint_model.contacts[0].friction, sys, friction)
        return models, mbd.envs.model_axes(models, sys)

    env = mbd.envs.DomainRandomizationVmapWrapper(hopper, randomise)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 3))
    np.testing.assert_array_equal(state.info["invalid_parameters"], [0.0, 1.0, 0.0])


def test_a_time_step_the_integrator_cannot_take_is_refused_at_build():
    """The cart-pole's hinge with a stiff spring (1e4 N m/rad on a pole of inertia ~0.03:
    omega ~ 600 rad/s): RK4 at the file's 10 ms is beyond its stability limit
    (h omega < 2.8), at 1 ms within it."""
    env = mbd.envs.make("cartpole", "balance")
    stiff = eqx.tree_at(lambda m: m.forces, env.sys, replace_fn=lambda forces: tuple(
        eqx.tree_at(lambda f: f.stiffness, f, replace_fn=lambda k: k + 1e4)
        if hasattr(f, "stiffness") and type(f).__name__ == "JointDynamics" else f
        for f in forces))  # fmt: skip
    options = dict(observation=env._observation, reward=env._reward, integrator="rk")
    with pytest.raises(ValueError, match="beyond what integrator 'rk' can take"):
        mbd.envs.ModelEnv(stiff, h=0.01, **options)
    mbd.envs.ModelEnv(stiff, h=0.001, **options)
    mbd.envs.ModelEnv(env.sys, h=0.01, **options)  # the file's own spring-free hinge


def test_nan_actions_are_zeroed_counted_and_warned_about():
    """A non-finite action: zero controls for the step (MuJoCo's mjWARN_BADCTRL zeroes
    ctrl), counted in metrics, warned about outside jit (the compliant cart-pole: the rule
    does not depend on the physics, and its step compiles in seconds)."""
    env = mbd.envs.make("cartpole", "balance", contact="compliant")
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    with pytest.warns(RuntimeWarning, match="1 non-finite action entries"):
        nan_step = env.step(state, jnp.asarray([jnp.nan]))
    step = jax.jit(env.step)
    zero_step, pushed = step(state, jnp.asarray([0.0])), step(state, jnp.asarray([0.5]))
    assert float(nan_step.metrics["nan_actions"]) == 1.0
    assert float(zero_step.metrics["nan_actions"]) == 0.0
    assert float(nan_step.done) == 0.0
    np.testing.assert_allclose(nan_step.pipeline_state.qvel, zero_step.pipeline_state.qvel,
                               rtol=0, atol=ROUND_OFF)  # fmt: skip
    assert float(jnp.abs(pushed.pipeline_state.qvel - zero_step.pipeline_state.qvel).max()) > 0


# ------------------------------------------------------------------------- humanoid


def _humanoid_observation(m, d):
    """``Humanoid.get_observation`` (``pure_state=False``) on mjData, from dm_control's
    sources: joint angles, head height, extremities in the torso's frame, the torso's
    vertical, the centre-of-mass velocity, qvel."""
    body = lambda n: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n)  # noqa: E731
    torso = body("torso")
    frame, x = d.xmat[torso].reshape(3, 3), d.xpos[torso]
    extremities = [(d.xpos[body(side + limb)] - x).dot(frame)
                   for side in ("left_", "right_") for limb in ("hand", "foot")]  # fmt: skip
    sensor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "torso_subtreelinvel")
    com_velocity = d.sensordata[m.sensor_adr[sensor] : m.sensor_adr[sensor] + 3]
    return np.hstack([d.qpos[7:], d.xpos[body("head"), 2], np.hstack(extremities),
                      frame[2], com_velocity, d.qvel])  # fmt: skip


@pytest.mark.parametrize("task", [pytest.param("stand", marks=pytest.mark.slow), "walk",
                                  pytest.param("run", marks=pytest.mark.slow)])  # fmt: skip
def test_humanoid_sizes_observation_and_reward_equal_dm_control_formulas(task):
    """67 observations, 21 actions (dm_control's humanoid); at 40 states (the env's
    collision-free draws, lifted, tilted and moving: qvel U(-2, 2), ctrl U(-1.2, 1.2)) the
    observation and the reward equal dm_control's formulas on MuJoCo's own mj_forward to
    1e-12."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = mbd.envs.make("humanoid", task)
        reference = Reference("humanoid", task)
    assert (env.observation_size, env.action_size) == (67, 21)
    m, d = reference.m, reference.d
    n = 40
    rng = np.random.default_rng(7)
    qpos = np.array(jax.jit(jax.vmap(lambda k: env.draw(k)[0]))(
        jax.random.split(jax.random.PRNGKey(7), n)))  # fmt: skip
    qpos[:, :3] += rng.uniform(-0.5, 0.5, (n, 3))
    qvel = rng.uniform(-2, 2, (n, m.nv))
    ctrl = rng.uniform(-1.2, 1.2, (n, m.nu))
    model = env._run_model()

    @jax.jit
    @jax.vmap
    def ours(q, v, u):
        physics = mbd.envs.physics_of(model, q, v, u)
        return env._observation(physics, {}), env._reward(physics, {})

    obs, reward = (np.asarray(x) for x in ours(*map(jnp.asarray, (qpos, qvel, ctrl))))
    expected = []
    for k in range(n):
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[k], qvel[k], ctrl[k]
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(obs[k], _humanoid_observation(m, d), rtol=0, atol=ROUND_OFF)
        expected.append(reference.reward())
    np.testing.assert_allclose(reward, expected, rtol=0, atol=ROUND_OFF)
    assert np.ptp(expected) > 1e-3  # the rewards vary over the states


# ------------------------------------------------------------------------ quadruped


def _quadruped_landing_states(reference, n_states, seed):
    """(qpos, qvel, act, ctrl) of MuJoCo's own runs of the walk task: from qpos0 tilted,
    under random actions, each taken at the first step after 0.5 s + 0.1 s k with two or
    more contacts."""
    m, d = reference.m, reference.d
    rng = np.random.default_rng(seed)
    states = []
    for k in range(n_states):
        mujoco.mj_resetData(m, d)
        mujoco.mju_euler2Quat(d.qpos[3:7], rng.normal(scale=0.2, size=3), "xyz")
        step = 0
        while step < 100 + 20 * k or d.ncon < 2:
            d.ctrl[:] = rng.uniform(-1, 1, m.nu)
            mujoco.mj_step(m, d)
            step += 1
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        states.append((d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.ctrl.copy()))
    return states


def test_quadruped_sizes_observation_and_reward_equal_dm_control_formulas():
    """78 observations, 12 actions (dm_control's quadruped); at 6 states of MuJoCo's own
    runs with the feet on the floor (activations and controls random) the observation, its
    toes' force and torque sensors and the accelerometer from the solved contact forces
    included, and the reward equal dm_control's formulas on mj_forward's ``sensordata`` to
    1e-11 (measured: 2e-12)."""
    env = mbd.envs.make("quadruped", "walk")
    assert (env.observation_size, env.action_size) == (78, 12)
    reference = Reference("quadruped", "walk")
    model, h = env._run_model(), env.h

    @jax.jit
    def ours(q, v, a, u):
        start = mbd.joint_space.JointState(q, v, jnp.zeros(()), a)
        forces = mbd.envs.constraint_forces(model, start, u, h=h, integrator=env.integrator)
        physics = mbd.envs.physics_of(model, q, v, u, forces, a)
        return env._observation(physics, {}), env._reward(physics, {})

    m, d = reference.m, reference.d
    forces = []
    for state in _quadruped_landing_states(reference, 6, seed=3):
        obs, reward = (np.asarray(x) for x in ours(*map(jnp.asarray, state)))
        d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = state
        mujoco.mj_forward(m, d)
        reference.sensed = d.sensordata.copy()
        theirs = reference.observation()
        assert theirs.shape == (78,) and d.ncon > 0  # the force sensors read contact forces
        np.testing.assert_allclose(obs, theirs, rtol=0, atol=1e-11)
        assert abs(float(reward) - reference.reward()) < ROUND_OFF
        forces.append(np.abs(np.sinh(obs[-24:-12])).max())
    assert max(forces) > 10.0  # newtons: more than the toes' weight


@pytest.mark.slow  # the reset and the step, each solving MuJoCo's problem: a minute to compile
@pytest.mark.parametrize("task", ["walk", "run"])
def test_quadruped_rollout_equals_mujoco_c(task):
    """Two members from the env's reset draws (raised from the floor in 1 cm steps until
    MuJoCo finds no contact: one step lower, it finds one) under random actions for 10
    control steps, as they land: rewards to 1e-12, observations to 1e-9, qpos to 1e-10."""
    env = mbd.envs.make("quadruped", task)
    reference = Reference("quadruped", task)
    keys = jax.random.split(jax.random.PRNGKey(2), 2)
    actions = np.random.default_rng(2).uniform(-1, 1, (10, 2, env.action_size))
    ours, draws, end, obs = jaxmbd_rollout(env, keys, actions)
    m, d = reference.m, reference.d
    for q in np.asarray(draws[0]):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        assert d.ncon == 0 and q[2] > 0
        d.qpos[2] = q[2] - 0.01
        mujoco.mj_forward(m, d)
        assert d.ncon > 0
    theirs, started, mujoco_end, mujoco_obs = reference_rollout(reference, draws, actions)
    assert started.all()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(obs, mujoco_obs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(end, mujoco_end, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------ quadruped escape


def test_escape_terrain_is_dm_controls_zoomed_bumps():
    """An episode's terrain is dm_control's: the bowl times the episode's U(0.15, 1) bumps
    zoomed by ``scipy.ndimage.zoom`` (evaluated here on the same bumps), as float32 (MuJoCo's
    ``hfield_data``) to one unit of its last place; each key draws its own terrain."""
    from scipy import ndimage

    from jaxmbd.envs import quadruped

    # dm_control's sizes: 30 x 30 bumps (a 60 m terrain, 2 m apart) zoomed to 201 x 201
    zoom = quadruped.zoom_operator(30, 201 / 30)
    bumps = np.random.default_rng(0).uniform(0.15, 1, (30, 30))
    np.testing.assert_allclose(zoom @ bumps @ zoom.T, ndimage.zoom(bumps, 201 / 30), rtol=0,
                               atol=ROUND_OFF)  # fmt: skip
    env = mbd.envs.make("quadruped", "escape")
    assert (env.observation_size, env.action_size) == (101, 12)
    draw = jax.jit(lambda key: env.draw(key)[2]["terrain"])
    rows, cols = np.ogrid[-1:1:201j, -1:1:201j]
    bowl = 0.5 - np.cos(2 * np.pi * np.clip(np.sqrt(cols**2 + rows**2), 0.04, 1)) / 2
    terrains = []
    for seed in (0, 1):
        key = jax.random.PRNGKey(seed)
        terrain = np.asarray(draw(key))
        # initial_state's draw: the terrain's key first, the pose's second
        drawn = jax.random.uniform(jax.random.split(key)[0], (30, 30), jnp.float64, 0.15, 1.0)
        expected = (bowl * ndimage.zoom(np.asarray(drawn), 201 / 30)).astype(np.float32)
        assert terrain.dtype == np.float32 and terrain.shape == (201, 201)
        np.testing.assert_allclose(terrain, expected, rtol=0, atol=np.spacing(np.float32(1)))
        terrains.append(terrain)
    assert np.abs(terrains[0] - terrains[1]).max() > 0.1


@pytest.mark.slow  # the terrain's narrow phases and 20 rays over it: minutes to compile
def test_escape_observation_and_reward_equal_dm_control_formulas():
    """Escape's 101 observations (rangefinders over the episode's terrain and the origin
    after the common ones) and its reward, at 4 states of MuJoCo's own runs on a drawn
    terrain, equal dm_control's formulas on mj_forward's ``sensordata`` (1e-9: the
    accelerometer and the toes' wrenches come through the constraint solve, stopped at its
    tolerance; 2e-10 measured at one state, 5.5e-11 at the others), MuJoCo's solve started
    from the unconstrained acceleration as the observation's is."""
    env = mbd.envs.make("quadruped", "escape")
    reference = Reference("quadruped", "escape")
    model, h = env._run_model(), env.h
    qpos0, _, info = env.draw(jax.random.PRNGKey(4))

    @jax.jit
    def ours(q, v, a, u, info):
        run = env._episode(model, info)
        start = mbd.joint_space.JointState(q, v, jnp.zeros(()), a)
        forces = mbd.envs.constraint_forces(run, start, u, h=h, integrator=env.integrator)
        physics = mbd.envs.physics_of(run, q, v, u, forces, a)
        return env._observation(physics, info), env._reward(physics, info)

    m, d = reference.m, reference.d
    assert reference.start(np.asarray(qpos0), np.zeros(m.nv), info)
    rng = np.random.default_rng(5)
    rewards, hits = [], 0
    for k in range(4):
        for _ in range(30 + 40 * k):
            d.ctrl[:] = rng.uniform(-1, 1, m.nu)
            mujoco.mj_step(m, d)
        d.qpos[:2] += rng.uniform(-25, 25, 2)  # elsewhere in the bowl, on its slopes
        d.qpos[2] += 0.5 * np.abs(d.qpos[:2]).max()  # above the terrain's rise
        flags = m.opt.disableflags
        m.opt.disableflags = flags | mujoco.mjtDisableBit.mjDSBL_WARMSTART
        mujoco.mj_forward(m, d)
        m.opt.disableflags = flags
        state = (d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.ctrl.copy())
        obs, reward = (np.asarray(x) for x in ours(*map(jnp.asarray, state), info))
        reference.sensed = d.sensordata.copy()
        theirs = reference.observation()
        assert theirs.shape == (101,)
        np.testing.assert_allclose(obs, theirs, rtol=0, atol=1e-9)
        assert abs(float(reward) - reference.reward()) < ROUND_OFF
        rewards.append(float(reward))
        hits += int(np.sum(theirs[-20:] < 1.0))
    assert hits > 0  # some rangefinders see the terrain
    assert max(rewards) > 0  # away from the origin, upright enough


@pytest.mark.slow  # the reset's lift over the terrain and the step: minutes to compile
def test_escape_rollout_equals_mujoco_c():
    """Two members from the env's reset draws (each its own terrain, handed to MuJoCo as
    ``hfield_data``) under random actions for 10 control steps: rewards to 1e-12,
    observations to 1e-9, qpos to 1e-10."""
    env = mbd.envs.make("quadruped", "escape")
    reference = Reference("quadruped", "escape")
    keys = jax.random.split(jax.random.PRNGKey(2), 2)
    actions = np.random.default_rng(2).uniform(-1, 1, (10, 2, env.action_size))
    ours, draws, end, obs = jaxmbd_rollout(env, keys, actions)
    terrains = np.asarray(draws[2]["terrain"])
    assert np.abs(terrains[0] - terrains[1]).max() > 0.1
    theirs, started, mujoco_end, mujoco_obs = reference_rollout(reference, draws, actions)
    assert started.all()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(obs, mujoco_obs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(end, mujoco_end, rtol=0, atol=1e-10)
