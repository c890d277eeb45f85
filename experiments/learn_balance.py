"""Learning to balance the inverted double pendulum by back-propagation through time, in
jaxmbd and in MJX (issue 36 item 7; benchmark: time to train the policy).

    python experiments/learn_balance.py [--iterations 100] [--horizon 1.0] [--batch 64]
        [--learning-rate 1e-2] [--clip 1.0] [--max-age 4] [--pool 256]
        [--eval-horizon 5.0] [--no-mjx | --no-jaxmbd] [--report-only]

gymnasium's ``inverted_double_pendulum.xml`` (read from the installed package, never
copied): a cart on a rail (|x| < 1 m) carrying two 0.6 m poles on hinges, one motor on the
cart (gear 500, ctrl in [-1, 1]), joint damping 0.05, the file's RK4 at dt = 0.01 s.

**Policy**: an MLP (equinox) 6 -> 32 -> 32 -> 1, tanh hidden and output (u in (-1, 1)), of
the observation (x, theta_1, theta_2, x_dot, theta_1_dot, theta_2_dot):
``jaxmbd.actuators.observation`` in jaxmbd, (qpos, qvel) in MuJoCo (the same numbers: the
importer keeps MuJoCo's joint coordinates).

**Training**: ``--batch`` random initial states (gymnasium's reset: qpos ~ U(-0.1, 0.1), qvel
~ 0.1 N(0, 1), seed 0), loss = mean over members and steps of theta_1^2 + theta_2^2
+ 0.5 x^2 + 0.01 (theta_1_dot^2 + theta_2_dot^2) + 0.1 x_dot^2 + 1e-3 u^2 over ``--horizon``
s, optax Adam (``--learning-rate``, the gradient clipped to global norm ``--clip``,
``--iterations`` steps), gradients by BPTT through each run:

* jaxmbd: ``mbd.simulate_batch(models, policy=pi)`` with ``rkmk`` (RK4) in rA at h = 0.01 s
  (implicit-function gradients of each step; the policy shared, its weights dynamic);
* MJX (``mujoco.mjx``, where it imports): ``jax.grad`` through ``lax.scan`` of ``mjx.step``
  with the same policy, vmapped over the batch; the file's RK4 at dt = 0.01 s
  (``opt.enableflags = 0``: MJX refuses the energy flag; for training ``opt.iterations =
  1``, see :func:`mjx_model`).

**Carry-over** (:func:`train`): after each iteration the members still healthy (angles
within 0.2 rad, |x| < 0.9 m, rates below 2) start the next run where theirs ended, at most
``--max-age`` times in a row; the others restart from a pool of ``--pool`` fresh random
starts (seed 2), in order. Plain BPTT over a 1 s horizon from the reset distribution
(the earlier version) kept the angles small inside the horizon and fell soon after it (0 %
balanced for 5 s, first exits at 1.4 s); a terminal cost on the state at 1 s made the
loss diverge (on a reduced model: the results' notes). Carrying the states over trains
the policy on where its own feedback leads, one compiled 1 s program throughout. It does
not yet give a balancing policy on this file (``results/learn_balance.md``).

The same MLP initialisation, initial states, pool, loss, optimiser, horizon and iterations
for both simulators; the restarts depend only on the joint states (the two simulators'
runs agree to ~1e-14 while the cart is off its limits).

**Evaluation**: 100 held-out starts (seed 1) over ``--eval-horizon`` s; success = both hinge
angles within 0.2 rad and |x| < 0.95 m at every step. Each policy in its own simulator and
both in MuJoCo C (``mj_step``, the file's RK4).

Writes ``experiments/results/learn_balance.{csv,json,png,md}`` and the policies
(``learn_balance_policy_{jaxmbd,mjx}.eqx``): the loss curves, success rates, training wall
time (compile apart: first iteration minus the median of the others). ``--no-mjx`` and
``--no-jaxmbd`` run one simulator (the other's rows are kept from the json);
``--report-only`` rewrites the report from the json.
"""

from __future__ import annotations

