"""Cart-pole swing-up and hold by trajectory optimisation through ``mbd.simulate``.

    python -m benchmarks.cartpole_swing_up [--iterations 200] [--t-end 5.0] [--hold 5.0]

dm_control's ``suite/cartpole.xml`` (read from the installed package, never copied) in
jaxmbd: a 1 kg cart on a rail (|x| <= 1.8 m), a 0.1 kg, 1 m pole on a hinge, one motor on
the rail (gear 10, ctrl in [-1, 1]: at most 10 N). The pole is drawn upright: hinge_1 = 0
is up; dm_control's swing-up task starts it hanging at pi, at rest. The file's integrator
(RK4, dt = 0.01 s): jaxmbd's ``rkmk`` (RK4) in rA at h = 0.01.

**Swing-up: direct shooting with optax Adam.** The controls are u = tanh(z) at knots 0.1 s
apart, linearly interpolated and held over each step (zero-order hold, as MuJoCo's ctrl).
The loss over the swing (``--t-end`` s)::

    h sum_k [ w(t_k) (1 - cos theta) + 0.1 x^2 + 10 max(|x| - 1.4, 0)^2 + 0.01 u^2 ]
      + 20 (1 - cos theta(T)) + theta_dot(T)^2 + x(T)^2 + x_dot(T)^2,
    w(t) = 1 + 10 (t / T)^4,

upright more and more toward the end, a terminal cost that asks for the top at rest
(inside the hold's reach), the cart kept off the rail's ends. Its gradient is
``jax.grad`` through ``simulate`` (implicit-function gradients of every step;
``checkpoint=`` segments bound the stored states); Adam with a cosine-decayed step from
0.05 and the gradient clipped to norm 10. From rest at the bottom every gradient is zero
(a saddle), and a rocking start fell into a local minimum (the pole 0.5 rad short of the
top at T, the earlier version of this script), so Adam starts from the controls of a
hand-written **energy-pumping** feedback (u = -4 k (E_up - E) / (2 m g l_c) sign(theta_dot
cos theta) - 0.5 (x + x_dot), E the pole's energy about the hinge; k = 0.5), run in jaxmbd
(``simulate(policy=)``) and sampled at the knots: it feeds energy into the swing, but its
pole is not up at T (the report's first row); Adam turns it into a swing-up.

**Hold.** After the swing a linear feedback u = -K (z - z_up) keeps the pole up for
``--hold`` s. K is discrete-time LQR of the one-step map z_{k+1} = F(z_k, u_k) in joint
coordinates (x, theta, x_dot, theta_dot), its Jacobians by ``jax.jacfwd`` through one
``simulate`` step about the upright pose. The whole run, optimised open-loop controls then
the LQR, is **one** ``simulate(policy=SwingUpPolicy(...))`` call over t_end + hold: the
policy plays the knots before T and the feedback after (its first T s equal the optimised
open-loop run's: the report's row).

**Check in MuJoCo itself:** the same controls held per step (``mj_step``, the file's RK4 at
dt = 0.01) from the same start, then the same feedback on MuJoCo's own qpos/qvel.

Writes ``benchmarks/results/cartpole_swing_up.{csv,png,md}`` and the controls
(``cartpole_swing_up_controls.csv``): the cost per iteration, the final angle, the angle
over the hold in both engines, wall times (compile apart).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxmbd as mbd
from benchmarks._harness import RESULTS  # noqa: E402
from benchmarks.problems import control_model_path

H = 0.01  # the file's timestep
KNOT_DT = 0.1
PUMP_GAIN = 0.5  # the warm start's energy-pumping gain k
SIM = dict(formulation="rA", integrator="rkmk")


def cartpole_path() -> Path:
    return control_model_path("cartpole")


def load_cartpole(path=None, *, angle=np.pi):
    """The cart-pole in jaxmbd with the pole at ``angle`` (pi: hanging), at rest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the visual-only features are named in a warning
        model = mbd.load_model(path or cartpole_path())
    return model.with_joint_state("hinge_1", q=angle, qdot=0.0)


def knot_times(t_end: float):
    return jnp.arange(int(round(t_end / KNOT_DT)) + 1) * KNOT_DT


