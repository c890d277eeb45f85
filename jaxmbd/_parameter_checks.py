"""Checks of a model's parameter values at the entry of every analysis.

The builder checks the numbers it is given; a model changed afterwards (``eqx.tree_at`` on
``model.contacts.friction``, ``model.inertia``, ``model.mass``) reaches the analyses
unchecked. :func:`checked_parameters` checks the concrete leaves on the host and raises a
:class:`~jaxmbd.ModelError` naming the body or contact pair, the value found and what is
allowed; leaves that are tracers (a user's ``jit``, ``grad`` or ``vmap``) are checked in
the traced program instead (:func:`parameters_invalid`), and the run's status then carries
``RESULTS.invalid_parameters`` from step 0 (:func:`with_parameter_status`). A batch
(:func:`~jaxmbd.simulate_batch`) refuses nothing at entry: its members are traced, so an
invalid member is marked by its status and spoils no other.

What is allowed: masses > 0; inertias symmetric, positive semi-definite with a positive
moment, and, when positive definite, each principal moment at most the sum of the other
two (:data:`TRIANGLE_RTOL`); contact friction, stiffness and damping >= 0, restitution in
[0, 1]; joint-limit stiffness and damping >= 0. A singular inertia (a zero principal
moment, the textbooks' slender and planar idealisations, as in the shipped four-link) is
accepted: a joint may hold the body's rotation about that axis. Where none does, the failed
start names the body's inertia (:func:`unheld_singular_inertia`).

:func:`checked_parameters` also casts every floating array leaf to strongly typed float64,
so a weakly typed leaf (``jnp.full(2, 40.0)``) compiles no new program.
"""

from __future__ import annotations

import collections
import operator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._results import INVALID_PARAMETERS
from .errors import ModelError
from .forces.joint_limits import JointLimits
from .model import Model
from .model._values import SINGULAR_RTOL, SYMMETRY_RTOL, TRIANGLE_RTOL, inertia_problem

_CONTACT_RULES = (
    ("friction", 0.0, None),
    ("restitution", 0.0, 1.0),
    ("stiffness", 0.0, None),
    ("damping", 0.0, None),
)
_LIMIT_RULES = (("stiffness", 0.0, None), ("damping", 0.0, None))


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _limits(model: Model):
    return tuple(f for f in model.forces if isinstance(f, JointLimits))


def _ranged_leaves(model: Model):
    """(element, field, lower, upper, label of entry k) of the bounded element leaves."""
    contacts = model.contacts
    if contacts is not None:

        def pair(k, c=contacts):
            i, j = c.pairs[k]
            return (f"contact pair '{c.pair_names[k]}' (bodies '{model.body_label(i)}' and "
                    f"'{model.body_label(j)}')")  # fmt: skip

        for name, low, high in _CONTACT_RULES:
            yield contacts, name, low, high, pair
    for limits in _limits(model):

        def joint(k, e=limits):
            return f"joint limit of joint '{e.joints[k].name}'"

        for name, low, high in _LIMIT_RULES:
            yield limits, name, low, high, joint


def _inertia_invalid(J, xp):
    """Per inertia (..., 3, 3) -> (...): not finite, not symmetric, not positive
    semi-definite with a positive moment, or (positive definite and) breaking the triangle
    inequality; ``xp``: numpy or jax.numpy (as :func:`jaxmbd.model._values.inertia_problem`)."""
    finite = xp.all(xp.isfinite(J), axis=(-2, -1))
    J = xp.where(finite[..., None, None], J, 0.0)
    Jt = xp.swapaxes(J, -1, -2)
    scale = xp.max(xp.abs(J), axis=(-2, -1))
    asym = xp.max(xp.abs(J - Jt), axis=(-2, -1)) > SYMMETRY_RTOL * scale
    m = xp.linalg.eigvalsh(0.5 * (J + Jt))
    low, mid, top = m[..., 0], m[..., 1], m[..., 2]
    indefinite = ~(top > 0) | (low < -SINGULAR_RTOL * xp.maximum(1.0, top))
    triangle = (low > SINGULAR_RTOL * top) & (top - low - mid > TRIANGLE_RTOL * top)
    return ~finite | asym | indefinite | triangle