import argparse
import csv
import functools as ft
import importlib
import json
import platform
import time
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxmbd as mbd

H = 0.01  # the file's timestep
JOINTS = ("slider", "hinge", "hinge2")
SIM = dict(formulation="rA", integrator="rkmk")
ANGLE_TOL, CART_TOL = 0.2, 0.95
RESULTS = Path(__file__).parent / "results"


def model_path() -> Path:
    gym = Path(importlib.import_module("gymnasium").__file__).parent
    return gym / "envs" / "mujoco" / "assets" / "inverted_double_pendulum.xml"


def load_pendulum(path=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the file's visual-only features
        return mbd.load_model(path or model_path())


def random_starts(n: int, seed: int):
    """gymnasium's reset noise: qpos ~ U(-0.1, 0.1), qvel ~ 0.1 N(0, 1); (n, 3) each."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.1, 0.1, (n, 3)), 0.1 * rng.standard_normal((n, 3))


def batch_of_starts(model, qpos, qvel):
    """One jaxmbd model per start (joint states set), stacked into a batch."""
    members = []
    for q, v in zip(qpos, qvel, strict=True):
        member = model
        for k, name in enumerate(JOINTS):
            member = member.with_joint_state(name, q=q[k], qdot=v[k])
        members.append(member)
    return mbd.stack_models(members)


class Policy(eqx.Module):
    """u = MLP(observation) in (-1, 1); time is not an input."""

    mlp: eqx.nn.MLP

    def __call__(self, t, obs):
        return self.mlp(obs)


def make_policy(seed: int = 0, width: int = 32):
    key = jax.random.key(seed)
    mlp = eqx.nn.MLP(6, 1, width, 2, activation=jnp.tanh, final_activation=jnp.tanh, key=key)
    return Policy(mlp)


def trajectory_loss(policy, q, qdot):
    """Mean over members and steps; q, qdot (B, T, 3) on t = k h (k = 0..N); the controls
    are the policy's replies to the states at each step's start."""
    obs = jnp.concatenate([q, qdot], axis=-1)
    u = jax.vmap(jax.vmap(lambda o: policy(0.0, o)))(obs[:, :-1])
    angles = q[..., 1] ** 2 + q[..., 2] ** 2 + 0.5 * q[..., 0] ** 2
    rates = 0.01 * (qdot[..., 1] ** 2 + qdot[..., 2] ** 2) + 0.1 * qdot[..., 0] ** 2
    return jnp.mean(angles + rates) + 1e-3 * jnp.mean(u**2)


def carry_plan(q_end, qdot_end, age, max_age: int):
    """Which members go on from where their last run ended (healthy: both angles within
    ANGLE_TOL, |x| < 0.9 m, every rate below 2, carried at most ``max_age`` times in a
    row); the others restart from the next fresh starts. Engine-agnostic: it sees joint
    coordinates only, so both simulators restart the same members."""
    q_end, qdot_end = np.asarray(q_end), np.asarray(qdot_end)
    keep = (
        (np.abs(q_end[:, 1:]) < ANGLE_TOL).all(1)
        & (np.abs(q_end[:, 0]) < 0.9)
        & (np.abs(qdot_end) < 2.0).all(1)
        & (age < max_age)
        & np.isfinite(q_end).all(1)
    )
    return keep, np.where(keep, age + 1, 0)


def failures(q) -> str:
    """How the failed members failed: angles out of ANGLE_TOL, cart out of CART_TOL."""
    q = np.asarray(q)
    angle = ~(np.abs(q[..., 1:]) < ANGLE_TOL).all(axis=(-2, -1))
    cart = ~(np.abs(q[..., 0]) < CART_TOL).all(-1)
    first = [int(np.argmax(~(np.abs(m[:, 1:]) < ANGLE_TOL).all(-1))) for m in q[angle]]
    median = f", median first exit {np.median(first) * H:.2f} s" if first else ""
    return f"{angle.sum()} angle exits{median}; {cart.sum()} cart exits"


def success(q):
    """Per member: both hinge angles within ANGLE_TOL and |x| < CART_TOL at every step."""
    q = np.asarray(q)
    ok = (np.abs(q[..., 1:]) < ANGLE_TOL).all(axis=(-2, -1)) & (np.abs(q[..., 0]) < CART_TOL).all(
        -1
    )
    return ok & np.isfinite(q).all(axis=(-2, -1))


# ----------------------------------------------------------------------------- jaxmbd


def jaxmbd_states(models, policy, t_end):
    sol = mbd.simulate_batch(models, policy=policy, t_end=t_end, h=H, **SIM)
    q = jnp.stack([sol.joints[n].q for n in JOINTS], axis=-1)
    qdot = jnp.stack([sol.joints[n].qdot for n in JOINTS], axis=-1)
    return q, qdot


BODY_STATE = ("r0", "A0", "rdot0", "omega0")


def body_starts(models):
    """The stacked models' initial body states (r0, A0, rdot0, omega0), (B, nb, ...)."""
    return tuple(getattr(models, k) for k in BODY_STATE)


def jaxmbd_loss(policy, starts, models, t_end):
    """The loss of runs of ``models`` from the body states ``starts``; aux: the runs' last
    body states (the next starts of the members that go on) and joint states."""
    models = eqx.tree_at(lambda m: tuple(getattr(m, k) for k in BODY_STATE), models, starts)
    sol = mbd.simulate_batch(models, policy=policy, t_end=t_end, h=H, **SIM)
    q = jnp.stack([sol.joints[n].q for n in JOINTS], axis=-1)
    qdot = jnp.stack([sol.joints[n].qdot for n in JOINTS], axis=-1)
    end = (sol.r[:, -1], sol.A[:, -1], sol.rdot[:, -1], sol.omega[:, -1])
    return trajectory_loss(policy, q, qdot), (end, q[:, -1], qdot[:, -1])


# ----------------------------------------------------------------------------- MJX


def mjx_model(path=None, *, differentiable: bool = False):
    """The file in MJX (None where MJX does not import). ``differentiable``: one constraint
    solver iteration (``opt.iterations = 1``), the MJX way to make a step reverse-mode
    differentiable (its solver's ``while_loop`` is not); the only constraint is the
    rail's limit at |x| = 1 - 0.01 m, inactive while the cart stays inside, where the solve
    is exact either way."""
    try:
        import mujoco
        from mujoco import mjx
    except ImportError as err:
        print(f"MJX part skipped: {err}")
        return None
    m = mujoco.MjModel.from_xml_path(str(path or model_path()))
    m.opt.enableflags = 0  # MJX refuses mjENBL_ENERGY (the file does not need it)
    if differentiable:
        m.opt.iterations = 1
    return mjx.put_model(m)


def mjx_states(mx, policy, qpos, qvel, t_end):
    """(q, qdot) (B, T, 3) of MJX runs from (qpos, qvel) (B, 3) under ``policy``."""
    from mujoco import mjx

    n = int(round(t_end / H))

    def rollout(q0, v0):
        d = mjx.make_data(mx).replace(qpos=q0, qvel=v0)

        def step(d, k):
            u = policy(k * H, jnp.concatenate([d.qpos, d.qvel]))
            d = mjx.step(mx, d.replace(ctrl=u))
            return d, (d.qpos, d.qvel)

        _, (qs, vs) = jax.lax.scan(step, d, jnp.arange(n))
        return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])

    return jax.vmap(rollout)(qpos, qvel)


