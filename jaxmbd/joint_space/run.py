"""``simulate(model, formulation="joint")``: the model's kinematic tree stepped in joint
coordinates, one ``lax.scan`` under ``jit``; the Solution holds the bodies' states as every
formulation's does, and ``qpos``/``qvel`` in the tree's (MuJoCo's) layout."""

from __future__ import annotations

import dataclasses
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._checks import (
    finish,
    has_tracers,
    is_traced,
    solution_from_outputs,
    start_correction,
)
from .._results import RESULTS
from ..actuators import policy_controls, with_controls
from ..compiled.batch_lanes import batch_lanes
from ..compiled.batch_last import batch_last
from ..compiled.batching import cpu_or_accelerator
from ..compiled.counted_scan import counted_scan
from ..compiled.host_arrays import device_array, to_device
from ..compiled.jit import RUN_ONCE, at_top_level, jit, run_now
from ..compiled.xla_flags import joint_loop_guard, joint_loops_hoisted_when_differentiated
from ..constraints.equations import rA_terms
from ..constraints.redundancy import refuse_driven
from ..contact import with_contact
from ..model import Model
from ..newton._implicit import ROOT, ROOT_FACTORS
from ..newton._min_norm import min_norm_solve
from ..sensors import sensor_kind
from ..soft_constraints.treatments import large_batches, soft_constraints_of
from ..tree import KinematicTree, assemble, body_velocities
from ..tree._elementwise import mtv
from ..tree.articulated import uses_articulated
from ..tree.mass_factor import mass_solver_name, uses_ltdl
from .constraint_rows import (
    ClosingRows,
    TreeConstraints,
    constraint_jacobian,
    independent_rows_of,
    project,
)
from .dynamics import Accelerations, accelerations, body_accelerations
from .equalities import active_equalities
from .from_model import tree_of_model
from .reactions import tree_joint_wrenches
from .solved_contacts import kept_row_forces, soft_row_forces
from .steppers import AbstractJointStepper, RungeKutta4, SemiImplicitEuler

#: The linear solver that ``sol.linear_solver`` names for a run in joint coordinates
#: whose tree's mass matrix is factored by Cholesky (:func:`joint_linear_solver`).
JOINT_LINEAR_SOLVER = "cholesky"


def joint_linear_solver(model: Model, tree, rows=None) -> str:
    """``sol.linear_solver`` of a joint-space run keeping the constraint ``rows``
    (:func:`planned_rows`): ``"articulated"`` where its forward dynamics run the
    articulated-body algorithm (a tree without constraint rows or MuJoCo's soft rows,
    :func:`jaxmbd.tree.articulated.uses_articulated`), else the factor of M
    (:func:`jaxmbd.tree.mass_factor.mass_solver_name`: ``"ltdl"`` or ``"cholesky"``)."""
    if tree is None:
        return JOINT_LINEAR_SOLVER
    if uses_articulated(tree) and (rows or soft_constraints_of(model) is not None):
        return "ltdl" if uses_ltdl(tree) else JOINT_LINEAR_SOLVER
    return mass_solver_name(tree)


NONFINITE = int(RESULTS.nonfinite._value)
MAX_ITERATIONS = int(RESULTS.max_iterations._value)

#: The closure ||Phi|| of the exact constraint rows above which the start's projection
#: (Gauss-Newton, :func:`~jaxmbd.joint_space.constraint_rows.project`) did not assemble
#: the loops: a consistent or nearby start reaches round-off in its 8 iterations.
START_CLOSURE_TOL = 1e-8

#: Members of a batch (``vmap``) stepped together, batch-last; a larger batch runs in such
#: chunks one after the other, so that a step's arrays stay in the core's caches.
#: Chunks of 16 to 128 members ran alike (scratch runs, batch of 256, load ~10).
BATCH_CHUNK = 64

#: The steps whose batches run batch-last (:mod:`jaxmbd.compiled.batch_last`); none by default:
#: measured on the 2-core CPU, once sine and cosine vectorise (:mod:`jaxmbd.compiled.trig`),
#: ``jax.vmap``'s own batching of the RK4 run was as fast or faster
#: (``benchmarks/results/batch/batch_joint.md``). ``(RungeKutta4, SemiImplicitEuler)``
#: opts the explicit steps in. Not the steps with ``lax.cond`` (exact contact, the implicit
#: steps' Newton loops): gradients of their batched losses would need the transpose of a
#: ``cond`` batched inside a ``custom_jvp`` rule, which JAX lacks (jax 0.10.2).
BATCH_LAST_STEPPERS: tuple = ()

#: The steps whose batches run as per-member scalar code on tiles of members
#: (:mod:`jaxmbd.compiled.batch_lanes`), taking precedence over :data:`BATCH_LAST_STEPPERS`: the
#: explicit steps. Derivatives are the plain program's, for single models, ``vmap`` of
#: their gradients and gradients of batched losses alike. Measured on the 2-core CPU, batch
#: of 256 against ``jax.vmap``'s own batching, CPU time in one process
#: (``benchmarks/results/batch/batch_joint.md``): cart-pole 9x, double pendulum and
#: acrobot 4x, arm3 2.5x the model-steps per second; a large tree (a humanoid) stays with
#: ``jax.vmap`` (:data:`jaxmbd.compiled.batch_lanes.MAX_ENTRIES_ESTIMATE`). ``()`` switches the
#: tiles off (programs traced afterwards: ``jax.clear_caches()``).
BATCH_LANES_STEPPERS: tuple = (RungeKutta4, SemiImplicitEuler)
#: Tiles of members (:data:`jaxmbd.compiled.batch_lanes.LANES` each) stepped together; a larger
#: batch runs in such chunks one after the other. Chunks of 16, 64 and 256 tiles ran alike
#: (cart-pole, 1024 members, CPU time 20.2x, 19.2x and 21.0x its single model).
BATCH_LANES_CHUNK: int | None = 64


