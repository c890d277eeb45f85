"""Learning to balance the inverted double pendulum by back-propagation through time, in
jaxmbd and in MJX (benchmark: time to train the policy).

    python -m benchmarks.learn_balance [--stages 10:30,25:30,50:40,100:60]
        [--batch 64] [--learning-rate 3e-3] [--clip 1.0] [--decay 0.1] [--discount 1.0]
        [--eval-horizon 5.0] [--no-mjx | --no-jaxmbd] [--skip-lqr-check]
        [--lqr-only | --compare-only | --report-only]

gymnasium's ``inverted_double_pendulum.xml`` (read from the installed package, never
copied): a cart on a rail (|x| < 1 m) carrying two 0.6 m poles on hinges, one motor on the
cart (gear 500, ctrl in [-1, 1]), joint damping 0.05, the file's RK4 at dt = 0.01 s. The
state x = (x, theta_1, theta_2, x_dot, theta_1_dot, theta_2_dot) (theta_2 relative to the
first pole): ``jaxmbd.actuators.observation`` in jaxmbd, (qpos, qvel) in MuJoCo (the same
numbers: the importer keeps MuJoCo's joint coordinates).

**Is the task feasible? (LQR, :func:`lqr_check`)** ``mbd.linearize`` about the upright pose,
mapped to the joint coordinates (checked against central differences of MuJoCo's
``mj_forward``), then discrete-time LQR (zero-order hold at h = 0.01 s, weights
:data:`Q_WEIGHTS`, :data:`R_WEIGHT`). Its gain, clipped to the ctrlrange, run from the 100
held-out starts in jaxmbd and in MuJoCo C, is the reference a learned policy is measured
against: the starts, the control authority (one unit of ctrl accelerates the cart at 42
m/s^2) and the success criterion are consistent if it balances nearly all starts. It
balances 95 % (the report); the others recover but swing the first pole past 0.2 rad in the
first 0.3 s, and a linear program on the linear model (any |u| <= 1) bounds what any
controller can do: 2 of the 100 starts cannot be kept inside 0.2 rad at all.

**Policy**: an MLP (equinox) 6 -> 32 -> 32 -> 1, tanh hidden and output (u in (-1, 1)), of
the observation divided by :data:`OBS_SCALE` (the reset spread of the angles, about unit
rates), its last layer scaled by 0.01 at the initialisation so that u ~ 0 at the start
(a large random feedback throws the poles over before the gradient has anything to say).
Trained from that random initialisation: nothing of the LQR gain enters the weights.

**Loss** (:func:`horizon_loss`): the LQR's own cost over a horizon of n steps, then its
cost-to-go::

    mean over the batch of  h sum_{k<n} gamma^k (x_k^T Q x_k + R u_k^2) + gamma^n x_n^T P x_n

P the (discounted) discrete Riccati solution of the same Q, R: the value of the optimal
linear feedback from x_n on, a principled estimate of the rest of the infinite-horizon
cost, so a short horizon already asks for states the pendulum can be held from (without
it, BPTT kept the poles up inside the horizon and let them fall just after it: the
earlier versions of this script, 0 % balanced). Gradients by BPTT through each run:

* jaxmbd: ``mbd.simulate_batch(models, policy=pi)`` with ``rkmk`` (RK4) in rA at h = 0.01 s
  (implicit-function gradients of each step; the policy shared, its weights dynamic);
* MJX (``mujoco.mjx``, where it imports): ``jax.grad`` through ``lax.scan`` of ``mjx.step``
  with the same policy, vmapped over the batch; the file's RK4 at dt = 0.01 s
  (``opt.enableflags = 0``: MJX refuses the energy flag; for training ``opt.iterations =
  1``, see :func:`mjx_model`).

**Training** (:func:`train`): ``--batch`` fixed initial states (gymnasium's reset: qpos ~
U(-0.1, 0.1), qvel ~ 0.1 N(0, 1), seed 0), optax Adam (``--learning-rate``, cosine-decayed
to ``--decay`` of it, the gradient clipped to global norm ``--clip``). **Horizon
curriculum** ``--stages n:iterations,...``: short horizons first (on an unstable system
the gradient through a long run of a poor policy explodes), then longer. Every run
simulates the longest horizon and n is a dynamic argument of the loss (the weights of the
steps past n are zero, the terminal cost is read at step n), so each simulator compiles
**one** gradient program for the whole curriculum.

The same MLP initialisation, initial states, loss, optimiser and curriculum for both
simulators.

**Evaluation**: 100 held-out starts (seed 1) over ``--eval-horizon`` s; success = both hinge
angles within 0.2 rad and |x| < 0.95 m at every step. Each policy in its own simulator and
in MuJoCo C (``mj_step``, the file's RK4).

Writes ``benchmarks/results/learn_balance.{csv,json,png,md}`` and the policies
(``learn_balance_policy_{jaxmbd,mjx}.eqx``): the loss curves, success rates, training wall
time (compile apart: the first iteration minus the median of the others). ``--no-mjx`` and
``--no-jaxmbd`` run one simulator (the other's rows are kept from the json); ``--lqr-only``
runs the LQR check alone, ``--skip-lqr-check`` keeps its row from the json;
``--compare-only`` runs :func:`compare_with_lqr` on the stored policies (also done after
training); ``--report-only`` rewrites the report from the json.
"""

