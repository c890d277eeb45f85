"""The implicit step's Newton matrix as blocks of the body-joint graph (structured solver).

:func:`newton_blocks` gives the Newton matrix of :func:`~jaxmbd.integrators.base.step_system`
as a :class:`~jaxmbd.linear.structured.BlockMatrix`:

* rA without force elements: assembled block by block from the hand-coded rows (per-body
  mass and gyroscopic blocks, per-row 12 x 12 reaction sensitivities of Tables 3-6, the
  Pi-bar rows of G), one scatter-add of O(N) numbers, never a dense n x n array;
* every other formulation (rp, re autodiff) and rA with force elements: the dense matrix,
  gathered into blocks (the factorisation and the solves are still structured).

The stabilised (GGL) step's matrix couples every two rows that share a body through
G_T G_n^T, a dense block for a body with many joints (an engine's crankshaft). The
block-assembled form keeps it sparse with auxiliary unknowns z = G_n^T mu per body:

    [[M + c_v D + c_q K T, G^T, c_q K T, 0     ]   [a  ]
     [G T,                 0,   G T,     0     ]   [lam]
     [G + (c_q/c_v) S T,   0,   (c_q/c_v) S T, 0]  [z  ]
     [0,                   0,   I,      -G_n^T ]]  [mu ]

whose elimination of z gives back the step's matrix exactly (the solves pad the right-hand
side with zeros for the z rows and drop z).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..constraints.equations import (
    _row_bodies,
    rA_rows,
    rA_sensitivity_rows,
    rA_velocity_sensitivity_rows,
)
from ..forces._rigid_body import gyroscopic_damping, mass_blocks
from ..lie import so3_right_jacobian
from ..linear import small, small_blocks
from ..linear.graph import Layout, newton_layout
from ..linear.structured import BlockMatrix


def block_assembled(model, form) -> bool:
    """True where the Newton matrix is assembled from blocks: body-state coordinates (rA,
    whose hand-coded rows these blocks are) without force elements."""
    return form.body_state_coordinates and not model.forces


def layout_for(model, form, *, stabilised: bool) -> Layout:
    """The block layout of the step's Newton matrix for this formulation."""
    extra = form.num_multipliers(model) - model.nc
    if extra not in (0, model.nb):
        raise ValueError(
            f"structured solver: formulation {form.name!r} has {extra} extra multipliers; "
            "only none or one per body are supported"
        )
    return newton_layout(
        model,
        tangent_size=form.tangent_size,
        extra_rows=extra == model.nb and extra > 0,
        stabilised=stabilised,
        augmented=stabilised and block_assembled(model, form),
    )


class _Positions:
    """Static flat positions (into the S b b values, trash = S b b) of every contribution."""

    def __init__(self, layout: Layout, nb: int, pair: np.ndarray, stabilised: bool):
        st = layout.structure
        b = st.b
        node_of = np.empty(st.n, dtype=np.int64)
        within = np.empty(st.n, dtype=np.int64)
        for k, v in enumerate(st.nodes):
            node_of[v] = k
            within[v] = np.arange(len(v))
        self.trash = st.num_slots * b * b
        nc = pair.shape[0]
        n, m = nb * 6, nc
        n_own = layout.n

        def a_of(body):  # unknowns of body's a block (None for the ground)
            return None if body >= nb else np.arange(body * 6, body * 6 + 6)

        def z_of(body):
            return None if body >= nb else n_own + np.arange(body * 6, body * 6 + 6)

        def block(rows, cols, p, q):
            if rows is None or cols is None:
                return np.full((p, q), self.trash)
            slot = st.slot(node_of[rows[0]], node_of[cols[0]])
            return slot * b * b + within[rows][:, None] * b + within[cols][None, :]

        lam = [np.array([n + c]) for c in range(nc)]
        self.body = np.stack([block(a_of(k), a_of(k), 6, 6) for k in range(nb)])
        self.K = np.array(
            [
                [
                    [block(a_of(pair[c, x]), a_of(pair[c, y]), 6, 6) for y in range(2)]
                    for x in range(2)
                ]
                for c in range(nc)
            ]  # fmt: skip
        ).reshape(nc, 2, 2, 6, 6)
        self.Gt = np.array(
            [[block(a_of(pair[c, x]), lam[c], 6, 1) for x in range(2)] for c in range(nc)]
        ).reshape(nc, 2, 6, 1)
        self.GT = np.array(
            [[block(lam[c], a_of(pair[c, x]), 1, 6) for x in range(2)] for c in range(nc)]
        ).reshape(nc, 2, 1, 6)
        if stabilised:
            mu = [np.array([n + m + c]) for c in range(nc)]
            self.Kz = np.array(
                [
                    [
                        [block(a_of(pair[c, x]), z_of(pair[c, y]), 6, 6) for y in range(2)]
                        for x in range(2)
                    ]
                    for c in range(nc)
                ]  # fmt: skip
            ).reshape(nc, 2, 2, 6, 6)
            self.GTz = np.array(
                [[block(lam[c], z_of(pair[c, x]), 1, 6) for x in range(2)] for c in range(nc)]
            ).reshape(nc, 2, 1, 6)
            self.Sa = np.array(
                [[block(mu[c], a_of(pair[c, x]), 1, 6) for x in range(2)] for c in range(nc)]
            ).reshape(nc, 2, 1, 6)
            self.Sz = np.array(
                [[block(mu[c], z_of(pair[c, x]), 1, 6) for x in range(2)] for c in range(nc)]
            ).reshape(nc, 2, 1, 6)
            self.zmu = np.array(
                [[block(z_of(pair[c, x]), mu[c], 6, 1) for x in range(2)] for c in range(nc)]
            ).reshape(nc, 2, 6, 1)
            self.zz = np.stack([block(z_of(k), z_of(k), 6, 6) for k in range(nb)])