def _closing_row_indices(model: Model, tree: KinematicTree, rows) -> tuple[int, ...]:
    """``rows``, or by default the model's GCON rows of the joints that close loops
    (``tree.closing_joints``)."""
    if rows is None:
        closing = set(tree.closing_joints)
        rows = [k for k, joint in enumerate(model.constraint_joints) if joint in closing]
    return tuple(rows)


def _closing_rows(model: Model, tree: KinematicTree, rows) -> ClosingRows | None:
    """The model's GCON rows ``rows`` (:func:`_closing_row_indices`) as tree constraint
    rows."""
    rows = _closing_row_indices(model, tree, rows)
    if not rows:
        return None
    drop = [k for k in range(model.nc) if k not in set(rows)]
    return ClosingRows(model.without_rows(drop) if drop else model, rows)


def _tree_and_loop_rows(model: Model, built=None):
    """(the model's kinematic tree, the GCON rows it leaves as rows or None for the
    default): read from its file, or derived from its joints (``built``: that
    :class:`~jaxmbd.joint_space.from_model.ModelTree`, when already at hand)."""
    if model.tree is not None:
        return model.tree, None
    built = tree_of_model(model) if built is None else built
    return built.tree, built.loop_rows


def model_tree(
    model: Model, keep=None, *, built=None
) -> tuple[KinematicTree, TreeConstraints | None]:
    """The model's kinematic tree (:func:`_tree_and_loop_rows`) and its constraint rows:
    the loop-closing GCON rows, then the active equality constraints
    (:mod:`jaxmbd.joint_space.equalities`). ``keep``: the rows to keep (indices into their
    concatenation, see :func:`independent_constraint_rows`; None: all)."""
    tree, closing = _tree_and_loop_rows(model, built)
    parts = [_closing_rows(model, tree, closing)]
    parts += list(active_equalities(model))
    parts = tuple(part for part in parts if part is not None and part.size)
    if not parts:
        return tree, None
    if keep is None:
        return tree, TreeConstraints(parts)
    return tree, TreeConstraints(parts, tuple(keep), independent=True)


@jit(xla_options=RUN_ONCE)  # of the disk cache: a warm process neither traces nor compiles it
def _rows_and_start_jacobian(model: Model, built):
    """:func:`model_tree` of the tree ``built`` (a ModelTree or None) and the constraint
    rows' Jacobian G at the initial qpos, as one small program: op by op (eagerly) the
    kinematics and the rows take ~1 s a call, more than a thousand steps of a loop's run."""
    tree, cons = model_tree(model, built=built)
    if cons is None:
        return tree, None, None
    return tree, cons, constraint_jacobian(cons, tree, tree.qpos_init, 0.0)[1]


def concrete_tree(model: Model):
    """(tree, constraint rows, their Jacobian at the initial qpos or None) of a model with
    concrete values: the tree of :func:`~jaxmbd.joint_space.from_model.tree_of_model`
    (the one the plan read), and, where the model has constraint rows, the rows and G of
    :func:`_rows_and_start_jacobian`; where traced, :func:`model_tree` and None. A plain
    call's run asks it of one model object up to three times (its plan, its rows'
    multipliers): the last model's answer is kept (by identity; a Model is immutable),
    since each call flattens every leaf of the model (a humanoid's thousands: tens of
    ms)."""
    if has_tracers(model):  # under grad the primal of a JVP is concrete
        model = jax.lax.stop_gradient(model)
        if has_tracers(model):
            return (*model_tree(model), None)
    kept_model, kept = _LAST_CONCRETE_TREE
    if kept_model is not None and kept_model() is model:
        return kept
    with run_now():  # concrete also under a trace that closes over them
        built = None if model.tree is not None else tree_of_model(model)
        tree, closing = _tree_and_loop_rows(model, built)
        if _closing_row_indices(model, tree, closing) or active_equalities(model):
            found = _rows_and_start_jacobian(model, built)
        else:
            found = (tree, None, None)
    _LAST_CONCRETE_TREE[:] = [weakref.ref(model), found]
    return found


#: (a weak reference to the model, its :func:`concrete_tree`) of the last model asked.
_LAST_CONCRETE_TREE: list = [None, None]


def independent_constraint_rows(model: Model):
    """The independent constraint rows at the model's initial state, or None where the
    model's values are traced (then every row is kept, their multipliers by least
    squares). Under ``grad`` alone the values are concrete (the primal of a JVP), so the
    rows are found."""
    _, cons, G = concrete_tree(model)
    if G is None:
        return None
    return independent_rows_of(cons, G)


def _refuse_dropped_drivers(model: Model, cons: TreeConstraints | None, rows) -> None:
    """Refuse a driven row that depends on the other rows at the start, as the absolute
    formulations do (:func:`jaxmbd.constraints.redundancy.refuse_driven`): dropped, its prescribed
    motion would go unenforced, silently where it contradicts the others."""
    if rows is None or cons is None or not model.drivers:
        return
    kept, offset, dropped = set(rows), 0, []
    for part in cons.parts:
        dropped += [row for k, row in enumerate(part.gcon_rows) if offset + k not in kept]
        offset += part.size
    refuse_driven(model, dropped)