from __future__ import annotations

import argparse
import csv
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
from scipy.linalg import expm, solve_discrete_are

import jaxmbd as mbd
from benchmarks._harness import RESULTS  # noqa: E402
from benchmarks.problems import control_model_path

H = 0.01  # the file's timestep
JOINTS = ("slider", "hinge", "hinge2")
SIM = dict(formulation="rA", integrator="rkmk")
ANGLE_TOL, CART_TOL = 0.2, 0.95
#: LQR state weights on (x, theta_1, theta_2, x_dot, theta_1_dot, theta_2_dot) and the
#: control weight: the LQR reference's and the learner's running cost alike.
Q_WEIGHTS = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
R_WEIGHT = 1.0
#: The policy's input is the observation divided by this.
OBS_SCALE = (0.5, 0.1, 0.1, 1.0, 1.0, 1.0)


def model_path() -> Path:
    return control_model_path("inverted_double_pendulum")


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


# ----------------------------------------------------------------------------- policies


class Policy(eqx.Module):
    """u = MLP(observation / OBS_SCALE) in (-1, 1); time is not an input."""

    mlp: eqx.nn.MLP
    scale: tuple[float, ...] = eqx.field(static=True, default=OBS_SCALE)

    def __call__(self, t, obs):
        return self.mlp(obs / jnp.asarray(self.scale))


def make_policy(seed: int = 0, width: int = 32, *, last_layer: float = 1e-2):
    """equinox's default initialisation, the last layer's weights and bias times
    ``last_layer`` (u ~ 0 at the start)."""
    key = jax.random.key(seed)
    mlp = eqx.nn.MLP(6, 1, width, 2, activation=jnp.tanh, final_activation=jnp.tanh, key=key)
    last = mlp.layers[-1]
    mlp = eqx.tree_at(lambda m: (m.layers[-1].weight, m.layers[-1].bias), mlp,
                      (last.weight * last_layer, last.bias * last_layer))  # fmt: skip
    return Policy(mlp)


class LinearPolicy(eqx.Module):
    """u = clip(-K x, -1, 1): the LQR reference."""

    K: jax.Array

    def __call__(self, t, obs):
        return jnp.clip(-self.K @ obs, -1.0, 1.0)


# ----------------------------------------------------------------------------- LQR


def joint_linearization(model):
    """Continuous (A, B) in the joint coordinates x about the upright pose at rest (the
    file's initial state), from ``mbd.linearize`` (minimal coordinates (z, zeta) on a basis
    N of the constraint null space). In rA a body's tangent row is (translation, body-frame
    rotation vector); the bodies' frames are the world's at the upright pose, so x is the
    cart's translation along x, theta_1 the pole's rotation about y, theta_2 the second
    pole's minus the first's; T maps (z, zeta) to (q, q_dot) (at rest the same matrix for
    positions and rates)."""
    lin = mbd.linearize(model, "initial")
    rows = np.asarray(lin.basis).reshape(len(lin.body_names), 6, -1)
    cart, pole, pole2 = (rows[lin.body_names.index(n)] for n in ("cart", "pole", "pole2"))
    C = np.stack([cart[0], pole[4] - cart[4], pole2[4] - pole[4]])
    T = np.kron(np.eye(2), C)
    return T @ np.asarray(lin.A) @ np.linalg.inv(T), T @ np.asarray(lin.B)


