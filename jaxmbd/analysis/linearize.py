"""Linearised dynamics in minimal coordinates, and the natural modes.

About an operating point (q*, v*, u*, t) on the constraint manifold, the equations of
motion are linearised in minimal coordinates of that manifold:

* **Positions.** With N (n, f) an orthonormal basis of the null space of G(q*) (n = nb
  times the formulation's tangent size, f the degrees of freedom; from an SVD) and P one
  of its complement, a configuration near q* is q(z) = q* (+) (N z + P w(z)), w(z) closing
  the constraints Phi(q(z), t) = 0 (Newton; its derivative is the implicit one).
* **Velocities.** zeta = N^T v, with the rest of v from G(q) v = nu(q, t):
  v = N zeta + P (G P)^-1 (nu - G N zeta).
* **Dynamics.** The accelerations and multipliers of the index-1 system at (q, v)
  (:func:`jaxmbd.formulations.index1.index1_dynamics`, the explicit integrators' own
  equations: every force element, armature and actuator included), so
  zeta_dot = N^T a(q, v, u), and z_dot = N^T T(xi)^-1 v with T the retraction's tangent
  map at xi = N z + P w.

A = d(z_dot, zeta_dot)/d(z, zeta) (2f, 2f) and B = d(z_dot, zeta_dot)/du (2f, nu) are
forward-mode autodiff of exactly that map at (0, zeta*), so they are exact first-order
(the constraint curvature, the reactions' geometric stiffness and the velocity terms
included). About a state at rest (an equilibrium: the default) (z, zeta) map linearly to
any other minimal coordinates, e.g. joint angles and their rates (``tests/test_linearize.py``
checks A and B so against closed forms). About a moving state the
velocity coordinates zeta = N^T v differ from the rates of other coordinates by terms
of first order in z, so A is the linearisation in (z, zeta) specifically.
:func:`modes` takes the eigenvalues of A: natural frequencies |lambda| / 2 pi (Hz),
damping ratios -Re(lambda) / |lambda|, and the mode shapes as body displacements N z (per
body: translation, then rotation in the formulation's tangent coordinates, for rA the
body-frame rotation vector).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._parameter_checks import checked_parameters
from ..actuators import with_controls
from ..constraints.redundancy import rows_for_run
from ..contact import with_contact
from ..forces import BodyState
from ..forces._joint import coordinates_and_rates
from ..formulations import FORMULATIONS, get_formulation
from ..formulations.index1 import index1_dynamics
from ..joint_space import independent_loop_rows, model_tree
from ..joint_space.analysis import body_displacement_basis, loop_bases, minimal_rates
from ..model import Model
from ..model.joints import joint_kind
from ..solution import Solution
from ..tree import JointType, body_velocities, poses
from .initial_state import to_formulation
from .plan import (
    absolute_only_requests,
    absolute_refusals,
    default_formulation,
    refusal_message,
    treated_model,
)
from .statics import Equilibrium, static_equilibrium

#: Singular values of G below this times the largest count as zero (its null space).
NULL_SPACE_RTOL = 1e-9
#: Newton iterations that close the constraints at q(z) (quadratic: converged far sooner;
#: forward-mode derivatives of a converged Newton map are the implicit ones).
CLOSURE_ITERATIONS = 8


#: The coordinates of :func:`linearize`'s A and B.
COORDINATES = ("tangent", "joint")


class Linearization(eqx.Module):
    """x_dot = A x + B (u - u*) with x = (z, zeta) (2f,), or (theta, theta_dot) in joint
    ``coordinates``: ``A`` (2f, 2f), ``B`` (2f, nu) (None without actuators), ``basis``
    N (n, f) (body displacements per unit of z or theta; tangent coordinates, body-major),
    the operating point ``r``, ``A_body``, ``rdot``, ``omega``, ``controls`` u*, time
    ``t`` (see the module docstring)."""

    A: jax.Array
    B: jax.Array | None
    basis: jax.Array
    r: jax.Array
    A_body: jax.Array
    rdot: jax.Array
    omega: jax.Array
    controls: jax.Array | None
    t: jax.Array
    #: The operating point's joint coordinates (nq,) and rates (nv,) in the tree's
    #: (MuJoCo's) layout, for a linearisation in joint coordinates; None otherwise.
    qpos: jax.Array | None = None
    qvel: jax.Array | None = None
    body_names: tuple[str, ...] = eqx.field(static=True, default=())
    formulation: str = eqx.field(static=True, default="rA")
    # "tangent" (x = (z, zeta)) or "joint" (x = (theta, theta_dot) of coordinate_names)
    coordinates: str = eqx.field(static=True, default="tangent")
    coordinate_names: tuple[str, ...] = eqx.field(static=True, default=())

    @property
    def dof(self) -> int:
        """The degrees of freedom f (the length of z)."""
        return self.basis.shape[1]

    def body_displacements(self, z):
        """N z as per-body rows (nb, tangent size): the displacement of every body for
        minimal coordinates z (f,)."""
        return (self.basis @ z).reshape(len(self.body_names), -1)


class Modes(eqx.Module):
    """The natural modes of a :class:`Linearization`, one per eigenvalue pair of A (real
    eigenvalues, e.g. a free body's rigid motion or an overdamped mode, one each), by
    increasing frequency: ``frequencies`` (Hz, |lambda| / 2 pi), ``damping_ratios``
    (-Re(lambda) / |lambda|; 0 for an undamped mode, NaN at lambda = 0), ``eigenvalues``
    (complex), ``shapes`` (k, nb, tangent size) body displacements, the largest entry 1,
    and ``coordinates`` (k, f) the same in z."""

    frequencies: np.ndarray
    damping_ratios: np.ndarray
    eigenvalues: np.ndarray
    shapes: np.ndarray
    coordinates: np.ndarray
    linearization: Linearization


def _operating_point(model, state, t, inputs, form):
    """(r, A, rdot, omega) of the operating point: the static equilibrium (default), an
    :class:`~jaxmbd.Equilibrium`, or "initial" (the model's initial state)."""
    if state is None:
        state = static_equilibrium(model, formulation=form.name, t=t)
    if isinstance(state, Equilibrium):
        zero = jnp.zeros_like(state.r)
        return state.r, state.A, zero, zero
    if isinstance(state, str) and state == "initial":
        return model.r0, model.A0, model.rdot0, model.omega0
    raise ValueError(
        "linearize: state must be None (the static equilibrium), an Equilibrium "
        f"(static_equilibrium) or 'initial' (the model's initial state), got {state!r}"
    )


def _null_space(G):
    """(N, P): orthonormal bases of the null space of G and of its complement (numpy)."""
    G = np.asarray(G)
    n = G.shape[1]
    if G.shape[0] == 0:
        return np.eye(n), np.zeros((n, 0))
    _, s, vt = np.linalg.svd(G)
    rank = int(np.sum(s > NULL_SPACE_RTOL * max(s[0], 1e-300))) if s.size else 0
    return vt[rank:].T, vt[:rank].T


def linearize(
    model: Model,
    state=None,
    *,
    t: float = 0.0,
    inputs=None,
    formulation=None,
    redundant: str = "drop",
    contact: str | None = None,
    limits: str | None = None,
    coordinates: str = "tangent",
) -> Linearization:
    """The linearised dynamics of ``model`` in minimal coordinates (module docstring).

    ``state``: None (default: the static equilibrium at ``t`` with ``inputs`` applied),
    an :class:`~jaxmbd.Equilibrium`, or "initial" (the model's initial state, which must
    be consistent). ``inputs``: the actuators' controls u* (nu,) at the operating point
    (default zero); ``B`` is d(x_dot)/du there. ``formulation``: as
    :func:`~jaxmbd.simulate`'s default (:func:`~jaxmbd.analysis.plan.default_formulation`:
    "joint" where it runs the model, else "rA"; ``redundant="error"`` or an Equilibrium
    solved in absolute coordinates then raise ``ValueError`` naming the formulation to
    pass), or one with the index-1 form (rA, se3, rotmat). Redundant rows are dropped first
    (``redundant``), contact and limits as in :func:`~jaxmbd.simulate`.

    In ``formulation="joint"`` (:mod:`jaxmbd.joint_space.analysis`) a tree without loops
    has x = (delta, qvel), delta the tangent of qpos at the operating point (for hinges
    and slides delta = qpos - qpos*): MuJoCo's (qpos, qvel) tangent layout, in both
    ``coordinates``; with loops, x = (z, zeta) in the loops' null space ("tangent" only).
    ``state`` may also be an Equilibrium found in joint coordinates, or "initial".

    ``coordinates``: "tangent" (default): x = (z, zeta) of the module docstring; "joint":
    x = (theta, theta_dot), the coordinates of ``model.joint_names`` in order, then their
    rates (for an MJCF model MuJoCo's (qpos, qvel)), for a tree of revolute and
    translational joints (one per degree of freedom). With phi: (z, zeta) -> (theta,
    theta_dot), A = d(D phi x_dot)/dx D phi^-1 and B = D phi B_tangent: exact at any
    operating point, not only at rest. ``basis`` then maps joint displacements to body
    displacements (``body_displacements``, :func:`modes`).
    """
    if coordinates not in COORDINATES:
        raise ValueError(
            f"linearize: coordinates must be one of {list(COORDINATES)}, got {coordinates!r}"
        )
    model = treated_model(model, contact=contact, limits=limits, where="linearize").model
    model = checked_parameters(model, where="linearize")
    nu = model.nu
    if inputs is not None and nu == 0:
        raise ValueError(f"linearize: inputs given, but model '{model.name}' has no actuators")
    u_star = None
    if nu:
        u_star = jnp.zeros(nu) if inputs is None else jnp.asarray(inputs, jnp.float64)
        if u_star.shape != (nu,):
            raise ValueError(f"linearize: inputs must have shape ({nu},), got {u_star.shape}")
        model = with_controls(model, u_star)
    # the joint path drops dependent rows itself: it has no redundant="error"
    absolute_only = absolute_only_requests(redundant=redundant)
    if formulation is None:
        formulation = default_formulation(model, absolute_only=absolute_only, where="linearize")
        if formulation == "joint" and isinstance(state, Equilibrium) and state.qpos is None:
            raise ValueError(
                "linearize: state is an Equilibrium in absolute coordinates (no qpos), which "
                f"the default joint formulation of model '{model.name}' does not take; pass "
                'the formulation it was solved in (formulation="rA", say), or solve it in '
                "joint coordinates (static_equilibrium(model) without formulation=)"
            )
    form = get_formulation(formulation)
    if form.runs_in_joint_space:
        if absolute_only:
            refused = absolute_refusals(absolute_only)
            raise ValueError(refusal_message(refused, model, where="linearize", named=True))
        return _joint_linearization(model, form, state, jnp.asarray(t, jnp.float64), u_star,
                                    coordinates)  # fmt: skip
    model, _ = rows_for_run(model, redundant, where="linearize")
    if "index1_blocks" not in form.capabilities():
        able = sorted(n for n, c in FORMULATIONS.items() if "index1_blocks" in c.capabilities())
        raise ValueError(
            f"linearize: formulation {form.name!r} has no index-1 form; use one of "
            f"{able + ['joint']}"
        )
    t = jnp.asarray(t, jnp.float64)
    r, A, rdot, omega = _operating_point(model, state, t, inputs, form)
    q_star, v_star, G = _point(model, form, r, A, rdot, omega, t)
    N, P = _null_space(G)
    N, P = jnp.asarray(N), jnp.asarray(P)
    zeta_star = N.T @ v_star.reshape(-1)
    A_mat, B_mat = _jacobians(model, form, q_star, t, N, P, zeta_star, u_star)
    basis = N
    if coordinates == "joint":
        A_mat, B_mat, basis = _in_joint_coordinates(
            model, form, q_star, t, N, P, zeta_star, u_star, B_mat
        )
    return Linearization(
        A_mat, B_mat, basis, r, A, rdot, omega, u_star, t, body_names=model.body_names,
        formulation=form.name, coordinates=coordinates,
        coordinate_names=model.joint_names if coordinates == "joint" else (),
    )  # fmt: skip


def _joint_linearization(model, form, state, t, u_star, coordinates) -> Linearization:
    rows = independent_loop_rows(model)
    tree, loops = model_tree(model, rows)
    if coordinates == "joint" and loops is not None:
        raise ValueError(
            f"linearize: coordinates='joint' in formulation 'joint' needs a tree without "
            f"loops (model '{model.name}' closes {len(loops.rows)} loop rows, so its joint "
            "coordinates are not independent): use coordinates='tangent'"
        )
    if state is None:
        state = static_equilibrium(model, formulation=form.name, t=t)
    if isinstance(state, Equilibrium):
        if state.qpos is None:
            raise ValueError(
                "linearize: formulation 'joint' needs an Equilibrium found in joint "
                "coordinates (static_equilibrium(model, formulation='joint'))"
            )
        qpos, qvel = state.qpos, jnp.zeros(tree.nv)
    elif isinstance(state, str) and state == "initial":
        qpos, qvel = tree.qpos_init, tree.qvel_init
    else:
        raise ValueError(
            "linearize: state must be None (the static equilibrium), an Equilibrium "
            f"(static_equilibrium) or 'initial' (the model's initial state), got {state!r}"
        )
    N, P = (jnp.asarray(x) for x in loop_bases(tree, loops, qpos, t))
    A_mat, B_mat, basis, r, A, rdot, omega = _joint_jacobians_at(
        model, tree, loops, qpos, qvel, t, N, P, u_star
    )
    return Linearization(
        A_mat, B_mat, basis, r, A, rdot, omega, u_star, t, qpos, qvel,
        body_names=model.body_names, formulation=form.name, coordinates=coordinates,
        coordinate_names=_dof_names(tree) if loops is None else (),
    )  # fmt: skip


def _dof_names(tree) -> tuple[str, ...]:
    """One name per velocity coordinate: a hinge's or slide's own, a ball's or free
    joint's with a component suffix."""
    names = []
    for name, jtype in zip(tree.joint_names, tree.joint_type, strict=True):
        nv = JointType(jtype).nv
        if nv == 1:
            names.append(name)
        else:
            parts = ("x", "y", "z", "rx", "ry", "rz") if nv == 6 else ("rx", "ry", "rz")
            names.extend(f"{name}.{c}" for c in parts)
    return tuple(names)


@eqx.filter_jit
def _joint_jacobians_at(model, tree, loops, qpos, qvel, t, N, P, u_star):
    rates, state = minimal_rates(model, tree, loops, qpos, t, N, P)
    f = N.shape[1]
    x0 = jnp.concatenate([jnp.zeros(f, qpos.dtype), N.T @ qvel])
    A_mat = jax.jacfwd(rates)(x0, u_star)
    B_mat = None if u_star is None else jax.jacfwd(rates, argnums=1)(x0, u_star)
    basis = body_displacement_basis(tree, qpos, state, f)
    p = poses(tree, qpos)
    rdot, omega = body_velocities(tree, p, qvel)
    return A_mat, B_mat, basis, p.c, p.R, rdot, omega


@eqx.filter_jit
def _point(model, form, r, A, rdot, omega, t):
    """(q*, v*, G at q*) in the formulation's coordinates, as one compiled program: op by op
    each primitive compiled on its own (about 55 small programs, several CPU-seconds for a
    fresh model)."""
    zero = jnp.zeros_like(r)
    q_star, v_star, _ = to_formulation(form, r, A, rdot, omega, zero, zero)
    return q_star, v_star, form.position_terms(model, q_star, t)[1][: model.nc]


def _rates(model, form, q_star, t, N, P):
    """The map (x = (z, zeta), u) -> x_dot of the module docstring, and x -> (q, v)."""
    nb, ts = model.nb, form.tangent_size
    nc = model.nc
    f = N.shape[1]

    def state(x):
        z, zeta = x[:f], x[f:]
        xi = _closed(model, form, q_star, t, N, P, z)
        q = form.retract(q_star, xi)
        G, nu_ = _velocity_terms(model, form, q, t, nc)
        if P.shape[1]:
            y = jnp.linalg.solve(G @ P, nu_ - G @ (N @ zeta))
            v = N @ zeta + P @ y
        else:
            v = N @ zeta
        return xi, q, v

    def rates(x, u):
        xi, q, v = state(x)
        m = model if u is None else with_controls(model, u)
        a = index1_dynamics(m, form, q, v.reshape(nb, ts), t).a.reshape(-1)
        # T(xi)^-1 v body by body (T is block diagonal: one batched solve, no dense T)
        T = form.tangent_map(xi)
        z_dot = N.T @ jnp.linalg.solve(T, v.reshape(nb, ts, 1)).reshape(-1)
        return jnp.concatenate([z_dot, N.T @ a])

    return rates, state


@eqx.filter_jit
def _jacobians(model, form, q_star, t, N, P, zeta_star, u_star):
    rates, _ = _rates(model, form, q_star, t, N, P)
    x0 = jnp.concatenate([jnp.zeros(N.shape[1]), zeta_star])
    A_mat = jax.jacfwd(rates)(x0, u_star)
    B_mat = None if u_star is None else jax.jacfwd(rates, argnums=1)(x0, u_star)
    return A_mat, B_mat


@eqx.filter_jit
def _joint_jacobians(model, form, q_star, t, N, P, zeta_star, u_star):
    """(D phi, d(D phi x_dot)/dx) at x*, phi: x -> (joint coordinates, their rates)."""
    rates, state = _rates(model, form, q_star, t, N, P)
    nb, ts = model.nb, form.tangent_size

    def phi(x):
        _, q, v = state(x)
        zero = jnp.zeros((nb, ts))
        r, A, rdot, omega = form.to_body_state(q, v.reshape(nb, ts), zero)[:4]
        theta, theta_dot, _ = coordinates_and_rates(model.joints, BodyState(r, A, rdot, omega))
        return jnp.concatenate([theta, theta_dot])

    def phi_dot(x):  # d/dt phi(x(t)) = D phi(x) x_dot
        return jax.jvp(phi, (x,), (rates(x, u_star),))[1]

    x0 = jnp.concatenate([jnp.zeros(N.shape[1]), zeta_star])
    return jax.jacfwd(phi)(x0), jax.jacfwd(phi_dot)(x0)


def _in_joint_coordinates(model, form, q_star, t, N, P, zeta_star, u_star, B_mat):
    """A, B and the position basis (n, f) in joint coordinates (see :func:`linearize`)."""
    # one coordinate per joint (revolute, translational): what coordinates_and_rates reads
    scalar = all(joint_kind(d.kind).nq == 1 for d in model.joints)
    if not model.joints or not scalar or len(model.joints) != N.shape[1]:
        kinds = sorted({d.kind for d in model.joints})
        raise ValueError(
            f"linearize: coordinates='joint' needs one revolute or translational joint per "
            f"degree of freedom (a tree of hinges and slides); model '{model.name}' has "
            f"{len(model.joints)} joints with coordinates ({kinds}) and {N.shape[1]} degrees "
            "of freedom: use coordinates='tangent'"
        )
    D, D_rates = _joint_jacobians(model, form, q_star, t, N, P, zeta_star, u_star)
    D_inv = jnp.linalg.inv(D)
    f = N.shape[1]
    A_mat = D_rates @ D_inv
    B_mat = None if B_mat is None else D @ B_mat
    # positions: theta depends on z alone, so body displacements per joint coordinate are
    # N (d theta / dz)^-1
    return A_mat, B_mat, N @ jnp.linalg.inv(D[:f, :f])


def _closed(model, form, q_star, t, N, P, z):
    """xi = N z + P w with Phi(q* (+) xi) = 0 (Newton from w = 0)."""
    if P.shape[1] == 0:
        return N @ z

    def phi(w):
        return form.residual(model, form.retract(q_star, N @ z + P @ w), t)[: model.nc]

    def newton(_, w):
        return w - jnp.linalg.solve(jax.jacfwd(phi)(w), phi(w))

    w = jax.lax.fori_loop(0, CLOSURE_ITERATIONS, newton, jnp.zeros(P.shape[1]))
    return N @ z + P @ w


def _velocity_terms(model, form, q, t, nc):
    """(G (nc, n), nu (nc,)) at q: the velocity equations G v = nu of the model's rows."""
    _, G = form.position_terms(model, q, t)
    nu_ = -jax.jacfwd(lambda s: form.residual(model, q, s))(t)
    return G[:nc], nu_[:nc]


def modes(model: Model, state=None, *, t: float = 0.0, inputs=None, formulation=None) -> Modes:
    """The natural modes of ``model`` about ``state`` (default: its static equilibrium;
    see :func:`linearize`): frequencies (Hz), damping ratios and mode shapes as body
    displacements (:class:`Modes`)."""
    lin = linearize(model, state, t=t, inputs=inputs, formulation=formulation)
    return modes_of(lin)


def modes_of(lin: Linearization) -> Modes:
    """The :class:`Modes` of a :class:`Linearization` (eigenvalues of its A)."""
    f = lin.dof
    values, vectors = np.linalg.eig(np.asarray(lin.A))
    order = np.argsort(np.abs(values), kind="stable")
    keep, seen = [], set()
    for k in order:  # one of each conjugate pair (the one with Im >= 0)
        if values[k].imag < 0 and np.any(np.isclose(values, np.conj(values[k]))):
            continue
        if k in seen:
            continue
        seen.add(k)
        keep.append(k)
    values, vectors = values[keep], vectors[:, keep]
    size = np.abs(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        damping = np.where(size > 0, -values.real / size, np.nan)
    z = vectors[:f]
    # phase: the largest entry real and positive, then the largest magnitude 1
    pivot = z[np.argmax(np.abs(z), axis=0), np.arange(z.shape[1])]
    z = np.real(z * (np.abs(pivot) / np.where(pivot == 0, 1, pivot)))
    z = z / np.maximum(np.max(np.abs(z), axis=0), 1e-300)
    shapes = np.asarray(lin.basis) @ z
    nb = len(lin.body_names)
    shapes = shapes.T.reshape(len(keep), nb, -1)
    scale = np.maximum(np.max(np.abs(shapes), axis=(1, 2)), 1e-300)
    return Modes(
        frequencies=size / (2 * np.pi),
        damping_ratios=damping,
        eigenvalues=values,
        shapes=shapes / scale[:, None, None],
        coordinates=(z / scale).T,
        linearization=lin,
    )


def mode_motion(
    model: Model, modes: Modes, k: int, *, amplitude: float | None = None, cycles: int = 2,
    samples_per_cycle: int = 48,
):  # fmt: skip
    """Mode ``k`` of ``modes`` (of ``model``) as a motion to animate: a Solution of the
    poses q* (+) xi(a sin(2 pi f t) z_k) over ``cycles`` periods, the constraints closed at
    every sample (so the joints hold at any amplitude), velocities and accelerations zero
    (a picture, not a dynamics run). ``amplitude`` a scales the mode's coordinates z_k
    (largest entry 1); default: the largest body translation 10 % of the model's size or
    the largest rotation 0.3 rad, whichever is smaller. A mode without oscillation (f = 0
    or a real eigenvalue) is drawn at 1 Hz. Pass it to :func:`jaxmbd.viz.animation.animate`
    (``jaxmbd animate MODEL --mode k`` does)."""
    if not 0 <= k < len(modes.frequencies):
        raise ValueError(f"mode_motion: mode {k} of {len(modes.frequencies)} (0 .. "
                         f"{len(modes.frequencies) - 1})")  # fmt: skip
    lin = modes.linearization
    form = get_formulation(lin.formulation)
    shape = modes.shapes[k]
    if amplitude is None:
        r0 = np.asarray(lin.r)
        size = max(float(np.ptp(r0, axis=0).max()) if len(r0) > 1 else 0.0,
                   float(np.abs(r0).max()), 0.1)  # fmt: skip
        translation = np.abs(shape[:, :3]).max()
        rotation = np.abs(shape[:, 3:]).max() if shape.shape[1] > 3 else 0.0
        limits = [0.1 * size / translation if translation > 0 else np.inf,
                  0.3 / rotation if rotation > 0 else np.inf]  # fmt: skip
        amplitude = float(min(limits)) if np.isfinite(min(limits)) else 0.1
    frequency = float(modes.frequencies[k])
    oscillates = frequency > 0 and abs(modes.eigenvalues[k].imag) > 0
    f = frequency if oscillates else 1.0
    n = cycles * samples_per_cycle
    t = np.arange(n + 1) / (samples_per_cycle * f)
    model = with_contact(model, "none", where="mode_motion")
    if lin.qpos is not None:  # found in joint coordinates: z is the linearisation's own
        rows = independent_loop_rows(model)
        tree, loops = model_tree(model, rows)
        N, P = (jnp.asarray(x) for x in loop_bases(tree, loops, lin.qpos, lin.t))
        r, A = _joint_mode_poses(model, rows, lin, N, P,
                                 amplitude * jnp.asarray(modes.coordinates[k]),
                                 jnp.sin(2 * np.pi * f * jnp.asarray(t)))  # fmt: skip
        return _poses_solution(model, t, r, A)
    model, _ = rows_for_run(model, "drop", where="mode_motion")
    zero = jnp.zeros_like(lin.r)
    q_star = to_formulation(form, lin.r, lin.A_body, zero, zero, zero, zero)[0]
    G = form.position_terms(model, q_star, lin.t)[1][: model.nc]
    N, P = (jnp.asarray(x) for x in _null_space(G))
    # z of the mode in this basis N (joint coordinates: basis = N (d theta / dz)^-1)
    z_k = N.T @ (jnp.asarray(lin.basis) @ jnp.asarray(modes.coordinates[k]))

    @jax.jit
    def pose(s):
        xi = _closed(model, form, q_star, lin.t, N, P, amplitude * s * z_k)
        q = form.retract(q_star, xi)
        ts = form.tangent_size
        return form.to_body_state(q, jnp.zeros((model.nb, ts)), jnp.zeros((model.nb, ts)))[:2]

    r, A = jax.vmap(pose)(jnp.sin(2 * np.pi * f * jnp.asarray(t)))
    return _poses_solution(model, t, r, A)


@eqx.filter_jit
def _joint_mode_poses(model, rows, lin, N, P, z_k, s):
    """Body poses at qpos* (+) delta(s z_k), the loops closed, for each sample of ``s``."""
    tree, loops = model_tree(model, rows)
    _, state = minimal_rates(model, tree, loops, lin.qpos, lin.t, N, P)

    def pose(s_):
        x = jnp.concatenate([s_ * z_k, jnp.zeros_like(z_k)])
        p = poses(tree, state(x)[1])
        return p.c, p.R

    return jax.vmap(pose)(s)


def _poses_solution(model, t, r, A):
    zeros = jnp.zeros_like(r)
    T = len(t)
    return Solution(
        jnp.asarray(t), r, A, zeros, zeros, zeros, zeros, jnp.zeros((T, model.nc)),
        jnp.zeros(T, jnp.int32), jnp.zeros(T, jnp.int32), jnp.zeros(T),
        body_names=model.body_names, constraint_names=model.constraint_names,
        joint_definitions=model.joints, marker_element=model.markers,
    )  # fmt: skip


__all__ = ["Linearization", "Modes", "linearize", "mode_motion", "modes", "modes_of"]
