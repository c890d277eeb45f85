"""jaxmbd.envs against independent references: dm_control's ``rewards.tolerance``, its
tasks' reward and observation formulas evaluated on MuJoCo C's ``mj_forward`` at the same
(qpos, qvel, ctrl) (dm_control's own Physics is not used: the formulas are rewritten here
from ``dm_control/suite/<domain>.py``), MuJoCo's RK4 at h / 100 for the dynamics, central
differences for the gradient; plus the brax interface (jit/vmap over 256 members, the
training wrappers, auto-reset)."""

import math
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compilations
from host_devices import run_on_host_devices
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.envs import physics_of

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("dm_control")
from dm_control.utils import rewards as dm_rewards  # noqa: E402

from jaxmbd.envs._suite import SuiteModel, joint_sampler, suite_file  # noqa: E402

OFF = mujoco.mjtDisableBit


def _mj(domain, flags=0):
    m = mujoco.MjModel.from_xml_path(suite_file(domain))
    m.opt.disableflags |= flags
    return m, mujoco.MjData(m)


# ------------------------------------------------------------------------- tolerance


@pytest.mark.parametrize("sigmoid", mbd.envs.rewards.SIGMOIDS)
def test_tolerance_equals_dm_control(sigmoid):
    x = np.random.default_rng(0).uniform(-4, 4, 500)
    value_at_margin = 0.0 if sigmoid in ("linear", "quadratic", "cosine") else 0.3
    for bounds, margin in [((0.0, 0.0), 1.5), ((-1.0, 0.5), 2.0), ((1.0, math.inf), 0.5),
                           ((-0.2, 0.2), 0.0)]:  # fmt: skip
        expected = dm_rewards.tolerance(x, bounds, margin, sigmoid, value_at_margin)
        got = mbd.envs.tolerance(jnp.asarray(x), bounds, margin, sigmoid, value_at_margin)
        np.testing.assert_allclose(np.asarray(got), expected, rtol=0, atol=ROUND_OFF)


def test_tolerance_gradient_is_finite_at_infinite_bounds():
    g = jax.grad(lambda x: mbd.envs.tolerance(x, (1.0, math.inf), margin=0.5))(2.0)
    assert np.isfinite(g) and g == 0.0


# ------------------------------------------------------------- reward and observation


def _dm_tolerance(*args, **kw):
    return np.asarray(dm_rewards.tolerance(*args, **kw), dtype=float)