#: The loops' name of :func:`independent_constraint_rows`.
independent_loop_rows = independent_constraint_rows


def _equality_joints(model: Model, tree: KinematicTree) -> ClosingRows | None:
    """The GCON rows that the absolute formulations build for the active equalities
    (connect: a spherical joint, weld: a fixed joint, named as the equality), or None."""
    names = {e.name for e in active_equalities(model)}
    rows = [k for k, joint in enumerate(model.constraint_joints) if joint in names]
    return _closing_rows(model, tree, rows) if rows else None


def _equality_joint_multipliers(tree, loops: TreeConstraints, joints: ClosingRows, qpos, lam):
    """The multipliers of the equalities' GCON rows ``joints`` that exert the equality
    rows' generalised force: G_joints^T lam_joints = G_eq^T lam_eq (least squares; the
    minimum-norm split among dependent rows). Not differentiated (a derived report)."""
    m = loops.size
    keep = (*loops.rows, *range(loops._all, loops._all + joints.size))
    both = TreeConstraints((*loops.parts, joints), keep)
    _, G = constraint_jacobian(both, tree, qpos, 0.0)
    equality = jnp.asarray(loops.model_rows < 0)
    force = mtv(G[:m], jnp.where(equality, lam, 0.0))
    return jax.lax.stop_gradient(jnp.linalg.lstsq(G[m:].T, force)[0])


def _outputs(model, tree, loops, qpos, qvel, acc: Accelerations, joints=None):
    p = acc.poses
    rdot, omega = body_velocities(tree, p, qvel)
    rddot, omegadot = body_accelerations(tree, p, qvel, acc.qacc)
    lam = jnp.zeros(model.nc, qvel.dtype)
    rows = np.asarray([] if loops is None else loops.model_rows, dtype=int)
    parts = [(rows[rows >= 0], acc.lam[rows >= 0])] if (rows >= 0).any() else []
    if joints is not None and loops is not None:
        lam_joints = _equality_joint_multipliers(tree, loops, joints, qpos, acc.lam)
        parts.append((np.asarray(joints.model_rows), lam_joints))
    if parts:
        covered = np.concatenate([r for r, _ in parts])
        others = np.setdiff1d(np.arange(model.nc), covered)
        zeros = jnp.zeros(others.size, qvel.dtype)
        lam = assemble(model.nc, [(others, zeros), *parts])
    finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
    finite = finite & jnp.all(jnp.isfinite(acc.qacc))
    status = jnp.where(finite, 0, NONFINITE).astype(jnp.int32)
    if acc.status is not None:  # a step's own solver outcome (exact contact)
        status = jnp.where(status == 0, acc.status, status).astype(jnp.int32)
    iterations = jnp.zeros((), jnp.int32)
    outs = (p.c, p.R, rdot, omega, rddot, omegadot, lam, iterations, status,
            acc.loop_residual, qpos, qvel)  # fmt: skip
    if acc.unilateral is not None:
        return (*outs, {"unilateral_forces": acc.unilateral})
    return outs


def _with_act(outs, act):
    """The outputs ``outs`` of :func:`_outputs` with the activations ``act`` (na,) among
    their trailing dict (``sol.act``)."""
    if isinstance(outs[-1], dict):
        return (*outs[:-1], {**outs[-1], "act": act})
    return (*outs, {"act": act})


def _policy_controls(model, tree, policy, t, qpos, qvel, acc, k):
    """The policy's controls at a step's start. It observes (qpos, qvel) concatenated
    (MuJoCo's state, every joint of the tree), or the model's sensors where it has them."""
    if model.sensors is None:
        u = jnp.asarray(policy(t, jnp.concatenate([qpos, qvel])))
        if u.shape != (model.nu,):
            raise ValueError(
                f"simulate: policy(t, observation) returned shape {u.shape}, expected "
                f"({model.nu},) (actuators {model.actuators.actuator_names})"
            )
        return u
    p = acc.poses
    rdot, omega = body_velocities(tree, p, qvel)
    return policy_controls(model, policy, t, (p.c, p.R, rdot, omega), step=k)


SAVED_FOR_ADJOINT_NAMES = (ROOT, ROOT_FACTORS)

#: What else the adjoint step keeps from the forward run rather than recomputing:
#: ``checkpoint_name`` tags (:data:`jaxmbd.tree.kinematics.TREE_POSES`,
#: :data:`jaxmbd.tree.mass_factor.MASS_FACTOR`).
ADJOINT_SAVES: tuple = ()


def _adjoint_recomputes(advance):
    """``advance`` as it is, or, where a gradient's loops are all left to XLA's hoisting
    (:func:`jaxmbd.compiled.xla_flags.joint_loops_hoisted_when_differentiated`), recomputed in
    reverse mode but for its Newton roots and their factors (``jax.checkpoint`` with
    :data:`~jaxmbd.newton.SAVED_FOR_ADJOINT`, as
    :func:`jaxmbd.analysis.simulation._adjoint_recomputes`):
    the forward loop then stores the state, not the residuals of the step's linearisation.
    Same derivatives; undifferentiated programs unchanged."""
    if not joint_loops_hoisted_when_differentiated():
        return advance
    policy = jax.checkpoint_policies.save_only_these_names(*SAVED_FOR_ADJOINT_NAMES,
                                                           *ADJOINT_SAVES)  # fmt: skip
    return jax.checkpoint(advance, prevent_cse=False, policy=policy)


