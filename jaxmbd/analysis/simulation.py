"""``simulate``: any valid formulation x integrator pair, one ``lax.scan`` under ``jit``.

The runner makes the initial state consistent (positions, velocities, accelerations and
multipliers), hands it to the integrator in the formulation's coordinates, and scans the
integrator's ``step`` over t = k h. Every implicit step's root carries implicit-function
gradients, so ``jax.grad`` of a trajectory loss never differentiates through Newton
iterations.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._checks import finish, is_traced, resolve_throw, solution_from_outputs
from ..actuators import policy_controls, with_controls
from ..compiled.counted_scan import strong_types
from ..compiled.host_arrays import device_array
from ..compiled.jit import RUN_ONCE, at_top_level, jit
from ..compiled.xla_flags import (
    forward_loop_hoisted_when_differentiated,
    unhoisted_when_differentiated,
)
from ..constraints.redundancy import with_full_multipliers
from ..formulations import AbstractFormulation
from ..integrators import AbstractIntegrator, StartState
from ..joint_space import run_planned_joint_space
from ..model import Model
from ..newton import SAVED_FOR_ADJOINT
from ..solution import Solution
from ._stepping import block_steps, run_in_blocks, strided_scan, summarised_scan
from .initial_state import START_MAX_ITER, START_TOL, _consistent_initial_state, to_formulation
from .plan import Plan, default_formulation, plan_simulation


def _outputs(form, q, v, a, lam_all, nc):
    return form.to_body_state(q, v, a) + (lam_all[:nc],)


def _own_coordinates(form, q, v):
    """The Solution's ``q`` and ``v``: the formulation's own coordinates, or (None, None)
    where they are the body state already stored (rA)."""
    if not form.stores_own_coordinates:
        return None, None
    return form.flat_coordinates(q), v


def _initial(model, form: AbstractFormulation, integrator: AbstractIntegrator, h, start=None):
    """The integrator's first carry and the t = 0 outputs; ``start``: the consistent start
    when already computed (:func:`_consistent_start`), else it is traced here."""
    if start is None:
        start = _consistent_initial_state(
            model,
            **_START_OPTIONS,
            redundant=integrator.redundant_constraints(model),
            linear_solver=start_solver(integrator),
        )
    state, _, info = start
    q, v, a = to_formulation(form, *state[:6])
    extra = form.num_multipliers(model) - model.nc
    lam = jnp.concatenate([state[6], jnp.zeros(extra)])
    carry = integrator.init(model, form, StartState(q, v, a, lam), h)
    out = state + (info.iterations, info.status, info.residual_norm)
    out = out + _own_coordinates(form, q, v)
    if getattr(integrator, "record_condition", False):  # no step at t = 0
        out = out + (jnp.asarray(jnp.nan),)
    if hasattr(integrator, "extra_outputs"):  # an integrator's own per-step outputs (a dict)
        out = out + (integrator.extra_outputs(carry),)
    return carry, out


def _adjoint_recomputes(step):
    """``step`` as it is, or, where a gradient's forward time loop is hoisted by XLA
    (:func:`forward_loop_hoisted_when_differentiated`), recomputed in reverse mode except
    for its Newton roots and their factored Jacobians (``jax.checkpoint`` with
    :data:`~jaxmbd.newton.SAVED_FOR_ADJOINT`): the forward loop then runs the step and
    stores its carry and roots, not the ~20 kB of residuals of its linearisation, and the
    adjoint step (a native loop) linearises again. Same derivatives; undifferentiated
    programs unchanged (``prevent_cse=False`` adds no barrier)."""
    if not forward_loop_hoisted_when_differentiated():
        return step
    return jax.checkpoint(step, prevent_cse=False, policy=SAVED_FOR_ADJOINT)


def _scan(
    model,
    form,
    integrator,
    carry,
    k0,
    n: int,
    h,
    checkpoint: int | None = None,
    save_every: int = 1,
    controls=None,
    policy=None,
    sensor_key=None,
    count=None,
):
    """The steps k0 + 1 .. k0 + n; ``count``: where given, the number of saved rows of the
    run, an input of the program (:func:`summarised_scan`): the program then runs the steps
    asked of it, of at most n, forward only (``checkpoint`` has nothing to recompute)."""

    def step(carry, k):
        # a gradient's forward time loop stays out of XLA's small-loop hoisting (compile
        # time), its transposed one is hoisted (run time)
        carry = unhoisted_when_differentiated(carry, transposed=True)
        # zero-order hold: step k (from t = (k - 1) h) runs with the controls of row k - 1
        # (``controls`` holds the rows from step k0 on), or the policy's reply to the state
        # at (k - 1) h
        stepped = model if controls is None else with_controls(model, controls[k - 1 - k0])
        if policy is not None:
            q, v = integrator.positions_velocities(carry)
            r, A, rdot, omega = form.to_body_state(q, v, jnp.zeros_like(v))[:4]
            u = policy_controls(model, policy, (k - 1) * h, (r, A, rdot, omega),
                                key=sensor_key, step=k - 1)  # fmt: skip
            stepped = with_controls(model, u)
        carry, res = _adjoint_recomputes(lambda carry: integrator.step(stepped, form, carry, k, h))(
            carry
        )
        out = _outputs(form, res.q, res.v, res.a, res.lam, model.nc)
        info = (res.info.iterations, res.info.status, res.info.residual_norm)
        out = out + info + _own_coordinates(form, res.q, res.v)
        out = out + (() if res.condition is None else (res.condition,))
        if hasattr(integrator, "extra_outputs"):
            out = out + (integrator.extra_outputs(carry),)
        return carry, out

    # tangents present from the start: JAX's scan linearisation then needs one pass
    carry = integrator.with_state_tangents(carry, (controls, policy, model.mass, model.inertia))
    if count is not None:
        return summarised_scan(step, carry, k0 + 1, count, n // save_every, save_every)
    steps = k0 + jnp.arange(1, n + 1)
    if not checkpoint or n <= checkpoint:
        return strided_scan(step, carry, steps, save_every)
    # Checkpointed scan for reverse mode over long horizons: only segment boundaries are
    # stored; each segment of ``checkpoint`` steps is recomputed in the backward pass. The
    # steps past the last full segment run in a plain scan: no step beyond t_end is taken.
    segments, rest = divmod(n, checkpoint)

    @jax.checkpoint
    def segment(carry, ks):
        return jax.lax.scan(step, carry, ks)

    carry, outs = jax.lax.scan(segment, carry, steps[: segments * checkpoint].reshape(segments, -1))
    outs = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), outs)
    if rest:
        carry, tail = jax.lax.scan(step, carry, steps[segments * checkpoint :])
        outs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), outs, tail)
    return carry, outs


_block = jit(_scan)


@jit
def _start(model, form, integrator, h, start):
    """The integrator's first carry and the outputs of t = 0, from the consistent start:
    the program before the blocks of a run (:func:`_run_blocks`); the carry with the types
    that the blocks return (one block program for all)."""
    carry, first = _initial(model, form, integrator, h, start)
    return strong_types(carry), first


#: Most steps of one compiled block of a forward run outside any transformation (see
#: :func:`_run_blocks`). A block's number of steps is an input of its program
#: (:func:`~jaxmbd.compiled.counted_scan.counted_scan`), so one program serves every horizon
#: and a run takes the steps asked, no more; its outputs are buffers of this many rows,
#: which bounds the choice from above (memory, and the zeros each call writes).
BLOCK_STEPS = 1024


def _control_block(controls, k0: int, size: int):
    """Rows k0 .. k0 + size of the (N, nu) host ``controls``, the last row repeated past N
    (rows of steps past t_end: a block's shapes are its program's), on the device."""
    rows = controls[k0 : k0 + size]
    if rows.shape[0] < size:
        rows = np.concatenate([rows, np.repeat(controls[-1:], size - rows.shape[0], axis=0)])
    return jax.device_put(rows)


def _run_blocks(
    model, form, stepper, n, h_arr, size, save_every, start, controls, policy, key, progress
):
    """The forward run of concrete inputs: the start (:func:`_start`), then blocks of at
    most ``size`` steps, each one call of one program whose number of steps is an input
    (:func:`~jaxmbd.compiled.counted_scan.counted_scan`), the integrator's carry passed from
    block to block. Every horizon runs the same two programs (a new t_end compiles nothing,
    and the step is compiled once whatever the run's length); a run costs the steps asked.
    Forward only, so ``checkpoint`` (a reverse-mode option) does not enter these programs."""
    host = None if controls is None else np.asarray(controls)

    def rows(k0):
        return None if host is None else _control_block(host, k0, size)

    def block(carry, k0, steps):
        return _block(
            model, form, stepper, carry, k0, size, h_arr, None, save_every, rows(int(k0)),
            policy, key, np.asarray(steps // save_every),
        )  # fmt: skip

    def head(steps):
        carry, first = _start(model, form, stepper, h_arr, start)
        carry, rest = block(carry, np.asarray(0), steps)
        return carry, jax.tree_util.tree_map(
            lambda a, b: np.concatenate([np.asarray(a)[None], np.asarray(b)]), first, rest
        )

    return run_in_blocks(head, block, n, size, progress, save_every=save_every)


def start_solver(integrator) -> str:
    """The consistent start's linear solver: the integrator's choice ("auto" by default)."""
    return getattr(integrator, "linear_solver", "auto")


#: the start of every run: consistent_initial_state's defaults, at t = 0
_START_OPTIONS = {"t": 0.0, "tol": START_TOL, "max_iter": START_MAX_ITER}


@jit(xla_options=RUN_ONCE)
def _consistent_start(model, redundant: bool, linear_solver: str = "auto"):
    """The consistent start as its own program: it depends on the model only, so runs of
    one model with other formulations or integrators reuse it instead of compiling it
    into each of their programs (about a third of a small model's compile time)."""
    return _consistent_initial_state(
        model, **_START_OPTIONS, redundant=redundant, linear_solver=linear_solver
    )


@jit
def _run(
    model,
    form,
    integrator,
    n: int,
    h,
    checkpoint: int | None = None,
    save_every: int = 1,
    start=None,
    controls=None,
    policy=None,
    sensor_key=None,
    count=None,
):
    """The outputs of t = 0 and of n steps, or of the first ``count`` saved rows of them
    (an input of the program, :func:`_scan`) where given."""
    carry, first = _initial(model, form, integrator, h, start)
    _, rest = _scan(
        model, form, integrator, carry, 0, n, h, checkpoint, save_every, controls, policy,
        sensor_key, count,
    )  # fmt: skip
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _chart_flags(form: AbstractFormulation, outs):
    """re: the steps at the chart singularity (stepped over by the verified least-squares
    solve of :func:`~jaxmbd.integrators.implicit_step`); None for charts without one."""
    q = outs[10]
    if q is None or not form.has_chart_singularity:
        return None  # no chart singularity (the default): no slicing of q, no dispatch
    if form.near_chart_singularity((q[0, :, :3], q[0, :, 3:])) is None:
        return None
    return jax.vmap(lambda row: form.near_chart_singularity((row[:, :3], row[:, 3:])))(q)


def simulate(
    model: Model,
    *,
    formulation=None,
    integrator=None,
    t_end: float,
    h: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk_size: int | None = None,
    checkpoint: int | None = None,
    save_every: int = 1,
    throw: bool = True,
    check: bool | None = None,
    redundant: str = "drop",
    contact: str | None = None,
    limits: str | None = None,
    equality: str | None = None,
    controls=None,
    policy=None,
    sensor_key=None,
    **options,
) -> Solution:
    """Dynamics of ``model`` on t = k h, k = 0..round(t_end / h). ``h`` None (the default):
    the file's ``timestep`` of a model read from MJCF or URDF; a model built in code needs it.

    A model read from MJCF or URDF runs as MuJoCo runs the file where the options leave it
    to the model (``contact``, ``limits``, ``equality`` None; the run in joint
    coordinates): MuJoCo's constraint model ("soft", below) with the file's integrator
    (:func:`~jaxmbd.analysis.plan.run_defaults`). A part named otherwise leaves the others
    soft, solved together; an absolute formulation takes jaxmbd's treatments (None).

    ``formulation``: a name ("joint", "rA", "rp", "re", "se3", "director", "rotmat") or a
    formulation object; None (the default): :func:`default_formulation`, "joint" (the
    kinematic tree in MuJoCo's joint coordinates, :mod:`jaxmbd.joint_space`; loops and
    drivers as exact constraint rows) wherever it runs everything the model holds, "rA"
    otherwise; no option changes it. Where the default is "joint", an option that only the
    absolute formulations take (``save_every``, ``chunk_size``, ``checkpoint``,
    ``redundant="error"``, ``sensor_key`` with a ``policy``, an integrator or integrator
    option that joint coordinates lack: ``linear_solver``, ``variant``, ...) raises
    ``ValueError`` naming it and the formulation to pass (``formulation="rA"``); so does
    "joint" named. A formulation object: any :class:`~jaxmbd.formulations.AbstractFormulation`,
    also one defined outside the package. ``integrator``: a name ("gen_alpha",
    "backward_euler", "rkmk", "rk", "energy_momentum"; "joint" has "rk", "rkmk", "euler",
    "implicit" and "implicitfast", see :mod:`jaxmbd.joint_space.steppers`; default: the
    formulation's ``default_integrator`` ("rkmk" for "joint", MuJoCo's RK4 from 4.0); for
    "joint" with contact pairs "gen_alpha"; for a model read from a file the file's
    integrator, or "implicit" with compliant contact pairs,
    :mod:`jaxmbd.joint_space.contact_step`) or an integrator object. An integrator steps
    every formulation that has the capabilities it requires (``requires``); any other pair raises
    ``ValueError`` listing the valid pairs.

    ``options`` go to the integrator (:func:`~jaxmbd.integrators.get_integrator`; an option
    it does not have raises ``ValueError`` listing its options; ``None`` means the default).
    Options of the implicit integrators: ``newton`` = "reuse" (default for rA and rp: the
    factored matrix is kept across steps and refreshed when it stops contracting; a step is
    accepted only once verified), "full" (matrix at every iteration; rA: hand-coded, Tables
    3-6; default for re) or "modified" (matrix frozen per step); ``tol``: relative Newton
    tolerance (step test of eq. 46 and a residual test, both in scaled norms; default 1e-10,
    see :class:`~jaxmbd.newton.Scale`); ``max_iter`` (25).
    ``linear_solver``: "auto" (default: "structured" from
    :data:`~jaxmbd.integrators.base.STRUCTURED_FROM` Newton unknowns on, "small" for rA on
    the CPU up to :data:`~jaxmbd.linear.small.SMALL_MAX`, else "dense"),
    "dense" (equilibrated dense LU), "small" (the same LU in elementwise kernels, so
    that XLA compiles the whole time loop as one native loop on the CPU,
    :mod:`jaxmbd.linear.small`), "structured" (block elimination on the body-joint
    graph, O(N) per factorisation on trees and on loops that share few bodies; rA's matrix
    is then assembled block by block, see :mod:`jaxmbd.linear.structured`) or
    "small_structured" (that block elimination in elementwise kernels, hoistable like
    "small": :mod:`jaxmbd.linear.small_blocks`).
    gen_alpha: ``rho_inf`` (0.9) and ``variant`` ("stabilised", the GGL index-2 form, default
    for rA and rp; or "index3", default for re, see
    :data:`~jaxmbd.integrators.DEFAULT_OPTIONS`).

    The initial state is made consistent first (see :func:`consistent_initial_state`). A
    non-converged step raises :class:`~jaxmbd.SolverError` naming its time, residual and
    constraints (``throw=False`` returns the outcome instead: ``sol.status`` per step and
    ``sol.result``, a :class:`~jaxmbd.RESULTS` item; inside ``jit``/``grad``/``vmap``
    ``throw=True`` becomes an equinox runtime error with the RESULTS message). ``check`` is
    the deprecated name of ``throw``.

    ``redundant``: what to do with constraint rows that depend on the others at the initial
    pose (an overconstrained closed loop, e.g. a planar four-bar of four revolute joints;
    found when the model is built, see :mod:`jaxmbd.constraints.redundancy`). "drop" (default): run
    without them, with one :class:`~jaxmbd.RedundancyWarning` naming them and the loop they
    close; their multipliers are zero. "error": raise :class:`~jaxmbd.ModelError` naming
    them.

    ``contact``: how the model's contact pairs (``model.contacts``, see :mod:`jaxmbd.contact`)
    act. "soft": MuJoCo's constraint model (the default for a file). "compliant" (the default
    for a model built in code): Hunt–Crossley contact with regularised Coulomb friction,
    a force element whose stiffness enters the implicit integrators' Newton matrix;
    ``sol.contact`` reports every slot per step. "none": every pair is ignored (the same
    model without contact). "hard": exact contact, the pairs as unilateral constraints with
    Newton's restitution law and Coulomb friction on the exact cone, stepped by the
    projected Moreau–Jean scheme (``integrator="moreau_jean"``, the default then and the
    only one; :mod:`jaxmbd.integrators.moreau_jean`; ``sol.contact`` reports each step's
    mean contact forces, its impulses / h). With contact
    pairs the implicit integrators default to
    ``newton=LineSearchNewton()`` (:mod:`jaxmbd.newton.line_search`: exact Newton damped by
    backtracking, which converges on the saturating friction and damping at large steps);
    ``max_iter`` then sets its iterations, and ``newton=`` chooses another method; gen_alpha
    then defaults to ``rho_inf=0`` (a contact is a stiff mode that 0.9 lets ring: a plastic
    landing rebounded at 0.87 of its speed at h = 1e-3). Compliant contact takes a step that
    meets a fast contact (in contact or touching within two steps, faster than
    ``impact_speed``, 0.05 m/s, and than twice its resting speed) as ``impact_substeps``
    (10) sub-steps of h / 10 of the same integrator, so that the impact is resolved and the
    rebound honours the restitution (:mod:`jaxmbd.integrators.impact_substeps`;
    ``impact_substeps=1``: off). The "joint" formulation does the same
    (:mod:`jaxmbd.joint_space.contact_step`), but for models read from a file, whose default
    is MuJoCo's one linearised solve a step without sub-steps.

    ``limits``: how the joint limits act (:mod:`jaxmbd.analysis.limits_option`). "soft":
    MuJoCo's limit and friction-loss rows (the default for a file). None (default of a model
    built in code): as the integrator treats them (compliant spring-dampers; hard stops with
    "moreau_jean").
    "compliant": the spring-dampers of :mod:`jaxmbd.forces.joint_limits`. "hard": unilateral stops,
    stepped by ``integrator="moreau_jean"`` (the default then). "none": limits removed.

    ``equality``: how the model's equality constraints (MJCF ``<equality>``,
    :mod:`jaxmbd.joint_space.equalities`) act. None: "soft" for a file in joint coordinates,
    else "exact". "exact": exact constraint rows.
    "soft":
    MuJoCo's soft constraints with the file's ``solref``/``solimp`` (``formulation="joint"``
    only). "none": switched off (MuJoCo's ``<flag equality="disable"/>``).

    Differentiable: ``jax.grad``/``jacfwd``/``jacrev`` of any function of the Solution with
    respect to every array of the model use implicit-function gradients
    of each step's root. ``checkpoint=k`` recomputes segments of k steps in reverse mode
    (``jax.checkpoint``), so stored states grow like n / k + k instead of n.

    ``controls``: the inputs of the model's actuators (:mod:`jaxmbd.actuators`), held
    constant over each step (zero-order hold): an array (N, nu) with one row per step (N =
    round(t_end / h); row k acts from t = k h to (k + 1) h), a constant (nu,), or a function
    u(t) -> (nu,) evaluated at each step's start. None: zero. Differentiable (an array leaf
    of every step). ``policy``: closed loop instead, u = policy(t, observation) at each
    step's start and held over it (:func:`jaxmbd.actuators.observation`: the joint
    coordinates of ``model.joint_names``, then their rates), inside the compiled step; any
    callable pytree (an ``equinox.nn.MLP`` in an ``eqx.Module``): ``jax.grad`` reaches its
    parameters. A model with sensors (:mod:`jaxmbd.sensors`) is observed through them
    instead: the observation is its sensor vector, the sensors in model order.

    ``sensor_key``: a ``jax.random`` key for the sensors' noise (their ``noise`` standard
    deviations), in ``sol.sensors`` and in the policy's observation; None: noise-free.

    Outside ``jit``/``grad``/``vmap`` the run is a loop over blocks of at most
    :data:`BLOCK_STEPS` steps (``chunk_size`` if given), each a program whose number of
    steps is an input: a run costs the steps asked, and a new horizon compiles nothing.
    Under a transformation it is one program of the run's steps.
    ``progress(done, total)`` is called after each block (not under a transformation).

    ``save_every=k`` keeps every k-th step only (t = j k h; k must divide the number of
    steps): memory stays flat over long runs. Each saved row's ``status`` is the first
    failure since the previous saved row, ``iterations`` and ``residual`` the largest, so
    no failed step goes unreported.

    The call is :func:`~jaxmbd.analysis.plan.plan_simulation` (every decision, before
    anything compiles) then :func:`run_plan`; ``print(sol.plan)`` says what was decided.
    """
    throw = resolve_throw(throw, check, "simulate")
    if chunk_size is not None and progress is None:
        raise ValueError("simulate: chunk_size (steps between progress calls) needs progress=")
    plan = plan_simulation(
        model, formulation=formulation, integrator=integrator, t_end=t_end, h=h,
        chunk_size=chunk_size, checkpoint=checkpoint, save_every=save_every,
        redundant=redundant, contact=contact, limits=limits, equality=equality,
        controls=controls, policy=policy, sensor_key=sensor_key, stacklevel=3, **options,
    )  # fmt: skip
    return run_plan(plan, throw=throw, progress=progress, stacklevel=3)


def run_plan(
    plan: Plan,
    *,
    throw: bool = True,
    progress: Callable[[int, int], None] | None = None,
    stacklevel: int = 2,
) -> Solution:
    """The run that ``plan`` (:func:`~jaxmbd.analysis.plan.plan_simulation`) decided, as
    :func:`simulate` runs it: ``throw`` and ``progress`` as there; ``sol.plan`` is the plan's
    decisions. ``stacklevel``: the frame that the consistent start's report names, counted
    from here as :func:`warnings.warn` counts (2: the caller)."""
    model, form, stepper, n = plan.model, plan.form, plan.stepper, plan.steps
    described = plan.described()
    if form.runs_in_joint_space:
        sol = run_planned_joint_space(
            model, form, stepper, tree=plan.tree, rows=plan.kept_rows, n=n, h=plan.h,
            controls=plan.controls, policy=plan.policy, throw=throw,
            sensor_key=plan.sensor_key, plan=described, stacklevel=1 + stacklevel,
        )  # fmt: skip
        if progress is not None:  # one program for the whole run: done when it returns
            progress(n, n)
        return sol
    save_every, checkpoint, policy = plan.save_every, plan.checkpoint, plan.policy
    h_arr = device_array(plan.h, jnp.float64)
    traced = is_traced(model)
    # under a trace (grad, vmap, jit) one program; else the start is its own, shared one
    start = (
        None
        if traced
        else _consistent_start(model, stepper.redundant_constraints(model), start_solver(stepper))
    )
    # the key enters the compiled steps only for a policy's observation (else a run with a
    # key shares the program of one without: the noise is added when sol.sensors is read)
    inputs = (plan.controls, policy, None if policy is None else plan.sensor_key)
    if traced or not at_top_level() or is_traced(inputs):
        # a transformation's inputs: one program (what gradients differentiate)
        outs = _run(model, form, stepper, n, h_arr, checkpoint, save_every, start, *inputs)
    else:  # blocks of one program for every t_end
        size = BLOCK_STEPS if plan.chunk_size is None else plan.chunk_size
        outs = _run_blocks(
            model, form, stepper, n, h_arr, block_steps(size, save_every), save_every, start,
            *inputs, progress,
        )  # fmt: skip
    reported_model = plan.reported_model
    sol = solution_from_outputs(
        reported_model,
        form,
        h_arr,
        with_full_multipliers(outs, plan.kept_rows, reported_model, h_arr, save_every),
        integrator=plan.integrator,
        linear_solver=plan.linear_solver,
        chart_singular=_chart_flags(form, outs),
        save_every=save_every,
        sensor_key=plan.sensor_key,
        controls="policy" if policy is not None else plan.controls,
        plan=described,
    )
    return finish(
        model, sol, what="dynamics", throw=throw, traced=traced,
        start=None if start is None else start[0], stacklevel=1 + stacklevel,
    )  # fmt: skip


__all__ = ["default_formulation", "plan_simulation", "run_plan", "simulate"]
