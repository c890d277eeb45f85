"""Exceptions raised by jaxmbd, each naming what is wrong and where."""

from __future__ import annotations


class ModelError(ValueError):
    """A model description is invalid (bad body, constraint, joint or field)."""


class ModelFileError(ModelError):
    """A model file cannot be read; the message names the file and the field."""

    def __init__(self, path, field: str | None, message: str):
        where = f"{path}" + (f", {field}" if field else "")
        super().__init__(f"{where}: {message}")
        self.path = path
        self.field = field


class SolverError(RuntimeError):
    """A Newton solve failed: the message names the time, the residual and the constraints."""


class AdjustmentWarning(UserWarning):
    """jaxmbd changed an input to make it usable (axes orthonormalised, the end time moved to
    the step grid); the message says what was given, what is used instead, and where."""


class RedundancyWarning(UserWarning):
    """A model's redundant constraint rows were dropped for a run; the message names them and
    the loop they close (see :mod:`jaxmbd.constraints.redundancy`)."""


class JointSpaceOnlyWarning(UserWarning):
    """An absolute formulation runs a model whose force elements also act on coordinates
    that only the ``"joint"`` formulation has (the hinges and slides inside a composition of
    MuJoCo joints that forms one library joint): it leaves those entries out; the message
    names the joints and why."""


class AssemblyWarning(UserWarning):
    """The consistent start moved the model's initial state by more than
    :data:`jaxmbd._checks.ASSEMBLY_TOLERANCE` (a body moved or turned to close the
    constraints, or velocities projected onto them), or a joint's point lies far from both
    of its bodies; the message names the bodies and how far."""
