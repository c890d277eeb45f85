"""Time integrators, one file each (DESIGN section 1): each owns its state pytree and
discretises the h-free equations of a formulation."""

from __future__ import annotations

import functools
import inspect

from ..newton import get_newton
from .backward_euler import BackwardEuler
from .base import (
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
from .munthe_kaas import MuntheKaas
from .runge_kutta import RungeKutta
from .tableau import TABLEAUS, ButcherTableau, get_tableau

INTEGRATORS: dict[str, type[AbstractIntegrator]] = {
    "backward_euler": BackwardEuler,
    "gen_alpha": GeneralizedAlpha,
}
INTEGRATORS["rkmk"] = MuntheKaas
INTEGRATORS["energy_momentum"] = EnergyMomentum
INTEGRATORS["rk"] = RungeKutta

#: The integrator used when none is named, per formulation (accuracy per unit of run time).
DEFAULT_INTEGRATOR = {"rA": "gen_alpha", "rp": "gen_alpha", "re": "gen_alpha"}
DEFAULT_INTEGRATOR["se3"] = "rkmk"
DEFAULT_INTEGRATOR["director"] = "energy_momentum"
DEFAULT_INTEGRATOR["rotmat"] = "rk"

#: Options used when none is given, per (formulation, integrator). The reused matrix is the
#: fastest Newton variant and every one of its steps is verified; re's chart singularity
#: (theta = 0, pi) makes the matrix exactly singular where only a fresh matrix's
#: minimum-norm solve steps over it, and there the stabilised variant's velocity projection
#: (G singular in eps) picks a wrong split of the rates, so re defaults to full Newton and
#: the index-3 variant, which pass it (the slider crank's crank hits theta = 0 on the grid).
DEFAULT_OPTIONS = {
    ("rA", "backward_euler"): {"newton": "reuse"},
    ("rp", "backward_euler"): {"newton": "reuse"},
    ("re", "backward_euler"): {"newton": "full"},
    ("rA", "gen_alpha"): {"newton": "reuse"},
    ("rp", "gen_alpha"): {"newton": "reuse"},
    ("re", "gen_alpha"): {"newton": "full", "variant": "index3"},
}


def valid_pairs() -> list[tuple[str, str]]:
    """(formulation, integrator) pairs that :func:`jaxmbd.simulate` accepts."""
    return [(f, name) for name, cls in INTEGRATORS.items() for f in cls.formulations]


@functools.cache
def _options_of(cls) -> list[str]:
    return [p for p in inspect.signature(cls).parameters if p not in ("self",)]


def get_integrator(integrator, formulation: str, **options) -> AbstractIntegrator:
    """The integrator object for a name (with its options) or an instance; checks the pair.

    Options of the implicit integrators: ``newton`` ("full", "modified", "reuse" or a solver
    object), ``max_iter``, ``tol``, ``linear_solver`` ("auto", "dense", "structured": backward
    Euler and gen_alpha); gen_alpha adds ``rho_inf`` and ``variant``.
    """
    options = {k: v for k, v in options.items() if v is not None}
    if isinstance(integrator, AbstractIntegrator):
        if options:
            raise ValueError(
                f"options {sorted(options)} given with an integrator object; set them on it"
            )
        obj = integrator
    else:
        if integrator is None:
            integrator = DEFAULT_INTEGRATOR.get(formulation)
        cls = INTEGRATORS.get(integrator) if isinstance(integrator, str) else None
        if cls is None:
            raise ValueError(
                f"unknown integrator {integrator!r}; choose one of {sorted(INTEGRATORS)}"
            )
        options = {**DEFAULT_OPTIONS.get((formulation, integrator), {}), **options}
        if issubclass(cls, AbstractImplicitIntegrator):
            max_iter = options.pop("max_iter", 25)
            options["newton"] = get_newton(options.get("newton", "reuse"), max_iter=max_iter)
        allowed = _options_of(cls)
        unknown = sorted(set(options) - set(allowed) - {"max_iter"})
        if unknown:
            raise ValueError(
                f"integrator {integrator!r} has no option(s) {unknown}; its options are "
                f"{sorted(set(allowed) | ({'max_iter'} if 'newton' in allowed else set()))}"
            )
        obj = cls(**options)
    if formulation not in obj.formulations:
        pairs = ", ".join(f"({f}, {i})" for f, i in valid_pairs())
        raise ValueError(
            f"integrator {obj.name!r} cannot step formulation {formulation!r}; "
            f"valid (formulation, integrator) pairs: {pairs}"
        )
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
    "get_integrator",
    "get_tableau",
    "implicit_step",
    "valid_pairs",
]
