"""Sensors: named measurements of a model, read from a run as ``sol.sensors[name]`` (T, dim).

A sensor is model data (:meth:`~jaxmbd.ModelBuilder.add_sensor`, MJCF ``<sensor>``,
:mod:`jaxmbd.mjcf._sensors`): what it measures, where, and the standard deviation of its
noise. Its readings are computed after the run from the Solution's body states (r, A,
r_dot, body-frame omega), accelerations (r_ddot, body-frame omegadot) and multipliers,
vectorised over the steps, so they are exact functions of each saved step (no extra
solve), work under ``jit``, ``vmap`` and ``grad``, and cost nothing in the run itself.

A body sensor sits at a **site** on its body: a point ``s`` (body frame, from the centre of
mass, which is the body frame's origin) with axes ``F`` (3x3, the site's x, y, z as
columns in body coordinates; the identity by default). With p = r + A s the site's point
and g the model's gravity:

======================== ===== =================================================================
kind                     dim   reading
======================== ===== =================================================================
joint_position           nq    the joint's coordinates q (``sol.joints[name].q``, unwrapped)
joint_velocity           nv    their rates qdot (a spherical joint: angular velocity)
body_position            3     p (global)
body_quaternion          4     unit quaternion (w, x, y, z) of A F (site to global), w >= 0
body_linear_velocity     3     p_dot = r_dot + A (omega x s) (global)
body_angular_velocity    3     A omega (global)
velocimeter              3     F^T A^T p_dot (site frame)
gyro                     3     F^T omega (site frame)
accelerometer            3     F^T A^T (p_ddot - g), p_ddot = r_ddot + A (omegadot x s +
                               omega x (omega x s)): the proper acceleration in the site frame
joint_reaction_force     3     force of body i on body j through the joint, joint axes on j
joint_reaction_torque    3     its torque about the joint point, same axes
body_x_axis (y, z)       3     the site's x (y, z) axis A F e_x (global)
subtree_com              3     centre of mass of the body's subtree (global)
subtree_linear_velocity  3     its velocity
subtree_angular_momentum 3     the subtree's angular momentum about its centre of mass
touch                    1     normal forces of the body's contacts in the site's zone, summed
rangefinder              1     distance along the site's z axis to the nearest of its target
                               shapes' surfaces, -1 where it meets none
interaction_force        3     force the body receives from its parent (site axes)
interaction_torque       3     its moment about the site (site axes)
actuator_force           1     an actuator's force (before the gear)
joint_actuator_force     1     sum of gear x force of the actuators on a joint
======================== ===== =================================================================

(MuJoCo's ``jointpos``, ``jointvel``, ``framepos``, ``framequat``, ``framelinvel``,
``frameangvel``, ``velocimeter``, ``gyro``, ``accelerometer``, ``framexaxis``, ...,
``subtreecom``, ``subtreelinvel``, ``subtreeangmom``, ``touch``, ``rangefinder``,
``force``, ``torque``,
``actuatorfrc`` and ``jointactuatorfrc``: at rest the accelerometer reads -g, +9.81
upwards.) The frame kinds may sit on the ground (``model.nb``: a fixed site) and read
against a reference frame; the kinds after the joint reactions keep their options in the
mount's ``params`` (:mod:`jaxmbd.sensors._kinds`, where each is defined).

The quaternion is taken on the hemisphere w >= 0 at every step, so that a reading is a
function of the current state alone (a policy sees the same number as ``sol.sensors``);
compare quaternions up to sign (MuJoCo's keeps the sign of its integration).

**Actuator forces** read the controls held over each row's step (``sol.controls``, the
run's ``controls=``; the model's own where the run had none; after a policy run, whose
replies are not kept, NaN) and, for actuators with activation dynamics, the row's
activations (``sol.act``: MuJoCo's force at the row's qpos, qvel and act); like the
accelerometer they depend on the controls being chosen, so a policy cannot observe them.

**Joint reactions** come from the joint's constraint multipliers: the generalised load on
body j is -[Phi_r, Pi_bar(Phi)]_j^T lam over the joint's rows (paper 1 eq. 34c; the force
f at the centre of mass, global, and the torque n_bar about it, body frame), moved to the
joint point s_j and expressed in the joint's axes E on body j (:func:`joint_axes`: its frame
``frame_j`` in body j's coordinates, :mod:`jaxmbd.model.joints`, with the joint axis first for
revolute, translational, cylindrical and planar joints, so that the components read axial,
then radial; the convention of ``diagnostics.reaction_forces(per="joint", at="joint",
frame="joint")``):

    force  = E^T A_j^T f,        torque = E^T (n_bar - s_j x A_j^T f).

A revolute joint's torque about its own axis (the first component) is zero unless a driver
acts on it.

Joints of a closed loop have them as well (MuJoCo's ``force``/``torque`` sensors need a
site on a tree, and read the loop's equality forces only in aggregate). A redundant row
(:mod:`jaxmbd.constraints.redundancy`) was dropped for the run and carries zero: in an
overconstrained loop the split of the internal force among the joints is the one of the
rows that were kept (the resultant on each body is unique, the split is not).

**Noise**: a sensor's ``noise`` is the standard deviation of zero-mean Gaussian noise (one
number per sensor, the same for its components; an array leaf, so it can be batched or
differentiated). It is applied only when :func:`~jaxmbd.simulate` gets ``sensor_key=`` (a
``jax.random`` key): reading j of step k (k counts steps from t = 0, so rows saved with
``save_every`` keep their steps' noise) gets ``noise * normal(fold_in(fold_in(key, k),
j))``; the same key gives the same readings, and the policy of ``simulate(policy=)`` sees
exactly these noisy values. Without a key the readings are noise-free: a run stays
deterministic and its gradients clean unless noise is asked for. (MuJoCo stores ``noise``
but does not apply it.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.jit import jit
from ..constraints.equations import rA_terms_rows
from ..model.joints import JointDefinition, JointKind, joint_coordinates, joint_kind
from . import _kinds as K


class SensorInput(NamedTuple):
    """What a sensor reads along one run, time first: ``t`` (T,), ``r``, ``A``, ``rdot``,
    ``omega`` (body frame), ``rddot``, ``omegadot`` (body frame) over the moving bodies
    (T, nb, ...), and the multipliers ``lam`` (T, nc)."""

    t: jax.Array
    r: jax.Array
    A: jax.Array
    rdot: jax.Array
    omega: jax.Array
    rddot: jax.Array
    omegadot: jax.Array
    lam: jax.Array
    #: the actuators' controls (T, nu) at each row; None: the actuators' own ``controls``
    controls: jax.Array | None = None
    #: the activations (T, na) at each row (MuJoCo's ``act`` layout); None: the actuators'
    #: own ``activation``
    act: jax.Array | None = None
    #: the contacts of MuJoCo's constraint model and their solved forces at each row
    #: (:class:`~jaxmbd.soft_constraints.contact_forces.ConstraintForces`, rows first),
    #: where the run solved that model; None: the compliant law's contacts
    contacts: object | None = None


class SensorMount(NamedTuple):
    """Where a sensor sits: a joint sensor's ``joint`` (its :class:`JointDefinition`), or a
    body sensor's ``body`` (model index; ``model.nb``: the ground), ``site`` (3,) and
    ``frame`` (3, 3); ``params``: the kind's further options (a reference frame, a subtree,
    a touch zone, actuators: :mod:`jaxmbd.sensors._kinds`), or None."""

    joint: JointDefinition | None
    body: int
    site: jax.Array
    frame: jax.Array
    params: object = None


@dataclass(frozen=True)
class SensorKind:
    """One sensor kind.

    ``attached_to``: ``"joint"`` or ``"body"`` (what :meth:`~jaxmbd.ModelBuilder.add_sensor`
    asks for). ``read(model, mount, run)``: the noise-free reading (T, dim) from a
    :class:`SensorMount` and a :class:`SensorInput`, traceable (``jit``, ``vmap``,
    ``grad``). ``dim``: the number of components, or a function of the joint's
    :class:`~jaxmbd.model.joints.JointKind` for a joint sensor. ``needs_solution``: the reading
    needs the step's accelerations or multipliers, so a policy cannot observe it at the
    step's start. Add a kind with :func:`register_sensor_kind`."""

    name: str
    attached_to: str
    read: Callable
    dim: int | Callable[[JointKind], int] = 3
    needs_solution: bool = False
    #: the builder option that sets the mount's ``params`` (:meth:`~jaxmbd.ModelBuilder.
    #: add_sensor`): "reference", "subtree", "zone", "targets", "actuator" or
    #: "joint_actuators"; None
    params: str | None = None
    #: the sensor may sit on the ground (a fixed frame, or the whole model's subtree)
    on_ground: bool = False
    #: the reading needs a run's joint multipliers: no single state gives it
    needs_run: bool = False
    #: the reading needs the solved contact forces where the run solved MuJoCo's
    #: constraint model (:attr:`SensorInput.contacts`): the run keeps them for it
    needs_contacts: bool = False

    def size(self, joint: str | JointKind | None = None) -> int:
        """Components of a sensor of this kind (on a joint of kind ``joint``)."""
        return self.dim(joint_kind(joint)) if callable(self.dim) else int(self.dim)


