"""The solved row forces of a run of MuJoCo's constraint model, kept on the Solution for the
sensors that read its contacts (``touch``): ``sol.solved_contacts`` collides the contact
slots at each row's pose and decodes the row's forces when read
(:mod:`jaxmbd.soft_constraints.contact_forces`)."""

from __future__ import annotations

from .. import _config  # noqa: F401
from ..model import Model
from ..sensors import sensor_kind
from ..soft_constraints.treatments import soft_constraints_of


def reads_contacts(model: Model) -> bool:
    """Whether a sensor of ``model`` reads the solved contacts of its contact pairs."""
    constraints = soft_constraints_of(model)
    return (
        model.sensors is not None
        and constraints is not None
        and bool(constraints.contacts)
        and any(sensor_kind(k).needs_contacts for k in model.sensors.kinds)
    )


def soft_row_forces(stepper, outs):
    """(``outs`` of a run without the rows' forces of MuJoCo's constraint model, those
    forces (T, nefc) or None): they are no hard contact's or limits' forces, which
    ``sol.contact``, ``sol.limits`` and the sensors read from ``unilateral_forces``."""
    if stepper.resolves_impacts or not isinstance(outs[-1], dict):
        return outs, None
    extra = {k: v for k, v in outs[-1].items() if k != "unilateral_forces"}
    return ((*outs[:-1], extra) if extra else outs[:-1]), outs[-1].get("unilateral_forces")


def kept_row_forces(model: Model, row_forces):
    """``row_forces`` (from :func:`soft_row_forces`) where a sensor of ``model`` reads the
    solved contacts (:attr:`~jaxmbd.Solution.solved_contacts`, found from them when read),
    else None: what the Solution keeps as ``soft_row_forces``."""
    if row_forces is None or not reads_contacts(model):
        return None
    return row_forces


__all__ = ["kept_row_forces", "reads_contacts", "soft_row_forces"]