def _positions(layout: Layout, model, stabilised: bool) -> _Positions:
    """Cached on the (cached, static) structure: computed once per topology."""
    cache = layout.structure.cache
    key = ("rA newton positions", stabilised)
    if key not in cache:
        pair = np.asarray(model.constraint_bodies, dtype=np.int64).reshape(-1, 2)
        cache[key] = _Positions(layout, model.nb, pair, stabilised)
    return cache[key]


def newton_blocks(layout: Layout, model, q1, v1, a, lam, t, delta, disc, rows_n, *, stabilised):
    """The rA Newton matrix of the step at (q1, v1, a, lam) as blocks (see the module
    docstring); ``delta`` the increment (for the tangent map), ``rows_n`` the Pi-bar rows
    (jac_i, jac_j) of G(q_n) (stabilised only)."""
    del a
    st = layout.structure
    nb, nc = model.nb, model.nc
    r, A = q1
    c_q, c_v = disc.c_q, disc.c_v
    P = _positions(layout, model, stabilised)
    bi, bj = _row_bodies(model)
    gyro = gyroscopic_damping(model.inertia, v1[:, 3:])
    body = mass_blocks(model.mass, model.inertia).at[:, 3:, 3:].add(c_v * gyro)
    # tangent map diag(I, J_r) per body, identity for the ground
    J_r = so3_right_jacobian(delta.reshape(nb, 6)[:, 3:])
    T = jnp.broadcast_to(jnp.eye(6), (nb + 1, 6, 6)).at[:nb, 3:, 3:].set(J_r)
    T_pair = jnp.stack([T[bi], T[bj]], 1)  # (nc, 2, 6, 6)
    pos, vals = [P.body], [body]
    if nc:
        _, ji, jj = rA_rows(model, r, A, t)
        jac = jnp.stack([ji, jj], 1)  # (nc, 2, 6)
        # per-row sensitivities with unit multipliers: K's rows are lam_c times them, and
        # the stabilised rows' S contracts them with v (one evaluation for both)
        H = rA_sensitivity_rows(model, r, A, jnp.ones(nc, r.dtype), t)  # (nc, 2, 2, 6, 6)
        Kr = lam[:nc, None, None, None, None] * H
        KT = c_q * _bmm(Kr, T_pair[:, None])
        GT = _bmtv(T_pair, jac)[:, :, None, :]
        pos += [P.K, P.Gt, P.GT]
        vals += [KT, jac[:, :, :, None], GT]
        if stabilised:
            ratio = c_q / c_v
            s_i, s_j = rA_velocity_sensitivity_rows(model, r, A, v1, t, unit_blocks=H)
            S = jnp.stack([s_i, s_j], 1)
            ST = ratio * _bmtv(T_pair, S)[:, :, None, :]
            gn = jnp.stack(rows_n, 1)  # (nc, 2, 6)
            pos += [P.Kz, P.GTz, P.Sa, P.Sz, P.zmu]
            vals += [KT, GT, jac[:, :, None, :] + ST, ST, -gn[:, :, :, None]]
    if stabilised:
        pos.append(P.zz)
        vals.append(jnp.broadcast_to(jnp.eye(6), (nb, 6, 6)))
    return BlockMatrix(_scatter_blocks(st, pos, vals, r.dtype), st, layout.n)


