"""What a run will do, decided before it runs: :func:`plan_simulation` takes
:func:`~jaxmbd.simulate`'s model and options and returns a :class:`Plan`, which names every
decision (the formulation, the integrator and its linear solver, how contact, joint limits
and equality constraints act, the constraint rows dropped and why, the checks) and holds
the prepared model and the stepper that :func:`jaxmbd.analysis.simulation.run_plan` runs.
``simulate`` is the two calls; ``sol.plan`` is the plan of the run that gave ``sol``
(without its objects), and ``print(sol.plan)`` reads it.

The defaults that the other analyses share are decided here too, once:
:func:`default_formulation` (simulate, statics, linearize, batches: the model's, which no
option changes; an option that its joint formulation does not take raises, naming the
formulation that does) and
:func:`treated_model`, the model as the ``contact``/``limits``/``equality`` options make it
(simulate, statics, linearize, the environments)."""

from __future__ import annotations

import collections
import dataclasses
import textwrap
import warnings
import weakref
from typing import Any, NamedTuple

from .. import _config  # noqa: F401
from .._checks import first_row
from .._parameter_checks import checked_parameters
from ..actuators import (
    ACTIVATION_DYNAMICS,
    NO_DYNAMICS,
    control_inputs,
    policy_controls,
    with_controls,
)
from ..compiled.jit import at_top_level
from ..constraints.redundancy import rows_for_run
from ..contact import with_contact
from ..errors import JointSpaceOnlyWarning, ModelError
from ..forces._joint import joint_space_entries_message
from ..forces.joint_limits import JointLimits
from ..formulations import AbstractFormulation, get_formulation
from ..formulations.joint import JointCoordinates
from ..integrators import (
    INTEGRATORS,
    AbstractImplicitIntegrator,
    MoreauJean,
    get_integrator,
)
from ..integrators.generalized_alpha import CONTACT_RHO_INF
from ..integrators.impact_substeps import with_impact_substeps
from ..integrators.moreau_jean import check_friction_cone
from ..joint_space import contact_step as joint_contact
from ..joint_space.coverage import model_obstacles
from ..joint_space.equalities import check_soft_equalities, with_equalities
from ..joint_space.run import JOINT_LINEAR_SOLVER, planned_rows
from ..joint_space.steppers import AbstractJointStepper, get_stepper
from ..model import Model
from ..newton.line_search import LineSearchNewton
from ..soft_constraints.treatments import (
    SOFT,
    default_step,
    model_defaults,
    soft_constraints_of,
    with_soft,
)
from ..tendons.tendon_forces import TendonForces
from ._stepping import check_euler_angle_start, check_save_every, num_steps
from .limits_option import limits_integrator, with_limits
from .refusals import (  # noqa: F401  (statics and linearize import them from here)
    Refusal,
    absolute_only_requests,
    absolute_refusals,
    joint_refusals,
    refusal_message,
)