_REGISTRY: dict[str, SensorKind] = {}
_BUILT_IN: set[str] = set()


def register_sensor_kind(spec: SensorKind) -> SensorKind:
    """Make a sensor kind known by its name to :meth:`~jaxmbd.ModelBuilder.add_sensor` (and
    model files); returns it. Registering a name again replaces its record; the built-in
    names are refused."""
    if not isinstance(spec, SensorKind):
        raise TypeError(f"register_sensor_kind: expected a SensorKind, got {spec!r}")
    if spec.attached_to not in ("joint", "body", "model"):
        raise ValueError(f"sensor kind {spec.name!r}: attached_to must be 'joint', 'body' or "
                         f"'model', got {spec.attached_to!r}")  # fmt: skip
    if spec.name in _BUILT_IN and _REGISTRY[spec.name] != spec:
        raise ValueError(f"sensor kind {spec.name!r} is built in; give yours another name")
    _REGISTRY[spec.name] = spec
    return spec


def sensor_kind(name: str) -> SensorKind:
    """The record of the sensor kind ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown sensor kind {name!r}; known: {list(_REGISTRY)}") from None


class _Attachments(Mapping):
    """{kind name: "joint" or "body"} of every registered sensor kind (a live view)."""

    def __getitem__(self, name: str) -> str:
        return _REGISTRY[name].attached_to

    def __iter__(self) -> Iterator[str]:
        return iter(_REGISTRY)

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


#: The sensor kinds of :meth:`~jaxmbd.ModelBuilder.add_sensor` and what each is attached to.
SENSOR_KINDS: Mapping[str, str] = _Attachments()


def sensor_dim(kind: str, joint_kind: str | None = None) -> int:
    """Number of components of a sensor of ``kind`` (on a joint of ``joint_kind``)."""
    return sensor_kind(kind).size(joint_kind)


class Sensors(eqx.Module):
    """Every sensor of a model (``model.sensors``; see the module docstring), in the order
    they were added. Static: ``sensor_names``, ``kinds``, ``dims``, ``bodies`` (the body's
    model index; -1 for joint sensors) and ``joints`` (the joint's name, one of
    ``model.joint_names``; None for body sensors). Array leaves: ``site`` (n, 3) and
    ``frame`` (n, 3, 3) in body coordinates (zero and the identity for joint sensors),
    ``noise`` (n,); ``params``: each sensor's further options (None where its kind has
    none; :class:`SensorMount`), () where no sensor has any."""

    sensor_names: tuple[str, ...] = eqx.field(static=True)
    kinds: tuple[str, ...] = eqx.field(static=True)
    dims: tuple[int, ...] = eqx.field(static=True)
    bodies: tuple[int, ...] = eqx.field(static=True)
    joints: tuple[str | None, ...] = eqx.field(static=True)
    site: jax.Array
    frame: jax.Array
    noise: jax.Array
    params: tuple = ()

    @property
    def size(self) -> int:
        """Length of the sensor vector (the sum of the sensors' dims)."""
        return int(sum(self.dims))

    def slices(self) -> dict[str, slice]:
        """Each sensor's slice of the sensor vector."""
        ends = np.cumsum((0,) + self.dims)
        return {n: slice(int(a), int(b)) for n, a, b in zip(self.sensor_names, ends[:-1],
                                                            ends[1:], strict=True)}  # fmt: skip

    def index(self, name: str) -> int:
        try:
            return self.sensor_names.index(name)
        except ValueError:
            raise KeyError(f"no sensor {name!r}; the model's sensors are "
                           f"{list(self.sensor_names)}") from None  # fmt: skip


def _t(M):
    return jnp.swapaxes(M, -1, -2)


def _mv(M, v):
    return (M @ v[..., None])[..., 0]


def _reaction(model, defn: JointDefinition, t, r, A, lam):
    """(force, torque) (T, 3) each of the joint ``defn`` on its body j at the joint point,
    in the joint frame on body j (module docstring), from the multipliers ``lam`` (T, nc)."""
    rows = [k for k, j in enumerate(model.constraint_joints) if j == defn.name]
    if not rows:
        raise ValueError(f"sensor on joint '{defn.name}': the model has no constraint rows "
                         "of that joint")  # fmt: skip
    bj = defn.body_j
    # the row's Jacobian block on body j: jac_j where j is the row's body j, else jac_i
    on_j = np.array([model.constraint_bodies[k][1] == bj for k in rows])
    idx = np.asarray(rows, dtype=int)

    def one(t, r, A, lam):
        zero = jnp.zeros_like(r)
        _, jac_i, jac_j, _, _ = rA_terms_rows(model, r, A, zero, zero, t)
        block = jnp.where(on_j[:, None], jac_j[idx], jac_i[idx])  # (rows, 6)
        return -(block.T @ lam[idx])

    load = jax.vmap(one)(t, r, A, lam)  # (T, 6): force (global), torque (body j frame)
    f, n_bar = load[:, :3], load[:, 3:]
    if bj < r.shape[-2]:
        A_j = A[:, bj]
    else:  # the ground
        A_j = jnp.broadcast_to(jnp.eye(3, dtype=A.dtype), A[:, 0].shape)
    f_bar = _mv(_t(A_j), f)
    torque = n_bar - jnp.cross(defn.s_bar_j, f_bar)
    axes = joint_axes(defn)
    return _mv(_t(axes), f_bar), _mv(_t(axes), torque)


def joint_axes(defn: JointDefinition):
    """The axes (columns, body j's coordinates) in which a joint's reactions are given: its
    frame on body j with the joint axis first for revolute, translational, cylindrical and
    planar joints (axial, then radial components), as
    ``diagnostics.reaction_forces(..., at="joint", frame="joint")``."""
    if joint_kind(defn.kind).axis_last:
        return defn.frame_j[:, np.array([2, 0, 1])]
    return defn.frame_j


def _joint(model, name: str) -> JointDefinition:
    for defn in model.joints:
        if defn.name == name:
            return defn
    raise ValueError(f"sensor on joint '{name}': model '{model.name}' has no such joint "
                     f"(joints: {list(model.joint_names)})")  # fmt: skip


# ----------------------------------------------------------------------------- the kinds


def _coordinates(mount, run):
    return joint_coordinates(mount.joint, run.r, run.A, run.rdot, run.omega)


def _per_step(value):
    return jnp.reshape(value, (value.shape[0], -1))


def _read_joint_position(model, mount, run):
    return _per_step(_coordinates(mount, run).q)


def _read_joint_velocity(model, mount, run):
    return _per_step(_coordinates(mount, run).qdot)


def _read_reaction_force(model, mount, run):
    return _reaction(model, mount.joint, run.t, run.r, run.A, run.lam)[0]


def _read_reaction_torque(model, mount, run):
    return _reaction(model, mount.joint, run.t, run.r, run.A, run.lam)[1]


def _read_gyro(model, mount, run):
    return _mv(_t(mount.frame), run.omega[:, mount.body])


def _site_velocity(mount, run):
    """The site's velocity in the body frame."""
    b = mount.body
    A_b, w = run.A[:, b], run.omega[:, b]
    return _mv(_t(A_b), run.rdot[:, b]) + jnp.cross(w, mount.site)


def _read_velocimeter(model, mount, run):
    return _mv(_t(mount.frame), _site_velocity(mount, run))


def _read_accelerometer(model, mount, run):
    b, s = mount.body, mount.site
    A_b, w = run.A[:, b], run.omega[:, b]
    a_bar = _mv(_t(A_b), run.rddot[:, b] - model.gravity)
    a_bar = a_bar + jnp.cross(run.omegadot[:, b], s) + jnp.cross(w, jnp.cross(w, s))
    return _mv(_t(mount.frame), a_bar)


_FRAME = dict(params="reference", on_ground=True)

for _spec in (
    SensorKind("joint_position", "joint", _read_joint_position, lambda j: j.nq),
    SensorKind("joint_velocity", "joint", _read_joint_velocity, lambda j: j.nv),
    SensorKind("body_position", "body", K.read_frame_position, **_FRAME),
    SensorKind("body_quaternion", "body", K.read_frame_quaternion, 4, **_FRAME),
    SensorKind("body_linear_velocity", "body", K.read_frame_linear_velocity, **_FRAME),
    SensorKind("body_angular_velocity", "body", K.read_frame_angular_velocity, **_FRAME),
    SensorKind("body_x_axis", "body", K.read_frame_x_axis, **_FRAME),
    SensorKind("body_y_axis", "body", K.read_frame_y_axis, **_FRAME),
    SensorKind("body_z_axis", "body", K.read_frame_z_axis, **_FRAME),
    SensorKind("subtree_com", "body", K.read_subtree_com, params="subtree", on_ground=True),
    SensorKind(
        "subtree_linear_velocity",
        "body",
        K.read_subtree_linear_velocity,
        params="subtree",
        on_ground=True,
    ),
    SensorKind(
        "subtree_angular_momentum",
        "body",
        K.read_subtree_angular_momentum,
        params="subtree",
        on_ground=True,
    ),
    SensorKind("touch", "body", K.read_touch, 1, params="zone", needs_contacts=True),
    SensorKind("rangefinder", "body", K.read_rangefinder, 1, params="targets", on_ground=True),
    SensorKind(
        "interaction_force",
        "body",
        K.read_interaction_force,
        needs_solution=True,
        params="interaction",
    ),
    SensorKind(
        "interaction_torque",
        "body",
        K.read_interaction_torque,
        needs_solution=True,
        params="interaction",
    ),
    SensorKind(
        "actuator_force", "model", K.read_actuator_force, 1, needs_solution=True, params="actuator"
    ),
    SensorKind(
        "joint_actuator_force",
        "model",
        K.read_joint_actuator_force,
        1,
        needs_solution=True,
        params="joint_actuators",
    ),
    SensorKind("velocimeter", "body", _read_velocimeter),
    SensorKind("gyro", "body", _read_gyro),
    SensorKind("accelerometer", "body", _read_accelerometer, needs_solution=True),
    SensorKind(
        "joint_reaction_force", "joint", _read_reaction_force, needs_solution=True, needs_run=True
    ),
    SensorKind(
        "joint_reaction_torque", "joint", _read_reaction_torque, needs_solution=True, needs_run=True
    ),
):
    register_sensor_kind(_spec)
    _BUILT_IN.add(_spec.name)
del _spec

#: The built-in kinds that need the step's accelerations or multipliers (solved with the
#: step's controls): a policy cannot observe them at the step's start.
SOLVED_KINDS = tuple(name for name, spec in _REGISTRY.items() if spec.needs_solution)


def _mount(model, sensors: Sensors, k: int) -> SensorMount:
    spec = sensor_kind(sensors.kinds[k])
    params = sensors.params[k] if sensors.params else None
    if spec.attached_to == "joint":
        joint = _joint(model, sensors.joints[k])
        return SensorMount(joint, -1, sensors.site[k], sensors.frame[k], params)
    return SensorMount(None, sensors.bodies[k], sensors.site[k], sensors.frame[k], params)


def _one_sensor(model, sensors: Sensors, k: int, run: SensorInput):
    """Noise-free reading (T, dim) of sensor ``k`` along one run (time first)."""
    return sensor_kind(sensors.kinds[k]).read(model, _mount(model, sensors, k), run)


def _noise(sensors: Sensors, k: int, key, steps, dim: int):
    """noise_k * N(0, 1) of sensor ``k`` at the steps ``steps`` (T,): (T, dim)."""

    def draw(step):
        return jax.random.normal(jax.random.fold_in(jax.random.fold_in(key, step), k), (dim,))

    return sensors.noise[k] * jax.vmap(draw)(steps)


def readings(model, names, t, r, A, rdot, omega, rddot, omegadot, lam, *, key=None, steps=None,
             controls=None, act=None, contacts=None):  # fmt: skip
    """Readings {name: (T, dim)} of the sensors ``names`` of ``model`` along one run (time
    first, no batch axis); with ``key``, the noise of the steps ``steps`` (T,) added;
    ``controls`` (T, nu): the actuators' controls at each row (None: their own); ``act``
    (T, na): the activations at each row (None: the actuators' own); ``contacts``: the
    solved contacts at each row (:attr:`SensorInput.contacts`)."""
    sensors = model.sensors
    run = SensorInput(t, r, A, rdot, omega, rddot, omegadot, lam, controls, act, contacts)
    out = {}
    for name in names:
        k = sensors.index(name)
        value = _one_sensor(model, sensors, k, run)
        if key is not None:
            value = value + _noise(sensors, k, key, steps, value.shape[-1])
        out[name] = value
    return out


def observation_vector(model, t, state_rAvw, *, key=None, step=None, where: str = "simulate"):
    """The sensor vector (size,) of ``model`` at one state (r, A, rdot, omega) (a policy's
    observation): the sensors in model order, concatenated; with ``key``, the noise of step
    ``step``. Sensors whose kind ``needs_solution`` are refused: their values need the step's
    accelerations and multipliers, which depend on the controls being chosen. Joint angles
    are on the branch nearest the joint's start (one state has no history to unwrap)."""
    sensors = model.sensors
    solved = [n for n, name in zip(sensors.sensor_names, sensors.kinds, strict=True)
              if sensor_kind(name).needs_solution]  # fmt: skip
    if solved:
        raise ValueError(
            f"{where}: the policy's observation is model '{model.name}''s sensor vector, but "
            f"sensors {solved} need the step's accelerations or joint multipliers, which are "
            "solved with the controls the policy is choosing at the step's start; remove them "
            "from the model for a policy run (read them after the run as sol.sensors[name])"
        )
    r, A, rdot, omega = (jnp.asarray(x)[None] for x in state_rAvw)
    t = jnp.reshape(jnp.asarray(t, jnp.float64), (1,))
    zero = jnp.zeros_like(r)
    lam = jnp.zeros((1, model.nc))
    steps = None if step is None else jnp.reshape(step, (1,))
    values = readings(model, sensors.sensor_names, t, r, A, rdot, omega, zero, zero, lam,
                      key=key, steps=steps)  # fmt: skip
    return jnp.concatenate([values[n][0] for n in sensors.sensor_names])


@jit
def _all_readings(model, key, save_every: int, arrays):
    """Every sensor's readings along a Solution's ``arrays`` (t, r, A, rdot, omega, rddot,
    omegadot, lam, controls or None, act or None, solved contacts or None), a batch's
    leading axes first: one compiled program per model structure (op by op, a few hundred
    small dispatches per sensor)."""

    def run(model, key, *arrays):
        steps = jnp.arange(arrays[0].shape[0]) * save_every
        return readings(model, model.sensors.sensor_names, *arrays[:8], key=key, steps=steps,
                        controls=arrays[8], act=arrays[9], contacts=arrays[10])  # fmt: skip

    for _ in range(arrays[0].ndim - 1):  # every leaf of a batched Solution has the batch axes
        run = jax.vmap(run, in_axes=(0, None if key is None else 0) + (0,) * 11)
    return run(model, key, *arrays)


class SensorReadings(Mapping):
    """``sol.sensors``: a read-only mapping from sensor names to their readings (T, dim)
    (a batch's leading axes first), computed from the Solution when read.
    :meth:`vector` concatenates them in model order."""

    def __init__(self, model, sol, key=None):
        self._model, self._sol, self._key = model, sol, key

    def _names(self) -> tuple[str, ...]:
        return () if self._model is None else self._model.sensors.sensor_names

    def _read(self):
        sol = self._sol
        kinds = () if self._model is None else self._model.sensors.kinds
        touch = [n for n, k in zip(self._names(), kinds, strict=True) if k == "touch"]
        if touch and getattr(sol, "unilateral_forces", None) is not None:
            raise ValueError(
                f"sensors {touch}: touch sensors read the compliant contact law; this run "
                "used contact='hard', whose contact forces are sol.contact's"
            )
        arrays = (sol.t, sol.r, sol.A, sol.rdot, sol.omega, sol.rddot, sol.omegadot, sol.lam,
                  getattr(sol, "controls", None), getattr(sol, "act", None),
                  getattr(sol, "solved_contacts", None))  # fmt: skip
        return _all_readings(self._model, self._key, sol.save_every, arrays)

    def _unread(self, names) -> None:
        """Refuses the sensors among ``names`` that read contact forces, on bodies with
        contact pairs, where the run's contacts were MuJoCo's constraint model's rows and the
        Solution did not keep their solved forces (the readers would take the compliant
        law's)."""
        plan = getattr(self._sol, "plan", None)
        constraints = getattr(self._model, "constraint_model", None)
        kept = getattr(self._sol, "soft_row_forces", None) is not None
        if plan is None or plan.contact != "soft" or constraints is None or kept:
            return
        sensors = self._model.sensors
        touched = {b for g in constraints.contacts for b in (*g.body1, *g.body2)}
        touch = [
            n for n in names
            if sensor_kind(sensors.kinds[sensors.index(n)]).needs_contacts
            and _mount(self._model, sensors, sensors.index(n)).body in touched
        ]  # fmt: skip
        if touch:
            raise ValueError(
                f"sensors {touch} read contact forces; this Solution of MuJoCo's constraint "
                "model (contact='soft') did not keep the solved ones (a policy run's "
                "observation, or a Solution built by hand): run it with simulate() and "
                "read sol.sensors, or step the model's environment (jaxmbd.envs), whose "
                "observations read the solved contact forces"
            )

    def __getitem__(self, name: str):
        if name not in self._names():
            known = list(self._names())
            raise KeyError(
                f"no sensor {name!r}; the model's sensors are {known}"
                if known
                else f"no sensor {name!r}; this Solution has no sensors (a model's sensors "
                "come from ModelBuilder.add_sensor or MJCF <sensor>; a Solution read from a "
                "file has none)"
            )
        self._unread([name])
        return self._read()[name]

    def vector(self):
        """All readings concatenated in model order (..., T, size): the layout of a
        policy's observation."""
        self._unread(self._names())
        values = self._read()
        return jnp.concatenate([values[n] for n in self._names()], axis=-1)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        s = self._model.sensors if self._model is not None else None
        items = "" if s is None else ", ".join(
            f"{n!r}: {k} ({d})" for n, k, d in zip(s.sensor_names, s.kinds, s.dims, strict=True)
        )  # fmt: skip
        return f"SensorReadings({{{items}}})"


__all__ = [
    "SENSOR_KINDS",
    "SOLVED_KINDS",
    "SensorInput",
    "SensorKind",
    "SensorMount",
    "SensorReadings",
    "Sensors",
    "joint_axes",
    "register_sensor_kind",
    "sensor_dim",
    "sensor_kind",
]