@jit  # a top-level call is a program of the disk cache (a new process does not trace it)
def run_joint_space(model: Model, stepper: AbstractJointStepper, n: int, h, controls=None,
                    policy=None, rows=None, count=None):  # fmt: skip
    """The per-step outputs (t = 0..n h) of ``n`` steps (see :func:`_outputs`); ``rows``:
    the constraint rows to keep (static; :func:`independent_constraint_rows`). ``count``:
    where given, the steps taken, an input of the program of at most ``n`` (static: the
    rows of the outputs, those past ``count`` zero; :func:`_time_loop`), forward only. Under
    ``vmap`` the explicit steps' time loop runs as per-member scalar code on tiles of
    members (:func:`jaxmbd.compiled.batch_lanes.batch_lanes`, :data:`BATCH_LANES_STEPPERS`), or
    with the batch as every array's minor axis (:func:`jaxmbd.compiled.batch_last.batch_last`,
    :data:`BATCH_LAST_STEPPERS`): a step's kernels run over the members in SIMD lanes. The
    other steps (the implicit ones, exact contact) keep ``jax.vmap`` of the whole batch:
    in chunks of :data:`~jaxmbd.compiled.batch_lanes.VMAP_CHUNK` members dm_control's hopper with
    contact cost 0.84x its single model's CPU time per member against 1.20x, but XLA runs
    the whole batch's large kernels on both cores of the 2-core CPU, so its wall time was
    0.64x the single model's against the chunks' 0.85x (200 steps, batch 256,
    ``python -m benchmarks.probes.large_batch_chunks --model hopper --steps 200``), and
    its compile 8x shorter."""
    arrays, static = eqx.partition((model, h, controls, policy, count), eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(arrays)

    def run(*leaves):
        args = eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)
        model, h, controls, policy, count = args
        return _run_joint_space(model, stepper, n, h, controls, policy, rows, count)

    if isinstance(stepper, BATCH_LANES_STEPPERS):
        return batch_lanes(run, chunk=BATCH_LANES_CHUNK, too_large=large_batches(model))(*leaves)
    if not isinstance(stepper, BATCH_LAST_STEPPERS):
        return run(*leaves)
    return batch_last(run, chunk=BATCH_CHUNK)(*leaves)


def _time_loop(step, carry, n: int, count=None):
    """``lax.scan(step, carry, arange(n))``, or where ``count`` is given its first ``count``
    iterations only, an input of the program (:func:`~jaxmbd.compiled.counted_scan.counted_scan`:
    one program for every horizon up to n, forward only), the outputs' later rows zero."""
    if count is None:
        return jax.lax.scan(step, carry, jnp.arange(n))
    return counted_scan(step, carry, 0, count, n)


def _run_joint_space(model, stepper, n, h, controls, policy, rows, count=None):
    tree, loops = model_tree(model, rows)
    qpos, qvel = tree.qpos_init, tree.qvel_init
    t0 = jnp.zeros((), qvel.dtype)
    dynamics = model.actuators is not None and model.actuators.has_dynamics
    if dynamics:
        model = stepper.with_step_activation(model, model.actuators.activation, t0, h)
    if loops is not None:
        qpos, qvel = project(loops, tree, qpos, qvel, t0, iterations=8)

    def stepped_model(k, qpos, qvel, acc):
        if controls is not None:
            return with_controls(model, controls[k])
        if policy is not None:
            return with_controls(model, _policy_controls(model, tree, policy, k * h, qpos,
                                                         qvel, acc, k))  # fmt: skip
        return model

    joints = _equality_joints(model, tree)
    paired = controls is None or stepper.pairs_step_ends
    if stepper.state_accelerations and paired and policy is None:
        outs = _run_from_starts(model, stepper, tree, loops, joints, qpos, qvel, n, h, controls,
                                count, dynamics)  # fmt: skip
        return _start_assembled(outs, loops)
    first = stepped_model(0, qpos, qvel, None) if policy is None else model
    if (controls is not None or policy is not None) and not dynamics:
        observed = first if policy is not None else None
        outs = _run_stepped_models(model, stepper, tree, loops, joints, qpos, qvel, n, h,
                                   stepped_model, observed, count)  # fmt: skip
        return _start_assembled(outs, loops)
    acc = stepper.start_accelerations(first, tree, loops, qpos, qvel, t0, h)
    out0 = _outputs(model, tree, loops, qpos, qvel, acc, joints)
    if dynamics:
        out0 = _with_act(out0, model.actuators.act())

    # activation dynamics: the activations carried from step to step, a state of the
    # step or the start of their closed form over it (stepper.integrates_activations)
    act0 = model.actuators.activation if dynamics else jnp.zeros(0, qvel.dtype)

    def advanced(m_k, act, t):
        """The step from the model ``m_k`` of its start; its end's accelerations with the
        end's activations ``act`` where the step integrates them (a state)."""
        if not (dynamics and stepper.integrates_activations):
            return lambda qpos, qvel, acc: stepper.advance(m_k, tree, loops, qpos, qvel, acc,
                                                           t, h)  # fmt: skip
        m_end = stepper.with_step_activation(m_k, act, t + h, h)

        def advance(qpos, qvel, acc):
            qpos, qvel = stepper.step(m_k, tree, loops, qpos, qvel, acc, t, h)
            return stepper.finish(m_end, tree, loops, qpos, qvel, t + h, h)

        return advance

    def step(carry, k):
        qpos, qvel, acc, act = joint_loop_guard(carry)
        t = k * h
        m_k = stepped_model(k, qpos, qvel, acc)
        if dynamics:
            m_k = stepper.with_step_activation(m_k, act, t, h)
            act = stepper.activation_after(m_k, h)
        if controls is not None or policy is not None:
            acc = stepper.start_accelerations(m_k, tree, loops, qpos, qvel, t, h)
        qpos, qvel, acc = _adjoint_recomputes(advanced(m_k, act, t))(qpos, qvel, acc)
        out = _outputs(model, tree, loops, qpos, qvel, acc, joints)
        if dynamics:  # the activations at the step's end
            out = _with_act(out, m_k.actuators.act(act))
        return (qpos, qvel, acc, act), out

    _, outs = _time_loop(step, (qpos, qvel, acc, act0), n, count)
    outs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), out0, outs)
    return _start_assembled(outs, loops)


