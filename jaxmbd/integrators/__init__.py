"""Time integrators, one file each (docs/design.md, section 1): each owns its state pytree and
discretises the h-free equations of a formulation."""

from __future__ import annotations

import functools
import inspect

from ..formulations import FORMULATIONS, JOINT_SPACE_FORMULATIONS, get_formulation
from ..newton import get_newton
from .backward_euler import BackwardEuler
from .base import (
    LINEAR_SOLVERS,
    THETA_H2,
    AbstractImplicitIntegrator,
    AbstractIntegrator,
    Discretisation,
    StartState,
    StepResult,
    default_tolerance,
    implicit_step,
)
from .energy_momentum import EnergyMomentum
from .generalized_alpha import GeneralizedAlpha
from .moreau_jean import MoreauJean
from .munthe_kaas import MuntheKaas
from .runge_kutta import RungeKutta
from .tableau import TABLEAUS, ButcherTableau, get_tableau

INTEGRATORS: dict[str, type[AbstractIntegrator]] = {
    cls.name: cls
    for cls in (BackwardEuler, GeneralizedAlpha, MuntheKaas, EnergyMomentum, RungeKutta, MoreauJean)
}

#: The integrator used when none is named, per formulation (each formulation's
#: ``default_integrator``: accuracy per unit of run time).
DEFAULT_INTEGRATOR = {name: cls.default_integrator for name, cls in FORMULATIONS.items()}


@functools.cache
def _options_of(cls) -> list[str]:
    return [p for p in inspect.signature(cls).parameters if p not in ("self",)]


def default_options(form, integrator) -> dict:
    """Options used when none is given for a formulation (object or class) and an
    integrator (class or name).

    Implicit integrators: the reused matrix is the fastest Newton variant and every one of
    its steps is verified. A chart with singularities (re: theta = 0, pi) makes the matrix
    exactly singular where only a fresh matrix's minimum-norm solve steps over it, and
    there the stabilised variant's velocity projection (G singular in the chart's
    coordinates) picks a wrong split of the rates, so such a formulation defaults to full
    Newton and the index-3 variant, which pass it (the slider crank's crank hits theta = 0
    on the grid). Other integrators: their own defaults."""
    cls = INTEGRATORS[integrator] if isinstance(integrator, str) else integrator
    if not issubclass(cls, AbstractImplicitIntegrator):
        return {}
    if not form.has_chart_singularity:
        return {"newton": "reuse"}
    return {"newton": "full", **({"variant": "index3"} if "variant" in _options_of(cls) else {})}


def valid_pairs() -> list[tuple[str, str]]:
    """(formulation, integrator) pairs of the registered names that :func:`jaxmbd.simulate`
    accepts: every integrator with every formulation that has the capabilities it requires."""
    pairs = [
        (f, name)
        for name, cls in INTEGRATORS.items()
        for f, form in FORMULATIONS.items()
        if cls.supports(form)
    ]
    return pairs + [(f, name) for f, cls in JOINT_SPACE_FORMULATIONS.items()
                    for name in cls.integrators]  # fmt: skip


#: :func:`default_options` of every valid pair that has some (documentation and tests).
DEFAULT_OPTIONS = {
    pair: options
    for pair in valid_pairs()
    if pair[0] in FORMULATIONS
    if (options := default_options(FORMULATIONS[pair[0]], pair[1]))
}


def _construct(cls, options: dict) -> AbstractIntegrator:
    """``cls(**options)``, refusing options it does not have with their valid names; the
    implicit integrators take ``max_iter`` for a Newton method given by name."""
    solver = options.get("linear_solver")
    if solver is not None and "linear_solver" in _options_of(cls) and solver not in LINEAR_SOLVERS:
        raise ValueError(
            f"integrator {cls.name!r}: linear_solver must be one of {LINEAR_SOLVERS}, got "
            f"{solver!r}"
        )
    allowed = set(_options_of(cls))
    implicit = issubclass(cls, AbstractImplicitIntegrator)
    unknown = sorted(set(options) - allowed - ({"max_iter"} if implicit else set()))
    if unknown:
        valid = sorted(allowed | ({"max_iter"} if implicit else set()))
        raise ValueError(
            f"integrator {cls.name!r} has no option(s) {unknown}; its options are {valid}"
        )
    if implicit:
        max_iter = options.pop("max_iter", None)
        newton = options.get("newton", "reuse")
        if max_iter is not None and not isinstance(newton, str):
            raise ValueError(
                f"integrator {cls.name!r}: max_iter is set on the newton object itself "
                f"({type(newton).__name__}(max_iter=...)), not as an option beside it"
            )
        options["newton"] = get_newton(newton, max_iter=25 if max_iter is None else max_iter)
    return cls(**options)


def get_integrator(integrator, formulation, **options) -> AbstractIntegrator:
    """The integrator object for a name (with its options) or an instance, for a formulation
    (object or name); checks that the integrator can step it (its required capabilities).

    Options of the implicit integrators: ``newton`` ("full", "modified", "reuse" or a solver
    object), ``max_iter`` (with a newton name), ``tol``, ``linear_solver`` ("auto", "dense",
    "small", "structured", "small_structured"); gen_alpha adds ``rho_inf`` and ``variant``.
    An option the integrator does not have or does not use raises ``ValueError`` naming the
    valid ones.
    """
    form = get_formulation(formulation)
    options = {k: v for k, v in options.items() if v is not None}
    if isinstance(integrator, AbstractIntegrator):
        if options:
            raise ValueError(
                f"options {sorted(options)} given with an integrator object; set them on it"
            )
        obj = integrator
    else:
        if integrator is None:
            integrator = form.default_integrator
        cls = INTEGRATORS.get(integrator) if isinstance(integrator, str) else None
        if cls is None:
            raise ValueError(
                f"unknown integrator {integrator!r}; choose one of {sorted(INTEGRATORS)}"
            )
        if cls.supports(form):
            options = {**default_options(form, cls), **options}
        obj = _construct(cls, options)
    missing = obj.missing(form)
    if missing:
        pairs = ", ".join(f"({f}, {i})" for f, i in valid_pairs())
        raise ValueError(
            f"integrator {obj.name!r} cannot step formulation {form.name!r}: it lacks the "
            f"capabilities {sorted(missing)}; valid (formulation, integrator) pairs: {pairs}"
        )
    obj.check_formulation(form)
    return obj


__all__ = [
    "THETA_H2",
    "default_tolerance",
    "AbstractImplicitIntegrator",
    "AbstractIntegrator",
    "BackwardEuler",
    "ButcherTableau",
    "DEFAULT_INTEGRATOR",
    "DEFAULT_OPTIONS",
    "EnergyMomentum",
    "Discretisation",
    "GeneralizedAlpha",
    "INTEGRATORS",
    "MuntheKaas",
    "RungeKutta",
    "StartState",
    "StepResult",
    "TABLEAUS",
    "default_options",
    "get_integrator",
    "get_tableau",
    "implicit_step",
    "valid_pairs",
]
