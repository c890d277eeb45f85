"""MuJoCo's constraint model of a file (:class:`jaxmbd.soft_constraints.MujocoConstraints`),
read from the compiled ``mjModel``: the candidate geom pairs (``mj_collision``'s broad-phase
filters, :func:`jaxmbd.contact.mujoco.candidate_pairs`) with ``mj_contactParam``'s mixed
numbers and the geoms' poses in their tree bodies' frames, the limited joints and tendons,
the dofs and tendons with friction loss (the tendons' geometry: jaxmbd's
:class:`~jaxmbd.tendons.Tendons` of the file, ``mj_tendon``), and ``opt``'s cone, impratio,
refsafe and solver settings. The file's equality constraints join the rows in a run that
makes them soft (:mod:`jaxmbd.soft_constraints.equalities`)."""

from __future__ import annotations

import jax
import numpy as np

from ..contact.height_field import window_of
from ..contact.mujoco.convex import PAIRS as CONVEX_PAIRS
from ..contact.mujoco.pairs import (
    GEOM_NAMES,
    KERNELS,
    candidate_pairs,
    convex_options_supported,
    native_ccd_defaults,
)
from ..soft_constraints.model import (
    SOLVER_METHODS,
    ContactGroup,
    MujocoConstraints,
    SolverSettings,
    TendonGeometry,
)
from ..soft_constraints.parameters import SoftOptions
from ..soft_constraints.rows import (
    DofFrictionSpec,
    JointLimitSpec,
    TendonFrictionSpec,
    TendonLimitSpec,
)
from ._contact import _mixed, _overridden
from ._equalities import _name

_DISABLE_WARMSTART = 1 << 9  # mjDSBL_WARMSTART (512)

#: the joint formulation's steps of MuJoCo's ``mjtIntegrator`` (its RK4 from 4.0 is the
#: Munthe-Kaas one)
_INTEGRATORS = {0: "euler", 1: "rkmk", 2: "implicit", 3: "implicitfast"}


def _pair_numbers(mujoco, m, g1: int, g2: int, pair: int):
    """(condim, friction (5,), solref, solreffriction, solimp, includemargin) of a candidate
    pair: an explicit ``<pair>``'s own, else ``mj_contactParam``'s mix of the two geoms'."""
    if pair >= 0:
        return (
            int(m.pair_dim[pair]),
            np.asarray(m.pair_friction[pair], dtype=float),
            np.asarray(m.pair_solref[pair], dtype=float),
            np.asarray(m.pair_solreffriction[pair], dtype=float),
            np.asarray(m.pair_solimp[pair], dtype=float),
            float(m.pair_margin[pair] - m.pair_gap[pair]),
        )
    mixed = _overridden(mujoco, m, _mixed(mujoco, m, g1, g2))
    friction = np.array([mixed.friction, mixed.friction, mixed.torsional, mixed.rolling,
                         mixed.rolling])  # fmt: skip
    return (
        mixed.condim,
        friction,
        np.asarray(mixed.solref, dtype=float),
        np.zeros(2),
        np.asarray(mixed.solimp, dtype=float),
        float(mixed.includemargin),
    )


def _local_pose(d0, tree_of: dict[int, int], owner, g: int, body: int):
    """(tree body, position, rotation) of geom g: in its tree body's frame at qpos0, or in
    the world frame for a geom of the world (tree body -1)."""
    pos, mat = np.asarray(d0.geom_xpos[g]), np.asarray(d0.geom_xmat[g]).reshape(3, 3)
    o = int(owner[body])
    if o < 0:
        return -1, pos, mat
    x, R = np.asarray(d0.xpos[o]), np.asarray(d0.xmat[o]).reshape(3, 3)
    return tree_of[o], R.T @ (pos - x), R.T @ mat


#: The geom types that MuJoCo's prisms of a height field collide with here
#: (:mod:`jaxmbd.contact.height_field`, equal to `mj_collision`): sphere, capsule, ellipsoid,
#: cylinder (not a box: MuJoCo's box contacts with a prism can be shallower than their
#: penetration, which the kernel finds; tests/test_mjcf_hfield.py).
FIELD_PARTNERS = (2, 3, 4, 5)
_HFIELD = 1