def knot_controls(z, n_steps: int, h: float = H):
    """u_k = tanh(z) interpolated at each step's start (one row per step, in [-1, 1])."""
    return jnp.tanh(jnp.interp(jnp.arange(n_steps) * h, jnp.arange(z.shape[0]) * KNOT_DT, z))[
        :, None
    ]


def wrap(angle):
    return (angle + np.pi) % (2 * np.pi) - np.pi


def pole_constants(model):
    """(m, l_c, I_h) of the pole from the file: mass, hinge-to-centre distance, moment of
    inertia about the hinge axis (for the energy-pumping warm start)."""
    hinge = next(d for d in model.joints if d.name == "hinge_1")
    cart, pole = hinge.body_i, hinge.body_j
    axis = model.A0[cart] @ hinge.frame_i[:, 2]
    pivot = model.r0[cart] + model.A0[cart] @ hinge.s_bar_i
    a = model.A0[pole].T @ axis  # the axis in the pole's frame
    m = model.mass[pole]
    lc = jnp.linalg.norm(model.r0[pole] - pivot)
    return m, lc, a @ model.inertia[pole] @ a + m * lc**2


class SwingUpPolicy(eqx.Module):
    """The whole run's control u(t, observation), observation (x, theta, x_dot, theta_dot)
    (``jaxmbd.actuators.observation``: the slider's and hinge's coordinates, then rates).
    Before ``t_switch``: the knots' open-loop controls tanh(interp(t, knots)), or, where
    ``pump`` > 0, the energy-pumping feedback of gain ``pump`` (the warm start); from
    ``t_switch`` on: the LQR feedback -K (x, wrap(theta), x_dot, theta_dot). All fields
    are arrays, so the warm start and the final run share one compiled program."""

    z: jax.Array
    K: jax.Array
    pump: jax.Array
    t_switch: jax.Array
    pole: tuple  # (m, l_c, I_h, g) arrays

    def __call__(self, t, obs):
        s = obs.at[1].set(jnp.mod(obs[1] + jnp.pi, 2 * jnp.pi) - jnp.pi)
        x, th, xd, thd = s
        m, lc, inertia, g = self.pole
        rise = 2 * m * g * lc
        energy = 0.5 * inertia * thd**2 + m * g * lc * (jnp.cos(th) - 1.0)  # 0: up at rest
        sign = jnp.where(thd * jnp.cos(th) >= 0, 1.0, -1.0)
        pumped = jnp.clip(-4 * self.pump * (-energy / rise) * sign - 0.5 * (x + xd), -1, 1)
        knots = jnp.arange(self.z.shape[0]) * KNOT_DT
        open_loop = jnp.tanh(jnp.interp(t, knots, self.z))
        swing = jnp.where(self.pump > 0, pumped, open_loop)
        return jnp.where(t < self.t_switch - 0.5 * H, swing, -(self.K @ s)[0])[None]


def make_policy(model, z, K, *, pump=0.0, t_switch):
    m, lc, inertia = pole_constants(model)
    g = jnp.linalg.norm(model.gravity)
    f = lambda v: jnp.asarray(v, dtype=jnp.float64)  # noqa: E731
    return SwingUpPolicy(f(z), f(K), f(pump), f(t_switch), (f(m), f(lc), f(inertia), f(g)))


def policy_run(model, policy, t_end: float):
    """One simulate under ``policy`` from ``model``'s start; (sol, the controls it applied
    per step (N, 1), recomputed from the run's states)."""
    sol = mbd.simulate(model, t_end=t_end, h=H, policy=policy, **SIM)
    obs = jnp.stack(
        [sol.joints["slider"].q, sol.joints["hinge_1"].q,
         sol.joints["slider"].qdot, sol.joints["hinge_1"].qdot], axis=-1,
    )  # fmt: skip
    t = jnp.arange(obs.shape[0] - 1) * H
    return sol, jax.vmap(policy)(t, obs[:-1])


def trajectory_cost(sol, u, t_end: float, h: float = H):
    """The module docstring's loss of a run ``sol`` with controls ``u`` (N,)."""
    x, th = sol.joints["slider"], sol.joints["hinge_1"]
    t = jnp.arange(x.q.shape[0]) * h
    weight = 1.0 + 10.0 * (t / t_end) ** 4
    running = (
        weight * (1.0 - jnp.cos(th.q)) + 0.1 * x.q**2 + 10.0 * jax.nn.relu(jnp.abs(x.q) - 1.4) ** 2
    )
    terminal = 20.0 * (1.0 - jnp.cos(th.q[-1])) + th.qdot[-1] ** 2 + x.q[-1] ** 2 + x.qdot[-1] ** 2
    return h * (jnp.sum(running) + 1e-2 * jnp.sum(u**2)) + terminal


