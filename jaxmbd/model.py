"""The model: bodies, GCONs, drivers and forces as an equinox pytree.

Topology (how many bodies, which constraint types, which bodies they connect) is static;
every number is an array leaf reachable with ``eqx.tree_at`` (DESIGN principle 1). Bodies
are indexed 0..nb-1 in model order; the ground is index ``nb`` in the static topology.
Constraints are stored grouped by GCON type (DESIGN principle 3) and keep their model order
through static row indices, so ``lam[:, k]`` is the multiplier of the k-th constraint.

Build models with :class:`ModelBuilder` (joints of paper 1 Table 1 expand into GCONs) or
load them from files with :func:`jaxmbd.load_model`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .drivers import DriverGroup, Expression, group_drivers
from .errors import AdjustmentWarning, ModelError
from .forces import AbstractForce
from .geometry import Shape, make_shapes
from .joints import (
    SIZES,
    JointDefinition,
    joint_coordinates,
    place_joint_states,
    scalar_size,
)
from .markers import markers_from_specs
from .redundancy import Redundancy, find_redundancy

logger = logging.getLogger("jaxmbd")

GROUND = "ground"
GCON_KINDS = ("DP1", "DP2", "D", "CD", "ROT")


class GconSet(eqx.Module):
    """All constraints of one GCON type, stacked. Unused vector fields are zero."""

    kind: str = eqx.field(static=True)
    rows: tuple[int, ...] = eqx.field(static=True)
    body_i: tuple[int, ...] = eqx.field(static=True)
    body_j: tuple[int, ...] = eqx.field(static=True)
    a_bar_i: jax.Array  # DP1, DP2; ROT: u_bar_i
    b_bar_i: jax.Array  # ROT: v_bar_i
    a_bar_j: jax.Array  # DP1, ROT
    s_bar_p_i: jax.Array  # DP2, D, CD
    s_bar_q_j: jax.Array  # DP2, D, CD
    c: jax.Array  # CD

    @property
    def size(self) -> int:
        return len(self.rows)


class Model(eqx.Module):
    """A multibody model. Arrays are leaves; names and topology are static."""

    name: str = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    constraint_names: tuple[str, ...] = eqx.field(static=True)
    constraint_kinds: tuple[str, ...] = eqx.field(static=True)
    constraint_joints: tuple[str, ...] = eqx.field(static=True)
    constraint_bodies: tuple[tuple[int, int], ...] = eqx.field(static=True)
    mass: jax.Array  # (nb,)
    inertia: jax.Array  # (nb, 3, 3), body frame
    gravity: jax.Array  # (3,)
    r0: jax.Array  # (nb, 3)
    A0: jax.Array  # (nb, 3, 3)
    rdot0: jax.Array  # (nb, 3)
    omega0: jax.Array  # (nb, 3), body frame
    gcons: tuple[GconSet, ...]  # one per kind in GCON_KINDS order (possibly empty)
    f_offset: jax.Array  # (nc,) constant part of each row's f(t)
    drivers: tuple[DriverGroup, ...]
    forces: tuple[AbstractForce, ...]
    # visual geometry per body (drawing only, static; () = the default stick figure)
    shapes: tuple[tuple[Shape, ...], ...] = eqx.field(static=True, default=())
    # shapes fixed to the ground (global frame): its planes and collision shapes
    ground_shapes: tuple[Shape, ...] = eqx.field(static=True, default=())
    # redundant constraint rows found when the model was built (see jaxmbd.redundancy);
    # None: not analysed (a run then keeps every row)
    redundancy: Redundancy | None = eqx.field(static=True, default=None)
    # joint frames and coordinate conventions, one per builder joint (see jaxmbd.joints);
    # () for models built at GCON level only
    joints: tuple[JointDefinition, ...] = ()
    # the sensors (jaxmbd.sensors.Sensors; sol.sensors[name]); None: no sensors
    sensors: object | None = None
    # frames fixed on bodies (jaxmbd.markers.Markers; sol.markers[name]); None: no markers
    markers: object | None = None

    @property
    def nb(self) -> int:
        return len(self.body_names)

    @property
    def nc(self) -> int:
        return len(self.constraint_names)

    @property
    def contacts(self):
        """The contact pairs (a :class:`jaxmbd.contact.ContactForce`, one element of
        ``forces``): ``model.contacts.friction``, ``.restitution``, ``.stiffness``, ...
        ``(n_pairs,)`` array leaves; None for a model without contact pairs."""
        from .contact import contact_element

        return contact_element(self)

    @property
    def actuators(self):
        """The actuators (a :class:`jaxmbd.actuators.Actuators`, one element of ``forces``):
        ``model.actuators.gain``, ``.bias``, ``.gear``, ... ``(nu,)`` array leaves; None
        for a model without actuators."""
        from .actuators import actuator_element

        return actuator_element(self)

    @property
    def nu(self) -> int:
        """The number of control inputs (actuators)."""
        element = self.actuators
        return 0 if element is None else element.nu

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints with coordinates (``sol.joints``), in the order they were added."""
        return tuple(d.name for d in self.joints)

    def with_joint_state(self, name: str, *, q=None, qdot=None) -> Model:
        """This model starting with joint ``name`` at (``q``, ``qdot``) in its coordinates:
        :meth:`ModelBuilder.set_joint_state` for a built or loaded model (an MJCF file's,
        say). The joint's child body (the one farther from the ground in the body graph's
        spanning tree) is placed relative to its parent with its subtree moving rigidly; the
        joint's ``q_start`` becomes ``q`` (angles of ``sol.joints`` unwrap from it). Left out,
        ``q`` keeps the current relative pose and ``qdot`` the current relative velocity.
        Joints that close a loop are refused (set the loop's tree joints; the consistent
        start of :func:`~jaxmbd.simulate` closes the loop). Chain calls to set several
        joints; the pose is computed with NumPy (call it outside ``jit``)."""
        defn = next((d for d in self.joints if d.name == name), None)
        if defn is None:
            raise ModelError(f"with_joint_state: model '{self.name}' has no joint {name!r}; "
                             f"joints with coordinates: {list(self.joint_names)}")  # fmt: skip
        where = f"with_joint_state: joint '{name}' ({defn.kind})"
        if q is None and qdot is None:
            raise ModelError(f"{where}: give q, qdot or both")
        nq, nv = SIZES[defn.kind]
        if q is None:  # the current relative pose
            q = np.asarray(joint_coordinates(defn, *(
                jnp.asarray(x)[None] for x in (self.r0, self.A0, self.rdot0, self.omega0)
            )).q)[0]  # fmt: skip
        state = (
            None if q is None else _joint_values(q, nq, where=f"{where}.q", kind=defn.kind),
            None if qdot is None else _joint_values(qdot, nv, where=f"{where}.qdot"),
        )
        r0, A0, rdot0, omega0, joints = place_joint_states(self, {name: state})
        return dataclasses.replace(
            self, r0=jnp.asarray(r0), A0=jnp.asarray(A0), rdot0=jnp.asarray(rdot0),
            omega0=jnp.asarray(omega0), joints=joints,
        )  # fmt: skip

    def gcon(self, kind: str) -> GconSet:
        return self.gcons[GCON_KINDS.index(kind)]

    def body_label(self, index: int) -> str:
        return GROUND if index == self.nb else self.body_names[index]

    def describe_constraint(self, row: int) -> str:
        i, j = self.constraint_bodies[row]
        joint = self.constraint_joints[row]
        via = f" (joint '{joint}')" if joint != self.constraint_names[row] else ""
        return (
            f"{self.constraint_kinds[row]} '{self.constraint_names[row]}'{via} between "
            f"'{self.body_label(i)}' and '{self.body_label(j)}'"
        )

    def gcon_counts(self) -> dict[str, int]:
        return {kind: self.gcon(kind).size for kind in GCON_KINDS}

    def without_rows(self, rows) -> Model:
        """This model without the constraint rows ``rows`` (model row indices; static, so
        it works on traced models). Driven rows cannot be removed."""
        drop = set(int(r) for r in rows)
        kept = [r for r in range(self.nc) if r not in drop]
        new_row = {old: new for new, old in enumerate(kept)}
        sets = []
        for s in self.gcons:
            keep = np.asarray([k for k, r in enumerate(s.rows) if r not in drop], dtype=int)
            sets.append(
                GconSet(
                    kind=s.kind,
                    rows=tuple(new_row[s.rows[k]] for k in keep),
                    body_i=tuple(s.body_i[k] for k in keep),
                    body_j=tuple(s.body_j[k] for k in keep),
                    a_bar_i=s.a_bar_i[keep],
                    b_bar_i=s.b_bar_i[keep],
                    a_bar_j=s.a_bar_j[keep],
                    s_bar_p_i=s.s_bar_p_i[keep],
                    s_bar_q_j=s.s_bar_q_j[keep],
                    c=s.c[keep],
                )
            )
        drivers = []
        for group in self.drivers:
            if any(r in drop for r in group.rows):
                raise ModelError(f"model '{self.name}': a driven row cannot be removed")
            drivers.append(
                DriverGroup(
                    rows=tuple(new_row[r] for r in group.rows),
                    program=group.program,
                    sources=group.sources,
                    constants=group.constants,
                )
            )
        pick = np.asarray(kept, dtype=int)

        def subset(names):
            return tuple(names[r] for r in kept)

        return dataclasses.replace(
            self,
            constraint_names=subset(self.constraint_names),
            constraint_kinds=subset(self.constraint_kinds),
            constraint_joints=subset(self.constraint_joints),
            constraint_bodies=subset(self.constraint_bodies),
            gcons=tuple(sets),
            f_offset=self.f_offset[pick],
            drivers=tuple(drivers),
            redundancy=None if self.redundancy is None else Redundancy(rank=len(kept)),
        )


# ----------------------------------------------------------------------------- builder


# largest magnitude accepted for any number of a model: products of two stay finite
MAX_MAGNITUDE = 1e100


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _has_non_number(value, depth: int = 0) -> bool:
    """A string, boolean, mapping or None anywhere in (nested lists of) ``value``."""
    if isinstance(value, str | bytes | bool | np.bool_ | dict) or value is None:
        return True
    if isinstance(value, list | tuple) and depth < 4:
        return any(_has_non_number(v, depth + 1) for v in value[:16])
    return False


def _coordinate_pair(joint: str, key: str, value) -> tuple:
    """A cylindrical joint's option ``key`` as (slide's, angle's); None: (None, None). Anything
    but a pair is refused, naming the joint and option."""
    if value is None:
        return (None, None)
    if isinstance(value, str | bytes | dict) or not hasattr(value, "__len__") or len(value) != 2:
        raise ModelError(
            f"joint '{joint}'.{key}: expected a pair (slide, angle) (None for a coordinate "
            f"without it), got {_short(value)}"
        )
    return tuple(value)


