"""Formulations: how a body's configuration and velocity are represented (rA, rp, re, se3,
director, rotmat). Each declares its capabilities (:data:`CAPABILITIES`); integrators ask
for those, so a new formulation is one new class, registered here only to be named by a
string (an unregistered formulation object runs as well)."""

from .base import (
    CAPABILITIES,
    AbstractAutodiffFormulation,
    AbstractFormulation,
    DynamicsBlocks,
    FormulationCapabilities,
)
from .director import Director
from .joint import JointCoordinates
from .ra import RA
from .re import RE
from .rotmat import Rotmat
from .rp import RP
from .se3 import SE3

#: The formulations named by a string (``simulate(..., formulation="rA")``).
FORMULATIONS: dict[str, type[AbstractFormulation]] = {
    cls.name: cls for cls in (RA, RP, RE, SE3, Director, Rotmat)
}


def _defined_classes(name: str) -> list[type[AbstractFormulation]]:
    """Concrete formulation classes defined anywhere (also outside the package) that set
    ``name`` themselves."""
    found, todo = [], list(AbstractFormulation.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__dict__.get("name") == name and not getattr(cls, "__abstractmethods__", None):
            found.append(cls)
    return found


#: Formulations that run in joint space (not through :class:`AbstractFormulation`).
JOINT_SPACE_FORMULATIONS: dict[str, type[JointCoordinates]] = {
    JointCoordinates.name: JointCoordinates
}


def get_formulation(name) -> AbstractFormulation:
    """The formulation object for a name or an instance (returned as is).

    A name is looked up among the registered :data:`FORMULATIONS`, then among the other
    defined formulation classes (so that a Solution of a user's formulation finds its
    formulation again by ``sol.formulation``)."""
    if isinstance(name, FormulationCapabilities):
        return name
    if isinstance(name, str) and name in JOINT_SPACE_FORMULATIONS:
        return JOINT_SPACE_FORMULATIONS[name]()
    cls = FORMULATIONS.get(name) if isinstance(name, str) else None
    if cls is None and isinstance(name, str):
        defined = _defined_classes(name)
        if len(defined) > 1:
            raise ValueError(
                f"formulation name {name!r} is ambiguous: classes "
                f"{sorted(c.__qualname__ for c in defined)}; pass a formulation object"
            )
        cls = defined[0] if defined else None
    if cls is None:
        raise ValueError(
            f"unknown formulation {name!r}; choose one of "
            f"{sorted(FORMULATIONS) + sorted(JOINT_SPACE_FORMULATIONS)} or pass a "
            "formulation object (an AbstractFormulation instance)"
        )
    return cls()


def formulation_named(name) -> AbstractFormulation | None:
    """:func:`get_formulation` of a name, or None where no formulation has that name."""
    try:
        return get_formulation(name)
    except ValueError:
        return None


__all__ = [
    "AbstractFormulation",
    "AbstractAutodiffFormulation",
    "CAPABILITIES",
    "DynamicsBlocks",
    "RA",
    "RP",
    "RE",
    "SE3",
    "Director",
    "Rotmat",
    "FORMULATIONS",
    "JOINT_SPACE_FORMULATIONS",
    "JointCoordinates",
    "formulation_named",
    "get_formulation",
]