def _reference(domain, task, m, d, info):
    """dm_control's observation and reward of ``domain/task`` (its sources' formulas) on
    MuJoCo's data after mj_forward."""
    name = lambda kind, n: mujoco.mj_name2id(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), n)  # noqa: E731
    xmat = d.xmat.reshape(-1, 3, 3)
    body = lambda n: name("BODY", n)  # noqa: E731
    tol = _dm_tolerance
    if domain == "cartpole":  # Balance.get_observation, _get_reward(sparse=False)
        R = xmat[body("pole_1")]
        obs = np.hstack([d.qpos[0], R[2, 2], R[0, 2], d.qvel])
        upright = (R[2, 2] + 1) / 2
        centered = (1 + tol(d.qpos[0], margin=2)) / 2
        small_control = (4 + tol(d.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic")[0]) / 5
        small_velocity = (1 + tol(d.qvel[1:], margin=5).min()) / 2
        return obs, upright * small_control * small_velocity * centered
    if domain == "acrobot":
        arms = [xmat[body("upper_arm")], xmat[body("lower_arm")]]
        obs = np.hstack([[R[0, 2] for R in arms], [R[2, 2] for R in arms], d.qvel])
        dist = np.linalg.norm(
            d.site_xpos[name("SITE", "target")] - d.site_xpos[name("SITE", "tip")]
        )
        return obs, tol(dist, bounds=(0, m.site_size[name("SITE", "target"), 0]), margin=1)
    if domain == "pendulum":
        R = xmat[body("pole")]
        obs = np.hstack([R[2, 2], R[0, 2], d.qvel])
        return obs, tol(R[2, 2], (np.cos(np.deg2rad(8)), 1))
    if domain == "reacher":
        to_target = (
            d.geom_xpos[name("GEOM", "target"), :2] - d.geom_xpos[name("GEOM", "finger"), :2]
        )
        radii = m.geom_size[[name("GEOM", "target"), name("GEOM", "finger")], 0].sum()
        return np.hstack([d.qpos, to_target, d.qvel]), tol(np.linalg.norm(to_target), (0, radii))
    speed = d.sensordata[m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR,
                                                        "torso_subtreelinvel")]]  # fmt: skip
    if domain == "hopper":
        height = d.xipos[body("torso"), 2] - d.xipos[body("foot"), 2]
        standing = tol(height, (0.6, 2))
        obs = np.hstack([d.qpos[1:], d.qvel])  # the touch sensors are compared apart
        if task == "hop":
            return obs, standing * tol(speed, bounds=(2, np.inf), margin=1, value_at_margin=0.5,
                                       sigmoid="linear")  # fmt: skip
        small = tol(d.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic").mean()
        return obs, standing * (small + 4) / 5
    if domain == "cheetah":
        obs = np.hstack([d.qpos[1:], d.qvel])
        return obs, tol(speed, bounds=(10, np.inf), margin=10, value_at_margin=0, sigmoid="linear")
    if domain == "walker":
        obs = np.hstack([xmat[1:][:, [0, 0], [0, 2]].ravel(), d.xpos[body("torso"), 2], d.qvel])
        standing = tol(d.xpos[body("torso"), 2], bounds=(1.2, np.inf), margin=0.6)
        stand_reward = (3 * standing + (1 + xmat[body("torso"), 2, 2]) / 2) / 4
        move = tol(speed, bounds=(1, np.inf), margin=0.5, value_at_margin=0.5, sigmoid="linear")
        return obs, stand_reward * (5 * move + 1) / 6
    raise AssertionError(domain)


def _states_by_stepping(env, n_members=32, n_steps=10, seed=0):
    """(qpos, qvel, ctrl, info) of n_members x n_steps states reached from resets under
    random actions in [-1.2, 1.2] (beyond the control range: the reward sees the raw
    action, as dm_control's ``physics.control()``)."""
    keys = jax.random.split(jax.random.PRNGKey(seed), n_members + 1)
    state = jax.jit(jax.vmap(env.reset))(keys[1:])
    step = jax.jit(jax.vmap(env.step))
    actions = jax.random.uniform(keys[0], (n_steps, n_members, env.action_size), minval=-1.2,
                                 maxval=1.2)  # fmt: skip
    out = []
    for a in actions:
        state = step(state, a)
        out.append((state.pipeline_state.qpos, state.pipeline_state.qvel, a, state.info,
                    state.obs, state.reward))  # fmt: skip
    return out


SLOW = pytest.mark.slow  # the same check on more tasks: compile time, not new coverage
CLASSIC = [("cartpole", "balance"), pytest.param("cartpole", "swingup", marks=SLOW),
           pytest.param("acrobot", "swingup", marks=SLOW),
           pytest.param("pendulum", "swingup", marks=SLOW), ("reacher", "easy")]  # fmt: skip


@pytest.mark.parametrize(("domain", "task"), CLASSIC)
def test_reward_and_observation_equal_dm_control_along_random_actions(domain, task):
    """320 states reached by the env under random actions: its obs and reward equal
    dm_control's formulas on mj_forward at the same qpos/qvel/ctrl to round-off (the states of
    the compliant step: the formulas do not depend on the physics that reached them)."""
    env = mbd.envs.make(domain, task, contact="compliant")
    m, d = _mj(domain)
    worst_obs = worst_reward = 0.0
    rewards = []
    for qpos, qvel, ctrl, info, obs, reward in _states_by_stepping(env):
        for k in range(qpos.shape[0]):
            d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[k], qvel[k], ctrl[k]
            if domain == "reacher":  # the target's place: drawn per episode (geom_pos)
                m.geom_pos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "target"), :2] = info[
                    "target"
                ][k]
            mujoco.mj_forward(m, d)
            expected_obs, expected_reward = _reference(domain, task, m, d, None)
            worst_obs = max(worst_obs, np.abs(np.asarray(obs[k]) - expected_obs).max())
            worst_reward = max(worst_reward, abs(float(reward[k]) - float(expected_reward)))
            rewards.append(float(expected_reward))
    assert worst_obs < ROUND_OFF and worst_reward < ROUND_OFF, (worst_obs, worst_reward)
    assert np.ptp(rewards) > 0.1 * max(rewards) or domain == "pendulum"  # rewards vary