def fit_knots(u, t_end: float):
    """Knot values z whose tanh-interpolated controls follow ``u`` (N,) at the knots."""
    t = np.asarray(knot_times(t_end))
    uk = np.interp(t, np.arange(len(u)) * H, np.asarray(u))
    return jnp.asarray(np.arctanh(np.clip(uk, -0.95, 0.95)))


def make_loss(model, t_end: float, checkpoint: int | None = 100):
    n = int(round(t_end / H))

    def loss(z):
        u = knot_controls(z, n)
        sol = mbd.simulate(model, t_end=t_end, h=H, controls=u, checkpoint=checkpoint, **SIM)
        return trajectory_cost(sol, u[:, 0], t_end), sol

    return loss


def optimise(model, z, *, t_end: float, iterations: int, learning_rate=0.05, verbose=True):
    """Adam on the knot values z; returns (z, costs, seconds per iteration, last run)."""
    schedule = optax.cosine_decay_schedule(learning_rate, iterations, alpha=0.05)
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.adam(schedule))
    state = opt.init(z)
    grad_fn = mbd.jit(jax.value_and_grad(make_loss(model, t_end), has_aux=True))

    @mbd.jit
    def update(z, state, g):
        updates, state = opt.update(g, state, z)
        return optax.apply_updates(z, updates), state

    costs, times = [], []
    for it in range(iterations):
        t0 = time.perf_counter()
        (cost, _), g = grad_fn(z)
        z, state = update(z, state, g)
        jax.block_until_ready(z)
        times.append(time.perf_counter() - t0)
        costs.append(float(cost))
        if verbose and (it % 10 == 0 or it == iterations - 1):
            print(f"  iteration {it:4d}: cost {costs[-1]:.5f}  ({times[-1]:.2f} s)", flush=True)
    (cost, sol), _ = grad_fn(z)
    costs.append(float(cost))
    return z, costs, times, sol


# ----------------------------------------------------------------------------- hold (LQR)


def upright_state(model, z):
    """A differentiable initial state of the cart-pole from joint coordinates z = (x,
    theta, x_dot, theta_dot) about the upright pose of ``model`` (which must be drawn
    upright, at rest): the cart moves along the rail, the pole turns about the hinge's
    global axis through its global point. :func:`lqr_gain` checks it against
    ``jaxmbd.actuators.observation``."""
    joints = {d.name: d for d in model.joints}
    slider, hinge = joints["slider"], joints["hinge_1"]
    cart, pole = hinge.body_i, hinge.body_j
    x, theta, xdot, thetadot = z
    # the joints' global axes (frame column z), signed as their coordinates count
    e_x = slider.sign[0] * model.A0[cart] @ slider.frame_j[:, 2]
    axis = hinge.sign[0] * model.A0[cart] @ hinge.frame_i[:, 2]
    pivot0 = model.r0[cart] + model.A0[cart] @ hinge.s_bar_i
    K = jnp.cross(jnp.eye(3), axis)  # K @ v = axis x v
    R = jnp.eye(3) + jnp.sin(theta) * K + (1.0 - jnp.cos(theta)) * K @ K
    r = model.r0.at[cart].add(x * e_x)
    r = r.at[pole].set(pivot0 + x * e_x + R @ (model.r0[pole] - pivot0))
    A = model.A0.at[pole].set(R @ model.A0[pole])
    rdot = jnp.zeros_like(r).at[cart].set(xdot * e_x)
    rdot = rdot.at[pole].set(xdot * e_x + thetadot * jnp.cross(axis, r[pole] - pivot0 - x * e_x))
    omega = jnp.zeros_like(r).at[pole].set(A[pole].T @ (thetadot * axis))
    return dataclasses.replace(model, r0=r, A0=A, rdot0=rdot, omega0=omega)


def joint_state(sol, k):
    x, th = sol.joints["slider"], sol.joints["hinge_1"]
    return jnp.stack([x.q[k], th.q[k], x.qdot[k], th.qdot[k]])