def mujoco_linearization(eps: float = 1e-6):
    """The same (A, B) from central differences of MuJoCo C's ``mj_forward`` (qacc) about
    qpos = qvel = ctrl = 0: the check of :func:`joint_linearization`."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(model_path()))
    d = mujoco.MjData(m)

    def f(x, u):
        d.qpos[:], d.qvel[:], d.ctrl[:] = x[:3], x[3:], u
        mujoco.mj_forward(m, d)
        return np.concatenate([d.qvel, d.qacc])

    e = np.eye(6) * eps
    A = np.stack([(f(e[k], [0.0]) - f(-e[k], [0.0])) / (2 * eps) for k in range(6)], 1)
    B = ((f(np.zeros(6), [eps]) - f(np.zeros(6), [-eps])) / (2 * eps))[:, None]
    return A, B


def lqr(A, B, *, discount: float = 1.0):
    """Discrete-time LQR of the zero-order-hold discretisation at H of x_dot = A x + B u,
    stage cost h (x^T Q x + R u^2), discount per step: (K, P), u = -K x, cost-to-go
    x^T P x (the discounted Riccati equation is the plain one with sqrt(discount) A_d,
    sqrt(discount) B_d)."""
    n, m = B.shape
    M = expm(np.block([[A, B], [np.zeros((m, n + m))]]) * H)
    Ad, Bd = M[:n, :n], M[:n, n:]
    Q, R = np.diag(Q_WEIGHTS) * H, np.eye(m) * R_WEIGHT * H
    g = np.sqrt(discount)
    P = solve_discrete_are(g * Ad, g * Bd, Q, R)
    K = discount * np.linalg.solve(R + discount * Bd.T @ P @ Bd, Bd.T @ P @ Ad)
    return K, P


def best_possible(A, B, qpos, qvel, steps: int = 150):
    """Per start, the smallest max(|theta_1|, |theta_2|) over ``steps`` steps that any
    control |u| <= 1 (held per step) reaches on the *linear* model, keeping |x| <= CART_TOL
    and ending with the poles upright at rest (a linear program in u and the bound): the
    starts whose value exceeds ANGLE_TOL cannot succeed (to first order)."""
    from scipy.optimize import linprog

    n, m = B.shape
    M = expm(np.block([[A, B], [np.zeros((m, n + m))]]) * H)
    Ad, Bd = M[:n, :n], M[:n, n:]
    powers = [np.eye(n)]
    for _ in range(steps):
        powers.append(Ad @ powers[-1])
    # x_k = Ad^k x0 + G_k u, G_k[:, j] = Ad^(k-1-j) Bd for j < k
    G = np.zeros((steps + 1, n, steps))
    for k in range(1, steps + 1):
        for j in range(k):
            G[k, :, j] = (powers[k - 1 - j] @ Bd)[:, 0]
    out = []
    for x0 in np.concatenate([qpos, qvel], axis=1):
        free = np.stack([p @ x0 for p in powers])  # (steps + 1, n)
        rows, rhs = [], []
        for i in (1, 2):  # |theta_i| <= t
            rows += [np.c_[G[1:, i], -np.ones(steps)], np.c_[-G[1:, i], -np.ones(steps)]]
            rhs += [-free[1:, i], free[1:, i]]
        rows += [np.c_[G[1:, 0], np.zeros(steps)], np.c_[-G[1:, 0], np.zeros(steps)]]
        rhs += [CART_TOL - free[1:, 0], CART_TOL + free[1:, 0]]
        end = [1, 2, 4, 5]
        res = linprog(np.r_[np.zeros(steps), 1.0], A_ub=np.concatenate(rows),
                      b_ub=np.concatenate(rhs), A_eq=np.c_[G[-1, end], np.zeros(len(end))],
                      b_eq=-free[-1, end], bounds=[(-1, 1)] * steps + [(0, None)])  # fmt: skip
        out.append(res.fun if res.status == 0 else np.inf)
    return np.asarray(out)


def lqr_check(A, B, qpos_eval, qvel_eval, eval_horizon):
    """The feasibility check (module docstring) on (A, B) of :func:`joint_linearization`:
    its agreement with MuJoCo, LQR, its clipped run from the held-out starts in jaxmbd and
    in MuJoCo C, and the linear-programming bound. Returns the report's row."""
    model = load_pendulum()
    A_mj, B_mj = mujoco_linearization()
    K, P = lqr(A, B)
    policy = LinearPolicy(jnp.asarray(K))
    q, _ = jaxmbd_states(batch_of_starts(model, qpos_eval, qvel_eval), policy, eval_horizon)
    own = success(q)
    in_c, q_c = mujoco_success(policy, qpos_eval, qvel_eval, eval_horizon)
    bound = best_possible(A, B, qpos_eval, qvel_eval)
    u0 = np.abs(np.concatenate([qpos_eval, qvel_eval], 1) @ K.T)
    row = dict(own=own.mean(), mujoco_c=in_c.mean(),
               A_vs_mujoco=np.abs(A - A_mj).max(), B_vs_mujoco=np.abs(B - B_mj).max(),
               B_cart=B[3, 0], unstable_pole=np.max(np.linalg.eigvals(A).real),
               infeasible=float((bound > ANGLE_TOL).sum()), bound_max=bound.max(),
               saturated_at_start=float((u0 > 1).mean()),
               max_cart=float(np.abs(q_c[..., 0]).max()))  # fmt: skip
    print(f"LQR: K = {np.round(K, 3)}; success {own.mean():.0%} in jaxmbd ({failures(q)}), "
          f"{in_c.mean():.0%} in MuJoCo C ({failures(q_c)}); {row}", flush=True)  # fmt: skip
    return row