def _start_assembled(outs, loops):
    """``outs`` with the start's status ``max_iterations`` where the start's projection
    left the exact rows open (:data:`START_CLOSURE_TOL`: lengths that cannot close the
    loop), which the run's error reports as an initial configuration that could not be
    assembled, as the absolute formulations' consistent start does."""
    if loops is None:
        return outs
    status, residual = outs[8], outs[9]
    failed = (residual[0] > START_CLOSURE_TOL) & (status[0] == 0)
    status = status.at[0].set(jnp.where(failed, MAX_ITERATIONS, status[0]).astype(status.dtype))
    return (*outs[:8], status, *outs[9:])


def _run_from_starts(model, stepper, tree, loops, joints, qpos, qvel, n: int, h, controls=None,
                     count=None, dynamics: bool = False):  # fmt: skip
    """The outputs of :func:`_run_joint_space` for a :attr:`state_accelerations` stepper, a
    constant model or one under ``controls`` (n, nu): n + 1 iterations, iteration k giving
    the outputs of t_k and step k (the last step unused), so the program holds the
    accelerations' code once. Under controls t_k reports the accelerations under u_k-1 (t_0:
    u_0) and step k runs under u_k, both from one evaluation vmapped over the controls
    (:meth:`~jaxmbd.joint_space.steppers.AbstractJointStepper.ends_and_step`): each state's
    poses, collisions and rows once. ``dynamics``: the actuators' activations are carried
    too, both models of iteration k taking those of t_k (:meth:`~jaxmbd.joint_space.
    steppers.AbstractJointStepper.with_step_activation`; the outputs' ``act``), the next
    from step k's (:meth:`~jaxmbd.joint_space.steppers.AbstractJointStepper.
    activation_after`). ``count``: the steps taken where given."""

    def evaluated(k, qpos, qvel, warm, act):
        t = k * h
        if controls is None:
            m_k = stepper.with_step_activation(model, act, t, h) if dynamics else model
            acc, qpos, qvel = stepper.start_and_step(m_k, tree, loops, qpos, qvel, t, h,
                                                     warm=warm)  # fmt: skip
            return acc, acc, qpos, qvel, next_act(m_k, act)
        before = with_controls(model, controls[jnp.maximum(k - 1, 0)])
        m_k = with_controls(model, controls[jnp.minimum(k, n - 1)])
        if dynamics:
            before = stepper.with_step_activation(before, act, t, h)
            m_k = stepper.with_step_activation(m_k, act, t, h)
        ends = stepper.ends_and_step(before, m_k, tree, loops, qpos, qvel, t, h, warm=warm)
        return (*ends, next_act(m_k, act))

    def next_act(m_k, act):
        return stepper.activation_after(m_k, h) if dynamics else act

    def step(state, k):
        qpos, qvel, warm, act = joint_loop_guard(state)
        reported, acc, qpos_, qvel_, act_ = _adjoint_recomputes(
            lambda qpos, qvel, warm, act: evaluated(k, qpos, qvel, warm, act)
        )(qpos, qvel, warm, act)
        out = _outputs(model, tree, loops, qpos, qvel, reported, joints)
        if dynamics:
            out = _with_act(out, model.actuators.act(act))
        state = (qpos_, qvel_, _warm_start(acc), act_)
        return state, out

    act0 = model.actuators.activation if dynamics else jnp.zeros(0, qvel.dtype)
    start = (qpos, qvel, jnp.zeros_like(qvel), act0)
    _, outs = _time_loop(step, start, n + 1, None if count is None else count + 1)
    return outs


def _warm_start(acc):
    """The next step's warm start, MuJoCo's ``qacc_warmstart``: this step's qacc, which
    carries no derivative (the solve's optimum does not depend on where it starts)."""
    warm = acc.qacc if acc.solver_qacc is None else acc.solver_qacc
    return jax.lax.stop_gradient(warm)