def lqr_gain(up_model, *, q=(1.0, 10.0, 0.1, 0.1), r=0.1):
    """Discrete LQR gain K (1, 4) of the one-step map about the upright pose at rest, its
    Jacobians (A, B) by ``jax.jacfwd`` through one ``simulate`` step."""
    import scipy.linalg

    def step(z, u):  # the next joint state, and the start as the run reports it
        sol = mbd.simulate(upright_state(up_model, z), t_end=H, h=H, controls=u[None], **SIM)
        return joint_state(sol, 1), joint_state(sol, 0)

    jacobians = mbd.jit(jax.jacfwd(step, argnums=(0, 1), has_aux=True))
    test = jnp.array([0.1, 0.2, -0.3, 0.4])  # the map reproduces the joint coordinates
    _, start = jacobians(test, jnp.zeros(1))
    np.testing.assert_allclose(np.asarray(start), np.asarray(test), atol=1e-9)
    (A, B), _ = jacobians(jnp.zeros(4), jnp.zeros(1))
    A, B = np.asarray(A), np.asarray(B)
    Q, R = np.diag(q), np.array([[r]])
    P = scipy.linalg.solve_discrete_are(A, B, Q, R)
    K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    rho = max(abs(np.linalg.eigvals(A - B @ K)))
    return K, A, B, rho


# ----------------------------------------------------------------------------- MuJoCo