# ----------------------------------------------------------------------------- loss


def horizon_loss(policy, q, qdot, n, cost):
    """Mean over the batch of h sum_{k<n} gamma^k (x_k^T Q x_k + R u_k^2) + gamma^n x_n^T P
    x_n; q, qdot (B, N + 1, 3) on t = k h; ``n`` (traced, n <= N) the horizon; ``cost`` =
    (Q, R, P, gamma) arrays. The controls are the policy's replies to the states at each
    step's start (as in the run); the steps past n carry no weight (no gradient)."""
    Q, R, P, gamma = cost
    x = jnp.concatenate([q, qdot], axis=-1)
    u = jax.vmap(jax.vmap(lambda o: policy(0.0, o)))(x[:, :-1])[..., 0]
    stage = jnp.einsum("bki,ij,bkj->bk", x[:, :-1], Q, x[:, :-1]) + R * u**2
    k = jnp.arange(stage.shape[1])
    weight = jnp.where(k < n, gamma**k, 0.0) * H
    x_n = jnp.take(x, n, axis=1)
    terminal = gamma**n * jnp.einsum("bi,ij,bj->b", x_n, P, x_n)
    return jnp.mean(jnp.sum(weight * stage, axis=1) + terminal)


def loss_constants(P, discount):
    return (jnp.diag(jnp.asarray(Q_WEIGHTS)), jnp.asarray(R_WEIGHT), jnp.asarray(P),
            jnp.asarray(discount))  # fmt: skip


# ----------------------------------------------------------------------------- jaxmbd


def jaxmbd_states(models, policy, t_end):
    sol = mbd.simulate_batch(models, policy=policy, t_end=t_end, h=H, **SIM)
    q = jnp.stack([sol.joints[n].q for n in JOINTS], axis=-1)
    qdot = jnp.stack([sol.joints[n].qdot for n in JOINTS], axis=-1)
    return q, qdot


def jaxmbd_loss(policy, models, n, cost, steps: int):
    """:func:`horizon_loss` of ``steps``-step runs of the batched ``models``."""
    q, qdot = jaxmbd_states(models, policy, steps * H)
    return horizon_loss(policy, q, qdot, n, cost)


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


def mjx_loss(policy, starts, n, cost, steps: int, mx):
    """As :func:`jaxmbd_loss`, the starts (qpos, qvel) (B, 3)."""
    q, qdot = mjx_states(mx, policy, *starts, steps * H)
    return horizon_loss(policy, q, qdot, n, cost)


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


def compare_with_lqr(A, B, qpos_eval, qvel_eval, eval_horizon):
    """The clipped LQR and the stored trained policies side by side, each run in MuJoCo C
    from the held-out starts: which starts fail, how many fall (an angle past 0.5 rad or
    the cart off |x| < CART_TOL: not recovered), and the policy's linear gain at the
    upright pose (-du/dx, forward-mode; the LQR's is K), to see what BPTT learned."""
    K, _ = lqr(A, B)
    policies = {"LQR": LinearPolicy(jnp.asarray(K))}
    for name, file in (("jaxmbd", "jaxmbd"), ("MJX", "mjx")):
        path = RESULTS / f"learn_balance_policy_{file}.eqx"
        if path.exists():
            policies[name] = eqx.tree_deserialise_leaves(path, make_policy(seed=0))
    out = {}
    for name, policy in policies.items():
        ok, q = mujoco_success(policy, qpos_eval, qvel_eval, eval_horizon)
        fell = (np.abs(q[..., 1:]) > 0.5).any(axis=(1, 2)) | (np.abs(q[..., 0]) >= CART_TOL).any(1)
        gain = -np.asarray(jax.jacfwd(lambda o, p=policy: p(0.0, o))(jnp.zeros(6)))[0]
        out[name] = dict(failed=np.flatnonzero(~ok).tolist(), fell=int(fell.sum()),
                         gain=gain.tolist())  # fmt: skip
        print(f"{name} in MuJoCo C: failed starts {out[name]['failed']}, fell {int(fell.sum())},"
              f" -du/dx at upright {np.round(gain, 3)}", flush=True)  # fmt: skip
    bound = best_possible(A, B, qpos_eval, qvel_eval)
    out["infeasible"] = np.flatnonzero(bound > ANGLE_TOL).tolist()
    return out