@pytest.mark.slow  # the contact tasks compile for minutes
@pytest.mark.parametrize(("domain", "task"), [("hopper", "stand"), ("hopper", "hop"),
                                              ("cheetah", "run"), ("walker", "walk")])  # fmt: skip
def test_contact_tasks_reward_and_observation_equal_dm_control(domain, task):
    """At 300 random states and controls (joints by dm_control's randomizer, velocities
    U(-2, 2)): obs (hopper: but its touch sensors) and reward equal dm_control's formulas
    on mj_forward (the sensors subtreelinvel included) to 1e-9."""
    env = mbd.envs.make(domain, task)
    m, d = _mj(domain)
    model = env._run_model()
    rng = np.random.default_rng(3)
    keys = jax.random.split(jax.random.PRNGKey(3), 300)
    # dm_control's joint draw (the cheetah's reset also lets it settle: not needed here)
    sample = joint_sampler(SuiteModel(domain))
    qpos = np.array(jax.vmap(lambda k: sample(k, jnp.zeros(m.nq)))(keys))
    qpos[:, :2] += rng.uniform(-0.5, 0.5, (300, 2))
    qvel = rng.uniform(-2, 2, (300, m.nv))
    ctrl = rng.uniform(-1.2, 1.2, (300, m.nu))

    @jax.jit
    @jax.vmap
    def ours(q, v, u):
        physics = physics_of(model, q, v, u)
        return env._observation(physics, {}), env._reward(physics, {})

    obs, reward = ours(jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(ctrl))
    n_obs = m.nq - 1 + m.nv if domain == "hopper" else env.observation_size
    for k in range(300):
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[k], qvel[k], ctrl[k]
        mujoco.mj_forward(m, d)
        expected_obs, expected_reward = _reference(domain, task, m, d, None)
        assert np.abs(np.asarray(obs[k, :n_obs]) - expected_obs).max() < 1e-9
        assert abs(float(reward[k]) - float(expected_reward)) < 1e-9


# ------------------------------------------------------------------------- dynamics


