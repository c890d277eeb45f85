"""Which kernel collides which MuJoCo geom types, and which geom pairs ``mj_collision`` tests.

``KERNELS[(type1, type2)]`` is ``(kernel, slots)`` for MuJoCo's geom type numbers (mjtGeom)
with type1 <= type2, the order ``mj_collision`` puts a pair in (``pushGeomGeom``): geom1 is
the geom of lower type, and the normal points from geom1 to geom2. :func:`candidate_pairs`
lists, for an mjModel, the geom pairs MuJoCo's broad phase passes to its narrow phase, each
with the margin its collision function gets (margin plus gap).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ... import _config  # noqa: F401  (float64)
from ...compiled.flagged import on_flagged
from . import box, convex, primitive
from .common import Contacts

# MuJoCo's mjtGeom
PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH, SDF = range(9)
GEOM_NAMES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")

# MuJoCo's mjtDisableBit and mjtEnableBit values used here
_DSBL_CONSTRAINT = 1 << 0
_DSBL_CONTACT = 1 << 4
_DSBL_FILTERPARENT = 1 << 10
_DSBL_NATIVECCD = 1 << 17
_DSBL_MULTICCD = 1 << 19
_ENBL_OVERRIDE = 1 << 0

#: (type1, type2) -> (kernel, slots); slots is MuJoCo's ``mj_maxContact`` for the pair
#: (capsule-box: MuJoCo reserves 4, its collider returns at most 2).
KERNELS = {
    (PLANE, SPHERE): (primitive.plane_sphere, 1),
    (PLANE, CAPSULE): (primitive.plane_capsule, 2),
    (PLANE, ELLIPSOID): (primitive.plane_ellipsoid, 1),
    (PLANE, CYLINDER): (primitive.plane_cylinder, 4),
    (PLANE, BOX): (primitive.plane_box, 4),
    (SPHERE, SPHERE): (primitive.sphere_sphere, 1),
    (SPHERE, CAPSULE): (primitive.sphere_capsule, 1),
    (SPHERE, CYLINDER): (primitive.sphere_cylinder, 1),
    (SPHERE, BOX): (box.sphere_box, 1),
    (CAPSULE, CAPSULE): (primitive.capsule_capsule, 2),
    (CAPSULE, BOX): (box.capsule_box, 2),
    (BOX, BOX): (box.box_box, 8),
    # MuJoCo's general convex collider (native GJK/EPA, multi-contact) at MuJoCo's default
    # ccd_iterations and ccd_tolerance; see convex_options_supported
    **{pair: (convex.kernel(*pair), slots) for pair, slots in convex.PAIRS.items()},
}


def native_ccd_defaults(m) -> bool:
    """Whether mjModel m runs MuJoCo's native CCD (``mjDSBL_NATIVECCD`` clear) at the
    default ``ccd_iterations`` and ``ccd_tolerance``, which the ports take as static
    settings."""
    return (
        not int(m.opt.disableflags) & _DSBL_NATIVECCD
        and int(m.opt.ccd_iterations) == convex.ITERATIONS
        and float(m.opt.ccd_tolerance) == convex.TOLERANCE
    )


def convex_options_supported(m) -> bool:
    """Whether the kernels of ``mjc_Convex`` pairs collide as MuJoCo does for mjModel m:
    native CCD and multi-contact on (MuJoCo's defaults) at the default ccd options
    (:func:`native_ccd_defaults`)."""
    return native_ccd_defaults(m) and not int(m.opt.disableflags) & _DSBL_MULTICCD


def kernel_for(type1: int, type2: int):
    """(kernel, slots) for geom types type1 <= type2; KeyError for pairs without a kernel
    (height fields, meshes, SDFs)."""
    return KERNELS[(int(type1), int(type2))]


def collide(type1: int, type2: int, pos1, mat1, size1, pos2, mat2, size2, margin) -> Contacts:
    """The contacts of one geom pair of MuJoCo types type1 <= type2 (a static choice of
    kernel; the arrays may carry leading batch axes, which are vmapped)."""
    kernel, _ = kernel_for(type1, type2)
    batch = np.ndim(pos1) - 1
    for _ in range(batch):
        kernel = jax.vmap(kernel)
    return kernel(pos1, mat1, size1, pos2, mat2, size2, margin)


def program_key(type1: int, type2: int):
    """Pairs whose keys are equal collide in one program (:func:`collide_pairs`): every pair
    of ``mjc_Convex``'s kernels one key (their geom types become data), the others one key
    per type pair."""
    pair = (int(type1), int(type2))
    return "convex" if pair in convex.PAIRS else pair


def collide_pairs(types1, types2, pos1, mat1, size1, pos2, mat2, size2, margin, *,
                  block: int | None = None) -> Contacts:  # fmt: skip
    """The contacts of k geom pairs of one :func:`program_key`, types ``types1``,
    ``types2`` (k,) static, the other arguments with a leading axis of k: one vmapped
    kernel. Slots: the pairs' kernel's (convex pairs of several types: the most any of them
    has, the others' extra slots empty).

    ``block``: ``mjc_Convex``'s pairs (GJK, EPA and the multi-contact search, loops four
    deep) run only where their bounding spheres, grown by the margin, overlap (MuJoCo's
    first test in ``mj_collideGeoms``), gathered this many at a time
    (:func:`~jaxmbd.compiled.flagged.on_flagged`); the others have no contact, as the
    kernel would find. None: every pair through the kernel (no loop: what derivatives
    go through)."""
    types = sorted({(int(a), int(b)) for a, b in zip(types1, types2, strict=True)})
    if len({program_key(*t) for t in types}) != 1:
        raise ValueError(f"collide_pairs: geom types {types} do not share one program")
    args = (pos1, mat1, size1, pos2, mat2, size2, margin)
    if len(types) > 1 and block is None:
        return convex.collide_any(types1, types2, *args)
    kernel, slots = kernel_for(*types[0])
    if block is None or program_key(*types[0]) != "convex":
        return jax.vmap(kernel)(*args)
    kinds = convex.kinds_of(types1, types2)
    if len(types) > 1:  # the types as data: one program for every pair
        slots = max(convex.PAIRS[t] for t in types)
        kernel = functools.partial(convex.convex, slots=slots, kinds=kinds)
    else:
        kernel = functools.partial(_static_types, kernel)
    args = (jnp.asarray(types1), jnp.asarray(types2), *args)
    bound = jax.vmap(functools.partial(convex.rbound, kinds=kinds[0]))(
        jnp.asarray(types1), size1
    ) + jax.vmap(functools.partial(convex.rbound, kinds=kinds[1]))(jnp.asarray(types2), size2)
    apart = jnp.sqrt(jnp.sum((pos2 - pos1) ** 2, axis=-1)) - bound
    near = apart <= margin + 1e-9 * bound
    k = len(types1)
    none = Contacts(
        dist=jnp.broadcast_to(apart[:, None], (k, slots)),
        pos=jnp.broadcast_to((0.5 * (pos1 + pos2))[:, None], (k, slots, 3)),
        frame=jnp.broadcast_to(jnp.eye(3, dtype=pos1.dtype), (k, slots, 3, 3)),
        valid=jnp.zeros((k, slots), bool),
    )
    return on_flagged(kernel, near, args, block=block, fill=none)


def _static_types(kernel, type1, type2, *args):
    """A pair's kernel of static geom types, called with (unused) types as data."""
    del type1, type2
    return kernel(*args)


def candidate_pairs(m) -> dict[str, np.ndarray]:
    """The geom pairs MuJoCo's ``mj_collision`` hands to its narrow phase, as static arrays:
    ``geom1``, ``geom2`` (geom1 of the lower type, as MuJoCo swaps them), ``pair`` (the
    ``<contact><pair>`` index, -1 for a pair of the filters) and ``margin`` (what the
    collision function gets: margin + gap, MuJoCo's ``getMargin`` + ``getGap``).

    Filters, as MuJoCo's broad phase (``mj_broadphase``, ``filterBodyPair``) and
    ``filterCollisionPair`` apply them: none when contact or constraints are disabled; not
    the same weld body; not two bodies without degrees of freedom; not a weld body and its
    weld parent unless either is the world or ``filterparent`` is disabled; not an excluded
    body pair (``exclude_signature``, body ids); contype/conaffinity; explicit pairs always
    (their bodies' filters do not apply), and a geom pair listed explicitly is not repeated.
    What MuJoCo decides at run time (bounding spheres, AABBs, sleeping) is left to the
    kernels' margin tests. Pairs whose types have no kernel are listed too (see KERNELS).
    """
    empty = {k: np.zeros(0, dtype=int) for k in ("geom1", "geom2", "pair")}
    empty["margin"] = np.zeros(0)
    if int(m.opt.disableflags) & (_DSBL_CONSTRAINT | _DSBL_CONTACT):
        return empty
    override = bool(int(m.opt.enableflags) & _ENBL_OVERRIDE)
    filter_parent = not int(m.opt.disableflags) & _DSBL_FILTERPARENT
    geom_type = np.asarray(m.geom_type)
    body = np.asarray(m.geom_bodyid)
    weld = np.asarray(m.body_weldid)
    parent_weld = weld[np.asarray(m.body_parentid)[weld]]
    dofnum = np.asarray(m.body_dofnum)
    contype, conaffinity = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
    geom_margin, geom_gap = np.asarray(m.geom_margin), np.asarray(m.geom_gap)
    excluded = {int(s) for s in np.asarray(m.exclude_signature).ravel()}
    explicit = {
        frozenset((int(a), int(b)))
        for a, b in zip(np.asarray(m.pair_geom1), np.asarray(m.pair_geom2), strict=True)
    }

    rows = []  # (geom1, geom2, pair, margin)
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            b1, b2 = int(body[g1]), int(body[g2])
            w1, w2 = int(weld[b1]), int(weld[b2])
            if w1 == w2 or (dofnum[w1] == 0 and dofnum[w2] == 0):
                continue
            if filter_parent and w1 and w2 and (w1 == parent_weld[w2] or w2 == parent_weld[w1]):
                continue
            if (min(b1, b2) << 16) + max(b1, b2) in excluded:
                continue
            if frozenset((g1, g2)) in explicit:
                continue
            if not (contype[g1] & conaffinity[g2] or contype[g2] & conaffinity[g1]):
                continue
            margin = geom_margin[g1] + geom_margin[g2]
            margin = float(m.opt.o_margin) if override else margin
            rows.append((g1, g2, -1, margin + geom_gap[g1] + geom_gap[g2]))
    for k in range(m.npair):
        margin = float(m.opt.o_margin) if override else float(m.pair_margin[k])
        rows.append((int(m.pair_geom1[k]), int(m.pair_geom2[k]), k, margin + m.pair_gap[k]))

    if not rows:
        return empty
    geom1, geom2, pair, margin = (np.array(column) for column in zip(*rows, strict=True))
    swap = geom_type[geom1] > geom_type[geom2]
    geom1, geom2 = np.where(swap, geom2, geom1), np.where(swap, geom1, geom2)
    return {"geom1": geom1, "geom2": geom2, "pair": pair, "margin": margin.astype(float)}
