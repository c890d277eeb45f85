"""MJCF fluid forces (``<option density viscosity wind>``, ``<geom fluidshape fluidcoef>``)
as one :class:`jaxmbd.forces.fluid.FluidForce`.

As MuJoCo's ``mj_fluid`` (``engine_passive.c``): nothing when density and viscosity are
both zero, or when the spring and damper flags are both disabled (``mj_passive`` then
skips every passive force); else every MuJoCo body of positive mass that moves is an
inertia box, unless one of its geoms has ``fluidshape="ellipsoid"``, and then each such
geom is an ellipsoid (the body's other geoms feel nothing). A body merged into its parent
(no joints) keeps its own box or ellipsoids, fixed on the body it is merged into. Box
sides come from ``body_mass`` and ``body_inertia`` (principal, frame ``ximat``), the
ellipsoids' coefficients and added masses from ``geom_fluid``."""

from __future__ import annotations

import numpy as np

from ..build import ModelBuilder
from ..compiled.host_arrays import device_array
from ..forces.fluid import MINVAL, EllipsoidParts, InertiaBoxParts, fluid_force, inertia_box_sides
from ._flags import passive_forces_off

#: geom_fluid's layout: the interaction flag, five coefficients, virtual mass, inertia
_COEFFICIENTS = slice(0, 6)
_VIRTUAL_MASS = slice(6, 9)
_VIRTUAL_INERTIA = slice(9, 12)


#: MuJoCo's ``mju_geomSemiAxes`` of the geom types whose semi-axes are not their sizes,
#: by ``mjtGeom`` name.
_SEMIAXES = {
    "mjGEOM_SPHERE": lambda size: np.full(3, size[0]),
    "mjGEOM_CAPSULE": lambda size: np.array([size[0], size[0], size[1] + size[0]]),
    "mjGEOM_CYLINDER": lambda size: np.array([size[0], size[0], size[1]]),
}


def _semiaxes(mujoco, m, g: int) -> np.ndarray:
    """MuJoCo's ``mju_geomSemiAxes``."""
    size = np.asarray(m.geom_size[g], dtype=np.float64)
    of = _SEMIAXES.get(mujoco.mjtGeom(int(m.geom_type[g])).name, lambda size: size.copy())
    return of(size)


def add_fluid(mujoco, m, d, builder: ModelBuilder, owner, body_names, frame) -> None:
    """Add the model's fluid forces to ``builder`` (see the module docstring). ``d``:
    MuJoCo's data at the reference pose; ``owner[k]``: the moving body that MuJoCo body k
    belongs to (-1: the ground); ``frame[b]``: its (centre of mass, rotation)."""
    if not (m.opt.density or m.opt.viscosity) or passive_forces_off(m):
        return
    boxes: dict[str, list] = {"body": [], "point": [], "rotation": [], "sides": []}
    ellipsoids: dict[str, list] = {"body": [], "point": [], "rotation": [], "semiaxes": [],
                                   "coefficients": [], "virtual_mass": [],
                                   "virtual_inertia": []}  # fmt: skip
    fluid = np.asarray(m.geom_fluid, dtype=np.float64).reshape(m.ngeom, -1)

    def place(parts, o, position, rotation):
        com, A = frame[o]
        parts["body"].append(builder.body_index(body_names[o]))
        parts["point"].append(A.T @ (np.asarray(position) - com))
        parts["rotation"].append(A.T @ np.asarray(rotation).reshape(3, 3))

    for k in range(1, m.nbody):
        o = int(owner[k])
        if o < 0 or m.body_mass[k] < MINVAL:
            continue
        geoms = range(m.body_geomadr[k], m.body_geomadr[k] + m.body_geomnum[k])
        if not any(fluid[g, 0] > 0 for g in geoms):
            place(boxes, o, d.xipos[k], d.ximat[k])
            boxes["sides"].append(inertia_box_sides(m.body_mass[k], m.body_inertia[k]))
            continue
        for g in geoms:
            if fluid[g, 0] == 0:
                continue
            place(ellipsoids, o, d.geom_xpos[g], d.geom_xmat[g])
            ellipsoids["semiaxes"].append(_semiaxes(mujoco, m, g))
            ellipsoids["coefficients"].append(fluid[g, _COEFFICIENTS])
            ellipsoids["virtual_mass"].append(fluid[g, _VIRTUAL_MASS])
            ellipsoids["virtual_inertia"].append(fluid[g, _VIRTUAL_INERTIA])

    def parts(kind, rows):
        if not rows["body"]:
            return None
        arrays = {key: device_array(np.asarray(v, dtype=np.float64))
                  for key, v in rows.items() if key != "body"}  # fmt: skip
        return kind(body=tuple(rows["body"]), **arrays)

    builder.add_force(
        fluid_force(
            density=m.opt.density, viscosity=m.opt.viscosity, wind=np.array(m.opt.wind),
            boxes=parts(InertiaBoxParts, boxes), ellipsoids=parts(EllipsoidParts, ellipsoids),
            where="MJCF option density/viscosity/wind",
        )
    )  # fmt: skip