# -- concrete leaves: numpy on the host ----------------------------------------------------
def _member(index: tuple) -> str:
    return f"batch member {index[0] if len(index) == 1 else index}: " if index else ""


def _first_bad(bad: np.ndarray):
    """The index of the first True entry of ``bad`` (batch dims first), or None."""
    hits = np.argwhere(bad)
    return None if hits.size == 0 else tuple(int(k) for k in hits[0])


def _check_concrete(model: Model, where: str):
    """Raise ModelError for the first invalid concrete parameter leaf."""
    prefix = f"{where}: model '{model.name}': "
    if not _is_tracer(model.mass):
        mass = np.asarray(model.mass)
        bad = _first_bad(~(mass > 0))
        if bad is not None:
            raise ModelError(
                f"{prefix}{_member(bad[:-1])}body '{model.body_names[bad[-1]]}' has mass "
                f"{float(mass[bad]):.6g}; masses must be positive and finite"
            )
    if not _is_tracer(model.inertia):
        inertia = np.asarray(model.inertia)
        bad = _first_bad(_inertia_invalid(inertia, np))
        if bad is not None:
            problem = inertia_problem(inertia[bad]) or f"{inertia[bad].tolist()} is invalid"
            raise ModelError(
                f"{prefix}{_member(bad[:-1])}body '{model.body_names[bad[-1]]}': inertia {problem}"
            )
    for element, name, low, high, label in _ranged_leaves(model):
        leaf = getattr(element, name)
        if _is_tracer(leaf):
            continue
        value = np.asarray(leaf)
        ok = value >= low if high is None else (value >= low) & (value <= high)
        bad = _first_bad(~ok)
        if bad is not None:
            rule = f">= {low:g}" if high is None else f"in [{low:g}, {high:g}]"
            raise ModelError(
                f"{prefix}{_member(bad[:-1])}{label(bad[-1])}: {name} "
                f"{float(value[bad]):.6g}; must be {rule}"
            )


# -- traced leaves: one flag in the program ------------------------------------------------
def parameters_invalid(model: Model):
    """A boolean (batch dims of the leaves, or ()): whether any parameter leaf breaks the
    rules of the module docstring (jnp: traceable; no gradient flows through it)."""
    sg = jax.lax.stop_gradient
    flags = []
    mass = sg(jnp.asarray(model.mass))
    flags.append(jnp.any(~(mass > 0), axis=-1))
    J = sg(jnp.asarray(model.inertia))
    if J.ndim >= 3 and J.shape[-3]:
        flags.append(jnp.any(_inertia_invalid(J, jnp), axis=-1))
    for element, name, low_, high_, _ in _ranged_leaves(model):
        value = sg(jnp.asarray(getattr(element, name)))
        if value.shape[-1:] == (0,):
            continue
        ok = value >= low_ if high_ is None else (value >= low_) & (value <= high_)
        flags.append(jnp.any(~ok, axis=-1))
    return jnp.any(jnp.stack(jnp.broadcast_arrays(*flags)), axis=0)


def with_parameter_status(model: Model, sol):
    """``sol`` with status ``invalid_parameters`` at every step when a traced parameter
    leaf is invalid (:func:`parameters_invalid`); the status history is changed once."""
    bad = parameters_invalid(model)
    status = sol.status
    bad = jnp.reshape(bad, bad.shape + (1,) * (status.ndim - bad.ndim))
    status = jnp.where(bad, jnp.asarray(INVALID_PARAMETERS, status.dtype), status)
    return eqx.tree_at(lambda s: s.status, sol, status)