def mujoco_replay(u_open, K, hold_steps: int, angle=np.pi):
    """MuJoCo (the file's RK4, dt = 0.01) from the same start: ``u_open`` held per step,
    then u = -K z on MuJoCo's own state for ``hold_steps``; returns (T, 4) joint states."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(cartpole_path()))
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4 and m.opt.timestep == H
    d = mujoco.MjData(m)
    d.qpos[:] = [0.0, angle]
    d.qvel[:] = 0.0
    mujoco.mj_forward(m, d)
    out = [np.concatenate([d.qpos, d.qvel])]
    for u in np.asarray(u_open):
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel]))
    for _ in range(hold_steps):
        z = np.concatenate([d.qpos, d.qvel])
        z[1] = wrap(z[1])
        d.ctrl[:] = -K @ z
        mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel]))
    return np.array(out)


# ----------------------------------------------------------------------------- main


def upright_from(theta, tol: float = 0.1) -> float:
    """The first time from which |wrap(theta)| stays below ``tol`` to the end (nan: never)."""
    inside = np.abs(wrap(np.asarray(theta))) < tol
    if not inside[-1]:
        return float("nan")
    last_out = np.nonzero(~inside)[0]
    return float((last_out[-1] + 1 if len(last_out) else 0) * H)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--t-end", type=float, default=5.0)
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    model = load_cartpole()
    n = int(round(args.t_end / H))
    total = args.t_end + args.hold

    t1 = time.perf_counter()
    K, A, B, rho = lqr_gain(load_cartpole(angle=0.0))
    lqr_s = time.perf_counter() - t1
    print(f"LQR gain K = {np.round(K, 3).tolist()} (spectral radius of A - B K: {rho:.4f}; "
          f"{lqr_s:.1f} s with compile)", flush=True)  # fmt: skip

    # the warm start: the energy-pumping feedback's controls, sampled at the knots
    z_none = jnp.zeros(knot_times(args.t_end).shape)
    t1 = time.perf_counter()
    warm = make_policy(model, z_none, K, pump=PUMP_GAIN, t_switch=args.t_end)
    warm_sol, warm_u = policy_run(model, warm, total)
    warm_s = time.perf_counter() - t1
    warm_theta = np.asarray(warm_sol.joints["hinge_1"].q)
    z0 = fit_knots(np.asarray(warm_u[:n, 0]), args.t_end)
    print(f"warm start (energy pumping, k = {PUMP_GAIN}): theta(T) = "
          f"{wrap(warm_theta[n]):+.3f} rad, {warm_s:.1f} s with compile", flush=True)  # fmt: skip

    print(f"swing-up: {args.iterations} Adam iterations over {args.t_end} s ({n} steps)")
    t0 = time.perf_counter()
    z, costs, times, sol = optimise(
        model, z0, t_end=args.t_end, iterations=args.iterations, learning_rate=args.learning_rate
    )
    wall = time.perf_counter() - t0
    run_median = float(np.median(times[1:]))
    compile_s = times[0] - run_median
    u_open = np.asarray(knot_controls(z, n))
    theta = np.asarray(sol.joints["hinge_1"].q)
    x = np.asarray(sol.joints["slider"].q)
    final = float(wrap(theta[-1]))
    end = np.asarray(joint_state(sol, -1))
    print(f"final angle {final:+.2e} rad (0 = upright), rates {end[3]:+.2e} rad/s; "
          f"x(T) = {x[-1]:+.3f} m, x_dot(T) = {end[2]:+.3f} m/s", flush=True)  # fmt: skip

    # the whole run in one simulate: the optimised knots, then the LQR feedback
    t1 = time.perf_counter()
    whole, u_whole = policy_run(model, make_policy(model, z, K, t_switch=args.t_end), total)
    whole_s = time.perf_counter() - t1
    th_all = wrap(np.asarray(whole.joints["hinge_1"].q))
    x_all = np.asarray(whole.joints["slider"].q)
    same = max(np.abs(np.asarray(whole.joints["hinge_1"].q[: n + 1]) - theta).max(),
               np.abs(x_all[: n + 1] - x).max())  # fmt: skip
    th_hold = th_all[n:]
    up_from = upright_from(th_all)
    print(f"one simulate, {total} s: max |theta| over the hold {np.abs(th_hold).max():.2e} rad, "
          f"final {th_all[-1]:+.2e}; |theta| < 0.1 from t = {up_from:.2f} s; cart in "
          f"[{x_all.min():+.3f}, {x_all.max():+.3f}] m; first T s against the open-loop run: "
          f"{same:.1e}", flush=True)  # fmt: skip

    # MuJoCo itself: the same controls, then the same feedback on its own state
    hold_steps = int(round(args.hold / H))
    mj = mujoco_replay(u_open, K, hold_steps)
    mj_open, mj_hold = mj[: n + 1], mj[n:]
    diff = np.abs(mj_open[:, 1] - theta).max()
    diff_x = np.abs(mj_open[:, 0] - x).max()
    diff_all = np.abs(wrap(mj[:, 1] - np.asarray(whole.joints["hinge_1"].q))).max()
    diff_all_x = np.abs(mj[:, 0] - x_all).max()
    print(
        f"MuJoCo, same open-loop controls: final angle {wrap(mj_open[-1, 1]):+.2e} rad; "
        f"max |theta_mj - theta| {diff:.2e} rad, max |x_mj - x| {diff_x:.2e} m; with the "
        f"hold: {diff_all:.2e} rad, {diff_all_x:.2e} m"
    )

    with open(RESULTS / f"cartpole_swing_up{args.tag}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "cost", "seconds"])
        for k, c in enumerate(costs):
            w.writerow([k, f"{c:.8g}", f"{times[k]:.4f}" if k < len(times) else ""])
    _plot(costs, x_all, th_all, np.asarray(u_whole[:, 0]), warm_theta, mj, args)
    sim_cmd = f"--iterations {args.iterations} --t-end {args.t_end} --hold {args.hold}"
    if args.learning_rate != 0.05:
        sim_cmd += f" --learning-rate {args.learning_rate}"
    report = f"""# Cart-pole swing-up and hold (dm_control `suite/cartpole.xml`)

