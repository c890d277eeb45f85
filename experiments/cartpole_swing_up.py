"""Cart-pole swing-up by trajectory optimisation through ``mbd.simulate`` (issue 36 item 7).

    python experiments/cartpole_swing_up.py [--iterations 300] [--t-end 4.0] [--hold 2.0]

dm_control's ``suite/cartpole.xml`` (read from the installed package, never copied) in
jaxmbd: a 1 kg cart on a rail, a 0.1 kg, 1 m pole on a hinge, one motor on the rail
(gear 10, ctrl in [-1, 1]: at most 10 N). The pole is drawn upright: hinge_1 = 0 is up,
dm_control's swing-up task starts it hanging at pi. The same integrator family as the
file's (RK4, dt = 0.01 s): jaxmbd's ``rkmk`` (RK4) in rA at h = 0.01.

**Method: direct shooting with optax Adam.** The controls are u = tanh(z) at knots 0.1 s
apart, linearly interpolated and held over each step (zero-order hold, as MuJoCo's ctrl).
The loss integrates, while swinging, the squared error of the total energy
(``mbd.diagnostics.energy``) against the upright pose's at rest, normalised by the rise
2 m g l_c, plus 0.1 x^2 (energy shaping: its gradient pumps energy in, where 1 - cos theta
has almost none far from the top), and over the last ``HOLD_WINDOW`` s 10 ((1 - cos theta)
+ 0.1 x^2 + 0.1 (x_dot^2 + theta_dot^2)) (upright, centred and still); plus 1e-3 u^2.
From rest at the bottom every gradient is zero (a saddle): Adam starts from the cart
rocked at the hanging pole's natural period (:func:`pumping_start`). The
gradient of the whole run comes from ``jax.grad`` through ``simulate`` (implicit-function
gradients of every step; ``checkpoint=`` segments bound the stored states). Why shooting
rather than iLQR: the cost is smooth, the horizon short (400 steps), and one reverse-mode pass per
iteration through the simulator is exactly the path the library offers and tests; iLQR
would need the per-step Jacobians in joint coordinates, which jaxmbd's body coordinates
make less direct.

**Hold.** After the optimised horizon a linear feedback u = -K (z - z_up) keeps the pole up
for ``--hold`` s (``simulate(policy=)``); K is discrete-time LQR of the one-step map
z_{k+1} = F(z_k, u_k) in joint coordinates (x, theta, x_dot, theta_dot), its Jacobians by
``jax.jacfwd`` through one ``simulate`` step around the upright pose.

**Check in MuJoCo itself:** the same controls held per step (``mj_step``, the file's RK4 at
dt = 0.01) from the same start, then the same feedback on MuJoCo's own qpos/qvel.

Writes ``experiments/results/cartpole_swing_up.{csv,png,md}``: the cost per iteration, the
final angle, the deviation over the hold in both engines, wall times (compile apart).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import time
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxmbd as mbd
from jaxmbd.joints import place_joint_states

H = 0.01  # the file's timestep
KNOT_DT = 0.1
HOLD_WINDOW = 1.0  # the optimised run's last second: upright and still
SIM = dict(formulation="rA", integrator="rkmk")
RESULTS = Path(__file__).parent / "results"


def cartpole_path() -> Path:
    return Path(importlib.import_module("dm_control").__file__).parent / "suite" / "cartpole.xml"


def load_cartpole(path=None, *, angle=np.pi):
    """The cart-pole in jaxmbd with the pole at ``angle`` (pi: hanging), at rest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the visual-only features are named in a warning
        model = mbd.load_model(path or cartpole_path())
    return with_joint_state(model, {"hinge_1": (angle, 0.0)})


def with_joint_state(model, states: dict):
    """``model`` starting with the joints of ``states`` ({name: (q, qdot)}) set."""
    r0, A0, rdot0, omega0, joints = place_joint_states(model, states)
    arrays = dict(r0=r0, A0=A0, rdot0=rdot0, omega0=omega0)
    return dataclasses.replace(
        model, joints=joints, **{k: jnp.asarray(v) for k, v in arrays.items()}
    )