def mjx_loss(policy, starts, mx, t_end):
    """As :func:`jaxmbd_loss`, the starts (qpos, qvel) (B, 3)."""
    q, qdot = mjx_states(mx, policy, *starts, t_end)
    return trajectory_loss(policy, q, qdot), ((q[:, -1], qdot[:, -1]), q[:, -1], qdot[:, -1])


# ----------------------------------------------------------------------------- MuJoCo C


def mujoco_success(policy, qpos, qvel, t_end):
    """Each start run in MuJoCo C (the file's RK4) under the policy (evaluated by JAX on
    MuJoCo's qpos, qvel each step); returns the per-member success and the joint states."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(model_path()))
    d = mujoco.MjData(m)
    n = int(round(t_end / H))
    act = jax.jit(jax.vmap(lambda o: policy(0.0, o)))
    out = np.zeros((len(qpos), n + 1, 3))
    datas = []
    for q0, v0 in zip(qpos, qvel, strict=True):
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = q0, v0
        datas.append(d)
    for k in range(n + 1):
        obs = np.stack([np.concatenate([d.qpos, d.qvel]) for d in datas])
        out[:, k] = obs[:, :3]
        if k == n:
            break
        u = np.asarray(act(jnp.asarray(obs)))
        for d, uk in zip(datas, u, strict=True):
            d.ctrl[:] = uk
            mujoco.mj_step(m, d)
    return success(out), out


# ----------------------------------------------------------------------------- training


def _restart(keep, take, end, pool):
    """Per member: the end state where ``keep``, else pool entry ``take``."""
    return jnp.where(keep.reshape((-1,) + (1,) * (end.ndim - 1)), end, pool[take])


def train(loss_fn, policy, starts, pool, iterations: int, *, learning_rate: float = 1e-2,
          clip: float = 1.0, max_age: int = 4, decay: float = 1.0, label="",
          verbose=True):  # fmt: skip
    """Adam (step cosine-decayed to ``decay`` of the first) on the policy's arrays, clipped
    to global norm ``clip``; ``loss_fn(policy, starts) -> (loss, (end, q_end, qdot_end))``.
    **Carry-over:** after each iteration the members that :func:`carry_plan` keeps start
    the next run where this one ended (the state pytree ``end``, leaves (B, ...)); the
    others take the next entries of ``pool`` (the same pytree, leaves (P, ...), in
    order, cyclically). So every run is ``--horizon`` long (one compiled program, gradients
    through a horizon where they stay tame) while the policy meets, and is trained on, the
    states its own feedback leads to after several horizons. Returns (policy, losses,
    seconds per iteration: the first includes the compilation, carried fraction)."""
    schedule = optax.cosine_decay_schedule(learning_rate, iterations, alpha=decay)
    opt = optax.chain(optax.clip_by_global_norm(clip), optax.adam(schedule))
    state = opt.init(eqx.filter(policy, eqx.is_array))

    @mbd.jit
    def update(policy, state, starts):
        (loss, aux), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(policy, starts)
        updates, state = opt.update(grads, state, eqx.filter(policy, eqx.is_array))
        return eqx.apply_updates(policy, updates), state, loss, aux

    batch = jax.tree.leaves(starts)[0].shape[0]
    n_pool = jax.tree.leaves(pool)[0].shape[0]
    age, fresh = np.zeros(batch, int), 0
    losses, times, carried = [], [], []
    for it in range(iterations):
        t0 = time.perf_counter()
        policy, state, loss, (end, q_end, qdot_end) = update(policy, state, starts)
        loss = float(loss)
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        keep, age = carry_plan(q_end, qdot_end, age, max_age)
        take = (fresh + np.cumsum(~keep) - 1) % n_pool  # the next pool entries, in order
        fresh += int((~keep).sum())
        starts = jax.tree.map(ft.partial(_restart, keep, take), end, pool)
        carried.append(float(keep.mean()))
        if verbose and (it % 10 == 0 or it == iterations - 1):
            print(f"  {label} iteration {it:4d}: loss {loss:.5f}, carried {keep.mean():.0%} "
                  f"({times[-1]:.2f} s)", flush=True)  # fmt: skip
    return policy, losses, times, carried


def timing(times):
    run = float(np.median(times[1:]))
    return {"compile_s": times[0] - run, "median_s": run, "min_s": float(np.min(times[1:])),
            "max_s": float(np.max(times[1:])), "total_s": float(np.sum(times))}  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--horizon", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--eval-horizon", type=float, default=5.0)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--clip", type=float, default=1.0, help="gradient clip (global norm)")
    parser.add_argument("--max-age", type=int, default=4,
                        help="horizons a member is carried over at most in a row")  # fmt: skip
    parser.add_argument("--pool", type=int, default=256, help="fresh starts (seed 2)")
    parser.add_argument("--decay", type=float, default=1.0,
                        help="the last step over the first (cosine; 1: constant)")  # fmt: skip
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--no-jaxmbd", action="store_true",
                        help="MJX only (the jaxmbd rows of an earlier run are kept)")  # fmt: skip
    parser.add_argument("--mjx-iterations", type=int, default=None,
                        help="MJX's iterations, if fewer (reported)")  # fmt: skip
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report from learn_balance.json")  # fmt: skip
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    if args.report_only:
        write_results(args, {}, {})
        return
    qpos, qvel = random_starts(args.batch, seed=0)
    qpos_eval, qvel_eval = random_starts(args.held_out, seed=1)
    pool = random_starts(args.pool, seed=2)
    initial = make_policy(seed=0)
    rows, curves = {}, {}

    if not args.no_jaxmbd:
        run_jaxmbd(args, initial, qpos, qvel, pool, qpos_eval, qvel_eval, rows, curves)
    mx = None if args.no_mjx else mjx_model(differentiable=True)
    if mx is not None:
        run_mjx(args, mx, initial, qpos, qvel, pool, qpos_eval, qvel_eval, rows, curves)
    write_results(args, rows, curves)


def run_jaxmbd(args, initial, qpos, qvel, pool, qpos_eval, qvel_eval, rows, curves):
    model = load_pendulum()
    train_batch = batch_of_starts(model, qpos, qvel)
    eval_batch = batch_of_starts(model, qpos_eval, qvel_eval)
    pool_states = body_starts(batch_of_starts(model, *pool))
    print(f"jaxmbd: {args.iterations} iterations, batch {args.batch}, {args.horizon} s "
          f"({int(round(args.horizon / H))} steps)", flush=True)  # fmt: skip
    policy, losses, times, carried = train(
        lambda p, s: jaxmbd_loss(p, s, train_batch, args.horizon),
        initial, body_starts(train_batch), pool_states, args.iterations,
        learning_rate=args.learning_rate, clip=args.clip, max_age=args.max_age,
        decay=args.decay, label="jaxmbd",
    )  # fmt: skip
    t0 = time.perf_counter()
    q, _ = jaxmbd_states(eval_batch, policy, args.eval_horizon)
    own = success(q)
    eval_s = time.perf_counter() - t0
    in_c, q_c = mujoco_success(policy, qpos_eval, qvel_eval, args.eval_horizon)
    print(f"jaxmbd policy: in jaxmbd {failures(q)}; in MuJoCo C {failures(q_c)}")
    eqx.tree_serialise_leaves(RESULTS / "learn_balance_policy_jaxmbd.eqx", policy)
    rows["jaxmbd"] = dict(timing(times), own=own.mean(), mujoco_c=in_c.mean(), eval_s=eval_s,
                          final_loss=losses[-1], iterations=args.iterations,
                          carried=float(np.mean(carried[-10:])))  # fmt: skip
    curves["jaxmbd"] = losses
    print(
        f"jaxmbd: success {own.mean():.0%} in jaxmbd, {in_c.mean():.0%} in MuJoCo C; "
        f"{rows['jaxmbd']}"
    )


def run_mjx(args, mx, initial, qpos, qvel, pool, qpos_eval, qvel_eval, rows, curves):
    iterations = args.mjx_iterations or args.iterations
    print(f"MJX: same policy initialisation, starts, loss, optimiser, horizon; "
          f"{iterations} iterations")  # fmt: skip
    starts = (jnp.asarray(qpos), jnp.asarray(qvel))
    pool_states = (jnp.asarray(pool[0]), jnp.asarray(pool[1]))
    policy_mjx, losses, times, carried = train(
        lambda p, s: mjx_loss(p, s, mx, args.horizon),
        initial, starts, pool_states, iterations,
        learning_rate=args.learning_rate, clip=args.clip, max_age=args.max_age,
        decay=args.decay, label="MJX",
    )  # fmt: skip
    t0 = time.perf_counter()
    mx_eval = mjx_model()  # the file's solver settings for the evaluation
    states = eqx.filter_jit(lambda p, a, b: mjx_states(mx_eval, p, a, b, args.eval_horizon))
    q, _ = states(policy_mjx, jnp.asarray(qpos_eval), jnp.asarray(qvel_eval))
    own = success(q)
    eval_s = time.perf_counter() - t0
    in_c, q_c = mujoco_success(policy_mjx, qpos_eval, qvel_eval, args.eval_horizon)
    print(f"MJX policy: in MJX {failures(q)}; in MuJoCo C {failures(q_c)}")
    eqx.tree_serialise_leaves(RESULTS / "learn_balance_policy_mjx.eqx", policy_mjx)
    rows["MJX"] = dict(timing(times), own=own.mean(), mujoco_c=in_c.mean(), eval_s=eval_s,
                       final_loss=losses[-1], iterations=iterations,
                       carried=float(np.mean(carried[-10:])))  # fmt: skip
    curves["MJX"] = losses
    print(f"MJX: success {own.mean():.0%} in MJX, {in_c.mean():.0%} in MuJoCo C; {rows['MJX']}")


def write_results(args, rows, curves):
    """CSV (loss per iteration), PNG and markdown; a simulator not run this time keeps its
    rows and curve from the last run (``learn_balance.json``)."""
    store = RESULTS / "learn_balance.json"
    old = json.loads(store.read_text()) if store.exists() else {"rows": {}, "curves": {}}
    rows = {**{k: v for k, v in old["rows"].items() if k not in rows}, **rows}
    curves = {**{k: v for k, v in old["curves"].items() if k not in curves}, **curves}
    rows = {k: {f: float(x) for f, x in r.items()} for k, r in rows.items()}
    store.write_text(json.dumps({"rows": rows, "curves": curves}, indent=1))
    with open(RESULTS / "learn_balance.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration"] + [f"loss_{k}" for k in curves])
        for k in range(max(len(c) for c in curves.values())):
            w.writerow([k] + [f"{c[k]:.8g}" if k < len(c) else "" for c in curves.values()])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, c in curves.items():
        ax.semilogy(c, label=name)
    ax.set(xlabel="Adam iteration", ylabel="BPTT loss (mean over 64 starts)",
           title="inverted double pendulum: policy training")  # fmt: skip
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "learn_balance.png", dpi=120)
    lines = [
        "# Learning to balance the inverted double pendulum (gymnasium's file)",
        "",
        f"`python experiments/learn_balance.py --iterations {args.iterations} --horizon "
        f"{args.horizon} --batch {args.batch} --learning-rate {args.learning_rate} --clip "
        f"{args.clip} --max-age {args.max_age} --pool {args.pool} --eval-horizon "
        f"{args.eval_horizon}` (carry-over training: the script's docstring); "
        f"{platform.processor() or platform.machine()}, 2 CPU cores shared with 3 other "
        "engineers' jobs; "
        f"jax {jax.__version__}. Success: both hinge angles within {ANGLE_TOL} rad and "
        f"|x| < {CART_TOL} m over {args.eval_horizon} s from {args.held_out} held-out starts.",
        "",
        "| simulator | iterations | success in own simulator | success in MuJoCo C | final loss "
        "| carried (last 10) | compile (s) | s / iteration (median, min-max) "
        "| training wall (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {int(r['iterations'])} | {r['own']:.0%} | {r['mujoco_c']:.0%} | "
            f"{r['final_loss']:.4g} | {r.get('carried', float('nan')):.0%} | "
            f"{r['compile_s']:.1f} | {r['median_s']:.3f} ({r['min_s']:.3f}-{r['max_s']:.3f}) | "
            f"{r['total_s']:.1f} |"
        )
    if "MJX" not in rows:
        lines += ["", "MJX: not run (not installed, or `--no-mjx`)."]
    (RESULTS / "learn_balance.md").write_text("\n".join(lines) + "\n")
    print(RESULTS / "learn_balance.md")


if __name__ == "__main__":
    main()
