"""Time steps in joint coordinates.

``rk``: the classical 4-stage Runge-Kutta method on the joints' manifolds as MuJoCo's
``mj_RungeKutta`` took it before MuJoCo 4.0: each stage's positions are
qpos_0 (+) h sum_j a_ij qvel_j (the retraction of :func:`jaxmbd.tree.integrate_positions`:
body-frame rotations for ball and free joints). ``rkmk``: the Munthe-Kaas RK4, fourth order
on the rotations too (:class:`RungeKutta4`), MuJoCo's RK4 step from 4.0 (its changelog,
4.0.0: the stages' angular velocities with the Runge-Kutta-Munthe-Kaas correction).
``euler``: MuJoCo's semi-implicit Euler step, qvel += h qacc with the joint damping taken
implicitly (M + h D), then qpos (+)= h qvel. Constraint rows: after each step the positions
and velocities are projected back onto the exact ones
(:func:`jaxmbd.joint_space.constraint_rows.project`). Actuator activations: these steps,
``implicit`` and ``implicitfast`` integrate them as MuJoCo's integrators integrate ``act``
(:attr:`~jaxmbd.joint_space.AbstractJointStepper.integrates_activations`; RK4 by its
stages, :func:`_activation_stages`)."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _config  # noqa: F401
from ..actuators import with_activation_state
from ..compiled.xla_flags import joint_loop_guard
from ..integrators import valid_pairs
from ..linear import small as small_kernels
from ..tree import integrate_positions
from ..tree._elementwise import mtv
from ..tree.kinematics import tangent_rates
from ._stepper_base import AbstractJointStepper, projected
from .constraint_rows import constraint_jacobian, constraint_terms, exact_part, solve_normal
from .dynamics import accelerations
from .hard_contact import JointMoreauJean
from .implicit_steppers import BackwardEulerJoint, GeneralizedAlphaJoint


class RungeKutta4(AbstractJointStepper):
    """The classical RK4 tableau on the joints' manifolds. ``munthe_kaas=False`` (``rk``):
    each stage's increment is h sum_j a_ij qvel_j, as MuJoCo's ``mj_RungeKutta`` before
    4.0, of second order on the rotations of ball and free joints; ``True`` (``rkmk``): the
    increments integrate the rates of :func:`jaxmbd.tree.kinematics.tangent_rates`
    (Munthe-Kaas RK4, Mueller & Terze eq. 37), of fourth order on SO(3) too, as MuJoCo's
    ``mj_RungeKutta`` from 4.0. The two are the same step for trees of hinges and slides."""

    munthe_kaas: bool = False
    #: The Butcher tableau: the classical RK4 ("rk4") only; the other formulations' ``rk``
    #: and ``rkmk`` take others, and a run that asks for one names its formulation.
    tableau: object = eqx.field(static=True, default="rk4")
    integrates_activations: ClassVar[bool] = True
    # the start, the stages and the end are one loop of :meth:`start_and_advance`
    pairs_step_ends: ClassVar[bool] = False

    def __check_init__(self):
        if not (isinstance(self.tableau, str) and self.tableau == "rk4"):
            name = "rkmk" if self.munthe_kaas else "rk"
            others = [f for f, i in valid_pairs() if i == name and f != "joint"]
            raise ValueError(
                f"formulation 'joint': its {name!r} steps the classical RK4 tableau only "
                f"(tableau='rk4'), not {self.tableau!r}; integrator {name!r} takes other "
                f"tableaus in formulations {others} (name one, e.g. formulation="
                f"{others[0]!r})"
            )

    @property
    def name(self) -> str:
        return "rkmk" if self.munthe_kaas else "rk"

    def activation_after(self, model, h):
        """The activations (nu,) at the step's end: the RK4 update of MuJoCo's
        ``mj_RungeKutta`` (:func:`_activation_stages`)."""
        if not _activations_integrated(model):
            return super().activation_after(model, h)
        return _activation_stages(model.actuators, h)[1]

    def _stages(self, model, tree, loops, qpos, qvel, t, h, table, first):
        """The stages of ``table`` (rows c_i, weight b_i / 6 times 6) as one scan from the
        carry ``first`` (the previous stage's rates and accelerations, their weighted sums):
        the accelerations' code is compiled once, not once per stage. Each stage's full
        accelerations are its output. A stage at c = 0 is the step's start itself. A table
        of three columns marks the step's end by a third entry 1 (weight 0): that row's
        state is the step's result (the weighted sums are complete there), its
        accelerations the end's. Where the model's
        activations are a state, each stage's forces read the stage's
        (:func:`_activation_stages`)."""

        def rates(increment, v):
            return tangent_rates(tree, increment, v) if self.munthe_kaas else v

        ends = len(table[0]) == 3

        def stage(carry, row):
            k_dir, a_dir, k_sum, a_sum = joint_loop_guard(carry)
            c, weight = row["table"][0], row["table"][1]
            start = c == 0.0
            increment, dv = c * h * k_dir, c * h * a_dir
            if ends:  # the step's end: the weighted sums' increments
                end = row["table"][2] == 1.0
                increment = jnp.where(end, (h / 6.0) * k_sum, increment)
                dv = jnp.where(end, (h / 6.0) * a_sum, dv)
            # at c = 0 the start's state bit for bit (the retraction of a zero increment
            # renormalises quaternions)
            q = jnp.where(start, qpos, integrate_positions(tree, qpos, increment, 1.0))
            v = jnp.where(start, qvel, qvel + dv)
            k = jnp.where(start, qvel, rates(increment, v))
            m = model if "act" not in row else with_activation_state(model, row["act"], h)
            acc = accelerations(m, tree, loops, q, v, t + c * h, step=h)
            a = acc.qacc
            return (k, a, k_sum + weight * k, a_sum + weight * a), acc

        table = jnp.asarray(table, qvel.dtype)
        rows = {"table": table}
        if _activations_integrated(model):  # the stages' activations: the table's last rows
            acts = _activation_stages(model.actuators, h)[0]
            if ends:  # the end's accelerations read the step's model, as :meth:`finish`'s
                acts = jnp.concatenate([acts, model.actuators.activation[None]])
            rows["act"] = acts[acts.shape[0] - table.shape[0] :]
        (_, _, k_sum, a_sum), stages = jax.lax.scan(stage, first, rows)
        return (
            integrate_positions(tree, qpos, (h / 6.0) * k_sum, 1.0),
            qvel + (h / 6.0) * a_sum,
            stages,
        )

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        # stages 2-4 from the start's accelerations ``acc``
        first = (qvel, acc.qacc, qvel, acc.qacc)
        table = [[0.5, 2.0], [0.5, 2.0], [1.0, 1.0]]
        return self._stages(model, tree, loops, qpos, qvel, t, h, table, first)[:2]

    def start_and_advance(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        # MuJoCo's RK4 stages start their solves cold here (``warm`` is not used)
        # the start, the three stages and the end's accelerations as the rows of one scan:
        # the step's one copy of the accelerations' code (a projection onto constraint rows
        # comes between: the default's three copies)
        if loops is not None:
            return super().start_and_advance(model, tree, loops, qpos, qvel, t, h)
        zero = jnp.zeros_like(qvel)
        table = [[0.0, 1.0, 0.0], [0.5, 2.0, 0.0], [0.5, 2.0, 0.0], [1.0, 1.0, 0.0],
                 [1.0, 0.0, 1.0]]  # fmt: skip
        qpos_, qvel_, stages = self._stages(model, tree, loops, qpos, qvel, t, h, table,
                                            (zero, zero, zero, zero))  # fmt: skip
        start = jax.tree_util.tree_map(lambda x: x[0], stages)
        end = jax.tree_util.tree_map(lambda x: x[-1], stages)
        return start, qpos_, qvel_, end

    def start_and_step(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        # all four stages in the scan, the first at c = 0: the run's one copy of the
        # accelerations' code gives the start's too (the first stage's output)
        zero = jnp.zeros_like(qvel)
        table = [[0.0, 1.0], [0.5, 2.0], [0.5, 2.0], [1.0, 1.0]]
        qpos_, qvel_, stages = self._stages(model, tree, loops, qpos, qvel, t, h, table,
                                            (zero, zero, zero, zero))  # fmt: skip
        start = jax.tree_util.tree_map(lambda x: x[0], stages)
        return (start, *projected(tree, loops, qpos_, qvel_, t + h))


def _activations_integrated(model) -> bool:
    """Whether ``model``'s actuators have activation dynamics held as a state
    (:func:`jaxmbd.actuators.with_activation_state`)."""
    element = model.actuators
    return element is not None and element.has_dynamics and element.activation_state


#: MuJoCo's RK4 tableau (engine_forward.c, ``RK4_A``, ``RK4_B``): the stages' c_i and b_i.
_RK4_C = (0.0, 0.5, 0.5, 1.0)
_RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def _activation_stages(element, h):
    """MuJoCo's ``mj_RungeKutta`` on the activations ``act``, which it integrates with the
    mechanism's state: the four stages' activations (4, nu), a_1 = a_0 and
    a_i = a_0 + h (c_i F_{i-1}) with F_i = act_dot(a_i) (unclamped), and the step's end,
    ``mj_nextActivation`` of a_0 at the rate sum_i b_i F_i (clamped to ``act_range``), in
    MuJoCo's order of operations. The rates depend on the activations and the held controls
    alone (:meth:`~jaxmbd.actuators.Actuators.activation_rate`), not on the mechanism, so
    they come before the mechanism's stages."""
    a0 = element.activation
    stages, rates = [a0], [element.activation_rate(a0)]
    for c in _RK4_C[1:]:
        a = a0 + (c * rates[-1]) * h
        stages.append(a)
        rates.append(element.activation_rate(a))
    mean = jnp.zeros_like(a0)
    for b, rate in zip(_RK4_B, rates, strict=True):
        mean = mean + rate * b
    return jnp.stack(stages), element.activation_after(mean, h)


class SemiImplicitEuler(AbstractJointStepper):
    name: ClassVar[str] = "euler"
    integrates_activations: ClassVar[bool] = True

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        return accelerations(model, tree, loops, qpos, qvel, t, damping_step=h, warm=warm)

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        qvel = qvel + h * acc.qacc
        return integrate_positions(tree, qpos, h * qvel, 1.0), qvel


class LinearlyImplicitEuler(AbstractJointStepper):
    """Backward Euler linearised once per step (a Rosenbrock-Euler step, MuJoCo's
    ``implicit`` family): with the applied forces' exact Jacobians D = df/dqvel and
    K = df/dq (tangent) at the step's start (autodiff of the force elements: contact,
    friction, joint damping and springs, actuators),
    (M - h D - h^2 K) (qvel+ - qvel) = h (f - C) + h^2 K qvel, then qpos+ = qpos (+) h qvel+.
    Stiff contact and the steep friction law stay stable at robot time steps where the
    explicit steps diverge; exact constraint rows add G qvel+ = nu by the Schur complement,
    soft rows their force of the step's start.

    ``implicit`` takes both Jacobians (the contact's stiffness too: a landing hopper at
    h = 5 ms comes to rest), each from a forward-mode evaluation of nv tangents
    (:func:`~jaxmbd.joint_space.dynamics.accelerations`); ``implicitfast`` only D
    (MuJoCo's ``implicitfast``)."""

    #: Whether K enters (``implicit``) or only D (``implicitfast``).
    position_jacobian: bool = True
    integrates_activations: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return "implicit" if self.position_jacobian else "implicitfast"

    def start_accelerations(self, model, tree, loops, qpos, qvel, t, h, *, warm=None):
        return accelerations(model, tree, loops, qpos, qvel, t, step=h, velocity_jacobian=True,
                             position_jacobian=self.position_jacobian, warm=warm)  # fmt: skip

    def step(self, model, tree, loops, qpos, qvel, acc, t, h):
        D = acc.velocity_jacobian
        K = acc.position_jacobian if self.position_jacobian else jnp.zeros_like(D)
        # not symmetric (friction, K of a follower force): LU
        lu, perm = small_kernels.lu(acc.mass - h * D - h * h * K)
        # MuJoCo's soft rows enter with their force at the start (qfrc_constraint)
        rhs = acc.rhs if acc.constraint_force is None else acc.rhs + acc.constraint_force
        dv = small_kernels.lu_solve(lu, perm, h * rhs + h * h * small_kernels.matvec(K, qvel))
        if loops is not None and loops.soft.any() and acc.constraint_force is None:
            # soft rows: their force from the start's accelerations (found with M), as
            # MuJoCo's implicit steps take qfrc_constraint into (M - h D) qacc = ...; with
            # MuJoCo's constraint model they are among its rows, in constraint_force
            _, G = constraint_jacobian(loops, tree, qpos, t)
            soft_lam = jnp.where(jnp.asarray(loops.soft), acc.lam, 0.0)
            dv = dv - small_kernels.lu_solve(lu, perm, h * mtv(G, soft_lam))
        exact = exact_part(loops)
        if exact is not None:
            _, G, nu, _ = constraint_terms(exact, tree, qpos, qvel, t + h)
            Y = small_kernels.lu_solve(lu, perm, G.T)
            lam = solve_normal(exact, G, Y.T, small_kernels.matvec(G, qvel + dv) - nu)
            dv = dv - small_kernels.matvec(Y, lam)
        qvel = qvel + dv
        return integrate_positions(tree, qpos, h * qvel, 1.0), qvel


def step_state(stepper: AbstractJointStepper, model, tree, loops, qpos, qvel, acc, t, h):
    """One time step from (qpos, qvel) at t with its accelerations ``acc``: (qpos, qvel,
    accelerations) at t + h, projected onto the loops (``stepper.advance``)."""
    return stepper.advance(model, tree, loops, qpos, qvel, acc, t, h)


#: The joint formulation's time steps by name: each name's stepper.
JOINT_STEPPERS: dict[str, AbstractJointStepper] = {
    "rk": RungeKutta4(munthe_kaas=False),
    "rkmk": RungeKutta4(munthe_kaas=True),
    "euler": SemiImplicitEuler(),
    "implicit": LinearlyImplicitEuler(position_jacobian=True),
    "implicitfast": LinearlyImplicitEuler(position_jacobian=False),
    "gen_alpha": GeneralizedAlphaJoint(),
    "backward_euler": BackwardEulerJoint(),
    "moreau_jean": JointMoreauJean(),
}


def get_stepper(integrator) -> AbstractJointStepper:
    if isinstance(integrator, AbstractJointStepper):
        return integrator
    stepper = JOINT_STEPPERS.get(integrator) if isinstance(integrator, str) else None
    if stepper is None:
        raise ValueError(
            f"formulation 'joint' has no integrator {getattr(integrator, 'name', integrator)!r};"
            f" choose one of {sorted(JOINT_STEPPERS)}"
        )
    return stepper
