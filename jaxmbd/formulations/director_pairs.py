"""Kinematic pairs of director bodies (Betsch & Leyendecker 2006, Secs. 4-5): the paper's
closed-form null space matrices and reparametrisations for the S, R, P, C and E pairs,
serial chains through the recursive twist map, and closed loops.

**Structure** (:func:`pair_structure`, static, from the model's topology). The model's joints
are recognised from their GCON rows (as :class:`~jaxmbd.model.ModelBuilder` writes them):

====  =====================================  ============  ========================
pair  GCON rows of the joint                 joint unknowns  paper
====  =====================================  ============  ========================
S     3 CD                                   theta (3)      (80)-(95)
R     3 CD + Perp-1 (2 DP1)                  theta (1)      (119)-(126)
C     Perp-1 (2 DP1) + Perp-2 (2 DP2)        u, theta (2)   (100)-(118)
P     Perp-1 + Perp-2 + 1 DP1                u (1)          (127)-(136)
E     Perp-1 (2 DP1) + 1 DP2                 u1, u2, theta  (137)-(154)
====  =====================================  ============  ========================

A depth-first search from the ground through the joints in model order (then from every body
not reached, which becomes a free root with unknowns (u_phi, theta), eq. 42-44) picks a
spanning tree: for a serial chain the paper's open chain (Sec. 5.4.1), for the six-body
linkage the open chain 1..5 with joint 6 closing the loop (Sec. 5.4.2). C, P and E carry
their frame vectors (m1, m2, n) on body_i, so they enter the tree only from body_i to body_j.
Every other GCON row (loop-closing joints, other joints, drivers) is a *closure row*.

**Twist map** (eqs. 56-61, 178-187): body twists t = (v_phi, omega) (global omega) of every
body are t = T nu, built recursively from the parent's twist t_p and the joint unknowns tau:

* S:       t = [[I, -hat(rho_p)], [0, 0]] t_p + [[hat(rho_c)], [I]] tau      (84)
* R:       t = [[I, hat(rho_c - rho_p)], [0, I]] t_p + [rho_c x a; a] tau    (122)
* C, P, E: t = [[I, hat(phi_p - phi_c)], [0, I]] t_p + [c_k ...; 0] u_dot
                 (+ [rho_c x a; a] theta_dot for C, E)                  (107), (132), (143)

with rho_p, rho_c the joint point seen from the parent's and the child's centre of mass, a
the rotation axis (fixed in the parent) and c_k the translation directions. The null space
matrix is P = blockdiag(P_int) T (eqs. 61, 187). The *discrete* null space matrix
P(q_n, q_{n+1}) (eqs. 65-74) is the same map with every body-fixed vector at the midpoint
q_{n+1/2} (linear in the directors, hence not orthonormal there) and the translation
directions replaced so that they stay exactly perpendicular to the constraining midpoint
vectors (``discrete=True``): C and P c = m1 x m2 (113), (133); E c1 = m2 x n, c2 = n x m1
(149). Then G(q_{n+1/2}) P(q_n, q_{n+1}) = 0 exactly (eq. 14) for the library's (at most
quadratic) rows of these joints; with ``discrete=False`` (c = n; c_k = m_k, the continuous
form) it fails at the midpoint for C, P and E, which the tests check.

**Reparametrisation** F_{q_n}(mu) (eqs. 44, 93-95, 116-118, 126, 136, 152-154, 188-189):
body rotations Q compose down the tree, Q_c = Q_p exp(theta hat(a_n)) (R, C, E), Q_c = Q_p
(P), Q_c = exp(hat(theta)) (S, absolute as in (93)), Q = exp(hat(theta)) for a free root, and

    phi_c = phi_p,{n+1} + Q_p [rho_p,n + (p_c - p_p)_n + sum_k u_k c_k,n - R_rel rho_c,n]

(S: Q_p (rho_p,n + (p_c - p_p)_n) - Q_c rho_c,n), where (p_c - p_p)_n is the joint's
accumulated slide (the paper's u_n n_n). The internal and tree-joint constraints hold exactly
for every mu, and DF(0) = P(q_n) (Sec. 2.2.2).

Trace cost: the tree recursion is a Python loop over the tree's joints (static topology),
so trace time grows with the number of joints; the per-joint operations are 3x3 algebra.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..gcons import CD, DP1, DP2, gcon_kind
from ..lie import hat, so3_exp
from ..linear import dense
from ..model import Model

# Body-fixed frame vectors (a, m1, m2) of a pair from its rows' vectors: ``dp1``, ``dp2``
# the (kind, a_bar_i, a_bar_j, s_bar_p_i, s_bar_q_j) of its DP1 and DP2 rows in row order.


def _no_vectors(dp1, dp2, flipped, z):
    return z, z, z


def _revolute_vectors(dp1, dp2, flipped, z):  # Perp-1: u, v on body i; n on body j
    return (dp1[1][2] if flipped else jnp.cross(dp1[0][1], dp1[1][1])), z, z


def _sliding_vectors(dp1, dp2, flipped, z):  # Perp-2 carries m1, m2 (body i)
    return jnp.cross(dp1[0][1], dp1[1][1]), dp2[0][1], dp2[1][1]


def _planar_vectors(dp1, dp2, flipped, z):  # Perp-1 m1, m2 (body i), DP2 a_bar_i = n (body i)
    return dp2[0][1], dp1[0][1], dp1[1][1]


class PairKind(NamedTuple):
    """One kind of kinematic pair (the table of the module docstring).

    ``signature``: the sorted GCON kinds of a joint's rows that make it this pair (None for
    a free root); ``n_translation``, ``n_rotation``: its unknowns (Table I: translations
    first); ``reversible``: it may enter the tree from body_j (its vectors are not tied to
    body_i); ``absolute``: the child's rotation is exp(hat(theta)), not relative to the
    parent; ``frame_vectors(dp1, dp2, flipped, z)``: (a, m1, m2) from its rows."""

    name: str
    signature: tuple[str, ...] | None
    n_translation: int
    n_rotation: int
    reversible: bool
    absolute: bool
    frame_vectors: object

    @property
    def dof(self) -> int:
        return self.n_translation + self.n_rotation


FREE = PairKind("free", None, 3, 3, False, True, _no_vectors)
S_PAIR = PairKind("S", ("CD", "CD", "CD"), 0, 3, True, True, _no_vectors)
R_PAIR = PairKind("R", ("CD", "CD", "CD", "DP1", "DP1"), 0, 1, True, False, _revolute_vectors)
C_PAIR = PairKind("C", ("DP1", "DP1", "DP2", "DP2"), 1, 1, False, False, _sliding_vectors)
P_PAIR = PairKind("P", ("DP1", "DP1", "DP1", "DP2", "DP2"), 1, 0, False, False, _sliding_vectors)
E_PAIR = PairKind("E", ("DP1", "DP1", "DP2"), 2, 1, False, False, _planar_vectors)
#: The pair kinds by name (``TreeEdge.kind``).
PAIR_KINDS = {p.name: p for p in (FREE, S_PAIR, R_PAIR, C_PAIR, P_PAIR, E_PAIR)}
#: joint unknowns per pair kind (Table I: r, relative degrees of freedom)
PAIR_DOF = {name: p.dof for name, p in PAIR_KINDS.items()}
#: GCON kinds (sorted) of each recognised joint
_SIGNATURES = {p.signature: p.name for p in PAIR_KINDS.values() if p.signature is not None}


class TreeEdge(NamedTuple):
    """One joint of the spanning tree (or a free root: kind "free", joint "", parent -1)."""

    kind: str
    joint: str
    parent: int  # body index, nb = ground, -1 for a free root
    child: int
    rows: tuple[int, ...]  # the joint's GCON rows (model order)
    start: int  # first column of its unknowns in mu
    flipped: bool  # the parent is the joint's body_j (S and R only)

    @property
    def pair(self) -> PairKind:
        return PAIR_KINDS[self.kind]


class PairStructure(NamedTuple):
    """Spanning tree of the model's pairs: edges in depth-first order (parents first), the
    tree's GCON rows, the closure rows, and d = number of tree unknowns."""

    edges: tuple[TreeEdge, ...]
    tree_rows: tuple[int, ...]
    closure_rows: tuple[int, ...]
    size: int

    def describe(self, model: Model) -> str:
        names = [*model.body_names, "ground"]
        parts = []
        for e in self.edges:
            if e.pair is FREE:
                parts.append(f"free root '{names[e.child]}' (6)")
            else:
                parts.append(
                    f"{e.kind} '{e.joint}' '{names[e.parent]}' -> '{names[e.child]}'"
                    f" ({PAIR_DOF[e.kind]})"
                )
        closure = sorted({model.constraint_joints[r] for r in self.closure_rows})
        return "; ".join(parts) + (f"; closure rows of {closure}" if closure else "")


