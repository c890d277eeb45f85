"""dm_control's suite files (``dm_control/suite/<domain>.xml``, read from the installed
package) as jaxmbd models, with the MuJoCo quantities the tasks read that are constants of
the file: time steps, sizes, and the frames of sites and geoms on the tree's bodies."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..io import load_model
from ..model import Model
from ..soft_constraints.model import any_contact
from ..tree import poses
from ._model_env import physics_of


def suite_file(domain: str) -> str:
    """The path of dm_control's ``suite/<domain>.xml``."""
    try:
        import dm_control  # noqa: PLC0415  (optional dependency)
    except ImportError as err:
        raise ImportError(
            f"jaxmbd.envs: the '{domain}' tasks read dm_control's model files: pip install "
            "dm_control"
        ) from err
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{domain}.xml")


class SuiteModel:
    """A suite file read twice: ``model`` (jaxmbd, joint coordinates; the file's
    unsupported entries, sensors among them, ignored quietly) and ``mj`` (MuJoCo's
    compiled model, for the file's constants); ``spec``: the file as the task edits it
    (a ``mujoco.MjSpec``, as dm_control's quadruped tasks edit theirs), read instead.
    :meth:`frame` places a MuJoCo site, geom or body on the tree body that carries it."""

    def __init__(self, domain: str, *, spec=None):
        import mujoco  # noqa: PLC0415  (optional dependency)

        self.path = suite_file(domain)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model: Model = load_model(self.path if spec is None else spec)
        self.mj = mujoco.MjModel.from_xml_path(self.path) if spec is None else spec.compile()
        self._data = mujoco.MjData(self.mj)
        mujoco.mj_forward(self.mj, self._data)
        self._mujoco = mujoco

    @property
    def timestep(self) -> float:
        return float(self.mj.opt.timestep)

    def id(self, kind: str, name: str) -> int:
        """MuJoCo's index of the ``kind`` ("body", "geom", "site", "joint") named ``name``."""
        if kind not in _NAMED_OBJTYPES:
            raise ValueError(f"no MuJoCo object kind {kind!r}; known: {list(_NAMED_OBJTYPES)}")
        obj = getattr(self._mujoco.mjtObj, _NAMED_OBJTYPES[kind])
        i = self._mujoco.mj_name2id(self.mj, obj, name)
        if i < 0:
            raise ValueError(f"{self.path}: no {kind} named '{name}'")
        return int(i)

    def frame(self, kind: str, name: str):
        """(tree body index, position (3,), rotation (3, 3)) of the ``kind`` ("site",
        "geom", "body") ``name`` in the frame of the tree body that carries it (-1 and
        world coordinates: fixed to the world). Read at the file's qpos0 (``mj_forward``),
        where the tree's body frames are MuJoCo's."""
        i = self.id(kind, name)
        d, mj = self._data, self.mj
        what = _object_kind(kind)
        x, R = getattr(d, what.xpos)[i], getattr(d, what.xmat)[i].reshape(3, 3)
        owner = self._owner(what.body(mj, i))
        if owner == 0:
            return -1, np.array(x), np.array(R)
        names = self.model.tree.body_names
        b = names.index(self._mujoco.mj_id2name(mj, self._mujoco.mjtObj.mjOBJ_BODY, owner))
        xb, Rb = d.xpos[owner], d.xmat[owner].reshape(3, 3)
        return b, Rb.T @ (x - xb), Rb.T @ R

    def _owner(self, body: int) -> int:
        """MuJoCo's body that carries ``body``: itself, or the first ancestor with joints
        (0: the world), whose frame is a tree body's."""
        while body > 0 and self.mj.body_jntnum[body] == 0:
            body = int(self.mj.body_parentid[body])
        return body

    def inertial(self, name: str):
        """(tree body index, mass, centre of mass (3,), inertia about it (3, 3)) of MuJoCo's
        body ``name`` alone (not its children), in the frame of the tree body that carries
        it (a body welded to its parent is part of a tree body), read at qpos0."""
        i = self.id("body", name)
        b, _, _ = self.frame("body", name)
        d, mj = self._data, self.mj
        owner = self._owner(i)
        xb, Rb = d.xpos[owner], d.xmat[owner].reshape(3, 3)
        Ri = d.ximat[i].reshape(3, 3)
        inertia = Ri @ np.diag(mj.body_inertia[i]) @ Ri.T
        return b, float(mj.body_mass[i]), Rb.T @ (d.xipos[i] - xb), Rb.T @ inertia @ Rb


@dataclass(frozen=True)
class _ObjectKind:
    """A MuJoCo object kind that :meth:`SuiteModel.frame` places: its ``mjtObj`` name, the
    body that carries object i, and its ``mjData`` position and rotation fields."""

    objtype: str
    body: Callable[[object, int], int]
    xpos: str
    xmat: str


_OBJECT_KINDS = {
    "body": _ObjectKind("mjOBJ_BODY", lambda mj, i: i, "xpos", "xmat"),
    "geom": _ObjectKind("mjOBJ_GEOM", lambda mj, i: int(mj.geom_bodyid[i]), "geom_xpos",
                        "geom_xmat"),
    "site": _ObjectKind("mjOBJ_SITE", lambda mj, i: int(mj.site_bodyid[i]), "site_xpos",
                        "site_xmat"),
}  # fmt: skip


#: The ``mjtObj`` of every kind :meth:`SuiteModel.id` finds by name: joints too (their
#: qpos addresses), which carry no frame.
_NAMED_OBJTYPES = {**{k: v.objtype for k, v in _OBJECT_KINDS.items()}, "joint": "mjOBJ_JOINT"}


