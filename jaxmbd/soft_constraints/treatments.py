"""``contact="soft"`` and ``limits="soft"``: which parts of a file's constraint model a run
solves as MuJoCo does (:class:`~jaxmbd.soft_constraints.model.MujocoConstraints`).

"soft" contact: the file's geom pairs become MuJoCo's contact rows, and jaxmbd's compliant
contact element leaves the run. "soft" limits: the joints' and tendons' limits and the dofs'
and tendons' friction loss become MuJoCo's limit and friction-loss rows, and the compliant
limit springs and the regularised friction loss (of :class:`~jaxmbd.forces.JointDynamics`
and :class:`~jaxmbd.tendons.tendon_forces.TendonForces`) leave the run. The rows of both are
solved together, in one convex problem per step, with the run's soft equality constraints
(``equality="soft"``, :mod:`jaxmbd.soft_constraints.equalities`); a part not "soft" keeps
the treatment its option names. A model read from a file runs all of them by default, with
the file's step (:func:`model_defaults`, :func:`default_step`)."""

from __future__ import annotations

import dataclasses

import jax

from .. import _config  # noqa: F401
from ..errors import ModelError
from ..forces.joint_dynamics import JointDynamics
from ..forces.quaternion_joint_dynamics import QuaternionJointDynamics
from ..tendons.tendon_forces import TendonForces

SOFT = "soft"


def _without_friction_loss(force):
    if isinstance(force, JointDynamics | QuaternionJointDynamics | TendonForces):
        return dataclasses.replace(force, friction_loss=0.0 * force.friction_loss)
    return force


def with_soft(model, *, contact, limits, where: str = "simulate"):
    """(model, contact, limits): ``model`` with the parts that the options call "soft" marked
    in its constraint model, and the options that remain for the other treatments ("soft"
    becomes "none": the compliant elements of those parts leave the run). A model without a
    constraint model (built in code) refuses "soft" with a ModelError."""
    treats = set()
    if contact == SOFT:
        treats.add("contact")
        contact = "none"
    if limits == SOFT:
        treats.add("limits")
        limits = "none"
    if not treats:
        return model, contact, limits
    constraints = model.constraint_model
    if constraints is None:
        options = " and ".join(f"{k}='soft'" for k in sorted(treats))
        raise ModelError(
            f"{where}: {options} is MuJoCo's constraint model of a model file, and model "
            f"'{model.name}' was built in code; use contact='compliant' or 'hard' and "
            "limits='compliant' or 'hard'"
        )
    if "limits" in treats:
        model = dataclasses.replace(model, forces=tuple(map(_without_friction_loss, model.forces)))
    constraints = dataclasses.replace(constraints, treats=frozenset(treats))
    return dataclasses.replace(model, constraint_model=constraints), contact, limits


def model_defaults(model, *, contact, limits, equality) -> tuple:
    """(contact, limits, equality): the options of a run in joint coordinates with those left
    None resolved to ``model``'s own treatment. A model that carries MuJoCo's constraint model
    (read from MJCF or URDF) runs it, as MuJoCo runs the file: its constraint model's
    ``default_treatment`` ("soft") for contact, limits and friction loss, and for the
    equality constraints where it has any; a part switched to another treatment leaves the
    others soft, solved together. A model built in code has none: its options stay None
    (compliant contact and limits, exact equality constraints)."""
    default = getattr(model.constraint_model, "default_treatment", None)
    if default is None:
        return contact, limits, equality
    contact = default if contact is None else contact
    limits = default if limits is None else limits
    if equality is None and model.equalities:
        equality = default
    return contact, limits, equality


def default_step(model, h, *, where: str = "simulate") -> float:
    """The step of a run: ``h``, or where it is None the file's ``timestep`` of a model that
    carries MuJoCo's constraint model (read from MJCF or URDF); any other model needs ``h``."""
    if h is not None:
        return h
    constraints = model.constraint_model
    if constraints is None:
        raise ValueError(
            f"{where}: pass the step size h= for model '{model.name}' (only a model read from "
            "MJCF or URDF defaults to its file's timestep)"
        )
    try:
        return constraints.timestep
    except (TypeError, jax.errors.ConcretizationTypeError):
        raise ValueError(
            f"{where}: model '{model.name}' carries its file's timestep as a traced or batched "
            "value; pass h="
        ) from None


def soft_constraints_of(model):
    """The constraint model a run of ``model`` solves, or None."""
    constraints = getattr(model, "constraint_model", None)
    if constraints is None or not constraints.active:
        return None
    return constraints


def large_batches(model) -> str:
    """How a batch of runs of ``model`` too large for tiles of members steps
    (:func:`jaxmbd.compiled.batch_lanes.batch_lanes`'s ``too_large``): ``"map"``, its members
    one after another, rather than ``"vmap"``, ``jax.vmap``'s chunks, for runs that solve
    MuJoCo's constraint model on the CPU, where a batched solve runs every member for the
    slowest one's iterations and selects per member in each. Batch of 64, random controls,
    ``jax.jit(jax.vmap(run))`` on the 2-core CPU, model-steps/s in turn against chunks:
    dm_control's humanoid 5.1k / 1.2k (200 steps), walker 29.1k / 15.4k, hopper 21.3k /
    16.7k, cheetah 19.4k / 14.4k, gymnasium's ant 5.7k / 3.6k (300 steps), and the
    compile 1.7x shorter; the environments step contact members so too
    (:attr:`jaxmbd.envs.ModelEnv.member_chunk`)."""
    in_turn = jax.default_backend() == "cpu" and soft_constraints_of(model) is not None
    return "map" if in_turn else "vmap"