@pytest.mark.slow  # two hopper step programs (a minute each)
def test_hopper_landing_on_its_foot_stays_bounded():
    """With jaxmbd's compliant contact (``contact="compliant"``): a state from
    random-action rollouts of hopper stand (foot 27 mm into the floor,
    falling at 1.5 m/s) and the next four actions: MuJoCo C's step (mj_step, the file's
    options) keeps |qvel| below 8 rad/s, the compliant default step ("implicitfast") below
    five times that (29: its contact is stiffer than MuJoCo's soft one). The linearly
    implicit step with the position Jacobian ("implicit") reaches 219 rad/s (in the
    rollout this state came from it diverged two control steps later)."""
    qpos = [0.495105, -0.587171, 1.049208, -0.034915, -0.050165, 0.860443, -0.563385]
    qvel = [1.994067, 1.533006, -3.465401, -9.447399, -4.684703, 0.451512, 2.443929]
    actions = [[-0.454, -0.625, -0.488, 0.766], [-0.023, 0.74, -0.316, -0.78],
               [-0.389, 0.984, 0.508, 0.398], [0.086, -0.351, 0.384, -0.531]]  # fmt: skip
    m, d = _mj("hopper")
    d.qpos[:], d.qvel[:] = qpos, qvel
    reference = 0.0
    for a in actions:
        d.ctrl[:] = a
        for _ in range(4):
            mujoco.mj_step(m, d)
        reference = max(reference, np.abs(d.qvel).max())
    assert reference < 10

    def worst(env):
        state = env.reset(jax.random.PRNGKey(0))
        ps = state.pipeline_state
        state = state.replace(pipeline_state=type(ps)(jnp.asarray(qpos), jnp.asarray(qvel), ps.t))
        step, out = jax.jit(env.step), 0.0
        for a in actions:
            state = step(state, jnp.asarray(a))
            out = max(
                out, float(jnp.nan_to_num(jnp.abs(state.pipeline_state.qvel), nan=1e300).max())
            )
        return out

    compliant = {"contact": "compliant"}
    assert worst(mbd.envs.make("hopper", "stand", **compliant)) < 5 * reference
    assert worst(mbd.envs.make("hopper", "stand", integrator="implicit", **compliant)) > (
        10 * reference
    )


@pytest.mark.slow  # two cheetah programs (minutes to compile)
def test_cheetah_reset_separates_drawn_self_penetrations():
    """With jaxmbd's compliant contact (``contact="compliant"``): dm_control's joint
    draw can put the back foot 9 cm inside the back thigh (MuJoCo
    collides these links; its soft contact pushes them apart during the 200 settling steps
    of ``Cheetah.initialize_episode``). MuJoCo C from that draw, 0.2 m above the floor
    (mj_step, the file's options, 100 steps: the links pushed apart, the fall), reaches
    |qvel| of 50 rad/s; after the env's reset (0.1 s of settling) no pair penetrates more
    than 5 mm (measured: 42 mm apart) and 100 uncontrolled control steps at the file's
    10 ms stay below MuJoCo's peak (17 rad/s). Without the settling the steps at 10 ms
    diverge (not finite)."""
    key = jax.random.split(jax.random.PRNGKey(0), 64)[1]  # the draw with the deepest overlap
    m, d = _mj("cheetah")
    d.qpos[:] = np.asarray(joint_sampler(SuiteModel("cheetah"))(key, jnp.zeros(m.nq)))
    d.qpos[1] += 0.2  # above the floor: the overlap is the only contact
    reference = 0.0
    for _ in range(100):
        mujoco.mj_step(m, d)
        reference = max(reference, np.abs(d.qvel).max())
    assert reference < 60

    def worst(env):
        state = jax.jit(env.reset)(key)
        step, out = jax.jit(env.step), 0.0
        zero = jnp.zeros(env.action_size)
        for _ in range(100):
            state = step(state, zero)
            v = jnp.nan_to_num(jnp.abs(state.pipeline_state.qvel), nan=1e300)
            out = max(out, float(v.max()))
        return out, state

    settled = mbd.envs.make("cheetah", "run", contact="compliant")
    first = settled.reset(key).pipeline_state
    gap = physics_of(settled._run_model(), first.qpos, first.qvel, jnp.zeros(6)).contacts().gap
    peak = worst(settled)[0]
    unsettled = worst(mbd.envs.make("cheetah", "run", contact="compliant",
                                    compliant_settle_steps=0))[0]  # fmt: skip
    print(
        f"MuJoCo {reference:.1f}, settled {peak:.1f}, unsettled {unsettled:.3g} rad/s, "
        f"gap after the reset {float(jnp.min(gap)):.4f} m"
    )
    assert float(jnp.min(gap)) > -5e-3
    assert peak < reference
    assert unsettled > 1e3


