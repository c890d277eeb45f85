"""Constraint rows of the tree state in joint coordinates: the rows of every
:class:`~jaxmbd.tree.constraint_rows.AbstractTreeConstraint` of a run (the joints that close
loops, :class:`ClosingRows`; MJCF's equality constraints, :mod:`jaxmbd.joint_space.equalities`)
taken
together.

Their Jacobian G = dPhi(q (+) delta)/d delta at delta = 0 (the retraction of
:func:`jaxmbd.tree.integrate_positions`, so G maps qvel), the right-hand sides
nu = -dPhi/dt and gamma = -d^2/ds^2 Phi(q (+) s qvel, t + s) at s = 0 (the curve has zero
joint acceleration, so what remains is the velocity-quadratic part).
Rows of the bodies' frames alone (:class:`ClosingRows`) need no autodiff and one forward
kinematics: the GCONs' closed forms in absolute coordinates (rA's per-row body blocks,
nu and the velocity-quadratic gamma at the bodies' velocities) are chained with the
bodies' Jacobians, which the tree's motion subspaces S give (Featherstone eq. 3.32), and
gamma takes the bodies' accelerations at qacc = 0 (S_dot qvel, eq. 2.32) through the
blocks. Other rows differentiate the forward kinematics along the retraction.

Exact rows hold G qacc = gamma; soft rows (a part with a ``softness``) are MuJoCo's: their
multipliers solve (G M^-1 G^T + R) lam = G qacc_0 - aref, with R and aref of
:class:`~jaxmbd.tree.constraint_rows.Softness` (MuJoCo documentation, Computation >
Soft constraints: the unconstrained minimiser of the Gauss principle with the soft cost,
which MuJoCo's solvers reach for equality rows alone). After each step the exact rows are
projected onto Phi = 0 and G qvel = nu; soft rows are left to drift as MuJoCo's do."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy  # its submodules load on first use (scipy.interpolate, .spatial, .linalg)

from .. import _config  # noqa: F401
from ..constraints.equations import _row_bodies, constraint_values, rA_terms_rows
from ..model import Model
from ..tree import KinematicTree, cholesky_solve, integrate_positions, poses
from ..tree._elementwise import cross, mtv, mv, picked_sum, row_products
from ..tree.constraint_rows import AbstractTreeConstraint
from ..tree.kinematics import TreePoses, dof_ancestors, velocities


class ClosingRows(AbstractTreeConstraint):
    """The model's GCON rows that the tree does not carry (joints that close loops, raw
    GCONs, drivers): ``model`` holds only those rows, ``model_rows`` their indices in the
    full model, evaluated on the tree's centres of mass and rotations."""

    model: Model
    model_rows: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.model_rows)

    @property
    def gcon_rows(self) -> tuple[int, ...]:
        return self.model_rows

    def residual(self, tree: KinematicTree, p: TreePoses, qpos, t):
        return constraint_values(self.model, p.c, p.R, t)


class TreeConstraints(NamedTuple):
    """The constraint rows of a run: ``parts`` concatenated, of which ``keep`` (indices into
    the concatenation; None: all) act, and whether the kept exact rows are known to be
    independent (found at a concrete start, :func:`independent_rows`): then the normal
    matrices are positive definite and solved by Cholesky; else by least squares."""

    parts: tuple[AbstractTreeConstraint, ...]
    keep: tuple[int, ...] | None = None
    independent: bool = False

    @property
    def _all(self) -> int:
        return sum(part.size for part in self.parts)

    @property
    def kept(self) -> np.ndarray:
        return np.arange(self._all) if self.keep is None else np.asarray(self.keep, dtype=int)

    @property
    def size(self) -> int:
        return len(self.kept)

    @property
    def rows(self) -> tuple[int, ...]:
        """The kept rows (indices into the concatenation)."""
        return tuple(int(k) for k in self.kept)

    @property
    def soft(self) -> np.ndarray:
        """Whether each kept row is soft (static)."""
        flags = [part.softness is not None for part in self.parts for _ in range(part.size)]
        return np.asarray(flags, dtype=bool)[self.kept]

    @property
    def model_rows(self) -> np.ndarray:
        """Each kept row's index among the model's GCON rows, -1 for rows of no GCON."""
        out = []
        for part in self.parts:
            out += list(getattr(part, "model_rows", (-1,) * part.size))
        return np.asarray(out, dtype=int)[self.kept]

    def without_parts(self, keep_part) -> TreeConstraints | None:
        """Only the parts for which ``keep_part(part)`` holds (every row of them), or None."""
        parts = tuple(part for part in self.parts if keep_part(part))
        return TreeConstraints(parts) if parts else None


