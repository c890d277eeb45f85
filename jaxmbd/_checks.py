"""Turning solver status codes into clear errors (outside jit) or runtime checks (inside)."""

from __future__ import annotations

import dataclasses
import logging
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._parameter_checks import unheld_singular_inertia, with_parameter_status
from ._results import NONFINITE, RESULT_ITEMS, RESULTS, SUCCESS, code_message
from .actuators import with_activation
from .compiled.host_arrays import to_device
from .compiled.jit import RUN_ONCE, jit, under_trace
from .constraints.equations import constraint_values, rA_terms
from .errors import AssemblyWarning, ModelError, SolverError
from .forces.joint_limits import JointLimits
from .model import Model
from .solution import Solution

logger = logging.getLogger("jaxmbd")


def is_traced(*trees) -> bool:
    """True when called under an outer jax transformation (jit, grad, vmap): a leaf of
    ``trees`` is traced, or a trace is active where they are all concrete (a jitted
    function that closes over them)."""
    return has_tracers(*trees) or under_trace()


def has_tracers(*trees) -> bool:
    """True where a leaf of ``trees`` is traced (their values are not known here)."""
    leaves = jax.tree_util.tree_leaves(trees)
    return any(isinstance(x, jax.core.Tracer) for x in leaves)


def constraints_in_left_null_space(model: Model, r, A, t, *, rtol=1e-8, top=6) -> list[str]:
    """Names of the constraints that take part in a rank deficiency of the rA Jacobian."""
    zero = jnp.zeros_like(r)
    _, G, _, _ = rA_terms(model, r, A, zero, zero, t)
    G = np.asarray(G)
    if G.size == 0:
        return []
    U, s, _ = np.linalg.svd(G)
    smax = s[0] if s.size else 1.0
    # rows beyond the number of columns are always in the left null space
    null = [k for k in range(G.shape[0]) if k >= s.size or s[k] <= rtol * smax]
    if not null:
        return []
    weight = np.sqrt(np.sum(U[:, null] ** 2, axis=1))
    order = np.argsort(-weight)
    return [model.describe_constraint(int(k)) for k in order[:top] if weight[k] > 0.05]


def largest_residuals(model: Model, residual, *, top=3) -> list[str]:
    res = np.asarray(residual)[: model.nc]
    order = np.argsort(-np.abs(res))[:top]
    return [
        f"{model.describe_constraint(int(k))}: {res[k]:.3e}" for k in order if np.isfinite(res[k])
    ]


def raise_on_failure(model: Model, sol, *, what: str):
    """Raise :class:`SolverError` for the first failed step of a concrete Solution: the time,
    the status, the Newton iterations and residual, the constraints in a rank deficiency of
    the Jacobian, and the largest constraint residuals Phi at the failed step's iterate (or
    at the last good step when that iterate is not finite). A start that failed because a
    body's singular inertia leaves a rotation no joint holds raises :class:`ModelError`
    naming the body instead."""
    status = np.asarray(sol.status)
    bad = np.nonzero(status != SUCCESS)[0]
    if bad.size == 0:
        return
    k = int(bad[0])
    t = float(np.asarray(sol.t)[k])
    code = int(status[k])
    every = getattr(sol, "save_every", 1)
    where = f"at step {k} (t = {t:.6g} s)"
    if every > 1 and k > 0:
        t_prev = float(np.asarray(sol.t)[k - 1])
        where = (
            f"between saved rows {k - 1} and {k} (t = {t_prev:.6g} to {t:.6g} s, saved every "
            f"{every} steps; run that interval with save_every=1 for the exact step)"
        )
    iterations = int(np.asarray(sol.iterations)[k])
    msg = (
        f"{what} of model '{model.name}' failed {where}: {code_message(code)}"
        # a step without a Newton solve (an explicit one) has neither iterations nor residual
        + (f"; iterations {iterations}, residual norm {float(sol.residual[k]):.3e}."
           if iterations else ".")
    )  # fmt: skip
    if getattr(sol, "_joint_space_run", False) and k > 0:
        raise SolverError(msg + _joint_space_failure(model, sol, k))
    if k == 0:
        # a start that fails because a body's rotation has neither inertia nor a joint
        # holding it is an inertia problem, whatever the closure of the drawn pose
        zero = jnp.zeros_like(model.r0)
        unheld = unheld_singular_inertia(model, rA_terms(model, model.r0, model.A0, zero,
                                                         zero, 0.0)[1])  # fmt: skip
        if unheld is not None:
            raise ModelError(f"{what} of model '{model.name}' failed at the start: {unheld}.")
    if k == 0 and model.nc:
        phi0 = np.asarray(constraint_values(model, model.r0, model.A0, 0.0))
        worst = largest_residuals(model, phi0)
        msg = (
            f"{what} of model '{model.name}': could not assemble the initial configuration: "
            f"closure error {np.max(np.abs(phi0)):.3e} at the drawn pose, rows "
            + "; ".join(worst) + f". The consistent start's Newton: {code_message(code)} "
            f"(iterations {int(sol.iterations[0])}, residual norm {float(sol.residual[0]):.3e})."
            " Check the lengths and positions of the bodies these rows join."
        )  # fmt: skip
    ref = k - 1 if k > 0 else 0
    r, A = np.asarray(sol.r[ref]), np.asarray(sol.A[ref])
    if np.all(np.isfinite(r)) and np.all(np.isfinite(A)):
        involved = constraints_in_left_null_space(model, jnp.asarray(r), jnp.asarray(A), t)
        if involved:
            msg += " The constraint Jacobian is (nearly) singular there; constraints involved: " + (
                "; ".join(involved)
            )
        elif code == NONFINITE:
            msg += " The iteration produced non-finite values (check inputs, masses, forces)."
    if model.nc:
        at, step = k, "the failed step"
        if not (np.all(np.isfinite(np.asarray(sol.r[k]))) and np.all(np.isfinite(sol.A[k]))):
            at, step = ref, "the last good step"
        phi = constraint_values(
            model, jnp.asarray(sol.r[at]), jnp.asarray(sol.A[at]), float(np.asarray(sol.t)[at])
        )
        worst = largest_residuals(model, phi)
        if worst:
            msg += f" Largest constraint residuals at {step}: " + "; ".join(worst) + "."
    raise SolverError(msg)


