"""Identify a mass from independent measurements through the simulator.

    python -m benchmarks.identify_parameters [--h 1e-3 1e-2] [--iterations 30]

The paper's double pendulum (rod 1: 78 kg, 4 m, pinned at the origin; rod 2: 2 m, pinned at
rod 1's end; both revolute about global x) with rod 2 heavier than the built-in model's
39 kg: 45 kg, its inertia scaled by the same factor. The "measured" data are NOT made by
jaxmbd: a scipy DOP853 integration (rtol = atol = 1e-12) of the Lagrange equations in joint
angles (the equations of tests/references.py, with rod 2's mass as a parameter), sampled
every 10 ms over 2 s (y and z of both centres of mass), plus Gaussian noise (sigma = 1 mm,
fixed seed). Rod 2's mass (inertia scaling with it; rod 1's mass known) is then identified
with optax L-BFGS (zoom line search, log-mass parameter, start at the nominal 39 kg) on
gradients of mbd.simulate (rA, implicit differentiation of every step), once per
integrator (backward Euler, first order; generalized-alpha, second order) and step size.
The loss is the mean squared residual over sigma^2, so a perfect model ends near 1.

A discretisation error in the simulator shows up as a bias of the identified mass: backward
Euler's numerical damping is compensated by a wrong mass. As the noise floor, the same data
are fitted with the reference ODE itself (scipy minimize_scalar), and the standard error of
the mass due to the noise is estimated from the ODE's sensitivity (Gauss-Newton).

Writes benchmarks/results/identification.{csv,png} and prints a summary table.
"""

from __future__ import annotations

import argparse
import csv
import functools
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy.integrate import solve_ivp
from scipy.optimize import minimize_scalar

import jaxmbd as mbd
from benchmarks._harness import RESULTS  # noqa: E402

GRAVITY = 9.81
ROD1_LENGTH, ROD1_MASS, ROD1_INERTIA_ZZ = 4.0, 78.0, 104.01625
ROD2_LENGTH, ROD2_NOMINAL_MASS, ROD2_NOMINAL_INERTIA_ZZ = 2.0, 39.0, 13.008125
THETA0 = np.array([0.0, -0.5 * np.pi])  # rod 1 along +y, rod 2 hanging along -z, at rest

TRUE_MASS = 45.0
START_MASS = ROD2_NOMINAL_MASS
SAMPLE_DT = 0.01
INTEGRATORS = ("backward_euler", "gen_alpha")


# --------------------------------------------------------------------------------------
# Independent "measurements": scipy ODE in joint angles (no jax, no jaxmbd)
# --------------------------------------------------------------------------------------


def _accelerations(theta, theta_dot, mass2):
    """Angular accelerations from the Lagrange equations in absolute angles (the equations
    of tests/references.py with rod 2's mass and inertia scaled by mass2 / 39)."""
    half1, half2 = 0.5 * ROD1_LENGTH, 0.5 * ROD2_LENGTH
    inertia2_zz = ROD2_NOMINAL_INERTIA_ZZ * mass2 / ROD2_NOMINAL_MASS
    inertia1 = ROD1_INERTIA_ZZ + ROD1_MASS * half1**2 + mass2 * ROD1_LENGTH**2
    inertia2 = inertia2_zz + mass2 * half2**2
    coupling = mass2 * ROD1_LENGTH * half2
    delta = theta[0] - theta[1]
    m12 = coupling * np.cos(delta)
    rhs1 = -coupling * np.sin(delta) * theta_dot[1] ** 2 - GRAVITY * (
        ROD1_MASS * half1 + mass2 * ROD1_LENGTH
    ) * np.cos(theta[0])
    rhs2 = coupling * np.sin(delta) * theta_dot[0] ** 2 - GRAVITY * mass2 * half2 * np.cos(theta[1])
    det = inertia1 * inertia2 - m12**2
    return np.array([(inertia2 * rhs1 - m12 * rhs2) / det, (inertia1 * rhs2 - m12 * rhs1) / det])