def solve_normal(cons: TreeConstraints, A, B, rhs, R=None):
    """x with (A B^T + diag(R)) x = rhs for the rows' (m, n) Jacobian-like A and B (A B^T
    is G Y or G G^T; R the soft rows' regularisation, zero on exact rows): Cholesky where
    positive definite, least squares otherwise."""
    matrix = row_products(A, B)
    if R is not None:
        matrix = matrix + jnp.diag(R)
    if cons.independent or (R is not None and bool(np.all(cons.soft))):
        return cholesky_solve(matrix, rhs)
    return jnp.linalg.lstsq(matrix, rhs)[0]


def _joined(rows, qpos):
    return jnp.concatenate(rows) if rows else jnp.zeros(0, qpos.dtype)


def _kept(cons: TreeConstraints, x):
    return x if cons.keep is None else x[cons.kept]


def constraint_residual(cons: TreeConstraints, tree: KinematicTree, qpos, t):
    p = poses(tree, qpos)
    return _kept(cons, _joined([part.residual(tree, p, qpos, t) for part in cons.parts], qpos))


def _body_jacobians(tree: KinematicTree, p: TreePoses):
    """(nb + 1, 6, nv): each body's (centre-of-mass displacement, body-frame rotation
    vector) per joint tangent, the ground's row zero: the spatial motions S of the dofs
    on the body's chain (Featherstone eq. 3.32) taken at the centre of mass and turned
    into the body's frame."""
    anc = jnp.asarray(dof_ancestors(tree), p.c.dtype)[:, :, None]  # (nb, nv, 1)
    w = anc * p.S[None, :, :3]  # (nb, nv, 3)
    dc = anc * p.S[None, :, 3:] + cross(w, p.c[:, None, :])
    dtheta_bar = jnp.einsum("bki,bdk->bdi", p.R, w)
    J = jnp.swapaxes(jnp.concatenate([dc, dtheta_bar], -1), 1, 2)
    return jnp.concatenate([J, jnp.zeros((1, *J.shape[1:]), J.dtype)])


def _frame_terms(part: ClosingRows, tree: KinematicTree, p: TreePoses, qvel, t):
    """(Phi, G, nu, gamma) of rows of the bodies' frames from the GCONs' closed forms in
    absolute coordinates (:func:`jaxmbd.constraints.equations.rA_terms_rows`: per-row body blocks
    and
    the velocity-quadratic gamma_rA at the bodies' velocities), chained with the bodies'
    Jacobians: G = sum_b jac_b J_b and gamma = gamma_rA - sum_b jac_b a_b, a_b the
    bodies' (centre-of-mass, body-frame angular) accelerations at qacc = 0 (S_dot qvel,
    Featherstone eqs. 2.32 and 2.47)."""
    V, S_dot = velocities(tree, p.S, qvel)
    A = picked_sum(dof_ancestors(tree), S_dot * qvel[:, None])
    w, alpha = V[:, :3], A[:, :3]
    c_dot = V[:, 3:] + cross(w, p.c)
    c_ddot = A[:, 3:] + cross(alpha, p.c) + cross(w, c_dot)
    omega_bar = jnp.einsum("bki,bk->bi", p.R, w)
    t = jnp.asarray(t, p.c.dtype)
    phi, jac_i, jac_j, nu, gamma = rA_terms_rows(part.model, p.c, p.R, c_dot, omega_bar, t)
    bi, bj = _row_bodies(part.model)
    J = _body_jacobians(tree, p)
    a0 = jnp.concatenate([c_ddot, jnp.einsum("bki,bk->bi", p.R, alpha)], -1)
    a0 = jnp.concatenate([a0, jnp.zeros((1, 6), a0.dtype)])
    G = jnp.einsum("ri,rid->rd", jac_i, J[bi]) + jnp.einsum("ri,rid->rd", jac_j, J[bj])
    gamma = gamma - jnp.sum(jac_i * a0[bi], -1) - jnp.sum(jac_j * a0[bj], -1)
    return phi, G, nu, gamma


def _generic_residual(parts, tree, qpos, t):
    """The rows of ``parts`` (those reading more than the bodies' frames) concatenated, from
    one forward kinematics: differentiated together, the program holds one copy of the
    kinematics per derivative, not one per part (none where no part reads the poses)."""
    p = poses(tree, qpos) if any(part.reads_poses for part in parts) else None
    return jnp.concatenate([part.residual(tree, p, qpos, t) for part in parts])