def knot_controls(z, n_steps: int, h: float = H):
    """u_k = tanh(z) interpolated at each step's start (one row per step, in [-1, 1])."""
    knots = jnp.arange(z.shape[0]) * KNOT_DT
    return jnp.tanh(jnp.interp(jnp.arange(n_steps) * h, knots, z))[:, None]


def swing_energy(model):
    """(E_up, dE): the total energy (``mbd.diagnostics.energy``) of the cart-pole at rest with
    the pole upright, and its rise over hanging at rest (2 m g l_c, l_c the hinge-to-centre
    distance), from ``model`` hanging at rest."""
    hinge = next(d for d in model.joints if d.name == "hinge_1")
    cart, pole = hinge.body_i, hinge.body_j
    pivot = model.r0[cart] + model.A0[cart] @ hinge.s_bar_i
    rise = (
        2.0
        * model.mass[pole]
        * jnp.linalg.norm(model.gravity)
        * jnp.linalg.norm(model.r0[pole] - pivot)
    )
    hanging = -model.mass @ (model.r0 @ model.gravity)  # at rest: potential only
    return hanging + rise, rise


def trajectory_cost(sol, u, model, t_end: float, h: float = H):
    """The module docstring's loss of a run ``sol`` with controls ``u`` (N,). While swinging
    the squared error of the total energy against the upright's at rest (normalised by the
    rise), whose gradient pumps energy in where (1 - cos theta) has none far from the top;
    over the hold window upright, centred and still."""
    x, th = sol.joints["slider"], sol.joints["hinge_1"]
    e_up, rise = swing_energy(model)
    t = jnp.arange(x.q.shape[0]) * h
    hold = t >= t_end - HOLD_WINDOW - 1e-9
    energy = ((mbd.diagnostics.energy(model, sol).total - e_up) / rise) ** 2
    upright = (1.0 - jnp.cos(th.q)) + 0.1 * x.q**2
    still = 0.1 * (x.qdot**2 + th.qdot**2)
    running = jnp.where(hold, 10.0 * (upright + still), energy + 0.1 * x.q**2)
    return h * (jnp.sum(running) + 1e-3 * jnp.sum(u**2))


def pumping_start(t_end: float, amplitude: float = 0.5):
    """The initial knot values: the cart rocked at the hanging pole's natural period
    (2 pi sqrt(2 l / 3 g) for a uniform rod of length l = 1 m on a pivot), zero in the hold
    window: a start that feeds energy into the swing (from rest at the bottom the cost's
    gradient is zero: a saddle)."""
    t = np.arange(int(round(t_end / KNOT_DT)) + 1) * KNOT_DT
    period = 2 * np.pi * np.sqrt(2.0 / (3 * 9.81))
    return jnp.asarray(
        np.where(t < t_end - HOLD_WINDOW, amplitude * np.sin(2 * np.pi * t / period), 0.0)
    )


def make_loss(model, t_end: float, checkpoint: int | None = 100):
    n = int(round(t_end / H))

    def loss(z):
        u = knot_controls(z, n)
        sol = mbd.simulate(model, t_end=t_end, h=H, controls=u, checkpoint=checkpoint, **SIM)
        return trajectory_cost(sol, u[:, 0], model, t_end), sol

    return loss


def optimise(model, *, t_end: float, iterations: int, learning_rate=0.05, verbose=True):
    """Adam on the knot values z; returns (z, costs, timing)."""
    z = pumping_start(t_end)
    schedule = optax.cosine_decay_schedule(learning_rate, iterations, alpha=0.05)
    opt = optax.adam(schedule)
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
        if verbose and (it % 25 == 0 or it == iterations - 1):
            print(f"  iteration {it:4d}: cost {costs[-1]:.5f}  ({times[-1]:.2f} s)")
    (cost, sol), _ = grad_fn(z)
    costs.append(float(cost))
    return z, costs, times, sol