# ----------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class Plan:
    """A run of :func:`~jaxmbd.simulate`, decided (:func:`plan_simulation`) and not yet run
    (:func:`~jaxmbd.analysis.simulation.run_plan`).

    The decisions (static): ``formulation``, ``integrator`` and ``linear_solver`` (the
    names ``sol.formulation``, ``sol.integrator`` and ``sol.linear_solver`` will carry);
    ``contact``, ``limits`` and ``equality``: how the model's contact pairs ("compliant",
    "hard", "soft": MuJoCo's constraint model, "none"), joint limits (the same four) and
    equality constraints ("exact", "soft", "none") act; ``absent``: the parts of those the
    model does not have; ``steps`` of ``step_size``, ``save_every``, ``checkpoint``,
    ``chunk_size``; ``dropped_rows``: the names of the constraint rows the run leaves out
    and ``dropped_because`` why (rows that depend on the others at the start);
    ``kept_rows``: the indices of the rows it keeps (of the model's rows; in joint
    coordinates of the tree's constraint rows), None where all are kept; ``checks``: what
    was checked while planning, then what the run checks.

    What the run needs: ``model``, the prepared model the steps integrate (options applied,
    parameters checked, rows dropped); ``reported_model``, the model the Solution reports
    (every row, its sensors); ``form`` and ``stepper``, the formulation and integrator
    objects; ``tree``, the kinematic tree of a run in joint coordinates; ``h``,
    ``controls`` (one row per step), ``policy`` and ``sensor_key``. :meth:`described` drops
    them (``sol.plan``)."""

    model_name: str
    formulation: str
    integrator: str
    linear_solver: str
    contact: str
    limits: str
    equality: str
    absent: tuple[str, ...]
    steps: int
    step_size: float
    save_every: int
    checkpoint: int | None
    chunk_size: int | None
    dropped_rows: tuple[str, ...]
    dropped_because: str
    kept_rows: tuple[int, ...] | None
    checks: tuple[str, ...]
    model: Any = None
    reported_model: Any = None
    form: Any = None
    stepper: Any = None
    tree: Any = None
    h: Any = None
    controls: Any = None
    policy: Any = None
    sensor_key: Any = None

    def described(self) -> Plan:
        """The decisions alone (every object None): what ``sol.plan`` keeps, static and
        hashable. Kept by the decisions' values: a plain call's plan is a new object each
        call, and building it again costs a fair part of a short run's call."""
        try:
            key = tuple((type(v), v) for v in (getattr(self, f) for f in _DECISION_FIELDS))
            kept = _DESCRIBED.get(key)
        except TypeError:  # an unhashable decision: built, not kept
            key, kept = None, None
        if kept is None:
            kept = dataclasses.replace(self, **dict.fromkeys(_OBJECT_FIELDS))
            if key is not None:
                if len(_DESCRIBED) >= 256:  # a bounded memo: the oldest half goes
                    for old in list(_DESCRIBED)[:128]:
                        del _DESCRIBED[old]
                _DESCRIBED[key] = kept
        return kept

    def summary(self) -> str:
        """The decisions as lines of text."""

        def treatment(name: str, part: str) -> str:
            value = getattr(self, name)
            return f"{value} (the model has no {part})" if part in self.absent else value

        saved = "every step saved" if self.save_every == 1 else f"every {self.save_every}th saved"
        rows = ", ".join(self.dropped_rows) or "none"
        if self.dropped_rows:
            why = textwrap.wrap(f"why: {self.dropped_because}", 100 - len(_INDENT))
            rows += "".join(f"\n{_INDENT}{line}" for line in why)
        lines = [
            f"Plan of a simulation of model '{self.model_name}'",
            f"  formulation    {self.formulation}",
            f"  integrator     {self.integrator}",
            f"  linear solver  {self.linear_solver}",
            f"  steps          {self.steps} of h = {self.step_size:g}, {saved}",
            f"  contact        {treatment('contact', 'contact pairs')}",
            f"  limits         {treatment('limits', 'joint limits')}",
            f"  equality       {treatment('equality', 'equality constraints')}",
            f"  rows dropped   {rows}",
            "  checks         " + f"\n{_INDENT}".join(self.checks),
        ]
        if self.checkpoint:
            lines.insert(5, f"  checkpoint     every {self.checkpoint} steps")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


#: The indent of a summary's continued lines (under the values).
_INDENT = " " * 17


# ----------------------------------------------------------------------------- shared defaults


#: The fields of a Plan that hold objects (None in :meth:`Plan.described`).
_OBJECT_FIELDS = ("model", "reported_model", "form", "stepper", "tree", "h", "controls",
                  "policy", "sensor_key")  # fmt: skip
#: The fields of a Plan that hold its decisions.
_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(Plan) if f.name not in _OBJECT_FIELDS)
#: Described plans by their decisions (:meth:`Plan.described`).
_DESCRIBED: dict = {}


class Treated(NamedTuple):
    """:func:`treated_model`'s result: the model and the ``contact`` and ``limits`` options
    left for the integrator's choice ("soft" becomes "none": the parts MuJoCo's constraint
    model takes leave the other treatments)."""

    model: Model
    contact: str | None
    limits: str | None