def _generic_terms(parts, tree, qpos, qvel, t, *, rates: int):
    """(Phi, G, nu, gamma) of ``parts`` together, nu where ``rates`` >= 1 and gamma where 2
    (else None): the forward kinematics differentiated along the retraction (G), in time
    (nu = -dPhi/dt) and twice along the curve of zero joint acceleration (gamma)."""

    def phi(delta):
        return _generic_residual(parts, tree, integrate_positions(tree, qpos, delta, 1.0), t)

    zero = jnp.zeros(tree.nv, qpos.dtype)
    values, G = phi(zero), jax.jacfwd(phi)(zero)
    if rates == 0:
        return values, G, None, None
    s0 = jnp.zeros((), qpos.dtype)
    nu = -jax.jvp(lambda s: _generic_residual(parts, tree, qpos, t + s), (s0,), (1.0 + s0,))[1]
    if rates == 1:
        return values, G, nu, None

    def along(s):
        moved = integrate_positions(tree, qpos, s * qvel, 1.0)
        return _generic_residual(parts, tree, moved, t + s)

    def rate(s):
        return jax.jvp(along, (s,), (jnp.ones_like(s),))[1]

    gamma = -jax.jvp(rate, (s0,), (jnp.ones_like(s0),))[1]
    return values, G, nu, gamma


def _parts_terms(cons, tree, qpos, qvel, t, p, *, rates: int):
    """Per part of ``cons``, in order: (Phi, G, nu, gamma) (as :func:`_generic_terms`
    gives them for ``rates``). Rows of the bodies' frames from their closed forms; the
    others from one differentiated forward kinematics shared by all of them."""
    generic = [part for part in cons.parts if not isinstance(part, ClosingRows)]
    if generic:
        joined = _generic_terms(generic, tree, qpos, qvel, t, rates=rates)
        cuts = np.cumsum([part.size for part in generic])[:-1]
        split = [jnp.split(x, cuts) if x is not None else [None] * len(generic) for x in joined]
        generic_out = iter(zip(*split, strict=True))
    out = []
    for part in cons.parts:
        if isinstance(part, ClosingRows):
            out.append(_frame_terms(part, tree, p, qvel, t))
        else:
            out.append(next(generic_out))
    return out


def _jacobians(cons, tree, qpos, t, p):
    zero = jnp.zeros(tree.nv, qpos.dtype)
    out = _parts_terms(cons, tree, qpos, zero, t, p, rates=0)
    phi = _joined([o[0] for o in out], qpos)
    G = jnp.concatenate([o[1] for o in out]) if out else jnp.zeros((0, tree.nv), qpos.dtype)
    return _kept(cons, phi), _kept(cons, G)


def constraint_jacobian(cons: TreeConstraints, tree: KinematicTree, qpos, t, p=None):
    """(Phi, G) at (qpos, t); ``p``: the poses at qpos where already computed."""
    return _jacobians(cons, tree, qpos, t, poses(tree, qpos) if p is None else p)


def constraint_terms(cons: TreeConstraints, tree: KinematicTree, qpos, qvel, t, p=None):
    """(Phi, G, nu, gamma) at (qpos, qvel, t); ``p``: the poses at qpos, where computed."""
    p = poses(tree, qpos) if p is None else p
    out = _parts_terms(cons, tree, qpos, qvel, t, p, rates=2)
    phi, nu, gamma = (_kept(cons, _joined([o[k] for o in out], qpos)) for k in (0, 2, 3))
    G = jnp.concatenate([o[1] for o in out]) if out else jnp.zeros((0, tree.nv), qpos.dtype)
    return phi, _kept(cons, G), nu, gamma


def _soft_terms(cons: TreeConstraints, phi, velocity, gamma, h):
    """The target and R of every row of the concatenation (``phi``, ``velocity``,
    ``gamma``: all rows): gamma and zero on exact rows, MuJoCo's aref (with gamma where
    its ``velocity_product`` says) and R on soft ones."""
    R, target, start = [], [], 0
    for part in cons.parts:
        stop = start + part.size
        soft = part.softness
        if soft is None:
            R.append(jnp.zeros(part.size, phi.dtype))
            target.append(gamma[start:stop])
        else:
            r, aref = soft.terms(phi[start:stop], velocity[start:stop], h)
            R.append(r)
            target.append(aref + gamma[start:stop] if soft.velocity_product else aref)
        start = stop
    return jnp.concatenate(R), jnp.concatenate(target)


