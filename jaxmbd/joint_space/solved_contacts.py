"""The contacts of a run of MuJoCo's constraint model and their solved forces at each row,
kept on the Solution for the sensors that read them (``touch``): the contact slots
collided at each row's pose, with the forces of the row's solve decoded
(:mod:`jaxmbd.soft_constraints.contact_forces`)."""

from __future__ import annotations

import equinox as eqx
import jax

from .. import _config  # noqa: F401
from ..model import Model
from ..sensors import sensor_kind
from ..soft_constraints.contact_forces import ConstraintForces, solved_contact_forces
from ..soft_constraints.treatments import soft_constraints_of
from ..tree import KinematicTree, poses


def reads_contacts(model: Model) -> bool:
    """Whether a sensor of ``model`` reads the solved contacts of its contact pairs."""
    constraints = soft_constraints_of(model)
    return (
        model.sensors is not None
        and constraints is not None
        and bool(constraints.contacts)
        and any(sensor_kind(k).needs_contacts for k in model.sensors.kinds)
    )


@eqx.filter_jit  # one program per model structure
def solved_contacts(model: Model, tree: KinematicTree, qpos, row_forces) -> ConstraintForces:
    """:class:`ConstraintForces` at each row (leading axes of ``qpos`` (..., nq) and of the
    rows' solved forces ``row_forces`` (..., nefc), ``efc_force`` of each row's solve)."""
    constraints = soft_constraints_of(model)

    def one(q, force):
        p = poses(tree, q)
        return solved_contact_forces(constraints, p.x, p.R, force, q)

    for _ in range(qpos.ndim - 1):
        one = jax.vmap(one)
    return one(qpos, row_forces)


def soft_row_forces(stepper, outs):
    """(``outs`` of a run without the rows' forces of MuJoCo's constraint model, those
    forces (T, nefc) or None): they are no hard contact's or limits' forces, which
    ``sol.contact``, ``sol.limits`` and the sensors read from ``unilateral_forces``."""
    if stepper.resolves_impacts or not isinstance(outs[-1], dict):
        return outs, None
    extra = {k: v for k, v in outs[-1].items() if k != "unilateral_forces"}
    return ((*outs[:-1], extra) if extra else outs[:-1]), outs[-1].get("unilateral_forces")


def with_solved_contacts(model: Model, sol, row_forces):
    """``sol`` with :attr:`~jaxmbd.Solution.solved_contacts` where ``row_forces`` (from
    :func:`soft_row_forces`) are given and a sensor of ``model`` reads them."""
    if row_forces is None or not reads_contacts(model):
        return sol
    contacts = solved_contacts(model, sol.tree, sol.qpos, row_forces)
    return eqx.tree_at(lambda s: s.solved_contacts, sol, contacts, is_leaf=lambda x: x is None)


__all__ = ["reads_contacts", "soft_row_forces", "solved_contacts", "with_solved_contacts"]
