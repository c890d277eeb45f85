"""``simulate(model, formulation="joint")``: the model's kinematic tree stepped in joint
coordinates, one ``lax.scan`` under ``jit``; the Solution holds the bodies' states as every
formulation's does, and ``qpos``/``qvel`` in the tree's (MuJoCo's) layout."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from .._checks import finish, is_traced, solution_from_outputs
from .._results import RESULTS
from ..actuators import policy_controls, with_controls
from ..model import Model
from ..tree import KinematicTree, assemble, body_velocities
from .dynamics import Accelerations, body_accelerations
from .from_model import tree_of_model
from .loops import Loops, independent_rows, loops_of, project
from .steppers import AbstractJointStepper, get_stepper

NONFINITE = int(RESULTS.nonfinite._value)


def model_tree(model: Model, rows=None) -> tuple[KinematicTree, Loops | None]:
    """The model's kinematic tree (read from its file, or derived from its joints) and its
    loop-closing rows (``rows``: those of them to keep, see :func:`independent_loop_rows`;
    None: all)."""
    if model.tree is not None:
        tree, closing = model.tree, None
    else:
        built = tree_of_model(model)
        tree, closing = built.tree, built.loop_rows
    if rows is None:
        return tree, loops_of(model, tree, closing)
    return tree, loops_of(model, tree, rows, independent=True)


def independent_loop_rows(model: Model):
    """The independent loop rows at the model's initial state, or None where the model's
    values are traced (then every row is kept, their multipliers by least squares)."""
    if is_traced(model):
        return None
    tree, loops = model_tree(model)
    if loops is None:
        return None
    return independent_rows(loops, tree, tree.qpos_init)


def _outputs(model, tree, loops, qpos, qvel, acc: Accelerations):
    p = acc.poses
    rdot, omega = body_velocities(tree, p, qvel)
    rddot, omegadot = body_accelerations(tree, p, qvel, acc.qacc)
    if loops is None:
        lam = jnp.zeros(model.nc, qvel.dtype)
    else:
        rows = np.asarray(loops.rows, dtype=int)
        others = np.setdiff1d(np.arange(model.nc), rows)
        zeros = jnp.zeros(others.size, qvel.dtype)
        lam = assemble(model.nc, [(others, zeros), (rows, acc.lam)])
    finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
    finite = finite & jnp.all(jnp.isfinite(acc.qacc))
    status = jnp.where(finite, 0, NONFINITE).astype(jnp.int32)
    iterations = jnp.zeros((), jnp.int32)
    return (p.c, p.R, rdot, omega, rddot, omegadot, lam, iterations, status,
            acc.loop_residual, qpos, qvel)  # fmt: skip


def _policy_controls(model, tree, policy, t, qpos, qvel, acc, k):
    """The policy's controls at a step's start. It observes (qpos, qvel) concatenated
    (MuJoCo's state, every joint of the tree), or the model's sensors where it has them."""
    if model.sensors is None:
        u = jnp.asarray(policy(t, jnp.concatenate([qpos, qvel])))
        if u.shape != (model.nu,):
            raise ValueError(
                f"simulate: policy(t, observation) returned shape {u.shape}, expected "
                f"({model.nu},) (actuators {model.actuators.actuator_names})"
            )
        return u
    p = acc.poses
    rdot, omega = body_velocities(tree, p, qvel)
    return policy_controls(model, policy, t, (p.c, p.R, rdot, omega), step=k)


@eqx.filter_jit
def run_joint_space(model: Model, stepper: AbstractJointStepper, n: int, h, controls=None,
                    policy=None, rows=None):  # fmt: skip
    """The per-step outputs (t = 0..n h) of ``n`` steps (see :func:`_outputs`); ``rows``:
    the loop rows to keep (static; :func:`independent_loop_rows`)."""
    tree, loops = model_tree(model, rows)
    qpos, qvel = tree.qpos_init, tree.qvel_init
    t0 = jnp.zeros((), qvel.dtype)
    if loops is not None:
        qpos, qvel = project(loops, tree, qpos, qvel, t0, iterations=8)

    def stepped_model(k, qpos, qvel, acc):
        if controls is not None:
            return with_controls(model, controls[k])
        if policy is not None:
            return with_controls(model, _policy_controls(model, tree, policy, k * h, qpos,
                                                         qvel, acc, k))  # fmt: skip
        return model

    first = stepped_model(0, qpos, qvel, None) if policy is None else model
    acc = stepper.start_accelerations(first, tree, loops, qpos, qvel, t0, h)
    out0 = _outputs(model, tree, loops, qpos, qvel, acc)

    def step(carry, k):
        qpos, qvel, acc = carry
        t = k * h
        m_k = stepped_model(k, qpos, qvel, acc)
        if controls is not None or policy is not None:
            acc = stepper.start_accelerations(m_k, tree, loops, qpos, qvel, t, h)
        qpos, qvel = stepper.step(m_k, tree, loops, qpos, qvel, acc, t, h)
        qpos, qvel, acc = stepper.finish(m_k, tree, loops, qpos, qvel, t + h, h)
        return (qpos, qvel, acc), _outputs(model, tree, loops, qpos, qvel, acc)

    _, outs = jax.lax.scan(step, (qpos, qvel, acc), jnp.arange(n))
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), out0, outs)


def simulate_joint_space(model: Model, form, *, integrator, n: int, h, controls, policy,
                         throw: bool, options: dict):  # fmt: skip
    """:func:`jaxmbd.simulate` for ``formulation="joint"`` (its options: none yet)."""
    if options:
        raise ValueError(
            f"formulation 'joint': integrator options {sorted(options)} are not used by its "
            "explicit steps"
        )
    if integrator is None:
        integrator = form.default_integrator if model.contacts is None else form.contact_integrator
    if getattr(integrator, "name", integrator) == "moreau_jean":
        raise ValueError(
            "simulate: hard contact and hard limits (moreau_jean) run in the absolute "
            "formulations: pass formulation='rA' (joint coordinates: compliant contact and "
            "limits)"
        )
    stepper = get_stepper(integrator)
    h_arr = jnp.asarray(h, dtype=jnp.float64)
    run_model = (
        model
        if model.sensors is None or policy is not None
        else dataclasses.replace(model, sensors=None)
    )
    rows = independent_loop_rows(model)
    outs = run_joint_space(run_model, stepper, n, h_arr, controls, policy, rows)
    tree, _ = model_tree(model)
    sol = solution_from_outputs(model, form, h_arr, outs, integrator=stepper.name,
                                linear_solver="cholesky", tree=tree)  # fmt: skip
    traced = is_traced(model) or is_traced((controls, policy))
    return finish(model, sol, what="dynamics", throw=throw, traced=traced)