def treated_model(model: Model, *, contact=None, limits=None, equality=None, where: str,
                  hard_and_soft: bool = False) -> Treated:  # fmt: skip
    """``model`` as an analysis with the ``contact``, ``limits`` and ``equality`` options
    sees it (:func:`~jaxmbd.contact.with_contact`,
    :func:`~jaxmbd.analysis.limits_option.with_limits`,
    :func:`~jaxmbd.joint_space.equalities.with_equalities`). ``hard_and_soft``: the
    caller steps the "hard" treatments (unilateral constraints, ``moreau_jean``) and the
    "soft" ones (MuJoCo's constraint model,
    :func:`~jaxmbd.soft_constraints.treatments.with_soft`), as :func:`~jaxmbd.simulate`
    does; elsewhere they are refused. Outside any transformation the answer for the same
    model object and options is kept (a Model is immutable): a plain call asks it twice,
    and each answer rebuilds the model's contact, limit and constraint elements, a few
    milliseconds that a short run would pay per call."""
    asked = (contact, limits, equality, where, hard_and_soft)
    if not at_top_level():
        return _treated(model, *asked)
    for kept_model, kept_asked, kept in _TREATED:
        if kept_model() is model and kept_asked == asked:
            return kept
    found = _treated(model, *asked)
    try:
        _TREATED.appendleft((weakref.ref(model), asked, found))
    except TypeError:  # a model that takes no weak reference: not kept
        pass
    return found


#: (a weak reference to the model, the options, its treated model) of the last asks.
_TREATED: collections.deque = collections.deque(maxlen=4)


def _treated(model: Model, contact, limits, equality, where: str, hard_and_soft: bool) -> Treated:
    """:func:`treated_model`, computed."""
    if hard_and_soft:
        model, contact, limits = with_soft(model, contact=contact, limits=limits, where=where)
    elif SOFT in (contact, limits):
        # MuJoCo's constraint model is a step's convex problem (velocities, reference
        # accelerations): it has no static or linearised form
        asked = " and ".join(f"{k}='soft'" for k, v in (("contact", contact),
                             ("limits", limits)) if v == SOFT)  # fmt: skip
        raise ValueError(
            f"{where}: {asked} (MuJoCo's constraint model) is an option of simulate only; "
            f"{where} takes jaxmbd's compliant contact and limits (the default, also for a "
            "model file), 'hard' where it has it, or 'none'"
        )
    model = with_contact(model, contact, where=where, hard=hard_and_soft)
    model = with_limits(model, limits, where=where, hard=hard_and_soft)
    model = with_equalities(model, equality, where=where)
    return Treated(model, contact, limits)


def contact_treatment(contact: str | None) -> str:
    """The name of how contact pairs act under the ``contact`` option."""
    return "compliant" if contact is None else contact


def limits_treatment(limits: str | None, integrator: str) -> str:
    """The name of how joint limits act under the ``limits`` option and the integrator named
    ``integrator``: None leaves them to it (hard stops with ``moreau_jean``, else the
    compliant spring-dampers)."""
    if limits is not None:
        return limits
    return "hard" if integrator == MoreauJean.name else "compliant"


def soft_equality_default(model: Model, contact, limits, equality):
    """The ``equality`` option of a run: as given, but "soft" where the run solves MuJoCo's
    constraint model (``contact`` or ``limits`` "soft") and names none, so that the file's
    equality constraints join the same convex problem, as MuJoCo solves them."""
    if equality is None and "soft" in (contact, limits) and model.equalities:
        return "soft"
    return equality


def run_defaults(model: Model, *, formulation=None, contact=None, limits=None,
                 equality=None) -> tuple:  # fmt: skip
    """(contact, limits, equality): a run's options with those left None resolved to the
    model's own treatment (:func:`~jaxmbd.soft_constraints.treatments.model_defaults`: a
    model read from a file runs MuJoCo's constraint model, "soft") where the run is in
    joint coordinates, the only formulation that solves it: ``formulation`` "joint", or
    None where the model so treated defaults to "joint" (:func:`model_formulation`). A
    run in an absolute formulation (named, or the default of a model that joint
    coordinates do not run) keeps the options as given: jaxmbd's compliant contact and
    limits and exact equality constraints where None."""
    resolved = model_defaults(model, contact=contact, limits=limits, equality=equality)
    if resolved == (contact, limits, equality):
        return resolved
    if formulation is not None:
        joint = get_formulation(formulation).runs_in_joint_space
    else:
        try:
            soft = treated_model(
                model, contact=resolved[0], limits=resolved[1], equality=resolved[2],
                where="simulate", hard_and_soft=True,
            ).model  # fmt: skip
        except (ValueError, ModelError):  # the run itself says what is wrong
            return resolved
        joint = model_formulation(soft) == JointCoordinates.name
    return resolved if joint else (contact, limits, equality)


def equality_treatment(equality: str | None) -> str:
    """The name of how equality constraints act under the ``equality`` option."""
    return "exact" if equality is None else equality