# -- the entry: cast and check --------------------------------------------------------------
def _as_float64(x):
    """A floating array leaf as strongly typed float64 (others unchanged). Called on every
    leaf of every run (hundreds for a large model): attribute tests only on the way through."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or getattr(dtype, "kind", None) != "f":
        return x
    if isinstance(x, np.ndarray):
        return x if dtype == np.float64 else x.astype(np.float64)
    if not isinstance(x, jax.Array):
        return x
    weak = x.aval.weak_type if _is_tracer(x) else x.weak_type
    if dtype == np.float64 and not weak:
        return x
    if _is_tracer(x):
        return jax.lax.convert_element_type(x, jnp.float64)
    if not x.is_fully_addressable:  # another process's shards: cast where they are
        return x.astype(jnp.float64)
    # through the host: a cast on the device (or jnp.asarray) compiles a program of its own
    # (committed to its devices only where it was: a committed argument keys a new program)
    host = np.asarray(x, dtype=np.float64)
    return jax.device_put(host, x.sharding) if x.committed else jax.device_put(host)


def as_float64(tree):
    """``tree`` with every floating array leaf strongly typed float64: a weakly typed leaf
    (``jnp.full(n, 40.0)``) would otherwise key a new compiled program."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    cast = [_as_float64(x) for x in leaves]
    if all(a is b for a, b in zip(cast, leaves, strict=True)):
        return tree
    return jax.tree_util.tree_unflatten(treedef, cast)


#: The parameter leaves of the last models that passed (the arrays themselves, so their ids
#: stay theirs): a model run again is not transferred and checked again.
_PASSED: collections.deque = collections.deque(maxlen=8)


def _checked_leaves(model: Model) -> tuple:
    fields = tuple(getattr(e, name) for e, name, *_ in _ranged_leaves(model))
    return (model.mass, model.inertia) + fields


def checked_parameters(model: Model, *, where: str) -> Model:
    """``model`` with its floating leaves as float64 (:func:`as_float64`), after checking
    its concrete parameter leaves (ModelError naming the first invalid one)."""
    model = as_float64(model)
    leaves = _checked_leaves(model)
    if any(len(p) == len(leaves) and all(map(operator.is_, p, leaves)) for p in _PASSED):
        return model
    _check_concrete(model, where)
    if not any(_is_tracer(x) for x in leaves):
        _PASSED.append(leaves)
    return model


def unheld_singular_inertia(model: Model, G) -> str | None:
    """A sentence naming the bodies (of a concrete model) whose singular inertias leave a
    rotation that no constraint holds, or None. The mass matrix's null space (the zero
    moments' axes) must meet the null space of the rA Jacobian ``G`` (nc, 6 nb; body-major
    columns, at the start) only in zero, else the accelerations are undetermined."""
    inertia = np.asarray(model.inertia)
    G = np.asarray(G).reshape(-1, 6 * model.nb)
    singular = []  # (body, moments, axis of the zero moment, unit tangent direction)
    for b in range(model.nb):
        moments, axes = np.linalg.eigh(inertia[b])
        if moments[0] <= SINGULAR_RTOL * moments[-1]:
            direction = np.zeros(6 * model.nb)
            direction[6 * b + 3 : 6 * b + 6] = axes[:, 0]
            singular.append((b, moments, axes[:, 0], direction))
    if not singular:
        return None
    Z = np.stack([d for *_, d in singular], axis=1)
    GZ = G @ Z
    size = max(float(np.max(np.abs(G))) if G.size else 0.0, 1.0)
    _, s, vt = np.linalg.svd(GZ) if GZ.size else (None, np.zeros(0), np.eye(Z.shape[1]))
    rank = int(np.sum(s > 1e-9 * size))
    if rank == Z.shape[1]:
        return None
    weight = np.max(np.abs(vt[rank:]), axis=0)  # each body's part in the free rotations
    found = [
        f"body '{model.body_names[b]}' has a singular inertia (principal moments ("
        + ", ".join(f"{m:.6g}" for m in moments[::-1])
        + f")) and no joint holds its rotation about body axis {np.round(axis, 6).tolist()}"
        for (b, moments, axis, _), w in zip(singular, weight, strict=True)
        if w > 1e-6
    ]
    return ("; ".join(found) + ": the accelerations are undetermined; give every body a "
            "positive moment about each axis a joint leaves free")  # fmt: skip


__all__ = [
    "as_float64",
    "checked_parameters",
    "parameters_invalid",
    "unheld_singular_inertia",
    "with_parameter_status",
]