def _joint_rows(model: Model):
    out: dict[str, list[int]] = {}
    for row, joint in enumerate(model.constraint_joints):
        out.setdefault(joint, []).append(row)
    return out


def _recognise(model: Model, rows) -> str | None:
    kinds = tuple(sorted(model.constraint_kinds[r] for r in rows))
    kind = _SIGNATURES.get(kinds)
    if kind is None:
        return None
    bodies = {model.constraint_bodies[r] for r in rows}
    if len(bodies) != 1:
        return None
    i, j = next(iter(bodies))
    if i == j:
        return None
    return kind


def pair_structure(model: Model) -> PairStructure:
    """The spanning tree of recognised pairs (see the module docstring). Static: depends on
    the model's topology only."""
    nb = model.nb
    driven = _driven_rows(model)
    joints = []  # (name, kind, body_i, body_j, rows)
    for name, rows in _joint_rows(model).items():
        if any(r in driven for r in rows):
            continue
        kind = _recognise(model, rows)
        if kind is not None:
            i, j = model.constraint_bodies[rows[0]]
            joints.append((name, kind, i, j, tuple(rows)))
    visited = {nb}
    edges: list[TreeEdge] = []
    used: set[str] = set()
    start = 0

    def dfs(body):
        nonlocal start
        stack = [body]
        while stack:
            b = stack.pop()
            for name, kind, i, j, rows in joints:
                if name in used:
                    continue
                if i == b and j not in visited:
                    child, flipped = j, False
                elif j == b and i not in visited and PAIR_KINDS[kind].reversible:
                    child, flipped = i, True
                else:
                    continue
                used.add(name)
                visited.add(child)
                edges.append(TreeEdge(kind, name, b, child, rows, start, flipped))
                start += PAIR_DOF[kind]
                dfs(child)  # depth first: the paper's open chain order

    dfs(nb)
    for b in range(nb):
        if b not in visited:
            visited.add(b)
            edges.append(TreeEdge("free", "", -1, b, (), start, False))
            start += 6
            dfs(b)
    tree_rows = tuple(sorted(r for e in edges for r in e.rows))
    closure = tuple(r for r in range(model.nc) if r not in set(tree_rows))
    return PairStructure(tuple(edges), tree_rows, closure, start)