`python -m benchmarks.cartpole_swing_up {sim_cmd}` (jaxmbd rkmk/RK4 in rA, h = {H} s;
Adam with a cosine-decayed step from {args.learning_rate}, gradient clipped to norm 10;
knots every {KNOT_DT} s; warm start from the energy-pumping feedback, k = {PUMP_GAIN}; the
loss and the method: the script's docstring). Machine: 2 CPU cores shared with 3 other
engineers' jobs (load average {_load()} when written): the times are rough.

| quantity | value |
|---|---|
| warm start (energy pumping, jaxmbd policy run): theta(T) | {wrap(warm_theta[n]):+.3f} rad |
| cost, first -> last iteration | {costs[0]:.4f} -> {costs[-1]:.4f} |
| final angle theta(T = {args.t_end} s) (0 = upright) | {final:+.2e} rad |
| theta_dot(T), x(T), x_dot(T) | {end[3]:+.2e} rad/s, {end[0]:+.3f} m, {end[2]:+.3f} m/s |
| one simulate ({total} s: knots, then LQR): max \\|theta\\| over the {args.hold} s hold | {np.abs(th_hold).max():.2e} rad |
| ... final theta, cart range | {th_all[-1]:+.2e} rad, [{x_all.min():+.3f}, {x_all.max():+.3f}] m |
| ... \\|theta\\| < 0.1 rad from t = ... to the end | {up_from:.2f} s |
| ... its first {args.t_end} s against the open-loop optimised run | {same:.1e} |
| MuJoCo C (RK4, dt = {H}), same controls: final angle | {wrap(mj_open[-1, 1]):+.2e} rad |
| MuJoCo vs jaxmbd over the swing-up: max \\|d theta\\|, max \\|d x\\| | {diff:.2e} rad, {diff_x:.2e} m |
| MuJoCo, same LQR on its own state: max \\|theta\\| over the hold, final | {np.abs(wrap(mj_hold[:, 1])).max():.2e}, {wrap(mj_hold[-1, 1]):+.2e} rad |
| MuJoCo vs jaxmbd over the whole run (swing-up and hold) | {diff_all:.2e} rad, {diff_all_x:.2e} m |
| LQR (jacfwd of one step, with compile) | {lqr_s:.1f} s |
| warm-start run ({total} s, with compile) | {warm_s:.1f} s |
| compile of the gradient (first iteration minus the median) | {compile_s:.1f} s |
| per iteration (median, value and gradient, {n} steps) | {run_median:.3f} s |
| optimisation wall time ({args.iterations} iterations, with compile) | {wall:.1f} s |
| the final one-simulate run ({total} s; its program is the warm start's) | {whole_s:.1f} s |

LQR gain K = {np.round(K, 4).tolist()}, spectral radius of A - B K = {rho:.4f}.
Cost per iteration: `cartpole_swing_up{args.tag}.csv`; figure `cartpole_swing_up{args.tag}.png`;
the optimised per-step controls: `cartpole_swing_up{args.tag}_controls.csv`.
"""  # noqa: E501
    (RESULTS / f"cartpole_swing_up{args.tag}.md").write_text(report)
    np.savetxt(RESULTS / f"cartpole_swing_up{args.tag}_controls.csv", u_open[:, 0], fmt="%.10f",
               header="u per step (h = 0.01 s), ctrl units (x 10 N)")  # fmt: skip
    save_gain(K, rho, args.tag)
    print(RESULTS / f"cartpole_swing_up{args.tag}.md")


def save_gain(K, rho, tag: str = ""):
    """The hold's LQR gain, for replays of the run (``notebooks/robot_control.ipynb``)."""
    import json

    gain = dict(K=np.asarray(K).tolist(), spectral_radius=float(rho), h=H,
                state="(x, wrap(theta), x_dot, theta_dot), u = -K state")  # fmt: skip
    (RESULTS / f"cartpole_swing_up{tag}_lqr.json").write_text(json.dumps(gain, indent=1))


def _load() -> str:
    import os

    return f"{os.getloadavg()[0]:.1f}"


def _plot(costs, x, theta, u, warm_theta, mj, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].semilogy(costs)
    ax[0].set(xlabel="Adam iteration", ylabel="cost", title="cost curve")
    t = np.arange(len(theta)) * H
    ax[1].plot(t, theta, label="theta, jaxmbd (knots, then LQR)")
    ax[1].plot(t, wrap(mj[:, 1]), "k:", label="theta, MuJoCo C (same controls, same K)")
    ax[1].plot(t, wrap(warm_theta), color="grey", lw=0.7, label="theta, warm start")
    ax[1].plot(t, x, label="cart x (m)")
    ax[1].axvline(args.t_end, color="grey", lw=0.5)
    ax[1].set(xlabel="t (s)", ylabel="rad / m", title="swing-up, then LQR hold (one simulate)")
    ax[1].legend(fontsize=8)
    ax[2].step(t[:-1], u, where="post")
    ax[2].axvline(args.t_end, color="grey", lw=0.5)
    ax[2].set(xlabel="t (s)", ylabel="u (ctrl, x 10 N)", title="controls")
    fig.tight_layout()
    fig.savefig(RESULTS / f"cartpole_swing_up{args.tag}.png", dpi=120)


if __name__ == "__main__":
    main()
