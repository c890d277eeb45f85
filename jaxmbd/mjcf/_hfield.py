"""MuJoCo's height fields (``hfield`` geoms) as height field shapes (:func:`jaxmbd.geometry.
height_field`): the elevations ``hfield_data`` (in [0, 1], MuJoCo's normalised data) times
``size[2]`` over x in [-size[0], size[0]], y in [-size[1], size[1]] of the geom frame, the
prisms down to z = -size[3] (documentation, XML reference, ``hfield``). They collide with
every convex geom as MuJoCo's ``mjc_ConvexHField`` (:mod:`jaxmbd.contact.height_field`:
the prisms of a window of cells under each geom, whatever the size of the field)."""

from __future__ import annotations

import numpy as np

from .. import geometry as G


def hfield_shape(m, d, g, *, color=None, collide=True):
    """The height field geom ``g`` as a shape at its global pose in ``d``."""
    h = int(m.geom_dataid[g])
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    size = np.asarray(m.hfield_size[h], dtype=np.float64)
    adr = int(m.hfield_adr[h])
    data = np.asarray(m.hfield_data[adr : adr + nrow * ncol], dtype=np.float64)
    return G.height_field(
        data.reshape(nrow, ncol) * size[2], size[:2], size[3],
        pos=np.asarray(d.geom_xpos[g]), A=np.asarray(d.geom_xmat[g]).reshape(3, 3),
        color=color, collide=collide,
    )  # fmt: skip
