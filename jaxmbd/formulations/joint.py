"""The ``"joint"`` formulation's name and declarations.

A model in joint coordinates is its kinematic tree (:mod:`jaxmbd.tree`) with loop-closing
constraints; it is stepped by its own explicit integrators (:mod:`jaxmbd.joint_space`),
not through the per-body interface of :class:`~jaxmbd.formulations.AbstractFormulation`,
so this class declares what :func:`jaxmbd.simulate` needs to route a run there."""

from __future__ import annotations

from typing import ClassVar

from .base import FormulationCapabilities


class JointCoordinates(FormulationCapabilities):
    """Joint coordinates (``formulation="joint"``): qpos/qvel of the model's kinematic tree."""

    name: ClassVar[str] = "joint"
    #: Runs go to :func:`jaxmbd.joint_space.run_joint_space` (the absolute formulations:
    #: False).
    runs_in_joint_space: ClassVar[bool] = True
    stores_own_coordinates: ClassVar[bool] = True
    #: Without contact pairs (smooth motion): RK4 with the Munthe-Kaas correction on the
    #: rotations of ball and free joints (fourth order on SO(3)), MuJoCo's RK4 from 4.0; on
    #: trees of hinges and slides the same step as ``"rk"``.
    default_integrator: ClassVar[str] = "rkmk"
    #: With contact pairs, a model built in code: the Lie group generalized-alpha step solved
    #: by Newton, as the absolute formulations take contact
    #: (:mod:`jaxmbd.joint_space.contact_step`).
    contact_integrator: ClassVar[str] = "gen_alpha"
    #: With jaxmbd's compliant contact pairs, a model read from a file (its tree is
    #: MuJoCo's): the linearly implicit Euler step with both force Jacobians, one solve a
    #: step as MuJoCo's (the contact's stiffness enters the step's matrix).
    file_contact_integrator: ClassVar[str] = "implicit"
    #: The integrators that step it (:data:`jaxmbd.joint_space.steppers.JOINT_STEPPERS`).
    integrators: ClassVar[tuple[str, ...]] = (
        "rk",
        "rkmk",
        "euler",
        "implicit",
        "implicitfast",
        "gen_alpha",
        "backward_euler",
        "moreau_jean",
    )

    @classmethod
    def integrator_of(cls, model) -> str:
        """The integrator of a run of ``model`` that names none. A model read from a file
        (carrying MuJoCo's constraint model): the file's ``integrator``, or where the run
        keeps jaxmbd's compliant contact pairs ``file_contact_integrator``. A model built in
        code: ``contact_integrator`` with contact pairs, else ``default_integrator``."""
        constraints = getattr(model, "constraint_model", None)
        if model.contacts is not None:
            return cls.contact_integrator if model.tree is None else cls.file_contact_integrator
        if constraints is not None:
            return constraints.integrator
        return cls.default_integrator

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        return frozenset({"joint_coordinates"})