def acceleration_terms(cons: TreeConstraints, tree: KinematicTree, qpos, qvel, t, h, p=None):
    """(Phi, G, nu, target, R) of the kept rows: their values, Jacobian and velocity
    right-hand side, and G qacc = target - R lam, with target gamma on exact rows and
    MuJoCo's reference acceleration on soft ones (R: None without soft rows)."""
    if not cons.soft.any():
        return (*constraint_terms(cons, tree, qpos, qvel, t, p), None)
    # a soft part's impedance reads all its rows (soft rows are always kept)
    phi, G, nu, gamma = constraint_terms(cons._replace(keep=None), tree, qpos, qvel, t, p)
    R, target = _soft_terms(cons, phi, mv(G, qvel), gamma, h)
    if cons.keep is None:
        return phi, G, nu, target, R
    k = cons.kept
    return phi[k], G[k], nu[k], target[k], R[k]


def exact_part(cons: TreeConstraints | None) -> TreeConstraints | None:
    """The exact rows only (those projected after each step), or None."""
    if cons is None or not cons.soft.any():
        return cons
    soft = cons.soft
    keep = [int(k) for k, s in zip(cons.kept, soft, strict=True) if not s]
    return cons._replace(keep=tuple(keep)) if keep else None


def project(cons: TreeConstraints, tree: KinematicTree, qpos, qvel, t, *, iterations: int = 1):
    """qpos and qvel projected onto Phi = 0 and G qvel = nu of the exact rows: Gauss-Newton
    steps delta = -G^T (G G^T)^-1 Phi (the least-norm correction) and the velocity's
    least-norm correction -G^T (G G^T)^-1 (G qvel - nu), both with G and nu at the
    positions before the correction (one forward kinematics and one factor of G G^T per
    iteration). After a step of an explicit method the drift is of the step's truncation
    order: one iteration brings Phi to round-off (Gauss-Newton converges quadratically) and
    G qvel - nu to the drift times |qvel| (G moved by the correction), round-off too; a start
    far from the rows takes ``iterations``."""
    cons = exact_part(cons)
    if cons is None:
        return qpos, qvel

    def correct(_, state):
        qpos, qvel = state
        phi, G, nu = _position_terms(cons, tree, qpos, t)
        x = solve_normal(cons, G, G, jnp.stack([phi, mv(G, qvel) - nu], 1))
        return integrate_positions(tree, qpos, -mtv(G, x[:, 0]), 1.0), qvel - mtv(G, x[:, 1])

    if iterations == 1:
        return correct(0, (qpos, qvel))
    return jax.lax.fori_loop(0, iterations, correct, (qpos, qvel))


def _position_terms(cons: TreeConstraints, tree: KinematicTree, qpos, t):
    """(Phi, G, nu) at (qpos, t), each part's rows from one evaluation (the bodies' frames:
    one closed-form pass for all three)."""
    p = poses(tree, qpos)
    zero = jnp.zeros(tree.nv, qpos.dtype)
    out = _parts_terms(cons, tree, qpos, zero, t, p, rates=1)
    phi, nu = (_kept(cons, _joined([o[k] for o in out], qpos)) for k in (0, 2))
    G = jnp.concatenate([o[1] for o in out]) if out else jnp.zeros((0, tree.nv), qpos.dtype)
    return phi, _kept(cons, G), nu


def independent_rows(cons: TreeConstraints, tree: KinematicTree, qpos, t=0.0, *,
                     rtol: float = 1e-9) -> tuple[int, ...]:  # fmt: skip
    """The kept rows (indices into the concatenation) that act at ``qpos`` (concrete
    values): every soft row, and the exact rows that a pivoted QR of G^T keeps (pivots
    above ``rtol`` times the largest). In joint coordinates many rows hold by the tree's
    own structure (the out-of-plane rows of a planar loop's closing revolute joint have
    G = 0), so dependent rows are expected, not a modelling error: they are dropped, their
    multipliers zero."""
    return independent_rows_of(cons, constraint_jacobian(cons, tree, jnp.asarray(qpos), t)[1],
                               rtol=rtol)  # fmt: skip


def independent_rows_of(cons: TreeConstraints, G, *, rtol: float = 1e-9) -> tuple[int, ...]:
    """:func:`independent_rows` from the kept rows' Jacobian ``G`` (concrete values)."""
    G = np.asarray(G)
    soft, kept = cons.soft, cons.kept
    exact = np.flatnonzero(~soft)
    chosen = [int(kept[k]) for k in np.flatnonzero(soft)]
    if exact.size:
        Ge = G[exact]
        _, R, pivots = scipy.linalg.qr(Ge.T, mode="economic", pivoting=True)
        diag = np.abs(np.diag(R))
        rank = int(np.sum(diag > rtol * max(diag.max(initial=0.0), 1e-300)))
        chosen += [int(kept[exact[k]]) for k in pivots[:rank]]
    return tuple(sorted(chosen))