def kkt_blocks(layout: Layout, model, body_blocks, upper_rows, lower_rows) -> BlockMatrix:
    """[[W, G_u^T], [G_l, 0]] as blocks of the index-1 KKT layout (``newton_layout(model,
    tangent_size=6)``) from W's per-body blocks (nb, 6, 6) and the rA rows (jac_i, jac_j)
    of G_u and G_l (pairs of (nc, 6) arrays; G_u = G_l for a symmetric matrix), never a
    dense array: the consistent start's projections and index-1 solve."""
    P = _positions(layout, model, False)
    upper = jnp.stack(upper_rows, 1)  # (nc, 2, 6)
    lower = jnp.stack(lower_rows, 1)
    pos = [P.body, P.Gt, P.GT]
    vals = [body_blocks, upper[:, :, :, None], lower[:, :, None, :]]
    return BlockMatrix(_scatter_blocks(layout.structure, pos, vals, body_blocks.dtype),
                       layout.structure, layout.n)  # fmt: skip


def _bmm(a, b):
    """Batched a @ b: an einsum, or in a hoistable step (:func:`jaxmbd.linear.small.hoistable`)
    elementwise (a ``dot`` would keep XLA from compiling the step as one loop)."""
    return small_blocks.bmm(a, b) if small.hoistable() else jnp.einsum("...ij,...jk->...ik", a, b)


def _bmtv(a, x):
    """Batched a^T x, as :func:`_bmm`."""
    return small_blocks.bmtv(a, x) if small.hoistable() else jnp.einsum("...ji,...j->...i", a, x)


def _scatter_blocks(st, pos, vals, dtype):
    """The slots' values from contributions ``vals`` at flat ``pos`` (see :class:`_Positions`)."""
    if small.hoistable():
        return _gathered_sum_blocks(st, pos, vals, dtype)
    # one windowed scatter-add per block shape: each contribution is a p x q window at
    # (slot, row, column) of the slots (the ground's go to an extra trash slot)
    b = st.b
    values = jnp.zeros((st.num_slots + 1, b, b), dtype)
    groups: dict = {}
    for p, v in zip(pos, vals, strict=True):
        shape = p.shape[-2:]
        v = jnp.broadcast_to(v, p.shape).reshape((-1,) + shape)
        groups.setdefault(shape, []).append((_window_starts(p, b), v))
    numbers = jax.lax.ScatterDimensionNumbers(
        update_window_dims=(1, 2), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0, 1, 2)
    )
    for parts in groups.values():
        index = np.concatenate([i for i, _ in parts])
        update = jnp.concatenate([u for _, u in parts])
        values = jax.lax.scatter_add(
            values, jnp.asarray(index), update, numbers, indices_are_sorted=False,
            unique_indices=False, mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS,
        )  # fmt: skip
    return values[:-1]


def _gathered_sum_blocks(st, pos, vals, dtype):
    """:func:`_scatter_blocks` without a scatter: every written entry of the slots is the
    sum of the contributions aimed at it, picked by a static gather (index arrays computed
    once per structure and contribution layout)."""
    b = st.b
    flat_pos = np.concatenate([p.reshape(-1) for p in pos])
    key = ("gathered blocks", flat_pos.tobytes())
    if key not in st.cache:
        st.cache[key] = small_blocks._grouped(flat_pos, {st.num_slots * b * b})
    rows, index = st.cache[key]
    flat = jnp.concatenate(
        [
            jnp.broadcast_to(v, p.shape).astype(dtype).reshape(-1)
            for p, v in zip(pos, vals, strict=True)
        ]
    )
    values = jnp.zeros((st.num_slots * b * b,), dtype)
    values = small_blocks._place(values, rows, small_blocks._gather_sum(flat, index))
    return values.reshape(st.num_slots, b, b)


def _window_starts(positions: np.ndarray, b: int) -> np.ndarray:
    """(k, 3) = (slot, row, column) of the top-left corner of each p x q window, from the
    flat positions (..., p, q) of its entries (the trash position -> the extra slot)."""
    corner = positions.reshape((-1,) + positions.shape[-2:])[:, 0, 0]
    slot, rest = np.divmod(corner, b * b)
    row, col = np.divmod(rest, b)
    return np.stack([slot, row, col], 1).astype(np.int32)


def gathered_blocks(layout: Layout, J) -> BlockMatrix:
    """A dense Newton matrix as blocks of the layout."""
    return BlockMatrix(layout.structure.gather(J), layout.structure, layout.n)


__all__ = ["newton_blocks", "gathered_blocks", "kkt_blocks", "layout_for", "block_assembled"]