# ----------------------------------------------------------------------------- training


def parse_stages(text: str):
    """``"10:40,25:40"`` -> [(10, 40), (25, 40)]: (horizon in steps, Adam iterations)."""
    try:
        stages = [tuple(int(v) for v in part.split(":")) for part in text.split(",")]
    except ValueError:
        stages = None
    if not stages or any(len(s) != 2 or s[0] < 1 or s[1] < 1 for s in stages):
        raise SystemExit(f"--stages: expected 'steps:iterations,...' with positive "
                         f"integers, got {text!r}")  # fmt: skip
    return stages


def train(loss_fn, policy, data, stages, *, learning_rate: float = 3e-3, clip: float = 1.0,
          decay: float = 0.1, label="", verbose=True):  # fmt: skip
    """Adam (step cosine-decayed to ``decay`` of the first over all iterations) on the
    policy's arrays, the gradient clipped to global norm ``clip``; ``loss_fn(policy, data,
    n) -> loss``, n the horizon of the current stage (a traced integer: one compiled
    program for every stage). An iteration whose loss or gradient is not finite is skipped
    (counted). Returns (policy, losses, horizons, seconds per iteration: the first includes
    the compilation, skipped)."""
    total = sum(it for _, it in stages)
    schedule = optax.cosine_decay_schedule(learning_rate, total, alpha=decay)
    opt = optax.chain(optax.clip_by_global_norm(clip), optax.adam(schedule))
    state = opt.init(eqx.filter(policy, eqx.is_array))

    @mbd.jit
    def update(policy, state, data, n):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(policy, data, n)
        finite = jnp.isfinite(loss) & jnp.all(
            jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)])
        )
        updates, new_state = opt.update(grads, state, eqx.filter(policy, eqx.is_array))
        new = eqx.apply_updates(policy, updates)
        keep = lambda a, b: jnp.where(finite, a, b)  # noqa: E731
        new = eqx.combine(jax.tree.map(keep, eqx.filter(new, eqx.is_array),
                                       eqx.filter(policy, eqx.is_array)), policy)  # fmt: skip
        new_state = jax.tree.map(keep, new_state, state)
        return new, new_state, loss, finite

    losses, horizons, times, skipped = [], [], [], 0
    it = 0
    for n, iterations in stages:
        for _ in range(iterations):
            t0 = time.perf_counter()
            policy, state, loss, finite = update(policy, state, data, jnp.asarray(n))
            loss = float(loss)
            times.append(time.perf_counter() - t0)
            losses.append(loss)
            horizons.append(n)
            skipped += not bool(finite)
            if verbose and (it % 10 == 0 or it == total - 1):
                print(f"  {label} iteration {it:4d} (horizon {n * H:.2f} s): loss {loss:.5f} "
                      f"({times[-1]:.2f} s)", flush=True)  # fmt: skip
            it += 1
    return policy, losses, horizons, times, skipped