def model_formulation(model: Model) -> str:
    """The formulation of a run of ``model`` that names none, decided by the model alone:
    "joint" where the joint formulation runs everything it holds
    (:func:`jaxmbd.joint_space.coverage.model_obstacles`: a kinematic tree from its
    body-joint graph, loops kept as constraint rows, every force element), else "rA".
    Rows beyond the tree (the joints that close loops, drivers) keep "joint": its ``rk``
    steps loop models 3-20x faster than rA's ``gen_alpha``, and its first call is shorter
    (slider crank 56 s against 112 s, a driven pendulum 19 s against 57 s:
    ``benchmarks/probes/loop_models_first_call.py``). A model that only joint coordinates
    express (``model.joint_space_only``) is "joint", whose error then names what it lacks.
    A run's options never change it (:func:`default_formulation`)."""
    if model.joint_space_only or not _model_obstacles_of(model):
        return JointCoordinates.name
    return "rA"


def default_formulation(model: Model, integrator=None, options=None, *,
                        absolute_only: tuple[str, ...] = (),
                        where: str = "simulate") -> str:  # fmt: skip
    """The formulation of a run of ``model`` that names none: :func:`model_formulation`,
    whatever the run asks. Where that is "joint", a request that the joint formulation
    does not take raises ``ValueError`` naming the request, the formulations that take it
    and the ``formulation=`` to pass (:func:`joint_refusals`): an ``integrator`` (a name or
    an object) that it has no step for, an option in ``options`` that its step lacks, or
    one of ``absolute_only`` (:func:`absolute_only_requests`, e.g. ``"save_every=10"``).
    ``where``: the analysis that the error names. The formulations guide says why."""
    formulation = model_formulation(model)
    if formulation == JointCoordinates.name and not model.joint_space_only:
        refused = joint_refusals(model, integrator, options) + absolute_refusals(absolute_only)
        if refused:
            raise ValueError(refusal_message(refused, model, where=where, named=False))
    return formulation


def _model_obstacles_of(model: Model) -> tuple[str, ...]:
    """:func:`model_obstacles`, kept for the last model asked (by identity through a weak
    reference: a Model is immutable, and a dead reference never matches a new model at a
    reused address): each answer builds the model's kinematic tree, a program call that
    dominates a short run's plain call."""
    kept_model, kept = _LAST_OBSTACLES
    if kept_model is not None and kept_model() is model:
        return kept
    found = model_obstacles(model)
    try:
        _LAST_OBSTACLES[:] = [weakref.ref(model), found]
    except TypeError:  # a model that takes no weak reference: not kept
        pass
    return found


#: (a weak reference to the model, its obstacles) of the last ask.
_LAST_OBSTACLES: list = [None, None]


# ----------------------------------------------------------------------------- integrators


def _hard_contact_integrator(model, contact, integrator):
    """The integrator of a run with ``contact``: "hard" takes ``moreau_jean`` (the default
    then) and refuses any other; ``moreau_jean`` treats the contact pairs as unilateral
    constraints and so needs contact="hard" when the model has pairs."""
    name = integrator if integrator is None or isinstance(integrator, str) else integrator.name
    if contact == "hard":
        if name not in (None, MoreauJean.name):
            raise ValueError(
                f"simulate: contact='hard' (unilateral constraints with impacts and Coulomb "
                f"friction) is stepped by integrator='{MoreauJean.name}' (the default with "
                f"contact='hard'), not {name!r}; the other integrators take the compliant "
                "contact (contact='compliant')"
            )
        check_friction_cone(model)
        return MoreauJean.name if integrator is None else integrator
    if name == MoreauJean.name and model.contacts is not None and contact != "none":
        raise ValueError(
            f"simulate: integrator='{MoreauJean.name}' steps contact pairs as unilateral "
            f"constraints: pass contact='hard' (or contact='none' to ignore the pairs of "
            f"model '{model.name}')"
        )
    return integrator


def _has_rho_inf(cls) -> bool:
    """Whether an integrator class has the spectral-radius option (gen_alpha, or any
    integrator that declares it): asked of its fields, not its name."""
    return "rho_inf" in getattr(cls, "__dataclass_fields__", {})