def reference_positions(mass2: float, times: np.ndarray) -> np.ndarray:
    """(T, 2, 2): y and z of rod 1's and rod 2's centres of mass at ``times``."""

    def rhs(_t, state):
        return np.concatenate([state[2:], _accelerations(state[:2], state[2:], mass2)])

    sol = solve_ivp(
        rhs,
        (0.0, float(times[-1])),
        np.concatenate([THETA0, np.zeros(2)]),
        method="DOP853",
        t_eval=times,
        rtol=1e-12,
        atol=1e-12,
    )
    if not sol.success:
        raise RuntimeError(sol.message)
    theta1, theta2 = sol.y[0], sol.y[1]
    axis1 = np.stack([np.cos(theta1), np.sin(theta1)], axis=-1)
    axis2 = np.stack([np.cos(theta2), np.sin(theta2)], axis=-1)
    rod1 = 0.5 * ROD1_LENGTH * axis1
    rod2 = ROD1_LENGTH * axis1 + 0.5 * ROD2_LENGTH * axis2
    return np.stack([rod1, rod2], axis=1)


def measurements(*, t_end, noise, seed, true_mass=TRUE_MASS):
    times = np.arange(round(t_end / SAMPLE_DT) + 1) * SAMPLE_DT
    clean = reference_positions(true_mass, times)
    rng = np.random.default_rng(seed)
    return times, clean + noise * rng.standard_normal(clean.shape)


def noise_floor(times, measured, noise):
    """Mass fitted with the exact model (the reference ODE) and its standard error."""

    def loss(mass2):
        return np.mean((reference_positions(mass2, times) - measured) ** 2) / noise**2

    fit = minimize_scalar(loss, bounds=(30.0, 60.0), method="bounded", options={"xatol": 1e-6})
    # Gauss-Newton: var(m) = sigma^2 / |d positions / d m|^2
    dm = 1e-3
    sens = (reference_positions(fit.x + dm, times) - reference_positions(fit.x - dm, times)) / (
        2 * dm
    )
    return float(fit.x), float(fit.fun), int(fit.nfev), float(noise / np.sqrt(np.sum(sens**2)))


# --------------------------------------------------------------------------------------
# Identification through mbd.simulate
# --------------------------------------------------------------------------------------


def with_mass(model, mass2):
    """Rod 2's mass set to mass2, its inertia scaled by the same factor."""
    scale = mass2 / model.mass[1]
    return eqx.tree_at(
        lambda m: (m.mass, m.inertia),
        model,
        (model.mass.at[1].set(mass2), model.inertia.at[1].multiply(scale)),
    )


def simulated_positions(model, mass2, *, integrator, t_end, h, newton):
    stride = round(SAMPLE_DT / h)
    if abs(stride * h - SAMPLE_DT) > 1e-12:
        raise ValueError(f"h = {h} must divide the sampling interval {SAMPLE_DT}")
    sol = mbd.simulate(
        with_mass(model, mass2), integrator=integrator, newton=newton, t_end=t_end, h=h
    )
    return sol.r[::stride, :, 1:]  # y, z of both centres of mass every 10 ms


def _gauss_newton(
    predict, data, measured, *, integrator, h, noise, iterations, start_mass, xtol, gtol, verbose
):
    """Gauss-Newton in x = log(mass / start_mass) with step halving.

    With residuals r = (prediction - data) / sigma and J = dr/dx, the loss is mean(r^2),
    its gradient 2 mean(J r) and the Gauss-Newton step dx = -sum(J r) / sum(J J). J is
    a single column here, so one forward-mode pass (the JVP of the simulation, implicit
    in every step) gives it together with the prediction: one compiled program, about half
    the compile time of a reverse-mode gradient with a line search (the program holds
    the simulation's linearisation once and no transpose)."""

    def residuals_and_sensitivity(x):
        mass = start_mass * jnp.exp(x)
        pred, dpred_dx = jax.jvp(predict, (mass,), (mass,))  # d mass / dx = mass
        return pred, (pred - data) / noise, dpred_dx / noise

    start = time.perf_counter()
    evaluate = mbd.jit(residuals_and_sensitivity).lower(jnp.zeros(())).compile()
    compile_s = time.perf_counter() - start

    start = time.perf_counter()
    x = jnp.zeros(())
    pred, r, J = evaluate(x)
    loss = float(jnp.mean(r**2))
    history, masses, halvings, iteration_count = [loss], [start_mass], 0, 0
    for k in range(iterations):
        grad = float(2.0 * jnp.mean(J * r))
        if verbose:
            print(
                f"  {integrator:14s} h={h:g} iter {k:2d}  mass {masses[-1]:10.6f}  "
                f"loss {loss:12.6g}  d loss/d log m {grad:+.3e}"
            )
        if abs(grad) < gtol:
            break
        iteration_count += 1
        dx = -float(jnp.sum(J * r) / jnp.sum(J * J))
        for _ in range(30):  # halve the step until the loss does not increase
            candidate = evaluate(x + dx)
            new_loss = float(jnp.mean(candidate[1] ** 2))
            if new_loss <= loss:
                break
            dx *= 0.5
            halvings += 1
        else:  # no step decreases the loss: converged to rounding
            break
        x = x + dx
        pred, r, J = candidate
        loss = new_loss
        history.append(loss)
        masses.append(start_mass * float(np.exp(x)))
        if abs(dx) < xtol:
            break
    run_s = time.perf_counter() - start
    fitted = np.asarray(pred)
    return dict(
        integrator=integrator,
        h=h,
        method="gauss_newton",
        mass=masses[-1],
        iterations=iteration_count,
        linesearch_steps=halvings,
        compile_s=compile_s,
        run_s=run_s,
        final_loss=float(np.mean((fitted - measured) ** 2) / noise**2),
        history=np.asarray(history),  # loss at every iterate, one per entry of masses
        masses=np.asarray(masses),
        fitted=fitted,
    )