def _driven_rows(model: Model) -> set[int]:
    rows = set()
    for group in model.drivers:
        rows.update(group.rows)
    for s in model.gcons:  # angle drivers (ROT) change the joint they act on
        if gcon_kind(s.kind).angle_driven:
            rows.update(s.rows)
    return rows


# ------------------------------------------------------------------ body-fixed joint data


class EdgeData(NamedTuple):
    """Local (body-frame) vectors of a tree joint: joint point from the parent's and the
    child's centre of mass, the rotation axis a and m1, m2 (parent frame)."""

    rho_p: jax.Array
    rho_c: jax.Array
    a: jax.Array
    m1: jax.Array
    m2: jax.Array


def _row_vectors(model: Model, row: int):
    """(kind, a_bar_i, a_bar_j, s_bar_p_i, s_bar_q_j) of one GCON row."""
    kind = model.constraint_kinds[row]
    s = model.gcon(kind)
    k = s.rows.index(row)
    return kind, s.a_bar_i[k], s.a_bar_j[k], s.s_bar_p_i[k], s.s_bar_q_j[k]


def edge_data(model: Model, edge: TreeEdge) -> EdgeData:
    """Body-fixed vectors of a tree joint from its GCON rows (traceable: model arrays)."""
    z = jnp.zeros(3)
    if edge.pair is FREE:
        return EdgeData(z, z, z, z, z)
    by_kind: dict[str, list] = {}
    for r in sorted(edge.rows):
        v = _row_vectors(model, r)
        by_kind.setdefault(v[0], []).append(v)
    dp1, dp2 = by_kind.get(DP1.name, []), by_kind.get(DP2.name, [])
    point = (by_kind.get(CD.name) or dp2)[0]
    rho_i, rho_j = point[3], point[4]
    a, m1, m2 = edge.pair.frame_vectors(dp1, dp2, edge.flipped, z)
    if edge.flipped:
        rho_i, rho_j = rho_j, rho_i
    return EdgeData(rho_i, rho_j, a, m1, m2)