def _contact_newton(model, integrator, form, options: dict) -> dict:
    """The integrator options of a run of ``model``: with contact pairs, an implicit
    integrator named (or the default) without a ``newton`` option gets
    :class:`~jaxmbd.newton.line_search.LineSearchNewton` (``max_iter`` moves onto it), and an
    integrator with a ``rho_inf`` option (gen_alpha) without it gets
    :data:`CONTACT_RHO_INF` (0: stiff contact modes are damped out in a step instead of
    ringing)."""
    if model.contacts is None:
        return options
    if integrator is not None and not isinstance(integrator, str):
        return options  # an integrator object carries its own options
    cls = INTEGRATORS.get(form.default_integrator if integrator is None else integrator)
    if cls is None or not issubclass(cls, AbstractImplicitIntegrator):
        return options
    if options.get("newton") is not None:
        if _has_rho_inf(cls) and options.get("rho_inf") is None:
            return {**options, "rho_inf": CONTACT_RHO_INF}
        return options
    options = dict(options)
    max_iter = options.pop("max_iter", None)
    newton = LineSearchNewton() if max_iter is None else LineSearchNewton(max_iter=max_iter)
    options = {**options, "newton": newton}
    if _has_rho_inf(cls) and options.get("rho_inf") is None:
        # a contact is a stiff, short-lived mode: rho_inf = 0.9 keeps 90 % of its
        # amplitude per step, and a plastic landing rebounds at 0.87 of its speed at
        # h = 1e-3; rho_inf = 0 annihilates it as the contact law intends
        options["rho_inf"] = CONTACT_RHO_INF
    return options


def _with_stepper_options(stepper: AbstractJointStepper, options: dict) -> AbstractJointStepper:
    """``stepper`` with the integrator ``options`` that are its fields (moreau_jean's
    ``tol``, ``max_iter``, ``project``); any other option is refused."""
    fields = {f.name for f in dataclasses.fields(stepper)}
    unused = sorted(set(options) - fields)
    if unused:
        raise ValueError(
            f"formulation 'joint': integrator {stepper.name!r} takes no options {unused}"
            + (f" (its options: {sorted(fields)})" if fields else "")
        )
    return dataclasses.replace(stepper, **options)


def _joint_stepper(model: Model, form, integrator, options: dict) -> AbstractJointStepper:
    """The stepper of a run in joint coordinates: ``integrator``, or where it is None the
    formulation's choice for ``model`` (``form.integrator_of``: the file's with MuJoCo's
    constraint model, the contact step with contact pairs, else its default), with
    ``options`` (the contact defaults of :func:`~jaxmbd.joint_space.contact_step.contact_options`
    for a named one) and impact sub-steps where compliant contact needs them."""
    options = {k: v for k, v in options.items() if v is not None}
    substeps = [options.pop(k, None) for k in joint_contact.SUBSTEP_OPTIONS]
    if integrator is None:
        integrator = form.integrator_of(model)
    stepper = get_stepper(integrator)
    if not isinstance(integrator, AbstractJointStepper):  # an object carries its options
        options = joint_contact.contact_options(model, stepper, options)
    if options:
        stepper = _with_stepper_options(stepper, options)
    return joint_contact.with_impact_substeps(model, stepper, *substeps)


# ----------------------------------------------------------------------------- checks


def _check_policy(model: Model, controls, policy, sensor_key) -> None:
    if policy is not None and (controls is not None or model.nu == 0):
        raise ValueError(
            "simulate: policy= needs a model with actuators and excludes controls="
            if model.nu
            else f"simulate: policy= given, but model '{model.name}' has no actuators"
        )
    if sensor_key is not None and model.sensors is None:
        raise ValueError(f"simulate: sensor_key= given, but model '{model.name}' has no sensors")


def _check_activation_dynamics(model: Model, form, controls, policy) -> None:
    """Actuators with activation dynamics run with given controls or a policy only in
    joint coordinates, which carry the activations from step to step."""
    element = model.actuators
    if element is not None and element.has_dynamics and (controls is not None or policy):
        dynamic = [n for n, d in zip(element.actuator_names, element.dynamics, strict=True)
                   if ACTIVATION_DYNAMICS[d] is not NO_DYNAMICS]  # fmt: skip
        raise ModelError(
            f"simulate: model '{model.name}' has actuators with activation dynamics "
            f"({dynamic}), whose activation formulation='joint' carries from step to step; "
            f"formulation {form.name!r} runs them only with their own held controls"
        )