@pytest.mark.parametrize(("domain", "task", "refine"), [
    ("cartpole", "balance", 4), ("acrobot", "swingup", 4),
    pytest.param("pendulum", "swingup", 4, marks=SLOW),
    pytest.param("reacher", "easy", 20, marks=SLOW), ("hopper", "hop", 4),
    pytest.param("cheetah", "run", 10, marks=SLOW)])  # fmt: skip
def test_trajectory_equals_mujoco_rk4(domain, task, refine):
    """The env's qpos/qvel under random actions (RK4, contact and limits off) against
    MuJoCo's RK4 at h / 100 on the same file (contact, limits and friction loss off) over
    1 s: 3e-8 (5.6e-9 measured; 1e-6 for the slow tasks, not measured). The env takes
    ``refine`` RK4 steps of h / refine per control step (the same dt): at the files' h
    (0.01-0.02 s) RK4's own error reaches 1.4e-6 over 1 s on the acrobot (2.2e-6 at h / 4
    on the cheetah), and the reacher's light arm (damping time constant ~0.01 s) needs
    h / 20. The floor robots (hopper, cheetah) fall through the
    floor without contact: their reset leaves the drawn pose where it is, and the hopper's
    touch sensors read 0. The reacher is made at h / 20 (its ``h`` option): at the file's
    0.02 s RK4's linearised step grows 8.9x per step, and ModelEnv refuses that step."""
    if domain == "reacher":
        env = mbd.envs.make(domain, task, integrator="rk", contact="none", limits="none",
                            h=0.02 / refine, n_substeps=refine)  # fmt: skip
    else:
        env = mbd.envs.make(domain, task, integrator="rk", contact="none", limits="none")
        env.h, env.n_substeps = env.h / refine, refine * env.n_substeps
    m, d = _mj(domain, OFF.mjDSBL_CONTACT | OFF.mjDSBL_LIMIT | OFF.mjDSBL_FRICTIONLOSS)
    n = round(1.0 / env.dt)
    state = jax.jit(env.reset)(jax.random.PRNGKey(4))
    actions = np.random.default_rng(4).uniform(-1, 1, (n, env.action_size))
    step = jax.jit(env.step)
    m.opt.timestep = env.h * refine / 100
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d.qpos[:], d.qvel[:] = state.pipeline_state.qpos, state.pipeline_state.qvel
    start = np.array(d.qpos)
    worst = 0.0
    for a in actions:
        state = step(state, jnp.asarray(a))
        d.ctrl[:] = a
        for _ in range(100 * env.n_substeps // refine):
            mujoco.mj_step(m, d)
        ours = state.pipeline_state
        worst = max(worst, np.abs(np.asarray(ours.qpos) - d.qpos).max(),
                    np.abs(np.asarray(ours.qvel) - d.qvel).max() * env.h)  # fmt: skip
    assert np.abs(d.qpos - start).max() > 1e-2  # it moved
    # 5.6e-9 measured; the slow tasks (pendulum, reacher, cheetah) are not measured here
    bound = 1e-6 if domain in ("pendulum", "reacher", "cheetah") else 3e-8
    assert worst < bound, worst


# -------------------------------------------------------------- the brax interface


#: The brax-interface tests run on the cart-pole with jaxmbd's compliant limits: the
#: interface does not depend on the physics, and that step compiles in seconds (MuJoCo's
#: constraint model, the default, is checked in test_envs_mujoco.py)
INTERFACE = {"contact": "compliant"}


@pytest.fixture(scope="module")
def cartpole():
    return mbd.envs.make("cartpole", "balance", **INTERFACE)


def test_jit_vmap_reset_and_step_over_256(cartpole):
    env = cartpole
    keys = jax.random.split(jax.random.PRNGKey(0), 256)
    state = jax.jit(jax.vmap(env.reset))(keys)
    assert state.obs.shape == (256, env.observation_size) and state.reward.shape == (256,)
    state = jax.jit(jax.vmap(env.step))(state, jnp.zeros((256, env.action_size)))
    assert state.pipeline_state.qpos.shape == (256, 2)
    assert np.all(np.isfinite(np.asarray(state.obs)))
    # the members differ: each its own key
    assert np.unique(np.asarray(state.pipeline_state.qpos[:, 0])).size == 256
    # balance's initial distribution (Balance.initialize_episode, swing_up=False)
    first = jax.jit(jax.vmap(env.reset))(keys).pipeline_state
    assert np.abs(first.qpos[:, 0]).max() <= 0.1 and np.abs(first.qpos[:, 1]).max() <= 0.034
    assert 0.008 < float(jnp.std(first.qvel)) < 0.012


def test_wrap_episode_limit_and_auto_reset(cartpole):
    """wrap(): done after episode_length steps, and the member restarts from the state its
    reset drew (its first state), the step counter back to 0. Called plainly (one compiled
    program per method, the model its argument): a new pole mass compiles nothing."""
    env = mbd.envs.wrap(cartpole, episode_length=3)
    state = env.reset(jax.random.split(jax.random.PRNGKey(1), 8))
    first = state.info["first_pipeline_state"]
    step = env.step
    a = 0.5 * jnp.ones((8, 1))
    for k in range(3):
        state = step(state, a)
        assert bool(jnp.all(state.done == (1.0 if k == 2 else 0.0)))
    assert np.array_equal(state.pipeline_state.qpos, first.qpos)
    assert np.array_equal(state.obs, state.info["first_obs"])
    assert np.all(np.asarray(state.info["truncation"]) == 1)
    state = step(state, a)
    assert bool(jnp.all(state.done == 0)) and np.all(np.asarray(state.info["steps"]) == 1)
    assert not np.array_equal(state.pipeline_state.qpos, first.qpos)
    # a diverged member (its state no longer finite) ends its episode with reward 0 and
    # restarts from its first state; the others run on
    ps = state.pipeline_state
    state = state.replace(pipeline_state=eqx.tree_at(lambda p: p.qvel, ps,
                                                     ps.qvel.at[0].set(jnp.inf)))  # fmt: skip
    state = step(state, a)
    assert np.asarray(state.done).tolist() == [1.0] + [0.0] * 7
    assert float(state.reward[0]) == 0.0 and np.all(np.isfinite(np.asarray(state.obs)))
    assert np.array_equal(state.pipeline_state.qpos[0], first.qpos[0])
    model = cartpole.sys
    try:
        cartpole.sys = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].add(1.0))
        with count_compilations() as counts:
            heavier = step(state, a)
        assert counts == {"trace": 0, "compile": 0}, counts
    finally:
        cartpole.sys = model
    lighter = step(state, a)
    assert np.abs(np.asarray(heavier.pipeline_state.qpos - lighter.pipeline_state.qpos)).max() > 0