def _numbers(value, *, where: str, expected: str) -> np.ndarray:
    """``value`` as a float64 array of plain numbers: no strings, booleans or objects, no
    NaN or inf, no magnitude above MAX_MAGNITUDE (hostile input is refused, never cast)."""
    if _has_non_number(value):
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}") from None
    if raw.dtype.kind not in "iuf":
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}")
    arr = raw.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: non-finite value in {_short(value)}")
    if arr.size and np.max(np.abs(arr)) > MAX_MAGNITUDE:
        raise ModelError(f"{where}: magnitude above {MAX_MAGNITUDE:g} in {_short(value)}")
    return arr


def _vec3(value, *, where: str, nonzero: bool = False) -> np.ndarray:
    arr = _numbers(value, where=where, expected="3 numbers")
    if arr.shape != (3,):
        raise ModelError(f"{where}: expected 3 numbers, got shape {arr.shape}")
    if nonzero and np.linalg.norm(arr) < 1e-12:
        raise ModelError(f"{where}: must not be the zero vector")
    return arr


def _unit(value, *, where: str) -> np.ndarray:
    v = _vec3(value, where=where, nonzero=True)
    return v / np.linalg.norm(v)


def _rotation_matrix(value, *, where: str) -> tuple[np.ndarray, float]:
    """Nearest proper rotation to ``value`` and how far it was from it (Frobenius norm)."""
    A = _numbers(value, where=where, expected="a 3x3 matrix")
    if A.shape != (3, 3) or not np.all(np.isfinite(A)):
        raise ModelError(f"{where}: expected a finite 3x3 matrix, got shape {A.shape}")
    U, s, Vt = np.linalg.svd(A)
    if np.min(s) < 0.5 or np.linalg.det(A) <= 0:
        raise ModelError(
            f"{where}: not a rotation matrix (singular values {np.round(s, 4).tolist()}, "
            f"det {np.linalg.det(A):.3g})"
        )
    R = U @ Vt
    moved = float(np.linalg.norm(R - A))
    if moved > 1e-3:
        raise ModelError(
            f"{where}: not a rotation matrix (distance {moved:.3g} from the nearest rotation; "
            "up to 1e-3 is orthonormalised)"
        )
    return R, moved


def _frame_from_axes(x, y, *, where: str) -> np.ndarray:
    """Rotation whose columns are x, the part of y orthogonal to x, and their cross product."""
    ex = _unit(x, where=f"{where}.x")
    yv = _vec3(y, where=f"{where}.y", nonzero=True)
    along_x = ex @ yv / np.linalg.norm(yv)  # cosine of the angle between the axes
    yv = yv - ex * (ex @ yv)
    if np.linalg.norm(yv) < 1e-9:
        raise ModelError(f"{where}: x and y axes are parallel")
    ey = yv / np.linalg.norm(yv)
    if abs(along_x) > 1e-9:
        angle = math.degrees(math.acos(max(-1.0, min(1.0, along_x))))
        warnings.warn(
            f"{where}: the x and y axes are not orthogonal ({angle:.6g} deg apart); y is "
            f"replaced by its part orthogonal to x, {np.round(ey, 6).tolist()} (give orthogonal "
            "axes to silence this)",
            AdjustmentWarning,
            stacklevel=3,
        )
    return np.stack([ex, ey, np.cross(ex, ey)], axis=1)