# ---------------------------------------------------------------------- configurations


def edge_table(model: Model, structure: PairStructure) -> EdgeData:
    """:func:`edge_data` of every tree edge, stacked (E, 3) (gathered once per step)."""
    rows = [edge_data(model, e) for e in structure.edges]
    return EdgeData(*(jnp.stack([getattr(r, f) for r in rows]) for f in EdgeData._fields))


class _Layout(NamedTuple):
    """Static index arrays of the tree (numpy): parents (ground = nb), children, kind masks,
    and where each edge's padded unknowns (3 translations, 3 rotations) sit in mu (d = pad)."""

    parent: np.ndarray
    child: np.ndarray
    absolute: np.ndarray  # free root or S: Q_c = exp(hat(theta))
    relative: np.ndarray  # R, C, E: Q_c = Q_p exp(theta hat(a))
    free: np.ndarray
    kind_c: np.ndarray  # C or P: translation along m1 x m2 (or n)
    kind_e: np.ndarray
    col: np.ndarray  # (E, 6) column in mu of each padded unknown, d where absent
    s_joint: np.ndarray
    r_joint: np.ndarray


def _layout(model: Model, structure: PairStructure) -> _Layout:
    nb, d = model.nb, structure.size
    pairs = [e.pair for e in structure.edges]
    col = np.full((len(pairs), 6), d, dtype=int)
    for k, e in enumerate(structure.edges):
        n_t, n_r = e.pair.n_translation, e.pair.n_rotation
        col[k, :n_t] = e.start + np.arange(n_t)
        col[k, 3 : 3 + n_r] = e.start + n_t + np.arange(n_r)

    def mask(test):
        return np.array([bool(test(p)) for p in pairs], dtype=bool)

    return _Layout(
        parent=np.array([nb if e.parent < 0 else e.parent for e in structure.edges], dtype=int),
        child=np.array([e.child for e in structure.edges], dtype=int),
        absolute=mask(lambda p: p.absolute),
        relative=mask(lambda p: not p.absolute and p.n_rotation > 0),
        free=mask(lambda p: p is FREE),
        # a slide along one line (C, P: m1 x m2) or in a plane (E: two directions)
        kind_c=mask(lambda p: p is not FREE and p.n_translation == 1),
        kind_e=mask(lambda p: p is not FREE and p.n_translation == 2),
        col=col,
        s_joint=mask(lambda p: p is S_PAIR),
        r_joint=mask(lambda p: p is R_PAIR),
    )


class _Frames(NamedTuple):
    """Global per-edge vectors at one configuration (E, 3) / (E, 3, 3)."""

    rho_p: jax.Array
    rho_c: jax.Array
    slide: jax.Array  # (p_c - p_p): the joint's accumulated slide
    trans: jax.Array  # (E, 3, 3): translation directions c_k (rows), zero where absent
    axis: jax.Array  # relative rotation axis a (zero for P, S, free)
    arm: jax.Array  # X of the parent-twist map [[I, hat(X)], [0, Y]]


def _frames(model, structure, table: EdgeData, q, *, discrete: bool) -> _Frames:
    lay = _layout(model, structure)
    phi, dirs = q
    D = jnp.concatenate([dirs.reshape(-1, 3, 3), jnp.eye(3)[None]])  # rows d_I; ground = I
    phi = jnp.concatenate([phi, jnp.zeros((1, 3))])
    Dp, Dc = D[lay.parent], D[lay.child]

    def glob(s, Dx):  # s_I d_I: linear in the directors
        return jnp.sum(s[:, :, None] * Dx, 1)

    free = lay.free[:, None]
    rho_p = jnp.where(free, phi[lay.child], glob(table.rho_p, Dp))
    rho_c = jnp.where(free, 0.0, glob(table.rho_c, Dc))
    a, m1, m2 = glob(table.a, Dp), glob(table.m1, Dp), glob(table.m2, Dp)
    slide = phi[lay.child] + rho_c - phi[lay.parent] - rho_p
    zero = jnp.zeros_like(a)
    if discrete:  # eqs. (113), (133), (149)
        c_cp, c_e1, c_e2 = jnp.cross(m1, m2), jnp.cross(m2, a), jnp.cross(a, m1)
    else:  # the continuous pair matrices (107), (132), (143)
        c_cp, c_e1, c_e2 = a, m1, m2
    eye = jnp.broadcast_to(jnp.eye(3), a.shape[:1] + (3, 3))
    trans = jnp.where(
        lay.free[:, None, None],
        eye,
        jnp.stack(
            [
                jnp.where(lay.kind_c[:, None], c_cp, jnp.where(lay.kind_e[:, None], c_e1, zero)),
                jnp.where(lay.kind_e[:, None], c_e2, zero),
                zero,
            ],
            1,
        ),
    )
    axis = jnp.where(lay.relative[:, None], a, zero)
    arm = jnp.where(
        lay.s_joint[:, None],
        -rho_p,
        jnp.where(lay.r_joint[:, None], rho_c - rho_p, phi[lay.parent] - phi[lay.child]),
    )
    return _Frames(rho_p, rho_c, slide, trans, axis, arm)