def test_domain_randomization_over_a_batch_of_models(cartpole):
    """DomainRandomizationVmapWrapper: each member steps with its own pole mass; the
    members agree with the single env run on that member's model. A second
    randomisation (new masses, same shapes) steps through the first wrapper's jitted step
    without a trace or a compile: the masses travel in the state, not in the program."""
    import dataclasses

    def randomizer(masses):
        def randomize(model):
            batched = jax.vmap(lambda m: dataclasses.replace(model, mass=model.mass.at[1].set(m)))(
                masses
            )
            return batched, mbd.envs.model_axes(batched, model)

        return randomize

    masses = jnp.linspace(0.05, 0.5, 4)
    env = mbd.envs.DomainRandomizationVmapWrapper(cartpole, randomizer(masses))
    keys = jnp.stack([jax.random.PRNGKey(2)] * 4)
    reset = jax.jit(env.reset)
    state = reset(keys)
    a = jnp.ones((4, 1))
    step = jax.jit(env.step)
    for _ in range(5):
        state = step(state, a)
    qpos = np.asarray(state.pipeline_state.qpos)
    assert np.unique(qpos[:, 1]).size == 4  # the masses matter
    single = mbd.envs.make("cartpole", "balance", **INTERFACE)
    single.sys = dataclasses.replace(single.sys, mass=single.sys.mass.at[1].set(masses[2]))
    s = single.reset(keys[2])
    single_step = jax.jit(single.step)
    for _ in range(5):
        s = single_step(s, a[2])
    np.testing.assert_allclose(np.asarray(s.pipeline_state.qpos), qpos[2], rtol=0, atol=ROUND_OFF)

    heavier = mbd.envs.DomainRandomizationVmapWrapper(cartpole, randomizer(masses + 0.5))
    other = jax.jit(heavier.reset)(keys)
    with count_compilations() as counts:
        for _ in range(5):
            other = step(other, a)
    assert counts == {"trace": 0, "compile": 0}, counts
    own_step = jax.jit(heavier.step)
    again = jax.jit(heavier.reset)(keys)
    for _ in range(5):
        again = own_step(again, a)
    np.testing.assert_array_equal(np.asarray(other.pipeline_state.qpos),
                                  np.asarray(again.pipeline_state.qpos))  # fmt: skip
    assert np.abs(np.asarray(other.pipeline_state.qpos) - qpos).max() > 1e-3