def identify(
    times,
    measured,
    *,
    integrator,
    h,
    noise,
    method="lbfgs",
    iterations=30,
    start_mass=START_MASS,
    newton="reuse",
    xtol=1e-9,
    gtol=1e-2,
    verbose=True,
):
    """Fit rod 2's mass on x = log(mass / start_mass), with ``method``:

    - ``"lbfgs"``: optax L-BFGS (zoom line search) on reverse-mode gradients of the loss;
    - ``"gauss_newton"``: Gauss-Newton on the residuals, whose sensitivity to the single
      parameter is one forward-mode pass (``jax.jvp``) through the simulation (one pass
      per parameter: with many parameters, reverse-mode L-BFGS is the better choice).

    Stops when the step |dx| < xtol, the gradient |d loss / dx| < gtol, or after
    ``iterations``; returns the last iterate."""
    model = mbd.models.double_pendulum()
    t_end = float(times[-1])
    data = jnp.asarray(measured)
    predict = functools.partial(
        simulated_positions, model, integrator=integrator, t_end=t_end, h=h, newton=newton
    )
    if method == "gauss_newton":
        return _gauss_newton(
            predict,
            data,
            measured,
            integrator=integrator,
            h=h,
            noise=noise,
            iterations=iterations,
            start_mass=start_mass,
            xtol=xtol,
            gtol=gtol,
            verbose=verbose,
        )
    if method != "lbfgs":
        raise ValueError(f"method must be 'lbfgs' or 'gauss_newton', not {method!r}")

    def loss(x):
        pred = predict(start_mass * jnp.exp(x[0]))
        return jnp.mean((pred - data) ** 2) / noise**2

    value_and_grad = optax.value_and_grad_from_state(loss)
    solver = optax.lbfgs()

    def step(x, state):
        value, grad = value_and_grad(x, state=state)
        updates, state = solver.update(grad, state, x, value=value, grad=grad, value_fn=loss)
        ls_steps = optax.tree_utils.tree_get(state, "num_linesearch_steps")
        return optax.apply_updates(x, updates), state, value, grad[0], ls_steps

    x = jnp.zeros(1)
    state = solver.init(x)
    start = time.perf_counter()
    # one compilation: gradient + line search, with jaxmbd's compile options (mbd.jit)
    step = mbd.jit(step).lower(x, state).compile()
    compile_s = time.perf_counter() - start

    history, masses, ls_steps = [], [start_mass], 0
    start = time.perf_counter()
    for k in range(iterations):
        x_new, state, value, grad, n_ls = step(x, state)
        history.append(float(value))
        ls_steps += int(n_ls)
        dx = abs(float(x_new[0] - x[0]))
        x = x_new
        masses.append(start_mass * float(np.exp(x[0])))
        if verbose:
            print(
                f"  {integrator:14s} h={h:g} iter {k:2d}  mass {masses[-2]:10.6f}  "
                f"loss {history[-1]:12.6g}  d loss/d log m {float(grad):+.3e}  "
                f"line-search steps {int(n_ls)}"
            )
        if dx < xtol or abs(float(grad)) < gtol:
            break
    run_s = time.perf_counter() - start

    mass = masses[-1]
    fitted = np.asarray(mbd.jit(predict)(jnp.asarray(mass)))
    final_loss = float(np.mean((fitted - measured) ** 2) / noise**2)
    return dict(
        integrator=integrator,
        h=h,
        method="lbfgs",
        mass=mass,
        iterations=len(history),
        linesearch_steps=ls_steps,
        compile_s=compile_s,
        run_s=run_s,
        final_loss=final_loss,
        # loss at every iterate (the start, ..., the returned mass), one per entry of masses
        history=np.asarray([*history, final_loss]),
        masses=np.asarray(masses),
        fitted=fitted,
    )