def twist_matrix(model: Model, structure: PairStructure, q, *, discrete: bool = True, table=None):
    """T (6 nb, d): body twists t = (v_phi, omega) = T nu (eqs. 56-61, 178-184) at the
    director configuration q (q_{n+1/2} for the discrete map, q_n for the continuous one).

    The recursion t_c = A_e t_p + B_e tau_e is solved at once as (I - A) T = B with the
    block lower-triangular A of the unrolled form (181)-(184)."""
    nb, d = model.nb, structure.size
    lay = _layout(model, structure)
    table = edge_table(model, structure) if table is None else table
    f = _frames(model, structure, table, q, discrete=discrete)
    E = lay.child.shape[0]
    I3 = jnp.broadcast_to(jnp.eye(3), (E, 3, 3))
    Z3 = jnp.zeros((E, 3, 3))
    # B_e (E, 6, 6) on the padded unknowns: [c_1 c_2 c_3 | rotation columns]
    rot_abs = jnp.concatenate([hat(f.rho_c), I3], 1)  # (84): v = rho_c x omega_c
    rot_rel = jnp.concatenate([jnp.cross(f.rho_c, f.axis), f.axis], 1)[:, :, None]
    rot = jnp.where(
        lay.absolute[:, None, None],
        rot_abs,
        jnp.concatenate([rot_rel, jnp.zeros((E, 6, 2))], 2),
    )
    Be = jnp.concatenate([jnp.concatenate([jnp.swapaxes(f.trans, 1, 2), Z3], 1), rot], 2)
    # A_e = [[I, hat(X)], [0, Y]], Y = 0 for S (its twist does not inherit omega_p)
    Y = jnp.where(lay.s_joint[:, None, None], Z3, I3)
    Ae = jnp.concatenate([jnp.concatenate([I3, hat(f.arm)], 2), jnp.concatenate([Z3, Y], 2)], 1)
    # scatter into the (6 nb + 6) x (6 nb + 6) and (6 nb + 6) x (d + 1) systems (ground and
    # absent unknowns land in the extra rows / column, dropped below)
    r6 = np.arange(6)
    rows = 6 * lay.child[:, None] + r6[None, :]  # (E, 6)
    cols_p = 6 * lay.parent[:, None] + r6[None, :]
    A = jnp.zeros((6 * nb + 6, 6 * nb + 6))
    A = A.at[rows[:, :, None], cols_p[:, None, :]].set(Ae)
    A = A[: 6 * nb, : 6 * nb]
    B = jnp.zeros((6 * nb + 6, d + 1))
    B = B.at[rows[:, :, None], lay.col[:, None, :]].add(Be)
    B = B[: 6 * nb, :d]
    return dense.solve(jnp.eye(6 * nb) - A, B)


def internal_null_space(q):
    """blockdiag(P_int) (12 nb, 6 nb) of eq. 29 at the directors of q."""
    D = q[1].reshape(-1, 3, 3)
    nb = D.shape[0]
    blocks = jnp.zeros((nb, 12, 6))
    blocks = blocks.at[:, :3, :3].set(jnp.eye(3))
    blocks = blocks.at[:, 3:, 3:].set(-hat(D).reshape(nb, 9, 3))
    return jax.scipy.linalg.block_diag(*blocks)


def null_space(model: Model, structure: PairStructure, q, *, discrete: bool = True, table=None):
    """P = blockdiag(P_int(q)) T(q) (12 nb, d): eqs. 61, 187; with q = q_{n+1/2} and
    ``discrete=True`` the discrete null space matrix P(q_n, q_{n+1}) of eqs. 65-74."""
    T = twist_matrix(model, structure, q, discrete=discrete, table=table)
    return internal_null_space(q) @ T