def test_plain_calls_take_the_model_as_an_argument():
    """``env.reset`` and ``env.step`` called plainly run one compiled program each with
    ``env.sys`` as its argument: new values of the same shapes compile nothing (op by op,
    each step's scan compiled anew with the model inside), and the results equal the
    jitted call's on the new model."""
    import dataclasses

    env = mbd.envs.make("cartpole", "balance", **INTERFACE)
    key, a = jax.random.PRNGKey(1), jnp.ones(1)
    env.step(env.reset(key), a)
    env.sys = dataclasses.replace(env.sys, mass=env.sys.mass.at[1].set(0.7))
    with count_compilations() as counts:
        state = env.step(env.reset(key), a)
    assert counts == {"trace": 0, "compile": 0}, counts
    jitted = jax.jit(env.step)(jax.jit(env.reset)(key), a)
    np.testing.assert_array_equal(np.asarray(state.pipeline_state.qpos),
                                  np.asarray(jitted.pipeline_state.qpos))  # fmt: skip
    env.sys = dataclasses.replace(env.sys, mass=env.sys.mass.at[1].set(-1.0))
    with pytest.raises(mbd.ModelError, match="mass"):
        env.reset(key)


def test_gradient_of_a_rollout_return_equals_central_differences():
    """d(sum of rewards over 10 steps)/d(actions) through env.step, against central
    differences of the same rollout (float64; the Euler step: a smaller program)."""
    env = mbd.envs.make("cartpole", "balance", integrator="euler", **INTERFACE)
    start = env.reset(jax.random.PRNGKey(5))

    @jax.jit
    def ret(actions):
        def one(state, a):
            state = env.step(state, a)
            return state, state.reward

        return jnp.sum(jax.lax.scan(one, start, actions)[1])

    actions = jnp.asarray(np.random.default_rng(5).uniform(-0.8, 0.8, (10, 1)))
    g = np.asarray(jax.grad(ret)(actions))
    eps = 1e-6
    fd = np.zeros_like(g)
    for k in range(10):
        e = np.zeros_like(g)
        e[k, 0] = eps
        fd[k, 0] = (float(ret(actions + e)) - float(ret(actions - e))) / (2 * eps)
    assert np.abs(g).max() > 1e-4
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_angles_are_not_wrapped(cartpole):
    """A hinge spun past pi keeps counting (the integrator's own qpos)."""
    env = cartpole
    s = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    s = s.replace(pipeline_state=s.pipeline_state.__class__(
        jnp.array([0.0, 3.1]), jnp.array([0.0, 20.0]), s.pipeline_state.t))  # fmt: skip
    for _ in range(3):
        s = step(s, jnp.zeros(1))
    assert float(s.pipeline_state.qpos[1]) > math.pi + 0.3