def _absent_parts(model: Model, contact, limits, equality) -> tuple[str, ...]:
    """The parts among contact pairs, joint limits and equality constraints that ``model``
    (as given) does not have; a "soft" part is MuJoCo's constraint model's, not named."""
    has_limits = any(
        isinstance(f, JointLimits) or (isinstance(f, TendonForces) and f.limits is not None)
        for f in model.forces
    )
    parts = {
        "contact pairs": contact != SOFT and model.contacts is None,
        "joint limits": limits != SOFT and not has_limits,
        "equality constraints": not model.equalities,
    }
    return tuple(part for part, absent in parts.items() if absent)


# ----------------------------------------------------------------------------- planning


def plan_simulation(
    model: Model,
    *,
    formulation=None,
    integrator=None,
    t_end: float,
    h: float | None = None,
    chunk_size: int | None = None,
    checkpoint: int | None = None,
    save_every: int = 1,
    redundant: str = "drop",
    contact: str | None = None,
    limits: str | None = None,
    equality: str | None = None,
    controls=None,
    policy=None,
    sensor_key=None,
    stacklevel: int = 2,
    **options,
) -> Plan:
    """Every decision of :func:`~jaxmbd.simulate` for ``model`` and its options (see its
    docstring; the same names, less the run's own ``throw`` and ``progress``), in this
    order: the step (``h`` None: a file's timestep), the treatments (``contact``,
    ``limits``, ``equality``; "soft": MuJoCo's constraint model, a file's default where the
    run is in joint coordinates, :func:`run_defaults`), the parameters checked, the
    integrator that hard contact or limits need, the steps and the controls, the
    formulation (:func:`default_formulation` where None: the model's, never changed by an
    option; an option that the joint formulation does not take raises ``ValueError``
    naming the formulation that does), then per formulation the stepper
    (its options, contact defaults and impact sub-steps), the constraint rows kept and the
    remaining checks. An invalid request raises here, before anything is compiled.
    ``stacklevel``: the frame that the warnings (redundant rows, an off-grid ``t_end``,
    forces the formulation leaves out) name, counted from here as :func:`warnings.warn`
    counts (2: the caller)."""
    where = "simulate"
    given = model
    h = default_step(model, h, where=where)
    absolute_only = absolute_only_requests(
        save_every=save_every, checkpoint=checkpoint, redundant=redundant, policy=policy,
        sensor_key=sensor_key, chunk_size=chunk_size,
    )  # fmt: skip
    contact, limits, equality = run_defaults(
        model, formulation=formulation, contact=contact, limits=limits, equality=equality
    )
    equality = soft_equality_default(model, contact, limits, equality)
    model, contact_left, limits_left = treated_model(
        model, contact=contact, limits=limits, equality=equality, where=where, hard_and_soft=True
    )
    integrator = limits_integrator(limits_left, integrator, where=where)
    model = checked_parameters(model, where=where)
    checks = ["parameter values"]
    integrator = _hard_contact_integrator(model, contact_left, integrator)
    if contact_left == "hard":
        checks.append("hard contact: friction on the exact cone")
    n = num_steps(t_end, h, stacklevel=1 + stacklevel)
    controls = control_inputs(model, controls, n, h, where=where)
    _check_policy(model, controls, policy, sensor_key)
    if controls is not None:
        checks.append("controls: one row of the actuators' inputs per step")
    if policy is not None:
        checks.append("policy: the model has actuators and no controls are given")
    if formulation is None:
        formulation = default_formulation(model, integrator, options, absolute_only=absolute_only)
    form = get_formulation(formulation)
    if soft_constraints_of(model) is not None and not form.runs_in_joint_space:
        raise ValueError(
            f"simulate: contact='soft' and limits='soft' (MuJoCo's constraint model) run in "
            f"formulation='joint', not {form.name!r}"
        )
    decided = {
        "model_name": model.name,
        "formulation": form.name,
        "contact": contact_treatment(contact),
        "equality": equality_treatment(equality),
        "absent": _absent_parts(given, contact, limits, equality),
        "steps": n,
        "step_size": float(h),
        "chunk_size": chunk_size,
        "h": h,
        "policy": policy,
        "sensor_key": sensor_key,
    }
    if form.runs_in_joint_space:
        if absolute_only:  # a named "joint" (the default's refusal was raised above)
            refused = absolute_refusals(absolute_only)
            raise ValueError(refusal_message(refused, model, where=where, named=True))
        stepper = _joint_stepper(model, form, integrator, options)
        tree, rows, dropped = planned_rows(model)
        if soft_constraints_of(model) is not None:
            checks.append("MuJoCo's constraint model: formulation 'joint'")
        if rows is not None:
            checks.append("dropped rows: none driven")
            checks.append("run: the start's constraint rows closed")
        checks.append("run: each step's state finite and its solver's status")
        return Plan(
            **decided, integrator=stepper.name, linear_solver=JOINT_LINEAR_SOLVER,
            limits=limits_treatment(limits, stepper.name), save_every=1, checkpoint=None,
            dropped_rows=dropped, kept_rows=rows, checks=tuple(checks),
            dropped_because=_JOINT_DROPPED if dropped else "", model=model,
            reported_model=model, form=form, stepper=stepper, tree=tree, controls=controls,
        )  # fmt: skip
    _check_activation_dynamics(model, form, controls, policy)
    if controls is not None:  # the start (and its accelerations) with the first row
        model = with_controls(model, first_row(controls))
    if policy is not None:  # likewise with the policy's reply to the initial state
        start = model.r0, model.A0, model.rdot0, model.omega0
        u0 = policy_controls(model, policy, 0.0, start, key=sensor_key, step=0)
        model = with_controls(model, u0)
    reported_model = model
    if policy is None and model.sensors is not None:  # read after the run: not compiled in
        model = dataclasses.replace(model, sensors=None)
    check_soft_equalities(model, form.name)
    if model.joint_space_only:
        raise ModelError(
            f"simulate: formulation {form.name!r} cannot run model '{model.name}': "
            + "; ".join(model.joint_space_only)
            + ". Use formulation='joint' (joints in joint coordinates, any number per body)"
        )
    if message := joint_space_entries_message(
        model.forces, f"simulate: formulation {form.name!r} on model '{model.name}'"
    ):
        warnings.warn(message, JointSpaceOnlyWarning, stacklevel=stacklevel)
    model, kept = rows_for_run(model, redundant, where=where, stacklevel=1 + stacklevel)
    dropped = () if kept is None else reported_model.redundancy.dropped
    substeps = options.pop("impact_substeps", None), options.pop("impact_speed", None)
    stepper = get_integrator(integrator, form, **_contact_newton(model, integrator, form, options))
    if contact_left != "hard":
        stepper = with_impact_substeps(model, stepper, *substeps)
    check_euler_angle_start(model, form)
    save_every = check_save_every(save_every, n)
    if save_every > 1 and checkpoint:
        raise ValueError("save_every and checkpoint cannot be combined; choose one")
    checks += _absolute_checks(form, kept)
    return Plan(
        **decided, integrator=stepper.name, linear_solver=stepper.linear_solver_name(model, form),
        limits=limits_treatment(limits, stepper.name), save_every=save_every,
        checkpoint=checkpoint, checks=tuple(checks),
        dropped_rows=tuple(reported_model.constraint_names[row] for row in dropped),
        dropped_because=reported_model.redundancy.describe(reported_model) if dropped else "",
        kept_rows=kept, model=model, reported_model=reported_model, form=form,
        stepper=stepper, controls=controls,
    )  # fmt: skip