def _joint_space_failure(model: Model, sol, k: int) -> str:
    """What failed at step ``k`` of a run in joint coordinates: the tree's joints whose
    coordinates or rates went non-finite, else the loop-closing rows (those of the model's
    joints that are not on the tree's edges) with the largest residuals."""
    tree = sol.tree
    qpos, qvel = np.asarray(sol.stored_q[k]), np.asarray(sol.stored_v[k])
    qadr, vadr = np.asarray(tree.joint_qpos_adr, int), np.asarray(tree.joint_dof_adr, int)
    q_end = np.append(qadr[1:], qpos.shape[-1])
    v_end = np.append(vadr[1:], qvel.shape[-1])
    broken = []
    for j, name in enumerate(tree.joint_names):
        parts = [label for label, x in (("position", qpos[qadr[j] : q_end[j]]),
                                        ("rate", qvel[vadr[j] : v_end[j]]))
                 if not np.all(np.isfinite(x))]  # fmt: skip
        if parts:
            broken.append(f"'{name}' ({' and '.join(parts)})")
    if broken:
        return (
            " Joint coordinates that went non-finite: " + ", ".join(broken) + " (check the "
            "step size against the fastest motion, masses and forces)."
        )
    on_tree = set(tree.joint_names)
    loop = [row for row in range(model.nc) if model.constraint_joints[row] not in on_tree]
    if not loop:
        return " No joint coordinate is non-finite and the model has no loop-closing rows."
    r, A = np.asarray(sol.r[k]), np.asarray(sol.A[k])
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(A))):
        return ""
    phi = np.asarray(constraint_values(model, jnp.asarray(r), jnp.asarray(A), float(sol.t[k])))
    order = sorted(loop, key=lambda row: -abs(phi[row]))[:3]
    return (
        " Largest loop-closing residuals at the failed step: "
        + "; ".join(f"{model.describe_constraint(row)}: {phi[row]:.3e}" for row in order)
        + "."
    )


def initial_correction(model: Model, sol=None, *, start=None) -> dict[str, float]:
    """How far the t = 0 analysis moved the model's initial state (the largest over the
    bodies of :func:`start_correction`: position, rotation angle, velocities); from a
    concrete Solution, or from ``start``, its concrete t = 0 state (r, A, rdot, omega)."""
    per_body = _start_correction_of(model, sol, start)
    return {key: float(np.max(value, initial=0.0)) for key, value in per_body.items()}