def run(
    *,
    integrators=INTEGRATORS,
    steps=(1e-3,),
    t_end=2.0,
    noise=1e-3,
    seed=0,
    iterations=30,
    newton="reuse",
    method="lbfgs",
    verbose=True,
):
    """Measurements, noise floor, and one identification per integrator and step size."""
    times, measured = measurements(t_end=t_end, noise=noise, seed=seed)
    floor_mass, floor_loss, floor_nfev, std_error = noise_floor(times, measured, noise)
    if verbose:
        print(
            f"noise floor (reference ODE fitted to the data): mass {floor_mass:.4f} kg, "
            f"loss {floor_loss:.4f}, standard error {std_error:.4f} kg"
        )
    fits = [
        identify(
            times,
            measured,
            integrator=integrator,
            h=h,
            noise=noise,
            iterations=iterations,
            newton=newton,
            method=method,
            verbose=verbose,
        )
        for h in steps
        for integrator in integrators
    ]
    return dict(
        times=times,
        measured=measured,
        clean=reference_positions(TRUE_MASS, times),
        floor=dict(mass=floor_mass, final_loss=floor_loss, iterations=floor_nfev),
        std_error=std_error,
        fits=fits,
    )


def bias_percent(mass):
    return 100.0 * (mass / TRUE_MASS - 1.0)


def write_csv(path, res):
    floor = res["floor"]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "model",
                "h",
                "true_mass",
                "start_mass",
                "identified_mass",
                "bias_percent",
                "iterations",
                "linesearch_steps",
                "compile_s",
                "run_s",
                "final_loss",
            ]
        )
        writer.writerow(
            [
                "reference ODE (noise floor)",
                "",
                TRUE_MASS,
                "",
                f"{floor['mass']:.6f}",
                f"{bias_percent(floor['mass']):.4f}",
                floor["iterations"],
                "",
                "",
                "",
                f"{floor['final_loss']:.6g}",
            ]
        )
        for f in res["fits"]:
            writer.writerow(
                [
                    f"jaxmbd rA {f['integrator']}",
                    f["h"],
                    TRUE_MASS,
                    START_MASS,
                    f"{f['mass']:.6f}",
                    f"{bias_percent(f['mass']):.4f}",
                    f["iterations"],
                    f["linesearch_steps"],
                    f"{f['compile_s']:.2f}",
                    f"{f['run_s']:.2f}",
                    f"{f['final_loss']:.6g}",
                ]
            )