#: Why a run in joint coordinates drops rows (:func:`~jaxmbd.joint_space.run.planned_rows`).
_JOINT_DROPPED = (
    "they depend on the other rows at the start (pivoted QR of their Jacobian): the tree "
    "holds them by its structure; their multipliers are zero"
)


def _absolute_checks(form: AbstractFormulation, kept) -> list[str]:
    """The checks of a run in an absolute formulation: those made while planning, then
    those of the run."""
    checks = [
        "actuators: no activation dynamics with given controls or a policy",
        "equalities: none soft",
        "model: nothing that only joint coordinates express",
        "redundant rows (redundant=)",
        "start: Euler angles off the chart singularity",
        "save_every: divides the steps",
        "run: a consistent start (positions, velocities, accelerations, multipliers)",
        "run: each step's Newton status",
    ]
    if kept is not None:
        checks.append("run: the dropped rows' drift")
    if form.has_chart_singularity:
        checks.append("run: steps at the chart singularity")
    return checks


__all__ = [
    "Plan",
    "Refusal",
    "Treated",
    "absolute_only_requests",
    "absolute_refusals",
    "contact_treatment",
    "default_formulation",
    "equality_treatment",
    "joint_refusals",
    "limits_treatment",
    "model_formulation",
    "plan_simulation",
    "refusal_message",
    "run_defaults",
    "treated_model",
]