def _start_correction_of(model: Model, sol, start) -> dict[str, np.ndarray]:
    """:func:`start_correction` of a concrete run as numpy arrays, by field."""
    initial = (model.r0, model.A0, model.rdot0, model.omega0)
    kept = None if start is not None else getattr(sol, "start_correction", None)
    if kept is not None:  # the Solution's own, of its first state (no second program call)
        moved = (kept.position, kept.rotation, kept.velocity)
    elif start is None:  # the run's first state, read on the host (no program per horizon)
        moved = _correction(*(first_row(x) for x in (sol.r, sol.A, sol.rdot, sol.omega)),
                            *initial)  # fmt: skip
    else:
        moved = _correction(*(jnp.asarray(x) for x in start[:4]), *initial)
    return dict(zip(("position", "rotation", "velocity"), map(np.asarray, moved), strict=True))


#: Corrections of the consistent start above which an :class:`~jaxmbd.AssemblyWarning`
#: says what moved (m, rad, m/s or rad/s); change the entries to make it more or less
#: strict (``warnings.filterwarnings("ignore", category=jaxmbd.AssemblyWarning)`` silences
#: it). Below them the correction is only logged (INFO).
ASSEMBLY_TOLERANCE = {"position": 1e-6, "rotation": 1e-6, "velocity": 1e-6}


class StartCorrection(eqx.Module):
    """How far the consistent start moved each body (``sol.start_correction``): the
    distance its centre moved (m), the angle it turned (rad) and the largest change of
    its velocities (m/s, rad/s), each (..., nb)."""

    position: jax.Array
    rotation: jax.Array
    velocity: jax.Array


def start_correction(model: Model, r, A, rdot, omega) -> StartCorrection:
    """The :class:`StartCorrection` of the t = 0 state (r, A, rdot, omega) against the
    model's initial state (diagnostic values: no gradient flows through them)."""
    start = (model.r0, model.A0, model.rdot0, model.omega0)
    return StartCorrection(*_correction(r, A, rdot, omega, *start))


@jit(xla_options=RUN_ONCE)
def _correction(r, A, rdot, omega, r0, A0, rdot0, omega0):
    """:func:`start_correction`'s arrays. One program: run eagerly after every simulation,
    its 16 operations were 16 small compilations (several seconds of a first run)."""
    sg = jax.lax.stop_gradient
    r, A, rdot, omega = sg(r), sg(A), sg(rdot), sg(omega)
    dA = jnp.einsum("bji,bjk->bik", sg(A0), A)
    cos = jnp.clip(0.5 * (jnp.trace(dA, axis1=1, axis2=2) - 1.0), -1.0, 1.0)
    sin = 0.5 * jnp.linalg.norm(dA - jnp.swapaxes(dA, 1, 2), axis=(1, 2)) / jnp.sqrt(2.0)
    dv = jnp.concatenate([rdot - sg(rdot0), omega - sg(omega0)], 1)
    return (
        jnp.linalg.norm(r - sg(r0), axis=1), jnp.arctan2(sin, cos),
        jnp.max(jnp.abs(dv), axis=1),
    )  # fmt: skip


def _moved_bodies(model: Model, values, tol: float, unit: str) -> str:
    order = np.argsort(-values)
    return ", ".join(f"'{model.body_names[b]}' {values[b]:.3g} {unit}"
                     for b in order[:3] if values[b] > tol)  # fmt: skip


def report_initial_correction(model: Model, sol, what: str, *, threshold=1e-10, start=None,
                              stacklevel: int = 4):  # fmt: skip
    per_body = _start_correction_of(model, sol, start)
    moved = {key: float(np.max(value, initial=0.0)) for key, value in per_body.items()}
    if model.nb:
        pos, rot, vel = per_body["position"], per_body["rotation"], per_body["velocity"]
        tol = ASSEMBLY_TOLERANCE
        parts = []
        if pos.max(initial=0) > tol["position"] or rot.max(initial=0) > tol["rotation"]:
            moved_by = _moved_bodies(model, pos, tol["position"], "m")
            turned_by = _moved_bodies(model, rot, tol["rotation"], "rad")
            what_moved = [f"moved {moved_by}" if moved_by else "",
                          f"turned {turned_by}" if turned_by else ""]  # fmt: skip
            parts.append("the initial configuration did not satisfy the constraints; to "
                         "assemble it the consistent start "
                         + " and ".join(x for x in what_moved if x))  # fmt: skip
        # a driven model's velocities come from its drivers, and a kinematic analysis has
        # no initial velocities of its own: only a free model's given velocities count
        if what == "dynamics" and not model.drivers and vel.max(initial=0) > tol["velocity"]:
            parts.append("the initial velocities were projected onto the constraints "
                         "(changed by up to " + _moved_bodies(model, vel, tol["velocity"],
                                                              "m/s or rad/s") + ")")  # fmt: skip
        if parts:
            warnings.warn(
                f"{what} of model '{model.name}': " + "; ".join(parts) + " (threshold "
                "jaxmbd._checks.ASSEMBLY_TOLERANCE; sol.start_correction has every body)",
                AssemblyWarning,
                stacklevel=stacklevel,
            )
    if max(moved.values()) > threshold:
        logger.info(
            "%s of model '%s': the consistent start moved positions by %.3e, orientations by "
            "%.3e rad and velocities by %.3e",
            what,
            model.name,
            moved["position"],
            moved["rotation"],
            moved["velocity"],
        )
    return moved