def plot(path, res, noise):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times, measured, fits = res["times"], res["measured"], res["fits"]
    integrators = list(dict.fromkeys(f["integrator"] for f in fits))
    colours = {id(f): f"C{k}" for k, f in enumerate(fits)}
    fig, axes = plt.subplots(
        2, len(integrators) + 1, figsize=(5 * (len(integrators) + 1), 7.5), squeeze=False
    )
    for col, integrator in enumerate(integrators):
        top, bottom = axes[0, col], axes[1, col]
        top.plot(times, measured[:, 1, 0], ".", ms=2.5, color="0.6", label="measured y")
        top.plot(times, measured[:, 1, 1], ".", ms=2.5, color="0.3", label="measured z")
        for f in (f for f in fits if f["integrator"] == integrator):
            label = f"h={f['h']:g}: {f['mass']:.3f} kg ({bias_percent(f['mass']):+.3f} %)"
            colour = colours[id(f)]
            top.plot(times, f["fitted"][:, 1, 0], "-", lw=1, color=colour, label=label)
            top.plot(times, f["fitted"][:, 1, 1], "-", lw=1, color=colour)
            error = 1e3 * np.linalg.norm(f["fitted"][:, 1] - res["clean"][:, 1], axis=-1)
            bottom.semilogy(times[1:], error[1:], lw=1, color=colour, label=label)
        bottom.axhline(1e3 * noise, color="k", ls=":", lw=1, label="noise sigma")
        top.set_title(f"{integrator}: rod 2 centre of mass, true mass {TRUE_MASS:g} kg")
        top.set_xlabel("t [s]")
        top.set_ylabel("position [m]")
        top.legend(fontsize=7)
        bottom.set_title("fitted minus noise-free reference, rod 2")
        bottom.set_xlabel("t [s]")
        bottom.set_ylabel("position error [mm]")
        bottom.legend(fontsize=7)
        bottom.grid(alpha=0.3)
    loss_ax, mass_ax = axes[0, -1], axes[1, -1]
    for f in fits:
        label = f"{f['integrator']}, h={f['h']:g}"
        colour = colours[id(f)]
        loss_ax.semilogy(f["history"], "o-", ms=3, color=colour, label=label)
        mass_ax.plot(f["masses"], "o-", ms=3, color=colour, label=label)
    loss_ax.axhline(res["floor"]["final_loss"], color="k", ls=":", lw=1, label="noise floor")
    loss_ax.set_xlabel("L-BFGS iteration")
    loss_ax.set_ylabel("loss (mean squared residual / sigma²)")
    loss_ax.legend(fontsize=7)
    loss_ax.grid(alpha=0.3)
    mass_ax.axhline(TRUE_MASS, color="k", lw=1, label="true mass")
    mass_ax.axhspan(
        TRUE_MASS - 2 * res["std_error"],
        TRUE_MASS + 2 * res["std_error"],
        color="k",
        alpha=0.15,
        label="± 2 standard errors (noise)",
    )
    mass_ax.set_xlabel("L-BFGS iteration")
    mass_ax.set_ylabel("rod 2 mass [kg]")
    mass_ax.legend(fontsize=7)
    mass_ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_summary(res):
    floor = res["floor"]
    header = (
        f"{'model':32s} {'h':>6s} {'mass [kg]':>10s} {'bias [%]':>9s} {'iter':>5s} "
        f"{'ls':>4s} {'compile [s]':>11s} {'run [s]':>8s} {'final loss':>11s}"
    )
    print(
        f"\ntrue mass {TRUE_MASS:g} kg, start {START_MASS:g} kg; noise standard error of the "
        f"mass {res['std_error']:.4f} kg ({100 * res['std_error'] / TRUE_MASS:.3f} %)"
    )
    print(header)
    print("-" * len(header))
    print(
        f"{'reference ODE (noise floor)':32s} {'':>6s} {floor['mass']:10.4f} "
        f"{bias_percent(floor['mass']):+9.3f} {floor['iterations']:5d} {'':>4s} {'':>11s} "
        f"{'':>8s} {floor['final_loss']:11.4f}"
    )
    for f in res["fits"]:
        print(
            f"{'jaxmbd rA ' + f['integrator']:32s} {f['h']:6g} {f['mass']:10.4f} "
            f"{bias_percent(f['mass']):+9.3f} {f['iterations']:5d} {f['linesearch_steps']:4d} "
            f"{f['compile_s']:11.1f} {f['run_s']:8.1f} {f['final_loss']:11.4f}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--h", type=float, nargs="+", default=[1e-3, 1e-2], help="step sizes")
    parser.add_argument("--integrators", nargs="+", default=list(INTEGRATORS), choices=INTEGRATORS)
    parser.add_argument("--iterations", type=int, default=30, help="L-BFGS iterations at most")
    parser.add_argument("--t-end", type=float, default=2.0, help="measured horizon [s]")
    parser.add_argument("--noise", type=float, default=1e-3, help="noise sigma [m]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--newton", default="reuse", choices=("reuse", "full", "modified"))
    parser.add_argument(
        "--method",
        default="lbfgs",
        choices=("lbfgs", "gauss_newton"),
        help="optax L-BFGS on reverse-mode gradients, or Gauss-Newton on forward-mode "
        "sensitivities",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from benchmarks._harness import machine

    print(machine())
    res = run(
        integrators=args.integrators,
        steps=args.h,
        t_end=args.t_end,
        noise=args.noise,
        seed=args.seed,
        iterations=args.iterations,
        newton=args.newton,
        method=args.method,
    )
    print_summary(res)
    write_csv(args.out / "identification.csv", res)
    plot(args.out / "identification.png", res, args.noise)
    print(f"wrote {args.out / 'identification.csv'} and identification.png")


if __name__ == "__main__":
    main()