def _object_kind(kind: str) -> _ObjectKind:
    try:
        return _OBJECT_KINDS[kind]
    except KeyError:
        raise ValueError(f"no MuJoCo object kind {kind!r}; known: {list(_OBJECT_KINDS)}") from None


@dataclass(frozen=True)
class _Uniform:
    """qpos[adr] uniform in [lo, hi]."""

    adr: int
    lo: float
    hi: float

    def draw(self, key, qpos):
        return qpos.at[self.adr].set(jax.random.uniform(key, (), qpos.dtype, self.lo, self.hi))


@dataclass(frozen=True)
class _Quaternion:
    """qpos[adr:adr + 4] a unit quaternion: four entries of ``entries`` normalised (normal:
    uniform on the 3-sphere; uniform in [0, 1): dm_control's ``rand(4)``)."""

    adr: int
    entries: Callable

    def draw(self, key, qpos):
        quat = self.entries(key, (4,), qpos.dtype)
        return qpos.at[self.adr : self.adr + 4].set(quat / jnp.linalg.norm(quat))


def _hinge(path, adr, limited, lo, hi):
    return _Uniform(adr, lo, hi) if limited else _Uniform(adr, -np.pi, np.pi)


def _slide(path, adr, limited, lo, hi):
    return _Uniform(adr, lo, hi) if limited else None


def _ball(path, adr, limited, lo, hi):
    if limited:
        raise NotImplementedError(f"{path}: a limited ball joint is not drawn")
    return _Quaternion(adr, jax.random.normal)


def _free(path, adr, limited, lo, hi):
    return _Quaternion(adr + 3, jax.random.uniform)


#: How a joint of each MuJoCo type (``mjtJoint`` name) is drawn: ``(file, qpos address,
#: limited, lower, upper) -> a record with draw(key, qpos)``, or None (kept).
_JOINT_DRAWS = {"mjJNT_HINGE": _hinge, "mjJNT_SLIDE": _slide, "mjJNT_BALL": _ball,
                "mjJNT_FREE": _free}  # fmt: skip


def joint_sampler(suite: SuiteModel):
    """``dm_control/suite/utils/randomizers.py`` ``randomize_limited_and_rotational_joints``
    as a JAX function ``(rng, qpos) -> qpos``: limited hinges and slides uniform in their
    range, unlimited hinges uniform in [-pi, pi], unlimited balls uniform on the unit
    3-sphere, free joints' quaternions ``rand(4)`` normalised (as dm_control draws them),
    their positions and unlimited slides kept. Limited balls are not drawn (none in the
    tasks here)."""
    import mujoco  # noqa: PLC0415  (optional dependency)

    mj = suite.mj
    joints = []
    for j in range(mj.njnt):
        draw = _JOINT_DRAWS[mujoco.mjtJoint(int(mj.jnt_type[j])).name]
        lo, hi = (float(v) for v in mj.jnt_range[j])
        joint = draw(suite.path, int(mj.jnt_qposadr[j]), bool(mj.jnt_limited[j]), lo, hi)
        if joint is not None:
            joints.append(joint)

    def sample(rng, qpos):
        keys = jax.random.split(rng, max(len(joints), 1))
        for key, joint in zip(keys, joints, strict=False):
            qpos = joint.draw(key, qpos)
        return qpos

    return sample


def lifted_to_floor(model: Model, qpos, root_z: int):
    """``qpos`` with the root's vertical slide (qpos index ``root_z``) raised until no
    geom penetrates the ground. dm_control draws the planar robots' poses at the file's
    height, often with a leg inside the floor, which MuJoCo's soft contact pushes out over
    a few steps; jaxmbd's compliant contact is stiffer (Hertz, matched to MuJoCo's rest
    penetration) and would launch the robot, so the drawn pose is raised first. Without
    the compliant contact element (MuJoCo's constraint model, ``contact="soft"``, which
    pushes out as MuJoCo does; ``contact="none"``) ``qpos`` is returned as drawn."""
    nb = model.nb
    physics = physics_of(model, qpos, jnp.zeros(model.tree.nv, qpos.dtype),
                         jnp.zeros(model.nu, qpos.dtype))  # fmt: skip
    if physics.contact is None:
        return qpos
    slots = physics.contacts()
    pairs = np.asarray(physics.contact.pairs, dtype=int)[np.asarray(slots.pair, dtype=int)]
    ground = jnp.asarray((pairs == nb).any(axis=1) | (pairs < 0).any(axis=1))
    depth = jnp.max(jnp.where(ground, -slots.gap, 0.0))
    return qpos.at[root_z].add(jnp.maximum(depth, 0.0))


def in_contact(model: Model, qpos) -> jax.Array:
    """Whether MuJoCo's ``ncon`` after ``mj_forward`` at ``qpos`` is positive: whether its
    narrow phase finds a contact (within the pairs' margins) over the file's candidate geom
    pairs, by the colliders of MuJoCo's constraint model (:func:`jaxmbd.soft_constraints.
    model.any_contact`)."""
    constraints = model.constraint_model
    if constraints is None:
        raise ValueError(f"in_contact: model '{model.name}' was not read from a file")
    p = poses(model.tree, qpos)
    return any_contact(constraints.contacts, p.x, p.R)


def collision_free(sample: Callable, model: Model, rng, qpos):
    """``sample(key, qpos)`` drawn again until MuJoCo finds no contact (:func:`in_contact`;
    dm_control's ``Humanoid.initialize_episode``: "find a collision-free random initial
    configuration"), with a fresh key per attempt (``lax.while_loop``)."""

    def attempt(key):
        key, sub = jax.random.split(key)
        drawn = sample(sub, qpos)
        return key, drawn, in_contact(model, drawn)

    def again(carry):
        return carry[2]

    return jax.lax.while_loop(again, lambda carry: attempt(carry[0]), attempt(rng))[1]
