"""Returns of ``jaxmbd.envs`` tasks against MuJoCo C: the same reset draws and the same
random-action sequences, run in jaxmbd and in MuJoCo (``mujoco``'s ``mj_step`` at the
file's integrator and step, ``n_sub_steps`` = dm_control's control step / time step).

dm_control's ``Physics`` does not load under mujoco 4, so the reference here is written on
``mujoco`` directly from dm_control's sources (``dm_control/suite/<domain>.py``): each
task's reward on ``mjData`` after the step (:func:`reward`), and the part of its
``initialize_episode`` that follows the random draw (:func:`finish_reset`: the cheetah's
200 uncontrolled steps, the clock set back to 0; the humanoid's collision-free check).
The draws themselves are jaxmbd's (``env.draw``: the same distributions as dm_control's
randomizers, drawn with JAX's keys), handed to both.

For each task: the largest difference of the per-step rewards over the first
``--compare`` control steps (members whose MuJoCo rollout stays finite; of the
observations too where written here: the hopper's, its touch sensors included), and the mean
episode return of the random policy (actions U(-1, 1)) over ``--steps`` control steps
with its standard error, for both, and whether they agree within 2 standard errors
(of the difference of the two means).

    python -m benchmarks.env_returns [domain/task ...] [--members 64] [--steps 1000]
        [--compare 20] [--seed 0] [--merge]

``--merge`` keeps the earlier rows of the tasks it does not run (each row names its
members and steps).

Writes benchmarks/results/env_returns/{env_returns.json, .md}.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import jaxmbd as mbd
from benchmarks._harness import log, write_results
from jaxmbd.envs._suite import suite_file

RESULTS = Path(__file__).parent / "results" / "env_returns"
#: dm_control's ``_CONTROL_TIMESTEP`` per domain (None: the file's time step)
CONTROL_TIMESTEP = {"hopper": 0.02, "walker": 0.025, "humanoid": 0.025, "quadruped": 0.02}
#: dm_control's settling steps in ``initialize_episode``
SETTLE_STEPS = {"cheetah": 200}
TASKS = ["cartpole/balance", "cartpole/swingup", "acrobot/swingup", "pendulum/swingup",
         "reacher/easy", "hopper/stand", "hopper/hop", "cheetah/run", "walker/stand",
         "walker/walk", "walker/run", "humanoid/stand", "humanoid/walk",
         "humanoid/run", "quadruped/walk", "quadruped/run", "quadruped/escape"]  # fmt: skip
#: the quadruped's Move tasks: their speed (the floor is 20 s x the speed wide)
QUADRUPED_SPEED = {"walk": 0.5, "run": 5.0}


def tolerance(x, bounds=(0.0, 0.0), margin=0.0, sigmoid="gaussian", value_at_margin=0.1):
    """``dm_control/utils/rewards.py`` ``tolerance`` (the sigmoids the suite's rewards use)."""
    x = np.asarray(x, dtype=float)
    lower, upper = bounds
    in_bounds = (lower <= x) & (x <= upper)
    if margin == 0:
        return np.where(in_bounds, 1.0, 0.0)
    with np.errstate(invalid="ignore"):
        d = np.where(x < lower, lower - x, x - upper) / margin
    if sigmoid == "gaussian":
        scale = np.sqrt(-2 * np.log(value_at_margin))
        value = np.exp(-0.5 * (d * scale) ** 2)
    elif sigmoid == "linear":
        scaled = d * (1 - value_at_margin)
        value = np.where(abs(scaled) < 1, 1 - scaled, 0.0)
    elif sigmoid == "quadratic":
        scaled = d * np.sqrt(1 - value_at_margin)
        value = np.where(abs(scaled) < 1, 1 - scaled**2, 0.0)
    else:
        raise ValueError(sigmoid)
    return np.where(in_bounds, 1.0, value)


class Reference:
    """A task of dm_control's suite on MuJoCo C: the file, its step, its reward."""

    def __init__(self, domain: str, task: str):
        self.domain, self.task = domain, task
        if domain == "quadruped":  # make_model's edit of the file
            from jaxmbd.envs import quadruped

            if task == "escape":
                spec = quadruped.make_spec(floor_size=quadruped.ESCAPE_FLOOR_SIZE, terrain=True,
                                           rangefinders=True)  # fmt: skip
            else:
                spec = quadruped.make_spec(floor_size=20 * QUADRUPED_SPEED[task])
            self.m = spec.compile()
        else:
            self.m = mujoco.MjModel.from_xml_path(suite_file(domain))
        self.d = mujoco.MjData(self.m)
        control = CONTROL_TIMESTEP.get(domain, self.m.opt.timestep)
        self.n_sub_steps = round(control / self.m.opt.timestep)

    def id(self, kind: str, name: str) -> int:
        return mujoco.mj_name2id(self.m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), name)

    def sensor(self, name: str):
        i = self.id("SENSOR", name)
        adr, dim = self.m.sensor_adr[i], self.m.sensor_dim[i]
        return self.d.sensordata[adr : adr + dim]

    def start(self, qpos, qvel, info) -> bool:
        """Set the drawn state, then the rest of ``initialize_episode``; False where MuJoCo
        refuses the draw (the humanoid's draw in contact)."""
        m, d = self.m, self.d
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = qpos, qvel
        if self.domain == "reacher":  # the target is a model constant in dm_control
            m.geom_pos[self.id("GEOM", "target"), :2] = info["target"]
        if "terrain" in info:  # Escape.initialize_episode writes the height field's data
            n = m.hfield_nrow[0] * m.hfield_ncol[0]
            m.hfield_data[m.hfield_adr[0] : m.hfield_adr[0] + n] = np.ravel(info["terrain"])
        mujoco.mj_forward(m, d)
        if self.domain in ("humanoid", "quadruped") and d.ncon > 0:
            return False
        for _ in range(SETTLE_STEPS.get(self.domain, 0)):
            mujoco.mj_step(m, d)
        d.time = 0.0
        mujoco.mj_forward(m, d)
        self.sensed = d.sensordata.copy()
        return True

    def step(self, action) -> float:
        """One control step (``n_sub_steps`` mj_step with ctrl = action held), then the
        reward on the data at the new state (dm_control's step ends with ``mj_step1``)."""
        self.d.ctrl[:] = action
        for _ in range(self.n_sub_steps):
            mujoco.mj_step(self.m, self.d)
        # the acceleration-stage sensors (touch) as dm_control reads them: the last
        # mj_step's, computed at its start (mj_forward below recomputes them)
        self.sensed = self.d.sensordata.copy()
        mujoco.mj_forward(self.m, self.d)
        return float(self.reward())

    def observation(self):
        """``get_observation`` of the task (dm_control's sources) on ``mjData``, where written
        here (hopper: its touch sensors included), else None."""
        d = self.d
        if self.domain == "hopper":
            touch = [self.sensed[self.m.sensor_adr[self.id("SENSOR", n)]]
                     for n in ("touch_toe", "touch_heel")]  # fmt: skip
            return np.hstack([d.qpos[1:], d.qvel, np.log1p(touch)])
        if self.domain == "quadruped":
            return self._quadruped_observation()
        return None

    def _sensed(self, *kinds):
        """The readings of the sensors of ``mjtSensor`` kinds ``kinds`` in the file's order:
        the acceleration stage's from the last mj_step (:attr:`sensed`), the others now."""
        m, out = self.m, []
        late = {int(mujoco.mjtSensor.mjSENS_ACCELEROMETER), int(mujoco.mjtSensor.mjSENS_FORCE),
                int(mujoco.mjtSensor.mjSENS_TORQUE)}  # fmt: skip
        wanted = {int(getattr(mujoco.mjtSensor, f"mjSENS_{k}")) for k in kinds}
        for k in range(m.nsensor):
            kind = int(m.sensor_type[k])
            if kind in wanted:
                data = self.sensed if kind in late else self.d.sensordata
                out.append(data[m.sensor_adr[k] : m.sensor_adr[k] + m.sensor_dim[k]])
        return np.concatenate(out)

    def _quadruped_observation(self):
        """``_common_observations`` (dm_control's quadruped.py) on ``mjData``; for escape
        then ``origin`` and ``rangefinder``."""
        m, d = self.m, self.d
        hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        torso = self.id("BODY", "torso")
        common = [d.qpos[m.jnt_qposadr[hinges]], d.qvel[m.jnt_dofadr[hinges]], d.act,
                  self.sensor("velocimeter"), d.xmat[torso, 8],
                  self._sensed("GYRO", "ACCELEROMETER"),
                  np.arcsinh(self._sensed("FORCE", "TORQUE"))]  # fmt: skip
        if self.task != "escape":
            return np.hstack(common)
        origin = -d.xpos[torso] @ d.xmat[torso].reshape(3, 3)
        readings = self._sensed("RANGEFINDER")
        rangefinder = np.where(readings == -1.0, 1.0, np.tanh(readings))
        return np.hstack([*common, origin, rangefinder])

    def reward(self):
        """``get_reward`` of the task (dm_control's sources) on ``mjData``."""
        m, d, task = self.m, self.d, self.task
        xmat = d.xmat.reshape(-1, 3, 3)

        def body(name):
            return self.id("BODY", name)

        if self.domain == "cartpole":  # Balance._get_reward(sparse=False)
            upright = (xmat[body("pole_1"), 2, 2] + 1) / 2
            centered = (1 + tolerance(d.qpos[0], margin=2)) / 2
            small_control = tolerance(d.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic")
            small_control = (4 + small_control[0]) / 5
            small_velocity = (1 + tolerance(d.qvel[1:], margin=5).min()) / 2
            return upright * small_control * small_velocity * centered
        if self.domain == "acrobot":
            tip = d.site_xpos[self.id("SITE", "tip")]
            target = d.site_xpos[self.id("SITE", "target")]
            radius = m.site_size[self.id("SITE", "target"), 0]
            return tolerance(np.linalg.norm(target - tip), bounds=(0, radius), margin=1)
        if self.domain == "pendulum":
            return tolerance(xmat[body("pole"), 2, 2], (math.cos(math.radians(8)), 1))
        if self.domain == "reacher":
            target, finger = self.id("GEOM", "target"), self.id("GEOM", "finger")
            to_target = d.geom_xpos[target, :2] - d.geom_xpos[finger, :2]
            radii = m.geom_size[target, 0] + m.geom_size[finger, 0]
            return tolerance(np.linalg.norm(to_target), (0, radii))
        if self.domain == "hopper":
            height = d.xipos[body("torso"), 2] - d.xipos[body("foot"), 2]
            standing = tolerance(height, (0.6, 2))
            if task == "hop":
                speed = self.sensor("torso_subtreelinvel")[0]
                return standing * tolerance(speed, bounds=(2, math.inf), margin=1,
                                            value_at_margin=0.5, sigmoid="linear")  # fmt: skip
            small = tolerance(d.ctrl, margin=1, value_at_margin=0, sigmoid="quadratic").mean()
            return standing * (small + 4) / 5
        if self.domain == "cheetah":
            speed = self.sensor("torso_subtreelinvel")[0]
            return tolerance(speed, bounds=(10, math.inf), margin=10, value_at_margin=0,
                             sigmoid="linear")  # fmt: skip
        if self.domain == "walker":
            torso = body("torso")
            standing = tolerance(d.xpos[torso, 2], bounds=(1.2, math.inf), margin=0.6)
            stand_reward = (3 * standing + (1 + xmat[torso, 2, 2]) / 2) / 4
            speed = {"stand": 0, "walk": 1, "run": 8}[task]
            if speed == 0:
                return stand_reward
            move = tolerance(self.sensor("torso_subtreelinvel")[0], bounds=(speed, math.inf),
                             margin=speed / 2, value_at_margin=0.5, sigmoid="linear")  # fmt: skip
            return stand_reward * (5 * move + 1) / 6
        if self.domain == "humanoid":
            standing = tolerance(d.xpos[body("head"), 2], bounds=(1.4, math.inf), margin=0.35)
            upright = tolerance(xmat[body("torso"), 2, 2], bounds=(0.9, math.inf),
                                sigmoid="linear", margin=1.9, value_at_margin=0)  # fmt: skip
            small_control = tolerance(d.ctrl, margin=1, value_at_margin=0,
                                      sigmoid="quadratic").mean()  # fmt: skip
            small_control = (4 + small_control) / 5
            com_velocity = self.sensor("torso_subtreelinvel")
            speed = {"stand": 0, "walk": 1, "run": 10}[task]
            if speed == 0:
                dont_move = tolerance(com_velocity[:2], margin=2).mean()
                return small_control * standing * upright * dont_move
            move = tolerance(np.linalg.norm(com_velocity[:2]), bounds=(speed, math.inf),
                             margin=speed, value_at_margin=0, sigmoid="linear")  # fmt: skip
            return small_control * standing * upright * (5 * move + 1) / 6
        if self.domain == "quadruped" and task == "escape":  # Escape.get_reward
            deviation = np.cos(np.deg2rad(20))
            upright = tolerance(xmat[body("torso"), 2, 2], bounds=(deviation, math.inf),
                                sigmoid="linear", margin=1 + deviation,
                                value_at_margin=0)  # fmt: skip
            half = m.hfield_size[0, 0]
            distance = np.linalg.norm(d.site_xpos[self.id("SITE", "workspace")])
            return upright * tolerance(distance, bounds=(half, math.inf), margin=half,
                                       value_at_margin=0, sigmoid="linear")  # fmt: skip
        if self.domain == "quadruped":  # Move.get_reward
            upright = tolerance(xmat[body("torso"), 2, 2], bounds=(1.0, math.inf),
                                sigmoid="linear", margin=2.0, value_at_margin=0)  # fmt: skip
            speed = QUADRUPED_SPEED[task]
            move = tolerance(self.sensor("velocimeter")[0], bounds=(speed, math.inf),
                             margin=speed, value_at_margin=0.5, sigmoid="linear")  # fmt: skip
            return upright * move
        raise ValueError(f"no reference reward for {self.domain}/{task}")


def jaxmbd_rollout(env, keys, actions):
    """(rewards (steps, members), the draws (qpos, qvel, info), qpos at the end (members,
    nq), observations (steps, members, n)): the env's batched reset from ``keys`` and its
    steps under ``actions`` (steps, members, nu)."""
    draws = jax.jit(jax.vmap(env.draw))(keys)
    batched = mbd.envs.VmapWrapper(env)

    @jax.jit
    def run(keys, actions):
        def one(state, a):
            state = batched.step(state, a)
            return state, (state.reward, state.obs)

        end, (rewards, obs) = jax.lax.scan(one, batched.reset(keys), actions)
        return rewards, end.pipeline_state.qpos, obs

    rewards, end, obs = run(keys, jnp.asarray(actions))
    return np.asarray(rewards), draws, np.asarray(end), np.asarray(obs)


def reference_rollout(reference: Reference, draws, actions):
    """(rewards (steps, members), started (members,), qpos at the end (members, nq),
    observations (steps, members, n) or None) of MuJoCo C from jaxmbd's draws."""
    qpos, qvel, info = (jax.tree.map(np.asarray, x) for x in draws)
    steps, members = actions.shape[:2]
    rewards = np.full((steps, members), np.nan)
    started = np.zeros(members, bool)
    end = np.full((members, reference.m.nq), np.nan)
    observations = {}
    for k in range(members):
        started[k] = reference.start(qpos[k], qvel[k], {n: v[k] for n, v in info.items()})
        if not started[k]:
            continue
        for i in range(steps):
            rewards[i, k] = reference.step(actions[i, k])
            obs = reference.observation()
            if obs is not None:
                observations.setdefault(i, {})[k] = obs
            if not np.all(np.isfinite(reference.d.qvel)):
                rewards[i:, k] = 0.0  # a diverged member earns nothing, as the env's
                break
        end[k] = reference.d.qpos
    if not observations:
        return rewards, started, end, None
    n = len(next(iter(observations[0].values())))
    obs = np.full((steps, members, n), np.nan)
    for i, row in observations.items():
        for k, value in row.items():
            obs[i, k] = value
    return rewards, started, end, obs


def compare(task: str, members: int, steps: int, first: int, seed: int) -> dict:
    domain, name = task.split("/")
    env = mbd.envs.make(domain, name)
    reference = Reference(domain, name)
    if reference.n_sub_steps != env.n_substeps or reference.m.opt.timestep != env.h:
        raise AssertionError(f"{task}: the env's step is not dm_control's")
    keys = jax.random.split(jax.random.PRNGKey(seed), members)
    actions = np.random.default_rng(seed).uniform(-1, 1, (steps, members, env.action_size))
    start = time.perf_counter()
    ours, draws, _, obs = jaxmbd_rollout(env, keys, actions)
    wall = time.perf_counter() - start
    theirs, started, _, mujoco_obs = reference_rollout(reference, draws, actions)
    n = min(first, steps)
    agreement = float(np.max(np.abs(ours[:n, started] - theirs[:n, started])))
    obs_agreement = None
    if mujoco_obs is not None:
        obs_agreement = float(np.max(np.abs(obs[:n, started] - mujoco_obs[:n, started])))
    ret_ours, ret_theirs = ours[:, started].sum(0), theirs[:, started].sum(0)
    count = int(started.sum())
    se_ours = float(ret_ours.std(ddof=1) / math.sqrt(count))
    se_theirs = float(ret_theirs.std(ddof=1) / math.sqrt(count))
    se_difference = math.hypot(se_ours, se_theirs)
    difference = float(ret_ours.mean() - ret_theirs.mean())
    row = {
        "task": task, "members": count, "steps": steps, "compared_steps": n,
        "reward_difference": agreement, "observation_difference": obs_agreement,
        "return": float(ret_ours.mean()),
        "return_se": se_ours, "mujoco_return": float(ret_theirs.mean()),
        "mujoco_return_se": se_theirs,
        "within_2_se": bool(abs(difference) <= 2 * se_difference + 1e-12),
        "jaxmbd_wall_s": wall,
    }  # fmt: skip
    log(f"{task}: rewards over {n} steps within {agreement:.1e}; return "
        f"{row['return']:.2f} +- {se_ours:.2f} against MuJoCo {row['mujoco_return']:.2f} +- "
        f"{se_theirs:.2f} ({count} members, {steps} steps, {wall:.0f} s)")  # fmt: skip
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", default=TASKS)
    parser.add_argument("--members", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--compare", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--merge", action="store_true",
                        help="keep the earlier rows of the tasks not run now (each row "
                        "names its settings)")  # fmt: skip
    args = parser.parse_args(argv)
    rows = [compare(t, args.members, args.steps, args.compare, args.seed) for t in args.tasks]
    earlier = RESULTS / "env_returns.json"
    if args.merge and earlier.exists():
        done = {r["task"] for r in rows}
        rows += [r for r in json.loads(earlier.read_text())["rows"] if r["task"] not in done]
        rows.sort(key=lambda r: TASKS.index(r["task"]) if r["task"] in TASKS else len(TASKS))
    lines = [
        "| task | members | per-step reward difference (first steps) | return, jaxmbd | "
        "return, MuJoCo C | within 2 SE |",
        "|---|---|---|---|---|---|",
    ] + [
        f"| {r['task']} | {r['members']} | {r['reward_difference']:.1e} ({r['compared_steps']}) "
        f"| {r['return']:.2f} ± {r['return_se']:.2f} | {r['mujoco_return']:.2f} ± "
        f"{r['mujoco_return_se']:.2f} | {'yes' if r['within_2_se'] else 'no'} |"
        for r in rows
    ]
    write_results("env_returns/env_returns", rows, data={"args": vars(args)},
                  report="# Returns against MuJoCo C\n\n" + "\n".join(lines) + "\n",
                  formats=("json", "md"))  # fmt: skip


if __name__ == "__main__":
    main()
