"""A run's soft equality constraints as MuJoCo's EQUALITY rows of the convex problem.

A file's equality constraints (connect, weld, joint and tendon couplings) are rows
Phi(qpos) = 0 of the tree's state (:class:`~jaxmbd.tree.constraint_rows.AbstractTreeConstraint`,
:mod:`jaxmbd.joint_space.equalities`), each with MuJoCo's parameters
(:class:`~jaxmbd.tree.constraint_rows.Softness`: ``eq_solref``, ``eq_solimp`` and the
``mj_diagApprox`` weights). The ``"joint"`` formulation evaluates their values Phi, Jacobian
G = dPhi/dqvel and velocity-product term gamma = -J_dot qvel on the tree
(:func:`jaxmbd.joint_space.constraint_rows.constraint_terms`); :func:`tree_equality_rows`
turns them into the rows of ``mj_instantiateEquality`` with the parameters of
``mj_makeImpedance`` and ``mj_referenceConstraint``: one impedance per constraint from the
norm of its rows (``getposdim``), margin 0, and for connect and weld the aref less
J_dot qvel (MuJoCo 4.0's ``mj_referenceConstraint``; not for joint and tendon couplings,
whose :attr:`~jaxmbd.tree.constraint_rows.Softness.velocity_product` is False).

The rows then enter MuJoCo's convex problem together with the friction-loss, limit and
contact rows (:meth:`jaxmbd.soft_constraints.model.MujocoConstraints.rows`) instead of the
separate normal-equations solve of the equality rows alone.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..tree.constraint_rows import AbstractTreeConstraint
from .parameters import SoftOptions, safe_solref
from .rows import ConstraintRows, ConstraintType, _finish, _normalize


class EqualityTerms(NamedTuple):
    """The equality constraints of a run at the step's state: ``parts`` (static: each a
    soft :class:`~jaxmbd.tree.constraint_rows.AbstractTreeConstraint`), their rows'
    values ``phi`` (m,), Jacobian ``G`` (m, nv) in qvel coordinates and velocity-product
    term ``gamma`` (m,) = -J_dot qvel, the parts' rows consecutive in order."""

    parts: tuple[AbstractTreeConstraint, ...]
    phi: jax.Array
    G: jax.Array
    gamma: jax.Array


def tree_equality_rows(terms: EqualityTerms, qvel=None, *, options: SoftOptions) -> ConstraintRows:
    """MuJoCo's EQUALITY rows (``mj_instantiateEquality``) of the soft equality constraints
    ``terms`` (module docstring): per row J = G, pos = phi, margin 0; per constraint the
    impedance of |phi| over its rows (``getposdim``) with its ``solref`` (``refsafe``:
    ``options``'), ``solimp`` and ``diag_approx``; aref less J_dot qvel where the
    constraint's ``velocity_product`` says (connect, weld). A constraint whose Jacobian is
    all zeros has no rows (dense ``mj_addConstraint``); ``efc_id`` is the part's index
    (MuJoCo's equality id where every equality of the file is active and read)."""
    parts = terms.parts
    phi, G, gamma = jnp.asarray(terms.phi), jnp.asarray(terms.G), jnp.asarray(terms.gamma)
    sizes = [part.size for part in parts]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    if any(part.softness is None for part in parts):
        raise ValueError("tree_equality_rows: every part must be soft (a Softness)")
    solref, solimp, diag, size, active, ids, product = [], [], [], [], [], [], []
    for k, part in enumerate(parts):
        soft = part.softness
        n, rows = part.size, slice(starts[k], starts[k + 1])
        solref.append(jnp.broadcast_to(jnp.asarray(soft.solref), (n, 2)))
        solimp.append(jnp.broadcast_to(jnp.asarray(soft.solimp), (n, 5)))
        diag.append(jnp.broadcast_to(jnp.asarray(soft.diag_approx), (n,)))
        # getposdim: |pos| of the constraint's rows (the signed value of a single row)
        value = _normalize(phi[rows])[1] if n > 1 else phi[rows][0]
        size.append(jnp.broadcast_to(value, (n,)))
        active.append(jnp.broadcast_to(jnp.any(G[rows] != 0), (n,)))
        ids.append(np.full(n, k))
        product.append(np.full(n, soft.velocity_product))
    zeros = jnp.zeros(phi.shape[0], phi.dtype)
    rows = _finish(
        J=G,
        pos=phi,
        margin=zeros,
        frictionloss=0.0,
        type=ConstraintType.EQUALITY,
        id=np.concatenate(ids),
        active=jnp.concatenate(active),
        diag_approx=jnp.concatenate(diag),
        solref=safe_solref(
            jnp.concatenate(solref), timestep=options.timestep, refsafe=options.refsafe
        ),
        solimp=jnp.concatenate(solimp),
        imp_pos=jnp.concatenate(size),
        imp_margin=zeros,
        frictional=False,
        qvel=qvel,
        options=options,
    )
    if rows.aref is not None:
        with_product = jnp.asarray(np.concatenate(product))
        aref = rows.aref + jnp.where(with_product, gamma, 0.0)
        rows = eqx.tree_at(lambda r: r.aref, rows, jnp.where(rows.active, aref, 0.0))
    return rows


__all__ = ["EqualityTerms", "tree_equality_rows"]
