"""The ``limits=`` option of the analyses: how a model's joint limits act in a run.

``None`` (the default): as the integrator treats them (a compliant spring-damper,
:mod:`jaxmbd.forces.joint_limits`; ``moreau_jean`` makes them hard stops). "compliant": the
spring-damper (refused with ``moreau_jean``). "hard": unilateral stops with impacts, stepped
by ``moreau_jean`` (the default integrator then, and the only one). "none": the limits are
removed, the same model without its :class:`~jaxmbd.forces.joint_limits.JointLimits` elements (as
``contact="none"`` removes the contact pairs).
"""

from __future__ import annotations

import dataclasses

from ..forces.joint_limits import JointLimits
from ..integrators import INTEGRATORS, MoreauJean
from ..tendons.tendon_forces import TendonForces

LIMIT_OPTIONS = ("compliant", "hard", "none")


def with_limits(model, limits: str | None, *, where: str = "simulate", hard: bool = False):
    """``model`` as a run with ``limits`` sees it: without its joint-limit elements for
    "none", else unchanged (a ValueError names the options for any other value; "hard" only
    where the caller has an integrator for it, ``hard=True``: :func:`~jaxmbd.simulate`)."""
    if limits is None:
        return model
    if limits not in LIMIT_OPTIONS:
        raise ValueError(f"{where}: limits must be one of {list(LIMIT_OPTIONS)}, got {limits!r}")
    if limits == "hard" and not hard:
        raise ValueError(
            f"{where}: limits='hard' (unilateral stops with impacts) is an option of simulate "
            "only; use limits='compliant' or limits='none' here"
        )
    if limits != "none":
        return model
    forces = tuple(
        dataclasses.replace(f, limits=None, limited=())
        if isinstance(f, TendonForces) and f.limits is not None
        else f
        for f in model.forces
        if not isinstance(f, JointLimits)
    )  # the tendons' limits go with the joints'
    if len(forces) == len(model.forces) and all(
        a is b for a, b in zip(forces, model.forces, strict=True)
    ):
        return model
    return dataclasses.replace(model, forces=forces)


def _steps_hard_limits(integrator) -> bool:
    cls = INTEGRATORS.get(integrator) if isinstance(integrator, str) else type(integrator)
    return cls is not None and issubclass(cls, MoreauJean)


def limits_integrator(limits: str | None, integrator, *, where: str = "simulate"):
    """The integrator of a run with ``limits``: "hard" takes ``moreau_jean`` (the default
    then) and refuses any other; "compliant" refuses ``moreau_jean`` (whose limits are hard
    stops)."""
    if limits == "hard":
        if integrator is None:
            return MoreauJean.name
        if not _steps_hard_limits(integrator):
            raise ValueError(
                f"{where}: limits='hard' (unilateral stops with impacts) is stepped by "
                f"integrator='{MoreauJean.name}', not {integrator!r}; the other integrators "
                "take the compliant limits (limits='compliant' or None)"
            )
    if limits == "compliant" and integrator is not None and _steps_hard_limits(integrator):
        raise ValueError(
            f"{where}: integrator='{MoreauJean.name}' makes joint limits hard stops: pass "
            "limits='hard' (or None), or another integrator for limits='compliant'"
        )
    return integrator


__all__ = ["LIMIT_OPTIONS", "limits_integrator", "with_limits"]