def _run_stepped_models(
    model, stepper, tree, loops, joints, qpos, qvel, n: int, h, stepped_model, observed=None,
    count=None,
):  # fmt: skip
    """The outputs of :func:`_run_joint_space` where each step has its own model
    ``stepped_model(k, qpos, qvel, acc)`` (its controls, or a policy's from the state and
    the accelerations ``acc`` of the step before): n iterations of
    :meth:`~jaxmbd.joint_space.steppers.AbstractJointStepper.start_and_advance`, the step's
    start and end accelerations under its model, the outputs at t_k+1 the end's; the
    outputs at t = 0 those of step 0's start, or, for a policy, of ``observed`` (the model
    whose accelerations it observes first); ``count``: the steps taken where given
    (:func:`_time_loop`). Each step is recomputed whole in the adjoint
    (:func:`_adjoint_recomputes`): the forward loop stores the state alone. A stepper that
    computes both ends in one loop (RK4) puts the accelerations' code in the program once,
    where a start, a step and an end held it three times: the cart-pole's 10-step gradient
    of ``benchmarks/compile_time.py`` reaches a first result in 8.5 s instead of 15.3
    (``benchmarks/results/bench_compile.md``, section 8)."""
    if observed is None:  # step 0's start, kept by the loop
        m0 = stepped_model(0, qpos, qvel, None)
        shapes = jax.eval_shape(
            lambda q, v: stepper.start_accelerations(m0, tree, loops, q, v, 0.0, h), qpos, qvel
        )
        acc = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    else:
        acc = stepper.start_accelerations(observed, tree, loops, qpos, qvel, 0.0, h)

    def stepped(carry, k):
        qpos, qvel, acc, warm = carry
        m_k = stepped_model(k, qpos, qvel, acc)
        start, qpos, qvel, end = stepper.start_and_advance(m_k, tree, loops, qpos, qvel, k * h, h,
                                                           warm=warm)  # fmt: skip
        if observed is None:
            kept = jax.tree_util.tree_map(lambda a, b: jnp.where(k == 0, b, a), acc, start)
        else:
            kept = end
        carry = (qpos, qvel, kept, _warm_start(start))
        return carry, _outputs(model, tree, loops, qpos, qvel, end, joints)

    def step(carry, k):
        return _adjoint_recomputes(lambda carry: stepped(carry, k))(joint_loop_guard(carry))

    start = (qpos, qvel, acc, jnp.zeros_like(qvel))
    (_, _, kept, _), outs = _time_loop(step, start, n, count)
    out0 = _outputs(model, tree, loops, qpos, qvel, kept if observed is None else acc, joints)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), out0, outs)


def tree_wrenches(model: Model, sol, along_joints: bool):
    """(T, nb, 6) world wrenches (n_O, f) through the tree joints of a joint-space run. A
    run with ``contact="hard"`` (or hard limits) reads its accelerations as the steps' mean
    ones and its contact slots' mean forces (``sol.contact``) as applied loads; the hard
    limits act along the joints."""
    hard = sol.unilateral_forces is not None
    contact = "compliant" if sol.contact_element is not None and not hard else "none"
    run_model = with_contact(model, contact, where="joint_wrenches")
    loads = _hard_contact_loads(model.nb, sol) if hard and sol.contact_element is not None \
        else None  # fmt: skip
    # the loops' multipliers only: a run with sensors has the tree rows' filled in
    # (tree_multipliers), which are these wrenches themselves
    loop = np.asarray(sorted(_loop_rows(model, sol.tree)), dtype=int)
    lam = jnp.zeros_like(sol.lam).at[..., loop].set(sol.lam[..., loop])
    arrays = (*_tree_arrays(sol)[:-1], lam)
    return _tree_wrenches_jit(run_model, sol.tree, along_joints, *arrays, loads=loads)


def _loop_rows(model: Model, tree) -> set[int]:
    """The model's rows that the joint formulation keeps as constraints (loops, drivers,
    equalities): those whose multipliers a joint-space run solves for."""
    _, loops, _ = concrete_tree(model)
    joints = _equality_joints(model, tree)
    rows = set(() if loops is None else loops.model_rows)
    return rows | set(() if joints is None else joints.model_rows)


def _hard_contact_loads(nb: int, sol):
    """(T, nb, 6): each body's load (f global at its centre of mass, n_bar body frame) from
    the hard contact slots' mean forces of a run."""
    slots = sol.contact
    bi, bj = sol.contact_element._slot_bodies()
    force = slots.normal_force[..., None] * slots.normal + slots.tangential_force
    r = jnp.concatenate([sol.r, jnp.zeros_like(sol.r[:, :1])], 1)
    A = jnp.concatenate([sol.A, jnp.broadcast_to(jnp.eye(3), sol.A[:, :1].shape)], 1)
    loads = jnp.zeros((sol.r.shape[0], nb + 1, 6), sol.r.dtype)
    for bodies, sign in ((bi, 1.0), (bj, -1.0)):
        f = sign * force
        moment = jnp.cross(slots.point - r[:, bodies], f)
        n_bar = jnp.einsum("tsji,tsj->tsi", A[:, bodies], moment)
        loads = loads.at[:, bodies].add(jnp.concatenate([f, n_bar], -1))
    return loads[:, :nb]


def _tree_arrays(sol):
    return (sol.t, sol.qpos, sol.r, sol.A, sol.rdot, sol.omega, sol.rddot, sol.omegadot,
            sol.lam)  # fmt: skip


@eqx.filter_jit  # one program (see _energy)
def _tree_wrenches_jit(model, tree, along_joints, *arrays, loads=None):
    return tree_joint_wrenches(model, tree, *arrays, along_joints=along_joints, loads=loads)