def reparametrise(model: Model, structure: PairStructure, q0, mu, *, table=None):
    """q_{n+1} = F_{q_n}(mu) (eqs. 44, 93-95, 116-118, 126, 136, 152-154, 188-189): every
    internal and tree-joint constraint holds exactly; DF(0) = P(q_n). One ``lax.scan`` over
    the tree's edges (parents first)."""
    nb = model.nb
    lay = _layout(model, structure)
    table = edge_table(model, structure) if table is None else table
    f = _frames(model, structure, table, q0, discrete=True)
    tau = jnp.concatenate([mu, jnp.zeros(1, mu.dtype)])[lay.col]  # (E, 6) padded unknowns
    u, theta = tau[:, :3], tau[:, 3:]
    exp_abs = so3_exp(theta)
    R_rel = so3_exp(theta[:, :1] * f.axis)
    move = f.rho_p + f.slide + jnp.sum(u[:, :, None] * f.trans, 1)
    phi0, dirs0 = q0
    absolute = jnp.asarray(lay.absolute)

    def body(carry, e):
        Q, phi1 = carry
        p, c = e["parent"], e["child"]
        Qc = jnp.where(e["absolute"], e["exp_abs"], Q[p] @ e["R_rel"])
        phic = phi1[p] + Q[p] @ e["move"] - Qc @ e["rho_c"]
        return (Q.at[c].set(Qc), phi1.at[c].set(phic)), None

    init = (
        jnp.broadcast_to(jnp.eye(3), (nb + 1, 3, 3)),
        jnp.concatenate([phi0, jnp.zeros((1, 3))]),
    )
    edges = dict(
        parent=jnp.asarray(lay.parent),
        child=jnp.asarray(lay.child),
        absolute=absolute,
        exp_abs=exp_abs,
        R_rel=R_rel,
        move=move,
        rho_c=f.rho_c,
    )
    (Q, phi1), _ = jax.lax.scan(body, init, edges)
    # d_I <- Q d_I: rows d_I of D, so D <- D Q^T
    D0 = dirs0.reshape(nb, 3, 3)
    dirs = jnp.sum(D0[:, :, None, :] * Q[:nb, None, :, :], -1).reshape(nb, 9)
    return phi1[:nb], dirs


def twists_from_velocities(q, v):
    """Body twists (v_phi, omega) (nb, 6), omega global, from director velocities (least
    squares of v_I = omega x d_I, exact for tangent velocities)."""
    D = q[1].reshape(-1, 3, 3)
    V = v[:, 3:].reshape(-1, 3, 3)
    # omega = 1/2 sum_I d_I x v_I for orthonormal d_I (tangent v)
    w = 0.5 * jnp.sum(jnp.cross(D, V), 1)
    return jnp.concatenate([v[:, :3], w], 1)


def predictor(model: Model, structure: PairStructure, q, v, h, *, table=None):
    """mu_0 = h nu_n with nu_n = T(q_n)^+ t_n, the rotational unknowns of each joint scaled
    to the midpoint rule's Cayley angle 2 atan(h |w| / 2) (notes 2.1)."""
    d = structure.size
    lay = _layout(model, structure)
    T = twist_matrix(model, structure, q, discrete=True, table=table)
    t = twists_from_velocities(q, v).reshape(-1)
    mu = h * jnp.linalg.lstsq(T, t)[0]
    theta = jnp.concatenate([mu, jnp.zeros(1, mu.dtype)])[lay.col[:, 3:]]  # (E, 3)
    n2 = jnp.sum(theta * theta, 1)
    ok = n2 > 1e-30
    n = jnp.sqrt(jnp.where(ok, n2, 1.0))
    scale = jnp.where(ok, 2.0 * jnp.arctan(0.5 * n) / n, 1.0)
    factor = jnp.ones(d + 1).at[lay.col[:, 3:]].set(jnp.broadcast_to(scale[:, None], theta.shape))
    return mu * factor[:d]


__all__ = [
    "PAIR_DOF",
    "EdgeData",
    "PairStructure",
    "TreeEdge",
    "edge_data",
    "edge_table",
    "internal_null_space",
    "null_space",
    "pair_structure",
    "predictor",
    "reparametrise",
    "twist_matrix",
    "twists_from_velocities",
]