def timing(times):
    run = float(np.median(times[1:]))
    total = float(np.sum(times))
    compile_s = times[0] - run
    return {"compile_s": compile_s, "median_s": run, "min_s": float(np.min(times[1:])),
            "max_s": float(np.max(times[1:])), "total_s": total,
            "train_s": total - compile_s}  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default="10:30,25:30,50:40,100:60",
                        help="horizon curriculum: steps:iterations,...")  # fmt: skip
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--eval-horizon", type=float, default=5.0)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--clip", type=float, default=1.0, help="gradient clip (global norm)")
    parser.add_argument("--decay", type=float, default=0.1,
                        help="the last step over the first (cosine; 1: constant)")  # fmt: skip
    parser.add_argument("--discount", type=float, default=1.0, help="per step (0.01 s)")
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--no-jaxmbd", action="store_true",
                        help="MJX only (the jaxmbd rows of an earlier run are kept)")  # fmt: skip
    parser.add_argument("--lqr-only", action="store_true", help="the LQR check alone")
    parser.add_argument("--skip-lqr-check", action="store_true",
                        help="keep the LQR check's row from the json")  # fmt: skip
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report from learn_balance.json")  # fmt: skip
    parser.add_argument("--compare-only", action="store_true",
                        help="compare the stored policies with the LQR (no training)")  # fmt: skip
    args = parser.parse_args(argv)
    stages = parse_stages(args.stages)
    if not 0.0 < args.discount <= 1.0:
        raise SystemExit(f"--discount: expected a value in (0, 1], got {args.discount}")
    RESULTS.mkdir(exist_ok=True)
    if args.report_only:
        write_results(args, {}, {})
        return
    qpos, qvel = random_starts(args.batch, seed=0)
    qpos_eval, qvel_eval = random_starts(args.held_out, seed=1)
    rows, curves = {}, {}
    A, B = joint_linearization(load_pendulum())
    if args.compare_only:
        compare = compare_with_lqr(A, B, qpos_eval, qvel_eval, args.eval_horizon)
        write_results(args, rows, curves, compare)
        return
    if not args.skip_lqr_check:
        rows["LQR"] = lqr_check(A, B, qpos_eval, qvel_eval, args.eval_horizon)
    if args.lqr_only:
        write_results(args, rows, curves)
        return
    _, P = lqr(A, B, discount=args.discount)
    cost = loss_constants(P, args.discount)
    x0 = np.concatenate([qpos, qvel], 1)
    rows.setdefault("LQR", {})["value"] = float(np.mean(np.einsum("bi,ij,bj->b", x0, P, x0)))
    initial = make_policy(seed=0)
    common = dict(learning_rate=args.learning_rate, clip=args.clip, decay=args.decay)
    if not args.no_jaxmbd:
        run_jaxmbd(args, stages, common, cost, initial, qpos, qvel, qpos_eval, qvel_eval,
                   rows, curves)  # fmt: skip
    mx = None if args.no_mjx else mjx_model(differentiable=True)
    if mx is not None:
        run_mjx(args, stages, common, cost, mx, initial, qpos, qvel, qpos_eval, qvel_eval,
                rows, curves)  # fmt: skip
    compare = compare_with_lqr(A, B, qpos_eval, qvel_eval, args.eval_horizon)
    write_results(args, rows, curves, compare)


def _row(times, losses, skipped, own, in_c, eval_s):
    return dict(timing(times), own=own.mean(), mujoco_c=in_c.mean(), eval_s=eval_s,
                final_loss=losses[-1], iterations=len(losses), skipped=skipped)  # fmt: skip


def run_jaxmbd(args, stages, common, cost, initial, qpos, qvel, qpos_eval, qvel_eval, rows,
               curves):  # fmt: skip
    model = load_pendulum()
    train_batch = batch_of_starts(model, qpos, qvel)
    eval_batch = batch_of_starts(model, qpos_eval, qvel_eval)
    steps = max(n for n, _ in stages)
    print(f"jaxmbd: stages {stages} (steps:iterations), batch {args.batch}", flush=True)
    policy, losses, horizons, times, skipped = train(
        lambda p, models, n: jaxmbd_loss(p, models, n, cost, steps),
        initial, train_batch, stages, label="jaxmbd", **common,
    )  # fmt: skip
    t0 = time.perf_counter()
    q, _ = jaxmbd_states(eval_batch, policy, args.eval_horizon)
    own = success(q)
    eval_s = time.perf_counter() - t0
    in_c, q_c = mujoco_success(policy, qpos_eval, qvel_eval, args.eval_horizon)
    print(f"jaxmbd policy: in jaxmbd {failures(q)}; in MuJoCo C {failures(q_c)}")
    eqx.tree_serialise_leaves(RESULTS / "learn_balance_policy_jaxmbd.eqx", policy)
    rows["jaxmbd"] = _row(times, losses, skipped, own, in_c, eval_s)
    curves["jaxmbd"], curves["horizon"] = losses, horizons
    print(f"jaxmbd: success {own.mean():.0%} in jaxmbd, {in_c.mean():.0%} in MuJoCo C; "
          f"{rows['jaxmbd']}", flush=True)  # fmt: skip


