"""Orientation formulations: rA (rotation matrix), rp (Euler parameters), re (Euler angles)."""

from .base import AbstractAutodiffFormulation, AbstractFormulation, DynamicsBlocks
from .director import Director
from .ra import RA
from .re import RE
from .rotmat import Rotmat
from .rp import RP
from .se3 import SE3

FORMULATIONS = {"rA": RA, "rp": RP, "re": RE}
FORMULATIONS["director"] = Director
FORMULATIONS["se3"] = SE3
FORMULATIONS["rotmat"] = Rotmat


def get_formulation(name) -> AbstractFormulation:
    """The formulation object for a name ("rA", "rp", "re") or an instance."""
    if isinstance(name, AbstractFormulation):
        return name
    try:
        return FORMULATIONS[name]()
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown formulation {name!r}; choose one of {sorted(FORMULATIONS)}"
        ) from None


__all__ = [
    "AbstractFormulation",
    "AbstractAutodiffFormulation",
    "DynamicsBlocks",
    "RA",
    "RP",
    "RE",
    "SE3",
    "Director",
    "Rotmat",
    "FORMULATIONS",
    "get_formulation",
]