def test_brax_training_wrappers_run_on_the_env(cartpole):
    """brax's own wrappers (brax.envs.wrappers.training.wrap) on the env (brax is in the
    dev extra: an install without it skips; one where it fails to import fails)."""
    training = pytest.importorskip("brax.envs.wrappers.training")
    env = training.wrap(cartpole, episode_length=2)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
    for _ in range(2):
        state = jax.jit(env.step)(state, jnp.zeros((4, 1)))
    assert bool(jnp.all(state.done == 1))


def test_make_names_the_tasks_on_a_wrong_name():
    with pytest.raises(ValueError, match="cartpole/balance"):
        mbd.envs.make("cartpole", "juggle")


def test_gymnasium_vector_env_adapter(cartpole):
    """gymnasium's VectorEnv API over the batched step: spaces, shapes, truncation at the
    time limit with the next episode's first observation and the final one in info; the
    rewards equal the env's own."""
    from jaxmbd.envs.gymnasium_adapter import GymnasiumVectorEnv

    envs = GymnasiumVectorEnv(cartpole, num_envs=4, episode_length=2)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 5) and envs.action_space.shape == (4, 1)
    assert envs.single_action_space.low[0] == -1 and envs.single_action_space.high[0] == 1
    first = obs.copy()
    actions = np.full((4, 1), 0.5)
    obs1, reward, terminated, truncated, info = envs.step(actions)
    assert reward.shape == (4,) and not truncated.any() and not terminated.any()
    obs2, _, terminated, truncated, info = envs.step(actions)
    assert truncated.all() and not terminated.any()
    np.testing.assert_array_equal(obs2, first)  # same-step auto-reset
    assert info["final_obs"].shape == (4, 5) and not np.array_equal(info["final_obs"], first)


def test_wrappers_split_the_batch_over_devices():
    """``wrap(..., devices=...)`` splits the batch over two host devices (a subprocess with
    ``--xla_force_host_platform_device_count=2``): the states live on both devices and equal
    the one-device wrapper's, with and without domain randomisation; a batch that does not
    split evenly is refused with the sizes."""
    script = textwrap.dedent("""
        import equinox as eqx, jax, jax.numpy as jnp, numpy as np
        import jaxmbd as mbd
        from jaxmbd.envs import model_axes, wrap
        assert len(jax.devices()) == 2
        env = mbd.envs.make("cartpole", "balance", contact="compliant")
        keys = jax.random.split(jax.random.PRNGKey(0), 6)
        actions = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (3, 6, 1)))

        def masses(sys):
            batched = eqx.tree_at(lambda s: s.mass, sys,
                                  jnp.stack([sys.mass * (1 + 0.1 * k) for k in range(6)]))
            return batched, model_axes(batched, sys)

        for randomization_fn in (None, masses):
            states = []
            for devices in (None, jax.devices()):
                env_b = wrap(env, randomization_fn=randomization_fn, devices=devices)
                state, step = jax.jit(env_b.reset)(keys), jax.jit(env_b.step)
                for a in actions:
                    state = step(state, a)
                states.append(state)
            assert len(states[1].obs.sharding.device_set) == 2
            assert len(states[0].obs.sharding.device_set) == 1
            for x, y in zip(jax.tree.leaves(states[0]), jax.tree.leaves(states[1])):
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-12)
        two = wrap(env, devices=jax.devices())
        try:
            two.reset(keys[:5])
        except ValueError as e:
            assert "5 members" in str(e) and "2 devices" in str(e), e
        else:
            raise AssertionError("an uneven batch was accepted")
        print("OK")
    """)
    assert "OK" in run_on_host_devices(script, 2)