def wrap(angle):
    return (np.asarray(angle) + np.pi) % (2 * np.pi) - np.pi


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


class Hold(eqx.Module):
    """u = -K (x, wrap(theta), x_dot, theta_dot): the observation is the slider's and
    hinge's coordinates, then their rates (``jaxmbd.actuators.observation``)."""

    K: jax.Array

    def __call__(self, t, obs):
        z = obs.at[1].set(jnp.mod(obs[1] + jnp.pi, 2 * jnp.pi) - jnp.pi)
        return -self.K @ z


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--t-end", type=float, default=4.0)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    model = load_cartpole()
    n = int(round(args.t_end / H))

    print(f"swing-up: {args.iterations} Adam iterations over {args.t_end} s ({n} steps)")
    t0 = time.perf_counter()
    z, costs, times, sol = optimise(
        model, t_end=args.t_end, iterations=args.iterations, learning_rate=args.learning_rate
    )
    wall = time.perf_counter() - t0
    run_median = float(np.median(times[1:]))
    compile_s = times[0] - run_median
    u_open = np.asarray(knot_controls(z, n))
    theta = np.asarray(sol.joints["hinge_1"].q)
    x = np.asarray(sol.joints["slider"].q)
    in_window = np.arange(n + 1) * H >= args.t_end - HOLD_WINDOW - 1e-9
    final = float(wrap(theta[-1]))
    print(f"final angle {final:+.2e} rad (0 = upright); |theta| over the last {HOLD_WINDOW} s "
          f"<= {np.abs(wrap(theta[in_window])).max():.2e}; x(T) = {x[-1]:+.3f} m")  # fmt: skip

    # hold: LQR from jacfwd of one step, as a policy after the optimised horizon
    t1 = time.perf_counter()
    K, A, B, rho = lqr_gain(load_cartpole(angle=0.0))
    lqr_s = time.perf_counter() - t1
    print(f"LQR gain K = {np.round(K, 3).tolist()} (spectral radius of A - B K: {rho:.4f}; "
          f"{lqr_s:.1f} s with compile)")  # fmt: skip
    end_state = {
        "slider": (float(x[-1]), float(sol.joints["slider"].qdot[-1])),
        "hinge_1": (float(theta[-1]), float(sol.joints["hinge_1"].qdot[-1])),
    }
    held = mbd.simulate(with_joint_state(model, end_state), t_end=args.hold, h=H,
                        policy=Hold(jnp.asarray(K)), **SIM)  # fmt: skip
    theta_hold = wrap(np.asarray(held.joints["hinge_1"].q))
    x_hold = np.asarray(held.joints["slider"].q)
    print(
        f"hold {args.hold} s: max |theta| {np.abs(theta_hold).max():.2e} rad, "
        f"final {theta_hold[-1]:+.2e}; cart in [{x_hold.min():+.3f}, {x_hold.max():+.3f}] m"
    )

    # MuJoCo itself: the same controls, then the same feedback on its own state
    hold_steps = int(round(args.hold / H))
    mj = mujoco_replay(u_open, K, hold_steps)
    mj_open, mj_hold = mj[: n + 1], mj[n:]
    diff = np.abs(mj_open[:, 1] - theta).max()
    diff_x = np.abs(mj_open[:, 0] - x).max()
    print(
        f"MuJoCo, same open-loop controls: final angle {wrap(mj_open[-1, 1]):+.2e} rad; "
        f"max |theta_mj - theta| {diff:.2e} rad, max |x_mj - x| {diff_x:.2e} m"
    )
    print(
        f"MuJoCo hold: max |theta| {np.abs(wrap(mj_hold[:, 1])).max():.2e} rad, final "
        f"{wrap(mj_hold[-1, 1]):+.2e}; cart in [{mj_hold[:, 0].min():+.3f}, "
        f"{mj_hold[:, 0].max():+.3f}] m"
    )

    with open(RESULTS / f"cartpole_swing_up{args.tag}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "cost", "seconds"])
        for k, c in enumerate(costs):
            w.writerow([k, f"{c:.8g}", f"{times[k]:.4f}" if k < len(times) else ""])
    _plot(costs, n, x, theta, u_open, x_hold, theta_hold, mj, args)
    report = f"""# Cart-pole swing-up (dm_control `suite/cartpole.xml`)

`python experiments/cartpole_swing_up.py --iterations {args.iterations} --t-end {args.t_end} \\
--hold {args.hold}` (jaxmbd rkmk/RK4 in rA, h = {H} s; Adam, cosine-decayed learning rate from
{args.learning_rate}; knots every {KNOT_DT} s; 2 CPU cores shared with other jobs).

| quantity | value |
|---|---|
| cost, first -> last iteration | {costs[0]:.4f} -> {costs[-1]:.4f} |
| final angle theta(T = {args.t_end} s) (0 = upright) | {final:+.2e} rad |
| max \\|theta\\| over the optimised last {HOLD_WINDOW} s | {np.abs(wrap(theta[in_window])).max():.2e} rad |
| cart x(T) | {x[-1]:+.3f} m |
| LQR hold, {args.hold} s: max \\|theta\\|, final theta | {np.abs(theta_hold).max():.2e}, {theta_hold[-1]:+.2e} rad |
| MuJoCo (RK4, dt = {H}), same controls: final angle | {wrap(mj_open[-1, 1]):+.2e} rad |
| MuJoCo vs jaxmbd over the swing-up: max \\|d theta\\|, max \\|d x\\| | {diff:.2e} rad, {diff_x:.2e} m |
| MuJoCo, same LQR hold on its own state: max \\|theta\\|, final | {np.abs(wrap(mj_hold[:, 1])).max():.2e}, {wrap(mj_hold[-1, 1]):+.2e} rad |
| compile (first iteration minus the median) | {compile_s:.1f} s |
| run per iteration (median, value and gradient, {n} steps) | {run_median:.3f} s |
| optimisation wall time ({args.iterations} iterations, with compile) | {wall:.1f} s |
| LQR (jacfwd of one step, with compile) | {lqr_s:.1f} s |

LQR gain K = {np.round(K, 4).tolist()}, spectral radius of A - B K = {rho:.4f}.
"""  # noqa: E501
    (RESULTS / f"cartpole_swing_up{args.tag}.md").write_text(report)
    np.savetxt(RESULTS / f"cartpole_swing_up{args.tag}_controls.csv", u_open[:, 0], fmt="%.10f",
               header="u per step (h = 0.01 s), ctrl units (x 10 N)")  # fmt: skip
    print(RESULTS / f"cartpole_swing_up{args.tag}.md")


def _plot(costs, n, x, theta, u, x_hold, theta_hold, mj, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].semilogy(costs)
    ax[0].set(xlabel="Adam iteration", ylabel="cost", title="cost curve")
    t = np.arange(n + 1) * H
    t_hold = args.t_end + np.arange(len(theta_hold)) * H
    ax[1].plot(t, wrap(theta), label="theta, jaxmbd (optimised)")
    ax[1].plot(t_hold, theta_hold, label="theta, jaxmbd (LQR hold)")
    t_mj = np.arange(len(mj)) * H
    ax[1].plot(t_mj, wrap(mj[:, 1]), "k:", label="theta, MuJoCo (same controls, same K)")
    ax[1].plot(t, x, label="cart x (m)")
    ax[1].plot(t_hold, x_hold, color="C2")
    ax[1].axvline(args.t_end, color="grey", lw=0.5)
    ax[1].set(xlabel="t (s)", ylabel="rad / m", title="swing-up and hold")
    ax[1].legend(fontsize=8)
    ax[2].step(t[:-1], u[:, 0], where="post")
    ax[2].set(xlabel="t (s)", ylabel="u (ctrl, x 10 N)", title="optimised controls")
    fig.tight_layout()
    fig.savefig(RESULTS / f"cartpole_swing_up{args.tag}.png", dpi=120)


if __name__ == "__main__":
    main()