def _field_window(m, g1: int, g2: int, margin: float) -> tuple[int, int, int] | None:
    """(the field's id, window rows, window columns) of a height field g1 against geom g2
    that jaxmbd collides as ``mjc_ConvexHField`` does (a partner of :data:`FIELD_PARTNERS`,
    no margin), else None. The window holds every cell that a geom of g2's bounding radius
    can span (:func:`~jaxmbd.contact.height_field.window_of`)."""
    if int(m.geom_type[g1]) != _HFIELD or int(m.geom_type[g2]) not in FIELD_PARTNERS:
        return None
    if margin != 0.0:
        return None
    h = int(m.geom_dataid[g1])
    size = np.asarray(m.hfield_size[h], dtype=float)
    grid = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    return (h, *window_of(float(m.geom_rbound[g2]), size[:2], grid))


def _field_data(m, h: int, rows: int, cols: int) -> dict:
    """A height field group's fields: the field's id, its window, the elevations (data
    times the field's height), (half extent x, half extent y, base depth) and whether its
    prisms take MuJoCo's native CCD (:func:`~jaxmbd.contact.mujoco.pairs.
    native_ccd_defaults`)."""
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    size = np.asarray(m.hfield_size[h], dtype=float)
    adr = int(m.hfield_adr[h])
    data = np.asarray(m.hfield_data[adr : adr + nrow * ncol], dtype=float).reshape(nrow, ncol)
    return dict(window=(rows, cols), field=h, heights=data * size[2],
                field_size=np.array([size[0], size[1], size[3]]),
                native_ccd=native_ccd_defaults(m))  # fmt: skip


def _tendon_rows(mujoco, m, tendons, unsupported: list[str]):
    """(tendon limits, tendon friction loss, their tendons' geometry), None where none: the
    specs of ``m`` restricted to the tendons that jaxmbd reads (``tendons``, by name; the
    others named in ``unsupported``)."""
    limits, friction = TendonLimitSpec.from_model(m), TendonFrictionSpec.from_model(m)
    needed = sorted({int(k) for k in limits.tendon} | {int(k) for k in friction.tendon})
    names = {k: _name(mujoco, m, mujoco.mjtObj.mjOBJ_TENDON, k, "tendon") for k in needed}
    read = set(() if tendons is None else tendons.names)
    kept = [k for k in needed if names[k] in read]
    if len(kept) < len(needed):
        unsupported.append(
            "limits and friction loss of tendons that jaxmbd does not read, left out of "
            "limits='soft': " + ", ".join(names[k] for k in needed if k not in kept)
        )

    def restricted(spec):
        keep = np.isin(spec.tendon, kept)
        if not keep.any():
            return None
        return jax.tree.map(lambda a: a[keep], spec)

    limits, friction = restricted(limits), restricted(friction)
    if not kept:
        return None, None, None
    geometry = TendonGeometry(
        tendons.subset([tendons.index(names[k]) for k in kept]), tuple(kept), int(m.ntendon)
    )
    return limits, friction, geometry


