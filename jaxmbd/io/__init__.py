"""Model files: :func:`load_model` reads jaxmbd's own schema (:mod:`jaxmbd.io.schema`),
the published files of the paper (:mod:`jaxmbd.io.published`) and MJCF / URDF robots
(:mod:`jaxmbd.mjcf`); :func:`save_model` writes the own schema (:mod:`jaxmbd.io.save_json`)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ModelError, ModelFileError
from ..mjcf import load_robot
from ..model import Model
from ..model.drivers import ExpressionError
from ._read import _read_json
from .load_json import _load_own
from .published import _load_published
from .save_json import save_model
from .schema import FORMAT

__all__ = ["FORMAT", "load_model", "save_model"]


def load_model(
    path, *, masses: dict | None = None, drivers: dict | None = None, **robot_options
) -> Model:
    """Load a model file: jaxmbd's own schema, a published SimEngineMBD/sim_engine_3d file,
    or an MJCF (``.xml``, ``.mjcf``) / URDF (``.urdf``) robot through MuJoCo's parser
    (:func:`jaxmbd.mjcf.load_robot`; option ``keyframe=``), also given as a ``mujoco.MjSpec``
    (a model edited in code).

    ``masses``: for published files, ``{body name: (mass, inertia)}``; ``inertia`` is 3
    principal moments or a 3x3 body-frame matrix. ``drivers``: ``{constraint name:
    expression}`` replaces f(t) of published constraints (some files leave the driver f = 0
    and set it in the authors' Python code).
    """
    mujoco = sys.modules.get("mujoco")  # an MjSpec exists only once mujoco is imported
    if mujoco is not None and isinstance(path, mujoco.MjSpec):
        return load_robot(path, **robot_options)
    path = Path(path)
    if path.suffix.lower() in (".xml", ".mjcf", ".urdf"):
        return load_robot(path, **robot_options)
    if robot_options:
        raise TypeError(f"load_model: options {sorted(robot_options)} apply to MJCF/URDF files")
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ModelFileError(path, None, "top level must be a JSON object")
    try:
        if data.get("format") == FORMAT:
            return _load_own(path, data)
        if "bodies" in data and "constraints" in data:
            return _load_published(path, data, masses or {}, drivers or {})
    except ModelFileError:
        raise
    except (ModelError, ExpressionError) as err:
        raise ModelFileError(path, None, str(err)) from None
    raise ModelFileError(
        path,
        "format",
        f'unknown model format; expected "format": "{FORMAT}" or a '
        "published SimEngineMBD file with 'bodies' and 'constraints'",
    )


# ----------------------------------------------------------------------------- own schema