def run_mjx(args, stages, common, cost, mx, initial, qpos, qvel, qpos_eval, qvel_eval, rows,
            curves):  # fmt: skip
    steps = max(n for n, _ in stages)
    print(f"MJX: same policy initialisation, starts, loss, optimiser, stages {stages}",
          flush=True)  # fmt: skip
    starts = (jnp.asarray(qpos), jnp.asarray(qvel))
    policy, losses, horizons, times, skipped = train(
        lambda p, s, n: mjx_loss(p, s, n, cost, steps, mx),
        initial, starts, stages, label="MJX", **common,
    )  # fmt: skip
    t0 = time.perf_counter()
    mx_eval = mjx_model()  # the file's solver settings for the evaluation
    states = eqx.filter_jit(lambda p, a, b: mjx_states(mx_eval, p, a, b, args.eval_horizon))
    q, _ = states(policy, jnp.asarray(qpos_eval), jnp.asarray(qvel_eval))
    own = success(q)
    eval_s = time.perf_counter() - t0
    in_c, q_c = mujoco_success(policy, qpos_eval, qvel_eval, args.eval_horizon)
    print(f"MJX policy: in MJX {failures(q)}; in MuJoCo C {failures(q_c)}")
    eqx.tree_serialise_leaves(RESULTS / "learn_balance_policy_mjx.eqx", policy)
    rows["MJX"] = _row(times, losses, skipped, own, in_c, eval_s)
    curves["MJX"], curves["horizon"] = losses, horizons
    print(f"MJX: success {own.mean():.0%} in MJX, {in_c.mean():.0%} in MuJoCo C; {rows['MJX']}",
          flush=True)  # fmt: skip