def error_if_failed(sol, what: str):
    """Inside a trace: an equinox runtime error with the first failure's RESULTS message
    instead of a Python exception (the step and constraints need concrete values: run the
    analysis outside jit, or pass ``throw=False`` and read ``sol.status``)."""
    status = sol.status.reshape(-1)
    code = status[jnp.argmax(status != SUCCESS)]
    messages = [
        f"jaxmbd: {what} failed: {RESULTS[item]}; run it outside jit (or with "
        "throw=False and read Solution.status) for the step, time and constraints at fault"
        for item in RESULT_ITEMS
    ]
    return eqx.branched_error_if(sol, jnp.any(status != SUCCESS), code, messages)


def solution_from_outputs(
    model: Model, form, h, outs, integrator: str = "", *, chart_singular=None, save_every=1,
    sensor_key=None, linear_solver: str = "", tree=None, controls=None, plan=None,
    start_correction=None, soft_row_forces=None,
):  # fmt: skip
    """Solution of the per-step outputs (r, A, rdot, omega, rddot, omegadot, lam,
    iterations, status, residual[, q, v[, condition]]) of an analysis; q and v are the
    formulation's own coordinates and velocities, one row per body; condition the iteration
    matrix's condition number per step (integrators' ``record_condition``). A model with
    sensors is kept (without its forces, which the readings do not need) for
    ``sol.sensors``, with ``sensor_key`` for their noise and ``controls`` (the per-step
    controls (n, nu) of the run, or "policy") for its actuator sensors. ``plan``: the run's
    decisions (:meth:`jaxmbd.analysis.plan.Plan.described`), kept as ``sol.plan``.
    ``start_correction``: the :func:`start_correction` of the first state where the run's
    program computed it (None: computed here). ``soft_row_forces``: the solved row forces
    that the sensors reading the solved contacts need (None: none)."""
    # an integrator's own outputs come last, as a dict (moreau_jean's unilateral forces)
    extra = outs[-1] if isinstance(outs[-1], dict) else {}
    outs = outs[:-1] if extra else outs
    r, A, rdot, omega, rddot, omegadot, lam, iters, status, residual = outs[:10]
    q, v = outs[10:12] if len(outs) >= 12 else (None, None)
    condition = outs[12] if len(outs) == 13 else None
    # the controls' rows now for the sensors and after a policy (NaN); else the actuators'
    # outputs pick them from the steps' when read (sol.forces), at no cost to the run
    rows = model.sensors is not None or isinstance(controls, str)
    if is_traced(h):
        t = jnp.arange(r.shape[0]) * h * save_every
    else:  # one transfer (no program per number of rows)
        (t,) = to_device([np.arange(r.shape[0]) * float(h) * save_every])
    return Solution.assembled(
        t=t,
        r=r,
        A=A,
        rdot=rdot,
        omega=omega,
        rddot=rddot,
        omegadot=omegadot,
        lam=lam,
        iterations=iters,
        status=status,
        residual=residual,
        q=q,
        v=v,
        condition=condition,
        chart_singular=chart_singular,
        save_every=save_every,
        formulation=form.name,
        integrator=integrator,
        linear_solver=linear_solver,
        tree=getattr(model, "tree", None) if tree is None else tree,
        body_names=model.body_names,
        constraint_names=model.constraint_names,
        joint_definitions=model.joints,
        contact_element=getattr(model, "contacts", None),
        sensor_model=None if model.sensors is None else _sensor_model(model, h),
        sensor_key=None if model.sensors is None else sensor_key,
        controls=_row_controls(model, controls, r.shape[0], save_every) if rows else None,
        step_controls=None if rows or model.actuators is None else controls,
        marker_element=getattr(model, "markers", None),
        unilateral_forces=extra.get("unilateral_forces"),
        act=extra.get("act"),
        limit_element=_limit_element(model),
        force_elements=_reporting_forces(model, h),
        start_correction=_start_correction_or(start_correction, model, r, A, rdot, omega),
        plan=plan,
        soft_row_forces=soft_row_forces,
    )