def constraint_model(mujoco, m, d0, roots, owner, unsupported: list[str], *,
                     tendons=None) -> MujocoConstraints:  # fmt: skip
    """The file's constraint model (module docstring); geom pairs whose types jaxmbd does
    not collide as MuJoCo does, and limited tendons or tendons with friction loss that
    ``tendons`` (the file's :class:`~jaxmbd.tendons.Tendons`, None: none) lacks, are named in
    ``unsupported``."""
    tree_of = {int(b): k for k, b in enumerate(roots)}
    candidates = candidate_pairs(m)
    invweight = np.asarray(m.body_invweight0, dtype=float).reshape(-1, 2)
    groups: dict[tuple, list] = {}
    # a field's partners are collided in one program (soft_constraints.model.field_contacts)
    windows: dict[int, tuple[int, int]] = {}
    missing: dict[str, int] = {}
    columns = (candidates[k] for k in ("geom1", "geom2", "pair", "margin"))
    for g1, g2, pair, margin in zip(*columns, strict=True):
        g1, g2, pair = int(g1), int(g2), int(pair)
        t1, t2 = int(m.geom_type[g1]), int(m.geom_type[g2])
        convex_off = (t1, t2) in CONVEX_PAIRS and not convex_options_supported(m)
        field = _field_window(m, g1, g2, float(margin))
        if field is None and ((t1, t2) not in KERNELS or convex_off):
            key = f"{GEOM_NAMES[t1]}-{GEOM_NAMES[t2]}"
            missing[key] = missing.get(key, 0) + 1
            continue
        condim, friction, solref, solreffriction, solimp, includemargin = _pair_numbers(
            mujoco, m, g1, g2, pair
        )
        b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
        k1, p1, r1 = _local_pose(d0, tree_of, owner, g1, b1)
        k2, p2, r2 = _local_pose(d0, tree_of, owner, g2, b2)
        if field is not None:  # one window per field, the largest its partners need
            rows, cols = windows.get(field[0], (0, 0))
            windows[field[0]] = (max(rows, field[1]), max(cols, field[2]))
        field_id = None if field is None else field[0]
        groups.setdefault((t1, t2, condim, field_id), []).append(dict(
            body1=k1, body2=k2, geoms=(g1, g2), pos1=p1, mat1=r1,
            size1=np.asarray(m.geom_size[g1], dtype=float), pos2=p2, mat2=r2,
            size2=np.asarray(m.geom_size[g2], dtype=float), margin=float(margin),
            includemargin=includemargin, friction=friction, solref=solref,
            solreffriction=solreffriction, solimp=solimp,
            invweight=invweight[b1] + invweight[b2],
        ))  # fmt: skip
    if missing:
        unsupported.append(
            "contacts of geom pairs that jaxmbd does not yet collide as MuJoCo does, left out "
            "of contact='soft': "
            + ", ".join(f"{k} ({n})" for k, n in sorted(missing.items()))
            + " (contact='compliant' collides them, with jaxmbd's own contact law)"
        )
    contacts = []
    for (t1, t2, condim, field_id), members in sorted(groups.items(), key=lambda kv: kv[0][:3]):

        def stacked(key, members=members):
            return np.stack([np.asarray(p[key], dtype=float) for p in members])

        contacts.append(ContactGroup(
            t1, t2, condim, tuple(p["body1"] for p in members),
            tuple(p["body2"] for p in members), tuple(p["geoms"] for p in members),
            *(stacked(k) for k in ("pos1", "mat1", "size1", "pos2", "mat2", "size2", "margin",
                                   "includemargin", "friction", "solref", "solreffriction",
                                   "solimp", "invweight")),
            **({} if field_id is None else _field_data(m, field_id, *windows[field_id])),
        ))  # fmt: skip
    limits = JointLimitSpec.from_model(m)
    friction = DofFrictionSpec.from_model(m)
    tendon_limits, tendon_friction, geometry = _tendon_rows(mujoco, m, tendons, unsupported)
    method = SOLVER_METHODS.get(int(m.opt.solver))
    if method is None:
        unsupported.append(
            f"opt.solver {int(m.opt.solver)} (PGS): contact='soft' solves MuJoCo's primal "
            "problem by Newton's method instead"
        )
        method = "newton"
    solver = SolverSettings(
        method=method, iterations=int(m.opt.iterations), tolerance=float(m.opt.tolerance),
        ls_iterations=int(m.opt.ls_iterations), ls_tolerance=float(m.opt.ls_tolerance),
        warmstart=not int(m.opt.disableflags) & _DISABLE_WARMSTART,
    )  # fmt: skip
    return MujocoConstraints(
        integrator=_INTEGRATORS[int(m.opt.integrator)],
        options=SoftOptions.from_model(m),
        solver=solver,
        contacts=tuple(contacts),
        joint_limits=limits if limits.joint.size else None,
        dof_friction=friction if friction.dof.size else None,
        tendon_limits=tendon_limits,
        tendon_friction=tendon_friction,
        tendons=geometry,
    )