def write_results(args, rows, curves, compare=None):
    """CSV (loss per iteration), PNG and markdown; rows and curves not run this time are kept
    from the last run (``learn_balance.json``)."""
    store = RESULTS / "learn_balance.json"
    old = json.loads(store.read_text()) if store.exists() else {"rows": {}, "curves": {}}
    old_lqr = old["rows"].get("LQR", {})
    if "LQR" in rows:  # the check and the value may come from different runs
        rows["LQR"] = {**old_lqr, **rows["LQR"]}
    rows = {**{k: v for k, v in old["rows"].items() if k not in rows}, **rows}
    curves = {**{k: v for k, v in old["curves"].items() if k not in curves}, **curves}
    rows = {k: {f: float(x) for f, x in r.items()} for k, r in rows.items()}
    compare = compare or old.get("compare", {})
    keep_args = args.report_only or args.compare_only
    meta = old.get("args", {}) if keep_args else {
        k: getattr(args, k) for k in ("stages", "batch", "learning_rate", "clip", "decay",
                                      "discount", "eval_horizon", "held_out")}  # fmt: skip
    store.write_text(json.dumps({"args": meta, "rows": rows, "curves": curves,
                                 "compare": compare}, indent=1))  # fmt: skip
    losses = {k: c for k, c in curves.items() if k != "horizon"}
    if losses:
        horizon = curves.get("horizon", [])
        with open(RESULTS / "learn_balance.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["iteration", "horizon_steps"] + [f"loss_{k}" for k in losses])
            for k in range(max(len(c) for c in losses.values())):
                cells = [f"{c[k]:.8g}" if k < len(c) else "" for c in losses.values()]
                w.writerow([k, horizon[k] if k < len(horizon) else "", *cells])
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.5, 4))
        style = {"jaxmbd": dict(lw=4, alpha=0.5), "MJX": dict(lw=1.2, ls="--")}
        for name, c in losses.items():
            ax.semilogy(c, label=name, **style.get(name, {}))
        if "value" in rows.get("LQR", {}):
            ax.axhline(rows["LQR"]["value"], color="k", ls=":", label="LQR value (linear model)")
        for k in range(len(horizon)):
            if k == 0 or horizon[k] != horizon[k - 1]:
                ax.axvline(k, color="0.8", lw=0.8)
                ax.text(k, ax.get_ylim()[1], f" {horizon[k] * H:g} s", va="top", fontsize=8)
        ax.set(xlabel="Adam iteration (grey: the horizon grows)",
               ylabel=f"loss (mean over {meta.get('batch', 64)} starts)",
               title="inverted double pendulum: policy training by BPTT")  # fmt: skip
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "learn_balance.png", dpi=120)
    lines = [
        "# Learning to balance the inverted double pendulum (gymnasium's file)",
        "",
        "`python -m benchmarks.learn_balance "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in meta.items())
        + f"` (the script's docstring); {platform.processor() or platform.machine()}, "
        f"2 CPU cores shared with other engineers' jobs; jax {jax.__version__}. Success: both "
        f"hinge angles within {ANGLE_TOL} rad and |x| < {CART_TOL} m at every step over "
        f"{meta.get('eval_horizon', 5.0)} s, from {meta.get('held_out', 100)} held-out starts "
        "(gymnasium's reset distribution, seed 1).",
    ]
    if "LQR" in rows:
        r = rows["LQR"]
        lines += [
            "",
            "## Feasibility: LQR on the same starts",
            "",
            f"`mbd.linearize` about upright, in joint coordinates: max |A - A_MuJoCo| = "
            f"{r['A_vs_mujoco']:.1e}, max |B - B_MuJoCo| = {r['B_vs_mujoco']:.1e} (central "
            f"differences of `mj_forward`); one unit of ctrl accelerates the cart at "
            f"{r['B_cart']:.1f} m/s^2; the fast unstable pole is at {r['unstable_pole']:.2f} "
            f"1/s. Discrete LQR (Q = diag{Q_WEIGHTS}, R = {R_WEIGHT}), clipped to [-1, 1] "
            f"(saturated at the start for {r['saturated_at_start']:.0%} of the starts):",
            "",
            "| controller | success in jaxmbd | success in MuJoCo C | max abs(x) (m) |",
            "|---|---|---|---|",
            f"| LQR, clipped | {r['own']:.0%} | {r['mujoco_c']:.0%} | {r['max_cart']:.2f} |",
            "",
            f"Best possible (linear model, any |u| <= 1, a linear program per start): "
            f"{int(r['infeasible'])} of the starts cannot keep both angles within {ANGLE_TOL} "
            f"rad (the worst needs {r['bound_max']:.3f} rad), so at most "
            f"{1 - r['infeasible'] / meta.get('held_out', 100):.0%} can succeed.",
        ]
    trained = [k for k in ("jaxmbd", "MJX") if k in rows]
    if trained:
        lines += [
            "",
            "## The MLP trained by BPTT",
            "",
            "| simulator | iterations | success in own simulator | success in MuJoCo C "
            "| final loss | compile (s) | s / iteration (median, min-max) "
            "| training wall, compile apart (s) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name in trained:
            r = rows[name]
            lines.append(
                f"| {name} | {int(r['iterations'])} | {r['own']:.0%} | {r['mujoco_c']:.0%} | "
                f"{r['final_loss']:.4g} | {r['compile_s']:.0f} | {r['median_s']:.3f} "
                f"({r['min_s']:.3f}-{r['max_s']:.3f}) | {r.get('train_s', np.nan):.0f} |"
            )
        if "value" in rows.get("LQR", {}):
            lines += ["", f"The LQR's value x0^T P x0 on the training starts, the loss's "
                      f"optimum for the linear model without the clip (the pendulum's own "
                      f"optimum differs): {rows['LQR']['value']:.4g}."]  # fmt: skip
    if compare:
        lines += [
            "",
            "## The learned policies beside the LQR (in MuJoCo C)",
            "",
            "| controller | failed starts (index; their number if many) "
            "| fell (an angle past 0.5 rad, or the cart out) "
            "| -du/dx at upright (x, theta_1, theta_2, rates) |",
            "|---|---|---|---|",
        ]
        for name in ("LQR", "jaxmbd", "MJX"):
            if name in compare:
                c = compare[name]
                gain = ", ".join(f"{g:.2f}" for g in c["gain"])
                failed = len(c["failed"]) if len(c["failed"]) > 12 else c["failed"]
                lines.append(f"| {name} | {failed} | {c['fell']} | ({gain}) |")
        lines += ["", f"Starts that no |u| <= 1 keeps within {ANGLE_TOL} rad (the linear "
                  f"program): {compare.get('infeasible')}."]  # fmt: skip
    if "MJX" not in rows:
        lines += ["", "MJX: not run (not installed, or `--no-mjx`)."]
    notes = RESULTS / "learn_balance_notes.md"
    if notes.exists():  # hand-written remarks on the last run, kept across rewrites
        lines += ["", notes.read_text().rstrip()]
    (RESULTS / "learn_balance.md").write_text("\n".join(lines) + "\n")
    print(RESULTS / "learn_balance.md")


if __name__ == "__main__":
    main()