def tree_multipliers(model: Model, sol):
    """``sol.lam`` (T, nc) with the tree joints' rows filled: each tree body's constraint
    reaction (:func:`jaxmbd.analysis.diagnostics.joint_wrenches`, ``along_joints=False``) written
    as -G_b^T lam over the rows that join it to its parent (least squares: exact, the
    reaction lies in their span; the split among dependent rows is the minimum-norm one)."""
    tree, nb = sol.tree, model.nb
    loop = _loop_rows(model, tree)
    groups = []
    for b in range(nb):
        parent = nb if tree.parent[b] < 0 else tree.parent[b]
        rows = [k for k, pair in enumerate(model.constraint_bodies)
                if k not in loop and set(pair) == {b, parent}]  # fmt: skip
        if rows:
            groups.append((b, tuple(rows)))
    if not groups:
        return sol.lam
    rows = _padded_rows(sol)
    if rows is None:
        wrenches = tree_wrenches(model, sol, along_joints=False)
        return _rows_of_wrenches(model, tuple(groups), sol.t, sol.r, sol.A, sol.lam, wrenches)
    # a plain call's rows padded to a power of two on the host: the two programs serve
    # every horizon up to it (one per doubling), at most twice the rows' cost
    lam = np.asarray(sol.lam)
    loop_lam = np.zeros_like(lam)
    loop = np.asarray(sorted(loop), dtype=int)
    loop_lam[:, loop] = lam[:, loop]
    arrays = [_pad(x, rows) for x in (*_tree_arrays(sol)[:-1], loop_lam)]
    run_model = with_contact(model, "none" if sol.contact_element is None else "compliant",
                             where="joint_wrenches")  # fmt: skip
    wrenches = _tree_wrenches_jit(run_model, sol.tree, False, *arrays)
    t, r, A = arrays[0], arrays[2], arrays[3]
    lam = _rows_of_wrenches(model, tuple(groups), t, r, A, _pad(lam, rows), wrenches)
    return jax.device_put(np.asarray(lam)[: sol.lam.shape[0]])


def _padded_rows(sol) -> int | None:
    """The rows (a power of two, at least 16) that :func:`tree_multipliers` pads the
    (T, ...) arrays of a concrete run's Solution to, or None where it runs on them as
    they are: traced or batched arrays, or a run with hard contact (its loads come from
    the contact slots)."""
    if is_traced(sol.lam) or sol.lam.ndim != 2 or sol.unilateral_forces is not None:
        return None
    return max(16, 1 << (sol.lam.shape[0] - 1).bit_length())


def _pad(x, rows: int):
    """``x`` (T, ...) on the device with its last row repeated up to ``rows`` rows."""
    x = np.asarray(x)
    return jax.device_put(np.concatenate([x, np.repeat(x[-1:], rows - x.shape[0], axis=0)]))


@eqx.filter_jit  # one program (see _energy)
def _rows_of_wrenches(model, groups, t, r, A, lam, wrenches):
    """``lam`` with the rows of each (body, rows) of ``groups`` solved from the body's
    constraint wrench (see :func:`_tree_multipliers`). On the CPU row by row
    (``lax.map``): ``vmap`` would make each group's least squares one batched SVD, which
    jaxlib spreads over XLA's intra-op thread pool and waits for on a pool thread
    (``jax::ParallelBatchMap``); with as many independent groups running at once as the
    pool has threads (two on a 2-core machine), every thread waits on work queued behind
    it, and the program deadlocks (jax 0.10.2; seen in gdb, at 0 % CPU, as
    :mod:`jaxmbd.linear.dense` saw for getrf). A single row's SVD runs inline."""
    nb, nc = model.nb, model.nc

    def one(t, r, A, lam, w):
        zero = jnp.zeros_like(r)
        _, G, _, _ = rA_terms(model, r, A, zero, zero, t)
        G = G.reshape(nc, nb, 6)
        for b, rows in groups:
            rows = np.asarray(rows, dtype=int)
            f = w[b, 3:]
            n_bar = A[b].T @ (w[b, :3] - jnp.cross(r[b], f))
            load = jnp.concatenate([f, n_bar])
            lam = lam.at[rows].set(min_norm_solve(-G[rows, b].T, load, redundant=True)[0])
        return lam

    return cpu_or_accelerator(
        t, r, A, lam, wrenches,
        cpu=lambda *rows: jax.lax.map(lambda row: one(*row), rows),
        accelerator=jax.vmap(one),
    )  # fmt: skip


def rest_multipliers(model: Model, form, qpos, lam_loops, t):
    """``lam`` (nc,) of an equilibrium at ``qpos`` (at rest): the loop rows' multipliers
    ``lam_loops`` and the tree joints' rows from Newton-Euler (:func:`tree_multipliers`)."""
    tree, loops = model_tree(model, independent_loop_rows(model))
    zero = jnp.zeros(tree.nv, qpos.dtype)
    acc = accelerations(model, tree, loops, qpos, zero, t)
    acc = acc._replace(qacc=zero, lam=lam_loops)
    outs = _outputs(model, tree, loops, qpos, zero, acc)
    outs = jax.tree_util.tree_map(lambda a: a[None], outs)
    h = jnp.ones((), qpos.dtype)
    sol = solution_from_outputs(model, form, h, outs, tree=tree)
    sol = eqx.tree_at(lambda s: s.t, sol, jnp.asarray(t, qpos.dtype)[None])
    if model.nc == 0:
        return sol.lam[0]
    return tree_multipliers(model, sol)[0]


def _row_names(model: Model, cons: TreeConstraints) -> tuple[str, ...]:
    """The names of the rows of ``cons`` (their concatenation, all of them): a GCON row's
    the model's name of it, an equality's its name and the row."""
    names = []
    for part in cons.parts:
        rows = getattr(part, "model_rows", None)
        if rows is not None:
            names += [model.constraint_names[row] for row in rows]
        else:
            name = getattr(part, "name", type(part).__name__)
            names += [f"equality '{name}' row {k}" for k in range(part.size)]
    return tuple(names)