def _row_controls(model: Model, controls, rows: int, save_every: int):
    """The controls (rows, nu) held at each saved row: row 0 the first step's, row i the
    step that ended there (i save_every - 1); None without per-step controls (the model's
    own acted); NaN after a policy (its replies are not kept)."""
    if controls is None or model.actuators is None:
        return None
    nu = model.actuators.nu
    if isinstance(controls, str):
        return jnp.full((rows, nu), jnp.nan)
    steps = np.maximum(np.arange(rows) * save_every - 1, 0)
    return jnp.asarray(controls)[steps]


def _reporting_forces(model: Model, h) -> tuple:
    """The force elements with entries in ``sol.forces``; the actuators with the run's step
    ``h``, which ``act_early`` looks ahead by."""
    element = model.actuators
    if element is not None and element.has_dynamics:
        model = with_activation(model, element.activation, 0.0, h)
    return tuple(f for f in model.forces if f.output_names)


def _sensor_model(model: Model, h) -> Model:
    """The model kept for ``sol.sensors``, with only the forces its readings use: the
    contact element (touch sensors) and the actuators (actuator forces; with activation
    dynamics, the run's step ``h``, which ``act_early`` looks ahead by)."""
    element = model.actuators
    if element is not None and element.has_dynamics:
        model = with_activation(model, element.activation, 0.0, h)
    keep = tuple(f for f in model.forces if f is model.contacts or f is model.actuators)
    return dataclasses.replace(model, forces=keep)


def first_row(x):
    """``x[0]``; of a concrete array read on the host, so that no indexing program is
    compiled per number of rows."""
    return x[0] if is_traced(x) else jax.device_put(np.asarray(x)[0])


def _start_correction_or(given, model: Model, r, A, rdot, omega):
    """``given``, else the :func:`start_correction` of the first of the states (r, A, rdot,
    omega); None for a model without bodies."""
    if given is not None or not model.nb:
        return given
    return start_correction(model, *first_rows(r, A, rdot, omega))


def first_rows(*xs):
    """The first row of each of ``xs``, as :func:`first_row` reads it; concrete arrays in
    one transfer."""
    if is_traced(xs):
        return tuple(x[0] for x in xs)
    return tuple(to_device([np.asarray(x)[0] for x in xs]))


def _limit_element(model):
    """The model's joint limits (one JointLimits element, jaxmbd.model) for sol.limits."""
    return next((f for f in model.forces if isinstance(f, JointLimits)), None)


def resolve_throw(throw: bool, check: bool | None, where: str) -> bool:
    """``throw`` (the optimistix-style name) or the deprecated ``check``."""
    if check is None:
        return bool(throw)
    warnings.warn(
        f"{where}(check=...) is deprecated; use throw=... (same meaning)",
        DeprecationWarning,
        stacklevel=3,
    )
    return bool(check)


def finish(model: Model, sol, *, what: str, throw: bool, traced: bool, start=None,
           stacklevel: int = 3):  # fmt: skip
    """Status handling shared by the analyses: with ``throw``, a runtime error under a trace
    and a detailed SolverError outside one; then a report of the consistent-start
    correction (from ``start``, the concrete t = 0 state (r, A, rdot, omega, ...), when
    given). Without ``throw`` the Solution carries the outcome (``status``, ``result``).
    Under a trace, invalid parameter values (checked on the host for concrete models at
    the analysis's entry) set the status ``invalid_parameters`` at every step.
    ``stacklevel``: the report's warning names this frame, counted from ``finish`` as
    :func:`warnings.warn` counts (3: the code that called the analysis that called it)."""
    if traced:
        sol = with_parameter_status(model, sol)
    if not throw:
        return sol
    if traced:
        return error_if_failed(sol, what)
    raise_on_failure(model, sol, what=what)
    report_initial_correction(model, sol, what, start=start, stacklevel=1 + stacklevel)
    return sol