def _perpendicular_pair(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors that with ``axis`` form a right-handed orthonormal triad (u, v, axis)."""
    n = axis / np.linalg.norm(axis)
    trial = np.eye(3)[np.argmin(np.abs(n))]
    u = trial - n * (n @ trial)
    u /= np.linalg.norm(u)
    return u, np.cross(n, u)


def _joint_values(value, size: int, *, where: str, kind: str = "") -> np.ndarray:
    """``size`` numbers of a joint state (a number or a 1-vector where ``size`` is 1); a
    spherical joint's quaternion normalised."""
    expected = "a number" if size == 1 else f"{size} numbers"
    arr = _numbers(value, where=where, expected=expected)
    if arr.size != size or arr.ndim > 1:
        raise ModelError(f"{where}: expected {expected}, got shape {arr.shape}")
    arr = arr.reshape(size)
    if kind == "spherical":
        norm = float(np.linalg.norm(arr))
        if norm < 1e-12:
            raise ModelError(f"{where}: the zero quaternion is not a rotation; give (w, x, y, z)")
        if abs(norm - 1.0) > 1e-3:
            warnings.warn(
                f"{where}: quaternion of norm {norm:.6g} normalised to "
                f"{np.round(arr / norm, 6).tolist()} (give a unit quaternion to silence this)",
                AdjustmentWarning,
                stacklevel=4,
            )
        arr = arr / norm
    return arr


def _axis_frame(axis) -> np.ndarray:
    """Joint axes (columns u, v, axis), right-handed, for a joint about or along ``axis``."""
    n = _unit(axis, where="joint axis")
    u, v = _perpendicular_pair(n)
    return np.stack([u, v, n], axis=1)


def _inertia(value, *, where: str) -> np.ndarray:
    J = _numbers(value, where=where, expected="3 principal moments or a 3x3 matrix")
    if J.shape == (3,):
        J = np.diag(J)
    if J.shape != (3, 3) or not np.all(np.isfinite(J)):
        raise ModelError(f"{where}: expected 3 moments or a 3x3 matrix, got shape {J.shape}")
    if np.max(np.abs(J - J.T)) > 1e-12 * max(1.0, np.max(np.abs(J))):
        raise ModelError(f"{where}: inertia matrix is not symmetric")
    eig = np.linalg.eigvalsh(J)
    if eig[0] < -1e-12 * max(1.0, eig[-1]) or eig[-1] <= 0:
        raise ModelError(
            f"{where}: inertia must be positive (semi-)definite with a positive moment; "
            f"principal moments {eig.tolist()}"
        )
    return J


def _optional(element) -> tuple:
    return () if element is None else (element,)


@dataclass
class _BodySpec:
    name: str
    mass: float
    inertia: np.ndarray
    r: np.ndarray
    A: np.ndarray
    rdot: np.ndarray
    omega: np.ndarray
    shapes: tuple[Shape, ...] = ()


@dataclass
class _GconSpec:
    name: str
    kind: str
    body_i: str
    body_j: str
    vectors: dict[str, np.ndarray]
    f: Expression | float
    joint: str


@dataclass
class _JointSpec:
    """A joint's frames in its bodies' frames (they coincide where drawn) and convention."""

    name: str
    kind: str
    body_i: str
    body_j: str
    s_bar_i: np.ndarray
    s_bar_j: np.ndarray
    frame_i: np.ndarray
    frame_j: np.ndarray
    offset: np.ndarray
    sign: tuple[int, ...]
    q_start: np.ndarray

    def definition(self, index: dict[str, int]) -> JointDefinition:
        return JointDefinition(
            name=self.name,
            kind=self.kind,
            body_i=index[self.body_i],
            body_j=index[self.body_j],
            s_bar_i=jnp.asarray(self.s_bar_i),
            s_bar_j=jnp.asarray(self.s_bar_j),
            frame_i=jnp.asarray(self.frame_i),
            frame_j=jnp.asarray(self.frame_j),
            offset=jnp.asarray(self.offset, dtype=jnp.float64).reshape(-1),
            q_start=jnp.asarray(self.q_start, dtype=jnp.float64).reshape(-1),
            sign=self.sign,
        )


@dataclass
class ModelBuilder:
    """Assemble a :class:`Model` from bodies, GCONs, joints and drivers.

    Joint builders take the joint point and axes in *global* coordinates at the initial
    configuration and expand into GCONs per paper 1 Table 1; each also keeps a joint frame
    on both bodies, so that a Solution reports its coordinates (``sol.joints[name]``, see
    :mod:`jaxmbd.joints`) and :meth:`set_joint_state` can set them. Names must be unique;
    every error names the object and the field at fault.
    """

    name: str = "model"
    gravity: Sequence[float] = (0.0, 0.0, -9.81)
    _bodies: list[_BodySpec] = field(default_factory=list)
    _gcons: list[_GconSpec] = field(default_factory=list)
    _forces: list[AbstractForce] = field(default_factory=list)
    # body names of the builder's own force elements, by position in _forces: their body
    # indices are resolved at build (the ground's index is nb, unknown until then)
    _force_bodies: dict[int, dict[str, str]] = field(default_factory=dict)
    _joints: list[_JointSpec] = field(default_factory=list)
    _joint_states: dict[str, tuple] = field(default_factory=dict)
    _limits: dict[str, tuple] = field(default_factory=dict)
    _dynamics: dict[str, tuple] = field(default_factory=dict)  # joint damping etc.
    _actuators: list[dict] = field(default_factory=list)
    _sensors: list[dict] = field(default_factory=list)  # jaxmbd.sensors
    _markers: list[dict] = field(default_factory=list)  # jaxmbd.markers
    _ground_shapes: list[Shape] = field(default_factory=list)
    _contacts: list = field(default_factory=list)  # jaxmbd.contact.build.ContactSpec
    _all_contacts: dict | None = None  # add_contacts' rule, expanded by build

    # -- bodies -------------------------------------------------------------------------
    def add_body(
        self,
        name: str,
        *,
        mass: float,
        inertia,
        r=(0.0, 0.0, 0.0),
        A=None,
        axes=None,
        rdot=(0.0, 0.0, 0.0),
        omega=(0.0, 0.0, 0.0),
        shapes=None,
    ) -> ModelBuilder:
        """Add a rigid body. ``A`` (3x3, body to global) or ``axes`` = (x, y) global axes.

        ``r`` is the centre of mass, ``inertia`` is about the centre of mass in the body frame
        (3 principal moments or a 3x3 matrix), ``omega`` is in the body frame. ``shapes``:
        visual geometry in the body frame (:mod:`jaxmbd.geometry` shapes or their dicts);
        none = a stick figure joining its joint points (:func:`jaxmbd.geometry.default_shapes`).
        """
        where = f"body '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"body name must be a non-empty string, got {name!r}")
        if name == GROUND:
            raise ModelError(f"{where}: the name '{GROUND}' is reserved for the fixed frame")
        if any(b.name == name for b in self._bodies):
            raise ModelError(f"{where}: duplicate body name")
        m = _numbers(mass, where=f"{where}.mass", expected="a number")
        if m.shape != ():
            raise ModelError(f"{where}.mass: expected a number, got {_short(mass)}")
        m = float(m)
        if m <= 0:
            raise ModelError(f"{where}.mass: must be positive and finite, got {mass!r}")
        J = _inertia(inertia, where=f"{where}.inertia")
        if A is not None and axes is not None:
            raise ModelError(f"{where}: give either A or axes, not both")
        if axes is not None:
            R = _frame_from_axes(axes[0], axes[1], where=f"{where}.axes")
        elif A is not None:
            R, moved = _rotation_matrix(A, where=f"{where}.A")
            if moved > 1e-12:
                logger.info("orthonormalised A of %s (changed by %.2e)", where, moved)
        else:
            R = np.eye(3)
        body_shapes = make_shapes(shapes, where=f"{where}.shapes")
        if any(s.kind == "plane" for s in body_shapes):
            raise ModelError(f"{where}.shapes: a plane is ground geometry (add_ground_plane)")
        self._bodies.append(
            _BodySpec(
                name,
                m,
                J,
                _vec3(r, where=f"{where}.r"),
                R,
                _vec3(rdot, where=f"{where}.rdot"),
                _vec3(omega, where=f"{where}.omega"),
                body_shapes,
            )
        )
        return self

    def set_shapes(self, body: str, shapes) -> ModelBuilder:
        """Replace the visual shapes of ``body`` (see :mod:`jaxmbd.geometry`)."""
        for b in self._bodies:
            if b.name == body:
                b.shapes = make_shapes(shapes, where=f"body '{body}'.shapes")
                if any(s.kind == "plane" for s in b.shapes):
                    raise ModelError(f"body '{body}'.shapes: a plane is ground geometry")
                return self
        raise ModelError(
            f"set_shapes: unknown body {body!r}; known: {[b.name for b in self._bodies]}"
        )

    def _frame(self, body: str, *, where: str) -> tuple[np.ndarray, np.ndarray]:
        if body == GROUND:
            return np.zeros(3), np.eye(3)
        for b in self._bodies:
            if b.name == body:
                return b.r, b.A
        known = [b.name for b in self._bodies] + [GROUND]
        raise ModelError(f"{where}: unknown body {body!r}; known bodies: {known}")

    def _local_point(self, body, point, *, where):
        r, A = self._frame(body, where=where)
        return A.T @ (_vec3(point, where=where) - r)

    def _local_dir(self, body, direction, *, where):
        _, A = self._frame(body, where=where)
        return A.T @ _unit(direction, where=where)

    # -- GCONs (paper 1 eqs. 1-4) ---------------------------------------------------------
    def _add_gcon(self, name, kind, body_i, body_j, vectors, f, joint=None):
        where = f"constraint '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"constraint name must be a non-empty string, got {name!r}")
        if any(g.name == name for g in self._gcons):
            raise ModelError(f"{where}: duplicate constraint name")
        self._frame(body_i, where=f"{where}.body_i")
        self._frame(body_j, where=f"{where}.body_j")
        if body_i == body_j:
            raise ModelError(f"{where}: body_i and body_j are both {body_i!r}")
        nonzero = {"a_bar_i", "a_bar_j", "c", "u_bar_i", "v_bar_i"}
        checked = {
            key: _vec3(val, where=f"{where}.{key}", nonzero=key in nonzero)
            for key, val in vectors.items()
        }
        if isinstance(f, str):
            expr = Expression(f, where=f"{where}.f")
            expr.check_finite_at_start(where=f"{where}.f")
            f_value: Expression | float = float(expr(0.0)) if expr.is_constant else expr
        elif isinstance(f, Expression):
            f_value = f
        else:
            f_arr = _numbers(f, where=f"{where}.f", expected="a number or an expression in t")
            if f_arr.shape != ():
                raise ModelError(f"{where}.f: expected a number or an expression, got {_short(f)}")
            f_value = float(f_arr)
        if kind == "D" and not isinstance(f_value, Expression) and f_value <= 0:
            raise ModelError(f"{where}.f: a distance constraint needs f = C^2 > 0, got {f_value}")
        self._gcons.append(_GconSpec(name, kind, body_i, body_j, checked, f_value, joint or name))
        return self

    def add_dp1(self, name, *, body_i, a_bar_i, body_j, a_bar_j, f=0.0, joint=None):
        """DP1 (eq. 1): a_bar_i^T A_i^T A_j a_bar_j = f(t)."""
        return self._add_gcon(
            name, "DP1", body_i, body_j, {"a_bar_i": a_bar_i, "a_bar_j": a_bar_j}, f, joint
        )

    def add_dp2(self, name, *, body_i, a_bar_i, s_bar_p_i, body_j, s_bar_q_j, f=0.0, joint=None):
        """DP2 (eq. 2): a_bar_i^T A_i^T d_ij = f(t)."""
        return self._add_gcon(
            name,
            "DP2",
            body_i,
            body_j,
            {"a_bar_i": a_bar_i, "s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j},
            f,
            joint,
        )

    def add_d(self, name, *, body_i, s_bar_p_i, body_j, s_bar_q_j, f, joint=None):
        """D (eq. 3): d_ij^T d_ij = f(t) > 0."""
        return self._add_gcon(
            name, "D", body_i, body_j, {"s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j}, f, joint
        )

    def add_cd(self, name, *, c, body_i, s_bar_p_i, body_j, s_bar_q_j, f=0.0, joint=None):
        """CD (eq. 4): c^T d_ij = f(t)."""
        return self._add_gcon(
            name,
            "CD",
            body_i,
            body_j,
            {"c": c, "s_bar_p_i": s_bar_p_i, "s_bar_q_j": s_bar_q_j},
            f,
            joint,
        )

    def add_rot(self, name, *, body_i, u_bar_i, v_bar_i, body_j, a_bar_j, angle, joint=None):
        """Rotation driver at GCON level: the angle of a_j from u_i towards v_i is angle(t).

        ``u_bar_i`` and ``v_bar_i`` must be orthonormal; the rotation axis is u_i x v_i.
        """
        where = f"constraint '{name}'"
        u = _vec3(u_bar_i, where=f"{where}.u_bar_i", nonzero=True)
        v = _vec3(v_bar_i, where=f"{where}.v_bar_i", nonzero=True)
        if (
            abs(np.linalg.norm(u) - 1) > 1e-9
            or abs(np.linalg.norm(v) - 1) > 1e-9
            or abs(u @ v) > 1e-9
        ):
            raise ModelError(f"{where}: u_bar_i and v_bar_i must be orthonormal")
        return self._add_gcon(
            name,
            "ROT",
            body_i,
            body_j,
            {"u_bar_i": u, "v_bar_i": v, "a_bar_j": a_bar_j},
            angle,
            joint,
        )

    # -- joints (paper 1 Table 1), global point/axes at the initial configuration ---------
    def _check_joint_name(self, name) -> None:
        if not isinstance(name, str) or not name:
            raise ModelError(f"joint name must be a non-empty string, got {name!r}")
        if any(j.name == name for j in self._joints):
            raise ModelError(f"joint '{name}': duplicate joint name")

    def _record_joint(self, name, kind, body_i, body_j, point, axes) -> None:
        """Keep the joint frame (``point``, ``axes`` columns, global where drawn) fixed in both
        bodies: the two frames coincide here, where every coordinate is zero."""
        w = f"joint '{name}'"
        point = _vec3(point, where=f"{w}.point")
        r_i, A_i = self._frame(body_i, where=f"{w}.body_i")
        r_j, A_j = self._frame(body_j, where=f"{w}.body_j")
        self._define_joint(
            name, kind=kind, body_i=body_i, body_j=body_j, s_bar_i=A_i.T @ (point - r_i),
            s_bar_j=A_j.T @ (point - r_j), frame_i=A_i.T @ axes, frame_j=A_j.T @ axes,
        )  # fmt: skip

    def _spherical_rows(self, name, *, body_i, body_j, point, joint=None):
        """Three CD rows that make the point P_i of body i and Q_j of body j coincide."""
        w = f"joint '{name}'"
        sp = self._local_point(body_i, point, where=f"{w}.point")
        sq = self._local_point(body_j, point, where=f"{w}.point")
        for k, axis in enumerate("xyz"):
            self.add_cd(
                f"{name}.cd_{axis}",
                c=np.eye(3)[k],
                body_i=body_i,
                s_bar_p_i=sp,
                body_j=body_j,
                s_bar_q_j=sq,
                joint=joint or name,
            )
        return self

    def spherical(self, name, *, body_i, body_j, point):
        """SJ: three CD constraints that make point P_i and Q_j coincide.

        Coordinates: the quaternion (w, x, y, z) of body j's rotation relative to body i from
        the drawn pose, in body j's frame (MuJoCo's ball joint); rates: the relative angular
        velocity in body j's frame.
        """
        self._check_joint_name(name)
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        A_j = self._frame(body_j, where=f"joint '{name}'.body_j")[1]
        self._record_joint(name, "spherical", body_i, body_j, point, A_j)
        return self

    def perpendicular_1(self, name, *, body_i, body_j, axis, joint=None):
        """Perp-1: a vector c_j on body j stays perpendicular to a plane (a_i, b_i) of body i."""
        w = f"joint '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        u, v = _perpendicular_pair(n)
        c_j = self._local_dir(body_j, n, where=f"{w}.axis")
        for tag, vec in (("dp1_a", u), ("dp1_b", v)):
            self.add_dp1(
                f"{name}.{tag}",
                body_i=body_i,
                a_bar_i=self._local_dir(body_i, vec, where=f"{w}.axis"),
                body_j=body_j,
                a_bar_j=c_j,
                joint=joint or name,
            )
        return self

    def perpendicular_2(self, name, *, body_i, body_j, point, axis, joint=None):
        """Perp-2: the vector P_i Q_j stays perpendicular to a plane (a_i, b_i) of body i."""
        w = f"joint '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        u, v = _perpendicular_pair(n)
        sp = self._local_point(body_i, point, where=f"{w}.point")
        sq = self._local_point(body_j, point, where=f"{w}.point")
        for tag, vec in (("dp2_a", u), ("dp2_b", v)):
            self.add_dp2(
                f"{name}.{tag}",
                body_i=body_i,
                a_bar_i=self._local_dir(body_i, vec, where=f"{w}.axis"),
                s_bar_p_i=sp,
                body_j=body_j,
                s_bar_q_j=sq,
                joint=joint or name,
            )
        return self

    def revolute(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, damping=0.0, stiffness=0.0, spring_reference=None,
        friction_loss=0.0, armature=None,
    ):  # fmt: skip
        """RJ = SJ + Perp-1 (5 equations): rotation about ``axis`` through ``point``.

        Coordinate: the angle of body j relative to body i about ``axis`` (right hand), zero
        where drawn. ``limits=(lower, upper)`` (rad): a compliant limit on that angle, with
        ``limit_stiffness`` (N m/rad) and ``limit_damping`` (N m s/rad) defaulting to the
        joint's effective inertia over a 0.01 s time constant (:mod:`jaxmbd.joint_limits`).
        ``damping`` (N m s/rad), ``stiffness`` (N m/rad) about ``spring_reference`` (rad;
        None: the drawn pose) and ``friction_loss`` (N m): passive torques on that angle;
        ``armature`` (kg m^2; None: none): rotor inertia on it, kinetic energy
        1/2 armature q_dot^2 (:mod:`jaxmbd.joint_dynamics`).
        """
        self._check_joint_name(name)
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=axis, joint=name)
        self._record_joint(name, "revolute", body_i, body_j, point, _axis_frame(axis))
        self._record_limits(name, limits, limit_stiffness, limit_damping)
        self._record_dynamics(name, damping, stiffness, spring_reference, friction_loss,
                              armature)  # fmt: skip
        return self

    def _record_limits(self, name, limits, stiffness, damping, *, kind=None) -> None:
        """Keep a joint's ``limits=(lower, upper)`` and optional gains (checked here).
        ``kind``: the coordinate's kind where ``name`` is a cylindrical joint's coordinate
        view (``"<joint>.slide"``, ``"<joint>.angle"``; default: the joint's kind)."""
        if limits is None:
            if stiffness is not None or damping is not None:
                raise ModelError(f"joint '{name}': limit_stiffness/limit_damping need limits=")
            return
        w = f"joint '{name}'.limits"
        lo_hi = _numbers(limits, where=w, expected="(lower, upper)")
        if lo_hi.shape != (2,) or not lo_hi[0] < lo_hi[1]:
            raise ModelError(f"{w}: expected (lower, upper) with lower < upper, got {limits!r}")
        kind = kind or next(j for j in self._joints if j.name == name).kind
        if kind == "revolute" and lo_hi[1] - lo_hi[0] >= 2 * math.pi:
            raise ModelError(f"{w}: a revolute range must be narrower than a full turn")
        gains = []
        for key, value in (("limit_stiffness", stiffness), ("limit_damping", damping)):
            if value is not None:
                x = _numbers(value, where=f"joint '{name}'.{key}", expected="a number")
                if x.shape != () or x < 0 or (key == "limit_stiffness" and x == 0):
                    raise ModelError(f"joint '{name}'.{key}: must be positive, got {value!r}")
                value = float(x)
            gains.append(value)
        self._limits[name] = (float(lo_hi[0]), float(lo_hi[1]), *gains)

    def _limits_element(self, index: dict[str, int], joints) -> tuple:
        """The :class:`~jaxmbd.joint_limits.JointLimits` force element of the limited joints
        (none: empty), default gains from each joint's child side at the drawn pose."""
        if not self._limits:
            return ()
        from ._topology import body_graph
        from .joint_limits import JointLimits, default_limit_gains, effective_inertia

        nb = len(self._bodies)
        graph = body_graph(nb, [(index[g.body_i], index[g.body_j]) for g in self._gcons])
        defns, rows = [], []
        for defn in joints:
            if defn.name not in self._limits:
                continue
            lo, hi, k, c = self._limits[defn.name]
            if k is None or c is None:
                i, j = defn.body_i, defn.body_j
                child = graph.child_of(i, j) if graph.is_tree_pair(i, j) else j
                side = graph.subtree(child) if child < nb else ()
                spec = self._coordinate_joint(defn.name)
                b0 = self._bodies[index[spec.body_i]] if spec.body_i != GROUND else None
                r_i, A_i = (b0.r, b0.A) if b0 is not None else (np.zeros(3), np.eye(3))
                point, axis = r_i + A_i @ spec.s_bar_i, A_i @ spec.frame_i[:, 2]
                bodies = [
                    (self._bodies[b].mass, self._bodies[b].A @ self._bodies[b].inertia
                     @ self._bodies[b].A.T, self._bodies[b].r)
                    for b in side
                ]  # fmt: skip
                inertia = effective_inertia(defn.kind, point, axis, bodies)
                k_def, c_def = default_limit_gains(inertia)
                k = k_def if k is None else k
                c = c_def if c is None else c
            defns.append(defn)
            rows.append((lo, hi, k, c))
        lo, hi, k, c = (jnp.asarray([row[m] for row in rows]) for m in range(4))
        return (JointLimits(joints=tuple(defns), lower=lo, upper=hi, stiffness=k, damping=c),)

    def _record_dynamics(self, name, damping, stiffness, spring_reference, friction_loss,
                         armature=None):  # fmt: skip
        """Keep a joint's damping, stiffness, spring reference, friction loss and armature
        (checked here) when any is non-zero or the armature is given."""
        values = {}
        for key, value in (("damping", damping), ("stiffness", stiffness),
                           ("friction_loss", friction_loss)):  # fmt: skip
            x = _numbers(value, where=f"joint '{name}'.{key}", expected="a number")
            if x.shape != () or x < 0:
                raise ModelError(
                    f"joint '{name}'.{key}: expected a non-negative number, got {_short(value)}"
                )
            values[key] = float(x)
        if spring_reference is not None:
            if values["stiffness"] == 0:
                raise ModelError(f"joint '{name}': spring_reference needs stiffness > 0")
            x = _numbers(spring_reference, where=f"joint '{name}'.spring_reference",
                         expected="a number")  # fmt: skip
            if x.shape != ():
                raise ModelError(
                    f"joint '{name}'.spring_reference: expected a number, got "
                    f"{_short(spring_reference)}"
                )
            spring_reference = float(x)
        if armature is not None:
            x = _numbers(armature, where=f"joint '{name}'.armature", expected="a number")
            if x.shape != () or not x >= 0 or not np.isfinite(x):
                raise ModelError(
                    f"joint '{name}'.armature: expected a non-negative number, got "
                    f"{_short(armature)}"
                )
            armature = float(x)
        if any(values.values()) or armature is not None:
            self._dynamics[name] = (
                values["damping"], values["stiffness"], spring_reference, values["friction_loss"],
                armature,
            )  # fmt: skip

    def _dynamics_element(self, joints) -> tuple:
        """The :class:`~jaxmbd.joint_dynamics.JointDynamics` force element of the joints with
        damping, stiffness or friction loss (none: empty); a spring reference of None is
        the joint's coordinate where drawn (its offset)."""
        if not self._dynamics:
            return ()
        from .joint_dynamics import FRICTION_VELOCITY, JointDynamics

        defns = [d for d in joints if d.name in self._dynamics]
        rows = [self._dynamics[d.name] for d in defns]
        c, k, ref, f = (
            jnp.asarray([
                float(d.offset[0]) if m == 2 and row[m] is None else row[m]
                for d, row in zip(defns, rows, strict=True)
            ])
            for m in range(4)
        )  # fmt: skip
        # armature: a leaf where some joint was given one (0 for the others), else None
        given = [row[4] for row in rows]
        armature = None
        if any(x is not None for x in given):
            armature = jnp.asarray([0.0 if x is None else x for x in given])
        return (
            JointDynamics(
                joints=tuple(defns), damping=c, stiffness=k, spring_reference=ref,
                friction_loss=f, friction_velocity=jnp.asarray([FRICTION_VELOCITY] * len(defns)),
                armature=armature,
            ),
        )  # fmt: skip

    # -- actuators (jaxmbd.actuators) ---------------------------------------------------------
    def add_actuator(
        self, name, *, joint, kind, gear=1.0, ctrl_range=None, force_range=None, kp=None,
        kv=None, gain=None, bias=None,
    ) -> ModelBuilder:  # fmt: skip
        """An actuator driving the coordinate of the revolute or translational ``joint``, or
        one coordinate of a cylindrical joint, ``joint="<joint>.slide"`` (force along its
        axis) or ``"<joint>.angle"`` (torque about it) (:mod:`jaxmbd.actuators`): ``kind``
        "motor" (force gear u), "position" (``kp``, optional ``kv``: kp (u - L) - kv L_dot),
        "velocity" (``kv``: kv (u - L_dot)) or
        "general" (``gain`` u + ``bias`` . (1, L, L_dot)), with L = gear q. ``ctrl_range``
        and ``force_range`` = (lower, upper) clamp the control and the force (MuJoCo's
        ``ctrllimited``, ``forcelimited``); None: unlimited (one side None: unlimited
        there). Controls are given to
        :func:`~jaxmbd.simulate` (``controls=``) in the order actuators are added."""
        from .actuators import ACTUATOR_KINDS

        where = f"actuator '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"actuator name: expected a non-empty string, got {name!r}")
        if any(a["name"] == name for a in self._actuators):
            raise ModelError(f"{where}: duplicate actuator name")
        if kind not in ACTUATOR_KINDS:
            raise ModelError(f"{where}.kind: expected one of {ACTUATOR_KINDS}, got {kind!r}")
        known = self._scalar_coordinates()
        spec = next((j for j in self._joints if j.name == joint), None)
        if spec is None and joint not in known:
            raise ModelError(f"{where}.joint: no joint {joint!r}; actuated joints can be {known}")
        if spec is not None and spec.kind == "cylindrical":
            raise ModelError(
                f"{where}.joint: '{joint}' is cylindrical; actuate one of its coordinates, "
                f"'{joint}.slide' or '{joint}.angle'"
            )
        if spec is not None and spec.kind not in ("revolute", "translational"):
            raise ModelError(
                f"{where}.joint: '{joint}' is {spec.kind}; actuators drive revolute and "
                "translational joints and the coordinates of cylindrical joints "
                "('<joint>.slide', '<joint>.angle')"
            )

        def number(key, value, *, positive=False, required=False):
            if value is None:
                if required:
                    raise ModelError(f"{where}: kind {kind!r} needs {key}=")
                return 0.0
            x = _numbers(value, where=f"{where}.{key}", expected="a number")
            if x.shape != () or (positive and not x > 0):
                raise ModelError(f"{where}.{key}: expected a positive number, got {value!r}")
            return float(x)

        def span(key, value):
            if value is None:
                return (-math.inf, math.inf)
            # one side may be None: unbounded there
            if isinstance(value, list | tuple) and len(value) == 2 and None in value:
                bounds = [-math.inf if value[0] is None else value[0],
                          math.inf if value[1] is None else value[1]]  # fmt: skip
                finite = [x for x in value if x is not None]
                if finite:
                    _numbers(finite, where=f"{where}.{key}", expected="(lower, upper)")
                lo_hi = np.asarray(bounds, dtype=np.float64)
            else:
                lo_hi = _numbers(value, where=f"{where}.{key}", expected="(lower, upper)")
            if lo_hi.shape != (2,) or not lo_hi[0] <= lo_hi[1]:
                raise ModelError(f"{where}.{key}: expected (lower, upper), lower <= upper, "
                                 f"got {value!r}")  # fmt: skip
            return (float(lo_hi[0]), float(lo_hi[1]))

        gear_value = number("gear", gear)
        if gear_value == 0.0:
            raise ModelError(f"{where}.gear: must be non-zero")
        options = {"kp": (kp, ("position",)), "kv": (kv, ("position", "velocity")),
                   "gain": (gain, ("general",)), "bias": (bias, ("general",))}  # fmt: skip
        for key, (value, used) in options.items():
            if value is not None and kind not in used:
                raise ModelError(f"{where}.{key}: not an option of kind {kind!r}")
        kp_value = number("kp", kp, positive=True, required=kind == "position")
        kv_value = number("kv", kv, positive=True, required=kind == "velocity")
        gain_value = number("gain", gain, required=kind == "general")
        bias_value = (0.0, 0.0, 0.0)
        if bias is not None:
            b = _numbers(bias, where=f"{where}.bias", expected="(b0, b1, b2)")
            if b.shape != (3,):
                raise ModelError(f"{where}.bias: expected (b0, b1, b2), got {bias!r}")
            bias_value = tuple(float(x) for x in b)
        self._actuators.append(
            dict(name=name, joint=joint, kind=kind, gear=gear_value, kp=kp_value, kv=kv_value,
                 gain=gain_value, bias=bias_value, ctrl=span("ctrl_range", ctrl_range),
                 force=span("force_range", force_range))
        )  # fmt: skip
        return self

    def _actuator_element(self, joints) -> tuple:
        """The :class:`~jaxmbd.actuators.Actuators` element (none: empty)."""
        if not self._actuators:
            return ()
        from .actuators import Actuators, gains_of_kind

        by_name = {d.name: d for d in joints}
        gains = [gains_of_kind(a["kind"], kp=a["kp"], kv=a["kv"], gain=a["gain"],
                               bias=a["bias"]) for a in self._actuators]  # fmt: skip

        def column(values):
            return jnp.asarray(values, dtype=jnp.float64)

        return (
            Actuators(
                actuator_names=tuple(a["name"] for a in self._actuators),
                kinds=tuple(a["kind"] for a in self._actuators),
                joints=tuple(by_name[a["joint"]] for a in self._actuators),
                gear=column([a["gear"] for a in self._actuators]),
                gain=column([g for g, _ in gains]),
                bias=column([b for _, b in gains]),
                ctrl_lower=column([a["ctrl"][0] for a in self._actuators]),
                ctrl_upper=column([a["ctrl"][1] for a in self._actuators]),
                force_lower=column([a["force"][0] for a in self._actuators]),
                force_upper=column([a["force"][1] for a in self._actuators]),
                controls=jnp.zeros(len(self._actuators)),
            ),
        )

    # -- sensors (jaxmbd.sensors) ------------------------------------------------------------
    # -- markers (jaxmbd.markers) ------------------------------------------------------------
    def add_marker(self, name, body, point, axes=None) -> ModelBuilder:
        """A frame fixed on ``body``, read as ``sol.markers[name]`` (position, velocity,
        acceleration, orientation, angular velocity and acceleration over time;
        :mod:`jaxmbd.markers`) and usable as a body sensor's site
        (``add_sensor(..., marker=name)``).

        ``point``: global, at the initial configuration (as drawn, like joint points);
        ``axes``: the marker's x, y, z axes as the columns of a global 3x3 rotation at that
        configuration (None: the body's own axes). Both are stored in the body frame, so
        they move with the body when :meth:`set_joint_state` poses the model."""
        where = f"marker '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"marker name: expected a non-empty string, got {name!r}")
        if any(m["name"] == name for m in self._markers):
            raise ModelError(f"{where}: duplicate marker name")
        if body == GROUND:
            raise ModelError(f"{where}.body: the ground does not move; a marker goes on a "
                             "moving body (a point on the ground is a constant)")  # fmt: skip
        r, A = self._frame(body, where=f"{where}.body")
        s = A.T @ (_vec3(point, where=f"{where}.point") - r)
        F = np.eye(3) if axes is None else A.T @ _rotation_matrix(axes, where=f"{where}.axes")[0]
        self._markers.append(dict(name=name, body=body, point=s, axes=F))
        return self

    def add_sensor(
        self, name, *, kind, joint=None, body=None, site=(0.0, 0.0, 0.0), frame=None,
        noise=0.0, marker=None,
    ) -> ModelBuilder:  # fmt: skip
        """A sensor read as ``sol.sensors[name]`` (T, dim) (:mod:`jaxmbd.sensors`).

        ``kind``: "joint_position", "joint_velocity", "joint_reaction_force" or
        "joint_reaction_torque" (on ``joint``, any joint with coordinates; reactions in its
        frame on body j), or "body_position", "body_quaternion", "body_linear_velocity",
        "body_angular_velocity", "velocimeter", "gyro" or "accelerometer" (on ``body``, at
        the site ``site``: a point in the body frame, from the centre of mass; ``frame``:
        the site's axes as the columns of a 3x3 rotation in body coordinates, None: the
        body's own). ``marker``: instead of ``body``, ``site`` and ``frame``, a marker of
        :meth:`add_marker` (its body, point and axes). ``noise``: the standard deviation of
        Gaussian noise, applied when :func:`~jaxmbd.simulate` gets ``sensor_key=``. Sensors
        are listed, and a policy observes them, in the order they are added."""
        from .sensors import SENSOR_KINDS

        where = f"sensor '{name}'"
        if marker is not None:
            if body is not None or frame is not None or tuple(np.ravel(site)) != (0, 0, 0):
                raise ModelError(f"{where}: marker= gives the sensor's body, site and frame; "
                                 "leave body=, site= and frame= out")  # fmt: skip
            found = [m for m in self._markers if m["name"] == marker]
            if not found:
                raise ModelError(
                    f"{where}.marker: no marker {marker!r}; markers are "
                    f"{[m['name'] for m in self._markers]} (add_marker first)"
                )
            body, site, frame = found[0]["body"], found[0]["point"], found[0]["axes"]
        if not isinstance(name, str) or not name:
            raise ModelError(f"sensor name: expected a non-empty string, got {name!r}")
        if any(s["name"] == name for s in self._sensors):
            raise ModelError(f"{where}: duplicate sensor name")
        if kind not in SENSOR_KINDS:
            raise ModelError(f"{where}.kind: expected one of {tuple(SENSOR_KINDS)}, got {kind!r}")
        spec = dict(name=name, kind=kind, joint=None, body=None, site=np.zeros(3),
                    frame=np.eye(3))  # fmt: skip
        if SENSOR_KINDS[kind] == "joint":
            if body is not None or frame is not None or tuple(np.ravel(site)) != (0, 0, 0):
                raise ModelError(f"{where}: kind {kind!r} is read at its joint; body=, site= "
                                 "and frame= are options of body sensors")  # fmt: skip
            known = [j.name for j in self._joints]
            if joint not in known:
                raise ModelError(f"{where}.joint: no joint {joint!r}; joints with coordinates "
                                 f"are {known}")  # fmt: skip
            spec["joint"] = joint
        else:
            if joint is not None:
                raise ModelError(f"{where}: kind {kind!r} is read on a body (body=), not joint=")
            if body == GROUND:
                raise ModelError(f"{where}.body: the ground does not move; give a moving body")
            if body not in [b.name for b in self._bodies]:
                raise ModelError(f"{where}.body: unknown body {body!r}; known bodies: "
                                 f"{[b.name for b in self._bodies]}")  # fmt: skip
            spec["body"] = body
            spec["site"] = _vec3(site, where=f"{where}.site")
            if frame is not None:
                spec["frame"] = _rotation_matrix(frame, where=f"{where}.frame")[0]
        sigma = _numbers(noise, where=f"{where}.noise", expected="a number")
        if sigma.shape != () or not sigma >= 0:
            raise ModelError(f"{where}.noise: expected a non-negative number, got {noise!r}")
        spec["noise"] = float(sigma)
        self._sensors.append(spec)
        return self

    def _sensor_element(self, index: dict[str, int], joints):
        """The :class:`~jaxmbd.sensors.Sensors` of the model (None without sensors)."""
        if not self._sensors:
            return None
        from .sensors import Sensors, sensor_dim

        kinds = {d.name: d.kind for d in joints}
        return Sensors(
            sensor_names=tuple(s["name"] for s in self._sensors),
            kinds=tuple(s["kind"] for s in self._sensors),
            dims=tuple(sensor_dim(s["kind"], kinds.get(s["joint"])) for s in self._sensors),
            bodies=tuple(-1 if s["body"] is None else index[s["body"]] for s in self._sensors),
            joints=tuple(s["joint"] for s in self._sensors),
            site=jnp.asarray(np.stack([s["site"] for s in self._sensors])),
            frame=jnp.asarray(np.stack([s["frame"] for s in self._sensors])),
            noise=jnp.asarray([s["noise"] for s in self._sensors], dtype=jnp.float64),
        )

    def universal(self, name, *, body_i, body_j, point, axis_i, axis_j):
        """UJ = SJ + DP1 (4 equations): perpendicular cross axes axis_i (on i), axis_j (on j).

        Coordinates: (angle_1, angle_2) with body j's rotation relative to body i
        Rx(angle_1) Ry(angle_2) in the frame x = ``axis_i``, y = ``axis_j`` (the first about
        axis_i, the second about axis_j), zero where drawn.
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        ai, aj = _unit(axis_i, where=f"{w}.axis_i"), _unit(axis_j, where=f"{w}.axis_j")
        if abs(ai @ aj) > 1e-9:
            raise ModelError(f"{w}: axis_i and axis_j must be perpendicular (dot {ai @ aj:.3g})")
        self._spherical_rows(name, body_i=body_i, body_j=body_j, point=point)
        self.add_dp1(
            f"{name}.dp1",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, ai, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, aj, where=w),
            joint=name,
        )
        y = aj - ai * (ai @ aj)  # orthonormal to round-off for the joint frame
        y = y / np.linalg.norm(y)
        self._record_joint(
            name, "universal", body_i, body_j, point, np.stack([ai, y, np.cross(ai, y)], 1)
        )
        return self

    def _cylindrical_rows(self, name, *, body_i, body_j, point, axis):
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=axis, joint=name)
        self.perpendicular_2(
            f"{name}.perp2", body_i=body_i, body_j=body_j, point=point, axis=axis, joint=name
        )
        return self

    def cylindrical(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, damping=None, stiffness=None, spring_reference=None,
        friction_loss=None, armature=None,
    ):  # fmt: skip
        """CJ = Perp-1 + Perp-2 (4 equations): slide along and rotate about ``axis``.

        Coordinates: (slide, angle) of body j relative to body i along and about ``axis``,
        zero where drawn. Each of them is also a one-coordinate joint, ``"<name>.slide"``
        (a translational joint's slide, m) and ``"<name>.angle"`` (a revolute joint's angle,
        rad), which :meth:`add_actuator` drives and whose limits and joint dynamics the
        options set: each option is a pair (slide's, angle's), in that coordinate's units,
        a None entry (or the option None) leaves that coordinate without it. ``limits``:
        ((lower, upper) or None, (lower, upper) or None), with ``limit_stiffness`` and
        ``limit_damping`` (defaults as for :meth:`revolute`, from the effective mass along
        resp. inertia about the axis); ``damping``, ``stiffness``, ``spring_reference``
        (None: the drawn pose), ``friction_loss``, ``armature``: as for
        :meth:`translational` on the slide and :meth:`revolute` on the angle. For a body
        symmetric about the axis the two coordinates are uncoupled: each is the damped
        oscillator of its mass (resp. inertia plus armature), damping and stiffness.
        """
        from ._joint_forces import CYLINDRICAL_VIEWS

        self._check_joint_name(name)
        options = dict(limits=limits, limit_stiffness=limit_stiffness,
                       limit_damping=limit_damping, damping=damping, stiffness=stiffness,
                       spring_reference=spring_reference, friction_loss=friction_loss,
                       armature=armature)  # fmt: skip
        pairs = {key: _coordinate_pair(name, key, value) for key, value in options.items()}
        self._cylindrical_rows(name, body_i=body_i, body_j=body_j, point=point, axis=axis)
        self._record_joint(name, "cylindrical", body_i, body_j, point, _axis_frame(axis))
        for k, (suffix, kind) in enumerate(CYLINDRICAL_VIEWS):
            view = f"{name}.{suffix}"
            self._record_limits(view, pairs["limits"][k], pairs["limit_stiffness"][k],
                                pairs["limit_damping"][k], kind=kind)  # fmt: skip
            self._record_dynamics(
                view, *(0.0 if pairs[key][k] is None else pairs[key][k]
                        for key in ("damping", "stiffness")),
                pairs["spring_reference"][k],
                0.0 if pairs["friction_loss"][k] is None else pairs["friction_loss"][k],
                pairs["armature"][k],
            )  # fmt: skip
        return self

    def _scalar_coordinates(self) -> list[str]:
        """The names of the one-coordinate joints and of the cylindrical joints' coordinate
        views (``"<joint>.slide"``, ``"<joint>.angle"``): what joint forces act on."""
        from ._joint_forces import CYLINDRICAL_VIEWS

        out = []
        for j in self._joints:
            if j.kind in ("revolute", "translational"):
                out.append(j.name)
            elif j.kind == "cylindrical":
                out += [f"{j.name}.{suffix}" for suffix, _ in CYLINDRICAL_VIEWS]
        return out

    def _coordinate_joint(self, name: str):
        """The recorded joint of ``name``: a joint, or the cylindrical joint of a coordinate
        view ``"<joint>.slide"`` / ``"<joint>.angle"``."""
        spec = next((s for s in self._joints if s.name == name), None)
        if spec is None and "." in name:
            base = name.rsplit(".", 1)[0]
            spec = next((s for s in self._joints if s.name == base), None)
        if spec is None:
            raise ModelError(f"no joint {name!r}; joint coordinates: {self._scalar_coordinates()}")
        return spec

    def translational(
        self, name, *, body_i, body_j, point, axis, limits=None, limit_stiffness=None,
        limit_damping=None, damping=0.0, stiffness=0.0, spring_reference=None,
        friction_loss=0.0, armature=None,
    ):  # fmt: skip
        """TJ = CJ + DP1 (5 equations): slide along ``axis`` without rotation.

        Coordinate: the slide of body j relative to body i along ``axis``, zero where drawn.
        ``limits=(lower, upper)`` (m): a compliant limit on the slide (N/m, N s/m gains as
        for :meth:`revolute`). ``damping`` (N s/m), ``stiffness`` (N/m) about
        ``spring_reference`` (m; None: the drawn pose) and ``friction_loss`` (N): passive
        forces on the slide; ``armature`` (kg; None: none): inertia on the slide, kinetic
        energy 1/2 armature q_dot^2 (:mod:`jaxmbd.joint_dynamics`).
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        self._cylindrical_rows(name, body_i=body_i, body_j=body_j, point=point, axis=axis)
        u, v = _perpendicular_pair(_unit(axis, where=f"{w}.axis"))
        self.add_dp1(
            f"{name}.dp1",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, u, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, v, where=w),
            joint=name,
        )
        self._record_joint(name, "translational", body_i, body_j, point, _axis_frame(axis))
        self._record_limits(name, limits, limit_stiffness, limit_damping)
        self._record_dynamics(name, damping, stiffness, spring_reference, friction_loss,
                              armature)  # fmt: skip
        return self

    def planar(self, name, *, body_i, body_j, point, axis, point_j=None, x_axis=None):
        """Planar pair E (3 equations, Betsch & Leyendecker Sec. 4.5.5): Perp-1 (the normal
        ``axis`` fixed in body j stays perpendicular to two vectors of body i) + DP2 (the
        vector from ``point`` on body i to ``point_j`` on body j, default ``point``, stays
        in the plane through ``point`` perpendicular to ``axis``). Leaves two translations
        in the plane and the rotation about its normal.

        Coordinates: (x, y, angle): the displacement of body j's copy of ``point`` in body
        i's in-plane axes x = ``x_axis`` (its part normal to ``axis``; default: a fixed
        perpendicular direction) and y = axis x x, and the angle about ``axis``; zero where
        drawn.
        """
        w = f"joint '{name}'"
        self._check_joint_name(name)
        n = _unit(axis, where=f"{w}.axis")
        if x_axis is None:
            ex = _perpendicular_pair(n)[0]
        else:
            ex = _vec3(x_axis, where=f"{w}.x_axis", nonzero=True)
            ex = ex - n * (n @ ex)
            if np.linalg.norm(ex) < 1e-9:
                raise ModelError(f"{w}.x_axis: parallel to the normal axis")
            ex = ex / np.linalg.norm(ex)
        p_i = _vec3(point, where=f"{w}.point")
        p_j = p_i if point_j is None else _vec3(point_j, where=f"{w}.point_j")
        if abs(n @ (p_j - p_i)) > 1e-9 * max(1.0, float(np.linalg.norm(p_j - p_i))):
            raise ModelError(f"{w}: point_j is not in the plane through point normal to axis")
        self.perpendicular_1(f"{name}.perp1", body_i=body_i, body_j=body_j, axis=n, joint=name)
        self.add_dp2(
            f"{name}.dp2",
            body_i=body_i,
            a_bar_i=self._local_dir(body_i, n, where=w),
            s_bar_p_i=self._local_point(body_i, p_i, where=f"{w}.point"),
            body_j=body_j,
            s_bar_q_j=self._local_point(body_j, p_j, where=f"{w}.point_j"),
            joint=name,
        )
        self._record_joint(
            name, "planar", body_i, body_j, p_i, np.stack([ex, np.cross(n, ex), n], 1)
        )
        return self

    def rotation_driver(self, name, *, body_i, body_j, axis, angle, reference=None):
        """Prescribe the rotation angle(t) of body j relative to body i about ``axis``.

        The angle is measured from the initial configuration when ``angle(0) = 0``: the
        reference direction (default: any vector perpendicular to ``axis``) is taken on both
        bodies at the initial pose. Regular at every angle (see :mod:`jaxmbd.gcons`).
        """
        w = f"driver '{name}'"
        n = _unit(axis, where=f"{w}.axis")
        if reference is None:
            u, v = _perpendicular_pair(n)
        else:
            u = _vec3(reference, where=f"{w}.reference", nonzero=True)
            u = u - n * (n @ u)
            if np.linalg.norm(u) < 1e-9:
                raise ModelError(f"{w}.reference: parallel to the axis")
            u /= np.linalg.norm(u)
            v = np.cross(n, u)
        return self.add_rot(
            name,
            body_i=body_i,
            u_bar_i=self._local_dir(body_i, u, where=w),
            v_bar_i=self._local_dir(body_i, v, where=w),
            body_j=body_j,
            a_bar_j=self._local_dir(body_j, u, where=w),
            angle=angle,
        )

    def _joint_convention(self, name: str, *, offset, sign) -> None:
        """Report joint ``name``'s scalar coordinates as offset + sign * (value from the drawn
        pose) (MJCF: MuJoCo's qpos0 and axis directions)."""
        spec = next(j for j in self._joints if j.name == name)
        n = scalar_size(spec.kind)
        spec.offset = np.asarray(offset, dtype=np.float64).reshape(n)
        spec.sign = tuple(1 if s > 0 else -1 for s in np.reshape(sign, n))
        spec.q_start = spec.offset.copy()

    def _define_joint(
        self, name, *, kind, body_i, body_j, s_bar_i, s_bar_j, frame_i, frame_j, offset=None,
        sign=None, q_start=None,
    ) -> ModelBuilder:  # fmt: skip
        """A joint's coordinates from its frames given in the body frames, without rows
        (model files written by :func:`~jaxmbd.save_model`)."""
        w = f"joint '{name}'"
        self._check_joint_name(name)
        if kind not in SIZES:
            raise ModelError(f"{w}.type: unknown joint type {kind!r}; known: {sorted(SIZES)}")
        self._frame(body_i, where=f"{w}.body_i")
        self._frame(body_j, where=f"{w}.body_j")
        if body_i == body_j:
            raise ModelError(f"{w}: body_i and body_j are both {body_i!r}")
        n, nq = scalar_size(kind), SIZES[kind][0]
        offset = np.zeros(n) if offset is None else _joint_values(offset, n, where=f"{w}.offset")
        sign = [1] * n if sign is None else sign
        if (
            not isinstance(sign, list | tuple)
            or len(sign) != n
            or any(isinstance(v, bool) or v not in (1, -1) for v in sign)
        ):
            raise ModelError(f"{w}.sign: expected {n} entries, each 1 or -1, got {_short(sign)}")
        if q_start is None:
            q_start = np.array([1.0, 0.0, 0.0, 0.0]) if kind == "spherical" else offset.copy()
        self._joints.append(
            _JointSpec(
                name=name,
                kind=kind,
                body_i=body_i,
                body_j=body_j,
                s_bar_i=_vec3(s_bar_i, where=f"{w}.s_bar_i"),
                s_bar_j=_vec3(s_bar_j, where=f"{w}.s_bar_j"),
                frame_i=_rotation_matrix(frame_i, where=f"{w}.frame_i")[0],
                frame_j=_rotation_matrix(frame_j, where=f"{w}.frame_j")[0],
                offset=offset,
                sign=tuple(int(v) for v in sign),
                q_start=_joint_values(q_start, nq, where=f"{w}.q_start", kind=kind),
            )
        )
        return self

    # -- initial state in joint coordinates ------------------------------------------------
    def set_joint_state(self, name: str, *, q=None, qdot=None) -> ModelBuilder:
        """Set the initial state of joint ``name`` in its coordinates (as ``sol.joints[name]``
        reports them, see :mod:`jaxmbd.joints`); applied by :meth:`build`.

        ``q``: revolute, translational: a number; cylindrical: (slide, angle); universal:
        (angle_1, angle_2); spherical: a quaternion (w, x, y, z) (normalised; zero refused);
        planar: (x, y, angle). ``qdot``: the rates, of the same sizes, except spherical: the
        relative angular velocity (3,) in body j's frame. Left out (None), ``q`` keeps the
        pose the joint was drawn in (its zero) and ``qdot`` the bodies' relative velocity.

        At :meth:`build`, parent joints first, each set joint places its child body (the one
        farther from the ground in the spanning tree of the body graph) relative to its
        parent so that the joint reads (q, qdot), whichever of body_i, body_j that is; the
        child's subtree moves with it rigidly, keeping its own motion relative to the child
        (so joints deeper in a chain keep their coordinates). Only joints of the spanning
        tree can be set: one that closes a loop (its bodies already joined by the joints
        added before it) is refused by :meth:`build`; set the loop's other joints, and the
        consistent start of :func:`~jaxmbd.simulate` closes the loop, which may shift the
        set coordinates a little (``sol.joints[name]`` at t = 0 reports the actual value).
        Setting a joint again replaces its state.
        """
        spec = next((j for j in self._joints if j.name == name), None)
        if spec is None:
            raise ModelError(
                f"set_joint_state: unknown joint {name!r}; joints with coordinates: "
                f"{[j.name for j in self._joints]} (add the joint first)"
            )
        where = f"set_joint_state: joint '{name}' ({spec.kind})"
        if q is None and qdot is None:
            raise ModelError(f"{where}: give q, qdot or both")
        nq, nv = SIZES[spec.kind]
        self._joint_states[name] = (
            None if q is None else _joint_values(q, nq, where=f"{where}.q", kind=spec.kind),
            None if qdot is None else _joint_values(qdot, nv, where=f"{where}.qdot"),
        )
        return self

    # -- forces ---------------------------------------------------------------------------
    def add_force(self, force: AbstractForce) -> ModelBuilder:
        """Add an applied force element (see :mod:`jaxmbd.forces`)."""
        if not isinstance(force, AbstractForce):
            raise ModelError(f"add_force: expected a jaxmbd force element, got {type(force)}")
        self._forces.append(force)
        return self

    def _resolved_forces(self) -> tuple[AbstractForce, ...]:
        """``_forces`` with the body indices of the builder's own elements (spring-dampers,
        bushings) resolved now: one added before a later body keeps pointing at its body
        (and the ground at nb)."""
        return tuple(
            dataclasses.replace(f, **{k: self.body_index(b) for k, b in bodies.items()})
            if (bodies := self._force_bodies.get(k)) else f
            for k, f in enumerate(self._forces)
        )  # fmt: skip

    def spring_damper(
        self, name, *, body_i, point_i, body_j, point_j, stiffness, damping=0.0, rest_length
    ):
        """Translational spring-damper between two points (global, initial configuration)."""
        w = f"force '{name}'"
        for key, val in (
            ("stiffness", stiffness),
            ("damping", damping),
            ("rest_length", rest_length),
        ):
            if not (
                isinstance(val, int | float)
                and not isinstance(val, bool)
                and math.isfinite(val)
                and abs(val) <= MAX_MAGNITUDE
                and val >= 0
            ):
                raise ModelError(f"{w}.{key}: must be a non-negative number, got {val!r}")
        from .forces import SpringDamper

        self._force_bodies[len(self._forces)] = {"body_i": body_i, "body_j": body_j}
        return self.add_force(
            SpringDamper(
                body_i=self.body_index(body_i),
                body_j=self.body_index(body_j),
                s_bar_p_i=jnp.asarray(self._local_point(body_i, point_i, where=f"{w}.point_i")),
                s_bar_q_j=jnp.asarray(self._local_point(body_j, point_j, where=f"{w}.point_j")),
                stiffness=jnp.asarray(float(stiffness)),
                damping=jnp.asarray(float(damping)),
                rest_length=jnp.asarray(float(rest_length)),
            )
        )

    def bushing(self, name, body_i, body_j, point, *, stiffness, damping=None, axes=None):
        """A linear 6-DOF spring-damper between ``body_i`` and ``body_j`` (either may be
        "ground") at the global ``point`` of the drawn pose, with global ``axes`` (a 3x3
        rotation, columns = the bushing's x, y, z axes; None: the global axes):
        ``stiffness`` and ``damping`` (6,) along and about those axes, translation first
        (N/m, N m/rad; N s/m, N m s/rad; damping None: zero). Small rotations are measured
        by the rotation vector of the relative rotation (:mod:`jaxmbd.bushing`)."""
        from .bushing import Bushing

        w = f"bushing '{name}'"
        if not isinstance(name, str) or not name:
            raise ModelError(f"bushing name: expected a non-empty string, got {name!r}")
        if any(isinstance(f, Bushing) and f.name == name for f in self._forces):
            raise ModelError(f"{w}: duplicate bushing name")
        if body_i == body_j:
            raise ModelError(f"{w}: body_i and body_j are both {body_i!r}")
        E = np.eye(3)
        if axes is not None:
            E = _rotation_matrix(axes, where=f"{w}.axes")[0]
        frames = {}
        for body, side in ((body_i, "i"), (body_j, "j")):
            _, A = self._frame(body, where=f"{w}.body_{side}")
            frames[f"s_bar_{side}"] = self._local_point(body, point, where=f"{w}.point")
            frames[f"frame_{side}"] = A.T @ E
        return self._add_bushing(name, body_i, body_j, **frames, stiffness=stiffness,
                                 damping=damping)  # fmt: skip

    def _add_bushing(self, name, body_i, body_j, *, s_bar_i, s_bar_j, frame_i, frame_j,
                     stiffness, damping):  # fmt: skip
        """A bushing from its body-frame points and axes (model files, :func:`save_model`)."""
        from .bushing import Bushing

        w = f"bushing '{name}'"
        values = {"s_bar_i": _vec3(s_bar_i, where=f"{w}.s_bar_i"),
                  "s_bar_j": _vec3(s_bar_j, where=f"{w}.s_bar_j")}  # fmt: skip
        for key, value in (("stiffness", stiffness), ("damping", damping)):
            x = np.zeros(6) if value is None else _numbers(value, where=f"{w}.{key}",
                                                           expected="6 numbers")  # fmt: skip
            if x.shape != (6,) or np.any(x < 0):
                raise ModelError(
                    f"{w}.{key}: expected 6 non-negative numbers (x, y, z, rx, ry, rz), got "
                    f"{_short(value)}"
                )
            values[key] = x
        for key, value in (("frame_i", frame_i), ("frame_j", frame_j)):
            values[key] = _rotation_matrix(value, where=f"{w}.{key}")[0]
        self._force_bodies[len(self._forces)] = {"body_i": body_i, "body_j": body_j}
        return self.add_force(
            Bushing(
                name=name, body_i=self.body_index(body_i), body_j=self.body_index(body_j),
                **{k: jnp.asarray(v, dtype=jnp.float64) for k, v in values.items()},
            )
        )  # fmt: skip

    # -- contact (jaxmbd.contact) -----------------------------------------------------------
    def add_ground_plane(self, point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0), *, size=None):
        """Give the ground the plane through ``point`` normal to ``normal`` (global; the
        normal points out of the ground, towards the bodies) as collision geometry;
        ``size`` = (lx, ly): the square drawn."""
        from .geometry import plane

        where = "add_ground_plane"
        self._ground_shapes.append(
            plane(
                _vec3(point, where=f"{where}.point"),
                _unit(normal, where=f"{where}.normal"),
                size=size,
            )
        )
        return self

    def add_ground_shape(self, shape) -> ModelBuilder:
        """Fix a shape (a :mod:`jaxmbd.geometry` shape or its dict, pose in global
        coordinates) to the ground: collision geometry (unless ``collide=False``) and
        drawing."""
        self._ground_shapes.extend(make_shapes(shape, where="add_ground_shape"))
        return self

    def _contact_spec(self, where, body_i, body_j, shapes=None, law=None, **numbers):
        from .contact.build import ContactSpec, check_contact_law, check_contact_numbers

        try:
            values = check_contact_numbers(where, **numbers)
            check_contact_law(where, law)
        except ValueError as err:
            raise ModelError(str(err)) from None
        return ContactSpec(body_i=body_i, body_j=body_j, shapes=shapes, law=law, **values)

    def _shapes_of(self, body: str) -> list[Shape]:
        if body == GROUND:
            return self._ground_shapes
        return self._bodies[self.body_index(body)].shapes

    def _check_shape_pairs(self, where, body_i, body_j, shapes):
        """``add_contact``'s ``shapes``: pairs of indices of colliding shapes, no repeats."""
        if shapes is None:
            return None
        out = []
        lists = (self._shapes_of(body_i), self._shapes_of(body_j))
        if isinstance(shapes, str) or not hasattr(shapes, "__iter__"):
            raise ModelError(f"{where}.shapes: expected pairs (k_i, k_j) of shape indices")
        for pair in shapes:
            ok = isinstance(pair, list | tuple) and len(pair) == 2
            ok = ok and all(isinstance(k, int | np.integer) and not isinstance(k, bool)
                            for k in pair)  # fmt: skip
            if not ok:
                raise ModelError(
                    f"{where}.shapes: expected pairs (k_i, k_j) of shape indices, got {pair!r}"
                )
            for k, body, own in zip(pair, (body_i, body_j), lists, strict=True):
                if not 0 <= k < len(own) or not own[k].collide:
                    colliding = [n for n, s in enumerate(own) if s.collide]
                    raise ModelError(
                        f"{where}.shapes: {body!r} has no colliding shape {k} (its colliding "
                        f"shapes: {colliding})"
                    )
            out.append((int(pair[0]), int(pair[1])))
        if not out or len(set(out)) != len(out):
            raise ModelError(f"{where}.shapes: expected distinct pairs, at least one: {shapes!r}")
        return tuple(out)

    def add_contact(
        self, body_i, body_j, *, friction, restitution=0.0, stiffness=None, damping=None,
        exponent=1.5, slip_velocity=1e-4, shapes=None, law=None,
    ) -> ModelBuilder:  # fmt: skip
        """A contact pair: the colliding shapes of ``body_i`` against those of ``body_j``
        (a body or "ground"), with compliant contact (:mod:`jaxmbd.contact.law`).

        ``friction``: Coulomb's mu; ``restitution``: the coefficient of restitution e in
        [0, 1] (below 0.01 taken as 0.01); ``stiffness``: K of K delta^n (default: from the
        pair's mass and size, :mod:`jaxmbd.contact.build`); ``damping``: Hunt–Crossley's
        chi (s/m) on top of the restitution's damping (None: 0); ``exponent``: n (Hertz: 1.5);
        ``slip_velocity``: the regularisation velocity of friction (m/s). Each is an array
        leaf of ``model.contacts`` (``jax.grad`` reaches it). Bodies joined by a joint may
        be paired here (only :meth:`add_contacts` leaves them out). ``shapes``: the shape
        pairs checked, as (k_i, k_j) indices into the two bodies' shape lists (the ground's:
        its planes and shapes in the order added); default: every pair of colliding shapes
        (MuJoCo's geom-level filters, :mod:`jaxmbd.mjcf`, select pairs this way).
        ``law``: the contact law (:class:`jaxmbd.contact.AbstractContactLaw`; None:
        Hunt–Crossley, :class:`jaxmbd.contact.HuntCrossley`).
        """
        where = f"contact '{body_i}' - '{body_j}'"
        for key, body in (("body_i", body_i), ("body_j", body_j)):
            self._frame(body, where=f"{where}.{key}")
        if body_i == body_j:
            raise ModelError(f"{where}: a body cannot contact itself")
        if body_i == GROUND:
            raise ModelError(f"{where}: give the ground as body_j")
        if any({c.body_i, c.body_j} == {body_i, body_j} for c in self._contacts):
            raise ModelError(f"{where}: duplicate contact pair")
        shapes = self._check_shape_pairs(where, body_i, body_j, shapes)
        self._contacts.append(
            self._contact_spec(
                where, body_i, body_j, shapes, friction=friction, restitution=restitution,
                stiffness=stiffness, damping=damping, exponent=exponent,
                slip_velocity=slip_velocity, law=law,
            )
        )  # fmt: skip
        return self

    def add_contacts(
        self, *, friction, restitution=0.0, stiffness=None, damping=None, exponent=1.5,
        slip_velocity=1e-4, exclude=(),
    ) -> ModelBuilder:  # fmt: skip
        """Contact pairs between all bodies with colliding shapes, the ground included,
        with these parameters (as :meth:`add_contact`), resolved by :meth:`build`: every
        pair not added with :meth:`add_contact`, not in ``exclude`` (pairs of names), not
        joined by a joint (as MuJoCo's parent-child filter; pairs with the ground are kept)
        and with at least one shape pair that has a narrow phase."""
        numbers = dict(friction=friction, restitution=restitution, stiffness=stiffness,
                       damping=damping, exponent=exponent, slip_velocity=slip_velocity)  # fmt: skip
        self._contact_spec("add_contacts", "", "", **numbers)  # validate now
        pairs = []
        for pair in exclude:
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ModelError(f"add_contacts.exclude: expected pairs of names, got {pair!r}")
            pairs.append(frozenset(pair))
        self._all_contacts = {"numbers": numbers, "exclude": pairs}
        return self

    def _contact_element(self, nb: int):
        """The contact element of the pairs added (None without any)."""
        from .contact.build import _Body, build_contact_element
        from .contact.narrow_phase import SLOTS, pair_kind

        bodies = [_Body(b.name, b.mass, tuple(b.shapes)) for b in self._bodies]
        bodies.append(_Body(GROUND, math.inf, tuple(self._ground_shapes)))
        specs = list(self._contacts)
        if self._all_contacts is not None:
            joined = {frozenset((gc.body_i, gc.body_j)) for gc in self._gcons}
            taken = {frozenset((c.body_i, c.body_j)) for c in specs}
            exclude = set(self._all_contacts["exclude"])
            for k, a in enumerate(bodies):
                for b in bodies[k + 1 :]:
                    key = frozenset((a.name, b.name))
                    if key in taken or key in exclude or (key in joined and GROUND not in key):
                        continue
                    kinds = {
                        pair_kind(s.kind, t.kind)[0]
                        for s in a.shapes
                        if s.collide
                        for t in b.shapes
                        if t.collide
                    }
                    if kinds & set(SLOTS):
                        specs.append(
                            self._contact_spec("add_contacts", a.name, b.name,
                                               **self._all_contacts["numbers"])
                        )  # fmt: skip
        try:
            return build_contact_element(bodies, specs, self.gravity)
        except ValueError as err:
            raise ModelError(str(err)) from None

    def body_index(self, name: str) -> int:
        for k, b in enumerate(self._bodies):
            if b.name == name:
                return k
        if name == GROUND:
            return len(self._bodies)
        raise ModelError(f"unknown body {name!r}; known bodies: {[b.name for b in self._bodies]}")

    # -- build ----------------------------------------------------------------------------
    def build(self) -> Model:
        if not self._bodies:
            raise ModelError(f"model '{self.name}': no bodies")
        from ._joint_points import warn_far_joint_points

        warn_far_joint_points(self.name, self._bodies, self._joints)
        g = _vec3(self.gravity, where=f"model '{self.name}'.gravity")
        index = {b.name: k for k, b in enumerate(self._bodies)}
        index[GROUND] = len(self._bodies)
        nc = len(self._gcons)
        f_offset = np.zeros(nc)
        driven: dict[int, Expression] = {}
        sets = []
        for kind in GCON_KINDS:
            members = [(row, gc) for row, gc in enumerate(self._gcons) if gc.kind == kind]

            def stack(key, members=members, alias=None):
                vals = [
                    gc.vectors.get(key, gc.vectors.get(alias, np.zeros(3))) for _, gc in members
                ]
                return jnp.asarray(np.reshape(np.array(vals, dtype=np.float64), (len(members), 3)))

            sets.append(
                GconSet(
                    kind=kind,
                    rows=tuple(row for row, _ in members),
                    body_i=tuple(index[gc.body_i] for _, gc in members),
                    body_j=tuple(index[gc.body_j] for _, gc in members),
                    a_bar_i=stack("a_bar_i", alias="u_bar_i"),
                    b_bar_i=stack("v_bar_i"),
                    a_bar_j=stack("a_bar_j"),
                    s_bar_p_i=stack("s_bar_p_i"),
                    s_bar_q_j=stack("s_bar_q_j"),
                    c=stack("c"),
                )
            )
        for row, gc in enumerate(self._gcons):
            if isinstance(gc.f, Expression) and not gc.f.is_constant:
                driven[row] = gc.f
            elif isinstance(gc.f, Expression):
                f_offset[row] = float(gc.f(0.0))
            else:
                f_offset[row] = gc.f
        bodies = self._bodies
        joint_defs = tuple(spec.definition(index) for spec in self._joints)
        # joint forces act on one-coordinate joints and the cylindrical joints' coordinates
        from ._joint_forces import coordinate_views

        views = coordinate_views(joint_defs)
        clash = sorted({d.name for d in views} & {d.name for d in joint_defs})
        if clash:
            raise ModelError(
                f"model '{self.name}': joint names {clash} are also the coordinates of "
                "cylindrical joints ('<joint>.slide', '<joint>.angle'); rename them"
            )
        force_defs = joint_defs + views
        model = Model(
            name=self.name,
            body_names=tuple(b.name for b in bodies),
            constraint_names=tuple(gc.name for gc in self._gcons),
            constraint_kinds=tuple(gc.kind for gc in self._gcons),
            constraint_joints=tuple(gc.joint for gc in self._gcons),
            constraint_bodies=tuple((index[gc.body_i], index[gc.body_j]) for gc in self._gcons),
            mass=jnp.asarray([b.mass for b in bodies]),
            inertia=jnp.asarray(np.stack([b.inertia for b in bodies])),
            gravity=jnp.asarray(g),
            r0=jnp.asarray(np.stack([b.r for b in bodies])),
            A0=jnp.asarray(np.stack([b.A for b in bodies])),
            rdot0=jnp.asarray(np.stack([b.rdot for b in bodies])),
            omega0=jnp.asarray(np.stack([b.omega for b in bodies])),
            gcons=tuple(sets),
            f_offset=jnp.asarray(f_offset),
            drivers=group_drivers(driven),
            forces=self._resolved_forces()
            + _optional(self._contact_element(len(bodies)))
            + self._limits_element(index, force_defs)
            + self._dynamics_element(force_defs)
            + self._actuator_element(force_defs),
            shapes=tuple(b.shapes for b in bodies) if any(b.shapes for b in bodies) else (),
            ground_shapes=tuple(self._ground_shapes),
            joints=joint_defs,
            sensors=self._sensor_element(index, joint_defs),
            markers=markers_from_specs(self._markers, index),
        )
        # the rank of the constraints as drawn (before any joint state is applied)
        model = dataclasses.replace(model, redundancy=find_redundancy(model))
        return self._with_joint_states(model)

    def _with_joint_states(self, model: Model) -> Model:
        """``model`` with the states of :meth:`set_joint_state` applied (parent joints first)."""
        if not self._joint_states:
            return model
        r0, A0, rdot0, omega0, joints = place_joint_states(model, self._joint_states)
        return dataclasses.replace(
            model,
            r0=jnp.asarray(r0),
            A0=jnp.asarray(A0),
            rdot0=jnp.asarray(rdot0),
            omega0=jnp.asarray(omega0),
            joints=joints,
        )
