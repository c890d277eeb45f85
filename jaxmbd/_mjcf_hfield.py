"""MuJoCo's height fields (``hfield`` geoms) as ground shapes: one convex prism per triangle.

MuJoCo collides a convex geom with a height field prism by prism (``engine_collision_convex.c``,
``mjc_ConvexHField``): the grid of ``nrow`` x ``ncol`` elevations (``hfield_data`` in [0, 1]
times ``size[2]``, over x in [-size[0], size[0]], y in [-size[1], size[1]] of the geom
frame) splits each cell (r, c-1)-(r+1, c) into the triangles {(c-1, r+1), (c-1, r),
(c, r+1)} and {(c-1, r), (c, r+1), (c, r)}, each the top of a prism down to the base
z = -size[3], and each prism that the geom penetrates gives one contact
(``mjc_penetration``). Here each prism is a ground shape, the convex hull of its six
vertices (:func:`jaxmbd.geometry.mesh`), so that the support-function narrow phases
(sphere, capsule, box, cylinder, ellipsoid and mesh against a mesh: one contact each) give
MuJoCo's contacts prism by prism. Grids of more than :data:`MAX_PRISMS` prisms are left
out (named in the importer's warning): every prism is a shape pair of its own.
"""

from __future__ import annotations

import numpy as np

from . import geometry as G

#: The most prisms (2 (nrow - 1) (ncol - 1)) a height field may have to be mapped.
MAX_PRISMS = 2048

# the prism's faces: top (0, 1, 2), base (3, 4, 5), three sides
_FACES = np.array([[0, 1, 2], [3, 5, 4], [0, 3, 4], [0, 4, 1], [1, 4, 5], [1, 5, 2],
                   [2, 5, 3], [2, 3, 0]])  # fmt: skip


def hfield_prisms(m, d, g) -> list | None:
    """The prisms of the height field geom ``g`` at the pose of ``d`` as ground shapes
    (global), or None for a grid of more than :data:`MAX_PRISMS`."""
    h = int(m.geom_dataid[g])
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    if 2 * (nrow - 1) * (ncol - 1) > MAX_PRISMS:
        return None
    size = np.asarray(m.hfield_size[h], dtype=np.float64)
    adr = int(m.hfield_adr[h])
    data = np.asarray(m.hfield_data[adr : adr + nrow * ncol], dtype=np.float64)
    height = data.reshape(nrow, ncol) * size[2]
    dx, dy = 2.0 * size[0] / (ncol - 1), 2.0 * size[1] / (nrow - 1)
    pos, R = np.asarray(d.geom_xpos[g]), np.asarray(d.geom_xmat[g]).reshape(3, 3)

    def vertex(c, r, top):
        z = height[r, c] if top else -size[3]
        return np.array([dx * c - size[0], dy * r - size[1], z])

    prisms = []
    for r in range(nrow - 1):
        for c in range(1, ncol):
            for tri in (((c - 1, r + 1), (c - 1, r), (c, r + 1)),
                        ((c - 1, r), (c, r + 1), (c, r))):  # fmt: skip
                local = np.array([vertex(*v, True) for v in tri]
                                 + [vertex(*v, False) for v in tri])  # fmt: skip
                V = local @ R.T + pos
                centre = V.mean(axis=0)
                prisms.append(G.mesh(V - centre, _FACES, pos=centre, color=None))
    return prisms