def planned_rows(model: Model):
    """(tree, rows, dropped) of a run of ``model``: its kinematic tree, the constraint rows
    the run keeps (:func:`independent_constraint_rows`, None where the model's values are
    traced: every row kept) and the names of those it drops, the rows that depend on the
    others at the start (held by the tree's own structure). A dropped driven row is
    refused (:func:`_refuse_dropped_drivers`)."""
    tree, cons, G = concrete_tree(model)
    rows = None if G is None else independent_rows_of(cons, G)
    _refuse_dropped_drivers(model, cons, rows)
    if rows is None:
        return tree, rows, ()
    names = _row_names(model, cons)
    return tree, rows, tuple(name for k, name in enumerate(names) if k not in set(rows))


#: The fewest rows of a run's program outside any transformation (:func:`_counted_run`).
FEWEST_RUN_ROWS = 1024


def run_rows(n: int) -> int:
    """The steps that the program of an n-step run outside any transformation has room
    for: :data:`FEWEST_RUN_ROWS`, or the power of two from n up. The run takes its n steps
    (an input of the program), so its cost follows n, and a user meets one program up to
    FEWEST_RUN_ROWS steps and one more per doubling of the horizon beyond."""
    return max(FEWEST_RUN_ROWS, 1 << max(n - 1, 0).bit_length())


def _counted_run(model, stepper, n: int, h, controls, policy, rows):
    """:func:`run_joint_space` of n steps for concrete inputs outside any transformation:
    the program of :func:`run_rows` steps taking n of them (``count``), the controls' rows
    past n repeated from the last one (shapes are the program's), the outputs cut to the
    n + 1 rows of the run on the host."""
    size = run_rows(n)
    if controls is not None:
        host = np.asarray(controls)
        pad = np.zeros((size - host.shape[0], *host.shape[1:]), host.dtype)
        if host.shape[0]:
            pad[:] = host[-1]
        controls = jax.device_put(np.concatenate([host, pad]))
    outs, moved = _counted_program(model, stepper, size, h, controls, policy, rows, np.asarray(n))
    leaves, treedef = jax.tree_util.tree_flatten(outs)
    rows_kept = to_device([np.asarray(x)[: n + 1] for x in leaves])
    return jax.tree_util.tree_unflatten(treedef, rows_kept), moved


@jit  # a program of the disk cache, as run_joint_space's
def _counted_program(model, stepper, size: int, h, controls, policy, rows, count):
    """:func:`run_joint_space` of ``count`` steps in a program of ``size`` rows, and the
    :func:`~jaxmbd._checks.start_correction` of its first state (None for a model without
    bodies): the Solution's, computed here rather than by a program call of its own."""
    outs = run_joint_space(model, stepper, size, h, controls, policy, rows, count)
    moved = start_correction(model, *(x[0] for x in outs[:4])) if model.nb else None
    return outs, moved


def run_planned_joint_space(model: Model, form, stepper: AbstractJointStepper, *, tree, rows,
                            n: int, h, controls, policy, throw: bool, sensor_key=None,
                            plan=None, stacklevel: int = 2):  # fmt: skip
    """:func:`jaxmbd.simulate` for ``formulation="joint"`` once planned
    (:func:`jaxmbd.analysis.plan.plan_simulation`): ``n`` steps of ``stepper`` from the
    model's initial state, keeping the constraint ``rows`` of ``tree``
    (:func:`planned_rows`); ``plan``: the decisions kept as ``sol.plan``; ``stacklevel``:
    the frame the start's report names, counted from here as :func:`warnings.warn`
    counts."""
    # a host number stays a numpy scalar: the program takes it as an argument either way,
    # and a transfer of its own would cost a short run a tenth of its call
    h_arr = device_array(h, jnp.float64) if isinstance(h, jax.Array) else np.float64(h)
    run_model = (
        model
        if model.sensors is None or policy is not None
        else dataclasses.replace(model, sensors=None)
    )
    top = at_top_level()
    # outside every transformation no value is a tracer: no walk over the model's leaves
    traced = not top and (is_traced(model) or is_traced((controls, policy)))
    moved = None  # the start's correction, where the run's program computed it
    if traced or not top:  # a transformation's run: the program of its n steps
        outs = run_joint_space(run_model, stepper, n, h_arr, controls, policy, rows)
    else:
        outs, moved = _counted_run(run_model, stepper, n, h_arr, controls, policy, rows)
    outs, row_forces = soft_row_forces(stepper, outs)
    sol = solution_from_outputs(model, form, h_arr, outs, integrator=stepper.name,
                                linear_solver=joint_linear_solver(model, tree, rows), tree=tree,
                                sensor_key=sensor_key, plan=plan, start_correction=moved,
                                controls="policy" if policy is not None else controls,
                                soft_row_forces=None if policy is not None
                                else kept_row_forces(model, row_forces))  # fmt: skip
    if model.sensors is not None and any(sensor_kind(k).needs_run for k in model.sensors.kinds):
        # the joint reaction sensors read the tree joints' reactions from sol.lam:
        # Newton-Euler's, a pass over the run's rows that the other sensors do not need
        sol = eqx.tree_at(lambda s: s.lam, sol, tree_multipliers(model, sol))
    return finish(model, sol, what="dynamics", throw=throw, traced=traced,
                  stacklevel=1 + stacklevel)  # fmt: skip
