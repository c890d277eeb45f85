"""What the joint formulation does not take: the requests and integrator options of an
analysis that only the absolute formulations run, and the ``ValueError`` that names them with
the formulation that takes them (:func:`~jaxmbd.analysis.plan.default_formulation`,
``static_equilibrium``, ``linearize``)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .. import _config  # noqa: F401
from ..formulations import FORMULATIONS
from ..formulations.joint import JointCoordinates
from ..integrators import INTEGRATORS, AbstractIntegrator, valid_pairs
from ..joint_space import contact_step as joint_contact
from ..joint_space.steppers import get_stepper
from ..model import Model


def absolute_only_requests(*, redundant: str = "drop", save_every: int = 1, checkpoint=None,
                           policy=None, sensor_key=None,
                           chunk_size=None) -> tuple[str, ...]:  # fmt: skip
    """The requests of an analysis that only the absolute formulations run, as the call
    wrote them (``"save_every=10"``), for :func:`default_formulation` and the joint
    formulation's refusals. The joint formulation keeps every step in one program (no
    ``save_every``, ``chunk_size``, ``checkpoint``), drops the rows that depend on the
    others itself (no ``redundant="error"``) and observes a policy's sensors without
    their noise (no ``sensor_key`` with a policy)."""
    asked = {
        f"save_every={save_every!r}": save_every != 1,
        f"chunk_size={chunk_size!r}": chunk_size is not None,
        f"checkpoint={checkpoint!r}": bool(checkpoint),
        f"redundant={redundant!r}": redundant != "drop",
        "sensor_key= with a policy": policy is not None and sensor_key is not None,
    }
    return tuple(name for name, on in asked.items() if on)


class Refusal(NamedTuple):
    """A request that the joint formulation does not take (:func:`joint_refusals`,
    :func:`absolute_refusals`): ``what``, as the call wrote it (``"save_every=10"``);
    ``of``, whose it is ("an option of the absolute formulations"); ``takers``, the
    formulations that take it (registry order); ``instead``, a way to keep the joint
    formulation that has it, or ""."""

    what: str
    of: str
    takers: tuple[str, ...]
    instead: str = ""


def _absolute_formulations() -> tuple[str, ...]:
    return tuple(n for n, c in FORMULATIONS.items() if not c.runs_in_joint_space)


def absolute_refusals(absolute_only: tuple[str, ...]) -> tuple[Refusal, ...]:
    """The refusals of :func:`absolute_only_requests`' requests: every absolute formulation
    takes them."""
    takers = _absolute_formulations()
    return tuple(Refusal(what, "an option of the absolute formulations", takers)
                 for what in absolute_only)  # fmt: skip


#: Fields of an integrator class that are no options.
_NOT_OPTIONS = frozenset({"name", "requires", "resolves_impacts"})


def _option_takers(integrator, key: str) -> tuple[str, ...]:
    """The absolute formulations whose ``integrator`` (a name; None: each one's default)
    has the option ``key``."""
    pairs = valid_pairs()
    takers = []
    for name in _absolute_formulations():
        chosen = FORMULATIONS[name].default_integrator if integrator is None else integrator
        cls = INTEGRATORS.get(chosen)
        fields = set(getattr(cls, "__dataclass_fields__", {})) - _NOT_OPTIONS
        if (name, chosen) in pairs and key in fields:
            takers.append(name)
    return tuple(takers)


def _shown(value) -> str:
    """An option's value as an error shows it: its repr where short, else its type."""
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def joint_refusals(model: Model, integrator=None, options=None) -> tuple[Refusal, ...]:
    """What of ``integrator`` (a name, an object, or None: the joint formulation's own for
    ``model``, ``JointCoordinates.integrator_of``) and its ``options`` (None values count
    as absent) the joint formulation does not take, each with the absolute formulations
    that take it. An integrator or option that no formulation has is left to the run's
    own error."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if integrator is None and not options:  # a plain call's case: nothing to refuse
        return ()
    absolute = _absolute_formulations()
    if isinstance(integrator, AbstractIntegrator):
        takers = tuple(f for f in absolute if not integrator.missing(FORMULATIONS[f]))
        what = f"integrator={type(integrator).__name__}(...)"
        return (Refusal(what, "an integrator of the absolute formulations", takers),)
    if isinstance(integrator, str) and integrator not in JointCoordinates.integrators:
        takers = tuple(f for f, i in valid_pairs() if i == integrator and f in absolute)
        if not takers:  # no formulation has it: the run's error lists the integrators
            return ()
        return (Refusal(f"integrator={integrator!r}", "an integrator of the absolute "
                        "formulations", takers),)  # fmt: skip
    try:
        stepper = get_stepper(
            JointCoordinates.integrator_of(model) if integrator is None else integrator
        )
    except ValueError:  # not a joint step: the run's error names it
        return ()
    fields = {f.name for f in dataclasses.fields(stepper)} | set(joint_contact.SUBSTEP_OPTIONS)
    asked = sorted(k for k in options if k not in fields)
    name = None if integrator is None else stepper.name
    refused = []
    for key in asked:
        takers = _option_takers(name, key)
        if not takers:  # no integrator has it: the run's error lists the options
            continue
        having = [i for i in JointCoordinates.integrators
                  if key in {x.name for x in dataclasses.fields(get_stepper(i))}]  # fmt: skip
        instead = (f"integrator={having[0]!r}, the joint formulation's step that has it"
                   if having and integrator is None else "")  # fmt: skip
        of = (
            "an option of the absolute formulations' integrators"
            if integrator is None
            else f"an option of integrator {stepper.name!r} in the absolute formulations"
        )
        refused.append(Refusal(f"{key}={_shown(options[key])}", of, takers, instead))
    return tuple(refused)


def refusal_message(refused: tuple[Refusal, ...], model: Model, *, where: str,
                    named: bool) -> str:  # fmt: skip
    """The ``ValueError`` message of requests that the joint formulation does not take:
    each request, whose it is and the formulations that take it, then the ``formulation=``
    to pass (the first formulation that takes them all). ``named``: the run named
    "joint"; else it is the default of ``model``. A model that only joint coordinates
    express is told to leave them out."""
    joint = ("formulation 'joint'" if named
             else f"the default joint formulation of model '{model.name}'")  # fmt: skip
    parts = []
    for r in refused:
        takers = ", ".join(f'"{t}"' for t in r.takers)
        parts.append(f"{r.what} is {r.of} (formulation={takers}), not of {joint}")
    common = [t for t in refused[0].takers if all(t in r.takers for r in refused)]
    choice = (common or list(refused[0].takers))[0]
    it = "it" if len(refused) == 1 else "them"
    if model.joint_space_only:
        tail = (
            f"model '{model.name}' runs in formulation 'joint' only ("
            + "; ".join(model.joint_space_only)
            + f"): leave {it} out"
        )
    else:
        tail = f'pass formulation="{choice}" to use {it}'
        instead = [r.instead for r in refused if r.instead]
        if len(instead) == len(refused) == 1:
            tail += f", or {instead[0]}"
    return f"{where}: " + "; ".join(parts) + f"; {tail}"
